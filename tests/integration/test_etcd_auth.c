/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_auth.c - username/password auth against a real etcd with auth
 * enabled and simple tokens that expire after 2 s (--auth-token-ttl 2):
 * first call authenticates; a call after the token expired succeeds by
 * re-authenticating once; a watch whose token died with an etcd restart
 * re-authenticates and resumes; a wrong password is -EACCES; no user at all
 * is refused by etcd.
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

#include <curl/curl.h>

static struct loop *L;
static struct harness_etcd *H;

static const char *ep(void)
{
	return harness_etcd_url(H, 0);
}

static void test_auth_enable_and_first_call(void)
{
	harness_etcd_enable_auth(H, "s3cret");
	const char *e = ep();
	struct etcd_client *c = client_for(L, &e, 1, "root", "s3cret");
	CHECK_INT_EQ(etcd_client_auth_count(c), 0);
	CHECK_OK(sput(L, c, "auth/a", "1", 0, false, NULL));
	CHECK_INT_EQ(etcd_client_auth_count(c), 1);
	/* several calls queued before the token exists share one authenticate */
	struct etcd_client *c2 = client_for(L, &e, 1, "root", "s3cret");
	struct res x[4];
	memset(x, 0, sizeof(x));
	struct etcd_op op = op_key(ETCD_OP_RANGE, "auth/a");
	for (int i = 0; i < 4; i++)
		CHECK_OK(etcd_range(c2, &op, NULL, res_cb, &x[i], NULL));
	for (int i = 0; i < 4; i++) {
		res_wait(L, &x[i], WAIT_MS);
		CHECK_OK(x[i].err);
		CHECK_INT_EQ(x[i].r->n_kvs, 1);
		res_clear(&x[i]);
	}
	CHECK_INT_EQ(etcd_client_auth_count(c2), 1);
	etcd_client_free(c2);
	etcd_client_free(c);
}

static void test_auth_wrong_password_and_no_user(void)
{
	const char *e = ep();
	struct etcd_client *c = client_for(L, &e, 1, "root", "wrong");
	CHECK_INT_EQ(sput(L, c, "auth/b", "1", 0, false, NULL), -EACCES);
	CHECK_INT_EQ(etcd_client_auth_count(c), 0);
	etcd_client_free(c);
	c = client_for(L, &e, 1, NULL, NULL);
	struct etcd_response *r = NULL;
	int err = sput(L, c, "auth/b", "1", 0, false, &r);
	CHECK(err == -EINVAL || err == -EACCES || err == -EPERM);
	CHECK(r && r->error_message);
	etcd_response_free(r);
	etcd_client_free(c);
}

static void test_auth_token_expires_reauthenticates(void)
{
	const char *e = ep();
	struct etcd_client *c = client_for(L, &e, 1, "root", "s3cret");
	CHECK_OK(sput(L, c, "auth/c", "1", 0, false, NULL));
	CHECK_INT_EQ(etcd_client_auth_count(c), 1);
	/* idle past the 2 s simple-token TTL (etcd checks every second) */
	loop_for(L, 3500);
	struct etcd_kv *kv = sget(L, c, "auth/c");
	CHECK(kv);
	CHECK_MEM_EQ(kv->value, kv->value_len, "1", 1);
	etcd_kv_free(kv);
	CHECK_INT_EQ(etcd_client_auth_count(c), 2);
	etcd_client_free(c);
}

struct wrec {
	int n;
	char keys[16][16];
	int target;
	bool reached;
	int errs;
};

static void wcb(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		size_t n, void *ud)
{
	struct wrec *r = ud;
	if (err < 0) {
		r->errs++;
		return;
	}
	for (size_t i = 0; i < n && r->n < 16; i++) {
		copy_str(r->keys[r->n], sizeof(r->keys[r->n]), ev[i].kv.key, ev[i].kv.key_len);
		r->n++;
	}
	if (r->n >= r->target)
		r->reached = true;
}

static void test_auth_watch_survives_restart(void)
{
	const char *e = ep();
	struct etcd_client *c = client_for(L, &e, 1, "root", "s3cret");
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, c, "aw/0", "v", 0, false, &r));
	int64_t base = r->header.revision;
	etcd_response_free(r);
	struct wrec rec = {0};
	rec.target = 2;
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("aw/", 3, end);
	CHECK_OK(etcd_watch_start(c, "aw/", 3, end, el, base, 0, wcb, &rec, &w));
	CHECK_OK(sput(L, c, "aw/1", "v", 0, false, NULL));
	CHECK_OK(loop_run_until(L, &rec.reached, loop_now() + WAIT_MS * LOOP_NS_PER_MS));
	uint64_t auths = etcd_client_auth_count(c);
	/* simple tokens live in memory: a restart invalidates them */
	CHECK_OK(harness_etcd_stop(H, 0));
	CHECK_OK(harness_etcd_restart(H, 0));
	rec.target = 4;
	rec.reached = false;
	CHECK_OK(sput(L, c, "aw/2", "v", 0, false, NULL));
	CHECK_OK(sput(L, c, "aw/3", "v", 0, false, NULL));
	CHECK_OK(loop_run_until(L, &rec.reached, loop_now() + 15 * LOOP_NS_PER_S));
	CHECK_INT_EQ(rec.n, 4);
	CHECK_INT_EQ(rec.errs, 0);
	for (int i = 0; i < 4; i++) {
		char k[16];
		snprintf(k, sizeof(k), "aw/%d", i);
		CHECK_STR_EQ(rec.keys[i], k);
	}
	CHECK(etcd_client_auth_count(c) > auths);
	etcd_watch_cancel(w);
	etcd_client_free(c);
}

int main(void)
{
	static const char *const extra[] = {"--auth-token-ttl", "2", NULL};
	debug_from_env();
	CHECK_OK(harness_etcd_start(1, extra, &H));
	CHECK_OK(loop_new(&L));
	RUN(test_auth_enable_and_first_call);
	RUN(test_auth_wrong_password_and_no_user);
	RUN(test_auth_watch_survives_restart);
	RUN(test_auth_token_expires_reauthenticates);
	loop_free(L);
	harness_etcd_free(H);
	return CHECK_EXIT();
}
