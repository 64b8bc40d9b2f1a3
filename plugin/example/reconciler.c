/* SPDX-License-Identifier: MIT */
/*
 * reconciler.c - the example leasehold plugin "reconciler": a small but real
 * controller. Everything lives under its data prefix (P/reconciler/data/):
 *   desired/<name>   INPUT: desired objects, written by anyone (a value each)
 *   out/<name>       OUTPUT: each object's materialized form, in this
 *                    release's format: 1.0.x v1 "value=<v>",
 *                    1.1.0+ v2 {"value":"<v>","format":2}; with a label set
 *                    (below) v1 "value=<v>;label=<l>", v2 ...,"label":"<l>"}
 *   config/schema, config/items/<i>   state the plugin owns (LH_EXAMPLE_ITEMS
 *                    items, default 3, in the release's format)
 *   journal/<token 16 hex>-<n 8 digits> = "node=.. token=.. release=.. items=.."
 *                    one record in EVERY txn that writes, so the invariant
 *                    checker (tests/lib/invariants.c) can prove that no two
 *                    leaders ever wrote concurrently
 *
 * How it works (ABI 1.2; the informer pattern, leader-gated):
 * - init registers a watch of desired/. While this node leads, on_watch_events
 *   gets the snapshot of every input (the cache is refilled; a RESYNC batch
 *   empties it first), then each change; every change (and the end of a
 *   snapshot) asks for a reconcile: request_reconcile coalesces them.
 * - reconcile converges: config/ as before, then, once the cache is synced,
 *   out/ to the cache: missing or stale outputs written, outputs whose input
 *   is gone deleted, in fenced txns of at most CHUNK ops plus the journal
 *   record. Not synced yet (the term's first reconcile comes before the
 *   snapshot): the outputs wait; deleting then would delete what is merely
 *   not seen yet.
 * - on_deposed drops the cache: a standby holds nothing; the next term
 *   starts from a fresh snapshot.
 * - Its cluster configuration (P/reconciler/config, `leaseholdctl config
 *   set`, the same on every node) may hold {"label": "<l>"}, [A-Za-z0-9._-],
 *   at most 63 bytes, written into every output. Read from init on
 *   (api->config); on_config_changed takes a new one on every node, and the
 *   leader asks for a reconcile, which rewrites the outputs; validate_config
 *   refuses a bad label before it is written.
 *
 * Releases: -DLH_EXAMPLE_RELEASE_{MAJOR,MINOR,PATCH}. 1.1.0 writes v2, which
 * 1.0.x consumers cannot read: min_compatible_release 1.1.0.
 * Role (ABI 1.1): -DLH_EXAMPLE_ROLE='"controller"'.
 * Rollout rule: -DLH_EXAMPLE_REFERENCE_ROLLOUT declares the reference rule
 * (LH_PLUGIN_F_REFERENCE_ROLLOUT); without it, while 1.1.0 waits for the
 * last 1.0.x member, a 1.0.x node keeps leading and reconciling in v1.
 * Test knobs (environment, read in init): LH_EXAMPLE_ITEMS=N (0..1000),
 * LH_EXAMPLE_FAIL_FIRST=N (the first N reconciles fail with -EAGAIN),
 * LH_EXAMPLE_DELAY_MS=N (each reconcile first waits N ms: slow work),
 * LH_EXAMPLE_FAIL_FILE=PATH (each reconcile fails while PATH exists: a
 * release that breaks, and mends, on demand).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#ifndef LH_EXAMPLE_RELEASE_MAJOR
#define LH_EXAMPLE_RELEASE_MAJOR 1
#endif
#ifndef LH_EXAMPLE_RELEASE_MINOR
#define LH_EXAMPLE_RELEASE_MINOR 0
#endif
#ifndef LH_EXAMPLE_RELEASE_PATCH
#define LH_EXAMPLE_RELEASE_PATCH 0
#endif
#define FORMAT_V2 (LH_EXAMPLE_RELEASE_MAJOR > 1 || LH_EXAMPLE_RELEASE_MINOR >= 1)
#define MAX_ITEMS 1000u
#define CHUNK 100u  /* writes per txn (the host allows 128 ops) */
#define VAL_MAX 512 /* bytes of an output value */

struct obj { /* one desired object: the cache entry */
	char *name, *value;
};

struct state {
	uint32_t items, fail_first, delay_ms;
	uint64_t reconciles, journal_counter;
	int64_t token; /* the current term's, 0 when not leading */
	struct obj *cache; /* sorted by name */
	size_t n, cap;
	bool synced; /* the cache holds a complete snapshot of desired/ */
	char label[64]; /* from the cluster configuration; "" = none */
};

static uint32_t env_u32(const char *name, uint32_t def, uint32_t max)
{
	const char *s = getenv(name);
	char *end = NULL;
	unsigned long v = s && *s && s[0] != '-' ? strtoul(s, &end, 10) : ULONG_MAX;
	return (v == ULONG_MAX || !end || *end || v > max) ? def : (uint32_t)v;
}

static void cache_clear(struct state *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->cache[i].name);
		free(st->cache[i].value);
	}
	st->n = 0;
	st->synced = false;
}

/* index of name, or where it would go (*found false) */
static size_t cache_find(const struct state *st, const char *name, bool *found)
{
	size_t lo = 0, hi = st->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(st->cache[mid].name, name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static int cache_apply(struct state *st, const char *name, const char *value, bool del)
{
	bool found;
	size_t i = cache_find(st, name, &found);
	if (del || found) {
		if (!found)
			return 0;
		free(st->cache[i].value);
		if (!del)
			return (st->cache[i].value = strdup(value)) ? 0 : -ENOMEM;
		free(st->cache[i].name);
		memmove(&st->cache[i], &st->cache[i + 1], (st->n - i - 1) * sizeof(*st->cache));
		st->n--;
		return 0;
	}
	if (st->n == st->cap) {
		size_t c = st->cap ? st->cap * 2 : 64;
		struct obj *nc = realloc(st->cache, c * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		st->cache = nc;
		st->cap = c;
	}
	struct obj o = {strdup(name), strdup(value)};
	if (!o.name || !o.value) {
		free(o.name);
		free(o.value);
		return -ENOMEM;
	}
	memmove(&st->cache[i + 1], &st->cache[i], (st->n - i) * sizeof(*st->cache));
	st->cache[i] = o;
	st->n++;
	return 0;
}

/* label_of - the top-level "label" of json, a JSON object (the host checked
 * it), into buf[64] ("" when absent); -EINVAL: not [A-Za-z0-9._-]{0,63} */
static int label_of(const char *json, char *buf)
{
	static const char ws[] = " \t\r\n", ok[] = "abcdefghijklmnopqrstuvwxyz"
	                                            "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	int depth = 0;
	buf[0] = '\0';
	for (const char *p = json; p && *p; p++) {
		depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
		const char *k = p + 1, *v;
		if (*p != '"')
			continue;
		for (p = k; *p && *p != '"'; p += p[0] == '\\' && p[1] ? 2 : 1)
			; /* to the string's end */
		if (!*p)
			break;
		if (depth != 1 || p - k != 5 || memcmp(k, "label", 5) != 0 ||
		    *(v = p + 1 + strspn(p + 1, ws)) != ':')
			continue; /* not the key "label" of the top level */
		v += 1 + strspn(v + 1, ws);
		size_t n = strspn(v + 1, ok);
		if (*v != '"' || v[1 + n] != '"' || n > 63)
			return -EINVAL;
		memcpy(buf, v + 1, n);
		buf[n] = '\0';
		return 0;
	}
	return 0;
}

/* the release-specific materialized form of an input value */
static int materialize(const char *in, const char *label, char *out, size_t len)
{
#if FORMAT_V2
	size_t o = 0;
	int n = snprintf(out, len, "{\"value\":\"");
	for (o = (size_t)n; *in && o + 8 < len; in++) { /* JSON string escaping */
		unsigned char c = (unsigned char)*in;
		o += (size_t)(c < 0x20 || c == '"' || c == '\\' ? snprintf(out + o, len - o, "\\u%04x", c)
							       : snprintf(out + o, len - o, "%c", c));
	}
	return (int)o + snprintf(out + o, len - o, "\",\"format\":2%s%s%s}", *label ? ",\"label\":\"" : "",
	                         label, *label ? "\"" : "");
#else
	return snprintf(out, len, "value=%s%s%s", in, *label ? ";label=" : "", label);
#endif
}

static int item_value(uint32_t i, char *buf, size_t len)
{
#if FORMAT_V2
	return snprintf(buf, len, "{\"item\":%u,\"state\":\"ready\",\"format\":2}", i);
#else
	return snprintf(buf, len, "item=%u;state=ready", i);
#endif
}

/* fenced_write - ops[0..n) plus this term's next journal record, in one txn
 * that only runs if the record does not exist yet (the host adds the fence) */
static int32_t fenced_write(struct lh_ctx *ctx, struct lh_op *ops, uint32_t n)
{
	struct state *st = ctx->user;
	const struct lh_host_api *h = ctx->host;
	const struct lh_txn_result *res;
	char jkey[64], jval[256];
	int64_t token = h->fencing_token(ctx);
	int jkl = snprintf(jkey, sizeof(jkey), "journal/%016" PRIx64 "-%08" PRIu64, (uint64_t)token,
	                   st->journal_counter++);
	int jvl = snprintf(jval, sizeof(jval), "node=%s token=%" PRId64 " release=%d.%d.%d items=%u",
	                   h->node_id(ctx), token, LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR,
	                   LH_EXAMPLE_RELEASE_PATCH, st->items);
	ops[n++] = (struct lh_op){.type = LH_OP_PUT, .key = jkey, .key_len = (uint64_t)jkl,
	                          .value = jval, .value_len = (uint64_t)jvl};
	struct lh_compare fresh = {.target = LH_CMP_CREATE, .result = LH_CMP_EQUAL, .key = jkey,
	                           .key_len = (uint64_t)jkl, .number = 0};
	int32_t r = h->txn(ctx, &fresh, 1, ops, n, NULL, 0, &res);
	if (r < 0) {
		lh_set_errorf(ctx, "writing: %s", h->last_error(ctx));
		return r;
	}
	if (!res->succeeded) { /* the record exists (a retry) or the fence failed */
		ctx->host->set_error(ctx, "txn compare failed (journal record exists or not leading)");
		return -EAGAIN;
	}
	return 0;
}

/* the write batch of one reconcile: keys and values copied (a range result
 * dies at the next call), flushed every CHUNK ops */
struct batch {
	struct lh_op ops[CHUNK + 1];
	char keys[CHUNK][160], vals[CHUNK][VAL_MAX];
	uint32_t n;
};

static int32_t batch_add(struct lh_ctx *ctx, struct batch *b, uint32_t type, const char *key,
                         const char *val, int vlen)
{
	if (b->n == CHUNK) {
		int32_t r = fenced_write(ctx, b->ops, b->n);
		b->n = 0;
		if (r < 0)
			return r;
	}
	snprintf(b->keys[b->n], sizeof(b->keys[0]), "%s", key);
	if (val)
		memcpy(b->vals[b->n], val, (size_t)vlen);
	b->ops[b->n] = (struct lh_op){.type = type, .key = b->keys[b->n], .key_len = strlen(key),
	                              .value = b->vals[b->n], .value_len = val ? (uint64_t)vlen : 0};
	b->n++;
	return 0;
}

/* read every key under a relative prefix, as the leader: a txn (fenced) */
static int32_t read_prefix(struct lh_ctx *ctx, const char *prefix, const struct lh_op_result **ret)
{
	const struct lh_txn_result *res;
	struct lh_op rd = {.type = LH_OP_RANGE, .flags = LH_F_PREFIX, .key = prefix,
	                   .key_len = strlen(prefix)};
	int32_t r = ctx->host->txn(ctx, NULL, 0, &rd, 1, NULL, 0, &res);
	if (r < 0)
		lh_set_errorf(ctx, "reading %s: %s", prefix, ctx->host->last_error(ctx));
	else if (res->n_results != 1)
		r = -EIO;
	else
		*ret = &res->results[0];
	return r;
}

static int32_t converge_config(struct lh_ctx *ctx, struct batch *b)
{
	struct state *st = ctx->user;
	const struct lh_op_result *res;
	char want[VAL_MAX], key[64];
#if FORMAT_V2
	static const char schema[] = "reconciler/v2";
#else
	static const char schema[] = "reconciler/v1";
#endif
	int32_t r = read_prefix(ctx, "config/", &res);
	if (r < 0)
		return r;
	bool schema_ok = false, *ok = calloc(st->items + 1, sizeof(*ok));
	if (!ok)
		return -ENOMEM;
	for (uint64_t k = 0; k < res->n_kvs && r == 0; k++) {
		const char *name = (const char *)res->kvs[k].key, *v = (const char *)res->kvs[k].value;
		const char *num = strncmp(name, "config/items/", 13) == 0 ? name + 13 : "";
		char *end = NULL;
		/* a canonical index: digits, no leading zero */
		unsigned long i = num[0] >= '0' && num[0] <= '9' && (num[0] != '0' || !num[1])
		                      ? strtoul(num, &end, 10) : ULONG_MAX;
		if (strcmp(name, "config/schema") == 0)
			schema_ok = strcmp(v, schema) == 0;
		else if (i < st->items && end && !*end) /* a wanted item: right format? */
			ok[i] = item_value((uint32_t)i, want, sizeof(want)) > 0 && strcmp(v, want) == 0;
		else if (num[0] || strcmp(name, "config/items/") == 0) /* should not exist */
			r = batch_add(ctx, b, LH_OP_DELETE, name, NULL, 0);
	}
	if (!schema_ok && r == 0)
		r = batch_add(ctx, b, LH_OP_PUT, "config/schema", schema, (int)sizeof(schema) - 1);
	for (uint32_t i = 0; i < st->items && r == 0; i++) {
		if (ok[i])
			continue;
		snprintf(key, sizeof(key), "config/items/%u", i);
		r = batch_add(ctx, b, LH_OP_PUT, key, want, item_value(i, want, sizeof(want)));
	}
	free(ok);
	return r;
}

/* out/ to the cache: the caller checked that the cache is synced */
static int32_t converge_outputs(struct lh_ctx *ctx, struct batch *b)
{
	struct state *st = ctx->user;
	const struct lh_op_result *res;
	char want[VAL_MAX], key[160];
	int32_t r = read_prefix(ctx, "out/", &res);
	if (r < 0)
		return r;
	bool *done = calloc(st->n + 1, sizeof(*done));
	if (!done)
		return -ENOMEM;
	/* res lives until the next txn: take what it says first */
	struct { char name[160]; bool del; } *todo = calloc(res->n_kvs + 1, sizeof(*todo));
	size_t n_todo = 0;
	for (uint64_t k = 0; todo && k < res->n_kvs; k++) {
		const char *name = (const char *)res->kvs[k].key + 4;
		bool found;
		size_t i = cache_find(st, name, &found);
		int wl = found ? materialize(st->cache[i].value, st->label, want, sizeof(want)) : 0;
		if (found)
			done[i] = true;
		if (!found || strcmp((const char *)res->kvs[k].value, want) != 0 || wl >= VAL_MAX) {
			snprintf(todo[n_todo].name, sizeof(todo[0].name), "%s", name);
			todo[n_todo++].del = !found;
		}
	}
	for (size_t t = 0; todo && t < n_todo && r == 0; t++) {
		snprintf(key, sizeof(key), "out/%s", todo[t].name);
		bool found;
		size_t i = cache_find(st, todo[t].name, &found);
		r = todo[t].del ? batch_add(ctx, b, LH_OP_DELETE, key, NULL, 0)
		                : batch_add(ctx, b, LH_OP_PUT, key, want,
		                            materialize(st->cache[i].value, st->label, want, sizeof(want)));
	}
	for (size_t i = 0; todo && i < st->n && r == 0; i++) {
		if (done[i])
			continue;
		snprintf(key, sizeof(key), "out/%s", st->cache[i].name);
		r = batch_add(ctx, b, LH_OP_PUT, key, want,
		              materialize(st->cache[i].value, st->label, want, sizeof(want)));
	}
	r = todo ? r : -ENOMEM;
	free(todo);
	free(done);
	return r;
}

static int32_t rc_reconcile(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	st->reconciles++;
	if (st->delay_ms)
		poll(NULL, 0, (int)st->delay_ms); /* slow work, on the plugin's own thread */
	const char *ff = getenv("LH_EXAMPLE_FAIL_FILE");
	if (ff && *ff && access(ff, F_OK) == 0) {
		lh_set_errorf(ctx, "failing on purpose (%s exists, LH_EXAMPLE_FAIL_FILE)", ff);
		return -EIO;
	}
	if (st->reconciles <= st->fail_first) {
		lh_set_errorf(ctx, "failing on purpose (attempt %" PRIu64 " of %u, LH_EXAMPLE_FAIL_FIRST)",
		              st->reconciles, st->fail_first);
		return -EAGAIN;
	}
	struct batch *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	int32_t r = converge_config(ctx, b);
	if (r == 0 && st->synced)
		r = converge_outputs(ctx, b);
	if (r == 0) /* the rest, and the journal record even when nothing changed */
		r = fenced_write(ctx, b->ops, b->n);
	free(b);
	return r;
}

static int32_t rc_on_watch_events(struct lh_ctx *ctx, const struct lh_watch_batch *wb)
{
	struct state *st = ctx->user;
	lh_logf(ctx, LH_LOG_DEBUG, "watch batch: %" PRIu64 " event(s), flags 0x%x, revision %" PRId64,
	        wb->n_events, wb->flags, wb->revision);
	if (wb->flags & LH_WATCH_RESYNC) /* the watch was lost: start over */
		cache_clear(st);
	for (uint64_t i = 0; i < wb->n_events; i++) {
		const struct lh_watch_event *e = &wb->events[i];
		const char *name = (const char *)e->kv.key + 8; /* "desired/" */
		if (cache_apply(st, name, (const char *)e->kv.value, e->type == LH_WATCH_DELETE) < 0) {
			ctx->host->set_error(ctx, "out of memory");
			cache_clear(st); /* never act on a cache with holes */
			return -ENOMEM;
		}
	}
	if (wb->flags & LH_WATCH_SYNCED)
		st->synced = true;
	return st->synced ? ctx->host->request_reconcile(ctx) : 0;
}

static int32_t rc_init(struct lh_ctx *ctx)
{
	struct state *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->items = env_u32("LH_EXAMPLE_ITEMS", 3, MAX_ITEMS);
	st->fail_first = env_u32("LH_EXAMPLE_FAIL_FIRST", 0, UINT32_MAX - 1);
	st->delay_ms = env_u32("LH_EXAMPLE_DELAY_MS", 0, 600000);
	ctx->user = st;
	if (LH_HOST_HAS(ctx->host, config) && label_of(ctx->host->config(ctx)->cluster, st->label) < 0)
		lh_logf(ctx, LH_LOG_WARN, "the configured label is not valid: outputs carry none");
	if (LH_HOST_HAS(ctx->host, watch)) {
		int32_t r = ctx->host->watch(ctx, "desired/", 8, 0);
		if (r == -ENOTSUP) /* a host without etcd (tests): config/ only */
			lh_logf(ctx, LH_LOG_INFO, "no watches here: outputs are not maintained");
		else if (r < 0) {
			lh_set_errorf(ctx, "watch desired/: %s", ctx->host->last_error(ctx));
			free(st);
			return r;
		}
	}
	lh_logf(ctx, LH_LOG_INFO, "reconciler %d.%d.%d ready (format v%d, %u items)",
	        LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH,
	        FORMAT_V2 ? 2 : 1, st->items);
	return 0;
}

static int32_t rc_on_elected(struct lh_ctx *ctx, int64_t token)
{
	struct state *st = ctx->user;
	st->journal_counter = 0;
	st->token = token;
	lh_logf(ctx, LH_LOG_INFO, "leading with fencing token %" PRId64, token);
	return 0;
}

static int32_t rc_on_releases_changed(struct lh_ctx *ctx, const struct lh_releases *r)
{
	lh_logf(ctx, LH_LOG_DEBUG, "members: %u, releases %u.%u.%u..%u.%u.%u at revision %" PRId64,
	        r->n_members, r->min.major, r->min.minor, r->min.patch, r->max.major, r->max.minor,
	        r->max.patch, r->revision);
	return 0;
}

static int32_t rc_on_config_changed(struct lh_ctx *ctx, const struct lh_config *c)
{
	struct state *st = ctx->user;
	char label[64];
	if (label_of(c->cluster, label) < 0) {
		lh_set_errorf(ctx, "configuration revision %" PRId64 ": label is not valid; keeping "
		              "'%s'", c->cluster_revision, st->label);
		return -EINVAL;
	}
	if (strcmp(label, st->label) == 0)
		return 0;
	lh_logf(ctx, LH_LOG_INFO, "label '%s' (configuration revision %" PRId64 ")", label,
	        c->cluster_revision);
	memcpy(st->label, label, sizeof(label));
	/* the leader rewrites its outputs; a standby only keeps the setting */
	return st->token && st->synced ? ctx->host->request_reconcile(ctx) : 0;
}

static int32_t rc_validate_config(struct lh_ctx *ctx, const char *json, uint64_t len)
{
	char label[64];
	(void)len;
	if (label_of(json, label) == 0)
		return 0;
	ctx->host->set_error(ctx, "\"label\" must be a string of [A-Za-z0-9._-], at most 63 bytes");
	return -EINVAL;
}

static void rc_on_deposed(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	cache_clear(st); /* a standby holds nothing */
	lh_logf(ctx, LH_LOG_INFO, "no longer leading (token %" PRId64 ")", st->token);
	st->token = 0;
}

static void rc_fini(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	cache_clear(st);
	free(st->cache);
	free(st);
	ctx->user = NULL;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
#ifdef LH_EXAMPLE_REFERENCE_ROLLOUT
	.flags = LH_PLUGIN_F_REFERENCE_ROLLOUT,
#endif
	.name = "reconciler",
	.release = {LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, FORMAT_V2 ? 1 : 0, 0},
	.init = rc_init,
	.on_elected = rc_on_elected,
	.on_releases_changed = rc_on_releases_changed,
	.reconcile = rc_reconcile,
	.on_deposed = rc_on_deposed,
	.fini = rc_fini,
#ifdef LH_EXAMPLE_ROLE
	.role = LH_EXAMPLE_ROLE, /* e.g. -DLH_EXAMPLE_ROLE='"controller"' */
#endif
	.on_watch_events = rc_on_watch_events,
	.on_config_changed = rc_on_config_changed,
	.validate_config = rc_validate_config,
};
