/* SPDX-License-Identifier: MIT */
/*
 * test_daemon - real `leasehold` processes with the real example plugin
 * against a real etcd: one leader among two hosts, graceful handover on
 * SIGTERM, failover on SIGKILL, and a rolling upgrade by hot reload with the
 * status protocol guarding the incompatible change.
 *
 * Leadership is observed through an in-process observer (an election with
 * no driver, which never campaigns) fed by its own etcd watch: waiting is
 * always for an event, with a deadline.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "election/election.h"
#include "harness.h"
#include "hosts.h"
#include "proto/leasehold.pb-c.h"
#include "etcd/etcd_session.h"
#include "testutil.h"

#define PFX "/lhd"
#define PLUGIN "reconciler"
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

static struct harness_etcd *g_etcd;
static struct tu T;
static struct election *g_obs10, *g_obs11; /* observers of release 1.0.0 and 1.1.0 */
static struct session *g_obs_sess;
static struct host A, B;

static const char *const HOST_ARGS[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", NULL};

static struct election *observer(struct plugin_releases rel)
{
	struct election_config cfg = {.prefix = PFX, .name = PLUGIN, .node_id = "observer",
	                              .releases = rel};
	struct election *e;
	CHECK_OK(election_new(T.loop, T.etcd, g_obs_sess, &cfg, &e));
	CHECK_OK(election_start(e));
	return e;
}

static struct election_info info(void)
{
	struct election_info i;
	election_get_info(g_obs10, &i);
	return i;
}

static const char *g_want_leader;
static bool p_leader(void *a)
{
	(void)a;
	struct election_info i = info();
	return i.leader && strcmp(i.leader, g_want_leader) == 0;
}

static void wait_leader(const char *node, int ms)
{
	g_want_leader = node;
	uint64_t deadline = loop_now() + (uint64_t)ms * LOOP_NS_PER_MS;
	while (!p_leader(NULL)) {
		if (loop_now() >= deadline) {
			struct election_info i = info();
			fprintf(stderr, "leader is %s, wanted %s\n", i.leader ? i.leader : "(none)", node);
			host_dump_log(&A);
			host_dump_log(&B);
			exit(1);
		}
		loop_run_once(T.loop, 20);
	}
}

static size_t g_want_members;
static bool p_members(void *a)
{
	(void)a;
	struct election_member m[8];
	return election_members(g_obs10, m, 8) == g_want_members;
}

/* members with an election key (alive, campaigning or leading) */
static size_t g_want_campaigning;
static bool p_campaigning(void *a)
{
	(void)a;
	struct election_member m[8];
	size_t n = election_members(g_obs10, m, 8), k = 0;
	for (size_t i = 0; i < n && i < 8; i++)
		k += m[i].campaigning;
	return k == g_want_campaigning;
}

static struct release g_want_v;
static bool p_status_done(void *a)
{
	(void)a;
	struct election_info i = info();
	return i.status_present && i.status_valid && i.status_state == DONE &&
	       release_cmp(i.status_version, g_want_v) == 0;
}

static void wait_status_done(struct release v, int ms, const char *what)
{
	g_want_v = v;
	uint64_t deadline = loop_now() + (uint64_t)ms * LOOP_NS_PER_MS;
	while (!p_status_done(NULL)) {
		if (loop_now() >= deadline) {
			fprintf(stderr, "timed out: %s\n", what);
			host_dump_log(&A);
			host_dump_log(&B);
			exit(1);
		}
		loop_run_once(T.loop, 20);
	}
}

static const char *leader_node(void)
{
	return info().leader;
}

static struct host *host_by_node(const char *n)
{
	return strcmp(n, A.node) == 0 ? &A : &B;
}

static void test_two_hosts_exactly_one_leads(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), HOST_ARGS);
	host_start(&B, harness_etcd_urls(g_etcd), HOST_ARGS);
	g_want_members = 2;
	tu_wait(&T, p_members, NULL, 15000, "two members registered");
	wait_status_done(REL(1, 0, 0), 15000, "first reconcile by 1.0.0");
	const char *l = leader_node();
	CHECK(l && (strcmp(l, "a") == 0 || strcmp(l, "b") == 0));
	/* the reconciled state is the 1.0.0 format */
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/" PLUGIN "/data/config/schema", &n);
	CHECK(v != NULL);
	CHECK_STR_EQ((char *)v, "reconciler/v1");
	free(v);
	/* a 1.0.0 consumer is ready */
	CHECK(info().status_compatible);
}

static void test_sigterm_hands_over_fast(void)
{
	char leader[32];
	snprintf(leader, sizeof(leader), "%s", leader_node());
	struct host *L = host_by_node(leader), *O = L == &A ? &B : &A;
	uint64_t t0 = loop_now();
	host_signal(L, SIGTERM);
	/* the other host leads within 1 s (graceful: resign, not TTL expiry) */
	wait_leader(O->node, 1000);
	uint64_t ms = (loop_now() - t0) / LOOP_NS_PER_MS;
	fprintf(stderr, "handover after SIGTERM: %llu ms\n", (unsigned long long)ms);
	CHECK_OK(host_wait(L, 10000));
	CHECK_INT_EQ(L->exit_status, 0);
	/* its election key went with it; its member record stays (an ordinary
	 * shutdown is not leaving: the node counts with its release while down) */
	g_want_campaigning = 1;
	tu_wait(&T, p_campaigning, NULL, 5000, "election key removed");
	g_want_members = 2;
	CHECK(p_members(NULL));
}

static void test_sigkill_fails_over_within_ttl(void)
{
	/* bring the stopped host back; it campaigns behind the leader */
	struct host *L = host_by_node(leader_node()), *O = L == &A ? &B : &A;
	host_start(O, harness_etcd_urls(g_etcd), HOST_ARGS);
	g_want_campaigning = 2;
	tu_wait(&T, p_campaigning, NULL, 15000, "restarted host campaigns");
	host_signal(L, SIGKILL);
	CHECK_OK(host_wait(L, 5000));
	/* ttl 2 s: the other leads within ttl + 2 s */
	wait_leader(O->node, 4000);
	/* restart the killed one for the next test */
	host_start(L, harness_etcd_urls(g_etcd), HOST_ARGS);
	g_want_campaigning = 2;
	tu_wait(&T, p_campaigning, NULL, 15000, "killed host back");
}

static struct release g_want_member_rel;
static const char *g_want_member_node;
static bool p_member_release(void *a)
{
	(void)a;
	struct election_member m[8];
	size_t n = election_members(g_obs10, m, 8);
	for (size_t i = 0; i < n && i < 8; i++)
		if (strcmp(m[i].node_id, g_want_member_node) == 0)
			return release_cmp(m[i].release, g_want_member_rel) == 0;
	return false;
}

static void test_rolling_upgrade_by_hot_reload(void)
{
	/* upgrade the standby first: a newer release takes over at once */
	struct host *L = host_by_node(leader_node()), *S = L == &A ? &B : &A;
	host_install_plugin(S, "1.1.0-reference", "reconciler.so");
	g_want_member_node = S->node;
	g_want_member_rel = REL(1, 1, 0);
	tu_wait(&T, p_member_release, NULL, 10000, "member record moved to 1.1.0");
	wait_leader(S->node, 5000);
	/* 1.1.0 is incompatible with 1.0.0 (min_compatible 1.1.0): while a 1.0.0
	 * member remains, the new leader must not reconcile; the status still
	 * says DONE 1.0.0 */
	struct election_info i = info();
	CHECK(i.status_present && i.status_state == DONE);
	CHECK_INT_EQ(i.status_version.minor, 0);
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/" PLUGIN "/data/config/schema", &n);
	CHECK_STR_EQ((char *)v, "reconciler/v1");
	free(v);

	/* upgrade the old leader: every member is 1.1.0 now; the leader writes the
	 * restricted status, reconciles to format v2, and writes DONE 1.1.0 */
	host_install_plugin(L, "1.1.0-reference", "reconciler.so");
	wait_status_done(REL(1, 1, 0), 15000, "DONE 1.1.0 after the rolling upgrade");
	v = tu_get(&T, PFX "/" PLUGIN "/data/config/schema", &n);
	CHECK_STR_EQ((char *)v, "reconciler/v2");
	free(v);
	/* readiness: a 1.0.0 consumer is refused now, a 1.1.0 consumer is ready */
	CHECK(!info().status_compatible);
	struct election_info i11;
	election_get_info(g_obs11, &i11);
	CHECK(i11.status_compatible);
}

/* The journal the example plugin writes in the same fenced txn as its
 * reconcile: every record of one fencing token comes from one node, and along
 * etcd's revision order the tokens never go back (no two leaders interleave). */
static int cmp_mod(const void *a, const void *b)
{
	const struct etcd_kv *x = *(struct etcd_kv *const *)a, *y = *(struct etcd_kv *const *)b;
	return x->mod_revision < y->mod_revision ? -1 : x->mod_revision > y->mod_revision;
}

static void test_journal_has_no_overlapping_leaders(void)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/data/journal/", &kvs);
	CHECK(n >= 3); /* 1.0.0 first leader, failover leaders, 1.1.0 leader */
	qsort(kvs, n, sizeof(*kvs), cmp_mod);
	long long last_token = 0;
	char last_node[64] = "";
	size_t terms = 0;
	for (size_t i = 0; i < n; i++) {
		char node[64];
		long long token;
		CHECK(sscanf((const char *)kvs[i]->value, "node=%63s token=%lld", node, &token) == 2);
		CHECK(token >= last_token);
		if (token == last_token)
			CHECK_STR_EQ(node, last_node);
		else
			terms++;
		last_token = token;
		snprintf(last_node, sizeof(last_node), "%s", node);
	}
	CHECK(terms >= 3);
	tu_list_free(kvs, n);
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	CHECK_OK(session_new(T.loop, T.etcd, 10, &host_quiet_session_ops, NULL, &g_obs_sess));
	g_obs10 = observer((struct plugin_releases){{1, 0, 0}, {1, 0, 0}, {1, 0, 0}});
	g_obs11 = observer((struct plugin_releases){{1, 1, 0}, {1, 0, 0}, {1, 1, 0}});
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_two_hosts_exactly_one_leads);
	RUN(test_sigterm_hands_over_fast);
	RUN(test_sigkill_fails_over_within_ttl);
	RUN(test_rolling_upgrade_by_hot_reload);
	RUN(test_journal_has_no_overlapping_leaders);

	hosts_terminate((struct host *const[]){&A, &B}, 2, 10000, true);
	election_free(g_obs10);
	election_free(g_obs11);
	session_free(g_obs_sess);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
