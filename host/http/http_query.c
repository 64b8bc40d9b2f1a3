/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "http/http_query.h"

static bool http_query_value_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* the query: after the first '?', ended by '#' or the end; *ret_len its length */
static const char *http_query_of(const char *target, size_t *ret_len)
{
	const char *q = target ? strchr(target, '?') : NULL;
	if (!q) {
		*ret_len = 0;
		return "";
	}
	q++;
	*ret_len = strcspn(q, "#");
	return q;
}

/* walk the parameters: for each, fn(name, nlen, value, vlen, ctx); a
 * malformed one ends the walk with -EINVAL and why */
typedef int (*http_query_fn)(const char *n, size_t nl, const char *v, size_t vl, void *ctx);

static int http_query_walk(const char *target, http_query_fn fn, void *ctx, const char **ret_why)
{
	size_t len;
	const char *q = http_query_of(target, &len), *end = q + len;
	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		const char *pe = amp ? amp : end;
		const char *eq = memchr(q, '=', (size_t)(pe - q));
		if (!eq || eq == q) {
			*ret_why = "a query parameter must be NAME=VALUE";
			return -EINVAL;
		}
		size_t vl = (size_t)(pe - eq - 1);
		if (vl == 0 || vl > HTTP_QUERY_VALUE_MAX) {
			*ret_why = "a query value must be 1 to 255 characters";
			return -EINVAL;
		}
		for (const char *c = eq + 1; c < pe; c++)
			if (!http_query_value_char(*c)) {
				*ret_why = "a query value may hold only A-Z a-z 0-9 . _ -";
				return -EINVAL;
			}
		int r = fn(q, (size_t)(eq - q), eq + 1, vl, ctx);
		if (r != 0) {
			*ret_why = r < 0 ? "unknown or repeated query parameter" : NULL;
			return r;
		}
		q = amp ? amp + 1 : end;
		if (amp && q == end) {
			*ret_why = "a query must not end in '&'";
			return -EINVAL;
		}
	}
	return 0;
}

struct http_query_check_ctx {
	const char *const *known;
	unsigned seen; /* bit i: known[i] was given */
};

static int http_query_check_one(const char *n, size_t nl, const char *v, size_t vl, void *ctx)
{
	struct http_query_check_ctx *c = ctx;
	(void)v;
	(void)vl;
	for (unsigned i = 0; c->known[i] && i < 32; i++) {
		if (strlen(c->known[i]) != nl || memcmp(c->known[i], n, nl) != 0)
			continue;
		if (c->seen & (1u << i))
			return -EINVAL;
		c->seen |= 1u << i;
		return 0;
	}
	return -EINVAL;
}

int http_query_check(const char *target, const char *const *known, const char **ret_why)
{
	struct http_query_check_ctx c = {.known = known};
	const char *why = NULL;
	int r = http_query_walk(target, http_query_check_one, &c, &why);
	if (r < 0)
		*ret_why = why;
	return r;
}

struct http_query_get_ctx {
	const char *name;
	char *buf;
	size_t len;
	int found;
};

static int http_query_get_one(const char *n, size_t nl, const char *v, size_t vl, void *ctx)
{
	struct http_query_get_ctx *c = ctx;
	if (strlen(c->name) != nl || memcmp(c->name, n, nl) != 0)
		return 0;
	if (vl + 1 > c->len)
		return -EINVAL;
	memcpy(c->buf, v, vl);
	c->buf[vl] = 0;
	c->found = 1;
	return 1; /* stop: the first one (http_query_check refuses repeats) */
}

int http_query_get(const char *target, const char *name, char *buf, size_t len)
{
	struct http_query_get_ctx c = {.name = name, .buf = buf, .len = len};
	const char *why = NULL;
	int r = http_query_walk(target, http_query_get_one, &c, &why);
	if (r < 0)
		return -EINVAL;
	return c.found;
}

int http_query_u64(const char *target, const char *name, uint64_t *ret)
{
	char buf[32];
	int r = http_query_get(target, name, buf, sizeof(buf));
	if (r <= 0)
		return r;
	size_t n = strspn(buf, "0123456789");
	if (n == 0 || n > 20 || buf[n] != 0)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(buf[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*ret = v;
	return 1;
}

int http_target_path_is(const char *target, const char *path)
{
	size_t n = target ? strcspn(target, "?#") : 0;
	return target && strlen(path) == n && memcmp(target, path, n) == 0;
}
