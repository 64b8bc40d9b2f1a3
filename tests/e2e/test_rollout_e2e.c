/* SPDX-License-Identifier: MIT */
/*
 * test_rollout_e2e.c - rolling upgrades of the example plugin on three real
 * hosts by hot reload, 1.0.0 to the incompatible 1.1.0 (min_compatible
 * 1.1.0):
 *  - the default rule: the 1.0.0 leader keeps its term and reconciles (an
 *    input written mid-rollout gets its v1 output) while 1.1.0 stands by and
 *    says why; when the last 1.0.0 host upgrades, one handover to 1.1.0,
 *    which writes DONE 1.1.0 and the v2 outputs and acts on an input changed
 *    after the last step (an input changed at every step is acted on,
 *    each by a watch, not the 1 h reconcile interval); then a downgrade: a host
 *    that reloads 1.0.0 stands by while a 1.1.0 member remains; when the
 *    last one reloads 1.0.0, a 1.0.0 leader restricts the status first;
 *  - the reference flag (LH_PLUGIN_F_REFERENCE_ROLLOUT on 1.1.0): 1.1.0
 *    leads at once and nobody reconciles until the last 1.0.0 host
 *    upgrades (an input written meanwhile is first written by 1.1.0);
 *  - a switchover to a node whose release may not lead is refused with the
 *    rule's reason.
 * The journal invariants (no two leaders wrote concurrently) hold
 * throughout.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;

/* each scenario has its own prefix: the invariants read a prefix's whole
 * history */
static const char *g_pfx;
static const char *g_args[] = {HOST_TEST_ARGS(NULL), NULL};

/* P/N/data/<rest> */
static const char *data_key(const char *rest)
{
	static char buf[4][160];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/" PLUGIN "/data/%s", g_pfx, rest);
	return buf[i];
}

static void wait_value(const char *key, const char *value, const char *what)
{
	tu_wait_value(&T, key, value, 15000, what);
}

static void put_input(const char *name, const char *value)
{
	char rest[64];
	snprintf(rest, sizeof(rest), "desired/%s", name);
	tu_put(&T, data_key(rest), value, strlen(value));
}

static int64_t fencing_token(const struct host *h)
{
	struct json_object *p = ctl_plugin_json(h, PLUGIN);
	CHECK(p != NULL);
	int64_t t = json_object_get_int64(jget(p, "fencing_token"));
	json_object_put(p);
	return t;
}

static void check_held(const struct host *h, const char *needle)
{
	host_wait_state(h, PLUGIN, "standby", true, 15000);
	struct json_object *p = ctl_plugin_json(h, PLUGIN);
	const char *held = p ? jstr(p, "held_back") : NULL;
	if (!held || !strstr(held, needle))
		fprintf(stderr, "%s: held_back \"%s\", want \"%s\"\n", h->node, held ? held : "",
		        needle);
	CHECK(held && strstr(held, needle));
	json_object_put(p);
}

static void check_invariants(void)
{
	CHECK_INT_EQ(inv_check_all(&T, g_pfx, PLUGIN, NULL), 0);
}

static void start_all_on_1_0(const char *pfx)
{
	g_pfx = pfx;
	g_args[1] = pfx;
	obs_free(g_obs);
	g_obs = obs_new(&T, pfx, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	e2e_hosts_up(g_obs, harness_etcd_urls(g_etcd), g_args,
		     (struct host *const[]){&A, &B, &C, NULL}, true);
	put_input("x0", "v0");
	wait_value(data_key("out/x0"), "value=v0", "1.0.0 reconciles x0");
}

static void stop_all(void)
{
	hosts_terminate((struct host *const[]){&A, &B, &C}, 3, 15000, false);
}

static void upgrade(struct host *h, const char *file_release, struct release r)
{
	host_install_plugin(h, file_release, "reconciler.so");
	obs_wait_member_release(g_obs, h->node, r, 15000);
}

static void test_rollout_older_release_keeps_reconciling(void)
{
	start_all_on_1_0("/lhr1");
	int64_t token = fencing_token(&A);
	CHECK(token > 0);

	/* one standby upgrades: it stands by, saying why; a keeps its term */
	upgrade(&C, "1.1.0", REL(1, 1, 0));
	check_held(&C, "release 1.1.0 cannot act yet: it needs every member at 1.1.0 or above "
	               "(oldest: 1.0.0); release 1.0.0 leads meanwhile");
	put_input("x1", "v1");
	wait_value(data_key("out/x1"), "value=v1", "the 1.0.0 leader acts on an input mid-rollout");
	CHECK_INT_EQ(fencing_token(&A), token);

	/* a switchover to the waiting release is refused with the reason */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "switchover", PLUGIN, "--to", "c", NULL), 2);
	CHECK(strstr(o.err, "node c runs release 1.1.0 of plugin 'reconciler', which may not "
	                    "lead now: release 1.1.0 cannot act yet") != NULL);
	ctl_out_free(&o);

	/* the second standby upgrades: still a's term */
	upgrade(&B, "1.1.0", REL(1, 1, 0));
	check_held(&B, "cannot act yet");
	put_input("x2", "v2");
	wait_value(data_key("out/x2"), "value=v2", "still acted on by 1.0.0");
	CHECK_INT_EQ(fencing_token(&A), token);
	CHECK_STR_EQ(obs_leader(g_obs), "a");

	/* the last 1.0.0 host upgrades: one handover, DONE 1.1.0, v2 outputs */
	upgrade(&A, "1.1.0", REL(1, 1, 0));
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	wait_value(data_key("out/x2"), "{\"value\":\"v2\",\"format\":2}", "v2 outputs by 1.1.0");
	put_input("x3", "v3");
	wait_value(data_key("out/x3"), "{\"value\":\"v3\",\"format\":2}",
	           "the 1.1.0 leader acts on an input after the last step");
	check_invariants();

	/* a downgrade: b reloads 1.0.0; a 1.1.0 member remains, so it stands by */
	const char *leader = obs_leader(g_obs);
	CHECK(leader != NULL);
	char was[16];
	snprintf(was, sizeof(was), "%s", leader);
	struct host *keep = strcmp(was, "c") == 0 ? &C : strcmp(was, "b") == 0 ? &B : &A;
	struct host *down1 = keep == &B ? &A : &B, *down2 = keep == &C ? &A : &C;
	upgrade(down1, "1.0.0", REL(1, 0, 0));
	check_held(down1, "a newer release is present");
	upgrade(down2, "1.0.0", REL(1, 0, 0));
	CHECK_STR_EQ(obs_leader(g_obs), was);
	/* the last 1.1.0 host reloads 1.0.0: 1.0.0 leads, restricts, DONE 1.0.0
	 * (the journal invariants were checked before: the status version
	 * goes back here, on purpose) */
	upgrade(keep, "1.0.0", REL(1, 0, 0));
	obs_wait_status_done(g_obs, REL(1, 0, 0), 20000);
	wait_value(data_key("out/x2"), "value=v2", "v1 outputs again after the downgrade");
	stop_all();
}

static void test_rollout_reference_flag(void)
{
	start_all_on_1_0("/lhr2");
	/* a standby upgrades to a 1.1.0 that asks for the reference rule: it
	 * leads at once, and waits; the 1.0.0 nodes stand by */
	upgrade(&C, "1.1.0-reference", REL(1, 1, 0));
	obs_wait_leader(g_obs, "c", 15000);
	check_held(&A, "a newer release is present");
	put_input("y1", "w1");
	upgrade(&B, "1.1.0-reference", REL(1, 1, 0));
	upgrade(&A, "1.1.0-reference", REL(1, 1, 0));
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	wait_value(data_key("out/y1"), "{\"value\":\"w1\",\"format\":2}", "y1 by 1.1.0");
	/* nobody reconciled while 1.1.0 waited: y1's output was written once,
	 * by 1.1.0 */
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, data_key("out/y1"), &kvs);
	CHECK_INT_EQ(n, 1);
	CHECK_INT_EQ(kvs[0]->version, 1);
	tu_list_free(kvs, n);
	check_invariants();
	stop_all();
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, NULL}, NULL, NULL, NULL);

	RUN(test_rollout_older_release_keeps_reconciling);
	RUN(test_rollout_reference_flag);

	e2e_stop(g_etcd, &T, g_obs);
	return 0;
}
