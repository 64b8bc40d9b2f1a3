/* SPDX-License-Identifier: MIT */
/*
 * http_api.c - the dashboard: the page at / and its JSON under /api/v1/
 * (http.h design notes; the shapes in docs/observability.md). Runs on
 * nng's threads only; every answer comes from a referenced snapshot.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_internal.h"
#include "http/http_query.h"

#define HTTP_API_JSON "application/json; charset=utf-8"

/* the page runs its inline script and style and talks to this origin only */
#define HTTP_API_CSP                                                                      \
	"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "    \
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; " \
	"frame-ancestors 'none'"

static void http_api_on_page(nng_aio *aio)
{
	nng_http_res *res;
	int rv = nng_http_res_alloc(&res);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", "text/html; charset=utf-8");
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Security-Policy", HTTP_API_CSP);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff");
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Cache-Control", "no-store");
	if (rv == 0) /* static data: nng may point at it */
		rv = nng_http_res_set_data(res, http_dashboard_html, http_dashboard_html_len);
	http_finish(aio, res, rv);
}

/* an {"error": why} answer; why is one of our own strings (no escaping
 * needed beyond what is done: it never holds a quote or a backslash) */
static void http_api_error(nng_aio *aio, uint16_t status, const char *why)
{
	char buf[400];
	int n = snprintf(buf, sizeof(buf), "{\"error\": \"%s\"}\n", why);
	size_t len = n < 0 ? 0 : (size_t)n >= sizeof(buf) ? sizeof(buf) - 1 : (size_t)n;
	http_reply(aio, status, HTTP_API_JSON, buf, len);
}

/* /api/v1/events?since=N (the guard held it until the generation passed
 * N or the wait ended): the current generation */
static void http_api_events(nng_aio *aio, struct http_server *s, const char *uri)
{
	static const char *const known[] = {"since", NULL};
	const char *why = NULL;
	uint64_t since = 0;
	if (http_query_check(uri, known, &why) < 0 || http_query_u64(uri, "since", &since) < 0) {
		http_api_error(aio, 400, why ? why : "since must be a decimal number");
		return;
	}
	struct http_snapshot *snap = http_snap_get(s);
	uint64_t gen = snap ? snap->generation : 0;
	http_snap_put(s, snap);
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "{\"generation\": %" PRIu64 "}\n", gen);
	http_reply(aio, 200, HTTP_API_JSON, buf, (size_t)n);
}

/* route's query: "plugins" takes none, "members" and "history" a plugin */
static bool http_api_plugin_arg(nng_aio *aio, const char *route, const char *uri, char *plugin,
                                size_t len)
{
	static const char *const none[] = {NULL}, *const one[] = {"plugin", NULL};
	bool wants = strcmp(route, "plugins") != 0;
	const char *why = NULL;
	if (http_query_check(uri, wants ? one : none, &why) < 0) {
		http_api_error(aio, 400, why ? why : "bad query");
		return false;
	}
	if (wants && http_query_get(uri, "plugin", plugin, len) != 1) {
		http_api_error(aio, 400, "this route needs ?plugin=NAME");
		return false;
	}
	return true;
}

static void http_api_on_api(nng_aio *aio)
{
	static const char *const routes[] = {"plugins", "members", "history"};
	struct http_server *s = http_server_of(aio);
	const char *uri = nng_http_req_get_uri(nng_aio_get_input(aio, 0));
	const char *route = NULL;
	if (uri && http_target_path_is(uri, "/api/v1/events")) {
		http_api_events(aio, s, uri);
		return;
	}
	for (size_t i = 0; uri && i < sizeof(routes) / sizeof(routes[0]); i++) {
		char path[32];
		snprintf(path, sizeof(path), "/api/v1/%s", routes[i]);
		if (http_target_path_is(uri, path))
			route = routes[i];
	}
	if (!route) {
		http_api_error(aio, 404, "no such route (plugins, members, history, events)");
		return;
	}
	char plugin[HTTP_QUERY_VALUE_MAX + 1] = "";
	if (!http_api_plugin_arg(aio, route, uri, plugin, sizeof(plugin)))
		return;
	char tmp[128];
	pthread_mutex_lock(&s->mu);
	const char *stale = http_stale_reason(s, tmp, sizeof(tmp));
	char why[128];
	snprintf(why, sizeof(why), "%s", stale ? stale : "");
	http_api_fn fn = s->api_fn;
	void *ud = s->api_ud;
	pthread_mutex_unlock(&s->mu);
	struct http_snapshot *snap = http_snap_get(s);
	if (stale || !fn || !snap || !snap->api) {
		http_snap_put(s, snap);
		http_api_error(aio, 503, stale ? why : "starting: no dashboard data published yet");
		return;
	}
	struct http_api_answer a = {.status = 500};
	fn(ud, snap->api, route, plugin[0] ? plugin : NULL, &a);
	http_snap_put(s, snap);
	if (!a.body)
		http_api_error(aio, 500, "out of memory");
	else
		http_reply(aio, a.status, HTTP_API_JSON, a.body, a.len);
	free(a.body);
}

int http_api_add_handlers(struct http_server *s)
{
	int rv = http_add_handler(s, "/", http_api_on_page, false);
	if (rv == 0)
		rv = http_add_handler(s, "/api/v1", http_api_on_api, true);
	return rv;
}
