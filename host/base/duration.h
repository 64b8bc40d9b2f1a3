/* SPDX-License-Identifier: MIT */
/*
 * duration.h - durations as operators write them ("500ms", "5s", "2m",
 * "1h" or plain, fractional seconds), for flags, the configuration file and
 * per-plugin rules. Pure functions, any thread.
 */
#ifndef LH_DURATION_H
#define LH_DURATION_H

#include <stdint.h>

/* duration_parse - s -> *ret_ns. Returns 0, or -EINVAL (empty, negative,
 * not finite, an unknown unit, over 1e18 ns) with *ret_ns untouched. */
int duration_parse(const char *s, uint64_t *ret_ns);

#endif
