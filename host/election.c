/*
 * election.c - see election.h for the design notes.
 *
 * Reading guide
 * - mirror_*: the local copy of [P/N/election/, P/N/status] kept by one range
 *   and one watch.
 * - step(): the level-triggered controller: decides the next control action
 *   (leave, swap driver, member record, campaign, win check, lead step).
 *   Exactly one control etcd call is in flight at a time (e->op).
 * - lead_*: the leader's status/reconcile machine (the seed's lead()).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election.h"
#include "leasehold.pb-c.h"
#include "log.h"

#define ST_WORKING LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING
#define ST_DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

/* ---- small containers ---- */

struct member_ent {
	struct member_ent *next;
	char *node_id;
	struct release release;
	bool valid; /* false: the record exists but does not decode (release unknown) */
};

struct member_map {
	struct member_ent **buckets;
	size_t n_buckets, n;
	size_t n_invalid; /* entries whose record does not decode */
};

struct relcount {
	struct release release;
	size_t count;
};

struct candidate {
	char *key;
	char *node_id;
	int64_t create_rev;
};

struct status_rec {
	bool present;
	bool valid;
	int state;
	struct release version;
	struct release min_compatible;
};

enum lead_phase {
	LP_NONE,
	LP_VERIFY,      /* re-check our key + read status (one txn) */
	LP_RESTRICT,    /* waiting for every member >= min_compatible, then write */
	LP_WAIT,        /* reconcile_wait */
	LP_RECONCILE,   /* initial reconcile (with backoff) */
	LP_IDLE,        /* periodic reconcile timer armed */
	LP_PERIODIC,    /* periodic reconcile running */
};

enum op_kind { OP_NONE, OP_SYNC, OP_MEMBER_PUT, OP_MEMBER_DEL, OP_CAMPAIGN, OP_RESIGN, OP_LEAD };

struct election {
	struct loop *loop;
	struct etcd_client *etcd;
	struct session *sess;
	char *prefix, *name, *node_id;
	struct plugin_releases rel;
	uint64_t reconcile_wait_ns, reconcile_interval_ns;
	void (*on_change)(void *);
	void *on_change_ud;

	/* keys */
	char *k_members;     /* P/N/members/ */
	char *k_member_self; /* P/N/members/<node> */
	char *k_election;    /* P/N/election/ */
	char *k_status;      /* P/N/status */
	char *k_data;        /* P/N/data/ */
	uint8_t *k_watch_end; /* P/N/status\0 */
	size_t k_watch_end_len;
	uint8_t *k_members_end;
	size_t k_members_end_len;
	char my_key[512]; /* P/N/election/<lease hex>: prefix <= 200, name <= 63 */

	/* driver */
	const struct driver_ops *dops;
	void *drv;
	struct driver_host dhost;
	struct {
		bool pending;
		const struct driver_ops *ops;
		void *drv;
		struct plugin_releases rel;
		void (*done)(void *);
		void *ud;
	} swap;

	/* mirror */
	bool synced;
	bool ever_synced; /* a resync (after compaction) does not end leadership */
	int64_t rev;
	struct member_map members;
	struct relcount *rc;
	size_t n_rc, cap_rc;
	struct candidate *cands;
	size_t n_cands, cap_cands;
	struct status_rec status;
	struct releases releases; /* published */
	int64_t members_rev; /* revision of the last member event seen (or the sync) */
	struct etcd_watch *watch;
	struct loop_timer *sync_timer;
	uint64_t sync_backoff;

	/* session + control path */
	int64_t lease;
	int64_t member_lease; /* lease our member record was written with, 0 = none */
	struct release member_release;
	int64_t member_rev; /* revision at which our member record was last written by us */
	int64_t my_rev;       /* create_revision of our election key, 0 = none */
	/* our own writes to our election key (campaign, resign): the revision
	 * of the last one whose outcome we know, and whether one since has an
	 * unknown outcome (until a linearizable answer about the key) */
	int64_t key_wrev;
	bool key_wunknown;
	bool resign_publishes;          /* the resign in flight also puts our member record */
	bool resign_drops_member;       /* ... or deletes it (leaving for good) */
	struct release resign_release;  /* ... with this (incoming) release */
	enum op_kind op;
	struct etcd_call *call;
	struct loop_timer *retry_timer;
	uint64_t retry_backoff;
	bool held, stopping, failed;
	char *hold_reason, *fail_reason;
	void (*stop_done)(void *);
	bool (*stop_last)(void *); /* election_stop_revoking */
	void *stop_ud;
	enum election_state state_reported;

	/* leadership */
	bool leading;
	bool draining;
	uint64_t gen; /* bumps on every elected / deposed */
	enum lead_phase phase;
	bool reconciling; /* a reconcile of this term is queued or running */
	bool status_existed;
	bool status_is_done;
	struct release restrict_version, restrict_min_compatible;
	int64_t restrict_tried_rev;
	bool restrict_logged;
	bool restrict_logged_invalid;
	struct release restrict_logged_min;
	uint8_t *pending_status; /* bytes of a status write in flight */
	size_t pending_status_len;
	int pending_status_state;
	bool pending_readback;
	struct loop_timer *lead_timer;
	uint64_t lead_backoff;
	uint64_t lead_log_after;

	/* stats */
	uint64_t reconcile_count;
	bool reconcile_last_ok;
	char *reconcile_last_error;
	int64_t reconcile_last_at;
	uint64_t status_writes;
	struct fenced_ctx *fenced; /* plugin txns in flight */
	struct drv_ctx *drv_ctxs;  /* driver callbacks not yet called */
};

static void step(struct election *e);
static void lead_step(struct election *e);
static void depose(struct election *e, bool graceful, const char *why);

const char *election_state_name(enum election_state s)
{
	switch (s) {
	case ELECTION_LOADING:
		return "loading";
	case ELECTION_STANDBY:
		return "standby";
	case ELECTION_CAMPAIGNING:
		return "campaigning";
	case ELECTION_LEADING:
		return "leading";
	case ELECTION_FAILED:
		return "failed";
	case ELECTION_STOPPED:
		return "stopped";
	}
	return "unknown";
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* ---- member map ---- */

static uint64_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct member_ent **member_slot(struct member_map *m, const char *id, size_t len)
{
	if (!m->n_buckets)
		return NULL;
	struct member_ent **pp = &m->buckets[hash_bytes(id, len) % m->n_buckets];
	for (; *pp; pp = &(*pp)->next)
		if (strlen((*pp)->node_id) == len && memcmp((*pp)->node_id, id, len) == 0)
			return pp;
	return pp;
}

static int member_map_grow(struct member_map *m)
{
	size_t nb = m->n_buckets ? m->n_buckets * 2 : 64;
	struct member_ent **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct member_ent *x = m->buckets[i];
		while (x) {
			struct member_ent *nx = x->next;
			size_t k = hash_bytes(x->node_id, strlen(x->node_id)) % nb;
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

static void member_map_clear(struct member_map *m)
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

/* ---- release counts (the seed's releaseCount) ---- */

static void rc_add(struct election *e, struct release r, int delta)
{
	for (size_t i = 0; i < e->n_rc; i++) {
		if (release_cmp(e->rc[i].release, r) == 0) {
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
	e->rc[e->n_rc].release = r;
	e->rc[e->n_rc].count = 1;
	e->n_rc++;
}

/* member_set - set (release != NULL) or remove a member by node id */
/* member_set - a member record appeared or changed (present; r = its release,
 * or NULL when the record does not decode) or went away (!present). An
 * undecodable record is kept as an entry of unknown release: it counts
 * neither for min nor for max, but it blocks the restricted-status wait (its
 * node may run an old release), fail safe. */
static void member_set(struct election *e, const char *id, size_t len, bool present,
                       const struct release *r)
{
	struct member_map *m = &e->members;
	struct member_ent **pp = member_slot(m, id, len);
	if (pp && *pp) {
		struct member_ent *x = *pp;
		if (x->valid)
			rc_add(e, x->release, -1);
		else
			m->n_invalid--;
		if (present) {
			x->valid = r != NULL;
			if (r) {
				x->release = *r;
				rc_add(e, *r, +1);
			} else
				m->n_invalid++;
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
	if (m->n >= m->n_buckets && member_map_grow(m) < 0)
		return;
	pp = member_slot(m, id, len);
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
	x->valid = r != NULL;
	if (r) {
		x->release = *r;
		rc_add(e, *r, +1);
	} else
		m->n_invalid++;
}

/* ---- candidates ---- */

static void cand_set(struct election *e, const struct etcd_kv *kv, bool del)
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
	if (!c->key || !c->node_id) {
		free(c->key);
		free(c->node_id);
		return;
	}
	e->n_cands++;
}

static const struct candidate *cand_lowest(const struct election *e)
{
	const struct candidate *best = NULL;
	for (size_t i = 0; i < e->n_cands; i++)
		if (!best || e->cands[i].create_rev < best->create_rev)
			best = &e->cands[i];
	return best;
}

static void cands_clear(struct election *e)
{
	for (size_t i = 0; i < e->n_cands; i++) {
		free(e->cands[i].key);
		free(e->cands[i].node_id);
	}
	e->n_cands = 0;
}

/* ---- records ---- */

static bool release_from_pb(const Leasehold__Release *p, struct release *ret)
{
	if (!p)
		return false;
	ret->major = p->major;
	ret->minor = p->minor;
	ret->patch = p->patch;
	return true;
}

int election_decode_status(const void *buf, size_t len, int *ret_state, struct release *ret_version,
                           struct release *ret_min_compatible)
{
	Leasehold__ReconcilerStatus *s = leasehold__reconciler_status__unpack(NULL, len, buf);
	if (!s)
		return -EBADMSG;
	struct release v, m;
	int r = -EBADMSG;
	/* like the seed (proto3 keeps unknown enum values), an unknown state is
	 * a state: only the releases decide compatibility */
	if (release_from_pb(s->version, &v) && release_from_pb(s->minimum_compatible_release, &m)) {
		*ret_state = s->state;
		*ret_version = v;
		*ret_min_compatible = m;
		r = 0;
	}
	leasehold__reconciler_status__free_unpacked(s, NULL);
	return r;
}

int election_decode_member(const void *buf, size_t len, struct release *ret_release)
{
	Leasehold__Member *m = leasehold__member__unpack(NULL, len, buf);
	if (!m)
		return -EBADMSG;
	int r = release_from_pb(m->release, ret_release) ? 0 : -EBADMSG;
	leasehold__member__free_unpacked(m, NULL);
	return r;
}

/* status_decode - hostile bytes -> status_rec; invalid -> present but !valid */
static void status_decode(const uint8_t *v, size_t len, struct status_rec *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->present = true;
	ret->valid = election_decode_status(v, len, &ret->state, &ret->version,
	                                    &ret->min_compatible) == 0;
}

static int status_encode(int state, struct release v, struct release mcr, uint8_t **ret,
                         size_t *ret_len)
{
	Leasehold__Release pv = LEASEHOLD__RELEASE__INIT, pm = LEASEHOLD__RELEASE__INIT;
	pv.major = v.major;
	pv.minor = v.minor;
	pv.patch = v.patch;
	pm.major = mcr.major;
	pm.minor = mcr.minor;
	pm.patch = mcr.patch;
	Leasehold__ReconcilerStatus s = LEASEHOLD__RECONCILER_STATUS__INIT;
	s.state = (Leasehold__ReconcilerStatus__State)state;
	s.version = &pv;
	s.minimum_compatible_release = &pm;
	size_t n = leasehold__reconciler_status__get_packed_size(&s);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	leasehold__reconciler_status__pack(&s, b);
	*ret = b;
	*ret_len = n;
	return 0;
}

static int member_encode(const struct election *e, struct release rel, uint8_t **ret,
                         size_t *ret_len)
{
	Leasehold__Release pr = LEASEHOLD__RELEASE__INIT;
	pr.major = rel.major;
	pr.minor = rel.minor;
	pr.patch = rel.patch;
	Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
	m.node_id = e->node_id;
	m.release = &pr;
	m.host_version = (char *)PACKAGE_VERSION;
	size_t n = leasehold__member__get_packed_size(&m);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	leasehold__member__pack(&m, b);
	*ret = b;
	*ret_len = n;
	return 0;
}

bool election_status_ready(const struct plugin_releases *local, bool present,
                           struct release status_version, struct release status_min_compatible)
{
	if (!present)
		return false;
	if (release_less(local->release, status_min_compatible))
		return false;
	if (release_less(status_version, local->min_reconciler))
		return false;
	return true; /* WORKING does not block readiness */
}

/* ---- mirror ---- */

static bool has_prefix(const struct etcd_kv *kv, const char *p, size_t *ret_plen)
{
	size_t n = strlen(p);
	if (kv->key_len < n || memcmp(kv->key, p, n) != 0)
		return false;
	*ret_plen = n;
	return true;
}

/* candidate_key_ok - P/N/election/<lease hex> bound to that very lease */
static bool candidate_key_ok(const struct etcd_kv *kv, size_t pl)
{
	/* exactly the name a host gives its key: the lease in lower-case hex
	 * without padding ("0x1f", " 1f" or "001f" bound to someone's live
	 * lease would otherwise block the election while no node owns it) */
	char want[17];
	int n = snprintf(want, sizeof(want), "%" PRIx64, (uint64_t)kv->lease);
	return kv->lease > 0 && n > 0 && kv->key_len - pl == (size_t)n &&
	       memcmp(kv->key + pl, want, (size_t)n) == 0;
}

static void mirror_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	size_t pl;
	if (has_prefix(kv, e->k_members, &pl)) {
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
			member_set(e, id, idlen, false, NULL);
			/* our own record deleted behind our back: put it again */
			if (self && e->member_lease && kv->mod_revision > e->member_rev)
				e->member_lease = 0;
			return;
		}
		struct release r;
		bool ok = election_decode_member(kv->value, kv->value_len, &r) == 0;
		if (!ok)
			log_warn("election", "%s: member record %.*s is not a valid Member; its release is "
			         "unknown (it blocks an incompatible status change until fixed or deleted)",
			         e->name, (int)(idlen > 64 ? 64 : idlen), id);
		member_set(e, id, idlen, true, ok ? &r : NULL);
		/* our own record under our lease after a put whose outcome was
		 * unknown: it exists; step() keeps or deletes it */
		if (self && !e->member_lease && e->lease && ok && kv->lease == e->lease &&
		    e->op != OP_MEMBER_PUT) {
			e->member_lease = e->lease;
			e->member_release = r;
			e->member_rev = kv->mod_revision;
		}
		/* our own record overwritten by someone else: put ours again */
		if (self && e->member_lease && kv->mod_revision > e->member_rev &&
		    (!ok || kv->lease != e->member_lease || release_cmp(r, e->member_release) != 0))
			e->member_lease = 0;
	} else if (has_prefix(kv, e->k_election, &pl)) {
		if (kv->key_len == pl || memchr(kv->key, '\0', kv->key_len)) {
			log_debug("election", "%s: ignoring key outside the layout", e->name);
			return;
		}
		if (!del && !candidate_key_ok(kv, pl)) {
			/* not a live campaign: no lease, or a name that is not its lease
			 * (it would otherwise block the election forever) */
			log_warn("election", "%s: ignoring election key without a matching lease", e->name);
			cand_set(e, kv, true);
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
				depose(e, false, "our election key was deleted");
			e->my_rev = 0;
		}
		cand_set(e, kv, del);
	} else if (kv->key_len == strlen(e->k_status) &&
	           memcmp(kv->key, e->k_status, kv->key_len) == 0) {
		if (del)
			memset(&e->status, 0, sizeof(e->status));
		else {
			status_decode(kv->value, kv->value_len, &e->status);
			if (!e->status.valid)
				log_warn("election", "%s: status record is not a valid ReconcilerStatus; treated as absent",
				         e->name);
		}
	} else {
		log_debug("election", "%s: ignoring key outside the layout", e->name);
	}
}

/* publish - recompute {min,max}; tell a leading driver when it changed */
static void publish(struct election *e)
{
	/* the revision at which the member summary is valid: every member key
	 * has mod_revision <= members_rev (the seed's nodeReleases.revision) */
	struct releases r = {.min = e->rel.release, .max = e->rel.release, .revision = e->members_rev,
	                     .n_members = e->members.n - e->members.n_invalid};
	for (size_t i = 0; i < e->n_rc; i++) {
		if (release_less(e->rc[i].release, r.min))
			r.min = e->rc[i].release;
		if (release_less(r.max, e->rc[i].release))
			r.max = e->rc[i].release;
	}
	bool changed = release_cmp(r.min, e->releases.min) || release_cmp(r.max, e->releases.max) ||
	               r.revision != e->releases.revision || r.n_members != e->releases.n_members;
	e->releases = r;
	if (changed && e->leading && !e->draining && e->dops)
		e->dops->releases_changed(e->drv, &e->releases);
}

static void sync_start(struct election *e);

static void on_watch(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
                     size_t n, void *ud)
{
	struct election *e = ud;
	(void)w;
	if (err < 0) {
		/* compacted (or the watch died for good): resync from a fresh range */
		log_warn("election", "%s: watch ended (%s); resyncing", e->name, etcd_strerror(err));
		etcd_watch_cancel(e->watch);
		e->watch = NULL;
		e->synced = false;
		loop_timer_arm_in(e->sync_timer, 0);
		return;
	}
	for (size_t i = 0; i < n; i++)
		mirror_apply(e, &ev[i].kv, ev[i].type == ETCD_EVENT_DELETE);
	/* The mirror is complete up to the last event's revision; only a progress
	 * notification vouches for its header revision (a catching-up watcher's
	 * header may be ahead of events still to come). */
	int64_t rev = n > 0 ? ev[n - 1].kv.mod_revision : revision;
	if (rev > e->rev)
		e->rev = rev;
	publish(e);
	step(e);
}

static void on_sync_range(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	e->call = NULL;
	e->op = OP_NONE;
	if (err < 0) {
		log_warn("election", "%s: initial read failed: %s; retrying", e->name, etcd_strerror(err));
		if (e->stopping) {
			step(e); /* a stop waits for nothing etcd-bound that never started */
			return;
		}
		loop_timer_arm_in(e->sync_timer, e->sync_backoff);
		e->sync_backoff = e->sync_backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
		                                                         : e->sync_backoff * 2;
		return;
	}
	member_map_clear(&e->members);
	e->n_rc = 0;
	cands_clear(e);
	memset(&e->status, 0, sizeof(e->status));
	for (size_t i = 0; i < r->n_kvs; i++)
		mirror_apply(e, &r->kvs[i], false);
	e->rev = r->header.revision;
	e->members_rev = r->header.revision;
	int rc = etcd_watch_start(e->etcd, e->k_election, strlen(e->k_election), e->k_watch_end,
	                          e->k_watch_end_len, e->rev + 1, ETCD_WATCH_PROGRESS_NOTIFY,
	                          on_watch, e, &e->watch);
	if (rc < 0) {
		loop_timer_arm_in(e->sync_timer, e->sync_backoff);
		return;
	}
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
				depose(e, false, "our election key is gone");
			e->my_rev = 0;
		}
	}
	publish(e);
	step(e);
}

static void sync_start(struct election *e)
{
	if (e->stopping && !e->leading)
		return;
	if (e->op != OP_NONE) {
		/* the control path is busy; try again shortly */
		loop_timer_arm_in(e->sync_timer, 10 * LOOP_NS_PER_MS);
		return;
	}
	struct etcd_op op = {.type = ETCD_OP_RANGE,
	                     .key = e->k_election,
	                     .key_len = strlen(e->k_election),
	                     .range_end = e->k_watch_end,
	                     .range_end_len = e->k_watch_end_len};
	e->op = OP_SYNC;
	int r = etcd_range(e->etcd, &op, NULL, on_sync_range, e, &e->call);
	if (r < 0) {
		e->op = OP_NONE;
		loop_timer_arm_in(e->sync_timer, e->sync_backoff);
	}
}

static void on_sync_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	if (!e->synced && !e->watch)
		sync_start(e);
}

/* ---- control path helpers ---- */

static void retry_later(struct election *e, const char *what, int err)
{
	if (err == -ENOENT) /* "lease not found": let the session find out now */
		session_poke(e->sess);
	log_warn("election", "%s: %s failed: %s; retrying in %" PRIu64 " ms", e->name, what,
	         etcd_strerror(err), e->retry_backoff / LOOP_NS_PER_MS);
	loop_timer_arm_in(e->retry_timer, e->retry_backoff);
	e->retry_backoff = e->retry_backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S
	                                                           : e->retry_backoff * 2;
}

static void on_retry_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	step(ud);
}

static void op_done(struct election *e)
{
	e->op = OP_NONE;
	e->call = NULL;
}

static void on_member_put(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	if (err < 0) {
		e->member_lease = 0; /* unknown outcome: put again (idempotent) */
		retry_later(e, "member registration", err);
		return;
	}
	if (r->header.revision > e->member_rev)
		e->member_rev = r->header.revision;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	step(e);
}

static void member_put(struct election *e)
{
	uint8_t *v;
	size_t vlen;
	if (member_encode(e, e->rel.release, &v, &vlen) < 0)
		return;
	struct etcd_op op = {.type = ETCD_OP_PUT,
	                     .key = e->k_member_self,
	                     .key_len = strlen(e->k_member_self),
	                     .value = v,
	                     .value_len = vlen,
	                     .lease = e->lease};
	e->op = OP_MEMBER_PUT;
	/* optimistic: a failure resets it in the callback path via retry */
	int64_t prev_lease = e->member_lease;
	struct release prev_rel = e->member_release;
	e->member_lease = e->lease;
	e->member_release = e->rel.release;
	int r = etcd_put(e->etcd, &op, NULL, on_member_put, e, &e->call);
	free(v);
	if (r < 0) {
		e->op = OP_NONE;
		e->member_lease = prev_lease;
		e->member_release = prev_rel;
		retry_later(e, "member registration", r);
	}
}

static void on_member_del(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	(void)r;
	op_done(e);
	if (err < 0) {
		retry_later(e, "member removal", err);
		return;
	}
	e->member_lease = 0;
	step(e);
}

static void member_del(struct election *e)
{
	struct etcd_op op = {.type = ETCD_OP_DELETE,
	                     .key = e->k_member_self,
	                     .key_len = strlen(e->k_member_self)};
	e->op = OP_MEMBER_DEL;
	int r = etcd_delete(e->etcd, &op, NULL, on_member_del, e, &e->call);
	if (r < 0) {
		e->op = OP_NONE;
		retry_later(e, "member removal", r);
	}
}

/* key_write_known - a campaign or resign txn answered: our key's state at
 * revision rev is known (it is linearizable), older unknowns are settled */
static void key_write_known(struct election *e, int64_t rev)
{
	if (rev > e->key_wrev)
		e->key_wrev = rev;
	e->key_wunknown = false;
}

static void on_campaign(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	if (err < 0) {
		/* unknown outcome is fine: the txn is idempotent (create-if-absent, else read) */
		e->key_wunknown = true;
		retry_later(e, "campaign", err);
		return;
	}
	key_write_known(e, r->header.revision);
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	if (r->succeeded) {
		e->my_rev = r->header.revision;
	} else if (r->n_responses == 1 && r->responses[0].n_kvs == 1) {
		const struct etcd_kv *kv = &r->responses[0].kvs[0];
		if (kv->lease != e->lease) {
			/* a key of our name under another lease: not ours; it dies with that lease */
			log_warn("election", "%s: election key %s belongs to lease %" PRIx64 "; waiting",
			         e->name, e->my_key, (uint64_t)kv->lease);
			loop_timer_arm_in(e->retry_timer, 500 * LOOP_NS_PER_MS);
			return;
		}
		e->my_rev = kv->create_revision;
	} else {
		retry_later(e, "campaign", -EBADMSG);
		return;
	}
	log_info("election", "%s: campaigning (key %s, revision %" PRId64 ")", e->name, e->my_key,
	         e->my_rev);
	step(e);
}

static void campaign(struct election *e)
{
	snprintf(e->my_key, sizeof(e->my_key), "%s%" PRIx64, e->k_election, (uint64_t)e->lease);
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                           .key = e->my_key, .key_len = kl, .number = 0};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = e->my_key, .key_len = kl,
	                      .value = e->node_id, .value_len = strlen(e->node_id), .lease = e->lease};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	e->op = OP_CAMPAIGN;
	int r = etcd_txn(e->etcd, &cmp, 1, &put, 1, &get, 1, NULL, on_campaign, e, &e->call);
	if (r < 0) {
		e->op = OP_NONE;
		retry_later(e, "campaign", r);
	}
}

static void on_resign(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	if (err < 0) {
		/* a failed resign keeps the key; retry under the same compare */
		e->key_wunknown = true;
		e->resign_publishes = false;
		e->resign_drops_member = false;
		retry_later(e, "resign", err);
		return;
	}
	key_write_known(e, r->header.revision);
	if (r->succeeded && e->resign_publishes) {
		/* the member record carries the incoming release already */
		e->member_release = e->resign_release;
		e->member_lease = e->lease;
		if (r->header.revision > e->member_rev)
			e->member_rev = r->header.revision;
	}
	if (r->succeeded && e->resign_drops_member)
		e->member_lease = 0;
	e->resign_publishes = false;
	e->resign_drops_member = false;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	e->my_rev = 0;
	step(e);
}

static bool want_member(const struct election *e);
static bool left_to_revoke(struct election *e);

/* leaving_membership - our member record is to go: we are leaving for good */
static bool leaving_membership(const struct election *e)
{
	return !want_member(e) && e->member_lease && e->lease && (e->held || e->stopping || e->failed);
}

/* resign - delete our election key (compare: still our key). When a driver
 * swap is pending, the same txn publishes the incoming release in our member
 * record: peers then see our key vanish and the newer release at one
 * revision, so none of them wins in between (no flip-flop on a leader's own
 * hot reload). When we leave for good (stop, role removed, failure), the same
 * txn deletes our member record: peers see one change, and a shutdown's
 * cleanup puts one write less beside the successor's first ones. */
static void resign(struct election *e)
{
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                           .key = e->my_key, .key_len = kl, .number = e->my_rev};
	struct etcd_op ops[2] = {{.type = ETCD_OP_DELETE, .key = e->my_key, .key_len = kl}};
	size_t n_ops = 1;
	uint8_t *v = NULL;
	size_t vlen = 0;
	e->resign_publishes = false;
	if (e->swap.pending && e->lease && e->member_lease == e->lease &&
	    member_encode(e, e->swap.rel.release, &v, &vlen) == 0) {
		ops[1] = (struct etcd_op){.type = ETCD_OP_PUT, .key = e->k_member_self,
		                          .key_len = strlen(e->k_member_self), .value = v,
		                          .value_len = vlen, .lease = e->lease};
		n_ops = 2;
		e->resign_publishes = true;
		e->resign_release = e->swap.rel.release;
	} else if (leaving_membership(e)) {
		ops[1] = (struct etcd_op){.type = ETCD_OP_DELETE, .key = e->k_member_self,
		                          .key_len = strlen(e->k_member_self)};
		n_ops = 2;
		e->resign_drops_member = true;
	}
	e->op = OP_RESIGN;
	int r = etcd_txn(e->etcd, &cmp, 1, ops, n_ops, NULL, 0, NULL, on_resign, e, &e->call);
	free(v);
	if (r < 0) {
		e->op = OP_NONE;
		e->resign_publishes = false;
		e->resign_drops_member = false;
		retry_later(e, "resign", r);
	}
}

/* ---- leadership ---- */

static void lead_reset(struct election *e)
{
	e->phase = LP_NONE;
	e->reconciling = false;
	loop_timer_disarm(e->lead_timer);
	free(e->pending_status);
	e->pending_status = NULL;
	e->pending_readback = false;
}

/* depose - leadership ends. graceful: called after the driver drained. */
static void depose(struct election *e, bool graceful, const char *why)
{
	if (!e->leading)
		return;
	e->leading = false;
	e->draining = false;
	e->gen++;
	if (e->op == OP_LEAD) {
		etcd_call_cancel(e->call);
		op_done(e);
	}
	lead_reset(e);
	log_info("election", "%s: %s leadership: %s", e->name, graceful ? "leaving" : "lost", why);
	if (e->dops)
		e->dops->deposed(e->drv);
}

/* drv_ctx - what a driver callback (drain done, reconcile done) carries.
 * The election keeps every one it handed out (e->drv_ctxs). election_free
 * orphans those still owed (e = NULL) onto g_orphan_ctxs: a driver that
 * outlives the election (a retired instance still stopping) may still call
 * back, and then only frees the context; one that never calls back (freed
 * at exit) leaves it reachable, not leaked. Loop thread only. */
struct drv_ctx {
	struct drv_ctx *next, *prev;
	struct election *e; /* NULL: orphaned by election_free */
	uint64_t gen;
	bool periodic; /* reconcile: a periodic one */
};

static struct drv_ctx *g_orphan_ctxs;

static struct drv_ctx *drv_ctx_new(struct election *e)
{
	struct drv_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->e = e;
	c->gen = e->gen;
	c->next = e->drv_ctxs;
	if (c->next)
		c->next->prev = c;
	e->drv_ctxs = c;
	return c;
}

static void drv_ctx_unlink(struct drv_ctx *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (c->e)
		c->e->drv_ctxs = c->next;
	else
		g_orphan_ctxs = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void drv_ctx_free(struct drv_ctx *c)
{
	drv_ctx_unlink(c);
	free(c);
}

/* the election of c, or NULL (c freed) when election_free orphaned it */
static struct election *drv_ctx_election(struct drv_ctx *c)
{
	if (c->e)
		return c->e;
	drv_ctx_free(c);
	return NULL;
}

static void on_drained(void *ud)
{
	struct drv_ctx *d = ud;
	struct election *e = drv_ctx_election(d);
	if (!e)
		return;
	bool current = d->gen == e->gen && e->draining;
	drv_ctx_free(d);
	if (!current)
		return;
	depose(e, true, "drained");
	step(e);
}

static void begin_leave(struct election *e)
{
	struct drv_ctx *d = e->dops ? drv_ctx_new(e) : NULL;
	if (!d) {
		depose(e, true, "leaving");
		return;
	}
	e->draining = true;
	/* no new lead steps while draining */
	loop_timer_disarm(e->lead_timer);
	e->dops->drain(e->drv, on_drained, d);
}

static bool want_member(const struct election *e)
{
	return e->lease && !e->held && !e->stopping && !e->failed && e->dops && !e->swap.pending;
}

static bool want_campaign(const struct election *e)
{
	/* a candidate needs its member record in place; a leader whose record
	 * was overwritten puts it back without leaving */
	bool member_ok = e->member_lease == e->lease &&
	                 release_cmp(e->member_release, e->rel.release) == 0;
	return want_member(e) && (member_ok || e->leading) && e->ever_synced &&
	       !release_less(e->rel.release, e->releases.max);
}

static void on_verify(struct etcd_client *c, int err, const struct etcd_response *r, void *ud);
static void lead_decide(struct election *e, const struct status_rec *st);

/* elect - leadership begins: on_elected, then the seed's branches on st */
static void elect(struct election *e, const struct status_rec *status)
{
	struct status_rec s = *status;
	if (s.present && !s.valid) {
		log_warn("election", "%s: status record is not valid; treated as absent", e->name);
		memset(&s, 0, sizeof(s));
	}
	e->leading = true;
	e->gen++;
	e->lead_backoff = 100 * LOOP_NS_PER_MS;
	log_info("election", "%s: elected (fencing token %" PRId64 ")", e->name, e->my_rev);
	e->dops->elected(e->drv, e->my_rev, &e->releases);
	lead_decide(e, &s);
}

/* become_leader - our key is the lowest in the mirror.
 *
 * DESIGN asks to re-check the own key and the remaining TTL after winning,
 * before on_elected (etcd #19597: the Go client's Campaign watches only the
 * lower keys, so it can "win" after its own key expired). The TTL check is
 * local (the session's deadline). The key check is the mirror itself when it
 * provably covers our own key: it is a gap-free copy of the prefix at
 * revision e->rev, our key is in it with our create_revision, and every
 * write we made to our key (campaign, resign) has a known outcome at a
 * revision <= e->rev. After e->rev the key can only go by lease expiry
 * (ruled out by the deadline), by our own writes (all seen, none pending:
 * step() does not get here with one in flight), or by someone else's delete,
 * which a read could not rule out either (it can come right after the read).
 * A lagging watch can otherwise show us our key after we deleted it (a
 * resign whose reply was lost, a stale put event): then, or while the mirror
 * resyncs, the key and the status are read back in one linearizable txn
 * first. No lower key can appear later (new keys get higher revisions), and
 * an earlier leader's status writes precede its key's deletion, so the
 * mirrored status is the one to decide on. */
static void become_leader(struct election *e)
{
	uint64_t safe = session_safe_until(e->sess), now = loop_now();
	if (!session_is_up(e->sess) || safe < now + 100 * LOOP_NS_PER_MS) {
		loop_timer_arm_in(e->retry_timer, 50 * LOOP_NS_PER_MS);
		return;
	}
	if (e->synced && !e->key_wunknown && e->rev >= e->key_wrev) {
		elect(e, &e->status);
		return;
	}
	size_t kl = strlen(e->my_key);
	struct etcd_op ops[2] = {
		{.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl},
		{.type = ETCD_OP_RANGE, .key = e->k_status, .key_len = strlen(e->k_status)},
	};
	e->op = OP_LEAD;
	e->phase = LP_VERIFY;
	int r = etcd_txn(e->etcd, NULL, 0, ops, 2, NULL, 0, NULL, on_verify, e, &e->call);
	if (r < 0) {
		op_done(e);
		e->phase = LP_NONE;
		retry_later(e, "leadership check", r);
	}
}

static bool status_equal(const struct status_rec *s, int state, struct release v, struct release m)
{
	return s->present && s->valid && s->state == state && release_cmp(s->version, v) == 0 &&
	       release_cmp(s->min_compatible, m) == 0;
}

static void on_verify(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	e->phase = LP_NONE;
	if (err < 0) {
		retry_later(e, "leadership check", err);
		return;
	}
	if (r->n_responses != 2) {
		retry_later(e, "leadership check", -EBADMSG);
		return;
	}
	/* a linearizable answer about our key: earlier unknowns are settled */
	e->key_wunknown = false;
	const struct etcd_response *mine = &r->responses[0], *st = &r->responses[1];
	if (mine->n_kvs != 1 || mine->kvs[0].create_revision != e->my_rev) {
		log_warn("election", "%s: our election key is gone; campaigning again", e->name);
		e->my_rev = 0;
		step(e);
		return;
	}
	if (!session_is_up(e->sess) ||
	    session_safe_until(e->sess) < loop_now() + 100 * LOOP_NS_PER_MS || !want_campaign(e)) {
		step(e);
		return;
	}
	/* Still the lowest? (the mirror said so; the key check above is linearizable) */
	const struct candidate *low = cand_lowest(e);
	if (!low || low->create_rev != e->my_rev) {
		step(e);
		return;
	}
	struct status_rec s = {0};
	if (st->n_kvs == 1)
		status_decode(st->kvs[0].value, st->kvs[0].value_len, &s);
	elect(e, &s);
	step(e);
}

/* lead_decide - the seed's branches on the status read right after election */
static void lead_decide(struct election *e, const struct status_rec *st)
{
	struct release rel = e->rel.release, mcr = e->rel.min_compatible;
	e->status_existed = st->present;
	e->status_is_done = status_equal(st, ST_DONE, rel, mcr);
	free(e->pending_status);
	e->pending_status = NULL;
	if (!st->present) {
		log_info("election", "%s: no status yet; reconciling first", e->name);
		e->phase = LP_RECONCILE;
	} else if (e->status_is_done) {
		log_info("election", "%s: status already up to date", e->name);
		e->phase = LP_WAIT;
	} else if (!release_less(rel, st->version) && !release_less(st->min_compatible, mcr)) {
		log_info("election", "%s: status is compatible; setting state WORKING", e->name);
		if (st->state != ST_WORKING)
			status_encode(ST_WORKING, st->version, st->min_compatible, &e->pending_status,
			              &e->pending_status_len);
		e->pending_status_state = ST_WORKING;
		e->phase = LP_WAIT;
	} else {
		log_info("election", "%s: status allows incompatible releases; restricting", e->name);
		e->restrict_version = release_less(st->version, rel) ? st->version : rel;
		e->restrict_min_compatible = release_less(st->min_compatible, mcr) ? mcr : st->min_compatible;
		e->restrict_tried_rev = 0;
		e->restrict_logged = false;
		e->phase = LP_RESTRICT;
	}
	if (e->phase == LP_WAIT)
		e->lead_log_after = 0;
}

static void on_status_written(struct etcd_client *c, int err, const struct etcd_response *r,
                              void *ud);

static void write_status(struct election *e, bool guard_members)
{
	size_t kl = strlen(e->my_key);
	struct etcd_compare cmps[2] = {
		{.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .key = e->my_key, .key_len = kl,
		 .number = e->my_rev},
		{.target = ETCD_CMP_MOD, .result = ETCD_CMP_LESS, .key = e->k_members,
		 .key_len = strlen(e->k_members), .range_end = e->k_members_end,
		 .range_end_len = e->k_members_end_len, .number = e->releases.revision + 1},
	};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = e->k_status, .key_len = strlen(e->k_status),
	                      .value = e->pending_status, .value_len = e->pending_status_len};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	e->op = OP_LEAD;
	if (guard_members)
		e->restrict_tried_rev = e->releases.revision;
	int r = etcd_txn(e->etcd, cmps, guard_members ? 2 : 1, &put, 1, &get, 1, NULL,
	                 on_status_written, e, &e->call);
	if (r < 0) {
		op_done(e);
		e->restrict_tried_rev = 0;
		retry_later(e, "status write", r);
	}
}

static void on_readback(struct etcd_client *c, int err, const struct etcd_response *r, void *ud);

static void readback_status(struct election *e)
{
	size_t kl = strlen(e->my_key);
	struct etcd_op ops[2] = {
		{.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl},
		{.type = ETCD_OP_RANGE, .key = e->k_status, .key_len = strlen(e->k_status)},
	};
	e->op = OP_LEAD;
	int r = etcd_txn(e->etcd, NULL, 0, ops, 2, NULL, 0, NULL, on_readback, e, &e->call);
	if (r < 0) {
		op_done(e);
		retry_later(e, "status read-back", r);
	}
}

static void status_write_succeeded(struct election *e)
{
	e->status_writes++;
	if (e->pending_status_state == ST_DONE)
		e->status_is_done = true;
	free(e->pending_status);
	e->pending_status = NULL;
	e->pending_readback = false;
	if (e->phase == LP_RESTRICT) {
		e->phase = LP_WAIT;
		e->status_existed = true;
	}
}

static void on_status_written(struct etcd_client *c, int err, const struct etcd_response *r,
                              void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	if (err < 0) {
		/* the outcome may be unknown (timeout, lost connection, garbled
		 * answer): read back before writing again */
		log_warn("election", "%s: status write failed: %s; reading back", e->name,
		         etcd_strerror(err));
		e->pending_readback = true;
		if (e->restrict_tried_rev == e->releases.revision)
			e->restrict_tried_rev = 0;
		retry_later(e, "status write", err);
		return;
	}
	if (r->succeeded) {
		status_write_succeeded(e);
		step(e);
		return;
	}
	/* failed: fence or (restrict) members changed since our decision */
	bool still = r->n_responses == 1 && r->responses[0].n_kvs == 1 &&
	             r->responses[0].kvs[0].create_revision == e->my_rev;
	if (!still) {
		depose(e, false, "fenced status write failed: no longer leader");
		e->my_rev = 0;
		step(e);
		return;
	}
	log_info("election", "%s: members changed since the decision; retrying the status write", e->name);
	step(e);
}

static void on_readback(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct election *e = ud;
	(void)c;
	op_done(e);
	if (err < 0 || r->n_responses != 2) {
		retry_later(e, "status read-back", err < 0 ? err : -EBADMSG);
		return;
	}
	const struct etcd_response *mine = &r->responses[0], *st = &r->responses[1];
	if (mine->n_kvs != 1 || mine->kvs[0].create_revision != e->my_rev) {
		depose(e, false, "our election key is gone");
		e->my_rev = 0;
		step(e);
		return;
	}
	e->pending_readback = false;
	e->retry_backoff = 100 * LOOP_NS_PER_MS;
	if (st->n_kvs == 1 && e->pending_status && st->kvs[0].value_len == e->pending_status_len &&
	    memcmp(st->kvs[0].value, e->pending_status, e->pending_status_len) == 0) {
		status_write_succeeded(e);
	}
	step(e);
}

static void on_reconciled(void *ud, int err, const char *msg)
{
	struct drv_ctx *rc = ud;
	struct election *e = drv_ctx_election(rc);
	if (!e)
		return;
	bool current = rc->gen == e->gen && e->leading;
	bool periodic = rc->periodic;
	drv_ctx_free(rc);
	/* stats count every finished reconcile, current or not */
	if (err != -ECANCELED) {
		e->reconcile_count++;
		e->reconcile_last_ok = err == 0;
		e->reconcile_last_at = (int64_t)time(NULL);
		free(e->reconcile_last_error);
		e->reconcile_last_error = NULL;
		if (err != 0)
			e->reconcile_last_error = strdup(msg && *msg ? msg : etcd_strerror(err));
	}
	if (!current)
		return;
	e->reconciling = false;
	if (err == 0) {
		if (!periodic)
			log_info("election", "%s: initial reconcile succeeded", e->name);
		e->lead_backoff = 100 * LOOP_NS_PER_MS;
		if (!e->status_is_done && !periodic) {
			free(e->pending_status);
			status_encode(ST_DONE, e->rel.release, e->rel.min_compatible, &e->pending_status,
			              &e->pending_status_len);
			e->pending_status_state = ST_DONE;
		}
		e->phase = LP_IDLE;
		loop_timer_arm_in(e->lead_timer, e->reconcile_interval_ns);
	} else if (periodic) {
		log_warn("election", "%s: reconcile failed: %s", e->name, msg && *msg ? msg : etcd_strerror(err));
		e->phase = LP_IDLE;
		loop_timer_arm_in(e->lead_timer, e->reconcile_interval_ns);
	} else {
		uint64_t now = loop_now();
		if (now >= e->lead_log_after) {
			log_warn("election", "%s: initial reconcile failed: %s; retrying with backoff",
			         e->name, msg && *msg ? msg : etcd_strerror(err));
			e->lead_log_after = now + 10 * LOOP_NS_PER_S;
		}
		e->phase = LP_RECONCILE;
		loop_timer_arm_in(e->lead_timer, e->lead_backoff);
		uint64_t nb = e->lead_backoff * 3 / 2;
		e->lead_backoff = nb > 10 * LOOP_NS_PER_S ? 10 * LOOP_NS_PER_S : nb;
	}
	step(e);
}

static void start_reconcile(struct election *e, bool periodic)
{
	struct drv_ctx *rc = drv_ctx_new(e);
	if (!rc) {
		loop_timer_arm_in(e->lead_timer, 100 * LOOP_NS_PER_MS);
		return;
	}
	rc->periodic = periodic;
	e->phase = periodic ? LP_PERIODIC : LP_RECONCILE;
	e->reconciling = true;
	e->dops->reconcile(e->drv, on_reconciled, rc);
}

static void on_lead_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	if (!e->leading || e->draining)
		return;
	if (e->phase == LP_WAIT)
		e->phase = LP_RECONCILE;
	else if (e->phase == LP_IDLE && !e->reconciling) {
		start_reconcile(e, true);
		return;
	}
	step(e);
}

/* lead_step - the next leader action, if none is in flight */
static void lead_step(struct election *e)
{
	if (!e->leading || e->draining || e->op != OP_NONE)
		return;
	if (e->pending_readback) {
		readback_status(e);
		return;
	}
	switch (e->phase) {
	case LP_RESTRICT: {
		if (release_less(e->rel.release, e->releases.max))
			return; /* a newer release appeared: we are about to leave */
		if (e->members.n_invalid > 0) {
			if (!e->restrict_logged_invalid) {
				log_warn("election", "%s: %zu member record(s) do not decode; their nodes may run "
				         "an older release, so the incompatible status change waits (fix or "
				         "delete them)",
				         e->name, e->members.n_invalid);
				e->restrict_logged_invalid = true;
			}
			return;
		}
		e->restrict_logged_invalid = false;
		if (release_less(e->releases.min, e->rel.min_compatible)) {
			if (!e->restrict_logged ||
			    release_cmp(e->restrict_logged_min, e->releases.min) != 0) {
				char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
				log_info("election", "%s: waiting for members below %s to go (oldest: %s)",
				         e->name, release_format(e->rel.min_compatible, a, sizeof(a)),
				         release_format(e->releases.min, b, sizeof(b)));
				e->restrict_logged = true;
				e->restrict_logged_min = e->releases.min;
			}
			return;
		}
		if (e->restrict_tried_rev == e->releases.revision)
			return; /* wait for the watch to show the change that failed us */
		if (!e->pending_status) {
			if (status_encode(ST_WORKING, e->restrict_version, e->restrict_min_compatible,
			                  &e->pending_status, &e->pending_status_len) < 0)
				return;
			e->pending_status_state = ST_WORKING;
		}
		write_status(e, true);
		return;
	}
	case LP_WAIT:
		if (e->pending_status) {
			write_status(e, false);
			return;
		}
		if (!loop_timer_armed(e->lead_timer)) {
			if (e->status_existed && e->reconcile_wait_ns > 0)
				loop_timer_arm_in(e->lead_timer, e->reconcile_wait_ns);
			else
				e->phase = LP_RECONCILE;
		}
		if (e->phase != LP_RECONCILE)
			return;
		/* fall through */
		__attribute__((fallthrough));
	case LP_RECONCILE:
		if (e->reconciling || loop_timer_armed(e->lead_timer))
			return; /* running, or in backoff */
		start_reconcile(e, false);
		return;
	case LP_IDLE:
		if (e->pending_status) {
			write_status(e, false);
			return;
		}
		return;
	case LP_NONE:
	case LP_VERIFY:
	case LP_PERIODIC:
		return;
	}
}

/* ---- the controller ---- */

static enum election_state current_state(const struct election *e)
{
	if (e->failed)
		return ELECTION_FAILED;
	if (e->stopping && !e->leading && !e->my_rev && !e->member_lease && e->op == OP_NONE)
		return ELECTION_STOPPED;
	if (!e->synced)
		return ELECTION_LOADING;
	if (e->leading)
		return ELECTION_LEADING;
	if (e->my_rev)
		return ELECTION_CAMPAIGNING;
	return ELECTION_STANDBY;
}

static void step(struct election *e)
{
	if (e->draining)
		return;
	if (e->op != OP_NONE)
		goto report;
	if (loop_timer_armed(e->retry_timer)) {
		/* backing off an etcd call; leaving leadership needs none */
		if (e->leading && !want_campaign(e))
			begin_leave(e);
		goto report;
	}

	/* 1. leave leadership / candidacy that is no longer wanted */
	if ((e->my_rev || e->leading) && !want_campaign(e)) {
		if (e->leading) {
			begin_leave(e);
			return;
		}
		if (e->lease && e->my_rev && !left_to_revoke(e)) {
			resign(e);
			goto report;
		}
		e->my_rev = 0;
	}
	/* 2. swap the driver once it is no longer used */
	if (e->swap.pending && !e->leading && !e->my_rev) {
		void (*done)(void *) = e->swap.done;
		void *ud = e->swap.ud;
		e->dops = e->swap.ops;
		e->drv = e->swap.drv;
		e->rel = e->swap.rel;
		memset(&e->swap, 0, sizeof(e->swap));
		publish(e);
		if (done)
			done(ud);
	}
	/* 3. member record */
	if (want_member(e) && (e->member_lease != e->lease ||
	                       release_cmp(e->member_release, e->rel.release) != 0)) {
		member_put(e);
		goto report;
	}
	if (leaving_membership(e) && !left_to_revoke(e)) {
		member_del(e);
		goto report;
	}
	/* 4. stop complete */
	if (e->stopping && !e->leading && !e->my_rev && (!e->member_lease || !e->lease)) {
		if (e->watch) {
			etcd_watch_cancel(e->watch);
			e->watch = NULL;
		}
		loop_timer_disarm(e->sync_timer);
		e->member_lease = 0;
		if (e->stop_done) {
			void (*done)(void *) = e->stop_done;
			e->stop_done = NULL;
			log_info("election", "%s: stopped", e->name);
			done(e->stop_ud);
		}
		goto report;
	}
	/* 5. campaign */
	if (want_campaign(e) && !e->my_rev) {
		campaign(e);
		goto report;
	}
	/* 6. win */
	if (e->my_rev && !e->leading) {
		const struct candidate *low = cand_lowest(e);
		if (low && low->create_rev == e->my_rev && strcmp(low->key, e->my_key) == 0)
			become_leader(e);
		if (!e->leading)
			goto report;
	}
	/* 7. lead */
	if (e->leading)
		lead_step(e);
report:;
	enum election_state s = current_state(e);
	if (s != e->state_reported) {
		log_debug("election", "%s: state %s -> %s", e->name, election_state_name(e->state_reported),
		          election_state_name(s));
		e->state_reported = s;
	}
	if (e->on_change)
		e->on_change(e->on_change_ud);
}

/* ---- plugin writes (driver_host) ---- */

struct fenced_ctx {
	struct fenced_ctx *next; /* in e->fenced, so election_free can orphan it */
	struct election *e;      /* NULL once the election is freed */
	uint64_t gen;
	etcd_cb cb;
	void *ud;
	size_t n_failure;
};

static void fenced_unlink(struct fenced_ctx *f)
{
	if (!f->e)
		return;
	for (struct fenced_ctx **pp = &f->e->fenced; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
}

static void on_fenced(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct fenced_ctx *f = ud;
	struct election *e = f->e;
	fenced_unlink(f);
	if (!e) {
		f->cb(c, -ESTALE, NULL, f->ud);
		free(f);
		return;
	}
	if (err < 0 || r->succeeded) {
		f->cb(c, err, r, f->ud);
		free(f);
		return;
	}
	/* the last failure response is our own key check */
	if (r->n_responses != f->n_failure + 1) {
		f->cb(c, -EBADMSG, NULL, f->ud);
		free(f);
		return;
	}
	const struct etcd_response *mine = &r->responses[r->n_responses - 1];
	bool still = mine->n_kvs == 1 && f->gen == e->gen && e->leading &&
	             mine->kvs[0].create_revision == e->my_rev;
	if (!still) {
		uint64_t gen = f->gen;
		f->cb(c, -ESTALE, NULL, f->ud);
		free(f);
		if (e->leading && gen == e->gen) {
			depose(e, false, "a fenced plugin write found us no longer leading");
			e->my_rev = 0;
			step(e);
		}
		return;
	}
	struct etcd_response copy = *r;
	copy.n_responses = r->n_responses - 1;
	f->cb(c, 0, &copy, f->ud);
	free(f);
}

static bool key_in(const void *k, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);
	return k && len >= n && memcmp(k, prefix, n) == 0;
}

static int bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

/* end_in - a range end keeps the range inside data/: data/ < end <= end(data/) */
static bool end_in(const void *end, size_t len, const struct election *e)
{
	if (!end)
		return true;
	size_t n = strlen(e->k_data);
	uint8_t pend[512];
	if (n > sizeof(pend) || len == 0)
		return false;
	size_t pl = etcd_prefix_end(e->k_data, n, pend);
	return bytes_cmp(end, len, e->k_data, n) > 0 && bytes_cmp(end, len, pend, pl) <= 0;
}

static int fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                      const struct etcd_op *success, size_t n_success,
                      const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud)
{
	struct election *e = ctx;
	if (!e->leading || !e->my_rev || !session_is_up(e->sess))
		return -ESTALE;
	/* before the first reconcile the status protocol may still be waiting
	 * (restricting the status, reconcile_wait): the plugin must not write yet */
	if (e->phase != LP_RECONCILE && e->phase != LP_IDLE && e->phase != LP_PERIODIC)
		return -EAGAIN;
	if (e->phase == LP_RECONCILE && !e->reconciling)
		return -EAGAIN; /* in backoff between attempts */
	if (n_cmps > 64 || n_success > 128 || n_failure > 128)
		return -E2BIG;
	for (size_t i = 0; i < n_cmps; i++)
		if (!key_in(cmps[i].key, cmps[i].key_len, e->k_data) ||
		    !end_in(cmps[i].range_end, cmps[i].range_end_len, e))
			return -EPERM;
	const struct etcd_op *lists[2] = {success, failure};
	size_t lens[2] = {n_success, n_failure};
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lens[l]; i++)
			if (!key_in(lists[l][i].key, lists[l][i].key_len, e->k_data) ||
			    !end_in(lists[l][i].range_end, lists[l][i].range_end_len, e) ||
			    (lists[l][i].type == ETCD_OP_PUT && lists[l][i].lease != 0))
				return -EPERM;

	struct etcd_compare *all = calloc(n_cmps + 1, sizeof(*all));
	struct etcd_op *fail = calloc(n_failure + 1, sizeof(*fail));
	struct fenced_ctx *f = malloc(sizeof(*f));
	int r = -ENOMEM;
	if (!all || !fail || !f)
		goto out;
	size_t kl = strlen(e->my_key);
	all[0] = (struct etcd_compare){.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                               .key = e->my_key, .key_len = kl, .number = e->my_rev};
	if (n_cmps)
		memcpy(all + 1, cmps, n_cmps * sizeof(*cmps));
	if (n_failure)
		memcpy(fail, failure, n_failure * sizeof(*failure));
	fail[n_failure] = (struct etcd_op){.type = ETCD_OP_RANGE, .key = e->my_key, .key_len = kl};
	f->e = e;
	f->next = NULL;
	f->gen = e->gen;
	f->cb = cb;
	f->ud = ud;
	f->n_failure = n_failure;
	struct etcd_call_opts o = {.timeout_ms = session_request_timeout_ms(e->sess)};
	r = etcd_txn(e->etcd, all, n_cmps + 1, success, n_success, fail, n_failure + 1, &o,
	             on_fenced, f, NULL);
	if (r == 0) {
		f->next = e->fenced;
		e->fenced = f;
		f = NULL;
	}
out:
	free(all);
	free(fail);
	free(f);
	return r;
}

/* ---- public ---- */

int election_new(struct loop *l, struct etcd_client *etcd, struct session *sess,
                 const struct election_config *cfg, struct election **ret)
{
	if (!cfg->prefix || !cfg->name || !cfg->node_id || !*cfg->name || !*cfg->node_id ||
	    strchr(cfg->node_id, '/') || strchr(cfg->name, '/'))
		return -EINVAL;
	struct election *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->loop = l;
	e->etcd = etcd;
	e->sess = sess;
	size_t pl = strlen(cfg->prefix);
	while (pl > 0 && cfg->prefix[pl - 1] == '/')
		pl--;
	e->prefix = strndup(cfg->prefix, pl);
	e->name = strdup(cfg->name);
	e->node_id = strdup(cfg->node_id);
	e->rel = cfg->releases;
	e->reconcile_wait_ns = cfg->reconcile_wait_ns;
	e->on_change = cfg->on_change;
	e->on_change_ud = cfg->on_change_ud;
	e->reconcile_interval_ns = cfg->reconcile_interval_ns ? cfg->reconcile_interval_ns
	                                                      : 30 * LOOP_NS_PER_S;
	int r = -ENOMEM;
	if (!e->prefix || !e->name || !e->node_id)
		goto fail;
	e->k_members = xasprintf("%s/%s/members/", e->prefix, e->name);
	e->k_member_self = xasprintf("%s/%s/members/%s", e->prefix, e->name, e->node_id);
	e->k_election = xasprintf("%s/%s/election/", e->prefix, e->name);
	e->k_status = xasprintf("%s/%s/status", e->prefix, e->name);
	e->k_data = xasprintf("%s/%s/data/", e->prefix, e->name);
	if (!e->k_members || !e->k_member_self || !e->k_election || !e->k_status || !e->k_data)
		goto fail;
	e->k_watch_end_len = strlen(e->k_status) + 1;
	e->k_watch_end = calloc(1, e->k_watch_end_len);
	e->k_members_end = malloc(strlen(e->k_members));
	if (!e->k_watch_end || !e->k_members_end)
		goto fail;
	memcpy(e->k_watch_end, e->k_status, e->k_watch_end_len - 1);
	e->k_members_end_len = etcd_prefix_end(e->k_members, strlen(e->k_members), e->k_members_end);
	r = loop_timer_new(l, on_sync_timer, e, &e->sync_timer);
	if (r == 0)
		r = loop_timer_new(l, on_retry_timer, e, &e->retry_timer);
	if (r == 0)
		r = loop_timer_new(l, on_lead_timer, e, &e->lead_timer);
	if (r < 0)
		goto fail;
	e->sync_backoff = e->retry_backoff = 100 * LOOP_NS_PER_MS;
	e->dhost.ctx = e;
	e->dhost.fenced_txn = fenced_txn;
	e->dhost.data_prefix = e->k_data;
	e->releases.min = e->releases.max = e->rel.release;
	*ret = e;
	return 0;
fail:
	election_free(e);
	return r;
}

const struct driver_host *election_driver_host(struct election *e)
{
	return &e->dhost;
}

void election_set_driver(struct election *e, const struct driver_ops *ops, void *drv,
                         const struct plugin_releases *rel, void (*done)(void *ud), void *ud)
{
	if (e->swap.pending) {
		/* superseded before it took effect: the previous new driver was never
		 * used; forget it before telling the owner (who may re-enter us) */
		void (*sdone)(void *) = e->swap.done;
		void *sud = e->swap.ud;
		memset(&e->swap, 0, sizeof(e->swap));
		if (sdone)
			sdone(sud);
	}
	if (!e->dops) {
		e->dops = ops;
		e->drv = drv;
		e->rel = *rel;
		publish(e);
		if (done)
			done(ud);
		step(e);
		return;
	}
	e->swap.pending = true;
	e->swap.ops = ops;
	e->swap.drv = drv;
	e->swap.rel = *rel;
	e->swap.done = done;
	e->swap.ud = ud;
	step(e);
}

int election_start(struct election *e)
{
	e->lease = session_lease(e->sess);
	sync_start(e);
	return 0;
}

void election_hold(struct election *e, bool hold, const char *reason)
{
	free(e->hold_reason);
	e->hold_reason = hold && reason ? strdup(reason) : NULL;
	e->held = hold;
	step(e);
}

void election_stop(struct election *e, void (*done)(void *ud), void *ud)
{
	e->stopping = true;
	e->stop_done = done;
	e->stop_ud = ud;
	step(e);
}

void election_stop_revoking(struct election *e, bool (*last)(void *ud), void (*done)(void *ud),
                            void *ud)
{
	e->stop_last = last;
	election_stop(e, done, ud);
}

/* left_to_revoke - a stopping election whose keys the caller's lease
 * revocation deletes next (election_stop_revoking): forget them here */
static bool left_to_revoke(struct election *e)
{
	if (!e->stopping || !e->stop_last || e->swap.pending || !e->stop_last(e->stop_ud))
		return false;
	log_info("election", "%s: leaving our keys to the lease revocation", e->name);
	e->my_rev = 0;
	e->member_lease = 0;
	return true;
}

void election_session_up(struct election *e, int64_t lease)
{
	e->lease = lease;
	snprintf(e->my_key, sizeof(e->my_key), "%s%" PRIx64, e->k_election, (uint64_t)lease);
	step(e);
}

void election_session_lost(struct election *e)
{
	if (e->leading)
		depose(e, false, "session lost");
	if (e->draining) {
		e->draining = false;
		depose(e, false, "session lost");
	}
	if (e->op == OP_MEMBER_PUT || e->op == OP_MEMBER_DEL || e->op == OP_CAMPAIGN ||
	    e->op == OP_RESIGN || e->op == OP_LEAD) {
		etcd_call_cancel(e->call);
		op_done(e);
	}
	loop_timer_disarm(e->retry_timer);
	e->lease = 0;
	e->member_lease = 0;
	e->my_rev = 0;
	step(e);
}

void election_fail(struct election *e, const char *reason)
{
	free(e->fail_reason);
	e->fail_reason = reason ? strdup(reason) : NULL;
	e->failed = true;
	if (e->leading)
		depose(e, false, reason ? reason : "failed");
	step(e);
}

void election_recover(struct election *e)
{
	if (!e->failed)
		return;
	free(e->fail_reason);
	e->fail_reason = NULL;
	e->failed = false;
	step(e);
}

void election_free(struct election *e)
{
	if (!e)
		return;
	/* plugin txns still in flight answer -ESTALE without touching us */
	while (e->fenced) {
		struct fenced_ctx *f = e->fenced;
		e->fenced = f->next;
		f->e = NULL;
	}
	while (e->drv_ctxs) {
		struct drv_ctx *c = e->drv_ctxs;
		drv_ctx_unlink(c);
		c->e = NULL;
		c->next = g_orphan_ctxs;
		if (c->next)
			c->next->prev = c;
		g_orphan_ctxs = c;
	}
	if (e->watch)
		etcd_watch_cancel(e->watch);
	etcd_call_cancel(e->call);
	loop_timer_free(e->sync_timer);
	loop_timer_free(e->retry_timer);
	loop_timer_free(e->lead_timer);
	member_map_clear(&e->members);
	cands_clear(e);
	free(e->cands);
	free(e->rc);
	free(e->pending_status);
	free(e->reconcile_last_error);
	free(e->hold_reason);
	free(e->fail_reason);
	free(e->k_members);
	free(e->k_member_self);
	free(e->k_election);
	free(e->k_status);
	free(e->k_data);
	free(e->k_watch_end);
	free(e->k_members_end);
	free(e->prefix);
	free(e->name);
	free(e->node_id);
	free(e);
}

const char *election_name(const struct election *e)
{
	return e->name;
}

void election_get_info(struct election *e, struct election_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->state = current_state(e);
	const struct candidate *low = cand_lowest(e);
	ret->leader = low ? low->node_id : NULL;
	ret->releases = e->releases;
	ret->status_present = e->status.present;
	ret->status_valid = e->status.valid;
	ret->status_state = e->status.state;
	ret->status_version = e->status.version;
	ret->status_min_compatible = e->status.min_compatible;
	ret->ready = e->status.valid && election_status_ready(&e->rel, true, e->status.version,
	                                                      e->status.min_compatible);
	ret->reconcile_count = e->reconcile_count;
	ret->reconcile_last_ok = e->reconcile_last_ok;
	ret->reconcile_last_error = e->reconcile_last_error;
	ret->reconcile_last_at = e->reconcile_last_at;
	ret->fencing_token = e->leading ? e->my_rev : 0;
	ret->status_writes = e->status_writes;
	if (e->failed)
		ret->held_back = e->fail_reason;
	else if (e->held)
		ret->held_back = e->hold_reason;
	else if (e->synced && release_less(e->rel.release, e->releases.max))
		ret->held_back = "a newer release is present";
	else if (!e->lease)
		ret->held_back = "no etcd session";
}

size_t election_members(struct election *e, struct election_member *out, size_t max)
{
	const struct candidate *low = cand_lowest(e);
	size_t k = 0;
	for (size_t i = 0; i < e->members.n_buckets; i++)
		for (struct member_ent *x = e->members.buckets[i]; x; x = x->next) {
			if (!x->valid)
				continue; /* release unknown: not listed (it is logged) */
			if (k < max) {
				out[k].node_id = x->node_id;
				out[k].release = x->release;
				out[k].leader = low && strcmp(low->node_id, x->node_id) == 0;
			}
			k++;
		}
	return k;
}
