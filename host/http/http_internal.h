/* SPDX-License-Identifier: MIT */
/*
 * http_internal.h - what the server's files share (http.c: the probes and
 * the snapshot; http_api.c: the dashboard page and /api/v1/).
 */
#ifndef LH_HTTP_INTERNAL_H
#define LH_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "http/http.h"

struct http_server {
	struct http_guard *guard;
	nng_http_server *srv;
	nng_url *url;
	uint64_t stale_after_ns;
	/* guards snap, the snapshots' refs and api_fn/api_ud: held for a swap,
	 * a copy or a count, never longer */
	pthread_mutex_t mu;
	struct http_snapshot *snap;
	http_api_fn api_fn;
	void *api_ud;
};

/* http_snap_get - a reference on the current snapshot (NULL: none yet);
 * give it back with http_snap_put. Any thread. */
struct http_snapshot *http_snap_get(struct http_server *s);
/* http_snap_put - drop a reference; the last one frees. Accepts NULL. */
void http_snap_put(struct http_server *s, struct http_snapshot *snap);
/* why the current snapshot cannot be trusted (NULL: it can); under s->mu */
const char *http_stale_reason(struct http_server *s, char *buf, size_t len);

struct http_server *http_server_of(nng_aio *aio);
/* http_finish - hand res to nng (rv 0) or drop it and fail the request */
void http_finish(nng_aio *aio, nng_http_res *res, int rv);
/* http_reply - finish aio with status and a body (copied) of type ctype */
void http_reply(nng_aio *aio, uint16_t status, const char *ctype, const char *body, size_t len);
/* http_add_handler - GET handler cb for path (tree: and below it) */
int http_add_handler(struct http_server *s, const char *path, void (*cb)(nng_aio *), bool tree);

/* http_api_add_handlers - the page at / and /api/v1/ (http_api.c) */
int http_api_add_handlers(struct http_server *s);

/* the page (dashboard.html, embedded at build time: http_dashboard.c) */
extern const unsigned char http_dashboard_html[];
extern const size_t http_dashboard_html_len;

#endif
