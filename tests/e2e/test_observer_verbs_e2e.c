/* SPDX-License-Identifier: MIT */
/*
 * test_observer_verbs_e2e.c - the verbs of observer mode that write
 * (`leaseholdctl --etcd URL switchover|config ...`), against a real etcd
 * and three real hosts running the example plugin, with no daemon asked:
 * - switchover --to NODE: NODE leads, exit 0, the daemon's line and JSON
 *   fields; without --to: another node leads; refusals (the target leads
 *   already, is no member, the plugin is paused) exit 2 with the daemon's
 *   messages, nothing written;
 * - config get (none: revision 0), set (written, every node's daemon sees
 *   it, the note that no plugin validated it), set over a stale --revision
 *   (exit 8, nothing written), set of a document that is not a JSON object
 *   (exit 2), get -o json, get of a bad document written behind the CLI's
 *   back (exit 1 with the error);
 * the invariant checker at the end.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PFX "/lhov"
#define PLUGIN "reconciler"
#define K_HANDOVER PFX "/" PLUGIN "/handover"
#define K_CONFIG PFX "/" PLUGIN "/config"

static struct harness_etcd *H;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), NULL};

/* obs - `leaseholdctl --etcd URL --prefix PFX args...` (NULL-terminated) */
static int obs(struct ctl_out *o, ...) __attribute__((sentinel));
static int obs(struct ctl_out *o, ...)
{
	va_list ap;
	va_start(ap, o);
	int st = ctl_observer_vrun(o, harness_etcd_urls(H), PFX, NULL, ap);
	va_end(ap);
	return st;
}

static bool p_campaigns(void *node)
{
	return tu_election_lease(&T, PFX, PLUGIN, node) != 0;
}

/* refused - a switchover refused: exit 2 with needle, nothing written */
static void refused(const char *needle, const char *to)
{
	struct ctl_out o;
	obs(&o, "switchover", PLUGIN, to ? "--to" : NULL, to, NULL);
	if (o.status != 2 || !strstr(o.err, needle))
		fprintf(stderr, "switchover --to %s: exit %d\n%s%s", to ? to : "-", o.status, o.out,
		        o.err);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, "leaseholdctl: switchover refused: ") != NULL);
	CHECK(strstr(o.err, needle) != NULL);
	CHECK(!tu_has_key(&T, K_HANDOVER));
	ctl_out_free(&o);
}

static void test_switchover(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(H), ARGS);
	obs_wait_leader(g_obs, "a", 15000);
	host_start(&B, harness_etcd_urls(H), ARGS);
	host_start(&C, harness_etcd_urls(H), ARGS);
	tu_wait(&T, p_campaigns, (char *)"b", 15000, "b campaigns");
	tu_wait(&T, p_campaigns, (char *)"c", 15000, "c campaigns");

	refused("node a leads plugin 'reconciler' already", "a");
	refused("node nosuch does not run plugin 'reconciler'", "nosuch");
	struct ctl_out o;
	CHECK_INT_EQ(obs(&o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	refused("plugin 'reconciler' is paused", "c");
	CHECK_INT_EQ(obs(&o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "switchover", "nosuch", NULL), 2);
	CHECK(strstr(o.err, "no plugin named 'nosuch'"));
	ctl_out_free(&o);

	/* --to c: c is last in line, so b must give way */
	CHECK_INT_EQ(obs(&o, "switchover", PLUGIN, "--to", "c", "--timeout", "20s", NULL), 0);
	if (!strstr(o.out, ": c leads"))
		fprintf(stderr, "%s%s", o.out, o.err);
	CHECK(strstr(o.out, "plugin reconciler: switchover done (request ") != NULL);
	CHECK(strstr(o.out, "): c leads\n") != NULL);
	ctl_out_free(&o);
	obs_wait_leader(g_obs, "c", 5000);
	host_wait_state(&C, PLUGIN, "leading", true, 10000);
	CHECK(host_alive(&A));

	/* without --to, as JSON: another node than c leads */
	CHECK_INT_EQ(obs(&o, "switchover", PLUGIN, "--json", NULL), 0);
	json_object *j = json_tokener_parse(o.out);
	if (!j)
		fprintf(stderr, "not JSON: %s%s", o.out, o.err);
	CHECK(j != NULL);
	CHECK_INT_EQ(json_object_object_length(j), 6);
	CHECK_STR_EQ(jstr(j, "plugin"), PLUGIN);
	CHECK(json_object_get_boolean(jget(j, "switched")));
	CHECK(jget(j, "to") == NULL && jget(j, "error") == NULL);
	CHECK(json_object_get_int64(jget(j, "revision")) > 0);
	const char *leader = jstr(j, "leader");
	CHECK(leader && (strcmp(leader, "a") == 0 || strcmp(leader, "b") == 0));
	obs_wait_leader(g_obs, leader, 5000);
	json_object_put(j);
	ctl_out_free(&o);
	/* the term history names the observer as the requester */
	CHECK_INT_EQ(obs(&o, "history", PLUGIN, "-o", "json", NULL), 0);
	CHECK(strstr(o.out, "\"switchover\"") != NULL);
	CHECK(strstr(o.out, "requested by leaseholdctl@") != NULL);
	ctl_out_free(&o);
}

/* p_daemon_config - host arg's daemon reads the configuration we wrote */
static bool p_daemon_config(void *arg)
{
	struct ctl_out o;
	bool ok = host_ctl(arg, &o, "config", "get", PLUGIN, NULL) == 0 &&
	          strstr(o.out, "\"prefix\": \"obs-\"") != NULL;
	ctl_out_free(&o);
	return ok;
}

static void test_config(void)
{
	char good[512], bad[512];
	struct ctl_out o;
	snprintf(good, sizeof(good), "%s/good.json", harness_dir(H));
	snprintf(bad, sizeof(bad), "%s/bad.json", harness_dir(H));
	FILE *f = fopen(good, "w");
	CHECK(f != NULL);
	fputs("{\"prefix\": \"obs-\"}\n", f);
	fclose(f);
	f = fopen(bad, "w");
	CHECK(f != NULL);
	fputs("[1, 2]\n", f);
	fclose(f);

	CHECK_INT_EQ(obs(&o, "config", "get", PLUGIN, NULL), 0);
	CHECK_STR_EQ(o.out, "");
	CHECK(strstr(o.err, "no configuration (revision 0)") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "config", "set", PLUGIN, bad, NULL), 2);
	CHECK(strstr(o.err, "nothing written") != NULL);
	CHECK(!tu_has_key(&T, K_CONFIG));
	ctl_out_free(&o);
	CHECK_INT_EQ(obs(&o, "config", "set", PLUGIN, good, NULL), 0);
	CHECK(strstr(o.out, "plugin reconciler: configuration written at revision ") != NULL);
	CHECK(strstr(o.err, "without the plugin's own validation") != NULL);
	ctl_out_free(&o);
	/* every node's daemon has it */
	tu_wait(&T, p_daemon_config, &A, 10000, "a's daemon reads the configuration");
	tu_wait(&T, p_daemon_config, &B, 10000, "b's daemon reads the configuration");
	tu_wait(&T, p_daemon_config, &C, 10000, "c's daemon reads the configuration");

	CHECK_INT_EQ(obs(&o, "config", "get", PLUGIN, "-o", "json", NULL), 0);
	json_object *j = json_tokener_parse(o.out);
	CHECK(j != NULL);
	int64_t rev = json_object_get_int64(jget(j, "revision"));
	CHECK(rev > 0);
	CHECK_STR_EQ(jstr(j, "config.prefix"), "obs-");
	CHECK(jget(j, "error") == NULL);
	json_object_put(j);
	ctl_out_free(&o);

	/* a lost race: written over revision rev - 1, which is not there */
	char stale[32];
	snprintf(stale, sizeof(stale), "%" PRId64, rev - 1);
	CHECK_INT_EQ(obs(&o, "config", "set", PLUGIN, good, "--revision", stale, NULL), 8);
	CHECK(strstr(o.err, "changed meanwhile") != NULL);
	ctl_out_free(&o);

	/* a bad document behind the CLI's back: shown with its error, exit 1 */
	tu_put(&T, K_CONFIG, "not json", 8);
	CHECK_INT_EQ(obs(&o, "config", "get", PLUGIN, NULL), 1);
	CHECK(strstr(o.out, "not json") != NULL);
	CHECK(strstr(o.err, "the stored configuration is not valid") != NULL);
	ctl_out_free(&o);
	/* the flags of observer mode need --etcd */
	const char *argv[] = {"--prefix", PFX, "config", "get", PLUGIN, NULL};
	ctl_run(&o, A.control, argv);
	CHECK_INT_EQ(o.status, 2);
	CHECK(strstr(o.err, "need --etcd") != NULL);
	ctl_out_free(&o);
}

int main(void)
{
	e2e_start(&H, &T, (struct host *const[]){&A, &B, &C, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_switchover);
	RUN(test_config);

	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
	struct host *hs[] = {&A, &B, &C};
	for (size_t i = 0; i < 3; i++) {
		host_signal(hs[i], SIGTERM);
		CHECK_OK(host_wait(hs[i], 15000));
		CHECK_INT_EQ(hs[i]->exit_status, 0);
	}
	e2e_stop(H, &T, g_obs);
	return 0;
}
