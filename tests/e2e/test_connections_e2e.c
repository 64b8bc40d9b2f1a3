/* SPDX-License-Identifier: MIT */
/*
 * test_connections_e2e - a host's connections to etcd do not grow with its
 * plugins: one real `leasehold` runs 20 plugins, each leading with a watch
 * of its own beside its election's, and holds at most 3 established TCP
 * connections to the etcd member (the watch stream and the calls' two,
 * ETCD_MAX_HOST_CONNECTIONS), sampled from /proc while the plugins start and
 * lead and once they all do; etcd's own metrics show its one watch stream
 * carrying every watch, and that the stream stays while nothing happens:
 * an idle host neither reopens it nor opens connections (observed for
 * IDLE_MS; a stream reopened every 2 s while idle was a bug here).
 *
 * The 20 plugins are the watcher test plugin under 20 names: a plugin's
 * name is its descriptor's, so each copy has the name "watcher" replaced by
 * "watch01".."watch20" (same length) in its bytes; each is a real .so,
 * loaded by dlopen like any other.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "testutil.h"

#define N_PLUGINS 20
#define MAX_CONNS 3
#define IDLE_MS 5000

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A;

/* a copy of watcher.so named `name` (7 bytes, as "watcher") at path */
static void named_copy(const char *name, const char *path)
{
	FILE *f = fopen(built_test_plugin("watcher"), "rb");
	CHECK(f);
	CHECK_OK(fseek(f, 0, SEEK_END));
	long n = ftell(f);
	CHECK(n > 0);
	rewind(f);
	char *b = malloc((size_t)n);
	CHECK(b);
	CHECK_INT_EQ(fread(b, 1, (size_t)n, f), n);
	fclose(f);
	static const char from[] = "\0watcher\0";
	size_t hits = 0;
	for (long i = 0; i + (long)sizeof(from) - 1 <= n; i++)
		if (memcmp(b + i, from, sizeof(from) - 1) == 0) {
			memcpy(b + i + 1, name, 7);
			hits++;
		}
	CHECK_INT_EQ(hits, 1); /* the descriptor's name, nothing else */
	f = fopen(path, "wb");
	CHECK(f);
	CHECK_INT_EQ(fwrite(b, 1, (size_t)n, f), n);
	CHECK_OK(fclose(f));
	free(b);
}

/* is_socket_of - inode is one of pid's open sockets */
static bool is_socket_of(pid_t pid, unsigned long inode)
{
	char dir[64], want[64], link[64], path[600];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l > 0) {
			link[l] = 0;
			found = strcmp(link, want) == 0;
		}
	}
	closedir(d);
	return found;
}

/* etcd_conns - pid's established TCP connections to 127.0.0.1:port */
static int etcd_conns(pid_t pid, int port)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	CHECK(f);
	char line[512];
	int n = 0;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned la, lp, ra, rp, st;
		unsigned long inode;
		if (sscanf(line, " %*d: %x:%x %x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &la, &lp, &ra,
			   &rp, &st, &inode) != 6)
			continue;
		if (st == 1 && (int)rp == port && ra == 0x0100007f && is_socket_of(pid, inode))
			n++;
	}
	fclose(f);
	return n;
}

static int g_port, g_max_seen;

static void sample(void)
{
	int n = etcd_conns(A.pid, g_port);
	if (n > g_max_seen)
		g_max_seen = n;
}

static bool p_leading(void *arg)
{
	const char *plugin = arg;
	char st[64];
	sample();
	return strcmp(host_plugin_state(&A, plugin, st, sizeof(st), NULL), "leading") == 0;
}

/* Watch streams etcd has started so far (its gRPC server's count) */
static double watch_streams_started(void)
{
	static const char *const series[] = {
	    "grpc_server_started_total{grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\","
	    "grpc_type=\"bidi_stream\"}"};
	double v;
	CHECK_OK(http_metrics_get(g_port, series, &v, 1));
	CHECK(v >= 1);
	return v;
}

/* the idle window: connections sampled throughout; true once it is over
 * or once etcd started another watch stream */
struct idle_window {
	uint64_t end_ns;
	double started;
};

static bool p_idle_over(void *arg)
{
	struct idle_window *w = arg;
	sample();
	return loop_now() >= w->end_ns || watch_streams_started() != w->started;
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	const char *url = harness_etcd_url(g_etcd, 0);
	const char *colon = strrchr(url, ':');
	CHECK(colon);
	g_port = atoi(colon + 1);
	host_setup(&A, harness_dir(g_etcd), "a");
	char names[N_PLUGINS][8];
	for (int i = 0; i < N_PLUGINS; i++) {
		char src[700], as[32];
		snprintf(names[i], sizeof(names[i]), "watch%02d", i + 1);
		snprintf(src, sizeof(src), "%s/%s.src", A.dir, names[i]);
		snprintf(as, sizeof(as), "%s.so", names[i]);
		named_copy(names[i], src);
		host_install_file(&A, src, as, 0755);
	}
	static const char *const args[] = {HOST_TEST_ARGS("/lhc"), NULL};
	static const char *const env[] = {"LH_WATCHER_PREFIX=in/", NULL};
	host_start_env(&A, harness_etcd_urls(g_etcd), args, env);
	host_wait_control(&A, 30000);
	for (int i = 0; i < N_PLUGINS; i++)
		tu_wait(&T, p_leading, names[i], 60000, "every plugin leading");
	sample();
	fprintf(stderr, "--- %d plugins lead; at most %d connections to etcd seen\n", N_PLUGINS,
		g_max_seen);
	if (g_max_seen > MAX_CONNS) {
		host_dump_log(&A);
		fprintf(stderr, "%d connections to etcd, at most %d expected\n", g_max_seen, MAX_CONNS);
		exit(1);
	}
	CHECK(g_max_seen >= 1);

	/* etcd's view: one watch stream (this test's client has none), and on
	 * it every plugin's watch and every election's, beside the host's own */
	static const char *const series[] = {"etcd_debugging_mvcc_watch_stream_total",
					     "etcd_debugging_mvcc_watcher_total"};
	double v[2];
	CHECK_OK(http_metrics_get(g_port, series, v, 2));
	fprintf(stderr, "--- etcd: %.0f watch streams, %.0f watchers\n", v[0], v[1]);
	CHECK(v[0] == 1);
	CHECK(v[1] >= 2 * N_PLUGINS);

	struct idle_window w = {loop_now() + (uint64_t)IDLE_MS * LOOP_NS_PER_MS,
				watch_streams_started()};
	tu_wait(&T, p_idle_over, &w, IDLE_MS + 10000, "the idle window");
	double started = watch_streams_started();
	fprintf(stderr, "--- idle %d ms: %.0f watch stream(s) started meanwhile, at most %d connections\n",
		IDLE_MS, started - w.started, g_max_seen);
	CHECK(started == w.started);
	CHECK(g_max_seen <= MAX_CONNS);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 30000));
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
