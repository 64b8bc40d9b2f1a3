/* SPDX-License-Identifier: MIT */
/*
 * test_faults_leader - the leader process dies or freezes.
 *
 * - SIGKILL of the leader: the other host leads within TTL + 2 s and
 *   reconciles; the killed one comes back as a candidate.
 * - SIGSTOP of the leader for longer than its TTL, then SIGCONT: while it is
 *   frozen the other host takes over once the lease expired on etcd; after
 *   SIGCONT the old leader writes nothing (no journal record of its token
 *   after the new leader's first one), its log says it lost leadership by its
 *   local deadline or on the first keepalive answer, and it rejoins as a
 *   candidate behind the new leader.
 * Both end with the invariant checker over the whole etcd history.
 *
 * Hosts reconcile every 300 ms so that a stale leader always has a write to
 * attempt; --ttl 2 (margin 0.4 s, keepalive every 0.67 s).
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "faultsuite.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

static struct fault_suite F;

static void test_start_two_hosts(void)
{
	fs_start_two_hosts(&F, "1.0.0", REL(1, 0, 0));
	CHECK_STR_EQ(obs_leader(F.obs), "a");
}

static void test_sigkill_leader_fails_over(void)
{
	struct host *L = fs_by_node(&F, obs_leader(F.obs)), *O = fs_other(&F, L);
	size_t o_before = jwatch_count(F.jw, O->node, 0);
	uint64_t t0 = loop_now();
	host_signal(L, SIGKILL);
	CHECK_OK(host_wait(L, 5000));
	/* ttl 2 s: the other leads within ttl + 2 s */
	long ms = obs_wait_leader(F.obs, O->node, 4000);
	fprintf(stderr, "SIGKILL: %s leads after %ld ms\n", O->node, ms);
	jwatch_wait(F.jw, O->node, o_before + 1, 5000, "the new leader reconciles");
	fprintf(stderr, "SIGKILL: first reconcile of %s %llu ms after the kill\n", O->node,
		(unsigned long long)((loop_now() - t0) / LOOP_NS_PER_MS));
	/* the killed host comes back as a candidate */
	host_start(L, harness_etcd_urls(F.etcd), fs_host_args);
	obs_wait_members(F.obs, 2, 15000);
	host_wait_state(L, FS_PLUGIN, "campaigning", true, 15000);
	CHECK_STR_EQ(obs_leader(F.obs), O->node);
	fs_check_invariants(&F);
}

static void test_sigstop_leader_is_fenced_and_rejoins(void)
{
	struct host *L = fs_by_node(&F, obs_leader(F.obs)), *O = fs_other(&F, L);
	char st[32];
	int64_t old_token;
	CHECK_STR_EQ(host_plugin_state(L, FS_PLUGIN, st, sizeof(st), &old_token), "leading");
	CHECK(old_token > 0);
	jwatch_wait(F.jw, L->node, jwatch_count(F.jw, L->node, 0) + 1, 5000,
		    "the leader reconciles");
	size_t o_before = jwatch_count(F.jw, O->node, 0);
	long log_mark = host_log_size(L);

	uint64_t t0 = loop_now();
	host_signal(L, SIGSTOP);
	/* the lease expires on etcd (>= TTL after the last keepalive), then the
	 * other host wins */
	long ms = obs_wait_leader(F.obs, O->node, 6000);
	fprintf(stderr, "SIGSTOP: %s leads after %ld ms\n", O->node, ms);
	CHECK(ms >= 1000); /* not before the lease could have expired */
	jwatch_wait(F.jw, O->node, o_before + 1, 5000, "the new leader reconciles");
	/* the new leader's first record */
	const struct jrec *r;
	size_t n = jwatch_records(F.jw, &r);
	int64_t first_new = 0, new_token = 0;
	for (size_t i = 0; i < n && !first_new; i++)
		if (strcmp(r[i].node, O->node) == 0 && r[i].token > old_token) {
			first_new = r[i].rev;
			new_token = r[i].token;
		}
	CHECK(first_new > 0);
	/* keep it frozen a while longer: frozen for more than 2 TTLs in all */
	while ((loop_now() - t0) / LOOP_NS_PER_MS < 4000)
		loop_run_once(F.t.loop, 50);
	size_t l_records_before = jwatch_count(F.jw, L->node, old_token);
	host_signal(L, SIGCONT);

	/* it steps down and rejoins as a candidate behind the new leader */
	long back = host_wait_state(L, FS_PLUGIN, "campaigning", true, 10000);
	fprintf(stderr, "SIGCONT: %s campaigning again after %ld ms\n", L->node, back);
	jwatch_wait(F.jw, O->node, jwatch_count(F.jw, O->node, 0) + 2, 5000,
		    "the new leader keeps reconciling");
	CHECK_STR_EQ(obs_leader(F.obs), O->node);

	/* the old leader wrote nothing after the new leader's first record */
	n = jwatch_records(F.jw, &r);
	for (size_t i = 0; i < n; i++)
		if (r[i].token == old_token && r[i].rev > first_new) {
			fprintf(stderr,
				"stale leader %s wrote %" PRId64 "-record at revision %" PRId64
				" after the new leader's first record (revision %" PRId64
				", token %" PRId64 ")\n",
				L->node, old_token, r[i].rev, first_new, new_token);
			CHECK(!"a stale leader's write got through");
		}
	CHECK_INT_EQ(jwatch_count(F.jw, L->node, old_token), l_records_before);

	/* its log: leadership lost by the local deadline or on the first
	 * keepalive answer */
	char *log = host_log_since(L, log_mark);
	const char *lost = strstr(log, "lost leadership");
	const char *why_deadline = strstr(log, "local deadline passed");
	const char *why_expired = strstr(log, "etcd says the lease expired");
	const char *why_fence = strstr(log, "found us no longer leading");
	if (!lost || !(why_deadline || why_expired || why_fence)) {
		fprintf(stderr, "log of %s after SIGSTOP:\n%s\n", L->node, log);
		CHECK(!"the old leader's log does not say it lost leadership");
	}
	/* (the plugin's own "reconciled:" debug line may follow "lost
	 * leadership" in the log: plugin log lines travel over the bus and a
	 * reconcile finished just before SIGSTOP is logged when the loop runs
	 * again. What was written, and when, is the journal's to say: checked
	 * above and by the invariants.) */
	const char *why = why_deadline ? why_deadline : why_expired ? why_expired : why_fence;
	fprintf(stderr, "SIGCONT: %s says: %.*s (%.*s)\n", L->node, (int)strcspn(lost, "\n"), lost,
		(int)strcspn(why, "\n"), why);
	free(log);
	fs_check_invariants(&F);
}

int main(void)
{
	fs_setup_1_0(&F, 1);

	RUN(test_start_two_hosts);
	RUN(test_sigkill_leader_fails_over);
	RUN(test_sigstop_leader_is_fenced_and_rejoins);

	fs_finish(&F);
	return CHECK_EXIT();
}
