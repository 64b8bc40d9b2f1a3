/* SPDX-License-Identifier: MIT */
/*
 * test_faults_etcd - etcd itself goes away (single member).
 *
 * - etcd restart (graceful stop + start, data kept): leadership survives or
 *   is re-established; exactly one host leads afterwards, reconciles go on.
 * - etcd stopped for longer than the TTL: every host drops leadership by its
 *   LOCAL deadline (leaseholdctl, answered by the daemon without etcd, shows
 *   no host leading within TTL - margin + slack of the stop, and keeps
 *   showing it while etcd is down); after etcd is back everyone recovers and
 *   exactly one leads.
 * Each ends with the invariant checker over the whole etcd history.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PFX "/lhf"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct jwatch *g_jw;
static struct host A, B;

static const char *const HOST_ARGS[] = {
    "--prefix", PFX,	       "--ttl", "2", "--reconcile-wait", "0", "--reconcile-interval",
    "300ms",	"--log-level", "debug", NULL};

static struct host *by_node(const char *n)
{
	return strcmp(n, A.node) == 0 ? &A : &B;
}

static void check_invariants(void)
{
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
}

static uint64_t ms_since(uint64_t t0)
{
	return (loop_now() - t0) / LOOP_NS_PER_MS;
}

/* exactly one host says it leads, and it is the one etcd shows; returns it */
static struct host *wait_exactly_one_leader(int timeout_ms)
{
	uint64_t t0 = loop_now();
	for (;;) {
		char sa[32], sb[32], sa2[32];
		host_plugin_state(&A, PLUGIN, sa, sizeof(sa), NULL);
		host_plugin_state(&B, PLUGIN, sb, sizeof(sb), NULL);
		host_plugin_state(&A, PLUGIN, sa2, sizeof(sa2), NULL);
		bool la = strcmp(sa, "leading") == 0, lb = strcmp(sb, "leading") == 0;
		/* never two at once: a said "leading" before and after b did */
		CHECK(!(la && lb && strcmp(sa2, "leading") == 0));
		bool stable = la == (strcmp(sa2, "leading") == 0); /* else: look again */
		const char *ol = obs_leader(g_obs);
		if (stable && la != lb && ol && strcmp(ol, la ? "a" : "b") == 0)
			return la ? &A : &B;
		if (ms_since(t0) > (uint64_t)timeout_ms) {
			fprintf(stderr, "no single leader after %d ms: a %s, b %s, etcd says %s\n",
				timeout_ms, sa, sb, ol ? ol : "(none)");
			hosts_dump_logs();
			exit(1);
		}
		loop_run_once(T.loop, 50); /* the observer's watch; CLI has no events */
	}
}

static void test_start_two_hosts(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), HOST_ARGS);
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(g_etcd), HOST_ARGS);
	obs_wait_members(g_obs, 2, 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	jwatch_wait(g_jw, "a", 1, 10000, "a reconciles");
	wait_exactly_one_leader(5000);
}

static void test_etcd_restart_keeps_one_leader(void)
{
	struct host *L = by_node(obs_leader(g_obs));
	char st[32];
	int64_t tok_before, tok_after;
	host_plugin_state(L, PLUGIN, st, sizeof(st), &tok_before);
	CHECK_STR_EQ(st, "leading");
	uint64_t t0 = loop_now();
	CHECK_OK(harness_etcd_stop(g_etcd, 0));
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	fprintf(stderr, "etcd restart took %" PRIu64 " ms\n", ms_since(t0));
	size_t before = jwatch_count(g_jw, NULL, 0);
	struct host *N = wait_exactly_one_leader(10000);
	jwatch_wait(g_jw, N->node, jwatch_count(g_jw, N->node, 0) + 2, 10000,
		    "reconciles after the etcd restart");
	CHECK(jwatch_count(g_jw, NULL, 0) >= before + 2);
	host_plugin_state(N, PLUGIN, st, sizeof(st), &tok_after);
	fprintf(stderr,
		"after the etcd restart: %s leads (%s, token %" PRId64 " -> %" PRId64 "), %" PRIu64
		" ms after the stop\n",
		N->node, N == L && tok_after == tok_before ? "leadership survived" : "re-elected",
		tok_before, tok_after, ms_since(t0));
	check_invariants();
}

static void test_etcd_down_longer_than_ttl(void)
{
	struct host *L = wait_exactly_one_leader(5000), *O = L == &A ? &B : &A;
	long mark_l = host_log_size(L);
	char st[32];
	CHECK_OK(harness_etcd_kill(g_etcd, 0));
	uint64_t t0 = loop_now();
	long wall0 = wall_ms_of_day();
	/* the CLI, answered by the daemon without etcd, stops saying "leading" */
	host_wait_state(L, PLUGIN, "leading", false, 5000);
	fprintf(stderr,
		"etcd down: the CLI of %s stopped saying leading %" PRIu64 " ms after the kill\n",
		L->node, ms_since(t0));
	/* ttl 2 s, margin 0.4 s: no keepalive is acked after the kill, so
	 * safe_until <= kill + 1.6 s; the daemon's own log line says when it
	 * dropped (plus its loop latency, ASan) and why: the local deadline */
	long dropped = host_log_ms_after(L, mark_l, "lost leadership", wall0);
	long deadline = host_log_ms_after(L, mark_l, "local deadline passed", wall0);
	fprintf(stderr,
		"etcd down: %s's log: local deadline %ld ms, lost leadership %ld ms after "
		"the kill\n",
		L->node, deadline, dropped);
	CHECK(deadline != LONG_MIN && dropped != LONG_MIN);
	CHECK(dropped >= 0 && dropped <= 1600 + 400);
	CHECK(deadline <= dropped);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(L, &o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "state:") && !strstr(o.out, "leading\n"));
	fprintf(stderr, "etcd down: leaseholdctl status on %s says %.*s\n", L->node,
		(int)strcspn(strstr(o.out, "state:"), "\n"), strstr(o.out, "state:"));
	ctl_out_free(&o);
	/* while etcd stays down (past 2 TTLs) nobody claims to lead */
	while (ms_since(t0) < 4500) {
		CHECK(strcmp(host_plugin_state(&A, PLUGIN, st, sizeof(st), NULL), "leading") != 0);
		CHECK(strcmp(host_plugin_state(&B, PLUGIN, st, sizeof(st), NULL), "leading") != 0);
		loop_run_once(T.loop, 100);
	}
	CHECK(host_alive(&A) && host_alive(&B));
	(void)O;
	/* back: everyone recovers, exactly one leads and reconciles */
	uint64_t t1 = loop_now();
	CHECK_OK(harness_etcd_restart(g_etcd, 0));
	struct host *N = wait_exactly_one_leader(15000);
	jwatch_wait(g_jw, N->node, jwatch_count(g_jw, N->node, 0) + 2, 10000,
		    "reconciles after etcd came back");
	obs_wait_members(g_obs, 2, 10000);
	fprintf(stderr, "etcd back: %s leads %" PRIu64 " ms after the restart began\n", N->node,
		ms_since(t1));
	host_wait_state(N == &A ? &B : &A, PLUGIN, "campaigning", true, 10000);
	check_invariants();
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	g_obs = obs_new(&T, PFX, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	g_jw = jwatch_new(&T, PFX, PLUGIN, 1);
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_start_two_hosts);
	RUN(test_etcd_restart_keeps_one_leader);
	RUN(test_etcd_down_longer_than_ttl);

	host_signal(&A, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(B.exit_status, 0);
	jwatch_free(g_jw);
	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
