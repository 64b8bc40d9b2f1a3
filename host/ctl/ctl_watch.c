/* SPDX-License-Identifier: MIT */
/*
 * ctl_watch.c - `leaseholdctl watch [NAME]`: the cluster view's changes as
 * they happen, one line (or one JSON object) each, straight from one etcd
 * watch (ctl_observer.h).
 *
 * Design notes
 * - Once and in order: the candidates are read at revision R (now, or
 *   --from-revision), then ONE watch streams [P/N/, P/N0) (or [P/, P0) for
 *   every plugin) from R + 1 with the previous values. etcd delivers every
 *   event once, in revision order; each event makes at most one line per
 *   kind, printed before the next event is looked at. A plugin's data/ keys
 *   share the range and are dropped here (the watch carries them: name one
 *   plugin to watch less).
 * - A line is printed only when the view changes: a node state record
 *   rewritten with the same bytes (a new session) is no change; the leader
 *   is recomputed (lowest live candidate) after each election key event and
 *   printed when it differs.
 * - Values are hostile: decoded with the daemon's decoders, strings cleaned.
 * - The stream ends when interrupted, when the watch fails (compaction:
 *   exit 1 with the reason), after --timeout seconds, or once every change
 *   up to --to-revision was printed (exit 0).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ctl/ctl_cluster_view.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_views.h"
#include "election/election.h"
#include "proto/leasehold.pb-c.h"

struct wplugin {
	char *name;
	char *leader; /* NULL = none */
};

struct watcher {
	struct ctl_observer *ob;
	const char *only;
	bool json;
	int64_t to_revision;
	char base[260]; /* P/ */
	struct ctl_kvs cands; /* every election key, all plugins */
	struct wplugin *plugins;
	size_t n_plugins;
	bool done;
	int err;
	size_t lines;
};

static void ctl_watch_line_out(struct watcher *w, int64_t rev, const char *plugin, const char *kind,
                     json_object *o, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* ctl_watch_line_out - one change: a JSON line (o, consumed; revision, plugin, kind
 * and time added) or a text line "TIME REV PLUGIN: text". TIME (RFC 3339, UTC) is
 * when this client printed the change: etcd keeps no time per revision. */
static void ctl_watch_line_out(struct watcher *w, int64_t rev, const char *plugin, const char *kind,
                     json_object *o, const char *fmt, ...)
{
	char text[1024], clean[1024], pb[300], tb[64];
	const char *now = ctl_fmt_time((int64_t)time(NULL), tb, sizeof(tb));
	va_list ap;
	w->lines++;
	if (w->json) {
		json_object *l = json_object_new_object();
		json_object_object_add(l, "revision", json_object_new_int64(rev));
		json_object_object_add(l, "plugin", json_object_new_string(plugin));
		json_object_object_add(l, "kind", json_object_new_string(kind));
		json_object_object_add(l, "time", now ? json_object_new_string(now) : NULL);
		json_object_object_foreach(o, k, v) json_object_object_add(l, k, json_object_get(v));
		printf("%s\n", json_object_to_json_string_ext(l, JSON_C_TO_STRING_PLAIN |
		                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(l);
	} else {
		va_start(ap, fmt);
		vsnprintf(text, sizeof(text), fmt, ap);
		va_end(ap);
		printf("%s %" PRId64 " %s: %s\n", now ? now : "-", rev,
		       ctl_clean(plugin, pb, sizeof(pb), true),
		       ctl_clean(text, clean, sizeof(clean), false));
	}
	json_object_put(o);
	fflush(stdout);
}

static json_object *ctl_watch_jstr(const char *s)
{
	return s && s[0] ? json_object_new_string(s) : NULL;
}

static struct wplugin *ctl_watch_plugin_of(struct watcher *w, const char *name)
{
	for (size_t i = 0; i < w->n_plugins; i++)
		if (strcmp(w->plugins[i].name, name) == 0)
			return &w->plugins[i];
	struct wplugin *n = realloc(w->plugins, (w->n_plugins + 1) * sizeof(*n));
	if (!n)
		return NULL;
	w->plugins = n;
	struct wplugin *p = &w->plugins[w->n_plugins];
	p->name = strdup(name);
	p->leader = NULL;
	if (!p->name)
		return NULL;
	w->n_plugins++;
	return p;
}

/* ctl_watch_cand_apply - keep w->cands (the election keys) as etcd has them */
static void ctl_watch_cand_apply(struct watcher *w, const struct etcd_kv *kv, bool del)
{
	for (size_t i = 0; i < w->cands.n; i++) {
		struct etcd_kv *c = w->cands.kvs[i];
		if (c->key_len != kv->key_len || memcmp(c->key, kv->key, kv->key_len) != 0)
			continue;
		etcd_kv_free(c);
		if (del) {
			w->cands.kvs[i] = w->cands.kvs[--w->cands.n];
		} else {
			w->cands.kvs[i] = etcd_kv_dup(kv);
			if (!w->cands.kvs[i])
				w->cands.kvs[i] = w->cands.kvs[--w->cands.n];
		}
		return;
	}
	if (del)
		return;
	struct etcd_kv **n = realloc(w->cands.kvs, (w->cands.n + 1) * sizeof(*n));
	if (!n)
		return;
	w->cands.kvs = n;
	if ((n[w->cands.n] = etcd_kv_dup(kv)) != NULL)
		w->cands.n++;
}

static void ctl_watch_leader_check(struct watcher *w, struct wplugin *p, int64_t rev, bool print)
{
	const char *now = cluster_view_leader(ctl_observer_prefix(w->ob), p->name,
	                                      (const struct etcd_kv *const *)w->cands.kvs,
	                                      w->cands.n);
	if ((!now && !p->leader) || (now && p->leader && strcmp(now, p->leader) == 0))
		return;
	if (print) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "leader", ctl_watch_jstr(now));
		json_object_object_add(o, "previous", ctl_watch_jstr(p->leader));
		ctl_watch_line_out(w, rev, p->name, "leader", o, "leader %s (was %s)", now ? now : "none",
		         p->leader ? p->leader : "none");
	}
	free(p->leader);
	p->leader = now ? strdup(now) : NULL;
}

static bool ctl_watch_same_value(const struct etcd_kv *a, const struct etcd_kv *b)
{
	return a && b && a->value_len == b->value_len &&
	       (a->value_len == 0 || memcmp(a->value, b->value, a->value_len) == 0);
}

static void ctl_watch_on_member(struct watcher *w, const char *plugin, const char *id,
                      const struct etcd_event *ev)
{
	struct release now, was;
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	bool has_now = ev->type != ETCD_EVENT_DELETE &&
	               election_decode_member(ev->kv.value, ev->kv.value_len, &now, NULL) == 0;
	bool has_was = ev->prev_kv &&
	               election_decode_member(ev->prev_kv->value, ev->prev_kv->value_len, &was, NULL) == 0;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "node", json_object_new_string(id));
	json_object_object_add(o, "release",
	                       has_now ? json_object_new_string(release_format(now, a, sizeof(a)))
	                               : NULL);
	json_object_object_add(o, "previous_release",
	                       has_was ? json_object_new_string(release_format(was, b, sizeof(b)))
	                               : NULL);
	if (ev->type == ETCD_EVENT_DELETE) {
		json_object_object_add(o, "change", json_object_new_string("left"));
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "member", o, "member %s left", id);
	} else if (!ev->prev_kv) {
		json_object_object_add(o, "change", json_object_new_string("joined"));
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "member", o, "member %s joined (release %s)",
		         id, has_now ? a : "unknown: the record does not decode");
	} else if (ctl_watch_same_value(&ev->kv, ev->prev_kv)) {
		json_object_put(o);
	} else {
		json_object_object_add(o, "change", json_object_new_string("release"));
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "member", o, "member %s: release %s -> %s",
		         id, has_was ? b : "unknown", has_now ? a : "unknown");
	}
}

static void ctl_watch_on_node(struct watcher *w, const char *plugin, const char *id,
                    const struct etcd_event *ev)
{
	struct node_record r;
	char tb[64];
	if (ev->type != ETCD_EVENT_DELETE && ctl_watch_same_value(&ev->kv, ev->prev_kv))
		return; /* rewritten under a new lease: no change */
	json_object *o = json_object_new_object();
	json_object_object_add(o, "node", json_object_new_string(id));
	if (ev->type == ETCD_EVENT_DELETE) {
		json_object_object_add(o, "state", NULL);
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "node", o,
		         "node %s: down (its state record went with its lease)", id);
		return;
	}
	if (node_record_decode(ev->kv.value, ev->kv.value_len, &r) < 0) {
		json_object_object_add(o, "state", NULL);
		json_object_object_add(o, "state_record", json_object_new_string("invalid"));
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "node", o,
		         "node %s: its state record does not decode", id);
		return;
	}
	json_object_object_add(o, "state", json_object_new_string(r.state));
	json_object_object_add(o, "reason", ctl_watch_jstr(r.reason));
	json_object_object_add(o, "ready", json_object_new_boolean(r.ready));
	json_object_object_add(o, "not_ready", ctl_watch_jstr(r.not_ready));
	const char *at = ctl_fmt_time(r.reconcile_at, tb, sizeof(tb));
	json_object *rc = NULL;
	if (at) {
		rc = json_object_new_object();
		json_object_object_add(rc, "at", json_object_new_string(at));
		json_object_object_add(rc, "ok", json_object_new_boolean(r.reconcile_ok));
		json_object_object_add(rc, "error", ctl_watch_jstr(r.reconcile_error));
	}
	json_object_object_add(o, "last_reconcile", rc);
	ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "node", o, "node %s: %s%s%s%s, %s%s%s%s", id,
	         r.state, r.reason[0] ? " (" : "", r.reason, r.reason[0] ? ")" : "",
	         r.ready ? "ready" : "not ready", r.not_ready[0] ? ": " : "", r.not_ready,
	         at ? (r.reconcile_ok ? ", last reconcile ok" : ", last reconcile failed") : "");
}

static void ctl_watch_on_status(struct watcher *w, const char *plugin, const struct etcd_event *ev)
{
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	json_object *o = json_object_new_object();
	if (ev->type == ETCD_EVENT_DELETE) {
		json_object_object_add(o, "state", NULL);
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "status", o, "status deleted");
		return;
	}
	struct status_rec st;
	election_status_decode(ev->kv.value, ev->kv.value_len, &st);
	const char *name = election_status_state_name(st.valid, st.state);
	json_object_object_add(o, "state", json_object_new_string(name));
	json_object_object_add(o, "version",
	                       st.valid ? json_object_new_string(release_format(st.version, a,
	                                                                        sizeof(a)))
	                                : NULL);
	json_object_object_add(o, "minimum_compatible_release",
	                       st.valid ? json_object_new_string(release_format(st.min_compatible,
	                                                                        b, sizeof(b)))
	                                : NULL);
	ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "status", o,
	         "status %s %s (minimum compatible release %s)", name, st.valid ? a : "-",
	         st.valid ? b : "-");
}

static void ctl_watch_on_pause(struct watcher *w, const char *plugin, const struct etcd_event *ev)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "paused", json_object_new_boolean(ev->type != ETCD_EVENT_DELETE));
	if (ev->type == ETCD_EVENT_DELETE) {
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "pause", o, "resumed");
		return;
	}
	Leasehold__Pause *p = leasehold__pause__unpack(NULL, ev->kv.value_len, ev->kv.value);
	char by[160];
	snprintf(by, sizeof(by), "%s", p && p->node ? p->node : "");
	json_object_object_add(o, "by", ctl_watch_jstr(by));
	if (p)
		leasehold__pause__free_unpacked(p, NULL);
	ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "pause", o, "paused%s%s", by[0] ? " by " : "",
	         by);
}

static void ctl_watch_on_term(struct watcher *w, const char *plugin, const struct etcd_event *ev)
{
	char a[RELEASE_STRLEN];
	if (ev->type == ETCD_EVENT_DELETE)
		return; /* trimmed from the bounded history: no change of a term */
	Leasehold__Term *t = leasehold__term__unpack(NULL, ev->kv.value_len, ev->kv.value);
	if (!t || !t->release) {
		if (t)
			leasehold__term__free_unpacked(t, NULL);
		return;
	}
	bool ended = t->end_reason != LEASEHOLD__TERM__END_REASON__END_NONE;
	Leasehold__Term *was = ev->prev_kv ? leasehold__term__unpack(NULL, ev->prev_kv->value_len,
	                                                             ev->prev_kv->value)
	                                   : NULL;
	bool was_ended = was && was->end_reason != LEASEHOLD__TERM__END_REASON__END_NONE;
	if (was)
		leasehold__term__free_unpacked(was, NULL);
	if (ev->prev_kv && ended == was_ended) {
		leasehold__term__free_unpacked(t, NULL);
		return;
	}
	struct release r = {t->release->major, t->release->minor, t->release->patch};
	const char *reason = ended ? election_term_end_name(t->end_reason) : NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "token", json_object_new_int64(t->fencing_token));
	json_object_object_add(o, "node", ctl_watch_jstr(t->node));
	json_object_object_add(o, "release",
	                       json_object_new_string(release_format(r, a, sizeof(a))));
	json_object_object_add(o, "change", json_object_new_string(ended ? "ended" : "began"));
	json_object_object_add(o, "end_reason", ctl_watch_jstr(reason));
	json_object_object_add(o, "end_detail", ctl_watch_jstr(t->end_detail));
	if (ended)
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "history", o,
		         "term %" PRId64 " of node %s ended: %s%s%s", t->fencing_token, t->node,
		         reason, t->end_detail && t->end_detail[0] ? ": " : "",
		         t->end_detail ? t->end_detail : "");
	else
		ctl_watch_line_out(w, ev->kv.mod_revision, plugin, "history", o,
		         "term %" PRId64 " began: node %s, release %s", t->fencing_token, t->node, a);
	leasehold__term__free_unpacked(t, NULL);
}

static void ctl_watch_on_event(struct watcher *w, const struct etcd_event *ev)
{
	const struct etcd_kv *kv = &ev->kv;
	size_t bl = strlen(w->base);
	if (kv->key_len <= bl || memcmp(kv->key, w->base, bl) != 0)
		return;
	const char *s = (const char *)kv->key + bl;
	size_t sl = kv->key_len - bl;
	const char *slash = memchr(s, '/', sl);
	if (!slash || memchr(s, '\0', sl))
		return;
	char name[256], rest[300];
	size_t nl = (size_t)(slash - s), rl = sl - nl - 1;
	if (nl == 0 || nl >= sizeof(name) || rl >= sizeof(rest))
		return;
	memcpy(name, s, nl);
	name[nl] = '\0';
	memcpy(rest, slash + 1, rl);
	rest[rl] = '\0';
	if (strncmp(rest, "data/", 5) == 0 || (w->only && strcmp(w->only, name) != 0))
		return;
	bool del = ev->type == ETCD_EVENT_DELETE;
	if (strncmp(rest, "members/", 8) == 0 && rest[8] && !strchr(rest + 8, '/'))
		ctl_watch_on_member(w, name, rest + 8, ev);
	else if (strncmp(rest, "nodes/", 6) == 0 && rest[6] && !strchr(rest + 6, '/'))
		ctl_watch_on_node(w, name, rest + 6, ev);
	else if (strncmp(rest, "election/", 9) == 0) {
		struct wplugin *p = ctl_watch_plugin_of(w, name);
		ctl_watch_cand_apply(w, kv, del);
		if (p)
			ctl_watch_leader_check(w, p, kv->mod_revision, true);
	} else if (strcmp(rest, "status") == 0)
		ctl_watch_on_status(w, name, ev);
	else if (strcmp(rest, "paused") == 0)
		ctl_watch_on_pause(w, name, ev);
	else if (strncmp(rest, "term-history/", 13) == 0)
		ctl_watch_on_term(w, name, ev);
	else if (strcmp(rest, "reconcile-request") == 0 && !del) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "request", json_object_new_int64(kv->mod_revision));
		ctl_watch_line_out(w, kv->mod_revision, name, "reconcile", o, "reconcile requested");
	} else if (strcmp(rest, "config") == 0) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "config_revision",
		                       json_object_new_int64(del ? 0 : kv->mod_revision));
		ctl_watch_line_out(w, kv->mod_revision, name, "config", o, "configuration %s",
		         del ? "deleted" : "changed");
	}
}

static void ctl_watch_on_watch(struct etcd_watch *wt, int err, int64_t revision,
                     const struct etcd_event *ev, size_t n, void *ud)
{
	(void)wt;
	struct watcher *w = ud;
	if (err < 0) {
		w->err = err;
		w->done = true;
		return;
	}
	/* one batch may run past --to-revision: its later events are not
	 * printed (the loop stops with this callback, so none come after) */
	for (size_t i = 0; i < n && !w->done; i++) {
		if (w->to_revision && ev[i].kv.mod_revision > w->to_revision)
			w->done = true;
		else
			ctl_watch_on_event(w, &ev[i]);
	}
	int64_t at = n ? ev[n - 1].kv.mod_revision : revision;
	if (w->to_revision && at >= w->to_revision)
		w->done = true;
}

int ctl_observer_watch(struct ctl_observer *ob, const char *name, bool json,
                       int64_t from_revision, int64_t to_revision, int64_t timeout_ms)
{
	struct watcher w = {.ob = ob, .only = name, .json = json, .to_revision = to_revision};
	char key[512];
	uint8_t end[512];
	uint64_t deadline = loop_now() + 30 * LOOP_NS_PER_S;
	int r;

	snprintf(w.base, sizeof(w.base), "%s/", ctl_observer_prefix(ob));
	if (name)
		snprintf(key, sizeof(key), "%s%s/", w.base, name);
	else
		snprintf(key, sizeof(key), "%s", w.base);
	size_t kl = strlen(key), el = etcd_prefix_end(key, kl, end);
	/* the candidates at the start revision: the leader before the first event */
	char **names = NULL;
	size_t nn = 0;
	int64_t rev = 0;
	r = ctl_observer_plugins(ob, from_revision, deadline, &names, &nn, &rev);
	if (r == 0 && from_revision)
		rev = from_revision;
	for (size_t i = 0; r == 0 && i < nn; i++) {
		if (name && strcmp(name, names[i]) != 0)
			continue;
		char ek[512];
		struct ctl_kvs k;
		snprintf(ek, sizeof(ek), "%s%s/election/", w.base, names[i]);
		r = ctl_observer_range(ob, ek, NULL, 0, rev, false, deadline, &k);
		if (r < 0)
			break;
		for (size_t j = 0; j < k.n; j++)
			ctl_watch_cand_apply(&w, k.kvs[j], false);
		ctl_kvs_free(&k);
		struct wplugin *p = ctl_watch_plugin_of(&w, names[i]);
		if (p)
			ctl_watch_leader_check(&w, p, rev, false);
	}
	ctl_names_free(names, nn);
	struct etcd_watch *watch = NULL;
	if (r == 0)
		r = etcd_watch_start(ctl_observer_etcd(ob), key, kl, end, el, rev + 1,
		                     ETCD_WATCH_PREV_KV | ETCD_WATCH_PROGRESS_NOTIFY, ctl_watch_on_watch, &w,
		                     &watch);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: watch: %s\n", etcd_strerror(r));
		ctl_kvs_free(&w.cands);
		return r == -ETIMEDOUT ? EXIT_TIMEOUT : EXIT_NOTOK;
	}
	fprintf(stderr, "leaseholdctl: watching %s from revision %" PRId64 "\n",
	        name ? name : "every plugin", rev + 1);
	if (to_revision && rev >= to_revision)
		w.done = true; /* nothing after the start is wanted */
	uint64_t until = timeout_ms > 0 ? loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS
	                                : UINT64_MAX;
	loop_run_until(ctl_observer_loop(ob), &w.done, until);
	etcd_watch_cancel(watch);
	ctl_kvs_free(&w.cands);
	for (size_t i = 0; i < w.n_plugins; i++) {
		free(w.plugins[i].name);
		free(w.plugins[i].leader);
	}
	free(w.plugins);
	if (w.err < 0) {
		fprintf(stderr, "leaseholdctl: the watch ended: %s\n", etcd_strerror(w.err));
		return EXIT_NOTOK;
	}
	return EXIT_OK;
}
