/* SPDX-License-Identifier: MIT */
/*
 * control_json.h - the documented JSON shapes of the read commands, built
 * from control Response messages (proto/control.proto): leaseholdctl's
 * `-o json` (ctl_views.c) and the daemon's /api/v1/ (daemon_api.c) both
 * print with these. Each builder returns a new json-c reference (the caller
 * puts it), borrowing its argument for the call only. Pure; any thread.
 */
#ifndef LH_CONTROL_JSON_H
#define LH_CONTROL_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "proto/control.pb-c.h"

/* control_json_plugin - one plugin object, its node rows under "nodes" */
json_object *control_json_plugin(const Leasehold__Control__Plugin *p);
/* control_json_member - one node row (members, and a plugin's "nodes") */
json_object *control_json_member(const Leasehold__Control__Member *m);
/* control_json_pin - p's pin: NULL (JSON null) or {"release", "forced",
 * "by", "at"} (new object, the caller owns it) */
json_object *control_json_pin(const Leasehold__Control__Plugin *p);
/* control_json_acting - the release the release rule lets act now, for p:
 * NULL (JSON null: none can) or {"release", "basis"} (caller owns it) */
json_object *control_json_acting(const Leasehold__Control__Plugin *p);
/* control_json_term - one term of the leadership history */
json_object *control_json_term(const Leasehold__Control__Term *t);
/* control_json_str_or_null - a string, or NULL (JSON null) for NULL/"" */
json_object *control_json_str_or_null(const char *s);
/* control_json_fmt_time - unix seconds as RFC 3339 UTC into buf; NULL for 0 */
const char *control_json_fmt_time(int64_t t, char *buf, size_t len);

#endif
