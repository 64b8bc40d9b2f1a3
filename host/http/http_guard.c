/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "http/http_error.h"
#include "http/http_guard.h"
#include "http/http_head.h"
#include "http/http_query.h"

#define MAX_RESPONSE (16u << 20) /* an answer of nng larger than this is cut off */
#define BACKEND_TIMEOUT_MS 2000

/* C_WAIT: a /api/v1/events request held until the generation passes
 * since, or its deadline */
enum conn_state { C_HEAD, C_WAIT, C_WRITE };

struct conn {
	struct conn *next;
	int fd;
	enum conn_state state;
	uint64_t deadline_ms;
	char *head; /* max_head + 1 bytes */
	size_t head_len;
	char *out;
	size_t out_len, out_off;
	char *req;      /* C_WAIT: the request to pass on when it is time */
	uint64_t since; /* C_WAIT: answer once the generation passes this */
};

struct http_guard {
	struct http_guard_limits lim;
	int listen_fd, epfd, stop_fd;
	int wake_fd; /* written by http_guard_set_generation */
	_Atomic uint64_t generation;
	int port, backend_port;
	unsigned n_conns;
	struct conn *conns;
	pthread_t thread;
	bool started;
};

static uint64_t http_guard_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void http_guard_conn_close(struct http_guard *g, struct conn *c)
{
	for (struct conn **p = &g->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->head);
	free(c->out);
	free(c->req);
	free(c);
	g->n_conns--;
}

/* a short answer of the front itself: written best effort, never waited for */
static void http_guard_say(int fd, int status, const char *reason)
{
	char buf[300];
	int n = snprintf(buf, sizeof(buf),
	                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
	                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
	                 status, reason, strlen(reason) + 1, reason);
	if (n > 0)
		(void)!send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void http_guard_conn_refuse(struct http_guard *g, struct conn *c, int status, const char *reason)
{
	http_guard_say(c->fd, status, reason);
	http_guard_conn_close(g, c);
}

/* the blocking loopback round trip to nng: the whole answer, or NULL */
static char *http_guard_backend_exchange(const struct http_guard *g, const char *req, size_t *ret_len)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct timeval tv = {BACKEND_TIMEOUT_MS / 1000, (BACKEND_TIMEOUT_MS % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g->backend_port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char *out = NULL;
	size_t len = 0, cap = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
		goto fail;
	for (;;) {
		if (len == cap) {
			if (cap >= MAX_RESPONSE)
				goto fail;
			size_t ncap = cap ? cap * 2 : 32768;
			char *nb = realloc(out, ncap);
			if (!nb)
				goto fail;
			out = nb;
			cap = ncap;
		}
		ssize_t r = recv(fd, out + len, cap - len, 0);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		len += (size_t)r;
	}
	close(fd);
	if (len < 12) {
		free(out);
		return NULL;
	}
	*ret_len = len;
	return out;
fail:
	close(fd);
	free(out);
	return NULL;
}

/* write what is left of the answer; true when the connection is done */
static bool http_guard_conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			c->out_off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		return !(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
	return true;
}

/* pass req on to nng and start writing its answer */
static void http_guard_conn_forward(struct http_guard *g, struct conn *c, const char *req)
{
	c->out = http_guard_backend_exchange(g, req, &c->out_len);
	if (!c->out) {
		http_guard_conn_refuse(g, c, 503, "Service Unavailable");
		return;
	}
	char *text;
	size_t text_len;
	if (http_error_rewrite(req, c->out, c->out_len, &text, &text_len) == 1) {
		/* nng's HTML error page: one line of text (JSON under /api/) */
		free(c->out);
		c->out = text;
		c->out_len = text_len;
	}
	c->state = C_WRITE;
	c->deadline_ms = http_guard_now_ms() + g->lim.write_timeout_ms;
	if (http_guard_conn_flush(c)) {
		http_guard_conn_close(g, c);
		return;
	}
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
	if (epoll_ctl(g->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		http_guard_conn_close(g, c);
}

/* a valid "GET /api/v1/events?since=N" with N not behind the generation:
 * held (C_WAIT) instead of answered; anything else about it (a bad
 * query) is nng's to refuse. true when c is held. */
static bool http_guard_conn_hold(struct http_guard *g, struct conn *c, const char *req)
{
	static const char *const known[] = {"since", NULL};
	const char *why = NULL;
	if (strncmp(req, "GET ", 4) != 0)
		return false;
	const char *target = req + 4;
	size_t tl = strcspn(target, " ");
	char t[1100];
	if (tl >= sizeof(t))
		return false;
	memcpy(t, target, tl);
	t[tl] = 0;
	uint64_t since;
	if (!http_target_path_is(t, "/api/v1/events") || http_query_check(t, known, &why) < 0 ||
	    http_query_u64(t, "since", &since) != 1 || since < atomic_load(&g->generation))
		return false;
	if (!(c->req = strdup(req)))
		return false;
	c->since = since;
	c->state = C_WAIT;
	c->deadline_ms = http_guard_now_ms() + HTTP_EVENTS_WAIT_MS;
	return true;
}

static void http_guard_conn_answer(struct http_guard *g, struct conn *c)
{
	char req[1200];
	c->head[c->head_len] = 0;
	int status = http_head_parse(c->head, g->lim.max_lines, req, sizeof(req));
	if (status) {
		http_guard_conn_refuse(g, c, status, status == 431   ? "Request Header Fields Too Large"
		                          : status == 505 ? "HTTP Version Not Supported"
		                                          : "Bad Request");
		return;
	}
	if (!http_guard_conn_hold(g, c, req))
		http_guard_conn_forward(g, c, req);
}

/* C_WAIT and readable: the client went away (or sends what nobody reads) */
static void http_guard_conn_waiting_readable(struct http_guard *g, struct conn *c)
{
	char scratch[512];
	for (;;) {
		ssize_t r = recv(c->fd, scratch, sizeof(scratch), 0);
		if (r > 0)
			continue;
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			http_guard_conn_close(g, c);
		return;
	}
}

/* the generation moved: answer every held request it passed */
static void http_guard_wake(struct http_guard *g)
{
	uint64_t v;
	(void)!read(g->wake_fd, &v, sizeof(v));
	uint64_t gen = atomic_load(&g->generation);
	for (struct conn *c = g->conns, *n; c; c = n) {
		n = c->next;
		if (c->state == C_WAIT && gen > c->since)
			http_guard_conn_forward(g, c, c->req);
	}
}

void http_guard_set_generation(struct http_guard *g, uint64_t generation)
{
	uint64_t one = 1;
	atomic_store(&g->generation, generation);
	(void)!write(g->wake_fd, &one, sizeof(one));
}

static void http_guard_conn_readable(struct http_guard *g, struct conn *c)
{
	for (;;) {
		if (c->head_len >= g->lim.max_head) {
			http_guard_conn_refuse(g, c, 431, "Request Header Fields Too Large");
			return;
		}
		ssize_t r = recv(c->fd, c->head + c->head_len, g->lim.max_head - c->head_len, 0);
		if (r == 0) {
			http_guard_conn_close(g, c);
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				http_guard_conn_close(g, c);
			return;
		}
		size_t from = c->head_len >= 3 ? c->head_len - 3 : 0;
		c->head_len += (size_t)r;
		c->head[c->head_len] = 0;
		if (memchr(c->head, 0, c->head_len)) {
			http_guard_conn_refuse(g, c, 400, "Bad Request");
			return;
		}
		if (strstr(c->head + from, "\r\n\r\n") || strstr(c->head + (from ? from + 1 : 0), "\n\n")) {
			http_guard_conn_answer(g, c);
			return;
		}
	}
}

static void http_guard_accept_all(struct http_guard *g)
{
	for (;;) {
		int fd = accept4(g->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, or a transient error: the next event retries */
		if (g->n_conns >= g->lim.max_conns) {
			http_guard_say(fd, 503, "Service Unavailable");
			close(fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof(*c));
		char *head = malloc(g->lim.max_head + 1);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (!c || !head || epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(c);
			free(head);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->head = head;
		c->state = C_HEAD;
		c->deadline_ms = http_guard_now_ms() + g->lim.head_timeout_ms;
		c->next = g->conns;
		g->conns = c;
		g->n_conns++;
	}
}

/* the earliest deadline as an epoll timeout; closes what is past it */
static int http_guard_expire(struct http_guard *g)
{
	uint64_t now = http_guard_now_ms(), next = UINT64_MAX;
	for (struct conn *c = g->conns, *n; c; c = n) {
		n = c->next;
		if (c->deadline_ms <= now) {
			if (c->state == C_HEAD)
				http_guard_conn_refuse(g, c, 408, "Request Timeout");
			else if (c->state == C_WAIT) /* the wait is over: the current generation */
				http_guard_conn_forward(g, c, c->req);
			else
				http_guard_conn_close(g, c); /* a client that does not read its answer */
		} else if (c->deadline_ms < next)
			next = c->deadline_ms;
	}
	return next == UINT64_MAX ? -1 : (int)(next - now);
}

static void *http_guard_main(void *arg)
{
	struct http_guard *g = arg;
	struct epoll_event evs[32];
	for (;;) {
		int timeout = http_guard_expire(g);
		int n = epoll_wait(g->epfd, evs, 32, timeout);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &g->stop_fd)
				return NULL;
			if (p == &g->listen_fd) {
				http_guard_accept_all(g);
				continue;
			}
			if (p == &g->wake_fd) {
				http_guard_wake(g);
				continue;
			}
			struct conn *c = p;
			/* c may have been closed by an earlier event of this batch
			 * only through its own event: one event per fd per batch */
			if (c->state == C_HEAD)
				http_guard_conn_readable(g, c);
			else if (c->state == C_WAIT)
				http_guard_conn_waiting_readable(g, c);
			else if (http_guard_conn_flush(c))
				http_guard_conn_close(g, c);
		}
	}
	return NULL;
}

static int http_guard_listen_on(struct http_guard *g, const char *host, const char *port, char *err,
                     size_t err_len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, err_len, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	int r = -EADDRNOTAVAIL;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			r = -errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			r = -errno;
			close(fd);
			continue;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		g->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
		                                   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
		g->listen_fd = fd;
		r = 0;
		break;
	}
	freeaddrinfo(ai);
	if (r < 0)
		snprintf(err, err_len, "%s", strerror(-r));
	return r;
}

int http_guard_new(const char *host, const char *port, int backend_port,
                   const struct http_guard_limits *limits, struct http_guard **ret, char *err,
                   size_t err_len)
{
	struct http_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->listen_fd = g->epfd = g->stop_fd = g->wake_fd = -1;
	g->backend_port = backend_port;
	if (limits)
		g->lim = *limits;
	if (!g->lim.max_head)
		g->lim.max_head = 8192;
	if (!g->lim.max_lines)
		g->lim.max_lines = 64;
	if (!g->lim.head_timeout_ms)
		g->lim.head_timeout_ms = 5000;
	if (!g->lim.write_timeout_ms)
		g->lim.write_timeout_ms = 10000;
	if (!g->lim.max_conns)
		g->lim.max_conns = 64;
	int r = http_guard_listen_on(g, host, port, err, err_len);
	if (r < 0)
		goto fail;
	g->epfd = epoll_create1(EPOLL_CLOEXEC);
	g->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event el = {.events = EPOLLIN, .data.ptr = &g->listen_fd};
	struct epoll_event es = {.events = EPOLLIN, .data.ptr = &g->stop_fd};
	struct epoll_event ew = {.events = EPOLLIN, .data.ptr = &g->wake_fd};
	if (g->epfd < 0 || g->stop_fd < 0 || g->wake_fd < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &el) < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stop_fd, &es) < 0 ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wake_fd, &ew) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s", strerror(-r));
		goto fail;
	}
	if ((r = -pthread_create(&g->thread, NULL, http_guard_main, g)) < 0) {
		snprintf(err, err_len, "cannot start its thread: %s", strerror(-r));
		goto fail;
	}
	g->started = true;
	*ret = g;
	return 0;
fail:
	http_guard_free(g);
	return r;
}

int http_guard_port(const struct http_guard *g)
{
	return g->port;
}

void http_guard_free(struct http_guard *g)
{
	if (!g)
		return;
	if (g->started) {
		uint64_t one = 1;
		(void)!write(g->stop_fd, &one, sizeof(one));
		pthread_join(g->thread, NULL);
	}
	while (g->conns)
		http_guard_conn_close(g, g->conns);
	if (g->listen_fd >= 0)
		close(g->listen_fd);
	if (g->epfd >= 0)
		close(g->epfd);
	if (g->stop_fd >= 0)
		close(g->stop_fd);
	if (g->wake_fd >= 0)
		close(g->wake_fd);
	free(g);
}
