/* SPDX-License-Identifier: MIT */
/*
 * control_json.c - the documented JSON objects of a control Response's
 * plugins, node rows and terms: what `leaseholdctl -o json` prints and what
 * the daemon's /api/v1/ answers (docs/leaseholdctl-output.md, docs/observability.md).
 * One encoder for both, so the shapes cannot drift apart.
 */
#include "config.h"

#include <stdint.h>
#include <time.h>

#include <json-c/json.h>

#include "base/release.h"
#include "control/control_codec.h"
#include "control/control_json.h"

const char *control_json_fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if (t <= 0 || !gmtime_r(&tt, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return NULL;
	return buf;
}

json_object *control_json_str_or_null(const char *s)
{
	return (s && s[0]) ? json_object_new_string(s) : NULL;
}

static json_object *control_json_release(const Leasehold__Control__Release *r)
{
	char b[RELEASE_STRLEN];
	return r ? json_object_new_string(release_format(control_codec_release(r), b, sizeof(b))) : NULL;
}

static int64_t control_json_clamp_u64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* a keyed plugin's work queue (ABI 1.3), or NULL (JSON null) for another */
static json_object *control_json_queue(const Leasehold__Control__Plugin *p)
{
	if (!p->keyed)
		return NULL;
	json_object *q = json_object_new_object();
	json_object_object_add(q, "depth", json_object_new_int64(control_json_clamp_u64(p->keys_depth)));
	json_object_object_add(q, "waiting", json_object_new_int64(control_json_clamp_u64(p->keys_waiting)));
	json_object_object_add(q, "oldest_ms",
			       json_object_new_int64(control_json_clamp_u64(p->keys_oldest_ms)));
	json_object_object_add(q, "done", json_object_new_int64(control_json_clamp_u64(p->keys_done)));
	json_object_object_add(q, "failed", json_object_new_int64(control_json_clamp_u64(p->keys_failed)));
	json_object_object_add(q, "running", json_object_new_int64(control_json_clamp_u64(p->keys_running)));
	json_object_object_add(q, "concurrency",
			       json_object_new_int64(control_json_clamp_u64(p->keys_concurrency)));
	return q;
}

json_object *control_json_plugin(const Leasehold__Control__Plugin *p)
{
	json_object *o = json_object_new_object(), *rs, *st = NULL, *rc;
	char tb[64];
	const Leasehold__Control__Releases *r = p->releases;
	const Leasehold__Control__Reconcile *c = p->reconcile;

	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "file", control_json_str_or_null(p->file));
	json_object_object_add(o, "release", control_json_release(p->release));
	json_object_object_add(o, "state", json_object_new_string(p->state));
	json_object_object_add(o, "leader", control_json_str_or_null(p->leader));
	json_object_object_add(o, "view_stale", json_object_new_boolean(p->view_stale));
	json_object_object_add(o, "view_stale_ms",
			       p->view_stale ? json_object_new_int64(control_json_clamp_u64(p->view_stale_ms))
					     : NULL);
	json_object_object_add(o, "ready", json_object_new_boolean(p->ready));

	rs = json_object_new_object();
	bool have = r && r->members > 0;
	json_object_object_add(rs, "min", have ? control_json_release(r->min) : NULL);
	json_object_object_add(rs, "max", have ? control_json_release(r->max) : NULL);
	json_object_object_add(rs, "revision", json_object_new_int64(r ? r->revision : 0));
	json_object_object_add(rs, "members", json_object_new_int64(r ? control_json_clamp_u64(r->members) : 0));
	json_object_object_add(o, "releases", rs);

	if (p->status) {
		st = json_object_new_object();
		json_object_object_add(st, "state", json_object_new_string(p->status->state));
		json_object_object_add(st, "version", control_json_release(p->status->version));
		json_object_object_add(st, "minimum_compatible_release",
				       control_json_release(p->status->minimum_compatible_release));
	}
	json_object_object_add(o, "status", st);

	rc = json_object_new_object();
	json_object_object_add(rc, "count", json_object_new_int64(c ? control_json_clamp_u64(c->count) : 0));
	json_object_object_add(rc, "last_ok", json_object_new_boolean(c && c->last_ok));
	json_object_object_add(rc, "last_error", control_json_str_or_null(c ? c->last_error : NULL));
	const char *at = c ? control_json_fmt_time(c->last_at, tb, sizeof(tb)) : NULL;
	json_object_object_add(rc, "last_at", at ? json_object_new_string(at) : NULL);
	json_object_object_add(o, "reconcile", rc);

	json_object_object_add(o, "error", control_json_str_or_null(p->error));
	json_object_object_add(o, "held_back", control_json_str_or_null(p->held_back));
	json_object_object_add(o, "fencing_token", json_object_new_int64(p->fencing_token));
	json_object_object_add(o, "superseded_by", control_json_str_or_null(p->superseded_by));
	json_object_object_add(o, "not_ready", control_json_str_or_null(p->not_ready));
	bool running = p->callback && p->callback[0];
	json_object_object_add(o, "callback", control_json_str_or_null(running ? p->callback : NULL));
	json_object_object_add(o, "callback_ms",
			       json_object_new_int64(running ? control_json_clamp_u64(p->callback_ms) : 0));
	json_object_object_add(o, "paused", json_object_new_boolean(p->paused));
	json_object_object_add(o, "paused_by", control_json_str_or_null(p->paused_by));
	const char *pat = control_json_fmt_time(p->paused_at, tb, sizeof(tb));
	json_object_object_add(o, "paused_at", pat ? json_object_new_string(pat) : NULL);
	json_object_object_add(o, "pause_error", control_json_str_or_null(p->pause_error));
	json_object_object_add(o, "reconcile_requested",
			       json_object_new_int64(p->reconcile_requested));
	json_object_object_add(o, "reconcile_served", json_object_new_int64(p->reconcile_served));
	json_object *nodes = json_object_new_array();
	for (size_t i = 0; i < p->n_nodes; i++)
		json_object_array_add(nodes, control_json_member(p->nodes[i]));
	json_object_object_add(o, "nodes", nodes);
	json_object_object_add(o, "config_revision", json_object_new_int64(p->config_revision));
	json_object_object_add(o, "config_error", control_json_str_or_null(p->config_error));
	json_object_object_add(o, "pin", control_json_pin(p));
	json_object_object_add(o, "pin_error", control_json_str_or_null(p->pin_error));
	json_object_object_add(o, "acting", control_json_acting(p));
	json_object *h = json_object_new_object();
	json_object_object_add(h, "healthy", json_object_new_boolean(!p->unhealthy));
	const char *hu = p->unhealthy ? control_json_fmt_time(p->unhealthy_until, tb, sizeof(tb)) : NULL;
	json_object_object_add(h, "unhealthy_until", hu ? json_object_new_string(hu) : NULL);
	json_object_object_add(h, "failures_in_row", json_object_new_int64(p->failures_in_row));
	json_object_object_add(h, "unhealthy_total",
			       json_object_new_int64(control_json_clamp_u64(p->unhealthy_total)));
	json_object_object_add(o, "health", h);
	json_object_object_add(o, "queue", control_json_queue(p));
	return o;
}

json_object *control_json_pin(const Leasehold__Control__Plugin *p)
{
	char tb[64];
	if (!p->pin)
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "release", control_json_release(p->pin));
	json_object_object_add(o, "forced", json_object_new_boolean(p->pin_forced));
	json_object_object_add(o, "by", control_json_str_or_null(p->pin_by));
	const char *at = control_json_fmt_time(p->pin_at, tb, sizeof(tb));
	json_object_object_add(o, "at", at ? json_object_new_string(at) : NULL);
	return o;
}

json_object *control_json_acting(const Leasehold__Control__Plugin *p)
{
	if (!p->acting_release)
		return NULL;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "release", control_json_release(p->acting_release));
	json_object_object_add(o, "basis", p->acting_basis && p->acting_basis[0]
						   ? json_object_new_string(p->acting_basis)
						   : NULL);
	return o;
}

json_object *control_json_member(const Leasehold__Control__Member *m)
{
	char tb[64];
	json_object *o = json_object_new_object();
	json_object_object_add(o, "node", json_object_new_string(m->node));
	json_object_object_add(o, "release", control_json_release(m->release));
	json_object_object_add(o, "leader", json_object_new_boolean(m->leader));
	json_object_object_add(o, "campaigning", json_object_new_boolean(m->campaigning));
	json_object_object_add(o, "sessions", json_object_new_int64(m->sessions));
	json_object_object_add(o, "conflict", json_object_new_boolean(m->conflict));
	json_object_object_add(o, "healthy", json_object_new_boolean(!m->unhealthy));
	const char *hu = m->unhealthy ? control_json_fmt_time(m->unhealthy_until, tb, sizeof(tb)) : NULL;
	json_object_object_add(o, "unhealthy_until", hu ? json_object_new_string(hu) : NULL);
	/* the node's own state record (null fields when it has none) */
	const Leasehold__Control__NodeState *ns = m->node_state;
	json_object_object_add(o, "local", json_object_new_boolean(m->local));
	json_object_object_add(o, "member", json_object_new_boolean(!m->no_member_record));
	json_object_object_add(o, "state", ns ? json_object_new_string(ns->state) : NULL);
	json_object_object_add(o, "reason", control_json_str_or_null(ns ? ns->reason : NULL));
	const char *at = ns ? control_json_fmt_time(ns->since, tb, sizeof(tb)) : NULL;
	json_object_object_add(o, "since", at ? json_object_new_string(at) : NULL);
	json_object_object_add(o, "ready", ns ? json_object_new_boolean(ns->ready) : NULL);
	json_object_object_add(o, "not_ready", control_json_str_or_null(ns ? ns->not_ready : NULL));
	json_object *rc = NULL;
	if (ns && ns->reconcile_at) {
		rc = json_object_new_object();
		at = control_json_fmt_time(ns->reconcile_at, tb, sizeof(tb));
		json_object_object_add(rc, "at", at ? json_object_new_string(at) : NULL);
		json_object_object_add(rc, "ok", json_object_new_boolean(ns->reconcile_ok));
		json_object_object_add(rc, "error", control_json_str_or_null(ns->reconcile_error));
	}
	json_object_object_add(o, "last_reconcile", rc);
	json_object_object_add(o, "state_record",
			       json_object_new_string(ns ? "valid"
						      : m->node_state_invalid ? "invalid"
									      : "none"));
	return o;
}

json_object *control_json_term(const Leasehold__Control__Term *t)
{
	char tb[64];
	json_object *o = json_object_new_object();
	json_object_object_add(o, "token", json_object_new_int64(t->fencing_token));
	json_object_object_add(o, "node", control_json_str_or_null(t->node));
	json_object_object_add(o, "release", t->invalid ? NULL : control_json_release(t->release));
	json_object_object_add(o, "start_revision",
			       json_object_new_int64(t->start_revision));
	const char *at = control_json_fmt_time(t->start_unix, tb, sizeof(tb));
	json_object_object_add(o, "start", at ? json_object_new_string(at) : NULL);
	json_object_object_add(o, "end_revision",
			       json_object_new_int64(t->end_revision));
	at = control_json_fmt_time(t->end_unix, tb, sizeof(tb));
	json_object_object_add(o, "end", at ? json_object_new_string(at) : NULL);
	json_object_object_add(o, "end_reason", control_json_str_or_null(t->end_reason));
	json_object_object_add(o, "end_detail", control_json_str_or_null(t->end_detail));
	json_object_object_add(o, "valid", json_object_new_boolean(!t->invalid));
	return o;
}
