/* SPDX-License-Identifier: MIT */
/*
 * faultsuite.c - the fault suites' shared fixture (see faultsuite.h).
 */
#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "faultsuite.h"
#include "base/loop.h"

const char *const fs_host_args[] = {"--prefix", FS_PREFIX, "--ttl", "2", "--reconcile-wait", "0",
				    "--reconcile-interval", "300ms", "--log-level", "debug",
				    NULL};

void fs_setup(struct fault_suite *fs, int n_members, const char *prefix, const char *plugin,
	      const char *const *args, struct release rel, struct release min_reconciler,
	      struct release min_compatible)
{
	memset(fs, 0, sizeof(*fs));
	fs->prefix = prefix;
	fs->plugin = plugin;
	fs->args = args;
	CHECK_OK(harness_etcd_start(n_members, NULL, &fs->etcd));
	if (n_members == 1) {
		tu_init(&fs->t, harness_etcd_urls(fs->etcd));
	} else {
		/* the observer and the checker ask the last member first: they
		 * must not share the hosts' fate when member 0 stops */
		char urls[2048];
		size_t off = 0;
		for (int i = n_members - 1; i >= 0; i--) {
			int w = snprintf(urls + off, sizeof(urls) - off, "%s%s",
					 i == n_members - 1 ? "" : ",", harness_etcd_url(fs->etcd, i));
			CHECK(w > 0 && (size_t)w < sizeof(urls) - off);
			off += (size_t)w;
		}
		tu_init(&fs->t, urls);
	}
	fs->obs = obs_new(&fs->t, prefix, plugin, rel, min_reconciler, min_compatible);
	fs->jw = jwatch_new(&fs->t, prefix, plugin, 1);
	host_setup(&fs->a, harness_dir(fs->etcd), "a");
	host_setup(&fs->b, harness_dir(fs->etcd), "b");
}

void fs_drop_times(const struct host *h, long mark, long ref_ms, const char *what,
		   const char *since, long *ret_deadline, long *ret_dropped)
{
	*ret_dropped = host_log_ms_after(h, mark, "lost leadership", ref_ms);
	*ret_deadline = host_log_ms_after(h, mark, "local deadline passed", ref_ms);
	fprintf(stderr, "%s: %s's log: local deadline %ld ms, lost leadership %ld ms after %s\n",
		what, h->node, *ret_deadline, *ret_dropped, since);
}

void fs_nobody_leads_until(struct fault_suite *fs, uint64_t t0, uint64_t ms)
{
	char st[32];
	while (fs_ms_since(t0) < ms) {
		CHECK(
		    strcmp(host_plugin_state(&fs->a, fs->plugin, st, sizeof(st), NULL), "leading"));
		CHECK(
		    strcmp(host_plugin_state(&fs->b, fs->plugin, st, sizeof(st), NULL), "leading"));
		loop_run_once(fs->t.loop, 100);
	}
	CHECK(host_alive(&fs->a) && host_alive(&fs->b));
}

void fs_setup_1_0(struct fault_suite *fs, int n_members)
{
	fs_setup(fs, n_members, FS_PREFIX, FS_PLUGIN, fs_host_args, REL(1, 0, 0), REL(1, 0, 0),
		 REL(1, 0, 0));
}

void fs_start_two_hosts(struct fault_suite *fs, const char *release, struct release done_at)
{
	host_install_plugin(&fs->a, release, "reconciler.so");
	host_install_plugin(&fs->b, release, "reconciler.so");
	host_start(&fs->a, harness_etcd_urls(fs->etcd), fs->args);
	obs_wait_leader(fs->obs, "a", 15000);
	host_start(&fs->b, harness_etcd_urls(fs->etcd), fs->args);
	obs_wait_members(fs->obs, 2, 15000);
	obs_wait_status_done(fs->obs, done_at, 15000);
	jwatch_wait(fs->jw, "a", 1, 10000, "a reconciles");
}

struct host *fs_by_node(struct fault_suite *fs, const char *node)
{
	CHECK(node != NULL);
	return strcmp(node, fs->a.node) == 0 ? &fs->a : &fs->b;
}

struct host *fs_other(struct fault_suite *fs, const struct host *h)
{
	return h == &fs->a ? &fs->b : &fs->a;
}

uint64_t fs_ms_since(uint64_t t0)
{
	return (loop_now() - t0) / LOOP_NS_PER_MS;
}

struct host *fs_wait_one_leader(struct fault_suite *fs, int timeout_ms)
{
	uint64_t t0 = loop_now();
	for (;;) {
		char sa[32], sb[32], sa2[32];
		host_plugin_state(&fs->a, fs->plugin, sa, sizeof(sa), NULL);
		host_plugin_state(&fs->b, fs->plugin, sb, sizeof(sb), NULL);
		host_plugin_state(&fs->a, fs->plugin, sa2, sizeof(sa2), NULL);
		bool la = strcmp(sa, "leading") == 0, lb = strcmp(sb, "leading") == 0;
		/* never two at once: a said "leading" before and after b did */
		CHECK(!(la && lb && strcmp(sa2, "leading") == 0));
		bool stable = la == (strcmp(sa2, "leading") == 0); /* else: look again */
		const char *ol = obs_leader(fs->obs);
		if (stable && la != lb && ol && strcmp(ol, la ? fs->a.node : fs->b.node) == 0)
			return la ? &fs->a : &fs->b;
		if (fs_ms_since(t0) > (uint64_t)timeout_ms) {
			fprintf(stderr, "no single leader after %d ms: a %s, b %s, etcd says %s\n",
				timeout_ms, sa, sb, ol ? ol : "(none)");
			hosts_dump_logs();
			exit(1);
		}
		/* the observer's watch wakes the loop; the hosts' CLI has no
		 * event to wait for, so it is asked again at most every 50 ms */
		loop_run_once(fs->t.loop, 50);
	}
}

void fs_check_invariants(struct fault_suite *fs)
{
	CHECK_INT_EQ(inv_check_all(&fs->t, fs->prefix, fs->plugin, NULL), 0);
}

void fs_finish(struct fault_suite *fs)
{
	host_signal(&fs->a, SIGTERM);
	host_signal(&fs->b, SIGTERM);
	CHECK_OK(host_wait(&fs->a, 15000));
	CHECK_OK(host_wait(&fs->b, 15000));
	if (fs->a.exit_status != 0 || fs->b.exit_status != 0)
		hosts_dump_logs();
	CHECK_INT_EQ(fs->a.exit_status, 0);
	CHECK_INT_EQ(fs->b.exit_status, 0);
	jwatch_free(fs->jw);
	obs_free(fs->obs);
	tu_fini(&fs->t);
	harness_etcd_free(fs->etcd);
}
