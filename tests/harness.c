/*
 * harness.c - real etcd members for tests (see harness.h).
 *
 * Design notes
 * - Each member is a child process (fork + exec of $ETCD) with stdout/stderr
 *   in <dir>/<name>.log; a failed start prints the log's tail.
 * - Health is polled over HTTP with libcurl every 10 ms against a deadline;
 *   between polls we wait on the child (waitpid) so an early exit is seen at
 *   once. This is waiting for an event with a deadline, not a fixed sleep.
 * - Every live harness is on a global list; atexit and SIGINT/SIGTERM/SIGABRT
 *   handlers kill its members and remove its temp dir.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAX_MEMBERS 3

struct member {
	pid_t pid;
	int client_port, peer_port;
	char name[16];
	char url[64];
	char peer_url[64];
	char datadir[512];
	char logpath[512];
};

struct harness_etcd {
	struct harness_etcd *next;
	int n;
	struct member m[MAX_MEMBERS];
	char dir[256];
	char urls[256];
	char cluster[512];
	const char *const *extra;
	int n_extra;
	char **extra_copy;
	bool started_once[MAX_MEMBERS];
};

static struct harness_etcd *g_all;
static bool g_hooks_installed;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int harness_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	close(fd);
	return ntohs(a.sin_port);
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void member_kill(struct member *m)
{
	if (m->pid > 0) {
		kill(m->pid, SIGKILL);
		waitpid(m->pid, NULL, 0);
		m->pid = 0;
	}
}

static void kill_all(void)
{
	for (struct harness_etcd *h = g_all; h; h = h->next) {
		for (int i = 0; i < h->n; i++)
			member_kill(&h->m[i]);
		if (h->dir[0])
			nftw(h->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	}
}

static void on_fatal_signal(int sig)
{
	/* only async-signal-safe work: kill children; the dir is left for the OS tmp cleaner */
	for (struct harness_etcd *h = g_all; h; h = h->next)
		for (int i = 0; i < h->n; i++)
			if (h->m[i].pid > 0)
				kill(h->m[i].pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_hooks(void)
{
	if (g_hooks_installed)
		return;
	g_hooks_installed = true;
	atexit(kill_all);
	struct sigaction sa = {.sa_handler = on_fatal_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *etcd_binary(void)
{
	const char *e = getenv("ETCD");
	return (e && *e) ? e : "etcd";
}

static int member_spawn(struct harness_etcd *h, int i, bool new_cluster)
{
	struct member *m = &h->m[i];
	char port_s[16];
	snprintf(port_s, sizeof(port_s), "%d", m->client_port);
	const char *argv[64];
	int a = 0;
	argv[a++] = etcd_binary();
	argv[a++] = "--name";
	argv[a++] = m->name;
	argv[a++] = "--data-dir";
	argv[a++] = m->datadir;
	argv[a++] = "--listen-client-urls";
	argv[a++] = m->url;
	argv[a++] = "--advertise-client-urls";
	argv[a++] = m->url;
	argv[a++] = "--listen-peer-urls";
	argv[a++] = m->peer_url;
	argv[a++] = "--initial-advertise-peer-urls";
	argv[a++] = m->peer_url;
	argv[a++] = "--initial-cluster";
	argv[a++] = h->cluster;
	argv[a++] = "--initial-cluster-state";
	argv[a++] = new_cluster ? "new" : "existing";
	argv[a++] = "--initial-cluster-token";
	argv[a++] = h->dir; /* unique per harness */
	argv[a++] = "--heartbeat-interval";
	argv[a++] = "50";
	argv[a++] = "--election-timeout";
	argv[a++] = "500";
	for (int k = 0; k < h->n_extra && a < 62; k++)
		argv[a++] = h->extra_copy[k];
	argv[a] = NULL;

	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(m->logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		/* die with the test even if it is SIGKILLed */
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	m->pid = pid;
	return 0;
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
	size_t total = sz * n;
	char *buf = ud;
	size_t have = strlen(buf);
	size_t take = total < 255 - have ? total : 255 - have;
	memcpy(buf + have, p, take);
	buf[have + take] = 0;
	return total;
}

static bool member_healthy(struct member *m)
{
	char url[96], body[256] = "";
	snprintf(url, sizeof(url), "%s/health", m->url);
	CURL *e = curl_easy_init();
	if (!e)
		return false;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 500L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
	CURLcode rc = curl_easy_perform(e);
	curl_easy_cleanup(e);
	return rc == CURLE_OK && strstr(body, "\"health\":\"true\"") != NULL;
}

static void dump_log(struct member *m)
{
	FILE *f = fopen(m->logpath, "r");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, sz > 3000 ? sz - 3000 : 0, SEEK_SET);
	char buf[3001];
	size_t n = fread(buf, 1, 3000, f);
	buf[n] = 0;
	fclose(f);
	fprintf(stderr, "---- tail of %s ----\n%s\n----\n", m->logpath, buf);
}

int harness_etcd_wait_healthy(struct harness_etcd *h, int i, int timeout_ms)
{
	struct member *m = &h->m[i];
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		if (m->pid <= 0)
			return -ESRCH;
		int st;
		pid_t w = waitpid(m->pid, &st, WNOHANG);
		if (w == m->pid) {
			m->pid = 0;
			fprintf(stderr, "harness: etcd %s exited during start\n", m->name);
			dump_log(m);
			return -ECHILD;
		}
		if (member_healthy(m))
			return 0;
		if (now_ms() >= deadline) {
			fprintf(stderr, "harness: etcd %s not healthy after %d ms\n", m->name, timeout_ms);
			dump_log(m);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 10); /* pacing of the health probe, bounded by the deadline */
	}
}

int harness_etcd_start(int n_members, const char *const *extra_args, struct harness_etcd **ret)
{
	if (n_members != 1 && n_members != 3)
		return -EINVAL;
	install_hooks();
	struct harness_etcd *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->n = n_members;
	const char *tmp = getenv("TMPDIR");
	snprintf(h->dir, sizeof(h->dir), "%s/lh-etcd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(h->dir)) {
		int r = -errno;
		free(h);
		return r;
	}
	for (const char *const *p = extra_args; p && *p; p++)
		h->n_extra++;
	h->extra_copy = calloc((size_t)h->n_extra + 1, sizeof(char *));
	for (int k = 0; k < h->n_extra; k++)
		h->extra_copy[k] = strdup(extra_args[k]);
	h->next = g_all;
	g_all = h;

	size_t co = 0, uo = 0;
	char cluster[sizeof(h->cluster)] = "", urls[sizeof(h->urls)] = "";
	for (int i = 0; i < n_members; i++) {
		struct member *m = &h->m[i];
		m->client_port = harness_free_port();
		m->peer_port = harness_free_port();
		if (m->client_port < 0 || m->peer_port < 0 || m->client_port == m->peer_port) {
			harness_etcd_free(h);
			return -EADDRNOTAVAIL;
		}
		snprintf(m->name, sizeof(m->name), "m%d", i);
		snprintf(m->url, sizeof(m->url), "http://127.0.0.1:%d", m->client_port);
		snprintf(m->peer_url, sizeof(m->peer_url), "http://127.0.0.1:%d", m->peer_port);
		char dir[sizeof(h->dir)];
		memcpy(dir, h->dir, sizeof(dir));
		snprintf(m->datadir, sizeof(m->datadir), "%s/m%d.etcd", dir, i);
		snprintf(m->logpath, sizeof(m->logpath), "%s/m%d.log", dir, i);
		char part[128];
		snprintf(part, sizeof(part), "%s%s=%s", i ? "," : "", m->name, m->peer_url);
		co += (size_t)snprintf(cluster + co, sizeof(cluster) - co, "%s", part);
		snprintf(part, sizeof(part), "%s%s", i ? "," : "", m->url);
		uo += (size_t)snprintf(urls + uo, sizeof(urls) - uo, "%s", part);
	}
	memcpy(h->cluster, cluster, sizeof(cluster));
	memcpy(h->urls, urls, sizeof(urls));
	for (int i = 0; i < n_members; i++) {
		int r = member_spawn(h, i, true);
		if (r < 0) {
			harness_etcd_free(h);
			return r;
		}
	}
	for (int i = 0; i < n_members; i++) {
		int r = harness_etcd_wait_healthy(h, i, 20000);
		if (r < 0) {
			harness_etcd_free(h);
			return r;
		}
	}
	*ret = h;
	return 0;
}

void harness_etcd_free(struct harness_etcd *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->n; i++)
		member_kill(&h->m[i]);
	for (struct harness_etcd **pp = &g_all; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	if (getenv("LH_KEEP_TMP") == NULL)
		nftw(h->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	for (int k = 0; k < h->n_extra; k++)
		free(h->extra_copy[k]);
	free(h->extra_copy);
	free(h);
}

const char *harness_etcd_url(const struct harness_etcd *h, int member)
{
	return h->m[member].url;
}

const char *harness_etcd_urls(const struct harness_etcd *h)
{
	return h->urls;
}

int harness_etcd_members(const struct harness_etcd *h)
{
	return h->n;
}

pid_t harness_etcd_pid(const struct harness_etcd *h, int member)
{
	return h->m[member].pid;
}

const char *harness_dir(const struct harness_etcd *h)
{
	return h->dir;
}

int harness_etcd_stop(struct harness_etcd *h, int i)
{
	struct member *m = &h->m[i];
	if (m->pid <= 0)
		return -ESRCH;
	kill(m->pid, SIGTERM);
	uint64_t deadline = now_ms() + 10000;
	for (;;) {
		pid_t w = waitpid(m->pid, NULL, WNOHANG);
		if (w == m->pid)
			break;
		if (now_ms() >= deadline) {
			member_kill(m);
			break;
		}
		poll(NULL, 0, 5);
	}
	m->pid = 0;
	return 0;
}

int harness_etcd_kill(struct harness_etcd *h, int i)
{
	if (h->m[i].pid <= 0)
		return -ESRCH;
	member_kill(&h->m[i]);
	return 0;
}

int harness_etcd_restart(struct harness_etcd *h, int i)
{
	if (h->m[i].pid > 0)
		return -EBUSY;
	/* the data dir exists: etcd rejoins with its stored membership */
	int r = member_spawn(h, i, true);
	if (r < 0)
		return r;
	/* a lone member of a 3-member cluster cannot be healthy without quorum;
	 * the caller then waits itself once quorum is back */
	int alive = 0;
	for (int k = 0; k < h->n; k++)
		alive += h->m[k].pid > 0;
	if (h->n > 1 && alive * 2 <= h->n)
		return 0;
	return harness_etcd_wait_healthy(h, i, 20000);
}
