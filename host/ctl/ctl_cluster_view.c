/* SPDX-License-Identifier: MIT */
/*
 * ctl_cluster_view.c - a plugin's records in etcd -> the control structs of a
 * plugin and its node rows (ctl_cluster_view.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_cluster_view.h"
#include "election/election.h"
#include "election/election_pin.h"
#include "election/election_release_rule.h"
#include "proto/leasehold.pb-c.h"

/* the part of kv's key after "prefix/name/", or NULL when outside */
static const char *cluster_view_suffix(const char *base, size_t bl, const struct etcd_kv *kv, size_t *ret_len)
{
	if (kv->key_len < bl || memcmp(kv->key, base, bl) != 0)
		return NULL;
	*ret_len = kv->key_len - bl;
	return (const char *)kv->key + bl;
}

static bool cluster_view_is(const char *s, size_t n, const char *word)
{
	return n == strlen(word) && memcmp(s, word, n) == 0;
}

/* the node id after "dir/" in s, validated as the mirror does */
static bool cluster_view_node_under(const char *s, size_t n, const char *dir, const char **ret_id,
                       size_t *ret_len)
{
	size_t dl = strlen(dir);
	if (n <= dl || memcmp(s, dir, dl) != 0)
		return false;
	const char *id = s + dl;
	size_t idl = n - dl;
	if (idl > NODE_RECORD_NODE_MAX || memchr(id, '/', idl) || memchr(id, '\0', idl))
		return false;
	*ret_id = id;
	*ret_len = idl;
	return true;
}

/* keep - a printable copy of s[0..n) (no NUL in it) owned by the view */
static char *cluster_view_keep(struct cluster_view *v, const char *s, size_t n)
{
	char *d = election_dup_printable(s, n);
	if (d)
		v->strs[v->n_strs++] = d;
	return d;
}

static char *cluster_view_base_of(const char *prefix, const char *name)
{
	char *b = NULL;
	if (asprintf(&b, "%s/%s/", prefix, name) < 0)
		return NULL;
	return b;
}

const char *cluster_view_leader(const char *prefix, const char *name,
                                const struct etcd_kv *const *kvs, size_t n)
{
	char *base = cluster_view_base_of(prefix, name);
	const struct etcd_kv *best = NULL;
	if (!base)
		return NULL;
	size_t bl = strlen(base), sl;
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		if (!s || sl <= 9 || memcmp(s, "election/", 9) != 0 ||
		    !election_key_is_candidate(kvs[i], bl + 9))
			continue;
		if (!best || kvs[i]->create_revision < best->create_revision)
			best = kvs[i];
	}
	free(base);
	return best && best->value_len ? (const char *)best->value : NULL;
}

static bool cluster_view_candidate(const char *base, size_t bl, const struct etcd_kv *const *kvs, size_t n,
                      const char *node)
{
	size_t sl;
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		if (s && sl > 9 && memcmp(s, "election/", 9) == 0 &&
		    election_key_is_candidate(kvs[i], bl + 9) && kvs[i]->value_len == strlen(node) &&
		    memcmp(kvs[i]->value, node, kvs[i]->value_len) == 0)
			return true;
	}
	return false;
}

/* the live election keys carrying node, and whether they are more than one
 * node's runs (node_sessions_conflict: rec is its state record, bound to
 * rec_lease, or NULL) */
static uint32_t cluster_view_sessions(const char *base, size_t bl, const struct etcd_kv *const *kvs,
                                      size_t n, const char *node, const struct node_record *rec,
                                      int64_t rec_lease, bool *ret_conflict)
{
	int64_t leases[16];
	size_t k = 0, m = 0, sl;
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		if (s && sl > 9 && memcmp(s, "election/", 9) == 0 &&
		    election_key_is_candidate(kvs[i], bl + 9) && kvs[i]->value_len == strlen(node) &&
		    memcmp(kvs[i]->value, node, kvs[i]->value_len) == 0) {
			if (m < sizeof(leases) / sizeof(leases[0]))
				leases[m++] = kvs[i]->lease;
			k++;
		}
	}
	*ret_conflict = k > m || node_sessions_conflict(leases, m, rec, rec_lease);
	return (uint32_t)k;
}

/* the release rule over the member records and the status read, under the
 * pin, as every host's mirror applies it; p's acting fields. 0 or -ENOMEM. */
static int cluster_view_rule(const char *base, size_t bl, const struct etcd_kv *const *kvs,
                             size_t n, const struct rule_pin *pin, struct control_plugin *p)
{
	struct relcount *rc = calloc(n ? n : 1, sizeof(*rc));
	size_t n_rc = 0, sl;
	bool invalid = false;
	struct rule_status st = {.valid = false};
	const char *id;
	size_t idl;
	if (!rc)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		struct rule_release rr;
		if (s && cluster_view_is(s, sl, "status")) {
			struct status_rec x;
			election_status_decode(kvs[i]->value, kvs[i]->value_len, &x);
			st = (struct rule_status){.valid = x.valid, .version = x.version,
			                          .min_compatible = x.min_compatible};
		}
		if (!s || !cluster_view_node_under(s, sl, "members/", &id, &idl))
			continue;
		if (election_decode_member_rule(kvs[i]->value, kvs[i]->value_len, &rr, NULL) < 0) {
			invalid = true;
			continue;
		}
		size_t j = 0;
		while (j < n_rc && !release_rule_equal(&rc[j].rr, &rr))
			j++;
		if (j == n_rc)
			rc[n_rc++] = (struct relcount){.rr = rr, .count = 0};
		rc[j].count++;
	}
	struct rule_answer a;
	release_rule_decide_pinned(NULL, rc, n_rc, invalid, &st, pin, &a);
	free(rc);
	p->has_acting = a.basis != RULE_NONE;
	p->acting_release = a.release;
	p->acting_basis = release_rule_basis_text(a.basis);
	return 0;
}

/* what cluster_view_build's steps share while they decode one range */
struct cluster_view_build {
	struct cluster_view *v;
	const char *base; /* "P/N/" */
	size_t bl;
	const struct etcd_kv *const *kvs;
	size_t n;
	/* the node state records (P/N/nodes/ID), in key order */
	bool *rec_ok; /* decoded, and for the node its key names */
	const char **rec_id;
	int64_t *rec_lease;
	size_t n_recs;
	struct releases rel; /* over the member records */
	bool have_rel;
};

/* cluster_view_build_records - the node state records first: the member
 * rows refer to them. 0 or -ENOMEM. */
static int cluster_view_build_records(struct cluster_view_build *b)
{
	const char *id, *s;
	size_t sl, idl;
	for (size_t i = 0; i < b->n; i++) {
		s = cluster_view_suffix(b->base, b->bl, b->kvs[i], &sl);
		if (!s || !cluster_view_node_under(s, sl, "nodes/", &id, &idl))
			continue;
		size_t k = b->n_recs;
		if (!(b->rec_id[k] = cluster_view_keep(b->v, id, idl)))
			return -ENOMEM;
		b->rec_ok[k] = node_record_decode(b->kvs[i]->value, b->kvs[i]->value_len,
		                                  &b->v->recs[k]) == 0 &&
		               strcmp(b->v->recs[k].node, b->rec_id[k]) == 0;
		b->rec_lease[k] = b->kvs[i]->lease;
		b->n_recs++;
	}
	return 0;
}

/* cluster_view_build_member - member record kv of node id: a row (its
 * release counted); a record whose release is unknown is not listed, as
 * by the daemon. 0 or -ENOMEM. */
static int cluster_view_build_member(struct cluster_view_build *b, const struct etcd_kv *kv,
                                     const char *id, size_t idl)
{
	struct rule_release rr;
	if (election_decode_member_rule(kv->value, kv->value_len, &rr, NULL) < 0)
		return 0;
	struct release mr = rr.release;
	struct control_member *m = &b->v->rows[b->v->n_rows++];
	if (!(m->node_id = cluster_view_keep(b->v, id, idl)))
		return -ENOMEM;
	m->release = mr;
	m->unhealthy = rr.unhealthy;
	m->unhealthy_until = rr.unhealthy_until;
	if (!b->have_rel || release_less(mr, b->rel.min))
		b->rel.min = mr;
	if (!b->have_rel || release_less(b->rel.max, mr))
		b->rel.max = mr;
	b->have_rel = true;
	b->rel.n_members++;
	return 0;
}

/* cluster_view_build_pause - the pause record (P/N/paused) */
static void cluster_view_build_pause(struct cluster_view *v, const struct etcd_kv *kv)
{
	struct control_plugin *p = &v->plugin;
	p->paused = true;
	Leasehold__Pause *pp = leasehold__pause__unpack(NULL, kv->value_len, kv->value);
	if (!pp) {
		p->pause_error = "the pause record does not decode (treated as paused)";
		return;
	}
	size_t bn = strnlen(pp->node, 128);
	p->paused_by = bn ? cluster_view_keep(v, pp->node, bn) : NULL;
	p->paused_at = pp->at_unix;
	leasehold__pause__free_unpacked(pp, NULL);
}

/* cluster_view_build_pin - the pin record (P/N/pin) */
static void cluster_view_build_pin(struct cluster_view *v, const struct etcd_kv *kv)
{
	struct control_plugin *p = &v->plugin;
	struct rule_pin pin;
	char by[129];
	if (election_pin_decode(kv->value, kv->value_len, &pin, by, sizeof(by), &p->pin_at) < 0) {
		p->pin_error = "the pin record does not decode (ignored: no pin)";
		return;
	}
	p->pinned = true;
	p->pin_forced = pin.forced;
	p->pin = pin.release;
	p->pin_by = by[0] ? cluster_view_keep(v, by, strlen(by)) : NULL;
}

/* cluster_view_build_plugin_key - one key of the range that is the
 * plugin's own (status, pause, pin, reconcile requests); others are not */
static void cluster_view_build_plugin_key(struct cluster_view *v, const struct etcd_kv *kv,
                                          const char *s, size_t sl)
{
	struct control_plugin *p = &v->plugin;
	if (cluster_view_is(s, sl, "status")) {
		struct status_rec st;
		election_status_decode(kv->value, kv->value_len, &st);
		p->status_present = true;
		p->status_state = election_status_state_name(st.valid, st.state);
		p->status_version = st.version;
		p->status_min_compatible = st.min_compatible;
	} else if (cluster_view_is(s, sl, "paused")) {
		cluster_view_build_pause(v, kv);
	} else if (cluster_view_is(s, sl, PIN_KEY)) {
		cluster_view_build_pin(v, kv);
	} else if (cluster_view_is(s, sl, "reconcile-request")) {
		p->reconcile_requested = kv->mod_revision;
	} else if (cluster_view_is(s, sl, "reconcile-served")) {
		Leasehold__ReconcileServed *q =
			leasehold__reconcile_served__unpack(NULL, kv->value_len, kv->value);
		if (q) {
			p->reconcile_served = q->request_revision;
			p->reconcile_served_ok = q->ok;
			leasehold__reconcile_served__free_unpacked(q, NULL);
		}
	}
}

/* cluster_view_build_keys - the member rows and the plugin's records.
 * 0 or -ENOMEM. */
static int cluster_view_build_keys(struct cluster_view_build *b)
{
	const char *id, *s;
	size_t sl, idl;
	for (size_t i = 0; i < b->n; i++) {
		if (!(s = cluster_view_suffix(b->base, b->bl, b->kvs[i], &sl)))
			continue;
		if (cluster_view_node_under(s, sl, "members/", &id, &idl)) {
			if (cluster_view_build_member(b, b->kvs[i], id, idl) < 0)
				return -ENOMEM;
		} else {
			cluster_view_build_plugin_key(b->v, b->kvs[i], s, sl);
		}
	}
	return 0;
}

/* cluster_view_build_rows - the node rows: each member with its record,
 * then the records without a member */
static void cluster_view_build_rows(struct cluster_view_build *b)
{
	struct cluster_view *v = b->v;
	const struct control_plugin *p = &v->plugin;
	size_t n_members = v->n_rows;
	for (size_t k = 0; k < n_members; k++) {
		struct control_member *m = &v->rows[k];
		m->leader = p->leader && strcmp(p->leader, m->node_id) == 0;
		m->campaigning = cluster_view_candidate(b->base, b->bl, b->kvs, b->n, m->node_id);
		int64_t lease = 0;
		for (size_t j = 0; j < b->n_recs; j++)
			if (strcmp(b->rec_id[j], m->node_id) == 0) {
				m->record = b->rec_ok[j] ? &v->recs[j] : NULL;
				m->record_invalid = !b->rec_ok[j];
				lease = b->rec_lease[j];
			}
		m->sessions = cluster_view_sessions(b->base, b->bl, b->kvs, b->n, m->node_id,
		                                    m->record, lease, &m->conflict);
	}
	for (size_t j = 0; j < b->n_recs; j++) {
		bool listed = false;
		for (size_t k = 0; k < n_members; k++)
			listed = listed || strcmp(v->rows[k].node_id, b->rec_id[j]) == 0;
		if (listed || !b->rec_ok[j])
			continue;
		struct control_member *m = &v->rows[v->n_rows++];
		m->node_id = b->rec_id[j];
		m->release = v->recs[j].release;
		m->leader = p->leader && strcmp(p->leader, m->node_id) == 0;
		m->campaigning = cluster_view_candidate(b->base, b->bl, b->kvs, b->n, m->node_id);
		m->no_member_record = true;
		m->record = &v->recs[j];
		m->sessions = cluster_view_sessions(b->base, b->bl, b->kvs, b->n, m->node_id,
		                                    m->record, b->rec_lease[j], &m->conflict);
	}
}

/* cluster_view_build_steps - the view of b's range, step by step; 0 or
 * -ENOMEM */
static int cluster_view_build_steps(struct cluster_view_build *b, const char *prefix,
                                    const char *name, int64_t config_revision)
{
	struct control_plugin *p = &b->v->plugin;
	p->name = b->v->name;
	p->state = CLUSTER_VIEW_STATE;
	p->not_ready = "observer mode: no plugin runs here";
	p->config_revision = config_revision;
	const char *leader = cluster_view_leader(prefix, name, b->kvs, b->n);
	/* (kvs are the caller's: the view keeps a copy) */
	if (leader &&
	    !(p->leader = cluster_view_keep(b->v, leader, strnlen(leader, NODE_RECORD_NODE_MAX))))
		return -ENOMEM;
	if (cluster_view_build_records(b) < 0 || cluster_view_build_keys(b) < 0)
		return -ENOMEM;
	p->releases = b->rel;
	struct rule_pin pin = {.set = p->pinned, .forced = p->pin_forced, .release = p->pin};
	if (cluster_view_rule(b->base, b->bl, b->kvs, b->n, &pin, p) < 0)
		return -ENOMEM;
	cluster_view_build_rows(b);
	return 0;
}

int cluster_view_build(const char *prefix, const char *name, const struct etcd_kv *const *kvs,
                       size_t n, int64_t revision, int64_t config_revision,
                       struct cluster_view **ret)
{
	struct cluster_view *v = calloc(1, sizeof(*v));
	char *base = cluster_view_base_of(prefix, name);
	size_t m = n ? n : 1;
	struct cluster_view_build b = {.v = v, .base = base, .kvs = kvs, .n = n,
	                               .rel = {.revision = revision}};
	int r = -ENOMEM;
	if (v && base) {
		v->name = strdup(name);
		/* at most: per key a node id, plus a few fixed strings */
		v->strs = calloc(2 * n + 4, sizeof(*v->strs));
		v->rows = calloc(m, sizeof(*v->rows));
		v->recs = calloc(m, sizeof(*v->recs));
		b.bl = strlen(base);
		b.rec_ok = calloc(m, sizeof(*b.rec_ok));
		b.rec_id = calloc(m, sizeof(*b.rec_id));
		b.rec_lease = calloc(m, sizeof(*b.rec_lease));
		if (v->name && v->strs && v->rows && v->recs && b.rec_ok && b.rec_id && b.rec_lease)
			r = cluster_view_build_steps(&b, prefix, name, config_revision);
	}
	free(b.rec_ok);
	free(b.rec_id);
	free(b.rec_lease);
	free(base);
	if (r < 0) {
		cluster_view_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

void cluster_view_free(struct cluster_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n_strs; i++)
		free(v->strs[i]);
	free(v->strs);
	free(v->rows);
	free(v->recs);
	free(v->name);
	free(v);
}
