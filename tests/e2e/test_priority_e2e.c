/* SPDX-License-Identifier: MIT */
/*
 * test_priority_e2e - candidate priority (`leasehold --priority [NAME=]N`)
 * with real daemons, a real etcd and the example plugin:
 *  - a node of equal priority joins the leader: no handover;
 *  - a node of higher priority joins: exactly one handover, to it (the
 *    term history says switchover, priority);
 *  - a node whose per-plugin override equals the new leader's priority
 *    joins: no handover (equal priorities never move leadership);
 * the whole history is checked at the end (every term that ever started),
 * and the invariant checker.
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
#include "invariants.h"
#include "testutil.h"

#define PFX "/lhp"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host D, E, F, G;

static bool p_campaigns(void *node)
{
	return tu_election_lease(&T, PFX, PLUGIN, node) != 0;
}

static void start(struct host *h, const char *p1, const char *p2)
{
	const char *args[] = {
	    HOST_TEST_ARGS(PFX), p1 ? "--priority" : NULL, p1, p2 ? "--priority" : NULL, p2, NULL};
	host_install_plugin(h, "1.0.0", "reconciler.so");
	host_start(h, harness_etcd_urls(g_etcd), args);
	tu_wait(&T, p_campaigns, h->node, 15000, "the new node campaigns");
	host_wait_control(h, 10000);
}

/* a reconcile request from h served by the leader: every member record
 * put before it has reached the leader, and the leader acted on it */
static void barrier(const struct host *h)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "reconcile", PLUGIN, NULL), 0);
	ctl_out_free(&o);
}

static bool p_term_recorded(void *arg)
{
	(void)arg;
	return tu_term_recorded(&T, PFX, PLUGIN);
}

static void test_priorities(void)
{
	start(&D, NULL, NULL);
	obs_wait_leader(g_obs, "d", 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	/* equal priority (0 = the default, given explicitly) */
	start(&E, "0", NULL);
	barrier(&E);
	CHECK_STR_EQ(obs_leader(g_obs), "d");
	/* higher priority: one handover */
	start(&F, "10", NULL);
	obs_wait_leader(g_obs, "f", 15000);
	barrier(&F);
	/* equal to f through the per-plugin override (the node default is 5) */
	start(&G, "5", PLUGIN "=10");
	barrier(&G);
	CHECK_STR_EQ(obs_leader(g_obs), "f");
	CHECK(!tu_get(&T, PFX "/" PLUGIN "/handover", &(size_t){0}));

	tu_wait(&T, p_term_recorded, NULL, 10000, "f's term in the history");
	struct json_object *a = host_history_json(&G, PLUGIN);
	CHECK_INT_EQ((int)json_object_array_length(a), 2);
	struct json_object *t0 = json_object_array_get_idx(a, 0), *t1 = json_object_array_get_idx(a, 1);
	CHECK_STR_EQ(jstr(t0, "node"), "f");
	CHECK(jget(t0, "end_reason") == NULL);
	CHECK_STR_EQ(jstr(t1, "node"), "d");
	CHECK_STR_EQ(jstr(t1, "end_reason"), "switchover");
	CHECK(strstr(jstr(t1, "end_detail"), "priority: f has a higher priority") != NULL);
	json_object_put(a);
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	g_obs = obs_new(&T, PFX, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&D, harness_dir(g_etcd), "d");
	host_setup(&E, harness_dir(g_etcd), "e");
	host_setup(&F, harness_dir(g_etcd), "f");
	host_setup(&G, harness_dir(g_etcd), "g");

	RUN(test_priorities);

	struct host *hs[] = {&D, &E, &F, &G};
	for (size_t i = 0; i < 4; i++)
		host_signal(hs[i], SIGTERM);
	for (size_t i = 0; i < 4; i++)
		CHECK_OK(host_wait(hs[i], 15000));
	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
