/* SPDX-License-Identifier: MIT */
/*
 * abi_config_schema.h - a plugin's declarative configuration schema (ABI
 * 1.3, lh_plugin.config_fields): checking the schema itself when the
 * plugin loads (it is plugin-provided, so outside input), checking a
 * cluster document against it (on `config set` and before
 * on_config_changed), and reading a typed field by path. Pure functions on
 * their arguments, any thread; json-c objects are borrowed from the caller.
 *
 * Design notes
 * - The schema is read in the process that loaded the plugin (the daemon's
 *   loader, the leasehold-worker): its pointers point into the plugin.
 * - Paths are parts of [A-Za-z0-9_-] joined by '.', each part a key of a
 *   nested object. A JSON null counts as absent (the default applies).
 * - Refusals are one sentence that starts with the field's path, e.g.
 *   `field "prefix": expected a string, got 5`: leaseholdctl shows it as is.
 */
#ifndef LH_ABI_CONFIG_SCHEMA_H
#define LH_ABI_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "leasehold/plugin.h"

/* the longest path, and the most allowed values of a field */
#define ABI_SCHEMA_PATH_MAX 128u
#define ABI_SCHEMA_ALLOWED_MAX 64u
/* the longest default's JSON text */
#define ABI_SCHEMA_DEF_MAX 4096u

/* abi_schema_field - field i (< d->n_config_fields) of d's schema, read
 * with the plugin's own stride (config_field_size) */
const struct lh_config_field *abi_schema_field(const struct lh_plugin *d, uint32_t i);

/* abi_schema_validate - is d's schema well formed (see plugin.h)? in_object
 * (may be NULL) tells whether a pointer lies inside the plugin's object.
 * Returns 0, or -EINVAL / -EPROTO with one sentence in why. */
int abi_schema_validate(const struct lh_plugin *d, bool (*in_object)(const void *p, const void *base),
                        const void *base, char *why, size_t why_len);

/* abi_schema_check - does doc (a JSON object; NULL: no document, which
 * passes) satisfy d's schema? 0, or -EINVAL with the field and the reason
 * in why. */
int abi_schema_check(const struct lh_plugin *d, json_object *doc, char *why, size_t why_len);

/* abi_schema_check_text - the same for JSON text (len bytes; not a JSON
 * object: -EINVAL). */
int abi_schema_check_text(const struct lh_plugin *d, const char *text, size_t len, char *why,
                          size_t why_len);

/* abi_schema_value_ok - may v (NULL: JSON null) be a value of a field of
 * this type, allowed values and bounds? 0 or -EINVAL with why (path named). */
int abi_schema_value_ok(const struct lh_config_field *f, const char *path, json_object *v,
                        char *why, size_t why_len);

/* abi_schema_lookup - the value at path in doc (borrowed from doc), or NULL
 * when a part is absent, null or its parent not an object */
json_object *abi_schema_lookup(json_object *doc, const char *path);

/* abi_schema_find - the field of d's schema with this path, or NULL */
const struct lh_config_field *abi_schema_find(const struct lh_plugin *d, const char *path);

/* abi_schema_duration_ms - a duration value ("5s" or a number of seconds)
 * in ms; 0 or -EINVAL */
int abi_schema_duration_ms(json_object *v, int64_t *ret_ms);

/* abi_schema_parse - JSON text (any value) parsed strictly; NULL when it is
 * not one value or is over ABI_SCHEMA_DEF_MAX bytes. The caller puts it. */
json_object *abi_schema_parse(const char *text, size_t len);

/* abi_schema_parse_doc - a document (a JSON object of at most
 * PLUGIN_CONFIG_MAX bytes) parsed strictly, or NULL. The caller puts it. */
json_object *abi_schema_parse_doc(const char *text, size_t len);

#endif
