/* SPDX-License-Identifier: MIT */
/*
 * test_faults_clock - the wall clock of the leader is stepped by +5 h and
 * -5 h while it leads: its lease deadline and keepalives run on
 * CLOCK_BOOTTIME, so nothing may happen: same fencing token, no lease loss,
 * no re-election, reconciles go on.
 *
 * The system clock is never touched: libfaketime (Debian package
 * "faketime") is preloaded into the leader's process only, with
 * DONT_FAKE_MONOTONIC=1 (CLOCK_MONOTONIC and CLOCK_BOOTTIME stay real) and
 * the offset read from a file on every call (FAKETIME_TIMESTAMP_FILE,
 * FAKETIME_NO_CACHE=1), so the test steps it at run time. That the step
 * reached the daemon is proved by the daemon itself: the "last_at" time of
 * its reconciles (time(2)) as shown by leaseholdctl moves by the offset.
 * ASan refuses a preload that comes before its runtime unless
 * verify_asan_link_order=0.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "faultsuite.h"
#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

#define PFX FS_PREFIX
#define PLUGIN FS_PLUGIN

static struct fault_suite F;
static char g_rc[700];

#define HOST_ARGS fs_host_args

static const char *find_libfaketime(void)
{
	static const char *const paths[] = {
	    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	    "/usr/lib/i386-linux-gnu/faketime/libfaketime.so.1",
	    "/usr/lib/arm-linux-gnueabihf/faketime/libfaketime.so.1",
	    "/usr/lib/faketime/libfaketime.so.1",
	    "/usr/local/lib/faketime/libfaketime.so.1",
	};
	const char *env = getenv("LH_LIBFAKETIME");
	if (env && *env)
		return access(env, R_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], R_OK) == 0)
			return paths[i];
	return NULL;
}

/* the offset the leader sees, e.g. "+5h" (write, then rename) */
static void set_offset(const char *spec)
{
	char tmp[720];
	snprintf(tmp, sizeof(tmp), "%s.tmp", g_rc);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, spec, strlen(spec)) == (ssize_t)strlen(spec));
	CHECK(write(fd, "\n", 1) == 1);
	CHECK(close(fd) == 0);
	CHECK(rename(tmp, g_rc) == 0);
}

/* the daemon's last reconcile time (its wall clock) is within 30 min of
 * real now + offset_s */
static bool p_last_at(struct json_object *p, const void *arg)
{
	long offset_s = *(const long *)arg;
	const char *s = p ? jstr(p, "reconcile.last_at") : NULL;
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return false;
	long d = (long)(timegm(&tm) - time(NULL)) - offset_s;
	return d > -1800 && d < 1800;
}

static void wait_offset_seen(long offset_s)
{
	char what[64];
	snprintf(what, sizeof(what), "a's reconcile time at real time %+ld s", offset_s);
	struct json_object *p = ctl_wait_plugin(&F.a, PLUGIN, p_last_at, &offset_s, 5000, what);
	fprintf(stderr, "a's wall clock now reads %s (offset %+ld s)\n",
		jstr(p, "reconcile.last_at"), offset_s);
	json_object_put(p);
}

/* stay a while (> 2 TTLs): a keeps leading with token tok, reconciling */
static void hold_and_watch(int64_t tok, int ms)
{
	uint64_t t0 = loop_now();
	size_t n0 = jwatch_count(F.jw, "a", tok);
	while ((loop_now() - t0) / LOOP_NS_PER_MS < (uint64_t)ms) {
		const char *l = obs_leader(F.obs);
		CHECK(l && strcmp(l, "a") == 0);
		loop_run_once(F.t.loop, 50);
	}
	size_t n1 = jwatch_count(F.jw, "a", tok);
	fprintf(stderr, "  %zu more reconciles by a under token %" PRId64 " in %d ms\n", n1 - n0,
		tok, ms);
	CHECK(n1 >= n0 + 3);
	CHECK_INT_EQ(jwatch_count(F.jw, NULL, 0), jwatch_count(F.jw, "a", tok));
}

static void test_wall_clock_steps_do_not_matter(void)
{
	const char *lib = find_libfaketime();
	if (!lib) {
		fprintf(stderr, "libfaketime not found: install the Debian package \"faketime\" "
				"(or set LH_LIBFAKETIME to libfaketime.so.1)\n");
		exit(99);
	}
	snprintf(g_rc, sizeof(g_rc), "%s/faketime.rc", harness_dir(F.etcd));
	set_offset("+0");
	const char *asan = getenv("ASAN_OPTIONS");
	char preload[600], rc[760], asan_env[1100];
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", lib);
	snprintf(rc, sizeof(rc), "FAKETIME_TIMESTAMP_FILE=%s", g_rc);
	snprintf(asan_env, sizeof(asan_env), "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
		 asan && *asan ? asan : "", asan && *asan ? ":" : "");
	const char *const env[] = {preload,  rc,  "FAKETIME_NO_CACHE=1", "DONT_FAKE_MONOTONIC=1",
				   asan_env, NULL};

	host_install_plugin(&F.a, "1.0.0", "reconciler.so");
	host_install_plugin(&F.b, "1.0.0", "reconciler.so");
	host_start_env(&F.a, harness_etcd_urls(F.etcd), HOST_ARGS, env);
	obs_wait_leader(F.obs, "a", 15000);
	host_start(&F.b, harness_etcd_urls(F.etcd), HOST_ARGS);
	obs_wait_members(F.obs, 2, 15000);
	obs_wait_status_done(F.obs, REL(1, 0, 0), 15000);
	jwatch_wait(F.jw, "a", 2, 10000, "a reconciles");
	wait_offset_seen(0);
	char st[32];
	int64_t tok;
	CHECK_STR_EQ(host_plugin_state(&F.a, PLUGIN, st, sizeof(st), &tok), "leading");
	long mark = host_log_size(&F.a);

	set_offset("+5h");
	wait_offset_seen(5 * 3600);
	hold_and_watch(tok, 4000);

	set_offset("-5h"); /* a 10 h step back */
	wait_offset_seen(-5 * 3600);
	hold_and_watch(tok, 4000);

	set_offset("+0");
	wait_offset_seen(0);
	hold_and_watch(tok, 1000);

	int64_t tok_after;
	CHECK_STR_EQ(host_plugin_state(&F.a, PLUGIN, st, sizeof(st), &tok_after), "leading");
	CHECK_INT_EQ(tok_after, tok);
	CHECK_STR_EQ(host_plugin_state(&F.b, PLUGIN, st, sizeof(st), NULL), "campaigning");
	/* no lease loss, no leadership change, no new lease in a's log */
	size_t lost = host_log_count(&F.a, mark, "lost");
	size_t elected = host_log_count(&F.a, mark, "elected");
	size_t granted = host_log_count(&F.a, mark, "granted");
	if (lost || elected || granted) {
		fprintf(stderr, "a's log after the first step:\n%s\n", host_log_since(&F.a, mark));
		CHECK_INT_EQ(lost, 0);
		CHECK_INT_EQ(elected, 0);
		CHECK_INT_EQ(granted, 0);
	}
	CHECK_INT_EQ(jwatch_count(F.jw, "b", 0), 0);
	CHECK_INT_EQ(inv_check_all(&F.t, PFX, PLUGIN, NULL), 0);
}

int main(void)
{
	fs_setup_1_0(&F, 1);

	RUN(test_wall_clock_steps_do_not_matter);

	fs_finish(&F);
	return CHECK_EXIT();
}
