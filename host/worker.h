/*
 * worker.h - the worker half of a plugin instance: the loop that receives
 * events over an nng pair1 socket (proto/bus.proto), calls the plugin and
 * answers. The same code runs on a worker thread of the daemon (thread
 * isolation, inproc://) and in the `leasehold-worker` child process (process
 * isolation, ipc://); the host half is plugin_instance.c.
 *
 * Design notes
 * - Events run one at a time, in order, each answered with exactly one
 *   EventDone (same seq). The host hands over the start of a term in one go
 *   (on_elected, the replay, the first reconcile); events that arrive while
 *   a callback waits for a txn reply wait in a small stash. A term event
 *   with the term's end (on_deposed, a new on_elected, fini) already waiting
 *   behind it is answered as skipped without running (should_skip).
 * - While a callback runs, the plugin's host API calls (txn, log, set_error)
 *   travel the same socket; they are accepted only on the worker's own thread
 *   and only inside a callback (anything else: -EPERM / ignored).
 * - Everything received is decoded as hostile: an undecodable or unexpected
 *   message is answered with a ProtocolError and dropped.
 * - worker_run() returns after FINI was acknowledged or when the socket is
 *   closed (the host went away).
 */
#ifndef LH_WORKER_H
#define LH_WORKER_H

#include <stdint.h>

#include <nng/nng.h>

#include <leasehold/plugin.h>

struct worker;

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

/* worker_run - serve events on the calling thread until FINI was answered
 * (returns 0) or the socket failed / was closed (returns -ECANCELED). The
 * calling thread becomes the plugin's callback thread. */
int worker_run(struct worker *w);

/* worker_free - free. Accepts NULL. worker_run must have returned. */
void worker_free(struct worker *w);

#endif
