/* SPDX-License-Identifier: MIT */
/*
 * netns.c - a private network of namespaces for fault tests (see netns.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "netns.h"

#define NETNS_RUN_DIR "/run/netns"
#define NAME_MAX_LEN 40
#define CUT_TABLE "lhcut"

struct netns_host {
	char name[NAME_MAX_LEN];
	char hub_addr[32];
	char hub_if[16];
	const char *prefix[5];
	bool has_cut;
};

struct netns {
	char tag[12];
	char hub[NAME_MAX_LEN];
	char ip[256], nft[256]; /* absolute paths of the tools */
	struct netns_host host[NETNS_MAX_HOSTS];
	int n_hosts;
};

/* Paths of every namespace this process made, for the exit and signal
 * handlers: fixed storage, so that a signal handler only reads memory and
 * calls umount2/unlink. */
#define MAX_PATHS (4 * (NETNS_MAX_HOSTS + 1))
static char g_paths[MAX_PATHS][sizeof(NETNS_RUN_DIR) + NAME_MAX_LEN + 1];
static volatile sig_atomic_t g_npaths;
static bool g_hooks;

static void remove_path(const char *path)
{
	umount2(path, MNT_DETACH);
	unlink(path);
}

static void remove_all(void)
{
	for (int i = 0; i < g_npaths; i++)
		if (g_paths[i][0]) {
			remove_path(g_paths[i]);
			g_paths[i][0] = 0;
		}
}

static void install_hooks(void)
{
	harness_cleanup_once(&g_hooks, remove_all, remove_all);
}

static int remember(const char *name)
{
	if (g_npaths >= MAX_PATHS)
		return -ENOSPC;
	snprintf(g_paths[g_npaths], sizeof(g_paths[0]), "%s/%s", NETNS_RUN_DIR, name);
	g_npaths = g_npaths + 1;
	return 0;
}

static void forget(const char *name)
{
	char path[sizeof(g_paths[0])];
	snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR, name);
	for (int i = 0; i < g_npaths; i++)
		if (strcmp(g_paths[i], path) == 0) {
			remove_path(path);
			g_paths[i][0] = 0;
		}
}

/* find_tool - name on PATH, then in /usr/sbin and /sbin (a non-root PATH
 * often lacks them), into buf; 0 or -ENOENT */
static int find_tool(const char *name, char *buf, size_t len)
{
	const char *env = getenv("PATH");
	char path[4096];
	snprintf(path, sizeof(path), "%s:/usr/sbin:/sbin", env && *env ? env : "/usr/bin:/bin");
	for (char *dir = path, *end; dir && *dir; dir = end ? end + 1 : NULL) {
		end = strchr(dir, ':');
		if (end)
			*end = 0;
		if (!*dir)
			continue;
		int w = snprintf(buf, len, "%s/%s", dir, name);
		if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* run - run argv (argv[0] an absolute path) and wait for it; its output is
 * collected and printed when it fails (quiet: not printed). Returns 0, or
 * -EIO when it exited non-zero. */
static int run_quiet(const char *const *argv, bool quiet)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int r = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return r;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	char out[2048];
	size_t len = 0;
	for (;;) {
		ssize_t k = read(pfd[0], out + len, sizeof(out) - 1 - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
		if (len == sizeof(out) - 1)
			len = 0; /* keep reading; only the tail matters */
	}
	out[len] = 0;
	close(pfd[0]);
	int code = harness_child_exit(pid);
	if (code <= 0)
		return code;
	if (!quiet) {
		fprintf(stderr, "netns:");
		for (const char *const *a = argv; *a; a++)
			fprintf(stderr, " %s", *a);
		fprintf(stderr, ": failed (%s%d): %s", code < 128 ? "exit " : "signal ",
			code < 128 ? code : code - 128, out);
	}
	return -EIO;
}

static int run(const char *const *argv)
{
	return run_quiet(argv, false);
}

static bool valid_label(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* sweep - remove "<tag>-<pid>-*" namespaces whose pid is gone (left by a
 * run that was killed before its handlers could run) */
static void sweep(const char *tag)
{
	DIR *d = opendir(NETNS_RUN_DIR);
	if (!d)
		return;
	size_t tl = strlen(tag);
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		const char *s = de->d_name;
		if (strncmp(s, tag, tl) != 0 || s[tl] != '-')
			continue;
		char *end;
		errno = 0;
		long pid = strtol(s + tl + 1, &end, 10);
		if (errno || end == s + tl + 1 || *end != '-' || pid <= 0 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char path[sizeof(g_paths[0]) + 256];
		snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR, s);
		fprintf(stderr, "netns: removing %s (left by a run whose pid %ld is gone)\n", s,
			pid);
		remove_path(path);
	}
	closedir(d);
}

/* ns_add - `ip netns add name`, remembered for cleanup */
static int ns_add(struct netns *n, const char *name)
{
	int r = remember(name);
	if (r < 0)
		return r;
	const char *const argv[] = {n->ip, "netns", "add", name, NULL};
	r = run(argv);
	if (r < 0)
		forget(name);
	return r;
}

int netns_new(const char *tag, struct netns **ret)
{
	if (!valid_label(tag, 8))
		return -EINVAL;
	struct netns *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	snprintf(n->tag, sizeof(n->tag), "%s", tag);
	if (find_tool("ip", n->ip, sizeof(n->ip)) < 0) {
		fprintf(stderr, "netns: no `ip` on PATH (Debian package iproute2; ./quickstart "
				"installs it)\n");
		free(n);
		return -ENOENT;
	}
	if (find_tool("nft", n->nft, sizeof(n->nft)) < 0) {
		fprintf(stderr, "netns: no `nft` on PATH (Debian package nftables; ./quickstart "
				"installs it)\n");
		free(n);
		return -ENOENT;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "netns: network namespaces need root (running as uid %ld)\n",
			(long)geteuid());
		free(n);
		return -EPERM;
	}
	install_hooks();
	sweep(tag);
	snprintf(n->hub, sizeof(n->hub), "%s-%ld-hub", tag, (long)getpid());
	int r = ns_add(n, n->hub);
	if (r < 0) {
		fprintf(stderr, "netns: cannot create a network namespace here\n");
		free(n);
		return -EPERM;
	}
	char path[sizeof(g_paths[0])];
	snprintf(path, sizeof(path), "%s/%s", NETNS_RUN_DIR, n->hub);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		r = -errno;
		fprintf(stderr, "netns: cannot enter %s: %s\n", n->hub, strerror(-r));
		if (fd >= 0)
			close(fd);
		netns_free(n);
		return r;
	}
	close(fd);
	const char *const lo[] = {n->ip, "link", "set", "lo", "up", NULL};
	r = run(lo);
	if (r < 0) {
		netns_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

struct netns *netns_new_or_skip(const char *tag)
{
	struct netns *n;
	if (netns_new(tag, &n) < 0) {
		fprintf(stderr, "SKIP: this test needs network namespaces (see above)\n");
		exit(77);
	}
	return n;
}

int netns_add_host(struct netns *n, const char *node)
{
	if (!valid_label(node, 12))
		return -EINVAL;
	if (n->n_hosts >= NETNS_MAX_HOSTS)
		return -ENOSPC;
	int k = n->n_hosts;
	struct netns_host *h = &n->host[k];
	memset(h, 0, sizeof(*h));
	char name[NAME_MAX_LEN];
	snprintf(name, sizeof(name), "%s-%ld-%s", n->tag, (long)getpid(), node);
	memcpy(h->name, name, sizeof(name));
	snprintf(h->hub_addr, sizeof(h->hub_addr), "10.213.%d.1", k);
	snprintf(h->hub_if, sizeof(h->hub_if), "h%d", k);
	char hub_cidr[24], host_cidr[24];
	snprintf(hub_cidr, sizeof(hub_cidr), "10.213.%d.1/30", k);
	snprintf(host_cidr, sizeof(host_cidr), "10.213.%d.2/30", k);
	int r = ns_add(n, h->name);
	if (r < 0)
		return r;
	/* the test runs in the hub: `ip` without -n acts there */
	const char *const veth[] = {n->ip,	 "link", "add", h->hub_if, "type", "veth",
				    "peer", "name", "e0",	 "netns", h->name,  NULL};
	const char *const hub_addr[] = {n->ip, "addr", "add", hub_cidr, "dev", h->hub_if, NULL};
	const char *const hub_up[] = {n->ip, "link", "set", h->hub_if, "up", NULL};
	const char *const host_addr[] = {n->ip, "-n", h->name, "addr", "add", host_cidr,
					 "dev", "e0", NULL};
	const char *const host_up[] = {n->ip, "-n", h->name, "link", "set", "e0", "up", NULL};
	const char *const host_lo[] = {n->ip, "-n", h->name, "link", "set", "lo", "up", NULL};
	const char *const *steps[] = {veth, hub_addr, hub_up, host_addr, host_up, host_lo};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		r = run(steps[i]);
		if (r < 0) {
			forget(h->name);
			return r;
		}
	}
	h->prefix[0] = n->ip;
	h->prefix[1] = "netns";
	h->prefix[2] = "exec";
	h->prefix[3] = h->name;
	h->prefix[4] = NULL;
	n->n_hosts++;
	return k;
}

const char *netns_name(const struct netns *n, int k)
{
	return n->host[k].name;
}

const char *netns_hub_addr(const struct netns *n, int k)
{
	return n->host[k].hub_addr;
}

const char *const *netns_exec_prefix(const struct netns *n, int k)
{
	return n->host[k].prefix;
}

char *netns_urls(const struct netns *n, int k, const char *urls, char *buf, size_t len)
{
	static const char lo[] = "127.0.0.1";
	const char *addr = n->host[k].hub_addr;
	size_t o = 0;
	for (const char *p = urls; *p;) {
		const char *hit = strstr(p, lo);
		size_t take = hit ? (size_t)(hit - p) : strlen(p);
		const char *ins = hit ? addr : "";
		size_t need = take + strlen(ins);
		if (o + need + 1 > len)
			return NULL;
		memcpy(buf + o, p, take);
		memcpy(buf + o + take, ins, strlen(ins));
		o += need;
		p += take + (hit ? sizeof(lo) - 1 : 0);
	}
	if (o + 1 > len)
		return NULL;
	buf[o] = 0;
	return buf;
}

int netns_link_set(struct netns *n, int k, bool up)
{
	const char *const argv[] = {n->ip, "link", "set", n->host[k].hub_if, up ? "up" : "down",
				    NULL};
	return run(argv);
}

/* nft_in - run `nft script` inside host namespace k */
static int nft_in(struct netns *n, int k, const char *script, bool quiet)
{
	const char *const argv[] = {n->ip, "netns", "exec", n->host[k].name, n->nft, script, NULL};
	return run_quiet(argv, quiet);
}

int netns_cut(struct netns *n, int k, enum netns_cut dir)
{
	struct netns_host *h = &n->host[k];
	char script[512];
	bool from = dir == NETNS_DROP_FROM_HUB;
	/* the table is replaced as a whole: add (a no-op when present), delete,
	 * add again with the one chain we want, in one nft transaction */
	snprintf(script, sizeof(script),
		 "add table inet " CUT_TABLE "; delete table inet " CUT_TABLE "; "
		 "add table inet " CUT_TABLE "; "
		 "add chain inet " CUT_TABLE " c { type filter hook %s priority 0; policy accept; }; "
		 "add rule inet " CUT_TABLE " c ip %s %s drop",
		 from ? "input" : "output", from ? "saddr" : "daddr", h->hub_addr);
	int r = nft_in(n, k, script, false);
	if (r == 0)
		h->has_cut = true;
	return r;
}

int netns_heal(struct netns *n, int k)
{
	struct netns_host *h = &n->host[k];
	if (h->has_cut) {
		int r = nft_in(n, k, "delete table inet " CUT_TABLE, false);
		if (r < 0)
			return r;
		h->has_cut = false;
	}
	return netns_link_set(n, k, true);
}

void netns_free(struct netns *n)
{
	if (!n)
		return;
	for (int k = 0; k < n->n_hosts; k++)
		forget(n->host[k].name);
	forget(n->hub);
	free(n);
}
