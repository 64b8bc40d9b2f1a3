/* SPDX-License-Identifier: MIT */
/*
 * rng.h - the garbage tests' generator (header-only): xorshift64, the same
 * sequence for the same seed on every run, so a failing input can be found
 * again. Not for anything but tests.
 */
#ifndef LH_TEST_RNG_H
#define LH_TEST_RNG_H

#include <stdint.h>

/* test_rng_next - the next value from *state (seeded non-zero) */
static inline uint64_t test_rng_next(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

#endif
