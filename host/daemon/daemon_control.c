/* SPDX-License-Identifier: MIT */
/*
 * daemon_control.c - the control socket's ops (control.h) over the daemon:
 * the plugin and file rows, members, reload, roles, and the operator verbs
 * (forget, leave, pause, reconcile, history), each validated here and
 * handed to the election or the roles module.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_terms.h"
#include "daemon/daemon_internal.h"
#include "proto/leasehold.pb-c.h"
#include "base/log.h"
#include "election/election_switchover_request.h"


static void daemon_control_fill_plugin(struct entry *e, struct control_plugin *p)
{
	memset(p, 0, sizeof(*p));
	p->name = e->name[0] ? e->name : e->file;
	p->file = e->file;
	/* a directory that is gone says more than any older error */
	p->error = e->d->plugin_dir_error ? e->d->plugin_dir_error : e->error;
	const struct loader_plugin *lp = e->pi ? plugin_instance_plugin(e->pi) : NULL;
	if (lp) {
		p->release = lp->release;
		p->has_release = true;
	}
	if (e->failed) {
		p->state = "failed";
	} else if (!e->pi) {
		p->state = e->removing || e->gone ? "stopped" : "loading";
	}
	if (e->el) {
		struct election_info i;
		election_get_info(e->el, &i);
		if (!p->state)
			p->state = election_state_name(i.state);
		p->leader = i.leader;
		p->ready = i.ready;
		p->not_ready = i.not_ready;
		p->releases = i.releases;
		p->status_present = i.status_present;
		p->status_state = election_status_state_name(i.status_valid, i.status_state);
		p->status_version = i.status_version;
		p->status_min_compatible = i.status_min_compatible;
		p->reconcile_count = i.reconcile_count;
		p->reconcile_last_ok = i.reconcile_last_ok;
		p->reconcile_last_error = i.reconcile_last_error;
		p->reconcile_last_at = i.reconcile_last_at;
		p->held_back = i.held_back;
		p->fencing_token = i.fencing_token;
		p->paused = i.paused;
		p->pause_error = i.pause_error;
		p->paused_by = i.paused_by;
		p->paused_at = i.paused_at;
		p->reconcile_requested = i.reconcile_requested;
		p->reconcile_served = i.reconcile_served;
		p->reconcile_served_ok = i.reconcile_served_ok;
		p->reconcile_served_error = i.reconcile_served_error;
		p->switchover_rev = i.switchover_rev;
		p->switchover_ended_rev = i.switchover_ended_rev;
		p->pinned = i.pin.set;
		p->pin_forced = i.pin.forced;
		p->pin = i.pin.release;
		p->pin_by = i.pin_by;
		p->pin_at = i.pin_at;
		p->pin_error = i.pin_error;
		p->has_acting = i.acting.basis != RULE_NONE;
		p->acting_release = i.acting.release;
		p->acting_basis = release_rule_basis_text(i.acting.basis);
		p->unhealthy = i.unhealthy;
		p->unhealthy_until = i.unhealthy_until;
		p->failures_in_row = i.failures_in_row;
		p->unhealthy_total = i.unhealthy_total;
	}
	daemon_config_fill(e, p);
	uint64_t since, now = loop_now();
	if (e->pi && plugin_instance_running(e->pi, &p->callback, &since))
		p->callback_ms = now > since ? (now - since) / LOOP_NS_PER_MS : 0;
	struct plugin_key_stats ks;
	if (e->pi && plugin_instance_key_stats(e->pi, &ks)) {
		p->keyed = true;
		p->keys_depth = ks.depth;
		p->keys_waiting = ks.waiting;
		p->keys_oldest_ms = ks.oldest_ms;
		p->keys_done = ks.done;
		p->keys_failed = ks.failed;
		p->keys_running = ks.running;
		p->keys_concurrency = ks.concurrency;
	}
}

/* daemon_control_fill_file - the row of a file that is not what an entry runs: refused,
 * failed init, being loaded, or superseded by the file that runs */
static void daemon_control_fill_file(struct daemon *d, struct pfile *pf, struct control_plugin *p)
{
	memset(p, 0, sizeof(*p));
	p->name = pf->name[0] ? pf->name : pf->file;
	p->file = pf->file;
	p->error = d->plugin_dir_error ? d->plugin_dir_error : pf->error;
	if (pf->ok) {
		p->release = pf->release;
		p->has_release = true;
	}
	struct entry *e = pf->name[0] ? daemon_find_name(d, pf->name) : NULL;
	if (!pf->ok || pf->init_failed) {
		p->state = "failed";
	} else if (e && e->pi && !e->removing &&
	         !(e->next_file && strcmp(e->next_file, pf->file) == 0)) {
		p->state = "superseded";
		p->superseded_by = e->file;
	} else {
		p->state = "loading";
	}
}

/* daemon_control_fill_standby - the row of e's standby (the file a pin
 * holds back, loaded beside what runs); also when it is the running file's
 * new bytes, which have no file row of their own */
static void daemon_control_fill_standby(struct entry *e, struct control_plugin *p)
{
	memset(p, 0, sizeof(*p));
	p->name = e->name;
	p->file = e->standby_file;
	p->release = plugin_instance_plugin(e->standby_pi)->release;
	p->has_release = true;
	bool ready = e->standby_ready &&
	             plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_READY;
	p->state = ready ? "standby" : "loading";
	p->held_back = ready               ? "the pin holds it back (loaded and initialised)"
	               : e->standby_ready ? "the pin holds it back (its worker failed; restarting)"
	                                  : "the pin holds it back (loading beside what runs)";
}

/* Rows: each plugin's entry (what runs) first, then its standby, then the
 * other files of the same name, then the files no plugin name is known
 * for. Lookups by plugin name (status, wait-ready) take the first row of a
 * name: the entry's. */
static size_t daemon_control_ctl_plugins(void *ud, struct control_plugin *out, size_t max)
{
	struct daemon *d = ud;
	size_t n = 0;
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->gone)
			continue;
		if (n < max) {
			daemon_control_fill_plugin(e, &out[n]);
			/* without a session the mirror is what this node last
			 * saw: the row says so, and since when */
			uint64_t now = loop_now(), down = d->session_down_at;
			out[n].view_stale = e->el && down != 0;
			if (out[n].view_stale)
				out[n].view_stale_ms = now > down ? (now - down) / LOOP_NS_PER_MS : 0;
		}
		n++;
		if (d->shutting_down)
			continue; /* nothing more will load: only what still stops */
		if (e->standby_pi) {
			if (n < max)
				daemon_control_fill_standby(e, &out[n]);
			n++;
		}
		for (struct pfile *pf = d->files; pf; pf = pf->next) {
			if (strcmp(pf->name, e->name) != 0 || daemon_find_file(d, pf->file) ||
			    (e->standby_pi && strcmp(e->standby_file, pf->file) == 0))
				continue;
			if (n < max)
				daemon_control_fill_file(d, pf, &out[n]);
			n++;
		}
	}
	for (struct pfile *pf = d->files; pf && !d->shutting_down; pf = pf->next) {
		if (daemon_find_file(d, pf->file) || (pf->name[0] && daemon_find_name(d, pf->name)))
			continue;
		if (n < max)
			daemon_control_fill_file(d, pf, &out[n]);
		n++;
	}
	return n;
}

static int daemon_control_ctl_members(void *ud, const char *name, struct control_member *out, size_t max,
                       size_t *ret_total)
{
	struct daemon *d = ud;
	struct entry *e = daemon_find_name(d, name);
	if (!e || !e->el)
		return -ENOENT;
	struct election_member *tmp = max ? calloc(max, sizeof(*tmp)) : NULL;
	if (max && !tmp)
		return -ENOMEM;
	size_t total = election_rows(e->el, tmp, max);
	for (size_t i = 0; i < total && i < max; i++) {
		out[i].node_id = tmp[i].node_id;
		out[i].release = tmp[i].release;
		out[i].leader = tmp[i].leader;
		out[i].campaigning = tmp[i].campaigning;
		out[i].no_member_record = !tmp[i].member;
		out[i].local = strcmp(tmp[i].node_id, d->cfg->node_id) == 0;
		out[i].record = tmp[i].record;
		out[i].record_invalid = tmp[i].record_invalid;
		out[i].sessions = tmp[i].sessions;
		out[i].conflict = tmp[i].conflict;
		out[i].unhealthy = tmp[i].unhealthy;
		out[i].unhealthy_until = tmp[i].unhealthy_until;
	}
	free(tmp);
	*ret_total = total;
	return 0;
}

/* reload NAME: a plugin name never contains '.', a plugin file name always
 * ends in ".so", so NAME with a dot is a file (probe that file again) and
 * NAME without one a plugin (probe every file that provides it and the file
 * its instance came from). Either way the bytes get a new chance even when
 * they failed init before, and the choice is made again. */
static int daemon_control_ctl_reload(void *ud, const char *name, char *err, size_t err_len)
{
	struct daemon *d = ud;
	if (!name || !*name) {
		d->rescan_pending = true;
		loop_timer_arm_in(d->later, 0);
		return 0;
	}
	if (d->shutting_down)
		return 0;
	int r = 0;
	if (strchr(name, '.')) {
		struct pfile *pf = daemon_find_pfile(d, name);
		if (!pf) {
			snprintf(err, err_len, "unknown plugin file '%s'", name);
			return -ENOENT;
		}
		pf->init_failed = false;
		if ((r = daemon_file_probe(d, pf)) < 0)
			snprintf(err, err_len, "%s", pf->error ? pf->error : strerror(-r));
	} else {
		struct entry *e = daemon_find_name(d, name);
		bool found = e != NULL;
		for (struct pfile *pf = d->files; pf; pf = pf->next) {
			bool runs = e && strcmp(pf->file, e->file) == 0;
			if (!runs && strcmp(pf->name, name) != 0)
				continue;
			found = true;
			pf->init_failed = false;
			int q = daemon_file_probe(d, pf);
			if (q < 0 && runs) {
				r = q;
				snprintf(err, err_len, "%s", pf->error ? pf->error : strerror(-q));
			}
		}
		if (!found) {
			snprintf(err, err_len, "unknown plugin '%s'", name);
			return -ENOENT;
		}
	}
	daemon_request_select(d);
	daemon_notify(d);
	return r == -ENOENT ? -EIO : r; /* -ENOENT means "unknown plugin" to the CLI */
}

static const char *daemon_control_ctl_node_id(void *ud)
{
	return ((struct daemon *)ud)->cfg->node_id;
}

static size_t daemon_control_ctl_roles_list(void *ud, struct control_role_entry *out, size_t max)
{
	struct daemon *d = ud;
	struct roles_entry *tmp = max ? calloc(max, sizeof(*tmp)) : NULL;
	if (max && !tmp)
		return 0;
	size_t total = roles_entries(d->roles, tmp, max);
	for (size_t i = 0; i < total && i < max; i++) {
		out[i].node_id = tmp[i].node_id;
		out[i].roles = tmp[i].roles;
		out[i].n_roles = tmp[i].n_roles;
		out[i].error = tmp[i].error;
	}
	free(tmp);
	return total;
}

struct roles_op {
	control_done_fn done;
	void *done_ctx;
};

static void daemon_control_on_roles_written(void *ud, int err)
{
	struct roles_op *o = ud;
	o->done(o->done_ctx, err, err < 0 ? etcd_strerror(err) : NULL);
	free(o);
}

static int daemon_control_roles_op_start(struct daemon *d, const char *node, const char *const *roles, size_t n,
                          bool clear, control_done_fn done, void *done_ctx, char *err,
                          size_t err_len)
{
	struct roles_op *o = malloc(sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->done = done;
	o->done_ctx = done_ctx;
	int r = clear ? roles_clear(d->roles, node, daemon_control_on_roles_written, o)
	              : roles_set(d->roles, node, roles, n, daemon_control_on_roles_written, o);
	if (r < 0) {
		free(o);
		if (r == -EINVAL)
			snprintf(err, err_len, "invalid node id or role name (roles: [a-z0-9_-], 1 to %d "
			                       "characters, at most %d roles)",
			         ROLES_NAME_MAX, ROLES_MAX);
		else
			snprintf(err, err_len, "%s", strerror(-r));
	}
	return r;
}

static int daemon_control_ctl_roles_set(void *ud, const char *node, const char *const *roles, size_t n,
                         bool force, control_done_fn done, void *done_ctx, char *err, size_t err_len)
{
	struct daemon *d = ud;
	if (!force && strcmp(node, d->cfg->node_id) != 0)
		return daemon_roles_set_if_known(d, node, roles, n, done, done_ctx, err, err_len);
	return daemon_control_roles_op_start(ud, node, roles, n, false, done, done_ctx, err, err_len);
}

static int daemon_control_ctl_roles_clear(void *ud, const char *node, control_done_fn done, void *done_ctx,
                           char *err, size_t err_len)
{
	return daemon_control_roles_op_start(ud, node, NULL, 0, true, done, done_ctx, err, err_len);
}

struct forget_op {
	control_done_fn done;
	void *done_ctx;
};

static void daemon_control_on_member_forgotten(void *ud, int err)
{
	struct forget_op *o = ud;
	o->done(o->done_ctx, err,
	        err == -ESTALE ? "the node registered again meanwhile (it is alive)"
	        : err < 0      ? etcd_strerror(err)
	                       : NULL);
	free(o);
}

static int daemon_control_ctl_members_forget(void *ud, const char *name, const char *node, control_done_fn done,
                              void *done_ctx, char *err, size_t err_len)
{
	struct daemon *d = ud;
	struct entry *e = daemon_find_name(d, name);
	if (!e || !e->el) {
		snprintf(err, err_len, "no plugin named '%s' runs on this node", name);
		return -ENOENT;
	}
	struct forget_op *o = malloc(sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->done = done;
	o->done_ctx = done_ctx;
	int r = election_forget(e->el, node, daemon_control_on_member_forgotten, o, err, err_len);
	if (r < 0)
		free(o);
	return r;
}

/* what a verb's etcd write carries back to the control server */
struct verb_op {
	control_done_fn done;
	control_rev_fn done_rev;
	control_history_fn done_hist;
	control_switchover_fn done_sw;
	void *done_ctx;
};

/* daemon_control_verb_start - the running election of plugin name and a verb_op for its
 * answer; NULL with the reason in err (-ENOENT or -ENOMEM in *ret_err) */
static struct verb_op *daemon_control_verb_start(struct daemon *d, const char *name, void *done_ctx,
                                  struct election **ret_el, int *ret_err, char *err,
                                  size_t err_len)
{
	struct entry *e = daemon_find_name(d, name);
	if (!e || !e->el || e->removing || e->gone) {
		snprintf(err, err_len, "no plugin named '%s' runs on this node", name);
		*ret_err = -ENOENT;
		return NULL;
	}
	struct verb_op *o = calloc(1, sizeof(*o));
	if (!o) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	o->done_ctx = done_ctx;
	*ret_el = e->el;
	return o;
}

static void daemon_control_on_paused(void *ud, int err)
{
	struct verb_op *o = ud;
	o->done(o->done_ctx, err, err < 0 ? etcd_strerror(err) : NULL);
	free(o);
}

static int daemon_control_ctl_pause(void *ud, const char *name, bool pause, control_done_fn done, void *done_ctx,
                     char *err, size_t err_len)
{
	struct election *el;
	int r;
	struct verb_op *o = daemon_control_verb_start(ud, name, done_ctx, &el, &r, err, err_len);
	if (!o)
		return r;
	o->done = done;
	r = election_pause(el, pause, daemon_control_on_paused, o, err, err_len);
	if (r < 0)
		free(o);
	return r;
}

static void daemon_control_on_pinned(void *ud, int err, const char *msg, const char *warning,
                                     int64_t rev)
{
	struct verb_op *o = ud;
	(void)rev;
	o->done(o->done_ctx, err, err < 0 ? msg : warning);
	free(o);
}

static int daemon_control_ctl_release_pin(void *ud, const char *name, bool unpin,
                                          struct release rel, bool force, control_done_fn done,
                                          void *done_ctx, char *err, size_t err_len)
{
	struct election *el;
	int r;
	struct verb_op *o = daemon_control_verb_start(ud, name, done_ctx, &el, &r, err, err_len);
	if (!o)
		return r;
	o->done = done;
	r = election_release_pin(el, unpin, rel, force, daemon_control_on_pinned, o);
	if (r < 0) {
		snprintf(err, err_len, "cannot %s plugin '%s': %s", unpin ? "unpin" : "pin", name,
		         etcd_strerror(r));
		free(o);
	}
	return r;
}

static void daemon_control_on_reconcile_requested(void *ud, int err, int64_t rev)
{
	struct verb_op *o = ud;
	o->done_rev(o->done_ctx, err, err < 0 ? etcd_strerror(err) : NULL, rev);
	free(o);
}

static int daemon_control_ctl_reconcile(void *ud, const char *name, control_rev_fn done, void *done_ctx,
                         char *err, size_t err_len)
{
	struct election *el;
	int r;
	struct verb_op *o = daemon_control_verb_start(ud, name, done_ctx, &el, &r, err, err_len);
	if (!o)
		return r;
	o->done_rev = done;
	r = election_request_reconcile(el, daemon_control_on_reconcile_requested, o, err, err_len);
	if (r < 0)
		free(o);
	return r;
}

static void daemon_control_on_history(void *ud, int err, const struct election_term *terms, size_t n)
{
	struct verb_op *o = ud;
	struct control_term *out = NULL;
	if (control_terms_from(terms, n, &out) < 0) {
		err = -ENOMEM;
		n = 0;
	}
	o->done_hist(o->done_ctx, err, err < 0 ? etcd_strerror(err) : NULL, out, n);
	free(out);
	free(o);
}

static int daemon_control_ctl_history(void *ud, const char *name, control_history_fn done, void *done_ctx,
                       char *err, size_t err_len)
{
	struct election *el;
	int r;
	struct verb_op *o = daemon_control_verb_start(ud, name, done_ctx, &el, &r, err, err_len);
	if (!o)
		return r;
	o->done_hist = done;
	r = election_history(el, daemon_control_on_history, o);
	if (r < 0) {
		snprintf(err, err_len, "%s", etcd_strerror(r));
		free(o);
	}
	return r;
}

static void daemon_control_on_switchover_requested(void *ud, int err, const char *msg, int64_t rev,
                                    const char *from)
{
	struct verb_op *o = ud;
	o->done_sw(o->done_ctx, err, msg, rev, from);
	free(o);
}

static int daemon_control_ctl_switchover(void *ud, const char *name, const char *to, uint32_t timeout_ms,
                          control_switchover_fn done, void *done_ctx, char *err, size_t err_len)
{
	struct daemon *d = ud;
	struct election *el;
	int r;
	struct verb_op *o = daemon_control_verb_start(d, name, done_ctx, &el, &r, err, err_len);
	if (!o)
		return r;
	o->done_sw = done;
	struct entry *e = daemon_find_name(d, name);
	const struct loader_plugin *lp = e && e->pi ? plugin_instance_plugin(e->pi) : NULL;
	struct switchover_request rq = {
		.prefix = d->cfg->prefix,
		.name = name,
		.requester = d->cfg->node_id,
		.to = to,
		.role = lp ? lp->role : NULL,
		.timeout_ms = timeout_ms,
	};
	r = switchover_request_start(d->etcd, &rq, daemon_control_on_switchover_requested, o);
	if (r < 0) {
		if (r == -EINVAL)
			snprintf(err, err_len, "invalid switchover: the timeout must be %u to %u ms",
			         SWITCHOVER_TIMEOUT_MIN_MS, SWITCHOVER_TIMEOUT_MAX_MS);
		else
			snprintf(err, err_len, "%s", etcd_strerror(r));
		free(o);
	}
	return r;
}

void daemon_on_leave_later(struct loop_timer *t, void *ud)
{
	(void)t;
	daemon_begin_shutdown(ud, "leaving the cluster (leaseholdctl leave)");
}

static int daemon_control_ctl_leave(void *ud, char *err, size_t err_len)
{
	struct daemon *d = ud;
	if (d->shutting_down) {
		snprintf(err, err_len, "the daemon is already shutting down");
		return -EALREADY;
	}
	log_warn("daemon", "leaving every plugin's membership for good, then shutting down");
	d->leaving = true;
	/* after this request's reply: the shutdown frees the control server */
	loop_timer_arm_in(d->leave_timer, 0);
	return 0;
}

const struct control_ops daemon_control_ops = {
	.members_forget = daemon_control_ctl_members_forget,
	.leave = daemon_control_ctl_leave,
	.plugins = daemon_control_ctl_plugins,
	.members = daemon_control_ctl_members,
	.reload = daemon_control_ctl_reload,
	.node_id = daemon_control_ctl_node_id,
	.roles_list = daemon_control_ctl_roles_list,
	.roles_set = daemon_control_ctl_roles_set,
	.roles_clear = daemon_control_ctl_roles_clear,
	.pause = daemon_control_ctl_pause,
	.reconcile = daemon_control_ctl_reconcile,
	.history = daemon_control_ctl_history,
	.switchover = daemon_control_ctl_switchover,
	.release_pin = daemon_control_ctl_release_pin,
	.config_get = daemon_config_get,
	.config_set = daemon_config_set,
	.shadow = daemon_control_ctl_shadow,
};

