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
#include "runtime/runtime_plugindir_path.h"

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

/* watch_scanned - the start of a case that watches dir (with debounce as
 * plugindir_new's): its first scan finds n plugin files, the reports of it
 * are cleared for what the case does next */
static struct plugindir *watch_scanned(const char *dir, uint64_t debounce, int n)
{
	struct plugindir *pd;
	CHECK_OK(plugindir_new(L, dir, debounce, on_report, NULL, &pd));
	CHECK_INT_EQ(plugindir_scan(pd), n);
	reset();
	return pd;
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
	struct plugindir *pd = watch_scanned(g_dir, 30 * LOOP_NS_PER_MS, 0);

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
	struct plugindir *pd = watch_scanned(g_dir, 0, 0); /* default 50 ms */
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
	struct plugindir *pd = watch_scanned(g_dir, 0, 0);
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

/* ---- following the configured path ---- */

/* the index of the first report since reset of ev (for file, NULL = any
 * name), or -1 */
static long find_report(enum plugindir_event ev, const char *file)
{
	for (size_t i = 0; i < g_n; i++)
		if (g_reports[i].ev == ev && (!file || strcmp(g_reports[i].file, file) == 0))
			return (long)i;
	return -1;
}

static long count_reports(enum plugindir_event ev)
{
	long n = 0;
	for (size_t i = 0; i < g_n; i++)
		n += g_reports[i].ev == ev;
	return n;
}

/* wait until ev (for file, NULL = any) was reported since the last reset */
static void wait_for(enum plugindir_event ev, const char *file)
{
	uint64_t dl = DEADLINE;
	while (find_report(ev, file) < 0) {
		g_got = false;
		CHECK_OK(loop_run_until(L, &g_got, dl));
	}
}

static void write_at(const char *dir, const char *name, const char *content)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, content, strlen(content)) == (ssize_t)strlen(content));
	CHECK(close(fd) == 0);
}

static void unlink_at(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	CHECK(unlink(p) == 0);
}

/* a fresh directory root/<name> for one case */
static void case_dir(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", g_root, name);
	CHECK(mkdir(buf, 0755) == 0);
}

static void path_of(char *buf, size_t len, const char *a, const char *b)
{
	CHECK((size_t)snprintf(buf, len, "%s/%s", a, b) < len);
}

/* mkdir_at - a new directory parent/name, its path into buf */
static void mkdir_at(char *buf, size_t len, const char *parent, const char *name)
{
	path_of(buf, len, parent, name);
	CHECK(mkdir(buf, 0755) == 0);
}

static bool has_anchor(const struct plugindir_path *p, const char *dir, const char *name)
{
	for (size_t i = 0; i < p->n_anchors; i++)
		if (strcmp(p->anchors[i].dir, dir) == 0 && strcmp(p->anchors[i].name, name) == 0)
			return true;
	return false;
}

/* the walk: every entry the lookup goes through, also through chains of
 * links, and why a path names no directory */
static void test_path_walk(void)
{
	char w[PATH_MAX], real[PATH_MAX], p[PATH_MAX], rw[PATH_MAX];
	case_dir("walk", w, sizeof(w));
	CHECK(realpath(w, rw) != NULL); /* /tmp itself may be a link */
	mkdir_at(real, sizeof(real), w, "real");
	path_of(p, sizeof(p), w, "rel");
	CHECK(symlink("real", p) == 0);
	path_of(p, sizeof(p), w, "chain");
	CHECK(symlink("rel", p) == 0);
	path_of(p, sizeof(p), w, "abs");
	CHECK(symlink(real, p) == 0);
	path_of(p, sizeof(p), w, "dangling");
	CHECK(symlink("nothing", p) == 0);
	path_of(p, sizeof(p), w, "loop1");
	CHECK(symlink("loop2", p) == 0);
	path_of(p, sizeof(p), w, "loop2");
	CHECK(symlink("loop1", p) == 0);
	write_at(w, "file", "x");

	char want[PATH_MAX + 8];
	snprintf(want, sizeof(want), "%s/real", rw);
	struct plugindir_path r;
	path_of(p, sizeof(p), w, "chain");
	CHECK_OK(plugindir_path_resolve(p, &r));
	CHECK_INT_EQ(r.err, 0);
	CHECK_STR_EQ(r.resolved, want);
	/* the link, the link it points to, and the directory's own entry */
	CHECK(has_anchor(&r, rw, "chain"));
	CHECK(has_anchor(&r, rw, "rel"));
	CHECK(has_anchor(&r, rw, "real"));
	CHECK(has_anchor(&r, "/", "tmp"));
	plugindir_path_clear(&r);

	path_of(p, sizeof(p), w, "abs/../real/.");
	CHECK_OK(plugindir_path_resolve(p, &r));
	CHECK_INT_EQ(r.err, 0);
	CHECK_STR_EQ(r.resolved, want);
	plugindir_path_clear(&r);

	path_of(p, sizeof(p), w, "dangling");
	CHECK_OK(plugindir_path_resolve(p, &r));
	CHECK_INT_EQ(r.err, -ENOENT);
	CHECK(r.resolved == NULL);
	CHECK(has_anchor(&r, rw, "nothing")); /* watched: its creation ends the gap */
	plugindir_path_clear(&r);

	path_of(p, sizeof(p), w, "loop1");
	CHECK_OK(plugindir_path_resolve(p, &r));
	CHECK_INT_EQ(r.err, -ELOOP);
	plugindir_path_clear(&r);
	path_of(p, sizeof(p), w, "file");
	CHECK_OK(plugindir_path_resolve(p, &r));
	CHECK_INT_EQ(r.err, -ENOTDIR);
	plugindir_path_clear(&r);
	CHECK_INT_EQ(plugindir_path_resolve("relative/path", &r), -EINVAL);
}

/* a directory moved away is gone (nothing removed), an empty one made in
 * its place is one being filled (nothing removed), and the first file in
 * it makes it the directory: its batch, watched from then on */
static void test_dir_replaced_mv_mkdir(void)
{
	char c[PATH_MAX], dir[PATH_MAX], old[PATH_MAX];
	case_dir("mv", c, sizeof(c));
	mkdir_at(dir, sizeof(dir), c, "plugins");
	path_of(old, sizeof(old), c, "plugins.old");
	write_at(dir, "a.so", "1");
	write_at(dir, "b.so", "1");
	struct plugindir *pd = watch_scanned(dir, 20 * LOOP_NS_PER_MS, 2);

	CHECK(rename(dir, old) == 0);
	wait_for(PLUGINDIR_DIR_GONE, NULL);
	CHECK_INT_EQ(plugindir_error(pd), -ENOENT);
	/* what happens in the old directory is no longer ours */
	write_at(old, "c.so", "1");
	unlink_at(old, "a.so");
	quiet_for(100);
	CHECK_INT_EQ(g_n, 1);
	CHECK_INT_EQ(count_reports(PLUGINDIR_REMOVED), 0);
	/* a SIGHUP rescan meanwhile: refused, nothing reported again */
	CHECK_INT_EQ(plugindir_scan(pd), -ENOENT);
	CHECK_INT_EQ(g_n, 1);

	reset();
	CHECK(mkdir(dir, 0755) == 0);
	quiet_for(100);
	CHECK_INT_EQ(g_n, 1); /* another reason to be no directory: "empty" */
	CHECK(g_reports[0].ev == PLUGINDIR_DIR_GONE);
	CHECK_INT_EQ(plugindir_error(pd), -ENODATA);

	reset();
	write_at(dir, "a.so", "1");
	wait_for(PLUGINDIR_CHANGED, "a.so");
	quiet_for(100);
	CHECK(g_reports[0].ev == PLUGINDIR_DIR_BACK);
	CHECK_INT_EQ(plugindir_error(pd), 0);
	/* the directory now present lacks b.so: removed from a present directory */
	CHECK(find_report(PLUGINDIR_REMOVED, "b.so") > 0);
	CHECK_INT_EQ(count_reports(PLUGINDIR_DIR_GONE), 0);

	/* and the new directory is watched like the first */
	reset();
	write_at(dir, "d.so", "1");
	wait_for(PLUGINDIR_CHANGED, "d.so");
	reset();
	unlink_at(dir, "a.so");
	wait_for(PLUGINDIR_REMOVED, "a.so");
	plugindir_free(pd);
}
/* a symlink swapped between two release directories (`ln -s r2 tmp; mv -T
 * tmp plugins.d`): one batch, the difference between the two; no gap */
static void test_symlink_swap(void)
{
	char c[PATH_MAX], r1[PATH_MAX], r2[PATH_MAX], link[PATH_MAX], tmp[PATH_MAX];
	case_dir("swap", c, sizeof(c));
	mkdir_at(r1, sizeof(r1), c, "r1");
	mkdir_at(r2, sizeof(r2), c, "r2");
	path_of(link, sizeof(link), c, "plugins.d");
	path_of(tmp, sizeof(tmp), c, ".plugins.d.new");
	write_at(r1, "a.so", "1");
	write_at(r1, "b.so", "1");
	write_at(r2, "a.so", "1");
	write_at(r2, "c.so", "2");
	CHECK(symlink("r1", link) == 0);
	struct plugindir *pd = watch_scanned(link, 20 * LOOP_NS_PER_MS, 2);

	CHECK(symlink("r2", tmp) == 0);
	CHECK(rename(tmp, link) == 0);
	wait_for(PLUGINDIR_CHANGED, "c.so");
	quiet_for(100);
	CHECK_INT_EQ(count_reports(PLUGINDIR_DIR_GONE), 0);
	CHECK_INT_EQ(count_reports(PLUGINDIR_DIR_BACK), 0);
	CHECK(find_report(PLUGINDIR_CHANGED, "a.so") >= 0); /* the daemon compares the bytes */
	CHECK(find_report(PLUGINDIR_REMOVED, "b.so") >= 0);
	CHECK_INT_EQ(g_n, 3);

	/* r2 is watched now, r1 no longer */
	reset();
	write_at(r1, "x.so", "1");
	write_at(r2, "y.so", "1");
	wait_for(PLUGINDIR_CHANGED, "y.so");
	quiet_for(100);
	CHECK_INT_EQ(g_n, 1);

	/* and back (`ln -sfn`: unlink, then symlink), during a rollout */
	reset();
	CHECK(unlink(link) == 0);
	CHECK(symlink("r1", link) == 0);
	wait_for(PLUGINDIR_CHANGED, "x.so");
	quiet_for(100);
	CHECK(find_report(PLUGINDIR_REMOVED, "c.so") >= 0);
	CHECK(find_report(PLUGINDIR_REMOVED, "y.so") >= 0);
	CHECK_INT_EQ(count_reports(PLUGINDIR_REMOVED), 2);
	plugindir_free(pd);
}

/* removed and restored: gone, then back; a file the restored directory
 * lacks is removed (the directory that is present does not hold it) */
static void test_dir_removed_and_restored(void)
{
	char c[PATH_MAX], dir[PATH_MAX];
	case_dir("rm", c, sizeof(c));
	mkdir_at(dir, sizeof(dir), c, "plugins");
	write_at(dir, "a.so", "1");
	write_at(dir, "b.so", "1");
	struct plugindir *pd = watch_scanned(dir, 20 * LOOP_NS_PER_MS, 2);
	/* rm -r: the files go first, then the directory */
	unlink_at(dir, "a.so");
	unlink_at(dir, "b.so");
	CHECK(rmdir(dir) == 0);
	wait_for(PLUGINDIR_DIR_GONE, NULL);
	quiet_for(100);
	CHECK_INT_EQ(g_n, 1);
	CHECK_INT_EQ(plugindir_error(pd), -ENOENT);

	/* restored, populated before it is put in place */
	reset();
	char tmp[PATH_MAX];
	mkdir_at(tmp, sizeof(tmp), c, ".plugins.new");
	write_at(tmp, "a.so", "1");
	CHECK(rename(tmp, dir) == 0);
	wait_for(PLUGINDIR_CHANGED, "a.so");
	quiet_for(100);
	CHECK(g_reports[0].ev == PLUGINDIR_DIR_BACK);
	CHECK(find_report(PLUGINDIR_REMOVED, "b.so") >= 0);
	CHECK_INT_EQ(g_n, 3);
	CHECK_INT_EQ(plugindir_error(pd), 0);
	plugindir_free(pd);

	/* a directory missing at start is an error, not a crash */
	char none[PATH_MAX];
	path_of(none, sizeof(none), c, "none");
	CHECK_INT_EQ(plugindir_new(L, none, 0, on_report, NULL, &pd), -ENOENT);
	plugindir_free(NULL);
}

/* the directory's parent replaced: atomically (renameat2 RENAME_EXCHANGE,
 * no gap) and by two renames (a gap) */
static void test_parent_replaced(void)
{
	char c[PATH_MAX], dep[PATH_MAX], dir[PATH_MAX], next[PATH_MAX], nd[PATH_MAX];
	case_dir("parent", c, sizeof(c));
	mkdir_at(dep, sizeof(dep), c, "deploy");
	mkdir_at(dir, sizeof(dir), dep, "plugins");
	write_at(dir, "a.so", "1");
	mkdir_at(next, sizeof(next), c, "deploy.next");
	mkdir_at(nd, sizeof(nd), next, "plugins");
	write_at(nd, "a.so", "1");
	write_at(nd, "n.so", "1");
	struct plugindir *pd = watch_scanned(dir, 20 * LOOP_NS_PER_MS, 1);
	bool exchanged = renameat2(AT_FDCWD, next, AT_FDCWD, dep, RENAME_EXCHANGE) == 0;
	if (!exchanged) {
		CHECK(errno == EINVAL || errno == ENOSYS); /* a file system without it */
		fprintf(stderr, "  RENAME_EXCHANGE unsupported here: two renames only\n");
	} else {
		wait_for(PLUGINDIR_CHANGED, "n.so");
		quiet_for(100);
		CHECK_INT_EQ(count_reports(PLUGINDIR_DIR_GONE), 0);
		CHECK_INT_EQ(count_reports(PLUGINDIR_REMOVED), 0);
		CHECK(find_report(PLUGINDIR_CHANGED, "a.so") >= 0);
		CHECK_INT_EQ(g_n, 2);
	}
	/* two renames: gone in between, then back with the other tree */
	char prev[PATH_MAX];
	path_of(prev, sizeof(prev), c, "deploy.prev");
	reset();
	CHECK(rename(dep, prev) == 0);
	wait_for(PLUGINDIR_DIR_GONE, NULL);
	CHECK(rename(next, dep) == 0);
	wait_for(PLUGINDIR_DIR_BACK, NULL);
	/* deploy.next held a.so only after the exchange, a.so and n.so before */
	wait_for(exchanged ? PLUGINDIR_REMOVED : PLUGINDIR_CHANGED, "n.so");
	quiet_for(100);
	CHECK(find_report(PLUGINDIR_CHANGED, "a.so") >= 0);
	CHECK_INT_EQ(g_n, 4);
	/* the directory of the new parent is the watched one */
	reset();
	write_at(dir, "z.so", "1");
	wait_for(PLUGINDIR_CHANGED, "z.so");
	plugindir_free(pd);
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
	RUN(test_path_walk);
	RUN(test_dir_replaced_mv_mkdir);
	RUN(test_symlink_swap);
	RUN(test_dir_removed_and_restored);
	RUN(test_parent_replaced);
	loop_free(L);
	return CHECK_EXIT();
}
