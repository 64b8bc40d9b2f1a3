/* SPDX-License-Identifier: MIT */
/*
 * control_writes.c - the operator's record writes (roles set and clear,
 * members forget, pause and resume, release pin and unpin): started through
 * the daemon's async ops and answered when their done() arrives, or at once
 * when the op refuses or completes before it returns (see control.c).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/control_internal.h"
#include "base/log.h"

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
bool control_do_async(struct control *c, struct control_conn *conn, struct control_reply *rp,
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
