/* SPDX-License-Identifier: MIT */
/*
 * control_config.c - the keys of leasehold's configuration file (see
 * control_config.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/config_file.h"
#include "control/control_config.h"

#define AS_ENUM(id, name, kind, attr) F_##id,
enum { CONTROL_CONFIG_KEYS(AS_ENUM) N_FLAGS };
#define AS_KEY(id, name, kind, attr) {name, kind},
static const struct config_key flag_keys[N_FLAGS] = {CONTROL_CONFIG_KEYS(AS_KEY)};

/* The keys of a `plugins: NAME:` section: each becomes --flag NAME<sep>ARG
 * (config_file.h). A per-plugin setting is one row here plus its flag. */
static const struct config_plugin_key plugin_keys[] = {
	{"isolation", "plugin-isolation", '=', CONFIG_KEY_SCALAR},
	{"callback-timeout", "callback-timeout", ':', CONFIG_KEY_RULES},
	{"priority", "priority", '=', CONFIG_KEY_SCALAR},
	{"read", "plugin-read", '=', CONFIG_KEY_REPEATED},
	{"config", "plugin-config", '=', CONFIG_KEY_SCALAR},
};

static const struct config_schema schema = {
	.keys = flag_keys,
	.n_keys = N_FLAGS,
	.plugin_keys = plugin_keys,
	.n_plugin_keys = sizeof(plugin_keys) / sizeof(plugin_keys[0]),
};

const struct config_schema *control_config_schema(void)
{
	return &schema;
}

int control_config_file_control(const char *path, char *buf, size_t len, char *err,
				size_t err_len)
{
	struct config_file *cf;
	int r = config_file_load(path, &schema, &cf, err, err_len);

	if (r < 0)
		return r;
	r = -ENOENT;
	for (size_t i = 0; i < cf->n_settings; i++)
		if (strcmp(cf->settings[i].flag, flag_keys[F_CONTROL].name) == 0) {
			snprintf(buf, len, "%s", cf->settings[i].value);
			r = 0;
		}
	config_file_free(cf);
	return r;
}
