/* SPDX-License-Identifier: MIT */
/*
 * daemon_metrics_alerting.c - the metric families the alerting and
 * recording rules of contrib/prometheus/ read beside the core ones: the
 * release each node runs per plugin, refused plugin files by class,
 * configurations in error, ended terms by end reason and the members that
 * hold a rollout back. Every label has a fixed set of values or one value
 * per plugin (docs/observability.md lists them). Loop thread only.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "daemon/daemon_metrics.h"

static const char *const daemon_metrics_refused_names[HM_N_REFUSED] = {
	"file", "not_loadable", "abi", "descriptor", "name", "init", "start",
};
static const char *const daemon_metrics_config_refusal_names[2] = {
	"invalid_document", "refused_by_plugin",
};

int host_metrics_refusal_of_loader(int err)
{
	switch (err) {
	case -ENOEXEC: /* not an ELF shared object of this machine, dlopen failed */
		return HM_REFUSED_NOT_LOADABLE;
	case -EPROTO: /* no descriptor, wrong magic or ABI, a bad size or flags */
		return HM_REFUSED_ABI;
	case -EINVAL: /* the descriptor's name, releases or callbacks */
		return HM_REFUSED_DESCRIPTOR;
	case -ENOMEM:
		return HM_REFUSED_START;
	default: /* opening, owner, mode, type, size, reading, the private copy */
		return HM_REFUSED_FILE;
	}
}

static void daemon_metrics_alerting_release(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                            size_t n)
{
	const char *name = "leasehold_plugin_release_info";
	metrics_family(t, name, "gauge",
	               "Always 1: the release of the plugin this node runs (absent while none runs).");
	for (size_t k = 0; k < n; k++) {
		if (!pv[k].has_release)
			continue;
		char rb[RELEASE_STRLEN];
		struct metrics_label l[] = {{"plugin", pv[k].name},
		                            {"release", release_format(pv[k].release, rb, sizeof(rb))}};
		metrics_sample(t, name, l, 2, 1);
	}
}

static void daemon_metrics_alerting_files(struct metrics_text *t, const struct host_metrics_view *hv)
{
	metrics_family(t, "leasehold_plugin_files_refused", "gauge",
	               "Plugin files refused now (their last probe or init failed), by reason class.");
	for (int i = 0; i < HM_N_REFUSED; i++) {
		struct metrics_label l[] = {{"reason", daemon_metrics_refused_names[i]}};
		metrics_sample(t, "leasehold_plugin_files_refused", l, 1, (double)hv->files_refused_now[i]);
	}
	metrics_family(t, "leasehold_plugin_files_refused_total", "counter",
	               "Refusals of a plugin file (a probe or an init that failed), by reason class.");
	for (int i = 0; i < HM_N_REFUSED; i++) {
		struct metrics_label l[] = {{"reason", daemon_metrics_refused_names[i]}};
		metrics_sample(t, "leasehold_plugin_files_refused_total", l, 1,
		               (double)hv->hm->files_refused[i]);
	}
}

static void daemon_metrics_alerting_config(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                           size_t n)
{
	const char *name = "leasehold_config_refusals_total";
	metrics_family(t, name, "counter",
	               "Configuration documents in error on this node, each counted once: not valid "
	               "(invalid_document) or refused by the plugin (refused_by_plugin).");
	for (size_t k = 0; k < n; k++)
		for (int r = 0; r < 2; r++) {
			struct metrics_label l[] = {{"plugin", pv[k].name},
			                            {"reason", daemon_metrics_config_refusal_names[r]}};
			metrics_sample(t, name, l, 2, (double)pv[k].pm->config_refusals[r]);
		}
}

static void daemon_metrics_alerting_terms(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                          size_t n)
{
	const char *name = "leasehold_terms_ended_total";
	metrics_family(t, name, "counter",
	               "Terms this node led that ended, by end reason (as the term history records it).");
	for (size_t k = 0; k < n; k++)
		for (int r = 0; r < ELECTION_TERM_END_SLOTS; r++) {
			const char *reason = r ? election_term_end_name(r) : "unknown";
			bool known = strcmp(reason, "unknown") != 0;
			/* the reasons this host knows always; others once seen */
			if (!known && (r || !pv[k].terms_ended[0]))
				continue;
			struct metrics_label l[] = {{"plugin", pv[k].name}, {"reason", reason}};
			metrics_sample(t, name, l, 2, (double)pv[k].terms_ended[r]);
		}
}

static void daemon_metrics_alerting_rollout(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                            size_t n)
{
	const char *name = "leasehold_rollout_blocking_members";
	metrics_family(t, name, "gauge",
	               "Members that keep the plugin's newest member release from leading (they run a "
	               "release below its min_compatible_release), as this node sees them.");
	for (size_t k = 0; k < n; k++) {
		if (!pv[k].info)
			continue;
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample(t, name, l, 1, (double)pv[k].rollout_blockers);
	}
}

static void daemon_metrics_alerting_queue(struct metrics_text *t, const struct plugin_metrics_view *pv,
                                          size_t n)
{
	const char *name = "leasehold_bus_queue_depth";
	metrics_family(t, name, "gauge",
	               "Events (watch batches, reconciles) waiting in the host's queue to the plugin, "
	               "not yet sent to it.");
	for (size_t k = 0; k < n; k++) {
		if (!pv[k].has_instance_stats)
			continue;
		struct metrics_label l[] = {{"plugin", pv[k].name}};
		metrics_sample(t, name, l, 1, (double)pv[k].queued);
	}
}

void daemon_metrics_render_alerting(struct metrics_text *t, const struct host_metrics_view *hv,
                                    const struct plugin_metrics_view *pv, size_t n)
{
	metrics_family(t, "leasehold_lease_ttl_seconds", "gauge",
	               "The TTL etcd granted this node's lease (0 without a lease).");
	metrics_sample(t, "leasehold_lease_ttl_seconds", NULL, 0, hv->lease_ttl_s);
	daemon_metrics_alerting_release(t, pv, n);
	daemon_metrics_alerting_files(t, hv);
	daemon_metrics_alerting_config(t, pv, n);
	daemon_metrics_alerting_terms(t, pv, n);
	daemon_metrics_alerting_rollout(t, pv, n);
	daemon_metrics_alerting_queue(t, pv, n);
}
