/* SPDX-License-Identifier: MIT */
/*
 * crashloop.h - the "crashloop" test plugin's shared state (test_crashloop_e2e):
 * a file the test creates and names in LH_CRASHLOOP_STATE, mapped by the
 * test and by every worker. Each worker generation takes the next number at
 * init (gens) and fails in the way gens % CRASHLOOP_KINDS says (generation
 * 0 in reconcile: a crash in an instance's first init would be final). A
 * CRASHLOOP_START generation never reaches init: it is told by gens when
 * the plugin is loaded, and then counts in starts, not gens. All fields are
 * accessed with __atomic builtins.
 */
#ifndef LH_TEST_CRASHLOOP_H
#define LH_TEST_CRASHLOOP_H

#include <stdint.h>

#define CRASHLOOP_ENV_STATE "LH_CRASHLOOP_STATE"

/* how a generation fails */
enum crashloop_kind {
	CRASHLOOP_SEGV,	 /* SIGSEGV in reconcile */
	CRASHLOOP_ABORT, /* abort() in reconcile */
	CRASHLOOP_EXIT,	 /* exit(3) in reconcile */
	CRASHLOOP_INIT,	 /* SIGSEGV in init */
	CRASHLOOP_TXN,	 /* abort() on another thread while reconcile waits for a txn */
	CRASHLOOP_KILL,	 /* reconcile blocks; the test SIGKILLs the worker (kill_pid) */
	CRASHLOOP_START, /* SIGKILL of itself while the worker connects to the host */
	CRASHLOOP_KINDS
};

struct crashloop_state {
	uint32_t gens;			  /* worker inits so far */
	uint32_t begun[CRASHLOOP_KINDS]; /* failures begun, per kind */
	int32_t kill_pid;		  /* CRASHLOOP_KILL: the worker waiting to be killed */
	uint32_t calm;			  /* non-zero: new generations no longer fail */
	uint32_t starts;		  /* CRASHLOOP_START workers (they never init) */
	int32_t calm_pid;		  /* the last worker that started calm */
};

#endif
