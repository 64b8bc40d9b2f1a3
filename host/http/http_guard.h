/* SPDX-License-Identifier: MIT */
/*
 * http_guard.h - the public side of the HTTP endpoint: a front that takes
 * connections on --http ADDR:PORT, reads each request head under strict
 * limits and hands only a validated, minimal request to nng's HTTP server
 * (http.c) on a loopback port of its own, then relays the answer.
 *
 * Design notes
 * - Why a front: nng 1.5.2's server (read in its source) has no deadline
 *   for reading a request, and stores every header line it is sent (adding
 *   a header scans all earlier ones and a repeated one is re-concatenated),
 *   so one client could hold connections forever or burn nng's shared
 *   worker threads (which the control socket and the plugin buses use too).
 *   The front bounds all of that before nng sees a byte.
 * - One thread, epoll, non-blocking sockets. Per connection: the request
 *   head must arrive within head_timeout_ms and fit max_head bytes and
 *   max_lines lines; the request line must be METHOD SP /TARGET SP HTTP/1.x
 *   with printable ASCII. Otherwise the front answers 408, 431 or 400 and
 *   closes. The request passed on is only "METHOD TARGET HTTP/1.1" with a
 *   Host and "Connection: close": client headers and any body are dropped
 *   (the endpoint has no use for them). One request per connection.
 * - The exchange with nng is a blocking loopback round trip with a 2 s
 *   timeout (nng answers from a snapshot, in microseconds); the answer is
 *   written to the client without blocking, within write_timeout_ms.
 * - At most max_conns connections at once; more are answered 503 and
 *   closed at once.
 * - The dashboard's live update: a valid GET /api/v1/events?since=N whose
 *   N is not behind the generation (http_guard_set_generation) is held,
 *   costing its connection and nothing else, until the generation passes
 *   N or HTTP_EVENTS_WAIT_MS pass; then it is passed on like any other.
 *   Held requests count against max_conns.
 * - The loop thread is never involved.
 * - nng's own listener stays on 127.0.0.1 (an ephemeral port): a local
 *   process can still reach it directly; the front protects the address
 *   the operator exposes.
 */
#ifndef LH_HTTP_GUARD_H
#define LH_HTTP_GUARD_H

#include <stddef.h>
#include <stdint.h>

struct http_guard;

struct http_guard_limits {
	size_t max_head;           /* bytes of request line + headers; 0 = 8192 */
	unsigned max_lines;        /* header lines; 0 = 64 */
	uint32_t head_timeout_ms;  /* 0 = 5000 */
	uint32_t write_timeout_ms; /* 0 = 10000 */
	unsigned max_conns;        /* 0 = 64 */
};

/* http_guard_new - listen on host:port (host: a name or numeric address,
 * IPv6 without brackets; port "0" = any) and forward to 127.0.0.1:backend.
 * limits may be NULL (defaults). Starts its thread. Returns 0 or -errno
 * with a message in err. */
int http_guard_new(const char *host, const char *port, int http_backend_port,
                   const struct http_guard_limits *limits, struct http_guard **ret, char *err,
                   size_t err_len);
/* http_guard_port - the TCP port it listens on */
int http_guard_port(const struct http_guard *g);
/* http_guard_set_generation - the dashboard data's generation moved to
 * generation: answer the held events requests it passes. Any thread. */
void http_guard_set_generation(struct http_guard *g, uint64_t generation);
/* http_guard_free - stop the thread, close every connection. Accepts NULL. */
void http_guard_free(struct http_guard *g);

#endif
