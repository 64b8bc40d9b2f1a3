/* SPDX-License-Identifier: MIT */
/*
 * ctl_output.c - leaseholdctl's output setting, table fitting and the YAML
 * emitter (ctl_output.h).
 *
 * Design notes
 * - YAML is emitted from the same json-c objects as the JSON output, so
 *   the two cannot say different things. Every string and every key is a
 *   double-quoted scalar: a node id "yes" or a release "1.10" stays a
 *   string, and the only escapes needed are '"', '\' and the bytes YAML
 *   does not allow raw (C0 controls and DEL, as \xHH).
 * - A table is cut only for a terminal (or an explicit $COLUMNS): a
 *   script reading a pipe gets every cell in full.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/ctl_output.h"

static struct ctl_output ctl_output_current;

static const char *const ctl_output_names[] = {
    [CTL_FORMAT_TABLE] = "table",
    [CTL_FORMAT_WIDE] = "wide",
    [CTL_FORMAT_JSON] = "json",
    [CTL_FORMAT_YAML] = "yaml",
};

int ctl_output_parse_format(const char *s, enum ctl_format *ret_format)
{
	for (size_t i = 0; s && i < sizeof(ctl_output_names) / sizeof(ctl_output_names[0]); i++)
		if (strcmp(s, ctl_output_names[i]) == 0) {
			*ret_format = (enum ctl_format)i;
			return 0;
		}
	return -EINVAL;
}

const char *ctl_output_format_name(enum ctl_format f)
{
	return (size_t)f < sizeof(ctl_output_names) / sizeof(ctl_output_names[0])
		   ? ctl_output_names[f]
		   : "?";
}

size_t ctl_output_columns(void)
{
	const char *e = getenv("COLUMNS");
	if (e && e[0]) {
		char *end = NULL;
		errno = 0;
		unsigned long v = strtoul(e, &end, 10);
		if (!errno && end && !*end && v > 0 && v < 100000 && e[0] != '-')
			return (size_t)v;
	}
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 0;
}

void ctl_output_set(const struct ctl_output *o)
{
	ctl_output_current = *o;
}

const struct ctl_output *ctl_output_get(void)
{
	return &ctl_output_current;
}

size_t ctl_output_detail_len(void)
{
	return ctl_output_current.format == CTL_FORMAT_WIDE ? CELL : 61;
}

void ctl_output_fit(size_t *width, const size_t *min_w, size_t ncol, size_t columns)
{
	size_t total = 1;

	if (columns == 0)
		return;
	for (size_t c = 0; c < ncol; c++)
		total += width[c] + 3; /* " cell |" */
	while (total > columns) {
		size_t best = ncol;
		for (size_t c = 0; c < ncol; c++)
			if (width[c] > min_w[c] && (best == ncol || width[c] > width[best]))
				best = c;
		if (best == ncol)
			return; /* every column at its minimum: the line stays wider */
		width[best]--;
		total--;
	}
}

/* ---- YAML ---- */

static void ctl_output_yaml_string(FILE *out, const char *s, size_t len)
{
	fputc('"', out);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(out, "\\x%02x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

/* ctl_output_yaml_is_block - v is written as a block (a non-empty object or
 * array) rather than a scalar on the key's line */
static bool ctl_output_yaml_is_block(json_object *v)
{
	if (json_object_is_type(v, json_type_object))
		return json_object_object_length(v) > 0;
	if (json_object_is_type(v, json_type_array))
		return json_object_array_length(v) > 0;
	return false;
}

static void ctl_output_yaml_scalar(FILE *out, json_object *v)
{
	if (!v)
		fputs("null", out);
	else if (json_object_is_type(v, json_type_string))
		ctl_output_yaml_string(out, json_object_get_string(v),
				       (size_t)json_object_get_string_len(v));
	else if (json_object_is_type(v, json_type_object))
		fputs("{}", out);
	else if (json_object_is_type(v, json_type_array))
		fputs("[]", out);
	else /* boolean, int, double: JSON's spelling is YAML's */
		fputs(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), out);
	fputc('\n', out);
}

static void ctl_output_yaml_node(FILE *out, json_object *v, int indent, bool inline_first);

/* ctl_output_yaml_item - a value after "key:" or "- " on the current line */
static void ctl_output_yaml_item(FILE *out, json_object *v, int indent, bool after_dash)
{
	if (!ctl_output_yaml_is_block(v)) {
		fputc(' ', out);
		ctl_output_yaml_scalar(out, v);
	} else if (after_dash) {
		/* "- key: ..." or "- - ...": the block starts on the dash's line */
		fputc(' ', out);
		ctl_output_yaml_node(out, v, indent, true);
	} else {
		fputc('\n', out);
		ctl_output_yaml_node(out, v, indent, false);
	}
}

static void ctl_output_yaml_node(FILE *out, json_object *v, int indent, bool inline_first)
{
	bool first = true;

	if (!ctl_output_yaml_is_block(v)) {
		ctl_output_yaml_scalar(out, v);
		return;
	}
	if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++, first = false) {
			fprintf(out, "%*s-", first && inline_first ? 0 : indent, "");
			ctl_output_yaml_item(out, json_object_array_get_idx(v, i), indent + 2, true);
		}
		return;
	}
	json_object_object_foreach(v, key, val)
	{
		fprintf(out, "%*s", first && inline_first ? 0 : indent, "");
		ctl_output_yaml_string(out, key, strlen(key));
		fputc(':', out);
		ctl_output_yaml_item(out, val, indent + 2, false);
		first = false;
	}
}

void ctl_output_yaml(FILE *out, json_object *v)
{
	fputs("---\n", out);
	ctl_output_yaml_node(out, v, 0, false);
}
