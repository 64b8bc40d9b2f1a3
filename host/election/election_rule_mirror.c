/* SPDX-License-Identifier: MIT */
/*
 * election_rule_mirror.c - the release rule (election_release_rule.h) fed
 * from this election's mirror: the member records as counted, this node's
 * own record with its current health, the status and the pin; whether this
 * node may campaign and, when not, why. Loop thread.
 */
#include "config.h"

#include <string.h>

#include "election/election_campaign_order.h"
#include "election/election_internal.h"

struct rule_release election_local_rule_release(const struct election *e, bool unhealthy)
{
	struct rule_release r = election_rule_release_of(&e->rel);
	r.unhealthy = unhealthy;
	r.unhealthy_until = unhealthy ? e->unhealthy_until_unix : 0;
	return r;
}

#define RULE_RC_MAX 32

/* the member records for the rule: our own as mirrored may still say
 * another health than ours (the write that publishes it follows, or is
 * the resign txn): it counts with our health, else a stale "healthy" of
 * our own would make us withdraw where nobody else can lead */
static const struct relcount *election_rule_rc(const struct election *e,
                                               const struct rule_release *local,
                                               struct relcount *buf, size_t *ret_n)
{
	const struct member_ent *me = election_member_find(e, e->node_id);
	*ret_n = e->n_rc;
	if (!me || !me->valid || me->rr.unhealthy == local->unhealthy || e->n_rc >= RULE_RC_MAX)
		return e->rc;
	memcpy(buf, e->rc, e->n_rc * sizeof(*buf));
	for (size_t i = 0; i < e->n_rc; i++)
		if (buf[i].count && release_rule_equal(&buf[i].rr, &me->rr)) {
			buf[i].count--;
			break;
		}
	struct rule_release mine = me->rr;
	mine.unhealthy = local->unhealthy;
	buf[(*ret_n)++] = (struct relcount){.rr = mine, .count = 1};
	return buf;
}

/* the mirrored status as the rule reads it */
static struct rule_status election_rule_status(const struct election *e)
{
	return (struct rule_status){.valid = e->status.present && e->status.valid,
	                            .version = e->status.version,
	                            .min_compatible = e->status.min_compatible};
}

/* the answer from the mirror, this node counting as healthy or not */
static void election_rule_answer_as(const struct election *e, bool unhealthy,
                                    struct rule_answer *ret)
{
	struct rule_release local = election_local_rule_release(e, unhealthy);
	struct rule_status st = election_rule_status(e);
	struct relcount buf[RULE_RC_MAX];
	size_t n;
	const struct relcount *rc = election_rule_rc(e, &local, buf, &n);
	release_rule_decide_pinned(&local, rc, n, e->members.n_invalid > 0, &st, &e->pin, ret);
}

void election_rule_answer(const struct election *e, struct rule_answer *ret)
{
	election_rule_answer_as(e, e->health.unhealthy, ret);
}

bool election_rule_ours_as(const struct election *e, bool unhealthy)
{
	struct rule_answer a;
	election_rule_answer_as(e, unhealthy, &a);
	struct rule_release local = election_local_rule_release(e, unhealthy);
	return release_rule_may_campaign(&a, &local);
}

size_t election_rollout_blockers(const struct election *e)
{
	struct rule_answer a;
	election_rule_answer(e, &a);
	if (a.basis != RULE_NONE && release_cmp(a.release, a.newest) == 0)
		return 0;
	size_t n = 0;
	for (size_t i = 0; i < e->n_rc; i++)
		if (release_less(e->rc[i].rr.release, a.newest_min_compatible))
			n += e->rc[i].count;
	return n;
}

bool election_rule_ours(const struct election *e)
{
	return election_rule_ours_as(e, e->health.unhealthy);
}

const char *election_rule_held_back(struct election *e)
{
	struct rule_answer a;
	election_rule_answer(e, &a);
	struct rule_release local = election_local_rule_release(e, e->health.unhealthy);
	if (release_rule_may_campaign(&a, &local))
		return NULL;
	if (e->health.unhealthy && election_rule_ours_as(e, false)) {
		election_backoff_explain(e, e->held_back_buf, sizeof(e->held_back_buf));
		return e->held_back_buf;
	}
	return release_rule_explain(&a, e->rel.release, e->held_back_buf, sizeof(e->held_back_buf));
}

bool election_rule_successor_restriction(const struct election *e,
                                         const struct rule_release *incoming,
                                         struct rule_status *ret)
{
	const struct member_ent *me = election_member_find(e, e->node_id);
	if (!e->synced || !me || !me->valid || e->n_rc >= RULE_RC_MAX)
		return false;
	struct relcount buf[RULE_RC_MAX];
	size_t n = 0;
	bool removed = false;
	for (size_t i = 0; i < e->n_rc; i++) {
		buf[n] = e->rc[i];
		if (!removed && buf[n].count && release_rule_equal(&buf[n].rr, &me->rr)) {
			buf[n].count--;
			removed = true;
		}
		n++;
	}
	if (!removed)
		return false;
	buf[n++] = (struct relcount){.rr = *incoming, .count = 1};
	struct rule_status st = election_rule_status(e);
	return release_rule_successor_restriction(buf, n, e->members.n_invalid > 0, &st, &e->pin,
	                                          incoming, ret);
}

/* ---- who campaigns first (election_campaign_order.h) ---- */

const char *election_campaign_first_other(const struct election *e)
{
	struct rule_answer a;
	election_rule_answer(e, &a);
	/* a node of the answer's release is in line already: it leads or
	 * will, and a candidate queues behind it at once */
	for (size_t i = 0; i < e->n_cands; i++) {
		const struct member_ent *m = election_member_find(e, e->cands[i].node_id);
		if (m && m->valid && release_rule_may_campaign(&a, &m->rr))
			return NULL;
	}
	const struct member_ent *first = NULL;
	struct campaign_member fc = {0};
	for (size_t b = 0; b < e->members.n_buckets; b++) {
		for (const struct member_ent *x = e->members.buckets[b]; x; x = x->next) {
			if (!x->valid)
				continue;
			struct campaign_member c = {.node_id = x->node_id, .rr = x->rr,
			                            .priority = x->priority,
			                            .alive = election_node_find(e, x->node_id) != NULL};
			if (campaign_eligible(&a, &c) && (!first || campaign_before(&c, &fc))) {
				first = x;
				fc = c;
			}
		}
	}
	return first && strcmp(first->node_id, e->node_id) != 0 ? first->node_id : NULL;
}
