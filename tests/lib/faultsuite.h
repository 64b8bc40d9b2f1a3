/* SPDX-License-Identifier: MIT */
/*
 * faultsuite.h - the fault suites' shared fixture: an etcd (one member or a
 * cluster), a test client, an observer of the election and status, a watch
 * on the reconciler's journal and two real hosts "a" and "b".
 *
 * Every function exits the test (after dumping the hosts' logs where that
 * helps) when what it waits for does not happen in time; none returns an
 * error. Single-threaded: everything runs on the test client's loop.
 */
#ifndef LH_TEST_FAULTSUITE_H
#define LH_TEST_FAULTSUITE_H

#include <stdint.h>

#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "testutil.h"

/* the prefix, the plugin and the hosts' flags of the fault suites: a 2 s
 * session, no reconcile wait, a reconcile every 300 ms, debug logs */
#define FS_PREFIX "/lhf"
#define FS_PLUGIN "reconciler"
extern const char *const fs_host_args[];

struct fault_suite {
	struct harness_etcd *etcd;
	struct tu t;
	struct observer *obs;
	struct jwatch *jw;
	struct host a, b;
	const char *prefix; /* borrowed, e.g. "/lhf" */
	const char *plugin; /* borrowed, e.g. "reconciler" */
	const char *const *args; /* both hosts' extra flags (borrowed) */
};

/* fs_setup - start an etcd of n_members, the client, the observer (which
 * expects the release summary rel, min_reconciler, min_compatible as in
 * obs_new) and the journal watch; make hosts "a" and "b" (not started). */
void fs_setup(struct fault_suite *fs, int n_members, const char *prefix, const char *plugin,
	      const char *const *args, struct release rel, struct release min_reconciler,
	      struct release min_compatible);

/* fs_drop_times - when h's log (from byte mark on) says its local deadline
 * passed (*ret_deadline) and it lost leadership (*ret_dropped), in ms after
 * ref_ms (a wall_ms_of_day() taken at the fault); LONG_MIN for a line that
 * is not there. Printed to stderr as "what: ... after since". */
void fs_drop_times(const struct host *h, long mark, long ref_ms, const char *what,
		   const char *since, long *ret_deadline, long *ret_dropped);

/* fs_nobody_leads_until - until fs_ms_since(t0) reaches ms, neither host
 * says it leads (checked every 100 ms of the loop); both still run after */
void fs_nobody_leads_until(struct fault_suite *fs, uint64_t t0, uint64_t ms);

/* fs_setup_1_0 - fs_setup with the suite's prefix, plugin and host flags
 * (FS_PREFIX, FS_PLUGIN, fs_host_args), observing as a consumer of 1.0.0 */
void fs_setup_1_0(struct fault_suite *fs, int n_members);

/* fs_start_two_hosts - install `release` as reconciler.so on both, start a
 * and wait until it leads, then b; wait for two members, the status DONE at
 * `done_at` and a's first reconcile. */
void fs_start_two_hosts(struct fault_suite *fs, const char *release, struct release done_at);

/* fs_by_node - the host named node ("a" or "b") */
struct host *fs_by_node(struct fault_suite *fs, const char *node);
/* fs_other - the host that is not h */
struct host *fs_other(struct fault_suite *fs, const struct host *h);

/* fs_wait_one_leader - wait until exactly one host says it leads and it is
 * the one etcd shows; fails the test at once if both say so at one time. */
struct host *fs_wait_one_leader(struct fault_suite *fs, int timeout_ms);

/* fs_check_invariants - the invariant checker over the whole etcd history
 * (no overlapping terms, every write fenced, status rules) */
void fs_check_invariants(struct fault_suite *fs);

/* fs_finish - SIGTERM both hosts, expect exit 0 from each, free it all */
void fs_finish(struct fault_suite *fs);

/* fs_ms_since - milliseconds on the loop's clock since t0 (loop_now()) */
uint64_t fs_ms_since(uint64_t t0);

#endif
