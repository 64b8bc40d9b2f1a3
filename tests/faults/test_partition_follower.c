/* SPDX-License-Identifier: MIT */
/*
 * test_partition_follower - a host that does not lead is cut off from etcd
 * (its link goes down) for longer than its TTL, then healed.
 *
 * Three hosts on 1.0.0. While a non-leader is cut off, the leader keeps its
 * term (same fencing token, checked on its own CLI) and keeps reconciling;
 * the cut-off host's session ends by its local deadline and it never claims
 * to lead (its CLI, polled through the cut). Then the link comes back: the
 * cut-off host gets a new lease and campaigns again behind the same leader.
 * Nothing about membership is asserted: whether a cut-off member record
 * stays is the protocol's choice (issue 16), not this scenario's. The
 * invariants hold over the whole history. Skips (77) without namespaces.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "partition.h"

static struct pcluster C;

static void test_start_three_hosts(void)
{
	pc_start_all(&C, "1.0.0");
}

static void test_non_leader_link_down_past_ttl_then_healed(void)
{
	struct host *L = pc_wait_leader_other(&C, NULL, 15000);
	host_wait_state(L, PC_PLUGIN, "leading", true, 10000);
	struct host *F = &C.host[(pc_index(&C, L) + 1) % C.n];
	host_wait_state(F, PC_PLUGIN, "campaigning", true, 10000);
	char st[32];
	int64_t token;
	CHECK_STR_EQ(host_plugin_state(L, PC_PLUGIN, st, sizeof(st), &token), "leading");
	CHECK(token > 0);
	long mark = host_log_size(F);
	size_t all_before = jwatch_count(C.jw, NULL, 0);
	size_t l_before = jwatch_count(C.jw, L->node, token);
	size_t l_any_before = jwatch_count(C.jw, L->node, 0);
	long ref = wall_ms_of_day();
	uint64_t t0 = loop_now();
	pc_fault(&C, F, PC_LINK_DOWN);

	/* the follower's session ends by its local deadline; meanwhile and for
	 * two TTLs in all, it never leads and the leader keeps its term */
	bool lost = false;
	while ((loop_now() - t0) / LOOP_NS_PER_MS < 2 * PC_TTL_MS || !lost) {
		CHECK((loop_now() - t0) / LOOP_NS_PER_MS < 10000);
		int64_t ft;
		host_plugin_state(F, PC_PLUGIN, st, sizeof(st), &ft);
		if (strcmp(st, "leading") == 0 || ft != 0) {
			hosts_dump_logs();
			CHECK(!"the cut-off follower claims to lead");
		}
		CHECK_STR_EQ(obs_leader(C.obs), L->node);
		lost = lost || host_log_count(F, mark, "local deadline passed") > 0;
		loop_run_once(C.t.loop, 50);
	}
	fprintf(stderr, "link down on follower %s: session lost by the local deadline at +%ld ms\n",
		F->node, host_log_ms_after(F, mark, "local deadline passed", ref));
	int64_t t2;
	CHECK_STR_EQ(host_plugin_state(L, PC_PLUGIN, st, sizeof(st), &t2), "leading");
	CHECK_INT_EQ(t2, token);
	jwatch_wait(C.jw, L->node, l_any_before + 2, 10000,
		    "the leader reconciles during the cut");

	/* healed: a new lease, campaigning behind the same leader */
	long mark2 = host_log_size(F);
	pc_heal(&C, F);
	pc_wait_log(&C, F, mark2, "granted", 15000);
	host_wait_state(F, PC_PLUGIN, "campaigning", true, 15000);
	fprintf(stderr, "healed %s after %ld ms of cut: campaigning again\n", F->node,
		(long)((loop_now() - t0) / LOOP_NS_PER_MS));
	CHECK_STR_EQ(host_plugin_state(L, PC_PLUGIN, st, sizeof(st), &t2), "leading");
	CHECK_INT_EQ(t2, token);
	CHECK_STR_EQ(obs_leader(C.obs), L->node);
	jwatch_wait(C.jw, L->node, jwatch_count(C.jw, L->node, 0) + 1, 10000,
		    "the leader reconciles after the heal");
	/* every journal record since the cut is the leader's, in its one term */
	CHECK_INT_EQ(jwatch_count(C.jw, NULL, 0) - all_before,
		     jwatch_count(C.jw, L->node, token) - l_before);
	pc_check_invariants(&C);
}

int main(void)
{
	pc_init(&C, 3);
	RUN(test_start_three_hosts);
	RUN(test_non_leader_link_down_past_ttl_then_healed);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
