/* SPDX-License-Identifier: MIT */
/*
 * election_operator_records.c - the operator's records of one plugin: the pause
 * (P/N/paused), reconcile requests (P/N/reconcile-request, answered by the
 * leader in P/N/reconcile-served) and the term history
 * (P/N/term-history/<token>). Decoders take hostile bytes.
 *
 * Design notes
 * - Keys. "paused", "reconcile-request" and "reconcile-served" sort between
 *   "members/" and "status", so they lie inside the one watched range
 *   [P/N/election/, P/N/status]: every host mirrors them with no second
 *   watch, and they change only on an operator's request (and once per
 *   served request), never per plugin write.
 * - The term history is read rarely (by `leaseholdctl history` and once per
 *   term by the new leader), so it lives OUTSIDE the watched range:
 *   "term-history/" sorts after "status". Every host's sync read and watch
 *   stay as cheap as before; a reader asks for it with one range request.
 *   Keys carry the fencing token in 20 digits, so key order is term order.
 * - Pause: while P/N/paused exists no new reconcile starts (a running one
 *   finishes); the leader keeps leading and its status writes go on (they
 *   are the protocol's, not the plugin's work); readiness is untouched. The
 *   pause ending while a node leads asks for one reconcile at once (the
 *   plugin may have missed any number of changes). A pause record that does
 *   not decode still counts as a pause: someone wrote a record at that key,
 *   and reconciling during a maintenance the operator asked for can do
 *   harm, while not reconciling until the operator looks costs only time
 *   (`resume` deletes it whatever it holds).
 * - Reconcile requests: a requester puts the request record; its
 *   mod_revision R identifies the request. The leader compares R with the
 *   request revision its running or last reconcile covers: a reconcile that
 *   starts covers every request seen so far, so requests that come while
 *   one is queued or running cause at most one more (coalesced). When a
 *   reconcile that covered R finishes, the leader writes P/N/reconcile-served
 *   = R (with the result) in a txn fenced by its election key; every host
 *   sees it, so a requester on any node knows its request was served.
 * - Term history: the new leader reads the history (at most 100 records)
 *   right after election and writes, in one txn fenced by its election key,
 *   its start record, the end of the previous term when that record has
 *   none (its leader could not write it: lease expired or session lost),
 *   and the deletion of the oldest records beyond 100. The leaving leader
 *   writes its end in the resign txn that deletes its key (same revision)
 *   on every graceful path and on a failed plugin.
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

/* a history record key: P/N/term-history/ + 20 digits */
#define TERM_KEY_DIGITS 20

static char *election_operator_key_join(const char *prefix, const char *name, const char *rest)
{
	char *s = NULL;
	if (asprintf(&s, "%s/%s/%s", prefix, name, rest) < 0)
		return NULL;
	return s;
}

static void election_operator_term_key(const struct election *e, int64_t token, char *buf, size_t len)
{
	snprintf(buf, len, "%s%0*" PRId64, e->k_terms, TERM_KEY_DIGITS, token);
}

static void election_operator_on_term_timer(struct loop_timer *t, void *ud);

/* the longest a term's start record waits for the first reconcile */
#define TERM_RECORD_DELAY_MS 1000

int election_control_init(struct election *e)
{
	e->k_paused = election_operator_key_join(e->prefix, e->name, "paused");
	e->k_request = election_operator_key_join(e->prefix, e->name, "reconcile-request");
	e->k_served = election_operator_key_join(e->prefix, e->name, "reconcile-served");
	e->k_terms = election_operator_key_join(e->prefix, e->name, "term-history/");
	if (!e->k_paused || !e->k_request || !e->k_served || !e->k_terms || election_pin_init(e) < 0)
		return -ENOMEM;
	return loop_timer_new(e->loop, election_operator_on_term_timer, e, &e->term_timer);
}

struct term_ctx {
	uint32_t magic; /* TERM_CTX_MAGIC */
	struct election *e;
	int64_t token;
	struct etcd_call *call;
	bool puts_ours; /* the txn puts our term's record (its revision is the record's) */
};

static void election_operator_term_ctx_free(struct term_ctx *c)
{
	if (c->e && c->e->term == c)
		c->e->term = NULL;
	if (c->e && c->e->term_end_call == c)
		c->e->term_end_call = NULL;
	c->magic = 0;
	free(c);
}

void election_control_free(struct election *e)
{
	if (e->term) {
		etcd_call_cancel(e->term->call);
		election_operator_term_ctx_free(e->term);
	}
	if (e->term_end_call) {
		etcd_call_cancel(e->term_end_call->call);
		election_operator_term_ctx_free(e->term_end_call);
	}
	loop_timer_free(e->term_timer);
	free(e->k_paused);
	election_pin_free(e);
	free(e->k_request);
	free(e->k_served);
	free(e->k_terms);
	free(e->paused_by);
	free(e->served_error);
	free(e->served_pending_error);
}

/* ---- the mirrored records ---- */

static bool election_operator_key_is(const struct etcd_kv *kv, const char *k)
{
	return kv->key_len == strlen(k) && memcmp(kv->key, k, kv->key_len) == 0;
}

char *election_dup_printable(const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;
	char *d = malloc(n + 1);
	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++)
		d[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	d[n] = '\0';
	return d;
}

static void election_operator_pause_set(struct election *e, bool paused)
{
	if (e->paused && !paused) {
		log_info("election", "%s: resumed by an operator", e->name);
		if (e->leading)
			e->resume_reconcile = true;
	} else if (!e->paused && paused)
		log_info("election", "%s: paused by an operator: no reconcile starts until resumed",
		         e->name);
	e->paused = paused;
}

static void election_operator_apply_pause(struct election *e, const struct etcd_kv *kv, bool del)
{
	free(e->paused_by);
	e->paused_by = NULL;
	e->paused_at = 0;
	e->pause_error[0] = '\0';
	if (del) {
		election_operator_pause_set(e, false);
		return;
	}
	e->pause_seen = true;
	Leasehold__Pause *p = leasehold__pause__unpack(NULL, kv->value_len, kv->value);
	if (!p) {
		snprintf(e->pause_error, sizeof(e->pause_error),
		         "the pause record does not decode (treated as paused)");
		log_warn("election", "%s: %s", e->name, e->pause_error);
	} else {
		e->paused_by = election_dup_printable(p->node, 128);
		e->paused_at = p->at_unix;
		leasehold__pause__free_unpacked(p, NULL);
	}
	election_operator_pause_set(e, true);
}

static void election_operator_apply_served(struct election *e, const struct etcd_kv *kv, bool del)
{
	if (del) {
		e->served_rev = 0;
		return;
	}
	Leasehold__ReconcileServed *s =
		leasehold__reconcile_served__unpack(NULL, kv->value_len, kv->value);
	if (!s) {
		/* unknown: no request counts as served by it */
		log_warn("election", "%s: the reconcile-served record does not decode; ignored", e->name);
		return;
	}
	e->served_rev = s->request_revision;
	e->served_ok = s->ok;
	free(e->served_error);
	e->served_error = s->error && *s->error ? election_dup_printable(s->error, 256) : NULL;
	leasehold__reconcile_served__free_unpacked(s, NULL);
}

bool election_control_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	if (election_operator_key_is(kv, e->k_paused))
		election_operator_apply_pause(e, kv, del);
	else if (election_operator_key_is(kv, e->k_request))
		/* any value: the record's revision is the request */
		e->request_rev = del ? 0 : kv->mod_revision;
	else if (election_operator_key_is(kv, e->k_served))
		election_operator_apply_served(e, kv, del);
	else
		return election_pin_apply(e, kv, del);
	return true;
}

void election_control_sync_begin(struct election *e)
{
	/* records absent from the full read are gone (the pause: at the end,
	 * so that it is never seen to end and start again) */
	e->pause_seen = false;
	election_pin_sync_begin(e);
	e->request_rev = 0;
	e->served_rev = 0;
}

void election_control_sync_end(struct election *e)
{
	if (!e->pause_seen && e->paused) {
		struct etcd_kv gone = {0};
		election_operator_apply_pause(e, &gone, true);
	}
	election_pin_sync_end(e);
}

/* ---- the leader's side ---- */

bool election_control_may_reconcile(const struct election *e)
{
	return !e->paused;
}

bool election_control_reconcile_wanted(const struct election *e)
{
	if (e->paused)
		return false;
	return e->resume_reconcile || e->plugin_request ||
	       (e->request_rev > e->served_rev && e->request_rev > e->request_covered);
}

bool election_plugin_paused(void *ctx)
{
	struct election *e = ctx;
	CHECK_OBJ(e, ELECTION_MAGIC);
	return e->paused;
}

void election_plugin_request_reconcile(void *ctx)
{
	struct election *e = ctx;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (!e->leading)
		return;
	/* one flag: any number of requests before the next reconcile starts
	 * are one request (coalesced with a pending operator request too) */
	e->plugin_request = true;
	election_step(e);
}

void election_control_reconcile_started(struct election *e)
{
	e->resume_reconcile = false;
	e->plugin_request = false;
	e->request_covered = e->request_rev;
}

void election_control_reconcile_finished(struct election *e, int err, const char *msg)
{
	/* a retry of the same request (a failed first reconcile of the term
	 * is retried with backoff) replaces the result still to be written */
	if (e->request_covered <= e->served_rev ||
	    (e->served_pending && e->request_covered < e->served_pending_rev))
		return;
	e->served_pending = true;
	e->served_pending_rev = e->request_covered;
	e->served_pending_ok = err == 0;
	free(e->served_pending_error);
	e->served_pending_error = NULL;
	if (err != 0)
		e->served_pending_error = strdup(msg && *msg ? msg : etcd_strerror(err));
}

static void election_operator_on_served_written(struct etcd_client *c, int err, const struct etcd_response *r,
                              void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		/* idempotent: written again (the same request revision) */
		election_retry_later(e, "reconcile acknowledgement", err);
		return;
	}
	if (!r->succeeded) {
		election_depose(e, false, "fenced write failed: no longer leader");
		e->my_rev = 0;
		election_step(e);
		return;
	}
	if (e->served_pending_rev > e->served_rev) {
		/* the outcome with the revision: this answer may come before the
		 * watch shows the record, and a requester on this node reads
		 * all three at once */
		e->served_rev = e->served_pending_rev;
		e->served_ok = e->served_pending_ok;
		free(e->served_error);
		e->served_error = e->served_pending_error ? election_dup_printable(e->served_pending_error, 256)
		                                          : NULL;
	}
	e->served_pending = false;
	election_step(e);
}

bool election_control_write_served(struct election *e)
{
	if (!e->served_pending || e->op != OP_NONE)
		return false;
	assert(e->leading && !e->draining && e->my_rev != 0);
	Leasehold__ReconcileServed s = LEASEHOLD__RECONCILE_SERVED__INIT;
	s.request_revision = e->served_pending_rev;
	s.node = e->node_id;
	s.fencing_token = e->my_rev;
	s.ok = e->served_pending_ok;
	s.error = e->served_pending_error ? e->served_pending_error : (char *)"";
	s.at_unix = (int64_t)time(NULL);
	size_t n = leasehold__reconcile_served__get_packed_size(&s);
	uint8_t *v = malloc(n ? n : 1);
	if (!v)
		return false;
	leasehold__reconcile_served__pack(&s, v);
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                           .key = e->my_key, .key_len = kl, .number = e->my_rev};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = e->k_served, .key_len = strlen(e->k_served),
	                      .value = v, .value_len = n};
	election_op_start(e, OP_LEAD);
	int r = etcd_txn(e->etcd, &cmp, 1, &put, 1, NULL, 0, NULL, election_operator_on_served_written, e, &e->call);
	free(v);
	if (r < 0) {
		election_op_done(e);
		election_retry_later(e, "reconcile acknowledgement", r);
	}
	return true;
}

/* ---- operator verbs ---- */

/* what a verb's etcd call carries back; it touches no election */
struct verb_ctx {
	uint32_t magic; /* VERB_CTX_MAGIC */
	void (*done)(void *ud, int err);
	void (*done_rev)(void *ud, int err, int64_t rev);
	void (*done_hist)(void *ud, int err, const struct election_term *t, size_t n);
	void *ud;
};

static void election_operator_on_verb(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct verb_ctx *v = ud;
	CHECK_OBJ(v, VERB_CTX_MAGIC);
	if (v->done)
		v->done(v->ud, err);
	else
		v->done_rev(v->ud, err, err < 0 ? 0 : r->header.revision);
	v->magic = 0;
	free(v);
}

static struct verb_ctx *election_operator_verb_new(void *ud)
{
	struct verb_ctx *v = calloc(1, sizeof(*v));
	if (v) {
		v->magic = VERB_CTX_MAGIC;
		v->ud = ud;
	}
	return v;
}

int election_pause_at(struct etcd_client *c, const char *prefix, const char *name,
                      const char *by, bool pause, void (*done)(void *ud, int err), void *ud,
                      char *err, size_t err_len)
{
	char *key = election_operator_key_join(prefix, name, "paused");
	struct verb_ctx *v = key ? election_operator_verb_new(ud) : NULL;
	if (!v) {
		free(key);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	v->done = done;
	int r;
	if (pause) {
		Leasehold__Pause p = LEASEHOLD__PAUSE__INIT;
		p.node = (char *)by;
		p.at_unix = (int64_t)time(NULL);
		uint8_t buf[256];
		size_t n = leasehold__pause__get_packed_size(&p);
		if (n > sizeof(buf)) {
			free(v);
			free(key);
			snprintf(err, err_len, "node id too long");
			return -EINVAL;
		}
		leasehold__pause__pack(&p, buf);
		struct etcd_op op = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key),
		                     .value = buf, .value_len = n};
		r = etcd_put(c, &op, NULL, election_operator_on_verb, v, NULL);
	} else {
		struct etcd_op op = {.type = ETCD_OP_DELETE, .key = key, .key_len = strlen(key)};
		r = etcd_delete(c, &op, NULL, election_operator_on_verb, v, NULL);
	}
	free(key);
	if (r < 0) {
		free(v);
		snprintf(err, err_len, "%s", etcd_strerror(r));
		return r;
	}
	return 0;
}

int election_pause(struct election *e, bool pause, void (*done)(void *ud, int err), void *ud,
                   char *err, size_t err_len)
{
	int r = election_pause_at(e->etcd, e->prefix, e->name, e->node_id, pause, done, ud, err,
	                          err_len);
	if (r == 0)
		log_warn("election", "%s: %s on an operator's request", e->name,
		         pause ? "pausing (cluster-wide)" : "resuming (cluster-wide)");
	return r;
}

int election_request_reconcile_at(struct etcd_client *c, const char *prefix, const char *name,
                                  const char *by, void (*done)(void *ud, int err, int64_t rev),
                                  void *ud, char *err, size_t err_len)
{
	char *key = election_operator_key_join(prefix, name, "reconcile-request");
	struct verb_ctx *v = key ? election_operator_verb_new(ud) : NULL;
	if (!v) {
		free(key);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	v->done_rev = done;
	Leasehold__ReconcileRequest q = LEASEHOLD__RECONCILE_REQUEST__INIT;
	q.node = (char *)by;
	q.at_unix = (int64_t)time(NULL);
	uint8_t buf[256];
	size_t n = leasehold__reconcile_request__get_packed_size(&q);
	if (n > sizeof(buf)) {
		free(v);
		free(key);
		snprintf(err, err_len, "node id too long");
		return -EINVAL;
	}
	leasehold__reconcile_request__pack(&q, buf);
	struct etcd_op op = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = buf,
	                     .value_len = n};
	int r = etcd_put(c, &op, NULL, election_operator_on_verb, v, NULL);
	free(key);
	if (r < 0) {
		free(v);
		snprintf(err, err_len, "%s", etcd_strerror(r));
		return r;
	}
	return 0;
}

int election_request_reconcile(struct election *e, void (*done)(void *ud, int err, int64_t rev),
                               void *ud, char *err, size_t err_len)
{
	if (!e->synced) {
		snprintf(err, err_len, "plugin '%s' has not read its state from etcd yet; try again",
		         e->name);
		return -EAGAIN;
	}
	if (e->paused) {
		snprintf(err, err_len, "plugin '%s' is paused: no reconcile runs until `leaseholdctl "
		         "resume %s`", e->name, e->name);
		return -EBUSY;
	}
	int r = election_request_reconcile_at(e->etcd, e->prefix, e->name, e->node_id, done, ud,
	                                      err, err_len);
	if (r == 0)
		log_info("election", "%s: reconcile requested by an operator", e->name);
	return r;
}

/* ---- the term history ---- */

const char *election_term_end_name(int reason)
{
	switch (reason) {
	case LEASEHOLD__TERM__END_REASON__END_NONE:
		return "";
	case LEASEHOLD__TERM__END_REASON__END_SHUTDOWN:
		return "shutdown";
	case LEASEHOLD__TERM__END_REASON__END_NEWER_RELEASE:
		return "newer-release";
	case LEASEHOLD__TERM__END_REASON__END_RELOAD:
		return "reload";
	case LEASEHOLD__TERM__END_REASON__END_ROLE_REMOVED:
		return "role-removed";
	case LEASEHOLD__TERM__END_REASON__END_LEASE_LOST:
		return "lease-lost";
	case LEASEHOLD__TERM__END_REASON__END_PLUGIN_FAILED:
		return "plugin-failed";
	case LEASEHOLD__TERM__END_REASON__END_PLUGIN_REMOVED:
		return "plugin-removed";
	case LEASEHOLD__TERM__END_REASON__END_SWITCHOVER:
		return "switchover";
	case LEASEHOLD__TERM__END_REASON__END_UNHEALTHY:
		return "unhealthy";
	}
	return "unknown";
}

static void election_operator_release_pb(struct release r, Leasehold__Release *ret)
{
	*ret = (Leasehold__Release)LEASEHOLD__RELEASE__INIT;
	ret->major = r.major;
	ret->minor = r.minor;
	ret->patch = r.patch;
}

/* election_operator_term_encode - our term's record; end_reason END_NONE = still leading */
static int election_operator_term_encode(const struct election *e, int64_t token, int end_reason,
                       const char *detail, uint8_t **ret, size_t *ret_len)
{
	Leasehold__Release rel;
	election_operator_release_pb(e->rel.release, &rel);
	Leasehold__Term t = LEASEHOLD__TERM__INIT;
	t.node = e->node_id;
	t.release = &rel;
	t.fencing_token = token;
	t.start_unix = e->term_start_unix;
	if (end_reason != LEASEHOLD__TERM__END_REASON__END_NONE) {
		t.end_reason = (Leasehold__Term__EndReason)end_reason;
		t.end_unix = (int64_t)time(NULL);
		t.end_detail = (char *)(detail ? detail : "");
	}
	size_t n = leasehold__term__get_packed_size(&t);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	leasehold__term__pack(&t, b);
	*ret = b;
	*ret_len = n;
	return 0;
}

/* election_operator_term_end_reason - why our term ends, from what the controller knows */
static int election_operator_term_end_reason(struct election *e, const char **ret_detail)
{
	*ret_detail = NULL;
	if (e->failed) {
		*ret_detail = e->fail_reason;
		return LEASEHOLD__TERM__END_REASON__END_PLUGIN_FAILED;
	}
	/* election_stop (no lease revocation follows): the plugin is removed
	 * from this node; election_stop_revoking: the daemon shuts down (for
	 * good with `leaseholdctl leave`) */
	if (e->stopping)
		return e->stop_leave && !e->stop_last ? LEASEHOLD__TERM__END_REASON__END_PLUGIN_REMOVED
		                                      : LEASEHOLD__TERM__END_REASON__END_SHUTDOWN;
	if (e->swap.pending)
		return LEASEHOLD__TERM__END_REASON__END_RELOAD;
	if (e->held) {
		*ret_detail = e->hold_reason;
		return LEASEHOLD__TERM__END_REASON__END_ROLE_REMOVED;
	}
	if (!election_rule_ours(e) && e->health.unhealthy && election_rule_ours_as(e, false)) {
		snprintf(e->term_health_detail, sizeof(e->term_health_detail),
		         "%u reconciles failed in a row (last: %s)", e->health.failures,
		         e->health_last_error);
		*ret_detail = e->term_health_detail;
		return LEASEHOLD__TERM__END_REASON__END_UNHEALTHY;
	}
	if (!election_rule_ours(e))
		return LEASEHOLD__TERM__END_REASON__END_NEWER_RELEASE;
	if ((*ret_detail = election_switchover_ended_us(e)))
		return LEASEHOLD__TERM__END_REASON__END_SWITCHOVER;
	return LEASEHOLD__TERM__END_REASON__END_LEASE_LOST;
}

/* election_operator_term_count - our term e->my_rev ends for
 * e->term_end_reason: count it once */
static void election_operator_term_count(struct election *e)
{
	if (!e->my_rev || e->term_counted_token == e->my_rev)
		return;
	e->term_counted_token = e->my_rev;
	int r = e->term_end_reason;
	e->terms_ended[r > 0 && r < ELECTION_TERM_END_SLOTS ? r : 0]++;
}

uint64_t election_terms_ended(const struct election *e, int reason)
{
	return reason >= 0 && reason < ELECTION_TERM_END_SLOTS ? e->terms_ended[reason] : 0;
}

void election_term_end(struct election *e)
{
	const char *detail;
	if (e->term_end_written_token == e->my_rev ||
	    (e->term_end_call && e->term_end_call->token == e->my_rev))
		return; /* recorded ahead of the revocation (election_term_leaving) */
	e->term_end_reason = election_operator_term_end_reason(e, &detail);
	snprintf(e->term_end_detail, sizeof(e->term_end_detail), "%s", detail ? detail : "");
	election_operator_term_count(e);
	e->term_end_token = e->my_rev;
	e->term_end_pending = true;
	loop_timer_disarm(e->term_timer);
	if (e->term) {
		/* a start record still in flight: the resign txn writes the
		 * whole record (and a late start write fails its fence) */
		etcd_call_cancel(e->term->call);
		election_operator_term_ctx_free(e->term);
	}
}

bool election_term_end_op(struct election *e, struct etcd_op *ret_op, uint8_t **ret_buf,
                          char *key_buf, size_t key_len)
{
	if (!e->term_end_pending || e->term_end_token != e->my_rev || !e->my_rev)
		return false;
	size_t n;
	if (election_operator_term_encode(e, e->term_end_token, e->term_end_reason, e->term_end_detail, ret_buf, &n) < 0)
		return false;
	election_operator_term_key(e, e->term_end_token, key_buf, key_len);
	*ret_op = (struct etcd_op){.type = ETCD_OP_PUT, .key = key_buf, .key_len = strlen(key_buf),
	                           .value = *ret_buf, .value_len = n};
	return true;
}

void election_term_end_written(struct election *e)
{
	if (e->term_end_pending)
		e->term_end_written_token = e->term_end_token;
	e->term_end_pending = false;
}

static void election_operator_on_term_end_written(struct etcd_client *cl, int err, const struct etcd_response *r,
                                void *ud)
{
	(void)cl;
	struct term_ctx *c = ud;
	CHECK_OBJ(c, TERM_CTX_MAGIC);
	struct election *e = c->e;
	CHECK_OBJ(e, ELECTION_MAGIC);
	int64_t token = c->token;
	election_operator_term_ctx_free(c);
	if (err == 0 && r->succeeded) {
		e->term_end_written_token = token;
		e->term_end_pending = false;
	} else if (e->my_rev == token) {
		/* the resign txn carries it instead */
		e->term_end_token = token;
		e->term_end_pending = true;
	}
	election_step(e);
}

void election_term_leaving(struct election *e)
{
	if (!e->stopping || !e->stop_last || e->stop_leave || e->swap.pending || !e->my_rev ||
	    e->term_end_call)
		return;
	const char *detail;
	e->term_end_reason = election_operator_term_end_reason(e, &detail);
	snprintf(e->term_end_detail, sizeof(e->term_end_detail), "%s", detail ? detail : "");
	election_operator_term_count(e);
	e->term_end_token = e->my_rev;
	e->term_end_pending = false;
	uint8_t *v;
	size_t n;
	char key[512];
	if (election_operator_term_encode(e, e->my_rev, e->term_end_reason, e->term_end_detail, &v, &n) < 0)
		return;
	election_operator_term_key(e, e->my_rev, key, sizeof(key));
	struct term_ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		free(v);
		return;
	}
	c->magic = TERM_CTX_MAGIC;
	c->e = e;
	c->token = e->my_rev;
	/* The revocation does not wait for this record (it would add a write
	 * to the handover's path), so it is not fenced by our election key,
	 * which the revocation deletes: it compares the record itself, as we
	 * last wrote it (or absent, the whole record then). A successor that
	 * completed it as lease-lost meanwhile keeps its word. A start write
	 * still in flight compares the record absent, so whichever lands
	 * second fails: the end is then the successor's. */
	struct etcd_compare cmp = {.target = e->term_rec_rev ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
	                           .result = ETCD_CMP_EQUAL, .key = key, .key_len = strlen(key),
	                           .number = e->term_rec_rev};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = v,
	                      .value_len = n};
	loop_timer_disarm(e->term_timer); /* a deferred start: this is the whole record */
	e->term_end_call = c;
	int r = etcd_txn(e->etcd, &cmp, 1, &put, 1, NULL, 0, NULL, election_operator_on_term_end_written, c, &c->call);
	free(v);
	if (r < 0)
		election_operator_term_ctx_free(c);
}

static void election_operator_term_begin_read(struct election *e);

static void election_operator_on_term_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (e->leading && !e->term && e->my_rev)
		election_operator_term_begin_read(e);
}

/* the txn of a term start failed or could not be sent: try again while the
 * term lasts (a later read sees what the last attempt did) */
static void election_operator_term_retry(struct election *e, const char *what, int err)
{
	log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "election",
	        "%s: term history %s failed: %s; retrying", e->name, what, etcd_strerror(err));
	loop_timer_arm_in(e->term_timer, 500 * LOOP_NS_PER_MS);
}

static struct election *election_operator_term_ctx_done(struct term_ctx *c)
{
	CHECK_OBJ(c, TERM_CTX_MAGIC);
	struct election *e = c->e;
	CHECK_OBJ(e, ELECTION_MAGIC);
	bool current = e->term == c && e->leading && e->my_rev == c->token;
	election_operator_term_ctx_free(c);
	return current ? e : NULL;
}

static void election_operator_on_term_written(struct etcd_client *cl, int err, const struct etcd_response *r,
                            void *ud)
{
	(void)cl;
	bool puts_ours = ((struct term_ctx *)ud)->puts_ours;
	struct election *e = election_operator_term_ctx_done(ud);
	if (!e)
		return;
	if (err < 0) {
		election_operator_term_retry(e, "write", err);
		return;
	}
	if (!r->succeeded) {
		/* our key is gone (the fence) or the previous record changed
		 * since the read: read again while we still lead */
		election_operator_term_retry(e, "write", -ESTALE);
		return;
	}
	if (puts_ours)
		e->term_rec_rev = r->header.revision; /* the txn's revision: our put's */
	log_debug("election", "%s: term %" PRId64 " recorded in the history", e->name, e->my_rev);
}

/* election_operator_term_is_ours - the record at our term's key is the one we wrote (an
 * earlier attempt whose answer was lost); anything else there is replaced */
static bool election_operator_term_is_ours(const struct election *e, const struct etcd_kv *kv)
{
	Leasehold__Term *t = leasehold__term__unpack(NULL, kv->value_len, kv->value);
	bool ours = t && t->fencing_token == e->my_rev && t->node &&
	            strcmp(t->node, e->node_id) == 0;
	if (t)
		leasehold__term__free_unpacked(t, NULL);
	return ours;
}

/* The term-history txn a new leader sends after its read: guarded by its
 * election key, it puts its own start record, closes the record of a
 * predecessor that could not, and trims the oldest records. */
struct term_txn {
	struct etcd_compare cmps[3];
	struct etcd_op ops[2 + 32];
	uint8_t *bufs[2];   /* the two records it puts, owned */
	char mine[512];	    /* our record's key */
	char prev_key[512]; /* the predecessor's, when its record is closed */
	size_t n_cmps, n_ops;
};

/* election_operator_term_scan - in the read answer r, what is at our key
 * (ret_have_mine: our record; ret_mine_rev: its mod revision, 0 = nothing)
 * and the newest record before ours (keys sort by token: the last one below
 * our key; NULL = none) */
static const struct etcd_kv *election_operator_term_scan(struct election *e,
							 const struct etcd_response *r,
							 const char *mine, bool *ret_have_mine,
							 int64_t *ret_mine_rev)
{
	const struct etcd_kv *prev = NULL;
	*ret_have_mine = false;
	*ret_mine_rev = 0;
	for (size_t i = 0; i < r->n_kvs; i++) {
		const struct etcd_kv *kv = &r->kvs[i];
		if (kv->key_len == strlen(mine) && memcmp(kv->key, mine, kv->key_len) == 0) {
			*ret_have_mine = election_operator_term_is_ours(e, kv);
			*ret_mine_rev = kv->mod_revision;
			if (*ret_have_mine)
				e->term_rec_rev = kv->mod_revision;
		} else if (kv->key_len <= strlen(mine) && memcmp(kv->key, mine, kv->key_len) < 0)
			prev = kv;
	}
	return prev;
}

/* election_operator_term_add_start - our start record, in place of what
 * the read found at our key. Returns 0 or -ENOMEM. */
static int election_operator_term_add_start(struct election *e, struct term_txn *tx,
					    int64_t mine_rev)
{
	size_t n;
	if (election_operator_term_encode(e, e->my_rev, LEASEHOLD__TERM__END_REASON__END_NONE, NULL,
					  &tx->bufs[0], &n) < 0)
		return -ENOMEM;
	tx->ops[tx->n_ops++] = (struct etcd_op){.type = ETCD_OP_PUT,
						.key = tx->mine,
						.key_len = strlen(tx->mine),
						.value = tx->bufs[0],
						.value_len = n};
	/* still as read (absent, or a record that is not ours, which is
	 * replaced): an end record written meanwhile (a shutdown's, beside the
	 * revocation) is not replaced by the start */
	tx->cmps[tx->n_cmps++] =
	    (struct etcd_compare){.target = mine_rev ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
				  .result = ETCD_CMP_EQUAL,
				  .key = tx->mine,
				  .key_len = strlen(tx->mine),
				  .number = mine_rev};
	return 0;
}

/* election_operator_term_add_lost - a predecessor's record that still has
 * no end: its leader could not record it (its key went without a resign:
 * lease expired, session lost, key deleted), so the successor closes it as
 * lost, if it is unchanged since the read. A record that does not decode is
 * left as it is (shown as such); out of memory leaves it open. */
static void election_operator_term_add_lost(struct term_txn *tx, const struct etcd_kv *prev)
{
	Leasehold__Term *t = leasehold__term__unpack(NULL, prev->value_len, prev->value);
	if (!t)
		return;
	if (t->end_reason != LEASEHOLD__TERM__END_REASON__END_NONE)
		goto out;
	char *own_detail = t->end_detail; /* freed with t */
	t->end_reason = LEASEHOLD__TERM__END_REASON__END_LEASE_LOST;
	t->end_unix = (int64_t)time(NULL);
	t->end_detail = (char *)"observed by the successor";
	size_t n = leasehold__term__get_packed_size(t);
	tx->bufs[1] = malloc(n ? n : 1);
	if (tx->bufs[1])
		leasehold__term__pack(t, tx->bufs[1]);
	t->end_detail = own_detail;
	if (!tx->bufs[1])
		goto out;
	snprintf(tx->prev_key, sizeof(tx->prev_key), "%.*s", (int)prev->key_len,
		 (const char *)prev->key);
	tx->ops[tx->n_ops++] = (struct etcd_op){.type = ETCD_OP_PUT,
						.key = tx->prev_key,
						.key_len = strlen(tx->prev_key),
						.value = tx->bufs[1],
						.value_len = n};
	tx->cmps[tx->n_cmps++] = (struct etcd_compare){.target = ETCD_CMP_MOD,
						       .result = ETCD_CMP_EQUAL,
						       .key = tx->prev_key,
						       .key_len = strlen(tx->prev_key),
						       .number = prev->mod_revision};
out:
	leasehold__term__free_unpacked(t, NULL);
}

/* election_operator_term_send - send tx (tx keeps owning its buffers).
 * Returns 0 or -errno. */
static int election_operator_term_send(struct election *e, struct term_txn *tx, bool puts_ours)
{
	struct term_ctx *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->magic = TERM_CTX_MAGIC;
	w->e = e;
	w->token = e->my_rev;
	w->puts_ours = puts_ours;
	e->term = w;
	int rc = etcd_txn(e->etcd, tx->cmps, tx->n_cmps, tx->ops, tx->n_ops, NULL, 0, NULL,
			  election_operator_on_term_written, w, &w->call);
	if (rc < 0)
		election_operator_term_ctx_free(w);
	return rc;
}

static void election_operator_on_term_read(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct term_ctx *c = ud;
	struct election *e = election_operator_term_ctx_done(c);
	if (!e)
		return;
	if (err < 0) {
		election_operator_term_retry(e, "read", err);
		return;
	}
	struct term_txn tx = {.n_cmps = 0};
	bool have_mine;
	int64_t mine_rev;
	election_operator_term_key(e, e->my_rev, tx.mine, sizeof(tx.mine));
	const struct etcd_kv *prev =
	    election_operator_term_scan(e, r, tx.mine, &have_mine, &mine_rev);
	tx.cmps[tx.n_cmps++] = (struct etcd_compare){.target = ETCD_CMP_CREATE,
						     .result = ETCD_CMP_EQUAL,
						     .key = e->my_key,
						     .key_len = strlen(e->my_key),
						     .number = e->my_rev};
	int rc = 0;
	if (!have_mine && (rc = election_operator_term_add_start(e, &tx, mine_rev)) < 0)
		goto out;
	if (prev)
		election_operator_term_add_lost(&tx, prev);
	/* trim: keep the newest ELECTION_HISTORY_MAX (ours included) */
	size_t total = r->n_kvs + (have_mine ? 0 : 1);
	for (size_t i = 0; total > ELECTION_HISTORY_MAX && i < r->n_kvs && tx.n_ops < 2 + 32; i++) {
		tx.ops[tx.n_ops++] = (struct etcd_op){
		    .type = ETCD_OP_DELETE, .key = r->kvs[i].key, .key_len = r->kvs[i].key_len};
		total--;
	}
	if (tx.n_ops > 0)
		rc = election_operator_term_send(e, &tx, !have_mine);
out:
	free(tx.bufs[0]);
	free(tx.bufs[1]);
	if (rc < 0)
		election_operator_term_retry(e, "write", rc);
}

static void election_operator_term_begin_read(struct election *e)
{
	struct term_ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		election_operator_term_retry(e, "read", -ENOMEM);
		return;
	}
	c->magic = TERM_CTX_MAGIC;
	c->e = e;
	c->token = e->my_rev;
	uint8_t end[512];
	size_t kl = strlen(e->k_terms);
	size_t el = etcd_prefix_end(e->k_terms, kl, end);
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = e->k_terms, .key_len = kl,
	                     .range_end = end, .range_end_len = el};
	e->term = c;
	int r = etcd_range(e->etcd, &op, NULL, election_operator_on_term_read, c, &c->call);
	if (r < 0) {
		election_operator_term_ctx_free(c);
		election_operator_term_retry(e, "read", r);
	}
}

void election_term_begin(struct election *e)
{
	e->term_start_unix = (int64_t)time(NULL);
	e->term_rec_rev = 0;
	e->term_end_pending = false;
	if (e->term) {
		etcd_call_cancel(e->term->call);
		election_operator_term_ctx_free(e->term);
	}
	/* Not now: the record's read and write would go to etcd just ahead of
	 * the plugin's first fenced txn, on the handover's path. They go once
	 * the term's first reconcile returned (election_term_record), or after
	 * TERM_RECORD_DELAY_MS for a first reconcile that takes longer; the
	 * record carries the start time taken here either way, and a term
	 * that ends first writes its whole record with its end. */
	loop_timer_arm_in(e->term_timer, TERM_RECORD_DELAY_MS * LOOP_NS_PER_MS);
}

void election_term_record(struct election *e)
{
	if (loop_timer_armed(e->term_timer) && e->leading && !e->term && e->my_rev) {
		loop_timer_disarm(e->term_timer);
		election_operator_term_begin_read(e);
	}
}

/* ---- reading the history (the CLI) ---- */

static void election_operator_on_history(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct verb_ctx *v = ud;
	CHECK_OBJ(v, VERB_CTX_MAGIC);
	struct election_term *terms = NULL;
	Leasehold__Term **dec = NULL;
	char **strs = NULL; /* node and detail of each, printable copies */
	size_t n = err < 0 ? 0 : r->n_kvs;
	if (n > 0) {
		terms = calloc(n, sizeof(*terms));
		dec = calloc(n, sizeof(*dec));
		strs = calloc(2 * n, sizeof(*strs));
		if (!terms || !dec || !strs) {
			err = -ENOMEM;
			n = 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		/* newest first: keys sort by token */
		const struct etcd_kv *kv = &r->kvs[r->n_kvs - 1 - i];
		struct election_term *t = &terms[i];
		Leasehold__Term *p = leasehold__term__unpack(NULL, kv->value_len, kv->value);
		dec[i] = p;
		t->start_rev = kv->create_revision;
		t->end_reason = "";
		t->end_detail = "";
		t->node = "";
		/* the token from the key, in case the value does not decode */
		for (size_t k = kv->key_len > TERM_KEY_DIGITS ? kv->key_len - TERM_KEY_DIGITS : 0;
		     k < kv->key_len && kv->key[k] >= '0' && kv->key[k] <= '9'; k++)
			t->token = t->token * 10 + (kv->key[k] - '0');
		if (!p || !p->release)
			continue;
		t->valid = true;
		strs[2 * i] = election_dup_printable(p->node, 128);
		t->node = strs[2 * i] ? strs[2 * i] : "";
		t->release = (struct release){p->release->major, p->release->minor, p->release->patch};
		t->token = p->fencing_token;
		t->start_unix = p->start_unix;
		if (p->end_reason != LEASEHOLD__TERM__END_REASON__END_NONE) {
			t->end_rev = kv->mod_revision;
			t->end_unix = p->end_unix;
			t->end_reason = election_term_end_name(p->end_reason);
			strs[2 * i + 1] = election_dup_printable(p->end_detail, 256);
			t->end_detail = strs[2 * i + 1] ? strs[2 * i + 1] : "";
		}
	}
	v->done_hist(v->ud, err, terms, n);
	for (size_t i = 0; i < n; i++) {
		if (dec[i])
			leasehold__term__free_unpacked(dec[i], NULL);
		free(strs[2 * i]);
		free(strs[2 * i + 1]);
	}
	free(strs);
	free(dec);
	free(terms);
	v->magic = 0;
	free(v);
}

int election_history_at(struct etcd_client *c, const char *prefix, const char *name,
                        void (*done)(void *ud, int err, const struct election_term *terms,
                                     size_t n),
                        void *ud)
{
	char *key = election_operator_key_join(prefix, name, "term-history/");
	struct verb_ctx *v = key ? election_operator_verb_new(ud) : NULL;
	if (!v) {
		free(key);
		return -ENOMEM;
	}
	v->done_hist = done;
	uint8_t end[512];
	size_t kl = strlen(key);
	if (kl > sizeof(end)) {
		free(key);
		free(v);
		return -EINVAL;
	}
	size_t el = etcd_prefix_end(key, kl, end);
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = key, .key_len = kl,
	                     .range_end = end, .range_end_len = el};
	int r = etcd_range(c, &op, NULL, election_operator_on_history, v, NULL);
	free(key);
	if (r < 0)
		free(v);
	return r;
}

int election_history(struct election *e,
                     void (*done)(void *ud, int err, const struct election_term *terms, size_t n),
                     void *ud)
{
	return election_history_at(e->etcd, e->prefix, e->name, done, ud);
}
