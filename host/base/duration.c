/* SPDX-License-Identifier: MIT */
/*
 * duration.c - durations as operators write them (see duration.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/duration.h"

int duration_parse(const char *s, uint64_t *ret_ns)
{
	if (!s || !*s)
		return -EINVAL;
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	double mul;
	if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
		mul = 1e9;
	else if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "m") == 0)
		mul = 60e9;
	else if (strcmp(end, "h") == 0)
		mul = 3600e9;
	else
		return -EINVAL;
	double ns = v * mul;
	if (ns > 1e18)
		return -EINVAL;
	*ret_ns = (uint64_t)ns;
	return 0;
}
