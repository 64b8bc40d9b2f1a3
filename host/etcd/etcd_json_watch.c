/* SPDX-License-Identifier: MIT */
/*
 * etcd_json_watch.c - watch stream messages from the JSON gateway: created,
 * events, cancelled, compacted. Pure: fuzzed (fuzz_gateway).
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
