/* SPDX-License-Identifier: MIT */
/*
 * control_codec.h - the control protocol's shared rules (proto/control.proto):
 * limits, request validation, response validation and helpers used by both
 * the server (host/control/control.c) and leaseholdctl.
 *
 * Everything here is pure: no I/O, no logging. Decoders take untrusted bytes
 * and either return a fully validated message or an error with a short
 * human-readable reason (a static string).
 */
#ifndef LH_CONTROL_CODEC_H
#define LH_CONTROL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/control.pb-c.h"
#include "base/release.h"

/* protocol revision carried in Request.protocol / Response.protocol */
#define CONTROL_PROTOCOL 1u
/* largest request the server decodes (bigger: CODE_TOO_LARGE) */
#define CONTROL_MAX_REQUEST ((size_t)64 * 1024)
/* largest message the transport accepts at all (bigger: the pipe is closed) */
#define CONTROL_MAX_WIRE ((size_t)1024 * 1024)
/* largest reply leaseholdctl accepts */
#define CONTROL_MAX_REPLY ((size_t)16 * 1024 * 1024)
/* plugin names on the wire: 1..CONTROL_NAME_MAX printable ASCII bytes */
#define CONTROL_NAME_MAX 255
/* longest string accepted in a reply (errors are cut to this by the server) */
#define CONTROL_STRING_MAX 4096
/* node ids on the wire (roles requests): 1..CONTROL_NODE_MAX printable ASCII
 * bytes, no '/' (the daemon's --node-id rule; it is a key component) */
#define CONTROL_NODE_MAX 128
/* roles per ROLES_SET request, and a role name's length ([a-z0-9_-]); the
 * same limits as host/election/election_roles.h (ROLES_MAX, ROLES_NAME_MAX) */
#define CONTROL_ROLES_MAX 64
#define CONTROL_ROLE_MAX 63

/* control_codec_name_ok - true if s is 1..CONTROL_NAME_MAX bytes of
 * printable ASCII (0x21..0x7e). */
bool control_codec_name_ok(const char *s);

/* control_codec_node_ok - true if s is 1..CONTROL_NODE_MAX bytes of
 * printable ASCII (0x21..0x7e) without '/'. */
bool control_codec_node_ok(const char *s);

/* control_codec_role_ok - true if s matches [a-z0-9_-]{1,CONTROL_ROLE_MAX}. */
bool control_codec_role_ok(const char *s);

/* control_codec_roles_check - the ROLES_SET rule for a whole set: at most
 * CONTROL_ROLES_MAX names, each control_codec_role_ok, no name twice.
 * Returns 0, or -EINVAL with *ret_bad the index of the first offending name
 * (n when there are too many) and *ret_why a static reason. */
int control_codec_roles_check(const char *const *roles, size_t n, size_t *ret_bad,
			      const char **ret_why);

/* control_codec_request_decode - unpack and validate a request (size limit,
 * protobuf, known kind, name present where needed and well formed; for
 * ROLES_SET/ROLES_CLEAR/MEMBERS_FORGET a valid node and, for ROLES_SET, a
 * valid role set; the other two carry no roles).
 * On success *ret_req owns the message (free with
 * leasehold__control__request__free_unpacked(req, NULL)) and 0 is returned.
 * On failure returns -EMSGSIZE (too large), -EBADMSG (not a Request),
 * -EPROTONOSUPPORT (unknown kind) or -EINVAL (bad field); *ret_why points to
 * a static reason; *ret_req untouched. */
int control_codec_request_decode(const void *buf, size_t len, Leasehold__Control__Request **ret_req,
				 const char **ret_why);

/* control_codec_request_encode - pack a request into a malloc'd buffer
 * (caller frees *ret_buf). name may be NULL. Returns 0 or -ENOMEM/-EINVAL. */
int control_codec_request_encode(Leasehold__Control__Kind kind, const char *name,
				 uint32_t timeout_ms, uint8_t **ret_buf, size_t *ret_len);

/* control_codec_roles_request_encode - pack a ROLES_SET or ROLES_CLEAR
 * request (node, n roles; roles may be NULL when n is 0) into a malloc'd
 * buffer (caller frees *ret_buf). Nothing is validated here beyond the
 * kind, so tests can send what the decoder must refuse. Returns 0 or
 * -ENOMEM/-EINVAL (other kind, NULL node). */
int control_codec_roles_request_encode(Leasehold__Control__Kind kind, const char *node,
				       const char *const *roles, size_t n, uint8_t **ret_buf,
				       size_t *ret_len);
/* control_codec_roles_request_encode_force - the same, with Request.force
 * (ROLES_SET: write even for a node that has never registered) */
int control_codec_roles_request_encode_force(Leasehold__Control__Kind kind, const char *node,
					     const char *const *roles, size_t n, bool force,
					     uint8_t **ret_buf, size_t *ret_len);

/* control_codec_pin_request_encode - pack a RELEASE_PIN (version, force)
 * or, with version NULL, a RELEASE_UNPIN request for plugin name; 0 or -errno */
int control_codec_pin_request_encode(const char *name, const char *version, bool force,
				     uint8_t **ret_buf, size_t *ret_len);

/* control_codec_forget_request_encode - pack a MEMBERS_FORGET request
 * (plugin name, node) into a malloc'd buffer (caller frees *ret_buf); not
 * validated here. Returns 0 or -ENOMEM/-EINVAL (NULL argument). */
int control_codec_forget_request_encode(const char *name, const char *node, uint8_t **ret_buf,
					size_t *ret_len);

/* control_codec_shadow_request_encode - pack a SHADOW request for plugin
 * name on node `node` (NULL: the daemon asked) bounded by timeout_ms
 * (*ret_buf malloc'd). 0 or -EINVAL / -ENOMEM. */
int control_codec_shadow_request_encode(const char *name, const char *node, uint32_t timeout_ms,
					uint8_t **ret_buf, size_t *ret_len);
/* control_codec_switchover_request_encode - pack a SWITCHOVER request
 * (plugin name, target node or NULL for any, timeout) into a malloc'd
 * buffer (caller frees *ret_buf); not validated here. Returns 0 or
 * -ENOMEM/-EINVAL (NULL name). */
int control_codec_switchover_request_encode(const char *name, const char *to, uint32_t timeout_ms,
					    uint8_t **ret_buf, size_t *ret_len);

/* control_codec_response_decode - unpack and validate a reply (known code,
 * bounded strings, releases present where required, role entries present). On success *ret_resp
 * owns the message (free with leasehold__control__response__free_unpacked).
 * Returns 0 or -EBADMSG with *ret_why set; *ret_resp untouched on failure. */
int control_codec_response_decode(const void *buf, size_t len,
				  Leasehold__Control__Response **ret_resp, const char **ret_why);

/* control_codec_code_str - "ok", "bad request", ... for a Code value. */
const char *control_codec_code_str(int code);
/* control_codec_kind_str - "plugins", "status", ..., "roles-list",
 * "roles-set", "roles-clear" ("?" if unknown). */
const char *control_codec_kind_str(int kind);

/* control_codec_release - Release message -> struct release ({0,0,0} for NULL). */
struct release control_codec_release(const Leasehold__Control__Release *r);

#endif
