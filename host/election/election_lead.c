/* SPDX-License-Identifier: MIT */
/*
 * election_lead.c - the leader's side of the protocol (the reference
 * algorithm's lead()): verify our key before a term, elect, decide on the
 * status found (restrict an incompatible one once every member allows it,
 * wait, or reconcile at once), the fenced status writes with their read-back
 * when the outcome is unknown, the initial and periodic reconciles, draining
 * and deposing. The phase of a term (enum lead_phase) changes only through
 * election_lead_phase_set.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election/election_internal.h"
#include "base/log.h"

static const char *election_lead_phase_name(enum lead_phase p)
{
	switch (p) {
	case LP_NONE:
		return "none";
	case LP_VERIFY:
		return "verify";
	case LP_RESTRICT:
		return "restrict";
	case LP_WAIT:
		return "wait";
	case LP_RECONCILE:
		return "reconcile";
	case LP_IDLE:
		return "idle";
	case LP_PERIODIC:
		return "periodic";
	}
	return "unknown";
}

/* election_lead_phase_legal - the transitions of the leader's machine: a term starts
 * from NONE (or VERIFY, the check before it, which a session loss may cut
 * short) in RESTRICT, WAIT or RECONCILE, as the status found decides, and
 * goes on RESTRICT -> WAIT -> RECONCILE (again after a failure) -> IDLE <->
 * PERIODIC; any phase may end the term (NONE). Every phase past VERIFY
 * belongs to a term: only while leading. */
static bool election_lead_phase_legal(const struct election *e, enum lead_phase from, enum lead_phase to)
{
	bool term_start = from == LP_NONE || from == LP_VERIFY;
	switch (to) {
	case LP_NONE:
		return true;
	case LP_VERIFY:
		return !e->leading && term_start;
	case LP_RESTRICT:
		return e->leading && term_start;
	case LP_WAIT:
		return e->leading && (term_start || from == LP_RESTRICT);
	case LP_RECONCILE:
		return e->leading && (term_start || from == LP_WAIT || from == LP_RECONCILE);
	case LP_IDLE:
		return e->leading && (from == LP_RECONCILE || from == LP_PERIODIC);
	case LP_PERIODIC:
		return e->leading && from == LP_IDLE;
	}
	return false;
}

/* election_lead_phase_set - the one place e->phase changes (curl's mstate()) */
static void election_lead_phase_set(struct election *e, enum lead_phase to)
{
	assert(election_lead_phase_legal(e, e->phase, to));
	if (e->phase != to)
		log_debug("election", "%s: lead phase %s -> %s", e->name, election_lead_phase_name(e->phase),
		          election_lead_phase_name(to));
	e->phase = to;
}

static void election_lead_reset(struct election *e)
{
	election_lead_phase_set(e, LP_NONE);
	e->reconciling = false;
	loop_timer_disarm(e->lead_timer);
	free(e->pending_status);
	e->pending_status = NULL;
	e->pending_readback = false;
	/* a request seen but not served is served by the next term's first
	 * reconcile (it covers every request seen) */
	e->resume_reconcile = false;
	e->plugin_request = false;
	e->served_pending = false;
	e->pause_logged = false;
}

void election_depose(struct election *e, bool graceful, const char *why)
{
	if (!e->leading)
		return;
	election_term_end(e);
	e->leading = false;
	e->draining = false;
	e->gen++;
	if (e->op == OP_LEAD) {
		etcd_call_cancel(e->call);
		election_op_done(e);
	}
	election_lead_reset(e);
	const struct log_field f[] = {{"reason", why, false}};
	log_msg_fields(LOG_LVL_INFO, "election", e->name, f, 1, "%s: %s leadership: %s", e->name,
	               graceful ? "leaving" : "lost", why);
	if (e->dops)
		e->dops->deposed(e->drv);
}

/* drv_ctx - what a driver callback (drain done, reconcile done) carries.
 * The election keeps every one it handed out (e->drv_ctxs). election_free
 * orphans those still owed (e = NULL) onto g_orphan_ctxs: a driver that
 * outlives the election (a retired instance still stopping) may still call
 * back, and then only frees the context; one that never calls back (freed
 * at exit) leaves it reachable, not leaked. Loop thread only. */
struct drv_ctx {
	uint32_t magic; /* DRV_CTX_MAGIC */
	struct drv_ctx *next, *prev;
	struct election *e; /* NULL: orphaned by election_free */
	uint64_t gen;
	bool periodic; /* reconcile: a periodic one */
};

static struct drv_ctx *g_orphan_ctxs;

static struct drv_ctx *election_lead_drv_ctx_new(struct election *e)
{
	struct drv_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->magic = DRV_CTX_MAGIC;
	c->e = e;
	c->gen = e->gen;
	c->next = e->drv_ctxs;
	if (c->next)
		c->next->prev = c;
	e->drv_ctxs = c;
	return c;
}

static void election_lead_drv_ctx_unlink(struct drv_ctx *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (c->e)
		c->e->drv_ctxs = c->next;
	else
		g_orphan_ctxs = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void election_lead_drv_ctx_free(struct drv_ctx *c)
{
	election_lead_drv_ctx_unlink(c);
	c->magic = 0;
	free(c);
}

/* the election of c, or NULL (c freed) when election_free orphaned it */
static struct election *election_lead_drv_ctx_election(struct drv_ctx *c)
{
	CHECK_OBJ(c, DRV_CTX_MAGIC);
	if (c->e) {
		CHECK_OBJ(c->e, ELECTION_MAGIC);
		return c->e;
	}
	election_lead_drv_ctx_free(c);
	return NULL;
}

void election_drv_ctxs_orphan(struct election *e)
{
	while (e->drv_ctxs) {
		struct drv_ctx *c = e->drv_ctxs;
		election_lead_drv_ctx_unlink(c);
		c->e = NULL;
		c->next = g_orphan_ctxs;
		if (c->next)
			c->next->prev = c;
		g_orphan_ctxs = c;
	}
}

static void election_lead_on_drained(void *ud)
{
	struct drv_ctx *d = ud;
	struct election *e = election_lead_drv_ctx_election(d);
	if (!e)
		return;
	bool current = d->gen == e->gen && e->draining;
	election_lead_drv_ctx_free(d);
	if (!current)
		return;
	election_depose(e, true, "drained");
	election_step(e);
}

void election_begin_leave(struct election *e)
{
	assert(e->leading && !e->draining);
	election_switchover_leaving(e);
	struct drv_ctx *d = e->dops ? election_lead_drv_ctx_new(e) : NULL;
	if (!d) {
		election_depose(e, true, "leaving");
		return;
	}
	e->draining = true;
	/* no new lead steps while draining */
	loop_timer_disarm(e->lead_timer);
	election_term_leaving(e);
	e->dops->drain(e->drv, election_lead_on_drained, d);
}

static void election_lead_on_verify(struct etcd_client *c, int err, const struct etcd_response *r, void *ud);
static void election_lead_decide(struct election *e, const struct status_rec *st);

/* elect - leadership begins: on_elected, then the reference algorithm's
 * branches on the status */
static void election_lead_elect(struct election *e, const struct status_rec *status)
{
	assert(!e->leading && e->my_rev != 0 && e->dops);
	struct status_rec s = *status;
	if (s.present && !s.valid) {
		log_warn("election", "%s: status record is not valid; treated as absent", e->name);
		memset(&s, 0, sizeof(s));
	}
	e->leading = true;
	e->led_rev = e->my_rev;
	e->gen++;
	e->lead_backoff = 100 * LOOP_NS_PER_MS;
	char tok[24];
	snprintf(tok, sizeof(tok), "%" PRId64, e->my_rev);
	const struct log_field f[] = {{"token", tok, true}};
	log_msg_fields(LOG_LVL_INFO, "election", e->name, f, 1, "%s: elected (fencing token %s)",
	               e->name, tok);
	e->request_covered = 0;
	election_term_begin(e);
	e->dops->elected(e->drv, e->my_rev, &e->releases);
	election_lead_decide(e, &s);
}

/* election_become_leader - our key is the lowest in the mirror.
 *
 * DESIGN asks to re-check the own key and the remaining TTL after winning,
 * before on_elected (etcd #19597: the Go client's Campaign watches only the
 * lower keys, so it can "win" after its own key expired). The TTL check is
 * local (the session's deadline). The key check is the mirror itself when it
 * provably covers our own key: it is a gap-free copy of the prefix at
 * revision e->rev, our key is in it with our create_revision, and every
 * write we made to our key (campaign, resign) has a known outcome at a
 * revision <= e->rev. After e->rev the key can only go by lease expiry
 * (ruled out by the deadline), by our own writes (all seen, none pending:
 * step() does not get here with one in flight), or by someone else's delete,
 * which a read could not rule out either (it can come right after the read).
 * A lagging watch can otherwise show us our key after we deleted it (a
 * resign whose reply was lost, a stale put event): then, or while the mirror
 * resyncs, the key and the status are read back in one linearizable txn
 * first. No lower key can appear later (new keys get higher revisions), and
 * an earlier leader's status writes precede its key's deletion, so the
 * mirrored status is the one to decide on. */
void election_become_leader(struct election *e)
{
	uint64_t safe = session_safe_until(e->sess), now = loop_now();
	if (!session_is_up(e->sess) || safe < now + 100 * LOOP_NS_PER_MS) {
		loop_timer_arm_in(e->retry_timer, 50 * LOOP_NS_PER_MS);
		return;
	}
	if (e->synced && !e->key_wunknown && e->rev >= e->key_wrev) {
		election_lead_elect(e, &e->status);
		return;
	}
	size_t kl = strlen(e->my_key);
	struct etcd_op ops[2] = {
		{.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl},
		{.type = ETCD_OP_RANGE, .key = e->k_status, .key_len = strlen(e->k_status)},
	};
	election_op_start(e, OP_LEAD);
	election_lead_phase_set(e, LP_VERIFY);
	int r = etcd_txn(e->etcd, NULL, 0, ops, 2, NULL, 0, NULL, election_lead_on_verify, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		election_lead_phase_set(e, LP_NONE);
		election_retry_later(e, "leadership check", r);
	}
}

static void election_lead_on_verify(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	election_lead_phase_set(e, LP_NONE);
	if (err < 0) {
		election_retry_later(e, "leadership check", err);
		return;
	}
	if (r->n_responses != 2) {
		election_retry_later(e, "leadership check", -EBADMSG);
		return;
	}
	/* a linearizable answer about our key: earlier unknowns are settled */
	e->key_wunknown = false;
	const struct etcd_response *mine = &r->responses[0], *st = &r->responses[1];
	if (mine->n_kvs != 1 || mine->kvs[0].create_revision != e->my_rev) {
		log_warn("election", "%s: our election key is gone; campaigning again", e->name);
		e->my_rev = 0;
		election_step(e);
		return;
	}
	if (!session_is_up(e->sess) ||
	    session_safe_until(e->sess) < loop_now() + 100 * LOOP_NS_PER_MS ||
	    !election_want_campaign(e)) {
		election_step(e);
		return;
	}
	/* Still the lowest? (the mirror said so; the key check above is linearizable) */
	const struct candidate *low = election_cand_lowest(e);
	if (!low || low->create_rev != e->my_rev) {
		election_step(e);
		return;
	}
	struct status_rec s = {0};
	if (st->n_kvs == 1)
		election_status_decode(st->kvs[0].value, st->kvs[0].value_len, &s);
	election_lead_elect(e, &s);
	election_step(e);
}

/* election_lead_decide - the reference algorithm's branches on the status read right
 * after election */
static void election_lead_decide(struct election *e, const struct status_rec *st)
{
	struct release rel = e->rel.release, mcr = e->rel.min_compatible;
	e->status_existed = st->present;
	e->status_is_done = election_status_equal(st, ST_DONE, rel, mcr);
	free(e->pending_status);
	e->pending_status = NULL;
	if (!st->present) {
		log_info("election", "%s: no status yet; reconciling first", e->name);
		election_lead_phase_set(e, LP_RECONCILE);
	} else if (e->status_is_done) {
		log_info("election", "%s: status already up to date", e->name);
		election_lead_phase_set(e, LP_WAIT);
	} else if (!release_less(rel, st->version) && !release_less(st->min_compatible, mcr)) {
		log_info("election", "%s: status is compatible; setting state WORKING", e->name);
		if (st->state != ST_WORKING)
			election_status_encode(ST_WORKING, st->version, st->min_compatible,
			                       &e->pending_status, &e->pending_status_len);
		e->pending_status_state = ST_WORKING;
		election_lead_phase_set(e, LP_WAIT);
	} else {
		log_info("election", "%s: status allows incompatible releases; restricting", e->name);
		struct rule_status now = {.valid = true, .version = st->version,
		                          .min_compatible = st->min_compatible};
		struct rule_status rs = release_rule_restriction(&now, rel, mcr);
		e->restrict_version = rs.version;
		e->restrict_min_compatible = rs.min_compatible;
		e->restrict_tried_rev = 0;
		e->restrict_logged = false;
		election_lead_phase_set(e, LP_RESTRICT);
	}
	if (e->phase == LP_WAIT)
		e->lead_log_after = 0;
}

static void election_lead_on_status_written(struct etcd_client *c, int err, const struct etcd_response *r,
                              void *ud);

static void election_lead_write_status(struct election *e, bool guard_members)
{
	/* a status write is fenced: only while leading, never while draining */
	assert(e->leading && !e->draining && e->my_rev != 0 && e->pending_status);
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmps[2] = {
		{.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .key = e->my_key, .key_len = kl,
		 .number = e->my_rev},
		{.target = ETCD_CMP_MOD, .result = ETCD_CMP_LESS, .key = e->k_members,
		 .key_len = strlen(e->k_members), .range_end = e->k_members_end,
		 .range_end_len = e->k_members_end_len, .number = e->releases.revision + 1},
	};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = e->k_status, .key_len = strlen(e->k_status),
	                      .value = e->pending_status, .value_len = e->pending_status_len};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	election_op_start(e, OP_LEAD);
	if (guard_members)
		e->restrict_tried_rev = e->releases.revision;
	int r = etcd_txn(e->etcd, cmps, guard_members ? 2 : 1, &put, 1, &get, 1, NULL,
	                 election_lead_on_status_written, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		e->restrict_tried_rev = 0;
		election_retry_later(e, "status write", r);
	}
}

static void election_lead_on_readback(struct etcd_client *c, int err, const struct etcd_response *r, void *ud);

static void election_lead_readback_status(struct election *e)
{
	assert(e->leading && !e->draining && e->my_rev != 0);
	size_t kl = strlen(e->my_key);
	struct etcd_op ops[2] = {
		{.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl},
		{.type = ETCD_OP_RANGE, .key = e->k_status, .key_len = strlen(e->k_status)},
	};
	election_op_start(e, OP_LEAD);
	int r = etcd_txn(e->etcd, NULL, 0, ops, 2, NULL, 0, NULL, election_lead_on_readback, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		election_retry_later(e, "status read-back", r);
	}
}

static void election_lead_status_write_succeeded(struct election *e)
{
	e->status_writes++;
	if (e->pending_status_state == ST_DONE)
		e->status_is_done = true;
	free(e->pending_status);
	e->pending_status = NULL;
	e->pending_readback = false;
	if (e->phase == LP_RESTRICT) {
		election_lead_phase_set(e, LP_WAIT);
		e->status_existed = true;
	}
}

static void election_lead_on_status_written(struct etcd_client *c, int err, const struct etcd_response *r,
                              void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		/* the outcome may be unknown (timeout, lost connection, garbled
		 * answer): read back before writing again */
		log_warn("election", "%s: status write failed: %s; reading back", e->name,
		         etcd_strerror(err));
		e->pending_readback = true;
		if (e->restrict_tried_rev == e->releases.revision)
			e->restrict_tried_rev = 0;
		election_retry_later(e, "status write", err);
		return;
	}
	if (r->succeeded) {
		election_lead_status_write_succeeded(e);
		election_step(e);
		return;
	}
	/* failed: fence or (restrict) members changed since our decision */
	bool still = r->n_responses == 1 && r->responses[0].n_kvs == 1 &&
	             r->responses[0].kvs[0].create_revision == e->my_rev;
	if (!still) {
		election_depose(e, false, "fenced status write failed: no longer leader");
		e->my_rev = 0;
		election_step(e);
		return;
	}
	log_info("election", "%s: members changed since the decision; retrying the status write", e->name);
	election_step(e);
}

static void election_lead_on_readback(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0 || r->n_responses != 2) {
		election_retry_later(e, "status read-back", err < 0 ? err : -EBADMSG);
		return;
	}
	const struct etcd_response *mine = &r->responses[0], *st = &r->responses[1];
	if (mine->n_kvs != 1 || mine->kvs[0].create_revision != e->my_rev) {
		election_depose(e, false, "our election key is gone");
		e->my_rev = 0;
		election_step(e);
		return;
	}
	e->pending_readback = false;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	if (st->n_kvs == 1 && e->pending_status && st->kvs[0].value_len == e->pending_status_len &&
	    memcmp(st->kvs[0].value, e->pending_status, e->pending_status_len) == 0) {
		election_lead_status_write_succeeded(e);
	}
	election_step(e);
}

static void election_lead_on_reconciled(void *ud, int err, const char *msg)
{
	struct drv_ctx *rc = ud;
	struct election *e = election_lead_drv_ctx_election(rc);
	if (!e)
		return;
	bool current = rc->gen == e->gen && e->leading;
	bool periodic = rc->periodic;
	election_lead_drv_ctx_free(rc);
	/* stats count every finished reconcile, current or not */
	if (err != -ECANCELED) {
		e->reconcile_count++;
		e->reconcile_last_ok = err == 0;
		e->reconcile_last_at = (int64_t)time(NULL);
		free(e->reconcile_last_error);
		e->reconcile_last_error = NULL;
		if (err != 0)
			e->reconcile_last_error = strdup(msg && *msg ? msg : etcd_strerror(err));
	}
	/* health counts every finished reconcile too: a crash's or a
	 * timeout's completion arrives after the term ended at once */
	bool withdrew = err != -ECANCELED && election_backoff_result(e, err, msg);
	if (!current) {
		if (withdrew)
			election_step(e);
		return;
	}
	e->reconciling = false;
	election_control_reconcile_finished(e, err, msg);
	election_term_record(e); /* off the handover's path now */
	if (err == 0) {
		if (!periodic)
			log_info("election", "%s: initial reconcile succeeded", e->name);
		e->lead_backoff = 100 * LOOP_NS_PER_MS;
		if (!e->status_is_done && !periodic) {
			free(e->pending_status);
			e->pending_status = NULL;
			election_status_encode(ST_DONE, e->rel.release, e->rel.min_compatible,
			                       &e->pending_status, &e->pending_status_len);
			e->pending_status_state = ST_DONE;
		}
		election_lead_phase_set(e, LP_IDLE);
		loop_timer_arm_in(e->lead_timer, e->reconcile_interval_ns);
	} else if (periodic) {
		log_warn("election", "%s: reconcile failed: %s", e->name, msg && *msg ? msg : etcd_strerror(err));
		election_lead_phase_set(e, LP_IDLE);
		loop_timer_arm_in(e->lead_timer, e->reconcile_interval_ns);
	} else {
		uint64_t now = loop_now();
		if (now >= e->lead_log_after) {
			log_warn("election", "%s: initial reconcile failed: %s; retrying with backoff",
			         e->name, msg && *msg ? msg : etcd_strerror(err));
			e->lead_log_after = now + 10 * LOOP_NS_PER_S;
		}
		election_lead_phase_set(e, LP_RECONCILE);
		loop_timer_arm_in(e->lead_timer, e->lead_backoff);
		uint64_t nb = e->lead_backoff * 3 / 2;
		e->lead_backoff = nb > 10 * LOOP_NS_PER_S ? 10 * LOOP_NS_PER_S : nb;
	}
	election_step(e);
}

static void election_lead_start_reconcile(struct election *e, bool periodic)
{
	assert(e->leading && !e->draining && !e->reconciling && e->dops);
	struct drv_ctx *rc = election_lead_drv_ctx_new(e);
	if (!rc) {
		loop_timer_arm_in(e->lead_timer, 100 * LOOP_NS_PER_MS);
		return;
	}
	rc->periodic = periodic;
	election_lead_phase_set(e, periodic ? LP_PERIODIC : LP_RECONCILE);
	e->reconciling = true;
	election_control_reconcile_started(e);
	e->dops->reconcile(e->drv, election_lead_on_reconciled, rc);
}

void election_on_lead_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (!e->leading || e->draining)
		return;
	if (e->phase == LP_WAIT)
		election_lead_phase_set(e, LP_RECONCILE);
	else if (e->phase == LP_IDLE && !e->reconciling) {
		/* paused: no periodic reconcile; the resume asks for one */
		if (election_control_may_reconcile(e))
			election_lead_start_reconcile(e, true);
		else
			loop_timer_arm_in(e->lead_timer, e->reconcile_interval_ns);
		return;
	}
	election_step(e);
}

/* election_lead_restrict - LP_RESTRICT: the incompatible status change
 * (ST_WORKING at our version) is written once no member runs a release
 * below our min_compatible, every member record decodes, and it is still
 * our release's turn */
static void election_lead_restrict(struct election *e)
{
	if (!election_rule_ours(e))
		return; /* another release's turn: we are about to leave */
	if (e->members.n_invalid > 0) {
		if (!e->restrict_logged_invalid) {
			log_warn("election", "%s: %zu member record(s) do not decode; their nodes may run "
			         "an older release, so the incompatible status change waits (fix or "
			         "delete them)",
			         e->name, e->members.n_invalid);
			e->restrict_logged_invalid = true;
		}
		return;
	}
	e->restrict_logged_invalid = false;
	if (release_less(e->releases.min, e->rel.min_compatible)) {
		if (!e->restrict_logged || release_cmp(e->restrict_logged_min, e->releases.min) != 0) {
			char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
			log_info("election", "%s: waiting for members below %s to go (oldest: %s)",
			         e->name, release_format(e->rel.min_compatible, a, sizeof(a)),
			         release_format(e->releases.min, b, sizeof(b)));
			e->restrict_logged = true;
			e->restrict_logged_min = e->releases.min;
		}
		return;
	}
	if (e->restrict_tried_rev == e->releases.revision)
		return; /* wait for the watch to show the change that failed us */
	if (!e->pending_status) {
		if (election_status_encode(ST_WORKING, e->restrict_version, e->restrict_min_compatible,
		                           &e->pending_status, &e->pending_status_len) < 0)
			return;
		e->pending_status_state = ST_WORKING;
	}
	election_lead_write_status(e, true);
}

/* election_lead_wait - LP_WAIT: a pending status goes first, then the
 * reconcile waits reconcile_wait_ns when a status existed (the previous
 * leader's writes settle). Returns true when the phase became
 * LP_RECONCILE in this step, so the caller goes on to it. */
static bool election_lead_wait(struct election *e)
{
	if (e->pending_status) {
		election_lead_write_status(e, false);
		return false;
	}
	if (!loop_timer_armed(e->lead_timer)) {
		if (e->status_existed && e->reconcile_wait_ns > 0)
			loop_timer_arm_in(e->lead_timer, e->reconcile_wait_ns);
		else
			election_lead_phase_set(e, LP_RECONCILE);
	}
	return e->phase == LP_RECONCILE;
}

/* election_lead_reconcile - LP_RECONCILE: the first reconcile of the term
 * starts unless one runs, a backoff waits or the operator paused us */
static void election_lead_reconcile(struct election *e)
{
	if (e->reconciling || loop_timer_armed(e->lead_timer))
		return; /* running, or in backoff */
	if (!election_control_may_reconcile(e)) {
		/* paused: the resume steps again */
		if (!e->pause_logged)
			log_info("election", "%s: paused: no reconcile starts until resumed "
			         "(leaseholdctl resume %s)", e->name, e->name);
		e->pause_logged = true;
		return;
	}
	election_lead_start_reconcile(e, false);
}

/* election_lead_idle - LP_IDLE: a pending status, then an operator's
 * write, then a reconcile the operator asked for */
static void election_lead_idle(struct election *e)
{
	if (e->pending_status) {
		election_lead_write_status(e, false);
		return;
	}
	if (election_control_write_served(e))
		return;
	if (!e->reconciling && election_control_reconcile_wanted(e)) {
		loop_timer_disarm(e->lead_timer);
		election_lead_start_reconcile(e, true);
	}
}

void election_lead_step(struct election *e)
{
	if (!e->leading || e->draining || e->op != OP_NONE)
		return;
	if (e->pending_readback) {
		election_lead_readback_status(e);
		return;
	}
	switch (e->phase) {
	case LP_RESTRICT:
		election_lead_restrict(e);
		return;
	case LP_WAIT:
		if (!election_lead_wait(e))
			return;
		/* fall through */
		__attribute__((fallthrough));
	case LP_RECONCILE:
		election_lead_reconcile(e);
		return;
	case LP_IDLE:
		election_lead_idle(e);
		return;
	case LP_NONE:
	case LP_VERIFY:
	case LP_PERIODIC:
		return;
	}
}
