/* SPDX-License-Identifier: MIT */
/*
 * ctl_main_internal.h - what the parts of leaseholdctl's command line share:
 * the parsed options (ctl_args.c), the command table with its help
 * (ctl_commands.c), the daemon verbs (ctl_verbs.c) and main (ctl_main.c).
 * Single-threaded: the CLI runs one command and exits.
 */
#ifndef LH_CTL_MAIN_INTERNAL_H
#define LH_CTL_MAIN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "control/control.h"
#include "control/control_codec.h"
#include "ctl/ctl.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_output.h"

#define CTL_TIMEOUT_MS 10000
/* roles set/clear: the daemon answers once etcd has (5 s deadline by default) */
#define CTL_WRITE_TIMEOUT_MS 30000
#define CTL_WAIT_DEFAULT_S 60.0
#define CTL_RECONCILE_DEFAULT_S 30.0
#define CTL_WAIT_MARGIN_MS 5000
#define CTL_WAIT_MAX_S 4000000.0 /* keeps timeout_ms (uint32) + margin in range */


/* roles set NODE ROLE...: the subcommand, the node and the roles, plus one
 * more so that "too many roles" is reported as such */
#define MAX_ARGS (CONTROL_ROLES_MAX + 3)

struct opts {
	const char *control;
	const char *config; /* --config FILE: the daemon's configuration file */
	const char *cmd;
	const char *args[MAX_ARGS];
	size_t n_args;
	bool json, help, version, has_timeout, yes, force;
	enum ctl_format format; /* -o: json is set for json and yaml */
	bool no_headers, watch;
	const char *timeout;
	const char *to; /* switchover --to */
	const char *node; /* shadow --node */
	/* observer mode (ctl_observer.h): answered from etcd when etcd is set */
	struct ctl_etcd_opts etcd;
	const char *from_revision, *to_revision; /* watch */
};

struct command {
	const char *name;
	size_t min_args, max_args;
	bool json, timeout;
	bool confirm; /* changes the cluster in a way that needs --yes */
	const char *synopsis;
	const char *summary;
	const char *help;
};

/* ---- ctl_commands.c: the command table and its help ---- */

/* the commands, their synopsis and help text (n_commands rows) */
extern const struct command ctl_commands[];
extern const size_t ctl_n_commands;
/* ctl_commands_find - the command called name ("roles set": two words), or NULL */
const struct command *ctl_commands_find(const char *name);
void ctl_commands_print_help(FILE *out);
/* ctl_commands_suggest - the command (group NULL: a first word) or the
 * subcommand of group ("roles") nearest word, for "did you mean"; NULL when
 * none is near. Borrowed: valid until the next call. */
const char *ctl_commands_suggest(const char *word, const char *group);
void ctl_commands_print_command_help(FILE *out, const struct command *cmd);
/* ctl_commands_usage - cmd's synopsis with the output options it takes
 * (-o FORMATS, --no-headers, -w: from ctl_main_lists/ctl_main_watches, so
 * the usage says what ctl_main's checks accept), into buf; returns buf */
const char *ctl_commands_usage(const struct command *cmd, char *buf, size_t len);
/* ctl_main_lists - cmd prints a table (-o wide and --no-headers apply) */
bool ctl_main_lists(const struct command *cmd);
/* ctl_main_watches - cmd redraws on change with -w */
bool ctl_main_watches(const struct command *cmd);
/* a command group ("roles", "config"): its commands */
void ctl_commands_print_group_help(FILE *out, const char *group);
void ctl_commands_print_roles_help(FILE *out);
/* ctl_usage_error - print "leaseholdctl: MESSAGE" and cmd's usage (NULL:
 * the general one) to stderr; returns EXIT_ERR */
int ctl_usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- ctl_args.c: the command line ---- */

/* ctl_args_parse - fill o from argv (borrowed: o points into it); -1 (and
 * printed) on a usage error */
int ctl_args_parse(int argc, char **argv, struct opts *o);
/* ctl_args_parse_timeout - a --timeout DUR (ctl_timeout.h) -> ms. 0 or -EINVAL. */
int ctl_args_parse_timeout(const char *s, uint32_t *ret_ms);
/* ctl_args_check_roles - roles set/clear: NODE [ROLE...] as the daemon will
 * check them. EXIT_OK or EXIT_ERR (printed). */
int ctl_args_check_roles(const struct command *cmd, const char *const *args, size_t n);

/* ctl_args_each_option - fn(name, takes a value, arg) for every option
 * leaseholdctl knows (for the completion scripts) */
void ctl_args_each_option(void (*fn)(const char *name, bool value, void *arg), void *arg);

/* ---- ctl_verbs.c: the verbs the daemon (or observer mode) answers ---- */

/* ctl_verbs_run - run command cmd (o's arguments, name the first one or
 * NULL, roles: a `roles ...` command) against the daemon at url (observer
 * mode: etcd); prints the answer and returns the exit code */
int ctl_verbs_run(const struct opts *o, const struct command *cmd, const char *name, bool roles,
		  const char *url);
/* ctl_verbs_watch - `watch [NAME]`: needs etcd (observer mode); the exit code */
int ctl_verbs_watch(const struct opts *o, const struct command *cmd, const char *name);

/* ---- ctl_completion.c ---- */

/* ctl_completion_main - `completion SHELL`: the script for bash or zsh to
 * stdout; the exit code */
int ctl_completion_main(const char *shell);

#endif
