/* SPDX-License-Identifier: MIT */
/*
 * ctl_output.h - how leaseholdctl prints: the output format chosen with
 * -o table|wide|json|yaml, --no-headers, the width a table must fit, and
 * the YAML emitter over the json-c objects the JSON output builds.
 *
 * The setting is process-wide: main sets it once, before anything is
 * printed (the CLI runs one command, single-threaded); the printers read it.
 */
#ifndef LH_CTL_OUTPUT_H
#define LH_CTL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

enum ctl_format {
	CTL_FORMAT_TABLE = 0, /* box tables cut to fit the terminal */
	CTL_FORMAT_WIDE,      /* box tables, every cell in full */
	CTL_FORMAT_JSON,
	CTL_FORMAT_YAML,
};

struct ctl_output {
	enum ctl_format format;
	bool no_headers; /* tables: data rows only (no title, header or borders) */
	size_t columns;	 /* the width a table must fit; 0 = no limit */
};

/* ctl_output_parse_format - "table", "wide", "json" or "yaml" into
 * *ret_format; 0, or -EINVAL (ret_format untouched) */
int ctl_output_parse_format(const char *s, enum ctl_format *ret_format);
/* ctl_output_format_name - the name of f ("table", ...) */
const char *ctl_output_format_name(enum ctl_format f);

/* ctl_output_columns - the width tables fit: $COLUMNS when it is a
 * positive number, else the terminal's width when stdout is a terminal,
 * else 0 (no limit: output read by a script is never cut) */
size_t ctl_output_columns(void);

/* ctl_output_set - the setting every printer uses from now on (copied) */
void ctl_output_set(const struct ctl_output *o);
/* ctl_output_get - the setting in force (borrowed; all zero: table, headers,
 * no limit, until ctl_output_set) */
const struct ctl_output *ctl_output_get(void);

/* ctl_output_detail_len - the buffer length a free-text cell (an error, a
 * reason) is cut to: short in a table, the whole cell buffer when wide */
size_t ctl_output_detail_len(void);

/* ctl_output_fit - shrink the column widths width[0..ncol) (each at least
 * the header's length, min_w[c]) until the table's line (borders and
 * padding included) fits columns; widest columns first. columns 0: no
 * change. */
void ctl_output_fit(size_t *width, const size_t *min_w, size_t ncol, size_t columns);

/* ctl_output_yaml - v (borrowed) as one YAML document (block style, every
 * string and key double-quoted, null/true/false/numbers plain) to out */
void ctl_output_yaml(FILE *out, json_object *v);

#endif
