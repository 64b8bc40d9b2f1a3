/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "election/election.h"
#include "etcd/etcd_session.h"
#include "files.h"
#include "harness.h"
#include "hosts.h"
#include "proto/leasehold.pb-c.h"
#include "testutil.h"

extern char **environ;

/* make fleet starts 200 (bench/lh-fleet.c) */
#define MAX_HOSTS 256
static struct host *g_hosts[MAX_HOSTS];
static int g_nhosts;
static bool g_atexit;

/* a test killed by a signal takes its hosts along (kill() only:
 * async-signal-safe) */
static void kill_hosts_now(void)
{
	for (int i = 0; i < g_nhosts; i++)
		if (g_hosts[i]->pid > 0)
			kill(g_hosts[i]->pid, SIGKILL);
}

static void kill_hosts(void)
{
	for (int i = 0; i < g_nhosts; i++)
		if (g_hosts[i]->pid > 0) {
			kill(g_hosts[i]->pid, SIGKILL);
			waitpid(g_hosts[i]->pid, NULL, 0);
			g_hosts[i]->pid = 0;
		}
}

static char g_bindir[1024];

void hosts_set_bindir(const char *dir)
{
	snprintf(g_bindir, sizeof(g_bindir), "%s", dir ? dir : "");
}

const char *built_binary(const char *name)
{
	static char buf[2048];
	const char *b = g_bindir[0] ? g_bindir : getenv("LH_BUILDDIR");
	snprintf(buf, sizeof(buf), "%s/%s", b && *b ? b : ".", name);
	return buf;
}

const char *built_plugin(const char *release)
{
	static char buf[1024];
	const char *b = getenv("LH_BUILDDIR");
	snprintf(buf, sizeof(buf), "%s/plugins/reconciler-%s.so", b && *b ? b : ".", release);
	return buf;
}

void host_setup(struct host *h, const char *base, const char *node)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->node, sizeof(h->node), "%s", node);
	snprintf(h->dir, sizeof(h->dir), "%s/%s", base, node);
	snprintf(h->plugin_dir, sizeof(h->plugin_dir), "%s/plugins", h->dir);
	snprintf(h->control, sizeof(h->control), "ipc://%s/control.sock", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/%s.log", base, node);
	CHECK(mkdir(h->dir, 0755) == 0 || errno == EEXIST);
	CHECK(mkdir(h->plugin_dir, 0755) == 0 || errno == EEXIST);
	harness_cleanup_once(&g_atexit, kill_hosts, kill_hosts_now);
	if (g_nhosts < MAX_HOSTS)
		g_hosts[g_nhosts++] = h;
}

struct host *host_of_node(const char *node)
{
	CHECK(node != NULL);
	for (int i = 0; i < g_nhosts; i++)
		if (strcmp(g_hosts[i]->node, node) == 0)
			return g_hosts[i];
	fprintf(stderr, "no host was set up as node '%s'\n", node);
	exit(1);
}

void host_forget(struct host *h)
{
	for (int i = 0; i < g_nhosts; i++)
		if (g_hosts[i] == h) {
			g_hosts[i] = g_hosts[--g_nhosts];
			return;
		}
}

/* build an environment: the test's own plus envp (an entry overrides the
 * variable of the same name); the strings are borrowed */
static char **make_env(const char *const *envp)
{
	size_t n = 0, k = 0, m = 0;
	while (environ[n])
		n++;
	while (envp && envp[m])
		m++;
	char **env = calloc(n + m + 1, sizeof(*env));
	CHECK(env != NULL);
	for (size_t i = 0; i < n; i++) {
		bool overridden = false;
		for (size_t j = 0; j < m && !overridden; j++) {
			const char *eq = strchr(envp[j], '=');
			size_t len = eq ? (size_t)(eq - envp[j]) : strlen(envp[j]);
			overridden =
			    strncmp(environ[i], envp[j], len) == 0 && environ[i][len] == '=';
		}
		if (!overridden)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < m; j++)
		env[k++] = (char *)(uintptr_t)envp[j];
	env[k] = NULL;
	return env;
}

/* spawn_host - urls NULL: only extra, no flags of h's (a config file test) */
static void spawn_host(struct host *h, const char *urls, const char *const *extra,
		       const char *const *envp)
{
	char rt[600];
	snprintf(rt, sizeof(rt), "%s/run", h->dir);
	const char *argv[56];
	int a = 0;
	for (const char *const *p = h->exec_prefix; p && *p && a < 8; p++)
		argv[a++] = *p;
	argv[a++] = built_binary("leasehold");
	if (!urls)
		goto extra;
	argv[a++] = "--etcd";
	argv[a++] = urls;
	argv[a++] = "--node-id";
	argv[a++] = h->node;
	argv[a++] = "--plugin-dir";
	argv[a++] = h->plugin_dir;
	argv[a++] = "--runtime-dir";
	argv[a++] = rt;
	argv[a++] = "--control";
	argv[a++] = h->control;
	/* hosts share the machine: no default HTTP port (a test that wants the
	 * endpoint passes --http, which comes later and wins) */
	argv[a++] = "--http";
	argv[a++] = "none";
extra:
	for (const char *const *p = extra; p && *p && a < 54; p++)
		argv[a++] = *p;
	argv[a] = NULL;
	/* everything the child needs is built before fork: after it, only
	 * async-signal-safe calls */
	char **env = envp ? make_env(envp) : environ;
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execve(argv[0], (char *const *)argv, env);
		_exit(127);
	}
	if (env != environ)
		free(env);
	h->pid = pid;
}

void host_set_exec_prefix(struct host *h, const char *const *prefix)
{
	h->exec_prefix = prefix;
}

void host_start(struct host *h, const char *urls, const char *const *extra)
{
	spawn_host(h, urls, extra, NULL);
}

void host_start_env(struct host *h, const char *urls, const char *const *extra,
		    const char *const *envp)
{
	spawn_host(h, urls, extra, envp);
}

void host_start_args(struct host *h, const char *const *args, const char *const *envp)
{
	spawn_host(h, NULL, args, envp);
}

void host_signal(struct host *h, int sig)
{
	CHECK(h->pid > 0);
	CHECK(kill(h->pid, sig) == 0);
}

int host_wait(struct host *h, int timeout_ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;
		pid_t w = waitpid(h->pid, &st, WNOHANG);
		if (w == h->pid) {
			h->pid = 0;
			h->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= timeout_ms)
			return -ETIMEDOUT;
		poll(NULL, 0, 5); /* waiting for a child's exit, bounded by the deadline */
	}
}

void host_install_plugin(struct host *h, const char *release, const char *as)
{
	host_install_file(h, built_plugin(release), as, 0644);
}

void host_dump_log(const struct host *h)
{
	test_dump_tail(h->log, 6000);
}

/* ---- additions for the end-to-end CLI / plugin-dir tests ---- */

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

const char *built_test_plugin(const char *name)
{
	static char buf[1024];
	const char *b = getenv("LH_BUILDDIR");
	snprintf(buf, sizeof(buf), "%s/tests/plugins/.libs/%s.so", b && *b ? b : ".", name);
	return buf;
}

char *host_plugin_path(const struct host *h, const char *file, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", h->plugin_dir, file);
	return buf;
}

static void install_bytes(struct host *h, const void *data, size_t len, const char *src,
			  const char *as, mode_t mode)
{
	char tmp[700], dst[700];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", h->plugin_dir, as);
	snprintf(dst, sizeof(dst), "%s/%s", h->plugin_dir, as);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(out >= 0);
	if (src) {
		int in = open(src, O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			fprintf(stderr, "cannot open %s: %s\n", src, strerror(errno));
			exit(99);
		}
		test_copy_fd(in, out);
		close(in);
	} else if (len > 0) {
		CHECK(write(out, data, len) == (ssize_t)len);
	}
	CHECK(fchmod(out, mode) == 0);
	CHECK(close(out) == 0);
	CHECK(rename(tmp, dst) == 0);
}

void host_install_file(struct host *h, const char *src, const char *as, mode_t mode)
{
	install_bytes(h, NULL, 0, src, as, mode);
}

void host_install_text(struct host *h, const char *text, const char *as, mode_t mode)
{
	install_bytes(h, text, strlen(text), NULL, as, mode);
}

long host_log_size(const struct host *h)
{
	struct stat st;
	return stat(h->log, &st) == 0 ? (long)st.st_size : 0;
}

char *host_log_since(const struct host *h, long from)
{
	FILE *f = fopen(h->log, "r");
	char *s = NULL;
	size_t len = 0, cap = 0;
	if (f && fseek(f, from, SEEK_SET) == 0) {
		char buf[8192];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
			if (len + n + 1 > cap) {
				cap = (len + n + 1) * 2;
				s = realloc(s, cap);
				CHECK(s != NULL);
			}
			memcpy(s + len, buf, n);
			len += n;
		}
	}
	if (f)
		fclose(f);
	if (!s) {
		s = malloc(1);
		CHECK(s != NULL);
	}
	s[len] = 0;
	return s;
}

void ctl_spawn(struct ctl_proc *p, const char *control, const char *const *args)
{
	const char *argv[40];
	int a = 0, po[2], pe[2];
	memset(p, 0, sizeof(*p));
	argv[a++] = built_binary("leaseholdctl");
	if (control) { /* NULL: observer mode (the args carry --etcd) */
		argv[a++] = "--control";
		argv[a++] = control;
	}
	for (const char *const *x = args; x && *x && a < 39; x++)
		argv[a++] = *x;
	argv[a] = NULL;
	CHECK(pipe2(po, O_CLOEXEC) == 0);
	CHECK(pipe2(pe, O_CLOEXEC) == 0);
	p->start_ms = now_ms();
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	p->pid = pid;
	p->out_fd = po[0];
	p->err_fd = pe[0];
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
	char *b = realloc(*buf, *len + n + 1);
	CHECK(b != NULL);
	memcpy(b + *len, data, n);
	*len += n;
	b[*len] = 0;
	*buf = b;
}

static void ctl_proc_drop(struct ctl_proc *p)
{
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	free(p->out);
	free(p->err);
	memset(p, 0, sizeof(*p));
}

/* read p's output until both pipes are closed or the deadline passed */
static void ctl_drain(struct ctl_proc *p, long deadline)
{
	while (p->out_fd >= 0 || p->err_fd >= 0) {
		struct pollfd pfd[2] = {{.fd = p->out_fd, .events = POLLIN},
					{.fd = p->err_fd, .events = POLLIN}};
		long left = deadline - now_ms();
		if (left <= 0)
			break;
		int r = poll(pfd, 2, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r >= 0);
		for (int i = 0; i < 2; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			char buf[4096];
			ssize_t n = read(pfd[i].fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				if (i == 0)
					p->out_fd = -1;
				else
					p->err_fd = -1;
				continue;
			}
			if (i == 0)
				append(&p->out, &p->out_len, buf, (size_t)n);
			else
				append(&p->err, &p->err_len, buf, (size_t)n);
		}
	}
}

bool ctl_running_for(struct ctl_proc *p, int ms)
{
	ctl_drain(p, now_ms() + ms);
	return p->out_fd >= 0 || p->err_fd >= 0;
}

int ctl_finish(struct ctl_proc *p, struct ctl_out *o, int timeout_ms)
{
	ctl_drain(p, now_ms() + timeout_ms);
	if (p->out_fd >= 0 || p->err_fd >= 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		ctl_proc_drop(p);
		return -ETIMEDOUT;
	}
	/* both pipes closed: the process has exited or is about to */
	int st;
	while (waitpid(p->pid, &st, 0) < 0)
		CHECK(errno == EINTR);
	memset(o, 0, sizeof(*o));
	o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	o->ms = now_ms() - p->start_ms;
	o->out = p->out ? p->out : strdup("");
	o->err = p->err ? p->err : strdup("");
	CHECK(o->out && o->err);
	memset(p, 0, sizeof(*p));
	return 0;
}

void ctl_run(struct ctl_out *o, const char *control, const char *const *args)
{
	struct ctl_proc p;
	ctl_spawn(&p, control, args);
	if (ctl_finish(&p, o, 30000) < 0) {
		fprintf(stderr, "leaseholdctl %s ... did not finish within 30 s\n",
			args && args[0] ? args[0] : "");
		exit(1);
	}
}

int host_ctl(const struct host *h, struct ctl_out *o, ...)
{
	const char *args[32];
	size_t n = 0;
	va_list ap;
	va_start(ap, o);
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
		CHECK(n + 1 < sizeof(args) / sizeof(args[0]));
		args[n++] = a;
	}
	va_end(ap);
	args[n] = NULL;
	ctl_run(o, h->control, args);
	return o->status;
}

int ctl_observer_argv(struct ctl_out *o, const char *urls, const char *prefix,
		      const char *const *extra, const char *const *args)
{
	const char *argv[48] = {"--etcd", urls, "--prefix", prefix};
	size_t a = 4;
	for (; extra && *extra; extra++) {
		CHECK(a + 1 < sizeof(argv) / sizeof(argv[0]));
		argv[a++] = *extra;
	}
	for (; *args; args++) {
		CHECK(a + 1 < sizeof(argv) / sizeof(argv[0]));
		argv[a++] = *args;
	}
	argv[a] = NULL;
	ctl_run(o, NULL, argv);
	return o->status;
}

int ctl_observer_vrun(struct ctl_out *o, const char *urls, const char *prefix,
		      const char *const *extra, va_list ap)
{
	const char *args[40];
	size_t n = 0;
	for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
		CHECK(n + 1 < sizeof(args) / sizeof(args[0]));
		args[n++] = s;
	}
	args[n] = NULL;
	return ctl_observer_argv(o, urls, prefix, extra, args);
}

void ctl_out_free(struct ctl_out *o)
{
	free(o->out);
	free(o->err);
	o->out = o->err = NULL;
}

void hosts_terminate(struct host *const *hs, size_t n, int timeout_ms, bool clean)
{
	for (size_t i = 0; i < n; i++)
		host_signal(hs[i], SIGTERM);
	for (size_t i = 0; i < n; i++)
		CHECK_OK(host_wait(hs[i], timeout_ms));
	for (size_t i = 0; clean && i < n; i++)
		CHECK_INT_EQ(hs[i]->exit_status, 0);
}

void hosts_dump_logs(void)
{
	for (int i = 0; i < g_nhosts; i++)
		host_dump_log(g_hosts[i]);
}

/* split one table line "| a | b |" into trimmed cells; returns the count */
static int split_row(const char *line, size_t line_len, char cells[][128], int max)
{
	int n = 0;
	const char *p = line, *end = line + line_len;
	if (p >= end || *p != '|')
		return 0;
	p++;
	while (p < end && n < max) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break;
		const char *a = p, *b = bar;
		while (a < b && *a == ' ')
			a++;
		while (b > a && b[-1] == ' ')
			b--;
		snprintf(cells[n], 128, "%.*s", (int)(b - a), a);
		n++;
		p = bar + 1;
	}
	return n;
}

/* visit the '|' lines of out: the first is the header */
const char *ctl_table_cell(const char *out, const char *row, const char *column, char *buf,
			   size_t len)
{
	char hdr[16][128], cells[16][128];
	int nh = 0, col = -1;
	for (const char *l = out; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		if (ll > 0 && l[0] == '|') {
			if (nh == 0) {
				nh = split_row(l, ll, hdr, 16);
				for (int i = 0; i < nh; i++)
					if (strcmp(hdr[i], column) == 0)
						col = i;
				if (col < 0)
					return NULL;
			} else {
				int nc = split_row(l, ll, cells, 16);
				if (nc == nh && strcmp(cells[0], row) == 0) {
					snprintf(buf, len, "%s", cells[col]);
					return buf;
				}
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return NULL;
}

int ctl_table_rows(const char *out)
{
	int n = 0;
	for (const char *l = out; l && *l;) {
		const char *nl = strchr(l, '\n');
		if (l[0] == '|')
			n++;
		else if (l[0] != '+' && n > 0)
			break; /* the first table ended (plugins prints its nodes next) */
		l = nl ? nl + 1 : NULL;
	}
	return n > 0 ? n - 1 : 0;
}

struct observer {
	struct tu *t;
	struct session *sess;
	struct election *el;
};

static void obs_up(void *ud, int64_t l)
{
	(void)ud;
	(void)l;
}

static void obs_lost(void *ud, int64_t l, const char *w)
{
	(void)ud;
	(void)l;
	(void)w;
}

const struct session_ops host_quiet_session_ops = {.up = obs_up, .lost = obs_lost};

struct observer *obs_new(struct tu *t, const char *prefix, const char *plugin, struct release rel,
			 struct release min_reconciler, struct release min_compatible)
{
	struct observer *o = calloc(1, sizeof(*o));
	CHECK(o != NULL);
	o->t = t;
	/* the session is never started: no lease, so the observer never
	 * registers nor campaigns; it only watches */
	CHECK_OK(session_new(t->loop, t->etcd, 10, &host_quiet_session_ops, NULL, &o->sess));
	struct election_config cfg = {.prefix = prefix,
				      .name = plugin,
				      .node_id = "observer",
				      .releases = {rel, min_reconciler, min_compatible}};
	CHECK_OK(election_new(t->loop, t->etcd, o->sess, &cfg, &o->el));
	CHECK_OK(election_start(o->el));
	return o;
}

void obs_free(struct observer *o)
{
	if (!o)
		return;
	election_free(o->el);
	session_free(o->sess);
	free(o);
}

const char *obs_leader(struct observer *o)
{
	struct election_info i;
	election_get_info(o->el, &i);
	return i.leader;
}

size_t obs_members(struct observer *o)
{
	struct election_member m[16];
	return election_members(o->el, m, 16);
}

bool obs_ready(struct observer *o)
{
	struct election_info i;
	election_get_info(o->el, &i);
	return i.status_compatible; /* an observer has no session to vouch with */
}

struct obs_want {
	const char *node;
	size_t n;
	struct release r;
};

static bool p_leader(struct observer *o, const struct obs_want *w)
{
	const char *l = obs_leader(o);
	return l && strcmp(l, w->node) == 0;
}

static bool p_members(struct observer *o, const struct obs_want *w)
{
	return obs_members(o) == w->n;
}

/* members matching r (any release when NULL), campaigning ones only with
 * campaigning */
static size_t obs_count(struct observer *o, const struct release *r, bool campaigning)
{
	size_t n = election_members(o->el, NULL, 0), k = 0;
	struct election_member *m = calloc(n ? n : 1, sizeof(*m));
	CHECK(m != NULL);
	n = election_members(o->el, m, n);
	for (size_t i = 0; i < n; i++)
		k += (!r || release_cmp(m[i].release, *r) == 0) && (!campaigning || m[i].campaigning);
	free(m);
	return k;
}

size_t obs_members_at(struct observer *o, struct release r)
{
	return obs_count(o, &r, false);
}

size_t obs_campaigning(struct observer *o)
{
	return obs_count(o, NULL, true);
}

static bool p_member_release(struct observer *o, const struct obs_want *w)
{
	struct election_member m[16];
	size_t n = election_members(o->el, m, 16);
	for (size_t i = 0; i < n && i < 16; i++)
		if (strcmp(m[i].node_id, w->node) == 0)
			return release_cmp(m[i].release, w->r) == 0;
	return false;
}

static bool p_status_done(struct observer *o, const struct obs_want *w)
{
	struct election_info i;
	election_get_info(o->el, &i);
	return i.status_present && i.status_valid &&
	       i.status_state == LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE &&
	       release_cmp(i.status_version, w->r) == 0;
}

static long obs_wait(struct observer *o, bool (*pred)(struct observer *, const struct obs_want *),
		     const struct obs_want *w, int timeout_ms, const char *what)
{
	uint64_t t0 = loop_now();
	uint64_t deadline = t0 + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (!pred(o, w)) {
		if (loop_now() >= deadline) {
			const char *l = obs_leader(o);
			fprintf(stderr,
				"timed out after %d ms waiting for %s (leader %s, %zu members)\n",
				timeout_ms, what, l ? l : "(none)", obs_members(o));
			hosts_dump_logs();
			exit(1);
		}
		loop_run_once(o->t->loop, 20);
	}
	return (long)((loop_now() - t0) / LOOP_NS_PER_MS);
}

long obs_wait_leader(struct observer *o, const char *node, int timeout_ms)
{
	struct obs_want w = {.node = node};
	char what[128];
	snprintf(what, sizeof(what), "leader %s", node);
	return obs_wait(o, p_leader, &w, timeout_ms, what);
}

long obs_wait_members(struct observer *o, size_t n, int timeout_ms)
{
	struct obs_want w = {.n = n};
	char what[128];
	snprintf(what, sizeof(what), "%zu members", n);
	return obs_wait(o, p_members, &w, timeout_ms, what);
}

long obs_wait_member_release(struct observer *o, const char *node, struct release r, int timeout_ms)
{
	struct obs_want w = {.node = node, .r = r};
	char what[128], rb[RELEASE_STRLEN];
	snprintf(what, sizeof(what), "member %s at release %s", node,
		 release_format(r, rb, sizeof(rb)));
	return obs_wait(o, p_member_release, &w, timeout_ms, what);
}

long obs_wait_status_done(struct observer *o, struct release version, int timeout_ms)
{
	struct obs_want w = {.r = version};
	char what[128], rb[RELEASE_STRLEN];
	snprintf(what, sizeof(what), "status DONE %s", release_format(version, rb, sizeof(rb)));
	return obs_wait(o, p_status_done, &w, timeout_ms, what);
}

struct json_object *ctl_plugins_json(const struct host *h)
{
	struct ctl_out o;
	host_ctl(h, &o, "plugins", "--json", NULL);
	if (o.status != 0) {
		fprintf(stderr, "leaseholdctl plugins --json on %s: exit %d: %s\n", h->node,
			o.status, o.err);
		exit(1);
	}
	struct json_object *a = json_tokener_parse(o.out);
	if (!a || !json_object_is_type(a, json_type_array)) {
		fprintf(stderr, "leaseholdctl plugins --json on %s: not a JSON array:\n%s\n",
			h->node, o.out);
		exit(1);
	}
	ctl_out_free(&o);
	return a;
}

struct json_object *jget(struct json_object *o, const char *path)
{
	char key[128];
	while (o && path && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		struct json_object *v = NULL;
		if (!json_object_is_type(o, json_type_object) ||
		    !json_object_object_get_ex(o, key, &v))
			return NULL;
		o = v;
		path = dot ? dot + 1 : NULL;
	}
	return o;
}

const char *jstr(struct json_object *o, const char *path)
{
	struct json_object *v = jget(o, path);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static struct json_object *find_in(struct json_object *a, const char *name)
{
	size_t n = json_object_array_length(a);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			struct json_object *p = json_object_array_get_idx(a, i);
			const char *v = jstr(p, pass == 0 ? "name" : "file");
			if (v && strcmp(v, name) == 0)
				return json_object_get(p);
		}
	return NULL;
}

/* o's member at path, which must be of type t */
static struct json_object *jtyped(struct json_object *o, const char *path, json_type t)
{
	struct json_object *v = jget(o, path);
	if (!v || !json_object_is_type(v, t)) {
		fprintf(stderr, "JSON member '%s' missing or not a %s in %s\n", path,
			json_type_to_name(t), json_object_to_json_string(o));
		exit(1);
	}
	return v;
}

int64_t jint(struct json_object *o, const char *path)
{
	return json_object_get_int64(jtyped(o, path, json_type_int));
}

bool jbool(struct json_object *o, const char *path)
{
	return json_object_get_boolean(jtyped(o, path, json_type_boolean));
}

int64_t host_fencing_token(const struct host *h, const char *plugin)
{
	struct json_object *p = ctl_plugin_json(h, plugin);
	CHECK(p != NULL);
	int64_t t = json_object_get_int64(jget(p, "fencing_token"));
	json_object_put(p);
	return t;
}

struct json_object *host_history_json(const struct host *h, const char *plugin)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "history", plugin, "--json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	fprintf(stderr, "history: %s\n", o.out);
	CHECK(a && json_object_is_type(a, json_type_array));
	ctl_out_free(&o);
	return a;
}

struct json_object *ctl_plugin_json(const struct host *h, const char *name)
{
	struct json_object *a = ctl_plugins_json(h);
	struct json_object *p = find_in(a, name);
	json_object_put(a);
	return p;
}

struct json_object *ctl_wait_plugin(const struct host *h, const char *name,
				    bool (*pred)(struct json_object *p, const void *arg),
				    const void *arg, int timeout_ms, const char *what)
{
	long deadline = now_ms() + timeout_ms;
	/* a host just started may not listen yet */
	host_wait_control(h, timeout_ms);
	for (;;) {
		struct json_object *a = ctl_plugins_json(h);
		struct json_object *p = find_in(a, name);
		if (pred(p, arg)) {
			json_object_put(a);
			return p;
		}
		json_object_put(p);
		if (now_ms() >= deadline) {
			fprintf(stderr,
				"timed out after %d ms on %s waiting for %s; last plugins:\n%s\n",
				timeout_ms, h->node, what,
				json_object_to_json_string_ext(a, JSON_C_TO_STRING_PRETTY));
			json_object_put(a);
			hosts_dump_logs();
			exit(1);
		}
		json_object_put(a);
		/* no event to wait on through the CLI: poll, bounded by the deadline */
		poll(NULL, 0, 20);
	}
}

long host_wait_control(const struct host *h, int timeout_ms)
{
	long t0 = now_ms();
	for (;;) {
		struct ctl_out o;
		int st = host_ctl(h, &o, "version", NULL);
		ctl_out_free(&o);
		if (st == 0)
			return now_ms() - t0;
		if (now_ms() - t0 >= timeout_ms) {
			fprintf(stderr, "the daemon of %s did not answer within %d ms\n", h->node,
				timeout_ms);
			hosts_dump_logs();
			exit(1);
		}
		poll(NULL, 0, 20); /* bounded by the deadline */
	}
}

/* ---- additions for the fault suite ---- */

const char *host_plugin_state(const struct host *h, const char *plugin, char *buf, size_t len,
			      int64_t *ret_token)
{
	struct json_object *p = ctl_plugin_json(h, plugin);
	const char *s = p ? jstr(p, "state") : NULL;
	snprintf(buf, len, "%s", p ? (s ? s : "?") : "absent");
	if (ret_token) {
		struct json_object *t = p ? jget(p, "fencing_token") : NULL;
		*ret_token = t ? json_object_get_int64(t) : 0;
	}
	json_object_put(p);
	return buf;
}

struct state_want {
	const char *state;
	bool is;
};

static bool p_state(struct json_object *p, const void *arg)
{
	const struct state_want *w = arg;
	const char *s = p ? jstr(p, "state") : "absent";
	bool eq = s && strcmp(s, w->state) == 0;
	return w->is ? eq : !eq;
}

long host_wait_state(const struct host *h, const char *plugin, const char *state, bool is,
		     int timeout_ms)
{
	struct state_want w = {.state = state, .is = is};
	char what[160];
	snprintf(what, sizeof(what), "plugin %s state %s%s", plugin, is ? "" : "not ", state);
	long t0 = now_ms();
	struct json_object *p = ctl_wait_plugin(h, plugin, p_state, &w, timeout_ms, what);
	json_object_put(p);
	return now_ms() - t0;
}

bool host_alive(struct host *h)
{
	if (h->pid <= 0)
		return false;
	int st;
	pid_t w = waitpid(h->pid, &st, WNOHANG);
	if (w == h->pid) {
		h->pid = 0;
		h->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		return false;
	}
	return true;
}

int host_private_copies(const struct host *h)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/run/plugins.%ld", h->dir, (long)h->pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int n = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		size_t len = strlen(de->d_name);
		/* copies only: process isolation keeps its worker sockets here too */
		if (de->d_name[0] != '.' && len > 3 && strcmp(de->d_name + len - 3, ".so") == 0)
			n++;
	}
	closedir(d);
	return n;
}

int host_mapped_copies(const struct host *h)
{
	char path[64], dir[700];
	snprintf(path, sizeof(path), "/proc/%ld/maps", (long)h->pid);
	snprintf(dir, sizeof(dir), "%s/run/plugins.%ld/", h->dir, (long)h->pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char seen[32][256];
	int n = 0;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, dir);
		if (!p)
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%s", p + strlen(dir));
		name[strcspn(name, " \n")] = 0;
		bool dup = false;
		for (int i = 0; i < n && !dup; i++)
			dup = strcmp(seen[i], name) == 0;
		if (!dup && n < 32)
			snprintf(seen[n++], sizeof(seen[0]), "%s", name);
	}
	fclose(f);
	return n;
}

size_t host_log_count(const struct host *h, long from, const char *needle)
{
	char *s = host_log_since(h, from);
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	free(s);
	return n;
}

struct host_log_want {
	const struct host *h;
	long from;
	const char *needle;
	size_t n;
	uint64_t dump_at; /* loop_now() past which the logs are dumped once (0 = never) */
};

static bool host_p_logged(void *arg)
{
	struct host_log_want *w = arg;
	if (host_log_count(w->h, w->from, w->needle) >= w->n)
		return true;
	if (w->dump_at && loop_now() > w->dump_at) {
		w->dump_at = 0;
		hosts_dump_logs(); /* about to time out: show why */
	}
	return false;
}

void host_wait_log(struct tu *t, const struct host *h, long from, const char *needle, size_t n,
		   int timeout_ms)
{
	struct host_log_want w = {h, from, needle, n,
				  loop_now() + (uint64_t)(timeout_ms > 200 ? timeout_ms - 200 : 0) *
						   LOOP_NS_PER_MS};
	tu_wait(t, host_p_logged, &w, timeout_ms, needle);
}

/* the hosts of a host_wait_log_any, each with its own starting offset */
struct host_log_any {
	const struct host *const *hs;
	const long *from;
	size_t n;
	const char *needle;
};

static bool host_p_any_logged(void *arg)
{
	const struct host_log_any *w = arg;
	for (size_t i = 0; i < w->n; i++)
		if (host_log_count(w->hs[i], w->from[i], w->needle) > 0)
			return true;
	return false;
}

void host_wait_log_any(struct tu *t, const struct host *const *hs, const long *from, size_t n,
		       const char *needle, int timeout_ms)
{
	struct host_log_any w = {hs, from, n, needle};
	tu_wait(t, host_p_any_logged, &w, timeout_ms, needle);
}

long wall_ms_of_day(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (long)(t.tv_sec % 86400) * 1000 + t.tv_nsec / 1000000;
}

long host_log_ms_after(const struct host *h, long from, const char *needle, long ref_ms)
{
	char *s = host_log_since(h, from);
	long r = LONG_MIN;
	const char *hit = strstr(s, needle);
	if (hit) {
		const char *line = hit;
		while (line > s && line[-1] != '\n')
			line--;
		/* the text format's RFC 3339 UTC time: 2026-01-02T03:04:05.678Z */
		int y, mo, dd, hh, mm, ss, ms, end = 0;
		if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &y, &mo, &dd, &hh, &mm, &ss, &ms,
			   &end) == 7 &&
		    end == 24) {
			long t = ((long)hh * 3600 + mm * 60 + ss) * 1000 + ms;
			long d = ((t - ref_ms) % 86400000 + 86400000) % 86400000;
			r = d > 43200000 ? d - 86400000 : d;
		}
	}
	free(s);
	return r;
}

size_t host_worker_pids(pid_t daemon, pid_t *pids, size_t max)
{
	DIR *d = opendir("/proc");
	CHECK(d != NULL);
	struct dirent *de;
	size_t n = 0;
	while ((de = readdir(d))) {
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0;
		/* pid (comm) state ppid ... */
		char *rp = strrchr(buf, ')');
		int ppid = 0;
		if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != daemon)
			continue;
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (strstr(buf, "(leasehold-work") && *end == 0 && pid > 0) {
			if (n < max)
				pids[n] = (pid_t)pid;
			n++;
		}
	}
	closedir(d);
	return n;
}

pid_t host_worker_pid(pid_t daemon)
{
	pid_t pids[16];
	size_t n = host_worker_pids(daemon, pids, 16);
	return n ? pids[(n < 16 ? n : 16) - 1] : 0;
}
