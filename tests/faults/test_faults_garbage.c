/* SPDX-License-Identifier: MIT */
/*
 * test_faults_garbage - hostile records written into etcd while hosts lead.
 *
 * - Member keys: garbage bytes, a 1 MiB value, a truncated Member, ids that
 *   do not fit the layout (empty, with '/', control bytes), and a valid
 *   Member with unknown fields. No crash, each invalid record logged and
 *   treated as absent, the valid one with unknown fields counted with its
 *   release; the leader keeps leading and reconciling.
 * - Keys outside the layout (inside and outside the range the hosts watch,
 *   one of 1 MiB): ignored.
 * - Status: garbage, 1 MiB, truncated: logged, treated as absent; a status
 *   with unknown fields is valid. After a new election the new leader treats
 *   the garbage status as absent: it reconciles first, then writes a valid
 *   DONE again.
 * - The restricted-status wait (1.1.0 leads, b runs 1.0.0): member records
 *   of unknown nodes - undecodable ones, and valid ones with unknown fields
 *   of release 1.1.0 and 1.0.0 - do not unblock it while b runs 1.0.0; after
 *   b upgrades, the readable 1.0.0 record with unknown fields still blocks
 *   it; once the old and unreadable records are deleted it completes (the
 *   readable 1.1.0 one with unknown fields does not block).
 *   Whether an UNREADABLE record of an unknown node should block the wait is
 *   left open here: the leader cannot tell it from a live old node's record
 *   overwritten with garbage, and that case - which must block - is
 *   test_faults_member_overwrite.
 * Each ends with the invariant checker.
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
#define MIB (1024 * 1024)

static struct fault_suite F;
static uint8_t *g_big; /* 1 MiB of hostile bytes */

#define HOST_ARGS fs_host_args

static const uint8_t GARBAGE[] = {0xff, 0xfe, 'g', 'a', 'r', 'b', 0x00, 0x01, 0x9a, 0x12};
/* unknown fields: 15 (varint 42) and 16 (bytes "abc") */
static const uint8_t UNKNOWN[] = {0x78, 0x2a, 0x82, 0x01, 0x03, 'a', 'b', 'c'};

static size_t member_bytes(const char *node, struct release r, bool unknown, uint8_t *buf)
{
	Leasehold__Release pr = LEASEHOLD__RELEASE__INIT;
	pr.major = r.major;
	pr.minor = r.minor;
	pr.patch = r.patch;
	Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
	m.node_id = (char *)(uintptr_t)node;
	m.release = &pr;
	size_t n = leasehold__member__pack(&m, buf);
	if (unknown) {
		memcpy(buf + n, UNKNOWN, sizeof(UNKNOWN));
		n += sizeof(UNKNOWN);
	}
	return n;
}

static size_t status_bytes(int state, struct release v, struct release m, bool unknown,
			   uint8_t *buf)
{
	size_t n = tu_status_encode(state, v, m, buf);
	if (unknown) {
		memcpy(buf + n, UNKNOWN, sizeof(UNKNOWN));
		n += sizeof(UNKNOWN);
	}
	return n;
}

static void both_alive(void)
{
	CHECK(host_alive(&F.a));
	CHECK(host_alive(&F.b));
}

/* a leads and keeps reconciling under token tok for a while */
static void leader_keeps_going(const char *node, int64_t tok)
{
	size_t n = jwatch_count(F.jw, node, tok);
	jwatch_wait(F.jw, node, jwatch_count(F.jw, node, 0) + 3, 5000,
		    "the leader keeps reconciling");
	CHECK(jwatch_count(F.jw, node, tok) >= n + 3);
	CHECK_STR_EQ(obs_leader(F.obs), node);
}

static void test_start_two_hosts(void)
{
	fs_start_two_hosts(&F, "1.0.0", REL(1, 0, 0));
}

/* a leads: its fencing token; where the hosts' logs end now into *ma, *mb */
static int64_t a_leads(long *ma, long *mb)
{
	char st[32];
	int64_t tok;
	CHECK_STR_EQ(host_plugin_state(&F.a, PLUGIN, st, sizeof(st), &tok), "leading");
	*ma = host_log_size(&F.a);
	*mb = host_log_size(&F.b);
	return tok;
}

static void test_garbage_members_and_foreign_keys(void)
{
	long ma, mb;
	int64_t tok = a_leads(&ma, &mb);
	uint8_t buf[256];
	size_t n;

	tu_put(&F.t, K("members/zz"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("members/yy"), g_big, MIB);
	n = member_bytes("xx", REL(1, 0, 0), false, buf);
	tu_put(&F.t, K("members/xx"), buf, n - 2); /* truncated */
	tu_put(&F.t, K("members/bin\x01\x7f\xff"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("members/"), GARBAGE, sizeof(GARBAGE));
	n = member_bytes("q", REL(1, 0, 0), false, buf);
	tu_put(&F.t, K("members/q/r"), buf, n);
	/* valid with unknown fields: a member of release 1.0.0 */
	n = member_bytes("ww", REL(1, 0, 0), true, buf);
	tu_put(&F.t, K("members/ww"), buf, n);
	/* keys outside the layout, inside the watched range and outside it */
	tu_put(&F.t, K("junk"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("members"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("nonsense/deep/key"), g_big, MIB);
	tu_put(&F.t, K("election"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("status/extra"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("statusx"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("data/junk"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, PFX "/zzz", g_big, MIB);
	tu_put(&F.t, PFX "/" PLUGIN, GARBAGE, sizeof(GARBAGE));

	/* a, b and ww count; the invalid ones are not members (release unknown) */
	obs_wait_members(F.obs, 3, 5000);
	leader_keeps_going("a", tok);
	both_alive();
	for (struct host *h = &F.a; h; h = h == &F.a ? &F.b : NULL) {
		size_t c = host_log_count(h, h == &F.a ? ma : mb,
					  "is not a valid Member; its release is unknown");
		fprintf(stderr, "%s logged %zu invalid member records\n", h->node, c);
		CHECK(c >= 4); /* zz, yy, xx, bin.. */
	}
	/* the CLI copes with the hostile ids */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&F.a, &o, "members", PLUGIN, "--json", NULL), 0);
	CHECK(strstr(o.out, "\"ww\"") != NULL);
	CHECK(strstr(o.out, "\"zz\"") == NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&F.b, &o, "plugins", NULL), 0);
	ctl_out_free(&o);

	tu_del(&F.t, K("members/ww"));
	obs_wait_members(F.obs, 2, 5000);
	/* undecodable member records (release unknown) would block any later
	 * incompatible status change, fail safe: clean them up */
	tu_del(&F.t, K("members/zz"));
	tu_del(&F.t, K("members/yy"));
	tu_del(&F.t, K("members/xx"));
	tu_del(&F.t, K("members/bin\x01\x7f\xff"));
	leader_keeps_going("a", tok);
	CHECK_INT_EQ(inv_check_all(&F.t, PFX, PLUGIN, NULL), 0);
}

static void test_garbage_status_is_absent_on_next_election(void)
{
	long ma, mb;
	int64_t tok = a_leads(&ma, &mb);
	uint8_t buf[256];
	size_t n;

	/* valid with unknown fields: still DONE 1.0.0 for everyone */
	n = status_bytes(LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE, REL(1, 0, 0),
			 REL(1, 0, 0), true, buf);
	tu_put(&F.t, K("status"), buf, n);
	tu_put(&F.t, K("status"), g_big, MIB);
	tu_put(&F.t, K("status"), buf, n - sizeof(UNKNOWN) - 3); /* truncated */
	tu_put(&F.t, K("status"), GARBAGE, sizeof(GARBAGE));
	leader_keeps_going("a", tok); /* the leader does not act on it mid-term */
	both_alive();
	CHECK(host_log_count(&F.a, ma, "status record is not a valid ReconcilerStatus") >= 3);
	CHECK(host_log_count(&F.b, mb, "status record is not a valid ReconcilerStatus") >= 3);

	/* a new election: b reads the garbage as absent, reconciles, writes DONE */
	size_t b_before = jwatch_count(F.jw, "b", 0);
	host_signal(&F.a, SIGTERM);
	obs_wait_leader(F.obs, "b", 3000);
	CHECK_OK(host_wait(&F.a, 15000));
	CHECK_INT_EQ(F.a.exit_status, 0);
	jwatch_wait(F.jw, "b", b_before + 1, 5000, "b reconciles first");
	obs_wait_status_done(F.obs, REL(1, 0, 0), 5000);
	CHECK(host_log_count(&F.b, mb, "status record is not valid; treated as absent") >= 1);
	CHECK(host_log_count(&F.b, mb, "no status yet; reconciling first") >= 1);
	/* the status write came after b's first reconcile of this term */
	int state;
	struct release v, m;
	CHECK(tu_get_status(&F.t, PFX, PLUGIN, &state, &v, &m));
	host_start(&F.a, harness_etcd_urls(F.etcd), HOST_ARGS);
	obs_wait_members(F.obs, 2, 15000);
	CHECK_INT_EQ(inv_check_all(&F.t, PFX, PLUGIN, NULL), 0);
}

/* the status stays DONE 1.0.0 (format v1) and a does not reconcile for ms */
static void restricted_wait_holds(int ms, size_t a_records, const char *why)
{
	uint64_t t0 = loop_now();
	while ((loop_now() - t0) / LOOP_NS_PER_MS < (uint64_t)ms) {
		loop_run_once(F.t.loop, 50);
		int state;
		struct release v, m;
		CHECK(tu_get_status(&F.t, PFX, PLUGIN, &state, &v, &m));
		if (state != LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE ||
		    release_cmp(v, REL(1, 0, 0)) != 0 || release_cmp(m, REL(1, 0, 0)) != 0 ||
		    jwatch_count(F.jw, "a", 0) != a_records) {
			fprintf(stderr, "the restricted-status wait ended although %s\n", why);
			hosts_dump_logs();
			exit(1);
		}
	}
	tu_check_value(&F.t, K("data/config/schema"), "reconciler/v1");
}

static void test_garbage_members_and_the_restricted_wait(void)
{
	/* b leads 1.0.0; a moves to 1.1.0 (incompatible) and takes over, but
	 * must wait for b (1.0.0) before it writes the restricted status */
	long ma = host_log_size(&F.a);
	host_wait_state(&F.a, PLUGIN, "campaigning", true, 15000);
	size_t a_before = jwatch_count(F.jw, "a", 0);
	host_install_plugin(&F.a, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(F.obs, "a", REL(1, 1, 0), 10000);
	obs_wait_leader(F.obs, "a", 5000);
	host_wait_state(&F.a, PLUGIN, "leading", true, 5000);
	uint64_t t0 = loop_now();
	while (host_log_count(&F.a, ma, "waiting for members below 1.1.0") == 0) {
		CHECK((loop_now() - t0) / LOOP_NS_PER_MS < 5000);
		loop_run_once(F.t.loop, 50);
	}
	/* records of nodes nobody knows: undecodable ones, a valid 1.1.0 one
	 * and a valid 1.0.0 one, both with unknown fields (no lease: they stay) */
	uint8_t buf[256];
	size_t n = member_bytes("zz2", REL(1, 1, 0), false, buf);
	tu_put(&F.t, K("members/zz2"), buf, n - 1);
	tu_put(&F.t, K("members/zz3"), GARBAGE, sizeof(GARBAGE));
	tu_put(&F.t, K("members/zz4"), g_big, MIB);
	n = member_bytes("zz5", REL(1, 1, 0), true, buf);
	tu_put(&F.t, K("members/zz5"), buf, n);
	n = member_bytes("zz6", REL(1, 0, 0), true, buf);
	tu_put(&F.t, K("members/zz6"), buf, n);
	/* none of them unblocks it: b still runs 1.0.0 */
	restricted_wait_holds(2000, a_before, "b still runs 1.0.0 (garbage records appeared)");
	/* b upgrades; the readable 1.0.0 record with unknown fields still blocks */
	host_install_plugin(&F.b, "1.1.0-reference", "reconciler.so");
	obs_wait_member_release(F.obs, "b", REL(1, 1, 0), 10000);
	restricted_wait_holds(1500, a_before,
			      "members/zz6 (release 1.0.0, unknown fields) is still there");
	/* the old and the unreadable records go: the wait ends (the readable
	 * 1.1.0 record with unknown fields does not block) */
	tu_del(&F.t, K("members/zz6"));
	tu_del(&F.t, K("members/zz2"));
	tu_del(&F.t, K("members/zz3"));
	tu_del(&F.t, K("members/zz4"));
	long ms = obs_wait_status_done(F.obs, REL(1, 1, 0), 10000);
	fprintf(stderr, "DONE 1.1.0 %ld ms after the last old record went\n", ms);
	tu_check_value(&F.t, K("data/config/schema"), "reconciler/v2");
	both_alive();
	CHECK_INT_EQ(inv_check_all(&F.t, PFX, PLUGIN, NULL), 0);
}

int main(void)
{
	g_big = malloc(MIB);
	CHECK(g_big != NULL);
	for (size_t i = 0; i < MIB; i++)
		g_big[i] = (uint8_t)(i * 131 + 7);
	fs_setup_1_0(&F, 1);

	RUN(test_start_two_hosts);
	RUN(test_garbage_members_and_foreign_keys);
	RUN(test_garbage_status_is_absent_on_next_election);
	RUN(test_garbage_members_and_the_restricted_wait);

	fs_finish(&F);
	free(g_big);
	return CHECK_EXIT();
}
