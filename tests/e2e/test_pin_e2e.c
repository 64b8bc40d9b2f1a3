/* SPDX-License-Identifier: MIT */
/*
 * test_pin_e2e.c - the release pin (leaseholdctl release pin/unpin/NAME) on
 * three real hosts of the example plugin, 1.0.0 and 1.1.0-reference (a
 * release that asks for the reference rule: without a pin it leads as soon
 * as one node loads it):
 *  - refusals before anything is written: a release no member runs, a
 *    release that is no release, an unknown plugin;
 *  - pinned at 1.0.0, the two 1.0.0 hosts a (the leader) and b get the
 *    1.1.0-reference file: it waits for the pin and they run on; c, restarted
 *    with only the new file, runs 1.1.0 and stands by saying the pin holds
 *    it. The 1.0.0 leader keeps its term and reconciles an input written
 *    meanwhile; `release NAME` shows the pin, the release that acts, the
 *    leader and the members per release; a switchover to c is refused with
 *    the pin as the reason;
 *    The waiting files are loaded and initialised beside what runs on a and b
 *    (their standbys); a shadow run on a, the leader, previews its standby;
 *  - unpin: a and b swap to their standbys (no load on the way), exactly
 *    one handover (one new term in the history), to 1.1.0;
 *  - observer mode: once 1.1.0 reconciled (status 1.1.0) and a host went
 *    back to 1.0.0, a pin at 1.0.0 is refused as older than the status;
 *    with --force it is written with a warning, and 1.0.0 takes the state
 *    back (DONE 1.0.0).
 *  - under that pin, on a: a held-back file whose init fails shows as
 *    failed at once; a good one becomes the standby and goes with its file.
 * The journal invariants hold until the forced hand-back.
 */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "invariants.h"

#define PLUGIN "reconciler"
#define PFX "/lhpin"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;
static const char *g_args[] = {HOST_TEST_ARGS(PFX), NULL};

/* observer - `leaseholdctl --etcd URL --prefix PFX args...` (NULL-terminated) */
static int observer(struct ctl_out *o, ...) __attribute__((sentinel));
static int observer(struct ctl_out *o, ...)
{
	va_list ap;
	va_start(ap, o);
	int st = ctl_observer_vrun(o, harness_etcd_urls(g_etcd), PFX, NULL, ap);
	va_end(ap);
	return st;
}

static bool p_output(void *a)
{
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/" PLUGIN "/data/out/p1", &n);
	bool ok = v && strcmp((char *)v, (const char *)a) == 0;
	free(v);
	return ok;
}

/* the term history holds *a records (the new leader writes its start
 * record within a second of its election) */
static bool p_terms(void *a)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/term-history/", &kvs);
	tu_list_free(kvs, n);
	return n == *(size_t *)a;
}

static size_t terms(const struct host *h, char *last_end, size_t len)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(h, &o, "history", PLUGIN, "--json", NULL), 0);
	json_object *j = json_tokener_parse(o.out);
	CHECK(j && json_object_is_type(j, json_type_array));
	size_t n = json_object_array_length(j);
	if (last_end && n >= 2)
		snprintf(last_end, len, "%s", jstr(json_object_array_get_idx(j, 1), "end_reason"));
	json_object_put(j);
	ctl_out_free(&o);
	return n;
}

/* the release of h's `standby` row of plugin PLUGIN from file (into buf),
 * or "" when there is none */
static const char *standby_row(const struct host *h, const char *file, char *buf, size_t len)
{
	struct json_object *a = ctl_plugins_json(h);
	buf[0] = 0;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *p = json_object_array_get_idx(a, i);
		const char *st = jstr(p, "state"), *f = jstr(p, "file"), *n = jstr(p, "name");
		if (st && f && n && strcmp(st, "standby") == 0 && strcmp(f, file) == 0 &&
		    strcmp(n, PLUGIN) == 0)
			snprintf(buf, len, "%s", jstr(p, "release") ? jstr(p, "release") : "?");
	}
	json_object_put(a);
	return buf;
}

static void expect(int status, struct ctl_out *o, const char *in_err, const char *what)
{
	if (o->status != status || (in_err && !strstr(o->err, in_err)))
		fprintf(stderr, "%s: exit %d, stderr: %s\n", what, o->status, o->err);
	CHECK_INT_EQ(o->status, status);
	CHECK(!in_err || strstr(o->err, in_err) != NULL);
	ctl_out_free(o);
}

static void test_pin_refusals(void)
{
	struct ctl_out o;
	host_ctl(&A, &o, "release", "pin", PLUGIN, "9.9.9", NULL);
	expect(2, &o, "no member of plugin 'reconciler' runs release 9.9.9 (present: 1.0.0)",
	       "a release nobody runs");
	host_ctl(&A, &o, "release", "pin", PLUGIN, "1.x", NULL);
	expect(2, &o, "invalid release '1.x'", "no release");
	host_ctl(&A, &o, "release", "pin", "nosuch", "1.0.0", NULL);
	expect(2, &o, "no plugin named 'nosuch'", "an unknown plugin");
	observer(&o, "release", "pin", "nosuch", "1.0.0", NULL);
	expect(2, &o, "plugin 'nosuch' has no members", "an unknown plugin (observer)");
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/" PLUGIN "/pin", &n);
	CHECK(v == NULL); /* nothing was written */
}

static void test_pin_holds_then_one_handover(void)
{
	struct ctl_out o;
	host_ctl(&B, &o, "release", "pin", PLUGIN, "1.0.0", NULL);
	expect(0, &o, NULL, "pin 1.0.0");
	int64_t token = host_fencing_token(&A, PLUGIN);
	/* the new file on a and b, which run 1.0.0: it waits for the pin */
	long la = host_log_size(&A), lb = host_log_size(&B);
	host_install_plugin(&A, "1.1.0-reference", "reconciler.so");
	host_install_plugin(&B, "1.1.0-reference", "reconciler.so");
	static const char waits[] = "waits: the pin at 1.0.0 holds newer releases back";
	host_wait_log(&T, &A, la, waits, 1, 15000);
	host_wait_log(&T, &B, lb, waits, 1, 15000);
	/* ... and is loaded and initialised beside what runs (the standby) */
	static const char standby[] = "(release 1.1.0) is loaded and initialised beside";
	host_wait_log(&T, &A, la, standby, 1, 15000);
	host_wait_log(&T, &B, lb, standby, 1, 15000);
	char rb[64];
	CHECK_STR_EQ(standby_row(&B, "reconciler.so", rb, sizeof(rb)), "1.1.0");
	/* the release an operator checks before unpinning: a shadow run of
	 * the standby, on the leader's node too, writes nothing */
	CHECK_INT_EQ(host_ctl(&A, &o, "shadow", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "plugin reconciler 1.1.0: shadow run at revision ") != NULL);
	CHECK(strstr(o.out, "; nothing was written") != NULL);
	ctl_out_free(&o);
	/* a node that has nothing at or below the pin runs the new release
	 * and stands by */
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 15000));
	host_install_plugin(&C, "1.1.0-reference", "reconciler.so");
	host_start(&C, harness_etcd_urls(g_etcd), g_args);
	obs_wait_member_release(g_obs, "c", REL(1, 1, 0), 15000);
	host_wait_state(&C, PLUGIN, "standby", true, 15000);
	struct json_object *p = ctl_plugin_json(&C, PLUGIN);
	const char *held = p ? jstr(p, "held_back") : NULL;
	CHECK(held && strstr(held, "release 1.1.0 is newer than the pin 1.0.0: release 1.0.0 leads "
	                           "meanwhile"));
	json_object_put(p);
	p = ctl_plugin_json(&B, PLUGIN);
	CHECK(p != NULL);
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0"); /* still running, its new file waiting */
	json_object_put(p);
	tu_put(&T, PFX "/" PLUGIN "/data/desired/p1", "q1", 2);
	tu_wait(&T, p_output, (void *)"value=q1", 15000, "the pinned 1.0.0 leader reconciles");
	CHECK_INT_EQ(host_fencing_token(&A, PLUGIN), token);
	CHECK_STR_EQ(obs_leader(g_obs), "a");

	CHECK_INT_EQ(host_ctl(&C, &o, "release", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "pin:      1.0.0 (by b") != NULL);
	CHECK(strstr(o.out, "can act:  1.0.0 (") != NULL);
	CHECK(strstr(o.out, "leader:   a (release 1.0.0)") != NULL);
	CHECK(strstr(o.out, "  1.1.0: 1 member(s)") != NULL);
	CHECK(strstr(o.out, "  1.0.0: 2 member(s), 2 ready") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(observer(&o, "release", PLUGIN, "--json", NULL), 0);
	json_object *j = json_tokener_parse(o.out);
	CHECK(j != NULL);
	CHECK_STR_EQ(jstr(j, "pin.release"), "1.0.0");
	CHECK_STR_EQ(jstr(j, "acting.release"), "1.0.0");
	CHECK_STR_EQ(jstr(j, "leader_release"), "1.0.0");
	json_object_put(j);
	ctl_out_free(&o);

	/* a switchover to a node the pin holds back is refused with the reason */
	host_ctl(&A, &o, "switchover", PLUGIN, "--to", "c", NULL);
	expect(2, &o, "node c runs release 1.1.0 of plugin 'reconciler', which may not lead now: "
	              "release 1.1.0 is newer than the pin 1.0.0", "switchover past the pin");

	/* unpin: a and b swap to their standbys; one handover to 1.1.0 */
	size_t before = terms(&A, NULL, 0);
	la = host_log_size(&A);
	lb = host_log_size(&B);
	host_ctl(&A, &o, "release", "unpin", PLUGIN, NULL);
	expect(0, &o, NULL, "unpin");
	obs_wait_member_release(g_obs, "a", REL(1, 1, 0), 20000);
	obs_wait_member_release(g_obs, "b", REL(1, 1, 0), 20000);
	static const char swap[] = "reconciler.so may run now; swapping to its standby";
	host_wait_log(&T, &A, la, swap, 1, 1000);
	host_wait_log(&T, &B, lb, swap, 1, 1000);
	CHECK_INT_EQ(host_log_count(&A, la, standby) + host_log_count(&B, lb, standby), 0);
	size_t want = before + 1;
	tu_wait(&T, p_terms, &want, 15000, "the new term's record");
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	char end[64] = "";
	CHECK(obs_leader(g_obs) != NULL);
	CHECK_INT_EQ(terms(&A, end, sizeof(end)), before + 1);
	/* the old term ends as its leader sees a newer release, or reloads */
	CHECK(strcmp(end, "newer-release") == 0 || strcmp(end, "reload") == 0);
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
}

/* under the (forced) pin at 1.0.0, on a, which runs 1.0.0 and leads: a
 * held-back file whose init fails shows as failed at once, a good one
 * becomes the standby (file row `standby`), its removal drops it, and a
 * runs and leads on throughout */
static void test_pin_standby_fails_early_and_goes_with_its_file(void)
{
	int64_t token = host_fencing_token(&A, PLUGIN);
	long la = host_log_size(&A);
	host_install_file(&A, built_test_plugin("init-fails-reconciler"), "reconciler-9.0.0.so", 0644);
	host_wait_log(&T, &A, la,
		      "reconciler-9.0.0.so: init failed: Input/output error: this build always "
		      "fails init", 1, 15000);
	struct json_object *p = ctl_plugin_json(&A, "reconciler-9.0.0.so");
	CHECK(p != NULL);
	CHECK_STR_EQ(jstr(p, "state"), "failed");
	json_object_put(p);

	host_install_plugin(&A, "1.1.0-reference", "reconciler-1.1.0.so");
	host_wait_log(&T, &A, la, "reconciler-1.1.0.so (release 1.1.0) is loaded and initialised "
		      "beside what runs", 1, 15000);
	p = ctl_plugin_json(&A, "reconciler-1.1.0.so");
	CHECK(p != NULL);
	CHECK_STR_EQ(jstr(p, "state"), "standby");
	CHECK_STR_EQ(jstr(p, "held_back"), "the pin holds it back (loaded and initialised)");
	json_object_put(p);
	char rb[64];
	CHECK_STR_EQ(standby_row(&A, "reconciler-1.1.0.so", rb, sizeof(rb)), "1.1.0");

	char path[1200];
	snprintf(path, sizeof(path), "%s/reconciler-1.1.0.so", A.plugin_dir);
	CHECK_OK(unlink(path));
	host_wait_log(&T, &A, la, "dropping the standby from reconciler-1.1.0.so: its file was "
		      "replaced or removed", 1, 15000);
	p = ctl_plugin_json(&A, PLUGIN);
	CHECK(p != NULL);
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	json_object_put(p);
	CHECK_INT_EQ(host_fencing_token(&A, PLUGIN), token);
	snprintf(path, sizeof(path), "%s/reconciler-9.0.0.so", A.plugin_dir);
	CHECK_OK(unlink(path));
}

static void test_pin_forced_below_status_observer(void)
{
	struct ctl_out o;
	/* 1.1.0 reconciles once every member runs it */
	host_install_plugin(&A, "1.1.0-reference", "reconciler.so");
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	obs_wait_member_release(g_obs, "a", REL(1, 0, 0), 15000);
	observer(&o, "release", "pin", PLUGIN, "1.0.0", NULL);
	expect(2, &o, "release 1.0.0 is older than the status's version 1.1.0", "older than the status");
	observer(&o, "release", "pin", PLUGIN, "1.0.0", "--force", NULL);
	expect(0, &o, "warning: release 1.0.0 is older than the status's version 1.1.0", "--force");
	obs_wait_leader(g_obs, "a", 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 20000);
	CHECK_INT_EQ(observer(&o, "status", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "pin:           1.0.0 (by") != NULL && strstr(o.out, "forced") != NULL);
	ctl_out_free(&o);
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, &B, &C, NULL}, &g_obs, PFX, PLUGIN);
	e2e_hosts_up(g_obs, harness_etcd_urls(g_etcd), g_args,
		     (struct host *const[]){&A, &B, &C, NULL}, true);

	RUN(test_pin_refusals);
	RUN(test_pin_holds_then_one_handover);
	RUN(test_pin_forced_below_status_observer);
	RUN(test_pin_standby_fails_early_and_goes_with_its_file);

	hosts_terminate((struct host *const[]){&A, &B, &C}, 3, 15000, false);
	e2e_stop(g_etcd, &T, g_obs);
	return 0;
}
