/* SPDX-License-Identifier: MIT */
/*
 * files.h - file helpers for tests (header-only: each test program includes
 * it once).
 *
 * test_tmp_root - mkdtemp /tmp/lh-<name>-XXXXXX (mode 0755, so the loader's
 *   parent-directory checks pass) into root[len] and remove it with
 *   everything in it at exit, also after a failed CHECK (exit) - one root per
 *   program.
 * test_rm_tree - remove path and everything below it (errors ignored: the
 *   cleanup of a temp dir).
 * test_copy_fd - copy what is left to read from in to out.
 * test_read_file - the whole file at path (at most 64 KiB - 1; malloc'd,
 *   NUL-terminated); a file that cannot be read fails the test.
 * test_dump_tail - the last max bytes of the file at path to stderr, framed
 *   by its name (nothing when it cannot be opened): a log, for a failure.
 * test_load_built - the whole of a file the build made (binary, non-empty;
 *   malloc'd) and its length; a missing one exits 99 (run through make check).
 * test_copy_file - copy src to dst with mode, written to a temp name in dst's
 *   directory first and renamed in (the documented way to install a plugin).
 *   A missing src exits 99: the build did not make it (run through make check).
 */
#ifndef LH_TEST_FILES_H
#define LH_TEST_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char test_root_[512];

static int test_rm_one_(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static inline void test_rm_tree(const char *path)
{
	nftw(path, test_rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_rm_root_(void)
{
	if (test_root_[0])
		test_rm_tree(test_root_);
}

static inline void test_copy_fd(int in, int out)
{
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	CHECK(n == 0);
}

static inline char *test_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	char *s = calloc(1, 65536);
	CHECK(s != NULL);
	size_t n = fread(s, 1, 65535, f);
	s[n] = 0;
	fclose(f);
	return s;
}

static inline void test_tmp_root(const char *name, char *root, size_t len)
{
	CHECK(!test_root_[0]);
	snprintf(test_root_, sizeof(test_root_), "/tmp/lh-%s-XXXXXX", name);
	CHECK(mkdtemp(test_root_));
	atexit(test_rm_root_);
	CHECK(chmod(test_root_, 0755) == 0);
	snprintf(root, len, "%s", test_root_);
}

static inline void test_dump_tail(const char *path, long max)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char *buf = malloc((size_t)max + 1);
	if (buf) {
		fseek(f, 0, SEEK_END);
		long sz = ftell(f);
		fseek(f, sz > max ? sz - max : 0, SEEK_SET);
		size_t n = fread(buf, 1, (size_t)max, f);
		buf[n] = 0;
		fprintf(stderr, "---- tail of %s ----\n%s\n----\n", path, buf);
		free(buf);
	}
	fclose(f);
}

static inline uint8_t *test_load_built(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s: %s (run through make check)\n", path,
			strerror(errno));
		exit(99);
	}
	CHECK(fseek(f, 0, SEEK_END) == 0);
	long n = ftell(f);
	CHECK(n > 0);
	rewind(f);
	uint8_t *buf = malloc((size_t)n);
	CHECK(buf);
	CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

static inline void test_copy_file(const char *src, const char *dst, mode_t mode)
{
	char tmp[4096];
	const char *slash = strrchr(dst, '/');
	int dl = slash ? (int)(slash - dst) : 1;
	snprintf(tmp, sizeof(tmp), "%.*s/.copy-%ld.tmp", dl, slash ? dst : ".", (long)getpid());
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		fprintf(stderr, "cannot open %s (run through make check)\n", src);
		exit(99);
	}
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(out >= 0);
	test_copy_fd(in, out);
	close(in);
	CHECK(fchmod(out, mode) == 0);
	CHECK(close(out) == 0);
	CHECK(rename(tmp, dst) == 0);
}

#endif
