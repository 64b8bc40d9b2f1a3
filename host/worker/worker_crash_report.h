/* SPDX-License-Identifier: MIT */
/*
 * worker_crash_report.h - one log line when a plugin takes its process down from
 * inside a callback: a fatal signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE,
 * SIGILL) on the thread running the callback, or exit() called by plugin
 * code. Without it, a thread-isolation daemon killed by a plugin leaves no
 * trace of which plugin and which callback did it.
 *
 * Design notes
 * - Each callback thread publishes, before every callback, a line prepared
 *   in advance ("plugin NAME, callback KIND") in a thread-local pointer, and
 *   clears it afterwards (crash_report_enter / crash_report_leave). The
 *   signal handler only reads that pointer and write(2)s a line composed on
 *   its stack with plain byte copies: async-signal-safe, no malloc, no
 *   stdio, no locks.
 * - The handler then puts back the disposition that was there before it
 *   (SIG_DFL, or a sanitizer's handler) and lets the signal take its course:
 *   a fault re-executes the faulting instruction, a sent signal (abort(),
 *   kill) is raised again. The process dies as it would have, with the
 *   same status and core dump, one line later.
 * - exit() from plugin code runs the atexit hook on the calling thread,
 *   which finds the published line. exit() from anywhere else (the daemon's
 *   own main thread) finds none and writes nothing. _exit() and a SIGKILL
 *   cannot be caught: the docs say so.
 * - A thread that is not in a callback writes nothing: the crash is not a
 *   plugin's (or not known to be).
 */
#ifndef LH_CRASH_REPORT_H
#define LH_CRASH_REPORT_H

/* crash_report_install - install the handlers and the atexit hook, once per
 * process (later calls do nothing). `consequence` (a string literal or
 * other storage that lives as long as the process) ends every line, e.g.
 * "the daemon dies with it (thread isolation)". Returns 0 or -errno. */
int crash_report_install(const char *consequence);

/* crash_report_enter - the calling thread is about to run a callback;
 * `who` ("plugin NAME, callback KIND") must stay valid until
 * crash_report_leave. crash_report_leave - the callback returned. */
void crash_report_enter(const char *who);
void crash_report_leave(void);

#endif
