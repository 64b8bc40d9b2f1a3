/* SPDX-License-Identifier: MIT */
/*
 * leasehold - the host daemon: holds this node's etcd session, loads
 * reconciler plugins from --plugin-dir and runs their version-aware
 * elections. See `leasehold --help` and README.md.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "daemon/daemon.h"
#include "daemon/daemon_options.h"
#include "http/http.h"
#include "lh_install_dirs.h"
#include "base/log.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"

/* the text of --help, printed whole */
static const char daemon_main_usage_text[] =
	"Usage: leasehold [OPTION]...\n"
	"Hold this node's etcd session, load reconciler plugins from a directory and\n"
	"run a version-aware leader election for each of them.\n"
	"\n"
	"etcd:\n"
	"  --etcd URL[,URL...]       etcd client endpoints (default http://127.0.0.1:2379)\n"
	"  --etcd-cacert FILE        CA bundle for https endpoints\n"
	"  --etcd-cert FILE          client certificate (PEM)\n"
	"  --etcd-key FILE           client key (PEM)\n"
	"  --etcd-user NAME          etcd user; the password is read from the\n"
	"                            environment variable LEASEHOLD_ETCD_PASSWORD\n"
	"  --prefix PREFIX           key prefix of all records (default /leasehold)\n"
	"  --ttl SECONDS             session lease TTL, >= 2 (default 10); keepalive at TTL/3\n"
	"\n"
	"node and plugins:\n"
	"  --node-id ID              this node's id (default: the host name)\n"
	"  --plugin-dir DIR          where plugin .so files are dropped\n"
	"                            (default " LH_PLUGINDIR ")\n"
	"  --runtime-dir DIR         private plugin copies (default $XDG_RUNTIME_DIR/leasehold,\n"
	"                            else /run/leasehold)\n"
	"  --role ROLE               seed this node's roles (repeatable); used only when\n"
	"                            the node has no roles record in etcd yet\n"
	"  --reconcile-wait DUR      wait after election when a status existed (default 5s)\n"
	"  --reconcile-interval DUR  periodic reconcile (default 30s)\n"
	"  --shutdown-timeout DUR    give up draining on SIGTERM after this (default 30s)\n"
	"  --exit-linger DUR         after a graceful shutdown's revocation, stay idle this\n"
	"                            long before tearing down, out of the successor's way\n"
	"                            (default 100ms; 0 = none)\n"
	"  --isolation MODE          process (default): each plugin in a leasehold-worker\n"
	"                            child process, so a crash or hang is contained and\n"
	"                            the worker restarted; thread: each plugin on a worker\n"
	"                            thread of the daemon (a crash takes the daemon down)\n"
	"  --plugin-isolation NAME=MODE\n"
	"                            isolation for plugin NAME only (repeatable)\n"
	"  --priority [NAME=]N       this node's candidate priority (default 0), for\n"
	"                            plugin NAME only with NAME= (repeatable): a leader\n"
	"                            hands over once to a candidate of the newest release\n"
	"                            with a strictly higher priority (never between equals)\n"
	"  --plugin-config NAME=FILE plugin NAME's node-local configuration: a JSON\n"
	"                            object of at most 32 KiB, read when the plugin\n"
	"                            starts (repeatable, once per plugin)\n"
	"  --callback-timeout [NAME:][KIND=]DUR\n"
	"                            how long a plugin callback may run (repeatable);\n"
	"                            past it the plugin is deposed (process mode: its worker\n"
	"                            is killed and restarted; thread mode: failed until the\n"
	"                            callback returns). KIND: init, on_elected,\n"
	"                            on_releases_changed, reconcile, on_deposed, fini,\n"
	"                            on_watch_events, on_config_changed, validate_config\n"
	"                            or all (the default); NAME: one plugin only; DUR 0\n"
	"                            or none = no limit. Defaults: reconcile 5m, init and\n"
	"                            on_watch_events 60s, the others 15s\n"
	"  --worker PATH             process mode: the leasehold-worker program\n"
	"  --worker-restart MIN[,MAX] process mode: a failed worker is restarted after\n"
	"                            MIN, doubling up to MAX (default 100ms,30s)\n"
	"  --unhealthy-after N       a node whose plugin fails N reconciles in a row\n"
	"                            (error, crash, callback timeout) withdraws from its\n"
	"                            election for a hold-down (default 3; 0 = never)\n"
	"  --unhealthy-hold-down DUR the first hold-down (default 30s); it doubles on\n"
	"                            repeats within 10m of the last, up to 10m\n"
	"  --plugin-read NAME=PREFIX grant plugin NAME read access (watch, range) to the\n"
	"                            etcd keys starting with PREFIX outside its own\n"
	"                            P/NAME/data/ (repeatable; default: none)\n"
	"\n"
	"configuration file:\n"
	"  --config FILE             read settings from this YAML file (default\n"
	"                            " LH_CONFIG_FILE ", when it exists):\n"
	"                            each key is a flag's long name; flags override it\n"
	"  --check-config            check the file and the flags, print the effective\n"
	"                            settings and exit (0: valid, 2: not)\n"
	"\n"
	"operation:\n"
	"  --control URL             control socket (default $LEASEHOLD_CONTROL, else the file's\n"
	"                            control key, else ipc://$XDG_RUNTIME_DIR/leasehold.sock,\n"
	"                            else ipc:///run/leasehold/control.sock; \"none\" disables it)\n"
	"  --http ADDR:PORT          metrics and probes over HTTP (default " HTTP_DEFAULT_ADDR ";\n"
	"                            \"none\" disables it)\n"
	"  --log-level LEVEL         error|warn|info|debug (default info)\n"
	"  --log-format FORMAT       text (default) or json: one JSON object per line;\n"
	"                            also $LEASEHOLD_LOG_FORMAT\n"
	"  -h, --help                this help\n"
	"  -V, --version             the version\n"
	"\n"
	"Durations take ms, s, m, h suffixes (\"500ms\", \"5s\"); plain numbers are seconds.\n"
	"Signals: SIGTERM/SIGINT shut down gracefully (drain, resign, revoke the lease);\n"
	"SIGHUP re-reads the configuration file and rescans the plugin directory.\n";

static void daemon_main_usage(FILE *f)
{
	fputs(daemon_main_usage_text, f);
}

/* the exit code of a usage or configuration error */
#define EXIT_USAGE 2

/* the first line: what runs and how it was asked to (the flags; secrets
 * never come as flags: the etcd password is read from the environment) */
static void daemon_main_log_startup(int argc, char **argv, const struct daemon_options *o)
{
	const struct daemon_config *cfg = daemon_options_config(o);
	const char *file = daemon_options_file(o);
	char flags[1024] = "", abi[16];
	size_t n = 0;
	for (int i = 1; i < argc && n < sizeof(flags); i++) {
		int w = snprintf(flags + n, sizeof(flags) - n, "%s%s", i > 1 ? " " : "", argv[i]);
		if (w < 0)
			break;
		n += (size_t)w;
	}
	snprintf(abi, sizeof(abi), "%u.%u", LH_PLUGIN_ABI_MAJOR, LH_PLUGIN_ABI_MINOR);
	const char *iso = cfg->isolation == PLUGIN_ISOLATION_PROCESS ? "process" : "thread";
	const struct log_field f[] = {
		{"version", PACKAGE_VERSION, false},
		{"abi", abi, false},
		{"isolation", iso, false},
		{"config", *file ? file : "none", false},
		{"flags", flags, false},
	};
	log_msg_fields(LOG_LVL_INFO, "daemon", NULL, f, sizeof(f) / sizeof(f[0]),
	               "leasehold %s starting: plugin ABI %s, isolation %s%s, log format %s%s, "
	               "config file %s, flags: %s",
	               PACKAGE_VERSION, abi, iso, cfg->n_iso ? " (with per-plugin overrides)" : "",
	               log_get_format() == LOG_FORMAT_JSON ? "json" : "text",
	               log_stderr_is_journal() ? " (journal)" : "", *file ? file : "none", flags);
}

/* daemon_main_parse_args - the flags and the configuration file into *ret. Returns -1
 * when the daemon is to run (*ret set), else the exit code of what was done
 * instead: --help, --version, --check-config, or an error (printed). */
static int daemon_main_parse_args(int argc, char **argv, struct daemon_options **ret)
{
	enum daemon_options_action action;
	struct daemon_options *o;
	char err[CONFIG_ERR_MAX + 64];
	int r = daemon_options_parse(argc, argv, LH_CONFIG_FILE, &o, &action, err, sizeof(err));

	if (r < 0) {
		if (err[0])
			fprintf(stderr, "%s\n", err);
		if (r == -EINVAL) /* a flag, not the file */
			fprintf(stderr, "Try 'leasehold --help'.\n");
		return EXIT_USAGE;
	}
	switch (action) {
	case DAEMON_OPTIONS_RUN:
		*ret = o;
		return -1;
	case DAEMON_OPTIONS_HELP:
		daemon_main_usage(stdout);
		break;
	case DAEMON_OPTIONS_VERSION:
		printf("leasehold %s\n", PACKAGE_VERSION);
		break;
	case DAEMON_OPTIONS_CHECK:
		daemon_options_print(o, stdout);
		break;
	}
	daemon_options_free(o);
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon_options *o = NULL;
	int code = daemon_main_parse_args(argc, argv, &o);

	if (code >= 0)
		return code;
	const struct daemon_config *cfg = daemon_options_config(o);
	daemon_options_apply_logging(o);
	log_set_prefix(cfg->node_id);
	daemon_main_log_startup(argc, argv, o);
	code = daemon_run(cfg);
	/* the last workers' bus sockets may still be closing (runtime_closer.h):
	 * bounded, and exit() does not wait for a close that never returns */
	if (runtime_closer_wait(2000) < 0)
		log_warn("daemon", "a plugin worker's bus socket is still closing; exiting without it");
	daemon_options_free(o);
	return code;
}
