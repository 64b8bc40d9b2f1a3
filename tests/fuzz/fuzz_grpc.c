/* SPDX-License-Identifier: MIT */
/*
 * fuzz_grpc.c - the watch stream's decoders (host/etcd/etcd_grpc_watch.c)
 * on hostile bytes: the input is what etcd would send on the stream, read
 * the way etcd_stream_drain reads it: gRPC frames (etcd_grpc_frame_next),
 * each decoded as a WatchResponse (etcd_grpc_parse_watch).
 * Invariants checked besides memory safety: a frame never claims bytes it
 * does not have; a failure leaves the out pointer untouched; every event
 * names a key and a positive revision, and every decoded key/value is
 * readable for its stated length.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "fuzz.h"

static volatile uint8_t g_sink;
static struct etcd_watch_msg g_msg_sentinel;

static void touch_kv(const struct etcd_kv *kv)
{
	FUZZ_CHECK(kv->key_len == 0 || kv->key != NULL);
	FUZZ_CHECK(kv->value_len == 0 || kv->value != NULL);
	uint8_t x = 0;
	for (size_t i = 0; i < kv->key_len; i++)
		x ^= kv->key[i];
	for (size_t i = 0; i < kv->value_len; i++)
		x ^= kv->value[i];
	g_sink ^= x;
}

static void check_msg(const uint8_t *msg, size_t len)
{
	struct etcd_watch_msg *m = &g_msg_sentinel;
	int err = etcd_grpc_parse_watch(msg, len, &m);
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ENOMEM);
	if (err < 0) {
		FUZZ_CHECK(m == &g_msg_sentinel);
		return;
	}
	FUZZ_CHECK(m != NULL);
	FUZZ_CHECK(m->n_events == 0 || m->events != NULL);
	for (size_t i = 0; i < m->n_events; i++) {
		const struct etcd_event *e = &m->events[i];
		FUZZ_CHECK(e->type == ETCD_EVENT_PUT || e->type == ETCD_EVENT_DELETE);
		FUZZ_CHECK(e->kv.key_len > 0 && e->kv.mod_revision > 0);
		touch_kv(&e->kv);
		if (e->prev_kv)
			touch_kv(e->prev_kv);
	}
	if (m->cancel_reason)
		g_sink ^= (uint8_t)strlen(m->cancel_reason);
	etcd_watch_msg_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0;
	while (pos < size) {
		const uint8_t *msg = NULL;
		size_t len = 0, used = 0;
		int r = etcd_grpc_frame_next(data + pos, size - pos, 64 * 1024, &msg, &len, &used);
		FUZZ_CHECK(r == 1 || r == 0 || r == -EBADMSG || r == -EMSGSIZE);
		if (r != 1)
			break;
		FUZZ_CHECK(used >= len && used <= size - pos);
		FUZZ_CHECK(msg >= data + pos && msg + len <= data + size);
		check_msg(msg, len);
		pos += used;
	}
	return 0;
}
