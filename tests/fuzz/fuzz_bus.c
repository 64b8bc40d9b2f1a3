/* SPDX-License-Identifier: MIT */
/*
 * fuzz_bus.c - bus messages from a plugin worker (proto/bus.proto) as the
 * host decodes them: plugin_instance_inject_from_worker() on a live plugin
 * instance, plus the raw protobuf-c unpack of both directions (ToHost, and
 * ToWorker, which the worker decodes).
 *
 * Setup (once, LLVMFuzzerInitialize): the "recorder" test plugin
 * ($LH_FUZZ_RECORDER, else $LH_BUILDDIR/tests/plugins/.libs/recorder.so) is
 * copied into a private temp dir, loaded with loader_open and started with
 * plugin_instance_new against the fake driver host (tests/plugins/fakehost.c).
 * The instance is then elected and a reconcile is queued while the recorder
 * holds it (recorder->hold), so an event is in flight and the instance is
 * leading: injected TxnRequests then go through the whole validation and the
 * fenced txn path, not just "txn outside a callback". If an injected EventDone
 * completes that event, the next input queues another reconcile.
 * Without the plugin the target exits 99 (setup error), unless
 * LH_FUZZ_UNPACK_ONLY=1 asks for the unpack half alone.
 *
 * Input: the whole input is one message from the worker. After injecting,
 * the loop runs for at most one 0 ms round so the fake host's answers
 * (timers) and the worker's replies are processed.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi_loader.h"
#include "base/log.h"
#include "base/loop.h"
#include "fakehost.h"
#include "files.h"
#include "fuzz.h"
#include "proto/bus.pb-c.h"
#include "recorder.h"
#include "runtime/runtime_instance_internal.h"

static struct loop *g_loop;
static struct fakehost *g_fh;
static struct plugin_instance *g_pi;
static struct recorder *g_rec;
static char g_dir[256];
static bool g_init_done;
static int g_init_err;

static void on_init(void *ud, int err, const char *msg)
{
	(void)ud;
	(void)msg;
	g_init_err = err;
	g_init_done = true;
}

static void on_reconcile_done(void *ud, int err, const char *msg)
{
	(void)ud;
	(void)err;
	(void)msg;
}

/* copy_file - src to dst (mode 0644). Returns 0 or -errno. */
static int copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		int r = -errno;
		close(in);
		return r;
	}
	char buf[65536];
	ssize_t n;
	int r = 0;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			r = -EIO;
			break;
		}
	if (n < 0)
		r = -errno;
	close(in);
	if (close(out) < 0 && r == 0)
		r = -errno;
	return r;
}

static bool in_reconcile(void)
{
	pthread_mutex_lock(&g_rec->mu);
	int v = g_rec->in_reconcile;
	pthread_mutex_unlock(&g_rec->mu);
	return v != 0;
}

/* wait_until_in_reconcile - run the loop until the recorder sits in its held
 * reconcile, or 10 s. Returns 0 or -ETIMEDOUT. */
static int wait_until_in_reconcile(void)
{
	uint64_t deadline = loop_now() + 10 * LOOP_NS_PER_S;
	while (!in_reconcile()) {
		if (loop_now() >= deadline)
			return -ETIMEDOUT;
		loop_run_once(g_loop, 10); /* waits for loop events, bounded */
	}
	return 0;
}

/* instance_setup - everything described at the top. Returns 0 or -errno;
 * on failure the fuzzer runs the unpack half only. */
static int instance_setup(void)
{
	char so[PATH_MAX], dst[PATH_MAX], priv[PATH_MAX], err[LOADER_ERR_MAX];
	const char *env = getenv("LH_FUZZ_RECORDER");
	const char *build = getenv("LH_BUILDDIR");
	if (env && *env)
		snprintf(so, sizeof(so), "%s", env);
	else
		snprintf(so, sizeof(so), "%s/tests/plugins/.libs/recorder.so", build && *build ? build : ".");
	if (access(so, R_OK) != 0)
		return -ENOENT;
	const char *tmp = getenv("TMPDIR");
	snprintf(g_dir, sizeof(g_dir), "%s/lh-fuzz-bus-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_dir)) {
		g_dir[0] = 0;
		return -errno;
	}
	snprintf(dst, sizeof(dst), "%s/recorder.so", g_dir);
	snprintf(priv, sizeof(priv), "%s/private", g_dir);
	int r = copy_file(so, dst);
	if (r < 0)
		return r;
	if ((r = loader_private_dir_prepare(priv, err, sizeof(err))) < 0 ||
	    (r = loop_new(&g_loop)) < 0 || (r = fakehost_new(g_loop, "/lh/recorder/data/", &g_fh)) < 0)
		return r;
	struct loader_plugin *lp = NULL;
	if ((r = loader_open(g_dir, "recorder.so", priv, &lp, err, sizeof(err))) < 0) {
		fprintf(stderr, "fuzz_bus: %s\n", err);
		return r;
	}
	recorder_get_fn get = (recorder_get_fn)dlsym(lp->handle, "recorder_get");
	if (!get) {
		loader_close(lp);
		return -ENOENT;
	}
	g_rec = get();
	g_rec->hold = 1;
	struct plugin_instance_config cfg = {.on_init = on_init, .txn_timeout_ms = 1000};
	if ((r = plugin_instance_new(lp, g_loop, fakehost_driver_host(g_fh), "node-fuzz", &cfg,
	                             &g_pi)) < 0) {
		loader_close(lp);
		return r;
	}
	if ((r = loop_run_until(g_loop, &g_init_done, loop_now() + 10 * LOOP_NS_PER_S)) < 0)
		return r;
	if (g_init_err < 0)
		return g_init_err;
	static const struct releases rel = {{1, 0, 0}, {1, 1, 0}, 7, 3};
	fakehost_set_leading(g_fh, true);
	plugin_instance_elected(g_pi, 42, &rel);
	plugin_instance_reconcile(g_pi, on_reconcile_done, NULL);
	return wait_until_in_reconcile();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* the instance logs every bad message at debug and plugin Log lines at
	 * their level: keep the fuzzer's output readable */
	log_set_level(LOG_LVL_ERROR);
	int r = instance_setup();
	if (r < 0) {
		const char *only = getenv("LH_FUZZ_UNPACK_ONLY");
		fprintf(stderr, "fuzz_bus: no plugin instance: %s (set LH_FUZZ_RECORDER or LH_BUILDDIR)\n",
		        strerror(-r));
		fuzz_cleanup();
		if (!only || strcmp(only, "1") != 0)
			exit(99); /* a setup error, not a finding */
		fprintf(stderr, "fuzz_bus: LH_FUZZ_UNPACK_ONLY=1: fuzzing the protobuf-c unpack only\n");
	}
	return 0;
}

void fuzz_cleanup(void)
{
	if (g_rec) {
		pthread_mutex_lock(&g_rec->mu);
		g_rec->hold = 0;
		pthread_cond_broadcast(&g_rec->cv);
		pthread_mutex_unlock(&g_rec->mu);
	}
	plugin_instance_free(g_pi); /* stops the worker synchronously */
	g_pi = NULL;
	g_rec = NULL;
	fakehost_free(g_fh);
	g_fh = NULL;
	loop_free(g_loop);
	g_loop = NULL;
	if (g_dir[0])
		test_rm_tree(g_dir);
	g_dir[0] = 0;
}

static volatile size_t g_sink;

/* unpack_both - the raw decoders of both directions */
static void unpack_both(const uint8_t *data, size_t size)
{
	Leasehold__Bus__ToHost *th = leasehold__bus__to_host__unpack(NULL, size, data);
	if (th) {
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN && th->txn) {
			const Leasehold__Bus__TxnRequest *t = th->txn;
			FUZZ_CHECK(t->n_success == 0 || t->success != NULL);
			for (size_t i = 0; i < t->n_success; i++)
				g_sink += t->success[i]->key.len + t->success[i]->value.len;
		}
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
	Leasehold__Bus__ToWorker *tw = leasehold__bus__to_worker__unpack(NULL, size, data);
	if (tw) {
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply) {
			const Leasehold__Bus__TxnReply *t = tw->txn_reply;
			for (size_t i = 0; i < t->n_results; i++)
				for (size_t k = 0; k < t->results[i]->n_kvs; k++)
					g_sink += t->results[i]->kvs[k]->key.len;
		}
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unpack_both(data, size);
	if (!g_pi)
		return 0;
	struct plugin_instance_stats st;
	plugin_instance_get_stats(g_pi, &st);
	if (st.in_flight == 0 && st.queued == 0)
		plugin_instance_reconcile(g_pi, on_reconcile_done, NULL);
	uint64_t bad_before = st.bad_messages;
	int r = plugin_instance_inject_from_worker(g_pi, data, size);
	FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -EPROTO);
	plugin_instance_get_stats(g_pi, &st);
	if (r < 0)
		FUZZ_CHECK(st.bad_messages > bad_before);
	/* let the fake host answer (0 ms timers) and the worker reply */
	loop_run_once(g_loop, 0);
	loop_run_once(g_loop, 0);
	/* every input may put new random keys into the fake store: keep it small
	 * (millions of inputs grew it past libFuzzer's 2 GB RSS limit) */
	if (fakehost_count(g_fh, "") > 1024)
		fakehost_clear(g_fh);
	return 0;
}
