/* SPDX-License-Identifier: MIT */
/*
 * ctl_views.h - leaseholdctl's printers (ctl_views.c). Each ctl_view_*
 * prints one read command's answer r (borrowed) to stdout, as a table or
 * (json) as the documented JSON, and returns an exit code (ctl.h).
 */
#ifndef LH_CTL_VIEWS_H
#define LH_CTL_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ctl/ctl.h"

int ctl_view_plugins(const Response *r, bool json);
int ctl_view_status(const Response *r, bool json);
int ctl_view_members(const Response *r, bool json);
int ctl_view_roles_list(const Response *r, bool json);
int ctl_view_history(const Response *r, const char *name, bool json);

/* ctl_clean - s as printable ASCII into buf (other bytes become '?'), cut to
 * len - 1 bytes with "..." when longer; "-" for NULL/empty when dash.
 * Returns buf. */
const char *ctl_clean(const char *s, char *buf, size_t len, bool dash);
/* ctl_role_list - an entry's roles as "a,b,c" (cleaned, cut), "-" for none */
const char *ctl_role_list(const RoleEntry *e, char *buf, size_t len);
/* ctl_fmt_release - "1.2.3" into buf; returns buf */
char *ctl_fmt_release(const Leasehold__Control__Release *r, char *buf, size_t len);
/* ctl_fmt_time - unix seconds as RFC 3339 UTC into buf; NULL for 0 */
const char *ctl_fmt_time(int64_t t, char *buf, size_t len);
/* ctl_print_json - o pretty-printed, one value, then a newline */
void ctl_print_json(json_object *o);

#endif
