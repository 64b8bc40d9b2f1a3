/* SPDX-License-Identifier: MIT */
/*
 * instance_fixture.h - what the plugin-instance tests (test_bus,
 * test_isolation) share: completion records that remember the order in
 * which they arrived, and waiting for a drain or a stop on the test's loop.
 * Single-threaded (the loop thread); every wait has a 10 s deadline and
 * fails the test past it.
 */
#ifndef LH_TEST_INSTANCE_FIXTURE_H
#define LH_TEST_INSTANCE_FIXTURE_H

#include <stdbool.h>

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

#endif
