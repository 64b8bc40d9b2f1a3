/*
 * control.c - the control socket server (see control.h).
 *
 * Design notes
 * - nng rep0 with contexts: each `worker` owns one nng_ctx and one aio and
 *   carries one request at a time. The aio callback runs on an nng thread and
 *   does exactly one thing: it appends the worker to a mutex-protected
 *   completion queue and wakes the loop through an eventfd. Everything else
 *   (decoding, control_ops calls, starting the next nng operation, timers)
 *   happens on the loop thread, so the daemon's data is only read there.
 * - A worker is in one of these states: RECV (a receive is posted), SEND (a
 *   reply is being sent), PARKED (a wait-ready request waits for
 *   control_notify() or its deadline timer), ASYNC (a roles_set/roles_clear
 *   op runs in the daemon and the worker waits for its done() call) or RETRY
 *   (a failed receive waits for its timer). PARKED and ASYNC post no nng
 *   operation. An operation completes exactly once, and the next one is only
 *   started after the loop has taken the worker off the queue, so a worker is
 *   never queued twice.
 * - CONTROL_RECEIVERS workers that are neither parked nor async are kept;
 *   parking one creates another, so pending long polls and slow etcd writes
 *   never stop the socket from serving. Workers above that number are freed
 *   after their reply is sent.
 * - Async ops: done_ctx is the worker itself. It stays ASYNC (nothing else
 *   touches it) until done() runs; done() then builds and sends the reply on
 *   the loop thread. A done() that arrives while the op is still running (the
 *   op completed synchronously) is stashed and answered when the op returns.
 *   control_free frees ASYNC workers like any other, and the daemon must not
 *   call done() after control_free (see control.h): its writes complete
 *   through etcd callbacks, which never run after etcd_client_free, and the
 *   daemon frees the control server first and runs no loop iteration between
 *   the two.
 * - Peers: a pipe whose peer uid is neither root nor our euid is closed in the
 *   NNG_PIPE_EV_ADD_PRE callback, and every request's pipe is checked again
 *   before it is decoded. The socket file is created 0600 by the listener
 *   (NNG_OPT_IPC_PERMISSIONS is applied between bind() and listen(), so no
 *   connection can be accepted with a wider mode) and chmod'ed again after.
 * - Shutdown: `closing` is set under the mutex (callbacks stop queueing),
 *   the socket is closed (posted operations fail), every aio is freed (which
 *   waits for a running callback), and only then the eventfd is closed.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "control.h"
#include "control_codec.h"
#include "log.h"

#define COMP "control"
/* workers kept receiving (not parked) */
#define CONTROL_RECEIVERS 4
/* wait-ready requests parked at most at once; more get CODE_BUSY */
#define CONTROL_MAX_PARKED 256
/* roles_set/roles_clear requests waiting for done() at most at once; more
 * get CODE_BUSY */
#define CONTROL_MAX_ASYNC 64
/* delay before re-posting a receive that failed (out of memory etc.) */
#define CONTROL_RETRY_NS (100 * LOOP_NS_PER_MS)

enum worker_state { W_RECV, W_SEND, W_PARKED, W_ASYNC, W_RETRY };

struct worker {
	struct control *c;
	nng_ctx ctx;
	nng_aio *aio;
	enum worker_state state;
	struct worker *next_done;	 /* completion queue (under c->mtx) */
	struct worker *prev, *next;	 /* c->workers (loop thread) */
	struct loop_timer *timer;	 /* wait-ready deadline / receive retry */
	uint32_t timeout_ms;		 /* parked: as asked */
	char name[CONTROL_NAME_MAX + 1]; /* parked: plugin; async: node id */
	/* async (roles_set / roles_clear) */
	bool clear;	 /* roles_clear, else roles_set */
	bool in_op;	 /* the op has not returned yet */
	bool early_done; /* done() ran while in_op: the result below */
	int early_err;
	char early_msg[256];
};

struct control {
	struct loop *loop;
	const struct control_ops *ops;
	void *ud;
	uid_t euid;
	nng_socket sock;
	bool sock_open;
	nng_listener listener;
	int efd;
	struct loop_io *io;

	pthread_mutex_t mtx;
	struct worker *done_head, *done_tail; /* under mtx */
	bool closing;			      /* under mtx */

	/* loop thread only */
	struct worker *workers;
	size_t n_active; /* workers neither parked nor async */
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

/* ---- replies ---------------------------------------------------------- */

/* Storage for one Plugin message and its sub-messages. */
struct pb_plugin {
	Leasehold__Control__Plugin p;
	Leasehold__Control__Release rel, min, max, sver, smcr;
	Leasehold__Control__Releases rs;
	Leasehold__Control__Status st;
	Leasehold__Control__Reconcile rc;
};

/* A reply under construction; strings are borrowed from the ops (valid until
 * we return to the loop) or owned copies listed in `owned`. */
struct reply {
	Leasehold__Control__Response r;
	struct pb_plugin *plugins;
	Leasehold__Control__Plugin **pp;
	Leasehold__Control__Member *members;
	Leasehold__Control__Release *mrel;
	Leasehold__Control__Member **mp;
	Leasehold__Control__RoleEntry *roles;
	Leasehold__Control__RoleEntry **rolep;
	char **rstr; /* every entry's role names, one flat array */
	char *owned[16];
	size_t n_owned;
	char msg[512];
};

static void reply_init(struct reply *rp)
{
	memset(rp, 0, sizeof(*rp));
	leasehold__control__response__init(&rp->r);
}

static void reply_fini(struct reply *rp)
{
	free(rp->plugins);
	free(rp->pp);
	free(rp->members);
	free(rp->mrel);
	free(rp->mp);
	free(rp->roles);
	free(rp->rolep);
	free(rp->rstr);
	for (size_t i = 0; i < rp->n_owned; i++)
		free(rp->owned[i]);
}

/* pb_str - a string for the wire: "" for NULL, cut to CONTROL_STRING_MAX. */
static char *pb_str(struct reply *rp, const char *s)
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

static void pb_release(Leasehold__Control__Release *m, struct release r)
{
	leasehold__control__release__init(m);
	m->major = r.major;
	m->minor = r.minor;
	m->patch = r.patch;
}

static void reply_error(struct reply *rp, Leasehold__Control__Code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_error(struct reply *rp, Leasehold__Control__Code code, const char *fmt, ...)
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

/* reply_plugins - put n plugins into the reply. Returns 0 or -ENOMEM. */
static int reply_plugins(struct reply *rp, const struct control_plugin *src, size_t n)
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
		d->p.name = pb_str(rp, s->name);
		d->p.file = pb_str(rp, s->file);
		if (s->has_release) {
			pb_release(&d->rel, s->release);
			d->p.release = &d->rel;
		}
		d->p.state = pb_str(rp, s->state);
		d->p.leader = pb_str(rp, s->leader);
		d->p.ready = s->ready;
		leasehold__control__releases__init(&d->rs);
		if (s->releases.n_members > 0) {
			pb_release(&d->min, s->releases.min);
			pb_release(&d->max, s->releases.max);
			d->rs.min = &d->min;
			d->rs.max = &d->max;
		}
		d->rs.revision = s->releases.revision;
		d->rs.members = s->releases.n_members;
		d->p.releases = &d->rs;
		if (s->status_present) {
			leasehold__control__status__init(&d->st);
			d->st.state = pb_str(rp, s->status_state);
			pb_release(&d->sver, s->status_version);
			pb_release(&d->smcr, s->status_min_compatible);
			d->st.version = &d->sver;
			d->st.minimum_compatible_release = &d->smcr;
			d->p.status = &d->st;
		}
		leasehold__control__reconcile__init(&d->rc);
		d->rc.count = s->reconcile_count;
		d->rc.last_ok = s->reconcile_last_ok;
		d->rc.last_error = pb_str(rp, s->reconcile_last_error);
		d->rc.last_at = s->reconcile_last_at;
		d->p.reconcile = &d->rc;
		d->p.error = pb_str(rp, s->error);
		d->p.held_back = pb_str(rp, s->held_back);
		d->p.fencing_token = s->fencing_token;
		d->p.callback = pb_str(rp, s->callback);
		d->p.callback_ms = s->callback_ms;
		rp->pp[i] = &d->p;
	}
	rp->r.plugins = rp->pp;
	rp->r.n_plugins = n;
	return 0;
}

static int reply_members(struct reply *rp, const struct control_member *src, size_t n)
{
	if (n == 0)
		return 0;
	rp->members = calloc(n, sizeof(*rp->members));
	rp->mrel = calloc(n, sizeof(*rp->mrel));
	rp->mp = calloc(n, sizeof(*rp->mp));
	if (!rp->members || !rp->mrel || !rp->mp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		leasehold__control__member__init(&rp->members[i]);
		rp->members[i].node = pb_str(rp, src[i].node_id);
		pb_release(&rp->mrel[i], src[i].release);
		rp->members[i].release = &rp->mrel[i];
		rp->members[i].leader = src[i].leader;
		rp->mp[i] = &rp->members[i];
	}
	rp->r.members = rp->mp;
	rp->r.n_members = n;
	return 0;
}

/* role_names - does entry e carry role names on the wire? Not when it has
 * an error (its roles are then empty by definition). */
static bool role_names(const struct control_role_entry *e)
{
	return e->node_id && e->roles && !(e->error && e->error[0]);
}

/* reply_roles - put n role entries into the reply (entries without a node
 * id, i.e. not filled in by the op, are skipped). Returns 0 or -ENOMEM. */
static int reply_roles(struct reply *rp, const struct control_role_entry *src, size_t n)
{
	size_t total = 0, k = 0, out = 0;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (role_names(&src[i]))
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
		d->node = pb_str(rp, src[i].node_id);
		d->error = pb_str(rp, src[i].error);
		d->roles = &rp->rstr[k];
		if (role_names(&src[i])) {
			for (size_t j = 0; j < src[i].n_roles; j++)
				rp->rstr[k++] = pb_str(rp, src[i].roles[j]);
			d->n_roles = src[i].n_roles;
		}
		rp->rolep[out++] = d;
	}
	rp->r.roles = rp->rolep;
	rp->r.n_roles = out;
	return 0;
}

/* ---- workers ---------------------------------------------------------- */

static void worker_cb(void *arg)
{
	struct worker *w = arg;
	struct control *c = w->c;
	bool wake = false;

	pthread_mutex_lock(&c->mtx);
	if (!c->closing) {
		w->next_done = NULL;
		if (c->done_tail)
			c->done_tail->next_done = w;
		else
			c->done_head = w;
		c->done_tail = w;
		wake = true;
	}
	pthread_mutex_unlock(&c->mtx);
	if (wake) {
		uint64_t one = 1;
		ssize_t n = write(c->efd, &one, sizeof(one));
		(void)n; /* EAGAIN: the counter is already non-zero */
	}
}

static void worker_timer_cb(struct loop_timer *t, void *userdata);

/* worker_free - stop and free one worker (loop thread, no callback pending
 * or the socket already closed). */
static void worker_free(struct worker *w)
{
	struct control *c;
	nng_msg *m;

	if (!w)
		return;
	c = w->c;
	if (w->aio) {
		nng_aio_stop(w->aio);
		m = nng_aio_get_msg(w->aio);
		if (m)
			nng_msg_free(m);
		nng_aio_free(w->aio);
	}
	if (c->sock_open)
		nng_ctx_close(w->ctx);
	loop_timer_free(w->timer);
	if (w->prev)
		w->prev->next = w->next;
	else if (c->workers == w)
		c->workers = w->next;
	if (w->next)
		w->next->prev = w->prev;
	free(w);
}

/* worker_new - a worker with an open context, linked but idle. 0/-errno. */
static int worker_new(struct control *c, struct worker **ret)
{
	struct worker *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->c = c;
	if (nng_ctx_open(&w->ctx, c->sock) != 0) {
		free(w);
		return -ENOMEM;
	}
	if (nng_aio_alloc(&w->aio, worker_cb, w) != 0) {
		nng_ctx_close(w->ctx);
		free(w);
		return -ENOMEM;
	}
	r = loop_timer_new(c->loop, worker_timer_cb, w, &w->timer);
	if (r < 0) {
		nng_aio_free(w->aio);
		nng_ctx_close(w->ctx);
		free(w);
		return r;
	}
	w->next = c->workers;
	if (c->workers)
		c->workers->prev = w;
	c->workers = w;
	*ret = w;
	return 0;
}

static void worker_recv(struct worker *w)
{
	w->state = W_RECV;
	nng_ctx_recv(w->ctx, w->aio);
}

/* ensure_receivers - keep CONTROL_RECEIVERS workers that are not parked. */
static void ensure_receivers(struct control *c)
{
	while (c->n_active < CONTROL_RECEIVERS) {
		struct worker *w;
		if (worker_new(c, &w) < 0) {
			log_warn(COMP, "cannot add a control context: out of memory");
			return;
		}
		c->n_active++;
		worker_recv(w);
	}
}

/* worker_send - pack the reply and send it on the worker's context. */
static void worker_send(struct control *c, struct worker *w, struct reply *rp)
{
	const char *node = c->ops->node_id ? c->ops->node_id(c->ud) : NULL;
	nng_msg *m;
	size_t len;

	rp->r.protocol = CONTROL_PROTOCOL;
	rp->r.node = pb_str(rp, node);
	rp->r.daemon_version = (char *)PACKAGE_VERSION;
	if (!rp->r.message)
		rp->r.message = (char *)"";
	len = leasehold__control__response__get_packed_size(&rp->r);
	if (nng_msg_alloc(&m, len) != 0) {
		/* no memory for the answer: drop it, the client times out */
		log_warn(COMP, "cannot answer a control request: out of memory");
		worker_recv(w);
		return;
	}
	leasehold__control__response__pack(&rp->r, nng_msg_body(m));
	nng_aio_set_msg(w->aio, m);
	w->state = W_SEND;
	nng_ctx_send(w->ctx, w->aio);
}

/* ---- requests --------------------------------------------------------- */

/* fetch_plugins - ask the daemon for all plugins into c->pbuf. 0/-ENOMEM. */
static int fetch_plugins(struct control *c, size_t *ret_n)
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

static const struct control_plugin *find_plugin(const struct control *c, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (c->pbuf[i].name && strcmp(c->pbuf[i].name, name) == 0)
			return &c->pbuf[i];
	return NULL;
}

static bool uid_allowed(uid_t self, uint64_t uid)
{
	return uid == 0 || uid == (uint64_t)self;
}

static void do_plugins(struct control *c, struct reply *rp)
{
	size_t n;
	if (fetch_plugins(c, &n) < 0 || reply_plugins(rp, c->pbuf, n) < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

static void do_status(struct control *c, struct reply *rp, const char *name)
{
	const struct control_plugin *p;
	size_t n;
	if (fetch_plugins(c, &n) < 0) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return;
	}
	p = find_plugin(c, n, name);
	if (!p)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (reply_plugins(rp, p, 1) < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

static void do_members(struct control *c, struct reply *rp, const char *name)
{
	size_t total = 0;
	int r = -ENOTSUP;

	if (!c->ops->members) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "members are not available");
		return;
	}
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
	if (r == -ENOENT)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (r < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "members: %s", strerror(-r));
	else if (reply_members(rp, c->mbuf, total) < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

static void do_reload(struct control *c, struct reply *rp, const char *name)
{
	char err[256] = "";
	int r;

	if (!c->ops->reload) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "reload is not available");
		return;
	}
	r = c->ops->reload(c->ud, name[0] ? name : NULL, err, sizeof(err));
	if (r == -ENOENT)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
	else if (r < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED, "%s",
			    err[0] ? err : strerror(-r));
}

/* do_wait_ready - answer now (ready, unknown, timeout 0) or park the worker.
 * Returns true when parked (no reply to send now). */
static bool do_wait_ready(struct control *c, struct worker *w, struct reply *rp, const char *name,
			  uint32_t timeout_ms)
{
	const struct control_plugin *p;
	size_t n;

	if (fetch_plugins(c, &n) < 0) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	p = find_plugin(c, n, name);
	if (!p) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, "no plugin named '%s'",
			    name);
		return false;
	}
	if (p->ready) {
		if (reply_plugins(rp, p, 1) < 0)
			reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
		return false;
	}
	if (timeout_ms == 0) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT, "plugin '%s' is not ready",
			    name);
		return false;
	}
	if (c->n_parked >= CONTROL_MAX_PARKED) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY, "too many waiting requests");
		return false;
	}
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->timeout_ms = timeout_ms;
	w->state = W_PARKED;
	c->n_active--;
	c->n_parked++;
	loop_timer_arm_in(w->timer, (uint64_t)timeout_ms * LOOP_NS_PER_MS);
	ensure_receivers(c);
	return true;
}

static void run_deferred_notify(struct control *c);

/* fetch_roles - ask the daemon for every roles record into c->rbuf.
 * 0/-ENOMEM/-EAGAIN. */
static int fetch_roles(struct control *c, size_t *ret_n)
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

static void reply_not_supported(struct reply *rp)
{
	reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
		    "roles are not supported by this daemon");
}

static void do_roles_list(struct control *c, struct reply *rp)
{
	size_t n;

	if (!c->ops->roles_list) {
		reply_not_supported(rp);
		return;
	}
	if (fetch_roles(c, &n) < 0 || reply_roles(rp, c->rbuf, n) < 0)
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL, "out of memory");
}

/* async_result - the reply to a finished roles_set/roles_clear of w. */
static void async_result(const struct worker *w, struct reply *rp, int err, const char *msg)
{
	if (err == 0)
		return; /* CODE_OK, nothing else */
	reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
		    "cannot %s the roles of node '%s': %s", w->clear ? "clear" : "set", w->name,
		    msg && msg[0] ? msg : strerror(err < 0 ? -err : EIO));
}

/* async_end - w leaves the ASYNC state (it is about to send its reply). */
static void async_end(struct control *c, struct worker *w)
{
	w->state = W_RECV; /* worker_send sets SEND; never left ASYNC by accident */
	c->n_async--;
	c->n_active++;
}

/* roles_done - the control_done_fn handed to roles_set/roles_clear;
 * done_ctx is the worker (loop thread). */
static void roles_done(void *done_ctx, int err, const char *msg)
{
	struct worker *w = done_ctx;
	struct control *c = w->c;
	struct reply rp;
	bool was_busy;

	if (w->state != W_ASYNC || w->early_done) {
		log_warn(COMP, "a roles operation reported its completion twice (ignored)");
		return;
	}
	if (w->in_op) {
		/* completed before the op returned: answer when it does */
		w->early_done = true;
		w->early_err = err;
		snprintf(w->early_msg, sizeof(w->early_msg), "%s", msg ? msg : "");
		return;
	}
	was_busy = c->busy;
	c->busy = true;
	reply_init(&rp);
	async_result(w, &rp, err, msg);
	async_end(c, w);
	worker_send(c, w, &rp);
	reply_fini(&rp);
	if (!was_busy)
		run_deferred_notify(c);
}

/* do_roles_write - start a ROLES_SET/ROLES_CLEAR (the decoder validated
 * node and roles). Returns true when the worker now waits for done() (no
 * reply to send now); false with the reply in rp. */
static bool do_roles_write(struct control *c, struct worker *w, struct reply *rp,
			   const Leasehold__Control__Request *req)
{
	bool clear = req->kind == LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR;
	char err[256] = "";
	int r;

	if (clear ? !c->ops->roles_clear : !c->ops->roles_set) {
		reply_not_supported(rp);
		return false;
	}
	if (c->n_async >= CONTROL_MAX_ASYNC) {
		reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BUSY,
			    "too many roles requests in progress");
		return false;
	}
	snprintf(w->name, sizeof(w->name), "%s", req->node);
	w->clear = clear;
	w->early_done = false;
	w->in_op = true;
	w->state = W_ASYNC;
	c->n_active--;
	c->n_async++;
	if (clear)
		r = c->ops->roles_clear(c->ud, req->node, roles_done, w, err, sizeof(err));
	else
		r = c->ops->roles_set(c->ud, req->node, (const char *const *)req->roles,
				      req->n_roles, roles_done, w, err, sizeof(err));
	w->in_op = false;
	err[sizeof(err) - 1] = '\0';
	if (r < 0) {
		/* done() never runs (a stashed early one is ignored) */
		async_end(c, w);
		if (r == -EINVAL)
			reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, "%s",
				    err[0] ? err : "invalid node id or role name");
		else
			reply_error(rp, LEASEHOLD__CONTROL__CODE__CODE_FAILED,
				    "cannot %s the roles of node '%s': %s", clear ? "clear" : "set",
				    w->name, err[0] ? err : strerror(-r));
		return false;
	}
	if (w->early_done) {
		async_end(c, w);
		async_result(w, rp, w->early_err, w->early_msg);
		return false;
	}
	ensure_receivers(c);
	return true;
}

/* handle_request - decode, check, dispatch and answer one request; consumes m. */
static void handle_request(struct control *c, struct worker *w, nng_msg *m)
{
	Leasehold__Control__Request *req = NULL;
	struct reply rp;
	const char *why;
	uint64_t uid;
	int r;

	if (nng_pipe_get_uint64(nng_msg_get_pipe(m), NNG_OPT_IPC_PEER_UID, &uid) != 0 ||
	    !uid_allowed(c->euid, uid)) {
		/* the peer is gone or not allowed: no answer */
		nng_msg_free(m);
		worker_recv(w);
		return;
	}

	reply_init(&rp);
	r = control_codec_request_decode(nng_msg_body(m), nng_msg_len(m), &req, &why);
	nng_msg_free(m);
	if (r == -EMSGSIZE)
		reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TOO_LARGE, "%s", why);
	else if (r == -EPROTONOSUPPORT)
		reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND, "%s", why);
	else if (r < 0)
		reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, "%s", why);
	else {
		switch (req->kind) {
		case LEASEHOLD__CONTROL__KIND__KIND_PLUGINS:
			do_plugins(c, &rp);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_STATUS:
			do_status(c, &rp, req->name);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS:
			do_members(c, &rp, req->name);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY:
			if (do_wait_ready(c, w, &rp, req->name, req->timeout_ms))
				goto done; /* parked: answered later */
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_RELOAD:
			do_reload(c, &rp, req->name);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_VERSION:
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST:
			do_roles_list(c, &rp);
			break;
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET:
		case LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR:
			if (do_roles_write(c, w, &rp, req))
				goto done; /* answered by roles_done */
			break;
		default: /* excluded by the decoder */
			reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND,
				    "unknown request kind");
			break;
		}
	}
	worker_send(c, w, &rp);
done:
	reply_fini(&rp);
	if (req)
		leasehold__control__request__free_unpacked(req, NULL);
}

/* worker_unpark - a parked worker gets its answer and becomes active again. */
static void worker_unpark(struct control *c, struct worker *w, struct reply *rp)
{
	loop_timer_disarm(w->timer);
	c->n_parked--;
	c->n_active++;
	worker_send(c, w, rp);
}

/* run_deferred_notify - leave the busy section; run a control_notify()
 * that came in meanwhile (e.g. from inside an op). */
static void run_deferred_notify(struct control *c)
{
	c->busy = false;
	if (c->notify_pending) {
		c->notify_pending = false;
		control_notify(c);
	}
}

static void worker_timer_cb(struct loop_timer *t, void *userdata)
{
	struct worker *w = userdata;
	struct control *c = w->c;
	struct reply rp;

	(void)t;
	if (w->state == W_RETRY) {
		worker_recv(w);
		return;
	}
	if (w->state != W_PARKED)
		return;
	c->busy = true;
	reply_init(&rp);
	reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT,
		    "plugin '%s' not ready after %" PRIu32 " ms", w->name, w->timeout_ms);
	worker_unpark(c, w, &rp);
	reply_fini(&rp);
	run_deferred_notify(c);
}

/* worker_done - an nng operation of w completed (loop thread). */
static void worker_done(struct control *c, struct worker *w)
{
	int rv = nng_aio_result(w->aio);
	nng_msg *m;

	switch (w->state) {
	case W_RECV:
		if (rv != 0) {
			log_warn(COMP, "control receive failed: %s", nng_strerror(rv));
			w->state = W_RETRY;
			loop_timer_arm_in(w->timer, CONTROL_RETRY_NS);
			return;
		}
		m = nng_aio_get_msg(w->aio);
		nng_aio_set_msg(w->aio, NULL);
		handle_request(c, w, m);
		return;
	case W_SEND:
		if (rv != 0) {
			/* the client went away: the reply stays ours */
			m = nng_aio_get_msg(w->aio);
			nng_aio_set_msg(w->aio, NULL);
			if (m)
				nng_msg_free(m);
		}
		if (c->n_active > CONTROL_RECEIVERS) {
			c->n_active--;
			worker_free(w);
		} else {
			worker_recv(w);
		}
		return;
	case W_PARKED:
	case W_ASYNC:
	case W_RETRY:
		return; /* no operation was posted */
	}
}

static void on_eventfd(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct control *c = userdata;
	struct worker *head;
	uint64_t v;
	ssize_t n;

	(void)io;
	(void)events;
	n = read(fd, &v, sizeof(v));
	(void)n;
	pthread_mutex_lock(&c->mtx);
	head = c->done_head;
	c->done_head = c->done_tail = NULL;
	pthread_mutex_unlock(&c->mtx);
	c->busy = true;
	while (head) {
		struct worker *w = head;
		head = w->next_done;
		worker_done(c, w);
	}
	run_deferred_notify(c);
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	uid_t self = (uid_t)(uintptr_t)arg;
	uint64_t uid = UINT64_MAX;

	(void)ev;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) != 0 || !uid_allowed(self, uid)) {
		log_warn(COMP, "refused a control connection from uid %" PRIu64, uid);
		nng_pipe_close(p);
	}
}

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
		size_t n;
		c->notify_pending = false;
		if (fetch_plugins(c, &n) < 0)
			break;
		for (struct worker *w = c->workers; w; w = w->next) {
			const struct control_plugin *p;
			struct reply rp;
			if (w->state != W_PARKED)
				continue;
			p = find_plugin(c, n, w->name);
			if (p && !p->ready)
				continue;
			reply_init(&rp);
			if (!p)
				reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND,
					    "plugin '%s' went away", w->name);
			else if (reply_plugins(&rp, p, 1) < 0)
				reply_error(&rp, LEASEHOLD__CONTROL__CODE__CODE_INTERNAL,
					    "out of memory");
			worker_unpark(c, w, &rp);
			reply_fini(&rp);
		}
		if (!c->notify_pending || c->n_parked == 0)
			break;
	}
	c->busy = false;
	c->notify_pending = false;
}

static const char *url_path(const char *url)
{
	if (strncmp(url, "ipc://", 6) == 0)
		return url + 6;
	return NULL;
}

/* ensure_parent_dir - create the socket's directory (one level, 0755) if it
 * is missing, like /run/leasehold on a fresh boot. */
static void ensure_parent_dir(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		log_debug(COMP, "mkdir %s: %s", dir, strerror(errno));
}

int control_new(struct loop *l, const char *url, const struct control_ops *ops, void *ud,
		struct control **ret, char *err, size_t err_len)
{
	struct control *c = NULL;
	const char *path;
	struct stat st;
	int rv, r;

	if (!l || !url || !ops || !ops->plugins || !ret) {
		snprintf(err, err_len, "control: invalid arguments");
		return -EINVAL;
	}
	path = url_path(url);
	if (!path || !path[0]) {
		snprintf(err, err_len, "control URL must be ipc:///path, not '%s'", url);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	c->loop = l;
	c->ops = ops;
	c->ud = ud;
	c->euid = geteuid();
	c->efd = -1;
	pthread_mutex_init(&c->mtx, NULL);

	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		r = -errno;
		snprintf(err, err_len, "eventfd: %s", strerror(-r));
		goto fail;
	}
	rv = nng_rep0_open(&c->sock);
	if (rv != 0) {
		r = -ENOMEM;
		snprintf(err, err_len, "control socket: %s", nng_strerror(rv));
		goto fail;
	}
	c->sock_open = true;
	if ((rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, CONTROL_MAX_WIRE)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb,
				  (void *)(uintptr_t)c->euid)) != 0 ||
	    (rv = nng_listener_create(&c->listener, c->sock, url)) != 0 ||
	    (rv = nng_listener_set_int(c->listener, NNG_OPT_IPC_PERMISSIONS, 0600)) != 0) {
		r = -EINVAL;
		snprintf(err, err_len, "control socket %s: %s", url, nng_strerror(rv));
		goto fail;
	}
	ensure_parent_dir(path);
	rv = nng_listener_start(c->listener, 0);
	if (rv != 0) {
		r = rv == NNG_EADDRINUSE ? -EADDRINUSE : rv == NNG_EPERM ? -EACCES : -EIO;
		snprintf(err, err_len, "cannot listen on %s: %s%s", url, nng_strerror(rv),
			 rv == NNG_EADDRINUSE ? " (is another leasehold running?)" : "");
		goto fail;
	}
	/* belt and braces: the listener already created it 0600 */
	if (chmod(path, 0600) < 0 || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    (st.st_mode & 07777) != 0600) {
		r = -EACCES;
		snprintf(err, err_len, "control socket %s: cannot make it mode 0600", path);
		goto fail;
	}
	r = loop_io_add(l, c->efd, EPOLLIN, on_eventfd, c, &c->io);
	if (r < 0) {
		snprintf(err, err_len, "control: loop: %s", strerror(-r));
		goto fail;
	}
	ensure_receivers(c);
	if (c->n_active == 0) {
		r = -ENOMEM;
		snprintf(err, err_len, "control: out of memory");
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	control_free(c);
	return r;
}

void control_free(struct control *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mtx);
	c->closing = true;
	pthread_mutex_unlock(&c->mtx);
	if (c->sock_open)
		nng_close(c->sock); /* posted operations fail; callbacks queue nothing now */
	c->sock_open = false;
	while (c->workers)
		worker_free(c->workers); /* waits for a callback still running */
	loop_io_free(c->io);
	if (c->efd >= 0)
		close(c->efd);
	pthread_mutex_destroy(&c->mtx);
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
