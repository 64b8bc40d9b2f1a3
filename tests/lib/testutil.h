/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - blocking helpers for tests on top of the async etcd client:
 * each call runs the loop until its callback fired or a deadline passed.
 */
#ifndef LH_TESTUTIL_H
#define LH_TESTUTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "base/loop.h"
#include "base/release.h"

struct tu {
	struct loop *loop;
	struct etcd_client *etcd;
};

/* tu_init - a loop and a client for `urls` (comma separated). Exits on error. */
void tu_init(struct tu *t, const char *urls);
/* tu_client - another client on the same loop (caller frees) */
struct etcd_client *tu_client(struct tu *t, const char *urls);
void tu_fini(struct tu *t);

/* put/del/get; return the header revision; exit(1) on error */
int64_t tu_put(struct tu *t, const char *key, const void *v, size_t len);
/* tu_put_lease - tu_put bound to lease (0 = none) */
int64_t tu_put_lease(struct tu *t, const char *key, const void *v, size_t len, int64_t lease);
int64_t tu_del(struct tu *t, const char *key);
/* tu_del_prefix - delete every key under prefix */
int64_t tu_del_prefix(struct tu *t, const char *prefix);
/* tu_revoke - revoke a lease (absent is fine) */
void tu_revoke(struct tu *t, int64_t lease);
/* tu_get - value (malloc'd, NUL-terminated) or NULL when absent; *ret_len set */
uint8_t *tu_get(struct tu *t, const char *key, size_t *ret_len);
/* tu_revision - etcd's current revision (one read: it moves nothing) */
int64_t tu_revision(struct tu *t);

/* tu_list - every kv under prefix (deep copies; free with tu_list_free) */
size_t tu_list(struct tu *t, const char *prefix, struct etcd_kv ***ret);
void tu_list_free(struct etcd_kv **kvs, size_t n);
/* tu_get_kv - the kv of exactly key (its lease, revisions), or NULL when
 * there is none; free with etcd_kv_free */
struct etcd_kv *tu_get_kv(struct tu *t, const char *key);

/* tu_keys_of_lease - how many keys under prefix are bound to lease */
size_t tu_keys_of_lease(struct tu *t, const char *prefix, int64_t lease);
/* tu_election_lease - the lease of node's election key of plugin under
 * prefix (0: node does not campaign) */
int64_t tu_election_lease(struct tu *t, const char *prefix, const char *plugin, const char *node);
/* tu_term_recorded - the term of the lowest election key (the leader's
 * fencing token) has its term-history record: a leader writes it once the
 * term's first reconcile returned, so a test that reads the history right
 * after an election waits for this first */
bool tu_term_recorded(struct tu *t, const char *prefix, const char *plugin);

/* records */
int64_t tu_put_member(struct tu *t, const char *prefix, const char *plugin, const char *node,
                      struct release r);
int64_t tu_put_status(struct tu *t, const char *prefix, const char *plugin, int state,
                      struct release version, struct release mcr);
/* tu_status_encode - a ReconcilerStatus record (state, version, minimum
 * compatible release) packed into buf (TU_STATUS_MAX bytes are enough);
 * returns its length */
#define TU_STATUS_MAX 64
size_t tu_status_encode(int state, struct release version, struct release mcr, uint8_t *buf);
/* tu_get_status - false when absent/invalid */
bool tu_get_status(struct tu *t, const char *prefix, const char *plugin, int *ret_state,
                   struct release *ret_version, struct release *ret_mcr);

/* tu_wait - run the loop until pred(arg) is true; exit(1) with `what` after
 * timeout_ms. */
void tu_wait(struct tu *t, bool (*pred)(void *), void *arg, int timeout_ms, const char *what);

/* tu_check_value - key holds exactly the text want now (else the test fails) */
void tu_check_value(struct tu *t, const char *key, const char *want);
/* tu_has_key - key exists in etcd now */
bool tu_has_key(struct tu *t, const char *key);
/* tu_wait_key - tu_wait until key exists (present) or is gone (!present) */
void tu_wait_key(struct tu *t, const char *key, bool present, int timeout_ms, const char *what);
/* tu_wait_value - tu_wait until key holds exactly the text value (NULL:
 * until key is absent) */
void tu_wait_value(struct tu *t, const char *key, const char *value, int timeout_ms,
		   const char *what);

/* tu_unix_connect - a connected AF_UNIX stream socket to path, or -errno
 * (the control socket tests' raw client). */
int tu_unix_connect(const char *path);

#define REL(a, b, c) ((struct release){(a), (b), (c)})

#endif
