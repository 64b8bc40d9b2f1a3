/* SPDX-License-Identifier: MIT */
/*
 * ctl_timeout.c - the --timeout DUR of the verbs that wait (ctl_timeout.h).
 */
#include "config.h"

#include <errno.h>

#include "base/duration.h"
#include "ctl/ctl_timeout.h"

int ctl_timeout_parse(const char *s, uint32_t dflt_ms, uint32_t min_ms, uint32_t max_ms,
                      uint32_t *ret_ms)
{
	uint64_t ns;
	if (!s) {
		*ret_ms = dflt_ms;
		return 0;
	}
	if (duration_parse(s, &ns) < 0)
		return -EINVAL;
	uint64_t ms = ns / 1000000u + (ns % 1000000u != 0);
	if (ms < min_ms || ms > max_ms)
		return -EINVAL;
	*ret_ms = (uint32_t)ms;
	return 0;
}
