/* SPDX-License-Identifier: MIT */
/*
 * raftleader.h - etcd's own raft leadership in a harness cluster, seen and
 * moved through the JSON gateway's maintenance calls
 * (/v3/maintenance/status, /v3/maintenance/transfer-leadership). For fault
 * tests and the bench that kill etcd's raft leader on purpose.
 *
 * Plain-http harnesses only. Blocking (libcurl easy, 500 ms per request);
 * agreement is polled every 10 ms against the caller's deadline: etcd gives
 * no event to wait on from outside.
 */
#ifndef LH_TEST_RAFTLEADER_H
#define LH_TEST_RAFTLEADER_H

#include "harness.h"

/* harness_raft_leader - the index of the member that every running member
 * names as its raft leader (and that itself runs). Waits up to timeout_ms for
 * such an agreement. Returns the index, or -ETIMEDOUT. */
int harness_raft_leader(const struct harness_etcd *h, int timeout_ms);

/* harness_raft_move_leader - make member `to` etcd's raft leader (a leadership
 * transfer asked of the current leader), and wait until every running member
 * agrees. Returns 0, -EINVAL (`to` does not run), or -ETIMEDOUT. */
int harness_raft_move_leader(const struct harness_etcd *h, int to, int timeout_ms);

#endif
