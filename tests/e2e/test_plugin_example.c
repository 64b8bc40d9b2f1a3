/* SPDX-License-Identifier: MIT */
/*
 * test_plugin_example.c - the example reconciler.so (both releases, real
 * dlopen, real bus) against a real etcd, the instance driven as the
 * election would, its fenced txn a plain txn that can be told this node
 * does not lead: release formats, journal records, outputs from inputs,
 * the failure knob, and a hot reload from 1.0.0 to 1.1.0 through the same
 * file name.
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

#include "abi/abi_loader.h"
#include "check.h"
#include "files.h"
#include "harness.h"
#include "instance_fixture.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"
#include "testutil.h"

#define DATA "/leasehold/reconciler/data/"
#define DEADLINE (loop_now() + 10 * LOOP_NS_PER_S)

static struct harness_etcd *H;
static struct tu T;
#define L (T.loop)
static struct ifx_dirs D; /* the temp root, its plugin and private dirs */

/* the election's fenced txn, reduced to "leading or not" */
static bool g_leading;
static uint64_t g_txns;

static int fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                      const struct etcd_op *success, size_t n_success,
                      const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud)
{
	(void)ctx;
	if (!g_leading)
		return -ESTALE;
	g_txns++;
	return etcd_txn(T.etcd, cmps, n_cmps, success, n_success, failure, n_failure, NULL, cb, ud,
	                NULL);
}

static void no_request(void *ctx)
{
	(void)ctx;
}

static struct driver_host g_host = {.fenced_txn = fenced_txn, .data_prefix = DATA,
                                    .request_reconcile = no_request};

/* the value of DATA key (malloc'd) or NULL; the number of keys under DATA prefix */
static char *get(const char *key)
{
	char full[512];
	snprintf(full, sizeof(full), DATA "%s", key);
	return (char *)tu_get(&T, full, NULL);
}

static size_t count(const char *prefix)
{
	char full[512];
	struct etcd_kv **kvs;
	snprintf(full, sizeof(full), DATA "%s", prefix);
	size_t n = tu_list(&T, full, &kvs);
	tu_list_free(kvs, n);
	return n;
}

static void expect(const char *key, const char *want)
{
	char *v = get(key);
	if (!v || !want || strcmp(v, want) != 0)
		fprintf(stderr, "%s: \"%s\", want \"%s\"\n", key, v ? v : "(absent)",
		        want ? want : "(absent)");
	CHECK(want ? v && strcmp(v, want) == 0 : v == NULL);
	free(v);
}

/* write-then-rename, as an operator would roll a release out */
static void install_release(const char *release)
{
	char src[PATH_MAX], dst[PATH_MAX];
	snprintf(src, sizeof(src), "%s/plugins/reconciler-%s.so", D.build, release);
	snprintf(dst, sizeof(dst), "%s/reconciler.so", D.plugins);
	test_copy_file(src, dst, 0755);
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
	CHECK_OK(loader_open(D.plugins, "reconciler.so", D.private_dir, &lp, err, sizeof(err)));
	CHECK_STR_EQ(lp->name, "reconciler");
	struct plugin_instance_config cfg = {.on_init = on_init, .userdata = &ready};
	g_host.etcd = T.etcd;
	CHECK_OK(plugin_instance_new(lp, L, &g_host, node, &cfg, &pi));
	CHECK_OK(loop_run_until(L, &ready, DEADLINE));
	return pi;
}

static void reconcile(struct plugin_instance *pi, struct rdone *d)
{
	memset(d, 0, sizeof(*d));
	plugin_instance_reconcile(pi, ifx_on_reconciled, d);
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
	g_leading = true;
	plugin_instance_elected(pi, 42, &RELS);

	struct rdone d;
	reconcile(pi, &d); /* the failure knob */
	CHECK_INT_EQ(d.err, -EAGAIN);
	CHECK_STR_EQ(d.msg, "failing on purpose (attempt 1 of 1, LH_EXAMPLE_FAIL_FIRST)");
	CHECK_INT_EQ(count(""), 0);

	tu_put(&T, DATA "desired/x", "1", 1);
	tu_put(&T, DATA "out/orphan", "stale", 5);
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	expect("config/schema", "reconciler/v1");
	expect("config/items/0", "item=0;state=ready");
	expect("config/items/2", "item=2;state=ready");
	CHECK_INT_EQ(count("config/items/"), 3);
	expect("journal/000000000000002a-00000000", "node=node-a token=42 release=1.0.0 items=3");
	expect("out/x", "value=1");
	expect("out/orphan", NULL); /* no input: deleted */
	/* idempotent: a second pass writes only its journal record */
	int64_t rev = tu_revision(&T);
	uint64_t txns = g_txns;
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	CHECK_INT_EQ(tu_revision(&T), rev + 1);
	CHECK_INT_EQ(g_txns, txns + 1);
	CHECK_INT_EQ(count("journal/"), 2);
	expect("journal/000000000000002a-00000001", "node=node-a token=42 release=1.0.0 items=3");
	/* losing leadership: the plugin cannot write any more */
	g_leading = false;
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, -ESTALE);
	CHECK(strstr(d.msg, "not leading") != NULL);
	CHECK_INT_EQ(tu_revision(&T), rev + 1);
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
	g_leading = true;
	plugin_instance_elected(pi, 50, &RELS);
	struct rdone d;
	reconcile(pi, &d);
	CHECK_INT_EQ(d.err, 0);
	expect("config/schema", "reconciler/v2");
	expect("config/items/1", "{\"item\":1,\"state\":\"ready\",\"format\":2}");
	expect("config/items/2", NULL); /* no longer desired */
	expect("journal/0000000000000032-00000000", "node=node-b token=50 release=1.1.0 items=2");
	expect("out/x", "{\"value\":\"1\",\"format\":2}");

	/* the journal invariant a checker would verify: one node per token */
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, DATA "journal/", &kvs);
	CHECK_INT_EQ(n, 3);
	for (size_t i = 0; i < n; i++) {
		const char *k = (const char *)kvs[i]->key, *v = (const char *)kvs[i]->value;
		if (strstr(k, "/000000000000002a-"))
			CHECK(strncmp(v, "node=node-a ", 12) == 0);
		else
			CHECK(strncmp(v, "node=node-b ", 12) == 0);
	}
	tu_list_free(kvs, n);
	plugin_instance_deposed(pi);
	stop(pi);
}

int main(void)
{
	ifx_dirs_setup(&D, "test-example");
	CHECK_OK(harness_etcd_start(1, NULL, &H));
	tu_init(&T, harness_etcd_url(H, 0));

	RUN(test_release_1_0_writes_v1_and_journal);
	RUN(test_hot_reload_to_1_1_writes_v2);

	tu_fini(&T);
	harness_etcd_free(H);
	/* bus sockets still closing on the closer thread */
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return CHECK_EXIT();
}
