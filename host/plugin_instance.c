/*
 * plugin_instance.c - see plugin_instance.h for the design notes.
 *
 * The file has two parts: the host half (loop thread: event queue, bus I/O,
 * txn bridging, containment) and the lifecycle (worker thread or child
 * process). The worker half is worker.c. The two halves share nothing
 * mutable: the worker owns struct worker after pthread_create and until it
 * is joined (or lives in another process); everything crosses the bus.
 *
 * Worker generations (process mode): each child gets its own host socket,
 * listener and URL (gen_up .. gen_down). gen_down() is the one place where a
 * lost worker's state is settled; a child is reaped through its pidfd, which
 * may happen after gen_down (struct child outlives the generation).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "lh_worker_paths.h"
#include "log.h"
#include "plugin_instance.h"
#include "proto/bus.pb-c.h"
#include "bus_msg.h"
#include "worker.h"

#define DEFAULT_TXN_TIMEOUT_MS 30000u
#define MAX_TXN_OPS 1024u
#define SYNC_STOP_TIMEOUT_MS 10000
#define HURRY_WAIT_MS 200 /* every synchronous wait after plugin_instance_hurry() */
#define DEFAULT_RESTART_MIN_MS 100u
#define DEFAULT_RESTART_MAX_MS 30000u
#define DEFAULT_EXIT_GRACE_MS 5000u
/* a spawned worker must have its bus connection accepted within this. With
 * nng up to 1.5.2 (Debian 12; fixed in 1.6.0 by nng #1518) a local client
 * that connects to the worker's bus socket and hangs up before the SP
 * handshake breaks the listener: the worker's own connection is then never
 * accepted and, without this deadline, the plugin never comes back. */
#define WORKER_ATTACH_TIMEOUT_MS 10000u
#define SYNC_KILL_WAIT_MS 2000
#define LOG_COMPONENT_MAX 80
#define PIPELINE_MAX 5 /* events handed to the worker at once (may_send) */

typedef Leasehold__Bus__ToWorker ToWorker;
typedef Leasehold__Bus__ToHost ToHost;
typedef Leasehold__Bus__Event Event;
typedef Leasehold__Bus__EventDone EventDone;
typedef Leasehold__Bus__TxnRequest TxnRequest;
typedef Leasehold__Bus__TxnReply TxnReply;
typedef Leasehold__Bus__Op BusOp;
typedef Leasehold__Bus__Compare BusCompare;
typedef Leasehold__Bus__OpResult BusOpResult;
typedef Leasehold__Bus__Kv BusKv;

static atomic_uint g_instance_counter;
static atomic_bool g_hurry; /* plugin_instance_hurry(): the process is leaving */

void plugin_instance_hurry(void)
{
	atomic_store(&g_hurry, true);
}

/* what a plugin thread left behind (stuck in a callback) still uses: kept
 * reachable until the process exits */
struct left_behind {
	struct left_behind *next;
	struct worker *w;
	struct loader_plugin *lp;
};
static struct left_behind *g_left_behind;

static int sync_wait_ms(int normal)
{
	return atomic_load(&g_hurry) ? HURRY_WAIT_MS : normal;
}

/* snprintf that may truncate on purpose */
static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}


static int nng_to_errno(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case NNG_ENOMEM:
		return -ENOMEM;
	case NNG_EAGAIN:
		return -EAGAIN;
	case NNG_ETIMEDOUT:
		return -ETIMEDOUT;
	case NNG_ECLOSED:
		return -ECANCELED;
	case NNG_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ======================================================================
 * Host half
 * ====================================================================== */

/* the callback each event runs: the values of enum worker_callback */
enum ev_kind {
	EV_INIT = WORKER_CB_INIT,
	EV_ELECTED = WORKER_CB_ON_ELECTED,
	EV_RELEASES = WORKER_CB_ON_RELEASES_CHANGED,
	EV_RECONCILE = WORKER_CB_RECONCILE,
	EV_DEPOSED = WORKER_CB_ON_DEPOSED,
	EV_FINI = WORKER_CB_FINI,
};
_Static_assert(PLUGIN_CALLBACKS == WORKER_CALLBACKS && PLUGIN_CALLBACK_RECONCILE == EV_RECONCILE &&
                   PLUGIN_CALLBACK_FINI == EV_FINI,
               "plugin_instance.h's callback kinds are worker.h's");

struct event {
	struct event *next;
	enum ev_kind kind;
	uint64_t seq;
	uint64_t sent_ns; /* loop_now() when handed to the worker */
	uint64_t term;    /* pi->term when queued: txns of its callback are fenced on it */
	bool behind;      /* handed over while others were in flight */
	int64_t token;
	struct releases rel;
	driver_reconcile_done_fn done;
	void *done_ud;
};

enum comp_kind { COMP_RECONCILE, COMP_DRAIN, COMP_INIT, COMP_STOPPED, COMP_FAILED, COMP_RECOVERED };

struct completion {
	struct completion *next;
	enum comp_kind kind;
	void (*fn)(void);
	void *ud;
	int err;
	char *msg;
};

struct outmsg {
	struct outmsg *next;
	nng_msg *msg;
};

struct drain_waiter {
	struct drain_waiter *next;
	driver_drain_done_fn fn;
	void *ud;
};

struct pending_txn {
	struct pending_txn *next;
	struct plugin_instance *pi; /* NULL once the instance is gone */
	uint64_t id;
};

/* one spawned leasehold-worker process, until it is reaped */
struct child {
	struct child *next;
	struct plugin_instance *pi;
	pid_t pid;
	int pidfd;
	struct loop_io *io;
	bool current; /* the live generation's child (not yet given up) */
};

struct plugin_instance {
	struct loader_plugin *lp;
	struct loop *loop;
	struct driver_host host;
	char *data_prefix;
	size_t prefix_len;
	char *node_id;
	struct plugin_instance_config cfg;
	char url[128];
	char log_comp[LOG_COMPONENT_MAX];

	nng_socket hsock, wsock;
	bool hsock_open, wsock_open;
	int rfd, sfd;
	struct loop_io *rio, *sio;

	struct worker *w;
	pthread_t thread;
	bool thread_running; /* created and not joined */
	bool broken;         /* bus failed: nothing more can be delivered */

	/* containment */
	bool process;          /* process isolation */
	bool bus_up;           /* a worker generation is connected (thread: always) */
	bool init_reported;    /* on_init was pushed */
	bool failed_reported;  /* on_failed pushed, on_recovered not yet */
	bool overrun;          /* thread mode: the in-flight callback overran */
	bool stop_after_reap;  /* finish the stop once the child is reaped */
	uint64_t gen;          /* worker generations started */
	uint64_t up_since;     /* loop_now() when the current worker finished init */
	uint64_t backoff_ms;   /* delay of the next restart */
	struct child *children; /* spawned, not reaped */
	struct child *cur;      /* the live generation's child or NULL */
	pthread_mutex_t pid_mu; /* guards expect_pid (read by nng's pipe callback) */
	unsigned instance_id;
	dev_t copy_dev; /* identity of lp->copy_path, checked by the child */
	ino_t copy_ino;
	pid_t expect_pid;
	bool attached; /* under pid_mu: expect_pid's bus connection was accepted */
	char *worker_path, *runtime_dir, *worker_stderr;
	/* process mode: the children's activity page (worker.h), shared memory
	 * that outlives a dead child; -1 / NULL in thread mode */
	int activity_fd;
	struct worker_activity *activity_page;
	struct loop_timer *cb_timer;      /* callback timeout, child exit grace */
	struct loop_timer *restart_timer; /* backoff */
	struct loop_timer *attach_timer;  /* WORKER_ATTACH_TIMEOUT_MS after a spawn */

	enum plugin_instance_state state;
	bool leading;
	bool term_elected_sent;
	uint64_t term; /* leadership terms begun (elected()) */
	/* may_send: 1 = the last event handed over is an on_elected, 2 = it is
	 * that on_elected's replay; 0 = anything else */
	unsigned term_start;
	struct releases last_rel;
	uint64_t next_seq;

	struct event *q_head, *q_tail;
	struct event *sent_head, *sent_tail; /* handed to the worker, not yet acknowledged */
	unsigned n_sent;
	struct outmsg *out_head, *out_tail;
	bool cork; /* send_nng queues without flushing; on_defer flushes */
	struct completion *c_head, *c_tail;
	struct drain_waiter *drains;
	struct pending_txn *txns;
	struct loop_timer *defer;
	plugin_instance_stopped_fn stopped;
	void *stopped_ud;
	bool stop_requested;
	bool dispatching;    /* on_defer is calling completions */
	bool free_requested; /* plugin_instance_free was called meanwhile */
	bool need_break; /* a send failed: mark_broken from the timer */
	char break_why[128];

	struct plugin_instance_stats stats;
	char init_error[512];
};

static void note_error(struct plugin_instance *pi, int err, const char *msg)
{
	pi->stats.last_err = err;
	snprintf(pi->stats.last_error, sizeof(pi->stats.last_error), "%s", msg ? msg : "");
}

/* ---- completions (always from a timer) ---- */

static void completion_push(struct plugin_instance *pi, enum comp_kind kind, void (*fn)(void),
                            void *ud, int err, const char *msg)
{
	struct completion *c = calloc(1, sizeof(*c));
	if (!c) {
		log_error(pi->log_comp, "out of memory: a completion is lost");
		return;
	}
	c->kind = kind;
	c->fn = fn;
	c->ud = ud;
	c->err = err;
	c->msg = strdup(msg ? msg : "");
	if (pi->c_tail)
		pi->c_tail->next = c;
	else
		pi->c_head = c;
	pi->c_tail = c;
	loop_timer_arm_in(pi->defer, 0);
}

static void completion_free(struct completion *c)
{
	free(c->msg);
	free(c);
}

static void mark_broken(struct plugin_instance *pi, const char *why);
static void flush(struct plugin_instance *pi);

static void pump(struct plugin_instance *pi);

static void on_defer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)t;
	if (pi->out_head && !pi->broken && pi->bus_up)
		flush(pi); /* what send_nng left corked */
	if (pi->need_break) {
		pi->need_break = false;
		mark_broken(pi, pi->break_why);
	}
	pump(pi); /* what plugin_instance_elected left queued */
	struct completion *list = pi->c_head;
	pi->c_head = pi->c_tail = NULL;
	pi->dispatching = true;
	while (list) {
		struct completion *c = list;
		list = c->next;
		if (!pi->free_requested) {
			switch (c->kind) {
			case COMP_RECONCILE:
				((driver_reconcile_done_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_DRAIN:
				((driver_drain_done_fn)c->fn)(c->ud);
				break;
			case COMP_INIT:
				((plugin_instance_init_fn)c->fn)(c->ud, c->err, c->msg);
				break;
			case COMP_STOPPED:
				((plugin_instance_stopped_fn)c->fn)(c->ud);
				break;
			case COMP_FAILED:
				((plugin_instance_failed_fn)c->fn)(c->ud, c->msg);
				break;
			case COMP_RECOVERED:
				((plugin_instance_recovered_fn)c->fn)(c->ud);
				break;
			}
		}
		completion_free(c);
	}
	pi->dispatching = false;
	/* a completion freed the instance: the rest were dropped, free it now */
	if (pi->free_requested)
		plugin_instance_free(pi);
}

static void maybe_drained(struct plugin_instance *pi)
{
	/* an overrunning callback (thread mode) is abandoned, not waited for */
	if (!pi->drains || (!pi->overrun && (pi->q_head || pi->sent_head)))
		return;
	/* oldest first */
	struct drain_waiter *rev = NULL;
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		d->next = rev;
		rev = d;
	}
	while (rev) {
		struct drain_waiter *d = rev;
		rev = d->next;
		completion_push(pi, COMP_DRAIN, (void (*)(void))d->fn, d->ud, 0, NULL);
		free(d);
	}
}

/* ---- sending ---- */

static void on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata);

static void flush(struct plugin_instance *pi)
{
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		int rv = nng_sendmsg(pi->hsock, o->msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN) {
			if (!pi->sio &&
			    loop_io_add(pi->loop, pi->sfd, EPOLLIN, on_sendable, pi, &pi->sio) < 0) {
				snprintf(pi->break_why, sizeof(pi->break_why), "cannot watch the send fd");
				pi->need_break = true;
				loop_timer_arm_in(pi->defer, 0);
			}
			return;
		}
		pi->out_head = o->next;
		if (!pi->out_head)
			pi->out_tail = NULL;
		if (rv != 0) {
			nng_msg_free(o->msg);
			free(o);
			/* not from here (we may be deep inside pump): from the timer */
			snprintf(pi->break_why, sizeof(pi->break_why), "send: %s", nng_strerror(rv));
			pi->need_break = true;
			loop_timer_arm_in(pi->defer, 0);
			return;
		}
		free(o);
	}
	if (pi->sio) {
		loop_io_free(pi->sio);
		pi->sio = NULL;
	}
}

static void on_sendable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	(void)io;
	(void)fd;
	(void)events;
	flush(userdata);
}

/* queue msg (taken, also on failure) and flush */
static int send_nng(struct plugin_instance *pi, nng_msg *msg)
{
	if (pi->broken || !pi->bus_up) {
		if (msg)
			nng_msg_free(msg);
		return -EPIPE;
	}
	struct outmsg *o = calloc(1, sizeof(*o));
	if (!msg || !o) {
		if (msg)
			nng_msg_free(msg);
		free(o);
		return -ENOMEM;
	}
	o->msg = msg;
	if (pi->out_tail)
		pi->out_tail->next = o;
	else
		pi->out_head = o;
	pi->out_tail = o;
	if (!pi->cork)
		flush(pi);
	return 0;
}

static int send_to_worker(struct plugin_instance *pi, const ProtobufCMessage *m)
{
	return send_nng(pi, bus_pack_msg(m));
}

/* ---- the event queue ---- */

static void event_complete_cancelled(struct plugin_instance *pi, struct event *ev, int err,
                                     const char *msg)
{
	if (ev->kind == EV_RECONCILE && ev->done) {
		pi->stats.reconciles_cancelled++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err, msg);
	}
}

/* append ev to the list head..tail (the host queue or the sent list) */
static void event_append(struct event **head, struct event **tail, struct event *ev)
{
	ev->next = NULL;
	if (*tail)
		(*tail)->next = ev;
	else
		*head = ev;
	*tail = ev;
}

static void enqueue(struct plugin_instance *pi, struct event *ev)
{
	event_append(&pi->q_head, &pi->q_tail, ev);
	pi->stats.queued++;
}

static struct event *event_new(enum ev_kind kind)
{
	struct event *ev = calloc(1, sizeof(*ev));
	if (ev)
		ev->kind = kind;
	return ev;
}

static void fill_bus_releases(const struct releases *r, Leasehold__Bus__Releases *br,
                              Leasehold__Bus__Release *mn, Leasehold__Bus__Release *mx)
{
	leasehold__bus__releases__init(br);
	leasehold__bus__release__init(mn);
	leasehold__bus__release__init(mx);
	mn->major = r->min.major;
	mn->minor = r->min.minor;
	mn->patch = r->min.patch;
	mx->major = r->max.major;
	mx->minor = r->max.minor;
	mx->patch = r->max.patch;
	br->min = mn;
	br->max = mx;
	br->revision = r->revision;
	br->n_members = (uint32_t)(r->n_members > UINT32_MAX ? UINT32_MAX : r->n_members);
}

/* the storage of one event's bus form */
struct bus_event {
	Event e;
	Leasehold__Bus__Init init;
	Leasehold__Bus__Elected el;
	Leasehold__Bus__ReleasesChanged rc;
	Leasehold__Bus__Releases br;
	Leasehold__Bus__Release mn, mx;
	Leasehold__Bus__Reconcile rec;
	Leasehold__Bus__Deposed dep;
	Leasehold__Bus__Fini fini;
};

/* ev's bus form in be (pointers into be and pi) */
static void event_fill(const struct plugin_instance *pi, const struct event *ev,
                       struct bus_event *be)
{
	leasehold__bus__event__init(&be->e);
	leasehold__bus__init__init(&be->init);
	leasehold__bus__elected__init(&be->el);
	leasehold__bus__releases_changed__init(&be->rc);
	leasehold__bus__reconcile__init(&be->rec);
	leasehold__bus__deposed__init(&be->dep);
	leasehold__bus__fini__init(&be->fini);
	be->e.seq = ev->seq;
	be->e.behind = ev->behind;
	switch (ev->kind) {
	case EV_INIT:
		be->init.node_id = bus_bin_str(pi->node_id);
		be->init.data_prefix = bus_bin_str(pi->data_prefix);
		be->init.bus_version = LH_BUS_VERSION;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_INIT;
		be->e.init = &be->init;
		break;
	case EV_ELECTED:
		be->el.fencing_token = ev->token;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_ELECTED;
		be->e.elected = &be->el;
		break;
	case EV_RELEASES:
		fill_bus_releases(&ev->rel, &be->br, &be->mn, &be->mx);
		be->rc.releases = &be->br;
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RELEASES_CHANGED;
		be->e.releases_changed = &be->rc;
		break;
	case EV_RECONCILE:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_RECONCILE;
		be->e.reconcile = &be->rec;
		break;
	case EV_DEPOSED:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_DEPOSED;
		be->e.deposed = &be->dep;
		break;
	case EV_FINI:
		be->e.kind_case = LEASEHOLD__BUS__EVENT__KIND_FINI;
		be->e.fini = &be->fini;
		break;
	}
}

/* the bus message for evs[0..n) (caller owns it): one event alone, several
 * as one batch; NULL on ENOMEM */
static nng_msg *events_msg(const struct plugin_instance *pi, struct event *const *evs, size_t n)
{
	struct bus_event be[PIPELINE_MAX];
	Event *ptrs[PIPELINE_MAX];
	if (n == 0 || n > PIPELINE_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		event_fill(pi, evs[i], &be[i]);
		ptrs[i] = &be[i].e;
	}
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	Leasehold__Bus__Events batch = LEASEHOLD__BUS__EVENTS__INIT;
	if (n == 1) {
		tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
		tw.event = ptrs[0];
	} else {
		batch.n_events = n;
		batch.events = ptrs;
		tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_BATCH;
		tw.batch = &batch;
	}
	return bus_pack_msg(&tw.base);
}

static void finish_stop(struct plugin_instance *pi);
static void drop_queued(struct plugin_instance *pi, int err, const char *msg);

/* the callback timeout runs for the head of the sent list: the callback the
 * worker is in (or enters next) */
static void head_started(struct plugin_instance *pi)
{
	if (!pi->sent_head) {
		pi->stats.callback_since_ns = 0;
		if (!pi->stop_after_reap)
			loop_timer_disarm(pi->cb_timer);
		return;
	}
	pi->stats.callback_since_ns = loop_now();
	pi->sent_head->sent_ns = pi->stats.callback_since_ns;
	uint32_t limit = plugin_instance_callback_timeout_ms(pi, pi->sent_head->kind);
	if (pi->stop_after_reap)
		return;
	if (limit)
		loop_timer_arm_in(pi->cb_timer, (uint64_t)limit * LOOP_NS_PER_MS);
	else
		loop_timer_disarm(pi->cb_timer);
}

static void sent_push(struct plugin_instance *pi, struct event *ev)
{
	event_append(&pi->sent_head, &pi->sent_tail, ev);
	pi->n_sent++;
	pi->stats.in_flight = pi->n_sent;
}

static struct event *sent_unlink_head(struct plugin_instance *pi)
{
	struct event *ev = pi->sent_head;
	if (!ev)
		return NULL;
	pi->sent_head = ev->next;
	if (!pi->sent_head)
		pi->sent_tail = NULL;
	ev->next = NULL;
	pi->n_sent--;
	pi->stats.in_flight = pi->n_sent;
	return ev;
}

/* the acknowledged head of the sent list (the worker answers in order) */
static struct event *sent_pop(struct plugin_instance *pi)
{
	struct event *ev = sent_unlink_head(pi);
	if (ev)
		head_started(pi);
	return ev;
}

/* the whole sent list, for settling it (the worker is gone or failed) */
static struct event *sent_take_all(struct plugin_instance *pi)
{
	struct event *list = pi->sent_head;
	pi->sent_head = pi->sent_tail = NULL;
	pi->n_sent = 0;
	pi->stats.in_flight = 0;
	pi->stats.callback_since_ns = 0;
	return list;
}

/* may ev go to the worker now? One event at a time, except:
 * - the start of a term goes in one go: on_elected, its replay right behind
 *   it, and the first reconcile right behind the replay, so that reconcile
 *   does not wait two bus round trips (at most 3 events);
 * - the end of a term or of the instance (on_deposed, fini) goes at once, so
 *   the worker knows that what it already has of the term is moot and skips
 *   it (worker.c should_skip) instead of running it.
 * Nothing else goes behind anything (a reconcile can be long, and what still
 * waits here can be merged or dropped exactly). */
static bool may_send(const struct plugin_instance *pi, const struct event *ev)
{
	if (!pi->sent_head)
		return true;
	switch (ev->kind) {
	case EV_DEPOSED:
	case EV_FINI:
		return pi->n_sent < PIPELINE_MAX; /* 3 + on_deposed + fini: always */
	case EV_RELEASES:
		return pi->term_start == 1;
	case EV_RECONCILE:
		return pi->term_start == 2;
	case EV_INIT:
	case EV_ELECTED:
		break;
	}
	return false;
}

/* Hand queued events to the worker, as far as may_send allows. Everything
 * that may go in one round goes in one message (a batch when more than one:
 * the start of a term is one bus hop, not three). Each chosen event is
 * linked into the sent list as it is chosen (may_send looks at the state
 * each one leaves); if the message cannot be queued they are unlinked again
 * and settled. */
static void pump(struct plugin_instance *pi)
{
	while (pi->q_head && !pi->broken && pi->bus_up && may_send(pi, pi->q_head)) {
		struct event *evs[PIPELINE_MAX];
		size_t n = 0;
		struct event *saved_tail = pi->sent_tail;
		size_t saved_n = pi->n_sent;
		/* choose: each chosen event is linked in as sent, so that the
		 * next may_send sees it */
		while (n < PIPELINE_MAX && pi->q_head && may_send(pi, pi->q_head)) {
			struct event *ev = pi->q_head;
			pi->q_head = ev->next;
			if (!pi->q_head)
				pi->q_tail = NULL;
			pi->stats.queued--;
			ev->next = NULL;
			ev->seq = pi->next_seq + n + 1;
			ev->behind = pi->sent_head != NULL;
			pi->term_start = ev->kind == EV_ELECTED                           ? 1
			                 : ev->kind == EV_RELEASES && pi->term_start == 1 ? 2
			                                                                  : 0;
			sent_push(pi, ev);
			evs[n++] = ev;
		}
		int r = send_nng(pi, events_msg(pi, evs, n));
		if (r < 0) {
			/* unlink them again and settle them, in order */
			if (saved_tail)
				saved_tail->next = NULL;
			else
				pi->sent_head = NULL;
			pi->sent_tail = saved_tail;
			pi->n_sent = saved_n;
			pi->stats.in_flight = pi->n_sent;
			pi->term_start = 0;
			log_error(pi->log_comp, "cannot send %zu event(s) to the worker: %s", n,
			          strerror(-r));
			bool elected = false;
			for (size_t i = 0; i < n; i++) {
				elected |= evs[i]->kind == EV_ELECTED;
				event_complete_cancelled(pi, evs[i], r,
				                         "cannot send the event to the plugin worker");
				pi->stats.dropped++;
				free(evs[i]);
			}
			if (elected) /* the rest of the term must not go alone */
				drop_queued(pi, r, "cannot send on_elected to the plugin worker");
			continue;
		}
		pi->next_seq += n;
		pi->stats.messages++;
		for (size_t i = 0; i < n; i++)
			if (evs[i]->kind == EV_ELECTED)
				pi->term_elected_sent = true;
		if (pi->n_sent == n)
			head_started(pi);
	}
	if (pi->broken) {
		/* nothing can be delivered: complete everything */
		while (pi->q_head) {
			struct event *ev = pi->q_head;
			pi->q_head = ev->next;
			pi->stats.queued--;
			pi->stats.dropped++;
			event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
			free(ev);
		}
		pi->q_tail = NULL;
	}
	maybe_drained(pi);
}

/* drop queued leadership events (deposed, stop, failure) */
static void drop_queued(struct plugin_instance *pi, int err, const char *msg)
{
	struct event **pp = &pi->q_head;
	pi->q_tail = NULL;
	while (*pp) {
		struct event *ev = *pp;
		if (ev->kind == EV_ELECTED || ev->kind == EV_RELEASES || ev->kind == EV_RECONCILE) {
			*pp = ev->next;
			pi->stats.queued--;
			pi->stats.dropped++;
			event_complete_cancelled(pi, ev, err, msg);
			free(ev);
			continue;
		}
		pi->q_tail = ev;
		pp = &ev->next;
	}
}

static void gen_lost(struct plugin_instance *pi, const char *reason);

static void mark_broken(struct plugin_instance *pi, const char *why)
{
	if (pi->process) {
		/* a worker process can be replaced: contain it */
		char reason[256];
		fmt(reason, sizeof(reason), "plugin worker bus failed: %s", why);
		gen_lost(pi, reason);
		return;
	}
	if (pi->broken)
		return;
	pi->broken = true;
	log_error(pi->log_comp, "plugin bus failed: %s", why);
	note_error(pi, -EPIPE, why);
	if (pi->state != PLUGIN_INSTANCE_STOPPING && pi->state != PLUGIN_INSTANCE_STOPPED)
		pi->state = PLUGIN_INSTANCE_FAILED;
	pi->leading = false;
	/* the events handed to the worker will never be acknowledged */
	bool fini_sent = false;
	for (struct event *ev = sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		event_complete_cancelled(pi, ev, -EIO, "the plugin worker is gone");
		if (ev->kind != EV_FINI && ev->kind != EV_INIT)
			pi->stats.dropped++;
		fini_sent |= ev->kind == EV_FINI;
		free(ev);
	}
	if (fini_sent) {
		finish_stop(pi);
		return;
	}
	/* a FINI still queued can never run: finish the stop now */
	bool had_fini = false;
	for (struct event *ev = pi->q_head; ev; ev = ev->next)
		had_fini |= ev->kind == EV_FINI;
	pump(pi); /* drops everything */
	if (had_fini)
		finish_stop(pi);
}

/* ---- driver ops ---- */

static bool accepting(const struct plugin_instance *pi)
{
	return !pi->stop_requested && !pi->broken && pi->state != PLUGIN_INSTANCE_FAILED &&
	       pi->state != PLUGIN_INSTANCE_RECOVERING && !pi->overrun && pi->bus_up;
}

void plugin_instance_deposed(struct plugin_instance *pi)
{
	if (!pi->leading)
		return;
	pi->leading = false;
	drop_queued(pi, -ECANCELED, "dropped: leadership was lost before it ran");
	if (pi->term_elected_sent) {
		struct event *ev = event_new(EV_DEPOSED);
		if (ev)
			enqueue(pi, ev);
		else
			log_error(pi->log_comp, "out of memory: on_deposed not delivered");
	}
	pi->term_elected_sent = false;
	/* on_deposed is held back until the deferred timer fires (or an earlier
	 * send of this instance, such as fini's, carries it): what the caller
	 * does next (resigning, the lease revocation on shutdown) hands
	 * leadership to the next node and goes to etcd first; an nng send costs
	 * tens of µs */
	pi->cork = true;
	pump(pi);
	pi->cork = false;
	if (pi->out_head)
		loop_timer_arm_in(pi->defer, 0);
}

void plugin_instance_elected(struct plugin_instance *pi, int64_t fencing_token,
                             const struct releases *r)
{
	if (!accepting(pi))
		return;
	if (pi->leading)
		plugin_instance_deposed(pi); /* a new term replaces the old one */
	struct event *e1 = event_new(EV_ELECTED), *e2 = event_new(EV_RELEASES);
	if (!e1 || !e2) {
		free(e1);
		free(e2);
		log_error(pi->log_comp, "out of memory: on_elected not delivered");
		return;
	}
	pi->leading = true;
	pi->term_elected_sent = false;
	pi->term++;
	e1->term = e2->term = pi->term;
	pi->last_rel = *r;
	e1->token = fencing_token;
	e2->rel = *r;
	enqueue(pi, e1);
	enqueue(pi, e2);
	/* not sent yet: the caller's first reconcile usually follows at once
	 * (plugin_instance_reconcile pumps), and then the three go as one
	 * message; otherwise the deferred timer sends these two */
	loop_timer_arm_in(pi->defer, 0);
}

void plugin_instance_releases_changed(struct plugin_instance *pi, const struct releases *r)
{
	if (!pi->leading || !accepting(pi))
		return;
	pi->last_rel = *r;
	/* merge with a releases event still waiting at the tail */
	if (pi->q_tail && pi->q_tail->kind == EV_RELEASES) {
		pi->q_tail->rel = *r;
		return;
	}
	struct event *ev = event_new(EV_RELEASES);
	if (!ev) {
		log_error(pi->log_comp, "out of memory: on_releases_changed not delivered");
		return;
	}
	ev->rel = *r;
	ev->term = pi->term;
	enqueue(pi, ev);
	pump(pi);
}

void plugin_instance_reconcile(struct plugin_instance *pi, driver_reconcile_done_fn done,
                               void *done_ud)
{
	if (!pi->leading || !accepting(pi)) {
		bool failed = pi->state == PLUGIN_INSTANCE_FAILED;
		bool down = !pi->stop_requested && (pi->state == PLUGIN_INSTANCE_RECOVERING ||
		                                    pi->overrun || !pi->bus_up);
		pi->stats.reconciles_cancelled++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud,
		                failed || down ? -EIO : -ECANCELED,
		                failed ? "the plugin instance failed"
		                : down ? "the plugin worker is down (failed, recovering)"
		                       : "not leading");
		return;
	}
	struct event *ev = event_new(EV_RECONCILE);
	if (!ev) {
		completion_push(pi, COMP_RECONCILE, (void (*)(void))done, done_ud, -ENOMEM,
		                "out of memory");
		return;
	}
	ev->done = done;
	ev->done_ud = done_ud;
	ev->term = pi->term;
	enqueue(pi, ev);
	pump(pi);
}

void plugin_instance_drain(struct plugin_instance *pi, driver_drain_done_fn done, void *done_ud)
{
	struct drain_waiter *d = calloc(1, sizeof(*d));
	if (!d) {
		log_error(pi->log_comp, "out of memory: drain completes at once");
		completion_push(pi, COMP_DRAIN, (void (*)(void))done, done_ud, 0, NULL);
		return;
	}
	d->fn = done;
	d->ud = done_ud;
	d->next = pi->drains;
	pi->drains = d;
	maybe_drained(pi);
}

static void op_elected(void *drv, int64_t token, const struct releases *r)
{
	plugin_instance_elected(drv, token, r);
}
static void op_releases_changed(void *drv, const struct releases *r)
{
	plugin_instance_releases_changed(drv, r);
}
static void op_reconcile(void *drv, driver_reconcile_done_fn done, void *done_ud)
{
	plugin_instance_reconcile(drv, done, done_ud);
}
static void op_deposed(void *drv)
{
	plugin_instance_deposed(drv);
}
static void op_drain(void *drv, driver_drain_done_fn done, void *done_ud)
{
	plugin_instance_drain(drv, done, done_ud);
}

const struct driver_ops plugin_instance_driver_ops = {
	.elected = op_elected,
	.releases_changed = op_releases_changed,
	.reconcile = op_reconcile,
	.deposed = op_deposed,
	.drain = op_drain,
};

/* ---- txn bridging ---- */

static void reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
                      const struct etcd_response *resp);

/* full key = prefix + rel; *ret owned by the caller */
static uint8_t *full_key(const struct plugin_instance *pi, ProtobufCBinaryData rel, size_t *ret_len)
{
	size_t n = pi->prefix_len + rel.len;
	uint8_t *k = malloc(n + 1);
	if (!k)
		return NULL;
	memcpy(k, pi->data_prefix, pi->prefix_len);
	if (rel.len)
		memcpy(k + pi->prefix_len, rel.data, rel.len);
	k[n] = 0;
	*ret_len = n;
	return k;
}

/* range_end for a prefix: increment the last byte below 0xff, drop the rest */
static uint8_t *prefix_end(const uint8_t *key, size_t len, size_t *ret_len)
{
	while (len > 0 && key[len - 1] == 0xff)
		len--;
	if (len == 0)
		return NULL; /* cannot happen: the data prefix is never all 0xff */
	uint8_t *e = malloc(len);
	if (!e)
		return NULL;
	memcpy(e, key, len);
	e[len - 1]++;
	*ret_len = len;
	return e;
}

struct keybag {
	uint8_t **p;
	size_t n, cap;
};

static uint8_t *bag_keep(struct keybag *b, uint8_t *p)
{
	if (!p)
		return NULL;
	if (b->n == b->cap) {
		size_t c = b->cap ? b->cap * 2 : 16;
		uint8_t **np = realloc(b->p, c * sizeof(*np));
		if (!np) {
			free(p);
			return NULL;
		}
		b->p = np;
		b->cap = c;
	}
	b->p[b->n++] = p;
	return p;
}

static void bag_free(struct keybag *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->p[i]);
	free(b->p);
}

static int convert_ops(struct plugin_instance *pi, BusOp **in, size_t n, struct etcd_op *out,
                       struct keybag *bag, const char **why)
{
	for (size_t i = 0; i < n; i++) {
		const BusOp *o = in[i];
		struct etcd_op *e = &out[i];
		uint32_t allowed = LH_F_PREFIX;
		memset(e, 0, sizeof(*e));
		switch (o->type) {
		case LH_OP_RANGE:
			e->type = ETCD_OP_RANGE;
			allowed |= LH_F_KEYS_ONLY | LH_F_COUNT_ONLY;
			break;
		case LH_OP_PUT:
			e->type = ETCD_OP_PUT;
			allowed = LH_F_PREV_KV;
			break;
		case LH_OP_DELETE:
			e->type = ETCD_OP_DELETE;
			allowed |= LH_F_PREV_KV;
			break;
		default:
			*why = "unknown op type";
			return -EINVAL;
		}
		if (o->flags & ~allowed) {
			*why = "op flags not allowed";
			return -EINVAL;
		}
		size_t klen = 0, elen = 0;
		uint8_t *k = bag_keep(bag, full_key(pi, o->key, &klen));
		if (!k)
			return -ENOMEM;
		e->key = k;
		e->key_len = klen;
		if (o->flags & LH_F_PREFIX) {
			uint8_t *end = bag_keep(bag, prefix_end(k, klen, &elen));
			if (!end)
				return -ENOMEM;
			e->range_end = end;
			e->range_end_len = elen;
		}
		e->value = o->value.data;
		e->value_len = o->value.len;
		e->limit = o->limit < 0 ? 0 : o->limit;
		e->prev_kv = (o->flags & LH_F_PREV_KV) != 0;
		e->keys_only = (o->flags & LH_F_KEYS_ONLY) != 0;
		e->count_only = (o->flags & LH_F_COUNT_ONLY) != 0;
	}
	return 0;
}

static void on_txn_done(struct etcd_client *c, int err, const struct etcd_response *resp,
                        void *userdata)
{
	struct pending_txn *pt = userdata;
	struct plugin_instance *pi = pt->pi;
	(void)c;
	if (pi) {
		struct pending_txn **pp = &pi->txns;
		while (*pp && *pp != pt)
			pp = &(*pp)->next;
		if (*pp)
			*pp = pt->next;
		if (err < 0) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%s%s%s", etcd_strerror(err),
			         resp && resp->error_message ? ": " : "",
			         resp && resp->error_message ? resp->error_message : "");
			reply_txn(pi, pt->id, err, msg, NULL);
		} else {
			reply_txn(pi, pt->id, 0, NULL, resp);
		}
	}
	free(pt);
}

static void handle_txn(struct plugin_instance *pi, const TxnRequest *req)
{
	struct keybag bag = {NULL, 0, 0};
	struct etcd_compare *cmps = NULL;
	struct etcd_op *succ = NULL, *fail = NULL;
	const char *why = NULL;
	char msg[512];
	int r;

	pi->stats.txns++;
	if (!pi->sent_head) {
		reply_txn(pi, req->id, -EPERM, "txn outside a callback", NULL);
		return;
	}
	if (!pi->leading || !pi->host.fenced_txn) {
		reply_txn(pi, req->id, -ESTALE,
		          "not leading: this node does not hold the plugin's election, txn refused", NULL);
		return;
	}
	if (pi->sent_head->term != pi->term) {
		/* a callback of an earlier term (deposed, then elected again
		 * while it ran): the current fence is not its own */
		reply_txn(pi, req->id, -ESTALE,
		          "the term this callback belongs to has ended; txn refused", NULL);
		return;
	}
	if (req->n_compares > MAX_TXN_OPS || req->n_success > MAX_TXN_OPS ||
	    req->n_failure > MAX_TXN_OPS) {
		reply_txn(pi, req->id, -E2BIG, "too many ops in one txn", NULL);
		return;
	}
	cmps = calloc(req->n_compares ? req->n_compares : 1, sizeof(*cmps));
	succ = calloc(req->n_success ? req->n_success : 1, sizeof(*succ));
	fail = calloc(req->n_failure ? req->n_failure : 1, sizeof(*fail));
	if (!cmps || !succ || !fail) {
		r = -ENOMEM;
		goto refuse;
	}
	for (size_t i = 0; i < req->n_compares; i++) {
		const BusCompare *bc = req->compares[i];
		struct etcd_compare *e = &cmps[i];
		if (bc->target > LH_CMP_VALUE || bc->result > LH_CMP_NOT_EQUAL ||
		    (bc->flags & ~LH_F_PREFIX)) {
			why = "bad compare target, result or flags";
			r = -EINVAL;
			goto refuse;
		}
		static const enum etcd_cmp_target targets[] = {ETCD_CMP_VERSION, ETCD_CMP_CREATE,
		                                               ETCD_CMP_MOD, ETCD_CMP_VALUE};
		static const enum etcd_cmp_result results[] = {ETCD_CMP_EQUAL, ETCD_CMP_GREATER,
		                                               ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL};
		e->target = targets[bc->target];
		e->result = results[bc->result];
		size_t klen = 0, elen = 0;
		uint8_t *k = bag_keep(&bag, full_key(pi, bc->key, &klen));
		if (!k) {
			r = -ENOMEM;
			goto refuse;
		}
		e->key = k;
		e->key_len = klen;
		if (bc->flags & LH_F_PREFIX) {
			uint8_t *end = bag_keep(&bag, prefix_end(k, klen, &elen));
			if (!end) {
				r = -ENOMEM;
				goto refuse;
			}
			e->range_end = end;
			e->range_end_len = elen;
		}
		e->number = bc->number;
		e->value = bc->value.data;
		e->value_len = bc->value.len;
	}
	r = convert_ops(pi, req->success, req->n_success, succ, &bag, &why);
	if (r < 0)
		goto refuse;
	r = convert_ops(pi, req->failure, req->n_failure, fail, &bag, &why);
	if (r < 0)
		goto refuse;

	struct pending_txn *pt = calloc(1, sizeof(*pt));
	if (!pt) {
		r = -ENOMEM;
		goto refuse;
	}
	pt->pi = pi;
	pt->id = req->id;
	pt->next = pi->txns;
	pi->txns = pt;
	r = pi->host.fenced_txn(pi->host.ctx, cmps, req->n_compares, succ, req->n_success, fail,
	                        req->n_failure, on_txn_done, pt);
	if (r < 0) {
		struct pending_txn **pp = &pi->txns;
		while (*pp && *pp != pt)
			pp = &(*pp)->next;
		if (*pp)
			*pp = pt->next;
		free(pt);
		why = r == -ESTALE ? "not leading: the election refused the txn"
		      : r == -EPERM ? "a key lies outside the plugin's data prefix"
		                    : NULL;
		goto refuse;
	}
	goto out;
refuse:
	snprintf(msg, sizeof(msg), "txn refused: %s", why ? why : strerror(-r));
	reply_txn(pi, req->id, r, msg, NULL);
out:
	bag_free(&bag);
	free(cmps);
	free(succ);
	free(fail);
}

static bool strip_prefix(const struct plugin_instance *pi, const struct etcd_kv *kv)
{
	return kv->key && kv->key_len >= pi->prefix_len &&
	       memcmp(kv->key, pi->data_prefix, pi->prefix_len) == 0;
}

static void reply_txn(struct plugin_instance *pi, uint64_t id, int err, const char *msg,
                      const struct etcd_response *resp)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	BusOpResult *ors = NULL, **orp = NULL;
	BusKv *kvs = NULL, **kvp = NULL;
	rep.id = id;
	rep.err = err;
	if (err < 0) {
		pi->stats.txn_errors++;
		rep.message = bus_bin_str(msg);
	} else if (resp) {
		size_t n = resp->n_responses, n_kv = 0;
		for (size_t i = 0; i < n; i++) {
			const struct etcd_response *r = &resp->responses[i];
			n_kv += r->op_type == ETCD_OP_RANGE ? r->n_kvs : r->n_prev_kvs;
		}
		ors = calloc(n ? n : 1, sizeof(*ors));
		orp = calloc(n ? n : 1, sizeof(*orp));
		kvs = calloc(n_kv ? n_kv : 1, sizeof(*kvs));
		kvp = calloc(n_kv ? n_kv : 1, sizeof(*kvp));
		if (!ors || !orp || !kvs || !kvp) {
			rep.err = -ENOMEM;
			rep.message = bus_bin_str("out of memory");
			pi->stats.txn_errors++;
			goto send;
		}
		rep.succeeded = resp->succeeded;
		rep.revision = resp->header.revision;
		rep.n_results = n;
		rep.results = orp;
		size_t ki = 0;
		for (size_t i = 0; i < n; i++) {
			const struct etcd_response *r = &resp->responses[i];
			BusOpResult *o = &ors[i];
			leasehold__bus__op_result__init(o);
			orp[i] = o;
			o->type = r->op_type == ETCD_OP_RANGE ? LH_OP_RANGE
			          : r->op_type == ETCD_OP_PUT ? LH_OP_PUT
			                                      : LH_OP_DELETE;
			o->more = r->more;
			o->count = r->count;
			o->deleted = r->deleted;
			const struct etcd_kv *src = r->op_type == ETCD_OP_RANGE ? r->kvs : r->prev_kvs;
			size_t ns = r->op_type == ETCD_OP_RANGE ? r->n_kvs : r->n_prev_kvs;
			o->kvs = &kvp[ki];
			for (size_t k = 0; k < ns; k++) {
				const struct etcd_kv *kv = &src[k];
				if (!strip_prefix(pi, kv)) {
					log_debug(pi->log_comp, "txn result key outside the data prefix dropped");
					continue;
				}
				BusKv *b = &kvs[ki];
				leasehold__bus__kv__init(b);
				b->key = bus_bin(kv->key + pi->prefix_len, kv->key_len - pi->prefix_len);
				b->value = bus_bin(kv->value, kv->value ? kv->value_len : 0);
				b->create_revision = kv->create_revision;
				b->mod_revision = kv->mod_revision;
				b->version = kv->version;
				kvp[ki++] = b;
				o->n_kvs++;
			}
		}
	}
send:;
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	int r = send_to_worker(pi, &tw.base);
	if (r < 0 && r != -EPIPE)
		log_error(pi->log_comp, "cannot answer a txn request: %s", strerror(-r));
	free(ors);
	free(orp);
	free(kvs);
	free(kvp);
}

/* ---- receiving ---- */

static void gen_close(struct plugin_instance *pi);
static uint64_t exit_grace_ns(const struct plugin_instance *pi);

static void stopped_now(struct plugin_instance *pi)
{
	pi->state = PLUGIN_INSTANCE_STOPPED;
	if (pi->stopped)
		completion_push(pi, COMP_STOPPED, (void (*)(void))pi->stopped, pi->stopped_ud, 0, NULL);
	pi->stopped = NULL;
}

static void finish_stop(struct plugin_instance *pi)
{
	if (pi->state == PLUGIN_INSTANCE_STOPPED || pi->stop_after_reap)
		return;
	if (pi->process) {
		/* closing the bus tells the child to exit; wait for it (bounded) */
		loop_timer_disarm(pi->restart_timer);
		gen_close(pi);
		if (pi->children) {
			pi->stop_after_reap = true;
			loop_timer_arm_in(pi->cb_timer, exit_grace_ns(pi));
			return;
		}
		stopped_now(pi);
		return;
	}
	if (pi->thread_running) {
		/* after FINI's ack the worker only returns; if the bus broke, make
		 * sure a worker blocked on its socket wakes up */
		if (pi->broken && pi->wsock_open) {
			nng_close(pi->wsock);
			pi->wsock_open = false;
		}
		pthread_join(pi->thread, NULL);
		pi->thread_running = false;
	}
	stopped_now(pi);
}

static void report_failure(struct plugin_instance *pi, const char *reason);

/* a (restarted) worker finished init */
static void worker_recovered(struct plugin_instance *pi)
{
	if (pi->state == PLUGIN_INSTANCE_RECOVERING || pi->state == PLUGIN_INSTANCE_STARTING)
		pi->state = PLUGIN_INSTANCE_READY;
	if (pi->failed_reported && !pi->stop_requested) {
		pi->failed_reported = false;
		log_info(pi->log_comp, "plugin worker recovered");
		if (pi->cfg.on_recovered)
			completion_push(pi, COMP_RECOVERED, (void (*)(void))pi->cfg.on_recovered,
			                pi->cfg.userdata, 0, NULL);
	}
}

static void handle_done(struct plugin_instance *pi, const EventDone *d)
{
	struct event *ev = sent_pop(pi);
	char msg[512];
	int err = (d->err <= 0 && d->err > -4096) ? d->err : -EIO;
	snprintf(msg, sizeof(msg), "%.*s", (int)(d->message.len > 511 ? 511 : d->message.len),
	         d->message.data ? (const char *)d->message.data : "");
	bool other_release = ev->kind == EV_INIT && err == 0 && d->bus_version != LH_BUS_VERSION;
	if (other_release) {
		/* a worker of another release: it would misread what follows */
		err = -EPROTO;
		snprintf(msg, sizeof(msg),
		         "the plugin worker speaks bus version %u, this host %u (leasehold-worker "
		         "and leasehold must come from the same release)",
		         d->bus_version, LH_BUS_VERSION);
	}
	/* the worker skipped a term event a later on_deposed made moot: as if it
	 * had been dropped here (only these kinds can be skipped) */
	bool skipped = d->skipped && (ev->kind == EV_ELECTED || ev->kind == EV_RELEASES ||
	                              ev->kind == EV_RECONCILE || ev->kind == EV_DEPOSED);
	if (skipped) {
		pi->stats.dropped++;
		if (ev->kind == EV_RECONCILE)
			pi->stats.reconciles_cancelled++;
	} else
		pi->stats.delivered++;
	if (err < 0 && !skipped)
		note_error(pi, err, msg);
	if (pi->overrun) {
		/* thread mode: the callback that overran has returned */
		pi->overrun = false;
		log_warn(pi->log_comp, "the overrunning callback returned after %llu ms",
		         (unsigned long long)((loop_now() - ev->sent_ns) / LOOP_NS_PER_MS));
		if (ev->kind != EV_INIT || pi->init_reported)
			worker_recovered(pi);
	}
	if (ev->kind == EV_INIT && pi->init_reported) {
		/* process mode: a restarted worker */
		if (err < 0) {
			char reason[640];
			fmt(reason, sizeof(reason), "init failed after a restart: %s%s%s", strerror(-err),
			    msg[0] ? ": " : "", msg);
			free(ev);
			if (other_release) {
				/* the worker program was replaced (a package upgrade
				 * under a running host): every restart would start
				 * the same one. Final: no more restarts, and the
				 * owner hears the new reason. */
				pi->state = PLUGIN_INSTANCE_FAILED;
				gen_lost(pi, reason);
				if (pi->cfg.on_failed && !pi->stop_requested)
					completion_push(pi, COMP_FAILED, (void (*)(void))pi->cfg.on_failed,
					                pi->cfg.userdata, -EIO, reason);
				return;
			}
			gen_lost(pi, reason);
			return;
		}
		pi->up_since = loop_now();
		worker_recovered(pi);
		free(ev);
		pump(pi);
		return;
	}
	switch (ev->kind) {
	case EV_INIT:
		pi->init_reported = true;
		pi->up_since = loop_now();
		if (err < 0) {
			fmt(pi->init_error, sizeof(pi->init_error), "init failed: %s%s%s",
			         strerror(-err), msg[0] ? ": " : "", msg);
			log_error(pi->log_comp, "%s", pi->init_error);
			if (pi->state == PLUGIN_INSTANCE_STARTING)
				pi->state = PLUGIN_INSTANCE_FAILED;
			pi->leading = false;
			drop_queued(pi, -EIO, pi->init_error);
		} else if (pi->state == PLUGIN_INSTANCE_STARTING) {
			pi->state = PLUGIN_INSTANCE_READY;
		}
		if (pi->cfg.on_init)
			completion_push(pi, COMP_INIT, (void (*)(void))pi->cfg.on_init, pi->cfg.userdata,
			                err, err < 0 ? pi->init_error : "");
		break;
	case EV_RECONCILE:
		if (skipped) {
			err = -ECANCELED;
			snprintf(msg, sizeof(msg), "dropped: leadership was lost before it ran");
		} else if (err < 0)
			pi->stats.reconciles_failed++;
		else
			pi->stats.reconciles_ok++;
		completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, err, msg);
		break;
	case EV_ELECTED:
	case EV_RELEASES:
	case EV_DEPOSED:
		if (err < 0 && !skipped)
			log_warn(pi->log_comp, "%s failed: %s%s%s",
			         ev->kind == EV_ELECTED ? "on_elected"
			         : ev->kind == EV_RELEASES ? "on_releases_changed"
			                                   : "on_deposed",
			         strerror(-err), msg[0] ? ": " : "", msg);
		break;
	case EV_FINI:
		free(ev);
		finish_stop(pi);
		pump(pi);
		return;
	}
	free(ev);
	pump(pi);
}

static int handle_bytes(struct plugin_instance *pi, const void *buf, size_t len)
{
	ToHost *th = leasehold__bus__to_host__unpack(NULL, len, buf);
	int r = 0;
	if (!th) {
		pi->stats.bad_messages++;
		log_debug(pi->log_comp, "undecodable bus message (%zu bytes) dropped", len);
		return -EBADMSG;
	}
	if ((th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE && !th->done) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN && !th->txn) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_LOG && !th->log) ||
	    (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR && !th->protocol_error)) {
		pi->stats.bad_messages++;
		leasehold__bus__to_host__free_unpacked(th, NULL);
		return -EBADMSG;
	}
	switch (th->msg_case) {
	case LEASEHOLD__BUS__TO_HOST__MSG_DONE:
		if (!pi->sent_head || th->done->seq != pi->sent_head->seq) {
			pi->stats.bad_messages++;
			log_debug(pi->log_comp, "ack for seq %llu, expected %llu: dropped",
			          (unsigned long long)th->done->seq,
			          (unsigned long long)(pi->sent_head ? pi->sent_head->seq : 0));
			r = -EPROTO;
			break;
		}
		handle_done(pi, th->done);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_TXN:
		handle_txn(pi, th->txn);
		break;
	case LEASEHOLD__BUS__TO_HOST__MSG_LOG: {
		uint32_t lvl = th->log->level > LH_LOG_DEBUG ? LH_LOG_DEBUG : th->log->level;
		size_t n = th->log->message.len > 1024 ? 1024 : th->log->message.len;
		pi->stats.log_messages++;
		log_msg((enum log_level)lvl, pi->log_comp, "%.*s", (int)n,
		        th->log->message.data ? (const char *)th->log->message.data : "");
		break;
	}
	case LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR: {
		size_t n = th->protocol_error->message.len > 256 ? 256 : th->protocol_error->message.len;
		pi->stats.worker_rejected++;
		log_warn(pi->log_comp, "worker rejected a bus message: %.*s", (int)n,
		         th->protocol_error->message.data ? (const char *)th->protocol_error->message.data
		                                          : "");
		break;
	}
	default:
		pi->stats.bad_messages++;
		r = -EPROTO;
		break;
	}
	leasehold__bus__to_host__free_unpacked(th, NULL);
	return r;
}

static void on_readable(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)io;
	(void)fd;
	(void)events;
	for (int i = 0; i < 256; i++) { /* bounded: let other watchers run */
		nng_msg *msg;
		if (!pi->hsock_open)
			return; /* the generation ended while handling a message */
		int rv = nng_recvmsg(pi->hsock, &msg, NNG_FLAG_NONBLOCK);
		if (rv == NNG_EAGAIN)
			return;
		if (rv != 0) {
			mark_broken(pi, nng_strerror(rv));
			if (pi->rio) {
				loop_io_free(pi->rio);
				pi->rio = NULL;
			}
			return;
		}
		handle_bytes(pi, nng_msg_body(msg), nng_msg_len(msg));
		nng_msg_free(msg);
	}
}

/* ======================================================================
 * Containment: failures, callback timeout, worker processes
 * ====================================================================== */

static const char *ev_name(enum ev_kind k)
{
	return worker_callback_name((unsigned)k);
}

uint32_t plugin_instance_callback_timeout_ms(const struct plugin_instance *pi, unsigned kind)
{
	uint32_t v = kind < PLUGIN_CALLBACKS ? pi->cfg.callback_timeout_kind_ms[kind] : 0;
	if (v == PLUGIN_TIMEOUT_NONE)
		return 0;
	return v ? v : pi->cfg.callback_timeout_ms;
}

/* the live worker's activity page, or NULL (no worker, thread gone) */
static const struct worker_activity *live_activity(const struct plugin_instance *pi)
{
	if (pi->process)
		return pi->cur && pi->bus_up ? pi->activity_page : NULL;
	return pi->w && pi->thread_running ? worker_activity(pi->w) : NULL;
}

bool plugin_instance_running(const struct plugin_instance *pi, const char **ret_callback,
                             uint64_t *ret_since_ns)
{
	const struct worker_activity *a = live_activity(pi);
	struct worker_activity_snapshot snap;
	if (!a)
		return false;
	worker_activity_read(a, &snap);
	if (!snap.seq)
		return false;
	/* a worker process writes the page: a value from the future is not
	 * believed */
	uint64_t now = loop_now();
	*ret_callback = worker_callback_name(snap.kind);
	*ret_since_ns = snap.since_ns <= now ? snap.since_ns : now;
	return true;
}

static uint64_t exit_grace_ns(const struct plugin_instance *pi)
{
	return (uint64_t)(pi->cfg.exit_grace_ms ? pi->cfg.exit_grace_ms : DEFAULT_EXIT_GRACE_MS) *
	       LOOP_NS_PER_MS;
}

static uint32_t restart_min_ms(const struct plugin_instance *pi)
{
	return pi->cfg.restart_min_ms ? pi->cfg.restart_min_ms : DEFAULT_RESTART_MIN_MS;
}

static uint32_t restart_max_ms(const struct plugin_instance *pi)
{
	uint32_t mx = pi->cfg.restart_max_ms ? pi->cfg.restart_max_ms : DEFAULT_RESTART_MAX_MS;
	return mx < restart_min_ms(pi) ? restart_min_ms(pi) : mx;
}

/* Tell the owner (once per outage) and count. */
static void report_failure(struct plugin_instance *pi, const char *reason)
{
	pi->stats.worker_failures++;
	fmt(pi->stats.last_failure, sizeof(pi->stats.last_failure), "%s", reason);
	note_error(pi, -EIO, reason);
	log_error(pi->log_comp, "%s", reason);
	if (pi->stop_requested || pi->state == PLUGIN_INSTANCE_FAILED || !pi->init_reported)
		return; /* before on_init: init's own outcome reports it */
	pi->state = PLUGIN_INSTANCE_RECOVERING;
	if (!pi->failed_reported) {
		pi->failed_reported = true;
		if (pi->cfg.on_failed)
			completion_push(pi, COMP_FAILED, (void (*)(void))pi->cfg.on_failed,
			                pi->cfg.userdata, -EIO, reason);
	}
}

static int sys_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void child_kill(const struct child *c)
{
	if (c->pidfd >= 0 && syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0) < 0 &&
	    errno != ESRCH)
		log_warn(c->pi->log_comp, "cannot kill worker %ld: %s", (long)c->pid, strerror(errno));
}

static void child_unlink(struct plugin_instance *pi, struct child *c)
{
	for (struct child **pp = &pi->children; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	if (pi->cur == c)
		pi->cur = NULL;
}

static void child_free(struct child *c)
{
	if (!c)
		return;
	loop_io_free(c->io);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c);
}

static void describe_status(int status, char *buf, size_t len)
{
	if (status == -1) {
		fmt(buf, len, "ended (exit status unknown)");
	} else if (WIFSIGNALED(status)) {
		const char *abbr = sigabbrev_np(WTERMSIG(status));
		fmt(buf, len, "was killed by signal %d (SIG%s)%s", WTERMSIG(status), abbr ? abbr : "?",
		    WCOREDUMP(status) ? ", core dumped" : "");
	} else if (WIFEXITED(status)) {
		int code = WEXITSTATUS(status);
		const char *what = code == WORKER_EXIT_OK      ? ""
		                   : code == WORKER_EXIT_USAGE  ? " (bad worker command line)"
		                   : code == WORKER_EXIT_LOAD   ? " (cannot load the plugin)"
		                   : code == WORKER_EXIT_BUS    ? " (cannot connect to the host)"
		                   : code == WORKER_EXIT_NOMEM  ? " (out of memory)"
		                   : code == WORKER_EXIT_PARENT ? " (parent gone)"
		                   : code == 127                ? " (cannot execute the worker)"
		                                                : "";
		fmt(buf, len, "exited with status %d%s", code, what);
	} else {
		fmt(buf, len, "ended (wait status 0x%x)", (unsigned)status);
	}
}

/* Close the current generation's bus (the child, if alive, sees its peer go
 * and exits). Nothing is completed here. */
static void gen_close(struct plugin_instance *pi)
{
	if (!pi->process)
		return;
	pi->bus_up = false;
	loop_io_free(pi->rio);
	pi->rio = NULL;
	loop_io_free(pi->sio);
	pi->sio = NULL;
	if (pi->hsock_open) {
		nng_close(pi->hsock);
		pi->hsock_open = false;
	}
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		nng_msg_free(o->msg);
		free(o);
	}
	pi->out_tail = NULL;
	for (struct pending_txn *pt = pi->txns; pt;) {
		struct pending_txn *next = pt->next;
		pt->pi = NULL; /* freed by on_txn_done; the answer goes nowhere */
		pt->next = NULL;
		pt = next;
	}
	pi->txns = NULL;
	pthread_mutex_lock(&pi->pid_mu);
	pi->expect_pid = 0;
	pthread_mutex_unlock(&pi->pid_mu);
	loop_timer_disarm(pi->attach_timer);
	if (pi->cur) {
		pi->cur->current = false;
		pi->cur = NULL;
	}
	pi->stats.worker_pid = 0;
	const char *path = strncmp(pi->url, "ipc://", 6) == 0 ? pi->url + 6 : NULL;
	if (path)
		unlink(path); /* normally gone already */
}

static void on_restart(struct loop_timer *t, void *userdata);

static void schedule_restart(struct plugin_instance *pi)
{
	uint64_t now = loop_now();
	uint32_t mn = restart_min_ms(pi), mx = restart_max_ms(pi);
	if (!pi->backoff_ms ||
	    (pi->up_since && now - pi->up_since >= (uint64_t)mx * LOOP_NS_PER_MS))
		pi->backoff_ms = mn; /* the last worker ran long enough: start over */
	pi->up_since = 0;
	uint64_t delay = pi->backoff_ms;
	pi->backoff_ms = delay * 2 > mx ? mx : delay * 2;
	pi->stats.next_restart_ms = delay;
	log_info(pi->log_comp, "restarting the plugin worker in %llu ms", (unsigned long long)delay);
	loop_timer_arm_in(pi->restart_timer, delay * LOOP_NS_PER_MS);
}

/* Process mode: the current worker is gone or must go (reason says why).
 * Settles every pending event exactly once, reports, schedules a restart. */
static void gen_lost(struct plugin_instance *pi, const char *reason)
{
	if (!pi->process || !pi->bus_up)
		return;
	if (pi->cur)
		child_kill(pi->cur); /* make sure: it may only be hung or confused */
	struct event *sent = sent_take_all(pi), *ev = sent;
	if (!pi->stop_after_reap)
		loop_timer_disarm(pi->cb_timer);
	gen_close(pi);
	bool first_init = ev && ev->kind == EV_INIT && !pi->init_reported;
	if (first_init)
		log_error(pi->log_comp, "%s", reason);
	else
		report_failure(pi, reason); /* on_failed first, then the completions */
	pi->leading = false; /* a dead worker gets no on_deposed; a new one starts fresh */
	pi->term_elected_sent = false;
	for (struct event *next; ev; ev = next) {
		next = ev->next;
		if (ev->kind != EV_FINI && ev->kind != EV_INIT)
			pi->stats.dropped++;
		if (ev->kind == EV_RECONCILE) {
			pi->stats.reconciles_failed++;
			completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done, ev->done_ud, -EIO,
			                reason);
		} else if (first_init && ev == sent) {
			pi->init_reported = true;
			pi->state = PLUGIN_INSTANCE_FAILED;
			fmt(pi->init_error, sizeof(pi->init_error), "init failed: %s", reason);
			if (pi->cfg.on_init)
				completion_push(pi, COMP_INIT, (void (*)(void))pi->cfg.on_init,
				                pi->cfg.userdata, -EIO, pi->init_error);
		}
		free(ev);
	}
	/* nothing queued can reach this worker; a FINI is settled by finish_stop */
	while (pi->q_head) {
		struct event *q = pi->q_head;
		pi->q_head = q->next;
		pi->stats.queued--;
		if (q->kind != EV_FINI) {
			pi->stats.dropped++;
			event_complete_cancelled(pi, q, -EIO, reason);
		}
		free(q);
	}
	pi->q_tail = NULL;
	if (pi->stop_requested)
		finish_stop(pi);
	else if (!first_init && pi->state != PLUGIN_INSTANCE_FAILED)
		schedule_restart(pi);
	maybe_drained(pi);
}

/* the child's pidfd is readable: it exited */
static void on_child_exit(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct child *c = userdata;
	struct plugin_instance *pi = c->pi;
	int status = -1;
	(void)io;
	(void)fd;
	(void)events;
	pid_t r = waitpid(c->pid, &status, WNOHANG);
	if (r == 0)
		return; /* not yet */
	if (r < 0)
		status = -1; /* reaped by someone else (ECHILD) */
	pi->stats.last_exit_status = status;
	child_unlink(pi, c);
	char what[160];
	describe_status(status, what, sizeof(what));
	if (c->current) {
		/* what the worker managed to send before it died comes first */
		on_readable(NULL, -1, 0, pi);
	}
	if (c->current) {
		char reason[400];
		/* the page, not the sent list: acks the child queued before it
		 * died may never have left it (a batch's on_elected and replay
		 * look pending while reconcile ran) */
		struct worker_activity_snapshot snap = {0, 0, 0};
		uint64_t now = loop_now();
		if (pi->activity_page)
			worker_activity_read(pi->activity_page, &snap);
		if (snap.seq)
			fmt(reason, sizeof(reason), "plugin worker (pid %ld) %s during %s (after %llu ms)",
			    (long)c->pid, what, worker_callback_name(snap.kind),
			    (unsigned long long)((now > snap.since_ns ? now - snap.since_ns : 0) /
			                         LOOP_NS_PER_MS));
		else
			fmt(reason, sizeof(reason), "plugin worker (pid %ld) %s outside any callback",
			    (long)c->pid, what);
		gen_lost(pi, reason);
	} else if (status != 0) {
		log_debug(pi->log_comp, "former plugin worker (pid %ld) %s", (long)c->pid, what);
	}
	child_free(c);
	if (pi->stop_after_reap && !pi->children) {
		pi->stop_after_reap = false;
		loop_timer_disarm(pi->cb_timer);
		stopped_now(pi);
	}
}

/* Thread mode: a stop would wait for a callback that overran its limit,
 * maybe forever. Complete the stop now and abandon the thread: every
 * pending event is settled here (a late acknowledgement is then dropped as
 * unexpected), and plugin_instance_free leaves the thread behind with the
 * plugin's code loaded (it is never dlclosed under a running thread). */
static void stop_abandoning(struct plugin_instance *pi)
{
	log_warn(pi->log_comp, "stopping without waiting for the overrunning callback: its "
	         "thread is left behind, the plugin's code stays loaded");
	pi->leading = false;
	for (struct event *ev = sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		event_complete_cancelled(pi, ev, -EIO, "the plugin instance was stopped");
		free(ev);
	}
	while (pi->q_head) {
		struct event *q = pi->q_head;
		pi->q_head = q->next;
		pi->stats.queued--;
		event_complete_cancelled(pi, q, -ECANCELED, "the plugin instance was stopped");
		free(q);
	}
	pi->q_tail = NULL;
	loop_timer_disarm(pi->cb_timer);
	maybe_drained(pi);
	stopped_now(pi);
}

static void on_cb_timer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	char reason[320];
	(void)t;
	if (pi->stop_after_reap) {
		for (struct child *c = pi->children; c; c = c->next) {
			log_warn(pi->log_comp, "plugin worker (pid %ld) did not exit within %llu ms: killed",
			         (long)c->pid, (unsigned long long)(exit_grace_ns(pi) / LOOP_NS_PER_MS));
			child_kill(c);
		}
		return;
	}
	struct event *ev = pi->sent_head;
	if (!ev || pi->overrun)
		return;
	pi->stats.callback_timeouts++;
	uint32_t limit = plugin_instance_callback_timeout_ms(pi, ev->kind);
	const char *cb = ev_name(ev->kind);
	uint64_t since = ev->sent_ns;
	if (!plugin_instance_running(pi, &cb, &since))
		cb = ev_name(ev->kind);
	unsigned long long ran_ms = (unsigned long long)((loop_now() - since) / LOOP_NS_PER_MS);
	if (pi->process) {
		fmt(reason, sizeof(reason),
		    "callback %s exceeded its timeout of %u ms (running for %llu ms): plugin worker "
		    "(pid %ld) killed",
		    cb, limit, ran_ms, (long)(pi->cur ? pi->cur->pid : 0));
		gen_lost(pi, reason);
		return;
	}
	fmt(reason, sizeof(reason),
	    "callback %s exceeded its timeout of %u ms (running for %llu ms; thread isolation: it "
	    "cannot be stopped, the plugin stays failed until it returns)",
	    cb, limit, ran_ms);
	pi->overrun = true;
	report_failure(pi, reason);
	maybe_drained(pi);
	if (pi->stop_requested)
		stop_abandoning(pi);
}

/* the current worker's bus connection was not accepted in time (see
 * WORKER_ATTACH_TIMEOUT_MS): it is lost like a crashed one */
static void on_attach_timer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	char reason[320];
	bool attached;
	(void)t;
	if (!pi->process || !pi->bus_up || !pi->cur)
		return;
	pthread_mutex_lock(&pi->pid_mu);
	attached = pi->attached;
	pthread_mutex_unlock(&pi->pid_mu);
	if (attached)
		return;
	fmt(reason, sizeof(reason),
	    "plugin worker (pid %ld) was not connected to the bus within %u ms: killed (with nng "
	    "before 1.6.0, a local client that connects to the bus socket and hangs up does this)",
	    (long)pi->cur->pid, WORKER_ATTACH_TIMEOUT_MS);
	gen_lost(pi, reason);
}

/* nng pipe callback (an nng thread): accept only the child we spawned */
static void on_pipe_add(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct plugin_instance *pi = arg;
	uint64_t peer = 0;
	(void)ev;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &peer) != 0)
		peer = 0;
	pthread_mutex_lock(&pi->pid_mu); /* held by gen_start across posix_spawn */
	bool ok = pi->expect_pid > 0 && peer == (uint64_t)pi->expect_pid;
	if (ok)
		pi->attached = true;
	pthread_mutex_unlock(&pi->pid_mu);
	if (!ok)
		nng_pipe_close(p);
}

int plugin_instance_default_worker_path(char *buf, size_t len)
{
	char exe[PATH_MAX];
	int n = snprintf(buf, len, "%s/leasehold-worker", LH_PKGLIBEXECDIR);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (access(buf, X_OK) == 0)
		return 0;
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k > 0) {
		exe[k] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			char alt[PATH_MAX + 32];
			n = snprintf(alt, sizeof(alt), "%s/leasehold-worker", exe);
			if (n > 0 && (size_t)n < sizeof(alt) && (size_t)n < len && access(alt, X_OK) == 0) {
				memcpy(buf, alt, (size_t)n + 1);
				return 0;
			}
		}
	}
	return -ENOENT;
}

int plugin_instance_parse_isolation(const char *s, uint32_t *ret)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "thread") == 0)
		*ret = PLUGIN_ISOLATION_THREAD;
	else if (strcmp(s, "process") == 0)
		*ret = PLUGIN_ISOLATION_PROCESS;
	else
		return -EINVAL;
	return 0;
}

/* posix_spawn the helper for url; on success *ret_pid. Called with pid_mu held. */
static int spawn_worker(struct plugin_instance *pi, pid_t *ret_pid)
{
	extern char **environ;
	char dev[32], ino[32], parent[32], txn[32], lvl[8];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	pid_t pid;
	int r;

	fmt(dev, sizeof(dev), "%llu", (unsigned long long)pi->copy_dev);
	fmt(ino, sizeof(ino), "%llu", (unsigned long long)pi->copy_ino);
	fmt(parent, sizeof(parent), "%ld", (long)getpid());
	fmt(txn, sizeof(txn), "%u", pi->cfg.txn_timeout_ms);
	fmt(lvl, sizeof(lvl), "%d", (int)log_get_level());
	char *const argv[] = {
		(char *)"leasehold-worker", (char *)"--url", pi->url, (char *)"--plugin",
		pi->lp->copy_path, (char *)"--dev", dev, (char *)"--ino", ino, (char *)"--name",
		pi->lp->name, (char *)"--parent", parent, (char *)"--txn-timeout-ms", txn,
		(char *)"--log-level", lvl, (char *)"--activity-fd", (char *)"3", NULL,
	};
	r = -posix_spawn_file_actions_init(&fa);
	if (r < 0)
		return r;
	r = -posix_spawnattr_init(&attr);
	if (r < 0) {
		posix_spawn_file_actions_destroy(&fa);
		return r;
	}
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	/* the daemon blocks its signalfd signals and ignores SIGPIPE: not the child */
	if ((r = -posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
	                                                  POSIX_SPAWN_SETPGROUP)) < 0 ||
	    (r = -posix_spawnattr_setsigmask(&attr, &none)) < 0 ||
	    (r = -posix_spawnattr_setsigdefault(&attr, &all)) < 0 ||
	    (r = -posix_spawnattr_setpgroup(&attr, 0)) < 0 ||
	    (r = -posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) < 0)
		goto cleanup;
	if (pi->worker_stderr &&
	    (r = -posix_spawn_file_actions_addopen(&fa, 2, pi->worker_stderr,
	                                           O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0)
		goto cleanup;
	if ((r = -posix_spawn_file_actions_adddup2(&fa, 2, 1)) < 0 ||
	    (r = -posix_spawn_file_actions_adddup2(&fa, pi->activity_fd, 3)) < 0)
		goto cleanup;
	r = -posix_spawn(&pid, pi->worker_path, &fa, &attr, argv, environ);
	if (r == 0)
		*ret_pid = pid;
cleanup:
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return r;
}

/* Process mode: a fresh bus and a fresh child, then INIT. 0 or -errno. */
static int gen_start(struct plugin_instance *pi)
{
	struct child *c = NULL;
	nng_listener lst;
	pid_t pid = 0;
	int r = 0, rv;

	pi->gen++;
	memset(pi->activity_page, 0, sizeof(*pi->activity_page)); /* nothing of the last child */
	fmt(pi->url, sizeof(pi->url), "ipc://%s/w%ld.%u.%llu.sock", pi->runtime_dir, (long)getpid(),
	    pi->instance_id, (unsigned long long)pi->gen);
	if (strlen(pi->url) - 6 >= 108) /* sizeof(sun_path) */
		return -ENAMETOOLONG;
	if ((rv = nng_pair1_open(&pi->hsock)) != 0)
		return nng_to_errno(rv);
	pi->hsock_open = true;
	nng_socket_set_int(pi->hsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->hsock, NNG_OPT_RECVBUF, 64);
	if ((rv = nng_pipe_notify(pi->hsock, NNG_PIPE_EV_ADD_PRE, on_pipe_add, pi)) != 0 ||
	    (rv = nng_listener_create(&lst, pi->hsock, pi->url)) != 0 ||
	    (rv = nng_listener_set_int(lst, NNG_OPT_IPC_PERMISSIONS, 0600)) != 0 ||
	    (rv = nng_listener_start(lst, 0)) != 0 ||
	    (rv = nng_socket_get_int(pi->hsock, NNG_OPT_RECVFD, &pi->rfd)) != 0 ||
	    (rv = nng_socket_get_int(pi->hsock, NNG_OPT_SENDFD, &pi->sfd)) != 0) {
		r = nng_to_errno(rv);
		goto fail;
	}
	r = loop_io_add(pi->loop, pi->rfd, EPOLLIN, on_readable, pi, &pi->rio);
	if (r < 0)
		goto fail;
	c = calloc(1, sizeof(*c));
	struct event *init = event_new(EV_INIT);
	if (!c || !init) {
		free(init);
		r = -ENOMEM;
		goto fail;
	}
	c->pi = pi;
	c->pidfd = -1;
	pthread_mutex_lock(&pi->pid_mu);
	r = spawn_worker(pi, &pid);
	if (r == 0) {
		pi->expect_pid = pid;
		pi->attached = false;
	}
	pthread_mutex_unlock(&pi->pid_mu);
	if (r < 0) {
		free(init);
		log_error(pi->log_comp, "cannot start %s: %s", pi->worker_path, strerror(-r));
		goto fail;
	}
	c->pid = pid;
	c->pidfd = sys_pidfd_open(pid);
	if (c->pidfd < 0 ||
	    (r = loop_io_add(pi->loop, c->pidfd, EPOLLIN, on_child_exit, c, &c->io)) < 0) {
		if (c->pidfd < 0)
			r = -errno;
		log_error(pi->log_comp, "cannot watch worker %ld: %s", (long)pid, strerror(-r));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		free(init);
		goto fail;
	}
	c->current = true;
	c->next = pi->children;
	pi->children = c;
	pi->cur = c;
	pi->bus_up = true;
	pi->stats.worker_pid = (int32_t)pid;
	log_debug(pi->log_comp, "worker %ld started on %s", (long)pid, pi->url);
	loop_timer_arm_in(pi->attach_timer, (uint64_t)WORKER_ATTACH_TIMEOUT_MS * LOOP_NS_PER_MS);
	enqueue(pi, init);
	pump(pi);
	return 0;
fail:
	child_free(c);
	gen_close(pi);
	return r;
}

static void on_restart(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)t;
	if (pi->stop_requested || pi->bus_up)
		return;
	pi->stats.worker_restarts++;
	int r = gen_start(pi);
	if (r < 0) {
		char reason[256];
		fmt(reason, sizeof(reason), "cannot restart the plugin worker: %s", strerror(-r));
		report_failure(pi, reason);
		schedule_restart(pi);
	}
}

/* ======================================================================
 * Lifecycle
 * ====================================================================== */

static void *worker_thread(void *arg)
{
	worker_run(arg);
	return NULL;
}

static int start_thread(struct plugin_instance *pi)
{
	sigset_t all, old;
	sigfillset(&all);
	/* synchronous faults must stay deliverable (crash reports, sanitizers) */
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = -pthread_create(&pi->thread, NULL, worker_thread, pi->w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	pi->thread_running = true;
	char tname[16];
	fmt(tname, sizeof(tname), "lh-%s", pi->lp->name);
	pthread_setname_np(pi->thread, tname);
	return 0;
}

/* process mode: resolve and check what the child needs */
static int process_prepare(struct plugin_instance *pi)
{
	char buf[PATH_MAX];
	struct stat st;
	int r;
	if (pi->cfg.worker_path) {
		pi->worker_path = strdup(pi->cfg.worker_path);
	} else {
		r = plugin_instance_default_worker_path(buf, sizeof(buf));
		if (r < 0) {
			log_error(pi->log_comp, "process isolation: no leasehold-worker program (%s)", buf);
			return r;
		}
		pi->worker_path = strdup(buf);
	}
	if (!pi->worker_path)
		return -ENOMEM;
	if (access(pi->worker_path, X_OK) < 0) {
		r = -errno;
		log_error(pi->log_comp, "process isolation: %s: %s", pi->worker_path, strerror(-r));
		return r;
	}
	if (!pi->lp->copy_path || stat(pi->lp->copy_path, &st) < 0)
		return pi->lp->copy_path ? -errno : -EINVAL;
	pi->copy_dev = st.st_dev;
	pi->copy_ino = st.st_ino;
	if (pi->cfg.runtime_dir) {
		pi->runtime_dir = strdup(pi->cfg.runtime_dir);
	} else {
		const char *slash = strrchr(pi->lp->copy_path, '/');
		pi->runtime_dir = slash ? strndup(pi->lp->copy_path, (size_t)(slash - pi->lp->copy_path))
		                        : strdup(".");
	}
	if (!pi->runtime_dir)
		return -ENOMEM;
	if (pi->cfg.worker_stderr && !(pi->worker_stderr = strdup(pi->cfg.worker_stderr)))
		return -ENOMEM;
	/* the children's activity page; posix_spawn's dup2 makes it fd 3 of
	 * the child, without MFD_CLOEXEC's effect there */
	pi->activity_fd = memfd_create("leasehold-activity", MFD_CLOEXEC);
	if (pi->activity_fd < 0)
		return -errno;
	if (ftruncate(pi->activity_fd, (off_t)sizeof(*pi->activity_page)) < 0)
		return -errno;
	void *m = mmap(NULL, sizeof(*pi->activity_page), PROT_READ | PROT_WRITE, MAP_SHARED,
	               pi->activity_fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	pi->activity_page = m;
	return 0;
}

int plugin_instance_new(struct loader_plugin *lp, struct loop *l, const struct driver_host *host,
                        const char *node_id, const struct plugin_instance_config *cfg,
                        struct plugin_instance **ret_pi)
{
	struct plugin_instance *pi = calloc(1, sizeof(*pi));
	int r, rv;
	if (!pi)
		return -ENOMEM;
	pthread_mutex_init(&pi->pid_mu, NULL);
	pi->loop = l;
	pi->host = *host;
	if (cfg)
		pi->cfg = *cfg;
	/* borrowed strings of cfg are copied below (process_prepare); never kept */
	pi->cfg.worker_path = pi->cfg.runtime_dir = pi->cfg.worker_stderr = NULL;
	if (!pi->cfg.txn_timeout_ms)
		pi->cfg.txn_timeout_ms = DEFAULT_TXN_TIMEOUT_MS;
	pi->rfd = pi->sfd = -1;
	pi->activity_fd = -1;
	pi->stats.last_exit_status = -1;
	pi->instance_id = atomic_fetch_add(&g_instance_counter, 1u);
	snprintf(pi->log_comp, sizeof(pi->log_comp), "plugin %s", lp->name);
	pi->data_prefix = strdup(host->data_prefix ? host->data_prefix : "");
	pi->node_id = strdup(node_id ? node_id : "");
	if (!pi->data_prefix || !pi->node_id) {
		r = -ENOMEM;
		goto fail;
	}
	pi->prefix_len = strlen(pi->data_prefix);
	pi->host.data_prefix = pi->data_prefix;
	if (pi->prefix_len == 0 || (cfg && cfg->isolation > PLUGIN_ISOLATION_PROCESS)) {
		r = -EINVAL; /* an empty prefix would give the plugin all of etcd */
		goto fail;
	}
	pi->process = cfg && cfg->isolation == PLUGIN_ISOLATION_PROCESS;
	if ((r = loop_timer_new(l, on_defer, pi, &pi->defer)) < 0 ||
	    (r = loop_timer_new(l, on_cb_timer, pi, &pi->cb_timer)) < 0 ||
	    (r = loop_timer_new(l, on_restart, pi, &pi->restart_timer)) < 0 ||
	    (r = loop_timer_new(l, on_attach_timer, pi, &pi->attach_timer)) < 0)
		goto fail;
	pi->lp = lp; /* needed below; given back on failure */

	if (pi->process) {
		struct plugin_instance_config orig = *cfg;
		pi->cfg.worker_path = orig.worker_path;
		pi->cfg.runtime_dir = orig.runtime_dir;
		pi->cfg.worker_stderr = orig.worker_stderr;
		r = process_prepare(pi);
		pi->cfg.worker_path = pi->cfg.runtime_dir = pi->cfg.worker_stderr = NULL;
		if (r < 0)
			goto fail;
		pi->state = PLUGIN_INSTANCE_STARTING;
		r = gen_start(pi);
		if (r < 0)
			goto fail;
		*ret_pi = pi;
		return 0;
	}

	snprintf(pi->url, sizeof(pi->url), "inproc://leasehold-%ld-%u-%s", (long)getpid(),
	         pi->instance_id, lp->name);
	if ((rv = nng_pair1_open(&pi->hsock)) != 0)
		goto nng_fail;
	pi->hsock_open = true;
	if ((rv = nng_pair1_open(&pi->wsock)) != 0)
		goto nng_fail;
	pi->wsock_open = true;
	nng_socket_set_int(pi->hsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->hsock, NNG_OPT_RECVBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->wsock, NNG_OPT_RECVBUF, 64);
	if ((rv = nng_listen(pi->hsock, pi->url, NULL, 0)) != 0)
		goto nng_fail;
	if ((rv = nng_dial(pi->wsock, pi->url, NULL, 0)) != 0)
		goto nng_fail;
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_RECVFD, &pi->rfd)) != 0)
		goto nng_fail;
	if ((rv = nng_socket_get_int(pi->hsock, NNG_OPT_SENDFD, &pi->sfd)) != 0)
		goto nng_fail;
	r = loop_io_add(l, pi->rfd, EPOLLIN, on_readable, pi, &pi->rio);
	if (r < 0)
		goto fail;
	r = worker_new(&lp->desc, pi->wsock, pi->cfg.txn_timeout_ms, &pi->w);
	if (r < 0)
		goto fail;
	pi->bus_up = true;
	struct event *init = event_new(EV_INIT);
	if (!init) {
		r = -ENOMEM;
		goto fail;
	}
	enqueue(pi, init);
	r = start_thread(pi);
	if (r < 0)
		goto fail;
	pi->state = PLUGIN_INSTANCE_STARTING;
	pump(pi);
	*ret_pi = pi;
	return 0;

nng_fail:
	r = nng_to_errno(rv);
fail:
	pi->lp = NULL; /* stays the caller's */
	plugin_instance_free(pi);
	return r;
}

void plugin_instance_stop(struct plugin_instance *pi, plugin_instance_stopped_fn stopped,
                          void *userdata)
{
	if (pi->stop_requested)
		return;
	plugin_instance_deposed(pi);
	pi->stop_requested = true;
	pi->stopped = stopped;
	pi->stopped_ud = userdata;
	pi->state = PLUGIN_INSTANCE_STOPPING;
	loop_timer_disarm(pi->restart_timer);
	bool alive = pi->process ? pi->bus_up : (pi->thread_running && !pi->broken);
	if (!alive) {
		finish_stop(pi);
		return;
	}
	if (pi->overrun) {
		stop_abandoning(pi);
		return;
	}
	struct event *ev = event_new(EV_FINI);
	if (!ev) {
		mark_broken(pi, "out of memory");
		finish_stop(pi);
		return;
	}
	enqueue(pi, ev);
	pump(pi);
}

/* ---- synchronous shutdown for free() without a completed stop(): blocks ---- */

static int sync_send(struct plugin_instance *pi, nng_msg *msg)
{
	if (!msg)
		return -ENOMEM;
	int rv = nng_sendmsg(pi->hsock, msg, 0);
	if (rv != 0) {
		nng_msg_free(msg);
		return nng_to_errno(rv);
	}
	return 0;
}

static void sync_refuse_txn(struct plugin_instance *pi, uint64_t id)
{
	TxnReply rep = LEASEHOLD__BUS__TXN_REPLY__INIT;
	rep.id = id;
	rep.err = -ECANCELED;
	rep.message = bus_bin_str("the plugin instance is being freed");
	ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_TXN_REPLY;
	tw.txn_reply = &rep;
	sync_send(pi, bus_pack_msg(&tw.base));
}

/* wait for the acks of every event handed to the worker, refusing txns
 * meanwhile */
static int sync_wait_sent(struct plugin_instance *pi)
{
	while (pi->sent_head) {
		nng_msg *m;
		int rv = nng_recvmsg(pi->hsock, &m, 0);
		if (rv != 0) {
			log_error(pi->log_comp, "worker did not answer within %d ms: %s",
			          sync_wait_ms(SYNC_STOP_TIMEOUT_MS), nng_strerror(rv));
			return nng_to_errno(rv);
		}
		ToHost *th = leasehold__bus__to_host__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		if (!th)
			continue;
		if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_DONE &&
		    th->done->seq == pi->sent_head->seq) {
			free(sent_unlink_head(pi));
		} else if (th->msg_case == LEASEHOLD__BUS__TO_HOST__MSG_TXN) {
			sync_refuse_txn(pi, th->txn->id);
		}
		leasehold__bus__to_host__free_unpacked(th, NULL);
	}
	return 0;
}

/* hand one event to the worker (behind what it already has) */
static int sync_hand_over(struct plugin_instance *pi, enum ev_kind kind)
{
	struct event *ev = event_new(kind);
	if (!ev)
		return -ENOMEM;
	ev->seq = ++pi->next_seq;
	int r = sync_send(pi, events_msg(pi, &ev, 1));
	if (r < 0) {
		free(ev);
		return r;
	}
	pi->stats.messages++;
	sent_push(pi, ev);
	return 0;
}

static int sync_run(struct plugin_instance *pi, enum ev_kind kind)
{
	int r = sync_hand_over(pi, kind);
	return r < 0 ? r : sync_wait_sent(pi);
}

static void stop_sync(struct plugin_instance *pi)
{
	nng_socket_set_ms(pi->hsock, NNG_OPT_RECVTIMEO, sync_wait_ms(SYNC_STOP_TIMEOUT_MS));
	nng_socket_set_ms(pi->hsock, NNG_OPT_SENDTIMEO, sync_wait_ms(SYNC_STOP_TIMEOUT_MS));
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		sync_send(pi, o->msg);
		free(o);
	}
	pi->out_tail = NULL;
	bool fini_out = false, deposed_owed = pi->leading && pi->term_elected_sent;
	for (const struct event *ev = pi->sent_head; ev; ev = ev->next)
		fini_out |= ev->kind == EV_FINI;
	for (const struct event *ev = pi->q_head; ev; ev = ev->next)
		deposed_owed |= ev->kind == EV_DEPOSED; /* deposed() queued it: still owed */
	/* on_deposed first, behind what the worker has: the worker skips what of
	 * the term it has not started yet. It goes before the txn refusals below,
	 * so a callback waiting for a txn has it in its stash when it returns. */
	int r = !fini_out && deposed_owed ? sync_hand_over(pi, EV_DEPOSED) : 0;
	pi->leading = false;
	pi->term_elected_sent = false;
	/* txns in flight in etcd will never be answered through the loop now */
	for (struct pending_txn *pt = pi->txns; pt; pt = pt->next) {
		pt->pi = NULL;
		sync_refuse_txn(pi, pt->id);
	}
	pi->txns = NULL;
	if (r < 0 || sync_wait_sent(pi) < 0 || fini_out)
		return;
	sync_run(pi, EV_FINI);
}

void plugin_instance_free(struct plugin_instance *pi)
{
	if (!pi)
		return;
	bool abandoned = false;
	if (pi->dispatching) {
		pi->free_requested = true; /* on_defer frees it when its loop ends */
		return;
	}
	if (pi->thread_running) {
		/* an overrunning callback would only make this wait its full
		 * timeout for acks that cannot come */
		if (!pi->broken && pi->hsock_open && !pi->overrun)
			stop_sync(pi);
		/* wake a worker still blocked on its socket (only after a failure) */
		if (pi->wsock_open) {
			nng_close(pi->wsock);
			pi->wsock_open = false;
		}
		/* a thread stuck in a plugin callback cannot be stopped: leave it
		 * behind rather than hang (a shutdown would never end). Its
		 * worker state and the plugin's code stay until the process exits. */
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until); /* a wall-clock step must not cut it short */
		int ms = pi->overrun ? 0 : sync_wait_ms(SYNC_KILL_WAIT_MS);
		until.tv_sec += ms / 1000;
		until.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (pthread_clockjoin_np(pi->thread, NULL, CLOCK_MONOTONIC, &until) != 0) {
			log_error(pi->log_comp, "the plugin thread is stuck in a callback; leaving it "
			          "behind (its code stays loaded until the process exits)");
			pthread_detach(pi->thread);
			abandoned = true;
		}
		pi->thread_running = false;
	}
	if (pi->process) {
		/* a live, connected child gets deposed + fini synchronously */
		struct pollfd pfd = {.fd = pi->cur ? pi->cur->pidfd : -1, .events = POLLIN};
		if (pi->bus_up && pi->hsock_open && pi->cur && poll(&pfd, 1, 0) == 0)
			stop_sync(pi);
		gen_close(pi);
		while (pi->children) {
			struct child *c = pi->children;
			pi->children = c->next;
			pfd.fd = c->pidfd;
			if (c->pidfd < 0 || poll(&pfd, 1, sync_wait_ms(SYNC_KILL_WAIT_MS)) != 1)
				child_kill(c);
			while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
				;
			child_free(c);
		}
		pi->rio = pi->sio = NULL;
	}
	loop_io_free(pi->rio);
	loop_io_free(pi->sio);
	if (pi->hsock_open)
		nng_close(pi->hsock);
	if (pi->wsock_open)
		nng_close(pi->wsock);
	for (struct pending_txn *pt = pi->txns; pt;) {
		struct pending_txn *next = pt->next;
		pt->pi = NULL; /* freed by on_txn_done when etcd answers */
		pt->next = NULL;
		pt = next;
	}
	while (pi->q_head) {
		struct event *ev = pi->q_head;
		pi->q_head = ev->next;
		free(ev);
	}
	for (struct event *ev = sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		free(ev);
	}
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		nng_msg_free(o->msg);
		free(o);
	}
	while (pi->c_head) {
		struct completion *c = pi->c_head;
		pi->c_head = c->next;
		completion_free(c);
	}
	while (pi->drains) {
		struct drain_waiter *d = pi->drains;
		pi->drains = d->next;
		free(d);
	}
	loop_timer_free(pi->defer);
	loop_timer_free(pi->cb_timer);
	loop_timer_free(pi->restart_timer);
	loop_timer_free(pi->attach_timer);
	if (!abandoned) {
		worker_free(pi->w);
		loader_close(pi->lp);
	} else {
		struct left_behind *lb = malloc(sizeof(*lb));
		if (lb) {
			*lb = (struct left_behind){.next = g_left_behind, .w = pi->w, .lp = pi->lp};
			g_left_behind = lb;
		}
	}
	if (pi->activity_page)
		munmap(pi->activity_page, sizeof(*pi->activity_page));
	if (pi->activity_fd >= 0)
		close(pi->activity_fd);
	free(pi->worker_path);
	free(pi->runtime_dir);
	free(pi->worker_stderr);
	free(pi->data_prefix);
	free(pi->node_id);
	pthread_mutex_destroy(&pi->pid_mu);
	free(pi);
}

enum plugin_instance_state plugin_instance_state(const struct plugin_instance *pi)
{
	return pi->state;
}

const struct loader_plugin *plugin_instance_plugin(const struct plugin_instance *pi)
{
	return pi->lp;
}

void plugin_instance_get_stats(const struct plugin_instance *pi, struct plugin_instance_stats *ret)
{
	*ret = pi->stats;
}

uint64_t plugin_instance_pending(const struct plugin_instance *pi)
{
	return pi->stats.queued + pi->stats.in_flight;
}

const char *plugin_instance_bus_url(const struct plugin_instance *pi)
{
	return pi->url;
}

pid_t plugin_instance_worker_pid(const struct plugin_instance *pi)
{
	return pi->cur ? pi->cur->pid : 0;
}

int plugin_instance_inject_from_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	return handle_bytes(pi, buf, len);
}

int plugin_instance_send_raw_to_worker(struct plugin_instance *pi, const void *buf, size_t len)
{
	nng_msg *msg;
	if (pi->broken || !pi->bus_up)
		return -EPIPE;
	if (nng_msg_alloc(&msg, len) != 0)
		return -ENOMEM;
	if (len)
		memcpy(nng_msg_body(msg), buf, len);
	return send_nng(pi, msg);
}
