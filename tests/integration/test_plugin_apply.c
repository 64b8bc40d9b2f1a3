/* SPDX-License-Identifier: MIT */
/*
 * test_plugin_apply.c - ABI 1.3 at the plugin instance level: a real etcd
 * (harness), real plugin .so files (tests/plugins/applier.c, controller.c,
 * watcher.c built against the ABI 1.2 header), real nng, both isolation
 * modes. The test plays the election as test_plugin_watch does; its
 * fenced_txn is a plain etcd txn that can be told to refuse from the n-th
 * call on (a fence lost mid-apply).
 *
 * What is checked:
 * - apply: a set is written (only the difference), a resync of an unchanged
 *   set writes nothing (0 txns), orphans are deleted (not with
 *   LH_APPLY_KEEP_OTHERS), an empty set empties the prefix; chunks of 127
 *   ops (127 keys: one txn, 128: two) and of at most LH_APPLY_TXN_BYTES;
 *   a fence lost after the first chunk stops the call (no later write);
 * - refusals before any write (a key twice, a bad key, a key outside the
 *   prefix, a value over LH_VALUE_MAX, unknown flags, a bad prefix);
 * - apply_key: a put, an unchanged put, a delete, a delete of nothing;
 * - config accessors with the schema's defaults, a value of the wrong
 *   type; the schema refusing `{"prefix":5}` with the field on validation
 *   and before on_config_changed;
 * - the plugin guide's controller: outputs derived, a config change, an
 *   orphan deleted;
 * - ABI 1.2: the watcher built against the kept 1.2 header loads and runs.
 */
#include "config.h"

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

#define PREFIX "/lh/t/data/"
#define WAIT_MS 30000

static struct harness_etcd *H;
static struct tu T;
static struct ifx_dirs D;
static char g_trace[1200], g_knobs[1200];
/* plain_txn refuses its call number g_fail_at (counted from 1 after
 * g_fail_at is set), and only that one: a call that went on past a failed
 * chunk would land the next one */
static int g_fail_at, g_calls;
static unsigned g_txns;

static int plain_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
                     size_t n_failure, etcd_cb cb, void *ud)
{
	(void)ctx;
	if (g_fail_at && ++g_calls == g_fail_at)
		return -ESTALE;
	g_txns++;
	CHECK(n_success <= LH_APPLY_TXN_OPS);
	return etcd_txn(T.etcd, cmps, n_cmps, success, n_success, failure, n_failure, NULL, cb, ud,
	                NULL);
}

static void no_request(void *ctx)
{
	(void)ctx;
}

static struct driver_host g_host = {.fenced_txn = plain_txn, .data_prefix = PREFIX,
                                    .request_reconcile = no_request};

struct inst {
	struct loader_plugin *lp;
	struct plugin_instance *pi;
	struct idone init;
};

static void start(struct inst *in, const char *file, uint32_t mode, const struct plugin_config *c)
{
	char err[LOADER_ERR_MAX];
	memset(in, 0, sizeof(*in));
	int r = loader_open(D.plugins, file, D.private_dir, &in->lp, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "loader: %s\n", err);
	CHECK_OK(r);
	struct plugin_instance_config cfg = {.on_init = ifx_on_init, .userdata = &in->init, .isolation = mode,
	                                     .worker_path = D.worker, .config = c};
	g_host.etcd = T.etcd;
	CHECK_OK(plugin_instance_new(in->lp, T.loop, &g_host, "n1", &cfg, &in->pi));
	while (!in->init.done)
		CHECK(loop_run_once(T.loop, 1000) >= 0);
	CHECK_INT_EQ(in->init.err, 0);
}

static void stop_and_free(struct inst *in)
{
	ifx_stop(T.loop, in->pi);
	plugin_instance_free(in->pi);
	in->pi = NULL;
}

static void wait_done(struct rdone *d)
{
	CHECK_OK(loop_run_until(T.loop, &d->done, loop_now() + (uint64_t)WAIT_MS * LOOP_NS_PER_MS));
}

static const struct releases REL = {{1, 0, 0}, {1, 0, 0}, 1, 1};

static char *trace_read(void)
{
	FILE *f = fopen(g_trace, "r");
	char *buf = calloc(1, 1 << 16);
	CHECK(buf != NULL);
	if (f) {
		size_t n = fread(buf, 1, (1 << 16) - 1, f);
		buf[n] = 0;
		fclose(f);
	}
	return buf;
}

/* reconcile once and return the trace's lines written meanwhile (malloc'd) */
static char *reconcile(struct plugin_instance *pi)
{
	unlink(g_trace);
	struct rdone d = {0};
	plugin_instance_reconcile(pi, ifx_on_reconciled, &d);
	wait_done(&d);
	CHECK_INT_EQ(d.err, 0);
	return trace_read();
}

static void expect(const char *trace, const char *want)
{
	if (!strstr(trace, want))
		fprintf(stderr, "want: %s\ntrace:\n%s\n", want, trace);
	CHECK(strstr(trace, want) != NULL);
}

static size_t count(const char *prefix)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, prefix, &kvs);
	tu_list_free(kvs, n);
	return n;
}

/* the applier's knobs (tests/plugins/applier.c) */
static void knobs(const char *cas, const char *n, const char *val, const char *flags)
{
	FILE *f = fopen(g_knobs, "w");
	CHECK(f != NULL);
	fprintf(f, "CASE=%s\nN=%s\nVAL=%s\nFLAGS=%s\n", cas, n, val, flags);
	CHECK(fclose(f) == 0);
}

static void set_case(const char *n, const char *val, const char *flags)
{
	knobs("set", n, val, flags);
}

/* the diff: only the difference is written; a resync of the same set
 * writes nothing; orphans go (not with KEEP_OTHERS); chunks of 127 ops */
static void t_apply_diff_and_chunks(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "applier.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	set_case("127", "v", "0");
	char *t = reconcile(in.pi);
	expect(t, "apply rc=0 put=127 deleted=0 unchanged=0 txns=1 rev=+");
	free(t);
	CHECK_INT_EQ(count(PREFIX "out/"), 127);
	unsigned before = g_txns;
	t = reconcile(in.pi); /* a full resync of an unchanged set */
	expect(t, "apply rc=0 put=0 deleted=0 unchanged=127 txns=0 rev=+");
	free(t);
	CHECK_INT_EQ(g_txns, before);
	set_case("128", "v", "0");
	t = reconcile(in.pi); /* 127 unchanged and one new: one txn */
	expect(t, "apply rc=0 put=1 deleted=0 unchanged=127 txns=1");
	free(t);
	set_case("128", "w", "0");
	t = reconcile(in.pi); /* 128 changed: 127 + 1 */
	expect(t, "apply rc=0 put=128 deleted=0 unchanged=0 txns=2");
	free(t);
	tu_put(&T, PREFIX "out/orphan", "o", 1);
	tu_put(&T, PREFIX "outside", "o", 1);
	set_case("100", "w", "1"); /* LH_APPLY_KEEP_OTHERS */
	t = reconcile(in.pi);
	expect(t, "apply rc=0 put=0 deleted=0 unchanged=100 txns=0");
	free(t);
	CHECK_INT_EQ(count(PREFIX "out/"), 129);
	set_case("100", "w", "0"); /* 28 + the orphan go */
	t = reconcile(in.pi);
	expect(t, "apply rc=0 put=0 deleted=29 unchanged=100 txns=1");
	free(t);
	set_case("0", "w", "0"); /* the empty set empties the prefix */
	t = reconcile(in.pi);
	expect(t, "apply rc=0 put=0 deleted=100 unchanged=0 txns=1");
	free(t);
	CHECK_INT_EQ(count(PREFIX "out/"), 0);
	CHECK_INT_EQ(count(PREFIX "outside"), 1); /* not under the prefix */
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* a full resync of 10,000 unchanged keys: no write (the time is printed,
 * not checked: sanitizers and a shared machine make it no bound) */
static void t_apply_resync_10000(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "applier.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	set_case("10000", "value-of-some-length", "0");
	char *t = reconcile(in.pi);
	expect(t, "apply rc=0 put=10000 deleted=0 unchanged=0 txns=79 rev=+");
	free(t);
	unsigned before = g_txns;
	uint64_t t0 = loop_now();
	t = reconcile(in.pi);
	uint64_t ns = loop_now() - t0;
	expect(t, "apply rc=0 put=0 deleted=0 unchanged=10000 txns=0 rev=+");
	free(t);
	CHECK_INT_EQ(g_txns, before);
	fprintf(stderr, "  resync of 10000 unchanged keys (%s): %.1f ms, 0 writes\n",
		ifx_isolation_name(mode), (double)ns / 1e6);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* chunks by bytes: four values of 300,000 bytes are two txns (three fit
 * LH_APPLY_TXN_BYTES, four do not); the pages of the read stay under
 * LH_READ_MAX */
static void t_apply_bytes(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "applier.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	set_case("4", "@300000", "0");
	char *t = reconcile(in.pi);
	expect(t, "apply rc=0 put=4 deleted=0 unchanged=0 txns=2");
	free(t);
	t = reconcile(in.pi); /* read back in pages of at most LH_READ_MAX */
	expect(t, "apply rc=0 put=0 deleted=0 unchanged=4 txns=0");
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* leadership lost after the first chunk: the call stops, nothing after */
static void t_apply_fence_lost(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "applier.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	set_case("300", "v", "0");
	g_fail_at = 2;
	g_calls = 0;
	char *t = reconcile(in.pi);
	g_fail_at = 0;
	CHECK_INT_EQ(g_calls, 2); /* no third chunk was tried */
	expect(t, "apply rc=-116 put=127 deleted=0 unchanged=0 txns=1 rev=+");
	free(t);
	CHECK_INT_EQ(count(PREFIX "out/"), 127);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* refused sets write nothing; apply_key */
static void t_apply_refusals_and_key(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	struct inst in;
	start(&in, "applier.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	knobs("bad", "0", "v", "0");
	unsigned before = g_txns;
	char *t = reconcile(in.pi);
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: key \"out/a\" is in the set twice");
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: key 1 \"out//x\" holds an empty component");
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: key 1 \"other/x\" is not under the prefix");
	expect(t, "apply: key 1 \"out/h\": value of 512001 bytes is larger than LH_VALUE_MAX");
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: unknown flags 0x80");
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: the prefix starts with '/'");
	expect(t, "apply rc=-22 put=0 deleted=0 unchanged=0 txns=0 rev=0 apply: desired is NULL with 1 keys");
	free(t);
	CHECK_INT_EQ(g_txns, before);
	CHECK_INT_EQ(count(PREFIX), 0);
	knobs("key", "0", "k1", "0");
	t = reconcile(in.pi);
	expect(t, "apply rc=0 put=1 deleted=0 unchanged=0 txns=1 rev=+ \n"
	          "apply rc=0 put=0 deleted=0 unchanged=1 txns=0 rev=+ \n"
	          "apply rc=0 put=0 deleted=1 unchanged=0 txns=1 rev=+ \n"
	          "apply rc=0 put=0 deleted=0 unchanged=1 txns=0 rev=+ \n");
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

static void set_cluster_doc(struct plugin_config *c, const char *doc, int64_t rev)
{
	free(c->cluster);
	c->cluster = strdup(doc);
	c->cluster_len = strlen(doc);
	c->cluster_rev = rev;
}

/* the accessors with the schema's defaults; the schema refuses an
 * ill-typed document on validation and before on_config_changed */
static void t_config_schema(uint32_t mode)
{
	struct plugin_config c = {0};
	set_cluster_doc(&c, "{\"count\":5,\"tags\":[\"x\",\"y\"],\"need\":{\"me\":1},"
	                    "\"free\":{\"text\":\"t\"}}", 10);
	struct inst in;
	start(&in, "applier.so", mode, &c);
	plugin_instance_elected(in.pi, 1, &REL);
	knobs("config", "0", "v", "0");
	char *t = reconcile(in.pi);
	expect(t, "config out/ 5 1 2000 2 x t");
	expect(t, "untyped 7 configuration field \"free.text\": expected an integer, got \"t\"");
	free(t);
	static const struct {
		const char *doc, *why;
	} bad[] = {
	    {"{\"prefix\":5,\"need\":{\"me\":1}}", "field \"prefix\": expected a string, got 5"},
	    {"{}", "field \"need.me\": required, but the document has none"},
	    {"{\"need\":{\"me\":1},\"count\":1001}", "field \"count\": 1001 is outside 0..1000"},
	    {"{\"need\":{\"me\":1},\"mode\":\"c\"}", "field \"mode\": \"c\" is not one of \"a\", \"b\""},
	    {"{\"need\":{\"me\":1},\"wait\":\"soon\"}", "field \"wait\": expected a duration, got \"soon\""},
	    {"{\"need\":{\"me\":1},\"tags\":[1]}", "field \"tags\": expected a list of strings, got [1]"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rdone d = {0};
		CHECK_OK(plugin_instance_validate_config(in.pi, bad[i].doc, strlen(bad[i].doc),
		                                         ifx_on_reconciled, &d));
		wait_done(&d);
		CHECK_INT_EQ(d.err, -EINVAL);
		if (!strstr(d.msg, bad[i].why))
			fprintf(stderr, "want %s, got %s\n", bad[i].why, d.msg);
		CHECK(strstr(d.msg, bad[i].why) != NULL);
	}
	struct rdone ok = {0};
	const char *good = "{\"prefix\":\"p/\",\"need\":{\"me\":2}}";
	CHECK_OK(plugin_instance_validate_config(in.pi, good, strlen(good), ifx_on_reconciled, &ok));
	wait_done(&ok);
	CHECK_INT_EQ(ok.err, 0);
	/* an ill-typed document in etcd never reaches the plugin */
	unlink(g_trace);
	set_cluster_doc(&c, "{\"prefix\":5,\"need\":{\"me\":1}}", 11);
	CHECK_OK(plugin_instance_set_config(in.pi, &c));
	int64_t rev = 0;
	for (int i = 0; i < 3000 && !plugin_instance_config_refusal(in.pi, &rev); i++)
		CHECK(loop_run_once(T.loop, 10) >= 0);
	const char *refusal = plugin_instance_config_refusal(in.pi, &rev);
	CHECK(refusal != NULL);
	CHECK(strstr(refusal, "field \"prefix\": expected a string, got 5") != NULL);
	t = trace_read();
	expect(t, "changed flags=1 out/"); /* the last good document, flagged invalid */
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	plugin_config_clear(&c);
}

/* the plugin guide's controller: outputs derived from inputs, a config
 * change, an orphan deleted */
static void t_controller(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	tu_put(&T, PREFIX "in/a", "1", 1);
	tu_put(&T, PREFIX "in/b", "2", 1);
	tu_put(&T, PREFIX "out/stale", "x", 1);
	struct inst in;
	start(&in, "controller.so", mode, NULL);
	plugin_instance_elected(in.pi, 1, &REL);
	free(reconcile(in.pi));
	size_t len;
	uint8_t *v = tu_get(&T, PREFIX "out/a", &len);
	CHECK(v && strcmp((char *)v, "blue:1") == 0);
	free(v);
	CHECK_INT_EQ(count(PREFIX "out/"), 2); /* the orphan went */
	struct plugin_config c = {0};
	set_cluster_doc(&c, "{\"label\":\"green\"}", 20);
	CHECK_OK(plugin_instance_set_config(in.pi, &c));
	tu_del(&T, PREFIX "in/b");
	free(reconcile(in.pi));
	v = tu_get(&T, PREFIX "out/a", &len);
	CHECK(v && strcmp((char *)v, "green:1") == 0);
	free(v);
	CHECK_INT_EQ(count(PREFIX "out/"), 1);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	plugin_config_clear(&c);
}

/* a plugin built against the ABI 1.2 header loads and behaves as before */
static void t_abi_1_2(uint32_t mode)
{
	tu_del_prefix(&T, PREFIX);
	setenv("LH_WATCHER_BIG", "1", 1);
	setenv("LH_WATCHER_PREFIX", "-", 1);
	struct inst in;
	start(&in, "watcher12.so", mode, NULL);
	CHECK_INT_EQ(plugin_instance_plugin(in.pi)->desc.abi_minor, 2);
	CHECK_INT_EQ(plugin_instance_plugin(in.pi)->desc.n_config_fields, 0);
	plugin_instance_elected(in.pi, 1, &REL);
	free(reconcile(in.pi));
	char *t = trace_read();
	expect(t, "big put=0 range=0 n=1");
	free(t);
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
	unsetenv("LH_WATCHER_BIG");
	unsetenv("LH_WATCHER_PREFIX");
}

int main(void)
{
	ifx_dirs_setup(&D, "test-apply");
	snprintf(g_trace, sizeof(g_trace), "%s/trace", D.root);
	snprintf(g_knobs, sizeof(g_knobs), "%s/knobs", D.root);
	ifx_install(&D, "applier.so");
	ifx_install(&D, "controller.so");
	ifx_install(&D, "watcher12.so");
	setenv("LH_APPLIER_TRACE", g_trace, 1);
	setenv("LH_APPLIER_KNOBS", g_knobs, 1);
	setenv("LH_WATCHER_TRACE", g_trace, 1);

	CHECK_OK(harness_etcd_start(1, NULL, &H));
	tu_init(&T, harness_etcd_url(H, 0));
	for (uint32_t mode = 0; mode <= PLUGIN_ISOLATION_PROCESS; mode++) {
		IFX_RUN_MODE(t_apply_diff_and_chunks, mode);
		IFX_RUN_MODE(t_apply_bytes, mode);
		IFX_RUN_MODE(t_apply_resync_10000, mode);
		IFX_RUN_MODE(t_apply_fence_lost, mode);
		IFX_RUN_MODE(t_apply_refusals_and_key, mode);
		IFX_RUN_MODE(t_config_schema, mode);
		IFX_RUN_MODE(t_controller, mode);
		IFX_RUN_MODE(t_abi_1_2, mode);
	}
	tu_fini(&T);
	harness_etcd_free(H);
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return 0;
}
