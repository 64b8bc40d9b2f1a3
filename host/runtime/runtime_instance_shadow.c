/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_shadow.c - shadow preview runs (plugin_instance_shadow):
 * one reconcile (after the watches' snapshot; a keyed plugin's keys after
 * it) of a plugin that does not lead, with every write captured host-side
 * instead of sent (runtime_instance_shadow_txn.c). Reading guide:
 * runtime_instance.c.
 *
 * Design notes
 * - A plugin with watches first gets their snapshot, read once at one
 *   revision and delivered as a term's first batches
 *   (runtime_instance_shadow_snapshot.c); the reconcile is queued when every
 *   batch was answered. A keyed plugin then gets one reconcile_key per key
 *   those batches stood for (runtime_instance_shadow_keys.c), one at a
 *   time. A run ends (its object freed) only when nothing of it is queued
 *   or in flight any more: a late callback of an ended run can then never
 *   be captured into the next one.
 * - Bounded: the writes (runtime_instance_shadow_txn.c), the keys, and the
 *   run's timeout (the callback may run on: its later txns are refused).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

static void pi_shadow_report_free(struct plugin_shadow_report *rep)
{
	for (size_t i = 0; i < rep->n_writes; i++)
		free(rep->writes[i].key);
	free(rep->writes);
	memset(rep, 0, sizeof(*rep));
}

static void pi_shadow_destroy(struct pi_shadow *sh)
{
	pi_shadow_snap_free(sh->snap);
	pi_shadow_keys_free(sh->keys);
	loop_timer_free(sh->timer);
	pi_shadow_report_free(&sh->rep);
	sh->magic = 0;
	free(sh);
}

void pi_shadow_free(struct plugin_instance *pi)
{
	if (pi->shadow) {
		pi->shadow->pi = NULL;
		pi_shadow_destroy(pi->shadow);
		pi->shadow = NULL;
	}
}

static void pi_shadow_report(struct pi_shadow *sh, int err, const char *msg)
{
	if (sh->reported)
		return;
	sh->reported = true;
	loop_timer_disarm(sh->timer);
	sh->done(sh->ud, err, msg, &sh->rep);
}

/* the run is over once it reported and nothing of it is queued or in
 * flight */
static void pi_shadow_end_if_idle(struct pi_shadow *sh)
{
	if (!sh->reported || sh->event_queued || pi_shadow_snap_busy(sh->snap))
		return;
	if (sh->pi && sh->pi->shadow == sh)
		sh->pi->shadow = NULL;
	pi_shadow_destroy(sh);
}

static void pi_shadow_on_timer(struct loop_timer *t, void *ud)
{
	struct pi_shadow *sh = ud;
	char msg[200];
	(void)t;
	CHECK_OBJ(sh, PI_SHADOW_MAGIC);
	snprintf(msg, sizeof(msg),
		 "the shadow run did not finish within %u ms (the callback runs on; its later "
		 "txns are refused, never sent)",
		 sh->timeout_ms);
	pi_shadow_report(sh, -ETIMEDOUT, msg);
	pi_shadow_snap_stop(sh->snap);
	pi_shadow_end_if_idle(sh);
}

void pi_shadow_cancel(struct plugin_instance *pi)
{
	struct pi_shadow *sh = pi->shadow;
	if (!sh)
		return;
	pi_shadow_report(sh, -ECANCELED, "the plugin's instance stops on this node: the shadow "
					 "run was abandoned");
	pi_shadow_snap_stop(sh->snap);
	pi_shadow_end_if_idle(sh);
}

/* queue ev (the reconcile or a key), unless a term began meanwhile or the
 * instance stops */
static void pi_shadow_queue(struct pi_shadow *sh, struct event *ev)
{
	struct plugin_instance *pi = sh->pi;
	if (pi->stop_requested) {
		free(ev);
		pi_shadow_report(sh, -ECANCELED, "the plugin's instance stops on this node: the "
						 "shadow run was abandoned");
		pi_shadow_end_if_idle(sh);
		return;
	}
	if (pi->leading) {
		free(ev);
		pi_shadow_report(sh, -EBUSY, "a term began on this node during the shadow run: the "
					     "preview was abandoned");
		pi_shadow_end_if_idle(sh);
		return;
	}
	ev->shadow = true;
	ev->term = pi->term;
	sh->event_queued = true;
	pi_enqueue(pi, ev);
	pi_pump(pi);
}

/* the last callback of the run returned: its answer */
static void pi_shadow_finish(struct pi_shadow *sh)
{
	char msg[400];
	if (pi_shadow_keys_truncated(sh->keys)) {
		sh->rep.truncated = true;
		snprintf(msg, sizeof(msg), "the snapshot has more than %u keys: reconcile_key ran for "
					   "the first %u only",
			 PLUGIN_SHADOW_MAX_KEYS, PLUGIN_SHADOW_MAX_KEYS);
		pi_shadow_report(sh, -E2BIG, msg);
	} else if (sh->keys_failed) {
		snprintf(msg, sizeof(msg), "reconcile_key failed for %llu of %zu key(s); the first: %s",
			 (unsigned long long)sh->keys_failed, pi_shadow_keys_count(sh->keys),
			 sh->key_error);
		pi_shadow_report(sh, -EIO, msg);
	} else {
		pi_shadow_report(sh, 0, NULL);
	}
}

/* the next key's reconcile_key, or the run's answer after the last */
static void pi_shadow_next_key(struct pi_shadow *sh)
{
	struct event *ev;
	if (sh->rep.truncated) { /* the write bound: the txn that passed it failed */
		pi_shadow_report(sh, -E2BIG, "the shadow run reached its bound of captured writes");
		pi_shadow_end_if_idle(sh);
		return;
	}
	if (pi_shadow_keys_next(sh->keys, sh->run, &ev) < 0) {
		pi_shadow_report(sh, -ENOMEM, "shadow run: out of memory");
		pi_shadow_end_if_idle(sh);
		return;
	}
	if (ev) {
		pi_shadow_queue(sh, ev);
		return;
	}
	pi_shadow_finish(sh);
	pi_shadow_end_if_idle(sh);
}

/* the shadow reconcile returned (or was dropped): the keys follow, or the
 * run is over */
static void pi_shadow_on_reconcile_done(void *ud, int err, const char *msg)
{
	struct pi_shadow *sh = ud;
	CHECK_OBJ(sh, PI_SHADOW_MAGIC);
	sh->event_queued = false;
	if (err < 0 || sh->reported) {
		pi_shadow_report(sh, err, msg);
		pi_shadow_end_if_idle(sh);
		return;
	}
	pi_shadow_next_key(sh);
}

/* a key's reconcile_key returned (d) or was not delivered (d NULL) */
static void pi_shadow_on_key(struct pi_shadow *sh, const struct event *ev, const EventDone *d,
			     int err, const char *msg)
{
	sh->event_queued = false;
	if (!d) {
		char m[400];
		snprintf(m, sizeof(m), "a key's reconcile_key was not delivered: %s",
			 msg && msg[0] ? msg : strerror(err < 0 ? -err : EIO));
		pi_shadow_report(sh, err < 0 ? err : -EIO, m);
	} else if (err < 0 && !sh->keys_failed++) {
		snprintf(sh->key_error, sizeof(sh->key_error), "%.*s: %s%s%s",
			 (int)(ev->doc_len > 100 ? 100 : ev->doc_len), ev->doc, strerror(-err),
			 msg && msg[0] ? ": " : "", msg ? msg : "");
	}
	if (sh->reported)
		pi_shadow_end_if_idle(sh);
	else
		pi_shadow_next_key(sh);
}

/* every snapshot batch was answered (or the snapshot failed) */
static void pi_shadow_on_snap_done(void *ud, int err, const char *msg, int64_t rev)
{
	struct pi_shadow *sh = ud;
	CHECK_OBJ(sh, PI_SHADOW_MAGIC);
	if (rev && !sh->rep.revision)
		sh->rep.revision = sh->rep.last_revision = rev; /* the run's first read */
	if (err == 0 && !sh->reported) {
		log_info(sh->pi->log_comp, "shadow run: snapshot of %llu key(s) at revision %lld "
					   "delivered; the reconcile follows",
			 (unsigned long long)pi_shadow_snap_keys(sh->snap), (long long)rev);
		struct event *ev = pi_event_new(EV_RECONCILE);
		if (ev) {
			ev->done = pi_shadow_on_reconcile_done;
			ev->done_ud = sh;
			pi_shadow_queue(sh, ev);
			return;
		}
		err = -ENOMEM;
		msg = "shadow run: out of memory";
	}
	if (err < 0)
		pi_shadow_report(sh, err, msg);
	pi_shadow_end_if_idle(sh);
}

/* a snapshot batch was answered: its queue keys (a keyed plugin) */
static void pi_shadow_on_batch(struct pi_shadow *sh, const struct event *ev, const EventDone *d,
			       int err, const char *msg)
{
	int r = d && sh->pi->lp->desc.reconcile_key
			? pi_shadow_keys_add(&sh->keys, d, ev->batch ? ev->batch->n : 0)
			: 0;
	if (r < 0 && !sh->reported) {
		pi_shadow_report(sh, r == -ENOMEM ? r : -EIO,
				 r == -ENOMEM ? "shadow run: out of memory"
				 : r == -EPROTO ? "the queue keys of a snapshot batch did not all "
						   "come back from the worker"
						: "the worker answered a snapshot batch with bad queue keys");
		pi_shadow_snap_stop(sh->snap);
	}
	pi_shadow_snap_on_batch(sh->snap, ev, d != NULL, err, msg);
}

void pi_shadow_on_event(struct plugin_instance *pi, const struct event *ev, const EventDone *d,
			int err, const char *msg)
{
	struct pi_shadow *sh = pi->shadow;
	if (!sh || ev->shadow_run != sh->run)
		return; /* a run that ended: nothing of it is pending, so never */
	if (ev->kind == EV_KEY) {
		pi_shadow_on_key(sh, ev, d, err, msg);
		return;
	}
	pi_shadow_on_batch(sh, ev, d, err, msg);
	if (pi->shadow == sh)
		pi_shadow_end_if_idle(sh);
}

int plugin_instance_shadow(struct plugin_instance *pi, uint32_t timeout_ms,
			   plugin_instance_shadow_fn done, void *ud)
{
	if (pi->leading)
		return -EBUSY;
	if (pi->shadow)
		return -EALREADY;
	if (pi->state != PLUGIN_INSTANCE_READY || pi->stop_requested || pi->broken || pi->overrun ||
	    !pi->bus_up)
		return -EAGAIN;
	if (!pi->host.etcd)
		return -ENOTSUP;
	struct pi_shadow *sh = calloc(1, sizeof(*sh));
	if (!sh || loop_timer_new(pi->loop, pi_shadow_on_timer, sh, &sh->timer) < 0) {
		free(sh);
		return -ENOMEM;
	}
	sh->magic = PI_SHADOW_MAGIC;
	sh->pi = pi;
	sh->done = done;
	sh->ud = ud;
	sh->timeout_ms = timeout_ms;
	sh->run = ++pi->shadow_runs;
	struct event *ev = NULL;
	int r = plugin_watch_count(pi->watch) > 0
			? pi_shadow_snap_start(pi, sh->run, pi_shadow_on_snap_done, sh, &sh->snap)
		: (ev = pi_event_new(EV_RECONCILE)) ? 0
						     : -ENOMEM;
	if (r < 0) {
		pi_shadow_destroy(sh);
		return r == -ENOMEM ? r : -EIO;
	}
	pi->shadow = sh;
	log_info(pi->log_comp, "shadow run: %sone reconcile with its writes captured (timeout %u ms)",
		 sh->snap ? "the watches' snapshot, then " : "", timeout_ms);
	loop_timer_arm_in(sh->timer, (uint64_t)timeout_ms * LOOP_NS_PER_MS);
	if (ev) {
		ev->done = pi_shadow_on_reconcile_done;
		ev->done_ud = sh;
		pi_shadow_queue(sh, ev);
	}
	return 0;
}

