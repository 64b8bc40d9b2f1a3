/* SPDX-License-Identifier: MIT */
/*
 * test_cli_e2e - leaseholdctl against real `leasehold` daemons (real etcd,
 * the real example plugin): the plugins table and its JSON field by field on
 * the leader and on the other node, status and members, wait-ready (ready,
 * ready after a rolling upgrade, timeout on a node that may no longer serve,
 * unknown plugin, ready only after the first reconcile succeeded), the
 * error paths (stopped daemon, unknown plugin, bad usage), the refusals of
 * writes nobody would read (config set for a plugin that never ran, roles
 * set for a node that never registered; --force), a missing --config file,
 * watch --to-revision printing nothing after R, and the LEADER marked stale
 * while the daemon has no etcd session (etcd stopped, then back).
 *
 * Waiting is for events with deadlines: cluster events through an in-process
 * observer election (its own etcd watch), readiness through
 * `leaseholdctl wait-ready`. Where the CLI offers no event (a daemon's own
 * view catching up with etcd), `plugins --json` is polled with a deadline.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"

#define PFX "/lhcli"
#define PFX_EV "/lhcli-ev"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs10; /* a 1.0.0 consumer of PFX/reconciler */
static struct host A, B, C, D;

static const char *const HOST_ARGS[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", NULL};
static const char *const HOST_ARGS_EV[] = {HOST_TEST_ARGS(PFX_EV), "--log-level", "debug", NULL};

/* ---- JSON helpers ---- */

static bool jnull(json_object *o, const char *path)
{
	json_object *v = NULL;
	/* present with a JSON null: the contract lists every field */
	const char *dot = strrchr(path, '.');
	json_object *parent = o;
	char key[64];
	if (dot) {
		char pp[64];
		snprintf(pp, sizeof(pp), "%.*s", (int)(dot - path), path);
		parent = jget(o, pp);
		snprintf(key, sizeof(key), "%s", dot + 1);
	} else {
		snprintf(key, sizeof(key), "%s", path);
	}
	return parent && json_object_object_get_ex(parent, key, &v) && v == NULL;
}

#define CHECK_JSTR(o, path, want) CHECK_STR_EQ(jstr((o), (path)), (want))
#define CHECK_JNULL(o, path)                                                                       \
	do {                                                                                       \
		if (!jnull((o), (path))) {                                                         \
			fprintf(stderr, "%s:%d: %s is not null in %s\n", __FILE__, __LINE__,       \
				(path), json_object_to_json_string((o)));                          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* RFC 3339 UTC as leaseholdctl prints it, within 10 minutes of now */
static void check_rfc3339_recent(const char *s)
{
	CHECK(s != NULL);
	struct tm tm = {0};
	char z = 0;
	int n = sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		       &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z);
	CHECK_INT_EQ(n, 7);
	CHECK(z == 'Z');
	CHECK_INT_EQ(strlen(s), 20);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	time_t t = timegm(&tm);
	time_t now = time(NULL);
	CHECK(t > now - 600 && t < now + 600);
}

/* ---- predicates for ctl_wait_plugin ---- */

struct want {
	const char *state;  /* NULL = any */
	const char *leader; /* NULL = any */
	bool need_ready;
	bool need_reconciled; /* reconcile.count >= 1 and last_ok */
	int members;	      /* 0 = any */
	const char *status_version;
	const char *status_mcr;
	/* every node's row (its state record as this daemon mirrors it) says
	 * what that node says of itself: the leader's row leading with its last
	 * reconcile (leader_at, NULL: the one this daemon reports, when it
	 * leads), the others campaigning, all ready. A node writes its record
	 * 20 ms after a change and the other daemons see it through their watch,
	 * so a row may trail its node's own answer (wait-ready) for a while; two
	 * reads of the view agree only once it has caught up. Needs leader and
	 * members. */
	bool need_rows_settled;
	const char *leader_at;
};

/* p_rows_settled - the rows of `nodes` as struct want's need_rows_settled
 * describes them */
static bool p_rows_settled(json_object *p, const struct want *w)
{
	json_object *rows = jget(p, "nodes");
	if (!rows || !json_object_is_type(rows, json_type_array) ||
	    (int)json_object_array_length(rows) != w->members)
		return false;
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		json_object *r = json_object_array_get_idx(rows, i);
		const char *node = jstr(r, "node"), *state = jstr(r, "state"),
			   *rec = jstr(r, "state_record");
		if (!node || !state || !rec || strcmp(rec, "valid") != 0)
			return false;
		if (!json_object_get_boolean(jget(r, "ready")))
			return false;
		bool leads = strcmp(node, w->leader) == 0;
		if (strcmp(state, leads ? "leading" : "campaigning") != 0)
			return false;
		if (!leads)
			continue;
		const char *at = jstr(r, "last_reconcile.at"),
			   *want_at = w->leader_at ? w->leader_at : jstr(p, "reconcile.last_at");
		if (!json_object_get_boolean(jget(r, "last_reconcile.ok")) || !at || !want_at ||
		    strcmp(at, want_at) != 0)
			return false;
	}
	return true;
}

static bool p_want(json_object *p, const void *arg)
{
	const struct want *w = arg;
	if (!p)
		return false;
	const char *s = jstr(p, "state"), *l = jstr(p, "leader");
	if (w->state && (!s || strcmp(s, w->state) != 0))
		return false;
	if (w->leader && (!l || strcmp(l, w->leader) != 0))
		return false;
	if (w->need_ready && !json_object_get_boolean(jget(p, "ready")))
		return false;
	if (w->need_reconciled && (json_object_get_int64(jget(p, "reconcile.count")) < 1 ||
				   !json_object_get_boolean(jget(p, "reconcile.last_ok"))))
		return false;
	if (w->members && json_object_get_int64(jget(p, "releases.members")) != w->members)
		return false;
	const char *sv = jstr(p, "status.version"),
		   *sm = jstr(p, "status.minimum_compatible_release");
	if (w->status_version && (!sv || strcmp(sv, w->status_version) != 0))
		return false;
	if (w->status_mcr && (!sm || strcmp(sm, w->status_mcr) != 0))
		return false;
	if (w->need_rows_settled && !p_rows_settled(p, w))
		return false;
	return true;
}

static bool p_present(json_object *p, const void *arg)
{
	(void)arg;
	return p != NULL;
}

/* a failed reconcile seen while not ready */
static bool p_failed_not_ready(json_object *p, const void *arg)
{
	(void)arg;
	return p && json_object_get_int64(jget(p, "reconcile.count")) >= 1 &&
	       !json_object_get_boolean(jget(p, "reconcile.last_ok")) &&
	       !json_object_get_boolean(jget(p, "ready"));
}

/* ---- checks of one host's view ---- */

static void check_plugin_json(json_object *p, const struct host *h, const struct host *L)
{
	bool leads = h == L;
	CHECK_JSTR(p, "name", PLUGIN);
	CHECK_JSTR(p, "file", "reconciler.so");
	CHECK_JSTR(p, "release", "1.0.0");
	CHECK_JSTR(p, "state", leads ? "leading" : "campaigning");
	CHECK_JSTR(p, "leader", L->node);
	CHECK(jbool(p, "ready"));
	CHECK_JSTR(p, "releases.min", "1.0.0");
	CHECK_JSTR(p, "releases.max", "1.0.0");
	CHECK(jint(p, "releases.revision") > 0);
	CHECK_INT_EQ(jint(p, "releases.members"), 2);
	CHECK(json_object_is_type(jget(p, "status"), json_type_object));
	CHECK_JSTR(p, "status.state", "DONE");
	CHECK_JSTR(p, "status.version", "1.0.0");
	CHECK_JSTR(p, "status.minimum_compatible_release", "1.0.0");
	CHECK(json_object_is_type(jget(p, "reconcile"), json_type_object));
	if (leads) {
		CHECK(jint(p, "reconcile.count") >= 1);
		CHECK(jbool(p, "reconcile.last_ok"));
		check_rfc3339_recent(jstr(p, "reconcile.last_at"));
		CHECK(jint(p, "fencing_token") > 0);
	} else {
		/* the other node has not reconciled: nothing to report */
		CHECK_INT_EQ(jint(p, "reconcile.count"), 0);
		CHECK(!jbool(p, "reconcile.last_ok"));
		CHECK_JNULL(p, "reconcile.last_at");
		CHECK_INT_EQ(jint(p, "fencing_token"), 0);
	}
	CHECK_JNULL(p, "reconcile.last_error");
	CHECK_JNULL(p, "error");
	CHECK_JNULL(p, "held_back");
	CHECK_JNULL(p, "superseded_by");
	/* ready: no reason; the running callback: present (null while none runs) */
	CHECK_JNULL(p, "not_ready");
	CHECK(json_object_object_get_ex(p, "callback", NULL));
	CHECK(json_object_object_get_ex(p, "callback_ms", NULL));
	/* the operator's records (docs/pending/ops.md): not paused, no request */
	CHECK(json_object_get_boolean(jget(p, "paused")) == false);
	CHECK_JNULL(p, "paused_by");
	CHECK_JNULL(p, "paused_at");
	CHECK_JNULL(p, "pause_error");
	CHECK(json_object_object_get_ex(p, "reconcile_requested", NULL));
	CHECK(json_object_object_get_ex(p, "reconcile_served", NULL));
	/* the cluster configuration (none written) and the cluster's rows */
	CHECK(json_object_object_get_ex(p, "config_revision", NULL));
	CHECK_JNULL(p, "config_error");
	CHECK(json_object_object_get_ex(p, "nodes", NULL));
	/* a daemon with its etcd session: a view it vouches for */
	CHECK(json_object_get_boolean(jget(p, "view_stale")) == false);
	CHECK_JNULL(p, "view_stale_ms");
	/* no pin */
	CHECK_JNULL(p, "pin");
	CHECK_JNULL(p, "pin_error");
	/* not a keyed plugin: no work queue */
	CHECK_JNULL(p, "queue");
	/* the release rule's answer: the one release present may act */
	CHECK(jstr(p, "acting.release") && jstr(p, "acting.basis"));
	CHECK_INT_EQ(json_object_object_length(jget(p, "acting")), 2);
	/* exactly the documented fields */
	CHECK_INT_EQ(json_object_object_length(p), 32);
	CHECK_INT_EQ(json_object_object_length(jget(p, "health")), 4);
	CHECK(json_object_get_boolean(jget(p, "health.healthy")));
	CHECK_INT_EQ(json_object_object_length(jget(p, "releases")), 4);
	CHECK_INT_EQ(json_object_object_length(jget(p, "status")), 3);
	CHECK_INT_EQ(json_object_object_length(jget(p, "reconcile")), 4);
}

static void check_table_row(const char *out, const char *col, const char *want)
{
	char cell[128];
	const char *v = ctl_table_cell(out, PLUGIN, col, cell, sizeof(cell));
	if (!v || strcmp(v, want) != 0) {
		fprintf(stderr, "table column %s: got \"%s\", want \"%s\" in:\n%s\n", col,
			v ? v : "(no cell)", want, out);
		exit(1);
	}
}

static void check_plugins_table(const struct host *h, const struct host *L, int64_t count)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "plugins", NULL), 0);
	fprintf(stderr, "%s", o.out);
	char title[64];
	snprintf(title, sizeof(title), "+ Node: %s ", h->node);
	CHECK(strncmp(o.out, title, strlen(title)) == 0);
	CHECK_INT_EQ(ctl_table_rows(o.out), 1);
	char cnt[32];
	snprintf(cnt, sizeof(cnt), "%lld", (long long)count);
	check_table_row(o.out, "NAME", PLUGIN);
	check_table_row(o.out, "RELEASE", "1.0.0");
	check_table_row(o.out, "STATE", h == L ? "leading" : "campaigning");
	check_table_row(o.out, "LEADER", L->node);
	check_table_row(o.out, "READY", "yes");
	check_table_row(o.out, "MEMBERS", "1.0.0..1.0.0");
	check_table_row(o.out, "STATUS", "DONE 1.0.0");
	check_table_row(o.out, "RECONCILES", cnt);
	check_table_row(o.out, "LAST ERROR", "-");
	CHECK_STR_EQ(o.err, "");
	ctl_out_free(&o);
}

static void check_status(const struct host *h, const struct host *L, json_object *from_plugins)
{
	struct ctl_out o;
	char line[256];
	CHECK_INT_EQ(host_ctl(h, &o, "status", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK(strstr(o.out, "name:          reconciler\n"));
	snprintf(line, sizeof(line), "node:          %s\n", h->node);
	CHECK(strstr(o.out, line));
	CHECK(strstr(o.out, "file:          reconciler.so\n"));
	CHECK(strstr(o.out, "release:       1.0.0\n"));
	snprintf(line, sizeof(line), "state:         %s\n", h == L ? "leading" : "campaigning");
	CHECK(strstr(o.out, line));
	snprintf(line, sizeof(line), "leader:        %s\n", L->node);
	CHECK(strstr(o.out, line));
	CHECK(strstr(o.out, "ready:         yes\n"));
	CHECK(strstr(o.out, "members:       2 (1.0.0..1.0.0, revision "));
	CHECK(strstr(o.out, "status:        DONE 1.0.0 (minimum compatible release 1.0.0)\n"));
	int64_t count = jint(from_plugins, "reconcile.count");
	if (h == L)
		snprintf(line, sizeof(line), "reconciles:    %lld (last ok at ", (long long)count);
	else
		snprintf(line, sizeof(line), "reconciles:    0\n");
	CHECK(strstr(o.out, line));
	CHECK(strstr(o.out, "error:         -\n"));
	snprintf(line, sizeof(line), "fencing token: %lld\n",
		 (long long)jint(from_plugins, "fencing_token"));
	CHECK(strstr(o.out, line));
	ctl_out_free(&o);

	/* status --json is the plugins --json object of that plugin */
	CHECK_INT_EQ(host_ctl(h, &o, "status", PLUGIN, "--json", NULL), 0);
	json_object *s = json_tokener_parse(o.out);
	CHECK(s && json_object_is_type(s, json_type_object));
	if (!json_object_equal(s, from_plugins)) {
		fprintf(stderr, "status --json differs from plugins --json:\n%s\n%s\n", o.out,
			json_object_to_json_string(from_plugins));
		exit(1);
	}
	json_object_put(s);
	ctl_out_free(&o);
}

static void check_members(const struct host *h, const struct host *L)
{
	struct ctl_out o;
	char cell[128];
	CHECK_INT_EQ(host_ctl(h, &o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	CHECK_INT_EQ(ctl_table_rows(o.out), 2);
	const struct host *both[2] = {&A, &B};
	for (int i = 0; i < 2; i++) {
		CHECK_STR_EQ(ctl_table_cell(o.out, both[i]->node, "RELEASE", cell, sizeof(cell)),
			     "1.0.0");
		CHECK_STR_EQ(ctl_table_cell(o.out, both[i]->node, "LEADER", cell, sizeof(cell)),
			     both[i] == L ? "yes" : "no");
	}
	ctl_out_free(&o);

	CHECK_INT_EQ(host_ctl(h, &o, "members", PLUGIN, "--json", NULL), 0);
	json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	CHECK_INT_EQ(json_object_array_length(a), 2);
	int leaders = 0, seen_a = 0, seen_b = 0;
	for (size_t i = 0; i < 2; i++) {
		json_object *m = json_object_array_get_idx(a, i);
		CHECK_INT_EQ(json_object_object_length(m), 17);
		CHECK(jbool(m, "campaigning")); /* both hosts run 1.0.0 and campaign */
		const char *node = jstr(m, "node");
		CHECK(node != NULL);
		seen_a += strcmp(node, A.node) == 0;
		seen_b += strcmp(node, B.node) == 0;
		CHECK_JSTR(m, "release", "1.0.0");
		if (jbool(m, "leader")) {
			leaders++;
			CHECK_STR_EQ(node, L->node);
		}
	}
	CHECK_INT_EQ(leaders, 1);
	CHECK(seen_a == 1 && seen_b == 1);
	json_object_put(a);
	ctl_out_free(&o);
}

/* the fencing token is the create revision of the leader's election key */
static void check_fencing_token_in_etcd(int64_t token)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/election/", &kvs);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		found |= kvs[i]->create_revision == token;
	tu_list_free(kvs, n);
	CHECK(found);
}

static void wait_ready_ok(const struct host *h, const char *timeout)
{
	struct ctl_out o;
	int st = host_ctl(h, &o, "wait-ready", PLUGIN, "--timeout", timeout, NULL);
	if (st != 0) {
		fprintf(stderr, "wait-ready on %s: exit %d: %s%s\n", h->node, st, o.out, o.err);
		exit(1);
	}
	CHECK_STR_EQ(o.out, PLUGIN " is ready\n");
	ctl_out_free(&o);
}

/* ---- tests ---- */

static void test_plugins_status_members_on_two_hosts(void)
{
	tu_del_prefix(&T, PFX "/");
	e2e_hosts_up(g_obs10, harness_etcd_urls(g_etcd), HOST_ARGS,
		     (struct host *const[]){&A, &B, NULL}, false);
	struct host *L = host_of_node(obs_leader(g_obs10)), *O = L == &A ? &B : &A;
	fprintf(stderr, "leader: %s\n", L->node);

	/* each daemon says ready (an event on the daemon's side) */
	wait_ready_ok(L, "10");
	wait_ready_ok(O, "10");

	const struct host *hs[2] = {L, O};
	char leader_at[32] = ""; /* the leader's last reconcile, as it says */
	for (int i = 0; i < 2; i++) {
		const struct host *h = hs[i];
		/* the daemon's own view may trail the observer's by a watch event,
		 * and its rows of the nodes trail the nodes' own answers (status
		 * --json below is compared with this read as a whole) */
		struct want w = {.state = h == L ? "leading" : "campaigning",
				 .leader = L->node,
				 .need_ready = true,
				 .need_reconciled = h == L,
				 .members = 2,
				 .status_version = "1.0.0",
				 .need_rows_settled = true,
				 .leader_at = h == L ? NULL : leader_at};
		json_object *p = ctl_wait_plugin(h, PLUGIN, p_want, &w, 5000, "the steady state");
		check_plugin_json(p, h, L);
		if (h == L) {
			snprintf(leader_at, sizeof(leader_at), "%s", jstr(p, "reconcile.last_at"));
			check_fencing_token_in_etcd(jint(p, "fencing_token"));
		}
		check_plugins_table(h, L, jint(p, "reconcile.count"));
		check_status(h, L, p);
		check_members(h, L);
		json_object_put(p);
	}
	/* the reconciled state is there */
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/" PLUGIN "/data/config/schema", &n);
	CHECK(v != NULL);
	CHECK_STR_EQ((char *)v, "reconciler/v1");
	free(v);

	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(L, &o, "version", NULL), 0);
	char line[64];
	snprintf(line, sizeof(line), "(node %s, protocol ", L->node);
	CHECK(strstr(o.out, line));
	ctl_out_free(&o);
}

static void test_wait_ready_across_a_rolling_upgrade(void)
{
	struct host *L = host_of_node(obs_leader(g_obs10)), *S = L == &A ? &B : &A;

	/* the standby first: 1.1.0 takes over at once, and still serves the
	 * 1.0.0 status (its min_reconciler_release is 1.0.0) */
	host_install_plugin(S, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(g_obs10, S->node, REL(1, 1, 0), 10000);
	obs_wait_leader(g_obs10, S->node, 5000);
	wait_ready_ok(S, "10");
	/* the old leader, 1.0.0, stands by behind the newer release */
	struct want wl = {.state = "standby", .leader = S->node, .need_ready = true};
	json_object *p = ctl_wait_plugin(L, PLUGIN, p_want, &wl, 5000, "1.0.0 standing by");
	CHECK_JSTR(p, "releases.min", "1.0.0");
	CHECK_JSTR(p, "releases.max", "1.1.0");
	CHECK_JSTR(p, "held_back", "a newer release is present");
	json_object_put(p);

	/* then the old leader: DONE 1.1.0, minimum compatible release 1.1.0 */
	host_install_plugin(L, "1.1.0-reference", "reconciler.so");
	obs_wait_status_done(g_obs10, REL(1, 1, 0), 15000);
	wait_ready_ok(S, "10");
	wait_ready_ok(L, "10");
	struct want w11 = {.need_ready = true, .status_version = "1.1.0", .status_mcr = "1.1.0"};
	p = ctl_wait_plugin(S, PLUGIN, p_want, &w11, 5000, "DONE 1.1.0 on the new leader");
	CHECK_JSTR(p, "release", "1.1.0");
	CHECK_JSTR(p, "state", "leading");
	CHECK_JSTR(p, "releases.min", "1.1.0");
	CHECK_JSTR(p, "releases.max", "1.1.0");
	json_object_put(p);

	/* a 1.0.0 node joining now may not serve: wait-ready times out (exit 1) */
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	host_start(&C, harness_etcd_urls(g_etcd), HOST_ARGS);
	obs_wait_members(g_obs10, 3, 15000);
	host_wait_control(&C, 10000);
	struct want wc = {.state = "standby", .status_version = "1.1.0", .status_mcr = "1.1.0"};
	p = ctl_wait_plugin(&C, PLUGIN, p_want, &wc, 10000, "the 1.0.0 node seeing DONE 1.1.0");
	CHECK(!jbool(p, "ready"));
	CHECK_JSTR(p, "release", "1.0.0");
	json_object_put(p);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&C, &o, "wait-ready", PLUGIN, "--timeout", "0", NULL), 1);
	CHECK(strstr(o.err, "plugin 'reconciler' is not ready"));
	CHECK_STR_EQ(o.out, "");
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "wait-ready", PLUGIN, "--timeout", "1", NULL), 1);
	fprintf(stderr, "wait-ready --timeout 1 on the 1.0.0 node: exit 1 after %ld ms: %s", o.ms,
		o.err);
	CHECK(o.ms >= 1000 && o.ms < 6000);
	CHECK(strstr(o.err, "plugin 'reconciler' not ready after 1000 ms"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "plugins", NULL), 0);
	check_table_row(o.out, "READY", "no");
	check_table_row(o.out, "STATUS", "DONE 1.1.0");
	check_table_row(o.out, "MEMBERS", "1.0.0..1.1.0");
	ctl_out_free(&o);
	/* the 1.1.0 nodes stay ready */
	wait_ready_ok(S, "0");

	/* a waiting wait-ready gets an answer when the daemon stops: an error
	 * (exit 2) at once, not a hang until its own timeout */
	struct ctl_proc w;
	static const char *const args[] = {"wait-ready", PLUGIN, "--timeout", "30", NULL};
	ctl_spawn(&w, C.control, args);
	CHECK(ctl_running_for(&w, 500)); /* parked in the daemon */
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 10000));
	CHECK_INT_EQ(C.exit_status, 0);
	CHECK_OK(ctl_finish(&w, &o, 10000));
	fprintf(stderr, "parked wait-ready: exit %d after %ld ms: %s", o.status, o.ms, o.err);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, "plugin 'reconciler' went away"));
	CHECK(o.ms < 10000);
	ctl_out_free(&o);
	/* an ordinary stop keeps c's member record (c counts with 1.0.0 while
	 * it is down); c is gone for good here, so it is forgotten */
	CHECK_INT_EQ(obs_members(g_obs10), 3);
	tu_del(&T, PFX "/" PLUGIN "/members/c");
	obs_wait_members(g_obs10, 2, 5000);

	/* an unknown plugin is an error (exit 2), at once */
	CHECK_INT_EQ(host_ctl(S, &o, "wait-ready", "nosuch", "--timeout", "5", NULL), 2);
	CHECK(strstr(o.err, "no plugin named 'nosuch'"));
	CHECK(o.ms < 4000);
	ctl_out_free(&o);
}

/* the plugins table's LAST ERROR cell names the example's failure */
static bool p_table_failing(void *arg)
{
	struct ctl_out o;
	char cell[128];
	bool ok = host_ctl(arg, &o, "plugins", NULL) == 0 &&
	          ctl_table_cell(o.out, PLUGIN, "LAST ERROR", cell, sizeof(cell)) &&
	          strstr(cell, "failing on purpose") != NULL;
	ctl_out_free(&o);
	return ok;
}

static void test_wait_ready_returns_after_the_first_good_reconcile(void)
{
	/* a fresh prefix: no status yet; the first 6 reconciles fail (300 ms
	 * each, plus the retry backoff), so DONE comes seconds after leading */
	tu_del_prefix(&T, PFX_EV "/");
	static const char *const env[] = {"LH_EXAMPLE_FAIL_FIRST=6", "LH_EXAMPLE_DELAY_MS=300",
					  NULL};
	host_install_plugin(&D, "1.0.0", "reconciler.so");
	host_start_env(&D, harness_etcd_urls(g_etcd), HOST_ARGS_EV, env);
	host_wait_control(&D, 10000);
	json_object *p = ctl_wait_plugin(&D, PLUGIN, p_present, NULL, 10000, "the plugin listed");
	json_object_put(p);

	struct ctl_proc w;
	static const char *const args[] = {"wait-ready", PLUGIN, "--timeout", "30", NULL};
	ctl_spawn(&w, D.control, args);
	CHECK(ctl_running_for(&w, 200)); /* parked in the daemon */
	/* while it waits: a failed reconcile, not ready */
	p = ctl_wait_plugin(&D, PLUGIN, p_failed_not_ready, NULL, 10000, "a failed reconcile");
	CHECK(strstr(jstr(p, "reconcile.last_error"), "failing on purpose"));
	CHECK_JNULL(p, "status");
	CHECK_JSTR(p, "state", "leading");
	json_object_put(p);
	struct ctl_out o;
	/* the error, behind "in reconcile since N s; " when the next attempt
	 * runs right now. The failures last a window (6 attempts): the table is
	 * another run of the CLI, so wait for it to show the window too. */
	tu_wait(&T, p_table_failing, &D, 10000, "the plugins table shows the failure");
	CHECK_INT_EQ(host_ctl(&D, &o, "plugins", NULL), 0);
	check_table_row(o.out, "READY", "no");
	check_table_row(o.out, "STATUS", "-");
	ctl_out_free(&o);

	CHECK_OK(ctl_finish(&w, &o, 30000));
	fprintf(stderr, "wait-ready returned %d after %ld ms\n", o.status, o.ms);
	CHECK_INT_EQ(o.status, 0);
	CHECK_STR_EQ(o.out, PLUGIN " is ready\n");
	CHECK(o.ms >= 300);
	ctl_out_free(&o);
	p = ctl_plugin_json(&D, PLUGIN);
	CHECK(p != NULL);
	CHECK(jbool(p, "ready"));
	CHECK(jint(p, "reconcile.count") >= 5);
	CHECK(jbool(p, "reconcile.last_ok"));
	CHECK_JNULL(p, "reconcile.last_error");
	CHECK_JSTR(p, "status.state", "DONE");
	CHECK_JSTR(p, "status.version", "1.0.0");
	json_object_put(p);
}

static void usage_fails(const char *what, const char *const *args)
{
	struct ctl_out o;
	ctl_run(&o, A.control, args);
	if (o.status != 2 || !strstr(o.err, "Usage:") || o.out[0]) {
		fprintf(stderr, "%s: exit %d, stdout \"%s\", stderr \"%s\"\n", what, o.status,
			o.out, o.err);
		exit(1);
	}
	ctl_out_free(&o);
}

static void test_error_paths(void)
{
	struct ctl_out o;
	/* a stopped daemon */
	host_signal(&D, SIGTERM);
	CHECK_OK(host_wait(&D, 10000));
	CHECK_INT_EQ(D.exit_status, 0);
	CHECK_INT_EQ(host_ctl(&D, &o, "plugins", NULL), 3); /* no socket file */
	CHECK(strstr(o.err, "is the daemon running?"));
	CHECK(strstr(o.err, D.control));
	CHECK_STR_EQ(o.out, "");
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&D, &o, "wait-ready", PLUGIN, NULL), 3);
	CHECK(strstr(o.err, "is the daemon running?"));
	ctl_out_free(&o);

	/* unknown plugin */
	static const char *const cmds[] = {"status", "members"};
	for (size_t i = 0; i < 2; i++) {
		CHECK_INT_EQ(host_ctl(&A, &o, cmds[i], "nosuch", NULL), 2);
		CHECK(strstr(o.err, "no plugin named 'nosuch'"));
		CHECK_STR_EQ(o.out, "");
		ctl_out_free(&o);
		CHECK_INT_EQ(host_ctl(&A, &o, cmds[i], "nosuch", "--json", NULL), 2);
		CHECK_STR_EQ(o.out, "");
		ctl_out_free(&o);
	}

	/* bad usage: exit 2 with a usage line, nothing on stdout */
	static const char *const u1[] = {"frobnicate", NULL};
	static const char *const u2[] = {"status", NULL};
	static const char *const u3[] = {"plugins", "extra", NULL};
	static const char *const u4[] = {"wait-ready", PLUGIN, "--timeout", "soon", NULL};
	static const char *const u5[] = {"wait-ready", PLUGIN, "--timeout", "-1", NULL};
	static const char *const u6[] = {"reload", "--json", NULL};
	static const char *const u7[] = {"plugins", "--timeout", "0", NULL};
	static const char *const u8[] = {"plugins", "--bogus", NULL};
	static const char *const u9[] = {"wait-ready", PLUGIN, "--timeout", NULL};
	usage_fails("unknown command", u1);
	usage_fails("missing argument", u2);
	usage_fails("extra argument", u3);
	usage_fails("bad timeout", u4);
	usage_fails("negative timeout", u5);
	usage_fails("--json on reload", u6);
	usage_fails("--timeout 0 on plugins", u7);
	usage_fails("unknown option", u8);
	usage_fails("option without value", u9);
	static const char *const none[] = {NULL};
	ctl_run(&o, A.control, none);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, "no command given"));
	ctl_out_free(&o);
	/* help is not an error */
	CHECK_INT_EQ(host_ctl(&A, &o, "--help", NULL), 0);
	CHECK(strstr(o.out, "Exit codes:"));
	ctl_out_free(&o);
}

/* ---- refusals of writes nobody would read, --config, watch --to-revision,
 * a stale view ---- */

/* ctl_observer - leaseholdctl --etcd URL --prefix PFX ARGS...: its exit code */
static int ctl_observer(struct ctl_out *o, const char *const *args)
{
	return ctl_observer_argv(o, harness_etcd_urls(g_etcd), PFX, NULL, args);
}

static void expect_exit(const char *what, struct ctl_out *o, int status, int want,
			const char *err_has)
{
	if (status != want || (err_has && !strstr(o->err, err_has))) {
		fprintf(stderr, "%s: exit %d (want %d), stdout \"%s\", stderr \"%s\"\n", what,
			status, want, o->out, o->err);
		exit(1);
	}
	ctl_out_free(o);
}

static void test_config_set_refuses_a_plugin_that_never_ran(void)
{
	char doc[700];
	struct ctl_out o;
	size_t n;
	FILE *f;

	snprintf(doc, sizeof(doc), "%s/cli-config.json", harness_dir(g_etcd));
	CHECK((f = fopen(doc, "w")) != NULL);
	fputs("{\"interval\": 5}\n", f);
	CHECK(fclose(f) == 0);
	tu_del_prefix(&T, PFX "/nosuch/");
	tu_del_prefix(&T, PFX "/ghost/");
	/* the daemon and observer mode refuse alike; nothing is written */
	expect_exit("config set nosuch (daemon)", &o,
		    host_ctl(&A, &o, "config", "set", "nosuch", doc, NULL), 2,
		    "plugin nosuch has never run");
	const char *const obs_set[] = {"config", "set", "nosuch", doc, NULL};
	expect_exit("config set nosuch (observer)", &o, ctl_observer(&o, obs_set), 2,
		    "plugin nosuch has never run");
	CHECK(tu_get(&T, PFX "/nosuch/config", &n) == NULL);
	/* --force writes */
	expect_exit("config set nosuch --force", &o,
		    host_ctl(&A, &o, "config", "set", "nosuch", doc, "--force", NULL), 0, NULL);
	uint8_t *v = tu_get(&T, PFX "/nosuch/config", &n);
	CHECK(v != NULL);
	free(v);
	tu_del_prefix(&T, PFX "/nosuch/");
	const char *const obs_force[] = {"config", "set", "nosuch", doc, "--force", NULL};
	expect_exit("config set nosuch --force (observer)", &o, ctl_observer(&o, obs_force), 0,
		    NULL);
	tu_del_prefix(&T, PFX "/nosuch/");
	/* a plugin that ran elsewhere (a term of it is recorded) is no typo */
	tu_put(&T, PFX "/ghost/term-history/00000000000000000001", "x", 1);
	expect_exit("config set ghost (daemon)", &o,
		    host_ctl(&A, &o, "config", "set", "ghost", doc, NULL), 0, NULL);
	tu_del_prefix(&T, PFX "/ghost/");
	tu_put(&T, PFX "/ghost/members/zz", "x", 1);
	const char *const obs_ghost[] = {"config", "set", "ghost", doc, NULL};
	expect_exit("config set ghost (observer)", &o, ctl_observer(&o, obs_ghost), 0, NULL);
	tu_del_prefix(&T, PFX "/ghost/");
	/* config get takes no --force */
	expect_exit("config get --force", &o,
		    host_ctl(&A, &o, "config", "get", PLUGIN, "--force", NULL), 2, "--force");
}

static void test_roles_set_refuses_a_node_that_never_registered(void)
{
	struct ctl_out o;
	size_t n;

	expect_exit("roles set nosuchnode", &o,
		    host_ctl(&A, &o, "roles", "set", "nosuchnode", "r1", NULL), 2,
		    "node nosuchnode has never registered");
	CHECK(tu_get(&T, PFX "/roles/nosuchnode", &n) == NULL);
	expect_exit("roles set nosuchnode --force", &o,
		    host_ctl(&A, &o, "roles", "set", "nosuchnode", "r1", "--force", NULL), 0, NULL);
	uint8_t *v = tu_get(&T, PFX "/roles/nosuchnode", &n);
	CHECK(v != NULL);
	free(v);
	/* a node that runs a plugin (B, asked on A), and A itself */
	expect_exit("roles set b", &o, host_ctl(&A, &o, "roles", "set", B.node, "r1", NULL), 0,
		    NULL);
	expect_exit("roles set a", &o, host_ctl(&A, &o, "roles", "set", A.node, NULL), 0, NULL);
	static const char *const clear[3] = {"nosuchnode", "b", "a"};
	for (size_t i = 0; i < 3; i++)
		expect_exit("roles clear", &o, host_ctl(&A, &o, "roles", "clear", clear[i], NULL),
			    0, NULL);
	expect_exit("plugins --force", &o, host_ctl(&A, &o, "plugins", "--force", NULL), 2,
		    "does not take --force");
}

static void test_missing_config_file_is_an_error(void)
{
	struct ctl_out o;
	char path[700];
	snprintf(path, sizeof(path), "%s/no-such.conf", harness_dir(g_etcd));
	const char *const args[] = {"--config", path, "plugins", NULL};
	ctl_run(&o, NULL, args);
	expect_exit("--config missing.conf plugins", &o, o.status, 2, "cannot open");
	const char *const cargs[] = {"--config", path, "config", "get", PLUGIN, NULL};
	ctl_run(&o, NULL, cargs);
	expect_exit("--config missing.conf config get", &o, o.status, 2, "cannot open");
}

static void test_watch_stops_at_to_revision(void)
{
	struct ctl_out o;
	char from[32], to[32];
	int64_t rev[5];
	/* five changes already in etcd, of a plugin no daemon runs (nothing
	 * else writes in between): a replay delivers them in one batch */
	for (int i = 0; i < 5; i++)
		rev[i] = tu_put(&T, PFX "/quiet/reconcile-request", "x", 1);
	snprintf(from, sizeof(from), "%lld", (long long)rev[0] - 1);
	snprintf(to, sizeof(to), "%lld", (long long)rev[2]);
	const char *const args[] = {"watch",	     "quiet",	   "--from-revision", from,
				    "--to-revision", to,	   "--timeout",	      "20",
				    NULL};
	CHECK_INT_EQ(ctl_observer(&o, args), 0);
	size_t lines = 0;
	for (const char *s = o.out; *s; s++)
		lines += *s == '\n';
	if (lines != 3 || !strstr(o.out, "reconcile requested")) {
		fprintf(stderr, "watch up to %s printed:\n%s", to, o.out);
		exit(1);
	}
	char last[64];
	snprintf(last, sizeof(last), "%lld ", (long long)rev[2]);
	CHECK(strstr(o.out, last) != NULL);
	snprintf(last, sizeof(last), "%lld ", (long long)rev[3]);
	CHECK(strstr(o.out, last) == NULL);
	ctl_out_free(&o);
}

static bool p_view_stale(json_object *p, const void *arg)
{
	json_object *v = p ? jget(p, "view_stale") : NULL;
	return v && json_object_get_boolean(v) == *(const bool *)arg;
}

static void test_leader_is_marked_stale_without_a_session(void)
{
	static const bool yes = true, no = false;
	struct ctl_out o;
	char cell[128];

	json_object *p = ctl_wait_plugin(&A, PLUGIN, p_view_stale, &no, 5000, "a current view");
	CHECK(jnull(p, "view_stale_ms"));
	const char *leader = jstr(p, "leader");
	CHECK(leader != NULL);
	char was[64];
	snprintf(was, sizeof(was), "%s", leader);
	json_object_put(p);
	/* etcd gone: the session lapses after its TTL (2 s), the mirror stays */
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	p = ctl_wait_plugin(&A, PLUGIN, p_view_stale, &yes, 15000, "a stale view");
	CHECK(jint(p, "view_stale_ms") >= 0);
	json_object_put(p);
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", NULL), 0);
	char want[80];
	snprintf(want, sizeof(want), "%s (stale)", was);
	const char *c = ctl_table_cell(o.out, PLUGIN, "LEADER", cell, sizeof(cell));
	if (!c || strcmp(c, want) != 0) {
		fprintf(stderr, "LEADER without a session: '%s', want '%s'\n%s", c ? c : "(none)",
			want, o.out);
		exit(1);
	}
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "(stale: no etcd session for ") != NULL);
	ctl_out_free(&o);
	/* etcd back: the session comes up again and the view is current */
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	CHECK_OK(harness_etcd_wait_healthy(g_etcd, 0, 15000));
	p = ctl_wait_plugin(&A, PLUGIN, p_view_stale, &no, 20000, "a current view again");
	json_object_put(p);
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, &D, NULL}, &g_obs10, PFX, PLUGIN);

	RUN(test_plugins_status_members_on_two_hosts);
	RUN(test_wait_ready_across_a_rolling_upgrade);
	RUN(test_wait_ready_returns_after_the_first_good_reconcile);
	RUN(test_error_paths);
	RUN(test_config_set_refuses_a_plugin_that_never_ran);
	RUN(test_roles_set_refuses_a_node_that_never_registered);
	RUN(test_missing_config_file_is_an_error);
	RUN(test_watch_stops_at_to_revision);
	RUN(test_leader_is_marked_stale_without_a_session);

	host_signal(&A, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&A, 10000));
	CHECK_OK(host_wait(&B, 10000));
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(B.exit_status, 0);
	e2e_stop(g_etcd, &T, g_obs10);
	return CHECK_EXIT();
}
