/*
 * plugin_instance.c - see plugin_instance.h for the design notes.
 *
 * The file has three parts: the worker thread (calls the plugin), the host
 * half (loop thread: event queue, bus I/O, txn bridging) and the lifecycle.
 * The two halves share nothing mutable: the worker owns struct worker after
 * pthread_create and until it is joined; everything crosses the bus.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "log.h"
#include "plugin_instance.h"
#include "proto/bus.pb-c.h"

#define DEFAULT_TXN_TIMEOUT_MS 30000u
#define MAX_TXN_OPS 1024u
#define MAX_KEY_LEN (64u * 1024u)
#define MAX_VALUE_LEN (16u * 1024u * 1024u)
#define SYNC_STOP_TIMEOUT_MS 10000
#define LOG_COMPONENT_MAX 80

typedef Leasehold__Bus__ToWorker ToWorker;
typedef Leasehold__Bus__ToHost ToHost;
typedef Leasehold__Bus__Event Event;
typedef Leasehold__Bus__EventDone EventDone;
typedef Leasehold__Bus__TxnRequest TxnRequest;
typedef Leasehold__Bus__TxnReply TxnReply;
typedef Leasehold__Bus__Op BusOp;
typedef Leasehold__Bus__Compare BusCompare;
typedef Leasehold__Bus__OpResult BusOpResult;
typedef Leasehold__Bus__Kv BusKv;

static atomic_uint g_instance_counter;

/* snprintf that may truncate on purpose */
static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

static ProtobufCBinaryData bin(const void *p, size_t len)
{
	ProtobufCBinaryData b = {.len = len, .data = (uint8_t *)(uintptr_t)p};
	return b;
}

static ProtobufCBinaryData bin_str(const char *s)
{
	return bin(s, s ? strlen(s) : 0);
}

/* pack any message into a fresh nng message; NULL on ENOMEM */
static nng_msg *pack_msg(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	nng_msg *msg;
	if (nng_msg_alloc(&msg, n) != 0)
		return NULL;
	protobuf_c_message_pack(m, nng_msg_body(msg));
	return msg;
}

static int nng_to_errno(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case NNG_ENOMEM:
		return -ENOMEM;
	case NNG_EAGAIN:
		return -EAGAIN;
	case NNG_ETIMEDOUT:
		return -ETIMEDOUT;
	case NNG_ECLOSED:
		return -ECANCELED;
	case NNG_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ======================================================================
 * Worker half
 * ====================================================================== */

struct worker {
	struct lh_ctx ctx; /* first: the plugin's context pointer is &w->ctx */
	struct lh_host_api api;
	struct lh_plugin desc; /* copy of the validated descriptor */
	nng_socket sock;
	pthread_t self;
	bool in_callback;
	bool initialized;
	char *node_id;
	char *data_prefix;
	int64_t token;
	uint64_t last_txn_id;
	uint32_t txn_timeout_ms;
	void *result; /* the last txn result (one allocation) */
	char errmsg[512];
	char txn_error[512];
};

static struct worker *ctx_worker(struct lh_ctx *ctx)
{
	return (struct worker *)(void *)ctx;
}

static bool on_worker(const struct worker *w)
{
	return w->in_callback && pthread_equal(pthread_self(), w->self);
}

static void worker_send(struct worker *w, const ProtobufCMessage *m)
{
	nng_msg *msg = pack_msg(m);
	if (!msg)
		return;
	if (nng_sendmsg(w->sock, msg, 0) != 0)
		nng_msg_free(msg);
}

static void worker_protocol_error(struct worker *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void worker_protocol_error(struct worker *w, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	Leasehold__Bus__ProtocolError pe = LEASEHOLD__BUS__PROTOCOL_ERROR__INIT;
	pe.message = bin_str(buf);
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR;
	th.protocol_error = &pe;
	worker_send(w, &th.base);
}

static void api_log(struct lh_ctx *ctx, int32_t level, const char *msg)
{
	struct worker *w = ctx_worker(ctx);
	if (!on_worker(w) || !msg)
		return;
	if (level < LH_LOG_ERROR)
		level = LH_LOG_ERROR;
	if (level > LH_LOG_DEBUG)
		level = LH_LOG_DEBUG;
	if (level > (int32_t)log_get_level())
		return; /* the host would drop it anyway */
	Leasehold__Bus__Log lg = LEASEHOLD__BUS__LOG__INIT;
	lg.level = (uint32_t)level;
	lg.message = bin(msg, strnlen(msg, 4096));
	ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_LOG;
	th.log = &lg;
	worker_send(w, &th.base);
}

static void api_set_error(struct lh_ctx *ctx, const char *msg)
{
	struct worker *w = ctx_worker(ctx);
	if (!on_worker(w))
		return;
	snprintf(w->errmsg, sizeof(w->errmsg), "%s", msg ? msg : "");
}

static const char *api_last_error(struct lh_ctx *ctx)
{
	struct worker *w = ctx_worker(ctx);
	if (!on_worker(w))
		return "";
	return w->txn_error;
}

static int64_t api_fencing_token(struct lh_ctx *ctx)
{
	struct worker *w = ctx_worker(ctx);
	return on_worker(w) ? w->token : 0;
}

static const char *api_node_id(struct lh_ctx *ctx)
{
	struct worker *w = ctx_worker(ctx);
	return w->node_id ? w->node_id : "";
}

static const char *api_data_prefix(struct lh_ctx *ctx)
{
	struct worker *w = ctx_worker(ctx);
	return w->data_prefix ? w->data_prefix : "";
}

static void txn_fail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void txn_fail(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->txn_error, sizeof(w->txn_error), fmt, ap);
	va_end(ap);
}

static int check_ops(struct worker *w, const struct lh_op *ops, uint32_t n, const char *branch)
{
	if (n > MAX_TXN_OPS || (n && !ops)) {
		txn_fail(w, "too many %s ops (%u, max %u)", branch, n, MAX_TXN_OPS);
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
			txn_fail(w, "%s op %u: unknown type %u", branch, i, o->type);
			return -EINVAL;
		}
		if (o->type == LH_OP_PUT && (o->flags & LH_F_PREFIX))
			allowed &= ~LH_F_PREFIX;
		if (o->flags & ~allowed) {
			txn_fail(w, "%s op %u: flags 0x%x not allowed for this op", branch, i, o->flags);
			return -EINVAL;
		}
		if (o->key_len > MAX_KEY_LEN || (o->key_len && !o->key) ||
		    o->value_len > MAX_VALUE_LEN || (o->value_len && !o->value)) {
			txn_fail(w, "%s op %u: key or value too long or NULL", branch, i);
			return -EINVAL;
		}
	}
	return 0;
}

static BusOp *fill_ops(const struct lh_op *ops, uint32_t n, BusOp *store, BusOp **ptrs)
{
	for (uint32_t i = 0; i < n; i++) {
		leasehold__bus__op__init(&store[i]);
		store[i].type = ops[i].type;
		store[i].flags = ops[i].flags;
		store[i].key = bin(ops[i].key, ops[i].key_len);
		store[i].value = bin(ops[i].value, ops[i].value_len);
		store[i].limit = ops[i].limit;
		ptrs[i] = &store[i];
	}
	return store;
}

/* Turn a TxnReply into the plugin's result, in one allocation. */
static int build_result(struct worker *w, const TxnReply *rep, const struct lh_txn_result **ret)
{
	size_t n_kv = 0, n_bytes = 0;
	for (size_t i = 0; i < rep->n_results; i++) {
		const BusOpResult *r = rep->results[i];
		if (r->type > LH_OP_DELETE)
			return -EBADMSG;
		n_kv += r->n_kvs;
		for (size_t k = 0; k < r->n_kvs; k++)
			n_bytes += r->kvs[k]->key.len + 1 + r->kvs[k]->value.len + 1;
	}
	size_t size = sizeof(struct lh_txn_result) + rep->n_results * sizeof(struct lh_op_result) +
	              n_kv * sizeof(struct lh_kv) + n_bytes;
	char *mem = calloc(1, size);
	if (!mem)
		return -ENOMEM;
	struct lh_txn_result *res = (struct lh_txn_result *)(void *)mem;
	struct lh_op_result *ors = (struct lh_op_result *)(void *)(mem + sizeof(*res));
	struct lh_kv *kvs = (struct lh_kv *)(void *)((char *)ors + rep->n_results * sizeof(*ors));
	uint8_t *bytes = (uint8_t *)(kvs + n_kv);
	res->succeeded = rep->succeeded ? 1 : 0;
	res->revision = rep->revision;
	res->results = ors;
	res->n_results = rep->n_results;
	for (size_t i = 0; i < rep->n_results; i++) {
		const BusOpResult *r = rep->results[i];
		ors[i].type = r->type;
		ors[i].more = r->more ? 1 : 0;
		ors[i].count = r->count;
		ors[i].deleted = r->deleted;
		ors[i].kvs = kvs;
		ors[i].n_kvs = r->n_kvs;
		for (size_t k = 0; k < r->n_kvs; k++) {
			const BusKv *b = r->kvs[k];
			struct lh_kv *kv = kvs++;
			if (b->key.len)
				memcpy(bytes, b->key.data, b->key.len);
			bytes[b->key.len] = 0;
			kv->key = bytes;
			kv->key_len = b->key.len;
			bytes += b->key.len + 1;
			if (b->value.len)
				memcpy(bytes, b->value.data, b->value.len);
			bytes[b->value.len] = 0;
			kv->value = bytes;
			kv->value_len = b->value.len;
			bytes += b->value.len + 1;
			kv->create_revision = b->create_revision;
			kv->mod_revision = b->mod_revision;
			kv->version = b->version;
		}
	}
	free(w->result);
	w->result = mem;
	*ret = res;
	return 0;
}

/* Wait for the TxnReply with id; returns it (caller frees) or NULL with *err. */
static ToWorker *wait_txn_reply(struct worker *w, uint64_t id, int *err)
{
	uint64_t deadline = loop_now() + (uint64_t)w->txn_timeout_ms * LOOP_NS_PER_MS;
	for (;;) {
		uint64_t now = loop_now();
		if (now >= deadline) {
			*err = -ETIMEDOUT;
			break;
		}
		nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO,
		                  (nng_duration)((deadline - now + LOOP_NS_PER_MS - 1) / LOOP_NS_PER_MS));
		nng_msg *msg;
		int rv = nng_recvmsg(w->sock, &msg, 0);
		if (rv == NNG_ETIMEDOUT) {
			*err = -ETIMEDOUT;
			break;
		}
		if (rv != 0) {
			*err = -ECANCELED;
			break;
		}
		ToWorker *tw = leasehold__bus__to_worker__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
		size_t len = nng_msg_len(msg);
		nng_msg_free(msg);
		if (!tw) {
			worker_protocol_error(w, "undecodable message from the host (%zu bytes)", len);
			continue;
		}
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply &&
		    tw->txn_reply->id == id) {
			nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO, NNG_DURATION_INFINITE);
			return tw;
		}
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply &&
		    tw->txn_reply->id < id) {
			/* a late reply to a txn that timed out: discard */
		} else {
			worker_protocol_error(w, "unexpected message (case %d) while waiting for txn %llu",
			                      (int)tw->msg_case, (unsigned long long)id);
		}
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	}
	nng_socket_set_ms(w->sock, NNG_OPT_RECVTIMEO, NNG_DURATION_INFINITE);
	return NULL;
}

static int32_t api_txn(struct lh_ctx *ctx, const struct lh_compare *cmps, uint32_t n_cmps,
                       const struct lh_op *success, uint32_t n_success, const struct lh_op *failure,
                       uint32_t n_failure, const struct lh_txn_result **ret_result)
{
	struct worker *w = ctx_worker(ctx);
	BusCompare *cs = NULL;
	BusCompare **cp = NULL;
	BusOp *ss = NULL, *fs = NULL;
	BusOp **sp = NULL, **fp = NULL;
	ToWorker *tw = NULL;
	int r;

	if (!on_worker(w))
		return -EPERM; /* no safe place to put a message */
	w->txn_error[0] = 0;
	free(w->result); /* the previous result ends here */
	w->result = NULL;
	if (!ret_result) {
		txn_fail(w, "ret_result is NULL");
		return -EINVAL;
	}
	if (n_cmps > MAX_TXN_OPS || (n_cmps && !cmps)) {
		txn_fail(w, "too many compares (%u, max %u)", n_cmps, MAX_TXN_OPS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < n_cmps; i++) {
		const struct lh_compare *c = &cmps[i];
		if (c->target > LH_CMP_VALUE || c->result > LH_CMP_NOT_EQUAL ||
		    (c->flags & ~LH_F_PREFIX) || c->key_len > MAX_KEY_LEN || (c->key_len && !c->key) ||
		    c->value_len > MAX_VALUE_LEN || (c->value_len && !c->value)) {
			txn_fail(w, "compare %u: bad target, result, flags or key", i);
			return -EINVAL;
		}
	}
	r = check_ops(w, success, n_success, "success");
	if (r < 0)
		return r;
	r = check_ops(w, failure, n_failure, "failure");
	if (r < 0)
		return r;

	cs = calloc(n_cmps ? n_cmps : 1, sizeof(*cs));
	cp = calloc(n_cmps ? n_cmps : 1, sizeof(*cp));
	ss = calloc(n_success ? n_success : 1, sizeof(*ss));
	sp = calloc(n_success ? n_success : 1, sizeof(*sp));
	fs = calloc(n_failure ? n_failure : 1, sizeof(*fs));
	fp = calloc(n_failure ? n_failure : 1, sizeof(*fp));
	if (!cs || !cp || !ss || !sp || !fs || !fp) {
		r = -ENOMEM;
		txn_fail(w, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n_cmps; i++) {
		leasehold__bus__compare__init(&cs[i]);
		cs[i].target = cmps[i].target;
		cs[i].result = cmps[i].result;
		cs[i].flags = cmps[i].flags;
		cs[i].key = bin(cmps[i].key, cmps[i].key_len);
		cs[i].number = cmps[i].number;
		cs[i].value = bin(cmps[i].value, cmps[i].value_len);
		cp[i] = &cs[i];
	}
	fill_ops(success, n_success, ss, sp);
	fill_ops(failure, n_failure, fs, fp);

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
	nng_msg *msg = pack_msg(&th.base);
	if (!msg) {
		r = -ENOMEM;
		txn_fail(w, "out of memory");
		goto out;
	}
	int rv = nng_sendmsg(w->sock, msg, 0);
	if (rv != 0) {
		nng_msg_free(msg);
		r = -ECANCELED;
		txn_fail(w, "bus closed: the instance is shutting down");
		goto out;
	}
	tw = wait_txn_reply(w, req.id, &r);
	if (!tw) {
		if (r == -ETIMEDOUT)
			txn_fail(w, "no answer from the host within %u ms: the outcome is unknown",
			         w->txn_timeout_ms);
		else
			txn_fail(w, "bus closed: the instance is shutting down");
		goto out;
	}
	const TxnReply *rep = tw->txn_reply;
	if (rep->err != 0) {
		r = (rep->err < 0 && rep->err > -4096) ? rep->err : -EIO;
		txn_fail(w, "%.*s", (int)(rep->message.len > 500 ? 500 : rep->message.len),
		         rep->message.data ? (const char *)rep->message.data : "");
		goto out;
	}
	r = build_result(w, rep, ret_result);
	if (r < 0)
		txn_fail(w, "bad txn reply from the host");
out:
	if (tw)
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	free(cs);
	free(cp);
	free(ss);
	free(sp);
	free(fs);
	free(fp);
	return r;
}

static char *dup_bin(ProtobufCBinaryData b)
{
	char *s = malloc(b.len + 1);
	if (!s)
		return NULL;
	if (b.len)
		memcpy(s, b.data, b.len);
	s[b.len] = 0;
	return s;
}

static struct lh_release rel_from_bus(const Leasehold__Bus__Release *r)
{
	struct lh_release x = {0, 0, 0};
	if (r) {
		x.major = r->major;
		x.minor = r->minor;
		x.patch = r->patch;
	}
	return x;
}

/* Run one event; returns the callback's result. *stop set for FINI. */
static int32_t worker_run_event(struct worker *w, const Event *ev, bool *stop)
{
	const struct lh_plugin *d = &w->desc;
	int32_t err = 0;

	if (ev->kind_case != LEASEHOLD__BUS__EVENT__KIND_INIT &&
	    ev->kind_case != LEASEHOLD__BUS__EVENT__KIND_FINI && !w->initialized) {
		snprintf(w->errmsg, sizeof(w->errmsg), "plugin not initialised");
		return -EIO;
	}
	w->in_callback = true;
	switch (ev->kind_case) {
	case LEASEHOLD__BUS__EVENT__KIND_INIT:
		if (w->initialized) {
			err = -EALREADY;
			break;
		}
		free(w->node_id);
		free(w->data_prefix);
		w->node_id = dup_bin(ev->init->node_id);
		w->data_prefix = dup_bin(ev->init->data_prefix);
		if (!w->node_id || !w->data_prefix) {
			err = -ENOMEM;
			break;
		}
		err = d->init ? d->init(&w->ctx) : 0;
		w->initialized = err == 0;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_ELECTED:
		w->token = ev->elected->fencing_token;
		err = d->on_elected ? d->on_elected(&w->ctx, w->token) : 0;
		break;
	case LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED: {
		struct lh_releases r = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
		const Leasehold__Bus__Releases *br = ev->releases_changed->releases;
		if (br) {
			r.min = rel_from_bus(br->min);
			r.max = rel_from_bus(br->max);
			r.revision = br->revision;
			r.n_members = br->n_members;
		}
		err = d->on_releases_changed ? d->on_releases_changed(&w->ctx, &r) : 0;
		break;
	}
	case LEASEHOLD__BUS__EVENT__KIND_RECONCILE:
		err = d->reconcile(&w->ctx);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_DEPOSED:
		w->token = 0; /* no longer leading, also during on_deposed */
		if (d->on_deposed)
			d->on_deposed(&w->ctx);
		break;
	case LEASEHOLD__BUS__EVENT__KIND_FINI:
		if (w->initialized && d->fini)
			d->fini(&w->ctx);
		w->initialized = false;
		*stop = true;
		break;
	default:
		snprintf(w->errmsg, sizeof(w->errmsg), "unknown event kind %d", (int)ev->kind_case);
		err = -EPROTO;
		break;
	}
	w->in_callback = false;
	free(w->result);
	w->result = NULL;
	if (err > 0 || err < -4095)
		err = -EIO; /* not a negative errno: normalise */
	return err;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	w->self = pthread_self();
	for (;;) {
		nng_msg *msg;
		int rv = nng_recvmsg(w->sock, &msg, 0);
		if (rv != 0) {
			if (rv == NNG_EINTR || rv == NNG_ETIMEDOUT)
				continue;
			break; /* closed: the host is gone */
		}
		size_t len = nng_msg_len(msg);
		ToWorker *tw = leasehold__bus__to_worker__unpack(NULL, len, nng_msg_body(msg));
		nng_msg_free(msg);
		if (!tw) {
			worker_protocol_error(w, "undecodable message from the host (%zu bytes)", len);
			continue;
		}
		if (tw->msg_case != LEASEHOLD__BUS__TO_WORKER__MSG_EVENT || !tw->event) {
			if (!(tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY && tw->txn_reply &&
			      tw->txn_reply->id <= w->last_txn_id))
				worker_protocol_error(w, "unexpected message (case %d) outside a callback",
				                      (int)tw->msg_case);
			leasehold__bus__to_worker__free_unpacked(tw, NULL);
			continue;
		}
		bool stop = false;
		w->errmsg[0] = 0;
		int32_t err = worker_run_event(w, tw->event, &stop);
		EventDone done = LEASEHOLD__BUS__EVENT_DONE__INIT;
		done.seq = tw->event->seq;
		done.err = err;
		done.message = bin_str(w->errmsg);
		ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
		th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_DONE;
		th.done = &done;
		worker_send(w, &th.base);
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		if (stop)
			break;
	}
	free(w->result);
	w->result = NULL;
	return NULL;
}

/* ======================================================================
 * Host half
 * ====================================================================== */

enum ev_kind { EV_INIT, EV_ELECTED, EV_RELEASES, EV_RECONCILE, EV_DEPOSED, EV_FINI };

struct event {
	struct event *next;
	enum ev_kind kind;
	uint64_t seq;
	int64_t token;
	struct releases rel;
	driver_reconcile_done_fn done;
	void *done_ud;
};

enum comp_kind { COMP_RECONCILE, COMP_DRAIN, COMP_INIT, COMP_STOPPED };

struct completion {
	struct completion *next;
	enum comp_kind kind;
	void (*fn)(void);
	void *ud;
	int err;
	char *msg;
};

struct outmsg {
	struct outmsg *next;
	nng_msg *msg;
};

struct drain_waiter {
	struct drain_waiter *next;
	driver_drain_done_fn fn;
	void *ud;
};

struct pending_txn {
	struct pending_txn *next;
	struct plugin_instance *pi; /* NULL once the instance is gone */
	uint64_t id;
};

struct plugin_instance {
	struct loader_plugin *lp;
	struct loop *loop;
	struct driver_host host;
	char *data_prefix;
	size_t prefix_len;
	char *node_id;
	struct plugin_instance_config cfg;
	char url[128];
	char log_comp[LOG_COMPONENT_MAX];

	nng_socket hsock, wsock;
	bool hsock_open, wsock_open;
	int rfd, sfd;
	struct loop_io *rio, *sio;

	struct worker *w;
	pthread_t thread;
	bool thread_running; /* created and not joined */
	bool broken;         /* bus failed: nothing more can be delivered */

	enum plugin_instance_state state;
	bool leading;
	bool term_elected_sent;
	struct releases last_rel;
	uint64_t next_seq;

	struct event *q_head, *q_tail;
	struct event *inflight;
	struct outmsg *out_head, *out_tail;
	struct completion *c_head, *c_tail;
	struct drain_waiter *drains;
	struct pending_txn *txns;
	struct loop_timer *defer;
	plugin_instance_stopped_fn stopped;
	void *stopped_ud;
	bool stop_requested;
	bool *destroyed; /* set while completions are being dispatched */
	bool need_break; /* a send failed: mark_broken from the timer */
	char break_why[128];

	struct plugin_instance_stats stats;
	char init_error[512];
};

static void note_error(struct plugin_instance *pi, int err, const char *msg)
{
	pi->stats.last_err = err;
	snprintf(pi->stats.last_error, sizeof(pi->stats.last_error), "%s", msg ? msg : "");
}

/* ---- completions (always from a timer) ---- */

static void completion_push(struct plugin_instance *pi, enum comp_kind kind, void (*fn)(void),
                            void *ud, int err, const char *msg)
{
	struct completion *c = calloc(1, sizeof(*c));
	if (!c) {
		log_error(pi->log_comp, "out of memory: a completion is lost");
		return;
	}
	c->kind = kind;
	c->fn = fn;
	c->ud = ud;
	c->err = err;
	c->msg = strdup(msg ? msg : "");
	if (pi->c_tail)
		pi->c_tail->next = c;
	else
		pi->c_head = c;
	pi->c_tail = c;
	loop_timer_arm_in(pi->defer, 0);
}

static void completion_free(struct completion *c)
{
	free(c->msg);
	free(c);
}

static void mark_broken(struct plugin_instance *pi, const char *why);

static void on_defer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	bool destroyed = false;
	(void)t;
	if (pi->need_break) {
		pi->need_break = false;
		mark_broken(pi, pi->break_why);
	}
	struct completion *list = pi->c_head;
	pi->c_head = pi->c_tail = NULL;
	pi->destroyed = &destroyed;
	while (list) {
		struct completion *c = list;
		list = c->next;
		if (!destroyed) {
			switch (c->kind) {
			case COMP_RECONCILE:
				((driver_reconcile_done_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_DRAIN:
				((driver_drain_done_fn)c->fn)(c->ud);
				break;
			case COMP_INIT:
				((plugin_instance_init_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_STOPPED:
				((plugin_instance_stopped_fn)c->fn)(c->ud);
				break;
			}
		}
		completion_free(c);
	}
	if (!destroyed)
		pi->destroyed = NULL;
}

static void maybe_drained(struct plugin_instance *pi)
{
	if (!pi->drains || pi->q_head || pi->inflight)
		return;
	/* oldest first */
	struct drain_waiter *rev = NULL;
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		d->next = rev;
		rev = d;
	}
	while (rev) {
		struct drain_waiter *d = rev;
		rev = d->next;
		completion_push(pi, COMP_DRAIN, (void (*)(void))d->fn, d->ud, 0, NULL);
		free(d);
	}
}

/* ---- sending ---- */

static void on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata);

static void flush(struct plugin_instance *pi)
{
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		int rv = nng_sendmsg(pi->hsock, o->msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN) {
			if (!pi->sio &&
			    loop_io_add(pi->loop, pi->sfd, EPOLLIN, on_sendable, pi, &pi->sio) < 0) {
				snprintf(pi->break_why, sizeof(pi->break_why), "cannot watch the send fd");
				pi->need_break = true;
				loop_timer_arm_in(pi->defer, 0);
			}
			return;
		}
		pi->out_head = o->next;
		if (!pi->out_head)
			pi->out_tail = NULL;
		if (rv != 0) {
			nng_msg_free(o->msg);
			free(o);
			/* not from here (we may be deep inside pump): from the timer */
			snprintf(pi->break_why, sizeof(pi->break_why), "send: %s", nng_strerror(rv));
			pi->need_break = true;
			loop_timer_arm_in(pi->defer, 0);
			return;
		}
		free(o);
	}
	if (pi->sio) {
		loop_io_free(pi->sio);
		pi->sio = NULL;
	}
}

static void on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	(void)io;
	(void)fd;
	(void)events;
	flush(userdata);
}

/* queue msg (taken, also on failure) and flush */
static int send_nng(struct plugin_instance *pi, nng_msg *msg)
{
	if (pi->broken) {
		if (msg)
			nng_msg_free(msg);
		return -EPIPE;
	}
	struct outmsg *o = calloc(1, sizeof(*o));
	if (!msg || !o) {
		if (msg)
			nng_msg_free(msg);
		free(o);
		return -ENOMEM;
	}
	o->msg = msg;
	if (pi->out_tail)
		pi->out_tail->next = o;
	else
		pi->out_head = o;
	pi->out_tail = o;
	flush(pi);
	return 0;
}

static int send_to_worker(struct plugin_instance *pi, const ProtobufCMessage *m)
{
	return send_nng(pi, pack_msg(m));
}

/* ---- the event queue ---- */

static void event_complete_cancelled(struct plugin_instance *pi, struct event *ev, int err,
                                     const char *msg)
{
	if (ev->kind == EV_RECONCILE && ev->done) {
		pi->stats.reconciles_cancelled++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err, msg);
	}
}

static void enqueue(struct plugin_instance *pi, struct event *ev)
{
	ev->next = NULL;
	if (pi->q_tail)
		pi->q_tail->next = ev;
	else
		pi->q_head = ev;
	pi->q_tail = ev;
	pi->stats.queued++;
}

static struct event *event_new(enum ev_kind kind)
{
	struct event *ev = calloc(1, sizeof(*ev));
	if (ev)
		ev->kind = kind;
	return ev;
}

static void fill_bus_releases(const struct releases *r, Leasehold__Bus__Releases *br,
                              Leasehold__Bus__Release *mn, Leasehold__Bus__Release *mx)
{
	leasehold__bus__releases__init(br);
	leasehold__bus__release__init(mn);
	leasehold__bus__release__init(mx);
	mn->major = r->min.major;
	mn->minor = r->min.minor;
	mn->patch = r->min.patch;
	mx->major = r->max.major;
	mx->minor = r->max.minor;
	mx->patch = r->max.patch;
	br->min = mn;
	br->max = mx;
	br->revision = r->revision;
	br->n_members = (uint32_t)(r->n_members > UINT32_MAX ? UINT32_MAX : r->n_members);
}

/* the bus message for ev (caller owns it), NULL on ENOMEM */
static nng_msg *event_msg(const struct plugin_instance *pi, const struct event *ev)
{
	Event e = LEASEHOLD__BUS__EVENT__INIT;
	Leasehold__Bus__Init init = LEASEHOLD__BUS__INIT__INIT;
	Leasehold__Bus__Elected el = LEASEHOLD__BUS__ELECTED__INIT;
	Leasehold__Bus__ReleasesChanged rc = LEASEHOLD__BUS__RELEASES_CHANGED__INIT;
	Leasehold__Bus__Releases br;
	Leasehold__Bus__Release mn, mx;
	Leasehold__Bus__Reconcile rec = LEASEHOLD__BUS__RECONCILE__INIT;
	Leasehold__Bus__Deposed dep = LEASEHOLD__BUS__DEPOSED__INIT;
	Leasehold__Bus__Fini fini = LEASEHOLD__BUS__FINI__INIT;
	e.seq = ev->seq;
	switch (ev->kind) {
	case EV_INIT:
		init.node_id = bin_str(pi->node_id);
		init.data_prefix = bin_str(pi->data_prefix);
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_INIT;
		e.init = &init;
		break;
	case EV_ELECTED:
		el.fencing_token = ev->token;
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_ELECTED;
		e.elected = &el;
		break;
	case EV_RELEASES:
		fill_bus_releases(&ev->rel, &br, &mn, &mx);
		rc.releases = &br;
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED;
		e.releases_changed = &rc;
		break;
	case EV_RECONCILE:
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RECONCILE;
		e.reconcile = &rec;
		break;
	case EV_DEPOSED:
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_DEPOSED;
		e.deposed = &dep;
		break;
	case EV_FINI:
		e.kind_case = LEASEHOLD__BUS__EVENT__KIND_FINI;
		e.fini = &fini;
		break;
	}
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &e;
	return pack_msg(&tw.base);
}

static void finish_stop(struct plugin_instance *pi);

/* hand the next event to the worker if none is in flight */
static void pump(struct plugin_instance *pi)
{
	while (!pi->inflight && pi->q_head && !pi->broken) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		if (!pi->q_head)
			pi->q_tail = NULL;
		pi->stats.queued--;
		ev->next = NULL;
		ev->seq = ++pi->next_seq;
		if (ev->kind == EV_ELECTED)
			pi->term_elected_sent = true;
		int r = send_nng(pi, event_msg(pi, ev));
		if (r < 0) {
			log_error(pi->log_comp, "cannot send an event to the worker: %s", strerror(-r));
			event_complete_cancelled(pi, ev, r, "cannot send the event to the plugin worker");
			free(ev);
			continue;
		}
		pi->inflight = ev;
		pi->stats.in_flight = 1;
		pi->stats.callback_since_ns = loop_now();
	}
	if (pi->broken) {
		/* nothing can be delivered: complete everything */
		while (pi->q_head) {
			struct event *ev = pi->q_head;
			pi->q_head = ev->next;
			pi->stats.queued--;
			pi->stats.dropped++;
			event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
			free(ev);
		}
		pi->q_tail = NULL;
	}
	maybe_drained(pi);
}

/* drop queued leadership events (deposed, stop, failure) */
static void drop_queued(struct plugin_instance *pi, int err, const char *msg)
{
	struct event **pp = &pi->q_head;
	pi->q_tail = NULL;
	while (*pp) {
		struct event *ev = *pp;
		if (ev->kind == EV_ELECTED || ev->kind == EV_RELEASES || ev->kind == EV_RECONCILE) {
			*pp = ev->next;
			pi->stats.queued--;
			pi->stats.dropped++;
			event_complete_cancelled(pi, ev, err, msg);
			free(ev);
			continue;
		}
		pi->q_tail = ev;
		pp = &ev->next;
	}
}

static void mark_broken(struct plugin_instance *pi, const char *why)
{
	if (pi->broken)
		return;
	pi->broken = true;
	log_error(pi->log_comp, "plugin bus failed: %s", why);
	note_error(pi, -EPIPE, why);
	if (pi->state != PLUGIN_INSTANCE_STOPPING && pi->state != PLUGIN_INSTANCE_STOPPED)
		pi->state = PLUGIN_INSTANCE_FAILED;
	pi->leading = false;
	/* the in-flight event will never be acknowledged */
	if (pi->inflight) {
		struct event *ev = pi->inflight;
		pi->inflight = NULL;
		pi->stats.in_flight = 0;
		pi->stats.callback_since_ns = 0;
		event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
		if (ev->kind == EV_FINI) {
			free(ev);
			finish_stop(pi);
			return;
		}
		free(ev);
	}
	/* a FINI still queued can never run: finish the stop now */
	bool had_fini = false;
	for (struct event *ev = pi->q_head; ev; ev = ev->next)
		had_fini |= ev->kind == EV_FINI;
	pump(pi); /* drops everything */
	if (had_fini)
		finish_stop(pi);
}

/* ---- driver ops ---- */

static bool accepting(const struct plugin_instance *pi)
{
	return !pi->stop_requested && !pi->broken && pi->state != PLUGIN_INSTANCE_FAILED;
}

void plugin_instance_deposed(struct plugin_instance *pi)
{
	if (!pi->leading)
		return;
	pi->leading = false;
	drop_queued(pi, -ECANCELED, "dropped: leadership was lost before it ran");
	if (pi->term_elected_sent) {
		struct event *ev = event_new(EV_DEPOSED);
		if (ev)
			enqueue(pi, ev);
		else
			log_error(pi->log_comp, "out of memory: on_deposed not delivered");
	}
	pi->term_elected_sent = false;
	pump(pi);
}

void plugin_instance_elected(struct plugin_instance *pi, int64_t fencing_token,
                             const struct releases *r)
{
	if (!accepting(pi))
		return;
	if (pi->leading)
		plugin_instance_deposed(pi); /* a new term replaces the old one */
	struct event *e1 = event_new(EV_ELECTED), *e2 = event_new(EV_RELEASES);
	if (!e1 || !e2) {
		free(e1);
		free(e2);
		log_error(pi->log_comp, "out of memory: on_elected not delivered");
		return;
	}
	pi->leading = true;
	pi->term_elected_sent = false;
	pi->last_rel = *r;
	e1->token = fencing_token;
	e2->rel = *r;
	enqueue(pi, e1);
	enqueue(pi, e2);
	pump(pi);
}

void plugin_instance_releases_changed(struct plugin_instance *pi, const struct releases *r)
{
	if (!pi->leading || !accepting(pi))
		return;
	pi->last_rel = *r;
	/* merge with a releases event still waiting at the tail */
	if (pi->q_tail && pi->q_tail->kind == EV_RELEASES) {
		pi->q_tail->rel = *r;
		return;
	}
	struct event *ev = event_new(EV_RELEASES);
	if (!ev) {
		log_error(pi->log_comp, "out of memory: on_releases_changed not delivered");
		return;
	}
	ev->rel = *r;
	enqueue(pi, ev);
	pump(pi);
}

void plugin_instance_reconcile(struct plugin_instance *pi, driver_reconcile_done_fn done,
                               void *done_ud)
{
	if (!pi->leading || !accepting(pi)) {
		pi->stats.reconciles_cancelled++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud,
		                pi->state == PLUGIN_INSTANCE_FAILED ? -EIO : -ECANCELED,
		                pi->state == PLUGIN_INSTANCE_FAILED ? "the plugin instance failed"
		                                                    : "not leading");
		return;
	}
	struct event *ev = event_new(EV_RECONCILE);
	if (!ev) {
		completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud, -ENOMEM,
		                "out of memory");
		return;
	}
	ev->done = done;
	ev->done_ud = done_ud;
	enqueue(pi, ev);
	pump(pi);
}

void plugin_instance_drain(struct plugin_instance *pi, driver_drain_done_fn done, void *done_ud)
{
	struct drain_waiter *d = calloc(1, sizeof(*d));
	if (!d) {
		log_error(pi->log_comp, "out of memory: drain completes at once");
		completion_push(pi, COMP_DRAIN, (void (*)(void))done, done_ud, 0, NULL);
		return;
	}
	d->fn = done;
	d->ud = done_ud;
	d->next = pi->drains;
	pi->drains = d;
	maybe_drained(pi);
}

static void op_elected(void *drv, int64_t token, const struct releases *r)
{
	plugin_instance_elected(drv, token, r);
}
static void op_releases_changed(void *drv, const struct releases *r)
{
	plugin_instance_releases_changed(drv, r);
}
static void op_reconcile(void *drv, driver_reconcile_done_fn done, void *done_ud)
{
	plugin_instance_reconcile(drv, done, done_ud);
}
static void op_deposed(void *drv)
{
	plugin_instance_deposed(drv);
}
static void op_drain(void *drv, driver_drain_done_fn done, void *done_ud)
{
	plugin_instance_drain(drv, done, done_ud);
}

const struct driver_ops plugin_instance_driver_ops = {
	.elected = op_elected,
	.releases_changed = op_releases_changed,
	.reconcile = op_reconcile,
	.deposed = op_deposed,
	.drain = op_drain,
};

/* ---- txn bridging ---- */

static void reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
                      const struct etcd_response *resp);

/* full key = prefix + rel; *ret owned by the caller */
static uint8_t *full_key(const struct plugin_instance *pi, ProtobufCBinaryData rel, size_t *ret_len)
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
static uint8_t *prefix_end(const uint8_t *key, size_t len, size_t *ret_len)
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

static uint8_t *bag_keep(struct keybag *b, uint8_t *p)
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

static void bag_free(struct keybag *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->p[i]);
	free(b->p);
}

static int convert_ops(struct plugin_instance *pi, BusOp **in, size_t n, struct etcd_op *out,
                       struct keybag *bag, const char **why)
{
	for (size_t i = 0; i < n; i++) {
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
			*why = "unknown op type";
			return -EINVAL;
		}
		if (o->flags & ~allowed) {
			*why = "op flags not allowed";
			return -EINVAL;
		}
		size_t klen = 0, elen = 0;
		uint8_t *k = bag_keep(bag, full_key(pi, o->key, &klen));
		if (!k)
			return -ENOMEM;
		e->key = k;
		e->key_len = klen;
		if (o->flags & LH_F_PREFIX) {
			uint8_t *end = bag_keep(bag, prefix_end(k, klen, &elen));
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

static void on_txn_done(struct etcd_client *c, int err, const struct etcd_response *resp,
                        void *userdata)
{
	struct pending_txn *pt = userdata;
	struct plugin_instance *pi = pt->pi;
	(void)c;
	if (pi) {
		struct pending_txn **pp = &pi->txns;
		while (*pp && *pp != pt)
			pp = &(*pp)->next;
		if (*pp)
			*pp = pt->next;
		if (err < 0) {
			char msg[512];
			snprintf(msg, sizeof(msg), "etcd txn failed: %s%s%s", strerror(-err),
			         resp && resp->error_message ? ": " : "",
			         resp && resp->error_message ? resp->error_message : "");
			reply_txn(pi, pt->id, err, msg, NULL);
		} else {
			reply_txn(pi, pt->id, 0, NULL, resp);
		}
	}
	free(pt);
}

static void handle_txn(struct plugin_instance *pi, const TxnRequest *req)
{
	struct keybag bag = {NULL, 0, 0};
	struct etcd_compare *cmps = NULL;
	struct etcd_op *succ = NULL, *fail = NULL;
	const char *why = NULL;
	char msg[512];
	int r;

	pi->stats.txns++;
	if (!pi->inflight) {
		reply_txn(pi, req->id, -EPERM, "txn outside a callback", NULL);
		return;
	}
	if (!pi->leading || !pi->host.fenced_txn) {
		reply_txn(pi, req->id, -ESTALE,
		          "not leading: this node does not hold the plugin's election, txn refused", NULL);
		return;
	}
	if (req->n_compares > MAX_TXN_OPS || req->n_success > MAX_TXN_OPS ||
	    req->n_failure > MAX_TXN_OPS) {
		reply_txn(pi, req->id, -E2BIG, "too many ops in one txn", NULL);
		return;
	}
	cmps = calloc(req->n_compares ? req->n_compares : 1, sizeof(*cmps));
	succ = calloc(req->n_success ? req->n_success : 1, sizeof(*succ));
	fail = calloc(req->n_failure ? req->n_failure : 1, sizeof(*fail));
	if (!cmps || !succ || !fail) {
		r = -ENOMEM;
		goto refuse;
	}
	for (size_t i = 0; i < req->n_compares; i++) {
		const BusCompare *bc = req->compares[i];
		struct etcd_compare *e = &cmps[i];
		if (bc->target > LH_CMP_VALUE || bc->result > LH_CMP_NOT_EQUAL ||
		    (bc->flags & ~LH_F_PREFIX)) {
			why = "bad compare target, result or flags";
			r = -EINVAL;
			goto refuse;
		}
		static const enum etcd_cmp_target targets[] = {ETCD_CMP_VERSION, ETCD_CMP_CREATE,
		                                               ETCD_CMP_MOD, ETCD_CMP_VALUE};
		static const enum etcd_cmp_result results[] = {ETCD_CMP_EQUAL, ETCD_CMP_GREATER,
		                                               ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL};
		e->target = targets[bc->target];
		e->result = results[bc->result];
		size_t klen = 0, elen = 0;
		uint8_t *k = bag_keep(&bag, full_key(pi, bc->key, &klen));
		if (!k) {
			r = -ENOMEM;
			goto refuse;
		}
		e->key = k;
		e->key_len = klen;
		if (bc->flags & LH_F_PREFIX) {
			uint8_t *end = bag_keep(&bag, prefix_end(k, klen, &elen));
			if (!end) {
				r = -ENOMEM;
				goto refuse;
			}
			e->range_end = end;
			e->range_end_len = elen;
		}
		e->number = bc->number;
		e->value = bc->value.data;
		e->value_len = bc->value.len;
	}
	r = convert_ops(pi, req->success, req->n_success, succ, &bag, &why);
	if (r < 0)
		goto refuse;
	r = convert_ops(pi, req->failure, req->n_failure, fail, &bag, &why);
	if (r < 0)
		goto refuse;

	struct pending_txn *pt = calloc(1, sizeof(*pt));
	if (!pt) {
		r = -ENOMEM;
		goto refuse;
	}
	pt->pi = pi;
	pt->id = req->id;
	pt->next = pi->txns;
	pi->txns = pt;
	r = pi->host.fenced_txn(pi->host.ctx, cmps, req->n_compares, succ, req->n_success, fail,
	                        req->n_failure, on_txn_done, pt);
	if (r < 0) {
		struct pending_txn **pp = &pi->txns;
		while (*pp && *pp != pt)
			pp = &(*pp)->next;
		if (*pp)
			*pp = pt->next;
		free(pt);
		why = r == -ESTALE ? "not leading: the election refused the txn"
		      : r == -EPERM ? "a key lies outside the plugin's data prefix"
		                    : NULL;
		goto refuse;
	}
	goto out;
refuse:
	snprintf(msg, sizeof(msg), "txn refused: %s", why ? why : strerror(-r));
	reply_txn(pi, req->id, r, msg, NULL);
out:
	bag_free(&bag);
	free(cmps);
	free(succ);
	free(fail);
}

static bool strip_prefix(const struct plugin_instance *pi, const struct etcd_kv *kv)
{
	return kv->key && kv->key_len >= pi->prefix_len &&
	       memcmp(kv->key, pi->data_prefix, pi->prefix_len) == 0;
}

static void reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
                      const struct etcd_response *resp)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	BusOpResult *ors = NULL, **orp = NULL;
	BusKv *kvs = NULL, **kvp = NULL;
	rep.id = id;
	rep.err = err;
	if (err < 0) {
		pi->stats.txn_errors++;
		rep.message = bin_str(msg);
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
			rep.message = bin_str("out of memory");
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
			const struct etcd_kv *src = r->op_type == ETCD_OP_RANGE ? r->kvs : r->prev_kvs;
			size_t ns = r->op_type == ETCD_OP_RANGE ? r->n_kvs : r->n_prev_kvs;
			o->kvs = &kvp[ki];
			for (size_t k = 0; k < ns; k++) {
				const struct etcd_kv *kv = &src[k];
				if (!strip_prefix(pi, kv)) {
					log_debug(pi->log_comp, "txn result key outside the data prefix dropped");
					continue;
				}
				BusKv *b = &kvs[ki];
				leasehold__bus__kv__init(b);
				b->key = bin(kv->key + pi->prefix_len, kv->key_len - pi->prefix_len);
				b->value = bin(kv->value, kv->value ? kv->value_len : 0);
				b->create_revision = kv->create_revision;
				b->mod_revision = kv->mod_revision;
				b->version = kv->version;
				kvp[ki++] = b;
				o->n_kvs++;
			}
		}
	}
send:;
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	int r = send_to_worker(pi, &tw.base);
	if (r < 0 && r != -EPIPE)
		log_error(pi->log_comp, "cannot answer a txn request: %s", strerror(-r));
	free(ors);
	free(orp);
	free(kvs);
	free(kvp);
}

/* ---- receiving ---- */

static void finish_stop(struct plugin_instance *pi)
{
	if (pi->state == PLUGIN_INSTANCE_STOPPED)
		return;
	if (pi->thread_running) {
		/* after FINI's ack the worker only returns; if the bus broke, make
		 * sure a worker blocked on its socket wakes up */
		if (pi->broken && pi->wsock_open) {
			nng_close(pi->wsock);
			pi->wsock_open = false;
		}
		pthread_join(pi->thread, NULL);
		pi->thread_running = false;
	}
	pi->state = PLUGIN_INSTANCE_STOPPED;
	if (pi->stopped)
		completion_push(pi, COMP_STOPPED, (void (*)(void))pi->stopped, pi->stopped_ud, 0, NULL);
	pi->stopped = NULL;
}

static void handle_done(struct plugin_instance *pi, const EventDone *d)
{
	struct event *ev = pi->inflight;
	char msg[512];
	int err = (d->err <= 0 && d->err > -4096) ? d->err : -EIO;
	snprintf(msg, sizeof(msg), "%.*s", (int)(d->message.len > 511 ? 511 : d->message.len),
	         d->message.data ? (const char *)d->message.data : "");
	pi->inflight = NULL;
	pi->stats.in_flight = 0;
	pi->stats.callback_since_ns = 0;
	pi->stats.delivered++;
	if (err < 0)
		note_error(pi, err, msg);
	switch (ev->kind) {
	case EV_INIT:
		if (err < 0) {
			fmt(pi->init_error, sizeof(pi->init_error), "init failed: %s%s%s",
			         strerror(-err), msg[0] ? ": " : "", msg);
			log_error(pi->log_comp, "%s", pi->init_error);
			if (pi->state == PLUGIN_INSTANCE_STARTING)
				pi->state = PLUGIN_INSTANCE_FAILED;
			pi->leading = false;
			drop_queued(pi, -EIO, pi->init_error);
		} else if (pi->state == PLUGIN_INSTANCE_STARTING) {
			pi->state = PLUGIN_INSTANCE_READY;
		}
		if (pi->cfg.on_init)
			completion_push(pi, COMP_INIT, (void (*)(void))pi->cfg.on_init, pi->cfg.userdata,
			                err, err < 0 ? pi->init_error : "");
		break;
	case EV_RECONCILE:
		if (err < 0)
			pi->stats.reconciles_failed++;
		else
			pi->stats.reconciles_ok++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err, msg);
		break;
	case EV_ELECTED:
	case EV_RELEASES:
	case EV_DEPOSED:
		if (err < 0)
			log_warn(pi->log_comp, "%s failed: %s%s%s",
			         ev->kind == EV_ELECTED ? "on_elected"
			         : ev->kind == EV_RELEASES ? "on_releases_changed"
			                                   : "on_deposed",
			         strerror(-err), msg[0] ? ": " : "", msg);
		break;
	case EV_FINI:
		free(ev);
		finish_stop(pi);
		pump(pi);
		return;
	}
	free(ev);
	pump(pi);
}

static int handle_bytes(struct plugin_instance *pi, const void *buf, size_t len)
{
	ToHost *th = leasehold__bus__to_host__unpack(NULL, len, buf);
	int r = 0;
	if (!th) {
		pi->stats.bad_messages++;
		log_debug(pi->log_comp, "undecodable bus message (%zu bytes) dropped", len);
		return -EBADMSG;
	}
	if ((th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE && !th->done) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN && !th->txn) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_LOG && !th->log) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR && !th->protocol_error)) {
		pi->stats.bad_messages++;
		leasehold__bus__to_host__free_unpacked(th, NULL);
		return -EBADMSG;
	}
	switch (th->msg_case) {
	case LEASEHOLD__BUS__TO_HOST__MSG_DONE:
		if (!pi->inflight || th->done->seq != pi->inflight->seq) {
			pi->stats.bad_messages++;
			log_debug(pi->log_comp, "ack for seq %llu, expected %llu: dropped",
			          (unsigned long long)th->done->seq,
			          (unsigned long long)(pi->inflight ? pi->inflight->seq : 0));
			r = -EPROTO;
			break;
		}
		handle_done(pi, th->done);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_TXN:
		handle_txn(pi, th->txn);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_LOG: {
		uint32_t lvl = th->log->level > LH_LOG_DEBUG ? LH_LOG_DEBUG : th->log->level;
		size_t n = th->log->message.len > 1024 ? 1024 : th->log->message.len;
		pi->stats.log_messages++;
		log_msg((enum log_level)lvl, pi->log_comp, "%.*s", (int)n,
		        th->log->message.data ? (const char *)th->log->message.data : "");
		break;
	}
	case LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR: {
		size_t n = th->protocol_error->message.len > 256 ? 256 : th->protocol_error->message.len;
		pi->stats.worker_rejected++;
		log_warn(pi->log_comp, "worker rejected a bus message: %.*s", (int)n,
		         th->protocol_error->message.data ? (const char *)th->protocol_error->message.data
		                                          : "");
		break;
	}
	default:
		pi->stats.bad_messages++;
		r = -EPROTO;
		break;
	}
	leasehold__bus__to_host__free_unpacked(th, NULL);
	return r;
}

static void on_readable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)io;
	(void)fd;
	(void)events;
	for (int i = 0; i < 256; i++) { /* bounded: let other watchers run */
		nng_msg *msg;
		int rv = nng_recvmsg(pi->hsock, &msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN)
			return;
		if (rv != 0) {
			mark_broken(pi, nng_strerror(rv));
			if (pi->rio) {
				loop_io_free(pi->rio);
				pi->rio = NULL;
			}
			return;
		}
		handle_bytes(pi, nng_msg_body(msg), nng_msg_len(msg));
		nng_msg_free(msg);
	}
}

/* ======================================================================
 * Lifecycle
 * ====================================================================== */

static int start_thread(struct plugin_instance *pi)
{
	sigset_t all, old;
	sigfillset(&all);
	/* synchronous faults must stay deliverable (crash reports, sanitizers) */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = -pthread_create(&pi->thread, NULL, worker_main, pi->w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	pi->thread_running = true;
	char tname[16];
	fmt(tname, sizeof(tname), "lh-%s", pi->lp->name);
	pthread_setname_np(pi->thread, tname);
	return 0;
}

int plugin_instance_new(struct loader_plugin *lp, struct loop *l, const struct driver_host *host,
                        const char *node_id, const struct plugin_instance_config *cfg,
                        struct plugin_instance **ret_pi)
{
	struct plugin_instance *pi = calloc(1, sizeof(*pi));
	int r, rv;
	if (!pi)
		return -ENOMEM;
	pi->loop = l;
	pi->host = *host;
	if (cfg)
		pi->cfg = *cfg;
	if (!pi->cfg.txn_timeout_ms)
		pi->cfg.txn_timeout_ms = DEFAULT_TXN_TIMEOUT_MS;
	pi->rfd = pi->sfd = -1;
	snprintf(pi->log_comp, sizeof(pi->log_comp), "plugin %s", lp->name);
	pi->data_prefix = strdup(host->data_prefix ? host->data_prefix : "");
	pi->node_id = strdup(node_id ? node_id : "");
	pi->w = calloc(1, sizeof(*pi->w));
	if (!pi->data_prefix || !pi->node_id || !pi->w) {
		r = -ENOMEM;
		goto fail;
	}
	pi->prefix_len = strlen(pi->data_prefix);
	pi->host.data_prefix = pi->data_prefix;
	if (pi->prefix_len == 0) {
		r = -EINVAL; /* an empty prefix would give the plugin all of etcd */
		goto fail;
	}
	r = loop_timer_new(l, on_defer, pi, &pi->defer);
	if (r < 0)
		goto fail;

	snprintf(pi->url, sizeof(pi->url), "inproc://leasehold-%ld-%u-%s", (long)getpid(),
	         atomic_fetch_add(&g_instance_counter, 1u), lp->name);
	if ((rv = nng_pair1_open(&pi->hsock)) != 0)
		goto nng_fail;
	pi->hsock_open = true;
	if ((rv = nng_pair1_open(&pi->wsock)) != 0)
		goto nng_fail;
	pi->wsock_open = true;
	nng_socket_set_int(pi->hsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->hsock, NNG_OPT_RECVBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_RECVBUF, 64);
	if ((rv = nng_listen(pi->hsock, pi->url, NULL, 0)) != 0)
		goto nng_fail;
	if ((rv = nng_dial(pi->wsock, pi->url, NULL, 0)) != 0)
		goto nng_fail;
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_RECVFD, &pi->rfd)) != 0)
		goto nng_fail;
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_SENDFD, &pi->sfd)) != 0)
		goto nng_fail;
	r = loop_io_add(l, pi->rfd, EPOLLIN, on_readable, pi, &pi->rio);
	if (r < 0)
		goto fail;

	/* the worker's half */
	struct worker *w = pi->w;
	w->ctx.size = sizeof(w->ctx);
	w->ctx.host = &w->api;
	w->api.size = sizeof(w->api);
	w->api.abi_minor = LH_PLUGIN_ABI_MINOR;
	w->api.log = api_log;
	w->api.set_error = api_set_error;
	w->api.txn = api_txn;
	w->api.last_error = api_last_error;
	w->api.fencing_token = api_fencing_token;
	w->api.node_id = api_node_id;
	w->api.data_prefix = api_data_prefix;
	w->desc = lp->desc;
	w->sock = pi->wsock;
	w->txn_timeout_ms = pi->cfg.txn_timeout_ms;

	pi->lp = lp; /* needed by start_thread; given back on failure */
	struct event *init = event_new(EV_INIT);
	if (!init) {
		r = -ENOMEM;
		goto fail;
	}
	enqueue(pi, init);
	r = start_thread(pi);
	if (r < 0)
		goto fail;
	pi->state = PLUGIN_INSTANCE_STARTING;
	pump(pi);
	*ret_pi = pi;
	return 0;

nng_fail:
	r = nng_to_errno(rv);
fail:
	pi->lp = NULL; /* stays the caller's */
	plugin_instance_free(pi);
	return r;
}

void plugin_instance_stop(struct plugin_instance *pi, plugin_instance_stopped_fn stopped,
                          void *userdata)
{
	if (pi->stop_requested)
		return;
	plugin_instance_deposed(pi);
	pi->stop_requested = true;
	pi->stopped = stopped;
	pi->stopped_ud = userdata;
	pi->state = PLUGIN_INSTANCE_STOPPING;
	if (pi->broken || !pi->thread_running) {
		finish_stop(pi);
		return;
	}
	struct event *ev = event_new(EV_FINI);
	if (!ev) {
		mark_broken(pi, "out of memory");
		finish_stop(pi);
		return;
	}
	enqueue(pi, ev);
	pump(pi);
}

/* ---- synchronous shutdown for free() without a completed stop(): blocks ---- */

static int sync_send(struct plugin_instance *pi, nng_msg *msg)
{
	if (!msg)
		return -ENOMEM;
	int rv = nng_sendmsg(pi->hsock, msg, 0);
	if (rv != 0) {
		nng_msg_free(msg);
		return nng_to_errno(rv);
	}
	return 0;
}

static void sync_refuse_txn(struct plugin_instance *pi, uint64_t id)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = id;
	rep.err = -ECANCELED;
	rep.message = bin_str("the plugin instance is being freed");
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	sync_send(pi, pack_msg(&tw.base));
}

/* wait for the in-flight event's ack, refusing txns meanwhile */
static int sync_wait_inflight(struct plugin_instance *pi)
{
	while (pi->inflight) {
		nng_msg *m;
		int rv = nng_recvmsg(pi->hsock, &m, 0);
		if (rv != 0) {
			log_error(pi->log_comp, "worker did not answer within %d ms: %s",
			          SYNC_STOP_TIMEOUT_MS, nng_strerror(rv));
			return nng_to_errno(rv);
		}
		ToHost *th = leasehold__bus__to_host__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		if (!th)
			continue;
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE &&
		    th->done->seq == pi->inflight->seq) {
			free(pi->inflight);
			pi->inflight = NULL;
		} else if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN) {
			sync_refuse_txn(pi, th->txn->id);
		}
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
	return 0;
}

static int sync_run(struct plugin_instance *pi, enum ev_kind kind)
{
	struct event *ev = event_new(kind);
	if (!ev)
		return -ENOMEM;
	ev->seq = ++pi->next_seq;
	int r = sync_send(pi, event_msg(pi, ev));
	if (r < 0) {
		free(ev);
		return r;
	}
	pi->inflight = ev;
	return sync_wait_inflight(pi);
}

static void stop_sync(struct plugin_instance *pi)
{
	/* txns in flight in etcd will never be answered through the loop now */
	for (struct pending_txn *pt = pi->txns; pt; pt = pt->next) {
		pt->pi = NULL;
		sync_refuse_txn(pi, pt->id);
	}
	pi->txns = NULL;
	nng_socket_set_ms(pi->hsock, NNG_OPT_RECVTIMEO, SYNC_STOP_TIMEOUT_MS);
	nng_socket_set_ms(pi->hsock, NNG_OPT_SENDTIMEO, SYNC_STOP_TIMEOUT_MS);
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		sync_send(pi, o->msg);
		free(o);
	}
	pi->out_tail = NULL;
	bool fini_out = pi->inflight && pi->inflight->kind == EV_FINI;
	if (sync_wait_inflight(pi) < 0 || fini_out)
		return;
	if (pi->leading && pi->term_elected_sent && sync_run(pi, EV_DEPOSED) < 0)
		return;
	pi->leading = false;
	sync_run(pi, EV_FINI);
}

void plugin_instance_free(struct plugin_instance *pi)
{
	if (!pi)
		return;
	if (pi->destroyed)
		*pi->destroyed = true;
	if (pi->thread_running) {
		if (!pi->broken && pi->hsock_open)
			stop_sync(pi);
		/* wake a worker still blocked on its socket (only after a failure) */
		if (pi->wsock_open) {
			nng_close(pi->wsock);
			pi->wsock_open = false;
		}
		pthread_join(pi->thread, NULL);
		pi->thread_running = false;
	}
	loop_io_free(pi->rio);
	loop_io_free(pi->sio);
	if (pi->hsock_open)
		nng_close(pi->hsock);
	if (pi->wsock_open)
		nng_close(pi->wsock);
	for (struct pending_txn *pt = pi->txns; pt;) {
		struct pending_txn *next = pt->next;
		pt->pi = NULL; /* freed by on_txn_done when etcd answers */
		pt->next = NULL;
		pt = next;
	}
	while (pi->q_head) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		free(ev);
	}
	free(pi->inflight);
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		nng_msg_free(o->msg);
		free(o);
	}
	while (pi->c_head) {
		struct completion *c = pi->c_head;
		pi->c_head = c->next;
		completion_free(c);
	}
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		free(d);
	}
	loop_timer_free(pi->defer);
	if (pi->w) {
		free(pi->w->node_id);
		free(pi->w->data_prefix);
		free(pi->w->result);
		free(pi->w);
	}
	loader_close(pi->lp);
	free(pi->data_prefix);
	free(pi->node_id);
	free(pi);
}

enum plugin_instance_state plugin_instance_state(const struct plugin_instance *pi)
{
	return pi->state;
}

const struct loader_plugin *plugin_instance_plugin(const struct plugin_instance *pi)
{
	return pi->lp;
}

void plugin_instance_get_stats(const struct plugin_instance *pi, struct plugin_instance_stats *ret)
{
	*ret = pi->stats;
}

uint64_t plugin_instance_pending(const struct plugin_instance *pi)
{
	return pi->stats.queued + pi->stats.in_flight;
}

const char *plugin_instance_bus_url(const struct plugin_instance *pi)
{
	return pi->url;
}

int plugin_instance_inject_from_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	return handle_bytes(pi, buf, len);
}

int plugin_instance_send_raw_to_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	nng_msg *msg;
	if (pi->broken)
		return -EPIPE;
	if (nng_msg_alloc(&msg, len) != 0)
		return -ENOMEM;
	if (len)
		memcpy(nng_msg_body(msg), buf, len);
	struct outmsg *o = calloc(1, sizeof(*o));
	if (!o) {
		nng_msg_free(msg);
		return -ENOMEM;
	}
	o->msg = msg;
	if (pi->out_tail)
		pi->out_tail->next = o;
	else
		pi->out_head = o;
	pi->out_tail = o;
	flush(pi);
	return 0;
}
