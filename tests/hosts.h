/*
 * hosts.h - real `leasehold` processes for end-to-end tests: each host gets
 * its own plugin dir, runtime dir and control socket under a temp dir; its
 * log goes to <dir>/<node>.log. Every host is killed at exit.
 */
#ifndef LH_TEST_HOSTS_H
#define LH_TEST_HOSTS_H

#include <stdbool.h>
#include <sys/types.h>

struct host {
	char node[32];
	char dir[512];        /* host's own dir */
	char plugin_dir[600];
	char control[640];    /* ipc://... */
	char log[600];
	pid_t pid;
	int exit_status; /* after host_wait: exit code, or 128+signal */
};

/* host_setup - make dirs for node under base (no process yet) */
void host_setup(struct host *h, const char *base, const char *node);
/* host_start - start leasehold for h against etcd urls with extra args
 * (NULL-terminated, may be NULL). Exits the test on failure. */
void host_start(struct host *h, const char *urls, const char *const *extra);
/* host_signal - send sig */
void host_signal(struct host *h, int sig);
/* host_wait - wait for exit up to timeout_ms; returns 0 or -ETIMEDOUT */
int host_wait(struct host *h, int timeout_ms);
/* host_install_plugin - copy the built example plugin of `release`
 * ("1.0.0"/"1.1.0"/...) into the host's plugin dir as `as` (write to a temp
 * name, then rename: the documented way). */
void host_install_plugin(struct host *h, const char *release, const char *as);
/* path of a built plugin file (static buffer) */
const char *built_plugin(const char *release);
/* path of the built binary `name` (leasehold, leaseholdctl) (static buffer) */
const char *built_binary(const char *name);
/* dump the host log tail to stderr (for failures) */
void host_dump_log(const struct host *h);

#endif
