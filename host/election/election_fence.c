/* SPDX-License-Identifier: MIT */
/*
 * election_fence.c - the plugin's writes (driver_host.fenced_txn): a txn
 * under P/N/data/ only, sent with one more compare, our election key's
 * create_revision (the fencing token), and one more failure op that reads
 * our key, so a failed fence is told apart from the plugin's own compares.
 * A fence that fails deposes us at once.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_internal.h"

struct fenced_ctx {
	uint32_t magic;          /* FENCED_CTX_MAGIC */
	struct fenced_ctx *next; /* in e->fenced, so election_free can orphan it */
	struct election *e;      /* NULL once the election is freed */
	uint64_t gen;
	etcd_cb cb;
	void *ud;
	size_t n_failure;
};

static void election_fence_fenced_unlink(struct fenced_ctx *f)
{
	if (!f->e)
		return;
	for (struct fenced_ctx **pp = &f->e->fenced; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
}

static void election_fence_fenced_free(struct fenced_ctx *f)
{
	f->magic = 0;
	free(f);
}

static void election_fence_on_fenced(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct fenced_ctx *f = ud;
	CHECK_OBJ(f, FENCED_CTX_MAGIC);
	struct election *e = f->e;
	election_fence_fenced_unlink(f);
	if (!e) {
		f->cb(c, -ESTALE, NULL, f->ud);
		election_fence_fenced_free(f);
		return;
	}
	CHECK_OBJ(e, ELECTION_MAGIC);
	if (err < 0 || r->succeeded) {
		f->cb(c, err, r, f->ud);
		election_fence_fenced_free(f);
		return;
	}
	/* the last failure response is our own key check */
	if (r->n_responses != f->n_failure + 1) {
		f->cb(c, -EBADMSG, NULL, f->ud);
		election_fence_fenced_free(f);
		return;
	}
	const struct etcd_response *mine = &r->responses[r->n_responses - 1];
	bool still = mine->n_kvs == 1 && f->gen == e->gen && e->leading &&
	             mine->kvs[0].create_revision == e->my_rev;
	if (!still) {
		uint64_t gen = f->gen;
		f->cb(c, -ESTALE, NULL, f->ud);
		election_fence_fenced_free(f);
		if (e->leading && gen == e->gen) {
			election_depose(e, false, "a fenced plugin write found us no longer leading");
			e->my_rev = 0;
			election_step(e);
		}
		return;
	}
	struct etcd_response copy = *r;
	copy.n_responses = r->n_responses - 1;
	f->cb(c, 0, &copy, f->ud);
	election_fence_fenced_free(f);
}

static bool election_fence_key_in(const void *k, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);
	return k && len >= n && memcmp(k, prefix, n) == 0;
}

static int election_fence_bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

/* election_fence_end_in - a range end keeps the range inside data/: data/ < end <= end(data/) */
static bool election_fence_end_in(const void *end, size_t len, const struct election *e)
{
	if (!end)
		return true;
	size_t n = strlen(e->k_data);
	uint8_t pend[512];
	if (n > sizeof(pend) || len == 0)
		return false;
	size_t pl = etcd_prefix_end(e->k_data, n, pend);
	return election_fence_bytes_cmp(end, len, e->k_data, n) > 0 && election_fence_bytes_cmp(end, len, pend, pl) <= 0;
}

int election_fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                        const struct etcd_op *success, size_t n_success,
                        const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud)
{
	struct election *e = ctx;
	CHECK_OBJ(e, ELECTION_MAGIC);
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
		if (!election_fence_key_in(cmps[i].key, cmps[i].key_len, e->k_data) ||
		    !election_fence_end_in(cmps[i].range_end, cmps[i].range_end_len, e))
			return -EPERM;
	const struct etcd_op *lists[2] = {success, failure};
	size_t lens[2] = {n_success, n_failure};
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lens[l]; i++)
			if (!election_fence_key_in(lists[l][i].key, lists[l][i].key_len, e->k_data) ||
			    !election_fence_end_in(lists[l][i].range_end, lists[l][i].range_end_len, e) ||
			    (lists[l][i].type == ETCD_OP_PUT && lists[l][i].lease != 0))
				return -EPERM;

	/* the write goes out under the fence of a term that holds now (a
	 * draining leader still lets the running reconcile write) */
	assert(e->leading && e->my_rev != 0);
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
	f->magic = FENCED_CTX_MAGIC;
	f->e = e;
	f->next = NULL;
	f->gen = e->gen;
	f->cb = cb;
	f->ud = ud;
	f->n_failure = n_failure;
	/* a write sent into etcd's leaderless window must not hold the worker,
	 * and with it the next term, for the client's default 5 s */
	struct etcd_call_opts o = {.timeout_ms = session_request_timeout_ms(e->sess)};
	r = etcd_txn(e->etcd, all, n_cmps + 1, success, n_success, fail, n_failure + 1, &o,
	             election_fence_on_fenced, f, NULL);
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

void election_fenced_orphan(struct election *e)
{
	while (e->fenced) {
		struct fenced_ctx *f = e->fenced;
		e->fenced = f->next;
		f->e = NULL;
	}
}
