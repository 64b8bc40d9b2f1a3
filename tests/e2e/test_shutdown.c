/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown - how a host leaves on SIGTERM, with real daemons, a real
 * etcd and two plugins per host ("reconciler", the example plugin, and
 * "good", a minimal one):
 *  - every election drains, then deletes its election key, except the last
 *    one to stop, which leaves it to the lease revocation (a host with one
 *    plugin leaves by that one write); the member records stay (an ordinary
 *    shutdown is not leaving the membership: the node counts with its
 *    release while it is down);
 *  - a plugin that drains slowly (a reconcile that does not finish) does not
 *    hold back the other plugin's handover: "good" moves to the other host
 *    while the slow host still runs, long before its --shutdown-timeout;
 *  - a second SIGTERM exits at once, leaving a plugin thread stuck in a
 *    callback behind instead of waiting for it;
 *  - with --exit-linger, the lease is revoked while the host stays up, idle,
 *    until the linger ends; a second SIGTERM then ends it with status 0.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "testutil.h"

#define PFX "/lhsd"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_rec, *g_good;
static struct host A, B;

/* thread isolation: test_slow_drain_does_not_hold_back_the_other_plugin
 * checks that a thread stuck in a callback is left behind at exit */
static const char *const ARGS[] = {HOST_TEST_ARGS(PFX),
				   "--shutdown-timeout",
				   "20s",
				   "--isolation",
				   "thread",
				   "--log-level",
				   "debug",
				   NULL};

static void install_both(struct host *h)
{
	host_install_plugin(h, "1.0.0", "reconciler.so");
	host_install_file(h, built_test_plugin("good"), "good.so", 0644);
}

static size_t keys_of_lease(int64_t lease)
{
	return tu_keys_of_lease(&T, PFX "/", lease);
}

static bool p_two_keys_of_lease(void *arg)
{
	return keys_of_lease(*(int64_t *)arg) == 2;
}

static int64_t election_lease(const char *plugin, const char *node)
{
	return tu_election_lease(&T, PFX, plugin, node);
}

/* whether node's member record of plugin exists, and bound to no lease */
static bool member_persists(const char *plugin, const char *node)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/%s/members/%s", plugin, node);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, key, &kvs);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->key_len == strlen(key) && kvs[i]->lease == 0)
			found = true;
	tu_list_free(kvs, n);
	return found;
}

static bool p_campaigns(void *arg)
{
	const char *const *pn = arg; /* {plugin, node} */
	return election_lease(pn[0], pn[1]) != 0;
}

static void wait_campaigns(const char *plugin, const char *node)
{
	const char *pn[2] = {plugin, node};
	tu_wait(&T, p_campaigns, pn, 15000, "the node campaigns");
}

static void test_single_plugin_leaves_by_one_revocation(void)
{
	/* a runs "good" only: on SIGTERM it drains, then its one revocation
	 * deletes the election key and the member record */
	host_install_file(&A, built_test_plugin("good"), "good.so", 0644);
	install_both(&B);
	host_start(&A, harness_etcd_urls(g_etcd), ARGS);
	obs_wait_leader(g_good, "a", 15000);
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	obs_wait_members(g_good, 2, 15000);
	obs_wait_leader(g_rec, "b", 15000);
	int64_t lease = election_lease("good", "a");
	CHECK(lease != 0);
	/* the election key and the node state record (P/N/nodes/a) */
	tu_wait(&T, p_two_keys_of_lease, &lease, 15000, "a's election key and state record");
	CHECK(member_persists("good", "a"));

	long from = host_log_size(&A);
	host_signal(&A, SIGTERM);
	obs_wait_leader(g_good, "b", 5000);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(keys_of_lease(lease), 0);
	/* not leaving for good: a keeps counting with its release */
	CHECK(member_persists("good", "a"));
	CHECK_INT_EQ(obs_members(g_good), 2);
	CHECK_INT_EQ(host_log_count(&A, from, "leaving our election key to the lease revocation"), 1);
	CHECK_INT_EQ(host_log_count(&A, from, "lease revoked"), 1);
	/* a runs both plugins from now on */
	host_install_plugin(&A, "1.0.0", "reconciler.so");
}

static void test_slow_drain_does_not_hold_back_the_other_plugin(void)
{
	/* b leads both; a comes back with a reconcile that never finishes in
	 * time, and takes both over when b leaves (b's two elections stop
	 * together: each resigns, or the last leaves its keys to the revocation) */
	static const char *slow[] = {"LH_EXAMPLE_DELAY_MS=600000", NULL};
	host_start_env(&A, harness_etcd_urls(g_etcd), ARGS, slow);
	wait_campaigns("reconciler", "a");
	wait_campaigns("good", "a");
	int64_t lease_b = election_lease("good", "b");
	CHECK(lease_b != 0);
	host_signal(&B, SIGTERM);
	obs_wait_leader(g_rec, "a", 5000);
	obs_wait_leader(g_good, "a", 5000);
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(B.exit_status, 0);
	CHECK_INT_EQ(keys_of_lease(lease_b), 0);
	/* a is now stuck in the reconciler's first reconcile */
	host_wait_state(&A, "reconciler", "leading", true, 5000);
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	wait_campaigns("good", "b");
	wait_campaigns("reconciler", "b");

	/* SIGTERM a: "reconciler" cannot drain (its reconcile runs for 10
	 * minutes; --shutdown-timeout is 20 s), "good" hands over at once */
	long from = host_log_size(&A);
	host_signal(&A, SIGTERM);
	obs_wait_leader(g_good, "b", 10000);
	CHECK(host_alive(&A));
	const char *l = obs_leader(g_rec);
	CHECK(l != NULL && strcmp(l, "a") == 0);
	/* good resigned by itself: the slow one was still draining */
	CHECK_INT_EQ(host_log_count(&A, from, "leaving our election key to the lease revocation"), 0);
	/* end it: a second signal exits without waiting; its keys expire with
	 * the lease (ttl 2 s) and b takes the reconciler over */
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	if (A.exit_status != 1)
		host_dump_log(&A);
	CHECK_INT_EQ(A.exit_status, 1);
	/* the thread stuck in reconcile was left behind, not joined forever */
	CHECK_INT_EQ(host_log_count(&A, from, "stuck in a callback; leaving it behind"), 1);
	obs_wait_leader(g_rec, "b", 15000);
}

static bool log_has(void *arg)
{
	const char *const *what = arg; /* {needle, from as text} */
	return host_log_count(&A, strtol(what[1], NULL, 10), what[0]) > 0;
}

static void test_linger_after_revocation(void)
{
	const char *args[32];
	size_t n = 0;
	for (; ARGS[n]; n++)
		args[n] = ARGS[n];
	args[n++] = "--exit-linger";
	args[n++] = "60s";
	args[n] = NULL;
	host_start(&A, harness_etcd_urls(g_etcd), args);
	wait_campaigns("good", "a");
	wait_campaigns("reconciler", "a");
	int64_t lease = election_lease("good", "a");
	CHECK(lease != 0);

	long from = host_log_size(&A);
	char from_s[32];
	snprintf(from_s, sizeof(from_s), "%ld", from);
	/* 60 s, cut to what is left of the 20 s --shutdown-timeout */
	const char *lingering[2] = {"; lingering ", from_s};
	host_signal(&A, SIGTERM);
	tu_wait(&T, log_has, lingering, 15000, "a: lingering");
	CHECK_INT_EQ(host_log_count(&A, from, "lease revoked"), 1);
	char *since = host_log_since(&A, from);
	const char *at = strstr(since, "; lingering ");
	CHECK(at != NULL);
	unsigned long ms = strtoul(at + strlen("; lingering "), NULL, 10);
	CHECK(ms > 0 && ms <= 20000); /* not the 60 s asked for */
	free(since);
	/* everything is done and the keys are gone, but a is still up */
	CHECK_INT_EQ(keys_of_lease(lease), 0);
	CHECK(host_alive(&A));
	CHECK_INT_EQ(host_log_count(&A, from, "bye"), 0);
	/* a second signal ends the linger: nothing is cut short, status 0 */
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	if (A.exit_status != 0)
		host_dump_log(&A);
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(host_log_count(&A, from, "bye"), 1);
	CHECK_INT_EQ(host_log_count(&A, from, "second signal"), 0);

	/* a linger out of range is refused at start, with status 2 */
	static const char *const bad[][2] = {{"--exit-linger", "61s"}, {"--exit-linger", "-1"},
	                                     {"--exit-linger", "soon"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *bargs[] = {bad[i][0], bad[i][1], NULL};
		from = host_log_size(&A);
		host_start(&A, harness_etcd_urls(g_etcd), bargs);
		CHECK_OK(host_wait(&A, 15000));
		CHECK_INT_EQ(A.exit_status, 2);
		CHECK_INT_EQ(host_log_count(&A, from, "bad --exit-linger duration"), 1);
	}
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	g_rec = obs_new(&T, PFX, "reconciler", REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	g_good = obs_new(&T, PFX, "good", REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_single_plugin_leaves_by_one_revocation);
	RUN(test_slow_drain_does_not_hold_back_the_other_plugin);
	RUN(test_linger_after_revocation);

	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(B.exit_status, 0);
	obs_free(g_rec);
	obs_free(g_good);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
