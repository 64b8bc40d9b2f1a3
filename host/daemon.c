/* SPDX-License-Identifier: MIT */
/*
 * daemon.c - composition of the host (see daemon.h).
 *
 * Design notes
 * - Two kinds of records. A `pfile` per candidate FILE in --plugin-dir holds
 *   what the last probe (loader_open) of the file said: plugin name,
 *   release, content hash, or why it was refused. An `entry` per plugin NAME
 *   holds what runs: one election, which lives as long as the entry, and the
 *   plugin instances that come and go under it (hot reload =
 *   election_set_driver with the new instance; the election drains the old
 *   one, deposes it, deletes our key, publishes the new release in the
 *   member record and rejoins). e->file is the file the running instance
 *   came from (or, while nothing runs, the file last tried).
 * - Which file runs is decided by plugindir_prefer() (newest release, the
 *   running file on a tie, else the first file name) over the files whose
 *   last probe succeeded and whose bytes did not fail init. The running
 *   instance stands for its file as long as that file is present and has
 *   no good new bytes, so a broken replacement never stops what runs. A
 *   directory event only probes the file; the decision runs from the
 *   `later` timer, after the whole batch of reports (the start-up scan is
 *   one such batch): the choice never depends on the order of the reports.
 *   A change of choice is a hot reload of the entry to the chosen file; no
 *   file left for a name stops its entry gracefully; the other files of the
 *   name are shown as `superseded`.
 * - A load or init failure never touches what runs: the previous instance
 *   keeps running and the reason is kept for the CLI (state `failed` only
 *   when nothing runs).
 * - Shutdown (SIGTERM/SIGINT): every election is stopped (drain, deposed,
 *   election key deleted; the last election to stop leaves it to the
 *   revocation instead; the member records stay unless the node leaves for
 *   good, `leaseholdctl leave`), then the lease is revoked while every
 *   instance stops (fini), then the loop ends. A second signal or the
 *   shutdown timeout skips the waiting.
 * - Files: the records shared with the control ops are in
 *   daemon_internal.h; the control socket's ops are in daemon_control.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "callback_timeout.h"
#include "control.h"
#include "crash_report.h"
#include "daemon.h"
#include "daemon_metrics.h"
#include "election.h"
#include "etcd.h"
#include "http.h"
#include "leasehold.pb-c.h"
#include "loader.h"
#include "log.h"
#include "loop.h"
#include "plugin_instance.h"
#include "plugindir.h"
#include "roles.h"
#include "sdnotify.h"
#include "session.h"

#include "daemon_internal.h"


void daemon_request_select(struct daemon *d);
static void entry_remove(struct entry *e);
static void maybe_finish_shutdown(struct daemon *d);
static bool is_last_election(void *ud);
static void sd_report(struct daemon *d);

int parse_duration(const char *s, uint64_t *ret_ns)
{
	if (!s || !*s)
		return -EINVAL;
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	double mul;
	if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
		mul = 1e9;
	else if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (strcmp(end, "m") == 0)
		mul = 60e9;
	else if (strcmp(end, "h") == 0)
		mul = 3600e9;
	else
		return -EINVAL;
	double ns = v * mul;
	if (ns > 1e18)
		return -EINVAL;
	*ret_ns = (uint64_t)ns;
	return 0;
}

static void set_error(struct entry *e, const char *msg)
{
	free(e->error);
	e->error = msg ? strdup(msg) : NULL;
}

static struct plugin_releases releases_of(const struct loader_plugin *lp)
{
	return (struct plugin_releases){lp->release, lp->min_reconciler_release,
	                                lp->min_compatible_release};
}

static void publish_soon(struct daemon *d);

void daemon_notify(void *ud)
{
	struct daemon *d = ud;
	if (d->ctl)
		control_notify(d->ctl);
	publish_soon(d);
	sd_report(d);
}

/* the entry whose instance came from `file` (or last tried it) */
struct entry *daemon_find_file(struct daemon *d, const char *file)
{
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && strcmp(e->file, file) == 0)
			return e;
	return NULL;
}

struct pfile *daemon_find_pfile(struct daemon *d, const char *file)
{
	for (struct pfile *pf = d->files; pf; pf = pf->next)
		if (strcmp(pf->file, file) == 0)
			return pf;
	return NULL;
}

static void pfile_set_error(struct pfile *pf, const char *msg)
{
	free(pf->error);
	pf->error = msg ? strdup(msg) : NULL;
}

static void pfile_free(struct pfile *pf)
{
	loader_close(pf->lp);
	free(pf->error);
	free(pf->file);
	free(pf);
}

struct entry *daemon_find_name(struct daemon *d, const char *name)
{
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && e->name[0] && strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* apply_roles - hold a role-bound plugin back unless this node holds its role */
static void apply_roles(struct entry *e)
{
	struct daemon *d = e->d;
	if (!e->el || !e->pi)
		return;
	const char *role = plugin_instance_plugin(e->pi)->role;
	char reason[512] = "";
	if (role[0]) {
		int has = roles_self_has(d->roles, role);
		if (has == -EAGAIN)
			snprintf(reason, sizeof(reason), "needs role '%s'; this node's roles are not known yet",
			         role);
		else if (has < 0)
			snprintf(reason, sizeof(reason), "needs role '%s'; this node's roles record is invalid: %s",
			         role, roles_self_error(d->roles) ? roles_self_error(d->roles) : "?");
		else if (has == 0)
			snprintf(reason, sizeof(reason), "needs role '%s', not assigned to this node", role);
	}
	bool hold = reason[0] != 0;
	if (!hold && !e->hold_reason)
		return;
	if (hold && e->hold_reason && strcmp(reason, e->hold_reason) == 0)
		return;
	free(e->hold_reason);
	e->hold_reason = hold ? strdup(reason) : NULL;
	if (hold)
		log_info("daemon", "plugin %s held back: %s", e->name, reason);
	else
		log_info("daemon", "plugin %s: role '%s' assigned; joining", e->name, role);
	election_hold(e->el, hold, reason);
}

static void on_roles_changed(void *ud)
{
	struct daemon *d = ud;
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && !e->removing)
			apply_roles(e);
	daemon_notify(d);
}

static void entry_free(struct entry *e)
{
	plugin_instance_free(e->next_pi);
	plugin_instance_free(e->pi);
	election_free(e->el);
	daemon_config_entry_free(e);
	plugin_metrics_fini(&e->pm); /* the election no longer calls its drivers */
	free(e->next_file);
	free(e->error);
	free(e->hold_reason);
	free(e->file);
	free(e);
}

/* ---- reload / load ---- */

/* an instance replaced by a hot reload, until its stop completed: it may
 * never complete (a thread-mode callback stuck for good); then the
 * teardown frees it (plugin_instance_free leaves such a thread behind) */
struct retiring {
	struct retiring *next;
	struct daemon *d;
	struct plugin_instance *pi;
};

static void on_old_stopped(void *ud)
{
	struct retiring *r = ud;
	for (struct retiring **pp = &r->d->retiring; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	plugin_instance_free(r->pi);
	free(r);
}

static void retire(struct daemon *d, struct plugin_instance *old)
{
	struct retiring *r = calloc(1, sizeof(*r));
	if (!r) {
		plugin_instance_free(old); /* out of memory: synchronously */
		return;
	}
	r->d = d;
	r->pi = old;
	r->next = d->retiring;
	d->retiring = r;
	plugin_instance_stop(old, on_old_stopped, r);
}

struct swap_ctx {
	struct entry *e;
	struct plugin_instance *old; /* the instance to retire once the swap is done */
};

static void on_swapped(void *ud)
{
	struct swap_ctx *s = ud;
	struct entry *e = s->e;
	bool completed = e->pending_swap == s; /* else superseded by a newer reload */
	if (completed)
		e->pending_swap = NULL;
	/* the election no longer uses the old instance: let it run fini */
	if (s->old)
		retire(e->d, s->old);
	free(s);
	/* a failure of the outgoing instance does not stick to its healthy successor */
	if (completed && e->el && e->pi && plugin_instance_state(e->pi) == PLUGIN_INSTANCE_READY) {
		struct election_info i;
		election_get_info(e->el, &i);
		if (i.state == ELECTION_FAILED) {
			set_error(e, NULL);
			election_recover(e->el);
		}
	}
}

/* the election drives pi through the metering driver (daemon_metrics.h) */
static void metered_set_driver(struct entry *e, struct plugin_instance *pi,
                               const struct plugin_releases *rel, void (*done)(void *ud), void *ud)
{
	struct plugin_metrics_driver *md = plugin_metrics_driver(&e->pm, &plugin_instance_driver_ops, pi);
	if (md)
		election_set_driver(e->el, &plugin_metrics_driver_ops, md, rel, done, ud);
	else /* out of memory: unmetered rather than not at all */
		election_set_driver(e->el, &plugin_instance_driver_ops, pi, rel, done, ud);
}

static void on_init(void *ud, int err, const char *msg)
{
	struct entry *e = ud;
	struct daemon *d = e->d;
	struct plugin_instance *pi = e->next_pi;
	char *file = e->next_file; /* owned here */
	e->next_pi = NULL;
	e->next_file = NULL;
	if (!pi) {
		free(file);
		return;
	}
	const struct loader_plugin *lp = plugin_instance_plugin(pi);
	if (err < 0) {
		char buf[640];
		const char *why = msg && *msg ? msg : strerror(-err);
		/* the instance's message usually says "init failed" itself */
		bool said = strncmp(why, "init failed", strlen("init failed")) == 0;
		snprintf(buf, sizeof(buf), "%s: %s%s", file, said ? "" : "init failed: ", why);
		log_error("daemon", "%s%s", buf, e->pi ? "; the previous instance keeps running" : "");
		/* another file's failure shows on that file's row, not on what runs */
		if (!e->pi || strcmp(file, e->file) == 0)
			set_error(e, buf);
		if (!e->pi)
			e->failed = true;
		/* these bytes are out of the choice until they change or an
		 * operator asks for them (reload) */
		struct pfile *pf = daemon_find_pfile(d, file);
		if (pf && pf->ok && pf->hash == e->next_hash) {
			pf->init_failed = true;
			pfile_set_error(pf, buf);
		}
		plugin_instance_free(pi);
	} else {
		char rb[RELEASE_STRLEN];
		struct plugin_releases rel = releases_of(lp);
		set_error(e, NULL);
		e->failed = false;
		free(e->file);
		e->file = file;
		file = NULL;
		if (!e->pi) {
			release_format(lp->release, rb, sizeof(rb));
			const struct log_field f[] = {{"release", rb, false}, {"file", e->file, false}};
			log_msg_fields(LOG_LVL_INFO, "daemon", e->name, f, 2, "plugin %s %s loaded from %s",
			               e->name, rb, e->file);
			e->pi = pi;
			e->hash = e->next_hash;
			apply_roles(e); /* hold first: never register without the role */
			metered_set_driver(e, pi, &rel, NULL, NULL);
		} else {
			release_format(lp->release, rb, sizeof(rb));
			const struct log_field f[] = {{"release", rb, false}, {"file", e->file, false}};
			log_msg_fields(LOG_LVL_INFO, "daemon", e->name, f, 2,
			               "plugin %s: hot reload to %s from %s", e->name, rb, e->file);
			struct swap_ctx *s = calloc(1, sizeof(*s));
			if (!s) {
				plugin_instance_free(pi);
				goto out;
			}
			s->e = e;
			s->old = e->pi;
			if (e->pending_swap) {
				/* a swap is still pending: the election keeps using the
				 * instance that one would have retired; the superseded
				 * instance (never used) is the one to retire now */
				s->old = e->pending_swap->old;
				e->pending_swap->old = e->pi;
			}
			e->pending_swap = s;
			plugin_metrics_retire(&e->pm, e->pi);
			e->pi = pi;
			e->hash = e->next_hash;
			apply_roles(e); /* the new release may need another role */
			metered_set_driver(e, pi, &rel, on_swapped, s);
		}
	}
out:
	free(file);
	daemon_notify(d);
	daemon_request_select(d); /* what changed meanwhile was left for now */
}

/* on_worker_failed - the plugin crashed, exited, was killed or overran
 * --callback-timeout: give up its leadership at once (no drain: it cannot
 * be waited for) and show why; the instance restarts its worker itself. */
static void on_worker_failed(void *ud, const char *reason)
{
	struct entry *e = ud;
	char buf[600];
	snprintf(buf, sizeof(buf), "plugin worker failed: %s", reason ? reason : "?");
	bool final = e->pi && plugin_instance_state(e->pi) == PLUGIN_INSTANCE_FAILED;
	log_error("daemon", "%s: %s; %s", e->name, buf,
	          final ? "not restarting it (restart leasehold with a matching leasehold-worker)"
	                : "restarting it with backoff");
	set_error(e, buf);
	if (e->el)
		election_fail(e->el, buf);
	daemon_notify(e->d);
}

static void on_worker_recovered(void *ud)
{
	struct entry *e = ud;
	log_info("daemon", "%s: plugin worker recovered", e->name);
	set_error(e, NULL);
	if (e->el)
		election_recover(e->el);
	daemon_notify(e->d);
}

static int entry_make_election(struct entry *e, const struct loader_plugin *lp)
{
	struct daemon *d = e->d;
	struct election_config cfg = {
		.prefix = d->cfg->prefix,
		.name = lp->name,
		.node_id = d->cfg->node_id,
		.releases = releases_of(lp),
		.reconcile_wait_ns = d->cfg->reconcile_wait_ns,
		.reconcile_interval_ns = d->cfg->reconcile_interval_ns,
		.on_change = daemon_notify,
		.on_change_ud = d,
	};
	int r = election_new(d->loop, d->etcd, d->sess, &cfg, &e->el);
	if (r < 0)
		return r;
	snprintf(e->name, sizeof(e->name), "%s", lp->name);
	if ((r = daemon_config_entry_start(e)) < 0)
		return r;
	return election_start(e->el);
}

/* ---- the plugin directory: probe files, choose one file per plugin name ---- */

/* daemon_file_probe - read pf's descriptor again (loader_open) and keep the loaded
 * plugin in pf->lp for the next selection (select_all closes what it does
 * not use). Returns 0, or -errno when the file is refused: the reason is
 * logged and kept in pf->error, and for the file of a running instance also
 * in its entry's error (that instance keeps running). */
int daemon_file_probe(struct daemon *d, struct pfile *pf)
{
	char err[LOADER_ERR_MAX], buf[LOADER_ERR_MAX + 128];
	struct loader_plugin *lp = NULL;
	struct entry *runs = daemon_find_file(d, pf->file);
	if (runs && !runs->pi)
		runs = NULL;
	loader_close(pf->lp);
	pf->lp = NULL;
	int r = loader_open(d->cfg->plugin_dir, pf->file, d->private_dir, &lp, err, sizeof(err));
	if (r < 0) {
		snprintf(buf, sizeof(buf), "%s", err);
		goto refuse;
	}
	if (runs && strcmp(runs->name, lp->name) != 0) {
		/* the running instance would lose the file it stands for */
		snprintf(buf, sizeof(buf),
		         "%s now declares plugin '%s' instead of '%s'; remove the file and add it again",
		         pf->file, lp->name, runs->name);
		r = -EINVAL;
		goto refuse;
	}
	if (strcmp(lp->name, "roles") == 0) {
		snprintf(buf, sizeof(buf), "plugin name 'roles' is reserved (%s/roles/ holds node roles)",
		         d->cfg->prefix);
		r = -EINVAL;
		goto refuse;
	}
	if (!pf->ok || pf->hash != lp->content_hash || strcmp(pf->name, lp->name) != 0)
		pf->init_failed = false; /* new bytes get a new chance */
	if (!pf->init_failed)
		pfile_set_error(pf, NULL);
	pf->ok = true;
	snprintf(pf->name, sizeof(pf->name), "%s", lp->name);
	pf->release = lp->release;
	pf->hash = lp->content_hash;
	pf->lp = lp;
	if (runs && runs->hash == lp->content_hash)
		set_error(runs, NULL); /* what runs is what the file holds (again) */
	return 0;
refuse:
	log_error("daemon", "refusing plugin file %s: %s%s", pf->file, buf,
	          runs ? "; the previous instance keeps running" : "");
	loader_close(lp);
	pf->ok = false;
	pf->init_failed = false;
	pf->name[0] = 0;
	pfile_set_error(pf, buf);
	if (runs)
		set_error(runs, buf);
	return r;
}

/* entry_load - start an instance from pf for entry e (a new entry when e is
 * NULL); on_init completes it. A failure is logged and shown; what runs
 * keeps running. */
static void entry_load(struct daemon *d, struct entry *e, struct pfile *pf)
{
	char buf[LOADER_ERR_MAX + 128];
	char name[LH_PLUGIN_NAME_MAX + 1];
	int r;
	snprintf(name, sizeof(name), "%s", pf->name);
	if (!pf->lp && (daemon_file_probe(d, pf) < 0 || strcmp(pf->name, name) != 0)) {
		daemon_request_select(d); /* the file changed since it was chosen */
		return;
	}
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e)
			plugin_metrics_init(&e->pm);
		if (!e || !(e->file = strdup(pf->file))) {
			free(e);
			log_error("daemon", "out of memory");
			return;
		}
		e->d = d;
		snprintf(e->name, sizeof(e->name), "%s", name);
		struct entry **pp = &d->entries;
		while (*pp)
			pp = &(*pp)->next;
		*pp = e;
	}
	struct loader_plugin *lp = pf->lp;
	char *file = strdup(pf->file), *shown = e->pi ? NULL : strdup(pf->file);
	if (!file || (!e->pi && !shown)) {
		r = -ENOMEM;
		snprintf(buf, sizeof(buf), "out of memory");
		goto refuse;
	}
	if (!e->el && (r = entry_make_election(e, lp)) < 0) {
		snprintf(buf, sizeof(buf), "cannot start the election for '%s': %s", lp->name,
		         strerror(-r));
		goto refuse;
	}
	struct plugin_config pconf = {0};
	if ((r = daemon_config_for_instance(e, &pconf, buf, sizeof(buf))) < 0)
		goto refuse;
	uint32_t isolation = d->cfg->isolation;
	for (size_t i = 0; i < d->cfg->n_iso; i++)
		if (strcmp(d->cfg->iso_names[i], lp->name) == 0)
			isolation = d->cfg->iso_modes[i];
	struct plugin_instance_config pcfg = {
		.on_init = on_init,
		.userdata = e,
		.isolation = isolation,
		.on_failed = on_worker_failed,
		.on_recovered = on_worker_recovered,
		.worker_path = d->cfg->worker_path,
		.config = &pconf,
		/* init sees the cluster's configuration: it waits until P/N/config
		 * was read (daemon_plugin_config.c hands it over) */
		.hold_init = !daemon_config_ready(e),
	};
	callback_timeout_resolve(d->cfg->cb_timeouts, d->cfg->n_cb_timeouts, lp->name,
	                         pcfg.callback_timeout_kind_ms);
	uint64_t hash = lp->content_hash;
	r = plugin_instance_new(lp, d->loop, plugin_metrics_host(&e->pm, election_driver_host(e->el)),
	                        d->cfg->node_id, &pcfg,
	                        &e->next_pi);
	plugin_config_clear(&pconf);
	if (r < 0) {
		snprintf(buf, sizeof(buf), "cannot start a worker for '%s': %s", lp->name, strerror(-r));
		goto refuse;
	}
	pf->lp = NULL; /* the instance's now */
	e->next_hash = hash;
	e->next_file = file;
	if (shown) { /* nothing runs: the entry shows the file it loads */
		free(e->file);
		e->file = shown;
	}
	daemon_notify(d);
	return;
refuse:
	log_error("daemon", "cannot load plugin file %s: %s", pf->file, buf);
	set_error(e, buf);
	if (!e->pi)
		e->failed = true;
	/* out of the choice until the file changes: no retry loop */
	pf->init_failed = true;
	pfile_set_error(pf, buf);
	free(file);
	free(shown);
	daemon_notify(d);
}

/* select_name - apply the rule (plugindir_prefer) to the files that provide
 * plugin `name` and start what it asks for: a first load, a hot reload to
 * another file or to new bytes, or a graceful stop when no file is left. */
static void select_name(struct daemon *d, const char *name)
{
	struct entry *e = daemon_find_name(d, name);
	if (e && (e->removing || e->next_pi))
		return; /* chosen again once it stopped or initialised */
	struct pfile *cur = e ? daemon_find_pfile(d, e->file) : NULL;
	bool cur_present = cur != NULL;
	if (cur && cur->ok && strcmp(cur->name, name) != 0)
		cur = NULL; /* the file provides another plugin now */
	struct pfile *best = NULL;
	struct plugindir_candidate bc = {0};
	for (struct pfile *pf = d->files; pf; pf = pf->next) {
		if (!pf->ok || pf->init_failed || strcmp(pf->name, name) != 0)
			continue;
		struct plugindir_candidate c = {pf->file, pf->release, e && pf == cur};
		if (!best || plugindir_prefer(&c, &bc) > 0) {
			best = pf;
			bc = c;
		}
	}
	/* the running instance stands for its file while the file is there
	 * without good new bytes: a broken replacement never stops it */
	if (e && e->pi && cur && !(cur->ok && !cur->init_failed && cur->hash != e->hash)) {
		struct plugindir_candidate rc = {e->file, plugin_instance_plugin(e->pi)->release, true};
		if (!best || plugindir_prefer(&rc, &bc) >= 0)
			return;
	}
	if (!best) {
		if (e && (e->pi || !cur)) {
			if (cur_present)
				log_info("daemon", "plugin file %s no longer provides %s; stopping it",
				         e->file, name);
			else
				log_info("daemon", "plugin file %s removed; stopping %s", e->file, name);
			entry_remove(e);
		}
		return;
	}
	if (e && e->pi && best != cur) {
		char rb[RELEASE_STRLEN];
		log_info("daemon", "plugin %s: loading %s (%s) to supersede %s%s", name, best->file,
		         release_format(best->release, rb, sizeof(rb)), e->file,
		         cur_present ? "" : " (removed)");
	}
	entry_load(d, e, best);
}

/* select_all - choose for every plugin name; runs from `later`, after a
 * batch of directory reports */
static void select_all(struct daemon *d)
{
	d->select_pending = false;
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone)
			select_name(d, e->name);
	for (struct pfile *pf = d->files; pf; pf = pf->next)
		if (pf->ok && !daemon_find_name(d, pf->name))
			select_name(d, pf->name);
	for (struct pfile *pf = d->files; pf; pf = pf->next) {
		loader_close(pf->lp); /* probes nobody chose */
		pf->lp = NULL;
	}
	daemon_notify(d);
}

void daemon_request_select(struct daemon *d)
{
	if (d->shutting_down)
		return;
	d->select_pending = true;
	loop_timer_arm_in(d->later, 0);
}

/* ---- removal / stop ---- */

static void on_removed_pi_stopped(void *ud)
{
	struct entry *e = ud;
	struct daemon *d = e->d;
	plugin_instance_free(e->pi);
	e->pi = NULL;
	e->gone = true;
	loop_timer_arm_in(d->later, 0); /* free it outside any callback chain */
	daemon_request_select(d);              /* another file of the name may be waiting */
	daemon_notify(d);
	maybe_finish_shutdown(d);
}

static void on_removed_el_stopped(void *ud)
{
	struct entry *e = ud;
	e->el_stopped = true;
	maybe_finish_shutdown(e->d); /* the lease can go before the plugins' fini */
	if (e->pi)
		plugin_instance_stop(e->pi, on_removed_pi_stopped, e);
	else
		on_removed_pi_stopped(e);
}

static void entry_remove(struct entry *e)
{
	if (e->removing || e->gone)
		return;
	e->removing = true;
	/* an instance still initialising is abandoned */
	if (e->next_pi) {
		plugin_instance_free(e->next_pi);
		e->next_pi = NULL;
		free(e->next_file);
		e->next_file = NULL;
	}
	if (e->el && e->d->shutting_down)
		election_stop_revoking(e->el, e->d->leaving, is_last_election, on_removed_el_stopped, e);
	else if (e->el)
		election_stop(e->el, on_removed_el_stopped, e);
	else
		on_removed_el_stopped(e);
}

static void on_plugindir(void *ud, enum plugindir_event ev, const char *file)
{
	struct daemon *d = ud;
	if (d->shutting_down)
		return;
	if (ev == PLUGINDIR_DIR_GONE) {
		log_error("daemon", "plugin directory %s went away; its plugins were stopped",
		          d->cfg->plugin_dir);
		return;
	}
	struct pfile *pf = daemon_find_pfile(d, file);
	if (ev == PLUGINDIR_REMOVED) {
		if (pf) {
			struct pfile **pp = &d->files;
			while (*pp != pf)
				pp = &(*pp)->next;
			*pp = pf->next;
			pfile_free(pf);
			daemon_request_select(d);
			daemon_notify(d);
		}
		return;
	}
	if (!pf) {
		pf = calloc(1, sizeof(*pf));
		if (!pf || !(pf->file = strdup(file))) {
			free(pf);
			log_error("daemon", "out of memory");
			return;
		}
		struct pfile **pp = &d->files;
		while (*pp)
			pp = &(*pp)->next;
		*pp = pf;
	}
	(void)daemon_file_probe(d, pf); /* a refusal is logged and kept in pf->error */
	daemon_request_select(d);
	daemon_notify(d);
}

static void on_later(struct loop_timer *t, void *ud)
{
	(void)t;
	struct daemon *d = ud;
	for (struct entry **pp = &d->entries; *pp;) {
		struct entry *e = *pp;
		if (e->gone && !d->shutting_down) {
			*pp = e->next;
			entry_free(e);
			continue;
		}
		pp = &e->next;
	}
	if (d->rescan_pending && !d->shutting_down) {
		d->rescan_pending = false;
		int r = plugindir_scan(d->pd);
		if (r < 0)
			log_error("daemon", "cannot scan %s: %s", d->cfg->plugin_dir, strerror(-r));
	}
	if (d->select_pending && !d->shutting_down)
		select_all(d);
	sd_report(d); /* a rescan that found nothing new completes a reload here */
}

/* ---- session ---- */

static void on_session_up(void *ud, int64_t lease)
{
	struct daemon *d = ud;
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el)
			election_session_up(e->el, lease);
	daemon_notify(d);
}

static void on_session_lost(void *ud, int64_t old, const char *why)
{
	struct daemon *d = ud;
	(void)old;
	snprintf(d->session_lost_why, sizeof(d->session_lost_why), "%s", why ? why : "?");
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el)
			election_session_lost(e->el);
	daemon_notify(d);
}

static const struct session_ops sess_ops = {.up = on_session_up, .lost = on_session_lost};

/* ---- shutdown ---- */

static void on_revoked(void *ud, int err)
{
	struct daemon *d = ud;
	if (err < 0)
		log_warn("daemon", "revoking the lease failed: %s (it and its keys expire by themselves)",
		         etcd_strerror(err));
	else
		log_info("daemon", "lease revoked");
	d->revoked = true;
	d->revoke_failed = err < 0;
	maybe_finish_shutdown(d);
}

/* elections_stopped - every election of the host but skip's (may be NULL)
 * has stopped */
static bool elections_stopped(const struct daemon *d, const struct entry *skip)
{
	for (const struct entry *e = d->entries; e; e = e->next)
		if (e != skip && !e->gone && e->el && !e->el_stopped)
			return false;
	return true;
}

/* is_last_election - election_stop_revoking's question for entry ud */
static bool is_last_election(void *ud)
{
	const struct entry *me = ud;
	return elections_stopped(me->d, me);
}

/* the end of a clean shutdown */
static void say_bye(struct daemon *d)
{
	log_info("daemon", "bye");
	loop_quit(d->loop, d->exit_code);
}

/* Shutdown ends in two steps: once every election stopped, the lease is
 * revoked (the plugins may still be running fini: they no longer lead);
 * once every plugin stopped too and the revocation answered, the loop ends. */
static void maybe_finish_shutdown(struct daemon *d)
{
	if (!d->shutting_down)
		return;
	bool all = true;
	for (struct entry *e = d->entries; e; e = e->next)
		all = all && e->gone;
	if (!d->revoking && elections_stopped(d, NULL)) {
		d->revoking = true;
		session_revoke(d->sess, on_revoked, d);
		return; /* may have answered at once: it calls us again */
	}
	if (all && d->revoked && !d->lingering) {
		uint64_t now = loop_now(), linger = d->cfg->exit_linger_ns;
		/* the linger fits inside --shutdown-timeout; it is pointless when
		 * the keys were not revoked (the successor waits for the TTL) */
		if (d->deadline_at <= now || d->revoke_failed)
			linger = 0;
		else if (linger > d->deadline_at - now)
			linger = d->deadline_at - now;
		if (!linger) {
			say_bye(d);
			return;
		}
		/* The successor is taking over right now, through etcd; this
		 * host's teardown (plugins unloaded, sockets and connections
		 * closed, the process exit) is milliseconds of CPU and of etcd
		 * work that would compete with it on a shared machine. Nothing
		 * is left to do here, so wait quietly first. */
		d->lingering = true;
		log_info("daemon", "done; lingering %llu ms before the teardown",
		         (unsigned long long)(linger / LOOP_NS_PER_MS));
		loop_timer_arm_in(d->shutdown_deadline, linger);
	}
}

void daemon_begin_shutdown(struct daemon *d, const char *why)
{
	if (d->lingering) { /* everything is done: no need to hurry anything */
		say_bye(d);
		return;
	}
	if (d->shutting_down) {
		log_warn("daemon", "second signal: exiting without waiting");
		plugin_instance_hurry();
		d->exit_code = 1;
		loop_quit(d->loop, 1);
		return;
	}
	log_info("daemon", "%s: shutting down (drain, resign, revoke)", why);
	d->shutting_down = true;
	sdnotify_send(d->sd, "STOPPING=1");
	sd_report(d);
	uint64_t t = d->cfg->shutdown_timeout_ns ? d->cfg->shutdown_timeout_ns : 30 * LOOP_NS_PER_S;
	d->deadline_at = loop_now() + t;
	loop_timer_arm_in(d->shutdown_deadline, t);
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->removing || e->gone)
			continue;
		if (!e->el && !e->pi) {
			e->gone = true;
			continue;
		}
		entry_remove(e);
	}
	maybe_finish_shutdown(d);
}

/* what an entry that did not stop in time waits for, in one line */
static void log_stuck_entry(const struct entry *e)
{
	struct plugin_instance *const pis[] = {e->pi, e->pending_swap ? e->pending_swap->old : NULL};
	const char *cb;
	uint64_t since;
	if (e->gone)
		return;
	for (size_t i = 0; i < sizeof(pis) / sizeof(pis[0]); i++) {
		if (pis[i] && plugin_instance_running(pis[i], &cb, &since)) {
			uint64_t now = loop_now();
			log_error("daemon", "plugin %s: still waiting for its callback %s (running for "
			          "%" PRIu64 " s)",
			          e->name[0] ? e->name : e->file, cb,
			          now > since ? (now - since) / LOOP_NS_PER_S : 0);
			return;
		}
	}
	log_error("daemon", "plugin %s: still waiting for %s", e->name[0] ? e->name : e->file,
	          e->el && !e->el_stopped ? "its election to stop (drain, resign)"
	                                  : "its worker to stop (fini)");
}

static void on_shutdown_deadline(struct loop_timer *t, void *ud)
{
	(void)t;
	struct daemon *d = ud;
	if (d->lingering) {
		say_bye(d);
		return;
	}
	log_error("daemon", "shutdown did not finish in time; exiting (keys expire with the lease)");
	for (struct entry *e = d->entries; e; e = e->next)
		log_stuck_entry(e);
	plugin_instance_hurry();
	d->exit_code = 1;
	loop_quit(d->loop, 1);
}

/* ---- systemd: readiness, status, reload, watchdog (sdnotify.h) ---- */

/* synced - READY=1's condition: the etcd session holds a lease, the plugin
 * directory's last scan has been acted on (every file probed, the choice
 * made), every chosen plugin has either initialised or failed, and the election of every
 * running plugin has read its state from etcd (no longer `loading`). A
 * plugin that failed to load does not hold readiness back: it is reported
 * (STATUS=, leaseholdctl) and waits for new bytes. */
static bool synced(struct daemon *d)
{
	if (!session_is_up(d->sess) || d->rescan_pending || d->select_pending)
		return false;
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->gone || e->removing)
			continue;
		if (e->next_pi || (!e->pi && !e->failed))
			return false; /* still loading */
		if (e->pi && e->el) {
			struct election_info i;
			election_get_info(e->el, &i);
			if (i.state == ELECTION_LOADING)
				return false;
		}
	}
	return true;
}

/* the one-line summary for STATUS=, e.g. "3 plugins, leading 1, etcd ok" */
static void sd_summary(struct daemon *d, char *buf, size_t len)
{
	size_t running = 0, leading = 0, failed = 0;
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->gone || e->removing)
			continue;
		if (e->failed)
			failed++;
		if (!e->pi)
			continue;
		running++;
		if (e->el) {
			struct election_info i;
			election_get_info(e->el, &i);
			leading += i.state == ELECTION_LEADING;
		}
	}
	char f[32] = "";
	if (failed)
		snprintf(f, sizeof(f), ", %zu failed", failed);
	snprintf(buf, len, "%s%zu plugin%s, leading %zu%s, etcd %s",
	         d->shutting_down ? "stopping: "
	         : d->sd_ready   ? ""
	         : d->sd_started ? "reloading: "
	                         : "starting: ",
	         running,
	         running == 1 ? "" : "s", leading, f,
	         session_is_up(d->sess) ? "ok" : "no session");
}

/* sd_report - after any change: READY=1 once synced (again after a reload),
 * STATUS= when the summary changed. */
static void sd_report(struct daemon *d)
{
	if (!d->sd || !d->sess)
		return;
	bool ready = !d->sd_ready && !d->shutting_down && synced(d);
	if (ready) {
		d->sd_ready = d->sd_started = true;
		log_info("daemon", "synced with etcd: ready");
	}
	char status[sizeof(d->sd_status)], msg[sizeof(status) + 32];
	sd_summary(d, status, sizeof(status));
	if (!ready && strcmp(status, d->sd_status) == 0)
		return;
	snprintf(d->sd_status, sizeof(d->sd_status), "%s", status);
	/* one datagram: systemd shows the summary of the state it enters */
	snprintf(msg, sizeof(msg), "%sSTATUS=%s", ready ? "READY=1\n" : "", status);
	sdnotify_send(d->sd, msg);
}

/* sd_reloading - SIGHUP: systemd's reload protocol (RELOADING=1 with the
 * CLOCK_MONOTONIC time, then READY=1 once the rescan has been acted on) */
static void sd_reloading(struct daemon *d)
{
	if (!d->sd || d->shutting_down)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char msg[64];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	         (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000);
	sdnotify_send(d->sd, msg);
	d->sd_ready = false;
}

/* the watchdog pings come from a loop timer, so that a wedged loop stops
 * them and systemd restarts the daemon */
static void on_watchdog(struct loop_timer *t, void *ud)
{
	struct daemon *d = ud;
	sdnotify_send(d->sd, "WATCHDOG=1");
	loop_timer_arm_in(t, d->watchdog_ns);
}

static int sd_setup(struct daemon *d)
{
	int r = sdnotify_from_env(&d->sd, &d->watchdog_ns);
	if (r < 0) { /* a manager that set it waits in vain; a stray one is harmless */
		log_warn("daemon", "NOTIFY_SOCKET is not a usable socket address (%s); not notifying",
		         strerror(-r));
		return 0;
	}
	if (!d->sd)
		return 0;
	if (d->watchdog_ns) {
		if ((r = loop_timer_new(d->loop, on_watchdog, d, &d->watchdog)) < 0)
			return r;
		loop_timer_arm_in(d->watchdog, 0);
	}
	if (d->watchdog_ns)
		log_info("daemon", "systemd notification on; watchdog ping every %llu ms",
		         (unsigned long long)(d->watchdog_ns / LOOP_NS_PER_MS));
	else
		log_info("daemon", "systemd notification on; no watchdog");
	return 0;
}

static void on_signal(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	(void)io;
	(void)events;
	struct daemon *d = ud;
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			log_info("daemon", "SIGHUP: rescanning %s", d->cfg->plugin_dir);
			sd_reloading(d);
			d->rescan_pending = true;
			loop_timer_arm_in(d->later, 0);
		} else
			daemon_begin_shutdown(d, si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
	}
}

/* ---- the HTTP endpoint's snapshot (http.h) ---- */

#define PUBLISH_PERIOD_NS (1 * LOOP_NS_PER_S)
#define PUBLISH_MIN_NS (50 * LOOP_NS_PER_MS) /* coalesces a burst of changes */
/* /healthz fails when no snapshot came for this long: several missed
 * periods, so a loaded machine does not fail it, while a wedged loop does */
#define PUBLISH_STALE_NS (5 * LOOP_NS_PER_S)

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void publish_plugin(struct entry *e, const struct election_info *i,
                           struct http_plugin_state *ps)
{
	char buf[300];
	ps->name = strdup(e->name);
	ps->ready = i && i->ready;
	ps->leader = i && i->state == ELECTION_LEADING;
	if (!ps->ready)
		ps->not_ready = dup_or_null(!i ? (e->error ? e->error : "loading")
		                               : i->not_ready ? i->not_ready : "not ready");
	if (!ps->leader) {
		if (i && i->leader)
			snprintf(buf, sizeof(buf), "not the leader: %s leads (this node: %s)", i->leader,
			         election_state_name(i->state));
		else
			snprintf(buf, sizeof(buf), "not the leader: no leader known (this node: %s)",
			         i ? election_state_name(i->state) : "loading");
		ps->not_leader = strdup(buf);
	}
}

/* publish - build the answer set from the live state and hand it over */
static void publish(struct daemon *d)
{
	size_t n = 0;
	for (struct entry *e = d->entries; e; e = e->next)
		n += !e->gone && e->name[0];
	struct http_snapshot *snap = calloc(1, sizeof(*snap));
	struct http_plugin_state *ps = calloc(n ? n : 1, sizeof(*ps));
	struct plugin_metrics_view *pv = calloc(n ? n : 1, sizeof(*pv));
	struct election_info *infos = calloc(n ? n : 1, sizeof(*infos));
	struct election_member *members = NULL;
	struct metrics_text t = {0};
	if (!snap || !ps || !pv || !infos)
		goto fail;
	snap->plugins = ps;
	ps = NULL;
	size_t k = 0, total_members = 0;
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && e->name[0] && e->el)
			total_members += election_members(e->el, NULL, 0);
	members = calloc(total_members ? total_members : 1, sizeof(*members));
	if (!members)
		goto fail;
	size_t mused = 0;
	for (struct entry *e = d->entries; e && k < n; e = e->next) {
		if (e->gone || !e->name[0])
			continue;
		struct election_info *i = NULL;
		if (e->el) {
			i = &infos[k];
			election_get_info(e->el, i);
			plugin_metrics_observe(&e->pm, i);
			size_t m = election_members(e->el, members + mused, total_members - mused);
			m = m > total_members - mused ? total_members - mused : m;
			pv[k].members = members + mused;
			pv[k].n_members = m;
			mused += m;
		}
		publish_plugin(e, i, &snap->plugins[k]);
		pv[k].name = e->name;
		pv[k].info = i;
		pv[k].pm = &e->pm;
		if (e->pi) {
			struct plugin_instance_stats st;
			plugin_instance_get_stats(e->pi, &st);
			pv[k].has_instance_stats = true;
			pv[k].worker_restarts = e->pm.retired_worker_restarts + st.worker_restarts;
			pv[k].callback_timeouts = e->pm.retired_callback_timeouts + st.callback_timeouts;
		}
		k++;
	}
	snap->n_plugins = k;
	uint64_t now = loop_now(), safe = session_safe_until(d->sess);
	struct host_metrics_view hv = {
		.hm = &d->hm,
		.session_up = session_is_up(d->sess),
		.lease_remaining_s = safe > now ? (double)(safe - now) / 1e9 : 0,
	};
	daemon_metrics_render(&t, &hv, pv, k);
	if (metrics_text_take(&t, &snap->metrics, &snap->metrics_len) < 0)
		goto fail;
	snap->healthy = hv.session_up;
	if (!snap->healthy) {
		char buf[300];
		snprintf(buf, sizeof(buf), "no etcd session%s%s", d->session_lost_why[0] ? ": " : "",
		         d->session_lost_why);
		snap->unhealthy = strdup(buf);
	}
	http_server_publish(d->http, snap);
	snap = NULL;
fail:
	/* on failure the previous snapshot ages: /healthz says so after a while */
	free(members);
	free(infos);
	free(pv);
	free(ps);
	http_snapshot_free(snap);
}

static void on_publish(struct loop_timer *t, void *ud)
{
	struct daemon *d = ud;
	publish(d);
	d->publish_at = loop_now() + PUBLISH_PERIOD_NS;
	loop_timer_arm_at(t, d->publish_at);
}

/* after a change: publish within PUBLISH_MIN_NS, and observe the change */
static void publish_soon(struct daemon *d)
{
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el) {
			struct election_info i;
			election_get_info(e->el, &i);
			plugin_metrics_observe(&e->pm, &i);
		}
	if (!d->http)
		return;
	uint64_t at = loop_now() + PUBLISH_MIN_NS;
	if (d->publish_at > at) {
		d->publish_at = at;
		loop_timer_arm_at(d->publish, at);
	}
}

/* start_http - the endpoint of --http (none: "") */
static int start_http(struct daemon *d)
{
	const char *addr = d->cfg->http_addr ? d->cfg->http_addr : HTTP_DEFAULT_ADDR;
	if (!*addr)
		return 0;
	char err[400] = "";
	int r = http_server_new(addr, PUBLISH_STALE_NS, &d->http, err, sizeof(err));
	if (r < 0) {
		log_error("daemon", "cannot serve HTTP on %s: %s", addr, *err ? err : strerror(-r));
		return r;
	}
	if ((r = loop_timer_new(d->loop, on_publish, d, &d->publish)) < 0)
		return r;
	log_info("daemon", "metrics and probes at http://%s (port %d)", addr, http_server_port(d->http));
	on_publish(d->publish, d);
	return 0;
}

/* ---- run ---- */

static int setup_signals(struct daemon *d)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sigfd < 0)
		return -errno;
	return loop_io_add(d->loop, d->sigfd, EPOLLIN, on_signal, d, &d->sig_io);
}

static int make_private_dir(struct daemon *d)
{
	char err[LOADER_ERR_MAX];
	const char *rt = d->cfg->runtime_dir;
	if (mkdir(rt, 0700) < 0 && errno != EEXIST) {
		int r = -errno;
		log_error("daemon", "cannot create runtime directory %s: %s", rt, strerror(-r));
		return r;
	}
	snprintf(d->private_dir, sizeof(d->private_dir), "%s/plugins.%ld", rt, (long)getpid());
	int r = loader_private_dir_prepare(d->private_dir, err, sizeof(err));
	if (r < 0) {
		log_error("daemon", "%s", err);
		return r;
	}
	/* what a daemon that crashed (or was SIGKILLed) left behind */
	int n = loader_remove_stale(rt, d->private_dir);
	if (n > 0)
		log_info("daemon", "removed %d stale private plugin file(s) left in %s by a daemon "
		         "that did not exit cleanly", n, rt);
	else if (n < 0)
		log_warn("daemon", "cannot look for stale private plugin copies in %s: %s", rt,
		         strerror(-n));
	return 0;
}

int daemon_run(const struct daemon_config *cfg)
{
	struct daemon dd = {.cfg = cfg, .sigfd = -1};
	struct daemon *d = &dd;
	int r, code = 1;

	if ((r = loop_new(&d->loop)) < 0) {
		log_error("daemon", "cannot create the event loop: %s", strerror(-r));
		return 1;
	}
	if ((r = setup_signals(d)) < 0) {
		log_error("daemon", "cannot set up signals: %s", strerror(-r));
		goto out;
	}
	if ((r = loop_timer_new(d->loop, on_later, d, &d->later)) < 0 ||
	    (r = loop_timer_new(d->loop, on_shutdown_deadline, d, &d->shutdown_deadline)) < 0 ||
	    (r = loop_timer_new(d->loop, daemon_on_leave_later, d, &d->leave_timer)) < 0)
		goto out;
	if (make_private_dir(d) < 0 || sd_setup(d) < 0)
		goto out;
	/* thread isolation: a plugin that crashes the daemon says so first */
	if ((r = crash_report_install("the daemon dies with it (thread isolation)")) < 0)
		log_warn("daemon", "cannot install the crash reporter: %s", strerror(-r));

	struct etcd_config ec = {
		.endpoints = cfg->endpoints,
		.n_endpoints = cfg->n_endpoints,
		.cacert = cfg->cacert,
		.cert = cfg->cert,
		.key = cfg->key,
		.user = cfg->user,
		.password = cfg->password,
	};
	if ((r = etcd_client_new(d->loop, &ec, &d->etcd)) < 0) {
		log_error("daemon", "cannot create the etcd client: %s", strerror(-r));
		goto out;
	}
	host_metrics_init(&d->hm);
	etcd_client_set_observer(d->etcd, &host_metrics_etcd_observer, &d->hm);
	if ((r = roles_new(d->loop, d->etcd, cfg->prefix, cfg->node_id, cfg->roles_seed,
	                   cfg->n_roles_seed, on_roles_changed, d, &d->roles)) < 0) {
		log_error("daemon", "cannot set up roles: %s", strerror(-r));
		goto out;
	}
	if ((r = session_new(d->loop, d->etcd, cfg->ttl_s, &sess_ops, d, &d->sess)) < 0) {
		log_error("daemon", "cannot create the session: %s", strerror(-r));
		goto out;
	}
	if (!cfg->control_url || *cfg->control_url) {
		char err[256] = "";
		const char *url = cfg->control_url;
		if (!url)
			url = control_default_url(d->control_url, sizeof(d->control_url));
		if ((r = control_new(d->loop, url, &daemon_control_ops, d, &d->ctl, err, sizeof(err))) < 0) {
			log_error("daemon", "cannot open the control socket %s: %s", url,
			          *err ? err : strerror(-r));
			goto out;
		}
		log_info("daemon", "control socket at %s", url);
	}
	if ((r = plugindir_new(d->loop, cfg->plugin_dir, 0, on_plugindir, d, &d->pd)) < 0) {
		log_error("daemon", "cannot watch the plugin directory %s: %s", cfg->plugin_dir,
		          strerror(-r));
		goto out;
	}
	if (start_http(d) < 0)
		goto out;
	log_info("daemon", "node %s, etcd %s, prefix %s, plugins from %s, ttl %" PRId64 " s",
	         cfg->node_id, etcd_client_endpoint(d->etcd), cfg->prefix, cfg->plugin_dir,
	         cfg->ttl_s);
	session_start(d->sess);
	roles_start(d->roles);
	r = plugindir_scan(d->pd);
	if (r < 0) {
		log_error("daemon", "cannot scan %s: %s", cfg->plugin_dir, strerror(-r));
		goto out;
	}
	r = loop_run(d->loop);
	code = r < 0 ? 1 : r;
out:
	http_server_free(d->http); /* first: no handler reads the state being freed */
	loop_timer_free(d->publish);
	/* nothing is reported while the parts go (sd_report reads them) */
	sdnotify_free(d->sd);
	d->sd = NULL;
	plugindir_free(d->pd);
	control_free(d->ctl);
	while (d->entries) {
		struct entry *e = d->entries;
		d->entries = e->next;
		entry_free(e);
	}
	while (d->files) {
		struct pfile *pf = d->files;
		d->files = pf->next;
		pfile_free(pf);
	}
	while (d->retiring) {
		struct retiring *ret = d->retiring;
		d->retiring = ret->next;
		plugin_instance_free(ret->pi);
		free(ret);
	}
	session_free(d->sess);
	roles_free(d->roles);
	etcd_client_free(d->etcd);
	loop_io_free(d->sig_io);
	loop_timer_free(d->later);
	loop_timer_free(d->leave_timer);
	loop_timer_free(d->shutdown_deadline);
	loop_timer_free(d->watchdog);
	loop_free(d->loop);
	if (d->sigfd >= 0)
		close(d->sigfd);
	if (d->private_dir[0])
		rmdir(d->private_dir);
	return code;
}
