/* SPDX-License-Identifier: MIT */
/*
 * worker_apply.c - api->apply and api->apply_key (ABI 1.3): make the keys
 * under a prefix of the plugin's data equal a desired set.
 *
 * Design notes
 * - The diff runs here, in the worker, on top of the host's range and
 *   fenced txn: the host side stays as it is (every chunk is a txn the host
 *   checks and fences like any other), and the read answers cross only the
 *   local bus. docs/design.md ("apply") has the reasons.
 * - Every check of the whole set comes before the first write, so a set
 *   the host would refuse part-way writes nothing. Then the current keys
 *   are read in pages (etcd returns them in key order), the set is sorted,
 *   and one merge gives the puts, deletes and unchanged keys; the writes
 *   go out in key order, in chunks of at most LH_APPLY_TXN_OPS ops and
 *   LH_APPLY_TXN_BYTES bytes, and the first chunk that fails ends the call.
 * - Leadership is not checked here: every chunk is a txn the host fences
 *   (-ESTALE when not leading), so a shadow run (leaseholdctl shadow)
 *   previews an apply's writes as it previews any txn's.
 * - Memory: the pages live until the call returns (deletes point into
 *   them); nothing is left in the callback's arena but the chunks' results.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi_key_rule.h"
#include "worker/worker_internal.h"

/* the keys of one read page; a page that does not fit LH_READ_MAX is
 * asked again with half the limit, down to one key (which always fits) */
#define APPLY_PAGE_KEYS 1024
/* a key's bytes in a chunk besides its key and value (framing, the data
 * prefix the host prepends) */
#define APPLY_OP_OVERHEAD 64u

struct apply_read {
	ToWorker **pages;
	size_t n_pages;
	const BusKv **kvs; /* every current key, in key order */
	size_t n_kvs, cap_kvs;
	int64_t revision;
};

static int worker_apply_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0; /* an empty key's data may be NULL */
	return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

/* qsort has no context argument; workers of other plugins run on other threads */
static _Thread_local const struct lh_apply_kv *g_apply_sort_base;
static int worker_apply_cmp_idx(const void *a, const void *b)
{
	const struct lh_apply_kv *x = &g_apply_sort_base[*(const size_t *)a];
	const struct lh_apply_kv *y = &g_apply_sort_base[*(const size_t *)b];
	return worker_apply_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* worker_apply_show - key as text for a refusal (masked, cut at 60 bytes) */
static const char *worker_apply_show(const void *key, size_t len, char *buf, size_t size)
{
	size_t n = len < 60 ? len : 60, o = 0;
	for (size_t i = 0; i < n && o + 4 < size; i++) {
		unsigned char c = ((const unsigned char *)key)[i];
		buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (len > n)
		memcpy(buf + o, "...", 3), o += 3;
	buf[o] = 0;
	return buf;
}

/* worker_apply_check_kv - one desired key-value against the rules */
static int worker_apply_check_kv(struct worker *w, const struct lh_apply_kv *kv, uint64_t i,
                                 const void *prefix, size_t prefix_len)
{
	char shown[80];
	const char *rule = NULL;
	if (kv->key_len && !kv->key)
		rule = "is NULL with a length";
	else if ((rule = abi_key_rule(kv->key, (size_t)kv->key_len, false)) == NULL &&
	         (kv->key_len < prefix_len || (prefix_len && memcmp(kv->key, prefix, prefix_len) != 0)))
		rule = "is not under the prefix";
	if (rule) {
		worker_api_txn_fail(w, "apply: key %llu \"%s\" %s", (unsigned long long)i,
		                    worker_apply_show(kv->key, kv->key ? (size_t)kv->key_len : 0, shown,
		                                      sizeof(shown)), rule);
		return -EINVAL;
	}
	if (kv->value_len > LH_VALUE_MAX || (kv->value_len && !kv->value)) {
		worker_api_txn_fail(w, "apply: key %llu \"%s\": value of %llu bytes is %s",
		                    (unsigned long long)i,
		                    worker_apply_show(kv->key, (size_t)kv->key_len, shown, sizeof(shown)),
		                    (unsigned long long)kv->value_len,
		                    kv->value ? "larger than LH_VALUE_MAX (512000 bytes)" : "NULL");
		return -EINVAL;
	}
	return 0;
}

/* worker_apply_check - the whole call, before anything is read or written;
 * *ret_order: the set's indexes in key order (malloc'd) */
static int worker_apply_check(struct worker *w, const void *prefix, uint64_t prefix_len,
                              const struct lh_apply_kv *desired, uint64_t n, uint32_t flags,
                              size_t **ret_order)
{
	const char *rule;
	if (flags & ~LH_APPLY_KEEP_OTHERS) {
		worker_api_txn_fail(w, "apply: unknown flags 0x%x", flags & ~LH_APPLY_KEEP_OTHERS);
		return -EINVAL;
	}
	if ((prefix_len && !prefix) || (rule = abi_key_rule(prefix, (size_t)prefix_len, true))) {
		worker_api_txn_fail(w, "apply: the prefix %s", prefix ? rule : "is NULL with a length");
		return -EINVAL;
	}
	if (n > LH_APPLY_MAX) {
		worker_api_txn_fail(w, "apply: %llu keys, more than LH_APPLY_MAX (%u)",
		                    (unsigned long long)n, LH_APPLY_MAX);
		return -E2BIG;
	}
	if (n && !desired) {
		worker_api_txn_fail(w, "apply: desired is NULL with %llu keys", (unsigned long long)n);
		return -EINVAL;
	}
	for (uint64_t i = 0; i < n; i++) {
		int r = worker_apply_check_kv(w, &desired[i], i, prefix, (size_t)prefix_len);
		if (r < 0)
			return r;
	}
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	if (!order) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	g_apply_sort_base = desired;
	qsort(order, (size_t)n, sizeof(*order), worker_apply_cmp_idx);
	for (size_t i = 1; i < n; i++)
		if (worker_apply_cmp_idx(&order[i - 1], &order[i]) == 0) {
			char shown[80];
			const struct lh_apply_kv *kv = &desired[order[i]];
			worker_api_txn_fail(w, "apply: key \"%s\" is in the set twice",
			                    worker_apply_show(kv->key, (size_t)kv->key_len, shown, sizeof(shown)));
			free(order);
			return -EINVAL;
		}
	*ret_order = order;
	return 0;
}

static void worker_apply_read_free(struct apply_read *rd)
{
	for (size_t i = 0; i < rd->n_pages; i++)
		leasehold__bus__to_worker__free_unpacked(rd->pages[i], NULL);
	free(rd->pages);
	free(rd->kvs);
}

/* worker_apply_take_page - keep page tw's keys in rd (rd owns tw then) */
static int worker_apply_take_page(struct apply_read *rd, ToWorker *tw)
{
	const BusOpResult *res = tw->txn_reply->results[0];
	ToWorker **pages = realloc(rd->pages, (rd->n_pages + 1) * sizeof(*pages));
	if (!pages)
		return -ENOMEM;
	rd->pages = pages;
	rd->pages[rd->n_pages++] = tw;
	if (rd->n_kvs + res->n_kvs > rd->cap_kvs) {
		size_t cap = (rd->n_kvs + res->n_kvs) * 2;
		const BusKv **kvs = realloc(rd->kvs, cap * sizeof(*kvs));
		if (!kvs)
			return -ENOMEM;
		rd->kvs = kvs;
		rd->cap_kvs = cap;
	}
	for (size_t i = 0; i < res->n_kvs; i++)
		rd->kvs[rd->n_kvs++] = res->kvs[i];
	if (!rd->revision)
		rd->revision = tw->txn_reply->revision;
	return 0;
}

/* worker_apply_read - every key under prefix, in pages */
static int worker_apply_read(struct worker *w, const void *prefix, size_t prefix_len,
                             struct apply_read *rd)
{
	uint8_t *from = malloc(LH_KEY_MAX + 1); /* the key after the last one read */
	size_t from_len = 0;
	int64_t limit = APPLY_PAGE_KEYS;
	int r = 0;
	if (!from) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	while (r == 0) {
		ToWorker *tw = NULL;
		r = worker_api_range_page(w, prefix, prefix_len, LH_F_PREFIX, from_len ? from : NULL,
		                          from_len, limit, &tw);
		if (r == -EMSGSIZE && limit > 1) {
			limit /= 2;
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		const BusOpResult *res = tw->txn_reply->results[0];
		bool more = res->more && res->n_kvs > 0;
		const BusKv *last = res->n_kvs ? res->kvs[res->n_kvs - 1] : NULL;
		if (last && (last->key.len > LH_KEY_MAX || last->key.len < prefix_len)) {
			leasehold__bus__to_worker__free_unpacked(tw, NULL);
			worker_api_txn_fail(w, "apply: bad range reply from the host");
			r = -EBADMSG;
			break;
		}
		if (last && more) {
			memcpy(from, last->key.data, last->key.len);
			from[last->key.len] = 0;
			from_len = last->key.len + 1;
		}
		if ((r = worker_apply_take_page(rd, tw)) < 0) {
			leasehold__bus__to_worker__free_unpacked(tw, NULL);
			worker_api_txn_fail(w, "out of memory");
			break;
		}
		if (!more)
			break;
	}
	free(from);
	return r;
}

struct apply_chunk {
	struct lh_op ops[LH_APPLY_TXN_OPS];
	uint32_t n;
	uint64_t bytes, puts, dels;
};

/* worker_apply_flush - send the chunk as one fenced txn; counts into res */
static int worker_apply_flush(struct worker *w, struct apply_chunk *c, struct lh_apply_result *res)
{
	if (c->n == 0)
		return 0;
	const struct lh_txn_result *tr = NULL;
	int r = worker_api_txn(&w->ctx, NULL, 0, c->ops, c->n, NULL, 0, &tr);
	if (r < 0)
		return r;
	if (!tr->succeeded) {
		/* no compare of ours: only the fence can fail */
		worker_api_txn_fail(w, "apply: the fence failed (this node no longer leads) after %u "
		                    "txn(s) had landed", res->txns);
		return -ESTALE;
	}
	res->txns++;
	res->put += c->puts;
	res->deleted += c->dels;
	res->revision = tr->revision;
	c->n = 0;
	c->bytes = c->puts = c->dels = 0;
	return 0;
}

/* worker_apply_add - one write into the chunk, sending it first when full */
static int worker_apply_add(struct worker *w, struct apply_chunk *c, struct lh_apply_result *res,
                            uint32_t type, const void *key, size_t key_len, const void *value,
                            size_t value_len)
{
	uint64_t bytes = key_len + value_len + APPLY_OP_OVERHEAD;
	if (c->n == LH_APPLY_TXN_OPS || (c->n && c->bytes + bytes > LH_APPLY_TXN_BYTES)) {
		int r = worker_apply_flush(w, c, res);
		if (r < 0)
			return r;
	}
	c->ops[c->n++] = (struct lh_op){.type = type, .key = key, .key_len = key_len,
	                                .value = value, .value_len = value_len};
	c->bytes += bytes;
	if (type == LH_OP_PUT)
		c->puts++;
	else
		c->dels++;
	return 0;
}

/* worker_apply_merge - desired (in `order`) against the current keys */
static int worker_apply_merge(struct worker *w, const struct lh_apply_kv *desired, const size_t *order,
                              size_t n, const struct apply_read *rd, uint32_t flags,
                              struct lh_apply_result *res)
{
	struct apply_chunk *c = calloc(1, sizeof(*c));
	if (!c) {
		worker_api_txn_fail(w, "out of memory");
		return -ENOMEM;
	}
	size_t i = 0, j = 0;
	int r = 0;
	while (r == 0 && (i < n || j < rd->n_kvs)) {
		const struct lh_apply_kv *d = i < n ? &desired[order[i]] : NULL;
		const BusKv *cur = j < rd->n_kvs ? rd->kvs[j] : NULL;
		int cmp = !d ? 1 : !cur ? -1 : worker_apply_cmp(d->key, d->key_len, cur->key.data, cur->key.len);
		if (cmp > 0) { /* a current key outside the set */
			if (!(flags & LH_APPLY_KEEP_OTHERS))
				r = worker_apply_add(w, c, res, LH_OP_DELETE, cur->key.data, cur->key.len, NULL, 0);
			j++;
			continue;
		}
		if (cmp == 0 && cur->value.len == d->value_len &&
		    (d->value_len == 0 || memcmp(cur->value.data, d->value, d->value_len) == 0))
			res->unchanged++;
		else
			r = worker_apply_add(w, c, res, LH_OP_PUT, d->key, d->key_len, d->value, d->value_len);
		i++;
		j += cmp == 0;
	}
	if (r == 0)
		r = worker_apply_flush(w, c, res);
	free(c);
	return r;
}

/* worker_apply_may - the callback may call apply now (its thread, not
 * validate_config). Leadership is the host's to decide, chunk by chunk, as
 * for every txn: -ESTALE when this node does not lead, and in a shadow run
 * (token 0, not leading) the chunks are captured like any txn of it. */
static int worker_apply_may(struct worker *w, struct lh_apply_result *result)
{
	if (!worker_on_own_thread(w))
		return -EPERM;
	worker_call_cur(w)->txn_error[0] = 0;
	if (w->validating) {
		worker_api_txn_fail(w, "validate_config may not write");
		return -EPERM;
	}
	if (!result) {
		worker_api_txn_fail(w, "apply: result is NULL");
		return -EINVAL;
	}
	memset(result, 0, sizeof(*result));
	return 0;
}

int32_t worker_apply(struct lh_ctx *ctx, const void *prefix, uint64_t prefix_len,
                     const struct lh_apply_kv *desired, uint64_t n, uint32_t flags,
                     struct lh_apply_result *result)
{
	struct worker *w = worker_from_ctx(ctx);
	size_t *order = NULL;
	int r = worker_apply_may(w, result);
	if (r < 0 || (r = worker_apply_check(w, prefix, prefix_len, desired, n, flags, &order)) < 0)
		return r;
	struct apply_read rd = {0};
	r = worker_apply_read(w, prefix, (size_t)prefix_len, &rd);
	if (r == 0) {
		result->revision = rd.revision;
		r = worker_apply_merge(w, desired, order, (size_t)n, &rd, flags, result);
	}
	worker_apply_read_free(&rd);
	free(order);
	return r;
}

int32_t worker_apply_key(struct lh_ctx *ctx, const void *key, uint64_t key_len, const void *value,
                         uint64_t value_len, struct lh_apply_result *result)
{
	struct worker *w = worker_from_ctx(ctx);
	struct lh_apply_result mine;
	struct lh_apply_kv kv = {key, key_len, value ? value : "", value ? value_len : 0};
	int r = worker_apply_may(w, result ? result : &mine);
	if (r < 0)
		return r;
	result = result ? result : &mine;
	if ((r = worker_apply_check_kv(w, &kv, 0, "", 0)) < 0)
		return r;
	ToWorker *tw = NULL;
	if ((r = worker_api_range_page(w, key, (size_t)key_len, 0, NULL, 0, 1, &tw)) < 0)
		return r;
	struct apply_read rd = {0};
	if ((r = worker_apply_take_page(&rd, tw)) < 0) {
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		worker_api_txn_fail(w, "out of memory");
		return r;
	}
	result->revision = rd.revision;
	size_t order = 0;
	/* one key as a set of one (or none, to delete it) under the key itself */
	r = worker_apply_merge(w, &kv, &order, value ? 1 : 0, &rd, 0, result);
	if (r == 0 && !value && rd.n_kvs == 0)
		result->unchanged = 1;
	worker_apply_read_free(&rd);
	return r;
}
