/* SPDX-License-Identifier: MIT */
/*
 * election_mirror.c - the local copy of the plugin's [P/N/election/,
 * P/N/status] range: one watch from "now", then one range read at the
 * revision that watch starts after, the watch's events held meanwhile (list
 * after watch, see ETCD_WATCH_CREATED_NOTIFY: a watch from a past revision
 * could deliver the old leader's departure up to 100 ms late); again after a
 * compaction or a session change. It holds the member map
 * with its counts per release (the reference algorithm's releaseCount), the
 * candidates (election keys), the status and the operator's records
 * (election_operator_records.c), all at revision e->rev, and
 * publishes {min, max} release to a leading driver.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_internal.h"
#include "base/log.h"

/* events held while the range is in flight, at most (a busier prefix than
 * that starts the read over) */
#define MIRROR_HOLD_MAX 10000u

/* ---- member map ---- */

static uint64_t election_mirror_hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct member_ent **election_mirror_member_slot(const struct member_map *m, const char *id, size_t len)
{
	if (!m->n_buckets)
		return NULL;
	struct member_ent **pp = &m->buckets[election_mirror_hash_bytes(id, len) % m->n_buckets];
	for (; *pp; pp = &(*pp)->next)
		if (strlen((*pp)->node_id) == len && memcmp((*pp)->node_id, id, len) == 0)
			return pp;
	return pp;
}

static int election_mirror_member_map_grow(struct member_map *m)
{
	size_t nb = m->n_buckets ? m->n_buckets * 2 : 64;
	struct member_ent **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct member_ent *x = m->buckets[i];
		while (x) {
			struct member_ent *nx = x->next;
			size_t k = election_mirror_hash_bytes(x->node_id, strlen(x->node_id)) % nb;
			x->next = b[k];
			b[k] = x;
			x = nx;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = nb;
	return 0;
}

static void election_mirror_member_map_clear(struct member_map *m)
{
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct member_ent *x = m->buckets[i];
		while (x) {
			struct member_ent *nx = x->next;
			free(x->node_id);
			free(x);
			x = nx;
		}
	}
	free(m->buckets);
	memset(m, 0, sizeof(*m));
}

/* ---- release counts (the reference algorithm's releaseCount) ---- */

static void election_mirror_rc_add(struct election *e, const struct rule_release *r, int delta)
{
	for (size_t i = 0; i < e->n_rc; i++) {
		if (release_rule_equal(&e->rc[i].rr, r)) {
			if (delta < 0) {
				if (--e->rc[i].count == 0)
					e->rc[i] = e->rc[--e->n_rc];
			} else
				e->rc[i].count++;
			return;
		}
	}
	if (delta < 0)
		return;
	if (e->n_rc == e->cap_rc) {
		size_t cap = e->cap_rc ? e->cap_rc * 2 : 8;
		struct relcount *n = realloc(e->rc, cap * sizeof(*n));
		if (!n)
			return; /* counted as absent: min/max stay conservative-ish */
		e->rc = n;
		e->cap_rc = cap;
	}
	e->rc[e->n_rc].rr = *r;
	e->rc[e->n_rc].count = 1;
	e->n_rc++;
}

/* election_mirror_member_ent_fill - x's record as mirrored now: counted under release *r, or
 * among the undecodable ones (r == NULL) */
static void election_mirror_member_ent_fill(struct election *e, struct member_ent *x, const struct rule_release *r,
                            int32_t priority, int64_t mod_rev)
{
	x->mod_rev = mod_rev;
	x->priority = r ? priority : 0;
	x->valid = r != NULL;
	if (r) {
		x->release = r->release;
		x->rr = *r;
		election_mirror_rc_add(e, r, +1);
	} else
		e->members.n_invalid++;
}

/* election_mirror_member_set - a member record appeared or changed (present; r = its release,
 * or NULL when the record does not decode) or went away (!present). An
 * undecodable record is kept as an entry of unknown release: it counts
 * neither for min nor for max, but it blocks the restricted-status wait (its
 * node may run an old release), fail safe. */
static void election_mirror_member_set(struct election *e, const char *id, size_t len, bool present,
                       const struct rule_release *r, int32_t priority, int64_t mod_rev)
{
	struct member_map *m = &e->members;
	struct member_ent **pp = election_mirror_member_slot(m, id, len);
	if (pp && *pp) {
		struct member_ent *x = *pp;
		if (x->valid)
			election_mirror_rc_add(e, &x->rr, -1);
		else
			m->n_invalid--;
		if (present) {
			election_mirror_member_ent_fill(e, x, r, priority, mod_rev);
			return;
		}
		*pp = x->next;
		free(x->node_id);
		free(x);
		m->n--;
		return;
	}
	if (!present)
		return;
	if (m->n >= m->n_buckets && election_mirror_member_map_grow(m) < 0)
		return;
	pp = election_mirror_member_slot(m, id, len);
	struct member_ent *x = calloc(1, sizeof(*x));
	if (!x)
		return;
	x->node_id = strndup(id, len);
	if (!x->node_id) {
		free(x);
		return;
	}
	x->next = NULL;
	*pp = x;
	m->n++;
	election_mirror_member_ent_fill(e, x, r, priority, mod_rev);
}

const struct member_ent *election_member_find(const struct election *e, const char *node_id)
{
	struct member_ent **pp = election_mirror_member_slot(&e->members, node_id, strlen(node_id));
	return pp ? *pp : NULL;
}

/* ---- candidates ---- */

static void election_mirror_cand_set(struct election *e, const struct etcd_kv *kv, bool del)
{
	for (size_t i = 0; i < e->n_cands; i++) {
		struct candidate *c = &e->cands[i];
		if (strlen(c->key) == kv->key_len && memcmp(c->key, kv->key, kv->key_len) == 0) {
			if (del) {
				free(c->key);
				free(c->node_id);
				e->cands[i] = e->cands[--e->n_cands];
			} else if (kv->create_revision) {
				c->create_rev = kv->create_revision;
				c->lease = kv->lease;
				free(c->node_id);
				c->node_id = kv->value_len ? strndup((const char *)kv->value, kv->value_len)
				                           : strdup("");
			}
			return;
		}
	}
	if (del)
		return;
	if (e->n_cands == e->cap_cands) {
		size_t cap = e->cap_cands ? e->cap_cands * 2 : 8;
		struct candidate *n = realloc(e->cands, cap * sizeof(*n));
		if (!n)
			return;
		e->cands = n;
		e->cap_cands = cap;
	}
	struct candidate *c = &e->cands[e->n_cands];
	c->key = strndup((const char *)kv->key, kv->key_len);
	c->node_id = kv->value_len ? strndup((const char *)kv->value, kv->value_len) : strdup("");
	c->create_rev = kv->create_revision;
	c->lease = kv->lease;
	if (!c->key || !c->node_id) {
		free(c->key);
		free(c->node_id);
		return;
	}
	e->n_cands++;
}

const struct candidate *election_cand_lowest(const struct election *e)
{
	const struct candidate *best = NULL;
	for (size_t i = 0; i < e->n_cands; i++)
		if (!best || e->cands[i].create_rev < best->create_rev)
			best = &e->cands[i];
	return best;
}

static void election_mirror_cands_clear(struct election *e)
{
	for (size_t i = 0; i < e->n_cands; i++) {
		free(e->cands[i].key);
		free(e->cands[i].node_id);
	}
	e->n_cands = 0;
}

bool election_cand_of_node(const struct election *e, const char *node_id)
{
	for (size_t i = 0; i < e->n_cands; i++)
		if (strcmp(e->cands[i].node_id, node_id) == 0)
			return true;
	return false;
}

void election_mirror_free(struct election *e)
{
	etcd_event_hold_clear(&e->sync_held);
	election_mirror_member_map_clear(&e->members);
	election_mirror_cands_clear(e);
	free(e->cands);
	free(e->rc);
}

/* ---- the mirror ---- */

static bool election_mirror_has_prefix(const struct etcd_kv *kv, const char *p, size_t *ret_plen)
{
	size_t n = strlen(p);
	if (kv->key_len < n || memcmp(kv->key, p, n) != 0)
		return false;
	*ret_plen = n;
	return true;
}

/* election_mirror_apply_member - a key under P/N/members/ (pl: the prefix's
 * length): the member map, and what it tells of our own record */
static void election_mirror_apply_member(struct election *e, const struct etcd_kv *kv, size_t pl,
                                         bool del)
{
	if (kv->mod_revision > e->members_rev)
		e->members_rev = kv->mod_revision;
	const char *id = (const char *)kv->key + pl;
	size_t idlen = kv->key_len - pl;
	/* a NUL byte would make the key unmatchable in the map (ghost member) */
	if (idlen == 0 || memchr(id, '/', idlen) || memchr(id, '\0', idlen)) {
		log_debug("election", "%s: ignoring key outside the layout", e->name);
		return;
	}
	bool self = strlen(e->node_id) == idlen && memcmp(e->node_id, id, idlen) == 0;
	if (del) {
		election_mirror_member_set(e, id, idlen, false, NULL, 0, 0);
		/* our own record deleted behind our back (an operator's
		 * `members forget` of a node that is in fact alive): we still
		 * run the plugin, so we are still a member; put it again */
		if (self && e->member_placed && kv->mod_revision > e->member_rev)
			e->member_placed = false;
		return;
	}
	struct rule_release rr;
	int32_t prio = 0;
	bool ok = election_decode_member_rule(kv->value, kv->value_len, &rr, &prio) == 0;
	if (!ok)
		log_warn("election", "%s: member record %.*s is not a valid Member; its release is "
		         "unknown (it blocks an incompatible status change until fixed or deleted)",
		         e->name, (int)(idlen > 64 ? 64 : idlen), id);
	election_mirror_member_set(e, id, idlen, true, ok ? &rr : NULL, prio, kv->mod_revision);
	/* our own record, left by an earlier run of this node or by a put
	 * whose outcome was unknown: it exists; step() updates, keeps or
	 * deletes it. One bound to a lease (written by a host of the
	 * time when member records died with the lease) is not adopted:
	 * it is put again without one. */
	if (self && !e->member_placed && ok && kv->lease == 0 && e->op != OP_MEMBER_PUT &&
	    kv->mod_revision > e->member_rev) {
		e->member_placed = true;
		e->member_rr = rr;
		e->member_priority = prio;
		e->member_rev = kv->mod_revision;
	}
	/* our own record overwritten by someone else: put ours again */
	if (self && e->member_placed && kv->mod_revision > e->member_rev &&
	    (!ok || kv->lease != 0 || !release_rule_equal(&rr, &e->member_rr) ||
	     prio != e->member_priority))
		e->member_placed = false;
}

/* election_mirror_apply_candidate - a key under P/N/election/ (pl: the
 * prefix's length): the candidates, and our own key among them */
static void election_mirror_apply_candidate(struct election *e, const struct etcd_kv *kv, size_t pl,
                                            bool del)
{
	if (kv->key_len == pl || memchr(kv->key, '\0', kv->key_len)) {
		log_debug("election", "%s: ignoring key outside the layout", e->name);
		return;
	}
	if (!del && !election_key_is_candidate(kv, pl)) {
		/* not a live campaign: no lease, or a name that is not its lease
		 * (it would otherwise block the election forever) */
		log_warn("election", "%s: ignoring election key without a matching lease", e->name);
		election_mirror_cand_set(e, kv, true);
		return;
	}
	/* our own key seen without our knowing its revision: a campaign
	 * whose outcome was unknown did create it; adopt it (step() then
	 * resigns if we should not campaign). Not from an event older
	 * than our last known write to the key: a lagging watch may still
	 * show the put of a key we have resigned since. */
	if (!del && !e->my_rev && e->lease && kv->lease == e->lease &&
	    e->op != OP_CAMPAIGN && kv->mod_revision > e->key_wrev &&
	    strlen(e->my_key) == kv->key_len && memcmp(e->my_key, kv->key, kv->key_len) == 0)
		e->my_rev = kv->create_revision;
	if (del && e->my_rev && strlen(e->my_key) == kv->key_len &&
	    memcmp(e->my_key, kv->key, kv->key_len) == 0 && kv->mod_revision > e->my_rev) {
		/* our key vanished (lease expired on etcd, or deleted by someone) */
		if (e->leading)
			election_depose(e, false, "our election key was deleted");
		e->my_rev = 0;
	}
	election_mirror_cand_set(e, kv, del);
}

/* election_mirror_apply_status - the status record (absent when deleted or
 * when it does not decode) */
static void election_mirror_apply_status(struct election *e, const struct etcd_kv *kv, bool del)
{
	e->status_mod_rev = del ? 0 : kv->mod_revision;
	if (del)
		memset(&e->status, 0, sizeof(e->status));
	else {
		election_status_decode(kv->value, kv->value_len, &e->status);
		if (!e->status.valid)
			log_warn("election", "%s: status record is not a valid ReconcilerStatus; treated as absent",
			         e->name);
	}
}

static void election_mirror_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	size_t pl;
	if (election_mirror_has_prefix(kv, e->k_members, &pl))
		election_mirror_apply_member(e, kv, pl, del);
	else if (election_mirror_has_prefix(kv, e->k_election, &pl))
		election_mirror_apply_candidate(e, kv, pl, del);
	else if (kv->key_len == strlen(e->k_status) && memcmp(kv->key, e->k_status, kv->key_len) == 0)
		election_mirror_apply_status(e, kv, del);
	else if (!election_control_apply(e, kv, del) && !election_switchover_apply(e, kv, del) &&
	         !election_nodes_apply(e, kv, del))
		log_debug("election", "%s: ignoring key outside the layout", e->name);
}

/* recompute {min,max}; tell a leading driver when it changed */
void election_publish(struct election *e)
{
	/* the revision at which the member summary is valid: every member key
	 * has mod_revision <= members_rev (the reference algorithm's
	 * nodeReleases.revision) */
	struct releases r = {.min = e->rel.release, .max = e->rel.release, .revision = e->members_rev,
	                     .n_members = e->members.n - e->members.n_invalid};
	for (size_t i = 0; i < e->n_rc; i++) {
		if (release_less(e->rc[i].rr.release, r.min))
			r.min = e->rc[i].rr.release;
		if (release_less(r.max, e->rc[i].rr.release))
			r.max = e->rc[i].rr.release;
	}
	bool changed = release_cmp(r.min, e->releases.min) || release_cmp(r.max, e->releases.max) ||
	               r.revision != e->releases.revision || r.n_members != e->releases.n_members;
	e->releases = r;
	if (changed && e->leading && !e->draining && e->dops)
		e->dops->releases_changed(e->drv, &e->releases);
}

/* election_mirror_sync_restart - drop the watch and what it held; read everything again in
 * delay ns (the sync timer) */
static void election_mirror_sync_restart(struct election *e, uint64_t delay)
{
	if (e->watch)
		etcd_watch_cancel(e->watch);
	e->watch = NULL;
	e->synced = false;
	e->sync_rev = 0;
	etcd_event_hold_clear(&e->sync_held);
	loop_timer_arm_in(e->sync_timer, delay);
	if (delay)
		e->sync_backoff = e->sync_backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
		                                                         : e->sync_backoff * 2;
}

static void election_mirror_on_watch(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
                     size_t n, void *ud)
{
	struct election *e = ud;
	(void)w;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (err < 0) {
		/* compacted (or the watch died for good): resync from a fresh range */
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "election",
		        "%s: watch ended (%s); resyncing", e->name, etcd_strerror(err));
		election_mirror_sync_restart(e, 0);
		return;
	}
	if (!e->synced) {
		if (n == 0) {
			/* the creation (the first callback), or a progress
			 * notification while the range is in flight */
			if (!e->sync_rev) {
				if (revision <= 0) {
					election_mirror_sync_restart(e, e->sync_backoff);
					return;
				}
				e->sync_rev = revision;
				election_sync_start(e);
			}
			return;
		}
		/* after H, before the range's answer: applied on top of it */
		if (e->sync_held.n + n > MIRROR_HOLD_MAX || etcd_event_hold_add(&e->sync_held, ev, n) < 0) {
			log_warn("election", "%s: %zu changes while reading the state; reading again",
			         e->name, e->sync_held.n + n);
			election_mirror_sync_restart(e, e->sync_backoff);
		}
		return;
	}
	for (size_t i = 0; i < n; i++)
		election_mirror_apply(e, &ev[i].kv, ev[i].type == ETCD_EVENT_DELETE);
	/* The mirror is complete up to the last event's revision; only a progress
	 * notification vouches for its header revision (a catching-up watcher's
	 * header may be ahead of events still to come). */
	int64_t rev = n > 0 ? ev[n - 1].kv.mod_revision : revision;
	if (rev > e->rev)
		e->rev = rev;
	election_publish(e);
	election_step(e);
}

static void election_mirror_on_sync_range(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	CHECK_OBJ(e, ELECTION_MAGIC);
	election_op_done(e);
	if (err < 0) {
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "election",
		        "%s: initial read failed: %s; retrying", e->name, etcd_strerror(err));
		if (e->stopping) {
			election_step(e); /* a stop waits for nothing etcd-bound that never started */
			return;
		}
		if (err == -ERANGE) {
			/* the watch's start revision is compacted away already */
			election_mirror_sync_restart(e, e->sync_backoff);
			return;
		}
		loop_timer_arm_in(e->sync_timer, e->sync_backoff);
		e->sync_backoff = e->sync_backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
		                                                         : e->sync_backoff * 2;
		return;
	}
	if (!e->watch || !e->sync_rev || e->sync_read_rev != e->sync_rev) {
		/* the watch ended meanwhile: this read belongs to it; the sync
		 * starts over (or reads for the new watch now) */
		election_sync_start(e);
		election_step(e);
		return;
	}
	election_mirror_member_map_clear(&e->members);
	e->n_rc = 0;
	election_mirror_cands_clear(e);
	memset(&e->status, 0, sizeof(e->status));
	e->status_mod_rev = 0;
	election_control_sync_begin(e);
	election_switchover_sync_begin(e);
	election_nodes_clear(e);
	for (size_t i = 0; i < r->n_kvs; i++)
		election_mirror_apply(e, &r->kvs[i], false);
	election_control_sync_end(e);
	election_switchover_sync_end(e);
	/* the range is the state at H; the held events are everything after */
	e->rev = e->sync_rev;
	e->members_rev = e->sync_rev;
	for (size_t i = 0; i < e->sync_held.n; i++) {
		const struct etcd_kv *kv = e->sync_held.ev[i].kv;
		election_mirror_apply(e, kv, e->sync_held.ev[i].type == ETCD_EVENT_DELETE);
		if (kv->mod_revision > e->rev)
			e->rev = kv->mod_revision;
	}
	etcd_event_hold_clear(&e->sync_held);
	/* our record may have gone while we were not watching */
	if (e->member_placed && !election_member_find(e, e->node_id))
		e->member_placed = false;
	e->view_lease = e->sync_lease;
	e->sync_backoff = 100 * LOOP_NS_PER_MS;
	e->synced = true;
	e->ever_synced = true;
	/* our key may have vanished while we were not watching */
	if (e->my_rev) {
		bool found = false;
		for (size_t i = 0; i < e->n_cands; i++)
			if (strcmp(e->cands[i].key, e->my_key) == 0 && e->cands[i].create_rev == e->my_rev)
				found = true;
		if (!found) {
			if (e->leading)
				election_depose(e, false, "our election key is gone");
			e->my_rev = 0;
		}
	}
	election_publish(e);
	/* the session changed while the range was in flight */
	if (e->lease && e->view_lease != e->lease)
		election_view_refresh(e);
	election_step(e);
}

/* the session came back (or changed): the mirror may have
 * missed changes while we could not reach etcd (a watch stream can stall
 * without breaking), so read it again before vouching for readiness. */
void election_view_refresh(struct election *e)
{
	if (!e->synced || !e->watch)
		return; /* a read is in flight or due: it carries the new lease */
	log_debug("election", "%s: session changed; reading the state again", e->name);
	election_mirror_sync_restart(e, 0);
}

void election_sync_start(struct election *e)
{
	if (e->stopping && !e->leading)
		return;
	if (!e->watch) {
		/* the watch first, from now: its creation's revision H is what
		 * the range reads at (election_mirror_on_watch starts it) */
		e->sync_rev = 0;
		etcd_event_hold_clear(&e->sync_held);
		int rc = etcd_watch_start(e->etcd, e->k_election, strlen(e->k_election),
		                          e->k_watch_end, e->k_watch_end_len, 0,
		                          ETCD_WATCH_PROGRESS_NOTIFY | ETCD_WATCH_CREATED_NOTIFY,
		                          election_mirror_on_watch, e, &e->watch);
		if (rc < 0)
			election_mirror_sync_restart(e, e->sync_backoff);
		return;
	}
	if (e->synced || !e->sync_rev || e->op == OP_SYNC)
		return; /* nothing to read, the creation to wait for, or the read in flight */
	if (e->op != OP_NONE) {
		/* the control path is busy; try again shortly */
		loop_timer_arm_in(e->sync_timer, 10 * LOOP_NS_PER_MS);
		return;
	}
	struct etcd_op op = {.type = ETCD_OP_RANGE,
	                     .key = e->k_election,
	                     .key_len = strlen(e->k_election),
	                     .range_end = e->k_watch_end,
	                     .range_end_len = e->k_watch_end_len,
	                     .revision = e->sync_rev};
	election_op_start(e, OP_SYNC);
	e->sync_lease = e->lease;
	e->sync_read_rev = e->sync_rev;
	int r = etcd_range(e->etcd, &op, NULL, election_mirror_on_sync_range, e, &e->call);
	if (r < 0) {
		election_op_done(e);
		loop_timer_arm_in(e->sync_timer, e->sync_backoff);
	}
}

void election_on_sync_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (!e->synced)
		election_sync_start(e);
}

size_t election_members(struct election *e, struct election_member *out, size_t max)
{
	const struct candidate *low = election_cand_lowest(e);
	size_t k = 0;
	for (size_t i = 0; i < e->members.n_buckets; i++)
		for (struct member_ent *x = e->members.buckets[i]; x; x = x->next) {
			if (!x->valid)
				continue; /* release unknown: not listed (it is logged) */
			if (k < max) {
				out[k].node_id = x->node_id;
				out[k].release = x->release;
				out[k].leader = low && strcmp(low->node_id, x->node_id) == 0;
				out[k].campaigning = election_cand_of_node(e, x->node_id);
				out[k].member = true;
				out[k].unhealthy = x->rr.unhealthy;
				out[k].unhealthy_until = x->rr.unhealthy_until;
				const struct node_ent *n = election_node_find(e, x->node_id);
				out[k].record = n && n->valid ? &n->rec : NULL;
				out[k].record_invalid = n && !n->valid;
				out[k].sessions = (uint32_t)election_node_sessions(e, x->node_id,
				                                                   &out[k].conflict);
			}
			k++;
		}
	return k;
}

size_t election_rows(struct election *e, struct election_member *out, size_t max)
{
	const struct candidate *low = election_cand_lowest(e);
	size_t k = election_members(e, out, max);
	/* nodes that publish a state but hold no (valid) member record */
	for (size_t i = 0; i < e->n_nodes; i++) {
		const struct node_ent *n = &e->nodes[i];
		const struct member_ent *x = election_member_find(e, n->node_id);
		if ((x && x->valid) || !n->valid)
			continue;
		if (k < max) {
			out[k].node_id = n->node_id;
			out[k].release = n->rec.release;
			out[k].leader = low && strcmp(low->node_id, n->node_id) == 0;
			out[k].campaigning = election_cand_of_node(e, n->node_id);
			out[k].member = false;
			out[k].unhealthy = false;
			out[k].unhealthy_until = 0;
			out[k].record = &n->rec;
			out[k].record_invalid = false;
			out[k].sessions = (uint32_t)election_node_sessions(e, n->node_id,
			                                                   &out[k].conflict);
		}
		k++;
	}
	return k;
}
