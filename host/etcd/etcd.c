/* SPDX-License-Identifier: MIT */
/*
 * etcd.c - the asynchronous etcd v3 client: libcurl multi on the host loop.
 * This file: creating and freeing a client, and its accessors.
 *
 * Reading guide (the files of the client; all share etcd_internal.h, which
 * holds the structs and the contracts between the pieces)
 * - etcd.c (this file): etcd_client_new / _free, the design notes below.
 * - etcd_transport.c: curl <-> loop glue (sockets, timer, kick), the easy
 *   handle pool, one attempt of a transfer (xfer_send: URL, headers, TLS,
 *   timeouts), curl errors and endpoint failover, and client_process, the
 *   one place user callbacks run. It reaches the files above it only
 *   through the client's struct etcd_xfer_ops (set here).
 * - etcd_auth.c: the token: one authenticate call for all waiters, the wait
 *   list, dropping a rejected token.
 * - etcd_call.c: calls (a deadline, attempts moved to another endpoint,
 *   one re-authentication) and the KV, txn, lease and compaction API.
 * - etcd_watch.c: one watch (resume without duplicates, compaction,
 *   cancellation, idle detection).
 * - etcd_watch_stream.c: the client's one gRPC watch stream, on which
 *   every watch is a watch id (open, reopen with backoff, demultiplex).
 * - etcd_grpc_watch.c: its codec (gRPC framing, WatchRequest out,
 *   WatchResponse in).
 * - etcd_json.c, etcd_json_request.c, etcd_json_response.c: the JSON
 *   gateway's codec (primitives, request bodies, unary answers).
 * - etcd_values.c: helpers over the plain data types of etcd.h.
 *
 * Design notes
 * - One CURLM per client. curl tells us which sockets to watch
 *   (CURLMOPT_SOCKETFUNCTION -> loop_io_add/modify/free) and when to call it
 *   back (CURLMOPT_TIMERFUNCTION -> one loop_timer). Every loop event ends in
 *   curl_multi_socket_action() followed by client_process(), which is the ONLY
 *   place user callbacks run: never inside a curl callback, never inside the
 *   API call that started a request. The multi handle keeps the connection
 *   cache, so requests reuse keep-alive connections; idle easy handles are
 *   pooled.
 * - A transfer (struct xfer) is one HTTP POST; a call (struct etcd_call) and
 *   the watch stream (struct etcd_watch_stream) each embed one. A transfer that needs a token
 *   and has none waits on the client's auth wait list; a single authenticate
 *   call serves all waiters.
 * - Deadlines: a call has an absolute deadline; each attempt (failover, retry
 *   after re-authentication) gets CURLOPT_TIMEOUT_MS = time left. A connection
 *   failure (refused, DNS, connect timeout, TLS handshake, nothing sent) moves
 *   the client to the next endpoint and retries there, at most once per
 *   endpoint; anything else after the request may have been sent is final.
 * - Watches: the stream's write callback only appends bytes;
 *   client_process() cuts them into gRPC messages and hands each to the
 *   watch its watch id names. Resume point = last delivered event revision
 *   + 1 (or the created/progress header revision + 1); events below it are
 *   dropped, so a reopened stream never duplicates. A stream that ends,
 *   ends with a status or sends garbage is reopened with backoff 50 ms
 *   doubling to 2 s (reset when a watch is created), every watch from its
 *   own resume point. Compaction ends its watch with -ERANGE once.
 * - A dead stream connection: no total timeout; TCP keepalive (idle 10 s,
 *   interval 3 s, 3 probes) plus TCP_USER_TIMEOUT 20 s on its socket,
 *   so a silent peer is noticed within ~20 s and the watch reconnects. A
 *   hung server (the socket alive, nothing said) is caught only on watches
 *   with ETCD_WATCH_PROGRESS_NOTIFY when etcd_config.watch_idle_timeout_ms
 *   is set (the client cannot know the server's notify interval, 10 min by
 *   default): silence that long drops the stream and moves to the next
 *   endpoint.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

static char *etcd_xstrdup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

/* the transport's way up into calls, watches and the auth wait list */
static const struct etcd_xfer_ops xfer_ops = {
	.call_done = etcd_call_on_done,
	.stream_done = etcd_stream_on_done,
	.stream_drain = etcd_stream_drain,
	.watch_destroy = etcd_watch_destroy,
	.wait_unlink = etcd_wait_unlink,
};

int etcd_client_new(struct loop *l, const struct etcd_config *cfg, struct etcd_client **ret_client)
{
	int r = -ENOMEM;
	bool fail = false;
	if (!l || !cfg || !cfg->endpoints || cfg->n_endpoints == 0)
		return -EINVAL;
	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		if (!cfg->endpoints[i] || (strncmp(cfg->endpoints[i], "http://", 7) != 0 &&
					   strncmp(cfg->endpoints[i], "https://", 8) != 0))
			return -EINVAL;
	}
	if (cfg->user && strchr(cfg->user, '\n'))
		return -EINVAL;
	static bool curl_inited;
	if (!curl_inited) {
		/* first client is created before any thread uses curl */
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return -ENOMEM;
		curl_inited = true;
	}
	struct etcd_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->xops = &xfer_ops;
	c->loop = l;
	c->endpoints = calloc(cfg->n_endpoints, sizeof(*c->endpoints));
	if (!c->endpoints)
		goto fail;
	c->n_endpoints = cfg->n_endpoints;
	for (size_t i = 0; i < cfg->n_endpoints; i++) {
		size_t n = strlen(cfg->endpoints[i]);
		while (n > 0 && cfg->endpoints[i][n - 1] == '/')
			n--;
		c->endpoints[i] = strndup(cfg->endpoints[i], n);
		if (!c->endpoints[i])
			goto fail;
	}
	c->cacert = etcd_xstrdup_or_null(cfg->cacert, &fail);
	c->cert = etcd_xstrdup_or_null(cfg->cert, &fail);
	c->key = etcd_xstrdup_or_null(cfg->key, &fail);
	c->user = etcd_xstrdup_or_null(cfg->user, &fail);
	c->password = etcd_xstrdup_or_null(cfg->password, &fail);
	if (fail)
		goto fail;
	c->request_timeout_ms =
	    cfg->request_timeout_ms ? cfg->request_timeout_ms : DEFAULT_REQUEST_TIMEOUT_MS;
	c->connect_timeout_ms =
	    cfg->connect_timeout_ms ? cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	c->max_response_bytes =
	    cfg->max_response_bytes ? cfg->max_response_bytes : DEFAULT_MAX_RESPONSE;
	c->watch_idle_timeout_ms = cfg->watch_idle_timeout_ms;
	r = loop_timer_new(l, etcd_curl_timer_fired, c, &c->curl_timer);
	if (r < 0)
		goto fail;
	r = loop_timer_new(l, etcd_kick_fired, c, &c->kick_timer);
	if (r < 0)
		goto fail;
	if ((r = etcd_stream_init(c)) < 0)
		goto fail;
	r = -ENOMEM;
	c->multi = curl_multi_init();
	if (!c->multi)
		goto fail;
	if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, etcd_sock_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, etcd_timer_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 32L) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			      (long)ETCD_MAX_HOST_CONNECTIONS) != CURLM_OK)
		goto fail;
	*ret_client = c;
	return 0;
fail:
	etcd_client_free(c);
	return r;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	while (c->watches) {
		log_debug("etcd", "client freed with a live watch; cancelling it");
		etcd_watch_destroy(c->watches);
	}
	while (c->calls)
		etcd_call_cancel(c->calls);
	if (c->auth_call) {
		etcd_call_free(c->auth_call);
		c->auth_call = NULL;
	}
	etcd_stream_free(c);
	for (size_t i = 0; i < c->n_pool; i++)
		curl_easy_cleanup(c->pool[i]);
	c->n_pool = 0;
	if (c->multi)
		curl_multi_cleanup(c->multi);
	while (c->socks) {
		struct sock *sk = c->socks;
		c->socks = sk->next;
		loop_io_free(sk->io);
		free(sk);
	}
	loop_timer_free(c->curl_timer);
	loop_timer_free(c->kick_timer);
	for (size_t i = 0; i < c->n_endpoints && c->endpoints; i++)
		free(c->endpoints[i]);
	free(c->endpoints);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c->user);
	if (c->password)
		explicit_bzero(c->password, strlen(c->password));
	free(c->password);
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	free(c->token);
	free(c);
}

void etcd_client_set_observer(struct etcd_client *c, const struct etcd_observer_ops *ops, void *ud)
{
	c->observer = ops;
	c->observer_ud = ud;
}

bool etcd_err_unreachable(int err)
{
	return err == -ECONNREFUSED || err == -ETIMEDOUT || err == -EAGAIN;
}

bool etcd_client_unreachable(const struct etcd_client *c)
{
	return c->unreachable;
}

const char *etcd_client_last_failure(const struct etcd_client *c)
{
	return c->last_failure;
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->endpoints[c->cur_ep];
}

uint64_t etcd_client_auth_count(const struct etcd_client *c)
{
	return c->n_auth;
}
