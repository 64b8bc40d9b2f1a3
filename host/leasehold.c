/* SPDX-License-Identifier: MIT */
/*
 * leasehold - the host daemon: holds this node's etcd session, loads
 * reconciler plugins from --plugin-dir and runs their version-aware
 * elections. See `leasehold --help` and README.md.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callback_timeout.h"
#include "daemon.h"
#include "http.h"
#include "lh_install_dirs.h"
#include "log.h"
#include "plugin_config_doc.h"
#include "plugin_instance.h"
#include "roles.h"

static void usage(FILE *f)
{
	fprintf(f,
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
	        "  --plugin-config NAME=FILE plugin NAME's node-local configuration: a JSON\n"
	        "                            object of at most 32 KiB, read when the plugin\n"
	        "                            starts (repeatable, once per plugin)\n"
	        "  --callback-timeout [NAME:][KIND=]DUR\n"
	        "                            how long a plugin callback may run (repeatable);\n"
	        "                            past it the plugin is deposed (process mode: its worker\n"
	        "                            is killed and restarted; thread mode: failed until the\n"
	        "                            callback returns). KIND: init, on_elected,\n"
	        "                            on_releases_changed, reconcile, on_deposed, fini,\n"
	        "                            on_config_changed, validate_config or all (the\n"
	        "                            default); NAME: one plugin only; DUR 0 or\n"
	        "                            none = no limit. Defaults: reconcile 5m, init 60s,\n"
	        "                            the others 15s\n"
	        "  --worker PATH             process mode: the leasehold-worker program\n"
	        "\n"
	        "operation:\n"
	        "  --control URL             control socket (default ipc://$XDG_RUNTIME_DIR/leasehold.sock,\n"
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
	        "SIGHUP rescans the plugin directory.\n");
}

enum {
	OPT_ETCD = 256,
	OPT_CACERT,
	OPT_CERT,
	OPT_KEY,
	OPT_USER,
	OPT_PREFIX,
	OPT_TTL,
	OPT_NODE_ID,
	OPT_PLUGIN_DIR,
	OPT_RUNTIME_DIR,
	OPT_WAIT,
	OPT_INTERVAL,
	OPT_SHUTDOWN,
	OPT_EXIT_LINGER,
	OPT_CONTROL,
	OPT_LOG_LEVEL,
	OPT_ROLE,
	OPT_ISOLATION,
	OPT_CALLBACK_TIMEOUT,
	OPT_WORKER,
	OPT_PLUGIN_ISOLATION,
	OPT_HTTP,
	OPT_LOG_FORMAT,
	OPT_PLUGIN_CONFIG,
};

static int bad(const char *msg, const char *arg)
{
	fprintf(stderr, "leasehold: %s: '%s'\nTry 'leasehold --help'.\n", msg, arg ? arg : "");
	return 2;
}

/* the first line: what runs and how it was asked to (the flags; secrets
 * never come as flags: the etcd password is read from the environment) */
static void log_startup(int argc, char **argv, const struct daemon_config *cfg)
{
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
		{"flags", flags, false},
	};
	log_msg_fields(LOG_LVL_INFO, "daemon", NULL, f, sizeof(f) / sizeof(f[0]),
	               "leasehold %s starting: plugin ABI %s, isolation %s%s, log format %s%s, "
	               "flags: %s",
	               PACKAGE_VERSION, abi, iso, cfg->n_iso ? " (with per-plugin overrides)" : "",
	               log_get_format() == LOG_FORMAT_JSON ? "json" : "text",
	               log_stderr_is_journal() ? " (journal)" : "", flags);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"etcd", required_argument, NULL, OPT_ETCD},
		{"etcd-cacert", required_argument, NULL, OPT_CACERT},
		{"etcd-cert", required_argument, NULL, OPT_CERT},
		{"etcd-key", required_argument, NULL, OPT_KEY},
		{"etcd-user", required_argument, NULL, OPT_USER},
		{"prefix", required_argument, NULL, OPT_PREFIX},
		{"ttl", required_argument, NULL, OPT_TTL},
		{"node-id", required_argument, NULL, OPT_NODE_ID},
		{"plugin-dir", required_argument, NULL, OPT_PLUGIN_DIR},
		{"runtime-dir", required_argument, NULL, OPT_RUNTIME_DIR},
		{"reconcile-wait", required_argument, NULL, OPT_WAIT},
		{"reconcile-interval", required_argument, NULL, OPT_INTERVAL},
		{"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN},
		{"exit-linger", required_argument, NULL, OPT_EXIT_LINGER},
		{"control", required_argument, NULL, OPT_CONTROL},
		{"http", required_argument, NULL, OPT_HTTP},
		{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
		{"role", required_argument, NULL, OPT_ROLE},
		{"isolation", required_argument, NULL, OPT_ISOLATION},
		{"callback-timeout", required_argument, NULL, OPT_CALLBACK_TIMEOUT},
		{"worker", required_argument, NULL, OPT_WORKER},
		{"plugin-isolation", required_argument, NULL, OPT_PLUGIN_ISOLATION},
		{"log-format", required_argument, NULL, OPT_LOG_FORMAT},
		{"plugin-config", required_argument, NULL, OPT_PLUGIN_CONFIG},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct daemon_config cfg = {
		.isolation = PLUGIN_ISOLATION_PROCESS, /* docs/operations: "Which isolation" */
		.prefix = "/leasehold",
		.ttl_s = 10,
		.reconcile_wait_ns = 5 * 1000000000ull,
		.reconcile_interval_ns = 30 * 1000000000ull,
		.exit_linger_ns = 100 * 1000000ull,
	};
	const char *etcd = "http://127.0.0.1:2379";
	char hostname[256] = "";
	char runtime[512] = "";
	const char *roles[64];
	size_t n_roles = 0;
	const char *iso_names[64];
	struct callback_timeout_rule cb_timeouts[64];
	size_t n_cb_timeouts = 0;
	uint32_t iso_modes[64];
	size_t n_iso = 0;
	char pc_names[64][LH_PLUGIN_NAME_MAX + 1];
	const char *pc_name_ptrs[64], *pc_files[64];
	size_t n_pc = 0;
	int c;
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case OPT_ETCD:
			etcd = optarg;
			break;
		case OPT_CACERT:
			cfg.cacert = optarg;
			break;
		case OPT_CERT:
			cfg.cert = optarg;
			break;
		case OPT_KEY:
			cfg.key = optarg;
			break;
		case OPT_USER:
			cfg.user = optarg;
			break;
		case OPT_PREFIX:
			if (optarg[0] != '/' || strlen(optarg) > 200)
				return bad("--prefix must start with '/' (at most 200 bytes)", optarg);
			cfg.prefix = optarg;
			break;
		case OPT_TTL: {
			char *end;
			errno = 0;
			long long v = strtoll(optarg, &end, 10);
			if (errno || *end || v < 2 || v > 3600)
				return bad("--ttl must be whole seconds between 2 and 3600", optarg);
			cfg.ttl_s = v;
			break;
		}
		case OPT_NODE_ID:
			cfg.node_id = optarg;
			break;
		case OPT_PLUGIN_DIR:
			cfg.plugin_dir = optarg;
			break;
		case OPT_RUNTIME_DIR:
			cfg.runtime_dir = optarg;
			break;
		case OPT_WAIT:
			if (parse_duration(optarg, &cfg.reconcile_wait_ns) < 0)
				return bad("bad --reconcile-wait duration", optarg);
			break;
		case OPT_INTERVAL:
			if (parse_duration(optarg, &cfg.reconcile_interval_ns) < 0 ||
			    cfg.reconcile_interval_ns < 1000000)
				return bad("bad --reconcile-interval duration (>= 1ms)", optarg);
			break;
		case OPT_SHUTDOWN:
			if (parse_duration(optarg, &cfg.shutdown_timeout_ns) < 0)
				return bad("bad --shutdown-timeout duration", optarg);
			break;
		case OPT_EXIT_LINGER:
			if (parse_duration(optarg, &cfg.exit_linger_ns) < 0 ||
			    cfg.exit_linger_ns > 60 * 1000000000ull)
				return bad("bad --exit-linger duration (0..60s)", optarg);
			break;
		case OPT_CONTROL:
			cfg.control_url = strcmp(optarg, "none") == 0 ? "" : optarg;
			break;
		case OPT_HTTP: {
			char host[256], port[8];
			if (strcmp(optarg, "none") == 0)
				cfg.http_addr = "";
			else if (http_parse_addr(optarg, host, sizeof(host), port, sizeof(port)) < 0)
				return bad("bad --http address (ADDR:PORT, [IPV6]:PORT or none)", optarg);
			else
				cfg.http_addr = optarg;
			break;
		}
		case OPT_LOG_LEVEL: {
			enum log_level lvl;
			if (log_parse_level(optarg, &lvl) < 0)
				return bad("--log-level must be error, warn, info or debug", optarg);
			log_set_level(lvl);
			break;
		}
		case OPT_LOG_FORMAT: {
			enum log_format fmt;
			if (log_parse_format(optarg, &fmt) < 0)
				return bad("--log-format must be text or json", optarg);
			log_set_format(fmt);
			/* the plugin workers this process starts write the same format */
			setenv(LOG_FORMAT_ENV, optarg, 1);
			break;
		}
		case OPT_ROLE:
			if (n_roles >= 64)
				return bad("at most 64 --role flags", optarg);
			if (!roles_name_valid(optarg))
				return bad("--role must match [a-z0-9_-]{1,63}", optarg);
			roles[n_roles++] = optarg;
			break;
		case OPT_ISOLATION:
			if (plugin_instance_parse_isolation(optarg, &cfg.isolation) < 0)
				return bad("--isolation must be thread or process", optarg);
			break;
		case OPT_CALLBACK_TIMEOUT: {
			char why[160];
			if (n_cb_timeouts >= 64)
				return bad("at most 64 --callback-timeout flags", optarg);
			if (callback_timeout_parse(optarg, &cb_timeouts[n_cb_timeouts], why,
			                           sizeof(why)) < 0)
				return bad(why, optarg);
			n_cb_timeouts++;
			break;
		}
		case OPT_WORKER:
			cfg.worker_path = optarg;
			break;
		case OPT_PLUGIN_ISOLATION: {
			char *eq = strchr(optarg, '=');
			if (!eq || n_iso >= 64)
				return bad("--plugin-isolation takes NAME=thread|process (at most 64)", optarg);
			*eq = '\0';
			if (!roles_name_valid(optarg) ||
			    plugin_instance_parse_isolation(eq + 1, &iso_modes[n_iso]) < 0) {
				*eq = '=';
				return bad("--plugin-isolation takes NAME=thread|process", optarg);
			}
			iso_names[n_iso++] = optarg;
			break;
		}
		case OPT_PLUGIN_CONFIG: {
			char why_pc[200];
			if (n_pc >= 64)
				return bad("--plugin-config: at most 64", optarg);
			if (plugin_config_parse_flag(optarg, pc_names[n_pc], &pc_files[n_pc], why_pc,
			                             sizeof(why_pc)) < 0)
				return bad(why_pc, optarg);
			pc_name_ptrs[n_pc] = pc_names[n_pc];
			for (size_t i = 0; i < n_pc; i++)
				if (strcmp(pc_names[i], pc_names[n_pc]) == 0)
					return bad("--plugin-config names this plugin twice", optarg);
			n_pc++;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("leasehold %s\n", PACKAGE_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'leasehold --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		return bad("unexpected argument", argv[optind]);
	if (!cfg.plugin_dir)
		cfg.plugin_dir = LH_PLUGINDIR; /* configure --with-plugindir */
	if (!cfg.node_id) {
		if (gethostname(hostname, sizeof(hostname) - 1) < 0 || !hostname[0])
			return bad("cannot determine the host name; use --node-id", "");
		cfg.node_id = hostname;
	}
	if (!*cfg.node_id || strchr(cfg.node_id, '/') || strlen(cfg.node_id) > 128)
		return bad("--node-id must be 1..128 bytes without '/'", cfg.node_id);
	if (cfg.user)
		cfg.password = getenv("LEASEHOLD_ETCD_PASSWORD");
	if (cfg.user && !cfg.password)
		return bad("--etcd-user needs LEASEHOLD_ETCD_PASSWORD in the environment", cfg.user);
	if (!cfg.runtime_dir) {
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		snprintf(runtime, sizeof(runtime), "%s", xdg && *xdg ? xdg : "/run");
		size_t n = strlen(runtime);
		snprintf(runtime + n, sizeof(runtime) - n, "/leasehold");
		cfg.runtime_dir = runtime;
	}

	/* split --etcd */
	char *eps_buf = strdup(etcd);
	const char *eps[16];
	size_t n = 0;
	if (!eps_buf)
		return 1;
	for (char *p = eps_buf; p && *p && n < 16;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (*p) {
			if (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0) {
				int rc = bad("--etcd endpoints must be http:// or https:// URLs", p);
				free(eps_buf);
				return rc;
			}
			eps[n++] = p;
		}
		p = comma ? comma + 1 : NULL;
	}
	if (n == 0) {
		free(eps_buf);
		return bad("--etcd needs at least one URL", etcd);
	}
	cfg.iso_names = iso_names;
	cfg.cb_timeouts = cb_timeouts;
	cfg.n_cb_timeouts = n_cb_timeouts;
	cfg.iso_modes = iso_modes;
	cfg.n_iso = n_iso;
	cfg.plugin_config_names = pc_name_ptrs;
	cfg.plugin_config_files = pc_files;
	cfg.n_plugin_configs = n_pc;
	cfg.roles_seed = roles;
	cfg.n_roles_seed = n_roles;
	cfg.endpoints = eps;
	cfg.n_endpoints = n;
	log_set_prefix(cfg.node_id);
	log_startup(argc, argv, &cfg);
	int code = daemon_run(&cfg);
	free(eps_buf);
	return code;
}
