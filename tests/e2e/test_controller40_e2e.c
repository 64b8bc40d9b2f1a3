/* SPDX-License-Identifier: MIT */
/*
 * test_controller40_e2e.c - the plugin guide's 40-line controller
 * (tests/plugins/controller40.c) end to end: two real hosts, real etcd.
 * - inputs put: their outputs appear ("hello, <input>", the schema's
 *   default greeting); an input deleted: its output goes (apply's orphan
 *   delete);
 * - `config set` of {"greeting": 5} is refused by the host's schema check
 *   (exit 2, the field and the reason, nothing written); {"greeting":"hi"}
 *   rewrites every output;
 * - SIGTERM of the leader: the other host leads and acts on a new input
 *   with the greeting it holds;
 * - a hot reload of both hosts to 2.0.0 (the same source, -DMAJOR=2, which
 *   declares 1.x readers incompatible): every output moves to 2.0.0's form
 *   ("hi, <input>!"), a later input and a later config change too;
 * - over etcd's whole history of the outputs: once an output held 2.0.0's
 *   form, it never held 1.0.0's again.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PFX "/lh40"
#define PLUGIN "controller40"
#define DATA PFX "/" PLUGIN "/data/"

static struct harness_etcd *H;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};

/* wait until output name holds value (NULL: is gone) */
static void wait_value(const char *name, const char *value, const char *what)
{
	char key[256];
	snprintf(key, sizeof(key), DATA "out/%s", name);
	tu_wait_value(&T, key, value, 20000, what);
}

static void put_input(const char *name, const char *value)
{
	char key[256];
	snprintf(key, sizeof(key), DATA "in/%s", name);
	tu_put(&T, key, value, strlen(value));
}

/* leaseholdctl config set on h with a document written to a file */
static int config_set(const struct host *h, const char *json, struct ctl_out *o)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/config.json", harness_dir(H));
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(json, f);
	CHECK_INT_EQ(fclose(f), 0);
	return host_ctl(h, o, "config", "set", PLUGIN, path, NULL);
}

static void install(struct host *h, const char *build)
{
	host_install_file(h, built_test_plugin(build), "controller40.so", 0644);
}

static void test_outputs_follow_inputs_and_config(void)
{
	struct ctl_out o;
	install(&A, "controller40-1.0.0");
	install(&B, "controller40-1.0.0");
	host_start(&A, harness_etcd_urls(H), ARGS);
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(H), ARGS);
	host_wait_state(&B, PLUGIN, "campaigning", true, 15000);
	put_input("a", "world");
	put_input("b", "there");
	wait_value("a", "hello, world", "out/a in the default greeting");
	wait_value("b", "hello, there", "out/b in the default greeting");
	tu_del(&T, DATA "in/b");
	wait_value("b", NULL, "the orphan out/b deleted");

	/* ill-typed: the host's schema refuses it on any node, nothing written */
	CHECK_INT_EQ(config_set(&B, "{\"greeting\": 5}", &o), 2);
	if (!strstr(o.err, "field \"greeting\": expected a string, got 5"))
		fprintf(stderr, "stderr: %s\n", o.err);
	CHECK(strstr(o.err, "field \"greeting\": expected a string, got 5") != NULL);
	ctl_out_free(&o);
	CHECK(tu_get(&T, PFX "/" PLUGIN "/config", NULL) == NULL);
	CHECK_INT_EQ(config_set(&B, "{\"greeting\": \"hi\"}", &o), 0);
	ctl_out_free(&o);
	wait_value("a", "hi, world", "the leader rewrites out/a with the new greeting");
}

static void test_failover_keeps_acting(void)
{
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	obs_wait_leader(g_obs, "b", 15000);
	put_input("c", "again");
	wait_value("c", "hi, again", "the new leader acts with the greeting it holds");
	host_start(&A, harness_etcd_urls(H), ARGS);
	host_wait_state(&A, PLUGIN, "campaigning", true, 15000);
}

static void test_hot_reload_to_2_0(void)
{
	struct ctl_out o;
	install(&A, "controller40-2.0.0");
	install(&B, "controller40-2.0.0");
	obs_wait_status_done(g_obs, REL(2, 0, 0), 30000);
	wait_value("a", "hi, world!", "out/a in 2.0.0's form");
	wait_value("c", "hi, again!", "out/c in 2.0.0's form");
	put_input("d", "more");
	wait_value("d", "hi, more!", "2.0.0 acts on a new input");
	CHECK_INT_EQ(config_set(&A, "{\"greeting\": \"yo\"}", &o), 0);
	ctl_out_free(&o);
	wait_value("a", "yo, world!", "2.0.0 follows a config change");
	wait_value("c", "yo, again!", "2.0.0 follows a config change");
}

/* once an output held 2.0.0's form ("...!"), no later write has 1.0.0's */
static void test_no_output_flips_back(void)
{
	struct inv_history h;
	inv_history_load(&T, DATA "out/", &h);
	size_t v2_writes = 0;
	for (size_t i = 0; i < h.n; i++) {
		const struct inv_event *e = &h.ev[i];
		bool v2 = !e->del && e->val_len > 0 && e->val[e->val_len - 1] == '!';
		v2_writes += v2;
		for (size_t j = 0; v2 && j < h.n; j++) {
			const struct inv_event *l = &h.ev[j];
			bool back = l->rev > e->rev && !l->del && strcmp(l->key, e->key) == 0 &&
			            (l->val_len == 0 || l->val[l->val_len - 1] != '!');
			if (back)
				fprintf(stderr, "%s: 1.0.0's \"%s\" at revision %lld after 2.0.0's at %lld\n",
				        l->key, (const char *)l->val, (long long)l->rev, (long long)e->rev);
			CHECK(!back);
		}
	}
	CHECK(v2_writes >= 3);
	inv_history_free(&h);
}

int main(void)
{
	e2e_start(&H, &T, (struct host *const[]){&A, &B, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_outputs_follow_inputs_and_config);
	RUN(test_failover_keeps_acting);
	RUN(test_hot_reload_to_2_0);
	RUN(test_no_output_flips_back);

	host_signal(&A, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_OK(host_wait(&B, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(B.exit_status, 0);
	e2e_stop(H, &T, g_obs);
	return 0;
}
