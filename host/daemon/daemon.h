/* SPDX-License-Identifier: MIT */
/*
 * daemon.h - the leasehold host: one etcd session, the plugin directory, one
 * election + plugin instance per plugin, the control socket, signals.
 */
#ifndef LH_DAEMON_H
#define LH_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "base/log.h"

struct callback_timeout_rule;
struct priority_rule;

struct daemon_config {
	const char *const *endpoints;
	size_t n_endpoints;
	const char *cacert, *cert, *key, *user, *password;
	const char *node_id;
	const char *prefix;
	const char *plugin_dir;
	const char *runtime_dir; /* private plugin copies live in <runtime_dir>/plugins.<pid> */
	const char *control_url; /* NULL = default; "" = no control socket */
	const char *http_addr;   /* --http ADDR:PORT; NULL = HTTP_DEFAULT_ADDR; "" = none */
	int64_t ttl_s;
	uint64_t reconcile_wait_ns;
	uint64_t reconcile_interval_ns;
	uint64_t shutdown_timeout_ns; /* give up draining after this (0 = 30 s) */
	uint64_t exit_linger_ns;      /* idle after the revocation before tearing down (0 = none) */
	const char *const *roles_seed; /* --role: written only if the node has no record */
	size_t n_roles_seed;
	uint32_t isolation;           /* PLUGIN_ISOLATION_THREAD / _PROCESS */
	/* per-plugin overrides of isolation (--plugin-isolation NAME=MODE) */
	const char *const *iso_names;
	const uint32_t *iso_modes;
	size_t n_iso;
	/* --callback-timeout rules, applied over callback_timeout_defaults_ms
	 * (runtime_callback_timeout.h) */
	const struct callback_timeout_rule *cb_timeouts;
	size_t n_cb_timeouts;
	/* --priority rules (election_priority.h), borrowed */
	const struct priority_rule *priorities;
	size_t n_priorities;
	const char *worker_path;      /* process mode: leasehold-worker; NULL = default */
	/* process mode: --worker-restart MIN[,MAX], the backoff of a worker's
	 * restart after a failure (0 = the instance's default, 100 ms / 30 s) */
	uint32_t restart_min_ms, restart_max_ms;
	/* --unhealthy-after N (0 = off) and --unhealthy-hold-down DUR: a node
	 * whose plugin fails N reconciles in a row withdraws for the hold-down
	 * (election_health.h) */
	uint32_t unhealthy_after;
	uint64_t unhealthy_hold_down_ns;
	/* --plugin-read NAME=PREFIX: plugin read_names[i] may watch and range
	 * the full etcd keys starting with read_prefixes[i] */
	const char *const *read_names;
	const char *const *read_prefixes;
	size_t n_read;
	/* SIGHUP, before the plugin directory is rescanned: re-read the
	 * configuration (NULL = nothing to re-read). Loop thread; it may change
	 * the runtime settings of this struct (isolation, iso_*, cb_timeouts,
	 * shutdown_timeout_ns, exit_linger_ns), which the daemon reads when it
	 * next uses them; returns 0 or -errno (refused, nothing changed). */
	int (*reload)(void *ud);
	void *reload_ud;
	/* --plugin-config NAME=FILE: node-local configuration files, read when an
	 * instance of plugin NAME starts */
	const char *const *plugin_config_names;
	const char *const *plugin_config_files;
	size_t n_plugin_configs;
};

/* daemon_run - run until SIGTERM/SIGINT (graceful: drain, resign, revoke) and
 * return the process exit code (0 on a clean shutdown). Errors at start-up are
 * logged and returned as exit code 1. */
int daemon_run(const struct daemon_config *cfg);

#endif
