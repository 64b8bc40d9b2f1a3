/* SPDX-License-Identifier: MIT */
/*
 * ctl_client.c - leaseholdctl's way to the daemon (see ctl_client.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config_file.h"
#include "control/control.h"
#include "control/control_client.h"
#include "control/control_codec.h"
#include "control/control_config.h"
#include "control/control_wire.h"
#include "ctl/ctl.h"
#include "ctl/ctl_client.h"
#include "ctl/ctl_views.h"
#include "lh_install_dirs.h"

int ctl_vfail(int code, const char *fmt, va_list ap)
{
	fprintf(stderr, "leaseholdctl: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	return code;
}

int ctl_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ctl_vfail(code, fmt, ap);
	va_end(ap);
	return code;
}

int ctl_find_control(const char *control, const char *config, char *buf, size_t len,
		     const char **ret_url)
{
	const char *flag = control && control[0] ? control : NULL;
	const char *path = config;
	const char *from_file = NULL;
	char err[CONFIG_ERR_MAX + 64];

	if (!path && access(LH_CONFIG_FILE, F_OK) == 0)
		path = LH_CONFIG_FILE;
	if (path && !flag) {
		err[0] = '\0';
		int r = control_config_file_control(path, buf, len, err, sizeof(err));
		/* -ENOENT with a message: the file itself is missing, which only
		 * the default file may be (it was there a moment ago); -ENOENT
		 * without one: the file holds no control key */
		if (r < 0 && (r != -ENOENT || (config && err[0]))) {
			fprintf(stderr, "leaseholdctl: %s\n", err);
			return EXIT_ERR;
		}
		if (r == 0)
			from_file = buf;
	}
	const char *url = control_url_resolve(flag, from_file, buf, len);
	if (strcmp(url, "none") == 0) {
		fprintf(stderr, "leaseholdctl: the daemon has no control socket (control: none%s%s)\n",
			from_file == url ? " in " : "", from_file == url ? path : "");
		return EXIT_ERR;
	}
	*ret_url = url;
	return EXIT_OK;
}

int ctl_call(const char *url, const uint8_t *req, size_t req_len, int64_t timeout_ms,
	     Response **ret_resp, bool *ret_timed_out)
{
	char path[4096];
	uint8_t *buf = NULL;
	size_t len = 0;
	const char *why;
	int r;

	*ret_timed_out = false;
	if (control_wire_path(url, path, sizeof(path)) < 0) {
		fprintf(stderr, "leaseholdctl: invalid control socket '%s' (want ipc:///path or /path)\n",
			url);
		return EXIT_ERR;
	}
	r = control_client_call(path, req, req_len, timeout_ms, CONTROL_MAX_REPLY, &buf, &len);
	switch (r) {
	case 0:
		break;
	case -ENOENT:
	case -ENOTDIR:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: no such socket file: is the "
			"daemon running?\n",
			url);
		return EXIT_NO_SOCKET;
	case -ECONNREFUSED:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: connection refused: a stale "
			"socket file (the daemon that made it is gone): is the daemon running?\n",
			url);
		return EXIT_STALE;
	case -EACCES:
		fprintf(stderr,
			"leaseholdctl: cannot reach leasehold at %s: permission denied (run as root "
			"or as the daemon's user)\n",
			url);
		return EXIT_DENIED;
	case -ETIMEDOUT:
		fprintf(stderr, "leaseholdctl: no answer from leasehold at %s within %.1f s\n", url,
			(double)timeout_ms / 1000.0);
		*ret_timed_out = true;
		return EXIT_TIMEOUT;
	case -ENOTSOCK:
		fprintf(stderr, "leaseholdctl: %s is not a socket\n", url);
		return EXIT_ERR;
	case -ECONNRESET:
		fprintf(stderr,
			"leaseholdctl: leasehold at %s closed the connection without an answer\n",
			url);
		return EXIT_ERR;
	case -EBADMSG:
		fprintf(stderr,
			"leaseholdctl: %s does not speak the leasehold control protocol (an older "
			"leasehold, or another program?)\n",
			url);
		return EXIT_ERR;
	default:
		fprintf(stderr, "leaseholdctl: talking to leasehold at %s: %s\n", url,
			strerror(-r));
		return EXIT_ERR;
	}
	r = control_codec_response_decode(buf, len, ret_resp, &why);
	free(buf);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: %s from leasehold at %s\n", why, url);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

int ctl_check_code(const Response *r, bool roles)
{
	char m[CONTROL_STRING_MAX + 1], n[CELL];

	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_OK)
		return EXIT_OK;
	ctl_clean(r->message, m, sizeof(m), false);
	if (!r->node || !r->node[0]) {
		/* answered from etcd (observer mode): no daemon, no node */
		fprintf(stderr, "leaseholdctl: %s\n", m);
		return r->code == LEASEHOLD__CONTROL__CODE__CODE_FAILED ||
				       r->code == LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT
			       ? EXIT_NOTOK
			       : EXIT_ERR;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_REFUSED) {
		fprintf(stderr, "leaseholdctl: refused by the daemon: %s\n", m);
		return EXIT_REFUSED;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND) {
		fprintf(stderr, "leaseholdctl: %s (node %s)\n", m,
			ctl_clean(r->node, n, sizeof(n), true));
		return EXIT_ERR;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND && roles) {
		fprintf(stderr,
			"leaseholdctl: this leasehold daemon does not support roles (%s); "
			"upgrade it or enable roles there\n",
			m);
		return EXIT_ERR;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT ||
	    r->code == LEASEHOLD__CONTROL__CODE__CODE_FAILED) {
		fprintf(stderr, "leaseholdctl: %s\n", m);
		return EXIT_NOTOK;
	}
	if (r->code == LEASEHOLD__CONTROL__CODE__CODE_BUSY && m[0]) {
		/* the daemon's reason says it all ("... is paused"): no code name */
		fprintf(stderr, "leaseholdctl: %s\n", m);
		return EXIT_ERR;
	}
	fprintf(stderr, "leaseholdctl: the daemon refused the request: %s: %s\n",
		control_codec_code_str((int)r->code), m);
	return EXIT_ERR;
}

int ctl_control_url(const char *control, const char *config, char *buf, size_t len)
{
	char found[4096];
	const char *url;
	int r = ctl_find_control(control, config, found, sizeof(found), &url);
	if (r != EXIT_OK)
		return r;
	snprintf(buf, len, "%s%s", url[0] == '/' ? "ipc://" : "", url);
	return EXIT_OK;
}
