/* SPDX-License-Identifier: MIT */
/*
 * daemon_internal.h - what the daemon's files share: the daemon, its
 * plugin entries (one per plugin name, with the election) and plugin files
 * (one per file in the plugin directory), and the few functions the
 * control ops (daemon_control.c) call in the composition (daemon.c).
 *
 * Threading: everything here is used on the loop thread only.
 */
#ifndef LH_DAEMON_INTERNAL_H
#define LH_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "daemon/daemon.h"
#include "daemon/daemon_metrics.h"
#include "election/election.h"
#include "etcd/etcd.h"
#include "http/http.h"
#include "abi/abi_loader.h"
#include "base/loop.h"
#include "runtime/runtime_config_mirror.h"
#include "runtime/runtime_instance.h"
#include "runtime/runtime_plugindir.h"
#include "election/election_roles.h"
#include "etcd/etcd_session.h"

struct daemon;

/* one candidate file of the plugin directory, as last probed */
struct pfile {
	struct pfile *next;
	char *file;
	char name[LH_PLUGIN_NAME_MAX + 1]; /* "" when the last probe failed */
	struct release release;
	uint64_t hash;
	struct loader_plugin *lp; /* probed, not yet given to an instance (or closed) */
	char *error;      /* why it was refused or failed init, else NULL */
	int refusal;      /* error's class (HM_REFUSED_*, daemon_metrics.h) */
	bool ok;          /* the last probe succeeded */
	bool init_failed; /* these bytes failed init: no candidate until they change */
};

struct entry {
	struct entry *next;
	struct daemon *d;
	char *file;
	char name[LH_PLUGIN_NAME_MAX + 1];
	struct election *el;
	struct plugin_instance *pi;      /* running: the election's driver */
	struct plugin_instance *next_pi; /* initialising */
	char *next_file; /* the file next_pi came from */
	uint64_t next_hash;
	uint64_t hash; /* content hash of pi's file */
	char *error;   /* last refusal / failure, for the CLI */
	bool failed;   /* nothing runs because of `error` */
	bool removing;
	char *hold_reason; /* role hold applied to the election, or NULL */
	struct swap_ctx *pending_swap; /* a hot reload the election has not completed */
	bool gone;         /* stopped, waiting to be freed */
	/* the pin this entry's file choice last saw (daemon_files_follow_pins),
	 * and the content hash of the file it last said waits for the pin */
	struct rule_pin pin_seen;
	uint64_t pin_logged_hash;
	/* the standby: the file the pin holds back, loaded and initialised
	 * beside what runs but never driven by the election, so that unpin
	 * swaps to it without a load on the handover's path (daemon_files.c
	 * "The standby"); NULL when none */
	struct plugin_instance *standby_pi;
	char *standby_file; /* the file standby_pi came from */
	uint64_t standby_hash;
	bool standby_ready; /* its init succeeded */
	bool el_stopped;   /* its election stopped (removal or shutdown) */
	struct plugin_metrics pm; /* lives as long as the election */
	/* P/N/config as this node mirrors it (daemon_plugin_config.c), lives as
	 * long as the election; no instance starts before it was read once */
	struct plugin_config_mirror *cfgm;
	char config_error[800]; /* daemon_config_error's text */
	/* the dashboard's term history (daemon_api.c): the packed Response of
	 * the last read, the leader it was read for, reads made for it */
	uint8_t *api_hist;
	size_t api_hist_len;
	int64_t api_hist_token; /* the leader's token the history was read for */
	unsigned api_hist_tries;
	bool api_hist_busy;
};

struct daemon_etcd_outage;
struct daemon {
	const struct daemon_config *cfg;
	struct loop *loop;
	struct etcd_client *etcd;
	struct session *sess;
	struct plugindir *pd;
	/* --plugin-dir names no directory now (PLUGINDIR_DIR_GONE): why, shown
	 * on every row of `plugins`; NULL while it is there */
	char *plugin_dir_error;
	struct control *ctl;
	struct roles *roles;
	struct entry *entries;
	struct pfile *files;
	struct retiring *retiring; /* replaced instances still stopping */
	char private_dir[512];
	/* this daemon's identity in its state records: "<host name>:<runtime
	 * directory>" (election_config.instance): its own earlier run's keys
	 * are told from another host's with the same node id by it */
	char instance[320];
	char control_url[512];
	int sigfd;
	struct loop_io *sig_io;
	struct loop_timer *later;    /* deferred work: rescans, reloads, frees */
	struct loop_timer *shutdown_deadline; /* also ends the exit linger */
	bool rescan_pending;
	bool select_pending; /* choose the file per plugin name at the next `later` */
	bool shutting_down;
	/* the shutdown leaves every plugin's membership for good (the node is
	 * decommissioned); an ordinary one keeps the member records, so the
	 * node keeps counting with its releases while it is down */
	bool leaving;
	struct loop_timer *leave_timer; /* starts a `leaseholdctl leave` shutdown */
	bool revoking;
	bool revoked; /* the revocation answered (either way) */
	int64_t revoke_lease; /* the lease the revocation is for (0: none was held) */
	bool revoke_failed;
	uint64_t deadline_at; /* loop time the shutdown timeout ends */
	bool lingering; /* all done; idle until the linger ends, then tear down */
	int exit_code;
	/* the HTTP endpoint (http.h): a snapshot published on change (at most
	 * every PUBLISH_MIN_NS) and every PUBLISH_PERIOD_NS */
	struct http_server *http;
	struct host_metrics hm;
	struct loop_timer *publish;
	uint64_t publish_at; /* when the publish timer fires next */
	char session_lost_why[200];
	struct daemon_etcd_outage *outage; /* the log's account of etcd outages */
	/* loop time since which no etcd session is up (the start, or the last
	 * loss); 0 while one is: the plugin rows then say their view is stale */
	uint64_t session_down_at;
	/* systemd (see sd_report): NULL sd when not started with NOTIFY_SOCKET */
	struct sdnotify *sd;
	struct loop_timer *watchdog; /* WATCHDOG=1 every watchdog_ns, from the loop */
	uint64_t watchdog_ns;
	bool sd_ready;      /* READY=1 sent since the start or the last reload */
	bool sd_started;    /* READY=1 sent once */
	char sd_status[160]; /* the STATUS= last sent */
	/* the dashboard (daemon_api.c): the generation of its data, the hash
	 * it was bumped for, history reads in flight */
	uint64_t api_generation;
	uint64_t api_hash;
	struct daemon_api_read *api_reads;
	/* the log's "synced with etcd: ready" (daemon_sd_report): said since
	 * the session last held; loop time the session was first seen
	 * lost after it was said (0: not lost since) */
	bool sync_logged;
	uint64_t unsynced_at;
};

/* a hot reload the election has not completed yet (daemon.c) */
struct swap_ctx {
	struct entry *e;
	struct plugin_instance *old; /* the instance to retire once the swap is done */
};

/* the control socket's ops over the daemon (daemon_control.c); ud is the
 * daemon */
extern const struct control_ops daemon_control_ops;

/* lookups: the entry running plugin `name`, the entry whose instance came
 * from `file`, the plugin directory's record of `file`; NULL when none */
struct entry *daemon_find_name(struct daemon *d, const char *name);

/* daemon_shadow.c: control_ops.shadow (control.h); a request without a
 * timeout gets DAEMON_SHADOW_TIMEOUT_DEFAULT_MS */
#define DAEMON_SHADOW_TIMEOUT_DEFAULT_MS 10000u
int daemon_control_ctl_shadow(void *ud, const char *name, const char *node, uint32_t timeout_ms,
			      control_shadow_fn done, void *done_ctx, char *err, size_t err_len);
struct entry *daemon_find_file(struct daemon *d, const char *file);
struct pfile *daemon_find_pfile(struct daemon *d, const char *file);
/* daemon_file_probe - read pf's file again (checks, descriptor); 0 or
 * -errno with the reason kept in pf */
int daemon_file_probe(struct daemon *d, struct pfile *pf);
/* daemon_request_select - make the choice among the files of each plugin
 * name again, after the current loop iteration */
void daemon_request_select(struct daemon *d);
/* daemon_files_follow_pins - choose again for a plugin whose pin changed
 * (a file of a newer release may have waited for it); from daemon_notify */
void daemon_files_follow_pins(struct daemon *d);
/* daemon_notify - something observable changed (control long polls, HTTP
 * snapshot, systemd status); ud is the daemon */
void daemon_notify(void *ud);
/* daemon_begin_shutdown - the graceful shutdown (drain, resign, revoke);
 * why is logged */
void daemon_begin_shutdown(struct daemon *d, const char *why);
/* ---- plugin configuration (daemon_plugin_config.c) ---- */

/* daemon_config_entry_start - mirror P/N/config for e (its name is set);
 * 0 or -errno. daemon_config_entry_free - daemon_files_entry_free's part. */
int daemon_config_entry_start(struct entry *e);
void daemon_config_entry_free(struct entry *e);
/* daemon_config_ready - P/N/config was read once: an instance may start */
bool daemon_config_ready(const struct entry *e);
/* daemon_config_for_instance - what a new instance of e starts with: the
 * cluster document as mirrored and the node-local one, read now from its
 * --plugin-config file. 0 or -errno with one sentence in err (*ret is then
 * empty). The caller clears *ret. */
int daemon_config_for_instance(struct entry *e, struct plugin_config *ret, char *err,
                               size_t err_len);
/* daemon_config_error - why e's configuration is in error on this node, or
 * NULL: etcd holds a document that is not valid (the plugin keeps the last
 * good one), or the running plugin refused its current configuration in
 * on_config_changed. Stored in e (valid until the next call for e). The one
 * source of what `plugins`, `status`, JSON, the metrics and /readyz show. */
const char *daemon_config_error(struct entry *e);
/* daemon_config_observe - after any change: count a configuration that
 * entered the error in e's metrics (plugin_metrics_observe_config) */
void daemon_config_observe(struct entry *e);
/* daemon_config_fill - the configuration fields of e's row */
void daemon_config_fill(struct entry *e, struct control_plugin *p);
/* the control ops config_get / config_set (control.h); ud is the daemon */
int daemon_config_get(void *ud, const char *name, control_config_fn done, void *done_ctx,
                      char *err, size_t err_len);
int daemon_config_set(void *ud, const char *name, const void *doc, size_t len, int64_t expect_rev,
                      bool force, control_config_fn done, void *done_ctx, char *err,
                      size_t err_len);

/* daemon_roles_set_if_known - the roles_set op (control.h) for a node that
 * must first be seen registered in etcd (daemon_roles_guard.c): 0 when
 * started, done() then runs exactly once (-ENOENT: never registered); or
 * -errno with the reason in err and done never runs */
int daemon_roles_set_if_known(struct daemon *d, const char *node, const char *const *roles,
                              size_t n, control_done_fn done, void *done_ctx, char *err,
                              size_t err_len);

/* daemon_on_leave_later - the timer that starts a `leaseholdctl leave`
 * shutdown after its reply was sent (ud is the daemon) */
void daemon_on_leave_later(struct loop_timer *t, void *ud);

/* daemon_entry_remove - stop e's election and instance gracefully and free
 * it once both stopped (plugin removed, or the shutdown) (daemon_files.c) */
void daemon_entry_remove(struct entry *e);

/* daemon_apply_roles - hold a role-bound plugin's election back unless
 * this node holds its role (daemon.c) */
void daemon_apply_roles(struct entry *e);

/* ---- the plugin files and entries (daemon_files.c) ---- */
/* daemon_on_plugindir - the plugin directory's reports (runtime_plugindir.h); ud is
 * the daemon */
void daemon_on_plugindir(void *ud, enum plugindir_event ev, const char *file);
/* daemon_on_later - the deferred work after a loop iteration: rescans, the
 * choice of files, frees; ud is the daemon */
void daemon_on_later(struct loop_timer *t, void *ud);
/* daemon_files_free - free every entry, file record and retiring instance
 * (the teardown, after the loop ended) */
void daemon_files_free(struct daemon *d);

/* ---- the shutdown (daemon_shutdown.c) ---- */
/* daemon_maybe_finish_shutdown - take the shutdown's next step if the one
 * before completed: revoke once every election stopped, end the loop once
 * every plugin stopped and the revocation answered */
void daemon_maybe_finish_shutdown(struct daemon *d);
/* daemon_is_last_election - election_stop_revoking's question: is entry ud
 * the last of the host's elections still running? */
bool daemon_is_last_election(void *ud);
/* daemon_on_shutdown_deadline - the --shutdown-timeout timer (also ends the
 * linger); ud is the daemon */
void daemon_on_shutdown_deadline(struct loop_timer *t, void *ud);

/* ---- systemd (daemon_systemd.c) ---- */
/* daemon_sd_setup - notify and watchdog when NOTIFY_SOCKET is set; 0 or -errno */
int daemon_sd_setup(struct daemon *d);
/* daemon_sd_report - after any change: READY=1 once synced, STATUS= when
 * the summary changed */
void daemon_sd_report(struct daemon *d);
/* daemon_sd_reloading - SIGHUP: RELOADING=1 (READY=1 follows when synced) */
void daemon_sd_reloading(struct daemon *d);

/* ---- the HTTP endpoint's snapshot (daemon_http.c) ---- */
/* daemon_start_http - serve --http (nothing for ""); 0 or -errno (logged) */
int daemon_start_http(struct daemon *d);
/* daemon_etcd_outage_start - observe d->etcd: the metrics' counts and
 * the log's account of an outage (d->outage, daemon_etcd_outage.h).
 * 0 or -errno. */
int daemon_etcd_outage_start(struct daemon *d);
/* daemon_publish_soon - a change: publish a new snapshot within
 * PUBLISH_MIN_NS, and let the metrics observe it */
void daemon_publish_soon(struct daemon *d);

/* ---- the dashboard's data (daemon_api.c) ---- */
struct http_snapshot;
struct http_api_answer;
/* daemon_api_fill - the api part and generation of snap (on failure none:
 * the API answers 503 until a later publish succeeds); may start history
 * reads. Loop thread. */
void daemon_api_fill(struct daemon *d, struct http_snapshot *snap);
/* daemon_api_render - the http_api_fn of the daemon's server (http.h):
 * any thread, reads only api */
void daemon_api_render(void *ud, const void *api, const char *route, const char *plugin,
                       struct http_api_answer *ret);
/* daemon_api_fini - free the history reads still in flight (after the etcd
 * client is freed: their callbacks never run). Loop thread. */
void daemon_api_fini(struct daemon *d);

#endif
