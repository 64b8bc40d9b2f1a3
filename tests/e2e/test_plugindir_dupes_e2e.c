/* SPDX-License-Identifier: MIT */
/*
 * test_plugindir_dupes_e2e - several files in the plugin directory provide
 * one plugin name (a real `leasehold`, real etcd, the example plugin built
 * at 1.0.0 and 1.1.0, a check-only "reconciler" 9.0.0 whose init fails):
 * - start-up with both files present, created in either order: the newest
 *   release runs, the older file was never loaded, it is `superseded`;
 * - the reproduction: a newer file dropped next to the running one
 *   hot-reloads to it; removing the older (superseded) file then changes
 *   nothing; the CLI shows `superseded by` (table, status, --json) and
 *   addresses a file by its file name and the plugin by its plugin name;
 * - removing the file that runs hands over to the next best file by a hot
 *   reload (never a stop);
 * - files that fail (init fails, group/world-writable, bad ABI) never
 *   supersede a working one, not even when the running file goes; a file
 *   fixed without a directory event is taken up by `reload FILE`.
 *
 * Waiting is for events with deadlines: cluster events through an observer
 * election, the daemon's view by polling `plugins --json` with a deadline.
 */
#include "config.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"

#define PFX "/lhdup"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A;

static const char *const HOST_ARGS[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", NULL};

/* ---- predicates for ctl_wait_plugin ---- */

/* the plugin runs (in the election, no error) from file arg */
static bool p_runs_from(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state"), *f = jstr(p, "file");
	return p && s && f && strcmp(f, (const char *)arg) == 0 &&
	       (strcmp(s, "leading") == 0 || strcmp(s, "campaigning") == 0 ||
		strcmp(s, "standby") == 0) &&
	       jget(p, "error") == NULL;
}

static bool p_superseded_by(json_object *p, const void *arg)
{
	const char *s = jstr(p, "state"), *by = jstr(p, "superseded_by");
	return p && s && strcmp(s, "superseded") == 0 && by && strcmp(by, (const char *)arg) == 0;
}

static bool p_failed_with(json_object *p, const void *arg)
{
	const char *e = jstr(p, "error"), *s = jstr(p, "state");
	return p && s && strcmp(s, "failed") == 0 && e && strstr(e, (const char *)arg);
}

static bool p_absent(json_object *p, const void *arg)
{
	(void)arg;
	return p == NULL;
}

/* ---- helpers ---- */

/* the mod revision of the host's member record, 0 when absent */
static int64_t member_rev(void)
{
	char key[128];
	snprintf(key, sizeof(key), PFX "/" PLUGIN "/members/%s", A.node);
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, key, &kvs);
	int64_t rev = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->key_len == strlen(key) && memcmp(kvs[i]->key, key, kvs[i]->key_len) == 0)
			rev = kvs[i]->mod_revision;
	tu_list_free(kvs, n);
	return rev;
}

/* wait until the plugin runs from `file` at `release`; returns its token */
static int64_t wait_runs(const char *file, const char *release, struct release rel,
			 const char *what)
{
	json_object *p = ctl_wait_plugin(&A, PLUGIN, p_runs_from, file, 15000, what);
	CHECK_STR_EQ(jstr(p, "release"), release);
	CHECK_STR_EQ(jstr(p, "name"), PLUGIN);
	int64_t token = json_object_get_int64(jget(p, "fencing_token"));
	json_object_put(p);
	obs_wait_member_release(g_obs, A.node, rel, 15000);
	return token;
}

static void wait_superseded(const char *file, const char *release, const char *by)
{
	char what[256];
	snprintf(what, sizeof(what), "%s superseded by %s", file, by);
	json_object *p = ctl_wait_plugin(&A, file, p_superseded_by, by, 15000, what);
	CHECK_STR_EQ(jstr(p, "name"), PLUGIN);
	CHECK_STR_EQ(jstr(p, "file"), file);
	CHECK_STR_EQ(jstr(p, "release"), release);
	CHECK(jget(p, "error") == NULL);
	CHECK(jget(p, "leader") == NULL);
	json_object_put(p);
}

static void wait_failed(const char *file, const char *reason)
{
	char what[256];
	snprintf(what, sizeof(what), "%s failed with \"%s\"", file, reason);
	json_object *p = ctl_wait_plugin(&A, file, p_failed_with, reason, 15000, what);
	fprintf(stderr, "%s: %s\n", file, jstr(p, "error"));
	json_object_put(p);
}

static void remove_file(const char *file)
{
	char path[700];
	CHECK(unlink(host_plugin_path(&A, file, path, sizeof(path))) == 0);
}

static void clear_plugin_dir(void)
{
	DIR *d = opendir(A.plugin_dir);
	CHECK(d != NULL);
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
			remove_file(de->d_name);
	closedir(d);
}

static void log_has(long mark, const char *what, bool want)
{
	char *log = host_log_since(&A, mark);
	if ((strstr(log, what) != NULL) != want) {
		fprintf(stderr, "the log %s \"%s\" since the mark:\n%s\n",
			want ? "lacks" : "has", what, log);
		exit(1);
	}
	free(log);
}

static void ctl_out_has(const char *want, ...) __attribute__((sentinel));
/* `leaseholdctl ARGS...` (NULL-terminated) exits 0 and its stdout
 * contains `want` */
static void ctl_out_has(const char *want, ...)
{
	const char *args[8];
	size_t n = 0;
	va_list ap;
	va_start(ap, want);
	const char *a;
	while ((a = va_arg(ap, const char *)) != NULL && n < 7)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	struct ctl_out o;
	ctl_run(&o, A.control, args);
	if (o.status != 0 || !strstr(o.out, want)) {
		fprintf(stderr, "leaseholdctl %s %s: exit %d, want 0 and \"%s\" in:\n%s%s\n",
			args[0], n > 1 ? args[1] : "", o.status, want, o.out, o.err);
		exit(1);
	}
	ctl_out_free(&o);
}

static void stop_host(void)
{
	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	CHECK_INT_EQ(A.exit_status, 0);
}

/* ---- tests ---- */

static void test_startup_picks_the_newest_in_either_creation_order(void)
{
	/* a.so sorts first and is the older release: a daemon that decides
	 * file by file as it reads the directory would run a.so */
	for (int order = 0; order < 2; order++) {
		tu_del_prefix(&T, PFX "/");
		clear_plugin_dir();
		if (order == 0) {
			host_install_plugin(&A, "1.0.0", "a.so");
			host_install_plugin(&A, "1.1.0", "b.so");
		} else {
			host_install_plugin(&A, "1.1.0", "b.so");
			host_install_plugin(&A, "1.0.0", "a.so");
		}
		long mark = host_log_size(&A);
		host_start(&A, harness_etcd_urls(g_etcd), HOST_ARGS);
		host_wait_control(&A, 15000);
		wait_runs("b.so", "1.1.0", REL(1, 1, 0), "b.so (1.1.0) running after the start");
		wait_superseded("a.so", "1.0.0", "b.so");
		/* the older file never ran, not even for a moment */
		log_has(mark, "plugin reconciler 1.1.0 loaded from b.so", true);
		log_has(mark, "loaded from a.so", false);
		log_has(mark, "hot reload", false);
		stop_host();
	}
}

static int64_t g_token;

static void test_newer_file_next_to_the_running_one_takes_over(void)
{
	tu_del_prefix(&T, PFX "/");
	clear_plugin_dir();
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), HOST_ARGS);
	host_wait_control(&A, 15000);
	wait_runs("reconciler.so", "1.0.0", REL(1, 0, 0), "reconciler.so running");
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);

	/* the reproduction: x-1.1.0.so dropped next to x.so ... */
	long mark = host_log_size(&A);
	host_install_plugin(&A, "1.1.0", "reconciler-1.1.0.so");
	wait_runs("reconciler-1.1.0.so", "1.1.0", REL(1, 1, 0),
		  "the hot reload to reconciler-1.1.0.so");
	wait_superseded("reconciler.so", "1.0.0", "reconciler-1.1.0.so");
	obs_wait_status_done(g_obs, REL(1, 1, 0), 15000);
	/* the token of the new instance's term: it leads once its status is
	 * written (right after the reload it may still be campaigning, 0) */
	json_object *lead = ctl_plugin_json(&A, PLUGIN);
	g_token = json_object_get_int64(jget(lead, "fencing_token"));
	json_object_put(lead);
	CHECK(g_token > 0);
	log_has(mark, "plugin reconciler: hot reload to 1.1.0 from reconciler-1.1.0.so", true);
	log_has(mark, "refusing", false);

	/* the CLI: the plugin by its name, a file by its file name */
	ctl_out_has("reconciler.so superseded by reconciler-1.1.0.so", "plugins", NULL);
	ctl_out_has("state:         superseded\n", "status", "reconciler.so", NULL);
	ctl_out_has("superseded by: reconciler-1.1.0.so\n", "status", "reconciler.so", NULL);
	ctl_out_has("release:       1.0.0\n", "status", "reconciler.so", NULL);
	ctl_out_has("file:          reconciler-1.1.0.so\n", "status", PLUGIN, NULL);
	ctl_out_has("\"superseded_by\": \"reconciler-1.1.0.so\"", "status", "reconciler.so", "--json",
		    NULL);
	ctl_out_has("\"superseded_by\": null", "status", PLUGIN, "--json", NULL);
	ctl_out_has("reload requested: reconciler.so", "reload", "reconciler.so", NULL);
	ctl_out_has("reload requested: reconciler", "reload", PLUGIN, NULL);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "reload", "nosuch.so", NULL), 2);
	ctl_out_free(&o);

	/* ... and x.so removed: x goes on untouched from x-1.1.0.so */
	int64_t rev = member_rev();
	remove_file("reconciler.so");
	json_object *p = ctl_wait_plugin(&A, "reconciler.so", p_absent, NULL, 15000,
					 "the row of the removed reconciler.so gone");
	CHECK(p == NULL);
	p = ctl_plugin_json(&A, PLUGIN);
	CHECK(p_runs_from(p, "reconciler-1.1.0.so"));
	CHECK_INT_EQ(json_object_get_int64(jget(p, "fencing_token")), g_token);
	json_object_put(p);
	CHECK_INT_EQ(member_rev(), rev);
	/* the daemon stops a plugin with "...; stopping NAME" */
	log_has(mark, "; stopping", false);
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", NULL), 0);
	CHECK_INT_EQ(ctl_table_rows(o.out), 1);
	ctl_out_free(&o);
}

static void test_removing_the_running_file_hands_over(void)
{
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	wait_superseded("reconciler.so", "1.0.0", "reconciler-1.1.0.so");
	long mark = host_log_size(&A);
	remove_file("reconciler-1.1.0.so");
	wait_runs("reconciler.so", "1.0.0", REL(1, 0, 0), "the hand-over to reconciler.so");
	log_has(mark, "plugin reconciler: hot reload to 1.0.0 from reconciler.so", true);
	log_has(mark, "; stopping", false);
	CHECK(member_rev() > 0);
}

static void test_a_broken_newer_file_never_supersedes(void)
{
	long mark = host_log_size(&A);
	int64_t rev = member_rev();
	/* a newer release whose init fails, a newer release anyone may write,
	 * and a file of another ABI */
	host_install_file(&A, built_test_plugin("init-fails-reconciler"), "reconciler-9.0.0.so",
			  0644);
	host_install_file(&A, built_plugin("1.1.0"), "reconciler-1.1.0.so", 0666);
	host_install_file(&A, built_test_plugin("bad-major"), "reconciler-2.so", 0644);
	wait_failed("reconciler-9.0.0.so",
		    "reconciler-9.0.0.so: init failed: Input/output error: this build always fails init");
	wait_failed("reconciler-1.1.0.so", "world-writable");
	wait_failed("reconciler-2.so", "plugin ABI major");
	json_object *p = ctl_plugin_json(&A, PLUGIN);
	CHECK(p_runs_from(p, "reconciler.so"));
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	json_object_put(p);
	CHECK_INT_EQ(member_rev(), rev);
	log_has(mark, "hot reload", false);

	/* the mode fixed (no directory event): `reload FILE` takes it up */
	char path[700];
	CHECK(chmod(host_plugin_path(&A, "reconciler-1.1.0.so", path, sizeof(path)), 0644) == 0);
	ctl_out_has("reload requested", "reload", "reconciler-1.1.0.so", NULL);
	wait_runs("reconciler-1.1.0.so", "1.1.0", REL(1, 1, 0), "reconciler-1.1.0.so after reload");
	wait_superseded("reconciler.so", "1.0.0", "reconciler-1.1.0.so");
	wait_failed("reconciler-9.0.0.so", "init failed");

	/* the running file goes: the next best WORKING file runs, not 9.0.0 */
	remove_file("reconciler-1.1.0.so");
	wait_runs("reconciler.so", "1.0.0", REL(1, 0, 0), "the hand-over past the broken file");
	wait_failed("reconciler-9.0.0.so", "init failed");
	/* the only file left of the name fails: the plugin stops, gracefully */
	mark = host_log_size(&A);
	remove_file("reconciler.so");
	obs_wait_members(g_obs, 0, 15000);
	log_has(mark, "plugin file reconciler.so removed; stopping reconciler", true);
	wait_failed("reconciler-9.0.0.so", "init failed");
	CHECK_INT_EQ(member_rev(), 0);
	remove_file("reconciler-9.0.0.so");
	remove_file("reconciler-2.so");
}

int main(void)
{
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, NULL}, &g_obs, PFX, PLUGIN);

	RUN(test_startup_picks_the_newest_in_either_creation_order);
	RUN(test_newer_file_next_to_the_running_one_takes_over);
	RUN(test_removing_the_running_file_hands_over);
	RUN(test_a_broken_newer_file_never_supersedes);

	stop_host();
	e2e_stop(g_etcd, &T, g_obs);
	return CHECK_EXIT();
}
