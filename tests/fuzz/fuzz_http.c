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
 * but its CRLFs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http/http_head.h"

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
	}
	free(head);
	return 0;
}
