/* SPDX-License-Identifier: MIT */
/*
 * test_release_rule.c - the rule that picks the release that may campaign
 * (host/election/election_release_rule.h), checked over every small world
 * rather than by examples.
 *
 * A world: four releases 1.0.0 < 1.1.0 < 2.0.0 < 3.0.0, each with every
 * min_compatible_release and min_reconciler_release at or below itself;
 * the reference flag off or on; every multiset of one to four members
 * over them, with and without an undecodable member record; every status:
 * none, undecodable, and each (version, min_compatible) pair. In each:
 *  1. every member computes the same answer from its own view (the rule
 *     depends on the records, not on who asks), and at most one release
 *     campaigns;
 *  2. no release older than the status's version campaigns while a member
 *     at or above that version remains (the downgrade needs every such
 *     member gone, on purpose);
 *  3. a release can act whenever the status's own release is a member and
 *     the status is one the protocol can write (its minimum compatible
 *     release is at least its version's);
 *  4. the answer is the rule as docs/design.md states it, computed here
 *     independently; under the reference flag it is today's rule (the
 *     newest member release); the new rule differs from the reference only
 *     where the reference's leader could not act;
 *  5. readiness: while the new rule's leader reconciles, no node is ready
 *     that the status before did not let serve, and every ready node can
 *     read that leader's state; a node the reference keeps unready is
 *     ready under the new rule only because the older release that acted
 *     meets its min_reconciler_release or no longer needs its release gone
 *     (counted and printed).
 * Then members written by an older leasehold (no declared fields; such a
 * node campaigns only as the newest): still at most one release campaigns.
 * Then every world above under every pin (none, or at each of the four
 * releases, forced or not): every member computes the same answer, at most
 * one release campaigns, none newer than the pin (hosts of an older
 * leasehold read no pin: only their release may), a pin at or above the
 * newest member changes nothing, a release older than the status's version
 * campaigns only in a downgrade or under a forced pin below that version,
 * and the answer is the pinned rule as docs/design.md states it.
 * Then health: the same worlds (up to three members) with every subset of
 * them unhealthy
 * (withdrawn for a hold-down). In each:
 *  6. every member computes the same answer; at most one release
 *     campaigns; never one older than the status's version while a member
 *     at or above it remains;
 *  7. health never takes the last campaigner away: whenever the
 *     health-free rule names a release, some member campaigns (a world
 *     where every node is unhealthy keeps the one in office);
 *  8. health moves the answer only off a release none of whose members is
 *     healthy, only down, only onto a healthy release that can act (the
 *     answer is the newest such, computed here independently), and never
 *     when the health-free answer came from the reference rule or a
 *     downgrade; with every member healthy it is the health-free answer;
 *  9. of the answer's release, only its healthy nodes campaign when it
 *     has one, all of its nodes otherwise.
 * Then the leaving leader's restriction (release_rule_successor_restriction):
 * every world above (up to three members, under no pin or a pin at each
 * release), every member whose release campaigns as the leader, leaving
 * by a hot reload to each other release:
 * 11. the leaving leader restricts only where the rule names, once its
 *     record changed, the release it reloads to, because every member is
 *     compatible with its change, and then writes exactly the status that
 *     release's leader would write first; where that leader would
 *     restrict, it does;
 * 12. the successor reconciles at once on it (no further restriction);
 * 13. no member's readiness changes with it (only a node that comes back
 *     below the new minimum is kept out, as by the successor's own write);
 *     with min_reconciler_release varied too.
 * Then a pin and health together: those worlds under every pin below or
 * at each release, forced or not, with every subset unhealthy:
 * 10. every member computes the same answer, at most one release
 *     campaigns, none newer than the pin, none older than the status's
 *     version but in a downgrade or under a forced pin; health never takes
 *     the last campaigner away and moves the pinned answer only down, onto
 *     a healthy release that can act, never off a forced pin's or the
 *     reference flag's answer (the rule as stated, computed here); 9. holds.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "election/election_internal.h" /* election_status_ready */
#include "election/election_release_rule.h"

#define NREL 4
#define MAXM 4

static const struct release U[NREL] = {{1, 0, 0}, {1, 1, 0}, {2, 0, 0}, {3, 0, 0}};

struct world {
	int mcr[NREL], minrec[NREL]; /* indices into U */
	bool reference;
	int members[MAXM]; /* indices into U */
	int n_members;
	bool invalid;
	int status; /* -2 none, -1 undecodable, else v * NREL + m */
	int undeclared; /* -1, or the release whose records an older host wrote */
	int mixed;      /* with undeclared: one record of it is declared */
	int pinned;     /* 0 no pin, else 1 + the index into U of the pin */
	bool pin_forced;
	unsigned sick;  /* bit k: member k is unhealthy */
};

static unsigned long long n_worlds, n_differs, n_gained, n_moved, n_kept_sick;
static int max_members = MAXM; /* each_world's largest member multiset */

static struct rule_release rr_of(const struct world *w, int i, bool declared)
{
	struct rule_release r = {.release = U[i], .declared = declared};
	if (declared) {
		r.min_compatible = U[w->mcr[i]];
		r.min_reconciler = U[w->minrec[i]];
		r.reference = w->reference;
	}
	return r;
}

static bool member_declared(const struct world *w, int k)
{
	if (w->members[k] != w->undeclared)
		return true;
	/* mixed: the first member of that release runs this leasehold */
	for (int j = 0; j < k; j++)
		if (w->members[j] == w->undeclared)
			return false;
	return w->mixed;
}

static struct rule_pin pin_of(const struct world *w)
{
	struct rule_pin p = {.set = w->pinned > 0, .forced = w->pin_forced};
	if (p.set)
		p.release = U[w->pinned - 1];
	return p;
}

static struct rule_status status_of(const struct world *w)
{
	struct rule_status s = {.valid = w->status >= 0};
	if (s.valid) {
		s.version = U[w->status / NREL];
		s.min_compatible = U[w->status % NREL];
	}
	return s;
}

/* member k's record */
static struct rule_release member_rr(const struct world *w, int k)
{
	struct rule_release r = rr_of(w, w->members[k], member_declared(w, k));
	r.unhealthy = (w->sick >> k) & 1u;
	return r;
}

/* the distinct records with their counts */
static size_t records_of(const struct world *w, struct relcount *rc)
{
	size_t n = 0;
	for (int k = 0; k < w->n_members; k++) {
		struct rule_release r = member_rr(w, k);
		size_t i = 0;
		while (i < n && !release_rule_equal(&rc[i].rr, &r))
			i++;
		if (i == n)
			rc[n++] = (struct relcount){.rr = r, .count = 0};
		rc[i].count++;
	}
	return n;
}

/* what the rule decides a world from: its distinct records, its status
 * and whether the records are invalid */
struct rule_inputs {
	struct relcount rc[MAXM];
	size_t n_rc;
	struct rule_status st;
	bool invalid;
};

/* the rule's answer over in from mine's view (NULL: the cluster's), under
 * pin (NULL: release_rule_decide itself, not its pinned form) */
static void inputs_decide(const struct rule_inputs *in, const struct rule_release *mine,
			  const struct rule_pin *pin, struct rule_answer *a)
{
	if (pin)
		release_rule_decide_pinned(mine, in->rc, in->n_rc, in->invalid, &in->st, pin, a);
	else
		release_rule_decide(mine, in->rc, in->n_rc, in->invalid, &in->st, a);
}

/* the start every property check of a world shares: the world's inputs
 * into *in, the cluster's answer under pin (may be NULL) into *a, the world
 * counted */
static void world_answer(const struct world *w, const struct rule_pin *pin,
			 struct rule_inputs *in, struct rule_answer *a)
{
	in->n_rc = records_of(w, in->rc);
	in->st = status_of(w);
	in->invalid = w->invalid;
	inputs_decide(in, NULL, pin, a);
	n_worlds++;
}

static int max_member(const struct world *w)
{
	int m = 0;
	for (int k = 0; k < w->n_members; k++)
		if (w->members[k] > m)
			m = w->members[k];
	return m;
}

static int min_member(const struct world *w)
{
	int m = NREL - 1;
	for (int k = 0; k < w->n_members; k++)
		if (w->members[k] < m)
			m = w->members[k];
	return m;
}

static bool has_member(const struct world *w, int i)
{
	for (int k = 0; k < w->n_members; k++)
		if (w->members[k] == i)
			return true;
	return false;
}

/* the rule as docs/design.md states it (declared records only): -1 = none */
static int spec_answer(const struct world *w)
{
	int newest = max_member(w), oldest = min_member(w);
	if (w->reference || w->status < 0)
		return newest;
	int v = w->status / NREL, m = w->status % NREL;
	if (newest < v)
		return newest; /* downgrade */
	for (int r = newest; r >= v; r--) {
		if (!has_member(w, r))
			continue;
		if (m >= w->mcr[r] || (!w->invalid && oldest >= w->mcr[r]))
			return r;
	}
	return -1;
}

/* the reference's leader (the newest) can act now: it gets past the status
 * branches of election_lead.c to its first reconcile */
static bool leader_can_act(const struct world *w, int r)
{
	if (w->status < 0)
		return true;
	int v = w->status / NREL, m = w->status % NREL;
	if (r >= v && m >= w->mcr[r])
		return true;
	return !w->invalid && min_member(w) >= w->mcr[r];
}

static bool ready(const struct world *w, int node, bool present, struct release v, struct release m)
{
	struct plugin_releases pr = {.release = U[node], .min_reconciler = U[w->minrec[node]],
	                             .min_compatible = U[w->mcr[node]]};
	return election_status_ready(&pr, present, v, m);
}

/* the statuses leader r leaves behind: s1 while it reconciles (none when no
 * status existed), s2 once it wrote DONE */
static void leader_statuses(const struct world *w, int r, struct rule_status *s1,
                            struct rule_status *s2)
{
	struct rule_status s0 = status_of(w);
	*s1 = (struct rule_status){.valid = false};
	if (s0.valid) {
		bool ok = !release_less(U[r], s0.version) && !release_less(s0.min_compatible, U[w->mcr[r]]);
		s1->valid = true;
		s1->version = ok || release_less(s0.version, U[r]) ? s0.version : U[r];
		s1->min_compatible = ok || !release_less(s0.min_compatible, U[w->mcr[r]])
		                             ? s0.min_compatible
		                             : U[w->mcr[r]];
	}
	*s2 = (struct rule_status){.valid = true, .version = U[r], .min_compatible = U[w->mcr[r]]};
}

static bool ready_at(const struct world *w, int node, const struct rule_status *s)
{
	return ready(w, node, s->valid, s->version, s->min_compatible);
}

static void check_readiness(const struct world *w, int r)
{
	struct rule_status s0 = status_of(w), s1, s2, t1, t2;
	leader_statuses(w, r, &s1, &s2);
	int ref = max_member(w);
	bool ref_acts = leader_can_act(w, ref);
	leader_statuses(w, ref, &t1, &t2);
	/* every release as a node: a member, or one that comes back */
	for (int n = 0; n < NREL; n++) {
		if (ready_at(w, n, &s1)) {
			CHECK(ready_at(w, n, &s0));
			CHECK(!release_less(U[n], U[w->mcr[r]]));
		}
		bool now = ready_at(w, n, &s1) || ready_at(w, n, &s2);
		bool ref_ready = ready_at(w, n, &s0) ||
		                 (ref_acts && (ready_at(w, n, &t1) || ready_at(w, n, &t2)));
		if (!now || ref_ready)
			continue;
		/* gained: only from an older release that acted where the
		 * reference could not, and only for a reason the node declared */
		CHECK(r < ref && !ref_acts);
		bool minrec = w->minrec[n] <= r && (!s0.valid || release_less(s0.version, U[w->minrec[n]]));
		bool mcr = s0.valid && release_less(U[n], s0.min_compatible) && w->mcr[r] <= n;
		CHECK(minrec || mcr);
		n_gained++;
	}
}

/* the index of a's release, -1 when none may campaign */
static int answer_index(const struct world *w, const struct rule_answer *a)
{
	(void)w;
	for (int i = 0; i < NREL && a->basis != RULE_NONE; i++)
		if (release_cmp(U[i], a->release) == 0)
			return i;
	return -1;
}

/* 5. only: the readiness the answer's leader leads to */
static void check_world_readiness(const struct world *w)
{
	struct rule_inputs in;
	struct rule_answer a;
	world_answer(w, NULL, &in, &a);
	int got = answer_index(w, &a);
	if (got >= 0 && leader_can_act(w, got))
		check_readiness(w, got);
}

/* 1. to 4. */
static void check_world(const struct world *w)
{
	struct rule_inputs in;
	struct rule_answer a;
	world_answer(w, NULL, &in, &a);

	/* 1. the same answer from every member's view; one release campaigns */
	int campaigning = -1;
	for (int k = 0; k < w->n_members; k++) {
		struct rule_release mine = member_rr(w, k);
		struct rule_answer b;
		inputs_decide(&in, &mine, NULL, &b);
		CHECK(b.basis == a.basis && release_cmp(b.release, a.release) == 0);
		bool may = release_rule_may_campaign(&a, &mine);
		if (!mine.declared) /* an older host: today's rule */
			CHECK(may == (w->members[k] == max_member(w)));
		char buf[256];
		CHECK((release_rule_explain(&a, mine.release, buf, sizeof(buf)) == NULL) ==
		      (a.basis != RULE_NONE && release_cmp(mine.release, a.release) == 0));
		if (!may)
			continue;
		CHECK(campaigning < 0 || campaigning == w->members[k]);
		campaigning = w->members[k];
	}
	if (w->undeclared >= 0)
		return; /* the rest holds for hosts of this leasehold */

	int spec = spec_answer(w);
	int got = answer_index(w, &a);
	CHECK(a.basis == RULE_NONE || got >= 0);
	/* 4. the stated rule; the reference flag gives today's rule */
	CHECK_INT_EQ(got, spec);
	if (w->reference)
		CHECK(got == max_member(w) && a.basis == RULE_REFERENCE);
	if (got != max_member(w)) {
		CHECK(!leader_can_act(w, max_member(w)));
		n_differs++;
	}
	if (in.st.valid) {
		int v = w->status / NREL, m = w->status % NREL;
		/* 2. never older than the status's version while one at or above remains */
		if (got >= 0 && max_member(w) >= v)
			CHECK(got >= v);
		/* 3. the status's own release present, a status the protocol writes */
		if (has_member(w, v) && m >= w->mcr[v])
			CHECK(got >= 0);
	}
}

/* the pinned rule as docs/design.md states it (declared records only) */
static int spec_pinned(const struct world *w)
{
	int pin = w->pinned - 1, newest = max_member(w), oldest = min_member(w), top = -1;
	if (w->pinned == 0 || pin >= newest)
		return spec_answer(w);
	for (int k = 0; k < w->n_members; k++)
		if (w->members[k] <= pin && w->members[k] > top)
			top = w->members[k];
	if (top < 0)
		return -1;
	if (w->status < 0)
		return top;
	int v = w->status / NREL, m = w->status % NREL;
	if (pin < v)
		return w->pin_forced ? top : -1;
	if (top < v)
		return -1; /* a member above the pin is at or above the status */
	if (w->reference)
		return top;
	for (int r = top; r >= v; r--)
		if (has_member(w, r) && (m >= w->mcr[r] || (!w->invalid && oldest >= w->mcr[r])))
			return r;
	return -1;
}

/* the properties under a pin (see the top of the file) */
static void check_world_pinned(const struct world *w)
{
	struct rule_inputs in;
	struct rule_pin pin = pin_of(w);
	struct rule_answer a, plain;
	world_answer(w, &pin, &in, &a);
	inputs_decide(&in, NULL, NULL, &plain);
	int campaigning = -1;
	for (int k = 0; k < w->n_members; k++) {
		struct rule_release mine = rr_of(w, w->members[k], member_declared(w, k));
		struct rule_answer b;
		inputs_decide(&in, &mine, &pin, &b);
		CHECK(b.basis == a.basis && release_cmp(b.release, a.release) == 0);
		char buf[320];
		const char *why = release_rule_explain(&a, mine.release, buf, sizeof(buf));
		CHECK((why == NULL) == (a.basis != RULE_NONE && release_cmp(mine.release, a.release) == 0));
		if (why && a.pin_holds && w->members[k] > w->pinned - 1)
			CHECK(strstr(why, "pin") != NULL);
		if (!release_rule_may_campaign(&a, &mine))
			continue;
		CHECK(campaigning < 0 || campaigning == w->members[k]);
		campaigning = w->members[k];
		/* never newer than the pin, but for an older host, which reads none */
		if (w->pinned && mine.declared && w->undeclared != max_member(w))
			CHECK(w->members[k] <= w->pinned - 1);
	}
	if (w->undeclared >= 0)
		return;
	int got = answer_index(w, &a);
	CHECK_INT_EQ(got, spec_pinned(w));
	if (!w->pinned || w->pinned - 1 >= max_member(w))
		CHECK(a.basis == plain.basis && release_cmp(a.release, plain.release) == 0);
	if (got >= 0 && w->pinned)
		CHECK(got <= w->pinned - 1);
	if (got >= 0 && in.st.valid && got < w->status / NREL)
		CHECK(max_member(w) < w->status / NREL ||
		      (w->pin_forced && w->pinned - 1 < w->status / NREL));
	if (a.basis == RULE_PIN_FORCED)
		n_differs++;
}

/* every pin over every status; the forced flag only where the rule reads
 * it (a pin below a valid status's version) */
static void each_pin(struct world *w)
{
	for (w->pinned = 0; w->pinned <= NREL; w->pinned++)
		for (int f = 0; f <= (w->pinned ? 1 : 0); f++) {
			w->pin_forced = f;
			for (w->status = -2; w->status < NREL * NREL; w->status++)
				if (!f || (w->status >= 0 && w->pinned - 1 < w->status / NREL))
					check_world_pinned(w);
		}
	w->pinned = 0;
	w->pin_forced = false;
}

static void each_pin_undeclared(struct world *w)
{
	for (w->undeclared = 0; w->undeclared < NREL; w->undeclared++) {
		if (!has_member(w, w->undeclared))
			continue;
		for (w->mixed = 0; w->mixed <= 1; w->mixed++)
			each_pin(w);
	}
	w->undeclared = -1;
	w->mixed = 0;
}

/* some member of release r is healthy */
static bool healthy(const struct world *w, int r)
{
	for (int k = 0; k < w->n_members; k++)
		if (w->members[k] == r && !((w->sick >> k) & 1u))
			return true;
	return false;
}

/* the newest healthy release below base that can act, never older than
 * the status's version; base when there is none */
static int health_fallback(const struct world *w, int base)
{
	int v = w->status >= 0 ? w->status / NREL : 0, m = w->status % NREL;
	for (int r = base - 1; r >= v; r--) {
		if (!healthy(w, r))
			continue;
		if (w->status < 0 || m >= w->mcr[r] || (!w->invalid && min_member(w) >= w->mcr[r]))
			return r;
	}
	return base;
}

/* the rule with health as docs/design.md states it: -1 = none */
static int spec_health_answer(const struct world *w)
{
	int base = spec_answer(w);
	if (base < 0 || healthy(w, base) || w->reference)
		return base;
	if (w->status >= 0 && max_member(w) < w->status / NREL)
		return base; /* a downgrade names the newest on purpose */
	return health_fallback(w, base);
}

/* the rule with a pin and health as docs/design.md states it: health
 * moves the pinned answer as it moves the plain one, except off an answer
 * a forced pin or the reference flag gave (-1 = none) */
static int spec_pinned_health_answer(const struct world *w)
{
	int pin = w->pinned - 1;
	if (w->pinned == 0 || pin >= max_member(w))
		return spec_health_answer(w);
	int base = spec_pinned(w);
	if (base < 0 || healthy(w, base) || w->reference)
		return base;
	if (w->status >= 0 && pin < w->status / NREL)
		return base; /* the forced pin's release, on purpose */
	return health_fallback(w, base);
}

/* 6. to 10.: health, under the world's pin (none, or one at each
 * release, forced or not) */
static void check_world_health(const struct world *w)
{
	struct rule_inputs in, in0;
	struct rule_pin pin = pin_of(w);
	struct rule_answer a, b0;
	world_answer(w, &pin, &in, &a);
	/* the same world with every member healthy */
	in0 = in;
	struct world hw = *w;
	hw.sick = 0;
	in0.n_rc = records_of(&hw, in0.rc);
	inputs_decide(&in0, NULL, &pin, &b0);
	int got = answer_index(w, &a), base = answer_index(w, &b0);

	/* 6. and 9. */
	int campaigning = -1;
	bool any = false;
	for (int k = 0; k < w->n_members; k++) {
		struct rule_release mine = member_rr(w, k);
		struct rule_answer b;
		inputs_decide(&in, &mine, &pin, &b);
		CHECK(b.basis == a.basis && release_cmp(b.release, a.release) == 0 &&
		      b.healthy == a.healthy);
		bool may = release_rule_may_campaign(&a, &mine);
		bool want = got >= 0 && w->members[k] == got && (!mine.unhealthy || !healthy(w, got));
		CHECK(may == want);
		if (!may)
			continue;
		CHECK(campaigning < 0 || campaigning == w->members[k]);
		campaigning = w->members[k];
		any = true;
	}
	/* never newer than the pin; never older than the status's version
	 * but in a downgrade or under a forced pin below it */
	if (got >= 0 && w->pinned)
		CHECK(got <= w->pinned - 1);
	if (got >= 0 && in.st.valid && got < w->status / NREL)
		CHECK(max_member(w) < w->status / NREL ||
		      (w->pin_forced && w->pinned - 1 < w->status / NREL));
	/* 7. */
	if (base >= 0)
		CHECK(any);
	/* 8. */
	CHECK_INT_EQ(got, spec_pinned_health_answer(w));
	if (w->sick == 0)
		CHECK(got == base && !a.moved);
	if (got != base) {
		CHECK(a.moved && release_cmp(a.passed_over, U[base]) == 0);
		CHECK(!healthy(w, base) && got < base && healthy(w, got));
		CHECK(b0.basis != RULE_REFERENCE && b0.basis != RULE_DOWNGRADE &&
		      b0.basis != RULE_PIN_FORCED);
		CHECK(a.basis != RULE_NONE && a.basis != RULE_REFERENCE && a.basis != RULE_DOWNGRADE);
		char buf[256];
		CHECK(release_rule_explain(&a, U[base], buf, sizeof(buf)) != NULL);
		n_moved++;
	} else if (base >= 0 && !healthy(w, base)) {
		CHECK(!a.healthy);
		n_kept_sick++;
	}
}

/* every multiset of n members over NREL releases (non-decreasing indices) */
static unsigned long long n_handed;

static int release_index(struct release r)
{
	for (int i = 0; i < NREL; i++)
		if (release_cmp(U[i], r) == 0)
			return i;
	CHECK(!"a release of the world");
	return 0;
}

static bool status_same(const struct rule_status *a, const struct rule_status *b)
{
	return a->valid == b->valid &&
	       (!a->valid || (release_cmp(a->version, b->version) == 0 &&
	                      release_cmp(a->min_compatible, b->min_compatible) == 0));
}

/* 11. to 13. for the leader member k of w reloading to release `to` */
static void check_leaving(const struct world *w, int k, int to, const struct rule_pin *pin)
{
	struct world w2 = *w;
	w2.members[k] = to;
	struct rule_inputs in;
	struct rule_answer a;
	world_answer(&w2, pin, &in, &a);
	struct rule_status rs = {0}, s0 = status_of(&w2), s1, s2;
	struct rule_release incoming = member_rr(&w2, k);
	bool handed = release_rule_successor_restriction(in.rc, in.n_rc, in.invalid, &in.st, pin,
	                                                 &incoming, &rs);
	int r = answer_index(&w2, &a);
	if (r < 0) {
		CHECK(!handed);
		return;
	}
	leader_statuses(&w2, r, &s1, &s2);
	bool restricts = s0.valid && !status_same(&s1, &s0);
	/* 11. */
	CHECK(handed == (restricts && a.basis == RULE_ALL_COMPATIBLE && r == to));
	if (!handed)
		return;
	CHECK(status_same(&rs, &s1));
	/* 12. */
	struct world w3 = w2;
	w3.status = release_index(rs.version) * NREL + release_index(rs.min_compatible);
	struct rule_status t1, t2;
	leader_statuses(&w3, r, &t1, &t2);
	CHECK(status_same(&t1, &rs));
	/* 13. */
	for (int j = 0; j < w2.n_members; j++)
		CHECK(ready_at(&w2, w2.members[j], &rs) == ready_at(&w2, w2.members[j], &s0));
	n_handed++;
}

static void check_world_leaving(const struct world *w, const struct rule_pin *pin)
{
	struct rule_inputs in;
	struct rule_answer a;
	world_answer(w, pin, &in, &a);
	for (int k = 0; k < w->n_members; k++) {
		struct rule_release mine = member_rr(w, k);
		if (!release_rule_may_campaign(&a, &mine))
			continue;
		for (int to = 0; to < NREL; to++)
			if (to != w->members[k])
				check_leaving(w, k, to, pin);
	}
}

static void each_status_leaving(struct world *w)
{
	for (w->status = -2; w->status < NREL * NREL; w->status++) {
		check_world_leaving(w, NULL);
		for (w->pinned = 1; w->pinned <= NREL; w->pinned++) {
			struct rule_pin pin = pin_of(w);
			check_world_leaving(w, &pin);
		}
		w->pinned = 0;
	}
}

static void each_status_leaving_readiness(struct world *w)
{
	for (w->status = -2; w->status < NREL * NREL; w->status++)
		check_world_leaving(w, NULL);
}

static void each_members(struct world *w, int k, int from, void (*fn)(struct world *))
{
	if (k == w->n_members) {
		fn(w);
		return;
	}
	for (int i = from; i < NREL; i++) {
		w->members[k] = i;
		each_members(w, k + 1, i, fn);
	}
}

static void each_status(struct world *w)
{
	for (w->status = -2; w->status < NREL * NREL; w->status++)
		check_world(w);
}

static void each_status_readiness(struct world *w)
{
	for (w->status = -2; w->status < NREL * NREL; w->status++)
		check_world_readiness(w);
}

static void each_status_health(struct world *w)
{
	for (w->status = -2; w->status < NREL * NREL; w->status++)
		for (w->sick = 0; w->sick < (1u << w->n_members); w->sick++)
			check_world_health(w);
	w->sick = 0;
}

static void each_pin_health(struct world *w)
{
	for (w->pinned = 1; w->pinned <= NREL; w->pinned++)
		for (int f = 0; f <= 1; f++) {
			w->pin_forced = f;
			for (w->status = -2; w->status < NREL * NREL; w->status++) {
				if (f && !(w->status >= 0 && w->pinned - 1 < w->status / NREL))
					continue;
				for (w->sick = 0; w->sick < (1u << w->n_members); w->sick++)
					check_world_health(w);
			}
		}
	w->pinned = 0;
	w->pin_forced = false;
	w->sick = 0;
}

static void each_undeclared(struct world *w)
{
	w->status = -2;
	for (w->undeclared = 0; w->undeclared < NREL; w->undeclared++) {
		if (!has_member(w, w->undeclared))
			continue;
		for (w->mixed = 0; w->mixed <= 1; w->mixed++)
			each_status(w);
	}
	w->undeclared = -1;
	w->mixed = 0;
}

/* every compatibility assignment (min_reconciler_release too when
 * minrec: the rule does not read it, readiness does; else all at 1.0.0),
 * the reference flag and an undecodable record when flags, then fn over
 * every member multiset */
static void each_world(void (*fn)(struct world *), bool flags, bool minrec)
{
	struct world w = {.undeclared = -1};
	int combos = 1;
	for (int i = 0; i < NREL; i++)
		combos *= (i + 1) * (minrec ? i + 1 : 1);
	for (int c = 0; c < combos; c++) {
		int x = c;
		for (int i = 0; i < NREL; i++) {
			w.mcr[i] = x % (i + 1);
			x /= i + 1;
			w.minrec[i] = minrec ? x % (i + 1) : 0;
			x /= minrec ? i + 1 : 1;
		}
		for (int f = 0; f <= (flags ? 1 : 0); f++)
			for (int inv = 0; inv <= (flags || minrec ? 1 : 0); inv++) {
				w.reference = f;
				w.invalid = inv;
				for (w.n_members = 1; w.n_members <= max_members; w.n_members++)
					each_members(&w, 0, 0, fn);
			}
	}
}

static void test_release_rule_every_small_world(void)
{
	n_worlds = n_differs = 0;
	each_world(each_status, true, false);
	printf("# %llu worlds checked; the new rule picks an older release than the reference in "
	       "%llu\n", n_worlds, n_differs);
	CHECK(n_differs > 0);
}

static void test_release_rule_readiness(void)
{
	n_worlds = n_gained = 0;
	each_world(each_status_readiness, false, true);
	printf("# %llu worlds checked; readiness gained over the reference: %llu node(s)\n",
	       n_worlds, n_gained);
	CHECK(n_gained > 0);
}

static void test_release_rule_health(void)
{
	n_worlds = n_moved = n_kept_sick = 0;
	/* up to three members, every subset of them unhealthy: three
	 * already span a fallback past an unhealthy middle release; four
	 * would multiply the run time by six */
	max_members = 3;
	each_world(each_status_health, true, false);
	max_members = MAXM;
	printf("# %llu worlds with health checked; health moved the answer down in %llu; the "
	       "named release had no healthy member and stayed in %llu\n",
	       n_worlds, n_moved, n_kept_sick);
	CHECK(n_moved > 0 && n_kept_sick > 0);
}

static void test_release_rule_leaving_leader(void)
{
	n_worlds = n_handed = 0;
	max_members = 3;
	each_world(each_status_leaving, true, false);
	unsigned long long pinned = n_handed;
	each_world(each_status_leaving_readiness, false, true);
	max_members = MAXM;
	printf("# %llu worlds after a leader's reload checked; the leaving leader restricts for "
	       "its successor in %llu (%llu of them with min_reconciler_release varied)\n",
	       n_worlds, n_handed, n_handed - pinned);
	CHECK(pinned > 0 && n_handed > pinned);
}

static void test_release_rule_older_hosts(void)
{
	n_worlds = 0;
	each_world(each_undeclared, false, false);
	printf("# %llu worlds with members of an older leasehold checked\n", n_worlds);
	CHECK(n_worlds > 0);
}

static void test_release_rule_pinned(void)
{
	n_worlds = n_differs = 0;
	each_world(each_pin, true, false);
	printf("# %llu pinned worlds checked; a forced pin hands the state back in %llu\n", n_worlds,
	       n_differs);
	CHECK(n_differs > 0);
	n_worlds = 0;
	each_world(each_pin_undeclared, false, false);
	printf("# %llu pinned worlds with members of an older leasehold checked\n", n_worlds);
}

static void test_release_rule_pinned_health(void)
{
	n_worlds = n_moved = 0;
	max_members = 3; /* as for health alone */
	each_world(each_pin_health, true, false);
	max_members = MAXM;
	printf("# %llu pinned worlds with health checked; health moved the pinned answer down in "
	       "%llu\n", n_worlds, n_moved);
	CHECK(n_moved > 0);
}

/* the pin's sentences: 1.0.0 and 2.0.0 (incompatible) members, status DONE 1.0.0 */
static void test_release_rule_pin_explain(void)
{
	struct world w = {.undeclared = -1, .mcr = {0, 0, 2, 0}, .members = {0, 0, 2, 2},
	                  .n_members = 4, .status = 0 * NREL + 0};
	struct relcount rc[MAXM];
	size_t n = records_of(&w, rc);
	struct rule_status st = status_of(&w);
	struct rule_pin pin = {.set = true, .release = U[0]};
	struct rule_answer a;
	char buf[320];
	release_rule_decide_pinned(NULL, rc, n, false, &st, &pin, &a);
	CHECK(a.basis == RULE_STATUS_ALLOWS && release_cmp(a.release, U[0]) == 0 && a.pin_holds);
	CHECK_STR_EQ(release_rule_explain(&a, U[2], buf, sizeof(buf)),
	             "release 2.0.0 is newer than the pin 1.0.0: release 1.0.0 leads meanwhile "
	             "(until the pin moves or goes)");
	CHECK(release_rule_explain(&a, U[0], buf, sizeof(buf)) == NULL);
	/* 2.0.0 reconciled: a pin at 1.0.0 counts only when forced */
	w.status = 2 * NREL + 2;
	st = status_of(&w);
	release_rule_decide_pinned(NULL, rc, n, false, &st, &pin, &a);
	CHECK(a.basis == RULE_NONE);
	CHECK_STR_EQ(release_rule_explain(&a, U[0], buf, sizeof(buf)),
	             "the pin 1.0.0 is below the status's version 2.0.0 and was not forced: no "
	             "release campaigns");
	pin.forced = true;
	release_rule_decide_pinned(NULL, rc, n, false, &st, &pin, &a);
	CHECK(a.basis == RULE_PIN_FORCED && release_cmp(a.release, U[0]) == 0);
}

/* the sentences an operator reads */
static void test_release_rule_explain(void)
{
	struct world w = {.undeclared = -1, .mcr = {0, 0, 2, 0}, .minrec = {0, 0, 2, 0},
	                  .members = {0, 0, 2}, .n_members = 3, .status = 0 * NREL + 0};
	struct relcount rc[MAXM];
	size_t n = records_of(&w, rc);
	struct rule_status st = status_of(&w);
	struct rule_answer a;
	release_rule_decide(NULL, rc, n, false, &st, &a);
	CHECK(a.basis == RULE_STATUS_ALLOWS && release_cmp(a.release, U[0]) == 0);
	char buf[256];
	CHECK_STR_EQ(release_rule_explain(&a, U[2], buf, sizeof(buf)),
	             "release 2.0.0 cannot act yet: it needs every member at 2.0.0 or above "
	             "(oldest: 1.0.0); release 1.0.0 leads meanwhile");
	CHECK(release_rule_explain(&a, U[0], buf, sizeof(buf)) == NULL);
	w.status = 2 * NREL + 2; /* 2.0.0 reconciled and leads: 1.0.0 is behind it */
	st = status_of(&w);
	release_rule_decide(NULL, rc, n, false, &st, &a);
	CHECK(release_cmp(a.release, U[2]) == 0);
	CHECK_STR_EQ(release_rule_explain(&a, U[0], buf, sizeof(buf)),
	             "a newer release is present");
	/* 2.0.0 reconciled and leads while an incompatible 3.0.0 waits: 1.0.0
	 * is older than the state */
	struct world w3 = {.undeclared = -1, .mcr = {0, 0, 0, 3}, .minrec = {0, 0, 0, 0},
	                   .members = {0, 2, 3}, .n_members = 3, .status = 2 * NREL + 0};
	n = records_of(&w3, rc);
	st = status_of(&w3);
	release_rule_decide(NULL, rc, n, false, &st, &a);
	CHECK(a.basis == RULE_STATUS_ALLOWS && release_cmp(a.release, U[2]) == 0);
	CHECK_STR_EQ(release_rule_explain(&a, U[0], buf, sizeof(buf)),
	             "release 1.0.0 is older than the status's version 2.0.0");
	CHECK_STR_EQ(release_rule_explain(&a, U[3], buf, sizeof(buf)),
	             "release 3.0.0 cannot act yet: it needs every member at 3.0.0 or above "
	             "(oldest: 1.0.0); release 2.0.0 leads meanwhile");
}

int main(void)
{
	RUN(test_release_rule_every_small_world);
	RUN(test_release_rule_readiness);
	RUN(test_release_rule_health);
	RUN(test_release_rule_older_hosts);
	RUN(test_release_rule_explain);
	RUN(test_release_rule_pinned);
	RUN(test_release_rule_pin_explain);
	RUN(test_release_rule_pinned_health);
	RUN(test_release_rule_leaving_leader);
	return 0;
}
