/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#include "http/http.h"
#include "http/http_guard.h"
#include "http/http_internal.h"
#include "base/loop.h"

void http_snapshot_free(struct http_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_plugins; i++) {
		free(s->plugins[i].name);
		free(s->plugins[i].not_ready);
		free(s->plugins[i].not_leader);
		free(s->plugins[i].note);
	}
	free(s->plugins);
	free(s->metrics);
	free(s->unhealthy);
	if (s->api_free)
		s->api_free(s->api);
	free(s);
}

int http_parse_addr(const char *addr, char *host, size_t host_len, char *port, size_t port_len)
{
	if (!addr)
		return -EINVAL;
	const char *colon = strrchr(addr, ':');
	if (!colon || colon == addr)
		return -EINVAL;
	const char *h = addr;
	size_t hl = (size_t)(colon - addr);
	if (addr[0] == '[') { /* [v6]:port */
		if (colon[-1] != ']' || hl < 3)
			return -EINVAL;
		h++;
		hl -= 2;
	} else if (memchr(addr, ':', hl)) {
		return -EINVAL; /* an IPv6 address needs brackets */
	}
	const char *p = colon + 1;
	size_t nd = strspn(p, "0123456789");
	if (nd == 0 || nd > 5 || p[nd] != 0 || strtoul(p, NULL, 10) > 65535)
		return -EINVAL;
	if (hl + 1 > host_len || nd + 1 > port_len)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	memcpy(port, p, nd + 1);
	return 0;
}

static int http_nng_to_errno(int rv)
{
	switch (rv) {
	case NNG_EADDRINUSE:
		return -EADDRINUSE;
	case NNG_EADDRINVAL:
	case NNG_EINVAL:
		return -EINVAL;
	case NNG_ENOMEM:
		return -ENOMEM;
	case NNG_EPERM:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* finish - hand res to nng (rv 0) or drop it and fail the request */
void http_finish(nng_aio *aio, nng_http_res *res, int rv)
{
	if (rv != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

/* reply - finish a handler's aio with status and a text body (copied) */
void http_reply(nng_aio *aio, uint16_t status, const char *ctype, const char *body, size_t len)
{
	nng_http_res *res;
	int rv = nng_http_res_alloc(&res);
	if (rv == 0)
		rv = nng_http_res_set_status(res, status);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", ctype);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Cache-Control", "no-store");
	if (rv == 0)
		rv = nng_http_res_copy_data(res, body, len);
	http_finish(aio, res, rv);
}

static void http_reply_line(nng_aio *aio, uint16_t status, const char *line)
{
	char buf[1500];
	int n = snprintf(buf, sizeof(buf), "%s\n", line);
	size_t len = n < 0 ? 0 : (size_t)n >= sizeof(buf) ? sizeof(buf) - 1 : (size_t)n;
	http_reply(aio, status, "text/plain; charset=utf-8", buf, len);
}

struct http_server *http_server_of(nng_aio *aio)
{
	return nng_http_handler_get_data(nng_aio_get_input(aio, 1));
}

/* why the current snapshot cannot be trusted (NULL: it can); under s->mu */
const char *http_stale_reason(struct http_server *s, char *buf, size_t len)
{
	if (!s->snap)
		return "starting: no state published yet";
	uint64_t age = loop_now() - s->snap->published_at;
	if (age <= s->stale_after_ns)
		return NULL;
	snprintf(buf, len, "event loop stalled: no state published for %llu ms",
	         (unsigned long long)(age / LOOP_NS_PER_MS));
	return buf;
}

/* http_request_time_metrics - the families only the request can know,
 * written after the snapshot's text into buf: how old the snapshot is (a
 * wedged loop stops publishing, and its last snapshot is still served),
 * and the node's wall clock (against the scraper's: timestamp() in
 * PromQL). Returns the length written (bounded by len). */
static size_t http_request_time_metrics(uint64_t age_ns, char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int n = snprintf(buf, len,
	                 "# HELP leasehold_metrics_snapshot_age_seconds Age of the state these "
	                 "metrics show: the event loop publishes it at least every second.\n"
	                 "# TYPE leasehold_metrics_snapshot_age_seconds gauge\n"
	                 "leasehold_metrics_snapshot_age_seconds %.3f\n"
	                 "# HELP leasehold_time_seconds The node's wall clock when it answered, "
	                 "seconds since the epoch.\n"
	                 "# TYPE leasehold_time_seconds gauge\n"
	                 "leasehold_time_seconds %.3f\n",
	                 (double)age_ns / 1e9, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
	return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

/* http_copy_metrics - the current snapshot's metrics and the request-time
 * families into res; under s->mu */
static int http_copy_metrics(struct http_server *s, nng_http_res *res)
{
	char tail[512];
	size_t tl = http_request_time_metrics(loop_now() - s->snap->published_at, tail, sizeof(tail));
	size_t ml = s->snap->metrics_len;
	char *body = malloc(ml + tl);
	if (!body)
		return NNG_ENOMEM;
	memcpy(body, s->snap->metrics, ml);
	memcpy(body + ml, tail, tl);
	int rv = nng_http_res_copy_data(res, body, ml + tl);
	free(body);
	return rv;
}

static void http_on_metrics(nng_aio *aio)
{
	struct http_server *s = http_server_of(aio);
	nng_http_res *res;
	int rv = nng_http_res_alloc(&res);
	if (rv != 0) {
		nng_aio_finish(aio, rv);
		return;
	}
	pthread_mutex_lock(&s->mu);
	bool have = s->snap && s->snap->metrics;
	if (have)
		rv = http_copy_metrics(s, res);
	pthread_mutex_unlock(&s->mu);
	if (!have) {
		nng_http_res_free(res);
		http_reply_line(aio, 503, "starting: no metrics published yet");
		return;
	}
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	http_finish(aio, res, rv);
}

static void http_on_healthz(nng_aio *aio)
{
	struct http_server *s = http_server_of(aio);
	char line[300], tmp[128];
	uint16_t status = 200;
	pthread_mutex_lock(&s->mu);
	const char *why = http_stale_reason(s, tmp, sizeof(tmp));
	if (!why && !s->snap->healthy)
		why = s->snap->unhealthy ? s->snap->unhealthy : "unhealthy";
	snprintf(line, sizeof(line), "%s", why ? why : "ok");
	pthread_mutex_unlock(&s->mu);
	if (why)
		status = 503;
	http_reply_line(aio, status, line);
}

/* the NAME of "/prefix/NAME" (query string cut off) into buf; false when
 * there is none or it does not fit */
static bool http_path_name(nng_aio *aio, const char *prefix, char *buf, size_t len)
{
	const char *uri = nng_http_req_get_uri(nng_aio_get_input(aio, 0));
	size_t pl = strlen(prefix);
	if (!uri || strncmp(uri, prefix, pl) != 0 || uri[pl] != '/')
		return false;
	const char *name = uri + pl + 1;
	size_t n = strcspn(name, "?#");
	if (n == 0 || n >= len)
		return false;
	memcpy(buf, name, n);
	buf[n] = 0;
	return true;
}

/* /readyz/NAME and /leader/NAME: 200 when the plugin's flag holds, 503
 * with the reason when not (or when the snapshot is stale), 404 for an
 * unknown plugin */
static void http_plugin_probe(nng_aio *aio, const char *prefix, bool leader)
{
	struct http_server *s = http_server_of(aio);
	char name[256], line[1400], tmp[128];
	if (!http_path_name(aio, prefix, name, sizeof(name))) {
		http_reply_line(aio, 404, "no such plugin");
		return;
	}
	uint16_t status = 404;
	snprintf(line, sizeof(line), "no such plugin");
	pthread_mutex_lock(&s->mu);
	const char *why = http_stale_reason(s, tmp, sizeof(tmp));
	for (size_t i = 0; s->snap && i < s->snap->n_plugins; i++) {
		const struct http_plugin_state *p = &s->snap->plugins[i];
		if (!p->name || strcmp(p->name, name) != 0) /* NULL: out of memory when published */
			continue;
		bool yes = leader ? p->leader : p->ready;
		const char *no = leader ? p->not_leader : p->not_ready;
		if (why) {
			status = 503;
			snprintf(line, sizeof(line), "%s", why);
		} else if (yes) {
			status = 200;
			snprintf(line, sizeof(line), "%s", leader ? "leader" : "ready");
		} else {
			status = 503;
			snprintf(line, sizeof(line), "%s", no ? no : leader ? "not the leader" : "not ready");
		}
		size_t used = strlen(line);
		if (!why && !leader && p->note && used < sizeof(line))
			snprintf(line + used, sizeof(line) - used, "; %s", p->note);
		break;
	}
	if (status == 404 && why) {
		/* a plugin unknown to a stale or missing snapshot may exist */
		status = 503;
		snprintf(line, sizeof(line), "%s", why);
	}
	pthread_mutex_unlock(&s->mu);
	http_reply_line(aio, status, line);
}

/* http_readyz_is_list - the request is /readyz or /readyz/ (a query aside):
 * no plugin named */
static bool http_readyz_is_list(nng_aio *aio)
{
	const char *uri = nng_http_req_get_uri(nng_aio_get_input(aio, 0));
	size_t n = uri ? strcspn(uri, "?#") : 0;
	return uri && ((n == 7 && strncmp(uri, "/readyz", 7) == 0) ||
		       (n == 8 && strncmp(uri, "/readyz/", 8) == 0));
}

/* http_readyz_list - /readyz without a name: one line per plugin, "NAME
 * ready" or "NAME not ready: why"; 200 when every plugin is ready, 503
 * when one is not or the snapshot cannot be trusted (its reason alone) */
static void http_readyz_list(nng_aio *aio)
{
	struct http_server *s = http_server_of(aio);
	char tmp[128];
	size_t cap = 256, len = 0;
	uint16_t status = 200;
	pthread_mutex_lock(&s->mu);
	const char *why = http_stale_reason(s, tmp, sizeof(tmp));
	for (size_t i = 0; !why && s->snap && i < s->snap->n_plugins; i++) {
		const struct http_plugin_state *p = &s->snap->plugins[i];
		cap += (p->name ? strlen(p->name) : 0) + (p->not_ready ? strlen(p->not_ready) : 0) +
		       (p->note ? strlen(p->note) : 0) + 32;
	}
	char *body = malloc(cap);
	for (size_t i = 0; body && !why && s->snap && i < s->snap->n_plugins; i++) {
		const struct http_plugin_state *p = &s->snap->plugins[i];
		if (!p->name)
			continue; /* out of memory when published */
		status = p->ready ? status : 503;
		len += (size_t)snprintf(body + len, cap - len, "%s %s%s%s%s%s\n", p->name,
					p->ready ? "ready" : "not ready",
					p->ready ? "" : ": ",
					p->ready ? "" : p->not_ready ? p->not_ready : "not ready",
					p->note ? "; " : "", p->note ? p->note : "");
	}
	if (body && why) {
		len = (size_t)snprintf(body, cap, "%s\n", why);
		status = 503;
	} else if (body && len == 0) {
		len = (size_t)snprintf(body, cap, "no plugins\n");
	}
	pthread_mutex_unlock(&s->mu);
	if (!body)
		http_reply_line(aio, 500, "out of memory");
	else
		http_reply(aio, status, "text/plain; charset=utf-8", body, len);
	free(body);
}

static void http_on_readyz(nng_aio *aio)
{
	if (http_readyz_is_list(aio))
		http_readyz_list(aio);
	else
		http_plugin_probe(aio, "/readyz", false);
}

static void http_on_leader(nng_aio *aio)
{
	http_plugin_probe(aio, "/leader", true);
}

int http_add_handler(struct http_server *s, const char *path, void (*cb)(nng_aio *), bool tree)
{
	nng_http_handler *h;
	int rv = nng_http_handler_alloc(&h, path, cb);
	if (rv != 0)
		return rv;
	if ((rv = nng_http_handler_set_method(h, "GET")) != 0 ||
	    (tree && (rv = nng_http_handler_set_tree(h)) != 0) ||
	    (rv = nng_http_handler_set_data(h, s, NULL)) != 0 ||
	    (rv = nng_http_server_add_handler(s->srv, h)) != 0) {
		nng_http_handler_free(h);
		return rv;
	}
	return 0;
}

static int http_backend_port(nng_http_server *srv)
{
	nng_sockaddr sa;
	if (nng_http_server_get_addr(srv, &sa) != 0 || sa.s_family != NNG_AF_INET)
		return -1;
	return ntohs(sa.s_in.sa_port);
}

int http_server_new(const char *addr, uint64_t stale_after_ns, struct http_server **ret,
                    char *err, size_t err_len)
{
	char host[256], port[8];
	if (http_parse_addr(addr, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(err, err_len, "bad address '%s' (expected ADDR:PORT, [IPV6]:PORT)", addr);
		return -EINVAL;
	}
	struct http_server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->stale_after_ns = stale_after_ns;
	pthread_mutex_init(&s->mu, NULL);
	/* nng listens on loopback only; the guard takes the public address */
	int rv = nng_url_parse(&s->url, "http://127.0.0.1:0");
	if (rv == 0)
		rv = nng_http_server_hold(&s->srv, s->url);
	if (rv == 0)
		rv = http_add_handler(s, "/metrics", http_on_metrics, false);
	if (rv == 0)
		rv = http_add_handler(s, "/healthz", http_on_healthz, false);
	if (rv == 0)
		rv = http_add_handler(s, "/readyz", http_on_readyz, true);
	if (rv == 0)
		rv = http_add_handler(s, "/leader", http_on_leader, true);
	if (rv == 0)
		rv = http_api_add_handlers(s);
	if (rv == 0)
		rv = nng_http_server_start(s->srv);
	if (rv != 0) {
		snprintf(err, err_len, "nng's HTTP server: %s", nng_strerror(rv));
		http_server_free(s);
		return http_nng_to_errno(rv);
	}
	int bport = http_backend_port(s->srv);
	int r = bport > 0 ? http_guard_new(host, port, bport, NULL, &s->guard, err, err_len) : -EIO;
	if (r < 0) {
		if (bport <= 0)
			snprintf(err, err_len, "nng's HTTP server has no port");
		http_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int http_server_port(struct http_server *s)
{
	return http_guard_port(s->guard);
}

void http_server_publish(struct http_server *s, struct http_snapshot *snap)
{
	snap->published_at = loop_now();
	snap->refs = 1; /* the server's */
	pthread_mutex_lock(&s->mu);
	struct http_snapshot *old = s->snap;
	s->snap = snap;
	pthread_mutex_unlock(&s->mu);
	if (snap->generation && (!old || old->generation != snap->generation))
		http_guard_set_generation(s->guard, snap->generation);
	http_snap_put(s, old); /* frees outside the lock: handlers never wait for free() */
}

struct http_snapshot *http_snap_get(struct http_server *s)
{
	pthread_mutex_lock(&s->mu);
	struct http_snapshot *snap = s->snap;
	if (snap)
		snap->refs++;
	pthread_mutex_unlock(&s->mu);
	return snap;
}

void http_snap_put(struct http_server *s, struct http_snapshot *snap)
{
	if (!snap)
		return;
	pthread_mutex_lock(&s->mu);
	bool last = --snap->refs == 0;
	pthread_mutex_unlock(&s->mu);
	if (last)
		http_snapshot_free(snap);
}

void http_server_set_api(struct http_server *s, http_api_fn fn, void *ud)
{
	pthread_mutex_lock(&s->mu);
	s->api_fn = fn;
	s->api_ud = ud;
	pthread_mutex_unlock(&s->mu);
}

void http_server_free(struct http_server *s)
{
	if (!s)
		return;
	http_guard_free(s->guard); /* first: no new request reaches nng */
	if (s->srv) {
		/* stop waits for handlers in progress; release frees the handlers */
		nng_http_server_stop(s->srv);
		nng_http_server_release(s->srv);
	}
	nng_url_free(s->url);
	http_snap_put(s, s->snap); /* no handler runs any more: the last reference */
	pthread_mutex_destroy(&s->mu);
	free(s);
}
