/*
 * test_partition_leader - the leader is cut off from etcd (the hub side of
 * its veth goes down) for longer than its TTL, then the link comes back.
 *
 * Three hosts on 1.0.0, each in its own network namespace. The leader's
 * link goes down: it stops leading by its local deadline before the
 * successor is elected (their log clocks), a successor leads within
 * TTL + 1 s of the cut (asserted with room for load, printed), the cut-off
 * token writes nothing after the successor's first journal record, and the
 * invariant checker holds over the whole etcd history. The link stays down
 * for two TTLs in all; after it comes back, the old leader gets a new lease
 * and campaigns behind the successor, which keeps its term. A second round
 * cuts the new leader the same way. Skips (77) without network namespaces.
 */
#include "config.h"

#include <stdio.h>

#include "check.h"
#include "partition.h"

static struct pcluster C;

static void test_start_three_hosts(void)
{
	for (int i = 0; i < 3; i++)
		pc_start(&C, i, "1.0.0", NULL, NULL);
	obs_wait_members(C.obs, 3, 20000);
	obs_wait_status_done(C.obs, REL(1, 0, 0), 20000);
	pc_wait_leader_other(&C, NULL, 15000);
	pc_check_invariants(&C);
}

static void cut_heal_round(void)
{
	struct pc_cut cut;
	pc_cut_leader(&C, PC_LINK_DOWN, &cut);
	/* the link stays down for two TTLs in all */
	long held = (long)((loop_now() - cut.cut_at) / LOOP_NS_PER_MS);
	if (held < 2 * PC_TTL_MS)
		pc_run_for(&C, (int)(2 * PC_TTL_MS - held));
	pc_heal_and_rejoin(&C, &cut);
}

static void test_leader_link_down_past_ttl_then_healed(void)
{
	cut_heal_round();
}

static void test_new_leader_link_down_past_ttl_then_healed(void)
{
	cut_heal_round();
}

int main(void)
{
	pc_init(&C, 3);
	RUN(test_start_three_hosts);
	RUN(test_leader_link_down_past_ttl_then_healed);
	RUN(test_new_leader_link_down_past_ttl_then_healed);
	pc_stop_all(&C);
	pc_fini(&C);
	return 0;
}
