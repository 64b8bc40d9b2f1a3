/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_internal.h - what the pieces of a plugin instance share
 * (not for the daemon: host/runtime/runtime_instance.h is the API). The reading guide
 * at the top of runtime_instance.c names each file and what it holds.
 *
 * Threading: everything here runs on the loop thread, except where a
 * comment says otherwise (pi_process_on_pipe_add runs on an nng thread and touches only
 * its generation's struct pi_gate; the worker thread owns struct worker and shares
 * nothing mutable with the host half: everything crosses the bus).
 * Ownership: struct plugin_instance owns its events, completions, queued
 * messages, timers, sockets and children; struct pending_txn is owned by the
 * etcd call it rides on (freed by pi_txn_on_txn_done) and only points back to the
 * instance while the instance wants the answer.
 * Errors: functions returning int give 0 or -errno.
 */
#ifndef LH_PLUGIN_INSTANCE_INTERNAL_H
#define LH_PLUGIN_INSTANCE_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nng/nng.h>

#include "abi/abi_bus.h"
#include "base/obj.h"
#include "etcd/etcd.h"
#include "base/metrics.h"
#include "abi/abi_config_doc.h"
#include "runtime/runtime_instance.h"
#include "runtime/runtime_keyqueue.h"
#include "runtime/runtime_watch.h"
#include "proto/bus.pb-c.h"
#include "worker/worker.h"

#define DEFAULT_TXN_TIMEOUT_MS 30000u
#define MAX_TXN_OPS 1024u
#define SYNC_STOP_TIMEOUT_MS 10000
#define HURRY_WAIT_MS 200 /* every synchronous wait after plugin_instance_hurry() */
#define DEFAULT_RESTART_MIN_MS 100u
#define DEFAULT_RESTART_MAX_MS 30000u
#define DEFAULT_EXIT_GRACE_MS 5000u
/* a spawned worker must have its bus connection accepted within this. With
 * nng up to 1.5.2 (Debian 12; fixed in 1.6.0 by nng #1518) a local client
 * that connects to the worker's bus socket and hangs up before the SP
 * handshake breaks the listener: the worker's own connection is then never
 * accepted and, without this deadline, the plugin never comes back. */
#define WORKER_ATTACH_TIMEOUT_MS 10000u
#define SYNC_KILL_WAIT_MS 2000
#define LOG_COMPONENT_MAX 80
#define PIPELINE_MAX 5 /* events handed to the worker at once (pi_queue_may_send) */

/* the callback each event runs: the values of enum worker_callback */
enum ev_kind {
	EV_INIT = WORKER_CB_INIT,
	EV_ELECTED = WORKER_CB_ON_ELECTED,
	EV_RELEASES = WORKER_CB_ON_RELEASES_CHANGED,
	EV_RECONCILE = WORKER_CB_RECONCILE,
	EV_DEPOSED = WORKER_CB_ON_DEPOSED,
	EV_FINI = WORKER_CB_FINI,
	EV_WATCH = WORKER_CB_ON_WATCH_EVENTS,
	EV_CONFIG = WORKER_CB_ON_CONFIG_CHANGED,   /* carries pi->config as sent */
	EV_VALIDATE = WORKER_CB_VALIDATE_CONFIG,   /* carries doc; done(err, msg) */
	EV_KEY = WORKER_CB_RECONCILE_KEY,          /* carries the queue key in doc */
};
_Static_assert(PLUGIN_CALLBACKS == WORKER_CALLBACKS && PLUGIN_CALLBACK_RECONCILE == EV_RECONCILE &&
		   PLUGIN_CALLBACK_FINI == EV_FINI,
	       "runtime_instance.h's callback kinds are worker.h's");

struct event {
	struct event *next;
	enum ev_kind kind;
	uint64_t seq;
	uint64_t sent_ns; /* loop_now() when handed to the worker */
	uint64_t term;	  /* pi->term when queued: txns of its callback are fenced on it */
	bool behind;	  /* handed over while others were in flight */
	int64_t token;
	struct releases rel;
	driver_reconcile_done_fn done; /* EV_RECONCILE, EV_VALIDATE */
	void *done_ud;
	struct plugin_watch_batch *batch; /* EV_WATCH: owned */
	int64_t config_rev; /* the cluster document's revision when sent (EV_CONFIG) */
	bool shadow; /* an event of a shadow run (EV_RECONCILE, EV_WATCH, EV_KEY): its
		      * txns are captured, never sent */
	uint64_t shadow_run; /* EV_WATCH, EV_KEY of a shadow run: the run's number */
	uint64_t key_epoch; /* EV_KEY: the queue's epoch when the key was taken */
	size_t doc_len; /* EV_VALIDATE: the document (NUL after it), EV_KEY: the key */
	char doc[];
};

enum comp_kind { COMP_RECONCILE, COMP_DRAIN, COMP_INIT, COMP_STOPPED, COMP_FAILED, COMP_RECOVERED };

struct completion {
	struct completion *next;
	enum comp_kind kind;
	void (*fn)(void);
	void *ud;
	int err;
	char *msg;
};

struct outmsg {
	struct outmsg *next;
	nng_msg *msg;
};

struct drain_waiter {
	struct drain_waiter *next;
	driver_drain_done_fn fn;
	void *ud;
};

struct pending_txn {
	unsigned magic; /* PENDING_TXN_MAGIC */
	struct pending_txn *next;
	struct plugin_instance *pi; /* NULL once the instance is gone */
	uint64_t id;
	bool absolute; /* a range of full keys (ABI 1.2) */
	struct pi_shadow_txn *shadow; /* a shadow run's read-only txn (owned), or NULL */
};

/* What the pipe callback of one worker generation's bus socket may touch
 * (process mode). It belongs to that socket, not to the instance: the
 * socket is closed on the closer thread (runtime_closer.h), maybe after the
 * instance is gone, and its callbacks can run until that close returns,
 * which frees the gate. mu is held for a few instructions only, never
 * across an nng call. */
struct pi_gate {
	pthread_mutex_t mu;
	pid_t expect_pid; /* the child whose connection is accepted; 0 = none any more */
	bool attached;	  /* expect_pid's connection was accepted */
};

/* one spawned leasehold-worker process, until it is reaped */
struct child {
	struct child *next;
	struct plugin_instance *pi;
	pid_t pid;
	int pidfd;
	struct loop_io *io;
	bool current; /* the live generation's child (not yet given up) */
};

struct plugin_instance {
	struct loader_plugin *lp;
	struct loop *loop;
	struct driver_host host;
	char *data_prefix;
	size_t prefix_len;
	char *node_id;
	struct plugin_instance_config cfg;
	char url[128];
	char log_comp[LOG_COMPONENT_MAX];

	nng_socket hsock, wsock;
	bool hsock_open, wsock_open;
	int rfd, sfd;
	struct loop_io *rio, *sio;

	struct worker *w;
	pthread_t thread;
	bool thread_running; /* created and not joined */
	bool broken;	     /* bus failed: nothing more can be delivered */

	/* containment */
	bool process;		/* process isolation */
	bool bus_up;		/* a worker generation is connected (thread: always) */
	bool init_reported;	/* on_init was pushed */
	bool failed_reported;	/* on_failed pushed, on_recovered not yet */
	bool overrun;		/* thread mode: the in-flight callback overran */
	uint64_t overrun_seq;	/* ... the seq of the event that overran */
	bool stop_after_reap;	/* finish the stop once the child is reaped */
	uint64_t gen;		/* worker generations started */
	uint64_t up_since;	/* loop_now() when the current worker finished init */
	uint64_t backoff_ms;	/* delay of the next restart */
	struct child *children; /* spawned, not reaped */
	struct child *cur;	/* the live generation's child or NULL */
	struct pi_gate *gate; /* the current generation's (NULL when closed) */
	unsigned instance_id;
	dev_t copy_dev; /* identity of lp->copy_path, checked by the child */
	ino_t copy_ino;
	char *worker_path, *runtime_dir, *worker_stderr;
	/* process mode: the children's activity page (worker.h), shared memory
	 * that outlives a dead child; -1 / NULL in thread mode */
	int activity_fd;
	struct worker_activity *activity_page;
	struct loop_timer *cb_timer;	  /* callback timeout, child exit grace */
	struct loop_timer *restart_timer; /* backoff */
	struct loop_timer *attach_timer;  /* WORKER_ATTACH_TIMEOUT_MS after a spawn */

	enum plugin_instance_state state; /* changed only by pi_state_set */
	bool leading;
	bool term_elected_sent;
	uint64_t term; /* leadership terms begun (elected()) */
	/* pi_queue_may_send: 1 = the last event handed over is an on_elected, 2 = it is
	 * that on_elected's replay; 0 = anything else */
	unsigned term_start;
	struct releases last_rel;
	uint64_t next_seq;

	struct event *q_head, *q_tail;
	struct event *sent_head, *sent_tail; /* handed to the worker, not yet acknowledged */
	unsigned n_sent;
	unsigned n_sent_keys; /* ... of them EV_KEY */
	struct outmsg *out_head, *out_tail;
	bool cork; /* pi_queue_send_nng queues without flushing; on_defer flushes */
	struct completion *c_head, *c_tail;
	struct drain_waiter *drains;
	struct pending_txn *txns;
	struct loop_timer *defer;
	plugin_instance_stopped_fn stopped;
	void *stopped_ud;
	bool stop_requested;
	bool dispatching;    /* on_defer is calling completions */
	bool free_requested; /* plugin_instance_free was called meanwhile */
	bool need_break;     /* a send failed: mark_broken from the timer */
	char break_why[128];

	struct plugin_instance_stats stats;
	/* the bus's own share of each event's round trip (sent -> done minus the
	 * worker's time on it), for events sent while nothing was in flight */
	struct metrics_hist bus_rtt;
	char init_error[512];

	/* ABI 1.2 watches (runtime_instance_watch.c) */
	ProtobufCBinaryData *grants; /* the read grants (copies), for INIT and checks */
	size_t n_grants;
	struct plugin_watch *watch; /* the watches init registered, or NULL */
	bool term_reconciled;	    /* this term's first reconcile was handed over */
	bool term_leaving;	    /* a drain was asked in this term: it is ending */
	/* the configuration (ABI 1.2): INIT and on_config_changed carry it as
	 * it is when they are sent */
	struct plugin_config config;
	bool init_held; /* cfg.hold_init until the first set_config */
	/* the last on_config_changed refusal ("" when the last one succeeded)
	 * and the configuration revision it refused */
	char config_refusal[512];
	int64_t config_refused_rev;
	bool refusal_logged; /* pi_txn_note_refusal warned once */
	struct pi_shadow *shadow; /* the shadow run in progress (runtime_instance_shadow.c) */
	uint64_t shadow_runs;	  /* shadow runs started: the next one's number */
	/* keyed reconcile (runtime_instance_keys.c): the work queue, or NULL
	 * for a plugin without reconcile_key; its timer wakes the first key
	 * that waits; keys_lost: a key could not be queued (no memory);
	 * keys_turn: the next idle turn goes to a key, not a watch batch */
	struct keyqueue *keys;
	struct loop_timer *keys_timer;
	bool keys_lost;
	bool keys_turn;
};

/* Magic number of struct pending_txn, whose pointer comes back through an
 * etcd callback (CHECK_OBJ, base/obj.h): a stale or foreign pointer stops at
 * the assert instead of being used. Cleared when it is freed. */
#define PENDING_TXN_MAGIC 0x50545843u

/* ---- runtime_instance.c: lifecycle and what the owner is told ---- */

/* pi_state_set - the one place pi->state changes: logs the transition at
 * debug and asserts that it is legal (see the table there). Setting the
 * current state again is a no-op. */
void pi_state_set(struct plugin_instance *pi, enum plugin_instance_state to);
/* every synchronous wait: normal, or short once plugin_instance_hurry() ran */
int pi_sync_wait_ms(int normal);
/* snprintf that may truncate on purpose */
void pi_fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
int pi_nng_to_errno(int rv);
void pi_note_error(struct plugin_instance *pi, int err, const char *msg);
/* the worker is lost or a callback overran: count, and tell the owner once
 * per outage (on_failed) */
void pi_report_failure(struct plugin_instance *pi, const char *reason);
/* a (restarted) worker finished init, or an overrunning callback returned */
void pi_worker_recovered(struct plugin_instance *pi);
/* the stop is complete: state STOPPED, stopped() is pushed */
void pi_stopped_now(struct plugin_instance *pi);
/* fini ran or can never run: end the worker (join the thread, or close the
 * bus and wait for the child, bounded), then pi_stopped_now */
void pi_finish_stop(struct plugin_instance *pi);

/* ---- runtime_instance_queue.c: event queue, completions, sending, driver ops ---- */

/* completions run from pi->defer only, never inside the call that caused them */
void pi_completion_push(struct plugin_instance *pi, enum comp_kind kind, void (*fn)(void), void *ud,
			int err, const char *msg);
void pi_completion_free(struct completion *c);
void pi_on_defer(struct loop_timer *t, void *userdata);
/* run the drain waiters once nothing is queued or in flight */
void pi_maybe_drained(struct plugin_instance *pi);
int pi_send_to_worker(struct plugin_instance *pi, const ProtobufCMessage *m);
/* a reconcile's done(err, msg) through a completion; other kinds: nothing */
void pi_event_complete_cancelled(struct plugin_instance *pi, struct event *ev, int err,
				 const char *msg);
struct event *pi_event_new(enum ev_kind kind);
void pi_enqueue(struct plugin_instance *pi, struct event *ev);
/* the bus message for evs[0..n) (caller owns it); NULL on ENOMEM */
nng_msg *pi_events_msg(const struct plugin_instance *pi, struct event *const *evs, size_t n);
void pi_sent_push(struct plugin_instance *pi, struct event *ev);
struct event *pi_sent_unlink_head(struct plugin_instance *pi);
/* the acknowledged head of the sent list (the worker answers in order) */
struct event *pi_sent_pop(struct plugin_instance *pi);
/* pi_sent_take_seq - the sent event an EventDone of seq answers, unlinked:
 * the head (pi_sent_pop), or, while keys run concurrently (they answer in
 * any order), an EV_KEY further down; NULL when none */
struct event *pi_sent_take_seq(struct plugin_instance *pi, uint64_t seq);
/* the whole sent list, for settling it (the worker is gone or failed) */
struct event *pi_sent_take_all(struct plugin_instance *pi);
/* hand queued events to the worker, as far as pi_queue_may_send allows */
void pi_pump(struct plugin_instance *pi);
/* drop queued leadership events (deposed, stop, failure) */
void pi_drop_queued(struct plugin_instance *pi, int err, const char *msg);
/* the bus failed: contain it (process mode) or fail the instance (thread) */
void pi_mark_broken(struct plugin_instance *pi, const char *why);

/* ---- runtime_instance_txn.c: the plugin's txns, fenced, to etcd ---- */

void pi_handle_txn(struct plugin_instance *pi, const TxnRequest *req);
/* the txns in flight in etcd are no longer answered to this worker:
 * pi_txn_on_txn_done frees each when etcd answers */
void pi_txns_orphan(struct plugin_instance *pi);

/* the reply to a txn or range request: resp NULL with err < 0; keys are
 * stripped of the data prefix unless absolute (then they must lie in a grant) */
void pi_reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
		  const struct etcd_response *resp, bool absolute);
void pi_txn_unlink(struct plugin_instance *pi, struct pending_txn *pt);
/* pi_txn_check_key / pi_txn_check_value - the one check of a plugin's
 * relative key (plugin.h "Keys": at most LH_KEY_MAX bytes, no leading '/',
 * no empty, "." or ".." component, no NUL byte; empty only as a prefix) and
 * of a value (at most LH_VALUE_MAX bytes), for txn compares and ops and
 * relative range reads, in both isolation modes (a worker process is
 * untrusted). 0, or -EINVAL with "WHAT: key \"...\" RULE" in why, logged by
 * pi_txn_note_refusal. */
int pi_txn_check_key(struct plugin_instance *pi, ProtobufCBinaryData k, bool prefix,
		     const char *what, char *why, size_t len);
int pi_txn_check_value(struct plugin_instance *pi, ProtobufCBinaryData v, const char *what,
		       char *why, size_t len);
/* log a refused plugin request: the instance's first at warning, the rest
 * at debug */
void pi_txn_note_refusal(struct plugin_instance *pi, const char *why);

/* ---- runtime_instance_watch.c: ABI 1.2 watches, range reads, reconcile requests ---- */

/* copy cfg's grants (at new); free them (at free) */
int pi_watch_init(struct plugin_instance *pi, const struct plugin_instance_config *cfg);
void pi_watch_free(struct plugin_instance *pi);
/* INIT's answer: take the watches it registered (checked again: a relative
 * one under the data prefix, an absolute one inside a grant). 0, or -EPERM /
 * -ENOTSUP / -ENOMEM with the reason in msg. */
int pi_watch_setup(struct plugin_instance *pi, const EventDone *d, char *msg, size_t len);
/* a term begins (elected) / the instance stops leading (any path) */
void pi_watch_term_start(struct plugin_instance *pi);
void pi_watch_stop(struct plugin_instance *pi);
/* pi_pump: queue the next watch batch as an EV_WATCH event when one may go
 * (leading, the term's first reconcile handed over, nothing else queued or
 * in flight); true when one was queued */
bool pi_watch_feed(struct plugin_instance *pi);
/* free an event and what it owns */
void pi_event_free(struct event *ev);
void pi_handle_range(struct plugin_instance *pi, const Leasehold__Bus__RangeRequest *req);
void pi_handle_request_reconcile(struct plugin_instance *pi);
/* is the full key k[0..len) (or, for a prefix, everything under it) granted? */
bool pi_granted(const struct plugin_instance *pi, const void *k, size_t len);

/* ---- runtime_instance_keys.c: keyed reconcile (ABI 1.3) ---- */

/* the queue of a plugin with reconcile_key (at new) / freed (at free) */
int pi_keys_init(struct plugin_instance *pi);
void pi_keys_free(struct plugin_instance *pi);
/* the host itself takes a batch's keys: no key_of, no on_watch_events */
bool pi_keys_host_takes_batches(const struct plugin_instance *pi);
/* pi_pump: take the host's batches; queue the next key as an EV_KEY when
 * one may go (pi_watch_feed's rule). true when an event was queued. */
bool pi_keys_feed(struct plugin_instance *pi);
/* the instance stops leading: the queue is dropped */
void pi_keys_stop(struct plugin_instance *pi);
/* pi_keys_concurrent - the plugin declared a key_concurrency above 1:
 * its keys go to the worker beside each other (pi_queue_may_send) */
bool pi_keys_concurrent(const struct plugin_instance *pi);
/* an EV_KEY or EV_WATCH was answered (err normalised, skipped as the
 * receiver decided) / could not be delivered */
void pi_keys_on_done(struct plugin_instance *pi, const struct event *ev, const EventDone *d,
		     int err, bool skipped);
void pi_keys_on_cancelled(struct plugin_instance *pi, const struct event *ev);

/* ---- runtime_instance_shadow.c, _txn.c: shadow preview runs ---- */

/* pi_shadow_handle_txn - a txn of a shadow run's callback, checked and
 * converted by pi_handle_txn (full keys): sent as a read-only txn, its
 * writes captured, answered as if applied. Never writes. */
void pi_shadow_handle_txn(struct plugin_instance *pi, uint64_t id, const struct etcd_compare *cmps,
			  size_t n_cmps, const struct etcd_op *succ, size_t n_succ,
			  const struct etcd_op *fail, size_t n_fail);
/* a pending shadow txn is freed with its pending_txn */
void pi_shadow_txn_free(struct pi_shadow_txn *st);
/* plugin_instance_free: drop the run without calling its done */
void pi_shadow_free(struct plugin_instance *pi);
/* pi_shadow_cancel - the instance stops: a run that has not reported
 * reports -ECANCELED now (its snapshot stops, nothing more is queued), so
 * that no request waits for an instance that is going */
void pi_shadow_cancel(struct plugin_instance *pi);
/* a shadow EV_WATCH or EV_KEY was answered (d: its answer; err its
 * result) or was skipped or could not be delivered (d NULL) */
void pi_shadow_on_event(struct plugin_instance *pi, const struct event *ev, const EventDone *d,
			int err, const char *msg);

/* ---- runtime_instance_shadow_keys.c: a keyed plugin's shadow keys ---- */

struct pi_shadow_keys;
/* pi_shadow_keys_add - the queue keys of a snapshot batch's answer d (a
 * batch of n_events events) into *ks (created on the first key): each once;
 * past PLUGIN_SHADOW_MAX_KEYS dropped and noted (truncated). 0, -EPROTO the
 * worker could not give them all, -EBADMSG bad keys, -ENOMEM. */
int pi_shadow_keys_add(struct pi_shadow_keys **ks, const EventDone *d, size_t n_events);
/* pi_shadow_keys_next - the next key as a shadow EV_KEY event of run
 * (caller owns it; its term is the caller's to set), *ret NULL when every
 * key had its event. 0 or -ENOMEM. ks may be NULL (no keys). */
int pi_shadow_keys_next(struct pi_shadow_keys *ks, uint64_t run, struct event **ret);
size_t pi_shadow_keys_count(const struct pi_shadow_keys *ks);
bool pi_shadow_keys_truncated(const struct pi_shadow_keys *ks);
void pi_shadow_keys_free(struct pi_shadow_keys *ks);

/* ---- runtime_instance_shadow_snapshot.c: a shadow run's watch snapshot ---- */

struct pi_shadow_snap;
/* done(ud, err, msg, rev): every batch was answered (err 0) or the snapshot
 * failed (-errno, msg; batches may still be outstanding: pi_shadow_snap_busy);
 * rev is the cut's revision (0 before the first answer). Once per snapshot,
 * from a loop callback. */
typedef void (*pi_shadow_snap_done_fn)(void *ud, int err, const char *msg, int64_t rev);
/* pi_shadow_snap_start - read every watch of pi->watch (at least one) at one
 * revision and queue their snapshot batches as shadow EV_WATCH events of run
 * number `run`, a page at a time. 0 (done follows) or -errno (never done). */
int pi_shadow_snap_start(struct plugin_instance *pi, uint64_t run, pi_shadow_snap_done_fn done,
			 void *ud, struct pi_shadow_snap **ret);
/* a read in flight or a batch not yet answered */
bool pi_shadow_snap_busy(const struct pi_shadow_snap *s);
/* the run ended (timeout): the read in flight is cancelled, done is not
 * called any more; outstanding batches still count as busy. NULL is fine. */
void pi_shadow_snap_stop(struct pi_shadow_snap *s);
/* the keys handed over so far */
uint64_t pi_shadow_snap_keys(const struct pi_shadow_snap *s);
/* pi_shadow_on_batch's work for an event of this run (others are ignored) */
void pi_shadow_snap_on_batch(struct pi_shadow_snap *s, const struct event *ev, bool ran, int err,
			     const char *msg);
/* cancels the read in flight; done is not called. NULL is fine. */
void pi_shadow_snap_free(struct pi_shadow_snap *s);

/* A shadow run (runtime_instance_shadow.c), its captured writes
 * (runtime_instance_shadow_txn.c): pi->shadow while it lasts. Its pointer
 * comes back through timers and event completions: CHECK_OBJ. */
#define PI_SHADOW_MAGIC 0x53484457u

struct pi_shadow {
	unsigned magic; /* PI_SHADOW_MAGIC */
	struct plugin_instance *pi;
	plugin_instance_shadow_fn done;
	void *ud;
	struct loop_timer *timer;
	uint32_t timeout_ms;
	uint64_t run;		   /* its number (pi->shadow_runs) */
	struct pi_shadow_snap *snap; /* the watches' snapshot, or NULL */
	struct pi_shadow_keys *keys; /* a keyed plugin's snapshot keys, or NULL */
	bool event_queued;	   /* the reconcile or a key is queued or in flight */
	uint64_t keys_failed;	   /* reconcile_key failures */
	char key_error[300];	   /* the first one */
	bool reported; /* done() ran: every later txn is refused */
	uint64_t writing_txns; /* captured txns that would change etcd */
	struct plugin_shadow_report rep;
};

/* ---- runtime_instance_recv.c: messages from the worker ---- */

void pi_on_readable(struct loop_io *io, int fd, uint32_t events, void *userdata);

/* ---- runtime_instance_timeout.c: callback timeouts, the running callback ---- */

void pi_on_cb_timer(struct loop_timer *t, void *userdata);
/* thread mode: stop now, leaving an overrunning callback's thread behind */
void pi_stop_abandoning(struct plugin_instance *pi);

/* ---- runtime_instance_process.c: worker processes (process isolation) ---- */

/* resolve and check what the child needs */
int pi_process_prepare(struct plugin_instance *pi);
/* a fresh bus and a fresh child, then INIT */
int pi_gen_start(struct plugin_instance *pi);
/* close the current generation's bus (on the closer thread: never waits
 * here); nothing is completed here */
void pi_gen_close(struct plugin_instance *pi);
/* the current worker is gone or must go: settle, report, restart */
void pi_gen_lost(struct plugin_instance *pi, const char *reason);
void pi_on_restart(struct loop_timer *t, void *userdata);
void pi_on_attach_timer(struct loop_timer *t, void *userdata);
uint64_t pi_exit_grace_ns(const struct plugin_instance *pi);
void pi_child_kill(const struct child *c);
void pi_child_free(struct child *c);

/* ---- test and fuzz hooks ---- */

/* For tests and fuzzing: handle `len` bytes exactly as if they had come from
 * the worker (bytes are only read). Returns 0 when they were accepted, else
 * the -errno they were rejected with (-EBADMSG undecodable, -EPROTO
 * unexpected). */
int plugin_instance_inject_from_worker(struct plugin_instance *pi, const void *buf, size_t len);
/* For tests: send raw bytes to the worker on the real socket (non-blocking,
 * queued). Returns 0 or -errno. */
int plugin_instance_send_raw_to_worker(struct plugin_instance *pi, const void *buf, size_t len);

#endif
