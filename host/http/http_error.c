/* SPDX-License-Identifier: MIT */
/*
 * http_error.c - nng's HTML error pages as one line of text or JSON
 * (http_error.h).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http_error.h"

/* http_error_header_has - the head ans[0..head_len) has header name whose
 * value starts with prefix (both case-insensitive) */
static bool http_error_header_has(const char *ans, size_t head_len, const char *name,
				  const char *prefix)
{
	size_t nl = strlen(name), pl = strlen(prefix);
	for (const char *l = ans; l && l < ans + head_len;) {
		const char *eol = memchr(l, '\n', (size_t)(ans + head_len - l));
		if (!eol)
			break;
		l = eol + 1;
		if ((size_t)(ans + head_len - l) > nl + 1 && strncasecmp(l, name, nl) == 0 &&
		    l[nl] == ':') {
			const char *v = l + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			if ((size_t)(ans + head_len - v) >= pl && strncasecmp(v, prefix, pl) == 0)
				return true;
		}
	}
	return false;
}

/* http_error_why - the one line an operator reads for status */
static const char *http_error_why(int status)
{
	switch (status) {
	case 404:
		return "no such path";
	case 405:
		return "method not allowed (only GET and HEAD)";
	case 400:
		return "bad request";
	default:
		return status >= 500 ? "internal error" : "refused";
	}
}

int http_error_rewrite(const char *req, const char *ans, size_t len, char **ret, size_t *ret_len)
{
	char reason[64] = "", target[1100] = "", body[1300];
	int status = 0, n;

	if (len < 12 || sscanf(ans, "HTTP/1.%*1[01] %3d %63[^\r\n]", &status, reason) < 1 ||
	    status < 400)
		return 0;
	const char *end = memmem(ans, len, "\r\n\r\n", 4);
	if (!end || !http_error_header_has(ans, (size_t)(end - ans) + 2, "Content-Type", "text/html"))
		return 0;
	bool head = strncmp(req, "HEAD ", 5) == 0;
	const char *t = strchr(req, ' ');
	if (t)
		snprintf(target, sizeof(target), "%.*s", (int)strcspn(t + 1, " ?#"), t + 1);
	bool api = strncmp(target, "/api/", 5) == 0 || strcmp(target, "/api") == 0;
	/* the target is what the guard let through: printable, no quotes to
	 * escape but '"' and '\', which a JSON string must not carry raw */
	for (char *p = target; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '?';
	if (api)
		n = snprintf(body, sizeof(body), "{\"error\": \"%s: %s\"}\n", http_error_why(status),
			     target);
	else
		n = snprintf(body, sizeof(body), "%s: %s\n", http_error_why(status), target);
	if (n < 0 || (size_t)n >= sizeof(body))
		return 0;
	size_t cap = (size_t)n + 512;
	char *out = malloc(cap);
	if (!out)
		return -ENOMEM;
	int h = snprintf(out, cap,
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
			 "Cache-Control: no-store\r\n%sConnection: close\r\n\r\n%s",
			 status, reason[0] ? reason : "Error",
			 api ? "application/json" : "text/plain; charset=utf-8", n,
			 status == 405 ? "Allow: GET, HEAD\r\n" : "", head ? "" : body);
	if (h < 0 || (size_t)h >= cap) {
		free(out);
		return 0;
	}
	*ret = out;
	*ret_len = (size_t)h;
	return 1;
}
