/* SPDX-License-Identifier: MIT */
/*
 * etcd_json.c - the etcd v3 JSON gateway codec's primitives: strict base64,
 * gRPC codes, the typed field readers every decoder uses, and the JSON
 * parse of a body. Pure (no I/O, no logging above debug): fuzzed.
 *
 * The codec, by file: etcd_json.c (this), etcd_json_request.c (request
 * bodies out), etcd_json_response.c (unary answers in). Watches are not the
 * gateway's: etcd_grpc_watch.c.
 *
 * Design notes
 * - Everything from the gateway is hostile. A value of the wrong JSON type is
 *   -EBADMSG, never a silent zero; absent fields are zero because the gateway
 *   omits zero/false fields. int64/uint64 are accepted as JSON strings of
 *   decimal digits (what the gateway sends) or JSON integers.
 * - A successful response must carry a "header" object: that is the shape
 *   check that tells an etcd answer from any other JSON.
 * - Error bodies come unary or streaming, each in an etcd 3.4 and a 3.5
 *   shape (etcd_json_parse_error).
 * - Base64 is validated strictly (padding, alphabet, zero trailing bits).
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

/* ---- base64 ---- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *etcd_b64_encode(const void *src, size_t len)
{
	const uint8_t *s = src;
	if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
		return NULL;
	size_t out_len = (len + 2) / 3 * 4;
	char *out = malloc(out_len + 1);
	if (!out)
		return NULL;
	size_t o = 0, i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = b64_alphabet[v >> 6 & 63];
		out[o++] = b64_alphabet[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)s[i] << 16;
		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = b64_alphabet[v >> 6 & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	return out;
}

static int etcd_json_b64_val(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

int etcd_b64_decode(const char *src, size_t len, uint8_t **ret_buf, size_t *ret_len)
{
	if (len % 4 != 0)
		return -EBADMSG;
	size_t pad = 0;
	if (len >= 1 && src[len - 1] == '=')
		pad++;
	if (len >= 2 && src[len - 2] == '=')
		pad++;
	size_t out_len = len / 4 * 3 - pad;
	uint8_t *out = malloc(out_len + 1);
	if (!out)
		return -ENOMEM;
	size_t o = 0;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		bool last = i + 4 == len;
		for (int k = 0; k < 4; k++) {
			if (last && src[i + k] == '=' && (size_t)k >= 4 - pad) {
				v[k] = 0;
				continue;
			}
			v[k] = etcd_json_b64_val(src[i + k]);
			if (v[k] < 0) {
				free(out);
				return -EBADMSG;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		if (last && pad == 2 && (w & 0xffff) != 0) {
			free(out);
			return -EBADMSG; /* non-zero trailing bits: not canonical */
		}
		if (last && pad == 1 && (w & 0xff) != 0) {
			free(out);
			return -EBADMSG;
		}
		out[o++] = (uint8_t)(w >> 16);
		if (o < out_len || !last)
			out[o++] = (uint8_t)(w >> 8);
		if (o < out_len || !last)
			out[o++] = (uint8_t)w;
	}
	out[out_len] = 0;
	*ret_buf = out;
	*ret_len = out_len;
	return 0;
}

int etcd_grpc_to_errno(int grpc_code)
{
	switch (grpc_code) {
	case 3:
		return -EINVAL;
	case 5:
		return -ENOENT;
	case 7:
		return -EPERM;
	case 11:
		return -ERANGE;
	case 14:
		return -EAGAIN;
	case 16:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* ---- response parsing helpers ---- */

static int etcd_json_parse_dec_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;
	if (len == 0 || len > 20)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

/* etcd_json_get_u64 - field (absent = 0) as uint64 from a decimal string or a JSON int. */
int etcd_json_get_u64(json_object *o, const char *field, uint64_t *ret)
{
	json_object *v;
	if (!json_object_object_get_ex(o, field, &v)) {
		*ret = 0;
		return 0;
	}
	if (json_object_is_type(v, json_type_string))
		return etcd_json_parse_dec_u64(json_object_get_string(v),
				     (size_t)json_object_get_string_len(v), ret);
	if (json_object_is_type(v, json_type_int)) {
		/* json-c keeps big positive ints as uint64 internally */
		int64_t i = json_object_get_int64(v);
		if (i < 0)
			return -EBADMSG;
		if (i == INT64_MAX) {
			*ret = json_object_get_uint64(v);
			return 0;
		}
		*ret = (uint64_t)i;
		return 0;
	}
	return -EBADMSG;
}

/* etcd_json_get_i64 - field (absent = 0) as int64 from a decimal string or a JSON int. */
int etcd_json_get_i64(json_object *o, const char *field, int64_t *ret)
{
	json_object *v;
	if (!json_object_object_get_ex(o, field, &v)) {
		*ret = 0;
		return 0;
	}
	if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		size_t len = (size_t)json_object_get_string_len(v);
		bool neg = len > 0 && s[0] == '-';
		uint64_t u;
		int r = etcd_json_parse_dec_u64(s + neg, len - neg, &u);
		if (r < 0)
			return r;
		if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX)
			return -EBADMSG;
		*ret = neg ? (int64_t)(0 - u) : (int64_t)u;
		return 0;
	}
	if (json_object_is_type(v, json_type_int)) {
		errno = 0;
		int64_t i = json_object_get_int64(v);
		if (i == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
			return -EBADMSG;
		*ret = i;
		return 0;
	}
	return -EBADMSG;
}

int etcd_json_get_bool(json_object *o, const char *field, bool *ret)
{
	json_object *v;
	if (!json_object_object_get_ex(o, field, &v)) {
		*ret = false;
		return 0;
	}
	if (!json_object_is_type(v, json_type_boolean))
		return -EBADMSG;
	*ret = json_object_get_boolean(v);
	return 0;
}

/* etcd_json_get_typed - field of the given type; absent -> *ret NULL (returns 0). */
int etcd_json_get_typed(json_object *o, const char *field, json_type t, json_object **ret)
{
	json_object *v;
	if (!json_object_object_get_ex(o, field, &v) || json_object_is_type(v, json_type_null)) {
		*ret = NULL;
		return 0;
	}
	if (!json_object_is_type(v, t))
		return -EBADMSG;
	*ret = v;
	return 0;
}

/* etcd_json_get_bytes - base64 string field (absent = empty) into a malloc'd buffer
 * (NULL when empty unless keep_empty). */
int etcd_json_get_bytes(json_object *o, const char *field, uint8_t **ret, size_t *ret_len)
{
	json_object *v;
	int r = etcd_json_get_typed(o, field, json_type_string, &v);
	if (r < 0)
		return r;
	if (!v || json_object_get_string_len(v) == 0) {
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	return etcd_b64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v),
			       ret, ret_len);
}

int etcd_json_get_strdup(json_object *o, const char *field, const char **ret)
{
	json_object *v;
	int r = etcd_json_get_typed(o, field, json_type_string, &v);
	if (r < 0)
		return r;
	if (!v) {
		*ret = NULL;
		return 0;
	}
	char *s = strdup(json_object_get_string(v));
	if (!s)
		return -ENOMEM;
	*ret = s;
	return 0;
}

/* etcd_json_parse_kv - a mvccpb.KeyValue object into *kv (zeroed first; cleared on failure). */
int etcd_json_parse_kv(json_object *o, struct etcd_kv *kv)
{
	int r;
	memset(kv, 0, sizeof(*kv));
	if (!json_object_is_type(o, json_type_object))
		return -EBADMSG;
	json_object *k;
	if ((r = etcd_json_get_typed(o, "key", json_type_string, &k)) < 0)
		return r;
	if (!k || json_object_get_string_len(k) == 0)
		return -EBADMSG; /* etcd keys are never empty */
	if ((r = etcd_json_get_bytes(o, "key", &kv->key, &kv->key_len)) < 0 ||
	    (r = etcd_json_get_bytes(o, "value", &kv->value, &kv->value_len)) < 0 ||
	    (r = etcd_json_get_i64(o, "create_revision", &kv->create_revision)) < 0 ||
	    (r = etcd_json_get_i64(o, "mod_revision", &kv->mod_revision)) < 0 ||
	    (r = etcd_json_get_i64(o, "version", &kv->version)) < 0 ||
	    (r = etcd_json_get_i64(o, "lease", &kv->lease)) < 0)
		goto fail;
	return 0;
fail:
	etcd_kv_clear(kv);
	return r;
}

void etcd_json_kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; i < n && kvs; i++)
		etcd_kv_clear(&kvs[i]);
	free(kvs);
}

/* etcd_json_parse_kv_array - optional array field of kvs. */
int etcd_json_parse_kv_array(json_object *o, const char *field, struct etcd_kv **ret, size_t *ret_n)
{
	json_object *arr;
	int r = etcd_json_get_typed(o, field, json_type_array, &arr);
	if (r < 0)
		return r;
	*ret = NULL;
	*ret_n = 0;
	if (!arr)
		return 0;
	size_t n = json_object_array_length(arr);
	if (n == 0)
		return 0;
	struct etcd_kv *kvs = calloc(n, sizeof(*kvs));
	if (!kvs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r = etcd_json_parse_kv(json_object_array_get_idx(arr, i), &kvs[i]);
		if (r < 0) {
			etcd_json_kvs_free(kvs, i);
			return r;
		}
	}
	*ret = kvs;
	*ret_n = n;
	return 0;
}

int etcd_json_parse_header(json_object *o, struct etcd_header *h, bool required)
{
	json_object *hd;
	int r = etcd_json_get_typed(o, "header", json_type_object, &hd);
	if (r < 0)
		return r;
	if (!hd)
		return required ? -EBADMSG : 0;
	if ((r = etcd_json_get_u64(hd, "cluster_id", &h->cluster_id)) < 0 ||
	    (r = etcd_json_get_u64(hd, "member_id", &h->member_id)) < 0 ||
	    (r = etcd_json_get_i64(hd, "revision", &h->revision)) < 0 ||
	    (r = etcd_json_get_u64(hd, "raft_term", &h->raft_term)) < 0)
		return r;
	return 0;
}

int etcd_json_parse_object(const char *body, size_t len, json_object **ret)
{
	if (!body || len > INT_MAX)
		return -EBADMSG;
	struct json_tokener *tok = json_tokener_new_ex(ETCD_JSON_MAX_DEPTH);
	if (!tok)
		return -ENOMEM;
	json_object *o = json_tokener_parse_ex(tok, body, (int)len);
	int r = 0;
	if (json_tokener_get_error(tok) != json_tokener_success) {
		r = -EBADMSG;
		goto out;
	}
	for (size_t i = json_tokener_get_parse_end(tok); i < len; i++) {
		if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
			r = -EBADMSG;
			goto out;
		}
	}
	if (!o) {
		r = -EBADMSG; /* a bare null */
		goto out;
	}
	*ret = o;
	o = NULL;
out:
	json_object_put(o);
	json_tokener_free(tok);
	return r;
}
