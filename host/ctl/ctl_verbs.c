/* SPDX-License-Identifier: MIT */
/*
 * ctl_verbs.c - the verbs the daemon (or observer mode) answers: one row each
 * in a table, with the request it sends and what it prints.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control/control.h"
#include "control/control_codec.h"
#include "ctl/ctl_switchover.h"
#include "ctl/ctl_shadow.h"
#include "ctl/ctl_timeout.h"
#include "lh_install_dirs.h"
#include "ctl/ctl.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_views.h"
#include "ctl/ctl_client.h"
#include "ctl/ctl_plugin_config.h"
#include "ctl/ctl_release.h"
#include "ctl/ctl_main_internal.h"
#include "ctl/ctl_suggest.h"
#include "ctl/ctl_redraw.h"

static int ctl_verbs_observer_call(const struct opts *o, const uint8_t *req, size_t req_len,
			 int64_t timeout_ms, Response **ret_resp)
{
	Leasehold__Control__Request *rq;
	struct ctl_observer *ob;
	const char *why;
	int ret;

	if (control_codec_request_decode(req, req_len, &rq, &why) < 0) {
		fprintf(stderr, "leaseholdctl: %s\n", why);
		return EXIT_ERR;
	}
	ret = ctl_observer_open(&o->etcd, &ob);
	if (ret == EXIT_OK) {
		ret = ctl_observer_call(ob, rq, timeout_ms, ret_resp);
		ctl_observer_close(ob);
	}
	leasehold__control__request__free_unpacked(rq, NULL);
	return ret;
}

static int ctl_verbs_parse_revision(const char *s, int64_t *ret)
{
	char *end = NULL;
	errno = 0;
	long long v = s ? strtoll(s, &end, 10) : 0;
	if (!s || !s[0] || errno || !end || *end || v <= 0)
		return -EINVAL;
	*ret = (int64_t)v;
	return 0;
}

/* ctl_verbs_watch - `watch [NAME]`: needs etcd (observer mode) */
int ctl_verbs_watch(const struct opts *o, const struct command *cmd, const char *name)
{
	int64_t from = 0, to = 0;
	uint32_t ms = 0;
	struct ctl_observer *ob;

	if (!o->etcd.endpoints) {
		fprintf(stderr, "leaseholdctl: watch reads etcd directly: give --etcd URL (and the "
				"TLS and auth options of your etcd; see leaseholdctl help watch)\n");
		return EXIT_ERR;
	}
	if (o->from_revision && ctl_verbs_parse_revision(o->from_revision, &from) < 0)
		return ctl_usage_error(cmd, "invalid --from-revision '%s'", o->from_revision);
	if (o->to_revision && ctl_verbs_parse_revision(o->to_revision, &to) < 0)
		return ctl_usage_error(cmd, "invalid --to-revision '%s'", o->to_revision);
	if (o->has_timeout && ctl_args_parse_timeout(o->timeout, &ms) < 0)
		return ctl_usage_error(cmd, "invalid --timeout '%s' (a duration: 30, 2.5, 500ms, 2m)", o->timeout);
	int ret = ctl_observer_open(&o->etcd, &ob);
	if (ret != EXIT_OK)
		return ret;
	ret = ctl_observer_watch(ob, name, o->json, from, to, ms);
	ctl_observer_close(ob);
	return ret;
}

/* ---- the daemon verbs: one row each, the request it sends, what it prints ---- */

/* A daemon verb's call as its handlers see it: what was asked and how long
 * the answer may take. */
struct ctl_verb_call {
	const struct opts *o;
	const struct command *cmd;
	const struct ctl_verb *verb;
	const char *name;     /* the first argument, or NULL */
	bool roles;	      /* a `roles ...` verb: name is a node id */
	uint32_t timeout_ms;  /* what the daemon itself waits (wait-ready, reconcile, switchover) */
	int64_t recv_timeout; /* how long the client waits for the answer */
};

/* ctl_verb - a verb the daemon (or observer mode) answers. prepare (NULL:
 * nothing to do) checks the verb's own --timeout and sets the times;
 * encode (NULL: the plain request) builds the request; show (NULL: nothing
 * printed) prints a successful answer. unsure names the command that tells
 * whether a write whose answer timed out happened (NULL: not a write). */
struct ctl_verb {
	const char *name;
	Leasehold__Control__Kind kind;
	int64_t recv_timeout; /* 0: CTL_TIMEOUT_MS */
	int (*prepare)(struct ctl_verb_call *c);
	int (*encode)(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len);
	int (*show)(const struct ctl_verb_call *c, Response *resp);
	const char *unsure;
};

static int ctl_verb_prepare_switchover(struct ctl_verb_call *c)
{
	const struct opts *o = c->o;
	if (ctl_switchover_parse_timeout(o->has_timeout ? o->timeout : NULL, &c->timeout_ms) < 0)
		return ctl_usage_error(c->cmd,
					    "invalid --timeout '%s' (2s to 1h: 30, 30s, "
					    "1500ms, 2m)",
					    o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + CTL_SWITCHOVER_MARGIN_MS;
	return EXIT_OK;
}

/* --timeout DUR for a wait of the daemon's, default_s without one; the
 * client waits margin_ms longer */
static int ctl_verb_prepare_wait_for(struct ctl_verb_call *c, double default_s, int64_t margin_ms)
{
	c->timeout_ms = (uint32_t)(default_s * 1000);
	if (c->o->has_timeout && ctl_args_parse_timeout(c->o->timeout, &c->timeout_ms) < 0)
		return ctl_usage_error(c->cmd, "invalid --timeout '%s' (a duration: 30, 2.5, 500ms, 2m)",
					    c->o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + margin_ms;
	return EXIT_OK;
}

static int ctl_verb_prepare_reconcile(struct ctl_verb_call *c)
{
	/* the request's own etcd write, then the wait */
	return ctl_verb_prepare_wait_for(c, CTL_RECONCILE_DEFAULT_S, CTL_WRITE_TIMEOUT_MS);
}

static int ctl_verb_prepare_wait_ready(struct ctl_verb_call *c)
{
	return ctl_verb_prepare_wait_for(c, CTL_WAIT_DEFAULT_S, CTL_WAIT_MARGIN_MS);
}

static int ctl_verb_encode_roles(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	const struct opts *o = c->o;
	return control_codec_roles_request_encode_force(c->verb->kind, c->name, o->args + 1,
							o->n_args - 1, o->force, ret_req, ret_len);
}

static int ctl_verb_encode_switchover(const struct ctl_verb_call *c, uint8_t **ret_req,
				      size_t *ret_len)
{
	return ctl_switchover_encode(c->name, c->o->to, c->timeout_ms, ret_req, ret_len);
}

static int ctl_verb_prepare_shadow(struct ctl_verb_call *c)
{
	const struct opts *o = c->o;
	if (ctl_shadow_parse_timeout(o->has_timeout ? o->timeout : NULL, &c->timeout_ms) < 0)
		return ctl_usage_error(c->cmd,
					    "invalid --timeout '%s' (100ms to 10m: 10, 10s, "
					    "500ms, 2m)",
					    o->timeout);
	c->recv_timeout = (int64_t)c->timeout_ms + CTL_SHADOW_MARGIN_MS;
	return EXIT_OK;
}

static int ctl_verb_encode_shadow(const struct ctl_verb_call *c, uint8_t **ret_req,
				  size_t *ret_len)
{
	return control_codec_shadow_request_encode(c->name, c->o->node, c->timeout_ms, ret_req,
						   ret_len);
}

static int ctl_verb_encode_forget(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	return control_codec_forget_request_encode(c->name, c->o->args[1], ret_req, ret_len);
}

static int ctl_verb_encode_pin(const struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	bool pin = strcmp(c->cmd->name, "release pin") == 0;
	return control_codec_pin_request_encode(c->name, pin ? c->o->args[1] : NULL, c->o->force,
						ret_req, ret_len);
}

static int ctl_verb_show_release(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_release_view(resp, c->o->json);
}

static int ctl_verb_show_pin(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], v[CELL], m[CONTROL_STRING_MAX + 1];
	if (resp->message && resp->message[0])
		fprintf(stderr, "leaseholdctl: %s\n", ctl_clean(resp->message, m, sizeof(m), false));
	if (strcmp(c->cmd->name, "release pin") == 0)
		printf("plugin %s: pinned at release %s (no newer release campaigns)\n",
		       ctl_clean(c->name, b, sizeof(b), false),
		       ctl_clean(c->o->args[1], v, sizeof(v), false));
	else
		printf("plugin %s: unpinned (the newest release that can act leads)\n",
		       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_plugins(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_plugins(resp, c->o->json);
}

static int ctl_verb_show_status(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_status(resp, c->o->json);
}

static int ctl_verb_show_members(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_members(resp, c->o->json);
}

static int ctl_verb_show_roles_list(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_roles_list(resp, c->o->json);
}

static int ctl_verb_show_history(const struct ctl_verb_call *c, Response *resp)
{
	return ctl_view_history(resp, c->name, c->o->json);
}

static int ctl_verb_show_wait_ready(const struct ctl_verb_call *c, Response *resp)
{
	(void)resp;
	printf("%s is ready\n", c->name);
	return EXIT_OK;
}

static int ctl_verb_show_reload(const struct ctl_verb_call *c, Response *resp)
{
	(void)resp;
	printf("reload requested: %s\n", c->name ? c->name : "all plugins");
	return EXIT_OK;
}

static int ctl_verb_show_roles_set(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], l[CELL];
	RoleEntry e = LEASEHOLD__CONTROL__ROLE_ENTRY__INIT;
	(void)resp;
	e.roles = (char **)(c->o->args + 1);
	e.n_roles = c->o->n_args - 1;
	printf("node %s: roles set to %s\n", ctl_clean(c->name, b, sizeof(b), false),
	       e.n_roles ? ctl_role_list(&e, l, sizeof(l)) : "(none)");
	return EXIT_OK;
}

static int ctl_verb_show_roles_clear(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("node %s: roles record deleted\n", ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_forget(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL], n[CELL];
	(void)resp;
	printf("plugin %s: node %s forgotten\n", ctl_clean(c->name, b, sizeof(b), false),
	       ctl_clean(c->o->args[1], n, sizeof(n), false));
	return EXIT_OK;
}

static int ctl_verb_show_pause(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("plugin %s: paused cluster-wide (the leader starts no reconcile)\n",
	       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_resume(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	(void)resp;
	printf("plugin %s: resumed (the leader reconciles now)\n",
	       ctl_clean(c->name, b, sizeof(b), false));
	return EXIT_OK;
}

static int ctl_verb_show_reconcile(const struct ctl_verb_call *c, Response *resp)
{
	char b[CELL];
	if (c->timeout_ms == 0)
		printf("plugin %s: reconcile requested (revision %" PRId64 ")\n",
		       ctl_clean(c->name, b, sizeof(b), false), resp->revision);
	else
		printf("plugin %s: reconcile request %" PRId64 " served by the leader\n",
		       ctl_clean(c->name, b, sizeof(b), false), resp->revision);
	return EXIT_OK;
}

static int ctl_verb_show_leave(const struct ctl_verb_call *c, Response *resp)
{
	(void)c;
	(void)resp;
	printf("leaving: the daemon drains, deletes this node's member records and exits\n");
	return EXIT_OK;
}

static int ctl_verb_show_version(const struct ctl_verb_call *c, Response *resp)
{
	char v[CELL], n[CELL];
	(void)c;
	printf("leasehold %s (node %s, protocol %" PRIu32 ")\n",
	       ctl_clean(resp->daemon_version, v, sizeof(v), true),
	       ctl_clean(resp->node, n, sizeof(n), true), resp->protocol);
	return EXIT_OK;
}

#define KIND(k) LEASEHOLD__CONTROL__KIND__KIND_##k
static const struct ctl_verb verbs[] = {
    {"plugins", KIND(PLUGINS), 0, NULL, NULL, ctl_verb_show_plugins, NULL},
    {"status", KIND(STATUS), 0, NULL, NULL, ctl_verb_show_status, NULL},
    {"members", KIND(MEMBERS), 0, NULL, NULL, ctl_verb_show_members, NULL},
    {"members forget", KIND(MEMBERS_FORGET), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_forget,
     ctl_verb_show_forget, "members NAME"},
    {"leave", KIND(LEAVE), 0, NULL, NULL, ctl_verb_show_leave, NULL},
    {"wait-ready", KIND(WAIT_READY), 0, ctl_verb_prepare_wait_ready, NULL, ctl_verb_show_wait_ready,
     NULL},
    {"reload", KIND(RELOAD), 0, NULL, NULL, ctl_verb_show_reload, NULL},
    {"roles list", KIND(ROLES_LIST), 0, NULL, NULL, ctl_verb_show_roles_list, NULL},
    {"roles set", KIND(ROLES_SET), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_roles,
     ctl_verb_show_roles_set, "roles list"},
    {"roles clear", KIND(ROLES_CLEAR), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_roles,
     ctl_verb_show_roles_clear, "roles list"},
    {"pause", KIND(PAUSE), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_pause, "status NAME"},
    {"resume", KIND(RESUME), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_resume, "status NAME"},
    {"reconcile", KIND(RECONCILE), 0, ctl_verb_prepare_reconcile, NULL, ctl_verb_show_reconcile,
     NULL},
    {"history", KIND(HISTORY), CTL_WRITE_TIMEOUT_MS, NULL, NULL, ctl_verb_show_history, NULL},
    {"switchover", KIND(SWITCHOVER), 0, ctl_verb_prepare_switchover, ctl_verb_encode_switchover,
     NULL, NULL},
    {"version", KIND(VERSION), 0, NULL, NULL, ctl_verb_show_version, NULL},
    {"release", KIND(STATUS), 0, NULL, NULL, ctl_verb_show_release, NULL},
    {"release pin", KIND(RELEASE_PIN), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_pin,
     ctl_verb_show_pin, "release NAME"},
    {"release unpin", KIND(RELEASE_UNPIN), CTL_WRITE_TIMEOUT_MS, NULL, ctl_verb_encode_pin,
     ctl_verb_show_pin, "release NAME"},
    {"shadow", KIND(SHADOW), 0, ctl_verb_prepare_shadow, ctl_verb_encode_shadow, NULL, NULL},
};
#undef KIND

static const struct ctl_verb *ctl_verbs_find(const char *name)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

/* ctl_verbs_request - the request of call c into ret_req (malloc'd);
 * EXIT_OK or the exit code of a refusal (printed) */
static int ctl_verbs_request(struct ctl_verb_call *c, uint8_t **ret_req, size_t *ret_len)
{
	const struct ctl_verb *v = c->verb;
	const struct opts *o = c->o;
	int ret;

	c->recv_timeout = v->recv_timeout ? v->recv_timeout : CTL_TIMEOUT_MS;
	if (v->prepare && (ret = v->prepare(c)) != EXIT_OK)
		return ret;
	if (o->has_timeout && !c->cmd->timeout) {
		/* every other command: --timeout bounds the whole call */
		uint32_t ms;
		if (ctl_args_parse_timeout(o->timeout, &ms) < 0 || ms == 0)
			return ctl_usage_error(c->cmd, "invalid --timeout '%s' (a duration > 0: 30, 2.5, 500ms, 2m)",
						    o->timeout);
		c->recv_timeout = ms;
	}
	int r = v->encode ? v->encode(c, ret_req, ret_len)
			  : control_codec_request_encode(v->kind, c->roles ? NULL : c->name,
							 c->timeout_ms, ret_req, ret_len);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: cannot encode the request\n");
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* ctl_verbs_ask - a plain request of kind for plugin name to the daemon at
 * url (or etcd); its answer into *ret_resp (free_unpacked) or EXIT_* */
static int ctl_verbs_ask(const struct ctl_verb_call *c, const char *url,
			 Leasehold__Control__Kind kind, const char *name, Response **ret_resp)
{
	uint8_t *req = NULL;
	size_t len = 0;
	bool timed_out = false;

	if (control_codec_request_encode(kind, name, 0, &req, &len) < 0)
		return EXIT_ERR;
	int ret = c->o->etcd.endpoints
		      ? ctl_verbs_observer_call(c->o, req, len, CTL_TIMEOUT_MS, ret_resp)
		      : ctl_call(url, req, len, CTL_TIMEOUT_MS, ret_resp, &timed_out);
	free(req);
	return ret;
}

/* ctl_verbs_refusal_leader - a refused switchover names who leads: when the
 * refusal does not, take the leader from the plugin's status (as the
 * daemon, or etcd, sees it right after) */
static void ctl_verbs_refusal_leader(const struct ctl_verb_call *c, const char *url,
				     Response *resp)
{
	Response *st = NULL;
	if (resp->leader && resp->leader[0])
		return;
	if (ctl_verbs_ask(c, url, LEASEHOLD__CONTROL__KIND__KIND_STATUS, c->name, &st) != EXIT_OK)
		return;
	if (st->code == LEASEHOLD__CONTROL__CODE__CODE_OK && st->n_plugins == 1 &&
	    st->plugins[0]->leader && st->plugins[0]->leader[0] && !st->plugins[0]->view_stale) {
		char *l = strdup(st->plugins[0]->leader);
		if (l) {
			/* freed with resp (protobuf-c frees a non-default string) */
			if (resp->leader && resp->leader != protobuf_c_empty_string)
				free(resp->leader);
			resp->leader = l;
		}
	}
	leasehold__control__response__free_unpacked(st, NULL);
}

/* ctl_verbs_suggest_plugin - after "no plugin NAME": the plugin list from
 * the same daemon (or etcd) and, when one is near NAME, "did you mean" */
static void ctl_verbs_suggest_plugin(const struct ctl_verb_call *c, const char *url)
{
	const char *cands[256];
	Response *resp = NULL;
	size_t n = 0;
	char b[CELL];

	if (ctl_verbs_ask(c, url, LEASEHOLD__CONTROL__KIND__KIND_PLUGINS, NULL, &resp) != EXIT_OK)
		return;
	for (size_t i = 0; resp->code == LEASEHOLD__CONTROL__CODE__CODE_OK && i < resp->n_plugins &&
			   n + 2 <= sizeof(cands) / sizeof(cands[0]);
	     i++) {
		cands[n++] = resp->plugins[i]->name;
		if (resp->plugins[i]->file && resp->plugins[i]->file[0])
			cands[n++] = resp->plugins[i]->file; /* NAME may be a file name */
	}
	const char *s = ctl_suggest(c->name, cands, n);
	if (s)
		fprintf(stderr, "leaseholdctl: did you mean '%s'?\n", ctl_clean(s, b, sizeof(b), false));
	leasehold__control__response__free_unpacked(resp, NULL);
}

/* ctl_verbs_run_call - send call c's request to the daemon at url (observer
 * mode: to etcd) and print the answer; returns the exit code */
static int ctl_verbs_run_call(struct ctl_verb_call *c, const char *url)
{
	const struct ctl_verb *v = c->verb;
	const struct opts *o = c->o;
	Response *resp = NULL;
	uint8_t *req = NULL;
	size_t req_len = 0;
	bool timed_out = false;
	int ret;

	if ((ret = ctl_verbs_request(c, &req, &req_len)) != EXIT_OK)
		return ret;
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET && o->n_args == 1) {
		char b[CELL];
		fprintf(stderr,
			"leaseholdctl: note: no ROLE given: node %s will hold no roles (its record "
			"stays; 'roles clear' deletes it)\n",
			ctl_clean(c->name, b, sizeof(b), false));
	}
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_VERSION) {
		/* the client's own version needs no daemon */
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		fflush(stdout);
	}
	if (o->etcd.endpoints)
		ret = ctl_verbs_observer_call(o, req, req_len, c->recv_timeout, &resp);
	else
		ret = ctl_call(url, req, req_len, c->recv_timeout, &resp, &timed_out);
	free(req);
	if (ret != EXIT_OK) {
		if (timed_out && v->unsure)
			fprintf(stderr,
				"leaseholdctl: the write may or may not have happened; check with "
				"'leaseholdctl %s'\n",
				v->unsure);
		return ret;
	}
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER &&
	    resp->code == LEASEHOLD__CONTROL__CODE__CODE_BUSY)
		ctl_verbs_refusal_leader(c, url, resp);
	if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER &&
	    resp->code != LEASEHOLD__CONTROL__CODE__CODE_REFUSED)
		ret = ctl_switchover_result(resp, c->name, o->to, o->json);
	else if (v->kind == LEASEHOLD__CONTROL__KIND__KIND_SHADOW &&
		 resp->code != LEASEHOLD__CONTROL__CODE__CODE_REFUSED)
		ret = ctl_shadow_result(resp, c->name, o->json);
	else
		ret = ctl_check_code(resp, c->roles);
	if (resp->code == LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND && c->name && !c->roles)
		ctl_verbs_suggest_plugin(c, url);
	if (ret == EXIT_OK && v->show)
		ret = v->show(c, resp);
	leasehold__control__response__free_unpacked(resp, NULL);
	if (fflush(stdout) != 0 && ret == EXIT_OK)
		ret = EXIT_ERR;
	return ret;
}

/* -w: one call of the loop (ctl_redraw.h) */
struct ctl_verbs_redraw {
	struct ctl_verb_call *call;
	const char *url;
};

static int ctl_verbs_redraw_once(void *arg)
{
	struct ctl_verbs_redraw *r = arg;
	return ctl_verbs_run_call(r->call, r->url);
}

int ctl_verbs_run(const struct opts *o, const struct command *cmd, const char *name, bool roles,
		  const char *url)
{
	struct ctl_verb_call call = {.o = o, .cmd = cmd, .name = name, .roles = roles};
	if (!(call.verb = ctl_verbs_find(cmd->name))) {
		fprintf(stderr, "leaseholdctl: %s: no such daemon verb\n", cmd->name);
		return EXIT_ERR;
	}
	if (o->watch) {
		struct ctl_verbs_redraw r = {&call, url};
		/* JSON and YAML: one document per change, nothing between them */
		return ctl_redraw_loop(ctl_verbs_redraw_once, &r, !o->json);
	}
	return ctl_verbs_run_call(&call, url);
}
