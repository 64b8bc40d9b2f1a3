/* SPDX-License-Identifier: MIT */
/*
 * instance_fixture.c - see instance_fixture.h.
 */
#include "config.h"

#include <stdio.h>

#include "check.h"
#include "instance_fixture.h"

#define DEADLINE (loop_now() + 10 * LOOP_NS_PER_S)

static int g_order; /* completions so far */

void ifx_on_reconciled(void *ud, int err, const char *msg)
{
	struct rdone *d = ud;
	CHECK(!d->done); /* exactly once */
	d->done = true;
	d->err = err;
	d->order = ++g_order;
	snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : "");
}

void ifx_on_drained(void *ud)
{
	struct ddone *d = ud;
	CHECK(!d->done);
	d->done = true;
	d->order = ++g_order;
}

int ifx_drain(struct loop *l, struct plugin_instance *pi)
{
	struct ddone d = {false, 0};
	plugin_instance_drain(pi, ifx_on_drained, &d);
	CHECK(!d.done); /* never from inside the call */
	CHECK_OK(loop_run_until(l, &d.done, DEADLINE));
	return d.order;
}

void ifx_on_stopped(void *ud)
{
	bool *b = ud;
	CHECK(!*b);
	*b = true;
}

void ifx_stop(struct loop *l, struct plugin_instance *pi)
{
	bool stopped = false;
	plugin_instance_stop(pi, ifx_on_stopped, &stopped);
	CHECK_OK(loop_run_until(l, &stopped, DEADLINE));
	CHECK_INT_EQ(plugin_instance_state(pi), PLUGIN_INSTANCE_STOPPED);
}
