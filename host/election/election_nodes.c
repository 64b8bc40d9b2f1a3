/* SPDX-License-Identifier: MIT */
/*
 * election_nodes.c - per-node state records, P/N/nodes/<node-id>
 * (election_node_record.h): each node publishes what only it knows about the plugin
 * (state and why, readiness and why not, last reconcile), and mirrors every
 * node's record, so that any node, or leaseholdctl reading etcd directly,
 * shows the whole cluster.
 *
 * Design notes
 * - Key. "nodes/" sorts between "members/" and "paused", inside the watched
 *   range [P/N/election/, P/N/status]: every host mirrors the records with
 *   no new watch. This is why they must stay cheap: every write fans out to
 *   every host running the plugin.
 * - Written on change only. election_step ends in election_nodes_update,
 *   which encodes the record from the current state; only when those bytes
 *   differ from what etcd holds (or were written under an older lease) is a
 *   write scheduled, NODE_COALESCE_MS later, and it carries the newest bytes
 *   then: a burst of changes (a handover passes standby -> campaigning ->
 *   leading in milliseconds) costs one write, and a quiet node writes
 *   nothing, whatever its plugin does. The record holds no counters and no
 *   revisions, only states, their start time and the last reconcile's
 *   result: the leader writes once per finished reconcile, other nodes only
 *   when their state or readiness changes.
 * - Bound to the node's lease: the record is gone with the node (a crash,
 *   a cut-off past the TTL, a shutdown's revocation), so a record present is
 *   a live node's word. After a session change it is written again under
 *   the new lease. A plugin removed from a running node (election_stop)
 *   deletes its record before the stop completes; a shutdown leaves it to
 *   the revocation (no extra write on the way out).
 * - Not fenced: the record is the node's own, not a leader's write.
 * - At most one write in flight; a failed write is retried with a backoff
 *   (100 ms doubling to 5 s), with whatever the record says by then.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election/election_internal.h"
#include "base/log.h"

#define NODE_COALESCE_MS 20
#define NODE_BACKOFF_MIN (100 * LOOP_NS_PER_MS)
#define NODE_BACKOFF_MAX (5 * LOOP_NS_PER_S)

struct node_ctx {
	uint32_t magic; /* NODE_CTX_MAGIC */
	struct election *e;
	char *sent; /* the value put, NULL for a delete */
	size_t sent_len;
	int64_t lease;
	struct etcd_call *call;
};

static void election_nodes_on_node_timer(struct loop_timer *t, void *ud);

int election_nodes_init(struct election *e)
{
	if (asprintf(&e->k_nodes, "%s/%s/nodes/", e->prefix, e->name) < 0) {
		e->k_nodes = NULL;
		return -ENOMEM;
	}
	if (asprintf(&e->k_node_self, "%s%s", e->k_nodes, e->node_id) < 0) {
		e->k_node_self = NULL;
		return -ENOMEM;
	}
	e->node_backoff = NODE_BACKOFF_MIN;
	e->node_state = ELECTION_LOADING;
	e->node_since = (int64_t)time(NULL);
	return loop_timer_new(e->loop, election_nodes_on_node_timer, e, &e->node_timer);
}

static void election_nodes_node_ctx_free(struct node_ctx *c)
{
	if (c->e && c->e->node_call == c)
		c->e->node_call = NULL;
	c->magic = 0;
	free(c->sent);
	free(c);
}

void election_nodes_clear(struct election *e)
{
	for (size_t i = 0; i < e->n_nodes; i++)
		free(e->nodes[i].node_id);
	e->n_nodes = 0;
}

void election_nodes_free(struct election *e)
{
	if (e->node_call) {
		etcd_call_cancel(e->node_call->call);
		election_nodes_node_ctx_free(e->node_call);
	}
	loop_timer_free(e->node_timer);
	election_nodes_clear(e);
	free(e->nodes);
	free(e->k_nodes);
	free(e->k_node_self);
	free(e->node_want);
	free(e->node_written);
}

/* ---- the mirror ---- */

bool election_nodes_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	size_t pl = strlen(e->k_nodes);
	if (kv->key_len < pl || memcmp(kv->key, e->k_nodes, pl) != 0)
		return false;
	const char *id = (const char *)kv->key + pl;
	size_t idlen = kv->key_len - pl;
	if (idlen == 0 || idlen > NODE_RECORD_NODE_MAX || memchr(id, '/', idlen) ||
	    memchr(id, '\0', idlen)) {
		log_debug("election", "%s: ignoring key outside the layout", e->name);
		return true;
	}
	size_t i;
	for (i = 0; i < e->n_nodes; i++)
		if (strlen(e->nodes[i].node_id) == idlen && memcmp(e->nodes[i].node_id, id, idlen) == 0)
			break;
	if (del) {
		if (i < e->n_nodes) {
			free(e->nodes[i].node_id);
			e->nodes[i] = e->nodes[--e->n_nodes];
		}
		return true;
	}
	if (i == e->n_nodes) {
		if (e->n_nodes == e->cap_nodes) {
			size_t cap = e->cap_nodes ? e->cap_nodes * 2 : 8;
			struct node_ent *n = realloc(e->nodes, cap * sizeof(*n));
			if (!n)
				return true; /* shown as "no record": only a view suffers */
			e->nodes = n;
			e->cap_nodes = cap;
		}
		memset(&e->nodes[i], 0, sizeof(e->nodes[i]));
		e->nodes[i].node_id = strndup(id, idlen);
		if (!e->nodes[i].node_id)
			return true;
		e->n_nodes++;
	}
	struct node_ent *x = &e->nodes[i];
	x->mod_rev = kv->mod_revision;
	x->lease = kv->lease;
	x->valid = node_record_decode(kv->value, kv->value_len, &x->rec) == 0 &&
	           strcmp(x->rec.node, x->node_id) == 0;
	if (!x->valid)
		log_debug("election", "%s: the state record of node %.*s does not decode", e->name,
		          (int)(idlen > 64 ? 64 : idlen), id);
	return true;
}

/* ---- our own record ---- */

/* build - our record as it should be now */
static void election_nodes_build(struct election *e, struct node_record *r)
{
	struct election_info i;
	election_get_info(e, &i);
	memset(r, 0, sizeof(*r));
	r->version = NODE_RECORD_VERSION;
	snprintf(r->node, sizeof(r->node), "%s", e->node_id);
	r->release = e->rel.release;
	if (i.state != e->node_state) {
		e->node_state = i.state;
		e->node_since = (int64_t)time(NULL);
	}
	snprintf(r->state, sizeof(r->state), "%s", election_state_name(i.state));
	r->since = e->node_since;
	const char *why = i.held_back;
	if (i.state == ELECTION_LEADING)
		why = i.paused ? "paused by an operator: no reconcile starts" : NULL;
	else if (i.state == ELECTION_CAMPAIGNING)
		why = i.leader ? "another node leads" : NULL;
	snprintf(r->reason, sizeof(r->reason), "%s", why ? why : "");
	r->ready = i.ready;
	snprintf(r->not_ready, sizeof(r->not_ready), "%s", i.not_ready ? i.not_ready : "");
	r->reconcile_at = i.reconcile_last_at;
	r->reconcile_ok = i.reconcile_last_ok;
	snprintf(r->reconcile_error, sizeof(r->reconcile_error), "%s",
	         i.reconcile_last_error ? i.reconcile_last_error : "");
	snprintf(r->host, sizeof(r->host), "%s", e->instance);
	r->n_previous = e->n_prev;
	memcpy(r->previous, e->prev, e->n_prev * sizeof(e->prev[0]));
}

static bool election_nodes_same(const char *a, size_t al, const char *b, size_t bl)
{
	if (!a || !b)
		return a == b;
	return al == bl && memcmp(a, b, al) == 0;
}

/* election_nodes_in_sync - etcd holds what we want (as far as we know) */
static bool election_nodes_in_sync(const struct election *e)
{
	if (!e->node_want)
		return !e->node_written || e->node_written_lease != e->lease;
	return e->node_written_lease == e->lease &&
	       election_nodes_same(e->node_want, e->node_want_len, e->node_written, e->node_written_len);
}

static void election_nodes_kick(struct election *e)
{
	if (!e->lease || e->conflict || !e->conflict_known || e->node_call ||
	    election_nodes_in_sync(e) || loop_timer_armed(e->node_timer))
		return;
	loop_timer_arm_in(e->node_timer, NODE_COALESCE_MS * LOOP_NS_PER_MS);
}

void election_nodes_update(struct election *e)
{
	/* P/N/nodes/<our id> is the other host's record then: neither written
	 * nor deleted (a stop leaves it alone too); nor before the first whole
	 * view of the election keys tells (election_conflict.c) */
	if (e->conflict)
		return;
	if (e->stopping) {
		/* a shutdown leaves the record to the lease revocation; a plugin
		 * removed from a running node takes its record away */
		if (e->stop_last)
			return;
		free(e->node_want);
		e->node_want = NULL;
		e->node_want_len = 0;
		election_nodes_kick(e);
		return;
	}
	struct node_record r;
	char *v;
	size_t n;
	election_nodes_build(e, &r);
	if (node_record_encode(&r, &v, &n) < 0)
		return; /* out of memory: the record stays as it was */
	if (election_nodes_same(v, n, e->node_want, e->node_want_len)) {
		free(v);
	} else {
		free(e->node_want);
		e->node_want = v;
		e->node_want_len = n;
	}
	election_nodes_kick(e);
}

bool election_nodes_busy(struct election *e)
{
	if (!e->stopping || e->stop_last || e->conflict || !e->conflict_known)
		return false;
	election_nodes_update(e);
	return e->lease && (e->node_call || !election_nodes_in_sync(e));
}

static void election_nodes_on_node_written(struct etcd_client *cl, int err, const struct etcd_response *r,
                            void *ud)
{
	(void)cl;
	(void)r;
	struct node_ctx *c = ud;
	CHECK_OBJ(c, NODE_CTX_MAGIC);
	struct election *e = c->e;
	if (!e) {
		election_nodes_node_ctx_free(c);
		return;
	}
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (err < 0) {
		log_debug("election", "%s: writing this node's state record failed: %s; retrying",
		          e->name, etcd_strerror(err));
		election_nodes_node_ctx_free(c);
		loop_timer_arm_in(e->node_timer, e->node_backoff);
		e->node_backoff = e->node_backoff * 2 > NODE_BACKOFF_MAX ? NODE_BACKOFF_MAX
		                                                         : e->node_backoff * 2;
		return;
	}
	e->node_backoff = NODE_BACKOFF_MIN;
	free(e->node_written);
	e->node_written = c->sent;
	e->node_written_len = c->sent_len;
	e->node_written_lease = c->sent ? c->lease : 0;
	c->sent = NULL;
	if (e->node_written)
		e->node_writes++;
	election_nodes_node_ctx_free(c);
	if (e->stopping)
		election_step(e); /* a stop may wait for this */
	else
		election_nodes_kick(e);
}

static void election_nodes_on_node_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct election *e = ud;
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (e->node_call || !e->lease || e->conflict || !e->conflict_known ||
	    election_nodes_in_sync(e))
		return;
	struct node_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		goto retry;
	c->magic = NODE_CTX_MAGIC;
	c->e = e;
	c->lease = e->lease;
	struct etcd_op op = {.key = e->k_node_self, .key_len = strlen(e->k_node_self)};
	int r;
	if (e->node_want) {
		c->sent = malloc(e->node_want_len + 1);
		if (!c->sent) {
			free(c);
			goto retry;
		}
		memcpy(c->sent, e->node_want, e->node_want_len + 1);
		c->sent_len = e->node_want_len;
		op.type = ETCD_OP_PUT;
		op.value = c->sent;
		op.value_len = c->sent_len;
		op.lease = c->lease;
		r = etcd_put(e->etcd, &op, NULL, election_nodes_on_node_written, c, &c->call);
	} else {
		op.type = ETCD_OP_DELETE;
		r = etcd_delete(e->etcd, &op, NULL, election_nodes_on_node_written, c, &c->call);
	}
	if (r < 0) {
		election_nodes_node_ctx_free(c);
		goto retry;
	}
	e->node_call = c;
	return;
retry:
	loop_timer_arm_in(e->node_timer, e->node_backoff);
}

/* ---- the view ---- */

const struct node_ent *election_node_find(const struct election *e, const char *node_id)
{
	for (size_t i = 0; i < e->n_nodes; i++)
		if (strcmp(e->nodes[i].node_id, node_id) == 0)
			return &e->nodes[i];
	return NULL;
}
