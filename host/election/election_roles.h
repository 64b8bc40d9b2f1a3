/* SPDX-License-Identifier: MIT */
/*
 * election_roles.h - node roles from etcd (the roleserve seed): P/roles/<node-id>
 * holds a NodeRoles message; a plugin that declares a role runs its
 * membership and election only on nodes holding that role.
 *
 * Design notes
 * - One range + one watch over P/roles/ mirror every node's record (the
 *   records are few: one per node), so `leaseholdctl roles list` is answered
 *   from memory and this node's own roles are known the moment they change.
 * - Seeding: with --role flags, a txn "create_revision(P/roles/<self>) == 0 ->
 *   put" runs before the first read, so seeds apply only to a node that has
 *   no record yet; the first node of a cluster and every later one run the
 *   same code.
 * - A record that does not decode, names another node, or holds an invalid
 *   role name is an ERROR for that node (kept as text for the CLI), never a
 *   crash: this node's roles are then unknown and role-bound plugins are held
 *   back (fail safe), plugins without a role are unaffected.
 * - Everything runs on the loop thread.
 */
#ifndef LH_ROLES_H
#define LH_ROLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "base/loop.h"

#define ROLES_MAX 64         /* roles per node */
#define ROLES_NAME_MAX 63    /* [a-z0-9_-]{1,63}, like plugin names */

struct roles;

/* One node's record as mirrored (borrowed: valid until the next loop iteration). */
struct roles_entry {
	const char *node_id;
	const char *const *roles; /* NULL when error is set */
	size_t n_roles;
	const char *error; /* why the record is invalid, or NULL */
};

/* roles_new - mirror P/roles/ for node_id; seed (may be NULL, n_seed 0) is
 * written only if the node has no record. changed(ud) runs after every change
 * of the mirror. Strings are copied. Returns 0 or -errno. */
int roles_new(struct loop *l, struct etcd_client *etcd, const char *prefix, const char *node_id,
              const char *const *seed, size_t n_seed, void (*changed)(void *ud), void *ud,
              struct roles **ret);
int roles_start(struct roles *r);
void roles_free(struct roles *r);

/* roles_self_has - 1 if this node holds role, 0 if not, -EAGAIN while not yet
 * synced, -EBADMSG when this node's record is invalid (roles_self_error). */
int roles_self_has(const struct roles *r, const char *role);
const char *roles_self_error(const struct roles *r);

/* roles_entries - fill up to max entries (sorted by node id); returns the total. */
size_t roles_entries(struct roles *r, struct roles_entry *out, size_t max);

/* roles_set / roles_clear - write or delete a node's record. Role names are
 * validated (-EINVAL at once). Returns 0 when queued: done(ud, err) runs
 * exactly once on the loop; or -errno and done never runs. */
int roles_set(struct roles *r, const char *node_id, const char *const *roles, size_t n,
              void (*done)(void *ud, int err), void *ud);
int roles_clear(struct roles *r, const char *node_id, void (*done)(void *ud, int err), void *ud);

/* roles_name_valid - [a-z0-9_-]{1,63} */
bool roles_name_valid(const char *s);

/* roles_decode - hostile bytes of P/roles/<node_id> -> roles (malloc'd array
 * of malloc'd strings, free with roles_strv_free). Returns 0, or -EBADMSG
 * with one sentence in err. */
int roles_decode(const uint8_t *v, size_t len, const char *node_id, char ***ret_roles,
                 size_t *ret_n, char *err, size_t err_len);
void roles_strv_free(char **v, size_t n);

#endif
