/* SPDX-License-Identifier: MIT */
/*
 * test_node_id_conflict_e2e - two hosts with one node id, with real
 * daemons, a real etcd and leaseholdctl (--ttl 10, so that a lease that is
 * merely left to expire would show):
 *  - a second host started with --node-id a while a runs is refused: no
 *    election key, no state record of its own; `plugins` and its JSON say
 *    why, naming a's lease, and so does its metric; the first host keeps campaigning and `members`
 *    shows one row for a; the plugin removed from the second host leaves
 *    a's member record alone;
 *  - once the first host stops, the second joins by itself;
 *  - a crash restart (SIGKILL, then the same host again) is not another
 *    host: it campaigns while its old key still lives, and `members` shows
 *    no conflict for it;
 *  - a conflict made behind the hosts' backs (a second live election key
 *    with node id b, written straight into etcd) shows in `members`, table
 *    and JSON, daemon and observer mode; `switchover --to b` is refused as
 *    ambiguous; the first b is not refused (the newer key gives way).
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "testutil.h"

#define PFX "/lhn"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A, TWIN, B; /* TWIN: another host, also --node-id a */
static char g_twin_http[32];
static int g_twin_port;

static const char *const ARGS[] = {"--prefix", PFX, "--ttl", "10", "--reconcile-wait", "0",
                                   "--reconcile-interval", "1h", NULL};
static const char *const TWIN_ARGS[] = {"--prefix", PFX, "--ttl", "10", "--reconcile-wait", "0",
                                        "--reconcile-interval", "1h", "--http", g_twin_http,
                                        NULL};

/* the twin's leasehold_node_id_conflict sample (-1: none) */
static double twin_conflict_metric(void)
{
	struct http_reply r;
	CHECK_INT_EQ(http_request(g_twin_port, NULL, "/metrics", 5000, &r), 200);
	double v = -1;
	if (http_metric(r.body, "leasehold_node_id_conflict{plugin=\"" PLUGIN "\"}", &v) < 0)
		v = -1;
	http_reply_free(&r);
	return v;
}

/* the twin's conflict metric is *(const double *)arg (/metrics answers
 * from the published snapshot, which follows the control socket's answer
 * within a publish: wait for it) */
static bool p_twin_conflict_is(void *arg)
{
	return twin_conflict_metric() == *(const double *)arg;
}

/* the leases of the election keys that carry node (up to max) */
static size_t keys_of(const char *node, int64_t *leases, size_t max)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/election/", &kvs), k = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->value_len == strlen(node) &&
		    memcmp(kvs[i]->value, node, kvs[i]->value_len) == 0) {
			if (k < max)
				leases[k] = kvs[i]->lease;
			k++;
		}
	tu_list_free(kvs, n);
	return k;
}

/* a field of the record P/N/<dir>/<node> (0: no record) */
static int64_t record_field(const char *dir, const char *node, bool create_rev)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/%s/%s", dir, node);
	struct etcd_kv *kv = tu_get_kv(&T, key);
	int64_t v = kv ? (create_rev ? kv->create_revision : kv->lease) : 0;
	etcd_kv_free(kv);
	return v;
}

/* the lease P/N/nodes/<node> is bound to (0: no record) */
static int64_t record_lease(const char *node)
{
	return record_field("nodes", node, false);
}

/* the create revision of P/N/members/<node> (0: none) */
static int64_t member_create_rev(const char *node)
{
	return record_field("members", node, true);
}

/* the last lease h's daemon logged since offset from */
static int64_t logged_lease(const struct host *h, long from)
{
	char *log = host_log_since(h, from);
	int64_t l = 0;
	for (const char *at = log; (at = strstr(at, "session: lease ")); at++)
		l = (int64_t)strtoull(at + strlen("session: lease "), NULL, 16);
	free(log);
	return l;
}

struct lease_want {
	const char *node;
	int64_t lease;
};

static bool p_campaigns_with(void *a)
{
	const struct lease_want *w = a;
	int64_t l[4];
	size_t n = keys_of(w->node, l, 4);
	for (size_t i = 0; i < n && i < 4; i++)
		if (l[i] == w->lease)
			return true;
	return false;
}

static bool p_record_of(void *a)
{
	const struct lease_want *w = a;
	return record_lease(w->node) == w->lease;
}

static bool p_held_conflict(struct json_object *p, const void *arg)
{
	const char *h = jstr(p, "held_back"), *st = jstr(p, "state");
	return h && strstr(h, "another host") && strstr(h, (const char *)arg) && st &&
	       strcmp(st, "standby") == 0;
}

static bool p_absent(struct json_object *p, const void *arg)
{
	(void)arg;
	return p == NULL;
}

static bool p_not_held(struct json_object *p, const void *arg)
{
	(void)arg;
	const char *h = jstr(p, "held_back");
	return p && (!h || !strstr(h, "another host"));
}

/* the members JSON row of node (NULL: none); *ret_rows the row count */
static struct json_object *member_row(struct json_object *a, const char *node, size_t *ret_rows)
{
	struct json_object *row = NULL;
	size_t n = a ? json_object_array_length(a) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *m = json_object_array_get_idx(a, i);
		const char *id = jstr(m, "node");
		if (id && strcmp(id, node) == 0) {
			CHECK(row == NULL); /* one row per node id */
			row = m;
		}
	}
	*ret_rows = n;
	return row;
}

static struct json_object *members_json(const struct host *h)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "members", PLUGIN, "-o", "json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	ctl_out_free(&o);
	return a;
}

struct row_want {
	const struct host *h;
	const char *node;
	int sessions;
	bool conflict;
};

static bool p_row(void *arg)
{
	const struct row_want *w = arg;
	struct json_object *a = members_json(w->h);
	size_t rows;
	struct json_object *m = member_row(a, w->node, &rows);
	bool ok = m && json_object_get_int(jget(m, "sessions")) == w->sessions &&
	          json_object_get_boolean(jget(m, "conflict")) == w->conflict;
	json_object_put(a);
	return ok;
}

static void test_second_host_with_the_same_id_is_refused(void)
{
	int64_t l[4];
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), ARGS);
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	host_wait_state(&A, PLUGIN, "loading", false, 15000);
	tu_wait(&T, p_row, &(struct row_want){&A, "a", 1, false}, 15000, "a campaigns");
	tu_wait(&T, p_row, &(struct row_want){&A, "b", 1, false}, 15000, "a sees b's member record");
	CHECK_INT_EQ(keys_of("a", l, 4), 1);
	int64_t la = l[0];
	/* the state record follows the election key by a coalesce delay */
	tu_wait(&T, p_record_of, &(struct lease_want){"a", la}, 5000, "a's state record");

	host_install_plugin(&TWIN, "1.0.0", "reconciler.so");
	host_start(&TWIN, harness_etcd_urls(g_etcd), TWIN_ARGS);
	char hex[32];
	snprintf(hex, sizeof(hex), "lease 0x%" PRIx64 ")", (uint64_t)la);
	struct json_object *p = ctl_wait_plugin(&TWIN, PLUGIN, p_held_conflict, hex, 15000,
	                                        "the twin refused, naming a's lease");
	fprintf(stderr, "twin: held_back: %s\n", jstr(p, "held_back"));
	CHECK(strstr(jstr(p, "held_back"), "give each host its own --node-id"));
	json_object_put(p);
	/* the table says it too */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&TWIN, &o, "plugins", NULL), 0);
	char cell[128];
	CHECK(strstr(ctl_table_cell(o.out, PLUGIN, "LAST ERROR", cell, sizeof(cell)),
	             "held: another host"));
	ctl_out_free(&o);
	CHECK(host_log_count(&TWIN, 0, "not joining the election: another host") >= 1);
	tu_wait(&T, p_twin_conflict_is, &(double){1}, 5000, "the twin's conflict metric is 1");
	/* it made no election key and left a's state record alone; a runs on */
	CHECK_INT_EQ(keys_of("a", l, 4), 1);
	CHECK(l[0] == la);
	CHECK(record_lease("a") == la);
	struct json_object *a = members_json(&A);
	size_t rows;
	struct json_object *row = member_row(a, "a", &rows);
	CHECK(row != NULL);
	CHECK_INT_EQ(rows, 2);
	CHECK(json_object_get_boolean(jget(row, "campaigning")));
	CHECK(!json_object_get_boolean(jget(row, "conflict")));
	json_object_put(a);

	/* the plugin removed from the twin: a's member record is a's too, it stays */
	char path[700];
	int64_t member_created = member_create_rev("a");
	CHECK(member_created != 0);
	CHECK(unlink(host_plugin_path(&TWIN, "reconciler.so", path, sizeof(path))) == 0);
	json_object_put(ctl_wait_plugin(&TWIN, PLUGIN, p_absent, NULL, 10000, "the twin's plugin gone"));
	/* (a's host would put a deleted record back: the same creation proves
	 * it was never deleted) */
	CHECK(member_create_rev("a") == member_created);
	CHECK(record_lease("a") == la);
	host_install_plugin(&TWIN, "1.0.0", "reconciler.so");
	json_object_put(ctl_wait_plugin(&TWIN, PLUGIN, p_held_conflict, hex, 15000,
	                                "the twin refused again"));

	/* the first host goes: the twin joins by itself */
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	int64_t lt = logged_lease(&TWIN, 0);
	CHECK(lt != 0);
	tu_wait(&T, p_campaigns_with, &(struct lease_want){"a", lt}, 10000, "the twin campaigns");
	json_object_put(ctl_wait_plugin(&TWIN, PLUGIN, p_not_held, NULL, 5000, "the twin joined"));
	CHECK(host_log_count(&TWIN, 0, "no other session holds node id 'a' any more") >= 1);
	tu_wait(&T, p_twin_conflict_is, &(double){0}, 5000, "the twin's conflict metric is 0");
}

struct logged {
	const struct host *h;
	long from;
	int64_t lease;
};

static bool p_logged(void *a)
{
	struct logged *w = a;
	w->lease = logged_lease(w->h, w->from);
	return w->lease != 0;
}

static void test_crash_restart_is_no_conflict(void)
{
	int64_t l[4];
	int64_t old = logged_lease(&TWIN, 0);
	/* its state record names its lease before the kill: that is what tells
	 * its next run that the old key is its own */
	tu_wait(&T, p_record_of, &(struct lease_want){"a", old}, 10000, "the twin's record");
	host_signal(&TWIN, SIGKILL);
	CHECK_OK(host_wait(&TWIN, 5000));
	long from = host_log_size(&TWIN);
	long t0 = wall_ms_of_day();
	host_start(&TWIN, harness_etcd_urls(g_etcd), TWIN_ARGS);
	host_wait_control(&TWIN, 10000);
	struct logged lg = {&TWIN, from, 0};
	tu_wait(&T, p_logged, &lg, 10000, "the restarted host's session");
	int64_t now = lg.lease;
	tu_wait(&T, p_campaigns_with, &(struct lease_want){"a", now}, 5000,
	        "the restarted host campaigns");
	long ms = wall_ms_of_day() - t0;
	/* joined while the old run's key still lives (TTL 10 s) */
	size_t n = keys_of("a", l, 4);
	fprintf(stderr, "crash restart: campaigning after %ld ms, %zu key(s) of a\n", ms, n);
	CHECK_INT_EQ(n, 2);
	CHECK(l[0] == old || l[1] == old);
	/* two keys, one node: no conflict in the view */
	tu_wait(&T, p_row, &(struct row_want){&B, "a", 2, false}, 5000,
	        "a restart is shown as no conflict");
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "members", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "CONFLICT") == NULL);
	ctl_out_free(&o);
}

struct grant {
	bool done;
	int64_t lease;
};

static void on_granted(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct grant *g = ud;
	CHECK_OK(err);
	g->lease = r->lease_id;
	g->done = true;
}

static bool p_granted(void *a)
{
	return ((struct grant *)a)->done;
}

static void test_conflict_behind_the_back_shows(void)
{
	struct grant g = {0};
	CHECK_OK(etcd_lease_grant(T.etcd, 60, NULL, on_granted, &g, NULL));
	tu_wait(&T, p_granted, &g, 5000, "a lease");
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/election/%" PRIx64, (uint64_t)g.lease);
	tu_put_lease(&T, key, "b", 1, g.lease);

	tu_wait(&T, p_row, &(struct row_want){&TWIN, "b", 2, true}, 10000,
	        "members shows b's conflict");
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&TWIN, &o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	char cell[128];
	CHECK(strstr(ctl_table_cell(o.out, "b", "REASON", cell, sizeof(cell)),
	             "CONFLICT: 2 sessions"));
	CHECK(strstr(ctl_table_cell(o.out, "a", "REASON", cell, sizeof(cell)), "CONFLICT") == NULL);
	ctl_out_free(&o);
	/* observer mode reads the same from etcd */
	const char *argv[] = {"--etcd", harness_etcd_urls(g_etcd), "--prefix", PFX, "members",
	                      PLUGIN, "-o", "json", NULL};
	ctl_run(&o, NULL, argv);
	CHECK_INT_EQ(o.status, 0);
	struct json_object *a = json_tokener_parse(o.out);
	size_t rows;
	struct json_object *row = member_row(a, "b", &rows);
	CHECK(row && json_object_get_boolean(jget(row, "conflict")));
	CHECK_INT_EQ(json_object_get_int(jget(row, "sessions")), 2);
	json_object_put(a);
	ctl_out_free(&o);
	/* the newer key gives way: the real b is not refused */
	struct json_object *p = ctl_plugin_json(&B, PLUGIN);
	CHECK(p_not_held(p, NULL));
	json_object_put(p);
	/* whom would --to b name? refused, with the reason */
	CHECK(host_ctl(&TWIN, &o, "switchover", PLUGIN, "--to", "b", NULL) != 0);
	fprintf(stderr, "switchover --to b: %s", o.err);
	CHECK(strstr(o.err, "switchover refused: node b is ambiguous"));
	CHECK(strstr(o.err, "--node-id"));
	ctl_out_free(&o);

	tu_revoke(&T, g.lease);
	tu_wait(&T, p_row, &(struct row_want){&TWIN, "b", 1, false}, 10000,
	        "the conflict ends with the lease");
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	char twin[600];
	snprintf(twin, sizeof(twin), "%s/twin", harness_dir(g_etcd));
	CHECK(mkdir(twin, 0755) == 0);
	CHECK_OK(harness_free_ports(&g_twin_port, 1));
	snprintf(g_twin_http, sizeof(g_twin_http), "127.0.0.1:%d", g_twin_port);
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&TWIN, twin, "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_second_host_with_the_same_id_is_refused);
	RUN(test_crash_restart_is_no_conflict);
	RUN(test_conflict_behind_the_back_shows);

	host_signal(&TWIN, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&TWIN, 15000));
	CHECK_OK(host_wait(&B, 15000));
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
