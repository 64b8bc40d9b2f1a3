/* SPDX-License-Identifier: MIT */
/*
 * runtime_keyqueue.c - the keyed plugin's work queue (runtime_keyqueue.h):
 * a chained hash table finds a key's entry, a doubly linked FIFO holds the
 * ready keys, a binary min-heap the waiting ones, so that every operation
 * is O(1) or O(log n) in the keys held.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_keyqueue.h"

enum kq_where { KQ_READY, KQ_WAITING, KQ_RUNNING };

struct kq_entry {
	struct kq_entry *hnext;	      /* hash chain */
	struct kq_entry *prev, *next; /* the ready FIFO */
	enum kq_where where;
	bool dirty;	   /* changed while running */
	uint32_t failures; /* in a row */
	size_t heap_i;	   /* KQ_WAITING: index in the heap */
	uint64_t since;	   /* KQ_READY: when it became ready */
	uint64_t due;	   /* KQ_WAITING: when it becomes ready */
	uint64_t hash;
	struct keyqueue_item item; /* KQ_RUNNING: what keyqueue_take handed out */
	size_t len;
	char key[]; /* len bytes + NUL */
};

struct keyqueue {
	struct keyqueue_config cfg;
	struct kq_entry **buckets;
	size_t n_buckets; /* a power of two */
	size_t n_entries;
	struct kq_entry *ready_head, *ready_tail;
	struct kq_entry **heap;
	size_t n_heap, heap_cap;
	size_t n_running; /* entries in KQ_RUNNING */
	uint64_t epoch;
	struct keyqueue_stats st;
};

static uint64_t kq_hash(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a */
	return h;
}

int keyqueue_new(const struct keyqueue_config *cfg, struct keyqueue **ret)
{
	struct keyqueue *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cfg.backoff_min_ms = cfg && cfg->backoff_min_ms ? cfg->backoff_min_ms : KEYQUEUE_BACKOFF_MIN_MS;
	q->cfg.backoff_max_ms = cfg && cfg->backoff_max_ms ? cfg->backoff_max_ms : KEYQUEUE_BACKOFF_MAX_MS;
	if (q->cfg.backoff_max_ms < q->cfg.backoff_min_ms)
		q->cfg.backoff_max_ms = q->cfg.backoff_min_ms;
	q->cfg.concurrency = cfg && cfg->concurrency ? cfg->concurrency : 1;
	q->n_buckets = 64;
	if (!(q->buckets = calloc(q->n_buckets, sizeof(*q->buckets)))) {
		free(q);
		return -ENOMEM;
	}
	q->epoch = 1;
	*ret = q;
	return 0;
}

static void kq_free_entries(struct keyqueue *q)
{
	for (size_t i = 0; i < q->n_buckets; i++)
		for (struct kq_entry *e = q->buckets[i], *next; e; e = next) {
			next = e->hnext;
			free(e);
		}
	memset(q->buckets, 0, q->n_buckets * sizeof(*q->buckets));
	q->n_entries = 0;
	q->ready_head = q->ready_tail = NULL;
	q->n_heap = 0;
	q->n_running = 0;
}

void keyqueue_free(struct keyqueue *q)
{
	if (!q)
		return;
	kq_free_entries(q);
	free(q->buckets);
	free(q->heap);
	free(q);
}

/* ---- the hash table ---- */

static struct kq_entry *kq_find(const struct keyqueue *q, const void *key, size_t len, uint64_t h)
{
	for (struct kq_entry *e = q->buckets[h & (q->n_buckets - 1)]; e; e = e->hnext)
		if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
			return e;
	return NULL;
}

/* double the buckets when the table is full; a failed grow only costs
 * longer chains */
static void kq_grow(struct keyqueue *q)
{
	if (q->n_entries < q->n_buckets || q->n_buckets > SIZE_MAX / 2 / sizeof(*q->buckets))
		return;
	size_t n = q->n_buckets * 2;
	struct kq_entry **b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < q->n_buckets; i++)
		for (struct kq_entry *e = q->buckets[i], *next; e; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	free(q->buckets);
	q->buckets = b;
	q->n_buckets = n;
}

static void kq_unhash(struct keyqueue *q, struct kq_entry *e)
{
	for (struct kq_entry **pp = &q->buckets[e->hash & (q->n_buckets - 1)]; *pp;
	     pp = &(*pp)->hnext)
		if (*pp == e) {
			*pp = e->hnext;
			q->n_entries--;
			return;
		}
}

/* ---- the ready FIFO ---- */

static void kq_ready_push(struct keyqueue *q, struct kq_entry *e, uint64_t now)
{
	e->where = KQ_READY;
	e->since = now;
	e->next = NULL;
	e->prev = q->ready_tail;
	if (q->ready_tail)
		q->ready_tail->next = e;
	else
		q->ready_head = e;
	q->ready_tail = e;
	q->st.ready++;
}

static void kq_ready_unlink(struct keyqueue *q, struct kq_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		q->ready_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		q->ready_tail = e->prev;
	e->prev = e->next = NULL;
	q->st.ready--;
}

/* ---- the waiting heap (by due time) ---- */

static void kq_heap_set(struct keyqueue *q, size_t i, struct kq_entry *e)
{
	q->heap[i] = e;
	e->heap_i = i;
}

static void kq_heap_up(struct keyqueue *q, size_t i)
{
	struct kq_entry *e = q->heap[i];
	while (i > 0 && q->heap[(i - 1) / 2]->due > e->due) {
		kq_heap_set(q, i, q->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	kq_heap_set(q, i, e);
}

static void kq_heap_down(struct keyqueue *q, size_t i)
{
	struct kq_entry *e = q->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= q->n_heap)
			break;
		if (c + 1 < q->n_heap && q->heap[c + 1]->due < q->heap[c]->due)
			c++;
		if (q->heap[c]->due >= e->due)
			break;
		kq_heap_set(q, i, q->heap[c]);
		i = c;
	}
	kq_heap_set(q, i, e);
}

static int kq_heap_push(struct keyqueue *q, struct kq_entry *e, uint64_t due)
{
	if (q->n_heap == q->heap_cap) {
		size_t cap = q->heap_cap ? q->heap_cap * 2 : 16;
		struct kq_entry **h = realloc(q->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		q->heap = h;
		q->heap_cap = cap;
	}
	e->where = KQ_WAITING;
	e->due = due;
	q->heap[q->n_heap] = e;
	e->heap_i = q->n_heap++;
	kq_heap_up(q, e->heap_i);
	q->st.waiting++;
	return 0;
}

static void kq_heap_remove(struct keyqueue *q, struct kq_entry *e)
{
	size_t i = e->heap_i;
	struct kq_entry *last = q->heap[--q->n_heap];
	q->st.waiting--;
	if (last == e)
		return;
	kq_heap_set(q, i, last);
	kq_heap_up(q, i);
	kq_heap_down(q, last->heap_i);
}

/* ---- the queue ---- */

int keyqueue_add(struct keyqueue *q, const void *key, size_t len, uint64_t now)
{
	if (len == 0 || len > KEYQUEUE_KEY_MAX)
		return -EINVAL;
	uint64_t h = kq_hash(key, len);
	struct kq_entry *e = kq_find(q, key, len, h);
	q->st.added++;
	if (e) {
		if (e->where == KQ_RUNNING)
			e->dirty = true;
		else if (e->where == KQ_WAITING) {
			kq_heap_remove(q, e);
			kq_ready_push(q, e, now);
		}
		return 0;
	}
	if (!(e = calloc(1, sizeof(*e) + len + 1)))
		return -ENOMEM;
	e->hash = h;
	e->len = len;
	memcpy(e->key, key, len);
	kq_grow(q);
	e->hnext = q->buckets[h & (q->n_buckets - 1)];
	q->buckets[h & (q->n_buckets - 1)] = e;
	q->n_entries++;
	kq_ready_push(q, e, now);
	return 0;
}

/* waiting keys whose time came become ready, in due order */
static void kq_wake_due(struct keyqueue *q, uint64_t now)
{
	while (q->n_heap && q->heap[0]->due <= now) {
		struct kq_entry *e = q->heap[0];
		kq_heap_remove(q, e);
		kq_ready_push(q, e, now);
	}
}

const struct keyqueue_item *keyqueue_take(struct keyqueue *q, uint64_t now)
{
	kq_wake_due(q, now);
	if (q->n_running >= q->cfg.concurrency || !q->ready_head)
		return NULL;
	struct kq_entry *e = q->ready_head;
	kq_ready_unlink(q, e);
	e->where = KQ_RUNNING;
	e->dirty = false;
	q->n_running++;
	e->item = (struct keyqueue_item){e->key, e->len, e->failures, q->epoch};
	return &e->item;
}

uint64_t keyqueue_next_due(const struct keyqueue *q)
{
	return q->n_heap ? q->heap[0]->due : 0;
}

uint64_t keyqueue_backoff_ns(const struct keyqueue *q, uint32_t n)
{
	uint64_t ms = q->cfg.backoff_min_ms;
	for (uint32_t i = 1; i < n && ms < q->cfg.backoff_max_ms; i++)
		ms *= 2;
	if (ms > q->cfg.backoff_max_ms)
		ms = q->cfg.backoff_max_ms;
	return ms * 1000000ull;
}

static void kq_forget(struct keyqueue *q, struct kq_entry *e)
{
	kq_unhash(q, e);
	free(e);
}

void keyqueue_settle(struct keyqueue *q, const void *key, size_t len, uint64_t epoch,
		     enum keyqueue_outcome outcome, uint64_t after_ns, uint64_t now)
{
	if (epoch != q->epoch || len == 0 || len > KEYQUEUE_KEY_MAX)
		return;
	struct kq_entry *e = kq_find(q, key, len, kq_hash(key, len));
	if (!e || e->where != KQ_RUNNING)
		return;
	q->n_running--;
	switch (outcome) {
	case KEYQUEUE_DONE:
		q->st.done++;
		e->failures = 0;
		break;
	case KEYQUEUE_FAILED:
		q->st.failed++;
		if (e->failures < UINT32_MAX)
			e->failures++;
		break;
	case KEYQUEUE_AFTER:
		q->st.requeued++;
		break;
	}
	if (e->dirty) {
		kq_ready_push(q, e, now); /* changed meanwhile: the change is news */
		return;
	}
	uint64_t delay = outcome == KEYQUEUE_FAILED  ? keyqueue_backoff_ns(q, e->failures)
			 : outcome == KEYQUEUE_AFTER ? after_ns
						     : 0;
	if (outcome == KEYQUEUE_DONE || (outcome == KEYQUEUE_AFTER && delay == 0)) {
		if (outcome == KEYQUEUE_DONE)
			kq_forget(q, e);
		else
			kq_ready_push(q, e, now);
		return;
	}
	if (kq_heap_push(q, e, now + delay) < 0)
		kq_ready_push(q, e, now); /* no memory for the heap: retry at once, never lose it */
}

void keyqueue_clear(struct keyqueue *q)
{
	q->st.dropped += q->n_entries;
	kq_free_entries(q);
	q->st.ready = q->st.waiting = 0;
	q->epoch++;
}

void keyqueue_get_stats(const struct keyqueue *q, uint64_t now, struct keyqueue_stats *ret)
{
	*ret = q->st;
	ret->running = q->n_running;
	ret->concurrency = q->cfg.concurrency;
	ret->depth = ret->ready + ret->waiting + ret->running;
	ret->oldest_ns = q->ready_head && now > q->ready_head->since ? now - q->ready_head->since : 0;
}
