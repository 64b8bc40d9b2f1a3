/* SPDX-License-Identifier: MIT */
/*
 * test_faults_etcd_log - what a host's log says about etcd, read line by
 * line from a real host against a real etcd:
 *  - on every start (no systemd here) the host logs `synced with etcd:
 *    ready` once;
 *  - an etcd outage of several retry periods logs one line when it starts
 *    (`etcd unreachable`), the session's one line of the lease lost, and no
 *    other warning (the retries of the session, the election, the roles and
 *    the configuration are debug lines); once etcd is back, one line says
 *    it answers again and one that the host synced again;
 *  - a host stopped before it ever got a lease does not log `lease
 *    revoked`; one that held a lease does, once.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "testutil.h"

#define PFX "/lhlog"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct host A, B;

/* debug level, so that the retries are in the log to be counted (and to
 * be shown not to be warnings) */
static const char *const ARGS[] = {"--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0",
				   "--log-level", "debug", NULL};

/* the warning lines of h's log from byte from on, counted; printed */
static size_t warnings_since(const struct host *h, long from)
{
	char *s = host_log_since(h, from);
	size_t n = 0;
	for (char *l = s; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		if (strstr(l, " WARN ") || strstr(l, " ERROR ")) {
			fprintf(stderr, "  warning: %s\n", l);
			n++;
		}
		l = nl ? nl + 1 : NULL;
	}
	free(s);
	return n;
}

static void test_start_logs_synced(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), ARGS);
	host_wait_log(&T, &A, 0, "synced with etcd: ready", 1, 15000);
	host_wait_state(&A, "reconciler", "leading", true, 10000);
	CHECK_INT_EQ(host_log_count(&A, 0, "synced with etcd"), 1);
}

static void test_outage_logs_its_start_and_end_once(void)
{
	long from = host_log_size(&A);
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	host_wait_log(&T, &A, from, "etcd unreachable", 1, 10000);
	host_wait_log(&T, &A, from, " lost: ", 1, 10000);
	/* several retries of the grant (backoff up to 2 s/3 with --ttl 2) */
	host_wait_log(&T, &A, from, "lease grant failed", 5, 20000);
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	host_wait_log(&T, &A, from, "etcd reachable again after", 1, 20000);
	host_wait_log(&T, &A, from, "synced with etcd again after", 1, 20000);
	host_wait_state(&A, "reconciler", "leading", true, 15000);

	size_t told = host_log_count(&A, from, "etcd unreachable"),
	       still = host_log_count(&A, from, "etcd still unreachable"), /* under a minute */
	       again = host_log_count(&A, from, "etcd reachable again after"),
	       synced = host_log_count(&A, from, "synced with etcd");
	if (told != 1 || still != 0 || again != 1 || synced != 1)
		host_dump_log(&A);
	CHECK_INT_EQ(told, 1);
	CHECK_INT_EQ(still, 0);
	CHECK_INT_EQ(again, 1);
	CHECK_INT_EQ(synced, 1);
	fprintf(stderr, "warnings while etcd was down:\n");
	/* the outage's line and the session's lease lost: nothing else */
	CHECK_INT_EQ(warnings_since(&A, from), 2);
}

static void test_no_lease_revoked_without_a_lease(void)
{
	long from = host_log_size(&A);
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(host_log_count(&A, from, "lease revoked"), 1);

	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	host_wait_log(&T, &B, 0, "lease grant failed", 1, 15000);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(host_log_count(&B, 0, "granted"), 0);
	CHECK_INT_EQ(host_log_count(&B, 0, "lease revoked"), 0);
	CHECK_INT_EQ(host_log_count(&B, 0, "synced with etcd"), 0);
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_start_logs_synced);
	RUN(test_outage_logs_its_start_and_end_once);
	RUN(test_no_lease_revoked_without_a_lease);

	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
