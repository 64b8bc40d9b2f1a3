/* SPDX-License-Identifier: MIT */
/*
 * election_fixture.h - one node of an election test (test_election,
 * test_election_lag): its own etcd client, a session whose up/lost events
 * reach the node's election, and the election itself, with the test's own
 * driver. The test keeps the three pointers in its own node struct and
 * hands their addresses in. Single-threaded (the test client's loop); a
 * failure fails the test.
 */
#ifndef LH_TEST_ELECTION_FIXTURE_H
#define LH_TEST_ELECTION_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "election/election.h"
#include "etcd/etcd_session.h"
#include "testutil.h"

/* what a node is started with (strings borrowed for the call) */
struct efx_node_config {
	const char *urls;     /* the etcd the node's client talks to */
	const char *prefix;   /* P */
	const char *plugin;   /* N */
	const char *node_id;
	struct plugin_releases rel;
	int64_t ttl;          /* the session's, in seconds */
	const struct driver_ops *ops; /* NULL: no driver (an observer) */
	void *drv;
	bool held;            /* held back before it starts (election_hold) */
};

/* efx_node_start - a client on c->urls, a session of c->ttl and the
 * election (reconcile wait 10 ms, interval 1 h), started. *el is written
 * before the session can report anything: the session's events go to the
 * election at *el, so it stays valid (and *el set) until efx_node_free. */
void efx_node_start(struct tu *t, const struct efx_node_config *c, struct etcd_client **etcd,
		    struct session **sess, struct election **el);

/* efx_node_stop - stop the election, wait for it (10 s), revoke the session
 * (without waiting for the answer) */
void efx_node_stop(struct tu *t, struct election *el, struct session *sess);

/* efx_node_free - free the election, the session and the client */
void efx_node_free(struct election *el, struct session *sess, struct etcd_client *etcd);

/* efx_info - the election's info, by value */
struct election_info efx_info(struct election *el);

/* efx_p_standby, efx_p_campaigning - tu_wait predicates on an election
 * (arg: the struct election *): it stands by, it campaigns */
bool efx_p_standby(void *el);
bool efx_p_campaigning(void *el);

#endif
