/* SPDX-License-Identifier: MIT */
/*
 * ctl_timeout.h - the --timeout DUR of every leaseholdctl verb that waits:
 * one syntax, the durations of the daemon's flags (base/duration.h): plain
 * seconds ("30", "2.5") or with a unit ("1500ms", "30s", "2m", "1h").
 * Pure; any thread.
 */
#ifndef LH_CTL_TIMEOUT_H
#define LH_CTL_TIMEOUT_H

#include <stdint.h>

/* ctl_timeout_parse - s as whole milliseconds, rounded up (never wait less
 * than asked); NULL = dflt_ms. Returns 0, or -EINVAL (not a duration, or
 * outside min_ms..max_ms) with *ret_ms untouched. */
int ctl_timeout_parse(const char *s, uint32_t dflt_ms, uint32_t min_ms, uint32_t max_ms,
                      uint32_t *ret_ms);

#endif
