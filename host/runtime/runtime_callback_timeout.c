/* SPDX-License-Identifier: MIT */
/*
 * runtime_callback_timeout.c - see runtime_callback_timeout.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_callback_timeout.h"
#include "base/duration.h"
#include "abi/abi_loader.h"
#include "worker/worker.h"

const uint32_t callback_timeout_defaults_ms[PLUGIN_CALLBACKS] = {
	[PLUGIN_CALLBACK_INIT] = 60u * 1000u,
	[PLUGIN_CALLBACK_ON_ELECTED] = 15u * 1000u,
	[PLUGIN_CALLBACK_ON_RELEASES_CHANGED] = 15u * 1000u,
	[PLUGIN_CALLBACK_RECONCILE] = 5u * 60u * 1000u,
	[PLUGIN_CALLBACK_ON_DEPOSED] = 15u * 1000u,
	[PLUGIN_CALLBACK_FINI] = 15u * 1000u,
	[PLUGIN_CALLBACK_ON_WATCH_EVENTS] = 60u * 1000u,
	[PLUGIN_CALLBACK_ON_CONFIG_CHANGED] = 15u * 1000u,
	[PLUGIN_CALLBACK_VALIDATE_CONFIG] = 15u * 1000u,
	[PLUGIN_CALLBACK_RECONCILE_KEY] = 60u * 1000u,
};

int callback_timeout_parse(const char *arg, struct callback_timeout_rule *ret, char *err,
                           size_t err_len)
{
	struct callback_timeout_rule r = {.plugin = "", .kind = CALLBACK_TIMEOUT_ALL, .ms = 0};
	char buf[160];
	if (!arg || snprintf(buf, sizeof(buf), "%s", arg) >= (int)sizeof(buf))
		goto bad;
	char *dur = buf, *eq = strchr(buf, '='), *colon = strchr(buf, ':');
	if (colon && (!eq || colon < eq)) { /* NAME: */
		*colon = '\0';
		if (!loader_name_valid(buf)) {
			snprintf(err, err_len, "'%s' is not a plugin name", buf);
			return -EINVAL;
		}
		memcpy(r.plugin, buf, strlen(buf) + 1); /* valid: at most 63 bytes */
		dur = colon + 1;
	}
	if (eq) {
		*eq = '\0';
		char *kind = dur;
		dur = eq + 1;
		unsigned k;
		if (strcmp(kind, "all") == 0)
			r.kind = CALLBACK_TIMEOUT_ALL;
		else if (worker_callback_parse(kind, &k) == 0)
			r.kind = (int)k;
		else {
			snprintf(err, err_len,
			         "'%s' is not a callback (init, on_elected, on_releases_changed, "
			         "reconcile, on_deposed, fini, on_watch_events or all)",
			         kind);
			return -EINVAL;
		}
	}
	uint64_t ns;
	if (strcmp(dur, "none") == 0 || strcmp(dur, "0") == 0)
		r.ms = 0;
	else if (duration_parse(dur, &ns) == 0 && ns >= 1000000 && ns / 1000000 < UINT32_MAX)
		r.ms = (uint32_t)(ns / 1000000);
	else {
		snprintf(err, err_len, "'%s' is not a duration of at least 1ms (or 0/none)", dur);
		return -EINVAL;
	}
	*ret = r;
	return 0;
bad:
	snprintf(err, err_len, "expected [NAME:][KIND=]DURATION");
	return -EINVAL;
}

void callback_timeout_resolve(const struct callback_timeout_rule *rules, size_t n,
                              const char *plugin, uint32_t ret_ms[PLUGIN_CALLBACKS])
{
	for (unsigned k = 0; k < PLUGIN_CALLBACKS; k++)
		ret_ms[k] = callback_timeout_defaults_ms[k];
	/* least specific first: every plugin/every kind .. this plugin/this kind */
	for (int level = 0; level < 4; level++) {
		bool want_named = level >= 2, want_kind = level % 2 == 1;
		for (size_t i = 0; i < n; i++) {
			const struct callback_timeout_rule *r = &rules[i];
			bool named = r->plugin[0] != '\0';
			if (named != want_named || (r->kind != CALLBACK_TIMEOUT_ALL) != want_kind)
				continue;
			if (named && (!plugin || strcmp(r->plugin, plugin) != 0))
				continue;
			for (unsigned k = 0; k < PLUGIN_CALLBACKS; k++)
				if (r->kind == CALLBACK_TIMEOUT_ALL || (unsigned)r->kind == k)
					ret_ms[k] = r->ms ? r->ms : PLUGIN_TIMEOUT_NONE;
		}
	}
}
