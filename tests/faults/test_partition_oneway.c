/* SPDX-License-Identifier: MIT */
/*
 * test_partition_oneway - one-way cuts between the leader and etcd, made
 * with nftables inside the leader's own network namespace.
 *
 * Three hosts on 1.0.0. Round 1 drops every packet from etcd to the leader
 * (its requests still arrive: a keepalive may renew the lease on etcd while
 * the leader never hears back, so it must step down by its own deadline).
 * Round 2 drops every packet from the (new) leader to etcd (it still
 * receives: it sees the cluster move on without being able to act). Each
 * round checks what test_partition_leader checks: the cut-off leader stops
 * leading by its local deadline before the successor is elected, a
 * successor leads within TTL + 1 s of the cut (asserted with room for
 * load), the cut-off token writes nothing after the successor's first
 * journal record, the invariants hold; after the heal the old leader
 * campaigns behind the successor. Skips (77) without network namespaces.
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

static void test_packets_from_etcd_dropped_at_the_leader(void)
{
	pc_cut_hold_heal(&C, PC_DROP_FROM_ETCD);
}

static void test_packets_to_etcd_dropped_at_the_leader(void)
{
	pc_cut_hold_heal(&C, PC_DROP_TO_ETCD);
}

int main(void)
{
	pc_init(&C, 3);
	RUN(test_start_three_hosts);
	RUN(test_packets_from_etcd_dropped_at_the_leader);
	RUN(test_packets_to_etcd_dropped_at_the_leader);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
