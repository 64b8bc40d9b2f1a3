/* SPDX-License-Identifier: MIT */
/*
 * test_keyed_e2e.c - what an operator sees of a keyed plugin's work queue
 * (ABI 1.3 reconcile_key), on a real host running the keyed test plugin
 * (tests/plugins/keyed.c): 200 inputs become 200 outputs; a key that fails
 * three times shows in `plugins -o json`'s "queue" (failed, then done) and
 * in the metrics (leasehold_plugin_key_*), and the queue drains to depth 0;
 * a plugin that is not keyed has "queue": null. The behaviour of the queue
 * itself (retries, requeue-after, key_of, failover) is
 * tests/kit/keyed.lhtest's.
 */
#include "config.h"

#include <inttypes.h>
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

#define PFX "/lhkeyed"
#define DATA PFX "/keyed/data/"
#define N_INPUTS 200

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A;
static int g_port;

static bool outputs_all_done(void *arg)
{
	(void)arg;
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, DATA "out/", &kvs), ok = 0;
	for (size_t i = 0; i < n; i++)
		ok += kvs[i]->value_len > 5 && memcmp(kvs[i]->value, "done:", 5) == 0;
	tu_list_free(kvs, n);
	return ok == N_INPUTS + 1;
}

/* the queue drained, with what it did */
static bool queue_settled(struct json_object *p, const void *arg)
{
	(void)arg;
	struct json_object *q = p ? jget(p, "queue") : NULL;
	return q && json_object_get_int64(jget(q, "depth")) == 0 &&
	       json_object_get_int64(jget(q, "done")) >= N_INPUTS + 1 &&
	       json_object_get_int64(jget(q, "failed")) >= 3;
}

static double metric(const char *body, const char *series)
{
	double v = -1;
	CHECK_OK(http_metric(body, series, &v));
	return v;
}

static bool metrics_settled(void *arg)
{
	(void)arg;
	static const char *const series[] = {"leasehold_plugin_key_queue_depth{plugin=\"keyed\"}",
	                                     "leasehold_plugin_key_reconciles_total{plugin=\"keyed\"}"};
	double v[2];
	http_metrics_get(g_port, series, v, 2);
	return v[0] == 0 && v[1] >= N_INPUTS + 1;
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	CHECK_OK(harness_free_ports(&g_port, 1));
	char addr[32];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", g_port);
	host_setup(&A, harness_dir(g_etcd), "a");
	char so[600];
	snprintf(so, sizeof(so), "%s/tests/plugins/.libs/keyed.so", getenv("LH_BUILDDIR"));
	host_install_file(&A, so, "keyed.so", 0644);
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	const char *args[] = {HOST_TEST_ARGS(PFX), "--http", addr, NULL};
	host_start(&A, harness_etcd_urls(g_etcd), args);

	char key[128], val[64];
	for (int i = 0; i < N_INPUTS; i++) {
		snprintf(key, sizeof(key), DATA "in/k%03d", i);
		snprintf(val, sizeof(val), "v%d", i);
		tu_put(&T, key, val, strlen(val));
	}
	tu_put(&T, DATA "in/bad", "fail:3:b", 8);
	tu_wait(&T, outputs_all_done, NULL, 60000, "every input reflected in its output");
	struct json_object *p = ctl_wait_plugin(&A, "keyed", queue_settled, NULL, 20000,
						"the queue to drain, 3 failures counted");
	struct json_object *q = jget(p, "queue");
	fprintf(stderr, "queue: %s\n", json_object_to_json_string(q));
	CHECK_INT_EQ(json_object_get_int64(jget(q, "waiting")), 0);
	json_object_put(p);
	p = ctl_plugin_json(&A, "reconciler");
	CHECK(p && json_object_is_type(json_object_object_get(p, "queue"), json_type_null));
	json_object_put(p);

	/* the metrics are published at most a second after a change */
	tu_wait(&T, metrics_settled, NULL, 10000, "the metrics to show the drained queue");
	struct http_reply rep;
	CHECK_INT_EQ(http_request(g_port, "GET", "/metrics", 5000, &rep), 200);
	CHECK(metric(rep.body, "leasehold_plugin_key_queue_depth{plugin=\"keyed\"}") == 0);
	CHECK(metric(rep.body, "leasehold_plugin_key_queue_oldest_seconds{plugin=\"keyed\"}") == 0);
	CHECK(metric(rep.body, "leasehold_plugin_key_reconcile_failures_total{plugin=\"keyed\"}") >= 3);
	CHECK(strstr(rep.body, "leasehold_plugin_key_queue_depth{plugin=\"reconciler\"}") == NULL);
	http_reply_free(&rep);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
