/* SPDX-License-Identifier: MIT */
/*
 * election_release_rule.c - which release may campaign (see the design
 * notes in election_release_rule.h and docs/design.md, "Which release
 * leads during a rollout").
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "election/election_release_rule.h"

/* the merged view of one release: its declared records' strictest fields */
struct rule_merged {
	struct release release;
	bool declared; /* some record of it declares its fields */
	bool undeclared; /* some record of it was written by an older host */
	bool reference;
	struct release min_compatible;
	bool healthy; /* some record of it is healthy */
};

static void rule_merge(struct rule_merged *m, const struct rule_release *r)
{
	m->healthy = m->healthy || !r->unhealthy;
	if (!r->declared) {
		m->undeclared = true;
		return;
	}
	if (!m->declared || release_less(m->min_compatible, r->min_compatible))
		m->min_compatible = r->min_compatible;
	m->declared = true;
	m->reference = m->reference || r->reference;
}

/* the merged view of release `rel` over every record */
static struct rule_merged rule_merged_of(struct release rel, const struct rule_release *local,
                                         const struct relcount *rc, size_t n_rc)
{
	struct rule_merged m = {.release = rel};
	if (local && release_cmp(local->release, rel) == 0)
		rule_merge(&m, local);
	for (size_t i = 0; i < n_rc; i++)
		if (rc[i].count && release_cmp(rc[i].rr.release, rel) == 0)
			rule_merge(&m, &rc[i].rr);
	return m;
}

/* the newest member release strictly below `below` (any when !bounded);
 * false when there is none */
static bool rule_next_below(const struct rule_release *local, const struct relcount *rc,
                            size_t n_rc, bool bounded, struct release below,
                            struct release *ret)
{
	bool found = false;
	for (size_t i = 0; i <= n_rc; i++) {
		const struct rule_release *r = i < n_rc ? &rc[i].rr : local;
		if (!r || (i < n_rc && !rc[i].count))
			continue;
		if (bounded && !release_less(r->release, below))
			continue;
		if (!found || release_less(*ret, r->release))
			*ret = r->release;
		found = true;
	}
	return found;
}

/* R can act: (b) not older than the status's version, and (a) every member
 * compatible with its change, or the status already allowing it */
static enum rule_basis rule_can_act(const struct rule_merged *m, const struct rule_answer *a)
{
	if (!m->declared)
		return RULE_NONE; /* its nodes follow the reference rule: only as the newest */
	if (release_less(m->release, a->status.version))
		return RULE_NONE;
	if (!release_less(a->status.min_compatible, m->min_compatible))
		return RULE_STATUS_ALLOWS;
	if (!a->invalid && !release_less(a->oldest, m->min_compatible))
		return RULE_ALL_COMPATIBLE;
	return RULE_NONE;
}

/* the rule without health */
static void rule_decide_base(const struct rule_release *local, const struct relcount *rc,
                             size_t n_rc, bool any_invalid, const struct rule_status *status,
                             struct rule_answer *ret)
{
	struct rule_answer a = {.basis = RULE_NONE, .invalid = any_invalid, .status = *status};
	struct release r = {0, 0, 0};
	if (!rule_next_below(local, rc, n_rc, false, r, &a.newest)) {
		*ret = a;
		return;
	}
	a.oldest = a.newest;
	for (size_t i = 0; i <= n_rc; i++) {
		const struct rule_release *x = i < n_rc ? &rc[i].rr : local;
		if (x && (i == n_rc || rc[i].count) && release_less(x->release, a.oldest))
			a.oldest = x->release;
	}
	struct rule_merged newest = rule_merged_of(a.newest, local, rc, n_rc);
	a.newest_min_compatible = newest.declared ? newest.min_compatible : newest.release;
	a.release = a.newest;
	if (newest.undeclared || newest.reference)
		a.basis = RULE_REFERENCE;
	else if (!status->valid)
		a.basis = RULE_NO_STATUS;
	else if (release_less(a.newest, status->version))
		a.basis = RULE_DOWNGRADE;
	if (a.basis != RULE_NONE) {
		*ret = a;
		return;
	}
	/* newest first: the first that can act is the answer */
	for (r = a.newest;;) {
		struct rule_merged m = rule_merged_of(r, local, rc, n_rc);
		a.basis = rule_can_act(&m, &a);
		if (a.basis != RULE_NONE) {
			a.release = r;
			break;
		}
		if (!rule_next_below(local, rc, n_rc, true, r, &r) || release_less(r, status->version))
			break;
	}
	*ret = a;
}

/* health: the newest healthy release below a->release that can act, when
 * a's release has no healthy member and was named because it can act */
static void rule_apply_health(const struct rule_release *local, const struct relcount *rc,
                              size_t n_rc, struct rule_answer *a)
{
	a->healthy = rule_merged_of(a->release, local, rc, n_rc).healthy;
	if (a->healthy || (a->basis != RULE_NO_STATUS && a->basis != RULE_STATUS_ALLOWS &&
	                   a->basis != RULE_ALL_COMPATIBLE))
		return;
	for (struct release r = a->release;
	     rule_next_below(local, rc, n_rc, true, r, &r) &&
	     (!a->status.valid || !release_less(r, a->status.version));) {
		struct rule_merged m = rule_merged_of(r, local, rc, n_rc);
		if (!m.healthy)
			continue;
		/* no status: any release of this leasehold can act */
		enum rule_basis b = !a->status.valid ? (m.declared ? RULE_NO_STATUS : RULE_NONE)
		                                     : rule_can_act(&m, a);
		if (b == RULE_NONE)
			continue;
		a->moved = true;
		a->passed_over = a->release;
		a->release = r;
		a->basis = b;
		a->healthy = true;
		return;
	}
}

void release_rule_decide(const struct rule_release *local, const struct relcount *rc, size_t n_rc,
                         bool any_invalid, const struct rule_status *status,
                         struct rule_answer *ret)
{
	rule_decide_base(local, rc, n_rc, any_invalid, status, ret);
	if (ret->basis != RULE_NONE)
		rule_apply_health(local, rc, n_rc, ret);
}

bool release_rule_may_campaign(const struct rule_answer *a, const struct rule_release *mine)
{
	if (a->basis == RULE_NONE || release_cmp(mine->release, a->release) != 0)
		return false;
	if (mine->unhealthy && a->healthy)
		return false; /* a healthy node of its release campaigns instead */
	/* a node of an older leasehold campaigns only as the newest */
	return mine->declared || release_cmp(mine->release, a->newest) == 0;
}

const char *release_rule_explain(const struct rule_answer *a, struct release mine, char *buf,
                                 size_t len)
{
	char x[RELEASE_STRLEN], y[RELEASE_STRLEN], z[RELEASE_STRLEN], w[RELEASE_STRLEN];
	if (a->basis != RULE_NONE && release_cmp(mine, a->release) == 0)
		return NULL;
	if (a->moved && release_cmp(mine, a->passed_over) == 0) {
		snprintf(buf, len, "no member of release %s is healthy (each withdrew after failed "
		         "reconciles); release %s leads meanwhile",
		         release_format(mine, x, sizeof(x)), release_format(a->release, y, sizeof(y)));
		return buf;
	}
	if (a->basis != RULE_NONE && release_less(mine, a->release) &&
	    release_cmp(a->release, a->newest) == 0)
		return "a newer release is present";
	if (a->status.valid && release_less(mine, a->status.version) &&
	    (a->basis == RULE_NONE || !release_less(a->release, a->status.version))) {
		snprintf(buf, len, "release %s is older than the status's version %s",
		         release_format(mine, x, sizeof(x)),
		         release_format(a->status.version, y, sizeof(y)));
		return buf;
	}
	if (a->basis == RULE_NONE) {
		if (a->invalid)
			snprintf(buf, len, "no release can act now: the newest, %s, needs every member at "
			         "%s or above and member records that do not decode remain",
			         release_format(a->newest, x, sizeof(x)),
			         release_format(a->newest_min_compatible, y, sizeof(y)));
		else
			snprintf(buf, len, "no release can act now: the newest, %s, needs every member at "
			         "%s or above (oldest: %s)",
			         release_format(a->newest, x, sizeof(x)),
			         release_format(a->newest_min_compatible, y, sizeof(y)),
			         release_format(a->oldest, z, sizeof(z)));
		return buf;
	}
	if (release_less(mine, a->release)) {
		snprintf(buf, len, "a newer release that can act is present (%s)",
		         release_format(a->release, x, sizeof(x)));
		return buf;
	}
	if (release_cmp(mine, a->newest) == 0)
		snprintf(buf, len, "release %s cannot act yet: it needs every member at %s or above "
		         "(oldest: %s%s); release %s leads meanwhile",
		         release_format(mine, x, sizeof(x)),
		         release_format(a->newest_min_compatible, y, sizeof(y)),
		         release_format(a->oldest, z, sizeof(z)),
		         a->invalid ? ", and member records that do not decode remain" : "",
		         release_format(a->release, w, sizeof(w)));
	else
		snprintf(buf, len, "release %s cannot act yet: members below its min_compatible_release "
		         "remain and the status does not allow its change; release %s leads meanwhile",
		         release_format(mine, x, sizeof(x)), release_format(a->release, w, sizeof(w)));
	return buf;
}

bool release_rule_equal(const struct rule_release *a, const struct rule_release *b)
{
	if (release_cmp(a->release, b->release) != 0 || a->declared != b->declared ||
	    a->unhealthy != b->unhealthy)
		return false;
	return !a->declared ||
	       (release_cmp(a->min_compatible, b->min_compatible) == 0 &&
	        release_cmp(a->min_reconciler, b->min_reconciler) == 0 && a->reference == b->reference);
}
