/* SPDX-License-Identifier: MIT */
/*
 * etcd_json.c - the etcd v3 JSON gateway codec: request bodies out, responses
 * and watch messages in. Pure (no I/O, no logging above debug): fuzzed.
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

/* ---- request building ---- */

static int etcd_json_add_b64(json_object *o, const char *field, const void *p, size_t len)
{
	char *s = etcd_b64_encode(p, len);
	if (!s)
		return -ENOMEM;
	json_object *v = json_object_new_string(s);
	free(s);
	if (!v || json_object_object_add(o, field, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int etcd_json_add_int(json_object *o, const char *field, int64_t n)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRId64, n);
	json_object *v = json_object_new_string(buf);
	if (!v || json_object_object_add(o, field, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int etcd_json_add_str(json_object *o, const char *field, const char *s)
{
	json_object *v = json_object_new_string(s);
	if (!v || json_object_object_add(o, field, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int etcd_json_add_bool(json_object *o, const char *field, bool b)
{
	json_object *v = json_object_new_boolean(b);
	if (!v || json_object_object_add(o, field, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

static int etcd_json_add_obj(json_object *o, const char *field, json_object *v)
{
	if (json_object_object_add(o, field, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* etcd_json_to_text - serialise and release o; *ret malloc'd. */
static int etcd_json_to_text(json_object *o, char **ret)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE);
	char *d = s ? strdup(s) : NULL;
	json_object_put(o);
	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

static int etcd_json_check_bytes(const void *p, size_t len, bool required)
{
	if (len > 0 && !p)
		return -EINVAL;
	if (required && len == 0)
		return -EINVAL;
	return 0;
}

static const char *etcd_json_sort_order_name(enum etcd_sort_order o)
{
	switch (o) {
	case ETCD_SORT_NONE:
		return "NONE";
	case ETCD_SORT_ASCEND:
		return "ASCEND";
	case ETCD_SORT_DESCEND:
		return "DESCEND";
	}
	return NULL;
}

static const char *etcd_json_sort_target_name(enum etcd_sort_target t)
{
	switch (t) {
	case ETCD_SORT_KEY:
		return "KEY";
	case ETCD_SORT_VERSION:
		return "VERSION";
	case ETCD_SORT_CREATE:
		return "CREATE";
	case ETCD_SORT_MOD:
		return "MOD";
	case ETCD_SORT_VALUE:
		return "VALUE";
	}
	return NULL;
}

/* etcd_json_op_object - the RangeRequest / PutRequest / DeleteRangeRequest object for op
 * taken as `type` (ignores op->type). *ret owned by the caller. */
static int etcd_json_op_object(const struct etcd_op *op, enum etcd_op_type type, json_object **ret)
{
	int r;
	if (!op)
		return -EINVAL;
	r = etcd_json_check_bytes(op->key, op->key_len, true);
	if (r < 0)
		return r;
	if (op->range_end && type != ETCD_OP_PUT) {
		r = etcd_json_check_bytes(op->range_end, op->range_end_len, true);
		if (r < 0)
			return r;
	}
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	r = etcd_json_add_b64(o, "key", op->key, op->key_len);
	if (r < 0)
		goto fail;
	switch (type) {
	case ETCD_OP_RANGE: {
		const char *so = etcd_json_sort_order_name(op->sort_order);
		const char *st = etcd_json_sort_target_name(op->sort_target);
		if (!so || !st || op->limit < 0 || op->revision < 0) {
			r = -EINVAL;
			goto fail;
		}
		if (op->range_end &&
		    (r = etcd_json_add_b64(o, "range_end", op->range_end, op->range_end_len)) < 0)
			goto fail;
		if (op->limit > 0 && (r = etcd_json_add_int(o, "limit", op->limit)) < 0)
			goto fail;
		if (op->revision > 0 && (r = etcd_json_add_int(o, "revision", op->revision)) < 0)
			goto fail;
		if (op->sort_order != ETCD_SORT_NONE && (r = etcd_json_add_str(o, "sort_order", so)) < 0)
			goto fail;
		if (op->sort_target != ETCD_SORT_KEY && (r = etcd_json_add_str(o, "sort_target", st)) < 0)
			goto fail;
		if (op->keys_only && (r = etcd_json_add_bool(o, "keys_only", true)) < 0)
			goto fail;
		if (op->count_only && (r = etcd_json_add_bool(o, "count_only", true)) < 0)
			goto fail;
		break;
	}
	case ETCD_OP_PUT:
		r = etcd_json_check_bytes(op->value, op->value_len, false);
		if (r < 0 || op->lease < 0) {
			r = -EINVAL;
			goto fail;
		}
		if ((r = etcd_json_add_b64(o, "value", op->value, op->value_len)) < 0)
			goto fail;
		if (op->lease != 0 && (r = etcd_json_add_int(o, "lease", op->lease)) < 0)
			goto fail;
		if (op->prev_kv && (r = etcd_json_add_bool(o, "prev_kv", true)) < 0)
			goto fail;
		break;
	case ETCD_OP_DELETE:
		if (op->range_end &&
		    (r = etcd_json_add_b64(o, "range_end", op->range_end, op->range_end_len)) < 0)
			goto fail;
		if (op->prev_kv && (r = etcd_json_add_bool(o, "prev_kv", true)) < 0)
			goto fail;
		break;
	default:
		r = -EINVAL;
		goto fail;
	}
	*ret = o;
	return 0;
fail:
	json_object_put(o);
	return r;
}

static int etcd_json_single_op_req(const struct etcd_op *op, enum etcd_op_type type, char **ret)
{
	json_object *o = NULL;
	int r = etcd_json_op_object(op, type, &o);
	if (r < 0)
		return r;
	return etcd_json_to_text(o, ret);
}

int etcd_json_range_req(const struct etcd_op *op, char **ret)
{
	return etcd_json_single_op_req(op, ETCD_OP_RANGE, ret);
}

int etcd_json_put_req(const struct etcd_op *op, char **ret)
{
	return etcd_json_single_op_req(op, ETCD_OP_PUT, ret);
}

int etcd_json_delete_req(const struct etcd_op *op, char **ret)
{
	return etcd_json_single_op_req(op, ETCD_OP_DELETE, ret);
}

static int etcd_json_request_ops(const struct etcd_op *ops, size_t n, json_object **ret)
{
	int r;
	if (n > 0 && !ops)
		return -EINVAL;
	json_object *arr = json_object_new_array();
	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		static const char *const names[] = {"request_range", "request_put",
						    "request_delete_range"};
		json_object *inner = NULL, *wrap = NULL;
		if ((unsigned)ops[i].type > ETCD_OP_DELETE) {
			r = -EINVAL;
			goto fail;
		}
		r = etcd_json_op_object(&ops[i], ops[i].type, &inner);
		if (r < 0)
			goto fail;
		wrap = json_object_new_object();
		if (!wrap) {
			json_object_put(inner);
			r = -ENOMEM;
			goto fail;
		}
		if ((r = etcd_json_add_obj(wrap, names[ops[i].type], inner)) < 0 ||
		    json_object_array_add(arr, wrap) < 0) {
			json_object_put(wrap);
			r = r < 0 ? r : -ENOMEM;
			goto fail;
		}
	}
	*ret = arr;
	return 0;
fail:
	json_object_put(arr);
	return r;
}

static int etcd_json_compare_object(const struct etcd_compare *cmp, json_object **ret)
{
	static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
	static const char *const results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
	static const char *const fields[] = {"version", "create_revision", "mod_revision", "value",
					     "lease"};
	int r;
	if ((unsigned)cmp->target > ETCD_CMP_LEASE || (unsigned)cmp->result > ETCD_CMP_NOT_EQUAL)
		return -EINVAL;
	if ((r = etcd_json_check_bytes(cmp->key, cmp->key_len, true)) < 0)
		return r;
	if (cmp->range_end && (r = etcd_json_check_bytes(cmp->range_end, cmp->range_end_len, true)) < 0)
		return r;
	if (cmp->target == ETCD_CMP_VALUE &&
	    (r = etcd_json_check_bytes(cmp->value, cmp->value_len, false)) < 0)
		return r;
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	if ((r = etcd_json_add_str(o, "target", targets[cmp->target])) < 0 ||
	    (r = etcd_json_add_str(o, "result", results[cmp->result])) < 0 ||
	    (r = etcd_json_add_b64(o, "key", cmp->key, cmp->key_len)) < 0)
		goto fail;
	if (cmp->range_end && (r = etcd_json_add_b64(o, "range_end", cmp->range_end, cmp->range_end_len)) < 0)
		goto fail;
	/* the target_union oneof must be present even when zero */
	if (cmp->target == ETCD_CMP_VALUE)
		r = etcd_json_add_b64(o, "value", cmp->value, cmp->value_len);
	else
		r = etcd_json_add_int(o, fields[cmp->target], cmp->number);
	if (r < 0)
		goto fail;
	*ret = o;
	return 0;
fail:
	json_object_put(o);
	return r;
}

int etcd_json_txn_req(const struct etcd_compare *cmps, size_t n_cmps, const struct etcd_op *success,
		      size_t n_success, const struct etcd_op *failure, size_t n_failure, char **ret)
{
	int r;
	json_object *o = NULL, *arr = NULL, *ops = NULL;
	if (n_cmps > 0 && !cmps)
		return -EINVAL;
	o = json_object_new_object();
	arr = json_object_new_array();
	if (!o || !arr) {
		r = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n_cmps; i++) {
		json_object *c = NULL;
		if ((r = etcd_json_compare_object(&cmps[i], &c)) < 0)
			goto fail;
		if (json_object_array_add(arr, c) < 0) {
			json_object_put(c);
			r = -ENOMEM;
			goto fail;
		}
	}
	r = etcd_json_add_obj(o, "compare", arr);
	arr = NULL;
	if (r < 0)
		goto fail;
	if ((r = etcd_json_request_ops(success, n_success, &ops)) < 0)
		goto fail;
	r = etcd_json_add_obj(o, "success", ops);
	ops = NULL;
	if (r < 0)
		goto fail;
	if ((r = etcd_json_request_ops(failure, n_failure, &ops)) < 0)
		goto fail;
	r = etcd_json_add_obj(o, "failure", ops);
	ops = NULL;
	if (r < 0)
		goto fail;
	return etcd_json_to_text(o, ret);
fail:
	json_object_put(arr);
	json_object_put(o);
	return r;
}

int etcd_json_int_req(const char *field, int64_t value, char **ret)
{
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	int r = etcd_json_add_int(o, field, value);
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	return etcd_json_to_text(o, ret);
}

/* {"<ifield>": v} plus "<bfield>": true when flag (false is the default) */
static int etcd_json_int_flag_req(const char *ifield, int64_t v, const char *bfield, bool flag, char **ret)
{
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	int r = etcd_json_add_int(o, ifield, v);
	if (r == 0 && flag)
		r = etcd_json_add_bool(o, bfield, true);
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	return etcd_json_to_text(o, ret);
}

int etcd_json_timetolive_req(int64_t lease_id, bool with_keys, char **ret)
{
	return etcd_json_int_flag_req("ID", lease_id, "keys", with_keys, ret);
}

int etcd_json_compact_req(int64_t revision, bool physical, char **ret)
{
	return etcd_json_int_flag_req("revision", revision, "physical", physical, ret);
}

int etcd_json_auth_req(const char *user, const char *password, char **ret)
{
	if (!user)
		return -EINVAL;
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	int r = etcd_json_add_str(o, "name", user);
	if (r == 0)
		r = etcd_json_add_str(o, "password", password ? password : "");
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	return etcd_json_to_text(o, ret);
}

int etcd_json_watch_req(const void *key, size_t key_len, const void *range_end,
			size_t range_end_len, int64_t start_revision, unsigned flags, char **ret)
{
	int r;
	if ((r = etcd_json_check_bytes(key, key_len, true)) < 0)
		return r;
	if (range_end && (r = etcd_json_check_bytes(range_end, range_end_len, true)) < 0)
		return r;
	if (start_revision < 0)
		return -EINVAL;
	json_object *o = json_object_new_object(), *cr = json_object_new_object();
	if (!o || !cr) {
		json_object_put(cr);
		r = -ENOMEM;
		goto fail;
	}
	if ((r = etcd_json_add_obj(o, "create_request", cr)) < 0)
		goto fail;
	if ((r = etcd_json_add_b64(cr, "key", key, key_len)) < 0)
		goto fail;
	if (range_end && (r = etcd_json_add_b64(cr, "range_end", range_end, range_end_len)) < 0)
		goto fail;
	if (start_revision > 0 && (r = etcd_json_add_int(cr, "start_revision", start_revision)) < 0)
		goto fail;
	if ((flags & ETCD_WATCH_PREV_KV) && (r = etcd_json_add_bool(cr, "prev_kv", true)) < 0)
		goto fail;
	if ((flags & ETCD_WATCH_PROGRESS_NOTIFY) && (r = etcd_json_add_bool(cr, "progress_notify", true)) < 0)
		goto fail;
	return etcd_json_to_text(o, ret);
fail:
	json_object_put(o);
	return r;
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
static int etcd_json_get_u64(json_object *o, const char *field, uint64_t *ret)
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
static int etcd_json_get_i64(json_object *o, const char *field, int64_t *ret)
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

static int etcd_json_get_bool(json_object *o, const char *field, bool *ret)
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
static int etcd_json_get_typed(json_object *o, const char *field, json_type t, json_object **ret)
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
static int etcd_json_get_bytes(json_object *o, const char *field, uint8_t **ret, size_t *ret_len)
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

static int etcd_json_get_strdup(json_object *o, const char *field, const char **ret)
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

static void etcd_json_kv_clear(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

/* etcd_json_parse_kv - a mvccpb.KeyValue object into *kv (zeroed first; cleared on failure). */
static int etcd_json_parse_kv(json_object *o, struct etcd_kv *kv)
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
	etcd_json_kv_clear(kv);
	return r;
}

static void etcd_json_kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; i < n && kvs; i++)
		etcd_json_kv_clear(&kvs[i]);
	free(kvs);
}

/* etcd_json_parse_kv_array - optional array field of kvs. */
static int etcd_json_parse_kv_array(json_object *o, const char *field, struct etcd_kv **ret, size_t *ret_n)
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

static int etcd_json_parse_header(json_object *o, struct etcd_header *h, bool required)
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

/* ---- watch messages ---- */

static void etcd_json_event_clear(struct etcd_event *e)
{
	etcd_json_kv_clear(&e->kv);
	if (e->prev_kv) {
		etcd_json_kv_clear(e->prev_kv);
		free(e->prev_kv);
	}
	memset(e, 0, sizeof(*e));
}

void etcd_watch_msg_free(struct etcd_watch_msg *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_events && m->events; i++)
		etcd_json_event_clear(&m->events[i]);
	free(m->events);
	free((char *)m->cancel_reason);
	free((char *)m->error_message);
	free(m);
}

static int etcd_json_parse_event(json_object *o, struct etcd_event *e)
{
	json_object *t, *kv, *pkv;
	int r;
	if (!json_object_is_type(o, json_type_object))
		return -EBADMSG;
	if ((r = etcd_json_get_typed(o, "kv", json_type_object, &kv)) < 0 ||
	    (r = etcd_json_get_typed(o, "prev_kv", json_type_object, &pkv)) < 0)
		return r;
	if (!kv)
		return -EBADMSG;
	e->type = ETCD_EVENT_PUT;
	if (json_object_object_get_ex(o, "type", &t)) {
		if (json_object_is_type(t, json_type_string)) {
			const char *s = json_object_get_string(t);
			if (strcmp(s, "DELETE") == 0)
				e->type = ETCD_EVENT_DELETE;
			else if (strcmp(s, "PUT") != 0)
				return -EBADMSG;
		} else if (json_object_is_type(t, json_type_int)) {
			int64_t v = json_object_get_int64(t);
			if (v == 1)
				e->type = ETCD_EVENT_DELETE;
			else if (v != 0)
				return -EBADMSG;
		} else
			return -EBADMSG;
	}
	if ((r = etcd_json_parse_kv(kv, &e->kv)) < 0)
		return r;
	if (e->kv.mod_revision <= 0)
		return -EBADMSG; /* every event carries its revision */
	if (pkv) {
		e->prev_kv = calloc(1, sizeof(*e->prev_kv));
		if (!e->prev_kv)
			return -ENOMEM;
		if ((r = etcd_json_parse_kv(pkv, e->prev_kv)) < 0)
			return r;
	}
	return 0;
}

int etcd_json_watch_msg_from_object(json_object *root, struct etcd_watch_msg **ret)
{
	json_object *res, *err, *arr;
	int r;
	if (!root || !json_object_is_type(root, json_type_object))
		return -EBADMSG;
	struct etcd_watch_msg *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if ((r = etcd_json_get_typed(root, "error", json_type_object, &err)) < 0)
		goto fail;
	if (err) {
		json_object *code;
		m->is_error = true;
		/* 3.4 says "grpc_code", 3.5 "code" */
		if ((r = etcd_json_get_typed(err, "grpc_code", json_type_int, &code)) < 0 ||
		    (r = etcd_json_get_strdup(err, "message", &m->error_message)) < 0)
			goto fail;
		if (!code && (r = etcd_json_get_typed(err, "code", json_type_int, &code)) < 0)
			goto fail;
		if (code) {
			int64_t c = json_object_get_int64(code);
			m->grpc_code = c < 0 || c > 1000 ? 2 : (int)c;
		}
		*ret = m;
		return 0;
	}
	if ((r = etcd_json_get_typed(root, "result", json_type_object, &res)) < 0)
		goto fail;
	if (!res) {
		r = -EBADMSG;
		goto fail;
	}
	if ((r = etcd_json_parse_header(res, &m->header, true)) < 0 ||
	    (r = etcd_json_get_i64(res, "watch_id", &m->watch_id)) < 0 ||
	    (r = etcd_json_get_bool(res, "created", &m->created)) < 0 ||
	    (r = etcd_json_get_bool(res, "canceled", &m->canceled)) < 0 ||
	    (r = etcd_json_get_i64(res, "compact_revision", &m->compact_revision)) < 0 ||
	    (r = etcd_json_get_strdup(res, "cancel_reason", &m->cancel_reason)) < 0 ||
	    (r = etcd_json_get_typed(res, "events", json_type_array, &arr)) < 0)
		goto fail;
	if (arr && json_object_array_length(arr) > 0) {
		size_t n = json_object_array_length(arr);
		m->events = calloc(n, sizeof(*m->events));
		if (!m->events) {
			r = -ENOMEM;
			goto fail;
		}
		m->n_events = n;
		for (size_t i = 0; i < n; i++) {
			if ((r = etcd_json_parse_event(json_object_array_get_idx(arr, i), &m->events[i])) < 0)
				goto fail;
		}
	}
	*ret = m;
	return 0;
fail:
	etcd_watch_msg_free(m);
	return r;
}

int etcd_json_parse_watch(const char *body, size_t len, struct etcd_watch_msg **ret)
{
	json_object *root = NULL;
	int r = etcd_json_parse_object(body, len, &root);
	if (r < 0)
		return r;
	r = etcd_json_watch_msg_from_object(root, ret);
	json_object_put(root);
	return r;
}

/* ---- small public helpers that belong with the data types ---- */

size_t etcd_prefix_end(const void *prefix, size_t len, uint8_t *out)
{
	const uint8_t *p = prefix;
	size_t n = len;
	while (n > 0 && p[n - 1] == 0xff)
		n--;
	if (n == 0) {
		out[0] = 0;
		return 1;
	}
	memmove(out, p, n);
	out[n - 1]++;
	return n;
}

struct etcd_kv *etcd_kv_dup(const struct etcd_kv *kv)
{
	if (!kv)
		return NULL;
	struct etcd_kv *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	*d = *kv;
	d->key = malloc(kv->key_len + 1);
	d->value = kv->value_len ? malloc(kv->value_len + 1) : NULL;
	if (!d->key || (kv->value_len && !d->value)) {
		free(d->key);
		free(d->value);
		free(d);
		return NULL;
	}
	if (kv->key_len)
		memcpy(d->key, kv->key, kv->key_len);
	d->key[kv->key_len] = 0;
	if (kv->value_len) {
		memcpy(d->value, kv->value, kv->value_len);
		d->value[kv->value_len] = 0;
	}
	return d;
}

void etcd_kv_free(struct etcd_kv *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->value);
	free(kv);
}

int etcd_event_hold_add(struct etcd_event_hold *h, const struct etcd_event *events, size_t n)
{
	if (h->n + n > h->cap) {
		size_t c = h->cap ? h->cap : 16;
		while (c < h->n + n)
			c *= 2;
		struct etcd_held_event *ne = realloc(h->ev, c * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		h->ev = ne;
		h->cap = c;
	}
	for (size_t i = 0; i < n; i++) {
		struct etcd_held_event *d = &h->ev[h->n + i];
		d->type = events[i].type;
		d->kv = etcd_kv_dup(&events[i].kv);
		d->prev_kv = events[i].prev_kv ? etcd_kv_dup(events[i].prev_kv) : NULL;
		if (!d->kv || (events[i].prev_kv && !d->prev_kv)) {
			etcd_kv_free(d->kv);
			etcd_kv_free(d->prev_kv);
			for (size_t k = 0; k < i; k++) {
				etcd_kv_free(h->ev[h->n + k].kv);
				etcd_kv_free(h->ev[h->n + k].prev_kv);
			}
			return -ENOMEM;
		}
	}
	h->n += n;
	return 0;
}

void etcd_event_hold_clear(struct etcd_event_hold *h)
{
	for (size_t i = 0; i < h->n; i++) {
		etcd_kv_free(h->ev[i].kv);
		etcd_kv_free(h->ev[i].prev_kv);
	}
	free(h->ev);
	h->ev = NULL;
	h->n = h->cap = 0;
}

const char *etcd_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case -ETIMEDOUT:
		return "etcd: deadline passed, outcome unknown";
	case -ECONNREFUSED:
		return "etcd: no endpoint could be reached";
	case -EBADMSG:
		return "etcd: malformed or unexpected response";
	case -EMSGSIZE:
		return "etcd: response too large";
	case -ENOENT:
		return "etcd: not found";
	case -ERANGE:
		return "etcd: revision compacted";
	case -EACCES:
		return "etcd: authentication failed";
	case -EPERM:
		return "etcd: permission denied";
	case -EINVAL:
		return "etcd: invalid argument";
	case -EAGAIN:
		return "etcd: unavailable";
	case -ECANCELED:
		return "etcd: cancelled";
	case -EKEYREJECTED:
		return "etcd: TLS failed (the server's certificate not trusted, or a TLS file "
		       "that cannot be read or does not fit: see --etcd-cacert, --etcd-cert, "
		       "--etcd-key)";
	case -EIO:
		return "etcd: request failed";
	case -ENOMEM:
		return "etcd: out of memory";
	default:
		return "etcd: unknown error";
	}
}
