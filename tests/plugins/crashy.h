/* SPDX-License-Identifier: MIT */
/*
 * crashy.h - shared between the "crashy" test plugin and test_isolation.c.
 *
 * The state lives in a shared file mapping (path in $LH_CRASHY_SHM) so the
 * test sees it whether the plugin runs on a worker thread of the test or in
 * a leasehold-worker child. One slot per plugin instance, chosen by the
 * node id the host gives the instance. mu is a robust process-shared mutex
 * (a worker killed while holding it does not wedge the test); there is no
 * condition variable on purpose (a waiter killed inside a process-shared
 * one can wedge later broadcasts). On every change the plugin writes one
 * byte to the FIFO at $LH_CRASHY_FIFO, which the test watches with its loop.
 */
#ifndef LH_TEST_CRASHY_H
#define LH_TEST_CRASHY_H

#include <pthread.h>
#include <stdint.h>

#define CRASHY_ENV_SHM "LH_CRASHY_SHM"
#define CRASHY_ENV_FIFO "LH_CRASHY_FIFO"

#define CRASHY_SLOTS 4
#define CRASHY_MAX 96
#define CRASHY_LINE 160
#define CRASHY_MAX_INITS 32

/* crash: what to do (in the callback named by crash_in) */
#define CRASHY_NONE 0
#define CRASHY_SEGV 1  /* write to an unmapped address */
#define CRASHY_ABORT 2 /* abort() */
#define CRASHY_EXIT 3  /* exit(3) */
/* crash_in */
#define CRASHY_IN_RECONCILE 0
#define CRASHY_IN_INIT 1

/* txn_mode */
#define CRASHY_TXN_NONE 0
#define CRASHY_TXN_PUT_RANGE 1 /* put a/k=v1,a/j=v2 if a/k absent; range a/ */
/* txns with keys and values plugin.h refuses, each traced as
 * "refused <i> r=<rc> <last_error>", then accepted ones "accepted <i> r=<rc>" */
#define CRASHY_TXN_BAD_KEYS 2

struct crashy_slot {
	char node_id[32];	 /* set by the test: which instance owns the slot */
	int32_t crash;		 /* CRASHY_* */
	int32_t crash_in;	 /* CRASHY_IN_* */
	int32_t crash_max_inits; /* CRASHY_IN_INIT: crash only in init calls 1..N; 0 = all */
	int32_t hold;		 /* reconcile blocks while non-zero (a hang) */
	int32_t in_reconcile;	 /* 1 while reconcile runs */
	int32_t reconcile_result;
	int32_t no_reason;	 /* a failing reconcile gives no reason (no set_error) */
	int32_t init_result;
	int32_t txn_mode;
	int32_t inits;			   /* init calls (every worker generation) */
	int64_t init_ns[CRASHY_MAX_INITS]; /* CLOCK_BOOTTIME of each init call */
	int32_t last_pid;		   /* getpid() in the last callback */
	int32_t n;
	char trace[CRASHY_MAX][CRASHY_LINE];
};

struct crashy_shm {
	pthread_mutex_t mu;
	struct crashy_slot slot[CRASHY_SLOTS];
};

#endif
