/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_watch.c - streaming watch against a real etcd (progress notify
 * every 1 s): ordered events with prev_kv, a txn's events in one response, progress
 * notifications, the creation reported (list after watch), resume across
 * an etcd restart with every event exactly
 * once, compaction reported once as -ERANGE, cancel from the callback,
 * cancel outside a callback (quiet at once, connection closed one loop round
 * later, or by etcd_client_free before that).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "check.h"
#include "etcd/etcd.h"
#include "harness.h"
#include "test_etcd_common.h"

#include <dirent.h>
#include <unistd.h>

static struct loop *L;
static struct etcd_client *C;
static struct harness_etcd *H;

#define MAXEV 256

struct wrec {
	struct watch_errs e;
	int n_events, n_batches, progress;
	int64_t last_progress_rev, last_cb_rev;
	int64_t revs[MAXEV];
	int types[MAXEV];
	char keys[MAXEV][32];
	char vals[MAXEV][16];
	char prevs[MAXEV][16];
	bool has_prev[MAXEV];
	int batch_sizes[MAXEV];
	int target;
	bool reached, got_progress;
	bool cancel_in_cb;
};

static void wcb(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		size_t n, void *ud)
{
	struct wrec *r = ud;
	if (watch_errs_take(&r->e, err, revision))
		return;
	CHECK(revision > 0);
	CHECK(revision >= r->last_cb_rev);
	r->last_cb_rev = revision;
	if (n == 0) {
		r->progress++;
		r->last_progress_rev = revision;
		r->got_progress = true;
		CHECK_INT_EQ(etcd_watch_revision(w), revision);
		return;
	}
	CHECK(r->n_batches < MAXEV);
	r->batch_sizes[r->n_batches++] = (int)n;
	for (size_t i = 0; i < n; i++) {
		CHECK(r->n_events < MAXEV);
		int k = r->n_events++;
		r->revs[k] = ev[i].kv.mod_revision;
		r->types[k] = ev[i].type;
		copy_str(r->keys[k], sizeof(r->keys[k]), ev[i].kv.key, ev[i].kv.key_len);
		copy_str(r->vals[k], sizeof(r->vals[k]), ev[i].kv.value, ev[i].kv.value_len);
		r->has_prev[k] = ev[i].prev_kv != NULL;
		if (ev[i].prev_kv)
			copy_str(r->prevs[k], sizeof(r->prevs[k]), ev[i].prev_kv->value,
				 ev[i].prev_kv->value_len);
	}
	CHECK(etcd_watch_revision(w) >= ev[n - 1].kv.mod_revision);
	if (r->n_events >= r->target)
		r->reached = true;
	if (r->cancel_in_cb)
		etcd_watch_cancel(w);
}

static void wait_flag(bool *flag, int ms, const char *what)
{
	if (loop_run_until(L, flag, loop_now() + (uint64_t)ms * LOOP_NS_PER_MS) < 0) {
		fprintf(stderr, "timeout waiting for %s\n", what);
		exit(1);
	}
}

static int64_t put_rev(const char *key, const char *val)
{
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, C, key, val, 0, false, &r));
	int64_t rev = r->header.revision;
	etcd_response_free(r);
	return rev;
}

static void test_watch_events_txn_batch_prev_kv(void)
{
	int64_t base = put_rev("other", "x");
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 5;
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("w/", 2, end);
	/* from base + 1: nothing is missed even before the stream is up */
	CHECK_OK(etcd_watch_start(C, "w/", 2, end, el, base + 1, ETCD_WATCH_PREV_KV, wcb, r, &w));
	CHECK_INT_EQ(r->e.calls, 0);
	int64_t r1 = put_rev("w/a", "1");
	int64_t r2 = put_rev("w/a", "2");
	put_rev("zzz", "outside the range");
	struct etcd_op ops[2] = {op_key(ETCD_OP_PUT, "w/b"), op_key(ETCD_OP_PUT, "w/c")};
	ops[0].value = "B";
	ops[0].value_len = 1;
	ops[1].value = "C";
	ops[1].value_len = 1;
	struct res x = {0};
	CHECK_OK(etcd_txn(C, NULL, 0, ops, 2, NULL, 0, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	int64_t rt = x.r->header.revision;
	res_clear(&x);
	struct etcd_op del = op_key(ETCD_OP_DELETE, "w/a");
	CHECK_OK(sop(L, C, &del, NULL));
	wait_flag(&r->reached, WAIT_MS, "5 watch events");
	CHECK_INT_EQ(r->n_events, 5);
	CHECK_INT_EQ(r->e.errs, 0);
	/* put w/a=1 */
	CHECK_STR_EQ(r->keys[0], "w/a");
	CHECK_STR_EQ(r->vals[0], "1");
	CHECK_INT_EQ(r->types[0], ETCD_EVENT_PUT);
	CHECK_INT_EQ(r->revs[0], r1);
	CHECK(!r->has_prev[0]);
	/* put w/a=2 with prev 1 */
	CHECK_STR_EQ(r->vals[1], "2");
	CHECK_INT_EQ(r->revs[1], r2);
	CHECK(r->has_prev[1]);
	CHECK_STR_EQ(r->prevs[1], "1");
	/* the txn: two events at one revision */
	CHECK_STR_EQ(r->keys[2], "w/b");
	CHECK_STR_EQ(r->keys[3], "w/c");
	CHECK_INT_EQ(r->revs[2], rt);
	CHECK_INT_EQ(r->revs[3], rt);
	/* events 2 and 3 (one revision) arrive in the same watch response;
	 * etcd may put events of other revisions in it too (a watcher that
	 * lags a little gets them merged) */
	int batch_of[5] = {-1, -1, -1, -1, -1}, seen = 0;
	for (int i = 0; i < r->n_batches; i++) {
		for (int k = seen; k < seen + r->batch_sizes[i] && k < 5; k++)
			batch_of[k] = i;
		seen += r->batch_sizes[i];
	}
	CHECK(batch_of[2] >= 0 && batch_of[2] == batch_of[3]);
	/* delete with prev_kv = the last value */
	CHECK_INT_EQ(r->types[4], ETCD_EVENT_DELETE);
	CHECK_STR_EQ(r->keys[4], "w/a");
	CHECK_STR_EQ(r->vals[4], "");
	CHECK(r->has_prev[4]);
	CHECK_STR_EQ(r->prevs[4], "2");
	CHECK(etcd_watch_revision(w) >= r->revs[4]);
	etcd_watch_cancel(w);
	/* nothing after cancel */
	int calls = r->e.calls;
	put_rev("w/a", "after");
	put_rev("other", "sync");
	CHECK_INT_EQ(r->e.calls, calls);
	free(r);
}

static void test_watch_progress_notify(void)
{
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 1000;
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(C, "p/", 2, NULL, 0, 0, ETCD_WATCH_PROGRESS_NOTIFY, wcb, r, &w));
	int64_t rev = put_rev("elsewhere", "x");
	wait_flag(&r->got_progress, 8000, "a progress notification");
	/* a progress notify may predate the put; the next one must cover it */
	r->got_progress = false;
	wait_flag(&r->got_progress, 8000, "a second progress notification");
	CHECK(r->last_progress_rev >= rev);
	CHECK_INT_EQ(r->n_events, 0);
	CHECK_INT_EQ(etcd_watch_revision(w), r->last_progress_rev);
	etcd_watch_cancel(w);
	free(r);
}

/* ETCD_WATCH_CREATED_NOTIFY on a watch from "now": the creation comes first,
 * with the revision H the watch starts after; a range at H plus the events
 * is the prefix with no gap and no overlap (list after watch) */
struct created_rec {
	int calls;
	int64_t created_rev; /* the first callback's revision (n == 0) */
	int n_events;
	int64_t revs[8];
	char keys[8][8];
	bool created, got_event;
};

static void created_cb(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		       size_t n, void *ud)
{
	struct created_rec *r = ud;
	(void)w;
	CHECK_INT_EQ(err, 0);
	if (r->calls++ == 0) {
		CHECK_INT_EQ((int64_t)n, 0); /* the creation, before any event */
		r->created_rev = revision;
		r->created = true;
		return;
	}
	for (size_t i = 0; i < n && r->n_events < 8; i++) {
		r->revs[r->n_events] = ev[i].kv.mod_revision;
		copy_str(r->keys[r->n_events], sizeof(r->keys[0]), ev[i].kv.key, ev[i].kv.key_len);
		r->n_events++;
		r->got_event = true;
	}
}

static void test_watch_created_notify_list_after_watch(void)
{
	int64_t before = put_rev("c/a", "1");
	struct created_rec r = {0};
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("c/", 2, end);
	CHECK_OK(etcd_watch_start(C, "c/", 2, end, el, 0, ETCD_WATCH_CREATED_NOTIFY, created_cb, &r,
				  &w));
	wait_flag(&r.created, WAIT_MS, "the watch's creation");
	CHECK(r.created_rev >= before);
	CHECK_INT_EQ(r.n_events, 0);
	/* the range at H holds what came before the watch */
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = "c/", .key_len = 2, .range_end = end,
			     .range_end_len = el, .revision = r.created_rev};
	struct etcd_response *resp = NULL;
	CHECK_OK(sop(L, C, &op, &resp));
	CHECK_INT_EQ((int64_t)resp->n_kvs, 1);
	CHECK_INT_EQ(resp->kvs[0].mod_revision, before);
	etcd_response_free(resp);
	/* and the watch everything after it, starting right after H */
	int64_t after = put_rev("c/b", "2");
	wait_flag(&r.got_event, WAIT_MS, "the put after the creation");
	CHECK_INT_EQ(r.n_events, 1);
	CHECK_STR_EQ(r.keys[0], "c/b");
	CHECK_INT_EQ(r.revs[0], after);
	CHECK(after > r.created_rev);
	/* an unknown flag is refused */
	struct etcd_watch *bad = NULL;
	CHECK_INT_EQ(etcd_watch_start(C, "c/", 2, end, el, 0, 0x80u, created_cb, &r, &bad), -EINVAL);
	etcd_watch_cancel(w);
}

static void test_watch_resume_across_restart(void)
{
	int64_t base = put_rev("other", "y");
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("r/", 2, end);
	r->target = 5;
	CHECK_OK(etcd_watch_start(C, "r/", 2, end, el, base + 1, 0, wcb, r, &w));
	char key[16];
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "r/%d", i);
		put_rev(key, "v");
	}
	wait_flag(&r->reached, WAIT_MS, "first 5 events");
	CHECK_OK(harness_etcd_stop(H, 0));
	/* the watch reconnects by itself; give it a chance to notice */
	CHECK_OK(harness_etcd_restart(H, 0));
	r->target = 10;
	r->reached = false;
	for (int i = 5; i < 10; i++) {
		snprintf(key, sizeof(key), "r/%d", i);
		put_rev(key, "v");
	}
	wait_flag(&r->reached, 15000, "10 events across the restart");
	/* a write after the stream is back must not duplicate */
	r->target = 11;
	r->reached = false;
	put_rev("r/10", "v");
	wait_flag(&r->reached, WAIT_MS, "11th event");
	CHECK_INT_EQ(r->n_events, 11);
	CHECK_INT_EQ(r->e.errs, 0);
	for (int i = 0; i < 11; i++) {
		snprintf(key, sizeof(key), "r/%d", i);
		CHECK_STR_EQ(r->keys[i], key);
		if (i > 0)
			CHECK(r->revs[i] > r->revs[i - 1]);
	}
	etcd_watch_cancel(w);
	free(r);
}

static void test_watch_compacted_reports_erange_once(void)
{
	int64_t first = put_rev("c/k", "1");
	put_rev("c/k", "2");
	int64_t last = put_rev("c/k", "3");
	struct res x = {0};
	CHECK_OK(etcd_compact(C, last, true, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	res_clear(&x);
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(C, "c/k", 3, NULL, 0, first, 0, wcb, r, &w));
	wait_flag(&r->e.got_err, WAIT_MS, "the compaction error");
	CHECK_INT_EQ(r->e.last_err, -ERANGE);
	CHECK_INT_EQ(r->e.err_rev, last);
	CHECK_INT_EQ(r->n_events, 0);
	/* later writes are not delivered and the error is not repeated */
	put_rev("c/k", "4");
	put_rev("other", "z");
	loop_for(L, 300);
	CHECK_INT_EQ(r->e.errs, 1);
	CHECK_INT_EQ(r->e.calls, 1);
	etcd_watch_cancel(w);
	free(r);
}

static void test_watch_cancel_inside_callback(void)
{
	int64_t base = put_rev("other", "q");
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->cancel_in_cb = true;
	r->target = 1;
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(C, "k/", 2, NULL, 0, base + 1, 0, wcb, r, &w));
	/* a watch on the single key "k/": two separate puts, only one call */
	put_rev("k/", "1");
	wait_flag(&r->reached, WAIT_MS, "first event");
	put_rev("k/", "2");
	put_rev("other", "sync");
	CHECK_INT_EQ(r->e.calls, 1);
	free(r);
}

static void test_watch_idle_no_busy_polling(void)
{
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 1;
	struct etcd_watch *w = NULL;
	int64_t base = put_rev("other", "idle");
	CHECK_OK(etcd_watch_start(C, "idle/", 5, NULL, 0, base + 1, 0, wcb, r, &w));
	put_rev("idle/", "1");
	wait_flag(&r->reached, WAIT_MS, "the stream to be up");
	/* one idle second with an open stream: only a handful of wakeups */
	int wakeups = 0;
	uint64_t end = loop_now() + LOOP_NS_PER_S;
	while (loop_now() < end) {
		int n = loop_run_once(L, 100);
		CHECK(n >= 0);
		wakeups += n;
	}
	CHECK(wakeups < 10);
	CHECK_INT_EQ(r->e.calls, 1);
	etcd_watch_cancel(w);
	free(r);
}

/* sockets this process holds (the loop's eventfd/timerfd are not sockets) */
static int count_sockets(void)
{
	DIR *d = opendir("/proc/self/fd");
	CHECK(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[300], t[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		ssize_t l = readlink(p, t, sizeof(t) - 1);
		if (l > 0) {
			t[l] = 0;
			n += strncmp(t, "socket:", 7) == 0;
		}
	}
	closedir(d);
	return n;
}

/* cancel outside a callback: no callback after it, even for bytes already on
 * the way; the stream's connection is closed on a later loop round, not
 * inside the call */
static void test_watch_cancel_closes_later(void)
{
	const char *ep = harness_etcd_url(H, 0);
	struct etcd_client *c2 = client_for(L, &ep, 1, NULL, NULL);
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 1;
	int64_t base = put_rev("other", "cc");
	int before = count_sockets();
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(c2, "cc/", 3, NULL, 0, base + 1, 0, wcb, r, &w));
	put_rev("cc/", "1");
	wait_flag(&r->reached, WAIT_MS, "the stream to be up");
	CHECK_INT_EQ(count_sockets(), before + 1);
	/* an event etcd sends while the cancel is under way */
	struct res x = {0};
	struct etcd_op op = op_key(ETCD_OP_PUT, "cc/");
	op.value = "2";
	op.value_len = 1;
	CHECK_OK(etcd_put(C, &op, NULL, res_cb, &x, NULL));
	etcd_watch_cancel(w);
	CHECK_INT_EQ(count_sockets(), before + 1);
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	etcd_response_free(x.r);
	uint64_t deadline = loop_now() + (uint64_t)WAIT_MS * LOOP_NS_PER_MS;
	while (count_sockets() > before && loop_now() < deadline)
		CHECK(loop_run_once(L, 10) >= 0);
	CHECK_INT_EQ(count_sockets(), before);
	put_rev("cc/", "3");
	CHECK_INT_EQ(r->e.calls, 1);
	CHECK_INT_EQ(r->n_events, 1);
	/* cancelled and freed with the client before the teardown round */
	struct etcd_watch *w2 = NULL;
	CHECK_OK(etcd_watch_start(c2, "cc/", 3, NULL, 0, base + 1, 0, wcb, r, &w2));
	etcd_watch_cancel(w2);
	etcd_watch_cancel(w2); /* twice is harmless */
	etcd_client_free(c2);
	CHECK_INT_EQ(r->e.calls, 1);
	free(r);
}

int main(void)
{
	static const char *const extra[] = {"--experimental-watch-progress-notify-interval", "1s",
					    NULL};
	debug_from_env();
	CHECK_OK(harness_etcd_start(1, extra, &H));
	CHECK_OK(loop_new(&L));
	const char *ep = harness_etcd_url(H, 0);
	C = client_for(L, &ep, 1, NULL, NULL);
	RUN(test_watch_events_txn_batch_prev_kv);
	RUN(test_watch_cancel_inside_callback);
	RUN(test_watch_progress_notify);
	RUN(test_watch_created_notify_list_after_watch);
	RUN(test_watch_compacted_reports_erange_once);
	RUN(test_watch_resume_across_restart);
	RUN(test_watch_idle_no_busy_polling);
	RUN(test_watch_cancel_closes_later);
	etcd_client_free(C);
	loop_free(L);
	harness_etcd_free(H);
	return CHECK_EXIT();
}
