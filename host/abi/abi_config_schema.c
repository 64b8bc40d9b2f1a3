/* SPDX-License-Identifier: MIT */
/*
 * abi_config_schema.c - the plugin's configuration schema (ABI 1.3): the
 * schema checked at load, documents checked against it, typed lookups.
 * See abi_config_schema.h.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "abi/abi_config_doc.h"
#include "abi/abi_config_schema.h"
#include "base/duration.h"

static const char *const abi_schema_type_names[] = {"a string", "an integer", "a boolean",
                                                    "a duration", "a list of strings"};

const struct lh_config_field *abi_schema_field(const struct lh_plugin *d, uint32_t i)
{
	return (const struct lh_config_field *)(const void *)((const char *)d->config_fields +
	                                                      (size_t)i * d->config_field_size);
}

static json_object *abi_schema_parse_max(const char *text, size_t len, size_t max)
{
	if (!text || len > max)
		return NULL;
	struct json_tokener *tok = json_tokener_new_ex(PLUGIN_CONFIG_MAX_DEPTH);
	if (!tok)
		return NULL;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, text, (int)len);
	bool ok = json_tokener_get_error(tok) == json_tokener_success &&
	          json_tokener_get_parse_end(tok) == len;
	if (json_tokener_get_error(tok) == json_tokener_continue) {
		/* a bare number or literal ends only at the end of the input */
		o = json_tokener_parse_ex(tok, "", 1);
		ok = json_tokener_get_error(tok) == json_tokener_success;
	}
	json_tokener_free(tok);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

json_object *abi_schema_parse(const char *text, size_t len)
{
	return abi_schema_parse_max(text, len, ABI_SCHEMA_DEF_MAX);
}

json_object *abi_schema_parse_doc(const char *text, size_t len)
{
	json_object *o = abi_schema_parse_max(text, len, PLUGIN_CONFIG_MAX);
	if (o && !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* abi_schema_show - v as JSON for a refusal, cut at 40 bytes */
static const char *abi_schema_show(json_object *v, char *buf, size_t len)
{
	const char *s = v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN) : "null";
	size_t n = strlen(s);
	snprintf(buf, len, "%.40s%s", s, n > 40 ? "..." : "");
	return buf;
}

int abi_schema_duration_ms(json_object *v, int64_t *ret_ms)
{
	if (json_object_is_type(v, json_type_string)) {
		uint64_t ns;
		if (duration_parse(json_object_get_string(v), &ns) < 0)
			return -EINVAL;
		*ret_ms = (int64_t)(ns / 1000000u);
		return 0;
	}
	if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
		double s = json_object_get_double(v);
		if (!(s >= 0 && s <= 1e15))
			return -EINVAL;
		*ret_ms = (int64_t)(s * 1000.0);
		return 0;
	}
	return -EINVAL;
}

static bool abi_schema_type_ok(uint32_t type, json_object *v)
{
	int64_t ms;
	switch (type) {
	case LH_CONFIG_STRING:
		return json_object_is_type(v, json_type_string);
	case LH_CONFIG_INT:
		return json_object_is_type(v, json_type_int);
	case LH_CONFIG_BOOL:
		return json_object_is_type(v, json_type_boolean);
	case LH_CONFIG_DURATION:
		return abi_schema_duration_ms(v, &ms) == 0;
	case LH_CONFIG_STRINGS:
		if (!json_object_is_type(v, json_type_array))
			return false;
		for (size_t i = 0; i < json_object_array_length(v); i++)
			if (!json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
				return false;
		return true;
	default:
		return false;
	}
}

int abi_schema_value_ok(const struct lh_config_field *f, const char *path, json_object *v,
                        char *why, size_t why_len)
{
	char shown[48];
	if (!v || !abi_schema_type_ok(f->type, v)) {
		snprintf(why, why_len, "field \"%s\": expected %s, got %s", path,
		         f->type < 5 ? abi_schema_type_names[f->type] : "?",
		         abi_schema_show(v, shown, sizeof(shown)));
		return -EINVAL;
	}
	if (f->type == LH_CONFIG_STRING && f->allowed) {
		const char *s = json_object_get_string(v);
		for (size_t i = 0; f->allowed[i]; i++)
			if (strcmp(f->allowed[i], s) == 0)
				return 0;
		char list[200] = "";
		size_t o = 0;
		for (size_t i = 0; f->allowed[i] && o + 1 < sizeof(list); i++) {
			int n = snprintf(list + o, sizeof(list) - o, "%s\"%s\"", i ? ", " : "", f->allowed[i]);
			o += n > 0 ? (size_t)n : 0;
		}
		snprintf(why, why_len, "field \"%s\": %s is not one of %s", path,
		         abi_schema_show(v, shown, sizeof(shown)), list);
		return -EINVAL;
	}
	if ((f->type == LH_CONFIG_INT || f->type == LH_CONFIG_DURATION) && f->min < f->max) {
		int64_t n = 0;
		if (f->type == LH_CONFIG_INT)
			n = json_object_get_int64(v);
		else
			abi_schema_duration_ms(v, &n);
		if (n < f->min || n > f->max) {
			snprintf(why, why_len, "field \"%s\": %s is outside %lld..%lld%s", path,
			         abi_schema_show(v, shown, sizeof(shown)), (long long)f->min,
			         (long long)f->max, f->type == LH_CONFIG_DURATION ? " ms" : "");
			return -EINVAL;
		}
	}
	return 0;
}

/* abi_schema_path_ok - parts of [A-Za-z0-9_-]+ joined by '.' */
static bool abi_schema_path_ok(const char *p)
{
	size_t n = strnlen(p, ABI_SCHEMA_PATH_MAX + 1), part = 0;
	if (n == 0 || n > ABI_SCHEMA_PATH_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '.') {
			if (part == 0)
				return false;
			part = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		           c == '_' || c == '-')
			part++;
		else
			return false;
	}
	return part > 0;
}

/* one path inside the other ("a" and "a.b"), or equal */
static bool abi_schema_paths_clash(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
	return memcmp(a, b, n) == 0 && (la == lb || (la < lb ? b[la] : a[lb]) == '.');
}

/* abi_schema_field_ok - field f (index i) on its own: pointers, path, type,
 * flags, allowed values, default */
static int abi_schema_field_ok(const struct lh_config_field *f, uint32_t i,
                               bool (*in_object)(const void *p, const void *base), const void *base,
                               char *why, size_t why_len)
{
#define IN(p) (!in_object || in_object((p), base))
	if (!f->path || !IN(f->path) || (f->def && !IN(f->def)) ||
	    (f->allowed && (!IN(f->allowed) || (uintptr_t)f->allowed % _Alignof(const char *) != 0))) {
		snprintf(why, why_len, "config field %u: a pointer does not point into the plugin", i);
		return -EPROTO;
	}
	if (!abi_schema_path_ok(f->path)) {
		snprintf(why, why_len, "config field %u: bad path (parts of [A-Za-z0-9_-] joined by "
		         "'.', at most %u bytes)", i, ABI_SCHEMA_PATH_MAX);
		return -EINVAL;
	}
	if (f->type > LH_CONFIG_STRINGS || (f->flags & ~LH_CONFIG_REQUIRED)) {
		snprintf(why, why_len, "config field \"%s\": unknown type %u or flags 0x%x", f->path,
		         f->type, f->flags);
		return -EINVAL;
	}
	if (f->allowed) {
		size_t k = 0;
		for (; k <= ABI_SCHEMA_ALLOWED_MAX && f->allowed[k]; k++)
			if (!IN(f->allowed[k]) || strnlen(f->allowed[k], 257) > 256)
				break;
		if (f->type != LH_CONFIG_STRING || k == 0 || k > ABI_SCHEMA_ALLOWED_MAX ||
		    f->allowed[k]) {
			snprintf(why, why_len, "config field \"%s\": allowed values only for a string, 1 to "
			         "%u of at most 256 bytes, NULL-terminated", f->path, ABI_SCHEMA_ALLOWED_MAX);
			return -EINVAL;
		}
	}
#undef IN
	if (f->def) {
		json_object *v = abi_schema_parse(f->def, strnlen(f->def, ABI_SCHEMA_DEF_MAX + 1));
		char inner[300];
		int r = v ? abi_schema_value_ok(f, f->path, v, inner, sizeof(inner)) : -EINVAL;
		json_object_put(v);
		if (r < 0) {
			snprintf(why, why_len, "config field \"%s\": the default is not a valid value (%s)",
			         f->path, v ? inner : "not one JSON value");
			return -EINVAL;
		}
	}
	return 0;
}

int abi_schema_validate(const struct lh_plugin *d, bool (*in_object)(const void *p, const void *base),
                        const void *base, char *why, size_t why_len)
{
	if (d->n_config_fields == 0)
		return 0;
	/* an array the compiler laid out is aligned, and so is each element */
	const size_t align = _Alignof(struct lh_config_field);
	if (!d->config_fields || d->n_config_fields > LH_CONFIG_FIELDS_MAX ||
	    d->config_field_size < sizeof(struct lh_config_field) || d->config_field_size > 4096 ||
	    (uintptr_t)d->config_fields % align != 0 || d->config_field_size % align != 0 ||
	    (in_object && !in_object(d->config_fields, base))) {
		snprintf(why, why_len, "config_fields: %u fields of %u bytes at %s (at most %u fields of "
		         "at least %zu bytes, inside the plugin)", d->n_config_fields,
		         d->config_field_size, d->config_fields ? "an address" : "NULL",
		         LH_CONFIG_FIELDS_MAX, sizeof(struct lh_config_field));
		return d->config_fields ? -EINVAL : -EPROTO;
	}
	for (uint32_t i = 0; i < d->n_config_fields; i++) {
		int r = abi_schema_field_ok(abi_schema_field(d, i), i, in_object, base, why, why_len);
		if (r < 0)
			return r;
	}
	for (uint32_t i = 0; i < d->n_config_fields; i++)
		for (uint32_t j = i + 1; j < d->n_config_fields; j++)
			if (abi_schema_paths_clash(abi_schema_field(d, i)->path, abi_schema_field(d, j)->path)) {
				snprintf(why, why_len, "config fields \"%s\" and \"%s\": one path holds the other",
				         abi_schema_field(d, i)->path, abi_schema_field(d, j)->path);
				return -EINVAL;
			}
	return 0;
}

json_object *abi_schema_lookup(json_object *doc, const char *path)
{
	char part[ABI_SCHEMA_PATH_MAX + 1];
	json_object *at = doc;
	for (const char *p = path; at;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (n == 0 || n > ABI_SCHEMA_PATH_MAX || !json_object_is_type(at, json_type_object))
			return NULL;
		memcpy(part, p, n);
		part[n] = 0;
		json_object *next = NULL;
		if (!json_object_object_get_ex(at, part, &next))
			return NULL;
		at = next;
		if (!dot)
			return at;
		p = dot + 1;
	}
	return NULL;
}

const struct lh_config_field *abi_schema_find(const struct lh_plugin *d, const char *path)
{
	for (uint32_t i = 0; d->config_fields && i < d->n_config_fields; i++)
		if (strcmp(abi_schema_field(d, i)->path, path) == 0)
			return abi_schema_field(d, i);
	return NULL;
}

int abi_schema_check(const struct lh_plugin *d, json_object *doc, char *why, size_t why_len)
{
	if (!doc)
		return 0;
	for (uint32_t i = 0; d->config_fields && i < d->n_config_fields; i++) {
		const struct lh_config_field *f = abi_schema_field(d, i);
		json_object *v = abi_schema_lookup(doc, f->path);
		if (!v) {
			if (!(f->flags & LH_CONFIG_REQUIRED))
				continue;
			snprintf(why, why_len, "field \"%s\": required, but the document has none", f->path);
			return -EINVAL;
		}
		int r = abi_schema_value_ok(f, f->path, v, why, why_len);
		if (r < 0)
			return r;
	}
	return 0;
}

int abi_schema_check_text(const struct lh_plugin *d, const char *text, size_t len, char *why,
                          size_t why_len)
{
	if (!d->config_fields || d->n_config_fields == 0)
		return 0;
	json_object *o = abi_schema_parse_doc(text, len);
	bool ok = o != NULL;
	int r = -EINVAL;
	if (!ok)
		snprintf(why, why_len, "the document is not a JSON object");
	else
		r = abi_schema_check(d, o, why, why_len);
	json_object_put(o);
	return r;
}
