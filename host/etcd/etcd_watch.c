/* SPDX-License-Identifier: MIT */
/*
 * etcd_watch.c - watch streams of the etcd client: bytes parsed across
 * chunk boundaries, delivery that resumes without duplicates, reconnect
 * with backoff, idle detection on progress-notify watches, compaction
 * reported once. Reading guide: etcd.c.
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
	struct etcd_client *c = w->x.c;
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
	etcd_watch_unlink(w);
	etcd_xfer_release(&w->x);
	loop_timer_free(w->timer);
	loop_timer_free(w->idle);
	if (w->tok)
		json_tokener_free(w->tok);
	free(w->key);
	free(w->range_end);
	w->magic = 0;
	free(w);
}

/* etcd_watch_idle_kick - (re)start the silence deadline of a progress-notify watch. */
static void etcd_watch_idle_kick(struct etcd_watch *w)
{
	if (w->idle)
		loop_timer_arm_in(w->idle, ms_to_ns(w->x.c->watch_idle_timeout_ms));
}

/* etcd_watch_idle_fired - the stream said nothing for too long: drop it and try
 * the next endpoint. */
static void etcd_watch_idle_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_watch *w = userdata;
	CHECK_OBJ(w, ETCD_WATCH_MAGIC);
	struct etcd_client *c = w->x.c;
	if (w->state != W_CONNECTING)
		return;
	log_debug("etcd", "watch silent for %" PRIu32 " ms on %s, reconnecting",
		  c->watch_idle_timeout_ms, c->endpoints[w->x.ep]);
	etcd_advance_endpoint(&w->x);
	etcd_watch_schedule_reconnect(w);
	etcd_client_process(c);
}

/* etcd_watch_connect - (re)open the stream from next_rev. */
static void etcd_watch_connect(struct etcd_watch *w)
{
	char *body = NULL;
	int r = etcd_json_watch_req(w->key, w->key_len, w->range_end, w->range_end_len, w->next_rev,
				    w->flags, &body);
	if (r < 0) {
		etcd_watch_schedule_reconnect(w);
		return;
	}
	free(w->x.body);
	w->x.body = body;
	json_tokener_reset(w->tok);
	w->tok_bytes = 0;
	w->created = false;
	w->pending = false;
	w->stream_ended = false;
	w->state = W_CONNECTING;
	log_debug("etcd", "watch connecting from revision %" PRId64, w->next_rev);
	etcd_watch_idle_kick(w);
	etcd_xfer_submit(&w->x);
}

static void etcd_watch_timer_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_watch *w = userdata;
	CHECK_OBJ(w, ETCD_WATCH_MAGIC);
	struct etcd_client *c = w->x.c;
	etcd_watch_connect(w);
	etcd_client_process(c);
}

void etcd_watch_schedule_reconnect(struct etcd_watch *w)
{
	if (w->state == W_DONE)
		return;
	etcd_xfer_detach(&w->x);
	etcd_wait_unlink(&w->x);
	etcd_buf_reset(&w->x.resp);
	w->pending = false;
	w->state = W_BACKOFF;
	loop_timer_disarm(w->idle);
	loop_timer_arm_in(w->timer, ms_to_ns(w->backoff_ms));
	w->backoff_ms =
	    w->backoff_ms * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS : w->backoff_ms * 2;
}

/* etcd_watch_end - the watch is over for good: report err once, close the stream. */
static void etcd_watch_end(struct etcd_watch *w, int err, int64_t revision)
{
	etcd_xfer_detach(&w->x);
	etcd_wait_unlink(&w->x);
	loop_timer_disarm(w->timer);
	loop_timer_disarm(w->idle);
	w->state = W_DONE;
	w->pending = false;
	if (err < 0 && err != -ECANCELED && w->x.c->observer)
		w->x.c->observer->watch_ended(w->x.c->observer_ud, err);
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
	w->backoff_ms = WATCH_BACKOFF_MIN_MS;
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
	struct etcd_client *c = w->x.c;
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
		etcd_drop_token(c, w->x.token_gen);
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
static int etcd_watch_handle(struct etcd_watch *w, struct etcd_watch_msg *m)
{
	struct etcd_client *c = w->x.c;
	etcd_watch_idle_kick(w);
	if (m->is_error) {
		log_debug("etcd", "watch stream error %d: %s", m->grpc_code,
			  m->error_message ? m->error_message : "");
		if (c->user && etcd_is_invalid_token(m->grpc_code, m->error_message))
			etcd_drop_token(c, w->x.token_gen);
		return 0;
	}
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

/* watch_drain - parse and deliver the buffered stream bytes. May free w. */
void etcd_watch_drain(struct etcd_watch *w)
{
	struct etcd_client *c = w->x.c;
	struct buf *b = &w->x.resp;
	size_t pos = 0;
	int verdict = 1;
	while (verdict == 1 && pos < b->len) {
		while (pos < b->len &&
		       (b->data[pos] == ' ' || b->data[pos] == '\n' || b->data[pos] == '\r' ||
			b->data[pos] == '\t') &&
		       w->tok_bytes == 0)
			pos++;
		if (pos == b->len)
			break;
		size_t chunk = b->len - pos;
		if (chunk > INT32_MAX)
			chunk = INT32_MAX;
		json_object *o = json_tokener_parse_ex(w->tok, b->data + pos, (int)chunk);
		enum json_tokener_error je = json_tokener_get_error(w->tok);
		if (je == json_tokener_continue) {
			w->tok_bytes += chunk;
			pos += chunk;
			if (w->tok_bytes > c->max_response_bytes) {
				etcd_buf_reset(b);
				etcd_watch_end(w, -EMSGSIZE, w->last_rev);
				if (w->cancelled)
					etcd_watch_destroy(w);
				return;
			}
			continue;
		}
		if (je != json_tokener_success || !o) {
			log_debug("etcd", "watch stream: invalid JSON (%s)",
				  json_tokener_error_desc(je));
			json_object_put(o);
			verdict = 0;
			break;
		}
		size_t used = json_tokener_get_parse_end(w->tok);
		pos += used;
		w->tok_bytes = 0;
		json_tokener_reset(w->tok);
		struct etcd_watch_msg *m = NULL;
		int r = etcd_json_watch_msg_from_object(o, &m);
		json_object_put(o);
		if (r < 0) {
			log_debug("etcd", "watch stream: bad message (%s)", etcd_strerror(r));
			verdict = 0;
			break;
		}
		verdict = etcd_watch_handle(w, m);
		etcd_watch_msg_free(m);
	}
	if (verdict < 0)
		return; /* w freed or done */
	etcd_buf_reset(b);
	if (verdict == 0 || w->stream_ended)
		etcd_watch_schedule_reconnect(w);
}

void etcd_watch_on_done(struct etcd_watch *w, CURLcode rc)
{
	CHECK_OBJ(w, ETCD_WATCH_MAGIC);
	if (w->cancelled && !w->in_cb) {
		etcd_watch_destroy(w);
		return;
	}
	struct xfer *x = &w->x;
	long http = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
	log_debug("etcd", "watch stream ended: %s (HTTP %ld)",
		  rc != CURLE_OK && x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc), http);
	if (rc != CURLE_OK && etcd_is_connect_failure(x->easy, rc))
		etcd_advance_endpoint(x);
	bool oversize = x->oversize;
	etcd_xfer_detach(x);
	if (oversize) {
		etcd_buf_reset(&x->resp);
		etcd_watch_end(w, -EMSGSIZE, w->last_rev);
		if (w->cancelled)
			etcd_watch_destroy(w);
		return;
	}
	if (w->x.resp.len > 0 && http / 100 == 2) {
		/* deliver what arrived before the end, then reconnect */
		w->stream_ended = true;
		w->pending = false;
		etcd_watch_drain(w);
		return;
	}
	etcd_watch_schedule_reconnect(w);
}

int etcd_watch_start(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
		     size_t range_end_len, int64_t start_revision, unsigned flags, etcd_watch_cb cb,
		     void *ud, struct etcd_watch **ret_watch)
{
	int r;
	char *probe = NULL;
	if (!c || !cb || !ret_watch || start_revision < 0 ||
	    (flags & ~(ETCD_WATCH_PREV_KV | ETCD_WATCH_PROGRESS_NOTIFY | ETCD_WATCH_CREATED_NOTIFY)))
		return -EINVAL;
	/* validate the arguments once, the way every reconnect will use them */
	r = etcd_json_watch_req(key, key_len, range_end, range_end_len, start_revision, flags,
				&probe);
	if (r < 0)
		return r;
	struct etcd_watch *w = calloc(1, sizeof(*w));
	if (!w) {
		free(probe);
		return -ENOMEM;
	}
	w->magic = ETCD_WATCH_MAGIC;
	w->x.kind = XFER_WATCH;
	w->x.c = c;
	w->x.path = "/v3/watch";
	w->x.body = probe;
	w->cb = cb;
	w->ud = ud;
	w->flags = flags;
	w->next_rev = start_revision;
	w->backoff_ms = WATCH_BACKOFF_MIN_MS;
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
	w->tok = json_tokener_new_ex(ETCD_JSON_MAX_DEPTH);
	if (!w->tok)
		goto fail;
	if ((r = loop_timer_new(c->loop, etcd_watch_timer_fired, w, &w->timer)) < 0)
		goto fail;
	if ((flags & ETCD_WATCH_PROGRESS_NOTIFY) && c->watch_idle_timeout_ms &&
	    (r = loop_timer_new(c->loop, etcd_watch_idle_fired, w, &w->idle)) < 0)
		goto fail;
	etcd_watch_idle_kick(w);
	w->state = W_CONNECTING;
	if (c->user && !c->token) {
		if ((r = etcd_auth_start(c)) < 0)
			goto fail;
		etcd_wait_push(&w->x);
	} else if ((r = etcd_xfer_send(&w->x)) < 0)
		goto fail;
	w->next = c->watches;
	if (c->watches)
		c->watches->prev = w;
	c->watches = w;
	*ret_watch = w;
	return 0;
fail:
	etcd_watch_destroy(w); /* not linked yet: only freed */
	return r;
}

/* Cancelling is O(1): the watch goes quiet at once (no callback, its bytes
 * are dropped) and is torn down (curl handle removed, connection closed) from
 * kick_timer, so a caller on a latency path (a resigning election) does not
 * pay for the close. */
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
	w->pending = false;
	etcd_wait_unlink(&w->x);
	loop_timer_disarm(w->timer);
	loop_timer_disarm(w->idle);
	loop_timer_arm_in(w->x.c->kick_timer, 0);
}

int64_t etcd_watch_revision(const struct etcd_watch *w)
{
	return w->last_rev;
}
