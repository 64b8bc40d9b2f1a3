/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "worker/worker_stderr_relay.h"

#define RELAY_LINE_MAX 2000 /* a longer line is cut into several */

/* relay - the relay process: lines from fd to the logger, until EOF */
static void stderr_relay_process(int fd, const char *component)
{
	char buf[RELAY_LINE_MAX + 1];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, RELAY_LINE_MAX - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		size_t start = 0;
		for (size_t i = 0; i < n; i++) {
			if (buf[i] != '\n')
				continue;
			buf[i] = '\0';
			log_info(component, "%s", buf + start);
			start = i + 1;
		}
		if (start == 0 && n == RELAY_LINE_MAX) { /* no newline in a full buffer */
			buf[n] = '\0';
			log_info(component, "%s", buf);
			start = n;
		}
		memmove(buf, buf + start, n - start);
		n -= start;
	}
	if (n) { /* the last line had no newline */
		buf[n] = '\0';
		log_info(component, "%s", buf);
	}
}

int stderr_relay_start(const char *component)
{
	int p[2];
	/* decided against the real stderr, before it becomes the pipe */
	log_set_journal(log_stderr_is_journal());
	(void)log_get_format();
	int orig = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (orig < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0) {
		int r = -errno;
		close(orig);
		return r;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int r = -errno;
		close(p[0]);
		close(p[1]);
		close(orig);
		return r;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		close(p[1]);
		log_set_fd(orig);
		stderr_relay_process(p[0], component);
		_exit(0);
	}
	close(p[0]);
	if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(p[1], STDERR_FILENO) < 0) {
		/* fd 1 may be the pipe already: the relay ends when we close
		 * it, and the worker keeps its original fds in all other cases */
		int r = -errno;
		dup2(orig, STDOUT_FILENO);
		dup2(orig, STDERR_FILENO);
		close(p[1]);
		close(orig);
		return r;
	}
	close(p[1]);
	log_set_fd(orig);
	return 0;
}
