/* SPDX-License-Identifier: MIT */
/*
 * fakehost.c - see fakehost.h.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fakehost.h"

struct entry {
	char *key; /* NUL-terminated copies; keys in tests are text */
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create, mod, version;
};

struct job {
	struct job *next;
	struct fakehost *fh;
	struct etcd_compare *cmps;
	size_t n_cmps;
	struct etcd_op *ops[2];
	size_t n_ops[2];
	etcd_cb cb;
	void *ud;
	int fail;
};

struct fakehost {
	struct loop *loop;
	struct driver_host host;
	char *prefix;
	bool leading;
	struct entry *kv;
	size_t n, cap;
	int64_t rev;
	uint64_t txns;
	int fail_next;
	bool held; /* fakehost_hold: txns wait unanswered */
	bool *queued_flag; /* fakehost_hold: set when a txn is queued */
	struct job *jobs, *jobs_tail;
	struct loop_timer *timer;
};

static int keycmp(const void *a, size_t al, const void *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0; /* memcmp with a NULL pointer is UB even for 0 bytes */
	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

static bool in_range(const struct entry *e, const void *key, size_t kl, const void *end, size_t el)
{
	if (!end)
		return keycmp(e->key, e->key_len, key, kl) == 0;
	if (keycmp(e->key, e->key_len, key, kl) < 0)
		return false;
	if (el == 1 && ((const uint8_t *)end)[0] == 0)
		return true;
	return keycmp(e->key, e->key_len, end, el) < 0;
}

static struct entry *find(struct fakehost *fh, const void *key, size_t kl)
{
	for (size_t i = 0; i < fh->n; i++)
		if (keycmp(fh->kv[i].key, fh->kv[i].key_len, key, kl) == 0)
			return &fh->kv[i];
	return NULL;
}

static char *dupb(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		abort();
	if (n)
		memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static bool starts_with_prefix(const struct fakehost *fh, const void *k, size_t kl)
{
	size_t pl = strlen(fh->prefix);
	return k && kl >= pl && memcmp(k, fh->prefix, pl) == 0;
}

static bool cmp_one(int64_t have, const struct etcd_compare *c)
{
	switch (c->result) {
	case ETCD_CMP_EQUAL:
		return have == c->number;
	case ETCD_CMP_GREATER:
		return have > c->number;
	case ETCD_CMP_LESS:
		return have < c->number;
	case ETCD_CMP_NOT_EQUAL:
		return have != c->number;
	}
	return false;
}

static bool compare_holds(struct fakehost *fh, const struct etcd_compare *c)
{
	bool any = false;
	for (size_t i = 0; i < fh->n; i++) {
		const struct entry *e = &fh->kv[i];
		if (!in_range(e, c->key, c->key_len, c->range_end, c->range_end_len))
			continue;
		any = true;
		bool ok;
		if (c->target == ETCD_CMP_VALUE) {
			int r = keycmp(e->value, e->value_len, c->value, c->value_len);
			ok = c->result == ETCD_CMP_EQUAL     ? r == 0
			     : c->result == ETCD_CMP_GREATER ? r > 0
			     : c->result == ETCD_CMP_LESS    ? r < 0
			                                     : r != 0;
		} else {
			int64_t have = c->target == ETCD_CMP_VERSION ? e->version
			               : c->target == ETCD_CMP_CREATE ? e->create
			                                              : e->mod;
			ok = cmp_one(have, c);
		}
		if (!ok)
			return false;
	}
	if (!any && !c->range_end) {
		if (c->target == ETCD_CMP_VALUE)
			return false;
		return cmp_one(0, c);
	}
	return true;
}

static void kv_out(const struct entry *e, struct etcd_kv *out)
{
	out->key = (uint8_t *)dupb(e->key, e->key_len);
	out->key_len = e->key_len;
	out->value = e->value_len ? (uint8_t *)dupb(e->value, e->value_len) : NULL;
	out->value_len = e->value_len;
	out->create_revision = e->create;
	out->mod_revision = e->mod;
	out->version = e->version;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return keycmp(x->key, x->key_len, y->key, y->key_len);
}

static void run_op(struct fakehost *fh, const struct etcd_op *op, struct etcd_response *r,
                   bool *wrote)
{
	r->op_type = op->type;
	if (op->type == ETCD_OP_RANGE) {
		size_t cnt = 0;
		for (size_t i = 0; i < fh->n; i++)
			if (in_range(&fh->kv[i], op->key, op->key_len, op->range_end, op->range_end_len))
				cnt++;
		r->count = (int64_t)cnt;
		if (op->count_only)
			return;
		size_t lim = op->limit > 0 && (size_t)op->limit < cnt ? (size_t)op->limit : cnt;
		r->more = lim < cnt;
		r->kvs = calloc(lim ? lim : 1, sizeof(*r->kvs));
		for (size_t i = 0; i < fh->n && r->n_kvs < lim; i++) {
			if (!in_range(&fh->kv[i], op->key, op->key_len, op->range_end, op->range_end_len))
				continue;
			kv_out(&fh->kv[i], &r->kvs[r->n_kvs]);
			if (op->keys_only) {
				free(r->kvs[r->n_kvs].value);
				r->kvs[r->n_kvs].value = NULL;
				r->kvs[r->n_kvs].value_len = 0;
			}
			r->n_kvs++;
		}
		return;
	}
	if (!*wrote) {
		fh->rev++;
		*wrote = true;
	}
	if (op->type == ETCD_OP_PUT) {
		struct entry *e = find(fh, op->key, op->key_len);
		if (e && op->prev_kv) {
			r->prev_kvs = calloc(1, sizeof(*r->prev_kvs));
			kv_out(e, r->prev_kvs);
			r->n_prev_kvs = 1;
		}
		if (!e) {
			if (fh->n == fh->cap) {
				fh->cap = fh->cap ? fh->cap * 2 : 16;
				fh->kv = realloc(fh->kv, fh->cap * sizeof(*fh->kv));
				if (!fh->kv)
					abort();
			}
			e = &fh->kv[fh->n++];
			memset(e, 0, sizeof(*e));
			e->key = dupb(op->key, op->key_len);
			e->key_len = op->key_len;
			e->create = fh->rev;
		}
		free(e->value);
		e->value = dupb(op->value, op->value_len);
		e->value_len = op->value_len;
		e->mod = fh->rev;
		e->version++;
		qsort(fh->kv, fh->n, sizeof(*fh->kv), entry_cmp);
		return;
	}
	/* delete */
	size_t w = 0;
	for (size_t i = 0; i < fh->n; i++) {
		struct entry *e = &fh->kv[i];
		if (in_range(e, op->key, op->key_len, op->range_end, op->range_end_len)) {
			r->deleted++;
			free(e->key);
			free(e->value);
			continue;
		}
		fh->kv[w++] = *e;
	}
	fh->n = w;
}

static void resp_free(struct etcd_response *r)
{
	for (size_t i = 0; i < r->n_responses; i++) {
		struct etcd_response *s = &r->responses[i];
		for (size_t k = 0; k < s->n_kvs; k++) {
			free(s->kvs[k].key);
			free(s->kvs[k].value);
		}
		free(s->kvs);
		for (size_t k = 0; k < s->n_prev_kvs; k++) {
			free(s->prev_kvs[k].key);
			free(s->prev_kvs[k].value);
		}
		free(s->prev_kvs);
	}
	free(r->responses);
}

static void job_free(struct job *j)
{
	for (size_t i = 0; i < j->n_cmps; i++) {
		free((void *)(uintptr_t)j->cmps[i].key);
		free((void *)(uintptr_t)j->cmps[i].range_end);
		free((void *)(uintptr_t)j->cmps[i].value);
	}
	free(j->cmps);
	for (int b = 0; b < 2; b++) {
		for (size_t i = 0; i < j->n_ops[b]; i++) {
			free((void *)(uintptr_t)j->ops[b][i].key);
			free((void *)(uintptr_t)j->ops[b][i].range_end);
			free((void *)(uintptr_t)j->ops[b][i].value);
		}
		free(j->ops[b]);
	}
	free(j);
}

static void run_job(struct fakehost *fh, struct job *j, int forced_err)
{
	struct etcd_response resp;
	memset(&resp, 0, sizeof(resp));
	int err = forced_err ? forced_err : j->fail;
	if (err) {
		j->cb(NULL, err, NULL, j->ud);
		return;
	}
	fh->txns++;
	bool ok = fh->leading; /* the fence */
	for (size_t i = 0; ok && i < j->n_cmps; i++)
		ok = compare_holds(fh, &j->cmps[i]);
	int b = ok ? 0 : 1;
	bool wrote = false;
	resp.succeeded = ok;
	resp.n_responses = j->n_ops[b];
	resp.responses = calloc(j->n_ops[b] ? j->n_ops[b] : 1, sizeof(*resp.responses));
	for (size_t i = 0; i < j->n_ops[b]; i++)
		run_op(fh, &j->ops[b][i], &resp.responses[i], &wrote);
	resp.header.revision = fh->rev;
	j->cb(NULL, 0, &resp, j->ud);
	resp_free(&resp);
}

static void on_timer(struct loop_timer *t, void *ud)
{
	struct fakehost *fh = ud;
	(void)t;
	while (fh->jobs && !fh->held) {
		struct job *j = fh->jobs;
		fh->jobs = j->next;
		if (!fh->jobs)
			fh->jobs_tail = NULL;
		run_job(fh, j, 0);
		job_free(j);
	}
}

static void *dupv(const void *p, size_t n)
{
	return p ? dupb(p, n) : NULL;
}

static int fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                      const struct etcd_op *success, size_t n_success,
                      const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud)
{
	struct fakehost *fh = ctx;
	if (!fh->leading)
		return -ESTALE;
	for (size_t i = 0; i < n_cmps; i++)
		if (!starts_with_prefix(fh, cmps[i].key, cmps[i].key_len))
			return -EPERM;
	const struct etcd_op *br[2] = {success, failure};
	size_t nb[2] = {n_success, n_failure};
	for (int b = 0; b < 2; b++)
		for (size_t i = 0; i < nb[b]; i++)
			if (!starts_with_prefix(fh, br[b][i].key, br[b][i].key_len))
				return -EPERM;
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fh = fh;
	j->cb = cb;
	j->ud = ud;
	j->fail = fh->fail_next;
	fh->fail_next = 0;
	j->n_cmps = n_cmps;
	j->cmps = calloc(n_cmps ? n_cmps : 1, sizeof(*j->cmps));
	for (size_t i = 0; i < n_cmps; i++) {
		j->cmps[i] = cmps[i];
		j->cmps[i].key = dupv(cmps[i].key, cmps[i].key_len);
		j->cmps[i].range_end = dupv(cmps[i].range_end, cmps[i].range_end_len);
		j->cmps[i].value = dupv(cmps[i].value, cmps[i].value_len);
	}
	for (int b = 0; b < 2; b++) {
		j->n_ops[b] = nb[b];
		j->ops[b] = calloc(nb[b] ? nb[b] : 1, sizeof(*j->ops[b]));
		for (size_t i = 0; i < nb[b]; i++) {
			j->ops[b][i] = br[b][i];
			j->ops[b][i].key = dupv(br[b][i].key, br[b][i].key_len);
			j->ops[b][i].range_end = dupv(br[b][i].range_end, br[b][i].range_end_len);
			j->ops[b][i].value = dupv(br[b][i].value, br[b][i].value_len);
		}
	}
	if (fh->jobs_tail)
		fh->jobs_tail->next = j;
	else
		fh->jobs = j;
	fh->jobs_tail = j;
	if (fh->queued_flag)
		*fh->queued_flag = true;
	loop_timer_arm_in(fh->timer, 0);
	return 0;
}

int fakehost_new(struct loop *l, const char *data_prefix, struct fakehost **ret)
{
	struct fakehost *fh = calloc(1, sizeof(*fh));
	if (!fh)
		return -ENOMEM;
	fh->loop = l;
	fh->prefix = dupb(data_prefix, strlen(data_prefix));
	fh->rev = 1;
	int r = loop_timer_new(l, on_timer, fh, &fh->timer);
	if (r < 0) {
		free(fh->prefix);
		free(fh);
		return r;
	}
	fh->host.ctx = fh;
	fh->host.fenced_txn = fenced_txn;
	fh->host.data_prefix = fh->prefix;
	*ret = fh;
	return 0;
}

void fakehost_clear(struct fakehost *fh)
{
	for (size_t i = 0; i < fh->n; i++) {
		free(fh->kv[i].key);
		free(fh->kv[i].value);
	}
	fh->n = 0;
}

void fakehost_free(struct fakehost *fh)
{
	if (!fh)
		return;
	while (fh->jobs) {
		struct job *j = fh->jobs;
		fh->jobs = j->next;
		run_job(fh, j, -ECANCELED);
		job_free(j);
	}
	loop_timer_free(fh->timer);
	for (size_t i = 0; i < fh->n; i++) {
		free(fh->kv[i].key);
		free(fh->kv[i].value);
	}
	free(fh->kv);
	free(fh->prefix);
	free(fh);
}

void fakehost_set_leading(struct fakehost *fh, bool leading)
{
	fh->leading = leading;
}

const struct driver_host *fakehost_driver_host(struct fakehost *fh)
{
	return &fh->host;
}

const char *fakehost_get(const struct fakehost *fh, const char *key)
{
	for (size_t i = 0; i < fh->n; i++)
		if (strcmp(fh->kv[i].key, key) == 0)
			return fh->kv[i].value;
	return NULL;
}

size_t fakehost_count(const struct fakehost *fh, const char *prefix)
{
	size_t n = 0, pl = strlen(prefix);
	for (size_t i = 0; i < fh->n; i++)
		if (strncmp(fh->kv[i].key, prefix, pl) == 0)
			n++;
	return n;
}

const char *fakehost_nth_key(const struct fakehost *fh, const char *prefix, size_t i)
{
	size_t pl = strlen(prefix);
	for (size_t k = 0; k < fh->n; k++)
		if (strncmp(fh->kv[k].key, prefix, pl) == 0 && i-- == 0)
			return fh->kv[k].key;
	return NULL;
}

uint64_t fakehost_txns(const struct fakehost *fh)
{
	return fh->txns;
}

void fakehost_fail_next(struct fakehost *fh, int err)
{
	fh->fail_next = err;
}

void fakehost_hold(struct fakehost *fh, bool hold, bool *queued)
{
	fh->held = hold;
	fh->queued_flag = hold ? queued : NULL;
	if (!hold && fh->jobs)
		loop_timer_arm_in(fh->timer, 0);
}
