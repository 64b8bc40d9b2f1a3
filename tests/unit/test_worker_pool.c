/* SPDX-License-Identifier: MIT */
/*
 * test_worker_pool.c - the worker's key threads (host/worker/worker_pool.c)
 * seen from the host's end of a real nng pair: a plugin that declares
 * key_concurrency 2 (its descriptor is in this file) gets two keys at once,
 * both wait for their range replies at the same time, the replies are
 * answered in the other order and each reaches its own call (its error and
 * its last_error come back with its own key's EventDone); a third key and
 * any other event while the two run are refused, never run beside them;
 * once they returned, other events run as usual.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "check.h"
#include "abi/abi_bus.h"
#include "proto/bus.pb-c.h"
#include "worker/worker.h"

/* ---- the plugin: each key's reconcile reads its key and fails with
 * the host's refusal as its reason ---- */

static int32_t tp_reconcile_key(struct lh_ctx *ctx, const char *key, uint32_t len)
{
	const struct lh_op_result *res;
	int32_t r = ctx->host->range(ctx, key, len, 0, 0, &res);
	if (r < 0)
		ctx->host->set_error(ctx, ctx->host->last_error(ctx));
	return r < 0 ? r : 0;
}

static const struct lh_plugin g_desc = {
	LH_PLUGIN_HEADER_INIT, .name = "pooltest", .release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0}, .min_compatible_release = {1, 0, 0},
	.reconcile_key = tp_reconcile_key, .key_concurrency = 2,
};

/* ---- the host's end ---- */

static nng_socket g_hs;

static void send_tw(ToWorker *tw)
{
	nng_msg *m = bus_pack_msg(&tw->base);
	CHECK(m);
	CHECK_INT_EQ(nng_sendmsg(g_hs, m, 0), 0);
}

static void send_event(Event *e)
{
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = e;
	send_tw(&tw);
}

static void send_init(void)
{
	Event e = LEASEHOLD__BUS__EVENT__INIT;
	Leasehold__Bus__Init in = LEASEHOLD__BUS__INIT__INIT;
	in.node_id = bus_bin_str("n1");
	in.data_prefix = bus_bin_str("/p/pooltest/data/");
	in.bus_version = LH_BUS_VERSION;
	e.seq = 1;
	e.kind_case = LEASEHOLD__BUS__EVENT__KIND_INIT;
	e.init = &in;
	send_event(&e);
}

static void send_elected(uint64_t seq)
{
	Event e = LEASEHOLD__BUS__EVENT__INIT;
	Leasehold__Bus__Elected el = LEASEHOLD__BUS__ELECTED__INIT;
	el.fencing_token = 7;
	e.seq = seq;
	e.kind_case = LEASEHOLD__BUS__EVENT__KIND_ELECTED;
	e.elected = &el;
	send_event(&e);
}

static void send_key(uint64_t seq, const char *key)
{
	Event e = LEASEHOLD__BUS__EVENT__INIT;
	Leasehold__Bus__ReconcileKey rk = LEASEHOLD__BUS__RECONCILE_KEY__INIT;
	rk.key = bus_bin_str(key);
	e.seq = seq;
	e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY;
	e.reconcile_key = &rk;
	send_event(&e);
}

static void send_plain(uint64_t seq, int kind)
{
	Event e = LEASEHOLD__BUS__EVENT__INIT;
	Leasehold__Bus__Reconcile rec = LEASEHOLD__BUS__RECONCILE__INIT;
	Leasehold__Bus__Fini fini = LEASEHOLD__BUS__FINI__INIT;
	e.seq = seq;
	e.kind_case = kind;
	if (kind == LEASEHOLD__BUS__EVENT__KIND_RECONCILE)
		e.reconcile = &rec;
	else
		e.fini = &fini;
	send_event(&e);
}

/* the range request's reply: an error with a message naming the key */
static void reply_range(uint64_t id, const char *msg)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = id;
	rep.err = -ENOENT;
	rep.message = bus_bin_str(msg);
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	send_tw(&tw);
}

/* the next message from the worker, of the given case (others than logs
 * and protocol errors fail the test; protocol errors are counted) */
static unsigned g_protocol_errors;

static ToHost *recv_case(int want)
{
	for (;;) {
		nng_msg *m;
		CHECK_INT_EQ(nng_recvmsg(g_hs, &m, 0), 0);
		ToHost *th = leasehold__bus__to_host__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		CHECK(th);
		if ((int)th->msg_case == want)
			return th;
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR)
			g_protocol_errors++;
		else
			CHECK(th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_LOG);
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
}

static void expect_done(uint64_t seq, int err, const char *msg)
{
	ToHost *th = recv_case(LEASEHOLD__BUS__TO_HOST__MSG_DONE);
	CHECK_INT_EQ(th->done->seq, seq);
	CHECK_INT_EQ(th->done->err, err);
	if (msg) {
		char got[256];
		snprintf(got, sizeof(got), "%.*s", (int)th->done->message.len,
			 (const char *)th->done->message.data);
		CHECK_STR_EQ(got, msg);
	}
	leasehold__bus__to_host__free_unpacked(th, NULL);
}

static void *worker_thread(void *arg)
{
	return (void *)(intptr_t)worker_run(arg);
}

static void test_two_keys_at_once_replies_crossed(void)
{
	nng_socket ws;
	CHECK_INT_EQ(nng_pair1_open(&g_hs), 0);
	CHECK_INT_EQ(nng_pair1_open(&ws), 0);
	nng_socket_set_ms(g_hs, NNG_OPT_RECVTIMEO, 10000);
	CHECK_INT_EQ(nng_listen(g_hs, "inproc://lh-test-worker-pool", NULL, 0), 0);
	CHECK_INT_EQ(nng_dial(ws, "inproc://lh-test-worker-pool", NULL, 0), 0);
	struct worker *w;
	CHECK_OK(worker_new(&g_desc, ws, 10000, &w));
	pthread_t th;
	CHECK_INT_EQ(pthread_create(&th, NULL, worker_thread, w), 0);

	send_init();
	expect_done(1, 0, NULL);
	send_elected(2);
	expect_done(2, 0, NULL);
	send_key(3, "in/a");
	send_key(4, "in/b");
	/* both keys wait for their range at once: two threads */
	uint64_t id_of[2] = {0, 0};
	for (int i = 0; i < 2; i++) {
		ToHost *r = recv_case(LEASEHOLD__BUS__TO_HOST__MSG_RANGE);
		int which = r->range->key.len == 4 && memcmp(r->range->key.data, "in/b", 4) == 0;
		CHECK(id_of[which] == 0);
		id_of[which] = r->range->id;
		leasehold__bus__to_host__free_unpacked(r, NULL);
	}
	CHECK(id_of[0] && id_of[1] && id_of[0] != id_of[1]);
	/* a third key and another callback while two run: refused */
	unsigned pe = g_protocol_errors;
	send_key(5, "in/c");
	expect_done(5, -EBUSY, "refused by the worker: no free key thread");
	send_plain(6, LEASEHOLD__BUS__EVENT__KIND_RECONCILE);
	expect_done(6, -EBUSY, "refused by the worker: reconcile_key calls are running");
	CHECK(g_protocol_errors >= pe + 1);
	/* crossed replies: each reaches its own call, with its own reason */
	reply_range(id_of[1], "no such key in/b");
	expect_done(4, -ENOENT, "no such key in/b");
	reply_range(id_of[0], "no such key in/a");
	expect_done(3, -ENOENT, "no such key in/a");
	/* no key runs: others run as usual, and a thread is free again */
	send_plain(7, LEASEHOLD__BUS__EVENT__KIND_RECONCILE);
	expect_done(7, 0, NULL);
	send_key(8, "in/d");
	ToHost *r = recv_case(LEASEHOLD__BUS__TO_HOST__MSG_RANGE);
	uint64_t id = r->range->id;
	leasehold__bus__to_host__free_unpacked(r, NULL);
	reply_range(id, "gone");
	expect_done(8, -ENOENT, "gone");
	send_plain(9, LEASEHOLD__BUS__EVENT__KIND_FINI);
	expect_done(9, 0, NULL);
	void *rc;
	CHECK_INT_EQ(pthread_join(th, &rc), 0);
	CHECK_INT_EQ((int)(intptr_t)rc, 0);
	worker_free(w);
	nng_close(g_hs);
	nng_close(ws);
}

int main(void)
{
	RUN(test_two_keys_at_once_replies_crossed);
	return 0;
}
