/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_recv.c - receiving from the worker (hostile input: a
 * worker process may be anything): acks settle the head of the sent list
 * (or, for keys that run concurrently, the key they name),
 * txn requests go to runtime_instance_txn.c, log lines and protocol errors
 * are logged. Reading guide: runtime_instance.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

/* pi_recv_note_config - an on_config_changed's outcome: a refusal is kept
 * (with the revision it refused) until one succeeds, for every view of the
 * plugin (plugin_instance_config_refusal) */
static void pi_recv_note_config(struct plugin_instance *pi, const struct event *ev, int err,
				const char *msg)
{
	if (err == 0) {
		pi->config_refusal[0] = 0;
		pi->config_refused_rev = 0;
		return;
	}
	pi->config_refused_rev = ev->config_rev;
	pi_fmt(pi->config_refusal, sizeof(pi->config_refusal), "%s", msg);
}

const char *plugin_instance_config_refusal(const struct plugin_instance *pi, int64_t *ret_rev)
{
	if (!pi->config_refusal[0])
		return NULL;
	*ret_rev = pi->config_refused_rev;
	return pi->config_refusal;
}

/* pi_recv_answer - the callback's result as the host takes it: a proper
 * -errno (else -EIO) and its message in msg; a worker of another bus
 * version is -EPROTO (*ret_other_release) */
static int pi_recv_answer(const struct event *ev, const EventDone *d, char *msg, size_t len,
			  bool *ret_other_release)
{
	int err = (d->err <= 0 && d->err > -4096) ? d->err : -EIO;
	snprintf(msg, len, "%.*s", (int)(d->message.len > len - 1 ? len - 1 : d->message.len),
		 d->message.data ? (const char *)d->message.data : "");
	*ret_other_release = ev->kind == EV_INIT && err == 0 && d->bus_version != LH_BUS_VERSION;
	if (*ret_other_release) {
		/* a worker of another release: it would misread what follows */
		err = -EPROTO;
		snprintf(msg, len,
			 "the plugin worker speaks bus version %u, this host %u (leasehold-worker "
			 "and leasehold must come from the same release)",
			 d->bus_version, LH_BUS_VERSION);
	}
	return err;
}

/* pi_recv_count - an answered event in the stats: dropped when skipped,
 * else delivered, with the bus's share of its round trip */
static void pi_recv_count(struct plugin_instance *pi, const struct event *ev, const EventDone *d,
			  bool skipped)
{
	if (skipped) {
		pi->stats.dropped++;
		if (ev->kind == EV_RECONCILE)
			pi->stats.reconciles_cancelled++;
		return;
	}
	pi->stats.delivered++;
	/* an event sent behind others started when its predecessor ended, not
	 * when it was sent: no round trip to measure */
	uint64_t now = loop_now();
	if (!ev->behind && ev->sent_ns && now >= ev->sent_ns) {
		uint64_t rt = now - ev->sent_ns;
		rt = rt > d->callback_ns ? rt - d->callback_ns : 0;
		metrics_hist_observe(&pi->bus_rtt, (double)rt / 1e9);
	}
}

/* pi_recv_restarted_init - INIT of a restarted worker (process mode)
 * answered: it is back, or the generation is lost (for good when the
 * worker program is of another release). Frees ev. */
static void pi_recv_restarted_init(struct plugin_instance *pi, struct event *ev, int err,
				   const char *msg, bool other_release)
{
	if (err == 0) {
		pi->up_since = loop_now();
		pi_recv_note_config(pi, ev, 0, NULL);
		pi_worker_recovered(pi);
		pi_event_free(ev);
		pi_pump(pi);
		return;
	}
	char reason[640];
	pi_fmt(reason, sizeof(reason), "init failed after a restart: %s%s%s", strerror(-err),
	       msg[0] ? ": " : "", msg);
	pi_event_free(ev);
	if (!other_release) {
		pi_gen_lost(pi, reason);
		return;
	}
	/* the worker program was replaced (a package upgrade under a running
	 * host): every restart would start the same one. Final: no more
	 * restarts, and the owner hears the new reason. */
	pi_state_set(pi, PLUGIN_INSTANCE_FAILED);
	pi_gen_lost(pi, reason);
	if (pi->cfg.on_failed && !pi->stop_requested)
		pi_completion_push(pi, COMP_FAILED, (void (*)(void))pi->cfg.on_failed,
				   pi->cfg.userdata, -EIO, reason);
}

static void pi_recv_settle(struct plugin_instance *pi, struct event *ev, const EventDone *d,
			   int err, char *msg, size_t len, bool skipped);

static void pi_recv_handle_done(struct plugin_instance *pi, struct event *ev, const EventDone *d)
{
	char msg[512];
	bool other_release;
	int err = pi_recv_answer(ev, d, msg, sizeof(msg), &other_release);
	/* the worker skipped a term event a later on_deposed made moot: as if it
	 * had been dropped here (only these kinds can be skipped) */
	bool skipped = d->skipped && (ev->kind == EV_ELECTED || ev->kind == EV_RELEASES ||
				      ev->kind == EV_RECONCILE || ev->kind == EV_DEPOSED ||
				      ev->kind == EV_WATCH || ev->kind == EV_KEY);
	if (ev->kind == EV_INIT && err == 0 && !other_release)
		err = pi_watch_setup(pi, d, msg, sizeof(msg));
	pi_recv_count(pi, ev, d, skipped);
	/* a refused validation is the operator's answer, not a plugin failure */
	if (err < 0 && !skipped && ev->kind != EV_VALIDATE)
		pi_note_error(pi, err, msg);
	if (pi->overrun && ev->seq == pi->overrun_seq) {
		/* thread mode: the callback that overran has returned */
		assert(!pi->process); /* a worker process that overruns is killed */
		pi->overrun = false;
		log_warn(pi->log_comp, "the overrunning callback returned after %llu ms",
			 (unsigned long long)((loop_now() - ev->sent_ns) / LOOP_NS_PER_MS));
		if (ev->kind != EV_INIT || pi->init_reported)
			pi_worker_recovered(pi);
	}
	if (ev->kind == EV_INIT && pi->init_reported) {
		pi_recv_restarted_init(pi, ev, err, msg, other_release);
		return;
	}
	pi_recv_settle(pi, ev, d, err, msg, sizeof(msg), skipped);
}

/* pi_recv_settle - what an answered event means, by kind: its completion,
 * the instance's state, the log; then ev is freed and the queue pumped */
static void pi_recv_settle(struct plugin_instance *pi, struct event *ev, const EventDone *d,
			   int err, char *msg, size_t len, bool skipped)
{
	switch (ev->kind) {
	case EV_INIT:
		if (err == 0) /* init started from the configuration it was given */
			pi_recv_note_config(pi, ev, 0, NULL);
		pi->init_reported = true;
		pi->up_since = loop_now();
		if (err < 0) {
			pi_fmt(pi->init_error, sizeof(pi->init_error), "init failed: %s%s%s",
			       strerror(-err), msg[0] ? ": " : "", msg);
			log_error(pi->log_comp, "%s", pi->init_error);
			if (pi->state == PLUGIN_INSTANCE_STARTING)
				pi_state_set(pi, PLUGIN_INSTANCE_FAILED);
			pi->leading = false;
			pi_drop_queued(pi, -EIO, pi->init_error);
		} else if (pi->state == PLUGIN_INSTANCE_STARTING) {
			pi_state_set(pi, PLUGIN_INSTANCE_READY);
		}
		if (pi->cfg.on_init)
			pi_completion_push(pi, COMP_INIT, (void (*)(void))pi->cfg.on_init,
					   pi->cfg.userdata, err, err < 0 ? pi->init_error : "");
		break;
	case EV_RECONCILE:
		if (skipped) {
			err = -ECANCELED;
			snprintf(msg, len, "dropped: leadership was lost before it ran");
		} else if (ev->shadow) {
			/* a preview: no reconcile of the plugin's record */
		} else if (err < 0)
			pi->stats.reconciles_failed++;
		else
			pi->stats.reconciles_ok++;
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err,
				   msg);
		break;
	case EV_WATCH:
		if (err < 0 && !skipped)
			log_warn(pi->log_comp, "on_watch_events failed: %s%s%s (the batch is not "
					       "delivered again)",
				 strerror(-err), msg[0] ? ": " : "", msg);
		pi_keys_on_done(pi, ev, d, err, skipped);
		break;
	case EV_KEY:
		if (err < 0 && !skipped)
			log_debug(pi->log_comp, "reconcile_key of \"%.*s\" failed: %s%s%s (retried)",
				  (int)(ev->doc_len > 200 ? 200 : ev->doc_len), ev->doc,
				  strerror(-err), msg[0] ? ": " : "", msg);
		pi_keys_on_done(pi, ev, d, err, skipped);
		break;
	case EV_ELECTED:
	case EV_RELEASES:
	case EV_DEPOSED:
		if (err < 0 && !skipped)
			log_warn(pi->log_comp, "%s failed: %s%s%s",
				 ev->kind == EV_ELECTED	   ? "on_elected"
				 : ev->kind == EV_RELEASES ? "on_releases_changed"
							   : "on_deposed",
				 strerror(-err), msg[0] ? ": " : "", msg);
		break;
	case EV_CONFIG:
		if (err < 0)
			log_warn(pi->log_comp, "on_config_changed failed: %s%s%s", strerror(-err),
				 msg[0] ? ": " : "", msg);
		pi_recv_note_config(pi, ev, err, msg);
		break;
	case EV_VALIDATE:
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err,
				   msg);
		break;
	case EV_FINI:
		pi_event_free(ev);
		pi_finish_stop(pi);
		pi_pump(pi);
		return;
	}
	pi_event_free(ev);
	pi_pump(pi);
}

static int pi_recv_handle_bytes(struct plugin_instance *pi, const void *buf, size_t len)
{
	ToHost *th = leasehold__bus__to_host__unpack(NULL, len, buf);
	int r = 0;
	if (!th) {
		pi->stats.bad_messages++;
		log_debug(pi->log_comp, "undecodable bus message (%zu bytes) dropped", len);
		return -EBADMSG;
	}
	if ((th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE && !th->done) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN && !th->txn) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_LOG && !th->log) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR && !th->protocol_error) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_RANGE && !th->range)) {
		pi->stats.bad_messages++;
		leasehold__bus__to_host__free_unpacked(th, NULL);
		return -EBADMSG;
	}
	switch (th->msg_case) {
	case LEASEHOLD__BUS__TO_HOST__MSG_DONE: {
		/* in order, or a concurrent key's in any order */
		struct event *ev = pi_sent_take_seq(pi, th->done->seq);
		if (!ev) {
			pi->stats.bad_messages++;
			log_debug(pi->log_comp, "ack for seq %llu, expected %llu: dropped",
				  (unsigned long long)th->done->seq,
				  (unsigned long long)(pi->sent_head ? pi->sent_head->seq : 0));
			r = -EPROTO;
			break;
		}
		pi_recv_handle_done(pi, ev, th->done);
		break;
	}
	case LEASEHOLD__BUS__TO_HOST__MSG_TXN:
		pi_handle_txn(pi, th->txn);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_RANGE:
		pi_handle_range(pi, th->range);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_REQUEST_RECONCILE:
		pi_handle_request_reconcile(pi);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_LOG: {
		uint32_t lvl = th->log->level > LH_LOG_DEBUG ? LH_LOG_DEBUG : th->log->level;
		size_t n = th->log->message.len > 1024 ? 1024 : th->log->message.len;
		pi->stats.log_messages++;
		log_msg((enum log_level)lvl, pi->log_comp, "%.*s", (int)n,
			th->log->message.data ? (const char *)th->log->message.data : "");
		break;
	}
	case LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR: {
		size_t n =
		    th->protocol_error->message.len > 256 ? 256 : th->protocol_error->message.len;
		pi->stats.worker_rejected++;
		log_warn(pi->log_comp, "worker rejected a bus message: %.*s", (int)n,
			 th->protocol_error->message.data
			     ? (const char *)th->protocol_error->message.data
			     : "");
		break;
	}
	default:
		pi->stats.bad_messages++;
		r = -EPROTO;
		break;
	}
	leasehold__bus__to_host__free_unpacked(th, NULL);
	return r;
}

void pi_on_readable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)io;
	(void)fd;
	(void)events;
	for (int i = 0; i < 256; i++) { /* bounded: let other watchers run */
		nng_msg *msg;
		if (!pi->hsock_open)
			return; /* the generation ended while handling a message */
		int rv = nng_recvmsg(pi->hsock, &msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN)
			return;
		if (rv != 0) {
			pi_mark_broken(pi, nng_strerror(rv));
			if (pi->rio) {
				loop_io_free(pi->rio);
				pi->rio = NULL;
			}
			return;
		}
		pi_recv_handle_bytes(pi, nng_msg_body(msg), nng_msg_len(msg));
		nng_msg_free(msg);
	}
}

int plugin_instance_inject_from_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	return pi_recv_handle_bytes(pi, buf, len);
}
