/* SPDX-License-Identifier: MIT */
/* The harness itself: real etcd members start healthy on free ports, survive
 * a restart, form a 3-member cluster that tolerates one member down. */
#include "config.h"

#include <signal.h>
#include <sys/stat.h>

#include "check.h"
#include "harness.h"

static void test_single_member_restart(void)
{
	struct harness_etcd *h;
	CHECK_OK(harness_etcd_start(1, NULL, &h));
	CHECK(harness_etcd_pid(h, 0) > 0);
	CHECK(strncmp(harness_etcd_url(h, 0), "http://127.0.0.1:", 17) == 0);
	CHECK_OK(harness_etcd_stop(h, 0));
	CHECK_INT_EQ(harness_etcd_pid(h, 0), 0);
	CHECK_OK(harness_etcd_restart(h, 0));
	CHECK(harness_etcd_pid(h, 0) > 0);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", harness_dir(h));
	pid_t pid = harness_etcd_pid(h, 0);
	harness_etcd_free(h);
	struct stat st;
	CHECK(stat(dir, &st) < 0);  /* temp dir removed */
	CHECK(kill(pid, 0) < 0);    /* process gone */
}

/* the etcd under test is the one `make check` chose (ETCD_SERIES) */
static void test_version_is_the_chosen_series(void)
{
	const char *v = harness_etcd_version();
	CHECK(strncmp(v, "etcd Version: ", 14) == 0);
	const char *series = getenv("ETCD_SERIES");
	if (series && *series) {
		size_t n = strlen(series);
		if (strncmp(v + 14, series, n) != 0 || v[14 + n] != '.') {
			fprintf(stderr, "ETCD_SERIES=%s but %s says \"%s\"\n", series,
				getenv("ETCD") ? getenv("ETCD") : "etcd", v);
			exit(1);
		}
	}
}

static void test_three_members_one_down(void)
{
	struct harness_etcd *h;
	CHECK_OK(harness_etcd_start(3, NULL, &h));
	CHECK_INT_EQ(harness_etcd_members(h), 3);
	CHECK_OK(harness_etcd_kill(h, 0));
	CHECK_OK(harness_etcd_wait_healthy(h, 1, 10000));
	CHECK_OK(harness_etcd_restart(h, 0));
	harness_etcd_free(h);
}

int main(void)
{
	RUN(test_single_member_restart);
	RUN(test_version_is_the_chosen_series);
	RUN(test_three_members_one_down);
	return CHECK_EXIT();
}
