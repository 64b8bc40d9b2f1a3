/* SPDX-License-Identifier: MIT */
/*
 * http.h - the daemon's HTTP endpoint for metrics and probes, served by
 * nng's HTTP server: GET /metrics, /healthz, /readyz/NAME, /leader/NAME.
 *
 * Design notes
 * - nng runs the handlers on its own threads; the daemon's state lives on
 *   the loop thread, which must never wait for a client. So the two meet
 *   only in a snapshot: the loop builds a complete answer set (the metrics
 *   text, health, and per plugin ready/leader with reasons) and hands it to
 *   http_server_publish(), which swaps it in under a mutex held for a
 *   pointer swap; a handler copies what it needs from the current snapshot
 *   under the same mutex and answers without touching the loop. A flood of
 *   requests costs nng's threads and a mutex held for a memcpy, never a
 *   keepalive.
 * - A wedged loop stops publishing: every snapshot carries its loop_now()
 *   time, and a snapshot older than stale_after_ns makes /healthz, /readyz
 *   and /leader answer 503 ("event loop stalled"), because a node whose loop
 *   does not run cannot vouch for anything it published earlier. /metrics
 *   still serves the old text, followed by two families written when the
 *   request is answered: leasehold_metrics_snapshot_age_seconds (how old
 *   it is) and leasehold_time_seconds (the node's wall clock).
 * - Hostile input: the public address belongs to a front (http_guard.h)
 *   that bounds size, shape, time and number of requests and passes nng a
 *   minimal request line only. Behind it, only GET (and HEAD, which nng
 *   maps to GET) reaches a handler; nng answers other methods on known
 *   paths 405 and unknown paths 404. Names after /readyz/ and /leader/ are
 *   only compared with the snapshot's names, never used otherwise.
 * - The dashboard (docs/observability.md): /api/v1/plugins, /members and
 *   /history answer from the snapshot's api part, which the publisher
 *   builds (the server never interprets it) and renders on request with
 *   its http_api_fn on nng's thread, holding a reference on the snapshot
 *   (not the mutex: that is held for a reference count only). Nothing is
 *   rendered unless asked. /api/v1/events?since=N is the live update: the
 *   guard holds it until the snapshot's generation passes N (the publisher
 *   bumps it when the api part changed) or HTTP_EVENTS_WAIT_MS pass, then
 *   it answers {"generation": G}. A waiting browser costs one connection of
 *   the guard's max_conns and no thread. Query strings: http_query.h.
 */
#ifndef LH_HTTP_H
#define LH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_server;

/* the default of --http: see docs (outside the fully allocated Prometheus
 * exporter range 9100-9999 and the ephemeral port ranges) */
#define HTTP_DEFAULT_ADDR "127.0.0.1:8379"

struct http_plugin_state {
	char *name;         /* owned by the snapshot */
	bool ready;         /* may serve (election_info.ready) */
	char *not_ready;    /* why not, or NULL when ready */
	bool leader;        /* this node leads the plugin */
	char *not_leader;   /* why not (e.g. "leader is node-b"), or NULL */
	char *note;         /* appended to /readyz's line whatever its answer
	                     * (a configuration error), or NULL */
};

/* One answer set. Everything is owned by the snapshot once published. */
struct http_snapshot {
	char *metrics; /* text exposition 0.0.4, NUL-terminated */
	size_t metrics_len;
	bool healthy;
	char *unhealthy; /* one line: why not healthy, NULL when healthy */
	struct http_plugin_state *plugins;
	size_t n_plugins;
	uint64_t published_at; /* loop_now(); set by http_server_publish */
	/* the dashboard's data, opaque to the server; owned by the snapshot
	 * and freed with api_free (both may be NULL: no dashboard data) */
	void *api;
	void (*api_free)(void *api);
	/* changes when api's content changed (never goes back); 0 = no data */
	uint64_t generation;
	unsigned refs; /* the server's: leave 0 */
};

/* how long /api/v1/events waits for a newer generation before it answers
 * the current one (a browser asks again at once) */
#define HTTP_EVENTS_WAIT_MS 25000

/* One answer of the api renderer. */
struct http_api_answer {
	uint16_t status; /* 200, or 404 / 500 with an {"error": ...} body */
	char *body;      /* malloc'd JSON; the server frees it */
	size_t len;
};

/* http_api_fn - render route ("plugins", "members" or "history") of the
 * snapshot's api part (borrowed; never NULL) for plugin (a validated name
 * of 1..255 [A-Za-z0-9._-], or NULL for "plugins") into *ret. Runs on one
 * of nng's threads, concurrently with itself and with the publisher: it
 * may read api and nothing else of the daemon. */
typedef void (*http_api_fn)(void *ud, const void *api, const char *route, const char *plugin,
                            struct http_api_answer *ret);

/* http_snapshot_free - free a snapshot and what it holds. Accepts NULL. */
void http_snapshot_free(struct http_snapshot *s);

/* http_parse_addr - "ADDR:PORT" (a name, an IPv4 address, or "[IPV6]")
 * into host (brackets removed) and port (digits). Returns 0, or -EINVAL (no
 * port, port not 0..65535, empty address, or does not fit). */
int http_parse_addr(const char *addr, char *host, size_t host_len, char *port, size_t port_len);

/* http_server_new - listen on addr ("ADDR:PORT", see http_parse_addr) and
 * start serving. Until the first publish every probe answers 503 ("starting")
 * and /metrics 503. stale_after_ns: see the design notes. On failure returns
 * -errno (-EADDRINUSE, -EINVAL, ...) with a message in err. */
int http_server_new(const char *addr, uint64_t stale_after_ns, struct http_server **ret,
                    char *err, size_t err_len);

/* http_server_port - the TCP port bound (useful with port 0). */
int http_server_port(struct http_server *s);

/* http_server_publish - make snap the current answer set (takes ownership
 * of snap; the previous one is freed). Any thread; the loop in the daemon. */
void http_server_publish(struct http_server *s, struct http_snapshot *snap);

/* http_server_set_api - the renderer of /api/v1/ (until it is set, or
 * while a snapshot has no api part, the API answers 503). Any thread. */
void http_server_set_api(struct http_server *s, http_api_fn fn, void *ud);

/* http_server_free - stop serving (waits for handlers in progress), free.
 * Accepts NULL. */
void http_server_free(struct http_server *s);

#endif
