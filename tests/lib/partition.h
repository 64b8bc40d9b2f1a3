/* SPDX-License-Identifier: MIT */
/*
 * partition.h - the partition tests' fixture: a real etcd and the test in a
 * hub network namespace, each leasehold host (example plugin) in its own
 * namespace behind a veth pair (tests/lib/netns.h), an observer and a journal
 * watch on the test's loop, and the checks every partition scenario shares.
 *
 * Design notes
 * - pc_init calls netns_new_or_skip first (before etcd, threads or
 *   sockets): without namespaces the test exits 77 and says why.
 * - Hosts run with --ttl 2, --reconcile-interval 300ms (a stale leader
 *   always has a write to attempt), --reconcile-wait 0. A host reaches etcd
 *   only at the hub's address on its own pair.
 * - pc_cut_leader is the shared guarantee check for a cut-off leader: the
 *   successor leads within a generous bound of the cut (the contract is
 *   TTL + 1 s; PC_LEAD_BOUND_MS adds room for a loaded machine, speed
 *   belongs in `make bench`), the old leader's log says it lost (or left)
 *   leadership no later than its session's local deadline, at a time (its
 *   own log clock) before the successor's "elected" line, the old token writes nothing after the
 *   successor's first journal record, and the invariant checker (overlap,
 *   fence, status monotone, desired state) holds over the whole history.
 * - Every failure prints what was waited for and dumps the host logs.
 */
#ifndef LH_TEST_PARTITION_H
#define LH_TEST_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "hosts.h"
#include "invariants.h"
#include "netns.h"
#include "testutil.h"

#define PC_PREFIX "/lhp"
#define PC_PLUGIN "reconciler"
#define PC_MAX_HOSTS 6
#define PC_TTL_MS 2000
/* TTL + 1 s is the guarantee; 3 s more for a loaded 2-core machine */
#define PC_LEAD_BOUND_MS (PC_TTL_MS + 1000 + 3000)

struct pcluster {
	struct netns *net;
	struct harness_etcd *etcd;
	struct tu t;
	struct observer *obs;
	struct jwatch *jw;
	int n;
	struct host host[PC_MAX_HOSTS]; /* nodes "a", "b", ... */
	int pair[PC_MAX_HOSTS];		/* netns pair of host i */
	char urls[PC_MAX_HOSTS][256];	/* etcd as host i reaches it */
};

/* pc_init - namespaces (or exit 77), etcd, n_hosts hosts set up in their
 * namespaces (not started), observer and journal watch from revision 1.
 * Exits the test on failure. */
void pc_init(struct pcluster *c, int n_hosts);
/* pc_init_cluster - pc_init with namespaces tagged `tag` (see netns_new) and
 * an etcd of etcd_members (1 or 3) members; every host is given the URLs of
 * all of them */
void pc_init_cluster(struct pcluster *c, const char *tag, int n_hosts, int etcd_members);
/* pc_start - install the example plugin of `release` on host i and start
 * it; envp as for host_start_env (may be NULL); interval: its
 * --reconcile-interval (NULL: 300ms) */
void pc_start(struct pcluster *c, int i, const char *release, const char *const *envp,
	      const char *interval);
/* pc_start_args - pc_start with extra daemon arguments (NULL-terminated, at
 * most 16; NULL: none), e.g. {"--isolation", "process", ...} */
void pc_start_args(struct pcluster *c, int i, const char *release, const char *const *envp,
		   const char *interval, const char *const *extra);
/* pc_start_all - start every host on release (default interval), wait for
 * all members, status DONE at release and a leader */
void pc_start_all(struct pcluster *c, const char *release);
/* pc_stop_all - SIGTERM every running host; each exits 0 within 15 s */
void pc_stop_all(struct pcluster *c);
void pc_fini(struct pcluster *c);

/* pc_host - the host named node (exits when there is none) */
struct host *pc_host(struct pcluster *c, const char *node);
/* pc_index - index of h in c */
int pc_index(const struct pcluster *c, const struct host *h);
/* pc_wait_leader_other - run the loop until someone other than `not` (NULL:
 * anyone) leads; returns that host. After timeout_ms: fail with logs. */
struct host *pc_wait_leader_other(struct pcluster *c, const char *not, int timeout_ms);
/* pc_run_for - run the loop for ms: the length of a fault, a parameter of
 * the scenario, never a wait for something to happen */
void pc_run_for(struct pcluster *c, int ms);
/* pc_wait_log - run the loop until h's log from byte `from` on contains
 * needle; returns the elapsed ms. After timeout_ms: fail with logs. */
long pc_wait_log(struct pcluster *c, const struct host *h, long from, const char *needle,
		 int timeout_ms);
/* pc_host_lease - the lease h was granted last (its log line "lease X
 * granted" from byte `from` on), or 0 when the log names none */
int64_t pc_host_lease(const struct host *h, long from);
/* pc_wait_lease_gone - run the loop until etcd no longer knows lease id
 * (timetolive answers TTL -1); returns the elapsed ms. After timeout_ms:
 * fail with logs. */
long pc_wait_lease_gone(struct pcluster *c, int64_t id, int timeout_ms);
/* pc_check_invariants - inv_check_all over the whole history; must be 0 */
void pc_check_invariants(struct pcluster *c);

/* ---- faults on host i ---- */
enum pc_fault {
	PC_LINK_DOWN,	  /* the hub side of its veth down */
	PC_DROP_FROM_ETCD, /* nftables in its namespace: input from the hub dropped */
	PC_DROP_TO_ETCD,   /* nftables in its namespace: output to the hub dropped */
};
const char *pc_fault_name(enum pc_fault f);
void pc_fault(struct pcluster *c, const struct host *h, enum pc_fault f);
/* pc_heal - undo every fault on h (cut removed, link up) */
void pc_heal(struct pcluster *c, const struct host *h);

/* what pc_cut_leader measured */
struct pc_cut {
	struct host *old_leader, *successor;
	uint64_t cut_at;     /* loop_now() of the fault */
	int64_t old_token, new_token;
	int64_t first_new_rev; /* revision of the successor's first journal record */
	long lead_ms;	       /* cut -> the observer sees the successor lead */
	long lost_ms;	       /* cut -> the old leader's "lost/leaving leadership" (its log clock) */
	long elected_ms;       /* cut -> the successor's "elected" (its log clock) */
};
/* pc_cut_leader - inject f on the current leader and check the guarantees
 * (see the notes); the fault stays in place. */
void pc_cut_leader(struct pcluster *c, enum pc_fault f, struct pc_cut *ret);
/* pc_cut_leader_after - the same, with before(c, leader, arg) run right
 * before the fault (after the logs were marked), e.g. to start a reload */
void pc_cut_leader_after(struct pcluster *c, enum pc_fault f,
			 void (*before)(struct pcluster *c, struct host *leader, void *arg), void *arg,
			 struct pc_cut *ret);
/* pc_heal_and_rejoin - heal the old leader of cut; it rejoins as a
 * candidate ("campaigning") while the successor keeps leading and
 * reconciling; the old token still wrote nothing after the successor's
 * first record; invariants hold. */
void pc_heal_and_rejoin(struct pcluster *c, const struct pc_cut *cut);
/* pc_cut_hold_heal - pc_cut_leader with f, the fault held for two TTLs
 * from the cut in all, then pc_heal_and_rejoin */
void pc_cut_hold_heal(struct pcluster *c, enum pc_fault f);
/* pc_hold_until - run the loop until ms have passed since t0 (loop_now()):
 * the length of a fault */
void pc_hold_until(struct pcluster *c, uint64_t t0, int ms);
/* pc_check_token_silent - no journal record of token after revision rev */
void pc_check_token_silent(struct pcluster *c, int64_t token, int64_t rev, const char *who);

#endif
