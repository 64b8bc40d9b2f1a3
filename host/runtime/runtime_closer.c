/* SPDX-License-Identifier: MIT */
/*
 * runtime_closer.c - the closer thread (see runtime_closer.h).
 *
 * Why: with nng 1.5.2, nng's one reaper thread can block for good inside a
 * finalizer it runs (rarely, in a crash loop of workers: the stacks show
 * the reaper in a condition wait under its reap loop, nng_close waiting for
 * it, and at exit the HTTP server's free too). Every nng_close after that
 * waits as well. Here that costs a queue of unclosed sockets (each keeps a
 * few fds), not a frozen daemon.
 *
 * Design notes: one FIFO of sockets under one mutex; the thread takes the
 * head, drops the mutex, calls nng_close and done, and only then takes the
 * mutex again to count it. So a close that never returns blocks only the
 * closes behind it, never a caller: callers take the mutex for a few
 * instructions. Started on first use (pthread_once) with every signal
 * blocked (the daemon takes its signals through a signalfd), never joined:
 * a thread stuck inside nng cannot be, and exit() does not wait for it.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/loop.h"
#include "runtime/runtime_closer.h"

struct runtime_closer_item {
	struct runtime_closer_item *next;
	nng_socket sock;
	void (*done)(void *arg);
	void *arg;
};

static struct {
	pthread_once_t once;
	int start_err; /* 0 once the thread runs */
	pthread_mutex_t mu;
	pthread_cond_t work; /* an item was queued */
	pthread_cond_t idle; /* a close returned */
	struct runtime_closer_item *head, *tail;
	uint64_t handed, closed, stuck;
	uint64_t busy_since; /* loop_now() when the running close began; 0 = none */
	bool busy_reported;  /* the running close was reported stuck */
} g_closer = {
    .once = PTHREAD_ONCE_INIT,
    .mu = PTHREAD_MUTEX_INITIALIZER,
};

static void *runtime_closer_main(void *unused)
{
	(void)unused;
	pthread_mutex_lock(&g_closer.mu);
	for (;;) {
		while (!g_closer.head)
			pthread_cond_wait(&g_closer.work, &g_closer.mu);
		struct runtime_closer_item *it = g_closer.head;
		g_closer.head = it->next;
		if (!g_closer.head)
			g_closer.tail = NULL;
		g_closer.busy_since = loop_now();
		g_closer.busy_reported = false;
		pthread_mutex_unlock(&g_closer.mu);
		nng_close(it->sock); /* may wait for nng's threads: nobody waits on us */
		if (it->done)
			it->done(it->arg);
		free(it);
		pthread_mutex_lock(&g_closer.mu);
		g_closer.busy_since = 0;
		g_closer.closed++;
		pthread_cond_broadcast(&g_closer.idle);
	}
	return NULL;
}

static void runtime_closer_start(void)
{
	pthread_condattr_t ca;
	pthread_attr_t ta;
	sigset_t all, old;
	pthread_t t;
	int r;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g_closer.work, &ca);
	pthread_cond_init(&g_closer.idle, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&t, &ta, runtime_closer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&ta);
	g_closer.start_err = r ? -r : 0;
	if (r)
		log_error("runtime", "cannot start the socket closer thread: %s", strerror(r));
}

int runtime_closer_close(nng_socket sock, void (*done)(void *arg), void *arg)
{
	pthread_once(&g_closer.once, runtime_closer_start);
	if (g_closer.start_err)
		return g_closer.start_err;
	struct runtime_closer_item *it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->sock = sock;
	it->done = done;
	it->arg = arg;
	pthread_mutex_lock(&g_closer.mu);
	if (g_closer.tail)
		g_closer.tail->next = it;
	else
		g_closer.head = it;
	g_closer.tail = it;
	g_closer.handed++;
	pthread_cond_signal(&g_closer.work);
	pthread_mutex_unlock(&g_closer.mu);
	runtime_closer_check();
	return 0;
}

void runtime_closer_check(void)
{
	uint64_t running = 0, behind = 0;
	pthread_mutex_lock(&g_closer.mu);
	uint64_t since = g_closer.busy_since;
	if (since && !g_closer.busy_reported &&
	    loop_now() - since >= (uint64_t)RUNTIME_CLOSER_STUCK_MS * LOOP_NS_PER_MS) {
		g_closer.busy_reported = true;
		g_closer.stuck++;
		running = (loop_now() - since) / LOOP_NS_PER_MS;
		behind = g_closer.handed - g_closer.closed - 1;
	}
	pthread_mutex_unlock(&g_closer.mu);
	if (running)
		log_warn("runtime",
			 "closing a plugin worker's bus socket has not returned for %llu ms (nng); "
			 "%llu more wait behind it; the plugins are not held up by it",
			 (unsigned long long)running, (unsigned long long)behind);
}

void runtime_closer_get_stats(struct runtime_closer_stats *ret)
{
	runtime_closer_check();
	pthread_mutex_lock(&g_closer.mu);
	ret->handed = g_closer.handed;
	ret->closed = g_closer.closed;
	ret->stuck = g_closer.stuck;
	ret->busy_ms = g_closer.busy_since ? (loop_now() - g_closer.busy_since) / LOOP_NS_PER_MS : 0;
	pthread_mutex_unlock(&g_closer.mu);
}

int runtime_closer_wait(int timeout_ms)
{
	struct timespec until =
	    loop_deadline_ts(CLOCK_MONOTONIC, timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	int r = 0;
	pthread_mutex_lock(&g_closer.mu);
	uint64_t want = g_closer.handed;
	while (g_closer.closed < want && r == 0)
		r = pthread_cond_timedwait(&g_closer.idle, &g_closer.mu, &until);
	pthread_mutex_unlock(&g_closer.mu);
	return r == ETIMEDOUT ? -ETIMEDOUT : 0;
}
