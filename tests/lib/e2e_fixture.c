/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "e2e_fixture.h"

static bool g_armed, g_stopped;

/* a failing exit between e2e_start and e2e_stop shows what the hosts said */
static void e2e_dump_on_failure(void)
{
	if (!g_stopped)
		hosts_dump_logs();
}

void e2e_start(struct harness_etcd **ret_etcd, struct tu *t, struct host *const *hs,
	       struct observer **ret_obs, const char *prefix, const char *plugin)
{
	CHECK_OK(harness_etcd_start(1, NULL, ret_etcd));
	tu_init(t, harness_etcd_urls(*ret_etcd));
	for (size_t i = 0; hs[i]; i++) {
		char node[2] = {(char)('a' + i), '\0'};
		CHECK(i < 26);
		host_setup(hs[i], harness_dir(*ret_etcd), node);
	}
	if (ret_obs)
		*ret_obs = obs_new(t, prefix, plugin, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	g_stopped = false;
	if (!g_armed) {
		g_armed = true;
		atexit(e2e_dump_on_failure);
	}
}

void e2e_hosts_up(struct observer *obs, const char *urls, const char *const *args,
		  struct host *const *hs, bool first_leads)
{
	size_t n = 0;
	for (; hs[n]; n++)
		host_install_plugin(hs[n], "1.0.0", "reconciler.so");
	for (size_t i = 0; i < n; i++) {
		host_start(hs[i], urls, args);
		if (i == 0 && first_leads)
			obs_wait_leader(obs, hs[0]->node, 15000);
	}
	obs_wait_members(obs, n, 15000);
	obs_wait_status_done(obs, REL(1, 0, 0), 15000);
}

void e2e_stop(struct harness_etcd *etcd, struct tu *t, struct observer *obs)
{
	g_stopped = true;
	if (obs)
		obs_free(obs);
	tu_fini(t);
	harness_etcd_free(etcd);
}
