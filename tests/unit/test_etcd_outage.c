/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_outage - the log's account of an etcd outage
 * (host/daemon/daemon_etcd_outage.h), on a real loop with a short report
 * period, its lines read back from the log:
 *  - failed requests of an unreachable etcd (refused, timed out,
 *    unavailable) start one outage: one line, however many fail;
 *  - while it lasts, one "still unreachable" line per period, with its
 *    duration and the failures counted;
 *  - the first answer of etcd (an error etcd sent counts) ends it with one
 *    line, and the reports stop; cancelled requests change nothing;
 *  - answers outside an outage log nothing.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "base/log.h"
#include "base/loop.h"
#include "daemon/daemon_etcd_outage.h"

#define PERIOD_NS (150 * LOOP_NS_PER_MS)

static char g_path[64];
static struct loop *g_loop;

/* occurrences of needle in the log so far */
static size_t logged(const char *needle)
{
	FILE *f = fopen(g_path, "r");
	CHECK(f != NULL);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	size_t c = 0;
	for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
		c++;
	return c;
}

struct want {
	const char *needle;
	size_t n;
	bool done;
};

static void on_check(struct loop_timer *t, void *ud)
{
	struct want *w = ud;
	w->done = logged(w->needle) >= w->n;
	if (!w->done)
		loop_timer_arm_in(t, 10 * LOOP_NS_PER_MS);
}

/* run the loop until needle was logged n times (fails after 5 s) */
static void wait_logged(const char *needle, size_t n)
{
	struct want w = {needle, n, false};
	struct loop_timer *t;
	CHECK_OK(loop_timer_new(g_loop, on_check, &w, &t));
	loop_timer_arm_in(t, 0);
	int r = loop_run_until(g_loop, &w.done, loop_now() + 5 * LOOP_NS_PER_S);
	loop_timer_free(t);
	if (r < 0)
		fprintf(stderr, "%zu of %zu '%s' logged\n", logged(needle), n, needle);
	CHECK_OK(r);
}

static void test_one_outage_told_once(void)
{
	struct daemon_etcd_outage *o;
	CHECK_OK(daemon_etcd_outage_new(g_loop, NULL, PERIOD_NS, &o));
	daemon_etcd_outage_call_done(o, "range", 0, 0);
	daemon_etcd_outage_call_done(o, "range", -ENOENT, 0); /* an answer: nothing to end */
	CHECK(!daemon_etcd_outage_active(o));
	CHECK_INT_EQ(logged("etcd"), 0);

	daemon_etcd_outage_call_done(o, "lease_keepalive", -ECONNREFUSED, 0);
	daemon_etcd_outage_call_done(o, "range", -ETIMEDOUT, 0);
	daemon_etcd_outage_call_done(o, "lease_grant", -EAGAIN, 0);
	daemon_etcd_outage_call_done(o, "range", -ECANCELED, 0); /* says nothing either way */
	CHECK(daemon_etcd_outage_active(o));
	CHECK_INT_EQ(logged("etcd unreachable: "), 1);
	CHECK_INT_EQ(logged("(lease_keepalive, at ?)"), 1);

	/* two periods: two reports, the failures counted */
	wait_logged("etcd still unreachable after ", 2);
	CHECK_INT_EQ(logged("(3 requests failed)"), 2);
	daemon_etcd_outage_call_done(o, "txn", -ECONNREFUSED, 0);

	/* an error etcd sent is an answer: the outage ends */
	daemon_etcd_outage_call_done(o, "txn", -ERANGE, 0);
	CHECK(!daemon_etcd_outage_active(o));
	CHECK_INT_EQ(logged("etcd reachable again after "), 1);
	CHECK_INT_EQ(logged("(4 requests failed meanwhile)"), 1);
	size_t reports = logged("etcd still unreachable");

	/* the reports stopped: a new outage's first line is the next one */
	uint64_t t_out = loop_now();
	daemon_etcd_outage_call_done(o, "range", -ETIMEDOUT, 0);
	wait_logged("etcd still unreachable after ", reports + 1);
	CHECK_INT_EQ(logged("etcd unreachable: "), 2);
	CHECK_INT_EQ(logged("(1 requests failed)"), 1);
	/* an answer to a request sent before the outage began ends nothing */
	daemon_etcd_outage_call_done(o, "lease_keepalive", 0, loop_now());
	daemon_etcd_outage_call_done(o, "txn", -EIO, loop_now() - t_out + 1);
	CHECK(daemon_etcd_outage_active(o));
	CHECK_INT_EQ(logged("etcd reachable again after "), 1);
	daemon_etcd_outage_call_done(o, "range", 0, 0);
	CHECK_INT_EQ(logged("etcd reachable again after "), 2);
	/* a request sent before that end fails late: no new outage */
	daemon_etcd_outage_call_done(o, "lease_keepalive", -ETIMEDOUT, loop_now() - t_out);
	CHECK(!daemon_etcd_outage_active(o));
	CHECK_INT_EQ(logged("etcd unreachable: "), 2);
	daemon_etcd_outage_free(o);
	daemon_etcd_outage_free(NULL);
}

int main(void)
{
	snprintf(g_path, sizeof(g_path), "/tmp/test_etcd_outage.%ld.log", (long)getpid());
	FILE *f = fopen(g_path, "w+");
	CHECK(f != NULL);
	log_set_fd(fileno(f));
	CHECK_OK(loop_new(&g_loop));
	RUN(test_one_outage_told_once);
	loop_free(g_loop);
	fclose(f);
	unlink(g_path);
	return 0;
}
