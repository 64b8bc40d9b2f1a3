/* SPDX-License-Identifier: MIT */
/*
 * test_http_prometheus - Debian's Prometheus scrapes two real hosts (real
 * etcd, the example plugin) every second, and the test asks Prometheus's
 * HTTP API (/api/v1/query) for leasehold_is_leader across a handover: a
 * leads, then a leaves (SIGTERM) and Prometheus sees b lead. promtool
 * lints both hosts' exposition (`promtool check metrics`). Skipped (77)
 * when prometheus or promtool is missing or Prometheus cannot start.
 */
#include "config.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "testutil.h"

#define PFX "/lhprom"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;
static int PA, PB, PP;
static pid_t g_prom;
static char g_dir[600];

static const char *find_tool(const char *name)
{
	static char buf[2][256];
	static int k;
	const char *dirs[] = {"/usr/bin", "/usr/local/bin", "/usr/sbin"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *b = buf[k++ % 2];
		snprintf(b, sizeof(buf[0]), "%s/%s", dirs[i], name);
		if (access(b, X_OK) == 0)
			return b;
	}
	return NULL;
}

static void kill_prometheus(void)
{
	if (g_prom > 0)
		kill(g_prom, SIGKILL);
}

static void kill_prometheus_at_exit(void)
{
	if (g_prom > 0) {
		kill(g_prom, SIGKILL);
		waitpid(g_prom, NULL, 0);
		g_prom = 0;
	}
}

/* run argv with stdin from in_path, stdout+stderr into out_path; exit code */
static int run_tool(const char *const *argv, const char *in_path, const char *out_path)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int in = open(in_path, O_RDONLY | O_CLOEXEC);
		int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (in < 0 || out < 0)
			_exit(127);
		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void lint(int port, const char *promtool)
{
	struct http_reply r;
	CHECK_INT_EQ(http_request(port, NULL, "/metrics", 5000, &r), 200);
	char in[700], out[700];
	snprintf(in, sizeof(in), "%s/metrics-%d.txt", g_dir, port);
	snprintf(out, sizeof(out), "%s/promtool-%d.txt", g_dir, port);
	FILE *f = fopen(in, "w");
	CHECK(f != NULL);
	CHECK(fwrite(r.body, 1, r.len, f) == r.len);
	fclose(f);
	http_reply_free(&r);
	const char *argv[] = {promtool, "check", "metrics", NULL};
	int code = run_tool(argv, in, out);
	char *said = test_read_file(out);
	if (code != 0 || said[0]) {
		fprintf(stderr, "promtool check metrics (port %d) exited %d:\n%s\n", port, code, said);
		exit(1);
	}
	free(said);
}

static void start(struct host *h, int port)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	const char *args[] = {HOST_TEST_ARGS(PFX), "--http", addr, NULL};
	host_start(h, harness_etcd_urls(g_etcd), args);
}

static bool g_prom_exited;

static bool p_prom_up(void *arg)
{
	(void)arg;
	int st;
	if (waitpid(g_prom, &st, WNOHANG) == g_prom) {
		g_prom_exited = true;
		return true;
	}
	return http_status(PP, "/-/ready") == 200;
}

static void start_prometheus(const char *prometheus)
{
	char cfg[700], data[700], logp[700], listen[64];
	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", g_dir);
	snprintf(data, sizeof(data), "%s/prometheus-data", g_dir);
	snprintf(logp, sizeof(logp), "%s/prometheus.log", g_dir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", PP);
	FILE *f = fopen(cfg, "w");
	CHECK(f != NULL);
	fprintf(f,
	        "global:\n"
	        "  scrape_interval: 1s\n"
	        "  scrape_timeout: 1s\n"
	        "scrape_configs:\n"
	        "  - job_name: leasehold\n"
	        "    static_configs:\n"
	        "      - targets: ['127.0.0.1:%d', '127.0.0.1:%d']\n",
	        PA, PB);
	fclose(f);
	char a_cfg[720], a_data[720], a_listen[100];
	snprintf(a_cfg, sizeof(a_cfg), "--config.file=%s", cfg);
	snprintf(a_data, sizeof(a_data), "--storage.tsdb.path=%s", data);
	snprintf(a_listen, sizeof(a_listen), "--web.listen-address=%s", listen);
	const char *argv[] = {prometheus, a_cfg, a_data, a_listen, "--log.level=warn", NULL};
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int out = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (out >= 0) {
			dup2(out, 1);
			dup2(out, 2);
		}
		if (in >= 0)
			dup2(in, 0);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	g_prom = pid;
	/* ready: /-/ready answers 200; an exit means it cannot run here */
	tu_wait(&T, p_prom_up, NULL, 60000, "Prometheus ready (/-/ready)");
	if (g_prom_exited) {
		g_prom = 0;
		char *log = test_read_file(logp);
		printf("SKIP: prometheus cannot run here (it exited):\n%s\n", log);
		free(log);
		exit(77);
	}
}

/* Prometheus's answer for leasehold_is_leader{plugin="reconciler"}: the
 * value per target port (-1 when the series is absent) */
static void query_leader(int *ret_a, int *ret_b)
{
	*ret_a = *ret_b = -1;
	CURL *c = curl_easy_init();
	CHECK(c != NULL);
	char *q = curl_easy_escape(c, "leasehold_is_leader{plugin=\"reconciler\"}", 0);
	CHECK(q != NULL);
	char path[512];
	snprintf(path, sizeof(path), "/api/v1/query?query=%s", q);
	curl_free(q);
	curl_easy_cleanup(c);
	struct http_reply r;
	if (http_request(PP, NULL, path, 5000, &r) != 200) {
		http_reply_free(&r);
		return;
	}
	json_object *root = json_tokener_parse(r.body), *data, *result;
	http_reply_free(&r);
	CHECK(root != NULL);
	if (json_object_object_get_ex(root, "data", &data) &&
	    json_object_object_get_ex(data, "result", &result)) {
		for (size_t i = 0; i < json_object_array_length(result); i++) {
			json_object *s = json_object_array_get_idx(result, i), *m, *inst, *v;
			if (!json_object_object_get_ex(s, "metric", &m) ||
			    !json_object_object_get_ex(m, "instance", &inst) ||
			    !json_object_object_get_ex(s, "value", &v))
				continue;
			const char *in = json_object_get_string(inst);
			const char *val = json_object_get_string(json_object_array_get_idx(v, 1));
			const char *colon = in ? strrchr(in, ':') : NULL;
			if (!colon || !val)
				continue;
			long port = strtol(colon + 1, NULL, 10);
			int x = strcmp(val, "1") == 0 ? 1 : strcmp(val, "0") == 0 ? 0 : -2;
			if (port == PA)
				*ret_a = x;
			else if (port == PB)
				*ret_b = x;
		}
	}
	json_object_put(root);
}

struct seen {
	int a, b; /* wanted; -1 = absent, -3 = absent or 0 */
};

static bool p_seen(void *arg)
{
	const struct seen *w = arg;
	int a, b;
	query_leader(&a, &b);
	bool ok_a = w->a == -3 ? (a == -1 || a == 0) : a == w->a;
	return ok_a && b == w->b;
}

static void test_prometheus_sees_the_handover(void)
{
	const char *prometheus = find_tool("prometheus"), *promtool = find_tool("promtool");
	if (!prometheus || !promtool) {
		printf("SKIP: prometheus/promtool not installed (./quickstart installs the "
		       "Debian package prometheus)\n");
		exit(77);
	}
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	start(&A, PA);
	obs_wait_leader(g_obs, "a", 15000);
	start(&B, PB);
	obs_wait_members(g_obs, 2, 15000);
	lint(PA, promtool);
	lint(PB, promtool);

	start_prometheus(prometheus);
	struct seen a_leads = {1, 0};
	tu_wait(&T, p_seen, &a_leads, 30000, "Prometheus: a leads, b does not");

	host_signal(&A, SIGTERM);
	obs_wait_leader(g_obs, "b", 15000);
	CHECK_OK(host_wait(&A, 20000));
	struct seen b_leads = {-3, 1};
	tu_wait(&T, p_seen, &b_leads, 30000, "Prometheus: b leads, a is gone");
	lint(PB, promtool);
	/* b saw the leader change from a to itself and won one term */
	struct http_reply r;
	CHECK_INT_EQ(http_request(PB, NULL, "/metrics", 5000, &r), 200);
	double changes = -1, terms = -1;
	CHECK_OK(http_metric(r.body, "leasehold_leader_changes_total{plugin=\"reconciler\"}", &changes));
	CHECK_OK(http_metric(r.body, "leasehold_terms_won_total{plugin=\"reconciler\"}", &terms));
	http_reply_free(&r);
	CHECK(changes == 1);
	CHECK(terms == 1);
}

int main(void)
{
	CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == 0);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	snprintf(g_dir, sizeof(g_dir), "%s", harness_dir(g_etcd));
	harness_at_fatal_signal(kill_prometheus);
	atexit(kill_prometheus_at_exit);
	g_obs = obs_new(&T, PFX, "reconciler", REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&A, g_dir, "a");
	host_setup(&B, g_dir, "b");
	int ports[3];
	CHECK_OK(harness_free_ports(ports, 3));
	PA = ports[0];
	PB = ports[1];
	PP = ports[2];
	CHECK(PA > 0 && PB > 0 && PP > 0 && PA != PB && PB != PP && PA != PP);

	RUN(test_prometheus_sees_the_handover);

	obs_free(g_obs);
	tu_fini(&T);
	curl_global_cleanup();
	return CHECK_EXIT();
}
