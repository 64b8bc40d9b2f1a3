/* SPDX-License-Identifier: MIT */
/*
 * election_priority.h - a node's candidate priority per plugin (`leasehold
 * --priority [NAME=]N`, repeatable): the node's default (no NAME) and
 * per-plugin overrides. The election publishes it in the node's member
 * record; a leader that sees a candidate of the newest release with a
 * strictly higher priority hands over to it once (election_handover.c).
 *
 * Design notes
 * - Resolution for a plugin: 0, then the last rule without a name, then
 *   the last rule naming the plugin. A config file maps 1:1 (a node-wide
 *   `priority = N` and one per plugin).
 */
#ifndef LH_PRIORITY_H
#define LH_PRIORITY_H

#include <stddef.h>
#include <stdint.h>

#include <leasehold/plugin.h>

#define PRIORITY_MIN (-1000000)
#define PRIORITY_MAX 1000000

struct priority_rule {
	char plugin[LH_PLUGIN_NAME_MAX + 1]; /* "" = every plugin of the node */
	int32_t value;
};

/* priority_parse - "N" or "NAME=N" (N an integer in PRIORITY_MIN ..
 * PRIORITY_MAX). Returns 0 and fills *ret, or -EINVAL with one sentence in
 * err (*ret untouched). arg is only read. */
int priority_parse(const char *arg, struct priority_rule *ret, char *err, size_t err_len);

/* priority_resolve - plugin's priority after rules[0..n) (see the notes) */
int32_t priority_resolve(const struct priority_rule *rules, size_t n, const char *plugin);

#endif
