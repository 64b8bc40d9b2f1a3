/* SPDX-License-Identifier: MIT */
/*
 * instance_fixture.c - see instance_fixture.h.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi_loader.h"
#include "check.h"
#include "files.h"
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

void ifx_on_init(void *ud, int err, const char *msg)
{
	struct idone *d = ud;
	CHECK(!d->done); /* exactly once */
	d->done = true;
	d->err = err;
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

void ifx_dirs_setup(struct ifx_dirs *d, const char *name)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(d->build, sizeof(d->build), "%s", b && *b ? b : ".");
	snprintf(d->worker, sizeof(d->worker), "%s/leasehold-worker", d->build);
	if (access(d->worker, X_OK) < 0) {
		fprintf(stderr, "no %s (run through make check)\n", d->worker);
		exit(99);
	}
	test_tmp_root(name, d->root, sizeof(d->root));
	snprintf(d->plugins, sizeof(d->plugins), "%s/plugins", d->root);
	snprintf(d->private_dir, sizeof(d->private_dir), "%s/private", d->root);
	CHECK(mkdir(d->plugins, 0755) == 0);
	char err[LOADER_ERR_MAX];
	CHECK_OK(loader_private_dir_prepare(d->private_dir, err, sizeof(err)));
}

const char *ifx_isolation_name(uint32_t mode)
{
	return mode == PLUGIN_ISOLATION_PROCESS ? "process" : "thread";
}

void ifx_install(const struct ifx_dirs *d, const char *so)
{
	char src[PATH_MAX], dst[PATH_MAX];
	snprintf(src, sizeof(src), "%s/tests/plugins/.libs/%s", d->build, so);
	snprintf(dst, sizeof(dst), "%s/%s", d->plugins, so);
	test_copy_file(src, dst, 0644);
}
