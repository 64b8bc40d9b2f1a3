/* SPDX-License-Identifier: MIT */
/*
 * daemon_options.c - the daemon's flags and configuration file (see
 * daemon_options.h).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime_callback_timeout.h"
#include "abi/abi_config_doc.h"
#include "election/election_priority.h"
#include "election/election_health.h"
#include "control/control.h"
#include "control/control_config.h"
#include "control/control_wire.h"
#include "daemon/daemon_options.h"
#include "http/http.h"
#include "lh_install_dirs.h"
#include "base/duration.h"
#include "base/log.h"
#include "runtime/runtime_instance.h"
#include "election/election_roles.h"

#define AS_ENUM(id, name, kind, attr) F_##id,
enum { CONTROL_CONFIG_KEYS(AS_ENUM) N_FLAGS };
#define AS_KEY(id, name, kind, attr) {name, kind},
static const struct config_key flag_keys[N_FLAGS] = {CONTROL_CONFIG_KEYS(AS_KEY)};
#define AS_ATTR(id, name, kind, attr) attr,
static const unsigned flag_attrs[N_FLAGS] = {CONTROL_CONFIG_KEYS(AS_ATTR)};

#define MAX_LIST 64
#define MAX_ENDPOINTS 16

enum source { SRC_DEFAULT, SRC_FILE, SRC_FLAG };

struct arg {
	int id;
	const char *value; /* borrowed from argv */
};

struct daemon_options {
	struct daemon_config cfg;
	const char *default_config;
	const char *config_flag; /* --config, NULL = the default when it exists */
	struct config_file *file;
	struct arg *args; /* the flags with a key, in order, replayed on reload */
	size_t n_args;

	enum source src[N_FLAGS];
	char *shown[N_FLAGS]; /* the values as given, ", "-joined (NULL = default) */
	const char *flag_value[N_FLAGS], *file_value[N_FLAGS]; /* last of each source */

	enum log_level log_level;
	bool has_log_level;
	bool env_log_format; /* $LEASEHOLD_LOG_FORMAT was set when the daemon started */
	char hostname[256];
	char runtime[512];
	char control[4200];
	char *etcd_buf;
	const char *endpoints[MAX_ENDPOINTS];
	const char *roles[MAX_LIST];
	size_t n_roles;
	char iso_name[MAX_LIST][LH_PLUGIN_NAME_MAX + 1];
	const char *iso_names[MAX_LIST];
	uint32_t iso_modes[MAX_LIST];
	size_t n_iso;
	struct callback_timeout_rule cb[MAX_LIST];
	size_t n_cb;
	struct priority_rule prio[MAX_LIST];
	size_t n_prio;
	char read_name[MAX_LIST][LH_PLUGIN_NAME_MAX + 1];
	const char *read_names[MAX_LIST], *read_prefixes[MAX_LIST];
	size_t n_read;
	char pc_name[MAX_LIST][LH_PLUGIN_NAME_MAX + 1];
	const char *pc_names[MAX_LIST], *pc_files[MAX_LIST];
	size_t n_pc;
};

static int daemon_options_bad(char *why, size_t len, const char *msg, const char *arg)
{
	snprintf(why, len, "%s: '%s'", msg, arg);
	return -EINVAL;
}

static int daemon_options_set_etcd(struct daemon_options *o, const char *v, char *why, size_t len)
{
	char *buf = strdup(v);
	size_t n = 0;

	if (!buf)
		return -ENOMEM;
	for (char *p = buf; p && *p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (*p) {
			if (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0) {
				int r = daemon_options_bad(why, len, "--etcd endpoints must be http:// or https:// URLs", p);
				free(buf);
				return r;
			}
			if (n == MAX_ENDPOINTS) {
				free(buf);
				return daemon_options_bad(why, len, "--etcd takes at most 16 URLs", v);
			}
			o->endpoints[n++] = p;
		}
		p = comma ? comma + 1 : NULL;
	}
	if (n == 0) {
		free(buf);
		return daemon_options_bad(why, len, "--etcd needs at least one URL", v);
	}
	free(o->etcd_buf);
	o->etcd_buf = buf;
	o->cfg.endpoints = o->endpoints;
	o->cfg.n_endpoints = n;
	return 0;
}

/* --worker-restart MIN[,MAX]: durations of 1 ms..1 h, MAX >= MIN; MAX
 * defaults to MIN (a constant delay) */
static int daemon_options_set_worker_restart(struct daemon_config *c, const char *v, char *why,
					     size_t len)
{
	static const char *usage = "--worker-restart takes MIN[,MAX] (durations, 1ms..1h, MAX >= MIN)";
	const char *comma = strchr(v, ',');
	char first[64];
	uint64_t mn, mx;
	size_t n = comma ? (size_t)(comma - v) : strlen(v);

	if (n == 0 || n >= sizeof(first))
		return daemon_options_bad(why, len, usage, v);
	memcpy(first, v, n);
	first[n] = '\0';
	if (duration_parse(first, &mn) < 0 || (comma && duration_parse(comma + 1, &mx) < 0))
		return daemon_options_bad(why, len, usage, v);
	if (!comma)
		mx = mn;
	if (mn < 1000000ull || mx > 3600 * 1000000000ull || mx < mn)
		return daemon_options_bad(why, len, usage, v);
	c->restart_min_ms = (uint32_t)(mn / 1000000ull);
	c->restart_max_ms = (uint32_t)(mx / 1000000ull);
	return 0;
}

static int daemon_options_set_plugin_isolation(struct daemon_options *o, const char *v, char *why, size_t len)
{
	const char *eq = strchr(v, '=');
	size_t n = eq ? (size_t)(eq - v) : 0;
	char name[LH_PLUGIN_NAME_MAX + 1];
	uint32_t mode;

	if (!eq || n == 0 || n > LH_PLUGIN_NAME_MAX || o->n_iso >= MAX_LIST)
		return daemon_options_bad(why, len, "--plugin-isolation takes NAME=thread|process (at most 64)", v);
	memcpy(name, v, n);
	name[n] = '\0';
	if (!roles_name_valid(name) || plugin_instance_parse_isolation(eq + 1, &mode) < 0)
		return daemon_options_bad(why, len, "--plugin-isolation takes NAME=thread|process", v);
	memcpy(o->iso_name[o->n_iso], name, n + 1);
	o->iso_modes[o->n_iso++] = mode;
	return 0;
}

/* daemon_options_set_plugin_read - --plugin-read NAME=PREFIX: a read grant for plugin NAME */
static int daemon_options_set_plugin_read(struct daemon_options *o, const char *v, char *why, size_t len)
{
	const char *eq = strchr(v, '=');
	size_t n = eq ? (size_t)(eq - v) : 0;

	if (!eq || n == 0 || n > LH_PLUGIN_NAME_MAX || o->n_read >= MAX_LIST)
		return daemon_options_bad(why, len, "--plugin-read takes NAME=PREFIX (at most 64)", v);
	memcpy(o->read_name[o->n_read], v, n);
	o->read_name[o->n_read][n] = '\0';
	if (!roles_name_valid(o->read_name[o->n_read]) || !eq[1])
		return daemon_options_bad(why, len,
			   "--plugin-read takes NAME=PREFIX with a plugin name and a non-empty "
			   "etcd key prefix",
			   v);
	o->read_prefixes[o->n_read++] = eq + 1;
	return 0;
}

/* daemon_options_set_plugin_config - --plugin-config NAME=FILE: plugin NAME's node-local
 * configuration file (read when an instance starts), once per plugin */
static int daemon_options_set_plugin_config(struct daemon_options *o, const char *v, char *why, size_t len)
{
	char msg[200];

	if (o->n_pc >= MAX_LIST)
		return daemon_options_bad(why, len, "--plugin-config: at most 64", v);
	if (plugin_config_parse_flag(v, o->pc_name[o->n_pc], &o->pc_files[o->n_pc], msg,
				     sizeof(msg)) < 0)
		return daemon_options_bad(why, len, msg, v);
	for (size_t i = 0; i < o->n_pc; i++)
		if (strcmp(o->pc_name[i], o->pc_name[o->n_pc]) == 0)
			return daemon_options_bad(why, len, "--plugin-config names this plugin twice", v);
	o->n_pc++;
	return 0;
}

/* The setters below each take one group of flags: 0, or -EINVAL with why
 * filled; DAEMON_OPTIONS_NOT_HERE when id is not one of theirs. */
#define DAEMON_OPTIONS_NOT_HERE 1

/* the etcd session: where, as whom, under which prefix and node id */
static int daemon_options_apply_session(struct daemon_options *o, int id, const char *v, char *why,
					size_t len)
{
	struct daemon_config *c = &o->cfg;

	switch (id) {
	case F_ETCD:
		return daemon_options_set_etcd(o, v, why, len);
	case F_CACERT:
		c->cacert = v;
		return 0;
	case F_CERT:
		c->cert = v;
		return 0;
	case F_KEY:
		c->key = v;
		return 0;
	case F_USER:
		c->user = v;
		return 0;
	case F_PREFIX:
		if (v[0] != '/' || strlen(v) > 200)
			return daemon_options_bad(why, len, "--prefix must start with '/' (at most 200 bytes)", v);
		c->prefix = v;
		return 0;
	case F_TTL: {
		char *end;
		errno = 0;
		long long t = strtoll(v, &end, 10);
		if (errno || *end || end == v || t < 2 || t > 3600)
			return daemon_options_bad(why, len, "--ttl must be whole seconds between 2 and 3600", v);
		c->ttl_s = t;
		return 0;
	}
	case F_NODE_ID:
		if (!*v || strchr(v, '/') || strlen(v) > 128)
			return daemon_options_bad(why, len, "--node-id must be 1..128 bytes without '/'", v);
		c->node_id = v;
		return 0;
	default:
		return DAEMON_OPTIONS_NOT_HERE;
	}
}

/* directories, the worker program and the reconcile and shutdown times */
static int daemon_options_apply_paths(struct daemon_options *o, int id, const char *v, char *why,
				      size_t len)
{
	struct daemon_config *c = &o->cfg;

	switch (id) {
	case F_PLUGIN_DIR:
		c->plugin_dir = v;
		return 0;
	case F_RUNTIME_DIR:
		c->runtime_dir = v;
		return 0;
	case F_WAIT:
		if (duration_parse(v, &c->reconcile_wait_ns) < 0)
			return daemon_options_bad(why, len, "bad --reconcile-wait duration", v);
		return 0;
	case F_INTERVAL:
		if (duration_parse(v, &c->reconcile_interval_ns) < 0 ||
		    c->reconcile_interval_ns < 1000000)
			return daemon_options_bad(why, len, "bad --reconcile-interval duration (>= 1ms)", v);
		return 0;
	case F_SHUTDOWN:
		if (duration_parse(v, &c->shutdown_timeout_ns) < 0)
			return daemon_options_bad(why, len, "bad --shutdown-timeout duration", v);
		return 0;
	case F_EXIT_LINGER:
		if (duration_parse(v, &c->exit_linger_ns) < 0 || c->exit_linger_ns > 60 * 1000000000ull)
			return daemon_options_bad(why, len, "bad --exit-linger duration (0..60s)", v);
		return 0;
	default:
		return DAEMON_OPTIONS_NOT_HERE;
	}
}

/* what the daemon offers: the control socket, HTTP, the log */
static int daemon_options_apply_outputs(struct daemon_options *o, int id, const char *v, char *why,
					size_t len)
{
	struct daemon_config *c = &o->cfg;

	switch (id) {
	case F_CONTROL: {
		char path[4096];
		if (strcmp(v, "none") != 0 && control_wire_path(v, path, sizeof(path)) < 0)
			return daemon_options_bad(why, len, "--control must be ipc:///path, /path or none", v);
		return 0; /* resolved at the end (control_url_resolve) */
	}
	case F_HTTP: {
		char host[256], port[8];
		if (strcmp(v, "none") == 0)
			c->http_addr = "";
		else if (http_parse_addr(v, host, sizeof(host), port, sizeof(port)) < 0)
			return daemon_options_bad(why, len, "bad --http address (ADDR:PORT, [IPV6]:PORT or none)", v);
		else
			c->http_addr = v;
		return 0;
	}
	case F_LOG_LEVEL:
		if (log_parse_level(v, &o->log_level) < 0)
			return daemon_options_bad(why, len, "--log-level must be error, warn, info or debug", v);
		o->has_log_level = true;
		return 0;
	case F_LOG_FORMAT: {
		enum log_format fmt;
		if (log_parse_format(v, &fmt) < 0)
			return daemon_options_bad(why, len, "--log-format must be text or json", v);
		return 0; /* applied by daemon_options_apply_logging */
	}
	default:
		return DAEMON_OPTIONS_NOT_HERE;
	}
}

/* repeated flags and per-plugin rules */
static int daemon_options_apply_lists(struct daemon_options *o, int id, const char *v, char *why,
				      size_t len)
{
	struct daemon_config *c = &o->cfg;

	switch (id) {
	case F_ROLE:
		if (o->n_roles >= MAX_LIST)
			return daemon_options_bad(why, len, "at most 64 --role flags", v);
		if (!roles_name_valid(v))
			return daemon_options_bad(why, len, "--role must match [a-z0-9_-]{1,63}", v);
		o->roles[o->n_roles++] = v;
		return 0;
	case F_ISOLATION:
		if (plugin_instance_parse_isolation(v, &c->isolation) < 0)
			return daemon_options_bad(why, len, "--isolation must be thread or process", v);
		return 0;
	case F_CALLBACK_TIMEOUT: {
		char msg[160];
		if (o->n_cb >= MAX_LIST)
			return daemon_options_bad(why, len, "at most 64 --callback-timeout rules", v);
		if (callback_timeout_parse(v, &o->cb[o->n_cb], msg, sizeof(msg)) < 0)
			return daemon_options_bad(why, len, msg, v);
		o->n_cb++;
		return 0;
	}
	case F_PRIORITY: {
		char msg[160];
		if (o->n_prio >= MAX_LIST)
			return daemon_options_bad(why, len, "at most 64 --priority flags", v);
		if (priority_parse(v, &o->prio[o->n_prio], msg, sizeof(msg)) < 0)
			return daemon_options_bad(why, len, msg, v);
		o->n_prio++;
		return 0;
	}
	case F_WORKER:
		c->worker_path = v;
		return 0;
	case F_WORKER_RESTART:
		return daemon_options_set_worker_restart(c, v, why, len);
	case F_UNHEALTHY_AFTER: {
		char *end;
		errno = 0;
		unsigned long n = strtoul(v, &end, 10);
		if (errno || end == v || *end || v[0] == '-' || n > 1000)
			return daemon_options_bad(why, len,
			                          "--unhealthy-after takes a count of 0..1000 (0 = off)", v);
		c->unhealthy_after = (uint32_t)n;
		return 0;
	}
	case F_UNHEALTHY_HOLD_DOWN:
		if (duration_parse(v, &c->unhealthy_hold_down_ns) < 0 ||
		    c->unhealthy_hold_down_ns < 1000000ull || c->unhealthy_hold_down_ns > 86400000000000ull)
			return daemon_options_bad(why, len,
			                          "bad --unhealthy-hold-down duration (1ms..24h)", v);
		return 0;
	case F_PLUGIN_ISOLATION:
		return daemon_options_set_plugin_isolation(o, v, why, len);
	case F_PLUGIN_READ:
		return daemon_options_set_plugin_read(o, v, why, len);
	case F_PLUGIN_CONFIG:
		return daemon_options_set_plugin_config(o, v, why, len);
	default:
		return DAEMON_OPTIONS_NOT_HERE;
	}
}

/* apply - check flag id's argument v and set it; -EINVAL with why */
static int daemon_options_apply(struct daemon_options *o, int id, const char *v, char *why,
				size_t len)
{
	int (*const groups[])(struct daemon_options *, int, const char *, char *, size_t) = {
	    daemon_options_apply_session,
	    daemon_options_apply_paths,
	    daemon_options_apply_outputs,
	    daemon_options_apply_lists,
	};
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		int r = groups[i](o, id, v, why, len);
		if (r != DAEMON_OPTIONS_NOT_HERE)
			return r;
	}
	return daemon_options_bad(why, len, "not a setting", v);
}

/* note - record that flag id got v from src, for --check-config and the
 * reload's comparison */
static int daemon_options_note(struct daemon_options *o, int id, const char *v, enum source src)
{
	bool append = (flag_keys[id].kind == CONFIG_KEY_REPEATED ||
		       flag_keys[id].kind == CONFIG_KEY_RULES) &&
		      o->shown[id];
	size_t n = (append ? strlen(o->shown[id]) + 2 : 0) + strlen(v) + 1;
	char *s = malloc(n);

	if (!s)
		return -ENOMEM;
	snprintf(s, n, "%s%s%s", append ? o->shown[id] : "", append ? ", " : "", v);
	free(o->shown[id]);
	o->shown[id] = s;
	o->src[id] = src;
	if (src == SRC_FLAG)
		o->flag_value[id] = v;
	else
		o->file_value[id] = v;
	return 0;
}

/* set - one setting from src: a flag's list replaces the file's */
static int daemon_options_set(struct daemon_options *o, int id, const char *v, enum source src, char *why,
	       size_t len)
{
	if (flag_keys[id].kind == CONFIG_KEY_REPEATED && src == SRC_FLAG && o->src[id] == SRC_FILE) {
		o->n_roles = 0;
		free(o->shown[id]);
		o->shown[id] = NULL;
	}
	int r = daemon_options_apply(o, id, v, why, len);
	if (r == 0)
		r = daemon_options_note(o, id, v, src);
	if (r == -ENOMEM)
		snprintf(why, len, "out of memory");
	return r;
}

static int daemon_options_find_flag(const char *name)
{
	for (int i = 0; i < N_FLAGS; i++)
		if (strcmp(flag_keys[i].name, name) == 0)
			return i;
	return -1;
}

/* daemon_options_read_file - the configuration file this set uses, if any */
static int daemon_options_read_file(struct daemon_options *o, char *err, size_t err_len)
{
	const char *path = o->config_flag;

	if (!path) {
		if (!o->default_config || access(o->default_config, F_OK) < 0)
			return 0;
		path = o->default_config;
	}
	return config_file_load(path, control_config_schema(), &o->file, err, err_len);
}

/* finish - the defaults and the environment after the file and the flags */
static int daemon_options_finish(struct daemon_options *o, char *err, size_t err_len)
{
	struct daemon_config *c = &o->cfg;

	if (!c->plugin_dir)
		c->plugin_dir = LH_PLUGINDIR; /* configure --with-plugindir */
	if (!c->node_id) {
		if (gethostname(o->hostname, sizeof(o->hostname) - 1) < 0 || !o->hostname[0] ||
		    strchr(o->hostname, '/')) {
			snprintf(err, err_len, "leasehold: cannot determine the host name; use --node-id");
			return -EINVAL;
		}
		c->node_id = o->hostname;
	}
	if (c->user)
		c->password = getenv("LEASEHOLD_ETCD_PASSWORD");
	if (c->user && !c->password) {
		snprintf(err, err_len,
			 "leasehold: --etcd-user needs LEASEHOLD_ETCD_PASSWORD in the environment: '%s'",
			 c->user);
		return -EINVAL;
	}
	if (!c->runtime_dir) {
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		snprintf(o->runtime, sizeof(o->runtime), "%s/leasehold", xdg && *xdg ? xdg : "/run");
		c->runtime_dir = o->runtime;
	}
	if (!c->n_endpoints) {
		char why[64];
		int r = daemon_options_set_etcd(o, "http://127.0.0.1:2379", why, sizeof(why));
		if (r < 0) {
			snprintf(err, err_len, "leasehold: out of memory");
			return r;
		}
	}
	const char *url = control_url_resolve(o->flag_value[F_CONTROL], o->file_value[F_CONTROL],
					      o->control, sizeof(o->control));
	c->control_url = strcmp(url, "none") == 0 ? "" : url;
	for (size_t i = 0; i < o->n_iso; i++)
		o->iso_names[i] = o->iso_name[i];
	c->iso_names = o->iso_names;
	c->iso_modes = o->iso_modes;
	c->n_iso = o->n_iso;
	c->cb_timeouts = o->cb;
	c->n_cb_timeouts = o->n_cb;
	c->priorities = o->prio;
	c->n_priorities = o->n_prio;
	for (size_t i = 0; i < o->n_read; i++)
		o->read_names[i] = o->read_name[i];
	c->read_names = o->read_names;
	c->read_prefixes = o->read_prefixes;
	c->n_read = o->n_read;
	for (size_t i = 0; i < o->n_pc; i++)
		o->pc_names[i] = o->pc_name[i];
	c->plugin_config_names = o->pc_names;
	c->plugin_config_files = o->pc_files;
	c->n_plugin_configs = o->n_pc;
	c->roles_seed = o->roles;
	c->n_roles_seed = o->n_roles;
	return 0;
}

static int daemon_options_reload_hook(void *ud)
{
	return daemon_options_reload(ud);
}

static struct daemon_options *daemon_options_new(const char *default_config)
{
	struct daemon_options *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->default_config = default_config;
	o->cfg = (struct daemon_config){
		.isolation = PLUGIN_ISOLATION_PROCESS, /* docs/operations: "Which isolation" */
		.prefix = "/leasehold",
		.ttl_s = 10,
		.reconcile_wait_ns = 5 * 1000000000ull,
		.reconcile_interval_ns = 30 * 1000000000ull,
		.unhealthy_after = HEALTH_DEFAULT_AFTER,
		.unhealthy_hold_down_ns = HEALTH_DEFAULT_HOLD_DOWN_NS,
		.exit_linger_ns = 100 * 1000000ull,
		.reload = daemon_options_reload_hook,
		.reload_ud = o,
	};
	return o;
}

/* build - the file (if any), then the flags recorded in o->args, then the
 * defaults; err gets one line */
static int daemon_options_build(struct daemon_options *o, char *err, size_t err_len)
{
	char why[CONFIG_ERR_MAX];
	int r = daemon_options_read_file(o, err, err_len);

	if (r < 0)
		return r == -EINVAL ? -EBADMSG : r;
	for (size_t i = 0; o->file && i < o->file->n_settings; i++) {
		const struct config_setting *s = &o->file->settings[i];
		int id = daemon_options_find_flag(s->flag);
		/* the environment beats the file where a variable exists */
		if (id == F_LOG_FORMAT && o->env_log_format)
			continue;
		if (id < 0) {
			snprintf(err, err_len, "%s:%u: %s: not a flag", o->file->path, s->line, s->flag);
			return -EBADMSG;
		}
		if ((r = daemon_options_set(o, id, s->value, SRC_FILE, why, sizeof(why))) < 0) {
			snprintf(err, err_len, "%s:%u: %s: %s", o->file->path, s->line, s->key, why);
			return -EBADMSG;
		}
	}
	for (size_t i = 0; i < o->n_args; i++) {
		if ((r = daemon_options_set(o, o->args[i].id, o->args[i].value, SRC_FLAG, why, sizeof(why))) < 0) {
			snprintf(err, err_len, "leasehold: %s", why);
			return -EINVAL;
		}
	}
	return daemon_options_finish(o, err, err_len);
}

int daemon_options_parse(int argc, char **argv, const char *default_config,
			 struct daemon_options **ret, enum daemon_options_action *ret_action,
			 char *err, size_t err_len)
{
	struct option opts[N_FLAGS + 1];
	enum daemon_options_action action = DAEMON_OPTIONS_RUN;
	struct daemon_options *o = daemon_options_new(default_config);
	int c, r = -EINVAL;

	if (!o || !(o->args = calloc((size_t)argc + 1, sizeof(*o->args)))) {
		snprintf(err, err_len, "leasehold: out of memory");
		daemon_options_free(o);
		return -ENOMEM;
	}
	for (int i = 0; i < N_FLAGS; i++)
		opts[i] = (struct option){flag_keys[i].name,
					  flag_attrs[i] & CONTROL_CONFIG_NOARG ? no_argument : required_argument, NULL,
					  i == F_HELP ? 'h' : i == F_VERSION ? 'V' : 256 + i};
	opts[N_FLAGS] = (struct option){NULL, 0, NULL, 0};
	const char *env_fmt = getenv(LOG_FORMAT_ENV);
	o->env_log_format = env_fmt && *env_fmt;
	optind = 0; /* a fresh scan (glibc) */
	opterr = 1;
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		if (c == 'h' || c == 'V') {
			action = c == 'h' ? DAEMON_OPTIONS_HELP : DAEMON_OPTIONS_VERSION;
			*ret = o;
			*ret_action = action;
			return 0;
		}
		if (c < 256 || c >= 256 + N_FLAGS) {
			err[0] = '\0'; /* getopt said what is wrong */
			goto fail;
		}
		if (c - 256 == F_CHECK_CONFIG)
			action = DAEMON_OPTIONS_CHECK;
		else if (c - 256 == F_CONFIG)
			o->config_flag = optarg;
		else
			o->args[o->n_args++] = (struct arg){c - 256, optarg};
	}
	if (optind < argc) {
		snprintf(err, err_len, "leasehold: unexpected argument: '%s'", argv[optind]);
		goto fail;
	}
	if ((r = daemon_options_build(o, err, err_len)) < 0)
		goto fail;
	*ret = o;
	*ret_action = action;
	return 0;
fail:
	daemon_options_free(o);
	return r;
}

const struct daemon_config *daemon_options_config(const struct daemon_options *o)
{
	return &o->cfg;
}

const char *daemon_options_file(const struct daemon_options *o)
{
	return o->file ? o->file->path : "";
}

void daemon_options_apply_logging(const struct daemon_options *o)
{
	if (o->has_log_level)
		log_set_level(o->log_level);
	const char *fmt_text = o->flag_value[F_LOG_FORMAT];
	if (!fmt_text && o->src[F_LOG_FORMAT] == SRC_FILE)
		fmt_text = o->file_value[F_LOG_FORMAT];
	enum log_format fmt;
	if (fmt_text && log_parse_format(fmt_text, &fmt) == 0) {
		log_set_format(fmt);
		/* the plugin workers this process starts write the same format */
		setenv(LOG_FORMAT_ENV, fmt_text, 1);
	}
}

void daemon_options_print(const struct daemon_options *o, FILE *f)
{
	fprintf(f, "# leasehold: the effective settings (%s%s)\n",
		o->file ? "configuration file " : "no configuration file",
		o->file ? o->file->path : "");
	for (int i = 0; i < N_FLAGS; i++) {
		if (!o->shown[i])
			continue;
		bool list = flag_keys[i].kind == CONFIG_KEY_REPEATED ||
			    flag_keys[i].kind == CONFIG_KEY_RULES;
		/* YAML's single-quoted style: only ' needs escaping */
		fprintf(f, "%s: %s'", flag_keys[i].name, list ? "[" : "");
		for (const char *p = o->shown[i]; *p; p++) {
			if (list && p[0] == ',' && p[1] == ' ') {
				fputs("', '", f);
				p++;
			} else if (*p == '\'')
				fputs("''", f);
			else
				fputc(*p, f);
		}
		fprintf(f, "'%s%s\n", list ? "]" : "",
			o->src[i] == SRC_FLAG ? "  # from a flag" : "");
	}
}

static const char *daemon_options_shown_or_default(const char *s)
{
	return s ? s : "(default)";
}

static bool daemon_options_same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* daemon_options_take_runtime - the settings a SIGHUP applies, from n into o */
static void daemon_options_take_runtime(struct daemon_options *o, const struct daemon_options *n)
{
	o->cfg.shutdown_timeout_ns = n->cfg.shutdown_timeout_ns;
	o->cfg.exit_linger_ns = n->cfg.exit_linger_ns;
	o->cfg.isolation = n->cfg.isolation;
	memcpy(o->iso_name, n->iso_name, sizeof(o->iso_name));
	memcpy(o->iso_modes, n->iso_modes, sizeof(o->iso_modes));
	o->n_iso = o->cfg.n_iso = n->n_iso;
	for (size_t i = 0; i < o->n_iso; i++)
		o->iso_names[i] = o->iso_name[i];
	memcpy(o->cb, n->cb, sizeof(o->cb));
	o->n_cb = o->cfg.n_cb_timeouts = n->n_cb;
	o->log_level = n->has_log_level ? n->log_level : LOG_LVL_INFO;
	o->has_log_level = true;
	log_set_level(o->log_level);
}

int daemon_options_reload(struct daemon_options *o)
{
	struct daemon_options *n = daemon_options_new(o->default_config);
	char err[CONFIG_ERR_MAX + 64];
	int r;

	if (!n) {
		log_error("config", "cannot re-read the configuration: out of memory");
		return -ENOMEM;
	}
	n->config_flag = o->config_flag;
	n->env_log_format = o->env_log_format;
	n->args = o->args; /* borrowed for the build */
	n->n_args = o->n_args;
	r = daemon_options_build(n, err, sizeof(err));
	n->args = NULL;
	if (r < 0) {
		log_error("config", "%s; the configuration is refused as a whole, the running "
				    "settings stay",
			  err);
		daemon_options_free(n);
		return r;
	}
	const char *path = n->file ? n->file->path : "(no file)";
	bool runtime_changed = false, any = false;
	for (int i = 0; i < N_FLAGS; i++) {
		if (daemon_options_same(o->shown[i], n->shown[i]))
			continue;
		any = true;
		if (flag_attrs[i] & CONTROL_CONFIG_RUNTIME) {
			log_info("config", "%s changed from %s to %s", flag_keys[i].name,
				 daemon_options_shown_or_default(o->shown[i]), daemon_options_shown_or_default(n->shown[i]));
			runtime_changed = true;
			char *s = n->shown[i];
			n->shown[i] = o->shown[i];
			o->shown[i] = s;
		} else {
			log_warn("config",
				 "%s changed from %s to %s in %s: needs a restart; the running "
				 "value stays",
				 flag_keys[i].name, daemon_options_shown_or_default(o->shown[i]),
				 daemon_options_shown_or_default(n->shown[i]), path);
		}
	}
	if (runtime_changed)
		daemon_options_take_runtime(o, n);
	if (!any)
		log_info("config", "re-read %s: no change", path);
	daemon_options_free(n);
	return 0;
}

void daemon_options_free(struct daemon_options *o)
{
	if (!o)
		return;
	for (int i = 0; i < N_FLAGS; i++)
		free(o->shown[i]);
	config_file_free(o->file);
	free(o->etcd_buf);
	free(o->args);
	free(o);
}
