/* SPDX-License-Identifier: MIT */
/*
 * kit_run.c - see kit_run.h. The world's setup and teardown, and the
 * statements that act on hosts; keys are kit_keys.c.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "kit_internal.h"

int kit_resolve_file(const char *dir, const char *file, char *buf, size_t len)
{
	int n = file[0] == '/' ? snprintf(buf, len, "%s", file)
	                       : snprintf(buf, len, "%s/%s", dir, file);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static bool kit_run_plugin_settled(struct json_object *p, const void *arg)
{
	(void)arg;
	const char *st = p ? jstr(p, "state") : NULL;
	return st && strcmp(st, "loading") != 0;
}

/* host i up and answering, its plugin past "loading" */
static int kit_run_host_up(struct kit_world *w, int i)
{
	struct host *h = &w->hosts[i];
	const char *args[72] = {KIT_HOST_ARGS};
	size_t n = 0;
	while (args[n])
		n++;
	for (const char *const *a = w->o.host_args; a && *a && n + 1 < 72; a++)
		args[n++] = *a;
	args[n] = NULL;
	host_start(h, harness_etcd_urls(w->etcd), args);
	w->up[i] = true;
	host_wait_control(h, kit_timeout_ms(w));
	const char *name = w->name[0] ? w->name : w->file;
	struct json_object *p = ctl_wait_plugin(h, name, kit_run_plugin_settled, NULL,
						kit_timeout_ms(w), "the plugin to load");
	int r = 0;
	if (strcmp(jstr(p, "state"), "failed") == 0) {
		const char *e = jstr(p, "error");
		fprintf(stderr, "FAIL: the plugin did not load on %s: %s\n", h->node, e ? e : "?");
		r = 1;
	} else if (!w->name[0]) {
		snprintf(w->name, sizeof(w->name), "%s", jstr(p, "name"));
		snprintf(w->prefix, sizeof(w->prefix), "/leasehold/%s/data/", w->name);
	}
	json_object_put(p);
	return r;
}

int kit_world_start(const struct kit_options *o, struct kit_world **ret)
{
	struct kit_world *w = calloc(1, sizeof(*w));
	CHECK(w);
	w->o = *o;
	w->timeout_ns = o->timeout_ns;
	const char *slash = strrchr(o->plugin, '/');
	snprintf(w->file, sizeof(w->file), "%s", slash ? slash + 1 : o->plugin);
	hosts_set_bindir(o->bindir);
	CHECK_OK(harness_etcd_start(1, NULL, &w->etcd));
	tu_init(&w->tu, harness_etcd_urls(w->etcd));
	*ret = w;
	for (int i = 0; i < o->n_hosts; i++) {
		char node[16];
		snprintf(node, sizeof(node), "node%d", i + 1);
		host_setup(&w->hosts[i], harness_dir(w->etcd), node);
		host_install_file(&w->hosts[i], o->plugin, w->file, 0644);
	}
	for (int i = 0; i < o->n_hosts; i++)
		if (kit_run_host_up(w, i) != 0) {
			hosts_dump_logs();
			return 1;
		}
	printf("etcd %s, %d host(s), plugin %s (%s), data prefix %s\n", harness_etcd_urls(w->etcd),
	       o->n_hosts, w->name, w->file, w->prefix);
	return 0;
}

void kit_world_free(struct kit_world *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->o.n_hosts; i++) {
		struct host *h = &w->hosts[i];
		if (!w->up[i] || h->pid <= 0)
			continue;
		kill(h->pid, SIGTERM);
		if (host_wait(h, 10000) < 0) {
			kill(h->pid, SIGKILL);
			host_wait(h, 10000);
		}
	}
	for (int i = 0; i < w->o.n_hosts; i++)
		host_forget(&w->hosts[i]);
	tu_fini(&w->tu);
	harness_etcd_free(w->etcd);
	free(w);
}

int kit_timeout_ms(const struct kit_world *w)
{
	uint64_t ms = w->timeout_ns / 1000000u;
	return ms > 3600000u ? 3600000 : (int)(ms ? ms : 1);
}

int kit_fail(struct kit_world *w, const struct kit_step *st, const char *fmt, ...)
{
	char what[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	printf("FAIL line %u: %s: %s\n", st->line, kit_op_word(st->op), what);
	fflush(stdout);
	hosts_dump_logs();
	(void)w;
	return 1;
}

/* the plugin's object on live host i (caller puts), NULL when not listed */
static struct json_object *kit_run_plugin(struct kit_world *w, int i)
{
	return ctl_plugin_json(&w->hosts[i], w->name);
}

/* the one live host whose plugin leads, or -1 (none yet, or two claim it
 * for a moment); `except` is skipped */
static int kit_run_leader_now(struct kit_world *w, int except)
{
	int leader = -1, n = 0;
	for (int i = 0; i < w->o.n_hosts; i++) {
		if (!w->up[i] || i == except)
			continue;
		struct json_object *p = kit_run_plugin(w, i);
		const char *st = p ? jstr(p, "state") : NULL;
		if (st && strcmp(st, "leading") == 0) {
			leader = i;
			n++;
		}
		json_object_put(p);
	}
	return n == 1 ? leader : -1;
}

/* wait for one leader among the live hosts but `except`: its index, or -1
 * after the deadline */
static int kit_run_wait_leader(struct kit_world *w, int except)
{
	uint64_t deadline = loop_now() + w->timeout_ns;
	for (;;) {
		int l = kit_run_leader_now(w, except);
		if (l >= 0 || loop_now() >= deadline)
			return l;
		/* the CLI gives no event to wait on: poll, bounded by the deadline */
		poll(NULL, 0, 20);
	}
}

static int kit_run_stop(struct kit_world *w, const struct kit_step *st, int i, int sig)
{
	struct host *h = &w->hosts[i];
	host_signal(h, sig);
	if (host_wait(h, kit_timeout_ms(w)) < 0)
		return kit_fail(w, st, "%s did not exit within %d ms of signal %d", h->node,
				kit_timeout_ms(w), sig);
	w->up[i] = false;
	printf("  %s exited (%d)\n", h->node, h->exit_status);
	return 0;
}

static int kit_run_leader_step(struct kit_world *w, const struct kit_step *st)
{
	int l = kit_run_wait_leader(w, -1);
	if (l < 0)
		return kit_fail(w, st, "no single leader within %d ms", kit_timeout_ms(w));
	if (st->op == KIT_OP_WAIT_LEADER) {
		printf("  leader %s\n", w->hosts[l].node);
		return 0;
	}
	if (st->op == KIT_OP_KILL_LEADER)
		return kit_run_stop(w, st, l, SIGKILL);
	/* failover: the leader leaves gracefully, another takes over */
	int r = kit_run_stop(w, st, l, SIGTERM);
	if (r != 0)
		return r;
	int n = kit_run_wait_leader(w, l);
	if (n < 0)
		return kit_fail(w, st, "no other host took over from %s within %d ms",
				w->hosts[l].node, kit_timeout_ms(w));
	printf("  leader %s -> %s\n", w->hosts[l].node, w->hosts[n].node);
	return 0;
}

static int kit_run_host_step(struct kit_world *w, const struct kit_step *st)
{
	if (st->op == KIT_OP_START_STOPPED) {
		for (int i = 0; i < w->o.n_hosts; i++)
			if (!w->up[i] && kit_run_host_up(w, i) != 0)
				return kit_fail(w, st, "%s came back without the plugin", w->hosts[i].node);
		return 0;
	}
	int i = st->host - 1;
	if (st->op == KIT_OP_STOP_HOST) {
		if (!w->up[i])
			return kit_fail(w, st, "%s is not running", w->hosts[i].node);
		return kit_run_stop(w, st, i, SIGTERM);
	}
	if (w->up[i])
		return kit_fail(w, st, "%s is running already", w->hosts[i].node);
	return kit_run_host_up(w, i) ? kit_fail(w, st, "%s came back without the plugin",
						 w->hosts[i].node)
				     : 0;
}

static int kit_run_reload(struct kit_world *w, const struct kit_step *st)
{
	char path[4200];
	if (kit_resolve_file(w->o.plugin_dir, st->value, path, sizeof(path)) < 0 ||
	    access(path, R_OK) < 0)
		return kit_fail(w, st, "cannot read %s", st->value);
	for (int i = 0; i < w->o.n_hosts; i++)
		if (st->op == KIT_OP_RELOAD || st->host == i + 1)
			host_install_file(&w->hosts[i], path, w->file, 0644);
	return 0;
}

/* every live host runs release st->release of the plugin */
static int kit_run_wait_release(struct kit_world *w, const struct kit_step *st)
{
	char want[RELEASE_STRLEN], seen[512] = "";
	release_format(st->release, want, sizeof(want));
	uint64_t deadline = loop_now() + w->timeout_ns;
	for (;;) {
		bool all = true;
		seen[0] = 0;
		for (int i = 0; i < w->o.n_hosts; i++) {
			if (!w->up[i])
				continue;
			struct json_object *p = kit_run_plugin(w, i);
			const char *rel = p ? jstr(p, "release") : NULL;
			const char *state = p ? jstr(p, "state") : NULL;
			size_t k = strlen(seen);
			snprintf(seen + k, sizeof(seen) - k, "%s%s %s (%s)", k ? ", " : "",
				 w->hosts[i].node, rel ? rel : "-", state ? state : "absent");
			all = all && rel && strcmp(rel, want) == 0 && state &&
			      strcmp(state, "loading") != 0 && strcmp(state, "failed") != 0;
			json_object_put(p);
		}
		if (all)
			return 0;
		if (loop_now() >= deadline)
			return kit_fail(w, st, "expected release %s on every running host, found %s",
					want, seen);
		/* the CLI gives no event to wait on: poll, bounded by the deadline */
		poll(NULL, 0, 20);
	}
}

static int kit_run_config(struct kit_world *w, const struct kit_step *st)
{
	int i;
	for (i = 0; i < w->o.n_hosts && !w->up[i]; i++)
		;
	if (i == w->o.n_hosts)
		return kit_fail(w, st, "no host is running");
	char path[1024];
	snprintf(path, sizeof(path), "%s/config-line-%u.json", harness_dir(w->etcd), st->line);
	FILE *f = fopen(path, "w");
	CHECK(f && fwrite(st->value, 1, st->value_len, f) == st->value_len && fclose(f) == 0);
	struct ctl_out out;
	int rc = host_ctl(&w->hosts[i], &out, "config", "set", w->name, path, NULL);
	int r = rc == 0 ? 0
	                : kit_fail(w, st, "leaseholdctl config set exited %d: %s", rc, out.err);
	ctl_out_free(&out);
	return r;
}

static int kit_run_step(struct kit_world *w, const struct kit_step *st)
{
	switch (st->op) {
	case KIT_OP_PUT:
	case KIT_OP_DELETE:
		return kit_keys_write(w, st);
	case KIT_OP_WAIT_KEY:
	case KIT_OP_WAIT_ABSENT:
	case KIT_OP_EXPECT_KEY:
	case KIT_OP_EXPECT_ABSENT:
		return kit_keys_check(w, st);
	case KIT_OP_WAIT_LEADER:
	case KIT_OP_FAILOVER:
	case KIT_OP_KILL_LEADER:
		return kit_run_leader_step(w, st);
	case KIT_OP_STOP_HOST:
	case KIT_OP_START_HOST:
	case KIT_OP_START_STOPPED:
		return kit_run_host_step(w, st);
	case KIT_OP_RELOAD:
	case KIT_OP_RELOAD_HOST:
		return kit_run_reload(w, st);
	case KIT_OP_WAIT_RELEASE:
		return kit_run_wait_release(w, st);
	case KIT_OP_CONFIG:
		return kit_run_config(w, st);
	case KIT_OP_TIMEOUT:
		w->timeout_ns = st->duration_ns;
		return 0;
	case KIT_OP_COUNT:
		break;
	}
	return kit_fail(w, st, "unknown statement");
}

int kit_world_run(struct kit_world *w, const struct kit_script *s)
{
	for (size_t i = 0; i < s->n_steps; i++) {
		const struct kit_step *st = &s->steps[i];
		uint64_t t0 = loop_now();
		if (kit_run_step(w, st) != 0)
			return 1;
		printf("ok line %u: %s (%llu ms)\n", st->line, kit_op_word(st->op),
		       (unsigned long long)((loop_now() - t0) / 1000000u));
		fflush(stdout);
	}
	return 0;
}
