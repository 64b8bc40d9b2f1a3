/* SPDX-License-Identifier: MIT */
/*
 * election_node_record.h - the per-node state record of one plugin,
 * P/N/nodes/<node-id>: what only that node knows (its election state and
 * why, whether it may serve and why not, its last reconcile), so that one
 * place (any daemon's mirror, or leaseholdctl in observer mode) can show
 * the whole cluster.
 *
 * The value is one JSON object (so an operator can read it with etcdctl):
 *   {"v":1, "node":"n1", "release":"1.2.0", "state":"standby",
 *    "reason":"a newer release is present", "since":1764000000,
 *    "ready":false, "not_ready":"...",
 *    "reconcile":{"at":1764000000, "ok":true, "error":""},
 *    "host":"db1:/run/leasehold", "previous":["694d8e2a1b3c5f01"]}
 * "host" names the daemon that wrote it (its host name and runtime
 * directory), "previous" the leases of its own earlier runs whose election
 * keys are still alive (a crash restart): both tell a restart of this node
 * from another host that runs with the same node id (election_conflict.c).
 * "v" is the record's format version (NODE_RECORD_VERSION); a reader
 * accepts any v >= 1 and ignores fields it does not know, so a newer writer
 * may add fields. "reconcile" is absent until the node reconciled.
 *
 * Decoding treats the bytes as hostile (they come from etcd, where anyone
 * with write access may put anything): at most NODE_RECORD_MAX_BYTES, one
 * JSON object, every field of the right type, strings printable ASCII of
 * bounded length, a valid release. Anything else is -EBADMSG.
 *
 * Pure functions, any thread.
 */
#ifndef LH_NODE_RECORD_H
#define LH_NODE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/release.h"

#define NODE_RECORD_VERSION 1
#define NODE_RECORD_MAX_BYTES 4096
#define NODE_RECORD_NODE_MAX 128 /* as control_codec.h's CONTROL_NODE_MAX */
#define NODE_RECORD_STATE_MAX 23
#define NODE_RECORD_TEXT_MAX 200 /* reason, not_ready, reconcile error, host */
#define NODE_RECORD_PREVIOUS_MAX 8 /* leases in "previous" */

struct node_record {
	uint32_t version;
	char node[NODE_RECORD_NODE_MAX + 1];
	struct release release;
	/* loading|standby|campaigning|leading|failed|stopped, or a word a newer
	 * writer uses ([a-z-], kept as is) */
	char state[NODE_RECORD_STATE_MAX + 1];
	char reason[NODE_RECORD_TEXT_MAX + 1]; /* why standby/failed/...; "" = none */
	int64_t since;                         /* unix s the state began, 0 = unknown */
	bool ready;
	char not_ready[NODE_RECORD_TEXT_MAX + 1]; /* "" when ready */
	int64_t reconcile_at;                     /* unix s of the last one, 0 = never */
	bool reconcile_ok;
	char reconcile_error[NODE_RECORD_TEXT_MAX + 1];
	/* the writing daemon's identity ("" from a writer that has none) */
	char host[NODE_RECORD_TEXT_MAX + 1];
	/* leases of this node's earlier runs whose election keys it knows to be
	 * its own (non-zero, n_previous of them) */
	int64_t previous[NODE_RECORD_PREVIOUS_MAX];
	size_t n_previous;
};

/* node_record_encode - r as its JSON value (strings longer than the limits
 * are cut, non-printable bytes replaced by '?', so that what is written
 * always decodes). *ret (malloc'd, NUL-terminated, the caller frees it) and
 * *ret_len (without the NUL) are set on success only. 0 or -ENOMEM. */
int node_record_encode(const struct node_record *r, char **ret, size_t *ret_len);

/* node_record_decode - hostile bytes -> *ret (filled on success only).
 * Returns 0 or -EBADMSG. */
int node_record_decode(const void *buf, size_t len, struct node_record *ret);

/* node_sessions_conflict - the n live election keys of one node id (the
 * leases they are bound to) are not all runs of one node: more than one,
 * and one of them neither the lease of the node's state record (rec, bound
 * to rec_lease; NULL when there is none or it does not decode) nor one of
 * the record's "previous" leases. */
bool node_sessions_conflict(const int64_t *leases, size_t n, const struct node_record *rec,
                            int64_t rec_lease);

#endif
