/* SPDX-License-Identifier: MIT */
/*
 * test_isolation_e2e - `leasehold --isolation process` with real daemons, a
 * real etcd and the example plugin:
 *  - the plugin runs in a leasehold-worker child, not in the daemon;
 *  - SIGKILL of the leader's worker: that host gives up leadership at once
 *    (the other host leads long before any TTL), shows the plugin failed
 *    with the reason, keeps its lease, and the worker comes back by itself;
 *  - --callback-timeout: a reconcile slower than the limit is killed and
 *    reported, the other host takes over.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "e2e_fixture.h"

#define PFX "/lhiso"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;

static char g_worker[1024];

static const char *const *args(void)
{
	static const char *a[] = {"--prefix", PFX, "--ttl", "10", "--reconcile-wait", "0",
	                          "--reconcile-interval", "1h", "--isolation", "process",
	                          "--worker", g_worker, "--log-level", "debug", NULL};
	return a;
}

static struct host *g_h;
static bool p_worker(void *a)
{
	(void)a;
	return host_worker_pid(g_h->pid) != 0;
}

static const char *g_state;
static bool p_state(void *a)
{
	(void)a;
	struct ctl_out o;
	host_ctl(g_h, &o, "status", PLUGIN, NULL);
	bool ok = o.status == 0 && strstr(o.out, g_state) != NULL;
	ctl_out_free(&o);
	return ok;
}

static bool p_json_failed(void *a)
{
	(void)a;
	struct ctl_out o;
	host_ctl(g_h, &o, "plugins", "--json", NULL);
	bool ok = o.status == 0 && strstr(o.out, "\"state\": \"failed\"") != NULL &&
	          strstr(o.out, "plugin worker failed") != NULL;
	ctl_out_free(&o);
	return ok;
}

static void wait_state(struct host *h, const char *text, int ms, const char *what)
{
	g_h = h;
	g_state = text;
	tu_wait(&T, p_state, NULL, ms, what);
}

static void test_plugin_runs_in_a_worker_process(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), args());
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(g_etcd), args());
	obs_wait_members(g_obs, 2, 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	g_h = &A;
	tu_wait(&T, p_worker, NULL, 5000, "a's worker process");
	g_h = &B;
	tu_wait(&T, p_worker, NULL, 5000, "b's worker process");
}

static void test_per_plugin_isolation_flag(void)
{
	/* a third host: thread isolation by default, process for "reconciler" */
	static struct host C;
	host_setup(&C, harness_dir(g_etcd), "c");
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	static const char *a[] = {"--prefix", PFX, "--ttl", "10", "--isolation", "thread",
	                          "--plugin-isolation", "reconciler=process", "--worker", g_worker,
	                          NULL};
	host_start(&C, harness_etcd_urls(g_etcd), a);
	obs_wait_members(g_obs, 3, 15000);
	g_h = &C;
	tu_wait(&T, p_worker, NULL, 5000, "c runs reconciler in a worker process");
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 10000));
	CHECK_INT_EQ(C.exit_status, 0);
	/* an ordinary stop keeps c's member record; c is gone for good here,
	 * so it is forgotten */
	tu_del(&T, PFX "/" PLUGIN "/members/c");
	obs_wait_members(g_obs, 2, 10000);
}

static void test_worker_crash_deposes_at_once_and_recovers(void)
{
	pid_t w = host_worker_pid(A.pid);
	CHECK(w > 0);
	uint64_t t0 = loop_now();
	CHECK(kill(w, SIGKILL) == 0);
	/* leadership moves without waiting for a's 10 s lease: a gave it up */
	obs_wait_leader(g_obs, "b", 3000);
	fprintf(stderr, "leader after the worker crash: b in %llu ms\n",
	        (unsigned long long)((loop_now() - t0) / LOOP_NS_PER_MS));
	/* a is alive, keeps its lease, and its worker comes back */
	CHECK(kill(A.pid, 0) == 0);
	g_h = &A;
	tu_wait(&T, p_worker, NULL, 10000, "a's worker restarted");
	CHECK(host_worker_pid(A.pid) != w);
	wait_state(&A, "state:         campaigning", 10000, "a campaigns again after recovery");
	obs_wait_members(g_obs, 2, 10000);
}

static void test_callback_timeout_kills_a_slow_reconcile(void)
{
	/* restart b with a reconcile that takes 3 s and a 300 ms callback limit */
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 10000));
	CHECK_INT_EQ(B.exit_status, 0);
	obs_wait_leader(g_obs, "a", 5000);
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 10000));
	static const char *env[] = {"LH_EXAMPLE_DELAY_MS=3000", NULL};
	const char *const *base = args();
	const char *a2[32];
	size_t k = 0;
	for (; base[k]; k++)
		a2[k] = base[k];
	a2[k++] = "--callback-timeout";
	a2[k++] = "300ms";
	/* each "failed" window (kill -> restart) lasts at least 2 s, so a poll
	 * of the CLI catches it however loaded the machine is */
	a2[k++] = "--worker-restart";
	a2[k++] = "2s,4s";
	a2[k] = NULL;
	host_start_env(&A, harness_etcd_urls(g_etcd), a2, env);
	wait_state(&A, "exceeded", 15000, "a reports the callback timeout");
	/* the plugin is "failed" from each kill until its worker is back: a
	 * window, so wait for it rather than look once */
	g_h = &A;
	tu_wait(&T, p_json_failed, NULL, 15000, "a lists the plugin as failed");
	/* b (no delay) takes over while a keeps failing */
	host_start(&B, harness_etcd_urls(g_etcd), args());
	obs_wait_leader(g_obs, "b", 15000);
	CHECK(kill(A.pid, 0) == 0);
}

int main(void)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(g_worker, sizeof(g_worker), "%s/leasehold-worker", b && *b ? b : ".");
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_plugin_runs_in_a_worker_process);
	RUN(test_per_plugin_isolation_flag);
	RUN(test_worker_crash_deposes_at_once_and_recovers);
	RUN(test_callback_timeout_kills_a_slow_reconcile);

	host_signal(&A, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(B.exit_status, 0);
	e2e_stop(g_etcd, &T, g_obs);
	return CHECK_EXIT();
}
