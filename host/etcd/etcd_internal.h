/* SPDX-License-Identifier: MIT */
/*
 * etcd_internal.h - private glue between the pieces of the etcd client
 * (etcd.c and the files its reading guide names) and its JSON codec
 * (etcd_json.c). Not for use outside host/etcd*.c and their tests.
 *
 * Threading: the client runs on its loop's thread only.
 * Ownership: struct etcd_client owns its calls, watches, sockets, easy
 * handles and the token; a call or watch owns its struct xfer (embedded).
 * Calls and watches come back through curl (CURLINFO_PRIVATE), through loop
 * timers and from the user (cancel): they carry a magic number, checked
 * there (CHECK_OBJ, base/obj.h), and cleared when they are freed.
 *
 * Every JSON builder returns 0 and a malloc'd, NUL-terminated JSON text in
 * *ret (the caller frees it), or -EINVAL / -ENOMEM with *ret untouched.
 */
#ifndef LH_ETCD_INTERNAL_H
#define LH_ETCD_INTERNAL_H

#include <assert.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "base/obj.h"
#include "etcd/etcd.h"

/* Nesting depth accepted from the gateway (a txn response is ~6 deep). */
#define ETCD_JSON_MAX_DEPTH 32

/* etcd_b64_encode - standard base64 with padding of src[0..len) into a
 * malloc'd NUL-terminated string (caller frees). Returns NULL on ENOMEM. */
char *etcd_b64_encode(const void *src, size_t len);

/* etcd_b64_decode - strict standard base64 (padding required, no whitespace,
 * zero trailing bits). On success *ret_buf is malloc'd (len + 1 bytes, NUL
 * after the data; caller frees) and *ret_len the decoded length. Returns 0,
 * -EBADMSG or -ENOMEM; outputs untouched on failure. */
int etcd_b64_decode(const char *src, size_t len, uint8_t **ret_buf, size_t *ret_len);

/* etcd_grpc_to_errno - the mapping documented in etcd.h ("Errors"). */
int etcd_grpc_to_errno(int grpc_code);

/* ---- request bodies (borrowed inputs, malloc'd output) ---- */
int etcd_json_range_req(const struct etcd_op *op, char **ret);
int etcd_json_put_req(const struct etcd_op *op, char **ret);
int etcd_json_delete_req(const struct etcd_op *op, char **ret);
int etcd_json_txn_req(const struct etcd_compare *cmps, size_t n_cmps, const struct etcd_op *success,
		      size_t n_success, const struct etcd_op *failure, size_t n_failure,
		      char **ret);
/* {"<field>":"<value>"} with an int64 rendered as a string, e.g. {"TTL":"5"} */
int etcd_json_int_req(const char *field, int64_t value, char **ret);
int etcd_json_timetolive_req(int64_t lease_id, bool with_keys, char **ret);
int etcd_json_compact_req(int64_t revision, bool physical, char **ret);
int etcd_json_auth_req(const char *user, const char *password, char **ret);

/* ---- typed field readers (etcd_json.c), shared by the decoders ----
 * Each reads one field of a JSON object o (borrowed). An absent field is
 * zero, NULL or false (the gateway omits zero values); a field of the wrong
 * JSON type is -EBADMSG. Allocating readers return -ENOMEM; their results
 * are malloc'd and owned by the caller. */

int etcd_json_get_u64(json_object *o, const char *field, uint64_t *ret);
int etcd_json_get_i64(json_object *o, const char *field, int64_t *ret);
int etcd_json_get_bool(json_object *o, const char *field, bool *ret);
/* etcd_json_get_typed - *ret = the field when of type t (borrowed), NULL when absent */
int etcd_json_get_typed(json_object *o, const char *field, json_type t, json_object **ret);
/* etcd_json_get_bytes - a base64 field, decoded (NUL-terminated, *ret_len excludes it) */
int etcd_json_get_bytes(json_object *o, const char *field, uint8_t **ret, size_t *ret_len);
int etcd_json_get_strdup(json_object *o, const char *field, const char **ret);
/* etcd_json_parse_kv - a mvccpb.KeyValue into *kv (zeroed first, cleared on
 * failure); etcd_kv_clear frees its buffers */
int etcd_json_parse_kv(json_object *o, struct etcd_kv *kv);
void etcd_kv_clear(struct etcd_kv *kv);
/* etcd_json_parse_kv_array - an optional array of kvs; etcd_json_kvs_free
 * frees n of them and the array */
int etcd_json_parse_kv_array(json_object *o, const char *field, struct etcd_kv **ret, size_t *ret_n);
void etcd_json_kvs_free(struct etcd_kv *kvs, size_t n);
/* etcd_json_parse_header - the "header" object; required: absent is -EBADMSG */
int etcd_json_parse_header(json_object *o, struct etcd_header *h, bool required);

/* ---- responses ---- */

/* etcd_json_response_from_object - as etcd_json_parse_response, from an
 * already parsed object (borrowed). */
int etcd_json_response_from_object(const char *kind, json_object *root, struct etcd_response **ret,
				   struct etcd_response **ret_err_resp);

/* etcd_json_auth_token - the "token" of a successful auth/authenticate body,
 * malloc'd (caller frees). Returns 0, a mapped gateway error, -EBADMSG or
 * -ENOMEM; *ret_token untouched on failure. */
int etcd_json_auth_token(const char *body, size_t len, char **ret_token);

/* ---- the client (etcd.c, etcd_transport.c, etcd_auth.c, etcd_call.c,
 * etcd_watch.c) ---- */

#define ETCD_CALL_MAGIC 0x45434c4cu  /* struct etcd_call */
#define ETCD_WATCH_MAGIC 0x45575443u /* struct etcd_watch */

#define DEFAULT_REQUEST_TIMEOUT_MS 5000u
#define DEFAULT_CONNECT_TIMEOUT_MS 1000u
#define DEFAULT_MAX_RESPONSE (64u * 1024u * 1024u)
#define WATCH_BACKOFF_MIN_MS 50u
#define WATCH_BACKOFF_MAX_MS 2000u
#define EASY_POOL_MAX 8
/* TCP connections to one endpoint: the watch stream's and two for the
 * calls (curl queues a call while both are busy) */
#define ETCD_MAX_HOST_CONNECTIONS 3

struct sock {
	struct loop_io *io;
	struct etcd_client *c;
	curl_socket_t fd;
	bool stream; /* the watch stream's (its connection is its alone) */
	struct sock *prev, *next;
};

struct buf {
	char *data;
	size_t len, cap;
};

/* etcd_buf_append - append p[0..n) (and keep a NUL after the data);
 * 0 or -ENOMEM (b unchanged) */
int etcd_buf_append(struct buf *b, const void *p, size_t n);

/* ---- gRPC watch requests (etcd_grpc_watch.c): each appends one framed
 * WatchRequest to out; 0, -EINVAL (bad arguments) or -ENOMEM ---- */
int etcd_grpc_watch_create(struct buf *out, int64_t watch_id, const void *key, size_t key_len,
			   const void *range_end, size_t range_end_len, int64_t start_revision,
			   unsigned flags);
int etcd_grpc_watch_cancel(struct buf *out, int64_t watch_id);

/* XFER_CALL: one HTTP/1.1 POST to the gateway; XFER_STREAM: the client's
 * gRPC watch stream over HTTP/2 */
enum xfer_kind { XFER_CALL, XFER_STREAM };

/* One HTTP request. Owned by its call or by the watch stream. */
struct xfer {
	enum xfer_kind kind;
	struct etcd_client *c;
	CURL *easy; /* non-NULL while attached to the multi handle */
	struct curl_slist *headers;
	const char *path; /* static string */
	char *body;	  /* owned; NULL for the stream (it sends from its out buffer) */
	struct buf resp;
	bool oversize;
	bool is_auth;		      /* the authenticate call: never waits for a token */
	bool waiting_auth;	      /* on c's auth wait list */
	size_t ep;		      /* endpoint of the current attempt */
	size_t ep_tries;	      /* attempts that failed to connect */
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's text for the last failure */
	uint64_t token_gen;	      /* token generation sent with the current attempt */
	struct xfer *wprev, *wnext;   /* auth wait list */
};

struct etcd_call {
	struct xfer x;	  /* first: a struct xfer of kind XFER_CALL is its call */
	unsigned magic;	  /* ETCD_CALL_MAGIC while the call lives */
	const char *kind; /* etcd_json_parse_response kind; static */
	etcd_cb cb;
	void *ud;
	uint64_t deadline;
	uint64_t started; /* loop_now() at the call, for the observer */
	uint64_t attempt_ns; /* 0: one attempt to the deadline (etcd_call_opts) */
	bool require_leader;
	size_t unavailable_tries; /* "unavailable" answers already moved on from */
	bool reauthed;
	struct etcd_call *prev, *next; /* c->calls */
};

/* One watch: a watch id on the client's watch stream. */
struct etcd_watch {
	unsigned magic; /* ETCD_WATCH_MAGIC while the watch lives */
	struct etcd_client *c;
	int64_t id; /* its watch_id on the stream: unique in the client, > 0 */
	uint8_t *key, *range_end;
	size_t key_len, range_end_len;
	unsigned flags;
	etcd_watch_cb cb;
	void *ud;
	bool sent;	/* its create request is on the current stream */
	bool done;	/* ended for good (reported once) */
	int64_t next_rev; /* resume from here; 0 = "now" (not known yet) */
	int64_t last_rev; /* etcd_watch_revision() */
	bool created;
	bool in_cb;
	bool cancelled;
	bool reauthed; /* an invalid-token answer already dropped the token */
	bool announced; /* ETCD_WATCH_CREATED_NOTIFY: the creation was reported */
	struct loop_timer *idle;	/* progress-notify idle detection, or NULL */
	struct etcd_watch *prev, *next; /* c->watches */
};

enum stream_state { S_IDLE, S_OPEN, S_BACKOFF };

/* The client's one watch stream: every watch of the client is a watch id
 * on it. It is open while the client has a watch and is reopened (every
 * watch created again from its resume point) after it ends. */
struct etcd_watch_stream {
	struct xfer x; /* kind XFER_STREAM */
	enum stream_state state;
	struct buf out;	  /* framed WatchRequests not yet taken by curl */
	size_t out_pos;	  /* of out: what curl has taken */
	bool paused;	  /* curl's read callback paused: nothing to send */
	bool pending;	  /* received bytes wait in x.resp */
	bool ended;	  /* the transfer finished: reopen after draining */
	bool status_seen; /* grpc-status arrived: the RPC is over, end the upload */
	int grpc_status;  /* from grpc-status (-1: none seen) */
	char grpc_message[256];
	uint32_t backoff_ms;
	bool had_sock; /* curl polled a socket of the open stream */
	struct loop_timer *timer; /* backoff */
	struct loop_timer *check; /* etcd_stream_check_fired: armed when curl stops polling one */
};

/* What the transport (etcd_transport.c) hands to the files above it: set
 * once by etcd_client_new (etcd.c), so that the transport calls no
 * function of the call, watch or auth files by name. */
struct etcd_xfer_ops {
	/* a transfer curl finished: its call or the watch stream takes it
	 * from here */
	void (*call_done)(struct etcd_call *call, CURLcode rc);
	void (*stream_done)(struct etcd_client *c, CURLcode rc);
	/* client_process: parse and deliver the stream's buffered bytes (may
	 * free watches) */
	void (*stream_drain)(struct etcd_client *c);
	/* the kick timer: free a cancelled watch */
	void (*watch_destroy)(struct etcd_watch *w);
	/* a released transfer leaves the auth wait list */
	void (*wait_unlink)(struct xfer *x);
};

struct etcd_client {
	const struct etcd_xfer_ops *xops;
	struct loop *loop;
	CURLM *multi;
	struct loop_timer *curl_timer;
	struct loop_timer *kick_timer; /* after etcd_transport_kick(): reap cancelled watches, completions */
	struct sock *socks;
	char **endpoints;
	size_t n_endpoints, cur_ep;
	char *cacert, *cert, *key, *user, *password;
	uint32_t request_timeout_ms, connect_timeout_ms;
	size_t max_response_bytes;
	uint32_t watch_idle_timeout_ms;
	char *token;
	uint64_t token_gen;
	uint64_t n_auth;
	struct etcd_call *auth_call;
	struct xfer *wait_head, *wait_tail;
	struct etcd_call *calls;
	struct etcd_watch *watches;
	int64_t last_watch_id;
	struct etcd_watch_stream ws;
	CURL *pool[EASY_POOL_MAX];
	size_t n_pool;
	bool processing;
	const struct etcd_observer_ops *observer;
	void *observer_ud;
	bool unreachable; /* the last call that ended found etcd unreachable */
	/* the last call that failed with an HTTP error status (-EIO): its URL
	 * and status ("" when none); see etcd_client_last_failure */
	char last_failure[512];
};

static inline uint64_t ms_to_ns(uint64_t ms)
{
	return ms * LOOP_NS_PER_MS;
}

/* etcd_transport.c: curl multi on the loop, the easy handle pool, one
 * attempt of a transfer, endpoint failover, dispatch of what curl finished */
void etcd_buf_reset(struct buf *b);
int etcd_sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
int etcd_timer_cb(CURLM *multi, long timeout_ms, void *userp);
void etcd_curl_timer_fired(struct loop_timer *t, void *userdata);
/* kick_timer: reap cancelled watches, then dispatch */
void etcd_kick_fired(struct loop_timer *t, void *userdata);
/* remove x's easy from the multi handle (if attached) */
void etcd_xfer_detach(struct xfer *x);
/* detach, leave the auth wait list, free the body and the response */
void etcd_xfer_release(struct xfer *x);
/* start one attempt of x on the client's current endpoint; 0 or -errno (x
 * is then not attached) */
int etcd_xfer_send(struct xfer *x);
/* refused, unresolvable, or nothing sent before it failed */
bool etcd_is_connect_failure(CURL *e, CURLcode rc);
int etcd_curl_to_errno(struct xfer *x, CURLcode rc);
/* the endpoint of x failed: move the client on (once) */
void etcd_advance_endpoint(struct xfer *x);
/* the ONLY place user callbacks run: deliver buffered watch bytes, finish
 * what curl finished; not reentrant (a nested call returns at once) */
void etcd_client_process(struct etcd_client *c);

/* etcd_auth.c: the token, the authenticate call, the wait list */
void etcd_wait_push(struct xfer *x);
void etcd_wait_unlink(struct xfer *x);
/* send the authenticate call unless one is in flight */
int etcd_auth_start(struct etcd_client *c);
/* the authenticate call ended with err: release the waiters */
void etcd_auth_done(struct etcd_client *c, int err);
void etcd_auth_call_done(struct etcd_call *call, CURLcode rc, CURL *e, long http);
/* send now, or wait for a token (failures go to the owner) */
void etcd_xfer_submit(struct xfer *x);
bool etcd_is_invalid_token(int grpc_code, const char *msg);
/* forget the token a transfer was sent with (once per token) */
void etcd_drop_token(struct etcd_client *c, uint64_t gen);

/* etcd_call.c: calls with their attempt/endpoint retries, the KV, txn,
 * lease and compaction API */
struct etcd_call *etcd_call_alloc(struct etcd_client *c, const char *kind, const char *path,
				  char *body, const struct etcd_call_opts *o, etcd_cb cb, void *ud);
void etcd_call_free(struct etcd_call *call);
void etcd_call_unlink(struct etcd_call *call);
/* run the callback (if any) and free the call */
void etcd_call_finish(struct etcd_call *call, int err, const struct etcd_response *resp);
void etcd_call_on_done(struct etcd_call *call, CURLcode rc);

/* etcd_watch.c: one watch's life: resume point, delivery without
 * duplicates, compaction, cancellation, idle detection */
void etcd_watch_destroy(struct etcd_watch *w);
/* one message of the stream for w. Returns 1 to go on, 0 when the stream
 * must be reopened, -1 when w is gone or done */
int etcd_watch_handle(struct etcd_watch *w, struct etcd_watch_msg *m);
/* the watch ends for good with err: reported once */
void etcd_watch_end(struct etcd_watch *w, int err, int64_t revision);

/* etcd_watch_stream.c: the client's one gRPC watch stream */
int etcd_stream_init(struct etcd_client *c);
void etcd_stream_free(struct etcd_client *c);
/* a watch was added: send its create request (opening the stream if
 * needed); -errno when it cannot be queued */
int etcd_stream_add(struct etcd_client *c, struct etcd_watch *w);
/* a sent watch is cancelled or ended: ask etcd to stop it (best effort) */
void etcd_stream_cancel(struct etcd_client *c, struct etcd_watch *w);
/* a watch was unlinked: close the stream when none is left */
void etcd_stream_removed(struct etcd_client *c);
/* the stream could not be (re)started (etcd_auth.c): -EACCES ends every
 * watch, anything else reopens after the backoff */
void etcd_stream_failed(struct etcd_client *c, int err);
/* drop the stream and reopen it after the backoff; with next_endpoint,
 * on the next endpoint */
void etcd_stream_reopen(struct etcd_client *c, bool next_endpoint);
void etcd_stream_drain(struct etcd_client *c);
void etcd_stream_on_done(struct etcd_client *c, CURLcode rc);
/* curl callbacks of the stream (etcd_transport.c sets them) */
size_t etcd_stream_read_cb(char *buf, size_t size, size_t nitems, void *userdata);
size_t etcd_stream_header_cb(char *buf, size_t size, size_t nitems, void *userdata);
/* curl polls a socket of the stream (added), or stopped polling one
 * (!added): called from the multi's socket callback, inside curl; the
 * stream is checked from the loop */
void etcd_stream_socket_polled(struct etcd_client *c, bool added);

#endif
