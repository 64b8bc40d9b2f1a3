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
 *   (3), the member release (distinct releases of one plugin), the release
 *   run (one per plugin), and the reason of a refused file, a configuration
 *   refusal or a term's end (fixed sets).
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
#include "runtime/runtime_instance.h"

enum { HM_OP_RANGE, HM_OP_PUT, HM_OP_DELETE, HM_OP_TXN, HM_OP_LEASE_GRANT, HM_OP_LEASE_KEEPALIVE,
       HM_OP_LEASE_REVOKE, HM_OP_LEASE_TIMETOLIVE, HM_OP_OTHER, HM_N_OPS };
enum { HM_ERR_TIMEOUT, HM_ERR_UNAVAILABLE, HM_ERR_BAD_RESPONSE, HM_ERR_NOT_FOUND,
       HM_ERR_COMPACTED, HM_ERR_AUTH, HM_ERR_INVALID, HM_ERR_OTHER, HM_N_ERRS };

/* why a plugin file was refused, by class (leasehold_plugin_files_refused*):
 * the file itself (type, owner, mode, size, unreadable), not a loadable
 * shared object of this machine, not a leasehold plugin or an ABI the host
 * does not offer, a descriptor that does not validate, a plugin name the
 * host does not take (reserved, changed under a running instance), init
 * failed, or the host could not start it (memory, worker, election) */
enum { HM_REFUSED_FILE, HM_REFUSED_NOT_LOADABLE, HM_REFUSED_ABI, HM_REFUSED_DESCRIPTOR,
       HM_REFUSED_NAME, HM_REFUSED_INIT, HM_REFUSED_START, HM_N_REFUSED };
/* host_metrics_refusal_of_loader - the class of loader_open's error err
 * (abi_loader.h) */
int host_metrics_refusal_of_loader(int err);

struct host_metrics {
	struct metrics_hist etcd_duration[HM_N_OPS];
	uint64_t etcd_errors[HM_N_ERRS];
	uint64_t keepalive_failures;
	uint64_t watch_resyncs;
	uint64_t files_refused[HM_N_REFUSED]; /* refusals of a plugin file, by class */
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
	/* configurations in error on this node, each document counted once:
	 * [0] etcd holds one that is not valid, [1] the plugin refused one */
	uint64_t config_refusals[2];
	bool config_in_error[2];
	int64_t config_error_rev[2]; /* the revision in error (0: unknown) */
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
/* plugin_metrics_retire - pi is being replaced (hot reload) or was a
 * standby that is dropped: keep its counters so the plugin's stay
 * monotonic. */
struct plugin_instance;
void plugin_metrics_retire(struct plugin_metrics *pm, const struct plugin_instance *pi);
/* plugin_metrics_observe - after any change of the election: counts terms
 * won and leader changes from the state seen. */
void plugin_metrics_observe(struct plugin_metrics *pm, const struct election_info *i);

/* plugin_metrics_observe_config - after any change: whether the plugin's
 * configuration is in error now, and at which revision (0: unknown), for
 * an invalid document in etcd and for a refusal by the plugin; counts each
 * document that enters the error once. */
void plugin_metrics_observe_config(struct plugin_metrics *pm, bool invalid, int64_t invalid_rev,
                                   bool refused, int64_t refused_rev);

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
	/* retired + running instance's + the standby's */
	uint64_t worker_restarts, callback_timeouts;
	struct metrics_hist bus_rtt;
	bool has_standby;   /* a standby is loaded beside what runs (the pin holds it back) */
	bool standby_ready; /* ... initialised, its worker up */
	bool config_error; /* daemon_config_error has a reason */
	bool has_release;  /* an instance runs: release is its plugin's */
	struct release release;
	/* terms this node led that ended, by Term.EndReason
	 * (election_terms_ended); all 0 when no election runs */
	uint64_t terms_ended[ELECTION_TERM_END_SLOTS];
	size_t rollout_blockers; /* election_rollout_blockers */
	uint64_t queued; /* events in the host's queue to the plugin (has_instance_stats) */
	bool keyed; /* a keyed plugin (ABI 1.3): keys is its work queue */
	struct plugin_key_stats keys;
};

/* What the daemon knows of itself at render time. */
struct host_metrics_view {
	const struct host_metrics *hm;
	bool session_up;
	double lease_remaining_s; /* until the local lease deadline; 0 when down */
	double lease_ttl_s;       /* the TTL etcd granted; 0 when down */
	bool plugin_dir_ok;       /* --plugin-dir names a directory now */
	/* plugin files refused now (their last probe or init), by class */
	uint64_t files_refused_now[HM_N_REFUSED];
};

/* daemon_metrics_render - the whole exposition into t (metrics.h). */
void daemon_metrics_render(struct metrics_text *t, const struct host_metrics_view *hv,
                           const struct plugin_metrics_view *pv, size_t n);

/* daemon_metrics_render_alerting - the families the alerting rules
 * (contrib/prometheus/) read beside the core ones: releases run, refused
 * plugin files, configuration refusals, ended terms, rollout blockers
 * (daemon_metrics_alerting.c). Part of daemon_metrics_render. */
void daemon_metrics_render_alerting(struct metrics_text *t, const struct host_metrics_view *hv,
                                    const struct plugin_metrics_view *pv, size_t n);
/* daemon_metrics_render_process - the standard process_* families of the
 * Prometheus client libraries, read from /proc/self (procstat.h); a value
 * the kernel does not give is left out. Part of daemon_metrics_render. */
void daemon_metrics_render_process(struct metrics_text *t);

#endif
