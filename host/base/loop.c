/* SPDX-License-Identifier: MIT */
/*
 * loop.c - epoll + a binary heap of timers.
 *
 * Design notes
 * - Timers live in a min-heap keyed by deadline; each timer knows its heap
 *   index so arm/disarm are O(log n).
 * - Freed io watchers are unlinked from epoll at once but their memory is
 *   kept on a graveyard list until the current dispatch batch ends, because
 *   epoll may already have handed us an event pointing at them.
 * - Timers fire from a timerfd on CLOCK_BOOTTIME armed at the earliest
 *   deadline (absolute): epoll_wait's own timeout runs on CLOCK_MONOTONIC,
 *   which stops during suspend, so a lease deadline would fire late after a
 *   resume. After every wait, due timers run BEFORE ready fds are
 *   dispatched: after a long stall (SIGSTOP, suspend) a deadline is acted on
 *   before any stale input.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/loop.h"

struct loop_io {
	struct loop *loop;
	int fd;
	uint32_t events;
	loop_io_cb cb;
	void *userdata;
	bool dead;
	struct loop_io *next_dead;
};

struct loop_timer {
	struct loop *loop;
	loop_timer_cb cb;
	void *userdata;
	uint64_t when;
	size_t heap_idx; /* SIZE_MAX when disarmed */
};

struct loop {
	int epfd;
	int tfd;             /* timerfd (CLOCK_BOOTTIME) for the earliest timer */
	uint64_t tfd_armed;  /* deadline it is armed for, 0 = disarmed */
	struct loop_timer **heap;
	size_t heap_len, heap_cap;
	struct loop_io *graveyard;
	bool quit;
	int quit_code;
};

uint64_t loop_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * LOOP_NS_PER_S + (uint64_t)ts.tv_nsec;
}

struct timespec loop_deadline_ts(clockid_t clock, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

int loop_new(struct loop **ret_loop)
{
	struct loop *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	struct epoll_event tev = {.events = EPOLLIN, .data.ptr = l};
	if (l->epfd < 0 || l->tfd < 0 ||
	    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &tev) < 0) {
		int r = -errno;
		if (l->epfd >= 0)
			close(l->epfd);
		if (l->tfd >= 0)
			close(l->tfd);
		free(l);
		return r;
	}
	*ret_loop = l;
	return 0;
}

static void loop_bury_flush(struct loop *l)
{
	while (l->graveyard) {
		struct loop_io *io = l->graveyard;
		l->graveyard = io->next_dead;
		free(io);
	}
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	loop_bury_flush(l);
	for (size_t i = 0; i < l->heap_len; i++)
		l->heap[i]->heap_idx = SIZE_MAX;
	free(l->heap);
	close(l->epfd);
	close(l->tfd);
	free(l);
}

int loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_cb cb, void *userdata,
                struct loop_io **ret_io)
{
	struct loop_io *io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->loop = l;
	io->fd = fd;
	io->events = events;
	io->cb = cb;
	io->userdata = userdata;
	struct epoll_event ev = {.events = events, .data.ptr = io};
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = -errno;
		free(io);
		return r;
	}
	*ret_io = io;
	return 0;
}

int loop_io_modify(struct loop_io *io, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = io};
	if (io->events == events)
		return 0;
	if (epoll_ctl(io->loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
		return -errno;
	io->events = events;
	return 0;
}

void loop_io_free(struct loop_io *io)
{
	if (!io)
		return;
	/* The fd may already be closed by its owner (curl does that): ignore errors. */
	epoll_ctl(io->loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
	io->dead = true;
	io->next_dead = io->loop->graveyard;
	io->loop->graveyard = io;
}

/* ---- timer heap ---- */

static void loop_heap_swap(struct loop *l, size_t a, size_t b)
{
	struct loop_timer *t = l->heap[a];
	l->heap[a] = l->heap[b];
	l->heap[b] = t;
	l->heap[a]->heap_idx = a;
	l->heap[b]->heap_idx = b;
}

static void loop_heap_up(struct loop *l, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (l->heap[p]->when <= l->heap[i]->when)
			break;
		loop_heap_swap(l, p, i);
		i = p;
	}
}

static void loop_heap_down(struct loop *l, size_t i)
{
	for (;;) {
		size_t a = 2 * i + 1, b = a + 1, m = i;
		if (a < l->heap_len && l->heap[a]->when < l->heap[m]->when)
			m = a;
		if (b < l->heap_len && l->heap[b]->when < l->heap[m]->when)
			m = b;
		if (m == i)
			return;
		loop_heap_swap(l, i, m);
		i = m;
	}
}

static void loop_heap_remove(struct loop *l, struct loop_timer *t)
{
	size_t i = t->heap_idx;
	if (i == SIZE_MAX)
		return;
	l->heap_len--;
	if (i != l->heap_len) {
		l->heap[i] = l->heap[l->heap_len];
		l->heap[i]->heap_idx = i;
		loop_heap_down(l, i);
		loop_heap_up(l, i);
	}
	t->heap_idx = SIZE_MAX;
}

int loop_timer_new(struct loop *l, loop_timer_cb cb, void *userdata, struct loop_timer **ret_timer)
{
	struct loop_timer *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->loop = l;
	t->cb = cb;
	t->userdata = userdata;
	t->heap_idx = SIZE_MAX;
	*ret_timer = t;
	return 0;
}

void loop_timer_arm_at(struct loop_timer *t, uint64_t when)
{
	struct loop *l = t->loop;
	if (t->heap_idx != SIZE_MAX) {
		t->when = when;
		loop_heap_down(l, t->heap_idx);
		loop_heap_up(l, t->heap_idx);
		return;
	}
	if (l->heap_len == l->heap_cap) {
		size_t cap = l->heap_cap ? l->heap_cap * 2 : 16;
		struct loop_timer **h = realloc(l->heap, cap * sizeof(*h));
		if (!h)
			abort(); /* out of memory with a timer to keep: nothing sane remains */
		l->heap = h;
		l->heap_cap = cap;
	}
	t->when = when;
	t->heap_idx = l->heap_len;
	l->heap[l->heap_len++] = t;
	loop_heap_up(l, t->heap_idx);
}

void loop_timer_arm_in(struct loop_timer *t, uint64_t delay)
{
	loop_timer_arm_at(t, loop_now() + delay);
}

void loop_timer_disarm(struct loop_timer *t)
{
	if (t)
		loop_heap_remove(t->loop, t);
}

bool loop_timer_armed(const struct loop_timer *t)
{
	return t && t->heap_idx != SIZE_MAX;
}

void loop_timer_free(struct loop_timer *t)
{
	if (!t)
		return;
	loop_heap_remove(t->loop, t);
	free(t);
}

/* ---- dispatch ---- */

static int loop_run_timers(struct loop *l)
{
	int n = 0;
	uint64_t now = loop_now();
	while (l->heap_len > 0 && l->heap[0]->when <= now) {
		struct loop_timer *t = l->heap[0];
		loop_heap_remove(l, t);
		t->cb(t, t->userdata);
		n++;
	}
	return n;
}

/* arm the timerfd for the earliest deadline. Relative arming on a
 * CLOCK_BOOTTIME timerfd keeps counting through suspend like the deadline
 * itself; it is re-armed whenever the earliest deadline changes. (Absolute
 * arming would do too, but time-faking test shims rewrite absolute timerfd
 * deadlines by their wall-clock offset.) */
static void loop_arm_tfd(struct loop *l)
{
	uint64_t when = l->heap_len > 0 ? l->heap[0]->when : 0;
	if (when == l->tfd_armed)
		return;
	struct itimerspec its = {{0, 0}, {0, 0}};
	if (when) {
		uint64_t now = loop_now();
		uint64_t d = when > now ? when - now : 1; /* all zero would disarm */
		its.it_value.tv_sec = (time_t)(d / LOOP_NS_PER_S);
		its.it_value.tv_nsec = (long)(d % LOOP_NS_PER_S);
	}
	if (timerfd_settime(l->tfd, 0, &its, NULL) == 0)
		l->tfd_armed = when;
}

int loop_run_once(struct loop *l, int timeout_ms)
{
	int n = loop_run_timers(l);
	int wait_ms = n > 0 ? 0 : timeout_ms;
	loop_arm_tfd(l);

	struct epoll_event evs[64];
	int k = epoll_wait(l->epfd, evs, 64, wait_ms);
	if (k < 0) {
		if (errno == EINTR)
			return n;
		return -errno;
	}
	/* deadlines first: see the design notes */
	n += loop_run_timers(l);
	for (int i = 0; i < k; i++) {
		struct loop_io *io = evs[i].data.ptr;
		if ((void *)io == (void *)l) {
			uint64_t v;
			if (read(l->tfd, &v, sizeof(v)) < 0) {
				/* EAGAIN: already consumed or re-armed */
			}
			l->tfd_armed = 0; /* fired (or moved): re-arm on the next round */
			continue;
		}
		if (io->dead)
			continue;
		io->cb(io, io->fd, evs[i].events, io->userdata);
		n++;
	}
	loop_bury_flush(l);
	n += loop_run_timers(l);
	return n;
}

int loop_run(struct loop *l)
{
	l->quit = false;
	while (!l->quit) {
		int r = loop_run_once(l, -1);
		if (r < 0)
			return r;
	}
	return l->quit_code;
}

void loop_quit(struct loop *l, int code)
{
	l->quit = true;
	l->quit_code = code;
}

int loop_run_until(struct loop *l, const bool *flag, uint64_t deadline)
{
	while (!*flag) {
		uint64_t now = loop_now();
		if (now >= deadline)
			return -ETIMEDOUT;
		uint64_t ms = (deadline - now + LOOP_NS_PER_MS - 1) / LOOP_NS_PER_MS;
		int r = loop_run_once(l, ms > 1000 ? 1000 : (int)ms);
		if (r < 0)
			return r;
	}
	return 0;
}
