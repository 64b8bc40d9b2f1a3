/*
 * plugin_instance.h - one loaded plugin running on its own worker thread,
 * driven from the host loop over an nng pair1 bus (proto/bus.proto).
 *
 * Design notes
 * - Two halves. The host half lives on the loop thread: it implements
 *   struct driver_ops (driver.h) by queueing events, and never blocks: it
 *   receives through NNG_OPT_RECVFD registered with the loop, and sends with
 *   NNG_FLAG_NONBLOCK, keeping unsent messages in a local queue flushed when
 *   NNG_OPT_SENDFD says the socket can take more. The worker half is a thread
 *   that blocks on its socket, decodes one event at a time and calls the
 *   plugin; a slow callback therefore never stalls the loop (nor etcd
 *   keepalives).
 * - Events: every event carries a sequence number and is acknowledged by the
 *   worker (EventDone, with the callback's return value and error text). The
 *   host keeps at most ONE event in flight; the rest wait in the host queue
 *   (plugin_instance_stats: queued + in_flight). This is what makes deposed()
 *   exact: queued events are still on the host side and are dropped there.
 * - Linkerd semantics (driver.h): elected() queues on_elected(token) and at
 *   once the replay on_releases_changed(cached releases). deposed() drops every
 *   queued leadership event (a dropped reconcile completes with -ECANCELED)
 *   and queues on_deposed - only if the term's on_elected had been handed to
 *   the worker; an event already in flight finishes. Outside a term nothing
 *   reaches the plugin: releases_changed() is ignored and reconcile()
 *   completes with -ECANCELED. Consecutive queued releases_changed events are
 *   merged (the newest summary wins).
 * - Txns: while a callback runs, the worker sends TxnRequest(id) and waits;
 *   the host checks it (leading, op/compare types and flags), prefixes every
 *   key with the data prefix, calls driver_host.fenced_txn, and answers
 *   TxnReply(id) with the prefix stripped from returned keys (a returned key
 *   outside the prefix is dropped, never shown). The worker gives up after
 *   txn_timeout_ms (the outcome is then unknown; a late reply is discarded).
 * - Every bus message is decoded as hostile: undecodable bytes, unknown kinds,
 *   acks for the wrong sequence, out-of-range enum values are counted
 *   (stats.bad_messages), logged at debug and dropped.
 * - Completions (reconcile done, drain done, init done, stopped) are always
 *   called from a loop timer, never from inside the call that caused them,
 *   so the owner may call any function of the instance (including free)
 *   from them.
 * - Lifecycle: new -> worker runs init (on_init callback) -> ready. stop():
 *   ends leadership like deposed(), lets the queue drain, runs fini on the
 *   worker, joins the thread, then calls `stopped`. free() dlcloses (through
 *   loader_close). free() without a completed stop() does the same
 *   synchronously (blocking the caller until the worker ended: only for
 *   shutdown paths); a plugin stuck forever in a callback then blocks it -
 *   the SDK forbids that.
 */
#ifndef LH_PLUGIN_INSTANCE_H
#define LH_PLUGIN_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "driver.h"
#include "loader.h"
#include "loop.h"

struct plugin_instance;

enum plugin_instance_state {
	PLUGIN_INSTANCE_STARTING = 0, /* worker runs init */
	PLUGIN_INSTANCE_READY = 1,    /* init succeeded */
	PLUGIN_INSTANCE_FAILED = 2,   /* init failed or the bus broke: nothing is delivered */
	PLUGIN_INSTANCE_STOPPING = 3, /* stop() called */
	PLUGIN_INSTANCE_STOPPED = 4,  /* fini ran (or was skipped), worker joined */
};

struct plugin_instance_stats {
	uint64_t queued;    /* events waiting in the host queue */
	uint64_t in_flight; /* events sent to the worker, not yet acknowledged (0 or 1) */
	uint64_t delivered; /* events acknowledged by the worker */
	uint64_t dropped;   /* events dropped by deposed()/stop() before delivery */
	uint64_t reconciles_ok;
	uint64_t reconciles_failed;
	uint64_t reconciles_cancelled;
	uint64_t txns;        /* txn requests from the plugin */
	uint64_t txn_errors;  /* ... answered with an error */
	uint64_t log_messages;
	uint64_t bad_messages;      /* undecodable / unexpected messages from the worker */
	uint64_t worker_rejected;   /* host messages the worker reported as bad */
	uint64_t callback_since_ns; /* loop_now() when the in-flight event was sent; 0 = idle */
	int32_t last_err;           /* return value of the last failed callback, 0 if none */
	char last_error[512];       /* its text (set_error), "" if none */
};

/* init finished: err 0 or the plugin's -errno; msg borrowed (may be "") */
typedef void (*plugin_instance_init_fn)(void *userdata, int err, const char *msg);
/* stop() finished */
typedef void (*plugin_instance_stopped_fn)(void *userdata);

struct plugin_instance_config {
	plugin_instance_init_fn on_init; /* may be NULL */
	void *userdata;                  /* for on_init */
	uint32_t txn_timeout_ms;         /* worker-side deadline of one txn; 0 = 30000 */
};

/* plugin_instance_new - start a worker thread for the loaded plugin lp and
 * queue its init. On success takes ownership of lp (loader_close'd by
 * plugin_instance_free), copies host (host->ctx stays borrowed and must
 * outlive the instance; host->data_prefix is copied), node_id and cfg (may be
 * NULL), returns 0 and *ret_pi (free with plugin_instance_free). On failure
 * returns -errno, lp stays the caller's and *ret_pi is untouched. */
int plugin_instance_new(struct loader_plugin *lp, struct loop *l, const struct driver_host *host,
                        const char *node_id, const struct plugin_instance_config *cfg,
                        struct plugin_instance **ret_pi);

/* The driver ops, for election.c: pass the instance as `drv`. */
extern const struct driver_ops plugin_instance_driver_ops;

/* Direct forms of the driver ops (same semantics). */
void plugin_instance_elected(struct plugin_instance *pi, int64_t fencing_token,
                             const struct releases *r);
void plugin_instance_releases_changed(struct plugin_instance *pi, const struct releases *r);
void plugin_instance_reconcile(struct plugin_instance *pi, driver_reconcile_done_fn done,
                               void *done_ud);
void plugin_instance_deposed(struct plugin_instance *pi);
void plugin_instance_drain(struct plugin_instance *pi, driver_drain_done_fn done, void *done_ud);

/* plugin_instance_stop - end leadership (as deposed()), drain, run fini on
 * the worker, join it; then stopped(userdata) runs on the loop (once). Call
 * at most once; later driver ops are ignored (reconcile: -ECANCELED). */
void plugin_instance_stop(struct plugin_instance *pi, plugin_instance_stopped_fn stopped,
                          void *userdata);

/* plugin_instance_free - stop synchronously if needed (see design notes),
 * dlclose, free. Pending completions are NOT called. Accepts NULL. */
void plugin_instance_free(struct plugin_instance *pi);

enum plugin_instance_state plugin_instance_state(const struct plugin_instance *pi);
/* the loaded plugin (borrowed, lives as long as pi) */
const struct loader_plugin *plugin_instance_plugin(const struct plugin_instance *pi);
/* a snapshot of the counters */
void plugin_instance_get_stats(const struct plugin_instance *pi, struct plugin_instance_stats *ret);
/* queued + in flight */
uint64_t plugin_instance_pending(const struct plugin_instance *pi);
/* the bus URL (borrowed), e.g. "inproc://leasehold-123-4-reconciler" */
const char *plugin_instance_bus_url(const struct plugin_instance *pi);

/* For tests and fuzzing: handle `len` bytes exactly as if they had come from
 * the worker (bytes are only read). Returns 0 when they were accepted, else
 * the -errno they were rejected with (-EBADMSG undecodable, -EPROTO
 * unexpected). */
int plugin_instance_inject_from_worker(struct plugin_instance *pi, const void *buf, size_t len);
/* For tests: send raw bytes to the worker on the real socket (non-blocking,
 * queued). Returns 0 or -errno. */
int plugin_instance_send_raw_to_worker(struct plugin_instance *pi, const void *buf, size_t len);

#endif
