/* SPDX-License-Identifier: MIT */
/*
 * cpuload.h - a `stress`-like CPU load for tests: busy child processes of the
 * test's own, killed by cpuload_stop or, at the latest, when the test exits
 * (normally or by a fatal signal the harness catches).
 */
#ifndef LH_TEST_CPULOAD_H
#define LH_TEST_CPULOAD_H

/* cpuload_start - fork n (at most 8) children that spin on the CPU until
 * killed. Exits the test on failure. */
void cpuload_start(int n);
/* cpuload_stop - SIGKILL and reap them (nothing when none run) */
void cpuload_stop(void);

#endif
