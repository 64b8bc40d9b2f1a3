/* SPDX-License-Identifier: MIT */
/*
 * daemon_etcd_outage.c - one account of an etcd outage in the log: a line
 * when requests start failing for want of etcd (every endpoint refused or
 * did not answer in time: etcd_err_unreachable), one a minute while that
 * lasts, with its duration, and one when etcd answers again. The modules
 * that retry on their own (session, elections, roles, watches,
 * configuration mirrors) log such failures at debug only, so an outage
 * does not repeat itself every retry. Loop thread only.
 *
 * Design notes
 * - The daemon's etcd observer sees every request that ends
 *   (etcd_observer_ops): an unreachable etcd starts an outage, any answer
 *   of etcd ends it (an error etcd sent is an answer: it is reachable).
 *   Cancelled requests say nothing either way.
 * - The observer also feeds the metrics (host_metrics_etcd_observer).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>

#include "base/log.h"
#include "base/loop.h"
#include "etcd/etcd.h"

#include "daemon/daemon_internal.h"

#define OUTAGE_REPORT_NS (60 * LOOP_NS_PER_S)

static double daemon_etcd_outage_seconds(const struct daemon *d)
{
	return (double)(loop_now() - d->etcd_down_since) / 1e9;
}

static void daemon_etcd_outage_on_timer(struct loop_timer *t, void *ud)
{
	struct daemon *d = ud;
	if (!d->etcd_down_since)
		return;
	log_warn("etcd", "etcd still unreachable after %.0f s: %s (%" PRIu64 " requests failed)",
	         daemon_etcd_outage_seconds(d), etcd_strerror(d->etcd_down_err), d->etcd_down_fails);
	loop_timer_arm_in(t, OUTAGE_REPORT_NS);
}

static void daemon_etcd_outage_call_done(void *ud, const char *op, int err, uint64_t elapsed_ns)
{
	struct daemon *d = ud;
	host_metrics_etcd_observer.call_done(&d->hm, op, err, elapsed_ns);
	if (err == -ECANCELED)
		return;
	if (etcd_err_unreachable(err)) {
		d->etcd_down_err = err;
		d->etcd_down_fails++;
		if (d->etcd_down_since)
			return;
		d->etcd_down_since = loop_now();
		log_warn("etcd", "etcd unreachable: %s (%s, at %s); retrying, reported every minute "
		         "while it lasts", etcd_strerror(err), op, etcd_client_endpoint(d->etcd));
		if (d->etcd_down_timer)
			loop_timer_arm_in(d->etcd_down_timer, OUTAGE_REPORT_NS);
		return;
	}
	if (!d->etcd_down_since)
		return;
	log_info("etcd", "etcd reachable again after %.1f s (%" PRIu64 " requests failed meanwhile)",
	         daemon_etcd_outage_seconds(d), d->etcd_down_fails);
	d->etcd_down_since = 0;
	d->etcd_down_fails = 0;
	if (d->etcd_down_timer)
		loop_timer_disarm(d->etcd_down_timer);
}

static void daemon_etcd_outage_watch_ended(void *ud, int err)
{
	struct daemon *d = ud;
	host_metrics_etcd_observer.watch_ended(&d->hm, err);
}

static const struct etcd_observer_ops daemon_etcd_observer = {
	.call_done = daemon_etcd_outage_call_done,
	.watch_ended = daemon_etcd_outage_watch_ended,
};

int daemon_etcd_outage_start(struct daemon *d)
{
	int r = loop_timer_new(d->loop, daemon_etcd_outage_on_timer, d, &d->etcd_down_timer);
	if (r < 0)
		return r;
	etcd_client_set_observer(d->etcd, &daemon_etcd_observer, d);
	return 0;
}
