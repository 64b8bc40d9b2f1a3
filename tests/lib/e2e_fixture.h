/* SPDX-License-Identifier: MIT */
/*
 * e2e_fixture.h - the start and the end most end-to-end tests share: a
 * one-member etcd in its temp dir, the test's client on it, an observer of
 * the plugin, and the test's hosts set up (not started) under the etcd's
 * dir. The test keeps the pointers in its own globals and hands their
 * addresses in. Single-threaded; a failure fails the test.
 */
#ifndef LH_TEST_E2E_FIXTURE_H
#define LH_TEST_E2E_FIXTURE_H

#include "harness.h"
#include "hosts.h"
#include "testutil.h"

/* e2e_start - a one-member etcd into *ret_etcd, t initialised on it, the
 * hosts of hs (NULL-terminated) set up under the etcd's dir as nodes "a",
 * "b", "c"... in order, and with ret_obs non-NULL an observer of plugin
 * under prefix as a consumer of release 1.0.0 (the example plugin's first)
 * into *ret_obs. From here until e2e_stop a failing exit dumps every host's
 * log. Exits the test on failure. */
void e2e_start(struct harness_etcd **ret_etcd, struct tu *t, struct host *const *hs,
	       struct observer **ret_obs, const char *prefix, const char *plugin);

/* e2e_stop - the end of a test that got this far: obs freed (NULL: none), t
 * finished, etcd stopped and its dir removed; from here on an exit no
 * longer dumps the host logs. The hosts' processes are the test's (stop
 * them before, e.g. with hosts_terminate). */
void e2e_stop(struct harness_etcd *etcd, struct tu *t, struct observer *obs);

/* e2e_hosts_up - the example plugin's release 1.0.0 installed as
 * reconciler.so on each host of hs (NULL-terminated) and the hosts started
 * against urls with args; with first_leads hs[0] alone first, until obs
 * sees it lead, then the others. Returns once obs sees every host a member
 * and the status written for 1.0.0 (15 s each, else the test fails). */
void e2e_hosts_up(struct observer *obs, const char *urls, const char *const *args,
		  struct host *const *hs, bool first_leads);

#endif
