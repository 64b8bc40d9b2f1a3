/* SPDX-License-Identifier: MIT */
/*
 * test_procstat - the process facts behind the process_* metrics
 * (host/base/procstat.h):
 *  - a /proc/PID/stat line whose command name holds spaces and
 *    parentheses is read from after its last ')': CPU time, start time,
 *    virtual and resident memory, with the tick and page sizes given;
 *  - cut, empty and non-numeric lines are refused and leave the result
 *    untouched;
 *  - this process's own figures are plausible (started in the last
 *    minutes, some CPU used, memory resident, a few fds open).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "base/procstat.h"

/* fields 3..24 of proc(5) after "PID (COMM) ": utime 250, stime 50 ticks,
 * starttime 1000 ticks, vsize 8 MiB, rss 300 pages */
#define STAT_TAIL "S 1 2 3 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0 1000 8388608 300 " \
                  "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

static void test_parses_a_hostile_command_name(void)
{
	const char *line = "4242 (evil) (name) 1 2 ) " STAT_TAIL;
	struct procstat ps = {0};
	CHECK_OK(procstat_parse_stat(line, strlen(line), 100, 4096, 1.7e9, &ps));
	CHECK(ps.have_cpu && ps.have_start && ps.have_mem);
	CHECK(ps.cpu_seconds == 3.0);
	CHECK(ps.start_time_unix == 1.7e9 + 10.0);
	CHECK(ps.virtual_bytes == 8388608.0);
	CHECK(ps.resident_bytes == 300.0 * 4096);
}

static void test_refuses_bad_lines(void)
{
	static const char *const bad[] = {
		"", "4242 no parenthesis " STAT_TAIL, "4242 (x) S 1 2 3", "4242 (x) S 1 2 x 0 " STAT_TAIL,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct procstat ps = {.cpu_seconds = 7};
		CHECK_INT_EQ(procstat_parse_stat(bad[i], strlen(bad[i]), 100, 4096, 0, &ps), -EINVAL);
		CHECK(!ps.have_cpu && ps.cpu_seconds == 7);
	}
	const char *line = "1 (x) " STAT_TAIL;
	struct procstat ps = {0};
	CHECK_INT_EQ(procstat_parse_stat(line, strlen(line), 0, 4096, 0, &ps), -EINVAL);
	/* a line cut inside the fields read */
	CHECK_INT_EQ(procstat_parse_stat(line, 40, 100, 4096, 0, &ps), -EINVAL);
}

static void test_this_process(void)
{
	volatile double spin = 0;
	for (int i = 0; i < 20000000; i++) /* some CPU time to show */
		spin += i;
	struct procstat ps;
	CHECK_OK(procstat_read(&ps));
	double now = (double)time(NULL);
	fprintf(stderr, "cpu %.2f s, started %.0f s ago, rss %.0f, vsz %.0f, fds %llu/%llu\n",
	        ps.cpu_seconds, now - ps.start_time_unix, ps.resident_bytes, ps.virtual_bytes,
	        (unsigned long long)ps.open_fds, (unsigned long long)ps.max_fds);
	CHECK(ps.cpu_seconds > 0);
	CHECK(ps.start_time_unix > now - 600 && ps.start_time_unix <= now + 1);
	CHECK(ps.resident_bytes > 0 && ps.virtual_bytes >= ps.resident_bytes);
	CHECK(ps.open_fds >= 3 && ps.have_max_fds && ps.max_fds >= ps.open_fds);
}

int main(void)
{
	RUN(test_parses_a_hostile_command_name);
	RUN(test_refuses_bad_lines);
	RUN(test_this_process);
	return 0;
}
