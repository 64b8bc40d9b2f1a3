/* SPDX-License-Identifier: MIT */
/*
 * test_config_e2e - the configuration file drives real daemons (real etcd,
 * the "stuck" test plugin in leasehold-worker children, leaseholdctl):
 *  - every kind of bad file (YAML syntax, unknown key, wrong type, bad
 *    value, duplicate key, alias, bad per-plugin key or value, a flag-only
 *    key, a missing file) stops the daemon with exit 2 and "FILE:LINE: ..."
 *    before it touches etcd (the etcd revision does not move);
 *  - --check-config: exit 0 and the effective settings, exit 2 on a bad
 *    file, flags override the file there too;
 *  - a daemon started with only --config takes its node id, prefix, dirs,
 *    control socket and a per-plugin callback timeout from the file (the
 *    member key and the timeout's log line show it);
 *  - leaseholdctl finds that daemon's socket from the file (--config, no
 *    --control); $LEASEHOLD_CONTROL beats the file;
 *  - SIGHUP: a new log level and a new per-plugin timeout take effect (the
 *    next instance of the plugin runs with it), a changed prefix is reported
 *    as needing a restart and ignored, a broken file is refused as a whole
 *    and the daemon keeps running with its settings;
 *  - a flag beats the file: --node-id over node-id.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "testutil.h"

#define PLUGIN "stuck"

static struct harness_etcd *g_etcd;
static struct tu T;
static char g_worker[1024];

/* write text to path (whole file, replaced by rename: a reload never sees
 * half a file) */
static void write_file(const char *path, const char *text)
{
	char tmp[1100];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	CHECK(f != NULL);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
	CHECK(rename(tmp, path) == 0);
}

/* the etcd revision now, by a write of our own (so "unchanged" is checkable:
 * the next call returns exactly one more when nobody else wrote) */
static int64_t etcd_revision(void)
{
	int64_t rev = tu_put(&T, "/cfgtest-probe", "x", 1);
	CHECK(rev > 0);
	return rev;
}

/* run leasehold with args to its exit (at most 30 s); returns the exit code,
 * its stderr in *ret_log (malloc'd) */
static int run_daemon(struct host *h, const char *const *args, char **ret_log)
{
	long from = host_log_size(h);
	host_start_args(h, args, NULL);
	CHECK_INT_EQ(host_wait(h, 30000), 0);
	*ret_log = host_log_since(h, from);
	return h->exit_status;
}

/* ---- bad files ---- */

struct bad_case {
	const char *name, *text;
	int line;           /* in text; the file has two etcd lines before it */
	const char *expect; /* after "FILE:LINE: " */
	bool raw;           /* the file is text alone */
};

static void test_bad_files_exit_2_with_file_line_before_etcd(void)
{
	static struct host H;
	host_setup(&H, harness_dir(g_etcd), "bad");
	static const struct bad_case cases[] = {
		{"syntax", "node-id: a\nttl: [5\nprefix: /x\n", 3, "YAML syntax: ", false},
		{"unknown key", "node-id: a\n\nbogus-key: 1\n", 3, "unknown key 'bogus-key'", false},
		{"wrong type", "node-id: a\nttl:\n  seconds: 5\n", 3,
		 "ttl takes a single value, not a mapping", false},
		{"wrong type list", "node-id: [a, b]\n", 1, "node-id takes a single value, not a list",
		 false},
		{"bad value", "node-id: a\nttl: 1\n", 2, "ttl: --ttl must be whole seconds", false},
		{"bad duration", "reconcile-wait: soon\n", 1, "reconcile-wait: bad --reconcile-wait",
		 false},
		{"duplicate key", "ttl: 5\nnode-id: a\nttl: 6\n", 3,
		 "duplicate key 'ttl' in the file (first on line 3)", false},
		{"no value", "node-id:\n", 1, "node-id needs a value", false},
		{"alias", "x: &a 5\nttl: *a\n", 2, "aliases", false},
		{"flag only", "check-config: yes\n", 1, "'check-config' is a command-line flag only",
		 false},
		{"unknown plugin key", "plugins:\n  stuck:\n    colour: red\n", 3,
		 "unknown key 'colour' in plugins: stuck", false},
		{"bad plugin value", "plugins:\n  stuck:\n    isolation: vm\n", 3,
		 "plugins: stuck: isolation: --plugin-isolation takes NAME=thread|process", false},
		{"bad plugin timeout",
		 "plugins:\n  stuck:\n    callback-timeout:\n      reconcile: 5s\n      nap: 1s\n", 5,
		 "plugins: stuck: callback-timeout: 'nap' is not a callback", false},
		{"duplicate plugin",
		 "plugins:\n  stuck: {isolation: thread}\n  stuck: {isolation: process}\n", 3,
		 "duplicate key 'stuck' in plugins", false},
		{"not a mapping", "- ttl\n", 1, "the file must be a mapping", true},
		{"two documents", "ttl: 5\n---\nttl: 6\n", 2, "the file must hold one YAML document",
		 true},
	};
	char path[700], etcd_lines[600];
	snprintf(path, sizeof(path), "%s/bad.conf", H.dir);
	/* the files name a live etcd and a prefix: a daemon that got past the
	 * file would write there at once */
	snprintf(etcd_lines, sizeof(etcd_lines), "etcd: %s\nprefix: /cfgbad\n",
		 harness_etcd_urls(g_etcd));
	int64_t rev = etcd_revision();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];
		char text[1400], expect[900];
		snprintf(text, sizeof(text), "%s%s", c->raw ? "" : etcd_lines, c->text);
		write_file(path, text);
		snprintf(expect, sizeof(expect), "%s:%d: %s", path, c->line + (c->raw ? 0 : 2),
			 c->expect);
		const char *const args[] = {"--config", path, NULL};
		char *log;
		int code = run_daemon(&H, args, &log);
		if (code != 2 || !strstr(log, expect)) {
			fprintf(stderr, "case %s: exit %d, stderr:\n%s\nwanted exit 2 and \"%s\"\n",
				c->name, code, log, expect);
			exit(1);
		}
		fprintf(stderr, "  %s: %s", c->name, strstr(log, expect));
		free(log);
	}
	/* a missing --config file is an error too (the default file is optional) */
	const char *const missing[] = {"--config", "/nonexistent/leasehold.conf", NULL};
	char *log;
	CHECK_INT_EQ(run_daemon(&H, missing, &log), 2);
	CHECK(strstr(log, "/nonexistent/leasehold.conf: cannot open") != NULL);
	free(log);
	/* nothing was written in between: the revision moved by our probe only */
	CHECK_INT_EQ(etcd_revision(), rev + 1);
	struct etcd_kv **kvs = NULL;
	CHECK_INT_EQ(tu_list(&T, "/cfgbad", &kvs), 0);
	tu_list_free(kvs, 0);
}

/* ---- --check-config ---- */

static void test_check_config_prints_effective_settings(void)
{
	static struct host H;
	host_setup(&H, harness_dir(g_etcd), "check");
	char path[700];
	snprintf(path, sizeof(path), "%s/check.conf", H.dir);
	write_file(path, "# a comment\n"
			 "node-id: from-file\n"
			 "role: [alpha, beta]\n"
			 "plugins:\n"
			 "  stuck:\n"
			 "    isolation: thread\n"
			 "    callback-timeout: {reconcile: 2s, init: 1s}\n");
	const char *const args[] = {"--config", path, "--check-config", "--role", "gamma", NULL};
	/* stdout is the settings: read it through the log (stdout and stderr) */
	char *log;
	CHECK_INT_EQ(run_daemon(&H, args, &log), 0);
	fprintf(stderr, "%s", log);
	CHECK(strstr(log, "node-id: 'from-file'\n") != NULL);
	CHECK(strstr(log, "role: ['gamma']  # from a flag\n") != NULL); /* the flag's list wins */
	CHECK(strstr(log, "plugin-isolation: ['stuck=thread']\n") != NULL);
	CHECK(strstr(log, "callback-timeout: ['stuck:reconcile=2s', 'stuck:init=1s']\n") != NULL);
	free(log);
	write_file(path, "node-id: a/b\n");
	CHECK_INT_EQ(run_daemon(&H, args, &log), 2);
	CHECK(strstr(log, ":1: node-id: --node-id must be 1..128 bytes without '/'") != NULL);
	free(log);
}

/* ---- a daemon driven by its file; SIGHUP ---- */

static struct host D;
static char g_conf[700];

static const char *conf_text(const char *prefix, const char *level, const char *timeout)
{
	static char text[4096];
	snprintf(text, sizeof(text),
		 "# leasehold test configuration\n"
		 "etcd:\n"
		 "  - %s\n"
		 "node-id: cfg-node\n"
		 "prefix: %s\n"
		 "ttl: 3\n"
		 "plugin-dir: %s\n"
		 "runtime-dir: %s/run\n"
		 "control: %s\n"
		 "http: none\n"
		 "reconcile-wait: 0s\n"
		 "reconcile-interval: 1h\n"
		 "shutdown-timeout: 3s\n"
		 "isolation: process\n"
		 "worker: %s\n"
		 "log-level: %s\n"
		 "plugins:\n"
		 "  stuck:\n"
		 "    callback-timeout:\n"
		 "      reconcile: %s\n",
		 harness_etcd_urls(g_etcd), prefix, D.plugin_dir, D.dir, D.control, g_worker,
		 level, timeout);
	return text;
}

static const struct host *g_h;
static const char *g_text;
static long g_from;

static bool p_log(void *arg)
{
	(void)arg;
	return host_log_count(g_h, g_from, g_text) > 0;
}

static void wait_log(const struct host *h, long from, const char *text, int ms)
{
	g_h = h;
	g_text = text;
	g_from = from;
	tu_wait(&T, p_log, NULL, ms, text);
}

static bool p_key(void *arg)
{
	size_t len;
	uint8_t *v = tu_get(&T, arg, &len);
	free(v);
	return v != NULL;
}

static void wait_key(const char *key, int ms)
{
	tu_wait(&T, p_key, (void *)(uintptr_t)key, ms, key);
}

static void test_file_drives_daemon(void)
{
	host_setup(&D, harness_dir(g_etcd), "cfgd");
	snprintf(g_conf, sizeof(g_conf), "%s/leasehold.conf", D.dir);
	write_file(g_conf, conf_text("/cfga", "info", "1500ms"));
	host_install_file(&D, built_test_plugin("stuck-1.0.0"), "stuck.so", 0644);
	const char *const args[] = {"--config", g_conf, NULL};
	/* both releases hang in reconcile: each instance shows its limit */
	const char *const env[] = {"LH_STUCK_1_0_0=hang:reconcile", "LH_STUCK_1_1_0=hang:reconcile",
				   NULL};
	host_start_args(&D, args, env);
	host_wait_control(&D, 30000);
	/* the start-up line names the file */
	wait_log(&D, 0, "config file ", 10000);
	CHECK(host_log_count(&D, 0, g_conf) > 0);
	/* the node id and the prefix came from the file */
	wait_key("/cfga/" PLUGIN "/members/cfg-node", 30000);
	/* the per-plugin timeout came from the file */
	wait_log(&D, 0, "callback reconcile exceeded its timeout of 1500 ms", 30000);
}

static void test_leaseholdctl_finds_socket_from_file(void)
{
	struct ctl_out o;
	const char *const args[] = {"--config", g_conf, "plugins", NULL};
	ctl_run(&o, NULL, args);
	if (o.status != 0)
		fprintf(stderr, "%s%s", o.out, o.err);
	CHECK_INT_EQ(o.status, 0);
	CHECK(strstr(o.out, PLUGIN) != NULL);
	ctl_out_free(&o);
	/* $LEASEHOLD_CONTROL beats the file (the same order as the daemon's) */
	CHECK(setenv("LEASEHOLD_CONTROL", "ipc:///nonexistent/leasehold.sock", 1) == 0);
	ctl_run(&o, NULL, args);
	CHECK(unsetenv("LEASEHOLD_CONTROL") == 0);
	CHECK_INT_EQ(o.status, 3); /* no socket file */
	CHECK(strstr(o.err, "/nonexistent/leasehold.sock") != NULL);
	ctl_out_free(&o);
	/* a broken file is named */
	char bad[800];
	snprintf(bad, sizeof(bad), "%s/ctl-bad.conf", D.dir);
	write_file(bad, "control: [a\n");
	const char *const bad_args[] = {"--config", bad, "plugins", NULL};
	ctl_run(&o, NULL, bad_args);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, "ctl-bad.conf:1: YAML syntax") != NULL ||
	      strstr(o.err, "ctl-bad.conf:2: YAML syntax") != NULL);
	ctl_out_free(&o);
}

static void test_sighup_applies_runtime_keys_only(void)
{
	long from = host_log_size(&D);
	write_file(g_conf, conf_text("/cfg-other", "debug", "2500ms"));
	host_signal(&D, SIGHUP);
	wait_log(&D, from, "config: log-level changed from info to debug", 15000);
	wait_log(&D, from,
		 "config: callback-timeout changed from stuck:reconcile=1500ms to "
		 "stuck:reconcile=2500ms",
		 15000);
	wait_log(&D, from,
		 "config: prefix changed from /cfga to /cfg-other in ", 15000);
	CHECK(host_log_count(&D, from, "needs a restart; the running value stays") == 1);
	/* the level is live: debug lines appear */
	wait_log(&D, from, "DEBUG", 15000);
	/* the next instance of the plugin runs with the new limit */
	long reload_from = host_log_size(&D);
	host_install_file(&D, built_test_plugin("stuck-1.1.0"), "stuck.so", 0644);
	wait_log(&D, reload_from, "callback reconcile exceeded its timeout of 2500 ms", 30000);
	/* the prefix stayed: the member record is still under the old one */
	size_t len;
	uint8_t *v = tu_get(&T, "/cfga/" PLUGIN "/members/cfg-node", &len);
	CHECK(v != NULL);
	free(v);
	struct etcd_kv **kvs = NULL;
	CHECK_INT_EQ(tu_list(&T, "/cfg-other", &kvs), 0);
	tu_list_free(kvs, 0);
}

static void test_sighup_refuses_invalid_file_as_a_whole(void)
{
	long from = host_log_size(&D);
	/* a valid change (log level) in a file with a duplicate key: nothing
	 * of it is applied */
	char text[4200];
	snprintf(text, sizeof(text), "%sttl: 4\n", conf_text("/cfga", "warn", "2500ms"));
	write_file(g_conf, text);
	host_signal(&D, SIGHUP);
	wait_log(&D, from, "the configuration is refused as a whole", 15000);
	CHECK(host_log_count(&D, from, "duplicate key 'ttl'") == 1);
	CHECK(host_log_count(&D, from, g_conf) >= 1);
	CHECK(host_log_count(&D, from, "log-level changed") == 0);
	/* syntax error: refused too, and the daemon still answers */
	from = host_log_size(&D);
	write_file(g_conf, "node-id: [\n");
	host_signal(&D, SIGHUP);
	wait_log(&D, from, "YAML syntax", 15000);
	CHECK(host_alive(&D));
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&D, &o, "plugins", NULL), 0);
	ctl_out_free(&o);
	/* still at debug (the refused file said warn) */
	from = host_log_size(&D);
	write_file(g_conf, conf_text("/cfga", "debug", "2500ms"));
	host_signal(&D, SIGHUP);
	wait_log(&D, from, "config: re-read ", 15000);
	CHECK(host_log_count(&D, from, ": no change") == 1);
	host_signal(&D, SIGTERM);
	CHECK_INT_EQ(host_wait(&D, 30000), 0);
}

static void test_flag_overrides_file(void)
{
	static struct host H;
	host_setup(&H, harness_dir(g_etcd), "flagd");
	char path[700], text[2048];
	snprintf(path, sizeof(path), "%s/leasehold.conf", H.dir);
	snprintf(text, sizeof(text),
		 "etcd: %s\nnode-id: file-node\nprefix: /cfgflag\nttl: 3\nplugin-dir: %s\n"
		 "runtime-dir: %s/run\ncontrol: %s\nhttp: none\nisolation: thread\n",
		 harness_etcd_urls(g_etcd), H.plugin_dir, H.dir, H.control);
	write_file(path, text);
	host_install_file(&H, built_test_plugin("stuck-1.0.0"), "stuck.so", 0644);
	const char *const args[] = {"--config", path, "--node-id", "flag-node", NULL};
	host_start_args(&H, args, NULL);
	host_wait_control(&H, 30000);
	size_t len;
	wait_key("/cfgflag/" PLUGIN "/members/flag-node", 30000);
	CHECK(tu_get(&T, "/cfgflag/" PLUGIN "/members/file-node", &len) == NULL);
	host_signal(&H, SIGTERM);
	CHECK_INT_EQ(host_wait(&H, 30000), 0);
}

int main(void)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(g_worker, sizeof(g_worker), "%s/leasehold-worker", b && *b ? b : ".");
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));

	RUN(test_bad_files_exit_2_with_file_line_before_etcd);
	RUN(test_check_config_prints_effective_settings);
	RUN(test_file_drives_daemon);
	RUN(test_leaseholdctl_finds_socket_from_file);
	RUN(test_sighup_applies_runtime_keys_only);
	RUN(test_sighup_refuses_invalid_file_as_a_whole);
	RUN(test_flag_overrides_file);

	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
