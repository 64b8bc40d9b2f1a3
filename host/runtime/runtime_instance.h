/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance.h - one loaded plugin running on its own worker (a thread
 * of the daemon, or a `leasehold-worker` child process when isolation is
 * asked for), driven from the host loop over an nng pair1 bus
 * (proto/bus.proto).
 *
 * Design notes
 * - Two halves. The host half lives on the loop thread: it implements
 *   struct driver_ops (election_driver.h) by queueing events, and never blocks: it
 *   receives through NNG_OPT_RECVFD registered with the loop, and sends with
 *   NNG_FLAG_NONBLOCK, keeping unsent messages in a local queue flushed when
 *   NNG_OPT_SENDFD says the socket can take more. The worker half (worker.c)
 *   blocks on its socket, decodes one event at a time and calls the plugin;
 *   a slow callback therefore never stalls the loop (nor etcd keepalives).
 * - Isolation. Thread (default): the worker half runs on a thread of the
 *   daemon, over inproc://. A plugin that crashes, aborts or calls exit()
 *   takes the whole daemon with it; a hung callback can only be reported.
 *   Process: the worker half runs in a child, the `leasehold-worker` program
 *   (worker_main.c), started with posix_spawn (no fork of the multithreaded
 *   daemon). The host LISTENS on ipc://<runtime_dir>/w<pid>.<n>.<gen>.sock
 *   (socket 0600 inside the 0700 private directory; every worker generation
 *   gets a fresh socket, so nothing of a dead worker's traffic reaches the
 *   next one) and accepts only a peer whose pid is the child it spawned
 *   (NNG_OPT_IPC_PEER_PID). The child gets on argv: the bus URL, the private
 *   copy's path plus its dev/inode (it opens it O_NOFOLLOW, checks the
 *   inode, dlopens it through /proc/self/fd and validates the descriptor
 *   again), the plugin name, the parent pid, txn timeout and log level. It
 *   runs in its own process group with default signal dispositions and an
 *   empty mask, PR_SET_PDEATHSIG(SIGKILL), stdin on /dev/null, stdout and
 *   stderr on the daemon's stderr (or on cfg.worker_stderr). The host watches
 *   the child with a pidfd (Linux >= 5.3) on the loop and kills it with
 *   pidfd_send_signal: no SIGCHLD handler and no pid reuse race.
 * - Containment (process mode). When the child dies (signal, exit, or the
 *   bus fails), or a callback overruns callback_timeout_ms (the child is
 *   then SIGKILLed), the instance: stops leading at once (no on_deposed can
 *   reach a dead worker), completes the in-flight reconcile and every queued
 *   one with -EIO and the reason, drops the other queued events, reports
 *   on_failed(reason) and starts a new worker after a capped exponential
 *   backoff (restart_min_ms doubling up to restart_max_ms; back to the
 *   minimum once a worker stayed up for restart_max_ms). The new worker
 *   runs init; on success on_recovered is reported; a failed init of a
 *   restarted worker counts as another failure. A crash during the FIRST
 *   init is reported through on_init (err -EIO) instead, with no restart.
 *   Messages the child sent just before dying are read first, best effort.
 * - Callback timeout (thread mode). The callback cannot be killed (a
 *   thread cannot be stopped safely: it may hold locks, be inside libc):
 *   the instance reports on_failed("callback X exceeded N ms"), refuses new
 *   leadership events until the callback returns (as in process mode while
 *   restarting), then reports on_recovered and carries on. A drain
 *   completes at once while a callback overruns (the callback is abandoned,
 *   not waited for), so a hot reload proceeds. stop() of an instance whose
 *   callback overran (before or during the stop: a stuck fini) completes
 *   without waiting for it: pending events are settled, `stopped` follows,
 *   and free() leaves the thread behind with the plugin's code loaded
 *   (never dlclosed under a running thread).
 * - Timeouts per callback kind (PLUGIN_CALLBACK_*): callback_timeout_kind_ms
 *   overrides callback_timeout_ms per kind. The running callback is read
 *   from the worker's activity page (worker.h), not guessed from the bus:
 *   plugin_instance_running() and the crash reason of a worker process name
 *   the callback that really ran.
 * - Events: every event carries a sequence number and is acknowledged by the
 *   worker (EventDone, with the callback's return value and error text).
 *   Events are handed to the worker one at a time (plugin_instance_stats:
 *   queued + in_flight) with two exceptions: the start of a term goes in one
 *   go (on_elected, the replay and the first reconcile: the reconcile does
 *   not wait two bus round trips; elected() sends nothing itself, so that a
 *   reconcile() in the same loop step joins them in one message, else the
 *   deferred timer sends them), and on_deposed / fini go at once. Queued
 *   events are on the host side and deposed() drops them there; term events
 *   already handed over are skipped by the worker when it finds the term's
 *   end (on_deposed, a new on_elected, fini) waiting behind them before it
 *   starts them (EventDone.skipped; counted as dropped, a skipped reconcile
 *   completes with -ECANCELED like a dropped one). Only what the worker
 *   started before the on_deposed reached it still runs, before on_deposed.
 * - Linkerd semantics (election_driver.h): elected() queues on_elected(token) and at
 *   once the replay on_releases_changed(cached releases). deposed() drops every
 *   queued leadership event (a dropped reconcile completes with -ECANCELED)
 *   and queues on_deposed - only if the term's on_elected had been handed to
 *   the worker; an event already running finishes. Outside a term nothing
 *   reaches the plugin: releases_changed() is ignored and reconcile()
 *   completes with -ECANCELED. Consecutive queued releases_changed events are
 *   merged (the newest summary wins).
 * - Txns: while a callback runs, the worker sends TxnRequest(id) and waits;
 *   the host checks it (leading, and in the term the callback belongs to: a
 *   callback still running from before a deposed()+elected() gets -ESTALE;
 *   op/compare types and flags), prefixes every
 *   key with the data prefix, calls driver_host.fenced_txn, and answers
 *   TxnReply(id) with the prefix stripped from returned keys (a returned key
 *   outside the prefix is dropped, never shown). The worker gives up after
 *   txn_timeout_ms (the outcome is then unknown; a late reply is discarded).
 * - Every bus message is decoded as hostile: undecodable bytes, unknown kinds,
 *   acks for the wrong sequence, out-of-range enum values are counted
 *   (stats.bad_messages), logged at debug and dropped.
 * - Completions (reconcile done, drain done, init done, failed, recovered,
 *   stopped) are always called from a loop timer, never from inside the call
 *   that caused them, so the owner may call any function of the instance
 *   (including free) from them. Each one exactly once.
 * - Lifecycle: new -> worker runs init (on_init callback) -> ready. stop():
 *   ends leadership like deposed(), lets the queue drain, runs fini on the
 *   worker, joins the thread / waits for the child to exit (SIGKILL after
 *   exit_grace_ms), then calls `stopped`. free() dlcloses (through
 *   loader_close). free() without a completed stop() does the same
 *   synchronously (blocking the caller until the worker ended: only for
 *   shutdown paths); in thread mode a plugin stuck forever in a callback
 *   then blocks it - the SDK forbids that; in process mode the child is
 *   killed after a bounded wait.
 *
 * OWNER CONTRACT (the daemon)
 * 1. on_init(userdata, err, msg) runs exactly once, for the first worker's
 *    init. err < 0 (init refused, or the first worker could not start or
 *    crashed during init): the instance is FAILED for good; free it.
 *    on_failed / on_recovered are never called before on_init(0).
 * 2. on_failed(userdata, reason) (after on_init(0), until stop()): the
 *    plugin's worker is lost (process mode: crashed, killed, exited, bus
 *    failure, restarted worker's init failed) or a callback overran
 *    callback_timeout_ms (both modes). The instance has already stopped
 *    leading locally and failed the pending reconciles (-EIO, reason); the
 *    completions follow on_failed in the same loop iteration. The owner must
 *    make this node give up the plugin's leadership AT ONCE, without a
 *    drain first (a drain waits for a hung thread-mode callback): i.e. call
 *    election_fail(el, reason) (deposes immediately, resigns, leaves the
 *    member set), mark the plugin failed with `reason` for the CLI, and keep
 *    the instance (do not free it: it restarts its worker by itself). The
 *    lease and the other plugins are not affected.
 * 3. on_recovered(userdata) runs once after each on_failed, when a fresh
 *    worker finished init (process) or the overrunning callback returned
 *    (thread). The owner may then let the election take part again (clear
 *    the failure) and clear the CLI error. on_failed and on_recovered strictly
 *    alternate, with one exception: when a restarted worker turns out to be
 *    a program of another release (bus version), no restart can mend it: the
 *    instance becomes FAILED for good and on_failed comes once more with
 *    that reason (plugin_instance_state() tells). After stop() neither is
 *    called.
 * 4. While failed (state RECOVERING): elected() and releases_changed() are
 *    ignored; reconcile() completes with -EIO; deposed() works; drain()
 *    completes at once (process: the worker is gone; thread: the callback
 *    that overran is not waited for); stop() and free() work (a pending
 *    restart is cancelled; thread: without waiting for that callback).
 */
#ifndef LH_PLUGIN_INSTANCE_H
#define LH_PLUGIN_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "election/election_driver.h"
#include "base/metrics.h"
#include "abi/abi_loader.h"
#include "base/loop.h"
#include "abi/abi_config_doc.h"

struct plugin_instance;

enum plugin_instance_state {
	PLUGIN_INSTANCE_STARTING = 0, /* worker runs init */
	PLUGIN_INSTANCE_READY = 1,    /* init succeeded */
	PLUGIN_INSTANCE_FAILED = 2,   /* init failed or the bus broke: nothing is delivered */
	PLUGIN_INSTANCE_STOPPING = 3, /* stop() called */
	PLUGIN_INSTANCE_STOPPED = 4,  /* fini ran (or was skipped), worker joined */
	/* the worker was lost or a callback overran (on_failed was reported):
	 * process mode restarts it, thread mode waits for the callback */
	PLUGIN_INSTANCE_RECOVERING = 5,
};

/* callback kinds, the indexes of plugin_instance_config.callback_timeout_kind_ms
 * (the same values as enum worker_callback) */
#define PLUGIN_CALLBACK_INIT 0u
#define PLUGIN_CALLBACK_ON_ELECTED 1u
#define PLUGIN_CALLBACK_ON_RELEASES_CHANGED 2u
#define PLUGIN_CALLBACK_RECONCILE 3u
#define PLUGIN_CALLBACK_ON_DEPOSED 4u
#define PLUGIN_CALLBACK_FINI 5u
#define PLUGIN_CALLBACK_ON_WATCH_EVENTS 6u
#define PLUGIN_CALLBACK_ON_CONFIG_CHANGED 7u
#define PLUGIN_CALLBACK_VALIDATE_CONFIG 8u
#define PLUGIN_CALLBACK_RECONCILE_KEY 9u
#define PLUGIN_CALLBACKS 10u
/* callback_timeout_kind_ms: this kind has no limit */
#define PLUGIN_TIMEOUT_NONE UINT32_MAX

/* plugin_instance_config.isolation */
#define PLUGIN_ISOLATION_THREAD 0u
#define PLUGIN_ISOLATION_PROCESS 1u

struct plugin_instance_stats {
	uint64_t queued;    /* events waiting in the host queue */
	uint64_t in_flight; /* events sent to the worker, not yet acknowledged (<= 5) */
	uint64_t messages;  /* bus messages with events sent to the worker (a batch is one) */
	uint64_t delivered; /* events acknowledged by the worker */
	uint64_t dropped;   /* events dropped by deposed()/stop() before delivery, or
	                     * skipped by the worker (the term had ended) */
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
	/* containment (appended) */
	uint64_t callback_timeouts; /* callbacks that overran callback_timeout_ms */
	uint64_t worker_failures;   /* on_failed reports */
	uint64_t worker_restarts;   /* workers started after the first one */
	int32_t worker_pid;         /* the live child (process mode), 0 if none */
	int32_t last_exit_status;   /* raw wait status of the last reaped child, -1 if none */
	uint64_t next_restart_ms;   /* the backoff used for the next restart */
	char last_failure[512];     /* the last on_failed reason, "" if none */
};

/* init finished: err 0 or the plugin's -errno; msg borrowed (may be "") */
typedef void (*plugin_instance_init_fn)(void *userdata, int err, const char *msg);
/* stop() finished */
typedef void (*plugin_instance_stopped_fn)(void *userdata);
/* the worker was lost or a callback overran: reason borrowed (see the owner
 * contract above) */
typedef void (*plugin_instance_failed_fn)(void *userdata, const char *reason);
/* a fresh worker is ready again / the overrunning callback returned */
typedef void (*plugin_instance_recovered_fn)(void *userdata);

/* Fields are appended only; zero means the default everywhere. Strings are
 * copied by plugin_instance_new. */
struct plugin_instance_config {
	plugin_instance_init_fn on_init; /* may be NULL */
	void *userdata;                  /* for on_init, on_failed, on_recovered */
	uint32_t txn_timeout_ms;         /* worker-side deadline of one txn; 0 = 30000 */
	uint32_t isolation;              /* PLUGIN_ISOLATION_*; 0 = thread */
	/* wall time one callback (txns included) may run; 0 = no limit */
	uint32_t callback_timeout_ms;
	plugin_instance_failed_fn on_failed;       /* may be NULL */
	plugin_instance_recovered_fn on_recovered; /* may be NULL */
	/* process mode: the helper program; NULL = plugin_instance_default_worker_path() */
	const char *worker_path;
	/* process mode: directory of the ipc socket (must be private, 0700);
	 * NULL = the directory of the plugin's private copy */
	const char *runtime_dir;
	/* process mode: file the child's stdout/stderr are appended to (created
	 * 0600); NULL = the daemon's stderr */
	const char *worker_stderr;
	uint32_t restart_min_ms; /* first restart delay; 0 = 100 */
	uint32_t restart_max_ms; /* cap of the doubling; 0 = 30000 */
	uint32_t exit_grace_ms;  /* after fini: wait this long for the child to exit, then
	                            SIGKILL; 0 = 5000 */
	/* per callback kind (PLUGIN_CALLBACK_*): 0 = callback_timeout_ms,
	 * PLUGIN_TIMEOUT_NONE = no limit, else the limit in ms */
	uint32_t callback_timeout_kind_ms[PLUGIN_CALLBACKS];
	/* ABI 1.2 watches: the full etcd prefixes outside P/N/data/ the operator
	 * granted this plugin read access to (--plugin-read; copied); the bound
	 * of undelivered live watch events (0 = PLUGIN_WATCH_QUEUE_MAX) */
	const char *const *read_grants;
	size_t n_read_grants;
	uint32_t watch_queue_max;
	/* the plugin's configuration for its first INIT (copied; NULL = none);
	 * later changes: plugin_instance_set_config */
	const struct plugin_config *config;
	/* INIT waits until the first plugin_instance_set_config (the owner has
	 * not read the configuration yet); false = INIT goes at once */
	bool hold_init;
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

/* plugin_instance_parse_isolation - "thread" / "process" -> PLUGIN_ISOLATION_*.
 * Returns 0 or -EINVAL (*ret untouched). */
int plugin_instance_parse_isolation(const char *s, uint32_t *ret);

/* plugin_instance_default_worker_path - the leasehold-worker program used
 * when cfg.worker_path is NULL: $(pkglibexecdir)/leasehold-worker if it is
 * executable, else leasehold-worker next to the running executable
 * (/proc/self/exe: a build tree), else where the installed layout puts it
 * relative to the executable's directory (bindir/../libexec/leasehold by
 * default: an installed tree moved elsewhere). Writes it to buf[len];
 * returns 0, or -ENOENT (none is executable; buf holds the installed path)
 * or -ENAMETOOLONG. */
int plugin_instance_default_worker_path(char *buf, size_t len);

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

/* plugin_instance_set_config - the plugin's configuration changed (c is
 * copied). Every INIT from now on (a restarted worker's too) carries it; an
 * initialised plugin with on_config_changed (ABI 1.2) gets one call with the
 * state as it is when the event reaches the front of the queue (changes
 * that come meanwhile are merged into it), leading or not: it is no
 * leadership event (deposed() does not drop it). It waits behind the
 * running callback. Returns 0 or -ENOMEM (the previous state stays). */
int plugin_instance_set_config(struct plugin_instance *pi, const struct plugin_config *c);
/* (a first call releases an INIT held by cfg.hold_init: INIT then carries c) */

/* plugin_instance_config - the configuration the instance hands over now
 * (borrowed, valid until the next plugin_instance_set_config) */
const struct plugin_config *plugin_instance_config(const struct plugin_instance *pi);

/* plugin_instance_validate_config - ask the plugin's validate_config
 * whether doc (len bytes, a checked JSON object, copied) may become its
 * cluster document. Returns 0 when queued: done(done_ud, err, msg) runs
 * exactly once on the loop (err 0 accepted, the plugin's -errno and reason,
 * or -EIO / -ECANCELED when the worker went or the instance stopped first);
 * -EOPNOTSUPP when the plugin has neither validate_config (ABI < 1.2 or
 * NULL) nor a configuration schema (ABI 1.3; the worker checks it first),
 * -EAGAIN while it is not initialised or is failed, -ENOMEM; done never
 * runs then. */
int plugin_instance_validate_config(struct plugin_instance *pi, const char *doc, size_t len,
                                    driver_reconcile_done_fn done, void *done_ud);

/* ---- shadow preview (runtime_instance_shadow.c) ---- */

/* what a shadow run reports per value: whether the key existed (old) or
 * what is written (new), its length, its first bytes and a hash of all of
 * it (FNV-1a 64), so a report stays small whatever the values */
#define PLUGIN_SHADOW_HEAD 32u
/* writes a run may capture (listed or unchanged); past it the plugin's txn
 * fails with -E2BIG and the report says truncated */
#define PLUGIN_SHADOW_MAX_WRITES 1000u
/* at most this many keys of a keyed plugin's snapshot get a reconcile_key */
#define PLUGIN_SHADOW_MAX_KEYS 1000u
struct plugin_shadow_value {
	bool present;
	uint64_t len;
	uint64_t hash;
	uint32_t head_len; /* <= PLUGIN_SHADOW_HEAD */
	uint8_t head[PLUGIN_SHADOW_HEAD];
};
/* one captured write that would change etcd: key relative to the data
 * prefix (owned by the report) */
struct plugin_shadow_write {
	uint8_t *key;
	size_t key_len;
	bool del;
	struct plugin_shadow_value old_value, new_value;
};
struct plugin_shadow_report {
	int64_t revision;      /* etcd's revision at the run's first read (0: none) */
	int64_t last_revision; /* ... at its last read */
	uint64_t puts, deletes; /* writes that would change a key */
	uint64_t unchanged;    /* puts of the value already there, deletes of nothing */
	uint64_t txns;         /* txns the plugin made (captured, refused or read-only) */
	bool truncated;        /* a txn was refused at PLUGIN_SHADOW_MAX_WRITES, or keys
	                        * past PLUGIN_SHADOW_MAX_KEYS were not previewed */
	struct plugin_shadow_write *writes; /* puts and deletes in the order made */
	size_t n_writes, cap;
};
/* the run ended: err 0 (the reconcile returned 0), the reconcile's -errno
 * and msg, -ETIMEDOUT (the timeout passed; rep holds what was captured
 * until then), -ECANCELED (dropped before it ran), the snapshot's failure
 * (-errno and msg: a read failed, a batch was not delivered, -EBUSY a term
 * began), -EIO reconcile_key failed for some keys, -E2BIG the write or key
 * bound was reached; rep is borrowed for the call. Exactly once, from a
 * loop callback. */
typedef void (*plugin_instance_shadow_fn)(void *ud, int err, const char *msg,
                                          const struct plugin_shadow_report *rep);

/* plugin_instance_shadow - run one reconcile outside a term with every
 * write captured: the plugin's txns become read-only etcd txns with the
 * same compares (their ops read the keys they would write), answered as if
 * applied (revision: the read's, plus one per writing txn so far); range
 * reads are served as usual; nothing is ever written. A plugin with watches
 * first gets their snapshot (every watch read once at one revision, as the
 * batches a term begins with; no live watch), its callbacks' txns captured
 * alike; a keyed plugin then gets, after the reconcile, one reconcile_key
 * per key the snapshot stands for (at most PLUGIN_SHADOW_MAX_KEYS, in
 * order, no retry; runtime_instance_shadow_keys.c). The plugin is not told it leads: no on_elected, fencing_token()
 * returns 0, request_reconcile fails with -ESTALE. The events queue like
 * any; the callback timeout applies; after timeout_ms done() gets
 * -ETIMEDOUT and the later txns are refused; a term that begins on the
 * node before the reconcile is queued ends the run with -EBUSY. Returns 0
 * (done follows) or, with done never called: -EBUSY this node leads the
 * plugin, -EALREADY a shadow run is in progress, -EAGAIN the instance is
 * not ready (init, failed, stopping), -ENOTSUP no etcd client, -EIO the
 * snapshot's first read could not be sent, -ENOMEM. Loop thread. */
int plugin_instance_shadow(struct plugin_instance *pi, uint32_t timeout_ms,
                           plugin_instance_shadow_fn done, void *ud);

/* plugin_instance_set_owner - hand the instance to another owner (the
 * daemon's standby of a pinned-back file becomes the running instance, or
 * is let go): from now on init's outcome, failures and recoveries go to
 * on_init / on_failed / on_recovered (each may be NULL) with userdata, and
 * such reports still queued for the old owner are dropped, never called.
 * Loop thread, not from inside one of pi's own callbacks. */
void plugin_instance_set_owner(struct plugin_instance *pi, plugin_instance_init_fn on_init,
                               plugin_instance_failed_fn on_failed,
                               plugin_instance_recovered_fn on_recovered, void *userdata);

/* plugin_instance_stop - end leadership (as deposed()), drain, run fini on
 * the worker, join it; then stopped(userdata) runs on the loop (once). Call
 * at most once; later driver ops are ignored (reconcile: -ECANCELED). */
void plugin_instance_stop(struct plugin_instance *pi, plugin_instance_stopped_fn stopped,
                          void *userdata);

/* plugin_instance_free - stop synchronously if needed (see design notes),
 * dlclose, free. Pending completions are NOT called. Accepts NULL. */
void plugin_instance_free(struct plugin_instance *pi);

/* plugin_instance_hurry - the process is leaving without waiting (a second
 * signal, the shutdown timeout): from now on every synchronous wait of
 * plugin_instance_free is short (200 ms), and a plugin thread stuck in a
 * callback is left behind instead of joined. */
void plugin_instance_hurry(void);

enum plugin_instance_state plugin_instance_state(const struct plugin_instance *pi);
/* the loaded plugin (borrowed, lives as long as pi) */
const struct loader_plugin *plugin_instance_plugin(const struct plugin_instance *pi);
/* plugin_instance_config_refusal - the plugin's refusal of its current
 * configuration: the reason its last on_config_changed returned with (its
 * set_error text, or "on_config_changed returned -EINVAL (no reason
 * given)") and in *ret_rev the cluster document's revision it refused; NULL
 * (*ret_rev untouched) when the last on_config_changed, or the init that
 * started from the configuration, succeeded. Borrowed: valid until the next
 * loop step. Loop thread. */
const char *plugin_instance_config_refusal(const struct plugin_instance *pi, int64_t *ret_rev);
/* a snapshot of the counters */
void plugin_instance_get_stats(const struct plugin_instance *pi, struct plugin_instance_stats *ret);
/* plugin_instance_bus_rtt - the bus's share of the events' round trips
 * (seconds; metrics.h), over the instance's life */
const struct metrics_hist *plugin_instance_bus_rtt(const struct plugin_instance *pi);
/* plugin_instance_running - the callback the plugin's worker runs right now
 * (as the worker itself published it): returns true with *ret_callback
 * ("reconcile", static) and *ret_since_ns (loop_now() time it began), or
 * false when none runs (or the worker is down). */
bool plugin_instance_running(const struct plugin_instance *pi, const char **ret_callback,
                             uint64_t *ret_since_ns);
/* plugin_instance_callback_timeout_ms - the limit that applies to callback
 * kind (PLUGIN_CALLBACK_*), 0 = none */
uint32_t plugin_instance_callback_timeout_ms(const struct plugin_instance *pi, unsigned kind);
/* queued + in flight */
uint64_t plugin_instance_pending(const struct plugin_instance *pi);
/* the bus URL (borrowed), e.g. "inproc://leasehold-123-4-reconciler" or, in
 * process mode, the current worker's "ipc://.../w123.4.2.sock" */
const char *plugin_instance_bus_url(const struct plugin_instance *pi);
/* the live worker child (process mode), 0 if none (thread mode, restarting) */
pid_t plugin_instance_worker_pid(const struct plugin_instance *pi);
/* plugin_instance_key_stats - a keyed plugin's work queue (ABI 1.3
 * reconcile_key): false (all zero) for a plugin without one. Loop thread. */
struct plugin_key_stats {
	uint64_t depth;     /* keys held: ready, backing off or running */
	uint64_t waiting;   /* ... of them backing off or asked for later */
	uint64_t oldest_ms; /* how long the oldest ready key has waited */
	uint64_t added;     /* changes queued (before deduplication) */
	uint64_t done;      /* keys reconciled */
	uint64_t failed;    /* key reconciles that failed (each retried) */
	uint64_t requeued;  /* requeue-after answers */
	uint64_t running;   /* keys whose reconcile_key runs now */
	uint64_t concurrency; /* how many may run at once (key_concurrency, at least 1) */
};
bool plugin_instance_key_stats(const struct plugin_instance *pi, struct plugin_key_stats *ret);

/* plugin_instance_watch_stats - the counters of the plugin's watches
 * (runtime_watch.h); false (ret zeroed) when it registered none */
struct plugin_watch_stats;
bool plugin_instance_watch_stats(const struct plugin_instance *pi, struct plugin_watch_stats *ret);

#endif
