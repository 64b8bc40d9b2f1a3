/* SPDX-License-Identifier: MIT */
/*
 * control_verbs.c - the verbs the control server answers at once, from the
 * rows the daemon's ops fill into the server's buffers (plugins, status,
 * members, roles list) or from one op's result (reload, leave); and
 * wait-ready, answered at once or kept until control_notify() finds the
 * plugin ready (see control.c).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_internal.h"
#include "base/log.h"

/* control_fetch_plugins - ask the daemon for all plugins into c->pbuf. 0/-ENOMEM. */
int control_fetch_plugins(struct control *c, size_t *ret_n)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		size_t total = c->ops->plugins(c->ud, c->pbuf, c->pcap);
		if (total <= c->pcap) {
			*ret_n = total;
			return 0;
		}
		size_t cap = total + 8;
		struct control_plugin *b = realloc(c->pbuf, cap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		c->pbuf = b;
		c->pcap = cap;
	}
	return -EAGAIN;
}

const struct control_plugin *control_find_plugin(const struct control *c, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (c->pbuf[i].name && strcmp(c->pbuf[i].name, name) == 0)
			return &c->pbuf[i];
	/* a file name (x-1.3.0.so): the row of that file */
	for (size_t i = 0; i < n; i++)
		if (c->pbuf[i].file && strcmp(c->pbuf[i].file, name) == 0)
			return &c->pbuf[i];
	return NULL;
}

/* control_fetch_members - ask the daemon for plugin name's rows into c->mbuf:
 * 0 (*ret_n rows), -ENOENT, -ENOTSUP, -ENOMEM or -EAGAIN. */
static int control_fetch_members(struct control *c, const char *name, size_t *ret_n)
{
	size_t total = 0;
	int r = -ENOTSUP;

	if (!c->ops->members)
		return -ENOTSUP;
	for (int attempt = 0; attempt < 4; attempt++) {
		total = 0;
		r = c->ops->members(c->ud, name, c->mbuf, c->mcap, &total);
		if (r < 0 || total <= c->mcap)
			break;
		size_t cap = total + 8;
		struct control_member *b = realloc(c->mbuf, cap * sizeof(*b));
		if (!b) {
			r = -ENOMEM;
			break;
		}
		c->mbuf = b;
		c->mcap = cap;
		r = -EAGAIN;
	}
	*ret_n = total;
	return r;
}

/* control_attach_nodes - every plugin of the reply gets its node rows (a file row
 * that runs no plugin has none). 0 or -ENOMEM. */
static int control_attach_nodes(struct control *c, struct control_reply *rp)
{
	for (size_t i = 0; i < rp->r.n_plugins; i++) {
		Leasehold__Control__Plugin *p = rp->r.plugins[i];
		size_t n = 0;
		int r = control_fetch_members(c, p->name, &n);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			continue;
		if (control_reply_member_list(rp, c->mbuf, n, &p->nodes) < 0)
			return -ENOMEM;
		p->n_nodes = n;
	}
	return 0;
}

void control_do_plugins(struct control *c, struct control_reply *rp)
{
	size_t n;
	if (control_fetch_plugins(c, &n) < 0 || control_reply_plugins(rp, c->pbuf, n) < 0 ||
	    control_attach_nodes(c, rp) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

void control_do_status(struct control *c, struct control_reply *rp, const char *name)
{
	const struct control_plugin *p;
	size_t n;
	if (control_fetch_plugins(c, &n) < 0) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return;
	}
	p = control_find_plugin(c, n, name);
	if (!p)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (control_reply_plugins(rp, p, 1) < 0 || control_attach_nodes(c, rp) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

void control_do_members(struct control *c, struct control_reply *rp, const char *name)
{
	size_t total = 0;
	int r = control_fetch_members(c, name, &total);

	if (r == -ENOTSUP)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "members are not available");
	else if (r == -ENOENT)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (r < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "members: %s", strerror(-r));
	else if (control_reply_members(rp, c->mbuf, total) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

void control_do_reload(struct control *c, struct control_reply *rp, const char *name)
{
	char err[256] = "";
	int r;

	if (!c->ops->reload) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "reload is not available");
		return;
	}
	r = c->ops->reload(c->ud, name[0] ? name : NULL, err, sizeof(err));
	if (r == -ENOENT)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (r < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "%s",
			    err[0] ? err : strerror(-r));
}

/* control_do_wait_ready - answer now (ready, unknown, timeout 0) or park the
 * request. Returns true when parked (no reply to send now). */
bool control_do_wait_ready(struct control *c, struct control_conn *conn, struct control_reply *rp,
			  const char *name, uint32_t timeout_ms)
{
	const struct control_plugin *p;
	struct request *rq;
	size_t n;

	if (control_fetch_plugins(c, &n) < 0) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	p = control_find_plugin(c, n, name);
	if (!p) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
		return false;
	}
	if (p->ready) {
		if (control_reply_plugins(rp, p, 1) < 0)
			control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	if (timeout_ms == 0) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT, "plugin '%s' is not ready%s%s",
			    name, p->not_ready ? ": " : "", p->not_ready ? p->not_ready : "");
		return false;
	}
	if (c->n_parked >= CONTROL_MAX_PARKED) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY, "too many waiting requests");
		return false;
	}
	rq = control_request_new(c, conn);
	if (!rq) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	snprintf(rq->name, sizeof(rq->name), "%s", name);
	rq->timeout_ms = timeout_ms;
	rq->state = R_PARKED;
	c->n_parked++;
	loop_timer_arm_in(rq->timer, (uint64_t)timeout_ms * LOOP_NS_PER_MS);
	return true;
}

/* control_fetch_roles - ask the daemon for every roles record into c->rbuf.
 * 0/-ENOMEM/-EAGAIN. */
static int control_fetch_roles(struct control *c, size_t *ret_n)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		size_t total;
		if (c->rcap > 0)
			memset(c->rbuf, 0, c->rcap * sizeof(*c->rbuf));
		total = c->ops->roles_list(c->ud, c->rbuf, c->rcap);
		if (total <= c->rcap) {
			*ret_n = total;
			return 0;
		}
		size_t cap = total + 8;
		struct control_role_entry *b = realloc(c->rbuf, cap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		c->rbuf = b;
		c->rcap = cap;
	}
	return -EAGAIN;
}

void control_not_supported(struct control_reply *rp)
{
	control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
		    "roles are not supported by this daemon");
}

void control_do_roles_list(struct control *c, struct control_reply *rp)
{
	size_t n;

	if (!c->ops->roles_list) {
		control_not_supported(rp);
		return;
	}
	if (control_fetch_roles(c, &n) < 0 || control_reply_roles(rp, c->rbuf, n) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

/* control_do_leave - the node leaves every plugin's membership for good and shuts
 * down; answered before the shutdown starts */
void control_do_leave(struct control *c, struct control_reply *rp)
{
	char err[256] = "";

	if (!c->ops->leave) {
		control_not_supported(rp);
		return;
	}
	if (c->ops->leave(c->ud, err, sizeof(err)) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "%s",
			    err[0] ? err : "cannot leave");
}
