/* SPDX-License-Identifier: MIT */
/*
 * runtime_watch.c - see runtime_watch.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#include "abi/abi_bus.h"
#include "base/log.h"
#include "runtime/runtime_watch.h"

#define RETRY_MIN_MS 100u
#define RETRY_MAX_MS 2000u
#define PREFIX_MAX 4096u

struct one_watch {
	struct plugin_watch *pw;
	uint32_t id;
	uint8_t *prefix, *end;
	size_t len, end_len, strip;
	uint32_t flags;
	struct etcd_call *range;
	struct etcd_watch *w;
	struct loop_timer *retry;
	uint32_t backoff_ms;
	bool resync_next; /* the next snapshot starts with LH_WATCH_RESYNC */
	bool live;         /* the snapshot is queued: events go to the queue */
	int64_t snap_rev;  /* the snapshot's revision H: the etcd watch starts after it;
	                    * 0 until etcd created the watch */
	struct etcd_event_hold held; /* events after H while the snapshot is read */
	uint8_t *page_from; /* the next page's first key, NULL = the prefix */
	size_t page_from_len;
};

struct plugin_watch {
	struct loop *loop;
	struct etcd_client *etcd;
	char log_comp[96];
	uint32_t queue_max;
	plugin_watch_ready_fn ready;
	void *ud;
	struct one_watch *w[LH_WATCH_MAX];
	size_t n;
	bool active; /* between start and stop */
	struct plugin_watch_batch *head, *tail;
	uint64_t live_queued; /* live events in the queue (bounded by queue_max) */
	struct plugin_watch_stats stats;
};

void plugin_watch_batch_free(struct plugin_watch_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		etcd_kv_free(b->evs[i].kv);
		etcd_kv_free(b->evs[i].prev);
	}
	free(b->evs);
	free(b);
}

static struct plugin_watch_batch *plugin_watch_batch_new(const struct one_watch *o, uint32_t flags)
{
	struct plugin_watch_batch *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->watch_id = o->id;
	b->flags = flags;
	b->strip = o->strip;
	return b;
}

static bool plugin_watch_batch_full(const struct plugin_watch_batch *b)
{
	return b->n >= PLUGIN_WATCH_BATCH_EVENTS || b->bytes >= PLUGIN_WATCH_BATCH_BYTES;
}

/* append a copy of the event; -ENOMEM */
static int plugin_watch_batch_add(struct plugin_watch_batch *b, uint32_t type, const struct etcd_kv *kv,
		     const struct etcd_kv *prev)
{
	if (b->n == b->cap) {
		size_t c = b->cap ? b->cap * 2 : 16;
		struct plugin_watch_event *ne = realloc(b->evs, c * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		b->evs = ne;
		b->cap = c;
	}
	struct plugin_watch_event *e = &b->evs[b->n];
	e->type = type;
	e->kv = etcd_kv_dup(kv);
	e->prev = prev ? etcd_kv_dup(prev) : NULL;
	if (!e->kv || (prev && !e->prev)) {
		etcd_kv_free(e->kv);
		etcd_kv_free(e->prev);
		return -ENOMEM;
	}
	b->n++;
	b->bytes += kv->key_len + kv->value_len + (prev ? prev->key_len + prev->value_len : 0);
	if (kv->mod_revision > b->revision)
		b->revision = kv->mod_revision;
	return 0;
}

static void plugin_watch_queue_push(struct plugin_watch *pw, struct plugin_watch_batch *b)
{
	b->next = NULL;
	if (pw->tail)
		pw->tail->next = b;
	else
		pw->head = b;
	pw->tail = b;
	pw->stats.queued += b->n;
	if (!(b->flags & LH_WATCH_SNAPSHOT))
		pw->live_queued += b->n;
}

/* drop the queued batches of watch id (all with id == UINT32_MAX) */
static void plugin_watch_queue_drop(struct plugin_watch *pw, uint32_t id)
{
	struct plugin_watch_batch **pp = &pw->head;
	pw->tail = NULL;
	while (*pp) {
		struct plugin_watch_batch *b = *pp;
		if (id == UINT32_MAX || b->watch_id == id) {
			*pp = b->next;
			pw->stats.queued -= b->n;
			pw->stats.dropped += b->n;
			if (!(b->flags & LH_WATCH_SNAPSHOT))
				pw->live_queued -= b->n;
			plugin_watch_batch_free(b);
			continue;
		}
		pw->tail = b;
		pp = &b->next;
	}
}

struct plugin_watch_batch *plugin_watch_take(struct plugin_watch *pw)
{
	struct plugin_watch_batch *b = pw->head;
	if (!b)
		return NULL;
	pw->head = b->next;
	if (!pw->head)
		pw->tail = NULL;
	b->next = NULL;
	pw->stats.queued -= b->n;
	if (!(b->flags & LH_WATCH_SNAPSHOT))
		pw->live_queued -= b->n;
	pw->stats.batches++;
	pw->stats.events += b->n;
	return b;
}

bool plugin_watch_pending(const struct plugin_watch *pw)
{
	return pw->head != NULL;
}

static void plugin_watch_halt(struct one_watch *o)
{
	o->live = false;
	etcd_event_hold_clear(&o->held);
	if (o->range) {
		etcd_call_cancel(o->range);
		o->range = NULL;
	}
	if (o->w) {
		etcd_watch_cancel(o->w);
		o->w = NULL;
	}
	loop_timer_disarm(o->retry);
}

static void plugin_watch_begin_snapshot(struct one_watch *o);

/* the watch is lost: never silently - its queued batches go, and a fresh
 * snapshot flagged RESYNC follows (after a backoff unless it_was_us) */
static void plugin_watch_lost(struct one_watch *o, const char *why, bool at_once)
{
	struct plugin_watch *pw = o->pw;
	log_warn(pw->log_comp, "watch %u (%.*s) lost: %s; the plugin gets a fresh snapshot "
			       "flagged resync",
		 o->id, (int)(o->len > 200 ? 200 : o->len), (const char *)o->prefix, why);
	plugin_watch_halt(o);
	plugin_watch_queue_drop(pw, o->id);
	o->resync_next = true;
	pw->stats.resyncs++;
	if (at_once)
		plugin_watch_begin_snapshot(o);
	else
		loop_timer_arm_in(o->retry, (uint64_t)o->backoff_ms * LOOP_NS_PER_MS);
}

static void plugin_watch_retry_later(struct one_watch *o)
{
	loop_timer_arm_in(o->retry, (uint64_t)o->backoff_ms * LOOP_NS_PER_MS);
	o->backoff_ms = o->backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : o->backoff_ms * 2;
}

static void plugin_watch_read_page(struct one_watch *o);

/* plugin_watch_queue_live - one live event of o, appended to the watch's last live
 * batch (*b, found on the first call) while it has room */
static int plugin_watch_queue_live(struct one_watch *o, struct plugin_watch_batch **b,
		      enum etcd_event_type type, const struct etcd_kv *kv,
		      const struct etcd_kv *prev)
{
	struct plugin_watch *pw = o->pw;
	if (kv->key_len < o->len || memcmp(kv->key, o->prefix, o->len) != 0)
		return 0; /* hostile: not what was watched */
	if (!*b) {
		*b = pw->tail;
		if (*b && ((*b)->watch_id != o->id || ((*b)->flags & LH_WATCH_SNAPSHOT)))
			*b = NULL;
	}
	if (!*b || plugin_watch_batch_full(*b)) {
		if (!(*b = plugin_watch_batch_new(o, 0)))
			return -ENOMEM;
		plugin_watch_queue_push(pw, *b);
	}
	if (plugin_watch_batch_add(*b, type == ETCD_EVENT_DELETE ? LH_WATCH_DELETE : LH_WATCH_PUT, kv,
		      (o->flags & LH_WATCH_PREV_KV) ? prev : NULL) < 0)
		return -ENOMEM;
	pw->live_queued++;
	pw->stats.queued++;
	return 0;
}

static void plugin_watch_overflow(struct one_watch *o)
{
	char why[160];
	snprintf(why, sizeof(why), "more than %u undelivered events queued: the plugin is too slow",
		 o->pw->queue_max);
	o->pw->stats.overflows++;
	plugin_watch_lost(o, why, true);
}

static void plugin_watch_on_watch(struct etcd_watch *w, int err, int64_t revision,
		     const struct etcd_event *events, size_t n, void *ud)
{
	struct one_watch *o = ud;
	struct plugin_watch *pw = o->pw;
	(void)w;
	if (err < 0) {
		char why[160];
		if (err == -ERANGE)
			snprintf(why, sizeof(why), "compacted at revision %lld",
				 (long long)revision);
		else
			snprintf(why, sizeof(why), "%s", etcd_strerror(err));
		plugin_watch_lost(o, why, err == -ERANGE);
		return;
	}
	if (!o->live) {
		if (n == 0) {
			/* the creation (the first callback): read the snapshot
			 * at H; or a progress notification meanwhile */
			if (!o->snap_rev) {
				if (revision <= 0) {
					plugin_watch_lost(o, "etcd created the watch without a revision", false);
					return;
				}
				o->snap_rev = revision;
				plugin_watch_read_page(o);
			}
			return;
		}
		/* after H: queued behind the snapshot once it is read */
		if (o->held.n + n + pw->live_queued > pw->queue_max)
			plugin_watch_overflow(o);
		else if (etcd_event_hold_add(&o->held, events, n) < 0)
			plugin_watch_lost(o, "out of memory", false);
		return;
	}
	if (n == 0)
		return; /* progress */
	struct plugin_watch_batch *b = NULL;
	for (size_t i = 0; i < n; i++)
		if (plugin_watch_queue_live(o, &b, events[i].type, &events[i].kv, events[i].prev_kv) < 0) {
			plugin_watch_lost(o, "out of memory", false);
			return;
		}
	if (pw->live_queued > pw->queue_max) {
		plugin_watch_overflow(o);
		return;
	}
	pw->ready(pw->ud);
}

static void plugin_watch_on_range(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct one_watch *o = ud;
	struct plugin_watch *pw = o->pw;
	(void)c;
	o->range = NULL;
	if (err < 0 || !resp || (resp->more && resp->n_kvs == 0)) {
		char why[160];
		snprintf(why, sizeof(why), "the snapshot read failed: %s",
			 err < 0 ? etcd_strerror(err) : "bad answer");
		if (o->page_from) /* pages of it may have been delivered: start over */
			plugin_watch_lost(o, why, err == -ERANGE);
		else {
			log_warn(pw->log_comp, "watch %u: %s; retrying in %u ms", o->id, why,
				 o->backoff_ms);
			plugin_watch_halt(o);
			plugin_watch_retry_later(o);
		}
		return;
	}
	if (resp->more) {
		/* ask for the next page (same revision, from after the last key)
		 * first: etcd reads it while this one becomes batches */
		const struct etcd_kv *last = &resp->kvs[resp->n_kvs - 1];
		uint8_t *from = malloc(last->key_len + 1);
		if (!from) {
			plugin_watch_lost(o, "out of memory building the snapshot", false);
			return;
		}
		memcpy(from, last->key, last->key_len);
		from[last->key_len] = 0; /* the next key after it */
		free(o->page_from);
		o->page_from = from;
		o->page_from_len = last->key_len + 1;
		plugin_watch_read_page(o);
		if (!o->range)
			return; /* it failed and started over */
	}
	uint32_t first = o->resync_next ? LH_WATCH_RESYNC : 0;
	struct plugin_watch_batch *b = NULL;
	size_t i = 0;
	do {
		if (!(b = plugin_watch_batch_new(o, LH_WATCH_SNAPSHOT | first)))
			goto nomem;
		first = 0;
		for (; i < resp->n_kvs && !plugin_watch_batch_full(b); i++) {
			const struct etcd_kv *kv = &resp->kvs[i];
			if (kv->key_len < o->len || memcmp(kv->key, o->prefix, o->len) != 0)
				continue; /* hostile: not what was asked */
			if (plugin_watch_batch_add(b, LH_WATCH_PUT, kv, NULL) < 0) {
				plugin_watch_batch_free(b);
				goto nomem;
			}
		}
		b->revision = o->snap_rev;
		if (i == resp->n_kvs && !resp->more)
			b->flags |= LH_WATCH_SYNCED;
		if (b->n || (b->flags & (LH_WATCH_SYNCED | LH_WATCH_RESYNC)))
			plugin_watch_queue_push(pw, b);
		else
			plugin_watch_batch_free(b);
		o->resync_next = false; /* said once, in the first batch */
	} while (i < resp->n_kvs);
	if (resp->more) { /* the next page is on its way */
		pw->ready(pw->ud);
		return;
	}
	pw->stats.snapshots++;
	/* the events after H, held meanwhile, follow the synced marker */
	struct plugin_watch_batch *lb = NULL;
	for (size_t k = 0; k < o->held.n; k++)
		if (plugin_watch_queue_live(o, &lb, o->held.ev[k].type, o->held.ev[k].kv,
			       o->held.ev[k].prev_kv) < 0)
			goto nomem;
	etcd_event_hold_clear(&o->held);
	o->live = true;
	o->backoff_ms = RETRY_MIN_MS;
	if (pw->live_queued > pw->queue_max) {
		plugin_watch_overflow(o);
		return;
	}
	pw->ready(pw->ud);
	return;
nomem:
	plugin_watch_lost(o, "out of memory building the snapshot", false);
}

/* one page of the snapshot: from page_from (the prefix at first) to the
 * prefix's end, at revision H */
static void plugin_watch_read_page(struct one_watch *o)
{
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = o->page_from ? o->page_from : o->prefix,
			     .key_len = o->page_from ? o->page_from_len : o->len,
			     .range_end = o->end, .range_end_len = o->end_len,
			     .limit = PLUGIN_WATCH_PAGE_KEYS, .revision = o->snap_rev};
	int r = etcd_range(o->pw->etcd, &op, NULL, plugin_watch_on_range, o, &o->range);
	if (r < 0) {
		o->range = NULL;
		if (o->page_from)
			plugin_watch_lost(o, "cannot read the next snapshot page", false);
		else {
			log_warn(o->pw->log_comp, "watch %u: cannot read the snapshot: %s", o->id,
				 strerror(-r));
			plugin_watch_halt(o);
			plugin_watch_retry_later(o);
		}
	}
}

/* plugin_watch_begin_snapshot - the etcd watch first, from now; once etcd created it
 * (plugin_watch_on_watch) the snapshot is read at the revision H it starts after, so
 * live events follow the snapshot with no gap and no overlap, and the watch
 * is in sync with etcd from the start (ETCD_WATCH_CREATED_NOTIFY) */
static void plugin_watch_begin_snapshot(struct one_watch *o)
{
	o->snap_rev = 0;
	o->live = false;
	etcd_event_hold_clear(&o->held);
	free(o->page_from);
	o->page_from = NULL;
	unsigned flags = ETCD_WATCH_CREATED_NOTIFY |
			 ((o->flags & LH_WATCH_PREV_KV) ? ETCD_WATCH_PREV_KV : 0);
	int r = etcd_watch_start(o->pw->etcd, o->prefix, o->len, o->end, o->end_len, 0, flags,
				 plugin_watch_on_watch, o, &o->w);
	if (r < 0) {
		o->w = NULL;
		log_warn(o->pw->log_comp, "watch %u: cannot start the etcd watch: %s", o->id,
			 strerror(-r));
		plugin_watch_retry_later(o);
	}
}

static void plugin_watch_on_retry(struct loop_timer *t, void *ud)
{
	struct one_watch *o = ud;
	(void)t;
	if (o->pw->active && !o->range && !o->w)
		plugin_watch_begin_snapshot(o);
}

int plugin_watch_new(struct loop *l, struct etcd_client *etcd, const char *log_comp,
		     uint32_t queue_max, plugin_watch_ready_fn ready, void *ud,
		     struct plugin_watch **ret)
{
	if (!l || !etcd || !ready)
		return -EINVAL;
	struct plugin_watch *pw = calloc(1, sizeof(*pw));
	if (!pw)
		return -ENOMEM;
	pw->loop = l;
	pw->etcd = etcd;
	snprintf(pw->log_comp, sizeof(pw->log_comp), "%s", log_comp ? log_comp : "watch");
	pw->queue_max = queue_max ? queue_max : PLUGIN_WATCH_QUEUE_MAX;
	pw->ready = ready;
	pw->ud = ud;
	*ret = pw;
	return 0;
}

int plugin_watch_add(struct plugin_watch *pw, const void *prefix, size_t len, uint32_t flags,
		     size_t strip)
{
	if (pw->active || len == 0 || len > PREFIX_MAX || strip > len)
		return -EINVAL;
	if (pw->n >= LH_WATCH_MAX)
		return -ENOSPC;
	struct one_watch *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->pw = pw;
	o->id = (uint32_t)pw->n;
	o->flags = flags;
	o->strip = strip;
	o->len = len;
	o->backoff_ms = RETRY_MIN_MS;
	o->prefix = malloc(len + 1);
	o->end = malloc(len + 1);
	int r = -ENOMEM;
	if (!o->prefix || !o->end || (r = loop_timer_new(pw->loop, plugin_watch_on_retry, o, &o->retry)) < 0) {
		free(o->prefix);
		free(o->end);
		free(o);
		return r;
	}
	memcpy(o->prefix, prefix, len);
	o->prefix[len] = 0;
	o->end_len = etcd_prefix_end(o->prefix, len, o->end);
	pw->w[pw->n++] = o;
	return 0;
}

size_t plugin_watch_count(const struct plugin_watch *pw)
{
	return pw ? pw->n : 0;
}

void plugin_watch_start(struct plugin_watch *pw)
{
	plugin_watch_stop(pw);
	pw->active = true;
	for (size_t i = 0; i < pw->n; i++) {
		pw->w[i]->resync_next = false;
		pw->w[i]->backoff_ms = RETRY_MIN_MS;
		plugin_watch_begin_snapshot(pw->w[i]);
	}
}

void plugin_watch_stop(struct plugin_watch *pw)
{
	if (!pw)
		return;
	pw->active = false;
	for (size_t i = 0; i < pw->n; i++)
		plugin_watch_halt(pw->w[i]);
	plugin_watch_queue_drop(pw, UINT32_MAX);
}

void plugin_watch_get_stats(const struct plugin_watch *pw, struct plugin_watch_stats *ret)
{
	*ret = pw->stats;
}

void plugin_watch_free(struct plugin_watch *pw)
{
	if (!pw)
		return;
	plugin_watch_stop(pw);
	for (size_t i = 0; i < pw->n; i++) {
		loop_timer_free(pw->w[i]->retry);
		free(pw->w[i]->prefix);
		free(pw->w[i]->end);
		free(pw->w[i]->page_from);
		free(pw->w[i]);
	}
	free(pw);
}

/* ---- the bus form ---- */

nng_msg *plugin_watch_batch_msg(const struct plugin_watch_batch *b, uint64_t seq)
{
	size_t n = b->n;
	Leasehold__Bus__WatchEvent *we = calloc(n ? n : 1, sizeof(*we));
	Leasehold__Bus__WatchEvent **wp = calloc(n ? n : 1, sizeof(*wp));
	BusKv *kvs = calloc(n ? 2 * n : 1, sizeof(*kvs));
	nng_msg *msg = NULL;
	if (!we || !wp || !kvs)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct plugin_watch_event *e = &b->evs[i];
		leasehold__bus__watch_event__init(&we[i]);
		we[i].type = e->type;
		bus_kv_from_etcd(&kvs[2 * i], e->kv, b->strip);
		we[i].kv = &kvs[2 * i];
		/* a previous kv has the same key, so the same strip applies */
		if (e->prev && e->prev->key_len >= b->strip) {
			bus_kv_from_etcd(&kvs[2 * i + 1], e->prev, b->strip);
			we[i].prev_kv = &kvs[2 * i + 1];
		}
		wp[i] = &we[i];
	}
	Leasehold__Bus__WatchEvents wes = LEASEHOLD__BUS__WATCH_EVENTS__INIT;
	wes.watch_id = b->watch_id;
	wes.flags = b->flags;
	wes.revision = b->revision;
	wes.n_events = n;
	wes.events = wp;
	Event ev = LEASEHOLD__BUS__EVENT__INIT;
	ev.seq = seq;
	ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_WATCH_EVENTS;
	ev.watch_events = &wes;
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &ev;
	msg = bus_pack_msg(&tw.base);
out:
	free(we);
	free(wp);
	free(kvs);
	return msg;
}

void bus_kv_from_etcd(BusKv *b, const struct etcd_kv *kv, size_t strip)
{
	leasehold__bus__kv__init(b);
	b->key = bus_bin(kv->key + strip, kv->key_len - strip);
	b->value = bus_bin(kv->value, kv->value ? kv->value_len : 0);
	b->create_revision = kv->create_revision;
	b->mod_revision = kv->mod_revision;
	b->version = kv->version;
}
