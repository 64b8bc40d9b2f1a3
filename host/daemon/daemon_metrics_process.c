/* SPDX-License-Identifier: MIT */
/*
 * daemon_metrics_process.c - the standard process_* families, with the
 * names, types and meanings of the Prometheus client libraries' process
 * collector, so dashboards and rules written for any exporter work on
 * leasehold too. Read from /proc/self when rendered (procstat.h: procfs
 * does not block the loop). Loop thread only.
 */
#include "config.h"

#include "base/procstat.h"
#include "daemon/daemon_metrics.h"

static void daemon_metrics_process_one(struct metrics_text *t, const char *name, const char *type,
                                       const char *help, bool have, double v)
{
	if (!have)
		return;
	metrics_family(t, name, type, help);
	metrics_sample(t, name, NULL, 0, v);
}

void daemon_metrics_render_process(struct metrics_text *t)
{
	struct procstat ps;
	(void)procstat_read(&ps); /* what could not be read is left out */
	daemon_metrics_process_one(t, "process_cpu_seconds_total", "counter",
	                           "Total user and system CPU time spent in seconds.", ps.have_cpu,
	                           ps.cpu_seconds);
	daemon_metrics_process_one(t, "process_open_fds", "gauge", "Number of open file descriptors.",
	                           ps.have_fds, (double)ps.open_fds);
	daemon_metrics_process_one(t, "process_max_fds", "gauge",
	                           "Maximum number of open file descriptors.", ps.have_max_fds,
	                           (double)ps.max_fds);
	daemon_metrics_process_one(t, "process_virtual_memory_bytes", "gauge",
	                           "Virtual memory size in bytes.", ps.have_mem, ps.virtual_bytes);
	daemon_metrics_process_one(t, "process_resident_memory_bytes", "gauge",
	                           "Resident memory size in bytes.", ps.have_mem, ps.resident_bytes);
	daemon_metrics_process_one(t, "process_start_time_seconds", "gauge",
	                           "Start time of the process since unix epoch in seconds.",
	                           ps.have_start, ps.start_time_unix);
}
