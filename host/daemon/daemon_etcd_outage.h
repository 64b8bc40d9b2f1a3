/* SPDX-License-Identifier: MIT */
/*
 * daemon_etcd_outage.h - one account of an etcd outage in the log: a line
 * when requests start failing for want of etcd (etcd_err_unreachable), one
 * every report_ns while that lasts, with its duration, and one when etcd
 * answers again. The modules that retry on their own (session, elections,
 * roles, watches, configuration mirrors) log such failures at debug only,
 * so an outage does not repeat itself every retry.
 *
 * Design notes
 * - Fed with every request that ends (the daemon's etcd observer): an
 *   unreachable etcd starts an outage, any answer of etcd ends it (an
 *   error etcd sent is an answer: it is reachable). Cancelled requests say
 *   nothing either way.
 * - Loop thread only.
 */
#ifndef LH_DAEMON_ETCD_OUTAGE_H
#define LH_DAEMON_ETCD_OUTAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "etcd/etcd.h"

/* the daemon's period of "etcd still unreachable" lines */
#define DAEMON_ETCD_OUTAGE_REPORT_NS (60 * LOOP_NS_PER_S)

struct daemon_etcd_outage;

/* daemon_etcd_outage_new - an account of etcd's outages on loop l, with a
 * line every report_ns while one lasts. etcd (borrowed, may be NULL) names
 * the endpoint in use in the first line. 0 or -errno. */
int daemon_etcd_outage_new(struct loop *l, const struct etcd_client *etcd, uint64_t report_ns,
                           struct daemon_etcd_outage **ret);
/* daemon_etcd_outage_free - accepts NULL */
void daemon_etcd_outage_free(struct daemon_etcd_outage *o);
/* daemon_etcd_outage_call_done - a request of kind op (static string)
 * ended with err, elapsed_ns after it was sent. An answer ends an outage
 * only when its request was sent after the outage began: one in flight
 * before (answered late, or with an error while etcd was shutting down)
 * says nothing about etcd now; likewise a failure of a request sent before
 * the last outage ended (a dead connection timing out late) opens none */
void daemon_etcd_outage_call_done(struct daemon_etcd_outage *o, const char *op, int err,
                                  uint64_t elapsed_ns);
/* daemon_etcd_outage_active - an outage lasts now */
bool daemon_etcd_outage_active(const struct daemon_etcd_outage *o);

#endif
