/* SPDX-License-Identifier: MIT */
/*
 * test_faults_etcd - etcd itself goes away (single member).
 *
 * - etcd restart (graceful stop + start, data kept): leadership survives or
 *   is re-established; exactly one host leads afterwards, reconciles go on.
 * - etcd stopped for longer than the TTL: every host drops leadership by its
 *   LOCAL deadline (leaseholdctl, answered by the daemon without etcd, shows
 *   no host leading within TTL - margin + slack of the stop, and keeps
 *   showing it while etcd is down); after etcd is back everyone recovers and
 *   exactly one leads.
 * Each ends with the invariant checker over the whole etcd history.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
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
	fs_wait_one_leader(&F, 5000);
}

static void test_etcd_restart_keeps_one_leader(void)
{
	struct host *L = fs_by_node(&F, obs_leader(F.obs));
	char st[32];
	int64_t tok_before, tok_after;
	host_plugin_state(L, FS_PLUGIN, st, sizeof(st), &tok_before);
	CHECK_STR_EQ(st, "leading");
	uint64_t t0 = loop_now();
	CHECK_OK(harness_etcd_stop(F.etcd, 0));
	CHECK_OK(harness_etcd_restart(F.etcd, 0));
	fprintf(stderr, "etcd restart took %" PRIu64 " ms\n", fs_ms_since(t0));
	size_t before = jwatch_count(F.jw, NULL, 0);
	struct host *N = fs_wait_one_leader(&F, 10000);
	jwatch_wait(F.jw, N->node, jwatch_count(F.jw, N->node, 0) + 2, 10000,
		    "reconciles after the etcd restart");
	CHECK(jwatch_count(F.jw, NULL, 0) >= before + 2);
	host_plugin_state(N, FS_PLUGIN, st, sizeof(st), &tok_after);
	fprintf(stderr,
		"after the etcd restart: %s leads (%s, token %" PRId64 " -> %" PRId64 "), %" PRIu64
		" ms after the stop\n",
		N->node, N == L && tok_after == tok_before ? "leadership survived" : "re-elected",
		tok_before, tok_after, fs_ms_since(t0));
	fs_check_invariants(&F);
}

static void test_etcd_down_longer_than_ttl(void)
{
	struct host *L = fs_wait_one_leader(&F, 5000), *O = L == &F.a ? &F.b : &F.a;
	long mark_l = host_log_size(L);
	CHECK_OK(harness_etcd_kill(F.etcd, 0));
	uint64_t t0 = loop_now();
	long wall0 = wall_ms_of_day();
	/* the CLI, answered by the daemon without etcd, stops saying "leading" */
	host_wait_state(L, FS_PLUGIN, "leading", false, 5000);
	fprintf(stderr,
		"etcd down: the CLI of %s stopped saying leading %" PRIu64 " ms after the kill\n",
		L->node, fs_ms_since(t0));
	/* ttl 2 s, margin 0.4 s: no keepalive is acked after the kill, so
	 * safe_until <= kill + 1.6 s; the daemon's own log line says when it
	 * dropped (plus its loop latency, ASan) and why: the local deadline */
	long deadline, dropped;
	fs_drop_times(L, mark_l, wall0, "etcd down", "the kill", &deadline, &dropped);
	CHECK(deadline != LONG_MIN && dropped != LONG_MIN);
	CHECK(dropped >= 0 && dropped <= 1600 + 400);
	CHECK(deadline <= dropped);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(L, &o, "status", FS_PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "state:") && !strstr(o.out, "leading\n"));
	fprintf(stderr, "etcd down: leaseholdctl status on %s says %.*s\n", L->node,
		(int)strcspn(strstr(o.out, "state:"), "\n"), strstr(o.out, "state:"));
	ctl_out_free(&o);
	/* while etcd stays down (past 2 TTLs) nobody claims to lead */
	fs_nobody_leads_until(&F, t0, 4500);
	(void)O;
	/* back: everyone recovers, exactly one leads and reconciles */
	uint64_t t1 = loop_now();
	CHECK_OK(harness_etcd_restart(F.etcd, 0));
	struct host *N = fs_wait_one_leader(&F, 15000);
	jwatch_wait(F.jw, N->node, jwatch_count(F.jw, N->node, 0) + 2, 10000,
		    "reconciles after etcd came back");
	obs_wait_members(F.obs, 2, 10000);
	fprintf(stderr, "etcd back: %s leads %" PRIu64 " ms after the restart began\n", N->node,
		fs_ms_since(t1));
	host_wait_state(N == &F.a ? &F.b : &F.a, FS_PLUGIN, "campaigning", true, 10000);
	fs_check_invariants(&F);
}

int main(void)
{
	fs_setup_1_0(&F, 1);

	RUN(test_start_two_hosts);
	RUN(test_etcd_restart_keeps_one_leader);
	RUN(test_etcd_down_longer_than_ttl);

	fs_finish(&F);
	return CHECK_EXIT();
}
