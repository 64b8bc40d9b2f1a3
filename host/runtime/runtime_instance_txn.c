/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_txn.c - txn bridging: a plugin's txn request (keys
 * relative to its data prefix; hostile input) becomes a fenced etcd txn
 * through driver_host.fenced_txn, and its answer goes back to the worker
 * with the prefix stripped. Reading guide: runtime_instance.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi_key_rule.h"
#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

/* ---- txn bridging ---- */

/* pi_txn_show - key k as text for a refusal: control and non-ASCII bytes
 * masked, cut at 40 bytes */
static const char *pi_txn_show(ProtobufCBinaryData k, char *buf, size_t len)
{
	size_t n = k.len < 40 ? k.len : 40, o = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++)
		buf[o++] = k.data[i] >= 0x20 && k.data[i] < 0x7f ? (char)k.data[i] : '?';
	if (k.len > n && o + 3 < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = 0;
	return buf;
}

int pi_txn_check_key(struct plugin_instance *pi, ProtobufCBinaryData k, bool prefix,
		     const char *what, char *why, size_t len)
{
	const char *rule = abi_key_rule(k.data, k.len, prefix);
	if (!rule)
		return 0;
	char shown[100];
	snprintf(why, len, "%s: key \"%s\" %s", what, pi_txn_show(k, shown, sizeof(shown)), rule);
	pi_txn_note_refusal(pi, why);
	return -EINVAL;
}

int pi_txn_check_value(struct plugin_instance *pi, ProtobufCBinaryData v, const char *what,
		       char *why, size_t len)
{
	if (v.len <= LH_VALUE_MAX)
		return 0;
	snprintf(why, len, "%s: value of %zu bytes is larger than LH_VALUE_MAX (%u bytes)", what,
		 v.len, (unsigned)LH_VALUE_MAX);
	pi_txn_note_refusal(pi, why);
	return -EINVAL;
}

/* pi_txn_note_refusal - the host's log of a refused request: the first of
 * an instance as a warning (it names a plugin bug), the rest at debug so a
 * plugin retrying in a loop cannot flood the log; the plugin has each one
 * in api->last_error() */
void pi_txn_note_refusal(struct plugin_instance *pi, const char *why)
{
	if (!pi->refusal_logged)
		log_warn(pi->log_comp, "plugin request refused: %s (further refusals are logged at "
				       "debug level)", why);
	else
		log_debug(pi->log_comp, "plugin request refused: %s", why);
	pi->refusal_logged = true;
}


/* full key = prefix + rel; *ret owned by the caller */
static uint8_t *pi_txn_full_key(const struct plugin_instance *pi, ProtobufCBinaryData rel, size_t *ret_len)
{
	size_t n = pi->prefix_len + rel.len;
	uint8_t *k = malloc(n + 1);
	if (!k)
		return NULL;
	memcpy(k, pi->data_prefix, pi->prefix_len);
	if (rel.len)
		memcpy(k + pi->prefix_len, rel.data, rel.len);
	k[n] = 0;
	*ret_len = n;
	return k;
}

/* range_end for a prefix: increment the last byte below 0xff, drop the rest */
static uint8_t *pi_txn_prefix_end(const uint8_t *key, size_t len, size_t *ret_len)
{
	while (len > 0 && key[len - 1] == 0xff)
		len--;
	if (len == 0)
		return NULL; /* cannot happen: the data prefix is never all 0xff */
	uint8_t *e = malloc(len);
	if (!e)
		return NULL;
	memcpy(e, key, len);
	e[len - 1]++;
	*ret_len = len;
	return e;
}

struct keybag {
	uint8_t **p;
	size_t n, cap;
};

static uint8_t *pi_txn_bag_keep(struct keybag *b, uint8_t *p)
{
	if (!p)
		return NULL;
	if (b->n == b->cap) {
		size_t c = b->cap ? b->cap * 2 : 16;
		uint8_t **np = realloc(b->p, c * sizeof(*np));
		if (!np) {
			free(p);
			return NULL;
		}
		b->p = np;
		b->cap = c;
	}
	b->p[b->n++] = p;
	return p;
}

static void pi_txn_bag_free(struct keybag *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->p[i]);
	free(b->p);
}

static int pi_txn_convert_ops(struct plugin_instance *pi, BusOp **in, size_t n, struct etcd_op *out,
		       struct keybag *bag, const char *branch, char *why, size_t why_len)
{
	for (size_t i = 0; i < n; i++) {
		char what[40];
		const BusOp *o = in[i];
		struct etcd_op *e = &out[i];
		uint32_t allowed = LH_F_PREFIX;
		memset(e, 0, sizeof(*e));
		switch (o->type) {
		case LH_OP_RANGE:
			e->type = ETCD_OP_RANGE;
			allowed |= LH_F_KEYS_ONLY | LH_F_COUNT_ONLY;
			break;
		case LH_OP_PUT:
			e->type = ETCD_OP_PUT;
			allowed = LH_F_PREV_KV;
			break;
		case LH_OP_DELETE:
			e->type = ETCD_OP_DELETE;
			allowed |= LH_F_PREV_KV;
			break;
		default:
			snprintf(why, why_len, "%s op %zu: unknown op type", branch, i);
			return -EINVAL;
		}
		if (o->flags & ~allowed) {
			snprintf(why, why_len, "%s op %zu: op flags not allowed", branch, i);
			return -EINVAL;
		}
		snprintf(what, sizeof(what), "%s op %zu", branch, i);
		int r = pi_txn_check_key(pi, o->key, (o->flags & LH_F_PREFIX) != 0, what, why, why_len);
		if (r == 0 && o->type == LH_OP_PUT)
			r = pi_txn_check_value(pi, o->value, what, why, why_len);
		if (r < 0)
			return r;
		size_t klen = 0, elen = 0;
		uint8_t *k = pi_txn_bag_keep(bag, pi_txn_full_key(pi, o->key, &klen));
		if (!k)
			return -ENOMEM;
		e->key = k;
		e->key_len = klen;
		if (o->flags & LH_F_PREFIX) {
			uint8_t *end = pi_txn_bag_keep(bag, pi_txn_prefix_end(k, klen, &elen));
			if (!end)
				return -ENOMEM;
			e->range_end = end;
			e->range_end_len = elen;
		}
		e->value = o->value.data;
		e->value_len = o->value.len;
		e->limit = o->limit < 0 ? 0 : o->limit;
		e->prev_kv = (o->flags & LH_F_PREV_KV) != 0;
		e->keys_only = (o->flags & LH_F_KEYS_ONLY) != 0;
		e->count_only = (o->flags & LH_F_COUNT_ONLY) != 0;
	}
	return 0;
}

void pi_txn_unlink(struct plugin_instance *pi, struct pending_txn *pt)
{
	struct pending_txn **pp = &pi->txns;
	while (*pp && *pp != pt)
		pp = &(*pp)->next;
	if (*pp)
		*pp = pt->next;
}

static void pi_txn_on_txn_done(struct etcd_client *c, int err, const struct etcd_response *resp,
			void *userdata)
{
	struct pending_txn *pt = userdata;
	CHECK_OBJ(pt, PENDING_TXN_MAGIC);
	struct plugin_instance *pi = pt->pi;
	(void)c;
	if (pi) {
		pi_txn_unlink(pi, pt);
		if (err < 0) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s%s%s", etcd_strerror(err),
				 resp && resp->error_message ? ": " : "",
				 resp && resp->error_message ? resp->error_message : "");
			pi_reply_txn(pi, pt->id, err, msg, NULL, false);
		} else {
			pi_reply_txn(pi, pt->id, 0, NULL, resp, false);
		}
	}
	pt->magic = 0;
	free(pt);
}

/* pi_txn_may_write - may the running callback's txn go? 0, or the refusal
 * already answered (not in a callback, not leading, an ended term, too
 * many ops). *ret_shadow: a shadow run's callback (captured, never sent). */
static int pi_txn_may_write(struct plugin_instance *pi, const TxnRequest *req, bool *ret_shadow)
{
	if (!pi->sent_head) {
		pi_reply_txn(pi, req->id, -EPERM, "txn outside a callback", NULL, false);
		return -EPERM;
	}
	/* a shadow run's callback: its txns are captured, never sent
	 * (whatever the node's leadership meanwhile). The oldest event in
	 * flight speaks for every one beside it: concurrent keys are all of
	 * one kind (pi_queue_may_send) */
	bool shadow = *ret_shadow = pi->sent_head->shadow;
	if (!shadow && (!pi->leading || !pi->host.fenced_txn)) {
		pi_reply_txn(pi, req->id, -ESTALE,
			     "not leading: this node does not hold the plugin's election, txn refused",
			     NULL, false);
		return -ESTALE;
	}
	if (!shadow && pi->sent_head->term != pi->term) {
		/* a callback of an earlier term (deposed, then elected again
		 * while it ran): the current fence is not its own */
		pi_reply_txn(pi, req->id, -ESTALE,
			     "the term this callback belongs to has ended; txn refused", NULL, false);
		return -ESTALE;
	}
	if (req->n_compares > MAX_TXN_OPS || req->n_success > MAX_TXN_OPS ||
	    req->n_failure > MAX_TXN_OPS) {
		pi_reply_txn(pi, req->id, -E2BIG, "too many ops in one txn", NULL, false);
		return -E2BIG;
	}
	return 0;
}

/* pi_txn_convert_compare - compare i of the plugin's (hostile) into e, its
 * keys kept in bag: 0, or -errno with the reason in why */
static int pi_txn_convert_compare(struct plugin_instance *pi, const BusCompare *bc, size_t i,
				  struct etcd_compare *e, struct keybag *bag, char *why, size_t len)
{
	if (bc->target > LH_CMP_VALUE || bc->result > LH_CMP_NOT_EQUAL ||
	    (bc->flags & ~LH_F_PREFIX)) {
		snprintf(why, len, "compare %zu: bad target, result or flags", i);
		return -EINVAL;
	}
	char what[32];
	snprintf(what, sizeof(what), "compare %zu", i);
	int r;
	if ((r = pi_txn_check_key(pi, bc->key, (bc->flags & LH_F_PREFIX) != 0, what, why, len)) < 0 ||
	    (r = pi_txn_check_value(pi, bc->value, what, why, len)) < 0)
		return r;
	static const enum etcd_cmp_target targets[] = {ETCD_CMP_VERSION, ETCD_CMP_CREATE,
						       ETCD_CMP_MOD, ETCD_CMP_VALUE};
	static const enum etcd_cmp_result results[] = {ETCD_CMP_EQUAL, ETCD_CMP_GREATER,
						       ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL};
	e->target = targets[bc->target];
	e->result = results[bc->result];
	size_t klen = 0, elen = 0;
	uint8_t *k = pi_txn_bag_keep(bag, pi_txn_full_key(pi, bc->key, &klen));
	if (!k)
		return -ENOMEM;
	e->key = k;
	e->key_len = klen;
	if (bc->flags & LH_F_PREFIX) {
		uint8_t *end = pi_txn_bag_keep(bag, pi_txn_prefix_end(k, klen, &elen));
		if (!end)
			return -ENOMEM;
		e->range_end = end;
		e->range_end_len = elen;
	}
	e->number = bc->number;
	e->value = bc->value.data;
	e->value_len = bc->value.len;
	return 0;
}

/* pi_txn_send - the converted txn to etcd through the election's fence,
 * answered from pi_txn_on_txn_done: 0, or -errno with the reason in why */
static int pi_txn_send(struct plugin_instance *pi, const TxnRequest *req,
		       const struct etcd_compare *cmps, const struct etcd_op *succ,
		       const struct etcd_op *fail, char *why, size_t len)
{
	struct pending_txn *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	pt->magic = PENDING_TXN_MAGIC;
	pt->pi = pi;
	pt->id = req->id;
	pt->next = pi->txns;
	pi->txns = pt;
	int r = pi->host.fenced_txn(pi->host.ctx, cmps, req->n_compares, succ, req->n_success, fail,
				    req->n_failure, pi_txn_on_txn_done, pt);
	if (r < 0) {
		pi_txn_unlink(pi, pt);
		free(pt);
		snprintf(why, len, "%s",
			 r == -ESTALE  ? "not leading: the election refused the txn"
			 : r == -EPERM ? "a key lies outside the plugin's data prefix"
				       : "");
	}
	return r;
}

void pi_handle_txn(struct plugin_instance *pi, const TxnRequest *req)
{
	struct keybag bag = {NULL, 0, 0};
	char why[400] = "";
	bool shadow = false;

	pi->stats.txns++;
	if (pi_txn_may_write(pi, req, &shadow) < 0)
		return;
	struct etcd_compare *cmps = calloc(req->n_compares ? req->n_compares : 1, sizeof(*cmps));
	struct etcd_op *succ = calloc(req->n_success ? req->n_success : 1, sizeof(*succ));
	struct etcd_op *fail = calloc(req->n_failure ? req->n_failure : 1, sizeof(*fail));
	int r = cmps && succ && fail ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < req->n_compares; i++)
		r = pi_txn_convert_compare(pi, req->compares[i], i, &cmps[i], &bag, why, sizeof(why));
	if (r == 0)
		r = pi_txn_convert_ops(pi, req->success, req->n_success, succ, &bag, "success", why,
				       sizeof(why));
	if (r == 0)
		r = pi_txn_convert_ops(pi, req->failure, req->n_failure, fail, &bag, "failure", why,
				       sizeof(why));
	if (r == 0 && shadow)
		pi_shadow_handle_txn(pi, req->id, cmps, req->n_compares, succ, req->n_success, fail,
				     req->n_failure);
	else if (r == 0)
		r = pi_txn_send(pi, req, cmps, succ, fail, why, sizeof(why));
	if (r < 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "txn refused: %s", why[0] ? why : strerror(-r));
		pi_reply_txn(pi, req->id, r, msg, NULL, false);
	}
	pi_txn_bag_free(&bag);
	free(cmps);
	free(succ);
	free(fail);
}

static bool pi_txn_strip_prefix(const struct plugin_instance *pi, const struct etcd_kv *kv)
{
	return kv->key && kv->key_len >= pi->prefix_len &&
	       memcmp(kv->key, pi->data_prefix, pi->prefix_len) == 0;
}

void pi_reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
		  const struct etcd_response *resp, bool absolute)
{
	size_t strip = absolute ? 0 : pi->prefix_len;
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	BusOpResult *ors = NULL, **orp = NULL;
	BusKv *kvs = NULL, **kvp = NULL;
	rep.id = id;
	rep.err = err;
	if (err < 0) {
		pi->stats.txn_errors++;
		rep.message = bus_bin_str(msg);
	} else if (resp) {
		size_t n = resp->n_responses, n_kv = 0;
		for (size_t i = 0; i < n; i++) {
			const struct etcd_response *r = &resp->responses[i];
			n_kv += r->op_type == ETCD_OP_RANGE ? r->n_kvs : r->n_prev_kvs;
		}
		ors = calloc(n ? n : 1, sizeof(*ors));
		orp = calloc(n ? n : 1, sizeof(*orp));
		kvs = calloc(n_kv ? n_kv : 1, sizeof(*kvs));
		kvp = calloc(n_kv ? n_kv : 1, sizeof(*kvp));
		if (!ors || !orp || !kvs || !kvp) {
			rep.err = -ENOMEM;
			rep.message = bus_bin_str("out of memory");
			pi->stats.txn_errors++;
			goto send;
		}
		rep.succeeded = resp->succeeded;
		rep.revision = resp->header.revision;
		rep.n_results = n;
		rep.results = orp;
		size_t ki = 0;
		for (size_t i = 0; i < n; i++) {
			const struct etcd_response *r = &resp->responses[i];
			BusOpResult *o = &ors[i];
			leasehold__bus__op_result__init(o);
			orp[i] = o;
			o->type = r->op_type == ETCD_OP_RANGE ? LH_OP_RANGE
				  : r->op_type == ETCD_OP_PUT ? LH_OP_PUT
							      : LH_OP_DELETE;
			o->more = r->more;
			o->count = r->count;
			o->deleted = r->deleted;
			const struct etcd_kv *src =
			    r->op_type == ETCD_OP_RANGE ? r->kvs : r->prev_kvs;
			size_t ns = r->op_type == ETCD_OP_RANGE ? r->n_kvs : r->n_prev_kvs;
			o->kvs = &kvp[ki];
			for (size_t k = 0; k < ns; k++) {
				const struct etcd_kv *kv = &src[k];
				if (absolute ? !pi_granted(pi, kv->key, kv->key_len)
					     : !pi_txn_strip_prefix(pi, kv)) {
					log_debug(pi->log_comp,
						  "txn result key outside the data prefix dropped");
					continue;
				}
				bus_kv_from_etcd(&kvs[ki], kv, strip);
				kvp[ki] = &kvs[ki];
				ki++;
				o->n_kvs++;
			}
		}
	}
send:;
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	int r = pi_send_to_worker(pi, &tw.base);
	if (r < 0 && r != -EPIPE)
		log_error(pi->log_comp, "cannot answer a txn request: %s", strerror(-r));
	free(ors);
	free(orp);
	free(kvs);
	free(kvp);
}

void pi_txns_orphan(struct plugin_instance *pi)
{
	for (struct pending_txn *pt = pi->txns; pt;) {
		struct pending_txn *next = pt->next;
		CHECK_OBJ(pt, PENDING_TXN_MAGIC);
		pt->pi = NULL; /* freed by pi_txn_on_txn_done when etcd answers */
		pt->next = NULL;
		pt = next;
	}
	pi->txns = NULL;
}
