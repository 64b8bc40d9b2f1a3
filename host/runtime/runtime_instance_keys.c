/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_keys.c - keyed reconcile (ABI 1.3 reconcile_key,
 * plugin.h "Keyed reconcile"): the instance's work queue
 * (runtime_keyqueue.h), fed from its watches, handed to the worker one key
 * at a time as EV_KEY events. Reading guide: runtime_instance.c.
 *
 * Where the keys come from: a plugin without key_of and without
 * on_watch_events needs nothing of a batch but its keys, so the host takes
 * them itself, every waiting batch at once, without a bus round trip. A
 * plugin with either gets the batch as today (EV_WATCH) and its answer
 * carries the queue keys (key_of's, or the events' own).
 *
 * When a key goes: under the same rule as a watch batch (leading, after the
 * term's first reconcile, nothing else queued or in flight, not paused,
 * no drain), alternating with watch batches so that neither starves the
 * other. One key at a time, or up to the plugin's key_concurrency beside
 * each other (ABI 1.3): then more keys go while only keys are in flight,
 * never a key that already runs (the queue holds it apart), and anything
 * else waits for every key to return (pi_queue_may_send); a watch batch
 * whose turn it is stops new keys until the running ones returned. Their
 * txns are fenced on the term like every callback's.
 *
 * What is never lost: the queue is dropped whenever the instance stops
 * leading (on_deposed, a dead worker, a stop), and the next term's snapshot
 * fills it again with every key. While the term lasts, a key whose event
 * could not be delivered counts as failed and backs off; a keyed watch
 * batch that could not be delivered, or whose keys did not all come back,
 * restarts the watches (a fresh snapshot queues every key again).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

static void pi_keys_on_timer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)t;
	pi_pump(pi);
}

int pi_keys_init(struct plugin_instance *pi)
{
	const struct lh_plugin *d = &pi->lp->desc;
	if (!d->reconcile_key)
		return 0;
	struct keyqueue_config c = {d->key_backoff_min_ms, d->key_backoff_max_ms,
				    d->key_concurrency};
	int r = keyqueue_new(&c, &pi->keys);
	if (r == 0)
		r = loop_timer_new(pi->loop, pi_keys_on_timer, pi, &pi->keys_timer);
	return r;
}

void pi_keys_free(struct plugin_instance *pi)
{
	loop_timer_free(pi->keys_timer);
	pi->keys_timer = NULL;
	keyqueue_free(pi->keys);
	pi->keys = NULL;
}

bool pi_keys_concurrent(const struct plugin_instance *pi)
{
	return pi->keys && pi->lp->desc.key_concurrency > 1;
}

bool pi_keys_host_takes_batches(const struct plugin_instance *pi)
{
	return pi->keys && !pi->lp->desc.key_of && !pi->lp->desc.on_watch_events;
}

void pi_keys_stop(struct plugin_instance *pi)
{
	if (!pi->keys)
		return;
	keyqueue_clear(pi->keys);
	loop_timer_disarm(pi->keys_timer);
}

/* the watches start over: their snapshot queues every key again */
static void pi_keys_restart_watches(struct plugin_instance *pi, const char *why)
{
	log_warn(pi->log_comp, "%s: the watches start over (their snapshot queues every key)", why);
	pi_watch_term_start(pi);
	pi->term_reconciled = true;
}

static void pi_keys_add(struct plugin_instance *pi, const void *key, size_t len, uint64_t now)
{
	if (keyqueue_add(pi->keys, key, len, now) == -ENOMEM)
		pi->keys_lost = true; /* pi_keys_feed restarts the watches */
}

/* every waiting batch's keys into the queue (pi_keys_host_takes_batches) */
static void pi_keys_absorb(struct plugin_instance *pi)
{
	uint64_t now = loop_now();
	for (struct plugin_watch_batch *b; (b = plugin_watch_take(pi->watch));) {
		for (size_t i = 0; i < b->n; i++) {
			const struct etcd_kv *kv = b->evs[i].kv;
			if (kv && kv->key_len > b->strip)
				pi_keys_add(pi, kv->key + b->strip, kv->key_len - b->strip, now);
		}
		plugin_watch_batch_free(b);
	}
}

/* only keys queued and in flight, fewer than the concurrency, and no
 * watch batch waiting for its turn */
static bool pi_keys_room_beside(const struct plugin_instance *pi)
{
	if (!pi_keys_concurrent(pi) || pi->n_sent != pi->n_sent_keys)
		return false;
	unsigned n = pi->n_sent;
	for (const struct event *ev = pi->q_head; ev; ev = ev->next, n++)
		if (ev->kind != EV_KEY)
			return false;
	if (n >= pi->lp->desc.key_concurrency)
		return false;
	return pi->keys_turn || !pi->watch || pi_keys_host_takes_batches(pi) ||
	       !plugin_watch_pending(pi->watch);
}

/* may a key go now? pi_watch_feed's rule, or beside running keys */
static bool pi_keys_may_feed(const struct plugin_instance *pi)
{
	if (!pi->leading || !pi->term_reconciled || pi->broken || !pi->bus_up ||
	    pi->stop_requested || pi->overrun || pi->drains || pi->term_leaving)
		return false;
	if ((pi->q_head || pi->sent_head) && !pi_keys_room_beside(pi))
		return false;
	return !(pi->host.paused && pi->host.paused(pi->host.ctx));
}

/* the next key as an EV_KEY, queued: true, or false when none is ready
 * (the timer is armed for the first that waits) */
static bool pi_keys_queue_one(struct plugin_instance *pi, uint64_t now)
{
	const struct keyqueue_item *it = keyqueue_take(pi->keys, now);
	if (!it) {
		uint64_t due = keyqueue_next_due(pi->keys);
		if (due)
			loop_timer_arm_at(pi->keys_timer, due);
		return false;
	}
	struct event *ev = calloc(1, sizeof(*ev) + it->len + 1);
	if (!ev) {
		keyqueue_settle(pi->keys, it->key, it->len, it->epoch, KEYQUEUE_FAILED, 0, now);
		return false;
	}
	ev->kind = EV_KEY;
	ev->term = pi->term;
	ev->key_epoch = it->epoch;
	ev->doc_len = it->len;
	memcpy(ev->doc, it->key, it->len);
	pi_enqueue(pi, ev);
	return true;
}

bool pi_keys_feed(struct plugin_instance *pi)
{
	if (!pi->keys || !pi->leading || !pi->term_reconciled)
		return false;
	if (pi->watch && pi_keys_host_takes_batches(pi))
		pi_keys_absorb(pi);
	if (pi->keys_lost) {
		/* clearing drops the running keys' entries: a fresh snapshot
		 * could then hand one out beside itself; wait for them */
		if (pi->n_sent_keys > 0)
			return false;
		pi->keys_lost = false;
		keyqueue_clear(pi->keys);
		pi_keys_restart_watches(pi, "out of memory for the work queue");
		return false;
	}
	uint64_t now = loop_now();
	bool queued = false;
	while (pi_keys_may_feed(pi) && pi_keys_queue_one(pi, now))
		queued = true;
	return queued;
}

/* ---- answers ---- */

void pi_keys_on_done(struct plugin_instance *pi, const struct event *ev, const EventDone *d,
		     int err, bool skipped)
{
	if (!pi->keys)
		return;
	uint64_t now = loop_now();
	if (ev->kind == EV_KEY) {
		enum keyqueue_outcome o = err < 0 || skipped	? KEYQUEUE_FAILED
					  : d->requeue_after_ms ? KEYQUEUE_AFTER
								: KEYQUEUE_DONE;
		keyqueue_settle(pi->keys, ev->doc, ev->doc_len, ev->key_epoch, o,
				(uint64_t)d->requeue_after_ms * LOOP_NS_PER_MS, now);
		return;
	}
	if (ev->kind != EV_WATCH || skipped || !pi->leading || ev->term != pi->term)
		return;
	/* the worker's keys are hostile: each checked, at most one per event */
	size_t n_events = ev->batch ? ev->batch->n : 0;
	bool bad = d->n_keys > n_events;
	for (size_t i = 0; !bad && i < d->n_keys; i++) {
		if (d->keys[i].len == 0 || d->keys[i].len > LH_KEY_MAX) {
			bad = true;
			break;
		}
		pi_keys_add(pi, d->keys[i].data, d->keys[i].len, now);
	}
	if (bad)
		pi_keys_restart_watches(pi, "the worker answered a watch batch with bad queue keys");
	else if (d->keys_incomplete)
		pi_keys_restart_watches(pi, "the queue keys of a watch batch did not all come back");
}

void pi_keys_on_cancelled(struct plugin_instance *pi, const struct event *ev)
{
	if (!pi->keys || !pi->leading || ev->term != pi->term)
		return; /* the term is over: its queue went with it */
	if (ev->kind == EV_KEY)
		keyqueue_settle(pi->keys, ev->doc, ev->doc_len, ev->key_epoch, KEYQUEUE_FAILED, 0,
				loop_now());
	else if (ev->kind == EV_WATCH)
		pi_keys_restart_watches(pi, "a watch batch could not be delivered");
}

bool plugin_instance_key_stats(const struct plugin_instance *pi, struct plugin_key_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!pi->keys)
		return false;
	struct keyqueue_stats st;
	keyqueue_get_stats(pi->keys, loop_now(), &st);
	ret->depth = st.depth;
	ret->waiting = st.waiting;
	ret->oldest_ms = st.oldest_ns / LOOP_NS_PER_MS;
	ret->added = st.added;
	ret->done = st.done;
	ret->failed = st.failed;
	ret->requeued = st.requeued;
	ret->running = st.running;
	ret->concurrency = st.concurrency;
	return true;
}
