/* SPDX-License-Identifier: MIT */
/*
 * daemon_systemd.c - the daemon's side of systemd's notify protocol
 * (sdnotify.h): READY=1 once synced with etcd (again after a SIGHUP
 * reload), STATUS= one-line summaries, RELOADING=1, and WATCHDOG=1 from a
 * loop timer so that a wedged loop stops the pings. Nothing is sent when
 * the daemon was not started with NOTIFY_SOCKET; the log line of being
 * synced ("synced with etcd: ready") is written either way. Loop thread
 * only.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/loop.h"
#include "base/sdnotify.h"
#include "etcd/etcd_session.h"

#include "daemon/daemon_internal.h"

/* synced - READY=1's condition: the etcd session holds a lease, the plugin
 * directory's last scan has been acted on (every file probed, the choice
 * made), every chosen plugin has either initialised or failed, and the election of every
 * running plugin has read its state from etcd (no longer `loading`). A
 * plugin that failed to load does not hold readiness back: it is reported
 * (STATUS=, leaseholdctl) and waits for new bytes. */
static bool daemon_systemd_synced(struct daemon *d)
{
	if (!session_is_up(d->sess) || d->rescan_pending || d->select_pending)
		return false;
	for (struct entry *e = d->entries; e; e = e->next) {
		if (e->gone || e->removing)
			continue;
		if (e->next_pi || (!e->pi && !e->failed) || (e->standby_pi && !e->standby_ready))
			return false; /* still loading (a standby too) */
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
static void daemon_systemd_sd_summary(struct daemon *d, char *buf, size_t len)
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

/* daemon_systemd_log_sync - the log's side of readiness, with or without
 * systemd: "synced with etcd: ready" when the host first syncs, and again
 * once it synced after its session was lost (the session logs the loss
 * itself); a hot reload or a SIGHUP rescan, during which the session
 * holds, logs nothing here. */
static void daemon_systemd_log_sync(struct daemon *d, bool synced)
{
	if (!session_is_up(d->sess)) {
		if (d->sync_logged && !d->unsynced_at)
			d->unsynced_at = loop_now();
		d->sync_logged = false;
		return;
	}
	if (!synced || d->sync_logged)
		return;
	d->sync_logged = true;
	if (d->unsynced_at)
		log_info("daemon", "synced with etcd again after %llu ms without a session: ready",
		         (unsigned long long)((loop_now() - d->unsynced_at) / LOOP_NS_PER_MS));
	else
		log_info("daemon", "synced with etcd: ready");
	d->unsynced_at = 0;
}

/* sd_report - after any change: log readiness (daemon_systemd_log_sync);
 * under systemd READY=1 once synced (again after a reload), STATUS= when
 * the summary changed. */
void daemon_sd_report(struct daemon *d)
{
	if (!d->sess)
		return;
	bool synced = !d->shutting_down && daemon_systemd_synced(d);
	if (!d->shutting_down)
		daemon_systemd_log_sync(d, synced);
	if (!d->sd)
		return;
	bool ready = !d->sd_ready && synced;
	if (ready)
		d->sd_ready = d->sd_started = true;
	char status[sizeof(d->sd_status)], msg[sizeof(status) + 32];
	daemon_systemd_sd_summary(d, status, sizeof(status));
	if (!ready && strcmp(status, d->sd_status) == 0)
		return;
	snprintf(d->sd_status, sizeof(d->sd_status), "%s", status);
	/* one datagram: systemd shows the summary of the state it enters */
	snprintf(msg, sizeof(msg), "%sSTATUS=%s", ready ? "READY=1\n" : "", status);
	sdnotify_send(d->sd, msg);
}

/* sd_reloading - SIGHUP: systemd's reload protocol (RELOADING=1 with the
 * CLOCK_MONOTONIC time, then READY=1 once the rescan has been acted on) */
void daemon_sd_reloading(struct daemon *d)
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
static void daemon_systemd_on_watchdog(struct loop_timer *t, void *ud)
{
	struct daemon *d = ud;
	sdnotify_send(d->sd, "WATCHDOG=1");
	loop_timer_arm_in(t, d->watchdog_ns);
}

int daemon_sd_setup(struct daemon *d)
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
		if ((r = loop_timer_new(d->loop, daemon_systemd_on_watchdog, d, &d->watchdog)) < 0)
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
