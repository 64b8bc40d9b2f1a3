/* SPDX-License-Identifier: MIT */
/*
 * ctl_release.c - the `release NAME` view (see ctl_release.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/release.h"
#include "control/control_codec.h"
#include "control/control_json.h"
#include "ctl/ctl.h"
#include "ctl/ctl_release.h"

#define RELEASES_MAX 32

const char *ctl_release_pin_line(const Plugin *p, char *buf, size_t len)
{
	char a[RELEASE_STRLEN], by[CELL], tb[64];
	if (p->pin_error && p->pin_error[0])
		return ctl_clean(p->pin_error, buf, len, true);
	if (!p->pin) {
		snprintf(buf, len, "none");
		return buf;
	}
	const char *at = ctl_fmt_time(p->pin_at, tb, sizeof(tb));
	snprintf(buf, len, "%s (by %s%s%s%s)", ctl_fmt_release(p->pin, a, sizeof(a)),
	         ctl_clean(p->pin_by, by, sizeof(by), true), at ? " at " : "", at ? at : "",
	         p->pin_forced ? ", forced below the status's version" : "");
	return buf;
}

/* the distinct releases of p's node rows, newest first */
static size_t ctl_release_list(const Plugin *p, struct release *out)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n_nodes; i++) {
		const Member *m = p->nodes[i];
		if (!m->release || m->no_member_record)
			continue;
		struct release r = {m->release->major, m->release->minor, m->release->patch};
		size_t j = 0;
		while (j < n && release_cmp(out[j], r) != 0)
			j++;
		if (j < n || n == RELEASES_MAX)
			continue;
		for (j = n++; j > 0 && release_less(out[j - 1], r); j--)
			out[j] = out[j - 1];
		out[j] = r;
	}
	return n;
}

static bool ctl_release_is(const Member *m, struct release r)
{
	return m->release && !m->no_member_record && m->release->major == r.major &&
	       m->release->minor == r.minor && m->release->patch == r.patch;
}

static json_object *ctl_release_json_of(const Plugin *p, const struct release *rels, size_t n)
{
	char a[RELEASE_STRLEN];
	json_object *o = json_object_new_object(), *arr = json_object_new_array();
	json_object_object_add(o, "plugin", json_object_new_string(p->name));
	json_object_object_add(o, "pin", control_json_pin(p));
	json_object_object_add(o, "pin_error", p->pin_error && p->pin_error[0] ? json_object_new_string(p->pin_error) : NULL);
	json_object_object_add(o, "acting", control_json_acting(p));
	json_object_object_add(o, "leader", p->leader && p->leader[0] ? json_object_new_string(p->leader) : NULL);
	json_object *lr = NULL;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->nodes[i]->leader && p->nodes[i]->release)
			lr = json_object_new_string(ctl_fmt_release(p->nodes[i]->release, a, sizeof(a)));
	json_object_object_add(o, "leader_release", lr);
	for (size_t k = 0; k < n; k++) {
		struct release r = rels[k];
		json_object *e = json_object_new_object(), *nodes = json_object_new_array();
		char x[RELEASE_STRLEN];
		int64_t members = 0, ready = 0;
		release_format(r, x, sizeof(x));
		for (size_t i = 0; i < p->n_nodes; i++) {
			const Member *m = p->nodes[i];
			if (!ctl_release_is(m, r))
				continue;
			members++;
			ready += m->node_state && m->node_state->ready;
			json_object_array_add(nodes, control_json_member(m));
		}
		json_object_object_add(e, "release", json_object_new_string(x));
		json_object_object_add(e, "members", json_object_new_int64(members));
		json_object_object_add(e, "ready", json_object_new_int64(ready));
		json_object_object_add(e, "nodes", nodes);
		json_object_array_add(arr, e);
	}
	json_object_object_add(o, "releases", arr);
	return o;
}

/* one release's line: its members and their readiness */
static void ctl_release_print_one(const Plugin *p, struct release r)
{
	char x[RELEASE_STRLEN], b[CELL], s[CELL], nr[CELL];
	size_t members = 0, ready = 0;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (ctl_release_is(p->nodes[i], r)) {
			members++;
			ready += p->nodes[i]->node_state && p->nodes[i]->node_state->ready;
		}
	printf("  %s: %zu member(s), %zu ready\n", release_format(r, x, sizeof(x)), members, ready);
	for (size_t i = 0; i < p->n_nodes; i++) {
		const Member *m = p->nodes[i];
		if (!ctl_release_is(m, r))
			continue;
		const Leasehold__Control__NodeState *ns = m->node_state;
		printf("    %s%s: %s, %s%s%s\n", ctl_clean(m->node, b, sizeof(b), true),
		       m->leader ? " (leader)" : "", ns ? ctl_clean(ns->state, s, sizeof(s), true) : "down",
		       ns && ns->ready ? "ready" : "not ready",
		       ns && !ns->ready && ns->not_ready && ns->not_ready[0] ? ": " : "",
		       ns && !ns->ready && ns->not_ready ? ctl_clean(ns->not_ready, nr, sizeof(nr), false)
							 : "");
	}
}

int ctl_release_view(const Response *r, bool json)
{
	char b[CONTROL_STRING_MAX + 1], a[RELEASE_STRLEN], c[RELEASE_STRLEN];
	struct release rels[RELEASES_MAX];
	if (r->n_plugins != 1) {
		fprintf(stderr, "leaseholdctl: invalid reply (expected one plugin)\n");
		return EXIT_ERR;
	}
	const Plugin *p = r->plugins[0];
	size_t n = ctl_release_list(p, rels);
	if (json) {
		json_object *o = ctl_release_json_of(p, rels, n);
		ctl_print_json(o);
		json_object_put(o);
		return EXIT_OK;
	}
	printf("plugin:   %s\n", ctl_clean(p->name, b, sizeof(b), true));
	printf("pin:      %s\n", ctl_release_pin_line(p, b, sizeof(b)));
	if (p->acting_release)
		printf("can act:  %s (%s)\n", ctl_fmt_release(p->acting_release, a, sizeof(a)),
		       ctl_clean(p->acting_basis, b, sizeof(b), true));
	else
		printf("can act:  none\n");
	const char *lr = NULL;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->nodes[i]->leader && p->nodes[i]->release)
			lr = ctl_fmt_release(p->nodes[i]->release, c, sizeof(c));
	printf("leader:   %s%s%s%s\n", ctl_clean(p->leader, b, sizeof(b), true), lr ? " (release " : "",
	       lr ? lr : "", lr ? ")" : "");
	if (p->status)
		printf("status:   %s %s (minimum compatible release %s)\n",
		       ctl_clean(p->status->state, b, sizeof(b), true),
		       ctl_fmt_release(p->status->version, a, sizeof(a)),
		       ctl_fmt_release(p->status->minimum_compatible_release, c, sizeof(c)));
	else
		printf("status:   -\n");
	printf("releases:\n");
	for (size_t k = 0; k < n; k++)
		ctl_release_print_one(p, rels[k]);
	return EXIT_OK;
}
