/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_failover.c - endpoint failover on a 3-member cluster: when the
 * member in use is stopped, calls move to the next endpoint within their
 * deadline and a running watch resumes there without losing or repeating
 * an event. With no endpoint reachable a call fails with -ECONNREFUSED.
 * A call with attempts (etcd_call_opts) moves on from a member that takes
 * the request and stays silent; "require leader" makes a leaderless member
 * refuse at once.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/loop.h"
#include "check.h"
#include "etcd/etcd.h"
#include "harness.h"
#include "test_etcd_common.h"

#include <signal.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static struct loop *L;
static struct harness_etcd *H;

struct wrec {
	int n;
	int64_t revs[64];
	char keys[64][16];
	int target;
	bool reached;
};

static void wcb(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
		size_t n, void *ud)
{
	struct wrec *r = ud;
	CHECK_OK(err);
	for (size_t i = 0; i < n; i++) {
		CHECK(r->n < 64);
		r->revs[r->n] = ev[i].kv.mod_revision;
		copy_str(r->keys[r->n], sizeof(r->keys[r->n]), ev[i].kv.key, ev[i].kv.key_len);
		r->n++;
	}
	if (r->n >= r->target)
		r->reached = true;
}

/* watch_from - a watch of prefix from revision base on c with flags, into a
 * new record (the caller frees it) that is reached after target events */
static struct wrec *watch_from(struct etcd_client *c, const char *prefix, int64_t base,
			       uint32_t flags, int target, struct etcd_watch **ret_w)
{
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = target;
	uint8_t end[64];
	size_t pl = strlen(prefix), el = etcd_prefix_end(prefix, pl, end);
	CHECK_OK(etcd_watch_start(c, prefix, pl, end, el, base, flags, wcb, r, ret_w));
	return r;
}

/* put_retry - a put that tolerates the cluster electing a new leader */
static int64_t put_retry(struct etcd_client *c, const char *key)
{
	uint64_t deadline = loop_now() + 15 * LOOP_NS_PER_S;
	for (;;) {
		struct etcd_response *r = NULL;
		int err = sput(L, c, key, "v", 0, false, &r);
		if (err == 0) {
			int64_t rev = r->header.revision;
			etcd_response_free(r);
			return rev;
		}
		etcd_response_free(r);
		fprintf(stderr, "put %s: %s (retrying)\n", key, etcd_strerror(err));
		CHECK(err == -EAGAIN || err == -ETIMEDOUT || err == -EIO);
		CHECK(loop_now() < deadline);
	}
}

static void test_failover_stop_connected_member(void)
{
	const char *eps[3] = {harness_etcd_url(H, 0), harness_etcd_url(H, 1),
			      harness_etcd_url(H, 2)};
	struct etcd_client *c = client_for(L, eps, 3, NULL, NULL);
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[0]);
	int64_t base = put_retry(c, "f/0");

	struct etcd_watch *w = NULL;
	struct wrec *r = watch_from(c, "f/", base, 0, 3, &w);
	put_retry(c, "f/1");
	put_retry(c, "f/2");
	if (loop_run_until(L, &r->reached, loop_now() + WAIT_MS * LOOP_NS_PER_MS) < 0)
		CHECK(!"first events");

	CHECK_OK(harness_etcd_stop(H, 0));
	/* the next call hits the stopped member, fails over, succeeds */
	r->target = 6;
	r->reached = false;
	put_retry(c, "f/3");
	CHECK(strcmp(etcd_client_endpoint(c), eps[0]) != 0);
	put_retry(c, "f/4");
	put_retry(c, "f/5");
	if (loop_run_until(L, &r->reached, loop_now() + 15 * LOOP_NS_PER_S) < 0)
		CHECK(!"events after failover");
	CHECK_INT_EQ(r->n, 6);
	for (int i = 0; i < 6; i++) {
		char k[16];
		snprintf(k, sizeof(k), "f/%d", i);
		CHECK_STR_EQ(r->keys[i], k);
		if (i)
			CHECK(r->revs[i] > r->revs[i - 1]);
	}
	struct etcd_kv *kv = sget(L, c, "f/5");
	CHECK(kv);
	etcd_kv_free(kv);
	etcd_watch_cancel(w);
	free(r);
	etcd_client_free(c);
	CHECK_OK(harness_etcd_restart(H, 0));
}

static int free_port(void)
{
	int p = harness_free_port();
	CHECK(p > 0);
	return p;
}

static void test_failover_all_refused(void)
{
	char a[64], b[64];
	snprintf(a, sizeof(a), "http://127.0.0.1:%d", free_port());
	snprintf(b, sizeof(b), "http://127.0.0.1:%d", free_port());
	const char *eps[2] = {a, b};
	struct etcd_client *c = client_for(L, eps, 2, NULL, NULL);
	uint64_t t0 = loop_now();
	struct etcd_op op = op_key(ETCD_OP_RANGE, "x");
	struct etcd_response *r = NULL;
	CHECK_INT_EQ(sop(L, c, &op, &r), -ECONNREFUSED);
	CHECK(r == NULL);
	CHECK(loop_now() - t0 < 2 * LOOP_NS_PER_S);
	etcd_client_free(c);
}

static void test_failover_dead_first_endpoint(void)
{
	/* a refused first endpoint, a live second one */
	char a[64];
	snprintf(a, sizeof(a), "http://127.0.0.1:%d", free_port());
	const char *eps[2] = {a, harness_etcd_url(H, 1)};
	struct etcd_client *c = client_for(L, eps, 2, NULL, NULL);
	CHECK_OK(sput(L, c, "dead/first", "ok", 0, false, NULL));
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[1]);
	etcd_client_free(c);
}

static void test_failover_hung_member_watch_idle(void)
{
	/* SIGSTOP the member a progress-notify watch streams from: TCP stays
	 * up (the kernel still ACKs), so only the idle timeout notices */
	const char *eps[3] = {harness_etcd_url(H, 0), harness_etcd_url(H, 1),
			      harness_etcd_url(H, 2)};
	struct etcd_config cfg = config_of(eps, 3);
	cfg.watch_idle_timeout_ms = 3000;
	struct etcd_client *c = client_new_of(L, &cfg);
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[0]);
	int64_t base = put_retry(c, "h/0");
	struct etcd_watch *w = NULL;
	struct wrec *r = watch_from(c, "h/", base, ETCD_WATCH_PROGRESS_NOTIFY, 1, &w);
	if (loop_run_until(L, &r->reached, loop_now() + WAIT_MS * LOOP_NS_PER_MS) < 0)
		CHECK(!"first event");
	/* writes go through member 2 while member 0 is frozen */
	const char *ep2 = eps[2];
	struct etcd_client *c2 = client_for(L, &ep2, 1, NULL, NULL);
	CHECK_OK(harness_etcd_freeze(H, 0, WAIT_MS));
	r->target = 2;
	r->reached = false;
	put_retry(c2, "h/1");
	bool ok = loop_run_until(L, &r->reached, loop_now() + 20 * LOOP_NS_PER_S) == 0;
	CHECK_OK(harness_etcd_thaw(H, 0));
	CHECK(ok);
	CHECK_INT_EQ(r->n, 2);
	CHECK_STR_EQ(r->keys[1], "h/1");
	CHECK(r->revs[1] > r->revs[0]);
	etcd_watch_cancel(w);
	etcd_client_free(c2);
	etcd_client_free(c);
	free(r);
}

/* timed_grant - a lease grant with opts o; returns err, *ret_ms its time */
static int timed_grant(struct etcd_client *c, const struct etcd_call_opts *o, uint64_t *ret_ms)
{
	struct res x = {0};
	uint64_t t0 = loop_now();
	CHECK_OK(etcd_lease_grant(c, 2, o, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	*ret_ms = (loop_now() - t0) / LOOP_NS_PER_MS;
	int err = x.err;
	res_clear(&x);
	return err;
}

static void test_failover_silent_member_attempts(void)
{
	/* SIGSTOP member 0: the kernel still accepts and takes the request,
	 * nothing answers. A call with attempts moves on to member 1 after
	 * one attempt; a call without them waits for its whole deadline */
	const char *eps[3] = {harness_etcd_url(H, 0), harness_etcd_url(H, 1),
			      harness_etcd_url(H, 2)};
	struct etcd_client *c = client_for(L, eps, 3, NULL, NULL);
	put_retry(c, "silent/warm"); /* a kept-alive connection to member 0 */
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[0]);
	CHECK_OK(harness_etcd_freeze(H, 0, WAIT_MS));
	uint64_t ms_plain, ms_attempts;
	struct etcd_call_opts plain = {.timeout_ms = 1500};
	int e_plain = timed_grant(c, &plain, &ms_plain);
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[0]);
	struct etcd_call_opts attempts = {.timeout_ms = 5000, .attempt_timeout_ms = 300,
					  .require_leader = true};
	int e_attempts = timed_grant(c, &attempts, &ms_attempts);
	const char *now_ep = etcd_client_endpoint(c);
	CHECK_OK(harness_etcd_thaw(H, 0));
	fprintf(stderr, "silent member: plain call %s after %" PRIu64 " ms, with attempts %s after %" PRIu64 " ms\n",
		etcd_strerror(e_plain), ms_plain, e_attempts ? etcd_strerror(e_attempts) : "ok",
		ms_attempts);
	CHECK_INT_EQ(e_plain, -ETIMEDOUT);
	CHECK(ms_plain >= 1500);
	/* member 0 may have led raft: 1 and 2 elect another within the deadline */
	CHECK_OK(e_attempts);
	CHECK(strcmp(now_ep, eps[0]) != 0);
	etcd_client_free(c);
}

/* member0_leaderless - member 0 answers "no leader" to a require_leader request */
static bool member0_leaderless(struct etcd_client *c)
{
	uint64_t ms;
	struct etcd_call_opts o = {.timeout_ms = 2000, .require_leader = true};
	return timed_grant(c, &o, &ms) == -EAGAIN;
}

static void test_failover_leaderless_member_refuses(void)
{
	/* members 1 and 2 frozen: member 0 loses its raft leader (election
	 * timeout 500 ms in the harness) and never gets one. A request that
	 * requires a leader is refused at once; one with attempts tries each
	 * endpoint once (here both are member 0) and gives up, it does not
	 * spin until its deadline */
	const char *eps[2] = {harness_etcd_url(H, 0), harness_etcd_url(H, 0)};
	struct etcd_client *c = client_for(L, eps, 2, NULL, NULL);
	put_retry(c, "leaderless/warm");
	CHECK_OK(harness_etcd_freeze(H, 1, WAIT_MS));
	CHECK_OK(harness_etcd_freeze(H, 2, WAIT_MS));
	uint64_t t0 = loop_now();
	bool leaderless = false;
	while (!leaderless && loop_now() - t0 < 15 * LOOP_NS_PER_S)
		leaderless = member0_leaderless(c);
	uint64_t ms;
	struct etcd_call_opts o = {.timeout_ms = 5000, .attempt_timeout_ms = 1000,
				   .require_leader = true};
	int err = leaderless ? timed_grant(c, &o, &ms) : 0;
	CHECK_OK(harness_etcd_thaw(H, 1));
	CHECK_OK(harness_etcd_thaw(H, 2));
	CHECK(leaderless);
	fprintf(stderr, "leaderless member: %s after %" PRIu64 " ms\n", etcd_strerror(err), ms);
	CHECK_INT_EQ(err, -EAGAIN);
	CHECK(ms < 1000); /* refused, not held until an attempt or the deadline ran out */
	etcd_client_free(c);
}

int main(void)
{
	debug_from_env();
	static const char *const extra[] = {"--experimental-watch-progress-notify-interval", "1s",
					    NULL};
	CHECK_OK(harness_etcd_start(3, extra, &H));
	CHECK_OK(loop_new(&L));
	RUN(test_failover_all_refused);
	RUN(test_failover_dead_first_endpoint);
	RUN(test_failover_stop_connected_member);
	RUN(test_failover_hung_member_watch_idle);
	RUN(test_failover_silent_member_attempts);
	RUN(test_failover_leaderless_member_refuses);
	loop_free(L);
	harness_etcd_free(H);
	return CHECK_EXIT();
}
