/* SPDX-License-Identifier: MIT */
/*
 * ctl_commands.c - leaseholdctl's commands: the table of every command with its
 * synopsis, summary and help text, and the help printers built from it.
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
#include "election/election.h"
#include "proto/leasehold.pb-c.h"
#include "ctl/ctl_suggest.h"

const struct command ctl_commands[] = {
    {"plugins", 0, 0, true, false, false, "plugins", "list every plugin",
     "List every plugin of this node's daemon: release, election state, leader,\n"
     "readiness, member releases (min..max), status record, reconciles; then the\n"
     "cluster: one row per node of each plugin, as 'members' prints them.\n"
     "--json prints a JSON array with one object per plugin (its node rows in\n"
     "\"nodes\"). -o wide: no cell cut; --no-headers: the plugin rows only;\n"
     "-w: print it again whenever it changes, until ^C.\n"},
    {"status", 1, 1, true, false, false, "status NAME", "one plugin in detail",
     "Show one plugin in detail (key: value lines, or one JSON object).\n"
     "NAME is a plugin name (the file that runs it), or a file name in the\n"
     "plugin directory (it contains a '.', e.g. x-1.3.0.so): that file's row.\n"},
    {"members", 1, 1, true, false, false, "members NAME", "a plugin's members",
     "List plugin NAME's members: every node that runs it or ran it and has not\n"
     "left (a node that is down or cut off still counts, with its last release).\n"
     "Columns: node id, plugin release, leader, campaigning (it holds an election\n"
     "key now: alive and of the newest release; a member that does not is on an\n"
     "older release, down or cut off), then what the node publishes itself\n"
     "(P/NAME/nodes/NODE, bound to its lease): STATE (\"down\" without a record:\n"
     "its lease is gone), READY, LAST RECONCILE, REASON, LOCAL (* = this node).\n"
     "-o json prints an array of {\"node\", \"release\", \"leader\", \"campaigning\",\n"
     "\"local\", \"member\", \"state\", \"reason\", \"since\", \"ready\", \"not_ready\",\n"
     "\"last_reconcile\": null or {\"at\", \"ok\", \"error\"}, \"state_record\"}.\n"
     "-w: print it again whenever it changes, until ^C.\n"},
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
    {"wait-ready", 1, 1, false, true, false, "wait-ready NAME [--timeout DUR]",
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
    {"roles list", 0, 0, true, false, false, "roles list", "every node's roles",
     "List every node's roles record (etcd P/roles/<node-id>) as this daemon\n"
     "mirrors it: node id, roles (comma-separated, \"-\" for none) and, for a\n"
     "record that is invalid, why (role-bound plugins on that node are then held\n"
     "back). Nodes without a record hold no roles and are not listed.\n"
     "--json prints an array of {\"node\", \"roles\": [..], \"error\": null or string}.\n"},
    {"roles set", 1, 1 + CONTROL_ROLES_MAX, false, false, false, "roles set NODE [ROLE...] [--force]",
     "replace a node's roles",
     "Replace node NODE's roles with ROLE... (at most 64 distinct names, each\n"
     "[a-z0-9_-], 1 to 63 characters). Without a ROLE the node keeps an empty\n"
     "record (no roles); 'roles clear' deletes the record instead. The daemon\n"
     "answers once etcd has stored the record; plugins that need a role start\n"
     "or stop on that node as soon as its daemon sees the change.\n"
     "Refused for a node that has never registered (etcd holds no member record\n"
     "or node state record of it for any plugin), so a typo writes nothing;\n"
     "--force writes anyway (a node not started yet). This daemon's own node\n"
     "is never refused.\n"
     "Exit 1 when the write failed (e.g. etcd unavailable), 2 refused.\n"},
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
    {"reconcile", 1, 1, false, true, false, "reconcile NAME [--timeout DUR]",
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
    {"history", 1, 1, true, false, false, "history NAME",
     "a plugin's leadership terms",
     "Show plugin NAME's last (at most 100) leadership terms, newest first:\n"
     "fencing token, node, release, start and end (etcd revision, UTC time) and\n"
     "why the term ended (ENDED BY, one of the end reasons below; DETAIL: the\n"
     "failure of plugin-failed). lease-lost: the leader's key went without a\n"
     "resign (lease expired or session lost), recorded by the successor. An\n"
     "empty end: the term lasts.\n"
     "--json prints an array of {\"token\", \"node\", \"release\", \"start_revision\",\n"
     "\"start\", \"end_revision\", \"end\", \"end_reason\", \"end_detail\", \"valid\"}.\n"
     "-w: print it again whenever it changes (each poll reads etcd), until ^C.\n"},
    {"switchover", 1, 1, true, true, false, "switchover NAME [--to NODE] [--timeout DUR]",
     "hand a plugin's leadership over now",
     "Ask plugin NAME's leader, wherever it runs, to hand over gracefully (as on\n"
     "SIGTERM: its queue drains, its term ends, it keeps running and campaigns\n"
     "again). With --to NODE, NODE becomes the leader: candidates ahead of it give\n"
     "up their place until it leads, it goes, or the timeout passes (then a\n"
     "normal election). The request is a record in etcd (P/NAME/handover) that\n"
     "expires after the timeout. Refused, before anything changes, when the plugin\n"
     "is paused, another switchover is in flight, there is no leader, no other\n"
     "node campaigns (without --to), or NODE leads already, lacks the plugin's\n"
     "role, does not run the plugin, runs an older release than the newest, or\n"
     "does not campaign (its plugin failed, it is held back, or it is down).\n"
     "Waits until the request ended (the new leader ends it once it leads) or DUR\n"
     "passed (seconds, or with a unit: 1500ms, 30s, 2m; 2 s to 1 h; default 30 s).\n"
     "--json prints {\"plugin\", \"to\", \"switched\", \"leader\", \"revision\",\n"
     "\"error\"}.\n"
     "Exit 0 the switchover happened (NODE leads; without --to another node\n"
     "leads), 1 it did not (it ended or timed out without that, or the request\n"
     "could not be written), 2 refused (the reason is printed) or usage error.\n"},
    {"shadow", 1, 1, true, true, false, "shadow NAME [--node NODE] [--timeout DUR]",
     "preview a release's writes",
     "Run one reconcile of plugin NAME on this node's daemon, which must not lead\n"
     "it (e.g. a newer release that stands by during a rollout), with every write\n"
     "captured by the host instead of sent: nothing is written to etcd. A plugin\n"
     "with watches first gets their snapshot (every watched prefix read at one\n"
     "revision, as a term begins; no live events); a keyed plugin then runs\n"
     "reconcile_key once per key of it (at most 1000). The plugin's reads are\n"
     "served from etcd as usual (the report names the revisions of its first and\n"
     "last read), its txns' compares are decided by etcd, and it is not told it\n"
     "leads (fencing_token() is 0). Prints the counts of puts, deletes and unchanged\n"
     "writes, then per key the old value (read in the same txn) and the new one,\n"
     "each as its first 32 bytes, its length and its FNV-1a 64 hash. At most 1000\n"
     "writes are captured (past that the run is marked TRUNCATED).\n"
     "--node NODE: refused unless the daemon asked is NODE (use --control to reach\n"
     "another node's daemon). --timeout DUR bounds the run (default 10 s; 100ms to\n"
     "10m). -o json prints {\"plugin\", \"revision\", \"last_revision\", \"puts\",\n"
     "\"deletes\", \"unchanged\", \"txns\", \"truncated\", \"error\", \"writes\": [{\"op\",\n"
     "\"key\", \"old\", \"new\"}]} (a value: null or {\"head\", \"length\",\n"
     "\"truncated\", \"fnv1a64\"}).\n"
     "Exit 0 the reconcile ran and returned 0, 1 it failed or DUR passed (what\n"
     "was captured until then is printed), 2 refused (this node leads the\n"
     "plugin, another node was named, a run is in progress) or usage error.\n"},
    {"watch", 0, 1, true, true, false, "watch [NAME]",
     "stream the cluster's changes (reads etcd)",
     "Print every change of plugin NAME (or of every plugin) as it happens, one line\n"
     "each, in etcd revision order, each change once, until interrupted: the leader,\n"
     "each node's state record (state, readiness, last reconcile), members joining,\n"
     "leaving or changing release, the status record, pause and resume, terms\n"
     "beginning and ending, reconcile requests, configuration changes.\n"
     "A line: REVISION PLUGIN: what changed. -o json prints one JSON object per line:\n"
     "{\"revision\", \"plugin\", \"kind\": leader|node|member|status|pause|history|\n"
     "reconcile|config, and the fields of that kind} (see leaseholdctl(1)).\n"
     "Reads etcd directly, so it needs --etcd (observer mode).\n"
     "--from-revision R replays the changes after revision R first (etcd must still\n"
     "hold them); --to-revision R ends once every change up to R was printed;\n"
     "--timeout DUR ends after DUR. Exit 0 when it ended so, 1 when the watch\n"
     "failed (e.g. the revision was compacted).\n"},
    {"config get", 1, 1, true, false, false, "config get NAME",
     "a plugin's cluster-wide configuration", CTL_CONFIG_GET_HELP},
    {"config set", 2, 2, false, false, false, "config set NAME FILE|- [--revision R] [--force]",
     "replace a plugin's configuration", CTL_CONFIG_SET_HELP},
    {"config edit", 1, 1, false, false, false, "config edit NAME [--force]",
     "edit a plugin's configuration", CTL_CONFIG_EDIT_HELP},
    {"release", 1, 1, true, false, false, "release NAME",
     "a plugin's rollout: pin, release that acts, members per release",
     "Show plugin NAME's rollout: the pin (P/NAME/pin) if any, the release that\n"
     "may act now under the release rule and why, the leader and its release,\n"
     "the status record, then each release's members with their state and\n"
     "readiness. --json prints {\"plugin\", \"pin\": null or {\"release\",\n"
     "\"forced\", \"by\", \"at\"}, \"pin_error\", \"acting\": null or {\"release\",\n"
     "\"basis\"}, \"leader\", \"leader_release\", \"releases\": [{\"release\",\n"
     "\"members\", \"ready\", \"nodes\": [member rows]}]}.\n"
     "-w: print it again whenever it changes, until ^C.\n"},
    {"release pin", 2, 2, false, false, false, "release pin NAME VERSION [--force]",
     "hold a plugin's rollout at a release",
     "Pin plugin NAME at release VERSION (major.minor.patch; a record in etcd,\n"
     "P/NAME/pin): no release newer than VERSION campaigns, so the newest\n"
     "release at or below it that can act keeps leading while newer files are\n"
     "loaded on every node; 'release unpin' then hands over once. Refused\n"
     "(exit 2, nothing written) when no member runs VERSION, when the plugin\n"
     "has no members, when the records changed while the pin was checked, and\n"
     "when VERSION is older than the status's version: --force pins it anyway\n"
     "(its leader takes the reconciled state back: it restricts the status to\n"
     "VERSION and reconciles with that release's code; a warning says so).\n"
     "Exit 0 once etcd stored it, 1 when the write failed.\n"},
    {"release unpin", 1, 1, false, false, false, "release unpin NAME", "end a plugin's pin",
     "Delete plugin NAME's pin (whatever it holds): the release rule's default\n"
     "answer applies again, the nodes load the files that waited for the pin,\n"
     "and a leader of an older release hands over to the newest release that\n"
     "can act (one handover). Unpinning a plugin that is not pinned is not an\n"
     "error. Exit 0 once etcd stored it, 1 when it failed.\n"},
    {"version", 0, 0, false, false, false, "version", "client and daemon versions",
     "Print leaseholdctl's version and the daemon's version, node id and protocol.\n"},
    {"help", 0, 2, false, false, false, "help [COMMAND]", "show help",
     "Show help for leaseholdctl or one command (e.g. help roles set).\n"},
    {"completion", 1, 1, false, false, false, "completion bash|zsh",
     "print a shell completion script",
     "Print a completion script for bash or zsh, generated from this\n"
     "leaseholdctl's commands and options. make install and the Debian package\n"
     "install both (bash-completion's completions directory, zsh's\n"
     "site-functions); to load it by hand: source <(leaseholdctl completion bash).\n"
     "Plugin names are completed from 'leaseholdctl plugins --no-headers' (with\n"
     "the --control or --etcd options already on the line).\n"},
};
const size_t ctl_n_commands = sizeof(ctl_commands) / sizeof(ctl_commands[0]);
#define N_COMMANDS ctl_n_commands

const struct command *ctl_commands_find(const char *name)
{
	for (size_t i = 0; name && i < N_COMMANDS; i++)
		if (strcmp(ctl_commands[i].name, name) == 0)
			return &ctl_commands[i];
	return NULL;
}

void ctl_commands_print_help(FILE *out)
{
	char def[512];
	fprintf(out, "Usage: leaseholdctl [--control URL] COMMAND [ARGS] [OPTIONS]\n"
		     "       leaseholdctl --etcd URL[,URL] [etcd options] COMMAND [ARGS] [OPTIONS]\n\n"
		     "Operate the local leasehold daemon through its control socket, or (observer\n"
		     "mode, --etcd) read and steer the cluster straight from etcd.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-30s %s\n", ctl_commands[i].synopsis, ctl_commands[i].summary);
	fprintf(out,
		"\nOptions (accepted before or after the command):\n"
		"  --control URL  the daemon's control socket, ipc:///path (or a /path).\n"
		"                 Default: $LEASEHOLD_CONTROL, else the control key of\n"
		"                 the daemon's configuration file, else\n"
		"                 ipc://$XDG_RUNTIME_DIR/leasehold.sock, else\n"
		"                 ipc:///run/leasehold/control.sock (here: %s)\n"
		"  --config FILE  the daemon's configuration file (default\n"
		"                 " LH_CONFIG_FILE ", when it exists)\n"
		"  -o, --output table|wide|json|yaml\n"
		"                 output format of plugins, status, members, roles list,\n"
		"                 history, release, switchover, shadow (json and yaml);\n"
		"                 config get, watch (json). Default table: cut to fit\n"
		"                 $COLUMNS or the terminal; wide: every cell in full\n"
		"  --json         the same as -o json\n"
		"  --no-headers   tables: the data rows only\n"
		"  -w, --watch    plugins, members, release, history: redraw when the\n"
		"                 answer changes (asked at most every 500 ms) until ^C\n"
		"  --revision R   config set: write only over the configuration of revision R\n"
		"  --force        config set/edit: also for a plugin that has never run;\n"
		"                 roles set: also for a node that has never registered\n"
		"  --timeout DUR  30, 2.5, 500ms, 30s, 2m, 1h: wait-ready (default 60 s),\n"
		"                 reconcile (default 30 s), switchover (default 30 s), shadow\n"
		"                 (default 10 s): give up after DUR; every other command:\n"
		"                 the deadline of the whole call (default 10 s, 30 s for\n"
		"                 etcd writes)\n"
		"  --to NODE      switchover: the node that is to lead\n"
		"  --node NODE    shadow: refused unless the daemon asked is NODE\n"
		"  -h, --help     this help; after a command, that command's help\n"
		"\nObserver mode (no daemon, no plugin on this machine):\n"
		"  --etcd URL[,URL]   answer from etcd: plugins, status, members, history,\n"
		"                     roles list, watch, pause, resume, reconcile,\n"
		"                     switchover, config (not validated by the plugin); the\n"
		"                     daemon-only commands (reload, wait-ready, leave,\n"
		"                     roles set/clear, members forget, shadow) are refused\n"
		"  --etcd-cacert FILE, --etcd-cert FILE, --etcd-key FILE\n"
		"                     TLS: CA bundle, client certificate and key (PEM)\n"
		"  --etcd-user NAME   etcd user; the password comes from\n"
		"                     $LEASEHOLD_ETCD_PASSWORD, else it is asked on the terminal\n"
		"  --prefix PREFIX    the daemons' --prefix (default /leasehold)\n"
		"  --from-revision R, --to-revision R\n"
		"                     watch: replay from after R / end after R\n"
		"  --version      print leaseholdctl's version\n"
		"\nExit codes:\n"
		"  0  success (wait-ready: the plugin is ready)\n"
		"  1  the daemon answered but the operation did not succeed\n"
		"     (wait-ready timed out, reload failed, roles set/clear failed,\n"
		"     pause/resume failed, reconcile failed or not served in time,\n"
		"     switchover did not happen)\n"
		"  2  error: bad usage, unknown plugin, invalid node or role name,\n"
		"     a refused switchover or reconcile, config set to a plugin that has\n"
		"     never run or roles set to a node that has never registered (without\n"
		"     --force), an unreadable --config file, protocol error, the daemon\n"
		"     closed the connection\n"
		"  3  no socket file: the daemon is not running (or another --control)\n"
		"  4  connection refused: a stale socket file, its daemon is gone\n"
		"  5  permission denied: run as root or as the daemon's user\n"
		"  6  refused by the daemon: another uid, or too many connections\n"
		"  7  no answer from the daemon in time\n"
		"  8  config set/edit: the configuration changed since it was read\n",
		control_default_url(def, sizeof(def)));
}

/* ctl_commands_print_end_reasons - every term end reason the daemon
 * records, from the proto enum through election_term_end_name */
static void ctl_commands_print_end_reasons(FILE *out)
{
	const ProtobufCEnumDescriptor *d = &leasehold__term__end_reason__descriptor;
	fprintf(out, "End reasons:");
	for (unsigned i = 0; i < d->n_values; i++) {
		const char *n = election_term_end_name(d->values[i].value);
		if (n[0])
			fprintf(out, " %s", n);
	}
	fprintf(out, "\n");
}

const char *ctl_commands_usage(const struct command *cmd, char *buf, size_t len)
{
	const char *formats = !cmd->json                       ? ""
	                      : ctl_main_lists(cmd)             ? " [-o table|wide|json|yaml] [--no-headers]"
	                      : strcmp(cmd->name, "watch") == 0 ? " [-o table|json]"
	                      : strcmp(cmd->name, "config get") == 0 ? " [-o json]"
	                                                             : " [-o table|json|yaml]";
	snprintf(buf, len, "%s%s%s", cmd->synopsis, formats, ctl_main_watches(cmd) ? " [-w]" : "");
	return buf;
}

void ctl_commands_print_command_help(FILE *out, const struct command *cmd)
{
	char usage[256];
	fprintf(out, "Usage: leaseholdctl [--control URL] %s\n\n%s",
		ctl_commands_usage(cmd, usage, sizeof(usage)), cmd->help);
	if (strcmp(cmd->name, "history") == 0)
		ctl_commands_print_end_reasons(out);
	fprintf(out, "\nExit codes: 0 success, 1 operation did not succeed (wait-ready timeout,\n"
		     "reload failed, roles write failed), 2 error (usage, unknown plugin,\n"
		     "invalid node or role name), 3-7 the daemon could not be asked (3 no\n"
		     "socket file, 4 stale socket, 5 permission denied, 6 refused, 7 timeout).\n"
		     "See leaseholdctl --help for the common options.\n");
}

/* ctl_commands_print_group_help - a command group ("roles", "config"): its commands. */
void ctl_commands_print_group_help(FILE *out, const char *group)
{
	bool roles = strcmp(group, "roles") == 0;
	size_t gl = strlen(group);
	fprintf(out, "Usage: leaseholdctl [--control URL] %s\n\n%s\n\n",
		roles ? "roles list|set|clear [ARGS]" : "config get|set|edit NAME [ARGS]",
		roles ? "Node roles (etcd P/roles/<node-id>): a plugin that declares a role runs\n"
			"only on nodes holding it."
		      : "A plugin's cluster-wide configuration (etcd P/NAME/config), one JSON\n"
			"object the same on every node.");
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strncmp(ctl_commands[i].name, group, gl) == 0 && ctl_commands[i].name[gl] == ' ')
			fprintf(out, "  %-30s %s\n", ctl_commands[i].synopsis, ctl_commands[i].summary);
	fprintf(out, "\nSee leaseholdctl help %s %s for details.\n", group,
		roles ? "list|set|clear" : "get|set|edit");
}

void ctl_commands_print_roles_help(FILE *out)
{
	ctl_commands_print_group_help(out, "roles");
}

int ctl_usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctl_vfail(EXIT_ERR, fmt, ap);
	va_end(ap);
	char usage[256];
	if (cmd)
		fprintf(stderr, "Usage: leaseholdctl [--control URL] %s\n",
			ctl_commands_usage(cmd, usage, sizeof(usage)));
	else
		fprintf(stderr, "Usage: leaseholdctl [--control URL] COMMAND [ARGS] [OPTIONS]\n");
	fprintf(stderr, "Try 'leaseholdctl --help'.\n");
	return EXIT_ERR;
}

const char *ctl_commands_suggest(const char *word, const char *group)
{
	static char heads[64][32]; /* a group's first word ("roles") */
	const char *cands[64];
	size_t n = 0, gl = group ? strlen(group) : 0;

	for (size_t i = 0; i < N_COMMANDS && n < sizeof(cands) / sizeof(cands[0]); i++) {
		const char *name = ctl_commands[i].name;
		size_t hl = strcspn(name, " ");
		if (group) {
			if (strncmp(name, group, gl) == 0 && name[gl] == ' ')
				cands[n++] = name + gl + 1;
			continue;
		}
		if (!name[hl]) {
			cands[n++] = name;
			continue;
		}
		/* a two-word command stands for its group's first word, once */
		snprintf(heads[n], sizeof(heads[n]), "%.*s", (int)hl, name);
		bool seen = false;
		for (size_t j = 0; j < n && !seen; j++)
			seen = strcmp(cands[j], heads[n]) == 0;
		if (!seen) {
			cands[n] = heads[n];
			n++;
		}
	}
	return ctl_suggest(word, cands, n);
}
