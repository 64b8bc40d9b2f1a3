/* SPDX-License-Identifier: MIT */
/*
 * crashy.c - a test plugin that records its callbacks in shared memory and
 * can crash (SIGSEGV), abort, exit or hang on demand. See crashy.h.
 * A hang blocks in poll() (never a sleep); a crash is real (no raise()).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#include "crashy.h"

static struct crashy_shm *g_shm;
static struct crashy_slot *g_slot;
static int g_fifo = -1;
/* an unmapped, aligned, non-NULL address (UBSan would catch a NULL store
 * before the fault); volatile so the compiler cannot see it: a real crash */
static volatile uintptr_t g_bad_addr = 16;

static void lock(void)
{
	if (pthread_mutex_lock(&g_shm->mu) == EOWNERDEAD)
		pthread_mutex_consistent(&g_shm->mu);
}

static void unlock_notify(void)
{
	pthread_mutex_unlock(&g_shm->mu);
	if (g_fifo >= 0) {
		char one = 1;
		ssize_t w = write(g_fifo, &one, 1);
		(void)w;
	}
}

static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rec(const char *fmt, ...)
{
	lock();
	if (g_slot->n < CRASHY_MAX) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g_slot->trace[g_slot->n], CRASHY_LINE, fmt, ap);
		va_end(ap);
		g_slot->n++;
	}
	g_slot->last_pid = (int32_t)getpid();
	unlock_notify();
}

static void maybe_crash(int32_t where)
{
	lock();
	int32_t crash = g_slot->crash_in == where ? g_slot->crash : CRASHY_NONE;
	if (where == CRASHY_IN_INIT && g_slot->crash_max_inits &&
	    g_slot->inits > g_slot->crash_max_inits)
		crash = CRASHY_NONE;
	unlock_notify();
	switch (crash) {
	case CRASHY_SEGV:
		*(volatile int *)g_bad_addr = 1;
		break;
	case CRASHY_ABORT:
		abort();
	case CRASHY_EXIT:
		exit(3);
	default:
		break;
	}
}

static int attach(struct lh_ctx *ctx)
{
	if (g_slot)
		return 0;
	const char *path = getenv(CRASHY_ENV_SHM), *fifo = getenv(CRASHY_ENV_FIFO);
	if (!path)
		return -ENOENT;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	void *m = mmap(NULL, sizeof(struct crashy_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	g_shm = m;
	const char *node = ctx->host->node_id(ctx);
	for (int i = 0; i < CRASHY_SLOTS; i++)
		if (strcmp(g_shm->slot[i].node_id, node) == 0)
			g_slot = &g_shm->slot[i];
	if (!g_slot) {
		munmap(m, sizeof(struct crashy_shm));
		g_shm = NULL;
		return -ENOENT;
	}
	if (fifo)
		g_fifo = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	return 0;
}

static int32_t c_init(struct lh_ctx *ctx)
{
	int r = attach(ctx);
	if (r < 0)
		return r;
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	lock();
	if (g_slot->inits < CRASHY_MAX_INITS)
		g_slot->init_ns[g_slot->inits] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	g_slot->inits++;
	int32_t res = g_slot->init_result;
	unlock_notify();
	rec("init");
	maybe_crash(CRASHY_IN_INIT);
	if (res < 0)
		ctx->host->set_error(ctx, "init refused by the test");
	return res;
}

static int32_t c_on_elected(struct lh_ctx *ctx, int64_t token)
{
	rec("elected %" PRId64 " api_token=%" PRId64, token, ctx->host->fencing_token(ctx));
	return 0;
}

static int32_t c_on_releases_changed(struct lh_ctx *ctx, const struct lh_releases *r)
{
	(void)ctx;
	rec("releases %u.%u.%u-%u.%u.%u rev=%" PRId64 " n=%u", r->min.major, r->min.minor,
	    r->min.patch, r->max.major, r->max.minor, r->max.patch, r->revision, r->n_members);
	return 0;
}

static int32_t put_range(struct lh_ctx *ctx)
{
	const struct lh_host_api *h = ctx->host;
	const struct lh_txn_result *res;
	struct lh_compare c = {.target = LH_CMP_VERSION,
			       .result = LH_CMP_EQUAL,
			       .key = "a/k",
			       .key_len = 3,
			       .number = 0};
	struct lh_op ok[] = {
	    {.type = LH_OP_PUT, .key = "a/k", .key_len = 3, .value = "v1", .value_len = 2},
	    {.type = LH_OP_PUT, .key = "a/j", .key_len = 3, .value = "v2", .value_len = 2},
	};
	struct lh_op ko = {.type = LH_OP_RANGE, .key = "a/k", .key_len = 3};
	int32_t r = h->txn(ctx, &c, 1, ok, 2, &ko, 1, &res);
	if (r < 0) {
		rec("txn1 err=%d msg=%s", (int)r, h->last_error(ctx));
		h->set_error(ctx, h->last_error(ctx));
		return r;
	}
	rec("txn1 succeeded=%u n=%" PRIu64, res->succeeded, res->n_results);
	struct lh_op rg = {.type = LH_OP_RANGE, .flags = LH_F_PREFIX, .key = "a/", .key_len = 2};
	r = h->txn(ctx, NULL, 0, &rg, 1, NULL, 0, &res);
	if (r < 0)
		return r;
	char line[CRASHY_LINE];
	size_t off = (size_t)snprintf(line, sizeof(line), "txn2");
	for (uint64_t k = 0; k < res->results[0].n_kvs && off < sizeof(line); k++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %s=%s",
					(const char *)res->results[0].kvs[k].key,
					(const char *)res->results[0].kvs[k].value);
	rec("%s", line);
	return 0;
}

/* one txn: a put of key k with a value of vlen bytes, or with LH_F_PREFIX
 * a range of prefix k; compare: a put of "ok/c" under a compare on k */
static int32_t one_txn(struct lh_ctx *ctx, const void *k, size_t klen, uint32_t flags, size_t vlen,
		       bool compare)
{
	static char value[LH_VALUE_MAX + 1];
	const struct lh_txn_result *res;
	struct lh_compare c = {.target = LH_CMP_VERSION, .result = LH_CMP_EQUAL, .key = k,
			       .key_len = klen};
	struct lh_op op = {.type = flags & LH_F_PREFIX ? LH_OP_RANGE : LH_OP_PUT,
			   .flags = flags, .key = compare ? "ok/c" : k, .key_len = compare ? 4 : klen,
			   .value = value, .value_len = flags & LH_F_PREFIX ? 0 : vlen};
	memset(value, 'v', vlen);
	return ctx->host->txn(ctx, compare ? &c : NULL, compare ? 1 : 0, &op, 1, NULL, 0, &res);
}

/* CRASHY_TXN_BAD_KEYS: the refusals of plugin.h's "Keys and values", then
 * what stays accepted */
static void bad_keys(struct lh_ctx *ctx)
{
	static char longkey[LH_KEY_MAX + 1];
	memset(longkey, 'k', sizeof(longkey));
	const struct {
		const char *k;
		size_t len;
		uint32_t flags;
		size_t vlen;
		bool compare;
	} refused[] = {
	    {"/demo/out/x", 11, 0, 1, false}, {"a/../b", 6, 0, 1, false},
	    {"./a", 3, 0, 1, false},	      {"a//b", 4, 0, 1, false},
	    {"a\0b", 3, 0, 1, false},	      {longkey, LH_KEY_MAX + 1, 0, 1, false},
	    {"", 0, 0, 1, false},	      {"a/\xff", 3, LH_F_PREFIX, 0, false},
	    {"/x", 2, 0, 0, true},	      {"a/../", 5, LH_F_PREFIX, 0, false},
	    {"big", 3, 0, LH_VALUE_MAX + 1, false},
	}, accepted[] = {
	    {"ok/a", 4, 0, 1, false},	     {"ok/", 3, LH_F_PREFIX, 0, false},
	    {"", 0, LH_F_PREFIX, 0, false}, {longkey, LH_KEY_MAX, 0, LH_VALUE_MAX, false},
	    {"ok/a.b", 6, 0, 1, true},	     {"ok/.", 4, LH_F_PREFIX, 0, false},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		int32_t r = one_txn(ctx, refused[i].k, refused[i].len, refused[i].flags,
				    refused[i].vlen, refused[i].compare);
		rec("refused %zu r=%d %.140s", i, (int)r, ctx->host->last_error(ctx));
	}
	/* three values at the limit: more than one bus message carries */
	static char value[LH_VALUE_MAX];
	memset(value, 'v', sizeof(value));
	struct lh_op three[3];
	for (int i = 0; i < 3; i++)
		three[i] = (struct lh_op){.type = LH_OP_PUT, .key = i == 0 ? "t/0" : i == 1 ? "t/1" : "t/2",
					  .key_len = 3, .value = value, .value_len = sizeof(value)};
	const struct lh_txn_result *res;
	int32_t r3 = ctx->host->txn(ctx, NULL, 0, three, 3, NULL, 0, &res);
	rec("too big r=%d %.120s", (int)r3, ctx->host->last_error(ctx));
	r3 = ctx->host->txn(ctx, NULL, 0, three, 2, NULL, 0, &res);
	rec("two r=%d", (int)r3);
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		int32_t r = one_txn(ctx, accepted[i].k, accepted[i].len, accepted[i].flags,
				    accepted[i].vlen, accepted[i].compare);
		rec("accepted %zu r=%d", i, (int)r);
	}
}

static int32_t c_reconcile(struct lh_ctx *ctx)
{
	lock();
	g_slot->in_reconcile = 1;
	unlock_notify();
	maybe_crash(CRASHY_IN_RECONCILE);
	/* a hang: poll() on nothing, 20 ms at a time, until the test lets go
	 * (thread mode) or the host SIGKILLs the worker (process mode). No
	 * process-shared condition variable: a waiter killed inside one can
	 * wedge every later broadcast. */
	for (;;) {
		lock();
		int32_t hold = g_slot->hold;
		pthread_mutex_unlock(&g_shm->mu);
		if (!hold)
			break;
		poll(NULL, 0, 20);
	}
	lock();
	int32_t r = g_slot->reconcile_result;
	int mode = g_slot->txn_mode;
	bool no_reason = g_slot->no_reason != 0;
	unlock_notify();
	rec("reconcile");
	if (mode == CRASHY_TXN_PUT_RANGE) {
		int32_t t = put_range(ctx);
		if (t < 0)
			r = t;
	} else if (mode == CRASHY_TXN_BAD_KEYS)
		bad_keys(ctx);
	if (r < 0 && !no_reason)
		ctx->host->set_error(ctx, "reconcile failed on purpose");
	lock();
	g_slot->in_reconcile = 0;
	unlock_notify();
	return r;
}

static void c_on_deposed(struct lh_ctx *ctx)
{
	rec("deposed api_token=%" PRId64, ctx->host->fencing_token(ctx));
}

static void c_fini(struct lh_ctx *ctx)
{
	(void)ctx;
	rec("fini");
	if (g_fifo >= 0)
		close(g_fifo);
	g_fifo = -1;
	munmap(g_shm, sizeof(struct crashy_shm));
	g_shm = NULL;
	g_slot = NULL;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
    LH_PLUGIN_HEADER_INIT,
    .name = "crashy",
    .release = {1, 0, 0},
    .min_reconciler_release = {1, 0, 0},
    .min_compatible_release = {1, 0, 0},
    .init = c_init,
    .on_elected = c_on_elected,
    .on_releases_changed = c_on_releases_changed,
    .reconcile = c_reconcile,
    .on_deposed = c_on_deposed,
    .fini = c_fini,
};
