/* SPDX-License-Identifier: MIT */
/*
 * http_client.h - small blocking HTTP helpers for the tests of the daemon's
 * HTTP endpoint: libcurl requests and raw-socket exchanges (for input no
 * well-behaved client sends).
 */
#ifndef LH_TEST_HTTP_CLIENT_H
#define LH_TEST_HTTP_CLIENT_H

#include <stddef.h>

struct http_reply {
	long status;        /* 0 when no answer (connection failed, timed out) */
	char *body;         /* malloc'd, NUL-terminated, never NULL */
	size_t len;
	char ctype[128];    /* Content-Type, "" if none */
};

/* http_request - METHOD http://127.0.0.1:port/path (method NULL = GET),
 * deadline timeout_ms. Returns the status (0: no answer). Free with
 * http_reply_free. */
long http_request(int port, const char *method, const char *path, int timeout_ms,
                  struct http_reply *ret);
void http_reply_free(struct http_reply *r);
/* http_status - the status of GET path, body discarded (0: no answer) */
long http_status(int port, const char *path);

/* http_raw - connect to 127.0.0.1:port, send len bytes, read until the peer
 * closes or timeout_ms passes. Returns the status code of the first response
 * line, 0 when the peer closed without a response, -1 when it neither
 * answered nor closed in time (the connection was still open), -2 when the
 * connection failed. */
int http_raw(int port, const void *req, size_t len, int timeout_ms);

/* http_open_partial - connect to 127.0.0.1:port and send `partial` (an
 * unfinished request); returns the open fd (the caller closes it) or -1 */
int http_open_partial(int port, const char *partial);

/* http_metric - the value of the sample line that starts with `series`
 * (e.g. "leasehold_is_leader{plugin=\"reconciler\"}") in an exposition;
 * returns 0 and *ret_value, or -1 when absent */
int http_metric(const char *text, const char *series, double *ret_value);
/* http_metrics_get - one GET /metrics of 127.0.0.1:port (5 s), the values
 * of n series into values (-1 for one that is absent or when the scrape
 * failed); 0 when the scrape answered 200, else -1 */
int http_metrics_get(int port, const char *const *series, double *values, size_t n);

#endif
