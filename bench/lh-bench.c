/* SPDX-License-Identifier: MIT */
/*
 * lh-bench - the driver of `make bench` (see bench/README.md).
 *
 * One loopback etcd (tests/lib/harness.c), real `leasehold` processes
 * (tests/lib/hosts.c) loading bench/benchplugin.c, which reports every callback
 * as a datagram carrying CLOCK_MONOTONIC at the callback's entry. The driver
 * takes its own CLOCK_MONOTONIC right before the action (kill(), the put),
 * so every interval is one clock, across processes. Waiting is always for an
 * event (datagram, etcd watch event, pipe output) with a deadline.
 *
 * Usage: lh-bench PLUGIN_DIR OUT_MD   (env: ETCD, ETCDCTL, LH_BUILDDIR,
 * LH_BENCH_T10 = trials at ttl 10, LH_BENCH_QUICK=1 for a fast smoke run,
 * LH_BENCH_BROKEN=1 for figure 13 only,
 * LH_BENCH_HANDOVER=1 for figure 1 only, LH_BENCH_SWITCHOVER=1 for figure 9
 * only, LH_BENCH_ROLLOUT=1 for figure 13 only, LH_BENCH_PIN=1 for figure 14
 * only)
 * PLUGIN_DIR holds bench-1.<k>.0.so (k = 0..20, min_compatible 1.0.0) and
 * idle-{a,b,c}.so, and bench-2.0.0.so / bench-2.0.0-ref.so (min_compatible
 * 2.0.0; -ref declares LH_PLUGIN_F_REFERENCE_ROLLOUT). The table goes to
 * OUT_MD, details to stdout.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "browser.h"
#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "proto/leasehold.pb-c.h"
#include "abi/abi_loader.h"
#include "runtime/runtime_instance.h"
#include "plugins/fakehost.h"
#include "raftleader.h"
#include "reports.h"
#include "election/election_switchover_request.h"
#include "election/election_pin_request.h"
#include "testutil.h"

/* ---------------------------------------------------------------- utils */

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct samples {
	double *v;
	size_t n, cap;
};

static void s_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		CHECK(s->v);
	}
	s->v[s->n++] = x;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* quantile q in [0,1] (nearest rank); NAN when empty */
static double s_q(struct samples *s, double q)
{
	if (!s->n)
		return NAN;
	qsort(s->v, s->n, sizeof(*s->v), dcmp);
	if (q <= 0)
		return s->v[0];
	size_t r = (size_t)ceil(q * (double)s->n);
	if (r < 1)
		r = 1;
	if (r > s->n)
		r = s->n;
	if (q == 0.5 && s->n % 2 == 0)
		return (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
	return s->v[r - 1];
}
static double s_med(struct samples *s) { return s_q(s, 0.5); }
static double s_min(struct samples *s) { return s_q(s, 0); }
static double s_max(struct samples *s) { return s_q(s, 1); }

static FILE *g_md; /* the table */

static void row(const char *fig, const char *what, struct samples *s, const char *unit,
                const char *ref, const char *goal, const char *met)
{
	char buf[256];
	if (s && s->n)
		snprintf(buf, sizeof(buf), "%zu | %.3g | %.3g | %.3g %s", s->n, s_med(s), s_min(s),
		         s_max(s), unit);
	else
		snprintf(buf, sizeof(buf), "0 | - | - | - %s", unit);
	fprintf(g_md, "| %s | %s | %s | %s | %s | %s |\n", fig, what, buf, ref, goal, met);
	fflush(g_md);
	printf("ROW %s: %s: %s (ref %s) goal %s: %s\n", fig, what, buf, ref, goal, met);
	fflush(stdout);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* ------------------------------------------------------------- globals */

static struct harness_etcd *g_etcd;
static struct tu T;
static char g_base[512];
static char g_plugins[512];
static const char *g_etcdctl;
static bool g_quick;

/* ------------------------------------------------- plugin event reports */

/* run the loop until pred(arg) or timeout; true when pred held */
static bool p_never(void *arg)
{
	(void)arg;
	return false;
}

static bool wait_for(bool (*pred)(void *), void *arg, int timeout_ms)
{
	uint64_t end = mono() + (uint64_t)timeout_ms * 1000000ull;
	while (!pred(arg)) {
		uint64_t now = mono();
		if (now >= end)
			return false;
		int ms = (int)((end - now) / 1000000ull) + 1;
		loop_run_once(T.loop, ms > 50 ? 50 : ms);
	}
	return true;
}

struct evq {
	size_t from;
	char type;
	const char *node, *name, *rel;
	int64_t a;
	bool match_a;
	int64_t b_min; /* R: n_members >= b_min (0 = any) */
	long found;
};

static bool p_ev(void *arg)
{
	struct evq *q = arg;
	for (size_t i = q->from; i < bench_nev; i++) {
		long k = bench_ev_find(i, q->type, q->node, q->name, q->rel, q->a, q->match_a);
		if (k < 0)
			return false;
		if (bench_ev[k].b >= q->b_min) {
			q->found = k;
			return true;
		}
		i = (size_t)k;
	}
	return false;
}

/* wait for an event; returns its index or -1 */
static long wait_ev(size_t from, char type, const char *node, const char *name, const char *rel,
                    int64_t a, bool match_a, int timeout_ms)
{
	struct evq q = {from, type, node, name, rel, a, match_a, 0, -1};
	return wait_for(p_ev, &q, timeout_ms) ? q.found : -1;
}

/* ------------------------------------------------ etcd key set watcher */

struct kwatch {
	struct etcd_watch *w;
	char keys[32][128];
	int n;
	uint64_t puts;
};

static void on_kw(struct etcd_watch *w, int err, int64_t rev, const struct etcd_event *ev, size_t n,
                  void *ud)
{
	(void)w;
	(void)rev;
	struct kwatch *k = ud;
	if (err < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		char key[128];
		size_t kl = ev[i].kv.key_len < sizeof(key) - 1 ? ev[i].kv.key_len : sizeof(key) - 1;
		memcpy(key, ev[i].kv.key, kl);
		key[kl] = 0;
		int at = -1;
		for (int j = 0; j < k->n; j++)
			if (strcmp(k->keys[j], key) == 0)
				at = j;
		if (ev[i].type == ETCD_EVENT_PUT) {
			k->puts++;
			if (at < 0 && k->n < 32)
				snprintf(k->keys[k->n++], sizeof(k->keys[0]), "%s", key);
		} else if (at >= 0) {
			k->n--;
			if (at != k->n)
				memcpy(k->keys[at], k->keys[k->n], sizeof(k->keys[0]));
		}
	}
}

/* watch every key under prefix, from now on (the prefix is expected empty) */
static void kw_start(struct kwatch *k, const char *prefix)
{
	memset(k, 0, sizeof(*k));
	int64_t rev = tu_put(&T, "/bench-sync", "x", 1);
	uint8_t end[256];
	size_t el = etcd_prefix_end(prefix, strlen(prefix), end);
	CHECK_OK(etcd_watch_start(T.etcd, prefix, strlen(prefix), end, el, rev + 1, 0, on_kw, k,
	                          &k->w));
}

static void kw_stop(struct kwatch *k)
{
	etcd_watch_cancel(k->w);
	k->w = NULL;
}

struct kwq {
	struct kwatch *k;
	int n;
};
static bool p_kw(void *arg)
{
	struct kwq *q = arg;
	return q->k->n == q->n;
}
static bool kw_wait(struct kwatch *k, int n, int timeout_ms)
{
	struct kwq q = {k, n};
	return wait_for(p_kw, &q, timeout_ms);
}

/* ----------------------------------------------------------- processes */

static void install(struct host *h, const char *file, const char *as)
{
	char src[1024];
	snprintf(src, sizeof(src), "%s/%s", g_plugins, file);
	host_install_file(h, src, as, 0644);
}

/* spawn argv with stdout to a pipe (returned) and stderr to /dev/null */
static pid_t spawn_out(const char *const *argv, int *ret_fd)
{
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		int dn = open("/dev/null", O_WRONLY);
		if (dn >= 0)
			dup2(dn, 2);
		setenv("ETCDCTL_API", "3", 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	*ret_fd = p[0];
	return pid;
}

/* wait until fd is readable (or HUP); returns mono() at wake-up, 0 on timeout */
static uint64_t wait_readable(int fd, int timeout_ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	uint64_t end = mono() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		uint64_t now = mono();
		if (now >= end)
			return 0;
		int r = poll(&pf, 1, (int)((end - now) / 1000000ull) + 1);
		if (r > 0)
			return mono();
		if (r < 0 && errno != EINTR)
			return 0;
	}
}

static void drain_fd(int fd)
{
	char buf[512];
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	while (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN) && read(fd, buf, sizeof(buf)) > 0)
		;
}

static void reap(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(pid, sig);
	waitpid(pid, NULL, 0);
}

/* the current leader among hosts: replay the events in order; a node leads
 * from its E until a D/F of the same instance (node + release) */
static struct host *leader_of(struct host **hs, int n, const char *name, int64_t *ret_token)
{
	char node[32] = "", rel[16] = "";
	int64_t tok = 0;
	for (size_t i = 0; i < bench_nev; i++) {
		const struct bench_ev *e = &bench_ev[i];
		if (strcmp(e->name, name))
			continue;
		if (e->type == 'E') {
			snprintf(node, sizeof(node), "%s", e->node);
			snprintf(rel, sizeof(rel), "%s", e->rel);
			tok = e->a;
		} else if ((e->type == 'D' || e->type == 'F') && strcmp(e->node, node) == 0 &&
		           strcmp(e->rel, rel) == 0) {
			node[0] = 0;
		}
	}
	for (int j = 0; node[0] && j < n; j++)
		if (strcmp(hs[j]->node, node) == 0 && hs[j]->pid > 0) {
			if (ret_token)
				*ret_token = tok;
			return hs[j];
		}
	return NULL;
}

static double ms_between(uint64_t a, uint64_t b)
{
	return ((double)b - (double)a) / 1e6;
}

/* ------------------------------------------------- etcdctl references */

/* etcdctl elect: leader SIGINT -> the waiter prints */
static void ref_elect(int n, struct samples *out)
{
	const char *url = harness_etcd_url(g_etcd, 0);
	for (int t = 0; t < n; t++) {
		char name[64], pfx[80];
		snprintf(name, sizeof(name), "/ref/elect/%d", t);
		snprintf(pfx, sizeof(pfx), "%s/", name);
		struct kwatch kw;
		kw_start(&kw, pfx);
		const char *a1[] = {g_etcdctl, "--endpoints", url, "elect", name, "p1", NULL};
		const char *a2[] = {g_etcdctl, "--endpoints", url, "elect", name, "p2", NULL};
		int f1, f2;
		pid_t p1 = spawn_out(a1, &f1);
		if (!wait_readable(f1, 10000)) {
			note("etcdctl elect: no leader output");
			reap(p1, SIGKILL);
			close(f1);
			kw_stop(&kw);
			continue;
		}
		pid_t p2 = spawn_out(a2, &f2);
		if (kw_wait(&kw, 2, 10000)) {
			drain_fd(f1);
			wait_for(p_never, NULL, 20); /* from a quiet etcd, like figure 1 */
			uint64_t t0 = mono();
			kill(p1, SIGINT);
			uint64_t t1 = wait_readable(f2, 10000);
			if (t1)
				s_add(out, ms_between(t0, t1));
		}
		reap(p1, SIGKILL);
		reap(p2, SIGINT);
		close(f1);
		close(f2);
		kw_stop(&kw);
	}
}

/* count keys under prefix with `etcdctl get --prefix --keys-only` (etcdctl
 * 3.4 has no --count-only; one key per non-empty line). Child process
 * context: no loop here. */
static int ctl_count(const char *url, const char *prefix)
{
	const char *a[] = {g_etcdctl, "--endpoints", url, "get", prefix, "--prefix", "--keys-only",
	                   NULL};
	int fd;
	pid_t p = spawn_out(a, &fd);
	char buf[4096];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = 0;
	close(fd);
	int st;
	waitpid(p, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	int n = 0;
	for (char *line = buf; *line;) {
		char *nl = strchr(line, '\n');
		if (nl != line)
			n++;
		if (!nl)
			break;
		line = nl + 1;
	}
	return n;
}

/* etcdctl lock --ttl: holder SIGKILL -> the waiter prints; runs in a forked
 * child, writes doubles (ms) to wfd */
static void ref_lock_child(int ttl, int n, int wfd)
{
	const char *url = harness_etcd_url(g_etcd, 0);
	char ttls[16];
	snprintf(ttls, sizeof(ttls), "%d", ttl);
	for (int t = 0; t < n; t++) {
		char name[64], pfx[80];
		snprintf(name, sizeof(name), "/ref/lock%d/%d", ttl, t);
		snprintf(pfx, sizeof(pfx), "%s/", name);
		const char *a[] = {g_etcdctl, "--endpoints", url, "lock", "--ttl", ttls, name, NULL};
		int f1, f2;
		pid_t p1 = spawn_out(a, &f1);
		if (!wait_readable(f1, 10000)) {
			reap(p1, SIGKILL);
			close(f1);
			continue;
		}
		pid_t p2 = spawn_out(a, &f2);
		uint64_t end = mono() + 10000000000ull;
		while (ctl_count(url, pfx) < 2 && mono() < end)
			;
		uint64_t t0 = mono();
		kill(p1, SIGKILL);
		waitpid(p1, NULL, 0);
		uint64_t t1 = wait_readable(f2, (ttl + 10) * 1000);
		if (t1) {
			double ms = ms_between(t0, t1);
			if (write(wfd, &ms, sizeof(ms)) != sizeof(ms))
				break;
		}
		reap(p2, SIGINT);
		close(f1);
		close(f2);
	}
}

static pid_t ref_lock_start(int ttl, int n, int *ret_fd)
{
	int p[2];
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		ref_lock_child(ttl, n, p[1]);
		_exit(0);
	}
	close(p[1]);
	*ret_fd = p[0];
	return pid;
}

static void ref_lock_collect(pid_t pid, int fd, struct samples *out)
{
	/* keep the loop running meanwhile (the idle window's timer lives on it) */
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 0) == 0) {
			loop_run_once(T.loop, 50);
			continue;
		}
		double ms;
		if (read(fd, &ms, sizeof(ms)) != sizeof(ms))
			break;
		s_add(out, ms);
	}
	close(fd);
	waitpid(pid, NULL, 0);
}

/* ------------------------------------------------------------ hosts */

/* start_host_http - with its HTTP endpoint (the dashboard) on
 * 127.0.0.1:http_port, or none when 0 */
static void start_host_http(struct host *h, const char *prefix, const char *ttl, int http_port)
{
	char addr[32];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", http_port);
	const char *args[] = {"--prefix", prefix, "--ttl", ttl, "--reconcile-wait", "0",
	                      "--reconcile-interval", "1h", "--log-level", "info",
	                      http_port ? "--http" : NULL, addr, NULL};
	host_start(h, harness_etcd_urls(g_etcd), args);
}

static void start_host(struct host *h, const char *prefix, const char *ttl)
{
	start_host_http(h, prefix, ttl, 0);
}

static void stop_host(struct host *h)
{
	if (h->pid <= 0)
		return;
	host_signal(h, SIGTERM);
	if (host_wait(h, 20000) < 0) {
		kill(h->pid, SIGKILL);
		host_wait(h, 5000);
	}
}

/* ------------------------------------------ figures 1 and 2: failover */

/* two hosts on prefix; n trials of sig to the leader. Figure 1 (SIGTERM)
 * fills elected and write; figure 2 (SIGKILL) fills write. */
static void put_floor(int n, struct samples *out);

/* floor (may be NULL): before each trial, three back-to-back puts behind
 * one unrecorded warm-up put, so that the floor (a put on a busy etcd, the
 * strict one) is taken in the same stretch of the run as the handover it is
 * compared with; a graceful handover then starts after 20 ms of nothing
 * happening, like 1d and 1e */
static void failover(const char *prefix, const char *ttl, int sig, int n, struct samples *elected,
                     struct samples *write, struct samples *e2w, struct samples *floor,
                     struct samples *e2call)
{
	char dir[600], epfx[128];
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(epfx, sizeof(epfx), "%s/bench/election/", prefix);
	struct kwatch kw;
	kw_start(&kw, epfx);
	static struct host hA[8], hB[8];
	static int used;
	struct host *A = &hA[used], *B = &hB[used];
	used++;
	host_setup(A, dir, "a");
	host_setup(B, dir, "b");
	install(A, "bench-1.0.0.so", "bench.so");
	install(B, "bench-1.0.0.so", "bench.so");
	size_t from = bench_nev;
	start_host(A, prefix, ttl);
	if (wait_ev(from, 'W', "a", "bench", NULL, 0, false, 30000) < 0) {
		note("failover %s: host a never wrote", prefix);
		host_dump_log(A);
		return;
	}
	start_host(B, prefix, ttl);
	if (!kw_wait(&kw, 2, 30000)) {
		note("failover %s: host b never campaigned", prefix);
		return;
	}
	struct host *hs[2] = {A, B};
	for (int t = 0; t < n; t++) {
		int64_t tok;
		struct host *L = leader_of(hs, 2, "bench", &tok);
		if (!L) {
			note("failover %s: no leader before trial %d", prefix, t);
			break;
		}
		struct host *O = L == A ? B : A;
		if (sig == SIGKILL) {
			/* a crash comes at a random phase of the keepalive period
			 * (TTL/3), not right after a renewal: wait a random part of
			 * it first (events keep being processed meanwhile) */
			long period_ms = strtol(ttl, NULL, 10) * 1000 / 3;
			int delay = (int)(((uint64_t)rand() * (uint64_t)period_ms) / ((uint64_t)RAND_MAX + 1));
			wait_for(p_never, NULL, delay);
		}
		if (floor) {
			tu_put(&T, "/bench-floor", "0123456789", 10);
			put_floor(3, floor);
		}
		if (sig == SIGTERM) /* every handover starts from the same quiet etcd */
			wait_for(p_never, NULL, 20);
		from = bench_nev;
		uint64_t t0 = mono();
		host_signal(L, sig);
		long ke = wait_ev(from, 'E', O->node, "bench", NULL, 0, false, 60000);
		if (ke < 0) {
			note("failover %s: trial %d: no on_elected on %s", prefix, t, O->node);
			host_dump_log(O);
			break;
		}
		long kw2 = wait_ev(from, 'W', O->node, "bench", NULL, bench_ev[ke].a, true, 60000);
		if (elected)
			s_add(elected, ms_between(t0, bench_ev[ke].t));
		if (kw2 >= 0 && write)
			s_add(write, ms_between(t0, bench_ev[kw2].t));
		if (kw2 >= 0 && e2w)
			s_add(e2w, ms_between(bench_ev[ke].t, bench_ev[kw2].t));
		if (kw2 >= 0 && e2call && (uint64_t)bench_ev[kw2].b >= bench_ev[ke].t)
			s_add(e2call, ms_between(bench_ev[ke].t, (uint64_t)bench_ev[kw2].b));
		if (host_wait(L, 30000) < 0) {
			note("failover %s: %s did not exit", prefix, L->node);
			kill(L->pid, SIGKILL);
			host_wait(L, 5000);
		}
		start_host(L, prefix, ttl);
		if (!kw_wait(&kw, 2, 30000)) {
			note("failover %s: %s did not campaign again", prefix, L->node);
			break;
		}
	}
	stop_host(A);
	stop_host(B);
	kw_stop(&kw);
}

/* ------------------------------------------------ figure 9: switchover */

static uint64_t g_sw_ack; /* mono() when the request's txn was acknowledged */
static int g_sw_err = 1;  /* 1 = no answer yet */

static void on_sw_done(void *ud, int err, const char *msg, int64_t rev, const char *from)
{
	(void)ud;
	(void)rev;
	(void)from;
	g_sw_ack = mono();
	g_sw_err = err;
	if (err < 0)
		note("switchover refused: %s", msg ? msg : "?");
}

static bool p_sw_done(void *arg)
{
	(void)arg;
	return g_sw_err != 1;
}

static bool p_key_absent(void *key)
{
	size_t len;
	uint8_t *v = tu_get(&T, key, &len);
	free(v);
	return v == NULL;
}

/* two hosts on prefix; n trials of a switchover to the host that does not
 * lead, requested the way `leaseholdctl switchover --to` has its daemon do
 * it (switchover_request_start, here on the bench's own etcd client):
 * from the request's txn acknowledged to the target's on_elected and to its
 * first fenced write acknowledged. */
static void switchover_fig(const char *prefix, int n, struct samples *elected,
                           struct samples *write)
{
	char dir[600], epfx[128], hkey[128];
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	snprintf(epfx, sizeof(epfx), "%s/bench/election/", prefix);
	snprintf(hkey, sizeof(hkey), "%s/bench/%s", prefix, SWITCHOVER_KEY);
	struct kwatch kw;
	kw_start(&kw, epfx);
	static struct host A, B;
	host_setup(&A, dir, "a");
	host_setup(&B, dir, "b");
	install(&A, "bench-1.0.0.so", "bench.so");
	install(&B, "bench-1.0.0.so", "bench.so");
	size_t from = bench_nev;
	start_host(&A, prefix, "10");
	if (wait_ev(from, 'W', "a", "bench", NULL, 0, false, 30000) < 0) {
		note("switchover %s: host a never wrote", prefix);
		return;
	}
	start_host(&B, prefix, "10");
	if (!kw_wait(&kw, 2, 30000)) {
		note("switchover %s: host b never campaigned", prefix);
		return;
	}
	struct host *hs[2] = {&A, &B};
	for (int t = 0; t < n; t++) {
		struct host *L = leader_of(hs, 2, "bench", NULL);
		if (!L) {
			note("switchover %s: no leader before trial %d", prefix, t);
			break;
		}
		struct host *O = L == &A ? &B : &A;
		wait_for(p_never, NULL, 20); /* from a quiet etcd, like figure 1 */
		from = bench_nev;
		g_sw_err = 1;
		struct switchover_request rq = {.prefix = prefix, .name = "bench",
		                                .requester = "lh-bench", .to = O->node,
		                                .timeout_ms = 30000};
		CHECK_OK(switchover_request_start(T.etcd, &rq, on_sw_done, NULL));
		if (!wait_for(p_sw_done, NULL, 10000) || g_sw_err < 0) {
			note("switchover %s: trial %d: the request failed", prefix, t);
			break;
		}
		long ke = wait_ev(from, 'E', O->node, "bench", NULL, 0, false, 60000);
		if (ke < 0) {
			note("switchover %s: trial %d: no on_elected on %s", prefix, t, O->node);
			host_dump_log(O);
			break;
		}
		long kw2 = wait_ev(from, 'W', O->node, "bench", NULL, bench_ev[ke].a, true, 60000);
		s_add(elected, ms_between(g_sw_ack, bench_ev[ke].t));
		if (kw2 >= 0)
			s_add(write, ms_between(g_sw_ack, bench_ev[kw2].t));
		/* the old leader campaigns again, the new one ended the request */
		if (!kw_wait(&kw, 2, 30000) || !wait_for(p_key_absent, hkey, 30000)) {
			note("switchover %s: trial %d: did not settle", prefix, t);
			break;
		}
	}
	stop_host(&A);
	stop_host(&B);
	kw_stop(&kw);
}

/* -------------------------- figure 8: etcd's raft leader killed */

/* Writes (W, any node) whose txn was called at or after t0, in arrival
 * order: the longest stretch without one, from t0 up to the first that
 * came `until` or later after t0 (then done). */
struct w_after {
	size_t from;
	uint64_t t0, until;
	uint64_t prev, longest;
	bool done;
};

static bool p_w_after(void *arg)
{
	struct w_after *q = arg;
	for (; !q->done && q->from < bench_nev; q->from++) {
		const struct bench_ev *e = &bench_ev[q->from];
		if (e->type != 'W' || (uint64_t)e->b < q->t0)
			continue;
		uint64_t prev = q->prev ? q->prev : q->t0;
		if (e->t > prev && e->t - prev > q->longest)
			q->longest = e->t - prev;
		if (e->t > q->prev)
			q->prev = e->t;
		q->done = e->t >= q->t0 + q->until;
	}
	return q->done;
}

/* two hosts on a 3-member etcd with etcd's default raft timing (heartbeat
 * 100 ms, election timeout 1 s), each with all three endpoints, a's list
 * starting at member 0, b's at member 1; the plugin writes every 100 ms.
 * Trial k moves etcd's raft leadership to member k % 2 (the first endpoint
 * of a, then of b), waits a random part of the keepalive period TTL/3 (as
 * figure 2), SIGKILLs that member, and takes the dead time: the longest
 * stretch without an acknowledged fenced write (txn called after the kill,
 * any host) from the kill up to the first write acknowledged a TTL or more
 * after it (every lease valid at the kill is past its local deadline by
 * then: that write was made under a lease renewed after the kill). The
 * member is restarted before the next trial. */
static void raft_leader_kill(const char *prefix, const char *ttl, int n, struct samples *out)
{
	static const char *const raft_defaults[] = {"--heartbeat-interval", "100",
	                                            "--election-timeout", "1000", NULL};
	struct harness_etcd *h = NULL;
	if (harness_etcd_start(3, raft_defaults, &h) < 0) {
		note("raft leader kill %s: cannot start a 3-member etcd", prefix);
		return;
	}
	char dir[600];
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	static struct host hs[2][2];
	static int used;
	struct host *H = hs[used++];
	const char *args[] = {"--prefix", prefix, "--ttl", ttl, "--reconcile-wait", "0",
	                      "--reconcile-interval", "100ms", "--log-level", "info", NULL};
	size_t from = bench_nev;
	for (int i = 0; i < 2; i++) {
		char urls[512];
		snprintf(urls, sizeof(urls), "%s,%s,%s", harness_etcd_url(h, i),
		         harness_etcd_url(h, (i + 1) % 3), harness_etcd_url(h, (i + 2) % 3));
		host_setup(&H[i], dir, i ? "b" : "a");
		install(&H[i], "bench-1.0.0.so", "bench.so");
		host_start(&H[i], urls, args);
	}
	if (wait_ev(from, 'W', NULL, "bench", NULL, 0, false, 30000) < 0) {
		note("raft leader kill %s: nobody wrote", prefix);
		goto out;
	}
	long period_ms = strtol(ttl, NULL, 10) * 1000 / 3;
	for (int t = 0; t < n; t++) {
		int victim = t % 2;
		if (harness_raft_move_leader(h, victim, 20000) < 0) {
			note("raft leader kill %s: trial %d: raft leadership did not move", prefix, t);
			break;
		}
		/* a leader writes again (after the move, after the last restart) */
		struct w_after q = {.from = bench_nev, .t0 = mono()};
		if (!wait_for(p_w_after, &q, 30000)) {
			note("raft leader kill %s: trial %d: no write before the kill", prefix, t);
			break;
		}
		int delay = (int)(((uint64_t)rand() * (uint64_t)period_ms) / ((uint64_t)RAND_MAX + 1));
		wait_for(p_never, NULL, delay);
		long ttl_ms = strtol(ttl, NULL, 10) * 1000;
		q = (struct w_after){.from = bench_nev, .t0 = mono(), .until = (uint64_t)ttl_ms * 1000000ull};
		CHECK_OK(harness_etcd_kill(h, victim));
		if (!wait_for(p_w_after, &q, 60000)) {
			note("raft leader kill %s: trial %d: no write within 60 s of the kill", prefix, t);
			host_dump_log(&H[0]);
			host_dump_log(&H[1]);
			break;
		}
		s_add(out, (double)q.longest / 1e6);
		if (harness_etcd_restart(h, victim) < 0) {
			note("raft leader kill %s: trial %d: member %d did not come back", prefix, t, victim);
			break;
		}
	}
out:
	stop_host(&H[0]);
	stop_host(&H[1]);
	harness_etcd_free(h);
}

/* put latency through the host's own etcd client (the floor) */
static void put_floor(int n, struct samples *out)
{
	for (int i = 0; i < n; i++) {
		uint64_t t0 = mono();
		tu_put(&T, "/bench-floor", "0123456789", 10);
		s_add(out, ms_between(t0, mono()));
	}
}

/* the same put after 20 ms with nothing happening: a handover starts from
 * an idle etcd, the floor above is taken back to back (etcd busy) */
static void put_after_idle(int n, struct samples *out)
{
	for (int i = 0; i < n; i++) {
		wait_for(p_never, NULL, 20);
		uint64_t t0 = mono();
		tu_put(&T, "/bench-floor", "0123456789", 10);
		s_add(out, ms_between(t0, mono()));
	}
}

/* ---- the same handover by a minimal client: the floor of 1b ----
 *
 * Raw HTTP/1.1 on three loopback connections to the same JSON gateway the
 * hosts use, no event loop, no plugin, no bus: the "old leader" revokes the
 * lease under its election key; a thread blocked on a watch of the election
 * prefix sends a txn the moment the DELETE arrives: two compares (its own
 * election key exists, the journal's mod revision) and one put, the shape of
 * leasehold's fenced write. Timed: the revoke being sent → that
 * txn's response read. What is left over leasehold's 1b is the host. */

struct raw_conn {
	int fd;
	char buf[16384];
	size_t len;
};

static bool raw_open(struct raw_conn *c, const char *url)
{
	int port = 0;
	const char *colon = strrchr(url, ':');
	if (!colon || (port = atoi(colon + 1)) <= 0 || port > 65535)
		return false;
	c->len = 0;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return false;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int one = 1;
	struct timeval tv = {.tv_sec = 5};
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (const struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(c->fd);
		c->fd = -1;
		return false;
	}
	return true;
}

static bool raw_send(struct raw_conn *c, const char *path, const char *body)
{
	char req[1024];
	int n = snprintf(req, sizeof(req),
	                 "POST %s HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n"
	                 "Content-Length: %zu\r\n\r\n%s",
	                 path, strlen(body), body);
	return n > 0 && (size_t)n < sizeof(req) && write(c->fd, req, (size_t)n) == n;
}

/* read one whole response (Content-Length or chunked); its body stays in
 * c->buf from *body_at. False on error, timeout or a non-200 status. */
static bool raw_read(struct raw_conn *c, size_t *body_at)
{
	c->len = 0;
	for (;;) {
		c->buf[c->len] = '\0';
		char *hend = strstr(c->buf, "\r\n\r\n");
		if (hend) {
			size_t hlen = (size_t)(hend - c->buf) + 4;
			const char *cl = strcasestr(c->buf, "\r\ncontent-length:");
			bool done = cl && cl < hend ? c->len >= hlen + strtoul(cl + 17, NULL, 10)
			                            : strstr(hend, "\r\n0\r\n\r\n") != NULL;
			if (done) {
				*body_at = hlen;
				return strncmp(c->buf, "HTTP/1.1 200", 12) == 0;
			}
		}
		if (c->len + 1 >= sizeof(c->buf))
			return false;
		ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
		if (r <= 0)
			return false;
		c->len += (size_t)r;
	}
}

static bool raw_call(struct raw_conn *c, const char *path, const char *body)
{
	size_t at;
	return raw_send(c, path, body) && raw_read(c, &at);
}

struct raw_watcher {
	struct raw_conn w, t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool armed, quit, failed, dead; /* dead: the thread has returned, sticky */
	uint64_t t_event, t_done;
};

static void raw_close(struct raw_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* the watch is only armed once etcd said "created": a revoke sent before
 * that could be missed */
static bool raw_watch_created(struct raw_conn *c)
{
	uint64_t deadline = mono() + 5 * 1000000000ull;
	c->len = 0;
	while (mono() < deadline) {
		if (c->len + 1 >= sizeof(c->buf))
			return false;
		ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return false;
		c->len += (size_t)r;
		c->buf[c->len] = '\0';
		if (strstr(c->buf, "\"created\":true"))
			return strncmp(c->buf, "HTTP/1.1 200", 12) == 0;
	}
	return false;
}

static void *raw_watch_thread(void *arg)
{
	struct raw_watcher *rw = arg;
	char buf[8192], carry[8] = "";
	for (;;) {
		ssize_t r = read(rw->w.fd, buf, sizeof(buf) - 1);
		pthread_mutex_lock(&rw->mu);
		bool quit = rw->quit, armed = rw->armed;
		pthread_mutex_unlock(&rw->mu);
		if (quit)
			return NULL;
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			pthread_mutex_lock(&rw->mu);
			rw->failed = true;
			rw->dead = true;
			pthread_cond_broadcast(&rw->cv);
			pthread_mutex_unlock(&rw->mu);
			return NULL;
		}
		buf[r] = '\0';
		/* "DELETE" split across two reads: look at the joint too */
		char joint[16];
		snprintf(joint, sizeof(joint), "%s%.7s", carry, buf);
		bool del = strstr(buf, "DELETE") || strstr(joint, "DELETE");
		size_t keep = r >= 7 ? 7 : (size_t)r;
		memcpy(carry, buf + r - (ssize_t)keep, keep);
		carry[keep] = '\0';
		if (!armed || !del)
			continue;
		uint64_t t_event = mono();
		bool ok = raw_call(&rw->t, "/v3/kv/txn",
		                   "{\"compare\":[{\"key\":\"L2JlbmNoLXJhdy9lbC8y\",\"target\":\"CREATE\","
		                   "\"result\":\"GREATER\",\"create_revision\":\"0\"},"
		                   "{\"key\":\"L2JlbmNoLXJhdy9qb3VybmFs\",\"target\":\"MOD\","
		                   "\"result\":\"LESS\",\"mod_revision\":\"1000000000000\"}],"
		                   "\"success\":[{\"request_put\":{\"key\":\"L2JlbmNoLXJhdy9qb3VybmFs\","
		                   "\"value\":\"eA==\"}}]}");
		uint64_t t = mono();
		ok = ok && strstr(rw->t.buf, "\"succeeded\":true") != NULL;
		pthread_mutex_lock(&rw->mu);
		rw->armed = false;
		rw->failed = !ok;
		rw->t_event = t_event;
		rw->t_done = t;
		pthread_cond_broadcast(&rw->cv);
		pthread_mutex_unlock(&rw->mu);
	}
}

static void raw_handover(int n, struct samples *out, struct samples *to_event)
{
	const char *url = harness_etcd_url(g_etcd, 0);
	static struct raw_watcher rw;
	static struct raw_conn a;
	memset(&rw, 0, sizeof(rw));
	a.fd = rw.t.fd = rw.w.fd = -1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&rw.mu, NULL);
	pthread_cond_init(&rw.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t th;
	bool started = false;
	if (!raw_open(&a, url) || !raw_open(&rw.t, url) || !raw_open(&rw.w, url)) {
		note("raw handover: cannot connect to %s", url);
		goto out;
	}
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000}; /* the watcher checks quit */
	setsockopt(rw.w.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	started = raw_call(&a, "/v3/kv/put", "{\"key\":\"L2JlbmNoLXJhdy9lbC8y\",\"value\":\"eA==\"}") &&
	          raw_send(&rw.w, "/v3/watch",
	                   "{\"create_request\":{\"key\":\"L2JlbmNoLXJhdy9lbC8=\","
	                   "\"range_end\":\"L2JlbmNoLXJhdy9lbDA=\"}}") &&
	          raw_watch_created(&rw.w) && pthread_create(&th, NULL, raw_watch_thread, &rw) == 0;
	if (!started) {
		note("raw handover: setup failed");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		size_t at;
		if (!raw_send(&a, "/v3/lease/grant", "{\"TTL\":\"60\"}") || !raw_read(&a, &at)) {
			note("raw handover: lease grant failed");
			break;
		}
		const char *id = strstr(a.buf + at, "\"ID\":\"");
		long long lease = id ? strtoll(id + 6, NULL, 10) : 0;
		char body[256];
		snprintf(body, sizeof(body),
		         "{\"key\":\"L2JlbmNoLXJhdy9lbC8x\",\"value\":\"eA==\",\"lease\":\"%lld\"}", lease);
		if (lease <= 0 || !raw_call(&a, "/v3/kv/put", body)) {
			note("raw handover: put under the lease failed");
			break;
		}
		wait_for(p_never, NULL, 20); /* a handover starts from an idle etcd */
		pthread_mutex_lock(&rw.mu);
		bool dead = rw.dead;
		rw.armed = !dead;
		rw.failed = dead;
		pthread_mutex_unlock(&rw.mu);
		if (dead) {
			note("raw handover: the watch stream ended");
			break;
		}
		snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", lease);
		uint64_t t0 = mono();
		if (!raw_call(&a, "/v3/lease/revoke", body)) {
			note("raw handover: revoke failed");
			break;
		}
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 5;
		pthread_mutex_lock(&rw.mu);
		int rc = 0;
		while (rw.armed && !rw.failed && rc == 0)
			rc = pthread_cond_timedwait(&rw.cv, &rw.mu, &dl);
		bool ok = !rw.armed && !rw.failed;
		uint64_t t1 = rw.t_done, te = rw.t_event;
		rw.armed = false;
		pthread_mutex_unlock(&rw.mu);
		if (!ok) {
			note("raw handover: trial %d: no txn after the revoke (%s)", i,
			     rc ? "timeout" : "failed");
			break;
		}
		s_add(out, ms_between(t0, t1));
		s_add(to_event, ms_between(t0, te));
	}
	pthread_mutex_lock(&rw.mu);
	rw.quit = true;
	pthread_mutex_unlock(&rw.mu);
	pthread_join(th, NULL);
out:
	raw_close(&a);
	raw_close(&rw.t);
	raw_close(&rw.w);
	pthread_cond_destroy(&rw.cv);
	pthread_mutex_destroy(&rw.mu);
}

/* ------------------------------------------------- figure 7: idle CPU */

struct idle {
	struct host h;
	int http_port; /* its dashboard */
	struct loop_timer *tm;
	int windows;
	uint64_t t_start, cpu_ticks0, cpu_ticks1, sched0, sched1, t_end;
	bool done;
};

static uint64_t proc_ticks(pid_t pid)
{
	char p[64], buf[2048];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *c = strrchr(buf, ')');
	if (!c)
		return 0;
	unsigned long long ut = 0, st = 0;
	/* fields after ") ": state(3) ... utime(14) stime(15) */
	if (sscanf(c + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* sum of per-thread schedstat run time (ns) */
static uint64_t proc_sched_ns(pid_t pid)
{
	char p[128];
	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	uint64_t sum = 0;
	FILE *ls;
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "cat %s/*/schedstat 2>/dev/null", p);
	ls = popen(cmd, "r");
	if (!ls)
		return 0;
	unsigned long long run, wait, slices;
	while (fscanf(ls, "%llu %llu %llu", &run, &wait, &slices) == 3)
		sum += run;
	pclose(ls);
	return sum;
}

static void on_idle_timer(struct loop_timer *t, void *ud)
{
	(void)t;
	struct idle *I = ud;
	I->cpu_ticks1 = proc_ticks(I->h.pid);
	I->sched1 = proc_sched_ns(I->h.pid);
	I->t_end = mono();
	I->done = true;
}

static void idle_window(struct idle *I, int secs);

static void idle_start(struct idle *I, int secs)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/b7", g_base);
	CHECK(mkdir(dir, 0755) == 0);
	host_setup(&I->h, dir, "idle");
	install(&I->h, "idle-a.so", "idle-a.so");
	install(&I->h, "idle-b.so", "idle-b.so");
	install(&I->h, "idle-c.so", "idle-c.so");
	size_t from = bench_nev;
	I->http_port = harness_free_port();
	start_host_http(&I->h, "/b7", "10", I->http_port);
	const char *names[] = {"idle-a", "idle-b", "idle-c"};
	for (int i = 0; i < 3; i++)
		if (wait_ev(from, 'W', "idle", names[i], NULL, 0, false, 30000) < 0) {
			note("idle: plugin %s never led", names[i]);
			host_dump_log(&I->h);
		}
	CHECK_OK(loop_timer_new(T.loop, on_idle_timer, I, &I->tm));
	idle_window(I, secs);
}

/* idle_window - a measurement window of secs on the idle host: done when
 * it ended, its CPU in the fields */
static void idle_window(struct idle *I, int secs)
{
	I->done = false;
	I->t_start = mono();
	I->cpu_ticks0 = proc_ticks(I->h.pid);
	I->sched0 = proc_sched_ns(I->h.pid);
	loop_timer_arm_in(I->tm, (uint64_t)secs * LOOP_NS_PER_S);
}

/* the window's CPU seconds: by ticks, and by schedstat into *sched */
static double idle_cpu(const struct idle *I, double *sched)
{
	*sched = (double)(I->sched1 - I->sched0) / 1e9;
	return (double)(I->cpu_ticks1 - I->cpu_ticks0) / (double)sysconf(_SC_CLK_TCK);
}

/* ------------------------- the dashboard open in a browser (figures 7, 4) */

static char g_chromium[256];

static bool p_page_loaded(void *arg)
{
	char *v = browser_eval(arg, "String(!!document.body && document.body.dataset.loaded === 'true')");
	bool ok = v && strcmp(v, "true") == 0;
	free(v);
	return ok;
}

/* dashboard_open - a headless Chromium showing the dashboard served on
 * port (profile under dir), once the page rendered its first answer (it
 * long-polls /api/v1/events from then on); NULL without Chromium or when
 * the page did not load (noted) */
static struct browser *dashboard_open(int port, const char *dir)
{
	if (!g_chromium[0])
		return NULL;
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	struct browser *b = browser_open(g_chromium, dir, url);
	if (!wait_for(p_page_loaded, b, 20000)) {
		note("dashboard: %s did not load within 20 s", url);
		browser_close(b);
		return NULL;
	}
	/* a measurement parameter, not a wait for an event: Chromium's own
	 * start-up goes on for a while after the first render; the figures
	 * time an open page, not a browser starting */
	uint64_t settle = mono() + 3 * LOOP_NS_PER_S;
	while (mono() < settle)
		loop_run_once(T.loop, (int)((settle - mono()) / 1000000ull) + 1);
	return b;
}

static bool p_flag(void *arg)
{
	return *(bool *)arg;
}

/* -------------------------------------------- figure 3: rolling upgrade */

struct inst_state {
	char node[32];
	char rel[16];
};

/* the dashboards of figure 3's hosts n1, n2, n3 (figure 4 opens its leader's) */
static int g_b3_http[3];

static void rollout(int trials, struct samples *dead[3], struct samples *statusw,
                    struct samples *elections)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/b3", g_base);
	CHECK(mkdir(dir, 0755) == 0);
	static struct host H[3];
	const char *nodes[] = {"n1", "n2", "n3"};
	struct kwatch kst, kel;
	kw_start(&kst, "/b3/bench/status");
	kw_start(&kel, "/b3/bench/election/");
	size_t from = bench_nev;
	CHECK_OK(harness_free_ports(g_b3_http, 3));
	for (int i = 0; i < 3; i++) {
		host_setup(&H[i], dir, nodes[i]);
		install(&H[i], "bench-1.0.0.so", "bench.so");
		start_host_http(&H[i], "/b3", "10", g_b3_http[i]);
	}
	/* formed: a first write, three candidates, and the first leader's status
	 * record (written after its first reconcile: counting must not start
	 * before it, or trial 1 counts it) */
	if (wait_ev(from, 'W', NULL, "bench", NULL, 0, false, 30000) < 0 || !kw_wait(&kel, 3, 30000) ||
	    !kw_wait(&kst, 1, 30000)) {
		note("rollout: cluster did not form");
		return;
	}
	struct host *hs[3] = {&H[0], &H[1], &H[2]};
	/* who leads at the start of a step */
	struct inst_state lead = {"", ""};
	{
		int64_t tok;
		struct host *L = leader_of(hs, 3, "bench", &tok);
		if (L) {
			snprintf(lead.node, sizeof(lead.node), "%s", L->node);
			snprintf(lead.rel, sizeof(lead.rel), "1.0.0");
		}
	}
	for (int k = 1; k <= trials; k++) {
		char rel[16], file[64], old[16];
		snprintf(rel, sizeof(rel), "1.%d.0", k);
		snprintf(old, sizeof(old), "1.%d.0", k - 1);
		snprintf(file, sizeof(file), "bench-%s.so", rel);
		uint64_t st0 = kst.puts;
		int n_elect = 0;
		for (int s = 0; s < 3; s++) {
			size_t sfrom = bench_nev;
			install(&H[s], file, "bench.so");
			/* the step is over when host s runs the new release, its old
			 * instance is gone, a new-release instance leads and wrote */
			bool ok = wait_ev(sfrom, 'I', H[s].node, "bench", rel, 0, false, 20000) >= 0 &&
			          wait_ev(sfrom, 'F', H[s].node, "bench", old, 0, false, 20000) >= 0;
			long ke = -1;
			if (ok && s == 0) {
				ke = wait_ev(sfrom, 'E', NULL, "bench", rel, 0, false, 20000);
				ok = ke >= 0 &&
				     wait_ev(sfrom, 'W', bench_ev[ke].node, "bench", rel, 0, false, 20000) >= 0;
			} else if (ok && strcmp(lead.node, H[s].node) == 0) {
				ke = wait_ev(sfrom, 'E', H[s].node, "bench", rel, 0, false, 20000);
				ok = ke >= 0;
			}
			/* observation window: a flip-flop would show here */
			uint64_t wend = mono() + 300000000ull;
			while (mono() < wend)
				loop_run_once(T.loop, (int)((wend - mono()) / 1000000ull) + 1);
			if (!ok) {
				note("rollout: trial %d step %d did not settle", k, s + 1);
				for (int i = 0; i < 3; i++)
					host_dump_log(&H[i]);
				return;
			}
			/* dead time: timeline of the step's events in clock order */
			size_t m = bench_nev - sfrom;
			struct bench_ev *es = malloc((m ? m : 1) * sizeof(*es));
			CHECK(es);
			memcpy(es, bench_ev + sfrom, m * sizeof(*es));
			for (size_t i = 1; i < m; i++) /* insertion sort by t (few events) */
				for (size_t j = i; j > 0 && es[j - 1].t > es[j].t; j--) {
					struct bench_ev x = es[j];
					es[j] = es[j - 1];
					es[j - 1] = x;
				}
			struct inst_state cur = lead;
			bool leading = cur.node[0] != 0;
			bool newest_exists = false;
			uint64_t gap_start = 0;
			double dead_ms = 0;
			for (size_t i = 0; i < m; i++) {
				const struct bench_ev *e = &es[i];
				if (strcmp(e->name, "bench"))
					continue;
				if (e->type == 'I' && strcmp(e->rel, rel) == 0 && !newest_exists) {
					newest_exists = true;
					if (!leading)
						gap_start = e->t;
				} else if (e->type == 'E') {
					if (!leading && newest_exists && gap_start)
						dead_ms += ms_between(gap_start, e->t);
					leading = true;
					gap_start = 0;
					n_elect++;
					snprintf(cur.node, sizeof(cur.node), "%s", e->node);
					snprintf(cur.rel, sizeof(cur.rel), "%s", e->rel);
				} else if ((e->type == 'D' || e->type == 'F') && leading &&
				           strcmp(e->node, cur.node) == 0 && strcmp(e->rel, cur.rel) == 0) {
					leading = false;
					cur.node[0] = 0;
					if (newest_exists)
						gap_start = e->t;
				}
			}
			for (size_t i = 0; i < m; i++)
				if (strchr("EDF", es[i].type) && strcmp(es[i].name, "bench") == 0)
					note("  trial %d step %d: %+.3f ms %c %s %s token %" PRId64, k, s + 1,
					     ms_between(es[0].t, es[i].t), es[i].type, es[i].node, es[i].rel,
					     es[i].a);
			free(es);
			lead = cur;
			s_add(dead[s], dead_ms);
		}
		if (kst.puts - st0 > 2) {
			note("rollout: trial %d wrote the status %" PRIu64 " times; host logs follow", k,
			     kst.puts - st0);
			for (int i = 0; i < 3; i++)
				host_dump_log(&H[i]);
		}
		s_add(statusw, (double)(kst.puts - st0));
		s_add(elections, n_elect);
	}
	kw_stop(&kst);
	kw_stop(&kel);
	/* keep the cluster for figure 4 */
}

/* --------------------------------------------- figure 4: event latency */

/* figure 4's leader among n1..n3 (0-based), -1 when none led */
static int b3_leader(void)
{
	for (long i = (long)bench_nev - 1; i >= 0; i--)
		if (bench_ev[i].type == 'E' && strcmp(bench_ev[i].name, "bench") == 0)
			return bench_ev[i].node[0] == 'n' ? bench_ev[i].node[1] - '1' : -1;
	return -1;
}

static void event_latency(int n, struct samples *from_send, struct samples *from_ack)
{
	int64_t tok;
	/* the leader is whoever wrote last on /b3 */
	long kl = -1;
	for (long i = (long)bench_nev - 1; i >= 0; i--)
		if (bench_ev[i].type == 'E' && strcmp(bench_ev[i].name, "bench") == 0) {
			kl = i;
			break;
		}
	if (kl < 0)
		return;
	tok = bench_ev[kl].a;
	(void)tok;
	char node[32];
	snprintf(node, sizeof(node), "%s", bench_ev[kl].node);
	for (int i = 0; i < n; i++) {
		size_t from = bench_nev;
		uint64_t t0 = mono();
		int64_t rev = tu_put_member(&T, "/b3", "bench", "zz-fake", REL(1, 0, 0));
		uint64_t t1 = mono();
		long k = wait_ev(from, 'R', node, "bench", NULL, rev, true, 5000);
		if (k < 0) {
			note("event latency: no on_releases_changed for revision %" PRId64, rev);
			continue;
		}
		s_add(from_send, ms_between(t0, bench_ev[k].t));
		s_add(from_ack, ms_between(t1, bench_ev[k].t));
	}
}

/* ----------------------------------------------------- figure 5: bus */

struct bare {
	nng_socket s;
	int n;
};

static void *bare_echo(void *arg)
{
	struct bare *b = arg;
	for (int i = 0; i < b->n; i++) {
		nng_msg *m;
		if (nng_recvmsg(b->s, &m, 0) != 0)
			break;
		if (nng_sendmsg(b->s, m, 0) != 0) {
			nng_msg_free(m);
			break;
		}
	}
	return NULL;
}

struct bare_rig {
	struct bare b;
	nng_socket c;
	pthread_t th;
	pid_t pid; /* ipc: the echo is this child (`lh-bench --echo URL N`) */
};

/* the echo of the ipc reference, in a process of its own (as the worker) */
static int echo_main(const char *url, int n)
{
	struct bare b = {.n = n};
	if (nng_pair1_open(&b.s) != 0 || nng_dial(b.s, url, NULL, 0) != 0) {
		fprintf(stderr, "lh-bench --echo: cannot dial %s\n", url);
		return 1;
	}
	/* the driver gone (it closes, or dies): do not wait for it forever */
	nng_socket_set_ms(b.s, NNG_OPT_RECVTIMEO, 10000);
	nng_socket_set_ms(b.s, NNG_OPT_SENDTIMEO, 10000);
	bare_echo(&b);
	nng_close(b.s);
	return 0;
}

/* inproc: the echo is a thread of the driver; ipc: a child process dialing
 * an ipc:// socket in the run's directory */
static void bare_open(struct bare_rig *r, int n, bool ipc)
{
	r->b.n = n;
	r->pid = 0;
	CHECK(nng_pair1_open(&r->c) == 0);
	if (!ipc) {
		CHECK(nng_pair1_open(&r->b.s) == 0);
		CHECK(nng_listen(r->b.s, "inproc://lh-bench-bare", NULL, 0) == 0);
		CHECK(nng_dial(r->c, "inproc://lh-bench-bare", NULL, 0) == 0);
		CHECK(pthread_create(&r->th, NULL, bare_echo, &r->b) == 0);
		return;
	}
	char url[700], self[1024], ns[32];
	snprintf(url, sizeof(url), "ipc://%s/bare.sock", g_base);
	CHECK(nng_listen(r->c, url, NULL, 0) == 0);
	/* a child that cannot dial or dies: bare_run's CHECKs fail, no hang */
	nng_socket_set_ms(r->c, NNG_OPT_RECVTIMEO, 10000);
	nng_socket_set_ms(r->c, NNG_OPT_SENDTIMEO, 10000);
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(sl > 0);
	self[sl] = 0;
	snprintf(ns, sizeof(ns), "%d", n);
	char *argv[] = {self, (char *)"--echo", url, ns, NULL};
	extern char **environ;
	CHECK(posix_spawn(&r->pid, self, NULL, NULL, argv, environ) == 0);
}

static void bare_run(struct bare_rig *r, int n, struct samples *out)
{
	char payload[100];
	memset(payload, 'x', sizeof(payload));
	for (int i = 0; i < n; i++) {
		uint64_t t0 = mono();
		CHECK(nng_send(r->c, payload, sizeof(payload), 0) == 0);
		char *buf;
		size_t len;
		CHECK(nng_recv(r->c, &buf, &len, NNG_FLAG_ALLOC) == 0);
		nng_free(buf, len);
		s_add(out, ms_between(t0, mono()) * 1000.0);
	}
}

static void bare_close(struct bare_rig *r)
{
	nng_close(r->c); /* the echo thread's recv fails if it still waits */
	if (r->pid > 0) {
		/* a child's dialer would only reconnect: it may still wait for
		 * echoes that never come (a round ended early) */
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
		return;
	}
	nng_close(r->b.s);
	pthread_join(r->th, NULL);
}

static void on_bus_init(void *ud, int err, const char *msg)
{
	(void)msg;
	*(int *)ud = err == 0 ? 1 : -1;
}

static void on_bus_done(void *ud, int err, const char *msg)
{
	(void)err;
	(void)msg;
	*(bool *)ud = true;
}

static bool p_int_set(void *arg)
{
	return *(int *)arg != 0;
}

/* n host round trips and n bare ones, interleaved in blocks of `block` so that
 * both see the same machine (thread placement and load drift between runs).
 * process: the plugin in a leasehold-worker child over ipc://, the bare
 * reference between two processes over ipc:// too. */
static void bus_host(int n, int block, bool process, struct samples *out, struct samples *bare)
{
	char dir[600], priv[600], worker[1024];
	snprintf(dir, sizeof(dir), "%s/b5%s", g_base, process ? "p" : "");
	snprintf(priv, sizeof(priv), "%s/b5%spriv", g_base, process ? "p" : "");
	const char *bd = getenv("LH_BUILDDIR");
	snprintf(worker, sizeof(worker), "%s/leasehold-worker", bd && *bd ? bd : ".");
	CHECK(mkdir(dir, 0755) == 0);
	char err[LOADER_ERR_MAX];
	CHECK_OK(loader_private_dir_prepare(priv, err, sizeof(err)));
	struct host fake;
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.plugin_dir, sizeof(fake.plugin_dir), "%s", dir);
	install(&fake, "bench-1.0.0.so", "bench.so");
	struct loader_plugin *lp;
	if (loader_open(dir, "bench.so", priv, &lp, err, sizeof(err)) < 0) {
		note("bus: load failed: %s", err);
		return;
	}
	struct fakehost *fh;
	CHECK_OK(fakehost_new(T.loop, "/b5/bench/data/", &fh));
	int init = 0;
	struct plugin_instance_config cfg = {
	    .on_init = on_bus_init,
	    .userdata = &init,
	    .isolation = process ? PLUGIN_ISOLATION_PROCESS : PLUGIN_ISOLATION_THREAD,
	    .worker_path = process ? worker : NULL,
	};
	struct plugin_instance *pi;
	CHECK(setenv("LH_BENCH_NOWRITE", "1", 1) == 0);
	if (plugin_instance_new(lp, T.loop, fakehost_driver_host(fh), "bus", &cfg, &pi) < 0 ||
	    !wait_for(p_int_set, &init, 10000) || init != 1) {
		note("bus (%s): the plugin instance did not start", process ? "process" : "thread");
		exit(1);
	}
	unsetenv("LH_BENCH_NOWRITE");
	fakehost_set_leading(fh, true);
	struct releases r = {{1, 0, 0}, {1, 0, 0}, 1, 1};
	plugin_instance_elected(pi, 1, &r);
	struct bare_rig rig;
	bare_open(&rig, n, process);
	for (int i = 0; i < n + 50; i++) {
		if (i >= 50 && (i - 50) % block == 0)
			bare_run(&rig, block < n - (i - 50) ? block : n - (i - 50), bare);
		bool done = false;
		uint64_t t0 = mono();
		plugin_instance_reconcile(pi, on_bus_done, &done);
		if (!wait_for(p_flag, &done, 10000))
			break;
		if (i >= 50) /* warm-up */
			s_add(out, ms_between(t0, mono()) * 1000.0);
	}
	bare_close(&rig);
	plugin_instance_deposed(pi);
	plugin_instance_free(pi);
	fakehost_free(fh);
}

/* ------------------------------------------------- figure 6: scale */

struct txn_wait {
	int pending;
	int err;
};

static void on_txn(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)r;
	struct txn_wait *w = ud;
	w->pending--;
	if (err < 0)
		w->err = err;
}

static bool p_pending_zero(void *arg)
{
	return ((struct txn_wait *)arg)->pending == 0;
}

static void populate(const char *prefix, int n)
{
	enum { BATCH = 100 };
	static uint8_t vals[BATCH][128];
	static char keys[BATCH][128];
	struct txn_wait w = {0, 0};
	for (int i = 0; i < n; i += BATCH) {
		struct etcd_op ops[BATCH];
		int m = 0;
		for (int j = i; j < n && j < i + BATCH; j++, m++) {
			char node[32];
			snprintf(node, sizeof(node), "fake-%05d", j);
			Leasehold__Release pr = LEASEHOLD__RELEASE__INIT;
			pr.major = 1;
			Leasehold__Member mb = LEASEHOLD__MEMBER__INIT;
			mb.node_id = node;
			mb.release = &pr;
			size_t vl = leasehold__member__pack(&mb, vals[m]);
			int kl = snprintf(keys[m], sizeof(keys[m]), "%s/bench/members/%s", prefix, node);
			ops[m] = (struct etcd_op){.type = ETCD_OP_PUT, .key = keys[m],
			                          .key_len = (size_t)kl, .value = vals[m], .value_len = vl};
		}
		w.pending++;
		CHECK_OK(etcd_txn(T.etcd, NULL, 0, ops, (size_t)m, NULL, 0, NULL, on_txn, &w, NULL));
		CHECK(wait_for(p_pending_zero, &w, 30000));
		CHECK_OK(w.err);
	}
}

static long proc_status_kb(pid_t pid, const char *field)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return -1;
	long v = -1;
	size_t fl = strlen(field);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':')
			v = strtol(line + fl + 1, NULL, 10);
	fclose(f);
	return v;
}

static int run_wait(const char *const *argv)
{
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		int dn = open("/dev/null", O_WRONLY);
		if (dn >= 0) {
			dup2(dn, 1);
			dup2(dn, 2);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* total Ir of the newest callgrind dump in dir (file prefix cg.) */
static double callgrind_total(const char *pattern)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
	         "f=$(ls -t %s* 2>/dev/null | head -1); [ -n \"$f\" ] && "
	         "sed -n 's/^summary: *\\([0-9]*\\).*/\\1/p; s/^totals: *\\([0-9]*\\).*/\\1/p' \"$f\" | "
	         "head -1",
	         pattern);
	FILE *p = popen(cmd, "r");
	if (!p)
		return NAN;
	double v = NAN;
	if (fscanf(p, "%lf", &v) != 1)
		v = NAN;
	pclose(p);
	return v;
}

struct scale_res {
	struct samples sync_ms, rss_mb;
	double hwm_mb, ir_per_event; /* the highest VmHWM; callgrind: one run */
};

/* n_runs native starts of a host on n_members records (sync time, RSS), then
 * one under callgrind (instructions per member event: deterministic) */
static void scale(int n_members, int n_runs, int n_events, struct scale_res *res)
{
	char prefix[32], dir[600], node[32];
	snprintf(prefix, sizeof(prefix), "/b6n%d", n_members);
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	memset(res, 0, sizeof(*res));
	res->hwm_mb = 0;
	res->ir_per_event = NAN;
	populate(prefix, n_members);
	/* native runs: sync time and RSS */
	static struct host hs[4];
	static int used;
	struct host *h = &hs[used++];
	snprintf(node, sizeof(node), "s%d", n_members);
	host_setup(h, dir, node);
	install(h, "bench-1.0.0.so", "bench.so");
	size_t from;
	struct evq q;
	for (int run = 0; run < n_runs; run++) {
		from = bench_nev;
		uint64_t t0 = mono();
		start_host(h, prefix, "10");
		q = (struct evq){from, 'R', node, "bench", NULL, 0, false, n_members + 1, -1};
		if (!wait_for(p_ev, &q, 60000)) {
			note("scale %d: no sync", n_members);
			host_dump_log(h);
			stop_host(h);
			return;
		}
		s_add(&res->sync_ms, ms_between(t0, bench_ev[q.found].t));
		s_add(&res->rss_mb, (double)proc_status_kb(h->pid, "VmRSS") / 1024.0);
		double hwm = (double)proc_status_kb(h->pid, "VmHWM") / 1024.0;
		if (hwm > res->hwm_mb)
			res->hwm_mb = hwm;
		stop_host(h);
	}

	/* callgrind run: instructions per member event */
	char cgout[700], logp[700], rt[700], ctl[700], pattern[700];
	snprintf(cgout, sizeof(cgout), "--callgrind-out-file=%s/cg.%%p", dir);
	snprintf(pattern, sizeof(pattern), "%s/cg.", dir);
	snprintf(logp, sizeof(logp), "%s/cg.log", dir);
	snprintf(rt, sizeof(rt), "%s/cgrun", dir);
	snprintf(ctl, sizeof(ctl), "ipc://%s/cg.sock", dir);
	const char *argv[] = {"valgrind", "--tool=callgrind", cgout, "-q",
	                      built_binary("leasehold"), "--etcd", harness_etcd_urls(g_etcd),
	                      "--node-id", node, "--plugin-dir", h->plugin_dir, "--runtime-dir", rt,
	                      "--control", ctl, "--http", "none", "--prefix", prefix, "--ttl", "10",
	                      "--reconcile-wait", "0", "--reconcile-interval", "1h",
	                      /* valgrind has no pidfd_open: a worker process could
	                       * not be watched (and its work is not the host's) */
	                      "--isolation", "thread", NULL};
	from = bench_nev;
	pid_t vp = fork();
	CHECK(vp >= 0);
	if (vp == 0) {
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	q = (struct evq){from, 'R', node, "bench", NULL, 0, false, n_members + 1, -1};
	if (!wait_for(p_ev, &q, 240000)) {
		note("scale %d: no sync under callgrind (log %s)", n_members, logp);
		reap(vp, SIGKILL);
		return;
	}
	char pids[16];
	snprintf(pids, sizeof(pids), "%d", (int)vp);
	const char *z[] = {"callgrind_control", "-z", pids, NULL};
	if (run_wait(z) != 0) {
		note("scale %d: callgrind_control -z failed", n_members);
		reap(vp, SIGKILL);
		return;
	}
	int got = 0;
	for (int i = 0; i < n_events; i++) {
		char fake[32];
		snprintf(fake, sizeof(fake), "fake-%05d", i % n_members);
		size_t f2 = bench_nev;
		int64_t rev = tu_put_member(&T, prefix, "bench", fake, REL(1, 0, 0));
		if (wait_ev(f2, 'R', node, "bench", NULL, rev, true, 30000) >= 0)
			got++;
	}
	const char *d[] = {"callgrind_control", "-d", pids, NULL};
	int drc = run_wait(d);
	reap(vp, SIGKILL);
	if (drc != 0 || got == 0) {
		note("scale %d: callgrind dump failed (%d) or no events (%d)", n_members, drc, got);
		return;
	}
	res->ir_per_event = callgrind_total(pattern) / got;
	note("scale %d: %d events under callgrind, dumps %s*", n_members, got, pattern);
}

/* ---------------------------------------------------------------- main */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* at exit, after the hosts and etcd are gone (registered before them):
 * the run's directory goes, unless LH_BENCH_KEEP=1 asks to keep it (host
 * logs, callgrind dumps) */
static void rm_base(void)
{
	const char *keep = getenv("LH_BENCH_KEEP");
	if (keep && strcmp(keep, "1") == 0) {
		fprintf(stderr, "lh-bench: kept %s\n", g_base);
		return;
	}
	nftw(g_base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fmt_ref(char *buf, size_t len, struct samples *s, const char *unit, const char *what)
{
	if (s->n)
		snprintf(buf, len, "%s: med %.3g (%.3g–%.3g) %s, n=%zu", what, s_med(s), s_min(s),
		         s_max(s), unit, s->n);
	else
		snprintf(buf, len, "%s: no data", what);
}

/* figure 9: a switchover to a chosen node beside the graceful (SIGTERM)
 * handover of figure 1, measured again in the same stretch of the run;
 * goal: within 1.5 times */
static void figure9(int n)
{
	struct samples sel = {0}, swr = {0}, tel = {0}, twr = {0};
	switchover_fig("/b9s", n, &sel, &swr);
	failover("/b9t", "10", SIGTERM, n, &tel, &twr, NULL, NULL, NULL);
	char ref[256], goal[128];
	double re = s_med(&tel), rw = s_med(&twr);
	fmt_ref(ref, sizeof(ref), &tel, "ms", "SIGTERM of the leader → on_elected (as 1a, this run)");
	snprintf(goal, sizeof(goal), "≤ 1.5 × (%.3g ms); ratio %.2f", 1.5 * re,
	         sel.n && re > 0 ? s_med(&sel) / re : 0.0);
	row("9", "switchover --to the other host: the request's txn acknowledged → the target's plugin enters on_elected",
	    &sel, "ms", ref, goal, sel.n && s_med(&sel) <= 1.5 * re ? "yes" : "**no**");
	fmt_ref(ref, sizeof(ref), &twr, "ms", "SIGTERM → first fenced txn acknowledged (as 1b, this run)");
	snprintf(goal, sizeof(goal), "≤ 1.5 × (%.3g ms); ratio %.2f", 1.5 * rw,
	         swr.n && rw > 0 ? s_med(&swr) / rw : 0.0);
	row("9", "switchover --to: the request's txn acknowledged → the target's first fenced txn acknowledged",
	    &swr, "ms", ref, goal, swr.n && s_med(&swr) <= 1.5 * rw ? "yes" : "**no**");
	free(sel.v);
	free(swr.v);
	free(tel.v);
	free(twr.v);
}

/* ---------------------------------------- figure 14: unpin → handover */

static uint64_t g_pin_ack; /* mono() when the pin request's txn was acknowledged */
static int g_pin_err = 1;  /* 1 = no answer yet */

static void on_pin_done(void *ud, int err, const char *msg, const char *warning, int64_t rev)
{
	(void)ud;
	(void)warning;
	(void)rev;
	g_pin_ack = mono();
	g_pin_err = err;
	if (err < 0 && err != -EBUSY)
		note("pin refused: %s", msg ? msg : "?");
}

static bool p_pin_done(void *arg)
{
	(void)arg;
	return g_pin_err != 1;
}

/* the pin request as `leaseholdctl release pin|unpin` has it written
 * (pin_request_start on the bench's etcd client); true when it was */
static bool pin_write(const char *prefix, const char *rel)
{
	struct pin_request rq = {.prefix = prefix, .name = "bench", .requester = "lh-bench",
	                         .unpin = rel == NULL};
	if (rel)
		CHECK_OK(release_parse(rel, &rq.release));
	/* a member or status record that moved between the check and the
	 * write refuses the request (-EBUSY): at start-up the hosts' own
	 * records do; ask again */
	for (int tries = 0; tries < 100; tries++) {
		g_pin_err = 1;
		CHECK_OK(pin_request_start(T.etcd, &rq, on_pin_done, NULL));
		if (!wait_for(p_pin_done, NULL, 10000))
			return false;
		if (g_pin_err != -EBUSY)
			break;
	}
	return g_pin_err == 0;
}

/* a line of h's log from offset from on holds the needle */
struct log_wait {
	const struct host *h;
	long from;
	const char *needle;
};

static bool p_logged(void *arg)
{
	const struct log_wait *w = arg;
	return host_log_count(w->h, w->from, w->needle) > 0;
}

/* two hosts on prefix, both running the leader's release 1.(k-1).0: trial k
 * pins it, gives the other host the compatible 1.k.0 file (it waits: the pin
 * holds files of newer releases back on a node that runs one at or below
 * it) and waits until that host loaded it beside what runs (its standby),
 * then unpins, as an operator stages a release: from the unpin's txn
 * acknowledged to the 1.k.0 host's on_elected and its first fenced write
 * acknowledged (the swap to the standby and one handover). Then the old
 * leader's host loads 1.k.0 too. */
static void pin_fig(const char *prefix, int n, struct samples *elected, struct samples *write)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	static struct host A, B;
	host_setup(&A, dir, "a");
	host_setup(&B, dir, "b");
	install(&A, "bench-1.0.0.so", "bench.so");
	install(&B, "bench-1.0.0.so", "bench.so");
	size_t from = bench_nev;
	start_host(&A, prefix, "10");
	if (wait_ev(from, 'W', "a", "bench", NULL, 0, false, 30000) < 0) {
		note("pin %s: host a never wrote", prefix);
		return;
	}
	from = bench_nev;
	start_host(&B, prefix, "10");
	if (wait_ev(from, 'I', "b", "bench", "1.0.0", 0, false, 30000) < 0) {
		note("pin %s: host b never ran 1.0.0", prefix);
		return;
	}
	struct host *L = &A, *O = &B;
	for (int k = 1; k <= n && k <= 20; k++) {
		char old[16], rel[16], file[64];
		snprintf(old, sizeof(old), "1.%d.0", k - 1);
		snprintf(rel, sizeof(rel), "1.%d.0", k);
		snprintf(file, sizeof(file), "bench-%s.so", rel);
		if (!pin_write(prefix, old)) {
			note("pin %s: trial %d: the pin failed", prefix, k);
			break;
		}
		struct log_wait lw = {O, host_log_size(O), "waits: the pin at"};
		install(O, file, "bench.so");
		if (!wait_for(p_logged, &lw, 20000)) {
			note("pin %s: trial %d: %s's %s file did not wait for the pin", prefix, k,
			     O->node, rel);
			break;
		}
		/* the operator's order: the file is loaded and initialised
		 * beside what runs (the standby) before the unpin */
		struct log_wait ls = {O, lw.from, "is loaded and initialised beside what runs"};
		if (!wait_for(p_logged, &ls, 20000)) {
			note("pin %s: trial %d: %s's %s file was not loaded beside what runs", prefix,
			     k, O->node, rel);
			break;
		}
		wait_for(p_never, NULL, 20); /* from a quiet etcd, like figure 1 */
		from = bench_nev;
		if (!pin_write(prefix, NULL)) {
			note("pin %s: trial %d: the unpin failed", prefix, k);
			break;
		}
		long ke = wait_ev(from, 'E', O->node, "bench", rel, 0, false, 60000);
		if (ke < 0) {
			note("pin %s: trial %d: no on_elected on %s", prefix, k, O->node);
			host_dump_log(O);
			break;
		}
		long kw2 = wait_ev(from, 'W', O->node, "bench", rel, bench_ev[ke].a, true, 60000);
		s_add(elected, ms_between(g_pin_ack, bench_ev[ke].t));
		if (kw2 >= 0)
			s_add(write, ms_between(g_pin_ack, bench_ev[kw2].t));
		/* the old leader's host loads the same release: both run 1.k.0 */
		from = bench_nev;
		install(L, file, "bench.so");
		if (wait_ev(from, 'I', L->node, "bench", rel, 0, false, 20000) < 0) {
			note("pin %s: trial %d: %s never ran %s", prefix, k, L->node, rel);
			break;
		}
		struct host *t = L;
		L = O;
		O = t;
	}
	stop_host(&A);
	stop_host(&B);
}

/* figure 14: `release unpin` → the newer release's first fenced write,
 * beside the graceful (SIGTERM) handover of figure 1 in the same stretch
 * of the run; goal: within 1.5 times 1b */
static void figure14(int n)
{
	struct samples pel = {0}, pwr = {0}, tel = {0}, twr = {0};
	pin_fig("/b14p", n, &pel, &pwr);
	failover("/b14t", "10", SIGTERM, n, &tel, &twr, NULL, NULL, NULL);
	char ref[256], goal[128];
	double rw = s_med(&twr);
	fmt_ref(ref, sizeof(ref), &tel, "ms", "SIGTERM of the leader → on_elected (as 1a, this run)");
	row("14", "release unpin: the unpin's txn acknowledged → the newer release's plugin enters on_elected",
	    &pel, "ms", ref, "-", "-");
	fmt_ref(ref, sizeof(ref), &twr, "ms", "SIGTERM → first fenced txn acknowledged (as 1b, this run)");
	snprintf(goal, sizeof(goal), "≤ 1.5 × (%.3g ms); ratio %.2f", 1.5 * rw,
	         pwr.n && rw > 0 ? s_med(&pwr) / rw : 0.0);
	row("14", "release unpin: the unpin's txn acknowledged → the newer release's first fenced txn acknowledged",
	    &pwr, "ms", ref, goal, pwr.n && s_med(&pwr) <= 1.5 * rw ? "yes" : "**no**");
	free(pel.v);
	free(pwr.v);
	free(tel.v);
	free(twr.v);
}

/* --------------------------- figure 15: a broken release backs off */

/* three hosts on bench 1.0.0 (fresh per trial: the hold-down is per
 * node); c reloads a compatible 1.21.0 whose every reconcile fails: it
 * leads, fails --unhealthy-after (3) reconciles in a row and withdraws.
 * Timed: c's first failed reconcile entered → the first fenced write of a
 * 1.0.0 leader acknowledged. */
static void broken_release(int n, struct samples *out)
{
	static struct host hs[3];
	for (int t = 0; t < n; t++) {
		char dir[600], pfx[32];
		snprintf(pfx, sizeof(pfx), "/b15-%d", t);
		snprintf(dir, sizeof(dir), "%s%s", g_base, pfx);
		CHECK(mkdir(dir, 0755) == 0);
		for (int i = 0; i < 3; i++) {
			host_setup(&hs[i], dir, i == 0 ? "a" : i == 1 ? "b" : "c");
			install(&hs[i], "bench-1.0.0.so", "bench.so");
		}
		size_t from = bench_nev;
		start_host(&hs[0], pfx, "10");
		if (wait_ev(from, 'W', "a", "bench", NULL, 0, false, 30000) < 0) {
			note("figure 15: trial %d: a never wrote", t);
			host_dump_log(&hs[0]);
			break;
		}
		start_host(&hs[1], pfx, "10");
		start_host(&hs[2], pfx, "10");
		if (wait_ev(from, 'I', "b", "bench", NULL, 0, false, 30000) < 0 ||
		    wait_ev(from, 'I', "c", "bench", NULL, 0, false, 30000) < 0) {
			note("figure 15: trial %d: b or c did not start", t);
			break;
		}
		from = bench_nev;
		install(&hs[2], "bench-broken-1.21.0.so", "bench.so");
		long kx = wait_ev(from, 'X', "c", "bench", "1.21.0", 0, false, 30000);
		long kw = kx < 0 ? -1 : wait_ev((size_t)kx, 'W', NULL, "bench", "1.0.0", 0, false, 30000);
		if (kx < 0 || kw < 0) {
			note("figure 15: trial %d: %s", t, kx < 0 ? "c never failed" : "no 1.0.0 write after it");
			host_dump_log(&hs[2]);
			break;
		}
		s_add(out, ms_between(bench_ev[kx].t, bench_ev[kw].t));
		for (int i = 0; i < 3; i++)
			stop_host(&hs[i]);
	}
	for (int i = 0; i < 3; i++)
		stop_host(&hs[i]);
}

/* figure 15 beside its reference: K × the first retry interval (100 ms)
 * plus figure 1b (a graceful handover to the first fenced write) of this
 * run */
static void figure15(int n)
{
	struct samples br = {0}, tel = {0}, twr = {0};
	broken_release(n, &br);
	failover("/b15t", "10", SIGTERM, n, &tel, &twr, NULL, NULL, NULL);
	double refv = 3 * 100.0 + s_med(&twr);
	char ref[256], goal[128];
	snprintf(ref, sizeof(ref), "3 × 100 ms + 1b (%.3g ms, this run) = %.4g ms", s_med(&twr), refv);
	snprintf(goal, sizeof(goal), "≤ reference; ratio %.2f", br.n && refv > 0 ? s_med(&br) / refv : 0.0);
	row("15", "broken release (a compatible newer release whose every reconcile fails, --unhealthy-after 3): its first failure → the older release's first fenced write acknowledged",
	    &br, "ms", ref, goal, br.n && s_med(&br) <= refv ? "yes" : "**no**");
	free(br.v);
	free(tel.v);
	free(twr.v);
}

/* ------------------------------------ figures 10-12: watches (ABI 1.2) */

/* a bare JSON-gateway watch client on its own thread: timestamps every read
 * that carries events (the reference of figure 10) */
struct bare_watch {
	struct raw_conn c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int events; /* reads with events so far */
	uint64_t t_last;
	bool quit, dead;
};

static void *bare_watch_thread(void *arg)
{
	struct bare_watch *bw = arg;
	char buf[8192];
	for (;;) {
		ssize_t r = read(bw->c.fd, buf, sizeof(buf) - 1);
		uint64_t t = mono();
		pthread_mutex_lock(&bw->mu);
		bool quit = bw->quit;
		if (!quit && r > 0) {
			buf[r] = '\0';
			if (strstr(buf, "\"events\"")) {
				bw->events++;
				bw->t_last = t;
			}
		} else if (!quit && !(r < 0 && (errno == EAGAIN || errno == EINTR)))
			bw->dead = true;
		pthread_cond_broadcast(&bw->cv);
		pthread_mutex_unlock(&bw->mu);
		if (quit || bw->dead)
			return NULL;
	}
}

/* the moment the bare client read its n-th event message, 0 on timeout */
static uint64_t bare_wait(struct bare_watch *bw, int n)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&bw->mu);
	while (bw->events < n && !bw->dead &&
	       pthread_cond_timedwait(&bw->cv, &bw->mu, &dl) == 0)
		;
	uint64_t t = bw->events >= n ? bw->t_last : 0;
	pthread_mutex_unlock(&bw->mu);
	return t;
}

static void start_watch_host(struct host *h, const char *prefix, bool write)
{
	setenv("LH_BENCH_WATCH", "1", 1);
	setenv("LH_BENCH_WATCH_WRITE", write ? "1" : "0", 1);
	start_host(h, prefix, "10");
	unsetenv("LH_BENCH_WATCH");
	unsetenv("LH_BENCH_WATCH_WRITE");
}

/* figure 10: a put acknowledged → the leader's on_watch_events entered,
 * beside a bare JSON-gateway watch client timing the same puts */
static void watch_latency(int n, struct samples *plugin, struct samples *bare,
                          struct samples *plugin_ack)
{
	static struct host h;
	static struct bare_watch bw;
	const char *url = harness_etcd_url(g_etcd, 0);
	host_setup(&h, g_base, "w9");
	install(&h, "bench-1.0.0.so", "bench.so");
	size_t from = bench_nev;
	start_watch_host(&h, "/b9", false);
	if (wait_ev(from, 'S', "w9", "bench", NULL, 0, false, 30000) < 0) {
		note("figure 10: the host never synced its watch");
		stop_host(&h);
		return;
	}
	memset(&bw, 0, sizeof(bw));
	pthread_mutex_init(&bw.mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bw.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t th;
	/* /b9/bench/data/in/ .. /b9/bench/data/in0 */
	if (!raw_open(&bw.c, url) ||
	    !raw_send(&bw.c, "/v3/watch",
	              "{\"create_request\":{\"key\":\"L2I5L2JlbmNoL2RhdGEvaW4v\","
	              "\"range_end\":\"L2I5L2JlbmNoL2RhdGEvaW4w\"}}") ||
	    !raw_watch_created(&bw.c) || pthread_create(&th, NULL, bare_watch_thread, &bw) != 0) {
		note("figure 10: the bare watch client could not start");
		stop_host(&h);
		return;
	}
	for (int i = 0; i < n; i++) {
		char val[32];
		snprintf(val, sizeof(val), "v%d", i);
		size_t f = bench_nev;
		uint64_t t0 = mono();
		int64_t rev = tu_put(&T, "/b9/bench/data/in/k", val, strlen(val));
		uint64_t t1 = mono();
		uint64_t tb = bare_wait(&bw, i + 1);
		long k = -1;
		for (size_t from2 = f;; from2 = (size_t)k + 1) {
			k = wait_ev(from2, 'B', "w9", "bench", NULL, 0, false, 5000);
			if (k < 0 || bench_ev[k].b == rev)
				break;
		}
		if (k < 0 || !tb) {
			note("figure 10: trial %d lost (plugin %ld, bare %" PRIu64 ")", i, k, tb);
			continue;
		}
		s_add(plugin, ms_between(t0, bench_ev[k].t));
		s_add(bare, ms_between(t0, tb));
		s_add(plugin_ack, ((double)bench_ev[k].t - (double)t1) / 1e6);
	}
	pthread_mutex_lock(&bw.mu);
	bw.quit = true;
	pthread_mutex_unlock(&bw.mu);
	shutdown(bw.c.fd, SHUT_RDWR);
	pthread_join(th, NULL);
	raw_close(&bw.c);
	stop_host(&h);
}

struct txn_done {
	bool done;
	int err;
};

static void on_fill(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	(void)r;
	struct txn_done *d = ud;
	d->err = err;
	d->done = true;
}

static bool p_txn_done(void *arg)
{
	return ((struct txn_done *)arg)->done;
}

/* n keys of `size` bytes under prefix, 100 puts per txn */
static void fill(const char *prefix, int n, size_t size)
{
	char *val = malloc(size);
	CHECK(val);
	memset(val, 'x', size);
	static char keys[100][96];
	struct etcd_op ops[100];
	for (int i = 0; i < n; i += 100) {
		int m = n - i < 100 ? n - i : 100;
		for (int j = 0; j < m; j++) {
			snprintf(keys[j], sizeof(keys[j]), "%sk%06d", prefix, i + j);
			ops[j] = (struct etcd_op){.type = ETCD_OP_PUT, .key = keys[j],
			                          .key_len = strlen(keys[j]), .value = val,
			                          .value_len = size};
		}
		struct txn_done d = {0};
		CHECK_OK(etcd_txn(T.etcd, NULL, 0, ops, (size_t)m, NULL, 0, NULL, on_fill, &d, NULL));
		CHECK(wait_for(p_txn_done, &d, 30000));
		CHECK_OK(d.err);
	}
	free(val);
}

static void on_ref_range(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct txn_done *d = ud;
	d->err = err < 0 ? err : (int)r->n_kvs;
	d->done = true;
}

/* figure 11: a fresh host elected over 10,000 keys of 1 KiB: on_elected →
 * the synced marker, and the host's memory; reference: the same range by
 * the host's etcd client alone */
static void snapshot_replay(int n, struct samples *replay, struct samples *rss,
                            struct samples *worker_rss, struct samples *ref)
{
	static struct host h;
	fill("/b10/bench/data/in/", 10000, 1024);
	host_setup(&h, g_base, "w10");
	install(&h, "bench-1.0.0.so", "bench.so");
	for (int i = 0; i < n; i++) {
		size_t from = bench_nev;
		start_watch_host(&h, "/b10", false);
		long e = wait_ev(from, 'E', "w10", "bench", NULL, 0, false, 30000);
		long s = e < 0 ? -1 : wait_ev((size_t)e, 'S', "w10", "bench", NULL, 10000, true, 60000);
		if (s < 0) {
			note("figure 11: trial %d: no synced marker with 10,000 events", i);
		} else {
			s_add(replay, ms_between(bench_ev[e].t, bench_ev[s].t));
			s_add(rss, (double)proc_status_kb(h.pid, "VmHWM") / 1024.0);
			pid_t w = host_worker_pid(h.pid);
			if (w > 0)
				s_add(worker_rss, (double)proc_status_kb(w, "VmHWM") / 1024.0);
		}
		stop_host(&h);
		struct txn_done d = {0};
		static const char k[] = "/b10/bench/data/in/", end[] = "/b10/bench/data/in0";
		struct etcd_op op = {.type = ETCD_OP_RANGE, .key = k, .key_len = sizeof(k) - 1,
		                     .range_end = end, .range_end_len = sizeof(end) - 1};
		uint64_t t0 = mono();
		CHECK_OK(etcd_range(T.etcd, &op, NULL, on_ref_range, &d, NULL));
		CHECK(wait_for(p_txn_done, &d, 30000));
		if (d.err == 10000)
			s_add(ref, ms_between(t0, mono()));
	}
}

/* figure 12: an input changed 1 ms after SIGTERM of the leader → its output
 * written by the new leader; beside it, in the same trials, SIGTERM → the new
 * leader's on_elected */
/* wall_clock - "HH:MM:SS.mmm" (UTC) of ts, the hosts' log timestamps' form */
static const char *wall_clock(char *buf, size_t len, struct timespec ts)
{
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
	         ts.tv_nsec / 1000000);
	return buf;
}

static void change_in_handover(int n, struct samples *out, struct samples *elected)
{
	char wall[32];
	static struct host hs[2];
	host_setup(&hs[0], g_base, "w11a");
	host_setup(&hs[1], g_base, "w11b");
	for (int i = 0; i < 2; i++) {
		install(&hs[i], "bench-1.0.0.so", "bench.so");
		start_watch_host(&hs[i], "/b11", true);
	}
	tu_put(&T, "/b11/bench/data/in/x", "v0", 2);
	for (int i = 0; i < n; i++) {
		/* the leader: the node of the last on_elected */
		long e = -1;
		for (long k = (long)bench_nev - 1; k >= 0 && e < 0; k--)
			if (bench_ev[k].type == 'E' && strncmp(bench_ev[k].node, "w11", 3) == 0)
				e = k;
		if (e < 0 && (e = wait_ev(0, 'E', NULL, "bench", NULL, 0, false, 30000)) < 0)
			break;
		struct host *l = strcmp(bench_ev[e].node, "w11a") == 0 ? &hs[0] : &hs[1];
		struct host *o = l == &hs[0] ? &hs[1] : &hs[0];
		/* the other host is up and synced as a standby: its I came */
		if (wait_ev(0, 'I', o->node, "bench", NULL, 0, false, 30000) < 0)
			break;
		size_t from = bench_nev;
		char val[32];
		int v = 1000 + i;
		snprintf(val, sizeof(val), "v%d", v);
		struct timespec wall_kill;
		clock_gettime(CLOCK_REALTIME, &wall_kill);
		host_signal(l, SIGTERM);
		uint64_t t_kill = mono();
		struct timespec at = {.tv_sec = (time_t)((t_kill + 1000000) / 1000000000ull),
		                      .tv_nsec = (long)((t_kill + 1000000) % 1000000000ull)};
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL); /* the schedule */
		tu_put(&T, "/b11/bench/data/in/x", val, strlen(val));
		uint64_t t_ack = mono();
		long k = wait_ev(from, 'O', o->node, "bench", NULL, v, true, 10000);
		long ke = wait_ev(from, 'E', o->node, "bench", NULL, 0, false, 1000);
		if (k < 0)
			note("figure 12: trial %d: the new leader %s never wrote v%d", i, o->node, v);
		else
			s_add(out, ms_between(t_ack, bench_ev[k].t));
		if (ke >= 0) {
			double ms = ms_between(t_kill, bench_ev[ke].t);
			s_add(elected, ms);
			if (ms > 20) /* to find the trial in the hosts' logs (LH_BENCH_KEEP=1) */
				note("figure 12: trial %d: SIGTERM of %s at %s → %s's on_elected %.1f ms", i,
				     l->node, wall_clock(wall, sizeof(wall), wall_kill), o->node, ms);
		}
		host_wait(l, 20000);
		size_t fi = bench_nev;
		start_watch_host(l, "/b11", true);
		wait_ev(fi, 'I', l->node, "bench", NULL, 0, false, 30000);
	}
	stop_host(&hs[0]);
	stop_host(&hs[1]);
}

/* figure 16: a keyed controller (ABI 1.3 reconcile_key): n inputs, each
 * put once, one after the other; the put sent (and acknowledged) → the
 * output written by reconcile_key (range + apply_key) acknowledged */

static void keyed_latency(int n, struct samples *out, struct samples *out_ack)
{
	static struct host h;
	host_setup(&h, g_base, "w16");
	install(&h, "bench-keyed-1.0.0.so", "bench.so");
	size_t from = bench_nev;
	start_watch_host(&h, "/b16", false);
	/* the term's first reconcile wrote: keys may go */
	if (wait_ev(from, 'W', "w16", "bench", NULL, 0, false, 30000) < 0) {
		note("figure 16: the keyed host never reconciled");
		stop_host(&h);
		return;
	}
	for (int i = 0; i < n; i++) {
		char key[64], val[32];
		snprintf(key, sizeof(key), "/b16/bench/data/in/k%05d", i);
		snprintf(val, sizeof(val), "v%d", i);
		size_t f = bench_nev;
		uint64_t t0 = mono();
		tu_put(&T, key, val, strlen(val));
		uint64_t t1 = mono();
		long k = wait_ev(f, 'O', "w16", "bench", NULL, i, true, 5000);
		if (k < 0) {
			note("figure 16: trial %d lost", i);
			continue;
		}
		s_add(out, ms_between(t0, bench_ev[k].t));
		s_add(out_ack, ((double)bench_ev[k].t - (double)t1) / 1e6);
	}
	stop_host(&h);
}

/* figure 17: the same host restarted n times over figure 16's inputs and
 * outputs: its term's first reconcile reads the inputs (one range, the
 * reference) and makes every output equal its input with one apply (all
 * unchanged): the apply entered → returned, the keys it wrote, the range */
struct resync_samples {
	struct samples apply, writes, range, both;
};

static void keyed_resync(int n, struct resync_samples *rs)
{
	static struct host h;
	host_setup(&h, g_base, "w17");
	install(&h, "bench-keyed-1.0.0.so", "bench.so");
	for (int i = 0; i < n; i++) {
		size_t from = bench_nev;
		start_watch_host(&h, "/b16", false);
		long k = wait_ev(from, 'Y', "w17", "bench", NULL, 0, false, 30000);
		long kr = wait_ev(from, 'y', "w17", "bench", NULL, 0, false, 1000);
		if (k < 0 || kr < 0)
			note("figure 17: trial %d: no resync reported", i);
		else {
			s_add(&rs->apply, ((double)bench_ev[k].t - (double)bench_ev[k].b) / 1e6);
			s_add(&rs->writes, (double)bench_ev[k].a);
			s_add(&rs->range, ((double)bench_ev[kr].t - (double)bench_ev[kr].b) / 1e6);
			s_add(&rs->both, ((double)bench_ev[k].t - (double)bench_ev[kr].b) / 1e6);
		}
		stop_host(&h);
	}
}

static void watch_figures(bool quick, bool keyed_only)
{
	char ref[256], goal[128], what[400];
	/* LH_BENCH_FIG12=N: figure 12 alone, N trials (its slow trials are rare) */
	const char *only12 = getenv("LH_BENCH_FIG12");
	int n12 = only12 && *only12 ? atoi(only12) : 0; /* NOLINT: bench knob */
	struct samples p = {0}, b = {0}, pa = {0}, r = {0}, rss = {0}, wrss = {0}, rr = {0};
	struct samples o = {0}, el = {0};
	if (n12 > 0)
		goto figure12;
	watch_latency(quick ? 50 : 500, &p, &b, &pa);
	double p99 = s_q(&p, 0.99), b99 = s_q(&b, 0.99);
	snprintf(ref, sizeof(ref), "bare JSON-gateway watch client, same puts: p50 %.3g, p99 %.3g ms",
	         s_q(&b, 0.5), b99);
	snprintf(goal, sizeof(goal), "p99 ≤ 2 × bare (%.3g ms)", 2 * b99);
	snprintf(what, sizeof(what), "watch event: put sent → leader's on_watch_events entered (p50 %.3g, p99 %.3g ms; ratio of p99s %.2f; from the put's ack: p50 %.3g, p99 %.3g ms)",
	         s_q(&p, 0.5), p99, p99 / b99, s_q(&pa, 0.5), s_q(&pa, 0.99));
	row("10", what, &p, "ms", ref, goal, p99 <= 2 * b99 ? "yes" : "**no**");

	struct samples ko = {0}, koa = {0};
	keyed_latency(quick ? 200 : 10000, &ko, &koa);
	double k99 = s_q(&ko, 0.99);
	snprintf(goal, sizeof(goal), "p99 ≤ 4 × bare (%.3g ms)", 4 * b99);
	snprintf(what, sizeof(what), "keyed reconcile (ABI 1.3 reconcile_key), %d inputs each put once: put sent → its output (range + apply_key) acknowledged (p50 %.3g, p99 %.3g ms; ratio of p99s to the bare watch %.2f; from the put's ack: p50 %.3g, p99 %.3g ms)",
	         quick ? 200 : 10000, s_q(&ko, 0.5), k99, b99 > 0 ? k99 / b99 : 0.0, s_q(&koa, 0.5),
	         s_q(&koa, 0.99));
	row("16", what, &ko, "ms", ref, goal, ko.n && k99 <= 4 * b99 ? "yes" : "**no**");
	struct resync_samples rs = {0};
	int n17 = quick ? 200 : 10000;
	keyed_resync(quick ? 2 : 10, &rs);
	fmt_ref(ref, sizeof(ref), &rs.range, "ms",
	        "the same reconcile's range of the inputs (plugin API: worker → host → etcd)");
	snprintf(what, sizeof(what), "full resync of %d unchanged outputs by one apply (the keyed host restarted: its term's first reconcile): apply entered → returned (keys written: max %.0f; ratio of medians to the range %.2f; range + apply: med %.3g, max %.3g ms, < 300 ms: %s)",
	         n17, s_max(&rs.writes), s_q(&rs.range, 0.5) > 0 ? s_q(&rs.apply, 0.5) / s_q(&rs.range, 0.5) : 0.0,
	         s_q(&rs.both, 0.5), s_max(&rs.both), rs.both.n && s_max(&rs.both) < 300 ? "yes" : "no");
	row("17", what, &rs.apply, "ms", ref, "apply < 300 ms, 0 writes",
	    rs.apply.n && s_max(&rs.apply) < 300 && rs.writes.n && s_max(&rs.writes) == 0 ? "yes (max)" : "**no**");
	free(ko.v);
	free(koa.v);
	free(rs.apply.v);
	free(rs.writes.v);
	free(rs.range.v);
	free(rs.both.v);
	if (keyed_only)
		goto done;

	snapshot_replay(quick ? 2 : 10, &r, &rss, &wrss, &rr);
	fmt_ref(ref, sizeof(ref), &rr, "ms", "one range of the 10,000 keys by the host's etcd client");
	row("11", "snapshot replay at election, 10,000 keys of 1 KiB: on_elected entered → the synced marker's on_watch_events",
	    &r, "ms", ref, "< 300 ms", r.n && s_max(&r) < 300 ? "yes (max)" : "**no**");
	fmt_ref(ref, sizeof(ref), &wrss, "MB", "the plugin's worker process, VmHWM");
	row("11", "snapshot replay: host (daemon) VmHWM after the synced marker", &rss, "MB", ref,
	    "< 64 MB", rss.n && s_max(&rss) < 64 ? "yes (max)" : "**no**");

figure12:
	change_in_handover(n12 > 0 ? n12 : quick ? 3 : 20, &o, &el);
	fmt_ref(ref, sizeof(ref), &el, "ms", "same trials: SIGTERM → the new leader's on_elected");
	row("12", "an input changed 1 ms after SIGTERM of the leader: its put acknowledged → the output written by the new leader (fenced txn acknowledged)",
	    &o, "ms", ref, "< 50 ms", o.n && s_max(&o) < 50 ? "yes (max)" : "**no**");
done:;
	struct samples *all[] = {&p, &b, &pa, &r, &rss, &wrss, &rr, &o, &el};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]->v);
}

/* ------------------- figure 13: dark time of an incompatible rolling upgrade */

#define DARK_MAX_HOSTS 10
#define DARK_STEP_MS 2000
#define DARK_MAX_RUNS 3 /* rollouts of the new rule per size (medians over them) */

struct dark_res {
	double dark_ms;    /* longest stretch without a completed reconcile */
	double steady_ms;  /* the same, over as long a stretch of steady state */
	double handover_ms; /* the longest stretch around a leadership change */
	double cadence_ms; /* median gap between writes before the rollout */
	int elections;     /* on_elected calls from the first reload to DONE 2.0.0 */
	double rollout_s;  /* first reload → status DONE 2.0.0 */
};

/* the longest stretch without an acknowledged write ('W') of plugin bench
 * in [t0, t1], from the events at index >= from; *ret_at is where it began */
static double dark_longest(size_t from, uint64_t t0, uint64_t t1, uint64_t *ret_at)
{
	size_t m = 0;
	uint64_t *ts = malloc((bench_nev - from + 2) * sizeof(*ts));
	CHECK(ts);
	ts[m++] = t0;
	for (size_t i = from; i < bench_nev; i++)
		if (bench_ev[i].type == 'W' && strcmp(bench_ev[i].name, "bench") == 0 && bench_ev[i].t > t0 &&
		    bench_ev[i].t < t1)
			ts[m++] = bench_ev[i].t;
	ts[m++] = t1;
	for (size_t i = 1; i < m; i++) /* insertion sort: reports of hosts interleave */
		for (size_t j = i; j > 0 && ts[j - 1] > ts[j]; j--) {
			uint64_t x = ts[j];
			ts[j] = ts[j - 1];
			ts[j - 1] = x;
		}
	double best = 0;
	for (size_t i = 1; i < m; i++)
		if (ms_between(ts[i - 1], ts[i]) > best) {
			best = ms_between(ts[i - 1], ts[i]);
			*ret_at = ts[i - 1];
		}
	free(ts);
	return best;
}

/* the longest stretch around a leadership change in [t0, t1]: for each
 * on_elected of plugin bench, from the last write before it (by any host)
 * to the new leader's first write after it */
static double dark_handover(size_t from, uint64_t t0, uint64_t t1, uint64_t *ret_at)
{
	double best = 0;
	for (size_t i = from; i < bench_nev; i++) {
		const struct bench_ev *e = &bench_ev[i];
		if (e->type != 'E' || strcmp(e->name, "bench") || e->t < t0 || e->t > t1)
			continue;
		uint64_t before = t0, after = 0;
		for (size_t j = from; j < bench_nev; j++) {
			const struct bench_ev *w = &bench_ev[j];
			if (w->type != 'W' || strcmp(w->name, "bench"))
				continue;
			if (w->t <= e->t && w->t > before)
				before = w->t;
			/* the new leader's first write of this term (its token) */
			if (w->t > e->t && strcmp(w->node, e->node) == 0 && w->a == e->a &&
			    (!after || w->t < after))
				after = w->t;
		}
		if (after && ms_between(before, after) > best) {
			best = ms_between(before, after);
			*ret_at = before;
		}
	}
	return best;
}

/* the slowest write in [t0, t1]: the plugin's txn call → its answer */
static double dark_slowest_answer(size_t from, uint64_t t0, uint64_t t1)
{
	double worst = 0;
	for (size_t i = from; i < bench_nev; i++) {
		const struct bench_ev *w = &bench_ev[i];
		if (w->type == 'W' && strcmp(w->name, "bench") == 0 && w->t >= t0 && w->t <= t1 &&
		    (uint64_t)w->b <= w->t && ms_between((uint64_t)w->b, w->t) > worst)
			worst = ms_between((uint64_t)w->b, w->t);
	}
	return worst;
}

/* etcd's WAL fsyncs so far, all of them and those over 4 ms (its
 * histogram's buckets double from 1 ms); NAN when the scrape failed */
struct fsyncs {
	double all, slow;
};

static struct fsyncs etcd_fsyncs(void)
{
	static const char *const series[] = {
		"etcd_disk_wal_fsync_duration_seconds_count",
		"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.004\"}",
	};
	double v[2];
	int port = 0;
	if (sscanf(harness_etcd_url(g_etcd, 0), "http://127.0.0.1:%d", &port) == 1 &&
	    http_metrics_get(port, series, v, 2) == 0 && v[0] >= 0 && v[1] >= 0)
		return (struct fsyncs){v[0], v[0] - v[1]};
	return (struct fsyncs){NAN, NAN};
}

/* median gap between consecutive writes in [t0, t1] */
static double dark_cadence(size_t from, uint64_t t0, uint64_t t1)
{
	struct samples g = {0};
	uint64_t prev = 0;
	for (size_t i = from; i < bench_nev; i++) {
		if (bench_ev[i].type != 'W' || strcmp(bench_ev[i].name, "bench") || bench_ev[i].t < t0 ||
		    bench_ev[i].t > t1)
			continue;
		if (prev && bench_ev[i].t > prev)
			s_add(&g, ms_between(prev, bench_ev[i].t));
		prev = bench_ev[i].t;
	}
	double med = g.n ? s_med(&g) : NAN;
	free(g.v);
	return med;
}

/* where the longest stretch went: the callbacks inside [a, b] by time, each
 * write with the time the plugin called txn (a late call: its reconcile
 * began late; a late answer: the txn's way through the host and etcd) */
static void dark_breakdown(size_t from, uint64_t a, uint64_t b)
{
	for (size_t i = from; i < bench_nev; i++) {
		const struct bench_ev *e = &bench_ev[i];
		if (e->t < a || e->t > b || !strchr("IEDFWR", e->type) || strcmp(e->name, "bench"))
			continue;
		if (e->type == 'W') /* a write: when its txn was called, too */
			note("  %+8.3f ms W %s %s (txn called at %+.3f ms)", ms_between(a, e->t), e->node,
			     e->rel, (double)((int64_t)e->b - (int64_t)a) / 1e6);
		else
			note("  %+8.3f ms %c %s %s", ms_between(a, e->t), e->type, e->node, e->rel);
	}
}

/* n hosts on prefix run bench 1.0.0, reconciling every 5 ms; one host every
 * DARK_STEP_MS hot-reloads newfile (2.0.0, min_compatible 2.0.0): the
 * longest stretch without a completed reconcile from the first reload to
 * the status DONE 2.0.0. false when the cluster did not form or settle. */
static bool dark_rollout(const char *prefix, int n, const char *newfile, bool steady_ref,
                         struct dark_res *ret)
{
	static struct host H[2 * (DARK_MAX_RUNS + 1)][DARK_MAX_HOSTS]; /* both sizes */
	static int used;
	CHECK(n <= DARK_MAX_HOSTS && used < 2 * (DARK_MAX_RUNS + 1));
	struct host *hs = H[used++];
	char dir[600];
	snprintf(dir, sizeof(dir), "%s%s", g_base, prefix);
	CHECK(mkdir(dir, 0755) == 0);
	const char *args[] = {"--prefix", prefix, "--ttl", "10", "--reconcile-wait", "0",
	                      "--reconcile-interval", "5ms", "--log-level", "info", NULL};
	size_t from = bench_nev;
	for (int i = 0; i < n; i++) {
		char node[8];
		snprintf(node, sizeof(node), "n%02d", i + 1);
		host_setup(&hs[i], dir, node);
		install(&hs[i], "bench-1.0.0.so", "bench.so");
		host_start(&hs[i], harness_etcd_urls(g_etcd), args);
	}
	struct release r1 = {1, 0, 0}, r2 = {2, 0, 0};
	struct observer *o = obs_new(&T, prefix, "bench", r1, r1, r1);
	obs_wait_members(o, (size_t)n, 60000);
	obs_wait_status_done(o, r1, 60000);
	uint64_t steady = mono(); /* one second of steady state gives the cadence */
	wait_for(p_never, NULL, 1000);
	struct fsyncs f0 = etcd_fsyncs(); /* scraped outside the windows */
	uint64_t t0 = mono();
	bool ok = true;
	for (int s = 0; s < n && ok; s++) {
		uint64_t step = mono();
		size_t sfrom = bench_nev;
		install(&hs[s], newfile, "bench.so");
		ok = wait_ev(sfrom, 'I', hs[s].node, "bench", "2.0.0", 0, false, 20000) >= 0;
		if (!ok)
			note("dark %s: %s did not load %s", prefix, hs[s].node, newfile);
		uint64_t next = step + (uint64_t)DARK_STEP_MS * 1000000ull;
		if (ok && s + 1 < n && mono() < next) /* the rollout's pace, not a wait for an event */
			wait_for(p_never, NULL, (int)((next - mono()) / 1000000ull) + 1);
	}
	if (ok) {
		obs_wait_status_done(o, r2, 60000);
		uint64_t t1 = mono();
		struct fsyncs f1 = etcd_fsyncs(), fs1 = {NAN, NAN};
		uint64_t at = t0;
		ret->dark_ms = dark_longest(from, t0, t1, &at);
		ret->cadence_ms = dark_cadence(from, steady, t0);
		ret->rollout_s = ms_between(t0, t1) / 1000.0;
		uint64_t hat = t0;
		ret->handover_ms = dark_handover(from, t0, t1, &hat);
		/* the reference: as long a stretch of steady state after the
		 * rollout (the new release leading, nothing reloading) */
		ret->steady_ms = NAN;
		double answer_ms = dark_slowest_answer(from, t0, t1), steady_answer_ms = NAN;
		if (steady_ref) {
			uint64_t s0 = mono();
			wait_for(p_never, NULL, (int)(ms_between(t0, t1)) + 1);
			uint64_t unused, s1 = mono();
			fs1 = etcd_fsyncs();
			ret->steady_ms = dark_longest(from, s0, s1, &unused);
			steady_answer_ms = dark_slowest_answer(from, s0, s1);
		}
		ret->elections = 0;
		for (size_t i = from; i < bench_nev; i++)
			if (bench_ev[i].type == 'E' && bench_ev[i].t > t0 && bench_ev[i].t < t1)
				ret->elections++;
		note("dark %s (%d hosts, %s): longest stretch without a write %.3f ms from %+.3f s after "
		     "the first reload; cadence %.3g ms; %d on_elected; DONE 2.0.0 %.2f s after the "
		     "first reload; longest stretch around a leadership change %.3f ms; as long a "
		     "steady state after it: longest stretch %.3f ms; the slowest write (txn call → "
		     "answer) %.3f ms in the rollout, %.3f ms in that steady state; etcd's WAL fsyncs "
		     "over 4 ms: %.0f of %.0f in the rollout, %.0f of %.0f in that steady state",
		     prefix, n, newfile, ret->dark_ms, ms_between(t0, at) / 1000.0, ret->cadence_ms,
		     ret->elections, ret->rollout_s, ret->handover_ms, ret->steady_ms, answer_ms,
		     steady_answer_ms, f1.slow - f0.slow, f1.all - f0.all, fs1.slow - f1.slow,
		     fs1.all - f1.all);
		dark_breakdown(from, at, at + (uint64_t)(ret->dark_ms * 1e6));
		if (hat != at) {
			note("  the longest stretch around a leadership change, from %+.3f s:",
			     ms_between(t0, hat) / 1000.0);
			dark_breakdown(from, hat, hat + (uint64_t)(ret->handover_ms * 1e6));
		}
	} else {
		for (int i = 0; i < n; i++)
			host_dump_log(&hs[i]);
	}
	obs_free(o);
	for (int i = 0; i < n; i++)
		stop_host(&hs[i]);
	return ok;
}

/* figure 13: both rules in one run, for 3 and 10 hosts; fig1b = figure 1b's
 * median of this run (the goal: one graceful handover beyond the cadence).
 * Each figure is a longest stretch, the maximum over one rollout, so a
 * single rollout's is one draw of the machine's worst moment: the new rule
 * rolls out `runs` times per size (each on a cluster of its own, each with
 * its own steady state after it) and the row gives the medians over them;
 * the reference rule, thousands of times longer, once. */
static void figure13(double fig1b, int runs)
{
	static const int sizes[] = {3, 10};
	CHECK(runs >= 1 && runs <= DARK_MAX_RUNS);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		int n = sizes[k];
		char pn[32], pr[32], what[800], ref[300], goal[200];
		struct samples s = {0}, hand = {0}, steady = {0}, cad = {0}, secs = {0}, elec = {0};
		for (int run = 0; run < runs; run++) {
			struct dark_res dn = {0};
			snprintf(pn, sizeof(pn), "/b13n%d%c", n, 'a' + run);
			if (!dark_rollout(pn, n, "bench-2.0.0.so", true, &dn))
				continue;
			s_add(&s, dn.dark_ms);
			s_add(&hand, dn.handover_ms);
			s_add(&steady, dn.steady_ms);
			s_add(&cad, dn.cadence_ms);
			s_add(&secs, dn.rollout_s);
			s_add(&elec, dn.elections);
		}
		struct dark_res dr = {0};
		snprintf(pr, sizeof(pr), "/b13r%d", n);
		bool okr = dark_rollout(pr, n, "bench-2.0.0-ref.so", false, &dr);
		bool okn = s.n == (size_t)runs;
		double dark = okn ? s_med(&s) : NAN, hand_ms = okn ? s_med(&hand) : NAN;
		double steady_ms = okn ? s_med(&steady) : NAN, cad_ms = okn ? s_med(&cad) : NAN;
		snprintf(what, sizeof(what),
		         "incompatible rolling upgrade, %d hosts, one hot reload every 2 s (1.0.0 → 2.0.0, "
		         "min_compatible 2.0.0), reconcile every 5 ms (cadence %.3g ms): dark time, the "
		         "longest stretch without a completed reconcile, first reload → status DONE 2.0.0 "
		         "(%.1f s; %.0f on_elected), over %d rollouts; ratio to figure 1b %.2f; the longest "
		         "stretch around a leadership change %.3g ms; as long a steady state after each "
		         "rollout: longest stretch %.3g ms (all three: medians over the rollouts); the "
		         "longest stretch ≤ 1b + the cadence: %s",
		         n, cad_ms, okn ? s_med(&secs) : NAN, okn ? s_med(&elec) : NAN, runs,
		         dark / fig1b, hand_ms, steady_ms, okn && dark <= fig1b + cad_ms ? "yes" : "no");
		snprintf(ref, sizeof(ref),
		         "reference rule (the same plugin built with LH_PLUGIN_F_REFERENCE_ROLLOUT): %.4g ms "
		         "(DONE after %.1f s); reference/new %.0f×",
		         okr ? dr.dark_ms : NAN, dr.rollout_s, okr ? dr.dark_ms / dark : NAN);
		double goal_ms = fig1b + cad_ms;
		/* the rollout's own darkness: a handover within one 1b beyond the
		 * cadence, and no stretch longer than steady state has anyway */
		snprintf(goal, sizeof(goal),
		         "around each leadership change ≤ 1b (%.3g ms) + the cadence = %.3g ms; the longest "
		         "≤ that or ≤ steady state's",
		         fig1b, goal_ms);
		bool met = okn && hand_ms <= goal_ms && (dark <= goal_ms || dark <= steady_ms);
		row("13", what, &s, "ms", ref, goal, met ? "yes" : "**no**");
		struct samples *all[] = {&s, &hand, &steady, &cad, &secs, &elec};
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			free(all[i]->v);
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--echo") == 0)
		return echo_main(argv[2], atoi(argv[3])); /* NOLINT: our own argument */
	if (argc != 3) {
		fprintf(stderr, "usage: lh-bench PLUGIN_DIR OUT_MD\n");
		return 2;
	}
	snprintf(g_plugins, sizeof(g_plugins), "%s", argv[1]);
	g_md = fopen(argv[2], "w");
	CHECK(g_md);
	g_etcdctl = getenv("ETCDCTL");
	if (!g_etcdctl || !*g_etcdctl)
		g_etcdctl = "/usr/bin/etcdctl";
	g_quick = getenv("LH_BENCH_QUICK") && strcmp(getenv("LH_BENCH_QUICK"), "1") == 0;
	if (!browser_find(g_chromium, sizeof(g_chromium)))
		g_chromium[0] = '\0';
	int n_main = g_quick ? 3 : 20;
	int n_t10 = g_quick ? 1 : 20;
	if (getenv("LH_BENCH_T10"))
		n_t10 = atoi(getenv("LH_BENCH_T10")); /* NOLINT: bench knob */
	int n_roll = g_quick ? 2 : 20;
	int n_events = g_quick ? 50 : 300;

	const char *tmp = getenv("TMPDIR");
	snprintf(g_base, sizeof(g_base), "%s/lh-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(g_base));
	atexit(rm_base);
	CHECK(chmod(g_base, 0755) == 0);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	bench_reports_open(T.loop, g_base);
	uint64_t t_begin = mono();
	note("lh-bench: etcd %s, base %s, trials %d (ttl 10: %d)", harness_etcd_url(g_etcd, 0),
	     g_base, n_main, n_t10);

	fprintf(g_md, "| # | figure (timed from → to) | n | median | min | max | reference, same run | goal | met |\n");
	fprintf(g_md, "|---|---|---|---|---|---|---|---|---|\n");

	/* LH_BENCH_ROLLOUT=1: figure 13 only, beside a few graceful handovers
	 * (figure 1b) of its own for the goal */
	if (getenv("LH_BENCH_ROLLOUT") && strcmp(getenv("LH_BENCH_ROLLOUT"), "1") == 0) {
		struct samples hw = {0};
		failover("/b13h", "10", SIGTERM, g_quick ? 3 : 10, NULL, &hw, NULL, NULL, NULL);
		row("1b", "graceful handover (for figure 13's goal): kill(SIGTERM) → the new leader's first fenced txn acknowledged",
		    &hw, "ms", "-", "-", "-");
		figure13(s_med(&hw), g_quick ? 1 : DARK_MAX_RUNS);
		free(hw.v);
		note("lh-bench: figure 13 only (LH_BENCH_ROLLOUT=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	/* LH_BENCH_SWITCHOVER=1: figure 9 only */
	bool switchover_only =
		getenv("LH_BENCH_SWITCHOVER") && strcmp(getenv("LH_BENCH_SWITCHOVER"), "1") == 0;
	if (switchover_only) {
		figure9(n_main);
		note("lh-bench: figure 9 only (LH_BENCH_SWITCHOVER=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	/* LH_BENCH_PIN=1: figure 14 only */
	if (getenv("LH_BENCH_PIN") && strcmp(getenv("LH_BENCH_PIN"), "1") == 0) {
		figure14(n_main);
		note("lh-bench: figure 14 only (LH_BENCH_PIN=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	/* LH_BENCH_BROKEN=1: figure 15 only */
	if (getenv("LH_BENCH_BROKEN") && strcmp(getenv("LH_BENCH_BROKEN"), "1") == 0) {
		figure15(g_quick ? 3 : 10);
		note("lh-bench: figure 15 only (LH_BENCH_BROKEN=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	/* LH_BENCH_WATCH=1: figures 10-12 only (watches) */
	if (getenv("LH_BENCH_WATCH") && strcmp(getenv("LH_BENCH_WATCH"), "1") == 0) {
		unsetenv("LH_BENCH_WATCH"); /* per host, set by start_watch_host */
		/* with LH_BENCH_KEYED=1: figures 10, 16 and 17 (16's goal is
		 * against 10's reference) */
		bool keyed = getenv("LH_BENCH_KEYED") && strcmp(getenv("LH_BENCH_KEYED"), "1") == 0;
		watch_figures(g_quick, keyed);
		note("lh-bench: figures %s only (LH_BENCH_WATCH=1%s), %.1f s",
		     keyed ? "10, 16 and 17" : "10-12, 16 and 17", keyed ? ", LH_BENCH_KEYED=1" : "",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	/* LH_BENCH_CRASH=1: figures 2 and 8 only (iterating on failover) */
	bool crash_only = getenv("LH_BENCH_CRASH") && strcmp(getenv("LH_BENCH_CRASH"), "1") == 0;
	char ref[256], goal[128];
	double fig1b_ms = NAN; /* figure 13's goal */
	/* LH_BENCH_DASHBOARD=1: figures 7, 3 and 4 only, each with and
	 * without the dashboard open in a browser */
	bool dash_only = getenv("LH_BENCH_DASHBOARD") && strcmp(getenv("LH_BENCH_DASHBOARD"), "1") == 0;
	int idle_secs = g_quick ? 20 : 60;
	if (!crash_only && !dash_only) {
	/* ---- 1: graceful handover ---- */
	struct samples el = {0}, wr = {0}, ref_el = {0}, floor = {0}, e2w = {0}, idle_put = {0},
	               raw = {0}, raw_ev = {0}, e2call = {0};
	failover("/b1", "10", SIGTERM, n_main, &el, &wr, &e2w, &floor, &e2call);
	note("1c: on_elected entered → the plugin calls txn: med %.3g (%.3g–%.3g) ms; the rest of 1c is "
	     "that txn's round trip through the host to etcd",
	     s_med(&e2call), s_min(&e2call), s_max(&e2call));
	ref_elect(n_main, &ref_el);
	put_after_idle(n_main, &idle_put);
	raw_handover(n_main, &raw, &raw_ev);
	note("1e: the revocation sent → the DELETE read by the watcher: med %.3g (%.3g–%.3g) ms",
	     s_med(&raw_ev), s_min(&raw_ev), s_max(&raw_ev));
	double ref_med = s_med(&ref_el), floor_med = s_med(&floor);
	fmt_ref(ref, sizeof(ref), &ref_el, "ms", "`etcdctl elect` SIGINT leader → waiter prints");
	snprintf(goal, sizeof(goal), "≤ etcdctl median (%.3g ms)", ref_med);
	row("1a", "graceful handover: kill(SIGTERM) of the leading host → other host's plugin enters on_elected",
	    &el, "ms", ref, goal, s_med(&el) <= ref_med ? "yes" : "**no**");
	fmt_ref(ref, sizeof(ref), &floor, "ms",
	        "one etcd put (host's client, JSON gateway; before each trial 3 back to back behind a warm-up put)");
	snprintf(goal, sizeof(goal), "≤ 5 puts (%.3g ms)", 5 * floor_med);
	row("1b", "graceful handover: kill(SIGTERM) → the new leader's first fenced txn acknowledged by etcd",
	    &wr, "ms", ref, goal, s_med(&wr) <= 5 * floor_med ? "yes" : "**no**");
	fig1b_ms = s_med(&wr);

	row("1c", "(breakdown of 1b) on_elected entered → first fenced txn acknowledged", &e2w, "ms",
	    "-", "-", "-");
	row("1d", "(context for 1b) one etcd put as in the floor, but after 20 ms with nothing happening (a handover starts from an idle etcd)",
	    &idle_put, "ms", "-", "-", "-");
	row("1e", "(floor for 1b) the same handover by a minimal client: raw HTTP/1.1 sockets to the same gateway, no loop, plugin or bus; the lease revocation sent → the txn sent from the watch's DELETE answered (after 20 ms idle)",
	    &raw, "ms", "-", "-", "-");

	if (getenv("LH_BENCH_HANDOVER") && strcmp(getenv("LH_BENCH_HANDOVER"), "1") == 0) {
		note("lh-bench: figure 1 only (LH_BENCH_HANDOVER=1), %.1f s", ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	} /* figure 1 */
	/* ---- 7 (started now, runs beside figure 2) ---- */
	static struct idle I;
	double idle_cpu_s = 0, idle_sched = 0; /* figure 7 without the page */
	if (!crash_only)
		idle_start(&I, idle_secs);

	if (!dash_only) {
	/* ---- 2: crash failover ---- */
	int lfd2, lfd10;
	pid_t lp2 = ref_lock_start(2, n_main, &lfd2);
	struct samples f2 = {0}, f10 = {0}, rl2 = {0}, rl10 = {0};
	failover("/b2t2", "2", SIGKILL, n_main, NULL, &f2, NULL, NULL, NULL);
	ref_lock_collect(lp2, lfd2, &rl2);
	pid_t lp10 = ref_lock_start(10, n_t10, &lfd10);
	failover("/b2t10", "10", SIGKILL, n_t10, NULL, &f10, NULL, NULL, NULL);
	ref_lock_collect(lp10, lfd10, &rl10);
	fmt_ref(ref, sizeof(ref), &rl2, "ms", "`etcdctl lock --ttl 2` SIGKILL holder → waiter prints");
	row("2", "crash failover, --ttl 2: kill(SIGKILL) of the leading host → new leader's first fenced txn acknowledged",
	    &f2, "ms", ref, "≤ 2500 ms", s_max(&f2) <= 2500 ? "yes (max)" : s_med(&f2) <= 2500 ? "median yes, max **no**" : "**no**");
	fmt_ref(ref, sizeof(ref), &rl10, "ms", "`etcdctl lock --ttl 10` SIGKILL holder → waiter prints");
	char what10[200];
	if (n_t10 < 20)
		snprintf(what10, sizeof(what10), "crash failover, --ttl 10 (%d trials only): same events", n_t10);
	else
		snprintf(what10, sizeof(what10), "crash failover, --ttl 10: same events");
	row("2", what10, &f10, "ms", ref, "≤ 10500 ms", s_max(&f10) <= 10500 ? "yes (max)" : s_med(&f10) <= 10500 ? "median yes, max **no**" : "**no**");

	/* ---- 8: etcd's raft leader killed, beside figure 2 ---- */
	struct samples r2 = {0}, r10 = {0};
	raft_leader_kill("/b8t2", "2", n_main, &r2);
	raft_leader_kill("/b8t10", "10", n_t10, &r10);
	for (int i = 0; i < 2; i++) {
		struct samples *rk = i ? &r10 : &r2, *hk = i ? &f10 : &f2;
		int ttl_s = i ? 10 : 2;
		double goal_ms = ttl_s * 1000.0 + 1000.0;
		char what[300];
		snprintf(what, sizeof(what),
		         "etcd's raft leader killed, --ttl %d (3-member etcd, etcd's default raft timing, "
		         "2 hosts, reconcile every 100 ms): dead time, the longest stretch without an "
		         "acknowledged fenced write from kill(SIGKILL) of the raft leader to a TTL after it",
		         ttl_s);
		snprintf(ref, sizeof(ref),
		         "host SIGKILL failover at --ttl %d (figure 2, this run): med %.4g ms; ratio of "
		         "medians %.2f", ttl_s, s_med(hk), hk->n ? s_med(rk) / s_med(hk) : 0.0);
		snprintf(goal, sizeof(goal), "≤ TTL + 1 s (%.0f ms)", goal_ms);
		row("8", what, rk, "ms", ref, goal,
		    rk->n && s_max(rk) <= goal_ms ? "yes (max)" : rk->n && s_med(rk) <= goal_ms ? "median yes, max **no**" : "**no**");
	}
	if (crash_only) {
		note("lh-bench: figures 2 and 8 only (LH_BENCH_CRASH=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}
	} /* figures 2 and 8 */

	/* ---- 7: finish ---- */
	if (!wait_for(p_flag, &I.done, 120000))
		note("idle: window did not end");
	{
		double secs = ms_between(I.t_start, I.t_end) / 1000.0;
		double cpu = idle_cpu(&I, &idle_sched);
		double sch = idle_sched;
		char what[300];
		snprintf(what, sizeof(what),
		         "idle host, 3 plugins (idle-a/b/c, all leading, --ttl 10): CPU over %.1f s window "
		         "(utime+stime from /proc/pid/stat; per-thread schedstat sum = %.4f s)",
		         secs, sch);
		struct samples one = {0};
		s_add(&one, cpu);
		row("7", what, &one, "CPU s", "- (1 trial; 10 ms tick resolution)", "~0 (no goal number)", "-");
		free(one.v);
		idle_cpu_s = cpu;
	}
	/* ---- 7 with the dashboard open (runs beside figure 3) ---- */
	char b7dir[600];
	snprintf(b7dir, sizeof(b7dir), "%s/b7", g_base);
	struct browser *b7 = dashboard_open(I.http_port, b7dir);
	if (b7)
		idle_window(&I, idle_secs);
	else
		note("7 with the dashboard: not measured (no Chromium: install Debian's chromium, or set "
		     "LH_CHROMIUM)");

	/* ---- 3: rolling upgrade ---- */
	struct samples d1 = {0}, d2 = {0}, d3 = {0}, sw = {0}, ne = {0};
	struct samples *dd[3] = {&d1, &d2, &d3};
	rollout(n_roll, dd, &sw, &ne);
	for (int s = 0; s < 3; s++) {
		char what[300];
		snprintf(what, sizeof(what),
		         "rolling upgrade step %d (host n%d hot-reloads 1.k→1.k+1, compatible): time no plugin "
		         "leads while a newest-release instance exists (last on_deposed/fini → next on_elected)",
		         s + 1, s + 1);
		row("3", what, dd[s], "ms", "-", "< 100 ms", s_max(dd[s]) < 100 ? "yes (max)" : s_med(dd[s]) < 100 ? "median yes, max **no**" : "**no**");
	}
	row("3", "status record writes per rollout (3 steps)", &sw, "writes", "-",
	    "no flip-flop (2 expected: WORKING, DONE)", s_max(&sw) <= 2 ? "yes" : "**no**");
	row("3", "on_elected calls per rollout (3 steps)", &ne, "calls", "-", "1 (no flip-flop)",
	    s_max(&ne) <= 1 ? "yes" : "**no**");

	if (b7) {
		if (!wait_for(p_flag, &I.done, 120000))
			note("idle with the dashboard: window did not end");
		double sch, cpu = idle_cpu(&I, &sch);
		char what[300], r7[200], g7[80];
		snprintf(what, sizeof(what),
		         "the same idle host with a headless Chromium showing its dashboard (the page "
		         "long-polls /api/v1/events): CPU over %.1f s (schedstat sum %.4f s)",
		         ms_between(I.t_start, I.t_end) / 1000.0, sch);
		snprintf(r7, sizeof(r7), "7 without the page (this run): %.2f s by ticks, %.4f s by "
		         "schedstat; ratio %.2f", idle_cpu_s, idle_sched,
		         idle_sched > 0 ? sch / idle_sched : 0.0);
		snprintf(g7, sizeof(g7), "≤ 7 + 0.06 s (1 ms a second)");
		struct samples one = {0};
		s_add(&one, cpu);
		row("7", what, &one, "CPU s", r7, g7, sch - idle_sched <= 0.06 ? "yes" : "**no**");
		free(one.v);
		browser_close(b7);
	}
	loop_timer_free(I.tm);
	stop_host(&I.h);

	/* ---- 4: event latency ---- */
	struct samples ls = {0}, la = {0}, fl2 = {0}, lsd = {0}, lad = {0}, lsa = {0}, laa = {0};
	event_latency(n_events, &ls, &la);
	int l4 = b3_leader();
	char b4dir[600];
	snprintf(b4dir, sizeof(b4dir), "%s/b3", g_base);
	struct browser *b4 = l4 >= 0 ? dashboard_open(g_b3_http[l4], b4dir) : NULL;
	if (b4) {
		/* with the page, then without it again: the reference is both
		 * series without it, around the one with it */
		event_latency(n_events, &lsd, &lad);
		browser_close(b4);
		event_latency(n_events, &lsa, &laa);
	}
	put_floor(n_main * 3, &fl2);
	fmt_ref(ref, sizeof(ref), &fl2, "ms", "one etcd put");
	{
		char what[300];
		double p99 = s_q(&ls, 0.99), p50 = s_med(&ls);
		snprintf(what, sizeof(what),
		         "member record put sent → leader's on_releases_changed entered: p50 %.3g, p99 %.3g ms "
		         "(from the put's ack: p50 %.3g, p99 %.3g ms)",
		         p50, p99, s_med(&la), s_q(&la, 0.99));
		row("4", what, &ls, "ms", ref, "p99 < 10 ms", p99 < 10 ? "yes" : "**no**");
		if (b4) {
			char r4[200];
			snprintf(what, sizeof(what),
			         "the same with a headless Chromium showing the leader's dashboard (each "
			         "change wakes its long poll): p50 %.3g, p99 %.3g ms",
			         s_med(&lsd), s_q(&lsd, 0.99));
			struct samples both = {0};
			for (size_t i = 0; i < ls.n; i++)
				s_add(&both, ls.v[i]);
			for (size_t i = 0; i < lsa.n; i++)
				s_add(&both, lsa.v[i]);
			double b50 = s_med(&both), b99 = s_q(&both, 0.99);
			snprintf(r4, sizeof(r4), "4 without the page, before and after it (this run): "
			         "p50 %.3g (%.3g, then %.3g), p99 %.3g ms; ratio of p50s %.2f, of p99s %.2f",
			         b50, p50, s_med(&lsa), b99, s_med(&lsd) / b50, s_q(&lsd, 0.99) / b99);
			row("4", what, &lsd, "ms", r4, "p50 ≤ 1.2 × without",
			    s_med(&lsd) <= 1.2 * b50 ? "yes" : "**no**");
			free(both.v);
		} else {
			note("4 with the dashboard: not measured (no Chromium, or no leader)");
		}
	}

	if (dash_only) {
		note("lh-bench: figures 7, 3 and 4 only (LH_BENCH_DASHBOARD=1), %.1f s",
		     ms_between(t_begin, mono()) / 1000.0);
		fclose(g_md);
		return 0;
	}

	/* ---- 5: bus ---- */
	struct samples bh = {0}, bb = {0};
	bus_host(2000, 100, false, &bh, &bb);
	fmt_ref(ref, sizeof(ref), &bb, "µs",
	        "bare nng pair1 inproc ping-pong, 100 B, blocking threads, interleaved with the host's in blocks of 100");
	snprintf(goal, sizeof(goal), "≤ 1.5 × bare (%.3g µs)", 1.5 * s_med(&bb));
	row("5", "bus round trip: plugin_instance_reconcile() on the loop → plugin's reconcile (no-op) on the worker → done callback on the loop",
	    &bh, "µs", ref, goal, s_med(&bh) <= 1.5 * s_med(&bb) ? "yes" : "**no**");
	struct samples ph = {0}, pb = {0};
	bus_host(2000, 100, true, &ph, &pb);
	fmt_ref(ref, sizeof(ref), &pb, "µs",
	        "bare nng pair1 ipc ping-pong between two processes, 100 B, blocking, interleaved with the host's in blocks of 100");
	snprintf(goal, sizeof(goal), "≤ 1.5 × bare (%.3g µs)", 1.5 * s_med(&pb));
	row("5", "bus round trip, --isolation process: plugin_instance_reconcile() on the loop → plugin's reconcile (no-op) in the leasehold-worker child over ipc:// → done callback on the loop",
	    &ph, "µs", ref, goal, s_med(&ph) <= 1.5 * s_med(&pb) ? "yes" : "**no**");

	/* ---- 6: scale ---- */
	static struct scale_res s1k, s10k;
	int nev6 = g_quick ? 10 : 50, nrun6 = g_quick ? 3 : 20;
	scale(1000, nrun6, nev6, &s1k);
	scale(10000, nrun6, nev6, &s10k);
	for (int i = 0; i < 2; i++) {
		struct scale_res *r = i ? &s10k : &s1k;
		int nm = i ? 10000 : 1000;
		char what[300];
		snprintf(what, sizeof(what), "scale %d members: fork+exec of leasehold → first on_releases_changed with n_members = %d", nm, nm + 1);
		bool sync_ok = r->sync_ms.n && s_max(&r->sync_ms) < 2000;
		row("6", what, &r->sync_ms, "ms", "-", i ? "< 2000 ms" : "-",
		    i ? (sync_ok ? "yes (max)" : "**no**") : "-");
		snprintf(what, sizeof(what), "scale %d members: host VmRSS after sync (highest VmHWM %.1f MB)", nm, r->hwm_mb);
		bool rss_ok = r->rss_mb.n && s_max(&r->rss_mb) < 32 && r->hwm_mb < 32;
		row("6", what, &r->rss_mb, "MB", "-", "< 32 MB", rss_ok ? "yes (max)" : "**no**");
		struct samples one = {0};
		s_add(&one, r->ir_per_event);
		snprintf(what, sizeof(what), "scale %d members: instructions per member event, all host threads (callgrind, %d events: put → on_releases_changed)", nm, nev6);
		double ratio = s10k.ir_per_event / s1k.ir_per_event;
		char met[64];
		snprintf(met, sizeof(met), "%s (10k/1k = %.2f)", ratio < 1.5 ? "yes" : "**no**", ratio);
		row("6", what, &one, "Ir", "-", "flat 1k → 10k", i ? met : "-");
		free(one.v);
	}

	figure9(n_main);
	figure14(n_main);
	figure15(g_quick ? 3 : 10);
	/* ---- 10-12: watches ---- */
	watch_figures(g_quick, false);
	/* ---- 13: dark time of an incompatible rolling upgrade ---- */
	figure13(fig1b_ms, g_quick ? 1 : DARK_MAX_RUNS);

	note("lh-bench: total %.1f s", ms_between(t_begin, mono()) / 1000.0);
	fprintf(g_md, "\nTotal bench time: %.0f s.\n", ms_between(t_begin, mono()) / 1000.0);
	fclose(g_md);
	/* teardown: hosts are killed at exit by hosts.c, etcd by the harness */
	return 0;
}
