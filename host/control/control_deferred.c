/* SPDX-License-Identifier: MIT */
/*
 * control_deferred.c - the verbs the daemon answers later, through a done
 * callback: a history read, a configuration read or write and a shadow run
 * are answered at done(); a reconcile or switchover request is parked after
 * its done() until control_notify() sees it served or its deadline passes
 * (see control.c).
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "control/control_internal.h"
#include "base/log.h"

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
bool control_reconcile_answer(const struct request *rq, const struct control_plugin *p,
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
bool control_switchover_answer(const struct request *rq, const struct control_plugin *p,
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
bool control_do_verb(struct control *c, struct control_conn *conn, struct control_reply *rp,
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
bool control_do_shadow(struct control *c, struct control_conn *conn,
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
bool control_do_config(struct control *c, struct control_conn *conn, struct control_reply *rp,
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
