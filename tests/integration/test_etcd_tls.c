/* SPDX-License-Identifier: MIT */
/*
 * test_etcd_tls.c - the etcd client over https against a real etcd with a
 * throwaway PKI (harness_etcd_start_tls; certs made by the openssl CLI).
 *
 * Proven here:
 * - put / get / txn / lease / watch work over https with the server verified
 *   against the test CA (etcd_config.cacert);
 * - with --client-cert-auth: the client cert (etcd_config.cert/key) works; no
 *   cert, or a cert from another CA, is refused;
 * - a wrong CA (another generated CA) fails server verification;
 * - a missing CA / cert / key file fails the call cleanly, never a crash;
 * - plain http:// against the https port fails the call.
 *
 * What the client returns (measured here; etcd.c maps libcurl failures in
 * curl_to_errno / is_connect_failure; a TLS setup that fails on our side is
 * -EKEYREJECTED, "etcd: TLS failed ..."):
 *   server cert from another CA (curl: peer verification)   -> -EKEYREJECTED
 *   missing CA file                                          -> -EKEYREJECTED
 *   missing client cert / key file, or a key of another cert -> -EKEYREJECTED
 *   client cert signed by another CA (server refuses: only a
 *     reset connection tells)                                -> -EIO
 *   no client cert with --client-cert-auth                   -> -ECONNREFUSED
 *     (etcd aborts the handshake before a request byte is sent, which the
 *     client treats as a connection failure: it tries the next endpoint and
 *     reports "no endpoint could be reached"; -EIO is also accepted since with
 *     TLS 1.3 the alert may come after the request was sent)
 *   plain http:// against the https port (HTTP 400)           -> -EIO
 * None of these carries a response (the gateway was never reached). A watch
 * with a bad TLS setup does not report anything: it keeps reconnecting with
 * backoff until cancelled (the etcd.h contract: transient failures are not
 * reported). LH_DEBUG=1 shows the client's debug log.
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

#include <unistd.h>

static struct loop *L;

/* tls_client - a client for h's first member with the given files (each may
 * be NULL); request timeout 5 s. */
static struct etcd_client *tls_client(struct harness_etcd *h, const char *ca, const char *cert,
                                      const char *key)
{
	static const char *ep;
	ep = harness_etcd_url(h, 0);
	struct etcd_config cfg = config_of(&ep, 1);
	cfg.cacert = ca;
	cfg.cert = cert;
	cfg.key = key;
	cfg.request_timeout_ms = 5000;
	return client_new_of(L, &cfg);
}

/* put_err - the err of one put through c (the response is dropped) */
static int put_err(struct etcd_client *c, const char *key)
{
	struct etcd_response *r = NULL;
	int err = sput(L, c, key, "v", 0, false, &r);
	/* a TLS failure never reaches the gateway: no response at all */
	if (err < 0)
		CHECK(r == NULL);
	etcd_response_free(r);
	return err;
}

/* expect_tls_failure - a put through c fails with `want`; prints it */
static void expect_tls_failure(struct etcd_client *c, const char *what, int want)
{
	int err = put_err(c, "tls/never");
	fprintf(stderr, "    %s: %d (%s)\n", what, err, etcd_strerror(err));
	CHECK_INT_EQ(err, want);
}

/* ---- server-only TLS ---- */

static struct harness_etcd *H; /* https, no client-cert-auth */
static struct harness_etcd *HC; /* https + --client-cert-auth */

struct wrec {
	int n;
	char keys[8][16];
	int64_t revs[8];
	bool reached;
	int target;
	int errs;
};

static void wcb(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
                size_t n, void *ud)
{
	(void)w;
	(void)revision;
	struct wrec *r = ud;
	if (err < 0) {
		r->errs++;
		return;
	}
	for (size_t i = 0; i < n && r->n < 8; i++) {
		size_t kl = ev[i].kv.key_len < 15 ? ev[i].kv.key_len : 15;
		memcpy(r->keys[r->n], ev[i].kv.key, kl);
		r->keys[r->n][kl] = 0;
		r->revs[r->n] = ev[i].kv.mod_revision;
		r->n++;
	}
	if (r->n >= r->target)
		r->reached = true;
}

/* kv_txn_lease_watch - the whole client surface over one TLS client */
static void kv_txn_lease_watch(struct etcd_client *c, const char *pfx)
{
	char k1[32], k2[32];
	snprintf(k1, sizeof(k1), "%s/a", pfx);
	snprintf(k2, sizeof(k2), "%s/b", pfx);
	CHECK(strncmp(etcd_client_endpoint(c), "https://", 8) == 0);

	/* the revision to watch from: now + 1 (a watch from "now" could miss the
	 * first put if the stream is not open yet) */
	struct etcd_response *r = NULL;
	CHECK_OK(sput(L, c, "tls-base", "x", 0, false, &r));
	CHECK(r);
	int64_t base = r->header.revision;
	etcd_response_free(r);
	r = NULL;
	struct wrec rec;
	memset(&rec, 0, sizeof(rec));
	rec.target = 3;
	uint8_t end[32];
	size_t pl = strlen(pfx);
	size_t el = etcd_prefix_end(pfx, pl, end);
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(c, pfx, pl, end, el, base + 1, ETCD_WATCH_PREV_KV, wcb, &rec, &w));

	/* put + get */
	CHECK_OK(sput(L, c, k1, "one", 0, false, &r));
	CHECK(r && r->header.revision > 0);
	etcd_response_free(r);
	struct etcd_kv *kv = sget(L, c, k1);
	CHECK(kv);
	CHECK_MEM_EQ(kv->value, kv->value_len, "one", 3);
	int64_t create_rev = kv->create_revision;
	etcd_kv_free(kv);

	/* txn: compare create_revision, put on success */
	struct etcd_compare cmp = cmp_key(ETCD_CMP_CREATE, ETCD_CMP_EQUAL, k1, create_rev);
	struct etcd_op ok_op = op_key(ETCD_OP_PUT, k2);
	ok_op.value = "two";
	ok_op.value_len = 3;
	struct etcd_op fail_op = op_key(ETCD_OP_RANGE, k1);
	struct res x = {0};
	CHECK_OK(etcd_txn(c, &cmp, 1, &ok_op, 1, &fail_op, 1, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK(x.r->succeeded);
	CHECK_INT_EQ(x.r->n_responses, 1);
	CHECK_INT_EQ(x.r->responses[0].op_type, ETCD_OP_PUT);
	res_clear(&x);
	/* the same compare against a wrong revision takes the failure branch */
	cmp.number = create_rev + 1000;
	CHECK_OK(etcd_txn(c, &cmp, 1, &ok_op, 1, &fail_op, 1, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK(!x.r->succeeded);
	CHECK_INT_EQ(x.r->n_responses, 1);
	CHECK_INT_EQ(x.r->responses[0].n_kvs, 1);
	res_clear(&x);

	/* lease grant + keepalive + revoke */
	CHECK_OK(etcd_lease_grant(c, 5, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	int64_t lease = x.r->lease_id;
	CHECK(lease != 0);
	res_clear(&x);
	CHECK_OK(etcd_lease_keepalive(c, lease, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	CHECK(x.r->ttl > 0);
	res_clear(&x);
	CHECK_OK(etcd_lease_revoke(c, lease, NULL, res_cb, &x, NULL));
	res_wait(L, &x, WAIT_MS);
	CHECK_OK(x.err);
	res_clear(&x);

	/* delete: the third event */
	struct etcd_op del = op_key(ETCD_OP_DELETE, k1);
	struct etcd_response *dr = NULL;
	CHECK_OK(sop(L, c, &del, &dr));
	CHECK_INT_EQ(dr->deleted, 1);
	etcd_response_free(dr);

	int wr = loop_run_until(L, &rec.reached, loop_now() + WAIT_MS * LOOP_NS_PER_MS);
	if (wr < 0)
		fprintf(stderr, "watch saw %d events, %d errors\n", rec.n, rec.errs);
	CHECK_OK(wr);
	CHECK_INT_EQ(rec.errs, 0);
	CHECK_INT_EQ(rec.n, 3);
	CHECK_STR_EQ(rec.keys[0], k1);
	CHECK_STR_EQ(rec.keys[1], k2);
	CHECK_STR_EQ(rec.keys[2], k1);
	CHECK(rec.revs[0] < rec.revs[1] && rec.revs[1] < rec.revs[2]);
	etcd_watch_cancel(w);
}

static void test_tls_ca_verified_put_get_txn_watch(void)
{
	const char *ca;
	CHECK_OK(harness_tls_files(H, &ca, NULL, NULL));
	struct etcd_client *c = tls_client(H, ca, NULL, NULL);
	kv_txn_lease_watch(c, "tls");
	etcd_client_free(c);
}

static void test_tls_wrong_ca_fails_verification(void)
{
	const char *other_ca;
	CHECK_OK(harness_tls_other_files(H, &other_ca, NULL, NULL));
	struct etcd_client *c = tls_client(H, other_ca, NULL, NULL);
	expect_tls_failure(c, "server cert signed by another CA", -EKEYREJECTED);
	/* the client keeps working for nothing else and frees cleanly */
	expect_tls_failure(c, "second call, same client", -EKEYREJECTED);
	etcd_client_free(c);
}

static void test_tls_missing_ca_file_fails_cleanly(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/no-such-ca.pem", harness_dir(H));
	struct etcd_client *c = tls_client(H, path, NULL, NULL);
	expect_tls_failure(c, "missing CA file", -EKEYREJECTED);
	etcd_client_free(c);
}

static void test_tls_plain_http_to_https_port_fails(void)
{
	const char *https = harness_etcd_url(H, 0);
	char url[96];
	snprintf(url, sizeof(url), "http://%s", https + strlen("https://"));
	const char *ep = url;
	struct etcd_client *c = client_for(L, &ep, 1, NULL, NULL);
	expect_tls_failure(c, "http:// against the https port", -EIO);
	etcd_client_free(c);
}

/* a watch whose TLS setup cannot work never delivers, and cancels cleanly */
static void test_tls_watch_wrong_ca_cancels_cleanly(void)
{
	const char *other_ca;
	CHECK_OK(harness_tls_other_files(H, &other_ca, NULL, NULL));
	struct etcd_client *c = tls_client(H, other_ca, NULL, NULL);
	struct wrec rec;
	memset(&rec, 0, sizeof(rec));
	rec.target = 1;
	struct etcd_watch *w = NULL;
	CHECK_OK(etcd_watch_start(c, "tlsw/", 5, NULL, 0, 0, 0, wcb, &rec, &w));
	/* a put through a good client: the bad watch must not see it */
	const char *ca;
	CHECK_OK(harness_tls_files(H, &ca, NULL, NULL));
	struct etcd_client *good = tls_client(H, ca, NULL, NULL);
	CHECK_OK(sput(L, good, "tlsw/", "x", 0, false, NULL));
	loop_for(L, 500);
	CHECK_INT_EQ(rec.n, 0);
	etcd_watch_cancel(w);
	etcd_client_free(good);
	etcd_client_free(c);
}

/* ---- client-cert-auth ---- */

static void test_cca_with_client_cert_works(void)
{
	const char *ca, *cert, *key;
	CHECK_OK(harness_tls_files(HC, &ca, &cert, &key));
	struct etcd_client *c = tls_client(HC, ca, cert, key);
	kv_txn_lease_watch(c, "cca");
	etcd_client_free(c);
}

static void test_cca_without_client_cert_refused(void)
{
	const char *ca;
	CHECK_OK(harness_tls_files(HC, &ca, NULL, NULL));
	struct etcd_client *c = tls_client(HC, ca, NULL, NULL);
	int err = put_err(c, "cca/never");
	fprintf(stderr, "    no client cert: %d (%s)\n", err, etcd_strerror(err));
	CHECK(err == -EIO || err == -ECONNREFUSED);
	etcd_client_free(c);
}

static void test_cca_cert_from_other_ca_refused(void)
{
	const char *ca, *ocert, *okey;
	CHECK_OK(harness_tls_files(HC, &ca, NULL, NULL));
	CHECK_OK(harness_tls_other_files(HC, NULL, &ocert, &okey));
	struct etcd_client *c = tls_client(HC, ca, ocert, okey);
	int err = put_err(c, "cca/never");
	fprintf(stderr, "    client cert of another CA: %d (%s)\n", err, etcd_strerror(err));
	CHECK(err == -EIO || err == -ECONNREFUSED);
	etcd_client_free(c);
}

static void test_cca_missing_cert_or_key_file_fails_cleanly(void)
{
	const char *ca, *cert, *key;
	CHECK_OK(harness_tls_files(HC, &ca, &cert, &key));
	char nocert[512], nokey[512];
	snprintf(nocert, sizeof(nocert), "%s/no-such-cert.pem", harness_dir(HC));
	snprintf(nokey, sizeof(nokey), "%s/no-such-key.pem", harness_dir(HC));
	CHECK(access(nocert, F_OK) != 0 && access(nokey, F_OK) != 0);

	struct etcd_client *c = tls_client(HC, ca, nocert, key);
	expect_tls_failure(c, "missing client cert file", -EKEYREJECTED);
	etcd_client_free(c);
	c = tls_client(HC, ca, cert, nokey);
	expect_tls_failure(c, "missing client key file", -EKEYREJECTED);
	etcd_client_free(c);
	/* a key that does not match the cert */
	const char *okey;
	CHECK_OK(harness_tls_other_files(HC, NULL, NULL, &okey));
	c = tls_client(HC, ca, cert, okey);
	expect_tls_failure(c, "key of another cert", -EKEYREJECTED);
	etcd_client_free(c);
}

int main(void)
{
	debug_from_env();
	CHECK_OK(loop_new(&L));
	CHECK_OK(harness_etcd_start_tls(1, false, NULL, &H));
	RUN(test_tls_ca_verified_put_get_txn_watch);
	RUN(test_tls_wrong_ca_fails_verification);
	RUN(test_tls_missing_ca_file_fails_cleanly);
	RUN(test_tls_plain_http_to_https_port_fails);
	RUN(test_tls_watch_wrong_ca_cancels_cleanly);
	harness_etcd_free(H);

	CHECK_OK(harness_etcd_start_tls(1, true, NULL, &HC));
	RUN(test_cca_with_client_cert_works);
	RUN(test_cca_without_client_cert_refused);
	RUN(test_cca_cert_from_other_ca_refused);
	RUN(test_cca_missing_cert_or_key_file_fails_cleanly);
	harness_etcd_free(HC);
	loop_free(L);
	return CHECK_EXIT();
}
