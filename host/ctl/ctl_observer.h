/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer.h - leaseholdctl's observer mode: the read commands and the
 * cluster-wide verbs answered straight from etcd (`leaseholdctl --etcd URL
 * ...`), with no daemon and no plugin on this machine.
 *
 * Design notes
 * - The same etcd client as the daemon (etcd.h) on its own event loop
 *   (loop.h): TLS, client certificates, several endpoints and user/password
 *   authentication work as in the daemon.
 * - The observer answers a control Request with the Response the daemon
 *   would send (ctl_cluster_view.h decodes the records with the daemon's own
 *   decoders, control_answer_pack packs them as the control server does),
 *   so leaseholdctl prints both with the same printers (ctl_views.h).
 * - Reads happen at one etcd revision: first the keys under the prefix
 *   (plugin discovery), then each plugin's watched range at that revision.
 * - Verbs are the daemon's (election_pause_at, election_request_reconcile_at,
 *   election_history_at); the records name the requester as
 *   "leaseholdctl@<host name>". A reconcile request is then followed by a
 *   watch of P/N/reconcile-served from the request's revision on.
 * - Daemon-only commands (reload, wait-ready, leave, roles set/clear,
 *   members forget, version's daemon part) are refused with a sentence
 *   saying so (CODE_UNKNOWN_KIND).
 *
 * Loop thread only (leaseholdctl is single-threaded). Errors are printed
 * here; functions return leaseholdctl exit codes (ctl.h).
 */
#ifndef LH_CTL_OBSERVER_H
#define LH_CTL_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl/ctl.h"
#include "etcd/etcd.h"
#include "base/loop.h"

struct ctl_etcd_opts {
	const char *endpoints; /* "URL[,URL...]", http:// or https:// */
	const char *cacert, *cert, *key; /* PEM files, or NULL */
	const char *user;   /* etcd user, or NULL; password: see ctl_observer_open */
	const char *prefix; /* key prefix, NULL = "/leasehold" */
};

struct ctl_observer;

/* ctl_observer_open - a client for o (nothing is sent yet). With a user,
 * the password comes from $LEASEHOLD_ETCD_PASSWORD, else it is asked on
 * the terminal (/dev/tty, not echoed); without either it is an error.
 * Returns EXIT_OK with *ret set (free with ctl_observer_close), or an exit
 * code after printing why. */
int ctl_observer_open(const struct ctl_etcd_opts *o, struct ctl_observer **ret);
void ctl_observer_close(struct ctl_observer *ob);

/* ctl_observer_call - answer req (borrowed) from etcd within timeout_ms:
 * EXIT_OK with *ret_resp (free with
 * leasehold__control__response__free_unpacked), or an exit code after
 * printing why (EXIT_TIMEOUT: etcd did not answer in time). */
int ctl_observer_call(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                      int64_t timeout_ms, Response **ret_resp);

/* ctl_observer_watch - `watch [NAME]`: print every change of the cluster
 * view (plugin name, or every plugin for NULL) as one line, or one JSON
 * object per line (json), in etcd revision order, from the revision after
 * from_revision (0 = now) until interrupted; or until every change up to
 * to_revision (> 0) was printed, or timeout_ms (> 0) passed: then EXIT_OK.
 * ctl_watch.c. */
int ctl_observer_watch(struct ctl_observer *ob, const char *name, bool json,
                       int64_t from_revision, int64_t to_revision, int64_t timeout_ms);

/* ---- for ctl_watch.c ---- */

/* ctl_observer_loop / _etcd / _prefix - borrowed, valid until close */
struct loop *ctl_observer_loop(struct ctl_observer *ob);
struct etcd_client *ctl_observer_etcd(struct ctl_observer *ob);
const char *ctl_observer_prefix(const struct ctl_observer *ob);

/* a range read's result: copies of the kvs (etcd_kv_dup) and the revision */
struct ctl_kvs {
	struct etcd_kv **kvs;
	size_t n;
	int64_t revision;
};
void ctl_kvs_free(struct ctl_kvs *k);

/* ctl_observer_range - read [key, end) (end NULL: the prefix key) at
 * revision (0 = now), blocking on the loop until deadline (loop_now()
 * ns). 0 with *ret filled, or -errno (-ETIMEDOUT). */
int ctl_observer_range(struct ctl_observer *ob, const char *key, const uint8_t *end,
                       size_t end_len, int64_t revision, bool keys_only, uint64_t deadline,
                       struct ctl_kvs *ret);

/* ctl_observer_plugins - the plugin names under the prefix at revision
 * (those with a member or node state record), sorted; into *ret_names
 * (malloc'd array of malloc'd names; free with ctl_names_free) */
int ctl_observer_plugins(struct ctl_observer *ob, int64_t revision, uint64_t deadline,
                         char ***ret_names, size_t *ret_n, int64_t *ret_revision);
void ctl_names_free(char **names, size_t n);

#endif
