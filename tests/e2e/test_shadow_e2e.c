/* SPDX-License-Identifier: MIT */
/*
 * test_shadow_e2e.c - `leaseholdctl shadow` on two real hosts: a leads the
 * example plugin on 1.0.0, b runs the incompatible 1.1.0 and stands by.
 *  - shadow on b reports the writes 1.1.0 would make (its v2 config, the
 *    journal record, the delete of an item 1.0.0 left behind), per key the
 *    old and new value, as a table and as JSON; etcd's revision does not
 *    move across the run and nothing under the data prefix changes;
 *  - shadow on the leader, or naming another node, is refused (exit 2);
 *  - a run past its --timeout answers with exit 1 and what it captured; the
 *    reconcile that runs on writes nothing either;
 *  - a release that would write more than the bound (1000 writes) gets its
 *    txn refused and the report says truncated.
 * The journal invariants hold throughout. Beside it, the watch-driven
 * "mirror" plugin (tests/plugins/mirror.c, it never reads etcd: its world is
 * its two watches' snapshots), a leading 1.0.0 and a standby 1.1.0:
 *  - shadow on b delivers both watches' snapshot at one revision, flagged as
 *    a term's first batches, and previews the puts and the delete that
 *    snapshot implies; nothing moves in etcd; the leader is refused;
 *  - b's mirror file removed while a shadow run of it waits in a snapshot
 *    batch: the run answers at once, abandoned;
 *  - once a's mirror file is removed, b leads while a shadow run of it
 *    waits in a snapshot batch: the run ends (a term began), the batch ran
 *    before on_elected, and b derives from its own term's snapshot (a later
 *    input included), not the preview's.
 * And the keyed plugin (tests/plugins/keyed.c, reconcile_key) on b, behind
 * its paused leader a: one reconcile_key per key of the snapshot, each
 * captured; the leader's own queue is untouched.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PLUGIN "reconciler"
#define MIRROR "mirror"
#define KEYED "keyed"
#define PFX "/lhs"
#define MDATA PFX "/" MIRROR "/data/"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B;
/* LH_MIRROR_HOLD=<file> for b: while the file exists, b's mirror waits in
 * on_watch_events */
static char g_hold[600], g_hold_env[640];
static const char *g_args[] = {"--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0",
                               "--reconcile-interval", "1h", NULL};

static bool p_value(void *a)
{
	const char *const *kv = a;
	uint8_t *v = tu_get(&T, kv[0], NULL);
	bool ok = v && strcmp((char *)v, kv[1]) == 0;
	free(v);
	return ok;
}

/* a plugin's data prefix as one string of key=value@mod_revision lines */
static char *data_snapshot_of(const char *plugin)
{
	char pfx[128];
	snprintf(pfx, sizeof(pfx), PFX "/%s/data/", plugin);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, pfx, &kvs);
	size_t cap = 1, len = 0;
	for (size_t i = 0; i < n; i++)
		cap += kvs[i]->key_len + kvs[i]->value_len + 32;
	char *s = calloc(1, cap);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%.*s=%.*s@%lld\n", (int)kvs[i]->key_len,
		                        (char *)kvs[i]->key, (int)kvs[i]->value_len,
		                        kvs[i]->value ? (char *)kvs[i]->value : "",
		                        (long long)kvs[i]->mod_revision);
	tu_list_free(kvs, n);
	return s;
}

static char *data_snapshot(void)
{
	return data_snapshot_of(PLUGIN);
}

/* a's view of the cluster (members --json, from the records in etcd):
 * the field of node's row for plugin (a copy to free), NULL when none */
static char *member_field(const char *plugin, const char *node, const char *field)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "members", plugin, "--json", NULL), 0);
	struct json_object *a = json_tokener_parse(o.out);
	char *v = NULL;
	for (size_t i = 0; a && !v && i < json_object_array_length(a); i++) {
		struct json_object *m = json_object_array_get_idx(a, i);
		const char *f = jstr(m, field);
		if (strcmp(jstr(m, "node"), node) == 0 && f)
			v = strdup(f);
	}
	json_object_put(a);
	ctl_out_free(&o);
	return v;
}

/* b does not lead and its node record says so: nothing of b's moves
 * etcd's revision any more */
static bool p_b_recorded_standby(void *arg)
{
	char *st = member_field(arg, "b", "state");
	/* a newer release stands by; the same release campaigns */
	bool ok = st && (strcmp(st, "standby") == 0 || strcmp(st, "campaigning") == 0);
	free(st);
	return ok;
}

/* start b on 1.1.0 with env; it stands by behind a's 1.0.0 */
static void start_b(const char *const *env)
{
	host_install_plugin(&B, "1.1.0", "reconciler.so");
	host_install_file(&B, built_test_plugin("mirror-1.1.0"), "mirror.so", 0644);
	host_install_file(&B, built_test_plugin("keyed"), "keyed.so", 0644);
	host_start_env(&B, harness_etcd_urls(g_etcd), g_args, env);
	obs_wait_member_release(g_obs, "b", REL(1, 1, 0), 15000);
	host_wait_state(&B, PLUGIN, "standby", true, 15000);
	host_wait_state(&B, MIRROR, "standby", true, 15000);
	tu_wait(&T, p_b_recorded_standby, (void *)PLUGIN, 15000, "b's node record says standby");
	tu_wait(&T, p_b_recorded_standby, (void *)MIRROR, 15000,
	        "b's mirror node record says standby");
	tu_wait(&T, p_b_recorded_standby, (void *)KEYED, 15000,
	        "b's keyed node record says it campaigns behind a");
}

static struct json_object *shadow_json_of(const struct host *h, const char *plugin,
                                          int want_status, const char *timeout)
{
	struct ctl_out o;
	int st = host_ctl(h, &o, "shadow", plugin, "--node", h->node, "--timeout", timeout, "-o",
	                  "json", NULL);
	if (st != want_status)
		fprintf(stderr, "shadow: exit %d, want %d\nstdout: %s\nstderr: %s\n", st, want_status,
		        o.out, o.err);
	CHECK_INT_EQ(st, want_status);
	struct json_object *j = json_tokener_parse(o.out);
	CHECK(j != NULL);
	ctl_out_free(&o);
	return j;
}

static struct json_object *shadow_json(const struct host *h, int want_status, const char *timeout)
{
	return shadow_json_of(h, PLUGIN, want_status, timeout);
}

static struct json_object *find_write(struct json_object *j, const char *key)
{
	struct json_object *ws = jget(j, "writes");
	for (size_t i = 0; ws && i < json_object_array_length(ws); i++) {
		struct json_object *w = json_object_array_get_idx(ws, i);
		if (strcmp(jstr(w, "key"), key) == 0)
			return w;
	}
	return NULL;
}

static void test_shadow_reports_the_newer_release_writes(void)
{
	const char *env[] = {"LH_EXAMPLE_DELAY_MS=700", g_hold_env, NULL};
	start_b(env);
	/* an item 1.0.0 does not want any more: 1.1.0 deletes it too */
	tu_put(&T, PFX "/" PLUGIN "/data/config/items/7", "stale", 5);
	char *before = data_snapshot();
	int64_t rev = tu_revision(&T);

	struct json_object *j = shadow_json(&B, 0, "10s");
	CHECK_INT_EQ(json_object_get_int64(jget(j, "puts")), 5); /* schema, 3 items, journal */
	CHECK_INT_EQ(json_object_get_int64(jget(j, "deletes")), 1);
	CHECK_INT_EQ(json_object_get_int64(jget(j, "revision")), rev);
	CHECK(!json_object_get_boolean(jget(j, "truncated")));
	struct json_object *w = find_write(j, "config/schema");
	CHECK(w != NULL);
	CHECK_STR_EQ(jstr(w, "op"), "put");
	CHECK_STR_EQ(jstr(w, "old.head"), "reconciler/v1");
	CHECK_STR_EQ(jstr(w, "new.head"), "reconciler/v2");
	w = find_write(j, "config/items/0");
	CHECK(w != NULL);
	CHECK_STR_EQ(jstr(w, "old.head"), "item=0;state=ready");
	CHECK(!json_object_get_boolean(jget(w, "old.truncated")));
	/* 37 bytes: the first 32 are shown */
	CHECK_STR_EQ(jstr(w, "new.head"), "{\"item\":0,\"state\":\"ready\",\"forma");
	CHECK(json_object_get_boolean(jget(w, "new.truncated")));
	CHECK_INT_EQ(json_object_get_int64(jget(w, "new.length")), 37);
	w = find_write(j, "journal/0000000000000000-00000000");
	CHECK(w && jget(w, "old") == NULL); /* a new key */
	w = find_write(j, "config/items/7");
	CHECK(w && strcmp(jstr(w, "op"), "delete") == 0 && jget(w, "new") == NULL);
	CHECK_STR_EQ(jstr(w, "old.head"), "stale");
	json_object_put(j);

	/* the table */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "shadow", PLUGIN, NULL), 0);
	CHECK(strstr(o.out, "5 put(s), 1 delete(s), 0 unchanged") != NULL);
	CHECK(strstr(o.out, "nothing was written") != NULL);
	CHECK(strstr(o.out, "\"reconciler/v1\" (13 B, ") != NULL);
	ctl_out_free(&o);

	/* nothing moved */
	CHECK_INT_EQ(tu_revision(&T), rev);
	char *after = data_snapshot();
	CHECK_STR_EQ(after, before);
	free(after);
	free(before);
	CHECK_STR_EQ(obs_leader(g_obs), "a");
}

/* shadow of plugin on b succeeds with puts and deletes, at etcd's current
 * revision, and neither the revision nor the plugin's data moves; the
 * report (caller frees it) */
static struct json_object *shadow_on_b_moves_nothing(const char *plugin, int64_t puts,
                                                     int64_t deletes)
{
	char *before = data_snapshot_of(plugin);
	int64_t rev = tu_revision(&T);
	struct json_object *j = shadow_json_of(&B, plugin, 0, "10s");
	CHECK_INT_EQ(json_object_get_int64(jget(j, "puts")), puts);
	CHECK_INT_EQ(json_object_get_int64(jget(j, "deletes")), deletes);
	CHECK_INT_EQ(json_object_get_int64(jget(j, "revision")), rev);
	CHECK(!json_object_get_boolean(jget(j, "truncated")));
	CHECK_INT_EQ(tu_revision(&T), rev);
	char *after = data_snapshot_of(plugin);
	CHECK_STR_EQ(after, before);
	free(after);
	free(before);
	return j;
}

/* "in@R/F/N aux@R/F/N" (mirror.c's meta/cut) without its revisions */
static char *cut_shape(const char *cut, long long *ret_in_rev, long long *ret_aux_rev)
{
	unsigned f1, f2;
	int n1, n2;
	CHECK(cut && sscanf(cut, "in@%lld/%u/%d aux@%lld/%u/%d", ret_in_rev, &f1, &n1, ret_aux_rev,
	                    &f2, &n2) == 6);
	char *s = NULL;
	CHECK(asprintf(&s, "%u/%d %u/%d", f1, n1, f2, n2) > 0);
	return s;
}

static void test_shadow_previews_the_watches_snapshot(void)
{
	/* an output whose input is gone (mirror derives out/ from in/ alone) */
	tu_put(&T, MDATA "out/zz", "v1:stale", 8);
	int64_t rev = tu_revision(&T);
	/* out/a and out/b in 1.1.0's form, meta/cut; the stale output deleted */
	struct json_object *j = shadow_on_b_moves_nothing(MIRROR, 3, 1);
	struct json_object *w = find_write(j, "out/a");
	CHECK(w != NULL);
	CHECK_STR_EQ(jstr(w, "old.head"), "v1:1");
	CHECK_STR_EQ(jstr(w, "new.head"), "v2:1@blue");
	w = find_write(j, "out/b");
	CHECK(w && strcmp(jstr(w, "new.head"), "v2:2@blue") == 0);
	w = find_write(j, "out/zz");
	CHECK(w && strcmp(jstr(w, "op"), "delete") == 0);
	/* both watches at one revision, the current one; their batches
	 * flagged as a's own term's first ones were (old: a's meta/cut) */
	w = find_write(j, "meta/cut");
	CHECK(w != NULL);
	long long in_rev, aux_rev, a_in, a_aux;
	char *shadow_shape = cut_shape(jstr(w, "new.head"), &in_rev, &aux_rev);
	char *term_shape = cut_shape(jstr(w, "old.head"), &a_in, &a_aux);
	CHECK_INT_EQ(in_rev, rev);
	CHECK_INT_EQ(aux_rev, rev);
	CHECK_STR_EQ(shadow_shape, "3/1 3/1"); /* SNAPSHOT|SYNCED, one batch each */
	CHECK_STR_EQ(shadow_shape, term_shape);
	free(shadow_shape);
	free(term_shape);
	json_object_put(j);

	/* the leader is refused */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "shadow", MIRROR, NULL), 2);
	CHECK(strstr(o.err, "node a leads plugin 'mirror'") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(tu_revision(&T), rev);
}

#define KDATA PFX "/" KEYED "/data/"

/* a's node record of the keyed plugin says it is paused (the pause's one
 * write of a's) */
static bool p_keyed_leader_paused(void *arg)
{
	(void)arg;
	char *r = member_field(KEYED, "a", "reason");
	bool seen = r && strstr(r, "paused");
	free(r);
	return seen;
}

/* the keyed plugin (tests/plugins/keyed.c: out/<n> = "done:<in/n>", an
 * output without input deleted) on b, same release as its leader a, which
 * is paused so that the inputs wait: one reconcile_key per key of the
 * snapshot (key_of maps an output to its input's key), each captured */
static void test_shadow_previews_a_keyed_plugin(void)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "pause", KEYED, NULL), 0);
	ctl_out_free(&o);
	tu_wait(&T, p_keyed_leader_paused, NULL, 10000, "a's keyed record says paused");
	tu_put(&T, KDATA "in/k1", "x", 1);
	tu_put(&T, KDATA "out/orphan", "done:y", 6);
	struct json_object *j = shadow_on_b_moves_nothing(KEYED, 1, 1);
	struct json_object *w = find_write(j, "out/k1");
	CHECK(w && jget(w, "old") == NULL);
	CHECK_STR_EQ(jstr(w, "new.head"), "done:x");
	w = find_write(j, "out/orphan");
	CHECK(w && strcmp(jstr(w, "op"), "delete") == 0);
	CHECK_STR_EQ(jstr(w, "old.head"), "done:y");
	json_object_put(j);

	/* the leader's own queue still holds both keys: resumed, it acts */
	CHECK_INT_EQ(host_ctl(&A, &o, "resume", KEYED, NULL), 0);
	ctl_out_free(&o);
	const char *k1[] = {KDATA "out/k1", "done:x"};
	tu_wait(&T, p_value, k1, 15000, "a's keyed reconciles in/k1 once resumed");
}

static void test_shadow_refused_on_the_leader_and_another_node(void)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "shadow", PLUGIN, NULL), 2);
	CHECK(strstr(o.err, "node a leads plugin 'reconciler'") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "shadow", PLUGIN, "--node", "a", NULL), 2);
	CHECK(strstr(o.err, "this daemon is node b, not a") != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&B, &o, "shadow", "nosuch", NULL), 2);
	ctl_out_free(&o);

}

static bool p_shadow_free_again(void *a)
{
	(void)a;
	struct ctl_out o;
	int st = host_ctl(&B, &o, "shadow", PLUGIN, "-o", "json", NULL);
	bool busy = st == 2 && strstr(o.err, "in progress");
	CHECK(st == 0 || busy);
	ctl_out_free(&o);
	return st == 0;
}

static void test_shadow_timeout(void)
{
	int64_t rev = tu_revision(&T);
	/* the reconcile takes 700 ms: the run ends first, with what it had */
	struct json_object *j = shadow_json(&B, 1, "150ms");
	const char *e = jstr(j, "error");
	CHECK(e && strstr(e, "did not finish within 150 ms"));
	json_object_put(j);
	/* the reconcile runs on, its txns refused: wait until it returned
	 * (the next run is refused until then) */
	tu_wait(&T, p_shadow_free_again, NULL, 20000, "the timed-out reconcile returns");
	CHECK_INT_EQ(tu_revision(&T), rev);
}

static void test_shadow_bounded(void)
{
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&B, 15000));
	const char *env[] = {"LH_EXAMPLE_ITEMS=1000", g_hold_env, NULL};
	start_b(env);
	int64_t rev = tu_revision(&T);
	struct json_object *j = shadow_json(&B, 1, "30s");
	CHECK(json_object_get_boolean(jget(j, "truncated")));
	CHECK(json_object_get_int64(jget(j, "puts")) <= 1000);
	/* the txn that would pass the bound is refused whole: the writes
	 * captured fall short of it by less than one apply chunk (127 ops) */
	CHECK(json_object_get_int64(jget(j, "puts")) > 1000 - 127);
	const char *e = jstr(j, "error");
	CHECK(e && strstr(e, "more than 1000 writes"));
	json_object_put(j);
	CHECK_INT_EQ(tu_revision(&T), rev);
}

/* mirror's meta/cut names a snapshot after revision *arg, cut as a term's
 * first batches are (the reconcile writes it after the outputs) */
static bool p_cut_after(void *arg)
{
	int64_t after = *(const int64_t *)arg;
	uint8_t *cut = tu_get(&T, MDATA "meta/cut", NULL);
	long long in_rev = 0, aux_rev = 0;
	char *shape = cut_shape((char *)cut, &in_rev, &aux_rev);
	bool ok = in_rev > after && aux_rev > after;
	if (ok)
		CHECK_STR_EQ(shape, "3/1 3/1");
	free(shape);
	free(cut);
	return ok;
}

/* b's mirror runs a callback named cb */
static bool p_b_mirror_in(void *arg)
{
	struct json_object *p = ctl_plugin_json(&B, MIRROR);
	const char *cb = jstr(p, "callback");
	bool in = cb && strcmp(cb, (const char *)arg) == 0;
	json_object_put(p);
	return in;
}

/* start_held_shadow - a shadow run of b's mirror (run) whose first
 * snapshot batch the plugin holds (g_hold exists) until the test lets it go
 * (unlink(g_hold)) */
static void start_held_shadow(struct ctl_proc *run)
{
	FILE *f = fopen(g_hold, "w");
	CHECK(f != NULL);
	fclose(f);
	const char *args[] = {"shadow", MIRROR, "--timeout", "60s", "-o", "json", NULL};
	ctl_spawn(run, B.control, args);
	tu_wait(&T, p_b_mirror_in, (void *)"on_watch_events", 15000,
	        "the shadow run's first batch waits in b's mirror");
}

/* b's mirror file is removed while a shadow run of it waits in its first
 * snapshot batch: the run answers at once (exit 1, abandoned), not once the
 * worker is free again; b's mirror then stops, and comes back with its
 * file */
static void test_shadow_ends_when_its_instance_stops(void)
{
	struct ctl_proc run;
	start_held_shadow(&run);
	char path[4096];
	CHECK(unlink(host_plugin_path(&B, "mirror.so", path, sizeof(path))) == 0);
	struct ctl_out o;
	CHECK_OK(ctl_finish(&run, &o, 15000)); /* the batch still waits */
	CHECK_INT_EQ(o.status, 1);
	struct json_object *j = json_tokener_parse(o.out);
	const char *e = jstr(j, "error");
	CHECK(e && strstr(e, "the plugin's instance stops on this node: the shadow run was "
	                     "abandoned"));
	json_object_put(j);
	ctl_out_free(&o);
	CHECK_OK(unlink(g_hold));
	host_wait_state(&B, MIRROR, "absent", true, 20000);
	host_install_file(&B, built_test_plugin("mirror-1.1.0"), "mirror.so", 0644);
	host_wait_state(&B, MIRROR, "standby", true, 20000);
}

/* b's mirror 1.1.0 leads once a's 1.0.0 leaves, while a shadow run of it
 * waits in its first snapshot batch: the term's on_elected runs after that
 * batch (the event order), the run ends before its next page (a term
 * began), and the term starts from its own snapshot, at a revision after
 * the preview's, with a later input */
static void test_shadow_then_a_term_of_its_own(void)
{
	int64_t shadow_rev = tu_revision(&T);
	struct ctl_proc run;
	start_held_shadow(&run);

	tu_put(&T, MDATA "in/c", "3", 1);
	char path[4096];
	CHECK(unlink(host_plugin_path(&A, "mirror.so", path, sizeof(path))) == 0);
	host_wait_state(&B, MIRROR, "leading", true, 20000);
	CHECK_OK(unlink(g_hold));
	struct ctl_out o;
	CHECK_OK(ctl_finish(&run, &o, 30000));
	CHECK_INT_EQ(o.status, 1);
	struct json_object *j = json_tokener_parse(o.out);
	const char *e = jstr(j, "error");
	CHECK(e && strstr(e, "a term began on this node during the shadow run"));
	CHECK_INT_EQ(json_object_get_int64(jget(j, "puts")), 0);
	json_object_put(j);
	ctl_out_free(&o);
	const char *c[] = {MDATA "out/c", "v2:3@blue"};
	tu_wait(&T, p_value, c, 15000, "b's term derives out/c from its own snapshot");
	const char *a[] = {MDATA "out/a", "v2:1@blue"};
	tu_wait(&T, p_value, a, 15000, "b's term writes out/a");
	CHECK(tu_get(&T, MDATA "out/zz", NULL) == NULL);
	tu_wait(&T, p_cut_after, &shadow_rev, 15000, "b's meta/cut names its term's snapshot");
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	snprintf(g_hold, sizeof(g_hold), "%s/mirror-hold", harness_dir(g_etcd));
	snprintf(g_hold_env, sizeof(g_hold_env), "LH_MIRROR_HOLD=%s", g_hold);
	g_obs = obs_new(&T, PFX, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_file(&A, built_test_plugin("mirror-1.0.0"), "mirror.so", 0644);
	host_install_file(&A, built_test_plugin("keyed"), "keyed.so", 0644);
	tu_put(&T, MDATA "in/a", "1", 1);
	tu_put(&T, MDATA "in/b", "2", 1);
	tu_put(&T, MDATA "aux/label", "blue", 4);
	host_start(&A, harness_etcd_urls(g_etcd), g_args);
	obs_wait_leader(g_obs, "a", 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	const char *schema[] = {PFX "/" PLUGIN "/data/config/schema", "reconciler/v1"};
	tu_wait(&T, p_value, schema, 15000, "1.0.0 writes its config");

	const char *mout[] = {MDATA "out/b", "v1:2"};
	tu_wait(&T, p_value, mout, 15000, "mirror 1.0.0 derives its outputs");
	RUN(test_shadow_reports_the_newer_release_writes);
	RUN(test_shadow_previews_the_watches_snapshot);
	RUN(test_shadow_previews_a_keyed_plugin);
	RUN(test_shadow_refused_on_the_leader_and_another_node);
	RUN(test_shadow_timeout);
	RUN(test_shadow_bounded);
	/* the leader's own reconcile deletes the stale item for real (the
	 * invariants want the leader's desired state at the end) */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "reconcile", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	CHECK(tu_get(&T, PFX "/" PLUGIN "/data/config/items/7", NULL) == NULL);
	CHECK_INT_EQ(inv_check_all(&T, PFX, PLUGIN, NULL), 0);
	RUN(test_shadow_ends_when_its_instance_stops);
	RUN(test_shadow_then_a_term_of_its_own);

	/* a clean exit: no sanitizer report at the daemons' teardown */
	hosts_terminate((struct host *const[]){&A, &B}, 2, 15000, true);
	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
