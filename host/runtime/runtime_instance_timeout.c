/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_timeout.c - callback timeouts and activity: the limit of
 * each callback kind, the callback the worker runs right now (its activity
 * page), and what happens when one overruns (process: the worker is killed
 * and restarted; thread: the instance stays failed until it returns).
 * Reading guide: runtime_instance.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

static const char *pi_timeout_ev_name(enum ev_kind k)
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
static const struct worker_activity *pi_timeout_live_activity(const struct plugin_instance *pi)
{
	if (pi->process)
		return pi->cur && pi->bus_up ? pi->activity_page : NULL;
	return pi->w && pi->thread_running ? worker_activity(pi->w) : NULL;
}

bool plugin_instance_running(const struct plugin_instance *pi, const char **ret_callback,
			     uint64_t *ret_since_ns)
{
	const struct worker_activity *a = pi_timeout_live_activity(pi);
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

/* Thread mode: a stop would wait for a callback that overran its limit,
 * maybe forever. Complete the stop now and abandon the thread: every
 * pending event is settled here (a late acknowledgement is then dropped as
 * unexpected), and plugin_instance_free leaves the thread behind with the
 * plugin's code loaded (it is never dlclosed under a running thread). */
void pi_stop_abandoning(struct plugin_instance *pi)
{
	log_warn(pi->log_comp, "stopping without waiting for the overrunning callback: its "
			       "thread is left behind, the plugin's code stays loaded");
	pi->leading = false;
	pi_watch_stop(pi);
	for (struct event *ev = pi_sent_take_all(pi), *next; ev; ev = next) {
		next = ev->next;
		pi_event_complete_cancelled(pi, ev, -EIO, "the plugin instance was stopped");
		pi_event_free(ev);
	}
	while (pi->q_head) {
		struct event *q = pi->q_head;
		pi->q_head = q->next;
		pi->stats.queued--;
		pi_event_complete_cancelled(pi, q, -ECANCELED, "the plugin instance was stopped");
		pi_event_free(q);
	}
	pi->q_tail = NULL;
	loop_timer_disarm(pi->cb_timer);
	pi_maybe_drained(pi);
	pi_stopped_now(pi);
}

void pi_on_cb_timer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	char reason[320];
	(void)t;
	if (pi->stop_after_reap) {
		for (struct child *c = pi->children; c; c = c->next) {
			log_warn(pi->log_comp,
				 "plugin worker (pid %ld) did not exit within %llu ms: killed",
				 (long)c->pid,
				 (unsigned long long)(pi_exit_grace_ns(pi) / LOOP_NS_PER_MS));
			pi_child_kill(c);
		}
		return;
	}
	struct event *ev = pi->sent_head;
	if (!ev || pi->overrun)
		return;
	pi->stats.callback_timeouts++;
	uint32_t limit = plugin_instance_callback_timeout_ms(pi, ev->kind);
	const char *cb = pi_timeout_ev_name(ev->kind);
	uint64_t since = ev->sent_ns;
	if (!plugin_instance_running(pi, &cb, &since))
		cb = pi_timeout_ev_name(ev->kind);
	unsigned long long ran_ms = (unsigned long long)((loop_now() - since) / LOOP_NS_PER_MS);
	if (pi->process) {
		pi_fmt(reason, sizeof(reason),
		       "callback %s exceeded its timeout of %u ms (running for %llu ms): plugin "
		       "worker "
		       "(pid %ld) killed",
		       cb, limit, ran_ms, (long)(pi->cur ? pi->cur->pid : 0));
		pi_gen_lost(pi, reason);
		return;
	}
	pi_fmt(
	    reason, sizeof(reason),
	    "callback %s exceeded its timeout of %u ms (running for %llu ms; thread isolation: it "
	    "cannot be stopped, the plugin stays failed until it returns)",
	    cb, limit, ran_ms);
	pi->overrun = true;
	pi->overrun_seq = ev->seq; /* keys beside it may return first */
	pi_report_failure(pi, reason);
	pi_maybe_drained(pi);
	if (pi->stop_requested)
		pi_stop_abandoning(pi);
}
