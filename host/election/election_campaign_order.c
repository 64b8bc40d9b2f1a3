/* SPDX-License-Identifier: MIT */
/*
 * election_campaign_order.c - who campaigns first (election_campaign_order.h).
 */
#include "config.h"

#include <string.h>

#include "election/election_campaign_order.h"

bool campaign_eligible(const struct rule_answer *a, const struct campaign_member *m)
{
	return m->alive && release_rule_may_campaign(a, &m->rr);
}

bool campaign_before(const struct campaign_member *x, const struct campaign_member *y)
{
	if (x->priority != y->priority)
		return x->priority > y->priority;
	return strcmp(x->node_id, y->node_id) < 0;
}

ptrdiff_t campaign_first(const struct rule_answer *a, const struct campaign_member *m, size_t n)
{
	ptrdiff_t first = -1;
	for (size_t i = 0; i < n; i++) {
		if (!campaign_eligible(a, &m[i]))
			continue;
		if (first < 0 || campaign_before(&m[i], &m[first]))
			first = (ptrdiff_t)i;
	}
	return first;
}
