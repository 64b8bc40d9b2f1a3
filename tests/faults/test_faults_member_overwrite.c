/* SPDX-License-Identifier: MIT */
/*
 * test_faults_member_overwrite - garbage written over the member record of a
 * LIVE node that still runs the old release, while the new release's leader
 * waits to write the restricted status.
 *
 * Safe outcome: the leader must not take the unreadable record as "that node
 * is gone". b still runs 1.0.0 (and serves: its readiness says so); if the
 * 1.1.0 leader wrote the restricted status (minimum compatible 1.1.0) and
 * reconciled to format v2 now, b would serve state it cannot read - exactly
 * what the restricted-status wait exists to prevent. So for as long as b
 * runs 1.0.0 the status stays DONE 1.0.0 and the data stays format v1; when
 * b really upgrades, the migration completes.
 *
 * Two mechanisms keep it safe: an undecodable member record counts as a
 * member of unknown release (it blocks the restriction, fail safe), and b's
 * own host sees its record overwritten and puts it back.
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
#include "proto/leasehold.pb-c.h"
#include "testutil.h"

#define PFX FS_PREFIX
#define PLUGIN FS_PLUGIN
#define K(x) PFX "/" PLUGIN "/" x
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

static struct fault_suite F;

#define HOST_ARGS fs_host_args

static const uint8_t GARBAGE[] = {0xff, 0xfe, 'g', 'a', 'r', 'b', 0x00, 0x01, 0x9a, 0x12};

static void test_garbage_over_live_old_member_keeps_the_wait(void)
{
	host_install_plugin(&F.a, "1.0.0", "reconciler.so");
	host_install_plugin(&F.b, "1.0.0", "reconciler.so");
	host_start(&F.b, harness_etcd_urls(F.etcd), HOST_ARGS);
	obs_wait_leader(F.obs, "b", 15000);
	host_start(&F.a, harness_etcd_urls(F.etcd), HOST_ARGS);
	obs_wait_members(F.obs, 2, 15000);
	obs_wait_status_done(F.obs, REL(1, 0, 0), 15000);
	jwatch_wait(F.jw, "b", 1, 10000, "b reconciles");

	/* a moves to 1.1.0 and leads, waiting for b (1.0.0) */
	long ma = host_log_size(&F.a);
	host_wait_state(&F.a, PLUGIN, "campaigning", true, 15000);
	host_install_plugin(&F.a, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(F.obs, "a", REL(1, 1, 0), 10000);
	obs_wait_leader(F.obs, "a", 5000);
	uint64_t t0 = loop_now();
	while (host_log_count(&F.a, ma, "waiting for members below 1.1.0") == 0) {
		CHECK((loop_now() - t0) / LOOP_NS_PER_MS < 5000);
		loop_run_once(F.t.loop, 50);
	}
	size_t a_before = jwatch_count(F.jw, "a", 0);

	/* garbage over b's live record; b keeps running 1.0.0 */
	int64_t rev = tu_put(&F.t, K("members/b"), GARBAGE, sizeof(GARBAGE));
	fprintf(stderr, "garbage written over members/b at revision %" PRId64 "\n", rev);
	t0 = loop_now();
	while ((loop_now() - t0) / LOOP_NS_PER_MS < 3000) {
		loop_run_once(F.t.loop, 50);
		int state;
		struct release v, m;
		CHECK(tu_get_status(&F.t, PFX, PLUGIN, &state, &v, &m));
		if (state != DONE || release_cmp(v, REL(1, 0, 0)) != 0 ||
		    release_cmp(m, REL(1, 0, 0)) != 0 || jwatch_count(F.jw, "a", 0) != a_before) {
			char vb[RELEASE_STRLEN], mb[RELEASE_STRLEN];
			fprintf(
			    stderr,
			    "BUG: %" PRIu64
			    " ms after garbage replaced the member record of b (still "
			    "running 1.0.0), the 1.1.0 leader a wrote status %s %s (minimum "
			    "compatible "
			    "%s) and reconciled %zu times: the restricted status was written while "
			    "a "
			    "1.0.0 member runs, which then loses readiness and gets format-v2 "
			    "data\n",
			    (loop_now() - t0) / LOOP_NS_PER_MS, state == DONE ? "DONE" : "WORKING",
			    release_format(v, vb, sizeof(vb)), release_format(m, mb, sizeof(mb)),
			    jwatch_count(F.jw, "a", 0) - a_before);
			hosts_dump_logs();
			exit(1);
		}
	}
	tu_check_value(&F.t, K("data/config/schema"), "reconciler/v1");
	CHECK(host_alive(&F.a) && host_alive(&F.b));

	/* b really upgrades: the migration completes */
	host_install_plugin(&F.b, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(F.obs, "b", REL(1, 1, 0), 10000);
	obs_wait_status_done(F.obs, REL(1, 1, 0), 10000);
	CHECK_INT_EQ(inv_check_all(&F.t, PFX, PLUGIN, NULL), 0);
}

int main(void)
{
	fs_setup_1_0(&F, 1);

	RUN(test_garbage_over_live_old_member_keeps_the_wait);

	fs_finish(&F);
	return CHECK_EXIT();
}
