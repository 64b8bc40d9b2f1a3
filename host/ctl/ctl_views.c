/* SPDX-License-Identifier: MIT */
/*
 * ctl_views.c - what leaseholdctl prints: the tables and the documented
 * JSON objects of the read commands, built from control Response messages
 * (proto/control.proto) whether they came from the daemon or were built
 * from etcd in observer mode (ctl_observer.h). Every string from the
 * daemon or etcd goes through ctl_clean(): control bytes never reach the
 * terminal.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "control/control_codec.h"
#include "control/control_json.h"
#include "ctl/ctl.h"
#include "ctl/ctl_views.h"
#include "ctl/ctl_release.h"
#include "ctl/ctl_output.h"

/* ---- output helpers ---------------------------------------------------- */

/* clean - s as printable ASCII into buf (other bytes become '?'), cut to
 * len - 1 bytes with "..." when longer; "-" for NULL/empty when dash.
 * Returns buf. */
const char *ctl_clean(const char *s, char *buf, size_t len, bool dash)
{
	size_t n = 0, slen;

	if (len == 0)
		return "";
	if (!s || !s[0]) {
		snprintf(buf, len, "%s", dash ? "-" : "");
		return buf;
	}
	slen = strlen(s);
	for (; s[n] && n + 1 < len; n++) {
		unsigned char ch = (unsigned char)s[n];
		buf[n] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	buf[n] = '\0';
	if (n < slen && len >= 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}

char *ctl_fmt_release(const Leasehold__Control__Release *r, char *buf, size_t len)
{
	return release_format(control_codec_release(r), buf, len);
}

/* fmt_time - unix seconds as RFC 3339 UTC; NULL for 0. */
const char *ctl_fmt_time(int64_t t, char *buf, size_t len)
{
	return control_json_fmt_time(t, buf, len);
}

/* ctl_views_print_cell - cell s in a column of width w: cut to w with a
 * '~' as its last character when longer (a table fitted to the terminal) */
static void ctl_views_print_cell(const char *s, size_t w, bool right)
{
	size_t l = strlen(s);
	if (l > w && w > 0)
		printf(" %.*s~ |", (int)(w - 1), s);
	else
		printf(right ? " %*s |" : " %-*s |", (int)w, s);
}

/* ctl_views_print_rows - the data rows of a table */
static void ctl_views_print_rows(const size_t *width, const bool *right, size_t ncol,
				 const char *const *cells, size_t nrows)
{
	for (size_t r = 0; r < nrows; r++) {
		printf("|");
		for (size_t c = 0; c < ncol; c++)
			ctl_views_print_cell(cells[r * ncol + c], width[c], right[c]);
		printf("\n");
	}
}

/* ctl_views_print_table - patronictl-style box table; cells is nrows*ncol strings;
 * right[] marks right-aligned columns. title goes into the top border. The
 * output setting (ctl_output.h) decides whether it is fitted to a width
 * and whether anything but the data rows is printed. */
static void ctl_views_print_table(const char *title, const char *const *hdr, const bool *right, size_t ncol,
			const char *const *cells, size_t nrows)
{
	const struct ctl_output *out = ctl_output_get();
	size_t width[16] = {0}, min_w[16] = {0};
	char border[16 * (CELL + 3) + 2];
	size_t pos = 0;

	for (size_t c = 0; c < ncol; c++) {
		width[c] = strlen(hdr[c]);
		/* fitted, a column keeps 3 characters ("ab~"), its header is cut too */
		min_w[c] = width[c] < 3 ? width[c] : 3;
		for (size_t r = 0; r < nrows; r++) {
			size_t l = strlen(cells[r * ncol + c]);
			if (l > width[c])
				width[c] = l;
		}
	}
	if (out->format != CTL_FORMAT_WIDE)
		ctl_output_fit(width, min_w, ncol, out->columns);
	if (out->no_headers) {
		ctl_views_print_rows(width, right, ncol, cells, nrows);
		return;
	}
	border[pos++] = '+';
	for (size_t c = 0; c < ncol; c++) {
		memset(border + pos, '-', width[c] + 2);
		pos += width[c] + 2;
		border[pos++] = '+';
	}
	border[pos] = '\0';

	if (title) {
		char top[sizeof(border)];
		int n = snprintf(top, sizeof(top), "+ %s ", title);
		if (n > 0 && (size_t)n + 1 < pos) {
			memcpy(top + n, border + n, pos - (size_t)n + 1);
			printf("%s\n", top);
		} else {
			printf("%s\n%s\n", title, border);
		}
	} else {
		printf("%s\n", border);
	}
	printf("|");
	for (size_t c = 0; c < ncol; c++)
		ctl_views_print_cell(hdr[c], width[c], false);
	printf("\n%s\n", border);
	ctl_views_print_rows(width, right, ncol, cells, nrows);
	if (nrows > 0)
		printf("%s\n", border);
}

/* ctl_views_empty - the line that says a table has no rows; nothing with
 * --no-headers (a script then reads no rows) */
static void ctl_views_empty(const char *what)
{
	if (!ctl_output_get()->no_headers)
		printf("%s\n", what);
}

/* ctl_views_title_of - a table's title: the answering daemon's node, or (observer
 * mode: no daemon, no node) where the answer came from */
static void ctl_views_title_of(const Response *r, char *buf, size_t len)
{
	char nb[CELL];
	if (r->node && r->node[0])
		snprintf(buf, len, "Node: %s", ctl_clean(r->node, nb, sizeof(nb), true));
	else
		snprintf(buf, len, "Cluster (from etcd)");
}

void ctl_print_json(json_object *o)
{
	if (ctl_output_get()->format == CTL_FORMAT_YAML) {
		ctl_output_yaml(stdout, o);
		return;
	}
	printf("%s\n",
	       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
						     JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* ---- commands ---------------------------------------------------------- */

#define PCOLS 9

static void ctl_views_plugin_cells(const Plugin *p, char (*buf)[CELL])
{
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN], t[32];
	const Leasehold__Control__Releases *r = p->releases;
	const Leasehold__Control__Reconcile *rc = p->reconcile;
	const char *err;

	ctl_clean(p->name, buf[0], CELL, true);
	if (p->release)
		ctl_fmt_release(p->release, buf[1], CELL);
	else
		snprintf(buf[1], CELL, "-");
	ctl_clean(p->state, buf[2], CELL, true);
	if (p->paused) {
		/* the pause is cluster-wide and changes what a leader does */
		size_t l = strlen(buf[2]);
		snprintf(buf[2] + l, CELL - l, ", paused");
	}
	if (p->pin) {
		/* so is the pin: no newer release campaigns */
		char pr[RELEASE_STRLEN];
		size_t l = strlen(buf[2]);
		snprintf(buf[2] + l, CELL - l, ", pinned %s", ctl_fmt_release(p->pin, pr, sizeof(pr)));
	}
	if (p->unhealthy) {
		/* withdrawn for a hold-down: the detail column says until when */
		size_t l = strlen(buf[2]);
		snprintf(buf[2] + l, CELL - l, ", unhealthy");
	}
	ctl_clean(p->leader, buf[3], CELL, true);
	if (p->view_stale) {
		/* no etcd session: the last leader this node saw, not a current one */
		size_t l = strlen(buf[3]);
		snprintf(buf[3] + l, CELL - l, " (stale)");
	}
	snprintf(buf[4], CELL, "%s", p->ready ? "yes" : "no");
	if (r && r->members > 0)
		snprintf(buf[5], CELL, "%s..%s", ctl_fmt_release(r->min, a, sizeof(a)),
			 ctl_fmt_release(r->max, b, sizeof(b)));
	else
		snprintf(buf[5], CELL, "-");
	if (p->status)
		snprintf(buf[6], CELL, "%s %s", ctl_clean(p->status->state, t, sizeof(t), true),
			 ctl_fmt_release(p->status->version, a, sizeof(a)));
	else
		snprintf(buf[6], CELL, "-");
	snprintf(buf[7], CELL, "%" PRIu64, rc ? rc->count : 0);
	err = p->error && p->error[0] ? p->error : rc ? rc->last_error : NULL;
	if (p->callback && p->callback[0]) {
		/* a running callback first: a hung one is what the operator looks for */
		char h[CELL], cb[CELL];
		snprintf(h, sizeof(h), "in %s since %" PRIu64 " s%s%s",
			 ctl_clean(p->callback, cb, sizeof(cb), true), p->callback_ms / 1000,
			 err && err[0] ? "; " : "", err && err[0] ? err : "");
		ctl_clean(h, buf[8], ctl_output_detail_len(), true);
		return;
	}
	if ((!err || !err[0]) && p->held_back && p->held_back[0]) {
		/* no error to show: say why it does not campaign (standby) */
		char h[CELL];
		snprintf(h, sizeof(h), "held: %s", p->held_back);
		ctl_clean(h, buf[8], ctl_output_detail_len(), true);
		return;
	}
	if ((!err || !err[0]) && p->superseded_by && p->superseded_by[0]) {
		/* a file that does not run: name the file and the one that does */
		char h[CELL];
		snprintf(h, sizeof(h), "%s superseded by %s", p->file, p->superseded_by);
		ctl_clean(h, buf[8], ctl_output_detail_len(), true);
		return;
	}
	if ((!err || !err[0]) && p->config_error && p->config_error[0]) {
		/* a bad document in etcd: the plugin runs on the last good one */
		char h[CELL];
		snprintf(h, sizeof(h), "config: %s", p->config_error);
		ctl_clean(h, buf[8], ctl_output_detail_len(), true);
		return;
	}
	ctl_clean(err, buf[8], ctl_output_detail_len(), true);
}

static int ctl_views_print_cluster(const Response *r);

int ctl_view_plugins(const Response *r, bool json)
{
	static const char *const hdr[PCOLS] = {"NAME",	 "RELEASE",    "STATE",
					       "LEADER", "READY",      "MEMBERS",
					       "STATUS", "RECONCILES", "LAST ERROR"};
	static const bool right[PCOLS] = {false, false, false, false, false,
					  false, false, true,  false};
	char title[CELL + 16];
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_plugins; i++)
			json_object_array_add(a, control_json_plugin(r->plugins[i]));
		ctl_print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	if (r->n_plugins > 0) {
		buf = calloc(r->n_plugins * PCOLS, sizeof(*buf));
		cells = calloc(r->n_plugins * PCOLS, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < r->n_plugins; i++) {
		ctl_views_plugin_cells(r->plugins[i], &buf[i * PCOLS]);
		for (size_t c = 0; c < PCOLS; c++)
			cells[i * PCOLS + c] = buf[i * PCOLS + c];
	}
	ctl_views_title_of(r, title, sizeof(title));
	ctl_views_print_table(title, hdr, right, PCOLS, cells, r->n_plugins);
	if (r->n_plugins == 0)
		ctl_views_empty("(no plugins loaded)");
	free(buf);
	free(cells);
	return ctl_views_print_cluster(r);
}

static int ctl_views_print_nodes(const char *title, Member *const *ms, size_t n);

/* ctl_views_status_while - status's lines that appear only while they
 * say something (pinned, paused, a request, a callback, a configuration):
 * the usual output stays as it was */
static void ctl_views_status_while(const Plugin *p)
{
	char b1[CONTROL_STRING_MAX + 1], tb[64];

	/* only while pinned */
	if (p->pin || (p->pin_error && p->pin_error[0]))
		printf("pin:           %s\n", ctl_release_pin_line(p, b1, sizeof(b1)));
	/* only while paused: the usual output stays as it was */
	if (p->paused) {
		const char *pat = ctl_fmt_time(p->paused_at, tb, sizeof(tb));
		char by[CELL];
		if (p->pause_error && p->pause_error[0])
			printf("paused:        yes: %s\n", ctl_clean(p->pause_error, b1, sizeof(b1), true));
		else
			printf("paused:        yes (by %s%s%s)\n", ctl_clean(p->paused_by, by, sizeof(by), true),
			       pat ? " at " : "", pat ? pat : "");
	}
	if (p->reconcile_requested)
		printf("requested:     reconcile request %" PRId64 ", last served %" PRId64 "\n",
		       p->reconcile_requested, p->reconcile_served);
	/* only while one runs: the usual output stays as it was */
	if (p->callback && p->callback[0])
		printf("callback:      in %s since %" PRIu64 " s\n",
		       ctl_clean(p->callback, b1, sizeof(b1), true), p->callback_ms / 1000);
	/* only when there is one (P/N/config): the usual output stays as it was */
	if (p->config_revision || (p->config_error && p->config_error[0]))
		printf("config:        revision %" PRId64 "%s%s\n", p->config_revision,
		       p->config_error && p->config_error[0] ? "; error: " : "",
		       p->config_error && p->config_error[0]
			   ? ctl_clean(p->config_error, b1, sizeof(b1), true)
			   : "");
}

int ctl_view_status(const Response *r, bool json)
{
	char b1[CONTROL_STRING_MAX + 1], a[RELEASE_STRLEN], b[RELEASE_STRLEN], c[RELEASE_STRLEN];
	char tb[64];
	const Plugin *p;
	const Leasehold__Control__Releases *rs;
	const Leasehold__Control__Reconcile *rc;

	if (r->n_plugins != 1) {
		fprintf(stderr, "leaseholdctl: invalid reply (expected one plugin)\n");
		return EXIT_ERR;
	}
	p = r->plugins[0];
	if (json) {
		json_object *o = control_json_plugin(p);
		ctl_print_json(o);
		json_object_put(o);
		return EXIT_OK;
	}
	rs = p->releases;
	rc = p->reconcile;
	printf("name:          %s\n", ctl_clean(p->name, b1, sizeof(b1), true));
	printf("node:          %s\n", ctl_clean(r->node, b1, sizeof(b1), true));
	printf("file:          %s\n", ctl_clean(p->file, b1, sizeof(b1), true));
	printf("release:       %s\n", p->release ? ctl_fmt_release(p->release, a, sizeof(a)) : "-");
	printf("state:         %s\n", ctl_clean(p->state, b1, sizeof(b1), true));
	if (p->view_stale)
		printf("leader:        %s (stale: no etcd session for %" PRIu64 " s; the last "
		       "leader this node saw)\n",
		       ctl_clean(p->leader, b1, sizeof(b1), true), p->view_stale_ms / 1000);
	else
		printf("leader:        %s\n", ctl_clean(p->leader, b1, sizeof(b1), true));
	if (p->ready || !p->not_ready || !p->not_ready[0])
		printf("ready:         %s\n", p->ready ? "yes" : "no");
	else
		printf("ready:         no: %s\n", ctl_clean(p->not_ready, b1, sizeof(b1), true));
	if (rs && rs->members > 0)
		printf("members:       %" PRIu64 " (%s..%s, revision %" PRId64 ")\n", rs->members,
		       ctl_fmt_release(rs->min, a, sizeof(a)), ctl_fmt_release(rs->max, b, sizeof(b)),
		       rs->revision);
	else
		printf("members:       0\n");
	if (p->status)
		printf("status:        %s %s (minimum compatible release %s)\n",
		       ctl_clean(p->status->state, b1, sizeof(b1), true),
		       ctl_fmt_release(p->status->version, a, sizeof(a)),
		       ctl_fmt_release(p->status->minimum_compatible_release, c, sizeof(c)));
	else
		printf("status:        -\n");
	const char *at = rc ? ctl_fmt_time(rc->last_at, tb, sizeof(tb)) : NULL;
	if (rc && at)
		printf("reconciles:    %" PRIu64 " (last %s at %s)\n", rc->count,
		       rc->last_ok ? "ok" : "failed", at);
	else
		printf("reconciles:    %" PRIu64 "\n", rc ? rc->count : 0);
	printf("last error:    %s\n", ctl_clean(rc ? rc->last_error : NULL, b1, sizeof(b1), true));
	printf("error:         %s\n", ctl_clean(p->error, b1, sizeof(b1), true));
	printf("held back:     %s\n", ctl_clean(p->held_back, b1, sizeof(b1), true));
	if (p->unhealthy)
		printf("health:        unhealthy until %s (%" PRIu32 " reconciles failed in a row; "
		       "unhealthy %" PRIu64 " time(s))\n",
		       ctl_fmt_time(p->unhealthy_until, tb, sizeof(tb)) ? tb : "?", p->failures_in_row,
		       p->unhealthy_total);
	else if (p->failures_in_row || p->unhealthy_total)
		printf("health:        healthy (%" PRIu32 " reconciles failed in a row; unhealthy %" PRIu64
		       " time(s))\n", p->failures_in_row, p->unhealthy_total);
	if (p->keyed) /* ABI 1.3 reconcile_key: the work queue */
		printf("key queue:     %" PRIu64 " key(s), %" PRIu64 " backing off, oldest %" PRIu64
		       " ms; %" PRIu64 " reconciled, %" PRIu64 " failed; %" PRIu64 " running of %"
		       PRIu64 " at once\n", p->keys_depth, p->keys_waiting, p->keys_oldest_ms,
		       p->keys_done, p->keys_failed, p->keys_running,
		       p->keys_concurrency ? p->keys_concurrency : 1);
	if (p->superseded_by && p->superseded_by[0])
		printf("superseded by: %s\n", ctl_clean(p->superseded_by, b1, sizeof(b1), true));
	printf("fencing token: %" PRId64 "\n", p->fencing_token);
	ctl_views_status_while(p);
	if (p->n_nodes)
		return ctl_views_print_nodes("Nodes", p->nodes, p->n_nodes);
	return EXIT_OK;
}

#define MCOLS 9

/* ctl_views_member_cells - one node row: NODE, RELEASE, LEADER, CAMPAIGNING, STATE,
 * READY, RECONCILED, REASON, LOCAL */
static void ctl_views_member_cells(const Member *m, char (*c)[CELL])
{
	const Leasehold__Control__NodeState *ns = m->node_state;
	char tb[64], why[CELL];

	ctl_clean(m->node, c[0], CELL, true);
	ctl_fmt_release(m->release, c[1], CELL);
	snprintf(c[2], CELL, "%s", m->leader ? "yes" : "no");
	snprintf(c[3], CELL, "%s", m->campaigning ? "yes" : "no");
	if (ns) {
		ctl_clean(ns->state, c[4], CELL, true);
		snprintf(c[5], CELL, "%s", ns->ready ? "yes" : "no");
		const char *at = ctl_fmt_time(ns->reconcile_at, tb, sizeof(tb));
		if (at)
			snprintf(c[6], CELL, "%s %s", at, ns->reconcile_ok ? "ok" : "failed");
		else
			snprintf(c[6], CELL, "-");
		/* the most useful reason: why not campaigning/leading, else why not
		 * ready, else the last reconcile's error */
		const char *r = ns->reason && ns->reason[0] ? ns->reason
				: !ns->ready && ns->not_ready && ns->not_ready[0] ? ns->not_ready
				: !ns->reconcile_ok && ns->reconcile_at ? ns->reconcile_error
									: NULL;
		ctl_clean(r, c[7], ctl_output_detail_len(), true);
	} else {
		/* no record: the node's lease is gone (down or cut off) */
		snprintf(c[4], CELL, "%s", m->node_state_invalid ? "?" : "down");
		snprintf(c[5], CELL, "-");
		snprintf(c[6], CELL, "-");
		snprintf(why, sizeof(why), "%s",
			 m->node_state_invalid ? "its state record does not decode"
					       : "no state record (no live session)");
		ctl_clean(why, c[7], ctl_output_detail_len(), true);
	}
	if (m->conflict) {
		/* two hosts with one node id: what the operator must see first */
		char r[CELL];
		bool more = c[7][0] && strcmp(c[7], "-") != 0;
		snprintf(r, sizeof(r), "CONFLICT: %" PRIu32 " sessions carry this node id%s%s",
			 m->sessions, more ? "; " : "", more ? c[7] : "");
		ctl_clean(r, c[7], ctl_output_detail_len(), true);
	}
	if (m->unhealthy) {
		/* withdrawn for a hold-down: its member record says so */
		char r[CELL];
		bool more = c[7][0] && strcmp(c[7], "-") != 0;
		const char *until = ctl_fmt_time(m->unhealthy_until, tb, sizeof(tb));
		snprintf(r, sizeof(r), "unhealthy until %s%s%s", until ? until : "?",
			 more ? "; " : "", more ? c[7] : "");
		ctl_clean(r, c[7], ctl_output_detail_len(), true);
	}
	if (m->no_member_record) {
		size_t l = strlen(c[7]);
		snprintf(c[7] + l, CELL - l, "%s", l > 1 ? "; not a member" : "");
		if (l <= 1)
			snprintf(c[7], CELL, "not a member");
	}
	snprintf(c[8], CELL, "%s", m->local ? "*" : "");
}

/* ctl_views_print_nodes - the node rows as a table titled title */
static int ctl_views_print_nodes(const char *title, Member *const *ms, size_t n)
{
	static const char *const hdr[MCOLS] = {"NODE",	"RELEASE",    "LEADER",
					       "CAMPAIGNING", "STATE", "READY",
					       "LAST RECONCILE", "REASON", "LOCAL"};
	static const bool right[MCOLS] = {false};
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (n > 0) {
		buf = calloc(n * MCOLS, sizeof(*buf));
		cells = calloc(n * MCOLS, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < n; i++) {
		ctl_views_member_cells(ms[i], &buf[i * MCOLS]);
		for (size_t c = 0; c < MCOLS; c++)
			cells[i * MCOLS + c] = buf[i * MCOLS + c];
	}
	ctl_views_print_table(title, hdr, right, MCOLS, cells, n);
	free(buf);
	free(cells);
	return EXIT_OK;
}

/* ctl_views_print_cluster - after the plugins table, one row per node of each
 * plugin (a blank line apart); nothing when no plugin has node rows */
static int ctl_views_print_cluster(const Response *r)
{
	static const char *const hdr[MCOLS + 1] = {
	    "PLUGIN", "NODE",  "RELEASE",	 "LEADER", "CAMPAIGNING",
	    "STATE",  "READY", "LAST RECONCILE", "REASON", "LOCAL"};
	static const bool right[MCOLS + 1] = {false};
	size_t n = 0, k = 0;
	for (size_t i = 0; i < r->n_plugins; i++)
		n += r->plugins[i]->n_nodes;
	/* --no-headers: the plugin rows only, one kind of row for a script
	 * (members NAME prints a plugin's node rows) */
	if (n == 0 || ctl_output_get()->no_headers)
		return EXIT_OK;
	char(*buf)[CELL] = calloc(n * (MCOLS + 1), sizeof(*buf));
	const char **cells = calloc(n * (MCOLS + 1), sizeof(*cells));
	if (!buf || !cells) {
		free(buf);
		free(cells);
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < r->n_plugins; i++)
		for (size_t j = 0; j < r->plugins[i]->n_nodes; j++, k++) {
			char(*c)[CELL] = &buf[k * (MCOLS + 1)];
			ctl_clean(r->plugins[i]->name, c[0], CELL, true);
			ctl_views_member_cells(r->plugins[i]->nodes[j], c + 1);
			for (size_t x = 0; x <= MCOLS; x++)
				cells[k * (MCOLS + 1) + x] = c[x];
		}
	printf("\n");
	ctl_views_print_table("Nodes", hdr, right, MCOLS + 1, cells, n);
	free(buf);
	free(cells);
	return EXIT_OK;
}

int ctl_view_members(const Response *r, bool json)
{
	char title[CELL + 16];

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_members; i++)
			json_object_array_add(a, control_json_member(r->members[i]));
		ctl_print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	ctl_views_title_of(r, title, sizeof(title));
	int ret = ctl_views_print_nodes(title, r->members, r->n_members);
	if (ret == EXIT_OK && r->n_members == 0)
		ctl_views_empty("(no members)");
	return ret;
}

/* role_list - an entry's roles as "a,b,c" (cleaned, cut to len - 1 bytes
 * with "..."), "-" for none. Returns buf. */
const char *ctl_role_list(const RoleEntry *e, char *buf, size_t len)
{
	char tmp[CELL * 2];
	size_t pos = 0;

	for (size_t i = 0; i < e->n_roles && pos + 1 < sizeof(tmp); i++) {
		int n = snprintf(tmp + pos, sizeof(tmp) - pos, "%s%s", i ? "," : "", e->roles[i]);
		if (n < 0)
			break;
		pos += (size_t)n;
		if (pos >= sizeof(tmp))
			pos = sizeof(tmp) - 1;
	}
	tmp[pos] = '\0';
	return ctl_clean(tmp, buf, len, true);
}

int ctl_view_roles_list(const Response *r, bool json)
{
	static const char *const hdr[3] = {"NODE", "ROLES", "ERROR"};
	static const bool right[3] = {false, false, false};
	char title[CELL + 16];
	char(*buf)[CELL] = NULL;
	const char **cells = NULL;

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_roles; i++) {
			const RoleEntry *e = r->roles[i];
			json_object *o = json_object_new_object(), *ra = json_object_new_array();
			json_object_object_add(o, "node", json_object_new_string(e->node));
			for (size_t k = 0; k < e->n_roles; k++)
				json_object_array_add(ra, json_object_new_string(e->roles[k]));
			json_object_object_add(o, "roles", ra);
			json_object_object_add(o, "error", control_json_str_or_null(e->error));
			json_object_array_add(a, o);
		}
		ctl_print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	if (r->n_roles > 0) {
		buf = calloc(r->n_roles * 3, sizeof(*buf));
		cells = calloc(r->n_roles * 3, sizeof(*cells));
		if (!buf || !cells) {
			free(buf);
			free(cells);
			fprintf(stderr, "leaseholdctl: out of memory\n");
			return EXIT_ERR;
		}
	}
	for (size_t i = 0; i < r->n_roles; i++) {
		const RoleEntry *e = r->roles[i];
		ctl_clean(e->node, buf[i * 3], CELL, true);
		ctl_role_list(e, buf[i * 3 + 1], CELL);
		ctl_clean(e->error, buf[i * 3 + 2], CELL, true);
		for (size_t c = 0; c < 3; c++)
			cells[i * 3 + c] = buf[i * 3 + c];
	}
	ctl_views_title_of(r, title, sizeof(title));
	ctl_views_print_table(title, hdr, right, 3, cells, r->n_roles);
	if (r->n_roles == 0)
		ctl_views_empty("(no roles records)");
	free(buf);
	free(cells);
	return EXIT_OK;
}

#define HCOLS 7

int ctl_view_history(const Response *r, const char *name, bool json)
{
	static const char *const hdr[HCOLS] = {"TOKEN", "NODE", "RELEASE", "START",
					       "END", "ENDED BY", "DETAIL"};
	static const bool right[HCOLS] = {true, false, false, false, false, false, false};
	char title[CELL + 16], nb[CELL], tb[64];

	if (json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < r->n_terms; i++) {
			json_object_array_add(a, control_json_term(r->terms[i]));
		}
		ctl_print_json(a);
		json_object_put(a);
		return EXIT_OK;
	}
	char(*buf)[CELL] = r->n_terms ? calloc(r->n_terms * HCOLS, sizeof(*buf)) : NULL;
	const char **cells = r->n_terms ? calloc(r->n_terms * HCOLS, sizeof(*cells)) : NULL;
	if (r->n_terms && (!buf || !cells)) {
		free(buf);
		free(cells);
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < r->n_terms; i++) {
		const Leasehold__Control__Term *t = r->terms[i];
		char(*c)[CELL] = &buf[i * HCOLS];
		const char *at;
		snprintf(c[0], CELL, "%" PRId64, t->fencing_token);
		if (t->invalid) {
			snprintf(c[1], CELL, "-");
			snprintf(c[2], CELL, "-");
			snprintf(c[3], CELL, "-");
			snprintf(c[4], CELL, "-");
			snprintf(c[5], CELL, "-");
			snprintf(c[6], CELL, "the record does not decode");
		} else {
			ctl_clean(t->node, c[1], CELL, true);
			ctl_fmt_release(t->release, c[2], CELL);
			at = ctl_fmt_time(t->start_unix, tb, sizeof(tb));
			snprintf(c[3], CELL, "%s (rev %" PRId64 ")", at ? at : "-", t->start_revision);
			at = ctl_fmt_time(t->end_unix, tb, sizeof(tb));
			if (t->end_revision)
				snprintf(c[4], CELL, "%s (rev %" PRId64 ")", at ? at : "-",
					 t->end_revision);
			else
				snprintf(c[4], CELL, "-");
			ctl_clean(t->end_reason, c[5], CELL, true);
			ctl_clean(t->end_detail, c[6], ctl_output_detail_len(), true);
		}
		for (size_t k = 0; k < HCOLS; k++)
			cells[i * HCOLS + k] = c[k];
	}
	snprintf(title, sizeof(title), "Plugin: %s", ctl_clean(name, nb, sizeof(nb), true));
	ctl_views_print_table(title, hdr, right, HCOLS, cells, r->n_terms);
	if (r->n_terms == 0)
		ctl_views_empty("(no terms recorded)");
	free(buf);
	free(cells);
	return EXIT_OK;
}

