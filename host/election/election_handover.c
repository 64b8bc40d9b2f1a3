/* SPDX-License-Identifier: MIT */
/*
 * election_handover.c - what a host does about a switchover request
 * (P/N/handover, written by election_switchover_request.c; proto Switchover). Decoders take
 * hostile bytes.
 *
 * Design notes
 * - The key sorts between "election/" and "members/": it lies inside the
 *   one watched range, so every host mirrors it with no second watch.
 * - The election stays the etcd recipe (the lowest election key leads).
 *   A switchover only decides who gives up its key: the leader the request
 *   names (by node and fencing token) leaves as on SIGTERM without stopping
 *   (drain, deposed, resign; the term history says "switchover"), and with
 *   a target every other candidate whose key is ahead of the target's
 *   resigns too. Each campaigns again at once: a new key sorts behind every
 *   existing one, so the target's key becomes the lowest and it wins; with
 *   no target, the next candidate in line wins. No host waits for another.
 * - The hold-back ends by itself: when the target leads (the request is
 *   satisfied), when the target's election key (the one the request names)
 *   goes (the target died or lost its session: then the lowest key leads, a
 *   normal election), or when etcd deletes the record at its deadline (its
 *   lease's TTL is the timeout: the same moment for every host).
 * - The new leader deletes the record (fenced, compared on its revision)
 *   once it leads as asked, so "a record exists" means "a switchover is in
 *   flight" for the next request. A record that does not decode is ignored
 *   until it expires; one without a lease (not written by election_switchover_request.c)
 *   would never expire, so the leader deletes it.
 * - Priority: a leader that sees a candidate (an election key) whose member
 *   record holds the leader's own release, the newest, and a strictly
 *   higher priority than the leader's writes a switchover to the highest
 *   such candidate (lowest key among equals), once per candidate key. The
 *   handover only ever goes up in priority, so it cannot go back and
 *   forth; equal priorities never move leadership. Not while paused (a
 *   pause holds leadership where it is), and not in a term an operator's
 *   switchover began (the rule does not undo the operator).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_internal.h"
#include "base/log.h"
#include "election/election_switchover_request.h"

struct priority_ctx {
	uint32_t magic; /* PRIORITY_CTX_MAGIC */
	struct election *e; /* NULL once the election is freed */
};

struct handover_ctx {
	uint32_t magic; /* HANDOVER_CTX_MAGIC */
	struct election *e;
	struct etcd_call *call;
};

int election_switchover_init(struct election *e)
{
	if (asprintf(&e->k_handover, "%s/%s/%s", e->prefix, e->name, SWITCHOVER_KEY) < 0) {
		e->k_handover = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void election_handover_ctx_free(struct handover_ctx *c)
{
	if (c->e && c->e->handover_call == c)
		c->e->handover_call = NULL;
	c->magic = 0;
	free(c);
}

void election_switchover_free(struct election *e)
{
	if (e->handover_call) {
		etcd_call_cancel(e->handover_call->call);
		election_handover_ctx_free(e->handover_call);
	}
	if (e->priority_call)
		e->priority_call->e = NULL; /* its answer only frees it */
	free(e->k_handover);
}

static void election_handover_copy_printable(char *dst, size_t len, const char *s)
{
	size_t n = s ? strnlen(s, len - 1) : 0;
	for (size_t i = 0; i < n; i++)
		dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	dst[n] = '\0';
}

static void election_handover_gone(struct election *e)
{
	if (e->handover.present)
		e->handover_ended_rev = e->handover.rev;
	memset(&e->handover, 0, sizeof(e->handover));
}

bool election_switchover_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	if (kv->key_len != strlen(e->k_handover) ||
	    memcmp(kv->key, e->k_handover, kv->key_len) != 0)
		return false;
	if (del) {
		election_handover_gone(e);
		return true;
	}
	struct handover_rec *h = &e->handover;
	if (h->present && h->rev != kv->mod_revision)
		e->handover_ended_rev = h->rev; /* replaced: the earlier request is over */
	memset(h, 0, sizeof(*h));
	h->present = true;
	h->seen = true;
	h->rev = kv->mod_revision;
	h->leased = kv->lease != 0;
	Leasehold__Switchover *s = leasehold__switchover__unpack(NULL, kv->value_len, kv->value);
	if (!s || !s->from_node || !s->from_node[0] || s->from_token <= 0 ||
	    (s->to_node && s->to_node[0] && s->to_token <= 0)) {
		log_warn("election", "%s: the switchover record does not decode; ignored until it "
		         "%s", e->name, h->leased ? "expires" : "is deleted (the leader deletes it)");
	} else {
		h->valid = true;
		election_handover_copy_printable(h->requester, sizeof(h->requester), s->requester);
		election_handover_copy_printable(h->from, sizeof(h->from), s->from_node);
		election_handover_copy_printable(h->to, sizeof(h->to), s->to_node);
		h->from_token = s->from_token;
		h->to_token = h->to[0] ? s->to_token : 0;
		h->priority = s->priority;
		log_info("election", "%s: switchover requested by %s: %s (token %" PRId64 ") hands "
		         "over to %s", e->name, h->requester[0] ? h->requester : "?", h->from,
		         h->from_token, h->to[0] ? h->to : "the next candidate");
	}
	if (s)
		leasehold__switchover__free_unpacked(s, NULL);
	return true;
}

void election_switchover_sync_begin(struct election *e)
{
	e->handover.seen = false;
}

void election_switchover_sync_end(struct election *e)
{
	if (e->handover.present && !e->handover.seen)
		election_handover_gone(e);
}

/* the target's election key as the request names it */
static bool election_handover_target_campaigns(const struct election *e)
{
	for (size_t i = 0; i < e->n_cands; i++)
		if (e->cands[i].create_rev == e->handover.to_token &&
		    strcmp(e->cands[i].node_id, e->handover.to) == 0)
			return true;
	return false;
}

/* satisfied - the leader now is what the request asked for */
static bool election_handover_satisfied(const struct election *e)
{
	const struct candidate *low = election_cand_lowest(e);
	if (!low)
		return false;
	if (e->handover.to[0])
		return strcmp(low->node_id, e->handover.to) == 0;
	return strcmp(low->node_id, e->handover.from) != 0 || low->create_rev != e->handover.from_token;
}

/* active - the request still moves candidates */
static bool election_handover_active(const struct election *e)
{
	const struct handover_rec *h = &e->handover;
	if (!h->present || !h->valid || election_handover_satisfied(e))
		return false;
	return !h->to[0] || election_handover_target_campaigns(e);
}

bool election_switchover_resign(const struct election *e)
{
	const struct handover_rec *h = &e->handover;
	if (e->my_rev && e->my_rev == e->handover_leaving)
		return true;
	if (!e->my_rev || !election_handover_active(e))
		return false;
	bool self_from = strcmp(e->node_id, h->from) == 0 && e->my_rev == h->from_token;
	if (!h->to[0])
		return self_from;
	return strcmp(e->node_id, h->to) != 0 && e->my_rev < h->to_token;
}

void election_switchover_leaving(struct election *e)
{
	const struct handover_rec *h = &e->handover;
	if (!e->my_rev || e->my_rev == e->handover_leaving || !election_switchover_resign(e))
		return;
	e->handover_leaving = e->my_rev;
	if (h->priority)
		snprintf(e->handover_detail, sizeof(e->handover_detail),
		         "priority: %s has a higher priority", h->to);
	else
		snprintf(e->handover_detail, sizeof(e->handover_detail), "requested by %s, to %s",
		         h->requester[0] ? h->requester : "?", h->to[0] ? h->to : "any other node");
}

const char *election_switchover_ended_us(struct election *e)
{
	if (!e->my_rev || e->my_rev != e->handover_leaving)
		return NULL;
	return e->handover_detail;
}

static void election_handover_on_deleted(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct handover_ctx *c = ud;
	CHECK_OBJ(c, HANDOVER_CTX_MAGIC);
	struct election *e = c->e;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_handover_ctx_free(c);
	if (err < 0) {
		/* try again on the next step; the lease ends it anyway */
		log_warn("election", "%s: cannot delete the served switchover request: %s", e->name,
		         etcd_strerror(err));
		e->handover_del_tried = 0;
		return;
	}
	if (r->succeeded)
		log_info("election", "%s: switchover request ended: this node leads", e->name);
}

static void election_handover_on_priority_requested(void *ud, int err, const char *msg, int64_t rev,
                                  const char *from)
{
	(void)from;
	struct priority_ctx *c = ud;
	CHECK_OBJ(c, PRIORITY_CTX_MAGIC);
	struct election *e = c->e;
	c->magic = 0;
	free(c);
	if (!e)
		return;
	CHECK_OBJ(e, ELECTION_MAGIC);
	e->priority_call = NULL;
	if (err < 0)
		log_info("election", "%s: no handover to the candidate of higher priority: %s", e->name,
		         msg ? msg : etcd_strerror(err));
	else
		log_info("election", "%s: handing over to a candidate of higher priority (request %"
		         PRId64 ")", e->name, rev);
}

/* election_handover_priority_step - the leader's priority rule (see the design notes) */
static void election_handover_priority_step(struct election *e)
{
	if (!e->leading || e->draining || !e->synced || e->handover.present || e->paused ||
	    e->priority_call || e->priority_skip_gen == e->gen || !election_rule_ours(e))
		return;
	const struct candidate *best = NULL;
	int32_t best_p = e->priority;
	for (size_t i = 0; i < e->n_cands; i++) {
		const struct candidate *c = &e->cands[i];
		if (strcmp(c->node_id, e->node_id) == 0)
			continue;
		const struct member_ent *m = election_member_find(e, c->node_id);
		if (!m || !m->valid || release_cmp(m->release, e->rel.release) != 0)
			continue;
		if (m->priority > best_p ||
		    (best && m->priority == best_p && c->create_rev < best->create_rev)) {
			best = c;
			best_p = m->priority;
		}
	}
	if (!best || best->create_rev == e->priority_asked_rev)
		return;
	struct priority_ctx *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return;
	pc->magic = PRIORITY_CTX_MAGIC;
	pc->e = e;
	struct switchover_request rq = {.prefix = e->prefix, .name = e->name,
	                                .requester = e->node_id, .to = best->node_id,
	                                .timeout_ms = SWITCHOVER_TIMEOUT_DEFAULT_MS,
	                                .priority = true};
	e->priority_asked_rev = best->create_rev;
	if (switchover_request_start(e->etcd, &rq, election_handover_on_priority_requested, pc) < 0) {
		pc->magic = 0;
		free(pc);
		return;
	}
	e->priority_call = pc;
	log_info("election", "%s: candidate %s has priority %" PRId32 " > ours (%" PRId32 "): "
	         "handing over once", e->name, best->node_id, best_p, e->priority);
}

void election_switchover_step(struct election *e)
{
	const struct handover_rec *h = &e->handover;
	election_handover_priority_step(e);
	if (!e->leading || e->draining || !h->present || e->handover_call ||
	    e->handover_del_tried == h->rev)
		return;
	/* a record no host can act on that never ends by itself (election_switchover_request.c
	 * binds every request to a lease): it would refuse every switchover
	 * and hold the priority rule for good, so the leader deletes it */
	bool stray = !h->valid && !h->leased;
	if (!h->valid && !stray)
		return; /* it expires */
	/* done as asked, or over: the target's key went (it died or lost its
	 * session) and a normal election made us leader */
	bool over = h->valid && h->to[0] && strcmp(h->to, e->node_id) != 0 && !election_handover_target_campaigns(e);
	if (!stray && !election_handover_satisfied(e) && !over)
		return;
	const struct candidate *low = election_cand_lowest(e);
	if (!low || low->create_rev != e->my_rev)
		return;
	struct handover_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->magic = HANDOVER_CTX_MAGIC;
	c->e = e;
	struct etcd_compare cmps[2] = {
		{.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .key = e->my_key,
		 .key_len = strlen(e->my_key), .number = e->my_rev},
		{.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .key = e->k_handover,
		 .key_len = strlen(e->k_handover), .number = h->rev},
	};
	struct etcd_op del = {.type = ETCD_OP_DELETE, .key = e->k_handover,
	                      .key_len = strlen(e->k_handover)};
	/* an operator's request we serve (to us, or to any node other than
	 * the one it moved away from): the rule does not undo it this term */
	if (!h->priority && !over && !stray)
		e->priority_skip_gen = e->gen;
	if (stray)
		log_warn("election", "%s: deleting the switchover record (revision %" PRId64 "): it "
		         "does not decode and has no lease", e->name, h->rev);
	e->handover_call = c;
	e->handover_del_tried = h->rev;
	if (etcd_txn(e->etcd, cmps, 2, &del, 1, NULL, 0, NULL, election_handover_on_deleted, c, &c->call) < 0) {
		election_handover_ctx_free(c);
		e->handover_del_tried = 0;
	}
}
