/* SPDX-License-Identifier: MIT */
/*
 * test_plugin_config_e2e - plugin configuration (ABI 1.2) with real daemons,
 * a real etcd, the `configured` test plugin (tests/plugins/configured.c)
 * and leaseholdctl:
 *  - init sees the cluster document and the node-local one (--plugin-config);
 *  - `config set` on one node reaches on_config_changed on every node
 *    (three hosts: thread isolation and process isolation), leading or not;
 *    `config get` (text and --json) shows document and revision;
 *  - `config set` refuses what is not a JSON object and what the plugin's
 *    validate_config refuses, and writes nothing;
 *  - two writes from the same revision: the second exits 8 and writes
 *    nothing; `config edit` (EDITOR a script of the test's, under a
 *    terminal from script(1)) writes, re-edits an invalid document, writes
 *    nothing when unchanged, and loses a race with exit 8;
 *  - a document that is not valid JSON put into etcd directly: every node
 *    shows the error (plugins --json, status) and its plugin keeps the last
 *    good one; a delete is an absent document;
 *  - a document the plugin refuses in on_config_changed: every node shows
 *    the refusal (plugins, status, JSON, leasehold_config_error, /readyz),
 *    with the plugin's reason or the bare return value, until one is
 *    accepted;
 *  - a plugin whose descriptor says ABI 1.1 (callbacks in memory, declared
 *    smaller) is never called for configuration and not asked to validate;
 *  - ABI 1.3: `config set` of a document the plugin's schema refuses
 *    (the guide's controller, `{"prefix":5}`) exits 2 naming the field,
 *    and writes nothing;
 *  - a pin holds release 1.1.0 back and b loads it beside what runs (its
 *    standby): `config set` asks both releases, a document only 1.1.0
 *    refuses is refused naming that release and writes nothing; the
 *    standby's worker killed shows in b's metrics (a restart,
 *    leasehold_plugin_standby_ready) while what runs is untouched.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "files.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "testutil.h"

#define PFX "/lhc"
#define PLUGIN "configured"
#define KEY PFX "/" PLUGIN "/config"

extern char **environ;

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A, B, C;
static char g_dir[600];
static int g_http_port;   /* host A's HTTP endpoint */
static int g_http_port_b; /* host B's */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK(fclose(f) == 0);
}

static const char *path_of(const char *name)
{
	static char buf[4][700];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", g_dir, name);
	return buf[k];
}

/* the stored document's mod revision (0 = none) */
static int64_t stored_rev(void)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, KEY, &kvs);
	int64_t r = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->key_len == strlen(KEY))
			r = kvs[i]->mod_revision;
	tu_list_free(kvs, n);
	return r;
}

static int64_t rev_of_output(const char *err)
{
	const char *p = strstr(err, "revision ");
	CHECK(p != NULL);
	return strtoll(p + strlen("revision "), NULL, 10);
}

/* config set from A; returns the exit status, the revision in *ret_rev */
static int set_from(const struct host *h, const char *file, const char *revision, int64_t *ret_rev)
{
	struct ctl_out o;
	int st = revision
		     ? host_ctl(h, &o, "config", "set", PLUGIN, file, "--revision", revision, NULL)
		     : host_ctl(h, &o, "config", "set", PLUGIN, file, NULL);
	if (st == 0 && ret_rev)
		*ret_rev = rev_of_output(o.out);
	if (st != 0)
		fprintf(stderr, "config set %s: exit %d: %s", file, st, o.err);
	ctl_out_free(&o);
	return st;
}

static void test_set_get_reaches_every_node(void)
{
	struct ctl_out o;
	char line[512];
	long ma = host_log_size(&A), mb = host_log_size(&B), mc = host_log_size(&C);

	/* nothing stored yet */
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "get", PLUGIN, NULL), 0);
	CHECK_STR_EQ(o.out, "");
	CHECK(strstr(o.err, "no configuration (revision 0)") != NULL);
	ctl_out_free(&o);

	write_file(path_of("one.json"), "{\"replicas\": 3}\n");
	int64_t rev = 0;
	CHECK_INT_EQ(set_from(&A, path_of("one.json"), NULL, &rev), 0);
	CHECK(rev > 0);
	CHECK_INT_EQ(stored_rev(), rev);
	snprintf(line, sizeof(line),
		 "CFG configured changed rev=%" PRId64 " flags=0 cluster={\"replicas\": 3}", rev);
	host_wait_log(&T, &A, ma, line, 1, 10000);
	host_wait_log(&T, &B, mb, line, 1, 10000);
	host_wait_log(&T, &C, mc, line, 1, 10000);
	/* C's node-local document stays what it was */
	host_wait_log(&T, &C, mc, "local={\"path\": \"/srv/c\"}", 1, 10000);

	CHECK_INT_EQ(host_ctl(&C, &o, "config", "get", PLUGIN, NULL), 0);
	CHECK_STR_EQ(o.out, "{\"replicas\": 3}\n");
	CHECK_INT_EQ(rev_of_output(o.err), rev);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "get", PLUGIN, "--json", NULL), 0);
	json_object *j = json_tokener_parse(o.out);
	CHECK(j != NULL);
	CHECK_INT_EQ(json_object_object_length(j), 5);
	json_object *v;
	CHECK(json_object_object_get_ex(j, "revision", &v) && json_object_get_int64(v) == rev);
	CHECK(json_object_object_get_ex(j, "config", &v) &&
	      json_object_is_type(v, json_type_object));
	CHECK(json_object_object_get_ex(v, "replicas", &v) && json_object_get_int(v) == 3);
	CHECK(json_object_object_get_ex(j, "error", &v) && v == NULL);
	json_object_put(j);
	ctl_out_free(&o);

	/* the views show the revision every node runs on */
	json_object *p = ctl_plugin_json(&B, PLUGIN);
	CHECK(p != NULL);
	CHECK(json_object_object_get_ex(p, "config_revision", &v) &&
	      json_object_get_int64(v) == rev);
	json_object_put(p);
	/* a reconcile (on the leader, wherever it runs) reads it through
	 * api->config(); the CLI returns once the leader served the request */
	int st = host_ctl(&B, &o, "reconcile", PLUGIN, NULL);
	if (st != 0)
		fprintf(stderr, "reconcile: exit %d: %s", st, o.err);
	CHECK_INT_EQ(st, 0);
	ctl_out_free(&o);
	snprintf(line, sizeof(line), "CFG configured reconcile rev=%" PRId64 " flags=0", rev);
	const struct host *const all[] = {&A, &B, &C};
	const long from[] = {ma, mb, mc};
	host_wait_log_any(&T, all, from, 3, line, 10000);

	/* process isolation: a restarted worker's init starts from the
	 * configuration as it is now, node-local document included */
	pid_t w = host_worker_pid(C.pid);
	CHECK(w > 0);
	CHECK(kill(w, SIGKILL) == 0);
	snprintf(line, sizeof(line),
		 "CFG configured init rev=%" PRId64 " flags=0 cluster={\"replicas\": 3}", rev);
	host_wait_log(&T, &C, mc, line, 1, 20000);
	CHECK(host_log_count(&C, mc, "local={\"path\": \"/srv/c\"}") >=
	      2); /* changed, init (and a reconcile when C leads) */
}

static void test_set_refusals(void)
{
	struct ctl_out o;
	int64_t before = stored_rev();
	long ma = host_log_size(&A);

	write_file(path_of("bad.json"), "{\"replicas\": 3,}");
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", PLUGIN, path_of("bad.json"), NULL), 2);
	CHECK(strstr(o.err, "not valid JSON") != NULL);
	CHECK(strstr(o.err, "nothing written") != NULL);
	ctl_out_free(&o);
	write_file(path_of("list.json"), "[1, 2]");
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", PLUGIN, path_of("list.json"), NULL), 2);
	CHECK(strstr(o.err, "not a JSON object") != NULL);
	ctl_out_free(&o);
	/* the plugin's own validation (A runs it) */
	write_file(path_of("reject.json"), "{\"reject\": true}");
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", PLUGIN, path_of("reject.json"), NULL), 2);
	CHECK(strstr(o.err, "the key 'reject' is not allowed here") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_log_count(&A, ma, "CFG configured validate 16 bytes"), 1);
	CHECK_INT_EQ(stored_rev(), before);
	/* too large: refused by the CLI before the daemon is asked */
	size_t big = 40 * 1024;
	char *s = malloc(big + 16);
	CHECK(s != NULL);
	memset(s, ' ', big + 16);
	memcpy(s, "{\"a\": 1", 7);
	s[big] = '}';
	s[big + 1] = 0;
	write_file(path_of("big.json"), s);
	free(s);
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", PLUGIN, path_of("big.json"), NULL), 2);
	CHECK(strstr(o.err, "larger than 32768 bytes") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(stored_rev(), before);
}

static void test_concurrent_writes(void)
{
	char rb[32];
	int64_t r0 = stored_rev(), r1 = 0;
	snprintf(rb, sizeof(rb), "%" PRId64, r0);
	write_file(path_of("alice.json"), "{\"by\": \"alice\"}");
	write_file(path_of("bob.json"), "{\"by\": \"bob\"}");
	/* both read revision r0; alice writes first */
	CHECK_INT_EQ(set_from(&A, path_of("alice.json"), rb, &r1), 0);
	struct ctl_out o;
	CHECK_INT_EQ(
	    host_ctl(&B, &o, "config", "set", PLUGIN, path_of("bob.json"), "--revision", rb, NULL),
	    8);
	CHECK(strstr(o.err, "changed meanwhile") != NULL);
	CHECK(strstr(o.err, "nothing was written") != NULL);
	ctl_out_free(&o);
	size_t len;
	uint8_t *v = tu_get(&T, KEY, &len);
	CHECK(v != NULL);
	CHECK_STR_EQ((char *)v, "{\"by\": \"alice\"}");
	free(v);
	CHECK_INT_EQ(stored_rev(), r1);
}

/* ---- config edit under a terminal ---- */

/* run `script -qec "leaseholdctl --control URL config edit configured"`
 * with stdin from `input`; the exit status, the output in *ret_out */
static int run_edit(const struct host *h, const char *mode, const char *input, char **ret_out)
{
	char cmd[2048], outp[700], inp[700];
	snprintf(cmd, sizeof(cmd), "%s --control %s config edit %s", built_binary("leaseholdctl"),
		 h->control, PLUGIN);
	snprintf(outp, sizeof(outp), "%s/edit.out", g_dir);
	snprintf(inp, sizeof(inp), "%s/edit.in", g_dir);
	write_file(inp, input);
	write_file(path_of("editor.count"), "0");
	setenv("CFG_MODE", mode, 1);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, inp, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	char a0[] = "script", a1[] = "-qec", a3[] = "/dev/null";
	char *const argv[] = {a0, a1, cmd, a3, NULL};
	pid_t pid;
	CHECK_INT_EQ(posix_spawnp(&pid, "script", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	CHECK(pfd >= 0);
	struct pollfd p = {.fd = pfd, .events = POLLIN};
	if (poll(&p, 1, 30000) != 1) {
		kill(pid, SIGKILL);
		fprintf(stderr, "FAIL: config edit did not finish in 30 s\n");
		exit(1);
	}
	close(pfd);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	*ret_out = test_read_file(outp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_edit(void)
{
	char *out;
	int64_t r0 = stored_rev();
	/* the editor script: what it does to the file depends on CFG_MODE and
	 * on how often it ran (editor.count) */
	char script[4096];
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "n=$(cat '%s/editor.count'); n=$((n+1)); echo $n > '%s/editor.count'\n"
		 "case \"$CFG_MODE\" in\n"
		 "edit) printf '{\"edited\": %%s}' $n > \"$1\" ;;\n"
		 "badthengood) if [ $n = 1 ]; then printf '{bad' > \"$1\"; "
		 "else printf '{\"fixed\": true}' > \"$1\"; fi ;;\n"
		 "nochange) : ;;\n"
		 "race) '%s' --control '%s' config set " PLUGIN " '%s/bob.json' >/dev/null 2>&1; "
		 "printf '{\"mine\": 1}' > \"$1\" ;;\n"
		 "esac\n",
		 g_dir, g_dir, built_binary("leaseholdctl"), A.control, g_dir);
	write_file(path_of("editor.sh"), script);
	CHECK(chmod(path_of("editor.sh"), 0700) == 0);
	setenv("EDITOR", path_of("editor.sh"), 1);
	unsetenv("VISUAL");

	CHECK_INT_EQ(run_edit(&A, "edit", "", &out), 0);
	CHECK(strstr(out, "configuration written at revision") != NULL);
	free(out);
	int64_t r1 = stored_rev();
	CHECK(r1 > r0);
	size_t len;
	uint8_t *v = tu_get(&T, KEY, &len);
	CHECK_STR_EQ((char *)v, "{\"edited\": 1}");
	free(v);

	/* unchanged: nothing written */
	CHECK_INT_EQ(run_edit(&A, "nochange", "", &out), 0);
	CHECK(strstr(out, "no change; nothing written") != NULL);
	free(out);
	CHECK_INT_EQ(stored_rev(), r1);

	/* invalid, then edited again (answer y), then written */
	CHECK_INT_EQ(run_edit(&A, "badthengood", "y\n", &out), 0);
	CHECK(strstr(out, "not valid JSON") != NULL);
	CHECK(strstr(out, "Edit again?") != NULL);
	free(out);
	v = tu_get(&T, KEY, &len);
	CHECK_STR_EQ((char *)v, "{\"fixed\": true}");
	free(v);

	/* invalid, then aborted (answer n): nothing written */
	int64_t r2 = stored_rev();
	CHECK_INT_EQ(run_edit(&A, "badthengood", "n\n", &out), 2);
	CHECK(strstr(out, "aborted; nothing written") != NULL);
	free(out);
	CHECK_INT_EQ(stored_rev(), r2);

	/* another operator writes while this one edits: exit 8 */
	CHECK_INT_EQ(run_edit(&A, "race", "", &out), 8);
	CHECK(strstr(out, "changed meanwhile") != NULL);
	CHECK(strstr(out, "the edit is kept in") != NULL);
	free(out);
	v = tu_get(&T, KEY, &len);
	CHECK_STR_EQ((char *)v, "{\"by\": \"bob\"}");
	free(v);

	/* no terminal: an honest error */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "edit", PLUGIN, NULL), 2);
	CHECK(strstr(o.err, "needs a terminal") != NULL);
	ctl_out_free(&o);
}

/* ---- a bad document behind the CLI's back ---- */

static bool p_config_error(json_object *p, const void *arg)
{
	json_object *v;
	(void)arg;
	return p && json_object_object_get_ex(p, "config_error", &v) && v != NULL;
}

static bool p_config_rev0(json_object *p, const void *arg)
{
	json_object *v;
	(void)arg;
	return p && json_object_object_get_ex(p, "config_revision", &v) &&
	       json_object_get_int64(v) == 0 && json_object_object_get_ex(p, "config_error", &v) &&
	       v == NULL;
}

static bool p_config_error_none(json_object *p, const void *arg)
{
	json_object *v;
	(void)arg;
	return p && json_object_object_get_ex(p, "config_error", &v) && v == NULL;
}

static void test_invalid_in_etcd(void)
{
	char line[512];
	struct ctl_out o;
	int64_t good = stored_rev();
	long m[3] = {host_log_size(&A), host_log_size(&B), host_log_size(&C)};
	const struct host *hs[3] = {&A, &B, &C};
	int64_t bad = tu_put(&T, KEY, "{not json", 9);
	CHECK(bad > good);
	snprintf(line, sizeof(line),
		 "CFG configured changed rev=%" PRId64 " flags=1 cluster={\"by\": \"bob\"}", good);
	for (int i = 0; i < 3; i++) {
		json_object *p = ctl_wait_plugin(hs[i], PLUGIN, p_config_error, NULL, 10000,
						 "config_error shown");
		json_object_put(p);
		/* the plugin keeps the last good one; told once that etcd holds a bad one */
		host_wait_log(&T, hs[i], m[i], line, 1, 10000);
		CHECK_INT_EQ(host_log_count(hs[i], m[i], "is not a valid configuration"), 1);
		CHECK_INT_EQ(host_log_count(hs[i], m[i], "cluster={not json"), 0);
	}
	CHECK_INT_EQ(host_ctl(&B, &o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "is not a valid configuration") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "plugins", NULL), 0);
	CHECK(strstr(o.out, "config: ") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "get", PLUGIN, NULL), 1);
	CHECK_STR_EQ(o.out, "{not json\n");
	CHECK(strstr(o.err, "not valid") != NULL);
	ctl_out_free(&o);

	/* fixed with a set over the bad revision */
	write_file(path_of("fix.json"), "{\"fixed\": 2}");
	int64_t r = 0;
	CHECK_INT_EQ(set_from(&A, path_of("fix.json"), NULL, &r), 0);
	snprintf(line, sizeof(line),
		 "CFG configured changed rev=%" PRId64 " flags=0 cluster={\"fixed\": 2}", r);
	for (int i = 0; i < 3; i++)
		host_wait_log(&T, hs[i], m[i], line, 1, 10000);

	/* far over the bound behind the CLI's back: get shows its start */
	size_t big = 100 * 1024;
	char *junk = malloc(big);
	CHECK(junk != NULL);
	memset(junk, 'x', big);
	tu_put(&T, KEY, junk, big);
	free(junk);
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "get", PLUGIN, NULL), 1);
	CHECK_INT_EQ(strlen(o.out), 32768 + 1);
	CHECK(strstr(o.err, "102400 bytes, more than the 32768 allowed") != NULL);
	ctl_out_free(&o);

	/* deleted behind the CLI's back: absent */
	tu_del(&T, KEY);
	for (int i = 0; i < 3; i++) {
		host_wait_log(&T, hs[i], m[i], "CFG configured changed rev=0 flags=0 cluster=(none)",
			      1, 10000);
		json_object_put(ctl_wait_plugin(hs[i], PLUGIN, p_config_rev0, NULL, 10000,
						"config_revision 0"));
	}
}

/* config_error holds the substring arg */
static bool p_config_error_has(json_object *p, const void *arg)
{
	const char *e = p ? jstr(p, "config_error") : NULL;
	return e && strstr(e, arg) != NULL;
}

static double metric_of(int port, const char *series)
{
	struct http_reply r;
	double v = -1;
	CHECK_INT_EQ(http_request(port, NULL, "/metrics", 5000, &r), 200);
	CHECK_OK(http_metric(r.body, series, &v));
	http_reply_free(&r);
	return v;
}

/* the metric reaches want (the HTTP snapshot is republished at least
 * every second) */
struct metric_want {
	const char *series;
	double want;
};

static bool p_metric(void *arg)
{
	const struct metric_want *w = arg;
	return metric_of(g_http_port, w->series) == w->want;
}

/* a document the plugin refuses in on_config_changed (written behind the
 * CLI's back, so no validate_config ran): every node shows the refusal in
 * every view (plugins, status, JSON, metrics, /readyz), with the plugin's
 * reason or, without one, the callback's return value; a document it
 * accepts clears it */
static void test_refused_change_shown(void)
{
	static const char *const series = "leasehold_config_error{plugin=\"configured\"}";
	char want[300];
	struct ctl_out o;
	const struct host *hs[3] = {&A, &B, &C};
	CHECK(metric_of(g_http_port, series) == 0);
	/* each refused document is counted once */
	static const char *const refusals =
		"leasehold_config_refusals_total{plugin=\"configured\",reason=\"refused_by_plugin\"}";
	double refused0 = metric_of(g_http_port, refusals);
	int64_t r = tu_put(&T, KEY, "{\"refuse_change\": 1}", 20);
	snprintf(want, sizeof(want),
		 "refused by the plugin at revision %" PRId64
		 ": the key 'refuse_change' is refused on this node",
		 r);
	for (int i = 0; i < 3; i++)
		json_object_put(ctl_wait_plugin(hs[i], PLUGIN, p_config_error_has, want, 10000,
						"the refusal in config_error"));
	CHECK_INT_EQ(host_ctl(&B, &o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, want) != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "plugins", NULL), 0);
	char cell[200];
	CHECK(ctl_table_cell(o.out, PLUGIN, "LAST ERROR", cell, sizeof(cell)) != NULL);
	CHECK(strncmp(cell, "config: refused by the plugin at revision", 41) == 0);
	ctl_out_free(&o);
	struct metric_want mw = {series, 1};
	tu_wait(&T, p_metric, &mw, 10000, "leasehold_config_error 1");
	struct metric_want rw = {refusals, refused0 + 1};
	tu_wait(&T, p_metric, &rw, 10000, "one refusal counted");
	struct http_reply hr;
	CHECK_INT_EQ(http_request(g_http_port, NULL, "/readyz/" PLUGIN, 5000, &hr) > 0, 1);
	if (!strstr(hr.body, want))
		fprintf(stderr, "/readyz: %s", hr.body);
	CHECK(strstr(hr.body, "; config: ") != NULL && strstr(hr.body, want) != NULL);
	http_reply_free(&hr);

	/* no reason given: the callback and its return value, nothing else */
	r = tu_put(&T, KEY, "{\"refuse_silently\": 1}", 22);
	snprintf(want, sizeof(want),
		 "refused by the plugin at revision %" PRId64
		 ": on_config_changed returned -EINVAL (no reason given)",
		 r);
	for (int i = 0; i < 3; i++)
		json_object_put(ctl_wait_plugin(hs[i], PLUGIN, p_config_error_has, want, 10000,
						"the bare refusal in config_error"));
	rw.want = refused0 + 2;
	tu_wait(&T, p_metric, &rw, 10000, "the second refusal counted");

	/* accepted: gone everywhere */
	tu_put(&T, KEY, "{\"fine\": 1}", 11);
	for (int i = 0; i < 3; i++)
		json_object_put(ctl_wait_plugin(hs[i], PLUGIN, p_config_error_none, NULL, 10000,
						"config_error cleared"));
	mw.want = 0;
	tu_wait(&T, p_metric, &mw, 10000, "leasehold_config_error 0");
	CHECK(metric_of(g_http_port, refusals) == refused0 + 2);
	tu_del(&T, KEY);
}

/* ---- ABI 1.1 ---- */

static void test_abi_1_1_unaffected(void)
{
	struct ctl_out o;
	long ma = host_log_size(&A);
	host_install_file(&A, built_test_plugin("configured11"), "configured11.so", 0644);
	host_wait_log(&T, &A, ma, "CFG configured11 reconcile", 1, 15000);
	write_file(path_of("r11.json"), "{\"reject\": 1}");
	/* no validate_config as far as the host knows: written as it is */
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", "configured11", path_of("r11.json"), NULL),
		     0);
	ctl_out_free(&o);
	/* a barrier through the plugin's worker: a reconcile after the change
	 * (what the change would have queued ran before it) */
	int st = host_ctl(&A, &o, "reconcile", "configured11", NULL);
	if (st != 0)
		fprintf(stderr, "reconcile configured11: exit %d: %s%s", st, o.out, o.err);
	CHECK_INT_EQ(st, 0);
	ctl_out_free(&o);
	host_wait_log(&T, &A, ma, "CFG configured11 reconcile", 2, 15000);
	CHECK_INT_EQ(host_log_count(&A, ma, "CFG configured11 changed"), 0);
	CHECK_INT_EQ(host_log_count(&A, ma, "CFG configured11 validate"), 0);
	/* the views still show the cluster document's revision */
	json_object *p = ctl_plugin_json(&A, "configured11"), *v;
	CHECK(p != NULL);
	CHECK(json_object_object_get_ex(p, "config_revision", &v) && json_object_get_int64(v) > 0);
	json_object_put(p);
}

/* ---- ABI 1.3: the schema ---- */

static void test_schema_refused(void)
{
	struct ctl_out o;
	long ma = host_log_size(&A);
	host_install_file(&A, built_test_plugin("controller"), "controller.so", 0644);
	host_wait_log(&T, &A, ma, "plugin controller: 1 watch(es) registered", 1, 15000);
	write_file(path_of("typed.json"), "{\"prefix\": 5}");
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", "controller", path_of("typed.json"), NULL), 2);
	if (!strstr(o.err, "field \"prefix\": expected a string, got 5"))
		fprintf(stderr, "stderr: %s\n", o.err);
	CHECK(strstr(o.err, "plugin controller refused the configuration: field \"prefix\": "
	                    "expected a string, got 5") != NULL);
	ctl_out_free(&o);
	size_t len;
	CHECK(tu_get(&T, PFX "/controller/config", &len) == NULL);
	write_file(path_of("typed.json"), "{\"prefix\": \"o2/\"}");
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "set", "controller", path_of("typed.json"), NULL), 0);
	ctl_out_free(&o);
}

/* a node-local file that is not a JSON object: that plugin fails to load,
 * with the reason */
static bool p_standby_ready(json_object *p, const void *arg)
{
	json_object *v;
	(void)arg;
	return p && json_object_object_get_ex(p, "state", &v) &&
	       strcmp(json_object_get_string(v), "standby") == 0;
}

/* b's restarts of configured's workers and its standby_ready (-1: absent) */
static void b_worker_metrics(double *restarts, double *standby_ready)
{
	const char *series[] = {"leasehold_worker_restarts_total{plugin=\"configured\"}",
				"leasehold_plugin_standby_ready{plugin=\"configured\"}"};
	double v[2];
	CHECK_OK(http_metrics_get(g_http_port_b, series, v, 2));
	*restarts = v[0];
	*standby_ready = v[1];
}

/* b's published metrics (at most a second after a change) show the
 * standby's readiness ready (-1: absent) and at least min_restarts */
struct standby_metrics {
	double ready, min_restarts;
};

static bool b_standby_metrics_are(void *arg)
{
	const struct standby_metrics *want = arg;
	double restarts, ready;
	b_worker_metrics(&restarts, &ready);
	return ready == want->ready && restarts >= want->min_restarts;
}

static void b_wait_standby_metrics(double ready, double min_restarts, const char *what)
{
	struct standby_metrics want = {ready, min_restarts};
	tu_wait(&T, b_standby_metrics_are, &want, 10000, what);
}

static void test_standby_validates_and_is_measured(void)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "release", "pin", PLUGIN, "1.0.0", NULL), 0);
	ctl_out_free(&o);
	pid_t running = host_worker_pid(B.pid);
	CHECK(running > 0);
	long mb = host_log_size(&B);
	host_install_file(&B, built_test_plugin("configured-1.1"), "configured-1.1.0.so", 0644);
	host_wait_log(&T, &B, mb,
		      "configured-1.1.0.so (release 1.1.0) is loaded and initialised beside", 1,
		      15000);
	b_wait_standby_metrics(1, 0, "the metrics: the standby ready");
	double restarts, ready;
	b_worker_metrics(&restarts, &ready);
	CHECK(restarts >= 0);

	/* a document the running 1.0.0 takes and the held-back 1.1.0 refuses */
	int64_t before = stored_rev();
	write_file(path_of("gone.json"), "{\"gone_in_1_1\": 1}");
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "set", PLUGIN, path_of("gone.json"), NULL), 2);
	CHECK(strstr(o.err, "plugin configured's release 1.1.0, which the pin holds back (it runs "
			    "here once unpinned), refused the configuration: the key 'gone_in_1_1' "
			    "is gone in release 1.1.0") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(stored_rev(), before);
	/* asked twice: the running release, then the standby */
	CHECK_INT_EQ(host_log_count(&B, mb, "CFG configured validate 18 bytes"), 2);
	/* one both take is written */
	write_file(path_of("both.json"), "{\"replicas\": 5}");
	int64_t rev = 0;
	CHECK_INT_EQ(set_from(&B, path_of("both.json"), NULL, &rev), 0);
	CHECK_INT_EQ(stored_rev(), rev);

	/* the standby's worker dies: it restarts, shown in metrics and in its
	 * row; what runs keeps its worker */
	pid_t pids[4], standby = 0;
	size_t n = host_worker_pids(B.pid, pids, 4);
	for (size_t i = 0; i < n && i < 4; i++)
		if (pids[i] != running)
			standby = pids[i];
	CHECK(standby > 0);
	CHECK(kill(standby, SIGKILL) == 0);
	host_wait_log(&T, &B, mb, "the standby from configured-1.1.0.so failed", 1, 15000);
	host_wait_log(&T, &B, mb, "the standby recovered", 1, 20000);
	json_object_put(ctl_wait_plugin(&B, "configured-1.1.0.so", p_standby_ready, NULL, 15000,
					"the standby ready again"));
	b_wait_standby_metrics(1, restarts + 1, "the metrics: the standby restarted, ready again");
	double restarts2;
	b_worker_metrics(&restarts2, &ready);
	CHECK(restarts2 >= restarts + 1);
	CHECK(kill(running, 0) == 0);

	/* the file goes: so does the standby, and its count stays */
	CHECK_OK(unlink(host_plugin_path(&B, "configured-1.1.0.so", (char[1200]){0}, 1200)));
	host_wait_log(&T, &B, mb, "dropping the standby from configured-1.1.0.so", 1, 15000);
	b_wait_standby_metrics(-1, 0, "the metrics: no standby");
	double restarts3;
	b_worker_metrics(&restarts3, &ready);
	CHECK(restarts3 >= restarts2);
	CHECK_INT_EQ(host_ctl(&B, &o, "release", "unpin", PLUGIN, NULL), 0);
	ctl_out_free(&o);
}

static bool p_failed_local(json_object *p, const void *arg)
{
	json_object *v;
	(void)arg;
	return p && json_object_object_get_ex(p, "error", &v) && v &&
	       strstr(json_object_get_string(v), "node-local configuration") != NULL &&
	       strstr(json_object_get_string(v), "not a JSON object") != NULL;
}

static void test_bad_local(void)
{
	struct host D;
	host_setup(&D, harness_dir(g_etcd), "d");
	write_file(path_of("d-local.json"), "[\"not an object\"]");
	char pc[800];
	snprintf(pc, sizeof(pc), PLUGIN "=%s", path_of("d-local.json"));
	const char *args[] = {"--prefix",	 PFX, "--ttl", "2", "--reconcile-interval", "1h",
			      "--plugin-config", pc,  NULL};
	host_install_file(&D, built_test_plugin("configured"), "configured.so", 0644);
	host_start(&D, harness_etcd_urls(g_etcd), args);
	host_wait_control(&D, 15000);
	json_object_put(ctl_wait_plugin(&D, PLUGIN, p_failed_local, NULL, 15000,
					"the node-local file's error"));
	CHECK_INT_EQ(host_log_count(&D, 0, "CFG configured init"), 0);
	host_signal(&D, SIGTERM);
	CHECK_OK(host_wait(&D, 15000));
}

int main(void)
{
	if (access("/usr/bin/script", X_OK) != 0 && access("/bin/script", X_OK) != 0) {
		fprintf(stderr,
			"SKIP: script(1) (util-linux) is needed for config edit's terminal\n");
		return 77;
	}
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	snprintf(g_dir, sizeof(g_dir), "%s/cfg", harness_dir(g_etcd));
	CHECK(mkdir(g_dir, 0700) == 0);
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	host_setup(&C, harness_dir(g_etcd), "c");
	write_file(path_of("c-local.json"), "{\"path\": \"/srv/c\"}");
	char pc[800];
	snprintf(pc, sizeof(pc), PLUGIN "=%s", path_of("c-local.json"));
	char http_addr[64];
	int ports[2];
	CHECK_OK(harness_free_ports(ports, 2));
	g_http_port = ports[0];
	g_http_port_b = ports[1];
	snprintf(http_addr, sizeof(http_addr), "127.0.0.1:%d", g_http_port);
	const char *args_a[] = {"--prefix", PFX,	   "--ttl",  "2",    "--reconcile-interval",
				"1h",	    "--isolation", "thread", "--http", http_addr,
				NULL};
	char http_addr_b[64];
	snprintf(http_addr_b, sizeof(http_addr_b), "127.0.0.1:%d", g_http_port_b);
	const char *args_b[] = {"--prefix", PFX,      "--ttl", "2", "--reconcile-interval", "1h",
				"--http",   http_addr_b, NULL};
	const char *args_c[] = {"--prefix",	   PFX, "--ttl", "2", "--reconcile-interval", "1h",
				"--plugin-config", pc,	NULL};
	struct host *hs[3] = {&A, &B, &C};
	const char *const *as[3] = {args_a, args_b, args_c};
	for (int i = 0; i < 3; i++) {
		host_install_file(hs[i], built_test_plugin("configured"), "configured.so", 0644);
		host_start(hs[i], harness_etcd_urls(g_etcd), as[i]);
	}
	for (int i = 0; i < 3; i++)
		host_wait_control(hs[i], 15000);
	const char *init0 = "CFG configured init rev=0 flags=0 cluster=(none) local=(none)";
	host_wait_log(&T, &A, 0, init0, 1, 15000);
	host_wait_log(&T, &B, 0, init0, 1, 15000);
	host_wait_log(&T, &C, 0,
		      "CFG configured init rev=0 flags=0 cluster=(none) local={\"path\": \"/srv/c\"}",
		      1, 15000);

	RUN(test_set_get_reaches_every_node);
	RUN(test_set_refusals);
	RUN(test_concurrent_writes);
	RUN(test_edit);
	RUN(test_invalid_in_etcd);
	RUN(test_refused_change_shown);
	RUN(test_abi_1_1_unaffected);
	RUN(test_schema_refused);
	RUN(test_bad_local);
	RUN(test_standby_validates_and_is_measured);

	for (int i = 0; i < 3; i++)
		host_signal(hs[i], SIGTERM);
	for (int i = 0; i < 3; i++) {
		CHECK_OK(host_wait(hs[i], 15000));
		CHECK_INT_EQ(hs[i]->exit_status, 0);
	}
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
