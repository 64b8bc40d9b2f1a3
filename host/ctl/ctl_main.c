/* SPDX-License-Identifier: MIT */
/*
 * ctl_main.c - the operator's CLI: talks to the local leasehold daemon
 * over its control socket (control_client.h, proto/control.proto).
 *
 * Design notes
 * - One request, one reply, on a fresh connection. The whole call has a
 *   deadline: CTL_TIMEOUT_MS normally, the wait-ready timeout +
 *   CTL_WAIT_MARGIN_MS for wait-ready, whose answer the daemon holds back
 *   until the plugin is ready or the timeout passes. The request is never
 *   re-sent.
 * - Everything printed from the daemon goes through ctl_clean(): control bytes
 *   never reach the terminal. --json output is built with json-c.
 * - Exit codes: 0 ok, 1 the operation ran and did not succeed (wait-ready
 *   timed out, reload failed, a roles, pause or resume write failed in etcd,
 *   a requested reconcile failed or was not served in time), 2 anything else
 *   (usage, unknown plugin, invalid node or role name, a daemon without
 *   roles support, a reconcile request while paused, protocol error), and
 *   one code per reason the daemon
 *   could not be asked, so that scripts can tell them apart: 3 no socket
 *   file, 4 connection refused (a stale socket file), 5 permission denied,
 *   6 refused by the daemon (another uid, too many connections), 7 no
 *   answer in time.
 * - `roles` is a command group: "roles list|set|clear" are looked up as one
 *   command each ("roles set" in the table). Node ids and role names are
 *   checked here with the same rules as the daemon (control_codec.h), so a
 *   typo is reported before anything is sent.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control/control.h"
#include "control/control_codec.h"
#include "ctl/ctl_switchover.h"
#include "ctl/ctl_shadow.h"
#include "ctl/ctl_timeout.h"
#include "lh_install_dirs.h"
#include "ctl/ctl.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_views.h"
#include "ctl/ctl_client.h"
#include "ctl/ctl_plugin_config.h"
#include "ctl/ctl_release.h"
#include "ctl/ctl_main_internal.h"

static int ctl_main_find_control(const struct opts *o, char *buf, size_t len, const char **ret_url)
{
	return ctl_find_control(o->control, o->config, buf, len, ret_url);
}

/* ---- from the command line to a verb ---- */

#define CTL_GO (-1) /* not an exit code: go on */

/* ctl_main_unknown - refuse an unknown command (group NULL) or subcommand
 * of group, with the nearest known one when there is one; EXIT_ERR */
static int ctl_main_unknown(const char *word, const char *group)
{
	char b[CELL], sb[CELL];
	const char *s = ctl_commands_suggest(word, group);
	ctl_clean(word, b, sizeof(b), false);
	if (s)
		snprintf(sb, sizeof(sb), " (did you mean '%s'?)", s);
	else
		snprintf(sb, sizeof(sb), "%s", group ? " (list, set or clear)" : "");
	if (group)
		return ctl_usage_error(NULL, "unknown %s subcommand '%s'%s", group, b, sb);
	return ctl_usage_error(NULL, "unknown command '%s'%s", b, sb);
}

/* ctl_main_resolve - the command o names (ret_cmd NULL: none given);
 * `roles SUB` and `members forget` take their second word off o's
 * arguments (ret_roles: a roles verb). CTL_GO, or the exit code. */
static int ctl_main_resolve(struct opts *o, const struct command **ret_cmd, bool *ret_roles)
{
	char word[256];
	const struct command *cmd = NULL;

	*ret_roles = false;
	if (o->cmd && strcmp(o->cmd, "roles") == 0) {
		/* "roles SUB ARGS": look up "roles SUB" */
		*ret_roles = true;
		if (o->n_args == 0) {
			if (o->help) {
				ctl_commands_print_roles_help(stdout);
				return EXIT_OK;
			}
			if (o->version) {
				printf("leaseholdctl %s\n", PACKAGE_VERSION);
				return EXIT_OK;
			}
			fprintf(stderr,
				"leaseholdctl: roles: missing subcommand (list, set or clear)\n");
			ctl_commands_print_roles_help(stderr);
			return EXIT_ERR;
		}
		snprintf(word, sizeof(word), "roles %s", o->args[0]);
		if (!(cmd = ctl_commands_find(word)))
			return ctl_main_unknown(o->args[0], "roles");
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && strcmp(o->cmd, "members") == 0 && (o->n_args >= 2 || o->help) &&
		   o->n_args >= 1 && strcmp(o->args[0], "forget") == 0) {
		/* "members forget NAME NODE" (plain "members NAME" has one argument;
		 * "members forget --help" is the sub-verb's help) */
		cmd = ctl_commands_find("members forget");
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && strcmp(o->cmd, "release") == 0 && o->n_args >= 1 &&
		   (strcmp(o->args[0], "pin") == 0 || strcmp(o->args[0], "unpin") == 0)) {
		/* "release pin NAME VERSION", "release unpin NAME" ("release NAME" shows) */
		snprintf(word, sizeof(word), "release %s", o->args[0]);
		cmd = ctl_commands_find(word);
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && !strchr(o->cmd, ' ')) {
		cmd = ctl_commands_find(o->cmd); /* "roles set" as one word is no command */
	}
	if (o->cmd && !cmd)
		return ctl_main_unknown(o->cmd, NULL);
	*ret_cmd = cmd;
	return CTL_GO;
}

/* ctl_main_help - `help [COMMAND]` or --help: print what was asked */
static int ctl_main_help(const struct opts *o, const struct command *cmd)
{
	char word[256];
	const struct command *about = cmd;
	bool roles_group = false;

	if (cmd && strcmp(cmd->name, "help") == 0) {
		about = NULL;
		if (o->n_args == 1 && strcmp(o->args[0], "roles") == 0) {
			roles_group = true;
		} else if (o->n_args == 1 && strcmp(o->args[0], "config") == 0) {
			ctl_commands_print_group_help(stdout, "config");
			return EXIT_OK;
		} else if (o->n_args == 2) {
			/* two-word commands: "roles set", "members forget" */
			snprintf(word, sizeof(word), "%s %s", o->args[0], o->args[1]);
			about = ctl_commands_find(word);
		} else if (o->n_args == 1) {
			about = ctl_commands_find(o->args[0]);
		}
		if (o->n_args == 1 && !about && !roles_group)
			return ctl_main_unknown(o->args[0], NULL);
		if (o->n_args && !about && !roles_group)
			return ctl_usage_error(NULL, "unknown command '%s%s%s'", o->args[0],
						    o->n_args > 1 ? " " : "",
						    o->n_args > 1 ? o->args[1] : "");
	}
	if (about)
		ctl_commands_print_command_help(stdout, about);
	else if (roles_group)
		ctl_commands_print_roles_help(stdout);
	else
		ctl_commands_print_help(stdout);
	return EXIT_OK;
}

/* the listing commands: the ones that print a table */
#define CTL_MAIN_LISTING "plugins, status, members, roles list and history"

bool ctl_main_lists(const struct command *cmd)
{
	static const char *const listing[] = {"plugins", "status", "members", "roles list",
					      "history"};
	for (size_t i = 0; i < sizeof(listing) / sizeof(listing[0]); i++)
		if (strcmp(cmd->name, listing[i]) == 0)
			return true;
	return false;
}

/* the commands -w redraws */
bool ctl_main_watches(const struct command *cmd)
{
	return strcmp(cmd->name, "plugins") == 0 || strcmp(cmd->name, "members") == 0 ||
	       strcmp(cmd->name, "release") == 0 || strcmp(cmd->name, "history") == 0;
}

/* ctl_main_check_flags - the flags given fit command cmd; EXIT_OK or the
 * exit code of the usage error (printed) */
static int ctl_main_check_flags(const struct opts *o, const struct command *cmd)
{
	if (o->n_args < cmd->min_args)
		return ctl_usage_error(cmd, "%s: missing argument", cmd->name);
	if (o->n_args > cmd->max_args) {
		if (strcmp(cmd->name, "roles set") == 0)
			return ctl_usage_error(cmd, "too many roles (at most %d)", CONTROL_ROLES_MAX);
		return ctl_usage_error(cmd, "unexpected argument '%s'",
					    o->args[cmd->max_args]);
	}
	if (o->json && !cmd->json)
		return ctl_usage_error(cmd, "%s does not take -o %s", cmd->name,
				       ctl_output_format_name(o->format));
	if ((o->format == CTL_FORMAT_WIDE || o->no_headers) && !ctl_main_lists(cmd))
		return ctl_usage_error(cmd, "%s prints no table: -o wide and --no-headers are for %s",
				       cmd->name, CTL_MAIN_LISTING);
	if (o->format == CTL_FORMAT_YAML && strcmp(cmd->name, "watch") == 0)
		return ctl_usage_error(cmd, "watch prints one JSON object per line: -o json");
	if (o->watch && !ctl_main_watches(cmd))
		return ctl_usage_error(cmd, "%s does not take --watch (plugins, members, release and "
				       "history do)", cmd->name);
	if (o->to && strcmp(cmd->name, "switchover") != 0)
		return ctl_usage_error(cmd, "%s does not take --to", cmd->name);
	if (o->to && !control_codec_node_ok(o->to))
		return ctl_usage_error(cmd, "invalid node id for --to (1..128 printable ASCII "
						 "characters, no '/')");
	if (o->node && strcmp(cmd->name, "shadow") != 0)
		return ctl_usage_error(cmd, "%s does not take --node", cmd->name);
	if (o->node && !control_codec_node_ok(o->node))
		return ctl_usage_error(cmd, "invalid node id for --node (1..128 printable "
						 "ASCII characters, no '/')");
	if (o->yes && !cmd->confirm)
		return ctl_usage_error(cmd, "%s does not take --yes", cmd->name);
	if (o->force && strcmp(cmd->name, "roles set") != 0 && strcmp(cmd->name, "release pin") != 0)
		return ctl_usage_error(cmd, "%s does not take --force", cmd->name);
	if (cmd->confirm && !o->yes) {
		fprintf(stderr, "leaseholdctl: %s needs --yes. What it does:\n\n%s", cmd->name,
			cmd->help);
		return EXIT_ERR;
	}
	if (!o->etcd.endpoints &&
	    (o->etcd.cacert || o->etcd.cert || o->etcd.key || o->etcd.user || o->etcd.prefix))
		return ctl_usage_error(cmd,
					    "--etcd-cacert, --etcd-cert, --etcd-key, --etcd-user "
					    "and --prefix need --etcd (observer mode)");
	if ((o->from_revision || o->to_revision) && strcmp(cmd->name, "watch") != 0)
		return ctl_usage_error(cmd, "--from-revision and --to-revision are for watch");
	if (o->etcd.endpoints && o->control)
		return ctl_usage_error(cmd, "--control and --etcd exclude each other");
	return EXIT_OK;
}

/* ctl_main_check_names - the plugin name, node ids and roles given are
 * well-formed; EXIT_OK or the exit code of the usage error (printed) */
static int ctl_main_check_names(const struct opts *o, const struct command *cmd, bool roles)
{
	const char *name = o->n_args ? o->args[0] : NULL;
	if (roles) {
		if (name && ctl_args_check_roles(cmd, o->args, o->n_args) != EXIT_OK)
			return EXIT_ERR;
	} else if (name && !control_codec_name_ok(name)) {
		return ctl_usage_error(cmd, "invalid plugin name '%s'", name);
	}
	struct release rel;
	if (strcmp(cmd->name, "release pin") == 0 && release_parse(o->args[1], &rel) < 0)
		return ctl_usage_error(cmd, "invalid release '%s' (major.minor.patch, e.g. 1.2.0)",
					    o->args[1]);
	if (strcmp(cmd->name, "members forget") == 0 && !control_codec_node_ok(o->args[1]))
		return ctl_usage_error(cmd,
					    "invalid node id (1..128 printable ASCII characters, "
					    "no '/')");
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	const struct command *cmd = NULL;
	char urlbuf[4096], def[4096];
	const char *url;
	bool roles;
	int ret;

	if ((ret = ctl_config_main(argc, argv)) >= 0)
		return ret;
	if (ctl_args_parse(argc, argv, &o) < 0)
		return EXIT_ERR;
	if ((ret = ctl_main_resolve(&o, &cmd, &roles)) != CTL_GO)
		return ret;
	if (o.help)
		return ctl_main_help(&o, cmd);
	if (o.version) { /* on every command, `help` too */
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	if (cmd && strcmp(cmd->name, "help") == 0)
		return ctl_main_help(&o, cmd);
	if (!cmd) {
		fprintf(stderr, "leaseholdctl: no command given\n");
		ctl_commands_print_help(stderr);
		return EXIT_ERR;
	}
	if ((ret = ctl_main_check_flags(&o, cmd)) != EXIT_OK ||
	    (ret = ctl_main_check_names(&o, cmd, roles)) != EXIT_OK)
		return ret;
	struct ctl_output out = {.format = o.format, .no_headers = o.no_headers,
				 .columns = ctl_output_columns()};
	ctl_output_set(&out);
	const char *name = o.n_args ? o.args[0] : NULL;
	if (strcmp(cmd->name, "completion") == 0)
		return ctl_completion_main(name);
	if (strcmp(cmd->name, "watch") == 0)
		return ctl_verbs_watch(&o, cmd, name);
	if (o.etcd.endpoints && strcmp(cmd->name, "version") == 0) {
		printf("leaseholdctl %s (observer mode: no daemon asked)\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	if (o.etcd.endpoints)
		url = ""; /* observer mode: no daemon is asked */
	else if ((ret = ctl_main_find_control(&o, def, sizeof(def), &url)) != EXIT_OK)
		return ret;
	if (url[0] == '/') {
		snprintf(urlbuf, sizeof(urlbuf), "ipc://%s", url);
		url = urlbuf;
	}
	return ctl_verbs_run(&o, cmd, name, roles, url);
}

