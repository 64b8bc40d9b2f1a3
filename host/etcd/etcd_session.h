/* SPDX-License-Identifier: MIT */
/*
 * etcd_session.h - the node's etcd session: one lease, kept alive by one POST per
 * renewal at TTL/3, and a LOCAL deadline.
 *
 * Design notes
 * - safe_until = (send time of the last acknowledged keepalive, or of the
 *   grant) + granted TTL - margin, on CLOCK_BOOTTIME. etcd received the
 *   request after we sent it, so the lease on the server lives at least until
 *   send time + TTL; past safe_until we can no longer be sure we hold it, and
 *   the session reports `lost` even if etcd is unreachable. margin =
 *   min(1 s, TTL/5).
 * - After `lost`, a new lease is granted (backoff 100 ms doubling to
 *   min(2 s, TTL/3)); `up` reports the new lease. Meanwhile the old lease is
 *   revoked until etcd confirms it gone (revoked, or "not found": expired),
 *   again every attempt time after a failure: our election key under it
 *   would otherwise stay the lowest and block every campaign until etcd
 *   expires the lease, and etcd renews every lease by a full TTL when it
 *   elects a new raft leader. Keys of ours written under the new lease are
 *   not touched by that revocation (a put moves a key to the new lease).
 * - Every request's time is derived from the TTL, none uses the client's
 *   default: each attempt gets TTL/6 (at most 2 s) and is sent with
 *   "refuse when leaderless"; an unanswered or "unavailable" attempt is sent
 *   again on the next endpoint (etcd_call_opts). Per request: keepalive until
 *   safe_until (at least TTL/3); grant TTL, at most 10 s; revoke of a lost
 *   lease the same per try (tried again one attempt time later, or at once
 *   when a grant succeeds); session_revoke two attempts, at least 2 s.
 * - All callbacks run on the loop thread.
 */
#ifndef LH_SESSION_H
#define LH_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "base/loop.h"

struct session;

struct session_ops {
	/* a lease is held (first time, or again after `lost`) */
	void (*up)(void *ud, int64_t lease_id);
	/* the lease is gone or no longer provably held: stop leading NOW */
	void (*lost)(void *ud, int64_t old_lease_id, const char *why);
};

/* session_new - ttl_s >= 2. Nothing happens until session_start. The etcd
 * client and loop are borrowed and must outlive the session. */
int session_new(struct loop *l, struct etcd_client *etcd, int64_t ttl_s,
                const struct session_ops *ops, void *ud, struct session **ret);
void session_start(struct session *s);
/* session_revoke - stop renewing, revoke the lease (deleting its keys), then
 * done(ud, err) from the loop. No `lost` is reported for a revoke. */
void session_revoke(struct session *s, void (*done)(void *ud, int err), void *ud);
void session_free(struct session *s);
/* session_poke - someone saw evidence the lease may be gone (an etcd call
 * answered "lease not found"): send a keepalive now instead of at TTL/3. */
void session_poke(struct session *s);

bool session_is_up(const struct session *s);
int64_t session_lease(const struct session *s);
/* loop_now() time until which the lease is provably held (0 when down) */
uint64_t session_safe_until(const struct session *s);
/* session_ttl - the TTL etcd granted the lease, in seconds (0 when down) */
int64_t session_ttl(const struct session *s);
/* session_request_timeout_ms - the deadline for a request made on behalf of
 * the lease by others (a leader's fenced write): TTL/3 (the keepalive period),
 * at least 1 s, at most 2 s. A request that lands on a member whose raft
 * leader just died waits there for etcd's own timeout (about 7 s) even once
 * a new raft leader exists (within 1-2 election timeouts, 1 s by default);
 * an answer that late is of no use to the term that asked (by then the
 * session may be lost), while the caller, told "outcome unknown" earlier,
 * reads back or tries again. */
uint32_t session_request_timeout_ms(const struct session *s);

#endif
