/* SPDX-License-Identifier: MIT */
/*
 * check.h - the tests' tiny assert header.
 *
 * CHECK(cond) and the CHECK_* helpers print file:line, the expression and the
 * values, then exit(1) (the harness's atexit handler tears down etcd).
 * A test program prints one "ok - name" line per passed test function via
 * RUN(fn) and exits 0. Exit 77 = skipped (automake), 99 = hard error.
 * A test function that cannot check anything where it runs (no root, too
 * low a limit) calls SKIP_CASE("why") and returns at once: RUN then prints
 * "skip - name: why" instead of "ok", so no log claims a check that did not
 * happen. A program whose every case skipped exits 77 (CHECK_EXIT()).
 */
#ifndef LH_TEST_CHECK_H
#define LH_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1); \
		} \
	} while (0)

#define CHECK_INT_EQ(a, b) \
	do { \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
		if (check_a_ != check_b_) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, \
			        __LINE__, #a, #b, check_a_, check_b_); \
			exit(1); \
		} \
	} while (0)

#define CHECK_OK(expr) \
	do { \
		long long check_r_ = (long long)(expr); \
		if (check_r_ < 0) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s returned %lld (%s)\n", __FILE__, \
			        __LINE__, #expr, check_r_, strerror((int)-check_r_)); \
			exit(1); \
		} \
	} while (0)

#define CHECK_STR_EQ(a, b) \
	do { \
		const char *check_a_ = (a), *check_b_ = (b); \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", \
			        __FILE__, __LINE__, #a, #b, check_a_ ? check_a_ : "(null)", \
			        check_b_ ? check_b_ : "(null)"); \
			exit(1); \
		} \
	} while (0)

#define CHECK_MEM_EQ(p, plen, q, qlen) \
	do { \
		size_t check_pl_ = (plen), check_ql_ = (qlen); \
		if (check_pl_ != check_ql_ || (check_pl_ && memcmp((p), (q), check_pl_) != 0)) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (lengths %zu, %zu)\n", \
			        __FILE__, __LINE__, #p, #q, check_pl_, check_ql_); \
			exit(1); \
		} \
	} while (0)

/* the reason the running case skipped itself, NULL while it checks */
static const char *check_case_skipped_ __attribute__((unused));
static unsigned check_n_run_ __attribute__((unused)), check_n_skipped_ __attribute__((unused));

#define SKIP_CASE(why) \
	do { \
		check_case_skipped_ = (why); \
		return; \
	} while (0)

#define RUN(fn) \
	do { \
		fprintf(stderr, "--- %s\n", #fn); \
		check_case_skipped_ = NULL; \
		fn(); \
		check_n_run_++; \
		if (check_case_skipped_) { \
			check_n_skipped_++; \
			printf("skip - %s: %s\n", #fn, check_case_skipped_); \
		} else { \
			printf("ok - %s\n", #fn); \
		} \
		fflush(stdout); \
	} while (0)

/* main's exit code: 77 (automake SKIP) when every case that ran skipped */
#define CHECK_EXIT() (check_n_run_ > 0 && check_n_skipped_ == check_n_run_ ? 77 : 0)

#endif
