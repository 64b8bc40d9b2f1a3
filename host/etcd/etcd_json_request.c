/* SPDX-License-Identifier: MIT */
/*
 * etcd_json_request.c - request bodies for the JSON gateway: ops, compares, txns,
 * watch creation, lease and auth requests. Pure: fuzzed with the rest of
 * the codec.
 *
 * Design notes
 * - Bytes go out as base64 (the gateway's encoding of protobuf bytes);
 *   a required field that is empty is -EINVAL before anything is built.
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
