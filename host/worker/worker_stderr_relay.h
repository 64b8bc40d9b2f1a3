/* SPDX-License-Identifier: MIT */
/*
 * worker_stderr_relay.h - a plugin's stray output, prefixed with its name.
 *
 * A plugin may write to stdout/stderr directly (printf, a library's
 * diagnostics) instead of logging through the host (lh_logf). In a
 * leasehold-worker (--isolation process) those fds become a pipe; a relay
 * process reads it and writes each line as a log line of the plugin
 * ("plugin NAME: <line>", level info) in the daemon's format to the
 * worker's original stderr. The relay is a process of its own, not a
 * thread, so that what a crashing plugin wrote last (often the why) is
 * still relayed after the worker died: it ends when every write end is
 * closed, i.e. once the worker (and whatever the plugin spawned) exited.
 *
 * Thread mode has no such relay: the plugin shares the daemon's fds, and
 * redirecting the daemon's own stderr would hide its logs if the relay
 * failed. Plugins log through lh_logf; stray output of a thread-mode plugin
 * appears unprefixed.
 */
#ifndef LH_STDERR_RELAY_H
#define LH_STDERR_RELAY_H

/* stderr_relay_start - make fds 1 and 2 the relay's pipe; the logger keeps
 * the original stderr (log_set_fd). component names the plugin ("plugin
 * NAME"; copied). Call while single-threaded (it forks), after the log
 * level, format and prefix are set. Returns 0 or -errno (nothing changed).
 * The relay ignores SIGINT/SIGTERM/SIGHUP (a terminal's or a service
 * manager's signal to the group must not cut what it still has to write). */
int stderr_relay_start(const char *component);

#endif
