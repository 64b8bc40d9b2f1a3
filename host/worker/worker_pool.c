/* SPDX-License-Identifier: MIT */
/*
 * worker_pool.c - concurrent reconcile_key (ABI 1.3 key_concurrency > 1):
 * the key threads of one worker, in both isolations (the same code runs in
 * the daemon's plugin thread and in the leasehold-worker process).
 *
 * Design notes
 * - The bus loop (worker_run, its own thread) stays the only receiver of
 *   the socket. A RECONCILE_KEY it may run goes to a free slot; the slot's
 *   thread (started at its first key) runs the plugin's reconcile_key and
 *   sends the EventDone itself. nng sockets may be sent on from any thread.
 * - Replies. A key thread's txn and range requests carry ids from one
 *   atomic counter; the thread registers the id it awaits before the
 *   request leaves (worker_pool_expect), the bus loop hands the reply with
 *   that id to it (worker_pool_route), the thread waits on its condition
 *   variable with the txn timeout as deadline (worker_pool_wait). A reply
 *   nobody awaits any more is a late one and is discarded by the caller.
 * - A slot is free again BEFORE its EventDone is sent: the host hands out
 *   a new key (or, once no key is in flight, any other event) only after
 *   an EventDone, so the bus loop always finds a free slot for a key and
 *   finds no key running when another event comes. worker.c refuses what
 *   breaks that (it is the host's promise, not the plugin's).
 * - Each running key has its own struct worker_call (reason, refusal,
 *   arena, requeue-after), found by the host API through the thread's
 *   worker_call_set. The worker's other state (token, configuration,
 *   grants, prefix) is only read while keys run: nothing changes it then.
 * - Activity: the page has one writer at a time. Under the pool's mutex,
 *   the first key of a busy stretch publishes "reconcile_key" and the last
 *   to return clears it; the bus loop writes only while no key runs.
 * - Threading of this file: every function but the thread body runs on
 *   the bus loop's thread, except worker_pool_expect and worker_pool_wait,
 *   which run on a key thread. mu guards every field of the pool and its
 *   slots; it is never held across a plugin call or an nng call.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/loop.h"
#include "worker/worker_crash_report.h"
#include "worker/worker_internal.h"

struct worker_slot {
	struct worker_call call; /* the running key's own state */
	struct worker_pool *pool;
	pthread_t thread;
	bool started;	   /* the thread exists (joined at close) */
	pthread_cond_t cv; /* work, a reply, or the end */
	ToWorker *work;	   /* the RECONCILE_KEY to run next (owned) */
	bool busy;	   /* given work, not yet answered */
	uint64_t wait_id;  /* the reply awaited, 0 = none */
	ToWorker *reply;   /* that reply, once the bus loop received it */
};

struct worker_pool {
	struct worker *w;
	pthread_mutex_t mu;
	unsigned n, busy;
	bool closed; /* the bus closed or the worker ends: no more work */
	struct worker_slot slots[];
};

int worker_pool_new(struct worker *w, unsigned n, struct worker_pool **ret)
{
	struct worker_pool *p = calloc(1, sizeof(*p) + n * sizeof(p->slots[0]));
	if (!p)
		return -ENOMEM;
	p->w = w;
	p->n = n;
	pthread_condattr_t ca;
	if (pthread_mutex_init(&p->mu, NULL) != 0 || pthread_condattr_init(&ca) != 0) {
		free(p);
		return -ENOMEM;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (unsigned i = 0; i < n; i++) {
		struct worker_slot *s = &p->slots[i];
		s->pool = p;
		s->call.w = w;
		s->call.slot = s;
		pthread_cond_init(&s->cv, &ca);
	}
	pthread_condattr_destroy(&ca);
	*ret = p;
	return 0;
}

/* run one key as the slot's call; the EventDone (packed) */
static nng_msg *worker_pool_run_key(struct worker_slot *s, const Event *ev)
{
	struct worker *w = s->pool->w;
	struct worker_call *c = &s->call;
	c->errmsg[0] = 0;
	c->txn_error[0] = 0;
	c->requeue_after_ms = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	crash_report_enter(w->crash_who[WORKER_CB_RECONCILE_KEY]);
	c->in_callback = true;
	int32_t err = worker_keys_run(w, c, ev->reconcile_key);
	c->in_callback = false;
	crash_report_leave();
	worker_arena_free(c);
	if (err > 0 || err < -4095)
		err = -EIO; /* not a negative errno: normalise */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec -
		      (uint64_t)t0.tv_nsec;
	return worker_done_msg(w, c, ev, err, false, ns);
}

static void *worker_pool_thread(void *arg)
{
	struct worker_slot *s = arg;
	struct worker_pool *p = s->pool;
	worker_call_set(&s->call);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!s->work && !p->closed)
			pthread_cond_wait(&s->cv, &p->mu);
		if (!s->work)
			break;
		ToWorker *tw = s->work;
		s->work = NULL;
		pthread_mutex_unlock(&p->mu);
		nng_msg *done = worker_pool_run_key(s, tw->event);
		pthread_mutex_lock(&p->mu);
		s->busy = false;
		if (--p->busy == 0)
			worker_activity_set(p->w, 0, 0);
		pthread_mutex_unlock(&p->mu);
		/* free before the host hears of it: see the top */
		if (done && nng_sendmsg(p->w->sock, done, 0) != 0)
			nng_msg_free(done);
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

unsigned worker_pool_busy(struct worker_pool *p)
{
	pthread_mutex_lock(&p->mu);
	unsigned n = p->busy;
	pthread_mutex_unlock(&p->mu);
	return n;
}

int worker_pool_start(struct worker_pool *p, ToWorker *tw)
{
	int r = -EBUSY;
	pthread_mutex_lock(&p->mu);
	for (unsigned i = 0; i < p->n && r == -EBUSY; i++) {
		struct worker_slot *s = &p->slots[i];
		if (s->busy)
			continue;
		if (!s->started) {
			int e = pthread_create(&s->thread, NULL, worker_pool_thread, s);
			if (e != 0) {
				r = -e;
				break;
			}
			s->started = true;
		}
		s->busy = true;
		s->work = tw;
		if (p->busy++ == 0)
			worker_activity_set(p->w, tw->event->seq ? tw->event->seq : UINT64_MAX,
					    WORKER_CB_RECONCILE_KEY);
		pthread_cond_signal(&s->cv);
		r = 0;
	}
	pthread_mutex_unlock(&p->mu);
	return r;
}

void worker_pool_expect(struct worker_pool *p, struct worker_call *c, uint64_t id)
{
	pthread_mutex_lock(&p->mu);
	c->slot->wait_id = id;
	pthread_mutex_unlock(&p->mu);
}

bool worker_pool_route(struct worker_pool *p, ToWorker *tw)
{
	bool taken = false;
	pthread_mutex_lock(&p->mu);
	for (unsigned i = 0; i < p->n && !taken; i++) {
		struct worker_slot *s = &p->slots[i];
		if (s->wait_id && s->wait_id == tw->txn_reply->id && !s->reply) {
			s->reply = tw;
			pthread_cond_signal(&s->cv);
			taken = true;
		}
	}
	pthread_mutex_unlock(&p->mu);
	return taken;
}

ToWorker *worker_pool_wait(struct worker_pool *p, struct worker_call *c, uint64_t id, int *err)
{
	struct worker_slot *s = c->slot;
	struct timespec dl = loop_deadline_ts(CLOCK_MONOTONIC, p->w->txn_timeout_ms);
	int rv = 0;
	pthread_mutex_lock(&p->mu);
	while (!s->reply && !p->closed && rv != ETIMEDOUT)
		rv = pthread_cond_timedwait(&s->cv, &p->mu, &dl);
	ToWorker *tw = s->reply;
	s->reply = NULL;
	s->wait_id = 0; /* a reply after this is a late one */
	bool closed = p->closed;
	pthread_mutex_unlock(&p->mu);
	if (tw && tw->txn_reply->id == id)
		return tw;
	if (tw)
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
	*err = closed ? -ECANCELED : -ETIMEDOUT;
	return NULL;
}

void worker_pool_close(struct worker_pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->closed = true;
	for (unsigned i = 0; i < p->n; i++)
		pthread_cond_signal(&p->slots[i].cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n; i++) {
		struct worker_slot *s = &p->slots[i];
		if (s->started) {
			pthread_join(s->thread, NULL);
			s->started = false;
		}
	}
}

void worker_pool_free(struct worker_pool *p)
{
	if (!p)
		return;
	worker_pool_close(p);
	for (unsigned i = 0; i < p->n; i++) {
		struct worker_slot *s = &p->slots[i];
		if (s->work)
			leasehold__bus__to_worker__free_unpacked(s->work, NULL);
		if (s->reply)
			leasehold__bus__to_worker__free_unpacked(s->reply, NULL);
		worker_arena_free(&s->call);
		pthread_cond_destroy(&s->cv);
	}
	pthread_mutex_destroy(&p->mu);
	free(p);
}
