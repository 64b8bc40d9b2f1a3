/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer_pin.c - `leaseholdctl --etcd URL release pin|unpin NAME`:
 * the daemon's own pin request (election_pin_request.h) on the observer's
 * etcd client, so that the checks, the record and the refusals are the
 * daemon's (control.c answers the same codes: a refusal CODE_BUSY, exit 2;
 * a failed write CODE_FAILED, exit 1; a forced pin's warning in the
 * message of an OK answer).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control/control_codec.h"
#include "ctl/ctl_observer_internal.h"
#include "election/election_pin_request.h"

struct pinned {
	bool done;
	int err;
	char msg[600];
};

static void ctl_observer_pin_on_done(void *ud, int err, const char *msg, const char *warning,
                                     int64_t rev)
{
	struct pinned *q = ud;
	(void)rev;
	q->done = true;
	q->err = err;
	snprintf(q->msg, sizeof(q->msg), "%s", err < 0 ? (msg ? msg : "") : (warning ? warning : ""));
}

int ctl_observer_pin(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                     uint64_t deadline, Response **ret_resp)
{
	struct pin_request rq = {.prefix = ob->prefix, .name = req->name, .requester = ob->by,
	                         .unpin = req->kind == LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN,
	                         .force = req->force};
	if (!rq.unpin && release_parse(req->version, &rq.release) < 0)
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST,
		                           "invalid release to pin (major.minor.patch)", ret_resp);
	struct pinned q = {0};
	int r = pin_request_start(ob->etcd, &rq, ctl_observer_pin_on_done, &q);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	if (loop_run_until(ob->loop, &q.done, deadline) < 0 || !q.done)
		return ctl_observer_etcd_failed(-ETIMEDOUT);
	if (q.err < 0) {
		bool refused = q.err == -EBUSY || q.err == -ESRCH || q.err == -ERANGE ||
		               q.err == -ENOENT;
		return ctl_observer_refuse(refused ? LEASEHOLD__CONTROL__CODE__CODE_BUSY
		                                   : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
		                           q.msg[0] ? q.msg : etcd_strerror(q.err), ret_resp);
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK,
	                           .message = q.msg[0] ? q.msg : NULL};
	return ctl_observer_answer(&a, ret_resp);
}
