/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_common.h - helpers shared by the etcd client tests
 * (tests/integration/test_etcd_*.c, tests/unit/test_etcd_codec.c): blocking
 * wrappers over the asynchronous client. Waits run the loop against a
 * deadline; every helper exits the test (CHECK) on an unexpected failure.
 */
#ifndef LH_TEST_ETCD_COMMON_H
#define LH_TEST_ETCD_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/loop.h"
#include "etcd/etcd.h"

#define WAIT_MS 10000

/* the outcome of one call: res_cb fills it, res_wait waits for it */
struct res {
	bool done;
	int calls;
	int err;
	struct etcd_response *r; /* deep copy, free with etcd_response_free */
};

/* res_cb - an etcd_cb recording into ud (a struct res) */
void res_cb(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud);
/* res_wait - run the loop until x is done (at most ms); exits otherwise */
void res_wait(struct loop *l, struct res *x, int ms);
/* res_clear - free x's response and reset it */
void res_clear(struct res *x);
/* copy_str - p[len] as a C string into dst[cap], cut to cap - 1 bytes */
void copy_str(char *dst, size_t cap, const uint8_t *p, size_t len);

/* what the watch tests' callbacks count of their errors (embedded in each
 * test's own record) */
struct watch_errs {
	int calls, errs, last_err;
	int64_t err_rev; /* the revision the last error came with */
	bool got_err;
};
/* watch_errs_take - count one callback into e; true when it reports an
 * error (err < 0, recorded), which ends the callback */
bool watch_errs_take(struct watch_errs *e, int err, int64_t revision);

/* config_of - a client config of the n endpoints eps (borrowed), the rest
 * zero (the client's defaults) */
struct etcd_config config_of(const char *const *eps, size_t n);
/* client_new_of - etcd_client_new on l with cfg; a failure fails the test */
struct etcd_client *client_new_of(struct loop *l, const struct etcd_config *cfg);

/* cmp_key - a compare of key's target t (a number: n) by res, everything
 * else zero */
struct etcd_compare cmp_key(enum etcd_cmp_target t, enum etcd_cmp_result res, const char *key,
			    int64_t n);
/* op_key - an op of type t on key (borrowed), everything else zero */
struct etcd_op op_key(enum etcd_op_type t, const char *key);
/* sput - put key=value (lease optional); returns err; *ret gets the response */
int sput(struct loop *l, struct etcd_client *c, const char *key, const char *val, int64_t lease,
	 bool prev, struct etcd_response **ret);
/* sop - run one range, put or delete op; returns err; *ret gets the response */
int sop(struct loop *l, struct etcd_client *c, const struct etcd_op *op,
	struct etcd_response **ret);
/* sget - the kv of key (deep copy) or NULL; exits on error */
struct etcd_kv *sget(struct loop *l, struct etcd_client *c, const char *key);
/* client_for - a client of the n endpoints eps (user/pw may be NULL) */
struct etcd_client *client_for(struct loop *l, const char *const *eps, size_t n, const char *user,
			       const char *pw);
/* loop_for - let the loop run for ms (timers/fds are served meanwhile). Only
 * for waiting on wall-clock facts such as a token TTL. */
void loop_for(struct loop *l, int ms);
/* debug_from_env - LH_DEBUG=1 turns on the client's debug log */
void debug_from_env(void);

#endif
