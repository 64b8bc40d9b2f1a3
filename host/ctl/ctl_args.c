/* SPDX-License-Identifier: MIT */
/*
 * ctl_args.c - leaseholdctl's command line: options before or after the
 * command, --NAME VALUE or --NAME=VALUE, into struct opts.
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
#include "ctl/ctl_output.h"


/* the options that take a value: --NAME VALUE or --NAME=VALUE */
static const struct {
	const char *name;
	size_t off;
} ctl_args_vo[] = {
    {"--control", offsetof(struct opts, control)},
    {"--config", offsetof(struct opts, config)},
    {"--to", offsetof(struct opts, to)},
    {"--node", offsetof(struct opts, node)},
    {"--timeout", offsetof(struct opts, timeout)},
    {"--etcd", offsetof(struct opts, etcd.endpoints)},
    {"--etcd-cacert", offsetof(struct opts, etcd.cacert)},
    {"--etcd-cert", offsetof(struct opts, etcd.cert)},
    {"--etcd-key", offsetof(struct opts, etcd.key)},
    {"--etcd-user", offsetof(struct opts, etcd.user)},
    {"--prefix", offsetof(struct opts, etcd.prefix)},
    {"--from-revision", offsetof(struct opts, from_revision)},
    {"--to-revision", offsetof(struct opts, to_revision)},
};

static const char **ctl_args_value_option(struct opts *o, const char *a, size_t *ret_len)
{
	for (size_t i = 0; i < sizeof(ctl_args_vo) / sizeof(ctl_args_vo[0]); i++) {
		size_t n = strlen(ctl_args_vo[i].name);
		if (strncmp(a, ctl_args_vo[i].name, n) == 0 && (a[n] == '\0' || a[n] == '=')) {
			*ret_len = n;
			return (const char **)((char *)o + ctl_args_vo[i].off);
		}
	}
	return NULL;
}


/* the flags: no value */
static const struct {
	const char *name, *alias;
	size_t off;
} ctl_args_fl[] = {
    {"--json", NULL, offsetof(struct opts, json)},
    {"--yes", "-y", offsetof(struct opts, yes)},
    {"--force", NULL, offsetof(struct opts, force)},
    {"--help", "-h", offsetof(struct opts, help)},
    {"--version", "-V", offsetof(struct opts, version)},
    {"--no-headers", NULL, offsetof(struct opts, no_headers)},
    {"--watch", "-w", offsetof(struct opts, watch)},
};

/* ctl_args_flag - a that is a flag without a value: set it in o, true */
static bool ctl_args_flag(struct opts *o, const char *a)
{
	for (size_t i = 0; i < sizeof(ctl_args_fl) / sizeof(ctl_args_fl[0]); i++)
		if (strcmp(a, ctl_args_fl[i].name) == 0 || (ctl_args_fl[i].alias && strcmp(a, ctl_args_fl[i].alias) == 0)) {
			*(bool *)((char *)o + ctl_args_fl[i].off) = true;
			if (ctl_args_fl[i].off == offsetof(struct opts, json))
				o->format = CTL_FORMAT_JSON;
			return true;
		}
	return false;
}

/* ctl_args_is_output - a is -o, -oFORMAT, --output or --output=FORMAT */
static bool ctl_args_is_output(const char *a)
{
	return strncmp(a, "-o", 2) == 0 || strcmp(a, "--output") == 0 ||
	       strncmp(a, "--output=", 9) == 0;
}

/* ctl_args_output - -o FORMAT at argv[*i] (the value attached or the next
 * word, *i then moves past it) into o; -1 (printed) on a usage error */
static int ctl_args_output(struct opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v = NULL;
	if (strncmp(a, "--output=", 9) == 0)
		v = a + 9;
	else if (a[1] == 'o' && a[2] != '\0')
		v = a + 2 + (a[2] == '=');
	if (!v && *i + 1 >= argc) {
		ctl_usage_error(ctl_commands_find(o->cmd),
				"option %s needs a value (table, wide, json or yaml)", a);
		return -1;
	}
	if (!v)
		v = argv[++*i];
	if (ctl_output_parse_format(v, &o->format) < 0) {
		ctl_usage_error(ctl_commands_find(o->cmd),
				"unknown output format '%s' (table, wide, json or yaml)", v);
		return -1;
	}
	/* the JSON-shaped outputs share the verbs' JSON path (ctl_print_json) */
	o->json = o->format == CTL_FORMAT_JSON || o->format == CTL_FORMAT_YAML;
	return 0;
}

/* ctl_args_parse - fill o; returns -1 (and prints) on a usage error. */
int ctl_args_parse(int argc, char **argv, struct opts *o)
{
	bool only_positional = false;
	const char **slot;
	size_t nl;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_positional && a[0] == '-' && a[1] != '\0') {
			if (strcmp(a, "--") == 0) {
				only_positional = true;
			} else if ((slot = ctl_args_value_option(o, a, &nl)) != NULL) {
				if (a[nl] == '=') {
					*slot = a + nl + 1;
				} else if (i + 1 >= argc) {
					ctl_usage_error(ctl_commands_find(o->cmd), "option %s needs a value",
						    a);
					return -1;
				} else {
					*slot = argv[++i];
				}
				if (slot == &o->timeout)
					o->has_timeout = true;
			} else if (ctl_args_is_output(a)) {
				if (ctl_args_output(o, argc, argv, &i) < 0)
					return -1;
			} else if (ctl_args_flag(o, a)) {
				/* a flag without a value: set */
			} else {
				ctl_usage_error(ctl_commands_find(o->cmd), "unknown option '%s'", a);
				return -1;
			}
			continue;
		}
		if (!o->cmd)
			o->cmd = a;
		else if (o->n_args < sizeof(o->args) / sizeof(o->args[0]))
			o->args[o->n_args++] = a;
		else {
			ctl_usage_error(ctl_commands_find(o->cmd), "too many arguments ('%s')", a);
			return -1;
		}
	}
	return 0;
}

/* ctl_args_check_roles - roles set/clear: NODE [ROLE...] as the daemon
 * will check them. Returns EXIT_OK or EXIT_ERR (printed). */
int ctl_args_check_roles(const struct command *cmd, const char *const *args, size_t n)
{
	char b[CELL];
	const char *why;
	size_t bad;

	if (!control_codec_node_ok(args[0]))
		return ctl_usage_error(cmd,
				   "invalid node id '%s' (1 to %d printable ASCII characters, no "
				   "'/')",
				   ctl_clean(args[0], b, sizeof(b), false), CONTROL_NODE_MAX);
	if (control_codec_roles_check(args + 1, n - 1, &bad, &why) < 0) {
		if (bad >= n - 1)
			return ctl_usage_error(cmd, "%s", why);
		return ctl_usage_error(cmd, "%s: '%s'", why, ctl_clean(args[1 + bad], b, sizeof(b), false));
	}
	return EXIT_OK;
}

/* ctl_args_parse_timeout - a --timeout DUR (ctl_timeout.h) -> ms. 0 or -EINVAL. */
int ctl_args_parse_timeout(const char *s, uint32_t *ret_ms)
{
	if (!s)
		return -EINVAL;
	return ctl_timeout_parse(s, 0, 0, (uint32_t)(CTL_WAIT_MAX_S * 1000.0), ret_ms);
}

void ctl_args_each_option(void (*fn)(const char *name, bool value, void *arg), void *arg)
{
	for (size_t i = 0; i < sizeof(ctl_args_vo) / sizeof(ctl_args_vo[0]); i++)
		fn(ctl_args_vo[i].name, true, arg);
	for (size_t i = 0; i < sizeof(ctl_args_fl) / sizeof(ctl_args_fl[0]); i++) {
		fn(ctl_args_fl[i].name, false, arg);
		if (ctl_args_fl[i].alias)
			fn(ctl_args_fl[i].alias, false, arg);
	}
	fn("--output", true, arg);
	fn("-o", true, arg);
	fn("--revision", true, arg); /* config set (ctl_plugin_config.c) */
}
