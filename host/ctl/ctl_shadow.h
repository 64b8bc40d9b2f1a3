/* SPDX-License-Identifier: MIT */
/*
 * ctl_shadow.h - leaseholdctl's `shadow NAME [--node NODE] [--timeout DUR]
 * [-o json]`: the request and its report (a table or JSON) and what the
 * answer means (the exit code). ctl_main.c dispatches to it.
 */
#ifndef LH_CTL_SHADOW_H
#define LH_CTL_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/control.pb-c.h"

/* the time leaseholdctl waits beyond the run's timeout for the answer */
#define CTL_SHADOW_MARGIN_MS 5000
#define CTL_SHADOW_TIMEOUT_DEFAULT_MS 10000u
#define CTL_SHADOW_TIMEOUT_MIN_MS 100u
#define CTL_SHADOW_TIMEOUT_MAX_MS 600000u

/* ctl_shadow_parse_timeout - DUR: seconds ("10", "2.5") or with a unit
 * (500ms, 10s, 2m), 100 ms to 10 min; NULL = the default. 0 or -EINVAL. */
int ctl_shadow_parse_timeout(const char *s, uint32_t *ret_ms);

/* ctl_shadow_result - print the daemon's answer r to a shadow run of
 * plugin name (json: one object on stdout; else a summary line and a
 * table; a failure on stderr) and return the exit code: 0 the run
 * completed, 1 it timed out or the reconcile failed (what was captured is
 * still printed), 2 refused. */
int ctl_shadow_result(const Leasehold__Control__Response *r, const char *name, bool json);

#endif
