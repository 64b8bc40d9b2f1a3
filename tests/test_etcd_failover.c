/*
 * test_etcd_failover.c - endpoint failover on a 3-member cluster: when the
 * member in use is stopped, calls move to the next endpoint within their
 * deadline and a running watch resumes there without losing or repeating
 * an event. With no endpoint reachable a call fails with -ECONNREFUSED.
 */
#include "test_etcd_common.c"

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
		size_t kl = ev[i].kv.key_len < 15 ? ev[i].kv.key_len : 15;
		memcpy(r->keys[r->n], ev[i].kv.key, kl);
		r->keys[r->n][kl] = 0;
		r->n++;
	}
	if (r->n >= r->target)
		r->reached = true;
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

	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 3;
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("f/", 2, end);
	CHECK_OK(etcd_watch_start(c, "f/", 2, end, el, base, 0, wcb, r, &w));
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
	struct etcd_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.endpoints = eps;
	cfg.n_endpoints = 3;
	cfg.watch_idle_timeout_ms = 3000;
	struct etcd_client *c = NULL;
	CHECK_OK(etcd_client_new(L, &cfg, &c));
	CHECK_STR_EQ(etcd_client_endpoint(c), eps[0]);
	int64_t base = put_retry(c, "h/0");
	struct wrec *r = calloc(1, sizeof(*r));
	CHECK(r);
	r->target = 1;
	struct etcd_watch *w = NULL;
	uint8_t end[8];
	size_t el = etcd_prefix_end("h/", 2, end);
	CHECK_OK(
	    etcd_watch_start(c, "h/", 2, end, el, base, ETCD_WATCH_PROGRESS_NOTIFY, wcb, r, &w));
	if (loop_run_until(L, &r->reached, loop_now() + WAIT_MS * LOOP_NS_PER_MS) < 0)
		CHECK(!"first event");
	/* writes go through member 2 while member 0 is frozen */
	const char *ep2 = eps[2];
	struct etcd_client *c2 = client_for(L, &ep2, 1, NULL, NULL);
	CHECK_OK(kill(harness_etcd_pid(H, 0), SIGSTOP));
	r->target = 2;
	r->reached = false;
	put_retry(c2, "h/1");
	bool ok = loop_run_until(L, &r->reached, loop_now() + 20 * LOOP_NS_PER_S) == 0;
	CHECK_OK(kill(harness_etcd_pid(H, 0), SIGCONT));
	CHECK(ok);
	CHECK_INT_EQ(r->n, 2);
	CHECK_STR_EQ(r->keys[1], "h/1");
	CHECK(r->revs[1] > r->revs[0]);
	etcd_watch_cancel(w);
	etcd_client_free(c2);
	etcd_client_free(c);
	free(r);
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
	loop_free(L);
	harness_etcd_free(H);
	return 0;
}
