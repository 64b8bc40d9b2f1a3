/* SPDX-License-Identifier: MIT */
/*
 * etcd_watch_stream.c - the client's one watch stream: etcd's gRPC Watch
 * RPC (/etcdserverpb.Watch/Watch) over HTTP/2, one transfer of the curl
 * multi, on which every watch of the client is a watch id. Creating or
 * cancelling a watch appends a request to the stream's send buffer; the
 * answers are demultiplexed by watch id to etcd_watch_handle. Reading
 * guide: etcd.c.
 *
 * Why one stream: a watch over the JSON gateway is an HTTP/1.1 request and
 * so a TCP connection of its own; a host with P plugins held 2P + 1. Why
 * gRPC and not several create requests in one gateway body: design.md
 * "The etcd client".
 *
 * The stream is opened when the client has a watch and none is open,
 * closed when its last watch is gone, and reopened after it ends (an
 * error, etcd restarting, garbage, a silent member): then every live watch
 * is created again from its resume point, so a reconnect loses and
 * duplicates nothing (etcd_watch.c). Only one transfer ever uses the
 * stream's HTTP/2 connection, so curl never has to reuse a prior-knowledge
 * h2c connection (curl #10634).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

static void etcd_stream_timer_fired(struct loop_timer *t, void *userdata);
static void etcd_stream_check_fired(struct loop_timer *t, void *userdata);

int etcd_stream_init(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	ws->x.kind = XFER_STREAM;
	ws->x.c = c;
	ws->x.path = "/etcdserverpb.Watch/Watch";
	ws->state = S_IDLE;
	ws->grpc_status = -1;
	ws->backoff_ms = WATCH_BACKOFF_MIN_MS;
	int r = loop_timer_new(c->loop, etcd_stream_timer_fired, c, &ws->timer);
	if (r < 0)
		return r;
	return loop_timer_new(c->loop, etcd_stream_check_fired, c, &ws->check);
}

void etcd_stream_free(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	if (ws->x.c)
		etcd_xfer_release(&ws->x);
	etcd_buf_reset(&ws->out);
	loop_timer_free(ws->timer);
	loop_timer_free(ws->check);
	ws->timer = ws->check = NULL;
}

static bool etcd_stream_live(const struct etcd_watch *w)
{
	return !w->cancelled && !w->done;
}

/* let curl take what was appended to out */
static void etcd_stream_unpause(struct etcd_watch_stream *ws)
{
	if (ws->paused && ws->x.easy) {
		ws->paused = false;
		curl_easy_pause(ws->x.easy, CURLPAUSE_CONT);
	}
}

/* etcd_stream_drop - end the transfer (its connection closes with it) and
 * forget what was sent and received */
static void etcd_stream_drop(struct etcd_watch_stream *ws)
{
	etcd_xfer_detach(&ws->x);
	etcd_wait_unlink(&ws->x);
	etcd_buf_reset(&ws->x.resp);
	etcd_buf_reset(&ws->out);
	ws->out_pos = 0;
	ws->pending = false;
}

/* etcd_stream_close - no watch is left */
static void etcd_stream_close(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	etcd_stream_drop(ws);
	loop_timer_disarm(ws->timer);
	loop_timer_disarm(ws->check);
	ws->state = S_IDLE;
}

/* etcd_stream_open - a new stream carrying a create request for every
 * live watch, each from its resume point */
static void etcd_stream_open(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	etcd_buf_reset(&ws->out);
	etcd_buf_reset(&ws->x.resp);
	ws->out_pos = 0;
	ws->paused = ws->pending = ws->ended = ws->status_seen = ws->had_sock = false;
	ws->grpc_status = -1;
	ws->grpc_message[0] = 0;
	size_t n = 0;
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		w->sent = false;
		if (!etcd_stream_live(w))
			continue;
		w->created = false;
		if (etcd_grpc_watch_create(&ws->out, w->id, w->key, w->key_len, w->range_end,
					   w->range_end_len, w->next_rev, w->flags) < 0) {
			/* out of memory: try the whole stream again later */
			etcd_stream_reopen(c, false);
			return;
		}
		w->sent = true;
		n++;
	}
	if (n == 0) {
		etcd_stream_close(c);
		return;
	}
	log_debug("etcd", "watch stream opening with %zu watches", n);
	ws->state = S_OPEN;
	etcd_xfer_submit(&ws->x);
}

/* etcd_stream_check_fired - a stream whose connection is gone while curl
 * still holds the transfer (a reset stream, then the connection closed:
 * curl 7.88 never finishes a transfer whose upload is paused then, and
 * only stops polling its socket) is reopened; curl's own end of it is the
 * usual path. Armed when curl stops polling a socket of the stream, so an
 * idle stream costs no wake-ups. (curl's CURLINFO_ACTIVESOCKET cannot
 * tell: it names a connection only once a transfer on it is done, so it
 * says "none" for every live stream.) */
static void etcd_stream_check_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	struct etcd_watch_stream *ws = &c->ws;
	(void)t;
	if (ws->state != S_OPEN || !ws->had_sock)
		return;
	for (const struct sock *sk = c->socks; sk; sk = sk->next)
		if (sk->stream)
			return; /* polled again, or another of its sockets is */
	log_debug("etcd", "watch stream: curl no longer polls its connection, reopening");
	etcd_stream_reopen(c, false);
	etcd_client_process(c);
}

void etcd_stream_socket_polled(struct etcd_client *c, bool added)
{
	struct etcd_watch_stream *ws = &c->ws;
	if (added)
		ws->had_sock = true;
	else if (ws->state == S_OPEN && ws->check) /* no timer: the client is being freed */
		loop_timer_arm_in(ws->check, 0);
}

static void etcd_stream_timer_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)t;
	etcd_stream_open(c);
	etcd_client_process(c);
}

void etcd_stream_reopen(struct etcd_client *c, bool next_endpoint)
{
	struct etcd_watch_stream *ws = &c->ws;
	if (next_endpoint)
		etcd_advance_endpoint(&ws->x);
	etcd_stream_drop(ws);
	bool any = false;
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		w->sent = false;
		any = any || etcd_stream_live(w);
	}
	if (!any) {
		etcd_stream_close(c);
		return;
	}
	ws->state = S_BACKOFF;
	loop_timer_disarm(ws->check);
	loop_timer_arm_in(ws->timer, ms_to_ns(ws->backoff_ms));
	ws->backoff_ms =
	    ws->backoff_ms * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS : ws->backoff_ms * 2;
}

int etcd_stream_add(struct etcd_client *c, struct etcd_watch *w)
{
	struct etcd_watch_stream *ws = &c->ws;
	switch (ws->state) {
	case S_IDLE:
		etcd_stream_open(c);
		return 0;
	case S_BACKOFF:
		return 0; /* created with the others when the stream reopens */
	case S_OPEN:
		break;
	}
	int r = etcd_grpc_watch_create(&ws->out, w->id, w->key, w->key_len, w->range_end,
				       w->range_end_len, w->next_rev, w->flags);
	if (r < 0)
		return r;
	w->sent = true;
	etcd_stream_unpause(ws);
	return 0;
}

void etcd_stream_cancel(struct etcd_client *c, struct etcd_watch *w)
{
	struct etcd_watch_stream *ws = &c->ws;
	if (ws->state != S_OPEN || !w->sent)
		return;
	w->sent = false;
	/* best effort: without it etcd goes on sending events for the id,
	 * which the stream drops, until the stream ends */
	if (etcd_grpc_watch_cancel(&ws->out, w->id) == 0)
		etcd_stream_unpause(ws);
}

void etcd_stream_removed(struct etcd_client *c)
{
	if (!c->watches && c->ws.state != S_IDLE)
		etcd_stream_close(c);
}

void etcd_stream_failed(struct etcd_client *c, int err)
{
	if (err != -EACCES) {
		etcd_stream_reopen(c, false);
		return;
	}
	/* wrong credentials: permanent for every watch */
	etcd_stream_close(c);
	for (struct etcd_watch *w = c->watches, *next; w; w = next) {
		next = w->next;
		if (!etcd_stream_live(w))
			continue;
		etcd_watch_end(w, -EACCES, 0);
		if (w->cancelled)
			etcd_watch_destroy(w);
	}
}

size_t etcd_stream_read_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct etcd_client *c = userdata;
	struct etcd_watch_stream *ws = &c->ws;
	size_t room = size * nitems;
	size_t avail = ws->out.len - ws->out_pos;
	if (ws->status_seen)
		return 0; /* the RPC is over: end our half too */
	if (avail == 0) {
		ws->paused = true;
		return CURL_READFUNC_PAUSE;
	}
	size_t n = avail < room ? avail : room;
	memcpy(buf, ws->out.data + ws->out_pos, n);
	ws->out_pos += n;
	if (ws->out_pos == ws->out.len) {
		etcd_buf_reset(&ws->out);
		ws->out_pos = 0;
	}
	return n;
}

/* grpc-status and grpc-message come as trailers, or as headers of an
 * answer without a body (the call failed at once). Either way the RPC is
 * over, but curl does not end a transfer whose upload is paused (ours
 * always is, between requests): the upload is ended then (the read
 * callback says end of body), so that curl delivers what it still holds
 * and finishes the transfer */
size_t etcd_stream_header_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct etcd_client *c = userdata;
	struct etcd_watch_stream *ws = &c->ws;
	size_t n = size * nitems;
	static const char st[] = "grpc-status:", msg[] = "grpc-message:";
	if (n > sizeof(st) - 1 && strncasecmp(buf, st, sizeof(st) - 1) == 0) {
		int v = 0;
		bool any = false;
		for (size_t i = sizeof(st) - 1; i < n && v < 1000; i++) {
			if (isdigit((unsigned char)buf[i])) {
				v = v * 10 + (buf[i] - '0');
				any = true;
			} else if (any)
				break;
		}
		ws->grpc_status = any ? v : 2;
		ws->status_seen = true;
		ws->pending = true; /* client_process unpauses the upload */
	} else if (n > sizeof(msg) - 1 && strncasecmp(buf, msg, sizeof(msg) - 1) == 0) {
		size_t i = sizeof(msg) - 1, j = 0;
		while (i < n && buf[i] == ' ')
			i++;
		while (i < n && buf[i] != '\r' && buf[i] != '\n' && j + 1 < sizeof(ws->grpc_message))
			ws->grpc_message[j++] = isprint((unsigned char)buf[i]) ? buf[i++] : (i++, '?');
		ws->grpc_message[j] = 0;
	}
	return n;
}

static struct etcd_watch *etcd_stream_find(struct etcd_client *c, int64_t id)
{
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		if (w->id == id)
			return etcd_stream_live(w) && w->sent ? w : NULL;
	return NULL;
}

/* a message too large for max_response_bytes: it belongs to one watch,
 * but which one is known only once it is read; every watch ends with
 * -EMSGSIZE (their owners resync, as after compaction) */
static void etcd_stream_oversize(struct etcd_client *c)
{
	log_debug("etcd", "watch stream: a message over %zu bytes", c->max_response_bytes);
	etcd_stream_close(c);
	for (struct etcd_watch *w = c->watches, *next; w; w = next) {
		next = w->next;
		if (!etcd_stream_live(w))
			continue;
		etcd_watch_end(w, -EMSGSIZE, w->last_rev);
		if (w->cancelled)
			etcd_watch_destroy(w);
	}
}

/* etcd_stream_over - the RPC ended (its status, or the transfer): reopen;
 * a status that says the token is no longer valid drops it first */
static void etcd_stream_over(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	log_debug("etcd", "watch stream over (grpc-status %d%s%s)", ws->grpc_status,
		  ws->grpc_message[0] ? ": " : "", ws->grpc_message);
	if (c->user && etcd_is_invalid_token(ws->grpc_status, ws->grpc_message))
		etcd_drop_token(c, ws->x.token_gen);
	etcd_stream_reopen(c, false);
}

void etcd_stream_drain(struct etcd_client *c)
{
	struct etcd_watch_stream *ws = &c->ws;
	size_t pos = 0;
	for (;;) {
		/* re-read data each round: a callback that starts a call lets
		 * curl run, which may append to (and move) the buffer */
		struct buf *b = &ws->x.resp;
		const uint8_t *msg;
		size_t msg_len, used;
		int r = etcd_grpc_frame_next((const uint8_t *)b->data + pos, b->len - pos,
					     c->max_response_bytes, &msg, &msg_len, &used);
		if (r == 0)
			break;
		if (r == -EMSGSIZE) {
			etcd_stream_oversize(c);
			return;
		}
		struct etcd_watch_msg *m = NULL;
		if (r == 1)
			r = etcd_grpc_parse_watch(msg, msg_len, &m);
		if (r < 0) {
			log_debug("etcd", "watch stream: bad message (%s)", etcd_strerror(r));
			etcd_stream_reopen(c, false);
			return;
		}
		pos += used;
		struct etcd_watch *w = etcd_stream_find(c, m->watch_id);
		int verdict = w ? etcd_watch_handle(w, m) : 1;
		etcd_watch_msg_free(m);
		if (verdict == 0) {
			etcd_stream_reopen(c, false);
			return;
		}
		if (ws->state != S_OPEN)
			return; /* a callback's cancel closed the stream */
	}
	struct buf *b = &ws->x.resp;
	if (pos == b->len)
		etcd_buf_reset(b);
	else if (pos > 0) {
		memmove(b->data, b->data + pos, b->len - pos);
		b->len -= pos;
		b->data[b->len] = 0;
	}
	if (ws->ended)
		etcd_stream_over(c);
	else if (ws->status_seen)
		etcd_stream_unpause(ws);
}

void etcd_stream_on_done(struct etcd_client *c, CURLcode rc)
{
	struct etcd_watch_stream *ws = &c->ws;
	struct xfer *x = &ws->x;
	long http = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
	log_debug("etcd", "watch stream ended: %s (HTTP %ld)",
		  rc != CURLE_OK && x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc), http);
	if (rc != CURLE_OK && etcd_is_connect_failure(x->easy, rc))
		etcd_advance_endpoint(x);
	bool oversize = x->oversize;
	etcd_xfer_detach(x);
	if (oversize) {
		etcd_stream_oversize(c);
		return;
	}
	/* deliver what arrived before the end, then reopen */
	ws->ended = true;
	ws->pending = false;
	if (http == 200)
		etcd_stream_drain(c);
	else
		etcd_stream_over(c);
}
