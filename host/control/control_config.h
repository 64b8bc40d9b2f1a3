/* SPDX-License-Identifier: MIT */
/*
 * control_config.h - the keys of leasehold's configuration file, which both
 * programs read: the daemon takes its settings from it (daemon_options.c),
 * leaseholdctl the daemon's control socket (its `control` key, resolved by
 * control_url_resolve as the daemon resolves it). The file's reader is
 * base/config_file.h; this is what leasehold's file may say.
 *
 * Pure data and one read of a file; any thread. Errors: 0 or -errno.
 */
#ifndef LH_CONTROL_CONFIG_H
#define LH_CONTROL_CONFIG_H

#include <stddef.h>

#include "base/config_file.h"

/* The daemon's flags, the single source of the file's keys. X(ID, flag =
 * key name, shape of the key in the file, attributes):
 * - CONTROL_CONFIG_RUNTIME: a SIGHUP applies a changed value (see
 *   daemon_options_reload); every other change waits for a restart;
 * - CONTROL_CONFIG_NOARG: the flag takes no argument. */
#define CONTROL_CONFIG_RUNTIME 1u
#define CONTROL_CONFIG_NOARG 2u
#define CONTROL_CONFIG_KEYS(X)                                                            \
	X(ETCD, "etcd", CONFIG_KEY_JOINED, 0)                                             \
	X(CACERT, "etcd-cacert", CONFIG_KEY_SCALAR, 0)                                    \
	X(CERT, "etcd-cert", CONFIG_KEY_SCALAR, 0)                                        \
	X(KEY, "etcd-key", CONFIG_KEY_SCALAR, 0)                                          \
	X(USER, "etcd-user", CONFIG_KEY_SCALAR, 0)                                        \
	X(PREFIX, "prefix", CONFIG_KEY_SCALAR, 0)                                         \
	X(TTL, "ttl", CONFIG_KEY_SCALAR, 0)                                               \
	X(NODE_ID, "node-id", CONFIG_KEY_SCALAR, 0)                                       \
	X(PLUGIN_DIR, "plugin-dir", CONFIG_KEY_SCALAR, 0)                                 \
	X(RUNTIME_DIR, "runtime-dir", CONFIG_KEY_SCALAR, 0)                               \
	X(WAIT, "reconcile-wait", CONFIG_KEY_SCALAR, 0)                                   \
	X(INTERVAL, "reconcile-interval", CONFIG_KEY_SCALAR, 0)                           \
	X(SHUTDOWN, "shutdown-timeout", CONFIG_KEY_SCALAR, CONTROL_CONFIG_RUNTIME)        \
	X(EXIT_LINGER, "exit-linger", CONFIG_KEY_SCALAR, CONTROL_CONFIG_RUNTIME)          \
	X(CONTROL, "control", CONFIG_KEY_SCALAR, 0)                                       \
	X(HTTP, "http", CONFIG_KEY_SCALAR, 0)                                             \
	X(LOG_LEVEL, "log-level", CONFIG_KEY_SCALAR, CONTROL_CONFIG_RUNTIME)              \
	X(LOG_FORMAT, "log-format", CONFIG_KEY_SCALAR, 0)                                 \
	X(ROLE, "role", CONFIG_KEY_REPEATED, 0)                                           \
	X(ISOLATION, "isolation", CONFIG_KEY_SCALAR, CONTROL_CONFIG_RUNTIME)              \
	X(PLUGIN_ISOLATION, "plugin-isolation", CONFIG_KEY_RULES, CONTROL_CONFIG_RUNTIME) \
	X(CALLBACK_TIMEOUT, "callback-timeout", CONFIG_KEY_RULES, CONTROL_CONFIG_RUNTIME) \
	X(PRIORITY, "priority", CONFIG_KEY_RULES, 0)                                      \
	X(PLUGIN_READ, "plugin-read", CONFIG_KEY_RULES, 0)                                \
	X(PLUGIN_CONFIG, "plugin-config", CONFIG_KEY_RULES, 0)                            \
	X(WORKER, "worker", CONFIG_KEY_SCALAR, 0)                                         \
	X(WORKER_RESTART, "worker-restart", CONFIG_KEY_SCALAR, 0)                         \
	X(UNHEALTHY_AFTER, "unhealthy-after", CONFIG_KEY_SCALAR, 0)                       \
	X(UNHEALTHY_HOLD_DOWN, "unhealthy-hold-down", CONFIG_KEY_SCALAR, 0)               \
	X(CONFIG, "config", CONFIG_KEY_NONE, 0)                                           \
	X(CHECK_CONFIG, "check-config", CONFIG_KEY_NONE, CONTROL_CONFIG_NOARG)            \
	X(HELP, "help", CONFIG_KEY_NONE, CONTROL_CONFIG_NOARG)                            \
	X(VERSION, "version", CONFIG_KEY_NONE, CONTROL_CONFIG_NOARG)

/* control_config_schema - the file's keys (CONTROL_CONFIG_KEYS) and its
 * `plugins: NAME:` sections, for config_file_load */
const struct config_schema *control_config_schema(void);

/* control_config_file_control - the `control` key of the configuration file
 * at path (for leaseholdctl, which finds the daemon's socket the way the
 * daemon does: see control_url_resolve). Only the file's shape is checked.
 * Returns 0 with the value in buf, -ENOENT when the file does not set it,
 * or another -errno (the file cannot be read or is malformed) with one
 * line in err. */
int control_config_file_control(const char *path, char *buf, size_t len, char *err,
				size_t err_len);

#endif
