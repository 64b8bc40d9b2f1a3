/* SPDX-License-Identifier: MIT */
/*
 * mirror.c - the "mirror" test plugin: a watch-driven controller that never
 * reads etcd. Its world is what its two watches delivered ("in/" and
 * "aux/"); reconcile derives out/<k> for every in/<k> from it and applies
 * that set (so an output whose input is gone is deleted), then records the
 * snapshot it derived from in meta/cut:
 *     in@<revision>/<first batch flags>/<batches> aux@<revision>/<flags>/<batches>
 * Before both watches' snapshots are complete it writes nothing, and a term
 * starts from its own (on_elected forgets whether the last one was).
 * MIRROR_MINOR=0 builds 1.0.0 (out = "v1:<in>"), MIRROR_MINOR=1 builds
 * 1.1.0, incompatible (out = "v2:<in>@<aux/label>").
 * $LH_MIRROR_HOLD names a file: while it exists, on_watch_events waits (a
 * slow plugin; the test removes the file).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#ifndef MIRROR_MINOR
#define MIRROR_MINOR 0
#endif
#define MAX_KEYS 64
#define MAX_LEN 128

struct entry {
	char key[MAX_LEN], value[MAX_LEN];
};

/* one watch's world and what its snapshot was */
struct world {
	struct entry e[MAX_KEYS];
	int n;
	int synced;	     /* its snapshot is complete */
	long long rev;	     /* the snapshot's revision */
	unsigned first;	     /* the flags of its first batch */
	int batches;	     /* batches of the snapshot */
};

static struct world g_w[2]; /* in/, aux/ */

static void world_put(struct world *w, const struct lh_kv *kv, int del)
{
	char k[MAX_LEN], v[MAX_LEN];
	snprintf(k, sizeof(k), "%.*s", (int)kv->key_len, (const char *)kv->key);
	snprintf(v, sizeof(v), "%.*s", (int)kv->value_len, kv->value ? (const char *)kv->value : "");
	for (int i = 0; i < w->n; i++)
		if (strcmp(w->e[i].key, k) == 0) {
			if (del)
				w->e[i] = w->e[--w->n];
			else
				snprintf(w->e[i].value, MAX_LEN, "%s", v);
			return;
		}
	if (!del && w->n < MAX_KEYS) {
		snprintf(w->e[w->n].key, MAX_LEN, "%s", k);
		snprintf(w->e[w->n].value, MAX_LEN, "%s", v);
		w->n++;
	}
}

static int32_t changed(struct lh_ctx *ctx, const struct lh_watch_batch *b)
{
	if (b->watch_id > 1)
		return -EINVAL;
	const char *hold = getenv("LH_MIRROR_HOLD");
	while (hold && access(hold, F_OK) == 0)
		poll(NULL, 0, 5);
	struct world *w = &g_w[b->watch_id];
	if ((b->flags & LH_WATCH_SNAPSHOT) && (w->synced || (b->flags & LH_WATCH_RESYNC) ||
					       !w->batches)) {
		/* a new snapshot (a term's, a resync, a shadow run's): start over */
		w->n = 0;
		w->synced = 0;
		w->rev = b->revision;
		w->first = b->flags;
		w->batches = 0;
	}
	if (b->flags & LH_WATCH_SNAPSHOT)
		w->batches++;
	for (uint64_t i = 0; i < b->n_events; i++)
		world_put(w, &b->events[i].kv, b->events[i].type == LH_WATCH_DELETE);
	if (b->flags & LH_WATCH_SYNCED)
		w->synced = 1;
	/* derive again once the world is complete, and on every change (on a
	 * standby, a shadow run included, this is -ESTALE and harmless) */
	if ((b->flags & LH_WATCH_SYNCED) || !(b->flags & LH_WATCH_SNAPSHOT))
		(void)ctx->host->request_reconcile(ctx);
	return 0;
}

static const char *aux_label(void)
{
	for (int i = 0; i < g_w[1].n; i++)
		if (strcmp(g_w[1].e[i].key, "aux/label") == 0)
			return g_w[1].e[i].value;
	return "-";
}

static int32_t reconcile(struct lh_ctx *ctx)
{
	if (!g_w[0].synced || !g_w[1].synced)
		return 0; /* no world yet: nothing to derive */
	struct lh_apply_kv *set = ctx->host->alloc(ctx, sizeof(*set) * (MAX_KEYS + 1));
	if (!set)
		return -ENOMEM;
	uint64_t n = 0;
	for (int i = 0; i < g_w[0].n; i++) {
		const char *k = g_w[0].e[i].key + 3; /* past "in/" */
		char *key = lh_printf(ctx, "out/%s", k);
		char *val = MIRROR_MINOR ? lh_printf(ctx, "v2:%s@%s", g_w[0].e[i].value, aux_label())
					 : lh_printf(ctx, "v1:%s", g_w[0].e[i].value);
		if (!key || !val)
			return -ENOMEM;
		set[n++] = (struct lh_apply_kv){key, strlen(key), val, strlen(val)};
	}
	struct lh_apply_result res;
	int32_t r = ctx->host->apply(ctx, "out/", 4, set, n, 0, &res);
	if (r < 0)
		return r;
	char *cut = lh_printf(ctx, "in@%lld/%u/%d aux@%lld/%u/%d", g_w[0].rev, g_w[0].first,
			      g_w[0].batches, g_w[1].rev, g_w[1].first, g_w[1].batches);
	return cut ? ctx->host->apply_key(ctx, "meta/cut", 8, cut, strlen(cut), NULL) : -ENOMEM;
}

/* a term's world is its own snapshot: what a shadow run (or an earlier
 * term) left is not acted on until this term's snapshot is complete */
static int32_t elected(struct lh_ctx *ctx, int64_t token)
{
	(void)ctx;
	(void)token;
	g_w[0].synced = g_w[1].synced = 0;
	g_w[0].batches = g_w[1].batches = 0;
	return 0;
}

static int32_t init(struct lh_ctx *ctx)
{
	memset(g_w, 0, sizeof(g_w));
	if (ctx->host->watch(ctx, "in/", 3, 0) != 0 || ctx->host->watch(ctx, "aux/", 4, 0) != 1)
		return -EIO;
	return 0;
}

const struct lh_plugin leasehold_plugin = {LH_PLUGIN_HEADER_INIT, .name = "mirror",
	.release = {1, MIRROR_MINOR, 0}, .min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, MIRROR_MINOR, 0}, .init = init, .on_elected = elected,
	.reconcile = reconcile, .on_watch_events = changed};
