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
 *
 * Built with -DKEYED_CONCURRENCY=N (tests/plugins/plugins.am: keyed4) it is
 * "keyed4", declares key_concurrency N and is slow on purpose: each
 * reconcile_key holds its key for KEYED_HOLD_MS (an input "slow:<v>" for
 * KEYED_SLOW_MS, then its output is "done:slow:<v>"), and what it saw of the
 * others goes to seen/<name> = "<keys in flight at most while it ran> <1 if
 * its own key was already in flight, else 0>", written before its output,
 * so a test reads the overlap the plugin itself observed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <leasehold/plugin.h>

#ifdef KEYED_CONCURRENCY
#include <pthread.h>
#define KEYED_NAME "keyed4"
#define KEYED_HOLD_MS 15
#define KEYED_SLOW_MS 300
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
#define KEYED_LOCK() pthread_mutex_lock(&g_mu)
#define KEYED_UNLOCK() pthread_mutex_unlock(&g_mu)
#else
#define KEYED_NAME "keyed"
#define KEYED_CONCURRENCY 0
#define KEYED_LOCK() ((void)0)
#define KEYED_UNLOCK() ((void)0)
#endif

#define KEYED_SLOTS 256
static struct {
	char key[64];
	unsigned tries;
} g_seen[KEYED_SLOTS];

/* the tries of key so far, counting this one */
static unsigned keyed_try(const char *key)
{
	unsigned n = 1;
	KEYED_LOCK();
	for (unsigned i = 0; i < KEYED_SLOTS; i++) {
		if (!g_seen[i].key[0])
			snprintf(g_seen[i].key, sizeof(g_seen[i].key), "%s", key);
		if (strcmp(g_seen[i].key, key) == 0) {
			n = ++g_seen[i].tries;
			break;
		}
	}
	KEYED_UNLOCK();
	return n;
}

#if KEYED_CONCURRENCY
/* the keys in flight now (each at most once if the host keeps its promise) */
static struct {
	char keys[64][64];
	unsigned n, max_n; /* in flight; the most while the current calls ran */
} g_flight;

/* key enters: true when it was already in flight (the host broke its promise) */
static int keyed_enter(const char *key)
{
	int twice = 0;
	KEYED_LOCK();
	for (unsigned i = 0; i < g_flight.n; i++)
		twice |= strcmp(g_flight.keys[i], key) == 0;
	if (g_flight.n < 64)
		snprintf(g_flight.keys[g_flight.n++], sizeof(g_flight.keys[0]), "%s", key);
	if (g_flight.n > g_flight.max_n)
		g_flight.max_n = g_flight.n;
	KEYED_UNLOCK();
	return twice;
}

/* key leaves; the most keys in flight since the last time nothing was */
static unsigned keyed_leave(const char *key)
{
	KEYED_LOCK();
	for (unsigned i = 0; i < g_flight.n; i++)
		if (strcmp(g_flight.keys[i], key) == 0) {
			memmove(g_flight.keys[i], g_flight.keys[i + 1],
				(g_flight.n - i - 1) * sizeof(g_flight.keys[0]));
			g_flight.n--;
			break;
		}
	unsigned max_n = g_flight.max_n;
	if (g_flight.n == 0)
		g_flight.max_n = 0;
	KEYED_UNLOCK();
	return max_n;
}

/* hold the key a while, then say what was seen meanwhile in seen/<name> */
static int32_t keyed_hold(struct lh_ctx *ctx, const char *key, const char *name, uint64_t len,
			  const char *value)
{
	int twice = keyed_enter(key);
	long ms = strncmp(value, "slow:", 5) == 0 ? KEYED_SLOW_MS : KEYED_HOLD_MS;
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL); /* the work this key stands for */
	unsigned max_n = keyed_leave(key);
	const char *seen = lh_printf(ctx, "seen/%.*s", (int)len, name);
	const char *v = lh_printf(ctx, "%u %d", max_n, twice);
	if (!seen || !v)
		return -ENOMEM;
	return ctx->host->apply_key(ctx, seen, strlen(seen), v, strlen(v), NULL);
}
#endif

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
#if KEYED_CONCURRENCY
	if ((r = keyed_hold(ctx, key, name, len, v)) < 0)
		return r;
#endif
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
	LH_PLUGIN_HEADER_INIT, .name = KEYED_NAME, .release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0}, .min_compatible_release = {1, 0, 0},
	.init = keyed_init, .reconcile_key = keyed_reconcile_key, .key_of = keyed_key_of,
	.key_backoff_min_ms = 20, .key_backoff_max_ms = 200, .key_concurrency = KEYED_CONCURRENCY,
};
