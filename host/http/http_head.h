/* SPDX-License-Identifier: MIT */
/*
 * http_head.h - the check of an HTTP/1.x request head (hostile bytes) that
 * the front of the HTTP endpoint (http_guard.h) makes before anything
 * reaches nng's server, and the minimal request it passes on.
 */
#ifndef LH_HTTP_HEAD_H
#define LH_HTTP_HEAD_H

#include <stddef.h>

/* http_head_parse - head: a complete request head (request line, header
 * lines, the empty line; CRLF or LF), NUL-terminated; it is modified (the
 * request line is cut at its end). The request line must be METHOD SP
 * TARGET SP VERSION: METHOD 1..16 token characters, TARGET 1..1024
 * printable ASCII characters starting with '/', VERSION HTTP/1.0 or
 * HTTP/1.1; header lines (at most max_lines) must be NAME ":" VALUE with a
 * token NAME and no control characters but tabs. On success writes
 * "METHOD TARGET HTTP/1.1\r\nHost: leasehold\r\nConnection: close\r\n\r\n"
 * into req (NUL-terminated) and returns 0; otherwise returns the status to
 * refuse with: 400 (malformed), 431 (too many header lines), 505 (another
 * HTTP version), and req is unspecified. */
int http_head_parse(char *head, unsigned max_lines, char *req, size_t req_len);

#endif
