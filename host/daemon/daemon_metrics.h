/* SPDX-License-Identifier: MIT */
/*
 * daemon_metrics.h - the leasehold_ metric families of one host: what the
 * daemon counts (etcd requests and errors, watch resyncs; per plugin terms,
 * leader changes, reconciles, the first fenced write of a term) and the
 * rendering of everything into one Prometheus text exposition.
 *
 * Design notes
 * - Loop thread only (metrics.h): counters are plain integers.
 * - The per-plugin numbers that neither the election nor the plugin instance
 *   keeps are measured at the seam between them: the daemon hands the
 *   election a metered driver (plugin_metrics_driver_ops over a
 *   plugin_metrics_driver that forwards to the plugin instance) and hands the
 *   plugin instance a metered driver_host (plugin_metrics_host), which
 *   forwards fenced txns to the election's. Both count into the entry's
 *   struct plugin_metrics, which lives as long as the entry (its election),
 *   so they are monotonic across hot reloads.
 * - Cardinality is bounded: labels are the plugin name, the etcd operation
 *   (a fixed set), the error kind (a fixed set), the result of a reconcile
 *   (3) and the member release (distinct releases of one plugin).
 */
#ifndef LH_DAEMON_METRICS_H
#define LH_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election/election_driver.h"
#include "election/election.h"
#include "etcd/etcd.h"
#include "base/metrics.h"

enum { HM_OP_RANGE, HM_OP_PUT, HM_OP_DELETE, HM_OP_TXN, HM_OP_LEASE_GRANT, HM_OP_LEASE_KEEPALIVE,
       HM_OP_LEASE_REVOKE, HM_OP_LEASE_TIMETOLIVE, HM_OP_OTHER, HM_N_OPS };
enum { HM_ERR_TIMEOUT, HM_ERR_UNAVAILABLE, HM_ERR_BAD_RESPONSE, HM_ERR_NOT_FOUND,
       HM_ERR_COMPACTED, HM_ERR_AUTH, HM_ERR_INVALID, HM_ERR_OTHER, HM_N_ERRS };

struct host_metrics {
	struct metrics_hist etcd_duration[HM_N_OPS];
	uint64_t etcd_errors[HM_N_ERRS];
	uint64_t keepalive_failures;
	uint64_t watch_resyncs;
};

/* host_metrics_init - zero counters, set up the histograms. */
void host_metrics_init(struct host_metrics *m);
/* the etcd client's observer (etcd_client_set_observer) counting into m */
extern const struct etcd_observer_ops host_metrics_etcd_observer;

struct plugin_metrics {
	uint64_t terms_won;
	uint64_t leader_changes;
	char last_leader[128]; /* the last leader seen ("" none yet) */
	bool leading;
	uint64_t term;          /* bumped at every term won */
	uint64_t elected_at;    /* loop_now() when this term began */
	bool first_write_pending;
	struct metrics_hist first_write;
	struct metrics_hist reconcile_duration;
	uint64_t reconciles[3]; /* ok, failed, cancelled */
	int64_t last_success_unix_ns; /* 0 = never */
	struct driver_host host;      /* what the plugin instance is given */
	const struct driver_host *inner_host; /* the election's */
	struct plugin_metrics_driver *drivers; /* every driver wrapped (freed with pm) */
	struct plugin_metrics_pending *pending; /* completions in flight (daemon_metrics.c) */
	/* counters of instances replaced by a hot reload */
	uint64_t retired_worker_restarts, retired_callback_timeouts;
	struct metrics_hist retired_bus_rtt; /* replaced instances' bus round trips */
};

/* plugin_metrics_init - zero pm, set up histograms. */
void plugin_metrics_init(struct plugin_metrics *pm);
/* plugin_metrics_fini - free the driver wrappers. Accepts a zeroed pm. */
void plugin_metrics_fini(struct plugin_metrics *pm);
/* plugin_metrics_host - the driver_host to give a plugin instance: forwards
 * to inner (borrowed; must outlive pm) and times the first fenced write of
 * each term. Valid while pm lives. */
const struct driver_host *plugin_metrics_host(struct plugin_metrics *pm,
                                              const struct driver_host *inner);
/* plugin_metrics_retire - pi is being replaced (hot reload): keep its
 * counters so the plugin's stay monotonic. */
struct plugin_instance;
void plugin_metrics_retire(struct plugin_metrics *pm, const struct plugin_instance *pi);
/* plugin_metrics_observe - after any change of the election: counts terms
 * won and leader changes from the state seen. */
void plugin_metrics_observe(struct plugin_metrics *pm, const struct election_info *i);

/* plugin_metrics_driver - a metered driver over (ops, drv); kept by pm until
 * plugin_metrics_fini. Returns NULL when out of memory. Give the election
 * plugin_metrics_driver_ops with the returned pointer as drv. */
struct plugin_metrics_driver *plugin_metrics_driver(struct plugin_metrics *pm,
                                                    const struct driver_ops *ops, void *drv);
extern const struct driver_ops plugin_metrics_driver_ops;

/* What the daemon knows of one plugin at render time (all borrowed). */
struct plugin_metrics_view {
	const char *name;
	const struct election_info *info; /* NULL when no election runs */
	const struct plugin_metrics *pm;
	const struct election_member *members; /* n_members of them */
	size_t n_members;
	bool has_instance_stats;
	uint64_t worker_restarts, callback_timeouts; /* retired + running instance's */
	struct metrics_hist bus_rtt;                 /* retired + running instance's */
	bool config_error; /* daemon_config_error has a reason */
};

/* What the daemon knows of itself at render time. */
struct host_metrics_view {
	const struct host_metrics *hm;
	bool session_up;
	double lease_remaining_s; /* until the local lease deadline; 0 when down */
	bool plugin_dir_ok;       /* --plugin-dir names a directory now */
};

/* daemon_metrics_render - the whole exposition into t (metrics.h). */
void daemon_metrics_render(struct metrics_text *t, const struct host_metrics_view *hv,
                           const struct plugin_metrics_view *pv, size_t n);

#endif
