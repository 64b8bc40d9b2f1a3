/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_shadow_keys.c - the keys of a keyed plugin's shadow run
 * (ABI 1.3 reconcile_key; runtime_instance_shadow.c): the queue keys the
 * worker answered for the run's snapshot batches (key_of's, or the events'
 * own: worker_keys.c, as in a term), each once, in the order first seen,
 * for one reconcile_key each after the run's reconcile. Reading guide:
 * runtime_instance.c.
 *
 * This list is not the instance's work queue (runtime_keyqueue.c), which
 * only a term fills: no key of a preview is ever reconciled for real, and
 * none of a term is previewed. One pass, no back-off and no requeue-after:
 * a preview asks what each key's reconcile would write now. At most
 * PLUGIN_SHADOW_MAX_KEYS keys; past that the run previews the first ones
 * and says it was cut short.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#include "runtime/runtime_instance_internal.h"

struct pi_shadow_keys {
	ProtobufCBinaryData *k; /* copies */
	size_t n, cap, next;
	bool truncated;
};

static bool pi_shadow_keys_have(const struct pi_shadow_keys *ks, const uint8_t *k, size_t len)
{
	for (size_t i = 0; i < ks->n; i++)
		if (ks->k[i].len == len && memcmp(ks->k[i].data, k, len) == 0)
			return true;
	return false;
}

static int pi_shadow_keys_push(struct pi_shadow_keys *ks, const uint8_t *k, size_t len)
{
	if (pi_shadow_keys_have(ks, k, len))
		return 0;
	if (ks->n == PLUGIN_SHADOW_MAX_KEYS) {
		ks->truncated = true;
		return 0;
	}
	if (ks->n == ks->cap) {
		size_t cap = ks->cap ? ks->cap * 2 : 16;
		ProtobufCBinaryData *nk = realloc(ks->k, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		ks->k = nk;
		ks->cap = cap;
	}
	uint8_t *c = malloc(len);
	if (!c)
		return -ENOMEM;
	memcpy(c, k, len);
	ks->k[ks->n++] = (ProtobufCBinaryData){len, c};
	return 0;
}

int pi_shadow_keys_add(struct pi_shadow_keys **ksp, const EventDone *d, size_t n_events)
{
	/* the worker's keys are hostile: each checked, at most one per event */
	if (d->keys_incomplete)
		return -EPROTO;
	if (d->n_keys > n_events)
		return -EBADMSG;
	for (size_t i = 0; i < d->n_keys; i++)
		if (d->keys[i].len == 0 || d->keys[i].len > LH_KEY_MAX)
			return -EBADMSG;
	if (!*ksp && d->n_keys && !(*ksp = calloc(1, sizeof(**ksp))))
		return -ENOMEM;
	for (size_t i = 0; i < d->n_keys; i++) {
		int r = pi_shadow_keys_push(*ksp, d->keys[i].data, d->keys[i].len);
		if (r < 0)
			return r;
	}
	return 0;
}

int pi_shadow_keys_next(struct pi_shadow_keys *ks, uint64_t run, struct event **ret)
{
	*ret = NULL;
	if (!ks || ks->next == ks->n)
		return 0;
	const ProtobufCBinaryData *k = &ks->k[ks->next];
	struct event *ev = calloc(1, sizeof(*ev) + k->len + 1);
	if (!ev)
		return -ENOMEM;
	ev->kind = EV_KEY;
	ev->shadow = true;
	ev->shadow_run = run;
	ev->doc_len = k->len;
	memcpy(ev->doc, k->data, k->len);
	ks->next++;
	*ret = ev;
	return 0;
}

size_t pi_shadow_keys_count(const struct pi_shadow_keys *ks)
{
	return ks ? ks->n : 0;
}

bool pi_shadow_keys_truncated(const struct pi_shadow_keys *ks)
{
	return ks && ks->truncated;
}

void pi_shadow_keys_free(struct pi_shadow_keys *ks)
{
	if (!ks)
		return;
	for (size_t i = 0; i < ks->n; i++)
		free(ks->k[i].data);
	free(ks->k);
	free(ks);
}
