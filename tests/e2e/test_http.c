/* SPDX-License-Identifier: MIT */
/*
 * test_http - the daemon's HTTP endpoint (metrics and probes) with real
 * daemons, a real etcd, the example plugin and libcurl as the client:
 *  - the probes: /healthz (200, then 503 while etcd is down and the session
 *    is lost, 200 again), /readyz/NAME and /leader/NAME on the leader and on
 *    a follower, 404 for unknown plugins and paths, 405 for other methods;
 *  - /metrics: the content type of the text format 0.0.4 and the values of
 *    the leader's and the follower's series, the families the alerting
 *    rules read (the release run, a refused plugin file by its class, the
 *    term ended by the lease lost, the snapshot's age, the wall clock) and
 *    the standard process_* ones;
 *  - a snapshot the loop no longer refreshes makes the probes fail (the
 *    endpoint in process, published once: a wedged loop), while /metrics
 *    still serves it with its age;
 *  - hostile input: malformed, oversized and slow requests are refused or
 *    cut off, and the endpoint keeps answering others;
 *  - a flood of requests does not delay the keepalives: at --ttl 2 no gap
 *    between two keepalives (from the host's debug log) exceeds TTL/3 plus
 *    a slack, and the host keeps its term (same fencing token).
 */
#include "config.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/procstat.h"
#include "check.h"
#include "e2e_fixture.h"
#include "harness.h"
#include "hosts.h"
#include "http/http.h"
#include "http_client.h"
#include "testutil.h"

#define PFX "/lhhttp"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;
static int PA, PB;
static char addr_a[64], addr_b[64];

static void start(struct host *h, const char *addr)
{
	const char *args[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", "--http", addr, NULL};
	host_start(h, harness_etcd_urls(g_etcd), args);
}

struct want {
	int port;
	const char *path;
	long status;
	const char *body; /* substring of the body, or NULL */
};

static bool p_answers(void *arg)
{
	const struct want *w = arg;
	struct http_reply r;
	long s = http_request(w->port, NULL, w->path, 2000, &r);
	bool ok = s == w->status && (!w->body || strstr(r.body, w->body));
	http_reply_free(&r);
	return ok;
}

static void wait_answer(int port, const char *path, long status, const char *body, int ms)
{
	struct want w = {port, path, status, body};
	char what[300];
	snprintf(what, sizeof(what), "GET %s on port %d answers %ld %s", path, port, status,
	         body ? body : "");
	tu_wait(&T, p_answers, &w, ms, what);
}

/* GET /metrics on port: the value of series (exits when absent) */
/* h's CPU time (user + system) from /proc/PID/stat, -1 when unreadable */
static double host_cpu_seconds(const struct host *h)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)h->pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	struct procstat ps = {0};
	if (!n || procstat_parse_stat(buf, n, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), 0, &ps) < 0 ||
	    !ps.have_cpu)
		return -1;
	return ps.cpu_seconds;
}

static double metric(int port, const char *series)
{
	struct http_reply r;
	CHECK_INT_EQ(http_request(port, NULL, "/metrics", 5000, &r), 200);
	double v = 0;
	if (http_metric(r.body, series, &v) < 0) {
		fprintf(stderr, "no series %s in:\n%s\n", series, r.body);
		exit(1);
	}
	http_reply_free(&r);
	return v;
}

struct want_metric {
	int port;
	const char *series;
	double value;
};

static bool p_metric(void *arg)
{
	const struct want_metric *w = arg;
	struct http_reply r;
	double v = -1;
	bool ok = http_request(w->port, NULL, "/metrics", 2000, &r) == 200 &&
	          http_metric(r.body, w->series, &v) == 0 && v == w->value;
	http_reply_free(&r);
	return ok;
}

static void wait_metric(int port, const char *series, double value, int ms)
{
	struct want_metric w = {port, series, value};
	char what[300];
	snprintf(what, sizeof(what), "%s == %g on port %d", series, value, port);
	tu_wait(&T, p_metric, &w, ms, what);
}

static void check_reply(int port, const char *method, const char *path, long status,
                        const char *body)
{
	struct http_reply r;
	long s = http_request(port, method, path, 5000, &r);
	if (s != status || (body && !strstr(r.body, body))) {
		fprintf(stderr, "%s %s: %ld '%s', expected %ld '%s'\n", method ? method : "GET", path,
		        s, r.body, status, body ? body : "");
		exit(1);
	}
	http_reply_free(&r);
}

/* check_error - method path answers status with one line of text/plain
 * (json: {"error": ...}), never an HTML page */
static void check_error(int port, const char *method, const char *path, long status, bool json)
{
	struct http_reply r;
	long s = http_request(port, method, path, 5000, &r);
	bool one_line = r.len > 0 && strchr(r.body, '\n') == r.body + r.len - 1;
	bool ok = s == status && one_line && !strstr(r.body, "<") &&
		  (json ? strncmp(r.ctype, "application/json", 16) == 0 &&
			      strncmp(r.body, "{\"error\": \"", 11) == 0
			: strncmp(r.ctype, "text/plain", 10) == 0);
	if (!ok) {
		fprintf(stderr, "%s %s: %ld '%s' (%s), expected %ld and one line of %s\n",
			method ? method : "GET", path, s, r.body, r.ctype, status,
			json ? "JSON" : "text");
		exit(1);
	}
	http_reply_free(&r);
}

static void check_error_bodies(int port)
{
	check_error(port, NULL, "/nope", 404, false);
	check_error(port, NULL, "/metricsx", 404, false);
	check_error(port, "POST", "/healthz", 405, false);
	check_error(port, "DELETE", "/readyz/reconciler", 405, false);
	check_error(port, NULL, "/api/nope", 404, true);
	check_error(port, "POST", "/api/v1/plugins", 405, true);
	check_error(port, NULL, "/api/v1/nope", 404, true);
	check_error(port, NULL, "/readyz/nope", 404, false);
}

static bool p_any_leader(void *arg)
{
	(void)arg;
	return obs_leader(g_obs) != NULL;
}

/* the families for operators and the alerting rules (contrib/prometheus/)
 * on host a, which runs reconciler 1.0.0 alone and leads it */
static void check_operator_metrics(void)
{
	double now = (double)time(NULL);
	CHECK(metric(PA, "leasehold_plugin_release_info{plugin=\"reconciler\",release=\"1.0.0\"}") == 1);
	CHECK(metric(PA, "leasehold_rollout_blocking_members{plugin=\"reconciler\"}") == 0);
	CHECK(metric(PA, "leasehold_terms_ended_total{plugin=\"reconciler\",reason=\"lease-lost\"}") == 0);
	CHECK(metric(PA, "leasehold_config_refusals_total{plugin=\"reconciler\",reason=\"invalid_document\"}") == 0);
	CHECK(metric(PA, "leasehold_lease_ttl_seconds") == 2);
	CHECK(metric(PA, "leasehold_bus_queue_depth{plugin=\"reconciler\"}") >= 0);
	CHECK(metric(PA, "leasehold_metrics_snapshot_age_seconds") < 2);
	double clock = metric(PA, "leasehold_time_seconds");
	CHECK(clock > now - 5 && clock < now + 5);
	/* the standard process collector's families, from /proc */
	double start = metric(PA, "process_start_time_seconds");
	CHECK(start > now - 600 && start <= now + 1);
	/* the daemon's own CPU time: at most what its /proc stat says after the
	 * scrape (the metrics may come from a snapshot a moment older; a fast
	 * build may not have spent one clock tick yet: 0 is a value) */
	double cpu = metric(PA, "process_cpu_seconds_total"), cpu1 = host_cpu_seconds(&A);
	if (!(cpu >= 0 && cpu1 >= 0 && cpu <= cpu1 + 1e-9))
		fprintf(stderr, "process_cpu_seconds_total %g, /proc after the scrape %g\n", cpu, cpu1);
	CHECK(cpu >= 0 && cpu1 >= 0 && cpu <= cpu1 + 1e-9);
	CHECK(metric(PA, "process_resident_memory_bytes") > 1e6);
	CHECK(metric(PA, "process_virtual_memory_bytes") >= metric(PA, "process_resident_memory_bytes"));
	CHECK(metric(PA, "process_open_fds") > 3);
	CHECK(metric(PA, "process_max_fds") >= metric(PA, "process_open_fds"));

	/* a file that is not a leasehold plugin: refused (class abi) while it
	 * is there, counted once; what runs keeps running */
	CHECK(metric(PA, "leasehold_plugin_files_refused{reason=\"abi\"}") == 0);
	double before = metric(PA, "leasehold_plugin_files_refused_total{reason=\"abi\"}");
	host_install_file(&A, built_test_plugin("bad-magic"), "bad.so", 0644);
	wait_metric(PA, "leasehold_plugin_files_refused{reason=\"abi\"}", 1, 10000);
	CHECK(metric(PA, "leasehold_plugin_files_refused_total{reason=\"abi\"}") == before + 1);
	CHECK(metric(PA, "leasehold_plugin_files_refused{reason=\"file\"}") == 0);
	CHECK(metric(PA, "leasehold_is_leader{plugin=\"reconciler\"}") == 1);
	char path[700];
	CHECK_OK(unlink(host_plugin_path(&A, "bad.so", path, sizeof(path))));
	wait_metric(PA, "leasehold_plugin_files_refused{reason=\"abi\"}", 0, 10000);
}

static void test_probes_and_metrics(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	start(&A, addr_a);
	obs_wait_leader(g_obs, "a", 15000);
	wait_answer(PA, "/leader/reconciler", 200, "leader", 5000);
	wait_answer(PA, "/readyz/reconciler", 200, "ready", 10000);
	check_reply(PA, NULL, "/healthz", 200, "ok");
	check_reply(PA, "HEAD", "/healthz", 200, NULL);
	check_reply(PA, NULL, "/readyz/nope", 404, "no such plugin");
	check_reply(PA, NULL, "/leader/nope", 404, "no such plugin");
	check_reply(PA, NULL, "/readyz/", 200, "reconciler ready\n"); /* the list */
	check_reply(PA, NULL, "/readyz", 200, "reconciler ready\n");
	check_error_bodies(PA);
	check_reply(PA, NULL, "/nope", 404, NULL);
	check_reply(PA, NULL, "/", 200, "<!DOCTYPE html>"); /* the dashboard */
	check_reply(PA, NULL, "/index.html", 404, NULL);
	check_reply(PA, NULL, "/metricsx", 404, NULL);
	check_reply(PA, "POST", "/healthz", 405, NULL);
	check_reply(PA, "DELETE", "/metrics", 405, NULL);
	check_reply(PA, "PUT", "/leader/reconciler", 405, NULL);

	struct http_reply r;
	CHECK_INT_EQ(http_request(PA, NULL, "/metrics", 5000, &r), 200);
	CHECK(strncmp(r.ctype, "text/plain; version=0.0.4", 25) == 0);
	CHECK(strstr(r.body, "# TYPE leasehold_is_leader gauge\n"));
	CHECK(strstr(r.body, "leasehold_build_info{version=\"" PACKAGE_VERSION "\",abi=\""));
	http_reply_free(&r);
	CHECK(metric(PA, "leasehold_is_leader{plugin=\"reconciler\"}") == 1);
	CHECK(metric(PA, "leasehold_ready{plugin=\"reconciler\"}") == 1);
	CHECK(metric(PA, "leasehold_terms_won_total{plugin=\"reconciler\"}") == 1);
	CHECK(metric(PA, "leasehold_fencing_token{plugin=\"reconciler\"}") > 0);
	CHECK(metric(PA, "leasehold_etcd_session_up") == 1);
	double left = metric(PA, "leasehold_lease_remaining_seconds");
	CHECK(left > 0 && left <= 2);
	CHECK(metric(PA, "leasehold_reconciles_total{plugin=\"reconciler\",result=\"ok\"}") >= 1);
	CHECK(metric(PA, "leasehold_reconcile_duration_seconds_count{plugin=\"reconciler\"}") >= 1);
	CHECK(metric(PA, "leasehold_last_successful_reconcile_timestamp_seconds{plugin=\"reconciler\"}") >
	      (double)time(NULL) - 60);
	/* the example plugin writes in its first reconcile: one first write */
	CHECK(metric(PA, "leasehold_election_to_first_write_seconds_count{plugin=\"reconciler\"}") == 1);
	CHECK(metric(PA, "leasehold_etcd_request_duration_seconds_count{operation=\"lease_keepalive\"}") >= 0);
	CHECK(metric(PA, "leasehold_etcd_request_duration_seconds_count{operation=\"txn\"}") >= 1);
	CHECK(metric(PA, "leasehold_worker_restarts_total{plugin=\"reconciler\"}") == 0);
	/* every answered event that went alone measures the bus once */
	CHECK(metric(PA, "leasehold_bus_round_trip_seconds_count{plugin=\"reconciler\"}") >= 1);
	check_operator_metrics();

	/* a follower */
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	start(&B, addr_b);
	obs_wait_members(g_obs, 2, 15000);
	wait_answer(PB, "/readyz/reconciler", 200, "ready", 10000);
	check_reply(PB, NULL, "/leader/reconciler", 503, "a leads");
	wait_metric(PA, "leasehold_members{plugin=\"reconciler\",release=\"1.0.0\"}", 2, 5000);
	CHECK(metric(PB, "leasehold_is_leader{plugin=\"reconciler\"}") == 0);
	CHECK(metric(PB, "leasehold_fencing_token{plugin=\"reconciler\"}") == 0);
	CHECK(metric(PB, "leasehold_terms_won_total{plugin=\"reconciler\"}") == 0);

	/* a cluster-wide pause shows on both nodes, and ends on both */
	struct ctl_out o;
	CHECK(metric(PA, "leasehold_paused{plugin=\"reconciler\"}") == 0);
	CHECK_INT_EQ(host_ctl(&B, &o, "pause", "reconciler", NULL), 0);
	ctl_out_free(&o);
	wait_metric(PA, "leasehold_paused{plugin=\"reconciler\"}", 1, 5000);
	wait_metric(PB, "leasehold_paused{plugin=\"reconciler\"}", 1, 5000);
	CHECK_INT_EQ(host_ctl(&A, &o, "resume", "reconciler", NULL), 0);
	ctl_out_free(&o);
	wait_metric(PA, "leasehold_paused{plugin=\"reconciler\"}", 0, 5000);
	wait_metric(PB, "leasehold_paused{plugin=\"reconciler\"}", 0, 5000);

	/* so does a pin */
	CHECK(metric(PA, "leasehold_pinned{plugin=\"reconciler\"}") == 0);
	CHECK_INT_EQ(host_ctl(&B, &o, "release", "pin", "reconciler", "1.0.0", NULL), 0);
	ctl_out_free(&o);
	wait_metric(PA, "leasehold_pinned{plugin=\"reconciler\"}", 1, 5000);
	wait_metric(PB, "leasehold_pinned{plugin=\"reconciler\"}", 1, 5000);
	CHECK_INT_EQ(host_ctl(&A, &o, "release", "unpin", "reconciler", NULL), 0);
	ctl_out_free(&o);
	wait_metric(PA, "leasehold_pinned{plugin=\"reconciler\"}", 0, 5000);

	/* etcd goes away: the session is lost within the TTL; health says so */
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	wait_answer(PA, "/healthz", 503, "no etcd session", 10000);
	check_reply(PA, NULL, "/leader/reconciler", 503, NULL);
	check_reply(PA, NULL, "/readyz/reconciler", 503, NULL);
	CHECK(metric(PA, "leasehold_etcd_session_up") == 0);
	CHECK(metric(PA, "leasehold_lease_remaining_seconds") == 0);
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	CHECK_OK(harness_etcd_wait_healthy(g_etcd, 0, 15000));
	wait_answer(PA, "/healthz", 200, "ok", 15000);
	wait_answer(PB, "/healthz", 200, "ok", 15000);
	CHECK(metric(PA, "leasehold_etcd_errors_total{kind=\"unavailable\"}") +
	          metric(PA, "leasehold_etcd_errors_total{kind=\"timeout\"}") >= 1);
	/* a's term ended when its lease was lost */
	CHECK(metric(PA, "leasehold_terms_ended_total{plugin=\"reconciler\",reason=\"lease-lost\"}") == 1);
	CHECK(metric(PA, "leasehold_terms_ended_total{plugin=\"reconciler\",reason=\"shutdown\"}") == 0);
	tu_wait(&T, p_any_leader, NULL, 15000, "a leader again");
}

/* a wedged loop stops publishing: the endpoint in process, published once */
static void test_stale_snapshot_fails_probes(void)
{
	struct http_server *s;
	char err[256];
	CHECK_OK(http_server_new("127.0.0.1:0", 500 * LOOP_NS_PER_MS, &s, err, sizeof(err)));
	int port = http_server_port(s);
	CHECK(port > 0);
	check_reply(port, NULL, "/healthz", 503, "starting");
	check_reply(port, NULL, "/metrics", 503, "starting");
	struct http_snapshot *snap = calloc(1, sizeof(*snap));
	CHECK(snap != NULL);
	snap->healthy = true;
	snap->metrics = strdup("x 1\n");
	snap->metrics_len = 4;
	snap->plugins = calloc(1, sizeof(*snap->plugins));
	CHECK(snap->plugins != NULL);
	snap->n_plugins = 1;
	snap->plugins[0].name = strdup("p");
	snap->plugins[0].ready = true;
	snap->plugins[0].leader = true;
	http_server_publish(s, snap);
	check_reply(port, NULL, "/healthz", 200, "ok");
	check_reply(port, NULL, "/readyz/p", 200, "ready");
	check_reply(port, NULL, "/metrics", 200, "x 1");
	/* nothing published since: after 500 ms the answers fail */
	wait_answer(port, "/healthz", 503, "event loop stalled", 5000);
	check_reply(port, NULL, "/readyz/p", 503, "event loop stalled");
	check_reply(port, NULL, "/leader/p", 503, "event loop stalled");
	check_reply(port, NULL, "/readyz/q", 503, "event loop stalled");
	/* the stale metrics are still served, and say how old they are */
	struct http_reply r;
	double age = 0;
	CHECK_INT_EQ(http_request(port, NULL, "/metrics", 5000, &r), 200);
	CHECK(strncmp(r.body, "x 1\n", 4) == 0);
	CHECK_OK(http_metric(r.body, "leasehold_metrics_snapshot_age_seconds", &age));
	CHECK(age >= 0.5);
	http_reply_free(&r);
	http_server_free(s);
}

/* ---- hostile input ---- */

static long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


static int raw(const char *req, int timeout_ms)
{
	return http_raw(PA, req, strlen(req), timeout_ms);
}

static void test_hostile_input(void)
{
	char *big = malloc(20001);
	CHECK(big != NULL);
	CHECK_INT_EQ(raw("GARBAGE\r\n\r\n", 5000), 400);
	CHECK_INT_EQ(raw("GET /healthz HTTP/2.0\r\n\r\n", 5000), 505);
	CHECK_INT_EQ(raw("GET healthz HTTP/1.1\r\n\r\n", 5000), 400);
	CHECK_INT_EQ(raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\x01\x02\r\n\r\n", 5000), 400);
	CHECK_INT_EQ(raw("GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n", 5000), 400);
	CHECK_INT_EQ(http_raw(PA, "GET /\0x HTTP/1.1\r\n\r\n", 20, 5000), 400);
	/* oversized: a long header, a long target, too many header lines */
	memset(big, 'a', 20000);
	big[20000] = 0;
	char *req = malloc(20100);
	CHECK(req != NULL);
	snprintf(req, 20100, "GET /healthz HTTP/1.1\r\nX: %s\r\n\r\n", big);
	CHECK_INT_EQ(raw(req, 5000), 431);
	snprintf(req, 20100, "GET /%s HTTP/1.1\r\n\r\n", big);
	CHECK_INT_EQ(raw(req, 5000), 431);
	size_t off = (size_t)snprintf(req, 20100, "GET /healthz HTTP/1.1\r\n");
	for (int i = 0; i < 100; i++)
		off += (size_t)snprintf(req + off, 20100 - off, "X-%d: y\r\n", i);
	snprintf(req + off, 20100 - off, "\r\n");
	CHECK_INT_EQ(raw(req, 5000), 431);
	free(req);
	free(big);
	/* a body is not read: the answer comes from the request line */
	CHECK_INT_EQ(raw("POST /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 5000), 405);
	CHECK_INT_EQ(raw("GET /healthz HTTP/1.0\n\n", 5000), 200);

	/* a slow client: its head does not complete within 5 s -> 408, closed */
	long t0 = mono_ms();
	CHECK_INT_EQ(raw("GET /healthz HTTP/1.1\r\nHost: x\r\n", 15000), 408);
	long took = mono_ms() - t0;
	CHECK(took >= 4500 && took < 15000);

	/* many idle connections: past 64, new ones are refused at once; the
	 * others are cut off by the head deadline, and the endpoint recovers */
	enum { IDLE = 70 };
	struct http_reply r;
	int fds[IDLE];
	for (int i = 0; i < IDLE; i++)
		fds[i] = http_open_partial(PA, "GET /healthz HTTP/1.1\r\n");
	CHECK_INT_EQ(raw("GET /healthz HTTP/1.1\r\n\r\n", 5000), 503);
	for (int i = 0; i < IDLE; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	wait_answer(PA, "/healthz", 200, "ok", 10000);
	CHECK_INT_EQ(http_request(PA, NULL, "/leader/reconciler", 5000, &r) > 0, 1);
	http_reply_free(&r);
	CHECK(host_alive(&A));
}

/* ---- the flood ---- */

struct flood {
	int port;
	long until_ms;
	atomic_long ok, failed;
};

static void *flood_thread(void *arg)
{
	struct flood *f = arg;
	static const char *const paths[] = {"/metrics", "/healthz", "/readyz/reconciler",
	                                    "/leader/reconciler", "/nope"};
	for (unsigned i = 0; mono_ms() < f->until_ms; i++) {
		struct http_reply r;
		long s = http_request(f->port, NULL, paths[i % 5], 5000, &r);
		http_reply_free(&r);
		if (s > 0)
			atomic_fetch_add(&f->ok, 1);
		else
			atomic_fetch_add(&f->failed, 1);
	}
	return NULL;
}

/* the RFC 3339 time at the start of a log line ("2026-01-02T03:04:05.678Z")
 * -> ms of the day, -1 if none */
static long line_ms(const char *l)
{
	int y, mo, d, h, m, s, ms;
	if (sscanf(l, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &y, &mo, &d, &h, &m, &s, &ms) != 7)
		return -1;
	return ((h * 60L + m) * 60 + s) * 1000 + ms;
}

/* the largest gap between two "keepalive sent" lines in log text */
static long max_keepalive_gap(const char *log, int *ret_n)
{
	long prev = -1, max = 0;
	int n = 0;
	for (const char *l = log; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *eol = strchr(l, '\n');
		const char *hit = strstr(l, "session: keepalive sent");
		if (!hit || (eol && hit > eol))
			continue;
		long t = line_ms(l);
		if (t < 0)
			continue;
		if (prev >= 0 && t >= prev && t - prev > max)
			max = t - prev;
		prev = t;
		n++;
	}
	*ret_n = n;
	return max;
}

static void test_flood_keeps_keepalives(void)
{
	/* b leaves: a leads alone */
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 20000));
	obs_wait_leader(g_obs, "a", 15000);
	wait_answer(PA, "/leader/reconciler", 200, "leader", 10000);
	double token = metric(PA, "leasehold_fencing_token{plugin=\"reconciler\"}");
	double terms = metric(PA, "leasehold_terms_won_total{plugin=\"reconciler\"}");
	CHECK(token > 0);

	enum { THREADS = 32, SECONDS = 5 };
	struct flood f = {.port = PA, .until_ms = mono_ms() + SECONDS * 1000};
	long from = host_log_size(&A);
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, flood_thread, &f) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	char *log = host_log_since(&A, from);
	int n;
	long gap = max_keepalive_gap(log, &n);
	free(log);
	long ok = atomic_load(&f.ok), failed = atomic_load(&f.failed);
	fprintf(stderr, "flood: %ld requests answered, %ld not, in %d s by %d threads; %d "
	                "keepalives, largest gap %ld ms\n",
	        ok, failed, SECONDS, THREADS, n, gap);
	CHECK(ok >= 100); /* a flood indeed */
	/* TTL 2 s: a keepalive every 667 ms; 500 ms of slack for a loaded
	 * machine stays far below the local deadline (TTL - 400 ms) */
	CHECK(n >= 4);
	CHECK(gap <= 667 + 500);
	/* the term held through it */
	CHECK(metric(PA, "leasehold_fencing_token{plugin=\"reconciler\"}") == token);
	CHECK(metric(PA, "leasehold_terms_won_total{plugin=\"reconciler\"}") == terms);
	check_reply(PA, NULL, "/leader/reconciler", 200, "leader");
	check_reply(PA, NULL, "/healthz", 200, "ok");
	CHECK(host_log_count(&A, from, "lost") == 0);
}

int main(void)
{
	CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == 0);
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, "reconciler");
	int ports[2];
	CHECK_OK(harness_free_ports(ports, 2));
	PA = ports[0];
	PB = ports[1];
	CHECK(PA > 0 && PB > 0 && PA != PB);
	snprintf(addr_a, sizeof(addr_a), "127.0.0.1:%d", PA);
	snprintf(addr_b, sizeof(addr_b), "127.0.0.1:%d", PB);

	RUN(test_stale_snapshot_fails_probes);
	RUN(test_probes_and_metrics);
	RUN(test_hostile_input);
	RUN(test_flood_keeps_keepalives);

	e2e_stop(g_etcd, &T, g_obs);
	curl_global_cleanup();
	return CHECK_EXIT();
}
