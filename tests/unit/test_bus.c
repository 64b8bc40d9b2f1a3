/* SPDX-License-Identifier: MIT */
/*
 * test_bus.c - a plugin instance (worker thread + nng pair1 bus + protobuf-c)
 * driving the real "recorder" test plugin, with a fake driver_host answering
 * fenced txns from memory. No etcd; no sleeps: every wait is on an event
 * (loop_run_until) with a deadline.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "check.h"
#include "instance_fixture.h"
#include "files.h"
#include "fakehost.h"
#include "abi/abi_loader.h"
#include "abi/abi_bus.h"
#include "abi/abi_config_doc.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance_internal.h"
#include "proto/bus.pb-c.h"
#include "recorder.h"
#include "worker/worker.h"

#define PREFIX "/lh/recorder/data/"
#define DEADLINE (loop_now() + 10 * LOOP_NS_PER_S)

static struct loop *L;
static struct fakehost *FH;
static struct ifx_dirs D; /* the temp root, its plugin and private dirs */
static int g_efd = -1;
static struct loop_io *g_eio;
static bool g_notified;

/* ---- helpers ---- */

static void on_notify(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	uint64_t v;
	(void)io;
	(void)events;
	(void)ud;
	while (read(fd, &v, sizeof(v)) > 0)
		;
	g_notified = true;
}

struct inst {
	struct loader_plugin *lp; /* borrowed once pi owns it */
	struct plugin_instance *pi;
	struct recorder *rec;
	bool init_done;
	int init_err;
	char init_msg[512];
};

static void on_init(void *ud, int err, const char *msg)
{
	struct inst *in = ud;
	in->init_done = true;
	in->init_err = err;
	snprintf(in->init_msg, sizeof(in->init_msg), "%s", msg);
}

static int rec_count(struct recorder *rec)
{
	pthread_mutex_lock(&rec->mu);
	int n = rec->n;
	pthread_mutex_unlock(&rec->mu);
	return n;
}

static void rec_line(struct recorder *rec, int i, char *out, size_t len)
{
	pthread_mutex_lock(&rec->mu);
	snprintf(out, len, "%s", i < rec->n ? rec->trace[i] : "(none)");
	pthread_mutex_unlock(&rec->mu);
}

static void dump(struct recorder *rec)
{
	pthread_mutex_lock(&rec->mu);
	for (int i = 0; i < rec->n; i++)
		fprintf(stderr, "  trace[%d] %s\n", i, rec->trace[i]);
	pthread_mutex_unlock(&rec->mu);
}

static void check_line(struct recorder *rec, int i, const char *want)
{
	char got[RECORDER_LINE];
	rec_line(rec, i, got, sizeof(got));
	if (strcmp(got, want) != 0)
		dump(rec);
	CHECK_STR_EQ(got, want);
}

/* check_trace - the whole trace is want (NULL-terminated), line by line; a
 * "" entry stands for a line that is not compared */
static void check_trace(struct recorder *rec, const char *const *want)
{
	int n = 0;
	for (; want[n]; n++)
		if (*want[n])
			check_line(rec, n, want[n]);
	if (rec_count(rec) != n)
		dump(rec);
	CHECK_INT_EQ(rec_count(rec), n);
}

static void wait_in_reconcile(struct recorder *rec, int want)
{
	uint64_t dl = DEADLINE;
	for (;;) {
		pthread_mutex_lock(&rec->mu);
		int v = rec->in_reconcile;
		pthread_mutex_unlock(&rec->mu);
		if (v == want)
			return;
		g_notified = false;
		CHECK_OK(loop_run_until(L, &g_notified, dl));
	}
}

static void set_hold(struct recorder *rec, int hold)
{
	pthread_mutex_lock(&rec->mu);
	rec->hold = hold;
	pthread_cond_broadcast(&rec->cv);
	pthread_mutex_unlock(&rec->mu);
}

static void set_result(struct recorder *rec, int32_t r, const char *msg, int txn_mode)
{
	pthread_mutex_lock(&rec->mu);
	rec->reconcile_result = r;
	snprintf(rec->reconcile_msg, sizeof(rec->reconcile_msg), "%s", msg ? msg : "");
	rec->txn_mode = txn_mode;
	pthread_mutex_unlock(&rec->mu);
}

static void install_recorder(void)
{
	ifx_install(&D, "recorder.so");
}

/* load the recorder, start an instance, wait for init */
static void start(struct inst *in, int32_t init_result, bool wait_init)
{
	char err[LOADER_ERR_MAX];
	memset(in, 0, sizeof(*in));
	CHECK_OK(loader_open(D.plugins, "recorder.so", D.private_dir, &in->lp, err, sizeof(err)));
	recorder_get_fn get = (recorder_get_fn)dlsym(in->lp->handle, "recorder_get");
	CHECK(get);
	in->rec = get();
	in->rec->notify_fd = g_efd;
	in->rec->init_result = init_result;
	struct plugin_instance_config cfg = {.on_init = on_init, .userdata = in};
	CHECK_OK(plugin_instance_new(in->lp, L, fakehost_driver_host(FH), "node-a", &cfg, &in->pi));
	CHECK_STR_EQ(plugin_instance_plugin(in->pi)->name, "recorder");
	if (wait_init) {
		CHECK_OK(loop_run_until(L, &in->init_done, DEADLINE));
		CHECK_INT_EQ(in->init_err, 0);
		CHECK_INT_EQ(plugin_instance_state(in->pi), PLUGIN_INSTANCE_READY);
		check_line(in->rec, 0, "init");
	}
}

static void stop_and_free(struct inst *in)
{
	ifx_stop(L, in->pi);
	plugin_instance_free(in->pi);
	in->pi = NULL;
}

static const struct releases REL1 = {{1, 0, 0}, {1, 1, 0}, 7, 3};
static const struct releases REL2 = {{1, 1, 0}, {1, 1, 0}, 9, 3};

/* ---- tests ---- */

static void test_elected_then_replay_in_order(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	/* through the driver_ops table, as election.c will call it */
	plugin_instance_driver_ops.elected(in.pi, 42, &REL1);
	ifx_drain(L, in.pi);
	check_trace(in.rec, (const char *const[]){"", "elected 42 api_token=42",
						  "releases 1.0.0-1.1.0 rev=7 n=3", NULL});
	plugin_instance_driver_ops.releases_changed(in.pi, &REL2);
	ifx_drain(L, in.pi);
	check_line(in.rec, 3, "releases 1.1.0-1.1.0 rev=9 n=3");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.delivered, 4); /* init, elected, replay, releases */
	CHECK_INT_EQ(st.queued, 0);
	CHECK_INT_EQ(st.in_flight, 0);
	CHECK_INT_EQ(st.bad_messages, 0);
	/* stop: on_deposed then fini, nothing else */
	stop_and_free(&in);
}

static void test_reconcile_success_and_failure(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 5, &REL1);
	struct rdone a = {0}, b = {0};
	plugin_instance_driver_ops.reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK(!a.done);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, 0);
	CHECK_STR_EQ(a.msg, "");
	set_result(in.rec, -EIO, "boom", RECORDER_TXN_NONE);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -EIO);
	CHECK_STR_EQ(b.msg, "boom");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.reconciles_ok, 1);
	CHECK_INT_EQ(st.reconciles_failed, 1);
	CHECK_INT_EQ(st.last_err, -EIO);
	CHECK_STR_EQ(st.last_error, "boom");
	stop_and_free(&in);
}

static void test_deposed_drops_queued_events(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 11, &REL1);
	ifx_drain(L, in.pi);
	set_hold(in.rec, 1);
	struct rdone a = {0}, b = {0}, c = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	wait_in_reconcile(in.rec, 1);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	plugin_instance_releases_changed(in.pi, &REL2);

	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 1);
	CHECK_INT_EQ(st.queued, 2);
	CHECK_INT_EQ(plugin_instance_pending(in.pi), 3);
	CHECK(st.callback_since_ns != 0);

	plugin_instance_driver_ops.deposed(in.pi);
	CHECK(!b.done); /* completions never run inside the call */
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -ECANCELED);
	CHECK_STR_EQ(b.msg, "dropped: leadership was lost before it ran");
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 2);
	CHECK_INT_EQ(st.queued, 0);
	CHECK_INT_EQ(st.in_flight, 2); /* on_deposed went behind the running reconcile */
	CHECK_INT_EQ(st.reconciles_cancelled, 1);

	/* not leading: nothing new gets in */
	plugin_instance_releases_changed(in.pi, &REL2);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &c);
	CHECK_OK(loop_run_until(L, &c.done, DEADLINE));
	CHECK_INT_EQ(c.err, -ECANCELED);
	CHECK_STR_EQ(c.msg, "not leading");
	CHECK(!a.done); /* the running one finishes... */
	set_hold(in.rec, 0);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, 0);
	ifx_drain(L, in.pi);
	/* init, elected, replay, reconcile (held), deposed - nothing else */
	check_trace(in.rec,
		    (const char *const[]){"", "", "", "reconcile", "deposed api_token=0", NULL});
	stop_and_free(&in);
}

static void test_deposed_before_elected_delivered(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 1, &REL1);
	set_hold(in.rec, 1);
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	wait_in_reconcile(in.rec, 1);
	plugin_instance_deposed(in.pi);    /* queues on_deposed (term 1 was delivered) */
	plugin_instance_elected(in.pi, 2, &REL2); /* queued behind it */
	plugin_instance_deposed(in.pi);    /* term 2 never reached the plugin */
	set_hold(in.rec, 0);
	ifx_drain(L, in.pi);
	CHECK(a.done && a.err == 0);
	/* init, elected 1, replay, reconcile, deposed: no elected 2, no 2nd deposed */
	check_trace(in.rec, (const char *const[]){"", "elected 1 api_token=1", "", "",
						  "deposed api_token=0", NULL});
	/* a new term is delivered normally */
	plugin_instance_elected(in.pi, 3, &REL2);
	ifx_drain(L, in.pi);
	check_line(in.rec, 5, "elected 3 api_token=3");
	check_line(in.rec, 6, "releases 1.1.0-1.1.0 rev=9 n=3");
	stop_and_free(&in);
}

static void on_tick(struct loop_timer *t, void *ud)
{
	(void)t;
	*(bool *)ud = true;
}

static void test_drain_waits_for_slow_reconcile_loop_keeps_running(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 8, &REL1);
	set_hold(in.rec, 1);
	struct rdone a = {0};
	struct ddone d = {false, 0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	wait_in_reconcile(in.rec, 1);
	plugin_instance_drain(in.pi, ifx_on_drained, &d);

	/* the loop is not blocked by the running reconcile: timers fire */
	struct loop_timer *t;
	bool ticked = false;
	CHECK_OK(loop_timer_new(L, on_tick, &ticked, &t));
	for (int i = 0; i < 3; i++) {
		ticked = false;
		loop_timer_arm_in(t, 20 * LOOP_NS_PER_MS);
		CHECK_OK(loop_run_until(L, &ticked, DEADLINE));
		CHECK(!d.done);
		CHECK(!a.done);
	}
	loop_timer_free(t);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 1);

	set_hold(in.rec, 0);
	CHECK_OK(loop_run_until(L, &d.done, DEADLINE));
	CHECK(a.done);
	CHECK(a.order < d.order); /* the reconcile completed before the drain */
	/* draining an idle instance completes on the next iteration */
	ifx_drain(L, in.pi);
	stop_and_free(&in);
}

static void test_txn_through_bus_prefix_and_strip(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 21, &REL1);
	set_result(in.rec, 0, NULL, RECORDER_TXN_PUT_RANGE);
	struct rdone a = {0}, b = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, 0);
	/* the plugin wrote relative keys; the store has full keys */
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "a/k"), "v1");
	CHECK_STR_EQ(fakehost_get(FH, PREFIX "a/j"), "v2");
	CHECK(fakehost_get(FH, "a/k") == NULL);
	check_line(in.rec, 3, "reconcile");
	check_line(in.rec, 4, "txn1 succeeded=1 n=2 [t1] [t1]");
	/* the range came back with the prefix stripped */
	check_line(in.rec, 5, "txn2 succeeded=1 n=1 [t0 a/j=v2 a/k=v1]");
	check_line(in.rec, 6, "txn3 r=-22"); /* unknown op type: -EINVAL in the worker */
	/* again: the compare fails now, the failure branch runs */
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	check_line(in.rec, 8, "txn1 succeeded=0 n=1 [t0 a/k=v1]");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.txns, 4);
	CHECK_INT_EQ(st.txn_errors, 0);
	stop_and_free(&in);
}

static void test_txn_errors_reach_the_plugin(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 22, &REL1);
	set_result(in.rec, 0, NULL, RECORDER_TXN_PUT_RANGE);

	/* the election says: not leading */
	fakehost_set_leading(FH, false);
	struct rdone a = {0}, b = {0}, c = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -ESTALE);
	check_line(in.rec, 4, "txn1 err=-116 msg=txn refused: not leading: the election refused the txn");
	CHECK_STR_EQ(a.msg, "txn refused: not leading: the election refused the txn");

	/* etcd timed out */
	fakehost_set_leading(FH, true);
	fakehost_fail_next(FH, -ETIMEDOUT);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK_INT_EQ(b.err, -ETIMEDOUT);
	check_line(in.rec, 6, "txn1 err=-110 msg=etcd: deadline passed, outcome unknown");

	/* the host deposed the instance while the callback ran */
	set_hold(in.rec, 1);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &c);
	wait_in_reconcile(in.rec, 1);
	plugin_instance_deposed(in.pi);
	set_hold(in.rec, 0);
	CHECK_OK(loop_run_until(L, &c.done, DEADLINE));
	CHECK_INT_EQ(c.err, -ESTALE);
	check_line(in.rec, 8,
	           "txn1 err=-116 msg=not leading: this node does not hold the plugin's election, txn refused");
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.txn_errors, 3);
	stop_and_free(&in);
}

static void test_context_log_and_outside_thread(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 0x1234, &REL1);
	set_result(in.rec, 0, NULL, RECORDER_TXN_CONTEXT);
	struct rdone a = {0}, b = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	check_line(in.rec, 4, "ctx token=4660 node=node-a prefix=" PREFIX " has_txn=1");
	/* the log line travels the bus (one-way) before the ack */
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.log_messages, 1);
	/* the host API refuses calls from a thread of the plugin */
	set_result(in.rec, 0, NULL, RECORDER_TXN_OUTSIDE);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	check_line(in.rec, 6, "outside txn r=-1"); /* -EPERM */
	stop_and_free(&in);
}

static uint32_t g_rand = 12345;
static uint32_t rnd(void)
{
	g_rand = g_rand * 1103515245u + 12345u;
	return g_rand >> 8;
}

static void test_hostile_bus_bytes(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 3, &REL1);
	ifx_drain(L, in.pi);
	struct plugin_instance_stats st0, st;
	plugin_instance_get_stats(in.pi, &st0);

	/* random garbage, host side */
	uint8_t buf[512];
	int rejected = 0;
	for (int i = 0; i < 2000; i++) {
		size_t n = rnd() % sizeof(buf);
		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)rnd();
		if (plugin_instance_inject_from_worker(in.pi, buf, n) < 0)
			rejected++;
	}
	CHECK(rejected > 1000);

	/* every truncation of a valid ack for a wrong sequence number */
	Leasehold__Bus__EventDone done = LEASEHOLD__BUS__EVENT_DONE__INIT;
	done.seq = 999;
	done.err = -5;
	done.message.data = (uint8_t *)"forged";
	done.message.len = 6;
	Leasehold__Bus__ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_DONE;
	th.done = &done;
	size_t len = leasehold__bus__to_host__pack(&th, buf);
	CHECK_INT_EQ(plugin_instance_inject_from_worker(in.pi, buf, len), -EPROTO);
	for (size_t cut = 0; cut < len; cut++)
		(void)plugin_instance_inject_from_worker(in.pi, buf, cut);
	/* an empty message: decodes, but carries nothing */
	CHECK_INT_EQ(plugin_instance_inject_from_worker(in.pi, "", 0), -EPROTO);
	/* a log with an absurd level is clamped, not trusted */
	Leasehold__Bus__Log lg = LEASEHOLD__BUS__LOG__INIT;
	lg.level = 0xffffffffu;
	lg.message.data = (uint8_t *)"odd\nlevel";
	lg.message.len = 9;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_LOG;
	th.log = &lg;
	len = leasehold__bus__to_host__pack(&th, buf);
	CHECK_OK(plugin_instance_inject_from_worker(in.pi, buf, len));

	plugin_instance_get_stats(in.pi, &st);
	CHECK(st.bad_messages >= st0.bad_messages + (uint64_t)rejected);
	CHECK_INT_EQ(st.delivered, st0.delivered); /* nothing was taken as an ack */

	/* garbage to the worker: it reports it and carries on */
	CHECK_OK(plugin_instance_send_raw_to_worker(in.pi, "\xff\xff\xff\xff", 4));
	/* a txn reply nobody asked for */
	Leasehold__Bus__TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = 777;
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	len = leasehold__bus__to_worker__pack(&tw, buf);
	CHECK_OK(plugin_instance_send_raw_to_worker(in.pi, buf, len));
	uint64_t dl = DEADLINE;
	for (;;) {
		plugin_instance_get_stats(in.pi, &st);
		if (st.worker_rejected >= 2)
			break;
		CHECK(loop_now() < dl);
		loop_run_once(L, 50); /* woken by the worker's message */
	}
	CHECK_INT_EQ(st.worker_rejected, 2);

	/* still fully working */
	struct rdone a = {0};
	set_result(in.rec, 0, NULL, RECORDER_TXN_NONE);
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, 0);
	stop_and_free(&in);
}

static void test_in_flight_count(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 4, &REL1);
	ifx_drain(L, in.pi);
	CHECK_INT_EQ(plugin_instance_pending(in.pi), 0);
	set_hold(in.rec, 1);
	struct rdone r[4];
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 4; i++)
		plugin_instance_reconcile(in.pi, ifx_on_reconciled, &r[i]);
	wait_in_reconcile(in.rec, 1);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 1);
	CHECK_INT_EQ(st.queued, 3);
	CHECK_INT_EQ(plugin_instance_pending(in.pi), 4);
	set_hold(in.rec, 0);
	ifx_drain(L, in.pi);
	for (int i = 0; i < 4; i++)
		CHECK(r[i].done && r[i].err == 0);
	for (int i = 1; i < 4; i++)
		CHECK(r[i - 1].order < r[i].order); /* in order */
	CHECK_INT_EQ(plugin_instance_pending(in.pi), 0);
	stop_and_free(&in);
}

static void test_init_failure(void)
{
	struct inst in;
	start(&in, -EIO, false);
	CHECK_OK(loop_run_until(L, &in.init_done, DEADLINE));
	CHECK_INT_EQ(in.init_err, -EIO);
	CHECK_STR_EQ(in.init_msg, "init failed: Input/output error: init refused by the test");
	CHECK_INT_EQ(plugin_instance_state(in.pi), PLUGIN_INSTANCE_FAILED);
	plugin_instance_elected(in.pi, 9, &REL1); /* ignored */
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -EIO);
	ifx_drain(L, in.pi);
	struct recorder *rec = in.rec;
	bool stopped = false;
	plugin_instance_stop(in.pi, ifx_on_stopped, &stopped);
	CHECK_OK(loop_run_until(L, &stopped, DEADLINE));
	CHECK_INT_EQ(rec_count(rec), 1); /* init only: no fini after a failed init */
	plugin_instance_free(in.pi);
}

static void set_elected_txn(struct recorder *rec, int on)
{
	pthread_mutex_lock(&rec->mu);
	rec->elected_txn = on;
	pthread_mutex_unlock(&rec->mu);
}

/* on_elected runs and waits for its txn, which the fake host holds: the
 * worker has received everything the host sent before the txn's answer */
static void elect_and_hold_in_on_elected(struct inst *in, int64_t token, struct rdone *a)
{
	bool queued = false;
	fakehost_set_leading(FH, true);
	fakehost_hold(FH, true, &queued);
	set_elected_txn(in->rec, 1);
	plugin_instance_elected(in->pi, token, &REL1);
	if (a)
		plugin_instance_reconcile(in->pi, ifx_on_reconciled, a);
	if (loop_run_until(L, &queued, DEADLINE) < 0)
		dump(in->rec);
	CHECK(queued);
}

static void release_elected(struct inst *in)
{
	set_elected_txn(in->rec, 0);
	fakehost_hold(FH, false, NULL);
}

/* the start of a term goes to the worker in one go: on_elected, the replay
 * and the first reconcile are all handed over while on_elected still runs */
static void test_term_start_pipelined(void)
{
	struct inst in;
	start(&in, 0, true);
	struct rdone a = {0};
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	uint64_t m0 = st.messages;
	elect_and_hold_in_on_elected(&in, 5, &a);
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 3);
	CHECK_INT_EQ(st.queued, 0);
	/* elected and the first reconcile in one loop iteration (as election.c
	 * does): one message */
	CHECK_INT_EQ(st.messages, m0 + 1);
	/* a second reconcile does not go behind the first */
	struct rdone b = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &b);
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 3);
	CHECK_INT_EQ(st.queued, 1);
	release_elected(&in);
	CHECK_OK(loop_run_until(L, &b.done, DEADLINE));
	CHECK(a.done && a.err == 0 && b.err == 0 && a.order < b.order);
	check_trace(in.rec, (const char *const[]){"", "elected 5 api_token=5", "elected txn r=0",
						  "releases 1.0.0-1.1.0 rev=7 n=3", "reconcile",
						  "reconcile", NULL});
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 0);
	CHECK_INT_EQ(st.reconciles_ok, 2);
	stop_and_free(&in);
}

/* deposed while the pipelined start of the term is still on the worker: the
 * replay and the reconcile are skipped there (as if dropped here), the
 * reconcile completes with -ECANCELED, on_deposed runs */
static void test_deposed_skips_pipelined_term_start(void)
{
	struct inst in;
	start(&in, 0, true);
	struct rdone a = {0};
	elect_and_hold_in_on_elected(&in, 9, &a);
	plugin_instance_deposed(in.pi);
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 4); /* on_deposed went behind them */
	release_elected(&in);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -ECANCELED);
	CHECK_STR_EQ(a.msg, "dropped: leadership was lost before it ran");
	ifx_drain(L, in.pi);
	check_trace(in.rec, (const char *const[]){"", "elected 9 api_token=9", "",
						  "deposed api_token=0", NULL});
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 2);
	CHECK_INT_EQ(st.reconciles_cancelled, 1);
	CHECK_INT_EQ(st.reconciles_ok + st.reconciles_failed, 0);
	CHECK_INT_EQ(st.in_flight + st.queued, 0);
	/* the next term is delivered normally */
	plugin_instance_elected(in.pi, 10, &REL2);
	ifx_drain(L, in.pi);
	check_line(in.rec, 4, "elected 10 api_token=10");
	check_line(in.rec, 5, "releases 1.1.0-1.1.0 rev=9 n=3");
	stop_and_free(&in);
}

/* only the start of a term is pipelined: later releases_changed wait on the
 * host (and merge), so a deposed() drops them there; on_deposed goes at once
 * and the worker skips the replay */
static void test_only_the_term_start_is_pipelined(void)
{
	struct inst in;
	start(&in, 0, true);
	elect_and_hold_in_on_elected(&in, 8, NULL);
	struct releases r = REL2;
	for (int i = 0; i < 3; i++) {
		r.revision = 200 + i;
		plugin_instance_releases_changed(in.pi, &r);
	}
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 2); /* on_elected, the replay */
	CHECK_INT_EQ(st.queued, 1);    /* the three, merged */
	plugin_instance_deposed(in.pi);
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.in_flight, 3); /* on_deposed went at once */
	CHECK_INT_EQ(st.queued, 0);
	release_elected(&in);
	ifx_drain(L, in.pi);
	check_trace(in.rec, (const char *const[]){"", "elected 8 api_token=8", "",
						  "deposed api_token=0", NULL});
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 2); /* the merged one here, the replay on the worker */
	stop_and_free(&in);
}

/* free_and_check - plugin_instance_free(in) without stop(), the plugin kept
 * mapped past it to read its trace: want (as check_trace) */
static void free_and_check(struct inst *in, const char *const *want)
{
	void *keep = dlopen(in->lp->copy_path, RTLD_NOW | RTLD_NOLOAD);
	CHECK(keep);
	struct recorder *rec = in->rec;
	plugin_instance_free(in->pi);
	check_trace(rec, want);
	rec->notify_fd = -1;
	dlclose(keep);
}

/* free() without stop() while the start of a term is on the worker: on_deposed
 * goes before the wait, so the replay and the reconcile are skipped; then fini */
static void test_free_during_term_start_deposes_first(void)
{
	struct inst in;
	start(&in, 0, true);
	struct rdone a = {0};
	elect_and_hold_in_on_elected(&in, 12, &a);
	/* free refuses the held txn, deposes, runs fini */
	free_and_check(&in, (const char *const[]){"", "elected 12 api_token=12", "",
						  "deposed api_token=0", "fini", NULL});
	fakehost_hold(FH, false, NULL);
}

/* free() after deposed(): on_deposed is delivered once, then fini */
static void test_free_after_deposed_still_deposes(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 13, &REL1);
	ifx_drain(L, in.pi);
	plugin_instance_deposed(in.pi);
	free_and_check(&in, (const char *const[]){"", "elected 13 api_token=13", "",
						  "deposed api_token=0", "fini", NULL});
}

/* on_deposed leaves at the end of the loop round that deposed (so that a
 * resignation or revocation issued right after goes to etcd first): nothing
 * else has to happen for it to reach the plugin */
static void test_deposed_is_sent_from_the_loop(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 17, &REL1);
	ifx_drain(L, in.pi);
	CHECK_INT_EQ(rec_count(in.rec), 3); /* init, elected, replay */
	plugin_instance_deposed(in.pi);
	uint64_t dl = DEADLINE;
	while (rec_count(in.rec) < 4) {
		g_notified = false;
		CHECK_OK(loop_run_until(L, &g_notified, dl));
	}
	check_line(in.rec, 3, "deposed api_token=0");
	stop_and_free(&in);
}

/* an event handed over on its own runs even when on_deposed follows right
 * behind it (only a pipelined term start is checked for a waiting end) */
static void test_lone_reconcile_is_not_skipped(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	for (int i = 0; i < 30; i++) {
		plugin_instance_elected(in.pi, 20 + i, &REL1);
		ifx_drain(L, in.pi);
		struct rdone a = {0};
		plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
		plugin_instance_deposed(in.pi);
		CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
		CHECK_INT_EQ(a.err, 0);
		ifx_drain(L, in.pi);
	}
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 0);
	CHECK_INT_EQ(st.reconciles_ok, 30);
	stop_and_free(&in);
}

/* deposed and elected again while a reconcile of the first term still runs:
 * its txns are refused (-ESTALE), not fenced on the new term */
static void test_txn_of_an_ended_term_is_refused(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	fakehost_clear(FH);
	plugin_instance_elected(in.pi, 1, &REL1);
	ifx_drain(L, in.pi);
	set_result(in.rec, 0, NULL, RECORDER_TXN_PUT_RANGE);
	set_hold(in.rec, 1);
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	wait_in_reconcile(in.rec, 1);
	plugin_instance_deposed(in.pi);
	plugin_instance_elected(in.pi, 2, &REL2);
	set_hold(in.rec, 0);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -ESTALE);
	ifx_drain(L, in.pi);
	check_line(in.rec, 4, "txn1 err=-116 msg=the term this callback belongs to has ended; txn refused");
	check_line(in.rec, 5, "deposed api_token=0");
	check_line(in.rec, 6, "elected 2 api_token=2");
	CHECK(!fakehost_get(FH, PREFIX "a/k"));
	set_result(in.rec, 0, NULL, RECORDER_TXN_NONE);
	stop_and_free(&in);
}

static void test_stop_delivers_deposed_then_fini(void)
{
	struct inst in;
	start(&in, 0, true);
	elect_and_hold_in_on_elected(&in, 6, NULL);
	struct recorder *rec = in.rec;
	bool stopped = false;
	plugin_instance_stop(in.pi, ifx_on_stopped, &stopped);
	CHECK(!stopped);
	release_elected(&in);
	CHECK_OK(loop_run_until(L, &stopped, DEADLINE));
	CHECK_INT_EQ(plugin_instance_state(in.pi), PLUGIN_INSTANCE_STOPPED);
	/* stop() ended the term while on_elected ran; the replay behind it is
	 * skipped by the worker, on_deposed and fini run */
	check_trace(rec, (const char *const[]){"", "elected 6 api_token=6", "",
					       "deposed api_token=0", "fini", NULL});
	struct plugin_instance_stats st;
	plugin_instance_get_stats(in.pi, &st);
	CHECK_INT_EQ(st.dropped, 1);
	/* after stop: nothing is accepted */
	struct rdone a = {0};
	plugin_instance_reconcile(in.pi, ifx_on_reconciled, &a);
	CHECK_OK(loop_run_until(L, &a.done, DEADLINE));
	CHECK_INT_EQ(a.err, -ECANCELED);
	plugin_instance_free(in.pi);
}

static void test_free_without_stop_runs_fini(void)
{
	struct inst in;
	start(&in, 0, true);
	fakehost_set_leading(FH, true);
	plugin_instance_elected(in.pi, 7, &REL1);
	ifx_drain(L, in.pi);
	free_and_check(&in, (const char *const[]){"", "", "", "deposed api_token=0", "fini", NULL});
	plugin_instance_free(NULL);
}

static void test_instance_new_failure_leaves_plugin(void)
{
	char err[LOADER_ERR_MAX];
	struct loader_plugin *lp;
	CHECK_OK(loader_open(D.plugins, "recorder.so", D.private_dir, &lp, err, sizeof(err)));
	struct driver_host h = *fakehost_driver_host(FH);
	h.data_prefix = ""; /* would give the plugin all of etcd */
	struct plugin_instance *pi = (struct plugin_instance *)(uintptr_t)0x1;
	CHECK_INT_EQ(plugin_instance_new(lp, L, &h, "node-a", NULL, &pi), -EINVAL);
	CHECK(pi == (struct plugin_instance *)(uintptr_t)0x1);
	loader_close(lp); /* still ours */
}

/* ---- the worker alone, driven over a raw bus ---- */

struct wthread {
	struct worker *w;
	int rc;
};

static void *worker_thread(void *arg)
{
	struct wthread *t = arg;
	t->rc = worker_run(t->w);
	return NULL;
}

/* the event kinds the hand-driven worker tests send */
enum {
	K_INIT = LEASEHOLD__BUS__EVENT__KIND_INIT,
	K_EL = LEASEHOLD__BUS__EVENT__KIND_ELECTED,
	K_REL = LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED,
	K_REC = LEASEHOLD__BUS__EVENT__KIND_RECONCILE,
	K_DEP = LEASEHOLD__BUS__EVENT__KIND_DEPOSED,
	K_FINI = LEASEHOLD__BUS__EVENT__KIND_FINI,
};

/* married - a worker thread running a test plugin, its bus an inproc pair
 * "married" to a host socket the test drives by hand (the idea of nng's
 * NUTS nuts_marry): the test plays the host message by message. */
struct married {
	struct loader_plugin *lp;
	nng_socket hs, ws;
	struct wthread t;
	pthread_t th;
};

static void marry_worker(struct married *m, const char *file, const char *url)
{
	char err[LOADER_ERR_MAX];
	CHECK_OK(loader_open(D.plugins, file, D.private_dir, &m->lp, err, sizeof(err)));
	CHECK_INT_EQ(nng_pair1_open(&m->hs), 0);
	CHECK_INT_EQ(nng_pair1_open(&m->ws), 0);
	nng_socket_set_ms(m->hs, NNG_OPT_RECVTIMEO, 10000);
	CHECK_INT_EQ(nng_listen(m->hs, url, NULL, 0), 0);
	CHECK_INT_EQ(nng_dial(m->ws, url, NULL, 0), 0);
	m->t = (struct wthread){NULL, -1};
	CHECK_OK(worker_new(&m->lp->desc, m->ws, 10000, &m->t.w));
	CHECK_INT_EQ(pthread_create(&m->th, NULL, worker_thread, &m->t), 0);
}

/* the recorder of a married recorder.so (its state outlives the worker) */
static struct recorder *married_recorder(struct married *m)
{
	recorder_get_fn get = (recorder_get_fn)dlsym(m->lp->handle, "recorder_get");
	CHECK(get);
	return get();
}

/* after the worker ran fini: its thread ended cleanly (the recorder can
 * then be read: it lives in the plugin until divorce_worker) */
static void join_worker(struct married *m)
{
	CHECK_INT_EQ(pthread_join(m->th, NULL), 0);
	CHECK_INT_EQ(m->t.rc, 0);
}

/* free it all (after join_worker) */
static void divorce_worker(struct married *m)
{
	worker_free(m->t.w);
	nng_close(m->hs);
	nng_close(m->ws);
	loader_close(m->lp);
}

static uint32_t g_bus_version = LH_BUS_VERSION; /* what INIT carries */

/* pack tw and send it to the worker */
static void bus_send(nng_socket s, const Leasehold__Bus__ToWorker *tw)
{
	nng_msg *m = bus_pack_msg(&tw->base);
	CHECK(m);
	CHECK_INT_EQ(nng_sendmsg(s, m, 0), 0);
}

/* the bodies an event of each kind points at (a test's events share them) */
struct bus_bodies {
	Leasehold__Bus__Init init;
	Leasehold__Bus__Elected el;
	Leasehold__Bus__ReleasesChanged rc;
	Leasehold__Bus__Reconcile rec;
	Leasehold__Bus__Deposed dep;
	Leasehold__Bus__Fini fini;
};

static void bus_bodies_init(struct bus_bodies *b, int64_t token)
{
	*b = (struct bus_bodies){
	    LEASEHOLD__BUS__INIT__INIT,
	    LEASEHOLD__BUS__ELECTED__INIT,
	    LEASEHOLD__BUS__RELEASES_CHANGED__INIT,
	    LEASEHOLD__BUS__RECONCILE__INIT,
	    LEASEHOLD__BUS__DEPOSED__INIT,
	    LEASEHOLD__BUS__FINI__INIT,
	};
	b->init.node_id = bus_bin_str("node-w");
	b->init.data_prefix = bus_bin_str(PREFIX);
	b->init.bus_version = g_bus_version;
	b->el.fencing_token = token;
}

/* e: an event of kind with seq, its body in b */
static void bus_event_set(Leasehold__Bus__Event *e, struct bus_bodies *b, uint64_t seq, int kind,
			  bool behind)
{
	leasehold__bus__event__init(e);
	e->seq = seq;
	e->behind = behind;
	e->kind_case = (Leasehold__Bus__Event__KindCase)kind;
	switch (kind) {
	case LEASEHOLD__BUS__EVENT__KIND_INIT:
		e->init = &b->init;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_ELECTED:
		e->elected = &b->el;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED:
		e->releases_changed = &b->rc;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE:
		e->reconcile = &b->rec;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_DEPOSED:
		e->deposed = &b->dep;
		break;
	default:
		e->fini = &b->fini;
		break;
	}
}

static void bus_send_event(nng_socket s, uint64_t seq, int kind, int64_t token, bool behind)
{
	struct bus_bodies b;
	bus_bodies_init(&b, token);
	Leasehold__Bus__Event e;
	bus_event_set(&e, &b, seq, kind, behind);
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &e;
	bus_send(s, &tw);
}

/* the next message from the worker, whatever it is (free it unpacked) */
static Leasehold__Bus__ToHost *bus_recv_raw(nng_socket s)
{
	nng_msg *m;
	CHECK_INT_EQ(nng_recvmsg(s, &m, 0), 0);
	Leasehold__Bus__ToHost *th =
	    leasehold__bus__to_host__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
	nng_msg_free(m);
	CHECK(th);
	return th;
}

/* the next message from the worker that is not a log line */
static Leasehold__Bus__ToHost *bus_recv_any(nng_socket s)
{
	for (;;) {
		Leasehold__Bus__ToHost *th = bus_recv_raw(s);
		if (th->msg_case != LEASEHOLD__BUS__TO_HOST__MSG_LOG)
			return th;
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
}

/* the next DONE or TXN from the worker (anything else is skipped) */
static Leasehold__Bus__ToHost *bus_recv(nng_socket s)
{
	for (;;) {
		Leasehold__Bus__ToHost *th = bus_recv_any(s);
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE ||
		    th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN)
			return th;
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
}

static void expect_done(nng_socket s, uint64_t seq, bool skipped)
{
	Leasehold__Bus__ToHost *th = bus_recv(s);
	CHECK_INT_EQ(th->msg_case, LEASEHOLD__BUS__TO_HOST__MSG_DONE);
	CHECK_INT_EQ(th->done->seq, seq);
	CHECK_INT_EQ(th->done->skipped, skipped);
	CHECK_INT_EQ(th->done->err, skipped ? -ECANCELED : 0);
	leasehold__bus__to_host__free_unpacked(th, NULL);
}

/* the worker asks for a txn next (on_elected's, which waits for it): its id */
static uint64_t bus_take_txn(nng_socket s)
{
	Leasehold__Bus__ToHost *req = bus_recv(s);
	CHECK_INT_EQ(req->msg_case, LEASEHOLD__BUS__TO_HOST__MSG_TXN);
	uint64_t id = req->txn->id;
	leasehold__bus__to_host__free_unpacked(req, NULL);
	return id;
}

/* answer the txn id: it succeeded */
static void bus_reply_txn(nng_socket s, uint64_t id)
{
	Leasehold__Bus__TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = id;
	rep.succeeded = true;
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	bus_send(s, &tw);
}

/* a married recorder.so whose on_elected makes a txn, initialised */
static struct recorder *marry_initialised(struct married *m, const char *url)
{
	marry_worker(m, "recorder.so", url);
	struct recorder *rec = married_recorder(m);
	set_elected_txn(rec, 1);
	bus_send_event(m->hs, 1, K_INIT, 0, false);
	expect_done(m->hs, 1, false);
	return rec;
}

/* Everything after on_elected(7) reaches the worker while on_elected waits
 * for its txn (the bus is FIFO: they precede the answer). Term 7 ended
 * behind its replay and reconcile: those are skipped, on_deposed runs.
 * Term 8 ended before its on_elected ran: all of it is skipped, including
 * its on_deposed. fini runs. */
static void test_worker_skips_a_term_that_ended_ahead(void)
{
	struct married mw;
	struct recorder *rec = marry_initialised(&mw, "inproc://lh-test-worker-skip");
	nng_socket hs = mw.hs;

	/* what the host sends behind on_elected(7), in order from seq 3, and
	 * whether the worker skips it */
	static const struct {
		int kind;
		bool skipped;
	} behind[] = {
	    {K_REL, true},   /* term 7's replay */
	    {K_REC, true},   /* its reconcile */
	    {K_DEP, false},  /* its on_deposed */
	    {K_EL, true},    /* on_elected(8) */
	    {K_REL, true},   /* its replay */
	    {K_DEP, true},   /* no on_deposed for a term the plugin never saw */
	    {K_FINI, false}, /* fini */
	};
	size_t n = sizeof(behind) / sizeof(behind[0]);
	bus_send_event(hs, 2, K_EL, 7, false);
	uint64_t id = bus_take_txn(hs);
	for (size_t i = 0; i < n; i++)
		bus_send_event(hs, 3 + i, behind[i].kind, behind[i].kind == K_EL ? 8 : 0,
			       behind[i].kind != K_EL);
	bus_reply_txn(hs, id);
	expect_done(hs, 2, false); /* on_elected(7) */
	for (size_t i = 0; i < n; i++)
		expect_done(hs, 3 + i, behind[i].skipped);
	join_worker(&mw);
	check_trace(rec, (const char *const[]){"init", "elected 7 api_token=7", "elected txn r=0",
					       "deposed api_token=0", "fini", NULL});
	divorce_worker(&mw);
}

/* INIT carries the host's bus version: a worker refuses another one (an
 * older host sends none) with a clear error and stays uninitialised; its
 * own is taken; every answer to INIT carries the worker's version. */
static void test_worker_checks_the_bus_version(void)
{
	struct married mw;
	marry_worker(&mw, "recorder.so", "inproc://lh-test-worker-version");
	struct recorder *rec = married_recorder(&mw);
	nng_socket hs = mw.hs;

	const uint32_t wrong[] = {0, LH_BUS_VERSION + 1};
	for (size_t i = 0; i < 2; i++) {
		g_bus_version = wrong[i];
		bus_send_event(hs, 1 + i, LEASEHOLD__BUS__EVENT__KIND_INIT, 0, false);
		Leasehold__Bus__ToHost *d = bus_recv(hs);
		CHECK_INT_EQ(d->msg_case, LEASEHOLD__BUS__TO_HOST__MSG_DONE);
		CHECK_INT_EQ(d->done->seq, 1 + i);
		CHECK_INT_EQ(d->done->err, -EPROTO);
		CHECK_INT_EQ(d->done->bus_version, LH_BUS_VERSION);
		char want[128], got[512];
		snprintf(want, sizeof(want), "the host speaks bus version %u, this worker %u", wrong[i],
			 LH_BUS_VERSION);
		snprintf(got, sizeof(got), "%.*s", (int)d->done->message.len,
			 (const char *)d->done->message.data);
		if (!strstr(got, want))
			fprintf(stderr, "got: %s\n", got);
		CHECK(strstr(got, want) != NULL);
		leasehold__bus__to_host__free_unpacked(d, NULL);
	}
	g_bus_version = LH_BUS_VERSION;
	CHECK_INT_EQ(rec_count(rec), 0); /* the plugin's init never ran */
	bus_send_event(hs, 3, LEASEHOLD__BUS__EVENT__KIND_INIT, 0, false);
	Leasehold__Bus__ToHost *d = bus_recv(hs);
	CHECK_INT_EQ(d->msg_case, LEASEHOLD__BUS__TO_HOST__MSG_DONE);
	CHECK_INT_EQ(d->done->seq, 3);
	CHECK_INT_EQ(d->done->err, 0);
	CHECK_INT_EQ(d->done->bus_version, LH_BUS_VERSION);
	leasehold__bus__to_host__free_unpacked(d, NULL);
	bus_send_event(hs, 4, LEASEHOLD__BUS__EVENT__KIND_FINI, 0, false);
	expect_done(hs, 4, false);
	join_worker(&mw);
	check_trace(rec, (const char *const[]){"init", "fini", NULL});
	divorce_worker(&mw);
}

/* n events as one batch message: seq0, seq0+1, ...; all but the first
 * behind; an elected one gets token */
static void bus_send_batch(nng_socket s, uint64_t seq0, const int *kinds, size_t n, int64_t token)
{
	Leasehold__Bus__Event e[32], *ptrs[32];
	struct bus_bodies bodies;
	CHECK(n <= 32);
	bus_bodies_init(&bodies, token);
	for (size_t i = 0; i < n; i++) {
		bus_event_set(&e[i], &bodies, seq0 + i, kinds[i], i > 0);
		ptrs[i] = &e[i];
	}
	Leasehold__Bus__Events b = LEASEHOLD__BUS__EVENTS__INIT;
	b.n_events = n;
	b.events = ptrs;
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_BATCH;
	tw.batch = &b;
	bus_send(s, &tw);
}

/* The host hands a term's start over as one batch message: the worker runs
 * its events in order, each answered on its own, as if each had come alone;
 * a term that ends inside a batch is skipped as when its events come alone;
 * an empty batch is nothing; a batch larger than what the worker keeps
 * waiting is refused whole (a protocol error) rather than cut short. */
static void test_worker_takes_a_batch_in_order(void)
{
	struct married mw;
	struct recorder *rec = marry_initialised(&mw, "inproc://lh-test-worker-batch");
	nng_socket hs = mw.hs;

	bus_send_batch(hs, 2, NULL, 0, 0); /* empty */
	const int start[] = {K_EL, K_REL, K_REC};
	bus_send_batch(hs, 2, start, 3, 7);
	bus_reply_txn(hs, bus_take_txn(hs)); /* on_elected's */
	expect_done(hs, 2, false);
	expect_done(hs, 3, false);
	expect_done(hs, 4, false);
	/* the end of term 7, then a whole term 8 that ends inside the same
	 * batch: all of term 8 is skipped, its on_deposed too */
	const int next[] = {K_DEP, K_EL, K_REL, K_REC, K_DEP};
	bus_send_batch(hs, 5, next, 5, 8);
	expect_done(hs, 5, false);
	for (uint64_t seq = 6; seq <= 9; seq++)
		expect_done(hs, seq, true);
	/* more than the worker keeps waiting: refused whole, nothing runs */
	int many[17];
	for (size_t i = 0; i < 17; i++)
		many[i] = K_REC;
	bus_send_batch(hs, 10, many, 17, 0);
	for (;;) {
		Leasehold__Bus__ToHost *x = bus_recv_any(hs);
		CHECK(x->msg_case != LEASEHOLD__BUS__TO_HOST__MSG_DONE);
		bool pe = x->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR;
		leasehold__bus__to_host__free_unpacked(x, NULL);
		if (pe)
			break;
	}
	bus_send_event(hs, 10, K_FINI, 0, false);
	expect_done(hs, 10, false);
	join_worker(&mw);
	check_trace(rec,
		    (const char *const[]){"init", "elected 7 api_token=7", "elected txn r=0", "",
					  "reconcile", "deposed api_token=0", "fini", NULL});
	divorce_worker(&mw);
}

/* ---- plugin configuration (ABI 1.2): the worker half on a raw socket,
 * with the `configured` test plugin (it logs what it is given, one line per
 * callback): INIT carries the configuration to init; a ConfigChanged equal
 * to what the plugin has is answered without a call; a hostile Config (a
 * document over PLUGIN_CONFIG_MAX, a NUL byte) is refused with -EBADMSG and
 * the plugin keeps what it had; ValidateConfig reaches validate_config (a
 * refusal with its reason), an oversized document there is refused too ---- */

/* the EventDone of seq; the plugin's log lines before it into logs, the
 * answer's message into msg */
static int32_t wait_done(nng_socket s, uint64_t seq, char *logs, size_t len, char *msg,
			 size_t msg_len)
{
	logs[0] = 0;
	for (;;) {
		Leasehold__Bus__ToHost *th = bus_recv_raw(s);
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_LOG) {
			size_t l = strlen(logs);
			snprintf(logs + l, len - l, "%.*s\n", (int)th->log->message.len,
			         (const char *)th->log->message.data);
		} else if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE) {
			CHECK_INT_EQ(th->done->seq, seq);
			int32_t err = th->done->err;
			snprintf(msg, msg_len, "%.*s", (int)th->done->message.len,
			         th->done->message.data ? (const char *)th->done->message.data : "");
			leasehold__bus__to_host__free_unpacked(th, NULL);
			return err;
		} else
			CHECK(!"unexpected message from the worker");
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
}

static ProtobufCBinaryData doc_of(const char *s, size_t len)
{
	return (ProtobufCBinaryData){len, (uint8_t *)(uintptr_t)s};
}

/* what the host tells the worker in a configuration case */
enum { CFG_CHANGED, CFG_VALIDATE };
#define CFG_BIG ((const char *)1) /* a document of PLUGIN_CONFIG_MAX + 1 bytes */

struct cfg_case {
	int what;
	const char *doc; /* the cluster document (NULL: absent), or the one to validate */
	size_t len;
	int64_t rev;	 /* CFG_CHANGED: its revision */
	int32_t err;	 /* the answer */
	const char *log; /* in the plugin's log; "": the plugin logs nothing */
	const char *msg; /* in the answer's message (NULL: not checked) */
	bool msg_whole;	 /* msg is the whole message */
};

/* the events of seq 2, 3, ... after an INIT that gave cluster {"a": 1} at
 * revision 5 and local {"l": 1} */
static const struct cfg_case CFG_CASES[] = {
    /* the same state again: no call */
    {CFG_CHANGED, "{\"a\": 1}", 8, 5, 0, "", NULL},
    /* hostile documents: refused, the plugin keeps what it has */
    {CFG_CHANGED, CFG_BIG, 0, 6, -EBADMSG, "", "bad configuration from the host"},
    {CFG_CHANGED, "{\"a\":\0 1}", 9, 6, -EBADMSG, "", NULL},
    {CFG_VALIDATE, CFG_BIG, 0, 0, -EBADMSG, "", NULL},
    /* a real change; then validation (refused, accepted) */
    {CFG_CHANGED, "{\"a\": 2}", 8, 7, 0,
     "CFG configured changed rev=7 flags=0 cluster={\"a\": 2} local={\"l\": 1}", NULL},
    {CFG_VALIDATE, "{\"reject\": 1}", 13, 0, -EINVAL, "CFG configured validate 13 bytes",
     "the key 'reject' is not allowed here", true},
    {CFG_VALIDATE, "{\"ok\": 1}", 9, 0, 0, NULL, NULL},
    /* absent */
    {CFG_CHANGED, NULL, 0, 0, 0, "CFG configured changed rev=0 flags=0 cluster=(none)", NULL},
};

/* send case c as event seq; the answer's error, the log and message as wait_done */
static int32_t cfg_send(nng_socket s, uint64_t seq, const struct cfg_case *c, const char *big,
			char *logs, size_t len, char *msg, size_t msg_len)
{
	const char *doc = c->doc == CFG_BIG ? big : c->doc;
	size_t dlen = c->doc == CFG_BIG ? PLUGIN_CONFIG_MAX + 1 : c->len;
	Leasehold__Bus__Config cfg = LEASEHOLD__BUS__CONFIG__INIT;
	Leasehold__Bus__ConfigChanged cc = LEASEHOLD__BUS__CONFIG_CHANGED__INIT;
	Leasehold__Bus__ValidateConfig vc = LEASEHOLD__BUS__VALIDATE_CONFIG__INIT;
	Leasehold__Bus__Event ev = LEASEHOLD__BUS__EVENT__INIT;
	ev.seq = seq;
	if (c->what == CFG_CHANGED) {
		cfg.has_cluster = doc != NULL;
		cfg.cluster = doc_of(doc, doc ? dlen : 0);
		cfg.cluster_revision = c->rev;
		cfg.has_local = 1;
		cfg.local = doc_of("{\"l\": 1}", 8);
		cc.config = &cfg;
		ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_CONFIG_CHANGED;
		ev.config_changed = &cc;
	} else {
		vc.document = doc_of(doc, dlen);
		ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_VALIDATE_CONFIG;
		ev.validate_config = &vc;
	}
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &ev;
	bus_send(s, &tw);
	return wait_done(s, seq, logs, len, msg, msg_len);
}

/* an INIT with a configuration, then the cases of CFG_CASES, then fini */
static void test_worker_config_events(void)
{
	char logs[8192], msg[600];
	struct married mw;
	marry_worker(&mw, "configured.so", "inproc://lh-test-config-bus");
	nng_socket hs = mw.hs;

	Leasehold__Bus__Config c = LEASEHOLD__BUS__CONFIG__INIT;
	c.has_cluster = 1;
	c.cluster = doc_of("{\"a\": 1}", 8);
	c.cluster_revision = 5;
	c.has_local = 1;
	c.local = doc_of("{\"l\": 1}", 8);
	struct bus_bodies b;
	bus_bodies_init(&b, 0);
	b.init.node_id = doc_of("n1", 2);
	b.init.data_prefix = doc_of("/p/configured/data/", 19);
	b.init.config = &c;
	Leasehold__Bus__Event ev;
	bus_event_set(&ev, &b, 1, K_INIT, false);
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &ev;
	bus_send(hs, &tw);
	CHECK_INT_EQ(wait_done(hs, 1, logs, sizeof(logs), msg, sizeof(msg)), 0);
	CHECK(strstr(logs, "CFG configured init rev=5 flags=0 cluster={\"a\": 1} local={\"l\": 1}"));

	size_t big = PLUGIN_CONFIG_MAX + 1;
	char *doc = malloc(big);
	CHECK(doc);
	memset(doc, ' ', big);
	doc[0] = '{';
	doc[big - 1] = '}';
	size_t n = sizeof(CFG_CASES) / sizeof(CFG_CASES[0]);
	for (size_t i = 0; i < n; i++) {
		const struct cfg_case *k = &CFG_CASES[i];
		int32_t err = cfg_send(hs, 2 + i, k, doc, logs, sizeof(logs), msg, sizeof(msg));
		if (err != k->err)
			fprintf(stderr, "case %zu: err %d, msg %s, log %s\n", i, err, msg, logs);
		CHECK_INT_EQ(err, k->err);
		if (k->log && !*k->log)
			CHECK_STR_EQ(logs, "");
		else if (k->log)
			CHECK(strstr(logs, k->log));
		if (k->msg && k->msg_whole)
			CHECK_STR_EQ(msg, k->msg);
		else if (k->msg)
			CHECK(strstr(msg, k->msg));
	}
	free(doc);

	bus_send_event(hs, 2 + n, K_FINI, 0, false);
	CHECK_INT_EQ(wait_done(hs, 2 + n, logs, sizeof(logs), msg, sizeof(msg)), 0);
	join_worker(&mw);
	divorce_worker(&mw);
}

int main(void)
{
	ifx_dirs_setup(&D, "test-bus");
	install_recorder();
	ifx_install(&D, "configured.so");

	CHECK_OK(loop_new(&L));
	CHECK_OK(fakehost_new(L, PREFIX, &FH));
	g_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK(g_efd >= 0);
	CHECK_OK(loop_io_add(L, g_efd, EPOLLIN, on_notify, NULL, &g_eio));

	RUN(test_elected_then_replay_in_order);
	RUN(test_reconcile_success_and_failure);
	RUN(test_deposed_drops_queued_events);
	RUN(test_deposed_before_elected_delivered);
	RUN(test_drain_waits_for_slow_reconcile_loop_keeps_running);
	RUN(test_txn_through_bus_prefix_and_strip);
	RUN(test_txn_errors_reach_the_plugin);
	RUN(test_context_log_and_outside_thread);
	RUN(test_hostile_bus_bytes);
	RUN(test_worker_checks_the_bus_version);
	RUN(test_in_flight_count);
	RUN(test_init_failure);
	RUN(test_term_start_pipelined);
	RUN(test_deposed_skips_pipelined_term_start);
	RUN(test_only_the_term_start_is_pipelined);
	RUN(test_free_during_term_start_deposes_first);
	RUN(test_free_after_deposed_still_deposes);
	RUN(test_deposed_is_sent_from_the_loop);
	RUN(test_lone_reconcile_is_not_skipped);
	RUN(test_txn_of_an_ended_term_is_refused);
	RUN(test_stop_delivers_deposed_then_fini);
	RUN(test_worker_skips_a_term_that_ended_ahead);
	RUN(test_worker_config_events);
	RUN(test_worker_takes_a_batch_in_order);
	RUN(test_free_without_stop_runs_fini);
	RUN(test_instance_new_failure_leaves_plugin);

	loop_io_free(g_eio);
	close(g_efd);
	fakehost_free(FH);
	loop_free(L);
	/* bus sockets still closing on the closer thread */
	CHECK_OK(runtime_closer_wait(10000));
	nng_fini();
	return CHECK_EXIT();
}
