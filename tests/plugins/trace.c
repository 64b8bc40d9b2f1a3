/* SPDX-License-Identifier: MIT */
/*
 * trace.c - see trace.h.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "trace.h"

void trace_vline(const char *env, const char *fmt, va_list ap)
{
	const char *path = getenv(env);
	char line[TRACE_LINE_MAX];
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	if (!path || n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n) { /* a short trace fails the test */
	}
	close(fd);
}
