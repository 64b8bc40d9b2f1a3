/* SPDX-License-Identifier: MIT */
/*
 * fuzz_gateway.c - the etcd JSON gateway decoders (host/etcd/etcd_json.c) on
 * hostile bodies: etcd_json_parse_response for every kind,
 * etcd_json_auth_token and etcd_b64_decode (watches are not the gateway's:
 * fuzz_grpc).
 *
 * Input: byte 0 selects the decoder ((byte0 - 'a') mod 12, so seeds start with
 * a readable letter): a range, b put, c deleterange, d txn, e lease_grant,
 * f lease_keepalive, g lease_revoke, h lease_timetolive, i authenticate,
 * j compact, k auth token, l base64. The rest is the body.
 * Invariants checked besides memory safety: a failure returns -errno and
 * leaves the out pointer untouched; every decoded key/value is readable for
 * its stated length.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "fuzz.h"

static const char *const kinds[] = {"range",           "put",          "deleterange", "txn",
                                    "lease_grant",     "lease_keepalive", "lease_revoke",
                                    "lease_timetolive", "authenticate", "compact"};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define SEL_TOKEN N_KINDS
#define SEL_B64 (N_KINDS + 1)
#define N_SEL (N_KINDS + 2)

/* a sink the compiler cannot drop: makes every byte of a decoded buffer read */
static volatile uint8_t g_sink;
/* "untouched" markers for out pointers */
static struct etcd_response g_resp_sentinel;

static void touch(const uint8_t *p, size_t len)
{
	uint8_t x = 0;
	for (size_t i = 0; i < len; i++)
		x ^= p[i];
	g_sink ^= x;
}

static void touch_kvs(const struct etcd_kv *kvs, size_t n)
{
	FUZZ_CHECK(n == 0 || kvs != NULL);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(kvs[i].key_len == 0 || kvs[i].key != NULL);
		FUZZ_CHECK(kvs[i].value_len == 0 || kvs[i].value != NULL);
		if (kvs[i].key)
			touch(kvs[i].key, kvs[i].key_len);
		if (kvs[i].value)
			touch(kvs[i].value, kvs[i].value_len);
	}
}

static void touch_response(const struct etcd_response *r, int depth)
{
	FUZZ_CHECK(depth < 64);
	touch_kvs(r->kvs, r->n_kvs);
	touch_kvs(r->prev_kvs, r->n_prev_kvs);
	touch_kvs(r->keys, r->n_keys);
	if (r->error_message)
		touch((const uint8_t *)r->error_message, strlen(r->error_message));
	FUZZ_CHECK(r->n_responses == 0 || r->responses != NULL);
	for (size_t i = 0; i < r->n_responses; i++)
		touch_response(&r->responses[i], depth + 1);
}

static void fuzz_response(const char *kind, const char *body, size_t len)
{
	struct etcd_response *sentinel = &g_resp_sentinel;
	struct etcd_response *r = sentinel, *er = sentinel;
	int err = etcd_json_parse_response(kind, body, len, &r, &er);
	FUZZ_CHECK(err <= 0);
	if (err == 0) {
		FUZZ_CHECK(r != sentinel && r != NULL);
		touch_response(r, 0);
		etcd_response_free(r);
	} else {
		FUZZ_CHECK(r == sentinel);
		if (er != sentinel) {
			/* an error body: the response carries the gateway's error */
			FUZZ_CHECK(er != NULL);
			touch_response(er, 0);
			etcd_response_free(er);
		}
	}
	/* the same body without asking for the error response */
	r = sentinel;
	int err2 = etcd_json_parse_response(kind, body, len, &r, NULL);
	FUZZ_CHECK(err2 == err);
	if (err2 == 0)
		etcd_response_free(r);
}

static void fuzz_token(const char *body, size_t len)
{
	char *tok = NULL;
	int err = etcd_json_auth_token(body, len, &tok);
	FUZZ_CHECK(err <= 0);
	if (err == 0) {
		FUZZ_CHECK(tok != NULL && tok[0] != 0);
		/* it goes into an HTTP header: no control characters */
		for (const char *p = tok; *p; p++)
			FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
		free(tok);
	} else
		FUZZ_CHECK(tok == NULL);
}

static void fuzz_b64(const char *s, size_t len)
{
	uint8_t *out = NULL;
	size_t out_len = 0;
	int err = etcd_b64_decode(s, len, &out, &out_len);
	FUZZ_CHECK(err <= 0);
	if (err < 0)
		return;
	FUZZ_CHECK(out_len <= len);
	if (out_len)
		FUZZ_CHECK(out != NULL);
	if (out)
		touch(out, out_len);
	/* strict base64 round-trips exactly */
	char *again = etcd_b64_encode(out, out_len);
	FUZZ_CHECK(again != NULL);
	FUZZ_CHECK(strlen(again) == len && memcmp(again, s, len) == 0);
	free(again);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t sel = (uint8_t)(data[0] - 'a') % N_SEL;
	/* the body in its own exact-size buffer: a read past len is caught */
	size_t len = size - 1;
	char *body = malloc(len ? len : 1);
	if (!body)
		return 0;
	if (len)
		memcpy(body, data + 1, len);
	if (sel < N_KINDS)
		fuzz_response(kinds[sel], body, len);
	else if (sel == SEL_TOKEN)
		fuzz_token(body, len);
	else
		fuzz_b64(body, len);
	free(body);
	return 0;
}
