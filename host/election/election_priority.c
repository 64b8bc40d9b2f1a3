/* SPDX-License-Identifier: MIT */
/*
 * election_priority.c - `--priority [NAME=]N` (see election_priority.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_priority.h"

int priority_parse(const char *arg, struct priority_rule *ret, char *err, size_t err_len)
{
	const char *eq = strchr(arg, '=');
	const char *num = eq ? eq + 1 : arg;
	size_t nl = eq ? (size_t)(eq - arg) : 0;
	if (eq && (nl == 0 || nl > LH_PLUGIN_NAME_MAX || memchr(arg, '/', nl))) {
		snprintf(err, err_len, "--priority wants N or NAME=N with a plugin name of 1 to %d "
		         "characters", LH_PLUGIN_NAME_MAX);
		return -EINVAL;
	}
	char *end = NULL;
	errno = 0;
	long v = strtol(num, &end, 10);
	if (errno || end == num || *end || v < PRIORITY_MIN || v > PRIORITY_MAX) {
		snprintf(err, err_len, "--priority wants an integer from %d to %d", PRIORITY_MIN,
		         PRIORITY_MAX);
		return -EINVAL;
	}
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->plugin, arg, nl);
	ret->value = (int32_t)v;
	return 0;
}

int32_t priority_resolve(const struct priority_rule *rules, size_t n, const char *plugin)
{
	int32_t node = 0, own = 0;
	int have_own = 0;
	for (size_t i = 0; i < n; i++) {
		if (!rules[i].plugin[0])
			node = rules[i].value;
		else if (plugin && strcmp(rules[i].plugin, plugin) == 0) {
			own = rules[i].value;
			have_own = 1;
		}
	}
	return have_own ? own : node;
}
