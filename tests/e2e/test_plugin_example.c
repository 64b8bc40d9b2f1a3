/* SPDX-License-Identifier: MIT */
/*
 * test_plugin_example.c - the example reconciler.so (both releases, real
 * dlopen, real bus) against the fake fenced-txn host: desired keys, release
 * formats, journal records, failure knob, and a hot reload from 1.0.0 to
 * 1.1.0 through the same file name.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>

#include "check.h"
#include "files.h"
#include "fakehost.h"
#include "abi/abi_loader.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"

#define DATA "/leasehold/reconciler/data/"
#define DEADLINE (loop_now() + 10 * LOOP_NS_PER_S)

static struct loop *L;
static struct fakehost *FH;
static char g_root[512], g_dir[1024], g_private[1024], g_build[1024];

/* write-then-rename, as an operator would roll a release out */
static void install_release(const char *release)
{
	char src[PATH_MAX], dst[PATH_MAX];
	snprintf(src, sizeof(src), "%s/plugins/reconciler-%s.so", g_build, release);
	snprintf(dst, sizeof(dst), "%s/reconciler.so", g_dir);
	test_copy_file(src, dst, 0755);
}

struct rdone {
	bool done;
	int err;
	char msg[256];
};

static void on_reconciled(void *ud, int err, const char *msg)
{
	struct rdone *d = ud;
	d->done = true;
	d->err = err;
	snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : "");
}

static void on_init(void *ud, int err, const char *msg)
{
	(void)msg;
	CHECK_INT_EQ(err, 0);
	*(bool *)ud = true;
}

static void on_stopped(void *ud)
{
	*(bool *)ud = true;
}

static struct plugin_instance *start(const char *release, const char *node)
{
	char err[LOADER_ERR_MAX];
	struct loader_plugin *lp;
	struct plugin_instance *pi;
	bool ready = false;
	install_release(release);
	CHECK_OK(loader_open(g_dir, "reconciler.so", g_private, &lp, err, sizeof(err)));
	CHECK_STR_EQ(lp->name, "reconciler");
	struct plugin_instance_config cfg = {.on_init = on_init, .userdata = &ready};
	CHECK_OK(plugin_instance_new(lp, L, fakehost_driver_host(FH), node, &cfg, &pi));
	CHECK_OK(loop_run_until(L, &ready, DEADLINE));
	return pi;
}

static void reconcile(struct plugin_instance *pi, struct rdone *d)
{
	memset(d, 0, sizeof(*d));
	plugin_instance_reconcile(pi, on_reconciled, d);
	CHECK_OK(loop_run_until(L, &d->done, DEADLINE));
}

static void stop(struct plugin_instance *pi)
{
	bool stopped = false;
	plugin_instance_stop(pi, on_stopped, &stopped);
	CHECK_OK(loop_run_until(L, &stopped, DEADLINE));
	plugin_instance_free(pi);
}

static const struct releases RELS = {{1, 0, 0}, {1, 0, 0}, 10, 3};

static void test_release_1_0_writes_v1_and_journal(void)
{
	setenv("LH_EXAMPLE_FAIL_FIRST", "1", 1);
	struct plugin_instance *pi = start("1.0.0", "node-a");
	unsetenv("LH_EXAMPLE_FAIL_FIRST");
	CHECK_STR_EQ(plugin_instance_plugin(pi)->name, "reconciler");
	CHECK_INT_EQ(plugin_instance_plugin(pi)->release.minor, 0);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(pi, 42, &RELS);

	struct rdone d;
	reconcile(pi, &d); /* the failure knob */
	CHECK_INT_EQ(d.err, -EAGAIN);
	CHECK_STR_EQ(d.msg, "failing on purpose (attempt 1 of 1, LH_EXAMPLE_FAIL_FIRST)");
	CHECK_INT_EQ(fakehost_count(FH, DATA), 0);

	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	CHECK_STR_EQ(fakehost_get(FH, DATA "config/schema"), "reconciler/v1");
	CHECK_STR_EQ(fakehost_get(FH, DATA "config/items/0"), "item=0;state=ready");
	CHECK_STR_EQ(fakehost_get(FH, DATA "config/items/2"), "item=2;state=ready");
	CHECK_INT_EQ(fakehost_count(FH, DATA "config/items/"), 3);
	CHECK_STR_EQ(fakehost_get(FH, DATA "journal/000000000000002a-00000000"),
	             "node=node-a token=42 release=1.0.0 items=3");
	/* idempotent: a second pass only appends a journal record */
	uint64_t txns = fakehost_txns(FH);
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	CHECK_INT_EQ(fakehost_txns(FH), txns + 2); /* one read, one write */
	CHECK_INT_EQ(fakehost_count(FH, DATA "journal/"), 2);
	CHECK_STR_EQ(fakehost_get(FH, DATA "journal/000000000000002a-00000001"),
	             "node=node-a token=42 release=1.0.0 items=3");
	/* losing leadership: the plugin cannot write any more */
	fakehost_set_leading(FH, false);
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, -ESTALE);
	CHECK(strstr(d.msg, "not leading") != NULL);
	plugin_instance_deposed(pi);
	stop(pi);
}

static void test_hot_reload_to_1_1_writes_v2(void)
{
	/* the 1.1.0 release, dropped over the same file name; fewer items */
	setenv("LH_EXAMPLE_ITEMS", "2", 1);
	struct plugin_instance *pi = start("1.1.0", "node-b");
	unsetenv("LH_EXAMPLE_ITEMS");
	const struct loader_plugin *lp = plugin_instance_plugin(pi);
	CHECK_INT_EQ(lp->release.minor, 1);
	CHECK_INT_EQ(lp->min_compatible_release.minor, 1);
	CHECK_INT_EQ(lp->min_reconciler_release.minor, 0);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(pi, 50, &RELS);
	struct rdone d;
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	CHECK_STR_EQ(fakehost_get(FH, DATA "config/schema"), "reconciler/v2");
	CHECK_STR_EQ(fakehost_get(FH, DATA "config/items/1"),
	             "{\"item\":1,\"state\":\"ready\",\"format\":2}");
	CHECK(fakehost_get(FH, DATA "config/items/2") == NULL); /* no longer desired */
	CHECK_STR_EQ(fakehost_get(FH, DATA "journal/0000000000000032-00000000"),
	             "node=node-b token=50 release=1.1.0 items=2");

	/* the journal invariant a checker would verify: one node per token */
	size_t n = fakehost_count(FH, DATA "journal/");
	CHECK_INT_EQ(n, 3);
	for (size_t i = 0; i < n; i++) {
		const char *k = fakehost_nth_key(FH, DATA "journal/", i);
		const char *v = fakehost_get(FH, k);
		CHECK(k && v);
		if (strstr(k, "/000000000000002a-"))
			CHECK(strncmp(v, "node=node-a ", 12) == 0);
		else
			CHECK(strncmp(v, "node=node-b ", 12) == 0);
	}
	plugin_instance_deposed(pi);
	stop(pi);
}

int main(void)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(g_build, sizeof(g_build), "%s", b && *b ? b : ".");
	test_tmp_root("test-example", g_root, sizeof(g_root));
	snprintf(g_dir, sizeof(g_dir), "%s/plugins", g_root);
	snprintf(g_private, sizeof(g_private), "%s/private", g_root);
	CHECK(mkdir(g_dir, 0755) == 0);
	char err[LOADER_ERR_MAX];
	CHECK_OK(loader_private_dir_prepare(g_private, err, sizeof(err)));
	CHECK_OK(loop_new(&L));
	CHECK_OK(fakehost_new(L, DATA, &FH));

	RUN(test_release_1_0_writes_v1_and_journal);
	RUN(test_hot_reload_to_1_1_writes_v2);

	fakehost_free(FH);
	loop_free(L);
	/* bus sockets still closing on the closer thread */
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return CHECK_EXIT();
}
