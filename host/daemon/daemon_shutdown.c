/* SPDX-License-Identifier: MIT */
/*
 * daemon_shutdown.c - the daemon's graceful shutdown (SIGTERM/SIGINT,
 * `leaseholdctl leave`): every election is stopped (drain, deposed, election
 * key deleted; the last one to stop leaves its key to the revocation
 * instead), then the lease is revoked while every instance stops (fini),
 * then the daemon lingers briefly and the loop ends. A second signal or
 * the shutdown timeout skips the waiting. Loop thread only.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "etcd/etcd.h"
#include "base/log.h"
#include "base/loop.h"
#include "runtime/runtime_instance.h"
#include "base/sdnotify.h"
#include "etcd/etcd_session.h"

#include "daemon/daemon_internal.h"

static void daemon_shutdown_on_revoked(void *ud, int err)
{
	struct daemon *d = ud;
	if (err < 0)
		log_warn("daemon", "revoking the lease failed: %s (it and its keys expire by themselves)",
		         etcd_strerror(err));
	else if (d->revoke_lease) /* none was held: nothing was revoked */
		log_info("daemon", "lease revoked");
	d->revoked = true;
	d->revoke_failed = err < 0;
	daemon_maybe_finish_shutdown(d);
}

/* daemon_shutdown_elections_stopped - every election of the host but skip's (may be NULL)
 * has stopped */
static bool daemon_shutdown_elections_stopped(const struct daemon *d, const struct entry *skip)
{
	for (const struct entry *e = d->entries; e; e = e->next)
		if (e != skip && !e->gone && e->el && !e->el_stopped)
			return false;
	return true;
}

/* daemon_is_last_election - election_stop_revoking's question for entry ud */
bool daemon_is_last_election(void *ud)
{
	const struct entry *me = ud;
	return daemon_shutdown_elections_stopped(me->d, me);
}

/* the end of a clean shutdown */
static void daemon_shutdown_say_bye(struct daemon *d)
{
	log_info("daemon", "bye");
	loop_quit(d->loop, d->exit_code);
}

/* Shutdown ends in two steps: once every election stopped, the lease is
 * revoked (the plugins may still be running fini: they no longer lead);
 * once every plugin stopped too and the revocation answered, the loop ends. */
void daemon_maybe_finish_shutdown(struct daemon *d)
{
	if (!d->shutting_down)
		return;
	bool all = true;
	for (struct entry *e = d->entries; e; e = e->next)
		all = all && e->gone;
	if (!d->revoking && daemon_shutdown_elections_stopped(d, NULL)) {
		d->revoking = true;
		d->revoke_lease = session_lease(d->sess);
		session_revoke(d->sess, daemon_shutdown_on_revoked, d);
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
			daemon_shutdown_say_bye(d);
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
		daemon_shutdown_say_bye(d);
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
	daemon_sd_report(d);
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
		daemon_entry_remove(e);
	}
	daemon_maybe_finish_shutdown(d);
}

/* what an entry that did not stop in time waits for, in one line */
static void daemon_shutdown_log_stuck_entry(const struct entry *e)
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

void daemon_on_shutdown_deadline(struct loop_timer *t, void *ud)
{
	(void)t;
	struct daemon *d = ud;
	if (d->lingering) {
		daemon_shutdown_say_bye(d);
		return;
	}
	log_error("daemon", "shutdown did not finish in time; exiting (keys expire with the lease)");
	for (struct entry *e = d->entries; e; e = e->next)
		daemon_shutdown_log_stuck_entry(e);
	plugin_instance_hurry();
	d->exit_code = 1;
	loop_quit(d->loop, 1);
}
