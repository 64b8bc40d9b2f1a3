/* SPDX-License-Identifier: MIT */
/*
 * benchplugin.c - a leasehold plugin that reports its callbacks, for
 * `make bench` (bench/lh-bench.c). Not installed; built by bench/bench.sh.
 *
 * Each callback sends one datagram to the unix socket named by the
 * environment variable LH_BENCH_SOCK (read in init; unset = silent):
 *     "<ev> <node> <name> <release> <mono_ns> <a> <b>"
 * ev: I init, E on_elected (a = token), R on_releases_changed (a = revision,
 * b = n_members), W a fenced write was acknowledged by etcd (a = token,
 * b = CLOCK_MONOTONIC right before the plugin called txn),
 * D on_deposed, F fini. mono_ns is CLOCK_MONOTONIC taken at the callback's
 * entry (for W: right after the txn returned), so the driver measures
 * intervals across processes on one clock. The reports of a term's start
 * (E and the replay's R, W) are held until its first reconcile returns and
 * then sent in order: a datagram wakes the driver, and that must not sit on
 * the path from on_elected to the first fenced write being measured.
 *
 * reconcile writes one journal record journal/<token hex>-<counter> in a
 * fenced txn (like plugin/example/reconciler.c); LH_BENCH_NOWRITE=1 makes
 * it a no-op (bus round-trip measurement).
 *
 * Watches (ABI 1.2), with LH_BENCH_WATCH=1: init watches in/ (relative).
 * on_watch_events reports B at its entry (a = batch flags, b = the first
 * event's mod_revision, 0 if none) and, for a synced batch, S (a = the
 * snapshot's events so far). With LH_BENCH_WATCH_WRITE=1 every event
 * in/<k> = "v<n>" is answered with a fenced put out/<k> = "v<n>", reported
 * as O after etcd acknowledged it (a = n, b = CLOCK_MONOTONIC before txn).
 *
 * -DBENCH_KEYED: a keyed controller (ABI 1.3 reconcile_key, no
 * on_watch_events: the host takes the watch's keys itself): each key
 * in/<k> is read (range) and its output out/<k> written with apply_key,
 * reported as O after etcd acknowledged it (a = n of "v<n>", b =
 * CLOCK_MONOTONIC at the key's entry) (figure 16). Its reconcile, after
 * the journal record, makes every output equal its input with one apply
 * (a full resync): its range of the inputs reported as y (t = returned,
 * a = keys read, b = entered), the apply as Y (t = returned, a = keys
 * written or deleted, b = entered) (figure 17).
 *
 * -DBENCH_BROKEN: a release that breaks: reconcile reports X (its entry)
 * and fails with -EIO, writing nothing (figure 13).
 *
 * Compile-time identity (every field a plain number / a string):
 *   -DBENCH_NAME='"bench"' -DBENCH_MAJOR=1 -DBENCH_MINOR=0 -DBENCH_PATCH=0
 *   -DBENCH_MC_MAJOR=1 -DBENCH_MC_MINOR=0 -DBENCH_MC_PATCH=0 (min_compatible)
 *   -DBENCH_FLAGS=0 (descriptor flags, e.g. LH_PLUGIN_F_REFERENCE_ROLLOUT)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#ifndef BENCH_NAME
#define BENCH_NAME "bench"
#endif
#ifndef BENCH_MAJOR
#define BENCH_MAJOR 1
#endif
#ifndef BENCH_MINOR
#define BENCH_MINOR 0
#endif
#ifndef BENCH_PATCH
#define BENCH_PATCH 0
#endif
#ifndef BENCH_MC_MAJOR
#define BENCH_MC_MAJOR 1
#endif
#ifndef BENCH_MC_MINOR
#define BENCH_MC_MINOR 0
#endif
#ifndef BENCH_MC_PATCH
#define BENCH_MC_PATCH 0
#endif
#ifndef BENCH_FLAGS
#define BENCH_FLAGS 0
#endif

struct held {
	char ev;
	uint64_t t;
	int64_t a, b;
};

struct bstate {
	int fd;
	struct sockaddr_un to;
	int nowrite;
	int watch_write;
	uint64_t snapshot_events;
	int64_t token;
	uint64_t counter;
	/* reports of a term's start, held until its first reconcile returns:
	 * a datagram wakes the driver, which would sit on the path measured */
	int holding;
	unsigned n_held;
	struct held held[4];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void send_report(struct lh_ctx *ctx, char ev, uint64_t t, int64_t a, int64_t b)
{
	struct bstate *st = ctx->user;
	char msg[256];
	int n = snprintf(msg, sizeof(msg), "%c %s %s %d.%d.%d %" PRIu64 " %" PRId64 " %" PRId64, ev,
	                 ctx->host->node_id(ctx), BENCH_NAME, BENCH_MAJOR, BENCH_MINOR, BENCH_PATCH,
	                 t, a, b);
	if (n > 0 && (size_t)n < sizeof(msg))
		(void)sendto(st->fd, msg, (size_t)n, MSG_DONTWAIT, (const struct sockaddr *)&st->to,
		             sizeof(st->to));
}

static void release_held(struct lh_ctx *ctx)
{
	struct bstate *st = ctx->user;
	st->holding = 0;
	for (unsigned i = 0; i < st->n_held; i++)
		send_report(ctx, st->held[i].ev, st->held[i].t, st->held[i].a, st->held[i].b);
	st->n_held = 0;
}

static void report(struct lh_ctx *ctx, char ev, uint64_t t, int64_t a, int64_t b)
{
	struct bstate *st = ctx->user;
	if (!st || st->fd < 0)
		return;
	if (st->holding && st->n_held < sizeof(st->held) / sizeof(st->held[0])) {
		st->held[st->n_held++] = (struct held){ev, t, a, b};
		return;
	}
	release_held(ctx);
	send_report(ctx, ev, t, a, b);
}

static int32_t b_init(struct lh_ctx *ctx)
{
	uint64_t t = mono_ns();
	struct bstate *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->fd = -1;
	const char *p = getenv("LH_BENCH_SOCK");
	if (p && *p && strlen(p) < sizeof(st->to.sun_path)) {
		st->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		st->to.sun_family = AF_UNIX;
		memcpy(st->to.sun_path, p, strlen(p) + 1);
	}
	const char *nw = getenv("LH_BENCH_NOWRITE");
	st->nowrite = nw && strcmp(nw, "1") == 0;
	const char *ww = getenv("LH_BENCH_WATCH_WRITE");
	st->watch_write = ww && strcmp(ww, "1") == 0;
	ctx->user = st;
	const char *w = getenv("LH_BENCH_WATCH");
	if (w && strcmp(w, "1") == 0 && LH_HOST_HAS(ctx->host, watch)) {
		int32_t r = ctx->host->watch(ctx, "in/", 3, 0);
		if (r < 0)
			return r;
	}
	report(ctx, 'I', t, 0, 0);
	return 0;
}

static int32_t b_on_elected(struct lh_ctx *ctx, int64_t token)
{
	uint64_t t = mono_ns();
	struct bstate *st = ctx->user;
	st->token = token;
	st->counter = 0;
	st->holding = 1;
	report(ctx, 'E', t, token, 0);
	return 0;
}

static int32_t b_on_releases_changed(struct lh_ctx *ctx, const struct lh_releases *r)
{
	report(ctx, 'R', mono_ns(), r->revision, r->n_members);
	return 0;
}

static int32_t journal_write(struct lh_ctx *ctx, struct bstate *st);

#ifdef BENCH_KEYED
/* the full resync: out/<k> = in/<k> for every input, one apply */
static int32_t b_resync(struct lh_ctx *ctx)
{
	uint64_t t = mono_ns();
	const struct lh_op_result *in;
	int32_t r = ctx->host->range(ctx, "in/", 3, LH_F_PREFIX, 0, &in);
	uint64_t t_range = mono_ns();
	if (r < 0)
		return r;
	struct lh_apply_kv *want = ctx->host->alloc(ctx, (in->n_kvs + 1) * sizeof(*want));
	if (!want)
		return -ENOMEM;
	for (uint64_t i = 0; i < in->n_kvs; i++) {
		const struct lh_kv *kv = &in->kvs[i];
		const char *k = lh_printf(ctx, "out/%s", (const char *)kv->key + 3);
		if (!k)
			return -ENOMEM;
		want[i] = (struct lh_apply_kv){k, strlen(k), kv->value, kv->value_len};
	}
	struct lh_apply_result res;
	uint64_t t_apply = mono_ns();
	if ((r = ctx->host->apply(ctx, "out/", 4, want, in->n_kvs, 0, &res)) < 0)
		return r;
	uint64_t t_end = mono_ns();
	report(ctx, 'y', t_range, (int64_t)in->n_kvs, (int64_t)t);
	report(ctx, 'Y', t_end, (int64_t)(res.put + res.deleted), (int64_t)t_apply);
	return 0;
}
#endif

static int32_t b_reconcile(struct lh_ctx *ctx)
{
	struct bstate *st = ctx->user;
#ifdef BENCH_BROKEN
	uint64_t t = mono_ns();
	release_held(ctx);
	report(ctx, 'X', t, ctx->host->fencing_token(ctx), 0);
	(void)st;
	return -EIO;
#endif
	int32_t r = st->nowrite ? 0 : journal_write(ctx, st);
	release_held(ctx);
#ifdef BENCH_KEYED
	if (r == 0)
		r = b_resync(ctx);
#endif
	return r;
}

/* one fenced journal record; reports W when etcd acknowledged it */
static int32_t journal_write(struct lh_ctx *ctx, struct bstate *st)
{
	const struct lh_txn_result *res;
	char key[64], val[96];
	int64_t token = ctx->host->fencing_token(ctx);
	int kl = snprintf(key, sizeof(key), "journal/%016" PRIx64 "-%08" PRIu64, (uint64_t)token,
	                  st->counter);
	int vl = snprintf(val, sizeof(val), "node=%s token=%" PRId64, ctx->host->node_id(ctx), token);
	struct lh_op put = {.type = LH_OP_PUT, .key = key, .key_len = (uint64_t)kl, .value = val,
	                    .value_len = (uint64_t)vl};
	struct lh_compare fresh = {.target = LH_CMP_CREATE, .result = LH_CMP_EQUAL, .key = key,
	                           .key_len = (uint64_t)kl, .number = 0};
	uint64_t t_call = mono_ns();
	int32_t r = ctx->host->txn(ctx, &fresh, 1, &put, 1, NULL, 0, &res);
	uint64_t t = mono_ns();
	st->counter++;
	if (r < 0)
		return r;
	if (!res->succeeded)
		return -EAGAIN;
	report(ctx, 'W', t, token, (int64_t)t_call);
	return 0;
}

__attribute__((unused)) /* not in the keyed build's descriptor */
static int32_t b_on_watch_events(struct lh_ctx *ctx, const struct lh_watch_batch *b)
{
	uint64_t t = mono_ns();
	struct bstate *st = ctx->user;
	report(ctx, 'B', t, b->flags, b->n_events ? b->events[0].kv.mod_revision : 0);
	if (b->flags & LH_WATCH_RESYNC)
		st->snapshot_events = 0;
	if (b->flags & LH_WATCH_SNAPSHOT)
		st->snapshot_events += b->n_events;
	if (b->flags & LH_WATCH_SYNCED) {
		report(ctx, 'S', mono_ns(), (int64_t)st->snapshot_events, 0);
		st->snapshot_events = 0;
	}
	for (uint64_t i = 0; st->watch_write && i < b->n_events; i++) {
		const struct lh_watch_event *e = &b->events[i];
		char key[160];
		int kl = snprintf(key, sizeof(key), "out/%s", (const char *)e->kv.key + 3);
		struct lh_op put = {.type = e->type == LH_WATCH_DELETE ? LH_OP_DELETE : LH_OP_PUT,
		                    .key = key, .key_len = (uint64_t)kl, .value = e->kv.value,
		                    .value_len = e->kv.value_len};
		const struct lh_txn_result *res;
		uint64_t t_call = mono_ns();
		int32_t r = ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
		if (r < 0)
			return r;
		long n = e->kv.value_len > 1 ? strtol((const char *)e->kv.value + 1, NULL, 10) : -1;
		report(ctx, 'O', mono_ns(), n, (int64_t)t_call);
	}
	return 0;
}

#ifdef BENCH_KEYED
static int32_t b_reconcile_key(struct lh_ctx *ctx, const char *key, uint32_t key_len)
{
	uint64_t t_call = mono_ns();
	uint64_t len;
	const char *name = lh_key_strip(key, key_len, "in/", &len);
	if (!name)
		return 0;
	char out[160];
	int ol = snprintf(out, sizeof(out), "out/%.*s", (int)len, name);
	const struct lh_op_result *in;
	int32_t r = ctx->host->range(ctx, key, key_len, 0, 0, &in);
	if (r < 0)
		return r;
	if (in->n_kvs == 0)
		return ctx->host->apply_key(ctx, out, (uint64_t)ol, NULL, 0, NULL);
	const struct lh_kv *kv = &in->kvs[0];
	if ((r = ctx->host->apply_key(ctx, out, (uint64_t)ol, kv->value, kv->value_len, NULL)) < 0)
		return r;
	long n = kv->value_len > 1 ? strtol((const char *)kv->value + 1, NULL, 10) : -1;
	report(ctx, 'O', mono_ns(), n, (int64_t)t_call);
	return 0;
}
#endif

static void b_on_deposed(struct lh_ctx *ctx)
{
	struct bstate *st = ctx->user;
	if (st)
		st->holding = 0;
	report(ctx, 'D', mono_ns(), 0, 0);
}

static void b_fini(struct lh_ctx *ctx)
{
	struct bstate *st = ctx->user;
	if (st)
		st->holding = 0;
	report(ctx, 'F', mono_ns(), 0, 0);
	if (st && st->fd >= 0)
		close(st->fd);
	free(st);
	ctx->user = NULL;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = BENCH_NAME,
	.release = {BENCH_MAJOR, BENCH_MINOR, BENCH_PATCH},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {BENCH_MC_MAJOR, BENCH_MC_MINOR, BENCH_MC_PATCH},
	.flags = BENCH_FLAGS,
	.init = b_init,
	.on_elected = b_on_elected,
	.on_releases_changed = b_on_releases_changed,
	.reconcile = b_reconcile,
	.on_deposed = b_on_deposed,
	.fini = b_fini,
#ifdef BENCH_KEYED
	.reconcile_key = b_reconcile_key,
#else
	.on_watch_events = b_on_watch_events,
#endif
};
