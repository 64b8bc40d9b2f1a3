/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_codec.c - the gateway JSON codec without a server: request bodies
 * byte for byte, strict base64, every response kind, error bodies, watch
 * messages, and hostile input (every truncation and deterministic byte
 * flips of valid bodies must parse or fail cleanly, never crash or leak).
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

#include "etcd/etcd_internal.h"
#include "proto/etcd_watch.pb-c.h"

static void test_codec_base64(void)
{
	static const struct {
		const char *plain, *enc;
	} v[] = {{"", ""},
		 {"f", "Zg=="},
		 {"fo", "Zm8="},
		 {"foo", "Zm9v"},
		 {"foob", "Zm9vYg=="},
		 {"fooba", "Zm9vYmE="},
		 {"foobar", "Zm9vYmFy"}};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *e = etcd_b64_encode(v[i].plain, strlen(v[i].plain));
		CHECK_STR_EQ(e, v[i].enc);
		free(e);
		uint8_t *d = NULL;
		size_t dl = 0;
		CHECK_OK(etcd_b64_decode(v[i].enc, strlen(v[i].enc), &d, &dl));
		CHECK_MEM_EQ(d, dl, v[i].plain, strlen(v[i].plain));
		CHECK_INT_EQ(d[dl], 0);
		free(d);
	}
	static const char *const bad[] = {"Zg=",  "Zg",	   "Zh==", "Zm9=", "Z===", "====",
					  "Zm 9", "Zm9\n", "Zm-v", "Zm_v", "=Zm9", "Zg==Zg=="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *d = (uint8_t *)"untouched";
		size_t dl = 42;
		int r = etcd_b64_decode(bad[i], strlen(bad[i]), &d, &dl);
		if (r != -EBADMSG) {
			fprintf(stderr, "accepted bad base64 '%s'\n", bad[i]);
			exit(1);
		}
		CHECK_INT_EQ(dl, 42);
	}
	/* all byte values round trip */
	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	char *e = etcd_b64_encode(all, sizeof(all));
	uint8_t *d = NULL;
	size_t dl = 0;
	CHECK_OK(etcd_b64_decode(e, strlen(e), &d, &dl));
	CHECK_MEM_EQ(d, dl, all, sizeof(all));
	free(d);
	free(e);
}

static void test_codec_request_bodies(void)
{
	char *b = NULL;
	struct etcd_op op = op_key(ETCD_OP_RANGE, "a");
	op.range_end = "b";
	op.range_end_len = 1;
	op.limit = 10;
	op.revision = 7;
	op.sort_order = ETCD_SORT_DESCEND;
	op.sort_target = ETCD_SORT_MOD;
	op.keys_only = true;
	op.count_only = true;
	CHECK_OK(etcd_json_range_req(&op, &b));
	CHECK_STR_EQ(b,
		     "{\"key\":\"YQ==\",\"range_end\":\"Yg==\",\"limit\":\"10\",\"revision\":\"7\","
		     "\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\",\"keys_only\":true,"
		     "\"count_only\":true}");
	free(b);
	op = op_key(ETCD_OP_PUT, "k");
	op.value = "v";
	op.value_len = 1;
	op.lease = 1234567890123456789;
	op.prev_kv = true;
	CHECK_OK(etcd_json_put_req(&op, &b));
	CHECK_STR_EQ(b, "{\"key\":\"aw==\",\"value\":\"dg==\",\"lease\":\"1234567890123456789\","
			"\"prev_kv\":true}");
	free(b);
	op = op_key(ETCD_OP_DELETE, "k");
	op.prev_kv = true;
	CHECK_OK(etcd_json_delete_req(&op, &b));
	CHECK_STR_EQ(b, "{\"key\":\"aw==\",\"prev_kv\":true}");
	free(b);

	struct etcd_compare c[2];
	memset(c, 0, sizeof(c));
	c[0].target = ETCD_CMP_CREATE;
	c[0].result = ETCD_CMP_EQUAL;
	c[0].key = "k";
	c[0].key_len = 1;
	c[1].target = ETCD_CMP_VALUE;
	c[1].result = ETCD_CMP_NOT_EQUAL;
	c[1].key = "k";
	c[1].key_len = 1;
	c[1].range_end = "l";
	c[1].range_end_len = 1;
	struct etcd_op s = op_key(ETCD_OP_PUT, "k"), f = op_key(ETCD_OP_RANGE, "k");
	CHECK_OK(etcd_json_txn_req(c, 2, &s, 1, &f, 1, &b));
	CHECK_STR_EQ(b,
		     "{\"compare\":[{\"target\":\"CREATE\",\"result\":\"EQUAL\",\"key\":\"aw==\","
		     "\"create_revision\":\"0\"},{\"target\":\"VALUE\",\"result\":\"NOT_EQUAL\","
		     "\"key\":\"aw==\",\"range_end\":\"bA==\",\"value\":\"\"}],\"success\":[{"
		     "\"request_put\":{\"key\":\"aw==\",\"value\":\"\"}}],\"failure\":[{"
		     "\"request_range\":{\"key\":\"aw==\"}}]}");
	free(b);
	CHECK_OK(etcd_json_int_req("TTL", 5, &b));
	CHECK_STR_EQ(b, "{\"TTL\":\"5\"}");
	free(b);
	CHECK_OK(etcd_json_timetolive_req(-3, true, &b));
	CHECK_STR_EQ(b, "{\"ID\":\"-3\",\"keys\":true}");
	free(b);
	CHECK_OK(etcd_json_auth_req("u\"x", "p", &b));
	CHECK_STR_EQ(b, "{\"name\":\"u\\\"x\",\"password\":\"p\"}");
	free(b);
	/* invalid arguments */
	b = (char *)"untouched";
	op = op_key(ETCD_OP_PUT, "");
	CHECK_INT_EQ(etcd_json_put_req(&op, &b), -EINVAL);
	op = op_key(ETCD_OP_RANGE, "k");
	op.limit = -1;
	CHECK_INT_EQ(etcd_json_range_req(&op, &b), -EINVAL);
	op.limit = 0;
	op.sort_order = (enum etcd_sort_order)9;
	CHECK_INT_EQ(etcd_json_range_req(&op, &b), -EINVAL);
	c[0].target = (enum etcd_cmp_target)9;
	CHECK_INT_EQ(etcd_json_txn_req(c, 1, NULL, 0, NULL, 0, &b), -EINVAL);
	s.type = (enum etcd_op_type)7;
	CHECK_INT_EQ(etcd_json_txn_req(NULL, 0, &s, 1, NULL, 0, &b), -EINVAL);
	CHECK_STR_EQ(b, "untouched");
}

static const char *const range_body =
    "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"member_id\":\"10276657743932975437\","
    "\"revision\":\"12\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"2\","
    "\"mod_revision\":\"12\",\"version\":\"3\",\"value\":\"MQ==\",\"lease\":\"7587\"},{\"key\":"
    "\"Yg==\",\"create_revision\":\"4\",\"mod_revision\":\"4\",\"version\":\"1\"}],\"more\":true,"
    "\"count\":\"5\"}";

static void test_codec_responses(void)
{
	struct etcd_response *r = NULL;
	CHECK_OK(etcd_json_parse_response("range", range_body, strlen(range_body), &r, NULL));
	CHECK(r->header.cluster_id == 14841639068965178418ull);
	CHECK(r->header.member_id == 10276657743932975437ull);
	CHECK_INT_EQ(r->header.revision, 12);
	CHECK_INT_EQ(r->header.raft_term, 2);
	CHECK_INT_EQ(r->n_kvs, 2);
	CHECK_MEM_EQ(r->kvs[0].key, r->kvs[0].key_len, "a", 1);
	CHECK_MEM_EQ(r->kvs[0].value, r->kvs[0].value_len, "1", 1);
	CHECK_INT_EQ(r->kvs[0].create_revision, 2);
	CHECK_INT_EQ(r->kvs[0].mod_revision, 12);
	CHECK_INT_EQ(r->kvs[0].version, 3);
	CHECK_INT_EQ(r->kvs[0].lease, 7587);
	CHECK(r->kvs[1].value == NULL && r->kvs[1].value_len == 0);
	CHECK(r->more);
	CHECK_INT_EQ(r->count, 5);
	etcd_response_free(r);

	const char *txn =
	    "{\"header\":{\"revision\":\"2\"},\"succeeded\":true,\"responses\":[{"
	    "\"response_put\":{\"header\":{\"revision\":\"2\"},\"prev_kv\":{\"key\":"
	    "\"YQ==\",\"version\":\"1\"}}},{\"response_range\":{\"header\":{},\"kvs\":"
	    "[{\"key\":\"YQ==\"}],\"count\":\"1\"}},{\"response_delete_range\":{"
	    "\"deleted\":\"2\"}}]}";
	CHECK_OK(etcd_json_parse_response("txn", txn, strlen(txn), &r, NULL));
	CHECK(r->succeeded);
	CHECK_INT_EQ(r->n_responses, 3);
	CHECK_INT_EQ(r->responses[0].op_type, ETCD_OP_PUT);
	CHECK_INT_EQ(r->responses[0].n_prev_kvs, 1);
	CHECK_INT_EQ(r->responses[0].prev_kvs[0].version, 1);
	CHECK_INT_EQ(r->responses[1].op_type, ETCD_OP_RANGE);
	CHECK_INT_EQ(r->responses[1].count, 1);
	CHECK_INT_EQ(r->responses[2].op_type, ETCD_OP_DELETE);
	CHECK_INT_EQ(r->responses[2].deleted, 2);
	etcd_response_free(r);

	const char *ka =
	    "{\"result\":{\"header\":{\"revision\":\"1\"},\"ID\":\"99\",\"TTL\":\"5\"}}";
	CHECK_OK(etcd_json_parse_response("lease_keepalive", ka, strlen(ka), &r, NULL));
	CHECK_INT_EQ(r->lease_id, 99);
	CHECK_INT_EQ(r->ttl, 5);
	etcd_response_free(r);
	const char *lost = "{\"result\":{\"header\":{\"revision\":\"1\"},\"ID\":\"99\"}}";
	CHECK_OK(etcd_json_parse_response("lease_keepalive", lost, strlen(lost), &r, NULL));
	CHECK_INT_EQ(r->ttl, 0);
	etcd_response_free(r);
	const char *ttl =
	    "{\"header\":{},\"ID\":\"9\",\"TTL\":\"-1\",\"grantedTTL\":\"60\",\"keys\":"
	    "[\"YQ==\",\"Yg==\"]}";
	CHECK_OK(etcd_json_parse_response("lease_timetolive", ttl, strlen(ttl), &r, NULL));
	CHECK_INT_EQ(r->ttl, -1);
	CHECK_INT_EQ(r->granted_ttl, 60);
	CHECK_INT_EQ(r->n_keys, 2);
	CHECK_MEM_EQ(r->keys[1].key, r->keys[1].key_len, "b", 1);
	etcd_response_free(r);
	/* LeaseGrantResponse has its own "error" string: not an error body */
	const char *grant = "{\"header\":{},\"ID\":\"1\",\"TTL\":\"5\",\"error\":\"\"}";
	CHECK_OK(etcd_json_parse_response("lease_grant", grant, strlen(grant), &r, NULL));
	CHECK_INT_EQ(r->ttl, 5);
	etcd_response_free(r);

	/* error body: mapped errno + error response, *ret untouched */
	const char *err = "{\"error\":\"etcdserver: mvcc: required revision has been compacted\","
			  "\"message\":\"etcdserver: mvcc: required revision has been compacted\","
			  "\"code\":11}";
	struct etcd_response *er = NULL;
	r = (struct etcd_response *)(void *)&er; /* sentinel */
	struct etcd_response *keep = r;
	CHECK_INT_EQ(etcd_json_parse_response("range", err, strlen(err), &r, &er), -ERANGE);
	CHECK(r == keep);
	CHECK_INT_EQ(er->grpc_code, 11);
	CHECK(strstr(er->error_message, "compacted"));
	etcd_response_free(er);
	r = NULL;
	CHECK_INT_EQ(etcd_json_parse_response("range", err, strlen(err), &r, NULL), -ERANGE);
	CHECK(r == NULL);

	/* etcd 3.5's unary error body (as 3.5.16 answers): no "error" field */
	const char *err35 = "{\"code\":5, \"message\":\"etcdserver: requested lease not found\"}";
	er = NULL;
	CHECK_INT_EQ(etcd_json_parse_response("lease_revoke", err35, strlen(err35), &r, &er),
		     -ENOENT);
	CHECK(r == NULL);
	CHECK_INT_EQ(er->grpc_code, 5);
	CHECK_STR_EQ(er->error_message, "etcdserver: requested lease not found");
	etcd_response_free(er);
	char *tok35 = NULL;
	const char *auth35 = "{\"code\":3, \"message\":\"etcdserver: authentication failed, "
			     "invalid user ID or password\"}";
	CHECK_INT_EQ(etcd_json_auth_token(auth35, strlen(auth35), &tok35), -EINVAL);
	CHECK(tok35 == NULL);
	/* a "code" next to a "header" is not an error body; a code of the
	 * wrong type is garbage */
	const char *hdr_code = "{\"header\":{},\"code\":5}";
	CHECK_OK(etcd_json_parse_response("put", hdr_code, strlen(hdr_code), &r, NULL));
	etcd_response_free(r);
	r = NULL;
	const char *bad35[] = {"{\"code\":\"5\",\"message\":\"x\"}", "{\"code\":5,\"message\":1}",
			       "{\"code\":-1}", "{\"code\":5000}"};
	for (size_t i = 0; i < sizeof(bad35) / sizeof(bad35[0]); i++)
		CHECK_INT_EQ(etcd_json_parse_response("range", bad35[i], strlen(bad35[i]), &r, NULL),
			     -EBADMSG);
	CHECK(r == NULL);

	/* auth token */
	char *tok = NULL;
	const char *auth = "{\"header\":{},\"token\":\"abc.12\"}";
	CHECK_OK(etcd_json_auth_token(auth, strlen(auth), &tok));
	CHECK_STR_EQ(tok, "abc.12");
	free(tok);
	const char *evil = "{\"header\":{},\"token\":\"abc\\r\\nX-Evil: 1\"}";
	CHECK_INT_EQ(etcd_json_auth_token(evil, strlen(evil), &tok), -EBADMSG);
	const char *nul = "{\"header\":{},\"token\":\"ab\\u0000c\"}";
	CHECK_INT_EQ(etcd_json_auth_token(nul, strlen(nul), &tok), -EBADMSG);
	/* unknown kind */
	CHECK_INT_EQ(etcd_json_parse_response("nope", range_body, strlen(range_body), &r, NULL),
		     -EINVAL);
	/* deep nesting is refused, not recursed into */
	char deep[400];
	memset(deep, '[', 200);
	memset(deep + 200, ']', 200);
	CHECK_INT_EQ(etcd_json_parse_response("range", deep, sizeof(deep), &r, NULL), -EBADMSG);
}

/* a WatchResponse as etcd sends it: header, watch id, two events (a put,
 * a delete with its previous value), packed into buf */
static size_t packed_events(uint8_t *buf, size_t cap)
{
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	h.revision = 9;
	Etcdserverpb__KeyValue kv1 = ETCDSERVERPB__KEY_VALUE__INIT, kv2 = kv1, pkv = kv1;
	kv1.key = (ProtobufCBinaryData){1, (uint8_t *)"a"};
	kv1.value = (ProtobufCBinaryData){1, (uint8_t *)"1"};
	kv1.mod_revision = 8;
	kv2.key = (ProtobufCBinaryData){1, (uint8_t *)"b"};
	kv2.mod_revision = 9;
	pkv.key = kv2.key;
	pkv.value = (ProtobufCBinaryData){1, (uint8_t *)"2"};
	pkv.mod_revision = 5;
	Etcdserverpb__Event e1 = ETCDSERVERPB__EVENT__INIT, e2 = e1;
	e1.kv = &kv1;
	e2.type = ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE;
	e2.kv = &kv2;
	e2.prev_kv = &pkv;
	Etcdserverpb__Event *evs[] = {&e1, &e2};
	Etcdserverpb__WatchResponse wr = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	wr.header = &h;
	wr.watch_id = 3;
	wr.n_events = 2;
	wr.events = evs;
	size_t n = etcdserverpb__watch_response__get_packed_size(&wr);
	CHECK(n <= cap);
	return etcdserverpb__watch_response__pack(&wr, buf);
}

static void test_codec_watch_messages(void)
{
	uint8_t buf[512];
	size_t n = packed_events(buf, sizeof(buf));
	struct etcd_watch_msg *m = NULL;
	CHECK_OK(etcd_grpc_parse_watch(buf, n, &m));
	CHECK_INT_EQ(m->header.revision, 9);
	CHECK_INT_EQ(m->watch_id, 3);
	CHECK_INT_EQ(m->n_events, 2);
	CHECK_INT_EQ(m->events[0].type, ETCD_EVENT_PUT);
	CHECK_MEM_EQ(m->events[0].kv.value, m->events[0].kv.value_len, "1", 1);
	CHECK_INT_EQ(m->events[0].kv.key[1], 0); /* NUL after the bytes */
	CHECK(m->events[0].prev_kv == NULL);
	CHECK_INT_EQ(m->events[1].type, ETCD_EVENT_DELETE);
	CHECK(m->events[1].kv.value == NULL);
	CHECK(m->events[1].prev_kv);
	CHECK_MEM_EQ(m->events[1].prev_kv->value, m->events[1].prev_kv->value_len, "2", 1);
	etcd_watch_msg_free(m);

	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	h.revision = 9;
	Etcdserverpb__WatchResponse wr = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	wr.header = &h;
	wr.canceled = 1;
	wr.compact_revision = 7;
	wr.cancel_reason = (char *)"mvcc: required revision has been compacted";
	n = etcdserverpb__watch_response__pack(&wr, buf);
	CHECK_OK(etcd_grpc_parse_watch(buf, n, &m));
	CHECK(m->canceled && !m->created);
	CHECK_INT_EQ(m->compact_revision, 7);
	CHECK_STR_EQ(m->cancel_reason, wr.cancel_reason);
	etcd_watch_msg_free(m);

	/* refused: no header, a fragment, an event without key or revision,
	 * an unknown event type, bytes that are not a message */
	wr = (Etcdserverpb__WatchResponse)ETCDSERVERPB__WATCH_RESPONSE__INIT;
	n = etcdserverpb__watch_response__pack(&wr, buf);
	CHECK_INT_EQ(etcd_grpc_parse_watch(buf, n, &m), -EBADMSG);
	wr.header = &h;
	wr.fragment = 1;
	n = etcdserverpb__watch_response__pack(&wr, buf);
	CHECK_INT_EQ(etcd_grpc_parse_watch(buf, n, &m), -EBADMSG);
	wr.fragment = 0;
	Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT;
	kv.key = (ProtobufCBinaryData){1, (uint8_t *)"a"};
	Etcdserverpb__Event ev = ETCDSERVERPB__EVENT__INIT;
	Etcdserverpb__Event *evs[] = {&ev};
	wr.n_events = 1;
	wr.events = evs;
	n = etcdserverpb__watch_response__pack(&wr, buf); /* an event without kv */
	CHECK_INT_EQ(etcd_grpc_parse_watch(buf, n, &m), -EBADMSG);
	ev.kv = &kv;
	n = etcdserverpb__watch_response__pack(&wr, buf); /* no mod_revision */
	CHECK_INT_EQ(etcd_grpc_parse_watch(buf, n, &m), -EBADMSG);
	kv.mod_revision = 4;
	ev.type = 7;
	n = etcdserverpb__watch_response__pack(&wr, buf);
	CHECK_INT_EQ(etcd_grpc_parse_watch(buf, n, &m), -EBADMSG);
	static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f};
	m = NULL;
	CHECK_INT_EQ(etcd_grpc_parse_watch(junk, sizeof(junk), &m), -EBADMSG);
	CHECK(m == NULL);

	/* every prefix and deterministic corruptions of a valid message: it
	 * parses or fails cleanly; ASan/LSan watch for the rest */
	n = packed_events(buf, sizeof(buf));
	uint8_t bad[512];
	for (size_t cut = 0; cut < n; cut++) {
		memcpy(bad, buf, cut);
		m = NULL;
		int r = etcd_grpc_parse_watch(bad, cut, &m);
		CHECK(r == 0 || r == -EBADMSG);
		CHECK((r == 0) == (m != NULL));
		etcd_watch_msg_free(m);
	}
	uint32_t seed = 777;
	for (int i = 0; i < 3000; i++) {
		memcpy(bad, buf, n);
		seed = seed * 1103515245u + 12345u;
		bad[(seed >> 8) % n] = (uint8_t)(seed >> 16);
		m = NULL;
		int r = etcd_grpc_parse_watch(bad, n, &m);
		CHECK(r == 0 || r == -EBADMSG);
		etcd_watch_msg_free(m);
	}
}

/* gRPC framing: whole, split and oversized messages; the requests the
 * stream sends, read back with etcd's own message layout */
static void test_codec_grpc_frames(void)
{
	const uint8_t *msg;
	size_t len, used;
	static const uint8_t two[] = {0, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0, 0};
	CHECK_INT_EQ(etcd_grpc_frame_next(two, sizeof(two), 16, &msg, &len, &used), 1);
	CHECK_INT_EQ(len, 2);
	CHECK_INT_EQ(used, 7);
	CHECK_MEM_EQ(msg, len, "hi", 2);
	/* an empty message after it */
	CHECK_INT_EQ(etcd_grpc_frame_next(two + 7, 5, 16, &msg, &len, &used), 1);
	CHECK_INT_EQ(len, 0);
	for (size_t cut = 0; cut < 7; cut++)
		CHECK_INT_EQ(etcd_grpc_frame_next(two, cut, 16, &msg, &len, &used), 0);
	CHECK_INT_EQ(etcd_grpc_frame_next(two, sizeof(two), 1, &msg, &len, &used), -EMSGSIZE);
	static const uint8_t compressed[] = {1, 0, 0, 0, 0};
	CHECK_INT_EQ(etcd_grpc_frame_next(compressed, 5, 16, &msg, &len, &used), -EBADMSG);
	static const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff};
	CHECK_INT_EQ(etcd_grpc_frame_next(huge, 5, SIZE_MAX, &msg, &len, &used), 0);

	struct buf out = {0};
	CHECK_OK(etcd_grpc_watch_create(&out, 5, "a", 1, "b", 1, 42,
					ETCD_WATCH_PREV_KV | ETCD_WATCH_PROGRESS_NOTIFY));
	CHECK_OK(etcd_grpc_watch_cancel(&out, 5));
	CHECK_INT_EQ(etcd_grpc_frame_next((uint8_t *)out.data, out.len, 1024, &msg, &len, &used), 1);
	Etcdserverpb__WatchRequest *wr = etcdserverpb__watch_request__unpack(NULL, len, msg);
	CHECK(wr && wr->request_union_case ==
			ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST);
	Etcdserverpb__WatchCreateRequest *cr = wr->create_request;
	CHECK_MEM_EQ(cr->key.data, cr->key.len, "a", 1);
	CHECK_MEM_EQ(cr->range_end.data, cr->range_end.len, "b", 1);
	CHECK(cr->start_revision == 42 && cr->watch_id == 5 && cr->prev_kv && cr->progress_notify);
	etcdserverpb__watch_request__free_unpacked(wr, NULL);
	size_t first = used;
	CHECK_INT_EQ(etcd_grpc_frame_next((uint8_t *)out.data + first, out.len - first, 1024, &msg,
					  &len, &used),
		     1);
	CHECK_INT_EQ(first + used, out.len);
	wr = etcdserverpb__watch_request__unpack(NULL, len, msg);
	CHECK(wr && wr->request_union_case ==
			ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST &&
	      wr->cancel_request->watch_id == 5);
	etcdserverpb__watch_request__free_unpacked(wr, NULL);
	etcd_buf_reset(&out);
	/* refused: no key, an empty range end, a negative revision, no id */
	CHECK_INT_EQ(etcd_grpc_watch_create(&out, 1, "", 0, NULL, 0, 0, 0), -EINVAL);
	CHECK_INT_EQ(etcd_grpc_watch_create(&out, 1, "a", 1, "", 0, 0, 0), -EINVAL);
	CHECK_INT_EQ(etcd_grpc_watch_create(&out, 1, "a", 1, NULL, 0, -1, 0), -EINVAL);
	CHECK_INT_EQ(etcd_grpc_watch_create(&out, 0, "a", 1, NULL, 0, 0, 0), -EINVAL);
	CHECK_INT_EQ(out.len, 0);
}

/* every prefix and deterministic single-byte corruptions of valid bodies:
 * must parse or fail with -EBADMSG; ASan/LSan watch for the rest */
static void test_codec_hostile_mutations(void)
{
	const char *kinds[] = {"range", "txn", "lease_timetolive"};
	const char *bodies[] = {
	    range_body,
	    "{\"header\":{\"revision\":\"2\"},\"succeeded\":true,\"responses\":[{"
	    "\"response_put\":{\"prev_kv\":{\"key\":\"YQ==\"}}},{"
	    "\"response_range\":{\"kvs\":[{\"key\":\"YQ==\"}]}}]}",
	    "{\"header\":{},\"ID\":\"9\",\"TTL\":\"1\",\"keys\":[\"YQ==\"]}"};
	uint32_t seed = 12345;
	for (size_t k = 0; k < 3; k++) {
		size_t n = strlen(bodies[k]);
		char *buf = malloc(n + 1);
		CHECK(buf);
		for (size_t cut = 0; cut < n; cut++) {
			struct etcd_response *r = NULL;
			memcpy(buf, bodies[k], cut);
			int e = etcd_json_parse_response(kinds[k], buf, cut, &r, NULL);
			CHECK(e < 0);
			CHECK(r == NULL);
		}
		static const char junk[] = "\"{}[]:,0-9aZ=\\ \x01\xff";
		for (int i = 0; i < 3000; i++) {
			memcpy(buf, bodies[k], n + 1);
			seed = seed * 1103515245u + 12345u;
			size_t pos = (seed >> 8) % n;
			seed = seed * 1103515245u + 12345u;
			buf[pos] = junk[(seed >> 8) % (sizeof(junk) - 1)];
			struct etcd_response *r = NULL, *er = NULL;
			int e = etcd_json_parse_response(kinds[k], buf, n, &r, &er);
			CHECK(e == 0 || e == -EBADMSG || e == -EINVAL || e < 0);
			CHECK((e == 0) == (r != NULL));
			etcd_response_free(r);
			etcd_response_free(er);
		}
		free(buf);
	}
}

static void test_codec_helpers(void)
{
	uint8_t out[8];
	CHECK_INT_EQ(etcd_prefix_end("ab", 2, out), 2);
	CHECK_MEM_EQ(out, 2, "ac", 2);
	static const uint8_t ff[] = {'a', 0xff, 0xff};
	CHECK_INT_EQ(etcd_prefix_end(ff, 3, out), 1);
	CHECK_INT_EQ(out[0], 'b');
	static const uint8_t allff[] = {0xff, 0xff};
	CHECK_INT_EQ(etcd_prefix_end(allff, 2, out), 1);
	CHECK_INT_EQ(out[0], 0);
	CHECK_INT_EQ(etcd_prefix_end("", 0, out), 1);
	CHECK_INT_EQ(out[0], 0);
	struct etcd_kv kv = {.key = (uint8_t *)"k", .key_len = 1, .mod_revision = 3};
	struct etcd_kv *d = etcd_kv_dup(&kv);
	CHECK(d && d->value == NULL && d->mod_revision == 3 && d->key[1] == 0);
	etcd_kv_free(d);
	etcd_kv_free(NULL);
	etcd_response_free(NULL);
	etcd_watch_msg_free(NULL);
	etcd_client_free(NULL);
	etcd_call_cancel(NULL);
	etcd_watch_cancel(NULL);
	CHECK(strstr(etcd_strerror(-ERANGE), "compacted"));
	CHECK(strstr(etcd_strerror(-EMSGSIZE), "large"));
	for (int code = 0; code < 20; code++) {
		int e = etcd_grpc_to_errno(code);
		CHECK(e < 0);
	}
	CHECK_INT_EQ(etcd_grpc_to_errno(5), -ENOENT);
	CHECK_INT_EQ(etcd_grpc_to_errno(11), -ERANGE);
	CHECK_INT_EQ(etcd_grpc_to_errno(16), -EACCES);
	CHECK_INT_EQ(etcd_grpc_to_errno(7), -EPERM);
	CHECK_INT_EQ(etcd_grpc_to_errno(3), -EINVAL);
	CHECK_INT_EQ(etcd_grpc_to_errno(14), -EAGAIN);
	CHECK_INT_EQ(etcd_grpc_to_errno(2), -EIO);
	/* config validation */
	struct loop *l = NULL;
	CHECK_OK(loop_new(&l));
	struct etcd_client *c = (struct etcd_client *)(void *)&kv;
	struct etcd_config cfg = {0};
	CHECK_INT_EQ(etcd_client_new(l, &cfg, &c), -EINVAL);
	const char *bad = "ftp://x";
	cfg.endpoints = &bad;
	cfg.n_endpoints = 1;
	CHECK_INT_EQ(etcd_client_new(l, &cfg, &c), -EINVAL);
	CHECK(c == (struct etcd_client *)(void *)&kv);
	const char *good = "http://127.0.0.1:1/";
	cfg.endpoints = &good;
	CHECK_OK(etcd_client_new(l, &cfg, &c));
	CHECK_STR_EQ(etcd_client_endpoint(c), "http://127.0.0.1:1");
	struct etcd_watch *w = NULL;
	CHECK_INT_EQ(etcd_watch_start(c, "", 0, NULL, 0, 0, 0, NULL, NULL, &w), -EINVAL);
	CHECK_INT_EQ(etcd_lease_grant(c, 0, NULL, res_cb, NULL, NULL), -EINVAL);
	etcd_client_free(c);
	loop_free(l);
}

int main(void)
{
	RUN(test_codec_base64);
	RUN(test_codec_request_bodies);
	RUN(test_codec_responses);
	RUN(test_codec_watch_messages);
	RUN(test_codec_grpc_frames);
	RUN(test_codec_hostile_mutations);
	RUN(test_codec_helpers);
	return CHECK_EXIT();
}
