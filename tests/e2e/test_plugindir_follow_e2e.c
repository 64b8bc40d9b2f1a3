/* SPDX-License-Identifier: MIT */
/*
 * test_plugindir_follow_e2e - running `leasehold` daemons follow the
 * configured --plugin-dir path while deploy tools replace what it names
 * (real etcd, the real example plugin):
 * - `mv plugins plugins.old; mkdir plugins`: the directory is gone, then
 *   empty; nothing stops, no member record is touched; the same bytes
 *   dropped into the new directory need no reload, and a new file there is
 *   noticed;
 * - the directory removed and restored: the same;
 * - a symlink swapped between release directories during a rollout: a hot
 *   reload to the new release, the member record never deleted; a swap to
 *   a directory with the same bytes reloads nothing;
 * - the directory's parent replaced: the same bytes, nothing changes.
 * While the directory is gone, `plugins` (table and JSON) shows why on
 * every row, leasehold_plugin_dir_ok is 0 and the log says it once.
 *
 * Host a runs from deploy/plugins.d -> releases/1 (a symlink in a parent
 * that gets replaced), host b from a plain directory. Waiting is for events
 * with deadlines: cluster events through an observer election; the
 * daemon's view by polling `plugins --json` and /metrics with a deadline
 * (neither offers an event).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "files.h"
#include "http_client.h"

#define PFX "/lhpf"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;
static int g_port[2];

static int port_of(const struct host *h)
{
	return h == &A ? g_port[0] : g_port[1];
}

/* the member record of h: create and mod revision (0 when absent) */
static void member_revs(const struct host *h, int64_t *ret_create, int64_t *ret_mod)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/members/%s", h->node);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, key, &kvs);
	*ret_create = *ret_mod = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->key_len == strlen(key) &&
		    memcmp(kvs[i]->key, key, kvs[i]->key_len) == 0) {
			*ret_create = kvs[i]->create_revision;
			*ret_mod = kvs[i]->mod_revision;
		}
	tu_list_free(kvs, n);
}

/* what the reconciler on h looks like now */
struct snap {
	char state[32], release[32];
	int64_t token, member_create, member_mod;
};

static struct snap snap_of(const struct host *h)
{
	struct snap s = {{0}, {0}, 0, 0, 0};
	json_object *p = ctl_plugin_json(h, PLUGIN);
	CHECK(p != NULL);
	snprintf(s.state, sizeof(s.state), "%s", jstr(p, "state"));
	snprintf(s.release, sizeof(s.release), "%s", jstr(p, "release"));
	json_object *t = jget(p, "fencing_token");
	s.token = t ? json_object_get_int64(t) : 0;
	json_object_put(p);
	member_revs(h, &s.member_create, &s.member_mod);
	CHECK(s.member_create > 0);
	return s;
}

/* nothing about the running plugin changed: state, release, term, and the
 * member record neither deleted nor rewritten */
static void check_untouched(const struct host *h, const struct snap *b, const char *when)
{
	struct snap n = snap_of(h);
	if (strcmp(n.state, b->state) != 0 || strcmp(n.release, b->release) != 0 ||
	    n.token != b->token || n.member_create != b->member_create ||
	    n.member_mod != b->member_mod) {
		fprintf(stderr,
			"%s on %s: state %s -> %s, release %s -> %s, token %lld -> %lld, member "
			"record create %lld -> %lld, mod %lld -> %lld\n",
			when, h->node, b->state, n.state, b->release, n.release,
			(long long)b->token, (long long)n.token, (long long)b->member_create,
			(long long)n.member_create, (long long)b->member_mod,
			(long long)n.member_mod);
		exit(1);
	}
}

static void check_log_count(const struct host *h, long mark, const char *what, size_t want)
{
	size_t n = host_log_count(h, mark, what);
	if (n != want) {
		char *log = host_log_since(h, mark);
		fprintf(stderr, "%s's log has \"%s\" %zu times since the mark, want %zu:\n%s\n",
			h->node, what, n, want, log);
		free(log);
		exit(1);
	}
}

static bool p_error_with(json_object *p, const void *arg)
{
	const char *e = jstr(p, "error");
	return p && e && strstr(e, (const char *)arg);
}

static bool p_no_error(json_object *p, const void *arg)
{
	(void)arg;
	return p && jget(p, "error") == NULL;
}

static bool p_release(json_object *p, const void *arg)
{
	const char *r = jstr(p, "release"), *s = jstr(p, "state");
	return p && r && strcmp(r, (const char *)arg) == 0 && s && strcmp(s, "loading") != 0 &&
	       jget(p, "error") == NULL;
}

static bool p_state(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state");
	return p && s && strcmp(s, (const char *)arg) == 0;
}

static bool p_failed(json_object *p, const void *arg)
{
	(void)arg;
	const char *s = jstr(p, "state");
	return p && s && strcmp(s, "failed") == 0;
}

static bool p_absent(json_object *p, const void *arg)
{
	(void)arg;
	return p == NULL;
}

struct metric_want {
	const struct host *h;
	double value;
};

static bool p_dir_ok_is(void *arg)
{
	const struct metric_want *w = arg;
	struct http_reply r;
	double v = -1;
	bool ok = http_request(port_of(w->h), NULL, "/metrics", 2000, &r) == 200 &&
		  http_metric(r.body, "leasehold_plugin_dir_ok", &v) == 0 && v == w->value;
	http_reply_free(&r);
	return ok;
}

static void wait_dir_ok(const struct host *h, double value)
{
	struct metric_want w = {h, value};
	tu_wait(&T, p_dir_ok_is, &w, 5000, "leasehold_plugin_dir_ok");
}

/* while the directory is gone: every view says so, the plugin runs on */
static void check_gone_shown(const struct host *h, const char *why)
{
	json_object *p =
	    ctl_wait_plugin(h, PLUGIN, p_error_with, why, 5000, "the directory's error");
	fprintf(stderr, "%s: %s\n", h->node, jstr(p, "error"));
	json_object_put(p);
	wait_dir_ok(h, 0);
	struct ctl_out o;
	char cell[256];
	CHECK_INT_EQ(host_ctl(h, &o, "plugins", NULL), 0);
	const char *v = ctl_table_cell(o.out, PLUGIN, "LAST ERROR", cell, sizeof(cell));
	CHECK(v && strstr(v, "plugin directory"));
	ctl_out_free(&o);
}

/* a file dropped into the directory now at the path is noticed */
static void check_watched(struct host *h)
{
	host_install_text(h, "not a plugin\n", "probe.so", 0644);
	json_object *p = ctl_wait_plugin(h, "probe.so", p_failed, NULL, 5000, "probe.so noticed");
	json_object_put(p);
	char path[700];
	CHECK(unlink(host_plugin_path(h, "probe.so", path, sizeof(path))) == 0);
}

static void copy_release(const char *release, const char *dir, const char *as)
{
	char dst[PATH_MAX];
	snprintf(dst, sizeof(dst), "%s/%s", dir, as);
	test_copy_file(built_plugin(release), dst, 0644);
}

static void mkdir_in(char *buf, size_t len, const char *parent, const char *name)
{
	CHECK((size_t)snprintf(buf, len, "%s/%s", parent, name) < len);
	CHECK(mkdir(buf, 0755) == 0);
}

/* ---- tests ---- */

static void test_start(void)
{
	tu_del_prefix(&T, PFX "/");
	/* a: <dir>/deploy/plugins.d -> releases/1 */
	char deploy[600], rel[700], rel1[800];
	mkdir_in(deploy, sizeof(deploy), A.dir, "deploy");
	mkdir_in(rel, sizeof(rel), deploy, "releases");
	mkdir_in(rel1, sizeof(rel1), rel, "1");
	CHECK((size_t)snprintf(A.plugin_dir, sizeof(A.plugin_dir), "%.500s/plugins.d", deploy) <
	      sizeof(A.plugin_dir));
	CHECK(symlink("releases/1", A.plugin_dir) == 0);
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	CHECK_OK(harness_free_ports(g_port, 2));
	struct host *hs[2] = {&A, &B};
	for (int i = 0; i < 2; i++) {
		char addr[64];
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", g_port[i]);
		const char *args[] = {
		    HOST_TEST_ARGS(PFX), "--log-level", "debug", "--http", addr, NULL};
		host_start(hs[i], harness_etcd_urls(g_etcd), args);
	}
	obs_wait_members(g_obs, 2, 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	for (int i = 0; i < 2; i++) {
		struct ctl_out o;
		host_wait_control(hs[i], 10000);
		CHECK_INT_EQ(host_ctl(hs[i], &o, "wait-ready", PLUGIN, "--timeout", "10", NULL), 0);
		ctl_out_free(&o);
		wait_dir_ok(hs[i], 1);
	}
}

static void test_mv_and_mkdir(void)
{
	struct snap a = snap_of(&A), b = snap_of(&B);
	long mark = host_log_size(&B);
	char old[700];
	snprintf(old, sizeof(old), "%s.old", B.plugin_dir);
	CHECK(rename(B.plugin_dir, old) == 0);
	check_gone_shown(&B, "is gone (No such file or directory)");
	CHECK(mkdir(B.plugin_dir, 0755) == 0);
	check_gone_shown(&B, "was replaced by an empty directory");
	check_untouched(&B, &b, "mv + mkdir");
	/* the same bytes into the new directory: no reload, the error clears */
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	json_object *p = ctl_wait_plugin(&B, PLUGIN, p_no_error, NULL, 5000, "the error cleared");
	json_object_put(p);
	wait_dir_ok(&B, 1);
	check_watched(&B);
	check_untouched(&B, &b, "the same bytes in the new directory");
	check_untouched(&A, &a, "the other host");
	CHECK_INT_EQ(obs_members(g_obs), 2);
	/* once each: gone, empty, back */
	check_log_count(&B, mark, "is gone (", 1);
	check_log_count(&B, mark, "was replaced by an empty directory", 1);
	check_log_count(&B, mark, "is back; rescanning it", 1);
	check_log_count(&B, mark, "hot reload", 0);
	check_log_count(&B, mark, "stopping " PLUGIN, 0);
	char f[800];
	snprintf(f, sizeof(f), "%s/reconciler.so", old);
	CHECK(unlink(f) == 0);
	CHECK(rmdir(old) == 0);
}

static void test_removed_and_restored(void)
{
	struct snap b = snap_of(&B);
	long mark = host_log_size(&B);
	char f[700], tmp[700];
	CHECK(unlink(host_plugin_path(&B, "reconciler.so", f, sizeof(f))) == 0);
	CHECK(rmdir(B.plugin_dir) == 0);
	check_gone_shown(&B, "is gone");
	check_untouched(&B, &b, "the directory removed");
	/* a rescan meanwhile (SIGHUP, reload) says why and changes nothing */
	long hup = host_log_size(&B);
	host_signal(&B, SIGHUP);
	host_wait_log(&T, &B, hup, "cannot scan: plugin directory", 1, 5000);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "reload", NULL), 0);
	ctl_out_free(&o);
	check_untouched(&B, &b, "a rescan while the directory is gone");
	/* restored the way a deploy tool does: filled, then renamed in */
	snprintf(tmp, sizeof(tmp), "%s.new", B.plugin_dir);
	CHECK(mkdir(tmp, 0755) == 0);
	copy_release("1.0.0", tmp, "reconciler.so");
	CHECK(rename(tmp, B.plugin_dir) == 0);
	json_object *p = ctl_wait_plugin(&B, PLUGIN, p_no_error, NULL, 5000, "back");
	json_object_put(p);
	wait_dir_ok(&B, 1);
	check_watched(&B);
	check_untouched(&B, &b, "the directory restored");
	/* and SIGHUP works on the restored directory: a file fixed by chmod
	 * (no directory event) is taken up, what runs is not reloaded */
	host_install_file(&B, built_test_plugin("good"), "g.so", 0666);
	p = ctl_wait_plugin(&B, "g.so", p_failed, NULL, 5000, "g.so refused for its mode");
	json_object_put(p);
	char g[700];
	CHECK(chmod(host_plugin_path(&B, "g.so", g, sizeof(g)), 0644) == 0);
	host_signal(&B, SIGHUP);
	p = ctl_wait_plugin(&B, "good", p_state, "leading", 5000, "g.so loaded by the rescan");
	json_object_put(p);
	CHECK(unlink(g) == 0);
	p = ctl_wait_plugin(&B, "good", p_absent, NULL, 5000, "good stopped with its file");
	check_untouched(&B, &b, "SIGHUP on the restored directory");
	check_log_count(&B, mark, "hot reload", 0);
	check_log_count(&B, mark, "stopping " PLUGIN, 0);
}

/* swap a's plugins.d to releases/<to> (a new link renamed over the old) */
static void swap_link(const char *to)
{
	char tmp[700], target[64];
	snprintf(tmp, sizeof(tmp), "%s.tmp", A.plugin_dir);
	snprintf(target, sizeof(target), "releases/%s", to);
	CHECK(symlink(target, tmp) == 0);
	CHECK(rename(tmp, A.plugin_dir) == 0);
}

static void test_symlink_swap_rollout(void)
{
	struct snap a = snap_of(&A), b = snap_of(&B);
	long mark = host_log_size(&A);
	char rel[700], r2[800], r3[800];
	snprintf(rel, sizeof(rel), "%s/deploy/releases", A.dir);
	mkdir_in(r2, sizeof(r2), rel, "2");
	copy_release("1.1.0", r2, "reconciler.so");
	swap_link("2");
	json_object *p = ctl_wait_plugin(&A, PLUGIN, p_release, "1.1.0", 10000, "a at 1.1.0");
	json_object_put(p);
	obs_wait_member_release(g_obs, A.node, REL(1, 1, 0), 10000);
	/* the release that can act leads: b (1.0.0) keeps leading while a's
	 * 1.1.0 (incompatible with 1.0.0) waits for it (docs/design.md, "Which
	 * release leads during a rollout") */
	obs_wait_leader(g_obs, B.node, 10000);
	struct snap a2 = snap_of(&A);
	/* a hot reload rewrites the member record, it never deletes it */
	CHECK_INT_EQ(a2.member_create, a.member_create);
	check_log_count(&A, mark, "hot reload to 1.1.0", 1);
	check_log_count(&A, mark, "is gone (", 0);
	int64_t bc, bm;
	member_revs(&B, &bc, &bm);
	CHECK_INT_EQ(bc, b.member_create);
	CHECK_INT_EQ(bm, b.member_mod);
	CHECK_INT_EQ(obs_members(g_obs), 2);
	check_watched(&A);

	/* another release directory with the same bytes: nothing reloads */
	mark = host_log_size(&A);
	mkdir_in(r3, sizeof(r3), rel, "3");
	copy_release("1.1.0", r3, "reconciler.so");
	swap_link("3");
	check_watched(&A); /* once this file in releases/3 is seen, the swap was handled */
	check_untouched(&A, &a2, "a swap to the same bytes");
	check_log_count(&A, mark, "hot reload", 0);
}

static void test_parent_replaced(void)
{
	struct snap a = snap_of(&A);
	long mark = host_log_size(&A);
	/* deploy.next/plugins.d holds the same bytes as what runs */
	char next[600], deploy[600], pd[700], prev[600];
	mkdir_in(next, sizeof(next), A.dir, "deploy.next");
	mkdir_in(pd, sizeof(pd), next, "plugins.d");
	copy_release("1.1.0", pd, "reconciler.so");
	snprintf(deploy, sizeof(deploy), "%s/deploy", A.dir);
	snprintf(prev, sizeof(prev), "%s/deploy.prev", A.dir);
	if (renameat2(AT_FDCWD, next, AT_FDCWD, deploy, RENAME_EXCHANGE) < 0) {
		CHECK(errno == EINVAL || errno == ENOSYS);
		CHECK(rename(deploy, prev) == 0); /* no atomic exchange here: a gap */
		CHECK(rename(next, deploy) == 0);
	}
	check_watched(&A);
	check_untouched(&A, &a, "the parent replaced");
	check_log_count(&A, mark, "hot reload", 0);
	check_log_count(&A, mark, "stopping " PLUGIN, 0);
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_start);
	RUN(test_mv_and_mkdir);
	RUN(test_removed_and_restored);
	RUN(test_symlink_swap_rollout);
	RUN(test_parent_replaced);

	hosts_terminate((struct host *const[]){&A, &B}, 2, 10000, true);
	e2e_stop(g_etcd, &T, g_obs);
	return CHECK_EXIT();
}
