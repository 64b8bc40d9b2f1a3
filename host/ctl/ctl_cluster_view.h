/* SPDX-License-Identifier: MIT */
/*
 * ctl_cluster_view.h - one plugin's cluster state decoded from its records in
 * etcd, without being a member: what leaseholdctl shows in observer mode.
 *
 * Input: the keys of the plugin's watched range [P/N/election/, P/N/status]
 * (members, candidates, node state records, pause, reconcile requests,
 * status) read at one revision, as the daemon's mirror reads them. Every
 * value is hostile: it goes through the daemon's own decoders
 * (election_decode_member, election_status_decode, node_record_decode,
 * election_key_is_candidate), so an observer shows what a daemon would.
 * Output: the control structs a daemon fills for its control socket
 * (control.h), so that control_answer_pack builds the same Response and
 * leaseholdctl prints it with the same printers. Fields that only a node
 * running the plugin knows (its file, release, readiness, reconcile
 * counts) are left empty; the node rows carry what each node publishes.
 *
 * Pure functions, any thread.
 */
#ifndef LH_CLUSTER_VIEW_H
#define LH_CLUSTER_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "etcd/etcd.h"

/* the state every observer-built Plugin reports in "state" */
#define CLUSTER_VIEW_STATE "observed"

struct cluster_view {
	struct control_plugin plugin; /* strings point into the view */
	struct control_member *rows;  /* one per node; strings point into the view */
	size_t n_rows;
	/* private storage */
	char *name;
	char **strs;
	size_t n_strs;
	struct node_record *recs;
};

/* cluster_view_build - decode plugin name's range (kvs[0..n), borrowed for
 * the call; keys under prefix/name/) read at revision; config_revision: the
 * mod_revision of P/N/config (0 = none). *ret (free with cluster_view_free)
 * is set on success. 0 or -ENOMEM. */
int cluster_view_build(const char *prefix, const char *name, const struct etcd_kv *const *kvs,
                       size_t n, int64_t revision, int64_t config_revision,
                       struct cluster_view **ret);
void cluster_view_free(struct cluster_view *v);

/* cluster_view_leader - the node id whose election key is the lowest live
 * candidate among kvs (as in cluster_view_build), or NULL; borrowed from
 * kvs (values end in a NUL, see etcd_kv_dup) */
const char *cluster_view_leader(const char *prefix, const char *name,
                                const struct etcd_kv *const *kvs, size_t n);

#endif
