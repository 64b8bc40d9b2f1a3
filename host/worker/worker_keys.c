/* SPDX-License-Identifier: MIT */
/*
 * worker_keys.c - the worker's half of keyed reconcile (ABI 1.3
 * reconcile_key, plugin.h "Keyed reconcile"): the queue keys a watch batch
 * stands for (key_of, or each event's own key), answered to the host with
 * the batch's EventDone, and one key's reconcile. The queue itself is the
 * host's (host/runtime/runtime_keyqueue.h): a crash of this process loses
 * nothing of it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker_internal.h"

/* the keys of one answer must fit in a bus message (NNG_OPT_RECVMAXSZ,
 * 1 MiB) beside the rest of it */
#define WORKER_KEYS_BYTES_MAX (768u << 10)

void worker_keys_free(struct worker *w)
{
	for (size_t i = 0; i < w->n_keys; i++)
		free(w->keys[i].data);
	free(w->keys);
	w->keys = NULL;
	w->n_keys = 0;
}

static bool worker_keys_have(const struct worker *w, const void *k, size_t len)
{
	for (size_t i = 0; i < w->n_keys; i++)
		if (w->keys[i].len == len && memcmp(w->keys[i].data, k, len) == 0)
			return true;
	return false;
}

/* one event's queue key into buf: its length, 0 for none */
static size_t worker_keys_of(struct worker *w, const struct lh_watch_batch *b,
			     const struct lh_watch_event *ev, char *buf)
{
	if (w->desc.key_of) {
		int32_t n = w->desc.key_of(&w->ctx, b, ev, buf, LH_KEY_MAX);
		if (n >= 0 && n <= (int32_t)LH_KEY_MAX)
			return (size_t)n;
		char line[160];
		snprintf(line, sizeof(line), "key_of returned %d for a watch event: its own key is "
			 "queued", (int)n);
		w->api.log(&w->ctx, LH_LOG_WARN, line);
	}
	size_t n = ev->kv.key_len > LH_KEY_MAX ? 0 : (size_t)ev->kv.key_len;
	if (n)
		memcpy(buf, ev->kv.key, n);
	return n;
}

int worker_keys_collect(struct worker *w, const struct lh_watch_batch *b)
{
	worker_keys_free(w);
	if (!w->desc.reconcile_key || b->n_events == 0)
		return 0;
	if (!(w->keys = calloc(b->n_events, sizeof(*w->keys))))
		return -ENOMEM;
	char *buf = malloc(LH_KEY_MAX);
	if (!buf)
		return -ENOMEM;
	size_t bytes = 0;
	int r = 0;
	for (size_t i = 0; i < b->n_events; i++) {
		size_t n = worker_keys_of(w, b, &b->events[i], buf);
		if (n == 0 || worker_keys_have(w, buf, n))
			continue; /* a batch's repeats reach the queue once */
		if ((bytes += n) > WORKER_KEYS_BYTES_MAX) {
			snprintf(w->main.errmsg, sizeof(w->main.errmsg), "the queue keys of one watch batch "
				 "exceed %u KiB", WORKER_KEYS_BYTES_MAX >> 10);
			r = -E2BIG;
			break;
		}
		uint8_t *k = malloc(n);
		if (!k) {
			r = -ENOMEM;
			break;
		}
		memcpy(k, buf, n);
		w->keys[w->n_keys++] = (ProtobufCBinaryData){n, k};
	}
	free(buf);
	return r;
}

int32_t worker_keys_run(struct worker *w, struct worker_call *c,
                        const Leasehold__Bus__ReconcileKey *rk)
{
	if (!w->desc.reconcile_key) {
		snprintf(c->errmsg, sizeof(c->errmsg), "the plugin has no reconcile_key");
		return -ENOTSUP;
	}
	if (!rk || rk->key.len == 0 || rk->key.len > LH_KEY_MAX) {
		snprintf(c->errmsg, sizeof(c->errmsg), "bad queue key from the host");
		return -EBADMSG;
	}
	char *k = malloc(rk->key.len + 1);
	if (!k)
		return -ENOMEM;
	memcpy(k, rk->key.data, rk->key.len);
	k[rk->key.len] = 0;
	int32_t r = w->desc.reconcile_key(&w->ctx, k, (uint32_t)rk->key.len);
	free(k);
	if (r > 0) { /* LH_REQUEUE_AFTER_MS */
		c->requeue_after_ms = (uint32_t)r;
		r = 0;
	}
	return r;
}
