/* SPDX-License-Identifier: MIT */
/*
 * runtime_keyqueue.h - the work queue of a keyed plugin (ABI 1.3
 * reconcile_key): the keys that changed and still need a reconcile, each
 * held once however often it changed, handed out in the order they first
 * became due, up to `concurrency` different keys at once (never one key
 * twice), with a per-key exponential back-off after a
 * failure and "again after D" on request.
 *
 * A key is in one of three places: ready (a FIFO), waiting (a min-heap by
 * due time: a back-off or a requeue-after) or running (taken, not yet
 * settled). Adding a key that is ready changes nothing (deduplication);
 * adding one that waits makes it ready now (a new change is news, the
 * back-off was for the old one) but keeps its failure count; adding one
 * that runs marks it dirty (it stays out of the FIFO, so it is never taken
 * a second time while it runs), and settling a dirty key makes it ready again
 * whatever the outcome, so a change that lands during its own reconcile is
 * never lost.
 *
 * Back-off: the n-th failure in a row waits min(min_ms << (n - 1), max_ms);
 * a success forgets the count.
 *
 * Epochs: keyqueue_clear (the term ended) drops every key and starts a new
 * epoch; settling a key taken in an older epoch is ignored, so a reconcile
 * that was in flight when leadership moved cannot touch the next term's
 * queue.
 *
 * Memory: each distinct key costs one allocation (its bytes inline) plus a
 * hash slot; the queue holds at most the distinct keys changed and not yet
 * reconciled. Keys are bytes (no NUL needed); each stored key has a NUL
 * after it for the caller's convenience.
 *
 * Threading: none; the owner's thread (the daemon's loop). Errors: 0 or
 * -errno (-ENOMEM: nothing changed).
 */
#ifndef LH_RUNTIME_KEYQUEUE_H
#define LH_RUNTIME_KEYQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct keyqueue;

struct keyqueue_config {
	uint32_t backoff_min_ms; /* 0: KEYQUEUE_BACKOFF_MIN_MS */
	uint32_t backoff_max_ms; /* 0: KEYQUEUE_BACKOFF_MAX_MS; raised to min if below */
	uint32_t concurrency;    /* keys running at once; 0: 1 */
};
#define KEYQUEUE_BACKOFF_MIN_MS 5u
#define KEYQUEUE_BACKOFF_MAX_MS 300000u /* 5 minutes */

/* what a taken key is; valid until it is settled or the queue cleared */
struct keyqueue_item {
	const char *key; /* len bytes, NUL after them */
	size_t len;
	uint32_t failures; /* failed reconciles in a row before this one */
	uint64_t epoch;    /* pass back to keyqueue_settle */
};

enum keyqueue_outcome {
	KEYQUEUE_DONE,   /* reconciled: forget the failure count */
	KEYQUEUE_FAILED, /* failed: back off */
	KEYQUEUE_AFTER,  /* asked to run again after a delay (not a failure) */
};

struct keyqueue_stats {
	uint64_t depth;        /* keys held: ready + waiting + running */
	uint64_t ready;
	uint64_t waiting;
	uint64_t running;      /* 0 .. concurrency */
	uint64_t concurrency;  /* as configured (at least 1) */
	uint64_t oldest_ns;    /* how long the oldest ready key has waited, 0 if none */
	uint64_t added;        /* keys added (every change, before deduplication) */
	uint64_t done;         /* reconciles that succeeded */
	uint64_t failed;       /* ... failed (each one a retry scheduled) */
	uint64_t requeued;     /* requeue-after answers */
	uint64_t dropped;      /* keys dropped by keyqueue_clear */
};

int keyqueue_new(const struct keyqueue_config *cfg, struct keyqueue **ret);
void keyqueue_free(struct keyqueue *q);

/* keyqueue_add - the key (len bytes, at most KEYQUEUE_KEY_MAX) changed at
 * now (ns, any monotonic clock): see the top. -EINVAL for an empty or an
 * over-long key. */
#define KEYQUEUE_KEY_MAX 4096u
int keyqueue_add(struct keyqueue *q, const void *key, size_t len, uint64_t now);

/* keyqueue_take - the next ready key (moved to running), or NULL: nothing
 * is ready, or `concurrency` keys already run. Waiting keys whose time came
 * at now are made ready first. The item is the key's own: it stays valid
 * while other keys are taken and settled. */
const struct keyqueue_item *keyqueue_take(struct keyqueue *q, uint64_t now);

/* keyqueue_next_due - when the earliest waiting key becomes ready (ns), or
 * 0 when none waits: the owner arms a timer for it */
uint64_t keyqueue_next_due(const struct keyqueue *q);

/* keyqueue_settle - a running key's reconcile ended (key, len and epoch
 * as taken; running keys settle in any order): after_ns is the delay for
 * KEYQUEUE_AFTER. Ignored when the key does not run in this epoch. */
void keyqueue_settle(struct keyqueue *q, const void *key, size_t len, uint64_t epoch,
		     enum keyqueue_outcome outcome, uint64_t after_ns, uint64_t now);

/* keyqueue_clear - drop every key (counted in dropped) and begin a new epoch */
void keyqueue_clear(struct keyqueue *q);

/* keyqueue_backoff_ns - the wait after the n-th failure in a row (n >= 1) */
uint64_t keyqueue_backoff_ns(const struct keyqueue *q, uint32_t n);

void keyqueue_get_stats(const struct keyqueue *q, uint64_t now, struct keyqueue_stats *ret);

#endif
