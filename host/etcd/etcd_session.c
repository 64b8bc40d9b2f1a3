/* SPDX-License-Identifier: MIT */
/*
 * etcd_session.c - see etcd_session.h for the design notes.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "base/log.h"
#include "etcd/etcd_session.h"

enum sess_state { S_IDLE, S_GRANTING, S_UP, S_REVOKING, S_CLOSED };

/* leases lost locally that etcd has not yet confirmed gone; more than this
 * many means etcd answers grants but never revokes: the oldest is left to
 * its TTL */
#define MAX_OLD_LEASES 8

/* A lost lease being revoked until etcd confirms (revoked or not found). */
struct old_lease {
	struct session *s;
	int64_t id;
	struct etcd_call *call;
	struct loop_timer *retry;
	struct old_lease *next;
};

struct session {
	struct loop *loop;
	struct etcd_client *etcd;
	int64_t ttl_s;
	struct session_ops ops;
	void *ud;

	enum sess_state state;
	int64_t lease;
	int64_t granted_ttl;
	uint64_t safe_until;
	uint64_t sent_at; /* send time of the request in flight */
	struct etcd_call *call;
	struct loop_timer *renew_timer;    /* next keepalive / next grant attempt */
	struct loop_timer *deadline_timer; /* safe_until */
	uint64_t backoff_ns;
	struct old_lease *old; /* newest first */
	size_t n_old;

	void (*revoke_done)(void *, int);
	void *revoke_ud;
};

static uint64_t session_margin_ns(int64_t ttl)
{
	uint64_t m = (uint64_t)ttl * LOOP_NS_PER_S / 5;
	return m > LOOP_NS_PER_S ? LOOP_NS_PER_S : m;
}

/* One attempt of a session request: long enough for a loaded etcd, short
 * enough that a request stuck on a member whose raft leader just died is
 * sent again (elsewhere) well inside the TTL. etcd elects a new raft leader
 * within 1-2 election timeouts (1 s by default), so more than 2 s per
 * attempt buys nothing even at a long TTL. */
static uint32_t session_attempt_ms(int64_t ttl)
{
	uint64_t ms = (uint64_t)ttl * 1000 / 6;
	return ms > 2000 ? 2000 : (uint32_t)ms;
}

/* the options of a session request: deadline total_ms, attempts and
 * "refuse when leaderless" as above */
static struct etcd_call_opts session_req_opts(int64_t ttl, uint64_t total_ms)
{
	return (struct etcd_call_opts){.timeout_ms = (uint32_t)total_ms,
	                               .attempt_timeout_ms = session_attempt_ms(ttl),
	                               .require_leader = true};
}

/* a grant or the revocation of a lost lease: the TTL, at most 10 s (a
 * failed one is simply asked again) */
static uint64_t session_retried_request_ms(int64_t ttl)
{
	uint64_t ms = (uint64_t)ttl * 1000;
	return ms > 10000 ? 10000 : ms;
}

static uint64_t session_max_backoff_ns(int64_t ttl)
{
	uint64_t third = (uint64_t)ttl * LOOP_NS_PER_S / 3;
	return third < 2 * LOOP_NS_PER_S ? third : 2 * LOOP_NS_PER_S;
}

static void session_grant(struct session *s);
static void session_keepalive(struct session *s);
static void session_old_lease_revoke(struct old_lease *o);

static void session_old_lease_free(struct old_lease *o)
{
	struct session *s = o->s;
	for (struct old_lease **pp = &s->old; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			s->n_old--;
			break;
		}
	etcd_call_cancel(o->call);
	loop_timer_free(o->retry);
	free(o);
}

static void session_on_old_revoked(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct old_lease *o = ud;
	(void)c;
	(void)r;
	o->call = NULL;
	if (err == 0 || err == -ENOENT) {
		log_info("session", "lost lease %" PRIx64 " is gone from etcd (%s), with its keys",
		         (uint64_t)o->id, err == 0 ? "revoked" : "expired");
		session_old_lease_free(o);
		return;
	}
	log_debug("session", "revoking lost lease %" PRIx64 " failed: %s; again in %" PRIu32 " ms",
	          (uint64_t)o->id, etcd_strerror(err), session_attempt_ms(o->s->ttl_s));
	loop_timer_arm_in(o->retry, (uint64_t)session_attempt_ms(o->s->ttl_s) * LOOP_NS_PER_MS);
}

static void session_old_lease_revoke(struct old_lease *o)
{
	struct session *s = o->s;
	struct etcd_call_opts opts = session_req_opts(s->ttl_s, session_retried_request_ms(s->ttl_s));
	if (etcd_lease_revoke(s->etcd, o->id, &opts, session_on_old_revoked, o, &o->call) < 0)
		loop_timer_arm_in(o->retry, (uint64_t)session_attempt_ms(s->ttl_s) * LOOP_NS_PER_MS);
}

static void session_on_old_retry(struct loop_timer *t, void *ud)
{
	struct old_lease *o = ud;
	(void)t;
	if (!o->call)
		session_old_lease_revoke(o);
}

/* session_revoke_lost - revoke a lease we no longer hold until etcd confirms: its
 * election key would otherwise stay the lowest one and block the election
 * until etcd expires it, and etcd renews every lease when it elects a new
 * raft leader (the very fault that makes us lose it) */
static void session_revoke_lost(struct session *s, int64_t id)
{
	if (s->n_old >= MAX_OLD_LEASES) {
		struct old_lease *last = s->old;
		while (last->next)
			last = last->next;
		log_warn("session", "lost lease %" PRIx64 " left to expire by itself: etcd has not "
		         "confirmed %zu revocations", (uint64_t)last->id, s->n_old);
		session_old_lease_free(last);
	}
	struct old_lease *o = calloc(1, sizeof(*o));
	if (o && loop_timer_new(s->loop, session_on_old_retry, o, &o->retry) < 0) {
		free(o);
		o = NULL;
	}
	if (!o) {
		log_warn("session", "lost lease %" PRIx64 " left to expire by itself: out of memory",
		         (uint64_t)id);
		return;
	}
	o->s = s;
	o->id = id;
	o->next = s->old;
	s->old = o;
	s->n_old++;
	session_old_lease_revoke(o);
}

static void session_go_lost(struct session *s, const char *why)
{
	int64_t old = s->lease;
	etcd_call_cancel(s->call);
	s->call = NULL;
	loop_timer_disarm(s->deadline_timer);
	s->state = S_IDLE;
	s->safe_until = 0;
	s->lease = 0;
	log_warn("session", "lease %" PRIx64 " lost: %s", (uint64_t)old, why);
	if (old)
		session_revoke_lost(s, old);
	s->ops.lost(s->ud, old, why);
	if (s->state == S_IDLE) {
		s->backoff_ns = 100 * LOOP_NS_PER_MS;
		loop_timer_arm_in(s->renew_timer, 0);
	}
}

static void session_on_deadline(struct loop_timer *t, void *ud)
{
	struct session *s = ud;
	(void)t;
	if (s->state == S_UP)
		session_go_lost(s, "local deadline passed without an acknowledged keepalive");
}

static void session_set_safe(struct session *s, uint64_t sent_at, int64_t ttl)
{
	uint64_t until = sent_at + (uint64_t)ttl * LOOP_NS_PER_S - session_margin_ns(ttl);
	if (until > s->safe_until)
		s->safe_until = until;
	loop_timer_arm_at(s->deadline_timer, s->safe_until);
}

static void session_schedule_keepalive(struct session *s)
{
	uint64_t period = (uint64_t)s->granted_ttl * LOOP_NS_PER_S / 3;
	loop_timer_arm_at(s->renew_timer, s->sent_at + period);
}

static void session_on_keepalive(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct session *s = ud;
	(void)c;
	s->call = NULL;
	if (s->state != S_UP)
		return;
	if (err == -ENOENT || (err == 0 && r->ttl <= 0)) {
		session_go_lost(s, "etcd says the lease expired");
		return;
	}
	if (err < 0) {
		/* transient (every endpoint tried): again soon, the deadline
		 * timer guards safety */
		log_debug("session", "keepalive failed: %s", etcd_strerror(err));
		loop_timer_arm_in(s->renew_timer, 100 * LOOP_NS_PER_MS);
		return;
	}
	s->granted_ttl = r->ttl;
	session_set_safe(s, s->sent_at, r->ttl);
	session_schedule_keepalive(s);
}

static void session_keepalive(struct session *s)
{
	s->sent_at = loop_now();
	/* the schedule of keepalives is observable in a debug log (the HTTP
	 * load test checks it) */
	log_debug("session", "keepalive sent for lease %" PRIx64, (uint64_t)s->lease);
	/* no use waiting past the deadline: the lease counts as lost then */
	uint64_t left_ms = s->safe_until > s->sent_at ? (s->safe_until - s->sent_at) / LOOP_NS_PER_MS : 0;
	uint64_t third_ms = (uint64_t)s->granted_ttl * 1000 / 3;
	struct etcd_call_opts o = session_req_opts(s->granted_ttl, left_ms > third_ms ? left_ms : third_ms);
	int r = etcd_lease_keepalive(s->etcd, s->lease, &o, session_on_keepalive, s, &s->call);
	if (r < 0)
		loop_timer_arm_in(s->renew_timer, 100 * LOOP_NS_PER_MS);
}

static void session_on_grant(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct session *s = ud;
	(void)c;
	s->call = NULL;
	if (s->state != S_GRANTING)
		return;
	if (err < 0 || r->lease_id == 0 || r->ttl <= 0) {
		/* etcd unreachable: the daemon reports the outage once */
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "session",
		        "lease grant failed: %s; retrying in %" PRIu64 " ms",
		         err < 0 ? etcd_strerror(err) : "no lease in response",
		         s->backoff_ns / LOOP_NS_PER_MS);
		s->state = S_IDLE;
		loop_timer_arm_in(s->renew_timer, s->backoff_ns);
		uint64_t cap = session_max_backoff_ns(s->ttl_s);
		s->backoff_ns = s->backoff_ns * 2 > cap ? cap : s->backoff_ns * 2;
		return;
	}
	s->state = S_UP;
	s->lease = r->lease_id;
	s->granted_ttl = r->ttl;
	s->safe_until = 0;
	session_set_safe(s, s->sent_at, r->ttl);
	session_schedule_keepalive(s);
	log_info("session", "lease %" PRIx64 " granted, ttl %" PRId64 " s", (uint64_t)s->lease, r->ttl);
	/* etcd answers again: a lost lease waiting for its next try goes now
	 * (its key is the one our new campaign waits behind) */
	for (struct old_lease *o = s->old; o; o = o->next)
		if (!o->call)
			loop_timer_arm_in(o->retry, 0);
	s->ops.up(s->ud, s->lease);
}

static void session_grant(struct session *s)
{
	s->state = S_GRANTING;
	s->sent_at = loop_now();
	struct etcd_call_opts o = session_req_opts(s->ttl_s, session_retried_request_ms(s->ttl_s));
	int r = etcd_lease_grant(s->etcd, s->ttl_s, &o, session_on_grant, s, &s->call);
	if (r < 0) {
		s->state = S_IDLE;
		loop_timer_arm_in(s->renew_timer, s->backoff_ns);
	}
}

static void session_on_renew_timer(struct loop_timer *t, void *ud)
{
	struct session *s = ud;
	(void)t;
	if (s->call)
		return;
	if (s->state == S_IDLE)
		session_grant(s);
	else if (s->state == S_UP)
		session_keepalive(s);
}

int session_new(struct loop *l, struct etcd_client *etcd, int64_t ttl_s,
                const struct session_ops *ops, void *ud, struct session **ret)
{
	if (ttl_s < 2)
		return -EINVAL;
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = l;
	s->etcd = etcd;
	s->ttl_s = ttl_s;
	s->ops = *ops;
	s->ud = ud;
	s->backoff_ns = 100 * LOOP_NS_PER_MS;
	int r = loop_timer_new(l, session_on_renew_timer, s, &s->renew_timer);
	if (r == 0)
		r = loop_timer_new(l, session_on_deadline, s, &s->deadline_timer);
	if (r < 0) {
		session_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void session_start(struct session *s)
{
	if (s->state == S_IDLE && !s->call)
		session_grant(s);
}

static void session_on_revoke(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct session *s = ud;
	(void)c;
	(void)r;
	s->call = NULL;
	s->state = S_CLOSED;
	s->lease = 0;
	s->safe_until = 0;
	if (err == -ENOENT)
		err = 0; /* already gone: its keys are gone too */
	if (s->revoke_done)
		s->revoke_done(s->revoke_ud, err);
}

void session_revoke(struct session *s, void (*done)(void *ud, int err), void *ud)
{
	etcd_call_cancel(s->call);
	s->call = NULL;
	loop_timer_disarm(s->renew_timer);
	loop_timer_disarm(s->deadline_timer);
	s->revoke_done = done;
	s->revoke_ud = ud;
	if (s->state != S_UP || !s->lease) {
		s->state = S_CLOSED;
		if (done)
			done(ud, 0);
		return;
	}
	s->state = S_REVOKING;
	/* two attempts, at least 2 s: a shutdown does not wait long for an
	 * etcd it cannot reach (the lease and its keys then expire) */
	uint64_t two = 2 * (uint64_t)session_attempt_ms(s->granted_ttl);
	struct etcd_call_opts o = session_req_opts(s->granted_ttl, two < 2000 ? 2000 : two);
	int r = etcd_lease_revoke(s->etcd, s->lease, &o, session_on_revoke, s, &s->call);
	if (r < 0) {
		s->state = S_CLOSED;
		if (done)
			done(ud, r);
	}
}

void session_free(struct session *s)
{
	if (!s)
		return;
	etcd_call_cancel(s->call);
	while (s->old)
		session_old_lease_free(s->old);
	loop_timer_free(s->renew_timer);
	loop_timer_free(s->deadline_timer);
	free(s);
}

void session_poke(struct session *s)
{
	if (s->state == S_UP && !s->call)
		session_keepalive(s);
}

bool session_is_up(const struct session *s)
{
	return s->state == S_UP && loop_now() < s->safe_until;
}

int64_t session_lease(const struct session *s)
{
	return s->state == S_UP ? s->lease : 0;
}

uint64_t session_safe_until(const struct session *s)
{
	return s->state == S_UP ? s->safe_until : 0;
}

int64_t session_ttl(const struct session *s)
{
	return s->state == S_UP ? s->granted_ttl : 0;
}

uint32_t session_request_timeout_ms(const struct session *s)
{
	int64_t ttl = s->granted_ttl ? s->granted_ttl : s->ttl_s;
	uint64_t ms = (uint64_t)ttl * 1000 / 3;
	return ms < 1000 ? 1000 : ms > 2000 ? 2000 : (uint32_t)ms;
}
