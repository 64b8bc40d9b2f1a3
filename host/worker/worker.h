/* SPDX-License-Identifier: MIT */
/*
 * worker.h - the worker half of a plugin instance: the loop that receives
 * events over an nng pair1 socket (proto/bus.proto), calls the plugin and
 * answers. The same code runs on a worker thread of the daemon (thread
 * isolation, inproc://) and in the `leasehold-worker` child process (process
 * isolation, ipc://); the host half is runtime_instance.c.
 *
 * Design notes
 * - Events run one at a time, in order, each answered with exactly one
 *   EventDone (same seq). The one exception: a plugin with a
 *   key_concurrency above 1 runs up to that many RECONCILE_KEY events at
 *   once on key threads (worker_pool.c), answered as each returns; every
 *   other event runs on the bus loop's thread once no key runs. The host hands over the start of a term in one go
 *   (on_elected, the replay, the first reconcile); events that arrive while
 *   a callback waits for a txn reply wait in a small stash. A term event
 *   with the term's end (on_deposed, a new on_elected, fini) already waiting
 *   behind it is answered as skipped without running (worker_should_skip).
 * - While a callback runs, the plugin's host API calls (txn, log, set_error)
 *   travel the same socket; they are accepted only on the thread that runs
 *   the callback and only inside it (anything else: -EPERM / ignored).
 * - Everything received is decoded as hostile: an undecodable or unexpected
 *   message is answered with a ProtocolError and dropped.
 * - worker_run() returns after FINI was acknowledged or when the socket is
 *   closed (the host went away).
 * - Activity: before each callback the worker publishes which one runs
 *   (seq, kind, start time) in a struct worker_activity, and clears it
 *   after (concurrent keys: from the first key of a busy stretch until the
 *   last returns). The host reads it without the bus: to show "in reconcile since
 *   42 s", and, in process isolation, to name the callback that really ran
 *   when the child died (the page is shared memory that outlives the
 *   child; acknowledgements the child queued just before it died may never
 *   reach the host). It also publishes the crash line (worker_crash_report.h).
 */
#ifndef LH_WORKER_H
#define LH_WORKER_H

#include <stdatomic.h>
#include <stdint.h>

#include <nng/nng.h>

#include <leasehold/plugin.h>

struct worker;

/* The plugin callbacks, in the order of the SDK's descriptor. */
enum worker_callback {
	WORKER_CB_INIT = 0,
	WORKER_CB_ON_ELECTED = 1,
	WORKER_CB_ON_RELEASES_CHANGED = 2,
	WORKER_CB_RECONCILE = 3,
	WORKER_CB_ON_DEPOSED = 4,
	WORKER_CB_FINI = 5,
	WORKER_CB_ON_WATCH_EVENTS = 6, /* ABI 1.2 */
	WORKER_CB_ON_CONFIG_CHANGED = 7, /* ABI 1.2 */
	WORKER_CB_VALIDATE_CONFIG = 8, /* ABI 1.2 */
	WORKER_CB_RECONCILE_KEY = 9, /* ABI 1.3 */
};
#define WORKER_CALLBACKS 10

/* worker_callback_name - "init", "on_elected", ... ("?" when out of range) */
const char *worker_callback_name(unsigned kind);
/* worker_callback_parse - the inverse; 0 or -EINVAL (*ret untouched) */
int worker_callback_parse(const char *name, unsigned *ret);

/* What the worker's thread is doing; written only by that thread, read by
 * anyone (another thread, or the host through shared memory): a seqlock. */
struct worker_activity {
	_Atomic uint64_t gen;      /* odd while being written */
	_Atomic uint64_t seq;      /* Event.seq of the running callback; 0 = none */
	_Atomic uint32_t kind;     /* enum worker_callback, when seq != 0 */
	_Atomic uint64_t since_ns; /* loop_now() (CLOCK_BOOTTIME) when it began */
};

/* a consistent copy of a struct worker_activity */
struct worker_activity_snapshot {
	uint64_t seq; /* 0 = no callback runs */
	uint32_t kind;
	uint64_t since_ns;
};

/* worker_activity_read - copy a consistent state of *a (retries while the
 * worker writes; gives up after a bounded number of tries and then reports
 * "no callback"). Never blocks. */
void worker_activity_read(const struct worker_activity *a, struct worker_activity_snapshot *ret);

/* Exit codes of the leasehold-worker program (process isolation). The host
 * turns them into a failure reason. */
#define WORKER_EXIT_OK 0      /* FINI acknowledged, or the host closed the bus */
#define WORKER_EXIT_USAGE 64  /* bad command line */
#define WORKER_EXIT_LOAD 65   /* the plugin could not be loaded or validated */
#define WORKER_EXIT_BUS 66    /* cannot connect to the host */
#define WORKER_EXIT_NOMEM 67  /* out of memory while starting */
#define WORKER_EXIT_PARENT 68 /* the parent is already gone */

/* worker_new - the worker half for a plugin whose validated descriptor is
 * `desc` (copied; its function pointers must stay valid, i.e. the object
 * stay loaded, until worker_free). `sock` is borrowed: the caller keeps it
 * open while worker_run runs, and closing it from another thread makes
 * worker_run return. txn_timeout_ms is the deadline of one txn (> 0).
 * Returns 0 and *ret_w (free with worker_free) or -ENOMEM (untouched). */
int worker_new(const struct lh_plugin *desc, nng_socket sock, uint32_t txn_timeout_ms,
	       struct worker **ret_w);

/* worker_set_activity - publish the activity in *a (e.g. shared memory)
 * instead of the worker's own struct; call before worker_run. a is borrowed
 * and must outlive the worker. */
void worker_set_activity(struct worker *w, struct worker_activity *a);
/* worker_activity - where the worker publishes its activity (borrowed,
 * lives as long as w or as the page given to worker_set_activity). */
const struct worker_activity *worker_activity(const struct worker *w);

/* worker_run - serve events on the calling thread until FINI was answered
 * (returns 0) or the socket failed / was closed (returns -ECANCELED). The
 * calling thread becomes the plugin's callback thread (and, with a
 * key_concurrency above 1, starts the key threads as keys come; they have
 * all ended when it returns). */
int worker_run(struct worker *w);

/* worker_free - free. Accepts NULL. worker_run must have returned. */
void worker_free(struct worker *w);

#endif
