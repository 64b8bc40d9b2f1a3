/* SPDX-License-Identifier: MIT */
/*
 * test_watch_e2e.c - Linkerd's scenario (linkerd2 #12021) end to end: real
 * etcd, three real `leasehold` hosts (a in thread isolation, b and c in
 * process isolation) running the example controller, and a writer that
 * changes 2,000 input keys (P/reconciler/data/desired/) while leadership
 * moves again and again:
 *   - SIGTERM of the leader (graceful hand-over), then it comes back;
 *   - SIGKILL of the leader: nobody leads until its lease expires (--ttl 2),
 *     writes go on meanwhile, then it comes back;
 *   - a hot reload of every host to release 1.1.0 (the outputs' format
 *     changes from v1 to v2 on the way);
 *   - a compaction that forces a resync: the history is compacted past the
 *     leader's last input event and etcd restarts, so the leader's watch
 *     resumes from a compacted revision.
 * At the end:
 *   - every input's last value is reflected in its output, in the v2 format,
 *     and no output exists without its input (deleted inputs included);
 *   - the invariant checker's checks (journal overlap, fence, status,
 *     desired state) hold over the full history, which this test records
 *     with its own watch from revision 1 before the compaction (the checker
 *     reads it from etcd otherwise);
 *   - no watch callback ran on a node that did not lead: in every host's log,
 *     each "watch batch" line of the example lies between its "leading with
 *     fencing token" and the next "no longer leading" (or the end of a run).
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PFX "/lhw"
#define PLUGIN "reconciler"
#define DATA PFX "/" PLUGIN "/data/"
#define N_KEYS 2000
#define N_WRITES 3200 /* 2,000 first values, then changes and deletes */

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;
static struct host *const HOSTS[] = {&A, &B, &C};


static const char *const ARGS_THREAD[] = {
    "--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0", "--reconcile-interval", "10m",
    "--log-level", "debug", "--isolation", "thread", NULL};
static const char *const ARGS_PROCESS[] = {
    "--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0", "--reconcile-interval", "10m",
    "--log-level", "debug", NULL};

static const char *const *args_of(const struct host *h)
{
	return h == &A ? ARGS_THREAD : ARGS_PROCESS;
}

/* ---- the full history, recorded from revision 1 ---- */

static struct inv_history g_hist;
static struct etcd_watch *g_hw;

static void on_history(struct etcd_watch *w, int err, int64_t revision,
		       const struct etcd_event *evs, size_t n, void *ud)
{
	(void)w;
	(void)ud;
	CHECK_OK(err); /* never behind the compaction: it compacts what we have */
	for (size_t i = 0; i < n; i++) {
		const struct etcd_event *e = &evs[i];
		char key[512];
		snprintf(key, sizeof(key), "%.*s", (int)e->kv.key_len, (const char *)e->kv.key);
		inv_history_add(&g_hist, e->kv.mod_revision, e->type == ETCD_EVENT_DELETE, key,
				e->kv.value, e->kv.value_len,
				e->type == ETCD_EVENT_DELETE ? 0 : e->kv.create_revision);
	}
	if (revision > g_hist.head_rev)
		g_hist.head_rev = revision;
}

static bool history_reaches(void *arg)
{
	return g_hist.head_rev >= *(const int64_t *)arg;
}

/* ---- the writer ---- */

struct writer {
	int next;
	char last[N_KEYS][16]; /* the last value of each input, "" = deleted */
	int64_t last_rev;
	int limit;    /* writes stop here until the scenario moves it on */
	bool stalled; /* stopped at limit */
	bool done;
};
static struct writer W;

static void writer_next(void);

static void on_written(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)ud;
	CHECK_OK(err);
	W.last_rev = r->header.revision;
	W.next++;
	writer_next();
}

static void writer_next(void)
{
	if (W.next == N_WRITES) {
		W.done = true;
		return;
	}
	if (W.next >= W.limit) {
		W.stalled = true;
		return;
	}
	int i = W.next;
	int k = i < N_KEYS ? i : (i * 7) % N_KEYS;
	bool del = i >= N_KEYS && i % 10 == 3;
	char key[64];
	snprintf(key, sizeof(key), DATA "desired/k%04d", k);
	struct etcd_op op = {.type = del ? ETCD_OP_DELETE : ETCD_OP_PUT, .key = key,
			     .key_len = strlen(key)};
	if (del)
		W.last[k][0] = 0;
	else {
		snprintf(W.last[k], sizeof(W.last[k]), "g%d", i);
		op.value = W.last[k];
		op.value_len = strlen(W.last[k]);
	}
	int r = del ? etcd_delete(T.etcd, &op, NULL, on_written, NULL, NULL)
		    : etcd_put(T.etcd, &op, NULL, on_written, NULL, NULL);
	CHECK_OK(r);
}

/* let the writer go on up to n writes (it runs while the scenario waits) */
static void writer_allow(int n)
{
	W.limit = n;
	if (W.stalled) {
		W.stalled = false;
		writer_next();
	}
}

static bool writes_reached(void *arg)
{
	return W.next >= *(const int *)arg;
}

static void wait_writes(int n)
{
	tu_wait(&T, writes_reached, &n, 120000, "the writer");
}

/* ---- leadership ---- */

static struct host *leader(void)
{
	const char *l = obs_leader(g_obs);
	for (size_t i = 0; l && i < 3; i++)
		if (strcmp(HOSTS[i]->node, l) == 0)
			return HOSTS[i];
	return NULL;
}

static bool led_by_other(void *arg)
{
	struct host *l = leader();
	return l && l != arg;
}

static void restart(struct host *h)
{
	host_start(h, harness_etcd_urls(g_etcd), args_of(h));
}

static bool writer_stalled(void *arg)
{
	(void)arg;
	return W.stalled;
}

static void on_compacted(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)r;
	CHECK_OK(err);
	*(bool *)ud = true;
}

/* ---- the end state ---- */

static void v2(const char *in, char *out, size_t len)
{
	snprintf(out, len, "{\"value\":\"%s\",\"format\":2}", in); /* inputs are [a-z0-9] */
}

static uint64_t g_next_check;

static bool outputs_converged(void *arg)
{
	bool report = arg != NULL;
	if (!report && loop_now() < g_next_check)
		return false;
	g_next_check = loop_now() + 500 * LOOP_NS_PER_MS;
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, DATA "out/", &kvs), want = 0, bad = 0;
	for (int k = 0; k < N_KEYS; k++)
		want += W.last[k][0] != 0;
	for (size_t i = 0; i < n; i++) {
		int k = -1;
		char expect[64] = "";
		if (sscanf((const char *)kvs[i]->key, DATA "out/k%d", &k) != 1 || k < 0 ||
		    k >= N_KEYS || !W.last[k][0]) {
			bad++;
			if (report)
				fprintf(stderr, "  output without input: %s\n", kvs[i]->key);
			continue;
		}
		v2(W.last[k], expect, sizeof(expect));
		if (strcmp((const char *)kvs[i]->value, expect) != 0) {
			bad++;
			if (report && bad < 10)
				fprintf(stderr, "  %s = %s, want %s\n", kvs[i]->key, kvs[i]->value,
					expect);
		}
	}
	tu_list_free(kvs, n);
	if (report)
		fprintf(stderr, "  %zu outputs, %zu inputs, %zu wrong\n", n, want, bad);
	return bad == 0 && n == want;
}

/* every "watch batch" of the example lies inside one of the host's terms */
static void check_callbacks_only_while_leading(const struct host *h)
{
	char *log = host_log_since(h, 0);
	bool leading = false;
	size_t batches = 0, terms = 0;
	for (char *save = NULL, *line = strtok_r(log, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, "plugin reconciler: leading with fencing token")) {
			leading = true;
			terms++;
		} else if (strstr(line, "plugin reconciler: no longer leading") ||
			   (strstr(line, "leasehold ") && strstr(line, " starting: plugin ABI"))) {
			leading = false; /* a restart after SIGKILL ends the term too */
		} else if (strstr(line, "plugin reconciler: watch batch:")) {
			if (!leading)
				fprintf(stderr, "  %s: a watch callback outside a term: %s\n", h->node,
					line);
			CHECK(leading);
			batches++;
		}
	}
	fprintf(stderr, "  %s: %zu term(s), %zu watch batch(es), all inside a term\n", h->node,
		terms, batches);
	free(log);
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	CHECK_OK(etcd_watch_start(T.etcd, PFX "/", strlen(PFX "/"), PFX "0", strlen(PFX "0"), 1, 0,
				  on_history, NULL, &g_hw));
	g_obs = obs_new(&T, PFX, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	host_setup(&C, harness_dir(g_etcd), "c");
	for (size_t i = 0; i < 3; i++) {
		host_install_plugin(HOSTS[i], "1.0.0", "reconciler.so");
		restart(HOSTS[i]);
	}
	obs_wait_members(g_obs, 3, 30000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 30000);

	writer_allow(500);
	writer_next();
	wait_writes(500);
	struct host *l = leader();
	CHECK(l != NULL);
	fprintf(stderr, "--- SIGTERM of the leader %s at write %d\n", l->node, W.next);
	host_signal(l, SIGTERM);
	writer_allow(900); /* inputs change during the hand-over */
	CHECK_OK(host_wait(l, 30000));
	tu_wait(&T, led_by_other, l, 30000, "a new leader after SIGTERM");
	restart(l);
	wait_writes(900);

	l = leader();
	CHECK(l != NULL);
	fprintf(stderr, "--- SIGKILL of the leader %s at write %d\n", l->node, W.next);
	host_signal(l, SIGKILL);
	writer_allow(1400); /* ... and while nobody leads (until the lease expires) */
	CHECK_OK(host_wait(l, 10000));
	wait_writes(1400);
	fprintf(stderr, "  writes done at %d, leader %s\n", W.next,
		leader() ? leader()->node : "(none yet)");
	tu_wait(&T, led_by_other, l, 30000, "a new leader after SIGKILL (past the TTL)");
	restart(l);

	fprintf(stderr, "--- hot reload of every host to 1.1.0 at write %d\n", W.next);
	for (size_t i = 0; i < 3; i++)
		host_install_plugin(HOSTS[i], "1.1.0", "reconciler.so");
	writer_allow(2200);
	wait_writes(2200);
	obs_wait_status_done(g_obs, REL(1, 1, 0), 60000);

	l = leader();
	CHECK(l != NULL);
	fprintf(stderr, "--- SIGTERM of the leader %s at write %d\n", l->node, W.next);
	host_signal(l, SIGTERM);
	writer_allow(2600);
	CHECK_OK(host_wait(l, 30000));
	tu_wait(&T, led_by_other, l, 30000, "a new leader after SIGTERM");
	restart(l);
	wait_writes(2600);

	/* the compaction that forces a resync: the writer pauses, a few
	 * revisions pass outside the inputs, the history is compacted to the
	 * newest one and etcd restarts: the leader's watch resumes from the
	 * revision after the last input change, now compacted (-ERANGE), and
	 * the plugin gets a fresh snapshot flagged resync */
	l = leader();
	CHECK(l != NULL);
	writer_allow(2800);
	wait_writes(2800);
	tu_wait(&T, writer_stalled, NULL, 30000, "the writer to pause");
	int64_t rev = 0;
	for (int i = 0; i < 3; i++)
		rev = tu_put(&T, PFX "/elsewhere", "x", 1);
	tu_wait(&T, history_reaches, &rev, 30000, "the history recorder");
	fprintf(stderr, "--- compaction at revision %" PRId64 " (write %d), etcd restarted, leader %s\n",
		rev, W.next, l->node);
	bool compacted = false;
	CHECK_OK(etcd_compact(T.etcd, rev, true, NULL, on_compacted, &compacted, NULL));
	while (!compacted)
		CHECK(loop_run_once(T.loop, 1000) >= 0);
	long log_from = host_log_size(l);
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	writer_allow(N_WRITES);

	wait_writes(N_WRITES);
	obs_wait_status_done(g_obs, REL(1, 1, 0), 60000);
	if (!outputs_converged(NULL))
		tu_wait(&T, outputs_converged, NULL, 60000, "every input reflected in its output");
	CHECK(outputs_converged((void *)1));
	/* the leader resynced (unless it lost its term across the restart:
	 * then the next leader's snapshot was read after the compaction) */
	size_t resyncs = host_log_count(l, log_from, "lost: compacted");
	struct host *now = leader();
	fprintf(stderr, "  %s: %zu watch resync(s) after the compaction; leader now %s\n", l->node,
		resyncs, now ? now->node : "(none)");
	CHECK(resyncs >= 1 || now != l);

	/* the invariant checker over the recorded history */
	int64_t head = tu_put(&T, PFX "/zz-end", "1", 1);
	tu_wait(&T, history_reaches, &head, 30000, "the history recorder");
	struct inv_stats st = {0};
	int v = inv_check_overlap(&g_hist, PFX, PLUGIN, &st) + inv_check_fence(&g_hist, PFX, PLUGIN) +
		inv_check_status(&g_hist, PFX, PLUGIN, &st) + inv_check_desired(&g_hist, PFX, PLUGIN);
	fprintf(stderr, "invariants: %d violation(s), %zu journal records, %zu terms\n", v,
		st.journal, st.terms);
	CHECK_INT_EQ(v, 0);
	CHECK(st.terms >= 4);
	for (size_t i = 0; i < 3; i++)
		check_callbacks_only_while_leading(HOSTS[i]);

	for (size_t i = 0; i < 3; i++) {
		host_signal(HOSTS[i], SIGTERM);
		CHECK_OK(host_wait(HOSTS[i], 30000));
	}
	etcd_watch_cancel(g_hw);
	inv_history_free(&g_hist);
	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
