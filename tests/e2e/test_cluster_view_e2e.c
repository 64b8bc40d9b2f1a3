/* SPDX-License-Identifier: MIT */
/*
 * test_cluster_view_e2e.c - the per-node state records (P/N/nodes/<node>)
 * and the cluster view, with real hosts and a real etcd:
 * - members / status on any node: one row per node with its state,
 *   readiness and last reconcile, the local node marked;
 * - the records are written only when they change: an event that changes
 *   no node's state costs no write (etcd's revision moves by exactly the
 *   event's own put), a pause changes exactly the leader's record, once;
 * - watch, started before a pause and a resume, prints each change once,
 *   in revision order (JSON lines), until interrupted;
 * - a node's record vanishes with its lease (SIGKILL past the TTL), and the
 *   view shows that node as down.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "election/election_node_record.h"

#define PFX "/lhv"
#define PLUGIN "reconciler"
#define K_NODES PFX "/" PLUGIN "/nodes/"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A, B;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};

/* node's record as etcd holds it: its kv version (number of writes since it
 * was created; 0 = absent) and, into *ret_state, its "state" */
static int64_t record_version(const char *node, char *ret_state, size_t len)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, K_NODES, &kvs);
	int64_t v = 0;
	if (ret_state && len)
		ret_state[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t pl = strlen(K_NODES);
		if (kvs[i]->key_len - pl != strlen(node) ||
		    memcmp(kvs[i]->key + pl, node, strlen(node)) != 0)
			continue;
		v = kvs[i]->version;
		CHECK(kvs[i]->lease != 0); /* bound to the node's lease */
		struct node_record r;
		CHECK_OK(node_record_decode(kvs[i]->value, kvs[i]->value_len, &r));
		if (ret_state)
			snprintf(ret_state, len, "%s", r.state);
	}
	tu_list_free(kvs, n);
	return v;
}

struct want {
	const char *node, *state;
	bool ready;
};

static bool p_record(void *arg)
{
	const struct want *w = arg;
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, K_NODES, &kvs);
	bool ok = false;
	for (size_t i = 0; i < n; i++) {
		struct node_record r;
		if (node_record_decode(kvs[i]->value, kvs[i]->value_len, &r) == 0 &&
		    strcmp(r.node, w->node) == 0)
			ok = strcmp(r.state, w->state) == 0 && r.ready == w->ready;
	}
	tu_list_free(kvs, n);
	return ok;
}

static bool p_no_record(void *arg)
{
	return record_version(arg, NULL, 0) == 0;
}

/* the members rows on h, as JSON */
static json_object *members_json(const struct host *h)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "members", PLUGIN, "-o", "json", NULL), 0);
	json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	ctl_out_free(&o);
	return a;
}

static json_object *row_of(json_object *a, const char *node)
{
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *m = json_object_array_get_idx(a, i);
		if (strcmp(jstr(m, "node"), node) == 0)
			return m;
	}
	fprintf(stderr, "FAIL: no row for node %s\n", node);
	exit(1);
}

struct row_want {
	const struct host *h;
	const char *node;
	const char *state; /* NULL: no record */
};

static bool p_row(void *arg)
{
	const struct row_want *w = arg;
	json_object *a = members_json(w->h);
	bool ok = false;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *m = json_object_array_get_idx(a, i);
		if (strcmp(jstr(m, "node"), w->node) != 0)
			continue;
		const char *s = jstr(m, "state");
		ok = w->state ? s && strcmp(s, w->state) == 0 : s == NULL;
	}
	json_object_put(a);
	return ok;
}

/* h's view holds both records as etcd does by now: a leading, ready,
 * its reconcile done; b campaigning (each host mirrors the records
 * through its watch, behind what the test read from etcd) */
static bool p_view_settled(void *arg)
{
	const struct host *h = arg;
	json_object *a = members_json(h), *ra = NULL, *rb = NULL;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *m = json_object_array_get_idx(a, i);
		if (strcmp(jstr(m, "node"), "a") == 0)
			ra = m;
		else if (strcmp(jstr(m, "node"), "b") == 0)
			rb = m;
	}
	const char *sa = ra ? jstr(ra, "state") : NULL, *sb = rb ? jstr(rb, "state") : NULL;
	bool ok = sa && sb && strcmp(sa, "leading") == 0 && strcmp(sb, "campaigning") == 0 &&
	          json_object_get_boolean(jget(ra, "ready")) && jget(ra, "last_reconcile") != NULL;
	json_object_put(a);
	return ok;
}

static void test_cluster_view(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), ARGS);
	host_wait_state(&A, PLUGIN, "leading", true, 20000);
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	host_wait_state(&B, PLUGIN, "campaigning", true, 20000);
	struct want wa = {"a", "leading", true}, wb = {"b", "campaigning", true};
	tu_wait(&T, p_record, &wa, 15000, "a's record: leading, ready");
	tu_wait(&T, p_record, &wb, 15000, "b's record: campaigning, ready");
	struct row_want rb = {&A, "b", "campaigning"};
	tu_wait(&T, p_row, &rb, 10000, "a shows b campaigning");
	tu_wait(&T, p_view_settled, (void *)&A, 10000, "a's view of both records");
	tu_wait(&T, p_view_settled, (void *)&B, 10000, "b's view of both records");

	/* every node shows both rows, itself marked */
	const struct host *hs[2] = {&A, &B};
	for (int k = 0; k < 2; k++) {
		json_object *a = members_json(hs[k]);
		CHECK_INT_EQ(json_object_array_length(a), 2);
		json_object *ra = row_of(a, "a"), *rbj = row_of(a, "b");
		CHECK_INT_EQ(json_object_object_length(ra), 17);
		CHECK(json_object_get_boolean(jget(ra, "healthy")));
		CHECK_INT_EQ(json_object_get_int(jget(ra, "sessions")), 1);
		CHECK(!json_object_get_boolean(jget(ra, "conflict")));
		CHECK_STR_EQ(jstr(ra, "state"), "leading");
		CHECK_STR_EQ(jstr(rbj, "state"), "campaigning");
		CHECK_STR_EQ(jstr(rbj, "reason"), "another node leads");
		CHECK(json_object_get_boolean(jget(ra, "ready")));
		CHECK(json_object_get_boolean(jget(ra, "member")));
		CHECK_STR_EQ(jstr(ra, "state_record"), "valid");
		CHECK(jget(ra, "last_reconcile") != NULL); /* the leader reconciled */
		CHECK(json_object_get_boolean(jget(jget(ra, "last_reconcile"), "ok")));
		CHECK(jget(rbj, "last_reconcile") == NULL);
		CHECK(json_object_get_boolean(jget(ra, "local")) == (hs[k] == &A));
		CHECK(json_object_get_boolean(jget(rbj, "local")) == (hs[k] == &B));
		json_object_put(a);
	}
	/* the table: one row per node, STATE and LOCAL columns */
	struct ctl_out o;
	char cell[128];
	CHECK_INT_EQ(host_ctl(&B, &o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK_INT_EQ(ctl_table_rows(o.out), 2);
	CHECK_STR_EQ(ctl_table_cell(o.out, "a", "STATE", cell, sizeof(cell)), "leading");
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "STATE", cell, sizeof(cell)), "campaigning");
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "LOCAL", cell, sizeof(cell)), "*");
	CHECK_STR_EQ(ctl_table_cell(o.out, "a", "READY", cell, sizeof(cell)), "yes");
	ctl_out_free(&o);
	/* plugins: its table, then one row per node of each plugin */
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK_INT_EQ(ctl_table_rows(o.out), 1);
	const char *nodes = strstr(o.out, "\n+ Nodes ");
	CHECK(nodes != NULL);
	CHECK_INT_EQ(ctl_table_rows(nodes + 1), 2);
	CHECK(strstr(nodes, "| " PLUGIN " | a    | 1.0.0   | yes    | yes         | leading "));
	ctl_out_free(&o);
	/* status carries the same rows: "nodes" in JSON, a table in text */
	json_object *p = ctl_plugin_json(&A, PLUGIN);
	CHECK_INT_EQ(json_object_array_length(jget(p, "nodes")), 2);
	CHECK_INT_EQ(json_object_get_int64(jget(p, "config_revision")), 0);
	json_object_put(p);
	CHECK_INT_EQ(host_ctl(&A, &o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "+ Nodes "));
	ctl_out_free(&o);
}

/* a fake node's valid record: mirrored by every host, changes no host's state */
static int64_t put_fake_record(const char *node)
{
	char v[256];
	snprintf(v, sizeof(v),
	         "{\"v\":1,\"node\":\"%s\",\"release\":\"1.0.0\",\"state\":\"standby\"}", node);
	return tu_put(&T, K_NODES "zz", v, strlen(v));
}

static bool p_leader_paused(void *arg)
{
	(void)arg;
	json_object *a = members_json(&B);
	const char *r = jstr(row_of(a, "a"), "reason");
	bool seen = r && strstr(r, "paused");
	json_object_put(a);
	return seen;
}

static void test_written_on_change_only(void)
{
	char st[32];
	int64_t va = record_version("a", st, sizeof(st));
	int64_t vb = record_version("b", NULL, 0);
	CHECK(va > 0 && vb > 0);

	/* an event every host mirrors that changes nobody's state */
	int64_t rev = put_fake_record("zz");
	struct row_want rz = {&A, "zz", "standby"}, rzb = {&B, "zz", "standby"};
	tu_wait(&T, p_row, &rz, 10000, "a mirrors zz");
	tu_wait(&T, p_row, &rzb, 10000, "b mirrors zz");
	/* both hosts handled it: nothing was written since but our probe */
	int64_t probe = tu_put(&T, "/lhv-probe", "x", 1);
	CHECK_INT_EQ(probe, rev + 1);
	CHECK_INT_EQ(record_version("a", NULL, 0), va);
	CHECK_INT_EQ(record_version("b", NULL, 0), vb);
	tu_del(&T, K_NODES "zz");

	/* a pause changes the leader's record (its reason), once; not b's */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	struct ctl_out o2;
	tu_wait(&T, p_leader_paused, NULL, 10000, "b shows a's reason: paused");
	probe = tu_put(&T, "/lhv-probe", "y", 1);
	CHECK_INT_EQ(record_version("a", NULL, 0), va + 1);
	CHECK_INT_EQ(record_version("b", NULL, 0), vb);
	/* and nothing more was written after it: the next probe follows */
	int64_t probe2 = tu_put(&T, "/lhv-probe", "z", 1);
	CHECK_INT_EQ(probe2, probe + 1);
	CHECK_INT_EQ(host_ctl(&B, &o2, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o2);
}

/* watch, live: started before the changes, it prints each once, in order */
static void test_watch_live(void)
{
	const char *args[] = {"--etcd", harness_etcd_urls(g_etcd), "--prefix", PFX, "watch",
	                      PLUGIN, "-o", "json", NULL};
	struct ctl_proc p;
	struct ctl_out o;
	ctl_spawn(&p, NULL, args);
	uint64_t t0 = loop_now();
	while (!p.err || !strstr(p.err, "watching")) {
		CHECK(ctl_running_for(&p, 100));
		CHECK((loop_now() - t0) / LOOP_NS_PER_MS < 15000);
	}
	CHECK_INT_EQ(host_ctl(&A, &o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	t0 = loop_now();
	while (!p.out || !strstr(p.out, "\"paused\":false")) {
		CHECK(ctl_running_for(&p, 100));
		CHECK((loop_now() - t0) / LOOP_NS_PER_MS < 15000);
	}
	kill(p.pid, SIGINT);
	CHECK_OK(ctl_finish(&p, &o, 10000));
	fprintf(stderr, "%s", o.out);
	int pauses = 0, resumes = 0;
	int64_t last = 0;
	for (char *l = o.out; l && *l;) {
		char *nl = strchr(l, '\n');
		CHECK(nl != NULL);
		*nl = '\0';
		json_object *j = json_tokener_parse(l);
		CHECK(j != NULL);
		int64_t rev = json_object_get_int64(jget(j, "revision"));
		CHECK(rev >= last);
		last = rev;
		if (strcmp(jstr(j, "kind"), "pause") == 0) {
			if (json_object_get_boolean(jget(j, "paused")))
				pauses++;
			else
				resumes++;
			CHECK(pauses == 1 && resumes <= 1); /* the pause first, each once */
		}
		json_object_put(j);
		l = nl + 1;
	}
	CHECK_INT_EQ(resumes, 1);
	ctl_out_free(&o);
}

static void test_record_goes_with_the_lease(void)
{
	host_signal(&B, SIGKILL);
	CHECK(host_wait(&B, 5000) == 0);
	tu_wait(&T, p_no_record, (void *)"b", 15000, "b's record gone with its lease");
	struct row_want rb = {&A, "b", NULL};
	tu_wait(&T, p_row, &rb, 10000, "a shows b without a record");
	struct ctl_out o;
	char cell[128];
	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "STATE", cell, sizeof(cell)), "down");
	ctl_out_free(&o);
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, NULL}, NULL, NULL, NULL);

	RUN(test_cluster_view);
	RUN(test_written_on_change_only);
	RUN(test_watch_live);
	RUN(test_record_goes_with_the_lease);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	e2e_stop(g_etcd, &T, NULL);
	return 0;
}
