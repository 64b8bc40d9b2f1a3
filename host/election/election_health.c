/* SPDX-License-Identifier: MIT */
/*
 * election_health.c - reconciles failed in a row and the hold-down (see
 * election_health.h).
 */
#include "config.h"

#include <string.h>

#include "election/election_health.h"

void election_health_init(struct election_health *h, const struct election_health_config *cfg)
{
	memset(h, 0, sizeof(*h));
	h->cfg = *cfg;
	if (h->cfg.hold_down_max_ns < h->cfg.hold_down_ns)
		h->cfg.hold_down_max_ns = h->cfg.hold_down_ns;
}

/* the next hold-down: doubled when the last one ended within the window */
static uint64_t election_health_next_hold(const struct election_health *h, uint64_t now)
{
	uint64_t base = h->cfg.hold_down_ns, cap = h->cfg.hold_down_max_ns;
	if (!h->hold || !h->last_end || now - h->last_end > cap)
		return base;
	return h->hold > cap / 2 ? cap : h->hold * 2;
}

bool election_health_result(struct election_health *h, bool ok, uint64_t now)
{
	if (h->unhealthy)
		return false; /* a late result of the term the node left */
	if (ok) {
		h->failures = 0;
		return false;
	}
	if (h->failures < UINT32_MAX)
		h->failures++;
	if (h->cfg.after == 0 || h->failures < h->cfg.after)
		return false;
	h->hold = election_health_next_hold(h, now);
	h->until = now + h->hold;
	h->unhealthy = true;
	h->episodes++;
	return true;
}

bool election_health_tick(struct election_health *h, uint64_t now)
{
	if (!h->unhealthy || now < h->until)
		return false;
	h->unhealthy = false;
	h->failures = 0;
	h->last_end = now;
	return true;
}

void election_health_reset(struct election_health *h)
{
	struct election_health_config cfg = h->cfg;
	uint64_t episodes = h->episodes;
	election_health_init(h, &cfg);
	h->episodes = episodes;
}
