/* SPDX-License-Identifier: MIT */
/*
 * test_election_lag - an election must never elect a node on an election key
 * that is already gone while another node leads, also when that node's watch
 * stream lags behind etcd (its mirror still shows its own, deleted key as the
 * lowest). Node A's whole etcd client (session, calls, watch) goes through
 * an in-process proxy (tests/lib/lagproxy.c) that holds A's watch bytes, holds
 * A's replies, and cuts one txn reply; node B talks to etcd directly.
 *
 * Deterministic: no sleeps. Every step waits, with a deadline, for an event
 * it can observe (a driver callback, an election state, a key in etcd, a
 * proxy counter); what A sees and when is fixed by the proxy: A's mirror
 * cannot move while its watch is held, and A's calls cannot finish while
 * its replies are held.
 *
 * Invariant, checked at every d_elected and at the end: no node is elected
 * while another node's driver leads, and a leading node's fencing token is
 * the create_revision of its election key in etcd.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election/election.h"
#include "election_fixture.h"
#include "harness.h"
#include "lagproxy.h"
#include "proto/leasehold.pb-c.h"
#include "base/log.h"
#include "etcd/etcd_session.h"
#include "testutil.h"

#define PFX "/lh-lag"
#define PLUGIN "rec"
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

static struct harness_etcd *g_etcd;
static struct tu T;

/* ---- test driver: records leadership; reconciles finish after 20 ms ---- */

struct tdrv {
	int node;
	bool leading;
	int elected, deposed, reconciles;
	int64_t token;
	struct loop_timer *t;
	struct {
		driver_reconcile_done_fn done;
		void *ud;
	} q[8];
	int nq;
	driver_drain_done_fn drain_done;
	void *drain_ud;
};

struct node {
	int id;
	char node_id[32];
	struct etcd_client *etcd;
	struct session *sess;
	struct election *el;
	struct tdrv drv;
};

/* the nodes of the running scenario, for the overlap check */
static struct node *g_nodes[2];

static void d_finish(struct tdrv *d)
{
	driver_reconcile_done_fn done = d->q[0].done;
	void *ud = d->q[0].ud;
	memmove(&d->q[0], &d->q[1], (size_t)(d->nq - 1) * sizeof(d->q[0]));
	d->nq--;
	if (d->nq > 0)
		loop_timer_arm_in(d->t, 20 * LOOP_NS_PER_MS);
	if (done)
		done(ud, 0, NULL);
	if (d->drain_done && d->nq == 0) {
		driver_drain_done_fn dd = d->drain_done;
		d->drain_done = NULL;
		dd(d->drain_ud);
	}
}

static void on_d_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct tdrv *d = ud;
	if (d->nq > 0)
		d_finish(d);
	else if (d->drain_done) {
		driver_drain_done_fn dd = d->drain_done;
		d->drain_done = NULL;
		dd(d->drain_ud);
	}
}

static void d_elected(void *drv, int64_t token, const struct releases *r)
{
	(void)r;
	struct tdrv *d = drv;
	CHECK(!d->leading);
	for (int i = 0; i < 2; i++) {
		struct node *o = g_nodes[i];
		if (o && &o->drv != d && o->drv.leading) {
			fprintf(stderr,
			        "TWO LEADERS: node%d elected (fencing token %" PRId64
			        ") while node%d leads (fencing token %" PRId64 ")\n",
			        d->node, token, o->id, o->drv.token);
			CHECK(!o->drv.leading);
		}
	}
	d->leading = true;
	d->elected++;
	d->token = token;
	fprintf(stderr, "--- node%d elected, fencing token %" PRId64 "\n", d->node, token);
}

static void d_releases_changed(void *drv, const struct releases *r)
{
	(void)drv;
	(void)r;
}

static void d_reconcile(void *drv, driver_reconcile_done_fn done, void *ud)
{
	struct tdrv *d = drv;
	CHECK(d->nq < 8);
	d->reconciles++;
	d->q[d->nq].done = done;
	d->q[d->nq].ud = ud;
	d->nq++;
	if (d->nq == 1)
		loop_timer_arm_in(d->t, 20 * LOOP_NS_PER_MS);
}

static void d_deposed(void *drv)
{
	struct tdrv *d = drv;
	CHECK(d->leading);
	d->leading = false;
	d->deposed++;
	fprintf(stderr, "--- node%d deposed\n", d->node);
}

static void d_drain(void *drv, driver_drain_done_fn done, void *ud)
{
	struct tdrv *d = drv;
	d->drain_done = done;
	d->drain_ud = ud;
	if (d->nq == 0)
		loop_timer_arm_in(d->t, 0);
}

static const struct driver_ops tdrv_ops = {
	.elected = d_elected,
	.releases_changed = d_releases_changed,
	.reconcile = d_reconcile,
	.deposed = d_deposed,
	.drain = d_drain,
};

/* ---- nodes ---- */

static const struct plugin_releases REL100 = {{1, 0, 0}, {0, 1, 0}, {1, 0, 0}};

/* node_start - held: start held back (no member record, no campaign) */
static void node_start(struct node *n, int id, const char *urls, bool held)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->drv.node = id;
	snprintf(n->node_id, sizeof(n->node_id), "node%d", id);
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &n->drv, &n->drv.t));
	struct efx_node_config c = {.urls = urls, .prefix = PFX, .plugin = PLUGIN,
	                            .node_id = n->node_id, .rel = REL100, .ttl = 10,
	                            .ops = &tdrv_ops, .drv = &n->drv, .held = held};
	efx_node_start(&T, &c, &n->etcd, &n->sess, &n->el);
	g_nodes[id - 1] = n;
}

static void node_stop_free(struct node *n)
{
	efx_node_stop(&T, n->el, n->sess);
	while (n->drv.nq > 0)
		d_finish(&n->drv);
	efx_node_free(n->el, n->sess, n->etcd);
	loop_timer_free(n->drv.t);
	g_nodes[n->id - 1] = NULL;
	memset(n, 0, sizeof(*n));
}

static struct election_info info_of(struct node *n)
{
	return efx_info(n->el);
}

/* ---- observations ---- */

/* wait - tu_wait with a short poll, for conditions set by the proxy thread */
static void wait_for(bool (*pred)(void *), void *arg, int timeout_ms, const char *what)
{
	uint64_t deadline = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (!pred(arg)) {
		if (loop_now() >= deadline) {
			fprintf(stderr, "timed out after %d ms waiting for: %s\n", timeout_ms, what);
			exit(1);
		}
		CHECK_OK(loop_run_once(T.loop, 5));
	}
}

/* create_revision of n's election key in etcd (its name is its lease), 0 = absent */
static int64_t key_rev(struct node *n)
{
	char k[256];
	snprintf(k, sizeof(k), "%s/%s/election/%" PRIx64, PFX, PLUGIN, (uint64_t)session_lease(n->sess));
	struct etcd_kv **kvs;
	size_t nk = tu_list(&T, PFX "/" PLUGIN "/election/", &kvs);
	int64_t rev = 0;
	for (size_t i = 0; i < nk; i++)
		if (kvs[i]->key_len == strlen(k) && memcmp(kvs[i]->key, k, kvs[i]->key_len) == 0)
			rev = kvs[i]->create_revision;
	tu_list_free(kvs, nk);
	return rev;
}

/* the invariant at rest: at most one driver leads, on a key that exists */
static void check_leaders(void)
{
	int leading = 0;
	for (int i = 0; i < 2; i++) {
		struct node *n = g_nodes[i];
		if (!n || !n->drv.leading)
			continue;
		leading++;
		int64_t rev = key_rev(n);
		if (rev != n->drv.token)
			fprintf(stderr, "node%d leads on token %" PRId64 ", its key in etcd: %" PRId64 "\n",
			        n->id, n->drv.token, rev);
		CHECK_INT_EQ(rev, n->drv.token);
	}
	CHECK(leading <= 1);
}

static bool p_lead(void *a)
{
	return ((struct node *)a)->drv.leading;
}

static bool p_status_done(void *a)
{
	(void)a;
	int st;
	struct release v, m;
	return tu_get_status(&T, PFX, PLUGIN, &st, &v, &m) && st == DONE;
}

static bool p_idle(void *a)
{
	struct node *n = a;
	return n->drv.nq == 0 && n->drv.reconciles > 0;
}

/* the node's mirror names node_id as the leader */
struct sees {
	struct node *n;
	const char *leader;
};

static bool p_sees_leader(void *a)
{
	struct sees *s = a;
	struct election_info i = info_of(s->n);
	return i.leader && strcmp(i.leader, s->leader) == 0;
}

/* a campaigns again: its key exists in etcd, created after b's key, and
 * its state is campaigning (it waits behind b) */
static bool p_recampaigned(void *a)
{
	struct node **ab = a;
	int64_t rev = key_rev(ab[0]);
	return rev > ab[1]->drv.token && efx_p_campaigning(ab[0]->el);
}

static struct lagproxy *g_px;

/* the end of a lag case: b still leads, a took no term past a_elected and
 * b was never deposed, exactly one leader; both nodes and the proxy go */
static void b_kept_the_lead(struct node *a, struct node *b, int a_elected)
{
	CHECK(b->drv.leading);
	CHECK(!a->drv.leading);
	CHECK_INT_EQ(a->drv.elected, a_elected);
	CHECK_INT_EQ(b->drv.deposed, 0);
	check_leaders();
	node_stop_free(a);
	node_stop_free(b);
	lagproxy_free(g_px);
	g_px = NULL;
}

static bool p_txn_cut(void *a)
{
	(void)a;
	struct lagproxy_stats st;
	lagproxy_get_stats(g_px, &st);
	return st.txn_cut >= 1;
}

static bool p_member_present(void *a)
{
	struct node *n = a;
	char k[256];
	snprintf(k, sizeof(k), "%s/%s/members/%s", PFX, PLUGIN, n->node_id);
	size_t len;
	uint8_t *v = tu_get(&T, k, &len);
	free(v);
	return v != NULL;
}

static bool p_session_up(void *a)
{
	return session_is_up(((struct node *)a)->sess);
}

static bool p_released_created(void *a)
{
	(void)a;
	return lagproxy_release_watch_created(g_px);
}

static bool p_released_through_rev(void *a)
{
	return lagproxy_release_watch_through_rev(g_px, *(const int64_t *)a);
}

static void wipe(void)
{
	tu_del_prefix(&T, PFX "/");
}

/* ---- scenarios ---- */

/*
 * resign with an unknown outcome: A leads; B campaigns behind it. A's watch
 * is held, A is held back (role removed): it drains and resigns, etcd deletes
 * A's key, the reply is cut (and that cut is held until B leads). A is let
 * go again while the resign is still in flight, then B leads, then A learns
 * the resign failed (unknown outcome) and retries. A's mirror still shows its
 * old key as the lowest: A must find out that key is gone and campaign
 * again behind B instead of leading.
 */
static void test_resign_unknown_outcome(void)
{
	wipe();
	CHECK_OK(lagproxy_new(harness_etcd_url(g_etcd, 0), &g_px));
	struct node a, b;
	node_start(&a, 1, lagproxy_url(g_px), false);
	tu_wait(&T, p_lead, &a, 10000, "a leads");
	tu_wait(&T, p_status_done, NULL, 10000, "status DONE");
	tu_wait(&T, p_idle, &a, 10000, "a's reconcile done");
	int64_t a_token = a.drv.token;
	node_start(&b, 2, harness_etcd_url(g_etcd, 0), false);
	tu_wait(&T, efx_p_campaigning, b.el, 10000, "b campaigns");

	lagproxy_hold_watch(g_px, true);
	lagproxy_hold_replies(g_px, true);
	lagproxy_drop_next_txn_reply(g_px);
	int a_elected = a.drv.elected;
	election_hold(a.el, true, "test: role removed");
	wait_for(p_txn_cut, NULL, 10000, "a's resign applied, its reply cut");
	CHECK(!a.drv.leading);
	CHECK(key_rev(&a) != a_token); /* the resign did delete a's key */
	fprintf(stderr, "--- a resigned (token %" PRId64 "), reply cut and held; a unheld\n",
	        a_token);
	election_hold(a.el, false, NULL);
	tu_wait(&T, p_lead, &b, 10000, "b leads");
	fprintf(stderr, "--- b leads (token %" PRId64 "); a learns of the failed resign\n",
	        b.drv.token);
	lagproxy_hold_replies(g_px, false);
	struct node *ab[2] = {&a, &b};
	wait_for(p_recampaigned, ab, 10000, "a campaigns again behind b");
	CHECK(b.drv.leading);
	CHECK(!a.drv.leading);
	CHECK_INT_EQ(a.drv.elected, a_elected);
	check_leaders();

	/* the stale events arrive; nothing changes */
	lagproxy_hold_watch(g_px, false);
	struct sees sb = {&a, "node2"};
	wait_for(p_sees_leader, &sb, 10000, "a's mirror shows b leading");
	tu_wait(&T, p_member_present, &a, 10000, "a's member record back");
	tu_wait(&T, efx_p_campaigning, a.el, 10000, "a campaigns");
	b_kept_the_lead(&a, &b, a_elected);
}

/*
 * stale adoption: A campaigns while its watch is held (the put event of its
 * own key lags), is held back (resigns: success) and let go again; its
 * member record put is applied but the reply is held, B starts and leads.
 * Then A's watch delivers, up to its old key's creation only: A's mirror
 * now shows that (deleted) key as the lowest, under A's lease, and A adopts
 * it as a campaign of unknown outcome. When the member reply arrives A must
 * not lead on that key.
 */
static void test_stale_adoption(void)
{
	wipe();
	CHECK_OK(lagproxy_new(harness_etcd_url(g_etcd, 0), &g_px));
	lagproxy_hold_watch(g_px, true);
	struct node a, b;
	node_start(&a, 1, lagproxy_url(g_px), true);
	/* a's watch exists at etcd before a writes anything: it was created in
	 * sync (at the revision after a's read), so etcd sends each revision's
	 * events as its own message; a watcher that must catch up gets older
	 * revisions batched, and a's old key's put and delete could then share
	 * one message. Handing a the "created" message changes nothing else. */
	/* the session first: a lease that comes after the mirror's first read
	 * makes it read again under the new session (election_view_refresh),
	 * with a new watch whose creation this test would hold back */
	tu_wait(&T, p_session_up, &a, 10000, "a's session up");
	wait_for(p_released_created, NULL, 10000, "a's watch created");
	election_hold(a.el, false, NULL);
	tu_wait(&T, efx_p_campaigning, a.el, 10000, "a campaigns");
	int64_t old_rev = key_rev(&a);
	CHECK(old_rev > 0);
	fprintf(stderr, "--- a campaigns on key revision %" PRId64 " (its watch is held)\n", old_rev);
	election_hold(a.el, true, "test: role removed");
	tu_wait(&T, efx_p_standby, a.el, 10000, "a resigned");
	CHECK_INT_EQ(key_rev(&a), 0);
	CHECK(!p_member_present(&a));

	lagproxy_hold_replies(g_px, true);
	election_hold(a.el, false, NULL);
	/* a's member put: applied by etcd, its reply held (a waits on it) */
	tu_wait(&T, p_member_present, &a, 10000, "a's member put applied");
	node_start(&b, 2, harness_etcd_url(g_etcd, 0), false);
	tu_wait(&T, p_lead, &b, 10000, "b leads");
	fprintf(stderr, "--- b leads (token %" PRId64 "); a's stale events up to %" PRId64 "\n",
	        b.drv.token, old_rev);

	wait_for(p_released_through_rev, &old_rev, 10000, "a's old key event released");
	struct sees sa = {&a, "node1"};
	wait_for(p_sees_leader, &sa, 10000, "a's mirror shows its old key as the lowest");
	int a_elected = a.drv.elected;
	CHECK_INT_EQ(a_elected, 0);
	lagproxy_hold_replies(g_px, false);
	struct node *ab[2] = {&a, &b};
	wait_for(p_recampaigned, ab, 10000, "a campaigns again behind b");
	CHECK(b.drv.leading);
	CHECK(!a.drv.leading);
	CHECK_INT_EQ(a.drv.elected, 0);
	check_leaders();

	lagproxy_hold_watch(g_px, false);
	struct sees sb = {&a, "node2"};
	wait_for(p_sees_leader, &sb, 10000, "a's mirror shows b leading");
	tu_wait(&T, efx_p_campaigning, a.el, 10000, "a campaigns");
	b_kept_the_lead(&a, &b, 0);
}

/* with an argument: run only the test of that name */
static bool want(int argc, char **argv, const char *name)
{
	return argc < 2 || strcmp(argv[1], name) == 0;
}

int main(int argc, char **argv)
{
	log_set_level(getenv("LH_TEST_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_WARN);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	if (want(argc, argv, "test_resign_unknown_outcome"))
		RUN(test_resign_unknown_outcome);
	if (want(argc, argv, "test_stale_adoption"))
		RUN(test_stale_adoption);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
