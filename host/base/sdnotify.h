/* SPDX-License-Identifier: MIT */
/*
 * sdnotify.h - systemd's service notification protocol (sd_notify(3)),
 * spoken directly: one AF_UNIX datagram of "KEY=VALUE\n..." lines to the
 * socket named by $NOTIFY_SOCKET (a path, or an abstract name written with a
 * leading '@'). No libsystemd: the protocol is documented and stable, and
 * the daemon then runs the same way with or without systemd.
 *
 * Design notes
 * - sdnotify_from_env() reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID
 *   once and removes them from the environment, so that the plugin workers
 *   the daemon spawns never talk to systemd as if they were the service.
 *   Call it before any thread starts (it changes the environment).
 * - Not thread-safe: one owner (the daemon's loop thread) sends.
 * - Sending never blocks (MSG_DONTWAIT) and a failed send is reported to the
 *   caller and otherwise ignored: systemd being away must not stop the
 *   daemon.
 */
#ifndef LH_SDNOTIFY_H
#define LH_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct sdnotify;

/* sdnotify_from_env - the notifier systemd asked for, or *ret_n = NULL when
 * NOTIFY_SOCKET is unset or empty (then every other call is a no-op).
 * *ret_watchdog_ns is the ping interval to use (half of WATCHDOG_USEC), or 0
 * when WATCHDOG_USEC is unset, invalid, or WATCHDOG_PID names another
 * process. Returns 0 or -errno (-EINVAL: NOTIFY_SOCKET is not a usable
 * address); on failure nothing is returned and the environment is
 * unchanged. */
int sdnotify_from_env(struct sdnotify **ret_n, uint64_t *ret_watchdog_ns);

/* sdnotify_new - a notifier for `address` (as in NOTIFY_SOCKET). 0 or
 * -errno (-EINVAL for an empty, relative or too long address). */
int sdnotify_new(const char *address, struct sdnotify **ret_n);

/* sdnotify_free - accepts NULL. */
void sdnotify_free(struct sdnotify *n);

/* sdnotify_send - send `state` (one or more "KEY=VALUE" lines) as one
 * datagram. n may be NULL (no-op, returns 0). Returns 0 or -errno. */
int sdnotify_send(struct sdnotify *n, const char *state);

/* sdnotify_watchdog_interval - the ping interval for WATCHDOG_USEC `usec`
 * and WATCHDOG_PID `pid` (either may be NULL) in process `self`: half the
 * timeout in ns, or 0 when there is no watchdog for this process. */
uint64_t sdnotify_watchdog_interval(const char *usec, const char *pid, pid_t self);

#endif
