/* SPDX-License-Identifier: MIT */
/*
 * etcd_watch.c - one watch of the etcd client, a watch id on the client's
 * watch stream (etcd_watch_stream.c): its resume point, delivery that
 * resumes without duplicates, idle detection on progress-notify watches,
 * compaction reported once, cancellation. Reading guide: etcd.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

static void etcd_watch_unlink(struct etcd_watch *w)
{
	struct etcd_client *c = w->c;
	if (w->prev)
		w->prev->next = w->next;
	else if (c->watches == w)
		c->watches = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
}

void etcd_watch_destroy(struct etcd_watch *w)
{
	struct etcd_client *c = w->c;
	bool linked = w->prev || c->watches == w;
	etcd_stream_cancel(c, w);
	etcd_watch_unlink(w);
	if (linked)
		etcd_stream_removed(c);
	loop_timer_free(w->idle);
	free(w->key);
	free(w->range_end);
	w->magic = 0;
	free(w);
}

/* etcd_watch_idle_kick - (re)start the silence deadline of a progress-notify watch. */
static void etcd_watch_idle_kick(struct etcd_watch *w)
{
	if (w->idle)
		loop_timer_arm_in(w->idle, ms_to_ns(w->c->watch_idle_timeout_ms));
}

/* etcd_watch_idle_fired - the watch heard nothing for too long, not even
 * its progress notifications: the member is hung; reopen the stream on the
 * next endpoint. */
static void etcd_watch_idle_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_watch *w = userdata;
	CHECK_OBJ(w, ETCD_WATCH_MAGIC);
	struct etcd_client *c = w->c;
	(void)t;
	if (w->done || w->cancelled || c->ws.state != S_OPEN)
		return;
	log_debug("etcd", "watch silent for %" PRIu32 " ms on %s, reconnecting",
		  c->watch_idle_timeout_ms, c->endpoints[c->ws.x.ep]);
	etcd_stream_reopen(c, true);
	etcd_client_process(c);
}

/* etcd_watch_end - the watch is over for good: report err once. */
void etcd_watch_end(struct etcd_watch *w, int err, int64_t revision)
{
	struct etcd_client *c = w->c;
	etcd_stream_cancel(c, w);
	loop_timer_disarm(w->idle);
	w->done = true;
	if (err < 0 && err != -ECANCELED && c->observer)
		c->observer->watch_ended(c->observer_ud, err);
	w->in_cb = true;
	w->cb(w, err, revision, NULL, 0, w->ud);
	w->in_cb = false;
}

/* etcd_watch_deliver - run the callback; returns false when w was cancelled (and
 * is freed). */
static bool etcd_watch_deliver(struct etcd_watch *w, int64_t revision, const struct etcd_event *ev,
			  size_t n)
{
	w->in_cb = true;
	w->cb(w, 0, revision, ev, n, w->ud);
	w->in_cb = false;
	if (w->cancelled) {
		etcd_watch_destroy(w);
		return false;
	}
	return true;
}

/* the stream's creation answer: resume from its revision, announce it once.
 * false when w is gone */
static bool etcd_watch_on_created(struct etcd_watch *w, const struct etcd_watch_msg *m)
{
	w->created = true;
	w->reauthed = false;
	w->c->ws.backoff_ms = WATCH_BACKOFF_MIN_MS;
	log_debug("etcd", "watch created (header revision %" PRId64 ")", m->header.revision);
	if (w->next_rev == 0 && m->header.revision > 0)
		w->next_rev = m->header.revision + 1;
	if ((w->flags & ETCD_WATCH_CREATED_NOTIFY) && !w->announced) {
		/* the first creation only: a reconnect resumes, it does not
		 * start the stream again */
		w->announced = true;
		return etcd_watch_deliver(w, m->header.revision, NULL, 0);
	}
	return true;
}

/* the server cancelled the watch: compaction and refusals end it, an
 * expired token reopens it once. Same returns as etcd_watch_handle */
static int etcd_watch_on_canceled(struct etcd_watch *w, const struct etcd_watch_msg *m)
{
	struct etcd_client *c = w->c;
	if (m->compact_revision > 0) {
		etcd_watch_end(w, -ERANGE, m->compact_revision);
		if (w->cancelled)
			etcd_watch_destroy(w);
		return -1;
	}
	const char *why = m->cancel_reason ? m->cancel_reason : "";
	log_debug("etcd", "watch cancelled by the server: %s", why);
	bool bad_token = strstr(why, "invalid auth token") || strstr(why, "Unauthenticated");
	if (c->user && bad_token && !w->reauthed) {
		/* the token expired: authenticate again and reopen, once */
		w->reauthed = true;
		etcd_drop_token(c, c->ws.x.token_gen);
		return 0;
	}
	int err = -EIO;
	if (bad_token)
		err = -EACCES;
	else if (strstr(why, "permission denied"))
		err = -EPERM;
	etcd_watch_end(w, err, m->header.revision);
	if (w->cancelled)
		etcd_watch_destroy(w);
	return -1;
}

/* events: those not yet delivered, in order. Same returns as
 * etcd_watch_handle */
static int etcd_watch_on_events(struct etcd_watch *w, const struct etcd_watch_msg *m)
{
	/* drop what was already delivered (never expected, but a resumed
	 * stream must not duplicate) */
	size_t first = 0;
	while (first < m->n_events && m->events[first].kv.mod_revision < w->next_rev)
		first++;
	if (first == m->n_events)
		return 1;
	int64_t maxrev = 0;
	for (size_t i = first; i < m->n_events; i++)
		if (m->events[i].kv.mod_revision > maxrev)
			maxrev = m->events[i].kv.mod_revision;
	w->next_rev = maxrev + 1;
	w->last_rev = maxrev;
	return etcd_watch_deliver(w, m->header.revision, m->events + first, m->n_events - first)
	           ? 1
	           : -1;
}

/* etcd_watch_handle - one parsed message. Returns 1 to go on, 0 when the stream
 * must be dropped (reconnect), -1 when w is gone or done. */
int etcd_watch_handle(struct etcd_watch *w, struct etcd_watch_msg *m)
{
	etcd_watch_idle_kick(w);
	if (m->created && !m->canceled && !etcd_watch_on_created(w, m))
		return -1;
	if (m->canceled)
		return etcd_watch_on_canceled(w, m);
	if (m->n_events > 0)
		return etcd_watch_on_events(w, m);
	if (!m->created && m->header.revision > 0) {
		/* progress notification: everything up to header.revision was sent */
		if (m->header.revision + 1 > w->next_rev)
			w->next_rev = m->header.revision + 1;
		if (m->header.revision > w->last_rev)
			w->last_rev = m->header.revision;
		return etcd_watch_deliver(w, m->header.revision, NULL, 0) ? 1 : -1;
	}
	return 1;
}

int etcd_watch_start(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
		     size_t range_end_len, int64_t start_revision, unsigned flags, etcd_watch_cb cb,
		     void *ud, struct etcd_watch **ret_watch)
{
	int r;
	if (!c || !cb || !ret_watch || start_revision < 0 ||
	    (flags & ~(ETCD_WATCH_PREV_KV | ETCD_WATCH_PROGRESS_NOTIFY | ETCD_WATCH_CREATED_NOTIFY)))
		return -EINVAL;
	/* validate the arguments once, the way every reopen will use them */
	struct buf probe = {0};
	r = etcd_grpc_watch_create(&probe, 1, key, key_len, range_end, range_end_len,
				   start_revision, flags);
	etcd_buf_reset(&probe);
	if (r < 0)
		return r;
	struct etcd_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->magic = ETCD_WATCH_MAGIC;
	w->c = c;
	w->id = ++c->last_watch_id;
	w->cb = cb;
	w->ud = ud;
	w->flags = flags;
	w->next_rev = start_revision;
	r = -ENOMEM;
	w->key = malloc(key_len);
	if (!w->key)
		goto fail;
	memcpy(w->key, key, key_len);
	w->key_len = key_len;
	if (range_end) {
		w->range_end = malloc(range_end_len);
		if (!w->range_end)
			goto fail;
		memcpy(w->range_end, range_end, range_end_len);
		w->range_end_len = range_end_len;
	}
	if ((flags & ETCD_WATCH_PROGRESS_NOTIFY) && c->watch_idle_timeout_ms &&
	    (r = loop_timer_new(c->loop, etcd_watch_idle_fired, w, &w->idle)) < 0)
		goto fail;
	w->next = c->watches;
	if (c->watches)
		c->watches->prev = w;
	c->watches = w;
	if ((r = etcd_stream_add(c, w)) < 0) {
		etcd_watch_destroy(w);
		return r;
	}
	etcd_watch_idle_kick(w);
	*ret_watch = w;
	return 0;
fail:
	etcd_watch_destroy(w); /* not linked yet: only freed */
	return r;
}

/* Cancelling is O(1): the watch goes quiet at once (no callback, its
 * messages are dropped) and is torn down (its cancel request sent, the
 * stream closed with the last watch) from kick_timer, so a caller on a
 * latency path (a resigning election) does not pay for it. */
void etcd_watch_cancel(struct etcd_watch *w)
{
	if (!w)
		return;
	CHECK_OBJ(w, ETCD_WATCH_MAGIC);
	if (w->cancelled)
		return;
	w->cancelled = true;
	if (w->in_cb)
		return; /* freed when the callback returns */
	loop_timer_disarm(w->idle);
	loop_timer_arm_in(w->c->kick_timer, 0);
}

int64_t etcd_watch_revision(const struct etcd_watch *w)
{
	return w->last_rev;
}
