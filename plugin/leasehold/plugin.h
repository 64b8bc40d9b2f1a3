/* SPDX-License-Identifier: MIT */
/*
 * leasehold/plugin.h - the SDK for leasehold reconciler plugins.
 *
 * A plugin is a shared object (`*.so`) dropped into the host's plugin
 * directory. It exports exactly ONE symbol, the data object
 *
 *     LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
 *             LH_PLUGIN_HEADER_INIT,
 *             .name = "reconciler",
 *             .release = {1, 0, 0},
 *             .min_reconciler_release = {1, 0, 0},
 *             .min_compatible_release = {1, 0, 0},
 *             .reconcile = my_reconcile,
 *     };
 *
 * Build it with `cc -shared -fPIC $(pkg-config --cflags leasehold-plugin)`;
 * it needs no library from the host: everything it may call on the host is
 * reached through the table in its context (struct lh_host_api).
 *
 * Design notes
 * - ABI. The first three words protect the rest: `magic_major` (LH_PLUGIN_MAGIC
 *   in the high 16 bits, the ABI major in the low 16), `abi_minor` and `size`
 *   (sizeof(struct lh_plugin) as the plugin was compiled). The host refuses a
 *   plugin whose magic or major differ, whose minor is newer than the host's,
 *   or whose size is smaller than the ABI 1.0 struct; it reads only fields
 *   below `size`. Every ABI struct uses fixed-width integers and pointers only
 *   (no enum, bool, off_t, long) and grows by appending fields, bumping the
 *   minor. Fields are never removed or reordered within a major.
 * - The host API table (struct lh_host_api) follows the same rule: it starts
 *   with its own `size`, and a plugin built against a newer header tests for a
 *   function with LH_HOST_HAS(api, field) before calling it (Redis modules do
 *   the same).
 * - Threading. Every callback of one plugin instance runs on that instance's
 *   own worker: a leasehold-worker child process by default, or a thread of
 *   the daemon when the operator chooses thread isolation (--isolation
 *   thread). One callback at a time, never concurrently with another callback
 *   of the same instance, with one exception a plugin asks for: up to
 *   key_concurrency calls of reconcile_key for different keys (ABI 1.3,
 *   see "Keyed reconcile"), each on its own thread. Different plugins (and an old and a new instance of
 *   the same plugin during a hot reload) run on different workers; under
 *   thread isolation they share the daemon's address space: do not share
 *   mutable globals between instances without your own locking. Host API
 *   functions may be called ONLY from inside a callback, on its thread: from
 *   anywhere else txn fails with -EPERM, log and set_error do nothing and
 *   fencing_token returns 0.
 * - Hot reload loads a private copy of the new file, so a new release runs
 *   next to the old one for a moment (the old one is drained and gets fini);
 *   globals are per copy, never shared between the two.
 * - Ordering. init first (once). Then, per leadership term:
 *       on_elected(token) -> on_releases_changed(replay) -> any of
 *       { on_releases_changed, reconcile, on_watch_events } -> on_deposed
 *   (ABI 1.2) on_watch_events of a term come only after the term's first
 *   reconcile returned: per watch the snapshot (ending with the synced
 *   marker), then live events; see "Watches" below.
 *   The replay right after on_elected hands over the release summary the host
 *   has cached, so a plugin never starts leading blind. Events reach the
 *   plugin ONLY while its node leads: after on_deposed nothing but the next
 *   on_elected (or fini) is delivered; events that were queued when
 *   leadership was lost are dropped. A callback that is already running when
 *   leadership is lost finishes (its fenced txns then fail with -ESTALE).
 *   fini last (once, only if init succeeded), after the queue was drained.
 * - Return convention. Callbacks returning int32_t return 0 on success or a
 *   negative errno value; they may attach a human-readable reason with
 *   api->set_error() (shown by `leaseholdctl plugins` as the last error;
 *   without one the host shows "reconcile returned -ENOENT (no reason
 *   given)" and its refusal of the callback's last failed API call, if
 *   any: give a reason, only the plugin knows it). A positive return (or one
 *   below -4095) is not an errno: the host treats it as -EIO (except
 *   reconcile_key's LH_REQUEUE_AFTER_MS). A failed init
 *   makes the instance "failed" (the host keeps running, nothing
 *   else is called, not even fini). A failed reconcile is retried by the host
 *   with exponential backoff. Errors from on_elected / on_releases_changed
 *   are logged and counted; they do not end leadership.
 * - Optional callbacks: init, on_elected, on_releases_changed, on_deposed,
 *   fini, on_config_changed and validate_config may be NULL (treated as
 *   "nothing to do, success"). reconcile is required unless the plugin has
 *   reconcile_key (ABI 1.3; then a missing reconcile succeeds at once): a
 *   plugin with neither is refused at load time.
 * - Configuration (ABI 1.2). A plugin has a cluster-wide JSON document in
 *   etcd (P/<name>/config) and a node-local one (leasehold --plugin-config),
 *   readable through api->config() from init on, on every node. Changes
 *   arrive through on_config_changed, on every node, leading or not, outside
 *   the leadership order above (between any two callbacks; never dropped by
 *   on_deposed). init runs only once the host has read P/<name>/config from
 *   etcd, so a plugin never starts from a configuration it would be told
 *   later was not the cluster's.
 * - Ownership. Every pointer the host passes into a callback (the context, the
 *   releases, results of txn and range calls, strings returned by the API) is
 *   owned by the host and valid only until that callback returns. From ABI
 *   1.3 on, results of txn and range stay valid for the whole callback (the
 *   host keeps them in a per-callback arena and frees them when the callback
 *   returns: a callback that reads in a loop holds every page until it
 *   returns); a 1.2 host frees a result at the next txn or range call, so
 *   a plugin that must also run on one checks api->abi_minor >= 3.
 *   Copy what you keep. Pointers the plugin passes to the host (keys, values,
 *   messages) are only read during the call. The one pointer the plugin owns
 *   in the context is `ctx->user`: set it in init, free it in fini; the host
 *   never reads or frees it.
 * - A plugin must never: block forever or for long without need (it delays
 *   leadership hand-over and shutdown: a stuck callback keeps the host from
 *   draining); write to stdout/stderr (use api->log); call exit/abort/_exit,
 *   fork, exec or change process-wide state (signal handlers, cwd, umask,
 *   environment, rlimits); keep any host pointer past the callback it got it
 *   in; start threads that outlive fini; write to etcd other than through
 *   api->txn.
 * - Fencing. on_elected receives the fencing token: the create_revision of
 *   this node's election key. Every txn the host runs for the plugin already
 *   carries it as a compare (`create_revision(election key) == token`), so a
 *   deposed leader's writes cannot land. Systems outside etcd are protected
 *   only if the plugin passes the token along and they check it.
 * - When writes are accepted. From the first reconcile of a term on. Before
 *   it (in on_elected and the replay, while the host restricts the status
 *   record or runs the reconcile wait) txn fails with -EAGAIN: the reconciled
 *   state may change only once the status says it may. Do the work in
 *   reconcile. In on_watch_events (ABI 1.2): a term's watch batches come
 *   only after its first reconcile returned, so txn is accepted there as in
 *   reconcile, except while a failed reconcile waits for its retry (the
 *   host's backoff): -EAGAIN then.
 * - Watches (ABI 1.2). A plugin registers key prefixes in init (api->watch):
 *   relative ones under its own P/N/data/ always, absolute ones elsewhere
 *   only where the operator granted the plugin read access (`leasehold
 *   --plugin-read NAME=PREFIX`). Events reach on_watch_events only while
 *   this node leads, per term and per watch in this order: the snapshot of
 *   every key under the prefix at one revision R (LH_WATCH_SNAPSHOT batches,
 *   the last one also LH_WATCH_SYNCED, even for an empty prefix), then every
 *   change from R+1 on in revision order: no gap, no duplicate. A lost watch
 *   (compaction, a failed etcd member, the host's queue of undelivered
 *   events overflowing because the plugin is slow: more than 10,000 live
 *   events waiting) is never silent: the next batch of that watch is a
 *   fresh snapshot flagged LH_WATCH_RESYNC (drop what you cached for it).
 *   What is queued when leadership ends is dropped; the next term starts
 *   with a fresh snapshot. A standby holds nothing: the snapshot is read
 *   from etcd when its term begins.
 */
#ifndef LEASEHOLD_PLUGIN_H
#define LEASEHOLD_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI identification ---- */

#define LH_PLUGIN_MAGIC 0x4c48u /* 'L' 'H' */
#define LH_PLUGIN_ABI_MAJOR 1u
#define LH_PLUGIN_ABI_MINOR 3u
#define LH_PLUGIN_MAGIC_MAJOR ((LH_PLUGIN_MAGIC << 16) | LH_PLUGIN_ABI_MAJOR)
/* the name of the one exported descriptor symbol */
#define LH_PLUGIN_SYMBOL "leasehold_plugin"
/* plugin names: [a-z0-9_-], 1..LH_PLUGIN_NAME_MAX characters */
#define LH_PLUGIN_NAME_MAX 63

/* Export the descriptor even when the plugin is built with
 * -fvisibility=hidden (recommended: export nothing else). */
#define LH_PLUGIN_EXPORT __attribute__((visibility("default")))

/* A release "major.minor.patch". */
struct lh_release {
	uint32_t major;
	uint32_t minor;
	uint32_t patch;
};

/* The release summary over the members (nodes) running this plugin, valid at
 * etcd revision `revision`. */
struct lh_releases {
	struct lh_release min; /* oldest release a member runs */
	struct lh_release max; /* newest release a member runs */
	int64_t revision;      /* etcd revision the summary was taken at */
	uint32_t n_members;    /* number of members */
	uint32_t reserved;     /* 0 */
};

/* ---- the host API ---- */

/* log levels for lh_host_api.log */
#define LH_LOG_ERROR 0
#define LH_LOG_WARN 1
#define LH_LOG_INFO 2
#define LH_LOG_DEBUG 3

/* lh_op.type */
#define LH_OP_RANGE 0u
#define LH_OP_PUT 1u
#define LH_OP_DELETE 2u

/* lh_op.flags / lh_compare.flags */
#define LH_F_PREFIX 0x1u     /* the key is a prefix: every key starting with it */
#define LH_F_KEYS_ONLY 0x2u  /* range: return keys without values */
#define LH_F_COUNT_ONLY 0x4u /* range: return only the count */
#define LH_F_PREV_KV 0x8u    /* put/delete: return the previous key-values */
#define LH_F_ABSOLUTE 0x10u  /* api->range (ABI 1.2): the key is a full etcd key */

/* lh_compare.target */
#define LH_CMP_VERSION 0u
#define LH_CMP_CREATE 1u
#define LH_CMP_MOD 2u
#define LH_CMP_VALUE 3u
/* lh_compare.result */
#define LH_CMP_EQUAL 0u
#define LH_CMP_GREATER 1u
#define LH_CMP_LESS 2u
#define LH_CMP_NOT_EQUAL 3u

/*
 * Keys and values (txn compares and ops, relative api->range keys). A key is
 * RELATIVE to the plugin's data prefix ("P/N/data/"); the host refuses with
 * -EINVAL (api->last_error() names the op and the rule, the host logs it) a
 * key that
 * - is longer than LH_KEY_MAX bytes, or holds a NUL byte;
 * - starts with '/' (an absolute key would silently land under the prefix,
 *   as "P/N/data//x");
 * - has an empty component ("a//b"), or a "." or ".." component: etcd does
 *   not resolve them, so "a/../b" would be a key of its own that no one
 *   reading "b" finds. A trailing '/' is fine ("out/", a prefix);
 * - is empty, unless it is a prefix (LH_F_PREFIX: all of the data prefix);
 * - is a prefix (LH_F_PREFIX) ending in byte 0xff.
 * A put's value (and a compare's) is at most LH_VALUE_MAX bytes. The limits
 * make every value a plugin can write readable back: a read answer
 * (api->range) holds at most LH_READ_MAX bytes, counting each key (as the
 * plugin sees it) + value + 32, so one key at LH_KEY_MAX with a value at
 * LH_VALUE_MAX always fits; more keys may need a limit and paging.
 */
#define LH_KEY_MAX 4096u
#define LH_VALUE_MAX (500u * 1024u)
#define LH_READ_MAX (512u * 1024u)

/*
 * One txn operation: key (see "Keys and values" above) and value are bytes
 * (pointer + length), read only during the txn call. The host prepends the
 * data prefix, so a plugin cannot touch anything outside it.
 */
struct lh_op {
	uint32_t type;  /* LH_OP_* */
	uint32_t flags; /* LH_F_* */
	const void *key;
	uint64_t key_len;
	const void *value; /* put */
	uint64_t value_len;
	int64_t limit; /* range: maximum number of keys, 0 = no limit */
};

/* One compare. `number` is compared for VERSION/CREATE/MOD, `value` for VALUE.
 * LH_F_PREFIX makes it hold for every key under the relative prefix. */
struct lh_compare {
	uint32_t target; /* LH_CMP_VERSION.. */
	uint32_t result; /* LH_CMP_EQUAL.. */
	uint32_t flags;  /* LH_F_PREFIX or 0 */
	uint32_t reserved;
	const void *key;
	uint64_t key_len;
	int64_t number;
	const void *value;
	uint64_t value_len;
};

/* A key-value from etcd; key is relative to the data prefix. key and value
 * are each followed by a NUL byte not counted in their lengths (so text can
 * be used as a C string). */
struct lh_kv {
	const uint8_t *key;
	uint64_t key_len;
	const uint8_t *value;
	uint64_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
};

/* The result of one op of the branch that ran. */
struct lh_op_result {
	uint32_t type; /* LH_OP_* */
	uint32_t more; /* range: 1 when more keys matched than returned */
	const struct lh_kv *kvs; /* range: the keys; put/delete: previous kvs (LH_F_PREV_KV) */
	uint64_t n_kvs;
	int64_t count;   /* range: number of matching keys */
	int64_t deleted; /* delete: number of deleted keys */
};

/* The result of a txn. succeeded = 1 when every compare held (the success
 * branch ran), 0 when the failure branch ran: either one of the plugin's own
 * compares failed, or this node is no longer the leader (the fence). The
 * plugin cannot tell these apart from the result alone; a lost leadership is
 * followed by on_deposed once the current callback returns, and by -ESTALE
 * from every further txn. */
struct lh_txn_result {
	uint32_t succeeded;
	uint32_t reserved;
	int64_t revision; /* etcd revision after the txn */
	const struct lh_op_result *results;
	uint64_t n_results;
};

/* ---- ABI 1.2: watches ---- */

/* api->watch flags */
#define LH_WATCH_ABSOLUTE 0x1u /* the prefix is a full etcd key (needs a grant) */
#define LH_WATCH_PREV_KV 0x2u  /* live events carry the previous value */
/* at most this many watches per plugin */
#define LH_WATCH_MAX 16u

/* lh_watch_event.type */
#define LH_WATCH_PUT 0u
#define LH_WATCH_DELETE 1u

/* lh_watch_batch.flags */
#define LH_WATCH_SNAPSHOT 0x1u /* the events are the snapshot at `revision` (all puts) */
#define LH_WATCH_SYNCED 0x2u   /* the snapshot is complete: live events follow */
#define LH_WATCH_RESYNC 0x4u   /* the first batch of a fresh snapshot after the watch
                                  was lost: drop what you cached for this watch first */

/* One change. kv.key is relative to the data prefix for a relative watch and
 * the full key for an absolute one (NUL-terminated as in struct lh_kv). A
 * DELETE has an empty value and mod_revision = the deletion's revision.
 * prev_kv is NULL unless the watch asked for it (LH_WATCH_PREV_KV) and etcd
 * still had it; snapshot events have none. */
struct lh_watch_event {
	uint32_t type; /* LH_WATCH_PUT / LH_WATCH_DELETE */
	uint32_t reserved;
	struct lh_kv kv;
	const struct lh_kv *prev_kv;
};

/* A batch of events of ONE watch, in etcd revision order. */
struct lh_watch_batch {
	uint32_t watch_id; /* as returned by api->watch */
	uint32_t flags;    /* LH_WATCH_SNAPSHOT / SYNCED / RESYNC */
	int64_t revision;  /* snapshot: its revision R; live: the last event's revision */
	const struct lh_watch_event *events;
	uint64_t n_events; /* may be 0 (a synced marker of an empty prefix) */
};
/*
 * The plugin's configuration (ABI 1.2), as api->config() and
 * on_config_changed hand it over. Two documents, each JSON text (an object)
 * followed by a NUL byte not counted in its length:
 * - cluster: the cluster-wide document in etcd at P/<name>/config, the same
 *   on every node (so two leaders can never act on different settings).
 *   Written with `leaseholdctl config set|edit`. NULL (length 0, revision 0)
 *   while the key does not exist.
 * - local: this node's own settings (paths, credentials files, local
 *   endpoints), from the file given with `leasehold --plugin-config
 *   NAME=FILE`, read when the instance starts. NULL when none was given.
 * Host-owned; valid until the callback it was obtained in returns.
 */
struct lh_config {
	uint32_t size;  /* sizeof(struct lh_config) as the host was built */
	uint32_t flags; /* LH_CONFIG_F_* */
	const char *cluster; /* the cluster document, or NULL */
	uint64_t cluster_len;
	int64_t cluster_revision; /* its etcd mod_revision; 0 when absent */
	const char *local; /* the node-local document, or NULL */
	uint64_t local_len;
};

/* lh_config.flags: etcd holds a cluster document that is not a valid JSON
 * object (written behind leaseholdctl's back); `cluster` is still the last
 * good one, and leaseholdctl shows the error */
#define LH_CONFIG_F_CLUSTER_INVALID 0x1u

/* ---- ABI 1.3: apply ---- */

/* One key of a desired set (api->apply): key relative to the data prefix,
 * value any bytes (value_len 0: an empty value). Read only during the call. */
struct lh_apply_kv {
	const void *key;
	uint64_t key_len;
	const void *value;
	uint64_t value_len;
};

/* What api->apply / api->apply_key did (the caller's memory). */
struct lh_apply_result {
	uint64_t put;       /* keys written (new or different) */
	uint64_t deleted;   /* keys deleted */
	uint64_t unchanged; /* keys that already held their value */
	uint32_t txns;      /* fenced txns sent */
	uint32_t reserved;
	int64_t revision;   /* etcd revision after the last txn (or of the read) */
	int64_t reserved2[4];
};

/* api->apply flags */
#define LH_APPLY_KEEP_OTHERS 0x1u /* do not delete keys under prefix outside the set */
/* ops and bytes of one txn of apply: etcd's default --max-txn-ops is 128
 * and the host's fence takes one more; the bytes stay under the bus's
 * 1 MiB message (and etcd's 1.5 MiB --max-request-bytes) */
#define LH_APPLY_TXN_OPS 127u
#define LH_APPLY_TXN_BYTES (960u * 1024u)
/* the largest desired set */
#define LH_APPLY_MAX (1024u * 1024u)

/* ---- ABI 1.3: the configuration schema ---- */

/* lh_config_field.type */
#define LH_CONFIG_STRING 0u
#define LH_CONFIG_INT 1u
#define LH_CONFIG_BOOL 2u
#define LH_CONFIG_DURATION 3u /* "5s", "500ms", ... or a number of seconds */
#define LH_CONFIG_STRINGS 4u  /* a JSON array of strings */
/* lh_config_field.flags */
#define LH_CONFIG_REQUIRED 0x1u /* a document without the field is refused */

/*
 * One field of the cluster document (lh_plugin.config_fields). The host
 * checks a document against the schema on `leaseholdctl config set|edit`
 * (refused, naming the field and the reason, before validate_config runs)
 * and before on_config_changed (a document that fails is not handed over:
 * as an invalid one, LH_CONFIG_F_CLUSTER_INVALID). Fields the schema does
 * not name are let through. With no cluster document at all, every field
 * has its default. The schema is checked when the plugin loads: a bad one
 * refuses the plugin with the reason.
 */
struct lh_config_field {
	const char *path;  /* "label" or "a.b" (nested objects); [A-Za-z0-9_-] parts */
	uint32_t type;     /* LH_CONFIG_* */
	uint32_t flags;    /* LH_CONFIG_REQUIRED or 0 */
	const char *def;   /* the default as JSON text ("\"blue\"", "5", "true"), or NULL */
	const char *const *allowed; /* STRING: the allowed values, NULL-terminated; or NULL */
	int64_t min, max;  /* INT: the bounds when min < max; DURATION: in ms, likewise */
};
#define LH_CONFIG_FIELDS_MAX 256u

struct lh_ctx;

/*
 * The host API. Reached through ctx->host in every callback. A plugin built
 * against a newer header checks LH_HOST_HAS(ctx->host, field) before calling
 * a function this header added after ABI 1.0.
 */
struct lh_host_api {
	uint32_t size;      /* sizeof(struct lh_host_api) as the host was built */
	uint32_t abi_minor; /* the host's LH_PLUGIN_ABI_MINOR */

	/* log - one line in the host's log, tagged with the plugin name. level is
	 * LH_LOG_*; msg is read during the call (control characters are masked).
	 * Never blocks for long; never fails. */
	void (*log)(struct lh_ctx *ctx, int32_t level, const char *msg);

	/* set_error - attach a reason to the failure the current callback is about
	 * to return (copied; truncated to 511 bytes). The last call wins. */
	void (*set_error)(struct lh_ctx *ctx, const char *msg);

	/* txn - run an etcd transaction under the plugin's data prefix, fenced by
	 * this node's leadership. Synchronous for the plugin: the call returns when
	 * etcd answered. Returns 0 and sets *ret_result (host-owned, valid until
	 * the end of the callback; on a 1.2 host only until the next txn or
	 * range call) when etcd ran the txn
	 * (check ->succeeded), or a negative errno with *ret_result untouched:
	 *   -ESTALE     this node does not lead (anymore), or not in the term this
	 *               callback belongs to (it lost and regained leadership
	 *               while the callback ran)
	 *   -EAGAIN     this node leads but may not write yet: the status protocol
	 *               is still restricting the status or in the reconcile wait
	 *               (writes are accepted from the first reconcile on)
	 *   -EINVAL     a bad op/compare (unknown type or flag, a key or value
	 *               the rules of "Keys and values" refuse)
	 *   -E2BIG      more than 1024 compares or ops in a branch, or a txn
	 *               larger than about 1 MiB (its keys and values together:
	 *               two values at LH_VALUE_MAX fit, three do not): split it
	 *   -EPERM      called outside a callback or from another thread
	 *   -ETIMEDOUT  no answer in time: the outcome is UNKNOWN, read back first
	 *   -ECANCELED  the instance is shutting down
	 *   other       etcd errors (-ECONNREFUSED, -EAGAIN, -EIO, -EKEYREJECTED: TLS
	 *               setup, ...)
	 * api->last_error() then has a one-line explanation.
	 * Keys are relative to the data prefix only: a txn cannot read a
	 * granted (absolute) input atomically with its write. Read the input
	 * with range (or take it from a watch), derive, write; the watch
	 * delivers every later change of the input, and the next reconcile
	 * derives again, so the output follows the input (level-triggered).
	 * To make a write depend on the input's state, compare your own record
	 * of the input revision you derived from under the data prefix. */
	int32_t (*txn)(struct lh_ctx *ctx, const struct lh_compare *cmps, uint32_t n_cmps,
	               const struct lh_op *success, uint32_t n_success, const struct lh_op *failure,
	               uint32_t n_failure, const struct lh_txn_result **ret_result);

	/* last_error - the host's explanation of the last failed txn (host-owned,
	 * valid until the next API call or the end of the callback; "" if none). */
	const char *(*last_error)(struct lh_ctx *ctx);

	/* fencing_token - the current term's token (the election key's
	 * create_revision) from on_elected until on_deposed, else 0. */
	int64_t (*fencing_token)(struct lh_ctx *ctx);

	/* node_id - this node's id (host-owned, valid for the instance's life). */
	const char *(*node_id)(struct lh_ctx *ctx);

	/* data_prefix - the full etcd prefix txn keys are relative to, e.g.
	 * "/leasehold/reconciler/data/" (host-owned, valid for the instance's
	 * life). For logging and for systems outside etcd; txn keys stay relative. */
	const char *(*data_prefix)(struct lh_ctx *ctx);

	/* ---- ABI 1.2: watches (test with LH_HOST_HAS before calling) ---- */

	/* watch - from init ONLY: register a watch of every key starting with
	 * prefix[0..prefix_len). flags: LH_WATCH_ABSOLUTE (the prefix is a full
	 * etcd key; it must lie inside a read grant of the operator's), else the
	 * prefix is relative to the data prefix ("" = all of P/N/data/);
	 * LH_WATCH_PREV_KV (live events carry the previous value). The prefix is
	 * copied. Returns the watch id (>= 0, the index in registration order,
	 * as lh_watch_batch.watch_id) or a negative errno, with api->last_error()
	 * saying why (and a line in the host's log):
	 *   -EPERM    an absolute prefix no grant covers (last_error: `watch of
	 *             "PREFIX" refused: not granted (outside P/N/data/; the
	 *             operator grants read access with leasehold --plugin-read
	 *             N=PREFIX)`), or called outside init / from another thread
	 *   -EINVAL   unknown flags, prefix NULL with a length, longer than 4 KiB
	 *   -ENOSPC   more than LH_WATCH_MAX watches
	 *   -ENOTSUP  this host offers no watches (an embedding without etcd)
	 * Watches live as long as the instance (a hot reload's new instance
	 * registers its own). Events go to on_watch_events; a plugin that
	 * registers a watch without that callback is refused at init (-EINVAL). */
	int32_t (*watch)(struct lh_ctx *ctx, const void *prefix, uint64_t prefix_len,
	                 uint32_t flags);

	/* range - a linearizable read through the host (not fenced: it writes
	 * nothing; it works on any node, from any callback including init).
	 * key is relative to the data prefix, or a full key with LH_F_ABSOLUTE
	 * (then inside a read grant, else -EPERM); flags LH_F_PREFIX,
	 * LH_F_KEYS_ONLY, LH_F_COUNT_ONLY; limit 0 = no limit. Synchronous.
	 * Returns 0 and *ret_result (host-owned, valid until the end of the
	 * callback, on a 1.2 host only until the next txn/range call; keys as
	 * given: relative, or full for an absolute range) or a negative errno (api->last_error() says why):
	 *   -EPERM      outside a callback, or an ungranted absolute key
	 *   -EINVAL     bad flags, a relative key the rules of "Keys and values"
	 *               refuse (an absolute one: at most LH_KEY_MAX, no NUL)
	 *   -EMSGSIZE   the answer is larger than LH_READ_MAX (512 KiB, keys +
	 *               values + 32 bytes a key): use limit and page
	 *   -ENOTSUP    this host offers no range reads
	 *   -ETIMEDOUT, -ECANCELED, etcd errors as for txn */
	int32_t (*range)(struct lh_ctx *ctx, const void *key, uint64_t key_len, uint32_t flags,
	                 int64_t limit, const struct lh_op_result **ret_result);

	/* request_reconcile - ask for one more reconcile of this term, from any
	 * callback. Coalesced: while one is queued or running, any number of
	 * requests make at most one more follow (a `leaseholdctl reconcile NAME`
	 * pending at the same moment is served by that same reconcile). Never
	 * blocks. Returns 0 when noted, -ESTALE when this node does not lead,
	 * -EPERM outside a callback. The host answers nothing back: the
	 * reconcile comes as any reconcile does (retried with backoff on error). */
	int32_t (*request_reconcile)(struct lh_ctx *ctx);
	/* ---- ABI 1.2: configuration (pconfig) ---- */
	/* config - the plugin's configuration now: the cluster document with its
	 * etcd revision and the node-local document (struct lh_config). Callable
	 * from init on, in any callback, on the callback's thread; never NULL;
	 * never fails. Host-owned, valid until the callback returns (copy what
	 * you keep). Outside a callback (another thread) it returns an empty
	 * configuration (both documents NULL). */
	const struct lh_config *(*config)(struct lh_ctx *ctx);

	/* ---- ABI 1.3: apply, config accessors (test with LH_HOST_HAS) ---- */

	/* apply - make the keys under `prefix` (relative to the data prefix;
	 * "" = all of it) equal `desired` (n key-values, in any order; keys
	 * relative to the data prefix, each starting with prefix): the host
	 * reads what is there (paged range reads), puts only the keys whose
	 * value differs or that are missing, deletes the keys under prefix that
	 * are not in the set (not with LH_APPLY_KEEP_OTHERS), and leaves the
	 * rest alone. Writes go out in fenced txns of at most LH_APPLY_TXN_OPS
	 * ops and LH_APPLY_TXN_BYTES bytes (keys + values + 64 a key): one txn
	 * when the change fits, else chunks in key order, each fenced; the first
	 * chunk that fails ends the call (no write after leadership is lost).
	 * Synchronous, from a callback of a leading term (the same rule as txn:
	 * -EAGAIN before the first reconcile; in a shadow run its chunks are
	 * captured as txn's are). desired and prefix are read only
	 * during the call. *result (the caller's) is always written: zero, then
	 * what landed (put, deleted, unchanged, txns, revision: the last txn's,
	 * or the read's when nothing was written), also when the call fails
	 * part-way. Returns 0 or a negative errno, api->last_error() saying why:
	 *   -EINVAL  unknown flags; prefix or a key the rules of "Keys and
	 *            values" refuse; a key not under prefix; a key twice; a
	 *            value over LH_VALUE_MAX; desired NULL with n > 0; result NULL
	 *   -E2BIG   n over LH_APPLY_MAX
	 *   -ESTALE  not leading, or the fence failed (leadership lost): the
	 *            chunks before it landed, none after (see *result)
	 *   -EPERM, -EAGAIN, -ETIMEDOUT, -ECANCELED, etcd errors as for txn
	 *            and range
	 * Every check is done before the first write: a refused set writes
	 * nothing. The read and the writes are not one revision: a key another
	 * writer changes under prefix meanwhile may be overwritten or deleted
	 * (under a plugin's own data prefix only its leader writes). */
	int32_t (*apply)(struct lh_ctx *ctx, const void *prefix, uint64_t prefix_len,
	                 const struct lh_apply_kv *desired, uint64_t n, uint32_t flags,
	                 struct lh_apply_result *result);

	/* apply_key - apply for one key: put `value` (value_len bytes) unless
	 * the key already holds exactly it, or delete the key when value is NULL
	 * (if it exists). One range read and at most one fenced txn. result may
	 * be NULL; else written as for apply. Errors as for apply. */
	int32_t (*apply_key)(struct lh_ctx *ctx, const void *key, uint64_t key_len,
	                     const void *value, uint64_t value_len, struct lh_apply_result *result);

	/* config_string, config_int, config_bool, config_duration_ms,
	 * config_strings - a typed field of the cluster document by path
	 * ("label", or "a.b.c" into nested objects), parsed by the host. When
	 * the document has no such field: the default of the plugin's schema
	 * (lh_plugin.config_fields) if it declares one, else `def`. When the
	 * field has another type than asked for (only possible without a schema
	 * entry for it): `def`, a warning in the host's log and the reason in
	 * api->last_error(). A duration is a JSON string as operators write it
	 * ("500ms", "5s", "2m", "1h") or a number of seconds; returned in
	 * milliseconds. config_strings returns the number of strings of a JSON
	 * array of strings and sets *ret_items (NULL when none) to them.
	 * From init on, in any callback, on the callback's thread; never block.
	 * In validate_config they read the document being validated (not the
	 * current one), so a plugin checks a candidate with them too.
	 * Returned strings are host-owned and valid until the callback returns.
	 * Outside a callback: def (0 strings). */
	const char *(*config_string)(struct lh_ctx *ctx, const char *path, const char *def);
	int64_t (*config_int)(struct lh_ctx *ctx, const char *path, int64_t def);
	int32_t (*config_bool)(struct lh_ctx *ctx, const char *path, int32_t def);
	int64_t (*config_duration_ms)(struct lh_ctx *ctx, const char *path, int64_t def);
	uint32_t (*config_strings)(struct lh_ctx *ctx, const char *path,
	                           const char *const **ret_items);

	/* alloc - size zeroed bytes from the callback's arena: valid until the
	 * callback returns, then freed by the host (do not free them; copy what
	 * you keep). For the buffers of one callback (a desired set, its keys
	 * and values: see lh_printf). Returns NULL when out of memory, for size
	 * 0 or over 1 GiB, or outside a callback (another thread). */
	void *(*alloc)(struct lh_ctx *ctx, uint64_t size);
};

/* LH_HOST_HAS(api, field) - the host's table has `field` and it is set. */
#define LH_HOST_HAS(api, field) \
	((api)->size >= offsetof(struct lh_host_api, field) + sizeof((api)->field) && \
	 (api)->field != NULL)

/*
 * The per-instance context passed to every callback. Host-owned; the same
 * pointer for the instance's life (concurrent reconcile_key calls share it:
 * the host tells them apart by their threads), but do not use it outside a
 * callback.
 */
struct lh_ctx {
	uint32_t size; /* sizeof(struct lh_ctx) as the host was built */
	uint32_t reserved;
	const struct lh_host_api *host; /* the host API (host-owned) */
	void *user; /* the plugin's own state: NULL before init; set and freed by the plugin */
};

/* ---- the descriptor ---- */

struct lh_plugin {
	/* ---- ABI 1.0; these three first, forever ---- */
	uint32_t magic_major; /* LH_PLUGIN_MAGIC_MAJOR */
	uint32_t abi_minor;   /* LH_PLUGIN_ABI_MINOR the plugin was built with */
	uint32_t size;        /* sizeof(struct lh_plugin) the plugin was built with */
	uint32_t flags;       /* LH_PLUGIN_F_* or 0; other bits are refused */

	/* [a-z0-9_-]{1,63}; the etcd key space P/<name>/ is the plugin's */
	const char *name;
	/* this build's release */
	struct lh_release release;
	/* the oldest reconciler release whose status lets local consumers of THIS
	 * release serve (release >= it is required) */
	struct lh_release min_reconciler_release;
	/* the oldest release that may still be serving once this release has
	 * reconciled (release >= it is required) */
	struct lh_release min_compatible_release;
	uint32_t reserved0;

	/* init - once, first. Allocate state into ctx->user. Optional. */
	int32_t (*init)(struct lh_ctx *ctx);
	/* on_elected - this node now leads; fencing_token as above. Optional. */
	int32_t (*on_elected)(struct lh_ctx *ctx, int64_t fencing_token);
	/* on_releases_changed - the member release summary (host-owned, valid
	 * during the call). First call of a term is the replay. Optional. */
	int32_t (*on_releases_changed)(struct lh_ctx *ctx, const struct lh_releases *releases);
	/* reconcile - bring the data under the prefix to the desired state, using
	 * ctx->host->txn. Idempotent. Required. */
	int32_t (*reconcile)(struct lh_ctx *ctx);
	/* on_deposed - leadership ended; txns fail from now on. Optional. */
	void (*on_deposed)(struct lh_ctx *ctx);
	/* fini - once, last; free ctx->user. Optional. */
	void (*fini)(struct lh_ctx *ctx);

	/* ---- ABI 1.1 ---- */
	/* role - the node role this plugin needs ([a-z0-9_-]{1,63}, e.g.
	 * "controller"), or NULL to run on every node. The host joins the
	 * plugin's membership and election only while its node holds the role
	 * (P/roles/<node-id>, see leaseholdctl roles). Read only when abi_minor >= 1
	 * and size covers it. */
	const char *role;

	/* ---- ABI 1.2: watch (read only when abi_minor >= 2 and size covers it) ---- */
	/* on_watch_events - a batch of one watch's events (host-owned, valid
	 * during the call). Only while leading, after the term's first reconcile
	 * (see "Watches" and "When writes are accepted" above); runs on the
	 * worker thread like every callback, never concurrently with another.
	 * Per watch: snapshot batches (LH_WATCH_SNAPSHOT), the last one also
	 * LH_WATCH_SYNCED, then live batches; LH_WATCH_RESYNC starts a fresh
	 * snapshot. A failure (negative errno) is logged and counted; the events
	 * are NOT delivered again (ask for a reconcile, or return and let the
	 * periodic reconcile catch up). Required when a watch is registered,
	 * unless the plugin has reconcile_key (ABI 1.3). */
	int32_t (*on_watch_events)(struct lh_ctx *ctx, const struct lh_watch_batch *batch);
	/* ---- ABI 1.2: configuration (pconfig) ---- */
	/* Both read only when abi_minor >= 2 and size covers them. */
	/* on_config_changed - the cluster document (P/<name>/config) or the
	 * node-local one changed; `config` is the new state (host-owned, valid
	 * during the call; api->config() returns the same). Called on EVERY
	 * node running the plugin, leading or not: configuration is state, not
	 * a leadership event, so it is neither dropped by on_deposed nor
	 * replayed by on_elected. Ordering: after init (init already sees the
	 * configuration of its time through api->config()), in etcd revision
	 * order, one at a time like every callback; changes that come while one
	 * waits are merged (the plugin sees the newest state, not every step);
	 * never called with a state equal to the one it last saw. A cluster
	 * document that is not a valid JSON object is never handed over: the
	 * plugin is called once with its last good document and
	 * LH_CONFIG_F_CLUSTER_INVALID in flags, and keeps that document. Runs on
	 * the instance's worker like every callback.
	 * Returns 0 or -errno (+ set_error): an error is logged and shown as
	 * this node's configuration error (leaseholdctl's config_error, the
	 * leasehold_config_error metric, /readyz) until a later call succeeds;
	 * it changes nothing else (the state stays the new one). Writes through txn follow the usual rule (leading, from the
	 * first reconcile of the term on). Optional. */
	int32_t (*on_config_changed)(struct lh_ctx *ctx, const struct lh_config *config);
	/* validate_config - may `json` (len bytes plus a NUL, a JSON object
	 * already checked by the host; host-owned, valid during the call) become
	 * the cluster document? Called by the host of the node where an
	 * operator runs `leaseholdctl config set|edit`, if the plugin is loaded
	 * there, before anything is written; on any node, leading or not, on the
	 * plugin's worker like every callback (it waits for a running callback).
	 * Must not write (txn fails with -EPERM) and should be quick: the
	 * operator waits for it. Returns 0 to accept, or -errno (e.g. -EINVAL)
	 * with a reason in set_error, which leaseholdctl shows; nothing is
	 * written then. Optional (NULL: every JSON object is accepted). On a
	 * 1.3 host `json` has passed the schema (config_fields) first, and the
	 * config accessors (config_string, ...) read `json` during the call. */
	int32_t (*validate_config)(struct lh_ctx *ctx, const char *json, uint64_t len);
	/* ---- ABI 1.3: the configuration schema (read only when abi_minor >= 3
	 * and size covers it) ---- */
	/* config_fields - n_config_fields fields (at most LH_CONFIG_FIELDS_MAX;
	 * see struct lh_config_field), or NULL/0 for none. Plugin-owned, read
	 * while the plugin is loaded. config_field_size is
	 * sizeof(struct lh_config_field) as the plugin was built. */
	const struct lh_config_field *config_fields;
	uint32_t n_config_fields;
	uint32_t config_field_size;
	/* ---- ABI 1.3: keyed reconcile (read only when abi_minor >= 3 and size
	 * covers them; see "Keyed reconcile" below) ---- */
	/* reconcile_key - reconcile one key of the work queue: key (key_len
	 * bytes and a NUL; host-owned, valid during the call) as a watch
	 * delivered it (relative to the data prefix for a relative watch, full
	 * for an absolute one) or as key_of mapped it. Only while leading,
	 * after the term's first reconcile, one key at a time (or up to
	 * key_concurrency different keys at once, each on its own thread),
	 * never concurrently with another callback. Returns 0 when the key is
	 * reconciled, a negative errno (+ set_error) to retry it with back-off,
	 * or LH_REQUEUE_AFTER_MS(ms) to run it again after ms milliseconds
	 * (not a failure). Writes through txn/apply/apply_key are fenced like
	 * every callback's. Optional; with it, reconcile and on_watch_events
	 * become optional too. */
	int32_t (*reconcile_key)(struct lh_ctx *ctx, const char *key, uint32_t key_len);
	/* key_of - the queue key a watch event stands for, e.g. the input an
	 * output was derived from, so that an output's change requeues its
	 * input: write it into buf (at most cap = LH_KEY_MAX bytes, no NUL
	 * needed) and return its length; 0 = the event queues nothing; a
	 * negative errno queues the event's own key (a change is never lost)
	 * and is logged. batch and ev are host-owned, valid during the call.
	 * Must not call the host API. Optional (NULL: an event's key is its
	 * own key). */
	int32_t (*key_of)(struct lh_ctx *ctx, const struct lh_watch_batch *batch,
	                  const struct lh_watch_event *ev, char *buf, uint32_t cap);
	/* the back-off of a failing key: the n-th failure in a row waits
	 * min(key_backoff_min_ms << (n - 1), key_backoff_max_ms); 0 = the
	 * defaults (5 ms and 5 minutes) */
	uint32_t key_backoff_min_ms;
	uint32_t key_backoff_max_ms;
	/* key_concurrency - how many different keys reconcile_key may run on
	 * at once (controller-runtime's MaxConcurrentReconciles): 0 or 1 = one
	 * at a time, at most LH_KEY_CONCURRENCY_MAX (a larger value is refused
	 * at load time). Never two calls for the same key at once, and never
	 * while any other callback runs; see "Keyed reconcile" below for what
	 * a plugin declaring more than 1 must make thread-safe. Read only when
	 * abi_minor >= 3 and size covers it (LH_PLUGIN_SIZE_1_3_CONCURRENCY):
	 * a 1.3 plugin built before the field runs one key at a time. */
	uint32_t key_concurrency;
	/* ---- append new fields below, bump LH_PLUGIN_ABI_MINOR ---- */
};

/*
 * Keyed reconcile (ABI 1.3). A plugin with reconcile_key gets a work queue
 * per instance, kept by the host, fed from its watches: every key of a
 * snapshot or a resync and every changed key of a live batch (through
 * key_of when the plugin has it) is added once however often it changes;
 * a key that changes while it is being reconciled runs again afterwards.
 * The queue lives only while the node leads: on_deposed drops it, and the
 * next term's snapshot (on whichever node) fills it again with every key,
 * so nothing is lost across a failover, a hot reload or a crash of the
 * worker (a key whose reconcile was cut short by a crash counts as
 * failed). A failure backs the key off (key_backoff_*); a change to a
 * backing-off key makes it run at once. `leaseholdctl status`, `plugins -o
 * json` and the metrics show the queue (depth, the oldest key's age,
 * failures). The full reconcile still runs where it would (a term's
 * first, the periodic one, `leaseholdctl reconcile`) when the plugin has
 * one; without one those succeed at once.
 *
 * Concurrent keys (key_concurrency > 1). Up to key_concurrency calls of
 * reconcile_key run at once, for different keys, each on its own thread of
 * the worker (process or thread isolation alike):
 * - the same key never runs twice at once; a change during its call runs
 *   it again after it returned;
 * - no other callback runs while a key does: on_elected, on_deposed,
 *   reconcile, on_watch_events, on_config_changed, validate_config and
 *   fini wait until every running key returned, and no key starts while
 *   one of them runs (key_of, too, never runs beside a key);
 * - when leadership ends, keys already running finish (their txns fail
 *   with -ESTALE), no key starts, and on_deposed comes after the last one;
 * - per call, not shared: the arena (txn and range results, alloc,
 *   lh_printf), the set_error reason, last_error, the requeue-after, the
 *   callback timeout (a call that overruns counts as the worker's failure,
 *   as any callback's).
 * Safe from concurrent calls: log, set_error, last_error, txn, range,
 * apply, apply_key, alloc, config, config_string, config_int,
 * config_bool, config_duration_ms, config_strings, fencing_token,
 * node_id, data_prefix, request_reconcile (watch stays init's: -EPERM).
 * Every call gets the same ctx; ctx->user is shared by them: lock what
 * your calls share, and do not replace ctx->user in reconcile_key.
 */
/* reconcile_key's "run this key again after ms milliseconds" (ms >= 1) */
#define LH_REQUEUE_AFTER_MS(ms) ((int32_t)(ms) > 0 ? (int32_t)(ms) : 1)

/* lh_plugin.flags (the word has been in the descriptor since ABI 1.0, so a
 * flag needs no minor bump; a host older than the flag ignores it).
 *
 * LH_PLUGIN_F_REFERENCE_ROLLOUT - the reference algorithm's rollout rule
 * for the time this release is the newest among the plugin's members: only
 * nodes of this release campaign, and while its change must wait for older
 * members to go, nobody reconciles. Without the flag (the default) the
 * newest release that can act now leads: while this release waits, the
 * older release keeps leading and reconciling. Set it when an older
 * release must stop acting as soon as this one is present, e.g. when this
 * release changes what the older reconciler's outside effects mean. Only
 * the newest member release's flag counts (a host older than the flag
 * always follows the reference rule). See docs/plugin-guide.md, "Rollouts". */
#define LH_PLUGIN_F_REFERENCE_ROLLOUT 0x1u
/* every flag this header defines */
#define LH_PLUGIN_F_KNOWN LH_PLUGIN_F_REFERENCE_ROLLOUT

/* The one symbol a plugin defines. Declared here with its export
 * attribute, so that a definition in a file that includes this header is
 * exported under -fvisibility=hidden even without LH_PLUGIN_EXPORT (which
 * stays harmless). A version script or export list that leaves it out
 * still hides it: the host then refuses the file with "symbol
 * leasehold_plugin not exported: build with LH_PLUGIN_EXPORT". */
extern LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin;

/* The first three words of any descriptor, for designated initialisers. */
#define LH_PLUGIN_HEADER_INIT \
	.magic_major = LH_PLUGIN_MAGIC_MAJOR, .abi_minor = LH_PLUGIN_ABI_MINOR, \
	.size = (uint32_t)sizeof(struct lh_plugin)

/* The size of the ABI 1.2 watch part (1.1 + on_watch_events). */
#define LH_PLUGIN_SIZE_1_2_WATCH \
	(offsetof(struct lh_plugin, on_watch_events) + sizeof(void (*)(void)))
/* The size of the ABI 1.2 descriptor's configuration block (1.1 + the
 * watch callbacks + on_config_changed + validate_config). */
#define LH_PLUGIN_SIZE_1_2_CONFIG \
	(offsetof(struct lh_plugin, validate_config) + sizeof(void (*)(void)))

/* The size of the ABI 1.3 descriptor's schema block (1.2 + config_fields,
 * n_config_fields, config_field_size). */
#define LH_PLUGIN_SIZE_1_3_SCHEMA \
	(offsetof(struct lh_plugin, config_field_size) + sizeof(uint32_t))
/* The size of the ABI 1.3 descriptor's keyed block (the schema block +
 * reconcile_key, key_of, key_backoff_min_ms, key_backoff_max_ms). */
#define LH_PLUGIN_SIZE_1_3_KEYED \
	(offsetof(struct lh_plugin, key_backoff_max_ms) + sizeof(uint32_t))
/* The size of the ABI 1.3 descriptor with key_concurrency (the keyed
 * block + key_concurrency). */
#define LH_PLUGIN_SIZE_1_3_CONCURRENCY \
	(offsetof(struct lh_plugin, key_concurrency) + sizeof(uint32_t))
/* the largest key_concurrency the host accepts */
#define LH_KEY_CONCURRENCY_MAX 64u

/* The size of the ABI 1.1 descriptor (1.0 + role). */
#define LH_PLUGIN_SIZE_1_1 (offsetof(struct lh_plugin, role) + sizeof(const char *))

/* The size of the ABI 1.0 descriptor: the smallest the host accepts. */
#define LH_PLUGIN_SIZE_1_0 (offsetof(struct lh_plugin, fini) + sizeof(void (*)(void)))

/* ---- convenience (header-only, built on the API table) ---- */

/* lh_logf - printf-style logging through the host (truncated to 1023 bytes). */
static inline void lh_logf(struct lh_ctx *ctx, int32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline void lh_logf(struct lh_ctx *ctx, int32_t level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= 0)
		ctx->host->log(ctx, level, buf);
}

/* lh_set_errorf - printf-style set_error. */
static inline void lh_set_errorf(struct lh_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void lh_set_errorf(struct lh_ctx *ctx, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n >= 0)
		ctx->host->set_error(ctx, buf);
}

/* lh_printf - printf into the callback's arena (api->alloc, ABI 1.3): the
 * string is valid until the callback returns; NULL when out of memory or
 * the host has no alloc. */
static inline char *lh_printf(struct lh_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline char *lh_printf(struct lh_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !LH_HOST_HAS(ctx->host, alloc))
		return NULL;
	char *buf = (char *)ctx->host->alloc(ctx, (uint64_t)n + 1);
	if (!buf)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(buf, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return buf;
}

/* ---- ABI 1.3: key helpers (header-only; no host call) ---- */

/* lh_key_under - does key[0..key_len) lie under prefix (a C string; ""
 * holds every key)? 1 or 0. */
static inline int lh_key_under(const void *key, uint64_t key_len, const char *prefix)
{
	size_t n = strlen(prefix);
	return key_len >= n && (n == 0 || memcmp(key, prefix, n) == 0);
}

/* lh_key_strip - the part of key after prefix, its length in *ret_len; NULL
 * (and *ret_len untouched) when key is not under prefix. Points into key. */
static inline const char *lh_key_strip(const void *key, uint64_t key_len, const char *prefix,
                                       uint64_t *ret_len)
{
	if (!lh_key_under(key, key_len, prefix))
		return NULL;
	size_t n = strlen(prefix);
	*ret_len = key_len - n;
	return (const char *)key + n;
}

/* lh_key_join - prefix + part (part_len bytes) into buf (size bytes,
 * NUL-terminated). Returns the key's length, or -ENAMETOOLONG (buf holds
 * "") when it does not fit. */
static inline int64_t lh_key_join(char *buf, size_t size, const char *prefix, const void *part,
                                  uint64_t part_len)
{
	size_t n = strlen(prefix);
	if (size == 0 || n + part_len >= size) {
		if (size)
			buf[0] = 0;
		return -ENAMETOOLONG;
	}
	memcpy(buf, prefix, n);
	if (part_len)
		memcpy(buf + n, part, (size_t)part_len);
	buf[n + part_len] = 0;
	return (int64_t)(n + part_len);
}

#ifdef __cplusplus
}
#endif

#endif
