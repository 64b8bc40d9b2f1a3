/* SPDX-License-Identifier: MIT */
/*
 * invariants.c - see invariants.h for the design notes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election/election_internal.h"
#include "hosts.h"
#include "invariants.h"
#include "invariants_internal.h"
#include "proto/leasehold.pb-c.h"
#include "base/release.h"
#include "testutil.h"

#define ST_DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE
#define ST_WORKING LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING

/* ---- history ---- */

void inv_history_add(struct inv_history *h, int64_t rev, bool del, const char *key, const void *val,
		     size_t val_len, int64_t create_rev)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct inv_event *n = realloc(h->ev, cap * sizeof(*n));
		CHECK(n != NULL);
		h->ev = n;
		h->cap = cap;
	}
	struct inv_event *e = &h->ev[h->n++];
	e->rev = rev;
	e->del = del;
	e->key = strdup(key);
	e->val = malloc(val_len + 1);
	CHECK(e->key && e->val);
	if (val_len)
		memcpy(e->val, val, val_len);
	e->val[val_len] = 0;
	e->val_len = val_len;
	e->create_rev = del ? 0 : create_rev;
	if (rev > h->head_rev)
		h->head_rev = rev;
}

void inv_history_free(struct inv_history *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->ev[i].key);
		free(h->ev[i].val);
	}
	free(h->ev);
	memset(h, 0, sizeof(*h));
}

struct load_ctx {
	struct inv_history *h;
	const char *prefix;
	size_t plen;
	int64_t target;
	bool done;
	int err;
	bool range_done;
	int64_t range_rev;
	int range_err;
};

static void on_head(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct load_ctx *l = ud;
	(void)c;
	l->range_done = true;
	l->range_err = err;
	if (err == 0)
		l->range_rev = r->header.revision;
}

static void on_hist(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		    size_t n, void *ud)
{
	struct load_ctx *l = ud;
	(void)w;
	(void)revision;
	if (err < 0) {
		l->err = err;
		l->done = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct etcd_kv *kv = &ev[i].kv;
		if (kv->mod_revision > l->h->head_rev)
			l->h->head_rev = kv->mod_revision;
		if (kv->key_len < l->plen || memcmp(kv->key, l->prefix, l->plen) != 0)
			continue;
		char *key = strndup((const char *)kv->key, kv->key_len);
		CHECK(key != NULL);
		inv_history_add(l->h, kv->mod_revision, ev[i].type == ETCD_EVENT_DELETE, key,
				kv->value, kv->value_len, kv->create_revision);
		free(key);
	}
	if (l->h->head_rev >= l->target)
		l->done = true;
}

/* "P" -> "P/" (the prefix of every key of the layout) */
static void norm_prefix(const char *prefix, char *buf, size_t len)
{
	size_t n = strlen(prefix);
	while (n > 0 && prefix[n - 1] == '/')
		n--;
	snprintf(buf, len, "%.*s/", (int)n, prefix);
}

void inv_history_load(struct tu *t, const char *prefix, struct inv_history *ret)
{
	char pfx[256];
	norm_prefix(prefix, pfx, sizeof(pfx));
	memset(ret, 0, sizeof(*ret));
	struct load_ctx l = {.h = ret, .prefix = pfx, .plen = strlen(pfx)};
	static const uint8_t all[1] = {0};
	struct etcd_op op = {.type = ETCD_OP_RANGE,
			     .key = all,
			     .key_len = 1,
			     .range_end = all,
			     .range_end_len = 1,
			     .count_only = true};
	CHECK_OK(etcd_range(t->etcd, &op, NULL, on_head, &l, NULL));
	if (loop_run_until(t->loop, &l.range_done, loop_now() + 10 * LOOP_NS_PER_S) < 0 ||
	    l.range_err < 0) {
		fprintf(stderr, "invariants: cannot read the head revision: %s\n",
			etcd_strerror(l.range_err));
		exit(1);
	}
	l.target = l.range_rev;
	if (l.target <= 1)
		return; /* nothing was ever written */
	struct etcd_watch *w;
	CHECK_OK(etcd_watch_start(t->etcd, all, 1, all, 1, 1, 0, on_hist, &l, &w));
	if (loop_run_until(t->loop, &l.done, loop_now() + 30 * LOOP_NS_PER_S) < 0 || l.err < 0) {
		fprintf(stderr,
			"invariants: history watch from revision 1 did not reach revision %" PRId64
			" (at %" PRId64 ", %s)\n",
			l.target, ret->head_rev, l.err < 0 ? etcd_strerror(l.err) : "timed out");
		exit(1);
	}
	etcd_watch_cancel(w);
	ret->head_rev = l.target > ret->head_rev ? l.target : ret->head_rev;
}

/* ---- parsing the layout ---- */

void inv_make_keys(const char *prefix, const char *plugin, struct keys *k)
{
	char pfx[256];
	norm_prefix(prefix, pfx, sizeof(pfx));
	snprintf(k->journal, sizeof(k->journal), "%s%s/data/journal/", pfx, plugin);
	snprintf(k->election, sizeof(k->election), "%s%s/election/", pfx, plugin);
	snprintf(k->status, sizeof(k->status), "%s%s/status", pfx, plugin);
	snprintf(k->config, sizeof(k->config), "%s%s/data/config/", pfx, plugin);
	snprintf(k->items, sizeof(k->items), "%s%s/data/config/items/", pfx, plugin);
	snprintf(k->schema, sizeof(k->schema), "%s%s/data/config/schema", pfx, plugin);
	snprintf(k->data, sizeof(k->data), "%s%s/data/", pfx, plugin);
	snprintf(k->desired, sizeof(k->desired), "%s%s/data/desired/", pfx, plugin);
	snprintf(k->out, sizeof(k->out), "%s%s/data/out/", pfx, plugin);
	snprintf(k->paused, sizeof(k->paused), "%s%s/paused", pfx, plugin);
	snprintf(k->settings, sizeof(k->settings), "%s%s/config", pfx, plugin);
}

bool inv_starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* parse a journal record; false (and why) when it does not fit the format */
bool inv_parse_journal(const char *suffix, const struct inv_event *e, struct jparsed *ret,
			  const char **why)
{
	memset(ret, 0, sizeof(*ret));
	size_t n = strlen(suffix);
	if (n != 16 + 1 + 8 || suffix[16] != '-') {
		*why = "key is not <16 hex>-<8 digits>";
		return false;
	}
	uint64_t tok = 0, ctr = 0;
	for (int i = 0; i < 16; i++) {
		char c = suffix[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0) {
			*why = "key token is not lowercase hex";
			return false;
		}
		tok = tok * 16 + (uint64_t)d;
	}
	for (int i = 17; i < 25; i++) {
		if (suffix[i] < '0' || suffix[i] > '9') {
			*why = "key counter is not 8 digits";
			return false;
		}
		ctr = ctr * 10 + (uint64_t)(suffix[i] - '0');
	}
	ret->key_token = (int64_t)tok;
	ret->counter = ctr;
	long long t = 0;
	int end = 0;
	if (strlen((const char *)e->val) != e->val_len ||
	    sscanf((const char *)e->val, "node=%63s token=%lld release=%15s items=%u%n", ret->node,
		   &t, ret->release, &ret->items, &end) != 4 ||
	    (size_t)end != e->val_len) {
		*why = "value is not \"node=<id> token=<t> release=<x.y.z> items=<n>\"";
		return false;
	}
	ret->token = (int64_t)t;
	return true;
}

/* ---- (a) no overlapping reconciles ---- */

struct term {
	int64_t token;
	char node[64];
	int64_t first_rev;
	const char *first_key;
};

int inv_check_overlap(const struct inv_history *h, const char *prefix, const char *plugin,
		      struct inv_stats *st)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	struct term *terms = NULL;
	size_t n_terms = 0;
	int64_t last_tok = 0, last_rev = 0;
	const char *last_key = NULL;
	struct inv_stats s;
	memset(&s, 0, sizeof(s));
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		if (!inv_starts(e->key, k.journal))
			continue;
		if (e->del) {
			VIOL("(a) overlap: journal record %s deleted at revision %" PRId64
			     " (records are append-only)",
			     e->key, e->rev);
			continue;
		}
		struct jparsed j;
		const char *why = NULL;
		if (!inv_parse_journal(e->key + strlen(k.journal), e, &j, &why)) {
			VIOL("(a) overlap: journal record %s at revision %" PRId64
			     ": %s (value \"%.80s\")",
			     e->key, e->rev, why, (const char *)e->val);
			continue;
		}
		s.journal++;
		if (j.key_token != j.token)
			VIOL("(a) overlap: journal record %s at revision %" PRId64
			     ": key token %" PRId64 " != value token %" PRId64,
			     e->key, e->rev, j.key_token, j.token);
		if (e->create_rev != e->rev)
			VIOL("(a) overlap: journal record %s overwritten at revision %" PRId64
			     " (created at %" PRId64 ")",
			     e->key, e->rev, e->create_rev);
		if (j.token < last_tok)
			VIOL("(a) overlap: journal record %s (node=%s token=%" PRId64
			     ") at revision %" PRId64 " goes back from token %" PRId64
			     " (record %s at revision %" PRId64 ")",
			     e->key, j.node, j.token, e->rev, last_tok, last_key, last_rev);
		last_tok = j.token;
		last_rev = e->rev;
		last_key = e->key;
		struct term *tm = NULL;
		for (size_t x = 0; x < n_terms && !tm; x++)
			if (terms[x].token == j.token)
				tm = &terms[x];
		if (!tm) {
			struct term *nt = realloc(terms, (n_terms + 1) * sizeof(*nt));
			CHECK(nt != NULL);
			terms = nt;
			tm = &terms[n_terms++];
			tm->token = j.token;
			snprintf(tm->node, sizeof(tm->node), "%s", j.node);
			tm->first_rev = e->rev;
			tm->first_key = e->key;
		} else if (strcmp(tm->node, j.node) != 0) {
			VIOL("(a) overlap: token %" PRId64
			     " used by two nodes: %s (record %s at revision %" PRId64
			     ") and %s (record %s at revision %" PRId64 ")",
			     j.token, tm->node, tm->first_key, tm->first_rev, j.node, e->key,
			     e->rev);
		}
		s.last_token = j.token;
		snprintf(s.last_node, sizeof(s.last_node), "%s", j.node);
	}
	s.terms = n_terms;
	free(terms);
	if (st) {
		st->journal = s.journal;
		st->terms = s.terms;
		st->last_token = s.last_token;
		snprintf(st->last_node, sizeof(st->last_node), "%s", s.last_node);
	}
	return bad;
}

/* ---- (b) every record inside its election key's life ---- */

/* every election key's life in h (malloc'd, *ret_n entries; pointers into h) */
struct life *inv_lives_of(const struct inv_history *h, const struct keys *k, size_t *ret_n)
{
	struct life *lv = NULL;
	size_t n = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		if (!inv_starts(e->key, k->election))
			continue;
		if (!e->del && e->create_rev == e->rev) {
			struct life *nl = realloc(lv, (n + 1) * sizeof(*nl));
			CHECK(nl != NULL);
			lv = nl;
			lv[n++] = (struct life){.key = e->key,
						.node = (const char *)e->val,
						.created = e->rev,
						.deleted = INT64_MAX};
		} else if (e->del) {
			for (size_t x = n; x-- > 0;)
				if (strcmp(lv[x].key, e->key) == 0 && lv[x].deleted == INT64_MAX) {
					lv[x].deleted = e->rev;
					break;
				}
		}
	}
	*ret_n = n;
	return lv;
}

struct life *inv_keys_and_lives(const struct inv_history *h, const char *prefix,
				const char *plugin, struct keys *k, size_t *ret_n)
{
	inv_make_keys(prefix, plugin, k);
	return inv_lives_of(h, k, ret_n);
}

int inv_check_each_event(const struct inv_history *h, const char *prefix, const char *plugin,
			 inv_event_check *check)
{
	struct keys k;
	size_t n;
	struct life *lv = inv_keys_and_lives(h, prefix, plugin, &k, &n);
	int bad = 0;
	for (size_t i = 0; i < h->n; i++)
		bad += check(h, i, &k, lv, n);
	free(lv);
	return bad;
}

const struct life *inv_life_of_token(const struct life *lv, size_t n, int64_t token)
{
	for (size_t x = 0; x < n; x++)
		if (lv[x].created == token)
			return &lv[x];
	return NULL;
}

/* (b) for event i: a journal record lies inside the term of the election
 * key it names */
static int fence_of_event(const struct inv_history *h, size_t i, const struct keys *k,
			  const struct life *lv, size_t n)
{
	const struct inv_event *e = &h->ev[i];
	int bad = 0;
	struct jparsed j;
	const char *why;
	if (e->del || !inv_starts(e->key, k->journal) ||
	    !inv_parse_journal(e->key + strlen(k->journal), e, &j, &why))
		return 0; /* malformed records are (a)'s business */
	const struct life *l = inv_life_of_token(lv, n, j.token);
	if (!l) {
		VIOL("(b) fence: journal record %s (node=%s token=%" PRId64
		     ") at revision %" PRId64
		     ": no election key under %s was created at revision %" PRId64,
		     e->key, j.node, j.token, e->rev, k->election, j.token);
		return bad;
	}
	if (e->rev <= l->created)
		VIOL("(b) fence: journal record %s (node=%s) at revision %" PRId64
		     " is not after its election key %s (created at revision %" PRId64 ")",
		     e->key, j.node, e->rev, l->key, l->created);
	if (e->rev >= l->deleted)
		VIOL("(b) fence: journal record %s (node=%s token=%" PRId64
		     ") written at revision %" PRId64
		     " after its election key %s (created at revision %" PRId64
		     ") was deleted at revision %" PRId64,
		     e->key, j.node, j.token, e->rev, l->key, l->created, l->deleted);
	if (strcmp(l->node, j.node) != 0)
		VIOL("(b) fence: journal record %s at revision %" PRId64
		     " says node=%s but election key %s (created at revision %" PRId64
		     ") belongs to node %s",
		     e->key, e->rev, j.node, l->key, l->created, l->node);
	return bad;
}

int inv_check_fence(const struct inv_history *h, const char *prefix, const char *plugin)
{
	return inv_check_each_event(h, prefix, plugin, fence_of_event);
}

/* ---- (c) the status never moves backwards ---- */

int inv_check_status(const struct inv_history *h, const char *prefix, const char *plugin,
		     struct inv_stats *st)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	bool have = false, have_done = false;
	struct release pv = {0}, pm = {0}, dv = {0};
	int64_t prev_rev = 0, done_rev = 0;
	size_t writes = 0, garbage = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct inv_event *e = &h->ev[i];
		if (strcmp(e->key, k.status) != 0 || e->del)
			continue;
		int state;
		struct release v, m;
		if (election_decode_status(e->val, e->val_len, &state, &v, &m) < 0) {
			garbage++;
			continue;
		}
		writes++;
		char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
		if (have && release_less(v, pv))
			VIOL("(c) status: version went back from %s (revision %" PRId64
			     ") to %s at revision %" PRId64,
			     release_format(pv, a, sizeof(a)), prev_rev,
			     release_format(v, b, sizeof(b)), e->rev);
		if (have && release_less(m, pm))
			VIOL("(c) status: minimum compatible release went back from %s (revision "
			     "%" PRId64 ") to %s at revision %" PRId64,
			     release_format(pm, a, sizeof(a)), prev_rev,
			     release_format(m, b, sizeof(b)), e->rev);
		if (state == ST_DONE && have_done && release_less(v, dv))
			VIOL("(c) status: DONE %s at revision %" PRId64
			     " follows DONE %s at revision %" PRId64,
			     release_format(v, a, sizeof(a)), e->rev,
			     release_format(dv, b, sizeof(b)), done_rev);
		if (state == ST_DONE) {
			have_done = true;
			dv = v;
			done_rev = e->rev;
		}
		have = true;
		pv = v;
		pm = m;
		prev_rev = e->rev;
	}
	if (st) {
		st->status_writes = writes;
		st->status_garbage = garbage;
	}
	return bad;
}

/* ---- (d) nothing desired is lost ---- */

static int cmp_ev_key(const void *a, const void *b)
{
	const struct inv_event *x = *(const struct inv_event *const *)a,
			       *y = *(const struct inv_event *const *)b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	/* stable by position: the pointers are into one array */
	return x < y ? -1 : x > y;
}

/* the end state: the last event of every key that is a PUT (sorted by key);
 * returns the count, *ret malloc'd (pointers into h) */
size_t inv_replay(const struct inv_history *h, const struct inv_event ***ret)
{
	const struct inv_event **v = calloc(h->n + 1, sizeof(*v));
	CHECK(v != NULL);
	for (size_t i = 0; i < h->n; i++)
		v[i] = &h->ev[i];
	qsort(v, h->n, sizeof(*v), cmp_ev_key);
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++) {
		bool last = i + 1 == h->n || strcmp(v[i]->key, v[i + 1]->key) != 0;
		if (last && !v[i]->del)
			v[k++] = v[i];
	}
	*ret = v;
	return k;
}

const struct inv_event *inv_find_key(const struct inv_event *const *v, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i]->key, key) == 0)
			return v[i];
	return NULL;
}

int inv_check_desired(const struct inv_history *h, const char *prefix, const char *plugin)
{
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	int bad = 0;
	const struct inv_event **v;
	size_t n = inv_replay(h, &v);
	/* the last journal record gives the item count */
	unsigned items = 0;
	bool have_j = false;
	int64_t jrev = 0;
	for (size_t i = h->n; i-- > 0 && !have_j;) {
		struct jparsed j;
		const char *why;
		if (!h->ev[i].del && inv_starts(h->ev[i].key, k.journal) &&
		    inv_parse_journal(h->ev[i].key + strlen(k.journal), &h->ev[i], &j, &why)) {
			items = j.items;
			have_j = true;
			jrev = h->ev[i].rev;
		}
	}
	const struct inv_event *s = inv_find_key(v, n, k.status);
	int state;
	struct release ver, mcr;
	if (!have_j)
		VIOL("(d) desired: no journal record under %s: nothing was ever reconciled",
		     k.journal);
	if (!s) {
		VIOL("(d) desired: %s is absent at revision %" PRId64, k.status, h->head_rev);
		goto out;
	}
	if (election_decode_status(s->val, s->val_len, &state, &ver, &mcr) < 0) {
		VIOL("(d) desired: %s (revision %" PRId64 ") does not decode", k.status, s->rev);
		goto out;
	}
	char rb[RELEASE_STRLEN];
	release_format(ver, rb, sizeof(rb));
	if (state != ST_DONE)
		VIOL("(d) desired: final status (revision %" PRId64 ") is %s %s, not DONE", s->rev,
		     state == ST_WORKING ? "WORKING" : "?", rb);
	bool v2 = !release_less(ver, (struct release){1, 1, 0});
	const char *want_schema = v2 ? "reconciler/v2" : "reconciler/v1";
	const struct inv_event *sc = inv_find_key(v, n, k.schema);
	if (!sc)
		VIOL("(d) desired: %s is missing (status %s at revision %" PRId64 ")", k.schema, rb,
		     s->rev);
	else if (strcmp((const char *)sc->val, want_schema) != 0)
		VIOL("(d) desired: %s = \"%.60s\" (revision %" PRId64 "), status %s wants \"%s\"",
		     k.schema, (const char *)sc->val, sc->rev, rb, want_schema);
	for (unsigned i = 0; have_j && i < items; i++) {
		char key[340], want[96];
		snprintf(key, sizeof(key), "%s%u", k.items, i);
		if (v2)
			snprintf(want, sizeof(want),
				 "{\"item\":%u,\"state\":\"ready\",\"format\":2}", i);
		else
			snprintf(want, sizeof(want), "item=%u;state=ready", i);
		const struct inv_event *it = inv_find_key(v, n, key);
		if (!it)
			VIOL("(d) desired: %s is missing at revision %" PRId64
			     " (items=%u per the journal "
			     "record at revision %" PRId64 ")",
			     key, h->head_rev, items, jrev);
		else if (strcmp((const char *)it->val, want) != 0)
			VIOL("(d) desired: %s = \"%.80s\" (revision %" PRId64
			     "), status %s wants \"%s\"",
			     key, (const char *)it->val, it->rev, rb, want);
	}
	for (size_t i = 0; have_j && i < n; i++) {
		if (!inv_starts(v[i]->key, k.items))
			continue;
		const char *idx = v[i]->key + strlen(k.items);
		char *end;
		errno = 0;
		unsigned long x = strtoul(idx, &end, 10);
		if (*idx < '0' || *idx > '9' || *end || errno || x >= items)
			VIOL("(d) desired: %s (revision %" PRId64 ") should not exist (items=%u)",
			     v[i]->key, v[i]->rev, items);
	}
out:
	free(v);
	return bad;
}

/* ---- all of it, on a live etcd ---- */

struct at_ctx {
	bool done;
	int err;
	struct etcd_kv **kvs;
	size_t n;
	bool more;
};

static void on_at(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct at_ctx *a = ud;
	(void)c;
	a->done = true;
	a->err = err;
	if (err < 0)
		return;
	a->kvs = calloc(r->n_kvs + 1, sizeof(*a->kvs));
	CHECK(a->kvs != NULL);
	for (size_t i = 0; i < r->n_kvs; i++)
		a->kvs[i] = etcd_kv_dup(&r->kvs[i]);
	a->n = r->n_kvs;
	a->more = r->more;
}

/* the replayed end state must equal etcd's own range at head_rev */
static int check_replay(struct tu *t, const struct inv_history *h, const char *prefix)
{
	char pfx[256];
	norm_prefix(prefix, pfx, sizeof(pfx));
	uint8_t end[260];
	struct at_ctx a = {0};
	struct etcd_op op = {.type = ETCD_OP_RANGE,
			     .key = pfx,
			     .key_len = strlen(pfx),
			     .range_end = end,
			     .range_end_len = etcd_prefix_end(pfx, strlen(pfx), end),
			     .revision = h->head_rev};
	CHECK_OK(etcd_range(t->etcd, &op, NULL, on_at, &a, NULL));
	if (loop_run_until(t->loop, &a.done, loop_now() + 10 * LOOP_NS_PER_S) < 0 || a.err < 0) {
		fprintf(stderr, "invariants: range at revision %" PRId64 " failed\n", h->head_rev);
		exit(1);
	}
	int bad = 0;
	const struct inv_event **v;
	size_t n = inv_replay(h, &v);
	if (n != a.n)
		VIOL("(replay) %zu keys under %s replayed from the history, etcd has %zu at "
		     "revision %" PRId64,
		     n, pfx, a.n, h->head_rev);
	for (size_t i = 0; i < a.n; i++) {
		char *key = strndup((const char *)a.kvs[i]->key, a.kvs[i]->key_len);
		CHECK(key != NULL);
		const struct inv_event *e = inv_find_key(v, n, key);
		if (!e || e->val_len != a.kvs[i]->value_len ||
		    (e->val_len && memcmp(e->val, a.kvs[i]->value, e->val_len) != 0))
			VIOL(
			    "(replay) %s differs between the history and etcd at revision %" PRId64,
			    key, h->head_rev);
		free(key);
	}
	free(v);
	tu_list_free(a.kvs, a.n);
	return bad;
}

int inv_check_all(struct tu *t, const char *prefix, const char *plugin, struct inv_stats *st)
{
	struct inv_history h;
	struct inv_stats s;
	memset(&s, 0, sizeof(s));
	uint64_t t0 = loop_now();
	inv_history_load(t, prefix, &h);
	int bad = check_replay(t, &h, prefix);
	bad += inv_check_overlap(&h, prefix, plugin, &s);
	bad += inv_check_fence(&h, prefix, plugin);
	bad += inv_check_status(&h, prefix, plugin, &s);
	bad += inv_check_desired(&h, prefix, plugin);
	bad += inv_check_outputs_fenced(&h, prefix, plugin);
	bad += inv_check_output_releases(&h, prefix, plugin);
	bad += inv_check_output_status(&h, prefix, plugin);
	bad += inv_check_pause(&h, prefix, plugin);
	fprintf(stderr,
		"invariants over %zu events up to revision %" PRId64 " (%" PRIu64
		" ms): %zu journal records, %zu terms, %zu status writes (%zu undecodable): %s\n",
		h.n, h.head_rev, (loop_now() - t0) / LOOP_NS_PER_MS, s.journal, s.terms,
		s.status_writes, s.status_garbage, bad ? "VIOLATED" : "hold");
	if (bad)
		hosts_dump_logs();
	inv_history_free(&h);
	if (st)
		*st = s;
	return bad;
}

/* ---- jwatch ---- */

struct jwatch {
	struct tu *t;
	struct etcd_watch *w;
	char journal[300];
	struct jrec *recs;
	size_t n, cap;
};

static void on_jw(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		  size_t n, void *ud)
{
	struct jwatch *j = ud;
	(void)w;
	(void)revision;
	if (err < 0) {
		fprintf(stderr, "journal watch ended: %s\n", etcd_strerror(err));
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type != ETCD_EVENT_PUT)
			continue;
		struct inv_event e = {.rev = ev[i].kv.mod_revision};
		char *key = strndup((const char *)ev[i].kv.key, ev[i].kv.key_len);
		char *val = strndup((const char *)ev[i].kv.value, ev[i].kv.value_len);
		CHECK(key && val);
		e.key = key;
		e.val = (uint8_t *)val;
		e.val_len = strlen(val);
		struct jparsed p;
		const char *why;
		if (strlen(key) > strlen(j->journal) &&
		    inv_parse_journal(key + strlen(j->journal), &e, &p, &why)) {
			if (j->n == j->cap) {
				size_t cap = j->cap ? j->cap * 2 : 64;
				struct jrec *nr = realloc(j->recs, cap * sizeof(*nr));
				CHECK(nr != NULL);
				j->recs = nr;
				j->cap = cap;
			}
			struct jrec *r = &j->recs[j->n++];
			r->rev = e.rev;
			r->token = p.token;
			snprintf(r->node, sizeof(r->node), "%s", p.node);
			snprintf(r->release, sizeof(r->release), "%s", p.release);
		}
		free(key);
		free(val);
	}
}

struct jwatch *jwatch_new(struct tu *t, const char *prefix, const char *plugin, int64_t from_rev)
{
	struct jwatch *j = calloc(1, sizeof(*j));
	CHECK(j != NULL);
	j->t = t;
	struct keys k;
	inv_make_keys(prefix, plugin, &k);
	snprintf(j->journal, sizeof(j->journal), "%s", k.journal);
	uint8_t end[310];
	size_t el = etcd_prefix_end(j->journal, strlen(j->journal), end);
	CHECK_OK(etcd_watch_start(t->etcd, j->journal, strlen(j->journal), end, el, from_rev, 0,
				  on_jw, j, &j->w));
	return j;
}

void jwatch_free(struct jwatch *j)
{
	if (!j)
		return;
	etcd_watch_cancel(j->w);
	free(j->recs);
	free(j);
}

size_t jwatch_records(const struct jwatch *j, const struct jrec **ret)
{
	*ret = j->recs;
	return j->n;
}

size_t jwatch_count(const struct jwatch *j, const char *node, int64_t tok)
{
	size_t c = 0;
	for (size_t i = 0; i < j->n; i++)
		if ((!node || strcmp(j->recs[i].node, node) == 0) &&
		    (!tok || j->recs[i].token == tok))
			c++;
	return c;
}

long jwatch_wait(struct jwatch *j, const char *node, size_t n, int timeout_ms, const char *what)
{
	uint64_t t0 = loop_now(), deadline = t0 + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (jwatch_count(j, node, 0) < n) {
		if (loop_now() >= deadline) {
			fprintf(
			    stderr,
			    "timed out after %d ms waiting for %s (%zu of %zu journal records)\n",
			    timeout_ms, what, jwatch_count(j, node, 0), n);
			hosts_dump_logs();
			exit(1);
		}
		loop_run_once(j->t->loop, 20);
	}
	return (long)((loop_now() - t0) / LOOP_NS_PER_MS);
}
