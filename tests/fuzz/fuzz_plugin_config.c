/* SPDX-License-Identifier: MIT */
/*
 * fuzz_plugin_config.c - plugin configuration documents (ABI 1.2) as they
 * come from etcd (P/N/config), a --plugin-config file or a control request:
 * plugin_config_doc_check on the input, and plugin_config_parse_flag on it
 * as a NUL-terminated `--plugin-config` argument.
 * Invariants: an accepted document is within PLUGIN_CONFIG_MAX, has no NUL
 * byte and json-c reads it as an object; a refusal writes a message; an
 * accepted flag has a valid plugin name and a file pointing into the input.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "fuzz.h"
#include "abi/abi_loader.h"
#include "abi/abi_config_doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	int r = plugin_config_doc_check(data, size, err, sizeof(err));
	if (r == 0) {
		FUZZ_CHECK(size <= PLUGIN_CONFIG_MAX && !memchr(data, 0, size));
		struct json_tokener *tok = json_tokener_new_ex(PLUGIN_CONFIG_MAX_DEPTH);
		FUZZ_CHECK(tok != NULL);
		json_object *o = json_tokener_parse_ex(tok, (const char *)data, (int)size);
		FUZZ_CHECK(o != NULL && json_object_is_type(o, json_type_object));
		json_object_put(o);
		json_tokener_free(tok);
	} else
		FUZZ_CHECK(err[0] != 0);

	char *arg = malloc(size + 1);
	if (!arg)
		return 0;
	memcpy(arg, data, size);
	arg[size] = 0;
	char name[LH_PLUGIN_NAME_MAX + 1];
	const char *file = NULL;
	err[0] = 0;
	if (plugin_config_parse_flag(arg, name, &file, err, sizeof(err)) == 0)
		FUZZ_CHECK(loader_name_valid(name) && file > arg && file < arg + size + 1 && *file);
	else
		FUZZ_CHECK(err[0] != 0);
	free(arg);
	return 0;
}
