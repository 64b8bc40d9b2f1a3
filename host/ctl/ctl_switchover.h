/* SPDX-License-Identifier: MIT */
/*
 * ctl_switchover.h - leaseholdctl's `switchover NAME [--to NODE] [--timeout
 * DUR]`: the argument rules, the request and what its answer means (the
 * exit code). ctl_main.c dispatches to it.
 */
#ifndef LH_CTL_SWITCHOVER_H
#define LH_CTL_SWITCHOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/control.pb-c.h"

/* the extra time leaseholdctl waits beyond the switchover's timeout for the
 * daemon's answer: the request's own etcd calls and the answer's margin */
#define CTL_SWITCHOVER_MARGIN_MS 35000

/* ctl_switchover_parse_timeout - DUR: seconds ("30", "2.5"), or with a
 * unit ("1500ms", "30s", "2m"); NULL = the default (30 s). Returns 0 or
 * -EINVAL (not a duration, or outside 2 s .. 1 h), *ret_ms untouched then. */
int ctl_switchover_parse_timeout(const char *s, uint32_t *ret_ms);

/* ctl_switchover_encode - the request (caller frees *ret_buf); to may be
 * NULL. 0 or -errno. */
int ctl_switchover_encode(const char *name, const char *to, uint32_t timeout_ms,
                          uint8_t **ret_buf, size_t *ret_len);

/* ctl_switchover_result - print what the daemon answered and return the
 * exit code: 0 the switchover happened (the leader is the target, or
 * another node without --to), 1 it did not (ended, timed out, the write
 * failed), 2 refused (the reason is printed) or another error. */
int ctl_switchover_result(const Leasehold__Control__Response *r, const char *name,
                          const char *to, bool json);

#endif
