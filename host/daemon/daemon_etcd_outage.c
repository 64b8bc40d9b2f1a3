/* SPDX-License-Identifier: MIT */
/* daemon_etcd_outage.c - see daemon_etcd_outage.h; and the daemon's etcd
 * observer, which feeds it and the metrics (host_metrics_etcd_observer). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "base/log.h"
#include "daemon/daemon_etcd_outage.h"

#include "daemon/daemon_internal.h"

struct daemon_etcd_outage {
	const struct etcd_client *etcd;
	struct loop_timer *timer; /* the next "still unreachable" line */
	uint64_t report_ns;
	uint64_t since; /* loop time the outage began, 0: none */
	uint64_t ended; /* loop time the last one ended, 0: none yet */
	int last_err;
	uint64_t fails; /* requests failed since it began */
};

static double daemon_etcd_outage_seconds(const struct daemon_etcd_outage *o)
{
	return (double)(loop_now() - o->since) / 1e9;
}

static void daemon_etcd_outage_on_timer(struct loop_timer *t, void *ud)
{
	struct daemon_etcd_outage *o = ud;
	if (!o->since)
		return;
	log_warn("etcd", "etcd still unreachable after %.0f s: %s (%" PRIu64 " requests failed)",
	         daemon_etcd_outage_seconds(o), etcd_strerror(o->last_err), o->fails);
	loop_timer_arm_in(t, o->report_ns);
}

void daemon_etcd_outage_call_done(struct daemon_etcd_outage *o, const char *op, int err,
                                  uint64_t elapsed_ns)
{
	if (err == -ECANCELED)
		return;
	uint64_t now = loop_now(), sent = elapsed_ns < now ? now - elapsed_ns : 0;
	if (etcd_err_unreachable(err)) {
		/* a request sent before the last outage ended failed late (a
		 * dead connection's timeout): it belongs to that outage */
		if (!o->since && sent < o->ended)
			return;
		o->last_err = err;
		o->fails++;
		if (o->since)
			return;
		o->since = loop_now();
		log_warn("etcd", "etcd unreachable: %s (%s, at %s); retrying, reported every %.0f s "
		         "while it lasts", etcd_strerror(err), op,
		         o->etcd ? etcd_client_endpoint(o->etcd) : "?", (double)o->report_ns / 1e9);
		loop_timer_arm_in(o->timer, o->report_ns);
		return;
	}
	if (!o->since || sent < o->since)
		return;
	log_info("etcd", "etcd reachable again after %.1f s (%" PRIu64 " requests failed meanwhile)",
	         daemon_etcd_outage_seconds(o), o->fails);
	o->since = 0;
	o->ended = now;
	o->fails = 0;
	loop_timer_disarm(o->timer);
}

bool daemon_etcd_outage_active(const struct daemon_etcd_outage *o)
{
	return o->since != 0;
}

int daemon_etcd_outage_new(struct loop *l, const struct etcd_client *etcd, uint64_t report_ns,
                           struct daemon_etcd_outage **ret)
{
	struct daemon_etcd_outage *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->etcd = etcd;
	o->report_ns = report_ns;
	int r = loop_timer_new(l, daemon_etcd_outage_on_timer, o, &o->timer);
	if (r < 0) {
		free(o);
		return r;
	}
	*ret = o;
	return 0;
}

void daemon_etcd_outage_free(struct daemon_etcd_outage *o)
{
	if (!o)
		return;
	loop_timer_free(o->timer);
	free(o);
}

/* ---- the daemon's etcd observer ---- */

static void daemon_etcd_outage_observe_call(void *ud, const char *op, int err, uint64_t elapsed_ns)
{
	struct daemon *d = ud;
	host_metrics_etcd_observer.call_done(&d->hm, op, err, elapsed_ns);
	daemon_etcd_outage_call_done(d->outage, op, err, elapsed_ns);
}

static void daemon_etcd_outage_observe_watch(void *ud, int err)
{
	struct daemon *d = ud;
	host_metrics_etcd_observer.watch_ended(&d->hm, err);
}

static const struct etcd_observer_ops daemon_etcd_observer = {
	.call_done = daemon_etcd_outage_observe_call,
	.watch_ended = daemon_etcd_outage_observe_watch,
};

int daemon_etcd_outage_start(struct daemon *d)
{
	int r = daemon_etcd_outage_new(d->loop, d->etcd, DAEMON_ETCD_OUTAGE_REPORT_NS, &d->outage);
	if (r < 0)
		return r;
	etcd_client_set_observer(d->etcd, &daemon_etcd_observer, d);
	return 0;
}
