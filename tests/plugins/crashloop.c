/* SPDX-License-Identifier: MIT */
/*
 * crashloop.c - a test plugin for real daemons under --isolation process
 * that fails in every worker generation, in the ways of enum
 * crashloop_kind taken in rotation (see crashloop.h). Crashes are real
 * (a store to an unmapped address, abort(), exit()); a generation waiting
 * to be killed blocks in poll(), never a sleep.
 */
#define _GNU_SOURCE /* pipe2, program_invocation_short_name */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#include "crashloop.h"

static struct crashloop_state *g_st;
static int g_kind = -1; /* this generation's way to fail; -1 = none */
static int g_txn_go[2] = {-1, -1}; /* CRASHLOOP_TXN: written just before the txn */
/* an unmapped, aligned, non-NULL address; volatile: a real fault */
static volatile unsigned long g_bad_addr = 16;

static void crashloop_segv(void)
{
	*(volatile int *)g_bad_addr = 1;
}

static int crashloop_attach(void);

static void *crashloop_start_killer(void *arg)
{
	/* a different moment of the connection each time: before the dial,
	 * during the SP handshake, after it */
	unsigned spins = (unsigned)(uintptr_t)arg;
	for (volatile unsigned i = 0; i < spins; i++)
		;
	kill(getpid(), SIGKILL);
	return NULL;
}

/* dlopen: a CRASHLOOP_START generation dies while the worker connects */
__attribute__((constructor)) static void crashloop_on_load(void)
{
	pthread_t t;
	/* the daemon loads the plugin too (to check it): only a worker dies */
	if (strcmp(program_invocation_short_name, "leasehold-worker") != 0 ||
	    crashloop_attach() < 0 || __atomic_load_n(&g_st->calm, __ATOMIC_SEQ_CST))
		return;
	uint32_t gen = __atomic_load_n(&g_st->gens, __ATOMIC_SEQ_CST);
	if (gen % CRASHLOOP_KINDS != CRASHLOOP_START)
		return;
	g_kind = CRASHLOOP_START;
	uint32_t n = __atomic_fetch_add(&g_st->starts, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&g_st->begun[CRASHLOOP_START], 1, __ATOMIC_SEQ_CST);
	if (n % 8 == 7) /* and the next generation is an ordinary one */
		__atomic_fetch_add(&g_st->gens, 1, __ATOMIC_SEQ_CST);
	if (pthread_create(&t, NULL, crashloop_start_killer,
	                   (void *)(uintptr_t)((n * 2654435761u) % 4000000u)) != 0)
		kill(getpid(), SIGKILL);
}

static int crashloop_attach(void)
{
	if (g_st)
		return 0;
	const char *path = getenv(CRASHLOOP_ENV_STATE);
	if (!path)
		return -ENOENT;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	void *m = mmap(NULL, sizeof(*g_st), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	g_st = m;
	return 0;
}

static int32_t crashloop_init(struct lh_ctx *ctx)
{
	(void)ctx;
	int r = crashloop_attach();
	if (r < 0)
		return r;
	if (g_kind == CRASHLOOP_START)
		return 0; /* connected before its killer struck: it still dies, once */
	uint32_t gen = __atomic_fetch_add(&g_st->gens, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&g_st->calm, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&g_st->calm_pid, (int32_t)getpid(), __ATOMIC_SEQ_CST);
		return 0;
	}
	g_kind = (int)(gen % CRASHLOOP_KINDS); /* generation 0: CRASHLOOP_SEGV */
	__atomic_fetch_add(&g_st->begun[g_kind], 1, __ATOMIC_SEQ_CST);
	if (g_kind == CRASHLOOP_INIT)
		crashloop_segv();
	return 0;
}

static void *crashloop_txn_killer(void *arg)
{
	char one;
	(void)arg;
	while (read(g_txn_go[0], &one, 1) < 0 && errno == EINTR)
		;
	abort();
}

static int32_t crashloop_txn_and_die(struct lh_ctx *ctx)
{
	pthread_t t;
	const struct lh_txn_result *res;
	struct lh_op put = {.type = LH_OP_PUT, .key = "k", .key_len = 1, .value = "v", .value_len = 1};
	if (pipe2(g_txn_go, O_CLOEXEC) < 0 ||
	    pthread_create(&t, NULL, crashloop_txn_killer, NULL) != 0)
		abort();
	/* the killer wakes while the request leaves or waits for its answer */
	if (write(g_txn_go[1], "x", 1) != 1)
		abort();
	ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
	for (;;)
		poll(NULL, 0, -1); /* the other thread ends the process */
}

static int32_t crashloop_reconcile(struct lh_ctx *ctx)
{
	switch (g_kind) {
	case CRASHLOOP_SEGV:
		crashloop_segv();
		break;
	case CRASHLOOP_ABORT:
		abort();
	case CRASHLOOP_EXIT:
		exit(3);
	case CRASHLOOP_TXN:
		return crashloop_txn_and_die(ctx);
	case CRASHLOOP_KILL:
		__atomic_store_n(&g_st->kill_pid, (int32_t)getpid(), __ATOMIC_SEQ_CST);
		for (;;)
			poll(NULL, 0, -1); /* until the test's SIGKILL */
	default:
		break;
	}
	return 0;
}

static int32_t crashloop_on_elected(struct lh_ctx *ctx, int64_t token)
{
	(void)ctx;
	(void)token;
	return 0;
}

static void crashloop_on_deposed(struct lh_ctx *ctx)
{
	(void)ctx;
}

static void crashloop_fini(struct lh_ctx *ctx)
{
	(void)ctx;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
    LH_PLUGIN_HEADER_INIT,
    .name = "crashloop",
    .release = {1, 0, 0},
    .min_reconciler_release = {1, 0, 0},
    .min_compatible_release = {1, 0, 0},
    .init = crashloop_init,
    .on_elected = crashloop_on_elected,
    .reconcile = crashloop_reconcile,
    .on_deposed = crashloop_on_deposed,
    .fini = crashloop_fini,
};
