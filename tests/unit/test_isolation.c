/* SPDX-License-Identifier: MIT */
/*
 * test_isolation.c - plugin workers in a child process (--isolation process)
 * and in a thread, driving the "crashy" test plugin whose state lives in
 * shared memory (visible across the process boundary).
 *
 * - The driver-level behaviour of test_bus.c, run in BOTH modes: the child
 *   runs the same worker loop, so the same traces must come out.
 * - Containment (process mode): a plugin that segfaults, aborts, exits or
 *   hangs past the callback timeout inside a callback is contained: this
 *   test process survives, on_failed carries a clear reason, every pending
 *   completion arrives exactly once with an error, the worker is restarted
 *   with growing delays, and a healthy instance keeps working throughout.
 * - Thread mode: a hang past the timeout is reported and the instance
 *   resumes when the callback returns.
 * No sleeps: every wait is loop_run_until with a deadline; the plugin
 * notifies through a FIFO the loop watches.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <nng/nng.h>

#include "abi/abi_bus.h"
#include "check.h"
#include "instance_fixture.h"
#include "files.h"
#include "crashy.h"
#include "runtime/runtime_callback_timeout.h"
#include "fakehost.h"
#include "abi/abi_loader.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"

#define PREFIX "/lh/crashy/data/"
#define DEADLINE (loop_now() + 20 * LOOP_NS_PER_S)

static struct loop *L;
static struct fakehost *FH;
static char g_root[512], g_dir[1024], g_private[1024], g_build[1024], g_worker[1200],
    g_stderr[1200], g_oldworker[1200];
static const char *g_use_worker; /* start(): the worker program (default g_worker) */
static struct crashy_shm *S;
static int g_fifo = -1;
static struct loop_io *g_fio;
static bool g_notified;

static void on_notify(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	char buf[256];
	(void)io;
	(void)events;
	(void)ud;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	g_notified = true;
}

/* ---- shared state ---- */

static void lock(void)
{
	if (pthread_mutex_lock(&S->mu) == EOWNERDEAD)
		pthread_mutex_consistent(&S->mu);
}

static void unlock(void)
{
	pthread_mutex_unlock(&S->mu);
}

static struct crashy_slot *slot_reset(int i, const char *node)
{
	lock();
	struct crashy_slot *s = &S->slot[i];
	memset(s, 0, sizeof(*s));
	snprintf(s->node_id, sizeof(s->node_id), "%s", node);
	unlock();
	return s;
}

#define SET(s, field, v)                                                                           \
	do {                                                                                       \
		lock();                                                                            \
		(s)->field = (v);                                                                  \
		unlock();                                                                          \
	} while (0)

static int32_t get_i(const int32_t *p)
{
	lock();
	int32_t v = *p;
	unlock();
	return v;
}

static void dump(struct crashy_slot *s)
{
	lock();
	for (int i = 0; i < s->n; i++)
		fprintf(stderr, "  trace[%d] %s\n", i, s->trace[i]);
	unlock();
}

static void check_line(struct crashy_slot *s, int i, const char *want)
{
	char got[CRASHY_LINE];
	lock();
	snprintf(got, sizeof(got), "%s", i < s->n ? s->trace[i] : "(none)");
	unlock();
	if (strcmp(got, want) != 0)
		dump(s);
	CHECK_STR_EQ(got, want);
}

/* wait until *p == want (the plugin notifies on every change) */
static void wait_i(const int32_t *p, int32_t want)
{
	uint64_t dl = DEADLINE;
	while (get_i(p) != want) {
		g_notified = false;
		CHECK_OK(loop_run_until(L, &g_notified, dl));
	}
}

static void wait_ge(const int32_t *p, int32_t want)
{
	uint64_t dl = DEADLINE;
	while (get_i(p) < want) {
		g_notified = false;
		CHECK_OK(loop_run_until(L, &g_notified, dl));
	}
}

/* ---- instances ---- */

struct inst {
	struct loader_plugin *lp;
	struct plugin_instance *pi;
	struct crashy_slot *slot;
	bool process;
	bool init_done;
	int init_err;
	char init_msg[512];
	int failed, recovered; /* on_failed / on_recovered counts */
	bool failed_flag, recovered_flag;
	uint64_t failed_at, recovered_at;
	char reason[512];
};

static void on_init(void *ud, int err, const char *msg)
{
	struct inst *in = ud;
	CHECK(!in->init_done); /* exactly once */
	in->init_done = true;
	in->init_err = err;
	snprintf(in->init_msg, sizeof(in->init_msg), "%s", msg);
}

static void on_failed(void *ud, const char *reason)
{
	struct inst *in = ud;
	/* strictly alternating, but for the final failure (runtime_instance.h) */
	CHECK(in->failed == in->recovered ||
	      plugin_instance_state(in->pi) == PLUGIN_INSTANCE_FAILED);
	in->failed++;
	in->failed_flag = true;
	in->failed_at = loop_now();
	snprintf(in->reason, sizeof(in->reason), "%s", reason);
	fprintf(stderr, "  on_failed: %s\n", reason);
	/* the owner deposes at once (what election_fail does to its driver) */
	plugin_instance_deposed(in->pi);
}

static void on_recovered(void *ud)
{
	struct inst *in = ud;
	CHECK(in->failed == in->recovered + 1);
	in->recovered++;
	in->recovered_flag = true;
	in->recovered_at = loop_now();
}

static void start(struct inst *in, uint32_t mode, int slot, const char *node,
		  uint32_t cb_timeout_ms, bool wait_init)
{
	char err[LOADER_ERR_MAX];
	memset(in, 0, sizeof(*in));
	in->slot = &S->slot[slot];
	in->process = mode == PLUGIN_ISOLATION_PROCESS;
	CHECK_OK(loader_open(g_dir, "crashy.so", g_private, &in->lp, err, sizeof(err)));
	struct plugin_instance_config cfg = {
	    .on_init = on_init,
	    .userdata = in,
	    .isolation = mode,
	    .callback_timeout_ms = cb_timeout_ms,
	    .on_failed = on_failed,
	    .on_recovered = on_recovered,
	    .worker_path = g_use_worker ? g_use_worker : g_worker,
	    .worker_stderr = g_stderr,
	};
	CHECK_OK(plugin_instance_new(in->lp, L, fakehost_driver_host(FH), node, &cfg, &in->pi));
	if (wait_init) {
		CHECK_OK(loop_run_until(L, &in->init_done, DEADLINE));
		if (in->init_err)
			fprintf(stderr, "init: %s\n", in->init_msg);
		CHECK_INT_EQ(in->init_err, 0);
		CHECK_INT_EQ(plugin_instance_state(in->pi), PLUGIN_INSTANCE_READY);
		check_line(in->slot, 0, "init");
	}
}

static void stop_and_free(struct inst *in)
{
	ifx_stop(L, in->pi);
	CHECK_INT_EQ(plugin_instance_worker_pid(in->pi), 0);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in->pi, &st);
	if (in->process && in->init_err == 0 && in->failed == in->recovered) {
		/* the child exited cleanly after fini (sanitizers: no leak report) */
		if (st.last_exit_status != 0)
			fprintf(stderr, "worker exit status 0x%x\n", (unsigned)st.last_exit_status);
		CHECK_INT_EQ(st.last_exit_status, 0);
	}
	plugin_instance_free(in->pi);
	in->pi = NULL;
}

static void reconcile_ok(struct inst *in)
{
	struct rdone a = {0};
	plugin_instance_reconcile(in->pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	if (a.err)
		fprintf(stderr, "reconcile: %d %s\n", a.err, a.msg);
	CHECK_INT_EQ(a.err, 0);
}

static const struct releases REL1 = {{1, 0, 0}, {1, 1, 0}, 7, 3};

/* elect - in leads: the fake host says this node leads, and in is elected
 * with token */
static void elect(struct inst *in, int64_t token)
{
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in->pi, token, &REL1);
}

/* start_pair - two process-isolated instances with cb_timeout_ms: a,
 * node-a in slot 0, and b, node-b in slot 1 (the one a test breaks and
 * the one beside it that must keep working); their slots into *ret_sa and
 * *ret_sb (may be NULL) */
static void start_pair(struct inst *a, struct inst *b, uint32_t cb_timeout_ms,
		       struct crashy_slot **ret_sa, struct crashy_slot **ret_sb)
{
	struct crashy_slot *sa = slot_reset(0, "node-a"), *sb = slot_reset(1, "node-b");
	start(a, PLUGIN_ISOLATION_PROCESS, 0, "node-a", cb_timeout_ms, true);
	start(b, PLUGIN_ISOLATION_PROCESS, 1, "node-b", cb_timeout_ms, true);
	*ret_sa = sa;
	if (ret_sb)
		*ret_sb = sb;
}

/* start_elected - node-a in slot 0 started in mode (no callback timeout),
 * elected with token and done handling it */
static void start_elected(struct inst *in, uint32_t mode, int64_t token)
{
	start(in, mode, 0, "node-a", 0, true);
	elect(in, token);
	ifx_drain(L, in->pi);
}
static const struct releases REL2 = {{1, 1, 0}, {1, 1, 0}, 9, 3};

static const char *mode_name(uint32_t mode)
{
	return mode == PLUGIN_ISOLATION_PROCESS ? "process" : "thread";
}

/* ---- driver-level behaviour, both modes ---- */

static void t_elected_replay_reconcile(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = slot_reset(0, "node-a");
	start(&in, mode, 0, "node-a", 0, true);
	if (mode == PLUGIN_ISOLATION_PROCESS) {
		CHECK(plugin_instance_worker_pid(in.pi) > 0);
		CHECK(plugin_instance_worker_pid(in.pi) != getpid());
		CHECK(strncmp(plugin_instance_bus_url(in.pi), "ipc://", 6) == 0);
		CHECK_INT_EQ(get_i(&s->last_pid), plugin_instance_worker_pid(in.pi));
		struct stat st;
		CHECK(stat(plugin_instance_bus_url(in.pi) + 6, &st) == 0);
		CHECK_INT_EQ(st.st_mode & 0777, 0600);
	} else {
		CHECK_INT_EQ(get_i(&s->last_pid), getpid());
	}
	fakehost_set_leading(FH, true);
	plugin_instance_driver_ops.elected(in.pi, 42, &REL1);
	ifx_drain(L, in.pi);
	check_line(s, 1, "elected 42 api_token=42");
	check_line(s, 2, "releases 1.0.0-1.1.0 rev=7 n=3");
	plugin_instance_releases_changed(in.pi, &REL2);
	ifx_drain(L, in.pi);
	check_line(s, 3, "releases 1.1.0-1.1.0 rev=9 n=3");
	reconcile_ok(&in);
	struct rdone b = {0};
	SET(s, reconcile_result, -EIO);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -EIO);
	CHECK_STR_EQ(b.msg, "reconcile failed on purpose");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.delivered, 6);
	CHECK_INT_EQ(st.reconciles_ok, 1);
	CHECK_INT_EQ(st.reconciles_failed, 1);
	CHECK_INT_EQ(st.bad_messages, 0);
	CHECK_INT_EQ(st.worker_failures, 0);
	stop_and_free(&in);
	/* on_deposed then fini, nothing else */
	CHECK_INT_EQ(get_i(&s->n), 8);
	check_line(s, 6, "deposed api_token=0");
	check_line(s, 7, "fini");
	CHECK_INT_EQ(in.failed, 0);
}

static void t_deposed_drops_queued(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = slot_reset(0, "node-a");
	start_elected(&in, mode, 11);
	SET(s, hold, 1);
	struct rdone a = {0}, b = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	wait_i(&s->in_reconcile, 1);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	plugin_instance_releases_changed(in.pi, &REL2);
	CHECK_INT_EQ(plugin_instance_pending(in.pi), 3);
	plugin_instance_deposed(in.pi);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -ECANCELED);
	CHECK(!a.done);
	SET(s, hold, 0);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, 0);
	ifx_drain(L, in.pi);
	CHECK_INT_EQ(get_i(&s->n), 5);
	check_line(s, 3, "reconcile");
	check_line(s, 4, "deposed api_token=0");
	stop_and_free(&in);
}

/* start_txn_run - the start of the txn tests: a fresh fake host (its
 * store empty), node-a in slot 0 started in mode and elected, and one
 * reconcile run in which the plugin writes the txns of txn_mode; returns
 * the slot, whose trace holds what the plugin saw */
static struct crashy_slot *start_txn_run(struct inst *in, uint32_t mode, int32_t txn_mode)
{
	struct crashy_slot *s = slot_reset(0, "node-a");
	fakehost_free(FH);
	CHECK_OK(fakehost_new(L, PREFIX, &FH));
	start(in, mode, 0, "node-a", 0, true);
	elect(in, 21);
	SET(s, txn_mode, txn_mode);
	reconcile_ok(in);
	return s;
}

static void t_txn_through_bus(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = start_txn_run(&in, mode, CRASHY_TXN_PUT_RANGE);
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "a/k"), "v1");
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "a/j"), "v2");
	check_line(s, 4, "txn1 succeeded=1 n=2");
	check_line(s, 5, "txn2 a/j=v2 a/k=v1");
	/* not leading any more: the txn is refused, the reconcile fails */
	fakehost_set_leading(FH, false);
	struct rdone b = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -ESTALE);
	fakehost_set_leading(FH, true);
	stop_and_free(&in);
}

static void t_init_failure(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = slot_reset(0, "node-a");
	SET(s, init_result, -EIO);
	start(&in, mode, 0, "node-a", 0, false);
	CHECK_OK(loop_run_until(L, &in.init_done, DEADLINE));
	CHECK_INT_EQ(in.init_err, -EIO);
	CHECK_STR_EQ(in.init_msg, "init failed: Input/output error: init refused by the test");
	CHECK_INT_EQ(plugin_instance_state(in.pi), PLUGIN_INSTANCE_FAILED);
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -EIO);
	stop_and_free(&in);
	CHECK_INT_EQ(get_i(&s->n), 1); /* no fini after a failed init */
	CHECK_INT_EQ(in.failed, 0);
}

static void t_free_without_stop_runs_fini(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = slot_reset(0, "node-a");
	start_elected(&in, mode, 7);
	plugin_instance_free(in.pi);
	CHECK_INT_EQ(get_i(&s->n), 5);
	check_line(s, 3, "deposed api_token=0");
	check_line(s, 4, "fini");
}

/* --callback-timeout: parsing (hostile: operator input) and precedence */
static void test_callback_timeout_rules(void)
{
	struct callback_timeout_rule r[8];
	uint32_t ms[PLUGIN_CALLBACKS];
	char err[200];
	static const char *const bad[] = {"", "=5s", "reconcile=", "reconcile=5x", "bogus=5s",
	                                  "Bad Name:reconcile=5s", ":reconcile=5s", "x:=5s",
	                                  "reconcile=-1s", "reconcile=0.1ms", "x:y:reconcile=1s",
	                                  "reconcile=99999999h"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		if (callback_timeout_parse(bad[i], &r[0], err, sizeof(err)) != -EINVAL) {
			fprintf(stderr, "accepted \"%s\"\n", bad[i]);
			exit(1);
		}
		CHECK(err[0] != 0);
	}
	/* defaults: reconcile 5 min, init 60 s, the notifications 15 s */
	callback_timeout_resolve(NULL, 0, "x", ms);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_RECONCILE], 300000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_INIT], 60000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_ON_ELECTED], 15000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_FINI], 15000);
	/* most specific wins, whatever the order */
	const char *const good[] = {"x:reconcile=7s", "x:all=3s", "reconcile=2m", "1s",
	                            "y:fini=none"};
	for (size_t i = 0; i < 5; i++)
		CHECK_OK(callback_timeout_parse(good[i], &r[i], err, sizeof(err)));
	callback_timeout_resolve(r, 5, "x", ms);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_RECONCILE], 7000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_INIT], 3000);
	callback_timeout_resolve(r, 5, "y", ms);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_RECONCILE], 120000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_INIT], 1000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_FINI], PLUGIN_TIMEOUT_NONE);
	/* within a level the last one wins */
	CHECK_OK(callback_timeout_parse("reconcile=9s", &r[5], err, sizeof(err)));
	callback_timeout_resolve(r, 6, "z", ms);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_RECONCILE], 9000);
	/* NAME:DUR: every kind of one plugin (a config file's per-plugin scalar) */
	CHECK_OK(callback_timeout_parse("z:4s", &r[6], err, sizeof(err)));
	callback_timeout_resolve(r, 7, "z", ms);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_FINI], 4000);
	CHECK_INT_EQ(ms[PLUGIN_CALLBACK_RECONCILE], 4000); /* this plugin beats every plugin */
}

/* plugin.h "Keys and values": the host refuses them (-EINVAL) with a
 * reason the plugin reads in last_error, nothing reaches the store, and
 * what the rules allow still goes through */
static void t_bad_keys_refused(uint32_t mode)
{
	static const char *const why[] = {
	    "starts with '/'",		     "holds a \".\" or \"..\" component",
	    "holds a \".\" or \"..\" component", "holds an empty component",
	    "holds a NUL byte",		     "longer than LH_KEY_MAX",
	    "empty (only a prefix",	     "prefix ending in byte 0xff",
	    "starts with '/'",		     "holds a \".\" or \"..\" component",
	    "larger than LH_VALUE_MAX",
	};
	struct inst in;
	struct crashy_slot *s = start_txn_run(&in, mode, CRASHY_TXN_BAD_KEYS);
	size_t n = sizeof(why) / sizeof(why[0]);
	for (size_t i = 0; i < n; i++) {
		char want[64];
		snprintf(want, sizeof(want), "refused %zu r=%d txn refused: ", i, -EINVAL);
		lock();
		char got[CRASHY_LINE];
		snprintf(got, sizeof(got), "%s", s->trace[4 + i]);
		unlock();
		if (strncmp(got, want, strlen(want)) != 0 || !strstr(got, why[i]))
			dump(s);
		CHECK(strncmp(got, want, strlen(want)) == 0);
		CHECK(strstr(got, why[i]) != NULL);
	}
	lock();
	CHECK(strstr(s->trace[4], "success op 0: key \"/demo/out/x\" starts with '/'") != NULL);
	CHECK(strstr(s->trace[12], "compare 0: key \"/x\"") != NULL);
	unlock();
	lock();
	CHECK(strncmp(s->trace[4 + n], "too big r=-7 txn of ", 20) == 0);
	CHECK(strstr(s->trace[4 + n], "split it") != NULL);
	unlock();
	check_line(s, (int)(4 + n + 1), "two r=0");
	for (size_t i = 0; i < 6; i++) {
		char want[32];
		snprintf(want, sizeof(want), "accepted %zu r=0", i);
		check_line(s, (int)(4 + n + 2 + i), want);
	}
	/* the refused ones never reached the store: only the accepted puts */
	CHECK(fakehost_get(FH, PREFIX "/demo/out/x") == NULL);
	CHECK(fakehost_get(FH, "/lh/crashy/data//demo/out/x") == NULL);
	CHECK(fakehost_get(FH, PREFIX "big") == NULL);
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "ok/a"), "v");
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "ok/c"), "v");
	CHECK(fakehost_get(FH, PREFIX "t/2") == NULL);
	CHECK_INT_EQ(fakehost_count(FH, PREFIX), 5); /* t/0 t/1 ok/a ok/c and the long key */
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

/* a failure without set_error names the callback and its return value:
 * nothing else (etcd, the host) is blamed */
static void t_failure_without_reason(uint32_t mode)
{
	struct inst in;
	struct crashy_slot *s = slot_reset(0, "node-a");
	start(&in, mode, 0, "node-a", 0, true);
	plugin_instance_elected(in.pi, 21, &REL1);
	SET(s, reconcile_result, -ENOENT);
	SET(s, no_reason, 1);
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -ENOENT);
	CHECK_STR_EQ(a.msg, "reconcile returned -ENOENT (no reason given)");
	plugin_instance_deposed(in.pi);
	stop_and_free(&in);
}

static void test_driver_both_modes(void)
{
	for (uint32_t mode = 0; mode <= PLUGIN_ISOLATION_PROCESS; mode++) {
		fprintf(stderr, "  mode %s\n", mode_name(mode));
		t_elected_replay_reconcile(mode);
		t_deposed_drops_queued(mode);
		t_txn_through_bus(mode);
		t_init_failure(mode);
		t_free_without_stop_runs_fini(mode);
		t_bad_keys_refused(mode);
		t_failure_without_reason(mode);
	}
}

/* ---- containment (process mode) ---- */

static void check_contains(const char *s, const char *sub)
{
	if (!strstr(s, sub))
		fprintf(stderr, "\"%s\" does not contain \"%s\"\n", s, sub);
	CHECK(strstr(s, sub) != NULL);
}

/* a crash of kind `crash` in reconcile with one reconcile queued behind it */
static void crash_in_reconcile(int32_t crash, const char *want1, const char *want2)
{
	struct inst a, b;
	struct crashy_slot *sa, *sb;
	start_pair(&a, &b, 0, &sa, &sb);
	elect(&a, 3);
	elect(&b, 4);
	ifx_drain(L, a.pi);
	pid_t pid1 = plugin_instance_worker_pid(a.pi);
	CHECK(pid1 > 0);

	SET(sa, crash, crash);
	struct rdone r1 = {0}, r2 = {0}, r3 = {0};
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r1);
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r2);
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE));
	/* the host survived; the reason says what happened and where */
	check_contains(a.reason, "plugin worker (pid ");
	check_contains(a.reason, want1);
	if (want2)
		check_contains(a.reason, want2);
	check_contains(a.reason, "during reconcile");
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_RECOVERING);
	/* both pending reconciles complete exactly once, with the error */
	CHECK_OK(loop_run_until(L, &r2.done, DEADLINE));
	CHECK(r1.done);
	CHECK_INT_EQ(r1.err, -EIO);
	CHECK_INT_EQ(r2.err, -EIO);
	CHECK(r1.order < r2.order);
	CHECK_STR_EQ(r1.msg, a.reason);
	/* while down: nothing is accepted, a drain completes at once */
	plugin_instance_elected(a.pi, 5, &REL1);
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r3);
	CHECK_OK(loop_run_until(L, &r3.done, DEADLINE));
	CHECK_INT_EQ(r3.err, -EIO);
	ifx_drain(L, a.pi);
	/* the healthy instance works throughout */
	reconcile_ok(&b);

	/* restarted after the backoff: a new process ran init again */
	SET(sa, crash, CRASHY_NONE);
	CHECK_OK(loop_run_until(L, &a.recovered_flag, DEADLINE));
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_READY);
	CHECK(a.recovered_at - a.failed_at >= 100 * LOOP_NS_PER_MS);
	pid_t pid2 = plugin_instance_worker_pid(a.pi);
	CHECK(pid2 > 0 && pid2 != pid1);
	CHECK_INT_EQ(get_i(&sa->inits), 2);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.worker_failures, 1);
	CHECK_INT_EQ(st.worker_restarts, 1);
	CHECK_INT_EQ(st.next_restart_ms, 100);
	CHECK_STR_EQ(st.last_failure, a.reason);
	/* a new term works on the new worker */
	plugin_instance_elected(a.pi, 6, &REL2);
	reconcile_ok(&a);
	reconcile_ok(&b);
	stop_and_free(&a);
	stop_and_free(&b);
	CHECK_INT_EQ(a.failed, 1);
	CHECK_INT_EQ(a.recovered, 1);
	CHECK_INT_EQ(b.failed, 0);
	(void)sb;
}

static void test_process_segfault_in_reconcile_contained(void)
{
	/* (sanitizer builds: main() told the children's ASan to leave SIGSEGV
	 * alone, so the real signal is seen) */
	crash_in_reconcile(CRASHY_SEGV, "was killed by signal 11 (SIGSEGV)", NULL);
}

static void test_process_abort_in_reconcile_contained(void)
{
	crash_in_reconcile(CRASHY_ABORT, "was killed by signal 6 (SIGABRT)", NULL);
}

static void test_process_exit_in_reconcile_contained(void)
{
	crash_in_reconcile(CRASHY_EXIT, "exited with status 3", NULL);
}

static void test_process_hang_past_timeout_killed(void)
{
	struct inst a, b;
	struct crashy_slot *sa;
	start_pair(&a, &b, 300, &sa, NULL);
	elect(&a, 3);
	elect(&b, 3);
	ifx_drain(L, a.pi);
	SET(sa, hold, 1);
	struct rdone r1 = {0};
	uint64_t t0 = loop_now();
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r1);
	wait_i(&sa->in_reconcile, 1);
	reconcile_ok(&b); /* the loop is not blocked */
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE));
	CHECK(loop_now() - t0 >= 300 * LOOP_NS_PER_MS);
	check_contains(a.reason, "callback reconcile exceeded its timeout of 300 ms (running for ");
	check_contains(a.reason, " ms): plugin worker (pid ");
	check_contains(a.reason, ") killed");
	CHECK_OK(loop_run_until(L, &r1.done, DEADLINE));
	CHECK_INT_EQ(r1.err, -EIO);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.callback_timeouts, 1);
	SET(sa, hold, 0);
	SET(sa, in_reconcile, 0);
	CHECK_OK(loop_run_until(L, &a.recovered_flag, DEADLINE));
	plugin_instance_get_stats(a.pi, &st);
	CHECK(WIFSIGNALED(st.last_exit_status) && WTERMSIG(st.last_exit_status) == SIGKILL);
	plugin_instance_elected(a.pi, 4, &REL1);
	reconcile_ok(&a);
	stop_and_free(&a);
	stop_and_free(&b);
}

static void test_process_restart_backoff_grows(void)
{
	struct inst a, b;
	struct crashy_slot *sa;
	start_pair(&a, &b, 0, &sa, NULL);
	elect(&b, 3);
	/* every restarted worker dies in init: 4 failed restarts, the 5th works */
	SET(sa, crash_max_inits, 5);
	SET(sa, crash_in, CRASHY_IN_INIT);
	SET(sa, crash, CRASHY_ABORT);
	kill(plugin_instance_worker_pid(a.pi), SIGKILL);
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE));
	check_contains(a.reason, "was killed by signal 9 (SIGKILL) outside any callback");
	for (int k = 2; k <= 5; k++) {
		wait_ge(&sa->inits, k);
		reconcile_ok(&b); /* the healthy one keeps working */
	}
	CHECK_OK(loop_run_until(L, &a.recovered_flag, DEADLINE));
	CHECK_INT_EQ(a.failed, 1); /* one outage, one report */
	lock();
	int n = sa->inits;
	int64_t t[CRASHY_MAX_INITS];
	memcpy(t, sa->init_ns, sizeof(t));
	unlock();
	CHECK_INT_EQ(n, 6);
	/* inits 2..6: the restarts; gaps between them follow the backoff
	 * 200, 400, 800, 1600 ms (the first restart came after 100 ms) */
	int64_t prev_gap = 0;
	for (int k = 2; k < 6; k++) {
		int64_t gap = t[k] - t[k - 1];
		int64_t want = (int64_t)(100u << (k - 1)) * (int64_t)LOOP_NS_PER_MS;
		fprintf(stderr, "  restart %d: %.0f ms after the previous one (backoff %lld ms)\n",
			k, (double)gap / 1e6, (long long)(want / (int64_t)LOOP_NS_PER_MS));
		CHECK(gap >= want);
		CHECK(gap > prev_gap);
		prev_gap = gap;
	}
	CHECK(t[1] - (int64_t)a.failed_at >= 100 * (int64_t)LOOP_NS_PER_MS);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.worker_restarts, 5);
	CHECK_INT_EQ(st.worker_failures, 5);
	CHECK_INT_EQ(st.next_restart_ms, 1600);
	check_contains(st.last_failure, "during init");
	stop_and_free(&a);
	stop_and_free(&b);
}

static void test_process_crash_in_first_init_fails_instance(void)
{
	struct inst a;
	struct crashy_slot *sa = slot_reset(0, "node-a");
	SET(sa, crash_in, CRASHY_IN_INIT);
	SET(sa, crash, CRASHY_EXIT);
	start(&a, PLUGIN_ISOLATION_PROCESS, 0, "node-a", 0, false);
	CHECK_OK(loop_run_until(L, &a.init_done, DEADLINE));
	CHECK_INT_EQ(a.init_err, -EIO);
	check_contains(a.init_msg, "init failed: plugin worker (pid ");
	check_contains(a.init_msg, "exited with status 3 during init");
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_FAILED);
	CHECK_INT_EQ(a.failed, 0);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.worker_restarts, 0);
	stop_and_free(&a);
	CHECK_INT_EQ(get_i(&sa->inits), 1);
}

/* check_old_worker_refused - instance a refused the old worker (bus version 0):
 * text holds head, the refusal naming both bus versions, then tail, and a
 * is FAILED */
static void check_old_worker_refused(const struct inst *a, const char *text, const char *head,
				     const char *tail)
{
	char want[320];
	snprintf(want, sizeof(want), "%sthe plugin worker speaks bus version 0, this host %u%s",
		 head, LH_BUS_VERSION, tail);
	check_contains(text, want);
	CHECK_INT_EQ(plugin_instance_state(a->pi), PLUGIN_INSTANCE_FAILED);
}

/* a leasehold-worker of another release (`--worker`, a package skew) is
 * refused at INIT with a clear reason, before it is handed anything it
 * could misread */
static void test_process_worker_of_another_release_refused(void)
{
	struct inst a;
	slot_reset(0, "node-a");
	g_use_worker = g_oldworker;
	start(&a, PLUGIN_ISOLATION_PROCESS, 0, "node-a", 0, false);
	g_use_worker = NULL;
	CHECK_OK(loop_run_until(L, &a.init_done, DEADLINE));
	CHECK_INT_EQ(a.init_err, -EPROTO);
	check_old_worker_refused(&a, a.init_msg, "",
				 " (leasehold-worker and leasehold must come from the same release)");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.worker_restarts, 0);
	stop_and_free(&a);
}

/* the worker program replaced under a running host (a package upgrade):
 * the worker restarted after a crash is of another release. That is final:
 * the instance is FAILED for good, on_failed comes once more with the
 * reason, and no restart follows. */
static void test_process_restart_into_another_release_is_final(void)
{
	char wrapper[PATH_MAX], flag[PATH_MAX];
	snprintf(flag, sizeof(flag), "%s/worker-replaced", g_root);
	snprintf(wrapper, sizeof(wrapper), "%s/worker-wrapper.sh", g_root);
	FILE *f = fopen(wrapper, "w");
	CHECK(f);
	/* the first start runs the real worker, every later one the old one */
	fprintf(f, "#!/bin/sh\nif [ -e '%s' ]; then exec '%s' \"$@\"; fi\n: > '%s'\nexec '%s' \"$@\"\n",
		flag, g_oldworker, flag, g_worker);
	CHECK(fclose(f) == 0);
	CHECK(chmod(wrapper, 0755) == 0);
	struct inst a;
	struct crashy_slot *sa = slot_reset(0, "node-a");
	g_use_worker = wrapper;
	start(&a, PLUGIN_ISOLATION_PROCESS, 0, "node-a", 0, true);
	g_use_worker = NULL;
	elect(&a, 3);
	SET(sa, crash, CRASHY_SEGV);
	struct rdone r1 = {0};
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r1);
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE)); /* the crash */
	CHECK_INT_EQ(a.failed, 1);
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_RECOVERING);
	a.failed_flag = false;
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE)); /* the restart, refused */
	CHECK_INT_EQ(a.failed, 2);
	check_old_worker_refused(&a, a.reason, "init failed after a restart: Protocol error: ", "");
	/* nothing more: a restart would have come after 200 ms */
	bool never = false;
	CHECK(loop_run_until(L, &never, loop_now() + 600 * LOOP_NS_PER_MS) == -ETIMEDOUT);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.worker_restarts, 1);
	CHECK_INT_EQ(a.recovered, 0);
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_FAILED);
	CHECK(r1.done && r1.err == -EIO);
	stop_and_free(&a);
}

static void test_process_stop_while_restarting(void)
{
	struct inst a;
	struct crashy_slot *sa = slot_reset(0, "node-a");
	start(&a, PLUGIN_ISOLATION_PROCESS, 0, "node-a", 0, true);
	elect(&a, 3);
	SET(sa, crash, CRASHY_SEGV);
	struct rdone r1 = {0};
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r1);
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE));
	CHECK_OK(loop_run_until(L, &r1.done, DEADLINE));
	stop_and_free(&a); /* the pending restart is cancelled */
	CHECK_INT_EQ(a.recovered, 0);
	CHECK_INT_EQ(get_i(&sa->inits), 1);
}

static void test_process_bad_worker_path(void)
{
	char err[LOADER_ERR_MAX];
	struct loader_plugin *lp;
	slot_reset(0, "node-a");
	CHECK_OK(loader_open(g_dir, "crashy.so", g_private, &lp, err, sizeof(err)));
	struct plugin_instance_config cfg = {.isolation = PLUGIN_ISOLATION_PROCESS,
					     .worker_path = "/nonexistent/leasehold-worker"};
	struct plugin_instance *pi = (struct plugin_instance *)(uintptr_t)0x1;
	CHECK_INT_EQ(plugin_instance_new(lp, L, fakehost_driver_host(FH), "node-a", &cfg, &pi),
		     -ENOENT);
	CHECK(pi == (struct plugin_instance *)(uintptr_t)0x1);
	cfg.isolation = 7;
	CHECK_INT_EQ(plugin_instance_new(lp, L, fakehost_driver_host(FH), "node-a", &cfg, &pi),
		     -EINVAL);
	loader_close(lp);
	uint32_t m = 9;
	CHECK_OK(plugin_instance_parse_isolation("process", &m));
	CHECK_INT_EQ(m, PLUGIN_ISOLATION_PROCESS);
	CHECK_OK(plugin_instance_parse_isolation("thread", &m));
	CHECK_INT_EQ(m, PLUGIN_ISOLATION_THREAD);
	CHECK_INT_EQ(plugin_instance_parse_isolation("fork", &m), -EINVAL);
}

/* ---- thread mode: a hang is reported, the instance resumes ---- */

static void test_thread_hang_reported_then_resumes(void)
{
	struct inst a;
	struct crashy_slot *sa = slot_reset(0, "node-a");
	start(&a, PLUGIN_ISOLATION_THREAD, 0, "node-a", 200, true);
	elect(&a, 3);
	ifx_drain(L, a.pi);
	SET(sa, hold, 1);
	struct rdone r1 = {0}, r2 = {0}, r3 = {0};
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r1);
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r2);
	wait_i(&sa->in_reconcile, 1);
	CHECK_OK(loop_run_until(L, &a.failed_flag, DEADLINE));
	check_contains(a.reason, "callback reconcile exceeded its timeout of 200 ms (running for ");
	check_contains(a.reason, "thread isolation: it cannot be stopped, the plugin stays failed "
				 "until it returns)");
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_RECOVERING);
	/* the owner deposed in on_failed: the queued one was dropped */
	CHECK_OK(loop_run_until(L, &r2.done, DEADLINE));
	CHECK_INT_EQ(r2.err, -ECANCELED);
	plugin_instance_reconcile(a.pi, ifx_on_reconciled, &r3);
	CHECK_OK(loop_run_until(L, &r3.done, DEADLINE));
	CHECK_INT_EQ(r3.err, -EIO);
	CHECK(!r1.done);
	/* the callback returns: its own result, then on_deposed, and recovery */
	SET(sa, hold, 0);
	CHECK_OK(loop_run_until(L, &a.recovered_flag, DEADLINE));
	CHECK(r1.done);
	CHECK_INT_EQ(r1.err, 0);
	ifx_drain(L, a.pi);
	CHECK_INT_EQ(plugin_instance_state(a.pi), PLUGIN_INSTANCE_READY);
	check_line(sa, 4, "deposed api_token=0");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(a.pi, &st);
	CHECK_INT_EQ(st.callback_timeouts, 1);
	CHECK_INT_EQ(st.worker_failures, 1);
	plugin_instance_elected(a.pi, 4, &REL2);
	reconcile_ok(&a);
	stop_and_free(&a);
	CHECK_INT_EQ(a.failed, 1);
	CHECK_INT_EQ(a.recovered, 1);
}

/* ---- setup ---- */

static void install_plugin(void)
{
	char src[PATH_MAX], dst[PATH_MAX];
	snprintf(src, sizeof(src), "%s/tests/plugins/.libs/crashy.so", g_build);
	snprintf(dst, sizeof(dst), "%s/crashy.so", g_dir);
	test_copy_file(src, dst, 0644);
}

static void make_shm(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/crashy.shm", g_root);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, sizeof(struct crashy_shm)) == 0);
	void *m = mmap(NULL, sizeof(struct crashy_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	S = m;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	CHECK(pthread_mutex_init(&S->mu, &ma) == 0);
	pthread_mutexattr_destroy(&ma);
	CHECK(setenv(CRASHY_ENV_SHM, path, 1) == 0);

	snprintf(path, sizeof(path), "%s/crashy.fifo", g_root);
	CHECK(mkfifo(path, 0600) == 0);
	/* O_RDWR: never blocks, never sees EOF when a writer dies */
	g_fifo = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	CHECK(g_fifo >= 0);
	CHECK(setenv(CRASHY_ENV_FIFO, path, 1) == 0);
}

int main(void)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(g_build, sizeof(g_build), "%s", b && *b ? b : ".");
	snprintf(g_worker, sizeof(g_worker), "%s/leasehold-worker", g_build);
	snprintf(g_oldworker, sizeof(g_oldworker), "%s/tests/oldworker", g_build);
	if (access(g_worker, X_OK) < 0) {
		fprintf(stderr, "no %s (run through make check)\n", g_worker);
		return 99;
	}
	/* Sanitizer builds: the worker children inherit this environment. Their
	 * ASan would turn a SIGSEGV into a report and exit(1); let the real
	 * signal through so the test sees what a production build sees. (This
	 * process read its options at startup: it is not affected.) */
	const char *asan = getenv("ASAN_OPTIONS");
	char opts[1024];
	snprintf(opts, sizeof(opts), "%s%shandle_segv=0", asan ? asan : "",
		 asan && *asan ? ":" : "");
	CHECK(setenv("ASAN_OPTIONS", opts, 1) == 0);
	test_tmp_root("test-iso", g_root, sizeof(g_root));
	snprintf(g_dir, sizeof(g_dir), "%s/plugins", g_root);
	snprintf(g_private, sizeof(g_private), "%s/private", g_root);
	/* the crash tests' children print sanitizer reports: keep them apart */
	snprintf(g_stderr, sizeof(g_stderr), "%s/worker.log", g_root);
	CHECK(mkdir(g_dir, 0755) == 0);
	char err[LOADER_ERR_MAX];
	CHECK_OK(loader_private_dir_prepare(g_private, err, sizeof(err)));
	install_plugin();
	make_shm();

	CHECK_OK(loop_new(&L));
	CHECK_OK(fakehost_new(L, PREFIX, &FH));
	CHECK_OK(loop_io_add(L, g_fifo, EPOLLIN, on_notify, NULL, &g_fio));

	RUN(test_callback_timeout_rules);
	RUN(test_driver_both_modes);
	RUN(test_process_segfault_in_reconcile_contained);
	RUN(test_process_abort_in_reconcile_contained);
	RUN(test_process_exit_in_reconcile_contained);
	RUN(test_process_hang_past_timeout_killed);
	RUN(test_process_restart_backoff_grows);
	RUN(test_process_crash_in_first_init_fails_instance);
	RUN(test_process_worker_of_another_release_refused);
	RUN(test_process_restart_into_another_release_is_final);
	RUN(test_process_stop_while_restarting);
	RUN(test_process_bad_worker_path);
	RUN(test_thread_hang_reported_then_resumes);

	loop_io_free(g_fio);
	close(g_fifo);
	fakehost_free(FH);
	loop_free(L);
	munmap(S, sizeof(*S));
	/* bus sockets still closing on the closer thread */
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return CHECK_EXIT();
}
