/* SPDX-License-Identifier: MIT */
/*
 * election_campaign_order.h - who campaigns first when a release's nodes
 * become able to act together: a pure function of the mirror (member
 * records, node records, the rule's answer), so that every node of the
 * release names the same one and a test can check it over every small
 * world.
 *
 * Design notes (docs/design.md "Staggered campaigns")
 * - When the rule's answer moves to a release none of whose nodes holds an
 *   election key (the last old member of a rollout upgraded, an unpin, the
 *   release in office withdrawn for its health), every node of that release
 *   would campaign in the same instant: N campaign txns, and N watch
 *   events on each of N mirrors, land where the first term begins. The
 *   first in this order campaigns at once; the others campaign a short
 *   while later (ELECTION_CAMPAIGN_STAGGER_NS), by which time the first
 *   leads and they queue behind it.
 * - Only the timing changes: who may campaign is the rule's
 *   (release_rule_may_campaign), and the election key still elects
 *   exactly one leader among whoever campaigned. A first that is not
 *   there after all (a stale node record, a mirror behind) costs the
 *   others the stagger once, never their candidacy.
 * - The order: members that may campaign under the answer and whose node
 *   record is present (their session is up), the highest candidate
 *   priority first (the node a priority handover would move the lead to
 *   anyway), then the lowest node id.
 * Threading: none; pure, any thread.
 */
#ifndef LH_ELECTION_CAMPAIGN_ORDER_H
#define LH_ELECTION_CAMPAIGN_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election/election_release_rule.h"

/* how long the others wait for the first's campaign */
#define ELECTION_CAMPAIGN_STAGGER_NS (25ull * 1000 * 1000)

/* one member as the campaign order reads it (borrowed strings) */
struct campaign_member {
	const char *node_id;
	struct rule_release rr; /* its member record */
	int32_t priority;       /* its member record's candidate priority */
	bool alive;             /* its node record is present */
};

/* campaign_eligible - m may be the first under the answer a: alive and
 * allowed to campaign by the rule */
bool campaign_eligible(const struct rule_answer *a, const struct campaign_member *m);
/* campaign_before - x goes before y: the higher priority, then the lower
 * node id (a strict total order over distinct node ids) */
bool campaign_before(const struct campaign_member *x, const struct campaign_member *y);
/* campaign_first - the index in m[0..n) of the member that campaigns
 * first under the answer a, or -1 when no member is eligible (then nobody
 * waits). The same whatever the order of m. The election folds the two
 * above over its member map instead of building the array. */
ptrdiff_t campaign_first(const struct rule_answer *a, const struct campaign_member *m, size_t n);

#endif
