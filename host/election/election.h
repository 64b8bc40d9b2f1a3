/* SPDX-License-Identifier: MIT */
/*
 * election.h - the version-aware election and status protocol for ONE plugin
 * on this node (a port of Monogon's reconciler election/status, generalised).
 *
 * Design notes
 * - One range + one watch over [P/N/election/, P/N/status] keeps a consistent
 *   mirror of the plugin's members, candidates and status at one etcd
 *   revision. P/N/data/ sorts before that range and is not watched.
 * - Members: P/N/members/<node> records are bound to no lease (the
 *   reference algorithm's persistent node records): a node that is down or
 *   cut off keeps counting with the last release it reported, until it leaves
 *   on purpose (plugin removed, role removed, a shutdown that leaves for
 *   good) or an operator forgets it. Membership (who may be serving) is kept
 *   apart from liveness (who campaigns: election keys, bound to the lease).
 *   Counts per distinct release (the reference's releaseCount), so a member
 *   event costs O(distinct releases), not a rescan of all members. The local
 *   release always counts (as in the reference).
 * - Election: the etcd recipe under ONE prefix for every release: our key is
 *   P/N/election/<lease hex> (value: node id); the candidate with the lowest
 *   create_revision leads. We campaign only while local release >= max
 *   member release and leave (delete our key) as soon as a newer one appears.
 * - Level-triggered: every change (watch event, session up/lost, etcd reply,
 *   timer) ends in reconcile_state(), which compares what is with what should
 *   be and starts at most one step. Leadership-ending paths:
 *     lease lost / local deadline / our key deleted / fence failed
 *        -> deposed at once, nothing drained (we are no longer safe);
 *     newer release appeared / reload / stop / role removed
 *        -> drain the plugin's queue (the running reconcile finishes), then
 *           deposed, then our election key is deleted.
 * - Operator records (election_operator_records.c): P/N/paused and
 *   P/N/reconcile-request / reconcile-served lie inside the watched range;
 *   while paused no reconcile starts (the leader keeps leading). The term
 *   history P/N/term-history/<token> lies outside it (read on demand).
 * - A switchover request P/N/handover (election_handover.c, written by
 *   election_switchover_request.c) lies inside the watched range too: the leader it names
 *   leaves gracefully, candidates ahead of its target resign their keys.
 * - Every write made while leading is a txn comparing our election key's
 *   create_revision (the fencing token). A write that times out has an unknown
 *   outcome: it is resolved by reading back before anything else is written.
 */
#ifndef LH_ELECTION_H
#define LH_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "election/election_driver.h"
#include "election/election_health.h"
#include "etcd/etcd.h"
#include "base/loop.h"
#include "election/election_node_record.h"
#include "base/release.h"
#include "etcd/etcd_session.h"
#include "election/election_release_rule.h"
#include "election/election_pin_request.h"

struct election;

enum election_state {
	ELECTION_LOADING = 0,     /* not synced with etcd yet */
	ELECTION_STANDBY = 1,     /* synced, not campaigning (older release, no session, held back) */
	ELECTION_CAMPAIGNING = 2, /* our election key exists, another candidate is ahead */
	ELECTION_LEADING = 3,
	ELECTION_FAILED = 4, /* set by the owner (plugin refused / crashed) */
	ELECTION_STOPPED = 5,
};
const char *election_state_name(enum election_state s);
/* election_status_state_name - a status record's state as the CLI shows
 * it: "DONE", "WORKING", "UNKNOWN" (a newer state), "INVALID" (!valid) */
const char *election_status_state_name(bool valid, int state);

/* election_key_is_candidate - kv, a key under P/N/election/ (its first
 * prefix_len bytes), is a live campaign: named by the lease it is bound to,
 * in lower-case hex without padding, as every host names its key. Any
 * other key there (hostile, or a tool's mistake) is no candidate: it would
 * otherwise block the election while no node owns it. Hostile bytes. */
bool election_key_is_candidate(const struct etcd_kv *kv, size_t prefix_len);

/* The decoders of the election's records, for readers outside the
 * election too (leaseholdctl's observer mode and `watch`): every value is
 * hostile bytes. Pure functions, any thread. */

/* a P/N/status record as read */
struct status_rec {
	bool present;
	bool valid;
	int state;
	struct release version;
	struct release min_compatible;
};

/* election_decode_member - a P/N/members/<id> value (hostile bytes) -> its
 * release and (ret_priority may be NULL) the node's candidate priority (0
 * in a record of an older host). Returns 0, or -EBADMSG (does not unpack /
 * no release); outputs untouched then. */
int election_decode_member(const void *buf, size_t len, struct release *ret_release,
                           int32_t *ret_priority);
/* election_decode_member_rule - the same record -> the releases and the
 * rollout rule it declares (ret_rr->declared false: an older host wrote
 * it, or its fields are incomplete). Returns 0 or -EBADMSG (outputs
 * untouched then). */
struct rule_release;
int election_decode_member_rule(const void *buf, size_t len, struct rule_release *ret_rr,
                                int32_t *ret_priority);

/* election_status_decode - hostile bytes -> *ret (always filled): present,
 * and valid only when it decodes */
void election_status_decode(const uint8_t *v, size_t len, struct status_rec *ret);

/* election_dup_printable - a copy of s (at most max bytes; NULL = "") with
 * every byte that is not printable ASCII replaced by '?': these strings
 * reach the CLI and the log. malloc'd, NULL when out of memory. */
char *election_dup_printable(const char *s, size_t max);

/* The three releases a plugin declares, and its rollout rule. */
struct plugin_releases {
	struct release release;
	struct release min_reconciler;  /* oldest reconciler whose status lets us serve */
	struct release min_compatible;  /* oldest release that may serve after we reconcile */
	/* the descriptor asks for the reference rule (LH_PLUGIN_F_REFERENCE_ROLLOUT):
	 * while this release is the newest member release, only it campaigns */
	bool reference_rule;
};

struct election_config {
	const char *prefix;  /* "/leasehold" (no trailing slash needed) */
	const char *name;    /* plugin name */
	const char *node_id;
	struct plugin_releases releases;
	uint64_t reconcile_wait_ns;     /* wait after election when a status existed */
	uint64_t reconcile_interval_ns; /* periodic reconcile */
	/* this node's candidate priority (published in its member record; a
	 * leader hands over once to a candidate of the newest release with a
	 * strictly higher one) */
	int32_t priority;
	/* instance - this daemon's identity (host name and runtime directory),
	 * published in its state records: a key of this node id under another
	 * lease whose state record names the same instance is an earlier run
	 * of this daemon (a crash restart), not another host (see
	 * election_conflict.c). Copied; NULL or "" = none (every such key is
	 * then taken for another host's). */
	const char *instance;
	/* health (election_health.h): --unhealthy-after and the hold-down
	 * (after 0 = off: the node never withdraws for failed reconciles) */
	struct election_health_config health;
	/* on_change - called (on the loop) after anything observable may have
	 * changed: state, status, readiness, members. May be NULL. */
	void (*on_change)(void *ud);
	void *on_change_ud;
};

/* What the CLI shows for a plugin. Strings are borrowed (valid until the next
 * loop iteration). */
struct election_info {
	enum election_state state;
	const char *leader; /* node id of the current leader, or NULL */
	/* the current leader's fencing token (its key's create_revision), 0
	 * without a leader: a new term of the same node changes it */
	int64_t leader_token;
	bool ready; /* may serve: see election_status_ready and not_ready */
	/* why not ready (NULL when ready): also "no etcd session" and "reading
	 * the state from etcd", since readiness is claimed only from a status
	 * read while the current session holds. Borrowed: valid until the next
	 * election_get_info of this election. */
	const char *not_ready;
	/* the reference's WaitReady rule on the status as mirrored, whether or
	 * not this node can vouch for the view (an observer without a session
	 * uses it; serving decisions use ready) */
	bool status_compatible;
	struct releases releases;
	bool status_present;
	bool status_valid; /* present but not decodable -> false */
	int status_state;  /* LEASEHOLD__RECONCILER_STATUS__STATE__* */
	struct release status_version;
	struct release status_min_compatible;
	uint64_t reconcile_count;
	bool reconcile_last_ok;
	const char *reconcile_last_error; /* NULL if none */
	int64_t reconcile_last_at; /* unix time (s) of the last finished reconcile, 0 = never */
	int64_t fencing_token;     /* our key's create_revision while leading, else 0 */
	uint64_t status_writes;    /* status records written by this node */
	const char *held_back;     /* why standby although eligible otherwise, or NULL */
	/* operator records (election_operator_records.c), as mirrored */
	bool paused;               /* P/N/paused exists (also when it does not decode) */
	const char *pause_error;   /* the pause record does not decode: why, else NULL */
	const char *paused_by;     /* node that wrote it, or NULL */
	int64_t paused_at;         /* unix time (s) of the pause, 0 = unknown */
	int64_t reconcile_requested; /* mod_revision of P/N/reconcile-request, 0 = none */
	int64_t reconcile_served;  /* the request revision the leader last served, 0 = none */
	bool reconcile_served_ok;
	const char *reconcile_served_error; /* NULL if none */
	/* the switchover request (P/N/handover) as mirrored */
	int64_t switchover_rev;       /* its revision, 0 = none in flight */
	const char *switchover_to;    /* its target, NULL = any other node (or none) */
	int64_t switchover_ended_rev; /* the revision of the last request seen to end */
	/* another host runs with our node id: the lease of its election key,
	 * which keeps us out of the election (held_back says so); 0 = none */
	int64_t node_conflict_lease;
	/* the operator's pin (election_pin.c) as mirrored, and the release
	 * rule's answer under it (acting.basis RULE_NONE: none can act) */
	struct rule_pin pin;
	const char *pin_by;    /* NULL = unknown */
	int64_t pin_at;        /* unix s, 0 = unknown */
	const char *pin_error; /* the record does not decode (ignored), else NULL */
	struct rule_answer acting;
	/* health (election_health.h): this node withdrew for a hold-down
	 * ending at unhealthy_until (unix s); reconciles failed in a row (the
	 * count that made it so while unhealthy); times it became unhealthy */
	bool unhealthy;
	int64_t unhealthy_until;
	uint32_t failures_in_row;
	uint64_t unhealthy_total;
};

/* election_new - create the protocol for one plugin. cfg strings are copied.
 * etcd, session and loop are borrowed and must outlive the election. The
 * driver (ops + drv) may be NULL until election_set_driver. Nothing happens
 * until election_start. Returns 0 or -errno. */
int election_new(struct loop *l, struct etcd_client *etcd, struct session *sess,
                 const struct election_config *cfg, struct election **ret);

/* election_driver_host - what to hand the driver for fenced writes (borrowed,
 * valid while the election lives). */
const struct driver_host *election_driver_host(struct election *e);

/* election_set_driver - attach a driver. When one is attached and we lead or
 * campaign, the old driver is drained and deposed and our key deleted first;
 * then the new releases are published in our member record and we rejoin.
 * done(ud) runs on the loop once the old driver is no longer used (the owner
 * may then free it). done may be NULL. */
void election_set_driver(struct election *e, const struct driver_ops *ops, void *drv,
                         const struct plugin_releases *rel, void (*done)(void *ud), void *ud);

/* election_start - begin syncing, member registration and campaigning. */
int election_start(struct election *e);

/* election_hold - hold back (true) or release (false) participation: while
 * held (the node lost the plugin's role), the member record is deleted and
 * we do not campaign: the node leaves the membership on purpose. reason
 * (copied) is shown in the CLI. */
void election_hold(struct election *e, bool hold, const char *reason);

/* election_stop - graceful, leaving for good (the plugin is removed from
 * this node): drain, deposed, delete our election key and our member record,
 * stop watching; then done(ud). The election stays allocated (state
 * STOPPED) until election_free. */
void election_stop(struct election *e, void (*done)(void *ud), void *ud);

/* election_stop_revoking - election_stop for a shutdown whose caller revokes
 * the session's lease right after every election stopped. leave: the node
 * leaves the plugin's membership for good (its member record is deleted, in
 * the resign txn when it campaigns); otherwise the member record stays, so
 * the node keeps counting with its release while it is down. When the election
 * is about to resign (drained, deposed) and last(ud) says it is the last
 * election of the lease still to stop, it leaves its election key and member
 * record to the revocation, which deletes every key of the lease in one
 * revision, instead of writing itself: one etcd write on the way out, none
 * beside the successor's first ones. Earlier elections resign as usual, so a
 * plugin that drains slowly does not hold back the others' handover. */
void election_stop_revoking(struct election *e, bool leave, bool (*last)(void *ud),
                            void (*done)(void *ud), void *ud);

/* election_session_up / election_session_lost - the owner forwards session
 * events to every election. */
void election_session_up(struct election *e, int64_t lease);
void election_session_lost(struct election *e);

/* election_fail - mark failed (reason copied); deposes at once if leading
 * (nothing drained: a failed plugin cannot be waited for) and stops
 * campaigning. The member record stays: the node still has that release
 * installed and may be serving with it. */
void election_fail(struct election *e, const char *reason);
/* election_recover - clear a failure: take part again. */
void election_recover(struct election *e);

/* election_free - free e. A driver may still answer a reconcile or drain it
 * was given (a retired instance that is still stopping): that answer is
 * then ignored. */
void election_free(struct election *e);

void election_get_info(struct election *e, struct election_info *ret);
const char *election_name(const struct election *e);
/* election_pin - the operator's pin as mirrored (!set: none, or its record
 * does not decode) */
struct rule_pin election_pin(const struct election *e);

/* members: node id + release + whether it leads; borrowed until next loop iteration */
struct election_member {
	const char *node_id;
	struct release release;
	bool leader;
	/* it holds an election key now (alive, newest release); a member that
	 * does not may be standby on an older release, down or cut off */
	bool campaigning;
	/* false: the node publishes a state record (P/N/nodes/<id>) but has no
	 * member record (held back by a missing role, or leaving); release
	 * is then the record's */
	bool member;
	/* its state record as mirrored (borrowed like node_id), NULL = none:
	 * the node's lease is gone (down or cut off) or it has not written one */
	const struct node_record *record;
	bool record_invalid; /* a record exists but does not decode */
	/* live election keys carrying this node id, and whether they are more
	 * than one node's runs (two hosts with one node id; a crash restart's
	 * old key is told apart by the state record: node_sessions_conflict) */
	uint32_t sessions;
	bool conflict;
	/* its member record says it withdrew for a hold-down ending at
	 * unhealthy_until (unix s, the node's clock; 0 = unknown) */
	bool unhealthy;
	int64_t unhealthy_until;
};
/* election_members - every member (a valid member record): fills up to max
 * entries, returns the total count */
size_t election_members(struct election *e, struct election_member *out, size_t max);
/* election_rows - the cluster view's rows: the members, then every node
 * that has a state record but no member record (member false); as
 * election_members */
size_t election_rows(struct election *e, struct election_member *out, size_t max);

/* election_forget - an operator removes node_id's member record: the node is
 * gone for good and must no longer hold back an incompatible status change.
 * Checked before anything changes: -EAGAIN (not synced yet), -EINVAL (the
 * local node: it leaves by losing the plugin file or role), -ENOENT (no such
 * member), -EBUSY (the node campaigns, so it is alive and would register
 * again); the message is in err. The delete compares the record's
 * mod_revision as mirrored, so a node that registered again meanwhile is not
 * forgotten. Returns 0 when started: done(ud, err) then runs exactly once on
 * the loop, with 0, -ESTALE (the record changed since) or an etcd error; it
 * may run after election_free (it touches no election). */
int election_forget(struct election *e, const char *node_id, void (*done)(void *ud, int err),
                    void *ud, char *err, size_t err_len);

/* ---- operator verbs (election_operator_records.c) ---- */

/* election_release_pin - pin this plugin at rel (unpin: delete the pin)
 * after checking it against the plugin's records in etcd, on this
 * election's etcd client and in its node's name (election_pin_request.h:
 * done's contract). 0 when started, or -errno (done never runs). */
int election_release_pin(struct election *e, bool unpin, struct release rel, bool force,
                         pin_done_fn done, void *ud);

/* election_pause - pause (true) or resume (false) the plugin cluster-wide:
 * put or delete P/N/paused (not fenced: any node running the plugin may).
 * Returns 0 when started: done(ud, err) then runs exactly once on the loop,
 * never before election_pause returns, and may run after election_free (it
 * touches no election); or -errno with the reason in err. */
int election_pause(struct election *e, bool pause, void (*done)(void *ud, int err), void *ud,
                   char *err, size_t err_len);

/* election_request_reconcile - ask the leader, wherever it runs, for one
 * reconcile: put P/N/reconcile-request. Refused (-EBUSY, reason in err)
 * while the plugin is paused, -EAGAIN before the first read from etcd.
 * Returns 0 when started: done(ud, err, rev) runs as for election_pause,
 * rev being the request's revision: it is served once
 * election_info.reconcile_served >= rev. */
int election_request_reconcile(struct election *e, void (*done)(void *ud, int err, int64_t rev),
                               void *ud, char *err, size_t err_len);

/* The same verbs without an election, for a client that is no member
 * (leaseholdctl in observer mode): plugin name under prefix, the records
 * naming `by` as the requester. As above; election_request_reconcile_at
 * checks nothing (the caller checks the pause first). */
int election_pause_at(struct etcd_client *c, const char *prefix, const char *name,
                      const char *by, bool pause, void (*done)(void *ud, int err), void *ud,
                      char *err, size_t err_len);
int election_request_reconcile_at(struct etcd_client *c, const char *prefix, const char *name,
                                  const char *by, void (*done)(void *ud, int err, int64_t rev),
                                  void *ud, char *err, size_t err_len);

/* One term of the plugin's leadership history (strings borrowed for the
 * callback only). */
struct election_term {
	bool valid;          /* false: the record does not decode (only token is known) */
	const char *node;
	struct release release;
	int64_t token;       /* fencing token (the leader's election key's create_revision) */
	int64_t start_rev;   /* revision the record was created at */
	int64_t start_unix;
	int64_t end_rev;     /* revision its end was recorded at, 0 = not ended */
	int64_t end_unix;
	const char *end_reason; /* "" while not ended; see election_term_end_name */
	const char *end_detail; /* "" if none */
};
/* election_term_end_name - the end reason's name (proto Term.EndReason) */
const char *election_term_end_name(int reason);

/* reasons 0 .. ELECTION_TERM_END_SLOTS - 1 are counted (proto Term.EndReason
 * values; a value beyond is counted as 0, and 0 is no reason) */
#define ELECTION_TERM_END_SLOTS 16
/* election_terms_ended - terms this node led that ended for `reason` (a
 * Term.EndReason value), since the election was created; each term counts
 * once, when this node records its end. Loop thread. */
uint64_t election_terms_ended(const struct election *e, int reason);
/* election_rollout_blockers - members that keep the plugin's newest member
 * release from leading: they run a release below its
 * min_compatible_release, while the status does not allow its change yet
 * (the release rule, election_release_rule.h). 0 when the newest member
 * release may campaign (or no member, or the reference rule makes it
 * campaign anyway). Loop thread. */
size_t election_rollout_blockers(const struct election *e);

/* election_history - read the term history (P/N/term-history/, at most 100
 * records) from etcd; done(ud, err, terms, n) runs once on the loop, newest
 * term first, never before election_history returns; it may run after
 * election_free. Returns 0 or -errno. */
int election_history(struct election *e,
                     void (*done)(void *ud, int err, const struct election_term *terms, size_t n),
                     void *ud);
/* election_history_at - the same for plugin name under prefix (observer
 * mode) */
int election_history_at(struct etcd_client *c, const char *prefix, const char *name,
                        void (*done)(void *ud, int err, const struct election_term *terms,
                                     size_t n),
                        void *ud);

#endif
