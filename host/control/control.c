/* SPDX-License-Identifier: MIT */
/*
 * control.c - the control socket server (see control.h).
 *
 * Design notes
 * - The socket, its connections, peers, framing and deadlines are
 *   control_transport.c's; the replies are built in control_reply.c; this
 *   file decodes requests, asks the daemon through control_ops and answers.
 *   Everything runs on the loop thread.
 * - Most requests are answered while the transport's request callback runs.
 *   Two kinds are answered later and keep a `struct request`: a wait-ready
 *   whose plugin is not ready (PARKED until control_notify() finds it ready
 *   or its deadline timer fires) and a roles_set/roles_clear (ASYNC until the
 *   daemon calls done()). A connection carries one request at a time, so a
 *   parked or async request holds its connection; CONTROL_MAX_CONNS in
 *   control_transport.h is above CONTROL_MAX_PARKED + CONTROL_MAX_ASYNC.
 * - A client that goes away: a parked request is dropped at once (no
 *   answer is owed). An async one stays until its done() arrives (done_ctx
 *   is the request, the daemon will call it) and is then freed unanswered.
 * - Async ops: done() that arrives while the op is still running (the op
 *   completed synchronously) is stashed and answered when the op returns.
 *   control_free frees every request, and the daemon must not call done()
 *   after control_free (see control.h): its writes complete through etcd
 *   callbacks, which never run after etcd_client_free, and the daemon frees
 *   the control server first and runs no loop iteration between the two.
 * - Peers are checked by the transport (SO_PEERCRED): only root and our
 *   euid get as far as a request; others get a CODE_REFUSED reply.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "control/control.h"
#include "control/control_codec.h"
#include "control/control_reply.h"
#include "control/control_transport.h"
#include "control/control_wire.h"
#include "base/log.h"

#define COMP "control"
/* wait-ready requests parked at most at once; more get CODE_BUSY */
#define CONTROL_MAX_PARKED 256
/* roles_set/roles_clear requests waiting for done() at most at once; more
 * get CODE_BUSY */
#define CONTROL_MAX_ASYNC 64

enum request_state { R_PARKED, R_ASYNC };

/* a request answered later (see the design notes) */
struct request {
	struct control *c;
	struct control_conn *conn; /* NULL once the client went away */
	enum request_state state;
	struct request *prev, *next;	 /* c->requests */
	struct loop_timer *timer;	 /* parked: the wait-ready deadline */
	uint32_t timeout_ms;		 /* parked: as asked */
	char name[CONTROL_NAME_MAX + 1]; /* parked: plugin; async: node id */
	/* async (roles_set / roles_clear / members_forget) */
	int kind;			   /* the request's kind */
	char plugin[CONTROL_NAME_MAX + 1]; /* members_forget: the plugin */
	int64_t rev;	 /* parked reconcile, switchover: the request's revision */
	char target[CONTROL_NODE_MAX + 1]; /* switchover: the target ("" = any) */
	char from[CONTROL_NODE_MAX + 1];   /* ... and the leader it asked to leave */
	bool in_op;	 /* the op has not returned yet */
	bool early_done; /* done() ran while in_op: the result below */
	int early_err;
	char early_msg[256];
};

struct control {
	struct loop *loop;
	const struct control_ops *ops;
	void *ud;
	struct control_transport *transport;
	struct request *requests;
	size_t n_parked;
	size_t n_async;
	bool busy;	     /* inside a handler: control_notify() is deferred */
	bool notify_pending; /* control_notify() was called while busy */
	struct control_plugin *pbuf;
	size_t pcap;
	struct control_member *mbuf;
	size_t mcap;
	struct control_role_entry *rbuf;
	size_t rcap;
};

/* ---- answering -------------------------------------------------------- */

/* control_pack_reply - finish rp (protocol, node, version) and pack it into a
 * malloc'd buffer. 0 or -ENOMEM. */
static int control_pack_reply(struct control *c, struct control_reply *rp, uint8_t **ret_buf,
                      size_t *ret_len)
{
	return control_reply_pack(rp, c->ops->node_id ? c->ops->node_id(c->ud) : NULL, ret_buf,
				  ret_len);
}

/* control_send_reply - answer conn's request with rp. */
static void control_send_reply(struct control *c, struct control_conn *conn, struct control_reply *rp)
{
	uint8_t *buf;
	size_t len;

	if (control_pack_reply(c, rp, &buf, &len) < 0) {
		/* no memory for the answer: drop the connection, the client says so */
		log_warn(COMP, "cannot answer a control request: out of memory");
		control_conn_close(conn);
		return;
	}
	control_conn_reply(conn, buf, len);
	free(buf);
}

static struct request *control_request_new(struct control *c, struct control_conn *conn);
static void control_request_free(struct request *rq);

/* ---- requests --------------------------------------------------------- */

/* ---- requests --------------------------------------------------------- */

/* control_fetch_plugins - ask the daemon for all plugins into c->pbuf. 0/-ENOMEM. */
static int control_fetch_plugins(struct control *c, size_t *ret_n)
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

static const struct control_plugin *control_find_plugin(const struct control *c, size_t n, const char *name)
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

static void control_do_plugins(struct control *c, struct control_reply *rp)
{
	size_t n;
	if (control_fetch_plugins(c, &n) < 0 || control_reply_plugins(rp, c->pbuf, n) < 0 ||
	    control_attach_nodes(c, rp) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

static void control_do_status(struct control *c, struct control_reply *rp, const char *name)
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

static void control_do_members(struct control *c, struct control_reply *rp, const char *name)
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

static void control_do_reload(struct control *c, struct control_reply *rp, const char *name)
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
static bool control_do_wait_ready(struct control *c, struct control_conn *conn, struct control_reply *rp,
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

static void control_run_deferred_notify(struct control *c);

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

static void control_not_supported(struct control_reply *rp)
{
	control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
		    "roles are not supported by this daemon");
}

static void control_do_roles_list(struct control *c, struct control_reply *rp)
{
	size_t n;

	if (!c->ops->roles_list) {
		control_not_supported(rp);
		return;
	}
	if (control_fetch_roles(c, &n) < 0 || control_reply_roles(rp, c->rbuf, n) < 0)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

/* control_async_result - the reply to a finished asynchronous op of rq. */
static void control_async_result(const struct request *rq, struct control_reply *rp, int err, const char *msg)
{
	const char *why = msg && msg[0] ? msg : strerror(err < 0 ? -err : EIO);

	if (err == 0) {
		/* CODE_OK; a forced pin carries the operator's warning */
		if (msg && msg[0] && rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN) {
			snprintf(rp->msg, sizeof(rp->msg), "%s", msg);
			rp->r.message = rp->msg;
		}
		return;
	}
	if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN ||
	    rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN) {
		/* a refusal on the records read (exit 2), else the write failed */
		bool refused = err == -EBUSY || err == -ESRCH || err == -ERANGE || err == -ENOENT;
		control_reply_error(rp, refused ? LEASEHOLD__CONTROL__CODE__CODE_BUSY
		                                : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
		                    "%s", why);
		return;
	}
	if (err == -ENOENT && rq->kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "%s", why);
	else if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "cannot forget node '%s' of plugin '%s': %s", rq->name, rq->plugin, why);
	else if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ||
		 rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RESUME)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "cannot %s plugin '%s': %s",
			    rq->kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ? "pause" : "resume",
			    rq->plugin, why);
	else
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "cannot %s the roles of node '%s': %s",
			    rq->kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR ? "clear" : "set",
			    rq->name, why);
}

/* control_async_done - the control_done_fn handed to an asynchronous op;
 * done_ctx is the request (loop thread). */
static void control_async_done(void *done_ctx, int err, const char *msg)
{
	struct request *rq = done_ctx;
	struct control *c = rq->c;
	struct control_reply rp;
	bool was_busy;

	if (rq->state != R_ASYNC || rq->early_done) {
		log_warn(COMP, "an asynchronous operation reported its completion twice (ignored)");
		return;
	}
	if (rq->in_op) {
		/* completed before the op returned: answer when it does */
		rq->early_done = true;
		rq->early_err = err;
		snprintf(rq->early_msg, sizeof(rq->early_msg), "%s", msg ? msg : "");
		return;
	}
	was_busy = c->busy;
	c->busy = true;
	if (rq->conn) {
		control_reply_init(&rp);
		control_async_result(rq, &rp, err, msg);
		control_send_reply(c, rq->conn, &rp);
		control_reply_fini(&rp);
	}
	/* else: the client went away; the write is done all the same */
	control_request_free(rq);
	if (!was_busy)
		control_run_deferred_notify(c);
}

/* control_do_pin - release pin / unpin: the op with the decoded release
 * (the decoder checked its syntax) */
static int control_do_pin(struct control *c, const Leasehold__Control__Request *req,
			  struct request *rq, char *err, size_t err_len)
{
	struct release rel = {0, 0, 0};
	bool unpin = req->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN;
	if (!unpin && release_parse(req->version, &rel) < 0)
		return -EINVAL;
	return c->ops->release_pin(c->ud, req->name, unpin, rel, req->force, control_async_done, rq,
				   err, err_len);
}

/* control_do_async - start an asynchronous op (roles set/clear, members forget; the
 * decoder validated its fields). Returns true when the request now waits
 * for done() (no reply to send now); false with the reply in rp. */
static bool control_do_async(struct control *c, struct control_conn *conn, struct control_reply *rp,
		     const Leasehold__Control__Request *req)
{
	int kind = req->kind;
	char err[256] = "";
	struct request *rq;
	int r;

	bool pause = kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE ||
		     kind == LEASEHOLD__CONTROL__KIND__KIND_RESUME;
	bool pin = kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN ||
		   kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN;

	if ((kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR && !c->ops->roles_clear) ||
	    (kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET && !c->ops->roles_set) ||
	    (pause && !c->ops->pause) || (pin && !c->ops->release_pin) ||
	    (kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET && !c->ops->members_forget)) {
		control_not_supported(rp);
		return false;
	}
	if (c->n_async >= CONTROL_MAX_ASYNC) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY,
			    "too many etcd writes in progress");
		return false;
	}
	rq = control_request_new(c, conn);
	if (!rq) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	snprintf(rq->name, sizeof(rq->name), "%s", req->node);
	snprintf(rq->plugin, sizeof(rq->plugin), "%s", req->name);
	rq->kind = kind;
	rq->in_op = true;
	rq->state = R_ASYNC;
	c->n_async++;
	if (kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET)
		r = c->ops->members_forget(c->ud, req->name, req->node, control_async_done, rq, err,
					   sizeof(err));
	else if (pause)
		r = c->ops->pause(c->ud, req->name, kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE,
				  control_async_done, rq, err, sizeof(err));
	else if (pin)
		r = control_do_pin(c, req, rq, err, sizeof(err));
	else if (kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR)
		r = c->ops->roles_clear(c->ud, req->node, control_async_done, rq, err, sizeof(err));
	else
		r = c->ops->roles_set(c->ud, req->node, (const char *const *)req->roles,
				      req->n_roles, req->force, control_async_done, rq, err,
				      sizeof(err));
	rq->in_op = false;
	err[sizeof(err) - 1] = '\0';
	if (r < 0) {
		/* done() never runs (a stashed early one is ignored) */
		if (kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET || pause || pin)
			control_reply_error(rp,
				    r == -ENOENT ? LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND
						 : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
				    "%s", err[0] ? err : strerror(-r));
		else if (r == -EINVAL)
			control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, "%s",
				    err[0] ? err : "invalid node id or role name");
		else
			control_async_result(rq, rp, r, err);
		control_request_free(rq);
		return false;
	}
	if (rq->early_done) {
		control_async_result(rq, rp, rq->early_err, rq->early_msg);
		control_request_free(rq);
		return false;
	}
	return true;
}

/* control_verb_start - a request of kind for plugin NAME that waits for the
 * daemon's done() (reconcile, history); NULL with the reply in rp */
static struct request *control_verb_start(struct control *c, struct control_conn *conn, struct control_reply *rp,
				  const Leasehold__Control__Request *req)
{
	struct request *rq;

	if (c->n_async >= CONTROL_MAX_ASYNC) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY,
			    "too many etcd requests in progress");
		return NULL;
	}
	rq = control_request_new(c, conn);
	if (!rq) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return NULL;
	}
	snprintf(rq->name, sizeof(rq->name), "%s", req->name);
	snprintf(rq->plugin, sizeof(rq->plugin), "%s", req->name);
	rq->kind = req->kind;
	rq->timeout_ms = req->timeout_ms;
	rq->state = R_ASYNC;
	rq->in_op = true;
	c->n_async++;
	return rq;
}

/* control_verb_failed - the op refused at once (done never runs) */
static void control_verb_failed(struct request *rq, struct control_reply *rp, int r, const char *err)
{
	/* a refusal (paused, not synced) is no failed operation */
	control_reply_error(rp,
		    r == -ENOENT			 ? LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND
		    : r == -EBUSY || r == -EAGAIN ? LEASEHOLD__CONTROL__CODE__CODE_BUSY
						 : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
		    "%s", err[0] ? err : strerror(-r));
	control_request_free(rq);
}

/* control_verb_reply - send rp for an async rq (its client may be gone) and free it */
static void control_verb_reply(struct request *rq, struct control_reply *rp)
{
	struct control *c = rq->c;
	bool was_busy = c->busy;

	c->busy = true;
	if (rq->conn)
		control_send_reply(c, rq->conn, rp);
	control_request_free(rq);
	if (!was_busy)
		control_run_deferred_notify(c);
}

static void control_history_done(void *done_ctx, int err, const char *msg,
			 const struct control_term *terms, size_t n)
{
	struct request *rq = done_ctx;
	struct control_reply rp;

	/* control.h: never before the op returned */
	assert(rq->state == R_ASYNC && !rq->in_op);
	control_reply_init(&rp);
	if (err < 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "cannot read the history of plugin '%s': %s", rq->plugin,
			    msg && msg[0] ? msg : strerror(-err));
	else if (control_reply_terms(&rp, terms, n) < 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
	control_verb_reply(rq, &rp);
	control_reply_fini(&rp);
}

/* control_parked_plugin_gone - a parked request's plugin p went away (p NULL):
 * fill rp and return true */
static bool control_parked_plugin_gone(const struct request *rq, const struct control_plugin *p,
			       struct control_reply *rp)
{
	if (p)
		return false;
	control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "plugin '%s' went away",
		    rq->name);
	return true;
}

/* control_reconcile_answer - a parked reconcile request whose plugin p (NULL: gone)
 * may have served it: fill rp and return true when it is answered */
static bool control_reconcile_answer(const struct request *rq, const struct control_plugin *p,
			     struct control_reply *rp)
{
	if (control_parked_plugin_gone(rq, p, rp))
		return true;
	if (p->reconcile_served < rq->rev)
		return false;
	if (!p->reconcile_served_ok)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "the leader's reconcile failed: %s",
			    p->reconcile_served_error ? p->reconcile_served_error : "(no message)");
	rp->r.revision = rq->rev;
	return true;
}

static void control_reconcile_done(void *done_ctx, int err, const char *msg, int64_t rev)
{
	struct request *rq = done_ctx;
	struct control *c = rq->c;
	struct control_reply rp;

	assert(rq->state == R_ASYNC && !rq->in_op);
	if (err == 0 && rq->timeout_ms > 0 && rq->conn && c->n_parked < CONTROL_MAX_PARKED) {
		/* recorded: wait for the leader (control_notify, the timer) */
		c->n_async--;
		rq->state = R_PARKED;
		c->n_parked++;
		rq->rev = rev;
		loop_timer_arm_in(rq->timer, (uint64_t)rq->timeout_ms * LOOP_NS_PER_MS);
		control_notify(c);
		return;
	}
	control_reply_init(&rp);
	if (err < 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "cannot request a reconcile of plugin '%s': %s", rq->plugin,
			    msg && msg[0] ? msg : strerror(-err));
	else if (rq->timeout_ms > 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY, "too many waiting requests");
	else
		rp.r.revision = rev;
	control_verb_reply(rq, &rp);
	control_reply_fini(&rp);
}

/* control_switchover_answer - a parked switchover request whose plugin p (NULL:
 * gone) may have a new leader: fill rp and return true when it is answered
 * (the leader is what was asked, or the request ended without that) */
static bool control_switchover_answer(const struct request *rq, const struct control_plugin *p,
			      struct control_reply *rp)
{
	if (control_parked_plugin_gone(rq, p, rp))
		return true;
	bool led = p->leader && p->leader[0];
	/* p->leader is the lowest election key, not a node that was elected:
	 * a frozen or dying target's key is the lowest once the others gave
	 * way, yet it never leads. The new leader deletes the request once it
	 * leads as asked: done is that end seen with the leader asked for
	 * (which also keeps a mirror still behind the request from answering
	 * with the leader before it) */
	bool done = led && p->switchover_ended_rev >= rq->rev &&
		    (rq->target[0] ? strcmp(p->leader, rq->target) == 0
				   : strcmp(p->leader, rq->from) != 0);
	if (!done && p->switchover_ended_rev < rq->rev)
		return false;
	if (!done)
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "the switchover of plugin '%s' ended without %s%s taking over (leader "
			    "now: %s)",
			    rq->name, rq->target[0] ? "node " : "another node",
			    rq->target[0] ? rq->target : "", led ? p->leader : "none");
	rp->r.revision = rq->rev;
	rp->r.leader = control_reply_str(rp, p->leader);
	return true;
}

static void control_switchover_done(void *done_ctx, int err, const char *msg, int64_t rev,
			    const char *from)
{
	struct request *rq = done_ctx;
	struct control *c = rq->c;
	struct control_reply rp;

	assert(rq->state == R_ASYNC && !rq->in_op);
	if (err == 0 && rq->conn && c->n_parked < CONTROL_MAX_PARKED) {
		/* recorded: wait for the new leader (control_notify, the timer
		 * a little after the request's own end) */
		c->n_async--;
		rq->state = R_PARKED;
		c->n_parked++;
		rq->rev = rev;
		snprintf(rq->from, sizeof(rq->from), "%s", from ? from : "");
		loop_timer_arm_in(rq->timer,
				  ((uint64_t)rq->timeout_ms + 2000) * LOOP_NS_PER_MS);
		control_notify(c);
		return;
	}
	control_reply_init(&rp);
	if (err < 0)
		/* refused on the state read (a reason) or etcd failed */
		control_reply_error(&rp,
			    err == -EBUSY || err == -EALREADY || err == -ESRCH || err == -EAGAIN ||
				    err == -ECHILD
				? LEASEHOLD__CONTROL__CODE__CODE_BUSY
				: LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "%s", msg && msg[0] ? msg : strerror(-err));
	else
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY, "too many waiting requests");
	control_verb_reply(rq, &rp);
	control_reply_fini(&rp);
}

/* control_do_verb - a reconcile request, a history read or a switchover request
 * (the decoder checked the name); true when answered later by
 * control_reconcile_done / control_history_done / control_switchover_done */
static bool control_do_verb(struct control *c, struct control_conn *conn, struct control_reply *rp,
		    const Leasehold__Control__Request *req)
{
	bool history = req->kind == LEASEHOLD__CONTROL__KIND__KIND_HISTORY;
	bool switchover = req->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER;
	char err[256] = "";
	struct request *rq;
	int r;

	if (history ? !c->ops->history : switchover ? !c->ops->switchover : !c->ops->reconcile) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
			    "%s is not supported by this daemon",
			    history ? "history" : switchover ? "switchover" : "reconcile");
		return false;
	}
	rq = control_verb_start(c, conn, rp, req);
	if (!rq)
		return false;
	if (history) {
		r = c->ops->history(c->ud, req->name, control_history_done, rq, err, sizeof(err));
	} else if (switchover) {
		snprintf(rq->target, sizeof(rq->target), "%s", req->node ? req->node : "");
		r = c->ops->switchover(c->ud, req->name, rq->target[0] ? rq->target : NULL,
				       req->timeout_ms, control_switchover_done, rq, err, sizeof(err));
	} else
		r = c->ops->reconcile(c->ud, req->name, control_reconcile_done, rq, err, sizeof(err));
	rq->in_op = false;
	err[sizeof(err) - 1] = '\0';
	if (r < 0) {
		control_verb_failed(rq, rp, r, err);
		return false;
	}
	return true;
}

static void control_shadow_done(void *done_ctx, int err, const char *msg,
				const struct Leasehold__Control__ShadowReport *rep)
{
	struct request *rq = done_ctx;
	struct control_reply rp;

	assert(rq->state == R_ASYNC && !rq->in_op);
	control_reply_init(&rp);
	if (err == -ETIMEDOUT)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT, "%s",
			    msg && msg[0] ? msg : "the shadow run timed out");
	else if (err < 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "the shadow reconcile of plugin '%s' failed: %s", rq->plugin,
			    msg && msg[0] ? msg : strerror(-err));
	/* borrowed until the reply is packed, in control_verb_reply */
	rp.r.shadow = (Leasehold__Control__ShadowReport *)(uintptr_t)rep;
	control_verb_reply(rq, &rp);
	rp.r.shadow = NULL;
	control_reply_fini(&rp);
}

/* control_do_shadow - a shadow run (the decoder checked name and node);
 * true when answered later by control_shadow_done */
static bool control_do_shadow(struct control *c, struct control_conn *conn,
			      struct control_reply *rp, const Leasehold__Control__Request *req)
{
	char err[256] = "";
	struct request *rq;

	if (!c->ops->shadow) {
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
			    "shadow is not supported by this daemon");
		return false;
	}
	rq = control_verb_start(c, conn, rp, req);
	if (!rq)
		return false;
	int r = c->ops->shadow(c->ud, req->name, req->node && req->node[0] ? req->node : NULL,
			       req->timeout_ms, control_shadow_done, rq, err, sizeof(err));
	rq->in_op = false;
	err[sizeof(err) - 1] = '\0';
	if (r < 0) {
		control_reply_error(rp,
			    r == -ENOENT ? LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND
			    : r == -ENOMEM ? LEASEHOLD__CONTROL__CODE__CODE_INTERNAL
					   : LEASEHOLD__CONTROL__CODE__CODE_BUSY,
			    "%s", err[0] ? err : strerror(-r));
		control_request_free(rq);
		return false;
	}
	return true;
}

static void control_plugin_config_done(void *done_ctx, int err, const char *msg, const char *doc, size_t len,
			int64_t rev, const char *doc_error)
{
	struct request *rq = done_ctx;
	bool set = rq->kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET;
	struct control_reply rp;

	assert(rq->state == R_ASYNC && !rq->in_op);
	control_reply_init(&rp);
	if (err == -ESTALE && set)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_CONFLICT, "%s",
			    msg && msg[0] ? msg : "the configuration changed meanwhile");
	else if (err < 0)
		control_reply_error(&rp,
			    err == -EINVAL   ? LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST
			    : err == -ENOENT ? LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND
					     : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
			    "%s", msg && msg[0] ? msg : strerror(-err));
	rp.r.config_revision = rev;
	rp.r.config_document.data = (uint8_t *)(uintptr_t)doc;
	rp.r.config_document.len = doc ? len : 0;
	rp.r.config_error = control_reply_str(&rp, doc_error);
	control_verb_reply(rq, &rp);
	control_reply_fini(&rp);
}

/* control_do_config - a configuration read or write (pconfig); true when answered
 * later by control_plugin_config_done */
static bool control_do_config(struct control *c, struct control_conn *conn, struct control_reply *rp,
		      const Leasehold__Control__Request *req)
{
	bool set = req->kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET;
	char err[512] = "";
	struct request *rq;
	int r;

	if (set ? !c->ops->config_set : !c->ops->config_get) {
		control_not_supported(rp);
		return false;
	}
	rq = control_verb_start(c, conn, rp, req);
	if (!rq)
		return false;
	if (set)
		r = c->ops->config_set(c->ud, req->name, req->config_document.data,
				       req->config_document.len, req->config_revision, req->force,
				       control_plugin_config_done, rq, err, sizeof(err));
	else
		r = c->ops->config_get(c->ud, req->name, control_plugin_config_done, rq, err, sizeof(err));
	rq->in_op = false;
	err[sizeof(err) - 1] = '\0';
	if (r < 0) {
		if (r == -EINVAL) {
			control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, "%s",
				    err[0] ? err : strerror(-r));
			control_request_free(rq);
		} else
			control_verb_failed(rq, rp, r, err);
		return false;
	}
	return true;
}

/* control_do_leave - the node leaves every plugin's membership for good and shuts
 * down; answered before the shutdown starts */
static void control_do_leave(struct control *c, struct control_reply *rp)
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

/* ---- requests answered later ------------------------------------------ */

static void control_request_timer_cb(struct loop_timer *t, void *userdata);

/* control_request_new - a request kept on conn (state set by the caller). */
static struct request *control_request_new(struct control *c, struct control_conn *conn)
{
	struct request *rq = calloc(1, sizeof(*rq));

	if (!rq)
		return NULL;
	if (loop_timer_new(c->loop, control_request_timer_cb, rq, &rq->timer) < 0) {
		free(rq);
		return NULL;
	}
	rq->c = c;
	rq->conn = conn;
	control_conn_set_data(conn, rq);
	rq->next = c->requests;
	if (c->requests)
		c->requests->prev = rq;
	c->requests = rq;
	return rq;
}

/* control_request_free - unlink and free; the connection (if any) forgets it. */
static void control_request_free(struct request *rq)
{
	struct control *c = rq->c;

	if (rq->state == R_PARKED)
		c->n_parked--;
	else
		c->n_async--;
	if (rq->conn)
		control_conn_set_data(rq->conn, NULL);
	loop_timer_free(rq->timer);
	if (rq->prev)
		rq->prev->next = rq->next;
	else
		c->requests = rq->next;
	if (rq->next)
		rq->next->prev = rq->prev;
	free(rq);
}

/* control_request_unpark - a parked request gets its answer. */
static void control_request_unpark(struct control *c, struct request *rq, struct control_reply *rp)
{
	struct control_conn *conn = rq->conn;

	control_request_free(rq);
	control_send_reply(c, conn, rp);
}

/* control_run_deferred_notify - leave the busy section; run a control_notify()
 * that came in meanwhile (e.g. from inside an op). */
static void control_run_deferred_notify(struct control *c)
{
	c->busy = false;
	if (c->notify_pending) {
		c->notify_pending = false;
		control_notify(c);
	}
}

static void control_request_timer_cb(struct loop_timer *t, void *userdata)
{
	struct request *rq = userdata;
	struct control *c = rq->c;
	struct control_reply rp;

	(void)t;
	if (rq->state != R_PARKED)
		return;
	c->busy = true;
	control_reply_init(&rp);
	/* the reason as it is now, when the plugin is still there */
	size_t n;
	const struct control_plugin *p = NULL;
	if (control_fetch_plugins(c, &n) == 0)
		p = control_find_plugin(c, n, rq->name);
	const char *why = p && p->not_ready ? p->not_ready : NULL;
	if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RECONCILE)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT,
			    "the leader of plugin '%s' did not serve reconcile request %" PRId64
			    " within %" PRIu32 " ms (the request stays; a leader serves it when "
			    "one leads)%s",
			    rq->name, rq->rev, rq->timeout_ms,
			    p && p->paused ? ": the plugin is paused" : "");
	else if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT,
			    "the switchover of plugin '%s' did not complete within %" PRIu32
			    " ms (leader now: %s)",
			    rq->name, rq->timeout_ms, p && p->leader ? p->leader : "unknown");
	else
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT,
			    "plugin '%s' not ready after %" PRIu32 " ms%s%s", rq->name,
			    rq->timeout_ms, why ? ": " : "", why ? why : "");
	control_request_unpark(c, rq, &rp);
	control_reply_fini(&rp);
	control_run_deferred_notify(c);
}

/* ---- the transport's callbacks ---------------------------------------- */

/* control_dispatch - run the verb of a decoded request. Returns true when
 * the answer comes later (the request is parked or an op's callback sends
 * it), false when rp holds the answer to send now. */
static bool control_dispatch(struct control *c, struct control_conn *conn, struct control_reply *rp,
                             const Leasehold__Control__Request *req)
{
	switch (req->kind) {
	case LEASEHOLD__CONTROL__KIND__KIND_PLUGINS:
		control_do_plugins(c, rp);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_STATUS:
		control_do_status(c, rp, req->name);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS:
		control_do_members(c, rp, req->name);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY:
		if (control_do_wait_ready(c, conn, rp, req->name, req->timeout_ms))
			return true; /* parked: answered later */
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_RELOAD:
		control_do_reload(c, rp, req->name);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_VERSION:
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST:
		control_do_roles_list(c, rp);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET:
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR:
	case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS_FORGET:
	case LEASEHOLD__CONTROL__KIND__KIND_PAUSE:
	case LEASEHOLD__CONTROL__KIND__KIND_RESUME:
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN:
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN:
		if (control_do_async(c, conn, rp, req))
			return true; /* answered by control_async_done */
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_RECONCILE:
	case LEASEHOLD__CONTROL__KIND__KIND_HISTORY:
	case LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER:
		if (control_do_verb(c, conn, rp, req))
			return true; /* answered by control_reconcile_done or control_switchover_done
				      (then control_notify) or control_history_done */
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_LEAVE:
		control_do_leave(c, rp);
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_SHADOW:
		if (control_do_shadow(c, conn, rp, req))
			return true; /* answered by control_shadow_done */
		break;
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET:
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET:
		if (control_do_config(c, conn, rp, req))
			return true; /* answered by control_plugin_config_done */
		break;
	default: /* excluded by the decoder */
		control_reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
			    "unknown request kind");
		break;
	}
	return false;
}

/* control_on_request - decode, dispatch and answer (now or later) one request. */
static void control_on_request(void *ud, struct control_conn *conn, const uint8_t *buf, size_t len)
{
	struct control *c = ud;
	Leasehold__Control__Request *req = NULL;
	struct control_reply rp;
	const char *why;
	int r;

	c->busy = true;
	control_reply_init(&rp);
	r = control_codec_request_decode(buf, len, &req, &why);
	if (r == -EMSGSIZE)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TOO_LARGE, "%s", why);
	else if (r == -EPROTONOSUPPORT)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND, "%s", why);
	else if (r < 0)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, "%s", why);
	if (r < 0 || !control_dispatch(c, conn, &rp, req))
		control_send_reply(c, conn, &rp);
	control_reply_fini(&rp);
	if (req)
		leasehold__control__request__free_unpacked(req, NULL);
	control_run_deferred_notify(c);
}

/* control_on_closed - the client of an unanswered request went away. */
static void control_on_closed(void *ud, struct control_conn *conn)
{
	struct request *rq = control_conn_data(conn);

	(void)ud;
	if (!rq)
		return;
	rq->conn = NULL;
	if (rq->state == R_PARKED)
		control_request_free(rq); /* nothing owed to anyone */
	/* async: freed when done() arrives (the daemon holds rq as done_ctx) */
}

/* control_on_refusal - the reply a refused connection gets. */
static int control_on_refusal(void *ud, int why, uid_t uid, uint8_t **ret_buf, size_t *ret_len)
{
	struct control *c = ud;
	struct control_reply rp;
	int r;

	control_reply_init(&rp);
	if (why == -EPERM)
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_REFUSED,
			    "uid %u may not use this daemon (only root and uid %u may)",
			    (unsigned)uid, (unsigned)geteuid());
	else
		control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_REFUSED,
			    "too many control connections in progress (%d)", CONTROL_MAX_CONNS);
	r = control_pack_reply(c, &rp, ret_buf, ret_len);
	control_reply_fini(&rp);
	return r;
}

static const struct control_transport_ops transport_ops = {
	.request = control_on_request,
	.closed = control_on_closed,
	.refusal = control_on_refusal,
};

/* ---- public ----------------------------------------------------------- */

size_t control_waiting(const struct control *c)
{
	return c ? c->n_parked : 0;
}

size_t control_pending(const struct control *c)
{
	return c ? c->n_async : 0;
}

void control_notify(struct control *c)
{
	if (!c)
		return;
	if (c->busy) {
		/* inside one of our handlers (an op called us): c->pbuf may be in
		 * use; run once the handler is done */
		c->notify_pending = true;
		return;
	}
	if (c->n_parked == 0)
		return;
	c->busy = true;
	/* a notify from inside our own plugins() call is re-checked once, not
	 * forever (a daemon may notify on every call) */
	for (int pass = 0; pass < 2; pass++) {
		struct request *rq, *next;
		size_t n;
		c->notify_pending = false;
		if (control_fetch_plugins(c, &n) < 0)
			break;
		for (rq = c->requests; rq; rq = next) {
			const struct control_plugin *p;
			struct control_reply rp;
			next = rq->next; /* rq may be freed below */
			if (rq->state != R_PARKED)
				continue;
			p = control_find_plugin(c, n, rq->name);
			if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER) {
				control_reply_init(&rp);
				if (control_switchover_answer(rq, p, &rp))
					control_request_unpark(c, rq, &rp);
				control_reply_fini(&rp);
				continue;
			}
			if (rq->kind == LEASEHOLD__CONTROL__KIND__KIND_RECONCILE) {
				control_reply_init(&rp);
				if (control_reconcile_answer(rq, p, &rp))
					control_request_unpark(c, rq, &rp);
				control_reply_fini(&rp);
				continue;
			}
			if (p && !p->ready)
				continue;
			control_reply_init(&rp);
			if (!p)
				control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND,
					    "plugin '%s' went away", rq->name);
			else if (control_reply_plugins(&rp, p, 1) < 0)
				control_reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL,
					    "out of memory");
			control_request_unpark(c, rq, &rp);
			control_reply_fini(&rp);
		}
		if (!c->notify_pending || c->n_parked == 0)
			break;
	}
	c->busy = false;
	c->notify_pending = false;
}

int control_new(struct loop *l, const char *url, const struct control_ops *ops, void *ud,
		struct control **ret, char *err, size_t err_len)
{
	struct control_transport_config cfg = {
	    .max_request = CONTROL_MAX_REQUEST,
	    .max_wire = CONTROL_MAX_WIRE,
	};
	char path[PATH_MAX];
	struct control *c;
	int r;

	if (!l || !url || !ops || !ops->plugins || !ret) {
		snprintf(err, err_len, "control: invalid arguments");
		return -EINVAL;
	}
	r = control_wire_path(url, path, sizeof(path));
	if (r < 0) {
		snprintf(err, err_len,
			 r == -ENAMETOOLONG ? "control socket path too long: '%s'"
					    : "control socket must be ipc:///path or /path, not '%s'",
			 url);
		return r;
	}
	cfg.path = path;
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	c->loop = l;
	c->ops = ops;
	c->ud = ud;
	r = control_transport_new(l, &cfg, &transport_ops, c, &c->transport, err, err_len);
	if (r < 0) {
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void control_free(struct control *c)
{
	if (!c)
		return;
	while (c->requests)
		control_request_free(c->requests);
	control_transport_free(c->transport);
	free(c->pbuf);
	free(c->mbuf);
	free(c->rbuf);
	free(c);
}

const char *control_default_url(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n = -1;

	if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "ipc://%s/leasehold.sock", xdg);
	if (n < 0 || (size_t)n >= len)
		snprintf(buf, len, "ipc:///run/leasehold/control.sock");
	return buf;
}

const char *control_url_resolve(const char *flag, const char *from_file, char *buf, size_t len)
{
	const char *env = getenv("LEASEHOLD_CONTROL");

	if (flag)
		return flag;
	if (env && *env)
		return env;
	if (from_file)
		return from_file;
	return control_default_url(buf, len);
}
