/* SPDX-License-Identifier: MIT */
/*
 * etcd_transport.c - the etcd client's transport: libcurl multi driven by
 * the host loop (sockets and the timer curl asks for), the pool of idle
 * easy handles, one HTTP POST attempt of a call or watch on the current
 * endpoint, curl errors and endpoint failover, and client_process, the only
 * place user callbacks run. Reading guide: etcd.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

static void etcd_transport_sock_io_cb(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct sock *sk = userdata;
	struct etcd_client *c = sk->c;
	int mask = 0, running;
	if (events & EPOLLIN)
		mask |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		mask |= CURL_CSELECT_OUT;
	if (events & (EPOLLERR | EPOLLHUP))
		mask |= CURL_CSELECT_ERR;
	/* sk may be freed inside (CURL_POLL_REMOVE): do not touch it after */
	curl_multi_socket_action(c->multi, fd, mask, &running);
	etcd_client_process(c);
}

int etcd_sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct etcd_client *c = userp;
	struct sock *sk = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (sk) {
			bool stream = sk->stream;
			loop_io_free(sk->io);
			if (sk->prev)
				sk->prev->next = sk->next;
			else
				c->socks = sk->next;
			if (sk->next)
				sk->next->prev = sk->prev;
			free(sk);
			if (stream)
				etcd_stream_socket_polled(c, false);
		}
		return 0;
	}
	uint32_t ev = 0;
	if (what & CURL_POLL_IN)
		ev |= EPOLLIN;
	if (what & CURL_POLL_OUT)
		ev |= EPOLLOUT;
	if (sk)
		return loop_io_modify(sk->io, ev) < 0 ? -1 : 0;
	sk = calloc(1, sizeof(*sk));
	if (!sk)
		return -1;
	sk->c = c;
	sk->fd = s;
	/* the stream's connection serves no other transfer (FRESH_CONNECT,
	 * FORBID_REUSE; calls are HTTP/1.1): its sockets are the stream's */
	sk->stream = easy && easy == c->ws.x.easy;
	if (loop_io_add(c->loop, s, ev, etcd_transport_sock_io_cb, sk, &sk->io) < 0) {
		free(sk);
		return -1;
	}
	sk->next = c->socks;
	if (c->socks)
		c->socks->prev = sk;
	c->socks = sk;
	curl_multi_assign(c->multi, s, sk);
	if (sk->stream)
		etcd_stream_socket_polled(c, true);
	return 0;
}

int etcd_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct etcd_client *c = userp;
	if (timeout_ms < 0)
		loop_timer_disarm(c->curl_timer);
	else
		loop_timer_arm_in(c->curl_timer, ms_to_ns((uint64_t)timeout_ms));
	return 0;
}

void etcd_curl_timer_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	etcd_client_process(c);
}

void etcd_kick_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)t;
	for (struct etcd_watch *w = c->watches, *next; w; w = next) {
		next = w->next;
		if (w->cancelled && !w->in_cb)
			c->xops->watch_destroy(w);
	}
	etcd_client_process(c);
}

static CURL *etcd_transport_easy_get(struct etcd_client *c)
{
	if (c->n_pool > 0) {
		CURL *e = c->pool[--c->n_pool];
		curl_easy_reset(e);
		return e;
	}
	return curl_easy_init();
}

static void etcd_transport_easy_put(struct etcd_client *c, CURL *e)
{
	if (!e)
		return;
	if (c->n_pool < EASY_POOL_MAX)
		c->pool[c->n_pool++] = e;
	else
		curl_easy_cleanup(e);
}

/* xfer_detach - remove x's easy from the multi handle (if attached). */
void etcd_xfer_detach(struct xfer *x)
{
	if (!x->easy)
		return;
	curl_multi_remove_handle(x->c->multi, x->easy);
	/* the stream's handle may be paused, which curl_easy_reset does not
	 * undo: a pooled one would start its next transfer paused */
	if (x->kind == XFER_STREAM)
		curl_easy_cleanup(x->easy);
	else
		etcd_transport_easy_put(x->c, x->easy);
	x->easy = NULL;
	curl_slist_free_all(x->headers);
	x->headers = NULL;
}

void etcd_xfer_release(struct xfer *x)
{
	etcd_xfer_detach(x);
	x->c->xops->wait_unlink(x);
	free(x->body);
	x->body = NULL;
	etcd_buf_reset(&x->resp);
}

static size_t etcd_transport_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct xfer *x = userdata;
	size_t n = size * nmemb;
	if (x->kind == XFER_STREAM) {
		/* cap the unparsed backlog; one message is capped in stream_drain */
		if (x->resp.len + n > x->c->max_response_bytes + 65536) {
			x->oversize = true;
			return 0;
		}
	} else if (x->resp.len + n > x->c->max_response_bytes) {
		x->oversize = true;
		return 0;
	}
	if (etcd_buf_append(&x->resp, ptr, n) < 0)
		return 0;
	if (x->kind == XFER_STREAM)
		x->c->ws.pending = true;
	return n;
}

/* every etcd connection: not inherited by processes the daemon starts
 * (plugin workers, or whatever a program embedding the client forks) */
static int etcd_transport_sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
	(void)clientp;
	(void)purpose;
	int fl = fcntl(fd, F_GETFD);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	return CURL_SOCKOPT_OK;
}

static int etcd_transport_watch_sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
	etcd_transport_sockopt_cb(clientp, fd, purpose);
	if (purpose != CURLSOCKTYPE_IPCXN)
		return CURL_SOCKOPT_OK;
	int cnt = 3;
	unsigned int user_timeout = 20000;
	/* best effort: a failure leaves the plain keepalive settings */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
	return CURL_SOCKOPT_OK;
}

/* kick - let curl start a call just added now, not one loop round later (its
 * timer callback asked for 0 ms): on a kept-alive connection the request is
 * written before the caller goes on. Never called from inside a curl
 * callback. Completions it may have produced wait for kick_timer, so user
 * callbacks still never run inside the API call. Watches are not kicked:
 * their start is not latency-critical, and when they were, bench/lh-bench.c
 * (which starts a watch, then blocks in fork and poll outside the loop, so
 * the new stream connection sits without a request) saw its `etcdctl elect`
 * reference go from 2 to 80 ms; how etcd got slower was not pinned down. */
static void etcd_transport_kick(struct etcd_client *c)
{
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	loop_timer_arm_in(c->kick_timer, 0);
}

/* etcd_transport_call_timeout - the time a call's attempt may take: what
 * is left of its deadline, at most its per-attempt time. -ETIMEDOUT once
 * the deadline passed. */
static int etcd_transport_call_timeout(const struct xfer *x, long *ret_timeout_ms)
{
	const struct etcd_call *call = (const struct etcd_call *)(const void *)x;
	uint64_t now = loop_now();
	if (now >= call->deadline)
		return -ETIMEDOUT;
	uint64_t left = call->deadline - now;
	if (call->attempt_ns && call->attempt_ns < left)
		left = call->attempt_ns;
	long ms = (long)((left + LOOP_NS_PER_MS - 1) / LOOP_NS_PER_MS);
	*ret_timeout_ms = ms < 1 ? 1 : ms;
	return 0;
}

/* etcd_transport_headers - x->headers for one attempt (x owns the list;
 * on failure what was built is left in x->headers for the caller to free).
 * Returns 0 or -ENOMEM. */
static int etcd_transport_headers(struct xfer *x)
{
	struct etcd_client *c = x->c;
	bool grpc = x->kind == XFER_STREAM;
	struct curl_slist *h = curl_slist_append(
	    NULL, grpc ? "Content-Type: application/grpc" : "Content-Type: application/json");
	if (!h)
		return -ENOMEM;
	x->headers = h;
	if (!(h = curl_slist_append(x->headers, "Expect:")))
		return -ENOMEM;
	/* gRPC's required header (the status comes in trailers), and no
	 * Transfer-Encoding, an HTTP/1.1 header that HTTP/2 forbids */
	if (grpc && (!(h = curl_slist_append(x->headers, "TE: trailers")) ||
		     !(h = curl_slist_append(x->headers, "Transfer-Encoding:"))))
		return -ENOMEM;
	/* the gateway passes Grpc-Metadata-* headers on as gRPC metadata;
	 * etcd's "hasleader" metadata makes a leaderless member refuse at once */
	if (x->kind == XFER_CALL && ((struct etcd_call *)(void *)x)->require_leader &&
	    !(h = curl_slist_append(x->headers, "Grpc-Metadata-hasleader: true")))
		return -ENOMEM;
	/* over gRPC "authorization" is metadata of the same name, which etcd
	 * reads as the token too */
	if (c->token && !x->is_auth) {
		size_t al = strlen(c->token) + sizeof("Authorization: ");
		char *ah = malloc(al);
		if (!ah)
			return -ENOMEM;
		snprintf(ah, al, "Authorization: %s", c->token);
		h = curl_slist_append(x->headers, ah);
		free(ah);
		if (!h)
			return -ENOMEM;
	}
	return 0;
}

#define SETOPT(opt, val)                                                                           \
	do {                                                                                       \
		if (cc == CURLE_OK)                                                                \
			cc = curl_easy_setopt(e, opt, val);                                        \
	} while (0)

/* etcd_transport_common_opts - what every request sets: the URL, the body,
 * the answer's sink, the endpoint's TLS files. Returns the first error. */
static CURLcode etcd_transport_common_opts(struct xfer *x, CURL *e, const char *url)
{
	struct etcd_client *c = x->c;
	CURLcode cc = CURLE_OK;
	SETOPT(CURLOPT_URL, url);
	SETOPT(CURLOPT_HTTPHEADER, x->headers);
	SETOPT(CURLOPT_POST, 1L);
	if (x->body) {
		SETOPT(CURLOPT_POSTFIELDS, x->body);
		SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
	}
	SETOPT(CURLOPT_WRITEFUNCTION, etcd_transport_write_cb);
	SETOPT(CURLOPT_WRITEDATA, x);
	SETOPT(CURLOPT_PRIVATE, x);
	x->errbuf[0] = 0;
	SETOPT(CURLOPT_ERRORBUFFER, x->errbuf);
	SETOPT(CURLOPT_NOSIGNAL, 1L);
	SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
#if LIBCURL_VERSION_NUM >= 0x075500
	SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
#else
	SETOPT(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
	if (c->cacert)
		SETOPT(CURLOPT_CAINFO, c->cacert);
	if (c->cert)
		SETOPT(CURLOPT_SSLCERT, c->cert);
	if (c->key)
		SETOPT(CURLOPT_SSLKEY, c->key);
	return cc;
}

/* etcd_transport_kind_opts - what differs between a call (HTTP/1.1 to the
 * gateway, bounded in time and size) and the watch stream (gRPC over
 * HTTP/2, a connection of its own kept alive by TCP). */
static CURLcode etcd_transport_kind_opts(struct xfer *x, CURL *e, long timeout_ms)
{
	CURLcode cc = CURLE_OK;
	if (x->kind == XFER_CALL) {
		/* never HTTP/2: a call must not be multiplexed onto the watch
		 * stream's connection, nor need curl to reuse an h2c one */
		SETOPT(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
		SETOPT(CURLOPT_SOCKOPTFUNCTION, etcd_transport_sockopt_cb);
		SETOPT(CURLOPT_SOCKOPTDATA, NULL);
		SETOPT(CURLOPT_TIMEOUT_MS, timeout_ms);
		SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->c->max_response_bytes);
		SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
		SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
	} else {
		/* h2c with prior knowledge on http://, ALPN h2 on https:// */
		bool tls = strncmp(x->c->endpoints[x->ep], "https:", 6) == 0;
		SETOPT(CURLOPT_HTTP_VERSION, tls ? (long)CURL_HTTP_VERSION_2TLS
						 : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
		SETOPT(CURLOPT_READFUNCTION, etcd_stream_read_cb);
		SETOPT(CURLOPT_READDATA, x->c);
		SETOPT(CURLOPT_HEADERFUNCTION, etcd_stream_header_cb);
		SETOPT(CURLOPT_HEADERDATA, x->c);
		/* no total timeout; dead peers are found by TCP keepalive */
		SETOPT(CURLOPT_TCP_KEEPIDLE, 10L);
		SETOPT(CURLOPT_TCP_KEEPINTVL, 3L);
		SETOPT(CURLOPT_SOCKOPTFUNCTION, etcd_transport_watch_sockopt_cb);
		SETOPT(CURLOPT_SOCKOPTDATA, NULL);
		/* the stream holds a connection of its own: never one of the
		 * calls' HTTP/1.1 connections (curl 7.88 would send the h2c
		 * preface on it), and never parked for reuse after it */
		SETOPT(CURLOPT_FRESH_CONNECT, 1L);
		SETOPT(CURLOPT_FORBID_REUSE, 1L);
	}
	return cc;
}
#undef SETOPT

/* xfer_send - start one attempt of x on the client's current endpoint.
 * Returns 0 or -errno (x is then not attached). */
int etcd_xfer_send(struct xfer *x)
{
	struct etcd_client *c = x->c;
	CURL *e = NULL;
	char *url = NULL;
	long timeout_ms = 0;
	int r;

	if (x->kind == XFER_CALL && (r = etcd_transport_call_timeout(x, &timeout_ms)) < 0)
		return r;
	r = -ENOMEM;
	x->ep = c->cur_ep;
	const char *ep = c->endpoints[x->ep];
	size_t ul = strlen(ep) + strlen(x->path) + 1;
	url = malloc(ul);
	if (!url)
		goto fail;
	snprintf(url, ul, "%s%s", ep, x->path);

	e = etcd_transport_easy_get(c);
	if (!e)
		goto fail;
	x->headers = NULL;
	if ((r = etcd_transport_headers(x)) < 0)
		goto fail;
	x->token_gen = c->token_gen;
	etcd_buf_reset(&x->resp);
	x->oversize = false;

	CURLcode cc = etcd_transport_common_opts(x, e, url);
	if (cc == CURLE_OK)
		cc = etcd_transport_kind_opts(x, e, timeout_ms);
	if (cc != CURLE_OK) {
		r = cc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
		goto fail;
	}
	/* CURLOPT_URL is copied by curl */
	free(url);
	url = NULL;
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		r = -ENOMEM;
		goto fail;
	}
	x->easy = e;
	if (x->kind == XFER_CALL)
		etcd_transport_kick(c);
	return 0;
fail:
	free(url);
	curl_slist_free_all(x->headers);
	x->headers = NULL;
	etcd_transport_easy_put(c, e);
	return r;
}

bool etcd_is_connect_failure(CURL *e, CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return true;
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR: {
		long sent = 0;
		if (curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent) != CURLE_OK)
			return false;
		return sent == 0;
	}
	default:
		return false;
	}
}

/* the TLS setup failed on our side: the peer's certificate not trusted, a
 * TLS file that cannot be read, a key that does not fit, no common cipher.
 * Not CURLE_SSL_CONNECT_ERROR: curl also gives that for a peer that closes
 * during the handshake (etcd restarting, a balancer without backends),
 * which is a connection failure like any other. */
static bool etcd_transport_is_tls_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
#if LIBCURL_VERSION_NUM >= 0x074d00
	case CURLE_SSL_CLIENTCERT:
#endif
		return true;
	default:
		return false;
	}
}

int etcd_curl_to_errno(struct xfer *x, CURLcode rc)
{
	if (etcd_transport_is_tls_error(rc))
		return -EKEYREJECTED;
	switch (rc) {
	case CURLE_OK:
		return 0;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_WRITE_ERROR:
	case CURLE_FILESIZE_EXCEEDED:
		return x->oversize || rc == CURLE_FILESIZE_EXCEEDED ? -EMSGSIZE : -ENOMEM;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return -ECONNREFUSED;
	default:
		return -EIO;
	}
}

/* advance_endpoint - the endpoint of x failed: move the client on (once). */
void etcd_advance_endpoint(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (c->cur_ep == x->ep) {
		c->cur_ep = (c->cur_ep + 1) % c->n_endpoints;
		log_debug("etcd", "endpoint %s failed, now using %s", c->endpoints[x->ep],
			  c->endpoints[c->cur_ep]);
	}
}

void etcd_client_process(struct etcd_client *c)
{
	if (c->processing)
		return; /* a callback ran the loop recursively: the outer pass continues */
	c->processing = true;
	for (;;) {
		if (c->ws.pending) {
			c->ws.pending = false;
			c->xops->stream_drain(c); /* may free watches */
			continue;
		}
		CURLMsg *msg;
		int left;
		msg = curl_multi_info_read(c->multi, &left);
		if (!msg)
			break;
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *e = msg->easy_handle;
		CURLcode rc = msg->data.result;
		char *priv = NULL;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, &priv);
		struct xfer *x = (struct xfer *)(void *)priv;
		if (!x)
			continue;
		if (x->kind == XFER_CALL)
			c->xops->call_done((struct etcd_call *)(void *)x, rc);
		else
			c->xops->stream_done(c, rc);
	}
	c->processing = false;
}
