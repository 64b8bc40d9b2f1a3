/* SPDX-License-Identifier: MIT */
/*
 * etcd_values.c - helpers over the client's plain data types (etcd.h): a
 * prefix's range end, kv copies, the event hold, error texts. No JSON,
 * no I/O.
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

void etcd_kv_clear(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

void etcd_kv_free(struct etcd_kv *kv)
{
	if (!kv)
		return;
	etcd_kv_clear(kv);
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

/* struct buf (etcd_internal.h): the transport's and the watch stream's byte buffers */
void etcd_buf_reset(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int etcd_buf_append(struct buf *b, const void *p, size_t n)
{
	if (n > SIZE_MAX - b->len - 1)
		return -ENOMEM;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}
