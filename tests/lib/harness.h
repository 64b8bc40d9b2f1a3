/* SPDX-License-Identifier: MIT */
/*
 * harness.h - a real etcd (Debian's etcd-server) for tests: one member or a
 * 3-member cluster on free loopback ports in a private temp dir.
 *
 * - Ports are chosen by binding port 0 on 127.0.0.1 and reading the port back
 *   (then closing), so parallel tests do not collide.
 * - Readiness is waited for with a deadline by polling GET /health (no fixed
 *   sleeps); a process that exits early fails the start at once.
 * - harness_etcd_stop/kill/restart keep the data dir, so a restart keeps data.
 * - Teardown always runs: harness_etcd_free() kills what is left and removes
 *   the temp dir; an atexit handler and a SIGTERM/SIGINT handler do the same
 *   for every live harness, so a failing test (exit/abort) leaves nothing.
 * - The etcd binary is $ETCD, else `etcd` on PATH. A missing binary is a test
 *   FAILURE (exit 99), never a skip: these tests must really run. The first
 *   start in a process prints the binary and its version to stderr (the
 *   test's log), so every log says which etcd it ran against.
 * - harness_etcd_start_tls (below) serves https with a throwaway PKI made at
 *   start time with the openssl CLI.
 */
#ifndef LH_TEST_HARNESS_H
#define LH_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct harness_etcd;

/* harness_etcd_start - start n_members (1 or 3) etcd members. extra_args are
 * appended to every member's command line (NULL-terminated, may be NULL),
 * e.g. "--auto-compaction-retention", "1". Returns 0 or -errno. */
int harness_etcd_start(int n_members, const char *const *extra_args, struct harness_etcd **ret);
void harness_etcd_free(struct harness_etcd *h);

/* harness_etcd_start_listen - like harness_etcd_start, but each member
 * listens for clients on listen_ip (e.g. "0.0.0.0") at its client port; the
 * client URLs still name 127.0.0.1. Only for a private network namespace
 * (tests/lib/netns.h), where every address is the test's own. */
int harness_etcd_start_listen(int n_members, const char *listen_ip, const char *const *extra_args,
                              struct harness_etcd **ret);

/* client URL of member i ("http://127.0.0.1:PORT"), borrowed */
const char *harness_etcd_url(const struct harness_etcd *h, int member);
/* all client URLs joined with ',' (borrowed) */
const char *harness_etcd_urls(const struct harness_etcd *h);
int harness_etcd_members(const struct harness_etcd *h);
pid_t harness_etcd_pid(const struct harness_etcd *h, int member);

/* stop member i gracefully (SIGTERM, wait), or SIGKILL it */
int harness_etcd_stop(struct harness_etcd *h, int member);
int harness_etcd_kill(struct harness_etcd *h, int member);
/* harness_etcd_freeze - SIGSTOP member i and wait until every thread of it
 * has stopped: kill() only queues the stop, and a thread running on another
 * CPU can still answer a request for a moment. The wait is for the
 * kernel's report to us, the parent (waitid WSTOPPED, the report left in
 * place). 0, -ETIMEDOUT after timeout_ms, or -errno.
 * harness_etcd_thaw - SIGCONT member i. */
int harness_etcd_freeze(struct harness_etcd *h, int member, int timeout_ms);
int harness_etcd_thaw(struct harness_etcd *h, int member);
/* start member i again (same ports, same data dir) and wait until healthy
 * (for a cluster: until that member answers /health) */
int harness_etcd_restart(struct harness_etcd *h, int member);
/* wait until member i answers /health with {"health":"true"} or timeout */
int harness_etcd_wait_healthy(struct harness_etcd *h, int member, int timeout_ms);

/* harness_at_fatal_signal - when the test dies of SIGINT, SIGTERM, SIGHUP
 * or SIGABRT, run fn first (async-signal-safe work only: kill(), unlink(),
 * umount2() ...), newest registration first, then the signal's default
 * action. For every fixture that owns something outside the process (etcd,
 * hosts, network namespaces). At most 8. */
void harness_at_fatal_signal(void (*fn)(void));
/* harness_child_exit - wait for child pid (EINTR retried): its exit code,
 * 128 + the signal that killed it, or -errno when it cannot be waited for */
int harness_child_exit(pid_t pid);

/* harness_cleanup_once - the first time for *once (false before): at_exit
 * runs at exit() and at_signal on a fatal signal (as harness_at_fatal_signal);
 * returns true then, false on every later call with the same flag. For a
 * fixture that cleans up behind a failing test. */
bool harness_cleanup_once(bool *once, void (*at_exit)(void), void (*at_signal)(void));

/* the temp dir of this harness (borrowed); tests may create files there */
const char *harness_dir(const struct harness_etcd *h);

/* harness_etcd_version - the first line of `$ETCD --version`, e.g. "etcd
 * Version: 3.5.16" (borrowed, static; "" when the binary cannot be run).
 * Runs the binary once per process; not thread-safe on the first call. */
const char *harness_etcd_version(void);

/* harness_free_port - a free TCP port on 127.0.0.1 */
int harness_free_port(void);
/* harness_free_ports - n (at most 8) distinct free loopback ports for a
 * listener: below the kernel's ephemeral range when there is room, since a
 * port there can be taken by any outgoing connection before the listener
 * binds it; every socket stays bound until all are picked, so one port is
 * never handed out twice. 0 or -errno. */
int harness_free_ports(int *ports, int n);

/* ---- TLS ----
 * harness_etcd_start_tls - like harness_etcd_start, but the client URLs are
 * https:// (peer URLs stay http). Before starting, a throwaway PKI is made in
 * the harness dir with the `openssl` CLI ($OPENSSL, else `openssl` on PATH;
 * Debian package "openssl"): a CA, a server cert for IP:127.0.0.1 and
 * DNS:localhost signed by it, a client cert signed by it, and an unrelated
 * second CA with its own client cert (for "wrong CA" tests). etcd gets
 * --cert-file/--key-file, plus --trusted-ca-file and --client-cert-auth when
 * client_cert_auth is true (etcd 3.4 and 3.5 require client certs as soon as it
 * has a trusted CA file, so it is not passed otherwise). The health probe verifies the server with the CA
 * and presents the client cert. A missing openssl binary is -ENOENT (with a
 * message naming the package). Returns 0 or -errno; *ret untouched on
 * failure. Stop/kill/restart/free work as for a plain harness. */
int harness_etcd_start_tls(int n_members, bool client_cert_auth, const char *const *extra_args,
                           struct harness_etcd **ret);

/* harness_tls_files - paths (borrowed, live as long as h) of the CA bundle
 * that signed the server cert, and of a client cert + key signed by that CA.
 * Any out pointer may be NULL. Returns 0, or -EINVAL for a plain-http
 * harness (out pointers untouched). */
int harness_tls_files(const struct harness_etcd *h, const char **ret_ca, const char **ret_cert,
                      const char **ret_key);

/* harness_etcd_enable_auth - through member 0's JSON gateway (the calls
 * the client does not offer): add user root with password, grant it the
 * root role, enable authentication. A TLS harness is reached with its CA.
 * Any answer but 200 fails the test. */
void harness_etcd_enable_auth(const struct harness_etcd *h, const char *password);

/* harness_tls_other_files - same for the unrelated second CA and a client
 * cert + key signed by it: the server must refuse both. Returns 0 or -EINVAL
 * (plain harness). */
int harness_tls_other_files(const struct harness_etcd *h, const char **ret_ca,
                            const char **ret_cert, const char **ret_key);

#endif
