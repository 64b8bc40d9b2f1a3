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

int cluster_view_build(const char *prefix, const char *name, const struct etcd_kv *const *kvs,
                       size_t n, int64_t revision, int64_t config_revision,
                       struct cluster_view **ret)
{
	struct cluster_view *v = calloc(1, sizeof(*v));
	char *base = cluster_view_base_of(prefix, name);
	int r = -ENOMEM;
	if (!v || !base)
		goto fail;
	v->name = strdup(name);
	/* at most: per key a node id, plus a few fixed strings */
	v->strs = calloc(2 * n + 4, sizeof(*v->strs));
	v->rows = calloc(n ? n : 1, sizeof(*v->rows));
	v->recs = calloc(n ? n : 1, sizeof(*v->recs));
	bool *rec_ok = calloc(n ? n : 1, sizeof(*rec_ok));
	const char **rec_id = calloc(n ? n : 1, sizeof(*rec_id));
	int64_t *rec_lease = calloc(n ? n : 1, sizeof(*rec_lease));
	if (!v->name || !v->strs || !v->rows || !v->recs || !rec_ok || !rec_id || !rec_lease) {
		free(rec_ok);
		free(rec_id);
		free(rec_lease);
		goto fail;
	}
	size_t bl = strlen(base), sl, idl;
	const char *id;
	struct control_plugin *p = &v->plugin;
	struct releases rel = {.revision = revision};
	bool have_rel = false;
	p->name = v->name;
	p->state = CLUSTER_VIEW_STATE;
	p->not_ready = "observer mode: no plugin runs here";
	p->config_revision = config_revision;
	const char *leader = cluster_view_leader(prefix, name, kvs, n);
	if (leader && !(p->leader = cluster_view_keep(v, leader, strnlen(leader, NODE_RECORD_NODE_MAX))))
		goto fail_arrays; /* (kvs are the caller's: the view keeps a copy) */

	/* node state records first: the member rows refer to them */
	size_t n_recs = 0;
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		if (!s || !cluster_view_node_under(s, sl, "nodes/", &id, &idl))
			continue;
		rec_id[n_recs] = cluster_view_keep(v, id, idl);
		if (!rec_id[n_recs])
			goto fail_arrays;
		rec_ok[n_recs] = node_record_decode(kvs[i]->value, kvs[i]->value_len,
		                                    &v->recs[n_recs]) == 0 &&
		                 strcmp(v->recs[n_recs].node, rec_id[n_recs]) == 0;
		rec_lease[n_recs] = kvs[i]->lease;
		n_recs++;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = cluster_view_suffix(base, bl, kvs[i], &sl);
		if (!s)
			continue;
		if (cluster_view_node_under(s, sl, "members/", &id, &idl)) {
			struct rule_release rr;
			if (election_decode_member_rule(kvs[i]->value, kvs[i]->value_len, &rr, NULL) < 0)
				continue; /* release unknown: not listed, as by the daemon */
			struct release mr = rr.release;
			struct control_member *m = &v->rows[v->n_rows++];
			m->node_id = cluster_view_keep(v, id, idl);
			if (!m->node_id)
				goto fail_arrays;
			m->release = mr;
			m->unhealthy = rr.unhealthy;
			m->unhealthy_until = rr.unhealthy_until;
			if (!have_rel || release_less(mr, rel.min))
				rel.min = mr;
			if (!have_rel || release_less(rel.max, mr))
				rel.max = mr;
			have_rel = true;
			rel.n_members++;
		} else if (cluster_view_is(s, sl, "status")) {
			struct status_rec st;
			election_status_decode(kvs[i]->value, kvs[i]->value_len, &st);
			p->status_present = true;
			p->status_state = election_status_state_name(st.valid, st.state);
			p->status_version = st.version;
			p->status_min_compatible = st.min_compatible;
		} else if (cluster_view_is(s, sl, "paused")) {
			p->paused = true;
			Leasehold__Pause *pp =
				leasehold__pause__unpack(NULL, kvs[i]->value_len, kvs[i]->value);
			if (!pp) {
				p->pause_error = "the pause record does not decode (treated as paused)";
			} else {
				size_t bn = strnlen(pp->node, 128);
				p->paused_by = bn ? cluster_view_keep(v, pp->node, bn) : NULL;
				p->paused_at = pp->at_unix;
				leasehold__pause__free_unpacked(pp, NULL);
			}
		} else if (cluster_view_is(s, sl, PIN_KEY)) {
			struct rule_pin pin;
			char by[129];
			if (election_pin_decode(kvs[i]->value, kvs[i]->value_len, &pin, by,
			                        sizeof(by), &p->pin_at) < 0) {
				p->pin_error = "the pin record does not decode (ignored: no pin)";
			} else {
				p->pinned = true;
				p->pin_forced = pin.forced;
				p->pin = pin.release;
				p->pin_by = by[0] ? cluster_view_keep(v, by, strlen(by)) : NULL;
			}
		} else if (cluster_view_is(s, sl, "reconcile-request")) {
			p->reconcile_requested = kvs[i]->mod_revision;
		} else if (cluster_view_is(s, sl, "reconcile-served")) {
			Leasehold__ReconcileServed *q = leasehold__reconcile_served__unpack(
				NULL, kvs[i]->value_len, kvs[i]->value);
			if (q) {
				p->reconcile_served = q->request_revision;
				p->reconcile_served_ok = q->ok;
				leasehold__reconcile_served__free_unpacked(q, NULL);
			}
		}
	}
	p->releases = rel;
	struct rule_pin pin = {.set = p->pinned, .forced = p->pin_forced, .release = p->pin};
	if (cluster_view_rule(base, bl, kvs, n, &pin, p) < 0)
		goto fail_arrays;
	/* node rows: each member with its record, then records without a member */
	size_t n_members = v->n_rows;
	for (size_t k = 0; k < n_members; k++) {
		struct control_member *m = &v->rows[k];
		m->leader = p->leader && strcmp(p->leader, m->node_id) == 0;
		m->campaigning = cluster_view_candidate(base, bl, kvs, n, m->node_id);
		int64_t lease = 0;
		for (size_t j = 0; j < n_recs; j++)
			if (strcmp(rec_id[j], m->node_id) == 0) {
				m->record = rec_ok[j] ? &v->recs[j] : NULL;
				m->record_invalid = !rec_ok[j];
				lease = rec_lease[j];
			}
		m->sessions = cluster_view_sessions(base, bl, kvs, n, m->node_id, m->record, lease,
		                                    &m->conflict);
	}
	for (size_t j = 0; j < n_recs; j++) {
		bool listed = false;
		for (size_t k = 0; k < n_members; k++)
			listed = listed || strcmp(v->rows[k].node_id, rec_id[j]) == 0;
		if (listed || !rec_ok[j])
			continue;
		struct control_member *m = &v->rows[v->n_rows++];
		m->node_id = rec_id[j];
		m->release = v->recs[j].release;
		m->leader = p->leader && strcmp(p->leader, m->node_id) == 0;
		m->campaigning = cluster_view_candidate(base, bl, kvs, n, m->node_id);
		m->no_member_record = true;
		m->record = &v->recs[j];
		m->sessions = cluster_view_sessions(base, bl, kvs, n, m->node_id, m->record,
		                                    rec_lease[j], &m->conflict);
	}
	free(rec_ok);
	free(rec_id);
	free(rec_lease);
	free(base);
	*ret = v;
	return 0;
fail_arrays:
	free(rec_ok);
	free(rec_id);
	free(rec_lease);
fail:
	free(base);
	cluster_view_free(v);
	return r;
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
