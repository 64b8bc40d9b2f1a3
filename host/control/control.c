/* SPDX-License-Identifier: MIT */
/*
 * control.c - the control socket server (see control.h): a request's way
 * from the transport through the decoder to its verb, and its answer, now
 * or later (the requests kept, their deadlines, control_notify).
 *
 * Design notes
 * - The socket, its connections, peers, framing and deadlines are
 *   control_transport.c's; the replies are built in control_reply.c; this
 *   file decodes requests and dispatches them to the verbs, which ask the
 *   daemon through control_ops: control_verbs.c (answered at once),
 *   control_writes.c (operator record writes, answered at the op's done())
 *   and control_deferred.c (reconcile, history, switchover, shadow,
 *   configuration: answered at done(), some parked after it). They share
 *   struct control and struct request through control_internal.h.
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
#include "control/control_internal.h"
#include "control/control_reply.h"
#include "control/control_transport.h"
#include "control/control_wire.h"
#include "base/log.h"

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
void control_send_reply(struct control *c, struct control_conn *conn, struct control_reply *rp)
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

/* ---- requests answered later ------------------------------------------ */

static void control_request_timer_cb(struct loop_timer *t, void *userdata);

/* control_request_new - a request kept on conn (state set by the caller). */
struct request *control_request_new(struct control *c, struct control_conn *conn)
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
void control_request_free(struct request *rq)
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
void control_run_deferred_notify(struct control *c)
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
