/* SPDX-License-Identifier: MIT */
/*
 * test_plugindir.c - the plugin-directory watcher: initial scan, inotify
 * reports for write-then-rename, close_write, delete and move-away, burst
 * coalescing, temp names ignored, rescan after changes; the rule that picks
 * one file among those of one plugin name. Waits are on loop
 * events with deadlines, never sleeps.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "runtime/runtime_plugindir.h"

#define DEADLINE (loop_now() + 10 * LOOP_NS_PER_S)

static struct loop *L;
static char g_root[512], g_dir[1024];

struct report {
	enum plugindir_event ev;
	char file[256];
};
static struct report g_reports[4096];
static size_t g_n;
static bool g_got;

static void on_report(void *ud, enum plugindir_event ev, const char *file)
{
	(void)ud;
	if (g_n < sizeof(g_reports) / sizeof(g_reports[0])) {
		g_reports[g_n].ev = ev;
		snprintf(g_reports[g_n].file, sizeof(g_reports[g_n].file), "%s", file ? file : "");
		g_n++;
	}
	g_got = true;
}

static void reset(void)
{
	g_n = 0;
	g_got = false;
}

static void write_file(const char *name, const char *content)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", g_dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, content, strlen(content)) == (ssize_t)strlen(content));
	CHECK(close(fd) == 0);
}

static void rename_in(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof(a), "%s/%s", g_dir, from);
	snprintf(b, sizeof(b), "%s/%s", g_dir, to);
	CHECK(rename(a, b) == 0);
}

static void remove_file(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", g_dir, name);
	CHECK(unlink(p) == 0);
}

/* wait for the next report */
static void wait_report(void)
{
	g_got = false;
	CHECK_OK(loop_run_until(L, &g_got, DEADLINE));
}

/* wait until `file` was last reported removed (reports in between are kept) */
static void wait_removed(const char *file)
{
	uint64_t dl = DEADLINE;
	while (!(g_n > 0 && g_reports[g_n - 1].ev == PLUGINDIR_REMOVED &&
		 strcmp(g_reports[g_n - 1].file, file) == 0)) {
		g_got = false;
		CHECK_OK(loop_run_until(L, &g_got, dl));
	}
}

/* quiet_for - run the loop until `quiet_ms` pass with no report (bounded by
 * a deadline). Only for proving that something does NOT get reported, or
 * that a burst's reports have all come in (their number is what is
 * measured): every other wait is for a counted report. */
static void quiet_for(int quiet_ms)
{
	uint64_t dl = DEADLINE;
	for (;;) {
		size_t before = g_n;
		g_got = false;
		int r = loop_run_until(L, &g_got, loop_now() + (uint64_t)quiet_ms * LOOP_NS_PER_MS);
		if (r == -ETIMEDOUT && g_n == before)
			return;
		CHECK(loop_now() < dl);
	}
}

static void test_initial_scan(void)
{
	write_file("b.so", "x");
	write_file("a.so", "x");
	write_file(".hidden.so", "x");
	write_file("notes.txt", "x");
	write_file("c.so.tmp", "x");
	char d[PATH_MAX];
	snprintf(d, sizeof(d), "%s/dir.so", g_dir);
	CHECK(mkdir(d, 0755) == 0);

	struct plugindir *pd;
	reset();
	CHECK_OK(plugindir_new(L, g_dir, 0, on_report, NULL, &pd));
	CHECK_INT_EQ(g_n, 0); /* nothing from inside new */
	CHECK_INT_EQ(plugindir_scan(pd), 2);
	CHECK_INT_EQ(g_n, 2);
	CHECK(g_reports[0].ev == PLUGINDIR_CHANGED);
	CHECK_STR_EQ(g_reports[0].file, "a.so"); /* sorted */
	CHECK_STR_EQ(g_reports[1].file, "b.so");
	CHECK_STR_EQ(plugindir_path(pd), g_dir);

	/* a rescan after a file vanished reports it removed */
	remove_file("a.so");
	wait_removed("a.so"); /* the inotify delete is coalesced too */
	reset();
	CHECK_INT_EQ(plugindir_scan(pd), 1);
	CHECK_INT_EQ(g_n, 1);
	CHECK_STR_EQ(g_reports[0].file, "b.so");
	plugindir_free(pd);
	remove_file("b.so");
	remove_file(".hidden.so");
	remove_file("notes.txt");
	remove_file("c.so.tmp");
	rmdir(d);
}

static void test_write_rename_delete(void)
{
	struct plugindir *pd;
	CHECK_OK(plugindir_new(L, g_dir, 30 * LOOP_NS_PER_MS, on_report, NULL, &pd));
	CHECK_INT_EQ(plugindir_scan(pd), 0);
	reset();

	/* the recommended install: write a temp name, rename in */
	write_file(".p.so.tmp", "v1");
	rename_in(".p.so.tmp", "p.so");
	wait_report();
	CHECK_INT_EQ(g_n, 1);
	CHECK(g_reports[0].ev == PLUGINDIR_CHANGED);
	CHECK_STR_EQ(g_reports[0].file, "p.so");

	/* written in place: reported at close_write */
	reset();
	write_file("q.so", "v1");
	wait_report();
	CHECK(g_reports[0].ev == PLUGINDIR_CHANGED);
	CHECK_STR_EQ(g_reports[0].file, "q.so");

	/* replaced by rename-over */
	reset();
	write_file(".p.so.tmp", "v2");
	rename_in(".p.so.tmp", "p.so");
	wait_report();
	CHECK(g_reports[0].ev == PLUGINDIR_CHANGED);
	CHECK_STR_EQ(g_reports[0].file, "p.so");

	/* deleted */
	reset();
	remove_file("q.so");
	wait_report();
	CHECK(g_reports[0].ev == PLUGINDIR_REMOVED);
	CHECK_STR_EQ(g_reports[0].file, "q.so");

	/* moved away */
	reset();
	rename_in("p.so", "p.so.disabled");
	wait_report();
	CHECK(g_reports[0].ev == PLUGINDIR_REMOVED);
	CHECK_STR_EQ(g_reports[0].file, "p.so");
	quiet_for(100);
	CHECK_INT_EQ(g_n, 1);

	/* an unknown name that comes and goes inside one window: nothing */
	reset();
	write_file("flash.so", "x");
	remove_file("flash.so");
	quiet_for(150);
	CHECK_INT_EQ(g_n, 0);
	remove_file("p.so.disabled");
	plugindir_free(pd);
}

static void test_burst_is_coalesced(void)
{
	struct plugindir *pd;
	CHECK_OK(plugindir_new(L, g_dir, 0, on_report, NULL, &pd)); /* default 50 ms */
	CHECK_INT_EQ(plugindir_scan(pd), 0);
	reset();
	/* 100 replacements back to back (well within a second) */
	uint64_t t0 = loop_now();
	for (int i = 0; i < 100; i++) {
		char content[32];
		snprintf(content, sizeof(content), "version %d", i);
		write_file(".burst.so.tmp", content);
		rename_in(".burst.so.tmp", "burst.so");
		if (i % 10 == 0)
			loop_run_once(L, 0); /* the loop keeps reading inotify meanwhile */
	}
	uint64_t t1 = loop_now();
	quiet_for(200);
	fprintf(stderr, "  100 replacements in %llu ms -> %zu reports\n",
	        (unsigned long long)((t1 - t0) / LOOP_NS_PER_MS), g_n);
	CHECK(g_n >= 1);
	CHECK(g_n <= 5);
	for (size_t i = 0; i < g_n; i++) {
		CHECK(g_reports[i].ev == PLUGINDIR_CHANGED);
		CHECK_STR_EQ(g_reports[i].file, "burst.so");
	}
	remove_file("burst.so");
	wait_removed("burst.so");
	plugindir_free(pd);
}

struct spread {
	int left;
	struct loop_timer *t;
};

static void on_spread(struct loop_timer *t, void *ud)
{
	struct spread *sp = ud;
	char content[32];
	snprintf(content, sizeof(content), "version %d", sp->left);
	write_file(".spread.so.tmp", content);
	rename_in(".spread.so.tmp", "spread.so");
	if (--sp->left > 0)
		loop_timer_arm_in(t, 10 * LOOP_NS_PER_MS);
}

static void test_burst_over_a_second_gives_a_handful(void)
{
	struct plugindir *pd;
	CHECK_OK(plugindir_new(L, g_dir, 0, on_report, NULL, &pd));
	CHECK_INT_EQ(plugindir_scan(pd), 0);
	reset();
	/* 100 replacements, one every 10 ms, driven by a loop timer */
	struct spread sp = {100, NULL};
	CHECK_OK(loop_timer_new(L, on_spread, &sp, &sp.t));
	loop_timer_arm_in(sp.t, 0);
	uint64_t dl = DEADLINE;
	while (sp.left > 0) {
		CHECK(loop_now() < dl);
		loop_run_once(L, -1);
	}
	quiet_for(200);
	loop_timer_free(sp.t);
	fprintf(stderr, "  100 replacements over ~1 s -> %zu reports\n", g_n);
	CHECK(g_n >= 2); /* not starved: reported while the burst went on */
	CHECK(g_n <= 6);
	remove_file("spread.so");
	wait_removed("spread.so");
	plugindir_free(pd);
}

static void test_dir_gone(void)
{
	char sub[1100];
	snprintf(sub, sizeof(sub), "%s/sub", g_root);
	CHECK(mkdir(sub, 0755) == 0);
	char f[PATH_MAX];
	snprintf(f, sizeof(f), "%s/x.so", sub);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	close(fd);
	struct plugindir *pd;
	CHECK_OK(plugindir_new(L, sub, 0, on_report, NULL, &pd));
	CHECK_INT_EQ(plugindir_scan(pd), 1);
	reset();
	CHECK(unlink(f) == 0);
	CHECK(rmdir(sub) == 0);
	uint64_t dl = DEADLINE;
	while (!(g_n > 0 && g_reports[g_n - 1].ev == PLUGINDIR_DIR_GONE)) {
		wait_report();
		CHECK(loop_now() < dl);
	}
	CHECK(g_reports[0].ev == PLUGINDIR_REMOVED);
	CHECK_STR_EQ(g_reports[0].file, "x.so");
	plugindir_free(pd);
	/* a missing directory is an error, not a crash */
	CHECK_INT_EQ(plugindir_new(L, sub, 0, on_report, NULL, &pd), -ENOENT);
	plugindir_free(NULL);
}

/* the rule among the files of one plugin name: newest release, then the
 * running file, then the first file name; the same answer in either order */
static void test_prefer_rule(void)
{
	struct plugindir_candidate old_run = {"x.so", {1, 2, 0}, true};
	struct plugindir_candidate newer = {"x-1.3.0.so", {1, 3, 0}, false};
	struct plugindir_candidate same_rel = {"a-x.so", {1, 2, 0}, false};
	struct plugindir_candidate patch = {"z.so", {1, 2, 1}, false};
	struct plugindir_candidate b = {"b.so", {1, 2, 0}, false};
	CHECK(plugindir_prefer(&newer, &old_run) > 0);
	CHECK(plugindir_prefer(&old_run, &newer) < 0);
	/* a tie: the running file keeps running, even against a file name
	 * that sorts first */
	CHECK(plugindir_prefer(&old_run, &same_rel) > 0);
	CHECK(plugindir_prefer(&same_rel, &old_run) < 0);
	/* nothing runs: the file name that sorts first */
	CHECK(plugindir_prefer(&same_rel, &b) > 0);
	CHECK(plugindir_prefer(&b, &same_rel) < 0);
	/* the release counts before the name and before "runs now" */
	CHECK(plugindir_prefer(&patch, &old_run) > 0);
	CHECK(plugindir_prefer(&patch, &same_rel) > 0);
	CHECK_INT_EQ(plugindir_prefer(&b, &b), 0);
}

int main(void)
{
	test_tmp_root("test-plugindir", g_root, sizeof(g_root));
	snprintf(g_dir, sizeof(g_dir), "%s/plugins", g_root);
	CHECK(mkdir(g_dir, 0755) == 0);
	CHECK_OK(loop_new(&L));
	RUN(test_prefer_rule);
	RUN(test_initial_scan);
	RUN(test_write_rename_delete);
	RUN(test_burst_is_coalesced);
	RUN(test_burst_over_a_second_gives_a_handful);
	RUN(test_dir_gone);
	loop_free(L);
	return CHECK_EXIT();
}
