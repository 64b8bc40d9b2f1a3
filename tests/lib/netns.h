/* SPDX-License-Identifier: MIT */
/*
 * netns.h - a private network for fault tests: etcd and the test program in
 * a "hub" network namespace, each leasehold host in a namespace of its own,
 * joined to the hub by a veth pair. Network faults (a link down, one-way
 * cuts with nftables) are then injected between one host and etcd without
 * touching the machine's own network.
 *
 * Design notes
 * - Every namespace is named "<tag>-<pid>-<what>" (the test program's pid),
 *   so parallel test programs never share one. netns_new first removes the
 *   namespaces of earlier runs whose pid no longer lives ("<tag>-<pid>-*"
 *   only: nothing of anyone else).
 * - netns_new moves the calling thread into the hub: call it first in
 *   main(), before any thread, socket or child exists. Everything started
 *   afterwards (etcd from tests/lib/harness.h, the test's own etcd clients)
 *   lives in the hub, where 127.0.0.1 is the hub's own loopback. The machine's
 *   root namespace gets no address, route or rule.
 * - Pair k joins host namespace k to the hub: 10.213.k.1/30 on the hub side
 *   (interface "h<k>"), 10.213.k.2/30 on the host side (interface "e0").
 *   These addresses exist only inside our namespaces. The host namespace has
 *   no other route: a host can reach etcd and nothing else.
 * - Faults: netns_link_set takes the hub side of the pair down (the cable
 *   is pulled at the switch: the host's packets vanish, no error comes back)
 *   or up. netns_cut loads an nftables table "lhcut" inside the host's
 *   namespace that drops what comes from the hub (NETNS_DROP_FROM_HUB) or
 *   what goes to it (NETNS_DROP_TO_HUB); netns_heal removes it and sets the
 *   link up.
 * - Cleanup always runs: netns_free, an atexit handler and, on a fatal
 *   signal, harness_at_fatal_signal (tests/lib/harness.h) unmount and unlink
 *   every namespace of this process (what `ip netns del` does;
 *   async-signal-safe syscalls only), after the hosts and etcd were killed
 *   (their fixtures register later, so their cleanup runs first). A namespace
 *   lives on, nameless, while a process still runs inside it: the hosts and
 *   etcd are killed by their own fixtures' exit handlers.
 * - Tools: `ip` (iproute2) and `nft` (nftables), found on PATH; `./quickstart`
 *   installs both.
 */
#ifndef LH_TEST_NETNS_H
#define LH_TEST_NETNS_H

#include <stdbool.h>
#include <stddef.h>

#define NETNS_MAX_HOSTS 16

struct netns;

/* netns_new - sweep stale namespaces of tag, create the hub namespace
 * "<tag>-<pid>-hub", move the calling thread into it and bring its loopback
 * up. tag: letters, digits and '-' (at most 8 characters). Returns 0, or
 * -errno when namespaces cannot be made here (not root, no `ip` or `nft`,
 * no permission); then a line saying why has been printed and the caller
 * skips (exit 77). *ret untouched on failure. */
int netns_new(const char *tag, struct netns **ret);

/* netns_new_or_skip - netns_new, or exit(77) after its reason was printed */
struct netns *netns_new_or_skip(const char *tag);

/* netns_add_host - namespace "<tag>-<pid>-<node>" joined to the hub by
 * pair k (the next free one), link up, loopback up. node: letters, digits,
 * '-' (at most 12 characters). Returns k >= 0 or -errno (message printed). */
int netns_add_host(struct netns *n, const char *node);

/* netns_name - name of host namespace k (borrowed, lives as long as n) */
const char *netns_name(const struct netns *n, int k);
/* netns_hub_addr - the hub's address on pair k, i.e. where host k reaches
 * etcd ("10.213.k.1"; borrowed) */
const char *netns_hub_addr(const struct netns *n, int k);

/* netns_exec_prefix - the argv prefix that runs a command inside host
 * namespace k: {"/path/to/ip", "netns", "exec", NAME, NULL} (borrowed,
 * lives as long as n). ip execs the command in place: its pid is the
 * command's. */
const char *const *netns_exec_prefix(const struct netns *n, int k);

/* netns_urls - urls ("http://127.0.0.1:P,..." as the harness gives them)
 * rewritten for host k: every "127.0.0.1" replaced by the hub's address on
 * pair k, into buf. Returns buf, or NULL when it does not fit. */
char *netns_urls(const struct netns *n, int k, const char *urls, char *buf, size_t len);

/* netns_link_set - set the hub side of pair k down (false) or up (true).
 * Returns 0 or -errno (message printed). */
int netns_link_set(struct netns *n, int k, bool up);

enum netns_cut {
	NETNS_DROP_FROM_HUB, /* host k receives nothing from the hub; it still sends */
	NETNS_DROP_TO_HUB,   /* host k sends nothing to the hub; it still receives */
};
/* netns_cut - install a one-way cut inside host namespace k (replaces a
 * previous cut). Returns 0 or -errno (message printed). */
int netns_cut(struct netns *n, int k, enum netns_cut dir);
/* netns_heal - remove any cut of host k and set its link up. Returns 0 or
 * -errno. */
int netns_heal(struct netns *n, int k);

/* netns_free - delete every namespace of n (NULL is fine). Processes still
 * inside one keep it alive, nameless, until they exit. */
void netns_free(struct netns *n);

#endif
