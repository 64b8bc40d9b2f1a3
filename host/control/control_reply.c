/* SPDX-License-Identifier: MIT */
/*
 * control_reply.c - building and packing control Responses (see
 * control_reply.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_codec.h"
#include "control/control_reply.h"

void control_reply_init(struct control_reply *rp)
{
	memset(rp, 0, sizeof(*rp));
	leasehold__control__response__init(&rp->r);
}

void control_reply_fini(struct control_reply *rp)
{
	free(rp->plugins);
	free(rp->pp);
	free(rp->roles);
	free(rp->rolep);
	free(rp->rstr);
	free(rp->terms);
	free(rp->trel);
	free(rp->termp);
	for (size_t i = 0; i < rp->n_owned; i++)
		free(rp->owned[i]);
	for (size_t i = 0; i < rp->n_mlists; i++) {
		struct pb_members *l = rp->mlists[i];
		if (!l)
			continue;
		free(l->m);
		free(l->rel);
		free(l->nrel);
		free(l->ns);
		free(l->mp);
		free(l);
	}
	free(rp->mlists);
}

/* pb_str - a string for the wire: "" for NULL, cut to CONTROL_STRING_MAX. */

char *control_reply_str(struct control_reply *rp, const char *s)
{
	if (!s)
		return (char *)"";
	if (strnlen(s, CONTROL_STRING_MAX + 1) <= CONTROL_STRING_MAX)
		return (char *)s;
	if (rp->n_owned < sizeof(rp->owned) / sizeof(rp->owned[0])) {
		char *copy = strndup(s, CONTROL_STRING_MAX);
		if (copy) {
			rp->owned[rp->n_owned++] = copy;
			return copy;
		}
	}
	return (char *)"(too long)";
}

void control_reply_release(Leasehold__Control__Release *m, struct release r)
{
	leasehold__control__release__init(m);
	m->major = r.major;
	m->minor = r.minor;
	m->patch = r.patch;
}

void control_reply_error(struct control_reply *rp, Leasehold__Control__Code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rp->msg, sizeof(rp->msg), fmt, ap);
	va_end(ap);
	rp->r.code = code;
	rp->r.message = rp->msg;
	rp->r.n_plugins = 0;
	rp->r.n_members = 0;
	rp->r.n_roles = 0;
}

/* control_reply_plugin_views - a plugin's releases, status and reconcile
 * sub-messages, stored in d */
static void control_reply_plugin_views(struct control_reply *rp, const struct control_plugin *s,
                                       struct pb_plugin *d)
{
	leasehold__control__releases__init(&d->rs);
	if (s->releases.n_members > 0) {
		control_reply_release(&d->min, s->releases.min);
		control_reply_release(&d->max, s->releases.max);
		d->rs.min = &d->min;
		d->rs.max = &d->max;
	}
	d->rs.revision = s->releases.revision;
	d->rs.members = s->releases.n_members;
	d->p.releases = &d->rs;
	if (s->status_present) {
		leasehold__control__status__init(&d->st);
		d->st.state = control_reply_str(rp, s->status_state);
		control_reply_release(&d->sver, s->status_version);
		control_reply_release(&d->smcr, s->status_min_compatible);
		d->st.version = &d->sver;
		d->st.minimum_compatible_release = &d->smcr;
		d->p.status = &d->st;
	}
	leasehold__control__reconcile__init(&d->rc);
	d->rc.count = s->reconcile_count;
	d->rc.last_ok = s->reconcile_last_ok;
	d->rc.last_error = control_reply_str(rp, s->reconcile_last_error);
	d->rc.last_at = s->reconcile_last_at;
	d->p.reconcile = &d->rc;
}

/* control_reply_plugin_operator - what the operator set or must see of a
 * plugin: pause, configuration, view age, pin, acting release, health */
static void control_reply_plugin_operator(struct control_reply *rp, const struct control_plugin *s,
                                          struct pb_plugin *d)
{
	d->p.paused = s->paused;
	d->p.pause_error = control_reply_str(rp, s->pause_error);
	d->p.paused_by = control_reply_str(rp, s->paused_by);
	d->p.paused_at = s->paused_at;
	d->p.reconcile_requested = s->reconcile_requested;
	d->p.reconcile_served = s->reconcile_served;
	d->p.config_error = control_reply_str(rp, s->config_error);
	d->p.config_revision = s->config_revision;
	d->p.view_stale = s->view_stale;
	d->p.view_stale_ms = s->view_stale_ms;
	if (s->pinned) {
		control_reply_release(&d->pin, s->pin);
		d->p.pin = &d->pin;
	}
	d->p.pin_forced = s->pin_forced;
	d->p.pin_by = control_reply_str(rp, s->pin_by);
	d->p.pin_at = s->pin_at;
	d->p.pin_error = control_reply_str(rp, s->pin_error);
	if (s->has_acting) {
		control_reply_release(&d->acting, s->acting_release);
		d->p.acting_release = &d->acting;
	}
	d->p.acting_basis = control_reply_str(rp, s->acting_basis);
	d->p.unhealthy = s->unhealthy;
	d->p.unhealthy_until = s->unhealthy_until;
	d->p.failures_in_row = s->failures_in_row;
	d->p.unhealthy_total = s->unhealthy_total;
}

/* reply_plugins - put n plugins into the reply. Returns 0 or -ENOMEM. */
int control_reply_plugins(struct control_reply *rp, const struct control_plugin *src, size_t n)
{
	if (n == 0)
		return 0;
	rp->plugins = calloc(n, sizeof(*rp->plugins));
	rp->pp = calloc(n, sizeof(*rp->pp));
	if (!rp->plugins || !rp->pp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct control_plugin *s = &src[i];
		struct pb_plugin *d = &rp->plugins[i];
		leasehold__control__plugin__init(&d->p);
		d->p.name = control_reply_str(rp, s->name);
		d->p.file = control_reply_str(rp, s->file);
		if (s->has_release) {
			control_reply_release(&d->rel, s->release);
			d->p.release = &d->rel;
		}
		d->p.state = control_reply_str(rp, s->state);
		d->p.leader = control_reply_str(rp, s->leader);
		d->p.ready = s->ready;
		d->p.not_ready = control_reply_str(rp, s->ready ? NULL : s->not_ready);
		control_reply_plugin_views(rp, s, d);
		d->p.error = control_reply_str(rp, s->error);
		d->p.held_back = control_reply_str(rp, s->held_back);
		d->p.fencing_token = s->fencing_token;
		d->p.superseded_by = control_reply_str(rp, s->superseded_by);
		d->p.callback = control_reply_str(rp, s->callback);
		d->p.callback_ms = s->callback_ms;
		control_reply_plugin_operator(rp, s, d);
		d->p.keyed = s->keyed;
		d->p.keys_depth = s->keys_depth;
		d->p.keys_waiting = s->keys_waiting;
		d->p.keys_oldest_ms = s->keys_oldest_ms;
		d->p.keys_done = s->keys_done;
		d->p.keys_failed = s->keys_failed;
		d->p.keys_running = s->keys_running;
		d->p.keys_concurrency = s->keys_concurrency;
		rp->pp[i] = &d->p;
	}
	rp->r.plugins = rp->pp;
	rp->r.n_plugins = n;
	return 0;
}

/* control_reply_member_list - n Member messages from src, owned by the reply (freed by
 * control_reply_fini). *ret_mp: the pointer array (NULL when n is 0). 0/-ENOMEM. */
int control_reply_member_list(struct control_reply *rp, const struct control_member *src, size_t n,
			 Leasehold__Control__Member ***ret_mp)
{
	*ret_mp = NULL;
	if (n == 0)
		return 0;
	struct pb_members **ls = realloc(rp->mlists, (rp->n_mlists + 1) * sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	rp->mlists = ls;
	struct pb_members *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	rp->mlists[rp->n_mlists++] = l;
	l->m = calloc(n, sizeof(*l->m));
	l->rel = calloc(n, sizeof(*l->rel));
	l->nrel = calloc(n, sizeof(*l->nrel));
	l->ns = calloc(n, sizeof(*l->ns));
	l->mp = calloc(n, sizeof(*l->mp));
	if (!l->m || !l->rel || !l->nrel || !l->ns || !l->mp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Leasehold__Control__Member *m = &l->m[i];
		leasehold__control__member__init(m);
		m->node = control_reply_str(rp, src[i].node_id);
		control_reply_release(&l->rel[i], src[i].release);
		m->release = &l->rel[i];
		m->leader = src[i].leader;
		m->campaigning = src[i].campaigning;
		m->local = src[i].local;
		m->no_member_record = src[i].no_member_record;
		m->node_state_invalid = src[i].record_invalid;
		m->sessions = src[i].sessions;
		m->conflict = src[i].conflict;
		m->unhealthy = src[i].unhealthy;
		m->unhealthy_until = src[i].unhealthy_until;
		const struct node_record *nr = src[i].record;
		if (nr) {
			Leasehold__Control__NodeState *ns = &l->ns[i];
			leasehold__control__node_state__init(ns);
			control_reply_release(&l->nrel[i], nr->release);
			ns->release = &l->nrel[i];
			ns->state = control_reply_str(rp, nr->state);
			ns->reason = control_reply_str(rp, nr->reason);
			ns->since = nr->since;
			ns->ready = nr->ready;
			ns->not_ready = control_reply_str(rp, nr->not_ready);
			ns->reconcile_at = nr->reconcile_at;
			ns->reconcile_ok = nr->reconcile_ok;
			ns->reconcile_error = control_reply_str(rp, nr->reconcile_error);
			m->node_state = ns;
		}
		l->mp[i] = m;
	}
	l->n = n;
	*ret_mp = l->mp;
	return 0;
}

int control_reply_members(struct control_reply *rp, const struct control_member *src, size_t n)
{
	Leasehold__Control__Member **mp;
	int r = control_reply_member_list(rp, src, n, &mp);
	if (r < 0)
		return r;
	rp->r.members = mp;
	rp->r.n_members = n;
	return 0;
}

/* control_reply_role_names - does entry e carry role names on the wire? Not when it has
 * an error (its roles are then empty by definition). */
static bool control_reply_role_names(const struct control_role_entry *e)
{
	return e->node_id && e->roles && !(e->error && e->error[0]);
}

/* reply_roles - put n role entries into the reply (entries without a node
 * id, i.e. not filled in by the op, are skipped). Returns 0 or -ENOMEM. */
int control_reply_roles(struct control_reply *rp, const struct control_role_entry *src, size_t n)
{
	size_t total = 0, k = 0, out = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (control_reply_role_names(&src[i]))
			total += src[i].n_roles;
	rp->roles = calloc(n, sizeof(*rp->roles));
	rp->rolep = calloc(n, sizeof(*rp->rolep));
	rp->rstr = calloc(total ? total : 1, sizeof(*rp->rstr));
	if (!rp->roles || !rp->rolep || !rp->rstr)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Leasehold__Control__RoleEntry *d = &rp->roles[out];
		if (!src[i].node_id)
			continue;
		leasehold__control__role_entry__init(d);
		d->node = control_reply_str(rp, src[i].node_id);
		d->error = control_reply_str(rp, src[i].error);
		d->roles = &rp->rstr[k];
		if (control_reply_role_names(&src[i])) {
			for (size_t j = 0; j < src[i].n_roles; j++)
				rp->rstr[k++] = control_reply_str(rp, src[i].roles[j]);
			d->n_roles = src[i].n_roles;
		}
		rp->rolep[out++] = d;
	}
	rp->r.roles = rp->rolep;
	rp->r.n_roles = out;
	return 0;
}

/* reply_terms - put n history terms into the reply. 0 or -ENOMEM. */
int control_reply_terms(struct control_reply *rp, const struct control_term *src, size_t n)
{
	if (n == 0)
		return 0;
	rp->terms = calloc(n, sizeof(*rp->terms));
	rp->trel = calloc(n, sizeof(*rp->trel));
	rp->termp = calloc(n, sizeof(*rp->termp));
	if (!rp->terms || !rp->trel || !rp->termp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Leasehold__Control__Term *d = &rp->terms[i];
		leasehold__control__term__init(d);
		d->node = control_reply_str(rp, src[i].node);
		control_reply_release(&rp->trel[i], src[i].release);
		d->release = &rp->trel[i];
		d->fencing_token = src[i].token;
		d->start_revision = src[i].start_rev;
		d->start_unix = src[i].start_unix;
		d->end_revision = src[i].end_rev;
		d->end_unix = src[i].end_unix;
		d->end_reason = control_reply_str(rp, src[i].end_reason);
		d->end_detail = control_reply_str(rp, src[i].end_detail);
		d->invalid = src[i].invalid;
		rp->termp[i] = d;
	}
	rp->r.terms = rp->termp;
	rp->r.n_terms = n;
	return 0;
}


int control_reply_pack(struct control_reply *rp, const char *node, uint8_t **ret_buf,
                       size_t *ret_len)
{
	size_t len;
	uint8_t *buf;

	rp->r.protocol = CONTROL_PROTOCOL;
	rp->r.node = control_reply_str(rp, node);
	rp->r.daemon_version = (char *)PACKAGE_VERSION;
	if (!rp->r.message)
		rp->r.message = (char *)"";
	len = leasehold__control__response__get_packed_size(&rp->r);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	leasehold__control__response__pack(&rp->r, buf);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

int control_answer_pack(const struct control_answer *a, uint8_t **ret_buf, size_t *ret_len)
{
	struct control_reply rp;
	int r = 0;
	control_reply_init(&rp);
	if (a->code != LEASEHOLD__CONTROL__CODE__CODE_OK) {
		control_reply_error(&rp, (Leasehold__Control__Code)a->code, "%s",
			    a->message ? a->message : "");
	} else {
		if (a->message && a->message[0]) {
			/* an OK answer's note (a forced pin's warning) */
			snprintf(rp.msg, sizeof(rp.msg), "%s", a->message);
			rp.r.message = rp.msg;
		}
		if (r == 0)
			r = control_reply_plugins(&rp, a->plugins, a->n_plugins);
		for (size_t i = 0; r == 0 && a->plugin_nodes && i < a->n_plugins; i++) {
			if (control_reply_member_list(&rp, a->plugin_nodes[i], a->n_plugin_nodes[i],
					  &rp.pp[i]->nodes) < 0)
				r = -ENOMEM;
			else
				rp.pp[i]->n_nodes = a->n_plugin_nodes[i];
		}
		if (r == 0)
			r = control_reply_members(&rp, a->members, a->n_members);
		if (r == 0)
			r = control_reply_roles(&rp, a->roles, a->n_roles);
		if (r == 0)
			r = control_reply_terms(&rp, a->terms, a->n_terms);
	}
	rp.r.revision = a->revision;
	rp.r.leader = control_reply_str(&rp, a->leader);
	rp.r.config_document.data = (uint8_t *)(uintptr_t)a->config_document;
	rp.r.config_document.len = a->config_document ? a->config_len : 0;
	rp.r.config_revision = a->config_revision;
	rp.r.config_error = control_reply_str(&rp, a->config_error);
	if (r == 0)
		r = control_reply_pack(&rp, a->node, ret_buf, ret_len);
	control_reply_fini(&rp);
	return r;
}

