/* SPDX-License-Identifier: MIT */
/*
 * control.h - the control socket server (leaseholdctl <-> leasehold): an
 * AF_UNIX stream socket served on the loop (control_transport.h: why it is
 * not nng, limits, deadlines, one daemon per path), mode 0600, peer uid
 * checked (root or the daemon's own uid), framed protobuf-c messages
 * (control_wire.h, proto/control.proto).
 *
 * The daemon owns the data; the server asks for it through control_ops, on
 * the loop thread only. Strings in the structs the ops fill are borrowed and
 * only need to live until the op returns.
 * (In practice: until the server's handler returns to the loop. The server
 * packs them into the reply right after the op, before it calls any other op;
 * pointers into the daemon's own state are fine, a buffer on the op's stack
 * is not.)
 *
 * Asynchronous ops (roles_set, roles_clear): the server parks the request
 * and answers it when the op calls done(done_ctx, err, msg). Rules for the
 * daemon: done is called at most once per started op (exactly once unless
 * the server is freed first), on the loop thread, and never after
 * control_free(c): control_free answers nothing more and frees every parked
 * request, so a later done() would touch freed memory. (leasehold's daemon
 * completes roles writes from etcd callbacks, frees the control server
 * before the etcd client, and etcd_client_free runs no pending callback.)
 * node and roles passed to an op are borrowed for the call only.
 *
 * Wire protocol: proto/control.proto; limits and validation in
 * control_codec.h. Requests over 64 KiB get CODE_TOO_LARGE, undecodable ones
 * CODE_BAD_REQUEST, unknown kinds CODE_UNKNOWN_KIND; the server keeps serving.
 * A peer of another uid, or one over the connection limit, gets
 * CODE_REFUSED and is closed. A client that goes away while its wait-ready
 * is parked frees it at once; one whose roles write is in progress leaves
 * it to finish (done() is then taken without an answer).
 */
#ifndef LH_CONTROL_H
#define LH_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"
#include "election/election_node_record.h"
#include "base/release.h"

struct control;

struct control_plugin {
	const char *name;
	const char *file;        /* file in the plugin dir, or NULL */
	struct release release;  /* the running instance's release, or for a file that
	                            does not run the release it declares (if has_release) */
	bool has_release;        /* false while nothing runs: JSON null, table "-" */
	const char *state;       /* loading|standby|campaigning|leading|failed|stopped|
	                            superseded */
	const char *leader;      /* node id of the current leader, or NULL */
	bool ready;
	const char *not_ready;    /* why not ready (NULL when ready or not known) */
	struct releases releases; /* min/max member release + revision */
	bool status_present;      /* false: "status": null */
	const char *status_state; /* "WORKING" | "DONE" | "INVALID" */
	struct release status_version;
	struct release status_min_compatible;
	uint64_t reconcile_count;
	bool reconcile_last_ok;
	const char *reconcile_last_error; /* NULL if none */
	int64_t reconcile_last_at;        /* unix seconds, 0 = never */
	const char *error;                /* failed / refused: why (else NULL) */
	const char *held_back;            /* standby reason (else NULL) */
	int64_t fencing_token;            /* while leading, else 0 */
	/* state superseded: the file that runs the same plugin name instead (a
	 * newer release, see plugindir_prefer), else NULL */
	const char *superseded_by;
	const char *callback;             /* the callback running now, or NULL */
	uint64_t callback_ms;             /* ... running for this long */
	bool paused;                      /* the cluster-wide pause holds */
	const char *pause_error;          /* its record does not decode, or NULL */
	const char *paused_by;            /* who paused, or NULL */
	int64_t paused_at;                /* unix seconds, 0 = unknown */
	int64_t reconcile_requested;      /* last request's revision, 0 = none */
	int64_t reconcile_served;         /* last request revision the leader served */
	bool reconcile_served_ok;         /* ... and whether that reconcile succeeded */
	const char *reconcile_served_error;
	/* the switchover request as mirrored: its revision (0 = none in
	 * flight) and the revision of the last one seen to end */
	int64_t switchover_rev;
	int64_t switchover_ended_rev;
	/* the cluster configuration as mirrored (pconfig) */
	const char *config_error; /* etcd holds a bad document: why, else NULL */
	int64_t config_revision;  /* the good document's revision, 0 = none */
	/* the node has no etcd session: leader, members and status are its
	 * last mirror, no longer kept current (for view_stale_ms) */
	bool view_stale;
	uint64_t view_stale_ms;
	/* the operator's pin (P/N/pin) as mirrored, and the rule's answer */
	bool pinned;
	bool pin_forced;
	struct release pin;
	const char *pin_by;    /* NULL = unknown */
	int64_t pin_at;
	const char *pin_error; /* the record does not decode (ignored), else NULL */
	bool has_acting;       /* a release may campaign now */
	struct release acting_release;
	const char *acting_basis; /* why, in words (NULL = unknown) */
	/* this node's health: withdrawn for a hold-down until unhealthy_until
	 * (unix s); reconciles failed in a row; times it became unhealthy */
	bool unhealthy;
	int64_t unhealthy_until;
	uint32_t failures_in_row;
	uint64_t unhealthy_total;
	/* a keyed plugin's work queue (ABI 1.3): see control.proto 70-75 */
	bool keyed;
	uint64_t keys_depth, keys_waiting, keys_oldest_ms, keys_done, keys_failed;
	uint64_t keys_running, keys_concurrency;
};

/* completion of a configuration read or write (pconfig): err 0 or -errno
 * (-ESTALE: config_set lost the race, rev is then the current revision),
 * msg a one-line explanation or NULL; doc (len bytes, may be NULL: absent)
 * the stored document of a read, rev its mod revision (a write: the new
 * one), doc_error why the stored document is not valid (NULL: fine). All
 * borrowed for the call. */
typedef void (*control_config_fn)(void *done_ctx, int err, const char *msg, const char *doc,
                                  size_t len, int64_t rev, const char *doc_error);

/* one term of a plugin's history (control_history_fn); strings borrowed */
struct control_term {
	const char *node;
	struct release release;
	int64_t token, start_rev, start_unix, end_rev, end_unix;
	const char *end_reason; /* "" while the term lasts */
	const char *end_detail;
	bool invalid; /* the record does not decode */
};

struct control_member {
	const char *node_id;
	struct release release;
	bool leader;
	bool campaigning; /* holds an election key now */
	bool no_member_record; /* the node has a state record only */
	bool local;       /* this daemon's node */
	const struct node_record *record; /* its state record, or NULL */
	bool record_invalid;              /* a record exists but does not decode */
	uint32_t sessions; /* live election keys carrying its node id */
	bool conflict;     /* ... and they are not one node's runs */
	bool unhealthy;    /* its member record: withdrawn for a hold-down ... */
	int64_t unhealthy_until; /* ... ending then (unix s, its clock; 0 = unknown) */
};

/* completion of an asynchronous op: err 0 or -errno, msg (may be NULL) a
 * one-line explanation; borrowed for the call */
typedef void (*control_done_fn)(void *done_ctx, int err, const char *msg);

/* completion of a reconcile request: rev is the request's etcd revision */
typedef void (*control_rev_fn)(void *done_ctx, int err, const char *msg, int64_t rev);
/* completion of a history read: n terms, newest first (borrowed for the call) */
typedef void (*control_history_fn)(void *done_ctx, int err, const char *msg,
                                   const struct control_term *terms, size_t n);

/* completion of a switchover request: rev is the request's etcd revision,
 * from the leader it asks to hand over (borrowed for the call) */
typedef void (*control_switchover_fn)(void *done_ctx, int err, const char *msg, int64_t rev,
                                      const char *from);

/* a shadow run's answer (control_ops.shadow): err 0 the reconcile returned
 * 0, -ETIMEDOUT the run's timeout passed, another -errno the reconcile
 * failed (msg: why) or the run could not start; rep (borrowed for the call,
 * a proto/control.proto ShadowReport) is what was captured, NULL when the
 * run never began */
struct Leasehold__Control__ShadowReport;
typedef void (*control_shadow_fn)(void *done_ctx, int err, const char *msg,
                                  const struct Leasehold__Control__ShadowReport *rep);

/* one node's roles record (leaseholdctl roles list) */
struct control_role_entry {
	const char *node_id;
	const char *const *roles;
	size_t n_roles;
	const char *error; /* the record is invalid: why (roles then empty), else NULL */
};

struct control_ops {
	/* plugins - fill up to max entries; return the total number */
	size_t (*plugins)(void *ud, struct control_plugin *out, size_t max);
	/* members - of plugin `name`: fill up to max, *ret_total = count; 0 or
	 * -ENOENT (unknown plugin) */
	int (*members)(void *ud, const char *name, struct control_member *out, size_t max,
	               size_t *ret_total);
	/* reload - probe again the files of one plugin (name without a '.'),
	 * one file (name with a '.', e.g. x-1.3.0.so), or rescan the whole dir
	 * (NULL); 0, -ENOENT, or another -errno with a message in err */
	int (*reload)(void *ud, const char *name, char *err, size_t err_len);
	/* node_id - this daemon's node id */
	const char *(*node_id)(void *ud);

	/* ---- roles (the roleserve seed); a server treats NULL as "not supported" ---- */
	/* roles_list - every node's record, sorted by node id: fill up to max,
	 * return the total */
	size_t (*roles_list)(void *ud, struct control_role_entry *out, size_t max);
	/* roles_set - replace NODE's roles (n may be 0: no roles). Returns 0 when
	 * started: done(done_ctx, err, msg) runs exactly once later on the loop
	 * (err -ENOENT: without force, NODE has never registered, as
	 * election_known_node says); or -errno at once (-EINVAL: bad node or role
	 * name; msg in err) and done never runs. */
	int (*roles_set)(void *ud, const char *node, const char *const *roles, size_t n,
	                 bool force, control_done_fn done, void *done_ctx, char *err,
	                 size_t err_len);
	/* roles_clear - delete NODE's record; as roles_set */
	int (*roles_clear)(void *ud, const char *node, control_done_fn done, void *done_ctx,
	                   char *err, size_t err_len);

	/* ---- membership; NULL = "not supported" ---- */
	/* members_forget - remove NODE from plugin NAME's membership (a node gone
	 * for good). As roles_set: 0 when started, then done() exactly once; or
	 * -errno at once with the reason in err (-ENOENT: no such plugin or
	 * member; other refusals -EINVAL, -EBUSY, -EAGAIN) and done never runs. */
	int (*members_forget)(void *ud, const char *name, const char *node, control_done_fn done,
	                      void *done_ctx, char *err, size_t err_len);
	/* leave - this node leaves every plugin's membership for good and shuts
	 * down (as on SIGTERM, but deleting its member records). Returns 0 when
	 * the shutdown was started (it runs after the reply is sent), or -errno
	 * with the reason in err. */
	int (*leave)(void *ud, char *err, size_t err_len);

	/* ---- operator verbs; NULL = "not supported" ---- */
	/* pause - pause (pause true) or resume plugin NAME cluster-wide. As
	 * members_forget (-ENOENT: no such plugin). */
	int (*pause)(void *ud, const char *name, bool pause, control_done_fn done, void *done_ctx,
	             char *err, size_t err_len);
	/* reconcile - record a reconcile request for plugin NAME's leader. 0
	 * when started: done() runs exactly once later, never before the op
	 * returns; or -errno at once with the reason in err (-ENOENT no such
	 * plugin, -EBUSY paused, -EAGAIN not synced). The server then waits
	 * until control_plugin.reconcile_served reaches the revision. */
	int (*reconcile)(void *ud, const char *name, control_rev_fn done, void *done_ctx, char *err,
	                 size_t err_len);
	/* history - read plugin NAME's term history; as reconcile */
	int (*history)(void *ud, const char *name, control_history_fn done, void *done_ctx,
	               char *err, size_t err_len);
	/* switchover - ask plugin NAME's leader to hand over (to node `to`, or
	 * NULL: any other candidate); the request ends by itself after
	 * timeout_ms. 0 when started: done() runs exactly once later, never
	 * before the op returns, err < 0 being a refusal or a failed write with
	 * the reason in msg; or -errno at once with the reason in err (-ENOENT
	 * no such plugin). The server then waits until the request ended
	 * (switchover_ended_rev: the new leader deletes it once it leads as
	 * asked, or it expired) and answers whether control_plugin.leader is
	 * then what was asked. */
	int (*switchover)(void *ud, const char *name, const char *to, uint32_t timeout_ms,
	                  control_switchover_fn done, void *done_ctx, char *err, size_t err_len);
	/* release_pin - pin plugin NAME at rel (unpin: delete its pin; rel and
	 * force unused), checked against its records in etcd
	 * (election_pin_request.h). As members_forget; done's err -EBUSY,
	 * -ESRCH, -ERANGE, -ENOENT are refusals with the reason in msg; on
	 * success msg is NULL or a warning for the operator (a forced pin). */
	int (*release_pin)(void *ud, const char *name, bool unpin, struct release rel, bool force,
	                   control_done_fn done, void *done_ctx, char *err, size_t err_len);

	/* ---- plugin configuration (pconfig); NULL = "not supported" ---- */
	/* config_get - read plugin NAME's cluster document from etcd (any
	 * plugin name, loaded here or not). 0 when started: done() runs exactly
	 * once later, never before the op returns; or -errno with the reason in
	 * err. */
	int (*config_get)(void *ud, const char *name, control_config_fn done, void *done_ctx,
	                  char *err, size_t err_len);
	/* config_set - make doc (len bytes, hostile) plugin NAME's cluster
	 * document if its mod revision is still expect_rev (0: no document may
	 * exist). Checked first (a JSON object within the bound: -EINVAL), then
	 * by the plugin's validate_config when it is loaded here (-EINVAL with
	 * its reason). As config_get; done's err -ESTALE when another write came
	 * first; -ENOENT when, without force, plugin NAME has never run (as
	 * election_known_plugin says). */
	int (*config_set)(void *ud, const char *name, const void *doc, size_t len,
	                  int64_t expect_rev, bool force, control_config_fn done, void *done_ctx,
	                  char *err, size_t err_len);

	/* ---- shadow preview; NULL = "not supported" ---- */
	/* shadow - one reconcile of plugin NAME on this node with its writes
	 * captured (node: when not NULL, this daemon's node id must be it).
	 * 0 when started: done() runs exactly once later, never before the op
	 * returns; or -errno at once with the reason in err (-ENOENT no such
	 * plugin, -EXDEV this daemon is another node, -EBUSY this node leads
	 * the plugin, -EALREADY a run is in progress, -EAGAIN the plugin is
	 * not ready) and done never runs. */
	int (*shadow)(void *ud, const char *name, const char *node, uint32_t timeout_ms,
	              control_shadow_fn done, void *done_ctx, char *err, size_t err_len);
};

/* What a reply carries, for a client that answers a request itself
 * (leaseholdctl in observer mode builds, from etcd, the Response the daemon
 * would send, so the printers are shared). Every array may be NULL when its
 * count is 0; plugin_nodes/n_plugin_nodes: the node rows of plugin i (both
 * NULL: none). code: a Leasehold__Control__Code; message when not OK. */
struct control_answer {
	const char *node;
	int code;
	const char *message;
	const struct control_plugin *plugins;
	size_t n_plugins;
	const struct control_member *const *plugin_nodes;
	const size_t *n_plugin_nodes;
	const struct control_member *members;
	size_t n_members;
	const struct control_role_entry *roles;
	size_t n_roles;
	const struct control_term *terms;
	size_t n_terms;
	int64_t revision;
	const char *leader; /* switchover: the leader at the answer, or NULL */
	/* config get/set: the document (config_len bytes, or NULL), its
	 * revision, and why a stored document is not valid (NULL: it is) */
	const void *config_document;
	size_t config_len;
	int64_t config_revision;
	const char *config_error;
};

/* control_answer_pack - a as a packed Response, exactly as the server packs
 * its replies. *ret_buf (malloc'd, the caller frees it) and *ret_len are set
 * on success only. 0 or -ENOMEM. */
int control_answer_pack(const struct control_answer *a, uint8_t **ret_buf, size_t *ret_len);

/* control_new - listen on url ("ipc://PATH" or "/path"); the socket file
 * gets mode 0600 (its directory is created, 0755, if missing) and PATH.lock
 * is held while the server lives. On success *ret owns the server (free
 * with control_free); ops and ud must outlive it. Returns 0 or -errno
 * (message in err; *ret untouched): -EADDRINUSE another daemon serves the
 * path, -EEXIST the path is not a socket, -EINVAL not a socket name. */
int control_new(struct loop *l, const char *url, const struct control_ops *ops, void *ud,
                struct control **ret, char *err, size_t err_len);
/* control_notify - plugin state may have changed: re-evaluate pending
 * long-poll requests (wait-ready). Cheap when nothing waits. Loop thread;
 * may be called from inside a control_ops callback (it is then deferred
 * until the request at hand is handled). Accepts NULL. */
void control_notify(struct control *c);
/* control_waiting - how many wait-ready requests are parked (for tests and
 * stats; loop thread). 0 for NULL. */
size_t control_waiting(const struct control *c);
/* control_pending - how many roles_set/roles_clear requests wait for their
 * done() call (for tests and stats; loop thread). 0 for NULL. */
size_t control_pending(const struct control *c);
/* control_free - close the socket (the socket and lock files are removed), answer
 * nothing more; parked wait-ready requests and roles requests still waiting
 * for done() get no reply and are freed: done() must not be called for them
 * afterwards. Loop thread, not from inside a control_ops callback. Accepts
 * NULL. */
void control_free(struct control *c);

/* control_default_url - $XDG_RUNTIME_DIR/leasehold.sock, else
 * /run/leasehold/control.sock, as "ipc://..." into buf. */
const char *control_default_url(char *buf, size_t len);

/* control_url_resolve - the control socket, resolved the same way by the
 * daemon and by leaseholdctl: the flag (when not NULL), else
 * $LEASEHOLD_CONTROL (when set and not empty), else the configuration
 * file's `control` key (from_file, when not NULL), else
 * control_default_url. Returns one of them (buf holds the default).
 * "none" (no socket) is passed through for the caller to act on. */
const char *control_url_resolve(const char *flag, const char *from_file, char *buf, size_t len);

#endif
