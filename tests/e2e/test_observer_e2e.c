/* SPDX-License-Identifier: MIT */
/*
 * test_observer_e2e.c - leaseholdctl in observer mode (--etcd) against a
 * 3-member etcd with TLS (server certificate checked against the test CA)
 * and password auth, with two
 * real hosts on it and no daemon asked:
 * - reads: plugins, status, members, history, roles list answer from etcd
 *   with the same fields as the daemon's, one row per node;
 * - verbs: pause and resume reach the hosts, reconcile is served by the
 *   leader;
 * - daemon-only commands are refused and say so; watch without --etcd too;
 * - watch replays a known span of revisions (--from-revision/--to-revision):
 *   every change once, in revision order, the same changes as lines and as
 *   JSON lines, including the leader change and the terms of a handover.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "testutil.h"

#define PFX "/lhobs"
#define PLUGIN "reconciler"
#define PASSWORD "s3cret"

#define CHECK_JSTR(o, path, want) CHECK_STR_EQ(jstr((o), (path)), (want))

/* watch_time_ok - s is an RFC 3339 UTC time (2026-01-02T03:04:05Z) */
static bool watch_time_ok(const char *s)
{
	int y, mo, d, h, mi, sec;
	char z = 0, end = 0;
	return s && strlen(s) == 20 &&
	       sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c%c", &y, &mo, &d, &h, &mi, &sec, &z, &end) == 7 &&
	       z == 'Z' && y >= 2000 && mo >= 1 && mo <= 12;
}

static struct harness_etcd *H;
static struct tu T; /* its loop paces the waits; its client stays unused */
static struct host A, B;
static const char *g_ca;

/* obs - `leaseholdctl --etcd ... args...` (NULL-terminated), no daemon */
static int obs(struct ctl_out *o, ...)
{
	const char *const extra[] = {"--etcd-cacert", g_ca, "--etcd-user", "root", NULL};
	va_list ap;
	va_start(ap, o);
	int st = ctl_observer_vrun(o, harness_etcd_urls(H), PFX, extra, ap);
	va_end(ap);
	return st;
}

static json_object *obs_json(const char *cmd, const char *name)
{
	struct ctl_out o;
	if (obs(&o, cmd, name ? name : "-o", name ? "-o" : "json", name ? "json" : NULL, NULL) != 0) {
		fprintf(stderr, "FAIL: leaseholdctl --etcd %s: exit %d\n%s%s\n", cmd, o.status, o.out,
		        o.err);
		exit(1);
	}
	json_object *j = json_tokener_parse(o.out);
	if (!j)
		fprintf(stderr, "not JSON: %s\n%s\n", o.out, o.err);
	CHECK(j != NULL);
	ctl_out_free(&o);
	return j;
}

/* the etcd revision the observer read at (plugins' releases.revision) */
static int64_t read_revision(void)
{
	json_object *a = obs_json("plugins", NULL);
	CHECK_INT_EQ(json_object_array_length(a), 1);
	int64_t r = json_object_get_int64(jget(json_object_array_get_idx(a, 0), "releases.revision"));
	json_object_put(a);
	CHECK(r > 0);
	return r;
}

static const char *reason_of(json_object *rows, const char *node)
{
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		json_object *m = json_object_array_get_idx(rows, i);
		if (strcmp(jstr(m, "node"), node) == 0)
			return jstr(m, "reason");
	}
	return NULL;
}

static bool p_paused_seen(void *arg)
{
	json_object *rows = obs_json("members", PLUGIN);
	const char *r = reason_of(rows, "a");
	bool want = arg != NULL, seen = r && strstr(r, "paused");
	json_object_put(rows);
	return seen == want;
}

static void start_hosts(void)
{
	static const char *const env[] = {"LEASEHOLD_ETCD_PASSWORD=" PASSWORD, NULL};
	const char *args[] = {"--prefix", PFX, "--ttl", "3", "--reconcile-wait", "0",
	                      "--reconcile-interval", "1h", "--etcd-cacert", g_ca,
	                      "--etcd-user", "root", NULL};
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start_env(&A, harness_etcd_urls(H), args, env);
	host_wait_state(&A, PLUGIN, "leading", true, 30000);
	host_start_env(&B, harness_etcd_urls(H), args, env);
	host_wait_state(&B, PLUGIN, "campaigning", true, 30000);
}

/* the newest term in the history is node *arg's (its record follows the
 * term's first reconcile) */
static bool p_history_newest_is(void *arg)
{
	json_object *h = obs_json("history", PLUGIN);
	json_object *t = json_object_array_length(h) > 0 ? json_object_array_get_idx(h, 0) : NULL;
	const char *node = t ? jstr(t, "node") : NULL;
	bool ok = node && strcmp(node, (const char *)arg) == 0;
	json_object_put(h);
	return ok;
}

static bool p_rows_ready(void *arg)
{
	(void)arg;
	json_object *rows = obs_json("members", PLUGIN);
	int ok = 0;
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		json_object *m = json_object_array_get_idx(rows, i);
		json_object *rd = jget(m, "ready");
		ok += rd && json_object_get_boolean(rd);
	}
	json_object_put(rows);
	return ok == 2;
}

static void test_reads(void)
{
	tu_wait(&T, p_rows_ready, NULL, 20000, "both nodes ready in their records");
	json_object *a = obs_json("plugins", NULL);
	CHECK_INT_EQ(json_object_array_length(a), 1);
	json_object *p = json_object_array_get_idx(a, 0);
	CHECK_JSTR(p, "name", PLUGIN);
	CHECK_JSTR(p, "state", "observed");
	CHECK_JSTR(p, "leader", "a");
	CHECK_INT_EQ(json_object_object_length(p), 32); /* the daemon's fields */
	CHECK_JSTR(p, "status.state", "DONE");
	CHECK(jstr(p, "acting.release") != NULL); /* the rule, from the records */
	CHECK_INT_EQ(json_object_get_int64(jget(p, "releases.members")), 2);
	json_object *nodes = jget(p, "nodes");
	CHECK_INT_EQ(json_object_array_length(nodes), 2);
	for (size_t i = 0; i < 2; i++) {
		json_object *m = json_object_array_get_idx(nodes, i);
		bool is_a = strcmp(jstr(m, "node"), "a") == 0;
		CHECK_JSTR(m, "state", is_a ? "leading" : "campaigning");
		CHECK(!json_object_get_boolean(jget(m, "local"))); /* no local node here */
	}
	json_object_put(a);

	struct ctl_out o;
	char cell[128];
	CHECK_INT_EQ(obs(&o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK_INT_EQ(ctl_table_rows(o.out), 2);
	CHECK_STR_EQ(ctl_table_cell(o.out, "a", "STATE", cell, sizeof(cell)), "leading");
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "LEADER", cell, sizeof(cell)), "no");
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "leader:        a\n"));
	CHECK(strstr(o.out, "+ Nodes "));
	ctl_out_free(&o);
	json_object *h = obs_json("history", PLUGIN);
	CHECK(json_object_array_length(h) >= 1);
	CHECK_JSTR(json_object_array_get_idx(h, 0), "node", "a");
	json_object_put(h);
	CHECK_INT_EQ(obs(&o, "roles", "list", NULL), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "status", "nosuch", NULL), 2);
	CHECK(strstr(o.err, "no plugin named 'nosuch'"));
	ctl_out_free(&o);
}

static void test_daemon_only_refused(void)
{
	struct ctl_out o;
	CHECK_INT_EQ(obs(&o, "reload", NULL), 2);
	CHECK(strstr(o.err, "needs the local daemon"));
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "wait-ready", PLUGIN, "--timeout", "1", NULL), 2);
	CHECK(strstr(o.err, "needs the local daemon"));
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "leave", "--yes", NULL), 2);
	CHECK(strstr(o.err, "needs the local daemon"));
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "roles", "set", "a", "x", NULL), 2);
	CHECK(strstr(o.err, "needs the local daemon"));
	ctl_out_free(&o);
	/* watch needs etcd: refused against a daemon */
	CHECK_INT_EQ(host_ctl(&A, &o, "watch", NULL), 2);
	CHECK(strstr(o.err, "watch reads etcd directly"));
	ctl_out_free(&o);
}

static int64_t g_r0, g_r1;

static void test_verbs(void)
{
	struct ctl_out o;
	g_r0 = read_revision();
	CHECK_INT_EQ(obs(&o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	tu_wait(&T, p_paused_seen, (void *)1, 15000, "the leader's record says paused");
	CHECK_INT_EQ(obs(&o, "reconcile", PLUGIN, "--timeout", "5", NULL), 2); /* refused */
	CHECK(strstr(o.err, "is paused"));
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	tu_wait(&T, p_paused_seen, NULL, 15000, "the leader's record no longer paused");
	CHECK_INT_EQ(obs(&o, "reconcile", PLUGIN, "--timeout", "20", NULL), 0);
	CHECK(strstr(o.out, "served by the leader"));
	ctl_out_free(&o);

	/* a handover: the leader stops */
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	host_wait_state(&B, PLUGIN, "leading", true, 20000);
	json_object *a = obs_json("plugins", NULL);
	CHECK_JSTR(json_object_array_get_idx(a, 0), "leader", "b");
	json_object_put(a);
	tu_wait(&T, p_history_newest_is, (void *)"b", 15000, "b's term in the history");
	g_r1 = read_revision();
}

/* the replayed span as JSON lines: in order, each change once */
static void test_watch_replay(void)
{
	char from[32], to[32];
	struct ctl_out o, t;
	snprintf(from, sizeof(from), "%lld", (long long)g_r0);
	snprintf(to, sizeof(to), "%lld", (long long)g_r1);
	CHECK_INT_EQ(obs(&o, "watch", PLUGIN, "--from-revision", from, "--to-revision", to, "-o",
	                 "json", "--timeout", "60", NULL),
	             0);
	CHECK_INT_EQ(obs(&t, "watch", PLUGIN, "--from-revision", from, "--to-revision", to,
	                 "--timeout", "60", NULL),
	             0);
	fprintf(stderr, "%s", t.out);
	int64_t last = g_r0;
	int pauses = 0, resumes = 0, leader_b = 0, ended_a = 0, began_b = 0, requests = 0;
	size_t json_lines = 0, text_lines = 0;
	char seen[64][96];
	size_t n_seen = 0;
	for (char *l = o.out; l && *l;) {
		char *nl = strchr(l, '\n');
		CHECK(nl != NULL);
		*nl = '\0';
		json_object *j = json_tokener_parse(l);
		CHECK(j != NULL);
		json_lines++;
		int64_t rev = json_object_get_int64(jget(j, "revision"));
		CHECK(rev >= last && rev > g_r0 && rev <= g_r1); /* in revision order */
		last = rev;
		const char *kind = jstr(j, "kind"), *node = jstr(j, "node");
		char id[96];
		snprintf(id, sizeof(id), "%lld %s %s", (long long)rev, kind, node ? node : "-");
		for (size_t i = 0; i < n_seen; i++)
			CHECK(strcmp(seen[i], id) != 0); /* once */
		if (n_seen < 64)
			snprintf(seen[n_seen++], sizeof(seen[0]), "%s", id);
		CHECK_JSTR(j, "plugin", PLUGIN);
		CHECK(watch_time_ok(jstr(j, "time"))); /* when the client printed it */
		if (strcmp(kind, "pause") == 0) {
			if (json_object_get_boolean(jget(j, "paused")))
				pauses++;
			else
				resumes++;
			CHECK(pauses >= resumes); /* the pause first */
		} else if (strcmp(kind, "leader") == 0 && jstr(j, "leader") &&
		           strcmp(jstr(j, "leader"), "b") == 0) {
			CHECK_JSTR(j, "previous", "a");
			leader_b++;
		} else if (strcmp(kind, "history") == 0) {
			if (strcmp(jstr(j, "change"), "ended") == 0 && strcmp(node, "a") == 0) {
				CHECK_JSTR(j, "end_reason", "shutdown");
				ended_a++;
			}
			if (strcmp(jstr(j, "change"), "began") == 0 && strcmp(node, "b") == 0)
				began_b++;
		} else if (strcmp(kind, "reconcile") == 0) {
			requests++;
		}
		json_object_put(j);
		l = nl + 1;
	}
	for (char *l = t.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		/* "TIME REVISION PLUGIN: what changed" */
		char tm[32] = "";
		long long rev = 0;
		CHECK(sscanf(l, "%31s %lld ", tm, &rev) == 2 && watch_time_ok(tm) && rev > g_r0);
		text_lines++;
	}
	CHECK_INT_EQ(pauses, 1);
	CHECK_INT_EQ(resumes, 1);
	CHECK_INT_EQ(requests, 1);
	CHECK_INT_EQ(leader_b, 1);
	CHECK_INT_EQ(ended_a, 1);
	CHECK_INT_EQ(began_b, 1);
	CHECK_INT_EQ(text_lines, json_lines); /* the same changes either way */
	CHECK(strstr(t.out, ": paused by leaseholdctl@"));
	CHECK(strstr(t.out, ": leader b (was a)"));
	ctl_out_free(&o);
	ctl_out_free(&t);
}

int main(void)
{
	/* server TLS, no client certificates: etcd's JSON gateway refuses a
	 * request that presents a client certificate once auth is enabled
	 * ("CommonName of client sending a request against gateway will be
	 * ignored"), so password auth over TLS is what works together */
	int r = harness_etcd_start_tls(3, false, NULL, &H);
	if (r == -ENOENT) {
		fprintf(stderr, "SKIP: no openssl to make the test PKI\n");
		return 77;
	}
	CHECK_OK(r);
	CHECK_OK(harness_tls_files(H, &g_ca, NULL, NULL));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	harness_etcd_enable_auth(H, PASSWORD);
	setenv("LEASEHOLD_ETCD_PASSWORD", PASSWORD, 1); /* for the observer runs */
	tu_init(&T, harness_etcd_urls(H));
	host_setup(&A, harness_dir(H), "a");
	host_setup(&B, harness_dir(H), "b");
	start_hosts();

	RUN(test_reads);
	RUN(test_daemon_only_refused);
	RUN(test_verbs);
	RUN(test_watch_replay);

	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(B.exit_status, 0);
	curl_global_cleanup();
	tu_fini(&T);
	harness_etcd_free(H);
	return 0;
}
