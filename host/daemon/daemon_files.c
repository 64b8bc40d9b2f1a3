/* SPDX-License-Identifier: MIT */
/*
 * daemon_files.c - from the plugin directory to what runs: the files'
 * probes, the choice of one file per plugin name, loading, hot reload
 * (the election swaps the instance), failure and recovery of workers, and
 * the removal of a plugin. Loop thread only.
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
 * - The pin (staged promotion, docs/design.md "The pin"): while this node
 *   runs, or has a file of, a release at or below the plugin's pin, files of
 *   newer releases are left out of the choice (the running instance stands
 *   for its file even with new bytes); a change of the pin chooses again
 *   (daemon_files_follow_pins, from daemon_notify).
 * - The standby: the file a pin holds back (the one unpinning would load) is
 *   loaded and initialised beside the running instance as e->standby_pi,
 *   which the election never drives: no member record, no campaign, no
 *   reconcile (a shadow run may use it). When the choice later names its
 *   file and bytes it becomes the running instance the way a hot reload's
 *   new instance does (daemon_files_init_ok), so the unpin's handover has
 *   no worker start, dlopen or init on its path; when the pin stops holding
 *   it back for another reason, or the file changes, it is dropped. It
 *   reports to its own callbacks until then (its failures never fail the
 *   election); a standby that is not READY at the swap is dropped and the
 *   file loaded as usual.
 * - A load or init failure never touches what runs: the previous instance
 *   keeps running and the reason is kept for the CLI (state `failed` only
 *   when nothing runs).
 * - The directory's path is followed by the watcher (runtime_plugindir.h): a
 *   replaced directory or swapped symlink arrives as an ordinary batch of
 *   reports; a directory that is gone (or replaced by an empty one) arrives
 *   as PLUGINDIR_DIR_GONE and stops nothing, so no member record leaves
 *   because a directory went away.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_callback_timeout.h"
#include "worker/worker_crash_report.h"
#include "election/election.h"
#include "abi/abi_loader.h"
#include "base/log.h"
#include "base/loop.h"
#include "runtime/runtime_instance.h"
#include "runtime/runtime_plugindir.h"
#include "election/election_priority.h"
#include "election/election_roles.h"

#include "daemon/daemon_internal.h"

static void daemon_files_set_error(struct entry *e, const char *msg)
{
	free(e->error);
	e->error = msg ? strdup(msg) : NULL;
}

static struct plugin_releases daemon_files_releases_of(const struct loader_plugin *lp)
{
	return (struct plugin_releases){lp->release, lp->min_reconciler_release,
	                                lp->min_compatible_release,
	                                (lp->desc.flags & LH_PLUGIN_F_REFERENCE_ROLLOUT) != 0};
}

static void daemon_files_pfile_set_error(struct pfile *pf, const char *msg)
{
	free(pf->error);
	pf->error = msg ? strdup(msg) : NULL;
}

/* daemon_files_pfile_refuse - pf is refused for msg, of class cls
 * (HM_REFUSED_*): shown, counted, and kept for the metrics' gauge */
static void daemon_files_pfile_refuse(struct daemon *d, struct pfile *pf, const char *msg, int cls)
{
	daemon_files_pfile_set_error(pf, msg);
	pf->refusal = cls;
	d->hm.files_refused[cls]++;
}

static void daemon_files_pfile_free(struct pfile *pf)
{
	loader_close(pf->lp);
	free(pf->error);
	free(pf->file);
	free(pf);
}

static void daemon_files_entry_free(struct entry *e)
{
	plugin_instance_free(e->standby_pi);
	free(e->standby_file);
	plugin_instance_free(e->next_pi);
	plugin_instance_free(e->pi);
	election_free(e->el);
	daemon_config_entry_free(e);
	plugin_metrics_fini(&e->pm); /* the election no longer calls its drivers */
	free(e->next_file);
	free(e->error);
	free(e->hold_reason);
	free(e->api_hist);
	free(e->file);
	free(e);
}

/* an instance replaced by a hot reload, until its stop completed: it may
 * never complete (a thread-mode callback stuck for good); then the
 * teardown frees it (plugin_instance_free leaves such a thread behind) */
struct retiring {
	struct retiring *next;
	struct daemon *d;
	struct plugin_instance *pi;
};

static void daemon_files_on_old_stopped(void *ud)
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

static void daemon_files_retire(struct daemon *d, struct plugin_instance *old)
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
	plugin_instance_stop(old, daemon_files_on_old_stopped, r);
}

static void daemon_files_on_swapped(void *ud)
{
	struct swap_ctx *s = ud;
	struct entry *e = s->e;
	bool completed = e->pending_swap == s; /* else superseded by a newer reload */
	if (completed)
		e->pending_swap = NULL;
	/* the election no longer uses the old instance: let it run fini */
	if (s->old)
		daemon_files_retire(e->d, s->old);
	free(s);
	/* a failure of the outgoing instance does not stick to its healthy successor */
	if (completed && e->el && e->pi && plugin_instance_state(e->pi) == PLUGIN_INSTANCE_READY) {
		struct election_info i;
		election_get_info(e->el, &i);
		if (i.state == ELECTION_FAILED) {
			daemon_files_set_error(e, NULL);
			election_recover(e->el);
		}
	}
}

/* the election drives pi through the metering driver (daemon_metrics.h) */
static void daemon_files_metered_set_driver(struct entry *e, struct plugin_instance *pi,
                               const struct plugin_releases *rel, void (*done)(void *ud), void *ud)
{
	struct plugin_metrics_driver *md = plugin_metrics_driver(&e->pm, &plugin_instance_driver_ops, pi);
	if (md)
		election_set_driver(e->el, &plugin_metrics_driver_ops, md, rel, done, ud);
	else /* out of memory: unmetered rather than not at all */
		election_set_driver(e->el, &plugin_instance_driver_ops, pi, rel, done, ud);
}

/* daemon_files_init_failed - file's new instance pi did not start: show
 * why, keep what runs, and leave these bytes out of the choice until they
 * change or an operator asks for them (reload). Frees pi. */
static void daemon_files_init_failed(struct entry *e, struct plugin_instance *pi, const char *file,
				     uint64_t hash, int err, const char *msg)
{
	char buf[640];
	const char *why = msg && *msg ? msg : strerror(-err);
	/* the instance's message usually says "init failed" itself */
	bool said = strncmp(why, "init failed", strlen("init failed")) == 0;
	snprintf(buf, sizeof(buf), "%s: %s%s", file, said ? "" : "init failed: ", why);
	log_error("daemon", "%s%s", buf, e->pi ? "; the previous instance keeps running" : "");
	/* another file's failure shows on that file's row, not on what runs */
	if (!e->pi || strcmp(file, e->file) == 0)
		daemon_files_set_error(e, buf);
	if (!e->pi)
		e->failed = true;
	struct pfile *pf = daemon_find_pfile(e->d, file);
	if (pf && pf->ok && pf->hash == hash) {
		pf->init_failed = true;
		daemon_files_pfile_refuse(e->d, pf, buf, HM_REFUSED_INIT);
	}
	plugin_instance_free(pi);
}

/* daemon_files_init_swap - a hot reload's new instance pi is up: the
 * election swaps to it once the running one is no longer used
 * (daemon_files_on_swapped retires that one). False when out of memory
 * (pi is freed, the running instance stays). */
static bool daemon_files_init_swap(struct entry *e, struct plugin_instance *pi,
				   const struct plugin_releases *rel)
{
	struct swap_ctx *s = calloc(1, sizeof(*s));
	if (!s) {
		plugin_instance_free(pi);
		return false;
	}
	s->e = e;
	s->old = e->pi;
	if (e->pending_swap) {
		/* a swap is still pending: the election keeps using the instance
		 * that one would have retired; the superseded instance (never
		 * used) is the one to retire now */
		s->old = e->pending_swap->old;
		e->pending_swap->old = e->pi;
	}
	e->pending_swap = s;
	plugin_metrics_retire(&e->pm, e->pi);
	e->pi = pi;
	e->hash = e->next_hash;
	daemon_apply_roles(e); /* the new release may need another role */
	daemon_files_metered_set_driver(e, pi, rel, daemon_files_on_swapped, s);
	return true;
}

/* daemon_files_init_ok - file's new instance pi is up: the first one of
 * the entry, or a hot reload (daemon_files_init_swap). Takes file. */
static void daemon_files_init_ok(struct entry *e, struct plugin_instance *pi, char *file)
{
	char rb[RELEASE_STRLEN];
	const struct loader_plugin *lp = plugin_instance_plugin(pi);
	struct plugin_releases rel = daemon_files_releases_of(lp);
	daemon_files_set_error(e, NULL);
	e->failed = false;
	free(e->file);
	e->file = file;
	release_format(lp->release, rb, sizeof(rb));
	const struct log_field f[] = {{"release", rb, false}, {"file", e->file, false}};
	if (e->pi) {
		log_msg_fields(LOG_LVL_INFO, "daemon", e->name, f, 2,
			       "plugin %s: hot reload to %s from %s", e->name, rb, e->file);
		daemon_files_init_swap(e, pi, &rel);
		return;
	}
	log_msg_fields(LOG_LVL_INFO, "daemon", e->name, f, 2, "plugin %s %s loaded from %s",
		       e->name, rb, e->file);
	e->pi = pi;
	e->hash = e->next_hash;
	daemon_apply_roles(e); /* hold first: never register without the role */
	daemon_files_metered_set_driver(e, pi, &rel, NULL, NULL);
}

static void daemon_files_on_init(void *ud, int err, const char *msg)
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
	if (err < 0) {
		daemon_files_init_failed(e, pi, file, e->next_hash, err, msg);
		free(file);
	} else {
		daemon_files_init_ok(e, pi, file);
	}
	daemon_notify(d);
	daemon_request_select(d); /* what changed meanwhile was left for now */
}

/* daemon_files_on_worker_failed - the plugin crashed, exited, was killed or overran
 * --callback-timeout: give up its leadership at once (no drain: it cannot
 * be waited for) and show why; the instance restarts its worker itself. */
static void daemon_files_on_worker_failed(void *ud, const char *reason)
{
	struct entry *e = ud;
	char buf[600];
	snprintf(buf, sizeof(buf), "plugin worker failed: %s", reason ? reason : "?");
	bool final = e->pi && plugin_instance_state(e->pi) == PLUGIN_INSTANCE_FAILED;
	log_error("daemon", "%s: %s; %s", e->name, buf,
	          final ? "not restarting it (restart leasehold with a matching leasehold-worker)"
	                : "restarting it with backoff");
	daemon_files_set_error(e, buf);
	if (e->el)
		election_fail(e->el, buf);
	daemon_notify(e->d);
}

static void daemon_files_on_worker_recovered(void *ud)
{
	struct entry *e = ud;
	log_info("daemon", "%s: plugin worker recovered", e->name);
	daemon_files_set_error(e, NULL);
	if (e->el)
		election_recover(e->el);
	daemon_notify(e->d);
}

static int daemon_files_entry_make_election(struct entry *e, const struct loader_plugin *lp)
{
	struct daemon *d = e->d;
	struct election_config cfg = {
		.prefix = d->cfg->prefix,
		.name = lp->name,
		.node_id = d->cfg->node_id,
		.instance = d->instance,
		.releases = daemon_files_releases_of(lp),
		.reconcile_wait_ns = d->cfg->reconcile_wait_ns,
		.reconcile_interval_ns = d->cfg->reconcile_interval_ns,
		.priority = priority_resolve(d->cfg->priorities, d->cfg->n_priorities, lp->name),
		.health = {.after = d->cfg->unhealthy_after,
		           .hold_down_ns = d->cfg->unhealthy_hold_down_ns,
		           .hold_down_max_ns = HEALTH_HOLD_DOWN_CAP_NS},
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
 * plugin in pf->lp for the next selection (daemon_files_select_all closes what it does
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
	int cls = HM_REFUSED_NAME; /* the checks after loader_open's */
	if (r < 0) {
		snprintf(buf, sizeof(buf), "%s", err);
		cls = host_metrics_refusal_of_loader(r);
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
		daemon_files_pfile_set_error(pf, NULL);
	pf->ok = true;
	snprintf(pf->name, sizeof(pf->name), "%s", lp->name);
	pf->release = lp->release;
	pf->hash = lp->content_hash;
	pf->lp = lp;
	if (runs && runs->hash == lp->content_hash)
		daemon_files_set_error(runs, NULL); /* what runs is what the file holds (again) */
	return 0;
refuse:
	log_error("daemon", "refusing plugin file %s: %s%s", pf->file, buf,
	          runs ? "; the previous instance keeps running" : "");
	loader_close(lp);
	pf->ok = false;
	pf->init_failed = false;
	pf->name[0] = 0;
	daemon_files_pfile_refuse(d, pf, buf, cls);
	if (runs)
		daemon_files_set_error(runs, buf);
	return r;
}

/* daemon_files_entry_new - a new entry for plugin name, first loaded
 * from pf, appended to d's entries. NULL when out of memory (logged). */
static struct entry *daemon_files_entry_new(struct daemon *d, const char *name,
					    const struct pfile *pf)
{
	struct entry *e = calloc(1, sizeof(*e));
	if (e)
		plugin_metrics_init(&e->pm);
	if (!e || !(e->file = strdup(pf->file))) {
		free(e);
		log_error("daemon", "out of memory");
		return NULL;
	}
	e->d = d;
	snprintf(e->name, sizeof(e->name), "%s", name);
	struct entry **pp = &d->entries;
	while (*pp)
		pp = &(*pp)->next;
	*pp = e;
	return e;
}

/* daemon_files_instance_config - what the daemon's settings say for an
 * instance of lp: isolation, callback timeouts, --plugin-read grants (into
 * grants, of n_grants slots; borrowed from the settings), the configuration
 * pconf (the caller's, cleared by it) */
static void daemon_files_instance_config(struct entry *e, const struct loader_plugin *lp,
					 struct plugin_config *pconf, const char **grants,
					 size_t n_grants, struct plugin_instance_config *ret)
{
	const struct daemon_config *cfg = e->d->cfg;
	uint32_t isolation = cfg->isolation;
	for (size_t i = 0; i < cfg->n_iso; i++)
		if (strcmp(cfg->iso_names[i], lp->name) == 0)
			isolation = cfg->iso_modes[i];
	*ret = (struct plugin_instance_config){
	    .on_init = daemon_files_on_init,
	    .userdata = e,
	    .isolation = isolation,
	    .on_failed = daemon_files_on_worker_failed,
	    .on_recovered = daemon_files_on_worker_recovered,
	    .worker_path = cfg->worker_path,
	    .restart_min_ms = cfg->restart_min_ms,
	    .restart_max_ms = cfg->restart_max_ms,
	    .config = pconf,
	    /* init sees the cluster's configuration: it waits until P/N/config
	     * was read (daemon_plugin_config.c hands it over) */
	    .hold_init = !daemon_config_ready(e),
	};
	callback_timeout_resolve(cfg->cb_timeouts, cfg->n_cb_timeouts, lp->name,
				 ret->callback_timeout_kind_ms);
	for (size_t i = 0; i < cfg->n_read && ret->n_read_grants < n_grants; i++)
		if (strcmp(cfg->read_names[i], lp->name) == 0)
			grants[ret->n_read_grants++] = cfg->read_prefixes[i];
	ret->read_grants = grants;
}

static void daemon_files_on_standby_init(void *ud, int err, const char *msg);
static void daemon_files_on_standby_failed(void *ud, const char *reason);
static void daemon_files_on_standby_recovered(void *ud);

/* daemon_files_instance_new - start an instance of pf's probed plugin
 * (pf->lp) for entry e, whose election exists: one that reports to the
 * running instance's callbacks, or a standby's. On success takes pf->lp and
 * returns 0; else -errno with the reason in buf. */
static int daemon_files_instance_new(struct entry *e, struct pfile *pf, bool standby,
				     struct plugin_instance **ret, char *buf, size_t len)
{
	struct loader_plugin *lp = pf->lp;
	struct plugin_config pconf = {0};
	int r = daemon_config_for_instance(e, &pconf, buf, len);
	if (r < 0)
		return r;
	struct plugin_instance_config pcfg;
	const char *grants[64]; /* --plugin-read of this plugin (copied by the instance) */
	daemon_files_instance_config(e, lp, &pconf, grants, 64, &pcfg);
	if (standby) {
		pcfg.on_init = daemon_files_on_standby_init;
		pcfg.on_failed = daemon_files_on_standby_failed;
		pcfg.on_recovered = daemon_files_on_standby_recovered;
	}
	r = plugin_instance_new(lp, e->d->loop,
				plugin_metrics_host(&e->pm, election_driver_host(e->el)),
				e->d->cfg->node_id, &pcfg, ret);
	plugin_config_clear(&pconf);
	if (r < 0) {
		snprintf(buf, len, "cannot start a worker for '%s': %s", lp->name, strerror(-r));
		return r;
	}
	pf->lp = NULL; /* the instance's now */
	return 0;
}

/* daemon_files_entry_load - start an instance from pf for entry e (a new entry when e is
 * NULL); daemon_files_on_init completes it. A failure is logged and shown; what runs
 * keeps running. */
static void daemon_files_entry_load(struct daemon *d, struct entry *e, struct pfile *pf)
{
	char buf[LOADER_ERR_MAX + 128];
	char name[LH_PLUGIN_NAME_MAX + 1];
	int r;
	snprintf(name, sizeof(name), "%s", pf->name);
	if (!pf->lp && (daemon_file_probe(d, pf) < 0 || strcmp(pf->name, name) != 0)) {
		daemon_request_select(d); /* the file changed since it was chosen */
		return;
	}
	if (!e && !(e = daemon_files_entry_new(d, name, pf)))
		return;
	struct loader_plugin *lp = pf->lp;
	char *file = strdup(pf->file), *shown = e->pi ? NULL : strdup(pf->file);
	if (!file || (!e->pi && !shown)) {
		r = -ENOMEM;
		snprintf(buf, sizeof(buf), "out of memory");
		goto refuse;
	}
	if (!e->el && (r = daemon_files_entry_make_election(e, lp)) < 0) {
		snprintf(buf, sizeof(buf), "cannot start the election for '%s': %s", lp->name,
		         strerror(-r));
		goto refuse;
	}
	uint64_t hash = lp->content_hash;
	if ((r = daemon_files_instance_new(e, pf, false, &e->next_pi, buf, sizeof(buf))) < 0)
		goto refuse;
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
	daemon_files_set_error(e, buf);
	if (!e->pi)
		e->failed = true;
	/* out of the choice until the file changes: no retry loop */
	pf->init_failed = true;
	daemon_files_pfile_refuse(d, pf, buf, HM_REFUSED_START);
	free(file);
	free(shown);
	daemon_notify(d);
}

/* ---- the standby of a file the pin holds back ---- */

static bool daemon_files_is_standby(const struct entry *e, const struct pfile *pf)
{
	return e && e->standby_pi && pf && strcmp(e->standby_file, pf->file) == 0 &&
	       pf->hash == e->standby_hash;
}

/* daemon_files_drop_standby - the standby is not wanted any more (why) */
static void daemon_files_drop_standby(struct entry *e, const char *why)
{
	struct plugin_instance *pi = e->standby_pi;
	if (!pi)
		return;
	log_info("daemon", "plugin %s: dropping the standby from %s: %s", e->name, e->standby_file,
	         why);
	e->standby_pi = NULL;
	free(e->standby_file);
	e->standby_file = NULL;
	e->standby_ready = false;
	plugin_metrics_retire(&e->pm, pi);
	/* nothing reports to the entry now; it stops (fini, or an init still
	 * running and then fini) among the retiring without blocking the loop */
	plugin_instance_set_owner(pi, NULL, NULL, NULL, NULL);
	daemon_files_retire(e->d, pi);
	daemon_notify(e->d);
}

static void daemon_files_on_standby_init(void *ud, int err, const char *msg)
{
	struct entry *e = ud;
	struct plugin_instance *pi = e->standby_pi;
	if (!pi)
		return;
	if (err < 0) {
		/* shown and out of the choice now, not only once the pin lifts */
		char *file = e->standby_file;
		e->standby_pi = NULL;
		e->standby_file = NULL;
		plugin_metrics_retire(&e->pm, pi);
		daemon_files_init_failed(e, pi, file, e->standby_hash, err, msg);
		free(file);
	} else {
		char rb[RELEASE_STRLEN];
		e->standby_ready = true;
		log_info("daemon", "plugin %s: %s (release %s) is loaded and initialised beside what "
		         "runs; it runs once the pin lets it", e->name, e->standby_file,
		         release_format(plugin_instance_plugin(pi)->release, rb, sizeof(rb)));
	}
	daemon_notify(e->d);
	daemon_request_select(e->d); /* the pin may have moved meanwhile */
}

static void daemon_files_on_standby_failed(void *ud, const char *reason)
{
	struct entry *e = ud;
	bool final = e->standby_pi && plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_FAILED;
	log_error("daemon", "plugin %s: the standby from %s failed: %s; %s (what runs is not "
	          "affected)", e->name, e->standby_file ? e->standby_file : "?",
	          reason ? reason : "?", final ? "dropping it" : "restarting it with backoff");
	daemon_notify(e->d);
	if (final)
		daemon_request_select(e->d); /* the choice drops it */
}

static void daemon_files_on_standby_recovered(void *ud)
{
	struct entry *e = ud;
	log_info("daemon", "plugin %s: the standby recovered", e->name);
	daemon_notify(e->d);
}

/* daemon_files_promote_standby - the choice names the standby's file and
 * bytes: it becomes the running instance, as a hot reload's new one does */
static void daemon_files_promote_standby(struct entry *e)
{
	struct plugin_instance *pi = e->standby_pi;
	char *file = e->standby_file; /* daemon_files_init_ok takes it */
	e->standby_pi = NULL;
	e->standby_file = NULL;
	e->standby_ready = false;
	e->next_hash = e->standby_hash;
	plugin_instance_set_owner(pi, NULL, daemon_files_on_worker_failed,
	                          daemon_files_on_worker_recovered, e);
	log_info("daemon", "plugin %s: %s may run now; swapping to its standby", e->name, file);
	daemon_files_init_ok(e, pi, file);
	daemon_notify(e->d);
}

/* daemon_files_standby_want - held (may be NULL) is the file the pin holds
 * back that unpinning would load: load it beside what runs unless it is
 * there already */
static void daemon_files_standby_want(struct daemon *d, struct entry *e, struct pfile *held)
{
	char buf[LOADER_ERR_MAX + 128];
	char name[LH_PLUGIN_NAME_MAX + 1];
	if (!held || e->standby_pi || !e->pi || !e->el)
		return;
	snprintf(name, sizeof(name), "%s", held->name);
	if (!held->lp && (daemon_file_probe(d, held) < 0 || strcmp(held->name, name) != 0)) {
		daemon_request_select(d); /* the file changed since it was chosen */
		return;
	}
	char *file = strdup(held->file);
	uint64_t hash = held->lp->content_hash;
	int r = file ? daemon_files_instance_new(e, held, true, &e->standby_pi, buf, sizeof(buf))
	             : -ENOMEM;
	if (r < 0) {
		/* out of the choice until the file changes, as a failed start of
		 * the running file's is: no retry loop */
		if (!file)
			snprintf(buf, sizeof(buf), "out of memory");
		log_error("daemon", "plugin %s: cannot load %s beside what runs: %s", e->name,
		          held->file, buf);
		held->init_failed = true;
		daemon_files_pfile_refuse(d, held, buf, HM_REFUSED_START);
		free(file);
		daemon_notify(d);
		return;
	}
	e->standby_file = file;
	e->standby_hash = hash;
	e->standby_ready = false;
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	log_info("daemon", "plugin %s: loading %s (release %s) beside the running %s while the pin "
	         "holds it back", e->name, held->file, release_format(held->release, a, sizeof(a)),
	         release_format(plugin_instance_plugin(e->pi)->release, b, sizeof(b)));
	daemon_notify(d);
}

/* daemon_files_pin_hold - the pin holds files of releases newer than it
 * back (staged promotion) while this node runs, or has a file of, a release
 * at or below it; *ret_pin: the pin (!set: none) */
static bool daemon_files_pin_hold(struct daemon *d, const struct entry *e, const char *name,
                                  struct rule_pin *ret_pin)
{
	*ret_pin = e && e->el ? election_pin(e->el) : (struct rule_pin){.set = false};
	if (!ret_pin->set)
		return false;
	if (e && e->pi && !release_less(ret_pin->release, plugin_instance_plugin(e->pi)->release))
		return true;
	for (struct pfile *pf = d->files; pf; pf = pf->next)
		if (pf->ok && !pf->init_failed && strcmp(pf->name, name) == 0 &&
		    !release_less(ret_pin->release, pf->release))
			return true;
	return false;
}

/* daemon_files_pin_waits - pf waits for the pin: say so once per file content */
static bool daemon_files_pin_waits(struct entry *e, const struct pfile *pf,
                                   const struct rule_pin *pin, bool hold)
{
	if (!hold || !release_less(pin->release, pf->release))
		return false;
	if (e && e->pin_logged_hash != pf->hash) {
		char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
		log_info("daemon", "plugin %s: %s (release %s) waits: the pin at %s holds newer "
		         "releases back", e->name, pf->file, release_format(pf->release, a, sizeof(a)),
		         release_format(pin->release, b, sizeof(b)));
		e->pin_logged_hash = pf->hash;
	}
	return true;
}

/* daemon_files_select_name - apply the rule (plugindir_prefer) to the files that provide
 * plugin `name` and start what it asks for: a first load, a hot reload to
 * another file or to new bytes, or a graceful stop when no file is left. */
static void daemon_files_select_name(struct daemon *d, const char *name)
{
	struct entry *e = daemon_find_name(d, name);
	if (e && (e->removing || e->next_pi))
		return; /* chosen again once it stopped or initialised */
	struct pfile *cur = e ? daemon_find_pfile(d, e->file) : NULL;
	bool cur_present = cur != NULL;
	if (cur && cur->ok && strcmp(cur->name, name) != 0)
		cur = NULL; /* the file provides another plugin now */
	struct rule_pin pin;
	bool hold = daemon_files_pin_hold(d, e, name, &pin);
	/* best: the choice; held: what the choice would be without the pin */
	struct pfile *best = NULL, *held = NULL;
	struct plugindir_candidate bc = {0}, hc = {0};
	for (struct pfile *pf = d->files; pf; pf = pf->next) {
		if (!pf->ok || pf->init_failed || strcmp(pf->name, name) != 0)
			continue;
		struct plugindir_candidate c = {pf->file, pf->release, e && pf == cur};
		if (daemon_files_pin_waits(e, pf, &pin, hold)) {
			if (!held || plugindir_prefer(&c, &hc) > 0) {
				held = pf;
				hc = c;
			}
		} else if (!best || plugindir_prefer(&c, &bc) > 0) {
			best = pf;
			bc = c;
		}
	}
	if (e && e->standby_pi && e->standby_ready &&
	    plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_FAILED) {
		/* out of the choice until its bytes change: it would fail again */
		struct pfile *spf = daemon_find_pfile(d, e->standby_file);
		if (spf && spf->ok && spf->hash == e->standby_hash) {
			spf->init_failed = true;
			daemon_files_pfile_refuse(d, spf, "its worker failed for good beside what runs",
			                          HM_REFUSED_START);
		}
		daemon_files_drop_standby(e, "its worker failed for good");
	}
	if (e && e->standby_pi) {
		if (daemon_files_is_standby(e, best) && (best != cur || best->hash != e->hash)) {
			if (!e->standby_ready)
				return; /* chosen again once it initialised */
			if (plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_READY) {
				daemon_files_promote_standby(e);
				return;
			}
			daemon_files_drop_standby(e, "it is not ready; loading the file again");
		} else if (!daemon_files_is_standby(e, held)) {
			struct pfile *spf = daemon_find_pfile(d, e->standby_file);
			daemon_files_drop_standby(e, !spf || !spf->ok || spf->hash != e->standby_hash
			                                 ? "its file was replaced or removed"
			                             : held ? "another file is held back now"
			                                    : "the pin no longer holds it back");
		}
	}
	/* the running instance stands for its file while the file is there
	 * without good new bytes (a broken replacement never stops it), or its
	 * new bytes wait for the pin */
	bool cur_new = cur && cur->ok && !cur->init_failed && cur->hash != e->hash;
	if (e && e->pi && cur && (!cur_new || (hold && release_less(pin.release, cur->release)))) {
		struct plugindir_candidate rc = {e->file, plugin_instance_plugin(e->pi)->release, true};
		if (!best || plugindir_prefer(&rc, &bc) >= 0) {
			daemon_files_standby_want(d, e, hold ? held : NULL);
			return;
		}
	}
	if (!best) {
		if (e && (e->pi || !cur)) {
			if (cur_present)
				log_info("daemon", "plugin file %s no longer provides %s; stopping it",
				         e->file, name);
			else
				log_info("daemon", "plugin file %s removed; stopping %s", e->file, name);
			daemon_entry_remove(e);
		}
		return;
	}
	if (e && e->pi && best != cur) {
		char rb[RELEASE_STRLEN];
		log_info("daemon", "plugin %s: loading %s (%s) to supersede %s%s", name, best->file,
		         release_format(best->release, rb, sizeof(rb)), e->file,
		         cur_present ? "" : " (removed)");
	}
	daemon_files_entry_load(d, e, best);
}

/* daemon_files_select_all - choose for every plugin name; runs from `later`, after a
 * batch of directory reports */
static void daemon_files_select_all(struct daemon *d)
{
	d->select_pending = false;
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone)
			daemon_files_select_name(d, e->name);
	for (struct pfile *pf = d->files; pf; pf = pf->next)
		if (pf->ok && !daemon_find_name(d, pf->name))
			daemon_files_select_name(d, pf->name);
	for (struct pfile *pf = d->files; pf; pf = pf->next) {
		loader_close(pf->lp); /* probes nobody chose */
		pf->lp = NULL;
	}
	daemon_notify(d);
}

void daemon_files_follow_pins(struct daemon *d)
{
	bool changed = false;
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->gone || !e->el)
			continue;
		struct rule_pin p = election_pin(e->el);
		if (p.set != e->pin_seen.set || p.forced != e->pin_seen.forced ||
		    (p.set && release_cmp(p.release, e->pin_seen.release) != 0)) {
			e->pin_seen = p;
			e->pin_logged_hash = 0;
			changed = true;
		}
	}
	if (changed)
		daemon_request_select(d); /* a file that waited for the pin may run now */
}

void daemon_request_select(struct daemon *d)
{
	if (d->shutting_down)
		return;
	d->select_pending = true;
	loop_timer_arm_in(d->later, 0);
}

/* ---- removal / stop ---- */

static void daemon_files_on_removed_pi_stopped(void *ud)
{
	struct entry *e = ud;
	struct daemon *d = e->d;
	plugin_instance_free(e->pi);
	e->pi = NULL;
	e->gone = true;
	loop_timer_arm_in(d->later, 0); /* free it outside any callback chain */
	daemon_request_select(d);              /* another file of the name may be waiting */
	daemon_notify(d);
	daemon_maybe_finish_shutdown(d);
}

static void daemon_files_on_removed_el_stopped(void *ud)
{
	struct entry *e = ud;
	e->el_stopped = true;
	daemon_maybe_finish_shutdown(e->d); /* the lease can go before the plugins' fini */
	if (e->pi)
		plugin_instance_stop(e->pi, daemon_files_on_removed_pi_stopped, e);
	else
		daemon_files_on_removed_pi_stopped(e);
}

void daemon_entry_remove(struct entry *e)
{
	if (e->removing || e->gone)
		return;
	e->removing = true;
	daemon_files_drop_standby(e, "the plugin stops");
	/* an instance still initialising is abandoned */
	if (e->next_pi) {
		plugin_instance_free(e->next_pi);
		e->next_pi = NULL;
		free(e->next_file);
		e->next_file = NULL;
	}
	if (e->el && e->d->shutting_down)
		election_stop_revoking(e->el, e->d->leaving, daemon_is_last_election, daemon_files_on_removed_el_stopped, e);
	else if (e->el)
		election_stop(e->el, daemon_files_on_removed_el_stopped, e);
	else
		daemon_files_on_removed_el_stopped(e);
}

/* the configured directory went (or came back): nothing stops and no member
 * record goes while it is gone (a directory that went is no decision to
 * leave); its plugins keep running from their private copies. Logged once
 * each way, shown on every row of `plugins` and as
 * leasehold_plugin_dir_ok. */
static void daemon_files_dir_state(struct daemon *d, enum plugindir_event ev)
{
	free(d->plugin_dir_error);
	d->plugin_dir_error = NULL;
	if (ev == PLUGINDIR_DIR_GONE) {
		char buf[PATH_MAX + 128];
		int err = plugindir_error(d->pd);
		if (err == -ENODATA)
			snprintf(buf, sizeof(buf),
			         "plugin directory %s was replaced by an empty directory",
			         d->cfg->plugin_dir);
		else
			snprintf(buf, sizeof(buf), "plugin directory %s is gone (%s)",
			         d->cfg->plugin_dir, strerror(err < 0 ? -err : ENOENT));
		log_error("daemon",
		          "%s; its plugins keep running and keep their member records until it is back",
		          buf);
		d->plugin_dir_error = strdup(buf); /* out of memory: the log and the gauge say it */
	} else {
		log_info("daemon", "plugin directory %s is back; rescanning it", d->cfg->plugin_dir);
	}
	daemon_notify(d);
}

void daemon_on_plugindir(void *ud, enum plugindir_event ev, const char *file)
{
	struct daemon *d = ud;
	if (d->shutting_down)
		return;
	if (ev == PLUGINDIR_DIR_GONE || ev == PLUGINDIR_DIR_BACK) {
		daemon_files_dir_state(d, ev);
		return;
	}
	struct pfile *pf = daemon_find_pfile(d, file);
	if (ev == PLUGINDIR_REMOVED) {
		if (pf) {
			struct pfile **pp = &d->files;
			while (*pp != pf)
				pp = &(*pp)->next;
			*pp = pf->next;
			daemon_files_pfile_free(pf);
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

void daemon_on_later(struct loop_timer *t, void *ud)
{
	(void)t;
	struct daemon *d = ud;
	for (struct entry **pp = &d->entries; *pp;) {
		struct entry *e = *pp;
		if (e->gone && !d->shutting_down) {
			*pp = e->next;
			daemon_files_entry_free(e);
			continue;
		}
		pp = &e->next;
	}
	if (d->rescan_pending && !d->shutting_down) {
		d->rescan_pending = false;
		int r = plugindir_scan(d->pd);
		if (r < 0 && d->plugin_dir_error) /* gone: the scan changed nothing */
			log_error("daemon", "cannot scan: %s", d->plugin_dir_error);
		else if (r < 0)
			log_error("daemon", "cannot scan %s: %s", d->cfg->plugin_dir, strerror(-r));
	}
	if (d->select_pending && !d->shutting_down)
		daemon_files_select_all(d);
	daemon_sd_report(d); /* a rescan that found nothing new completes a reload here */
}

void daemon_files_free(struct daemon *d)
{
	while (d->entries) {
		struct entry *e = d->entries;
		d->entries = e->next;
		daemon_files_entry_free(e);
	}
	while (d->files) {
		struct pfile *pf = d->files;
		d->files = pf->next;
		daemon_files_pfile_free(pf);
	}
	free(d->plugin_dir_error);
	d->plugin_dir_error = NULL;
	while (d->retiring) {
		struct retiring *ret = d->retiring;
		d->retiring = ret->next;
		plugin_instance_free(ret->pi);
		free(ret);
	}
}
