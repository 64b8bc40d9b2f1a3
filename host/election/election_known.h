/* SPDX-License-Identifier: MIT */
/*
 * election_known.h - whether etcd holds any trace of a plugin or of a node:
 * the check behind `leaseholdctl config set` and `roles set`, which refuse
 * (without --force) to write for a plugin that has never run or a node that
 * has never registered, so that a typo does not leave a record nobody reads.
 *
 * - A plugin has run when etcd holds a member record (P/N/members/...), a
 *   node state record (P/N/nodes/...) or a term (P/N/term-history/...) of it.
 * - A node has registered when etcd holds a member record or a node state
 *   record P/N/members/NODE or P/N/nodes/NODE of any plugin N (a node held
 *   back by a role writes a state record only).
 *
 * This needs nothing but an etcd client: the daemon and leaseholdctl in
 * observer mode ask the same question the same way. The answer is a read at
 * one revision; a record that appears after it is not seen (a guard against
 * mistakes, not a lock).
 *
 * Threading: the loop thread of the etcd client. Errors: 0 or -errno.
 */
#ifndef LH_ELECTION_KNOWN_H
#define LH_ELECTION_KNOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"

/* election_known_fn - err 0 with known set, or an etcd error (-errno; known
 * false). Runs exactly once, on the loop. */
typedef void (*election_known_fn)(void *ud, int err, bool known);

/* election_known_plugin - does etcd hold a member record, node state record
 * or term of plugin name below prefix (P, trailing '/' ignored)? timeout_ms
 * 0 = the client's default. Strings are copied. Returns 0 when started
 * (done runs later, never before this returns), or -errno (-EINVAL, -ENOMEM,
 * an etcd error) and done never runs. *ret_call (may be NULL): the etcd
 * call, for etcd_call_cancel (then done never runs; the handle is invalid
 * once done started). */
int election_known_plugin(struct etcd_client *etcd, const char *prefix, const char *name,
                          uint32_t timeout_ms, election_known_fn done, void *ud,
                          struct etcd_call **ret_call);

/* election_known_node - does etcd hold P/N/members/node or P/N/nodes/node
 * of any plugin N? Reads the keys (not the values) below P/. As
 * election_known_plugin. */
int election_known_node(struct etcd_client *etcd, const char *prefix, const char *node,
                        uint32_t timeout_ms, election_known_fn done, void *ud,
                        struct etcd_call **ret_call);

#endif
