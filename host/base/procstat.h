/* SPDX-License-Identifier: MIT */
/*
 * procstat.h - what the kernel says about this process (Linux /proc/self):
 * CPU time, memory, file descriptors and start time, for the standard
 * Prometheus process_* metrics (the names and meanings of the Prometheus
 * client libraries' process collector).
 *
 * Design notes
 * - procfs reads are served by the kernel from memory and never wait on a
 *   device or another thread, so the loop may call procstat_read (the
 *   daemon does, once per metrics snapshot).
 * - Each field is read on its own: a field the kernel does not give (a
 *   /proc mounted with hidepid, a limit of RLIM_INFINITY) is reported
 *   absent (its have_ flag false), never as 0.
 * - No state; any thread.
 */
#ifndef LH_PROCSTAT_H
#define LH_PROCSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procstat {
	bool have_cpu;
	double cpu_seconds; /* user + system CPU time of every thread */
	bool have_start;
	double start_time_unix; /* when the process started, seconds since the epoch */
	bool have_mem;
	double resident_bytes; /* resident set size */
	double virtual_bytes;  /* virtual memory size */
	bool have_fds;
	uint64_t open_fds; /* entries of /proc/self/fd */
	bool have_max_fds;
	uint64_t max_fds; /* RLIMIT_NOFILE's soft limit */
};

/* procstat_read - fill *ret (always: fields that cannot be read are marked
 * absent). Returns 0 when every field was read, -errno of the first that
 * was not. */
int procstat_read(struct procstat *ret);

/* procstat_parse_stat - the fields of one /proc/PID/stat line (buf, len
 * bytes; need not be NUL-terminated) into *ret: CPU time, start time
 * relative to boot (clock ticks converted with ticks_per_s, then offset by
 * boot_time_unix), virtual and resident memory (pages of page_size bytes).
 * The command name may hold spaces and parentheses: fields are counted
 * after its last ')'. Returns 0 or -EINVAL (*ret's cpu, start and mem
 * fields untouched then). procstat_read's parser (tests/unit/test_procstat.c). */
int procstat_parse_stat(const char *buf, size_t len, long ticks_per_s, long page_size,
                        double boot_time_unix, struct procstat *ret);

#endif
