/* SPDX-License-Identifier: MIT */
/*
 * etcd_json_response.c - unary responses from the JSON gateway: range, put,
 * delete, txn (nested), lease time-to-live, error bodies, the auth token.
 * Pure: fuzzed (fuzz_gateway).
 *
 * The shape rules are in etcd_json.c's design notes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"


static void etcd_json_response_clear(struct etcd_response *r)
{
	etcd_json_kvs_free(r->kvs, r->n_kvs);
	etcd_json_kvs_free(r->prev_kvs, r->n_prev_kvs);
	etcd_json_kvs_free(r->keys, r->n_keys);
	for (size_t i = 0; i < r->n_responses && r->responses; i++)
		etcd_json_response_clear(&r->responses[i]);
	free(r->responses);
	free((char *)r->error_message);
	memset(r, 0, sizeof(*r));
}

void etcd_response_free(struct etcd_response *r)
{
	if (!r)
		return;
	etcd_json_response_clear(r);
	free(r);
}

static int etcd_json_parse_range_body(json_object *o, struct etcd_response *resp)
{
	int r;
	resp->op_type = ETCD_OP_RANGE;
	if ((r = etcd_json_parse_kv_array(o, "kvs", &resp->kvs, &resp->n_kvs)) < 0 ||
	    (r = etcd_json_get_bool(o, "more", &resp->more)) < 0 ||
	    (r = etcd_json_get_i64(o, "count", &resp->count)) < 0)
		return r;
	return 0;
}

static int etcd_json_parse_put_body(json_object *o, struct etcd_response *resp)
{
	json_object *pk;
	int r;
	resp->op_type = ETCD_OP_PUT;
	if ((r = etcd_json_get_typed(o, "prev_kv", json_type_object, &pk)) < 0)
		return r;
	if (!pk)
		return 0;
	resp->prev_kvs = calloc(1, sizeof(*resp->prev_kvs));
	if (!resp->prev_kvs)
		return -ENOMEM;
	if ((r = etcd_json_parse_kv(pk, resp->prev_kvs)) < 0) {
		free(resp->prev_kvs);
		resp->prev_kvs = NULL;
		return r;
	}
	resp->n_prev_kvs = 1;
	return 0;
}

static int etcd_json_parse_delete_body(json_object *o, struct etcd_response *resp)
{
	int r;
	resp->op_type = ETCD_OP_DELETE;
	if ((r = etcd_json_get_i64(o, "deleted", &resp->deleted)) < 0 ||
	    (r = etcd_json_parse_kv_array(o, "prev_kvs", &resp->prev_kvs, &resp->n_prev_kvs)) < 0)
		return r;
	return 0;
}

static int etcd_json_parse_txn_body(json_object *o, struct etcd_response *resp, int depth);

/* etcd_json_parse_response_op - one txn ResponseOp {"response_put":{..}} etc. */
static int etcd_json_parse_response_op(json_object *o, struct etcd_response *resp, int depth)
{
	json_object *v;
	int r;
	if (!json_object_is_type(o, json_type_object) || json_object_object_length(o) != 1)
		return -EBADMSG;
	if ((r = etcd_json_get_typed(o, "response_range", json_type_object, &v)) < 0)
		return r;
	if (v) {
		if ((r = etcd_json_parse_header(v, &resp->header, false)) < 0)
			return r;
		return etcd_json_parse_range_body(v, resp);
	}
	if ((r = etcd_json_get_typed(o, "response_put", json_type_object, &v)) < 0)
		return r;
	if (v) {
		if ((r = etcd_json_parse_header(v, &resp->header, false)) < 0)
			return r;
		return etcd_json_parse_put_body(v, resp);
	}
	if ((r = etcd_json_get_typed(o, "response_delete_range", json_type_object, &v)) < 0)
		return r;
	if (v) {
		if ((r = etcd_json_parse_header(v, &resp->header, false)) < 0)
			return r;
		return etcd_json_parse_delete_body(v, resp);
	}
	if ((r = etcd_json_get_typed(o, "response_txn", json_type_object, &v)) < 0)
		return r;
	if (v && depth < 8) {
		if ((r = etcd_json_parse_header(v, &resp->header, false)) < 0)
			return r;
		return etcd_json_parse_txn_body(v, resp, depth + 1);
	}
	return -EBADMSG;
}

static int etcd_json_parse_txn_body(json_object *o, struct etcd_response *resp, int depth)
{
	json_object *arr;
	int r;
	if ((r = etcd_json_get_bool(o, "succeeded", &resp->succeeded)) < 0 ||
	    (r = etcd_json_get_typed(o, "responses", json_type_array, &arr)) < 0)
		return r;
	if (!arr)
		return 0;
	size_t n = json_object_array_length(arr);
	if (n == 0)
		return 0;
	resp->responses = calloc(n, sizeof(*resp->responses));
	if (!resp->responses)
		return -ENOMEM;
	resp->n_responses = n; /* cleared entries are safe to free */
	for (size_t i = 0; i < n; i++) {
		r = etcd_json_parse_response_op(json_object_array_get_idx(arr, i), &resp->responses[i],
				      depth);
		if (r < 0)
			return r;
	}
	return 0;
}

static int etcd_json_parse_timetolive_body(json_object *o, struct etcd_response *resp)
{
	json_object *arr;
	int r;
	if ((r = etcd_json_get_i64(o, "ID", &resp->lease_id)) < 0 ||
	    (r = etcd_json_get_i64(o, "TTL", &resp->ttl)) < 0 ||
	    (r = etcd_json_get_i64(o, "grantedTTL", &resp->granted_ttl)) < 0 ||
	    (r = etcd_json_get_typed(o, "keys", json_type_array, &arr)) < 0)
		return r;
	if (!arr)
		return 0;
	size_t n = json_object_array_length(arr);
	if (n == 0)
		return 0;
	resp->keys = calloc(n, sizeof(*resp->keys));
	if (!resp->keys)
		return -ENOMEM;
	resp->n_keys = n;
	for (size_t i = 0; i < n; i++) {
		json_object *k = json_object_array_get_idx(arr, i);
		if (!json_object_is_type(k, json_type_string) || json_object_get_string_len(k) == 0)
			return -EBADMSG;
		r = etcd_b64_decode(json_object_get_string(k),
				    (size_t)json_object_get_string_len(k), &resp->keys[i].key,
				    &resp->keys[i].key_len);
		if (r < 0)
			return r;
	}
	return 0;
}

/* etcd_json_parse_error - if root is an error body, fill an error response and return
 * the mapped -errno (> 0 return never); returns 1 when root is not an error.
 * The shapes (etcd-gateway notes, "etcd versions" in the design doc):
 *   etcd 3.4 unary      {"error":"..","code":N,"message":".."}
 *   etcd 3.5 unary      {"code":N,"message":"..","details":[..]}
 *   etcd 3.4 streaming  {"error":{"grpc_code":N,"message":"..",..}}
 *   etcd 3.5 streaming  {"error":{"code":N,"message":".."}} */
static int etcd_json_parse_error(json_object *root, struct etcd_response **ret_err_resp)
{
	json_object *err, *code = NULL, *msg = NULL;
	int grpc = 0;
	if (!json_object_object_get_ex(root, "error", &err)) {
		/* 3.5 unary form: every success carries a "header", no error does */
		if (!json_object_object_get_ex(root, "code", NULL) ||
		    json_object_object_get_ex(root, "header", NULL))
			return 1;
		if (etcd_json_get_typed(root, "code", json_type_int, &code) < 0 ||
		    etcd_json_get_typed(root, "message", json_type_string, &msg) < 0)
			return -EBADMSG;
	} else if (json_object_is_type(err, json_type_object)) {
		/* streaming form: 3.4 says "grpc_code", 3.5 "code" */
		if (etcd_json_get_typed(err, "grpc_code", json_type_int, &code) < 0 ||
		    etcd_json_get_typed(err, "message", json_type_string, &msg) < 0)
			return -EBADMSG;
		if (!code && etcd_json_get_typed(err, "code", json_type_int, &code) < 0)
			return -EBADMSG;
	} else {
		/* unary form; LeaseGrantResponse also has an "error" string, so
		 * only a body with a "code" is an error */
		if (!json_object_object_get_ex(root, "code", NULL))
			return 1;
		if (etcd_json_get_typed(root, "code", json_type_int, &code) < 0 ||
		    etcd_json_get_typed(root, "message", json_type_string, &msg) < 0)
			return -EBADMSG;
		if (!msg && json_object_is_type(err, json_type_string))
			msg = err;
	}
	if (!code)
		return -EBADMSG;
	int64_t c64 = json_object_get_int64(code);
	if (c64 < 0 || c64 > 1000)
		return -EBADMSG;
	grpc = (int)c64;
	int mapped = etcd_grpc_to_errno(grpc);
	if (ret_err_resp) {
		struct etcd_response *er = calloc(1, sizeof(*er));
		if (!er)
			return -ENOMEM;
		er->grpc_code = grpc;
		if (msg) {
			er->error_message = strdup(json_object_get_string(msg));
			if (!er->error_message) {
				free(er);
				return -ENOMEM;
			}
		}
		*ret_err_resp = er;
	}
	return mapped;
}

int etcd_json_response_from_object(const char *kind, json_object *root, struct etcd_response **ret,
				   struct etcd_response **ret_err_resp)
{
	int r;
	if (!kind || !root || !json_object_is_type(root, json_type_object))
		return -EBADMSG;
	r = etcd_json_parse_error(root, ret_err_resp);
	if (r <= 0)
		return r;
	json_object *body = root;
	if (strcmp(kind, "lease_keepalive") == 0) {
		/* streaming RPC: {"result":{...}} */
		if ((r = etcd_json_get_typed(root, "result", json_type_object, &body)) < 0)
			return r;
		if (!body)
			return -EBADMSG;
	}
	struct etcd_response *resp = calloc(1, sizeof(*resp));
	if (!resp)
		return -ENOMEM;
	if ((r = etcd_json_parse_header(body, &resp->header, true)) < 0)
		goto fail;
	if (strcmp(kind, "range") == 0)
		r = etcd_json_parse_range_body(body, resp);
	else if (strcmp(kind, "put") == 0)
		r = etcd_json_parse_put_body(body, resp);
	else if (strcmp(kind, "deleterange") == 0)
		r = etcd_json_parse_delete_body(body, resp);
	else if (strcmp(kind, "txn") == 0)
		r = etcd_json_parse_txn_body(body, resp, 0);
	else if (strcmp(kind, "lease_grant") == 0 || strcmp(kind, "lease_keepalive") == 0) {
		if ((r = etcd_json_get_i64(body, "ID", &resp->lease_id)) == 0)
			r = etcd_json_get_i64(body, "TTL", &resp->ttl);
	} else if (strcmp(kind, "lease_timetolive") == 0)
		r = etcd_json_parse_timetolive_body(body, resp);
	else if (strcmp(kind, "lease_revoke") == 0 || strcmp(kind, "compact") == 0)
		r = 0;
	else if (strcmp(kind, "authenticate") == 0) {
		json_object *tok;
		r = etcd_json_get_typed(body, "token", json_type_string, &tok);
		if (r == 0 && (!tok || json_object_get_string_len(tok) == 0))
			r = -EBADMSG;
	} else
		r = -EINVAL;
	if (r < 0)
		goto fail;
	*ret = resp;
	return 0;
fail:
	etcd_response_free(resp);
	return r;
}

int etcd_json_parse_response(const char *kind, const char *body, size_t len,
			     struct etcd_response **ret, struct etcd_response **ret_err_resp)
{
	json_object *root = NULL;
	int r = etcd_json_parse_object(body, len, &root);
	if (r < 0)
		return r;
	r = etcd_json_response_from_object(kind, root, ret, ret_err_resp);
	json_object_put(root);
	return r;
}

int etcd_json_auth_token(const char *body, size_t len, char **ret_token)
{
	json_object *root = NULL, *tok;
	int r = etcd_json_parse_object(body, len, &root);
	if (r < 0)
		return r;
	if (!json_object_is_type(root, json_type_object)) {
		r = -EBADMSG;
		goto out;
	}
	r = etcd_json_parse_error(root, NULL);
	if (r <= 0)
		goto out;
	struct etcd_header h;
	if ((r = etcd_json_parse_header(root, &h, true)) < 0 ||
	    (r = etcd_json_get_typed(root, "token", json_type_string, &tok)) < 0)
		goto out;
	if (!tok || json_object_get_string_len(tok) == 0) {
		r = -EBADMSG;
		goto out;
	}
	/* the token goes into an HTTP header: refuse control characters */
	const char *t = json_object_get_string(tok);
	for (const char *p = t; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			r = -EBADMSG;
			goto out;
		}
	}
	if ((size_t)json_object_get_string_len(tok) != strlen(t)) {
		r = -EBADMSG;
		goto out;
	}
	char *d = strdup(t);
	if (!d) {
		r = -ENOMEM;
		goto out;
	}
	*ret_token = d;
	r = 0;
out:
	json_object_put(root);
	return r;
}
