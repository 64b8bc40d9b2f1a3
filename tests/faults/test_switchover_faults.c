/* SPDX-License-Identifier: MIT */
/*
 * test_switchover_faults - switchover and candidate priority under faults,
 * with three real daemons, a real etcd and the example plugin:
 *  - the target is frozen (SIGSTOP) when the request is written: the
 *    others give way, its key becomes the lowest, but it never leads; once
 *    its lease expires a normal election runs. `switchover --to` must say
 *    that it did not happen (exit 1), not "done";
 *  - an operator's switchover without --to away from the node of highest
 *    priority: the node that takes over keeps its term (the priority rule
 *    does not undo the operator right away);
 *  - a request record that does not decode and has no lease (it would
 *    never end): the leader deletes it, switchovers work again;
 *  - an election key whose name is not its lease, older than every real
 *    key: no host counts it, and neither may the request (it took it for
 *    the leader and "succeeded" without moving anything);
 * the invariant checker after each scenario.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PFX "/lhsf"
#define PLUGIN "reconciler"
#define K_HANDOVER PFX "/" PLUGIN "/handover"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;

static bool p_campaigns(void *node)
{
	return tu_election_lease(&T, PFX, PLUGIN, node) != 0;
}

static bool p_handover_gone(void *unused)
{
	(void)unused;
	size_t len;
	uint8_t *v = tu_get(&T, K_HANDOVER, &len);
	free(v);
	return v == NULL;
}

/* start h with the common flags, a TTL and (may be NULL) a priority */
static void start(struct host *h, const char *ttl, const char *priority)
{
	const char *args[] = {"--prefix", PFX, "--ttl", ttl, "--reconcile-wait", "0",
	                      "--reconcile-interval", "1h", priority ? "--priority" : NULL,
	                      priority, NULL};
	host_install_plugin(h, "1.0.0", "reconciler.so");
	host_start(h, harness_etcd_urls(g_etcd), args);
	tu_wait(&T, p_campaigns, h->node, 15000, "the new node campaigns");
	host_wait_control(h, 10000);
}

static void check_invariants(void)
{
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
}

static bool p_term_recorded(void *arg)
{
	(void)arg;
	return tu_term_recorded(&T, PFX, PLUGIN);
}

static void test_frozen_target(void)
{
	/* c's lease (6 s) outlives the request's path by far: while c is
	 * frozen its key stays, so the request is accepted and a and the
	 * candidates ahead of c give way to a key whose owner cannot lead */
	start(&A, "2", NULL);
	obs_wait_leader(g_obs, "a", 15000);
	start(&C, "6", NULL);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 20000);
	host_signal(&C, SIGSTOP);
	struct ctl_out o;
	int st = host_ctl(&A, &o, "switchover", PLUGIN, "--to", "c", "--timeout", "20", NULL);
	fprintf(stderr, "switchover to a frozen target: exit %d: %s%s\n", st, o.out, o.err);
	/* c never ran a term: "done" would be false */
	CHECK_INT_EQ(st, 1);
	CHECK(strstr(o.err, "ended without node c taking over") != NULL);
	ctl_out_free(&o);
	host_signal(&C, SIGCONT);
	/* a normal election after c's key went: a leads again; c comes back
	 * with a new session and campaigns */
	obs_wait_leader(g_obs, "a", 15000);
	tu_wait(&T, p_handover_gone, NULL, 10000, "the request ended");
	tu_wait(&T, p_campaigns, (char *)"c", 15000, "c campaigns again");
	check_invariants();
}

/* a reconcile request from h served by the leader: every change the
 * leader acted on before it is visible */
static void barrier(const struct host *h)
{
	struct ctl_out o;
	int st = host_ctl(h, &o, "reconcile", PLUGIN, NULL);
	if (st != 0) {
		fprintf(stderr, "reconcile from %s: exit %d: %s%s\n", h->node, st, o.out, o.err);
		hosts_dump_logs();
	}
	CHECK_INT_EQ(st, 0);
	ctl_out_free(&o);
}

static void test_operator_not_undone_by_priority(void)
{
	/* b of higher priority joins: the one handover the rule makes */
	start(&B, "2", "10");
	obs_wait_leader(g_obs, "b", 15000);
	tu_wait(&T, p_handover_gone, NULL, 10000, "the priority request ended");
	/* the operator moves the leadership away from b, to whoever is next */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "switchover", PLUGIN, "--json", NULL), 0);
	struct json_object *j = json_tokener_parse(o.out);
	CHECK(j && json_object_get_boolean(jget(j, "switched")));
	char next[32];
	snprintf(next, sizeof(next), "%s", jstr(j, "leader"));
	json_object_put(j);
	ctl_out_free(&o);
	CHECK(strcmp(next, "a") == 0 || strcmp(next, "c") == 0);
	tu_wait(&T, p_handover_gone, NULL, 10000, "the operator's request ended");
	barrier(&A);
	barrier(&C);
	/* the new leader keeps its term: no request of the rule, no handover */
	CHECK(p_handover_gone(NULL));
	CHECK_STR_EQ(obs_leader(g_obs), next);
	tu_wait(&T, p_term_recorded, NULL, 10000, "the new term in the history");
	CHECK_INT_EQ(host_ctl(&A, &o, "history", PLUGIN, "--json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	struct json_object *t0 = json_object_array_get_idx(a, 0);
	if (!t0 || strcmp(jstr(t0, "node"), next) != 0)
		fprintf(stderr, "history: %s\n", o.out);
	CHECK(t0 != NULL);
	CHECK_STR_EQ(jstr(t0, "node"), next);
	CHECK(jget(t0, "end_reason") == NULL);
	json_object_put(a);
	ctl_out_free(&o);
	check_invariants();
}

static void test_stray_record(void)
{
	/* a record that does not decode and has no lease never expires: it
	 * would refuse every switchover ("in flight") and hold the priority
	 * rule for good. The leader deletes it and nothing else moves. */
	char leader[32];
	snprintf(leader, sizeof(leader), "%s", obs_leader(g_obs));
	tu_put(&T, K_HANDOVER, "\xff\x01garbage", 9);
	tu_wait(&T, p_handover_gone, NULL, 10000, "the leader deletes the stray record");
	CHECK_STR_EQ(obs_leader(g_obs), leader);
	/* switchovers work again */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&C, &o, "switchover", PLUGIN, "--to", "b", NULL), 0);
	ctl_out_free(&o);
	obs_wait_leader(g_obs, "b", 5000);
	check_invariants();
}

/* an operator's switchover without --to from h: exit 0; the leader it
 * reports into buf */
static void switchover_any(const struct host *h, char *buf, size_t len)
{
	struct ctl_out o;
	int st = host_ctl(h, &o, "switchover", PLUGIN, "--json", NULL);
	if (st != 0)
		fprintf(stderr, "switchover: exit %d: %s%s\n", st, o.out, o.err);
	CHECK_INT_EQ(st, 0);
	struct json_object *j = json_tokener_parse(o.out);
	CHECK(j && jstr(j, "leader"));
	snprintf(buf, len, "%s", jstr(j, "leader"));
	json_object_put(j);
	ctl_out_free(&o);
	tu_wait(&T, p_handover_gone, NULL, 10000, "the request ended");
}

static void test_stray_election_key(void)
{
	/* an election key whose name is not its lease (hostile, or a tool's
	 * mistake) is no candidate for any host: the mirrors ignore it. The
	 * request must ignore it too: taken for the leader, it named a node
	 * that does not lead, the real leader found the request "satisfied"
	 * and deleted it, and the CLI said done while nothing moved. */
	int64_t lease = tu_election_lease(&T, PFX, PLUGIN, "c");
	CHECK(lease != 0);
	tu_put_lease(&T, PFX "/" PLUGIN "/election/0001", "zz", 2, lease);
	/* three switchovers in line: every node campaigns anew, behind it */
	char was[32], now[32];
	for (int i = 0; i < 3; i++)
		switchover_any(&A, was, sizeof(was));
	obs_wait_leader(g_obs, was, 5000);
	switchover_any(&A, now, sizeof(now));
	fprintf(stderr, "switchover with a stray election key: %s -> %s\n", was, now);
	CHECK(strcmp(was, now) != 0);
	obs_wait_leader(g_obs, now, 5000);
	tu_del(&T, PFX "/" PLUGIN "/election/0001");
	check_invariants();
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_frozen_target);
	RUN(test_operator_not_undone_by_priority);
	RUN(test_stray_record);
	RUN(test_stray_election_key);

	struct host *hs[] = {&A, &B, &C};
	for (size_t i = 0; i < 3; i++)
		host_signal(hs[i], SIGTERM);
	for (size_t i = 0; i < 3; i++)
		CHECK_OK(host_wait(hs[i], 15000));
	e2e_stop(g_etcd, &T, g_obs);
	return 0;
}
