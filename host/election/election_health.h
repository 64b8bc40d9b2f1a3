/* SPDX-License-Identifier: MIT */
/*
 * election_health.h - one plugin's health on this node: reconciles failed
 * in a row, and the hold-down a node sits out once they reach a limit.
 *
 * Design notes
 * - A failure is a finished reconcile that did not succeed: the plugin's
 *   error return, a crash of its worker during the reconcile, a callback
 *   timeout (the runtime completes the reconcile with -EIO for both). A
 *   success resets the count; a reconcile dropped before it ran counts
 *   for nothing.
 * - At `after` failures in a row the node becomes unhealthy for a
 *   hold-down: it withdraws its candidacy (election_release_rule.h says
 *   when that moves leadership) and publishes it in its member record.
 *   Results that arrive while unhealthy (a late completion of the term it
 *   left) are ignored. When the hold-down ends the node is healthy again
 *   with the count at 0: it campaigns once more and needs `after` fresh
 *   failures to withdraw again, so a release that keeps failing changes
 *   leadership at most once per hold-down.
 * - The hold-down doubles when the node becomes unhealthy again within
 *   `hold_down_max_ns` of the end of the previous one, up to that cap;
 *   otherwise it starts again from `hold_down_ns`.
 * - after == 0: health is off (the node never becomes unhealthy).
 * Threading: none; pure functions of the state and the times given (the
 * loop's monotonic clock, ns), any thread.
 */
#ifndef LH_ELECTION_HEALTH_H
#define LH_ELECTION_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

/* defaults of --unhealthy-after and --unhealthy-hold-down, and the cap */
#define HEALTH_DEFAULT_AFTER 3u
#define HEALTH_DEFAULT_HOLD_DOWN_NS (30ull * 1000000000ull)
#define HEALTH_HOLD_DOWN_CAP_NS (600ull * 1000000000ull)

struct election_health_config {
	uint32_t after;        /* failures in a row that make the node unhealthy; 0 = off */
	uint64_t hold_down_ns; /* the first hold-down */
	uint64_t hold_down_max_ns; /* the cap of the doubling, and its window */
};

struct election_health {
	struct election_health_config cfg;
	uint32_t failures;  /* reconciles failed in a row (0 while unhealthy: reset at its end) */
	bool unhealthy;
	uint64_t until;     /* the hold-down ends (valid while unhealthy) */
	uint64_t hold;      /* the length of the current (or last) hold-down, 0 = none yet */
	uint64_t last_end;  /* when the last hold-down ended, 0 = never */
	uint64_t episodes;  /* times this node became unhealthy */
};

/* election_health_init - a healthy state; cfg copied, a hold_down_max_ns
 * below hold_down_ns taken as hold_down_ns */
void election_health_init(struct election_health *h, const struct election_health_config *cfg);

/* election_health_result - one finished reconcile (ok: it succeeded) at
 * now. Returns true when it made the node unhealthy (h->until is then the
 * end of the hold-down). */
bool election_health_result(struct election_health *h, bool ok, uint64_t now);

/* election_health_tick - the hold-down ends when now >= h->until: healthy
 * again, the count at 0. Returns true when it ended now. */
bool election_health_tick(struct election_health *h, uint64_t now);

/* election_health_reset - healthy, count 0, no doubling history (a new
 * plugin build was loaded: it gets a fresh start) */
void election_health_reset(struct election_health *h);

#endif
