/*
 * etcd.c - the asynchronous etcd v3 client: libcurl multi on the host loop.
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
 * - A transfer (struct xfer) is one HTTP POST; a call (struct etcd_call) and a
 *   watch (struct etcd_watch) each embed one. A transfer that needs a token
 *   and has none waits on the client's auth wait list; a single authenticate
 *   call serves all waiters.
 * - Deadlines: a call has an absolute deadline; each attempt (failover, retry
 *   after re-authentication) gets CURLOPT_TIMEOUT_MS = time left. A connection
 *   failure (refused, DNS, connect timeout, TLS handshake, nothing sent) moves
 *   the client to the next endpoint and retries there, at most once per
 *   endpoint; anything else after the request may have been sent is final.
 * - Watches: the write callback only appends bytes; client_process() parses
 *   them with a json_tokener that survives chunk boundaries and delivers them.
 *   Resume point = last delivered event revision + 1 (or the created/progress
 *   header revision + 1); events below it are dropped, so a reconnect never
 *   duplicates. A stream that ends, errors in-band or sends garbage is
 *   reconnected with backoff 50 ms doubling to 2 s (reset when a stream is
 *   created). Compaction ends the watch with -ERANGE once.
 * - Dead watch connections: no total timeout; TCP keepalive (idle 10 s,
 *   interval 3 s, 3 probes) plus TCP_USER_TIMEOUT 20 s on the watch socket,
 *   so a silent peer is noticed within ~20 s and the watch reconnects. (Idle
 *   detection from progress notifications is not used: the client does not
 *   know the server's notify interval, 10 min by default.)
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "etcd.h"
#include "etcd_internal.h"
#include "log.h"

#define DEFAULT_REQUEST_TIMEOUT_MS 5000u
#define DEFAULT_CONNECT_TIMEOUT_MS 1000u
#define DEFAULT_MAX_RESPONSE (64u * 1024u * 1024u)
#define WATCH_BACKOFF_MIN_MS 50u
#define WATCH_BACKOFF_MAX_MS 2000u
#define EASY_POOL_MAX 8

struct etcd_client;

struct sock {
	struct loop_io *io;
	struct etcd_client *c;
	curl_socket_t fd;
	struct sock *prev, *next;
};

struct buf {
	char *data;
	size_t len, cap;
};

enum xfer_kind { XFER_CALL, XFER_WATCH };

/* One HTTP POST. Owned by its call or watch. */
struct xfer {
	enum xfer_kind kind;
	struct etcd_client *c;
	CURL *easy; /* non-NULL while attached to the multi handle */
	struct curl_slist *headers;
	const char *path; /* static string */
	char *body;	  /* owned */
	struct buf resp;
	bool oversize;
	bool is_auth;		    /* the authenticate call: never waits for a token */
	bool waiting_auth;	    /* on c's auth wait list */
	size_t ep;		    /* endpoint of the current attempt */
	size_t ep_tries;	    /* attempts that failed to connect */
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's text for the last failure */
	uint64_t token_gen;	    /* token generation sent with the current attempt */
	struct xfer *wprev, *wnext; /* auth wait list */
};

struct etcd_call {
	struct xfer x;
	const char *kind; /* etcd_json_parse_response kind; static */
	etcd_cb cb;
	void *ud;
	uint64_t deadline;
	uint64_t attempt_ns;	 /* 0: one attempt to the deadline (etcd_call_opts) */
	bool require_leader;
	size_t unavailable_tries; /* "unavailable" answers already moved on from */
	uint64_t started; /* loop_now() at the call, for the observer */
	bool reauthed;
	struct etcd_call *prev, *next; /* c->calls */
};

enum watch_state { W_CONNECTING, W_BACKOFF, W_DONE };

struct etcd_watch {
	struct xfer x;
	uint8_t *key, *range_end;
	size_t key_len, range_end_len;
	unsigned flags;
	etcd_watch_cb cb;
	void *ud;
	enum watch_state state;
	int64_t next_rev; /* resume from here; 0 = "now" (not known yet) */
	int64_t last_rev; /* etcd_watch_revision() */
	bool created;
	bool pending;	   /* raw bytes wait in x.resp */
	bool stream_ended; /* the transfer finished; reconnect after draining */
	bool in_cb;
	bool cancelled;
	bool reauthed; /* an invalid-token answer already dropped the token */
	uint32_t backoff_ms;
	struct json_tokener *tok;
	size_t tok_bytes; /* bytes fed to tok since the last complete message */
	struct loop_timer *timer;
	struct loop_timer *idle;	/* progress-notify idle detection, or NULL */
	struct etcd_watch *prev, *next; /* c->watches */
};

struct etcd_client {
	struct loop *loop;
	CURLM *multi;
	struct loop_timer *curl_timer;
	struct loop_timer *kick_timer; /* after kick(): reap cancelled watches, completions */
	struct sock *socks;
	char **endpoints;
	size_t n_endpoints, cur_ep;
	char *cacert, *cert, *key, *user, *password;
	uint32_t request_timeout_ms, connect_timeout_ms;
	size_t max_response_bytes;
	uint32_t watch_idle_timeout_ms;
	char *token;
	uint64_t token_gen;
	uint64_t n_auth;
	struct etcd_call *auth_call;
	struct xfer *wait_head, *wait_tail;
	struct etcd_call *calls;
	struct etcd_watch *watches;
	CURL *pool[EASY_POOL_MAX];
	size_t n_pool;
	bool processing;
	const struct etcd_observer_ops *observer;
	void *observer_ud;
};

static void client_process(struct etcd_client *c);
static void xfer_submit(struct xfer *x);
static void watch_schedule_reconnect(struct etcd_watch *w);
static void watch_destroy(struct etcd_watch *w);
static void watch_on_done(struct etcd_watch *w, CURLcode rc);
static void call_on_done(struct etcd_call *call, CURLcode rc);
static void call_finish(struct etcd_call *call, int err, const struct etcd_response *resp);

/* ---- small utils ---- */

static char *xstrdup_or_null(const char *s, bool *fail)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

static void buf_reset(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int buf_append(struct buf *b, const void *p, size_t n)
{
	if (n > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

static uint64_t ms_to_ns(uint64_t ms)
{
	return ms * LOOP_NS_PER_MS;
}

/* ---- curl <-> loop glue ---- */

static void sock_io_cb(struct loop_io *io, int fd, uint32_t events, void *userdata)
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
	client_process(c);
}

static int sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct etcd_client *c = userp;
	struct sock *sk = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (sk) {
			loop_io_free(sk->io);
			if (sk->prev)
				sk->prev->next = sk->next;
			else
				c->socks = sk->next;
			if (sk->next)
				sk->next->prev = sk->prev;
			free(sk);
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
	if (loop_io_add(c->loop, s, ev, sock_io_cb, sk, &sk->io) < 0) {
		free(sk);
		return -1;
	}
	sk->next = c->socks;
	if (c->socks)
		c->socks->prev = sk;
	c->socks = sk;
	curl_multi_assign(c->multi, s, sk);
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct etcd_client *c = userp;
	if (timeout_ms < 0)
		loop_timer_disarm(c->curl_timer);
	else
		loop_timer_arm_in(c->curl_timer, ms_to_ns((uint64_t)timeout_ms));
	return 0;
}

static void curl_timer_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	client_process(c);
}

static void kick_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)t;
	for (struct etcd_watch *w = c->watches, *next; w; w = next) {
		next = w->next;
		if (w->cancelled && !w->in_cb)
			watch_destroy(w);
	}
	client_process(c);
}

/* ---- easy handles ---- */

static CURL *easy_get(struct etcd_client *c)
{
	if (c->n_pool > 0) {
		CURL *e = c->pool[--c->n_pool];
		curl_easy_reset(e);
		return e;
	}
	return curl_easy_init();
}

static void easy_put(struct etcd_client *c, CURL *e)
{
	if (!e)
		return;
	if (c->n_pool < EASY_POOL_MAX)
		c->pool[c->n_pool++] = e;
	else
		curl_easy_cleanup(e);
}

/* xfer_detach - remove x's easy from the multi handle (if attached). */
static void xfer_detach(struct xfer *x)
{
	if (!x->easy)
		return;
	curl_multi_remove_handle(x->c->multi, x->easy);
	easy_put(x->c, x->easy);
	x->easy = NULL;
	curl_slist_free_all(x->headers);
	x->headers = NULL;
}

static void wait_unlink(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (!x->waiting_auth)
		return;
	if (x->wprev)
		x->wprev->wnext = x->wnext;
	else
		c->wait_head = x->wnext;
	if (x->wnext)
		x->wnext->wprev = x->wprev;
	else
		c->wait_tail = x->wprev;
	x->wprev = x->wnext = NULL;
	x->waiting_auth = false;
}

static void xfer_release(struct xfer *x)
{
	xfer_detach(x);
	wait_unlink(x);
	free(x->body);
	x->body = NULL;
	buf_reset(&x->resp);
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct xfer *x = userdata;
	size_t n = size * nmemb;
	if (x->kind == XFER_WATCH && ((struct etcd_watch *)(void *)x)->cancelled)
		return n; /* cancelled, waiting to be reaped: nobody reads it */
	if (x->kind == XFER_WATCH) {
		/* cap the unparsed backlog; one message is capped in watch_drain */
		if (x->resp.len + n > x->c->max_response_bytes + 65536) {
			x->oversize = true;
			return 0;
		}
	} else if (x->resp.len + n > x->c->max_response_bytes) {
		x->oversize = true;
		return 0;
	}
	if (buf_append(&x->resp, ptr, n) < 0)
		return 0;
	if (x->kind == XFER_WATCH)
		((struct etcd_watch *)(void *)x)->pending = true;
	return n;
}

/* every etcd connection: not inherited by processes the daemon starts
 * (plugin workers, or whatever a program embedding the client forks) */
static int sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
	(void)clientp;
	(void)purpose;
	int fl = fcntl(fd, F_GETFD);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	return CURL_SOCKOPT_OK;
}

static int watch_sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
	sockopt_cb(clientp, fd, purpose);
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
static void kick(struct etcd_client *c)
{
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	loop_timer_arm_in(c->kick_timer, 0);
}

/* xfer_send - start one attempt of x on the client's current endpoint.
 * Returns 0 or -errno (x is then not attached). */
static int xfer_send(struct xfer *x)
{
	struct etcd_client *c = x->c;
	CURL *e = NULL;
	char *url = NULL;
	int r = -ENOMEM;
	long timeout_ms = 0;

	if (x->kind == XFER_CALL) {
		struct etcd_call *call = (struct etcd_call *)(void *)x;
		uint64_t now = loop_now();
		if (now >= call->deadline)
			return -ETIMEDOUT;
		uint64_t left = call->deadline - now;
		if (call->attempt_ns && call->attempt_ns < left)
			left = call->attempt_ns;
		timeout_ms = (long)((left + LOOP_NS_PER_MS - 1) / LOOP_NS_PER_MS);
		if (timeout_ms < 1)
			timeout_ms = 1;
	}
	x->ep = c->cur_ep;
	const char *ep = c->endpoints[x->ep];
	size_t ul = strlen(ep) + strlen(x->path) + 1;
	url = malloc(ul);
	if (!url)
		goto fail;
	snprintf(url, ul, "%s%s", ep, x->path);

	e = easy_get(c);
	if (!e)
		goto fail;
	x->headers = NULL;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (!h)
		goto fail;
	x->headers = h;
	if (!(h = curl_slist_append(x->headers, "Expect:")))
		goto fail;
	/* the gateway passes Grpc-Metadata-* headers on as gRPC metadata;
	 * etcd's "hasleader" metadata makes a leaderless member refuse at once */
	if (x->kind == XFER_CALL && ((struct etcd_call *)(void *)x)->require_leader &&
	    !(h = curl_slist_append(x->headers, "Grpc-Metadata-hasleader: true")))
		goto fail;
	if (c->token && !x->is_auth) {
		size_t al = strlen(c->token) + sizeof("Authorization: ");
		char *ah = malloc(al);
		if (!ah)
			goto fail;
		snprintf(ah, al, "Authorization: %s", c->token);
		h = curl_slist_append(x->headers, ah);
		free(ah);
		if (!h)
			goto fail;
	}
	x->token_gen = c->token_gen;
	buf_reset(&x->resp);
	x->oversize = false;

	CURLcode cc = CURLE_OK;
#define SETOPT(opt, val)                                                                           \
	do {                                                                                       \
		if (cc == CURLE_OK)                                                                \
			cc = curl_easy_setopt(e, opt, val);                                        \
	} while (0)
	SETOPT(CURLOPT_URL, url);
	SETOPT(CURLOPT_HTTPHEADER, x->headers);
	SETOPT(CURLOPT_POST, 1L);
	SETOPT(CURLOPT_POSTFIELDS, x->body);
	SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
	SETOPT(CURLOPT_WRITEFUNCTION, write_cb);
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
	if (x->kind == XFER_CALL) {
		SETOPT(CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
		SETOPT(CURLOPT_SOCKOPTDATA, NULL);
		SETOPT(CURLOPT_TIMEOUT_MS, timeout_ms);
		SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_response_bytes);
		SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
		SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
	} else {
		/* no total timeout; dead peers are found by TCP keepalive */
		SETOPT(CURLOPT_TCP_KEEPIDLE, 10L);
		SETOPT(CURLOPT_TCP_KEEPINTVL, 3L);
		SETOPT(CURLOPT_SOCKOPTFUNCTION, watch_sockopt_cb);
		SETOPT(CURLOPT_SOCKOPTDATA, NULL);
		/* a watch holds its connection; do not park it for reuse */
		SETOPT(CURLOPT_FORBID_REUSE, 1L);
	}
#undef SETOPT
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
		kick(c);
	return 0;
fail:
	free(url);
	curl_slist_free_all(x->headers);
	x->headers = NULL;
	easy_put(c, e);
	return r;
}

/* ---- auth ---- */

static void auth_done(struct etcd_client *c, int err);

static void wait_push(struct xfer *x)
{
	struct etcd_client *c = x->c;
	x->waiting_auth = true;
	x->wnext = NULL;
	x->wprev = c->wait_tail;
	if (c->wait_tail)
		c->wait_tail->wnext = x;
	else
		c->wait_head = x;
	c->wait_tail = x;
}

static struct etcd_call *call_alloc(struct etcd_client *c, const char *kind, const char *path,
				    char *body, const struct etcd_call_opts *o, etcd_cb cb,
				    void *ud)
{
	struct etcd_call *call = calloc(1, sizeof(*call));
	if (!call)
		return NULL;
	call->x.kind = XFER_CALL;
	call->x.c = c;
	call->x.path = path;
	call->x.body = body;
	call->kind = kind;
	call->cb = cb;
	call->ud = ud;
	uint32_t t = o && o->timeout_ms ? o->timeout_ms : c->request_timeout_ms;
	call->started = loop_now();
	call->deadline = call->started + ms_to_ns(t);
	if (o) {
		call->attempt_ns = ms_to_ns(o->attempt_timeout_ms);
		call->require_leader = o->require_leader;
	}
	return call;
}

static void call_free(struct etcd_call *call)
{
	xfer_release(&call->x);
	free(call);
}

static void call_link(struct etcd_call *call)
{
	struct etcd_client *c = call->x.c;
	call->prev = NULL;
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
}

static void call_unlink(struct etcd_call *call)
{
	struct etcd_client *c = call->x.c;
	if (call->prev)
		call->prev->next = call->next;
	else if (c->calls == call)
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	call->prev = call->next = NULL;
}

/* auth_start - send the authenticate call unless one is in flight. */
static int auth_start(struct etcd_client *c)
{
	if (c->auth_call)
		return 0;
	char *body = NULL;
	int r = etcd_json_auth_req(c->user, c->password, &body);
	if (r < 0)
		return r;
	struct etcd_call *call =
	    call_alloc(c, "authenticate", "/v3/auth/authenticate", body, NULL, NULL, NULL);
	if (!call) {
		free(body);
		return -ENOMEM;
	}
	call->x.is_auth = true;
	r = xfer_send(&call->x);
	if (r < 0) {
		call_free(call);
		return r;
	}
	c->auth_call = call;
	return 0;
}

/* xfer_fail - a transfer could not be (re)started: report err to its owner. */
static void xfer_fail(struct xfer *x, int err)
{
	if (x->kind == XFER_CALL)
		call_finish((struct etcd_call *)(void *)x, err, NULL);
	else {
		struct etcd_watch *w = (struct etcd_watch *)(void *)x;
		if (err == -EACCES) {
			/* wrong credentials: permanent */
			w->state = W_DONE;
			w->in_cb = true;
			w->cb(w, -EACCES, 0, NULL, 0, w->ud);
			w->in_cb = false;
			if (w->cancelled)
				watch_destroy(w);
		} else
			watch_schedule_reconnect(w);
	}
}

/* xfer_submit - send now, or wait for a token. Called from the loop only
 * (or from an API call for a fresh call, where failures are returned). */
static void xfer_submit(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (c->user && !x->is_auth && !c->token) {
		wait_push(x);
		int r = auth_start(c);
		if (r < 0) {
			wait_unlink(x);
			xfer_fail(x, r);
		}
		return;
	}
	int r = xfer_send(x);
	if (r < 0)
		xfer_fail(x, r);
}

static void auth_done(struct etcd_client *c, int err)
{
	/* release waiters one at a time: callbacks may cancel others */
	while (c->wait_head) {
		struct xfer *x = c->wait_head;
		wait_unlink(x);
		if (err < 0) {
			xfer_fail(x, err);
			continue;
		}
		if (!c->token) {
			/* token dropped again meanwhile: queue behind a new auth */
			xfer_submit(x);
			continue;
		}
		int r = xfer_send(x);
		if (r < 0)
			xfer_fail(x, r);
	}
}

static bool is_invalid_token(int grpc_code, const char *msg)
{
	return grpc_code == 16 || (msg && strstr(msg, "invalid auth token"));
}

/* drop_token - forget the token a transfer was sent with (once per token). */
static void drop_token(struct etcd_client *c, uint64_t gen)
{
	if (c->token && gen == c->token_gen) {
		free(c->token);
		c->token = NULL;
	}
}

/* ---- calls ---- */

/* call_finish - run the callback (if any) and free the call. */
static void call_finish(struct etcd_call *call, int err, const struct etcd_response *resp)
{
	struct etcd_client *c = call->x.c;
	call_unlink(call);
	xfer_release(&call->x);
	if (c->observer)
		c->observer->call_done(c->observer_ud, call->kind, err, loop_now() - call->started);
	if (call->cb)
		call->cb(call->x.c, err, resp, call->ud);
	free(call);
}

static bool is_connect_failure(CURL *e, CURLcode rc)
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
static bool is_tls_error(CURLcode rc)
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

static int curl_to_errno(struct xfer *x, CURLcode rc)
{
	if (is_tls_error(rc))
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
static void advance_endpoint(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (c->cur_ep == x->ep) {
		c->cur_ep = (c->cur_ep + 1) % c->n_endpoints;
		log_debug("etcd", "endpoint %s failed, now using %s", c->endpoints[x->ep],
			  c->endpoints[c->cur_ep]);
	}
}

static void auth_call_done(struct etcd_call *call, CURLcode rc, CURL *e, long http)
{
	struct etcd_client *c = call->x.c;
	int err = 0;
	if (rc != CURLE_OK)
		err = curl_to_errno(&call->x, rc);
	else {
		char *token = NULL;
		err = etcd_json_auth_token(call->x.resp.data ? call->x.resp.data : "",
					   call->x.resp.len, &token);
		if (err == 0) {
			free(c->token);
			c->token = token;
			c->token_gen++;
			c->n_auth++;
		} else if (err != -EBADMSG && err != -ENOMEM)
			err = -EACCES; /* any gateway error of authenticate: auth failed */
		else if (http / 100 != 2)
			err = -EIO;
	}
	log_debug("etcd", "authenticate: %s", err < 0 ? etcd_strerror(err) : "ok");
	c->auth_call = NULL;
	call_unlink(call);
	call_free(call);
	auth_done(c, err);
}

/* retry_elsewhere - for a call with attempts (etcd_call_opts): its attempt
 * went unanswered (unavailable false) or was answered "unavailable": move
 * the client on and send the call again while its deadline and its budget
 * allow. True when it was sent again (the call lives on). */
static bool retry_elsewhere(struct etcd_call *call, bool unavailable)
{
	struct xfer *x = &call->x;
	struct etcd_client *c = x->c;
	if (!call->attempt_ns || x->is_auth || loop_now() >= call->deadline)
		return false;
	if (unavailable && ++call->unavailable_tries >= c->n_endpoints)
		return false;
	advance_endpoint(x);
	xfer_detach(x);
	return xfer_send(x) == 0;
}

static void call_on_done(struct etcd_call *call, CURLcode rc)
{
	struct xfer *x = &call->x;
	struct etcd_client *c = x->c;
	CURL *e = x->easy;
	long http = 0;
	int err;
	struct etcd_response *resp = NULL, *eresp = NULL;

	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
	if (rc != CURLE_OK)
		log_debug("etcd", "%s on %s: %s", x->path, c->endpoints[x->ep],
		          x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
	if (rc != CURLE_OK && is_connect_failure(e, rc)) {
		advance_endpoint(x);
		x->ep_tries++;
		xfer_detach(x);
		if (x->ep_tries < c->n_endpoints && loop_now() < call->deadline) {
			int r = xfer_send(x);
			if (r == 0)
				return;
			err = r;
		} else
			err = loop_now() >= call->deadline ? -ETIMEDOUT : -ECONNREFUSED;
		if (x->is_auth) {
			c->auth_call = NULL;
			call_unlink(call);
			call_free(call);
			auth_done(c, err);
			return;
		}
		call_finish(call, err, NULL);
		return;
	}
	if (x->is_auth) {
		auth_call_done(call, rc, e, http);
		return;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT && retry_elsewhere(call, false))
		return;
	xfer_detach(x);
	if (rc != CURLE_OK) {
		call_finish(call, curl_to_errno(x, rc), NULL);
		return;
	}
	err = etcd_json_parse_response(call->kind, x->resp.data ? x->resp.data : "", x->resp.len,
				       &resp, &eresp);
	if (err == 0 && http / 100 != 2) {
		/* a success shape with an HTTP error status: not the gateway */
		etcd_response_free(resp);
		resp = NULL;
		err = -EIO;
	} else if (err == -EBADMSG && http / 100 != 2)
		err = -EIO; /* e.g. an HTML 404 from something that is not etcd */
	if (err == -EAGAIN && eresp && retry_elsewhere(call, true)) {
		log_debug("etcd", "%s on %s: %s; trying %s", x->path, c->endpoints[x->ep],
		          eresp->error_message ? eresp->error_message : "unavailable",
		          c->endpoints[c->cur_ep]);
		etcd_response_free(eresp);
		return;
	}
	if (eresp && c->user && !call->reauthed &&
	    is_invalid_token(eresp->grpc_code, eresp->error_message)) {
		/* expired/revoked token: authenticate again and retry once */
		log_debug("etcd", "token rejected (%s), re-authenticating", eresp->error_message);
		etcd_response_free(eresp);
		call->reauthed = true;
		drop_token(c, x->token_gen);
		x->ep_tries = 0;
		xfer_submit(x);
		return;
	}
	call_finish(call, err, err < 0 ? eresp : resp);
	etcd_response_free(resp);
	etcd_response_free(eresp);
}

/* call_start - queue a call; body is owned on success and on failure. */
static int call_start(struct etcd_client *c, const char *kind, const char *path, char *body,
		      const struct etcd_call_opts *o, etcd_cb cb, void *ud,
		      struct etcd_call **ret_call)
{
	int r;
	if (!cb) {
		free(body);
		return -EINVAL;
	}
	struct etcd_call *call = call_alloc(c, kind, path, body, o, cb, ud);
	if (!call) {
		free(body);
		return -ENOMEM;
	}
	if (c->user && !c->token) {
		r = auth_start(c);
		if (r < 0)
			goto fail;
		wait_push(&call->x);
	} else {
		r = xfer_send(&call->x);
		if (r < 0)
			goto fail;
	}
	call_link(call);
	if (ret_call)
		*ret_call = call;
	return 0;
fail:
	call_free(call);
	return r;
}

void etcd_call_cancel(struct etcd_call *call)
{
	if (!call)
		return;
	call_unlink(call);
	call_free(call);
}

/* ---- multi completion + watch dispatch ---- */

static void watch_drain(struct etcd_watch *w);

static void client_process(struct etcd_client *c)
{
	if (c->processing)
		return; /* a callback ran the loop recursively: the outer pass continues */
	c->processing = true;
	for (;;) {
		bool again = false;
		for (struct etcd_watch *w = c->watches; w; w = w->next) {
			if (w->pending && !w->in_cb && !w->cancelled) {
				w->pending = false;
				watch_drain(w); /* may free w or others: restart */
				again = true;
				break;
			}
		}
		if (again)
			continue;
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
			call_on_done((struct etcd_call *)(void *)x, rc);
		else
			watch_on_done((struct etcd_watch *)(void *)x, rc);
	}
	c->processing = false;
}

/* ---- public: client ---- */

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
	c->cacert = xstrdup_or_null(cfg->cacert, &fail);
	c->cert = xstrdup_or_null(cfg->cert, &fail);
	c->key = xstrdup_or_null(cfg->key, &fail);
	c->user = xstrdup_or_null(cfg->user, &fail);
	c->password = xstrdup_or_null(cfg->password, &fail);
	if (fail)
		goto fail;
	c->request_timeout_ms =
	    cfg->request_timeout_ms ? cfg->request_timeout_ms : DEFAULT_REQUEST_TIMEOUT_MS;
	c->connect_timeout_ms =
	    cfg->connect_timeout_ms ? cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	c->max_response_bytes =
	    cfg->max_response_bytes ? cfg->max_response_bytes : DEFAULT_MAX_RESPONSE;
	c->watch_idle_timeout_ms = cfg->watch_idle_timeout_ms;
	r = loop_timer_new(l, curl_timer_fired, c, &c->curl_timer);
	if (r < 0)
		goto fail;
	r = loop_timer_new(l, kick_fired, c, &c->kick_timer);
	if (r < 0)
		goto fail;
	r = -ENOMEM;
	c->multi = curl_multi_init();
	if (!c->multi)
		goto fail;
	if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, sock_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK ||
	    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 32L) != CURLM_OK)
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
		watch_destroy(c->watches);
	}
	while (c->calls)
		etcd_call_cancel(c->calls);
	if (c->auth_call) {
		call_free(c->auth_call);
		c->auth_call = NULL;
	}
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

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->endpoints[c->cur_ep];
}

void etcd_client_set_observer(struct etcd_client *c, const struct etcd_observer_ops *ops, void *ud)
{
	c->observer = ops;
	c->observer_ud = ud;
}

uint64_t etcd_client_auth_count(const struct etcd_client *c)
{
	return c->n_auth;
}

/* ---- public: KV, txn, lease ---- */

int etcd_range(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
	       etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_range_req(op, &body);
	if (r < 0)
		return r;
	return call_start(c, "range", "/v3/kv/range", body, o, cb, ud, ret_call);
}

int etcd_put(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
	     etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_put_req(op, &body);
	if (r < 0)
		return r;
	return call_start(c, "put", "/v3/kv/put", body, o, cb, ud, ret_call);
}

int etcd_delete(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
		etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_delete_req(op, &body);
	if (r < 0)
		return r;
	return call_start(c, "deleterange", "/v3/kv/deleterange", body, o, cb, ud, ret_call);
}

int etcd_txn(struct etcd_client *c, const struct etcd_compare *cmps, size_t n_cmps,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, const struct etcd_call_opts *o, etcd_cb cb, void *ud,
	     struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_txn_req(cmps, n_cmps, success, n_success, failure, n_failure, &body);
	if (r < 0)
		return r;
	return call_start(c, "txn", "/v3/kv/txn", body, o, cb, ud, ret_call);
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, const struct etcd_call_opts *o,
		     etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	if (ttl_s <= 0)
		return -EINVAL;
	int r = etcd_json_int_req("TTL", ttl_s, &body);
	if (r < 0)
		return r;
	return call_start(c, "lease_grant", "/v3/lease/grant", body, o, cb, ud, ret_call);
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
			 etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_int_req("ID", lease_id, &body);
	if (r < 0)
		return r;
	return call_start(c, "lease_keepalive", "/v3/lease/keepalive", body, o, cb, ud, ret_call);
}

int etcd_lease_revoke(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
		      etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_int_req("ID", lease_id, &body);
	if (r < 0)
		return r;
	return call_start(c, "lease_revoke", "/v3/lease/revoke", body, o, cb, ud, ret_call);
}

int etcd_lease_timetolive(struct etcd_client *c, int64_t lease_id, bool with_keys,
			  const struct etcd_call_opts *o, etcd_cb cb, void *ud,
			  struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_timetolive_req(lease_id, with_keys, &body);
	if (r < 0)
		return r;
	return call_start(c, "lease_timetolive", "/v3/lease/timetolive", body, o, cb, ud, ret_call);
}

int etcd_compact(struct etcd_client *c, int64_t revision, bool physical,
		 const struct etcd_call_opts *o, etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	if (revision <= 0)
		return -EINVAL;
	int r = etcd_json_compact_req(revision, physical, &body);
	if (r < 0)
		return r;
	return call_start(c, "compact", "/v3/kv/compaction", body, o, cb, ud, ret_call);
}

/* ---- watch ---- */

static void watch_unlink(struct etcd_watch *w)
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

static void watch_destroy(struct etcd_watch *w)
{
	watch_unlink(w);
	xfer_release(&w->x);
	loop_timer_free(w->timer);
	loop_timer_free(w->idle);
	if (w->tok)
		json_tokener_free(w->tok);
	free(w->key);
	free(w->range_end);
	free(w);
}

/* watch_idle_kick - (re)start the silence deadline of a progress-notify watch. */
static void watch_idle_kick(struct etcd_watch *w)
{
	if (w->idle)
		loop_timer_arm_in(w->idle, ms_to_ns(w->x.c->watch_idle_timeout_ms));
}

/* watch_idle_fired - the stream said nothing for too long: drop it and try
 * the next endpoint. */
static void watch_idle_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_watch *w = userdata;
	struct etcd_client *c = w->x.c;
	if (w->state != W_CONNECTING)
		return;
	log_debug("etcd", "watch silent for %" PRIu32 " ms on %s, reconnecting",
		  c->watch_idle_timeout_ms, c->endpoints[w->x.ep]);
	advance_endpoint(&w->x);
	watch_schedule_reconnect(w);
	client_process(c);
}

/* watch_connect - (re)open the stream from next_rev. */
static void watch_connect(struct etcd_watch *w)
{
	char *body = NULL;
	int r = etcd_json_watch_req(w->key, w->key_len, w->range_end, w->range_end_len, w->next_rev,
				    w->flags, &body);
	if (r < 0) {
		watch_schedule_reconnect(w);
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
	watch_idle_kick(w);
	xfer_submit(&w->x);
}

static void watch_timer_fired(struct loop_timer *t, void *userdata)
{
	struct etcd_watch *w = userdata;
	struct etcd_client *c = w->x.c;
	watch_connect(w);
	client_process(c);
}

static void watch_schedule_reconnect(struct etcd_watch *w)
{
	if (w->state == W_DONE)
		return;
	xfer_detach(&w->x);
	wait_unlink(&w->x);
	buf_reset(&w->x.resp);
	w->pending = false;
	w->state = W_BACKOFF;
	loop_timer_disarm(w->idle);
	loop_timer_arm_in(w->timer, ms_to_ns(w->backoff_ms));
	w->backoff_ms =
	    w->backoff_ms * 2 > WATCH_BACKOFF_MAX_MS ? WATCH_BACKOFF_MAX_MS : w->backoff_ms * 2;
}

/* watch_end - the watch is over for good: report err once, close the stream. */
static void watch_end(struct etcd_watch *w, int err, int64_t revision)
{
	xfer_detach(&w->x);
	wait_unlink(&w->x);
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

/* watch_deliver - run the callback; returns false when w was cancelled (and
 * is freed). */
static bool watch_deliver(struct etcd_watch *w, int64_t revision, const struct etcd_event *ev,
			  size_t n)
{
	w->in_cb = true;
	w->cb(w, 0, revision, ev, n, w->ud);
	w->in_cb = false;
	if (w->cancelled) {
		watch_destroy(w);
		return false;
	}
	return true;
}

/* watch_handle - one parsed message. Returns 1 to go on, 0 when the stream
 * must be dropped (reconnect), -1 when w is gone or done. */
static int watch_handle(struct etcd_watch *w, struct etcd_watch_msg *m)
{
	struct etcd_client *c = w->x.c;
	watch_idle_kick(w);
	if (m->is_error) {
		log_debug("etcd", "watch stream error %d: %s", m->grpc_code,
			  m->error_message ? m->error_message : "");
		if (c->user && is_invalid_token(m->grpc_code, m->error_message))
			drop_token(c, w->x.token_gen);
		return 0;
	}
	if (m->created && !m->canceled) {
		w->created = true;
		w->reauthed = false;
		w->backoff_ms = WATCH_BACKOFF_MIN_MS;
		log_debug("etcd", "watch created (header revision %" PRId64 ")",
			  m->header.revision);
		if (w->next_rev == 0 && m->header.revision > 0)
			w->next_rev = m->header.revision + 1;
	}
	if (m->canceled) {
		if (m->compact_revision > 0) {
			watch_end(w, -ERANGE, m->compact_revision);
			if (w->cancelled)
				watch_destroy(w);
			return -1;
		}
		const char *why = m->cancel_reason ? m->cancel_reason : "";
		log_debug("etcd", "watch cancelled by the server: %s", why);
		bool bad_token =
		    strstr(why, "invalid auth token") || strstr(why, "Unauthenticated");
		if (c->user && bad_token && !w->reauthed) {
			/* the token expired: authenticate again and reopen, once */
			w->reauthed = true;
			drop_token(c, w->x.token_gen);
			return 0;
		}
		int err = -EIO;
		if (bad_token)
			err = -EACCES;
		else if (strstr(why, "permission denied"))
			err = -EPERM;
		watch_end(w, err, m->header.revision);
		if (w->cancelled)
			watch_destroy(w);
		return -1;
	}
	if (m->n_events > 0) {
		/* drop what was already delivered (never expected, but a resumed
		 * stream must not duplicate) */
		size_t first = 0;
		while (first < m->n_events && m->events[first].kv.mod_revision < w->next_rev)
			first++;
		if (first == m->n_events)
			return 1;
		int64_t maxrev = 0;
		for (size_t i = first; i < m->n_events; i++) {
			if (m->events[i].kv.mod_revision > maxrev)
				maxrev = m->events[i].kv.mod_revision;
		}
		w->next_rev = maxrev + 1;
		w->last_rev = maxrev;
		return watch_deliver(w, m->header.revision, m->events + first, m->n_events - first)
			   ? 1
			   : -1;
	}
	if (!m->created && m->header.revision > 0) {
		/* progress notification: everything up to header.revision was sent */
		if (m->header.revision + 1 > w->next_rev)
			w->next_rev = m->header.revision + 1;
		if (m->header.revision > w->last_rev)
			w->last_rev = m->header.revision;
		return watch_deliver(w, m->header.revision, NULL, 0) ? 1 : -1;
	}
	return 1;
}

/* watch_drain - parse and deliver the buffered stream bytes. May free w. */
static void watch_drain(struct etcd_watch *w)
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
				buf_reset(b);
				watch_end(w, -EMSGSIZE, w->last_rev);
				if (w->cancelled)
					watch_destroy(w);
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
		verdict = watch_handle(w, m);
		etcd_watch_msg_free(m);
	}
	if (verdict < 0)
		return; /* w freed or done */
	buf_reset(b);
	if (verdict == 0 || w->stream_ended)
		watch_schedule_reconnect(w);
}

static void watch_on_done(struct etcd_watch *w, CURLcode rc)
{
	if (w->cancelled && !w->in_cb) {
		watch_destroy(w);
		return;
	}
	struct xfer *x = &w->x;
	long http = 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &http);
	log_debug("etcd", "watch stream ended: %s (HTTP %ld)",
	          rc != CURLE_OK && x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc), http);
	if (rc != CURLE_OK && is_connect_failure(x->easy, rc))
		advance_endpoint(x);
	bool oversize = x->oversize;
	xfer_detach(x);
	if (oversize) {
		buf_reset(&x->resp);
		watch_end(w, -EMSGSIZE, w->last_rev);
		if (w->cancelled)
			watch_destroy(w);
		return;
	}
	if (w->x.resp.len > 0 && http / 100 == 2) {
		/* deliver what arrived before the end, then reconnect */
		w->stream_ended = true;
		w->pending = false;
		watch_drain(w);
		return;
	}
	watch_schedule_reconnect(w);
}

int etcd_watch_start(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
		     size_t range_end_len, int64_t start_revision, unsigned flags, etcd_watch_cb cb,
		     void *ud, struct etcd_watch **ret_watch)
{
	int r;
	char *probe = NULL;
	if (!c || !cb || !ret_watch || start_revision < 0 ||
	    (flags & ~(ETCD_WATCH_PREV_KV | ETCD_WATCH_PROGRESS_NOTIFY)))
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
	if ((r = loop_timer_new(c->loop, watch_timer_fired, w, &w->timer)) < 0)
		goto fail;
	if ((flags & ETCD_WATCH_PROGRESS_NOTIFY) && c->watch_idle_timeout_ms &&
	    (r = loop_timer_new(c->loop, watch_idle_fired, w, &w->idle)) < 0)
		goto fail;
	watch_idle_kick(w);
	w->state = W_CONNECTING;
	if (c->user && !c->token) {
		if ((r = auth_start(c)) < 0)
			goto fail;
		wait_push(&w->x);
	} else if ((r = xfer_send(&w->x)) < 0)
		goto fail;
	w->next = c->watches;
	if (c->watches)
		c->watches->prev = w;
	c->watches = w;
	*ret_watch = w;
	return 0;
fail:
	xfer_release(&w->x);
	loop_timer_free(w->timer);
	loop_timer_free(w->idle);
	if (w->tok)
		json_tokener_free(w->tok);
	free(w->key);
	free(w->range_end);
	free(w);
	return r;
}

/* Cancelling is O(1): the watch goes quiet at once (no callback, its bytes
 * are dropped) and is torn down (curl handle removed, connection closed) from
 * kick_timer, so a caller on a latency path (a resigning election) does not
 * pay for the close. */
void etcd_watch_cancel(struct etcd_watch *w)
{
	if (!w || w->cancelled)
		return;
	w->cancelled = true;
	if (w->in_cb)
		return; /* freed when the callback returns */
	w->pending = false;
	wait_unlink(&w->x);
	loop_timer_disarm(w->timer);
	loop_timer_disarm(w->idle);
	loop_timer_arm_in(w->x.c->kick_timer, 0);
}

int64_t etcd_watch_revision(const struct etcd_watch *w)
{
	return w->last_rev;
}
