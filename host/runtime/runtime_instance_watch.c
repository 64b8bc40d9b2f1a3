/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_watch.c - the ABI 1.2 parts of a plugin instance: the
 * read grants handed to the worker at INIT, the watches INIT's answer
 * registers (runtime_watch.c does the etcd side), when a watch batch may go
 * to the worker, the plugin's range reads and reconcile requests.
 * Reading guide: runtime_instance.c.
 *
 * No batch goes while a drain waits (the term is ending gracefully): the
 * drain waits for an empty queue, so a steady stream of input changes would
 * otherwise hold a handover back for as long as it lasts; the successor's
 * snapshot carries every change.
 *
 * Why watch batches wait for the term's first reconcile: before it the
 * election refuses the plugin's writes (-EAGAIN, the status protocol), so a
 * watch callback could only observe. Batches go one at a time and only when
 * nothing else is queued or in flight, so a leadership event (on_deposed, a
 * reconcile, a release change) never waits behind a long snapshot.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

/* a range answer's bound, below nng's default 1 MiB message limit; every
 * value a plugin may write must be readable back on its own */
_Static_assert(LH_KEY_MAX + LH_VALUE_MAX + 32u <= LH_READ_MAX,
	       "a key and a value at their limits must fit in one read answer");

int pi_watch_init(struct plugin_instance *pi, const struct plugin_instance_config *cfg)
{
	size_t n = cfg ? cfg->n_read_grants : 0;
	if (n == 0)
		return 0;
	pi->grants = calloc(n, sizeof(*pi->grants));
	if (!pi->grants)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *g = cfg->read_grants[i];
		if (!g || !g[0])
			return -EINVAL; /* an empty grant would grant all of etcd */
		if (!(pi->grants[i].data = (uint8_t *)strdup(g)))
			return -ENOMEM;
		pi->grants[i].len = strlen(g);
		pi->n_grants++;
	}
	return 0;
}

void pi_watch_free(struct plugin_instance *pi)
{
	plugin_watch_free(pi->watch);
	pi->watch = NULL;
	for (size_t i = 0; i < pi->n_grants; i++)
		free(pi->grants[i].data);
	free(pi->grants);
	pi->grants = NULL;
	pi->n_grants = 0;
}

bool pi_granted(const struct plugin_instance *pi, const void *k, size_t len)
{
	for (size_t i = 0; k && i < pi->n_grants; i++)
		if (len >= pi->grants[i].len && memcmp(k, pi->grants[i].data, pi->grants[i].len) == 0)
			return true;
	return false;
}

static void pi_watch_on_watch_ready(void *ud)
{
	struct plugin_instance *pi = ud;
	loop_timer_arm_in(pi->defer, 0); /* pi_on_defer pumps */
}

int pi_watch_setup(struct plugin_instance *pi, const EventDone *d, char *msg, size_t len)
{
	/* a restarted worker (process mode) registers its watches again */
	plugin_watch_free(pi->watch);
	pi->watch = NULL;
	if (d->n_watches == 0)
		return 0;
	if (!pi->host.etcd) {
		snprintf(msg, len, "this host offers no watches to the plugin");
		return -ENOTSUP;
	}
	if (d->n_watches > LH_WATCH_MAX) {
		snprintf(msg, len, "the plugin registered %zu watches (at most %u)", d->n_watches,
			 LH_WATCH_MAX);
		return -ENOSPC;
	}
	int r = plugin_watch_new(pi->loop, pi->host.etcd, pi->log_comp, pi->cfg.watch_queue_max,
				 pi_watch_on_watch_ready, pi, &pi->watch);
	for (size_t i = 0; r == 0 && i < d->n_watches; i++) {
		const Leasehold__Bus__WatchSpec *ws = d->watches[i];
		bool absolute = ws && (ws->flags & LH_WATCH_ABSOLUTE);
		bool under_data = ws && ws->prefix.len >= pi->prefix_len &&
				  memcmp(ws->prefix.data, pi->data_prefix, pi->prefix_len) == 0;
		if (!ws || (ws->flags & ~(LH_WATCH_ABSOLUTE | LH_WATCH_PREV_KV)) ||
		    (absolute ? !pi_granted(pi, ws->prefix.data, ws->prefix.len) : !under_data)) {
			snprintf(msg, len, "watch %zu of the plugin is outside its data prefix and "
					   "its read grants: refused",
				 i);
			r = -EPERM;
			break;
		}
		r = plugin_watch_add(pi->watch, ws->prefix.data, ws->prefix.len, ws->flags,
				     absolute ? 0 : pi->prefix_len);
		if (r < 0)
			snprintf(msg, len, "cannot register watch %zu: %s", i, strerror(-r));
	}
	if (r < 0) {
		plugin_watch_free(pi->watch);
		pi->watch = NULL;
		return r;
	}
	log_info(pi->log_comp, "%zu watch(es) registered; delivered only while this node leads",
		 d->n_watches);
	return 0;
}

void pi_watch_term_start(struct plugin_instance *pi)
{
	pi->term_reconciled = false;
	pi->term_leaving = false;
	if (pi->watch)
		plugin_watch_start(pi->watch);
}

void pi_watch_stop(struct plugin_instance *pi)
{
	if (pi->watch)
		plugin_watch_stop(pi->watch);
	pi_keys_stop(pi); /* the queue ends with the term, as the watches do */
}

void pi_event_free(struct event *ev)
{
	if (!ev)
		return;
	plugin_watch_batch_free(ev->batch);
	free(ev);
}

bool pi_watch_feed(struct plugin_instance *pi)
{
	if (!pi->watch || !pi->leading || !pi->term_reconciled || pi->q_head || pi->sent_head ||
	    pi->broken || !pi->bus_up || pi->stop_requested || pi->overrun ||
	    pi_keys_host_takes_batches(pi))
		return false;
	if (pi->host.paused && pi->host.paused(pi->host.ctx))
		return false; /* the resume's reconcile pumps the queue again */
	/* a drain (the graceful end of a term: SIGTERM, hot reload, switchover)
	 * waits for an empty queue: a steady stream of inputs must not hold the
	 * handover back, nor should batches go between the drain and the
	 * term's end. The successor's snapshot carries what is left. */
	if (pi->drains || pi->term_leaving)
		return false;
	struct plugin_watch_batch *b = plugin_watch_take(pi->watch);
	if (!b)
		return false;
	struct event *ev = pi_event_new(EV_WATCH);
	if (!ev) {
		/* cannot deliver it: the watch must start over, never lose it */
		log_error(pi->log_comp, "out of memory: watch batch dropped, the watch restarts");
		plugin_watch_batch_free(b);
		pi_watch_term_start(pi);
		pi->term_reconciled = true;
		return false;
	}
	ev->batch = b;
	ev->term = pi->term;
	pi_enqueue(pi, ev);
	return true;
}

/* ---- range reads ---- */

static void pi_watch_on_range_done(struct etcd_client *c, int err, const struct etcd_response *resp,
			  void *userdata)
{
	struct pending_txn *pt = userdata;
	CHECK_OBJ(pt, PENDING_TXN_MAGIC);
	struct plugin_instance *pi = pt->pi;
	(void)c;
	if (pi) {
		pi_txn_unlink(pi, pt);
		/* counted as the plugin gets them: a relative key without the prefix */
		size_t bytes = 0, strip = pt->absolute ? 0 : pi->prefix_len;
		for (size_t i = 0; resp && i < resp->n_kvs; i++) {
			size_t kl = resp->kvs[i].key_len;
			bytes += (kl > strip ? kl - strip : 0) + resp->kvs[i].value_len + 32;
		}
		if (err < 0 || !resp) {
			char msg[512];
			snprintf(msg, sizeof(msg), "range: %s%s%s", etcd_strerror(err),
				 resp && resp->error_message ? ": " : "",
				 resp && resp->error_message ? resp->error_message : "");
			pi_reply_txn(pi, pt->id, err < 0 ? err : -EIO, msg, NULL, false);
		} else if (bytes > LH_READ_MAX) {
			pi_reply_txn(pi, pt->id, -EMSGSIZE,
				     "range: the answer is larger than LH_READ_MAX (512 KiB); use a "
				     "limit and page",
				     NULL, false);
		} else {
			/* the reply form of a txn with one range result */
			struct etcd_response inner = *resp, outer;
			memset(&outer, 0, sizeof(outer));
			inner.op_type = ETCD_OP_RANGE;
			outer.header = resp->header;
			outer.succeeded = true;
			outer.responses = &inner;
			outer.n_responses = 1;
			pi_reply_txn(pi, pt->id, 0, NULL, &outer, pt->absolute);
		}
	}
	pt->magic = 0;
	free(pt);
}

/* pi_watch_range_check - may the running callback read this range (hostile
 * request)? 0, or the refusal already answered */
static int pi_watch_range_check(struct plugin_instance *pi, const Leasehold__Bus__RangeRequest *req)
{
	bool absolute = (req->flags & LH_F_ABSOLUTE) != 0;
	if (!pi->sent_head) {
		pi_reply_txn(pi, req->id, -EPERM, "range outside a callback", NULL, false);
		return -EPERM;
	}
	if (!pi->host.etcd) {
		pi_reply_txn(pi, req->id, -ENOTSUP, "this host offers no range reads", NULL, false);
		return -ENOTSUP;
	}
	if (req->flags & ~(LH_F_PREFIX | LH_F_KEYS_ONLY | LH_F_COUNT_ONLY | LH_F_ABSOLUTE) ||
	    (absolute && (req->key.len == 0 || req->key.len > LH_KEY_MAX ||
			  memchr(req->key.data, 0, req->key.len)))) {
		pi_reply_txn(pi, req->id, -EINVAL, "range: bad flags or key", NULL, false);
		return -EINVAL;
	}
	char why[400];
	if (!absolute &&
	    pi_txn_check_key(pi, req->key, (req->flags & LH_F_PREFIX) != 0, "range", why,
			     sizeof(why)) < 0) {
		char msg[440];
		snprintf(msg, sizeof(msg), "range refused: %s", why);
		pi_reply_txn(pi, req->id, -EINVAL, msg, NULL, false);
		return -EINVAL;
	}
	/* a page of a prefix (bus 4): the range starts at from, a key under the
	 * prefix (one byte past LH_KEY_MAX: the key after a last one read) */
	bool paged = req->from.len > 0;
	if (paged && (absolute || !(req->flags & LH_F_PREFIX) || req->from.len > LH_KEY_MAX + 1 ||
		      req->from.len < req->key.len ||
		      (req->key.len && memcmp(req->from.data, req->key.data, req->key.len) != 0))) {
		pi_reply_txn(pi, req->id, -EINVAL, "range refused: from is not a key under the prefix",
			     NULL, false);
		return -EINVAL;
	}
	return 0;
}

void pi_handle_range(struct plugin_instance *pi, const Leasehold__Bus__RangeRequest *req)
{
	if (pi_watch_range_check(pi, req) < 0)
		return;
	bool absolute = (req->flags & LH_F_ABSOLUTE) != 0;
	bool paged = req->from.len > 0;
	size_t klen = (absolute ? 0 : pi->prefix_len) + req->key.len;
	size_t flen = pi->prefix_len + req->from.len;
	uint8_t *key = malloc(klen + 1), *end = malloc(klen + 1);
	uint8_t *from = paged ? malloc(flen + 1) : NULL;
	struct pending_txn *pt = calloc(1, sizeof(*pt));
	int r = -ENOMEM;
	if (!key || !end || !pt || (paged && !from))
		goto refuse;
	memcpy(key, absolute ? "" : pi->data_prefix, absolute ? 0 : pi->prefix_len);
	if (req->key.len)
		memcpy(key + klen - req->key.len, req->key.data, req->key.len);
	if (absolute && !pi_granted(pi, key, klen)) {
		r = -EPERM;
		char shown[160];
		snprintf(shown, sizeof(shown), "range of an absolute key outside the plugin's read "
					       "grants refused (--plugin-read)");
		log_warn(pi->log_comp, "%s", shown);
		pi_reply_txn(pi, req->id, r, shown, NULL, false);
		goto out;
	}
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = key, .key_len = klen,
			     .limit = req->limit < 0 ? 0 : req->limit,
			     .keys_only = (req->flags & LH_F_KEYS_ONLY) != 0,
			     .count_only = (req->flags & LH_F_COUNT_ONLY) != 0};
	if (req->flags & LH_F_PREFIX) {
		op.range_end = end;
		op.range_end_len = etcd_prefix_end(key, klen, end);
	}
	if (paged) {
		memcpy(from, pi->data_prefix, pi->prefix_len);
		memcpy(from + pi->prefix_len, req->from.data, req->from.len);
		op.key = from;
		op.key_len = flen;
	}
	pt->magic = PENDING_TXN_MAGIC;
	pt->pi = pi;
	pt->id = req->id;
	pt->absolute = absolute;
	pt->next = pi->txns;
	pi->txns = pt;
	r = etcd_range(pi->host.etcd, &op, NULL, pi_watch_on_range_done, pt, NULL);
	if (r < 0) {
		pi_txn_unlink(pi, pt);
		goto refuse;
	}
	pt = NULL; /* the call's now */
	goto out;
refuse:;
	char msg[128];
	snprintf(msg, sizeof(msg), "range refused: %s", strerror(-r));
	pi_reply_txn(pi, req->id, r, msg, NULL, false);
out:
	free(key);
	free(end);
	free(from);
	free(pt);
}

void pi_handle_request_reconcile(struct plugin_instance *pi)
{
	/* only from a callback of the current term on the leading node */
	if (!pi->leading || !pi->sent_head || pi->sent_head->term != pi->term ||
	    !pi->host.request_reconcile) {
		log_debug(pi->log_comp, "reconcile request outside the current term ignored");
		return;
	}
	pi->host.request_reconcile(pi->host.ctx);
}

bool plugin_instance_watch_stats(const struct plugin_instance *pi, struct plugin_watch_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (!pi->watch)
		return false;
	plugin_watch_get_stats(pi->watch, ret);
	return true;
}
