/* SPDX-License-Identifier: MIT */
/*
 * fuzz_plugin_config.c - plugin configuration documents (ABI 1.2) as they
 * come from etcd (P/N/config), a --plugin-config file or a control request:
 * plugin_config_doc_check on the input, and plugin_config_parse_flag on it
 * as a NUL-terminated `--plugin-config` argument.
 * Invariants: an accepted document is within PLUGIN_CONFIG_MAX, has no NUL
 * byte and json-c reads it as an object; a refusal writes a message; an
 * accepted flag has a valid plugin name and a file pointing into the input.
 * ABI 1.3: the input as a document checked against a fixed schema
 * (abi_schema_check_text: a refusal names a field or the document; an
 * accepted document's fields have their types), and as a plugin's schema
 * (a field whose path, type and default come from the input, checked with
 * abi_schema_validate: an accepted default is a value of its type).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "fuzz.h"
#include "abi/abi_loader.h"
#include "abi/abi_config_doc.h"
#include "abi/abi_config_schema.h"

static const char *const fuzz_modes[] = {"a", "b", NULL};
static const struct lh_config_field fuzz_fields[] = {
	{.path = "prefix", .type = LH_CONFIG_STRING, .def = "\"out/\""},
	{.path = "n.count", .type = LH_CONFIG_INT, .min = 0, .max = 1000},
	{.path = "on", .type = LH_CONFIG_BOOL},
	{.path = "wait", .type = LH_CONFIG_DURATION, .flags = LH_CONFIG_REQUIRED},
	{.path = "mode", .type = LH_CONFIG_STRING, .allowed = fuzz_modes},
	{.path = "tags", .type = LH_CONFIG_STRINGS},
};

static void fuzz_schema(const uint8_t *data, size_t size)
{
	struct lh_plugin d = {.config_fields = fuzz_fields, .n_config_fields = 6,
	                      .config_field_size = sizeof(struct lh_config_field)};
	char why[400] = "";
	if (abi_schema_check_text(&d, (const char *)data, size, why, sizeof(why)) < 0) {
		FUZZ_CHECK(strncmp(why, "field \"", 7) == 0 || strncmp(why, "the document", 12) == 0);
	} else {
		json_object *o = abi_schema_parse_doc((const char *)data, size);
		FUZZ_CHECK(o != NULL);
		int64_t ms;
		FUZZ_CHECK(abi_schema_duration_ms(abi_schema_lookup(o, "wait"), &ms) == 0);
		json_object *p = abi_schema_lookup(o, "prefix");
		FUZZ_CHECK(!p || json_object_is_type(p, json_type_string));
		json_object_put(o);
	}
	/* a schema from the input: byte 0 the type, then path NUL default */
	if (size < 2)
		return;
	char *buf = malloc(size + 1);
	if (!buf)
		return;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;
	size_t pl = strlen(buf);
	struct lh_config_field f = {.path = buf, .type = data[0] % 6u,
	                            .def = pl + 1 < size - 1 ? buf + pl + 1 : NULL};
	d.config_fields = &f;
	d.n_config_fields = 1;
	why[0] = 0;
	int r = abi_schema_validate(&d, NULL, NULL, why, sizeof(why));
	if (r == 0 && f.def) {
		json_object *v = abi_schema_parse(f.def, strlen(f.def));
		FUZZ_CHECK(v != NULL && abi_schema_value_ok(&f, f.path, v, why, sizeof(why)) == 0);
		json_object_put(v);
	} else if (r < 0)
		FUZZ_CHECK(why[0] != 0);
	free(buf);
}

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

	fuzz_schema(data, size);

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
