/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "base/release.h"

int release_cmp(struct release a, struct release b)
{
	if (a.major != b.major)
		return a.major < b.major ? -1 : 1;
	if (a.minor != b.minor)
		return a.minor < b.minor ? -1 : 1;
	if (a.patch != b.patch)
		return a.patch < b.patch ? -1 : 1;
	return 0;
}

static int release_parse_part(const char **p, uint32_t *ret)
{
	const char *s = *p;
	uint32_t v = 0;
	int digits = 0;
	while (*s >= '0' && *s <= '9') {
		if (++digits > 6)
			return -EINVAL;
		v = v * 10 + (uint32_t)(*s - '0');
		s++;
	}
	if (digits == 0)
		return -EINVAL;
	*p = s;
	*ret = v;
	return 0;
}

int release_parse(const char *s, struct release *ret)
{
	struct release r;
	if (!s || release_parse_part(&s, &r.major) < 0 || *s++ != '.' || release_parse_part(&s, &r.minor) < 0 ||
	    *s++ != '.' || release_parse_part(&s, &r.patch) < 0 || *s != '\0')
		return -EINVAL;
	*ret = r;
	return 0;
}

char *release_format(struct release r, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u", r.major, r.minor, r.patch);
	return buf;
}
