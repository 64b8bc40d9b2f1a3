/* SPDX-License-Identifier: MIT */
/*
 * daemon_api.c - the dashboard's data (http.h, /api/v1/): at each publish
 * the loop packs the `plugins` answer of the control socket (every plugin
 * with its node rows, exactly what `leaseholdctl plugins` gets) and each
 * plugin's term history into the snapshot's api part; the HTTP threads
 * render it as the JSON of `leaseholdctl -o json` (control_json.h) only
 * when asked. The generation moves when those bytes change, which wakes
 * the browsers waiting on /api/v1/events.
 *
 * The term history lives in etcd, not in the mirror: it is read again
 * (election_history, at most 100 terms) when the plugin's leader changes
 * (its token: a node that leads again starts a new term too), and while
 * what was read does not yet show that leader's open term (the term record
 * lands after the new leader's key shows up), at most
 * DAEMON_API_HIST_TRIES times per leader. An idle cluster reads nothing.
 *
 * Threads: everything here runs on the loop, except daemon_api_render,
 * which runs on nng's threads and reads only the api part it is given.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "control/control_json.h"
#include "control/control_terms.h"
#include "daemon/daemon_internal.h"
#include "http/http.h"
#include "proto/control.pb-c.h"

#define DAEMON_API_HIST_TRIES 5

struct daemon_api_hist {
	char *name;
	uint8_t *pb; /* a packed Response carrying the terms */
	size_t len;
};

/* the snapshot's api part: immutable once published */
struct daemon_api {
	uint8_t *plugins_pb; /* the packed `plugins` Response */
	size_t plugins_len;
	struct daemon_api_hist *hist;
	size_t n_hist;
};

/* one history read in flight: owned by d->api_reads until it ends */
struct daemon_api_read {
	struct daemon_api_read *next;
	struct daemon *d;
	char name[LH_PLUGIN_NAME_MAX + 1];
	int64_t leader_token; /* 0 = no leader */
};

static void daemon_api_free(void *p)
{
	struct daemon_api *a = p;
	if (!a)
		return;
	for (size_t i = 0; i < a->n_hist; i++) {
		free(a->hist[i].name);
		free(a->hist[i].pb);
	}
	free(a->hist);
	free(a->plugins_pb);
	free(a);
}

static uint64_t daemon_api_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a */
	return h;
}

/* ---- the term history ---------------------------------------------------- */

/* the terms read show the leader's open term (or no open one without a
 * leader): nothing to read again */
static bool daemon_api_hist_current(const struct election_term *t, size_t n, int64_t leader_token)
{
	bool open = n > 0 && t[0].end_rev == 0;
	if (leader_token == 0)
		return !open;
	return open && t[0].token == leader_token;
}

static void daemon_api_on_history(void *ud, int err, const struct election_term *terms, size_t n)
{
	struct daemon_api_read *rd = ud;
	struct daemon *d = rd->d;
	for (struct daemon_api_read **p = &d->api_reads; *p; p = &(*p)->next)
		if (*p == rd) {
			*p = rd->next;
			break;
		}
	struct entry *e = daemon_find_name(d, rd->name);
	struct control_term *ct = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	if (e && err == 0 && control_terms_from(terms, n, &ct) == 0) {
		struct control_answer a = {.node = d->cfg->node_id, .terms = ct, .n_terms = n};
		if (control_answer_pack(&a, &buf, &len) == 0) {
			free(e->api_hist);
			e->api_hist = buf;
			e->api_hist_len = len;
			if (daemon_api_hist_current(terms, n, rd->leader_token))
				e->api_hist_tries = DAEMON_API_HIST_TRIES; /* done for this leader */
			daemon_publish_soon(d);
		}
	}
	free(ct);
	if (e)
		e->api_hist_busy = false;
	free(rd);
}

/* read e's history again when its leader changed (see the top) */
static void daemon_api_hist_refresh(struct daemon *d, struct entry *e, int64_t leader_token)
{
	if (e->api_hist_busy)
		return;
	if (e->api_hist_token != leader_token) {
		e->api_hist_token = leader_token;
		e->api_hist_tries = 0;
	}
	if (e->api_hist_tries >= DAEMON_API_HIST_TRIES)
		return;
	struct daemon_api_read *rd = calloc(1, sizeof(*rd));
	if (!rd)
		return;
	rd->d = d;
	snprintf(rd->name, sizeof(rd->name), "%s", e->name);
	rd->leader_token = leader_token;
	if (election_history(e->el, daemon_api_on_history, rd) < 0) {
		free(rd);
		return;
	}
	e->api_hist_tries++;
	e->api_hist_busy = true;
	rd->next = d->api_reads;
	d->api_reads = rd;
}

/* ---- building the api part (loop) ----------------------------------------- */

/* the node rows of every plugin: rows[i] (n[i]) for plugin ps[i] */
static int daemon_api_rows(struct daemon *d, const struct control_plugin *ps, size_t np,
                           struct control_member **rows, size_t *n)
{
	for (size_t i = 0; i < np; i++) {
		size_t total = 0;
		if (daemon_control_ops.members(d, ps[i].name, NULL, 0, &total) < 0 || total == 0)
			continue;
		if (!(rows[i] = calloc(total, sizeof(**rows))))
			return -ENOMEM;
		if (daemon_control_ops.members(d, ps[i].name, rows[i], total, &n[i]) < 0)
			n[i] = 0;
		n[i] = n[i] > total ? total : n[i];
	}
	return 0;
}

static int daemon_api_pack_plugins(struct daemon *d, struct daemon_api *a)
{
	size_t np = daemon_control_ops.plugins(d, NULL, 0);
	struct control_plugin *ps = calloc(np ? np : 1, sizeof(*ps));
	struct control_member **rows = calloc(np ? np : 1, sizeof(*rows));
	size_t *n = calloc(np ? np : 1, sizeof(*n));
	int r = -ENOMEM;
	if (ps && rows && n) {
		size_t got = daemon_control_ops.plugins(d, ps, np);
		np = got < np ? got : np;
		r = daemon_api_rows(d, ps, np, rows, n);
	}
	if (r == 0) {
		struct control_answer ans = {
		    .node = d->cfg->node_id,
		    .plugins = ps,
		    .n_plugins = np,
		    .plugin_nodes = (const struct control_member *const *)rows,
		    .n_plugin_nodes = n,
		};
		r = control_answer_pack(&ans, &a->plugins_pb, &a->plugins_len);
	}
	for (size_t i = 0; rows && i < np; i++)
		free(rows[i]);
	free(rows);
	free(n);
	free(ps);
	return r;
}

static int daemon_api_copy_hist(struct daemon *d, struct daemon_api *a)
{
	size_t n = 0;
	for (struct entry *e = d->entries; e; e = e->next)
		n += !e->gone && e->name[0] && e->el;
	a->hist = calloc(n ? n : 1, sizeof(*a->hist));
	if (!a->hist)
		return -ENOMEM;
	for (struct entry *e = d->entries; e && a->n_hist < n; e = e->next) {
		if (e->gone || !e->name[0] || !e->el)
			continue;
		struct election_info i;
		election_get_info(e->el, &i);
		daemon_api_hist_refresh(d, e, i.leader_token);
		struct daemon_api_hist *h = &a->hist[a->n_hist++];
		if (!(h->name = strdup(e->name)))
			return -ENOMEM;
		if (e->api_hist && !(h->pb = malloc(e->api_hist_len)))
			return -ENOMEM;
		if (e->api_hist)
			memcpy(h->pb, e->api_hist, e->api_hist_len);
		h->len = e->api_hist ? e->api_hist_len : 0;
	}
	return 0;
}

void daemon_api_fill(struct daemon *d, struct http_snapshot *snap)
{
	struct daemon_api *a = calloc(1, sizeof(*a));
	if (!a || daemon_api_pack_plugins(d, a) < 0 || daemon_api_copy_hist(d, a) < 0) {
		daemon_api_free(a); /* the API answers 503 until a publish succeeds */
		snap->generation = d->api_generation;
		return;
	}
	uint64_t h = daemon_api_hash(14695981039346656037ull, a->plugins_pb, a->plugins_len);
	for (size_t i = 0; i < a->n_hist; i++) {
		h = daemon_api_hash(h, a->hist[i].name, strlen(a->hist[i].name) + 1);
		h = daemon_api_hash(h, a->hist[i].pb, a->hist[i].len);
	}
	if (h != d->api_hash || d->api_generation == 0) {
		d->api_hash = h;
		d->api_generation++;
	}
	snap->api = a;
	snap->api_free = daemon_api_free;
	snap->generation = d->api_generation;
}

void daemon_api_fini(struct daemon *d)
{
	while (d->api_reads) {
		struct daemon_api_read *rd = d->api_reads;
		d->api_reads = rd->next;
		free(rd);
	}
}

/* ---- rendering (nng's threads) -------------------------------------------- */

static void daemon_api_answer(struct http_api_answer *ret, uint16_t status, json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	size_t len = s ? strlen(s) : 0;
	ret->status = status;
	ret->body = s ? malloc(len + 2) : NULL;
	if (ret->body) {
		memcpy(ret->body, s, len);
		ret->body[len] = '\n';
		ret->body[len + 1] = 0;
		ret->len = len + 1;
	}
	json_object_put(o);
}

static void daemon_api_not_found(struct http_api_answer *ret, const char *plugin)
{
	char why[400];
	snprintf(why, sizeof(why), "no plugin named '%s' runs on this node", plugin);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "error", json_object_new_string(why));
	daemon_api_answer(ret, 404, o);
}

static const Leasehold__Control__Plugin *daemon_api_find(const Leasehold__Control__Response *r,
                                                         const char *name)
{
	for (size_t i = 0; i < r->n_plugins; i++)
		if (r->plugins[i]->name && strcmp(r->plugins[i]->name, name) == 0)
			return r->plugins[i];
	return NULL;
}

static void daemon_api_render_history(const struct daemon_api *a, const char *plugin,
                                      struct http_api_answer *ret)
{
	const struct daemon_api_hist *h = NULL;
	for (size_t i = 0; i < a->n_hist; i++)
		if (strcmp(a->hist[i].name, plugin) == 0)
			h = &a->hist[i];
	if (!h) {
		daemon_api_not_found(ret, plugin);
		return;
	}
	Leasehold__Control__Response *r =
	    h->len ? leasehold__control__response__unpack(NULL, h->len, h->pb) : NULL;
	json_object *arr = json_object_new_array();
	for (size_t i = 0; r && i < r->n_terms; i++)
		json_object_array_add(arr, control_json_term(r->terms[i]));
	leasehold__control__response__free_unpacked(r, NULL);
	daemon_api_answer(ret, 200, arr); /* not read yet: no terms */
}

void daemon_api_render(void *ud, const void *api, const char *route, const char *plugin,
                       struct http_api_answer *ret)
{
	const struct daemon_api *a = api;
	(void)ud;
	if (strcmp(route, "history") == 0) {
		daemon_api_render_history(a, plugin, ret);
		return;
	}
	Leasehold__Control__Response *r =
	    leasehold__control__response__unpack(NULL, a->plugins_len, a->plugins_pb);
	if (!r)
		return; /* 500 */
	json_object *arr = json_object_new_array();
	const Leasehold__Control__Plugin *p = plugin ? daemon_api_find(r, plugin) : NULL;
	if (strcmp(route, "plugins") == 0) {
		for (size_t i = 0; i < r->n_plugins; i++)
			json_object_array_add(arr, control_json_plugin(r->plugins[i]));
	} else if (p) { /* members */
		for (size_t i = 0; i < p->n_nodes; i++)
			json_object_array_add(arr, control_json_member(p->nodes[i]));
	}
	if (strcmp(route, "plugins") != 0 && !p) {
		json_object_put(arr);
		daemon_api_not_found(ret, plugin);
	} else {
		daemon_api_answer(ret, 200, arr);
	}
	leasehold__control__response__free_unpacked(r, NULL);
}
