/* SPDX-License-Identifier: MIT */
/*
 * test_isolation_timeouts - hung and crashing plugins in real daemons (real
 * etcd, real dlopen of the "stuck" test plugin, leasehold-worker children):
 *  - thread isolation, reconcile hangs forever: the CLI shows "in reconcile
 *    since", the callback timeout deposes the plugin and the other host
 *    leads within timeout + TTL;
 *  - a hot reload of the stuck host to a fixed release proceeds (the stuck
 *    instance is abandoned, its thread left running) and the fixed release
 *    leads;
 *  - process isolation, reconcile hangs: the CLI shows it, the worker is
 *    killed at the timeout, the other host leads;
 *  - thread isolation, SIGSEGV / exit() in reconcile: the daemon dies and
 *    its stderr names the plugin and the callback;
 *  - the private copies the crashed daemon left are removed when it starts
 *    again (only ours: a symlink and a foreign file stay);
 *  - process isolation, SIGSEGV in the first reconcile of a term (handed
 *    over in one batch with on_elected and the replay): the failure names
 *    reconcile;
 *  - a shutdown that times out names the plugin and the callback it waited
 *    on.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "testutil.h"

#define PLUGIN "stuck"
#define TTL_S 3
#define TIMEOUT_MS 2000

static struct harness_etcd *g_etcd;
static struct tu T;
static char g_worker[1024];

/* the daemon flags of every host here; prefix and isolation vary */
static const char *const *args(const char *prefix, const char *isolation, const char *timeout)
{
	static const char *a[32];
	static char cb[64];
	snprintf(cb, sizeof(cb), "reconcile=%s", timeout);
	size_t k = 0;
	a[k++] = "--prefix";
	a[k++] = prefix;
	a[k++] = "--ttl";
	a[k++] = "3";
	a[k++] = "--reconcile-wait";
	a[k++] = "0";
	a[k++] = "--reconcile-interval";
	a[k++] = "1h";
	a[k++] = "--shutdown-timeout";
	a[k++] = "3s";
	a[k++] = "--callback-timeout";
	a[k++] = cb;
	a[k++] = "--isolation";
	a[k++] = isolation;
	a[k++] = "--worker";
	a[k++] = g_worker;
	a[k++] = "--log-level";
	a[k++] = "debug";
	a[k] = NULL;
	return a;
}

static void install(struct host *h, const char *release)
{
	char name[64];
	snprintf(name, sizeof(name), "stuck-%s", release);
	host_install_file(h, built_test_plugin(name), "stuck.so", 0644);
}

/* ---- predicates for tu_wait ---- */

static const struct host *g_h;
static const char *g_text;
static const char *g_cmd;

static bool p_ctl_shows(void *arg)
{
	(void)arg;
	struct ctl_out o;
	if (strcmp(g_cmd, "status") == 0)
		host_ctl(g_h, &o, "status", PLUGIN, NULL);
	else
		host_ctl(g_h, &o, "plugins", NULL);
	bool ok = o.status == 0 && strstr(o.out, g_text) != NULL;
	if (ok)
		fprintf(stderr, "%s %s:\n%s", g_h->node, g_cmd, o.out);
	ctl_out_free(&o);
	return ok;
}

static void wait_ctl(const struct host *h, const char *cmd, const char *text, int ms)
{
	g_h = h;
	g_cmd = cmd;
	g_text = text;
	tu_wait(&T, p_ctl_shows, NULL, ms, text);
}

static bool p_log(void *arg)
{
	(void)arg;
	return host_log_count(g_h, 0, g_text) > 0;
}

static void wait_log(const struct host *h, const char *text, int ms)
{
	g_h = h;
	g_text = text;
	tu_wait(&T, p_log, NULL, ms, text);
}

static bool p_exited(void *arg)
{
	return !host_alive(arg);
}

/* ---- hung reconcile, thread isolation, then a hot reload past it ---- */

static struct host A, B;
static struct observer *g_obs;

/* `stuck` leads with reconcile hung, `other` joins: the CLI shows the hung
 * callback, and `other` leads within the limit + TTL (+ slack for load) */
static void hung_reconcile_hands_over(struct host *stuck, struct host *other,
                                      struct observer *obs, const char *prefix,
                                      const char *isolation, int limit_ms)
{
	static const char *hang[] = {"LH_STUCK_1_0_0=hang:reconcile", NULL};
	char limit[32], want[128];
	snprintf(limit, sizeof(limit), "%dms", limit_ms);
	install(stuck, "1.0.0");
	install(other, "1.0.0");
	host_start_env(stuck, harness_etcd_urls(g_etcd), args(prefix, isolation, limit), hang);
	obs_wait_leader(obs, stuck->node, 20000);
	uint64_t t0 = loop_now();
	wait_ctl(stuck, "status", "callback:      in reconcile since ", limit_ms);
	host_start(other, harness_etcd_urls(g_etcd), args(prefix, isolation, limit));
	obs_wait_leader(obs, other->node, limit_ms + TTL_S * 1000 + 10000);
	fprintf(stderr, "%s leads %llu ms after %s was elected (limit %d ms, ttl %d s)\n",
	        other->node, (unsigned long long)((loop_now() - t0) / LOOP_NS_PER_MS), stuck->node,
	        limit_ms, TTL_S);
	snprintf(want, sizeof(want),
	         "plugin stuck: callback reconcile exceeded its timeout of %d ms", limit_ms);
	wait_log(stuck, want, 5000);
	CHECK(host_alive(stuck));
}

static void test_thread_hung_reconcile_times_out_and_hands_over(void)
{
	hung_reconcile_hands_over(&A, &B, g_obs, "/lhto", "thread", TIMEOUT_MS);
	/* a thread cannot be stopped: the callback is still shown, in the
	 * table too, next to the reason */
	wait_ctl(&A, "plugins", "in reconcile since ", 5000);
	wait_ctl(&A, "status", "error:         plugin worker failed: callback reconcile exceeded", 5000);
}

static void test_hot_reload_proceeds_past_a_stuck_instance(void)
{
	/* a is failed with its 1.0.0 thread stuck in reconcile; the fix */
	install(&A, "1.1.0");
	obs_wait_member_release(g_obs, "a", REL(1, 1, 0), 20000);
	obs_wait_leader(g_obs, "a", 20000);
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	wait_log(&A, "hot reload to 1.1.0", 5000);
	wait_ctl(&A, "status", "release:       1.1.0", 5000);
	wait_ctl(&A, "status", "state:         leading", 5000);
	/* the stuck 1.0.0 is left behind, not dlclosed; shutting down does
	 * not wait for it */
	host_signal(&A, SIGTERM);
	host_signal(&B, SIGTERM);
	CHECK_OK(host_wait(&A, 20000));
	CHECK_OK(host_wait(&B, 20000));
	fprintf(stderr, "exit status: a %d, b %d\n", A.exit_status, B.exit_status);
	CHECK_INT_EQ(A.exit_status, 0);
	CHECK_INT_EQ(B.exit_status, 0);
}

/* ---- hung reconcile, process isolation ---- */

static void test_process_hung_reconcile_killed_and_hands_over(void)
{
	static struct host P, Q;
	struct observer *obs =
	    obs_new(&T, "/lhtop", PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&P, harness_dir(g_etcd), "p");
	host_setup(&Q, harness_dir(g_etcd), "q");
	/* a longer limit than in thread mode: the CLI must see the callback
	 * before the worker is killed */
	hung_reconcile_hands_over(&P, &Q, obs, "/lhtop", "process", 6000);
	wait_log(&P, ": plugin worker (pid ", 5000);
	host_signal(&P, SIGTERM);
	host_signal(&Q, SIGTERM);
	CHECK_OK(host_wait(&P, 20000));
	CHECK_OK(host_wait(&Q, 20000));
	CHECK_INT_EQ(P.exit_status, 0);
	CHECK_INT_EQ(Q.exit_status, 0);
	obs_free(obs);
}

/* ---- crashes in thread isolation: the line on stderr ---- */

static struct host C;
static pid_t g_c_pid; /* the daemon c was before its crash */

/* start h with env, wait until the plugin took the daemon down, check the
 * line; returns the dead daemon's pid */
static pid_t crash_thread_mode(struct host *h, const char *prefix, const char *env,
                              const char *want)
{
	const char *envp[] = {env, NULL};
	install(h, "1.0.0");
	host_start_env(h, harness_etcd_urls(g_etcd), args(prefix, "thread", "2s"), envp);
	pid_t pid = h->pid;
	tu_wait(&T, p_exited, h, 30000, "the daemon dies with its plugin");
	fprintf(stderr, "daemon %ld ended with status %d\n", (long)pid, h->exit_status);
	CHECK(h->exit_status != 0);
	if (host_log_count(h, 0, want) == 0) {
		host_dump_log(h);
		fprintf(stderr, "no line \"%s\"\n", want);
		exit(1);
	}
	return pid;
}

static void test_thread_segv_in_reconcile_names_plugin_and_callback(void)
{
	host_setup(&C, harness_dir(g_etcd), "c");
	g_c_pid = crash_thread_mode(&C, "/lhtoc", "LH_STUCK_1_0_0=segv:reconcile",
	                  "leasehold: FATAL: plugin stuck, callback reconcile: SIGSEGV in the "
	                  "callback; the daemon dies with it (thread isolation)");
}

static void test_thread_exit_in_reconcile_names_plugin_and_callback(void)
{
	static struct host E;
	host_setup(&E, harness_dir(g_etcd), "e");
	crash_thread_mode(&E, "/lhtoe", "LH_STUCK_1_0_0=exit:reconcile",
	                  "leasehold: FATAL: plugin stuck, callback reconcile: exit() called by "
	                  "the plugin in the callback; the daemon dies with it");
}

/* ---- the crashed daemon's private copies ---- */

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void test_stale_private_copies_removed_at_start(void)
{
	/* c crashed (segv test): its private directory is still there */
	char dir[800], copy[900], link[900], foreign[900], target[900];
	snprintf(dir, sizeof(dir), "%s/run/plugins.%ld", C.dir, (long)g_c_pid);
	snprintf(copy, sizeof(copy), "%s/stuck.%ld.0.so", dir, (long)g_c_pid);
	snprintf(link, sizeof(link), "%s/other.%ld.7.so", dir, (long)g_c_pid);
	snprintf(foreign, sizeof(foreign), "%s/notes.txt", dir);
	snprintf(target, sizeof(target), "%s/target.so", C.dir);
	if (!exists(copy)) {
		fprintf(stderr, "the crashed daemon left no copy at %s\n", copy);
		exit(1);
	}
	/* a symlink with our naming pattern and a file of someone else's */
	FILE *f = fopen(target, "w");
	CHECK(f && fputs("not a plugin copy\n", f) >= 0 && fclose(f) == 0);
	CHECK(symlink(target, link) == 0);
	f = fopen(foreign, "w");
	CHECK(f && fputs("not ours\n", f) >= 0 && fclose(f) == 0);

	long from = host_log_size(&C);
	host_start(&C, harness_etcd_urls(g_etcd), args("/lhtoc", "thread", "2s"));
	host_wait_control(&C, 20000);
	CHECK(host_log_count(&C, from, "removed 1 stale private plugin file(s)") == 1);
	CHECK(!exists(copy));
	CHECK(exists(link));   /* not ours to follow nor remove */
	CHECK(exists(target)); /* never followed */
	CHECK(exists(foreign));
	CHECK(exists(dir)); /* not empty: kept */
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 20000));
}

/* ---- the shutdown timeout names what it waited for ---- */

static void test_shutdown_timeout_names_plugin_and_callback(void)
{
	static struct host S;
	static const char *hang[] = {"LH_STUCK_1_0_0=hang:fini", NULL};
	host_setup(&S, harness_dir(g_etcd), "s");
	install(&S, "1.0.0");
	const char *const *base = args("/lhtos", "thread", "2s");
	const char *a[40];
	size_t k = 0;
	for (; base[k]; k++)
		a[k] = base[k];
	a[k++] = "--callback-timeout";
	a[k++] = "fini=none"; /* the shutdown timeout (3 s) is what ends it */
	a[k] = NULL;
	host_start_env(&S, harness_etcd_urls(g_etcd), a, hang);
	host_wait_control(&S, 20000);
	wait_ctl(&S, "status", "state:         leading", 20000);
	host_signal(&S, SIGTERM);
	CHECK_OK(host_wait(&S, 20000));
	CHECK_INT_EQ(S.exit_status, 1);
	wait_log(&S, "shutdown did not finish in time", 1000);
	wait_log(&S, "plugin stuck: still waiting for its callback fini (running for ", 1000);

	/* with a limit on fini below the shutdown timeout, the stuck thread is
	 * abandoned at the limit and the shutdown ends cleanly */
	long from = host_log_size(&S);
	a[k - 1] = "fini=500ms";
	host_start_env(&S, harness_etcd_urls(g_etcd), a, hang);
	host_wait_control(&S, 20000);
	wait_ctl(&S, "status", "state:         leading", 20000);
	host_signal(&S, SIGTERM);
	CHECK_OK(host_wait(&S, 20000));
	CHECK_INT_EQ(S.exit_status, 0);
	CHECK(host_log_count(&S, from, "callback fini exceeded its timeout of 500 ms") == 1);
	CHECK(host_log_count(&S, from, "stopping without waiting for the overrunning callback") ==
	      1);
	CHECK(host_log_count(&S, from, "shutdown did not finish in time") == 0);
}

/* ---- process isolation: the callback that really ran ---- */

static void test_process_crash_in_first_reconcile_names_reconcile(void)
{
	static struct host W;
	static const char *segv[] = {"LH_STUCK_1_0_0=segv:reconcile", NULL};
	host_setup(&W, harness_dir(g_etcd), "w");
	install(&W, "1.0.0");
	host_start_env(&W, harness_etcd_urls(g_etcd), args("/lhtow", "process", "2s"), segv);
	wait_log(&W, "plugin worker failed: plugin worker (pid ", 30000);
	/* the first term: on_elected, the replay and reconcile went in one
	 * batch; the worker died in reconcile, whatever acks it had queued */
	char *log = host_log_since(&W, 0);
	const char *hit = strstr(log, "plugin worker failed: plugin worker (pid ");
	const char *eol = hit ? strchr(hit, '\n') : NULL;
	fprintf(stderr, "%.*s\n", hit ? (int)(eol ? eol - hit : (long)strlen(hit)) : 0,
	        hit ? hit : "");
	CHECK(hit && strstr(hit, " during reconcile (after ") &&
	      (!eol || strstr(hit, " during reconcile (after ") < eol));
	/* and the worker process said so itself before it died */
	CHECK(strstr(log, "leasehold: FATAL: plugin stuck, callback reconcile: SIGSEGV in the "
	                  "callback; the worker process dies"));
	free(log);
	CHECK(host_alive(&W));
	host_signal(&W, SIGTERM);
	CHECK_OK(host_wait(&W, 20000));
}

int main(void)
{
	const char *b = getenv("LH_BUILDDIR");
	snprintf(g_worker, sizeof(g_worker), "%s/leasehold-worker", b && *b ? b : ".");
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	g_obs = obs_new(&T, "/lhto", PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");

	RUN(test_thread_hung_reconcile_times_out_and_hands_over);
	RUN(test_hot_reload_proceeds_past_a_stuck_instance);
	RUN(test_process_hung_reconcile_killed_and_hands_over);
	RUN(test_thread_segv_in_reconcile_names_plugin_and_callback);
	RUN(test_thread_exit_in_reconcile_names_plugin_and_callback);
	RUN(test_stale_private_copies_removed_at_start);
	RUN(test_process_crash_in_first_reconcile_names_reconcile);
	RUN(test_shutdown_timeout_names_plugin_and_callback);

	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
