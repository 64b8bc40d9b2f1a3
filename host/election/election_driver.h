/* SPDX-License-Identifier: MIT */
/*
 * election_driver.h - the seam between the election protocol (election.c) and what
 * it drives: a loaded plugin instance (runtime_instance.c, over the nng bus)
 * or, in tests, an in-process test reconciler.
 *
 * Design notes
 * - All driver_ops are called from the host loop thread and must not block:
 *   they queue work and return. Completions (reconcile done, drain done) are
 *   reported back on the loop thread by calling the given function.
 * - Linkerd semantics are the driver's to uphold: events reach the plugin only
 *   between elected() and deposed(); elected() delivers on_elected(token)
 *   followed at once by a replay on_releases_changed(releases); after
 *   deposed() nothing more is delivered (events still queued are dropped,
 *   except that a callback already running finishes; plugin_instance hands
 *   the start of a term over in one go, and the worker skips what of it a
 *   waiting on_deposed made moot).
 * - The plugin's writes go the other way: the driver calls the fenced txn
 *   function it was given (struct driver_host), which the election implements
 *   by adding the leadership compare and refusing keys outside P/N/data/.
 */
#ifndef LH_DRIVER_H
#define LH_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "base/release.h"

/* completion of a reconcile: err 0 = success; msg (borrowed, may be NULL) is
 * the plugin's error text */
typedef void (*driver_reconcile_done_fn)(void *done_ud, int err, const char *msg);
typedef void (*driver_drain_done_fn)(void *done_ud);

struct driver_ops {
	/* leadership begins: on_elected(fencing_token), then on_releases_changed(r) */
	void (*elected)(void *drv, int64_t fencing_token, const struct releases *r);
	/* only while leading */
	void (*releases_changed)(void *drv, const struct releases *r);
	/* queue one reconcile; done(done_ud, err, msg) runs on the loop thread when
	 * it finished, or with err -ECANCELED if it was dropped by deposed() before
	 * it started. Exactly once. */
	void (*reconcile)(void *drv, driver_reconcile_done_fn done, void *done_ud);
	/* leadership ended */
	void (*deposed)(void *drv);
	/* done(done_ud) once every queued event was delivered and no callback runs
	 * (immediately, i.e. from the next loop iteration, when idle). Exactly once.
	 * The election drains only to end a term: from the drain on, no more
	 * watch batches of this term go to the plugin (ABI 1.2). */
	void (*drain)(void *drv, driver_drain_done_fn done, void *done_ud);
};

/* What the election offers a driver for the plugin's etcd writes. */
struct driver_host {
	void *ctx;
	/* fenced_txn - run a txn only while this node leads: the election adds
	 * `create_revision(election key) == fencing token` to the compares. Every
	 * key (ops and compares) must start with data_prefix (full etcd keys);
	 * otherwise -EPERM at once. Not leading: -ESTALE at once. Returns 0 when
	 * queued (cb runs exactly once later; resp->succeeded false when the
	 * fence or the plugin's own compares failed - the caller cannot tell the
	 * two apart from the response alone and asks fence_ok()), or -errno. */
	int (*fenced_txn)(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
	                  const struct etcd_op *success, size_t n_success,
	                  const struct etcd_op *failure, size_t n_failure, etcd_cb cb, void *ud);
	/* the full etcd prefix the plugin may write under, "P/N/data/" (borrowed,
	 * valid while the election lives) */
	const char *data_prefix;
	/* ABI 1.2 (may be NULL/unset: the plugin's watches, range reads and
	 * reconcile requests are then refused) */
	/* the client for the plugin's unfenced reads and leader-gated watches
	 * (borrowed, valid while the election lives) */
	struct etcd_client *etcd;
	/* request_reconcile - the plugin asks for one more reconcile of this term:
	 * coalesced with any queued one and with a pending `leaseholdctl
	 * reconcile` (at most one follows the running one). Ignored when not
	 * leading. Never blocks. */
	void (*request_reconcile)(void *ctx);
	/* paused - the plugin is paused cluster-wide (leaseholdctl pause): no
	 * watch batch goes to the plugin meanwhile (its watches keep reading,
	 * and a long pause ends in a resync, never a loss); the resume asks
	 * for a full reconcile, after which delivery goes on. NULL = never. */
	bool (*paused)(void *ctx);
};

#endif
