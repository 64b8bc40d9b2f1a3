/* SPDX-License-Identifier: MIT */
/*
 * runtime_callback_timeout.h - how long each plugin callback may run, by callback
 * kind and plugin: the production defaults and the operator's rules
 * (`leasehold --callback-timeout [NAME:][KIND=]DUR`, repeatable).
 *
 * Design notes
 * - Defaults (callback_timeout_defaults_ms): reconcile is generous (5 min:
 *   it does the real work, may page through many keys and retry), the
 *   notifications are short (15 s: on_elected, on_releases_changed,
 *   on_deposed and fini should only record state), init is in between
 *   (60 s: it may open connections). A callback past its limit costs the
 *   node its leadership of that plugin (see runtime_instance.h).
 * - A rule names a plugin or every plugin, a kind or every kind (`all`),
 *   and a duration (`0` or `none`: no limit). Resolution per plugin and
 *   kind: the default, then rules for every plugin and every kind, then
 *   every plugin and this kind, then this plugin and every kind, then this
 *   plugin and this kind; within one level the last rule wins. A config
 *   file maps 1:1: a global table of KIND = DUR and one per plugin.
 */
#ifndef LH_CALLBACK_TIMEOUT_H
#define LH_CALLBACK_TIMEOUT_H

#include <stddef.h>
#include <stdint.h>

#include <leasehold/plugin.h>

#include "runtime/runtime_instance.h"

#define CALLBACK_TIMEOUT_ALL (-1) /* callback_timeout_rule.kind: every kind */

struct callback_timeout_rule {
	char plugin[LH_PLUGIN_NAME_MAX + 1]; /* "" = every plugin */
	int kind;                            /* PLUGIN_CALLBACK_* or CALLBACK_TIMEOUT_ALL */
	uint32_t ms;                         /* 0 = no limit */
};

/* the production defaults, indexed by PLUGIN_CALLBACK_* (ms) */
extern const uint32_t callback_timeout_defaults_ms[PLUGIN_CALLBACKS];

/* callback_timeout_parse - "[NAME:][KIND=]DUR" (KIND: init, on_elected,
 * on_releases_changed, reconcile, on_deposed, fini, on_watch_events or all; DUR: a duration
 * of duration_parse, at least 1ms, or 0 / none). Returns 0 and fills *ret,
 * or -EINVAL with one sentence in err (*ret untouched). arg is only read. */
int callback_timeout_parse(const char *arg, struct callback_timeout_rule *ret, char *err,
                           size_t err_len);

/* callback_timeout_resolve - the limits for `plugin` after the defaults and
 * rules[0..n) (see the design notes), as plugin_instance_config wants them:
 * ret_ms[kind] in ms, PLUGIN_TIMEOUT_NONE for no limit. */
void callback_timeout_resolve(const struct callback_timeout_rule *rules, size_t n,
                              const char *plugin, uint32_t ret_ms[PLUGIN_CALLBACKS]);

#endif
