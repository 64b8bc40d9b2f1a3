/* SPDX-License-Identifier: MIT */
/*
 * http_query.h - the query string of a request target (hostile bytes), as
 * the dashboard's API reads it: /api/v1/history?plugin=NAME,
 * /api/v1/events?since=N. Deliberately narrow: parameters are NAME=VALUE
 * joined by '&', a value is 1..255 characters of [A-Za-z0-9._-] (a plugin
 * name or a number; no percent-decoding, so no escape can smuggle
 * anything), each parameter at most once, and only the names the route
 * knows. Anything else is refused, never guessed at. Pure; any thread.
 */
#ifndef LH_HTTP_QUERY_H
#define LH_HTTP_QUERY_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_QUERY_VALUE_MAX 255

/* http_query_check - the query of target (after the first '?', up to a
 * '#'; none is fine) has only parameters named in known (a NULL-terminated
 * list), each once, each well formed. 0, or -EINVAL with why (a static
 * string) in *ret_why. */
int http_query_check(const char *target, const char *const *known, const char **ret_why);

/* http_query_get - the value of parameter name in target's query into buf
 * (NUL-terminated). 1 when present, 0 when absent (buf untouched), -EINVAL
 * when the query is malformed or the value does not fit len. Call
 * http_query_check first to refuse unknown parameters. */
int http_query_get(const char *target, const char *name, char *buf, size_t len);

/* http_query_u64 - parameter name as a decimal number (1..20 digits, no
 * sign, at most UINT64_MAX): 1 when present (*ret set), 0 absent, -EINVAL
 * malformed. */
int http_query_u64(const char *target, const char *name, uint64_t *ret);

/* http_target_path_is - target's path (before '?' or '#') equals path */
int http_target_path_is(const char *target, const char *path);

#endif
