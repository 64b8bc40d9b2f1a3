/* SPDX-License-Identifier: MIT */
/*
 * daemon_shadow.c - `leaseholdctl shadow NAME`: the control op that starts a
 * shadow run on this node's instance of plugin NAME
 * (plugin_instance_shadow, runtime_instance_shadow.c) and turns its report
 * into the control protocol's ShadowReport. The run happens here or
 * nowhere: a request naming another node is refused. It runs on the
 * standby when there is one (the file a pin holds back, loaded beside what
 * runs: the release an operator checks before unpinning, which never leads
 * while it is a standby, on the leader's node too); else on the running
 * instance, refused when this node leads (its writes are real; a preview
 * of them is the plugin's own dry run, not the host's).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/release.h"
#include "daemon/daemon_internal.h"
#include "proto/control.pb-c.h"

struct shadow_op {
	control_shadow_fn done;
	void *done_ctx;
	char release[RELEASE_STRLEN]; /* of the instance that runs */
};

static void daemon_shadow_value(Leasehold__Control__ShadowValue *out,
				const struct plugin_shadow_value *v)
{
	leasehold__control__shadow_value__init(out);
	out->present = v->present;
	out->length = v->len;
	out->head.data = (uint8_t *)(uintptr_t)v->head;
	out->head.len = v->head_len;
	out->fnv1a64 = v->hash;
}

static void daemon_shadow_on_done(void *ud, int err, const char *msg,
				  const struct plugin_shadow_report *rep)
{
	struct shadow_op *o = ud;
	Leasehold__Control__ShadowReport pr = LEASEHOLD__CONTROL__SHADOW_REPORT__INIT;
	size_t n = rep->n_writes;
	Leasehold__Control__ShadowWrite *ws = calloc(n ? n : 1, sizeof(*ws));
	Leasehold__Control__ShadowWrite **wp = calloc(n ? n : 1, sizeof(*wp));
	Leasehold__Control__ShadowValue *vs = calloc(n ? 2 * n : 1, sizeof(*vs));
	if (!ws || !wp || !vs) {
		o->done(o->done_ctx, -ENOMEM, "out of memory for the shadow report", NULL);
		goto out;
	}
	pr.revision = rep->revision;
	pr.last_revision = rep->last_revision;
	pr.puts = rep->puts;
	pr.deletes = rep->deletes;
	pr.unchanged = rep->unchanged;
	pr.txns = rep->txns;
	pr.truncated = rep->truncated;
	pr.reconcile_error = (char *)(err < 0 && err != -ETIMEDOUT && msg ? msg : "");
	pr.release = o->release;
	for (size_t i = 0; i < n; i++) {
		const struct plugin_shadow_write *w = &rep->writes[i];
		leasehold__control__shadow_write__init(&ws[i]);
		ws[i].key.data = w->key;
		ws[i].key.len = w->key_len;
		ws[i].is_delete = w->del;
		daemon_shadow_value(&vs[2 * i], &w->old_value);
		daemon_shadow_value(&vs[2 * i + 1], &w->new_value);
		ws[i].old_value = &vs[2 * i];
		ws[i].new_value = w->del ? NULL : &vs[2 * i + 1];
		wp[i] = &ws[i];
	}
	pr.n_writes = n;
	pr.writes = wp;
	o->done(o->done_ctx, err, msg, &pr);
out:
	free(ws);
	free(wp);
	free(vs);
	free(o);
}

int daemon_control_ctl_shadow(void *ud, const char *name, const char *node, uint32_t timeout_ms,
			      control_shadow_fn done, void *done_ctx, char *err, size_t err_len)
{
	struct daemon *d = ud;
	struct entry *e = daemon_find_name(d, name);
	if (node && strcmp(node, d->cfg->node_id) != 0) {
		snprintf(err, err_len,
			 "this daemon is node %s, not %s: a shadow run happens on the node that "
			 "runs the release (ask its daemon: leaseholdctl --control)",
			 d->cfg->node_id, node);
		return -EXDEV;
	}
	if (!e || !e->el || !e->pi || e->removing || e->gone) {
		snprintf(err, err_len, "no plugin named '%s' runs on this node", name);
		return -ENOENT;
	}
	struct plugin_instance *pi =
	    e->standby_pi && e->standby_ready &&
		    plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_READY
		? e->standby_pi
		: e->pi;
	struct election_info info;
	election_get_info(e->el, &info);
	if (pi == e->pi && info.state == ELECTION_LEADING) {
		snprintf(err, err_len,
			 "node %s leads plugin '%s': a shadow run previews a release that does not "
			 "lead; its leader's writes are real",
			 d->cfg->node_id, name);
		return -EBUSY;
	}
	if (timeout_ms == 0)
		timeout_ms = DAEMON_SHADOW_TIMEOUT_DEFAULT_MS;
	struct shadow_op *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->done = done;
	o->done_ctx = done_ctx;
	release_format(plugin_instance_plugin(pi)->release, o->release, sizeof(o->release));
	int r = plugin_instance_shadow(pi, timeout_ms, daemon_shadow_on_done, o);
	if (r < 0) {
		snprintf(err, err_len, "%s",
			 r == -EBUSY	 ? "this node leads the plugin: no shadow run on the leader"
			 : r == -EALREADY ? "a shadow run of this plugin is in progress here"
			 : r == -EAGAIN	 ? "the plugin is not ready here (starting, failed or stopping)"
			 : r == -ENOTSUP ? "this host has no etcd client for the plugin"
			 : r == -EIO	 ? "cannot read the plugin's watches from etcd"
					 : "out of memory");
		free(o);
	}
	return r;
}
