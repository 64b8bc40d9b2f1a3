/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_kv.c - the etcd client's unary calls against a real etcd:
 * range (prefix, limit, sort, count_only, keys_only, revision), put (lease,
 * prev_kv), delete (prev_kv), txn (every compare target, both branches),
 * lease grant/keepalive/timetolive/revoke, compaction, cancel, two clients
 * racing a create_revision == 0 txn. Field-by-field checks.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "check.h"
#include "etcd/etcd.h"
#include "harness.h"
#include "test_etcd_common.h"

static struct loop *L;
static struct etcd_client *C;
static struct harness_etcd *H;

static void test_kv_put_range_fields(void)
{
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, C, "kv/a/1", "one", 0, false, &r));
	int64_t rev1 = r->header.revision;
	CHECK(rev1 > 0);
	CHECK(r->header.cluster_id != 0);
	CHECK(r->header.member_id != 0);
	CHECK(r->header.raft_term > 0);
	CHECK_INT_EQ(r->n_prev_kvs, 0);
	etcd_response_free(r);
	CHECK_OK(sput(L, C, "kv/a/2", "two", 0, false, NULL));
	CHECK_OK(sput(L, C, "kv/a/3", "three", 0, false, NULL));
	CHECK_OK(sput(L, C, "kv/b", "bee", 0, false, NULL));
	/* second put of a/1: version 2, prev_kv returned */
	CHECK_OK(sput(L, C, "kv/a/1", "uno", 0, true, &r));
	int64_t rev_last = r->header.revision;
	CHECK_INT_EQ(rev_last, rev1 + 4);
	CHECK_INT_EQ(r->n_prev_kvs, 1);
	CHECK_MEM_EQ(r->prev_kvs[0].key, r->prev_kvs[0].key_len, "kv/a/1", 6);
	CHECK_MEM_EQ(r->prev_kvs[0].value, r->prev_kvs[0].value_len, "one", 3);
	CHECK_INT_EQ(r->prev_kvs[0].version, 1);
	CHECK_INT_EQ(r->prev_kvs[0].create_revision, rev1);
	CHECK_INT_EQ(r->prev_kvs[0].mod_revision, rev1);
	etcd_response_free(r);

	/* single key */
	struct etcd_kv *kv = sget(L, C, "kv/a/1");
	CHECK(kv);
	CHECK_MEM_EQ(kv->value, kv->value_len, "uno", 3);
	CHECK_INT_EQ(kv->create_revision, rev1);
	CHECK_INT_EQ(kv->mod_revision, rev_last);
	CHECK_INT_EQ(kv->version, 2);
	CHECK_INT_EQ(kv->lease, 0);
	CHECK_INT_EQ(kv->key[kv->key_len], 0);
	etcd_kv_free(kv);
	CHECK(sget(L, C, "kv/none") == NULL);

	/* prefix */
	uint8_t end[16];
	struct etcd_op op = op_key(ETCD_OP_RANGE, "kv/a/");
	op.range_end = end;
	op.range_end_len = etcd_prefix_end("kv/a/", 5, end);
	CHECK_MEM_EQ(end, op.range_end_len, "kv/a0", 5);
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 3);
	CHECK_INT_EQ(r->count, 3);
	CHECK(!r->more);
	CHECK_MEM_EQ(r->kvs[0].key, r->kvs[0].key_len, "kv/a/1", 6);
	CHECK_MEM_EQ(r->kvs[1].key, r->kvs[1].key_len, "kv/a/2", 6);
	CHECK_MEM_EQ(r->kvs[2].value, r->kvs[2].value_len, "three", 5);
	CHECK_INT_EQ(r->header.revision, rev_last);
	etcd_response_free(r);

	/* limit: more + full count */
	op.limit = 2;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 2);
	CHECK(r->more);
	CHECK_INT_EQ(r->count, 3);
	etcd_response_free(r);

	/* sort descending by key */
	op.limit = 0;
	op.sort_order = ETCD_SORT_DESCEND;
	op.sort_target = ETCD_SORT_KEY;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 3);
	CHECK_MEM_EQ(r->kvs[0].key, r->kvs[0].key_len, "kv/a/3", 6);
	CHECK_MEM_EQ(r->kvs[2].key, r->kvs[2].key_len, "kv/a/1", 6);
	etcd_response_free(r);

	/* sort ascending by mod revision: a/2, a/3, a/1 */
	op.sort_order = ETCD_SORT_ASCEND;
	op.sort_target = ETCD_SORT_MOD;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_MEM_EQ(r->kvs[0].key, r->kvs[0].key_len, "kv/a/2", 6);
	CHECK_MEM_EQ(r->kvs[2].key, r->kvs[2].key_len, "kv/a/1", 6);
	etcd_response_free(r);
	op.sort_order = ETCD_SORT_NONE;
	op.sort_target = ETCD_SORT_KEY;

	/* count_only */
	op.count_only = true;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 0);
	CHECK_INT_EQ(r->count, 3);
	etcd_response_free(r);
	op.count_only = false;

	/* keys_only */
	op.keys_only = true;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 3);
	CHECK(r->kvs[0].value == NULL);
	CHECK_INT_EQ(r->kvs[0].value_len, 0);
	CHECK_INT_EQ(r->kvs[0].version, 2);
	etcd_response_free(r);
	op.keys_only = false;

	/* at an old revision only a/1 existed, with its first value */
	op.revision = rev1;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->n_kvs, 1);
	CHECK_MEM_EQ(r->kvs[0].value, r->kvs[0].value_len, "one", 3);
	etcd_response_free(r);

	/* all keys: key "\0", range_end "\0" */
	struct etcd_op all = op_key(ETCD_OP_RANGE, "");
	all.key = "\0";
	all.key_len = 1;
	all.range_end = "\0";
	all.range_end_len = 1;
	all.count_only = true;
	CHECK_OK(sop(L, C, &all, &r));
	CHECK(r->count >= 4);
	etcd_response_free(r);

	/* binary key and value round trip, including a NUL and 0xff */
	static const uint8_t bk[] = {'k', 'v', '/', 0, 0xff, 0x10};
	static const uint8_t bv[] = {0, 1, 2, 0xfe, 0xff};
	struct etcd_op bop = op_key(ETCD_OP_PUT, "x");
	bop.key = bk;
	bop.key_len = sizeof(bk);
	bop.value = bv;
	bop.value_len = sizeof(bv);
	CHECK_OK(sop(L, C, &bop, NULL));
	bop.type = ETCD_OP_RANGE;
	CHECK_OK(sop(L, C, &bop, &r));
	CHECK_INT_EQ(r->n_kvs, 1);
	CHECK_MEM_EQ(r->kvs[0].key, r->kvs[0].key_len, bk, sizeof(bk));
	CHECK_MEM_EQ(r->kvs[0].value, r->kvs[0].value_len, bv, sizeof(bv));
	etcd_response_free(r);

	/* empty value: value NULL, len 0 */
	CHECK_OK(sput(L, C, "kv/empty", "", 0, false, NULL));
	kv = sget(L, C, "kv/empty");
	CHECK(kv && kv->value == NULL && kv->value_len == 0);
	etcd_kv_free(kv);
}

static void test_kv_delete_prev_kv(void)
{
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, C, "del/1", "a", 0, false, NULL));
	CHECK_OK(sput(L, C, "del/2", "b", 0, false, NULL));
	CHECK_OK(sput(L, C, "del/3", "c", 0, false, NULL));
	struct etcd_op op = op_key(ETCD_OP_DELETE, "del/1");
	op.prev_kv = true;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->op_type, ETCD_OP_DELETE);
	CHECK_INT_EQ(r->deleted, 1);
	CHECK_INT_EQ(r->n_prev_kvs, 1);
	CHECK_MEM_EQ(r->prev_kvs[0].value, r->prev_kvs[0].value_len, "a", 1);
	etcd_response_free(r);
	/* the rest by prefix */
	uint8_t end[8];
	op = op_key(ETCD_OP_DELETE, "del/");
	op.range_end = end;
	op.range_end_len = etcd_prefix_end("del/", 4, end);
	op.prev_kv = true;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->deleted, 2);
	CHECK_INT_EQ(r->n_prev_kvs, 2);
	CHECK_MEM_EQ(r->prev_kvs[1].key, r->prev_kvs[1].key_len, "del/3", 5);
	etcd_response_free(r);
	/* nothing left: deleted absent = 0 */
	op.prev_kv = false;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->deleted, 0);
	CHECK_INT_EQ(r->n_prev_kvs, 0);
	etcd_response_free(r);
}

static int txn(const struct etcd_compare *cmps, size_t n, const struct etcd_op *s, size_t ns,
	       const struct etcd_op *f, size_t nf, struct etcd_response **ret)
{
	struct res x = {0};
	CHECK_OK(etcd_txn(C, cmps, n, s, ns, f, nf, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	*ret = x.r;
	return x.err;
}

/* put_rev - put key=value (no lease); the revision the put made */
static int64_t put_rev(const char *key, const char *value)
{
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, C, key, value, 0, false, &r));
	int64_t rev = r->header.revision;
	etcd_response_free(r);
	return rev;
}

static void test_kv_txn_compares(void)
{
	struct etcd_response *r = NULL;
	int64_t create = put_rev("txn/k", "v1");
	int64_t mod = put_rev("txn/k", "v2");

	struct etcd_op succ[3], fail[1];
	succ[0] = op_key(ETCD_OP_PUT, "txn/s");
	succ[0].value = "yes";
	succ[0].value_len = 3;
	succ[0].prev_kv = true;
	succ[1] = op_key(ETCD_OP_RANGE, "txn/k");
	succ[2] = op_key(ETCD_OP_DELETE, "txn/nothing");
	fail[0] = op_key(ETCD_OP_RANGE, "txn/k");

	/* VALUE EQUAL -> success branch, three responses of the right types */
	struct etcd_compare c = cmp_key(ETCD_CMP_VALUE, ETCD_CMP_EQUAL, "txn/k", 0);
	c.value = "v2";
	c.value_len = 2;
	CHECK_OK(txn(&c, 1, succ, 3, fail, 1, &r));
	CHECK(r->succeeded);
	CHECK_INT_EQ(r->n_responses, 3);
	CHECK_INT_EQ(r->responses[0].op_type, ETCD_OP_PUT);
	CHECK_INT_EQ(r->responses[0].n_prev_kvs, 0);
	CHECK_INT_EQ(r->responses[1].op_type, ETCD_OP_RANGE);
	CHECK_INT_EQ(r->responses[1].n_kvs, 1);
	CHECK_MEM_EQ(r->responses[1].kvs[0].value, r->responses[1].kvs[0].value_len, "v2", 2);
	CHECK_INT_EQ(r->responses[1].count, 1);
	CHECK_INT_EQ(r->responses[2].op_type, ETCD_OP_DELETE);
	CHECK_INT_EQ(r->responses[2].deleted, 0);
	CHECK_INT_EQ(r->header.revision, mod + 1);
	etcd_response_free(r);

	/* VALUE NOT_EQUAL false -> failure branch with a range */
	c.result = ETCD_CMP_NOT_EQUAL;
	CHECK_OK(txn(&c, 1, succ, 1, fail, 1, &r));
	CHECK(!r->succeeded);
	CHECK_INT_EQ(r->n_responses, 1);
	CHECK_INT_EQ(r->responses[0].op_type, ETCD_OP_RANGE);
	CHECK_INT_EQ(r->responses[0].kvs[0].version, 2);
	etcd_response_free(r);

	/* single-key compares of each numeric target, one that holds and one
	 * that does not (a txn with no ops only says which branch ran) */
	const struct {
		const char *what;
		struct etcd_compare c;
		bool holds;
	} numeric[] = {
		{"VERSION == 2", cmp_key(ETCD_CMP_VERSION, ETCD_CMP_EQUAL, "txn/k", 2), true},
		{"VERSION > 2", cmp_key(ETCD_CMP_VERSION, ETCD_CMP_GREATER, "txn/k", 2), false},
		{"CREATE == its create revision",
		 cmp_key(ETCD_CMP_CREATE, ETCD_CMP_EQUAL, "txn/k", create), true},
		/* create_revision == 0 for a missing key */
		{"CREATE of a missing key == 0",
		 cmp_key(ETCD_CMP_CREATE, ETCD_CMP_EQUAL, "txn/missing", 0), true},
		{"CREATE == 0", cmp_key(ETCD_CMP_CREATE, ETCD_CMP_EQUAL, "txn/k", 0), false},
		/* MOD: txn/k was not modified by the txns above */
		{"MOD == its mod revision", cmp_key(ETCD_CMP_MOD, ETCD_CMP_EQUAL, "txn/k", mod), true},
		{"MOD < its mod revision", cmp_key(ETCD_CMP_MOD, ETCD_CMP_LESS, "txn/k", mod), false},
	};
	for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
		CHECK_OK(txn(&numeric[i].c, 1, NULL, 0, NULL, 0, &r));
		if (r->succeeded != numeric[i].holds)
			fprintf(stderr, "compare %s: succeeded=%d\n", numeric[i].what, r->succeeded);
		CHECK(r->succeeded == numeric[i].holds);
		etcd_response_free(r);
	}

	/* MOD LESS over a range: true only when every key in it is older */
	uint8_t end[8];
	c = cmp_key(ETCD_CMP_MOD, ETCD_CMP_LESS, "txn/", mod + 1);
	c.range_end = end;
	c.range_end_len = etcd_prefix_end("txn/", 4, end);
	CHECK_OK(txn(&c, 1, NULL, 0, NULL, 0, &r));
	CHECK(!r->succeeded); /* txn/s was written at mod + 1 */
	etcd_response_free(r);
	c.number = mod + 2;
	CHECK_OK(txn(&c, 1, NULL, 0, NULL, 0, &r));
	CHECK(r->succeeded);
	etcd_response_free(r);

	/* LEASE */
	struct res x = {0};
	CHECK_OK(etcd_lease_grant(C, 30, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	int64_t lease = x.r->lease_id;
	res_clear(&x);
	CHECK_OK(sput(L, C, "txn/leased", "l", lease, false, NULL));
	c = cmp_key(ETCD_CMP_LEASE, ETCD_CMP_EQUAL, "txn/leased", lease);
	CHECK_OK(txn(&c, 1, NULL, 0, NULL, 0, &r));
	CHECK(r->succeeded);
	etcd_response_free(r);
	c = cmp_key(ETCD_CMP_LEASE, ETCD_CMP_EQUAL, "txn/k", lease);
	CHECK_OK(txn(&c, 1, NULL, 0, NULL, 0, &r));
	CHECK(!r->succeeded);
	etcd_response_free(r);

	/* several compares: all must hold */
	struct etcd_compare two[2] = {cmp_key(ETCD_CMP_VERSION, ETCD_CMP_EQUAL, "txn/k", 2),
				      cmp_key(ETCD_CMP_VERSION, ETCD_CMP_EQUAL, "txn/s", 5)};
	CHECK_OK(txn(two, 2, NULL, 0, fail, 1, &r));
	CHECK(!r->succeeded);
	etcd_response_free(r);

	/* a txn with a bad op is refused at the call, no callback */
	struct etcd_op bad = op_key(ETCD_OP_PUT, "");
	x = (struct res){0};
	CHECK_INT_EQ(etcd_txn(C, NULL, 0, &bad, 1, NULL, 0, NULL, res_cb, &x, NULL), -EINVAL);
	CHECK_INT_EQ(etcd_put(C, &bad, NULL, res_cb, &x, NULL), -EINVAL);
	CHECK(!x.done);
}

static void test_kv_lease_lifecycle(void)
{
	struct res x = {0};
	CHECK_OK(etcd_lease_grant(C, 5, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	int64_t id = x.r->lease_id;
	CHECK(id > 0);
	CHECK_INT_EQ(x.r->ttl, 5);
	res_clear(&x);

	CHECK_OK(sput(L, C, "lease/a", "1", id, false, NULL));
	CHECK_OK(sput(L, C, "lease/b", "2", id, false, NULL));
	struct etcd_kv *kv = sget(L, C, "lease/a");
	CHECK_INT_EQ(kv->lease, id);
	etcd_kv_free(kv);

	CHECK_OK(etcd_lease_timetolive(C, id, true, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK_INT_EQ(x.r->lease_id, id);
	CHECK_INT_EQ(x.r->granted_ttl, 5);
	CHECK(x.r->ttl > 0 && x.r->ttl <= 5);
	CHECK_INT_EQ(x.r->n_keys, 2);
	bool sa = false, sb = false;
	for (size_t i = 0; i < x.r->n_keys; i++) {
		sa |= x.r->keys[i].key_len == 7 && memcmp(x.r->keys[i].key, "lease/a", 7) == 0;
		sb |= x.r->keys[i].key_len == 7 && memcmp(x.r->keys[i].key, "lease/b", 7) == 0;
	}
	CHECK(sa && sb);
	res_clear(&x);

	/* keepalive: one POST, TTL back */
	CHECK_OK(etcd_lease_keepalive(C, id, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK_INT_EQ(x.r->lease_id, id);
	CHECK_INT_EQ(x.r->ttl, 5);
	CHECK(x.r->header.revision > 0);
	res_clear(&x);

	/* revoke deletes the attached keys */
	CHECK_OK(etcd_lease_revoke(C, id, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK(x.r->header.revision > 0);
	res_clear(&x);
	CHECK(sget(L, C, "lease/a") == NULL);
	CHECK(sget(L, C, "lease/b") == NULL);

	/* keepalive of the revoked lease reports the loss: ttl <= 0 */
	CHECK_OK(etcd_lease_keepalive(C, id, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK(x.err == -ENOENT || (x.err == 0 && x.r->ttl <= 0));
	res_clear(&x);

	/* timetolive of a gone lease: ttl -1 */
	CHECK_OK(etcd_lease_timetolive(C, id, false, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK_INT_EQ(x.r->ttl, -1);
	res_clear(&x);

	/* revoking it again: NOT_FOUND -> -ENOENT with the gateway's code/message */
	CHECK_OK(etcd_lease_revoke(C, id, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_INT_EQ(x.err, -ENOENT);
	CHECK(x.r);
	CHECK_INT_EQ(x.r->grpc_code, 5);
	CHECK(x.r->error_message && strstr(x.r->error_message, "lease not found"));
	res_clear(&x);

	/* put with an unknown lease: -ENOENT */
	CHECK_INT_EQ(sput(L, C, "lease/c", "x", id, false, NULL), -ENOENT);
}

static void test_kv_compaction_error(void)
{
	int64_t old = put_rev("cmp/k", "1");
	int64_t now = put_rev("cmp/k", "2");
	struct res x = {0};
	CHECK_OK(etcd_compact(C, now, true, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	res_clear(&x);
	struct etcd_op op = op_key(ETCD_OP_RANGE, "cmp/k");
	op.revision = old;
	struct etcd_response *r = NULL;
	CHECK_INT_EQ(sop(L, C, &op, &r), -ERANGE);
	CHECK(r && r->grpc_code == 11);
	etcd_response_free(r);
	/* a revision in the future: gateway code 11 as well ("future revision") */
	op.revision = now + 1000;
	CHECK_INT_EQ(sop(L, C, &op, NULL), -ERANGE);
}

static void test_kv_cancel_never_calls_back(void)
{
	struct res a = {0}, b = {0};
	struct etcd_call *call = NULL;
	struct etcd_op op = op_key(ETCD_OP_RANGE, "kv/a/1");
	CHECK_OK(etcd_range(C, &op, NULL, res_cb, &a, &call));
	CHECK(call);
	etcd_call_cancel(call);
	CHECK_OK(etcd_range(C, &op, NULL, res_cb, &b, NULL));
	res_wait(L, &b, WAIT_MS);
	CHECK_OK(b.err);
	CHECK(!a.done);
	res_clear(&b);
}

static void test_kv_two_clients_race_create(void)
{
	const char *ep = harness_etcd_url(H, 0);
	struct etcd_client *c2 = client_for(L, &ep, 1, NULL, NULL);
	for (int round = 0; round < 5; round++) {
		char key[32];
		snprintf(key, sizeof(key), "race/%d", round);
		struct etcd_compare cm = cmp_key(ETCD_CMP_CREATE, ETCD_CMP_EQUAL, key, 0);
		struct etcd_op p1 = op_key(ETCD_OP_PUT, key), p2 = op_key(ETCD_OP_PUT, key);
		p1.value = "c1";
		p1.value_len = 2;
		p2.value = "c2";
		p2.value_len = 2;
		struct etcd_op get = op_key(ETCD_OP_RANGE, key);
		struct res x1 = {0}, x2 = {0};
		/* both are queued before either is sent */
		CHECK_OK(etcd_txn(C, &cm, 1, &p1, 1, &get, 1, NULL, res_cb, &x1, NULL));
		CHECK_OK(etcd_txn(c2, &cm, 1, &p2, 1, &get, 1, NULL, res_cb, &x2, NULL));
		res_wait(L, &x1, WAIT_MS);
		res_wait(L, &x2, WAIT_MS);
		CHECK_OK(x1.err);
		CHECK_OK(x2.err);
		CHECK(x1.r->succeeded != x2.r->succeeded);
		struct etcd_response *loser = x1.r->succeeded ? x2.r : x1.r;
		const char *won = x1.r->succeeded ? "c1" : "c2";
		CHECK_INT_EQ(loser->responses[0].n_kvs, 1);
		CHECK_MEM_EQ(loser->responses[0].kvs[0].value, loser->responses[0].kvs[0].value_len,
			     won, 2);
		struct etcd_kv *kv = sget(L, C, key);
		CHECK_MEM_EQ(kv->value, kv->value_len, won, 2);
		CHECK_INT_EQ(kv->version, 1);
		etcd_kv_free(kv);
		res_clear(&x1);
		res_clear(&x2);
	}
	etcd_client_free(c2);
}

static void test_kv_many_in_flight(void)
{
	/* 50 puts queued at once on one client: all complete, connections reused */
	enum { N = 50 };
	struct res x[N];
	memset(x, 0, sizeof(x));
	for (int i = 0; i < N; i++) {
		char key[32];
		snprintf(key, sizeof(key), "many/%02d", i);
		struct etcd_op op = op_key(ETCD_OP_PUT, key);
		op.value = key;
		op.value_len = strlen(key);
		CHECK_OK(etcd_put(C, &op, NULL, res_cb, &x[i], NULL));
	}
	for (int i = 0; i < N; i++) {
		res_wait(L, &x[i], WAIT_MS);
		CHECK_OK(x[i].err);
		res_clear(&x[i]);
	}
	uint8_t end[8];
	struct etcd_op op = op_key(ETCD_OP_RANGE, "many/");
	op.range_end = end;
	op.range_end_len = etcd_prefix_end("many/", 5, end);
	op.count_only = true;
	struct etcd_response *r = NULL;
	CHECK_OK(sop(L, C, &op, &r));
	CHECK_INT_EQ(r->count, N);
	etcd_response_free(r);
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &H));
	CHECK_OK(loop_new(&L));
	const char *ep = harness_etcd_url(H, 0);
	C = client_for(L, &ep, 1, NULL, NULL);
	CHECK_STR_EQ(etcd_client_endpoint(C), ep);
	RUN(test_kv_put_range_fields);
	RUN(test_kv_delete_prev_kv);
	RUN(test_kv_txn_compares);
	RUN(test_kv_lease_lifecycle);
	RUN(test_kv_cancel_never_calls_back);
	RUN(test_kv_two_clients_race_create);
	RUN(test_kv_many_in_flight);
	RUN(test_kv_compaction_error);
	etcd_client_free(C);
	loop_free(L);
	harness_etcd_free(H);
	return CHECK_EXIT();
}
