/* SPDX-License-Identifier: MIT */
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
	pc_start_all(&C, "1.0.0");
}

static void test_leader_link_down_past_ttl_then_healed(void)
{
	pc_cut_hold_heal(&C, PC_LINK_DOWN);
}

static void test_new_leader_link_down_past_ttl_then_healed(void)
{
	pc_cut_hold_heal(&C, PC_LINK_DOWN);
}

int main(void)
{
	pc_init(&C, 3);
	RUN(test_start_three_hosts);
	RUN(test_leader_link_down_past_ttl_then_healed);
	RUN(test_new_leader_link_down_past_ttl_then_healed);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
