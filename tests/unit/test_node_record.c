/* SPDX-License-Identifier: MIT */
/*
 * test_node_record.c - the per-node state record's codec on garbage
 * (host/election/election_node_record.h): every malformed value is refused with -EBADMSG and
 * leaves the output untouched; a record of a newer format (higher "v",
 * unknown fields, an unknown state word) is read; what the encoder writes
 * decodes to the same record, even from hostile strings; "host" and
 * "previous" (which tell a crash restart from a second host with the same
 * node id) round-trip, are refused when malformed, and decide
 * node_sessions_conflict.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "election/election_node_record.h"

static int decode(const char *s, struct node_record *r)
{
	return node_record_decode(s, strlen(s), r);
}

static void test_garbage_refused(void)
{
	static const char *const bad[] = {
		"",
		"null",
		"[]",
		"42",
		"{",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\"} {}",
		"{\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\"}",        /* no v */
		"{\"v\":0,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\"}", /* v 0 */
		"{\"v\":\"1\",\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\"}",
		"{\"v\":1,\"release\":\"1.0.0\",\"state\":\"leading\"}", /* no node */
		"{\"v\":1,\"node\":\"\",\"release\":\"1.0.0\",\"state\":\"leading\"}",
		"{\"v\":1,\"node\":\"a/b\",\"release\":\"1.0.0\",\"state\":\"leading\"}",
		"{\"v\":1,\"node\":\"a\\u0001\",\"release\":\"1.0.0\",\"state\":\"leading\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0\",\"state\":\"leading\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":1,\"state\":\"leading\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\"}", /* no state */
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"Leading\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"ready\":1}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"since\":-1}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"since\":1.5}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"reason\":[]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"reconcile\":1}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\",\"reconcile\":{}}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\","
		"\"reconcile\":{\"at\":5,\"ok\":\"yes\"}}",
		"{\"v\":99999999999,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"leading\"}",
		/* host: a printable string; previous: up to 8 unpadded lower-case hex leases */
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"host\":7}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"host\":\"h\\u0007\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":\"1f\"}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[31]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[\"\"]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[\"0\"]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[\"01f\"]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[\"1F\"]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"previous\":[\"0x1f\"]}",
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\","
		"\"previous\":[\"8000000000000000\"]}", /* above INT64_MAX */
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\","
		"\"previous\":[\"11111111111111111\"]}", /* 17 digits */
		"{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\","
		"\"previous\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\"]}", /* 9 */
	};
	struct node_record r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&r, 0x5a, sizeof(r));
		int e = decode(bad[i], &r);
		if (e != -EBADMSG)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK_INT_EQ(e, -EBADMSG);
		CHECK_INT_EQ(((unsigned char *)&r)[0], 0x5a); /* untouched */
	}
	/* an embedded NUL, an oversized value, NULL */
	static const char nul[] = "{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\"}\0";
	CHECK_INT_EQ(node_record_decode(nul, sizeof(nul), &r), -EBADMSG);
	size_t big = NODE_RECORD_MAX_BYTES + 1;
	char *b = malloc(big);
	CHECK(b != NULL);
	memset(b, ' ', big);
	memcpy(b, "{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\"}", 48);
	CHECK_INT_EQ(node_record_decode(b, big, &r), -EBADMSG);
	CHECK_INT_EQ(node_record_decode(b, big - 1, &r), 0); /* the limit itself is fine */
	free(b);
	CHECK_INT_EQ(node_record_decode(NULL, 3, &r), -EBADMSG);
	/* a string one byte over its limit */
	char longer[NODE_RECORD_TEXT_MAX + 128];
	char reason[NODE_RECORD_TEXT_MAX + 2];
	memset(reason, 'r', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	snprintf(longer, sizeof(longer),
		 "{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\",\"reason\":\"%s\"}",
		 reason);
	CHECK_INT_EQ(decode(longer, &r), -EBADMSG);
}

static void test_newer_format_read(void)
{
	struct node_record r;
	CHECK_INT_EQ(decode("{\"v\":7,\"node\":\"n3\",\"release\":\"2.0.0\",\"state\":\"some-new-state\","
			    "\"extra\":{\"x\":[1,2,3]}}",
			    &r),
		     0);
	CHECK_INT_EQ(r.version, 7);
	CHECK(strcmp(r.state, "some-new-state") == 0);
	CHECK(!r.ready && r.reconcile_at == 0 && r.reason[0] == '\0');
}

/* a version 1 record of node in state, the rest zero */
static struct node_record record_of(const char *node, const char *state)
{
	struct node_record r = {0};
	r.version = 1;
	snprintf(r.node, sizeof(r.node), "%s", node);
	snprintf(r.state, sizeof(r.state), "%s", state);
	return r;
}

static void test_round_trip(void)
{
	struct node_record r = record_of("node-\x01\x7f", "leading"), d;
	char *v;
	size_t n;
	r.release = (struct release){1, 2, 3};
	snprintf(r.reason, sizeof(r.reason), "paused \"by\" an operator\n");
	r.since = 1764000000;
	r.ready = false;
	snprintf(r.not_ready, sizeof(r.not_ready), "no etcd session");
	r.reconcile_at = 1764000001;
	r.reconcile_ok = false;
	memset(r.reconcile_error, 'e', sizeof(r.reconcile_error) - 1);
	CHECK_INT_EQ(node_record_encode(&r, &v, &n), 0);
	CHECK_INT_EQ(strlen(v), n);
	CHECK_INT_EQ(node_record_decode(v, n, &d), 0);
	CHECK(strcmp(d.node, "node-??") == 0); /* hostile bytes replaced */
	CHECK(strcmp(d.reason, "paused \"by\" an operator?") == 0);
	CHECK(strcmp(d.not_ready, "no etcd session") == 0);
	CHECK(release_cmp(d.release, r.release) == 0);
	CHECK(d.since == r.since && d.reconcile_at == r.reconcile_at && !d.reconcile_ok);
	CHECK_INT_EQ(strlen(d.reconcile_error), NODE_RECORD_TEXT_MAX);
	free(v);
}

static void test_restart_fields(void)
{
	struct node_record r = record_of("a", "campaigning"), d;
	char *v;
	size_t n;
	snprintf(r.host, sizeof(r.host), "db1:/run/leasehold");
	r.previous[0] = 0x694d8e2a1b3c5f01;
	r.previous[1] = INT64_MAX;
	r.n_previous = 2;
	CHECK_INT_EQ(node_record_encode(&r, &v, &n), 0);
	CHECK(strstr(v, "\"previous\":[\"694d8e2a1b3c5f01\",\"7fffffffffffffff\"]") != NULL);
	CHECK_INT_EQ(node_record_decode(v, n, &d), 0);
	free(v);
	CHECK(strcmp(d.host, "db1:/run/leasehold") == 0);
	CHECK_INT_EQ(d.n_previous, 2);
	CHECK(d.previous[0] == r.previous[0] && d.previous[1] == INT64_MAX);
	/* a record of a writer without them */
	CHECK_INT_EQ(decode("{\"v\":1,\"node\":\"a\",\"release\":\"1.0.0\",\"state\":\"x\"}", &d), 0);
	CHECK(d.host[0] == '\0' && d.n_previous == 0);

	/* one key: never a conflict; a restart: the record's lease and its
	 * previous ones; anything else with two or more keys is */
	int64_t one[] = {5}, restart[] = {5, 9}, twin[] = {5, 7};
	struct node_record rec = {0};
	rec.previous[0] = 5;
	rec.n_previous = 1;
	CHECK(!node_sessions_conflict(one, 1, NULL, 0));
	CHECK(!node_sessions_conflict(restart, 2, &rec, 9));
	CHECK(node_sessions_conflict(twin, 2, &rec, 9)); /* 7 is nobody's run */
	CHECK(node_sessions_conflict(restart, 2, NULL, 0)); /* no record: unexplained */
	rec.n_previous = 0;
	CHECK(node_sessions_conflict(restart, 2, &rec, 9)); /* 5 not named */
}

int main(void)
{
	test_garbage_refused();
	test_newer_format_read();
	test_round_trip();
	test_restart_fields();
	printf("test_node_record: ok\n");
	return 0;
}
