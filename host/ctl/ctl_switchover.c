/* SPDX-License-Identifier: MIT */
/*
 * ctl_switchover.c - leaseholdctl switchover (see ctl_switchover.h).
 * Strings from the daemon are printed as printable ASCII only.
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
#include "ctl/ctl_switchover.h"
#include "ctl/ctl_views.h"
#include "election/election_switchover_request.h"

int ctl_switchover_parse_timeout(const char *s, uint32_t *ret_ms)
{
	return ctl_timeout_parse(s, SWITCHOVER_TIMEOUT_DEFAULT_MS, SWITCHOVER_TIMEOUT_MIN_MS, SWITCHOVER_TIMEOUT_MAX_MS, ret_ms);
}

int ctl_switchover_encode(const char *name, const char *to, uint32_t timeout_ms,
                          uint8_t **ret_buf, size_t *ret_len)
{
	return control_codec_switchover_request_encode(name, to, timeout_ms, ret_buf, ret_len);
}

static const char *ctl_switchover_printable(const char *s, char *buf, size_t len)
{
	size_t n = 0;
	for (; s && s[n] && n + 1 < len; n++)
		buf[n] = s[n] >= 0x20 && s[n] < 0x7f ? s[n] : '?';
	buf[n] = '\0';
	return buf;
}

int ctl_switchover_result(const Leasehold__Control__Response *r, const char *name,
                          const char *to, bool json)
{
	char m[CONTROL_STRING_MAX + 1], l[CONTROL_NODE_MAX + 1], n[CONTROL_NAME_MAX + 1];
	int code = r->code == LEASEHOLD__CONTROL__CODE__CODE_OK ? 0
	           : r->code == LEASEHOLD__CONTROL__CODE__CODE_FAILED ||
	                   r->code == LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT
	               ? 1
	               : 2;
	ctl_switchover_printable(r->message, m, sizeof(m));
	ctl_switchover_printable(r->leader, l, sizeof(l));
	ctl_switchover_printable(name, n, sizeof(n));
	if (json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "plugin", json_object_new_string(n));
		json_object_object_add(o, "to", to ? json_object_new_string(to) : NULL);
		json_object_object_add(o, "switched", json_object_new_boolean(code == 0));
		json_object_object_add(o, "leader", l[0] ? json_object_new_string(l) : NULL);
		json_object_object_add(o, "revision", json_object_new_int64(r->revision));
		json_object_object_add(o, "error", code ? json_object_new_string(m) : NULL);
		ctl_print_json(o);
		json_object_put(o);
	}
	if (code == 0) {
		if (!json)
			printf("plugin %s: switchover done (request %" PRId64 "): %s leads\n", n,
			       r->revision, l);
		return 0;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_BUSY ||
	    r->code == LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND)
		fprintf(stderr, "leaseholdctl: switchover refused: %s%s%s%s\n", m, l[0] ? " (" : "",
			l[0] ? l : "", l[0] ? " leads)" : "");
	else if (code == 1)
		fprintf(stderr, "leaseholdctl: %s\n", m);
	else
		fprintf(stderr, "leaseholdctl: the daemon refused the request: %s: %s\n",
		        control_codec_code_str((int)r->code), m);
	return code;
}
