/* SPDX-License-Identifier: MIT */
/*
 * runtime_watch.h - the leader-gated watches of one plugin instance (ABI 1.2):
 * per term and per registered prefix, a snapshot at one etcd revision R
 * followed by the live events after R, as batches for on_watch_events.
 *
 * Design notes
 * - Leader-gated. Nothing runs between terms: plugin_watch_start (the term
 *   began) watches each prefix from "now" (ETCD_WATCH_CREATED_NOTIFY: etcd
 *   names the revision R the watch starts after), then reads it at R in
 *   range pages of PLUGIN_WATCH_PAGE_KEYS keys while the watch's events wait
 *   aside (counted against queue_max); they follow the synced marker.
 *   Snapshot and live events meet with no gap and no duplicate, and the
 *   etcd watch is in sync from its creation (etcd.h says why that matters);
 *   etcd_watch.c resumes a dropped stream from the last revision it
 *   delivered.
 *   plugin_watch_stop (the term ended) cancels every read and watch and
 *   drops what is queued. A standby therefore holds nothing and pays one
 *   read of each prefix when it is elected.
 * - Batches. The snapshot is cut into batches of at most
 *   PLUGIN_WATCH_BATCH_EVENTS events / PLUGIN_WATCH_BATCH_BYTES bytes, all
 *   flagged LH_WATCH_SNAPSHOT, the last one LH_WATCH_SYNCED (an empty prefix
 *   gives one empty synced batch). Live events of one watch are appended to
 *   the last queued live batch of that watch while it has room, so a plugin
 *   that keeps up gets one batch per etcd watch message and one that falls
 *   behind gets fewer, larger ones.
 * - Bounded. At most queue_max live events wait here (undelivered) for one
 *   plugin. One more is an overflow: the watch is treated as lost. A lost
 *   watch (overflow, compaction: -ERANGE, or any error that ends the etcd
 *   watch for good) drops that watch's queued batches, and starts over with a
 *   fresh snapshot whose first batch is flagged LH_WATCH_RESYNC. Never a
 *   silent loss. A failed range is retried after a backoff (100 ms doubling
 *   to 2 s).
 * - The snapshot itself is not bounded by queue_max (it is as large as the
 *   prefix). It is read in pages, each handed on as batches before the next
 *   is asked for, so the host never holds one answer for the whole prefix;
 *   a page that fails (compaction of R included) starts the snapshot over,
 *   flagged RESYNC when earlier pages may have been delivered.
 * Threading: the loop thread only. Ownership: the watch owns its calls,
 *   watches, timers and queued batches; a batch taken with plugin_watch_take
 *   is the caller's (plugin_watch_batch_free).
 * Errors: 0 / -errno.
 */
#ifndef LH_PLUGIN_WATCH_H
#define LH_PLUGIN_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "etcd/etcd.h"
#include "base/loop.h"

#define PLUGIN_WATCH_QUEUE_MAX 10000u        /* default queue_max: live events */
#define PLUGIN_WATCH_BATCH_EVENTS 256u       /* events per batch at most */
#define PLUGIN_WATCH_BATCH_BYTES (256u << 10) /* key + value bytes per batch (soft) */
#define PLUGIN_WATCH_PAGE_KEYS 1000          /* keys per snapshot range page */

struct plugin_watch;

struct plugin_watch_event {
	uint32_t type; /* LH_WATCH_PUT / LH_WATCH_DELETE */
	struct etcd_kv *kv;
	struct etcd_kv *prev; /* or NULL */
};

struct plugin_watch_batch {
	struct plugin_watch_batch *next;
	uint32_t watch_id;
	uint32_t flags; /* LH_WATCH_* batch flags */
	int64_t revision;
	size_t strip; /* bytes of each key the plugin does not see (the data prefix) */
	size_t n, cap, bytes;
	struct plugin_watch_event *evs;
};

struct plugin_watch_stats {
	uint64_t batches;   /* batches taken for delivery */
	uint64_t events;    /* events in them */
	uint64_t snapshots; /* snapshots read (first and resyncs) */
	uint64_t resyncs;   /* watches lost and started over */
	uint64_t overflows; /* ... because the queue was full */
	uint64_t dropped;   /* events dropped: term ended, or the watch was lost */
	uint64_t queued;    /* live + snapshot events waiting now */
};

/* ready(ud): a batch is waiting (called from etcd callbacks on the loop) */
typedef void (*plugin_watch_ready_fn)(void *ud);

/* plugin_watch_new - log_comp is copied; queue_max 0 = PLUGIN_WATCH_QUEUE_MAX.
 * etcd is borrowed and must outlive the watch. */
int plugin_watch_new(struct loop *l, struct etcd_client *etcd, const char *log_comp,
                     uint32_t queue_max, plugin_watch_ready_fn ready, void *ud,
                     struct plugin_watch **ret);
/* plugin_watch_add - register prefix (full key, copied; LH_WATCH_* flags);
 * the plugin sees keys without their first `strip` bytes. Ids are 0, 1, ...
 * in the order of the calls. Only between terms. */
int plugin_watch_add(struct plugin_watch *pw, const void *prefix, size_t len, uint32_t flags,
                     size_t strip);
size_t plugin_watch_count(const struct plugin_watch *pw);
/* a term begins / ends (stop is idempotent; drops everything queued) */
void plugin_watch_start(struct plugin_watch *pw);
void plugin_watch_stop(struct plugin_watch *pw);
/* the next batch in delivery order (caller owns it), or NULL */
struct plugin_watch_batch *plugin_watch_take(struct plugin_watch *pw);
/* plugin_watch_pending - a batch waits for plugin_watch_take */
bool plugin_watch_pending(const struct plugin_watch *pw);
void plugin_watch_batch_free(struct plugin_watch_batch *b);
/* plugin_watch_batch_msg - the bus message ToWorker{Event{seq, watch_events}}
 * for b (caller owns it), NULL on ENOMEM */
nng_msg *plugin_watch_batch_msg(const struct plugin_watch_batch *b, uint64_t seq);
void plugin_watch_get_stats(const struct plugin_watch *pw, struct plugin_watch_stats *ret);
void plugin_watch_free(struct plugin_watch *pw);

/* bus_kv_from_etcd - b views kv (borrowed) without the first `strip` bytes
 * of its key (the caller checked that the key is that long): an etcd key
 * as the bus carries it to a plugin (watch events, txn results) */
struct Leasehold__Bus__Kv;
void bus_kv_from_etcd(struct Leasehold__Bus__Kv *b, const struct etcd_kv *kv, size_t strip);

#endif
