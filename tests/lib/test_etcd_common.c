/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_common.c - helpers shared by the etcd client tests (see
 * test_etcd_common.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "check.h"
#include "etcd/etcd.h"
#include "harness.h"
#include "test_etcd_common.h"

/* ---- deep copy of a borrowed response ---- */

static void kv_copy(struct etcd_kv *d, const struct etcd_kv *s)
{
	*d = *s;
	d->key = malloc(s->key_len + 1);
	CHECK(d->key);
	if (s->key_len)
		memcpy(d->key, s->key, s->key_len);
	d->key[s->key_len] = 0;
	d->value = NULL;
	if (s->value_len) {
		d->value = malloc(s->value_len + 1);
		CHECK(d->value);
		memcpy(d->value, s->value, s->value_len);
		d->value[s->value_len] = 0;
	}
}

static struct etcd_kv *kvs_copy(const struct etcd_kv *s, size_t n)
{
	if (!n)
		return NULL;
	struct etcd_kv *d = calloc(n, sizeof(*d));
	CHECK(d);
	for (size_t i = 0; i < n; i++)
		kv_copy(&d[i], &s[i]);
	return d;
}

static void resp_copy(struct etcd_response *d, const struct etcd_response *s)
{
	*d = *s;
	d->kvs = kvs_copy(s->kvs, s->n_kvs);
	d->prev_kvs = kvs_copy(s->prev_kvs, s->n_prev_kvs);
	d->keys = kvs_copy(s->keys, s->n_keys);
	d->error_message = s->error_message ? strdup(s->error_message) : NULL;
	d->responses = NULL;
	if (s->n_responses) {
		d->responses = calloc(s->n_responses, sizeof(*d->responses));
		CHECK(d->responses);
		for (size_t i = 0; i < s->n_responses; i++)
			resp_copy(&d->responses[i], &s->responses[i]);
	}
}

/* ---- synchronous wrappers ---- */

void res_cb(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct res *x = ud;
	x->done = true;
	x->calls++;
	x->err = err;
	if (resp) {
		x->r = calloc(1, sizeof(*x->r));
		CHECK(x->r);
		resp_copy(x->r, resp);
	}
}

void res_wait(struct loop *l, struct res *x, int ms)
{
	int r = loop_run_until(l, &x->done, loop_now() + (uint64_t)ms * LOOP_NS_PER_MS);
	if (r < 0) {
		fprintf(stderr, "callback did not run within %d ms\n", ms);
		exit(1);
	}
	CHECK_INT_EQ(x->calls, 1);
}

void res_clear(struct res *x)
{
	etcd_response_free(x->r);
	memset(x, 0, sizeof(*x));
}

void copy_str(char *dst, size_t cap, const uint8_t *p, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	if (len)
		memcpy(dst, p, len);
	dst[len] = 0;
}

bool watch_errs_take(struct watch_errs *e, int err, int64_t revision)
{
	e->calls++;
	if (err >= 0)
		return false;
	e->errs++;
	e->last_err = err;
	e->err_rev = revision;
	e->got_err = true;
	return true;
}

struct etcd_compare cmp_key(enum etcd_cmp_target t, enum etcd_cmp_result res, const char *key,
			    int64_t n)
{
	struct etcd_compare c;
	memset(&c, 0, sizeof(c));
	c.target = t;
	c.result = res;
	c.key = key;
	c.key_len = strlen(key);
	c.number = n;
	return c;
}

struct etcd_op op_key(enum etcd_op_type t, const char *key)
{
	struct etcd_op op;
	memset(&op, 0, sizeof(op));
	op.type = t;
	op.key = key;
	op.key_len = strlen(key);
	return op;
}

/* sput - put key=value (lease optional); returns err; *ret gets the response */
int sput(struct loop *l, struct etcd_client *c, const char *key, const char *val, int64_t lease,
	 bool prev, struct etcd_response **ret)
{
	struct res x = {0};
	struct etcd_op op = op_key(ETCD_OP_PUT, key);
	op.value = val;
	op.value_len = val ? strlen(val) : 0;
	op.lease = lease;
	op.prev_kv = prev;
	CHECK_OK(etcd_put(c, &op, NULL, res_cb, &x, NULL));
	CHECK(!x.done); /* never called back from inside the call */
	res_wait(l, &x, WAIT_MS);
	if (ret)
		*ret = x.r;
	else
		etcd_response_free(x.r);
	return x.err;
}

int sop(struct loop *l, struct etcd_client *c, const struct etcd_op *op, struct etcd_response **ret)
{
	struct res x = {0};
	int r;
	switch (op->type) {
	case ETCD_OP_RANGE:
		r = etcd_range(c, op, NULL, res_cb, &x, NULL);
		break;
	case ETCD_OP_PUT:
		r = etcd_put(c, op, NULL, res_cb, &x, NULL);
		break;
	default:
		r = etcd_delete(c, op, NULL, res_cb, &x, NULL);
		break;
	}
	CHECK_OK(r);
	res_wait(l, &x, WAIT_MS);
	if (ret)
		*ret = x.r;
	else
		etcd_response_free(x.r);
	return x.err;
}

/* sget - the kv of key (deep copy) or NULL; exits on error */
struct etcd_kv *sget(struct loop *l, struct etcd_client *c, const char *key)
{
	struct etcd_op op = op_key(ETCD_OP_RANGE, key);
	struct etcd_response *r = NULL;
	CHECK_OK(sop(l, c, &op, &r));
	CHECK(r);
	struct etcd_kv *kv = r->n_kvs ? etcd_kv_dup(&r->kvs[0]) : NULL;
	etcd_response_free(r);
	return kv;
}

struct etcd_config config_of(const char *const *eps, size_t n)
{
	struct etcd_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.endpoints = eps;
	cfg.n_endpoints = n;
	return cfg;
}

struct etcd_client *client_new_of(struct loop *l, const struct etcd_config *cfg)
{
	struct etcd_client *c = NULL;
	CHECK_OK(etcd_client_new(l, cfg, &c));
	CHECK(c);
	return c;
}

struct etcd_client *client_for(struct loop *l, const char *const *eps, size_t n, const char *user,
			       const char *pw)
{
	struct etcd_config cfg = config_of(eps, n);
	cfg.user = user;
	cfg.password = pw;
	return client_new_of(l, &cfg);
}

/* wait_ms - let the loop run for ms (timers/fds are served meanwhile). Only
 * for waiting on wall-clock facts such as a token TTL. */
void loop_for(struct loop *l, int ms)
{
	bool never = false;
	int r = loop_run_until(l, &never, loop_now() + (uint64_t)ms * LOOP_NS_PER_MS);
	CHECK_INT_EQ(r, -ETIMEDOUT);
}

/* debug_from_env - LH_DEBUG=1 turns on the client's debug log */
void debug_from_env(void)
{
	const char *d = getenv("LH_DEBUG");
	if (d && *d == '1')
		log_set_level(LOG_LVL_DEBUG);
}
