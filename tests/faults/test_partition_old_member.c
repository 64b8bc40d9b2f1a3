/* SPDX-License-Identifier: MIT */
/*
 * test_partition_old_member - issue 16 part 1: a node still on an old
 * release, cut off from etcd, must keep blocking an incompatible status,
 * and must not claim readiness while it has no session.
 *
 * Four hosts on 1.0.0. a, b and c are upgraded to 1.1.0, whose
 * min_compatible_release is 1.1.0: while d still runs 1.0.0 the leader must
 * not restrict the status to minimum compatible 1.1.0 (the reference
 * algorithm counts every node that joined, with its last release, until it
 * is upgraded or removed). Then d's link goes down for longer than its TTL:
 * - d's lease expires on etcd, and for 3 s after that (the leader reacts to
 *   a membership change within milliseconds) no status with minimum
 *   compatible release >= 1.1.0 is written (checked over the whole etcd
 *   history, so a restriction undone later is caught too);
 * - once d's session is lost by its local deadline, `leaseholdctl
 *   wait-ready reconciler --timeout 1` on d does not answer ready (it has no
 *   view it can vouch for), neither right away nor at the end of the window.
 * Healed, d gets a new lease and is ready again under the unrestricted
 * status; the status is still not restricted. Upgraded, d lets the
 * rollout complete: DONE 1.1.0 with minimum compatible 1.1.0, d ready,
 * invariants over the whole history.
 *
 * A daemon that binds member records to the lease, or answers wait-ready
 * from its last view, fails it. Skips (77) without network namespaces.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election/election_internal.h"
#include "partition.h"

static struct pcluster C;
static struct host *A, *D;
static const struct release V110 = {1, 1, 0};

/* status writes restricted to minimum compatible >= 1.1.0 in the whole
 * history (each printed) */
static int restricted_status_writes(void)
{
	struct inv_history h;
	inv_history_load(&C.t, PC_PREFIX, &h);
	char key[128];
	snprintf(key, sizeof(key), "%s/%s/status", PC_PREFIX, PC_PLUGIN);
	int n = 0;
	for (size_t i = 0; i < h.n; i++) {
		const struct inv_event *e = &h.ev[i];
		int state;
		struct release v, m;
		if (e->del || strcmp(e->key, key) != 0 ||
		    election_decode_status(e->val, e->val_len, &state, &v, &m) < 0)
			continue;
		if (release_cmp(m, V110) >= 0) {
			fprintf(stderr,
				"status at revision %" PRId64 ": state %d, version %u.%u.%u, minimum "
				"compatible %u.%u.%u\n",
				e->rev, state, v.major, v.minor, v.patch, m.major, m.minor, m.patch);
			n++;
		}
	}
	inv_history_free(&h);
	return n;
}

/* wait-ready on h with a 1 s timeout: its exit status (0 = ready) */
static int wait_ready_1s(const struct host *h)
{
	struct ctl_out o;
	int st = host_ctl(h, &o, "wait-ready", PC_PLUGIN, "--timeout", "1", NULL);
	fprintf(stderr, "wait-ready on %s: exit %d after %ld ms: %s%s", h->node, st, o.ms, o.out,
		o.err);
	ctl_out_free(&o);
	return st;
}

static void test_three_of_four_upgraded(void)
{
	pc_start(&C, 0, "1.0.0", NULL, NULL);
	obs_wait_leader(C.obs, A->node, 20000);
	for (int i = 1; i < 4; i++)
		pc_start(&C, i, "1.0.0", NULL, NULL);
	obs_wait_members(C.obs, 4, 20000);
	obs_wait_status_done(C.obs, REL(1, 0, 0), 20000);
	for (int i = 0; i < 3; i++)
		host_install_plugin(&C.host[i], "1.1.0-reference", "reconciler.so");
	for (int i = 0; i < 3; i++)
		obs_wait_member_release(C.obs, C.host[i].node, V110, 20000);
	struct host *L = pc_wait_leader_other(&C, D->node, 20000);
	host_wait_state(L, PC_PLUGIN, "leading", true, 15000);
	/* d runs 1.0.0 and is connected: nothing restricted, d is ready */
	CHECK_INT_EQ(restricted_status_writes(), 0);
	CHECK_INT_EQ(wait_ready_1s(D), 0);
}

static void test_old_node_cut_off_past_its_ttl(void)
{
	int64_t lease = pc_host_lease(D, 0);
	CHECK(lease != 0);
	long mark = host_log_size(D);
	uint64_t t0 = loop_now();
	pc_fault(&C, D, PC_LINK_DOWN);
	long lost = pc_wait_log(&C, D, mark, "local deadline passed", 10000);
	fprintf(stderr, "d's session lost by its local deadline %ld ms after the cut\n", lost);
	int ready_after_loss = wait_ready_1s(D);
	pc_wait_lease_gone(&C, lease, 15000);
	fprintf(stderr, "d's lease %" PRIx64 " gone on etcd %" PRIu64 " ms after the cut\n",
		(uint64_t)lease, (loop_now() - t0) / LOOP_NS_PER_MS);
	pc_run_for(&C, 3000);
	int restricted = restricted_status_writes();
	int ready_at_end = wait_ready_1s(D);
	fprintf(stderr,
		"while d (1.0.0) is cut off: %d restricted status write(s); wait-ready on d: exit "
		"%d after its session was lost, exit %d %" PRIu64 " ms after the cut\n",
		restricted, ready_after_loss, ready_at_end, (loop_now() - t0) / LOOP_NS_PER_MS);
	CHECK_INT_EQ(restricted, 0);
	CHECK(ready_after_loss != 0);
	CHECK(ready_at_end != 0);
}

static void test_healed_then_upgraded(void)
{
	long mark = host_log_size(D);
	pc_heal(&C, D);
	pc_wait_log(&C, D, mark, "granted", 15000);
	/* back with a session and a current view: ready under the unrestricted
	 * status, which it still holds back */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(D, &o, "wait-ready", PC_PLUGIN, "--timeout", "15", NULL), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(restricted_status_writes(), 0);

	host_install_plugin(D, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(C.obs, D->node, V110, 20000);
	obs_wait_status_done(C.obs, V110, 20000);
	int state;
	struct release v, m;
	CHECK(tu_get_status(&C.t, PC_PREFIX, PC_PLUGIN, &state, &v, &m));
	CHECK_INT_EQ(release_cmp(m, V110), 0);
	CHECK_INT_EQ(host_ctl(D, &o, "wait-ready", PC_PLUGIN, "--timeout", "15", NULL), 0);
	ctl_out_free(&o);
	pc_check_invariants(&C);
}

int main(void)
{
	pc_init(&C, 4);
	A = &C.host[0];
	D = &C.host[3];
	RUN(test_three_of_four_upgraded);
	RUN(test_old_node_cut_off_past_its_ttl);
	RUN(test_healed_then_upgraded);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
