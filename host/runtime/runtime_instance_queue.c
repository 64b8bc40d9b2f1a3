/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_queue.c - the event queue between the election (driver
 * ops) and the plugin's worker: what may go to the worker and when
 * (pi_queue_may_send, pump), the sent list (acknowledged in order, but
 * concurrent keys in any order), the bus form of
 * events, sending, completions, drains. Reading guide: runtime_instance.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

/* ---- completions (always from a timer) ---- */

void pi_completion_push(struct plugin_instance *pi, enum comp_kind kind, void (*fn)(void), void *ud,
			int err, const char *msg)
{
	struct completion *c = calloc(1, sizeof(*c));
	if (!c) {
		log_error(pi->log_comp, "out of memory: a completion is lost");
		return;
	}
	c->kind = kind;
	c->fn = fn;
	c->ud = ud;
	c->err = err;
	c->msg = strdup(msg ? msg : "");
	if (pi->c_tail)
		pi->c_tail->next = c;
	else
		pi->c_head = c;
	pi->c_tail = c;
	loop_timer_arm_in(pi->defer, 0);
}

void pi_completion_free(struct completion *c)
{
	free(c->msg);
	free(c);
}

static void pi_queue_flush(struct plugin_instance *pi);

void pi_on_defer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)t;
	if (pi->out_head && !pi->broken && pi->bus_up)
		pi_queue_flush(pi); /* what pi_queue_send_nng left corked */
	if (pi->need_break) {
		pi->need_break = false;
		pi_mark_broken(pi, pi->break_why);
	}
	pi_pump(pi); /* what plugin_instance_elected left queued */
	struct completion *list = pi->c_head;
	pi->c_head = pi->c_tail = NULL;
	pi->dispatching = true;
	while (list) {
		struct completion *c = list;
		list = c->next;
		if (!pi->free_requested) {
			switch (c->kind) {
			case COMP_RECONCILE:
				((driver_reconcile_done_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_DRAIN:
				((driver_drain_done_fn)c->fn)(c->ud);
				break;
			case COMP_INIT:
				((plugin_instance_init_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_STOPPED:
				((plugin_instance_stopped_fn)c->fn)(c->ud);
				break;
			case COMP_FAILED:
				((plugin_instance_failed_fn)c->fn)(c->ud, c->msg);
				break;
			case COMP_RECOVERED:
				((plugin_instance_recovered_fn)c->fn)(c->ud);
				break;
			}
		}
		pi_completion_free(c);
	}
	pi->dispatching = false;
	/* a completion freed the instance: the rest were dropped, free it now */
	if (pi->free_requested)
		plugin_instance_free(pi);
}

void pi_maybe_drained(struct plugin_instance *pi)
{
	/* an overrunning callback (thread mode) is abandoned, not waited for */
	if (!pi->drains || (!pi->overrun && (pi->q_head || pi->sent_head)))
		return;
	/* oldest first */
	struct drain_waiter *rev = NULL;
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		d->next = rev;
		rev = d;
	}
	while (rev) {
		struct drain_waiter *d = rev;
		rev = d->next;
		pi_completion_push(pi, COMP_DRAIN, (void (*)(void))d->fn, d->ud, 0, NULL);
		free(d);
	}
}

/* ---- sending ---- */

static void pi_queue_on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata);

static void pi_queue_flush(struct plugin_instance *pi)
{
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		int rv = nng_sendmsg(pi->hsock, o->msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN) {
			if (!pi->sio && loop_io_add(pi->loop, pi->sfd, EPOLLIN, pi_queue_on_sendable, pi,
						    &pi->sio) < 0) {
				snprintf(pi->break_why, sizeof(pi->break_why),
					 "cannot watch the send fd");
				pi->need_break = true;
				loop_timer_arm_in(pi->defer, 0);
			}
			return;
		}
		pi->out_head = o->next;
		if (!pi->out_head)
			pi->out_tail = NULL;
		if (rv != 0) {
			nng_msg_free(o->msg);
			free(o);
			/* not from here (we may be deep inside pi_pump): from the timer */
			snprintf(pi->break_why, sizeof(pi->break_why), "send: %s",
				 nng_strerror(rv));
			pi->need_break = true;
			loop_timer_arm_in(pi->defer, 0);
			return;
		}
		free(o);
	}
	if (pi->sio) {
		loop_io_free(pi->sio);
		pi->sio = NULL;
	}
}

static void pi_queue_on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	(void)io;
	(void)fd;
	(void)events;
	pi_queue_flush(userdata);
}

/* queue msg (taken, also on failure) and flush */
static int pi_queue_send_nng(struct plugin_instance *pi, nng_msg *msg)
{
	if (pi->broken || !pi->bus_up) {
		if (msg)
			nng_msg_free(msg);
		return -EPIPE;
	}
	struct outmsg *o = calloc(1, sizeof(*o));
	if (!msg || !o) {
		if (msg)
			nng_msg_free(msg);
		free(o);
		return -ENOMEM;
	}
	o->msg = msg;
	if (pi->out_tail)
		pi->out_tail->next = o;
	else
		pi->out_head = o;
	pi->out_tail = o;
	if (!pi->cork)
		pi_queue_flush(pi);
	return 0;
}

int pi_send_to_worker(struct plugin_instance *pi, const ProtobufCMessage *m)
{
	return pi_queue_send_nng(pi, bus_pack_msg(m));
}

/* ---- the event queue ---- */

void pi_event_complete_cancelled(struct plugin_instance *pi, struct event *ev, int err,
				 const char *msg)
{
	if (ev->kind == EV_RECONCILE && ev->done) {
		pi->stats.reconciles_cancelled++;
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err,
				   msg);
	} else if (ev->kind == EV_VALIDATE && ev->done) {
		/* same signature as a reconcile's done */
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err,
				   msg);
	} else if ((ev->kind == EV_WATCH || ev->kind == EV_KEY) && ev->shadow) {
		pi_shadow_on_event(pi, ev, NULL, err, msg);
	} else if (ev->kind == EV_KEY || ev->kind == EV_WATCH) {
		pi_keys_on_cancelled(pi, ev);
	}
}

/* append ev to the list head..tail (the host queue or the sent list) */
static void pi_queue_event_append(struct event **head, struct event **tail, struct event *ev)
{
	ev->next = NULL;
	if (*tail)
		(*tail)->next = ev;
	else
		*head = ev;
	*tail = ev;
}

void pi_enqueue(struct plugin_instance *pi, struct event *ev)
{
	pi_queue_event_append(&pi->q_head, &pi->q_tail, ev);
	pi->stats.queued++;
}

struct event *pi_event_new(enum ev_kind kind)
{
	struct event *ev = calloc(1, sizeof(*ev));
	if (ev)
		ev->kind = kind;
	return ev;
}

static void pi_queue_fill_bus_releases(const struct releases *r, Leasehold__Bus__Releases *br,
			      Leasehold__Bus__Release *mn, Leasehold__Bus__Release *mx)
{
	leasehold__bus__releases__init(br);
	leasehold__bus__release__init(mn);
	leasehold__bus__release__init(mx);
	mn->major = r->min.major;
	mn->minor = r->min.minor;
	mn->patch = r->min.patch;
	mx->major = r->max.major;
	mx->minor = r->max.minor;
	mx->patch = r->max.patch;
	br->min = mn;
	br->max = mx;
	br->revision = r->revision;
	br->n_members = (uint32_t)(r->n_members > UINT32_MAX ? UINT32_MAX : r->n_members);
}

/* the storage of one event's bus form */
struct bus_event {
	Event e;
	Leasehold__Bus__Init init;
	Leasehold__Bus__Elected el;
	Leasehold__Bus__ReleasesChanged rc;
	Leasehold__Bus__Releases br;
	Leasehold__Bus__Release mn, mx;
	Leasehold__Bus__Reconcile rec;
	Leasehold__Bus__Deposed dep;
	Leasehold__Bus__Fini fini;
	Leasehold__Bus__Config cfg;
	Leasehold__Bus__ConfigChanged cc;
	Leasehold__Bus__ValidateConfig vc;
	Leasehold__Bus__ReconcileKey rk;
};

/* the bus form of c in *bc (pointers into c) */
static void pi_queue_fill_bus_config(const struct plugin_config *c, Leasehold__Bus__Config *bc)
{
	leasehold__bus__config__init(bc);
	bc->has_cluster = c->cluster != NULL;
	bc->cluster = bus_bin(c->cluster, c->cluster ? c->cluster_len : 0);
	bc->cluster_revision = c->cluster_rev;
	bc->cluster_invalid = c->cluster_invalid;
	bc->has_local = c->local != NULL;
	bc->local = bus_bin(c->local, c->local ? c->local_len : 0);
}

/* ev's bus form in be (pointers into be and pi) */
static void pi_queue_event_fill(const struct plugin_instance *pi, const struct event *ev,
		       struct bus_event *be)
{
	leasehold__bus__event__init(&be->e);
	leasehold__bus__init__init(&be->init);
	leasehold__bus__elected__init(&be->el);
	leasehold__bus__releases_changed__init(&be->rc);
	leasehold__bus__reconcile__init(&be->rec);
	leasehold__bus__deposed__init(&be->dep);
	leasehold__bus__fini__init(&be->fini);
	leasehold__bus__config_changed__init(&be->cc);
	leasehold__bus__validate_config__init(&be->vc);
	leasehold__bus__reconcile_key__init(&be->rk);
	pi_queue_fill_bus_config(&pi->config, &be->cfg);
	be->e.seq = ev->seq;
	be->e.behind = ev->behind;
	be->e.shadow = ev->shadow;
	switch (ev->kind) {
	case EV_INIT:
		be->init.node_id = bus_bin_str(pi->node_id);
		be->init.data_prefix = bus_bin_str(pi->data_prefix);
		be->init.bus_version = LH_BUS_VERSION;
		be->init.read_grants = pi->grants;
		be->init.n_read_grants = pi->n_grants;
		be->init.no_watches = pi->host.etcd == NULL;
		be->init.config = &be->cfg;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_INIT;
		be->e.init = &be->init;
		break;
	case EV_ELECTED:
		be->el.fencing_token = ev->token;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_ELECTED;
		be->e.elected = &be->el;
		break;
	case EV_RELEASES:
		pi_queue_fill_bus_releases(&ev->rel, &be->br, &be->mn, &be->mx);
		be->rc.releases = &be->br;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED;
		be->e.releases_changed = &be->rc;
		break;
	case EV_RECONCILE:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RECONCILE;
		be->e.reconcile = &be->rec;
		break;
	case EV_DEPOSED:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_DEPOSED;
		be->e.deposed = &be->dep;
		break;
	case EV_FINI:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_FINI;
		be->e.fini = &be->fini;
		break;
	case EV_WATCH: /* sent alone, by plugin_watch_batch_msg */
	case EV_CONFIG:
		be->cc.config = &be->cfg;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_CONFIG_CHANGED;
		be->e.config_changed = &be->cc;
		break;
	case EV_VALIDATE:
		be->vc.document = bus_bin(ev->doc, ev->doc_len);
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_VALIDATE_CONFIG;
		be->e.validate_config = &be->vc;
		break;
	case EV_KEY:
		be->rk.key = bus_bin(ev->doc, ev->doc_len);
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY;
		be->e.reconcile_key = &be->rk;
		break;
	}
}

/* the bus message for evs[0..n) (caller owns it): one event alone, several
 * as one batch; NULL on ENOMEM */
nng_msg *pi_events_msg(const struct plugin_instance *pi, struct event *const *evs, size_t n)
{
	struct bus_event be[PIPELINE_MAX];
	Event *ptrs[PIPELINE_MAX];
	if (n == 0 || n > PIPELINE_MAX)
		return NULL;
	if (evs[0]->kind == EV_WATCH) /* pi_queue_may_send: a watch batch goes alone */
		return n == 1 ? plugin_watch_batch_msg(evs[0]->batch, evs[0]->seq) : NULL;
	for (size_t i = 0; i < n; i++) {
		pi_queue_event_fill(pi, evs[i], &be[i]);
		ptrs[i] = &be[i].e;
	}
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	Leasehold__Bus__Events batch = LEASEHOLD__BUS__EVENTS__INIT;
	if (n == 1) {
		tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
		tw.event = ptrs[0];
	} else {
		batch.n_events = n;
		batch.events = ptrs;
		tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_BATCH;
		tw.batch = &batch;
	}
	return bus_pack_msg(&tw.base);
}

/* the callback timeout runs for the head of the sent list: the callback the
 * worker is in (or enters next). Keys that run concurrently started when
 * they were handed over, each with its own limit: the head is the oldest of
 * them, so its deadline is the earliest. */
static void pi_queue_head_started(struct plugin_instance *pi)
{
	if (!pi->sent_head) {
		pi->stats.callback_since_ns = 0;
		if (!pi->stop_after_reap)
			loop_timer_disarm(pi->cb_timer);
		return;
	}
	struct event *h = pi->sent_head;
	uint64_t now = loop_now();
	if (!(h->kind == EV_KEY && pi_keys_concurrent(pi) && h->sent_ns))
		h->sent_ns = now;
	pi->stats.callback_since_ns = h->sent_ns;
	uint32_t limit = plugin_instance_callback_timeout_ms(pi, h->kind);
	if (pi->stop_after_reap)
		return;
	if (limit)
		loop_timer_arm_at(pi->cb_timer, h->sent_ns + (uint64_t)limit * LOOP_NS_PER_MS);
	else
		loop_timer_disarm(pi->cb_timer);
}

void pi_sent_push(struct plugin_instance *pi, struct event *ev)
{
	pi_queue_event_append(&pi->sent_head, &pi->sent_tail, ev);
	pi->n_sent++;
	pi->n_sent_keys += ev->kind == EV_KEY;
	ev->config_rev = pi->config.cluster_rev; /* what an EV_CONFIG hands over */
	/* pi_queue_may_send keeps the pipeline short: a term's start (3) + on_deposed +
	 * fini at most, or the keys of a declared concurrency alone */
	assert(pi->n_sent <= PIPELINE_MAX ||
	       (pi->n_sent == pi->n_sent_keys && pi->n_sent <= pi->lp->desc.key_concurrency));
	pi->stats.in_flight = pi->n_sent;
}

/* unlink ev (in the sent list, after prev or at the head when prev is NULL) */
static void pi_sent_unlink_after(struct plugin_instance *pi, struct event *prev, struct event *ev)
{
	if (prev)
		prev->next = ev->next;
	else
		pi->sent_head = ev->next;
	if (pi->sent_tail == ev)
		pi->sent_tail = prev;
	ev->next = NULL;
	pi->n_sent--;
	pi->n_sent_keys -= ev->kind == EV_KEY;
	pi->stats.in_flight = pi->n_sent;
}

struct event *pi_sent_unlink_head(struct plugin_instance *pi)
{
	struct event *ev = pi->sent_head;
	if (ev)
		pi_sent_unlink_after(pi, NULL, ev);
	return ev;
}

/* the acknowledged head of the sent list (the worker answers in order) */
struct event *pi_sent_pop(struct plugin_instance *pi)
{
	struct event *ev = pi_sent_unlink_head(pi);
	if (ev)
		pi_queue_head_started(pi);
	return ev;
}

struct event *pi_sent_take_seq(struct plugin_instance *pi, uint64_t seq)
{
	if (pi->sent_head && pi->sent_head->seq == seq)
		return pi_sent_pop(pi);
	if (!pi_keys_concurrent(pi))
		return NULL;
	for (struct event *prev = pi->sent_head, *ev; prev && (ev = prev->next); prev = ev)
		if (ev->seq == seq && ev->kind == EV_KEY) {
			pi_sent_unlink_after(pi, prev, ev);
			return ev; /* not the head: the head's timer runs on */
		}
	return NULL;
}

/* the whole sent list, for settling it (the worker is gone or failed) */
struct event *pi_sent_take_all(struct plugin_instance *pi)
{
	struct event *list = pi->sent_head;
	pi->sent_head = pi->sent_tail = NULL;
	pi->n_sent = 0;
	pi->n_sent_keys = 0;
	pi->stats.in_flight = 0;
	pi->stats.callback_since_ns = 0;
	return list;
}

/* may ev go to the worker now? One event at a time, except:
 * - the start of a term goes in one go: on_elected, its replay right behind
 *   it, and the first reconcile right behind the replay, so that reconcile
 *   does not wait two bus round trips (at most 3 events);
 * - the end of a term or of the instance (on_deposed, fini) goes at once, so
 *   the worker knows that what it already has of the term is moot and skips
 *   it (worker.c worker_should_skip) instead of running it; but never
 *   beside keys that run concurrently: it waits for them to return;
 * - keys of a plugin with a key_concurrency above 1 go beside each other,
 *   up to that many, and beside nothing else.
 * Nothing else goes behind anything (a reconcile can be long, and what still
 * waits here can be merged or dropped exactly). */
static bool pi_queue_may_send(const struct plugin_instance *pi, const struct event *ev)
{
	if (ev->kind == EV_INIT && pi->init_held)
		return false; /* plugin_instance_set_config releases it */
	if (!pi->sent_head)
		return true;
	bool keys_run = pi->n_sent_keys > 0 && pi_keys_concurrent(pi);
	switch (ev->kind) {
	case EV_DEPOSED:
	case EV_FINI:
		return !keys_run && pi->n_sent < PIPELINE_MAX; /* 3 + on_deposed + fini: always */
	case EV_RELEASES:
		return pi->term_start == 1;
	case EV_RECONCILE:
		return pi->term_start == 2;
	case EV_KEY:
		/* beside keys of its own kind only: a txn goes by the oldest
		 * event in flight (pi_txn_may_write), so a preview's key never
		 * runs beside a term's. (Neither queues while the other can:
		 * previews only while not leading, a term's keys only while
		 * leading; this keeps it so if that ever changes.) */
		return keys_run && pi->n_sent == pi->n_sent_keys &&
		       pi->n_sent < pi->lp->desc.key_concurrency && ev->shadow == pi->sent_head->shadow;
	case EV_INIT:
	case EV_ELECTED:
	case EV_WATCH:
	case EV_CONFIG:
	case EV_VALIDATE:
		break;
	}
	return false;
}

/* pi_pump_feed - an idle turn goes to a watch batch or a queue key,
 * alternately: neither may starve the other */
static void pi_pump_feed(struct plugin_instance *pi)
{
	if (pi->keys_turn ? pi_keys_feed(pi) || pi_watch_feed(pi)
			  : pi_watch_feed(pi) || pi_keys_feed(pi))
		pi->keys_turn = pi->q_tail && pi->q_tail->kind == EV_WATCH;
}

/* pi_pump_choose - take what may go in one message from the queue into
 * evs (at most PIPELINE_MAX), each linked in as sent as it is chosen, so
 * that the next pi_queue_may_send sees it; their count */
static size_t pi_pump_choose(struct plugin_instance *pi, struct event **evs)
{
	size_t n = 0;
	while (n < PIPELINE_MAX && pi->q_head && pi_queue_may_send(pi, pi->q_head)) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		if (!pi->q_head)
			pi->q_tail = NULL;
		pi->stats.queued--;
		ev->next = NULL;
		ev->seq = pi->next_seq + n + 1;
		ev->behind = pi->sent_head != NULL;
		ev->sent_ns = loop_now(); /* a concurrent key starts now; others: when the head */
		if (ev->kind == EV_RECONCILE && ev->term == pi->term && !ev->shadow)
			pi->term_reconciled = true; /* watch batches may follow */
		pi->term_start = ev->kind == EV_ELECTED				  ? 1
				 : ev->kind == EV_RELEASES && pi->term_start == 1 ? 2
										  : 0;
		pi_sent_push(pi, ev);
		evs[n++] = ev;
	}
	return n;
}

/* pi_pump_unsend - the message of evs[0..n) could not be queued (err):
 * unlink them from the sent list again (it ended at saved_tail) and settle
 * them, in order */
static void pi_pump_unsend(struct plugin_instance *pi, struct event *saved_tail,
			   struct event **evs, size_t n, int err)
{
	if (saved_tail)
		saved_tail->next = NULL;
	else
		pi->sent_head = NULL;
	pi->sent_tail = saved_tail;
	for (size_t i = 0; i < n; i++) {
		pi->n_sent--;
		pi->n_sent_keys -= evs[i]->kind == EV_KEY;
	}
	pi->stats.in_flight = pi->n_sent;
	pi->term_start = 0;
	log_error(pi->log_comp, "cannot send %zu event(s) to the worker: %s", n, strerror(-err));
	bool elected = false;
	for (size_t i = 0; i < n; i++) {
		elected |= evs[i]->kind == EV_ELECTED;
		pi_event_complete_cancelled(pi, evs[i], err,
					    "cannot send the event to the plugin worker");
		pi->stats.dropped++;
		pi_event_free(evs[i]);
	}
	if (elected) /* the rest of the term must not go alone */
		pi_drop_queued(pi, err, "cannot send on_elected to the plugin worker");
}

/* pi_pump_drop_all - nothing can be delivered: complete everything queued */
static void pi_pump_drop_all(struct plugin_instance *pi)
{
	while (pi->q_head) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		pi->stats.queued--;
		pi->stats.dropped++;
		pi_event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
		pi_event_free(ev);
	}
	pi->q_tail = NULL;
}

/* Hand queued events to the worker, as far as pi_queue_may_send allows. Everything
 * that may go in one round goes in one message (a batch when more than one:
 * the start of a term is one bus hop, not three); if the message cannot be
 * queued its events are unlinked again and settled. */
void pi_pump(struct plugin_instance *pi)
{
	if (!pi->leading)
		pi_watch_stop(pi);
	pi_pump_feed(pi);
	while (pi->q_head && !pi->broken && pi->bus_up && pi_queue_may_send(pi, pi->q_head)) {
		struct event *evs[PIPELINE_MAX];
		struct event *saved_tail = pi->sent_tail;
		size_t n = pi_pump_choose(pi, evs);
		int r = pi_queue_send_nng(pi, pi_events_msg(pi, evs, n));
		if (r < 0) {
			pi_pump_unsend(pi, saved_tail, evs, n, r);
			continue;
		}
		pi->next_seq += n;
		pi->stats.messages++;
		for (size_t i = 0; i < n; i++)
			if (evs[i]->kind == EV_ELECTED)
				pi->term_elected_sent = true;
		if (pi->n_sent == n)
			pi_queue_head_started(pi);
	}
	if (pi->broken)
		pi_pump_drop_all(pi);
	pi_maybe_drained(pi);
}

/* drop queued leadership events (deposed, stop, failure) */
void pi_drop_queued(struct plugin_instance *pi, int err, const char *msg)
{
	pi_watch_stop(pi); /* what the watches hold is dropped with the rest */
	struct event **pp = &pi->q_head;
	pi->q_tail = NULL;
	while (*pp) {
		struct event *ev = *pp;
		if (ev->kind == EV_ELECTED || ev->kind == EV_RELEASES || ev->kind == EV_RECONCILE ||
		    ev->kind == EV_WATCH || ev->kind == EV_KEY) {
			*pp = ev->next;
			pi->stats.queued--;
			pi->stats.dropped++;
			pi_event_complete_cancelled(pi, ev, err, msg);
			pi_event_free(ev);
			continue;
		}
		pi->q_tail = ev;
		pp = &ev->next;
	}
}

void pi_mark_broken(struct plugin_instance *pi, const char *why)
{
	if (pi->process) {
		/* a worker process can be replaced: contain it */
		char reason[256];
		pi_fmt(reason, sizeof(reason), "plugin worker bus failed: %s", why);
		pi_gen_lost(pi, reason);
		return;
	}
	if (pi->broken)
		return;
	pi->broken = true;
	log_error(pi->log_comp, "plugin bus failed: %s", why);
	pi_note_error(pi, -EPIPE, why);
	if (pi->state != PLUGIN_INSTANCE_STOPPING && pi->state != PLUGIN_INSTANCE_STOPPED)
		pi_state_set(pi, PLUGIN_INSTANCE_FAILED);
	pi->leading = false;
	/* the events handed to the worker will never be acknowledged */
	bool fini_sent = false;
	for (struct event *ev = pi_sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		pi_event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
		if (ev->kind != EV_FINI && ev->kind != EV_INIT)
			pi->stats.dropped++;
		fini_sent |= ev->kind == EV_FINI;
		pi_event_free(ev);
	}
	if (fini_sent) {
		pi_finish_stop(pi);
		return;
	}
	/* a FINI still queued can never run: finish the stop now */
	bool had_fini = false;
	for (struct event *ev = pi->q_head; ev; ev = ev->next)
		had_fini |= ev->kind == EV_FINI;
	pi_pump(pi); /* drops everything */
	if (had_fini)
		pi_finish_stop(pi);
}

/* ---- driver ops ---- */

static bool pi_queue_accepting(const struct plugin_instance *pi)
{
	return !pi->stop_requested && !pi->broken && pi->state != PLUGIN_INSTANCE_FAILED &&
	       pi->state != PLUGIN_INSTANCE_RECOVERING && !pi->overrun && pi->bus_up;
}

void plugin_instance_deposed(struct plugin_instance *pi)
{
	if (!pi->leading)
		return;
	pi->leading = false;
	pi_drop_queued(pi, -ECANCELED, "dropped: leadership was lost before it ran");
	if (pi->term_elected_sent) {
		struct event *ev = pi_event_new(EV_DEPOSED);
		if (ev)
			pi_enqueue(pi, ev);
		else
			log_error(pi->log_comp, "out of memory: on_deposed not delivered");
	}
	pi->term_elected_sent = false;
	/* on_deposed is held back until the deferred timer fires (or an earlier
	 * send of this instance, such as fini's, carries it): what the caller
	 * does next (resigning, the lease revocation on shutdown) hands
	 * leadership to the next node and goes to etcd first; an nng send costs
	 * tens of µs */
	pi->cork = true;
	pi_pump(pi);
	pi->cork = false;
	if (pi->out_head)
		loop_timer_arm_in(pi->defer, 0);
}

void plugin_instance_elected(struct plugin_instance *pi, int64_t fencing_token,
			     const struct releases *r)
{
	if (!pi_queue_accepting(pi))
		return;
	if (pi->leading)
		plugin_instance_deposed(pi); /* a new term replaces the old one */
	struct event *e1 = pi_event_new(EV_ELECTED), *e2 = pi_event_new(EV_RELEASES);
	if (!e1 || !e2) {
		free(e1);
		free(e2);
		log_error(pi->log_comp, "out of memory: on_elected not delivered");
		return;
	}
	pi->leading = true;
	pi->term_elected_sent = false;
	pi->term++;
	pi_watch_term_start(pi);
	e1->term = e2->term = pi->term;
	pi->last_rel = *r;
	e1->token = fencing_token;
	e2->rel = *r;
	pi_enqueue(pi, e1);
	pi_enqueue(pi, e2);
	/* not sent yet: the caller's first reconcile usually follows at once
	 * (plugin_instance_reconcile pumps), and then the three go as one
	 * message; otherwise the deferred timer sends these two */
	loop_timer_arm_in(pi->defer, 0);
}

void plugin_instance_releases_changed(struct plugin_instance *pi, const struct releases *r)
{
	if (!pi->leading || !pi_queue_accepting(pi))
		return;
	pi->last_rel = *r;
	/* merge with a releases event still waiting at the tail */
	if (pi->q_tail && pi->q_tail->kind == EV_RELEASES) {
		pi->q_tail->rel = *r;
		return;
	}
	struct event *ev = pi_event_new(EV_RELEASES);
	if (!ev) {
		log_error(pi->log_comp, "out of memory: on_releases_changed not delivered");
		return;
	}
	ev->rel = *r;
	ev->term = pi->term;
	pi_enqueue(pi, ev);
	pi_pump(pi);
}

void plugin_instance_reconcile(struct plugin_instance *pi, driver_reconcile_done_fn done,
			       void *done_ud)
{
	if (!pi->leading || !pi_queue_accepting(pi)) {
		bool failed = pi->state == PLUGIN_INSTANCE_FAILED;
		bool down = !pi->stop_requested &&
			    (pi->state == PLUGIN_INSTANCE_RECOVERING || pi->overrun || !pi->bus_up);
		pi->stats.reconciles_cancelled++;
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud,
				   failed || down ? -EIO : -ECANCELED,
				   failed ? "the plugin instance failed"
				   : down ? "the plugin worker is down (failed, recovering)"
					  : "not leading");
		return;
	}
	struct event *ev = pi_event_new(EV_RECONCILE);
	if (!ev) {
		pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud, -ENOMEM,
				   "out of memory");
		return;
	}
	ev->done = done;
	ev->done_ud = done_ud;
	ev->term = pi->term;
	pi_enqueue(pi, ev);
	pi_pump(pi);
}

void plugin_instance_drain(struct plugin_instance *pi, driver_drain_done_fn done, void *done_ud)
{
	struct drain_waiter *d = calloc(1, sizeof(*d));
	if (!d) {
		log_error(pi->log_comp, "out of memory: drain completes at once");
		pi_completion_push(pi, COMP_DRAIN, (void (*)(void))done, done_ud, 0, NULL);
		return;
	}
	d->fn = done;
	d->ud = done_ud;
	d->next = pi->drains;
	pi->drains = d;
	pi->term_leaving = true; /* the election drains only to end a term */
	pi_maybe_drained(pi);
}

static void pi_queue_op_elected(void *drv, int64_t token, const struct releases *r)
{
	plugin_instance_elected(drv, token, r);
}
static void pi_queue_op_releases_changed(void *drv, const struct releases *r)
{
	plugin_instance_releases_changed(drv, r);
}
static void pi_queue_op_reconcile(void *drv, driver_reconcile_done_fn done, void *done_ud)
{
	plugin_instance_reconcile(drv, done, done_ud);
}
static void pi_queue_op_deposed(void *drv)
{
	plugin_instance_deposed(drv);
}
static void pi_queue_op_drain(void *drv, driver_drain_done_fn done, void *done_ud)
{
	plugin_instance_drain(drv, done, done_ud);
}

const struct driver_ops plugin_instance_driver_ops = {
    .elected = pi_queue_op_elected,
    .releases_changed = pi_queue_op_releases_changed,
    .reconcile = pi_queue_op_reconcile,
    .deposed = pi_queue_op_deposed,
    .drain = pi_queue_op_drain,
};

/* pi_queue_config_accepting - config and validation events may be queued: the
 * instance is not stopping and its worker is not gone for good (a worker
 * being restarted gets the configuration with its INIT) */
static bool pi_queue_config_accepting(const struct plugin_instance *pi)
{
	return !pi->stop_requested && !pi->broken && pi->state != PLUGIN_INSTANCE_FAILED &&
	       pi->state != PLUGIN_INSTANCE_STOPPING && pi->state != PLUGIN_INSTANCE_STOPPED;
}

int plugin_instance_set_config(struct plugin_instance *pi, const struct plugin_config *c)
{
	if (plugin_config_copy(&pi->config, c) < 0)
		return -ENOMEM;
	if (pi->init_held) {
		/* INIT carries this configuration: nothing else to tell */
		pi->init_held = false;
		pi_pump(pi);
		return 0;
	}
	if (!pi->lp->desc.on_config_changed || !pi_queue_config_accepting(pi))
		return 0;
	/* one waiting event carries the newest state when it is sent */
	for (const struct event *ev = pi->q_head; ev; ev = ev->next)
		if (ev->kind == EV_CONFIG)
			return 0;
	struct event *ev = pi_event_new(EV_CONFIG);
	if (!ev) {
		log_error(pi->log_comp, "out of memory: on_config_changed not delivered");
		return -ENOMEM;
	}
	ev->term = pi->term;
	pi_enqueue(pi, ev);
	pi_pump(pi);
	return 0;
}

const struct plugin_config *plugin_instance_config(const struct plugin_instance *pi)
{
	return &pi->config;
}

int plugin_instance_validate_config(struct plugin_instance *pi, const char *doc, size_t len,
				    driver_reconcile_done_fn done, void *done_ud)
{
	/* the worker checks the schema (ABI 1.3) before validate_config */
	if (!pi->lp->desc.validate_config && pi->lp->desc.n_config_fields == 0)
		return -EOPNOTSUPP;
	if (!pi_queue_config_accepting(pi) || pi->state != PLUGIN_INSTANCE_READY || pi->overrun)
		return -EAGAIN;
	struct event *ev = calloc(1, sizeof(*ev) + len + 1);
	if (!ev)
		return -ENOMEM;
	ev->kind = EV_VALIDATE;
	memcpy(ev->doc, doc, len);
	ev->doc[len] = 0;
	ev->doc_len = len;
	ev->done = done;
	ev->done_ud = done_ud;
	ev->term = pi->term;
	pi_enqueue(pi, ev);
	pi_pump(pi);
	return 0;
}

int plugin_instance_send_raw_to_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	nng_msg *msg;
	if (pi->broken || !pi->bus_up)
		return -EPIPE;
	if (nng_msg_alloc(&msg, len) != 0)
		return -ENOMEM;
	if (len)
		memcpy(nng_msg_body(msg), buf, len);
	return pi_queue_send_nng(pi, msg);
}
