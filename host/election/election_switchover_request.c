/* SPDX-License-Identifier: MIT */
/*
 * election_switchover_request.c - request a switchover (see election_switchover_request.h).
 *
 * Design notes
 * - Three etcd calls: one read txn (the plugin's watched range
 *   [P/N/election/, P/N/status] and, when a target and a role are named,
 *   P/roles/<target>), a lease grant (TTL = the timeout), and the write txn.
 * - The check runs on that read; the write compares what the check relied
 *   on, so it holds at the write's revision or nothing is written: no
 *   request record (two requests at once: one wins), no pause record, the
 *   leader's election key with the create_revision read, and the target's
 *   key and member record as read. A failed compare is a refusal ("changed
 *   under the request") and the lease is revoked.
 * - Decoders take hostile bytes: a member record that does not decode
 *   counts as "release unknown" (the target is refused), a candidate key
 *   not named by its lease is no candidate (election_key_is_candidate, the
 *   hosts' rule), a roles record that does not decode holds no role.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/leasehold.pb-c.h"
#include "election/election.h"
#include "base/release.h"
#include "election/election_release_rule.h"
#include "election/election_roles.h"
#include "election/election_switchover_request.h"
#include "election/election_pin.h"

#define SWITCHOVER_CTX_MAGIC 0x53574f56u

struct sw_ctx {
	uint32_t magic; /* SWITCHOVER_CTX_MAGIC */
	struct etcd_client *etcd;
	switchover_done_fn done;
	void *ud;
	char *k_range, *k_handover, *k_paused, *k_members, *k_nodes, *k_roles, *k_status, *k_pin;
	uint8_t k_range_end[600];
	size_t k_range_end_len;
	char *name, *requester, *to, *role;
	uint32_t timeout_ms;
	bool priority;
	/* what the check found (the write compares it) */
	char from[160];
	char leader_key[600];
	int64_t leader_token;
	char to_key[600];
	int64_t to_token;
	int64_t to_member_mod;
	int64_t lease;
	int64_t rev;
};

static void switchover_request_ctx_free(struct sw_ctx *c)
{
	if (!c)
		return;
	free(c->k_range);
	free(c->k_handover);
	free(c->k_paused);
	free(c->k_members);
	free(c->k_nodes);
	free(c->k_roles);
	free(c->k_status);
	free(c->k_pin);
	free(c->name);
	free(c->requester);
	free(c->to);
	free(c->role);
	c->magic = 0;
	free(c);
}

/* finish - answer once and free */
static void switchover_request_finish(struct sw_ctx *c, int err, const char *msg)
{
	c->done(c->ud, err, msg, err == 0 ? c->rev : 0, c->from);
	switchover_request_ctx_free(c);
}

/* fail - an etcd call of c failed or could not be sent: answer with why */
static void switchover_request_fail(struct sw_ctx *c, const char *what, int err)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "cannot %s: %s", what, etcd_strerror(err));
	switchover_request_finish(c, err, msg);
}

/* switchover_request_ctx_of - the context an etcd callback carries back (checked) */
static struct sw_ctx *switchover_request_ctx_of(void *ud)
{
	struct sw_ctx *c = ud;
	assert(c != NULL && c->magic == SWITCHOVER_CTX_MAGIC);
	return c;
}

static bool switchover_request_kv_is(const struct etcd_kv *kv, const char *k)
{
	return kv->key_len == strlen(k) && memcmp(kv->key, k, kv->key_len) == 0;
}

static bool switchover_request_kv_under(const struct etcd_kv *kv, const char *p)
{
	size_t n = strlen(p);
	return kv->key_len > n && memcmp(kv->key, p, n) == 0;
}

/* a copy of kv's value as a printable string (hostile bytes) */
static void switchover_request_value_str(const struct etcd_kv *kv, char *buf, size_t len)
{
	size_t n = kv->value_len < len - 1 ? kv->value_len : len - 1;
	for (size_t i = 0; i < n; i++) {
		char ch = (char)kv->value[i];
		buf[i] = ch >= 0x20 && ch < 0x7f ? ch : '?';
	}
	buf[n] = '\0';
}

static bool switchover_request_member_rr(const struct etcd_kv *kv, struct rule_release *ret)
{
	return election_decode_member_rule(kv->value, kv->value_len, ret, NULL) == 0;
}

/* the release rule over the records read, as every host's mirror applies
 * it (election_release_rule.h): the distinct member records with their
 * counts, an undecodable one, the status. -ENOMEM, else 0 with *ret. */
static int switchover_request_rule(const struct etcd_response *range, const struct sw_ctx *c,
                                   struct rule_answer *ret)
{
	struct relcount *rc = NULL;
	size_t n_rc = 0, cap = 0;
	bool invalid = false;
	struct rule_status st = {.valid = false};
	struct rule_pin pin = {.set = false};
	for (size_t i = 0; i < range->n_kvs; i++) {
		const struct etcd_kv *kv = &range->kvs[i];
		struct rule_release rr;
		if (switchover_request_kv_is(kv, c->k_pin)) {
			/* the hosts' reading: one that does not decode is no pin */
			election_pin_decode(kv->value, kv->value_len, &pin, NULL, 0, NULL);
			continue;
		}
		if (switchover_request_kv_is(kv, c->k_status)) {
			struct status_rec s;
			election_status_decode(kv->value, kv->value_len, &s);
			st = (struct rule_status){.valid = s.valid, .version = s.version,
			                          .min_compatible = s.min_compatible};
			continue;
		}
		if (!switchover_request_kv_under(kv, c->k_members))
			continue;
		if (!switchover_request_member_rr(kv, &rr)) {
			invalid = true;
			continue;
		}
		size_t j = 0;
		while (j < n_rc && !release_rule_equal(&rc[j].rr, &rr))
			j++;
		if (j == n_rc) {
			if (n_rc == cap) {
				cap = cap ? cap * 2 : 8;
				struct relcount *n = realloc(rc, cap * sizeof(*n));
				if (!n) {
					free(rc);
					return -ENOMEM;
				}
				rc = n;
			}
			rc[n_rc++] = (struct relcount){.rr = rr, .count = 0};
		}
		rc[j].count++;
	}
	release_rule_decide_pinned(NULL, rc, n_rc, invalid, &st, &pin, ret);
	free(rc);
	return 0;
}

static bool switchover_request_has_role(const struct etcd_response *roles, const char *node, const char *role)
{
	if (!roles || roles->n_kvs != 1)
		return false;
	char **v = NULL, err[128];
	size_t n = 0;
	if (roles_decode(roles->kvs[0].value, roles->kvs[0].value_len, node, &v, &n, err,
	                 sizeof(err)) < 0)
		return false;
	bool has = false;
	for (size_t i = 0; i < n; i++)
		has = has || strcmp(v[i], role) == 0;
	roles_strv_free(v, n);
	return has;
}

static void switchover_request_on_written(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud);
static void switchover_request_on_revoked(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	(void)err;
	(void)r;
	(void)ud; /* an unused lease that is not revoked expires by itself */
}

static void switchover_request_on_granted(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud);

/* the target's release may lead now under the release rule (what every
 * host computes from the same records); 0, or -ESRCH / -ENOMEM with the
 * reason */
static int switchover_request_target_release(const struct sw_ctx *c,
                                             const struct etcd_response *range,
                                             const struct rule_release *rr, char *msg, size_t len)
{
	struct rule_answer a;
	char x[RELEASE_STRLEN], y[RELEASE_STRLEN], why[320];
	if (switchover_request_rule(range, c, &a) < 0) {
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	if (release_rule_may_campaign(&a, rr))
		return 0;
	if (a.basis != RULE_NONE && release_cmp(rr->release, a.release) == 0 && rr->unhealthy)
		snprintf(msg, len, "node %s is unhealthy: its plugin '%s' failed its reconciles and "
		         "it withdrew for a hold-down", c->to, c->name);
	else if (a.basis != RULE_NONE && release_less(rr->release, a.release) &&
	    release_cmp(a.release, a.newest) == 0)
		snprintf(msg, len, "node %s runs release %s of plugin '%s', older than the newest "
		         "(%s): it may not lead", c->to, release_format(rr->release, x, sizeof(x)),
		         c->name, release_format(a.newest, y, sizeof(y)));
	else
		snprintf(msg, len, "node %s runs release %s of plugin '%s', which may not lead now: %s",
		         c->to, release_format(rr->release, x, sizeof(x)), c->name,
		         rr->declared ? release_rule_explain(&a, rr->release, why, sizeof(why))
		                      : "its host follows the reference rule (it leads only as the "
		                        "newest release)");
	return -ESRCH;
}

/* switchover_request_target - the target's election key in the range read:
 * with one node id on several keys, the live run's (the lease of its state
 * record) when they are one node's runs (a crash restart's old key lives
 * until its TTL), else the request is ambiguous: -ESRCH with the
 * reason. *ret is NULL when the target has no key. */
static int switchover_request_target(struct sw_ctx *c, const struct etcd_response *range,
                                     const struct etcd_kv **ret, char *msg, size_t len)
{
	const struct etcd_kv *keys[16], *rec_kv = NULL;
	int64_t leases[16];
	size_t n = 0, el_len = strlen(c->k_range), tl = strlen(c->to);
	char ls[160] = "";
	for (size_t i = 0; i < range->n_kvs; i++) {
		const struct etcd_kv *kv = &range->kvs[i];
		if (switchover_request_kv_under(kv, c->k_range) && election_key_is_candidate(kv, el_len) &&
		    kv->value_len == tl && memcmp(kv->value, c->to, tl) == 0 && n < 16) {
			size_t l = strlen(ls);
			snprintf(ls + l, sizeof(ls) - l, "%s0x%" PRIx64, n ? ", " : "", (uint64_t)kv->lease);
			keys[n] = kv;
			leases[n++] = kv->lease;
		} else if (switchover_request_kv_under(kv, c->k_nodes) &&
		           kv->key_len == strlen(c->k_nodes) + tl &&
		           memcmp(kv->key + strlen(c->k_nodes), c->to, tl) == 0) {
			rec_kv = kv;
		}
	}
	*ret = n ? keys[0] : NULL;
	if (n < 2)
		return 0;
	struct node_record rec;
	bool rec_ok = rec_kv && node_record_decode(rec_kv->value, rec_kv->value_len, &rec) == 0;
	if (node_sessions_conflict(leases, n, rec_ok ? &rec : NULL, rec_ok ? rec_kv->lease : 0)) {
		snprintf(msg, len, "node %s is ambiguous for plugin '%s': %zu sessions carry that "
		         "node id (leases %s), so two hosts run with it; give each host its own "
		         "--node-id first", c->to, c->name, n, ls);
		return -ESRCH; /* a refusal about the target, as the others */
	}
	for (size_t i = 0; i < n; i++)
		if (keys[i]->lease == rec_kv->lease)
			*ret = keys[i]; /* the live run; the others are its earlier runs */
	return 0;
}

/* the range's keys that the check needs, found in one pass */
struct sw_scan {
	const struct etcd_kv *lead;      /* the lowest live election key */
	const struct etcd_kv *to_member; /* the target's member record */
	size_t n_cands;                  /* live election keys */
};

/* switchover_request_scan - one pass over the range: a pause or another
 * switchover in flight refuses the request (-EBUSY with the reason in msg);
 * else 0 with what was found in *ret */
static int switchover_request_scan(const struct sw_ctx *c, const struct etcd_response *range,
                                   struct sw_scan *ret, char *msg, size_t len)
{
	size_t el_len = strlen(c->k_range);
	for (size_t i = 0; i < range->n_kvs; i++) {
		const struct etcd_kv *kv = &range->kvs[i];
		if (switchover_request_kv_is(kv, c->k_paused)) {
			snprintf(msg, len, "plugin '%s' is paused: a pause holds leadership where it "
			         "is; resume it first (leaseholdctl resume %s)", c->name, c->name);
			return -EBUSY;
		}
		if (switchover_request_kv_is(kv, c->k_handover)) {
			char who[160] = "?";
			Leasehold__Switchover *s =
				leasehold__switchover__unpack(NULL, kv->value_len, kv->value);
			if (s && s->to_node && s->to_node[0])
				snprintf(who, sizeof(who), "to %.128s", s->to_node);
			else if (s)
				snprintf(who, sizeof(who), "to any other node");
			if (s)
				leasehold__switchover__free_unpacked(s, NULL);
			snprintf(msg, len, "another switchover of plugin '%s' is in flight (%s, "
			         "revision %" PRId64 "); it ends when done or at its timeout",
			         c->name, who, kv->mod_revision);
			return -EBUSY;
		}
		/* a candidate as the hosts count one (a key named otherwise
		 * is no leader for them, so none for the request either) */
		if (switchover_request_kv_under(kv, c->k_range) && election_key_is_candidate(kv, el_len)) {
			ret->n_cands++;
			if (!ret->lead || kv->create_revision < ret->lead->create_revision)
				ret->lead = kv;
		} else if (switchover_request_kv_under(kv, c->k_members)) {
			if (c->to && kv->key_len == strlen(c->k_members) + strlen(c->to) &&
			    memcmp(kv->key + strlen(c->k_members), c->to, strlen(c->to)) == 0)
				ret->to_member = kv;
		}
	}
	return 0;
}

/* switchover_request_check_target - the refusals about a named target;
 * on 0 the target's key, token and member revision are in c */
static int switchover_request_check_target(struct sw_ctx *c, const struct etcd_response *range,
                                           const struct etcd_response *roles,
                                           const struct etcd_kv *to_member, char *msg, size_t len)
{
	const struct etcd_kv *to_cand = NULL;
	/* first: with two hosts on one node id every other answer about the
	 * target could be about the wrong host */
	int r = switchover_request_target(c, range, &to_cand, msg, len);
	if (r < 0)
		return r;
	if (strcmp(c->from, c->to) == 0) {
		snprintf(msg, len, "node %s leads plugin '%s' already", c->to, c->name);
		return -EALREADY;
	}
	if (c->role && c->role[0] && !switchover_request_has_role(roles, c->to, c->role)) {
		snprintf(msg, len, "node %s lacks role '%s', which plugin '%s' needs", c->to, c->role,
		         c->name);
		return -ESRCH;
	}
	struct rule_release rr;
	if (!to_member) {
		snprintf(msg, len, "node %s does not run plugin '%s' (it is no member)", c->to,
		         c->name);
		return -ESRCH;
	}
	if (!switchover_request_member_rr(to_member, &rr)) {
		snprintf(msg, len, "node %s's member record of plugin '%s' does not decode", c->to,
		         c->name);
		return -ESRCH;
	}
	if ((r = switchover_request_target_release(c, range, &rr, msg, len)) < 0)
		return r;
	if (!to_cand) {
		snprintf(msg, len, "node %s does not campaign for plugin '%s' (its plugin failed, it "
		         "is held back, or it is down)", c->to, c->name);
		return -ESRCH;
	}
	snprintf(c->to_key, sizeof(c->to_key), "%.*s", (int)to_cand->key_len,
	         (const char *)to_cand->key);
	c->to_token = to_cand->create_revision;
	c->to_member_mod = to_member->mod_revision;
	return 0;
}

/* check - the refusals, on the state read; 0 or -errno with the reason */
static int switchover_request_check(struct sw_ctx *c, const struct etcd_response *range,
                 const struct etcd_response *roles, char *msg, size_t len)
{
	struct sw_scan sc = {0};
	int r = switchover_request_scan(c, range, &sc, msg, len);
	if (r < 0)
		return r;
	if (!sc.lead) {
		snprintf(msg, len, "plugin '%s' has no leader now: nothing to switch over", c->name);
		return -EAGAIN;
	}
	switchover_request_value_str(sc.lead, c->from, sizeof(c->from));
	snprintf(c->leader_key, sizeof(c->leader_key), "%.*s", (int)sc.lead->key_len,
	         (const char *)sc.lead->key);
	c->leader_token = sc.lead->create_revision;
	if (!c->to) {
		if (sc.n_cands < 2) {
			snprintf(msg, len, "no other node campaigns for plugin '%s': a switchover "
			         "would elect %s again", c->name, c->from);
			return -ECHILD;
		}
		return 0;
	}
	return switchover_request_check_target(c, range, roles, sc.to_member, msg, len);
}

static void switchover_request_on_read(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct sw_ctx *c = switchover_request_ctx_of(ud);
	char msg[512];
	if (err < 0 || r->n_responses < 1) {
		switchover_request_fail(c, "read the plugin's state from etcd", err < 0 ? err : -EBADMSG);
		return;
	}
	int rc = switchover_request_check(c, &r->responses[0], r->n_responses > 1 ? &r->responses[1] : NULL, msg,
	               sizeof(msg));
	if (rc < 0) {
		switchover_request_finish(c, rc, msg);
		return;
	}
	int64_t ttl = (c->timeout_ms + 999) / 1000;
	rc = etcd_lease_grant(c->etcd, ttl, NULL, switchover_request_on_granted, c, NULL);
	if (rc < 0)
		switchover_request_fail(c, "grant the switchover's lease", rc);
}

static void switchover_request_on_granted(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct sw_ctx *c = switchover_request_ctx_of(ud);
	if (err < 0) {
		switchover_request_fail(c, "grant the switchover's lease", err);
		return;
	}
	c->lease = r->lease_id;
	Leasehold__Switchover s = LEASEHOLD__SWITCHOVER__INIT;
	s.requester = c->requester;
	s.from_node = c->from;
	s.from_token = c->leader_token;
	s.to_node = c->to ? c->to : (char *)"";
	s.to_token = c->to_token;
	s.at_unix = (int64_t)time(NULL);
	s.timeout_ms = c->timeout_ms;
	s.priority = c->priority;
	uint8_t buf[1024];
	size_t n = leasehold__switchover__get_packed_size(&s);
	if (n > sizeof(buf)) {
		switchover_request_finish(c, -EINVAL, "the switchover record is too large");
		return;
	}
	leasehold__switchover__pack(&s, buf);
	struct etcd_compare cmps[5];
	char member_key[600];
	size_t nc = 0;
	cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                                   .key = c->k_handover, .key_len = strlen(c->k_handover)};
	cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                                   .key = c->k_paused, .key_len = strlen(c->k_paused)};
	cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
	                                   .key = c->leader_key, .key_len = strlen(c->leader_key),
	                                   .number = c->leader_token};
	if (c->to) {
		cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_CREATE,
		                                   .result = ETCD_CMP_EQUAL, .key = c->to_key,
		                                   .key_len = strlen(c->to_key),
		                                   .number = c->to_token};
		snprintf(member_key, sizeof(member_key), "%s%s", c->k_members, c->to);
		cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
		                                   .key = member_key, .key_len = strlen(member_key),
		                                   .number = c->to_member_mod};
	}
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = c->k_handover,
	                      .key_len = strlen(c->k_handover), .value = buf, .value_len = n,
	                      .lease = c->lease};
	int rc = etcd_txn(c->etcd, cmps, nc, &put, 1, NULL, 0, NULL, switchover_request_on_written, c, NULL);
	if (rc < 0) {
		etcd_lease_revoke(c->etcd, c->lease, NULL, switchover_request_on_revoked, NULL, NULL);
		switchover_request_fail(c, "write the switchover request", rc);
	}
}

static void switchover_request_on_written(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	(void)cl;
	struct sw_ctx *c = switchover_request_ctx_of(ud);
	char msg[256];
	if (err < 0) {
		/* the outcome is unknown: the record, if written, expires with
		 * its lease; the caller's wait tells what happened */
		switchover_request_fail(c, "write the switchover request", err);
		return;
	}
	if (!r->succeeded) {
		etcd_lease_revoke(c->etcd, c->lease, NULL, switchover_request_on_revoked, NULL, NULL);
		snprintf(msg, sizeof(msg), "plugin '%s' changed while the switchover was requested "
		         "(another switchover, a pause, or a leader change); try again", c->name);
		switchover_request_finish(c, -EBUSY, msg);
		return;
	}
	c->rev = r->header.revision;
	switchover_request_finish(c, 0, NULL);
}

static char *switchover_request_join(const char *a, const char *b, const char *c)
{
	char *s = NULL;
	if (asprintf(&s, "%s%s%s", a, b, c) < 0)
		return NULL;
	return s;
}

int switchover_request_start(struct etcd_client *etcd, const struct switchover_request *rq,
                             switchover_done_fn done, void *ud)
{
	if (!etcd || !rq || !rq->prefix || !rq->name || !*rq->name || strchr(rq->name, '/') ||
	    (rq->to && (!*rq->to || strchr(rq->to, '/') || strlen(rq->to) > 128)) || !done ||
	    rq->timeout_ms < SWITCHOVER_TIMEOUT_MIN_MS || rq->timeout_ms > SWITCHOVER_TIMEOUT_MAX_MS)
		return -EINVAL;
	struct sw_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->magic = SWITCHOVER_CTX_MAGIC;
	c->etcd = etcd;
	c->done = done;
	c->ud = ud;
	c->timeout_ms = rq->timeout_ms;
	c->priority = rq->priority;
	size_t pl = strlen(rq->prefix);
	while (pl > 0 && rq->prefix[pl - 1] == '/')
		pl--;
	char *p = strndup(rq->prefix, pl);
	char *pn = p ? switchover_request_join(p, "/", rq->name) : NULL;
	free(p);
	int r = -ENOMEM;
	if (!pn)
		goto fail;
	c->k_range = switchover_request_join(pn, "/election/", "");
	c->k_handover = switchover_request_join(pn, "/", SWITCHOVER_KEY);
	c->k_paused = switchover_request_join(pn, "/paused", "");
	c->k_pin = switchover_request_join(pn, "/" PIN_KEY, "");
	c->k_members = switchover_request_join(pn, "/members/", "");
	c->k_nodes = switchover_request_join(pn, "/nodes/", "");
	char *status = switchover_request_join(pn, "/status", "");
	c->name = strdup(rq->name);
	c->requester = strdup(rq->requester ? rq->requester : "");
	c->to = rq->to ? strdup(rq->to) : NULL;
	c->role = rq->role && *rq->role ? strdup(rq->role) : NULL;
	if (c->to && c->role) {
		char *pr = strndup(rq->prefix, pl);
		c->k_roles = pr ? switchover_request_join(pr, "/roles/", c->to) : NULL;
		free(pr);
	}
	free(pn);
	if (!c->k_range || !c->k_handover || !c->k_paused || !c->k_pin || !c->k_members || !status ||
	    !c->name || !c->requester || (rq->to && !c->to) || (c->role && !c->k_roles) ||
	    strlen(status) + 1 > sizeof(c->k_range_end)) {
		free(status);
		goto fail;
	}
	/* [P/N/election/, P/N/status] as the hosts watch it */
	c->k_range_end_len = strlen(status) + 1;
	memcpy(c->k_range_end, status, c->k_range_end_len);
	c->k_status = status; /* owned by c from here */
	struct etcd_op ops[2] = {
		{.type = ETCD_OP_RANGE, .key = c->k_range, .key_len = strlen(c->k_range),
		 .range_end = c->k_range_end, .range_end_len = c->k_range_end_len},
	};
	size_t n_ops = 1;
	if (c->k_roles)
		ops[n_ops++] = (struct etcd_op){.type = ETCD_OP_RANGE, .key = c->k_roles,
		                                .key_len = strlen(c->k_roles)};
	r = etcd_txn(etcd, NULL, 0, ops, n_ops, NULL, 0, NULL, switchover_request_on_read, c, NULL);
	if (r == 0)
		return 0;
fail:
	switchover_request_ctx_free(c);
	return r;
}
