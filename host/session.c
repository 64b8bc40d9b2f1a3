#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "log.h"
#include "session.h"

enum sess_state { S_IDLE, S_GRANTING, S_UP, S_REVOKING, S_CLOSED };

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

	void (*revoke_done)(void *, int);
	void *revoke_ud;
};

static uint64_t margin_ns(int64_t ttl)
{
	uint64_t m = (uint64_t)ttl * LOOP_NS_PER_S / 5;
	return m > LOOP_NS_PER_S ? LOOP_NS_PER_S : m;
}

static void grant(struct session *s);

static void ignore_reply(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)err;
	(void)r;
	(void)ud;
}
static void keepalive(struct session *s);

static void go_lost(struct session *s, const char *why)
{
	int64_t old = s->lease;
	etcd_call_cancel(s->call);
	s->call = NULL;
	loop_timer_disarm(s->deadline_timer);
	s->state = S_IDLE;
	s->safe_until = 0;
	s->lease = 0;
	log_warn("session", "lease %" PRIx64 " lost: %s", (uint64_t)old, why);
	if (old) /* best effort: free the old lease's keys now rather than at its TTL */
		etcd_lease_revoke(s->etcd, old, NULL, ignore_reply, NULL, NULL);
	s->ops.lost(s->ud, old, why);
	if (s->state == S_IDLE) {
		s->backoff_ns = 100 * LOOP_NS_PER_MS;
		loop_timer_arm_in(s->renew_timer, 0);
	}
}

static void on_deadline(struct loop_timer *t, void *ud)
{
	struct session *s = ud;
	(void)t;
	if (s->state == S_UP)
		go_lost(s, "local deadline passed without an acknowledged keepalive");
}

static void set_safe(struct session *s, uint64_t sent_at, int64_t ttl)
{
	uint64_t until = sent_at + (uint64_t)ttl * LOOP_NS_PER_S - margin_ns(ttl);
	if (until > s->safe_until)
		s->safe_until = until;
	loop_timer_arm_at(s->deadline_timer, s->safe_until);
}

static void schedule_keepalive(struct session *s)
{
	uint64_t period = (uint64_t)s->granted_ttl * LOOP_NS_PER_S / 3;
	loop_timer_arm_at(s->renew_timer, s->sent_at + period);
}

static void on_keepalive(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct session *s = ud;
	(void)c;
	s->call = NULL;
	if (s->state != S_UP)
		return;
	if (err == -ENOENT || (err == 0 && r->ttl <= 0)) {
		go_lost(s, "etcd says the lease expired");
		return;
	}
	if (err < 0) {
		/* transient: retry soon, the deadline timer guards safety */
		log_debug("session", "keepalive failed: %s", etcd_strerror(err));
		uint64_t retry = 200 * LOOP_NS_PER_MS;
		loop_timer_arm_in(s->renew_timer, retry);
		return;
	}
	s->granted_ttl = r->ttl;
	set_safe(s, s->sent_at, r->ttl);
	schedule_keepalive(s);
}

static void keepalive(struct session *s)
{
	s->sent_at = loop_now();
	/* the schedule of keepalives is observable in a debug log (the HTTP
	 * load test checks it) */
	log_debug("session", "keepalive sent for lease %" PRIx64, (uint64_t)s->lease);
	struct etcd_call_opts o = {.timeout_ms = (uint32_t)(s->granted_ttl * 1000 / 3)};
	int r = etcd_lease_keepalive(s->etcd, s->lease, &o, on_keepalive, s, &s->call);
	if (r < 0)
		loop_timer_arm_in(s->renew_timer, 200 * LOOP_NS_PER_MS);
}

static void on_grant(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct session *s = ud;
	(void)c;
	s->call = NULL;
	if (s->state != S_GRANTING)
		return;
	if (err < 0 || r->lease_id == 0 || r->ttl <= 0) {
		log_warn("session", "lease grant failed: %s; retrying in %" PRIu64 " ms",
		         err < 0 ? etcd_strerror(err) : "no lease in response",
		         s->backoff_ns / LOOP_NS_PER_MS);
		s->state = S_IDLE;
		loop_timer_arm_in(s->renew_timer, s->backoff_ns);
		s->backoff_ns = s->backoff_ns * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
		                                                       : s->backoff_ns * 2;
		return;
	}
	s->state = S_UP;
	s->lease = r->lease_id;
	s->granted_ttl = r->ttl;
	s->safe_until = 0;
	set_safe(s, s->sent_at, r->ttl);
	schedule_keepalive(s);
	log_info("session", "lease %" PRIx64 " granted, ttl %" PRId64 " s", (uint64_t)s->lease, r->ttl);
	s->ops.up(s->ud, s->lease);
}

static void grant(struct session *s)
{
	s->state = S_GRANTING;
	s->sent_at = loop_now();
	int r = etcd_lease_grant(s->etcd, s->ttl_s, NULL, on_grant, s, &s->call);
	if (r < 0) {
		s->state = S_IDLE;
		loop_timer_arm_in(s->renew_timer, s->backoff_ns);
	}
}

static void on_renew_timer(struct loop_timer *t, void *ud)
{
	struct session *s = ud;
	(void)t;
	if (s->call)
		return;
	if (s->state == S_IDLE)
		grant(s);
	else if (s->state == S_UP)
		keepalive(s);
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
	int r = loop_timer_new(l, on_renew_timer, s, &s->renew_timer);
	if (r == 0)
		r = loop_timer_new(l, on_deadline, s, &s->deadline_timer);
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
		grant(s);
}

static void on_revoke(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
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
	struct etcd_call_opts o = {.timeout_ms = 2000};
	int r = etcd_lease_revoke(s->etcd, s->lease, &o, on_revoke, s, &s->call);
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
	loop_timer_free(s->renew_timer);
	loop_timer_free(s->deadline_timer);
	free(s);
}

void session_poke(struct session *s)
{
	if (s->state == S_UP && !s->call)
		keepalive(s);
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
	return s->granted_ttl;
}
