/* SPDX-License-Identifier: MIT */
/*
 * control_codec.c - validation of control messages (see control_codec.h).
 *
 * Design notes
 * - protobuf-c checks the wire format (unpack returns NULL on garbage or a
 *   truncated message) but not meaning: proto3 enums are open, strings may be
 *   of any length. Both are checked here, once, for both directions.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_codec.h"

bool control_codec_name_ok(const char *s)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++) {
		unsigned char ch = (unsigned char)s[n];
		if (ch < 0x21 || ch > 0x7e || n >= CONTROL_NAME_MAX)
			return false;
	}
	return n > 0;
}

bool control_codec_node_ok(const char *s)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++) {
		unsigned char ch = (unsigned char)s[n];
		if (ch < 0x21 || ch > 0x7e || ch == '/' || n >= CONTROL_NODE_MAX)
			return false;
	}
	return n > 0;
}

bool control_codec_role_ok(const char *s)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++) {
		char ch = s[n];
		if (n >= CONTROL_ROLE_MAX)
			return false;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
		      ch == '-'))
			return false;
	}
	return n > 0;
}

int control_codec_roles_check(const char *const *roles, size_t n, size_t *ret_bad,
			      const char **ret_why)
{
	if (n > CONTROL_ROLES_MAX) {
		*ret_bad = n;
		*ret_why = "too many roles (at most 64)";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!control_codec_role_ok(roles[i])) {
			*ret_bad = i;
			*ret_why = "invalid role name (allowed: [a-z0-9_-], 1 to 63 characters)";
			return -EINVAL;
		}
		for (size_t k = 0; k < i; k++) {
			if (strcmp(roles[k], roles[i]) == 0) {
				*ret_bad = i;
				*ret_why = "a role is named twice";
				return -EINVAL;
			}
		}
	}
	return 0;
}

static bool control_codec_kind_needs_name(int kind)
{
	return kind == LEASEHOLD__CONTROL__KIND__KIND_STATUS ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_RESUME ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_RECONCILE ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_HISTORY ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_SHADOW ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN;
}

static bool control_codec_kind_known(int kind)
{
	return (kind >= LEASEHOLD__CONTROL__KIND__KIND_PLUGINS &&
	        kind <= LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN) ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_SHADOW;
}

static bool control_codec_kind_is_roles_write(int kind)
{
	return kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET ||
	       kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR;
}

static bool control_codec_kind_takes_node(int kind)
{
	return control_codec_kind_is_roles_write(kind) || kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET;
}

/* control_codec_node_request_ok - the node and role fields of a ROLES_SET, ROLES_CLEAR or
 * MEMBERS_FORGET (the last two carry no roles). */
static bool control_codec_node_request_ok(const Leasehold__Control__Request *req, const char **ret_why)
{
	size_t bad;

	if (!req->node || req->node[0] == '\0') {
		*ret_why = "this request needs a node id";
		return false;
	}
	if (!control_codec_node_ok(req->node)) {
		*ret_why = "invalid node id (1..128 printable ASCII characters, no '/')";
		return false;
	}
	if (req->kind != LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET) {
		if (req->n_roles > 0) {
			*ret_why = "this request takes no roles";
			return false;
		}
		return true;
	}
	for (size_t i = 0; i < req->n_roles; i++) {
		if (!req->roles[i]) {
			*ret_why = "missing role name";
			return false;
		}
	}
	return control_codec_roles_check((const char *const *)req->roles, req->n_roles, &bad,
					 ret_why) == 0;
}

/* control_codec_request_check_head - protocol revision, kind and plugin
 * name; 0, or -errno with the reason in *ret_why */
static int control_codec_request_check_head(const Leasehold__Control__Request *req,
					    const char **ret_why)
{
	if (req->protocol != CONTROL_PROTOCOL) {
		*ret_why = "unsupported protocol revision";
		return -EINVAL;
	}
	if (!control_codec_kind_known((int)req->kind)) {
		*ret_why = "unknown request kind";
		return -EPROTONOSUPPORT;
	}
	if (!req->name) {
		*ret_why = "missing name";
		return -EINVAL;
	}
	if (req->name[0] == '\0') {
		if (control_codec_kind_needs_name((int)req->kind)) {
			*ret_why = "this request needs a plugin name";
			return -EINVAL;
		}
	} else if (!control_codec_name_ok(req->name)) {
		*ret_why = "invalid plugin name (1..255 printable ASCII characters)";
		return -EINVAL;
	}
	return 0;
}

/* control_codec_request_check_fields - the fields a kind takes (node,
 * roles, release, configuration document) and that others must leave
 * empty; 0, or -EINVAL with the reason in *ret_why */
static int control_codec_request_check_fields(const Leasehold__Control__Request *req,
					      const char **ret_why)
{
	if (control_codec_kind_takes_node((int)req->kind) && !control_codec_node_request_ok(req, ret_why))
		return -EINVAL;
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER &&
	    ((req->node && req->node[0] && !control_codec_node_ok(req->node)) || req->n_roles)) {
		*ret_why = "invalid switchover target (1..128 printable ASCII characters, no '/')";
		return -EINVAL;
	}
	struct release pinned;
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN
		? release_parse(req->version, &pinned) < 0
		: req->version && req->version[0]) {
		*ret_why = req->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN
			  ? "invalid release to pin (major.minor.patch)"
			  : "this request takes no release";
		return -EINVAL;
	}
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_SHADOW &&
	    ((req->node && req->node[0] && !control_codec_node_ok(req->node)) || req->n_roles)) {
		*ret_why = "invalid shadow node (1..128 printable ASCII characters, no '/')";
		return -EINVAL;
	}
	/* the document itself (JSON, the plugin's own check) is the daemon's to
	 * judge; here only what no request may carry */
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET
		? req->config_revision < 0
		: req->config_document.len > 0 || req->config_revision != 0) {
		*ret_why = req->kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET
			  ? "negative config revision"
			  : "this request takes no configuration document";
		return -EINVAL;
	}
	return 0;
}

int control_codec_request_decode(const void *buf, size_t len, Leasehold__Control__Request **ret_req,
				 const char **ret_why)
{
	Leasehold__Control__Request *req;
	const char *why = NULL;
	int r;

	if (len > CONTROL_MAX_REQUEST) {
		*ret_why = "request larger than 64 KiB";
		return -EMSGSIZE;
	}
	req = leasehold__control__request__unpack(NULL, len, buf);
	if (!req) {
		*ret_why = "malformed request (not a leasehold.control.Request)";
		return -EBADMSG;
	}
	if ((r = control_codec_request_check_head(req, &why)) < 0 ||
	    (r = control_codec_request_check_fields(req, &why)) < 0) {
		leasehold__control__request__free_unpacked(req, NULL);
		*ret_why = why;
		return r;
	}
	*ret_req = req;
	return 0;
}

static int control_codec_request_pack(const Leasehold__Control__Request *req, uint8_t **ret_buf,
			size_t *ret_len)
{
	size_t len = leasehold__control__request__get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	leasehold__control__request__pack(req, buf);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

int control_codec_request_encode(Leasehold__Control__Kind kind, const char *name,
				 uint32_t timeout_ms, uint8_t **ret_buf, size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (name && strlen(name) > CONTROL_NAME_MAX)
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = kind;
	req.name = (char *)(name ? name : "");
	req.timeout_ms = timeout_ms;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

int control_codec_roles_request_encode(Leasehold__Control__Kind kind, const char *node,
				       const char *const *roles, size_t n, uint8_t **ret_buf,
				       size_t *ret_len)
{
	return control_codec_roles_request_encode_force(kind, node, roles, n, false, ret_buf,
							ret_len);
}

int control_codec_roles_request_encode_force(Leasehold__Control__Kind kind, const char *node,
					     const char *const *roles, size_t n, bool force,
					     uint8_t **ret_buf, size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (!control_codec_kind_is_roles_write((int)kind) || !node || (n > 0 && !roles))
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = kind;
	req.name = (char *)"";
	req.node = (char *)node;
	req.roles = (char **)roles; /* pack only reads */
	req.n_roles = n;
	req.force = force;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

int control_codec_switchover_request_encode(const char *name, const char *to, uint32_t timeout_ms,
					    uint8_t **ret_buf, size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (!name)
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER;
	req.name = (char *)name;
	req.node = (char *)(to ? to : "");
	req.timeout_ms = timeout_ms;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

int control_codec_shadow_request_encode(const char *name, const char *node, uint32_t timeout_ms,
					uint8_t **ret_buf, size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (!name)
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = LEASEHOLD__CONTROL__KIND__KIND_SHADOW;
	req.name = (char *)name;
	req.node = (char *)(node ? node : "");
	req.timeout_ms = timeout_ms;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

int control_codec_forget_request_encode(const char *name, const char *node, uint8_t **ret_buf,
					size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (!name || !node)
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET;
	req.name = (char *)name;
	req.node = (char *)node;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

int control_codec_pin_request_encode(const char *name, const char *version, bool force,
				     uint8_t **ret_buf, size_t *ret_len)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;

	if (!name)
		return -EINVAL;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = version ? LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN
			   : LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN;
	req.name = (char *)name;
	req.version = (char *)(version ? version : "");
	req.force = force;
	return control_codec_request_pack(&req, ret_buf, ret_len);
}

static bool control_codec_str_ok(const char *s)
{
	return s && strnlen(s, CONTROL_STRING_MAX + 1) <= CONTROL_STRING_MAX;
}

static bool control_codec_plugin_ok(const Leasehold__Control__Plugin *p)
{
	if (!p || !control_codec_str_ok(p->name) || !control_codec_str_ok(p->file) || !control_codec_str_ok(p->state) || !control_codec_str_ok(p->leader) ||
	    !control_codec_str_ok(p->error) || !control_codec_str_ok(p->held_back) || !control_codec_str_ok(p->superseded_by) ||
	    !control_codec_str_ok(p->not_ready) || !control_codec_str_ok(p->callback))
		return false;
	if (p->status && (!control_codec_str_ok(p->status->state)))
		return false;
	if (p->reconcile && !control_codec_str_ok(p->reconcile->last_error))
		return false;
	if (!control_codec_str_ok(p->pause_error) || !control_codec_str_ok(p->paused_by))
		return false;
	if (!control_codec_str_ok(p->config_error))
		return false;
	if (!control_codec_str_ok(p->pin_by) || !control_codec_str_ok(p->pin_error) ||
	    !control_codec_str_ok(p->acting_basis))
		return false;
	return true;
}

static bool control_codec_term_ok(const Leasehold__Control__Term *t)
{
	return t && control_codec_str_ok(t->node) && control_codec_str_ok(t->end_reason) && control_codec_str_ok(t->end_detail);
}

static bool control_codec_role_entry_ok(const Leasehold__Control__RoleEntry *e)
{
	if (!e || !control_codec_str_ok(e->node) || !control_codec_str_ok(e->error))
		return false;
	for (size_t i = 0; i < e->n_roles; i++)
		if (!control_codec_str_ok(e->roles[i]))
			return false;
	return true;
}

int control_codec_response_decode(const void *buf, size_t len,
				  Leasehold__Control__Response **ret_resp, const char **ret_why)
{
	Leasehold__Control__Response *resp;

	resp = leasehold__control__response__unpack(NULL, len, buf);
	if (!resp) {
		*ret_why = "malformed reply";
		return -EBADMSG;
	}
	if ((int)resp->code < LEASEHOLD__CONTROL__CODE__CODE_OK ||
	    ((int)resp->code > LEASEHOLD__CONTROL__CODE__CODE_REFUSED &&
	     resp->code != LEASEHOLD__CONTROL__CODE__CODE_CONFLICT) ||
	    !control_codec_str_ok(resp->message) || !control_codec_str_ok(resp->node) || !control_codec_str_ok(resp->daemon_version) ||
	    !control_codec_str_ok(resp->leader) || !control_codec_str_ok(resp->config_error))
		goto bad;
	for (size_t i = 0; i < resp->n_plugins; i++)
		if (!control_codec_plugin_ok(resp->plugins[i]))
			goto bad;
	for (size_t i = 0; i < resp->n_members; i++)
		if (!resp->members[i] || !control_codec_str_ok(resp->members[i]->node))
			goto bad;
	for (size_t i = 0; i < resp->n_roles; i++)
		if (!control_codec_role_entry_ok(resp->roles[i]))
			goto bad;
	for (size_t i = 0; i < resp->n_terms; i++)
		if (!control_codec_term_ok(resp->terms[i]))
			goto bad;
	*ret_resp = resp;
	return 0;
bad:
	leasehold__control__response__free_unpacked(resp, NULL);
	*ret_why = "invalid reply";
	return -EBADMSG;
}

const char *control_codec_code_str(int code)
{
	switch (code) {
	case LEASEHOLD__CONTROL__CODE__CODE_OK:
		return "ok";
	case LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST:
		return "bad request";
	case LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND:
		return "unknown request kind";
	case LEASEHOLD__CONTROL__CODE__CODE_TOO_LARGE:
		return "request too large";
	case LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND:
		return "not found";
	case LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT:
		return "timed out";
	case LEASEHOLD__CONTROL__CODE__CODE_FAILED:
		return "failed";
	case LEASEHOLD__CONTROL__CODE__CODE_BUSY:
		return "busy";
	case LEASEHOLD__CONTROL__CODE__CODE_INTERNAL:
		return "internal error";
	case LEASEHOLD__CONTROL__CODE__CODE_REFUSED:
		return "refused";
	case LEASEHOLD__CONTROL__CODE__CODE_CONFLICT:
		return "conflict";
	default:
		return "unknown error";
	}
}

const char *control_codec_kind_str(int kind)
{
	switch (kind) {
	case LEASEHOLD__CONTROL__KIND__KIND_PLUGINS:
		return "plugins";
	case LEASEHOLD__CONTROL__KIND__KIND_STATUS:
		return "status";
	case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS:
		return "members";
	case LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY:
		return "wait-ready";
	case LEASEHOLD__CONTROL__KIND__KIND_RELOAD:
		return "reload";
	case LEASEHOLD__CONTROL__KIND__KIND_VERSION:
		return "version";
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST:
		return "roles-list";
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET:
		return "roles-set";
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR:
		return "roles-clear";
	case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET:
		return "members-forget";
	case LEASEHOLD__CONTROL__KIND__KIND_LEAVE:
		return "leave";
	case LEASEHOLD__CONTROL__KIND__KIND_PAUSE:
		return "pause";
	case LEASEHOLD__CONTROL__KIND__KIND_RESUME:
		return "resume";
	case LEASEHOLD__CONTROL__KIND__KIND_RECONCILE:
		return "reconcile";
	case LEASEHOLD__CONTROL__KIND__KIND_HISTORY:
		return "history";
	case LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER:
		return "switchover";
	case LEASEHOLD__CONTROL__KIND__KIND_SHADOW:
		return "shadow";
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET:
		return "config-get";
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET:
		return "config-set";
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN:
		return "release-pin";
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN:
		return "release-unpin";
	default:
		return "?";
	}
}

struct release control_codec_release(const Leasehold__Control__Release *r)
{
	struct release out = {0, 0, 0};
	if (r) {
		out.major = r->major;
		out.minor = r->minor;
		out.patch = r->patch;
	}
	return out;
}
