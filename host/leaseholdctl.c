/* SPDX-License-Identifier: MIT */
/*
 * leaseholdctl.c - the operator's CLI: talks to the local leasehold daemon
 * over its control socket (control_client.h, proto/control.proto).
 *
 * Design notes
 * - One request, one reply, on a fresh connection. The whole call has a
 *   deadline: CTL_TIMEOUT_MS normally, the wait-ready timeout +
 *   CTL_WAIT_MARGIN_MS for wait-ready, whose answer the daemon holds back
 *   until the plugin is ready or the timeout passes. The request is never
 *   re-sent.
 * - Everything printed from the daemon goes through clean(): control bytes
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
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "control.h"
#include "control_client.h"
#include "control_codec.h"
#include "control_wire.h"
#include "ctl_plugin_config.h"

#define EXIT_OK 0
#define EXIT_NOTOK 1
#define EXIT_ERR 2
/* the daemon could not be asked; each reason its own code (see --help) */
#define EXIT_NO_SOCKET 3
#define EXIT_STALE 4
#define EXIT_DENIED 5
#define EXIT_REFUSED 6
#define EXIT_TIMEOUT 7

#define CTL_TIMEOUT_MS 10000
/* roles set/clear: the daemon answers once etcd has (5 s deadline by default) */
#define CTL_WRITE_TIMEOUT_MS 30000
#define CTL_WAIT_DEFAULT_S 60.0
#define CTL_RECONCILE_DEFAULT_S 30.0
#define CTL_WAIT_MARGIN_MS 5000
#define CTL_WAIT_MAX_S 4000000.0 /* keeps timeout_ms (uint32) + margin in range */
#define CELL 96			 /* widest table cell, bytes */

typedef Leasehold__Control__Response Response;
typedef Leasehold__Control__Plugin Plugin;
typedef Leasehold__Control__RoleEntry RoleEntry;

/* roles set NODE ROLE...: the subcommand, the node and the roles, plus one
 * more so that "too many roles" is reported as such */
#define MAX_ARGS (CONTROL_ROLES_MAX + 3)

struct opts {
	const char *control;
	const char *cmd;
	const char *args[MAX_ARGS];
	size_t n_args;
	bool json, help, version, has_timeout, yes;
	const char *timeout;
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

static const struct command commands[] = {
    {"plugins", 0, 0, true, false, false, "plugins [--json]", "list every plugin",
     "List every plugin of this node's daemon: release, election state, leader,\n"
     "readiness, member releases (min..max), status record, reconciles.\n"
     "--json prints a JSON array with one object per plugin.\n"},
    {"status", 1, 1, true, false, false, "status NAME [--json]", "one plugin in detail",
     "Show one plugin in detail (key: value lines, or one JSON object).\n"
     "NAME is a plugin name (the file that runs it), or a file name in the\n"
     "plugin directory (it contains a '.', e.g. x-1.3.0.so): that file's row.\n"},
    {"members", 1, 1, true, false, false, "members NAME [--json]", "a plugin's members",
     "List plugin NAME's members: every node that runs it or ran it and has not\n"
     "left (a node that is down or cut off still counts, with its last release).\n"
     "Columns: node id, plugin release, leader, campaigning (it holds an election\n"
     "key now: alive and of the newest release; a member that does not is on an\n"
     "older release, down or cut off).\n"
     "--json prints an array of {\"node\", \"release\", \"leader\", \"campaigning\"}.\n"},
    {"members forget", 2, 2, false, false, true, "members forget NAME NODE --yes",
     "remove a node that is gone for good",
     "Remove node NODE from plugin NAME's membership. Its release then no longer\n"
     "holds back an incompatible status change: the leader may restrict the\n"
     "status so that NODE's release can no longer serve. Do this only for a node\n"
     "that is gone for good (decommissioned, its disk lost). A node that comes\n"
     "back registers again with the release it runs. Refused for this node (it\n"
     "leaves by removing the plugin file), for a node that is not a member, and\n"
     "for a node that campaigns (it is alive). Without --yes it only says this.\n"
     "Exit 1 when the delete failed or the node registered again meanwhile.\n"},
    {"leave", 0, 0, false, false, true, "leave --yes",
     "leave every plugin's membership for good and stop",
     "Decommission this node: the daemon drains and hands over like on SIGTERM,\n"
     "deletes this node's member record of every plugin (an ordinary stop keeps\n"
     "them: a stopped node still counts with its release), and exits. Start the\n"
     "daemon again and the node joins as a new member. Without --yes it only\n"
     "says this.\n"},
    {"wait-ready", 1, 1, false, true, false, "wait-ready NAME [--timeout S]",
     "wait until a plugin is ready",
     "Wait until plugin NAME is ready on this node: its release is at least the\n"
     "status record's minimum_compatible_release and the status version is at\n"
     "least the plugin's min_reconciler_release. S seconds (default 60, may be\n"
     "fractional, 0 = check once). Exit 0 when ready, 1 on timeout, 2 on error.\n"},
    {"reload", 0, 1, false, false, false, "reload [NAME]",
     "reload a plugin, or rescan the plugin directory",
     "Reload plugin NAME from its file, or rescan the whole plugin directory.\n"
     "NAME without a '.' is a plugin: every file that provides it is read\n"
     "again; NAME with a '.' (x-1.3.0.so) is one file. Files that failed init\n"
     "get another chance; then the newest release among a plugin's files runs.\n"
     "Exit 1 when the daemon reports that the reload failed.\n"},
    {"roles list", 0, 0, true, false, false, "roles list [--json]", "every node's roles",
     "List every node's roles record (etcd P/roles/<node-id>) as this daemon\n"
     "mirrors it: node id, roles (comma-separated, \"-\" for none) and, for a\n"
     "record that is invalid, why (role-bound plugins on that node are then held\n"
     "back). Nodes without a record hold no roles and are not listed.\n"
     "--json prints an array of {\"node\", \"roles\": [..], \"error\": null or string}.\n"},
    {"roles set", 1, 1 + CONTROL_ROLES_MAX, false, false, false, "roles set NODE [ROLE...]",
     "replace a node's roles",
     "Replace node NODE's roles with ROLE... (at most 64 distinct names, each\n"
     "[a-z0-9_-], 1 to 63 characters). Without a ROLE the node keeps an empty\n"
     "record (no roles); 'roles clear' deletes the record instead. The daemon\n"
     "answers once etcd has stored the record; plugins that need a role start\n"
     "or stop on that node as soon as its daemon sees the change.\n"
     "Exit 1 when the write failed (e.g. etcd unavailable).\n"},
    {"roles clear", 1, 1, false, false, false, "roles clear NODE", "delete a node's roles record",
     "Delete node NODE's roles record: the node then holds no roles. A node\n"
     "without a record is not an error. Exit 1 when the delete failed.\n"},
    {"pause", 1, 1, false, false, false, "pause NAME", "pause a plugin cluster-wide",
     "Pause plugin NAME on every node (maintenance mode, stored in etcd at\n"
     "P/NAME/paused, so it survives leader changes and restarts): the leader\n"
     "keeps leading but starts no reconcile (a running one finishes); readiness\n"
     "is not affected. 'plugins' and 'status' show it. Any node that runs the\n"
     "plugin may pause it. Exit 0 once etcd stored it, 1 when the write failed.\n"},
    {"resume", 1, 1, false, false, false, "resume NAME", "end a plugin's pause",
     "End plugin NAME's pause (delete P/NAME/paused, whatever it holds): the\n"
     "leader reconciles at once, then as usual. Resuming a plugin that is not\n"
     "paused is not an error. Exit 0 once etcd stored it, 1 when it failed.\n"},
    {"reconcile", 1, 1, false, true, false, "reconcile NAME [--timeout S]",
     "ask the leader for a reconcile now",
     "Ask plugin NAME's leader, wherever it runs, for one reconcile now (a\n"
     "request record in etcd, P/NAME/reconcile-request). Requests that come while\n"
     "one is queued or running are served by one more reconcile. Waits until the\n"
     "leader has served the request: a reconcile that started after it finished\n"
     "(default 30 s; --timeout 0 returns once the request is recorded). Refused\n"
     "while the plugin is paused.\n"
     "Exit 0 served (the reconcile succeeded), 1 the reconcile failed, the\n"
     "request could not be written, or --timeout passed (the request stays and\n"
     "is served when a leader can), 2 refused (unknown plugin, paused).\n"},
    {"history", 1, 1, true, false, false, "history NAME [--json]",
     "a plugin's leadership terms",
     "Show plugin NAME's last (at most 100) leadership terms, newest first:\n"
     "fencing token, node, release, start and end (etcd revision, UTC time) and\n"
     "why the term ended: shutdown, newer-release, reload, role-removed,\n"
     "plugin-removed, plugin-failed (with the failure), or lease-lost (the\n"
     "leader's key went without a resign: lease expired or session lost; recorded\n"
     "by the successor). An empty end: the term lasts.\n"
     "--json prints an array of {\"token\", \"node\", \"release\", \"start_revision\",\n"
     "\"start\", \"end_revision\", \"end\", \"end_reason\", \"end_detail\", \"valid\"}.\n"},
    {"config get", 1, 1, true, false, false, "config get NAME [--json]",
     "a plugin's cluster-wide configuration", CTL_CONFIG_GET_HELP},
    {"config set", 2, 2, false, false, false, "config set NAME FILE|- [--revision R]",
     "replace a plugin's configuration", CTL_CONFIG_SET_HELP},
    {"config edit", 1, 1, false, false, false, "config edit NAME",
     "edit a plugin's configuration", CTL_CONFIG_EDIT_HELP},
    {"version", 0, 0, false, false, false, "version", "client and daemon versions",
     "Print leaseholdctl's version and the daemon's version, node id and protocol.\n"},
    {"help", 0, 2, false, false, false, "help [COMMAND]", "show help",
     "Show help for leaseholdctl or one command (e.g. help roles set).\n"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; name && i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_help(FILE *out)
{
	char def[512];
	fprintf(out, "Usage: leaseholdctl [--control URL] COMMAND [ARGS] [OPTIONS]\n\n"
		     "Operate the local leasehold daemon through its control socket.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-30s %s\n", commands[i].synopsis, commands[i].summary);
	fprintf(out,
		"\nOptions (accepted before or after the command):\n"
		"  --control URL  the daemon's control socket, ipc:///path (or a /path).\n"
		"                 Default: $LEASEHOLD_CONTROL, else\n"
		"                 ipc://$XDG_RUNTIME_DIR/leasehold.sock, else\n"
		"                 ipc:///run/leasehold/control.sock (here: %s)\n"
		"  --json         JSON output (plugins, status, members, roles list, history)\n"
		"  --revision R   config set: write only over the configuration of revision R\n"
		"  --timeout S    wait-ready (default 60), reconcile (default 30): give up\n"
		"                 after S seconds\n"
		"  -h, --help     this help; after a command, that command's help\n"
		"  --version      print leaseholdctl's version\n"
		"\nExit codes:\n"
		"  0  success (wait-ready: the plugin is ready)\n"
		"  1  the daemon answered but the operation did not succeed\n"
		"     (wait-ready timed out, reload failed, roles set/clear failed,\n"
		"     pause/resume failed, reconcile failed or not served in time)\n"
		"  2  error: bad usage, unknown plugin, invalid node or role name,\n"
		"     protocol error, the daemon closed the connection\n"
		"  3  no socket file: the daemon is not running (or another --control)\n"
		"  4  connection refused: a stale socket file, its daemon is gone\n"
		"  5  permission denied: run as root or as the daemon's user\n"
		"  6  refused by the daemon: another uid, or too many connections\n"
		"  7  no answer from the daemon in time\n"
		"  8  config set/edit: the configuration changed since it was read\n",
		control_default_url(def, sizeof(def)));
}

static void print_command_help(FILE *out, const struct command *cmd)
{
	fprintf(out, "Usage: leaseholdctl [--control URL] %s\n\n%s", cmd->synopsis, cmd->help);
	fprintf(out, "\nExit codes: 0 success, 1 operation did not succeed (wait-ready timeout,\n"
		     "reload failed, roles write failed), 2 error (usage, unknown plugin,\n"
		     "invalid node or role name), 3-7 the daemon could not be asked (3 no\n"
		     "socket file, 4 stale socket, 5 permission denied, 6 refused, 7 timeout).\n"
		     "See leaseholdctl --help for the common options.\n");
}

/* print_roles_help - the `roles` command group. */
static void print_roles_help(FILE *out)
{
	fprintf(out, "Usage: leaseholdctl [--control URL] roles list|set|clear [ARGS]\n\n"
		     "Node roles (etcd P/roles/<node-id>): a plugin that declares a role runs\n"
		     "only on nodes holding it.\n\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strncmp(commands[i].name, "roles ", 6) == 0)
			fprintf(out, "  %-30s %s\n", commands[i].synopsis, commands[i].summary);
	fprintf(out, "\nSee leaseholdctl help roles list|set|clear for details.\n");
}

static int usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "leaseholdctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (cmd)
		fprintf(stderr, "Usage: leaseholdctl [--control URL] %s\n", cmd->synopsis);
	else
		fprintf(stderr, "Usage: leaseholdctl [--control URL] COMMAND [ARGS] [OPTIONS]\n");
	fprintf(stderr, "Try 'leaseholdctl --help'.\n");
	return EXIT_ERR;
}

/* parse_args - fill o; returns -1 (and prints) on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	bool only_positional = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_positional && a[0] == '-' && a[1] != '\0') {
			if (strcmp(a, "--") == 0) {
				only_positional = true;
			} else if (strcmp(a, "--control") == 0 || strcmp(a, "--timeout") == 0) {
				if (i + 1 >= argc) {
					usage_error(find_command(o->cmd), "option %s needs a value",
						    a);
					return -1;
				}
				if (a[2] == 'c')
					o->control = argv[++i];
				else {
					o->timeout = argv[++i];
					o->has_timeout = true;
				}
			} else if (strncmp(a, "--control=", 10) == 0) {
				o->control = a + 10;
			} else if (strncmp(a, "--timeout=", 10) == 0) {
				o->timeout = a + 10;
				o->has_timeout = true;
			} else if (strcmp(a, "--json") == 0) {
				o->json = true;
			} else if (strcmp(a, "--yes") == 0 || strcmp(a, "-y") == 0) {
				o->yes = true;
			} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
				o->help = true;
			} else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
				o->version = true;
			} else {
				usage_error(find_command(o->cmd), "unknown option '%s'", a);
				return -1;
			}
			continue;
		}
		if (!o->cmd)
			o->cmd = a;
		else if (o->n_args < sizeof(o->args) / sizeof(o->args[0]))
			o->args[o->n_args++] = a;
		else {
			usage_error(find_command(o->cmd), "too many arguments ('%s')", a);
			return -1;
		}
	}
	return 0;
}

/* ---- output helpers ---------------------------------------------------- */

/* clean - s as printable ASCII into buf (other bytes become '?'), cut to
 * len - 1 bytes with "..." when longer; "-" for NULL/empty when dash.
 * Returns buf. */
static const char *clean(const char *s, char *buf, size_t len, bool dash)
{
	size_t n = 0, slen;

	if (len == 0)
		return "";
	if (!s || !s[0]) {
		snprintf(buf, len, "%s", dash ? "-" : "");
		return buf;
	}
	slen = strlen(s);
	for (; s[n] && n + 1 < len; n++) {
		unsigned char ch = (unsigned char)s[n];
		buf[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	buf[n] = '\0';
	if (n < slen && len >= 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}

static char *fmt_release(const Leasehold__Control__Release *r, char *buf, size_t len)
{
	return release_format(control_codec_release(r), buf, len);
}

/* fmt_time - unix seconds as RFC 3339 UTC; NULL for 0. */
static const char *fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if (t <= 0 || !gmtime_r(&tt, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return NULL;
	return buf;
}

/* print_table - patronictl-style box table; cells is nrows*ncol strings;
 * right[] marks right-aligned columns. title goes into the top border. */
static void print_table(const char *title, const char *const *hdr, const bool *right, size_t ncol,
			const char *const *cells, size_t nrows)
{
	size_t width[16] = {0};
	char border[16 * (CELL + 3) + 2];
	size_t pos = 0;

	for (size_t c = 0; c < ncol; c++) {
		width[c] = strlen(hdr[c]);
		for (size_t r = 0; r < nrows; r++) {
			size_t l = strlen(cells[r * ncol + c]);
			if (l > width[c])
				width[c] = l;
		}
	}
	border[pos++] = '+';
	for (size_t c = 0; c < ncol; c++) {
		memset(border + pos, '-', width[c] + 2);
		pos += width[c] + 2;
		border[pos++] = '+';
	}
	border[pos] = '\0';

	if (title) {
		char top[sizeof(border)];
		int n = snprintf(top, sizeof(top), "+ %s ", title);
		if (n > 0 && (size_t)n + 1 < pos) {
			memcpy(top + n, border + n, pos - (size_t)n + 1);
			printf("%s\n", top);
		} else {
			printf("%s\n%s\n", title, border);
		}
	} else {
		printf("%s\n", border);
	}
	printf("|");
	for (size_t c = 0; c < ncol; c++)
		printf(" %-*s |", (int)width[c], hdr[c]);
	printf("\n%s\n", border);
	for (size_t r = 0; r < nrows; r++) {
		printf("|");
		for (size_t c = 0; c < ncol; c++)
			printf(right[c] ? " %*s |" : " %-*s |", (int)width[c], cells[r * ncol + c]);
		printf("\n");
	}
	if (nrows > 0)
		printf("%s\n", border);
}

static json_object *json_str_or_null(const char *s)
{
	return (s && s[0]) ? json_object_new_string(s) : NULL;
}

static json_object *json_release(const Leasehold__Control__Release *r)
{
	char b[RELEASE_STRLEN];
	return r ? json_object_new_string(fmt_release(r, b, sizeof(b))) : NULL;
}

static int64_t clamp_u64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* json_plugin - the documented per-plugin object (see README). */
static json_object *json_plugin(const Plugin *p)
{
	json_object *o = json_object_new_object(), *rs, *st = NULL, *rc;
	char tb[64];
	const Leasehold__Control__Releases *r = p->releases;
	const Leasehold__Control__Reconcile *c = p->reconcile;

	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "file", json_str_or_null(p->file));
	json_object_object_add(o, "release", json_release(p->release));
	json_object_object_add(o, "state", json_object_new_string(p->state));
	json_object_object_add(o, "leader", json_str_or_null(p->leader));
	json_object_object_add(o, "ready", json_object_new_boolean(p->ready));

	rs = json_object_new_object();
	bool have = r && r->members > 0;
	json_object_object_add(rs, "min", have ? json_release(r->min) : NULL);
	json_object_object_add(rs, "max", have ? json_release(r->max) : NULL);
	json_object_object_add(rs, "revision", json_object_new_int64(r ? r->revision : 0));
	json_object_object_add(rs, "members", json_object_new_int64(r ? clamp_u64(r->members) : 0));
	json_object_object_add(o, "releases", rs);

	if (p->status) {
		st = json_object_new_object();
		json_object_object_add(st, "state", json_object_new_string(p->status->state));
		json_object_object_add(st, "version", json_release(p->status->version));
		json_object_object_add(st, "minimum_compatible_release",
				       json_release(p->status->minimum_compatible_release));
	}
	json_object_object_add(o, "status", st);

	rc = json_object_new_object();
	json_object_object_add(rc, "count", json_object_new_int64(c ? clamp_u64(c->count) : 0));
	json_object_object_add(rc, "last_ok", json_object_new_boolean(c && c->last_ok));
	json_object_object_add(rc, "last_error", json_str_or_null(c ? c->last_error : NULL));
	const char *at = c ? fmt_time(c->last_at, tb, sizeof(tb)) : NULL;
	json_object_object_add(rc, "last_at", at ? json_object_new_string(at) : NULL);
	json_object_object_add(o, "reconcile", rc);

	json_object_object_add(o, "error", json_str_or_null(p->error));
	json_object_object_add(o, "held_back", json_str_or_null(p->held_back));
	json_object_object_add(o, "fencing_token", json_object_new_int64(p->fencing_token));
	json_object_object_add(o, "superseded_by", json_str_or_null(p->superseded_by));
	json_object_object_add(o, "not_ready", json_str_or_null(p->not_ready));
	bool running = p->callback && p->callback[0];
	json_object_object_add(o, "callback", json_str_or_null(running ? p->callback : NULL));
	json_object_object_add(o, "callback_ms",
			       json_object_new_int64(running ? clamp_u64(p->callback_ms) : 0));
	json_object_object_add(o, "paused", json_object_new_boolean(p->paused));
	json_object_object_add(o, "paused_by", json_str_or_null(p->paused_by));
	const char *pat = fmt_time(p->paused_at, tb, sizeof(tb));
	json_object_object_add(o, "paused_at", pat ? json_object_new_string(pat) : NULL);
	json_object_object_add(o, "pause_error", json_str_or_null(p->pause_error));
	json_object_object_add(o, "reconcile_requested",
			       json_object_new_int64(p->reconcile_requested));
	json_object_object_add(o, "reconcile_served", json_object_new_int64(p->reconcile_served));
	json_object_object_add(o, "config_revision", json_object_new_int64(p->config_revision));
	json_object_object_add(o, "config_error", json_str_or_null(p->config_error));
	return o;
}

static void print_json(json_object *o)
{
	printf("%s\n",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						     JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* ---- the call ---------------------------------------------------------- */

/* call - one request/reply: req (packed, borrowed) out, the reply in.
 * Prints its own errors, each naming what went wrong (see the exit codes);
 * returns EXIT_OK with *ret_resp set (caller frees) or an exit code;
 * *ret_timed_out tells whether no answer came in time. */
static int call(const char *url, const uint8_t *req, size_t req_len, int64_t timeout_ms,
		Response **ret_resp, bool *ret_timed_out)
{
	char path[4096];
	uint8_t *buf = NULL;
	size_t len = 0;
	const char *why;
	int r;

	*ret_timed_out = false;
	if (control_wire_path(url, path, sizeof(path)) < 0) {
		fprintf(stderr, "leaseholdctl: invalid control socket '%s' (want ipc:///path or /path)\n",
			url);
		return EXIT_ERR;
	}
	r = control_client_call(path, req, req_len, timeout_ms, CONTROL_MAX_REPLY, &buf, &len);
	switch (r) {
	case 0:
		break;
	case -ENOENT:
	case -ENOTDIR:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: no such socket file: is the "
			"daemon running?\n",
			url);
		return EXIT_NO_SOCKET;
	case -ECONNREFUSED:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: connection refused: a stale "
			"socket file (the daemon that made it is gone): is the daemon running?\n",
			url);
		return EXIT_STALE;
	case -EACCES:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: permission denied (run as root "
			"or as the daemon's user)\n",
			url);
		return EXIT_DENIED;
	case -ETIMEDOUT:
		fprintf(stderr, "leaseholdctl: no answer from leasehold at %s within %.1f s\n", url,
			(double)timeout_ms / 1000.0);
		*ret_timed_out = true;
		return EXIT_TIMEOUT;
	case -ENOTSOCK:
		fprintf(stderr, "leaseholdctl: %s is not a socket\n", url);
		return EXIT_ERR;
	case -ECONNRESET:
		fprintf(stderr,
			"leaseholdctl: leasehold at %s closed the connection without an answer\n",
			url);
		return EXIT_ERR;
	case -EBADMSG:
		fprintf(stderr,
			"leaseholdctl: %s does not speak the leasehold control protocol (an older "
			"leasehold, or another program?)\n",
			url);
		return EXIT_ERR;
	default:
		fprintf(stderr, "leaseholdctl: talking to leasehold at %s: %s\n", url,
			strerror(-r));
		return EXIT_ERR;
	}
	r = control_codec_response_decode(buf, len, ret_resp, &why);
	free(buf);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: %s from leasehold at %s\n", why, url);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* check_code - map a non-OK reply to a message and an exit code; roles: the
 * request was a roles command. */
static int check_code(const Response *r, bool roles)
{
	char m[CONTROL_STRING_MAX + 1], n[CELL];

	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_OK)
		return EXIT_OK;
	clean(r->message, m, sizeof(m), false);
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_REFUSED) {
		fprintf(stderr, "leaseholdctl: refused by the daemon: %s\n", m);
		return EXIT_REFUSED;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND) {
		fprintf(stderr, "leaseholdctl: %s (node %s)\n", m,
			clean(r->node, n, sizeof(n), true));
		return EXIT_ERR;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND && roles) {
		fprintf(stderr,
			"leaseholdctl: this leasehold daemon does not support roles (%s); "
			"upgrade it or enable roles there\n",
			m);
		return EXIT_ERR;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT ||
	    r->code == LEASEHOLD__CONTROL__CODE__CODE_FAILED) {
		fprintf(stderr, "leaseholdctl: %s\n", m);
		return EXIT_NOTOK;
	}
	fprintf(stderr, "leaseholdctl: the daemon refused the request: %s: %s\n",
		control_codec_code_str((int)r->code), m);
	return EXIT_ERR;
}

/* ---- commands ---------------------------------------------------------- */

#define PCOLS 9

static void plugin_cells(const Plugin *p, char (*buf)[CELL])
{
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN], t[32];
	const Leasehold__Control__Releases *r = p->releases;
	const Leasehold__Control__Reconcile *rc = p->reconcile;
	const char *err;

	clean(p->name, buf[0], CELL, true);
	if (p->release)
		fmt_release(p->release, buf[1], CELL);
	else
		snprintf(buf[1], CELL, "-");
	clean(p->state, buf[2], CELL, true);
	if (p->paused) {
		/* the pause is cluster-wide and changes what a leader does */
		size_t l = strlen(buf[2]);
		snprintf(buf[2] + l, CELL - l, ", paused");
	}
	clean(p->leader, buf[3], CELL, true);
	snprintf(buf[4], CELL, "%s", p->ready ? "yes" : "no");
	if (r && r->members > 0)
		snprintf(buf[5], CELL, "%s..%s", fmt_release(r->min, a, sizeof(a)),
			 fmt_release(r->max, b, sizeof(b)));
	else
		snprintf(buf[5], CELL, "-");
	if (p->status)
		snprintf(buf[6], CELL, "%s %s", clean(p->status->state, t, sizeof(t), true),
			 fmt_release(p->status->version, a, sizeof(a)));
	else
		snprintf(buf[6], CELL, "-");
	snprintf(buf[7], CELL, "%" PRIu64, rc ? rc->count : 0);
	err = p->error && p->error[0] ? p->error : rc ? rc->last_error : NULL;
	if (p->callback && p->callback[0]) {
		/* a running callback first: a hung one is what the operator looks for */
		char h[CELL], cb[CELL];
		snprintf(h, sizeof(h), "in %s since %" PRIu64 " s%s%s",
			 clean(p->callback, cb, sizeof(cb), true), p->callback_ms / 1000,
			 err && err[0] ? "; " : "", err && err[0] ? err : "");
		clean(h, buf[8], 61, true);
		return;
	}
	if ((!err || !err[0]) && p->held_back && p->held_back[0]) {
		/* no error to show: say why it does not campaign (standby) */
		char h[CELL];
		snprintf(h, sizeof(h), "held: %s", p->held_back);
		clean(h, buf[8], 61, true);
		return;
	}
	if ((!err || !err[0]) && p->superseded_by && p->superseded_by[0]) {
		/* a file that does not run: name the file and the one that does */
		char h[CELL];
		snprintf(h, sizeof(h), "%s superseded by %s", p->file, p->superseded_by);
		clean(h, buf[8], 61, true);
		return;
	}
	if ((!err || !err[0]) && p->config_error && p->config_error[0]) {
		/* a bad document in etcd: the plugin runs on the last good one */
		char h[CELL];
		snprintf(h, sizeof(h), "config: %s", p->config_error);
		clean(h, buf[8], 61, true);
		return;
	}
	clean(err, buf[8], 61, true);
}

static int cmd_plugins(const Response *r, bool json)
{
	static const char *const hdr[PCOLS] = {"NAME",	 "RELEASE",    "STATE",
					       "LEADER", "READY",      "MEMBERS",
					       "STATUS", "RECONCILES", "LAST ERROR"};
	static const bool right[PCOLS] = {false, false, false, false, false,
					  false, false, true,  false};
	char title[CELL + 16], nb[CELL];
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_plugins; i++)
			json_object_array_add(a, json_plugin(r->plugins[i]));
		print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	if (r->n_plugins > 0) {
		buf = calloc(r->n_plugins * PCOLS, sizeof(*buf));
		cells = calloc(r->n_plugins * PCOLS, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < r->n_plugins; i++) {
		plugin_cells(r->plugins[i], &buf[i * PCOLS]);
		for (size_t c = 0; c < PCOLS; c++)
			cells[i * PCOLS + c] = buf[i * PCOLS + c];
	}
	snprintf(title, sizeof(title), "Node: %s", clean(r->node, nb, sizeof(nb), true));
	print_table(title, hdr, right, PCOLS, cells, r->n_plugins);
	if (r->n_plugins == 0)
		printf("(no plugins loaded)\n");
	free(buf);
	free(cells);
	return EXIT_OK;
}

static int cmd_status(const Response *r, bool json)
{
	char b1[CONTROL_STRING_MAX + 1], a[RELEASE_STRLEN], b[RELEASE_STRLEN], c[RELEASE_STRLEN];
	char tb[64];
	const Plugin *p;
	const Leasehold__Control__Releases *rs;
	const Leasehold__Control__Reconcile *rc;

	if (r->n_plugins != 1) {
		fprintf(stderr, "leaseholdctl: invalid reply (expected one plugin)\n");
		return EXIT_ERR;
	}
	p = r->plugins[0];
	if (json) {
		json_object *o = json_plugin(p);
		print_json(o);
		json_object_put(o);
		return EXIT_OK;
	}
	rs = p->releases;
	rc = p->reconcile;
	printf("name:          %s\n", clean(p->name, b1, sizeof(b1), true));
	printf("node:          %s\n", clean(r->node, b1, sizeof(b1), true));
	printf("file:          %s\n", clean(p->file, b1, sizeof(b1), true));
	printf("release:       %s\n", p->release ? fmt_release(p->release, a, sizeof(a)) : "-");
	printf("state:         %s\n", clean(p->state, b1, sizeof(b1), true));
	printf("leader:        %s\n", clean(p->leader, b1, sizeof(b1), true));
	if (p->ready || !p->not_ready || !p->not_ready[0])
		printf("ready:         %s\n", p->ready ? "yes" : "no");
	else
		printf("ready:         no: %s\n", clean(p->not_ready, b1, sizeof(b1), true));
	if (rs && rs->members > 0)
		printf("members:       %" PRIu64 " (%s..%s, revision %" PRId64 ")\n", rs->members,
		       fmt_release(rs->min, a, sizeof(a)), fmt_release(rs->max, b, sizeof(b)),
		       rs->revision);
	else
		printf("members:       0\n");
	if (p->status)
		printf("status:        %s %s (minimum compatible release %s)\n",
		       clean(p->status->state, b1, sizeof(b1), true),
		       fmt_release(p->status->version, a, sizeof(a)),
		       fmt_release(p->status->minimum_compatible_release, c, sizeof(c)));
	else
		printf("status:        -\n");
	const char *at = rc ? fmt_time(rc->last_at, tb, sizeof(tb)) : NULL;
	if (rc && at)
		printf("reconciles:    %" PRIu64 " (last %s at %s)\n", rc->count,
		       rc->last_ok ? "ok" : "failed", at);
	else
		printf("reconciles:    %" PRIu64 "\n", rc ? rc->count : 0);
	printf("last error:    %s\n", clean(rc ? rc->last_error : NULL, b1, sizeof(b1), true));
	printf("error:         %s\n", clean(p->error, b1, sizeof(b1), true));
	printf("held back:     %s\n", clean(p->held_back, b1, sizeof(b1), true));
	if (p->superseded_by && p->superseded_by[0])
		printf("superseded by: %s\n", clean(p->superseded_by, b1, sizeof(b1), true));
	printf("fencing token: %" PRId64 "\n", p->fencing_token);
	/* only while paused: the usual output stays as it was */
	if (p->paused) {
		const char *pat = fmt_time(p->paused_at, tb, sizeof(tb));
		char by[CELL];
		if (p->pause_error && p->pause_error[0])
			printf("paused:        yes: %s\n", clean(p->pause_error, b1, sizeof(b1), true));
		else
			printf("paused:        yes (by %s%s%s)\n", clean(p->paused_by, by, sizeof(by), true),
			       pat ? " at " : "", pat ? pat : "");
	}
	if (p->reconcile_requested)
		printf("requested:     reconcile request %" PRId64 ", last served %" PRId64 "\n",
		       p->reconcile_requested, p->reconcile_served);
	if (p->config_revision || (p->config_error && p->config_error[0]))
		printf("config:        revision %" PRId64 "%s%s\n", p->config_revision,
		       p->config_error && p->config_error[0] ? "; error: " : "",
		       p->config_error && p->config_error[0] ? clean(p->config_error, b1, sizeof(b1), true)
							     : "");
	/* only while one runs: the usual output stays as it was */
	if (p->callback && p->callback[0])
		printf("callback:      in %s since %" PRIu64 " s\n",
		       clean(p->callback, b1, sizeof(b1), true), p->callback_ms / 1000);
	return EXIT_OK;
}

static int cmd_members(const Response *r, bool json)
{
	static const char *const hdr[4] = {"NODE", "RELEASE", "LEADER", "CAMPAIGNING"};
	static const bool right[4] = {false, false, false, false};
	char title[CELL + 16], nb[CELL];
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_members; i++) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "node",
					       json_object_new_string(r->members[i]->node));
			json_object_object_add(o, "release", json_release(r->members[i]->release));
			json_object_object_add(o, "leader",
					       json_object_new_boolean(r->members[i]->leader));
			json_object_object_add(o, "campaigning",
					       json_object_new_boolean(r->members[i]->campaigning));
			json_object_array_add(a, o);
		}
		print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	if (r->n_members > 0) {
		buf = calloc(r->n_members * 4, sizeof(*buf));
		cells = calloc(r->n_members * 4, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < r->n_members; i++) {
		clean(r->members[i]->node, buf[i * 4], CELL, true);
		fmt_release(r->members[i]->release, buf[i * 4 + 1], CELL);
		snprintf(buf[i * 4 + 2], CELL, "%s", r->members[i]->leader ? "yes" : "no");
		snprintf(buf[i * 4 + 3], CELL, "%s", r->members[i]->campaigning ? "yes" : "no");
		for (size_t c = 0; c < 4; c++)
			cells[i * 4 + c] = buf[i * 4 + c];
	}
	snprintf(title, sizeof(title), "Node: %s", clean(r->node, nb, sizeof(nb), true));
	print_table(title, hdr, right, 4, cells, r->n_members);
	if (r->n_members == 0)
		printf("(no members)\n");
	free(buf);
	free(cells);
	return EXIT_OK;
}

/* role_list - an entry's roles as "a,b,c" (cleaned, cut to len - 1 bytes
 * with "..."), "-" for none. Returns buf. */
static const char *role_list(const RoleEntry *e, char *buf, size_t len)
{
	char tmp[CELL * 2];
	size_t pos = 0;

	for (size_t i = 0; i < e->n_roles && pos + 1 < sizeof(tmp); i++) {
		int n = snprintf(tmp + pos, sizeof(tmp) - pos, "%s%s", i ? "," : "", e->roles[i]);
		if (n < 0)
			break;
		pos += (size_t)n;
		if (pos >= sizeof(tmp))
			pos = sizeof(tmp) - 1;
	}
	tmp[pos] = '\0';
	return clean(tmp, buf, len, true);
}

static int cmd_roles_list(const Response *r, bool json)
{
	static const char *const hdr[3] = {"NODE", "ROLES", "ERROR"};
	static const bool right[3] = {false, false, false};
	char title[CELL + 16], nb[CELL];
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_roles; i++) {
			const RoleEntry *e = r->roles[i];
			json_object *o = json_object_new_object(), *ra = json_object_new_array();
			json_object_object_add(o, "node", json_object_new_string(e->node));
			for (size_t k = 0; k < e->n_roles; k++)
				json_object_array_add(ra, json_object_new_string(e->roles[k]));
			json_object_object_add(o, "roles", ra);
			json_object_object_add(o, "error", json_str_or_null(e->error));
			json_object_array_add(a, o);
		}
		print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	if (r->n_roles > 0) {
		buf = calloc(r->n_roles * 3, sizeof(*buf));
		cells = calloc(r->n_roles * 3, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < r->n_roles; i++) {
		const RoleEntry *e = r->roles[i];
		clean(e->node, buf[i * 3], CELL, true);
		role_list(e, buf[i * 3 + 1], CELL);
		clean(e->error, buf[i * 3 + 2], CELL, true);
		for (size_t c = 0; c < 3; c++)
			cells[i * 3 + c] = buf[i * 3 + c];
	}
	snprintf(title, sizeof(title), "Node: %s", clean(r->node, nb, sizeof(nb), true));
	print_table(title, hdr, right, 3, cells, r->n_roles);
	if (r->n_roles == 0)
		printf("(no roles records)\n");
	free(buf);
	free(cells);
	return EXIT_OK;
}

/* check_roles_args - roles set/clear: NODE [ROLE...] as the daemon will
 * check them. Returns EXIT_OK or EXIT_ERR (printed). */
#define HCOLS 7

static int cmd_history(const Response *r, const char *name, bool json)
{
	static const char *const hdr[HCOLS] = {"TOKEN", "NODE", "RELEASE", "START",
					       "END", "ENDED BY", "DETAIL"};
	static const bool right[HCOLS] = {true, false, false, false, false, false, false};
	char title[CELL + 16], nb[CELL], tb[64];

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_terms; i++) {
			const Leasehold__Control__Term *t = r->terms[i];
			json_object *o = json_object_new_object();
			json_object_object_add(o, "token", json_object_new_int64(t->fencing_token));
			json_object_object_add(o, "node", json_str_or_null(t->node));
			json_object_object_add(o, "release", t->invalid ? NULL : json_release(t->release));
			json_object_object_add(o, "start_revision",
					       json_object_new_int64(t->start_revision));
			const char *at = fmt_time(t->start_unix, tb, sizeof(tb));
			json_object_object_add(o, "start", at ? json_object_new_string(at) : NULL);
			json_object_object_add(o, "end_revision",
					       json_object_new_int64(t->end_revision));
			at = fmt_time(t->end_unix, tb, sizeof(tb));
			json_object_object_add(o, "end", at ? json_object_new_string(at) : NULL);
			json_object_object_add(o, "end_reason", json_str_or_null(t->end_reason));
			json_object_object_add(o, "end_detail", json_str_or_null(t->end_detail));
			json_object_object_add(o, "valid", json_object_new_boolean(!t->invalid));
			json_object_array_add(a, o);
		}
		print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	char(*buf)[CELL] = r->n_terms ? calloc(r->n_terms * HCOLS, sizeof(*buf)) : NULL;
	const char **cells = r->n_terms ? calloc(r->n_terms * HCOLS, sizeof(*cells)) : NULL;
	if (r->n_terms && (!buf || !cells)) {
		free(buf);
		free(cells);
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < r->n_terms; i++) {
		const Leasehold__Control__Term *t = r->terms[i];
		char(*c)[CELL] = &buf[i * HCOLS];
		const char *at;
		snprintf(c[0], CELL, "%" PRId64, t->fencing_token);
		if (t->invalid) {
			snprintf(c[1], CELL, "-");
			snprintf(c[2], CELL, "-");
			snprintf(c[3], CELL, "-");
			snprintf(c[4], CELL, "-");
			snprintf(c[5], CELL, "-");
			snprintf(c[6], CELL, "the record does not decode");
		} else {
			clean(t->node, c[1], CELL, true);
			fmt_release(t->release, c[2], CELL);
			at = fmt_time(t->start_unix, tb, sizeof(tb));
			snprintf(c[3], CELL, "%s (rev %" PRId64 ")", at ? at : "-", t->start_revision);
			at = fmt_time(t->end_unix, tb, sizeof(tb));
			if (t->end_revision)
				snprintf(c[4], CELL, "%s (rev %" PRId64 ")", at ? at : "-",
					 t->end_revision);
			else
				snprintf(c[4], CELL, "-");
			clean(t->end_reason, c[5], CELL, true);
			clean(t->end_detail, c[6], 61, true);
		}
		for (size_t k = 0; k < HCOLS; k++)
			cells[i * HCOLS + k] = c[k];
	}
	snprintf(title, sizeof(title), "Plugin: %s", clean(name, nb, sizeof(nb), true));
	print_table(title, hdr, right, HCOLS, cells, r->n_terms);
	if (r->n_terms == 0)
		printf("(no terms recorded)\n");
	free(buf);
	free(cells);
	return EXIT_OK;
}

static int check_roles_args(const struct command *cmd, const char *const *args, size_t n)
{
	char b[CELL];
	const char *why;
	size_t bad;

	if (!control_codec_node_ok(args[0]))
		return usage_error(cmd,
				   "invalid node id '%s' (1 to %d printable ASCII characters, no "
				   "'/')",
				   clean(args[0], b, sizeof(b), false), CONTROL_NODE_MAX);
	if (control_codec_roles_check(args + 1, n - 1, &bad, &why) < 0) {
		if (bad >= n - 1)
			return usage_error(cmd, "%s", why);
		return usage_error(cmd, "%s: '%s'", why, clean(args[1 + bad], b, sizeof(b), false));
	}
	return EXIT_OK;
}

/* parse_timeout - seconds (fractional) -> ms. 0 or -EINVAL. */
static int parse_timeout(const char *s, uint32_t *ret_ms)
{
	char *end = NULL;
	double v;

	if (!s || !s[0])
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || !end || *end != '\0' || !isfinite(v) || v < 0 || v > CTL_WAIT_MAX_S)
		return -EINVAL;
	v *= 1000.0;
	*ret_ms = (uint32_t)v;
	if ((double)*ret_ms < v)
		(*ret_ms)++; /* round up: never wait less than asked */
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	const struct command *cmd = NULL;
	char urlbuf[4096], def[4096];
	const char *url, *name;
	Response *resp = NULL;
	Leasehold__Control__Kind kind;
	int64_t recv_timeout = CTL_TIMEOUT_MS;
	uint32_t timeout_ms = 0;
	uint8_t *req = NULL;
	size_t req_len = 0;
	bool roles = false, roles_group = false, timed_out = false;
	int ret, r;

	if ((ret = ctl_config_main(argc, argv)) >= 0)
		return ret;
	if (parse_args(argc, argv, &o) < 0)
		return EXIT_ERR;
	if (o.cmd && strcmp(o.cmd, "roles") == 0) {
		/* "roles SUB ARGS": look up "roles SUB" */
		roles = true;
		if (o.n_args == 0) {
			if (o.help) {
				print_roles_help(stdout);
				return EXIT_OK;
			}
			if (o.version) {
				printf("leaseholdctl %s\n", PACKAGE_VERSION);
				return EXIT_OK;
			}
			fprintf(stderr,
				"leaseholdctl: roles: missing subcommand (list, set or clear)\n");
			print_roles_help(stderr);
			return EXIT_ERR;
		}
		snprintf(urlbuf, sizeof(urlbuf), "roles %s", o.args[0]);
		cmd = find_command(urlbuf);
		if (!cmd) {
			char b[CELL];
			return usage_error(NULL,
					   "unknown roles subcommand '%s' (list, set or clear)",
					   clean(o.args[0], b, sizeof(b), false));
		}
		memmove(o.args, o.args + 1, (o.n_args - 1) * sizeof(o.args[0]));
		o.n_args--;
	} else if (o.cmd && strcmp(o.cmd, "members") == 0 && o.n_args >= 2 &&
		   strcmp(o.args[0], "forget") == 0) {
		/* "members forget NAME NODE" (plain "members NAME" has one argument) */
		cmd = find_command("members forget");
		memmove(o.args, o.args + 1, (o.n_args - 1) * sizeof(o.args[0]));
		o.n_args--;
	} else if (o.cmd && !strchr(o.cmd, ' ')) {
		cmd = find_command(o.cmd); /* "roles set" as one word is no command */
	}
	if (o.cmd && !cmd)
		return usage_error(NULL, "unknown command '%s'", o.cmd);
	if (o.help || (cmd && strcmp(cmd->name, "help") == 0)) {
		const struct command *about = cmd;
		if (cmd && strcmp(cmd->name, "help") == 0) {
			about = NULL;
			if (o.n_args == 1 && strcmp(o.args[0], "roles") == 0) {
				roles_group = true;
			} else if (o.n_args == 2) {
				/* two-word commands: "roles set", "members forget" */
				snprintf(urlbuf, sizeof(urlbuf), "%s %s", o.args[0], o.args[1]);
				about = find_command(urlbuf);
			} else if (o.n_args == 1) {
				about = find_command(o.args[0]);
			}
			if (o.n_args && !about && !roles_group)
				return usage_error(NULL, "unknown command '%s%s%s'", o.args[0],
						   o.n_args > 1 ? " " : "",
						   o.n_args > 1 ? o.args[1] : "");
		}
		if (about)
			print_command_help(stdout, about);
		else if (roles_group)
			print_roles_help(stdout);
		else
			print_help(stdout);
		return EXIT_OK;
	}
	if (o.version) {
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	if (!cmd) {
		fprintf(stderr, "leaseholdctl: no command given\n");
		print_help(stderr);
		return EXIT_ERR;
	}
	if (o.n_args < cmd->min_args)
		return usage_error(cmd, "%s: missing argument", cmd->name);
	if (o.n_args > cmd->max_args) {
		if (strcmp(cmd->name, "roles set") == 0)
			return usage_error(cmd, "too many roles (at most %d)", CONTROL_ROLES_MAX);
		return usage_error(cmd, "unexpected argument '%s'", o.args[cmd->max_args]);
	}
	if (o.json && !cmd->json)
		return usage_error(cmd, "%s does not take --json", cmd->name);
	if (o.has_timeout && !cmd->timeout)
		return usage_error(cmd, "%s does not take --timeout", cmd->name);
	if (o.yes && !cmd->confirm)
		return usage_error(cmd, "%s does not take --yes", cmd->name);
	if (cmd->confirm && !o.yes) {
		fprintf(stderr, "leaseholdctl: %s needs --yes. What it does:\n\n%s", cmd->name,
			cmd->help);
		return EXIT_ERR;
	}
	name = o.n_args ? o.args[0] : NULL;
	if (roles) {
		if (name && check_roles_args(cmd, o.args, o.n_args) != EXIT_OK)
			return EXIT_ERR;
	} else if (name && !control_codec_name_ok(name)) {
		return usage_error(cmd, "invalid plugin name '%s'", name);
	}
	if (strcmp(cmd->name, "members forget") == 0 && !control_codec_node_ok(o.args[1]))
		return usage_error(cmd, "invalid node id (1..128 printable ASCII characters, no '/')");

	url = o.control;
	if (!url || !url[0])
		url = getenv("LEASEHOLD_CONTROL");
	if (!url || !url[0])
		url = control_default_url(def, sizeof(def));
	if (url[0] == '/') {
		snprintf(urlbuf, sizeof(urlbuf), "ipc://%s", url);
		url = urlbuf;
	}

	if (strcmp(cmd->name, "plugins") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_PLUGINS;
	else if (strcmp(cmd->name, "status") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_STATUS;
	else if (strcmp(cmd->name, "members") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_MEMBERS;
	else if (strcmp(cmd->name, "reload") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_RELOAD;
	else if (strcmp(cmd->name, "version") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_VERSION;
	else if (strcmp(cmd->name, "roles list") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST;
	else if (strcmp(cmd->name, "roles set") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET;
	else if (strcmp(cmd->name, "roles clear") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR;
	else if (strcmp(cmd->name, "members forget") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET;
	else if (strcmp(cmd->name, "leave") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_LEAVE;
	else if (strcmp(cmd->name, "pause") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_PAUSE;
	else if (strcmp(cmd->name, "resume") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_RESUME;
	else if (strcmp(cmd->name, "history") == 0)
		kind = LEASEHOLD__CONTROL__KIND__KIND_HISTORY;
	else if (strcmp(cmd->name, "reconcile") == 0) {
		kind = LEASEHOLD__CONTROL__KIND__KIND_RECONCILE;
		timeout_ms = (uint32_t)(CTL_RECONCILE_DEFAULT_S * 1000);
		if (o.has_timeout && parse_timeout(o.timeout, &timeout_ms) < 0)
			return usage_error(cmd, "invalid --timeout '%s' (seconds, >= 0)",
					   o.timeout);
		/* the request's own etcd write, then the wait */
		recv_timeout = (int64_t)timeout_ms + CTL_WRITE_TIMEOUT_MS;
	} else {
		kind = LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY;
		timeout_ms = (uint32_t)(CTL_WAIT_DEFAULT_S * 1000);
		if (o.has_timeout && parse_timeout(o.timeout, &timeout_ms) < 0)
			return usage_error(cmd, "invalid --timeout '%s' (seconds, >= 0)",
					   o.timeout);
		recv_timeout = (int64_t)timeout_ms + CTL_WAIT_MARGIN_MS;
	}

	if (kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET ||
	    kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR) {
		recv_timeout = CTL_WRITE_TIMEOUT_MS;
		r = control_codec_roles_request_encode(kind, name, o.args + 1, o.n_args - 1, &req,
						       &req_len);
	} else if (kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET) {
		recv_timeout = CTL_WRITE_TIMEOUT_MS;
		r = control_codec_forget_request_encode(name, o.args[1], &req, &req_len);
	} else {
		if (kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ||
		    kind == LEASEHOLD__CONTROL__KIND__KIND_RESUME ||
		    kind == LEASEHOLD__CONTROL__KIND__KIND_HISTORY)
			recv_timeout = CTL_WRITE_TIMEOUT_MS;
		r = control_codec_request_encode(kind, roles ? NULL : name, timeout_ms, &req,
						 &req_len);
	}
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: cannot encode the request\n");
		return EXIT_ERR;
	}
	if (kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET && o.n_args == 1) {
		char b[CELL];
		fprintf(stderr,
			"leaseholdctl: note: no ROLE given: node %s will hold no roles (its record "
			"stays; 'roles clear' deletes it)\n",
			clean(name, b, sizeof(b), false));
	}
	if (kind == LEASEHOLD__CONTROL__KIND__KIND_VERSION) {
		/* the client's own version needs no daemon */
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		fflush(stdout);
	}
	ret = call(url, req, req_len, recv_timeout, &resp, &timed_out);
	free(req);
	if (ret != EXIT_OK) {
		if (timed_out && (kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET ||
				  kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR ||
				  kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET ||
				  kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ||
				  kind == LEASEHOLD__CONTROL__KIND__KIND_RESUME))
			fprintf(stderr,
				"leaseholdctl: the write may or may not have happened; check "
				"with 'leaseholdctl %s'\n",
				kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET ? "members NAME"
				: kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET ||
						kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR
				    ? "roles list"
				    : "status NAME");
		return ret;
	}
	ret = check_code(resp, roles);
	if (ret == EXIT_OK) {
		switch (kind) {
		case LEASEHOLD__CONTROL__KIND__KIND_PLUGINS:
			ret = cmd_plugins(resp, o.json);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_STATUS:
			ret = cmd_status(resp, o.json);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS:
			ret = cmd_members(resp, o.json);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY:
			printf("%s is ready\n", name);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_RELOAD:
			printf("reload requested: %s\n", name ? name : "all plugins");
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST:
			ret = cmd_roles_list(resp, o.json);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET: {
			char b[CELL], l[CELL];
			RoleEntry e = LEASEHOLD__CONTROL__ROLE_ENTRY__INIT;
			e.roles = (char **)(o.args + 1);
			e.n_roles = o.n_args - 1;
			printf("node %s: roles set to %s\n", clean(name, b, sizeof(b), false),
			       e.n_roles ? role_list(&e, l, sizeof(l)) : "(none)");
			break;
		}
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR: {
			char b[CELL];
			printf("node %s: roles record deleted\n", clean(name, b, sizeof(b), false));
			break;
		}
		case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET: {
			char b[CELL], n[CELL];
			printf("plugin %s: node %s forgotten\n", clean(name, b, sizeof(b), false),
			       clean(o.args[1], n, sizeof(n), false));
			break;
		}
		case LEASEHOLD__CONTROL__KIND__KIND_PAUSE:
		case LEASEHOLD__CONTROL__KIND__KIND_RESUME: {
			char b[CELL];
			printf(kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE
				   ? "plugin %s: paused cluster-wide (the leader starts no reconcile)\n"
				   : "plugin %s: resumed (the leader reconciles now)\n",
			       clean(name, b, sizeof(b), false));
			break;
		}
		case LEASEHOLD__CONTROL__KIND__KIND_RECONCILE: {
			char b[CELL];
			if (timeout_ms == 0)
				printf("plugin %s: reconcile requested (revision %" PRId64 ")\n",
				       clean(name, b, sizeof(b), false), resp->revision);
			else
				printf("plugin %s: reconcile request %" PRId64 " served by the leader\n",
				       clean(name, b, sizeof(b), false), resp->revision);
			break;
		}
		case LEASEHOLD__CONTROL__KIND__KIND_HISTORY:
			ret = cmd_history(resp, name, o.json);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_LEAVE:
			printf("leaving: the daemon drains, deletes this node's member records and "
			       "exits\n");
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_VERSION: {
			char v[CELL], n[CELL];
			printf("leasehold %s (node %s, protocol %" PRIu32 ")\n",
			       clean(resp->daemon_version, v, sizeof(v), true),
			       clean(resp->node, n, sizeof(n), true), resp->protocol);
			break;
		}
		default:
			break;
		}
	}
	leasehold__control__response__free_unpacked(resp, NULL);
	if (fflush(stdout) != 0 && ret == EXIT_OK)
		ret = EXIT_ERR;
	return ret;
}

/* ---- for ctl_plugin_config.c (ctl_plugin_config.h) ---- */

int ctl_call(const char *url, const uint8_t *req, size_t req_len, int64_t timeout_ms,
	     Response **ret_resp, bool *ret_timed_out)
{
	return call(url, req, req_len, timeout_ms, ret_resp, ret_timed_out);
}

int ctl_check_code(const Response *r)
{
	return check_code(r, false);
}

const char *ctl_control_url(const char *opt, char *buf, size_t len)
{
	char def[4096];
	const char *url = opt;
	if (!url || !url[0])
		url = getenv("LEASEHOLD_CONTROL");
	if (!url || !url[0])
		url = control_default_url(def, sizeof(def));
	snprintf(buf, len, "%s%s", url[0] == '/' ? "ipc://" : "", url);
	return buf;
}
