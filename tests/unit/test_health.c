/* SPDX-License-Identifier: MIT */
/*
 * test_health.c - the health state machine (host/election/election_health.h):
 * reconciles failed in a row, the hold-down, its doubling and its cap.
 * Pure: times are given, nothing waits.
 */
#include "config.h"

#include "check.h"
#include "election/election_health.h"

#define S 1000000000ull

static const struct election_health_config cfg3 = {
    .after = 3, .hold_down_ns = 30 * S, .hold_down_max_ns = 600 * S};

/* K failures in a row make the node unhealthy; a success in between resets */
static void test_health_after_k_failures_in_a_row(void)
{
	struct election_health h;
	election_health_init(&h, &cfg3);
	CHECK(!election_health_result(&h, false, 1 * S));
	CHECK(!election_health_result(&h, false, 2 * S));
	CHECK(!election_health_result(&h, true, 3 * S));
	CHECK_INT_EQ(h.failures, 0);
	CHECK(!election_health_result(&h, false, 4 * S));
	CHECK(!election_health_result(&h, false, 5 * S));
	CHECK(!h.unhealthy);
	CHECK(election_health_result(&h, false, 6 * S));
	CHECK(h.unhealthy);
	CHECK_INT_EQ(h.failures, 3);
	CHECK_INT_EQ(h.until, 36 * S);
	CHECK_INT_EQ(h.episodes, 1);
	/* a late result while unhealthy changes nothing */
	CHECK(!election_health_result(&h, false, 7 * S));
	CHECK(!election_health_result(&h, true, 7 * S));
	CHECK(h.unhealthy && h.failures == 3);
}

/* the hold-down ends at its time, not before; the count starts from 0 */
static void test_health_hold_down_ends(void)
{
	struct election_health h;
	election_health_init(&h, &cfg3);
	for (int i = 0; i < 3; i++)
		election_health_result(&h, false, 10 * S);
	CHECK(!election_health_tick(&h, 39 * S));
	CHECK(h.unhealthy);
	CHECK(election_health_tick(&h, 40 * S));
	CHECK(!h.unhealthy && h.failures == 0);
	CHECK(!election_health_tick(&h, 41 * S));
	/* K fresh failures are needed again */
	CHECK(!election_health_result(&h, false, 41 * S));
	CHECK(!election_health_result(&h, false, 42 * S));
	CHECK(!h.unhealthy);
}

/* repeats within the window double the hold-down up to the cap; a quiet
 * spell longer than the window starts from the first hold-down again */
static void test_health_hold_down_doubles_and_caps(void)
{
	struct election_health h;
	election_health_init(&h, &cfg3);
	uint64_t now = 100 * S, want = 30 * S;
	for (int round = 0; round < 8; round++) {
		for (int i = 0; i < 3; i++)
			election_health_result(&h, false, now);
		CHECK(h.unhealthy);
		CHECK_INT_EQ(h.until - now, want);
		now = h.until;
		CHECK(election_health_tick(&h, now));
		now += 1 * S;
		want = want * 2 > 600 * S ? 600 * S : want * 2;
	}
	CHECK_INT_EQ(h.hold, 600 * S);
	now += 601 * S;
	for (int i = 0; i < 3; i++)
		election_health_result(&h, false, now);
	CHECK_INT_EQ(h.until - now, 30 * S);
	CHECK_INT_EQ(h.episodes, 9);
}

/* after == 0: never unhealthy; reset: a fresh start without history */
static void test_health_off_and_reset(void)
{
	struct election_health h;
	struct election_health_config off = cfg3;
	off.after = 0;
	election_health_init(&h, &off);
	for (int i = 0; i < 100; i++)
		CHECK(!election_health_result(&h, false, (uint64_t)i * S));
	CHECK(!h.unhealthy);
	election_health_init(&h, &cfg3);
	for (int i = 0; i < 3; i++)
		election_health_result(&h, false, 1 * S);
	election_health_reset(&h);
	CHECK(!h.unhealthy && h.failures == 0 && h.hold == 0);
	CHECK_INT_EQ(h.episodes, 1);
	/* a cap below the first hold-down is the first hold-down */
	struct election_health_config odd = {.after = 1, .hold_down_ns = 50 * S,
	                                     .hold_down_max_ns = 10 * S};
	election_health_init(&h, &odd);
	CHECK(election_health_result(&h, false, 0));
	CHECK_INT_EQ(h.until, 50 * S);
}

int main(void)
{
	RUN(test_health_after_k_failures_in_a_row);
	RUN(test_health_hold_down_ends);
	RUN(test_health_hold_down_doubles_and_caps);
	RUN(test_health_off_and_reset);
	return 0;
}
