/* SPDX-License-Identifier: MIT */
/*
 * test_election - the version-aware election and status protocol against a
 * real etcd, ported scenario by scenario from Monogon's reconciler tests
 * (TestWaitReady, TestWatchNodes, TestService), plus leadership scenarios.
 *
 * Every "node" here is its own etcd client + session + election in this
 * process, driving a test driver that records what the plugin would see.
 * No sleeps: every wait is for an observable event, with a deadline.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election/election.h"
#include "election/election_internal.h" /* election_decode_status */
#include "election_fixture.h"
#include "harness.h"
#include "invariants.h"
#include "proto/leasehold.pb-c.h"
#include "etcd/etcd_session.h"
#include "testutil.h"

#define PFX "/lh-test"
#define PLUGIN "rec"
#define WORKING LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

static struct harness_etcd *g_etcd;
static struct tu T;

/* a global event log across all nodes, to check ordering (no overlap) */
enum ev_kind { EV_ELECTED, EV_DEPOSED, EV_RECONCILE_START, EV_RECONCILE_END };
struct ev {
	enum ev_kind kind;
	int node;
};
static struct ev g_log[4096];
static size_t g_nlog;

struct tdrv {
	int node;
	bool leading;
	int elected, deposed, reconciles, releases_changed, replays;
	int64_t token;
	struct releases last;
	int fail_next; /* fail this many reconciles */
	bool hold;     /* keep a reconcile running until released */
	driver_reconcile_done_fn held_done;
	void *held_ud;
	struct loop_timer *t;
	/* reconciles queue FIFO like on the real bus; [0] is the running one */
	struct {
		driver_reconcile_done_fn done;
		void *ud;
		bool ok;
		int term;
	} q[8];
	int nq;
	driver_drain_done_fn drain_done;
	void *drain_ud;
	bool events_after_depose;
};

static void tlog(enum ev_kind k, int node)
{
	if (g_nlog < 4096)
		g_log[g_nlog++] = (struct ev){k, node};
}

static void d_finish(struct tdrv *d)
{
	driver_reconcile_done_fn done = d->q[0].done;
	void *ud = d->q[0].ud;
	bool ok = d->q[0].ok;
	memmove(&d->q[0], &d->q[1], (size_t)(d->nq - 1) * sizeof(d->q[0]));
	d->nq--;
	tlog(EV_RECONCILE_END, d->node);
	if (d->nq > 0)
		loop_timer_arm_in(d->t, 20 * LOOP_NS_PER_MS);
	if (done)
		done(ud, ok ? 0 : -EIO, ok ? NULL : "test failure");
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
	if (d->nq > 0 && !d->hold)
		d_finish(d);
	else if (d->drain_done && d->nq == 0) {
		driver_drain_done_fn dd = d->drain_done;
		d->drain_done = NULL;
		dd(d->drain_ud);
	}
}

static void d_elected(void *drv, int64_t token, const struct releases *r)
{
	struct tdrv *d = drv;
	CHECK(!d->leading);
	d->leading = true;
	d->elected++;
	d->token = token;
	d->last = *r;
	d->replays++;
	tlog(EV_ELECTED, d->node);
}

static void d_releases_changed(void *drv, const struct releases *r)
{
	struct tdrv *d = drv;
	if (!d->leading)
		d->events_after_depose = true;
	d->releases_changed++;
	d->last = *r;
}

static void d_reconcile(void *drv, driver_reconcile_done_fn done, void *ud)
{
	struct tdrv *d = drv;
	if (!d->leading)
		d->events_after_depose = true;
	/* never two reconciles of one term at once */
	for (int i = 0; i < d->nq; i++)
		CHECK(d->q[i].term != d->elected);
	CHECK(d->nq < 8);
	d->reconciles++;
	tlog(EV_RECONCILE_START, d->node);
	d->q[d->nq].done = done;
	d->q[d->nq].ud = ud;
	d->q[d->nq].ok = d->fail_next <= 0;
	d->q[d->nq].term = d->elected;
	d->nq++;
	if (d->fail_next > 0)
		d->fail_next--;
	/* complete asynchronously after a while, like a worker: watch events and
	 * etcd replies arrive meanwhile (an overlapping reconcile of the same
	 * term would trip the CHECK above) */
	if (d->nq == 1)
		loop_timer_arm_in(d->t, 20 * LOOP_NS_PER_MS);
}

static void d_deposed(void *drv)
{
	struct tdrv *d = drv;
	CHECK(d->leading);
	d->leading = false;
	d->deposed++;
	tlog(EV_DEPOSED, d->node);
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

/* one node: client + session + election + driver */
struct node {
	int id;
	char node_id[32];
	struct etcd_client *etcd;
	struct session *sess;
	struct election *el;
	struct tdrv drv;
};

static void node_start(struct node *n, int id, struct plugin_releases rel, int64_t ttl,
                       bool with_driver)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->drv.node = id;
	snprintf(n->node_id, sizeof(n->node_id), "node%d", id);
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &n->drv, &n->drv.t));
	struct efx_node_config c = {.urls = harness_etcd_urls(g_etcd), .prefix = PFX,
	                            .plugin = PLUGIN, .node_id = n->node_id, .rel = rel, .ttl = ttl,
	                            .ops = with_driver ? &tdrv_ops : NULL, .drv = &n->drv};
	efx_node_start(&T, &c, &n->etcd, &n->sess, &n->el);
}

static void node_stop(struct node *n)
{
	efx_node_stop(&T, n->el, n->sess);
}

static void node_free(struct node *n)
{
	/* a driver completes every reconcile exactly once, also at teardown */
	while (n->drv.nq > 0) {
		n->drv.q[0].ok = false;
		d_finish(&n->drv);
	}
	efx_node_free(n->el, n->sess, n->etcd);
	loop_timer_free(n->drv.t);
	memset(n, 0, sizeof(*n));
}

static struct election_info info_of(struct node *n)
{
	return efx_info(n->el);
}

static bool p_drv_elected(void *a)
{
	return ((struct node *)a)->drv.leading;
}

static bool p_synced(void *a)
{
	return info_of(a).state != ELECTION_LOADING;
}

static void wipe(void)
{
	/* each test starts from an empty prefix */
	tu_del_prefix(&T, PFX "/");
	g_nlog = 0;
}

static const struct plugin_releases REL100 = {{1, 0, 0}, {0, 1, 0}, {1, 0, 0}};

/* ---- TestWaitReady ---- */

static struct node *g_obs;
static struct release g_want_status_version;

static bool p_status_seen(void *a)
{
	(void)a;
	struct election_info i = info_of(g_obs);
	return i.status_present && release_cmp(i.status_version, g_want_status_version) == 0;
}

static void set_status_and_wait(int state, struct release v, struct release m)
{
	tu_put_status(&T, PFX, PLUGIN, state, v, m);
	g_want_status_version = v;
	tu_wait(&T, p_status_seen, NULL, 5000, "status seen by the watch");
}

static void test_wait_ready(void)
{
	wipe();
	struct node n;
	/* an observer: no driver, so it never campaigns */
	node_start(&n, 1, (struct plugin_releases){{1, 0, 0}, {0, 1, 0}, {0, 1, 0}}, 10, false);
	g_obs = &n;
	tu_wait(&T, p_synced, &n, 5000, "synced");
	/* status does not exist */
	CHECK(!info_of(&n).ready);
	CHECK(!info_of(&n).status_present);
	/* version is too old (below min_reconciler 0.1.0) */
	set_status_and_wait(DONE, REL(0, 0, 0), REL(0, 0, 0));
	CHECK(!info_of(&n).ready);
	/* minimum compatible release is too new */
	set_status_and_wait(DONE, REL(10000, 0, 0), REL(10000, 0, 0));
	CHECK(!info_of(&n).ready);
	/* WORKING does not block readiness when compatible */
	set_status_and_wait(WORKING, REL(10000, 0, 1), REL(1, 0, 0));
	CHECK(info_of(&n).ready);
	/* compatible DONE */
	set_status_and_wait(DONE, REL(10000, 0, 2), REL(1, 0, 0));
	CHECK(info_of(&n).ready);
	/* garbage status: logged, treated as not ready, no crash */
	tu_put(&T, PFX "/" PLUGIN "/status", "\xff\xff\xff garbage", 12);
	g_want_status_version = REL(0, 0, 0);
	tu_wait(&T, p_status_seen, NULL, 5000, "garbage status seen");
	CHECK(!info_of(&n).ready);
	CHECK(!info_of(&n).status_valid);
	node_stop(&n);
	node_free(&n);
}

/* ---- TestWatchNodes ---- */

static int64_t g_want_rev;
static bool p_rev(void *a)
{
	return info_of(a).releases.revision >= g_want_rev;
}

static void expect_releases(struct node *n, const char *min, const char *max, int64_t rev)
{
	g_want_rev = rev;
	tu_wait(&T, p_rev, n, 5000, "releases revision");
	struct election_info i = info_of(n);
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	CHECK_STR_EQ(release_format(i.releases.min, a, sizeof(a)), min);
	CHECK_STR_EQ(release_format(i.releases.max, b, sizeof(b)), max);
	CHECK_INT_EQ(i.releases.revision, rev);
}

static void on_put_done(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)r;
	CHECK_OK(err);
	*(bool *)ud = true;
}

static void test_watch_members(void)
{
	wipe();
	tu_put_member(&T, PFX, PLUGIN, "a1", REL(0, 0, 2));
	tu_put_member(&T, PFX, PLUGIN, "a2", REL(0, 0, 2));
	tu_put_member(&T, PFX, PLUGIN, "a3", REL(0, 0, 2));
	tu_put_member(&T, PFX, PLUGIN, "b", REL(0, 0, 3));
	int64_t rev = tu_put_member(&T, PFX, PLUGIN, "c", REL(10000, 0, 0));
	struct node n;
	/* the local release counts too (as in the reference algorithm): keep it inside [min, max] */
	node_start(&n, 1, (struct plugin_releases){{0, 0, 3}, {0, 0, 1}, {0, 0, 1}}, 10, false);
	expect_releases(&n, "0.0.2", "10000.0.0", rev);
	CHECK_INT_EQ(info_of(&n).releases.n_members, 5);
	/* a1's record becomes garbage: treated as absent (the reference algorithm's "no longer a controller") */
	rev = tu_put(&T, PFX "/" PLUGIN "/members/a1", "not a proto \x01\x02", 15);
	expect_releases(&n, "0.0.2", "10000.0.0", rev);
	CHECK_INT_EQ(info_of(&n).releases.n_members, 4);
	/* a2 is deleted */
	rev = tu_del(&T, PFX "/" PLUGIN "/members/a2");
	expect_releases(&n, "0.0.2", "10000.0.0", rev);
	/* a3 changes release: now the minimum changes */
	rev = tu_put_member(&T, PFX, PLUGIN, "a3", REL(0, 0, 4));
	expect_releases(&n, "0.0.3", "10000.0.0", rev);
	/* keys outside the layout are ignored, also a valid record under a key
	 * with a NUL byte (it could never be matched again: a ghost member) */
	{
		Leasehold__Release pr = LEASEHOLD__RELEASE__INIT;
		pr.major = 99;
		Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
		m.node_id = (char *)"ghost";
		m.release = &pr;
		uint8_t buf[64];
		size_t len = leasehold__member__pack(&m, buf);
		static const char nul_key[] = PFX "/" PLUGIN "/members/gh\0ost";
		struct etcd_op op = {.type = ETCD_OP_PUT, .key = nul_key,
		                     .key_len = sizeof(nul_key) - 1, .value = buf, .value_len = len};
		struct {
			bool done;
		} w = {false};
		CHECK_OK(etcd_put(T.etcd, &op, NULL, on_put_done, &w.done, NULL));
		CHECK_OK(loop_run_until(T.loop, &w.done, loop_now() + 5 * LOOP_NS_PER_S));
	}
	rev = tu_put(&T, PFX "/" PLUGIN "/members/x/y", "zz", 2);
	rev = tu_put(&T, PFX "/" PLUGIN "/other", "zz", 2);
	rev = tu_put_member(&T, PFX, PLUGIN, "c", REL(0, 0, 5));
	expect_releases(&n, "0.0.3", "0.0.5", rev);
	node_stop(&n);
	node_free(&n);
}

/* ---- TestService ---- */

static struct release g_status_want_v, g_status_want_m;
static int g_status_want_state;
static bool p_status_is(void *a)
{
	(void)a;
	int st;
	struct release v, m;
	if (!tu_get_status(&T, PFX, PLUGIN, &st, &v, &m))
		return false;
	return st == g_status_want_state && !release_cmp(v, g_status_want_v) &&
	       !release_cmp(m, g_status_want_m);
}

static void wait_status(int state, struct release v, struct release m, const char *what)
{
	g_status_want_state = state;
	g_status_want_v = v;
	g_status_want_m = m;
	tu_wait(&T, p_status_is, NULL, 10000, what);
}

static struct node *g_n;
static int g_want_changes;
static bool p_drv_changes(void *a)
{
	(void)a;
	return g_n->drv.releases_changed >= g_want_changes;
}

static bool p_two_members(void *a)
{
	struct election_member mem[8];
	return election_members(((struct node *)a)->el, mem, 8) >= 2;
}

static bool p_two_status_writes(void *a)
{
	return info_of(a).status_writes >= 2;
}

/* from etcd's history of the plugin's prefix after revision since: the
 * revision of the status write restricted to minimum compatible `to`
 * while still at version 1.0.0, of the first deletion of old's election
 * key after its first put, of the last creation of new's and of the
 * status DONE `to` (0 = not found); how many status events follow that
 * deletion */
static void status_history(int64_t since, const struct node *old, const struct node *new,
                           struct release to, int64_t *restricted, int64_t *old_gone,
                           int64_t *new_key, int64_t *done, int *writes_after)
{
	struct inv_history h;
	inv_history_load(&T, PFX, &h);
	char k_status[128], k_election[128], k_old[256] = "";
	snprintf(k_status, sizeof(k_status), "%s/%s/status", PFX, PLUGIN);
	snprintf(k_election, sizeof(k_election), "%s/%s/election/", PFX, PLUGIN);
	size_t el = strlen(k_election);
	for (size_t i = 0; i < h.n; i++) {
		const struct inv_event *ev = &h.ev[i];
		int state;
		struct release v, m;
		if (ev->rev <= since)
			continue; /* an earlier test's */
		/* an election key's value is its node's id */
		if (strncmp(ev->key, k_election, el) == 0) {
			bool of_old = ev->val_len == strlen(old->node_id) &&
			              memcmp(ev->val, old->node_id, ev->val_len) == 0;
			bool of_new = ev->val_len == strlen(new->node_id) &&
			              memcmp(ev->val, new->node_id, ev->val_len) == 0;
			if (!ev->del && of_old)
				snprintf(k_old, sizeof(k_old), "%s", ev->key);
			if (!ev->del && of_new)
				*new_key = ev->rev;
			if (ev->del && strcmp(ev->key, k_old) == 0 && !*old_gone)
				*old_gone = ev->rev;
		}
		if (strcmp(ev->key, k_status) == 0 && *old_gone && ev->rev > *old_gone)
			(*writes_after)++;
		if (ev->del || strcmp(ev->key, k_status) != 0 ||
		    election_decode_status(ev->val, ev->val_len, &state, &v, &m) < 0)
			continue;
		if (state == DONE && release_cmp(v, to) == 0)
			*done = ev->rev;
		if (state != DONE && release_cmp(v, REL(1, 0, 0)) == 0 && release_cmp(m, to) == 0)
			*restricted = ev->rev;
	}
	inv_history_free(&h);
}

/* the reference rule: the newest release campaigns and, elected, waits to
 * restrict the status (under the default rule a release whose change is
 * not allowed yet does not campaign at all: test_release_rule) */
static const struct plugin_releases REL100_REFERENCE = {{1, 0, 0}, {0, 1, 0}, {1, 0, 0}, true};

static void test_service(void)
{
	wipe();
	/* A member newer than us exists: we must not campaign. */
	tu_put_member(&T, PFX, PLUGIN, "a", REL(10000, 0, 0));
	struct node n1;
	node_start(&n1, 1, REL100_REFERENCE, 10, true);
	g_want_rev = 0;
	tu_wait(&T, p_synced, &n1, 5000, "synced");
	/* proof the decision was made on current data: our own member record is seen */
	tu_wait(&T, p_two_members, &n1, 5000, "our own member record seen");
	struct election_info i = info_of(&n1);
	CHECK_INT_EQ(i.state, ELECTION_STANDBY);
	CHECK_STR_EQ(i.held_back, "a newer release is present");
	CHECK_INT_EQ(n1.drv.reconciles, 0);

	/* The status allows a too-old release to serve, and that member is too old. */
	tu_put_status(&T, PFX, PLUGIN, DONE, REL(0, 0, 2), REL(0, 0, 2));
	tu_put_member(&T, PFX, PLUGIN, "a", REL(0, 0, 2));
	tu_wait(&T, p_drv_elected, &n1, 5000, "node1 elected");
	/* elected: on_elected was followed by a replay of the releases */
	CHECK_INT_EQ(n1.drv.replays, 1);
	CHECK(n1.drv.token > 0);
	/* a further member change reaches the leader, and still no reconcile */
	g_n = &n1;
	g_want_changes = n1.drv.releases_changed + 1;
	tu_put_member(&T, PFX, PLUGIN, "a", REL(0, 0, 3));
	tu_wait(&T, p_drv_changes, NULL, 5000, "releases change delivered to the leader");
	CHECK_INT_EQ(n1.drv.reconciles, 0);
	int st;
	struct release v, m;
	CHECK(tu_get_status(&T, PFX, PLUGIN, &st, &v, &m));
	CHECK_INT_EQ(st, DONE); /* untouched while blocked */

	/* Upgrade the member: the restricted status is written, then reconcile, then DONE. */
	tu_put_member(&T, PFX, PLUGIN, "a", REL(1, 0, 0));
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE status after the upgrade");
	CHECK(n1.drv.reconciles >= 1);
	tu_wait(&T, p_two_status_writes, &n1, 5000, "restricted WORKING, then DONE");

	/* The status forbids old releases: a too-old member does not block the reconciler. */
	tu_put_status(&T, PFX, PLUGIN, DONE, REL(0, 0, 2), REL(10000, 0, 0));
	tu_put_member(&T, PFX, PLUGIN, "a", REL(0, 0, 2));

	/* A second instance waits while the first leads. */
	struct node n2;
	node_start(&n2, 2, REL100_REFERENCE, 10, true);
	tu_wait(&T, p_synced, &n2, 5000, "node2 synced");
	tu_wait(&T, efx_p_campaigning, n2.el, 5000, "node2 campaigning");
	CHECK_INT_EQ(n2.drv.reconciles, 0);
	CHECK_INT_EQ(n2.drv.elected, 0);

	/* Stopping the first elects the second, which reconciles. */
	int before = n2.drv.reconciles;
	node_stop(&n1);
	tu_wait(&T, p_drv_elected, &n2, 5000, "node2 elected");
	/* compatible status -> WORKING, then reconcile, then DONE */
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE by node2");
	CHECK(n2.drv.reconciles > before);
	/* n1 was deposed before n2 was elected */
	size_t dep = SIZE_MAX, el = SIZE_MAX;
	for (size_t k = 0; k < g_nlog; k++) {
		if (g_log[k].kind == EV_DEPOSED && g_log[k].node == 1 && dep == SIZE_MAX)
			dep = k;
		if (g_log[k].kind == EV_ELECTED && g_log[k].node == 2 && el == SIZE_MAX)
			el = k;
	}
	CHECK(dep < el);
	CHECK(!n1.drv.events_after_depose);
	node_stop(&n2);
	node_free(&n1);
	node_free(&n2);
}

/* ---- two of one release: exactly one leads; newer release takes over ---- */

static struct node *g_pair[3];
static bool p_one_leads(void *a)
{
	(void)a;
	int k = 0;
	for (int i = 0; i < 2; i++)
		k += g_pair[i]->drv.leading;
	return k == 1;
}

static bool p_node_leading(void *a)
{
	return ((struct node *)a)->drv.leading && ((struct node *)a)->drv.reconciles > 0;
}

static void test_newer_release_takes_over(void)
{
	wipe();
	struct node a, b, c;
	node_start(&a, 1, REL100, 10, true);
	node_start(&b, 2, REL100, 10, true);
	g_pair[0] = &a;
	g_pair[1] = &b;
	tu_wait(&T, p_one_leads, NULL, 5000, "exactly one of two leads");
	tu_wait(&T, p_synced, &b, 5000, "synced");
	struct node *leader = a.drv.leading ? &a : &b, *other = a.drv.leading ? &b : &a;
	/* the other stays campaigning with no events */
	tu_wait(&T, efx_p_campaigning, other->el, 5000, "the other campaigning");
	CHECK_INT_EQ(other->drv.elected, 0);
	tu_wait(&T, p_node_leading, leader, 5000, "leader reconciled");
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE by 1.0.0");

	/* a 1.1.0 node (incompatible: min_compatible 1.1.0) that asks for the
	 * reference rule joins: both old nodes leave the election; the new one
	 * waits until no member is below 1.1.0 */
	g_nlog = 0;
	node_start(&c, 3, (struct plugin_releases){{1, 1, 0}, {1, 0, 0}, {1, 1, 0}, true}, 10, true);
	tu_wait(&T, p_drv_elected, &c, 5000, "1.1.0 elected");
	CHECK(!a.drv.leading && !b.drv.leading);
	CHECK_INT_EQ(c.drv.reconciles, 0); /* blocked: 1.0.0 members remain */
	/* both old keys are gone (c won); the old nodes' own replies to their
	 * resigns may still be on the way */
	tu_wait(&T, efx_p_standby, a.el, 5000, "a standby");
	tu_wait(&T, efx_p_standby, b.el, 5000, "b standby");
	/* the old leader was deposed before the new one was elected */
	size_t dep = SIZE_MAX, el = SIZE_MAX;
	for (size_t k = 0; k < g_nlog; k++) {
		if (g_log[k].kind == EV_DEPOSED && dep == SIZE_MAX)
			dep = k;
		if (g_log[k].kind == EV_ELECTED && g_log[k].node == 3 && el == SIZE_MAX)
			el = k;
	}
	CHECK(dep < el);
	/* the old nodes upgrade (here: they stop; their members vanish) */
	node_stop(&a);
	node_stop(&b);
	wait_status(DONE, REL(1, 1, 0), REL(1, 1, 0), "DONE by 1.1.0");
	/* the restricted status was written first: 1.0.0 members could not serve
	 * after (c counts the write once its reply arrives, which may be after
	 * our own client saw DONE) */
	tu_wait(&T, p_two_status_writes, &c, 5000, "restricted WORKING, then DONE, by c");
	node_stop(&c);
	node_free(&a);
	node_free(&b);
	node_free(&c);
}

/* the default rule: while the newer release cannot act, the older one
 * keeps its leader and reconciles; once the last blocking member leaves,
 * one handover */
static bool p_held_cannot_act(void *a)
{
	struct election_info i = info_of(a);
	return i.state == ELECTION_STANDBY && i.held_back &&
	       strcmp(i.held_back, "release 1.1.0 cannot act yet: it needs every member at 1.1.0 "
	                           "or above (oldest: 1.0.0); release 1.0.0 leads meanwhile") == 0;
}

static void on_reconcile_requested(void *ud, int err, int64_t rev)
{
	*(int64_t *)ud = err < 0 ? err : rev;
}

static bool p_requested(void *a)
{
	return *(int64_t *)a != 0;
}

/* p_request_taken - ask g_request_from for a reconcile; true once it is
 * taken (false while its mirror is not synced: -EAGAIN) */
static struct node *g_request_from;
static bool p_request_taken(void *a)
{
	char err[256];
	int r = election_request_reconcile(g_request_from->el, on_reconcile_requested, a, err,
	                                   sizeof(err));
	if (r == -EAGAIN)
		return false;
	CHECK_OK(r);
	return true;
}

static int64_t g_want_served;
static bool p_served(void *a)
{
	return info_of(a).reconcile_served >= g_want_served;
}

static void test_older_release_leads_while_newer_waits(void)
{
	wipe();
	struct node a, b, c;
	node_start(&a, 1, REL100, 10, true);
	node_start(&b, 2, REL100, 10, true);
	g_pair[0] = &a;
	g_pair[1] = &b;
	tu_wait(&T, p_one_leads, NULL, 5000, "exactly one of two leads");
	struct node *leader = a.drv.leading ? &a : &b, *other = a.drv.leading ? &b : &a;
	tu_wait(&T, p_node_leading, leader, 5000, "leader reconciled");
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE by 1.0.0");
	int elected = leader->drv.elected;

	g_nlog = 0;
	node_start(&c, 3, (struct plugin_releases){{1, 1, 0}, {1, 0, 0}, {1, 1, 0}}, 10, true);
	tu_wait(&T, p_held_cannot_act, &c, 5000, "1.1.0 stands by, saying why");
	g_want_rev = tu_put_member(&T, PFX, PLUGIN, "canary", REL(1, 0, 0));
	tu_wait(&T, p_rev, leader, 5000, "the leader's mirror is past the 1.1.0 member");
	tu_del(&T, PFX "/" PLUGIN "/members/canary");
	/* the 1.0.0 leader keeps its term and still reconciles on request */
	CHECK(leader->drv.leading);
	CHECK_INT_EQ(leader->drv.elected, elected);
	int reconciles = leader->drv.reconciles;
	int64_t rq = 0;
	/* -EAGAIN: c's mirror is reading the state again (under load its
	 * session can change); the request is taken once it has */
	g_request_from = &c;
	tu_wait(&T, p_request_taken, &rq, 5000, "the 1.1.0 node takes a reconcile request");
	tu_wait(&T, p_requested, &rq, 5000, "reconcile requested from the 1.1.0 node");
	CHECK(rq > 0);
	g_want_served = rq;
	tu_wait(&T, p_served, leader, 5000, "the 1.0.0 leader served the request");
	CHECK(leader->drv.reconciles > reconciles);
	CHECK(leader->drv.leading);
	CHECK_INT_EQ(c.drv.elected, 0);
	/* 1.1.0's min_reconciler_release 1.0.0 lets it serve on 1.0.0's state */
	CHECK(info_of(&c).ready);

	/* the standby 1.0.0 node leaves: the leader still blocks 1.1.0 */
	node_stop(other);
	CHECK(leader->drv.leading);
	/* the last 1.0.0 member leaves: one handover, the old leader deposed
	 * (drained) before 1.1.0 is elected; 1.1.0 restricts, then DONE */
	node_stop(leader);
	tu_wait(&T, p_drv_elected, &c, 5000, "1.1.0 elected");
	wait_status(DONE, REL(1, 1, 0), REL(1, 1, 0), "DONE by 1.1.0");
	tu_wait(&T, p_two_status_writes, &c, 5000, "restricted WORKING, then DONE, by c");
	CHECK_INT_EQ(c.drv.elected, 1);
	size_t dep = SIZE_MAX, el = SIZE_MAX;
	for (size_t k = 0; k < g_nlog; k++) {
		if (g_log[k].kind == EV_DEPOSED && g_log[k].node == leader->id && dep == SIZE_MAX)
			dep = k;
		if (g_log[k].kind == EV_ELECTED && g_log[k].node == 3 && el == SIZE_MAX)
			el = k;
	}
	CHECK(dep < el);
	node_stop(&c);
	node_free(&a);
	node_free(&b);
	node_free(&c);
}

/* ---- hot swap of the driver: release moves, member record follows ---- */

static void on_swapped(void *ud)
{
	*(bool *)ud = true;
}

static bool p_flag(void *a)
{
	return *(bool *)a;
}

static bool p_tdrv_leading(void *a)
{
	return ((struct tdrv *)a)->leading;
}

static void test_driver_swap_moves_release(void)
{
	wipe();
	struct node a;
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "leading");
	struct tdrv d2 = {.node = 11};
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &d2, &d2.t));
	bool swapped = false;
	struct plugin_releases r11 = {{1, 1, 0}, {1, 0, 0}, {1, 0, 0}};
	election_set_driver(a.el, &tdrv_ops, &d2, &r11, on_swapped, &swapped);
	tu_wait(&T, p_flag, &swapped, 5000, "old driver released");
	CHECK(!a.drv.leading);
	CHECK_INT_EQ(a.drv.deposed, 1);
	/* the new driver leads again, the member record says 1.1.0, and the
	 * compatible status is carried to DONE 1.1.0 */
	tu_wait(&T, p_tdrv_leading, &d2, 5000, "new driver elected");
	wait_status(DONE, REL(1, 1, 0), REL(1, 0, 0), "DONE by the new release");
	struct election_member m[4];
	CHECK_INT_EQ(election_members(a.el, m, 4), 1);
	CHECK_INT_EQ(m[0].release.minor, 1);
	CHECK(d2.token > a.drv.token); /* a new term, a larger fencing token */
	election_set_driver(a.el, &tdrv_ops, &a.drv, &REL100, NULL, NULL);
	node_stop(&a);
	loop_timer_free(d2.t);
	node_free(&a);
}

/* ---- losing the session deposes at once ---- */

static bool p_deposed(void *a)
{
	return ((struct node *)a)->drv.deposed > 0;
}

static void test_session_loss_deposes(void)
{
	wipe();
	struct node a;
	node_start(&a, 1, REL100, 4, true);
	tu_wait(&T, p_node_leading, &a, 5000, "leading");
	int64_t old = session_lease(a.sess);
	int64_t token = a.drv.token;
	/* someone revokes our lease behind our back */
	tu_revoke(&T, old);
	/* the next keepalive sees it; the leader is deposed, then re-elected */
	tu_wait(&T, p_deposed, &a, 10000, "deposed after the lease was revoked");
	tu_wait(&T, p_drv_elected, &a, 10000, "re-elected on a new session");
	CHECK(session_lease(a.sess) != old);
	CHECK(a.drv.token > token);
	node_stop(&a);
	node_free(&a);
}

/* ---- etcd #19597 ("phantom leader"): a candidate whose own key is gone
 * must not lead on it when the leader goes. The Go client's Campaign watches
 * only the lower keys; here the mirror also holds the candidate's own key,
 * so applying the delete ends the candidacy. Its key is deleted behind its
 * back (as a lease expiry would, without the lease); it must campaign again
 * and lead only with the new key. */

static char g_key_b[256];
static bool p_key_b_back(void *a)
{
	(void)a;
	size_t n;
	uint8_t *v = tu_get(&T, g_key_b, &n);
	free(v);
	return v != NULL;
}

static void test_candidate_without_its_key_does_not_lead(void)
{
	wipe();
	struct node a, b;
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "a leads");
	node_start(&b, 2, REL100, 10, true);
	tu_wait(&T, efx_p_campaigning, b.el, 5000, "b campaigns");
	snprintf(g_key_b, sizeof(g_key_b), "%s/%s/election/%" PRIx64, PFX, PLUGIN,
	         (uint64_t)session_lease(b.sess));
	int64_t gone = tu_del(&T, g_key_b);
	CHECK(gone > 0);
	node_stop(&a);
	tu_wait(&T, p_drv_elected, &b, 10000, "b leads with a new key");
	CHECK_INT_EQ(b.drv.elected, 1);
	CHECK(b.drv.token > gone);
	tu_wait(&T, p_key_b_back, NULL, 1000, "b's key exists");
	node_stop(&b);
	node_free(&a);
	node_free(&b);
}

/* ---- a key under election/ bound to a live lease but not named exactly as
 * a host names its key (here in upper-case hex) is no candidate: it would
 * otherwise be the lowest key and block the election forever ---- */

static int64_t g_granted;
static void on_granted(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)ud;
	CHECK_OK(err);
	g_granted = r->lease_id;
}

static bool p_granted(void *a)
{
	(void)a;
	return g_granted != 0;
}

static bool p_flag_set(void *a)
{
	return *(bool *)a;
}

/* a lease whose hex name has a letter (so upper case differs) */
static int64_t grant_lettered_lease(void)
{
	for (int i = 0; i < 20; i++) {
		g_granted = 0;
		CHECK_OK(etcd_lease_grant(T.etcd, 60, NULL, on_granted, NULL, NULL));
		tu_wait(&T, p_granted, NULL, 5000, "lease granted");
		char hex[17];
		snprintf(hex, sizeof(hex), "%" PRIx64, (uint64_t)g_granted);
		if (strpbrk(hex, "abcdef"))
			return g_granted;
		tu_revoke(&T, g_granted);
	}
	CHECK(!"no lease id with a hex letter in 20 grants");
	return 0;
}

static void test_noncanonical_key_is_no_candidate(void)
{
	wipe();
	int64_t lease = grant_lettered_lease();
	/* upper-case hex: the same number, not the same name */
	char key[128];
	snprintf(key, sizeof(key), "%s/%s/election/%" PRIX64, PFX, PLUGIN, (uint64_t)lease);
	struct etcd_op op = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key),
	                     .value = "x", .value_len = 1, .lease = lease};
	bool done = false;
	CHECK_OK(etcd_put(T.etcd, &op, NULL, on_put_done, &done, NULL));
	tu_wait(&T, p_flag_set, &done, 5000, "foreign key put");
	struct node a;
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "a leads despite the lower foreign key");
	node_stop(&a);
	node_free(&a);
	tu_revoke(&T, lease);
}

/* ---- a driver that answers after the election was freed (a retired
 * instance still stopping): the answer is ignored, nothing is touched ---- */

static bool p_running(void *a);

static void test_driver_answers_after_election_free(void)
{
	wipe();
	struct node a;
	node_start(&a, 1, REL100, 10, true);
	a.drv.hold = true; /* the initial reconcile stays running */
	tu_wait(&T, p_running, &a, 5000, "reconcile running");
	/* stop leading while it runs: the drain waits for it */
	election_hold(a.el, true, "test");
	CHECK(a.drv.drain_done != NULL);
	election_free(a.el);
	a.el = NULL;
	/* the driver answers both now (ASan: no use of freed memory) */
	a.drv.hold = false;
	d_finish(&a.drv);
	CHECK_INT_EQ(a.drv.nq, 0);
	CHECK(a.drv.drain_done == NULL);
	session_revoke(a.sess, NULL, NULL);
	node_free(&a);
}

/* ---- a failing reconcile is retried with backoff, status waits for success ---- */

static void test_initial_reconcile_backoff(void)
{
	wipe();
	struct node a;
	memset(&a, 0, sizeof(a));
	node_start(&a, 1, REL100, 10, true);
	a.drv.fail_next = 3;
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE after retries");
	CHECK(a.drv.reconciles >= 4);
	struct election_info i = info_of(&a);
	CHECK(i.reconcile_last_ok);
	CHECK(i.reconcile_count >= 4);
	node_stop(&a);
	node_free(&a);
}

/* ---- events during a running reconcile never start a second one ---- */

static bool p_running(void *a)
{
	return ((struct node *)a)->drv.nq > 0;
}

static void test_events_during_reconcile_start_no_second(void)
{
	wipe();
	struct node a;
	node_start(&a, 1, REL100, 10, true);
	a.drv.hold = true; /* the initial reconcile stays running */
	tu_wait(&T, p_running, &a, 5000, "initial reconcile running");
	/* member changes reach the leader while it reconciles */
	g_n = &a;
	for (int k = 0; k < 3; k++) {
		g_want_changes = a.drv.releases_changed + 1;
		char id[16];
		snprintf(id, sizeof(id), "x%d", k);
		tu_put_member(&T, PFX, PLUGIN, id, REL(1, 0, 0));
		tu_wait(&T, p_drv_changes, NULL, 5000, "change delivered during the reconcile");
	}
	CHECK_INT_EQ(a.drv.reconciles, 1);
	CHECK_INT_EQ(a.drv.nq, 1);
	a.drv.hold = false;
	loop_timer_arm_in(a.drv.t, 0);
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE after the held reconcile");
	CHECK_INT_EQ(a.drv.reconciles, 1);
	node_stop(&a);
	node_free(&a);
}

/* ---- a leader's own hot reload does not hand leadership to a peer ---- */

static void test_leader_reload_never_elects_a_peer(void)
{
	wipe();
	struct node a, b;
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "a leading");
	node_start(&b, 2, REL100, 10, true);
	tu_wait(&T, efx_p_campaigning, b.el, 5000, "b campaigning behind a");
	/* a reloads to a compatible 1.1.0: its old driver leaves, the new one leads */
	struct tdrv d2 = {.node = 11};
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &d2, &d2.t));
	bool swapped = false;
	struct plugin_releases r11 = {{1, 1, 0}, {1, 0, 0}, {1, 0, 0}};
	election_set_driver(a.el, &tdrv_ops, &d2, &r11, on_swapped, &swapped);
	tu_wait(&T, p_tdrv_leading, &d2, 5000, "a's new driver leads");
	/* b saw a's key vanish and the newer release at the same revision: it
	 * left the election instead of winning in between */
	CHECK_INT_EQ(b.drv.elected, 0);
	tu_wait(&T, efx_p_standby, b.el, 5000, "b standby (older release)");
	CHECK_INT_EQ(b.drv.elected, 0);
	election_set_driver(a.el, &tdrv_ops, &a.drv, &REL100, NULL, NULL);
	node_stop(&b);
	node_stop(&a);
	while (d2.nq > 0)
		d_finish(&d2);
	loop_timer_free(d2.t);
	node_free(&a);
	node_free(&b);
}

static bool p_held_2_cannot_act(void *a)
{
	struct election_info i = info_of(a);
	return i.state == ELECTION_STANDBY && i.held_back &&
	       strcmp(i.held_back, "release 2.0.0 cannot act yet: it needs every member at 2.0.0 "
	                           "or above (oldest: 1.0.0); release 1.0.0 leads meanwhile") == 0;
}

/* the last 1.0.0 node, leading, reloads 2.0.0 (incompatible: minimum
 * compatible 2.0.0) beside a 2.0.0 node that stands by: its resign txn
 * restricts the status for 2.0.0's leader (design.md, "The leaving leader
 * restricts for its successor"), which reconciles on it and writes DONE
 * without writing it first */
static void test_last_old_leader_reload_restricts_for_successor(void)
{
	wipe();
	int64_t since = tu_revision(&T);
	struct node a, b;
	struct plugin_releases r2 = {{2, 0, 0}, {1, 0, 0}, {2, 0, 0}};
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "a leading");
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE by 1.0.0");
	node_start(&b, 2, r2, 10, true);
	tu_wait(&T, p_held_2_cannot_act, &b, 5000, "2.0.0 stands by, saying why");
	/* a decides on a view with b's record in it (else its guard fails
	 * and it resigns without the restriction) */
	tu_wait(&T, p_two_members, &a, 5000, "a sees b's member record");
	struct tdrv d2 = {.node = 11};
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &d2, &d2.t));
	bool swapped = false;
	election_set_driver(a.el, &tdrv_ops, &d2, &r2, on_swapped, &swapped);
	wait_status(DONE, REL(2, 0, 0), REL(2, 0, 0), "DONE by 2.0.0");
	struct node *leader = d2.leading ? &a : &b;
	CHECK(d2.leading || b.drv.leading);
	/* in etcd's history: the restriction at the revision a's 1.0.0 key
	 * went, then the 2.0.0 leader's key, then DONE, its only status write */
	int64_t restricted_at = 0, gone_at = 0, key_at = 0, done_at = 0;
	int writes_after = 0;
	status_history(since, &a, leader, (struct release){2, 0, 0}, &restricted_at, &gone_at,
	               &key_at, &done_at, &writes_after);
	CHECK(restricted_at > 0 && restricted_at == gone_at);
	CHECK(key_at > restricted_at && done_at > key_at);
	CHECK_INT_EQ(writes_after, 1);
	election_set_driver(a.el, &tdrv_ops, &a.drv, &REL100, NULL, NULL);
	node_stop(&b);
	node_stop(&a);
	while (d2.nq > 0)
		d_finish(&d2);
	loop_timer_free(d2.t);
	node_free(&a);
	node_free(&b);
}

/* ---- a second hot reload while the first swap still drains ---- */

struct swap_seen {
	bool done;
	int order;
};
static int g_swap_order;

static void on_swap_done(void *ud)
{
	struct swap_seen *w = ud;
	CHECK(!w->done); /* exactly once */
	w->done = true;
	w->order = ++g_swap_order;
}

static bool p_swap_done(void *a)
{
	return ((struct swap_seen *)a)->done;
}

static void test_second_reload_while_draining(void)
{
	wipe();
	struct node a;
	node_start(&a, 1, REL100, 10, true);
	tu_wait(&T, p_node_leading, &a, 5000, "a leading");
	/* the periodic reconcile is far away: start one and hold it open, so
	 * the drain of the first swap cannot finish */
	a.drv.hold = true;
	struct tdrv d2 = {.node = 12}, d3 = {.node = 13};
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &d2, &d2.t));
	CHECK_OK(loop_timer_new(T.loop, on_d_timer, &d3, &d3.t));
	struct plugin_releases r11 = {{1, 1, 0}, {1, 0, 0}, {1, 0, 0}};
	struct plugin_releases r12 = {{1, 2, 0}, {1, 0, 0}, {1, 0, 0}};
	struct swap_seen s2 = {0}, s3 = {0};
	/* the first swap waits for a's drain; a reconcile keeps it busy */
	election_set_driver(a.el, &tdrv_ops, &d2, &r11, on_swap_done, &s2);
	tu_wait(&T, p_running, &a, 5000, "a's reconcile held open");
	/* the second arrives before the first took effect: the first is
	 * superseded at once (its driver was never used), a is still in charge */
	election_set_driver(a.el, &tdrv_ops, &d3, &r12, on_swap_done, &s3);
	CHECK(s2.done);
	CHECK(!s3.done);
	CHECK(a.drv.leading);
	CHECK_INT_EQ(a.drv.deposed, 0);
	/* release a's reconcile: a drains, is deposed once, d3 takes over */
	a.drv.hold = false;
	loop_timer_arm_in(a.drv.t, 0);
	tu_wait(&T, p_swap_done, &s3, 5000, "the second swap done");
	tu_wait(&T, p_tdrv_leading, &d3, 5000, "the newest driver leads");
	CHECK_INT_EQ(a.drv.deposed, 1);
	CHECK_INT_EQ(d2.elected, 0);   /* the superseded driver never ran */
	CHECK_INT_EQ(d2.reconciles, 0);
	CHECK(s2.order < s3.order);
	election_set_driver(a.el, &tdrv_ops, &a.drv, &REL100, NULL, NULL);
	node_stop(&a);
	while (d3.nq > 0)
		d_finish(&d3);
	loop_timer_free(d2.t);
	loop_timer_free(d3.t);
	node_free(&a);
}


/* ---- membership outlives the lease (the reference's persistent node
 * records): a node that stops renewing keeps counting with its release ---- */

static const struct plugin_releases REL110 = {{1, 1, 0}, {1, 0, 0}, {1, 1, 0}};

static void node_crash(struct node *n)
{
	/* no revoke, no resign, no member delete: the lease runs out on etcd */
	while (n->drv.nq > 0) {
		n->drv.q[0].ok = false;
		d_finish(&n->drv);
	}
	election_free(n->el);
	n->el = NULL;
	session_free(n->sess);
	n->sess = NULL;
	loop_timer_free(n->drv.t);
	etcd_client_free(n->etcd);
	memset(n, 0, sizeof(*n));
}

static int64_t g_gone_lease;
static bool p_lease_gone(void *a)
{
	(void)a;
	return tu_keys_of_lease(&T, PFX "/", g_gone_lease) == 0;
}

static bool p_member_rec(void *a)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/members/%s", (const char *)a);
	size_t n;
	uint8_t *v = tu_get(&T, key, &n);
	free(v);
	return v != NULL;
}

static bool p_forget_done(void *a)
{
	return *(int *)a != 1;
}

static void on_forget(void *ud, int err)
{
	*(int *)ud = err;
}


/* a node cut off or crashed on an old release holds the restriction back
 * until it is upgraded or an operator forgets it */
static void test_member_outlives_lease(void)
{
	wipe();
	/* the state was reconciled by 1.0.0, compatible with 1.0.0 */
	tu_put_status(&T, PFX, PLUGIN, DONE, REL(1, 0, 0), REL(1, 0, 0));
	struct node old, a;
	node_start(&old, 2, REL100, 2, true);
	tu_wait(&T, p_node_leading, &old, 5000, "the 1.0.0 node leads");
	int64_t old_lease = session_lease(old.sess);
	/* 1.1.0 (minimum compatible 1.1.0, the reference rule) joins: it leads,
	 * and must restrict (under the default rule it would stand by while
	 * the old member remains: test_older_release_leads_while_newer_waits) */
	struct plugin_releases rel110_reference = REL110;
	rel110_reference.reference_rule = true;
	node_start(&a, 1, rel110_reference, 10, true);
	tu_wait(&T, p_drv_elected, &a, 10000, "the 1.1.0 node leads");
	/* the old node is cut off: it stops renewing; its lease expires on etcd */
	node_crash(&old);
	g_gone_lease = old_lease;
	tu_wait(&T, p_lease_gone, NULL, 10000, "the old node's lease expired");
	CHECK(p_member_rec((char *)"node2"));
	/* a write the leader's watch sees after the expiry: its mirror is past it */
	int64_t rev = tu_put_member(&T, PFX, PLUGIN, "canary", REL(1, 1, 0));
	g_want_rev = rev;
	tu_wait(&T, p_rev, &a, 5000, "the leader's mirror is past the expiry");
	int st;
	struct release v, m;
	CHECK(tu_get_status(&T, PFX, PLUGIN, &st, &v, &m));
	CHECK_INT_EQ(st, DONE);
	CHECK(release_cmp(m, REL(1, 0, 0)) == 0); /* not restricted */
	CHECK_INT_EQ(a.drv.reconciles, 0);
	char a_rel[RELEASE_STRLEN];
	CHECK_STR_EQ(release_format(info_of(&a).releases.min, a_rel, sizeof(a_rel)), "1.0.0");
	/* the member list shows it, not campaigning */
	struct election_member mem[8];
	size_t nm = election_members(a.el, mem, 8);
	bool seen = false;
	for (size_t i = 0; i < nm && i < 8; i++)
		if (strcmp(mem[i].node_id, "node2") == 0) {
			seen = true;
			CHECK(!mem[i].campaigning);
		}
	CHECK(seen);

	/* forgetting: refused for the local node, a live candidate, a stranger */
	char err[256];
	int done = 1;
	CHECK_INT_EQ(election_forget(a.el, "node1", on_forget, &done, err, sizeof(err)), -EINVAL);
	CHECK_INT_EQ(election_forget(a.el, "nobody", on_forget, &done, err, sizeof(err)), -ENOENT);
	fprintf(stderr, "refusal: %s\n", err);
	/* the operator forgets the node: the restriction proceeds */
	CHECK_OK(election_forget(a.el, "node2", on_forget, &done, err, sizeof(err)));
	tu_wait(&T, p_forget_done, &done, 5000, "forget answered");
	CHECK_OK(done);
	wait_status(DONE, REL(1, 1, 0), REL(1, 1, 0), "restricted, reconciled, DONE at 1.1.0");
	tu_del(&T, PFX "/" PLUGIN "/members/canary");
	node_stop(&a);
	node_free(&a);
}

/* a live candidate cannot be forgotten; a record forgotten behind a live
 * node's back is put again at once; a graceful stop that does not leave
 * keeps the record, the default stop (plugin removed) deletes it */
static bool g_stop_flag;
static void on_stop_flag(void *ud)
{
	(void)ud;
	g_stop_flag = true;
}
static bool yes(void *ud)
{
	(void)ud;
	return true;
}

static bool p_two_cands(void *a)
{
	struct election_member m[8];
	size_t n = election_members(((struct node *)a)->el, m, 8), k = 0;
	for (size_t i = 0; i < n && i < 8; i++)
		k += m[i].campaigning;
	return k == 2;
}

static void test_forget_live_and_stop_kinds(void)
{
	wipe();
	struct node a, b;
	node_start(&a, 1, REL100, 10, true);
	node_start(&b, 2, REL100, 10, true);
	g_pair[0] = &a;
	g_pair[1] = &b;
	tu_wait(&T, p_one_leads, NULL, 10000, "one leads");
	tu_wait(&T, efx_p_campaigning, a.drv.leading ? b.el : a.el, 10000, "the other campaigns");
	tu_wait(&T, p_two_members, &a, 5000, "a sees b's record");
	tu_wait(&T, p_two_cands, &a, 5000, "a sees b's election key");
	char err[256];
	int done = 1;
	CHECK_INT_EQ(election_forget(a.el, "node2", on_forget, &done, err, sizeof(err)), -EBUSY);
	fprintf(stderr, "refusal: %s\n", err);
	/* deleted behind b's back: b is alive and registers again */
	int64_t rev = tu_del(&T, PFX "/" PLUGIN "/members/node2");
	(void)rev;
	tu_wait(&T, p_member_rec, (char *)"node2", 5000, "node2 registered again");
	/* an ordinary shutdown (not leaving) keeps the member record */
	g_stop_flag = false;
	election_stop_revoking(b.el, false, yes, on_stop_flag, NULL);
	tu_wait(&T, p_flag, &g_stop_flag, 10000, "b stopped");
	g_gone_lease = session_lease(b.sess);
	session_revoke(b.sess, NULL, NULL);
	tu_wait(&T, p_lease_gone, NULL, 10000, "b's lease revoked");
	CHECK(p_member_rec((char *)"node2"));
	/* a stop that leaves for good deletes it */
	g_stop_flag = false;
	election_stop(a.el, on_stop_flag, NULL);
	tu_wait(&T, p_flag, &g_stop_flag, 10000, "a stopped");
	CHECK(!p_member_rec((char *)"node1"));
	session_revoke(a.sess, NULL, NULL);
	node_free(&a);
	node_free(&b);
}


/* the newest release's only node goes offline while an older node remains:
 * the older node must not lead (its reconciler would roll the state back)
 * until an operator forgets the offline node; then it restricts first */
static bool p_held_newer(void *a)
{
	struct election_info i = info_of(a);
	return i.state == ELECTION_STANDBY && i.held_back &&
	       strcmp(i.held_back, "a newer release is present") == 0;
}

static void test_newest_offline_no_rollback(void)
{
	wipe();
	struct node a, old;
	node_start(&a, 1, REL110, 2, true);
	tu_wait(&T, p_node_leading, &a, 5000, "1.1.0 leads");
	wait_status(DONE, REL(1, 1, 0), REL(1, 1, 0), "DONE 1.1.0");
	node_start(&old, 2, REL100, 10, true);
	tu_wait(&T, p_held_newer, &old, 5000, "the 1.0.0 node stands by");
	CHECK(!info_of(&old).ready); /* 1.0.0 < minimum compatible 1.1.0 */
	/* the 1.1.0 node goes away without leaving; its lease expires */
	g_gone_lease = session_lease(a.sess);
	node_crash(&a);
	tu_wait(&T, p_lease_gone, NULL, 10000, "the 1.1.0 node's lease expired");
	int64_t rev = tu_put_member(&T, PFX, PLUGIN, "canary", REL(1, 0, 0));
	g_want_rev = rev;
	tu_wait(&T, p_rev, &old, 5000, "the old node's mirror is past the expiry");
	CHECK(p_held_newer(&old));
	CHECK_INT_EQ(old.drv.elected, 0);
	CHECK_INT_EQ(old.drv.reconciles, 0);
	int st;
	struct release v, m;
	CHECK(tu_get_status(&T, PFX, PLUGIN, &st, &v, &m));
	CHECK_INT_EQ(st, DONE);
	CHECK(release_cmp(v, REL(1, 1, 0)) == 0);
	/* a rollback attempt by hand: a second 1.0.0 node changes nothing */
	struct node old2;
	node_start(&old2, 3, REL100, 10, true);
	tu_wait(&T, p_held_newer, &old2, 5000, "the second 1.0.0 node stands by");
	/* the operator decides on a downgrade: forget the 1.1.0 node */
	char err[256];
	int done = 1;
	CHECK_OK(election_forget(old.el, "node1", on_forget, &done, err, sizeof(err)));
	tu_wait(&T, p_forget_done, &done, 5000, "forget answered");
	CHECK_OK(done);
	/* an old node leads; before its reconciler writes, the status is
	 * restricted: no node below 1.1.0 may serve until it has reconciled */
	g_pair[0] = &old;
	g_pair[1] = &old2;
	tu_wait(&T, p_one_leads, NULL, 10000, "an old node leads");
	wait_status(DONE, REL(1, 0, 0), REL(1, 0, 0), "DONE 1.0.0 after the downgrade");
	struct node *l = old.drv.leading ? &old : &old2;
	/* restricted WORKING, then DONE (its answer may trail the watch) */
	tu_wait(&T, p_two_status_writes, l, 5000, "the old leader's two status writes");
	tu_del(&T, PFX "/" PLUGIN "/members/canary");
	node_stop(&old);
	node_stop(&old2);
	node_free(&old);
	node_free(&old2);
}

/* ---- readiness only from a view the node can vouch for ---- */

static bool p_not_ready_no_session(void *a)
{
	struct election_info i = info_of(a);
	return !i.ready && i.not_ready && strstr(i.not_ready, "no etcd session");
}

static bool p_ready(void *a)
{
	return info_of(a).ready;
}

static void test_ready_needs_session(void)
{
	wipe();
	tu_put_status(&T, PFX, PLUGIN, DONE, REL(1, 0, 0), REL(1, 0, 0));
	struct node n;
	node_start(&n, 1, REL100, 2, false); /* an observer: never campaigns */
	tu_wait(&T, p_ready, &n, 5000, "ready with a session and a compatible status");
	/* etcd goes away: past the local lease deadline the node no longer
	 * vouches for its view of the status */
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	tu_wait(&T, p_not_ready_no_session, &n, 10000, "not ready without a session");
	fprintf(stderr, "while cut off: %s\n", info_of(&n).not_ready);
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	/* back: the state is read again, then ready */
	tu_wait(&T, p_ready, &n, 20000, "ready again once the state was read again");
	node_stop(&n);
	node_free(&n);
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	RUN(test_wait_ready);
	RUN(test_watch_members);
	RUN(test_service);
	RUN(test_newer_release_takes_over);
	RUN(test_older_release_leads_while_newer_waits);
	RUN(test_driver_swap_moves_release);
	RUN(test_session_loss_deposes);
	RUN(test_candidate_without_its_key_does_not_lead);
	RUN(test_driver_answers_after_election_free);
	RUN(test_noncanonical_key_is_no_candidate);
	RUN(test_initial_reconcile_backoff);
	RUN(test_events_during_reconcile_start_no_second);
	RUN(test_leader_reload_never_elects_a_peer);
	RUN(test_last_old_leader_reload_restricts_for_successor);
	RUN(test_second_reload_while_draining);
	RUN(test_member_outlives_lease);
	RUN(test_forget_live_and_stop_kinds);
	RUN(test_newest_offline_no_rollback);
	RUN(test_ready_needs_session);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
