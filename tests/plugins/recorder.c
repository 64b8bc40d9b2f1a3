/* SPDX-License-Identifier: MIT */
/*
 * recorder.c - a test plugin that records every callback in a trace the test
 * reads, and lets the test hold a reconcile (a condition variable) to model
 * a slow callback without sleeping. See recorder.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#include "recorder.h"

struct recorder *recorder_get(void);

static struct recorder g_rec = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
	.notify_fd = -1,
};

struct recorder *recorder_get(void)
{
	return &g_rec;
}

static void notify_locked(void)
{
	pthread_cond_broadcast(&g_rec.cv);
	if (g_rec.notify_fd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(g_rec.notify_fd, &one, sizeof(one));
		(void)w;
	}
}

static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rec(const char *fmt, ...)
{
	pthread_mutex_lock(&g_rec.mu);
	if (g_rec.n < RECORDER_MAX) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g_rec.trace[g_rec.n], RECORDER_LINE, fmt, ap);
		va_end(ap);
		g_rec.n++;
	}
	notify_locked();
	pthread_mutex_unlock(&g_rec.mu);
}

static int32_t r_init(struct lh_ctx *ctx)
{
	pthread_mutex_lock(&g_rec.mu);
	int32_t r = g_rec.init_result;
	pthread_mutex_unlock(&g_rec.mu);
	rec("init");
	if (r < 0)
		ctx->host->set_error(ctx, "init refused by the test");
	return r;
}

static int32_t r_on_elected(struct lh_ctx *ctx, int64_t token)
{
	rec("elected %" PRId64 " api_token=%" PRId64, token, ctx->host->fencing_token(ctx));
	pthread_mutex_lock(&g_rec.mu);
	int txn = g_rec.elected_txn;
	pthread_mutex_unlock(&g_rec.mu);
	if (txn) {
		const struct lh_txn_result *res;
		struct lh_op put = {.type = LH_OP_PUT, .key = "e/k", .key_len = 3, .value = "v",
		                    .value_len = 1};
		int32_t r = ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
		rec("elected txn r=%d", (int)r);
	}
	return 0;
}

static int32_t r_on_releases_changed(struct lh_ctx *ctx, const struct lh_releases *r)
{
	(void)ctx;
	rec("releases %u.%u.%u-%u.%u.%u rev=%" PRId64 " n=%u", r->min.major, r->min.minor,
	    r->min.patch, r->max.major, r->max.minor, r->max.patch, r->revision, r->n_members);
	return 0;
}

static void *outside_thread(void *arg)
{
	struct lh_ctx *ctx = arg;
	struct lh_op op = {.type = LH_OP_RANGE, .key = "x", .key_len = 1};
	const struct lh_txn_result *res;
	rec("outside txn r=%d", (int)ctx->host->txn(ctx, NULL, 0, &op, 1, NULL, 0, &res));
	return NULL;
}

static void fmt_result(const struct lh_txn_result *res, char *buf, size_t len)
{
	size_t off = 0;
	off += (size_t)snprintf(buf + off, len - off, "succeeded=%u n=%" PRIu64, res->succeeded,
	                        res->n_results);
	for (uint64_t i = 0; i < res->n_results && off < len; i++) {
		const struct lh_op_result *o = &res->results[i];
		off += (size_t)snprintf(buf + off, len - off, " [t%u", o->type);
		for (uint64_t k = 0; k < o->n_kvs && off < len; k++)
			off += (size_t)snprintf(buf + off, len - off, " %s=%s", (const char *)o->kvs[k].key,
			                        (const char *)o->kvs[k].value);
		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, "]");
	}
}

static int32_t do_txns(struct lh_ctx *ctx, int mode)
{
	const struct lh_host_api *h = ctx->host;
	const struct lh_txn_result *res;
	char buf[RECORDER_LINE];
	int32_t r;
	if (mode == RECORDER_TXN_PUT_RANGE) {
		struct lh_compare c = {.target = LH_CMP_VERSION, .result = LH_CMP_EQUAL, .key = "a/k",
		                       .key_len = 3, .number = 0};
		struct lh_op ok[] = {
			{.type = LH_OP_PUT, .key = "a/k", .key_len = 3, .value = "v1", .value_len = 2},
			{.type = LH_OP_PUT, .key = "a/j", .key_len = 3, .value = "v2", .value_len = 2},
		};
		struct lh_op ko = {.type = LH_OP_RANGE, .key = "a/k", .key_len = 3};
		r = h->txn(ctx, &c, 1, ok, 2, &ko, 1, &res);
		if (r < 0) {
			rec("txn1 err=%d msg=%s", (int)r, h->last_error(ctx));
			h->set_error(ctx, h->last_error(ctx));
			return r;
		}
		fmt_result(res, buf, sizeof(buf));
		rec("txn1 %s", buf);
		struct lh_op rg = {.type = LH_OP_RANGE, .flags = LH_F_PREFIX, .key = "a/", .key_len = 2};
		r = h->txn(ctx, NULL, 0, &rg, 1, NULL, 0, &res);
		if (r < 0) {
			rec("txn2 err=%d msg=%s", (int)r, h->last_error(ctx));
			return r;
		}
		fmt_result(res, buf, sizeof(buf));
		rec("txn2 %s", buf);
		struct lh_op bad = {.type = 7, .key = "a", .key_len = 1};
		r = h->txn(ctx, NULL, 0, &bad, 1, NULL, 0, &res);
		rec("txn3 r=%d", (int)r);
	} else if (mode == RECORDER_TXN_CONTEXT) {
		rec("ctx token=%" PRId64 " node=%s prefix=%s has_txn=%d", h->fencing_token(ctx),
		    h->node_id(ctx), h->data_prefix(ctx), LH_HOST_HAS(h, txn) ? 1 : 0);
		lh_logf(ctx, LH_LOG_WARN, "hello from the recorder %d", 42);
	} else if (mode == RECORDER_TXN_OUTSIDE) {
		pthread_t t;
		if (pthread_create(&t, NULL, outside_thread, ctx) == 0)
			pthread_join(t, NULL);
	}
	return 0;
}

static int32_t r_reconcile(struct lh_ctx *ctx)
{
	pthread_mutex_lock(&g_rec.mu);
	g_rec.in_reconcile = 1;
	notify_locked();
	while (g_rec.hold)
		pthread_cond_wait(&g_rec.cv, &g_rec.mu);
	int32_t r = g_rec.reconcile_result;
	int mode = g_rec.txn_mode;
	char msg[128];
	snprintf(msg, sizeof(msg), "%s", g_rec.reconcile_msg);
	pthread_mutex_unlock(&g_rec.mu);
	rec("reconcile");
	if (mode != RECORDER_TXN_NONE) {
		int32_t t = do_txns(ctx, mode);
		if (t < 0)
			r = t;
	}
	if (r < 0 && msg[0])
		ctx->host->set_error(ctx, msg);
	pthread_mutex_lock(&g_rec.mu);
	g_rec.in_reconcile = 0;
	notify_locked();
	pthread_mutex_unlock(&g_rec.mu);
	return r;
}

static void r_on_deposed(struct lh_ctx *ctx)
{
	rec("deposed api_token=%" PRId64, ctx->host->fencing_token(ctx));
}

static void r_fini(struct lh_ctx *ctx)
{
	(void)ctx;
	rec("fini");
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "recorder",
	.release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, 0, 0},
	.init = r_init,
	.on_elected = r_on_elected,
	.on_releases_changed = r_on_releases_changed,
	.reconcile = r_reconcile,
	.on_deposed = r_on_deposed,
	.fini = r_fini,
};
