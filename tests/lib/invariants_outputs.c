/* SPDX-License-Identifier: MIT */
/*
 * invariants_outputs.c - the checks on the example plugin's inputs and
 * outputs, (e), (f), (r), (p) and (g); see invariants.h for the design notes.
 */
#include "config.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "base/release.h"
#include "check.h"
#include "election/election_internal.h"
#include "invariants.h"
#include "invariants_internal.h"

/* the journal record write h->ev[i] belongs to, parsed into *ret, its
 * revision in *ret_rev (may be NULL): the record in its txn (same
 * revision), else the latest one before it. The example writes a record
 * first in every reconcile and then hands its writes to api->apply, whose
 * txns carry no record of the plugin's; a write of a correct host lands
 * inside the term of the latest record before it, because the next term's
 * first record comes only after this term's election key is gone and the
 * fence keeps every write of the term before that. false when there is no
 * record at or before the write. */
static bool journal_of_write(const struct inv_history *h, size_t i, const struct keys *k,
			     struct jparsed *ret, int64_t *ret_rev)
{
	size_t x = i;
	while (x + 1 < h->n && h->ev[x + 1].rev == h->ev[i].rev)
		x++;
	for (x++; x-- > 0;) {
		const struct inv_event *e = &h->ev[x];
		const char *why;
		if (!e->del && inv_starts(e->key, k->journal) &&
		    inv_parse_journal(e->key + strlen(k->journal), e, ret, &why)) {
			if (ret_rev)
				*ret_rev = e->rev;
			return true;
		}
	}
	return false;
}

/* (e) for event i: a write of an output lies inside its writer's term */
static int output_fenced(const struct inv_history *h, size_t i, const struct keys *k,
			 const struct life *lv, size_t n)
{
	const struct inv_event *e = &h->ev[i];
	int bad = 0;
	struct jparsed j;
	if (!inv_starts(e->key, k->out))
		return bad;
	if (!journal_of_write(h, i, k, &j, NULL)) {
		VIOL("(e) outputs fenced: %s %s at revision %" PRId64
		     " with no journal record at or before it (an unfenced write)",
		     e->del ? "DELETE of" : "PUT of", e->key, e->rev);
		return bad;
	}
	const struct life *l = inv_life_of_token(lv, n, j.token);
	if (!l || e->rev <= l->created || e->rev >= l->deleted)
		VIOL("(e) outputs fenced: %s %s at revision %" PRId64
		     " (node=%s token=%" PRId64
		     ") outside its writer's term (election key created at %" PRId64
		     ", deleted at %" PRId64 ")",
		     e->del ? "DELETE of" : "PUT of", e->key, e->rev, j.node, j.token,
		     l ? l->created : 0, l && l->deleted != INT64_MAX ? l->deleted : 0);
	return bad;
}

int inv_check_outputs_fenced(const struct inv_history *h, const char *prefix, const char *plugin)
{
	return inv_check_each_event(h, prefix, plugin, output_fenced);
}

struct out_rel {
	const char *key;
	struct release rel;
	int64_t rev;
	char node[64];
};

int inv_check_output_releases(const struct inv_history *h, const char *prefix, const char *plugin)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	struct out_rel *seen = NULL;
	size_t n = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		struct jparsed j;
		struct release r;
		if (!inv_starts(e->key, k.out) || !journal_of_write(h, i, &k, &j, NULL) ||
		    release_parse(j.release, &r) < 0)
			continue; /* unfenced writes are (e)'s business */
		struct out_rel *o = NULL;
		for (size_t x = 0; x < n && !o; x++)
			if (strcmp(seen[x].key, e->key) == 0)
				o = &seen[x];
		if (!o) {
			struct out_rel *ns = realloc(seen, (n + 1) * sizeof(*ns));
			CHECK(ns != NULL);
			seen = ns;
			o = &seen[n++];
			o->key = e->key;
		} else if (release_less(r, o->rel)) {
			char was[RELEASE_STRLEN];
			release_format(o->rel, was, sizeof(was));
			VIOL("(f) release order: %s written by release %s (node=%s) at revision "
			     "%" PRId64 " after release %s (node=%s) wrote it at revision %" PRId64,
			     e->key, j.release, j.node, e->rev, was, o->node, o->rev);
			continue; /* keep the newest release seen */
		}
		o->rel = r;
		o->rev = e->rev;
		snprintf(o->node, sizeof(o->node), "%s", j.node);
	}
	free(seen);
	return bad;
}

int inv_check_output_status(const struct inv_history *h, const char *prefix, const char *plugin)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	bool have = false;
	struct release top = {0}; /* the newest status version so far */
	int64_t top_rev = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		int state;
		struct release v, m, r;
		if (!e->del && strcmp(e->key, k.status) == 0 &&
		    election_decode_status(e->val, e->val_len, &state, &v, &m) == 0) {
			if (!have || release_less(top, v)) {
				top = v;
				top_rev = e->rev;
			}
			have = true; /* undecodable values are (c)'s business */
			continue;
		}
		struct jparsed j;
		if (!have || !inv_starts(e->key, k.out) || !journal_of_write(h, i, &k, &j, NULL) ||
		    release_parse(j.release, &r) < 0 || !release_less(r, top))
			continue; /* unfenced writes are (e)'s business */
		char was[RELEASE_STRLEN];
		release_format(top, was, sizeof(was));
		VIOL("(r) no rollback: %s %s by release %s (node=%s token=%" PRId64
		     ") at revision %" PRId64 " after the status reached %s at revision %" PRId64,
		     e->del ? "DELETE of" : "PUT of", e->key, j.release, j.node, j.token, e->rev,
		     was, top_rev);
	}
	return bad;
}

/* (p) on one pause window (pause_rev, end_rev): the data writes in it all
 * belong to one reconcile (one journal record: journal_of_write), of the
 * term that led when the pause came */
static int pause_window(const struct inv_history *h, const struct keys *k, const struct life *lv,
			size_t n_lv, int64_t pause_rev, int64_t end_rev)
{
	int bad = 0;
	int64_t first = 0; /* the revision of that reconcile's record */
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		if (e->rev <= pause_rev || e->rev >= end_rev || !inv_starts(e->key, k->data) ||
		    inv_starts(e->key, k->desired))
			continue;
		struct jparsed j;
		int64_t jrev = 0;
		bool have_j = journal_of_write(h, i, k, &j, &jrev);
		const struct life *l = have_j ? inv_life_of_token(lv, n_lv, j.token) : NULL;
		bool lived = l && l->created < pause_rev && l->deleted > pause_rev;
		if (lived && (!first || jrev == first)) {
			first = jrev; /* the reconcile running when the pause came */
			continue;
		}
		VIOL("(p) pause: %s written at revision %" PRId64 " (node=%s token=%" PRId64
		     ") while paused (pause at revision %" PRId64 ", resumed at %" PRId64 "%s)",
		     e->key, e->rev, have_j ? j.node : "?", have_j ? j.token : 0, pause_rev,
		     end_rev == INT64_MAX ? 0 : end_rev,
		     first ? "; one reconcile finished after the pause already"
			   : ": not by the term that led when the pause came");
		while (i + 1 < h->n && h->ev[i + 1].rev == e->rev)
			i++; /* one line per txn */
	}
	return bad;
}

int inv_check_pause(const struct inv_history *h, const char *prefix, const char *plugin)
{
	struct keys k;
	size_t n_lv;
	struct life *lv = inv_keys_and_lives(h, prefix, plugin, &k, &n_lv);
	int bad = 0;
	int64_t paused_at = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		if (strcmp(e->key, k.paused) != 0)
			continue;
		if (!e->del && !paused_at)
			paused_at = e->rev; /* a PUT over a pause keeps the first */
		else if (e->del && paused_at) {
			bad += pause_window(h, &k, lv, n_lv, paused_at, e->rev);
			paused_at = 0;
		}
	}
	if (paused_at)
		bad += pause_window(h, &k, lv, n_lv, paused_at, INT64_MAX);
	free(lv);
	return bad;
}

/* the "label" of the plugin's configuration document (the example plugin's
 * rule: a top-level string of [A-Za-z0-9._-], at most 63 bytes; else none) */
static void settings_label(const struct inv_event *cfg, char *buf, size_t len)
{
	buf[0] = 0;
	struct json_object *root = cfg ? json_tokener_parse((const char *)cfg->val) : NULL, *l;
	if (root && json_object_object_get_ex(root, "label", &l) &&
	    json_object_is_type(l, json_type_string)) {
		const char *v = json_object_get_string(l);
		size_t n = strlen(v);
		if (n > 0 && n <= 63 &&
		    strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			      "0123456789._-") == n)
			snprintf(buf, len, "%s", v);
	}
	json_object_put(root);
}

/* the example plugin's output for input value v (inputs the runners write
 * need no JSON escaping) */
static void materialized(const char *v, const char *label, bool v2, char *buf, size_t len)
{
	if (v2)
		snprintf(buf, len, "{\"value\":\"%s\",\"format\":2%s%s%s}", v,
			 *label ? ",\"label\":\"" : "", label, *label ? "\"" : "");
	else
		snprintf(buf, len, "value=%s%s%s", v, *label ? ";label=" : "", label);
}

int inv_check_inputs_reflected(const struct inv_history *h, const char *prefix, const char *plugin)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	const struct inv_event **v;
	size_t n = inv_replay(h, &v);
	const struct inv_event *s = inv_find_key(v, n, k.status);
	int state;
	struct release ver, mcr;
	if (!s || election_decode_status(s->val, s->val_len, &state, &ver, &mcr) < 0) {
		VIOL("(g) inputs reflected: no decodable %s at revision %" PRId64, k.status,
		     h->head_rev);
		goto out;
	}
	bool v2 = !release_less(ver, (struct release){1, 1, 0});
	char label[64], want[600], key[400];
	settings_label(inv_find_key(v, n, k.settings), label, sizeof(label));
	for (size_t i = 0; i < n; i++) {
		if (inv_starts(v[i]->key, k.desired)) {
			const char *name = v[i]->key + strlen(k.desired);
			snprintf(key, sizeof(key), "%s%s", k.out, name);
			materialized((const char *)v[i]->val, label, v2, want, sizeof(want));
			const struct inv_event *o = inv_find_key(v, n, key);
			if (!o)
				VIOL("(g) inputs reflected: input %s (revision %" PRId64
				     ") has no output %s at revision %" PRId64,
				     v[i]->key, v[i]->rev, key, h->head_rev);
			else if (strcmp((const char *)o->val, want) != 0)
				VIOL("(g) inputs reflected: %s = \"%.100s\" (revision %" PRId64
				     "), input %s (revision %" PRId64
				     ") and label '%s' want \"%s\"",
				     key, (const char *)o->val, o->rev, v[i]->key, v[i]->rev, label,
				     want);
		} else if (inv_starts(v[i]->key, k.out)) {
			snprintf(key, sizeof(key), "%s%s", k.desired, v[i]->key + strlen(k.out));
			if (!inv_find_key(v, n, key))
				VIOL("(g) inputs reflected: output %s (revision %" PRId64
				     ") has no input %s",
				     v[i]->key, v[i]->rev, key);
		}
	}
out:
	free(v);
	return bad;
}
