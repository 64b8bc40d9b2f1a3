/* SPDX-License-Identifier: MIT */
/*
 * election_backoff.c - the election's side of this node's health
 * (election_health.h): every finished reconcile counts; at the limit the
 * node becomes unhealthy, which the release rule reads from its member
 * record (election_release_rule.h), and a timer ends the hold-down. What
 * follows from it is level-triggered like the rest of the controller:
 * election_step sees that the rule no longer lets an unhealthy node
 * campaign, a leader leaves through the drain (term end "unhealthy") and
 * the resign txn publishes the record; after the hold-down the record is
 * put again and the node campaigns.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "election/election_internal.h"
#include "base/log.h"

bool election_backoff_result(struct election *e, int err, const char *msg)
{
	if (err != 0 && etcd_client_unreachable(e->etcd)) {
		/* etcd is out of reach: every node's reconciles fail alike, and the
		 * plugin is not to blame; the count neither grows nor resets */
		log_debug("election", "%s: reconcile failed while etcd is unreachable: not counted "
		          "against this node's health", e->name);
		return false;
	}
	if (err != 0)
		snprintf(e->health_last_error, sizeof(e->health_last_error), "%s",
		         msg && *msg ? msg : etcd_strerror(err));
	uint64_t now = loop_now();
	if (!election_health_result(&e->health, err == 0, now))
		return false;
	uint64_t hold = e->health.until - now;
	e->unhealthy_until_unix = (int64_t)time(NULL) + (int64_t)((hold + LOOP_NS_PER_S - 1) / LOOP_NS_PER_S);
	loop_timer_arm_in(e->health_timer, hold);
	char n[16], h[32];
	snprintf(n, sizeof(n), "%u", e->health.failures);
	snprintf(h, sizeof(h), "%llu", (unsigned long long)(hold / LOOP_NS_PER_MS));
	const struct log_field f[] = {{"failures", n, true}, {"hold_down_ms", h, true},
	                              {"error", e->health_last_error, false}};
	log_msg_fields(LOG_LVL_WARN, "election", e->name, f, 3,
	               "%s: unhealthy for %s ms: %s reconciles failed in a row (last: %s); this node "
	               "withdraws while a healthy one can lead",
	               e->name, h, n, e->health_last_error);
	return true;
}

void election_backoff_on_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (!election_health_tick(&e->health, loop_now())) {
		if (e->health.unhealthy)
			loop_timer_arm_in(e->health_timer, e->health.until - loop_now());
		return;
	}
	e->unhealthy_until_unix = 0;
	log_info("election", "%s: the hold-down ended: healthy again, taking part", e->name);
	election_step(e);
}

void election_backoff_explain(const struct election *e, char *buf, size_t len)
{
	struct tm tm;
	time_t until = (time_t)e->unhealthy_until_unix;
	char at[32] = "?";
	if (gmtime_r(&until, &tm))
		strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(buf, len, "unhealthy until %s: %u reconciles failed in a row (last: %s)", at,
	         e->health.failures, e->health_last_error);
}
