/* SPDX-License-Identifier: MIT */
/*
 * test_switchover_e2e - `leaseholdctl switchover` with three real daemons,
 * a real etcd and the example plugin (a's reconcile is slow, so a draining
 * a holds a switchover in flight for seconds):
 *  - each refusal, with its message and exit code, before anything changes
 *    (the target leads already, is no member, the plugin is paused, another
 *    request is in flight (a record that does not decode: the hosts ignore
 *    it), bad --timeout and --to);
 *  - without --to: the leader hands over to the next candidate and keeps
 *    running; the term history says "switchover" with the requester;
 *  - with --to: the named node leads (a candidate ahead of it gave way);
 *  - two switchovers at once: exactly one happens, the other is refused;
 *  - the target dies (SIGKILL) while the leader drains: once its key is
 *    gone a normal election runs and the CLI says the switchover did not
 *    happen (exit 1);
 *  - a target that does not campaign, one of an older release, and no
 *    other candidate at all are refused;
 * the invariant checker after each scenario.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PFX "/lhs"
#define PLUGIN "reconciler"
#define K_HANDOVER PFX "/" PLUGIN "/handover"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};
/* a's reconciles take 6 s: a leader a drains for that long, longer than
 * a dead target's lease (2 s) takes to expire */
static const char *const SLOW[] = {"LH_EXAMPLE_DELAY_MS=6000", NULL};

static bool p_campaigns(void *node)
{
	return tu_election_lease(&T, PFX, PLUGIN, node) != 0;
}

static void check_invariants(void)
{
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
}

/* a refused switchover: exit 2, nothing written, the leader unchanged */
static void refused(const struct host *h, const char *needle, ...) __attribute__((sentinel));
static void refused(const struct host *h, const char *needle, ...)
{
	const char *args[8] = {"switchover", PLUGIN};
	size_t n = 2;
	va_list ap;
	va_start(ap, needle);
	for (const char *a; n < 7 && (a = va_arg(ap, const char *));)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	char leader[64];
	snprintf(leader, sizeof(leader), "%s", obs_leader(g_obs) ? obs_leader(g_obs) : "");
	struct ctl_out o;
	ctl_run(&o, h->control, args);
	if (o.status != 2 || !strstr(o.err, needle))
		fprintf(stderr, "switchover %s: exit %d, stderr: %s\n", n > 2 ? args[2] : "", o.status,
		        o.err);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, needle) != NULL);
	ctl_out_free(&o);
	CHECK(!tu_has_key(&T, K_HANDOVER) || strstr(needle, "in flight"));
	CHECK_STR_EQ(obs_leader(g_obs), leader);
}

static bool p_term_recorded(void *arg)
{
	(void)arg;
	return tu_term_recorded(&T, PFX, PLUGIN);
}

/* history entry i (newest first) of the plugin as host h reads it, once the
 * current term is recorded */
static void term_ended(const struct host *h, size_t i, const char *node, const char *reason,
                       const char *detail)
{
	tu_wait(&T, p_term_recorded, NULL, 10000, "the current term in the history");
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "history", PLUGIN, "--json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	struct json_object *t = json_object_array_get_idx(a, i);
	if (!t || strcmp(jstr(t, "node"), node) != 0 || !jstr(t, "end_reason") ||
	    strcmp(jstr(t, "end_reason"), reason) != 0)
		fprintf(stderr, "history: %s\n", o.out);
	CHECK(t != NULL);
	CHECK_STR_EQ(jstr(t, "node"), node);
	CHECK_STR_EQ(jstr(t, "end_reason"), reason);
	if (detail)
		CHECK(jstr(t, "end_detail") && strstr(jstr(t, "end_detail"), detail));
	json_object_put(a);
	ctl_out_free(&o);
}

static void test_refusals(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	host_start_env(&A, harness_etcd_urls(g_etcd), ARGS, SLOW);
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	host_start(&C, harness_etcd_urls(g_etcd), ARGS);
	tu_wait(&T, p_campaigns, (char *)"b", 15000, "b campaigns");
	tu_wait(&T, p_campaigns, (char *)"c", 15000, "c campaigns");
	host_wait_control(&B, 10000);
	host_wait_control(&C, 10000);

	refused(&B, "node a leads plugin 'reconciler' already", "--to", "a", NULL);
	refused(&B, "node nosuch does not run plugin 'reconciler'", "--to", "nosuch", NULL);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&C, &o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	tu_wait_key(&T, PFX "/" PLUGIN "/paused", true, 5000, "paused");
	refused(&B, "plugin 'reconciler' is paused", "--to", "c", NULL);
	refused(&C, "plugin 'reconciler' is paused", NULL);
	CHECK_INT_EQ(host_ctl(&C, &o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	tu_wait_key(&T, PFX "/" PLUGIN "/paused", false, 5000, "resumed");
	/* a record that does not decode, bound to a lease (b's) as every
	 * request is: a request is in flight for a new one until it expires,
	 * and no host acts on it (test_switchover_faults: one without a
	 * lease is deleted by the leader) */
	tu_put_lease(&T, K_HANDOVER, "\xff\x01garbage", 9, tu_election_lease(&T, PFX, PLUGIN, "b"));
	refused(&C, "another switchover of plugin 'reconciler' is in flight", "--to", "b", NULL);
	tu_del(&T, K_HANDOVER);
	CHECK_STR_EQ(obs_leader(g_obs), "a");
	/* usage: checked before anything is sent */
	CHECK_INT_EQ(host_ctl(&C, &o, "switchover", PLUGIN, "--timeout", "1s", NULL), 2);
	CHECK(strstr(o.err, "invalid --timeout"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "switchover", PLUGIN, "--to", "x/y", NULL), 2);
	CHECK(strstr(o.err, "invalid node id"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&C, &o, "switchover", "nosuch", NULL), 2);
	CHECK(strstr(o.err, "no plugin named 'nosuch'"));
	ctl_out_free(&o);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 20000);
	check_invariants();
}

/* the node of the candidate second in line (the lowest key but one) */
static void next_in_line(char *buf, size_t len)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/election/", &kvs);
	int64_t low = INT64_MAX, second = INT64_MAX;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->create_revision < low)
			low = kvs[i]->create_revision;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->create_revision > low && kvs[i]->create_revision < second) {
			second = kvs[i]->create_revision;
			snprintf(buf, len, "%.*s", (int)kvs[i]->value_len, (const char *)kvs[i]->value);
		}
	tu_list_free(kvs, n);
}

static void test_switchover_to_any(void)
{
	/* from c: a (leading, in its slow initial reconcile) drains and hands
	 * over to the candidate next in line */
	char next[64] = "", want[96];
	next_in_line(next, sizeof(next));
	CHECK(strcmp(next, "b") == 0 || strcmp(next, "c") == 0);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&C, &o, "switchover", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "switchover done"));
	snprintf(want, sizeof(want), ": %s leads", next);
	CHECK(strstr(o.out, want));
	ctl_out_free(&o);
	obs_wait_leader(g_obs, next, 5000);
	/* a keeps running and campaigns again; the request is gone */
	CHECK(host_alive(&A));
	tu_wait(&T, p_campaigns, (char *)"a", 10000, "a campaigns again");
	tu_wait_key(&T, (char *)K_HANDOVER, false, 10000, "the new leader deleted the request");
	term_ended(&C, 1, "a", "switchover", "requested by c, to any other node");
	check_invariants();
}

static void test_switchover_to_node(void)
{
	/* keys now: b or c (leads), the other, a: the other gives way, the
	 * leader hands over to a */
	char prev[64];
	snprintf(prev, sizeof(prev), "%s", obs_leader(g_obs));
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "switchover", PLUGIN, "--to", "a", "--json", NULL), 0);
	struct json_object *j = json_tokener_parse(o.out);
	CHECK(j && json_object_get_boolean(jget(j, "switched")));
	CHECK_STR_EQ(jstr(j, "leader"), "a");
	json_object_put(j);
	ctl_out_free(&o);
	obs_wait_leader(g_obs, "a", 5000);
	tu_wait(&T, p_campaigns, (char *)"b", 10000, "b campaigns again");
	tu_wait(&T, p_campaigns, (char *)"c", 10000, "c campaigns again");
	term_ended(&A, 1, prev, "switchover", "requested by b, to a");
	check_invariants();
}

static void test_two_at_once(void)
{
	/* a leads and drains slowly: one request wins, the other is refused */
	struct ctl_proc pb, pc;
	struct ctl_out ob, oc;
	const char *const to_b[] = {"switchover", PLUGIN, "--to", "b", NULL};
	const char *const to_c[] = {"switchover", PLUGIN, "--to", "c", NULL};
	ctl_spawn(&pb, B.control, to_b);
	ctl_spawn(&pc, C.control, to_c);
	CHECK_OK(ctl_finish(&pb, &ob, 60000));
	CHECK_OK(ctl_finish(&pc, &oc, 60000));
	fprintf(stderr, "to b: %d %s%s; to c: %d %s%s\n", ob.status, ob.out, ob.err, oc.status,
	        oc.out, oc.err);
	CHECK((ob.status == 0) != (oc.status == 0));
	struct ctl_out *lost = ob.status == 0 ? &oc : &ob;
	CHECK_INT_EQ(lost->status, 2);
	CHECK(strstr(lost->err, "in flight") || strstr(lost->err, "changed while"));
	obs_wait_leader(g_obs, ob.status == 0 ? "b" : "c", 5000);
	ctl_out_free(&ob);
	ctl_out_free(&oc);
	check_invariants();
}

static void test_target_dies(void)
{
	/* a leads again (slow initial reconcile running) */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "switchover", PLUGIN, "--to", "a", NULL), 0);
	ctl_out_free(&o);
	obs_wait_leader(g_obs, "a", 5000);
	tu_wait(&T, p_campaigns, (char *)"b", 10000, "b campaigns");
	tu_wait(&T, p_campaigns, (char *)"c", 10000, "c campaigns");
	/* to c; c dies while a drains */
	struct ctl_proc p;
	const char *const to_c[] = {"switchover", PLUGIN, "--to", "c", "--timeout", "20", NULL};
	ctl_spawn(&p, B.control, to_c);
	tu_wait_key(&T, (char *)K_HANDOVER, true, 10000, "the request is recorded");
	host_signal(&C, SIGKILL);
	CHECK_OK(host_wait(&C, 5000));
	CHECK_OK(ctl_finish(&p, &o, 60000));
	fprintf(stderr, "switchover to a dead target: exit %d: %s%s\n", o.status, o.out, o.err);
	CHECK_INT_EQ(o.status, 1);
	CHECK(strstr(o.err, "ended without node c taking over"));
	ctl_out_free(&o);
	/* a normal election: b's key was next (a's new one is behind it) */
	obs_wait_leader(g_obs, "b", 10000);
	tu_wait_key(&T, (char *)K_HANDOVER, false, 10000, "the request ended");
	term_ended(&B, 1, "a", "switchover", "to c");
	check_invariants();
}

static void test_more_refusals(void)
{
	/* c is down: still a member, no election key */
	refused(&B, "node c does not campaign for plugin 'reconciler'", "--to", "c", NULL);
	/* a newer release on b: a is standby on an older one */
	host_install_plugin(&B, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(g_obs, "b", REL(1, 1, 0), 15000);
	host_wait_state(&A, PLUGIN, "standby", true, 15000);
	obs_wait_leader(g_obs, "b", 15000);
	refused(&B, "runs release 1.0.0 of plugin 'reconciler', older than the newest (1.1.0)",
	        "--to", "a", NULL);
	refused(&B, "no other node campaigns for plugin 'reconciler'", NULL);
	check_invariants();
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_refusals);
	RUN(test_switchover_to_any);
	RUN(test_switchover_to_node);
	RUN(test_two_at_once);
	RUN(test_target_dies);
	RUN(test_more_refusals);

	hosts_terminate((struct host *const[]){&A, &B}, 2, 15000, false);
	e2e_stop(g_etcd, &T, g_obs);
	return 0;
}
