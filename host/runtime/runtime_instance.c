/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance.c - a plugin instance's lifecycle: new, stop, free (with
 * the synchronous shutdown free() falls back to), the thread-mode worker,
 * the state machine and what the owner is told; see runtime_instance.h for
 * the design notes.
 *
 * Reading guide (the files of a plugin instance; all share
 * runtime_instance_internal.h, which holds struct plugin_instance and the
 * contracts between the pieces). The host half runs on the loop thread; the
 * worker half is worker.c, in a thread of its own or in a leasehold-worker
 * process. The two halves share nothing mutable: the worker owns struct
 * worker after pthread_create and until it is joined (or lives in another
 * process); everything crosses the bus.
 * - runtime_instance.c (this file): plugin_instance_new / _stop / _free,
 *   the worker thread, pi_state_set (the one setter of pi->state, which
 *   logs and asserts every transition), failure and recovery reports, the
 *   end of a stop, the accessors.
 * - runtime_instance_queue.c: the event queue (what may go to the worker and
 *   when: pi_queue_may_send, pump), the sent list, the bus form of events, sending
 *   (corked, flushed from the deferred timer), completions (always run from
 *   that timer) and the driver ops the election calls.
 * - runtime_instance_txn.c: a plugin's txn request -> a fenced etcd txn under
 *   the data prefix, and the reply back to the worker.
 * - runtime_instance_recv.c: messages from the worker: acks (the outcome of
 *   each callback, in order), txn requests, log lines, protocol errors.
 * - runtime_instance_timeout.c: callback timeouts (per kind) and which
 *   callback runs right now (the worker's activity page).
 * - runtime_instance_process.c: process isolation: worker generations (each
 *   child gets its own host socket, listener and URL), spawn, pidfd reaping,
 *   restart backoff, the attach deadline. pi_gen_lost() is the one place
 *   where a lost worker's state is settled; a child is reaped through its
 *   pidfd, which may happen after the generation ended (struct child
 *   outlives it).
 * - runtime_instance_watch.c: ABI 1.2 watches (when a batch may go), range
 *   reads, reconcile requests; runtime_instance_shadow.c: shadow runs.
 * - runtime_instance_keys.c: keyed reconcile (ABI 1.3): the work queue
 *   (runtime_keyqueue.c) fed from the watches, one EV_KEY at a time.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "base/log.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance_internal.h"

static atomic_uint g_instance_counter;
static atomic_bool g_hurry; /* plugin_instance_hurry(): the process is leaving */

void plugin_instance_hurry(void)
{
	atomic_store(&g_hurry, true);
}

/* what a plugin thread left behind (stuck in a callback) still uses: kept
 * reachable until the process exits */
struct left_behind {
	struct left_behind *next;
	struct worker *w;
	struct loader_plugin *lp;
};
static struct left_behind *g_left_behind;

int pi_sync_wait_ms(int normal)
{
	return atomic_load(&g_hurry) ? HURRY_WAIT_MS : normal;
}

/* snprintf that may truncate on purpose */
void pi_fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

int pi_nng_to_errno(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case NNG_ENOMEM:
		return -ENOMEM;
	case NNG_EAGAIN:
		return -EAGAIN;
	case NNG_ETIMEDOUT:
		return -ETIMEDOUT;
	case NNG_ECLOSED:
		return -ECANCELED;
	case NNG_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

static const char *pi_state_name(enum plugin_instance_state s)
{
	switch (s) {
	case PLUGIN_INSTANCE_STARTING:
		return "starting";
	case PLUGIN_INSTANCE_READY:
		return "ready";
	case PLUGIN_INSTANCE_FAILED:
		return "failed";
	case PLUGIN_INSTANCE_STOPPING:
		return "stopping";
	case PLUGIN_INSTANCE_STOPPED:
		return "stopped";
	case PLUGIN_INSTANCE_RECOVERING:
		return "recovering";
	}
	return "unknown";
}

#define STATE_BIT(s) (1u << (s))

/* the transitions pi_state_set allows: legal[from] has the bit of each `to`.
 * FAILED is final until a stop; a stop may still fail (a worker that dies
 * or turns out to be of another release during fini) before it ends; STOPPED
 * is final. */
static const unsigned legal[] = {
    [PLUGIN_INSTANCE_STARTING] =
	STATE_BIT(PLUGIN_INSTANCE_READY) | STATE_BIT(PLUGIN_INSTANCE_FAILED) |
	STATE_BIT(PLUGIN_INSTANCE_RECOVERING) | STATE_BIT(PLUGIN_INSTANCE_STOPPING),
    [PLUGIN_INSTANCE_READY] = STATE_BIT(PLUGIN_INSTANCE_RECOVERING) |
			      STATE_BIT(PLUGIN_INSTANCE_FAILED) |
			      STATE_BIT(PLUGIN_INSTANCE_STOPPING),
    [PLUGIN_INSTANCE_RECOVERING] = STATE_BIT(PLUGIN_INSTANCE_READY) |
				   STATE_BIT(PLUGIN_INSTANCE_FAILED) |
				   STATE_BIT(PLUGIN_INSTANCE_STOPPING),
    [PLUGIN_INSTANCE_FAILED] =
	STATE_BIT(PLUGIN_INSTANCE_STOPPING) | STATE_BIT(PLUGIN_INSTANCE_STOPPED),
    [PLUGIN_INSTANCE_STOPPING] =
	STATE_BIT(PLUGIN_INSTANCE_FAILED) | STATE_BIT(PLUGIN_INSTANCE_STOPPED),
    [PLUGIN_INSTANCE_STOPPED] = 0,
};

void pi_state_set(struct plugin_instance *pi, enum plugin_instance_state to)
{
	enum plugin_instance_state from = pi->state;
	if (from == to)
		return;
	assert((size_t)from < sizeof(legal) / sizeof(legal[0]) && (legal[from] & STATE_BIT(to)));
	/* only a stop ends an instance, and once one is asked for the
	 * instance never becomes usable again */
	assert(to != PLUGIN_INSTANCE_STOPPED || pi->stop_requested);
	assert(!pi->stop_requested || to == PLUGIN_INSTANCE_STOPPING ||
	       to == PLUGIN_INSTANCE_FAILED || to == PLUGIN_INSTANCE_STOPPED);
	log_debug(pi->log_comp, "state %s -> %s", pi_state_name(from), pi_state_name(to));
	pi->state = to;
}

void pi_note_error(struct plugin_instance *pi, int err, const char *msg)
{
	pi->stats.last_err = err;
	snprintf(pi->stats.last_error, sizeof(pi->stats.last_error), "%s", msg ? msg : "");
}

void pi_stopped_now(struct plugin_instance *pi)
{
	pi_state_set(pi, PLUGIN_INSTANCE_STOPPED);
	if (pi->stopped)
		pi_completion_push(pi, COMP_STOPPED, (void (*)(void))pi->stopped, pi->stopped_ud, 0,
				   NULL);
	pi->stopped = NULL;
}

/* close a thread worker's inproc socket off the loop (runtime_closer.h):
 * nng_close waits on nng's reaper, which a lost process worker's socket can
 * have wedged; inline only when no closer thread can run */
static void pi_close_socket(struct plugin_instance *pi, nng_socket s)
{
	if (runtime_closer_close(s, NULL, NULL) < 0) {
		log_error(pi->log_comp, "no closer thread: closing a bus socket here");
		nng_close(s);
	}
}

void pi_finish_stop(struct plugin_instance *pi)
{
	assert(pi->stop_requested); /* only a stop queues fini */
	if (pi->state == PLUGIN_INSTANCE_STOPPED || pi->stop_after_reap)
		return;
	if (pi->process) {
		/* closing the bus tells the child to exit; wait for it (bounded) */
		loop_timer_disarm(pi->restart_timer);
		pi_gen_close(pi);
		if (pi->children) {
			pi->stop_after_reap = true;
			loop_timer_arm_in(pi->cb_timer, pi_exit_grace_ns(pi));
			return;
		}
		pi_stopped_now(pi);
		return;
	}
	if (pi->thread_running && pi->broken) {
		/* the bus broke: wake a worker blocked on its socket, and leave the
		 * join to plugin_instance_free (bounded): the worker may be in a
		 * callback, or the wake-up behind a close that never returns */
		if (pi->wsock_open) {
			pi_close_socket(pi, pi->wsock);
			pi->wsock_open = false;
		}
	} else if (pi->thread_running) {
		pthread_join(pi->thread, NULL); /* after FINI's ack the worker only returns */
		pi->thread_running = false;
	}
	pi_stopped_now(pi);
}

void plugin_instance_set_owner(struct plugin_instance *pi, plugin_instance_init_fn on_init,
                               plugin_instance_failed_fn on_failed,
                               plugin_instance_recovered_fn on_recovered, void *userdata)
{
	pi->cfg.on_init = on_init;
	pi->cfg.on_failed = on_failed;
	pi->cfg.on_recovered = on_recovered;
	pi->cfg.userdata = userdata;
	/* the old owner's reports still queued are its own: drop them */
	pi->c_tail = NULL;
	for (struct completion **pp = &pi->c_head; *pp;) {
		struct completion *c = *pp;
		if (c->kind == COMP_INIT || c->kind == COMP_FAILED || c->kind == COMP_RECOVERED) {
			*pp = c->next;
			pi_completion_free(c);
			continue;
		}
		pi->c_tail = c;
		pp = &c->next;
	}
}

/* a (restarted) worker finished init */
void pi_worker_recovered(struct plugin_instance *pi)
{
	if (pi->state == PLUGIN_INSTANCE_RECOVERING || pi->state == PLUGIN_INSTANCE_STARTING)
		pi_state_set(pi, PLUGIN_INSTANCE_READY);
	if (pi->failed_reported && !pi->stop_requested) {
		pi->failed_reported = false;
		log_info(pi->log_comp, "plugin worker recovered");
		if (pi->cfg.on_recovered)
			pi_completion_push(pi, COMP_RECOVERED, (void (*)(void))pi->cfg.on_recovered,
					   pi->cfg.userdata, 0, NULL);
	}
}

/* Tell the owner (once per outage) and count. */
void pi_report_failure(struct plugin_instance *pi, const char *reason)
{
	pi->stats.worker_failures++;
	pi_fmt(pi->stats.last_failure, sizeof(pi->stats.last_failure), "%s", reason);
	pi_note_error(pi, -EIO, reason);
	log_error(pi->log_comp, "%s", reason);
	if (pi->stop_requested || pi->state == PLUGIN_INSTANCE_FAILED || !pi->init_reported)
		return; /* before on_init: init's own outcome reports it */
	pi_state_set(pi, PLUGIN_INSTANCE_RECOVERING);
	if (!pi->failed_reported) {
		pi->failed_reported = true;
		if (pi->cfg.on_failed)
			pi_completion_push(pi, COMP_FAILED, (void (*)(void))pi->cfg.on_failed,
					   pi->cfg.userdata, -EIO, reason);
	}
}

int plugin_instance_parse_isolation(const char *s, uint32_t *ret)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "thread") == 0)
		*ret = PLUGIN_ISOLATION_THREAD;
	else if (strcmp(s, "process") == 0)
		*ret = PLUGIN_ISOLATION_PROCESS;
	else
		return -EINVAL;
	return 0;
}

static void *pi_worker_thread(void *arg)
{
	worker_run(arg);
	return NULL;
}

static int pi_start_thread(struct plugin_instance *pi)
{
	sigset_t all, old;
	sigfillset(&all);
	/* synchronous faults must stay deliverable (crash reports, sanitizers) */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = -pthread_create(&pi->thread, NULL, pi_worker_thread, pi->w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	pi->thread_running = true;
	char tname[16];
	pi_fmt(tname, sizeof(tname), "lh-%s", pi->lp->name);
	pthread_setname_np(pi->thread, tname);
	return 0;
}

/* pi_thread_bus_open - thread isolation: the inproc pair between the loop
 * (hsock) and the worker thread (wsock), the host side watched by the loop */
static int pi_thread_bus_open(struct plugin_instance *pi)
{
	int rv;
	snprintf(pi->url, sizeof(pi->url), "inproc://leasehold-%ld-%u-%s", (long)getpid(),
		 pi->instance_id, pi->lp->name);
	if ((rv = nng_pair1_open(&pi->hsock)) != 0)
		return pi_nng_to_errno(rv);
	pi->hsock_open = true;
	if ((rv = nng_pair1_open(&pi->wsock)) != 0)
		return pi_nng_to_errno(rv);
	pi->wsock_open = true;
	nng_socket_set_int(pi->hsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->hsock, NNG_OPT_RECVBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_RECVBUF, 64);
	if ((rv = nng_listen(pi->hsock, pi->url, NULL, 0)) != 0)
		return pi_nng_to_errno(rv);
	if ((rv = nng_dial(pi->wsock, pi->url, NULL, 0)) != 0)
		return pi_nng_to_errno(rv);
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_RECVFD, &pi->rfd)) != 0)
		return pi_nng_to_errno(rv);
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_SENDFD, &pi->sfd)) != 0)
		return pi_nng_to_errno(rv);
	return loop_io_add(pi->loop, pi->rfd, EPOLLIN, pi_on_readable, pi, &pi->rio);
}

/* pi_thread_start_up - thread isolation: the bus, the worker, INIT queued
 * and the worker thread started */
static int pi_thread_start_up(struct plugin_instance *pi)
{
	int r = pi_thread_bus_open(pi);
	if (r < 0)
		return r;
	r = worker_new(&pi->lp->desc, pi->wsock, pi->cfg.txn_timeout_ms, &pi->w);
	if (r < 0)
		return r;
	pi->bus_up = true;
	struct event *init = pi_event_new(EV_INIT);
	if (!init)
		return -ENOMEM;
	pi_enqueue(pi, init);
	r = pi_start_thread(pi);
	if (r < 0)
		return r;
	pi_state_set(pi, PLUGIN_INSTANCE_STARTING);
	pi_pump(pi);
	return 0;
}

/* the worker process's files (copied from cfg's borrowed strings, which are
 * never kept) and its first generation */
static int pi_process_start_up(struct plugin_instance *pi, const struct plugin_instance_config *cfg)
{
	pi->cfg.worker_path = cfg->worker_path;
	pi->cfg.runtime_dir = cfg->runtime_dir;
	pi->cfg.worker_stderr = cfg->worker_stderr;
	int r = pi_process_prepare(pi);
	pi->cfg.worker_path = pi->cfg.runtime_dir = pi->cfg.worker_stderr = NULL;
	if (r < 0)
		return r;
	pi_state_set(pi, PLUGIN_INSTANCE_STARTING);
	return pi_gen_start(pi);
}

int plugin_instance_new(struct loader_plugin *lp, struct loop *l, const struct driver_host *host,
			const char *node_id, const struct plugin_instance_config *cfg,
			struct plugin_instance **ret_pi)
{
	struct plugin_instance *pi = calloc(1, sizeof(*pi));
	int r;
	if (!pi)
		return -ENOMEM;
	pi->loop = l;
	pi->host = *host;
	metrics_hist_init(&pi->bus_rtt, metrics_bounds_bus, metrics_n_bounds_bus);
	if (cfg)
		pi->cfg = *cfg;
	pi->cfg.config = NULL; /* copied into pi->config below */
	pi->init_held = cfg && cfg->hold_init;
	if (cfg && cfg->config && plugin_config_copy(&pi->config, cfg->config) < 0) {
		free(pi);
		return -ENOMEM;
	}
	/* borrowed strings of cfg are copied below (pi_process_prepare); never kept */
	pi->cfg.worker_path = pi->cfg.runtime_dir = pi->cfg.worker_stderr = NULL;
	if (!pi->cfg.txn_timeout_ms)
		pi->cfg.txn_timeout_ms = DEFAULT_TXN_TIMEOUT_MS;
	pi->rfd = pi->sfd = -1;
	pi->activity_fd = -1;
	pi->stats.last_exit_status = -1;
	pi->instance_id = atomic_fetch_add(&g_instance_counter, 1u);
	snprintf(pi->log_comp, sizeof(pi->log_comp), "plugin %s", lp->name);
	pi->data_prefix = strdup(host->data_prefix ? host->data_prefix : "");
	pi->node_id = strdup(node_id ? node_id : "");
	if (!pi->data_prefix || !pi->node_id) {
		r = -ENOMEM;
		goto fail;
	}
	pi->prefix_len = strlen(pi->data_prefix);
	if ((r = pi_watch_init(pi, cfg)) < 0)
		goto fail;
	pi->cfg.read_grants = NULL; /* copied: never kept */
	pi->cfg.n_read_grants = 0;
	pi->host.data_prefix = pi->data_prefix;
	if (pi->prefix_len == 0 || (cfg && cfg->isolation > PLUGIN_ISOLATION_PROCESS)) {
		r = -EINVAL; /* an empty prefix would give the plugin all of etcd */
		goto fail;
	}
	pi->process = cfg && cfg->isolation == PLUGIN_ISOLATION_PROCESS;
	if ((r = loop_timer_new(l, pi_on_defer, pi, &pi->defer)) < 0 ||
	    (r = loop_timer_new(l, pi_on_cb_timer, pi, &pi->cb_timer)) < 0 ||
	    (r = loop_timer_new(l, pi_on_restart, pi, &pi->restart_timer)) < 0 ||
	    (r = loop_timer_new(l, pi_on_attach_timer, pi, &pi->attach_timer)) < 0)
		goto fail;
	pi->lp = lp; /* needed below; given back on failure */
	if ((r = pi_keys_init(pi)) < 0)
		goto fail;

	if ((r = pi->process ? pi_process_start_up(pi, cfg) : pi_thread_start_up(pi)) < 0)
		goto fail;
	*ret_pi = pi;
	return 0;

fail:
	pi->lp = NULL; /* stays the caller's */
	plugin_instance_free(pi);
	return r;
}

void plugin_instance_stop(struct plugin_instance *pi, plugin_instance_stopped_fn stopped,
			  void *userdata)
{
	if (pi->stop_requested)
		return;
	plugin_instance_deposed(pi);
	pi->stop_requested = true;
	pi_shadow_cancel(pi); /* its answer must not wait for a freed instance */
	pi->init_held = false; /* a held INIT goes (then fini): the queue must drain */
	pi->stopped = stopped;
	pi->stopped_ud = userdata;
	pi_state_set(pi, PLUGIN_INSTANCE_STOPPING);
	loop_timer_disarm(pi->restart_timer);
	bool alive = pi->process ? pi->bus_up : (pi->thread_running && !pi->broken);
	if (!alive) {
		pi_finish_stop(pi);
		return;
	}
	if (pi->overrun) {
		pi_stop_abandoning(pi);
		return;
	}
	struct event *ev = pi_event_new(EV_FINI);
	if (!ev) {
		pi_mark_broken(pi, "out of memory");
		pi_finish_stop(pi);
		return;
	}
	pi_enqueue(pi, ev);
	pi_pump(pi);
}

/* ---- synchronous shutdown for free() without a completed stop(): blocks ---- */

static int pi_sync_send(struct plugin_instance *pi, nng_msg *msg)
{
	if (!msg)
		return -ENOMEM;
	int rv = nng_sendmsg(pi->hsock, msg, 0);
	if (rv != 0) {
		nng_msg_free(msg);
		return pi_nng_to_errno(rv);
	}
	return 0;
}

static void pi_sync_refuse_txn(struct plugin_instance *pi, uint64_t id)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = id;
	rep.err = -ECANCELED;
	rep.message = bus_bin_str("the plugin instance is being freed");
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	pi_sync_send(pi, bus_pack_msg(&tw.base));
}

/* wait for the acks of every event handed to the worker, refusing txns
 * and range reads meanwhile (a callback waiting for either would hold its
 * ack until the wait's timeout: nothing answers them through the loop now) */
static int pi_sync_wait_sent(struct plugin_instance *pi)
{
	while (pi->sent_head) {
		nng_msg *m;
		int rv = nng_recvmsg(pi->hsock, &m, 0);
		if (rv != 0) {
			log_error(pi->log_comp, "worker did not answer within %d ms: %s",
				  pi_sync_wait_ms(SYNC_STOP_TIMEOUT_MS), nng_strerror(rv));
			return pi_nng_to_errno(rv);
		}
		ToHost *th = leasehold__bus__to_host__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		if (!th)
			continue;
		struct event *ev;
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE &&
		    (ev = pi_sent_take_seq(pi, th->done->seq))) {
			pi_event_free(ev);
		} else if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN && th->txn) {
			pi_sync_refuse_txn(pi, th->txn->id);
		} else if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_RANGE && th->range) {
			pi_sync_refuse_txn(pi, th->range->id); /* its reply is a TxnReply too */
		}
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
	return 0;
}

/* hand one event to the worker (behind what it already has) */
static int pi_sync_hand_over(struct plugin_instance *pi, enum ev_kind kind)
{
	struct event *ev = pi_event_new(kind);
	if (!ev)
		return -ENOMEM;
	ev->seq = ++pi->next_seq;
	int r = pi_sync_send(pi, pi_events_msg(pi, &ev, 1));
	if (r < 0) {
		pi_event_free(ev);
		return r;
	}
	pi->stats.messages++;
	pi_sent_push(pi, ev);
	return 0;
}

static int pi_sync_run(struct plugin_instance *pi, enum ev_kind kind)
{
	int r = pi_sync_hand_over(pi, kind);
	return r < 0 ? r : pi_sync_wait_sent(pi);
}

static void pi_stop_sync(struct plugin_instance *pi)
{
	nng_socket_set_ms(pi->hsock, NNG_OPT_RECVTIMEO, pi_sync_wait_ms(SYNC_STOP_TIMEOUT_MS));
	nng_socket_set_ms(pi->hsock, NNG_OPT_SENDTIMEO, pi_sync_wait_ms(SYNC_STOP_TIMEOUT_MS));
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		pi_sync_send(pi, o->msg);
		free(o);
	}
	pi->out_tail = NULL;
	bool fini_out = false, deposed_owed = pi->leading && pi->term_elected_sent;
	for (const struct event *ev = pi->sent_head; ev; ev = ev->next)
		fini_out |= ev->kind == EV_FINI;
	for (const struct event *ev = pi->q_head; ev; ev = ev->next)
		deposed_owed |= ev->kind == EV_DEPOSED; /* deposed() queued it: still owed */
	/* on_deposed first, behind what the worker has: the worker skips what of
	 * the term it has not started yet. It goes before the txn refusals below,
	 * so a callback waiting for a txn has it in its stash when it returns.
	 * Keys that run concurrently are waited for first: on_deposed never
	 * runs beside them. */
	bool keys_first = pi->n_sent_keys > 0 && pi_keys_concurrent(pi);
	int r = !fini_out && deposed_owed && !keys_first ? pi_sync_hand_over(pi, EV_DEPOSED) : 0;
	pi->leading = false;
	pi_watch_stop(pi);
	pi->term_elected_sent = false;
	/* txns in flight in etcd will never be answered through the loop now */
	for (struct pending_txn *pt = pi->txns; pt; pt = pt->next) {
		pt->pi = NULL;
		pi_sync_refuse_txn(pi, pt->id);
	}
	pi->txns = NULL;
	if (r < 0 || pi_sync_wait_sent(pi) < 0 || fini_out)
		return;
	if (keys_first && deposed_owed && pi_sync_run(pi, EV_DEPOSED) < 0)
		return;
	pi_sync_run(pi, EV_FINI);
}

/* pi_free_thread - thread mode: stop the worker and join its thread;
 * true when a thread stuck in a callback had to be left behind */
static bool pi_free_thread(struct plugin_instance *pi)
{
	bool abandoned = false;
	/* an overrunning callback would only make this wait its full
	 * timeout for acks that cannot come */
	if (!pi->broken && pi->hsock_open && !pi->overrun)
		pi_stop_sync(pi);
	/* wake a worker still blocked on its socket (only after a failure) */
	if (pi->wsock_open) {
		pi_close_socket(pi, pi->wsock);
		pi->wsock_open = false;
	}
	/* a thread stuck in a plugin callback cannot be stopped: leave it
	 * behind rather than hang (a shutdown would never end). Its
	 * worker state and the plugin's code stay until the process exits. */
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC,
		      &until); /* a wall-clock step must not cut it short */
	int ms = pi->overrun ? 0 : pi_sync_wait_ms(SYNC_KILL_WAIT_MS);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (pthread_clockjoin_np(pi->thread, NULL, CLOCK_MONOTONIC, &until) != 0) {
		log_error(pi->log_comp,
			  "the plugin thread is stuck in a callback; leaving it "
			  "behind (its code stays loaded until the process exits)");
		pthread_detach(pi->thread);
		abandoned = true;
	}
	pi->thread_running = false;
	return abandoned;
}

/* pi_free_children - process mode: a live, connected child gets deposed
 * and fini synchronously; every child is ended (bounded) and reaped */
static void pi_free_children(struct plugin_instance *pi)
{
	struct pollfd pfd = {.fd = pi->cur ? pi->cur->pidfd : -1, .events = POLLIN};
	if (pi->bus_up && pi->hsock_open && pi->cur && poll(&pfd, 1, 0) == 0)
		pi_stop_sync(pi);
	pi_gen_close(pi);
	while (pi->children) {
		struct child *c = pi->children;
		pi->children = c->next;
		pfd.fd = c->pidfd;
		if (c->pidfd < 0 || poll(&pfd, 1, pi_sync_wait_ms(SYNC_KILL_WAIT_MS)) != 1)
			pi_child_kill(c);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
		pi_child_free(c);
	}
	pi->rio = pi->sio = NULL;
}

/* pi_free_lists - drop what the instance still holds: txns in flight
 * (orphaned), the shadow run, events, queued messages, completions,
 * drain waiters. Nothing is completed here. */
static void pi_free_lists(struct plugin_instance *pi)
{
	pi_txns_orphan(pi);
	pi_shadow_free(pi); /* its done is not called: no completion is, here */
	while (pi->q_head) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		pi_event_free(ev);
	}
	for (struct event *ev = pi_sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		pi_event_free(ev);
	}
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		nng_msg_free(o->msg);
		free(o);
	}
	while (pi->c_head) {
		struct completion *c = pi->c_head;
		pi->c_head = c->next;
		pi_completion_free(c);
	}
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		free(d);
	}
}

void plugin_instance_free(struct plugin_instance *pi)
{
	if (!pi)
		return;
	bool abandoned = false;
	if (pi->dispatching) {
		pi->free_requested = true; /* on_defer frees it when its loop ends */
		return;
	}
	if (pi->thread_running)
		abandoned = pi_free_thread(pi);
	if (pi->process)
		pi_free_children(pi);
	loop_io_free(pi->rio);
	loop_io_free(pi->sio);
	if (pi->hsock_open)
		pi_close_socket(pi, pi->hsock);
	if (pi->wsock_open)
		pi_close_socket(pi, pi->wsock);
	pi_free_lists(pi);
	pi_keys_free(pi);
	loop_timer_free(pi->defer);
	loop_timer_free(pi->cb_timer);
	loop_timer_free(pi->restart_timer);
	loop_timer_free(pi->attach_timer);
	if (!abandoned) {
		worker_free(pi->w);
		loader_close(pi->lp);
	} else {
		struct left_behind *lb = malloc(sizeof(*lb));
		if (lb) {
			*lb = (struct left_behind){.next = g_left_behind, .w = pi->w, .lp = pi->lp};
			g_left_behind = lb;
		}
	}
	if (pi->activity_page)
		munmap(pi->activity_page, sizeof(*pi->activity_page));
	if (pi->activity_fd >= 0)
		close(pi->activity_fd);
	free(pi->worker_path);
	free(pi->runtime_dir);
	free(pi->worker_stderr);
	pi_watch_free(pi);
	free(pi->data_prefix);
	free(pi->node_id);
	plugin_config_clear(&pi->config);
	free(pi);
}

enum plugin_instance_state plugin_instance_state(const struct plugin_instance *pi)
{
	return pi->state;
}

const struct loader_plugin *plugin_instance_plugin(const struct plugin_instance *pi)
{
	return pi->lp;
}

void plugin_instance_get_stats(const struct plugin_instance *pi, struct plugin_instance_stats *ret)
{
	*ret = pi->stats;
}

const struct metrics_hist *plugin_instance_bus_rtt(const struct plugin_instance *pi)
{
	return &pi->bus_rtt;
}

uint64_t plugin_instance_pending(const struct plugin_instance *pi)
{
	return pi->stats.queued + pi->stats.in_flight;
}

const char *plugin_instance_bus_url(const struct plugin_instance *pi)
{
	return pi->url;
}

pid_t plugin_instance_worker_pid(const struct plugin_instance *pi)
{
	return pi->cur ? pi->cur->pid : 0;
}
