/* SPDX-License-Identifier: MIT */
/*
 * test_campaign_order.c - who campaigns first when a release's nodes become
 * able together (host/election/election_campaign_order.h), checked over
 * every small world rather than by examples.
 *
 * A world: one to four members, each on 1.0.0, 1.1.0 (compatible with
 * 1.0.0) or 2.0.0 (incompatible), with candidate priority 0 or 7, healthy
 * or withdrawn for a hold-down, its node record present (alive) or not;
 * the status none, 1.0.0 or 2.0.0. The rule's answer is the election's
 * (release_rule_decide over the member records). In each:
 *  1. the first is the same whatever the order in which a mirror holds
 *     the members (every permutation up to three members; rotations and
 *     the reverse of four), and the same from every member's own view;
 *  2. there is a first exactly when some alive member may campaign under
 *     the answer, and it is one: alive, allowed by the rule;
 *  3. it goes before every other such member: the highest priority, then
 *     the lowest node id;
 *  4. of the alive members the rule lets campaign, exactly one campaigns
 *     at once (the first; the others wait the stagger), so a herd is cut
 *     to one campaign and nobody allowed is left out for longer than the
 *     stagger.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "election/election_campaign_order.h"
#include "election/election_release_rule.h"

#define MAXM 4
#define NREL 3
#define NSTATE (NREL * 2 * 2 * 2) /* release x priority x health x alive */

static const struct release U[NREL] = {{1, 0, 0}, {1, 1, 0}, {2, 0, 0}};
static const int MCR[NREL] = {0, 0, 2}; /* min_compatible_release, as an index */
/* node ids out of array order, so that the id order is not the index order */
static const char *const NAMES[MAXM] = {"b", "d", "a", "c"};

static unsigned long long n_worlds, n_herds, n_none;

static struct campaign_member member_of(int k, int state)
{
	int rel = state % NREL, pri = (state / NREL) % 2, sick = (state / NREL / 2) % 2,
	    alive = state / NREL / 4;
	struct campaign_member m = {.node_id = NAMES[k], .priority = pri ? 7 : 0, .alive = alive};
	m.rr = (struct rule_release){.release = U[rel], .min_compatible = U[MCR[rel]],
	                             .min_reconciler = U[0], .declared = true,
	                             .unhealthy = sick};
	return m;
}

static size_t records_of(const struct campaign_member *m, size_t n, struct relcount *rc)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;
		while (j < k && !release_rule_equal(&rc[j].rr, &m[i].rr))
			j++;
		if (j == k)
			rc[k++] = (struct relcount){.rr = m[i].rr, .count = 0};
		rc[j].count++;
	}
	return k;
}

static const char *first_name(const struct rule_answer *a, const struct campaign_member *m,
			      size_t n)
{
	ptrdiff_t f = campaign_first(a, m, n);
	return f < 0 ? "" : m[f].node_id;
}

/* 1: the first over m in the order perm[] */
static void check_order(const struct rule_answer *a, const struct campaign_member *m, size_t n,
			const int *perm, const char *want)
{
	struct campaign_member p[MAXM];
	for (size_t i = 0; i < n; i++)
		p[i] = m[perm[i]];
	CHECK_STR_EQ(first_name(a, p, n), want);
}

static void check_permutations(const struct rule_answer *a, const struct campaign_member *m,
			       size_t n, const char *want)
{
	static const int p3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	static const int p2[2][2] = {{0, 1}, {1, 0}};
	static const int p4[5][4] = {{1, 2, 3, 0}, {2, 3, 0, 1}, {3, 0, 1, 2}, {3, 2, 1, 0},
	                             {0, 2, 1, 3}};
	if (n == 2)
		for (int i = 0; i < 2; i++)
			check_order(a, m, n, p2[i], want);
	if (n == 3)
		for (int i = 0; i < 6; i++)
			check_order(a, m, n, p3[i], want);
	if (n == 4)
		for (int i = 0; i < 5; i++)
			check_order(a, m, n, p4[i], want);
}

static void check_world(const struct campaign_member *m, size_t n, int status)
{
	struct relcount rc[MAXM];
	size_t n_rc = records_of(m, n, rc);
	struct rule_status st = {.valid = status > 0};
	if (st.valid)
		st.version = st.min_compatible = U[status == 1 ? 0 : 2];
	struct rule_answer a;
	release_rule_decide(NULL, rc, n_rc, false, &st, &a);
	n_worlds++;
	ptrdiff_t f = campaign_first(&a, m, n);
	const char *want = f < 0 ? "" : m[f].node_id;
	check_permutations(&a, m, n, want);
	size_t allowed = 0, at_once = 0;
	for (size_t k = 0; k < n; k++) {
		/* 1: member k's own view of the same records */
		struct rule_answer ak;
		release_rule_decide(&m[k].rr, rc, n_rc, false, &st, &ak);
		CHECK_STR_EQ(first_name(&ak, m, n), want);
		bool elig = campaign_eligible(&a, &m[k]);
		CHECK_INT_EQ(elig, m[k].alive && release_rule_may_campaign(&a, &m[k].rr));
		/* 3 */
		if (elig && f >= 0 && (ptrdiff_t)k != f)
			CHECK(campaign_before(&m[f], &m[k]) && !campaign_before(&m[k], &m[f]));
		if (elig) {
			allowed++;
			at_once += (ptrdiff_t)k == f; /* the others' first is another node */
		}
	}
	/* 2 */
	CHECK_INT_EQ(f >= 0, allowed > 0);
	if (f >= 0)
		CHECK(campaign_eligible(&a, &m[f]));
	else
		n_none++;
	/* 4 */
	CHECK_INT_EQ(at_once, allowed > 0 ? 1 : 0);
	if (allowed > 1)
		n_herds++;
}

static void test_every_small_world(void)
{
	struct campaign_member m[MAXM];
	for (int n = 1; n <= MAXM; n++) {
		int total = 1;
		for (int i = 0; i < n; i++)
			total *= NSTATE;
		for (int w = 0; w < total; w++) {
			for (int i = 0, x = w; i < n; i++, x /= NSTATE)
				m[i] = member_of(i, x % NSTATE);
			for (int status = 0; status < 3; status++)
				check_world(m, (size_t)n, status);
		}
	}
	printf("# %llu worlds; %llu with several members allowed to campaign (cut to one at "
	       "once), %llu with none eligible\n", n_worlds, n_herds, n_none);
	CHECK(n_herds > 0 && n_none > 0);
}

int main(void)
{
	RUN(test_every_small_world);
	return 0;
}
