/* SPDX-License-Identifier: MIT */
/*
 * daemon.c - composition of the host (see daemon.h).
 *
 * The daemon composes the parts: the loop, the etcd client and session,
 * the roles record, the plugin directory with one entry per plugin name
 * (daemon_files.c), the control socket (daemon_control.c), the HTTP
 * endpoint (daemon_http.c), systemd (daemon_systemd.c) and the signals
 * that start a reload (SIGHUP) or the shutdown (daemon_shutdown.c).
 * The records they share are in daemon_internal.h.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime_callback_timeout.h"
#include "control/control.h"
#include "worker/worker_crash_report.h"
#include "daemon/daemon.h"
#include "daemon/daemon_etcd_outage.h"
#include "daemon/daemon_metrics.h"
#include "election/election.h"
#include "etcd/etcd.h"
#include "http/http.h"
#include "proto/leasehold.pb-c.h"
#include "abi/abi_loader.h"
#include "base/log.h"
#include "base/loop.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"
#include "runtime/runtime_plugindir.h"
#include "election/election_roles.h"
#include "base/sdnotify.h"
#include "etcd/etcd_session.h"

#include "daemon/daemon_internal.h"

void daemon_notify(void *ud)
{
	struct daemon *d = ud;
	daemon_files_follow_pins(d);
	if (d->ctl)
		control_notify(d->ctl);
	daemon_publish_soon(d);
	daemon_sd_report(d);
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

struct entry *daemon_find_name(struct daemon *d, const char *name)
{
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && e->name[0] && strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* apply_roles - hold a role-bound plugin back unless this node holds its role */
void daemon_apply_roles(struct entry *e)
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

static void daemon_on_roles_changed(void *ud)
{
	struct daemon *d = ud;
	for (struct entry *e = d->entries; e; e = e->next)
		if (!e->gone && !e->removing)
			daemon_apply_roles(e);
	daemon_notify(d);
}

/* ---- session ---- */

static void daemon_on_session_up(void *ud, int64_t lease)
{
	struct daemon *d = ud;
	d->session_down_at = 0;
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el)
			election_session_up(e->el, lease);
	daemon_notify(d);
}

static void daemon_on_session_lost(void *ud, int64_t old, const char *why)
{
	struct daemon *d = ud;
	(void)old;
	snprintf(d->session_lost_why, sizeof(d->session_lost_why), "%s", why ? why : "?");
	d->session_down_at = loop_now();
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el)
			election_session_lost(e->el);
	daemon_notify(d);
}

static const struct session_ops sess_ops = {.up = daemon_on_session_up, .lost = daemon_on_session_lost};

static void daemon_on_signal(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	(void)io;
	(void)events;
	struct daemon *d = ud;
	struct signalfd_siginfo si;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			daemon_sd_reloading(d);
			if (d->cfg->reload)
				d->cfg->reload(d->cfg->reload_ud);
			log_info("daemon", "SIGHUP: rescanning %s", d->cfg->plugin_dir);
			d->rescan_pending = true;
			loop_timer_arm_in(d->later, 0);
		} else
			daemon_begin_shutdown(d, si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
	}
}

/* ---- run ---- */

static int daemon_setup_signals(struct daemon *d)
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
	return loop_io_add(d->loop, d->sigfd, EPOLLIN, daemon_on_signal, d, &d->sig_io);
}

static int daemon_make_private_dir(struct daemon *d)
{
	char err[LOADER_ERR_MAX];
	const char *rt = d->cfg->runtime_dir;
	if (mkdir(rt, 0700) < 0 && errno != EEXIST) {
		int r = -errno;
		log_error("daemon", "cannot create runtime directory %s: %s", rt, strerror(-r));
		return r;
	}
	/* the runtime directory is this daemon's own (its private copies, its
	 * control socket): with the host name it names the daemon across its
	 * restarts */
	char host[256] = "?", real[PATH_MAX];
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "?");
	/* (cut when longer: the state record keeps its first 200 bytes) */
	snprintf(d->instance, sizeof(d->instance), "%.64s:%.250s", host,
	         realpath(rt, real) ? real : rt);
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

/* daemon_open_etcd - the etcd client, the roles mirror and the session
 * (none started yet). 0 or -errno, logged. */
static int daemon_open_etcd(struct daemon *d)
{
	const struct daemon_config *cfg = d->cfg;
	struct etcd_config ec = {
	    .endpoints = cfg->endpoints,
	    .n_endpoints = cfg->n_endpoints,
	    .cacert = cfg->cacert,
	    .cert = cfg->cert,
	    .key = cfg->key,
	    .user = cfg->user,
	    .password = cfg->password,
	};
	int r;
	if ((r = etcd_client_new(d->loop, &ec, &d->etcd)) < 0) {
		log_error("daemon", "cannot create the etcd client: %s", strerror(-r));
		return r;
	}
	host_metrics_init(&d->hm);
	if ((r = daemon_etcd_outage_start(d)) < 0) {
		log_error("daemon", "cannot set up the etcd client's observer: %s", strerror(-r));
		return r;
	}
	if ((r = roles_new(d->loop, d->etcd, cfg->prefix, cfg->node_id, cfg->roles_seed,
	                   cfg->n_roles_seed, daemon_on_roles_changed, d, &d->roles)) < 0) {
		log_error("daemon", "cannot set up roles: %s", strerror(-r));
		return r;
	}
	if ((r = session_new(d->loop, d->etcd, cfg->ttl_s, &sess_ops, d, &d->sess)) < 0) {
		log_error("daemon", "cannot create the session: %s", strerror(-r));
		return r;
	}
	return 0;
}

/* daemon_open_endpoints - what the daemon answers and watches: the control
 * socket, the plugin directory, the HTTP endpoint. 0 or -errno, logged. */
static int daemon_open_endpoints(struct daemon *d)
{
	const struct daemon_config *cfg = d->cfg;
	int r;
	if (!cfg->control_url || *cfg->control_url) {
		char err[256] = "";
		const char *url = cfg->control_url;
		if (!url)
			url = control_default_url(d->control_url, sizeof(d->control_url));
		if ((r = control_new(d->loop, url, &daemon_control_ops, d, &d->ctl, err, sizeof(err))) < 0) {
			log_error("daemon", "cannot open the control socket %s: %s", url,
			          *err ? err : strerror(-r));
			return r;
		}
		log_info("daemon", "control socket at %s", url);
	}
	if ((r = plugindir_new(d->loop, cfg->plugin_dir, 0, daemon_on_plugindir, d, &d->pd)) < 0) {
		log_error("daemon", "cannot watch the plugin directory %s: %s", cfg->plugin_dir,
		          strerror(-r));
		return r;
	}
	return daemon_start_http(d) < 0 ? -EIO : 0;
}

/* daemon_teardown - free every part of d (any of them may be missing) and
 * return code, or leave at once with it when nng is wedged */
static int daemon_teardown(struct daemon *d, int code)
{
	/* nng's own teardown (the HTTP server below, thread workers' sockets)
	 * waits on nng's reaper thread like a bus close does. A bus close that
	 * has not returned (runtime_closer.h) means that thread is wedged, and
	 * the teardown would hold the exit forever: the shutdown's work is done
	 * (the lease is revoked), so leave the rest to the kernel. */
	if (runtime_closer_wait(2000) < 0) {
		log_error("daemon", "nng is stuck closing a plugin worker's bus socket; exiting "
		          "without tearing down (exit code %d)", code);
		_exit(code);
	}
	http_server_free(d->http); /* first: no handler reads the state being freed */
	loop_timer_free(d->publish);
	daemon_etcd_outage_free(d->outage);
	/* nothing is reported while the parts go (sd_report reads them) */
	sdnotify_free(d->sd);
	d->sd = NULL;
	plugindir_free(d->pd);
	control_free(d->ctl);
	daemon_files_free(d);
	session_free(d->sess);
	roles_free(d->roles);
	etcd_client_free(d->etcd);
	daemon_api_fini(d); /* after the client: no history read completes now */
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

int daemon_run(const struct daemon_config *cfg)
{
	struct daemon dd = {.cfg = cfg, .sigfd = -1};
	struct daemon *d = &dd;
	int r, code = 1;

	if ((r = loop_new(&d->loop)) < 0) {
		log_error("daemon", "cannot create the event loop: %s", strerror(-r));
		return 1;
	}
	d->session_down_at = loop_now(); /* no session until the first is up */
	if ((r = daemon_setup_signals(d)) < 0) {
		log_error("daemon", "cannot set up signals: %s", strerror(-r));
		goto out;
	}
	if ((r = loop_timer_new(d->loop, daemon_on_later, d, &d->later)) < 0 ||
	    (r = loop_timer_new(d->loop, daemon_on_shutdown_deadline, d, &d->shutdown_deadline)) <
		0 ||
	    (r = loop_timer_new(d->loop, daemon_on_leave_later, d, &d->leave_timer)) < 0)
		goto out;
	if (daemon_make_private_dir(d) < 0 || daemon_sd_setup(d) < 0)
		goto out;
	/* thread isolation: a plugin that crashes the daemon says so first */
	if ((r = crash_report_install("the daemon dies with it (thread isolation)")) < 0)
		log_warn("daemon", "cannot install the crash reporter: %s", strerror(-r));
	if (daemon_open_etcd(d) < 0 || daemon_open_endpoints(d) < 0)
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
	return daemon_teardown(d, code);
}
