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
	const char *timeout;
	const char *to; /* switchover --to */
	const char *node; /* shadow --node */
	/* observer mode (ctl_observer.h): answered from etcd when etcd is set */
	struct ctl_etcd_opts etcd;
	const char *from_revision, *to_revision; /* watch */
};

/* the options that take a value: --NAME VALUE or --NAME=VALUE */
static const char **ctl_main_value_option(struct opts *o, const char *a, size_t *ret_len)
{
	static const struct {
		const char *name;
		size_t off;
	} vo[] = {
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
	for (size_t i = 0; i < sizeof(vo) / sizeof(vo[0]); i++) {
		size_t n = strlen(vo[i].name);
		if (strncmp(a, vo[i].name, n) == 0 && (a[n] == '\0' || a[n] == '=')) {
			*ret_len = n;
			return (const char **)((char *)o + vo[i].off);
		}
	}
	return NULL;
}

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
     "readiness, member releases (min..max), status record, reconciles; then the\n"
     "cluster: one row per node of each plugin, as 'members' prints them.\n"
     "--json prints a JSON array with one object per plugin (its node rows in\n"
     "\"nodes\").\n"},
    {"status", 1, 1, true, false, false, "status NAME [--json]", "one plugin in detail",
     "Show one plugin in detail (key: value lines, or one JSON object).\n"
     "NAME is a plugin name (the file that runs it), or a file name in the\n"
     "plugin directory (it contains a '.', e.g. x-1.3.0.so): that file's row.\n"},
    {"members", 1, 1, true, false, false, "members NAME [--json]", "a plugin's members",
     "List plugin NAME's members: every node that runs it or ran it and has not\n"
     "left (a node that is down or cut off still counts, with its last release).\n"
     "Columns: node id, plugin release, leader, campaigning (it holds an election\n"
     "key now: alive and of the newest release; a member that does not is on an\n"
     "older release, down or cut off), then what the node publishes itself\n"
     "(P/NAME/nodes/NODE, bound to its lease): STATE (\"down\" without a record:\n"
     "its lease is gone), READY, LAST RECONCILE, REASON, LOCAL (* = this node).\n"
     "-o json prints an array of {\"node\", \"release\", \"leader\", \"campaigning\",\n"
     "\"local\", \"member\", \"state\", \"reason\", \"since\", \"ready\", \"not_ready\",\n"
     "\"last_reconcile\": null or {\"at\", \"ok\", \"error\"}, \"state_record\"}.\n"},
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
    {"roles list", 0, 0, true, false, false, "roles list [--json]", "every node's roles",
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
     "captured by the host instead of sent: nothing is written to etcd. The\n"
     "plugin's reads are served from etcd as usual (not at one fixed revision;\n"
     "the report names the revisions of its first and last read), its txns' compares\n"
     "are decided by etcd, it is not told it leads (fencing_token() is 0) and\n"
     "gets no watch batches. Prints the counts of puts, deletes and unchanged\n"
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
    {"watch", 0, 1, true, true, false, "watch [NAME] [-o json]",
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
    {"config get", 1, 1, true, false, false, "config get NAME [--json]",
     "a plugin's cluster-wide configuration", CTL_CONFIG_GET_HELP},
    {"config set", 2, 2, false, false, false, "config set NAME FILE|- [--revision R] [--force]",
     "replace a plugin's configuration", CTL_CONFIG_SET_HELP},
    {"config edit", 1, 1, false, false, false, "config edit NAME [--force]",
     "edit a plugin's configuration", CTL_CONFIG_EDIT_HELP},
    {"release", 1, 1, true, false, false, "release NAME [--json]",
     "a plugin's rollout: pin, release that acts, members per release",
     "Show plugin NAME's rollout: the pin (P/NAME/pin) if any, the release that\n"
     "may act now under the release rule and why, the leader and its release,\n"
     "the status record, then each release's members with their state and\n"
     "readiness. --json prints {\"plugin\", \"pin\": null or {\"release\",\n"
     "\"forced\", \"by\", \"at\"}, \"pin_error\", \"acting\": null or {\"release\",\n"
     "\"basis\"}, \"leader\", \"leader_release\", \"releases\": [{\"release\",\n"
     "\"members\", \"ready\", \"nodes\": [member rows]}]}.\n"},
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
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *ctl_main_find_command(const char *name)
{
	for (size_t i = 0; name && i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void ctl_main_print_help(FILE *out)
{
	char def[512];
	fprintf(out, "Usage: leaseholdctl [--control URL] COMMAND [ARGS] [OPTIONS]\n"
		     "       leaseholdctl --etcd URL[,URL] [etcd options] COMMAND [ARGS] [OPTIONS]\n\n"
		     "Operate the local leasehold daemon through its control socket, or (observer\n"
		     "mode, --etcd) read and steer the cluster straight from etcd.\n\n"
		     "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-30s %s\n", commands[i].synopsis, commands[i].summary);
	fprintf(out,
		"\nOptions (accepted before or after the command):\n"
		"  --control URL  the daemon's control socket, ipc:///path (or a /path).\n"
		"                 Default: $LEASEHOLD_CONTROL, else the control key of\n"
		"                 the daemon's configuration file, else\n"
		"                 ipc://$XDG_RUNTIME_DIR/leasehold.sock, else\n"
		"                 ipc:///run/leasehold/control.sock (here: %s)\n"
		"  --config FILE  the daemon's configuration file (default\n"
		"                 " LH_CONFIG_FILE ", when it exists)\n"
		"  -o, --output table|json\n"
		"                 output format of plugins, status, members, roles list,\n"
		"                 history, switchover, watch, shadow (default table)\n"
		"  --json         the same as -o json\n"
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

static void ctl_main_print_command_help(FILE *out, const struct command *cmd)
{
	fprintf(out, "Usage: leaseholdctl [--control URL] %s\n\n%s", cmd->synopsis, cmd->help);
	fprintf(out, "\nExit codes: 0 success, 1 operation did not succeed (wait-ready timeout,\n"
		     "reload failed, roles write failed), 2 error (usage, unknown plugin,\n"
		     "invalid node or role name), 3-7 the daemon could not be asked (3 no\n"
		     "socket file, 4 stale socket, 5 permission denied, 6 refused, 7 timeout).\n"
		     "See leaseholdctl --help for the common options.\n");
}

/* ctl_main_print_group_help - a command group ("roles", "config"): its commands. */
static void ctl_main_print_group_help(FILE *out, const char *group)
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
		if (strncmp(commands[i].name, group, gl) == 0 && commands[i].name[gl] == ' ')
			fprintf(out, "  %-30s %s\n", commands[i].synopsis, commands[i].summary);
	fprintf(out, "\nSee leaseholdctl help %s %s for details.\n", group,
		roles ? "list|set|clear" : "get|set|edit");
}

static void ctl_main_print_roles_help(FILE *out)
{
	ctl_main_print_group_help(out, "roles");
}

static int ctl_main_usage_error(const struct command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int ctl_main_usage_error(const struct command *cmd, const char *fmt, ...)
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

static int ctl_main_find_control(const struct opts *o, char *buf, size_t len, const char **ret_url)
{
	return ctl_find_control(o->control, o->config, buf, len, ret_url);
}

/* ctl_main_parse_args - fill o; returns -1 (and prints) on a usage error. */
static int ctl_main_parse_args(int argc, char **argv, struct opts *o)
{
	bool only_positional = false;
	const char **slot;
	size_t nl;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_positional && a[0] == '-' && a[1] != '\0') {
			if (strcmp(a, "--") == 0) {
				only_positional = true;
			} else if ((slot = ctl_main_value_option(o, a, &nl)) != NULL) {
				if (a[nl] == '=') {
					*slot = a + nl + 1;
				} else if (i + 1 >= argc) {
					ctl_main_usage_error(ctl_main_find_command(o->cmd), "option %s needs a value",
						    a);
					return -1;
				} else {
					*slot = argv[++i];
				}
				if (slot == &o->timeout)
					o->has_timeout = true;
			} else if (strcmp(a, "--json") == 0) {
				o->json = true;
			} else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
				   strncmp(a, "--output=", 9) == 0) {
				const char *v = a[2] == 'o' && a[8] == '=' ? a + 9 : NULL;
				if (!v && i + 1 >= argc) {
					ctl_main_usage_error(ctl_main_find_command(o->cmd), "option %s needs a value (table or json)", a);
					return -1;
				}
				if (!v)
					v = argv[++i];
				if (strcmp(v, "json") == 0)
					o->json = true;
				else if (strcmp(v, "table") == 0)
					o->json = false;
				else {
					ctl_main_usage_error(ctl_main_find_command(o->cmd),
						    "unknown output format '%s' (table or json)", v);
					return -1;
				}
			} else if (strcmp(a, "--yes") == 0 || strcmp(a, "-y") == 0) {
				o->yes = true;
			} else if (strcmp(a, "--force") == 0) {
				o->force = true;
			} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
				o->help = true;
			} else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
				o->version = true;
			} else {
				ctl_main_usage_error(ctl_main_find_command(o->cmd), "unknown option '%s'", a);
				return -1;
			}
			continue;
		}
		if (!o->cmd)
			o->cmd = a;
		else if (o->n_args < sizeof(o->args) / sizeof(o->args[0]))
			o->args[o->n_args++] = a;
		else {
			ctl_main_usage_error(ctl_main_find_command(o->cmd), "too many arguments ('%s')", a);
			return -1;
		}
	}
	return 0;
}

/* ---- what the commands share ------------------------------------------ */

/* ctl_main_check_roles_args - roles set/clear: NODE [ROLE...] as the daemon
 * will check them. Returns EXIT_OK or EXIT_ERR (printed). */
static int ctl_main_check_roles_args(const struct command *cmd, const char *const *args, size_t n)
{
	char b[CELL];
	const char *why;
	size_t bad;

	if (!control_codec_node_ok(args[0]))
		return ctl_main_usage_error(cmd,
				   "invalid node id '%s' (1 to %d printable ASCII characters, no "
				   "'/')",
				   ctl_clean(args[0], b, sizeof(b), false), CONTROL_NODE_MAX);
	if (control_codec_roles_check(args + 1, n - 1, &bad, &why) < 0) {
		if (bad >= n - 1)
			return ctl_main_usage_error(cmd, "%s", why);
		return ctl_main_usage_error(cmd, "%s: '%s'", why, ctl_clean(args[1 + bad], b, sizeof(b), false));
	}
	return EXIT_OK;
}

/* ctl_main_parse_timeout - a --timeout DUR (ctl_timeout.h) -> ms. 0 or -EINVAL. */
static int ctl_main_parse_timeout(const char *s, uint32_t *ret_ms)
{
	if (!s)
		return -EINVAL;
	return ctl_timeout_parse(s, 0, 0, (uint32_t)(CTL_WAIT_MAX_S * 1000.0), ret_ms);
}

/* ctl_main_observer_call - the request answered from etcd (ctl_observer.h) */
static int ctl_main_observer_call(const struct opts *o, const uint8_t *req, size_t req_len,
			 int64_t timeout_ms, Response **ret_resp)
{
	Leasehold__Control__Request *rq;
	struct ctl_observer *ob;
	const char *why;
	int ret;

	if (control_codec_request_decode(req, req_len, &rq, &why) < 0) {
		fprintf(stderr, "leaseholdctl: %s\n", why);
		return EXIT_ERR;
	}
	ret = ctl_observer_open(&o->etcd, &ob);
	if (ret == EXIT_OK) {
		ret = ctl_observer_call(ob, rq, timeout_ms, ret_resp);
		ctl_observer_close(ob);
	}
	leasehold__control__request__free_unpacked(rq, NULL);
	return ret;
}

static int ctl_main_parse_revision(const char *s, int64_t *ret)
{
	char *end = NULL;
	errno = 0;
	long long v = s ? strtoll(s, &end, 10) : 0;
	if (!s || !s[0] || errno || !end || *end || v <= 0)
		return -EINVAL;
	*ret = (int64_t)v;
	return 0;
}

/* ctl_main_cmd_watch - `watch [NAME]`: needs etcd (observer mode) */
static int ctl_main_cmd_watch(const struct opts *o, const struct command *cmd, const char *name)
{
	int64_t from = 0, to = 0;
	uint32_t ms = 0;
	struct ctl_observer *ob;

	if (!o->etcd.endpoints) {
		fprintf(stderr, "leaseholdctl: watch reads etcd directly: give --etcd URL (and the "
				"TLS and auth options of your etcd; see leaseholdctl help watch)\n");
		return EXIT_ERR;
	}
	if (o->from_revision && ctl_main_parse_revision(o->from_revision, &from) < 0)
		return ctl_main_usage_error(cmd, "invalid --from-revision '%s'", o->from_revision);
	if (o->to_revision && ctl_main_parse_revision(o->to_revision, &to) < 0)
		return ctl_main_usage_error(cmd, "invalid --to-revision '%s'", o->to_revision);
	if (o->has_timeout && ctl_main_parse_timeout(o->timeout, &ms) < 0)
		return ctl_main_usage_error(cmd, "invalid --timeout '%s' (a duration: 30, 2.5, 500ms, 2m)", o->timeout);
	int ret = ctl_observer_open(&o->etcd, &ob);
	if (ret != EXIT_OK)
		return ret;
	ret = ctl_observer_watch(ob, name, o->json, from, to, ms);
	ctl_observer_close(ob);
	return ret;
}

/* ---- the daemon verbs: one row each, the request it sends, what it prints ---- */

/* A daemon verb's call as its handlers see it: what was asked and how long
 * the answer may take. */
struct ctl_verb_call {
	const struct opts *o;
	const struct command *cmd;
	const struct ctl_verb *verb;
	const char *name;     /* the first argument, or NULL */
	bool roles;	      /* a `roles ...` verb: name is a node id */
	uint32_t timeout_ms;  /* what the daemon itself waits (wait-ready, reconcile, switchover) */
	int64_t recv_timeout; /* how long the client waits for the answer */
};

/* ctl_verb - a verb the daemon (or observer mode) answers. prepare (NULL:
 * nothing to do) checks the verb's own --timeout and sets the times;
 * encode (NULL: the plain request) builds the request; show (NULL: nothing
 * printed) prints a successful answer. unsure names the command that tells
 * whether a write whose answer timed out happened (NULL: not a write). */
struct ctl_verb {
	const char *name;
	Leasehold__Control__Kind kind;
	int64_t recv_timeout; /* 0: CTL_TIMEOUT_MS */
	int (*prepare)(struct ctl_verb_call *c);
	int (*encode)(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len);
	int (*show)(const struct ctl_verb_call *c, Response *resp);
	const char *unsure;
};

static int ctl_verb_prepare_switchover(struct ctl_verb_call *c)
{
	const struct opts *o = c->o;
	if (ctl_switchover_parse_timeout(o->has_timeout ? o->timeout : NULL, &c->timeout_ms) < 0)
		return ctl_main_usage_error(c->cmd,
					    "invalid --timeout '%s' (2s to 1h: 30, 30s, "
					    "1500ms, 2m)",
					    o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + CTL_SWITCHOVER_MARGIN_MS;
	return EXIT_OK;
}

/* --timeout DUR for a wait of the daemon's, default_s without one; the
 * client waits margin_ms longer */
static int ctl_verb_prepare_wait_for(struct ctl_verb_call *c, double default_s, int64_t margin_ms)
{
	c->timeout_ms = (uint32_t)(default_s * 1000);
	if (c->o->has_timeout && ctl_main_parse_timeout(c->o->timeout, &c->timeout_ms) < 0)
		return ctl_main_usage_error(c->cmd, "invalid --timeout '%s' (a duration: 30, 2.5, 500ms, 2m)",
					    c->o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + margin_ms;
	return EXIT_OK;
}

static int ctl_verb_prepare_reconcile(struct ctl_verb_call *c)
{
	/* the request's own etcd write, then the wait */
	return ctl_verb_prepare_wait_for(c, CTL_RECONCILE_DEFAULT_S, CTL_WRITE_TIMEOUT_MS);
}

static int ctl_verb_prepare_wait_ready(struct ctl_verb_call *c)
{
	return ctl_verb_prepare_wait_for(c, CTL_WAIT_DEFAULT_S, CTL_WAIT_MARGIN_MS);
}

static int ctl_verb_encode_roles(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	const struct opts *o = c->o;
	return control_codec_roles_request_encode_force(c->verb->kind, c->name, o->args + 1,
							o->n_args - 1, o->force, ret_req, ret_len);
}

static int ctl_verb_encode_switchover(const struct ctl_verb_call *c, uint8_t **ret_req,
				      size_t *ret_len)
{
	return ctl_switchover_encode(c->name, c->o->to, c->timeout_ms, ret_req, ret_len);
}

static int ctl_verb_prepare_shadow(struct ctl_verb_call *c)
{
	const struct opts *o = c->o;
	if (ctl_shadow_parse_timeout(o->has_timeout ? o->timeout : NULL, &c->timeout_ms) < 0)
		return ctl_main_usage_error(c->cmd,
					    "invalid --timeout '%s' (100ms to 10m: 10, 10s, "
					    "500ms, 2m)",
					    o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + CTL_SHADOW_MARGIN_MS;
	return EXIT_OK;
}

static int ctl_verb_encode_shadow(const struct ctl_verb_call *c, uint8_t **ret_req,
				  size_t *ret_len)
{
	return control_codec_shadow_request_encode(c->name, c->o->node, c->timeout_ms, ret_req,
						   ret_len);
}

static int ctl_verb_encode_forget(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	return control_codec_forget_request_encode(c->name, c->o->args[1], ret_req, ret_len);
}

static int ctl_verb_encode_pin(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	bool pin = strcmp(c->cmd->name, "release pin") == 0;
	return control_codec_pin_request_encode(c->name, pin ? c->o->args[1] : NULL, c->o->force,
						ret_req, ret_len);
}

static int ctl_verb_show_release(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_release_view(resp, c->o->json);
}

static int ctl_verb_show_pin(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], v[CELL], m[CONTROL_STRING_MAX + 1];
	if (resp->message && resp->message[0])
		fprintf(stderr, "leaseholdctl: %s\n", ctl_clean(resp->message, m, sizeof(m), false));
	if (strcmp(c->cmd->name, "release pin") == 0)
		printf("plugin %s: pinned at release %s (no newer release campaigns)\n",
		       ctl_clean(c->name, b, sizeof(b), false),
		       ctl_clean(c->o->args[1], v, sizeof(v), false));
	else
		printf("plugin %s: unpinned (the newest release that can act leads)\n",
		       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_plugins(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_plugins(resp, c->o->json);
}

static int ctl_verb_show_status(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_status(resp, c->o->json);
}

static int ctl_verb_show_members(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_members(resp, c->o->json);
}

static int ctl_verb_show_roles_list(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_roles_list(resp, c->o->json);
}

static int ctl_verb_show_history(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_history(resp, c->name, c->o->json);
}

static int ctl_verb_show_wait_ready(const struct ctl_verb_call *c, Response *resp)
{
	(void)resp;
	printf("%s is ready\n", c->name);
	return EXIT_OK;
}

static int ctl_verb_show_reload(const struct ctl_verb_call *c, Response *resp)
{
	(void)resp;
	printf("reload requested: %s\n", c->name ? c->name : "all plugins");
	return EXIT_OK;
}

static int ctl_verb_show_roles_set(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], l[CELL];
	RoleEntry e = LEASEHOLD__CONTROL__ROLE_ENTRY__INIT;
	(void)resp;
	e.roles = (char **)(c->o->args + 1);
	e.n_roles = c->o->n_args - 1;
	printf("node %s: roles set to %s\n", ctl_clean(c->name, b, sizeof(b), false),
	       e.n_roles ? ctl_role_list(&e, l, sizeof(l)) : "(none)");
	return EXIT_OK;
}

static int ctl_verb_show_roles_clear(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("node %s: roles record deleted\n", ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_forget(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], n[CELL];
	(void)resp;
	printf("plugin %s: node %s forgotten\n", ctl_clean(c->name, b, sizeof(b), false),
	       ctl_clean(c->o->args[1], n, sizeof(n), false));
	return EXIT_OK;
}

static int ctl_verb_show_pause(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("plugin %s: paused cluster-wide (the leader starts no reconcile)\n",
	       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_resume(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("plugin %s: resumed (the leader reconciles now)\n",
	       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_reconcile(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	if (c->timeout_ms == 0)
		printf("plugin %s: reconcile requested (revision %" PRId64 ")\n",
		       ctl_clean(c->name, b, sizeof(b), false), resp->revision);
	else
		printf("plugin %s: reconcile request %" PRId64 " served by the leader\n",
		       ctl_clean(c->name, b, sizeof(b), false), resp->revision);
	return EXIT_OK;
}

static int ctl_verb_show_leave(const struct ctl_verb_call *c, Response *resp)
{
	(void)c;
	(void)resp;
	printf("leaving: the daemon drains, deletes this node's member records and exits\n");
	return EXIT_OK;
}

static int ctl_verb_show_version(const struct ctl_verb_call *c, Response *resp)
{
	char v[CELL], n[CELL];
	(void)c;
	printf("leasehold %s (node %s, protocol %" PRIu32 ")\n",
	       ctl_clean(resp->daemon_version, v, sizeof(v), true),
	       ctl_clean(resp->node, n, sizeof(n), true), resp->protocol);
	return EXIT_OK;
}

#define KIND(k) LEASEHOLD__CONTROL__KIND__KIND_##k
static const struct ctl_verb verbs[] = {
    {"plugins", KIND(PLUGINS), 0, NULL, NULL, ctl_verb_show_plugins, NULL},
    {"status", KIND(STATUS), 0, NULL, NULL, ctl_verb_show_status, NULL},
    {"members", KIND(MEMBERS), 0, NULL, NULL, ctl_verb_show_members, NULL},
    {"members forget", KIND(MEMBERS_FORGET), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_forget,
     ctl_verb_show_forget, "members NAME"},
    {"leave", KIND(LEAVE), 0, NULL, NULL, ctl_verb_show_leave, NULL},
    {"wait-ready", KIND(WAIT_READY), 0, ctl_verb_prepare_wait_ready, NULL, ctl_verb_show_wait_ready,
     NULL},
    {"reload", KIND(RELOAD), 0, NULL, NULL, ctl_verb_show_reload, NULL},
    {"roles list", KIND(ROLES_LIST), 0, NULL, NULL, ctl_verb_show_roles_list, NULL},
    {"roles set", KIND(ROLES_SET), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_roles,
     ctl_verb_show_roles_set, "roles list"},
    {"roles clear", KIND(ROLES_CLEAR), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_roles,
     ctl_verb_show_roles_clear, "roles list"},
    {"pause", KIND(PAUSE), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_pause, "status NAME"},
    {"resume", KIND(RESUME), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_resume, "status NAME"},
    {"reconcile", KIND(RECONCILE), 0, ctl_verb_prepare_reconcile, NULL, ctl_verb_show_reconcile,
     NULL},
    {"history", KIND(HISTORY), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_history, NULL},
    {"switchover", KIND(SWITCHOVER), 0, ctl_verb_prepare_switchover, ctl_verb_encode_switchover,
     NULL, NULL},
    {"version", KIND(VERSION), 0, NULL, NULL, ctl_verb_show_version, NULL},
    {"release", KIND(STATUS), 0, NULL, NULL, ctl_verb_show_release, NULL},
    {"release pin", KIND(RELEASE_PIN), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_pin,
     ctl_verb_show_pin, "release NAME"},
    {"release unpin", KIND(RELEASE_UNPIN), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_pin,
     ctl_verb_show_pin, "release NAME"},
    {"shadow", KIND(SHADOW), 0, ctl_verb_prepare_shadow, ctl_verb_encode_shadow, NULL, NULL},
};
#undef KIND

static const struct ctl_verb *ctl_main_find_verb(const char *name)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

/* ctl_main_verb_request - the request of call c into ret_req (malloc'd);
 * EXIT_OK or the exit code of a refusal (printed) */
static int ctl_main_verb_request(struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	const struct ctl_verb *v = c->verb;
	const struct opts *o = c->o;
	int ret;

	c->recv_timeout = v->recv_timeout ? v->recv_timeout : CTL_TIMEOUT_MS;
	if (v->prepare && (ret = v->prepare(c)) != EXIT_OK)
		return ret;
	if (o->has_timeout && !c->cmd->timeout) {
		/* every other command: --timeout bounds the whole call */
		uint32_t ms;
		if (ctl_main_parse_timeout(o->timeout, &ms) < 0 || ms == 0)
			return ctl_main_usage_error(c->cmd, "invalid --timeout '%s' (a duration > 0: 30, 2.5, 500ms, 2m)",
						    o->timeout);
		c->recv_timeout = ms;
	}
	int r = v->encode ? v->encode(c, ret_req, ret_len)
			  : control_codec_request_encode(v->kind, c->roles ? NULL : c->name,
							 c->timeout_ms, ret_req, ret_len);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: cannot encode the request\n");
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* ctl_main_run_verb - send call c's request to the daemon at url (observer
 * mode: to etcd) and print the answer; returns the exit code */
static int ctl_main_run_verb(struct ctl_verb_call *c, const char *url)
{
	const struct ctl_verb *v = c->verb;
	const struct opts *o = c->o;
	Response *resp = NULL;
	uint8_t *req = NULL;
	size_t req_len = 0;
	bool timed_out = false;
	int ret;

	if ((ret = ctl_main_verb_request(c, &req, &req_len)) != EXIT_OK)
		return ret;
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET && o->n_args == 1) {
		char b[CELL];
		fprintf(stderr,
			"leaseholdctl: note: no ROLE given: node %s will hold no roles (its record "
			"stays; 'roles clear' deletes it)\n",
			ctl_clean(c->name, b, sizeof(b), false));
	}
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_VERSION) {
		/* the client's own version needs no daemon */
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		fflush(stdout);
	}
	if (o->etcd.endpoints)
		ret = ctl_main_observer_call(o, req, req_len, c->recv_timeout, &resp);
	else
		ret = ctl_call(url, req, req_len, c->recv_timeout, &resp, &timed_out);
	free(req);
	if (ret != EXIT_OK) {
		if (timed_out && v->unsure)
			fprintf(stderr,
				"leaseholdctl: the write may or may not have happened; check with "
				"'leaseholdctl %s'\n",
				v->unsure);
		return ret;
	}
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER &&
	    resp->code != LEASEHOLD__CONTROL__CODE__CODE_REFUSED)
		ret = ctl_switchover_result(resp, c->name, o->to, o->json);
	else if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_SHADOW &&
		 resp->code != LEASEHOLD__CONTROL__CODE__CODE_REFUSED)
		ret = ctl_shadow_result(resp, c->name, o->json);
	else
		ret = ctl_check_code(resp, c->roles);
	if (ret == EXIT_OK && v->show)
		ret = v->show(c, resp);
	leasehold__control__response__free_unpacked(resp, NULL);
	if (fflush(stdout) != 0 && ret == EXIT_OK)
		ret = EXIT_ERR;
	return ret;
}

/* ---- from the command line to a verb ---- */

#define CTL_GO (-1) /* not an exit code: go on */

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
				ctl_main_print_roles_help(stdout);
				return EXIT_OK;
			}
			if (o->version) {
				printf("leaseholdctl %s\n", PACKAGE_VERSION);
				return EXIT_OK;
			}
			fprintf(stderr,
				"leaseholdctl: roles: missing subcommand (list, set or clear)\n");
			ctl_main_print_roles_help(stderr);
			return EXIT_ERR;
		}
		snprintf(word, sizeof(word), "roles %s", o->args[0]);
		if (!(cmd = ctl_main_find_command(word))) {
			char b[CELL];
			return ctl_main_usage_error(NULL,
						    "unknown roles subcommand '%s' (list, set or "
						    "clear)",
						    ctl_clean(o->args[0], b, sizeof(b), false));
		}
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && strcmp(o->cmd, "members") == 0 && o->n_args >= 2 &&
		   strcmp(o->args[0], "forget") == 0) {
		/* "members forget NAME NODE" (plain "members NAME" has one argument) */
		cmd = ctl_main_find_command("members forget");
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && strcmp(o->cmd, "release") == 0 && o->n_args >= 1 &&
		   (strcmp(o->args[0], "pin") == 0 || strcmp(o->args[0], "unpin") == 0)) {
		/* "release pin NAME VERSION", "release unpin NAME" ("release NAME" shows) */
		snprintf(word, sizeof(word), "release %s", o->args[0]);
		cmd = ctl_main_find_command(word);
		memmove(o->args, o->args + 1, (o->n_args - 1) * sizeof(o->args[0]));
		o->n_args--;
	} else if (o->cmd && !strchr(o->cmd, ' ')) {
		cmd = ctl_main_find_command(o->cmd); /* "roles set" as one word is no command */
	}
	if (o->cmd && !cmd)
		return ctl_main_usage_error(NULL, "unknown command '%s'", o->cmd);
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
			ctl_main_print_group_help(stdout, "config");
			return EXIT_OK;
		} else if (o->n_args == 2) {
			/* two-word commands: "roles set", "members forget" */
			snprintf(word, sizeof(word), "%s %s", o->args[0], o->args[1]);
			about = ctl_main_find_command(word);
		} else if (o->n_args == 1) {
			about = ctl_main_find_command(o->args[0]);
		}
		if (o->n_args && !about && !roles_group)
			return ctl_main_usage_error(NULL, "unknown command '%s%s%s'", o->args[0],
						    o->n_args > 1 ? " " : "",
						    o->n_args > 1 ? o->args[1] : "");
	}
	if (about)
		ctl_main_print_command_help(stdout, about);
	else if (roles_group)
		ctl_main_print_roles_help(stdout);
	else
		ctl_main_print_help(stdout);
	return EXIT_OK;
}

/* ctl_main_check_flags - the flags given fit command cmd; EXIT_OK or the
 * exit code of the usage error (printed) */
static int ctl_main_check_flags(const struct opts *o, const struct command *cmd)
{
	if (o->n_args < cmd->min_args)
		return ctl_main_usage_error(cmd, "%s: missing argument", cmd->name);
	if (o->n_args > cmd->max_args) {
		if (strcmp(cmd->name, "roles set") == 0)
			return ctl_main_usage_error(cmd, "too many roles (at most %d)", CONTROL_ROLES_MAX);
		return ctl_main_usage_error(cmd, "unexpected argument '%s'",
					    o->args[cmd->max_args]);
	}
	if (o->json && !cmd->json)
		return ctl_main_usage_error(cmd, "%s does not take --json", cmd->name);
	if (o->to && strcmp(cmd->name, "switchover") != 0)
		return ctl_main_usage_error(cmd, "%s does not take --to", cmd->name);
	if (o->to && !control_codec_node_ok(o->to))
		return ctl_main_usage_error(cmd, "invalid node id for --to (1..128 printable ASCII "
						 "characters, no '/')");
	if (o->node && strcmp(cmd->name, "shadow") != 0)
		return ctl_main_usage_error(cmd, "%s does not take --node", cmd->name);
	if (o->node && !control_codec_node_ok(o->node))
		return ctl_main_usage_error(cmd, "invalid node id for --node (1..128 printable "
						 "ASCII characters, no '/')");
	if (o->yes && !cmd->confirm)
		return ctl_main_usage_error(cmd, "%s does not take --yes", cmd->name);
	if (o->force && strcmp(cmd->name, "roles set") != 0 && strcmp(cmd->name, "release pin") != 0)
		return ctl_main_usage_error(cmd, "%s does not take --force", cmd->name);
	if (cmd->confirm && !o->yes) {
		fprintf(stderr, "leaseholdctl: %s needs --yes. What it does:\n\n%s", cmd->name,
			cmd->help);
		return EXIT_ERR;
	}
	if (!o->etcd.endpoints &&
	    (o->etcd.cacert || o->etcd.cert || o->etcd.key || o->etcd.user || o->etcd.prefix))
		return ctl_main_usage_error(cmd,
					    "--etcd-cacert, --etcd-cert, --etcd-key, --etcd-user "
					    "and --prefix need --etcd (observer mode)");
	if ((o->from_revision || o->to_revision) && strcmp(cmd->name, "watch") != 0)
		return ctl_main_usage_error(cmd, "--from-revision and --to-revision are for watch");
	if (o->etcd.endpoints && o->control)
		return ctl_main_usage_error(cmd, "--control and --etcd exclude each other");
	return EXIT_OK;
}

/* ctl_main_check_names - the plugin name, node ids and roles given are
 * well-formed; EXIT_OK or the exit code of the usage error (printed) */
static int ctl_main_check_names(const struct opts *o, const struct command *cmd, bool roles)
{
	const char *name = o->n_args ? o->args[0] : NULL;
	if (roles) {
		if (name && ctl_main_check_roles_args(cmd, o->args, o->n_args) != EXIT_OK)
			return EXIT_ERR;
	} else if (name && !control_codec_name_ok(name)) {
		return ctl_main_usage_error(cmd, "invalid plugin name '%s'", name);
	}
	struct release rel;
	if (strcmp(cmd->name, "release pin") == 0 && release_parse(o->args[1], &rel) < 0)
		return ctl_main_usage_error(cmd, "invalid release '%s' (major.minor.patch, e.g. 1.2.0)",
					    o->args[1]);
	if (strcmp(cmd->name, "members forget") == 0 && !control_codec_node_ok(o->args[1]))
		return ctl_main_usage_error(cmd,
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
	if (ctl_main_parse_args(argc, argv, &o) < 0)
		return EXIT_ERR;
	if ((ret = ctl_main_resolve(&o, &cmd, &roles)) != CTL_GO)
		return ret;
	if (o.help || (cmd && strcmp(cmd->name, "help") == 0))
		return ctl_main_help(&o, cmd);
	if (o.version) {
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	if (!cmd) {
		fprintf(stderr, "leaseholdctl: no command given\n");
		ctl_main_print_help(stderr);
		return EXIT_ERR;
	}
	if ((ret = ctl_main_check_flags(&o, cmd)) != EXIT_OK ||
	    (ret = ctl_main_check_names(&o, cmd, roles)) != EXIT_OK)
		return ret;
	const char *name = o.n_args ? o.args[0] : NULL;
	if (strcmp(cmd->name, "watch") == 0)
		return ctl_main_cmd_watch(&o, cmd, name);
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
	struct ctl_verb_call call = {.o = &o, .cmd = cmd, .name = name, .roles = roles};
	if (!(call.verb = ctl_main_find_verb(cmd->name))) {
		fprintf(stderr, "leaseholdctl: %s: no such daemon verb\n", cmd->name);
		return EXIT_ERR;
	}
	return ctl_main_run_verb(&call, url);
}
