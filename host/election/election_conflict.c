/* SPDX-License-Identifier: MIT */
/*
 * election_conflict.c - another session with our node id.
 *
 * Design notes
 * - Election keys are per lease (P/N/election/<lease hex>, the node id as
 *   value); member and state records are per node id. Two live hosts with
 *   one node id would campaign with two keys for one member row, overwrite
 *   each other's state record and make `switchover --to` ambiguous. So a
 *   host does not take part while another host's key carries its node id.
 * - A crash restart is not another host: the old run's key lives on until
 *   its lease expires (up to a TTL). The daemon's state record carries its
 *   identity ("host": host name and runtime directory, election_config
 *   .instance) and is bound to its lease, so a key of our node id whose
 *   lease is the lease of a state record naming our own identity is our
 *   earlier run; we remember it (e->prev) because our own record, written
 *   under the new lease, replaces the old one at once, and we publish those
 *   leases in the record ("previous") so that every view can tell a
 *   restart from a conflict too.
 * - The rule, on the mirror: a key of our node id under another lease that
 *   is not our earlier run, created before our own key (or while we hold
 *   none), is a conflict: we neither put our member record, nor campaign
 *   (a key we hold is resigned), nor write our state record (it is the
 *   other host's now; nor before the first whole view said there is no
 *   conflict). Of two keys the newer one gives way, so two hosts
 *   that campaigned at once (or met after a partition) agree on who stays.
 *   The rule is level-triggered: once the other key goes (its host stops,
 *   or its lease expires) the next step joins.
 * - What it cannot tell: a state record that never reached etcd (a run
 *   killed within milliseconds of its campaign), or one written by a host
 *   of an earlier release (no "host"): then the key is taken for another
 *   host's, and we join when its lease expires, at most a TTL later.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "election/election_internal.h"
#include "base/log.h"

static bool election_conflict_is_prev(const struct election *e, int64_t lease)
{
	for (size_t i = 0; i < e->n_prev; i++)
		if (e->prev[i] == lease)
			return true;
	return false;
}

static bool election_conflict_lease_has_key(const struct election *e, int64_t lease)
{
	for (size_t i = 0; i < e->n_cands; i++)
		if (e->cands[i].lease == lease && strcmp(e->cands[i].node_id, e->node_id) == 0)
			return true;
	return false;
}

/* a key of ours from an earlier run: our identity on the record of its lease */
static bool election_conflict_is_earlier_run(const struct election *e, const struct node_ent *own,
                                             const struct candidate *c)
{
	return e->instance[0] && own && own->valid && own->lease == c->lease &&
	       strcmp(own->rec.host, e->instance) == 0;
}

static void election_conflict_set(struct election *e, const struct candidate *c,
                                  const struct node_ent *own)
{
	bool known = own && own->valid && own->lease == c->lease && own->rec.host[0];
	char who[NODE_RECORD_TEXT_MAX + 16] = "";
	if (known)
		snprintf(who, sizeof(who), " (%s)", own->rec.host);
	snprintf(e->conflict_msg, sizeof(e->conflict_msg),
	         "another host%s runs with node id '%s' (lease 0x%" PRIx64 "); give each host "
	         "its own --node-id, or stop the other host; if that host is gone, its lease "
	         "expires within its TTL", who, e->node_id, (uint64_t)c->lease);
	if (!e->conflict || e->conflict_lease != c->lease)
		log_error("election", "%s: not joining the election: %s", e->name, e->conflict_msg);
	e->conflict = true;
	e->conflict_lease = c->lease;
}

void election_conflict_update(struct election *e)
{
	if (!e->synced)
		return; /* decided on a whole view only; kept as it was meanwhile */
	e->conflict_known = true;
	const struct node_ent *own = election_node_find(e, e->node_id);
	size_t k = 0;
	for (size_t i = 0; i < e->n_prev; i++) /* earlier runs whose keys went */
		if (election_conflict_lease_has_key(e, e->prev[i]))
			e->prev[k++] = e->prev[i];
	e->n_prev = k;
	const struct candidate *first = NULL;
	for (size_t i = 0; i < e->n_cands; i++) {
		const struct candidate *c = &e->cands[i];
		if (strcmp(c->node_id, e->node_id) != 0 || c->lease == e->lease ||
		    election_conflict_is_prev(e, c->lease))
			continue;
		if (election_conflict_is_earlier_run(e, own, c)) {
			/* more earlier runs than fit (a crash loop faster than the
			 * TTL) are not remembered: once our record names the new
			 * lease they count as another host's keys, and we wait for
			 * their leases to expire (at most a TTL) */
			if (e->n_prev < NODE_RECORD_PREVIOUS_MAX) {
				e->prev[e->n_prev++] = c->lease;
				log_info("election", "%s: election key of lease 0x%" PRIx64 " is an "
				         "earlier run of this node; it goes with its lease", e->name,
				         (uint64_t)c->lease);
			}
			continue;
		}
		if (e->my_rev && c->create_rev > e->my_rev)
			continue; /* the newer key gives way: that is the other host's */
		if (!first || c->create_rev < first->create_rev)
			first = c;
	}
	if (first) {
		election_conflict_set(e, first, own);
	} else if (e->conflict) {
		log_info("election", "%s: no other session holds node id '%s' any more; joining",
		         e->name, e->node_id);
		e->conflict = false;
		e->conflict_lease = 0;
		e->conflict_msg[0] = '\0';
	}
}

size_t election_node_sessions(const struct election *e, const char *node_id, bool *ret_conflict)
{
	const struct node_ent *rec = election_node_find(e, node_id);
	int64_t leases[16];
	size_t n = 0;
	for (size_t i = 0; i < e->n_cands; i++)
		if (strcmp(e->cands[i].node_id, node_id) == 0) {
			if (n < sizeof(leases) / sizeof(leases[0]))
				leases[n] = e->cands[i].lease;
			n++;
		}
	size_t m = n < sizeof(leases) / sizeof(leases[0]) ? n : sizeof(leases) / sizeof(leases[0]);
	*ret_conflict = n > m || node_sessions_conflict(leases, m, rec && rec->valid ? &rec->rec : NULL,
	                                                rec ? rec->lease : 0);
	return n;
}
