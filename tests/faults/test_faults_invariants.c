/* SPDX-License-Identifier: MIT */
/*
 * test_faults_invariants - the invariant checker can fail: fabricated
 * histories with two tokens interleaved, one token from two nodes, a record
 * after its election key was deleted, a record with no election key, a
 * status that goes back, lost or wrong-format desired keys, an output written
 * outside a fenced txn or its term, an output an older release rewrites, a
 * write while paused, an input its output does not reflect. Each must trip
 * exactly the check it targets, and a clean history must pass all of them.
 * Last, the same through a real etcd: forged records written with a plain
 * client are loaded from revision 1 and caught.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "invariants.h"
#include "proto/leasehold.pb-c.h"
#include "testutil.h"

#define P "/p"
#define N "reconciler"
#define EL P "/" N "/election/"
#define J P "/" N "/data/journal/"
#define CFG P "/" N "/data/config/"
#define STATUS P "/" N "/status"
#define IN P "/" N "/data/desired/"
#define OUT P "/" N "/data/out/"
#define PAUSED P "/" N "/paused"
#define SETTINGS P "/" N "/config"
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE
#define WORKING LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING

static void put(struct inv_history *h, int64_t rev, const char *key, const char *val,
		int64_t create)
{
	inv_history_add(h, rev, false, key, val, strlen(val), create ? create : rev);
}

static void del(struct inv_history *h, int64_t rev, const char *key)
{
	inv_history_add(h, rev, true, key, NULL, 0, 0);
}

static void put_status(struct inv_history *h, int64_t rev, int state, struct release v,
		       struct release m, int64_t create)
{
	uint8_t buf[TU_STATUS_MAX];
	size_t n = tu_status_encode(state, v, m, buf);
	inv_history_add(h, rev, false, STATUS, buf, n, create);
}

static void journal(struct inv_history *h, int64_t rev, int64_t token, int counter,
		    const char *node, const char *release, int items)
{
	char key[128], val[128];
	snprintf(key, sizeof(key), J "%016llx-%08d", (unsigned long long)token, counter);
	snprintf(val, sizeof(val), "node=%s token=%lld release=%s items=%d", node, (long long)token,
		 release, items);
	put(h, rev, key, val, rev);
}

/* a clean history: a leads with token 2 (format v1), b takes over with token
 * 6 after a's key is deleted, both reconcile, status DONE 1.0.0 */
static void base(struct inv_history *h)
{
	memset(h, 0, sizeof(*h));
	put(h, 2, EL "aa", "a", 2);
	journal(h, 3, 2, 0, "a", "1.0.0", 2);
	put(h, 3, CFG "schema", "reconciler/v1", 3);
	put(h, 3, CFG "items/0", "item=0;state=ready", 3);
	put(h, 3, CFG "items/1", "item=1;state=ready", 3);
	put_status(h, 4, DONE, REL(1, 0, 0), REL(1, 0, 0), 4);
	journal(h, 5, 2, 1, "a", "1.0.0", 2);
	put(h, 6, EL "bb", "b", 6);
	del(h, 7, EL "aa");
	journal(h, 8, 6, 0, "b", "1.0.0", 2);
}

struct counts {
	int a, b, c, d;
};

static struct counts run(const struct inv_history *h)
{
	struct counts c;
	c.a = inv_check_overlap(h, P, N, NULL);
	c.b = inv_check_fence(h, P, N);
	c.c = inv_check_status(h, P, N, NULL);
	c.d = inv_check_desired(h, P, N);
	fprintf(stderr, "  -> violations: a=%d b=%d c=%d d=%d\n", c.a, c.b, c.c, c.d);
	return c;
}

static void test_clean_history_passes(void)
{
	struct inv_history h;
	base(&h);
	struct inv_stats st;
	CHECK_INT_EQ(inv_check_overlap(&h, P, N, &st), 0);
	CHECK_INT_EQ(st.journal, 3);
	CHECK_INT_EQ(st.terms, 2);
	CHECK_INT_EQ(st.last_token, 6);
	struct counts c = run(&h);
	CHECK(c.a == 0 && c.b == 0 && c.c == 0 && c.d == 0);
	/* a trailing slash on the prefix changes nothing */
	CHECK_INT_EQ(inv_check_fence(&h, P "/", N), 0);
	inv_history_free(&h);
}

static void test_interleaved_tokens_trip_overlap(void)
{
	struct inv_history h;
	base(&h);
	/* a writes with its old token after b's first record (a's key is
	 * still alive here, so only (a) can see it) */
	inv_history_free(&h);
	memset(&h, 0, sizeof(h));
	put(&h, 2, EL "aa", "a", 2);
	put(&h, 3, EL "bb", "b", 3);
	journal(&h, 4, 3, 0, "b", "1.0.0", 0);
	journal(&h, 5, 2, 0, "a", "1.0.0", 0);
	put_status(&h, 6, DONE, REL(1, 0, 0), REL(1, 0, 0), 6);
	put(&h, 6, CFG "schema", "reconciler/v1", 6);
	struct counts c = run(&h);
	CHECK_INT_EQ(c.a, 1);
	CHECK_INT_EQ(c.b, 0);
	inv_history_free(&h);
}

static void test_one_token_two_nodes_trips_overlap(void)
{
	struct inv_history h;
	base(&h);
	journal(&h, 9, 6, 1, "a", "1.0.0", 2); /* a forged record under b's token */
	struct counts c = run(&h);
	CHECK_INT_EQ(c.a, 1);
	CHECK_INT_EQ(c.b, 1); /* and the key of token 6 belongs to b */
	inv_history_free(&h);
}

static void test_record_after_key_deleted_trips_fence(void)
{
	struct inv_history h;
	memset(&h, 0, sizeof(h));
	put(&h, 2, EL "aa", "a", 2);
	journal(&h, 3, 2, 0, "a", "1.0.0", 1);
	put(&h, 3, CFG "schema", "reconciler/v1", 3);
	put(&h, 3, CFG "items/0", "item=0;state=ready", 3);
	put_status(&h, 4, DONE, REL(1, 0, 0), REL(1, 0, 0), 4);
	del(&h, 5, EL "aa");		       /* a's lease expired */
	journal(&h, 6, 2, 1, "a", "1.0.0", 1); /* ... and a still wrote */
	struct counts c = run(&h);
	CHECK_INT_EQ(c.a, 0); /* same token, same node: only the fence sees it */
	CHECK_INT_EQ(c.b, 1);
	CHECK_INT_EQ(c.c, 0);
	CHECK_INT_EQ(c.d, 0);
	/* the same key re-created later (same lease, new campaign) does not
	 * revive the old token */
	put(&h, 7, EL "aa", "a", 7);
	journal(&h, 8, 2, 2, "a", "1.0.0", 1);
	c = run(&h);
	CHECK_INT_EQ(c.b, 2);
	inv_history_free(&h);
}

static void test_record_without_key_trips_fence(void)
{
	struct inv_history h;
	base(&h);
	journal(&h, 9, 42, 0, "c", "1.0.0", 2); /* token 42: no key created at 42 */
	struct counts c = run(&h);
	CHECK_INT_EQ(c.a, 0);
	CHECK_INT_EQ(c.b, 1);
	inv_history_free(&h);
}

/* a shadow run's plugin sees token 0: its journal record, had a write
 * leaked into etcd, names token 0, whose election key never exists */
static void test_shadow_record_trips_fence(void)
{
	struct inv_history h;
	base(&h);
	journal(&h, 9, 0, 0, "b", "1.1.0", 2);
	struct counts c = run(&h);
	CHECK_INT_EQ(c.b, 1);
	inv_history_free(&h);
}

static void test_status_going_back_trips_status(void)
{
	struct inv_history h;
	base(&h);
	put_status(&h, 9, DONE, REL(1, 1, 0), REL(1, 1, 0), 4);
	struct counts c = run(&h);
	CHECK_INT_EQ(c.c, 0);
	put_status(&h, 10, DONE, REL(1, 0, 0), REL(1, 0, 0), 4); /* older DONE */
	c = run(&h);
	CHECK_INT_EQ(c.c, 3); /* version back, min compatible back, older DONE */
	inv_history_free(&h);

	/* a WORKING that goes back is caught too; garbage is skipped, counted */
	base(&h);
	put_status(&h, 9, WORKING, REL(0, 9, 0), REL(1, 0, 0), 4);
	inv_history_add(&h, 10, false, STATUS, "\xff\xff garbage", 9, 4);
	struct inv_stats st;
	CHECK_INT_EQ(inv_check_status(&h, P, N, &st), 1);
	CHECK_INT_EQ(st.status_writes, 2);
	CHECK_INT_EQ(st.status_garbage, 1);
	inv_history_free(&h);
}

static void test_lost_or_wrong_desired_keys_trip_desired(void)
{
	struct inv_history h;
	base(&h);
	del(&h, 9, CFG "items/1");
	struct counts c = run(&h);
	CHECK_INT_EQ(c.d, 1);
	inv_history_free(&h);

	/* status says 1.1.0 but the data is still format v1: schema + 2 items */
	base(&h);
	put_status(&h, 9, DONE, REL(1, 1, 0), REL(1, 1, 0), 4);
	c = run(&h);
	CHECK_INT_EQ(c.d, 3);
	inv_history_free(&h);

	/* an item that should not exist; a final WORKING status */
	base(&h);
	put(&h, 9, CFG "items/7", "item=7;state=ready", 9);
	put_status(&h, 10, WORKING, REL(1, 0, 0), REL(1, 0, 0), 4);
	c = run(&h);
	CHECK_INT_EQ(c.d, 2);
	inv_history_free(&h);

	/* no status at all, no journal at all */
	memset(&h, 0, sizeof(h));
	put(&h, 2, CFG "schema", "reconciler/v1", 2);
	c = run(&h);
	CHECK_INT_EQ(c.d, 2);
	inv_history_free(&h);
}

static void test_malformed_journal_record_trips_overlap(void)
{
	struct inv_history h;
	base(&h);
	put(&h, 9, J "0000000000000006-00000009", "node=b token=7 release=1.0.0 items=2", 9);
	put(&h, 10, J "zz", "node=b", 10);
	struct counts c = run(&h);
	CHECK_INT_EQ(c.a, 2); /* key/value token mismatch; bad key */
	inv_history_free(&h);
}

/* the loader against a real etcd: forged writes are read from revision 1
 * and caught; the replayed state matches etcd */
/* a clean history of inputs and outputs: a (token 2, 1.0.0) materializes
 * input x twice, with a pause between the two */
static void base_io(struct inv_history *h)
{
	memset(h, 0, sizeof(*h));
	put(h, 2, EL "aa", "a", 2);
	put(h, 3, IN "x", "1", 3);
	journal(h, 4, 2, 0, "a", "1.0.0", 0);
	put(h, 4, OUT "x", "value=1", 4);
	put_status(h, 5, DONE, REL(1, 0, 0), REL(1, 0, 0), 5);
	put(h, 6, PAUSED, "pause", 6);
	del(h, 7, PAUSED);
	put(h, 8, IN "x", "2", 3);
	journal(h, 9, 2, 1, "a", "1.0.0", 0);
	put(h, 9, OUT "x", "value=2", 4);
}

struct io_counts {
	int e, f, p, g, r;
};

static struct io_counts run_io(const struct inv_history *h)
{
	struct io_counts c = {inv_check_outputs_fenced(h, P, N), inv_check_output_releases(h, P, N),
			      inv_check_pause(h, P, N), inv_check_inputs_reflected(h, P, N),
			      inv_check_output_status(h, P, N)};
	fprintf(stderr, "  -> violations: e=%d f=%d p=%d g=%d r=%d\n", c.e, c.f, c.p, c.g, c.r);
	return c;
}

static void test_clean_outputs_pass(void)
{
	struct inv_history h;
	base_io(&h);
	struct io_counts c = run_io(&h);
	CHECK(c.e == 0 && c.f == 0 && c.p == 0 && c.g == 0 && c.r == 0);
	inv_history_free(&h);
}

static void test_unfenced_output_trips_outputs_fenced(void)
{
	struct inv_history h;
	base_io(&h);
	/* a txn of api->apply after the reconcile's record (revision 9), in
	 * that record's term: fenced */
	put(&h, 10, OUT "x", "value=2", 4);
	CHECK_INT_EQ(run_io(&h).e, 0);
	del(&h, 11, EL "aa");
	put(&h, 12, OUT "x", "value=2", 4); /* after the term of the last record */
	CHECK_INT_EQ(run_io(&h).e, 1);
	journal(&h, 13, 2, 2, "a", "1.0.0", 0); /* a record after the writer's term */
	del(&h, 13, OUT "x");
	struct io_counts c = run_io(&h);
	CHECK_INT_EQ(c.e, 2);
	CHECK_INT_EQ(c.g, 1); /* and input x has no output now */
	inv_history_free(&h);

	/* an output written before any journal record */
	memset(&h, 0, sizeof(h));
	put(&h, 2, EL "aa", "a", 2);
	put(&h, 3, IN "x", "1", 3);
	put(&h, 4, OUT "x", "value=1", 4);
	CHECK_INT_EQ(run_io(&h).e, 1);
	inv_history_free(&h);
}

static void test_older_release_rewriting_trips_release_order(void)
{
	struct inv_history h;
	base_io(&h);
	put(&h, 10, EL "bb", "b", 10);
	del(&h, 11, EL "aa");
	journal(&h, 12, 10, 0, "b", "1.1.0", 0);
	put(&h, 12, OUT "x", "{\"value\":\"2\",\"format\":2}", 4);
	put_status(&h, 13, DONE, REL(1, 1, 0), REL(1, 1, 0), 5);
	struct io_counts c = run_io(&h);
	CHECK(c.e == 0 && c.f == 0 && c.g == 0);
	put(&h, 14, EL "cc", "c", 14);
	del(&h, 15, EL "bb");
	journal(&h, 16, 14, 0, "c", "1.0.0", 0);
	put(&h, 16, OUT "x", "value=2", 4); /* 1.0.0 over 1.1.0's output */
	c = run_io(&h);
	CHECK_INT_EQ(c.f, 1);
	CHECK_INT_EQ(c.g, 1); /* status 1.1.0 wants format v2 */
	inv_history_free(&h);
}

/* the status reached 1.1.0 (its WORKING, before 1.1.0 wrote any output):
 * a 1.0.0 leader that writes an output after it, even one 1.1.0 never
 * wrote, trips (r) but not (f) */
static void test_older_release_after_newer_status_trips_no_rollback(void)
{
	struct inv_history h;
	base_io(&h);
	put(&h, 10, EL "bb", "b", 10);
	del(&h, 11, EL "aa");
	put_status(&h, 12, WORKING, REL(1, 1, 0), REL(1, 1, 0), 5);
	journal(&h, 13, 10, 0, "b", "1.1.0", 0);
	put(&h, 13, OUT "x", "{\"value\":\"2\",\"format\":2}", 4);
	struct io_counts c = run_io(&h);
	CHECK(c.e == 0 && c.f == 0 && c.r == 0);
	put(&h, 14, IN "y", "1", 14);
	put(&h, 15, EL "cc", "c", 15);
	del(&h, 16, EL "bb");
	journal(&h, 17, 15, 0, "c", "1.0.0", 0);
	put(&h, 17, OUT "y", "value=1", 17); /* 1.0.0 after status 1.1.0 */
	c = run_io(&h);
	CHECK_INT_EQ(c.r, 1);
	CHECK_INT_EQ(c.f, 0);
	inv_history_free(&h);
}

static void test_write_while_paused_trips_pause(void)
{
	struct inv_history h;
	base_io(&h);
	put(&h, 10, PAUSED, "pause", 10);
	journal(&h, 11, 2, 2, "a", "1.0.0", 0); /* the reconcile that was running */
	put(&h, 11, OUT "x", "value=2", 4);
	CHECK_INT_EQ(run_io(&h).p, 0);
	journal(&h, 12, 2, 3, "a", "1.0.0", 0); /* a second one: started while paused */
	put(&h, 12, OUT "x", "value=2", 4);
	CHECK_INT_EQ(run_io(&h).p, 1);
	inv_history_free(&h);

	/* the running reconcile's record came before the pause and its apply
	 * lands after it, in two txns: one reconcile; a record after them is
	 * a second one, and so is an apply txn after that record */
	base_io(&h);
	journal(&h, 10, 2, 2, "a", "1.0.0", 0);
	put(&h, 11, PAUSED, "pause", 11);
	put(&h, 12, OUT "x", "value=2", 4);
	del(&h, 13, OUT "x");
	CHECK_INT_EQ(run_io(&h).p, 0);
	journal(&h, 14, 2, 3, "a", "1.0.0", 0);
	put(&h, 15, OUT "x", "value=2", 4);
	CHECK_INT_EQ(run_io(&h).p, 2);
	inv_history_free(&h);

	/* a term that began during the pause writes nothing at all, and a
	 * pause never resumed lasts to the end of the history */
	base_io(&h);
	put(&h, 10, PAUSED, "pause", 10);
	put(&h, 11, EL "bb", "b", 11);
	del(&h, 12, EL "aa");
	journal(&h, 13, 11, 0, "b", "1.0.0", 0);
	CHECK_INT_EQ(run_io(&h).p, 1);
	inv_history_free(&h);
}

static void test_stale_output_trips_inputs_reflected(void)
{
	struct inv_history h;
	base_io(&h);
	put(&h, 10, IN "x", "3", 3); /* never reconciled */
	CHECK_INT_EQ(run_io(&h).g, 1);
	inv_history_free(&h);

	base_io(&h);
	del(&h, 10, IN "x"); /* its output stays: an orphan */
	CHECK_INT_EQ(run_io(&h).g, 1);
	inv_history_free(&h);

	base_io(&h);
	put(&h, 10, SETTINGS, "{\"label\": \"blue\"}", 10); /* outputs lack the label */
	CHECK_INT_EQ(run_io(&h).g, 1);
	journal(&h, 11, 2, 2, "a", "1.0.0", 0);
	put(&h, 11, OUT "x", "value=2;label=blue", 4);
	CHECK_INT_EQ(run_io(&h).g, 0);
	inv_history_free(&h);
}

static void test_real_etcd_history_is_checked(void)
{
	struct harness_etcd *e;
	CHECK_OK(harness_etcd_start(1, NULL, &e));
	struct tu t;
	tu_init(&t, harness_etcd_urls(e));
	tu_put(&t, "/other/key", "x", 1); /* outside the prefix: ignored */
	int64_t tok = tu_put(&t, EL "aa", "a", 1);
	char key[128], val[128];
	snprintf(key, sizeof(key), J "%016llx-00000000", (unsigned long long)tok);
	snprintf(val, sizeof(val), "node=a token=%lld release=1.0.0 items=1", (long long)tok);
	tu_put(&t, key, val, strlen(val));
	tu_put(&t, CFG "schema", "reconciler/v1", 13);
	tu_put(&t, CFG "items/0", "item=0;state=ready", 18);
	uint8_t buf[TU_STATUS_MAX];
	tu_put(&t, STATUS, buf, tu_status_encode(DONE, REL(1, 0, 0), REL(1, 0, 0), buf));

	struct inv_stats st;
	CHECK_INT_EQ(inv_check_all(&t, P, N, &st), 0);
	CHECK_INT_EQ(st.journal, 1);

	/* the leader's key goes; a record under its token follows */
	tu_del(&t, EL "aa");
	snprintf(key, sizeof(key), J "%016llx-00000001", (unsigned long long)tok);
	tu_put(&t, key, val, strlen(val));
	tu_put(&t, "/other/key2", "y", 1); /* the head revision is outside the prefix */
	struct inv_history h;
	inv_history_load(&t, P, &h);
	CHECK_INT_EQ(h.n, 7);
	CHECK_INT_EQ(inv_check_fence(&h, P, N), 1);
	CHECK_INT_EQ(inv_check_overlap(&h, P, N, NULL), 0);
	inv_history_free(&h);
	CHECK_INT_EQ(inv_check_all(&t, P, N, NULL), 1);
	tu_fini(&t);
	harness_etcd_free(e);
}

int main(void)
{
	RUN(test_clean_history_passes);
	RUN(test_interleaved_tokens_trip_overlap);
	RUN(test_one_token_two_nodes_trips_overlap);
	RUN(test_record_after_key_deleted_trips_fence);
	RUN(test_record_without_key_trips_fence);
	RUN(test_shadow_record_trips_fence);
	RUN(test_status_going_back_trips_status);
	RUN(test_lost_or_wrong_desired_keys_trip_desired);
	RUN(test_malformed_journal_record_trips_overlap);
	RUN(test_clean_outputs_pass);
	RUN(test_unfenced_output_trips_outputs_fenced);
	RUN(test_older_release_rewriting_trips_release_order);
	RUN(test_older_release_after_newer_status_trips_no_rollback);
	RUN(test_write_while_paused_trips_pause);
	RUN(test_stale_output_trips_inputs_reflected);
	RUN(test_real_etcd_history_is_checked);
	return CHECK_EXIT();
}
