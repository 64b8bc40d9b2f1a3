/* SPDX-License-Identifier: MIT */
/*
 * test_membership_e2e - membership that outlives the lease, with real
 * daemons, a real etcd and leaseholdctl:
 *  - a 1.0.0 node that is killed and never comes back keeps holding back the
 *    1.1.0 leader's incompatible status change (its member record is bound
 *    to no lease), and `members` shows it, not campaigning (1.1.0 asks for
 *    the reference rule here, so that it leads and waits);
 *  - `members forget` explains itself and does nothing without --yes, is
 *    refused for the local node, an unknown node and a live candidate, and
 *    with --yes lets the restriction and the rollout complete;
 *  - an ordinary SIGTERM keeps the node's member record; `leave --yes`
 *    deletes it and the daemon exits 0.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "proto/leasehold.pb-c.h"

#define PFX "/lhm"
#define PLUGIN "reconciler"
#define DONE LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};

static bool member_record(const char *node)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/members/%s", node);
	size_t n;
	uint8_t *v = tu_get(&T, key, &n);
	free(v);
	return v != NULL;
}

static bool p_no_member(void *a)
{
	return !member_record(a);
}

static int64_t g_lease;
static bool p_lease_gone(void *a)
{
	(void)a;
	return tu_keys_of_lease(&T, PFX "/", g_lease) == 0;
}

static int64_t election_lease(const char *node)
{
	return tu_election_lease(&T, PFX, PLUGIN, node);
}

static bool p_campaigns(void *a)
{
	return election_lease(a) != 0;
}

static void status_is(struct release v, struct release m)
{
	int st;
	struct release sv, sm;
	CHECK(tu_get_status(&T, PFX, PLUGIN, &st, &sv, &sm));
	CHECK_INT_EQ(st, DONE);
	CHECK(release_cmp(sv, v) == 0);
	CHECK(release_cmp(sm, m) == 0);
}

struct campaigning_want {
	const char *node;
	bool campaigning;
};

/* a's `members` shows node's CAMPAIGNING as wanted (a's view comes from
 * its watch, which may trail what the test read from etcd) */
static bool p_a_sees_campaigning(void *arg)
{
	const struct campaigning_want *w = arg;
	struct ctl_out o;
	if (host_ctl(&A, &o, "members", PLUGIN, "--json", NULL) != 0) {
		ctl_out_free(&o);
		return false;
	}
	json_object *arr = json_tokener_parse(o.out);
	ctl_out_free(&o);
	bool found = false, yes = false;
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		json_object *m = json_object_array_get_idx(arr, i), *v;
		if (strcmp(jstr(m, "node"), w->node) == 0 &&
		    json_object_object_get_ex(m, "campaigning", &v)) {
			found = true;
			yes = json_object_get_boolean(v);
		}
	}
	json_object_put(arr);
	return found && yes == w->campaigning;
}

static void test_dead_old_node_holds_back_until_forgotten(void)
{
	/* b (1.0.0) reconciles first; a (1.1.0, minimum compatible 1.1.0) joins */
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&B, harness_etcd_urls(g_etcd), ARGS);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	host_install_plugin(&A, "1.1.0-reference", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), ARGS);
	obs_wait_leader(g_obs, "a", 15000);
	/* b dies for good; its lease expires on etcd */
	tu_wait(&T, p_campaigns, (char *)"a", 5000, "a campaigns");
	host_wait_control(&B, 5000);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "version", NULL), 0);
	ctl_out_free(&o);
	/* b's lease: the one its daemon logs */
	char *since = host_log_since(&B, 0);
	const char *at = strstr(since, "session: lease ");
	CHECK(at != NULL);
	g_lease = (int64_t)strtoull(at + strlen("session: lease "), NULL, 16);
	free(since);
	host_signal(&B, SIGKILL);
	CHECK_OK(host_wait(&B, 5000));
	if (g_lease > 0)
		tu_wait(&T, p_lease_gone, NULL, 10000, "b's lease expired");
	/* a's view is past the expiry once it shows b's key gone */
	tu_wait(&T, p_a_sees_campaigning, &(struct campaigning_want){"b", false}, 10000,
	        "a lists b as not campaigning");
	host_wait_state(&A, PLUGIN, "leading", true, 10000);
	CHECK(member_record("b"));
	status_is(REL(1, 0, 0), REL(1, 0, 0)); /* not restricted */

	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, NULL), 0);
	fprintf(stderr, "%s", o.out);
	char cell[64];
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "RELEASE", cell, sizeof(cell)), "1.0.0");
	CHECK_STR_EQ(ctl_table_cell(o.out, "b", "CAMPAIGNING", cell, sizeof(cell)), "no");
	CHECK_STR_EQ(ctl_table_cell(o.out, "a", "CAMPAIGNING", cell, sizeof(cell)), "yes");
	ctl_out_free(&o);

	/* without --yes: what it means, nothing done */
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "b", NULL), 2);
	CHECK(strstr(o.err, "needs --yes"));
	CHECK(strstr(o.err, "gone for good"));
	ctl_out_free(&o);
	CHECK(member_record("b"));
	/* refusals, before anything changes */
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "a", "--yes", NULL), 1);
	fprintf(stderr, "forget a: %s", o.err);
	CHECK(strstr(o.err, "is this node"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "zz", "--yes", NULL), 2);
	CHECK(strstr(o.err, "not a member"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", "nosuch", "b", "--yes", NULL), 2);
	CHECK(strstr(o.err, "no plugin named"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "b/c", "--yes", NULL), 2);
	ctl_out_free(&o);
	status_is(REL(1, 0, 0), REL(1, 0, 0));

	/* forgotten: the restriction and the rollout complete */
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "b", "--yes", NULL), 0);
	CHECK(strstr(o.out, "node b forgotten"));
	ctl_out_free(&o);
	obs_wait_status_done(g_obs, REL(1, 1, 0), 15000);
	status_is(REL(1, 1, 0), REL(1, 1, 0));
	CHECK(!member_record("b"));
}

static void test_live_candidate_is_not_forgotten(void)
{
	host_install_plugin(&C, "1.1.0-reference", "reconciler.so");
	host_start(&C, harness_etcd_urls(g_etcd), ARGS);
	tu_wait(&T, p_campaigns, (char *)"c", 15000, "c campaigns");
	host_wait_state(&A, PLUGIN, "leading", true, 10000);
	struct ctl_out o;
	/* a's mirror shows c's election key (polled through the CLI, every 50 ms
	 * of this test's loop, within the deadline) */
	tu_wait(&T, p_a_sees_campaigning, &(struct campaigning_want){"c", true}, 10000,
	        "a lists c as campaigning");
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", PLUGIN, "c", "--yes", NULL), 1);
	fprintf(stderr, "forget c: %s", o.err);
	CHECK(strstr(o.err, "is alive"));
	ctl_out_free(&o);
	CHECK(member_record("c"));
}

static void test_sigterm_keeps_leave_deletes(void)
{
	/* an ordinary stop keeps c's record */
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 15000));
	CHECK_INT_EQ(C.exit_status, 0);
	CHECK(member_record("c"));
	/* back, then decommissioned: leave deletes it */
	host_start(&C, harness_etcd_urls(g_etcd), ARGS);
	tu_wait(&T, p_campaigns, (char *)"c", 15000, "c campaigns again");
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&C, &o, "leave", NULL), 2);
	CHECK(strstr(o.err, "needs --yes"));
	ctl_out_free(&o);
	CHECK(host_alive(&C));
	CHECK_INT_EQ(host_ctl(&C, &o, "leave", "--yes", NULL), 0);
	ctl_out_free(&o);
	CHECK_OK(host_wait(&C, 15000));
	CHECK_INT_EQ(C.exit_status, 0);
	tu_wait(&T, p_no_member, (char *)"c", 5000, "c's member record deleted");
	CHECK(member_record("a"));
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_dead_old_node_holds_back_until_forgotten);
	RUN(test_live_candidate_is_not_forgotten);
	RUN(test_sigterm_keeps_leave_deletes);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	e2e_stop(g_etcd, &T, g_obs);
	return CHECK_EXIT();
}
