/* SPDX-License-Identifier: MIT */
/*
 * reconciler.c - the example leasehold plugin "reconciler".
 *
 * It keeps a small desired state under its data prefix (P/reconciler/data/):
 *   config/schema        the schema this release writes ("reconciler/v1" or
 *                        "reconciler/v2")
 *   config/items/<i>     LH_EXAMPLE_ITEMS entries (default 3) in the release's
 *                        format: v1 "item=<i>;state=ready"
 *                                 v2 {"item":<i>,"state":"ready","format":2}
 * Each reconcile reads config/, writes what differs (and deletes items that
 * should not exist), and appends a journal record in the SAME txn:
 *   journal/<fencing token, 16 hex>-<counter, 8 digits>
 *       = "node=<id> token=<token> release=<x.y.z> items=<n>"
 * The txn compares that the record does not exist yet, and the host adds the
 * leadership fence, so an invariant checker can later verify that no two
 * leaders reconciled concurrently: every record of one token comes from one
 * node, and tokens only grow along the etcd revisions of the records.
 *
 * Releases (compile time, each a plain number):
 *   -DLH_EXAMPLE_RELEASE_MAJOR=1 -DLH_EXAMPLE_RELEASE_MINOR=1 -DLH_EXAMPLE_RELEASE_PATCH=0
 * 1.0.x writes format v1. 1.1.0 and later write format v2, which 1.0.x
 * consumers cannot read: an incompatible change, so such a build declares
 * min_compatible_release 1.1.0 (nothing older may serve once it has
 * reconciled). min_reconciler_release stays 1.0.0 (a 1.1 consumer can still
 * serve state written by a 1.0 reconciler: it reads v1 too).
 *
 * Role (ABI 1.1): built with -DLH_EXAMPLE_ROLE='"controller"' the plugin runs
 * only on nodes holding that role (the tests build such a variant).
 *
 * Test knobs, read once in init from the environment:
 *   LH_EXAMPLE_ITEMS=N        number of items (0..1000, default 3)
 *   LH_EXAMPLE_FAIL_FIRST=N   the first N reconciles fail with -EAGAIN
 *   LH_EXAMPLE_DELAY_MS=N     each reconcile waits N ms first (0..600000),
 *                             simulating slow work; the wait is a poll() on
 *                             no fds, the plugin's own thread only
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

struct state {
	uint32_t items;
	uint32_t fail_first;
	uint32_t delay_ms;
	uint64_t reconciles; /* attempts so far */
	int64_t token;       /* current term */
	uint64_t journal_counter;
};

/* env var as an unsigned number in [0, max], def when unset or invalid */
static uint32_t env_u32(const char *name, uint32_t def, uint32_t max)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || s[0] == '-' || v > max)
		return def;
	return (uint32_t)v;
}

static void wait_ms(uint32_t ms)
{
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t left = (int64_t)(end.tv_sec - now.tv_sec) * 1000 +
		               (end.tv_nsec - now.tv_nsec) / 1000000L;
		if (left <= 0)
			return;
		poll(NULL, 0, (int)left);
	}
}

static int32_t rc_init(struct lh_ctx *ctx)
{
	struct state *st = calloc(1, sizeof(*st));
	if (!st) {
		ctx->host->set_error(ctx, "out of memory");
		return -ENOMEM;
	}
	st->items = env_u32("LH_EXAMPLE_ITEMS", 3, MAX_ITEMS);
	st->fail_first = env_u32("LH_EXAMPLE_FAIL_FIRST", 0, UINT32_MAX);
	st->delay_ms = env_u32("LH_EXAMPLE_DELAY_MS", 0, 600000);
	ctx->user = st;
	lh_logf(ctx, LH_LOG_INFO, "reconciler %d.%d.%d ready (format v%d, %u items)",
	        LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH,
	        FORMAT_V2 ? 2 : 1, st->items);
	return 0;
}

static int32_t rc_on_elected(struct lh_ctx *ctx, int64_t token)
{
	struct state *st = ctx->user;
	st->token = token;
	st->journal_counter = 0;
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

static int item_value(uint32_t i, char *buf, size_t len)
{
#if FORMAT_V2
	return snprintf(buf, len, "{\"item\":%u,\"state\":\"ready\",\"format\":2}", i);
#else
	return snprintf(buf, len, "item=%u;state=ready", i);
#endif
}

/* is the item index i (from a key "config/items/<i>") wanted? */
static bool parse_item_key(const struct lh_kv *kv, uint32_t *ret_i)
{
	static const char pfx[] = "config/items/";
	size_t pl = sizeof(pfx) - 1;
	if (kv->key_len <= pl || kv->key_len > pl + 10 || memcmp(kv->key, pfx, pl) != 0)
		return false;
	uint64_t v = 0;
	for (size_t k = pl; k < kv->key_len; k++) {
		if (kv->key[k] < '0' || kv->key[k] > '9')
			return false;
		v = v * 10 + (uint64_t)(kv->key[k] - '0');
	}
	if (v > UINT32_MAX || (kv->key_len > pl + 1 && kv->key[pl] == '0'))
		return false;
	*ret_i = (uint32_t)v;
	return true;
}

#define MAX_OPS (MAX_ITEMS * 2 + 8)

static int32_t rc_reconcile(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	const struct lh_host_api *h = ctx->host;
	const struct lh_txn_result *res;
	int32_t r;

	st->reconciles++;
	if (st->delay_ms)
		wait_ms(st->delay_ms);
	if (st->reconciles <= st->fail_first) {
		lh_set_errorf(ctx, "failing on purpose (attempt %" PRIu64 " of %u, LH_EXAMPLE_FAIL_FIRST)",
		              st->reconciles, st->fail_first);
		return -EAGAIN;
	}

	/* 1. read what is there */
	struct lh_op rd = {.type = LH_OP_RANGE, .flags = LH_F_PREFIX, .key = "config/", .key_len = 7};
	r = h->txn(ctx, NULL, 0, &rd, 1, NULL, 0, &res);
	if (r < 0) {
		lh_set_errorf(ctx, "reading config/: %s", h->last_error(ctx));
		return r;
	}
	if (res->n_results != 1) {
		lh_set_errorf(ctx, "reading config/: unexpected result");
		return -EIO;
	}

	/* 2. compute the differences (values are copied: res dies at the next txn) */
#if FORMAT_V2
	static const char schema[] = "reconciler/v2";
#else
	static const char schema[] = "reconciler/v1";
#endif
	bool *have_ok = calloc(st->items ? st->items : 1, sizeof(*have_ok));
	struct lh_op *ops = calloc(MAX_OPS, sizeof(*ops));
	char (*keys)[32] = calloc(MAX_OPS, sizeof(*keys));
	char (*vals)[64] = calloc(MAX_OPS, sizeof(*vals));
	char jkey[64], jval[256];
	uint32_t n = 0;
	bool schema_ok = false;
	if (!have_ok || !ops || !keys || !vals) {
		r = -ENOMEM;
		ctx->host->set_error(ctx, "out of memory");
		goto out;
	}
	for (uint64_t k = 0; k < res->results[0].n_kvs; k++) {
		const struct lh_kv *kv = &res->results[0].kvs[k];
		uint32_t i;
		char want[64];
		if (kv->key_len == 13 && memcmp(kv->key, "config/schema", 13) == 0) {
			schema_ok = kv->value_len == sizeof(schema) - 1 &&
			            memcmp(kv->value, schema, kv->value_len) == 0;
		} else if (parse_item_key(kv, &i) && i < st->items) {
			int wl = item_value(i, want, sizeof(want));
			have_ok[i] = wl > 0 && kv->value_len == (uint64_t)wl &&
			             memcmp(kv->value, want, (size_t)wl) == 0;
		} else if (kv->key_len < sizeof(keys[0]) && kv->key_len > 13 &&
		           memcmp(kv->key, "config/items/", 13) == 0 && n < MAX_OPS - 2) {
			/* an item that should not exist */
			memcpy(keys[n], kv->key, kv->key_len);
			ops[n] = (struct lh_op){.type = LH_OP_DELETE, .key = keys[n], .key_len = kv->key_len};
			n++;
		}
	}
	if (!schema_ok) {
		ops[n++] = (struct lh_op){.type = LH_OP_PUT, .key = "config/schema", .key_len = 13,
		                          .value = schema, .value_len = sizeof(schema) - 1};
	}
	for (uint32_t i = 0; i < st->items && n < MAX_OPS - 1; i++) {
		if (have_ok[i])
			continue;
		int kl = snprintf(keys[n], sizeof(keys[n]), "config/items/%u", i);
		int vl = item_value(i, vals[n], sizeof(vals[n]));
		ops[n] = (struct lh_op){.type = LH_OP_PUT, .key = keys[n], .key_len = (uint64_t)kl,
		                        .value = vals[n], .value_len = (uint64_t)vl};
		n++;
	}

	/* 3. the journal record, in the same txn */
	int64_t token = h->fencing_token(ctx);
	uint64_t counter = st->journal_counter;
	int jkl = snprintf(jkey, sizeof(jkey), "journal/%016" PRIx64 "-%08" PRIu64, (uint64_t)token,
	                   counter);
	int jvl = snprintf(jval, sizeof(jval), "node=%s token=%" PRId64 " release=%d.%d.%d items=%u",
	                   h->node_id(ctx), token, LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR,
	                   LH_EXAMPLE_RELEASE_PATCH, st->items);
	ops[n++] = (struct lh_op){.type = LH_OP_PUT, .key = jkey, .key_len = (uint64_t)jkl,
	                          .value = jval, .value_len = (uint64_t)jvl};
	struct lh_compare fresh = {.target = LH_CMP_CREATE, .result = LH_CMP_EQUAL, .key = jkey,
	                           .key_len = (uint64_t)jkl, .number = 0};
	r = h->txn(ctx, &fresh, 1, ops, n, NULL, 0, &res);
	if (r < 0) {
		lh_set_errorf(ctx, "writing: %s", h->last_error(ctx));
		goto out;
	}
	if (!res->succeeded) {
		/* the record exists (a retry after an unknown outcome) or we lost the
		 * fence: skip the counter and let the host retry */
		st->journal_counter++;
		r = -EAGAIN;
		ctx->host->set_error(ctx, "txn compare failed (journal record exists or not leading)");
		goto out;
	}
	st->journal_counter++;
	lh_logf(ctx, LH_LOG_DEBUG, "reconciled: %u ops, journal %s", n, jkey);
	r = 0;
out:
	free(have_ok);
	free(ops);
	free(keys);
	free(vals);
	return r;
}

static void rc_on_deposed(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	lh_logf(ctx, LH_LOG_INFO, "no longer leading (token %" PRId64 ")", st->token);
	st->token = 0;
}

static void rc_fini(struct lh_ctx *ctx)
{
	free(ctx->user);
	ctx->user = NULL;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "reconciler",
	.release = {LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH},
	.min_reconciler_release = {1, 0, 0},
#if FORMAT_V2
	.min_compatible_release = {1, 1, 0},
#else
	.min_compatible_release = {1, 0, 0},
#endif
	.init = rc_init,
	.on_elected = rc_on_elected,
	.on_releases_changed = rc_on_releases_changed,
	.reconcile = rc_reconcile,
	.on_deposed = rc_on_deposed,
	.fini = rc_fini,
#ifdef LH_EXAMPLE_ROLE
	.role = LH_EXAMPLE_ROLE, /* e.g. -DLH_EXAMPLE_ROLE='"controller"' */
#endif
};
