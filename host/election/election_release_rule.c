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

/* the newest member release at or below the pin (any without one); false
 * when there is none */
static bool rule_top(const struct rule_release *local, const struct relcount *rc, size_t n_rc,
                     const struct rule_answer *a, struct release *ret)
{
	if (!a->pin.set || !release_less(a->pin.release, a->newest)) {
		*ret = a->newest;
		return true;
	}
	struct release above = a->pin.release;
	above.patch++; /* strictly below pin+1: at or below the pin */
	if (above.patch == 0 && ++above.minor == 0)
		above.major++;
	return rule_next_below(local, rc, n_rc, true, above, ret);
}

/* the basis that names the newest release at or below the pin (top)
 * before the able-release walk, or RULE_NONE to walk */
static enum rule_basis rule_top_basis(const struct rule_merged *top, const struct rule_answer *a,
                                      bool *ret_stop)
{
	const struct rule_status *st = &a->status;
	bool reference = top->declared && top->reference;
	*ret_stop = true;
	if (!st->valid)
		return reference ? RULE_REFERENCE : RULE_NO_STATUS;
	if (a->pin_holds && release_less(a->pin.release, st->version))
		return a->pin.forced ? RULE_PIN_FORCED : RULE_NONE;
	if (release_less(top->release, st->version))
		/* a downgrade needs every member at or above the status gone;
		 * one above the pin still counts */
		return release_less(a->newest, st->version) ? RULE_DOWNGRADE : RULE_NONE;
	if (reference)
		return RULE_REFERENCE; /* the pin's release asks for it: only it campaigns */
	*ret_stop = false;
	return RULE_NONE;
}

/* the rule without health */
static void rule_decide_base(const struct rule_release *local, const struct relcount *rc,
                             size_t n_rc, bool any_invalid, const struct rule_status *status,
                             const struct rule_pin *pin, struct rule_answer *ret)
{
	struct rule_answer a = {.basis = RULE_NONE, .invalid = any_invalid, .status = *status};
	struct release r = {0, 0, 0};
	if (pin && pin->set)
		a.pin = *pin;
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
	a.pin_holds = a.pin.set && release_less(a.pin.release, a.newest);
	if (newest.undeclared || (!a.pin_holds && newest.reference)) {
		/* an older host reads no pin: it campaigns as the newest */
		a.basis = RULE_REFERENCE;
		a.pin_holds = false;
		*ret = a;
		return;
	}
	if (!rule_top(local, rc, n_rc, &a, &r)) {
		*ret = a; /* no member at or below the pin */
		return;
	}
	struct rule_merged top = rule_merged_of(r, local, rc, n_rc);
	bool stop;
	a.basis = rule_top_basis(&top, &a, &stop);
	a.release = r;
	if (stop) {
		*ret = a;
		return;
	}
	/* newest first: the first that can act is the answer */
	for (;;) {
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

void release_rule_decide_pinned(const struct rule_release *local, const struct relcount *rc,
                                size_t n_rc, bool any_invalid, const struct rule_status *status,
                                const struct rule_pin *pin, struct rule_answer *ret)
{
	rule_decide_base(local, rc, n_rc, any_invalid, status, pin, ret);
	if (ret->basis != RULE_NONE)
		rule_apply_health(local, rc, n_rc, ret);
}

void release_rule_decide(const struct rule_release *local, const struct relcount *rc, size_t n_rc,
                         bool any_invalid, const struct rule_status *status,
                         struct rule_answer *ret)
{
	release_rule_decide_pinned(local, rc, n_rc, any_invalid, status, NULL, ret);
}

bool release_rule_successor_restriction(const struct relcount *rc, size_t n_rc, bool any_invalid,
                                        const struct rule_status *status,
                                        const struct rule_pin *pin,
                                        const struct rule_release *incoming,
                                        struct rule_status *ret)
{
	struct rule_answer a;
	release_rule_decide_pinned(NULL, rc, n_rc, any_invalid, status, pin, &a);
	/* only for the release the leaving node itself brings in: its new
	 * instance is initialised and campaigns next, so a successor exists */
	if (a.basis != RULE_ALL_COMPATIBLE || !status->valid ||
	    release_cmp(a.release, incoming->release) != 0)
		return false;
	struct rule_merged m = rule_merged_of(a.release, NULL, rc, n_rc);
	if (!m.declared || !release_less(status->min_compatible, m.min_compatible))
		return false; /* the status allows its change already */
	*ret = release_rule_restriction(status, a.release, m.min_compatible);
	return true;
}

struct rule_status release_rule_restriction(const struct rule_status *status, struct release rel,
                                            struct release mcr)
{
	return (struct rule_status){
		.valid = true,
		.version = release_less(status->version, rel) ? status->version : rel,
		.min_compatible = release_less(status->min_compatible, mcr) ? mcr
		                                                            : status->min_compatible,
	};
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

/* why under a pin: a release above it, a pin below the status not forced,
 * or no release at or below it that can act */
static const char *rule_explain_pin(const struct rule_answer *a, struct release mine, char *buf,
                                    size_t len)
{
	char x[RELEASE_STRLEN], y[RELEASE_STRLEN], z[RELEASE_STRLEN];
	release_format(mine, x, sizeof(x));
	release_format(a->pin.release, y, sizeof(y));
	if (release_less(a->pin.release, mine) && a->basis != RULE_NONE)
		snprintf(buf, len, "release %s is newer than the pin %s: release %s leads meanwhile "
		         "(until the pin moves or goes)", x, y,
		         release_format(a->release, z, sizeof(z)));
	else if (a->status.valid && release_less(a->pin.release, a->status.version) &&
	         !a->pin.forced)
		snprintf(buf, len, "the pin %s is below the status's version %s and was not forced: "
		         "no release campaigns", y, release_format(a->status.version, z, sizeof(z)));
	else if (release_less(a->pin.release, mine))
		snprintf(buf, len, "release %s is newer than the pin %s, and no release at or below "
		         "the pin can act now", x, y);
	else
		snprintf(buf, len, "no release at or below the pin %s can act now (a member at or "
		         "above the status's version %s remains above the pin, or the pin's "
		         "releases are not compatible with every member)",
		         y, release_format(a->status.version, z, sizeof(z)));
	return buf;
}

const char *release_rule_explain(const struct rule_answer *a, struct release mine, char *buf,
                                 size_t len)
{
	char x[RELEASE_STRLEN], y[RELEASE_STRLEN], z[RELEASE_STRLEN], w[RELEASE_STRLEN];
	if (a->basis != RULE_NONE && release_cmp(mine, a->release) == 0)
		return NULL;
	if (a->pin_holds)
		return rule_explain_pin(a, mine, buf, len);
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

const char *release_rule_basis_text(enum rule_basis b)
{
	switch (b) {
	case RULE_REFERENCE:
		return "the newest release asks for the reference rule (only the newest campaigns)";
	case RULE_NO_STATUS:
		return "no valid status yet: the newest release reconciles first";
	case RULE_DOWNGRADE:
		return "no member at or above the status's version remains (a downgrade)";
	case RULE_STATUS_ALLOWS:
		return "the status already allows its change";
	case RULE_ALL_COMPATIBLE:
		return "every member runs at least its min_compatible_release";
	case RULE_PIN_FORCED:
		return "a forced pin below the status's version hands the state back to it";
	case RULE_NONE:
		break;
	}
	return NULL;
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
