/* SPDX-License-Identifier: MIT */
/*
 * test_example_config_e2e.c - the example controller's setting from its
 * cluster configuration, end to end: two real hosts running the example
 * (release 1.0.0, format v1) on a real etcd.
 * - `leaseholdctl config set reconciler FILE` with {"label": "blue"}: the
 *   leader rewrites every output as "value=<v>;label=blue";
 * - a label that is not [A-Za-z0-9._-] is refused by the plugin's own
 *   validate_config (exit 2, nothing written);
 * - the leader stops (SIGTERM), the other node leads with the label it got
 *   through on_config_changed as a standby; a new label set in observer
 *   mode (no validation) and an input changed: the new leader's outputs
 *   follow both; the configuration deleted: the label goes;
 * the invariant checker at the end (every output written inside a term).
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PFX "/lhxc"
#define PLUGIN "reconciler"
#define DATA PFX "/" PLUGIN "/data/"

static struct harness_etcd *H;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};

static const char *write_file(const char *name, const char *text)
{
	static char path[4][512];
	static int next;
	char *p = path[next++ % 4];
	snprintf(p, sizeof(path[0]), "%s/%s", harness_dir(H), name);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	fputs(text, f);
	CHECK_INT_EQ(fclose(f), 0);
	return p;
}

static void test_label_follows_config(void)
{
	struct ctl_out o;
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(H), ARGS);
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(H), ARGS);
	host_wait_state(&B, PLUGIN, "campaigning", true, 15000);
	tu_put(&T, DATA "desired/k1", "one", 3);
	tu_put(&T, DATA "desired/k2", "two", 3);
	tu_wait_value(&T, DATA "out/k1", "value=one", 20000, "out/k1 without a label");
	tu_wait_value(&T, DATA "out/k2", "value=two", 20000, "out/k2 without a label");

	/* refused by the plugin (runs on b too: any node validates) */
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "set", PLUGIN,
	                      write_file("bad.json", "{\"label\": \"no spaces\"}"), NULL),
	             2);
	CHECK(strstr(o.err, "\"label\" must be a string") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "config", "set", PLUGIN,
	                      write_file("blue.json", "{\"other\": {\"label\": 1}, \"label\": \"blue\"}"),
	                      NULL),
	             0);
	ctl_out_free(&o);
	tu_wait_value(&T, DATA "out/k1", "value=one;label=blue", 20000,
		      "the leader relabels out/k1");
	tu_wait_value(&T, DATA "out/k2", "value=two;label=blue", 20000,
		      "the leader relabels out/k2");

	/* a handover: b leads with the label it took as a standby */
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	obs_wait_leader(g_obs, "b", 15000);
	tu_put(&T, DATA "desired/k1", "uno", 3);
	tu_wait_value(&T, DATA "out/k1", "value=uno;label=blue", 20000,
		      "the new leader acts on the input");

	/* observer mode: no plugin validates; a good label still applies */
	const char *argv[] = {"--etcd", harness_etcd_urls(H), "--prefix", PFX, "config", "set",
	                      PLUGIN, write_file("green.json", "{\"label\":\"green-2\"}"), NULL};
	ctl_run(&o, NULL, argv);
	CHECK_INT_EQ(o.status, 0);
	ctl_out_free(&o);
	tu_wait_value(&T, DATA "out/k1", "value=uno;label=green-2", 20000,
		      "the new leader relabels out/k1");
	tu_wait_value(&T, DATA "out/k2", "value=two;label=green-2", 20000,
		      "the new leader relabels out/k2");
	/* no configuration: no label */
	tu_del(&T, PFX "/" PLUGIN "/config");
	tu_wait_value(&T, DATA "out/k2", "value=two", 20000,
		      "the label goes with the configuration");

	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(B.exit_status, 0);
}

int main(void)
{
	e2e_start(&H, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_label_follows_config);

	e2e_stop(H, &T, g_obs);
	return 0;
}
