/* SPDX-License-Identifier: MIT */
/*
 * ctl_redraw.h - `-w/--watch` on a listing verb: ask again at most every
 * CTL_REDRAW_MS, print the answer again only when what it prints changed,
 * until SIGINT or SIGTERM. The control socket has no change stream, so the
 * answer is polled (a daemon answers from its published view, at no etcd
 * cost); the loop has no deadline of its own.
 *
 * Single-threaded; blocks SIGINT and SIGTERM for the loop (they end it).
 */
#ifndef LH_CTL_REDRAW_H
#define LH_CTL_REDRAW_H

#include <stdbool.h>

#define CTL_REDRAW_MS 500

/* ctl_redraw_loop - call once(arg), which prints one answer to stdout and
 * returns an exit code; print its output when it differs from the last
 * one, preceded (header) by a line with the time (RFC 3339, UTC) for a
 * table, or with the screen cleared first when stdout is a terminal.
 * Returns 0 once interrupted, or the first exit code once() returned
 * that is not 0 (its output printed). */
int ctl_redraw_loop(int (*once)(void *arg), void *arg, bool header);

#endif
