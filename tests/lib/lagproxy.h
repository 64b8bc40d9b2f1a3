/* SPDX-License-Identifier: MIT */
/*
 * lagproxy.h - an in-process TCP proxy for tests that makes one etcd client
 * lag: it forwards 127.0.0.1:<free port> to one etcd URL (plain http) and
 * understands just enough HTTP/1.1 (request Content-Length, response
 * Content-Length / chunked / until-close) and HTTP/2 (frames, and the gRPC
 * WatchResponses in DATA frames) to
 *   - hold the watch stream: bytes from etcd to the client on the
 *     connection that opened with the HTTP/2 preface (the client's gRPC
 *     watch stream) are buffered (whole frames) while held; releasing
 *     flushes them in order, all or up to a given message;
 *   - cut one txn reply: the next POST /v3/kv/txn is forwarded to etcd, its
 *     response is swallowed and the client gets a bare status line and a
 *     closed connection (an error after the request was sent: unknown
 *     outcome);
 *   - hold replies: complete responses on the other connections are buffered
 *     while held (a call that stays in flight), released in order.
 * Everything else flows through unchanged.
 *
 * The proxy runs on its own pthread (poll). Every control below may be called
 * from any thread at any time; the effect is in place when the call returns
 * (bytes released are written by the proxy thread right after).
 * Input is treated as untrusted: bounded buffers and header sizes; a
 * connection that sends something the proxy cannot parse is closed.
 */
#ifndef LH_TEST_LAGPROXY_H
#define LH_TEST_LAGPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lagproxy;

/* lagproxy_new - listen on 127.0.0.1:<free port>, forward to upstream_url
 * ("http://HOST:PORT", a trailing '/' allowed). Returns 0 or -errno. */
int lagproxy_new(const char *upstream_url, struct lagproxy **ret);
/* stop the thread, close every connection, free */
void lagproxy_free(struct lagproxy *p);

/* "http://127.0.0.1:PORT" (borrowed, lives as long as p) */
const char *lagproxy_url(const struct lagproxy *p);

/* hold (true) or release (false) the watch streams; releasing flushes every
 * held byte in order */
void lagproxy_hold_watch(struct lagproxy *p, bool hold);

/* lagproxy_release_watch_created / _through_rev - while held: release
 * the held frames of the first watch connection holding a frame that
 * completes a WatchResponse with `created` set / with an event of
 * mod_revision >= rev, through that frame; the rest stays held. Returns
 * true when released, false when no held frame is such (yet): nothing is
 * released then. */
bool lagproxy_release_watch_created(struct lagproxy *p);
bool lagproxy_release_watch_through_rev(struct lagproxy *p, int64_t rev);

/* hold (true) or release (false) complete responses on non-watch
 * connections. A txn reply to be cut is swallowed as soon as etcd sent it
 * (txn_cut counts it), but while held the client sees the cut (status line,
 * close) only at the release, behind the replies held before it. */
void lagproxy_hold_replies(struct lagproxy *p, bool hold);

/* the next POST /v3/kv/txn request is forwarded, its response cut */
void lagproxy_drop_next_txn_reply(struct lagproxy *p);

struct lagproxy_stats {
	unsigned connections;       /* accepted so far */
	unsigned watch_connections; /* connections that carried a watch */
	unsigned txn_doomed;        /* txn requests forwarded whose reply is to be cut */
	unsigned txn_cut;           /* txn replies cut */
	size_t watch_held_bytes;    /* watch bytes held right now */
	size_t replies_held_bytes;  /* reply bytes held right now */
};
void lagproxy_get_stats(struct lagproxy *p, struct lagproxy_stats *ret);

#endif
