/* SPDX-License-Identifier: MIT */
/*
 * election_internal.h - what the pieces of the election share (not for the
 * daemon: host/election/election.h is the API). The reading guide at the top of
 * election.c names each file and what it holds.
 *
 * Threading: everything here runs on the loop thread only (etcd replies,
 * watch events, timers and driver callbacks all arrive there).
 * Ownership: struct election owns every string, buffer, timer and etcd call
 * it points to; the driver (dops, drv), the loop, the etcd client and the
 * session are borrowed. Contexts handed to a driver or to the etcd client
 * (struct drv_ctx, struct fenced_ctx) may outlive the election: they carry a
 * magic number, checked when they come back through a callback.
 * Errors: functions returning int give 0 or -errno.
 */
#ifndef LH_ELECTION_INTERNAL_H
#define LH_ELECTION_INTERNAL_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/obj.h"
#include "election/election.h"
#include "proto/leasehold.pb-c.h"
#include "election/election_node_record.h"
#include "election/election_release_rule.h"
#include "election/election_health.h"

#define ST_WORKING LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING
#define ST_DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

/* Magic numbers of objects a pointer to which comes back through a callback
 * (base/obj.h): a stale or foreign pointer stops at the assert
 * instead of being used. Cleared when the object is freed. */
#define ELECTION_MAGIC 0x454c4543u   /* struct election */
#define DRV_CTX_MAGIC 0x44525643u    /* struct drv_ctx (election_lead.c) */
#define FENCED_CTX_MAGIC 0x46454e43u /* struct fenced_ctx (election_fence.c) */
#define FORGET_CTX_MAGIC 0x46524743u /* struct forget_ctx (election.c) */
#define VERB_CTX_MAGIC 0x56455242u   /* struct verb_ctx (election_operator_records.c) */
#define TERM_CTX_MAGIC 0x5445524du   /* struct term_ctx (election_operator_records.c) */
#define HANDOVER_CTX_MAGIC 0x484e4443u /* struct handover_ctx (election_handover.c) */
#define PRIORITY_CTX_MAGIC 0x50524943u /* struct priority_ctx (election_handover.c) */
#define NODE_CTX_MAGIC 0x4e4f4443u   /* struct node_ctx (election_nodes.c) */

/* the term history keeps this many terms (the newest) */
#define ELECTION_HISTORY_MAX 100

struct member_ent {
	struct member_ent *next;
	char *node_id;
	struct release release;
	struct rule_release rr; /* the releases the record declares (valid: rr.release == release) */
	bool valid; /* false: the record exists but does not decode (release unknown) */
	int32_t priority; /* the node's candidate priority (0 from an older host) */
	int64_t mod_rev; /* the record's mod_revision as mirrored */
};

struct member_map {
	struct member_ent **buckets;
	size_t n_buckets, n;
	size_t n_invalid; /* entries whose record does not decode */
};

struct candidate {
	char *key;
	char *node_id;
	int64_t create_rev;
	int64_t lease; /* the lease the key is bound to (its name) */
};

/* the leader's status/reconcile machine (election_lead.c); changed only by
 * election_lead_phase_set there, which logs and asserts every transition. LP_NONE
 * while not leading (LP_VERIFY also while the check before a term runs). */
enum lead_phase {
	LP_NONE,
	LP_VERIFY,      /* re-check our key + read status (one txn) */
	LP_RESTRICT,    /* waiting for every member >= min_compatible, then write */
	LP_WAIT,        /* reconcile_wait */
	LP_RECONCILE,   /* initial reconcile (with backoff) */
	LP_IDLE,        /* periodic reconcile timer armed */
	LP_PERIODIC,    /* periodic reconcile running */
};

/* the control etcd call in flight (e->op, e->call): exactly one at a time,
 * started by election_op_start and ended by election_op_done */
enum op_kind { OP_NONE, OP_SYNC, OP_MEMBER_PUT, OP_MEMBER_DEL, OP_CAMPAIGN, OP_RESIGN, OP_LEAD };

struct term_ctx;
struct handover_ctx;
struct priority_ctx;

/* the switchover request as mirrored from P/N/handover (proto Switchover) */
struct handover_rec {
	bool present;
	bool valid; /* false: it does not decode (ignored until it goes) */
	bool seen;  /* the sync in progress saw it */
	int64_t rev; /* its mod_revision: the request's id */
	bool leased; /* bound to a lease: it ends by itself */
	char requester[129], from[129], to[129]; /* printable copies; to "" = any */
	int64_t from_token, to_token;
	bool priority;
};

struct node_ctx;

/* a mirrored P/N/nodes/<node-id> record (election_nodes.c) */
struct node_ent {
	char *node_id;
	bool valid; /* false: the record does not decode */
	struct node_record rec;
	int64_t mod_rev;
	int64_t lease; /* the lease the record is bound to (its writer's session) */
};

struct election {
	uint32_t magic; /* ELECTION_MAGIC while allocated */
	struct loop *loop;
	struct etcd_client *etcd;
	struct session *sess;
	char *prefix, *name, *node_id;
	struct plugin_releases rel;
	uint64_t reconcile_wait_ns, reconcile_interval_ns;
	void (*on_change)(void *);
	void *on_change_ud;

	/* keys */
	char *k_members;     /* P/N/members/ */
	char *k_member_self; /* P/N/members/<node> */
	char *k_election;    /* P/N/election/ */
	char *k_status;      /* P/N/status */
	char *k_data;        /* P/N/data/ */
	uint8_t *k_watch_end; /* P/N/status\0 */
	size_t k_watch_end_len;
	uint8_t *k_members_end;
	size_t k_members_end_len;
	char my_key[512]; /* P/N/election/<lease hex>: prefix <= 200, name <= 63 */

	/* driver */
	const struct driver_ops *dops;
	void *drv;
	struct driver_host dhost;
	struct {
		bool pending;
		const struct driver_ops *ops;
		void *drv;
		struct plugin_releases rel;
		void (*done)(void *);
		void *ud;
	} swap;

	/* mirror: kept by election_mirror.c, read everywhere */
	bool synced;
	bool ever_synced; /* a resync (after compaction) does not end leadership */
	int64_t rev;
	struct member_map members;
	struct relcount *rc;
	size_t n_rc, cap_rc;
	struct candidate *cands;
	size_t n_cands, cap_cands;
	struct status_rec status;
	int64_t status_mod_rev; /* the status record's mod_revision as mirrored, 0 = absent */
	struct releases releases; /* published */
	int64_t members_rev; /* revision of the last member event seen (or the sync) */
	struct etcd_watch *watch;
	int64_t sync_rev; /* H: the watch's start - 1, the range's revision; 0 until created */
	int64_t sync_read_rev; /* the revision the range in flight reads at */
	struct etcd_event_hold sync_held; /* the watch's events while the range is in flight */
	struct loop_timer *sync_timer;
	uint64_t sync_backoff;

	/* session + control path (election.c): op says which control call is
	 * in flight, call is its handle; both set together or both clear */
	int64_t lease;
	/* our member record (persistent, bound to no lease): member_placed says
	 * it is in etcd holding member_rr, as written by us at member_rev
	 * or found there at sync; false while unknown or absent */
	bool member_placed;
	struct rule_release member_rr; /* the releases our placed record declares */
	int32_t member_priority; /* the priority our placed record holds */
	int64_t member_rev;
	int32_t priority; /* ours (election_config) */
	/* the priority handover this node asked for as leader: to this
	 * candidate key (create_revision), asked once per key */
	int64_t priority_asked_rev;
	struct priority_ctx *priority_call;
	/* the term (e->gen) an operator's switchover to us began: the
	 * priority rule does not undo it */
	uint64_t priority_skip_gen;
	/* readiness is only claimed from a view read while the current session
	 * holds: the session's lease when the mirror's last full read was sent
	 * (0 = none); after a session loss the mirror is read again */
	int64_t view_lease;
	int64_t sync_lease; /* the lease when the read in flight was sent */
	int64_t my_rev; /* create_revision of our election key (the fencing token), 0 = none */
	/* our own writes to our election key (campaign, resign): the revision
	 * of the last one whose outcome we know, and whether one since has an
	 * unknown outcome (until a linearizable answer about the key) */
	int64_t key_wrev;
	bool key_wunknown;
	bool resign_publishes;          /* the resign in flight also puts our member record */
	bool resign_drops_member;       /* ... or deletes it (leaving for good) */
	bool resign_restricts;          /* ... and restricts the status for our successor */
	/* the fencing token of the last term we led (0 = none) */
	int64_t led_rev;
	/* a resign that restricted the status for our successor failed on a
	 * guard while this key (its create_revision) was still ours: the next
	 * resign of that key goes without the restriction */
	int64_t restrict_refused_rev;
	struct rule_release resign_rr;  /* ... with these (incoming) releases */
	enum op_kind op;
	struct etcd_call *call;
	struct loop_timer *retry_timer;
	/* rule 5 waits for the first of a herd of candidates until then (loop
	 * ns; 0 = no wait), stepped by stagger_timer (election_campaign_waits) */
	uint64_t stagger_until;
	struct loop_timer *stagger_timer;
	uint64_t retry_backoff;
	bool held, stopping, failed;
	char *hold_reason, *fail_reason;
	void (*stop_done)(void *);
	bool (*stop_last)(void *); /* election_stop_revoking */
	bool stop_leave;           /* the stop leaves the membership for good */
	void *stop_ud;
	enum election_state state_reported;
	char not_ready_buf[160]; /* election_get_info's not_ready text */
	char held_back_buf[320]; /* election_get_info's held_back text (the release rule) */
	/* health (election_backoff.c): reconciles failed in a row, the
	 * hold-down; health_timer ends it; unhealthy_until_unix is its end by
	 * the wall clock (published in our member record, shown only) */
	struct election_health health;
	struct loop_timer *health_timer;
	int64_t unhealthy_until_unix;
	char health_last_error[160]; /* the last failed reconcile's error */
	char term_health_detail[200]; /* a term's end detail when it ends unhealthy */

	/* leadership: leading and draining change only in election_lead.c
	 * (elect, election_begin_leave, election_depose); leading implies
	 * my_rev != 0, draining implies leading (election_assert_invariants) */
	bool leading;
	bool draining; /* leaving: the driver drains its queue, then deposed */
	uint64_t gen; /* bumps on every elected / deposed */
	enum lead_phase phase; /* set only by election_lead_phase_set (election_lead.c) */
	bool reconciling; /* a reconcile of this term is queued or running */
	bool status_existed;
	bool status_is_done;
	struct release restrict_version, restrict_min_compatible;
	int64_t restrict_tried_rev;
	bool restrict_logged;
	bool restrict_logged_invalid;
	struct release restrict_logged_min;
	uint8_t *pending_status; /* bytes of a status write in flight */
	size_t pending_status_len;
	int pending_status_state;
	bool pending_readback;
	struct loop_timer *lead_timer;
	uint64_t lead_backoff;
	uint64_t lead_log_after;

	/* operator records (election_operator_records.c): pause and reconcile requests,
	 * mirrored from [P/N/election/, P/N/status]; the term history */
	char *k_paused;  /* P/N/paused */
	char *k_request; /* P/N/reconcile-request */
	char *k_served;  /* P/N/reconcile-served */
	char *k_terms;   /* P/N/term-history/ (outside the watched range) */
	bool paused;
	bool pause_seen; /* the sync in progress saw the pause record */
	char pause_error[96];
	char *paused_by;
	int64_t paused_at;
	bool resume_reconcile; /* the pause ended while leading: reconcile in full */
	/* the operator's pin (election_pin.c), mirrored like the pause */
	char *k_pin;          /* P/N/pin */
	int64_t pin_mod_rev;  /* the pin record's mod_revision as mirrored, 0 = absent */
	struct rule_pin pin;  /* as decoded; !set: none, or it does not decode */
	bool pin_seen;        /* the sync in progress saw the pin record */
	char pin_error[96];   /* the pin record does not decode: why */
	char pin_by[129];
	int64_t pin_at;
	bool plugin_request;   /* the plugin asked for a reconcile (request_reconcile) */
	bool pause_logged;     /* this term said that the pause holds its reconcile */
	int64_t request_rev;   /* mod_revision of the request record, 0 = none */
	int64_t served_rev;    /* the request revision last served (from the record) */
	bool served_ok;
	char *served_error;
	int64_t request_covered; /* the request revision the running reconcile covers */
	bool served_pending;     /* a served record to write (fenced) */
	int64_t served_pending_rev;
	bool served_pending_ok;
	char *served_pending_error;
	/* the term history: the start record write in flight, and the end of
	 * the last term this node led, written in its resign txn */
	struct term_ctx *term;
	struct term_ctx *term_end_call; /* the end record written beside a revocation */
	int64_t term_rec_rev; /* our term's record as we last wrote it (its mod
	                       * revision), 0: not written by us yet */
	int64_t term_end_written_token;  /* the term whose end is recorded */
	struct loop_timer *term_timer;
	int64_t term_start_unix;
	bool term_end_pending;
	int64_t term_end_token;
	/* the switchover request (election_handover.c), mirrored with the
	 * rest of the watched range */
	char *k_handover; /* P/N/handover */
	struct handover_rec handover;
	int64_t handover_ended_rev;  /* the last request seen to go (its rev) */
	struct handover_ctx *handover_call; /* the new leader's delete in flight */
	int64_t handover_del_tried;  /* the request revision that delete was for */
	char handover_detail[320];
	/* the key (token) we began to give up for a switchover: the handover
	 * completes (resign) even when the request ends meanwhile */
	int64_t handover_leaving;
	int term_end_reason;
	char term_end_detail[128];
	/* terms this node led that ended, by end reason (the metrics'
	 * count, election_terms_ended); the token last counted, so a term
	 * counts once whichever path records its end */
	uint64_t terms_ended[ELECTION_TERM_END_SLOTS];
	int64_t term_counted_token;

	/* per-node state records (election_nodes.c): every node's, as
	 * mirrored from [P/N/election/, P/N/status]; our own record as it
	 * should be (node_want, NULL = none) and as last written (bound to
	 * node_written_lease); at most one write in flight */
	char *k_nodes;     /* P/N/nodes/ */
	char *k_node_self; /* P/N/nodes/<node> */
	struct node_ent *nodes;
	size_t n_nodes, cap_nodes;
	char *node_want, *node_written;
	size_t node_want_len, node_written_len;
	int64_t node_written_lease;
	struct node_ctx *node_call;
	struct loop_timer *node_timer;
	uint64_t node_backoff;
	enum election_state node_state; /* the state node_since belongs to */
	int64_t node_since;
	uint64_t node_writes; /* records written by this node (tests, stats) */

	/* another session with our node id (election_conflict.c): instance is
	 * this daemon's identity (election_config.instance, "" = none), prev
	 * the leases of our own earlier runs whose keys are still mirrored;
	 * conflict: another host's key stands in our way (then we neither
	 * register, campaign nor write our state record), with its lease and
	 * the message the views show */
	char *instance;
	int64_t prev[NODE_RECORD_PREVIOUS_MAX];
	size_t n_prev;
	bool conflict;
	bool conflict_known; /* decided on a whole view once: until then we
	                      * neither join nor write our state record */
	int64_t conflict_lease;
	char conflict_msg[400];

	/* stats */
	uint64_t reconcile_count;
	bool reconcile_last_ok;
	char *reconcile_last_error;
	int64_t reconcile_last_at;
	uint64_t status_writes;
	struct fenced_ctx *fenced; /* plugin txns in flight */
	struct drv_ctx *drv_ctxs;  /* driver callbacks not yet called */
};

/* ---- election.c: the controller ---- */

/* election_step - the level-triggered controller: compares what is with what
 * should be and starts at most one control call; then reports the state and
 * calls on_change. Every event ends here. */
void election_step(struct election *e);

/* election_op_start - a control etcd call of kind op is about to start
 * (asserts none is in flight). election_op_done - it answered, failed to
 * start or was cancelled. */
void election_op_start(struct election *e, enum op_kind op);
void election_op_done(struct election *e);

/* election_retry_later - a control call failed with err: log it (what = the
 * action) and step again after the retry backoff, which doubles. */
void election_retry_later(struct election *e, const char *what, int err);

/* election_want_campaign - we should hold an election key now */
bool election_want_campaign(const struct election *e);

/* election_assert_invariants - what must hold whenever the controller runs
 * (leading implies my_rev != 0, draining implies leading, ...) */
void election_assert_invariants(const struct election *e);

/* ---- election_mirror.c: the local copy of [P/N/election/, P/N/status] ---- */

/* election_sync_start - watch the range from now, then (called again once
 * etcd created the watch) read it at the revision the watch starts after (the
 * one control call OP_SYNC); retried on the sync timer. */
void election_sync_start(struct election *e);
/* election_on_sync_timer - the sync timer's callback (ud = the election) */
void election_on_sync_timer(struct loop_timer *t, void *ud);
/* election_view_refresh - the session changed: read the mirror again before
 * vouching for readiness */
void election_view_refresh(struct election *e);
/* election_publish - recompute e->releases from the member counts; tells a
 * leading, not draining driver when they changed */
void election_publish(struct election *e);
/* election_cand_lowest - the candidate that leads (lowest create_revision),
 * or NULL; borrowed until the mirror changes */
const struct candidate *election_cand_lowest(const struct election *e);
/* election_cand_of_node - node_id holds an election key in the mirror */
bool election_cand_of_node(const struct election *e, const char *node_id);
/* election_member_find - node_id's member entry, or NULL; borrowed until the
 * mirror changes */
const struct member_ent *election_member_find(const struct election *e, const char *node_id);
/* election_mirror_free - free the members and candidates (election_free) */
void election_mirror_free(struct election *e);

/* ---- election_records.c: records in etcd and the readiness rule ---- */

/* election_decode_status - a P/N/status value (hostile bytes) -> state (any
 * value: like the reference algorithm's proto3, an unknown state is kept;
 * only the releases decide compatibility), version and minimum compatible
 * release. Returns 0, or -EBADMSG (does not unpack, a release missing);
 * outputs untouched then. */
int election_decode_status(const void *buf, size_t len, int *ret_state, struct release *ret_version,
                           struct release *ret_min_compatible);

/* election_status_ready - readiness (the reference algorithm's WaitReady
 * rule) for a status and a plugin's releases */
bool election_status_ready(const struct plugin_releases *local, bool present,
                           struct release status_version, struct release status_min_compatible);

/* election_status_equal - s is present, valid and says exactly this */
bool election_status_equal(const struct status_rec *s, int state, struct release v,
                           struct release m);
/* election_status_encode / election_member_encode - the value to write;
 * *ret (malloc'd, the caller frees it) and *ret_len are set on success only.
 * Returns 0 or -ENOMEM. */
int election_status_encode(int state, struct release v, struct release mcr, uint8_t **ret,
                           size_t *ret_len);
int election_member_encode(const struct election *e, const struct plugin_releases *rel,
                           uint8_t **ret, size_t *ret_len);
/* election_rule_release_of - a plugin's releases as its member record
 * declares them */
struct rule_release election_rule_release_of(const struct plugin_releases *rel);
/* election_rule_answer - the release that may campaign, from the mirror
 * (every member record, the local release, the status): the same answer
 * on every host whose mirror is at the same revision */
void election_rule_answer(const struct election *e, struct rule_answer *ret);
/* election_rule_ours - the rule lets our release campaign now */
bool election_rule_ours(const struct election *e);
/* election_rule_ours_as - the same with this node counted as unhealthy or
 * not (what health alone changes) */
bool election_rule_ours_as(const struct election *e, bool unhealthy);
/* election_rule_successor_restriction - release_rule_successor_restriction
 * over the mirror's member records with our own record replaced by
 * `incoming`, as the resign txn about to be sent leaves them; false when
 * our record is not in the mirror or does not decode */
bool election_rule_successor_restriction(const struct election *e,
                                         const struct rule_release *incoming,
                                         struct rule_status *ret);
/* election_local_rule_release - our member record as the rule reads it,
 * with the health given */
struct rule_release election_local_rule_release(const struct election *e, bool unhealthy);
/* election_campaign_first_other - the node that campaigns first when
 * nobody of the answer's release holds a key yet
 * (election_campaign_order.h), when that is not us; NULL when it is us,
 * when someone of that release is in line already, or when no member is
 * eligible. Borrowed until the mirror changes. */
const char *election_campaign_first_other(const struct election *e);
/* election_rule_held_back - why the rule keeps our release from
 * campaigning (into e->held_back_buf), or NULL when it does not */
const char *election_rule_held_back(struct election *e);
/* election_not_ready_reason - why this node may not serve now (a static
 * string or buf), or NULL when it may */
const char *election_not_ready_reason(struct election *e, char *buf, size_t len);

/* ---- election_lead.c: the leader's status/reconcile protocol ---- */

/* election_become_leader - our key is the lowest in the mirror: verify it
 * (from the mirror or with one read txn, OP_LEAD), then elect */
void election_become_leader(struct election *e);
/* election_lead_step - the next leader action, if none is in flight */
void election_lead_step(struct election *e);
/* election_begin_leave - leave leadership gracefully: drain the driver, then
 * deposed (at once without a driver) */
void election_begin_leave(struct election *e);
/* election_depose - leadership ends (no-op when not leading). graceful:
 * called after the driver drained. Cancels a leader call in flight. */
void election_depose(struct election *e, bool graceful, const char *why);
/* election_on_lead_timer - the lead timer's callback (ud = the election) */
void election_on_lead_timer(struct loop_timer *t, void *ud);
/* election_drv_ctxs_orphan - election_free: the driver callbacks still owed
 * no longer reach e (they only free their context) */
void election_drv_ctxs_orphan(struct election *e);

/* ---- election_fence.c: the plugin's fenced writes ---- */

/* election_fenced_txn - driver_host.fenced_txn (ctx = the election): the
 * plugin's txn under the fence of our election key. See election_driver.h. */
/* election_plugin_request_reconcile - driver_host.request_reconcile (ctx =
 * the election; election_operator_records.c) */
void election_plugin_request_reconcile(void *ctx);
/* election_plugin_paused - driver_host.paused (ctx = the election) */
bool election_plugin_paused(void *ctx);
int election_fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                        const struct etcd_op *success, size_t n_success,
                        const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud);
/* election_fenced_orphan - election_free: the plugin txns still in flight
 * answer -ESTALE without touching e */
void election_fenced_orphan(struct election *e);

/* ---- election_pin.c: the pin record's mirror ---- */

/* election_pin_init - its key (election_control_init); 0 or -ENOMEM.
 * election_pin_free - election_control_free's part. */
int election_pin_init(struct election *e);
void election_pin_free(struct election *e);
/* election_pin_apply - a mirrored key: true when it is P/N/pin (applied) */
bool election_pin_apply(struct election *e, const struct etcd_kv *kv, bool del);
/* election_pin_sync_begin / _end - around a full read: a pin absent from it is gone */
void election_pin_sync_begin(struct election *e);
void election_pin_sync_end(struct election *e);

/* ---- election_operator_records.c: operator records (pause, reconcile requests,
 * term history) ---- */

/* election_control_init - keys and timer (election_new); 0 or -ENOMEM.
 * election_control_free - election_free's part. */
int election_control_init(struct election *e);
void election_control_free(struct election *e);
/* election_control_apply - a mirrored key: true when it is one of ours
 * (P/N/paused, P/N/reconcile-request, P/N/reconcile-served), applied */
bool election_control_apply(struct election *e, const struct etcd_kv *kv, bool del);
/* election_control_sync_begin / _end - around a full read of the range:
 * records absent from it are gone */
void election_control_sync_begin(struct election *e);
void election_control_sync_end(struct election *e);
/* election_control_may_reconcile - no pause holds back a new reconcile */
bool election_control_may_reconcile(const struct election *e);
/* election_control_reconcile_wanted - leading and idle: an operator's
 * request or the end of a pause asks for a reconcile now */
bool election_control_reconcile_wanted(const struct election *e);
/* election_control_reconcile_started / _finished - a reconcile of this term
 * starts (it covers the requests seen so far) / finished with err, msg */
void election_control_reconcile_started(struct election *e);
void election_control_reconcile_finished(struct election *e, int err, const char *msg);
/* election_control_write_served - the leader's next served record, if
 * one is pending and no control call is in flight: starts it (OP_LEAD) and
 * returns true */
bool election_control_write_served(struct election *e);
/* election_term_begin - a term of ours started (elect): its start (and the
 * end of an earlier term that has none) is recorded once the first
 * reconcile returned (election_term_record), at most a second later */
void election_term_begin(struct election *e);
/* election_term_record - the term's first reconcile returned: record its
 * start now if it is still due */
void election_term_record(struct election *e);
/* election_term_end - our term ends (depose): remember why, for the resign
 * txn (election_term_end_op) */
void election_term_end(struct election *e);
/* election_term_end_op - the resign txn's put of our last term's ended
 * record into *ret_op (value malloc'd into *ret_buf; the caller frees it).
 * Returns true when there is one for our key of token my_rev. */
bool election_term_end_op(struct election *e, struct etcd_op *ret_op, uint8_t **ret_buf,
                          char *key_buf, size_t key_len);
/* election_term_end_written - the resign txn that carried it succeeded */
void election_term_end_written(struct election *e);
/* election_term_leaving - a graceful leave starts (drain): on a stop whose
 * lease revocation deletes our key (election_stop_revoking), record the
 * end of our term now, fenced, while the plugin drains; the controller
 * waits for it (e->term_end_call) before leaving the key to the revocation,
 * and the resign txn carries it when it failed */
void election_term_leaving(struct election *e);

/* ---- election_handover.c: the switchover request (P/N/handover) ---- */

/* election_switchover_init - keys (election_new); 0 or -ENOMEM.
 * election_switchover_free - election_free's part (a delete in flight is
 * cancelled). */
int election_switchover_init(struct election *e);
void election_switchover_free(struct election *e);
/* election_switchover_apply - a mirrored key: true when it is P/N/handover */
bool election_switchover_apply(struct election *e, const struct etcd_kv *kv, bool del);
/* election_switchover_sync_begin / _end - around a full read of the range */
void election_switchover_sync_begin(struct election *e);
void election_switchover_sync_end(struct election *e);
/* election_switchover_resign - a switchover in flight wants our election
 * key gone: we lead and it asks us to hand over, or it names a target and
 * our key is ahead of the target's. The leader drains first (the graceful
 * path); either way the node campaigns again at once, behind the target. */
bool election_switchover_resign(const struct election *e);
/* election_switchover_leaving - a graceful leave starts (drain): when a
 * switchover asked for it, remember that (and why, for the term history),
 * so the handover completes even if the request ends while we drain.
 * election_switchover_ended_us - the term of our key ends by a switchover:
 * the term history's end detail (a string in e), else NULL */
void election_switchover_leaving(struct election *e);
const char *election_switchover_ended_us(struct election *e);
/* election_switchover_step - leading: when we are what the request asked
 * for, or it does not decode and has no lease (it would never end),
 * delete it (fenced, compared on its revision); with no request in
 * flight, hand over once to a candidate of the newest release with a
 * strictly higher priority (a request like `switchover --to` of our own) */
void election_switchover_step(struct election *e);
/* ---- election_nodes.c: per-node state records (P/N/nodes/<node-id>) ---- */

/* election_nodes_init - keys and timer (election_new); 0 or -ENOMEM.
 * election_nodes_free - election_free's part (cancels a write in flight). */
int election_nodes_init(struct election *e);
void election_nodes_free(struct election *e);
/* election_nodes_apply - a mirrored key: true when it lies under P/N/nodes/
 * (then applied: hostile bytes, an undecodable record is kept as invalid) */
bool election_nodes_apply(struct election *e, const struct etcd_kv *kv, bool del);
/* election_nodes_clear - before a full read of the range */
void election_nodes_clear(struct election *e);
/* election_nodes_update - compute our record from the current state (end
 * of every election_step); when it differs from what etcd holds, a write is
 * scheduled after a short coalescing delay, so a burst of changes costs
 * one write */
void election_nodes_update(struct election *e);
/* election_nodes_busy - a stop that leaves for good waits for the deletion
 * of our record (a shutdown leaves it to the lease revocation) */
bool election_nodes_busy(struct election *e);
/* election_node_find - node_id's mirrored record, or NULL; borrowed until
 * the mirror changes */
const struct node_ent *election_node_find(const struct election *e, const char *node_id);


/* ---- election_conflict.c: another session with our node id ---- */

/* election_conflict_update - recompute e->conflict and e->prev from the
 * mirror (election_step, before it decides): a key of our node id under
 * another lease is our own earlier run when our state record bound to
 * that lease names our instance (or we recognised it before); any other
 * such key created before ours (or while we hold none) is a conflict.
 * Logs when a conflict begins and ends. */
void election_conflict_update(struct election *e);
/* election_node_sessions - how many live election keys carry node_id, and
 * whether they are explained by one node's restarts (its state record's
 * lease and "previous" leases): *ret_conflict is set when they are not */
size_t election_node_sessions(const struct election *e, const char *node_id, bool *ret_conflict);

/* ---- election_backoff.c: this node's health (election_health.h) ---- */

/* election_backoff_result - a finished reconcile (err != -ECANCELED; msg
 * borrowed, may be NULL), current term or not: counts toward the health;
 * returns true when it made the node unhealthy (the caller steps) */
bool election_backoff_result(struct election *e, int err, const char *msg);
/* election_backoff_on_timer - the hold-down timer (loop callback) */
void election_backoff_on_timer(struct loop_timer *t, void *ud);
/* election_backoff_explain - why this unhealthy node does not campaign,
 * into buf */
void election_backoff_explain(const struct election *e, char *buf, size_t len);

#endif
