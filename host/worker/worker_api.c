/* SPDX-License-Identifier: MIT */
/*
 * worker_api.c - the host API a plugin calls (struct lh_host_api in
 * plugin.h), on the worker's side of the bus: log and errors, txn (fenced by
 * the host), and ABI 1.2's watch, range, request_reconcile and config. Every
 * function checks that it runs on the worker's thread inside a callback;
 * txn and range send a request to the host and wait for its answer through
 * the bus loop (worker.c).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "worker/worker_internal.h"

static void worker_api_log(struct lh_ctx *ctx, int32_t level, const char *msg)
{
	struct worker *w = worker_from_ctx(ctx);
	if (!worker_on_own_thread(w) || !msg)
		return;
	if (level < LH_LOG_ERROR)
		level = LH_LOG_ERROR;
	if (level > LH_LOG_DEBUG)
		level = LH_LOG_DEBUG;
	if (level > (int32_t)log_get_level())
		return; /* the host would drop it anyway */
	Leasehold__Bus__Log lg = LEASEHOLD__BUS__LOG__INIT;
	lg.level = (uint32_t)level;
	lg.message = bus_bin(msg, strnlen(msg, 4096));
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_LOG;
	th.log = &lg;
	worker_send(w, &th.base);
}

static void worker_api_set_error(struct lh_ctx *ctx, const char *msg)
{
	struct worker_call *c = worker_call_cur(worker_from_ctx(ctx));
	if (!c)
		return;
	snprintf(c->errmsg, sizeof(c->errmsg), "%s", msg ? msg : "");
}

static const char *worker_api_last_error(struct lh_ctx *ctx)
{
	struct worker_call *c = worker_call_cur(worker_from_ctx(ctx));
	return c ? c->txn_error : "";
}

static int64_t worker_api_fencing_token(struct lh_ctx *ctx)
{
	struct worker *w = worker_from_ctx(ctx);
	return worker_on_own_thread(w) ? w->token : 0;
}

static const char *worker_api_node_id(struct lh_ctx *ctx)
{
	struct worker *w = worker_from_ctx(ctx);
	return w->node_id ? w->node_id : "";
}

static const char *worker_api_data_prefix(struct lh_ctx *ctx)
{
	struct worker *w = worker_from_ctx(ctx);
	return w->data_prefix ? w->data_prefix : "";
}

static const struct lh_config *worker_api_config(struct lh_ctx *ctx)
{
	static const struct lh_config none = {sizeof(struct lh_config), 0, NULL, 0, 0, NULL, 0};
	struct worker *w = worker_from_ctx(ctx);
	return worker_on_own_thread(w) ? &w->cfg : &none;
}
void worker_api_txn_fail(struct worker *w, const char *fmt, ...)
{
	struct worker_call *c = worker_call_cur(w);
	if (!c)
		return; /* the API refused the caller before anything was kept */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->txn_error, sizeof(c->txn_error), fmt, ap);
	va_end(ap);
}

static int worker_api_check_ops(struct worker *w, const struct lh_op *ops, uint32_t n, const char *branch)
{
	if (n > MAX_TXN_OPS || (n && !ops)) {
		worker_api_txn_fail(w, "too many %s ops (%u, max %u)", branch, n, MAX_TXN_OPS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct lh_op *o = &ops[i];
		uint32_t allowed = LH_F_PREFIX;
		if (o->type == LH_OP_RANGE)
			allowed |= LH_F_KEYS_ONLY | LH_F_COUNT_ONLY;
		else if (o->type == LH_OP_PUT || o->type == LH_OP_DELETE)
			allowed |= LH_F_PREV_KV;
		else {
			worker_api_txn_fail(w, "%s op %u: unknown type %u", branch, i, o->type);
			return -EINVAL;
		}
		if (o->type == LH_OP_PUT && (o->flags & LH_F_PREFIX))
			allowed &= ~LH_F_PREFIX;
		if (o->flags & ~allowed) {
			worker_api_txn_fail(w, "%s op %u: flags 0x%x not allowed for this op", branch, i, o->flags);
			return -EINVAL;
		}
		if (o->key_len > MAX_KEY_LEN || (o->key_len && !o->key) ||
		    o->value_len > MAX_VALUE_LEN || (o->value_len && !o->value)) {
			worker_api_txn_fail(w, "%s op %u: key or value too long or NULL", branch, i);
			return -EINVAL;
		}
	}
	return 0;
}

static BusOp *worker_api_fill_ops(const struct lh_op *ops, uint32_t n, BusOp *store, BusOp **ptrs)
{
	for (uint32_t i = 0; i < n; i++) {
		leasehold__bus__op__init(&store[i]);
		store[i].type = ops[i].type;
		store[i].flags = ops[i].flags;
		store[i].key = bus_bin(ops[i].key, ops[i].key_len);
		store[i].value = bus_bin(ops[i].value, ops[i].value_len);
		store[i].limit = ops[i].limit;
		ptrs[i] = &store[i];
	}
	return store;
}
/* worker_api_txn_check - a txn's arguments, before anything is built: 0, or
 * -errno with the reason kept for the plugin (worker_api_txn_fail) */
static int32_t worker_api_txn_check(struct worker *w, const struct lh_compare *cmps,
                                    uint32_t n_cmps, const struct lh_op *success,
                                    uint32_t n_success, const struct lh_op *failure,
                                    uint32_t n_failure, const struct lh_txn_result **ret_result)
{
	if (w->validating) {
		worker_api_txn_fail(w, "validate_config may not write");
		return -EPERM;
	}
	if (!ret_result) {
		worker_api_txn_fail(w, "ret_result is NULL");
		return -EINVAL;
	}
	if (n_cmps > MAX_TXN_OPS || (n_cmps && !cmps)) {
		worker_api_txn_fail(w, "too many compares (%u, max %u)", n_cmps, MAX_TXN_OPS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < n_cmps; i++) {
		const struct lh_compare *c = &cmps[i];
		if (c->target > LH_CMP_VALUE || c->result > LH_CMP_NOT_EQUAL ||
		    (c->flags & ~LH_F_PREFIX) || c->key_len > MAX_KEY_LEN || (c->key_len && !c->key) ||
		    c->value_len > MAX_VALUE_LEN || (c->value_len && !c->value)) {
			worker_api_txn_fail(w, "compare %u: bad target, result, flags or key", i);
			return -EINVAL;
		}
	}
	int32_t r = worker_api_check_ops(w, success, n_success, "success");
	return r < 0 ? r : worker_api_check_ops(w, failure, n_failure, "failure");
}

/* worker_api_txn_roundtrip - send the request th (id) and wait for its
 * reply: the result (in the callback's arena), or -errno with the reason
 * kept for the plugin */
static int32_t worker_api_txn_roundtrip(struct worker *w, const ToHost *th, uint64_t id,
                                        const struct lh_txn_result **ret_result)
{
	nng_msg *msg = bus_pack_msg(&th->base);
	if (!msg) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	if (nng_msg_len(msg) > WORKER_TXN_MSG_MAX) {
		worker_api_txn_fail(w, "txn of %zu bytes (keys, values and framing) is larger than "
				       "the bus's %u bytes: split it",
				    nng_msg_len(msg), WORKER_TXN_MSG_MAX);
		nng_msg_free(msg);
		return -E2BIG;
	}
	if (worker_send_request(w, msg, id) < 0) {
		worker_api_txn_fail(w, "bus closed: the instance is shutting down");
		return -ECANCELED;
	}
	int r;
	ToWorker *tw = worker_wait_txn_reply(w, id, &r);
	if (!tw) {
		if (r == -ETIMEDOUT)
			worker_api_txn_fail(w, "no answer from the host within %u ms: the outcome is unknown",
			         w->txn_timeout_ms);
		else
			worker_api_txn_fail(w, "bus closed: the instance is shutting down");
		return r;
	}
	const TxnReply *rep = tw->txn_reply;
	if (rep->err != 0) {
		r = (rep->err < 0 && rep->err > -4096) ? rep->err : -EIO;
		worker_api_txn_fail(w, "%.*s", (int)(rep->message.len > 500 ? 500 : rep->message.len),
		         rep->message.data ? (const char *)rep->message.data : "");
	} else if ((r = worker_build_result(w, rep, ret_result)) < 0) {
		worker_api_txn_fail(w, "bad txn reply from the host");
	}
	leasehold__bus__to_worker__free_unpacked(tw, NULL);
	return r;
}

int32_t worker_api_txn(struct lh_ctx *ctx, const struct lh_compare *cmps, uint32_t n_cmps,
                       const struct lh_op *success, uint32_t n_success, const struct lh_op *failure,
                       uint32_t n_failure, const struct lh_txn_result **ret_result)
{
	struct worker *w = worker_from_ctx(ctx);
	struct worker_call *c = worker_call_cur(w);
	if (!c)
		return -EPERM; /* no safe place to put a message */
	c->txn_error[0] = 0;
	int32_t r = worker_api_txn_check(w, cmps, n_cmps, success, n_success, failure, n_failure,
	                                 ret_result);
	if (r < 0)
		return r;
	BusCompare *cs = calloc(n_cmps ? n_cmps : 1, sizeof(*cs));
	BusCompare **cp = calloc(n_cmps ? n_cmps : 1, sizeof(*cp));
	BusOp *ss = calloc(n_success ? n_success : 1, sizeof(*ss));
	BusOp **sp = calloc(n_success ? n_success : 1, sizeof(*sp));
	BusOp *fs = calloc(n_failure ? n_failure : 1, sizeof(*fs));
	BusOp **fp = calloc(n_failure ? n_failure : 1, sizeof(*fp));
	if (!cs || !cp || !ss || !sp || !fs || !fp) {
		r = -ENOMEM;
		worker_api_txn_fail(w, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n_cmps; i++) {
		leasehold__bus__compare__init(&cs[i]);
		cs[i].target = cmps[i].target;
		cs[i].result = cmps[i].result;
		cs[i].flags = cmps[i].flags;
		cs[i].key = bus_bin(cmps[i].key, cmps[i].key_len);
		cs[i].number = cmps[i].number;
		cs[i].value = bus_bin(cmps[i].value, cmps[i].value_len);
		cp[i] = &cs[i];
	}
	worker_api_fill_ops(success, n_success, ss, sp);
	worker_api_fill_ops(failure, n_failure, fs, fp);
	TxnRequest req = LEASEHOLD__BUS__TXN_REQUEST__INIT;
	req.id = ++w->last_txn_id;
	req.n_compares = n_cmps;
	req.compares = cp;
	req.n_success = n_success;
	req.success = sp;
	req.n_failure = n_failure;
	req.failure = fp;
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_TXN;
	th.txn = &req;
	r = worker_api_txn_roundtrip(w, &th, req.id, ret_result);
out:
	free(cs);
	free(cp);
	free(ss);
	free(sp);
	free(fs);
	free(fp);
	return r;
}

/* ---- ABI 1.2: watch, range, request_reconcile ---- */

static bool worker_api_bytes_start(const void *k, size_t len, const void *prefix, size_t plen)
{
	return len >= plen && (plen == 0 || memcmp(k, prefix, plen) == 0);
}

/* does a grant cover the full key k (a key, or a prefix: every key under it)? */
static bool worker_api_granted(const struct worker *w, const void *k, size_t len)
{
	for (size_t i = 0; i < w->n_grants; i++)
		if (worker_api_bytes_start(k, len, w->grants[i].data, w->grants[i].len))
			return true;
	return false;
}

/* the full key for a plugin key (relative unless absolute); NULL on ENOMEM */
static uint8_t *worker_api_full_key(const struct worker *w, const void *k, size_t len, bool absolute,
                                size_t *ret_len)
{
	size_t pl = absolute ? 0 : strlen(w->data_prefix);
	uint8_t *f = malloc(pl + len + 1);
	if (!f)
		return NULL;
	memcpy(f, w->data_prefix, pl);
	if (len)
		memcpy(f + pl, k, len);
	f[pl + len] = 0;
	*ret_len = pl + len;
	return f;
}

static void worker_api_refuse_ungranted(struct worker *w, const char *what, const void *k, size_t len)
{
	char shown[200];
	size_t n = len < sizeof(shown) - 1 ? len : sizeof(shown) - 1;
	for (size_t i = 0; i < n; i++) {
		char c = ((const char *)k)[i];
		shown[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
	}
	shown[n] = 0;
	worker_api_txn_fail(w, "%s of \"%s\" refused: not granted (outside %s; the operator grants read "
	         "access with leasehold --plugin-read %s=PREFIX)",
	         what, shown, w->data_prefix, w->desc.name ? w->desc.name : "NAME");
	worker_api_log(&w->ctx, LH_LOG_ERROR, worker_api_last_error(&w->ctx));
}

static int32_t worker_api_watch(struct lh_ctx *ctx, const void *prefix, uint64_t prefix_len,
                         uint32_t flags)
{
	struct worker *w = worker_from_ctx(ctx);
	struct worker_call *c = worker_call_cur(w);
	if (!c || !w->in_init) {
		worker_api_txn_fail(w, "watch may be called only from init");
		return -EPERM;
	}
	c->txn_error[0] = 0;
	if ((flags & ~(LH_WATCH_ABSOLUTE | LH_WATCH_PREV_KV)) || (prefix_len && !prefix) ||
	    prefix_len > MAX_WATCH_PREFIX || ((flags & LH_WATCH_ABSOLUTE) && prefix_len == 0)) {
		worker_api_txn_fail(w, "watch: bad flags 0x%x or prefix", flags);
		return -EINVAL;
	}
	if (w->no_watches) {
		worker_api_txn_fail(w, "this host offers no watches");
		return -ENOTSUP;
	}
	if (w->n_watches >= LH_WATCH_MAX) {
		worker_api_txn_fail(w, "watch: more than %u watches", LH_WATCH_MAX);
		return -ENOSPC;
	}
	bool absolute = (flags & LH_WATCH_ABSOLUTE) != 0;
	if (absolute && !worker_api_granted(w, prefix, (size_t)prefix_len)) {
		worker_api_refuse_ungranted(w, "watch", prefix, (size_t)prefix_len);
		return -EPERM;
	}
	struct worker_watch *ww = &w->watches[w->n_watches];
	ww->prefix = worker_api_full_key(w, prefix, (size_t)prefix_len, absolute, &ww->len);
	if (!ww->prefix) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	ww->flags = flags;
	return (int32_t)w->n_watches++;
}
static int worker_api_range_send(struct worker *w, const void *key, size_t key_len, uint32_t flags,
                                 int64_t limit, const void *from, size_t from_len, ToWorker **ret_tw);

static int32_t worker_api_range(struct lh_ctx *ctx, const void *key, uint64_t key_len, uint32_t flags,
                         int64_t limit, const struct lh_op_result **ret_result)
{
	struct worker *w = worker_from_ctx(ctx);
	struct worker_call *c = worker_call_cur(w);
	if (!c)
		return -EPERM;
	c->txn_error[0] = 0;
	if (!ret_result || (flags & ~(LH_F_PREFIX | LH_F_KEYS_ONLY | LH_F_COUNT_ONLY | LH_F_ABSOLUTE)) ||
	    key_len > MAX_KEY_LEN || (key_len && !key) || ((flags & LH_F_ABSOLUTE) && !key_len)) {
		worker_api_txn_fail(w, "range: bad flags 0x%x, key or ret_result", flags);
		return -EINVAL;
	}
	if (w->no_watches) {
		worker_api_txn_fail(w, "this host offers no range reads");
		return -ENOTSUP;
	}
	if ((flags & LH_F_ABSOLUTE) && !worker_api_granted(w, key, (size_t)key_len)) {
		worker_api_refuse_ungranted(w, "range", key, (size_t)key_len);
		return -EPERM;
	}
	ToWorker *tw = NULL;
	int r = worker_api_range_send(w, key, (size_t)key_len, flags, limit, NULL, 0, &tw);
	if (r < 0)
		return r;
	const TxnReply *rep = tw->txn_reply;
	const struct lh_txn_result *res = NULL;
	if ((r = worker_build_result(w, rep, &res)) < 0)
		worker_api_txn_fail(w, "out of memory");
	else
		*ret_result = &res->results[0];
	leasehold__bus__to_worker__free_unpacked(tw, NULL);
	return r;
}

/* worker_api_range_send - one RangeRequest and its answer: 0 with *ret_tw
 * (a TxnReply without error, one result; the caller frees it) or -errno
 * with last_error set */
static int worker_api_range_send(struct worker *w, const void *key, size_t key_len, uint32_t flags,
                                 int64_t limit, const void *from, size_t from_len, ToWorker **ret_tw)
{
	Leasehold__Bus__RangeRequest req = LEASEHOLD__BUS__RANGE_REQUEST__INIT;
	req.id = ++w->last_txn_id;
	req.key = bus_bin(key, key_len);
	req.from = bus_bin(from, from_len);
	req.flags = flags;
	req.limit = limit < 0 ? 0 : limit;
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_RANGE;
	th.range = &req;
	nng_msg *msg = bus_pack_msg(&th.base);
	if (!msg) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	if (worker_send_request(w, msg, req.id) < 0) {
		worker_api_txn_fail(w, "bus closed: the instance is shutting down");
		return -ECANCELED;
	}
	int r = 0;
	ToWorker *tw = worker_wait_txn_reply(w, req.id, &r);
	if (!tw) {
		worker_api_txn_fail(w, r == -ETIMEDOUT ? "range: no answer from the host in time"
		                            : "bus closed: the instance is shutting down");
		return r;
	}
	const TxnReply *rep = tw->txn_reply;
	if (rep->err != 0) {
		r = (rep->err < 0 && rep->err > -4096) ? rep->err : -EIO;
		worker_api_txn_fail(w, "%.*s", (int)(rep->message.len > 500 ? 500 : rep->message.len),
		         rep->message.data ? (const char *)rep->message.data : "");
	} else if (rep->n_results != 1 || !rep->results[0] || rep->results[0]->type != LH_OP_RANGE) {
		r = -EBADMSG;
		worker_api_txn_fail(w, "bad range reply from the host");
	}
	if (r < 0) {
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		return r;
	}
	*ret_tw = tw;
	return 0;
}

int worker_api_range_page(struct worker *w, const void *key, size_t key_len, uint32_t flags,
                          const void *from, size_t from_len, int64_t limit, ToWorker **ret_tw)
{
	if (w->no_watches) {
		worker_api_txn_fail(w, "this host offers no range reads");
		return -ENOTSUP;
	}
	return worker_api_range_send(w, key, key_len, flags, limit, from, from_len, ret_tw);
}

static int32_t worker_api_request_reconcile(struct lh_ctx *ctx)
{
	struct worker *w = worker_from_ctx(ctx);
	if (!worker_on_own_thread(w))
		return -EPERM;
	if (!w->token)
		return -ESTALE;
	Leasehold__Bus__RequestReconcile rr = LEASEHOLD__BUS__REQUEST_RECONCILE__INIT;
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_REQUEST_RECONCILE;
	th.request_reconcile = &rr;
	worker_send(w, &th.base);
	return 0;
}

void worker_api_explain(struct worker_call *c, unsigned kind, int32_t err)
{
	const char *name = strerrorname_np(-err);
	char rv[24];
	if (name)
		snprintf(rv, sizeof(rv), "-%s", name);
	else
		snprintf(rv, sizeof(rv), "%d", (int)err);
	snprintf(c->errmsg, sizeof(c->errmsg), "%s returned %s (no reason given)%s%.400s",
		 worker_callback_name(kind), rv, c->txn_error[0] ? "; the host refused: " : "",
		 c->txn_error);
}

void worker_api_init(struct worker *w)
{
	w->ctx.size = sizeof(w->ctx);
	w->ctx.host = &w->api;
	w->api.size = sizeof(w->api);
	w->api.abi_minor = LH_PLUGIN_ABI_MINOR;
	w->api.log = worker_api_log;
	w->api.set_error = worker_api_set_error;
	w->api.txn = worker_api_txn;
	w->api.last_error = worker_api_last_error;
	w->api.fencing_token = worker_api_fencing_token;
	w->api.node_id = worker_api_node_id;
	w->api.data_prefix = worker_api_data_prefix;
	w->api.watch = worker_api_watch;
	w->api.range = worker_api_range;
	w->api.request_reconcile = worker_api_request_reconcile;
	w->api.config = worker_api_config;
	w->api.apply = worker_apply;
	w->api.apply_key = worker_apply_key;
	worker_config_api_init(w);
	w->cfg.size = sizeof(w->cfg);
}
