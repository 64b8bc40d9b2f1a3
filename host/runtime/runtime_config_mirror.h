/* SPDX-License-Identifier: MIT */
/*
 * runtime_config_mirror.h - this node's copy of one plugin's cluster-wide
 * configuration, the JSON document at P/N/config (ABI 1.2).
 *
 * Design notes
 * - P/N/config sorts before the election's watched range [P/N/election/,
 *   P/N/status] ("config" < "data/" < "election/"), and widening that range
 *   down to it would take in P/N/data/, which must never fan out to every
 *   host. So the document gets its own narrow watch: one range read of the
 *   single key, then one watch of that key from the next revision (again
 *   after a compaction). Every node running the plugin keeps it, leading or
 *   not: configuration is state, not a leadership event.
 * - A value that is not a valid document (plugin_config_doc_check: written
 *   behind leaseholdctl's back) is an error kept for the CLI, logged once
 *   per revision; the last good document stays what the plugin sees. A
 *   deleted key is an absent document.
 * - Everything runs on the loop thread. changed(ud) runs after every change
 *   of what plugin_config_mirror_get returns.
 */
#ifndef LH_PLUGIN_CONFIG_MIRROR_H
#define LH_PLUGIN_CONFIG_MIRROR_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "base/loop.h"
#include "abi/abi_config_doc.h"

struct plugin_config_mirror;

/* What the mirror holds (borrowed: valid until the mirror changes, i.e. the
 * next loop iteration). */
struct plugin_config_view {
	bool read;	 /* the key was read from etcd at least once */
	const char *doc; /* the good document, or NULL (absent) */
	size_t len;
	int64_t rev;	   /* its mod_revision, 0 when absent */
	const char *error; /* etcd holds a bad document: why (with its revision), else NULL */
	int64_t error_rev; /* the bad document's mod_revision, 0 when none */
};

/* plugin_config_mirror_new - mirror P/N/config (prefix and name copied; etcd
 * and loop borrowed, they must outlive it). Nothing happens until _start.
 * Returns 0 and *ret (free with _free) or -errno. */
int plugin_config_mirror_new(struct loop *l, struct etcd_client *etcd, const char *prefix,
			     const char *name, void (*changed)(void *ud), void *ud,
			     struct plugin_config_mirror **ret);
void plugin_config_mirror_start(struct plugin_config_mirror *m);
/* plugin_config_mirror_free - cancel the read or watch in flight; accepts NULL */
void plugin_config_mirror_free(struct plugin_config_mirror *m);
void plugin_config_mirror_get(const struct plugin_config_mirror *m, struct plugin_config_view *ret);
/* plugin_config_key - "P/N/config" for prefix P (trailing '/' ignored) and
 * plugin N: malloc'd (the caller frees it), NULL when out of memory */
char *plugin_config_key(const char *prefix, const char *name);
/* plugin_config_mirror_key - "P/N/config" (borrowed, lives as long as m) */
const char *plugin_config_mirror_key(const struct plugin_config_mirror *m);

#endif
