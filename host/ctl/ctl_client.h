/* SPDX-License-Identifier: MIT */
/*
 * ctl_client.h - leaseholdctl's way to the daemon, shared by every verb
 * (ctl_main.c, ctl_plugin_config.c): finding the control socket as the
 * daemon finds it, one request/reply over it, what a non-OK reply means
 * (a message on stderr and the exit code, ctl.h), and the one form every
 * verb's errors take (ctl_fail).
 *
 * Everything printed from the daemon goes through ctl_clean(). Threading:
 * the CLI's one thread.
 */
#ifndef LH_CTL_CLIENT_H
#define LH_CTL_CLIENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/control.pb-c.h"

/* ctl_fail - print "leaseholdctl: MESSAGE" (a line) to stderr, the one
 * form every verb's errors take; returns code, for `return ctl_fail(...)` */
int ctl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ctl_vfail - ctl_fail with the arguments in ap (for a caller that adds to
 * the message, as ctl_usage_error does) */
int ctl_vfail(int code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* ctl_find_control - the daemon's control socket, found as the daemon finds it
 * (control_url_resolve): --control, $LEASEHOLD_CONTROL, the `control` key of
 * the configuration file (--config FILE, else the default file when it
 * exists), the built-in default. *ret_url is borrowed (argv, environment or
 * buf). Returns EXIT_OK, or EXIT_ERR (printed) when the file cannot be read
 * or the configured daemon has no control socket. */
int ctl_find_control(const char *control, const char *config, char *buf, size_t len,
		     const char **ret_url);

/* ctl_call - one request/reply: req (packed, borrowed) out, the reply in.
 * Prints its own errors, each naming what went wrong (see the exit codes);
 * returns EXIT_OK with *ret_resp set (caller frees) or an exit code;
 * *ret_timed_out tells whether no answer came in time. */
int ctl_call(const char *url, const uint8_t *req, size_t req_len, int64_t timeout_ms,
	     Leasehold__Control__Response **ret_resp, bool *ret_timed_out);

/* ctl_check_code - map a non-OK reply to a message and an exit code; roles: the
 * request was a roles command. */
int ctl_check_code(const Leasehold__Control__Response *r, bool roles);

/* ctl_control_url - the daemon's control socket as every command finds it
 * (ctl_find_control) into buf as a URL. EXIT_OK, or EXIT_ERR (printed). */
int ctl_control_url(const char *control, const char *config, char *buf, size_t len);

#endif
