/* SPDX-License-Identifier: MIT */
/*
 * runtime_closer.h - nng sockets closed off the event loop.
 *
 * nng_close() does not return before nng's own threads have torn the
 * socket's listeners and pipes down and every pipe callback in progress has
 * returned (nng 1.5.2; see docs/design.md, "Closing a worker's bus"). The
 * loop thread must never wait on another thread's progress, so the runtime
 * hands such a socket to one closer thread per process, which closes the
 * sockets in the order they were handed over.
 *
 * Threading: runtime_closer_close, runtime_closer_check and
 * runtime_closer_get_stats may be called from any thread and never wait for
 * a close; runtime_closer_wait waits (bounded) and is meant for the end of a
 * process. The closer's mutex is never held across an nng call.
 * Ownership: a socket handed over belongs to the closer; done(arg) runs on
 * the closer thread after nng_close returned (no callback of that socket
 * can run any more) and owns arg from then on.
 */
#ifndef LH_RUNTIME_CLOSER_H
#define LH_RUNTIME_CLOSER_H

#include <stdint.h>

#include <nng/nng.h>

/* a close still running this long is reported (once): RUNTIME_CLOSER_STUCK_MS */
#define RUNTIME_CLOSER_STUCK_MS 5000u

struct runtime_closer_stats {
	uint64_t handed;  /* sockets handed over since the process started */
	uint64_t closed;  /* of them, closes that returned */
	uint64_t stuck;	  /* closes reported as running past RUNTIME_CLOSER_STUCK_MS */
	uint64_t busy_ms; /* how long the running close has been running (0 = none) */
};

/* runtime_closer_close - close sock on the closer thread, then call
 * done(arg) there (done may be NULL). Starts the thread on first use.
 * Returns 0, or -errno when the thread cannot be started or memory is short:
 * then nothing was taken and the caller still owns sock and arg. */
int runtime_closer_close(nng_socket sock, void (*done)(void *arg), void *arg);

/* runtime_closer_check - log once (warning, component "runtime") a close
 * that has been running for RUNTIME_CLOSER_STUCK_MS and count it in
 * stats.stuck; cheap. runtime_closer_close runs it too. */
void runtime_closer_check(void);

/* runtime_closer_get_stats - the counters above (after a check) */
void runtime_closer_get_stats(struct runtime_closer_stats *ret);

/* runtime_closer_wait - wait until every close handed over so far returned,
 * at most timeout_ms. Returns 0, or -ETIMEDOUT (a close is stuck: the
 * thread is left to it; exit() does not wait for it). */
int runtime_closer_wait(int timeout_ms);

#endif
