/* SPDX-License-Identifier: MIT */
/*
 * election_records.c - the records the election reads and writes in etcd
 * (proto/leasehold.proto: Member under P/N/members/, ReconcilerStatus at
 * P/N/status), the readiness rule on the status (the reference
 * algorithm's WaitReady) and the name of a live election key. Decoders
 * take hostile bytes. The release rule fed from the mirror is in
 * election_rule_mirror.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_internal.h"
#include "proto/leasehold.pb-c.h"

static bool election_records_release_from_pb(const Leasehold__Release *p, struct release *ret)
{
	if (!p)
		return false;
	ret->major = p->major;
	ret->minor = p->minor;
	ret->patch = p->patch;
	return true;
}

static void election_records_release_to_pb(struct release r, Leasehold__Release *ret)
{
	*ret = (Leasehold__Release)LEASEHOLD__RELEASE__INIT;
	ret->major = r.major;
	ret->minor = r.minor;
	ret->patch = r.patch;
}

int election_decode_status(const void *buf, size_t len, int *ret_state, struct release *ret_version,
                           struct release *ret_min_compatible)
{
	Leasehold__ReconcilerStatus *s = leasehold__reconciler_status__unpack(NULL, len, buf);
	if (!s)
		return -EBADMSG;
	struct release v, m;
	int r = -EBADMSG;
	/* like the reference algorithm (proto3 keeps unknown enum values), an
	 * unknown state is a state: only the releases decide compatibility */
	if (election_records_release_from_pb(s->version, &v) && election_records_release_from_pb(s->minimum_compatible_release, &m)) {
		*ret_state = s->state;
		*ret_version = v;
		*ret_min_compatible = m;
		r = 0;
	}
	leasehold__reconciler_status__free_unpacked(s, NULL);
	return r;
}

int election_decode_member_rule(const void *buf, size_t len, struct rule_release *ret_rr,
                                int32_t *ret_priority)
{
	Leasehold__Member *m = leasehold__member__unpack(NULL, len, buf);
	if (!m)
		return -EBADMSG;
	struct rule_release rr = {.declared = false};
	int r = election_records_release_from_pb(m->release, &rr.release) ? 0 : -EBADMSG;
	/* all three or none: a record that declares only some is read as one of
	 * an older host (the reference rule for its node), fail safe */
	if (r == 0 && m->rollout != LEASEHOLD__MEMBER__ROLLOUT__ROLLOUT_UNDECLARED &&
	    election_records_release_from_pb(m->min_compatible_release, &rr.min_compatible) &&
	    election_records_release_from_pb(m->min_reconciler_release, &rr.min_reconciler)) {
		rr.declared = true;
		/* a rule value of a newer host that this one does not know: the
		 * reference rule, the stricter one */
		rr.reference = m->rollout != LEASEHOLD__MEMBER__ROLLOUT__ROLLOUT_NEWEST_ABLE;
	}
	if (!rr.declared)
		rr.min_compatible = rr.min_reconciler = (struct release){0, 0, 0};
	rr.unhealthy = m->unhealthy;
	rr.unhealthy_until = m->unhealthy ? m->unhealthy_until_unix : 0;
	if (r == 0) {
		*ret_rr = rr;
		if (ret_priority)
			*ret_priority = m->priority;
	}
	leasehold__member__free_unpacked(m, NULL);
	return r;
}

int election_decode_member(const void *buf, size_t len, struct release *ret_release,
                           int32_t *ret_priority)
{
	struct rule_release rr;
	int r = election_decode_member_rule(buf, len, &rr, ret_priority);
	if (r == 0)
		*ret_release = rr.release;
	return r;
}

/* hostile bytes -> status_rec; invalid -> present but !valid */
void election_status_decode(const uint8_t *v, size_t len, struct status_rec *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->present = true;
	ret->valid = election_decode_status(v, len, &ret->state, &ret->version,
	                                    &ret->min_compatible) == 0;
}

int election_status_encode(int state, struct release v, struct release mcr, uint8_t **ret,
                           size_t *ret_len)
{
	Leasehold__Release pv, pm;
	election_records_release_to_pb(v, &pv);
	election_records_release_to_pb(mcr, &pm);
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

int election_member_encode(const struct election *e, const struct plugin_releases *rel,
                           uint8_t **ret, size_t *ret_len)
{
	Leasehold__Release pr, pc, pm;
	election_records_release_to_pb(rel->release, &pr);
	election_records_release_to_pb(rel->min_compatible, &pc);
	election_records_release_to_pb(rel->min_reconciler, &pm);
	Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
	m.node_id = e->node_id;
	m.release = &pr;
	m.host_version = (char *)PACKAGE_VERSION;
	m.priority = e->priority;
	m.min_compatible_release = &pc;
	m.min_reconciler_release = &pm;
	m.rollout = rel->reference_rule ? LEASEHOLD__MEMBER__ROLLOUT__ROLLOUT_REFERENCE
	                                : LEASEHOLD__MEMBER__ROLLOUT__ROLLOUT_NEWEST_ABLE;
	m.unhealthy = e->health.unhealthy;
	m.unhealthy_until_unix = e->health.unhealthy ? e->unhealthy_until_unix : 0;
	size_t n = leasehold__member__get_packed_size(&m);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	leasehold__member__pack(&m, b);
	*ret = b;
	*ret_len = n;
	return 0;
}

struct rule_release election_rule_release_of(const struct plugin_releases *rel)
{
	return (struct rule_release){.release = rel->release,
	                             .min_compatible = rel->min_compatible,
	                             .min_reconciler = rel->min_reconciler,
	                             .reference = rel->reference_rule,
	                             .declared = true};
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

bool election_status_equal(const struct status_rec *s, int state, struct release v,
                           struct release m)
{
	return s->present && s->valid && s->state == state && release_cmp(s->version, v) == 0 &&
	       release_cmp(s->min_compatible, m) == 0;
}

/* why this node may not serve now, or NULL when it may.
 * Readiness is claimed only from a view the node can vouch for: the status
 * as read while the current session holds (a node cut off from etcd cannot
 * know whether the leader has since restricted the status against its
 * release, so past its lease deadline it says "not ready"). */
const char *election_not_ready_reason(struct election *e, char *buf, size_t len)
{
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	if (!e->lease || !session_is_up(e->sess))
		return "no etcd session: the status cannot be vouched for";
	if (!e->synced || e->view_lease != e->lease)
		return "reading the state from etcd";
	if (!e->status.present)
		return "no status yet (no reconcile has completed)";
	if (!e->status.valid)
		return "the status record does not decode";
	if (release_less(e->rel.release, e->status.min_compatible)) {
		snprintf(buf, len, "local release %s is below the status's minimum compatible release %s",
		         release_format(e->rel.release, a, sizeof(a)),
		         release_format(e->status.min_compatible, b, sizeof(b)));
		return buf;
	}
	if (release_less(e->status.version, e->rel.min_reconciler)) {
		snprintf(buf, len, "the state was reconciled by %s, below this release's minimum reconciler %s",
		         release_format(e->status.version, a, sizeof(a)),
		         release_format(e->rel.min_reconciler, b, sizeof(b)));
		return buf;
	}
	return NULL;
}

const char *election_status_state_name(bool valid, int state)
{
	if (!valid)
		return "INVALID";
	if (state == LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE)
		return "DONE";
	if (state == LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING)
		return "WORKING";
	return "UNKNOWN"; /* a state this release does not know; the releases still count */
}

bool election_key_is_candidate(const struct etcd_kv *kv, size_t pl)
{
	/* exactly the name a host gives its key: the lease in lower-case hex
	 * without padding ("0x1f", " 1f" or "001f" bound to someone's live
	 * lease would otherwise block the election while no node owns it) */
	char want[17];
	int n = snprintf(want, sizeof(want), "%" PRIx64, (uint64_t)kv->lease);
	return kv->lease > 0 && n > 0 && kv->key_len >= pl && kv->key_len - pl == (size_t)n &&
	       memcmp(kv->key + pl, want, (size_t)n) == 0;
}
