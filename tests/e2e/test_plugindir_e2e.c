/* SPDX-License-Identifier: MIT */
/*
 * test_plugindir_e2e - the plugin directory of running `leasehold` daemons
 * (real etcd, the real example plugin, the check-only test plugins), seen
 * through leaseholdctl:
 * - reload (one plugin, all, by file name) of an unchanged file starts no
 *   new instance; a file refused for its mode and then fixed with chmod (no
 *   inotify event) is loaded by the rescan of `leaseholdctl reload` or SIGHUP;
 * - refused files (not a plugin, wrong magic) show up as `failed` with the
 *   reason, a second file of the same plugin and release as `superseded`,
 *   while the running plugin carries on untouched;
 *   a broken replacement keeps the previous instance running with the
 *   reason in `error`;
 * - removing the leader's file stops its plugin gracefully: the other node
 *   leads at once, the plugin leaves the list, its member record goes.
 *
 * Waiting is for events with deadlines: cluster events through an in-process
 * observer election, directory events through a barrier file the daemon must
 * report. The daemon's own view is read by polling `plugins --json` with a
 * deadline (the CLI offers no event).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"

#define PFX "/lhpd"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;
static int g_expect_failures;

/* EXPECT - a check that reports and continues (used where a failure shows a
 * known bug and the later scenarios should still run); main fails at the end */
#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: EXPECT failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			g_expect_failures++;                                                       \
		}                                                                                  \
	} while (0)

static const char *const HOST_ARGS[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", NULL};

static struct host *leader_host(void)
{
	return host_of_node(obs_leader(g_obs));
}

static struct host *other_host(const struct host *h)
{
	return h == &A ? &B : &A;
}

/* the mod revision of node's member record, 0 when absent */
static int64_t member_rev(const struct host *h)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/members/%s", h->node);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, key, &kvs);
	int64_t rev = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->key_len == strlen(key) &&
		    memcmp(kvs[i]->key, key, kvs[i]->key_len) == 0)
			rev = kvs[i]->mod_revision;
	tu_list_free(kvs, n);
	return rev;
}

/* ---- predicates for ctl_wait_plugin ---- */

static bool p_absent(json_object *p, const void *arg)
{
	(void)arg;
	return p == NULL;
}

/* refused: state failed and an error containing arg */
static bool p_failed_with(json_object *p, const void *arg)
{
	const char *e = jstr(p, "error"), *s = jstr(p, "state");
	return p && s && strcmp(s, "failed") == 0 && e && strstr(e, (const char *)arg);
}

/* running: loaded, in the election */
static bool p_running(json_object *p, const void *arg)
{
	(void)arg;
	const char *s = jstr(p, "state");
	return p && s &&
	       (strcmp(s, "leading") == 0 || strcmp(s, "campaigning") == 0 ||
		strcmp(s, "standby") == 0) &&
	       jget(p, "error") == NULL;
}

static bool p_error_with(json_object *p, const void *arg)
{
	const char *e = jstr(p, "error");
	return p && e && strstr(e, (const char *)arg);
}

static bool p_superseded_by(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state"), *by = jstr(p, "superseded_by");
	return p && s && strcmp(s, "superseded") == 0 && by && strcmp(by, (const char *)arg) == 0;
}

static bool p_no_error(json_object *p, const void *arg)
{
	(void)arg;
	return p && jget(p, "error") == NULL;
}

static bool p_leading_alone(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state"), *l = jstr(p, "leader");
	return p && s && strcmp(s, "leading") == 0 && l && strcmp(l, (const char *)arg) == 0 &&
	       json_object_get_int64(jget(p, "releases.members")) == 1;
}

static bool p_campaigning_behind(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state"), *l = jstr(p, "leader");
	return p && s && strcmp(s, "campaigning") == 0 && l && strcmp(l, (const char *)arg) == 0;
}

/* what the reconciler on h looks like now (for "untouched" checks) */
struct snap {
	char state[32];
	char leader[32];
	int64_t token;
	int64_t member_rev;
	int64_t count;
};

static struct snap snap_of(const struct host *h)
{
	struct snap s = {{0}};
	json_object *p = ctl_plugin_json(h, PLUGIN);
	CHECK(p != NULL);
	snprintf(s.state, sizeof(s.state), "%s", jstr(p, "state"));
	snprintf(s.leader, sizeof(s.leader), "%s", jstr(p, "leader"));
	s.token = jint(p, "fencing_token");
	s.count = jint(p, "reconcile.count");
	s.member_rev = member_rev(h);
	json_object_put(p);
	return s;
}

static void check_untouched(const struct host *h, const struct snap *before, const char *when)
{
	struct snap now = snap_of(h);
	if (strcmp(now.state, before->state) != 0 || strcmp(now.leader, before->leader) != 0 ||
	    now.token != before->token || now.member_rev != before->member_rev) {
		fprintf(
		    stderr,
		    "%s on %s: reconciler changed: state %s -> %s, leader %s -> %s, token %lld -> "
		    "%lld, member record revision %lld -> %lld\n",
		    when, h->node, before->state, now.state, before->leader, now.leader,
		    (long long)before->token, (long long)now.token, (long long)before->member_rev,
		    (long long)now.member_rev);
		exit(1);
	}
}

static void check_log_has_no(const struct host *h, long mark, const char *what)
{
	char *log = host_log_since(h, mark);
	if (strstr(log, what)) {
		fprintf(stderr, "%s's log has \"%s\" since the mark:\n%s\n", h->node, what, log);
		exit(1);
	}
	free(log);
}

static void check_log_has(const struct host *h, long mark, const char *what)
{
	char *log = host_log_since(h, mark);
	if (!strstr(log, what)) {
		fprintf(stderr, "%s's log lacks \"%s\" since the mark:\n%s\n", h->node, what, log);
		exit(1);
	}
	free(log);
}

static void remove_file(struct host *h, const char *file)
{
	char path[700];
	CHECK(unlink(host_plugin_path(h, file, path, sizeof(path))) == 0);
	json_object *p = ctl_wait_plugin(h, file, p_absent, NULL, 5000, "the removed file gone");
	CHECK(p == NULL);
}

/* a directory event barrier: a new (refused) file the daemon must report;
 * once it is listed, the daemon has handled every earlier change */
static void dir_barrier(struct host *h)
{
	host_install_text(h, "barrier\n", "barrier.so", 0644);
	json_object *p = ctl_wait_plugin(h, "barrier.so", p_failed_with, "not an ELF file", 5000,
					 "the barrier file refused");
	json_object_put(p);
	remove_file(h, "barrier.so");
}

static void table_cell_is(const struct host *h, const char *row, const char *col, const char *want,
			  bool prefix)
{
	struct ctl_out o;
	char cell[128];
	CHECK_INT_EQ(host_ctl(h, &o, "plugins", NULL), 0);
	const char *v = ctl_table_cell(o.out, row, col, cell, sizeof(cell));
	if (!v || (prefix ? strncmp(v, want, strlen(want)) : strcmp(v, want)) != 0) {
		fprintf(stderr, "%s: row %s column %s: got \"%s\", want %s\"%s\" in:\n%s\n",
			h->node, row, col, v ? v : "(none)", prefix ? "a prefix " : "", want,
			o.out);
		exit(1);
	}
	ctl_out_free(&o);
}

/* ---- tests ---- */

static void test_start_two_hosts(void)
{
	tu_del_prefix(&T, PFX "/");
	e2e_hosts_up(g_obs, harness_etcd_urls(g_etcd), HOST_ARGS,
		     (struct host *const[]){&A, &B, NULL}, false);
	host_wait_control(&A, 10000);
	host_wait_control(&B, 10000);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "wait-ready", PLUGIN, "--timeout", "10", NULL), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "wait-ready", PLUGIN, "--timeout", "10", NULL), 0);
	ctl_out_free(&o);
	fprintf(stderr, "leader: %s\n", obs_leader(g_obs));
}

static void test_reload_of_an_unchanged_file_and_rescan_after_chmod(void)
{
	struct host *hs[2] = {&A, &B};
	struct snap before[2];
	long mark[2];
	for (int i = 0; i < 2; i++) {
		struct host *h = hs[i];
		struct ctl_out o;
		before[i] = snap_of(h);
		mark[i] = host_log_size(h);
		CHECK(before[i].member_rev > 0);
		CHECK_INT_EQ(host_ctl(h, &o, "reload", PLUGIN, NULL), 0);
		CHECK_STR_EQ(o.out, "reload requested: reconciler\n");
		ctl_out_free(&o);
		CHECK_INT_EQ(host_ctl(h, &o, "reload", "reconciler.so", NULL), 0); /* by file */
		ctl_out_free(&o);
		CHECK_INT_EQ(host_ctl(h, &o, "reload", NULL), 0);
		CHECK_STR_EQ(o.out, "reload requested: all plugins\n");
		ctl_out_free(&o);
		CHECK_INT_EQ(host_ctl(h, &o, "reload", "nosuch", NULL), 2);
		CHECK(strstr(o.err, "no plugin named 'nosuch'"));
		ctl_out_free(&o);
	}

	/* a plugin file that anyone may write is refused ... */
	for (int i = 0; i < 2; i++) {
		struct host *h = hs[i];
		host_install_file(h, built_test_plugin("good"), "g.so", 0666);
		json_object *p = ctl_wait_plugin(h, "g.so", p_failed_with, "world-writable", 5000,
						 "g.so refused for its mode");
		fprintf(stderr, "%s: g.so: %s\n", h->node, jstr(p, "error"));
		CHECK(strstr(jstr(p, "error"), "mode 0666"));
		CHECK_STR_EQ(jstr(p, "name"), "g.so"); /* no descriptor read: named by its file */
		CHECK_STR_EQ(jstr(p, "file"), "g.so");
		/* nothing runs: there is no release (absent values are null elsewhere
		 * in the contract: leader, status, releases.min/max) */
		EXPECT(jget(p, "release") == NULL,
		       "%s: release of a never-loaded file is %s, want null", h->node,
		       json_object_to_json_string(jget(p, "release")));
		CHECK(!jbool(p, "ready"));
		json_object_put(p);
		table_cell_is(h, "g.so", "STATE", "failed", false);
		table_cell_is(h, "g.so", "LAST ERROR", "plugin file g.so is world-writable", true);
		/* ... fixing the mode is no directory event: nothing happens by itself */
		char path[700];
		CHECK(chmod(host_plugin_path(h, "g.so", path, sizeof(path)), 0644) == 0);
		dir_barrier(h);
		p = ctl_plugin_json(h, "g.so");
		CHECK(p_failed_with(p, "world-writable"));
		json_object_put(p);
	}
	/* ... until a rescan: `leaseholdctl reload` on a, SIGHUP on b */
	struct ctl_out o;
	long sighup_mark = host_log_size(&B);
	CHECK_INT_EQ(host_ctl(&A, &o, "reload", NULL), 0);
	ctl_out_free(&o);
	host_signal(&B, SIGHUP);
	for (int i = 0; i < 2; i++) {
		struct host *h = hs[i];
		json_object *p = ctl_wait_plugin(h, "good", p_running, NULL, 5000,
						 "g.so loaded after the rescan");
		CHECK_STR_EQ(jstr(p, "file"), "g.so");
		CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
		json_object_put(p);
		/* the failed entry became the plugin: no row named g.so is left */
		p = ctl_plugin_json(h, "g.so");
		CHECK(p != NULL && strcmp(jstr(p, "name"), "good") == 0);
		json_object_put(p);
	}
	check_log_has(&B, sighup_mark, "SIGHUP: rescanning");

	/* the rescans and reloads above never touched the unchanged reconciler */
	for (int i = 0; i < 2; i++) {
		struct host *h = hs[i];
		check_untouched(h, &before[i], "reload of an unchanged file");
		check_log_has_no(h, mark[i], "hot reload");
		check_log_has_no(h, mark[i], "loaded from reconciler.so");
		check_log_has_no(h, mark[i], "refusing plugin file reconciler.so");
		check_log_has(h, mark[i], "plugin good 1.0.0 loaded from g.so");
		remove_file(h, "g.so");
		check_untouched(h, &before[i], "removal of another plugin");
	}
}

static void test_refused_files_leave_the_running_plugin_alone(void)
{
	struct host *L = leader_host();
	struct snap before = snap_of(L);
	long mark = host_log_size(L);
	CHECK_STR_EQ(before.state, "leading");
	CHECK(before.token > 0);

	/* not a plugin, and a shared object with a wrong descriptor magic */
	host_install_text(L, "this is not a shared object\n", "x.so", 0644);
	host_install_file(L, built_test_plugin("bad-magic"), "bad.so", 0644);
	json_object *p =
	    ctl_wait_plugin(L, "x.so", p_failed_with, "not an ELF file", 5000, "x.so refused");
	json_object_put(p);
	p = ctl_wait_plugin(L, "bad.so", p_failed_with, "wrong descriptor magic", 5000,
			    "bad.so refused");
	fprintf(stderr, "bad.so: %s\n", jstr(p, "error"));
	CHECK(jget(p, "leader") == NULL);
	CHECK_INT_EQ(jint(p, "fencing_token"), 0);
	json_object_put(p);
	table_cell_is(L, "x.so", "STATE", "failed", false);
	table_cell_is(L, "x.so", "LAST ERROR", "not an ELF file", true);
	table_cell_is(L, "bad.so", "STATE", "failed", false);
	table_cell_is(L, "bad.so", "LAST ERROR", "wrong descriptor magic", true);
	/* the good plugin is not affected */
	table_cell_is(L, PLUGIN, "STATE", "leading", false);
	table_cell_is(L, PLUGIN, "LAST ERROR", "-", false);
	p = ctl_plugin_json(L, PLUGIN);
	CHECK(jget(p, "error") == NULL);
	CHECK(jbool(p, "ready"));
	json_object_put(p);
	check_untouched(L, &before, "refused new files");
	CHECK_STR_EQ(obs_leader(g_obs), L->node);

	/* the same plugin and release under another file name: the running
	 * file keeps running (a tie), the other is superseded by it */
	host_install_plugin(L, "1.0.0", "other.so");
	p = ctl_wait_plugin(L, "other.so", p_superseded_by, "reconciler.so", 5000,
			    "other.so superseded by reconciler.so");
	CHECK_STR_EQ(jstr(p, "name"), PLUGIN);
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	CHECK(jget(p, "error") == NULL);
	json_object_put(p);
	check_untouched(L, &before, "a second file of the same plugin and release");

	/* a broken replacement of the running plugin: refused, the previous
	 * instance keeps running, the reason is shown */
	host_install_text(L, "garbage\n", "reconciler.so", 0644);
	p = ctl_wait_plugin(L, PLUGIN, p_error_with, "not an ELF file", 5000,
			    "the broken reconciler.so refused");
	fprintf(stderr, "reconciler: %s\n", jstr(p, "error"));
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	CHECK_STR_EQ(jstr(p, "file"), "reconciler.so");
	CHECK(jbool(p, "ready"));
	json_object_put(p);
	table_cell_is(L, PLUGIN, "STATE", "leading", false);
	table_cell_is(L, PLUGIN, "RELEASE", "1.0.0", false);
	table_cell_is(L, PLUGIN, "LAST ERROR", "not an ELF file", true);
	check_untouched(L, &before, "a broken replacement");
	CHECK_STR_EQ(obs_leader(g_obs), L->node);

	/* a replacement declaring another plugin: refused the same way */
	host_install_file(L, built_test_plugin("good"), "reconciler.so", 0644);
	p = ctl_wait_plugin(L, PLUGIN, p_error_with,
			    "now declares plugin 'good' instead of 'reconciler'", 5000,
			    "a replacement with another name refused");
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	json_object_put(p);
	CHECK(ctl_plugin_json(L, "good") == NULL);
	check_untouched(L, &before, "a replacement declaring another name");
	host_install_text(L, "garbage\n", "reconciler.so", 0644);
	p = ctl_wait_plugin(L, PLUGIN, p_error_with, "not an ELF file", 5000,
			    "the broken reconciler.so refused again");
	json_object_put(p);

	/* the help says reload exits 1 when the daemon reports a failed reload:
	 * reloading the broken file is refused */
	struct ctl_out o;
	int st = host_ctl(L, &o, "reload", PLUGIN, NULL);
	EXPECT(st == 1,
	       "`leaseholdctl reload reconciler` of a refused file exited %d (stdout \"%s\", "
	       "stderr \"%s\"), want 1 with the reason",
	       st, o.out, o.err);
	ctl_out_free(&o);
	check_untouched(L, &before, "a reload of the broken file");

	/* the good bytes back: the same content as the running instance, no
	 * reload, the error is cleared */
	host_install_plugin(L, "1.0.0", "reconciler.so");
	p = ctl_wait_plugin(L, PLUGIN, p_no_error, NULL, 5000, "the error cleared");
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	json_object_put(p);
	check_untouched(L, &before, "the good file back");

	/* removing the refused files removes their rows only */
	remove_file(L, "x.so");
	remove_file(L, "bad.so");
	remove_file(L, "other.so");
	check_untouched(L, &before, "removal of refused files");
	CHECK_INT_EQ(host_ctl(L, &o, "plugins", NULL), 0);
	CHECK_INT_EQ(ctl_table_rows(o.out), 1);
	ctl_out_free(&o);
	check_log_has_no(L, mark, "hot reload");
	check_log_has_no(L, mark, "stopping reconciler");
	CHECK_STR_EQ(obs_leader(g_obs), L->node);
}

static void test_removing_the_leaders_file_stops_it_gracefully(void)
{
	struct host *L = leader_host(), *O = other_host(L);
	long mark = host_log_size(L);
	char path[700];
	CHECK(member_rev(L) > 0);
	CHECK(unlink(host_plugin_path(L, "reconciler.so", path, sizeof(path))) == 0);
	/* graceful: the leader resigns; no wait for its lease (ttl 2 s) */
	long ms = obs_wait_leader(g_obs, O->node, 5000);
	fprintf(stderr, "%s leads %ld ms after the file was removed on %s\n", O->node, ms, L->node);
	CHECK(ms < 1500);
	obs_wait_members(g_obs, 1, 5000);
	CHECK_INT_EQ(member_rev(L), 0);
	check_log_has(L, mark, "plugin file reconciler.so removed; stopping reconciler");
	/* on_deposed ran: the plugin's line reaches the log through the
	 * worker, possibly after the successor is seen */
	host_wait_log(&T, L, mark, "plugin reconciler: no longer leading (token", 1, 10000);

	json_object *p = ctl_wait_plugin(L, PLUGIN, p_absent, NULL, 5000, "reconciler gone");
	CHECK(p == NULL);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(L, &o, "plugins", NULL), 0);
	CHECK(strstr(o.out, "(no plugins loaded)"));
	CHECK_INT_EQ(ctl_table_rows(o.out), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(L, &o, "plugins", "--json", NULL), 0);
	json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array) && json_object_array_length(a) == 0);
	json_object_put(a);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(L, &o, "status", PLUGIN, NULL), 2);
	CHECK(strstr(o.err, "no plugin named 'reconciler'"));
	ctl_out_free(&o);

	/* the other node leads alone */
	p = ctl_wait_plugin(O, PLUGIN, p_leading_alone, O->node, 5000, "the other node leading");
	CHECK(jint(p, "fencing_token") > 0);
	json_object_put(p);
	CHECK_INT_EQ(host_ctl(O, &o, "members", PLUGIN, "--json", NULL), 0);
	a = json_tokener_parse(o.out);
	CHECK(a && json_object_array_length(a) == 1);
	CHECK_STR_EQ(jstr(json_object_array_get_idx(a, 0), "node"), O->node);
	json_object_put(a);
	ctl_out_free(&o);

	/* and the file back: the node joins again behind the leader */
	host_install_plugin(L, "1.0.0", "reconciler.so");
	obs_wait_members(g_obs, 2, 10000);
	p = ctl_wait_plugin(L, PLUGIN, p_campaigning_behind, O->node, 5000,
			    "reconciler back, campaigning");
	CHECK(jget(p, "error") == NULL);
	CHECK_INT_EQ(jint(p, "fencing_token"), 0);
	json_object_put(p);
	CHECK_STR_EQ(obs_leader(g_obs), O->node);
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_start_two_hosts);
	RUN(test_reload_of_an_unchanged_file_and_rescan_after_chmod);
	RUN(test_refused_files_leave_the_running_plugin_alone);
	RUN(test_removing_the_leaders_file_stops_it_gracefully);

	hosts_terminate((struct host *const[]){&A, &B}, 2, 10000, true);
	e2e_stop(g_etcd, &T, g_obs);
	if (g_expect_failures) {
		fprintf(stderr, "%d EXPECT check(s) failed (see above)\n", g_expect_failures);
		return 1;
	}
	return CHECK_EXIT();
}
