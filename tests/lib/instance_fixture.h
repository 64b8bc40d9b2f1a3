/* SPDX-License-Identifier: MIT */
/*
 * instance_fixture.h - what the plugin-instance tests (test_bus,
 * test_isolation, test_plugin_watch, test_plugin_apply) share: completion
 * records that remember the order in which they arrived, waiting for a
 * drain or a stop on the test's loop, and the directories a test that loads
 * real plugin files needs. Single-threaded (the loop thread); every wait
 * has a 10 s deadline and fails the test past it.
 */
#ifndef LH_TEST_INSTANCE_FIXTURE_H
#define LH_TEST_INSTANCE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "runtime/runtime_instance.h"

/* a reconcile's completion (ifx_on_reconciled fills it, exactly once) */
struct rdone {
	bool done;
	int err;
	char msg[512];
	int order; /* its rank among every completion of the test so far */
};

/* ifx_on_reconciled - a driver_reconcile_done_fn for a struct rdone */
void ifx_on_reconciled(void *ud, int err, const char *msg);

/* an instance's init result (ifx_on_init fills it, exactly once) */
struct idone {
	bool done;
	int err;
	char msg[512];
};

/* ifx_on_init - a plugin_instance_init_fn for a struct idone */
void ifx_on_init(void *ud, int err, const char *msg);

/* a drain's completion (ifx_on_drained fills it, exactly once) */
struct ddone {
	bool done;
	int order;
};

/* ifx_on_drained - a driver_drain_done_fn for a struct ddone;
 * ifx_on_stopped - a stop's completion for a bool (exactly once) */
void ifx_on_drained(void *ud);
void ifx_on_stopped(void *ud);

/* ifx_drain - plugin_instance_drain and wait for it (never answered from
 * inside the call); returns the drain's rank among the completions */
int ifx_drain(struct loop *l, struct plugin_instance *pi);

/* ifx_stop - plugin_instance_stop and wait for it (exactly once); the
 * instance is then STOPPED (the caller frees it) */
void ifx_stop(struct loop *l, struct plugin_instance *pi);

/* the directories of a test that loads real plugin files in a temp root */
struct ifx_dirs {
	char build[1024];       /* $LH_BUILDDIR, else "." */
	char worker[1200];      /* build/leasehold-worker */
	char root[512];         /* the temp root (test_tmp_root) */
	char plugins[1024];     /* root/plugins: the plugin directory */
	char private_dir[1024]; /* root/private: the loader's private copies */
};

/* ifx_dirs_setup - fill d for the test `name` and create the directories;
 * the test fails (exit 99) when leasehold-worker is not built */
void ifx_dirs_setup(struct ifx_dirs *d, const char *name);

/* ifx_isolation_name - "process" or "thread", the name of an isolation mode */
const char *ifx_isolation_name(uint32_t mode);
/* IFX_RUN_MODE - RUN(fn) for a case that takes the isolation mode it runs
 * in, reported as "ok - fn(mode)" */
#define IFX_RUN_MODE(fn, mode)                                                                     \
	do {                                                                                       \
		fprintf(stderr, "--- %s\n", #fn);                                                  \
		fn(mode);                                                                          \
		printf("ok - %s(%s)\n", #fn, ifx_isolation_name(mode));                            \
		fflush(stdout);                                                                    \
	} while (0)

/* ifx_install - copy the test plugin build/tests/plugins/.libs/<so> into
 * d->plugins */
void ifx_install(const struct ifx_dirs *d, const char *so);

#endif
