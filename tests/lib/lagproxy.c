/* SPDX-License-Identifier: MIT */
/*
 * lagproxy.c - see lagproxy.h.
 *
 * One pthread polls the listener, a wake pipe and both sockets of every
 * connection. All state is under one mutex, which the thread drops only
 * around poll(); the controls take it, change buffers and flags, and wake the
 * thread through the pipe.
 *
 * Per connection: bytes from the client are cut into whole requests (head +
 * Content-Length body) and forwarded; each request pushes what its response
 * is for (txn to cut). A connection that opens with the HTTP/2 preface is
 * the client's gRPC watch stream: client bytes pass through raw, server
 * bytes are cut into units (one HTTP/2 frame each, its DATA read as gRPC
 * WatchResponses to mark it) that go to the client or, while held, onto a
 * held list. On other connections server bytes are collected into whole
 * responses, then forwarded, held or cut.
 */
#include "config.h"

#include "lagproxy.h"
#include "proto/etcd_watch.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define LP_MAX_HEAD (64u * 1024u)            /* request/response head */
#define LP_MAX_BODY (32u * 1024u * 1024u)    /* request body, chunk size */
#define LP_MAX_BUF (64u * 1024u * 1024u)     /* any one buffer: stop reading */
#define LP_MAX_CONNS 256
#define LP_MAX_PENDING 32                    /* requests awaiting a response */
#define LP_CUT_REPLY "HTTP/1.1 200 OK\r\n"
#define LP_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define LP_H2_PREFACE_LEN 24

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const void *d, size_t n)
{
	if (n == 0)
		return 0;
	if (n > LP_MAX_BUF * 2 || b->len > LP_MAX_BUF * 2)
		return -ENOBUFS;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *np = realloc(b->p, cap);
		if (!np)
			return -ENOMEM;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
	return 0;
}

static void buf_eat(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* a held watch unit: one HTTP/2 frame (raw bytes), marked with what the
 * gRPC messages it completes say */
struct unit {
	struct unit *next;
	size_t len;
	bool created;	 /* a WatchResponse with created set */
	int64_t max_rev; /* the highest event mod_revision, 0 if none */
	uint8_t data[];
};

enum rp_state { RP_HEAD, RP_CHUNK, RP_BODY, RP_RAW };

/* response parser */
struct rparse {
	enum rp_state st;
	uint64_t rem; /* RP_BODY: bytes left */
};

struct pending {
	bool drop;
};

struct conn {
	int cfd, sfd; /* -1 when closed */
	struct buf cin, sout, sin, cout, cur, hreplies;
	struct unit *held, *held_tail;
	size_t held_bytes;
	struct rparse rp;
	struct pending q[LP_MAX_PENDING];
	unsigned nq;
	bool watch;       /* opened with the HTTP/2 preface: raw both ways, frames from the server */
	struct buf grpc;  /* DATA payload not yet a whole gRPC message */
	bool raw_up;      /* a request we do not parse (chunked body): raw from here on */
	bool close_after; /* write cout, then close the client */
	bool cut_held;    /* a cut reply waits behind the held replies */
	bool dead;
};

struct lagproxy {
	pthread_t th;
	bool th_started;
	pthread_mutex_t mu;
	int lfd;
	int wake[2];
	struct sockaddr_storage up;
	socklen_t up_len;
	char url[64];
	bool stop;
	bool hold_watch, hold_replies, drop_next;
	struct conn *conns[LP_MAX_CONNS];
	unsigned nconns;
	struct lagproxy_stats st;
	bool debug; /* $LAGPROXY_DEBUG: trace to stderr */
};

#define TRACE(p, ...) \
	do { \
		if ((p)->debug) \
			fprintf(stderr, "lagproxy: " __VA_ARGS__); \
	} while (0)

/* ---- helpers ---- */

static const uint8_t *find(const uint8_t *h, size_t hl, const char *n, size_t nl)
{
	if (nl == 0 || hl < nl)
		return NULL;
	for (size_t i = 0; i + nl <= hl; i++)
		if (h[i] == (uint8_t)n[0] && memcmp(h + i, n, nl) == 0)
			return h + i;
	return NULL;
}

/* header value of name in head[0..len) (lines after the first), or NULL */
static const char *hdr(const uint8_t *head, size_t len, const char *name, size_t *ret_vlen)
{
	size_t nl = strlen(name);
	const uint8_t *p = find(head, len, "\r\n", 2);
	if (!p)
		return NULL;
	p += 2;
	const uint8_t *end = head + len;
	while (p < end) {
		const uint8_t *eol = find(p, (size_t)(end - p), "\r\n", 2);
		if (!eol)
			eol = end;
		size_t ll = (size_t)(eol - p);
		if (ll > nl && p[nl] == ':' && strncasecmp((const char *)p, name, nl) == 0) {
			const uint8_t *v = p + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			const uint8_t *ve = eol;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			*ret_vlen = (size_t)(ve - v);
			return (const char *)v;
		}
		p = eol + 2;
	}
	return NULL;
}

/* decimal Content-Length; -1 bad, -2 absent */
static int64_t content_length(const uint8_t *head, size_t len)
{
	size_t vl;
	const char *v = hdr(head, len, "content-length", &vl);
	if (!v)
		return -2;
	if (vl == 0 || vl > 12)
		return -1;
	int64_t n = 0;
	for (size_t i = 0; i < vl; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (v[i] - '0');
	}
	return n;
}

static bool has_token(const uint8_t *head, size_t len, const char *name, const char *tok)
{
	size_t vl;
	const char *v = hdr(head, len, name, &vl);
	size_t tl = strlen(tok);
	if (!v)
		return false;
	for (size_t i = 0; i + tl <= vl; i++)
		if (strncasecmp(v + i, tok, tl) == 0)
			return true;
	return false;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void wake(struct lagproxy *p)
{
	char c = 1;
	ssize_t r = write(p->wake[1], &c, 1);
	(void)r; /* a full pipe wakes the thread anyway */
}

/* ---- connections ---- */

static void conn_free(struct conn *c)
{
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->sfd >= 0)
		close(c->sfd);
	buf_free(&c->cin);
	buf_free(&c->sout);
	buf_free(&c->sin);
	buf_free(&c->cout);
	buf_free(&c->cur);
	buf_free(&c->hreplies);
	buf_free(&c->grpc);
	while (c->held) {
		struct unit *u = c->held;
		c->held = u->next;
		free(u);
	}
	free(c);
}

static void close_server(struct conn *c)
{
	if (c->sfd >= 0)
		close(c->sfd);
	c->sfd = -1;
}

static void to_client(struct conn *c, const void *d, size_t n)
{
	if (buf_add(&c->cout, d, n) < 0)
		c->dead = true;
}

/* move held units [head .. last] (all when last is NULL) to cout */
static void release_units(struct lagproxy *p, struct conn *c, const struct unit *last)
{
	while (c->held) {
		struct unit *u = c->held;
		c->held = u->next;
		if (!c->held)
			c->held_tail = NULL;
		c->held_bytes -= u->len;
		p->st.watch_held_bytes -= u->len;
		to_client(c, u->data, u->len);
		bool stop = u == last;
		free(u);
		if (stop)
			break;
	}
}

/* mark_unit - read the gRPC messages a DATA frame's payload completes
 * (WatchResponses) into u's marks */
static void mark_unit(struct conn *c, struct unit *u, const uint8_t *pay, size_t n)
{
	if (buf_add(&c->grpc, pay, n) < 0) {
		c->dead = true;
		return;
	}
	while (c->grpc.len >= 5) {
		const uint8_t *g = c->grpc.p;
		size_t ml = (size_t)g[1] << 24 | (size_t)g[2] << 16 | (size_t)g[3] << 8 | g[4];
		if (c->grpc.len - 5 < ml)
			return;
		Etcdserverpb__WatchResponse *wr = etcdserverpb__watch_response__unpack(NULL, ml, g + 5);
		if (wr) {
			u->created = u->created || wr->created;
			for (size_t i = 0; i < wr->n_events; i++)
				if (wr->events[i]->kv && wr->events[i]->kv->mod_revision > u->max_rev)
					u->max_rev = wr->events[i]->kv->mod_revision;
			etcdserverpb__watch_response__free_unpacked(wr, NULL);
		}
		buf_eat(&c->grpc, 5 + ml);
	}
}

/* watch_unit - one HTTP/2 frame from the server: to the client, or held */
static void watch_unit(struct lagproxy *p, struct conn *c, const uint8_t *d, size_t len)
{
	struct unit *u = malloc(sizeof(*u) + len);
	if (!u) {
		c->dead = true;
		return;
	}
	u->next = NULL;
	u->len = len;
	u->created = false;
	u->max_rev = 0;
	memcpy(u->data, d, len);
	if (d[3] == 0) { /* DATA: a pad length first when PADDED (0x8) */
		size_t off = 9, n = len - 9;
		if (d[4] & 0x8) {
			size_t pad = n > 0 ? d[9] : 0;
			n = n > pad ? n - 1 - pad : 0;
			off = 10;
		}
		mark_unit(c, u, d + off, n);
	}
	TRACE(p, "conn %d: watch frame type %u, %zu bytes%s%s: %s\n", c->cfd, d[3], len,
	      u->created ? ", created" : "", u->max_rev ? ", events" : "",
	      p->hold_watch || c->held ? "held" : "passed");
	if (!p->hold_watch && !c->held) {
		to_client(c, d, len);
		free(u);
		return;
	}
	if (c->held_tail)
		c->held_tail->next = u;
	else
		c->held = u;
	c->held_tail = u;
	c->held_bytes += len;
	p->st.watch_held_bytes += len;
}

/* cut whole requests out of cin and forward them */
static void client_bytes(struct lagproxy *p, struct conn *c)
{
	while (c->cin.len > 0 && !c->dead) {
		if (c->watch || c->raw_up) {
			if (buf_add(&c->sout, c->cin.p, c->cin.len) < 0)
				c->dead = true;
			c->cin.len = 0;
			return;
		}
		size_t pl = c->cin.len < LP_H2_PREFACE_LEN ? c->cin.len : LP_H2_PREFACE_LEN;
		if (c->nq == 0 && memcmp(c->cin.p, LP_H2_PREFACE, pl) == 0) {
			if (pl < LP_H2_PREFACE_LEN)
				return; /* the rest of the preface */
			TRACE(p, "conn %d: HTTP/2 (the watch stream)\n", c->cfd);
			c->watch = true;
			p->st.watch_connections++;
			continue;
		}
		const uint8_t *e = find(c->cin.p, c->cin.len, "\r\n\r\n", 4);
		if (!e) {
			if (c->cin.len > LP_MAX_HEAD)
				c->dead = true;
			return;
		}
		size_t hl = (size_t)(e - c->cin.p) + 4;
		if (hl > LP_MAX_HEAD) {
			c->dead = true;
			return;
		}
		int64_t cl = content_length(c->cin.p, hl);
		bool chunked = has_token(c->cin.p, hl, "transfer-encoding", "chunked");
		if (cl == -1 || cl > (int64_t)LP_MAX_BODY || c->nq >= LP_MAX_PENDING) {
			c->dead = true;
			return;
		}
		size_t body = cl > 0 ? (size_t)cl : 0;
		if (!chunked && c->cin.len < hl + body)
			return; /* wait for the whole body */
		const uint8_t *eol = find(c->cin.p, hl, "\r\n", 2);
		size_t ll = eol ? (size_t)(eol - c->cin.p) : 0;
		struct pending pd = {0};
		if (find(c->cin.p, ll, "POST /v3/kv/txn ", 16) == c->cin.p && p->drop_next) {
			p->drop_next = false;
			pd.drop = true;
			p->st.txn_doomed++;
		}
		c->q[c->nq++] = pd;
		TRACE(p, "conn %d: %.*s%s\n", c->cfd, (int)(ll > 80 ? 80 : ll), (const char *)c->cin.p,
		      pd.drop ? " (reply to be cut)" : "");
		if (chunked) {
			/* not expected from our client: pass it and the rest raw */
			c->raw_up = true;
			continue;
		}
		if (buf_add(&c->sout, c->cin.p, hl + body) < 0) {
			c->dead = true;
			return;
		}
		buf_eat(&c->cin, hl + body);
	}
}

/* rp_next - the next unit of the server stream: 1 (*ret_len bytes, payload
 * at [*pay_off, +*pay_len), *ret_end: a response ends with it, *ret_interim:
 * a 1xx response), 0 need more bytes, -1 cannot parse */
static int rp_next(struct rparse *rp, const struct buf *in, size_t *ret_len, size_t *pay_off,
                   size_t *pay_len, bool *ret_end, bool *ret_interim)
{
	const uint8_t *b = in->p;
	size_t n = in->len;
	*pay_off = *pay_len = 0;
	*ret_end = *ret_interim = false;
	if (n == 0)
		return 0;
	switch (rp->st) {
	case RP_HEAD: {
		const uint8_t *e = find(b, n, "\r\n\r\n", 4);
		if (!e)
			return n > LP_MAX_HEAD ? -1 : 0;
		size_t hl = (size_t)(e - b) + 4;
		if (hl > LP_MAX_HEAD || hl < 12 || memcmp(b, "HTTP/1.", 7) != 0)
			return -1;
		int code = 0;
		for (size_t i = 9; i < 12; i++) {
			if (b[i] < '0' || b[i] > '9')
				return -1;
			code = code * 10 + (b[i] - '0');
		}
		*ret_len = hl;
		if (code >= 100 && code < 200) {
			*ret_interim = true;
			return 1;
		}
		int64_t cl = content_length(b, hl);
		if (cl == -1)
			return -1;
		if (code == 204 || code == 304 || cl == 0) {
			*ret_end = true;
		} else if (has_token(b, hl, "transfer-encoding", "chunked")) {
			rp->st = RP_CHUNK;
		} else if (cl > 0) {
			rp->st = RP_BODY;
			rp->rem = (uint64_t)cl;
		} else {
			rp->st = RP_RAW;
		}
		return 1;
	}
	case RP_CHUNK: {
		const uint8_t *eol = find(b, n < 1024 ? n : 1024, "\r\n", 2);
		if (!eol)
			return n >= 1024 ? -1 : 0;
		size_t ll = (size_t)(eol - b) + 2;
		uint64_t sz = 0;
		size_t digits = 0;
		for (size_t i = 0; i + 2 < ll; i++) {
			uint8_t ch = b[i];
			int v;
			if (ch >= '0' && ch <= '9')
				v = ch - '0';
			else if (ch >= 'a' && ch <= 'f')
				v = ch - 'a' + 10;
			else if (ch >= 'A' && ch <= 'F')
				v = ch - 'A' + 10;
			else if (ch == ';' || ch == ' ' || ch == '\t')
				break;
			else
				return -1;
			if (++digits > 8)
				return -1;
			sz = sz * 16 + (uint64_t)v;
		}
		if (digits == 0 || sz > LP_MAX_BODY)
			return -1;
		if (sz == 0) {
			/* last chunk, then trailers up to an empty line */
			if (n < ll + 2)
				return 0;
			size_t end;
			if (b[ll] == '\r' && b[ll + 1] == '\n') {
				end = ll + 2;
			} else {
				const uint8_t *t = find(b + ll, n - ll, "\r\n\r\n", 4);
				if (!t)
					return n - ll > LP_MAX_HEAD ? -1 : 0;
				end = (size_t)(t - b) + 4;
			}
			*ret_len = end;
			*ret_end = true;
			rp->st = RP_HEAD;
			return 1;
		}
		if (n < ll + sz + 2)
			return 0;
		if (b[ll + sz] != '\r' || b[ll + sz + 1] != '\n')
			return -1;
		*ret_len = ll + (size_t)sz + 2;
		*pay_off = ll;
		*pay_len = (size_t)sz;
		return 1;
	}
	case RP_BODY: {
		size_t take = rp->rem < n ? (size_t)rp->rem : n;
		rp->rem -= take;
		*ret_len = take;
		*pay_len = take;
		if (rp->rem == 0) {
			*ret_end = true;
			rp->st = RP_HEAD;
		}
		return 1;
	}
	case RP_RAW:
		*ret_len = n;
		*pay_len = n;
		return 1;
	}
	return -1;
}

/* a whole response on a non-watch connection (in c->cur) */
static void response_done(struct lagproxy *p, struct conn *c)
{
	struct pending pd = {0};
	if (c->nq > 0) {
		pd = c->q[0];
		memmove(&c->q[0], &c->q[1], (c->nq - 1) * sizeof(c->q[0]));
		c->nq--;
	}
	if (pd.drop) {
		/* a status line and nothing more: the client cannot tell what etcd
		 * did (a bare close of a reused connection would make curl resend) */
		c->cur.len = 0;
		close_server(c);
		p->st.txn_cut++;
		TRACE(p, "conn %d: txn reply cut%s\n", c->cfd, p->hold_replies ? " (held)" : "");
		if (p->hold_replies || c->hreplies.len > 0) {
			c->cut_held = true;
			return;
		}
		to_client(c, LP_CUT_REPLY, strlen(LP_CUT_REPLY));
		c->close_after = true;
		return;
	}
	TRACE(p, "conn %d: response %s (%zu bytes)\n", c->cfd,
	      p->hold_replies || c->hreplies.len > 0 ? "held" : "passed", c->cur.len);
	if (p->hold_replies || c->hreplies.len > 0) {
		if (buf_add(&c->hreplies, c->cur.p, c->cur.len) < 0)
			c->dead = true;
		p->st.replies_held_bytes += c->cur.len;
	} else {
		to_client(c, c->cur.p, c->cur.len);
	}
	c->cur.len = 0;
}

static void server_bytes(struct lagproxy *p, struct conn *c)
{
	while (c->watch && c->sin.len >= 9 && !c->dead) {
		size_t len = 9 + ((size_t)c->sin.p[0] << 16 | (size_t)c->sin.p[1] << 8 | c->sin.p[2]);
		if (c->sin.len < len)
			return;
		watch_unit(p, c, c->sin.p, len);
		buf_eat(&c->sin, len);
	}
	while (!c->watch && c->sin.len > 0 && !c->dead && !c->close_after && !c->cut_held) {
		size_t len, po, pl;
		bool end, interim;
		int r = rp_next(&c->rp, &c->sin, &len, &po, &pl, &end, &interim);
		if (r < 0) {
			c->dead = true;
			return;
		}
		if (r == 0)
			return;
		if (interim) {
			to_client(c, c->sin.p, len);
		} else {
			if (buf_add(&c->cur, c->sin.p, len) < 0)
				c->dead = true;
			if (end)
				response_done(p, c);
		}
		buf_eat(&c->sin, len);
	}
}

/* the server closed: a response read until close ends here */
static void server_eof(struct lagproxy *p, struct conn *c)
{
	close_server(c);
	if (c->cut_held)
		return; /* closed by the release */
	if (!c->watch && c->rp.st == RP_RAW)
		response_done(p, c);
	else if (!c->watch && c->cur.len > 0)
		to_client(c, c->cur.p, c->cur.len); /* a truncated response: the client errs */
	c->cur.len = 0;
	c->close_after = true;
}

static int io_read(int fd, struct buf *b)
{
	uint8_t tmp[65536];
	ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	if (r == 0)
		return -1;
	return buf_add(b, tmp, (size_t)r) < 0 ? -1 : 1;
}

static int io_write(int fd, struct buf *b)
{
	if (b->len == 0)
		return 0;
	ssize_t r = send(fd, b->p, b->len, MSG_NOSIGNAL);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	buf_eat(b, (size_t)r);
	return 0;
}

static void accept_one(struct lagproxy *p)
{
	int fd = accept(p->lfd, NULL, NULL);
	if (fd < 0)
		return;
	if (p->nconns >= LP_MAX_CONNS) {
		close(fd);
		return;
	}
	int s = socket(p->up.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&p->up, p->up_len) < 0) {
		if (s >= 0)
			close(s);
		close(fd); /* refused upstream: so is the client */
		return;
	}
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(s);
		close(fd);
		return;
	}
	set_nonblock(fd);
	set_nonblock(s);
	c->cfd = fd;
	c->sfd = s;
	p->conns[p->nconns++] = c;
	p->st.connections++;
}

/* can this connection go? (the client is gone, or nothing is left for it) */
static bool conn_over(const struct conn *c)
{
	if (c->dead || c->cfd < 0)
		return true;
	return c->close_after && c->cout.len == 0 && !c->held && c->hreplies.len == 0 &&
	       !c->cut_held;
}

static void *run(void *arg)
{
	struct lagproxy *p = arg;
	struct pollfd *fds = calloc(2 + 2 * LP_MAX_CONNS, sizeof(*fds));
	if (!fds)
		return NULL;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		/* reap */
		for (unsigned i = 0; i < p->nconns;) {
			if (conn_over(p->conns[i])) {
				p->st.watch_held_bytes -= p->conns[i]->held_bytes;
				p->st.replies_held_bytes -= p->conns[i]->hreplies.len;
				conn_free(p->conns[i]);
				p->conns[i] = p->conns[--p->nconns];
			} else {
				i++;
			}
		}
		unsigned nf = 0;
		fds[nf++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
		fds[nf++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
		for (unsigned i = 0; i < p->nconns; i++) {
			struct conn *c = p->conns[i];
			short ce = 0, se = 0;
			if (c->cin.len < LP_MAX_BUF && !c->close_after)
				ce |= POLLIN;
			if (c->cout.len > 0)
				ce |= POLLOUT;
			if (c->sfd >= 0) {
				if (c->sin.len < LP_MAX_BUF && c->held_bytes < LP_MAX_BUF &&
				    c->hreplies.len < LP_MAX_BUF)
					se |= POLLIN;
				if (c->sout.len > 0)
					se |= POLLOUT;
			}
			fds[nf++] = (struct pollfd){.fd = c->cfd, .events = ce};
			fds[nf++] = (struct pollfd){.fd = c->sfd, .events = se}; /* -1: ignored */
		}
		unsigned n_polled = p->nconns;
		pthread_mutex_unlock(&p->mu);
		int pr = poll(fds, nf, 1000);
		pthread_mutex_lock(&p->mu);
		if (pr < 0)
			continue;
		if (fds[0].revents) {
			char tmp[64];
			while (read(p->wake[0], tmp, sizeof(tmp)) > 0)
				;
		}
		/* the controls may not remove connections, so the indexes hold */
		for (unsigned i = 0; i < n_polled; i++) {
			struct conn *c = p->conns[i];
			short ce = fds[2 + 2 * i].revents, se = fds[3 + 2 * i].revents;
			if (ce & (POLLIN | POLLHUP | POLLERR)) {
				int r = io_read(c->cfd, &c->cin);
				if (r < 0)
					c->dead = true; /* the client went away: so does the connection */
				else if (r > 0)
					client_bytes(p, c);
			}
			if (c->sfd >= 0 && !c->dead && (se & (POLLIN | POLLHUP | POLLERR))) {
				int r = io_read(c->sfd, &c->sin);
				if (r > 0)
					server_bytes(p, c);
				else if (r < 0) {
					server_bytes(p, c);
					server_eof(p, c);
				}
			}
			if (c->dead)
				continue;
			if (c->sfd >= 0 && io_write(c->sfd, &c->sout) < 0) {
				server_bytes(p, c);
				server_eof(p, c);
			}
			if (io_write(c->cfd, &c->cout) < 0)
				c->dead = true;
		}
		if (fds[1].revents & POLLIN)
			accept_one(p);
		/* bytes the controls released since the last poll */
		for (unsigned i = 0; i < p->nconns; i++) {
			struct conn *c = p->conns[i];
			if (!c->dead && c->cout.len > 0 && io_write(c->cfd, &c->cout) < 0)
				c->dead = true;
		}
	}
	pthread_mutex_unlock(&p->mu);
	free(fds);
	return NULL;
}

/* ---- API ---- */

static int parse_upstream(struct lagproxy *p, const char *url)
{
	if (strncmp(url, "http://", 7) != 0)
		return -EINVAL;
	const char *h = url + 7;
	const char *colon = strrchr(h, ':');
	if (!colon || colon == h)
		return -EINVAL;
	char host[256], port[16];
	size_t hl = (size_t)(colon - h);
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	size_t pl = strcspn(colon + 1, "/");
	if (pl == 0 || pl >= sizeof(port))
		return -EINVAL;
	memcpy(port, colon + 1, pl);
	port[pl] = '\0';
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
		return -EINVAL;
	if (ai->ai_addrlen > sizeof(p->up)) {
		freeaddrinfo(ai);
		return -EINVAL;
	}
	memcpy(&p->up, ai->ai_addr, ai->ai_addrlen);
	p->up_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int lagproxy_new(const char *upstream_url, struct lagproxy **ret)
{
	struct lagproxy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->lfd = p->wake[0] = p->wake[1] = -1;
	p->debug = getenv("LAGPROXY_DEBUG") != NULL;
	int r = parse_upstream(p, upstream_url);
	if (r < 0)
		goto fail;
	if (pipe(p->wake) < 0) {
		r = -errno;
		goto fail;
	}
	set_nonblock(p->wake[0]);
	set_nonblock(p->wake[1]);
	(void)fcntl(p->wake[0], F_SETFD, FD_CLOEXEC);
	(void)fcntl(p->wake[1], F_SETFD, FD_CLOEXEC);
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0) {
		r = -errno;
		goto fail;
	}
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(p->lfd, 64) < 0 ||
	    getsockname(p->lfd, (struct sockaddr *)&a, &al) < 0) {
		r = -errno;
		goto fail;
	}
	set_nonblock(p->lfd);
	snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	pthread_mutex_init(&p->mu, NULL);
	r = pthread_create(&p->th, NULL, run, p);
	if (r != 0) {
		pthread_mutex_destroy(&p->mu);
		r = -r;
		goto fail;
	}
	p->th_started = true;
	*ret = p;
	return 0;
fail:
	if (p->lfd >= 0)
		close(p->lfd);
	if (p->wake[0] >= 0)
		close(p->wake[0]);
	if (p->wake[1] >= 0)
		close(p->wake[1]);
	free(p);
	return r;
}

void lagproxy_free(struct lagproxy *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_mutex_unlock(&p->mu);
	wake(p);
	pthread_join(p->th, NULL);
	for (unsigned i = 0; i < p->nconns; i++)
		conn_free(p->conns[i]);
	pthread_mutex_destroy(&p->mu);
	close(p->lfd);
	close(p->wake[0]);
	close(p->wake[1]);
	free(p);
}

const char *lagproxy_url(const struct lagproxy *p)
{
	return p->url;
}

void lagproxy_hold_watch(struct lagproxy *p, bool hold)
{
	pthread_mutex_lock(&p->mu);
	p->hold_watch = hold;
	if (!hold)
		for (unsigned i = 0; i < p->nconns; i++)
			release_units(p, p->conns[i], NULL);
	pthread_mutex_unlock(&p->mu);
	wake(p);
}

/* release the held frames of the first watch connection that holds a
 * frame marked as asked, through that frame */
static bool lagproxy_release_watch_marked(struct lagproxy *p, bool created, int64_t rev)
{
	bool done = false;
	pthread_mutex_lock(&p->mu);
	for (unsigned i = 0; i < p->nconns && !done; i++) {
		struct conn *c = p->conns[i];
		for (struct unit *u = c->held; u; u = u->next) {
			if (created ? u->created : u->max_rev >= rev) {
				release_units(p, c, u);
				done = true;
				break;
			}
		}
	}
	pthread_mutex_unlock(&p->mu);
	if (done)
		wake(p);
	return done;
}

bool lagproxy_release_watch_created(struct lagproxy *p)
{
	return lagproxy_release_watch_marked(p, true, 0);
}

bool lagproxy_release_watch_through_rev(struct lagproxy *p, int64_t rev)
{
	return lagproxy_release_watch_marked(p, false, rev);
}

void lagproxy_hold_replies(struct lagproxy *p, bool hold)
{
	pthread_mutex_lock(&p->mu);
	p->hold_replies = hold;
	if (!hold)
		for (unsigned i = 0; i < p->nconns; i++) {
			struct conn *c = p->conns[i];
			to_client(c, c->hreplies.p, c->hreplies.len);
			p->st.replies_held_bytes -= c->hreplies.len;
			c->hreplies.len = 0;
			if (c->cut_held) {
				to_client(c, LP_CUT_REPLY, strlen(LP_CUT_REPLY));
				c->cut_held = false;
				c->close_after = true;
			}
		}
	pthread_mutex_unlock(&p->mu);
	wake(p);
}

void lagproxy_drop_next_txn_reply(struct lagproxy *p)
{
	pthread_mutex_lock(&p->mu);
	p->drop_next = true;
	pthread_mutex_unlock(&p->mu);
}

void lagproxy_get_stats(struct lagproxy *p, struct lagproxy_stats *ret)
{
	pthread_mutex_lock(&p->mu);
	*ret = p->st;
	pthread_mutex_unlock(&p->mu);
}
