/* SPDX-License-Identifier: MIT */
/*
 * election_switchover_request.h - requesting a switchover of one plugin's leadership: read
 * the plugin's election state from etcd, check the request against it, and
 * write the request record P/N/handover (proto Switchover), bound to a
 * lease whose TTL is the switchover's timeout.
 *
 * This needs nothing but an etcd client: the daemon (leaseholdctl
 * switchover), a leader handing over to a candidate of higher priority, and
 * a client talking to etcd directly all build the same record the same way.
 * The hosts act on the record (election_handover.c): the leader drains
 * and hands over as on SIGTERM without stopping, candidates ahead of the
 * target give up their election keys, the new leader deletes the record.
 *
 * Threading: the loop thread of the etcd client. Errors: 0 or -errno.
 */
#ifndef LH_SWITCHOVER_H
#define LH_SWITCHOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"

/* the key of the request record below P/N/: it sorts between "election/" and
 * "members/", so it lies inside the range every host watches */
#define SWITCHOVER_KEY "handover"
/* the default timeout (leaseholdctl switchover) and the bounds of any */
#define SWITCHOVER_TIMEOUT_DEFAULT_MS 30000u
#define SWITCHOVER_TIMEOUT_MIN_MS 2000u
#define SWITCHOVER_TIMEOUT_MAX_MS 3600000u

struct switchover_request {
	const char *prefix;    /* P, e.g. "/leasehold" (trailing '/' ignored) */
	const char *name;      /* plugin N */
	const char *requester; /* who asks: recorded, shown in the term history */
	const char *to;        /* target node id, or NULL: any other candidate */
	/* the role the plugin needs, or NULL when it needs none or the caller
	 * does not know (then a target without it is refused as "not
	 * campaigning": a node lacking the role does not take part) */
	const char *role;
	uint32_t timeout_ms;   /* SWITCHOVER_TIMEOUT_MIN_MS..SWITCHOVER_TIMEOUT_MAX_MS */
	bool priority;         /* a leader hands over to a candidate of higher priority */
};

/* switchover_done_fn - the outcome of switchover_request_start: err 0 (the
 * record is written at etcd revision rev; from is the leader it asks to hand
 * over), or -errno with a one-line reason in msg: a refusal (-EBUSY paused,
 * another switchover in flight, or the state changed under the request;
 * -EALREADY the target leads; -ESRCH the target does not run the plugin,
 * lacks its role, runs a release that may not lead now (the release rule)
 * or does not campaign; -EAGAIN no
 * leader now; -ECHILD no other candidate) or an etcd error. Strings are
 * borrowed for the call. */
typedef void (*switchover_done_fn)(void *ud, int err, const char *msg, int64_t rev,
                                   const char *from);

/* switchover_request_start - read, check, write (see the design notes in
 * election_switchover_request.c). rq's strings are copied. Returns 0 when started: done runs
 * exactly once later on the loop (never before this returns); or -errno
 * (-EINVAL bad argument, -ENOMEM, an etcd error) and done never runs. */
int switchover_request_start(struct etcd_client *etcd, const struct switchover_request *rq,
                             switchover_done_fn done, void *ud);

#endif
