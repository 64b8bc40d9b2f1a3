/* SPDX-License-Identifier: MIT */
/*
 * election.c - the controller of the election and its public API; see
 * election.h for the design notes.
 *
 * Reading guide (the files of the election; all share election_internal.h,
 * which holds struct election and the contracts between the pieces)
 * - election.c (this file): election_step(), the level-triggered controller:
 *   it decides the next control action (leave, swap driver, member record,
 *   campaign, win check, lead step), with exactly one control etcd call in
 *   flight at a time (e->op, set only by election_op_start); the control
 *   calls themselves (member put and delete, campaign, resign) and the
 *   public API (new, start, set_driver, hold, stop, session events, fail,
 *   info, forget).
 * - election_mirror.c: the local copy of [P/N/election/, P/N/status] kept by
 *   one range and one watch: members with counts per release, candidates,
 *   status; the published {min, max} release; election_members().
 * - election_records.c: the Member and ReconcilerStatus records (decode
 *   hostile bytes, encode), the readiness rule and the name of a live
 *   election key (election_key_is_candidate).
 * - election_lead.c: the leader's status/reconcile machine (the reference
 *   algorithm's lead()): verify, restrict, wait, reconcile, status writes
 *   and read-back, drain and depose; its phase changes only in
 *   lead_phase_set.
 * - election_fence.c: the plugin's fenced writes (driver_host.fenced_txn).
 * - election_operator_records.c: the operator's records: the pause, reconcile
 *   requests and their acknowledgement (mirrored with the rest of the
 *   range), and the term history (outside it, read on demand).
 * - election_handover.c: a switchover request (mirrored too): who gives
 *   up its election key for it, and its deletion by the new leader.
 * - election_conflict.c: another host's key with our node id keeps us out
 *   (e->conflict), told apart from the key of our own earlier run.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_campaign_order.h"
#include "election/election_internal.h"
#include "base/log.h"

const char *election_state_name(enum election_state s)
{
	switch (s) {
	case ELECTION_LOADING:
		return "loading";
	case ELECTION_STANDBY:
		return "standby";
	case ELECTION_CAMPAIGNING:
		return "campaigning";
	case ELECTION_LEADING:
		return "leading";
	case ELECTION_FAILED:
		return "failed";
	case ELECTION_STOPPED:
		return "stopped";
	}
	return "unknown";
}

static char *election_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *election_xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

void election_retry_later(struct election *e, const char *what, int err)
{
	if (err == -ENOENT) /* "lease not found": let the session find out now */
		session_poke(e->sess);
	/* etcd unreachable: the daemon reports the outage once */
	log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "election",
	        "%s: %s failed: %s; retrying in %" PRIu64 " ms", e->name, what,
	         etcd_strerror(err), e->retry_backoff / LOOP_NS_PER_MS);
	loop_timer_arm_in(e->retry_timer, e->retry_backoff);
	e->retry_backoff = e->retry_backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
	                                                           : e->retry_backoff * 2;
}

static void election_on_retry_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_step(e);
}

void election_op_start(struct election *e, enum op_kind op)
{
	/* exactly one control etcd call in flight */
	assert(op != OP_NONE && e->op == OP_NONE && e->call == NULL);
	e->op = op;
}

void election_op_done(struct election *e)
{
	e->op = OP_NONE;
	e->call = NULL;
}

static void election_on_member_put(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		e->member_placed = false; /* unknown outcome: put again (idempotent) */
		election_retry_later(e, "member registration", err);
		return;
	}
	if (r->header.revision > e->member_rev)
		e->member_rev = r->header.revision;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	election_step(e);
}

static void election_member_put(struct election *e)
{
	uint8_t *v;
	size_t vlen;
	if (election_member_encode(e, &e->rel, &v, &vlen) < 0)
		return;
	struct etcd_op op = {.type = ETCD_OP_PUT,
	                     .key = e->k_member_self,
	                     .key_len = strlen(e->k_member_self),
	                     .value = v,
	                     .value_len = vlen};
	election_op_start(e, OP_MEMBER_PUT);
	/* optimistic: a failure resets it in the callback path via retry */
	bool prev_placed = e->member_placed;
	struct rule_release prev_rr = e->member_rr;
	e->member_placed = true;
	e->member_rr = election_local_rule_release(e, e->health.unhealthy);
	e->member_priority = e->priority;
	int r = etcd_put(e->etcd, &op, NULL, election_on_member_put, e, &e->call);
	free(v);
	if (r < 0) {
		election_op_done(e);
		e->member_placed = prev_placed;
		e->member_rr = prev_rr;
		election_retry_later(e, "member registration", r);
	}
}

static void election_on_member_del(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		election_retry_later(e, "member removal", err);
		return;
	}
	e->member_placed = false;
	if (r->header.revision > e->member_rev)
		e->member_rev = r->header.revision;
	log_info("election", "%s: left the membership", e->name);
	election_step(e);
}

static void election_member_del(struct election *e)
{
	struct etcd_op op = {.type = ETCD_OP_DELETE,
	                     .key = e->k_member_self,
	                     .key_len = strlen(e->k_member_self)};
	election_op_start(e, OP_MEMBER_DEL);
	int r = etcd_delete(e->etcd, &op, NULL, election_on_member_del, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		election_retry_later(e, "member removal", r);
	}
}

/* election_key_write_known - a campaign or resign txn answered: our key's state at
 * revision rev is known (it is linearizable), older unknowns are settled */
static void election_key_write_known(struct election *e, int64_t rev)
{
	if (rev > e->key_wrev)
		e->key_wrev = rev;
	e->key_wunknown = false;
}

static void election_on_campaign(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		/* unknown outcome is fine: the txn is idempotent (create-if-absent, else read) */
		e->key_wunknown = true;
		election_retry_later(e, "campaign", err);
		return;
	}
	election_key_write_known(e, r->header.revision);
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	if (r->succeeded) {
		e->my_rev = r->header.revision;
	} else if (r->n_responses == 1 && r->responses[0].n_kvs == 1) {
		const struct etcd_kv *kv = &r->responses[0].kvs[0];
		if (kv->lease != e->lease) {
			/* a key of our name under another lease: not ours; it dies with that lease */
			log_warn("election", "%s: election key %s belongs to lease %" PRIx64 "; waiting",
			         e->name, e->my_key, (uint64_t)kv->lease);
			loop_timer_arm_in(e->retry_timer, 500 * LOOP_NS_PER_MS);
			return;
		}
		e->my_rev = kv->create_revision;
	} else {
		election_retry_later(e, "campaign", -EBADMSG);
		return;
	}
	log_info("election", "%s: campaigning (key %s, revision %" PRId64 ")", e->name, e->my_key,
	         e->my_rev);
	election_step(e);
}

static void election_campaign(struct election *e)
{
	snprintf(e->my_key, sizeof(e->my_key), "%s%" PRIx64, e->k_election, (uint64_t)e->lease);
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                           .key = e->my_key, .key_len = kl, .number = 0};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = e->my_key, .key_len = kl,
	                      .value = e->node_id, .value_len = strlen(e->node_id), .lease = e->lease};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	election_op_start(e, OP_CAMPAIGN);
	int r = etcd_txn(e->etcd, &cmp, 1, &put, 1, &get, 1, NULL, election_on_campaign, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		election_retry_later(e, "campaign", r);
	}
}

/* election_campaign_waits - rule 5's stagger (election_campaign_order.h):
 * when nobody of our release holds a key and another node is first in the
 * campaign order, wait ELECTION_CAMPAIGN_STAGGER_NS (the whole of it: the
 * point is that our campaign does not land where the first's term
 * begins), then campaign whatever the mirror shows. True while waiting. */
static bool election_campaign_waits(struct election *e)
{
	uint64_t now = loop_now();
	if (e->stagger_until && now < e->stagger_until)
		return true;
	/* a wait that just ended campaigns; one long past (the wish to
	 * campaign went and came back) decides afresh */
	bool ended = e->stagger_until && now < e->stagger_until + ELECTION_CAMPAIGN_STAGGER_NS;
	e->stagger_until = 0;
	if (ended)
		return false;
	const char *first = election_campaign_first_other(e);
	if (!first)
		return false;
	e->stagger_until = now + ELECTION_CAMPAIGN_STAGGER_NS;
	loop_timer_arm_in(e->stagger_timer, ELECTION_CAMPAIGN_STAGGER_NS);
	log_info("election", "%s: node %s campaigns first; campaigning %llu ms later", e->name, first,
	         (unsigned long long)(ELECTION_CAMPAIGN_STAGGER_NS / LOOP_NS_PER_MS));
	return true;
}

static void election_on_resign(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		/* a failed resign keeps the key; retry under the same compare */
		e->key_wunknown = true;
		e->resign_publishes = false;
		e->resign_drops_member = false;
		e->resign_restricts = false;
		election_retry_later(e, "resign", err);
		return;
	}
	election_key_write_known(e, r->header.revision);
	if (!r->succeeded && e->resign_restricts && r->n_responses == 1 &&
	    r->responses[0].n_kvs == 1 && r->responses[0].kvs[0].create_revision == e->my_rev) {
		/* our key holds: a guard failed (a member, the status or the
		 * pin changed since our view); resign again at once, without
		 * the restriction: the successor restricts as it would anyway */
		log_info("election", "%s: the view changed since the decision; resigning without "
		         "restricting the status", e->name);
		e->restrict_refused_rev = e->my_rev;
		e->resign_publishes = false;
		e->resign_drops_member = false;
		e->resign_restricts = false;
		election_step(e);
		return;
	}
	if (r->succeeded)
		election_term_end_written(e);
	if (r->succeeded && e->resign_restricts)
		e->status_writes++;
	if (r->succeeded && e->resign_publishes) {
		/* the member record carries the incoming release already */
		e->member_rr = e->resign_rr;
		e->member_priority = e->priority;
		e->member_placed = true;
	}
	if (r->succeeded && e->resign_drops_member) {
		e->member_placed = false;
		log_info("election", "%s: left the membership", e->name);
	}
	if (r->succeeded && (e->resign_publishes || e->resign_drops_member) &&
	    r->header.revision > e->member_rev)
		e->member_rev = r->header.revision;
	e->resign_publishes = false;
	e->resign_drops_member = false;
	e->resign_restricts = false;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	e->my_rev = 0;
	election_step(e);
}

static bool election_want_member(const struct election *e);
static bool election_member_current(const struct election *e);
static bool election_left_to_revoke(struct election *e);

/* election_leaving_membership - our member record is to go: we are leaving for good.
 * Membership says who may still be serving this plugin's state, so only a
 * deliberate exit ends it: the role taken away, the plugin file removed, a
 * shutdown that declares it leaves for good. A failed plugin, a lost
 * session and an ordinary shutdown keep the record: the node still has that
 * release installed and may come back with it (the reference algorithm's
 * persistent node records). While another host runs with our node id the
 * record is that host's as much as ours: it stays. */
static bool election_leaving_membership(const struct election *e)
{
	return e->member_placed && !e->conflict && (e->held || (e->stopping && e->stop_leave));
}

/* resign - delete our election key (compare: still our key). When a driver
 * swap is pending, the same txn publishes the incoming release in our member
 * record: peers then see our key vanish and the newer release at one
 * revision, so none of them wins in between (no flip-flop on a leader's own
 * hot reload). When we leave for good (stop, role removed, failure), the same
 * txn deletes our member record: peers see one change, and a shutdown's
 * cleanup puts one write less beside the successor's first ones. */
static void election_resign(struct election *e)
{
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                           .key = e->my_key, .key_len = kl, .number = e->my_rev};
	struct etcd_compare cmps[4] = {cmp};
	size_t n_cmps = 1;
	struct etcd_op ops[4] = {{.type = ETCD_OP_DELETE, .key = e->my_key, .key_len = kl}};
	size_t n_ops = 1;
	struct etcd_op mine = {.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	uint8_t *v = NULL, *term = NULL, *st = NULL;
	size_t vlen = 0, st_len = 0;
	char term_key[512];
	bool swaps = false;
	e->resign_publishes = false;
	e->resign_restricts = false;
	if (e->swap.pending && e->member_placed &&
	    election_member_encode(e, &e->swap.rel, &v, &vlen) == 0) {
		ops[1] = (struct etcd_op){.type = ETCD_OP_PUT, .key = e->k_member_self,
		                          .key_len = strlen(e->k_member_self), .value = v,
		                          .value_len = vlen};
		n_ops = 2;
		e->resign_publishes = true;
		e->resign_rr = election_rule_release_of(&e->swap.rel);
		e->resign_rr.unhealthy = e->health.unhealthy;
		e->resign_rr.unhealthy_until = e->health.unhealthy ? e->unhealthy_until_unix : 0;
		/* a swap that will not campaign next (a stop, a hold, a
		 * failure, another host with our id) brings no successor */
		swaps = !e->stopping && !e->held && !e->failed && !e->conflict;
	} else if (election_leaving_membership(e)) {
		ops[1] = (struct etcd_op){.type = ETCD_OP_DELETE, .key = e->k_member_self,
		                          .key_len = strlen(e->k_member_self)};
		n_ops = 2;
		e->resign_drops_member = true;
	} else if (e->member_placed && election_want_member(e) && !election_member_current(e) &&
	           election_member_encode(e, &e->rel, &v, &vlen) == 0) {
		/* our health changed (we withdraw): peers see our key go and the
		 * reason at one revision, and campaign at once */
		ops[1] = (struct etcd_op){.type = ETCD_OP_PUT, .key = e->k_member_self,
		                          .key_len = strlen(e->k_member_self), .value = v,
		                          .value_len = vlen};
		n_ops = 2;
		e->resign_publishes = true;
		e->resign_rr = election_local_rule_release(e, e->health.unhealthy);
	}
	/* the end of the term we led, at the revision our key goes */
	if (election_term_end_op(e, &ops[n_ops], &term, term_key, sizeof(term_key)))
		n_ops++;
	/* the restriction our successor would write first, when the release
	 * we swap to is the one our record change lets act: guarded like the
	 * successor's own (no member changed since the view it is decided
	 * on), and on what it is decided from besides (the status and the
	 * pin are still as mirrored) */
	struct rule_status rs;
	if (swaps && e->led_rev == e->my_rev && e->restrict_refused_rev != e->my_rev &&
	    election_rule_successor_restriction(e, &e->resign_rr, &rs) &&
	    election_status_encode(ST_WORKING, rs.version, rs.min_compatible, &st, &st_len) == 0) {
		ops[n_ops++] = (struct etcd_op){.type = ETCD_OP_PUT, .key = e->k_status,
		                                .key_len = strlen(e->k_status), .value = st,
		                                .value_len = st_len};
		cmps[n_cmps++] = (struct etcd_compare){
			.target = ETCD_CMP_MOD, .result = ETCD_CMP_LESS, .key = e->k_members,
			.key_len = strlen(e->k_members), .range_end = e->k_members_end,
			.range_end_len = e->k_members_end_len, .number = e->releases.revision + 1};
		/* the status and the pin as mirrored (etcd compares an absent
		 * key's mod_revision as 0): written, created or deleted since,
		 * the guard fails */
		cmps[n_cmps++] = (struct etcd_compare){
			.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .key = e->k_status,
			.key_len = strlen(e->k_status), .number = e->status_mod_rev};
		cmps[n_cmps++] = (struct etcd_compare){
			.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .key = e->k_pin,
			.key_len = strlen(e->k_pin), .number = e->pin_mod_rev};
		e->resign_restricts = true;
		char a[RELEASE_STRLEN];
		log_info("election", "%s: our reload to %s lets it act: restricting the status for "
		         "its leader", e->name, release_format(e->resign_rr.release, a, sizeof(a)));
	}
	election_op_start(e, OP_RESIGN);
	int r = etcd_txn(e->etcd, cmps, n_cmps, ops, n_ops, e->resign_restricts ? &mine : NULL,
	                 e->resign_restricts ? 1 : 0, NULL, election_on_resign, e, &e->call);
	free(v);
	free(term);
	free(st);
	if (r < 0) {
		election_op_done(e);
		e->resign_publishes = false;
		e->resign_drops_member = false;
		e->resign_restricts = false;
		election_retry_later(e, "resign", r);
	}
}

static bool election_want_member(const struct election *e)
{
	/* conflict_known: decided on a whole view (a first read that a session
	 * change made stale before its step is read again first) */
	return e->lease && !e->held && !e->stopping && !e->failed && e->dops && !e->swap.pending &&
	       e->conflict_known && !e->conflict;
}

/* election_member_current - our placed member record declares what we run */
static bool election_member_current(const struct election *e)
{
	struct rule_release now = election_local_rule_release(e, e->health.unhealthy);
	return e->member_placed && release_rule_equal(&e->member_rr, &now);
}

bool election_want_campaign(const struct election *e)
{
	/* a candidate needs its member record in place; a leader whose record
	 * was overwritten puts it back without leaving. The release rule
	 * (election_release_rule.h) is computed from the mirror: every host
	 * whose mirror is at the same revision agrees on the one release that
	 * campaigns. While mirrors lag, two releases may both hold keys for a
	 * moment; the election key still elects one leader and every write of
	 * a leader is fenced by its key, and the leader leaves through the
	 * drain as soon as its mirror shows another release's turn. */
	return election_want_member(e) && (election_member_current(e) || e->leading) &&
	       e->ever_synced && election_rule_ours(e) && !election_switchover_resign(e);
}

/* ---- the controller ---- */

void election_assert_invariants(const struct election *e)
{
	/* a leader holds its election key (my_rev is the fencing token) */
	assert(!e->leading || e->my_rev != 0);
	/* only a leader drains, and a driver is attached while it leads */
	assert(!e->draining || e->leading);
	assert(!e->leading || e->dops);
	/* a term's phase, its reconcile and its status read-back end with it */
	assert(e->leading || e->phase == LP_NONE || e->phase == LP_VERIFY);
	assert(e->leading || (!e->reconciling && !e->pending_readback));
	/* the control call in flight is the one op says */
	assert((e->op == OP_NONE) == (e->call == NULL));
	/* a driver swap waits for a driver to swap */
	assert(!e->swap.pending || e->dops);
}

static enum election_state election_current_state(const struct election *e)
{
	if (e->failed)
		return ELECTION_FAILED;
	if (e->stopping && !e->leading && !e->my_rev && !election_leaving_membership(e) && e->op == OP_NONE)
		return ELECTION_STOPPED;
	if (!e->synced)
		return ELECTION_LOADING;
	if (e->leading)
		return ELECTION_LEADING;
	if (e->my_rev)
		return ELECTION_CAMPAIGNING;
	return ELECTION_STANDBY;
}

/* election_swap_driver - rule 2: the driver swap a caller asked for, once
 * the old driver is no longer used. Returns true when the owner's done
 * callback ran: it may have stepped us, so the caller starts over rather
 * than go on with what it decided before. */
static bool election_swap_driver(struct election *e)
{
	void (*done)(void *) = e->swap.done;
	void *ud = e->swap.ud;
	e->dops = e->swap.ops;
	e->drv = e->swap.drv;
	e->rel = e->swap.rel;
	memset(&e->swap, 0, sizeof(e->swap));
	/* another build of the plugin: a fresh start */
	election_health_reset(&e->health);
	loop_timer_disarm(e->health_timer);
	e->unhealthy_until_unix = 0;
	election_publish(e);
	if (!done)
		return false;
	done(ud);
	return true;
}

/* election_finish_stop - rule 4: nothing held and nothing left to publish;
 * the watch goes and the owner hears that the stop is complete */
static void election_finish_stop(struct election *e)
{
	if (e->watch) {
		etcd_watch_cancel(e->watch);
		e->watch = NULL;
	}
	etcd_event_hold_clear(&e->sync_held);
	loop_timer_disarm(e->sync_timer);
	if (e->stop_done) {
		void (*done)(void *) = e->stop_done;
		e->stop_done = NULL;
		log_info("election", "%s: stopped", e->name);
		done(e->stop_ud);
	}
}

/* election_step_report - the end of a step whose rules asked for it (see
 * election_step_rules): node records follow the state, a state change is
 * logged once, and the owner hears that something may have changed */
static void election_step_report(struct election *e)
{
	election_assert_invariants(e);
	election_nodes_update(e);
	enum election_state s = election_current_state(e);
	if (s != e->state_reported) {
		log_debug("election", "%s: state %s -> %s", e->name, election_state_name(e->state_reported),
		          election_state_name(s));
		e->state_reported = s;
	}
	if (e->on_change)
		e->on_change(e->on_change_ud);
}

/* election_step_rules - the numbered rules, first match acts. Returns true
 * when the step ends with a report, false when it must not: a drain runs
 * (it reports when it ends) or a nested step already reported. */
static bool election_step_rules(struct election *e)
{
	if (e->draining)
		return false;
	if (e->op != OP_NONE)
		return true;
	/* 0. the mirror's read, due since etcd created its watch, takes the
	 * control path as soon as it is free (rather than on the sync timer's
	 * next poll) */
	if (!e->synced && e->watch && e->sync_rev) {
		election_sync_start(e);
		if (e->op != OP_NONE)
			return true;
	}
	if (loop_timer_armed(e->retry_timer)) {
		/* backing off an etcd call; leaving leadership needs none */
		if (e->leading && !election_want_campaign(e))
			election_begin_leave(e);
		return true;
	}

	/* 1. leave leadership / candidacy that is no longer wanted */
	if ((e->my_rev || e->leading) && !election_want_campaign(e)) {
		if (e->leading) {
			election_begin_leave(e);
			return false;
		}
		if (e->lease && e->my_rev && !election_left_to_revoke(e)) {
			election_resign(e);
			return true;
		}
		e->my_rev = 0;
	}
	/* 2. swap the driver once it is no longer used; the owner may call
	 * back into us (election_recover steps): that step ran to the end, so
	 * start over */
	if (e->swap.pending && !e->leading && !e->my_rev && election_swap_driver(e)) {
		election_step(e);
		return false;
	}
	/* 3. member record */
	if (election_want_member(e) && (!election_member_current(e) ||
	                       e->member_priority != e->priority)) {
		election_member_put(e);
		return true;
	}
	if (election_leaving_membership(e)) {
		election_member_del(e);
		return true;
	}
	/* 4. stop complete, once our state record went first */
	if (e->stopping && !e->leading && !e->my_rev) {
		if (!election_nodes_busy(e))
			election_finish_stop(e);
		return true;
	}
	/* 5. campaign, after the first of a herd */
	if (election_want_campaign(e) && !e->my_rev) {
		if (!election_campaign_waits(e))
			election_campaign(e);
		return true;
	}
	/* 6. win */
	if (e->my_rev && !e->leading) {
		const struct candidate *low = election_cand_lowest(e);
		if (low && low->create_rev == e->my_rev && strcmp(low->key, e->my_key) == 0)
			election_become_leader(e);
		if (!e->leading)
			return true;
	}
	/* 7. lead */
	if (e->leading) {
		election_lead_step(e);
		election_switchover_step(e);
	}
	return true;
}

void election_step(struct election *e)
{
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_assert_invariants(e);
	election_conflict_update(e);
	if (election_step_rules(e))
		election_step_report(e);
}

/* ---- the public API ---- */

int election_new(struct loop *l, struct etcd_client *etcd, struct session *sess,
                 const struct election_config *cfg, struct election **ret)
{
	if (!cfg->prefix || !cfg->name || !cfg->node_id || !*cfg->name || !*cfg->node_id ||
	    strchr(cfg->node_id, '/') || strchr(cfg->name, '/'))
		return -EINVAL;
	struct election *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->magic = ELECTION_MAGIC;
	e->loop = l;
	e->etcd = etcd;
	e->sess = sess;
	size_t pl = strlen(cfg->prefix);
	while (pl > 0 && cfg->prefix[pl - 1] == '/')
		pl--;
	e->prefix = strndup(cfg->prefix, pl);
	e->name = strdup(cfg->name);
	e->node_id = strdup(cfg->node_id);
	e->instance = election_dup_printable(cfg->instance, NODE_RECORD_TEXT_MAX);
	e->rel = cfg->releases;
	e->priority = cfg->priority;
	election_health_init(&e->health, &cfg->health);
	e->reconcile_wait_ns = cfg->reconcile_wait_ns;
	e->on_change = cfg->on_change;
	e->on_change_ud = cfg->on_change_ud;
	e->reconcile_interval_ns = cfg->reconcile_interval_ns ? cfg->reconcile_interval_ns
	                                                      : 30 * LOOP_NS_PER_S;
	int r = -ENOMEM;
	if (!e->prefix || !e->name || !e->node_id || !e->instance)
		goto fail;
	e->k_members = election_xasprintf("%s/%s/members/", e->prefix, e->name);
	e->k_member_self = election_xasprintf("%s/%s/members/%s", e->prefix, e->name, e->node_id);
	e->k_election = election_xasprintf("%s/%s/election/", e->prefix, e->name);
	e->k_status = election_xasprintf("%s/%s/status", e->prefix, e->name);
	e->k_data = election_xasprintf("%s/%s/data/", e->prefix, e->name);
	if (!e->k_members || !e->k_member_self || !e->k_election || !e->k_status || !e->k_data)
		goto fail;
	e->k_watch_end_len = strlen(e->k_status) + 1;
	e->k_watch_end = calloc(1, e->k_watch_end_len);
	e->k_members_end = malloc(strlen(e->k_members));
	if (!e->k_watch_end || !e->k_members_end)
		goto fail;
	memcpy(e->k_watch_end, e->k_status, e->k_watch_end_len - 1);
	e->k_members_end_len = etcd_prefix_end(e->k_members, strlen(e->k_members), e->k_members_end);
	r = election_control_init(e);
	if (r == 0)
		r = election_switchover_init(e);
	if (r == 0)
		r = election_nodes_init(e);
	if (r == 0)
		r = loop_timer_new(l, election_on_sync_timer, e, &e->sync_timer);
	if (r == 0)
		r = loop_timer_new(l, election_on_retry_timer, e, &e->retry_timer);
	if (r == 0)
		r = loop_timer_new(l, election_on_retry_timer, e, &e->stagger_timer);
	if (r == 0)
		r = loop_timer_new(l, election_on_lead_timer, e, &e->lead_timer);
	if (r == 0)
		r = loop_timer_new(l, election_backoff_on_timer, e, &e->health_timer);
	if (r < 0)
		goto fail;
	e->sync_backoff = e->retry_backoff = 100 * LOOP_NS_PER_MS;
	e->dhost.ctx = e;
	e->dhost.fenced_txn = election_fenced_txn;
	e->dhost.data_prefix = e->k_data;
	e->dhost.etcd = e->etcd;
	e->dhost.request_reconcile = election_plugin_request_reconcile;
	e->dhost.paused = election_plugin_paused;
	e->releases.min = e->releases.max = e->rel.release;
	*ret = e;
	return 0;
fail:
	election_free(e);
	return r;
}

const struct driver_host *election_driver_host(struct election *e)
{
	return &e->dhost;
}

void election_set_driver(struct election *e, const struct driver_ops *ops, void *drv,
                         const struct plugin_releases *rel, void (*done)(void *ud), void *ud)
{
	if (e->swap.pending) {
		/* superseded before it took effect: the previous new driver was never
		 * used; forget it before telling the owner (who may re-enter us) */
		void (*sdone)(void *) = e->swap.done;
		void *sud = e->swap.ud;
		memset(&e->swap, 0, sizeof(e->swap));
		if (sdone)
			sdone(sud);
	}
	if (!e->dops) {
		e->dops = ops;
		e->drv = drv;
		e->rel = *rel;
		election_publish(e);
		if (done)
			done(ud);
		election_step(e);
		return;
	}
	e->swap.pending = true;
	e->swap.ops = ops;
	e->swap.drv = drv;
	e->swap.rel = *rel;
	e->swap.done = done;
	e->swap.ud = ud;
	election_step(e);
}

int election_start(struct election *e)
{
	e->lease = session_lease(e->sess);
	election_sync_start(e);
	return 0;
}

void election_hold(struct election *e, bool hold, const char *reason)
{
	free(e->hold_reason);
	e->hold_reason = hold && reason ? strdup(reason) : NULL;
	e->held = hold;
	election_step(e);
}

static void election_stop_with(struct election *e, bool leave, bool (*last)(void *ud),
                      void (*done)(void *ud), void *ud)
{
	e->stopping = true;
	e->stop_leave = leave;
	e->stop_last = last;
	e->stop_done = done;
	e->stop_ud = ud;
	election_step(e);
}

void election_stop(struct election *e, void (*done)(void *ud), void *ud)
{
	election_stop_with(e, true, NULL, done, ud);
}

void election_stop_revoking(struct election *e, bool leave, bool (*last)(void *ud),
                            void (*done)(void *ud), void *ud)
{
	election_stop_with(e, leave, last, done, ud);
}

/* election_left_to_revoke - a stopping election whose election key the caller's
 * lease revocation deletes next (election_stop_revoking): forget it here.
 * Not when leaving for good: the member record is bound to no lease, and
 * the resign txn deletes it together with the key. */
static bool election_left_to_revoke(struct election *e)
{
	/* the end of a term we led is written while the plugin drains
	 * (election_term_leaving), beside the revocation and not waited for;
	 * when it failed before, the resign txn carries it */
	if (!e->stopping || !e->stop_last || e->stop_leave || e->swap.pending ||
	    (e->term_end_pending && e->term_end_token == e->my_rev) || !e->stop_last(e->stop_ud))
		return false;
	log_info("election", "%s: leaving our election key to the lease revocation", e->name);
	e->my_rev = 0;
	return true;
}

void election_session_up(struct election *e, int64_t lease)
{
	e->lease = lease;
	snprintf(e->my_key, sizeof(e->my_key), "%s%" PRIx64, e->k_election, (uint64_t)lease);
	if (e->view_lease != lease)
		election_view_refresh(e);
	election_step(e);
}

void election_session_lost(struct election *e)
{
	/* a draining leader too: nothing is drained without a session */
	if (e->leading)
		election_depose(e, false, "session lost");
	assert(!e->draining);
	/* a member put in flight has an unknown outcome: the mirror shows
	 * whether it took; the record itself outlives the session */
	if (e->op == OP_MEMBER_PUT)
		e->member_placed = false;
	if (e->op == OP_MEMBER_PUT || e->op == OP_MEMBER_DEL || e->op == OP_CAMPAIGN ||
	    e->op == OP_RESIGN || e->op == OP_LEAD) {
		etcd_call_cancel(e->call);
		election_op_done(e);
	}
	loop_timer_disarm(e->retry_timer);
	e->lease = 0;
	e->my_rev = 0;
	election_step(e);
}

void election_fail(struct election *e, const char *reason)
{
	free(e->fail_reason);
	e->fail_reason = reason ? strdup(reason) : NULL;
	e->failed = true;
	if (e->leading)
		election_depose(e, false, reason ? reason : "failed");
	election_step(e);
}

void election_recover(struct election *e)
{
	if (!e->failed)
		return;
	free(e->fail_reason);
	e->fail_reason = NULL;
	e->failed = false;
	election_step(e);
}

void election_free(struct election *e)
{
	if (!e)
		return;
	CHECK_OBJ(e, ELECTION_MAGIC);
	/* plugin txns still in flight answer -ESTALE without touching us */
	election_fenced_orphan(e);
	election_drv_ctxs_orphan(e);
	if (e->watch)
		etcd_watch_cancel(e->watch);
	etcd_call_cancel(e->call);
	loop_timer_free(e->sync_timer);
	loop_timer_free(e->retry_timer);
	loop_timer_free(e->stagger_timer);
	loop_timer_free(e->lead_timer);
	loop_timer_free(e->health_timer);
	election_mirror_free(e);
	election_control_free(e);
	election_switchover_free(e);
	election_nodes_free(e);
	free(e->pending_status);
	free(e->reconcile_last_error);
	free(e->hold_reason);
	free(e->fail_reason);
	free(e->k_members);
	free(e->k_member_self);
	free(e->k_election);
	free(e->k_status);
	free(e->k_data);
	free(e->k_watch_end);
	free(e->k_members_end);
	free(e->prefix);
	free(e->name);
	free(e->node_id);
	free(e->instance);
	e->magic = 0;
	free(e);
}

const char *election_name(const struct election *e)
{
	return e->name;
}

struct rule_pin election_pin(const struct election *e)
{
	return e->pin;
}

void election_get_info(struct election *e, struct election_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->state = election_current_state(e);
	const struct candidate *low = election_cand_lowest(e);
	ret->leader = low ? low->node_id : NULL;
	ret->leader_token = low ? low->create_rev : 0;
	ret->releases = e->releases;
	ret->status_present = e->status.present;
	ret->status_valid = e->status.valid;
	ret->status_state = e->status.state;
	ret->status_version = e->status.version;
	ret->status_min_compatible = e->status.min_compatible;
	ret->status_compatible = e->status.valid &&
	                         election_status_ready(&e->rel, true, e->status.version,
	                                               e->status.min_compatible);
	ret->not_ready = election_not_ready_reason(e, e->not_ready_buf, sizeof(e->not_ready_buf));
	ret->ready = ret->not_ready == NULL;
	ret->reconcile_count = e->reconcile_count;
	ret->reconcile_last_ok = e->reconcile_last_ok;
	ret->reconcile_last_error = e->reconcile_last_error;
	ret->reconcile_last_at = e->reconcile_last_at;
	ret->fencing_token = e->leading ? e->my_rev : 0;
	ret->status_writes = e->status_writes;
	if (e->failed)
		ret->held_back = e->fail_reason;
	else if (e->held)
		ret->held_back = e->hold_reason;
	else if (e->conflict)
		ret->held_back = e->conflict_msg;
	else if (e->synced && !election_rule_ours(e))
		ret->held_back = election_rule_held_back(e);
	else if (!e->lease)
		ret->held_back = "no etcd session";
	ret->paused = e->paused;
	ret->pause_error = e->pause_error[0] ? e->pause_error : NULL;
	ret->paused_by = e->paused_by;
	ret->paused_at = e->paused_at;
	ret->reconcile_requested = e->request_rev;
	ret->reconcile_served = e->served_rev;
	ret->reconcile_served_ok = e->served_ok;
	ret->reconcile_served_error = e->served_error;
	ret->switchover_rev = e->handover.present ? e->handover.rev : 0;
	ret->switchover_to = e->handover.present && e->handover.to[0] ? e->handover.to : NULL;
	ret->switchover_ended_rev = e->handover_ended_rev;
	ret->node_conflict_lease = e->conflict ? e->conflict_lease : 0;
	ret->pin = e->pin;
	ret->pin_by = e->pin.set && e->pin_by[0] ? e->pin_by : NULL;
	ret->pin_at = e->pin.set ? e->pin_at : 0;
	ret->pin_error = e->pin_error[0] ? e->pin_error : NULL;
	election_rule_answer(e, &ret->acting);
	ret->unhealthy = e->health.unhealthy;
	ret->unhealthy_until = e->health.unhealthy ? e->unhealthy_until_unix : 0;
	ret->failures_in_row = e->health.failures;
	ret->unhealthy_total = e->health.episodes;
}


struct forget_ctx {
	uint32_t magic; /* FORGET_CTX_MAGIC */
	void (*done)(void *ud, int err);
	void *ud;
};

static void election_on_forgotten(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct forget_ctx *f = ud;
	CHECK_OBJ(f, FORGET_CTX_MAGIC);
	if (err == 0 && !r->succeeded)
		err = -ESTALE; /* the record changed since the decision: re-registered */
	f->done(f->ud, err);
	f->magic = 0;
	free(f);
}

int election_forget(struct election *e, const char *node_id, void (*done)(void *ud, int err),
                    void *ud, char *err, size_t err_len)
{
	if (!e->synced) {
		snprintf(err, err_len, "plugin '%s' has not read its members from etcd yet; try again",
		         e->name);
		return -EAGAIN;
	}
	if (strcmp(node_id, e->node_id) == 0) {
		snprintf(err, err_len, "'%s' is this node, which runs plugin '%s': remove the plugin "
		         "file here (or its role) to leave", node_id, e->name);
		return -EINVAL;
	}
	const struct member_ent *m = election_member_find(e, node_id);
	if (!m) {
		snprintf(err, err_len, "node '%s' is not a member of plugin '%s'", node_id, e->name);
		return -ENOENT;
	}
	if (election_cand_of_node(e, node_id)) {
		snprintf(err, err_len, "node '%s' is alive (it campaigns for plugin '%s'); a live "
		         "node registers again at once: stop it or remove the plugin there",
		         node_id, e->name);
		return -EBUSY;
	}
	char *key = election_xasprintf("%s%s", e->k_members, node_id);
	struct forget_ctx *f = malloc(sizeof(*f));
	int r = -ENOMEM;
	if (!key || !f)
		goto out;
	f->magic = FORGET_CTX_MAGIC;
	f->done = done;
	f->ud = ud;
	/* only the record we decided on: a node that registered again since
	 * (it came back) is not forgotten */
	struct etcd_compare cmp = {.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .key = key,
	                           .key_len = strlen(key), .number = m->mod_rev};
	struct etcd_op del = {.type = ETCD_OP_DELETE, .key = key, .key_len = strlen(key)};
	r = etcd_txn(e->etcd, &cmp, 1, &del, 1, NULL, 0, NULL, election_on_forgotten, f, NULL);
	if (r == 0) {
		char rb[RELEASE_STRLEN] = "?";
		if (m->valid)
			release_format(m->release, rb, sizeof(rb));
		log_warn("election", "%s: forgetting member %s (release %s) on an operator's request",
		         e->name, node_id, rb);
		f = NULL;
	} else
		snprintf(err, err_len, "%s", etcd_strerror(r));
out:
	if (r == -ENOMEM)
		snprintf(err, err_len, "out of memory");
	free(key);
	free(f);
	return r;
}
