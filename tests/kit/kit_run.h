/* SPDX-License-Identifier: MIT */
/*
 * kit_run.h - leasehold-plugin-test's world: one throwaway etcd (tests/lib
 * harness) and n real `leasehold` hosts (tests/lib/hosts.c), each with the
 * plugin under test in a plugin directory of its own; and the statements
 * of a parsed script run against it in order.
 *
 * Every wait has a deadline (the script's `timeout`, default 30 s) and
 * waits for an event: an etcd watch for keys, the hosts' answers for
 * leadership and releases. A failed step prints what was expected and what
 * was found, with its script line, then the hosts' logs, and ends the run.
 * Setup failures (etcd does not start, a host does not answer) end the
 * process through the fixtures, with their message.
 * Single-threaded; the world owns everything it starts and stops it in
 * kit_world_free, also after a failed step.
 */
#ifndef LH_KIT_RUN_H
#define LH_KIT_RUN_H

#include <stdint.h>

#include "kit_script.h"

struct kit_world;

struct kit_options {
	const char *plugin;     /* the plugin file under test */
	const char *plugin_dir; /* relative FILEs of reload statements: PLUGIN.so's dir */
	const char *bindir;     /* where leasehold and leaseholdctl are */
	int n_hosts;            /* 1..8 */
	uint64_t timeout_ns;    /* each wait's deadline until a `timeout` */
	/* more leasehold flags for every host, after the runner's own
	 * (KIT_HOST_ARGS); NULL-terminated, may be NULL */
	const char *const *host_args;
};

/* every host runs with these first: a short session TTL, so that a killed
 * leader's successor comes quickly, and no wait before the first
 * reconcile */
#define KIT_HOST_ARGS "--ttl", "2", "--reconcile-wait", "0"

/* kit_world_start - etcd, then o->n_hosts hosts with o->plugin, up to the
 * plugin being loaded on each (its name read from the first). Returns 0,
 * or 1 when the plugin did not load (the reason printed). Strings of o are
 * borrowed for the world's lifetime. */
int kit_world_start(const struct kit_options *o, struct kit_world **ret);
/* kit_world_run - every statement of s in order: 0 when all passed, 1 at
 * the first that failed */
int kit_world_run(struct kit_world *w, const struct kit_script *s);
/* kit_world_free - stop every host (SIGTERM, then SIGKILL after 10 s) and
 * etcd, remove the temp dir. Accepts NULL. */
void kit_world_free(struct kit_world *w);

/* kit_resolve_file - FILE of a reload statement: as is when absolute, else
 * under dir; into buf[len]. 0 or -ENAMETOOLONG. */
int kit_resolve_file(const char *dir, const char *file, char *buf, size_t len);

#endif
