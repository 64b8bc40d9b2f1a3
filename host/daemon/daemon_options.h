/* SPDX-License-Identifier: MIT */
/*
 * daemon_options.h - the daemon's settings from its flags and its
 * configuration file (config_file.h): one table of flags that is also the
 * file's schema, the checks of every value, the precedence, and what a
 * SIGHUP may change.
 *
 * Design notes
 * - One table (daemon_options.c: `flags`) lists every flag with the YAML
 *   shape of its key (the key is the long flag's name) and whether a SIGHUP
 *   applies it; getopt's table is built from it, so a new flag is a key of
 *   the file without another edit. Per-plugin keys (`plugins: NAME: KEY`)
 *   are rows of `plugin_keys`, each naming the flag it becomes.
 * - Precedence: a flag, then the environment where a variable exists
 *   (LEASEHOLD_CONTROL, LEASEHOLD_LOG_FORMAT), then the file, then the
 *   built-in default. For a list flag (--role) the command line replaces
 *   the file's list; rules (--callback-timeout, --plugin-isolation) add to
 *   the file's, and later rules win, so a flag overrides the file's rule
 *   for the same plugin and kind.
 * - The file is read with the same checks as the flags; an error names
 *   FILE:LINE. A reload (SIGHUP) builds a complete new set from the same
 *   flags and the re-read file, and only then applies it: all or nothing.
 * - Threading: everything here runs on the daemon's loop thread (or before
 *   it exists); getopt's globals are used only by daemon_options_parse.
 */
#ifndef LH_DAEMON_OPTIONS_H
#define LH_DAEMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/config_file.h"
#include "daemon/daemon.h"

struct daemon_options;

/* what daemon_options_parse found besides settings */
enum daemon_options_action {
	DAEMON_OPTIONS_RUN,
	DAEMON_OPTIONS_HELP,
	DAEMON_OPTIONS_VERSION,
	DAEMON_OPTIONS_CHECK, /* --check-config */
};

/* daemon_options_parse - parse argv (getopt_long), read the configuration
 * file (--config FILE, else default_config when it exists) and check every
 * value. Returns 0 with *ret (caller frees with daemon_options_free; argv
 * must outlive it) and *ret_action, or -EINVAL with one line in err: "FILE:
 * LINE: ..." for the file, "leasehold: ..." for a flag. */
int daemon_options_parse(int argc, char **argv, const char *default_config,
			 struct daemon_options **ret, enum daemon_options_action *ret_action,
			 char *err, size_t err_len);

/* daemon_options_config - the daemon's configuration (owned by o; valid
 * until daemon_options_free). Its reload hook re-reads the file on SIGHUP
 * (daemon_options_reload). */
const struct daemon_config *daemon_options_config(const struct daemon_options *o);

/* daemon_options_apply_logging - set the log level and format the settings
 * ask for (and the format for the workers this process starts) */
void daemon_options_apply_logging(const struct daemon_options *o);

/* daemon_options_file - the configuration file read ("" when none) */
const char *daemon_options_file(const struct daemon_options *o);

/* daemon_options_print - the effective settings, as a configuration file
 * would hold them (a comment line names the file): every key given in the
 * file or by a flag, in table order. Never prints a secret (the etcd
 * password comes only from the environment). */
void daemon_options_print(const struct daemon_options *o, FILE *f);

/* daemon_options_reload - re-read the file and the same flags into a new
 * set; if it is valid, apply what may change at runtime to o (and to the
 * daemon, through o's daemon_config), log "config: KEY changed from A to
 * B", and log each other change as needing a restart (o keeps it). An
 * invalid file is refused as a whole (FILE:LINE logged, nothing changed).
 * Returns 0 or the error. */
int daemon_options_reload(struct daemon_options *o);

/* daemon_options_free - NULL is fine */
void daemon_options_free(struct daemon_options *o);

#endif
