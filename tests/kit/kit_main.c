/* SPDX-License-Identifier: MIT */
/*
 * kit_main.c - leasehold-plugin-test(1): test a plugin file with a script
 * against a throwaway etcd and real hosts (kit_run.h). Exit status: 0 every
 * statement passed, 1 one failed (or the plugin did not load), 2 usage or
 * script error (nothing was started), 77 skipped (no etcd to run).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/duration.h"
#include "check.h"
#include "kit_internal.h"

#define KIT_EXIT_SKIP 77

static void kit_main_usage(FILE *f)
{
	fprintf(f,
		"usage: leasehold-plugin-test [--hosts N] [--etcd PATH] [--timeout DURATION]\n"
		"                             PLUGIN.so SCRIPT [-- LEASEHOLD-FLAGS...]\n"
		"Starts a throwaway etcd and N (1..%d, default 1) leasehold hosts with PLUGIN.so,\n"
		"then runs SCRIPT's statements (see leasehold-plugin-test(1)). Each wait gives up\n"
		"after DURATION (default 30s; the script's `timeout` changes it). Flags after --\n"
		"are given to every host (after --ttl 2 --reconcile-wait 0).\n"
		"Exit status: 0 passed, 1 failed, 2 usage or script error, 77 skipped (no etcd).\n",
		KIT_MAX_HOSTS);
}

/* an executable etcd: --etcd, else $ETCD, else `etcd` on PATH; into buf */
static bool kit_main_find_etcd(const char *given, char *buf, size_t len)
{
	const char *e = given ? given : getenv("ETCD");
	if (e && *e) {
		snprintf(buf, len, "%s", e);
		return access(buf, X_OK) == 0;
	}
	const char *path = getenv("PATH");
	while (path && *path) {
		const char *colon = strchr(path, ':');
		size_t n = colon ? (size_t)(colon - path) : strlen(path);
		if (n > 0 && (size_t)snprintf(buf, len, "%.*s/etcd", (int)n, path) < len &&
		    access(buf, X_OK) == 0)
			return true;
		path = colon ? colon + 1 : NULL;
	}
	return false;
}

/* the whole file, NUL-terminated; 0 or -errno */
static int kit_main_read(const char *path, char **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap + 1);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len > KIT_SCRIPT_MAX_BYTES)
			break; /* kit_script_parse refuses it */
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int r = !buf ? -ENOMEM : ferror(f) ? -EIO : 0;
	fclose(f);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* the directory of path into buf ("." when it has none) */
static void kit_main_dirname(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
}

/* the plugin file must be a readable NAME.so, as a plugin directory wants */
static int kit_main_check_plugin(const char *plugin)
{
	const char *base = strrchr(plugin, '/');
	base = base ? base + 1 : plugin;
	size_t n = strlen(base);
	if (n < 4 || strcmp(base + n - 3, ".so") != 0 || base[0] == '.') {
		fprintf(stderr, "leasehold-plugin-test: %s: a plugin file is named NAME.so\n", plugin);
		return 2;
	}
	struct stat st;
	if (stat(plugin, &st) < 0 || !S_ISREG(st.st_mode) || access(plugin, R_OK) < 0) {
		fprintf(stderr, "leasehold-plugin-test: cannot read %s\n", plugin);
		return 2;
	}
	return 0;
}

/* every reload FILE (relative: beside PLUGIN.so) is readable before anything
 * starts */
static int kit_main_check_reloads(const struct kit_script *s, const char *dir)
{
	for (size_t i = 0; i < s->n_steps; i++) {
		const struct kit_step *st = &s->steps[i];
		char path[4200];
		if (st->op != KIT_OP_RELOAD && st->op != KIT_OP_RELOAD_HOST)
			continue;
		if (kit_resolve_file(dir, st->value, path, sizeof(path)) < 0 || access(path, R_OK) < 0) {
			fprintf(stderr, "leasehold-plugin-test: line %u: cannot read %s\n", st->line,
				path);
			return 2;
		}
	}
	return 0;
}

struct kit_main_args {
	int n_hosts;
	const char *etcd;
	uint64_t timeout_ns;
	const char *plugin, *script;
	const char *const *host_args;
};

static int kit_main_options(int argc, char **argv, struct kit_main_args *a)
{
	static const struct option opts[] = {
		{"hosts", required_argument, NULL, 'n'}, {"etcd", required_argument, NULL, 'e'},
		{"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	int c;
	char *end;
	/* what follows "--" is the hosts', untouched by getopt */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			a->host_args = (const char *const *)(argv + i + 1);
			argv[i] = NULL;
			argc = i;
			break;
		}
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || v < 1 || v > KIT_MAX_HOSTS) {
				fprintf(stderr, "leasehold-plugin-test: --hosts %s: want 1 to %d\n", optarg,
					KIT_MAX_HOSTS);
				return 2;
			}
			a->n_hosts = (int)v;
			break;
		case 'e':
			a->etcd = optarg;
			break;
		case 't':
			if (duration_parse(optarg, &a->timeout_ns) < 0 || a->timeout_ns == 0) {
				fprintf(stderr, "leasehold-plugin-test: --timeout %s: not a positive duration\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			kit_main_usage(stdout);
			exit(0);
		default:
			kit_main_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		kit_main_usage(stderr);
		return 2;
	}
	a->plugin = argv[optind];
	a->script = argv[optind + 1];
	return 0;
}

int main(int argc, char **argv)
{
	struct kit_main_args a = {.n_hosts = 1, .timeout_ns = 30 * LOOP_NS_PER_S};
	char etcd[PATH_MAX], err[1024], plugin_dir[PATH_MAX], bindir[PATH_MAX], exe[PATH_MAX];
	char *text = NULL;
	size_t len = 0;
	struct kit_script *s = NULL;
	int r = kit_main_options(argc, argv, &a);
	if (r == 0)
		r = kit_main_check_plugin(a.plugin);
	if (r != 0)
		return r;
	if ((r = kit_main_read(a.script, &text, &len)) < 0) {
		fprintf(stderr, "leasehold-plugin-test: cannot read %s: %s\n", a.script, strerror(-r));
		return 2;
	}
	r = kit_script_parse(text, len, a.n_hosts, &s, err, sizeof(err));
	free(text);
	if (r < 0) {
		fprintf(stderr, "leasehold-plugin-test: %s: %s\n", a.script,
			r == -ENOMEM ? "out of memory" : err);
		return 2;
	}
	kit_main_dirname(a.plugin, plugin_dir, sizeof(plugin_dir));
	if ((r = kit_main_check_reloads(s, plugin_dir)) != 0)
		goto out;
	if (!kit_main_find_etcd(a.etcd, etcd, sizeof(etcd))) {
		printf("leasehold-plugin-test: skipped: no etcd to run (%s; give --etcd PATH or put "
		       "etcd on PATH)\n", a.etcd || getenv("ETCD") ? etcd : "none on PATH");
		r = KIT_EXIT_SKIP;
		goto out;
	}
	setenv("ETCD", etcd, 1);
	/* leasehold and leaseholdctl are installed (or built) beside this program */
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(k > 0);
	exe[k] = 0;
	kit_main_dirname(exe, bindir, sizeof(bindir));
	struct kit_options o = {.plugin = a.plugin, .plugin_dir = plugin_dir, .bindir = bindir,
				.n_hosts = a.n_hosts, .timeout_ns = a.timeout_ns,
				.host_args = a.host_args};
	struct kit_world *w = NULL;
	r = kit_world_start(&o, &w);
	if (r == 0)
		r = kit_world_run(w, s);
	kit_world_free(w);
	printf("%s: %s\n", a.script, r == 0 ? "passed" : "FAILED");
out:
	kit_script_free(s);
	return r;
}
