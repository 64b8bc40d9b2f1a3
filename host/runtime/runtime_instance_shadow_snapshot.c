/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_shadow_snapshot.c - the watches' snapshot of a shadow run
 * (runtime_instance_shadow.c): before its reconcile, each watch the plugin
 * registered is read once and handed to it as the snapshot batches a term's
 * start delivers. Reading guide: runtime_instance.c.
 *
 * Design notes
 * - One revision for all watches. The first page is read at etcd's current
 *   revision and names it (the answer's header); every other page of every
 *   watch is read at that revision, so the plugin's world is one consistent
 *   cut, as a term's snapshot of one watch is. A term reads each watch at
 *   its own revision because each has a live watch to meet; a shadow run
 *   has none, so one cut costs nothing and is the more useful preview.
 * - Compaction past that revision while the pages are read (-ERANGE)
 *   starts the read over at the then current revision, at most
 *   PI_SHADOW_SNAP_RESTARTS times; a watch of which batches were already
 *   delivered gets its new first batch flagged LH_WATCH_RESYNC, as a term's
 *   restarted snapshot does. Any other failed read ends the run.
 * - Bounded as a term's snapshot: pages of PLUGIN_WATCH_PAGE_KEYS keys, cut
 *   into batches by plugin_watch_snapshot_batches (the term's own cutter);
 *   the next page is read only when every batch of the last one was
 *   answered, so the host holds one page at a time. The run's timeout
 *   bounds the whole.
 * - Never part of a term. The batches are events of the instance's queue
 *   marked shadow (the worker runs them with token 0); they are not the
 *   watches' queue (runtime_watch.c), which only a term fills, so a term
 *   that begins later starts from its own snapshot. Before each page's
 *   batches are queued the node must not lead: a term that began meanwhile
 *   ends the run (its on_elected is queued already, and nothing of a shadow
 *   run may follow it). Batches queued before it run before it: the event
 *   order decides, as for the shadow reconcile.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#include "base/log.h"
#include "runtime/runtime_instance_internal.h"

#define PI_SHADOW_SNAP_RESTARTS 3u
#define PI_SHADOW_SNAP_MAGIC 0x53534e50u

struct pi_shadow_snap {
	unsigned magic; /* PI_SHADOW_SNAP_MAGIC: it comes back through etcd callbacks */
	struct plugin_instance *pi;
	uint64_t run; /* the run's number: its events carry it */
	pi_shadow_snap_done_fn done;
	void *ud;
	uint32_t watch;	     /* the watch being read */
	int64_t rev;	     /* the cut's revision, 0 until the first answer */
	uint8_t *from;	     /* the next page's first key, NULL = the prefix */
	size_t from_len;
	unsigned restarts;
	uint32_t delivered; /* bit per watch: batches of it were queued */
	uint32_t resync;    /* bit per watch: its next first batch says RESYNC */
	struct etcd_call *call;
	size_t outstanding; /* batches queued or in flight */
	bool failed;	    /* done(err) was called: only the outstanding remain */
	uint64_t keys;	    /* keys delivered */
};

static void pi_shadow_snap_fail(struct pi_shadow_snap *s, int err, const char *msg)
{
	if (s->failed)
		return;
	s->failed = true;
	if (s->call) {
		etcd_call_cancel(s->call);
		s->call = NULL;
	}
	s->done(s->ud, err, msg, s->rev);
}

static void pi_shadow_snap_on_page(struct etcd_client *c, int err, const struct etcd_response *resp,
				   void *ud);

/* read the next page (at s->rev; the current revision while it is 0) */
static int pi_shadow_snap_read(struct pi_shadow_snap *s)
{
	const uint8_t *prefix, *end;
	size_t len, end_len, strip;
	int r = plugin_watch_get_prefix(s->pi->watch, s->watch, &prefix, &len, &end, &end_len,
					&strip);
	if (r < 0)
		return r;
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = s->from ? s->from : prefix,
			     .key_len = s->from ? s->from_len : len, .range_end = end,
			     .range_end_len = end_len, .limit = PLUGIN_WATCH_PAGE_KEYS,
			     .revision = s->rev};
	r = etcd_range(s->pi->host.etcd, &op, NULL, pi_shadow_snap_on_page, s, &s->call);
	if (r < 0)
		s->call = NULL;
	return r;
}

/* read the next page; a read that cannot start ends the run */
static void pi_shadow_snap_next(struct pi_shadow_snap *s)
{
	int r = pi_shadow_snap_read(s);
	if (r < 0) {
		char msg[160];
		snprintf(msg, sizeof(msg), "shadow snapshot: cannot read watch %u: %s", s->watch,
			 strerror(-r));
		pi_shadow_snap_fail(s, r, msg);
	}
}

/* the cut was compacted away: read every watch again at a newer revision */
static void pi_shadow_snap_restart(struct pi_shadow_snap *s)
{
	log_info(s->pi->log_comp, "shadow snapshot: revision %lld compacted while it was read; "
				  "reading again at the current one",
		 (long long)s->rev);
	s->restarts++;
	s->resync |= s->delivered;
	s->rev = 0;
	s->watch = 0;
	free(s->from);
	s->from = NULL;
	pi_shadow_snap_next(s);
}

/* where the next page starts: after resp's last key, or the next watch */
static int pi_shadow_snap_advance(struct pi_shadow_snap *s, const struct etcd_response *resp)
{
	free(s->from);
	s->from = NULL;
	if (!resp->more) {
		s->watch++;
		return 0;
	}
	const struct etcd_kv *last = &resp->kvs[resp->n_kvs - 1];
	if (!(s->from = malloc(last->key_len + 1)))
		return -ENOMEM;
	memcpy(s->from, last->key, last->key_len);
	s->from[last->key_len] = 0; /* the next key after it */
	s->from_len = last->key_len + 1;
	return 0;
}

/* queue one page's batches as shadow EV_WATCH events; -ENOMEM */
static int pi_shadow_snap_queue(struct pi_shadow_snap *s, struct plugin_watch_batch *b)
{
	struct plugin_instance *pi = s->pi;
	int r = 0;
	while (b) {
		struct plugin_watch_batch *next = b->next;
		struct event *ev = r == 0 ? pi_event_new(EV_WATCH) : NULL;
		if (!ev) {
			plugin_watch_batch_free(b);
			r = -ENOMEM;
		} else {
			b->next = NULL;
			s->keys += b->n;
			ev->batch = b;
			ev->shadow = true;
			ev->shadow_run = s->run;
			ev->term = pi->term;
			s->outstanding++;
			pi_enqueue(pi, ev);
		}
		b = next;
	}
	return r;
}

/* the batches of one page answer, checked against a term that began */
static void pi_shadow_snap_take(struct pi_shadow_snap *s, const struct etcd_response *resp)
{
	struct plugin_instance *pi = s->pi;
	const uint8_t *prefix, *end;
	size_t len, end_len, strip;
	uint32_t bit = 1u << s->watch;
	struct plugin_watch_batch *b = NULL;
	if (pi->leading) {
		pi_shadow_snap_fail(s, -EBUSY, "a term began on this node during the shadow run's "
					       "snapshot: the preview was abandoned");
		return;
	}
	if (plugin_watch_get_prefix(pi->watch, s->watch, &prefix, &len, &end, &end_len, &strip) <
		    0 ||
	    plugin_watch_snapshot_batches(prefix, len, s->watch, strip, resp,
					  (!s->from && (s->resync & bit)) ? LH_WATCH_RESYNC : 0,
					  !resp->more, s->rev, true, &b) < 0 ||
	    pi_shadow_snap_queue(s, b) < 0 || pi_shadow_snap_advance(s, resp) < 0) {
		pi_shadow_snap_fail(s, -ENOMEM, "shadow snapshot: out of memory");
		return;
	}
	s->resync &= ~bit;
	s->delivered |= bit;
	pi_pump(pi);
}

static void pi_shadow_snap_on_page(struct etcd_client *c, int err, const struct etcd_response *resp,
				   void *ud)
{
	struct pi_shadow_snap *s = ud;
	char msg[300];
	(void)c;
	CHECK_OBJ(s, PI_SHADOW_SNAP_MAGIC);
	s->call = NULL;
	if (err == -ERANGE && s->restarts < PI_SHADOW_SNAP_RESTARTS) {
		pi_shadow_snap_restart(s);
		return;
	}
	if (err < 0 || !resp || (resp->more && resp->n_kvs == 0)) {
		snprintf(msg, sizeof(msg), "shadow snapshot: reading watch %u failed: %s%s%s",
			 s->watch, err < 0 ? etcd_strerror(err) : "bad answer",
			 resp && resp->error_message ? ": " : "",
			 resp && resp->error_message ? resp->error_message : "");
		pi_shadow_snap_fail(s, err < 0 ? err : -EIO, msg);
		return;
	}
	if (!s->rev)
		s->rev = resp->header.revision;
	pi_shadow_snap_take(s, resp);
}

int pi_shadow_snap_start(struct plugin_instance *pi, uint64_t run, pi_shadow_snap_done_fn done,
			 void *ud, struct pi_shadow_snap **ret)
{
	struct pi_shadow_snap *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->magic = PI_SHADOW_SNAP_MAGIC;
	s->pi = pi;
	s->run = run;
	s->done = done;
	s->ud = ud;
	int r = pi_shadow_snap_read(s);
	if (r < 0) {
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

bool pi_shadow_snap_busy(const struct pi_shadow_snap *s)
{
	return s && (s->call || s->outstanding);
}

void pi_shadow_snap_stop(struct pi_shadow_snap *s)
{
	if (!s || s->failed)
		return;
	s->failed = true; /* done is not called any more */
	if (s->call) {
		etcd_call_cancel(s->call);
		s->call = NULL;
	}
}

uint64_t pi_shadow_snap_keys(const struct pi_shadow_snap *s)
{
	return s ? s->keys : 0;
}

void pi_shadow_snap_on_batch(struct pi_shadow_snap *s, const struct event *ev, bool ran, int err,
			     const char *msg)
{
	if (!s || ev->shadow_run != s->run || !s->outstanding)
		return;
	s->outstanding--;
	if (s->failed)
		return;
	if (!ran) {
		char m[400];
		snprintf(m, sizeof(m), "shadow snapshot: a batch was not delivered: %s",
			 msg && msg[0] ? msg : strerror(-err));
		pi_shadow_snap_fail(s, err < 0 ? err : -EIO, m);
		return;
	}
	if (err < 0) /* as in a term: the batch is not delivered again */
		log_warn(s->pi->log_comp, "shadow run: on_watch_events failed: %s%s%s",
			 strerror(-err), msg && msg[0] ? ": " : "", msg ? msg : "");
	if (s->outstanding)
		return;
	if (s->watch < plugin_watch_count(s->pi->watch))
		pi_shadow_snap_next(s);
	else
		s->done(s->ud, 0, NULL, s->rev);
}

void pi_shadow_snap_free(struct pi_shadow_snap *s)
{
	if (!s)
		return;
	if (s->call)
		etcd_call_cancel(s->call);
	free(s->from);
	s->magic = 0;
	free(s);
}
