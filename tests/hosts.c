#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hosts.h"

#define MAX_HOSTS 16
static struct host *g_hosts[MAX_HOSTS];
static int g_nhosts;
static bool g_atexit;

static void kill_hosts(void)
{
	for (int i = 0; i < g_nhosts; i++)
		if (g_hosts[i]->pid > 0) {
			kill(g_hosts[i]->pid, SIGKILL);
			waitpid(g_hosts[i]->pid, NULL, 0);
			g_hosts[i]->pid = 0;
		}
}

const char *built_binary(const char *name)
{
	static char buf[1024];
	const char *b = getenv("LH_BUILDDIR");
	snprintf(buf, sizeof(buf), "%s/%s", b && *b ? b : ".", name);
	return buf;
}

const char *built_plugin(const char *release)
{
	static char buf[1024];
	const char *b = getenv("LH_BUILDDIR");
	snprintf(buf, sizeof(buf), "%s/plugins/reconciler-%s.so", b && *b ? b : ".", release);
	return buf;
}

void host_setup(struct host *h, const char *base, const char *node)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->node, sizeof(h->node), "%s", node);
	snprintf(h->dir, sizeof(h->dir), "%s/%s", base, node);
	snprintf(h->plugin_dir, sizeof(h->plugin_dir), "%s/plugins", h->dir);
	snprintf(h->control, sizeof(h->control), "ipc://%s/control.sock", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/%s.log", base, node);
	CHECK(mkdir(h->dir, 0755) == 0 || errno == EEXIST);
	CHECK(mkdir(h->plugin_dir, 0755) == 0 || errno == EEXIST);
	if (!g_atexit) {
		g_atexit = true;
		atexit(kill_hosts);
	}
	if (g_nhosts < MAX_HOSTS)
		g_hosts[g_nhosts++] = h;
}

void host_start(struct host *h, const char *urls, const char *const *extra)
{
	char rt[600];
	snprintf(rt, sizeof(rt), "%s/run", h->dir);
	const char *argv[48];
	int a = 0;
	argv[a++] = built_binary("leasehold");
	argv[a++] = "--etcd";
	argv[a++] = urls;
	argv[a++] = "--node-id";
	argv[a++] = h->node;
	argv[a++] = "--plugin-dir";
	argv[a++] = h->plugin_dir;
	argv[a++] = "--runtime-dir";
	argv[a++] = rt;
	argv[a++] = "--control";
	argv[a++] = h->control;
	for (const char *const *p = extra; p && *p && a < 46; p++)
		argv[a++] = *p;
	argv[a] = NULL;
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	h->pid = pid;
}

void host_signal(struct host *h, int sig)
{
	CHECK(h->pid > 0);
	CHECK(kill(h->pid, sig) == 0);
}

int host_wait(struct host *h, int timeout_ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;
		pid_t w = waitpid(h->pid, &st, WNOHANG);
		if (w == h->pid) {
			h->pid = 0;
			h->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= timeout_ms)
			return -ETIMEDOUT;
		poll(NULL, 0, 5); /* waiting for a child's exit, bounded by the deadline */
	}
}

void host_install_plugin(struct host *h, const char *release, const char *as)
{
	const char *src = built_plugin(release);
	char tmp[700], dst[700];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", h->plugin_dir, as);
	snprintf(dst, sizeof(dst), "%s/%s", h->plugin_dir, as);
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		fprintf(stderr, "cannot open built plugin %s: %s\n", src, strerror(errno));
		exit(99);
	}
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(out >= 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	close(in);
	CHECK(fchmod(out, 0644) == 0);
	close(out);
	CHECK(rename(tmp, dst) == 0);
}

void host_dump_log(const struct host *h)
{
	FILE *f = fopen(h->log, "r");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, sz > 6000 ? sz - 6000 : 0, SEEK_SET);
	char buf[6001];
	size_t n = fread(buf, 1, 6000, f);
	buf[n] = 0;
	fclose(f);
	fprintf(stderr, "---- %s ----\n%s----\n", h->log, buf);
}
