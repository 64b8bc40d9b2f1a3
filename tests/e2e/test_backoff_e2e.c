/* SPDX-License-Identifier: MIT */
/*
 * test_backoff_e2e.c - a broken release backs off by itself, on three real
 * hosts running the example plugin (docs/design.md, "A release that keeps
 * failing"):
 *  - a, b and c on 1.0.0; c reloads the compatible 1.0.1, whose reconciles
 *    fail (LH_EXAMPLE_FAIL_FILE): it leads (the newest release that can
 *    act), fails --unhealthy-after reconciles in a row, withdraws (its term
 *    ends "unhealthy"; plugins and members say so), a 1.0.0 node leads and
 *    its fenced write lands; the file goes, the hold-down ends, and c
 *    campaigns again, leads and writes DONE 1.0.1;
 *  - every node unhealthy: each leader in turn withdraws while a healthy
 *    node remains; once none is, the one in office stays leader and keeps
 *    its term.
 * The journal invariants (no two leaders wrote concurrently) hold.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "base/loop.h"
#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;
static struct host *const g_hosts[3] = {&A, &B, &C};
static const char *g_pfx;
static char g_fail[3][700]; /* each host's LH_EXAMPLE_FAIL_FILE */

static struct host *host_named(const char *node)
{
	for (int i = 0; i < 3; i++)
		if (node && strcmp(g_hosts[i]->node, node) == 0)
			return g_hosts[i];
	return NULL;
}

static int host_index(const struct host *h)
{
	return h == &A ? 0 : h == &B ? 1 : 2;
}

static void set_failing(const struct host *h, bool fail)
{
	const char *p = g_fail[host_index(h)];
	if (fail) {
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		CHECK(fd >= 0);
		close(fd);
	} else
		CHECK(unlink(p) == 0);
}

static void start_all(const char *pfx, const char *interval, const char *hold_down)
{
	g_pfx = pfx;
	obs_free(g_obs);
	g_obs = obs_new(&T, pfx, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	const char *args[] = {"--prefix", pfx, "--ttl", "2", "--reconcile-wait", "0",
	                      "--reconcile-interval", interval, "--unhealthy-after", "3",
	                      "--unhealthy-hold-down", hold_down, NULL};
	for (int i = 0; i < 3; i++) {
		struct host *h = g_hosts[i];
		char env[760];
		snprintf(g_fail[i], sizeof(g_fail[i]), "%s/fail", h->dir);
		unlink(g_fail[i]);
		snprintf(env, sizeof(env), "LH_EXAMPLE_FAIL_FILE=%s", g_fail[i]);
		const char *envp[] = {env, NULL};
		host_install_plugin(h, "1.0.0", "reconciler.so");
		host_start_env(h, harness_etcd_urls(g_etcd), args, envp);
		if (i == 0)
			obs_wait_leader(g_obs, "a", 30000);
	}
	obs_wait_members(g_obs, 3, 30000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 30000);
}

static void stop_all(void)
{
	for (int i = 0; i < 3; i++)
		host_signal(g_hosts[i], SIGTERM);
	for (int i = 0; i < 3; i++)
		CHECK_OK(host_wait(g_hosts[i], 15000));
}

static bool pl_unhealthy(struct json_object *p, const void *arg)
{
	struct json_object *h = p ? jget(p, "health.healthy") : NULL;
	return h && json_object_get_boolean(h) == !*(const bool *)arg;
}

/* wait until h's plugin is (or is no longer) unhealthy; the object (put it) */
static struct json_object *wait_health(const struct host *h, bool unhealthy, const char *what)
{
	return ctl_wait_plugin(h, PLUGIN, pl_unhealthy, &unhealthy, 20000, what);
}

static bool pl_leading_token(struct json_object *p, const void *arg)
{
	const char *st = p ? jstr(p, "state") : NULL;
	return st && strcmp(st, "leading") == 0 &&
	       json_object_get_int64(jget(p, "fencing_token")) != *(const int64_t *)arg;
}

/* the leader observed now, as one of the hosts */
static struct host *leader_host(void)
{
	struct host *h = host_named(obs_leader(g_obs));
	CHECK(h != NULL);
	return h;
}

/* another node than arg leads, by the observer and by that node's own
 * word (the observer's mirror only moves while the loop runs: its first
 * answer may be from before) */
static bool p_leader_not(void *arg)
{
	const char *l = obs_leader(g_obs);
	struct host *h = host_named(l);
	if (!h || strcmp(l, (const char *)arg) == 0)
		return false;
	char st[32];
	return strcmp(host_plugin_state(h, PLUGIN, st, sizeof(st), NULL), "leading") == 0;
}

/* tu_wait that dumps the hosts' logs when it times out */
static void wait_until(bool (*pred)(void *), void *arg, int timeout_ms, const char *what)
{
	uint64_t end = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (!pred(arg)) {
		if (loop_now() >= end) {
			fprintf(stderr, "timed out after %d ms waiting for: %s\n", timeout_ms, what);
			hosts_dump_logs();
			exit(1);
		}
		loop_run_once(T.loop, 50);
	}
}

struct reconciles_want {
	int64_t count;
};

static bool pl_reconciled(struct json_object *p, const void *arg)
{
	const struct reconciles_want *w = arg;
	return p && json_object_get_int64(jget(p, "reconcile.count")) >= w->count;
}

struct journal_want {
	int64_t token;
};

/* a journal record of the term with this fencing token: its fenced write landed */
static bool p_journal_of(void *arg)
{
	const struct journal_want *w = arg;
	char prefix[160];
	snprintf(prefix, sizeof(prefix), "%s/" PLUGIN "/data/journal/%016" PRIx64 "-", g_pfx,
	         (uint64_t)w->token);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, prefix, &kvs);
	tu_list_free(kvs, n);
	return n > 0;
}

/* the newest term in the history: its node and end reason ("" = leading) */
static void history_has(const struct host *h, const char *node, const char *reason)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "history", PLUGIN, "--json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	bool found = false;
	for (size_t i = 0; i < json_object_array_length(a) && !found; i++) {
		struct json_object *t = json_object_array_get_idx(a, i);
		const char *n = jstr(t, "node"), *r = jstr(t, "end_reason");
		found = n && r && strcmp(n, node) == 0 && strcmp(r, reason) == 0;
	}
	if (!found)
		fprintf(stderr, "history without a term of %s ended by %s: %s\n", node, reason, o.out);
	CHECK(found);
	json_object_put(a);
	ctl_out_free(&o);
}

static void test_backoff_broken_release_hands_back(void)
{
	start_all("/lhb1", "1h", "3s");
	/* c reloads a compatible 1.0.1 that fails every reconcile: it leads
	 * (the newest release that can act), then withdraws */
	set_failing(&C, true);
	host_install_plugin(&C, "1.0.1", "reconciler.so");
	obs_wait_member_release(g_obs, "c", REL(1, 0, 1), 15000);
	struct json_object *p = wait_health(&C, true, "c becomes unhealthy");
	CHECK_INT_EQ(json_object_get_int64(jget(p, "health.failures_in_row")), 3);
	CHECK_INT_EQ(json_object_get_int64(jget(p, "health.unhealthy_total")), 1);
	CHECK(jstr(p, "health.unhealthy_until") != NULL);
	json_object_put(p);
	host_wait_state(&C, PLUGIN, "standby", true, 15000);
	p = ctl_plugin_json(&C, PLUGIN);
	const char *held = p ? jstr(p, "held_back") : NULL;
	CHECK(held && strstr(held, "unhealthy until") && strstr(held, "3 reconciles failed in a row"));
	json_object_put(p);

	/* a 1.0.0 node leads and its fenced write lands */
	wait_until(p_leader_not, (void *)"c", 15000, "a 1.0.0 node leads");
	struct host *l = leader_host();
	p = ctl_wait_plugin(l, PLUGIN, pl_leading_token, &(int64_t){0}, 15000, "its term");
	struct journal_want jw = {json_object_get_int64(jget(p, "fencing_token"))};
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	json_object_put(p);
	wait_until(p_journal_of, &jw, 15000, "the 1.0.0 leader's fenced write");
	history_has(&A, "c", "unhealthy");
	/* the members view says which node withdrew */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, "--json", NULL), 0);
	struct json_object *ms = json_tokener_parse(o.out);
	CHECK(ms != NULL);
	fprintf(stderr, "members: %s\n", o.out);
	CHECK(strstr(o.out, "\"healthy\": false") != NULL);
	json_object_put(ms);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "unhealthy until") != NULL);
	ctl_out_free(&o);

	/* mended: after the hold-down c is healthy again, leads, and its
	 * release reconciles */
	set_failing(&C, false);
	p = wait_health(&C, false, "c's hold-down ends");
	json_object_put(p);
	obs_wait_leader(g_obs, "c", 20000);
	obs_wait_status_done(g_obs, REL(1, 0, 1), 20000);
	CHECK_INT_EQ(inv_check_all(&T, g_pfx, PLUGIN, NULL), 0);
	stop_all();
}

static void test_backoff_all_unhealthy_keeps_one_leader(void)
{
	/* a long hold-down: nobody comes back during the test */
	start_all("/lhb2", "300ms", "1h");
	for (int i = 0; i < 3; i++)
		set_failing(g_hosts[i], true);
	/* each leader withdraws while a healthy node remains (two handovers,
	 * in whatever order the keys give), until none is healthy */
	for (int i = 0; i < 3; i++)
		json_object_put(wait_health(g_hosts[i], true, "every node in turn leads and fails"));
	/* none is healthy: the one in office stays; it keeps its term while
	 * it goes on failing reconciles */
	wait_until(p_leader_not, (void *)"", 15000, "a node leads");
	struct host *l = leader_host();
	struct json_object *p = ctl_wait_plugin(l, PLUGIN, pl_leading_token, &(int64_t){0}, 15000,
	                                        "the last one stays leader");
	int64_t token = json_object_get_int64(jget(p, "fencing_token"));
	int64_t count = json_object_get_int64(jget(p, "reconcile.count"));
	json_object_put(p);
	struct reconciles_want rw = {count + 3};
	p = ctl_wait_plugin(l, PLUGIN, pl_reconciled, &rw, 15000, "three more reconciles");
	CHECK_INT_EQ(json_object_get_int64(jget(p, "fencing_token")), token);
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	json_object_put(p);
	CHECK_STR_EQ(obs_leader(g_obs), l->node);
	for (int i = 0; i < 3; i++)
		if (g_hosts[i] != l) {
			char st[32];
			host_plugin_state(g_hosts[i], PLUGIN, st, sizeof(st), NULL);
			CHECK(strcmp(st, "leading") != 0);
			history_has(l, g_hosts[i]->node, "unhealthy");
		}
	CHECK_INT_EQ(inv_check_all(&T, g_pfx, PLUGIN, NULL), 0);
	stop_all();
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	for (int i = 0; i < 3; i++)
		host_setup(g_hosts[i], harness_dir(g_etcd), i == 0 ? "a" : i == 1 ? "b" : "c");

	RUN(test_backoff_broken_release_hands_back);
	RUN(test_backoff_all_unhealthy_keeps_one_leader);

	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
