/* SPDX-License-Identifier: MIT */
/*
 * fuzz_config.c - the configuration file decoder (host/base/config_file.h):
 * libyaml's parser and document API under our shape checks.
 *
 * Input: a file's bytes. The schema has a key of every shape (a value, a
 * joined list, a repeated list, rules, a flag-only key) and per-plugin keys
 * of each shape, as daemon_options.c's tables do. Invariants: the result is
 * 0, -EINVAL or -ENOMEM; on failure the error is one line that starts with
 * "PATH:" and *ret is untouched; on success every setting names a flag of
 * the schema, comes from a line of the input, and its value is a
 * NUL-terminated string; the settings are bounded.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_file.h"
#include "fuzz.h"

static const struct config_key keys[] = {
	{"etcd", CONFIG_KEY_JOINED},
	{"node-id", CONFIG_KEY_SCALAR},
	{"role", CONFIG_KEY_REPEATED},
	{"callback-timeout", CONFIG_KEY_RULES},
	{"plugin-isolation", CONFIG_KEY_RULES},
	{"plugin-read", CONFIG_KEY_REPEATED},
	{"config", CONFIG_KEY_NONE},
};

static const struct config_plugin_key plugin_keys[] = {
	{"isolation", "plugin-isolation", '=', CONFIG_KEY_SCALAR},
	{"callback-timeout", "callback-timeout", ':', CONFIG_KEY_RULES},
	{"read", "plugin-read", '=', CONFIG_KEY_REPEATED},
};

static const struct config_schema schema = {
	.keys = keys,
	.n_keys = sizeof(keys) / sizeof(keys[0]),
	.plugin_keys = plugin_keys,
	.n_plugin_keys = sizeof(plugin_keys) / sizeof(plugin_keys[0]),
};

static int known_flag(const char *flag)
{
	for (size_t i = 0; i < schema.n_keys; i++)
		if (flag == keys[i].name)
			return keys[i].kind != CONFIG_KEY_NONE;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config_file *cf = (struct config_file *)(uintptr_t)1; /* untouched on failure */
	char err[CONFIG_ERR_MAX + 64];
	size_t lines = 1;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n' || data[i] == '\r';
	memset(err, 'x', sizeof(err));
	int r = config_file_decode("fuzz.conf", (const char *)data, size, &schema, &cf, err,
				   sizeof(err));
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
	if (r < 0) {
		FUZZ_CHECK(cf == (struct config_file *)(uintptr_t)1);
		FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
		FUZZ_CHECK(strncmp(err, "fuzz.conf:", 10) == 0);
		return 0;
	}
	FUZZ_CHECK(cf && strcmp(cf->path, "fuzz.conf") == 0);
	FUZZ_CHECK(cf->n_settings <= CONFIG_FILE_MAX_SETTINGS);
	for (size_t i = 0; i < cf->n_settings; i++) {
		const struct config_setting *s = &cf->settings[i];
		FUZZ_CHECK(known_flag(s->flag));
		FUZZ_CHECK(s->value && s->key && s->key[0]);
		FUZZ_CHECK(s->line >= 1 && s->line <= lines);
		(void)strlen(s->value); /* NUL-terminated (ASan checks the read) */
	}
	config_file_free(cf);
	return 0;
}
