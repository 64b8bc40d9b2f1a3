/* SPDX-License-Identifier: MIT */
/*
 * election_node_record.c - encode and decode P/N/nodes/<node-id> (election_node_record.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "etcd/etcd.h"
#include "election/election_node_record.h"

/* printable copy, cut to max bytes */
static void node_record_put_printable(json_object *o, const char *key, const char *s, size_t max)
{
	char buf[NODE_RECORD_TEXT_MAX + NODE_RECORD_NODE_MAX + 2];
	size_t n = s ? strnlen(s, max) : 0;
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	buf[n] = '\0';
	json_object_object_add(o, key, json_object_new_string(buf));
}

int node_record_encode(const struct node_record *r, char **ret, size_t *ret_len)
{
	char rel[RELEASE_STRLEN];
	json_object *o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "v", json_object_new_int(NODE_RECORD_VERSION));
	node_record_put_printable(o, "node", r->node, NODE_RECORD_NODE_MAX);
	json_object_object_add(o, "release",
	                       json_object_new_string(release_format(r->release, rel, sizeof(rel))));
	node_record_put_printable(o, "state", r->state, NODE_RECORD_STATE_MAX);
	node_record_put_printable(o, "reason", r->reason, NODE_RECORD_TEXT_MAX);
	json_object_object_add(o, "since", json_object_new_int64(r->since));
	json_object_object_add(o, "ready", json_object_new_boolean(r->ready));
	node_record_put_printable(o, "not_ready", r->ready ? "" : r->not_ready, NODE_RECORD_TEXT_MAX);
	if (r->reconcile_at) {
		json_object *rc = json_object_new_object();
		json_object_object_add(rc, "at", json_object_new_int64(r->reconcile_at));
		json_object_object_add(rc, "ok", json_object_new_boolean(r->reconcile_ok));
		node_record_put_printable(rc, "error", r->reconcile_ok ? "" : r->reconcile_error,
		              NODE_RECORD_TEXT_MAX);
		json_object_object_add(o, "reconcile", rc);
	}
	if (r->host[0])
		node_record_put_printable(o, "host", r->host, NODE_RECORD_TEXT_MAX);
	if (r->n_previous) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_previous && i < NODE_RECORD_PREVIOUS_MAX; i++) {
			char hex[24];
			snprintf(hex, sizeof(hex), "%" PRIx64, (uint64_t)r->previous[i]);
			json_object_array_add(a, json_object_new_string(hex));
		}
		json_object_object_add(o, "previous", a);
	}
	size_t n = 0;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	char *d = s ? strndup(s, n) : NULL;
	json_object_put(o);
	if (!d)
		return -ENOMEM;
	*ret = d;
	*ret_len = n;
	return 0;
}

/* node_record_get_str - field key of o: absent (optional) -> "", else a string of at
 * most max printable ASCII bytes copied into out (max + 1 bytes) */
static int node_record_get_str(json_object *o, const char *key, bool required, char *out, size_t max)
{
	json_object *v;
	out[0] = '\0';
	if (!json_object_object_get_ex(o, key, &v))
		return required ? -EBADMSG : 0;
	if (!json_object_is_type(v, json_type_string))
		return -EBADMSG;
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	if (n > max || strlen(s) != n)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return -EBADMSG;
	memcpy(out, s, n + 1);
	return 0;
}

static int node_record_get_int(json_object *o, const char *key, bool required, int64_t min, int64_t *ret)
{
	json_object *v;
	*ret = 0;
	if (!json_object_object_get_ex(o, key, &v))
		return required ? -EBADMSG : 0;
	if (!json_object_is_type(v, json_type_int))
		return -EBADMSG;
	errno = 0;
	int64_t x = json_object_get_int64(v);
	if (errno != 0 || x < min)
		return -EBADMSG;
	*ret = x;
	return 0;
}

static int node_record_get_bool(json_object *o, const char *key, bool *ret)
{
	json_object *v;
	*ret = false;
	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return -EBADMSG;
	*ret = json_object_get_boolean(v);
	return 0;
}

/* "previous": an optional array of at most NODE_RECORD_PREVIOUS_MAX leases,
 * each in lower-case hex without padding (as in election key names) */
static int node_record_get_previous(json_object *o, struct node_record *r)
{
	json_object *a;
	if (!json_object_object_get_ex(o, "previous", &a))
		return 0;
	if (!json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) > NODE_RECORD_PREVIOUS_MAX)
		return -EBADMSG;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *v = json_object_array_get_idx(a, i);
		if (!json_object_is_type(v, json_type_string))
			return -EBADMSG;
		const char *s = json_object_get_string(v);
		size_t n = (size_t)json_object_get_string_len(v);
		if (n == 0 || n > 16 || strlen(s) != n || s[0] == '0')
			return -EBADMSG;
		uint64_t x = 0;
		for (size_t k = 0; k < n; k++) {
			int d = s[k] >= '0' && s[k] <= '9' ? s[k] - '0'
			      : s[k] >= 'a' && s[k] <= 'f' ? s[k] - 'a' + 10 : -1;
			if (d < 0)
				return -EBADMSG;
			x = x << 4 | (uint64_t)d;
		}
		if (x > INT64_MAX)
			return -EBADMSG;
		r->previous[r->n_previous++] = (int64_t)x;
	}
	return 0;
}

static bool node_record_state_word(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || *s == '-'))
			return false;
	return true;
}

int node_record_decode(const void *buf, size_t len, struct node_record *ret)
{
	struct node_record r;
	json_object *o = NULL, *rc;
	char rel[RELEASE_STRLEN];
	int64_t v;

	if (!buf || len == 0 || len > NODE_RECORD_MAX_BYTES || memchr(buf, '\0', len))
		return -EBADMSG;
	if (etcd_json_parse_object(buf, len, &o) < 0)
		return -EBADMSG;
	memset(&r, 0, sizeof(r));
	int e = -EBADMSG;
	if (!json_object_is_type(o, json_type_object))
		goto out;
	if (node_record_get_int(o, "v", true, 1, &v) < 0 || v > UINT32_MAX)
		goto out;
	r.version = (uint32_t)v;
	if (node_record_get_str(o, "node", true, r.node, NODE_RECORD_NODE_MAX) < 0 || !r.node[0] ||
	    strchr(r.node, '/'))
		goto out;
	if (node_record_get_str(o, "release", true, rel, sizeof(rel) - 1) < 0 ||
	    release_parse(rel, &r.release) < 0)
		goto out;
	if (node_record_get_str(o, "state", true, r.state, NODE_RECORD_STATE_MAX) < 0 || !node_record_state_word(r.state))
		goto out;
	if (node_record_get_str(o, "reason", false, r.reason, NODE_RECORD_TEXT_MAX) < 0 ||
	    node_record_get_int(o, "since", false, 0, &r.since) < 0 || node_record_get_bool(o, "ready", &r.ready) < 0 ||
	    node_record_get_str(o, "not_ready", false, r.not_ready, NODE_RECORD_TEXT_MAX) < 0)
		goto out;
	if (json_object_object_get_ex(o, "reconcile", &rc)) {
		if (!json_object_is_type(rc, json_type_object) ||
		    node_record_get_int(rc, "at", true, 1, &r.reconcile_at) < 0 ||
		    node_record_get_bool(rc, "ok", &r.reconcile_ok) < 0 ||
		    node_record_get_str(rc, "error", false, r.reconcile_error, NODE_RECORD_TEXT_MAX) < 0)
			goto out;
	}
	if (node_record_get_str(o, "host", false, r.host, NODE_RECORD_TEXT_MAX) < 0 ||
	    node_record_get_previous(o, &r) < 0)
		goto out;
	*ret = r;
	e = 0;
out:
	json_object_put(o);
	return e;
}

bool node_sessions_conflict(const int64_t *leases, size_t n, const struct node_record *rec,
                            int64_t rec_lease)
{
	if (n < 2)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool explained = rec && rec_lease == leases[i];
		for (size_t j = 0; rec && j < rec->n_previous; j++)
			explained = explained || rec->previous[j] == leases[i];
		if (!explained)
			return true;
	}
	return false;
}
