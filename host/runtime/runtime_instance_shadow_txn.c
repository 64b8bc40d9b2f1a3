/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_shadow_txn.c - the txns of a shadow run's callbacks
 * (runtime_instance_shadow.c): captured, never sent. Reading guide:
 * runtime_instance.c.
 *
 * Design notes
 * - The capture sits between the checked txn and the etcd client: a worker
 *   (a hostile process) cannot bypass it, because the only path from its
 *   txn to etcd is pi_handle_txn, which hands a shadow callback's txns here
 *   whatever the node's leadership, and here no write op is ever built.
 * - A txn becomes a read-only txn with the same compares: each put reads
 *   its key, each delete its key or range, ranges stay ranges. etcd decides
 *   the compares as it would have; the branch it took names the writes
 *   captured, with the old values read in the same txn. The answer to the
 *   plugin is shaped as the write's (put: prev_kvs when asked; delete:
 *   deleted count), its revision the read's plus one per writing txn so
 *   far. Later reads do not see captured writes (nothing was written).
 * - Bounded: at most PLUGIN_SHADOW_MAX_WRITES writes per run (the txn that
 *   would pass it fails with -E2BIG and the report says truncated); values
 *   are reported as length, hash and first bytes only; once the run has
 *   reported (its timeout) every txn is refused.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

/* one op of a captured txn, as its read answers it */
struct pi_shadow_op {
	enum etcd_op_type type; /* the plugin's op */
	bool prev_kv;
	uint8_t *key; /* put: the full key and the new value (copies) */
	size_t key_len;
	uint8_t *value;
	size_t value_len;
};

struct pi_shadow_txn {
	struct pi_shadow_op *ops; /* success ops, then failure ops */
	size_t n_succ, n_fail;
	uint64_t run; /* the shadow run it belongs to (pi_shadow.run) */
};

static uint64_t pi_shadow_fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void pi_shadow_value(struct plugin_shadow_value *v, const uint8_t *p, size_t n)
{
	v->present = true;
	v->len = n;
	v->hash = pi_shadow_fnv(p, n);
	v->head_len = n < PLUGIN_SHADOW_HEAD ? (uint32_t)n : PLUGIN_SHADOW_HEAD;
	if (v->head_len)
		memcpy(v->head, p, v->head_len);
}

void pi_shadow_txn_free(struct pi_shadow_txn *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_succ + st->n_fail; i++) {
		free(st->ops[i].key);
		free(st->ops[i].value);
	}
	free(st->ops);
	free(st);
}


/* the read that stands for op in (a put reads its key, a delete its range) and
 * the op as the answer is shaped after, into *so (copies) */
static int pi_shadow_read_op(const struct etcd_op *in, struct etcd_op *out, struct pi_shadow_op *so)
{
	*out = *in;
	so->type = in->type;
	so->prev_kv = in->prev_kv;
	if (in->type == ETCD_OP_RANGE)
		return 0;
	out->type = ETCD_OP_RANGE;
	out->prev_kv = false;
	out->value = NULL;
	out->value_len = 0;
	out->lease = 0;
	out->keys_only = false;
	out->count_only = false;
	/* one more than the bound: the answer's `more` says it was passed */
	out->limit = PLUGIN_SHADOW_MAX_WRITES + 1;
	if (in->type != ETCD_OP_PUT)
		return 0;
	out->range_end = NULL;
	out->range_end_len = 0;
	so->key = malloc(in->key_len ? in->key_len : 1);
	so->value = malloc(in->value_len ? in->value_len : 1);
	if (!so->key || !so->value)
		return -ENOMEM;
	memcpy(so->key, in->key, in->key_len);
	so->key_len = in->key_len;
	if (in->value_len)
		memcpy(so->value, in->value, in->value_len);
	so->value_len = in->value_len;
	return 0;
}

static void pi_shadow_on_txn(struct etcd_client *c, int err, const struct etcd_response *resp,
			     void *userdata);

void pi_shadow_handle_txn(struct plugin_instance *pi, uint64_t id, const struct etcd_compare *cmps,
			  size_t n_cmps, const struct etcd_op *succ, size_t n_succ,
			  const struct etcd_op *fail, size_t n_fail)
{
	size_t n = n_succ + n_fail;
	struct etcd_op *reads = calloc(n ? n : 1, sizeof(*reads));
	struct pi_shadow_txn *st = calloc(1, sizeof(*st));
	struct pending_txn *pt = calloc(1, sizeof(*pt));
	int r = -ENOMEM;

	if (!pi->shadow || pi->shadow->reported) {
		r = -ETIMEDOUT;
		goto refuse;
	}
	if (!reads || !st || !pt || !(st->ops = calloc(n ? n : 1, sizeof(*st->ops))))
		goto refuse;
	st->n_succ = n_succ;
	st->n_fail = n_fail;
	st->run = pi->shadow->run;
	for (size_t i = 0; i < n; i++)
		if ((r = pi_shadow_read_op(i < n_succ ? &succ[i] : &fail[i - n_succ], &reads[i],
					   &st->ops[i])) < 0)
			goto refuse;
	pt->magic = PENDING_TXN_MAGIC;
	pt->pi = pi;
	pt->id = id;
	pt->shadow = st;
	pt->next = pi->txns;
	pi->txns = pt;
	r = etcd_txn(pi->host.etcd, cmps, n_cmps, reads, n_succ, reads + n_succ, n_fail, NULL,
		     pi_shadow_on_txn, pt, NULL);
	if (r < 0) {
		pi_txn_unlink(pi, pt);
		goto refuse;
	}
	free(reads);
	return;
refuse:
	pi_reply_txn(pi, id, r,
		     r == -ETIMEDOUT ? "txn refused: the shadow run has ended (timed out); nothing "
				       "was sent"
				     : "txn refused: shadow run: out of memory or etcd refused the read",
		     NULL, false);
	free(reads);
	pi_shadow_txn_free(st);
	free(pt);
}

/* the writes the answer's branch stands for; -E2BIG past the bound */
static int pi_shadow_count(const struct pi_shadow *sh, const struct pi_shadow_op *ops,
			   const struct etcd_response *rs, size_t n)
{
	uint64_t adds = 0;
	for (size_t i = 0; i < n; i++) {
		if (ops[i].type == ETCD_OP_RANGE)
			continue;
		if (rs[i].more)
			return -E2BIG;
		adds += ops[i].type == ETCD_OP_PUT ? 1 : (rs[i].n_kvs ? rs[i].n_kvs : 1);
	}
	const struct plugin_shadow_report *rep = &sh->rep;
	return rep->puts + rep->deletes + rep->unchanged + adds > PLUGIN_SHADOW_MAX_WRITES
		       ? -E2BIG
		       : 0;
}

static int pi_shadow_add(struct plugin_instance *pi, struct pi_shadow *sh, bool del,
			 const uint8_t *key, size_t key_len, const struct etcd_kv *old,
			 const struct pi_shadow_op *put)
{
	struct plugin_shadow_report *rep = &sh->rep;
	if (key_len < pi->prefix_len)
		return -EINVAL; /* cannot be: every key was built under the prefix */
	if (rep->n_writes == rep->cap) {
		size_t cap = rep->cap ? rep->cap * 2 : 16;
		struct plugin_shadow_write *w = realloc(rep->writes, cap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		rep->writes = w;
		rep->cap = cap;
	}
	struct plugin_shadow_write *w = &rep->writes[rep->n_writes];
	memset(w, 0, sizeof(*w));
	w->key_len = key_len - pi->prefix_len;
	if (!(w->key = malloc(w->key_len + 1)))
		return -ENOMEM;
	memcpy(w->key, key + pi->prefix_len, w->key_len);
	w->key[w->key_len] = 0;
	w->del = del;
	if (old)
		pi_shadow_value(&w->old_value, old->value, old->value_len);
	if (put)
		pi_shadow_value(&w->new_value, put->value, put->value_len);
	rep->n_writes++;
	if (del)
		rep->deletes++;
	else
		rep->puts++;
	return 0;
}

/* capture the writes of the branch taken; true when one would change etcd */
static int pi_shadow_capture(struct plugin_instance *pi, struct pi_shadow *sh,
			     const struct pi_shadow_op *ops, const struct etcd_response *rs,
			     size_t n, bool *ret_wrote)
{
	int r = 0;
	*ret_wrote = false;
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct etcd_kv *kv = rs[i].n_kvs ? &rs[i].kvs[0] : NULL;
		if (ops[i].type == ETCD_OP_PUT) {
			if (kv && kv->value_len == ops[i].value_len &&
			    (!kv->value_len || memcmp(kv->value, ops[i].value, kv->value_len) == 0)) {
				sh->rep.unchanged++;
				continue;
			}
			r = pi_shadow_add(pi, sh, false, ops[i].key, ops[i].key_len, kv, &ops[i]);
			*ret_wrote = true;
		} else if (ops[i].type == ETCD_OP_DELETE) {
			if (!rs[i].n_kvs)
				sh->rep.unchanged++;
			for (size_t k = 0; k < rs[i].n_kvs && r == 0; k++)
				r = pi_shadow_add(pi, sh, true, rs[i].kvs[k].key, rs[i].kvs[k].key_len,
						  &rs[i].kvs[k], NULL);
			*ret_wrote = *ret_wrote || rs[i].n_kvs;
		}
	}
	return r;
}

/* answer the plugin as if its txn had been applied */
static void pi_shadow_answer(struct plugin_instance *pi, uint64_t id, const struct pi_shadow_op *ops,
			     const struct etcd_response *resp, size_t n, int64_t rev)
{
	struct etcd_response syn = *resp;
	struct etcd_response *rs = calloc(n ? n : 1, sizeof(*rs));
	if (!rs) {
		pi_reply_txn(pi, id, -ENOMEM, "txn refused: out of memory", NULL, false);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		rs[i] = resp->responses[i];
		if (ops[i].type == ETCD_OP_RANGE)
			continue;
		rs[i].op_type = ops[i].type;
		rs[i].prev_kvs = ops[i].prev_kv ? rs[i].kvs : NULL;
		rs[i].n_prev_kvs = ops[i].prev_kv ? rs[i].n_kvs : 0;
		rs[i].deleted = ops[i].type == ETCD_OP_DELETE ? (int64_t)rs[i].n_kvs : 0;
		rs[i].kvs = NULL;
		rs[i].n_kvs = 0;
		rs[i].count = 0;
		rs[i].more = false;
	}
	syn.responses = rs;
	syn.header.revision = rev;
	pi_reply_txn(pi, id, 0, NULL, &syn, false);
	free(rs);
}

static void pi_shadow_settle(struct plugin_instance *pi, const struct pending_txn *pt, int err,
			     const struct etcd_response *resp)
{
	struct pi_shadow *sh = pi->shadow;
	const struct pi_shadow_txn *st = pt->shadow;
	char msg[512];
	if (err < 0) {
		snprintf(msg, sizeof(msg), "shadow read: %s%s%s", etcd_strerror(err),
			 resp && resp->error_message ? ": " : "",
			 resp && resp->error_message ? resp->error_message : "");
		pi_reply_txn(pi, pt->id, err, msg, NULL, false);
		return;
	}
	/* a read answered after its run ended (and maybe another began) is
	 * captured into none */
	if (!sh || sh->reported || sh->run != st->run) {
		pi_reply_txn(pi, pt->id, -ETIMEDOUT,
			     "txn refused: the shadow run has ended (timed out); nothing was sent",
			     NULL, false);
		return;
	}
	sh->rep.txns++;
	const struct pi_shadow_op *ops = resp->succeeded ? st->ops : st->ops + st->n_succ;
	size_t n = resp->succeeded ? st->n_succ : st->n_fail;
	if (resp->n_responses != n) {
		pi_reply_txn(pi, pt->id, -EIO, "shadow read: etcd's answer does not match the txn",
			     NULL, false);
		return;
	}
	if (!sh->rep.revision)
		sh->rep.revision = resp->header.revision;
	sh->rep.last_revision = resp->header.revision;
	if (pi_shadow_count(sh, ops, resp->responses, n) < 0) {
		sh->rep.truncated = true;
		snprintf(msg, sizeof(msg),
			 "txn refused: shadow run: more than %u writes; the preview is bounded and "
			 "this txn was not captured",
			 PLUGIN_SHADOW_MAX_WRITES);
		pi_reply_txn(pi, pt->id, -E2BIG, msg, NULL, false);
		return;
	}
	bool wrote = false;
	if (pi_shadow_capture(pi, sh, ops, resp->responses, n, &wrote) < 0) {
		sh->rep.truncated = true;
		pi_reply_txn(pi, pt->id, -ENOMEM, "txn refused: shadow run: out of memory", NULL,
			     false);
		return;
	}
	if (wrote)
		sh->writing_txns++;
	pi_shadow_answer(pi, pt->id, ops, resp, n, resp->header.revision + (int64_t)sh->writing_txns);
}

static void pi_shadow_on_txn(struct etcd_client *c, int err, const struct etcd_response *resp,
			     void *userdata)
{
	struct pending_txn *pt = userdata;
	(void)c;
	CHECK_OBJ(pt, PENDING_TXN_MAGIC);
	if (pt->pi) {
		pi_txn_unlink(pt->pi, pt);
		pi_shadow_settle(pt->pi, pt, err, resp);
	}
	pi_shadow_txn_free(pt->shadow);
	pt->magic = 0;
	free(pt);
}
