/* SPDX-License-Identifier: MIT */
/*
 * ctl_shadow.c - leaseholdctl shadow (see ctl_shadow.h). Keys and values
 * from the daemon are printed as printable ASCII only (other bytes '?').
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "control/control_codec.h"
#include "ctl/ctl_timeout.h"
#include "ctl/ctl_shadow.h"
#include "ctl/ctl_views.h"

int ctl_shadow_parse_timeout(const char *s, uint32_t *ret_ms)
{
	return ctl_timeout_parse(s, CTL_SHADOW_TIMEOUT_DEFAULT_MS, CTL_SHADOW_TIMEOUT_MIN_MS, CTL_SHADOW_TIMEOUT_MAX_MS, ret_ms);
}

/* bytes as printable ASCII, cut to fit buf */
static const char *ctl_shadow_text(const uint8_t *p, size_t n, char *buf, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++)
		buf[o++] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	buf[o] = '\0';
	return buf;
}

/* a value as the table shows it: "(none)", or its first bytes ("..." when
 * cut), its length and its hash */
static const char *ctl_shadow_value(const Leasehold__Control__ShadowValue *v, char *buf,
				    size_t len)
{
	char head[40];
	if (!v || !v->present) {
		snprintf(buf, len, "(none)");
		return buf;
	}
	ctl_shadow_text(v->head.data, v->head.len, head, sizeof(head));
	snprintf(buf, len, "\"%s\"%s (%" PRIu64 " B, %016" PRIx64 ")", head,
		 v->length > v->head.len ? "..." : "", v->length, v->fnv1a64);
	return buf;
}

static json_object *ctl_shadow_value_json(const Leasehold__Control__ShadowValue *v)
{
	char head[40];
	if (!v || !v->present)
		return NULL;
	json_object *o = json_object_new_object();
	char hash[24];
	snprintf(hash, sizeof(hash), "%016" PRIx64, v->fnv1a64);
	json_object_object_add(o, "head",
			       json_object_new_string(ctl_shadow_text(v->head.data, v->head.len,
								      head, sizeof(head))));
	json_object_object_add(o, "length", json_object_new_int64((int64_t)v->length));
	json_object_object_add(o, "truncated", json_object_new_boolean(v->length > v->head.len));
	json_object_object_add(o, "fnv1a64", json_object_new_string(hash));
	return o;
}

static void ctl_shadow_print_json(const Leasehold__Control__ShadowReport *s, const char *name,
				  const char *release, const char *error)
{
	char key[4200];
	json_object *o = json_object_new_object();
	json_object *ws = json_object_new_array();
	json_object_object_add(o, "plugin", json_object_new_string(name));
	json_object_object_add(o, "release", release[0] ? json_object_new_string(release) : NULL);
	json_object_object_add(o, "revision", json_object_new_int64(s->revision));
	json_object_object_add(o, "last_revision", json_object_new_int64(s->last_revision));
	json_object_object_add(o, "puts", json_object_new_int64((int64_t)s->puts));
	json_object_object_add(o, "deletes", json_object_new_int64((int64_t)s->deletes));
	json_object_object_add(o, "unchanged", json_object_new_int64((int64_t)s->unchanged));
	json_object_object_add(o, "txns", json_object_new_int64((int64_t)s->txns));
	json_object_object_add(o, "truncated", json_object_new_boolean(s->truncated));
	json_object_object_add(o, "error", error ? json_object_new_string(error) : NULL);
	for (size_t i = 0; i < s->n_writes; i++) {
		const Leasehold__Control__ShadowWrite *w = s->writes[i];
		json_object *e = json_object_new_object();
		json_object_object_add(e, "op", json_object_new_string(w->is_delete ? "delete" : "put"));
		json_object_object_add(
		    e, "key",
		    json_object_new_string(ctl_shadow_text(w->key.data, w->key.len, key, sizeof(key))));
		json_object_object_add(e, "old", ctl_shadow_value_json(w->old_value));
		json_object_object_add(e, "new", ctl_shadow_value_json(w->new_value));
		json_object_array_add(ws, e);
	}
	json_object_object_add(o, "writes", ws);
	ctl_print_json(o);
	json_object_put(o);
}

static void ctl_shadow_print_table(const Leasehold__Control__ShadowReport *s, const char *name,
				   const char *release)
{
	char key[4200], ov[120], nv[120];
	printf("plugin %s%s%s: shadow run at revision %" PRId64 ": %" PRIu64 " put(s), %" PRIu64
	       " delete(s), %" PRIu64 " unchanged, in %" PRIu64 " txn(s)%s; nothing was written\n",
	       name, release[0] ? " " : "", release, s->revision, s->puts, s->deletes, s->unchanged,
	       s->txns,
	       s->truncated ? " (TRUNCATED: the run passed its bound of captured writes)" : "");
	if (s->last_revision != s->revision)
		printf("note: etcd moved during the run (revision %" PRId64 " at its last read)\n",
		       s->last_revision);
	if (!s->n_writes)
		return;
	printf("%-6s  %-32s  %-40s  %s\n", "OP", "KEY", "OLD", "NEW");
	for (size_t i = 0; i < s->n_writes; i++) {
		const Leasehold__Control__ShadowWrite *w = s->writes[i];
		printf("%-6s  %-32s  %-40s  %s\n", w->is_delete ? "delete" : "put",
		       ctl_shadow_text(w->key.data, w->key.len, key, sizeof(key)),
		       ctl_shadow_value(w->old_value, ov, sizeof(ov)),
		       w->is_delete ? "-" : ctl_shadow_value(w->new_value, nv, sizeof(nv)));
	}
}

int ctl_shadow_result(const Leasehold__Control__Response *r, const char *name, bool json)
{
	char m[CONTROL_STRING_MAX + 1], n[CONTROL_NAME_MAX + 1];
	bool ok = r->code == LEASEHOLD__CONTROL__CODE__CODE_OK;
	bool ran = ok || r->code == LEASEHOLD__CONTROL__CODE__CODE_FAILED ||
		   r->code == LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT;
	ctl_shadow_text((const uint8_t *)(r->message ? r->message : ""),
			r->message ? strlen(r->message) : 0, m, sizeof(m));
	ctl_shadow_text((const uint8_t *)name, strlen(name), n, sizeof(n));
	if (ran && r->shadow) {
		char rel[64];
		const char *rs = r->shadow->release ? r->shadow->release : "";
		ctl_shadow_text((const uint8_t *)rs, strlen(rs), rel, sizeof(rel));
		if (json)
			ctl_shadow_print_json(r->shadow, n, rel, ok ? NULL : m);
		else
			ctl_shadow_print_table(r->shadow, n, rel);
	}
	if (ok)
		return 0;
	if (ran) {
		fprintf(stderr, "leaseholdctl: %s\n", m);
		return 1;
	}
	fprintf(stderr, "leaseholdctl: shadow refused: %s\n", m);
	return 2;
}
