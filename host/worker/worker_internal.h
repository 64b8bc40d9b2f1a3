/* SPDX-License-Identifier: MIT */
/*
 * worker_internal.h - what the worker's two files share: the worker itself
 * (struct worker), the bus loop's services the host API needs (worker.c),
 * and the host API table the plugin calls (worker_api.c). Threading: every
 * function here runs on the worker's own thread (the one in worker_run),
 * inside or around a plugin callback, or, for a plugin with a
 * key_concurrency above 1, on one of its key threads (worker_pool.c)
 * inside reconcile_key: what such a call touches is its own struct
 * worker_call, the pool (under its mutex), and state of struct worker that
 * nothing changes while keys run (the host delivers no other callback
 * then; see worker_pool.c).
 */
#ifndef LH_WORKER_INTERNAL_H
#define LH_WORKER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>
#include <nng/nng.h>

#include "abi/abi_bus.h"
#include "proto/bus.pb-c.h"
#include "worker/worker.h"

#define MAX_TXN_OPS 1024u
#define MAX_KEY_LEN (64u * 1024u)
#define MAX_VALUE_LEN (16u * 1024u * 1024u)
#define MAX_WATCH_PREFIX 4096u /* a watch prefix or a read grant, at most */
/* the largest txn message the worker sends: nng's default receive limit
 * (NNG_OPT_RECVMAXSZ, 1 MiB) less room for framing; an ipc pipe that
 * receives a larger message is closed, which would cost the worker its bus.
 * The same bound in thread mode, so both modes refuse the same txns. */
#define WORKER_TXN_MSG_MAX (1024u * 1024u - 4096u)
/* events received ahead (the host has at most 5 in flight; keys that run
 * concurrently leave the stash as they come, see worker_should_skip) */
#define STASH_MAX 16u

struct worker_slot;

/* One running callback's own state: the bus loop thread's (worker.main) or
 * a key thread's (worker_pool.c). The host API finds the caller's through
 * a thread-local pointer (worker_call_cur), so concurrent reconcile_key
 * calls share the one context pointer the plugin knows and still keep
 * their reasons, refusals and arenas apart. */
struct worker_call {
	struct worker *w;
	bool in_callback;
	char errmsg[512];
	char txn_error[512];
	/* the callback's arena (ABI 1.3): txn and range results and the config
	 * accessors' lists, freed when the callback returns */
	struct worker_arena_block {
		struct worker_arena_block *next;
		max_align_t data[];
	} *arena;
	/* reconcile_key returned LH_REQUEUE_AFTER_MS(this); 0 = it did not */
	uint32_t requeue_after_ms;
	struct worker_slot *slot; /* a key thread's slot, NULL for main */
};

struct worker_pool;

struct worker {
	struct lh_ctx ctx; /* first: the plugin's context pointer is &w->ctx */
	struct lh_host_api api;
	struct lh_plugin desc; /* copy of the validated descriptor */
	nng_socket sock;
	struct worker_call main; /* the bus loop thread's callbacks */
	bool initialized;
	char *node_id;
	char *data_prefix;
	int64_t token;
	_Atomic uint64_t last_txn_id; /* key threads take ids concurrently */
	uint32_t txn_timeout_ms;
	/* key_concurrency > 1: the key threads (worker_pool.c), else NULL */
	struct worker_pool *pool;
	pthread_mutex_t cfg_mu; /* the config accessors' lazy parses */
	/* events received ahead of the one running (during a txn wait or by
	 * worker_term_ends_ahead), oldest first */
	ToWorker *stash[STASH_MAX];
	unsigned stash_head, stash_n;
	bool term_skipped; /* this term's on_elected was skipped: skip the rest */
	struct worker_activity own_activity;
	struct worker_activity *activity; /* own_activity or the owner's page */
	/* crash_report lines, one per callback kind, prepared by worker_new */
	char crash_who[WORKER_CALLBACKS][LH_PLUGIN_NAME_MAX + 48];
	/* ABI 1.2 watches: the grants from INIT, the watches init registered */
	bool in_init;
	bool no_watches; /* the host offers none (INIT) */
	ProtobufCBinaryData *grants; /* copies */
	size_t n_grants;
	struct worker_watch {
		uint8_t *prefix; /* full key */
		size_t len;
		uint32_t flags;
	} watches[LH_WATCH_MAX];
	unsigned n_watches;
	void *batch_mem; /* the running on_watch_events' batch (one allocation) */
	/* a keyed plugin's answer to a watch batch (worker_keys.c): the queue
	 * keys, each malloc'd, until the answer is sent */
	ProtobufCBinaryData *keys;
	size_t n_keys;
	bool keys_incomplete; /* worker_keys_collect failed: some are missing */
	/* the configuration api->config() returns (ABI 1.2): cfg points into
	 * cfg_cluster / cfg_local, which the worker owns */
	struct lh_config cfg;
	char *cfg_cluster, *cfg_local;
	bool validating; /* validate_config runs: it may not write */
	/* ABI 1.3 config accessors: the cluster document parsed (lazily; NULL
	 * until asked or when absent), the schema's defaults parsed (lazily,
	 * one per field), and why the newest document was not handed over */
	json_object *cfg_json;
	bool cfg_json_done;
	json_object **schema_defs;
	char schema_error[400];
};

/* ---- worker.c: the bus loop ---- */

/* worker_from_ctx - the worker behind a plugin's context pointer */
struct worker *worker_from_ctx(struct lh_ctx *ctx);
/* worker_call_cur - the calling thread's running callback of w, or NULL
 * (not inside a callback of w: the host API refuses the call) */
struct worker_call *worker_call_cur(const struct worker *w);
/* worker_call_set - the calling thread runs c's callbacks from now on
 * (worker_run's thread: &w->main; a key thread: its slot's) */
void worker_call_set(struct worker_call *c);
/* worker_on_own_thread - worker_call_cur(w) != NULL */
bool worker_on_own_thread(const struct worker *w);
/* worker_activity_set - publish (seq != 0) or clear (seq == 0) the running
 * callback; one writer at a time (the bus loop, or the pool under its
 * mutex while keys run) */
void worker_activity_set(struct worker *w, uint64_t seq, unsigned kind);
/* worker_done_msg - the EventDone of an event that ran with call c (err as
 * returned, its duration in ns): packed, or NULL on ENOMEM */
nng_msg *worker_done_msg(struct worker *w, struct worker_call *c, const Event *ev, int32_t err,
                         bool skipped, uint64_t callback_ns);
/* worker_send - one message to the host (a send failure ends nothing here:
 * the host notices a worker it cannot hear) */
void worker_send(struct worker *w, const ProtobufCMessage *m);
/* worker_send_request - send a txn or range request (msg taken, also on
 * failure) whose reply is id; 0 or -ECANCELED (the bus is closed). A key
 * thread's reply is expected before the request leaves, so the bus loop
 * cannot receive it before it knows whom it is for. */
int worker_send_request(struct worker *w, nng_msg *msg, uint64_t id);
/* worker_wait_txn_reply - the host's answer to request id (txn or range),
 * keeping events that arrive meanwhile for later; NULL with *err on a
 * timeout (-ETIMEDOUT), a closed bus or a protocol error */
ToWorker *worker_wait_txn_reply(struct worker *w, uint64_t id, int *err);
/* worker_build_result - a TxnReply as the plugin's struct lh_txn_result (one
 * allocation in the callback's arena); 0 or -errno */
int worker_build_result(struct worker *w, const TxnReply *rep, const struct lh_txn_result **ret);

/* worker_arena_alloc - size zeroed bytes valid until the calling thread's
 * running callback returns (worker_arena_free); NULL on ENOMEM */
void *worker_arena_alloc(struct worker *w, size_t size);
/* worker_arena_free - free c's arena (when its callback returns) */
void worker_arena_free(struct worker_call *c);

/* ---- worker_api.c: the host API table (struct lh_host_api) ---- */

/* worker_api_txn - api->txn (apply sends its chunks through it) */
int32_t worker_api_txn(struct lh_ctx *ctx, const struct lh_compare *cmps, uint32_t n_cmps,
                       const struct lh_op *success, uint32_t n_success, const struct lh_op *failure,
                       uint32_t n_failure, const struct lh_txn_result **ret_result);
/* worker_api_txn_fail - the reason of a refused call, for api->last_error() */
void worker_api_txn_fail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* worker_api_range_page - a relative range of key (flags 0 or LH_F_PREFIX;
 * a prefix's range from `from` when not NULL), at most limit keys: 0 with
 * *ret_tw (a TxnReply with one result; the caller frees it) or -errno with
 * last_error set. Checked by the host as any range. */
int worker_api_range_page(struct worker *w, const void *key, size_t key_len, uint32_t flags,
                          const void *from, size_t from_len, int64_t limit, ToWorker **ret_tw);

/* ---- worker_apply.c: api->apply, api->apply_key (ABI 1.3) ---- */

int32_t worker_apply(struct lh_ctx *ctx, const void *prefix, uint64_t prefix_len,
                     const struct lh_apply_kv *desired, uint64_t n, uint32_t flags,
                     struct lh_apply_result *result);
int32_t worker_apply_key(struct lh_ctx *ctx, const void *key, uint64_t key_len, const void *value,
                         uint64_t value_len, struct lh_apply_result *result);

/* ---- worker_config_api.c: the config accessors (ABI 1.3) ---- */

/* worker_config_api_init - set the accessors in w->api */
void worker_config_api_init(struct worker *w);
/* worker_config_schema_refuses - does the cluster document text (len
 * bytes) fail the plugin's schema? false, or true with the reason in why */
bool worker_config_schema_refuses(const struct worker *w, const char *doc, size_t len, char *why,
                                  size_t why_len);
/* worker_config_validate - run the plugin's validate_config (set) on doc
 * (len bytes plus a NUL, schema-checked by the caller), its config
 * accessors answering from doc for the call; returns the callback's value */
int32_t worker_config_validate(struct worker *w, const char *doc, size_t len);
/* worker_config_forget - the document changed: drop its parsed form */
void worker_config_forget(struct worker *w);
/* worker_config_free - free the parsed document and defaults */
void worker_config_free(struct worker *w);

/* ---- worker_keys.c: keyed reconcile (ABI 1.3) ---- */

/* worker_keys_collect - a keyed plugin's queue keys for batch b into
 * w->keys (each once; nothing for a plugin without reconcile_key). 0, or
 * -ENOMEM / -E2BIG (over the answer's budget, reason in errmsg) with the
 * keys collected so far kept. */
int worker_keys_collect(struct worker *w, const struct lh_watch_batch *b);
/* worker_keys_free - drop w->keys (after the answer went) */
void worker_keys_free(struct worker *w);
/* worker_keys_run - RECONCILE_KEY: the plugin's reconcile_key as call c
 * (the bus loop's or a key thread's); a requeue-after answer sets
 * c->requeue_after_ms and returns 0 */
int32_t worker_keys_run(struct worker *w, struct worker_call *c,
                        const Leasehold__Bus__ReconcileKey *rk);

/* ---- worker_pool.c: concurrent reconcile_key (key_concurrency > 1) ---- */

/* worker_pool_new - the key threads of w (n of them, started as needed):
 * 0 or -errno (-ENOMEM) */
int worker_pool_new(struct worker *w, unsigned n, struct worker_pool **ret);
/* worker_pool_free - wait for the running keys to return, end the threads,
 * free. Accepts NULL. */
void worker_pool_free(struct worker_pool *p);
/* worker_pool_busy - keys running now */
unsigned worker_pool_busy(struct worker_pool *p);
/* worker_pool_start - run the RECONCILE_KEY event tw (taken on success) on
 * a free key thread, which answers it itself: 0, or -EBUSY (every thread
 * runs one) / -errno (no thread) with tw untouched */
int worker_pool_start(struct worker_pool *p, ToWorker *tw);
/* worker_pool_expect - the calling key thread (c) awaits reply id */
void worker_pool_expect(struct worker_pool *p, struct worker_call *c, uint64_t id);
/* worker_pool_route - a TxnReply the bus loop received: handed to the key
 * thread that awaits it (true, taken) or not awaited by any (false) */
bool worker_pool_route(struct worker_pool *p, ToWorker *tw);
/* worker_pool_wait - the key thread c's reply to id, or NULL with *err
 * (-ETIMEDOUT after the txn timeout, -ECANCELED once the bus closed) */
ToWorker *worker_pool_wait(struct worker_pool *p, struct worker_call *c, uint64_t id, int *err);
/* worker_pool_close - the bus closed: every waiting key thread gives up */
void worker_pool_close(struct worker_pool *p);

/* worker_api_init - the context and the API table of a new worker */
void worker_api_init(struct worker *w);
/* worker_api_explain - a callback (kind WORKER_CB_*) of call c failed with
 * err and the plugin gave no reason (no set_error): errmsg names the callback and
 * its return value, and the host's refusal of the callback's last failed
 * API call when there is one (txn_error: an ungranted watch, a refused key),
 * so no one reads a plugin's failure as an etcd or host error. txn_error is
 * cleared when each callback starts (worker_run). */
void worker_api_explain(struct worker_call *c, unsigned kind, int32_t err);

#endif
