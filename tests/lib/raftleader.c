/* SPDX-License-Identifier: MIT */
/*
 * raftleader.c - see raftleader.h.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raftleader.h"

#define MAX_MEMBERS 3

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct body {
	char text[1024];
	size_t len;
};

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
	struct body *b = ud;
	size_t total = sz * n, room = sizeof(b->text) - 1 - b->len;
	size_t take = total < room ? total : room;
	memcpy(b->text + b->len, p, take);
	b->len += take;
	b->text[b->len] = 0;
	return total;
}

static bool post(const char *url, const char *path, const char *json, struct body *ret)
{
	char full[160];
	snprintf(full, sizeof(full), "%s%s", url, path);
	CURL *e = curl_easy_init();
	if (!e)
		return false;
	ret->len = 0;
	ret->text[0] = 0;
	curl_easy_setopt(e, CURLOPT_URL, full);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 500L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, ret);
	CURLcode rc = curl_easy_perform(e);
	long http = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
	curl_easy_cleanup(e);
	return rc == CURLE_OK && http == 200;
}

/* the uint64 in `"name":"<digits>"` of body (etcd sends member ids as
 * strings), 0 when absent */
static uint64_t id_field(const char *body, const char *name)
{
	char pat[48];
	snprintf(pat, sizeof(pat), "\"%s\":\"", name);
	const char *p = strstr(body, pat);
	if (!p)
		return 0;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(p + strlen(pat), &end, 10);
	if (errno || !end || *end != '"')
		return 0;
	return (uint64_t)v;
}

/* one status round: every running member's own id and named leader */
static bool status_round(const struct harness_etcd *h, uint64_t ids[MAX_MEMBERS],
                         uint64_t leaders[MAX_MEMBERS])
{
	int n = harness_etcd_members(h);
	for (int i = 0; i < n && i < MAX_MEMBERS; i++) {
		ids[i] = leaders[i] = 0;
		if (harness_etcd_pid(h, i) <= 0)
			continue;
		struct body b;
		if (!post(harness_etcd_url(h, i), "/v3/maintenance/status", "{}", &b))
			return false;
		ids[i] = id_field(b.text, "member_id");
		leaders[i] = id_field(b.text, "leader");
		if (!ids[i] || !leaders[i])
			return false;
	}
	return true;
}

/* the agreed leader's index, or -1 */
static int agreed(const struct harness_etcd *h, const uint64_t ids[MAX_MEMBERS],
                  const uint64_t leaders[MAX_MEMBERS], uint64_t *ret_id)
{
	int n = harness_etcd_members(h), at = -1;
	uint64_t lead = 0;
	for (int i = 0; i < n && i < MAX_MEMBERS; i++) {
		if (harness_etcd_pid(h, i) <= 0)
			continue;
		if (lead && leaders[i] != lead)
			return -1;
		lead = leaders[i];
	}
	for (int i = 0; i < n && i < MAX_MEMBERS; i++)
		if (harness_etcd_pid(h, i) > 0 && ids[i] == lead)
			at = i;
	if (at >= 0 && ret_id)
		*ret_id = lead;
	return at;
}

int harness_raft_leader(const struct harness_etcd *h, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t ids[MAX_MEMBERS], leaders[MAX_MEMBERS];
		if (status_round(h, ids, leaders)) {
			int at = agreed(h, ids, leaders, NULL);
			if (at >= 0)
				return at;
		}
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, 10); /* pacing of the probe, bounded by the deadline */
	}
}

int harness_raft_move_leader(const struct harness_etcd *h, int to, int timeout_ms)
{
	if (to < 0 || to >= harness_etcd_members(h) || harness_etcd_pid(h, to) <= 0)
		return -EINVAL;
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t ids[MAX_MEMBERS], leaders[MAX_MEMBERS];
		if (status_round(h, ids, leaders)) {
			int at = agreed(h, ids, leaders, NULL);
			if (at == to)
				return 0;
			if (at >= 0) {
				char req[64];
				struct body b;
				snprintf(req, sizeof(req), "{\"targetID\":\"%" PRIu64 "\"}", ids[to]);
				/* answered when the transfer finished (or failed: asked again) */
				(void)post(harness_etcd_url(h, at), "/v3/maintenance/transfer-leadership",
				           req, &b);
			}
		}
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, 10); /* pacing of the probe, bounded by the deadline */
	}
}
