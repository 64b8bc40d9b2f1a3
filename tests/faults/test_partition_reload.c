/* SPDX-License-Identifier: MIT */
/*
 * test_partition_reload - the leader is cut off from etcd (link down) in
 * the middle of a hot reload to a newer release.
 *
 * Two hosts on 1.0.0; a leads with back-to-back reconciles that take 1.5 s,
 * so that the reload has a running callback to drain. 1.1.0 is dropped into a's
 * plugin directory and a's link goes down as soon as a logs the start of the
 * swap: its drain, resign and member update cannot reach etcd. Guarantees
 * (as for any cut leader): a stops leading no later than its local deadline
 * and before b is elected, b leads within TTL + 1 s of the cut (asserted
 * with room for load), a's token writes nothing after b's first journal
 * record, the invariants hold. Healed: a finishes the reload (one 1.1.0
 * instance mapped), registers as 1.1.0 and, newest, takes the lead from b;
 * b is upgraded too, the status ends DONE 1.1.0, and the invariants hold
 * over the whole history. Skips (77) without network namespaces.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "partition.h"

static struct pcluster C;
static long g_reload_mark; /* a's log before the reload */
static const char *const SLOW[] = {"LH_EXAMPLE_DELAY_MS=1500", NULL};

static void test_start_two_hosts(void)
{
	struct host *A = &C.host[0];
	pc_start(&C, 0, "1.0.0", SLOW, "1ms");
	obs_wait_leader(C.obs, A->node, 20000);
	pc_start(&C, 1, "1.0.0", NULL, NULL);
	obs_wait_members(C.obs, 2, 20000);
	obs_wait_status_done(C.obs, REL(1, 0, 0), 20000);
	jwatch_wait(C.jw, A->node, 1, 10000, "a reconciles");
}

/* right before the cut: the reload to 1.1.0 starts on the leader while a
 * reconcile runs. a's reconciles run back to back (interval 1 ms), each
 * 1.5 s long with its journal write at the end: right after a record, the
 * next reconcile has just begun, and the swap that starts some 50-100 ms
 * later (the plugin directory's debounce) must drain it, over a second
 * after the cut. */
static void start_reload(struct pcluster *c, struct host *L, void *arg)
{
	(void)arg;
	jwatch_wait(c->jw, L->node, jwatch_count(c->jw, L->node, 0) + 1, 10000,
		    "a reconcile of the leader ends");
	long mark = host_log_size(L);
	g_reload_mark = mark;
	host_install_plugin(L, "1.1.0-reference", "reconciler.so");
	long ms = pc_wait_log(c, L, mark, "hot reload to 1.1.0", 10000);
	fprintf(stderr, "%s started the reload %ld ms after the new file\n", L->node, ms);
}

static bool p_reloaded(struct json_object *p, const void *arg)
{
	(void)arg;
	const char *rel = p ? jstr(p, "release") : NULL;
	return rel && strcmp(rel, "1.1.0") == 0 && !jstr(p, "error");
}

static void test_leader_cut_off_during_a_reload(void)
{
	struct host *A = &C.host[0], *B = &C.host[1];
	struct pc_cut cut;
	pc_cut_leader_after(&C, PC_LINK_DOWN, start_reload, NULL, &cut);
	CHECK(cut.old_leader == A && cut.successor == B);
	/* the cut landed inside the reload: a lost its term to the cut, it
	 * had not handed it back after draining */
	char *log = host_log_since(A, g_reload_mark);
	const char *lost = strstr(log, "lost leadership"), *left = strstr(log, "leaving leadership");
	if (!lost || (left && left < lost)) {
		fprintf(stderr, "a's log since the reload:\n%s\n", log);
		CHECK(!"the cut did not land during the reload's drain");
	}
	free(log);
	pc_hold_until(&C, cut.cut_at, 2 * PC_TTL_MS);

	/* healed: a ends on 1.1.0 with one instance and, newest, leads */
	uint64_t t0 = loop_now();
	pc_heal(&C, A);
	struct json_object *p =
	    ctl_wait_plugin(A, PC_PLUGIN, p_reloaded, NULL, 15000, "a runs 1.1.0 after the heal");
	json_object_put(p);
	obs_wait_member_release(C.obs, A->node, REL(1, 1, 0), 15000);
	obs_wait_leader(C.obs, A->node, 15000);
	fprintf(stderr, "healed %s: registered as 1.1.0 and leading after %" PRIu64 " ms\n",
		A->node, (loop_now() - t0) / LOOP_NS_PER_MS);
	uint64_t t1 = loop_now();
	while (host_mapped_copies(A) != 1) {
		if ((loop_now() - t1) / LOOP_NS_PER_MS > 10000) {
			fprintf(stderr, "a has %d plugin copies mapped\n", host_mapped_copies(A));
			hosts_dump_logs();
			CHECK(!"the reload did not finish after the heal");
		}
		loop_run_once(C.t.loop, 50);
	}
	pc_check_token_silent(&C, cut.old_token, cut.first_new_rev, A->node);

	/* b follows; the rollout completes */
	host_install_plugin(B, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(C.obs, B->node, REL(1, 1, 0), 15000);
	obs_wait_status_done(C.obs, REL(1, 1, 0), 20000);
	jwatch_wait(C.jw, A->node, jwatch_count(C.jw, A->node, 0) + 1, 10000,
		    "a reconciles under 1.1.0");
	pc_check_invariants(&C);
}

int main(void)
{
	pc_init(&C, 2);
	RUN(test_start_two_hosts);
	RUN(test_leader_cut_off_during_a_reload);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
