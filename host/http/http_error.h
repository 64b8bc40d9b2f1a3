/* SPDX-License-Identifier: MIT */
/*
 * http_error.h - the error answers of the HTTP endpoint as an operator's
 * tools read them: one line of text/plain, or {"error": "why"} for a path
 * under /api/, never an HTML page. nng's server writes an HTML page for
 * what it refuses itself (no such path, a method a handler does not take);
 * the front (http_guard.h) passes every answer through
 * http_error_rewrite before it leaves.
 *
 * Pure functions, any thread.
 */
#ifndef LH_HTTP_ERROR_H
#define LH_HTTP_ERROR_H

#include <stddef.h>

/* http_error_rewrite - req: the request passed on ("METHOD TARGET
 * HTTP/1.1\r\n..."), ans[0..len): nng's whole answer. When ans is an error
 * status (4xx, 5xx) with an HTML body, *ret (malloc'd) and *ret_len hold
 * the same status with a one-line text body, or a JSON body for /api/
 * (no body for HEAD), and 1 is returned; 0 when ans stays as it is (ret
 * untouched); -ENOMEM. */
int http_error_rewrite(const char *req, const char *ans, size_t len, char **ret, size_t *ret_len);

#endif
