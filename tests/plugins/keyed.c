/* SPDX-License-Identifier: MIT */
/*
 * keyed.c - a keyed controller (ABI 1.3 reconcile_key, no reconcile): every
 * input in/<name> gets the output out/<name> = "done:<input>", an output
 * whose input is gone is deleted, and an output changed by anyone else is
 * put back, because key_of maps an output's event to its input's key.
 * Inputs steer it, for the tests:
 *   "fail:N:<v>"  the first N reconciles of the key fail (-EIO, with a
 *                 reason); the output then becomes "done:<v>" and
 *                 tries/<name> the number of tries it took
 *   "later:<v>"   the first reconcile asks to run again after 200 ms
 *                 (LH_REQUEUE_AFTER_MS); the second writes the output
 * Counts are kept in the worker's memory (a crash starts them over).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#define KEYED_SLOTS 256
static struct {
	char key[64];
	unsigned tries;
} g_seen[KEYED_SLOTS];

/* the tries of key so far, counting this one */
static unsigned keyed_try(const char *key)
{
	for (unsigned i = 0; i < KEYED_SLOTS; i++) {
		if (!g_seen[i].key[0])
			snprintf(g_seen[i].key, sizeof(g_seen[i].key), "%s", key);
		if (strcmp(g_seen[i].key, key) == 0)
			return ++g_seen[i].tries;
	}
	return 1;
}

static int32_t keyed_init(struct lh_ctx *ctx)
{
	if (ctx->host->watch(ctx, "in/", 3, 0) < 0 || ctx->host->watch(ctx, "out/", 4, 0) < 0)
		return -EINVAL;
	return 0;
}

static int32_t keyed_key_of(struct lh_ctx *ctx, const struct lh_watch_batch *b,
			    const struct lh_watch_event *ev, char *buf, uint32_t cap)
{
	(void)ctx;
	(void)b;
	uint64_t len;
	const char *name = lh_key_strip(ev->kv.key, ev->kv.key_len, "out/", &len);
	if (!name) { /* an input: its own key */
		if (ev->kv.key_len > cap)
			return -ENAMETOOLONG;
		memcpy(buf, ev->kv.key, ev->kv.key_len);
		return (int32_t)ev->kv.key_len;
	}
	int n = snprintf(buf, cap, "in/%.*s", (int)len, name);
	return n > 0 && (uint32_t)n <= cap ? n : -ENAMETOOLONG;
}

static int32_t keyed_reconcile_key(struct lh_ctx *ctx, const char *key, uint32_t key_len)
{
	const struct lh_host_api *h = ctx->host;
	uint64_t len;
	const char *name = lh_key_strip(key, key_len, "in/", &len);
	if (!name)
		return 0;
	const char *out = lh_printf(ctx, "out/%.*s", (int)len, name);
	const struct lh_op_result *in;
	int32_t r = out ? h->range(ctx, key, key_len, 0, 0, &in) : -ENOMEM;
	if (r < 0)
		return r;
	if (in->n_kvs == 0)
		return h->apply_key(ctx, out, strlen(out), NULL, 0, NULL);
	const char *v = (const char *)in->kvs[0].value;
	unsigned n = keyed_try(key), fails = 0;
	if (sscanf(v, "fail:%u:", &fails) == 1) {
		if (n <= fails) {
			h->set_error(ctx, lh_printf(ctx, "try %u of %s fails on purpose", n, key));
			return -EIO;
		}
		const char *tries = lh_printf(ctx, "tries/%.*s", (int)len, name);
		const char *count = lh_printf(ctx, "%u", n);
		if (!tries || !count || (r = h->apply_key(ctx, tries, strlen(tries), count,
							  strlen(count), NULL)) < 0)
			return r < 0 ? r : -ENOMEM;
		v = strchr(v + 5, ':') + 1;
	} else if (strncmp(v, "later:", 6) == 0) {
		if (n == 1)
			return LH_REQUEUE_AFTER_MS(200);
		v += 6;
	}
	const char *want = lh_printf(ctx, "done:%s", v);
	return want ? h->apply_key(ctx, out, strlen(out), want, strlen(want), NULL) : -ENOMEM;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT, .name = "keyed", .release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0}, .min_compatible_release = {1, 0, 0},
	.init = keyed_init, .reconcile_key = keyed_reconcile_key, .key_of = keyed_key_of,
	.key_backoff_min_ms = 20, .key_backoff_max_ms = 200,
};
