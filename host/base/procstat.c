/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/procstat.h"

/* fields of /proc/PID/stat counted from the first one after the command
 * name (field 3, the state), proc(5) numbering minus 3 */
enum { PROCSTAT_UTIME = 11, PROCSTAT_STIME = 12, PROCSTAT_STARTTIME = 19, PROCSTAT_VSIZE = 20,
       PROCSTAT_RSS = 21, PROCSTAT_N_FIELDS = 22 };

int procstat_parse_stat(const char *buf, size_t len, long ticks_per_s, long page_size,
                        double boot_time_unix, struct procstat *ret)
{
	const char *end = buf + len, *p = NULL;
	for (const char *q = buf; q < end; q++)
		if (*q == ')')
			p = q + 1;
	if (!p || ticks_per_s <= 0 || page_size <= 0)
		return -EINVAL;
	unsigned long long v[PROCSTAT_N_FIELDS];
	for (int i = 0; i < PROCSTAT_N_FIELDS; i++) {
		while (p < end && *p == ' ')
			p++;
		const char *tok = p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		if (p == tok)
			return -EINVAL;
		if (i == 0) { /* the state: a letter */
			v[i] = 0;
			continue;
		}
		char num[24];
		size_t n = (size_t)(p - tok);
		if (n >= sizeof(num))
			return -EINVAL;
		memcpy(num, tok, n);
		num[n] = 0;
		char *e;
		errno = 0;
		/* signed fields (priority, nice, rss) may be negative: parsed
		 * as signed, read only where unsigned */
		long long s = strtoll(num, &e, 10);
		if (*e || errno)
			return -EINVAL;
		v[i] = (unsigned long long)s;
	}
	ret->have_cpu = true;
	ret->cpu_seconds = (double)(v[PROCSTAT_UTIME] + v[PROCSTAT_STIME]) / (double)ticks_per_s;
	ret->have_start = true;
	ret->start_time_unix = boot_time_unix + (double)v[PROCSTAT_STARTTIME] / (double)ticks_per_s;
	ret->have_mem = true;
	ret->virtual_bytes = (double)v[PROCSTAT_VSIZE];
	ret->resident_bytes = (double)v[PROCSTAT_RSS] * (double)page_size;
	return 0;
}

/* procstat_slurp - path's content (at most len - 1 bytes) into buf,
 * NUL-terminated; its length, or -errno */
static ssize_t procstat_slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int r = -errno;
			close(fd);
			return r;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	return (ssize_t)got;
}

/* procstat_boot_time - the "btime" line of /proc/stat (seconds since the
 * epoch), or -errno */
static int procstat_boot_time(double *ret)
{
	char buf[16384];
	ssize_t n = procstat_slurp("/proc/stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, "btime ", 6) != 0)
			continue;
		char *e;
		errno = 0;
		unsigned long long b = strtoull(l + 6, &e, 10);
		if (errno || e == l + 6)
			return -EINVAL;
		*ret = (double)b;
		return 0;
	}
	return -ENOENT;
}

/* procstat_count_fds - entries of /proc/self/fd but the one opendir uses */
static int procstat_count_fds(uint64_t *ret)
{
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return -errno;
	uint64_t n = 0;
	struct dirent *de;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	*ret = n ? n - 1 : 0;
	return 0;
}

int procstat_read(struct procstat *ret)
{
	int first = 0, r;
	char buf[2048];
	*ret = (struct procstat){0};
	double boot = 0;
	ssize_t n = procstat_slurp("/proc/self/stat", buf, sizeof(buf));
	int boot_err = procstat_boot_time(&boot);
	if (n < 0)
		first = (int)n;
	else if ((r = procstat_parse_stat(buf, (size_t)n, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE),
	                                  boot, ret)) < 0)
		first = r;
	if (boot_err < 0) { /* the start time only is unknown */
		ret->have_start = false;
		if (!first)
			first = boot_err;
	}
	if ((r = procstat_count_fds(&ret->open_fds)) == 0)
		ret->have_fds = true;
	else if (!first)
		first = r;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		ret->have_max_fds = true;
		ret->max_fds = (uint64_t)rl.rlim_cur;
	} else if (!first) {
		first = -ENOENT;
	}
	return first;
}
