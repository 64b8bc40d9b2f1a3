/* SPDX-License-Identifier: MIT */
/*
 * worker.c - see worker.h: the worker's bus loop (receive, stash what
 * comes ahead, skip what a term's end made moot, run the callback, answer).
 * The worker thread (thread isolation) and the leasehold-worker child
 * process (process isolation) run exactly this loop. The host API the
 * plugin calls is in worker_api.c; what both share, in worker_internal.h.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>

#include "worker/worker_crash_report.h"
#include "base/log.h"
#include "base/loop.h"
#include "proto/bus.pb-c.h"
#include "abi/abi_bus.h"
#include "abi/abi_config_doc.h"
#include "worker/worker.h"
#include "worker/worker_internal.h"

struct worker *worker_from_ctx(struct lh_ctx *ctx)
{
	return (struct worker *)(void *)ctx;
}

static const char *const g_callback_names[WORKER_CALLBACKS] = {
	[WORKER_CB_INIT] = "init",
	[WORKER_CB_ON_ELECTED] = "on_elected",
	[WORKER_CB_ON_RELEASES_CHANGED] = "on_releases_changed",
	[WORKER_CB_RECONCILE] = "reconcile",
	[WORKER_CB_ON_DEPOSED] = "on_deposed",
	[WORKER_CB_FINI] = "fini",
	[WORKER_CB_ON_WATCH_EVENTS] = "on_watch_events",
	[WORKER_CB_ON_CONFIG_CHANGED] = "on_config_changed",
	[WORKER_CB_VALIDATE_CONFIG] = "validate_config",
	[WORKER_CB_RECONCILE_KEY] = "reconcile_key",
};

const char *worker_callback_name(unsigned kind)
{
	return kind < WORKER_CALLBACKS ? g_callback_names[kind] : "?";
}

int worker_callback_parse(const char *name, unsigned *ret)
{
	for (unsigned k = 0; name && k < WORKER_CALLBACKS; k++) {
		if (strcmp(name, g_callback_names[k]) == 0) {
			*ret = k;
			return 0;
		}
	}
	return -EINVAL;
}

void worker_activity_read(const struct worker_activity *a, struct worker_activity_snapshot *ret)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t g1 = atomic_load_explicit(&a->gen, memory_order_acquire);
		if (g1 & 1)
			continue;
		ret->seq = atomic_load_explicit(&a->seq, memory_order_relaxed);
		ret->kind = atomic_load_explicit(&a->kind, memory_order_relaxed);
		ret->since_ns = atomic_load_explicit(&a->since_ns, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&a->gen, memory_order_relaxed) == g1)
			return;
	}
	*ret = (struct worker_activity_snapshot){0, 0, 0};
}

void worker_activity_set(struct worker *w, uint64_t seq, unsigned kind)
{
	struct worker_activity *a = w->activity;
	uint64_t g = atomic_load_explicit(&a->gen, memory_order_relaxed);
	atomic_store_explicit(&a->gen, g + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&a->seq, seq, memory_order_relaxed);
	atomic_store_explicit(&a->kind, kind, memory_order_relaxed);
	atomic_store_explicit(&a->since_ns, seq ? loop_now() : 0, memory_order_relaxed);
	atomic_store_explicit(&a->gen, g + 2, memory_order_release);
}

void worker_set_activity(struct worker *w, struct worker_activity *a)
{
	w->activity = a ? a : &w->own_activity;
}

const struct worker_activity *worker_activity(const struct worker *w)
{
	return w->activity;
}

/* the callback kind of a bus event, or -1 */
static int worker_event_callback(const Event *ev)
{
	switch (ev->kind_case) {
	case LEASEHOLD__BUS__EVENT__KIND_INIT:
		return WORKER_CB_INIT;
	case LEASEHOLD__BUS__EVENT__KIND_ELECTED:
		return WORKER_CB_ON_ELECTED;
	case LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED:
		return WORKER_CB_ON_RELEASES_CHANGED;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE:
		return WORKER_CB_RECONCILE;
	case LEASEHOLD__BUS__EVENT__KIND_DEPOSED:
		return WORKER_CB_ON_DEPOSED;
	case LEASEHOLD__BUS__EVENT__KIND_FINI:
		return WORKER_CB_FINI;
	case LEASEHOLD__BUS__EVENT__KIND_WATCH_EVENTS:
		return WORKER_CB_ON_WATCH_EVENTS;
	case LEASEHOLD__BUS__EVENT__KIND_CONFIG_CHANGED:
		return WORKER_CB_ON_CONFIG_CHANGED;
	case LEASEHOLD__BUS__EVENT__KIND_VALIDATE_CONFIG:
		return WORKER_CB_VALIDATE_CONFIG;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY:
		return WORKER_CB_RECONCILE_KEY;
	default:
		return -1;
	}
}

/* the call the calling thread runs (worker_call_set); each thread that
 * runs callbacks is either one worker's bus loop or one of its key threads */
static _Thread_local struct worker_call *worker_tl_call;

void worker_call_set(struct worker_call *c)
{
	worker_tl_call = c;
}

struct worker_call *worker_call_cur(const struct worker *w)
{
	struct worker_call *c = worker_tl_call;
	return c && c->w == w && c->in_callback ? c : NULL;
}

bool worker_on_own_thread(const struct worker *w)
{
	return worker_call_cur(w) != NULL;
}

void worker_send(struct worker *w, const ProtobufCMessage *m)
{
	nng_msg *msg = bus_pack_msg(m);
	if (!msg)
		return;
	if (nng_sendmsg(w->sock, msg, 0) != 0)
		nng_msg_free(msg);
}

static void worker_protocol_error(struct worker *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void worker_protocol_error(struct worker *w, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	Leasehold__Bus__ProtocolError pe = LEASEHOLD__BUS__PROTOCOL_ERROR__INIT;
	pe.message = bus_bin_str(buf);
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR;
	th.protocol_error = &pe;
	worker_send(w, &th.base);
}

static void worker_stash_push(struct worker *w, ToWorker *tw)
{
	if (w->stash_n == STASH_MAX) {
		worker_protocol_error(w, "more than %u events ahead of the running one: dropped",
		                      STASH_MAX);
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		return;
	}
	w->stash[(w->stash_head + w->stash_n) % STASH_MAX] = tw;
	w->stash_n++;
}

static ToWorker *worker_stash_pop(struct worker *w)
{
	if (!w->stash_n)
		return NULL;
	ToWorker *tw = w->stash[w->stash_head];
	w->stash_head = (w->stash_head + 1) % STASH_MAX;
	w->stash_n--;
	return tw;
}

/* take one received message: an event is kept for later, a reply a key
 * thread awaits goes to it, a late reply to a txn that timed out is
 * discarded, anything else is a protocol error */
static void worker_take_ahead(struct worker *w, ToWorker *tw, const char *where)
{
	if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_EVENT && tw->event) {
		worker_stash_push(w, tw);
		return;
	}
	if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply && w->pool &&
	    worker_pool_route(w->pool, tw))
		return;
	if (!(tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply &&
	      tw->txn_reply->id <= w->last_txn_id))
		worker_protocol_error(w, "unexpected message (case %d) %s", (int)tw->msg_case, where);
	leasehold__bus__to_worker__free_unpacked(tw, NULL);
}

/* a batch becomes one stashed ToWorker per event, in order: each event is
 * detached from the batch and given its own (malloc'd, as protobuf-c's
 * default allocator frees) wrapper */
static void worker_unbatch(struct worker *w, ToWorker *tw)
{
	Leasehold__Bus__Events *b = tw->batch;
	size_t i = 0;
	if (b && b->n_events > STASH_MAX - w->stash_n) {
		/* all or nothing: a batch cut short could lose the on_deposed
		 * that makes the rest of it moot */
		worker_protocol_error(w, "a batch of %zu events with %u already waiting: dropped",
		                      b->n_events, w->stash_n);
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		return;
	}
	ToWorker *ones[STASH_MAX];
	size_t n = b ? b->n_events : 0;
	for (; i < n; i++) {
		if (!(ones[i] = malloc(sizeof(*ones[i])))) {
			worker_protocol_error(w, "out of memory: a batch of %zu events dropped", n);
			while (i > 0)
				free(ones[--i]);
			leasehold__bus__to_worker__free_unpacked(tw, NULL);
			return;
		}
	}
	for (i = 0; i < n; i++) {
		leasehold__bus__to_worker__init(ones[i]);
		ones[i]->msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
		ones[i]->event = b->events[i]; /* detached: freed with its wrapper */
		worker_stash_push(w, ones[i]);
	}
	if (b)
		b->n_events = 0; /* the array itself goes with the batch */
	leasehold__bus__to_worker__free_unpacked(tw, NULL);
}

/* the message, or NULL: undecodable (reported), or a batch (its events are
 * now in the stash) */
static ToWorker *worker_decode(struct worker *w, nng_msg *msg)
{
	size_t len = nng_msg_len(msg);
	ToWorker *tw = leasehold__bus__to_worker__unpack(NULL, len, nng_msg_body(msg));
	nng_msg_free(msg);
	if (!tw)
		worker_protocol_error(w, "undecodable message from the host (%zu bytes)", len);
	else if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_BATCH) {
		worker_unbatch(w, tw);
		tw = NULL;
	}
	return tw;
}

/* worker_term_ends_ahead - collect what the host already sent (no waiting); true when a
 * waiting event ends the current term: on_deposed, a new on_elected, fini */
static bool worker_term_ends_ahead(struct worker *w)
{
	for (;;) {
		nng_msg *msg;
		if (nng_recvmsg(w->sock, &msg, NNG_FLAG_NONBLOCK) != 0)
			break;
		ToWorker *tw = worker_decode(w, msg);
		if (tw)
			worker_take_ahead(w, tw, "outside a callback");
	}
	for (unsigned i = 0; i < w->stash_n; i++) {
		const Event *ev = w->stash[(w->stash_head + i) % STASH_MAX]->event;
		if (ev->kind_case == LEASEHOLD__BUS__EVENT__KIND_DEPOSED ||
		    ev->kind_case == LEASEHOLD__BUS__EVENT__KIND_ELECTED ||
		    ev->kind_case == LEASEHOLD__BUS__EVENT__KIND_FINI)
			return true;
	}
	return false;
}

/* worker_bus_doc - a document of a Config message (hostile): NULL when absent, a
 * NUL-terminated copy when present; -EBADMSG when over the bound */
static int worker_bus_doc(bool has, ProtobufCBinaryData b, char **ret)
{
	*ret = NULL;
	if (!has)
		return 0;
	if (b.len > PLUGIN_CONFIG_MAX || (b.len && memchr(b.data, '\0', b.len)))
		return -EBADMSG;
	char *d = malloc(b.len + 1);
	if (!d)
		return -ENOMEM;
	if (b.len)
		memcpy(d, b.data, b.len);
	d[b.len] = 0;
	*ret = d;
	return 0;
}

static bool worker_same_doc(const char *a, uint64_t al, const char *b, size_t bl)
{
	if (!a || !b)
		return !a && !b;
	return al == bl && memcmp(a, b, bl) == 0;
}

/* worker_config_take - make c (hostile; NULL = no configuration) what api->config()
 * returns. *ret_same: it equals what the plugin already has. Returns 0, or
 * -EBADMSG / -ENOMEM with the reason in errmsg (the old state stays). */
static int worker_config_take(struct worker *w, const Leasehold__Bus__Config *c, bool *ret_same)
{
	char *cl = NULL, *lo = NULL;
	int r;
	if (c && ((r = worker_bus_doc(c->has_cluster, c->cluster, &cl)) < 0 ||
	          (r = worker_bus_doc(c->has_local, c->local, &lo)) < 0)) {
		free(cl);
		snprintf(w->main.errmsg, sizeof(w->main.errmsg), "bad configuration from the host (over %zu "
		         "bytes or a NUL byte)", PLUGIN_CONFIG_MAX);
		return r;
	}
	struct lh_config n = {sizeof(struct lh_config), 0, cl, 0, 0, lo, 0};
	if (c) {
		n.cluster_len = cl ? c->cluster.len : 0;
		n.cluster_revision = cl ? c->cluster_revision : 0;
		n.flags = c->cluster_invalid ? LH_CONFIG_F_CLUSTER_INVALID : 0;
		n.local_len = lo ? c->local.len : 0;
	}
	/* a document the plugin's schema refuses is not handed over: as an
	 * invalid one, the plugin keeps its last good document */
	w->schema_error[0] = 0;
	if (cl && worker_config_schema_refuses(w, cl, n.cluster_len, w->schema_error,
	                                       sizeof(w->schema_error))) {
		free(cl);
		n.cluster = cl = w->cfg_cluster;
		w->cfg_cluster = NULL; /* kept, not freed below */
		n.cluster_len = w->cfg.cluster_len;
		n.cluster_revision = w->cfg.cluster_revision;
		n.flags |= LH_CONFIG_F_CLUSTER_INVALID;
	}
	*ret_same = n.flags == w->cfg.flags && n.cluster_revision == w->cfg.cluster_revision &&
	            worker_same_doc(w->cfg.cluster, w->cfg.cluster_len, cl, n.cluster_len) &&
	            worker_same_doc(w->cfg.local, w->cfg.local_len, lo, n.local_len);
	if (!*ret_same)
		worker_config_forget(w);
	free(w->cfg_cluster);
	free(w->cfg_local);
	w->cfg_cluster = cl;
	w->cfg_local = lo;
	w->cfg = n;
	return 0;
}

/* copy a bus kv into *kv, its bytes (NUL-terminated) at *bytes */
static void worker_kv_from_bus(const BusKv *b, struct lh_kv *kv, uint8_t **bytes)
{
	uint8_t *p = *bytes;
	if (b->key.len)
		memcpy(p, b->key.data, b->key.len);
	p[b->key.len] = 0;
	kv->key = p;
	kv->key_len = b->key.len;
	p += b->key.len + 1;
	if (b->value.len)
		memcpy(p, b->value.data, b->value.len);
	p[b->value.len] = 0;
	kv->value = p;
	kv->value_len = b->value.len;
	p += b->value.len + 1;
	kv->create_revision = b->create_revision;
	kv->mod_revision = b->mod_revision;
	kv->version = b->version;
	*bytes = p;
}

/* Turn a TxnReply into the plugin's result, in one allocation. */
int worker_build_result(struct worker *w, const TxnReply *rep, const struct lh_txn_result **ret)
{
	size_t n_kv = 0, n_bytes = 0;
	for (size_t i = 0; i < rep->n_results; i++) {
		const BusOpResult *r = rep->results[i];
		if (r->type > LH_OP_DELETE)
			return -EBADMSG;
		n_kv += r->n_kvs;
		for (size_t k = 0; k < r->n_kvs; k++)
			n_bytes += r->kvs[k]->key.len + 1 + r->kvs[k]->value.len + 1;
	}
	size_t size = sizeof(struct lh_txn_result) + rep->n_results * sizeof(struct lh_op_result) +
	              n_kv * sizeof(struct lh_kv) + n_bytes;
	char *mem = worker_arena_alloc(w, size);
	if (!mem)
		return -ENOMEM;
	struct lh_txn_result *res = (struct lh_txn_result *)(void *)mem;
	struct lh_op_result *ors = (struct lh_op_result *)(void *)(mem + sizeof(*res));
	struct lh_kv *kvs = (struct lh_kv *)(void *)((char *)ors + rep->n_results * sizeof(*ors));
	uint8_t *bytes = (uint8_t *)(kvs + n_kv);
	res->succeeded = rep->succeeded ? 1 : 0;
	res->revision = rep->revision;
	res->results = ors;
	res->n_results = rep->n_results;
	for (size_t i = 0; i < rep->n_results; i++) {
		const BusOpResult *r = rep->results[i];
		ors[i].type = r->type;
		ors[i].more = r->more ? 1 : 0;
		ors[i].count = r->count;
		ors[i].deleted = r->deleted;
		ors[i].kvs = kvs;
		ors[i].n_kvs = r->n_kvs;
		for (size_t k = 0; k < r->n_kvs; k++)
			worker_kv_from_bus(r->kvs[k], kvs++, &bytes);
	}
	*ret = res;
	return 0;
}

void *worker_arena_alloc(struct worker *w, size_t size)
{
	struct worker_call *c = worker_call_cur(w);
	if (!c || size > SIZE_MAX - sizeof(struct worker_arena_block))
		return NULL;
	struct worker_arena_block *b = calloc(1, sizeof(*b) + size);
	if (!b)
		return NULL;
	b->next = c->arena;
	c->arena = b;
	return b->data;
}

void worker_arena_free(struct worker_call *c)
{
	for (struct worker_arena_block *b = c->arena, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	c->arena = NULL;
}

int worker_send_request(struct worker *w, nng_msg *msg, uint64_t id)
{
	struct worker_call *c = worker_call_cur(w);
	if (c && c->slot)
		worker_pool_expect(w->pool, c, id);
	if (nng_sendmsg(w->sock, msg, 0) != 0) {
		nng_msg_free(msg);
		if (c && c->slot)
			worker_pool_expect(w->pool, c, 0);
		return -ECANCELED;
	}
	return 0;
}

/* Wait for the TxnReply with id; returns it (caller frees) or NULL with *err.
 * A key thread waits for the bus loop to hand it over; the bus loop's own
 * callbacks (no key runs then) receive it themselves. */
ToWorker *worker_wait_txn_reply(struct worker *w, uint64_t id, int *err)
{
	struct worker_call *c = worker_call_cur(w);
	if (c && c->slot)
		return worker_pool_wait(w->pool, c, id, err);
	uint64_t deadline = loop_now() + (uint64_t)w->txn_timeout_ms * LOOP_NS_PER_MS;
	for (;;) {
		uint64_t now = loop_now();
		if (now >= deadline) {
			*err = -ETIMEDOUT;
			break;
		}
		nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO,
		                  (nng_duration)((deadline - now + LOOP_NS_PER_MS - 1) / LOOP_NS_PER_MS));
		nng_msg *msg;
		int rv = nng_recvmsg(w->sock, &msg, 0);
		if (rv == NNG_ETIMEDOUT) {
			*err = -ETIMEDOUT;
			break;
		}
		if (rv != 0) {
			*err = -ECANCELED;
			break;
		}
		ToWorker *tw = worker_decode(w, msg);
		if (!tw)
			continue;
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply &&
		    tw->txn_reply->id == id) {
			nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO, NNG_DURATION_INFINITE);
			return tw;
		}
		/* the host pipelines the next events behind on_elected and the
		 * replay: they wait in the stash; a late reply is discarded
		 * (ids below id are settled) */
		worker_take_ahead(w, tw, "while waiting for a txn");
	}
	nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO, NNG_DURATION_INFINITE);
	return NULL;
}

/* the plugin's view of a WatchEvents (hostile: checked), in one allocation
 * kept in w->batch_mem until the callback returns */
static int worker_watch_batch_build(struct worker *w, const Leasehold__Bus__WatchEvents *we,
                             struct lh_watch_batch *ret)
{
	if (we->watch_id >= w->n_watches ||
	    (we->flags & ~(LH_WATCH_SNAPSHOT | LH_WATCH_SYNCED | LH_WATCH_RESYNC)))
		return -EBADMSG;
	size_t n = we->n_events, n_prev = 0, n_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		const Leasehold__Bus__WatchEvent *e = we->events[i];
		if (!e->kv || e->type > LH_WATCH_DELETE)
			return -EBADMSG;
		n_bytes += e->kv->key.len + e->kv->value.len + 2;
		if (e->prev_kv) {
			n_prev++;
			n_bytes += e->prev_kv->key.len + e->prev_kv->value.len + 2;
		}
	}
	char *mem = calloc(1, n * sizeof(struct lh_watch_event) + n_prev * sizeof(struct lh_kv) +
	                          n_bytes + 1);
	if (!mem)
		return -ENOMEM;
	struct lh_watch_event *evs = (struct lh_watch_event *)(void *)mem;
	struct lh_kv *prev = (struct lh_kv *)(void *)(evs + n);
	uint8_t *bytes = (uint8_t *)(prev + n_prev);
	for (size_t i = 0; i < n; i++) {
		const Leasehold__Bus__WatchEvent *e = we->events[i];
		evs[i].type = e->type;
		worker_kv_from_bus(e->kv, &evs[i].kv, &bytes);
		if (e->prev_kv) {
			worker_kv_from_bus(e->prev_kv, prev, &bytes);
			evs[i].prev_kv = prev++;
		}
	}
	free(w->batch_mem);
	w->batch_mem = mem;
	*ret = (struct lh_watch_batch){we->watch_id, we->flags, we->revision, evs, n};
	return 0;
}

/* INIT's grants, copied */
static int worker_take_grants(struct worker *w, const Leasehold__Bus__Init *in)
{
	if (in->n_read_grants > 256)
		return -E2BIG;
	for (size_t i = 0; i < w->n_grants; i++) /* an INIT after a failed one */
		free(w->grants[i].data);
	free(w->grants);
	w->n_grants = 0;
	w->no_watches = in->no_watches;
	w->grants = calloc(in->n_read_grants ? in->n_read_grants : 1, sizeof(*w->grants));
	if (!w->grants)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_read_grants; i++) {
		ProtobufCBinaryData g = in->read_grants[i];
		if (g.len == 0 || g.len > MAX_WATCH_PREFIX)
			continue; /* an empty grant would grant everything: never */
		if (!(w->grants[w->n_grants].data = malloc(g.len)))
			return -ENOMEM;
		memcpy(w->grants[w->n_grants].data, g.data, g.len);
		w->grants[w->n_grants++].len = g.len;
	}
	return 0;
}

static char *worker_dup_bin(ProtobufCBinaryData b)
{
	char *s = malloc(b.len + 1);
	if (!s)
		return NULL;
	if (b.len)
		memcpy(s, b.data, b.len);
	s[b.len] = 0;
	return s;
}

static struct lh_release worker_rel_from_bus(const Leasehold__Bus__Release *r)
{
	struct lh_release x = {0, 0, 0};
	if (r) {
		x.major = r->major;
		x.minor = r->minor;
		x.patch = r->patch;
	}
	return x;
}

/* Run one event; returns the callback's result. *stop set for FINI. */
/* worker_run_init - INIT: check the bus version, take the node id, the
 * data prefix, the grants and the configuration, run the plugin's init */
static int32_t worker_run_init(struct worker *w, const Event *ev)
{
	const struct lh_plugin *d = &w->desc;
	int32_t err = 0;

	if (w->initialized)
		return -EALREADY;
	if (ev->init->bus_version != LH_BUS_VERSION) {
		snprintf(w->main.errmsg, sizeof(w->main.errmsg),
		         "the host speaks bus version %u, this worker %u (leasehold and "
		         "leasehold-worker must come from the same release)",
		         ev->init->bus_version, LH_BUS_VERSION);
		return -EPROTO;
	}
	free(w->node_id);
	free(w->data_prefix);
	w->node_id = worker_dup_bin(ev->init->node_id);
	w->data_prefix = worker_dup_bin(ev->init->data_prefix);
	if (!w->node_id || !w->data_prefix || (err = worker_take_grants(w, ev->init)) < 0)
		return err < 0 ? err : -ENOMEM;
	bool same;
	if ((err = worker_config_take(w, ev->init->config, &same)) < 0)
		return err;
	if (w->schema_error[0]) {
		char line[sizeof(w->schema_error) + 100];
		snprintf(line, sizeof(line), "the cluster document was refused by the plugin's "
		         "schema: %s; init starts without it", w->schema_error);
		w->api.log(&w->ctx, LH_LOG_ERROR, line);
	}
	w->in_init = true;
	err = d->init ? d->init(&w->ctx) : 0;
	w->in_init = false;
	if (err == 0 && w->n_watches && !d->on_watch_events && !d->reconcile_key) {
		snprintf(w->main.errmsg, sizeof(w->main.errmsg),
		         "init registered %u watch(es) but the plugin has no on_watch_events "
		         "(nor reconcile_key)",
		         w->n_watches);
		if (d->fini) /* init succeeded: fini undoes it */
			d->fini(&w->ctx);
		err = -EINVAL;
	}
	w->initialized = err == 0;
	return err;
}

/* worker_run_releases_changed - RELEASES_CHANGED, in the plugin's terms */
static int32_t worker_run_releases_changed(struct worker *w, const Event *ev)
{
	struct lh_releases r = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
	const Leasehold__Bus__Releases *br = ev->releases_changed->releases;
	if (br) {
		r.min = worker_rel_from_bus(br->min);
		r.max = worker_rel_from_bus(br->max);
		r.revision = br->revision;
		r.n_members = br->n_members;
	}
	return w->desc.on_releases_changed ? w->desc.on_releases_changed(&w->ctx, &r) : 0;
}

/* worker_run_watch_events - WATCH_EVENTS: the batch, valid for the call */
static int32_t worker_run_watch_events(struct worker *w, const Event *ev)
{
	struct lh_watch_batch b;
	int32_t err = worker_watch_batch_build(w, ev->watch_events, &b);
	if (err < 0) {
		snprintf(w->main.errmsg, sizeof(w->main.errmsg), "bad watch batch from the host");
	} else {
		/* the keys first: a failing on_watch_events must not cost the
		 * queue its changes */
		int kr = worker_keys_collect(w, &b);
		err = w->desc.on_watch_events ? w->desc.on_watch_events(&w->ctx, &b) : 0;
		w->keys_incomplete = kr < 0;
	}
	free(w->batch_mem);
	w->batch_mem = NULL;
	return err;
}

/* worker_run_validate_config - VALIDATE_CONFIG: the document as a string */
static int32_t worker_run_validate_config(struct worker *w, const Event *ev)
{
	char *doc = NULL;
	const ProtobufCBinaryData *b = &ev->validate_config->document;
	int32_t err = worker_bus_doc(true, *b, &doc);
	if (err < 0) {
		snprintf(w->main.errmsg, sizeof(w->main.errmsg), "bad document from the host");
		return err;
	}
	if (worker_config_schema_refuses(w, doc, b->len, w->main.errmsg, sizeof(w->main.errmsg))) {
		free(doc);
		return -EINVAL;
	}
	err = w->desc.validate_config ? worker_config_validate(w, doc, b->len) : 0;
	free(doc);
	return err;
}

static int32_t worker_run_event(struct worker *w, const Event *ev, bool *stop)
{
	const struct lh_plugin *d = &w->desc;
	int32_t err = 0;

	if (ev->kind_case != LEASEHOLD__BUS__EVENT__KIND_INIT &&
	    ev->kind_case != LEASEHOLD__BUS__EVENT__KIND_FINI && !w->initialized) {
		snprintf(w->main.errmsg, sizeof(w->main.errmsg), "plugin not initialised");
		return -EIO;
	}
	int cb = worker_event_callback(ev);
	if (cb >= 0) {
		worker_activity_set(w, ev->seq ? ev->seq : UINT64_MAX, (unsigned)cb);
		crash_report_enter(w->crash_who[cb]);
	}
	w->main.in_callback = true;
	switch (ev->kind_case) {
	case LEASEHOLD__BUS__EVENT__KIND_INIT:
		err = worker_run_init(w, ev);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_ELECTED:
		w->token = ev->elected->fencing_token;
		err = d->on_elected ? d->on_elected(&w->ctx, w->token) : 0;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED:
		err = worker_run_releases_changed(w, ev);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE:
		err = d->reconcile ? d->reconcile(&w->ctx) : 0; /* NULL: a keyed plugin's */
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY:
		err = worker_keys_run(w, &w->main, ev->reconcile_key);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_WATCH_EVENTS:
		err = worker_run_watch_events(w, ev);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_DEPOSED:
		w->token = 0; /* no longer leading, also during on_deposed */
		if (d->on_deposed)
			d->on_deposed(&w->ctx);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_CONFIG_CHANGED: {
		bool unchanged = false;
		err = worker_config_take(w, ev->config_changed->config, &unchanged);
		if (err == 0 && !unchanged && d->on_config_changed)
			err = d->on_config_changed(&w->ctx, &w->cfg);
		if (err == 0 && w->schema_error[0]) {
			/* shown as this node's configuration error */
			snprintf(w->main.errmsg, sizeof(w->main.errmsg), "the cluster document was refused by the "
			         "plugin's schema: %s", w->schema_error);
			err = -EINVAL;
		}
		break;
	}
	case LEASEHOLD__BUS__EVENT__KIND_VALIDATE_CONFIG:
		err = worker_run_validate_config(w, ev);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_FINI:
		if (w->initialized && d->fini)
			d->fini(&w->ctx);
		w->initialized = false;
		*stop = true;
		break;
	default:
		snprintf(w->main.errmsg, sizeof(w->main.errmsg), "unknown event kind %d", (int)ev->kind_case);
		err = -EPROTO;
		break;
	}
	w->main.in_callback = false;
	if (cb >= 0) {
		crash_report_leave();
		worker_activity_set(w, 0, 0);
	}
	worker_arena_free(&w->main);
	if (err > 0 || err < -4095)
		err = -EIO; /* not a negative errno: normalise */
	return err;
}

/* worker_should_skip - the host hands the start of a term over in one go (on_elected,
 * the replay, the first reconcile; runtime_instance_queue.c pi_queue_may_send). When the term
 * already ended behind them, they are answered without running, as the host
 * would have dropped them had they still been queued there; a term whose
 * on_elected was skipped gets no on_deposed either. */
static bool worker_should_skip(struct worker *w, const Event *ev)
{
	switch (ev->kind_case) {
	case LEASEHOLD__BUS__EVENT__KIND_ELECTED:
		w->term_skipped = worker_term_ends_ahead(w);
		return w->term_skipped;
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY:
	case LEASEHOLD__BUS__EVENT__KIND_WATCH_EVENTS:
		/* a shadow run's snapshot batch or key belongs to no term (the
		 * host queued it ahead of any on_elected): it runs, token 0 */
		if (ev->shadow)
			return false;
		/* keys that run concurrently: the host sends a term's end only
		 * once every key returned, so none can wait behind one; not
		 * collecting ahead keeps up to key_concurrency keys out of the
		 * stash */
		if (ev->kind_case == LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY && w->pool)
			return w->term_skipped || !w->token;
		/* nothing of a watch or of the queue runs once its term is over */
		return w->term_skipped || !w->token || worker_term_ends_ahead(w);
	case LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED:
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE:
		if (w->term_skipped)
			return true;
		/* handed over on its own (not behind a term start): it runs, as
		 * any event handed over; only the pipelined ones are checked */
		return ev->behind && worker_term_ends_ahead(w);
	case LEASEHOLD__BUS__EVENT__KIND_DEPOSED: {
		bool skip = w->term_skipped;
		w->term_skipped = false;
		return skip;
	}
	default:
		return false;
	}
}

nng_msg *worker_done_msg(struct worker *w, struct worker_call *c, const Event *ev, int32_t err,
                         bool skipped, uint64_t callback_ns)
{
	int cb = worker_event_callback(ev);
	if (err < 0 && !c->errmsg[0] && cb >= 0)
		worker_api_explain(c, (unsigned)cb, err);
	EventDone done = LEASEHOLD__BUS__EVENT_DONE__INIT;
	done.seq = ev->seq;
	done.err = err;
	done.skipped = skipped;
	done.message = bus_bin_str(c->errmsg);
	done.callback_ns = callback_ns;
	Leasehold__Bus__WatchSpec specs[LH_WATCH_MAX], *spec_ptrs[LH_WATCH_MAX];
	if (ev->kind_case == LEASEHOLD__BUS__EVENT__KIND_INIT) {
		done.bus_version = LH_BUS_VERSION;
		for (unsigned i = 0; err == 0 && i < w->n_watches; i++) {
			leasehold__bus__watch_spec__init(&specs[i]);
			specs[i].prefix = bus_bin(w->watches[i].prefix, w->watches[i].len);
			specs[i].flags = w->watches[i].flags;
			spec_ptrs[i] = &specs[i];
		}
		done.n_watches = err == 0 ? w->n_watches : 0;
		done.watches = spec_ptrs;
	}
	done.requeue_after_ms = c->requeue_after_ms;
	if (c == &w->main) { /* a watch batch's queue keys: the bus loop's */
		done.keys_incomplete = w->keys_incomplete;
		w->keys_incomplete = false;
		done.keys = w->keys;
		done.n_keys = w->n_keys;
	}
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_DONE;
	th.done = &done;
	return bus_pack_msg(&th.base);
}

/* worker_run_next - the next event to run: from the stash, else received
 * (a reply or other message is taken as it comes); NULL when the bus
 * closed */
static ToWorker *worker_run_next(struct worker *w)
{
	for (;;) {
		ToWorker *tw = worker_stash_pop(w);
		if (tw)
			return tw;
		nng_msg *msg;
		int rv = nng_recvmsg(w->sock, &msg, 0);
		if (rv != 0) {
			if (rv == NNG_EINTR || rv == NNG_ETIMEDOUT)
				continue;
			return NULL; /* closed: the host is gone */
		}
		if (!(tw = worker_decode(w, msg)))
			continue;
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_EVENT && tw->event)
			return tw;
		worker_take_ahead(w, tw, "outside a callback");
	}
}

/* answer tw with err and the reason, without running it (taken) */
static void worker_run_refuse(struct worker *w, ToWorker *tw, int32_t err, const char *why)
{
	worker_protocol_error(w, "event of kind %d refused: %s", (int)tw->event->kind_case, why);
	snprintf(w->main.errmsg, sizeof(w->main.errmsg), "refused by the worker: %s", why);
	nng_msg *m = worker_done_msg(w, &w->main, tw->event, err, false, 0);
	if (m && nng_sendmsg(w->sock, m, 0) != 0)
		nng_msg_free(m);
	leasehold__bus__to_worker__free_unpacked(tw, NULL);
}

/* worker_run_concurrent - with key threads: a key that is not skipped runs
 * on one (true: taken); any other event runs here once no key runs, which
 * the host guarantees (false). What breaks that promise (more keys than
 * threads, another event while keys run) is refused (true: taken and
 * answered) rather than run beside them. */
static bool worker_run_concurrent(struct worker *w, ToWorker *tw, bool skipped)
{
	if (tw->event->kind_case == LEASEHOLD__BUS__EVENT__KIND_RECONCILE_KEY) {
		if (skipped)
			return false; /* answered here: nothing of the plugin runs */
		if (!w->initialized)
			return false; /* refused as every event before init is */
		int r = worker_pool_start(w->pool, tw);
		if (r < 0)
			worker_run_refuse(w, tw, r, "no free key thread");
		return true;
	}
	if (worker_pool_busy(w->pool) == 0)
		return false;
	worker_run_refuse(w, tw, -EBUSY, "reconcile_key calls are running");
	return true;
}

int worker_run(struct worker *w)
{
	int ret = -ECANCELED;
	worker_call_set(&w->main);
	for (ToWorker *tw; (tw = worker_run_next(w));) {
		bool stop = false;
		w->main.errmsg[0] = 0;
		w->main.txn_error[0] = 0; /* a refusal explains only its own callback's failure */
		w->main.requeue_after_ms = 0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		bool skipped = worker_should_skip(w, tw->event);
		if (w->pool && worker_run_concurrent(w, tw, skipped))
			continue;
		int32_t err = -ECANCELED;
		if (skipped)
			snprintf(w->main.errmsg, sizeof(w->main.errmsg), "skipped: leadership ended before it ran");
		else
			err = worker_run_event(w, tw->event, &stop);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
		              (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
		nng_msg *m = worker_done_msg(w, &w->main, tw->event, err, skipped, ns);
		if (m && nng_sendmsg(w->sock, m, 0) != 0)
			nng_msg_free(m);
		worker_keys_free(w);
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		if (stop) {
			ret = 0;
			break;
		}
	}
	if (w->pool)
		worker_pool_close(w->pool); /* every key thread has returned */
	worker_arena_free(&w->main);
	for (ToWorker *tw; (tw = worker_stash_pop(w));)
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	return ret;
}

int worker_new(const struct lh_plugin *desc, nng_socket sock, uint32_t txn_timeout_ms,
               struct worker **ret_w)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	worker_api_init(w);
	w->desc = *desc;
	w->sock = sock;
	w->activity = &w->own_activity;
	for (unsigned k = 0; k < WORKER_CALLBACKS; k++)
		snprintf(w->crash_who[k], sizeof(w->crash_who[k]), "plugin %.*s, callback %s",
		         LH_PLUGIN_NAME_MAX, desc->name ? desc->name : "?", g_callback_names[k]);
	w->txn_timeout_ms = txn_timeout_ms ? txn_timeout_ms : 30000u;
	w->main.w = w;
	if (pthread_mutex_init(&w->cfg_mu, NULL) != 0) {
		free(w);
		return -ENOMEM;
	}
	if (desc->reconcile_key && desc->key_concurrency > 1 &&
	    worker_pool_new(w, desc->key_concurrency, &w->pool) < 0) {
		pthread_mutex_destroy(&w->cfg_mu);
		free(w);
		return -ENOMEM;
	}
	*ret_w = w;
	return 0;
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	for (ToWorker *tw; (tw = worker_stash_pop(w));)
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	worker_pool_free(w->pool);
	pthread_mutex_destroy(&w->cfg_mu);
	free(w->node_id);
	free(w->data_prefix);
	worker_arena_free(&w->main);
	worker_config_free(w);
	free(w->batch_mem);
	worker_keys_free(w);
	for (size_t i = 0; i < w->n_grants; i++)
		free(w->grants[i].data);
	free(w->grants);
	for (unsigned i = 0; i < w->n_watches; i++)
		free(w->watches[i].prefix);
	free(w->cfg_cluster);
	free(w->cfg_local);
	free(w);
}
