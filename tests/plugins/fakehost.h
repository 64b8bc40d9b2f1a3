/* SPDX-License-Identifier: MIT */
/*
 * fakehost.h - a fake struct driver_host for plugin tests: fenced txns run
 * against an in-memory key-value store, answered from the loop (a 0 ms
 * timer), never from inside fenced_txn - like the real election over etcd.
 * Not leading: fenced_txn returns -ESTALE at once; a key outside the data
 * prefix: -EPERM at once; leadership lost between the call and its execution:
 * the fence fails (failure branch, succeeded = false).
 */
#ifndef LH_TEST_FAKEHOST_H
#define LH_TEST_FAKEHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election/election_driver.h"
#include "base/loop.h"

struct fakehost;

/* fakehost_new - data_prefix is copied. Returns 0 or -errno. */
int fakehost_new(struct loop *l, const char *data_prefix, struct fakehost **ret);
/* frees the store; pending txns are answered with -ECANCELED first */
void fakehost_free(struct fakehost *fh);
void fakehost_set_leading(struct fakehost *fh, bool leading);
/* the driver_host to give plugin_instance_new (borrowed, lives with fh) */
const struct driver_host *fakehost_driver_host(struct fakehost *fh);
/* a full key's value (NUL-terminated, borrowed until the next txn) or NULL */
const char *fakehost_get(const struct fakehost *fh, const char *key);
/* number of keys starting with prefix */
size_t fakehost_count(const struct fakehost *fh, const char *prefix);
/* fakehost_clear - drop every key (a long fuzzing run would grow the store
 * without bound); revisions keep counting */
void fakehost_clear(struct fakehost *fh);
/* the i-th key (sorted) starting with prefix, or NULL */
const char *fakehost_nth_key(const struct fakehost *fh, const char *prefix, size_t i);
/* number of fenced txns executed */
uint64_t fakehost_txns(const struct fakehost *fh);
/* when set, the next fenced_txn calls complete with this error instead */
void fakehost_fail_next(struct fakehost *fh, int err);
/* fakehost_hold - while held, fenced txns are accepted but not answered
 * (*queued, if not NULL, is set when one arrives); releasing answers them */
void fakehost_hold(struct fakehost *fh, bool hold, bool *queued);

#endif
