/* SPDX-License-Identifier: MIT */
/*
 * etcd_grpc_watch.c - the codec of etcd's gRPC watch stream: gRPC's
 * length-prefixed framing, WatchRequest (create, cancel) out, WatchResponse
 * in. Pure, no I/O: fuzzed (fuzz_grpc). Reading guide: etcd.c.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "proto/etcd_watch.pb-c.h"

/* gRPC message framing: a compressed flag byte, a 4-byte big-endian length */
#define GRPC_PREFIX 5

int etcd_grpc_frame_next(const uint8_t *p, size_t len, size_t max_msg, const uint8_t **ret_msg,
			 size_t *ret_msg_len, size_t *ret_used)
{
	if (len < GRPC_PREFIX)
		return 0;
	/* the stream is opened without grpc-encoding: etcd never compresses,
	 * and a flag other than 0 is not a message this client can read */
	if (p[0] != 0)
		return -EBADMSG;
	size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | (size_t)p[4];
	if (n > max_msg)
		return -EMSGSIZE;
	if (len - GRPC_PREFIX < n)
		return 0;
	*ret_msg = p + GRPC_PREFIX;
	*ret_msg_len = n;
	*ret_used = GRPC_PREFIX + n;
	return 1;
}

/* append one WatchRequest, framed */
static int etcd_grpc_append(struct buf *out, const Etcdserverpb__WatchRequest *wr)
{
	size_t n = etcdserverpb__watch_request__get_packed_size(wr);
	if (n > UINT32_MAX)
		return -EINVAL;
	uint8_t *msg = malloc(GRPC_PREFIX + n);
	if (!msg)
		return -ENOMEM;
	msg[0] = 0;
	msg[1] = (uint8_t)(n >> 24);
	msg[2] = (uint8_t)(n >> 16);
	msg[3] = (uint8_t)(n >> 8);
	msg[4] = (uint8_t)n;
	etcdserverpb__watch_request__pack(wr, msg + GRPC_PREFIX);
	int r = etcd_buf_append(out, msg, GRPC_PREFIX + n);
	free(msg);
	return r;
}

int etcd_grpc_watch_create(struct buf *out, int64_t watch_id, const void *key, size_t key_len,
			   const void *range_end, size_t range_end_len, int64_t start_revision,
			   unsigned flags)
{
	if (!key || key_len == 0 || (range_end_len && !range_end) || (range_end && !range_end_len) ||
	    start_revision < 0 ||
	    watch_id <= 0)
		return -EINVAL;
	Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
	cr.key.data = (uint8_t *)(uintptr_t)key;
	cr.key.len = key_len;
	if (range_end) {
		cr.range_end.data = (uint8_t *)(uintptr_t)range_end;
		cr.range_end.len = range_end_len;
	}
	cr.start_revision = start_revision;
	cr.progress_notify = (flags & ETCD_WATCH_PROGRESS_NOTIFY) != 0;
	cr.prev_kv = (flags & ETCD_WATCH_PREV_KV) != 0;
	cr.watch_id = watch_id;
	Etcdserverpb__WatchRequest wr = ETCDSERVERPB__WATCH_REQUEST__INIT;
	wr.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	wr.create_request = &cr;
	return etcd_grpc_append(out, &wr);
}

int etcd_grpc_watch_cancel(struct buf *out, int64_t watch_id)
{
	Etcdserverpb__WatchCancelRequest cr = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
	cr.watch_id = watch_id;
	Etcdserverpb__WatchRequest wr = ETCDSERVERPB__WATCH_REQUEST__INIT;
	wr.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
	wr.cancel_request = &cr;
	return etcd_grpc_append(out, &wr);
}

static void etcd_grpc_event_clear(struct etcd_event *e)
{
	etcd_kv_clear(&e->kv);
	if (e->prev_kv) {
		etcd_kv_clear(e->prev_kv);
		free(e->prev_kv);
	}
	memset(e, 0, sizeof(*e));
}

void etcd_watch_msg_free(struct etcd_watch_msg *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_events && m->events; i++)
		etcd_grpc_event_clear(&m->events[i]);
	free(m->events);
	free((char *)m->cancel_reason);
	free(m);
}

/* bytes copied with a NUL after them (etcd.h's etcd_kv convention) */
static int etcd_grpc_bytes(const ProtobufCBinaryData *b, uint8_t **ret, size_t *ret_len)
{
	if (b->len == 0) {
		*ret = NULL;
		*ret_len = 0;
		return 0;
	}
	uint8_t *p = malloc(b->len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, b->data, b->len);
	p[b->len] = 0;
	*ret = p;
	*ret_len = b->len;
	return 0;
}

static int etcd_grpc_kv(const Etcdserverpb__KeyValue *in, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	if (etcd_grpc_bytes(&in->key, &kv->key, &kv->key_len) < 0 ||
	    etcd_grpc_bytes(&in->value, &kv->value, &kv->value_len) < 0) {
		etcd_kv_clear(kv);
		return -ENOMEM;
	}
	kv->create_revision = in->create_revision;
	kv->mod_revision = in->mod_revision;
	kv->version = in->version;
	kv->lease = in->lease;
	return 0;
}

static int etcd_grpc_event(const Etcdserverpb__Event *in, struct etcd_event *e)
{
	if (!in->kv || in->kv->key.len == 0 || in->kv->mod_revision <= 0)
		return -EBADMSG; /* every event names its key and revision */
	if (in->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT)
		e->type = ETCD_EVENT_PUT;
	else if (in->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE)
		e->type = ETCD_EVENT_DELETE;
	else
		return -EBADMSG;
	if (etcd_grpc_kv(in->kv, &e->kv) < 0)
		return -ENOMEM;
	if (in->prev_kv) {
		e->prev_kv = calloc(1, sizeof(*e->prev_kv));
		if (!e->prev_kv || etcd_grpc_kv(in->prev_kv, e->prev_kv) < 0)
			return -ENOMEM;
	}
	return 0;
}

int etcd_grpc_parse_watch(const uint8_t *msg, size_t len, struct etcd_watch_msg **ret)
{
	Etcdserverpb__WatchResponse *wr = etcdserverpb__watch_response__unpack(NULL, len, msg);
	if (!wr)
		return -EBADMSG;
	int r = -EBADMSG;
	struct etcd_watch_msg *m = NULL;
	/* etcd puts a header on every response; an event message without one
	 * could not be placed in the revision order */
	if (!wr->header || wr->fragment)
		goto out;
	r = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto out;
	m->header.cluster_id = wr->header->cluster_id;
	m->header.member_id = wr->header->member_id;
	m->header.revision = wr->header->revision;
	m->header.raft_term = wr->header->raft_term;
	m->watch_id = wr->watch_id;
	m->created = wr->created;
	m->canceled = wr->canceled;
	m->compact_revision = wr->compact_revision;
	if (wr->cancel_reason && wr->cancel_reason[0] && !(m->cancel_reason = strdup(wr->cancel_reason)))
		goto out;
	if (wr->n_events > 0) {
		m->events = calloc(wr->n_events, sizeof(*m->events));
		if (!m->events)
			goto out;
		m->n_events = wr->n_events;
		for (size_t i = 0; i < wr->n_events; i++)
			if ((r = etcd_grpc_event(wr->events[i], &m->events[i])) < 0)
				goto out;
	}
	*ret = m;
	m = NULL;
	r = 0;
out:
	etcd_watch_msg_free(m);
	etcdserverpb__watch_response__free_unpacked(wr, NULL);
	return r;
}
