/*
 * etcd_internal.h - private glue between the etcd client (etcd.c) and its JSON
 * codec (etcd_json.c). Not for use outside host/etcd*.c and their tests.
 *
 * Every builder returns 0 and a malloc'd, NUL-terminated JSON text in *ret
 * (the caller frees it), or -EINVAL / -ENOMEM with *ret untouched.
 */
#ifndef LH_ETCD_INTERNAL_H
#define LH_ETCD_INTERNAL_H

#include <json-c/json.h>

#include "etcd.h"

/* Nesting depth accepted from the gateway (a txn response is ~6 deep). */
#define ETCD_JSON_MAX_DEPTH 32

/* etcd_b64_encode - standard base64 with padding of src[0..len) into a
 * malloc'd NUL-terminated string (caller frees). Returns NULL on ENOMEM. */
char *etcd_b64_encode(const void *src, size_t len);

/* etcd_b64_decode - strict standard base64 (padding required, no whitespace,
 * zero trailing bits). On success *ret_buf is malloc'd (len + 1 bytes, NUL
 * after the data; caller frees) and *ret_len the decoded length. Returns 0,
 * -EBADMSG or -ENOMEM; outputs untouched on failure. */
int etcd_b64_decode(const char *src, size_t len, uint8_t **ret_buf, size_t *ret_len);

/* etcd_grpc_to_errno - the mapping documented in etcd.h ("Errors"). */
int etcd_grpc_to_errno(int grpc_code);

/* ---- request bodies (borrowed inputs, malloc'd output) ---- */
int etcd_json_range_req(const struct etcd_op *op, char **ret);
int etcd_json_put_req(const struct etcd_op *op, char **ret);
int etcd_json_delete_req(const struct etcd_op *op, char **ret);
int etcd_json_txn_req(const struct etcd_compare *cmps, size_t n_cmps, const struct etcd_op *success,
		      size_t n_success, const struct etcd_op *failure, size_t n_failure,
		      char **ret);
/* {"<field>":"<value>"} with an int64 rendered as a string, e.g. {"TTL":"5"} */
int etcd_json_int_req(const char *field, int64_t value, char **ret);
int etcd_json_timetolive_req(int64_t lease_id, bool with_keys, char **ret);
int etcd_json_compact_req(int64_t revision, bool physical, char **ret);
int etcd_json_auth_req(const char *user, const char *password, char **ret);
int etcd_json_watch_req(const void *key, size_t key_len, const void *range_end,
			size_t range_end_len, int64_t start_revision, unsigned flags, char **ret);

/* ---- responses ---- */

/* etcd_json_parse_object - parse exactly one JSON value from body[0..len)
 * (surrounding whitespace allowed, nothing else). On success *ret owns the
 * object (json_object_put). Returns 0 or -EBADMSG / -ENOMEM. */
int etcd_json_parse_object(const char *body, size_t len, json_object **ret);

/* etcd_json_response_from_object - as etcd_json_parse_response, from an
 * already parsed object (borrowed). */
int etcd_json_response_from_object(const char *kind, json_object *root, struct etcd_response **ret,
				   struct etcd_response **ret_err_resp);

/* etcd_json_auth_token - the "token" of a successful auth/authenticate body,
 * malloc'd (caller frees). Returns 0, a mapped gateway error, -EBADMSG or
 * -ENOMEM; *ret_token untouched on failure. */
int etcd_json_auth_token(const char *body, size_t len, char **ret_token);

/* etcd_json_watch_msg_from_object - as etcd_json_parse_watch, from a parsed
 * object (borrowed). */
int etcd_json_watch_msg_from_object(json_object *root, struct etcd_watch_msg **ret);

#endif
