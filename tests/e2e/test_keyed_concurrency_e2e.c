/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_concurrency_e2e.c - a keyed plugin that declares
 * key_concurrency 4 (tests/plugins/keyed.c built as keyed4: each key held
 * a while, what it saw of the other keys in flight written to
 * seen/<name>), on a real host, in process and in thread isolation: keys
 * run beside each other (the plugin saw more than one and never more than
 * 4 in flight), never one key twice at once, inputs changed while their
 * keys ran converge to the newest value, the queue shows its concurrency
 * and running count in `plugins -o json` and the metrics, and a stop while
 * keys run ends cleanly (on_deposed and fini wait for them: the worker
 * refused nothing).
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "testutil.h"

#define N_INPUTS 120
#define N_CHANGED 30 /* inputs put again right away, while keys run */

static struct harness_etcd *g_etcd;
static struct tu T;
static char g_data[128]; /* the plugin's data prefix of the current run */

/* every output is "done:" the newest value of its input */
static bool outputs_converged(void *arg)
{
	(void)arg;
	char pfx[160];
	snprintf(pfx, sizeof(pfx), "%sout/", g_data);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, pfx, &kvs), ok = 0;
	for (size_t i = 0; i < n; i++) {
		int k = atoi((const char *)kvs[i]->key + strlen(pfx) + 1);
		char want[32];
		snprintf(want, sizeof(want), "done:%c%d", k < N_CHANGED ? 'w' : 'v', k);
		ok += kvs[i]->value_len == strlen(want) &&
		      memcmp(kvs[i]->value, want, kvs[i]->value_len) == 0;
	}
	tu_list_free(kvs, n);
	return ok == N_INPUTS;
}

static bool queue_drained(struct json_object *p, const void *arg)
{
	(void)arg;
	struct json_object *q = p ? jget(p, "queue") : NULL;
	return q && json_object_get_int64(jget(q, "depth")) == 0 &&
	       json_object_get_int64(jget(q, "running")) == 0 &&
	       json_object_get_int64(jget(q, "done")) >= N_INPUTS;
}

static bool keys_running(struct json_object *p, const void *arg)
{
	(void)arg;
	struct json_object *q = p ? jget(p, "queue") : NULL;
	return q && json_object_get_int64(jget(q, "running")) >= 2;
}

/* what the plugin saw: the most keys in flight, and whether a key was ever
 * in flight twice; every input was seen */
static void check_seen(void)
{
	char pfx[160];
	snprintf(pfx, sizeof(pfx), "%sseen/", g_data);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, pfx, &kvs);
	unsigned most = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned max_n = 0;
		int twice = -1;
		char v[32];
		snprintf(v, sizeof(v), "%.*s", (int)kvs[i]->value_len, (const char *)kvs[i]->value);
		CHECK_INT_EQ(sscanf(v, "%u %d", &max_n, &twice), 2);
		CHECK_INT_EQ(twice, 0); /* never one key twice at once */
		if (max_n > most)
			most = max_n;
	}
	tu_list_free(kvs, n);
	CHECK_INT_EQ(n, N_INPUTS);
	fprintf(stderr, "most keys in flight at once: %u\n", most);
	CHECK(most > 1);  /* they ran beside each other */
	CHECK(most <= 4); /* never more than declared */
}

/* the metrics show the concurrency and nothing running (they are
 * published at most a second after a change) */
static bool metrics_settled(void *arg)
{
	static const char *const series[] = {"leasehold_plugin_key_concurrency{plugin=\"keyed4\"}",
	                                     "leasehold_plugin_key_running{plugin=\"keyed4\"}"};
	double v[2];
	http_metrics_get(*(const int *)arg, series, v, 2);
	return v[0] == 4 && v[1] == 0;
}

static void run(const char *isolation)
{
	struct host A;
	char node[32], pfx[64], key[200], val[32], addr[32];
	int port;
	fprintf(stderr, "--- %s isolation\n", isolation);
	snprintf(node, sizeof(node), "a-%s", isolation);
	snprintf(pfx, sizeof(pfx), "/lhkc-%s", isolation);
	snprintf(g_data, sizeof(g_data), "%s/keyed4/data/", pfx);
	CHECK_OK(harness_free_ports(&port, 1));
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	host_setup(&A, harness_dir(g_etcd), node);
	char so[600];
	snprintf(so, sizeof(so), "%s/tests/plugins/.libs/keyed4.so", getenv("LH_BUILDDIR"));
	host_install_file(&A, so, "keyed4.so", 0644);
	const char *args[] = {"--prefix", pfx, "--ttl", "2", "--reconcile-wait", "0",
	                      "--reconcile-interval", "1h", "--isolation", isolation,
	                      "--http", addr, NULL};
	host_start(&A, harness_etcd_urls(g_etcd), args);

	for (int i = 0; i < N_INPUTS; i++) {
		snprintf(key, sizeof(key), "%sin/k%03d", g_data, i);
		snprintf(val, sizeof(val), "v%d", i);
		tu_put(&T, key, val, strlen(val));
	}
	for (int i = 0; i < N_CHANGED; i++) { /* their keys are queued or running */
		snprintf(key, sizeof(key), "%sin/k%03d", g_data, i);
		snprintf(val, sizeof(val), "w%d", i);
		tu_put(&T, key, val, strlen(val));
	}
	tu_wait(&T, outputs_converged, NULL, 60000, "every output done: its input's newest value");
	struct json_object *p = ctl_wait_plugin(&A, "keyed4", queue_drained, NULL, 20000,
	                                        "the queue to drain, nothing running");
	struct json_object *q = jget(p, "queue");
	fprintf(stderr, "queue: %s\n", json_object_to_json_string(q));
	CHECK_INT_EQ(json_object_get_int64(jget(q, "concurrency")), 4);
	json_object_put(p);
	check_seen();
	tu_wait(&T, metrics_settled, &port, 10000, "the metrics: concurrency 4, none running");

	/* a stop while keys run: slow keys (300 ms each), more queued */
	for (int i = 0; i < 16; i++) {
		snprintf(key, sizeof(key), "%sin/k%03d", g_data, i);
		snprintf(val, sizeof(val), "slow:%d", i);
		tu_put(&T, key, val, strlen(val));
	}
	json_object_put(ctl_wait_plugin(&A, "keyed4", keys_running, NULL, 20000,
	                                "slow keys running beside each other"));
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(host_log_count(&A, 0, "refused by the worker"), 0);
	CHECK_INT_EQ(host_log_count(&A, 0, "worker rejected a bus message"), 0);
	check_seen(); /* the keys cut short by the stop included */
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	run("process");
	run("thread");
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
