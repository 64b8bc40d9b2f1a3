/* SPDX-License-Identifier: MIT */
/*
 * test_plugin_watch.c - ABI 1.2 leader-gated watches at the plugin instance
 * level: a real etcd (harness), a real plugin .so (tests/plugins/watcher.c,
 * which writes every callback to a trace file), real nng, both isolation
 * modes. The test plays the election: it calls elected / reconcile /
 * deposed itself and hands the instance a driver_host whose fenced_txn is a
 * plain etcd txn and whose etcd client is its own (through a lagproxy where
 * a test must hold an answer).
 *
 * What is checked:
 * - boundary: keys written while the snapshot is read are neither lost nor
 *   duplicated: every write after the snapshot revision R arrives exactly
 *   once as a live event, in revision order, and snapshot + live replay to
 *   the final state; nothing before on_elected, the first reconcile before
 *   the first batch, nothing between on_deposed and the next on_elected;
 *   request_reconcile reaches the host only from live batches of the term;
 * - overflow: a slow plugin with a small queue bound gets a resync (a fresh
 *   snapshot flagged LH_WATCH_RESYNC), and the replay is still exact;
 * - compaction: a watch that cannot start at R+1 (compacted meanwhile)
 *   resyncs;
 * - grants: an absolute prefix without --plugin-read is refused in init with
 *   a clear error; with the grant it is accepted; a range outside is refused;
 * - ABI 1.1: a plugin built against the 1.1 header loads and reconciles;
 * - pause: while the plugin is paused (driver_host.paused) no batch is
 *   delivered; after the resume's reconcile the held change arrives.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "abi/abi_bus.h"
#include "check.h"
#include "files.h"
#include "harness.h"
#include "instance_fixture.h"
#include "lagproxy.h"
#include "abi/abi_loader.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance_internal.h"
#include "runtime/runtime_watch.h"
#include "testutil.h"

#define PREFIX "/lh/watcher/data/"
#define WAIT_MS 30000

static struct harness_etcd *H;
static struct tu T;
static struct lagproxy *P;
static struct etcd_client *g_plugin_client; /* driver_host.etcd: through P */
static struct ifx_dirs D;
static char g_trace[1200], g_hold[1200];
static unsigned g_requests; /* driver_host.request_reconcile calls */

/* ---- the driver_host the test offers ---- */

static int plain_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
		     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
		     size_t n_failure, etcd_cb cb, void *ud)
{
	(void)ctx;
	return etcd_txn(T.etcd, cmps, n_cmps, success, n_success, failure, n_failure, NULL, cb, ud,
			NULL);
}

static void count_request(void *ctx)
{
	(void)ctx;
	g_requests++;
}

/* the cluster-wide pause as the test plays it (driver_host.paused) */
static bool g_paused;

static bool test_paused(void *ctx)
{
	(void)ctx;
	return g_paused;
}

static struct driver_host g_host = {.fenced_txn = plain_txn,
				    .data_prefix = PREFIX,
				    .request_reconcile = count_request,
				    .paused = test_paused};

/* ---- instances ---- */

struct inst {
	struct loader_plugin *lp;
	struct plugin_instance *pi;
	struct idone init;
};

static void start(struct inst *in, const char *file, uint32_t mode, const char *const *grants,
		  size_t n_grants, uint32_t queue_max)
{
	char err[LOADER_ERR_MAX];
	memset(in, 0, sizeof(*in));
	CHECK_OK(loader_open(D.plugins, file, D.private_dir, &in->lp, err, sizeof(err)));
	struct plugin_instance_config cfg = {
	    .on_init = ifx_on_init,
	    .userdata = &in->init,
	    .isolation = mode,
	    .worker_path = D.worker,
	    .read_grants = grants,
	    .n_read_grants = n_grants,
	    .watch_queue_max = queue_max,
	};
	g_host.etcd = g_plugin_client;
	CHECK_OK(plugin_instance_new(in->lp, T.loop, &g_host, "n1", &cfg, &in->pi));
	while (!in->init.done)
		CHECK(loop_run_once(T.loop, 1000) >= 0);
}

static void stop_and_free(struct inst *in)
{
	ifx_stop(T.loop, in->pi);
	plugin_instance_free(in->pi);
	in->pi = NULL;
}

static const struct releases REL = {{1, 0, 0}, {1, 0, 0}, 1, 1};

/* ---- the trace ---- */

static char *trace_read(void)
{
	int fd = open(g_trace, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return strdup("");
	CHECK(fstat(fd, &st) == 0);
	char *buf = calloc(1, (size_t)st.st_size + 1);
	CHECK(buf != NULL);
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	CHECK(n == st.st_size);
	close(fd);
	return buf;
}

static void trace_reset(void)
{
	unlink(g_trace);
}

struct has_arg {
	const char *needle;
	int times;
};

static bool trace_has(void *arg)
{
	const struct has_arg *a = arg;
	char *t = trace_read();
	int n = 0;
	for (const char *p = t; (p = strstr(p, a->needle)); p++)
		n++;
	free(t);
	return n >= a->times;
}

static void wait_trace(const char *needle, int times)
{
	struct has_arg a = {needle, times};
	tu_wait(&T, trace_has, &a, WAIT_MS, needle);
}

/* the plugin's view is complete up to revision *arg: a snapshot at it or
 * later was delivered to its end (the SYNCED batch), or live events up to
 * it. A snapshot page before its SYNCED batch does not count (a resync's
 * first pages carry a late revision while the cache is still being
 * refilled), nor a batch whose events the plugin is still writing to the
 * trace (fewer "ev" lines after its header than it announced). */
static bool trace_reached(void *arg)
{
	int64_t want = *(const int64_t *)arg, best = 0, rev = 0;
	unsigned flags = 0;
	uint64_t announced = 0, seen = 0;
	bool open_batch = false;
	char *t = trace_read();
	for (char *line = t; line && *line;) {
		char *nl = strchr(line, '\n');
		if (!nl)
			break; /* a line still being written */
		*nl = '\0';
		unsigned id;
		if (sscanf(line, "batch %u %u %" SCNd64 " %" SCNu64, &id, &flags, &rev, &announced) == 4) {
			open_batch = true;
			seen = 0;
		} else if (open_batch && strncmp(line, "ev ", 3) == 0) {
			seen++;
		}
		if (open_batch && seen == announced) {
			open_batch = false;
			bool partial = (flags & LH_WATCH_SNAPSHOT) && !(flags & LH_WATCH_SYNCED);
			if (!partial && rev > best)
				best = rev;
		}
		line = nl + 1;
	}
	free(t);
	return best >= want;
}

static void wait_rev(int64_t rev)
{
	tu_wait(&T, trace_reached, &rev, WAIT_MS, "the plugin to see the last write");
}

/* The replay of one term's watch 0 from the trace: the key -> value map the
 * plugin's cache would hold, checked for the contract on the way:
 * - snapshot batches first (same revision R), the last SYNCED; a RESYNC
 *   batch starts a fresh snapshot (cache dropped);
 * - live events strictly after R, in strictly increasing revision order;
 * Returns the number of live events; *ret_R the last snapshot revision. */
#define MAXK 4096
struct model {
	char key[MAXK][200];
	char val[MAXK][200];
	size_t n;
};

static void model_set(struct model *m, const char *k, const char *v, bool del)
{
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->key[i], k) == 0) {
			if (del) {
				m->n--;
				memcpy(m->key[i], m->key[m->n], sizeof(m->key[i]));
				memcpy(m->val[i], m->val[m->n], sizeof(m->val[i]));
			} else
				snprintf(m->val[i], sizeof(m->val[i]), "%s", v);
			return;
		}
	}
	if (del)
		return;
	CHECK(m->n < MAXK);
	snprintf(m->key[m->n], sizeof(m->key[0]), "%s", k);
	snprintf(m->val[m->n], sizeof(m->val[0]), "%s", v);
	m->n++;
}

/* replay the trace from the line "elected <token>" to the next "deposed" */
static struct model g_model;
static size_t replay_term(int64_t token, struct model *m, int64_t *ret_R, int64_t *live_revs,
			  size_t live_max, unsigned *ret_resyncs)
{
	char *t = trace_read(), *save = NULL;
	char head[40];
	snprintf(head, sizeof(head), "elected %" PRId64, token);
	bool in_term = false, synced = false, reconciled = false, in_snapshot = false;
	int64_t R = 0, last_live = 0;
	size_t n_live = 0;
	unsigned resyncs = 0;
	unsigned flags = 0;
	memset(m, 0, sizeof(*m));
	bool any_term = false, done = false;
	for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "elected ", 8) == 0) {
			any_term = true;
			in_term = !done && strcmp(line, head) == 0;
			continue;
		}
		if (strcmp(line, "deposed") == 0) {
			any_term = false;
			done |= in_term;
			in_term = false;
			continue;
		}
		CHECK(any_term || strncmp(line, "batch", 5) != 0); /* nothing outside a term */
		if (!in_term)
			continue;
		if (strncmp(line, "reconcile", 9) == 0)
			reconciled = true;
		unsigned id;
		int64_t rev;
		uint64_t n;
		if (sscanf(line, "batch %u %u %" SCNd64 " %" SCNu64, &id, &flags, &rev, &n) == 4) {
			CHECK(reconciled); /* the first reconcile returned before any batch */
			CHECK_INT_EQ(id, 0);
			if (flags & LH_WATCH_RESYNC) {
				CHECK(flags & LH_WATCH_SNAPSHOT);
				resyncs++;
				memset(m, 0, sizeof(*m));
				synced = false;
				in_snapshot = false; /* an unfinished one is over */
			}
			if (flags & LH_WATCH_SNAPSHOT) {
				CHECK(!synced || (flags & LH_WATCH_RESYNC));
				if (in_snapshot)
					CHECK(rev == R); /* one snapshot, one revision */
				R = rev;
				last_live = R;
				in_snapshot = !(flags & LH_WATCH_SYNCED);
				synced = (flags & LH_WATCH_SYNCED) != 0;
			} else {
				CHECK(synced); /* live only after the synced marker */
			}
			continue;
		}
		unsigned type;
		int64_t mod, crev, ver;
		char key[200], val[200];
		if (sscanf(line, "ev %u %" SCNd64 " %" SCNd64 " %" SCNd64 " %199s %199s", &type, &mod,
			   &crev, &ver, key, val) == 6) {
			if (flags & LH_WATCH_SNAPSHOT) {
				CHECK(mod <= R);
				CHECK_INT_EQ(type, LH_WATCH_PUT);
			} else {
				CHECK(mod > last_live); /* no duplicate, revision order */
				last_live = mod;
				if (n_live < live_max)
					live_revs[n_live] = mod;
				n_live++;
			}
			model_set(m, key, val, type == LH_WATCH_DELETE);
		}
	}
	free(t);
	CHECK(in_term || done);
	CHECK(synced);
	*ret_R = R;
	if (ret_resyncs)
		*ret_resyncs = resyncs;
	return n_live;
}

/* the model equals what etcd holds under PREFIX "in/" now */
static void check_model_is_etcd(const struct model *m)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PREFIX "in/", &kvs);
	if (n != m->n)
		fprintf(stderr, "etcd has %zu keys, the replay %zu\n", n, m->n);
	CHECK_INT_EQ(n, m->n);
	for (size_t i = 0; i < n; i++) {
		const char *rel = (const char *)kvs[i]->key + strlen(PREFIX);
		bool found = false;
		for (size_t k = 0; k < m->n && !found; k++)
			if (strcmp(m->key[k], rel) == 0) {
				found = true;
				CHECK_STR_EQ(m->val[k], (const char *)kvs[i]->value);
			}
		if (!found)
			fprintf(stderr, "missing in the replay: %s\n", rel);
		CHECK(found);
	}
	tu_list_free(kvs, n);
}

/* ---- an asynchronous writer: puts one key after the other ---- */

struct writer {
	int next, total;
	const char *prefix; /* keys <prefix>w<nn> */
	int64_t revs[1024];
	bool done;
};

static void writer_next(struct writer *w);

static void on_put(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct writer *w = ud;
	(void)c;
	CHECK_OK(err);
	w->revs[w->next++] = resp->header.revision;
	writer_next(w);
}

static void writer_next(struct writer *w)
{
	if (w->next == w->total) {
		w->done = true;
		return;
	}
	char key[128], val[32];
	snprintf(key, sizeof(key), "%sw%02d", w->prefix, w->next % 40); /* overwritten */
	snprintf(val, sizeof(val), "v%d", w->next);
	struct etcd_op op = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = val,
			     .value_len = strlen(val)};
	CHECK_OK(etcd_put(T.etcd, &op, NULL, on_put, w, NULL));
}

static bool writer_done(void *arg)
{
	return ((struct writer *)arg)->done;
}

struct done_flag {
	bool done;
	int err;
};

static void on_txn_put(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct done_flag *d = ud;
	(void)c;
	(void)r;
	d->err = err;
	d->done = true;
}

/* n keys <prefix><i 4 digits> = "p", 100 per txn */
static void put_many(const char *prefix, int n)
{
	static char keys[100][96];
	struct etcd_op ops[100];
	for (int i = 0; i < n; i += 100) {
		int m = n - i < 100 ? n - i : 100;
		for (int j = 0; j < m; j++) {
			snprintf(keys[j], sizeof(keys[j]), "%s%04d", prefix, i + j);
			ops[j] = (struct etcd_op){.type = ETCD_OP_PUT, .key = keys[j],
						  .key_len = strlen(keys[j]), .value = "p",
						  .value_len = 1};
		}
		struct done_flag d = {false, 0};
		CHECK_OK(etcd_txn(T.etcd, NULL, 0, ops, (size_t)m, NULL, 0, NULL, on_txn_put, &d,
				  NULL));
		while (!d.done)
			CHECK(loop_run_once(T.loop, 1000) >= 0);
		CHECK_OK(d.err);
	}
}

/* ---- tests ---- */

/* lead - in elected with token and its first reconcile started (the
 * snapshot's batch); rd gets the reconcile's end */
static void lead(struct inst *in, int64_t token, struct rdone *rd)
{
	plugin_instance_elected(in->pi, token, &REL);
	*rd = (struct rdone){0};
	plugin_instance_reconcile(in->pi, ifx_on_reconciled, rd);
}

/* fresh_start - the start of a test in mode: the mode said, nothing under
 * PREFIX, an empty trace (what an earlier test left counts for none) */
static void fresh_start(uint32_t mode)
{
	fprintf(stderr, "  mode %s\n", ifx_isolation_name(mode));
	tu_del_prefix(&T, PREFIX);
	trace_reset();
}

static void t_boundary(uint32_t mode)
{
	fresh_start(mode);
	put_many(PREFIX "in/pre", 2500); /* the snapshot is read in 3 pages */
	setenv("LH_WATCHER_REQ", "1", 1);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	CHECK_INT_EQ(in.init.err, 0);
	tu_put(&T, PREFIX "in/standby", "s", 1); /* not leading: nothing delivered */

	/* the writer races the snapshot read */
	static struct writer w;
	w = (struct writer){.total = 300, .prefix = PREFIX "in/"};
	writer_next(&w);
	while (w.next < 60) /* the term begins while the writer is at work */
		CHECK(loop_run_once(T.loop, 1000) >= 0);
	struct rdone rd;
	lead(&in, 1, &rd);
	tu_wait(&T, writer_done, &w, WAIT_MS, "the writer");
	wait_trace("batch 0 3 ", 1); /* the snapshot's synced marker */
	wait_rev(w.revs[w.total - 1]);
	CHECK(rd.done && rd.err == 0);

	struct model *m = &g_model;
	int64_t R, live[1024];
	size_t n_live = replay_term(1, m, &R, live, 1024, NULL);
	check_model_is_etcd(m);
	/* every write after R exactly once, in order */
	size_t want = 0;
	for (int i = 0; i < w.total; i++)
		if (w.revs[i] > R) {
			CHECK(want < n_live);
			CHECK_INT_EQ(live[want], w.revs[i]);
			want++;
		}
	CHECK_INT_EQ(n_live, want);
	fprintf(stderr, "  snapshot at %" PRId64 ", %zu live events, %d writes before it\n", R,
		n_live, w.total - (int)want);
	CHECK(n_live == 0 || g_requests > 0); /* request_reconcile from live batches */

	/* the term ends: nothing until the next one, which starts over */
	plugin_instance_deposed(in.pi);
	wait_trace("deposed", 1);
	unsigned req = g_requests;
	int64_t between = tu_put(&T, PREFIX "in/between", "b", 1);
	struct rdone rd2;
	lead(&in, 2, &rd2);
	wait_trace("elected 2", 1);
	wait_trace("batch 0 3 ", 2); /* term 2's synced snapshot */
	wait_rev(between);
	n_live = replay_term(2, m, &R, live, 1024, NULL);
	check_model_is_etcd(m);
	CHECK_INT_EQ(g_requests, req); /* snapshots ask for nothing */
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	/* nothing between the terms: replay_term checks "no batch outside a term" */
	unsetenv("LH_WATCHER_REQ");
}

/* a pause holds watch batches back (the watch keeps reading); the resume's
 * reconcile lets them go, nothing lost */
static void t_paused(uint32_t mode)
{
	fresh_start(mode);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	CHECK_INT_EQ(in.init.err, 0);
	struct rdone rd;
	lead(&in, 1, &rd);
	wait_trace("batch 0 3 ", 1); /* synced */
	int64_t before = tu_put(&T, PREFIX "in/before", "1", 1);
	wait_rev(before);

	g_paused = true;
	int64_t during = tu_put(&T, PREFIX "in/during", "2", 1);
	/* proving an absence: no batch may reach the plugin for a while */
	uint64_t until = loop_now() + 600 * LOOP_NS_PER_MS;
	while (loop_now() < until) {
		CHECK(!trace_reached(&during));
		loop_run_once(T.loop, 50);
	}
	g_paused = false;
	/* the resume asks for a reconcile (the election's part); after it the
	 * queued batch goes */
	struct rdone rd2 = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &rd2);
	wait_rev(during);
	CHECK(rd2.done && rd2.err == 0);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

static size_t trace_count(const char *needle);
static size_t g_batches_at_drain; /* batches in the trace when a drain ended */

static void on_drained(void *ud)
{
	*(bool *)ud = true;
	g_batches_at_drain = trace_count("batch ");
}

static size_t trace_count(const char *needle)
{
	char *t = trace_read();
	size_t n = 0;
	for (const char *p = t; (p = strstr(p, needle)); p++)
		n++;
	free(t);
	return n;
}

/* start_held - the start of the tests with a held batch: a fresh prefix
 * (fresh_start) holding one input (in/a) and in a watcher.so instance in
 * mode (queue_max as start's), elected with token, whose snapshot batch the
 * plugin holds (LH_WATCHER_HOLD) until g_hold is unlinked; rd gets the
 * reconcile's end */
static void start_held(struct inst *in, uint32_t mode, uint32_t queue_max, int64_t token,
		       struct rdone *rd)
{
	fresh_start(mode);
	tu_put(&T, PREFIX "in/a", "1", 1);
	int fd = open(g_hold, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	setenv("LH_WATCHER_HOLD", g_hold, 1);
	start(in, "watcher.so", mode, NULL, 0, queue_max);
	lead(in, token, rd);
	wait_trace("hold", 1); /* the plugin is in the snapshot's batch */
}

/* stop_held - the end of a start_held test: no hold for later instances,
 * the term over, in stopped and freed */
static void stop_held(struct inst *in)
{
	unsetenv("LH_WATCHER_HOLD");
	plugin_instance_deposed(in->pi);
	stop_and_free(in);
}

/* a drain (the graceful end of a term) is not held back by input changes
 * that keep coming: no batch goes to the plugin while a drain waits (the
 * successor's snapshot carries them) */
static void t_drain_stops_batches(uint32_t mode)
{
	struct inst in;
	struct rdone rd;
	start_held(&in, mode, 0, 6, &rd);
	for (int i = 0; i < 5; i++)
		tu_put(&T, PREFIX "in/b", "2", 1); /* live changes wait behind it */
	struct plugin_watch_stats ws;
	uint64_t dl = loop_now() + (uint64_t)WAIT_MS * LOOP_NS_PER_MS;
	do { /* the watch has the changes queued for the plugin */
		CHECK(loop_run_once(T.loop, 20) >= 0);
		CHECK(plugin_instance_watch_stats(in.pi, &ws));
		CHECK(loop_now() < dl);
	} while (ws.queued < 5);
	bool drained = false;
	plugin_instance_drain(in.pi, on_drained, &drained);
	unlink(g_hold);
	CHECK_OK(loop_run_until(T.loop, &drained, loop_now() + (uint64_t)WAIT_MS * LOOP_NS_PER_MS));
	/* the queued changes did not go before the drain ended (after it the
	 * term ends; what is still queued goes to the successor's snapshot) */
	CHECK_INT_EQ(g_batches_at_drain, 1); /* the snapshot's only */
	stop_held(&in);
}

static void t_overflow(uint32_t mode)
{
	struct inst in;
	struct rdone rd;
	start_held(&in, mode, 16, 5, &rd);
	for (int i = 0; i < 60; i++) {
		char k[64], v[16];
		snprintf(k, sizeof(k), PREFIX "in/k%02d", i % 25);
		snprintf(v, sizeof(v), "x%d", i);
		tu_put(&T, k, v, strlen(v));
	}
	int64_t last = tu_del(&T, PREFIX "in/a");
	struct plugin_watch_stats ws;
	uint64_t dl = loop_now() + (uint64_t)WAIT_MS * LOOP_NS_PER_MS;
	for (;;) { /* the watch events arrive through the loop */
		CHECK(plugin_instance_watch_stats(in.pi, &ws));
		if (ws.overflows > 0 || loop_now() > dl)
			break;
		CHECK(loop_run_once(T.loop, 50) >= 0);
	}
	CHECK(ws.overflows >= 1);
	CHECK(ws.resyncs >= 1);
	unlink(g_hold);
	wait_trace("batch 0 7 ", 1); /* SNAPSHOT|SYNCED|RESYNC: the fresh snapshot */
	wait_rev(last); /* the last write arrived (in the resync snapshot or live) */
	struct model *m = &g_model;
	int64_t R;
	unsigned resyncs;
	int64_t live[1];
	replay_term(5, m, &R, live, 0, &resyncs);
	CHECK(resyncs >= 1);
	check_model_is_etcd(m);
	fprintf(stderr, "  overflows %" PRIu64 ", resyncs %" PRIu64 ", dropped %" PRIu64 "\n",
		ws.overflows, ws.resyncs, ws.dropped);
	stop_held(&in);
}

static void on_compacted(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)r;
	CHECK_OK(err);
	*(bool *)ud = true;
}

/* the snapshot's first page (1000 keys, over 100 KB) is among the held
 * replies; a reconcile's count-only range (under 1 KB) may be held before it
 * and does not count: with only that held, the watch could still be created
 * after the compaction and need no resync */
static bool snapshot_reply_held(void *arg)
{
	struct lagproxy_stats st;
	(void)arg;
	lagproxy_get_stats(P, &st);
	return st.replies_held_bytes > 64 * 1024;
}

static void t_compaction(void)
{
	tu_del_prefix(&T, PREFIX);
	trace_reset();
	put_many(PREFIX "in/pre", 1500); /* the snapshot is read in 2 pages */
	struct inst in;
	start(&in, "watcher.so", PLUGIN_ISOLATION_THREAD, NULL, 0, 0);
	/* the snapshot's first page is read at R, its answer held; meanwhile
	 * R+1.. is written and compacted away: the second page, read at R
	 * too, cannot be, and the pages already queued are not the whole
	 * prefix: they go, and a fresh snapshot flagged resync follows */
	lagproxy_hold_replies(P, true);
	struct rdone rd;
	lead(&in, 9, &rd);
	tu_wait(&T, snapshot_reply_held, NULL, WAIT_MS, "the snapshot's reply held");
	tu_put(&T, PREFIX "in/b", "2", 1);
	int64_t rev = tu_put(&T, PREFIX "in/c", "3", 1);
	bool compacted = false;
	CHECK_OK(etcd_compact(T.etcd, rev, true, NULL, on_compacted, &compacted, NULL));
	while (!compacted)
		CHECK(loop_run_once(T.loop, 1000) >= 0);
	lagproxy_hold_replies(P, false);
	wait_trace("batch 0 5 ", 1); /* the resync snapshot begins */
	wait_trace("batch 0 3 ", 1); /* and ends (the first one never did) */
	wait_rev(rev);		      /* its last batch's events all traced */
	struct plugin_watch_stats ws;
	CHECK(plugin_instance_watch_stats(in.pi, &ws));
	CHECK(ws.resyncs >= 1);
	struct model *m = &g_model;
	int64_t R, live[1];
	unsigned resyncs;
	replay_term(9, m, &R, live, 0, &resyncs);
	CHECK(resyncs >= 1);
	CHECK(R >= rev);
	check_model_is_etcd(m);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

static void t_grants(uint32_t mode)
{
	fprintf(stderr, "  mode %s\n", ifx_isolation_name(mode));
	trace_reset();
	tu_put(&T, "/other/x", "1", 1);
	setenv("LH_WATCHER_ABS", "/other/", 1);
	setenv("LH_WATCHER_RANGE", "/other/", 1);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	fprintf(stderr, "  refused: %s\n", in.init.msg);
	CHECK_INT_EQ(in.init.err, -EPERM);
	CHECK(strstr(in.init.msg, "not granted") != NULL);
	CHECK(strstr(in.init.msg, "--plugin-read watcher=PREFIX") != NULL);
	char *t = trace_read();
	CHECK(strstr(t, "range -1 0 range of \"/other/\" refused: not granted") != NULL);
	free(t);
	plugin_instance_free(in.pi);

	/* granted: watch and range accepted */
	trace_reset();
	static const char *const grants[] = {"/other/"};
	start(&in, "watcher.so", mode, grants, 1, 0);
	CHECK_INT_EQ(in.init.err, 0);
	t = trace_read();
	CHECK(strstr(t, "range 0 1 ") != NULL);
	CHECK(strstr(t, "init 0 rel=0 abs=1") != NULL);
	free(t);
	struct rdone rd;
	lead(&in, 3, &rd);
	wait_trace("batch 1 3 ", 1); /* the absolute watch's snapshot */
	wait_trace("ev 0 ", 1);
	t = trace_read();
	CHECK(strstr(t, " /other/x 1") != NULL); /* absolute keys stay full */
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	unsetenv("LH_WATCHER_ABS");
	unsetenv("LH_WATCHER_RANGE");
}

/* an ungranted watch in an init that gives no reason of its own: the
 * host's refusal is what the operator reads, not a bare errno */
static void t_refused_watch_reason(uint32_t mode)
{
	fprintf(stderr, "  mode %s\n", ifx_isolation_name(mode));
	trace_reset();
	setenv("LH_WATCHER_ABS", "/other/", 1);
	setenv("LH_WATCHER_NOREASON", "1", 1);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	fprintf(stderr, "  refused: %s\n", in.init.msg);
	CHECK_INT_EQ(in.init.err, -EPERM);
	CHECK(strstr(in.init.msg, "init returned -EPERM (no reason given); the host refused: "
				  "watch of \"/other/\" refused: not granted") != NULL);
	CHECK(strstr(in.init.msg, "--plugin-read watcher=PREFIX") != NULL);
	plugin_instance_free(in.pi);
	unsetenv("LH_WATCHER_ABS");
	unsetenv("LH_WATCHER_NOREASON");
}

/* plugin.h's limits agree: a key of LH_KEY_MAX with a value of LH_VALUE_MAX
 * is written and read back whole through a real etcd; one byte more is
 * refused before anything is sent */
static void t_value_limit_round_trip(uint32_t mode)
{
	fresh_start(mode);
	setenv("LH_WATCHER_BIG", "1", 1);
	setenv("LH_WATCHER_PREFIX", "-", 1);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	CHECK_INT_EQ(in.init.err, 0);
	struct rdone rd;
	lead(&in, 1, &rd);
	wait_trace("big put=", 1);
	char *t = trace_read();
	char want[200];
	snprintf(want, sizeof(want),
		 "big put=0 range=0 n=1 len=%u over=-22 txn refused: success op 0: value of %u "
		 "bytes is larger than LH_VALUE_MAX (%u bytes)",
		 LH_VALUE_MAX, LH_VALUE_MAX + 1, LH_VALUE_MAX);
	if (!strstr(t, want))
		fprintf(stderr, "trace:\n%s\n", t);
	CHECK(strstr(t, want) != NULL);
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	unsetenv("LH_WATCHER_BIG");
	unsetenv("LH_WATCHER_PREFIX");
}

static void t_abi_1_1(uint32_t mode)
{
	fprintf(stderr, "  mode %s\n", ifx_isolation_name(mode));
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "abi11.so", mode, NULL, 0, 0);
	CHECK_INT_EQ(in.init.err, 0);
	const struct loader_plugin *lp = plugin_instance_plugin(in.pi);
	CHECK_INT_EQ(lp->desc.abi_minor, 1);
	CHECK(lp->desc.on_watch_events == NULL);
	struct rdone rd;
	lead(&in, 42, &rd);
	while (!rd.done)
		CHECK(loop_run_once(T.loop, 1000) >= 0);
	CHECK_INT_EQ(rd.err, 0);
	size_t len;
	uint8_t *v = tu_get(&T, PREFIX "done", &len);
	CHECK(v != NULL);
	CHECK_STR_EQ((const char *)v, "42");
	free(v);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* hostile WatchEvents sent straight to the worker: the worker refuses each
 * (no callback runs), answers, and the instance works on */
static void send_watch_events(struct plugin_instance *pi, uint32_t watch_id, uint32_t type,
			      bool with_kv, uint32_t flags)
{
	Leasehold__Bus__WatchEvent we = LEASEHOLD__BUS__WATCH_EVENT__INIT, *wp = &we;
	BusKv kv = LEASEHOLD__BUS__KV__INIT;
	kv.key = bus_bin_str("in/evil");
	we.type = type;
	we.kv = with_kv ? &kv : NULL;
	Leasehold__Bus__WatchEvents wes = LEASEHOLD__BUS__WATCH_EVENTS__INIT;
	wes.watch_id = watch_id;
	wes.flags = flags;
	wes.n_events = 1;
	wes.events = &wp;
	Event ev = LEASEHOLD__BUS__EVENT__INIT;
	ev.seq = 1000;
	ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_WATCH_EVENTS;
	ev.watch_events = &wes;
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &ev;
	uint8_t buf[512];
	size_t n = leasehold__bus__to_worker__pack(&tw, buf);
	CHECK_OK(plugin_instance_send_raw_to_worker(pi, buf, n));
}

static bool bad_acks(void *arg)
{
	struct plugin_instance_stats st;
	plugin_instance_get_stats(arg, &st);
	return st.bad_messages >= 4;
}

static void t_garbage_watch_events(uint32_t mode)
{
	fresh_start(mode);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	int64_t rev = tu_put(&T, PREFIX "in/ok", "1", 1);
	struct rdone rd;
	lead(&in, 11, &rd); /* the worker leads: it decodes them */
	wait_rev(rev);
	send_watch_events(in.pi, 7, LH_WATCH_PUT, true, 0);	   /* no such watch */
	send_watch_events(in.pi, 0, 9, true, 0);		   /* no such type */
	send_watch_events(in.pi, 0, LH_WATCH_PUT, false, 0);	   /* no kv */
	send_watch_events(in.pi, 0, LH_WATCH_PUT, true, 0x100u); /* unknown flag */
	/* each is answered (an ack the host did not expect: counted, dropped) */
	tu_wait(&T, bad_acks, in.pi, WAIT_MS, "the worker's answers to the garbage");
	rev = tu_put(&T, PREFIX "in/after", "2", 1);
	wait_rev(rev); /* the instance works on */
	char *t = trace_read();
	CHECK(strstr(t, "evil") == NULL); /* the plugin saw none of it */
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* free() without stop() while leading: the synchronous stop hands
 * on_deposed over and answers what the worker asks meanwhile; a range read
 * of on_deposed is refused at once (as a txn is), so on_deposed returns
 * and fini runs, instead of the stop waiting out its timeout for a reply
 * that would never come */
static void t_free_refuses_a_range(uint32_t mode)
{
	fprintf(stderr, "  mode %s\n", ifx_isolation_name(mode));
	trace_reset();
	setenv("LH_WATCHER_DEPOSED_RANGE", "1", 1);
	struct inst in;
	start(&in, "watcher.so", mode, NULL, 0, 0);
	CHECK_INT_EQ(in.init.err, 0);
	plugin_instance_elected(in.pi, 4, &REL);
	wait_trace("elected 4", 1);
	plugin_instance_free(in.pi);
	char *t = trace_read();
	if (!strstr(t, "deposed-range -125\n") || !strstr(t, "\nfini\n"))
		fprintf(stderr, "%s", t);
	CHECK(strstr(t, "deposed-range -125\n") != NULL);
	CHECK(strstr(t, "\nfini\n") != NULL);
	free(t);
	unsetenv("LH_WATCHER_DEPOSED_RANGE");
}

int main(void)
{
	ifx_dirs_setup(&D, "test-watch");
	snprintf(g_trace, sizeof(g_trace), "%s/trace", D.root);
	snprintf(g_hold, sizeof(g_hold), "%s/hold", D.root);
	ifx_install(&D, "watcher.so");
	ifx_install(&D, "abi11.so");
	setenv("LH_WATCHER_TRACE", g_trace, 1);

	CHECK_OK(harness_etcd_start(1, NULL, &H));
	tu_init(&T, harness_etcd_url(H, 0));
	CHECK_OK(lagproxy_new(harness_etcd_url(H, 0), &P));
	g_plugin_client = tu_client(&T, lagproxy_url(P));

	for (uint32_t mode = 0; mode <= PLUGIN_ISOLATION_PROCESS; mode++) {
		IFX_RUN_MODE(t_boundary, mode);
		IFX_RUN_MODE(t_overflow, mode);
		IFX_RUN_MODE(t_paused, mode);
		IFX_RUN_MODE(t_drain_stops_batches, mode);
		IFX_RUN_MODE(t_grants, mode);
		IFX_RUN_MODE(t_refused_watch_reason, mode);
		IFX_RUN_MODE(t_value_limit_round_trip, mode);
		IFX_RUN_MODE(t_abi_1_1, mode);
		IFX_RUN_MODE(t_garbage_watch_events, mode);
		IFX_RUN_MODE(t_free_refuses_a_range, mode);
	}
	RUN(t_compaction);

	etcd_client_free(g_plugin_client);
	lagproxy_free(P);
	tu_fini(&T);
	harness_etcd_free(H);
	/* bus sockets still closing on the closer thread */
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return 0;
}
