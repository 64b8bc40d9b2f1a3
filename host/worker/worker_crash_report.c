/* SPDX-License-Identifier: MIT */
/*
 * worker_crash_report.c - see worker_crash_report.h.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/worker_crash_report.h"
#include "base/log.h"

#define LINE_MAX_BYTES 512

static const int g_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define N_SIGNALS (sizeof(g_signals) / sizeof(g_signals[0]))

static struct sigaction g_previous[N_SIGNALS];
static const char *g_consequence = "";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_install_err;

/* initial-exec TLS: reading it from a signal handler is safe */
static __thread const char *tl_who __attribute__((tls_model("initial-exec")));

void crash_report_enter(const char *who)
{
	tl_who = who;
}

void crash_report_leave(void)
{
	tl_who = NULL;
}

/* append s to buf[*len] (bounded), async-signal-safe */
static void crash_report_put(char *buf, size_t *len, const char *s)
{
	while (*s && *len < LINE_MAX_BYTES - 1)
		buf[(*len)++] = *s++;
}

static const char *crash_report_signal_name(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGABRT:
		return "SIGABRT";
	case SIGFPE:
		return "SIGFPE";
	case SIGILL:
		return "SIGILL";
	default:
		return "a fatal signal";
	}
}

static void crash_report_write_line(const char *who, const char *what)
{
	char buf[LINE_MAX_BYTES];
	size_t len = 0;
	crash_report_put(buf, &len, "leasehold: FATAL: ");
	crash_report_put(buf, &len, who);
	crash_report_put(buf, &len, what);
	crash_report_put(buf, &len, g_consequence);
	buf[len++] = '\n';
	for (size_t off = 0; off < len;) {
		/* the logger's fd: in a worker, stderr is the relay's pipe */
		ssize_t n = write(log_get_fd(), buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

static void crash_report_on_fatal(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	(void)uctx;
	const char *who = tl_who;
	if (who) {
		char what[64];
		size_t len = 0;
		crash_report_put(what, &len, ": ");
		crash_report_put(what, &len, crash_report_signal_name(sig));
		crash_report_put(what, &len, " in the callback; ");
		what[len] = 0;
		crash_report_write_line(who, what);
	}
	/* give the signal back to whoever had it (default action, sanitizer) */
	for (size_t i = 0; i < N_SIGNALS; i++)
		if (g_signals[i] == sig)
			sigaction(sig, &g_previous[i], NULL);
	if (si->si_code <= 0) /* sent (abort(), kill): returning would lose it */
		raise(sig);
	errno = saved;
	/* a fault: returning re-executes the instruction, which faults again */
}

static void crash_report_on_exit_hook(void)
{
	const char *who = tl_who;
	if (who)
		crash_report_write_line(who, ": exit() called by the plugin in the callback; ");
}

static void crash_report_install_once(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = crash_report_on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_SIGNALS; i++) {
		if (sigaction(g_signals[i], &sa, &g_previous[i]) < 0) {
			g_install_err = -errno;
			return;
		}
	}
	if (atexit(crash_report_on_exit_hook) != 0)
		g_install_err = -ENOMEM;
}

int crash_report_install(const char *consequence)
{
	if (consequence)
		g_consequence = consequence;
	pthread_once(&g_once, crash_report_install_once);
	return g_install_err;
}
