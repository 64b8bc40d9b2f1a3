/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - an asynchronous etcd v3 client: unary calls over the JSON gateway
 * (/v3/..., HTTP/1.1), every watch on one gRPC Watch stream (HTTP/2), built
 * on libcurl's multi interface and driven by the host's loop (loop.h). At
 * most 3 TCP connections to an endpoint: the stream's and two for calls.
 *
 * Design notes
 * - Every call is asynchronous: it queues an HTTP POST and returns at once.
 *   Its callback runs exactly once, from the loop, with err == 0 and a response,
 *   or err < 0 (-errno style, see "Errors") and resp == NULL or a partial
 *   response carrying the gateway's error code/message. Nothing is called back
 *   from inside the call that started the request.
 * - Responses passed to callbacks are BORROWED: valid only during the callback.
 *   Copy what you keep (etcd_kv_dup helps).
 * - Keys and values are bytes (pointer + length), never assumed NUL-terminated.
 *   Revisions, lease ids, TTLs are int64.
 * - Every request has a deadline (etcd_config.request_timeout_ms, default 5000;
 *   per call override through etcd_call_opts). A request that times out has an
 *   UNKNOWN outcome (-ETIMEDOUT): the caller reads back before retrying a write.
 * - Endpoints: requests go to the current endpoint; on a connection failure
 *   (refused, reset before any byte was sent, DNS) the request is retried on the
 *   next endpoint within the same deadline. Other failures are not retried,
 *   except for calls that ask for it (etcd_call_opts.attempt_timeout_ms): a
 *   silent or "unavailable" member then moves them on too.
 * - Auth: with a user configured, the client authenticates (auth/authenticate)
 *   before the first request, sends the raw token in "Authorization:", and on
 *   an "invalid auth token" answer re-authenticates once and retries the call.
 * - Input from the gateway is hostile: any JSON that is invalid, truncated, of
 *   the wrong shape, or larger than etcd_config.max_response_bytes (default
 *   64 MiB) fails the call with -EBADMSG / -EMSGSIZE; it never crashes.
 * - Watches (etcd_watch_*) are watch ids on the client's one watch stream:
 *   they resume from the last revision seen after a dropped stream or an
 *   etcd restart, with no lost and no duplicated event, and report
 *   compaction as -ERANGE (then stop). A stream message larger than
 *   max_response_bytes ends every watch with -EMSGSIZE.
 *   A watch has no total timeout; a dead peer is noticed by TCP keepalive
 *   (idle 10 s, 3 probes 3 s apart) and TCP_USER_TIMEOUT 20 s on its socket,
 *   a hung server by etcd_config.watch_idle_timeout_ms on progress-notify
 *   watches.
 * - Callbacks may start, cancel and free calls and watches, but must not free
 *   the client nor run the loop recursively (results of the same client are
 *   not dispatched until the callback returns).
 * - A call that waits for a token is checked against its deadline when the
 *   token arrives; the authenticate request itself uses request_timeout_ms.
 *
 * Errors (negative errno values passed as `err`):
 *   -ETIMEDOUT     deadline passed; outcome unknown
 *   -ECONNREFUSED  no endpoint could be reached
 *   -EBADMSG       response is not valid gateway JSON / wrong shape
 *   -EMSGSIZE      response larger than max_response_bytes
 *   -ENOENT        gRPC NOT_FOUND (e.g. lease not found, code 5)
 *   -ERANGE        gRPC OUT_OF_RANGE: revision compacted (code 11)
 *   -EACCES        gRPC UNAUTHENTICATED after a retry (code 16), or auth failed
 *   -EPERM         gRPC PERMISSION_DENIED (code 7)
 *   -EINVAL        gRPC INVALID_ARGUMENT (code 3), or a bad call argument
 *   -EAGAIN        gRPC UNAVAILABLE (code 14) / etcd shutting down
 *   -ECANCELED     the request or watch was cancelled by its owner
 *   -EKEYREJECTED  the TLS setup failed on our side: the server's certificate
 *                  not trusted, a TLS file that cannot be read, a key that
 *                  does not fit its certificate (a handshake the server
 *                  breaks off is a connection failure: -ECONNREFUSED/-EIO)
 *   -EIO           any other gRPC code or HTTP failure
 *   -ENOMEM
 * etcd_strerror(err) gives a short text for these.
 */
#ifndef LH_ETCD_H
#define LH_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"

struct etcd_client;
struct etcd_watch;

struct etcd_config {
	const char *const *endpoints; /* "http://127.0.0.1:2379", "https://..."; >= 1 */
	size_t n_endpoints;
	const char *cacert;   /* PEM CA bundle for https endpoints, or NULL */
	const char *cert;     /* client certificate (PEM), or NULL */
	const char *key;      /* client key (PEM), or NULL */
	const char *user;     /* etcd username, or NULL for no auth */
	const char *password; /* etcd password */
	uint32_t request_timeout_ms; /* default deadline per call; 0 = 5000 */
	uint32_t connect_timeout_ms; /* 0 = 1000 */
	size_t max_response_bytes;   /* 0 = 64 MiB */
	/* watches started with ETCD_WATCH_PROGRESS_NOTIFY: reconnect (to the next
	 * endpoint) when the stream is silent this long; 0 = off. Set it above
	 * the server's --experimental-watch-progress-notify-interval (default
	 * 10 min). Catches a hung etcd, which TCP keepalive cannot. (Added.) */
	uint32_t watch_idle_timeout_ms;
};

/* etcd_client_new - create a client bound to loop l. Copies cfg (strings too).
 * Returns 0 or -errno; *ret_client untouched on failure. */
int etcd_client_new(struct loop *l, const struct etcd_config *cfg, struct etcd_client **ret_client);

/* etcd_client_free - abort everything in flight and free. Callbacks of pending
 * calls are NOT run. Watches must have been cancelled first. Accepts NULL. */
void etcd_client_free(struct etcd_client *c);

/* An observer of the client's traffic (metrics). Both run on the loop.
 * call_done: every call that ends (not a cancelled one), before its callback:
 * op is its kind ("range", "put", "deleterange", "txn", "lease_grant",
 * "lease_keepalive", "lease_revoke", "lease_timetolive", "compact"; static),
 * err its result, elapsed_ns from the call to its end. watch_ended: a watch
 * ended for good with err (compaction, a refusal): its owner resyncs. */
struct etcd_observer_ops {
	void (*call_done)(void *ud, const char *op, int err, uint64_t elapsed_ns);
	void (*watch_ended)(void *ud, int err);
};
/* etcd_client_set_observer - ops (static) and ud (borrowed, must outlive
 * the client or be cleared); NULL ops clears. */
void etcd_client_set_observer(struct etcd_client *c, const struct etcd_observer_ops *ops, void *ud);

/* etcd_client_endpoint - the endpoint currently in use (borrowed). */
const char *etcd_client_endpoint(const struct etcd_client *c);

const char *etcd_strerror(int err);
/* etcd_err_unreachable - err says etcd could not be reached (every endpoint
 * refused, was unavailable or did not answer in time), not that etcd
 * answered with an error: the callers that retry log it at debug, the
 * daemon reports the outage once (daemon_etcd_outage.c). */
bool etcd_err_unreachable(int err);
/* etcd_client_unreachable - the last call of c that ended found etcd
 * unreachable (etcd_err_unreachable), not yet followed by one that etcd
 * answered: an outage as the client last saw it */
bool etcd_client_unreachable(const struct etcd_client *c);
/* etcd_client_last_failure - the URL and HTTP status of the last call of c
 * that failed with -EIO ("http://host:2379/v3/kv/range: HTTP 404"), or ""
 * when none did; borrowed until c's next call ends or c is freed */
const char *etcd_client_last_failure(const struct etcd_client *c);

/* ---- data ---- */

struct etcd_kv {
	uint8_t *key;
	size_t key_len;
	uint8_t *value; /* NULL when value_len == 0 */
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

/* etcd_kv_dup / etcd_kv_free - deep copy of a kv (NUL byte added after key and
 * value for convenience, not counted in the lengths); free accepts NULL. */
struct etcd_kv *etcd_kv_dup(const struct etcd_kv *kv);
void etcd_kv_free(struct etcd_kv *kv);

struct etcd_header {
	uint64_t cluster_id;
	uint64_t member_id;
	int64_t revision;
	uint64_t raft_term;
};

enum etcd_op_type { ETCD_OP_RANGE = 0, ETCD_OP_PUT = 1, ETCD_OP_DELETE = 2 };

enum etcd_sort_order { ETCD_SORT_NONE = 0, ETCD_SORT_ASCEND = 1, ETCD_SORT_DESCEND = 2 };
enum etcd_sort_target {
	ETCD_SORT_KEY = 0,
	ETCD_SORT_VERSION = 1,
	ETCD_SORT_CREATE = 2,
	ETCD_SORT_MOD = 3,
	ETCD_SORT_VALUE = 4
};

/* One request: range, put or delete. Pointers are borrowed for the duration of
 * the call that takes the op (the client copies what it sends). */
struct etcd_op {
	enum etcd_op_type type;
	const void *key;
	size_t key_len;
	const void *range_end; /* NULL: single key. Use etcd_prefix_end() for a prefix. */
	size_t range_end_len;
	/* put */
	const void *value;
	size_t value_len;
	int64_t lease;
	/* put / delete */
	bool prev_kv;
	/* range */
	int64_t limit;
	int64_t revision;
	bool count_only;
	bool keys_only;
	enum etcd_sort_order sort_order;
	enum etcd_sort_target sort_target;
};

/* etcd_prefix_end - range_end for all keys starting with prefix: prefix with
 * its last byte incremented (carrying), written to out (size >= len). Returns
 * the length, or 1 with out[0] = 0 (all keys) when the prefix is all 0xff or
 * empty. */
size_t etcd_prefix_end(const void *prefix, size_t len, uint8_t *out);

enum etcd_cmp_target {
	ETCD_CMP_VERSION = 0,
	ETCD_CMP_CREATE = 1,
	ETCD_CMP_MOD = 2,
	ETCD_CMP_VALUE = 3,
	ETCD_CMP_LEASE = 4
};
enum etcd_cmp_result { ETCD_CMP_EQUAL = 0, ETCD_CMP_GREATER = 1, ETCD_CMP_LESS = 2, ETCD_CMP_NOT_EQUAL = 3 };

struct etcd_compare {
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	const void *key;
	size_t key_len;
	const void *range_end; /* NULL: single key */
	size_t range_end_len;
	int64_t number;    /* version / create_revision / mod_revision / lease */
	const void *value; /* target VALUE */
	size_t value_len;
};

/* A response. Which fields are meaningful depends on the call:
 *   range:   kvs/n_kvs, more, count
 *   put:     prev_kvs (0 or 1 entry, when prev_kv was asked)
 *   delete:  deleted, prev_kvs
 *   txn:     succeeded, responses/n_responses (each with op_type set)
 *   lease:   lease_id, ttl (keepalive: ttl <= 0 means the lease is gone),
 *            granted_ttl (timetolive), keys/n_keys (timetolive with keys)
 *   auth:    (internal)
 * header is set for every successful call. */
struct etcd_response {
	struct etcd_header header;
	enum etcd_op_type op_type;
	struct etcd_kv *kvs;
	size_t n_kvs;
	bool more;
	int64_t count;
	struct etcd_kv *prev_kvs;
	size_t n_prev_kvs;
	int64_t deleted;
	bool succeeded;
	struct etcd_response *responses;
	size_t n_responses;
	int64_t lease_id;
	int64_t ttl;
	int64_t granted_ttl;
	/* timetolive with keys: the attached keys (only key/key_len set). Added
	 * to the original contract, whose comment above already names them. */
	struct etcd_kv *keys;
	size_t n_keys;
	/* on a gateway error: its gRPC code and message (else 0 / NULL) */
	int grpc_code;
	const char *error_message;
};

typedef void (*etcd_cb)(struct etcd_client *c, int err, const struct etcd_response *resp,
                        void *userdata);

/* Per-call options; NULL = defaults. */
struct etcd_call_opts {
	uint32_t timeout_ms; /* the call's deadline; 0 = client default */
	/* 0: one attempt may use the whole deadline. Else each attempt gets at
	 * most this long; an attempt that got no answer by then, or that the
	 * member answered "unavailable" (gRPC 14: no raft leader, request timed
	 * out in raft), moves the client to the next endpoint and is sent again
	 * there while the deadline allows (an "unavailable" answer: once per
	 * other endpoint; a silent attempt: until the deadline, on the same
	 * endpoint too when there is only one). Why: a member whose raft leader
	 * just died holds a write until etcd's own request timeout (about 7 s)
	 * even after a new raft leader exists, while the same request sent again
	 * is answered at once. Only for requests that may be applied twice
	 * (keepalive, revoke, reads; a grant whose first attempt did land leaves
	 * an unused lease that expires by itself). */
	uint32_t attempt_timeout_ms;
	/* ask the member to refuse the request at once ("no leader", -EAGAIN,
	 * gRPC metadata hasleader=true) instead of queueing it while it has no
	 * raft leader (a member cut off from the majority has none for as long
	 * as the partition lasts); with attempt_timeout_ms the call then moves
	 * on to another endpoint. */
	bool require_leader;
};

/* etcd_call - handle of a call in flight; cancel it with etcd_call_cancel
 * (its callback is then never run). ret_call may be NULL when the caller will
 * never cancel. The handle is invalid once the callback has started. */
struct etcd_call;
void etcd_call_cancel(struct etcd_call *call);

/* All of these return 0 when the request was queued (the callback will run
 * exactly once later), or -errno when it could not be (no callback then). */
int etcd_range(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
               etcd_cb cb, void *ud, struct etcd_call **ret_call);
int etcd_put(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
             etcd_cb cb, void *ud, struct etcd_call **ret_call);
int etcd_delete(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
                etcd_cb cb, void *ud, struct etcd_call **ret_call);
int etcd_txn(struct etcd_client *c, const struct etcd_compare *cmps, size_t n_cmps,
             const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
             size_t n_failure, const struct etcd_call_opts *o, etcd_cb cb, void *ud,
             struct etcd_call **ret_call);
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, const struct etcd_call_opts *o,
                     etcd_cb cb, void *ud, struct etcd_call **ret_call);
/* one POST per renewal; resp->ttl <= 0 (or err -ENOENT) means the lease is gone */
int etcd_lease_keepalive(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
                         etcd_cb cb, void *ud, struct etcd_call **ret_call);
int etcd_lease_revoke(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
                      etcd_cb cb, void *ud, struct etcd_call **ret_call);
/* resp->ttl == -1 when the lease does not exist; keys listed when with_keys */
int etcd_lease_timetolive(struct etcd_client *c, int64_t lease_id, bool with_keys,
                          const struct etcd_call_opts *o, etcd_cb cb, void *ud,
                          struct etcd_call **ret_call);

/* etcd_compact - compact the key-value history up to `revision` (POST
 * /v3/kv/compaction); physical waits until the compaction is done. Same
 * queuing/callback rules as above; resp carries only the header. */
int etcd_compact(struct etcd_client *c, int64_t revision, bool physical,
                 const struct etcd_call_opts *o, etcd_cb cb, void *ud, struct etcd_call **ret_call);

/* etcd_client_auth_count - how many times the client authenticated
 * successfully (diagnostics and tests: proves a token refresh happened). */
uint64_t etcd_client_auth_count(const struct etcd_client *c);

/* ---- watch ---- */

enum etcd_event_type { ETCD_EVENT_PUT = 0, ETCD_EVENT_DELETE = 1 };

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv;      /* for DELETE: key and mod_revision set, value empty */
	struct etcd_kv *prev_kv; /* NULL unless prev_kv was asked and exists */
};

/* struct etcd_event_hold - deep copies of watch events kept in order, for a
 * consumer that must hold a watch's events while the range that goes before
 * them (ETCD_WATCH_CREATED_NOTIFY) is in flight. Not thread-safe; the owner
 * clears it. */
struct etcd_held_event {
	enum etcd_event_type type;
	struct etcd_kv *kv, *prev_kv; /* prev_kv NULL unless the event had one */
};
struct etcd_event_hold {
	struct etcd_held_event *ev;
	size_t n, cap;
};
/* etcd_event_hold_add - append copies of events[0..n); -ENOMEM leaves the
 * hold as it was before the call */
int etcd_event_hold_add(struct etcd_event_hold *h, const struct etcd_event *events, size_t n);
void etcd_event_hold_clear(struct etcd_event_hold *h);

#define ETCD_WATCH_PREV_KV 0x1u
#define ETCD_WATCH_PROGRESS_NOTIFY 0x2u
/* ETCD_WATCH_CREATED_NOTIFY: the callback also runs once, with n_events == 0
 * and `revision` = the creation's header revision H, when etcd first confirms
 * the watch (before any event of it). For a watch from 0 ("now") etcd starts
 * it at H + 1: every event after H comes and none before, so a range read at
 * revision H completes it with no gap and no overlap (list after watch). Why
 * not a range at R and a watch from R + 1: when etcd moved past R before the
 * watch arrived (any write anywhere), etcd files the watch as "unsynced" and
 * its events, old and new, wait for etcd's catch-up pass, which runs every
 * 100 ms; a watch from "now" is in sync from its creation. */
#define ETCD_WATCH_CREATED_NOTIFY 0x4u

/* Called for every batch of events (one etcd revision may carry several
 * events; a txn arrives as one batch), with n_events == 0 for a progress
 * notification, and once with err < 0 when the watch ends for good
 * (-ERANGE: compacted, with `revision` = the compact revision; -ECANCELED is
 * never reported: cancelling is silent). `revision` is the header revision of
 * the message. Transient stream failures are NOT reported: the watch
 * reconnects by itself (backoff 50 ms doubling to 2 s) from the last revision
 * delivered + 1. Events are borrowed for the callback. */
typedef void (*etcd_watch_cb)(struct etcd_watch *w, int err, int64_t revision,
                              const struct etcd_event *events, size_t n_events, void *userdata);

/* etcd_watch_start - watch [key, range_end) from start_revision (0 = now).
 * flags: ETCD_WATCH_*. Returns 0 or -errno; the watch is freed by
 * etcd_watch_cancel (also allowed from inside its callback) and must be
 * cancelled before the client is freed. */
int etcd_watch_start(struct etcd_client *c, const void *key, size_t key_len, const void *range_end,
                     size_t range_end_len, int64_t start_revision, unsigned flags,
                     etcd_watch_cb cb, void *ud, struct etcd_watch **ret_watch);
void etcd_watch_cancel(struct etcd_watch *w);
/* the last revision the watch has delivered (events or progress), 0 if none */
int64_t etcd_watch_revision(const struct etcd_watch *w);

/* ---- gateway JSON codec (etcd_json.c; pure, no I/O: fuzzed) ---- */

/* etcd_json_parse_response - parse one gateway response body of kind `kind`
 * ("range", "put", "deleterange", "txn", "lease_grant", "lease_keepalive",
 * "lease_revoke", "lease_timetolive", "compact", "authenticate") into *ret
 * (allocated; free with etcd_response_free). For an error body ({"error":..,"code":..}) returns
 * the mapped -errno and, when ret_err_resp is non-NULL, an allocated response
 * with grpc_code and error_message set. */
int etcd_json_parse_response(const char *kind, const char *body, size_t len,
                             struct etcd_response **ret, struct etcd_response **ret_err_resp);
void etcd_response_free(struct etcd_response *r);

/* ---- gRPC watch codec (etcd_grpc_watch.c; pure, no I/O: fuzzed) ----
 * The host's watches share one gRPC stream, /etcdserverpb.Watch/Watch, per
 * client (etcd_watch_stream.c). */

/* One WatchResponse of the stream. */
struct etcd_watch_msg {
	struct etcd_header header;
	int64_t watch_id;
	bool created;
	bool canceled;
	int64_t compact_revision;
	const char *cancel_reason; /* owned by the message, or NULL */
	struct etcd_event *events; /* owned by the message */
	size_t n_events;
};

/* etcd_grpc_frame_next - the first gRPC message of p[0..len): 1 with
 * *ret_msg (borrowed from p), its length and the bytes it took; 0 when
 * more bytes are needed; -EBADMSG for a compressed or unknown flag;
 * -EMSGSIZE for a message longer than max_msg. */
int etcd_grpc_frame_next(const uint8_t *p, size_t len, size_t max_msg, const uint8_t **ret_msg,
                         size_t *ret_msg_len, size_t *ret_used);
/* etcd_grpc_parse_watch - decode one WatchResponse (msg[0..len)) into *ret
 * (allocated; free with etcd_watch_msg_free). Returns 0, -EBADMSG (not a
 * WatchResponse, no header, an event without key or revision, a fragment)
 * or -ENOMEM; *ret untouched on failure. */
int etcd_grpc_parse_watch(const uint8_t *msg, size_t len, struct etcd_watch_msg **ret);
/* etcd_watch_msg_free - free a message and all it owns. Accepts NULL. */
void etcd_watch_msg_free(struct etcd_watch_msg *m);

/* etcd_json_parse_object - parse exactly one JSON value from body[0..len)
 * (surrounding whitespace allowed, nothing else) with the depth limit the
 * client applies to the gateway: for records other subsystems keep in etcd
 * as JSON (election_node_record.c). On success *ret owns the object
 * (json_object_put). Returns 0 or -EBADMSG / -ENOMEM. */
struct json_object;
int etcd_json_parse_object(const char *body, size_t len, struct json_object **ret);

#endif
