/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer_switchover.c - `leaseholdctl --etcd URL switchover NAME`:
 * request a switchover and wait for its outcome straight from etcd, with
 * the answers the daemon gives (control.c), so that ctl_switchover_result
 * prints both alike.
 *
 * Design notes
 * - The request is written by switchover_request_start, the daemon's own
 *   function, on the observer's etcd client: the same checks, the same
 *   record, the same refusals.
 * - The plugin's role is unknown here (no .so on this machine, and no
 *   record in etcd names it), so the request names none: a target lacking
 *   the role is then refused as "does not campaign" (a node without the
 *   role takes no part in the election), not as "lacks role".
 * - The outcome: the request record P/N/handover goes when the request ends
 *   (the new leader deletes it once it leads; else its lease ends at the
 *   timeout). A watch of that key from the request's revision on sees that
 *   end; then the leader (the lowest live election key, ctl_cluster_view.c) is
 *   read, and the switchover happened when it is the target (with --to) or
 *   another node than the one asked to hand over (without), as the daemon
 *   decides it (control.c control_switchover_answer).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "control/control_codec.h"
#include "ctl/ctl_observer_internal.h"
#include "election/election_switchover_request.h"

struct requested {
	bool done;
	int err;
	char msg[512];
	int64_t rev;
	char from[CONTROL_NODE_MAX + 1];
};

static void ctl_observer_switchover_on_requested(void *ud, int err, const char *msg, int64_t rev, const char *from)
{
	struct requested *q = ud;
	q->done = true;
	q->err = err;
	q->rev = rev;
	snprintf(q->msg, sizeof(q->msg), "%s", msg ? msg : "");
	snprintf(q->from, sizeof(q->from), "%s", from ? from : "");
}

struct ended {
	bool done;
	int err;
};

static void ctl_observer_switchover_on_handover(struct etcd_watch *w, int err, int64_t revision,
                        const struct etcd_event *ev, size_t n, void *ud)
{
	(void)w;
	(void)revision;
	struct ended *e = ud;
	if (err < 0) {
		e->err = err;
		e->done = true;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (ev[i].type == ETCD_EVENT_DELETE)
			e->done = true;
}

int ctl_observer_switchover(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                            uint64_t deadline, Response **ret_resp)
{
	struct cluster_view *v = NULL;
	char msg[700];
	const char *to = req->node && req->node[0] ? req->node : NULL;
	int r = ctl_observer_require_plugin(ob, req->name, deadline, &v, ret_resp);
	if (r != EXIT_OK)
		return *ret_resp ? EXIT_OK : r;
	cluster_view_free(v);

	struct switchover_request rq = {.prefix = ob->prefix, .name = req->name,
	                                .requester = ob->by, .to = to,
	                                .timeout_ms = req->timeout_ms};
	struct requested q = {0};
	r = switchover_request_start(ob->etcd, &rq, ctl_observer_switchover_on_requested, &q);
	if (r == -EINVAL) {
		snprintf(msg, sizeof(msg), "invalid switchover: the timeout must be %u to %u ms",
		         SWITCHOVER_TIMEOUT_MIN_MS, SWITCHOVER_TIMEOUT_MAX_MS);
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, msg, ret_resp);
	}
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	if (loop_run_until(ob->loop, &q.done, deadline) < 0 || !q.done)
		return ctl_observer_etcd_failed(-ETIMEDOUT);
	if (q.err < 0) {
		/* refused on the state read, with the daemon's codes */
		bool refused = q.err == -EBUSY || q.err == -EALREADY || q.err == -ESRCH ||
		               q.err == -EAGAIN || q.err == -ECHILD;
		return ctl_observer_refuse(refused ? LEASEHOLD__CONTROL__CODE__CODE_BUSY
		                                   : LEASEHOLD__CONTROL__CODE__CODE_FAILED,
		                           q.msg[0] ? q.msg : etcd_strerror(q.err), ret_resp);
	}

	/* wait for the request's end: at most its timeout plus 2 s (as the
	 * daemon waits), within the command's own deadline */
	char key[512];
	int kl = snprintf(key, sizeof(key), "%s/%s/%s", ob->prefix, req->name, SWITCHOVER_KEY);
	struct ended e = {0};
	struct etcd_watch *watch = NULL;
	r = etcd_watch_start(ob->etcd, key, (size_t)kl, NULL, 0, q.rev + 1, 0, ctl_observer_switchover_on_handover, &e,
	                     &watch);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	uint64_t until = loop_now() + ((uint64_t)req->timeout_ms + 2000) * LOOP_NS_PER_MS;
	bool ended = loop_run_until(ob->loop, &e.done, until < deadline ? until : deadline) == 0 &&
	             e.done;
	etcd_watch_cancel(watch);
	if (ended && e.err < 0)
		return ctl_observer_etcd_failed(e.err);

	/* the leader now (a fresh read: the answer names who leads) */
	r = ctl_observer_require_plugin(ob, req->name, deadline, &v, ret_resp);
	if (r != EXIT_OK)
		return *ret_resp ? EXIT_OK : r;
	const char *leader = v->plugin.leader && v->plugin.leader[0] ? v->plugin.leader : NULL;
	bool done = ended && leader && (to ? strcmp(leader, to) == 0 : strcmp(leader, q.from) != 0);
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK, .revision = q.rev,
	                           .leader = leader};
	if (!ended) {
		snprintf(msg, sizeof(msg),
		         "the switchover of plugin '%s' did not complete within %" PRIu32
		         " ms (leader now: %s)",
		         req->name, req->timeout_ms, leader ? leader : "unknown");
		a.code = LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT;
		a.message = msg;
	} else if (!done) {
		snprintf(msg, sizeof(msg),
		         "the switchover of plugin '%s' ended without %s%s taking over (leader "
		         "now: %s)",
		         req->name, to ? "node " : "another node", to ? to : "",
		         leader ? leader : "none");
		a.code = LEASEHOLD__CONTROL__CODE__CODE_FAILED;
		a.message = msg;
	}
	r = ctl_observer_answer(&a, ret_resp);
	cluster_view_free(v);
	return r;
}
