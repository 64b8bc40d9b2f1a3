/* SPDX-License-Identifier: MIT */
/*
 * loop.h - the host's single event loop: fds (epoll), timers, deferred calls.
 *
 * Design notes
 * - One loop per thread that owns it; nothing here is thread-safe.
 * - Time is CLOCK_BOOTTIME in nanoseconds (loop_now()): it keeps counting
 *   through suspend and is immune to wall-clock steps, which is what lease
 *   deadlines need.
 * - Callbacks may add, re-arm or free any watcher or timer, including the one
 *   being dispatched. A freed watcher is never called again, even if its event
 *   is already pending in the current batch.
 */
#ifndef LH_LOOP_H
#define LH_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct loop;
struct loop_io;
struct loop_timer;

#define LOOP_NS_PER_MS ((uint64_t)1000000)
#define LOOP_NS_PER_S ((uint64_t)1000000000)

/* loop_now - CLOCK_BOOTTIME now, in ns. */
uint64_t loop_now(void);

/* loop_deadline_ts - the absolute time ms milliseconds from now on clock
 * (CLOCK_MONOTONIC for a condition variable set to it, or for
 * pthread_clockjoin_np): a deadline for the waits of other threads, which
 * a wall-clock step must not move. Thread-safe. */
struct timespec loop_deadline_ts(clockid_t clock, uint64_t ms);

/* loop_new - create a loop. On success *ret_loop owns it (free with loop_free).
 * Returns 0 or -errno; *ret_loop untouched on failure. */
int loop_new(struct loop **ret_loop);

/* loop_free - free the loop. Accepts NULL. Every io and timer must have been
 * freed by their owners first (leftovers are freed and reported in debug). */
void loop_free(struct loop *l);

/* Callback for fd readiness. events are EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP. */
typedef void (*loop_io_cb)(struct loop_io *io, int fd, uint32_t events, void *userdata);

/* loop_io_add - watch fd for events (EPOLLIN|EPOLLOUT mask). The loop does
 * not own fd. Returns 0 or -errno; *ret_io is freed with loop_io_free. */
int loop_io_add(struct loop *l, int fd, uint32_t events, loop_io_cb cb, void *userdata,
                struct loop_io **ret_io);
/* loop_io_modify - change the event mask. Returns 0 or -errno. */
int loop_io_modify(struct loop_io *io, uint32_t events);
/* loop_io_free - stop watching and free. Accepts NULL. Does not close fd. */
void loop_io_free(struct loop_io *io);

typedef void (*loop_timer_cb)(struct loop_timer *t, void *userdata);

/* loop_timer_new - a disarmed timer. Returns 0 or -errno. */
int loop_timer_new(struct loop *l, loop_timer_cb cb, void *userdata, struct loop_timer **ret_timer);
/* loop_timer_arm_at - fire once at absolute loop_now() time `when` (ns). Re-arming moves it. */
void loop_timer_arm_at(struct loop_timer *t, uint64_t when);
/* loop_timer_arm_in - fire once `delay` ns from now. */
void loop_timer_arm_in(struct loop_timer *t, uint64_t delay);
void loop_timer_disarm(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);
/* loop_timer_free - disarm and free. Accepts NULL. */
void loop_timer_free(struct loop_timer *t);

/* loop_run_once - wait for events up to timeout_ms (-1 = until the next timer
 * or forever) and dispatch them. Returns the number of callbacks run (>= 0) or
 * -errno. */
int loop_run_once(struct loop *l, int timeout_ms);

/* loop_run - dispatch until loop_quit() is called; returns its code. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);

/* loop_run_until - dispatch until *flag becomes true or `deadline` (loop_now
 * time) passes. Returns 0 when the flag was set, -ETIMEDOUT otherwise. Used by
 * tests and the CLI to wait for one event with a deadline. */
int loop_run_until(struct loop *l, const bool *flag, uint64_t deadline);

#endif
