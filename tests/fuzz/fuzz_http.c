/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c - the request-head check of the HTTP endpoint's front
 * (host/http/http_head.h), which sees every byte a client sends before nng does.
 *
 * Input: a request head (any bytes; cut at the first NUL, as the front
 * refuses heads with NUL bytes before the check). Invariants: the result is
 * 0, 400, 431 or 505; on 0 the request passed on is NUL-terminated, fits,
 * has the documented shape (a token method, a target starting with '/',
 * HTTP/1.1, the fixed headers) and carries no byte outside printable ASCII
 * but its CRLFs. Then the passed-on target goes through the dashboard
 * API's query checks (host/http/http_query.h) as the guard and the API
 * read it: an accepted query yields only values of 1..255 characters of
 * [A-Za-z0-9._-], and a number only from digits.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http/http_head.h"
#include "http/http_query.h"

static void fuzz_http_query(const char *req)
{
	static const char *const known[] = {"plugin", "since", NULL};
	const char *sp = strchr(req, ' ');
	char target[1100];
	size_t tl = sp ? strcspn(sp + 1, " ") : 0;
	if (!sp || tl >= sizeof(target))
		return;
	memcpy(target, sp + 1, tl);
	target[tl] = 0;
	const char *why = NULL;
	int c = http_query_check(target, known, &why);
	FUZZ_CHECK(c == 0 || (c == -EINVAL && why));
	char v[HTTP_QUERY_VALUE_MAX + 1];
	int g = http_query_get(target, "plugin", v, sizeof(v));
	FUZZ_CHECK(g == 0 || g == 1 || g == -EINVAL);
	if (c == 0 && g == 1) {
		size_t n = strlen(v);
		FUZZ_CHECK(n >= 1 && n <= HTTP_QUERY_VALUE_MAX);
		FUZZ_CHECK(strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n);
	}
	uint64_t since = 0;
	int u = http_query_u64(target, "since", &since);
	FUZZ_CHECK(u == 0 || u == 1 || u == -EINVAL);
	(void)http_target_path_is(target, "/api/v1/events");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *head = malloc(size + 1);
	if (!head)
		return 0;
	memcpy(head, data, size);
	head[size] = 0;
	char req[1200];
	memset(req, 'x', sizeof(req));
	int r = http_head_parse(head, 64, req, sizeof(req));
	FUZZ_CHECK(r == 0 || r == 400 || r == 431 || r == 505);
	if (r == 0) {
		size_t n = strnlen(req, sizeof(req));
		FUZZ_CHECK(n < sizeof(req));
		const char *tail = " HTTP/1.1\r\nHost: leasehold\r\nConnection: close\r\n\r\n";
		FUZZ_CHECK(n > strlen(tail) && strcmp(req + n - strlen(tail), tail) == 0);
		const char *sp = strchr(req, ' ');
		FUZZ_CHECK(sp && sp > req && sp[1] == '/');
		for (size_t i = 0; i < n - strlen(tail); i++)
			FUZZ_CHECK((unsigned char)req[i] > 0x20 ? (unsigned char)req[i] < 0x7f
			                                        : &req[i] == sp);
		fuzz_http_query(req);
	}
	free(head);
	return 0;
}
