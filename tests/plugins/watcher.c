/* SPDX-License-Identifier: MIT */
/*
 * watcher.c - the "watcher" test plugin (ABI 1.2): watches and records.
 *
 * Every callback appends lines to the trace file $LH_WATCHER_TRACE (one
 * write(2) per line, O_APPEND: readable across the worker process boundary)
 * and then writes one byte to the fifo $LH_WATCHER_NOTIFY (non-blocking) so
 * the test wakes up:
 *   init <rc> <watch ids or errors...> | elected <token> | reconcile | deposed
 *   batch <watch id> <flags> <revision> <n>
 *   ev <type> <mod_revision> <create_revision> <version> <key> <value> [prev=<value>]
 *   hold   (on_watch_events blocks while $LH_WATCHER_HOLD exists)
 *   range <rc> <n_kvs> [<err text>]
 * Knobs (environment, read in init):
 *   LH_WATCHER_PREFIX  relative prefix to watch (default "in/"; "-" = none)
 *   LH_WATCHER_ABS     an absolute prefix to watch as well (needs a grant)
 *   LH_WATCHER_PREV    "1": ask for previous values
 *   LH_WATCHER_RANGE   an absolute prefix to range in init (the test checks
 *                      the refusal)
 *   LH_WATCHER_REQ     "1": request_reconcile on every live batch
 *   LH_WATCHER_HOLD    a file: on_watch_events waits while it exists (a
 *                      slow plugin)
 *   LH_WATCHER_NOREASON "1": a failed init gives no reason (no set_error)
 *   LH_WATCHER_BIG     "1": reconcile writes a key of LH_KEY_MAX bytes with a
 *                      value of LH_VALUE_MAX, reads it back, then tries a
 *                      value one byte longer:
 *                      big put=<rc> range=<rc> n=<n> len=<value len> over=<rc> <err>
 *   LH_WATCHER_DEPOSED_RANGE "1": on_deposed reads in/ first and fini is
 *                      traced too:  deposed-range <rc> | fini
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#include "trace.h"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	trace_vline("LH_WATCHER_TRACE", fmt, ap);
	va_end(ap);
}

static void notify(void)
{
	const char *path = getenv("LH_WATCHER_NOTIFY");
	int fd = path ? open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
	if (fd >= 0) {
		if (write(fd, "x", 1) != 1) { /* the fifo is full: the test wakes anyway */
		}
		close(fd);
	}
}

static int32_t w_init(struct lh_ctx *ctx)
{
	const struct lh_host_api *h = ctx->host;
	char ids[600] = "";
	size_t off = 0;
	if (!LH_HOST_HAS(h, watch)) {
		say("init -38 no watch in this host");
		notify();
		return -ENOSYS;
	}
	const char *rel = getenv("LH_WATCHER_PREFIX");
	const char *abs = getenv("LH_WATCHER_ABS");
	int32_t r = 0;
	if (!rel)
		rel = "in/";
	if (strcmp(rel, "-") != 0) {
		r = h->watch(ctx, rel, strlen(rel),
			     getenv("LH_WATCHER_PREV") ? LH_WATCH_PREV_KV : 0);
		off += (size_t)snprintf(ids + off, sizeof(ids) - off, " rel=%d", r);
	}
	if (abs && r >= 0) {
		r = h->watch(ctx, abs, strlen(abs), LH_WATCH_ABSOLUTE);
		snprintf(ids + off, sizeof(ids) - off, " abs=%d%s%s", r, r < 0 ? " " : "",
			 r < 0 ? h->last_error(ctx) : "");
	}
	const char *rg = getenv("LH_WATCHER_RANGE");
	if (rg) {
		const struct lh_op_result *res = NULL;
		int32_t rr = h->range(ctx, rg, strlen(rg), LH_F_ABSOLUTE | LH_F_PREFIX, 0, &res);
		say("range %d %" PRIu64 " %s", rr, rr == 0 ? res->n_kvs : 0,
		    rr < 0 ? h->last_error(ctx) : "");
	}
	say("init %d%s", r < 0 ? r : 0, ids);
	notify();
	if (r < 0 && !getenv("LH_WATCHER_NOREASON"))
		lh_set_errorf(ctx, "%s", h->last_error(ctx));
	return r < 0 ? r : 0;
}

static int32_t w_elected(struct lh_ctx *ctx, int64_t token)
{
	(void)ctx;
	say("elected %" PRId64, token);
	notify();
	return 0;
}

/* LH_WATCHER_BIG: a key and a value at their limits round-trip; one byte
 * more is refused */
static void w_big(struct lh_ctx *ctx)
{
	static char key[LH_KEY_MAX], value[LH_VALUE_MAX + 1];
	const struct lh_txn_result *res;
	const struct lh_op_result *got = NULL;
	memset(key, 'k', sizeof(key));
	memcpy(key, "big/", 4);
	memset(value, 'v', sizeof(value));
	struct lh_op put = {.type = LH_OP_PUT, .key = key, .key_len = sizeof(key), .value = value,
			    .value_len = LH_VALUE_MAX};
	int32_t p = ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
	int32_t g = ctx->host->range(ctx, key, sizeof(key), 0, 0, &got);
	uint64_t n = g == 0 ? got->n_kvs : 0, len = n ? got->kvs[0].value_len : 0;
	put.value_len = LH_VALUE_MAX + 1;
	int32_t o = ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
	say("big put=%d range=%d n=%" PRIu64 " len=%" PRIu64 " over=%d %s", p, g, n, len, o,
	    o < 0 ? ctx->host->last_error(ctx) : "");
}

static int32_t w_reconcile(struct lh_ctx *ctx)
{
	if (getenv("LH_WATCHER_BIG"))
		w_big(ctx);
	/* a relative range: works on every node, from any callback */
	const struct lh_op_result *res = NULL;
	int32_t rr = ctx->host->range(ctx, "in/", 3, LH_F_PREFIX | LH_F_COUNT_ONLY, 0, &res);
	say("reconcile %d %" PRId64, rr, rr == 0 ? res->count : -1);
	notify();
	return 0;
}

static void w_deposed(struct lh_ctx *ctx)
{
	if (getenv("LH_WATCHER_DEPOSED_RANGE")) {
		const struct lh_op_result *res;
		say("deposed-range %d", (int)ctx->host->range(ctx, "in/", 3, LH_F_PREFIX, 0, &res));
	}
	say("deposed");
	notify();
}

static void w_fini(struct lh_ctx *ctx)
{
	(void)ctx;
	if (getenv("LH_WATCHER_DEPOSED_RANGE"))
		say("fini");
}

static int32_t w_events(struct lh_ctx *ctx, const struct lh_watch_batch *b)
{
	const char *hold = getenv("LH_WATCHER_HOLD");
	if (hold && access(hold, F_OK) == 0) {
		say("hold");
		notify();
		while (access(hold, F_OK) == 0)
			poll(NULL, 0, 5); /* a slow plugin: the test removes the file */
	}
	say("batch %u %u %" PRId64 " %" PRIu64, b->watch_id, b->flags, b->revision, b->n_events);
	for (uint64_t i = 0; i < b->n_events; i++) {
		const struct lh_watch_event *e = &b->events[i];
		say("ev %u %" PRId64 " %" PRId64 " %" PRId64 " %s %s%s%s", e->type, e->kv.mod_revision,
		    e->kv.create_revision, e->kv.version, (const char *)e->kv.key,
		    e->kv.value_len ? (const char *)e->kv.value : "-", e->prev_kv ? " prev=" : "",
		    e->prev_kv ? (const char *)e->prev_kv->value : "");
	}
	if (getenv("LH_WATCHER_REQ") && !(b->flags & LH_WATCH_SNAPSHOT))
		ctx->host->request_reconcile(ctx);
	notify();
	return 0;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "watcher",
	.release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, 0, 0},
	.init = w_init,
	.on_elected = w_elected,
	.reconcile = w_reconcile,
	.on_deposed = w_deposed,
	.fini = w_fini,
	.on_watch_events = w_events,
};
