/* SPDX-License-Identifier: MIT */
/*
 * daemon_http.c - what the HTTP endpoint (http.h) serves: a snapshot of
 * health, readiness, leadership and the metrics text, built on the loop
 * from the live state and handed to the server thread, on change (at most
 * every PUBLISH_MIN_NS) and every PUBLISH_PERIOD_NS. The server never reads
 * live state, so a flood of requests cannot delay the loop. Loop thread
 * only.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_metrics.h"
#include "election/election.h"
#include "http/http.h"
#include "base/log.h"
#include "base/loop.h"
#include "etcd/etcd_session.h"

#include "daemon/daemon_internal.h"

#define PUBLISH_PERIOD_NS (1 * LOOP_NS_PER_S)
#define PUBLISH_MIN_NS (50 * LOOP_NS_PER_MS) /* coalesces a burst of changes */
/* /healthz fails when no snapshot came for this long: several missed
 * periods, so a loaded machine does not fail it, while a wedged loop does */
#define PUBLISH_STALE_NS (5 * LOOP_NS_PER_S)

static char *daemon_http_dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* daemon_http_publish_plugin - entry e's answers. A node without an etcd
 * session is never the leader here, even while its election still
 * drains its term (the lease may be gone already): /leader answers from
 * what the node can vouch for. */
static void daemon_http_publish_plugin(struct entry *e, const struct election_info *i,
                                       bool session_up, struct http_plugin_state *ps)
{
	char buf[300];
	ps->name = strdup(e->name);
	const char *cfg_err = daemon_config_error(e);
	if (cfg_err) {
		/* no effect on readiness: the plugin runs on what it has */
		char note[900];
		snprintf(note, sizeof(note), "config: %s", cfg_err);
		ps->note = strdup(note);
	}
	ps->ready = i && i->ready;
	ps->leader = i && i->state == ELECTION_LEADING && session_up;
	if (!ps->ready)
		ps->not_ready = daemon_http_dup_or_null(!i ? (e->error ? e->error : "loading")
		                               : i->not_ready ? i->not_ready : "not ready");
	if (!ps->leader) {
		if (i && i->state == ELECTION_LEADING)
			snprintf(buf, sizeof(buf), "not the leader: no etcd session (this node is "
			                           "ending its term)");
		else if (i && i->leader)
			snprintf(buf, sizeof(buf), "not the leader: %s leads (this node: %s)", i->leader,
			         election_state_name(i->state));
		else
			snprintf(buf, sizeof(buf), "not the leader: no leader known (this node: %s)",
			         i ? election_state_name(i->state) : "loading");
		ps->not_leader = strdup(buf);
	}
}

/* daemon_http_view_more - the view's fields for the alerting families
 * (daemon_metrics_alerting.c) */
static void daemon_http_view_more(struct entry *e, struct plugin_metrics_view *pv)
{
	if (e->pi) {
		pv->has_release = true;
		pv->release = plugin_instance_plugin(e->pi)->release;
	}
	if (e->el) {
		for (int r = 0; r < ELECTION_TERM_END_SLOTS; r++)
			pv->terms_ended[r] = election_terms_ended(e->el, r);
		pv->rollout_blockers = election_rollout_blockers(e->el);
	}
}

/* daemon_http_fill_view - what the metrics show of entry e (its election's
 * info i, NULL when none runs), but its members */
static void daemon_http_fill_view(struct entry *e, const struct election_info *i,
                                  struct plugin_metrics_view *pv)
{
	pv->name = e->name;
	pv->info = i;
	pv->pm = &e->pm;
	pv->config_error = daemon_config_error(e) != NULL;
	daemon_http_view_more(e, pv);
	if (e->pi) {
		struct plugin_instance_stats st;
		plugin_instance_get_stats(e->pi, &st);
		pv->has_instance_stats = true;
		pv->queued = st.queued;
		pv->worker_restarts = e->pm.retired_worker_restarts + st.worker_restarts;
		pv->callback_timeouts = e->pm.retired_callback_timeouts + st.callback_timeouts;
		pv->bus_rtt = e->pm.retired_bus_rtt;
		metrics_hist_add(&pv->bus_rtt, plugin_instance_bus_rtt(e->pi));
		pv->keyed = plugin_instance_key_stats(e->pi, &pv->keys);
	}
	if (e->pi && e->standby_pi) {
		/* its worker is one of the plugin's: a crash-looping held-back
		 * release shows before the unpin, not after */
		struct plugin_instance_stats st;
		plugin_instance_get_stats(e->standby_pi, &st);
		pv->has_standby = true;
		pv->standby_ready = e->standby_ready &&
		                    plugin_instance_state(e->standby_pi) == PLUGIN_INSTANCE_READY;
		pv->worker_restarts += st.worker_restarts;
		pv->callback_timeouts += st.callback_timeouts;
		metrics_hist_add(&pv->bus_rtt, plugin_instance_bus_rtt(e->standby_pi));
	}
}

/* daemon_http_files_refused - d's plugin files refused now, by class */
static void daemon_http_files_refused(const struct daemon *d, uint64_t *counts)
{
	for (const struct pfile *pf = d->files; pf; pf = pf->next)
		if (pf->error && pf->refusal >= 0 && pf->refusal < HM_N_REFUSED)
			counts[pf->refusal]++;
}

/* publish - build the answer set from the live state and hand it over */
static void daemon_http_publish(struct daemon *d)
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
			daemon_config_observe(e);
			size_t m = election_members(e->el, members + mused, total_members - mused);
			m = m > total_members - mused ? total_members - mused : m;
			pv[k].members = members + mused;
			pv[k].n_members = m;
			mused += m;
		}
		daemon_http_publish_plugin(e, i, session_is_up(d->sess), &snap->plugins[k]);
		daemon_http_fill_view(e, i, &pv[k]);
		k++;
	}
	snap->n_plugins = k;
	uint64_t now = loop_now(), safe = session_safe_until(d->sess);
	struct host_metrics_view hv = {
		.hm = &d->hm,
		.session_up = session_is_up(d->sess),
		.lease_remaining_s = safe > now ? (double)(safe - now) / 1e9 : 0,
		.lease_ttl_s = (double)session_ttl(d->sess),
		.plugin_dir_ok = !d->pd || plugindir_error(d->pd) == 0,
	};
	daemon_http_files_refused(d, hv.files_refused_now);
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
	daemon_api_fill(d, snap);
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

static void daemon_http_on_publish(struct loop_timer *t, void *ud)
{
	struct daemon *d = ud;
	daemon_http_publish(d);
	d->publish_at = loop_now() + PUBLISH_PERIOD_NS;
	loop_timer_arm_at(t, d->publish_at);
}

/* after a change: publish within PUBLISH_MIN_NS, and observe the change */
void daemon_publish_soon(struct daemon *d)
{
	for (struct entry *e = d->entries; e; e = e->next)
		if (e->el) {
			struct election_info i;
			election_get_info(e->el, &i);
			plugin_metrics_observe(&e->pm, &i);
			daemon_config_observe(e);
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
int daemon_start_http(struct daemon *d)
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
	http_server_set_api(d->http, daemon_api_render, d);
	if ((r = loop_timer_new(d->loop, daemon_http_on_publish, d, &d->publish)) < 0)
		return r;
	log_info("daemon", "metrics and probes at http://%s (port %d)", addr, http_server_port(d->http));
	daemon_http_on_publish(d->publish, d);
	return 0;
}
