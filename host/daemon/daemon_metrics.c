/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/daemon_metrics.h"
#include "leasehold/plugin.h"
#include "base/loop.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance.h"

static const char *const op_names[HM_N_OPS] = {
	"range", "put", "deleterange", "txn", "lease_grant", "lease_keepalive", "lease_revoke",
	"lease_timetolive", "other",
};
static const char *const err_names[HM_N_ERRS] = {
	"timeout", "unavailable", "bad_response", "not_found", "compacted", "auth", "invalid", "other",
};
static const char *const result_names[3] = {"ok", "failed", "cancelled"};

/* from an election to its first fenced write: a campaign round trip plus
 * the plugin's own start, up to the reconcile wait (seconds) */
static const double bounds_first_write[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,    2.5,   5,    10,  30,   60};
/* a reconcile: milliseconds to minutes */
static const double bounds_reconcile[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                          1,     5,     10,   30,   60,  300};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

void host_metrics_init(struct host_metrics *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < HM_N_OPS; i++)
		metrics_hist_init(&m->etcd_duration[i], metrics_bounds_request,
		                  metrics_n_bounds_request);
}

static int daemon_metrics_op_index(const char *op)
{
	for (int i = 0; i < HM_OP_OTHER; i++)
		if (strcmp(op, op_names[i]) == 0)
			return i;
	return HM_OP_OTHER;
}

static int daemon_metrics_err_kind(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return HM_ERR_TIMEOUT;
	case -ECONNREFUSED:
	case -EAGAIN:
		return HM_ERR_UNAVAILABLE;
	case -EBADMSG:
	case -EMSGSIZE:
		return HM_ERR_BAD_RESPONSE;
	case -ENOENT:
		return HM_ERR_NOT_FOUND;
	case -ERANGE:
		return HM_ERR_COMPACTED;
	case -EACCES:
	case -EPERM:
	case -EKEYREJECTED:
		return HM_ERR_AUTH;
	case -EINVAL:
		return HM_ERR_INVALID;
	default:
		return HM_ERR_OTHER;
	}
}

static void daemon_metrics_on_etcd_call(void *ud, const char *op, int err, uint64_t elapsed_ns)
{
	struct host_metrics *m = ud;
	int i = daemon_metrics_op_index(op);
	metrics_hist_observe(&m->etcd_duration[i], (double)elapsed_ns / 1e9);
	if (err < 0 && err != -ECANCELED) {
		m->etcd_errors[daemon_metrics_err_kind(err)]++;
		if (i == HM_OP_LEASE_KEEPALIVE)
			m->keepalive_failures++;
	}
}

static void daemon_metrics_on_watch_ended(void *ud, int err)
{
	(void)err;
	struct host_metrics *m = ud;
	m->watch_resyncs++;
}

const struct etcd_observer_ops host_metrics_etcd_observer = {
	.call_done = daemon_metrics_on_etcd_call,
	.watch_ended = daemon_metrics_on_watch_ended,
};

/* ---- per plugin ---- */

/* A completion context in flight (a fenced txn, a reconcile). Kept on the
 * plugin's list: an instance or an etcd client freed with work in flight
 * never calls back (runtime_instance.h, etcd.h), and what never calls back
 * is freed by plugin_metrics_fini. */
struct plugin_metrics_pending {
	struct plugin_metrics_pending *prev, *next;
	struct plugin_metrics *pm;
};

static void daemon_metrics_pending_link(struct plugin_metrics *pm, struct plugin_metrics_pending *p)
{
	p->pm = pm;
	p->prev = NULL;
	p->next = pm->pending;
	if (pm->pending)
		pm->pending->prev = p;
	pm->pending = p;
}

static void daemon_metrics_pending_unlink(struct plugin_metrics_pending *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		p->pm->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
}

struct plugin_metrics_driver {
	struct plugin_metrics_driver *next;
	struct plugin_metrics *pm;
	const struct driver_ops *ops;
	void *drv;
};

void plugin_metrics_init(struct plugin_metrics *pm)
{
	memset(pm, 0, sizeof(*pm));
	metrics_hist_init(&pm->first_write, bounds_first_write, N_OF(bounds_first_write));
	metrics_hist_init(&pm->reconcile_duration, bounds_reconcile, N_OF(bounds_reconcile));
	metrics_hist_init(&pm->retired_bus_rtt, metrics_bounds_bus, metrics_n_bounds_bus);
}

void plugin_metrics_fini(struct plugin_metrics *pm)
{
	while (pm->pending) {
		struct plugin_metrics_pending *p = pm->pending;
		daemon_metrics_pending_unlink(p);
		free(p); /* the first member of every context */
	}
	while (pm->drivers) {
		struct plugin_metrics_driver *d = pm->drivers;
		pm->drivers = d->next;
		free(d);
	}
}

void plugin_metrics_retire(struct plugin_metrics *pm, const struct plugin_instance *pi)
{
	struct plugin_instance_stats st;
	plugin_instance_get_stats(pi, &st);
	pm->retired_worker_restarts += st.worker_restarts;
	pm->retired_callback_timeouts += st.callback_timeouts;
	metrics_hist_add(&pm->retired_bus_rtt, plugin_instance_bus_rtt(pi));
}

void plugin_metrics_observe(struct plugin_metrics *pm, const struct election_info *i)
{
	bool leading = i->state == ELECTION_LEADING;
	if (leading && !pm->leading) {
		pm->terms_won++;
		pm->term++;
		pm->elected_at = loop_now();
		pm->first_write_pending = true;
	}
	if (!leading)
		pm->first_write_pending = false;
	pm->leading = leading;
	if (i->leader && strcmp(i->leader, pm->last_leader) != 0) {
		if (pm->last_leader[0])
			pm->leader_changes++;
		snprintf(pm->last_leader, sizeof(pm->last_leader), "%s", i->leader);
	}
}

void plugin_metrics_observe_config(struct plugin_metrics *pm, bool invalid, int64_t invalid_rev,
                                   bool refused, int64_t refused_rev)
{
	const bool now[2] = {invalid, refused};
	const int64_t rev[2] = {invalid_rev, refused_rev};
	for (int k = 0; k < 2; k++) {
		if (now[k] && (!pm->config_in_error[k] || rev[k] != pm->config_error_rev[k]))
			pm->config_refusals[k]++;
		pm->config_in_error[k] = now[k];
		pm->config_error_rev[k] = now[k] ? rev[k] : 0;
	}
}

struct txn_ctx {
	struct plugin_metrics_pending link; /* first */
	uint64_t term;
	etcd_cb cb;
	void *ud;
};

static void daemon_metrics_on_fenced_txn(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct txn_ctx *t = ud;
	struct plugin_metrics *pm = t->link.pm;
	daemon_metrics_pending_unlink(&t->link);
	if (err == 0 && r && r->succeeded && pm->first_write_pending && pm->term == t->term) {
		pm->first_write_pending = false;
		metrics_hist_observe(&pm->first_write, (double)(loop_now() - pm->elected_at) / 1e9);
	}
	etcd_cb cb = t->cb;
	void *cud = t->ud;
	free(t);
	cb(c, err, r, cud);
}

static int daemon_metrics_metered_fenced_txn(void *ctx, const struct etcd_compare *cmps, size_t n_cmps,
                              const struct etcd_op *success, size_t n_success,
                              const struct etcd_op *failure, size_t n_failure, etcd_cb cb,
                              void *ud)
{
	struct plugin_metrics *pm = ctx;
	const struct driver_host *in = pm->inner_host;
	if (!pm->first_write_pending) /* nothing to time: no wrapper */
		return in->fenced_txn(in->ctx, cmps, n_cmps, success, n_success, failure, n_failure,
		                      cb, ud);
	struct txn_ctx *t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	*t = (struct txn_ctx){.term = pm->term, .cb = cb, .ud = ud};
	daemon_metrics_pending_link(pm, &t->link);
	int r = in->fenced_txn(in->ctx, cmps, n_cmps, success, n_success, failure, n_failure,
	                       daemon_metrics_on_fenced_txn, t);
	if (r < 0) {
		daemon_metrics_pending_unlink(&t->link);
		free(t);
	}
	return r;
}

static void daemon_metrics_metered_request_reconcile(void *ctx)
{
	struct plugin_metrics *pm = ctx;
	pm->inner_host->request_reconcile(pm->inner_host->ctx);
}

static bool daemon_metrics_metered_paused(void *ctx)
{
	struct plugin_metrics *pm = ctx;
	return pm->inner_host->paused(pm->inner_host->ctx);
}

const struct driver_host *plugin_metrics_host(struct plugin_metrics *pm,
                                              const struct driver_host *inner)
{
	pm->inner_host = inner;
	pm->host = (struct driver_host){.ctx = pm, .fenced_txn = daemon_metrics_metered_fenced_txn,
	                                .data_prefix = inner->data_prefix, .etcd = inner->etcd,
	                                .request_reconcile = inner->request_reconcile ? daemon_metrics_metered_request_reconcile : NULL,
	                                .paused = inner->paused ? daemon_metrics_metered_paused : NULL};
	return &pm->host;
}

struct plugin_metrics_driver *plugin_metrics_driver(struct plugin_metrics *pm,
                                                    const struct driver_ops *ops, void *drv)
{
	struct plugin_metrics_driver *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	*d = (struct plugin_metrics_driver){pm->drivers, pm, ops, drv};
	pm->drivers = d;
	return d;
}

static void daemon_metrics_md_elected(void *drv, int64_t token, const struct releases *r)
{
	struct plugin_metrics_driver *d = drv;
	d->ops->elected(d->drv, token, r);
}

static void daemon_metrics_md_releases_changed(void *drv, const struct releases *r)
{
	struct plugin_metrics_driver *d = drv;
	d->ops->releases_changed(d->drv, r);
}

struct reconcile_ctx {
	struct plugin_metrics_pending link; /* first */
	uint64_t started;
	driver_reconcile_done_fn done;
	void *done_ud;
};

static void daemon_metrics_on_reconciled(void *ud, int err, const char *msg)
{
	struct reconcile_ctx *rc = ud;
	struct plugin_metrics *pm = rc->link.pm;
	daemon_metrics_pending_unlink(&rc->link);
	if (err == -ECANCELED) {
		pm->reconciles[2]++;
	} else {
		/* a cancelled one never ran: only finished reconciles have a duration */
		metrics_hist_observe(&pm->reconcile_duration, (double)(loop_now() - rc->started) / 1e9);
		pm->reconciles[err == 0 ? 0 : 1]++;
		if (err == 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			pm->last_success_unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		}
	}
	driver_reconcile_done_fn done = rc->done;
	void *done_ud = rc->done_ud;
	free(rc);
	done(done_ud, err, msg);
}

static void daemon_metrics_md_reconcile(void *drv, driver_reconcile_done_fn done, void *done_ud)
{
	struct plugin_metrics_driver *d = drv;
	struct reconcile_ctx *rc = malloc(sizeof(*rc));
	if (!rc) { /* not measured, still delivered */
		d->ops->reconcile(d->drv, done, done_ud);
		return;
	}
	*rc = (struct reconcile_ctx){.started = loop_now(), .done = done, .done_ud = done_ud};
	daemon_metrics_pending_link(d->pm, &rc->link);
	d->ops->reconcile(d->drv, daemon_metrics_on_reconciled, rc);
}

static void daemon_metrics_md_deposed(void *drv)
{
	struct plugin_metrics_driver *d = drv;
	d->ops->deposed(d->drv);
}

static void daemon_metrics_md_drain(void *drv, driver_drain_done_fn done, void *done_ud)
{
	struct plugin_metrics_driver *d = drv;
	d->ops->drain(d->drv, done, done_ud);
}

const struct driver_ops plugin_metrics_driver_ops = {
	.elected = daemon_metrics_md_elected,
	.releases_changed = daemon_metrics_md_releases_changed,
	.reconcile = daemon_metrics_md_reconcile,
	.deposed = daemon_metrics_md_deposed,
	.drain = daemon_metrics_md_drain,
};

/* ---- rendering ---- */

static double daemon_metrics_v_is_leader(const struct plugin_metrics_view *p)
{
	return p->info && p->info->state == ELECTION_LEADING;
}
static double daemon_metrics_v_ready(const struct plugin_metrics_view *p)
{
	return p->info && p->info->ready;
}
static double daemon_metrics_v_paused(const struct plugin_metrics_view *p)
{
	return p->info && p->info->paused;
}
static double daemon_metrics_v_pinned(const struct plugin_metrics_view *p)
{
	return p->info && p->info->pin.set;
}
static double daemon_metrics_v_node_conflict(const struct plugin_metrics_view *p)
{
	return p->info && p->info->node_conflict_lease != 0;
}
static double daemon_metrics_v_unhealthy(const struct plugin_metrics_view *p)
{
	return p->info && p->info->unhealthy;
}
static double daemon_metrics_v_failures_in_row(const struct plugin_metrics_view *p)
{
	return p->info ? (double)p->info->failures_in_row : NAN;
}
static double daemon_metrics_v_unhealthy_total(const struct plugin_metrics_view *p)
{
	return p->info ? (double)p->info->unhealthy_total : NAN;
}
static double daemon_metrics_v_keys_depth(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.depth : NAN;
}
static double daemon_metrics_v_keys_oldest(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.oldest_ms / 1000.0 : NAN;
}
static double daemon_metrics_v_keys_running(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.running : NAN;
}
static double daemon_metrics_v_keys_concurrency(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.concurrency : NAN;
}
static double daemon_metrics_v_keys_done(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.done : NAN;
}
static double daemon_metrics_v_keys_failed(const struct plugin_metrics_view *p)
{
	return p->keyed ? (double)p->keys.failed : NAN;
}
static double daemon_metrics_v_terms(const struct plugin_metrics_view *p)
{
	return (double)p->pm->terms_won;
}
static double daemon_metrics_v_changes(const struct plugin_metrics_view *p)
{
	return (double)p->pm->leader_changes;
}
static double daemon_metrics_v_token(const struct plugin_metrics_view *p)
{
	return p->info ? (double)p->info->fencing_token : 0;
}
static double daemon_metrics_v_last_success(const struct plugin_metrics_view *p)
{
	return p->pm->last_success_unix_ns ? (double)p->pm->last_success_unix_ns / 1e9 : NAN;
}
static double daemon_metrics_v_restarts(const struct plugin_metrics_view *p)
{
	return p->has_instance_stats ? (double)p->worker_restarts : NAN;
}
static double daemon_metrics_v_standby_ready(const struct plugin_metrics_view *p)
{
	return p->has_standby ? p->standby_ready : NAN;
}
static double daemon_metrics_v_cb_timeouts(const struct plugin_metrics_view *p)
{
	return p->has_instance_stats ? (double)p->callback_timeouts : NAN;
}
static double daemon_metrics_v_config_error(const struct plugin_metrics_view *p)
{
	return p->config_error;
}

/* the per-plugin families of one sample each (value NaN: no sample) */
struct plugin_family {
	const char *name, *type, *help;
	double (*value)(const struct plugin_metrics_view *p);
};

static const struct plugin_family plugin_families[] = {
	{"leasehold_is_leader", "gauge", "1 while this node leads the plugin.", daemon_metrics_v_is_leader},
	{"leasehold_ready", "gauge",
	 "1 while this node may serve the plugin (the readiness rule, from a view it can vouch for).",
	 daemon_metrics_v_ready},
	{"leasehold_paused", "gauge",
	 "1 while the plugin is paused cluster-wide (leaseholdctl pause), as this node mirrors it.",
	 daemon_metrics_v_paused},
	{"leasehold_pinned", "gauge",
	 "1 while the plugin's rollout is pinned (leaseholdctl release pin): no release newer than "
	 "the pin campaigns.",
	 daemon_metrics_v_pinned},
	{"leasehold_node_id_conflict", "gauge",
	 "1 while another host runs with this node's node id: the plugin does not join its election.",
	 daemon_metrics_v_node_conflict},
	{"leasehold_terms_won_total", "counter", "Terms this node won (it became the leader).",
	 daemon_metrics_v_terms},
	{"leasehold_leader_changes_total", "counter",
	 "Changes of the leader (to another node) this node observed.", daemon_metrics_v_changes},
	{"leasehold_fencing_token", "gauge",
	 "The fencing token of this node's current term (0 when not leading).", daemon_metrics_v_token},
	{"leasehold_last_successful_reconcile_timestamp_seconds", "gauge",
	 "Unix time of the last reconcile that succeeded on this node.", daemon_metrics_v_last_success},
	{"leasehold_worker_restarts_total", "counter",
	 "Plugin workers restarted after a failure (what runs, and a standby the pin holds back).",
	 daemon_metrics_v_restarts},
	{"leasehold_plugin_standby_ready", "gauge",
	 "While a pin holds a newer release back and this node loaded it beside what runs (the "
	 "standby): 1 when it is initialised and its worker is up, 0 while it loads or restarts.",
	 daemon_metrics_v_standby_ready},
	{"leasehold_callback_timeouts_total", "counter",
	 "Plugin callbacks that overran --callback-timeout.", daemon_metrics_v_cb_timeouts},
	{"leasehold_config_error", "gauge",
	 "1 while the plugin's configuration is in error on this node: etcd holds a document that "
	 "is not valid, or the plugin refused its current one (on_config_changed).",
	 daemon_metrics_v_config_error},
	{"leasehold_plugin_unhealthy", "gauge",
	 "1 while this node sits out a hold-down: its plugin failed --unhealthy-after reconciles in "
	 "a row and it withdrew from the election.", daemon_metrics_v_unhealthy},
	{"leasehold_plugin_reconcile_failures_in_row", "gauge",
	 "Reconciles of the plugin that failed in a row on this node (0 after a success).",
	 daemon_metrics_v_failures_in_row},
	{"leasehold_plugin_unhealthy_total", "counter",
	 "Times this node became unhealthy for the plugin and withdrew for a hold-down.",
	 daemon_metrics_v_unhealthy_total},
	{"leasehold_plugin_key_queue_depth", "gauge",
	 "Keys in a keyed plugin's work queue on this node: ready, backing off or running (ABI 1.3 "
	 "reconcile_key; absent for other plugins).", daemon_metrics_v_keys_depth},
	{"leasehold_plugin_key_queue_oldest_seconds", "gauge",
	 "How long the oldest ready key of a keyed plugin's work queue has waited.",
	 daemon_metrics_v_keys_oldest},
	{"leasehold_plugin_key_running", "gauge",
	 "Keys of a keyed plugin whose reconcile_key runs now on this node.",
	 daemon_metrics_v_keys_running},
	{"leasehold_plugin_key_concurrency", "gauge",
	 "How many keys a keyed plugin's reconcile_key may run on at once (its key_concurrency).",
	 daemon_metrics_v_keys_concurrency},
	{"leasehold_plugin_key_reconciles_total", "counter",
	 "Keys a keyed plugin reconciled on this node.", daemon_metrics_v_keys_done},
	{"leasehold_plugin_key_reconcile_failures_total", "counter",
	 "Key reconciles of a keyed plugin that failed on this node (each is retried with back-off).",
	 daemon_metrics_v_keys_failed},
};

static void daemon_metrics_per_plugin_family(struct metrics_text *t, const struct plugin_metrics_view *pv,
                              size_t n, const struct plugin_family *f)
{
	metrics_family(t, f->name, f->type, f->help);
	for (size_t k = 0; k < n; k++) {
		double v = f->value(&pv[k]);
		if (isnan(v))
			continue;
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample(t, f->name, l, 1, v);
	}
}

static void daemon_metrics_render_members(struct metrics_text *t, const struct plugin_metrics_view *pv, size_t n)
{
	const char *name = "leasehold_members";
	metrics_family(t, name, "gauge",
	               "Members of the plugin (nodes that have it installed, up or not) by release.");
	for (size_t k = 0; k < n; k++) {
		const struct plugin_metrics_view *p = &pv[k];
		/* distinct releases, in first-seen order: O(members x releases),
		 * with releases few */
		for (size_t i = 0; i < p->n_members; i++) {
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = release_cmp(p->members[j].release, p->members[i].release) == 0;
			if (seen)
				continue;
			size_t count = 0;
			for (size_t j = i; j < p->n_members; j++)
				count += release_cmp(p->members[j].release, p->members[i].release) == 0;
			char rb[RELEASE_STRLEN];
			struct metrics_label l[] = {
				{"plugin", p->name},
				{"release", release_format(p->members[i].release, rb, sizeof(rb))}};
			metrics_sample(t, name, l, 2, (double)count);
		}
	}
}

/* the host's own families (one sample each, or one per fixed label) */
static void daemon_metrics_render_host(struct metrics_text *t, const struct host_metrics_view *hv)
{
	const struct host_metrics *hm = hv->hm;
	char abi[32];
	snprintf(abi, sizeof(abi), "%u.%u", LH_PLUGIN_ABI_MAJOR, LH_PLUGIN_ABI_MINOR);
	metrics_family(t, "leasehold_build_info", "gauge",
	               "Always 1: the leasehold version and the plugin ABI it offers.");
	struct metrics_label bl[] = {{"version", PACKAGE_VERSION}, {"abi", abi}};
	metrics_sample(t, "leasehold_build_info", bl, 2, 1);

	metrics_family(t, "leasehold_etcd_session_up", "gauge",
	               "1 while this node provably holds its etcd lease.");
	metrics_sample(t, "leasehold_etcd_session_up", NULL, 0, hv->session_up);
	metrics_family(t, "leasehold_plugin_dir_ok", "gauge",
	               "1 while the plugin directory's path names a directory, 0 while it is gone.");
	metrics_sample(t, "leasehold_plugin_dir_ok", NULL, 0, hv->plugin_dir_ok);
	metrics_family(t, "leasehold_lease_remaining_seconds", "gauge",
	               "Seconds left until the local lease deadline (0 without a lease).");
	metrics_sample(t, "leasehold_lease_remaining_seconds", NULL, 0, hv->lease_remaining_s);
	metrics_family(t, "leasehold_lease_keepalive_failures_total", "counter",
	               "Lease keepalive requests that failed.");
	metrics_sample(t, "leasehold_lease_keepalive_failures_total", NULL, 0,
	               (double)hm->keepalive_failures);
	metrics_family(t, "leasehold_etcd_watch_resyncs_total", "counter",
	               "Watches that ended for good (compaction, refusal) and were resynced from a read.");
	metrics_sample(t, "leasehold_etcd_watch_resyncs_total", NULL, 0, (double)hm->watch_resyncs);

	/* rendered on the loop from time to time: this also reports a stuck close */
	struct runtime_closer_stats cs;
	runtime_closer_get_stats(&cs);
	metrics_family(t, "leasehold_bus_closes_pending", "gauge",
	               "Worker bus sockets handed to the closer thread whose close has not returned.");
	metrics_sample(t, "leasehold_bus_closes_pending", NULL, 0, (double)(cs.handed - cs.closed));
	metrics_family(t, "leasehold_bus_closes_stuck_total", "counter",
	               "Worker bus socket closes still running after 5 s (each also logged once).");
	metrics_sample(t, "leasehold_bus_closes_stuck_total", NULL, 0, (double)cs.stuck);

	metrics_family(t, "leasehold_etcd_request_duration_seconds", "histogram",
	               "Duration of etcd requests by operation, from the call to the answer.");
	for (int i = 0; i < HM_N_OPS; i++) {
		struct metrics_label l[] = {{"operation", op_names[i]}};
		metrics_sample_hist(t, "leasehold_etcd_request_duration_seconds", l, 1,
		                    &hm->etcd_duration[i]);
	}
	metrics_family(t, "leasehold_etcd_errors_total", "counter",
	               "etcd requests that failed, by kind of error.");
	for (int i = 0; i < HM_N_ERRS; i++) {
		struct metrics_label l[] = {{"kind", err_names[i]}};
		metrics_sample(t, "leasehold_etcd_errors_total", l, 1, (double)hm->etcd_errors[i]);
	}
}

/* the per-plugin families */
static void daemon_metrics_render_plugins(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                          size_t n)
{
	for (size_t f = 0; f < N_OF(plugin_families); f++)
		daemon_metrics_per_plugin_family(t, pv, n, &plugin_families[f]);

	metrics_family(t, "leasehold_reconciles_total", "counter",
	               "Reconciles on this node by result (ok, failed, cancelled before they ran).");
	for (size_t k = 0; k < n; k++)
		for (int r = 0; r < 3; r++) {
			struct metrics_label l[] = {{"plugin", pv[k].name}, {"result", result_names[r]}};
			metrics_sample(t, "leasehold_reconciles_total", l, 2,
			               (double)pv[k].pm->reconciles[r]);
		}
	metrics_family(t, "leasehold_reconcile_duration_seconds", "histogram",
	               "Duration of reconciles that ran, from the request to the plugin's answer.");
	for (size_t k = 0; k < n; k++) {
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample_hist(t, "leasehold_reconcile_duration_seconds", l, 1,
		                    &pv[k].pm->reconcile_duration);
	}
	metrics_family(t, "leasehold_election_to_first_write_seconds", "histogram",
	               "From winning a term to the first fenced write of the term that succeeded.");
	for (size_t k = 0; k < n; k++) {
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample_hist(t, "leasehold_election_to_first_write_seconds", l, 1,
		                    &pv[k].pm->first_write);
	}
	metrics_family(t, "leasehold_bus_round_trip_seconds", "histogram",
	               "The host <-> plugin bus's share of an event's round trip (sent to the "
	               "worker -> its answer, minus the worker's time on the event).");
	for (size_t k = 0; k < n; k++) {
		if (!pv[k].has_instance_stats)
			continue;
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample_hist(t, "leasehold_bus_round_trip_seconds", l, 1, &pv[k].bus_rtt);
	}
	daemon_metrics_render_members(t, pv, n);
}

void daemon_metrics_render(struct metrics_text *t, const struct host_metrics_view *hv,
                           const struct plugin_metrics_view *pv, size_t n)
{
	daemon_metrics_render_host(t, hv);
	daemon_metrics_render_plugins(t, pv, n);
	daemon_metrics_render_alerting(t, hv, pv, n);
	daemon_metrics_render_process(t);
}
