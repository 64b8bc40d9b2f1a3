/* SPDX-License-Identifier: MIT */
/*
 * election_release_rule.h - which release of a plugin may campaign: a pure
 * function of the member records and the status record (no etcd, no loop),
 * so that every host computes the same answer from the same mirror and a
 * test can check it over every small world.
 *
 * Design notes
 * - The newest release that can act leads (the default). A release R can
 *   act when
 *     (b) R is not older than the status's version, and
 *     (a) every member runs at least R's min_compatible_release and no
 *         member record is undecodable, or the status already allows R's
 *         change (its min_compatible_release >= R's).
 *   No status (or one that does not decode) lets any release act: nothing
 *   serves yet, the leader reconciles first (the reference algorithm).
 * - The reference rule (Monogon's): only the newest member release
 *   campaigns, whether or not it can act yet. It applies when the newest
 *   member release asks for it (its plugin's descriptor flag
 *   LH_PLUGIN_F_REFERENCE_ROLLOUT), and for a release whose member record
 *   was written by an older leasehold that does not publish its rule (such
 *   a host campaigns only as the newest, so the others must not either).
 *   Only the newest release's choice counts: only a release knows whether
 *   its change lets the older ones keep acting.
 * - A downgrade: when no member runs a release at or above the status's
 *   version, every such member left on purpose (forgotten, left, its file
 *   removed or replaced by an older one: member records leave only so), and
 *   the newest member release campaigns as under the reference rule; its
 *   leader restricts the status before it reconciles.
 * - Duplicates: records of one release that differ (a rebuilt file, a host
 *   of an older leasehold) are merged to the strictest: the highest
 *   min_compatible_release, the reference rule if any asks for it.
 * - The pin (an operator's record, P/N/pin): a separate input. With a pin
 *   at P no release newer than P campaigns: the answer is the newest
 *   release <= P that can act, as above (members newer than P still count
 *   for (a): they are members). A pin below the status's version counts
 *   only when the operator forced it (leaseholdctl release pin --force):
 *   then the newest release <= P campaigns as in a downgrade (its leader
 *   restricts the status to its own version before it reconciles: the
 *   reconciled state is handed back to an older reconciler by the
 *   operator's explicit choice). Such a pin not forced lets nobody
 *   campaign. Hosts of an older leasehold do not read the pin: their
 *   undeclared release still campaigns as the newest, the pin or not.
 * - Health (election_health.h): a member record says whether its node
 *   withdrew for a hold-down (unhealthy); a release is healthy when one of
 *   its records is not. When the release the rule above names is healthy,
 *   only its healthy nodes campaign. When none of its members is healthy
 *   and it was named because it can act (no status, the status allows it,
 *   every member compatible), the answer moves down to the newest healthy
 *   release below it that can act, never older than the status's version
 *   (so once the new release has written its status, no older one takes
 *   over). When there is no such release (or the answer came from the
 *   reference rule or a downgrade, which name the newest on purpose),
 *   the answer stays and every node of it campaigns, healthy or not: the
 *   one in office keeps leading rather than none.
 * Threading: none; pure functions, any thread.
 */
#ifndef LH_ELECTION_RELEASE_RULE_H
#define LH_ELECTION_RELEASE_RULE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/release.h"

/* one member record's releases as the rule reads them */
struct rule_release {
	struct release release;
	struct release min_compatible; /* valid when declared */
	struct release min_reconciler; /* valid when declared */
	bool reference; /* the plugin asks for the reference rule (valid when declared) */
	/* the record carries the three fields above: written by a host of
	 * this leasehold or newer. false: an older host wrote it; its node
	 * follows the reference rule whatever its plugin says. */
	bool declared;
	/* its node withdrew for a hold-down (false in a record of an older
	 * host: those never withdraw) */
	bool unhealthy;
	/* shown only, never read by the rule: the hold-down's end as the
	 * node's wall clock had it (unix s; 0 = unknown) */
	int64_t unhealthy_until;
};

/* a distinct member record (all fields of rule_release equal) and how many
 * members hold it (the reference algorithm's releaseCount) */
struct relcount {
	struct rule_release rr;
	size_t count;
};

/* the status as the rule reads it: valid = present and decodes */
struct rule_status {
	bool valid;
	struct release version;
	struct release min_compatible;
};

/* why the answer is what it is */
enum rule_basis {
	RULE_NONE = 0,          /* no release can act now */
	RULE_REFERENCE,         /* the newest release asks for the reference rule */
	RULE_NO_STATUS,         /* no valid status: the newest release reconciles first */
	RULE_DOWNGRADE,         /* no member at or above the status's version remains */
	RULE_STATUS_ALLOWS,     /* the status already allows its change */
	RULE_ALL_COMPATIBLE,    /* every member runs at least its min_compatible_release */
	RULE_PIN_FORCED,        /* a forced pin below the status's version: handed back */
};

/* the operator's pin as the rule reads it: set = present and decodes */
struct rule_pin {
	bool set;
	bool forced; /* written with --force (it may be below the status's version) */
	struct release release;
};

struct rule_answer {
	enum rule_basis basis;
	struct release release; /* the release that may campaign (basis != RULE_NONE) */
	struct release newest;  /* the newest member release */
	struct release newest_min_compatible; /* its min_compatible_release (merged) */
	struct release oldest;  /* the oldest member release */
	bool invalid;           /* a member record does not decode */
	struct rule_status status;
	struct rule_pin pin;    /* the pin the answer was decided under */
	bool pin_holds;         /* a member release newer than the pin is held back by it */
	/* health: the answer's release has a healthy member (then only its
	 * healthy nodes campaign; else all of them do) */
	bool healthy;
	/* the health-free rule named `passed_over`, none of whose members is
	 * healthy; health moved the answer down to `release` */
	bool moved;
	struct release passed_over;
};

/* release_rule_decide - the release that may campaign, from the member
 * records (rc[0..n_rc), each distinct record once; local, this node's own
 * releases, always counts: may be NULL) and the status. Writes *ret (always,
 * ret_->basis RULE_NONE when no release can act, also when there is no
 * member at all). Pure. */
void release_rule_decide(const struct rule_release *local, const struct relcount *rc, size_t n_rc,
                         bool any_invalid, const struct rule_status *status,
                         struct rule_answer *ret);

/* release_rule_decide_pinned - release_rule_decide under the operator's
 * pin (NULL or !set: none, the same answer as release_rule_decide). */
void release_rule_decide_pinned(const struct rule_release *local, const struct relcount *rc,
                                size_t n_rc, bool any_invalid, const struct rule_status *status,
                                const struct rule_pin *pin, struct rule_answer *ret);

/* release_rule_restriction - the restricted status a leader of release
 * `rel` (its min_compatible_release `mcr`) writes over `status` (valid)
 * before it reconciles a change the status does not allow: the older of
 * the two versions, the higher of the two minimum compatible releases.
 * Pure. */
struct rule_status release_rule_restriction(const struct rule_status *status, struct release rel,
                                            struct release mcr);

/* release_rule_successor_restriction - the status a leader hands to its
 * successor in the txn that ends its term by publishing `incoming` in its
 * own member record (a hot reload to another release): rc[0..n_rc) are
 * the member records as they are once that txn applied. When under them
 * the release that may campaign is `incoming`'s own release, named
 * because every member is compatible with its change (RULE_ALL_COMPATIBLE),
 * and the status does not allow that change yet, *ret is the restriction
 * that release's leader writes first (election_lead_decide: the version
 * kept, the minimum compatible release raised to the release's, its
 * records merged to the strictest) and true is returned; false otherwise
 * (*ret untouched). Written in the same txn, it lets the successor find a
 * status it may reconcile on without writing it first. Why this is safe:
 * docs/design.md, "The leaving leader restricts for its successor". Pure. */
bool release_rule_successor_restriction(const struct relcount *rc, size_t n_rc, bool any_invalid,
                                        const struct rule_status *status,
                                        const struct rule_pin *pin,
                                        const struct rule_release *incoming,
                                        struct rule_status *ret);

/* release_rule_may_campaign - a node whose record is `mine` campaigns under
 * answer a: its release is the answer's, and, when mine was written by an
 * older host (!declared), only as the newest (it follows the reference
 * rule whatever the others decide); an unhealthy node only while no member
 * of its release is healthy */
bool release_rule_may_campaign(const struct rule_answer *a, const struct rule_release *mine);

/* release_rule_explain - why a node of release `mine` may not campaign
 * under a: one sentence, in buf or a static string (returned; valid while
 * buf is); NULL when it may */
const char *release_rule_explain(const struct rule_answer *a, struct release mine, char *buf,
                                 size_t len);

/* release_rule_basis_text - the basis in words ("every member is
 * compatible with its change", ...); a static string, NULL for RULE_NONE */
const char *release_rule_basis_text(enum rule_basis b);

/* release_rule_equal - every field the rule reads is equal (health
 * included; unhealthy_until is not read) */
bool release_rule_equal(const struct rule_release *a, const struct rule_release *b);

#endif
