/* SPDX-License-Identifier: MIT */
/*
 * ctl_redraw.c - the -w/--watch loop of the listing verbs (ctl_redraw.h).
 *
 * Design notes
 * - Each answer is printed into a memory file first (stdout is pointed at
 *   it for the call), so that "changed" means "what the operator would see
 *   changed", whatever the answer's volatile fields.
 * - The pause between two calls is a sigtimedwait() on the blocked SIGINT
 *   and SIGTERM: ^C ends the loop at once, not at the next poll.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/ctl_redraw.h"
#include "ctl/ctl_views.h"

/* ctl_redraw_capture - once(arg)'s stdout into *ret_buf (malloc'd,
 * NUL-terminated) and its exit code into *ret_code; 0 or -errno */
static int ctl_redraw_capture(int (*once)(void *arg), void *arg, char **ret_buf, int *ret_code)
{
	int fd = memfd_create("leaseholdctl-watch", MFD_CLOEXEC);
	int saved = dup(STDOUT_FILENO);
	int ret = 0;

	if (fd < 0 || saved < 0 || fflush(stdout) != 0 || dup2(fd, STDOUT_FILENO) < 0) {
		ret = -errno;
		goto out;
	}
	*ret_code = once(arg);
	fflush(stdout);
	if (dup2(saved, STDOUT_FILENO) < 0) {
		ret = -errno;
		goto out;
	}
	off_t len = lseek(fd, 0, SEEK_END);
	char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (!buf || pread(fd, buf, (size_t)len, 0) != len) {
		free(buf);
		ret = -EIO;
		goto out;
	}
	buf[len] = '\0';
	*ret_buf = buf;
out:
	if (saved >= 0)
		close(saved);
	if (fd >= 0)
		close(fd);
	return ret;
}

static void ctl_redraw_show(const char *text, bool header)
{
	char tb[64];
	if (header) {
		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout);
		printf("%s\n", ctl_fmt_time((int64_t)time(NULL), tb, sizeof(tb)));
	}
	fputs(text, stdout);
	fflush(stdout);
}

int ctl_redraw_loop(int (*once)(void *arg), void *arg, bool header)
{
	const struct timespec pause = {CTL_REDRAW_MS / 1000, (CTL_REDRAW_MS % 1000) * 1000000L};
	sigset_t set, old;
	char *last = NULL;
	int code = EXIT_OK;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (;;) {
		char *now = NULL;
		if (ctl_redraw_capture(once, arg, &now, &code) < 0) {
			fprintf(stderr, "leaseholdctl: --watch: cannot capture the output: %s\n",
				strerror(errno));
			code = EXIT_ERR;
			break;
		}
		if (!last || strcmp(now, last) != 0)
			ctl_redraw_show(now, header && code == EXIT_OK);
		free(last);
		last = now;
		if (code != EXIT_OK)
			break;
		int sig = sigtimedwait(&set, NULL, &pause);
		if (sig == SIGINT || sig == SIGTERM)
			break;
	}
	free(last);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}
