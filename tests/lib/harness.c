/* SPDX-License-Identifier: MIT */
/*
 * harness.c - real etcd members for tests (see harness.h).
 *
 * Design notes
 * - Each member is a child process (fork + exec of $ETCD) with stdout/stderr
 *   in <dir>/<name>.log; a failed start prints the log's tail.
 * - Health is polled over HTTP with libcurl every 10 ms against a deadline;
 *   between polls we wait on the child (waitpid) so an early exit is seen at
 *   once. This is waiting for an event with a deadline, not a fixed sleep.
 * - Every live harness is on a global list; an atexit handler kills its
 *   members and removes its temp dir; on a fatal signal its members are
 *   killed (harness_at_fatal_signal, shared with the other fixtures).
 * - TLS harnesses (harness_etcd_start_tls) make their PKI with the openssl
 *   CLI before etcd starts, from a config file written into the temp dir;
 *   only the client URLs are https, the peer URLs stay http.
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

#include "files.h"
#include "harness.h"

#define MAX_MEMBERS 3

struct member {
	pid_t pid;
	int client_port, peer_port;
	char name[16];
	char url[64];
	char peer_url[64];
	char listen_url[64]; /* client listen URL when not the client URL */
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
	/* TLS (harness_etcd_start_tls); all empty for a plain harness */
	bool tls;
	bool client_cert_auth;
	char ca[320], server_cert[320], server_key[320], client_cert[320], client_key[320];
	char other_ca[320], other_cert[320], other_key[320];
};

static struct harness_etcd *g_all;
static bool g_hooks_installed;
#define MAX_FATAL_CLEANUPS 8
static void (*g_fatal_cleanups[MAX_FATAL_CLEANUPS])(void);
static volatile sig_atomic_t g_n_fatal_cleanups;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* the kernel's ephemeral range: outgoing connections (every client of
 * etcd, curl, the daemons) take their local ports from it, so a port found
 * free there can be taken by a connect() before its listener binds it */
static void harness_ephemeral_range(int *ret_lo, int *ret_hi)
{
	*ret_lo = 32768;
	*ret_hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	if (!f)
		return;
	int lo, hi;
	if (fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 0 && hi >= lo) {
		*ret_lo = lo;
		*ret_hi = hi;
	}
	fclose(f);
}

/* bind fd to 127.0.0.1:port (0 = any); the port bound, or -errno */
static int harness_bind_port(int fd, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)port)};
	socklen_t len = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -errno;
	return ntohs(a.sin_port);
}

/* one free port: below the ephemeral range when there is room for it
 * (random candidates, so concurrent tests rarely try the same), else any */
static int harness_pick_port(int fd, uint32_t *seed)
{
	int lo, hi;
	harness_ephemeral_range(&lo, &hi);
	(void)hi;
	if (lo > 12000) {
		for (int tries = 0; tries < 500; tries++) {
			*seed = *seed * 1103515245u + 12345u;
			int port = 10000 + (int)((*seed >> 8) % (uint32_t)(lo - 10000));
			int r = harness_bind_port(fd, port);
			if (r > 0)
				return r;
		}
	}
	return harness_bind_port(fd, 0);
}

int harness_free_ports(int *ports, int n)
{
	int fds[8], r = 0, k = 0;
	if (n > (int)(sizeof(fds) / sizeof(fds[0])))
		return -EINVAL;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint32_t seed = (uint32_t)getpid() * 2654435761u ^ (uint32_t)ts.tv_nsec;
	for (; k < n; k++) {
		fds[k] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[k] < 0) {
			r = -errno;
			break;
		}
		int p = harness_pick_port(fds[k], &seed);
		if (p < 0) {
			r = p;
			close(fds[k]);
			break;
		}
		ports[k] = p;
	}
	for (int i = 0; i < k; i++)
		close(fds[i]);
	return r;
}

int harness_free_port(void)
{
	int p;
	int r = harness_free_ports(&p, 1);
	return r < 0 ? r : p;
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
			test_rm_tree(h->dir);
	}
}

static void on_fatal_signal(int sig)
{
	for (int i = g_n_fatal_cleanups - 1; i >= 0; i--)
		g_fatal_cleanups[i]();
	signal(sig, SIG_DFL);
	raise(sig);
}

void harness_at_fatal_signal(void (*fn)(void))
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGABRT};
	if (g_n_fatal_cleanups >= MAX_FATAL_CLEANUPS) {
		fprintf(stderr, "harness: too many fatal-signal cleanups\n");
		abort();
	}
	g_fatal_cleanups[g_n_fatal_cleanups] = fn;
	g_n_fatal_cleanups = g_n_fatal_cleanups + 1;
	if (g_n_fatal_cleanups > 1)
		return;
	struct sigaction sa = {.sa_handler = on_fatal_signal};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* only async-signal-safe work: kill children; the dir is left for the OS tmp cleaner */
static void kill_members_now(void)
{
	for (struct harness_etcd *h = g_all; h; h = h->next)
		for (int i = 0; i < h->n; i++)
			if (h->m[i].pid > 0)
				kill(h->m[i].pid, SIGKILL);
}

/* in a child before exec: stdout and stderr appended to logpath, stdin
 * from /dev/null */
static void child_stdio(const char *logpath)
{
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, 0);
}

int harness_child_exit(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool harness_cleanup_once(bool *once, void (*at_exit)(void), void (*at_signal)(void))
{
	if (*once)
		return false;
	*once = true;
	atexit(at_exit);
	harness_at_fatal_signal(at_signal);
	return true;
}

static void install_hooks(void)
{
	if (harness_cleanup_once(&g_hooks_installed, kill_all, kill_members_now))
		curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *etcd_binary(void)
{
	const char *e = getenv("ETCD");
	return (e && *e) ? e : "etcd";
}

/* read_version - the first line of `$ETCD --version` into buf (empty when it
 * cannot be run); bounded by a deadline so a hung binary cannot hang a test. */
static void read_version(char *buf, size_t len)
{
	buf[0] = 0;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		dup2(fds[1], 1);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 2);
		}
		execlp(etcd_binary(), etcd_binary(), "--version", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t have = 0;
	uint64_t deadline = now_ms() + 10000;
	while (have + 1 < len) {
		uint64_t now = now_ms();
		struct pollfd p = {.fd = fds[0], .events = POLLIN};
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			break;
		ssize_t n = read(fds[0], buf + have, len - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fds[0]);
	buf[have] = 0;
	buf[strcspn(buf, "\n")] = 0;
	kill(pid, SIGKILL); /* no-op when it has exited, as it should have */
	waitpid(pid, NULL, 0);
}

const char *harness_etcd_version(void)
{
	static char version[128];
	static bool done;
	if (!done) {
		read_version(version, sizeof(version));
		done = true;
	}
	return version;
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
	argv[a++] = m->listen_url[0] ? m->listen_url : m->url;
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
	if (h->tls) {
		argv[a++] = "--cert-file";
		argv[a++] = h->server_cert;
		argv[a++] = "--key-file";
		argv[a++] = h->server_key;
		/* etcd (3.4 and 3.5) demands client certs as soon as it has a trusted CA */
		if (h->client_cert_auth) {
			argv[a++] = "--trusted-ca-file";
			argv[a++] = h->ca;
			argv[a++] = "--client-cert-auth";
		}
	}
	for (int k = 0; k < h->n_extra && a < 62; k++)
		argv[a++] = h->extra_copy[k];
	argv[a] = NULL;

	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		child_stdio(m->logpath);
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

static bool member_healthy(const struct harness_etcd *h, struct member *m)
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
	if (h->tls) {
		curl_easy_setopt(e, CURLOPT_CAINFO, h->ca);
		if (h->client_cert_auth) {
			curl_easy_setopt(e, CURLOPT_SSLCERT, h->client_cert);
			curl_easy_setopt(e, CURLOPT_SSLKEY, h->client_key);
		}
	}
	CURLcode rc = curl_easy_perform(e);
	curl_easy_cleanup(e);
	return rc == CURLE_OK && strstr(body, "\"health\":\"true\"") != NULL;
}

static void dump_log(struct member *m)
{
	test_dump_tail(m->logpath, 3000);
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
		if (member_healthy(h, m))
			return 0;
		if (now_ms() >= deadline) {
			fprintf(stderr, "harness: etcd %s not healthy after %d ms\n", m->name, timeout_ms);
			dump_log(m);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, 10); /* pacing of the health probe, bounded by the deadline */
	}
}

static int tls_prepare(struct harness_etcd *h);

/* start_common - harness_etcd_start, with https client URLs and a fresh PKI
 * when tls is set. */
static int start_common(int n_members, bool tls, bool client_cert_auth, const char *listen_ip,
                        const char *const *extra_args, struct harness_etcd **ret)
{
	if (n_members != 1 && n_members != 3)
		return -EINVAL;
	install_hooks();
	static bool announced;
	if (!announced) {
		/* the test's log names the etcd it ran against */
		const char *v = harness_etcd_version();
		fprintf(stderr, "harness: etcd %s (%s)\n", etcd_binary(),
			*v ? v : "its --version printed nothing");
		announced = true;
	}
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
	if (tls) {
		h->tls = true;
		h->client_cert_auth = client_cert_auth;
		int r = tls_prepare(h);
		if (r < 0) {
			harness_etcd_free(h);
			return r;
		}
	}

	size_t co = 0, uo = 0;
	char cluster[sizeof(h->cluster)] = "", urls[sizeof(h->urls)] = "";
	int ports[2 * MAX_MEMBERS];
	if (harness_free_ports(ports, 2 * n_members) < 0) {
		harness_etcd_free(h);
		return -EADDRNOTAVAIL;
	}
	for (int i = 0; i < n_members; i++) {
		struct member *m = &h->m[i];
		m->client_port = ports[2 * i];
		m->peer_port = ports[2 * i + 1];
		snprintf(m->name, sizeof(m->name), "m%d", i);
		snprintf(m->url, sizeof(m->url), "%s://127.0.0.1:%d", tls ? "https" : "http",
			 m->client_port);
		snprintf(m->peer_url, sizeof(m->peer_url), "http://127.0.0.1:%d", m->peer_port);
		if (listen_ip)
			snprintf(m->listen_url, sizeof(m->listen_url), "%s://%s:%d",
				 tls ? "https" : "http", listen_ip, m->client_port);
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

int harness_etcd_start(int n_members, const char *const *extra_args, struct harness_etcd **ret)
{
	return start_common(n_members, false, false, NULL, extra_args, ret);
}

int harness_etcd_start_listen(int n_members, const char *listen_ip, const char *const *extra_args,
                              struct harness_etcd **ret)
{
	return start_common(n_members, false, false, listen_ip, extra_args, ret);
}

int harness_etcd_start_tls(int n_members, bool client_cert_auth, const char *const *extra_args,
                           struct harness_etcd **ret)
{
	return start_common(n_members, true, client_cert_auth, NULL, extra_args, ret);
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
		test_rm_tree(h->dir);
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

int harness_etcd_freeze(struct harness_etcd *h, int i, int timeout_ms)
{
	if (h->m[i].pid <= 0)
		return -ESRCH;
	if (kill(h->m[i].pid, SIGSTOP) < 0)
		return -errno;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		siginfo_t si = {0};
		if (waitid(P_PID, (id_t)h->m[i].pid, &si, WSTOPPED | WNOHANG | WNOWAIT) < 0 &&
		    errno != EINTR)
			return -errno;
		if (si.si_pid == h->m[i].pid && si.si_code == CLD_STOPPED)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= timeout_ms)
			return -ETIMEDOUT;
		/* the report has no descriptor to poll: look again shortly */
		poll(NULL, 0, 1);
	}
}

int harness_etcd_thaw(struct harness_etcd *h, int i)
{
	if (h->m[i].pid <= 0)
		return -ESRCH;
	return kill(h->m[i].pid, SIGCONT) < 0 ? -errno : 0;
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

/* ---- TLS: a throwaway PKI made with the openssl CLI ---- */

/* Extensions for the certificates, in a config file of our own so the
 * system's openssl.cnf does not matter. The server cert also carries
 * clientAuth: etcd 3.4's JSON gateway dials its own gRPC port with it. */
static const char tls_cnf[] =
    "[req]\n"
    "distinguished_name = dn\n"
    "prompt = no\n"
    "[dn]\n"
    "CN = leasehold-test\n"
    "[v3_ca]\n"
    "basicConstraints = critical,CA:TRUE\n"
    "keyUsage = critical,keyCertSign,cRLSign\n"
    "subjectKeyIdentifier = hash\n"
    "[v3_server]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage = serverAuth,clientAuth\n"
    "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
    "[v3_client]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage = clientAuth\n";

static const char *openssl_binary(void)
{
	const char *e = getenv("OPENSSL");
	return (e && *e) ? e : "openssl";
}

/* run_openssl - run `openssl argv[1..]` with output appended to
 * <dir>/openssl.log; waits for it (openssl is a short-lived child). Returns
 * 0, -ENOENT when the binary is missing, -EIO when it failed. */
static int run_openssl(const struct harness_etcd *h, const char *const *argv)
{
	char logpath[320];
	snprintf(logpath, sizeof(logpath), "%s/openssl.log", h->dir);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		child_stdio(logpath);
		execvp(openssl_binary(), (char *const *)argv);
		_exit(127);
	}
	int code = harness_child_exit(pid);
	if (code <= 0)
		return code;
	if (code == 127) {
		fprintf(stderr, "harness: cannot run '%s' (install the Debian package \"openssl\")\n",
			openssl_binary());
		return -ENOENT;
	}
	fprintf(stderr, "harness: openssl %s failed\n", argv[1]);
	FILE *f = fopen(logpath, "r");
	if (f) {
		char buf[2048];
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = 0;
		fclose(f);
		fprintf(stderr, "---- %s ----\n%s\n----\n", logpath, buf);
	}
	return -EIO;
}

/* make_ca - a self-signed EC P-256 CA: <dir>/<name>.pem and <name>.key */
static int make_ca(const struct harness_etcd *h, const char *cnf, const char *name,
                   char *ret_pem, size_t pem_len, char *key, size_t key_len)
{
	char subj[96];
	snprintf(ret_pem, pem_len, "%s/%s.pem", h->dir, name);
	snprintf(key, key_len, "%s/%s.key", h->dir, name);
	snprintf(subj, sizeof(subj), "/CN=leasehold test %s", name);
	const char *const argv[] = {"openssl", "req", "-x509", "-config", cnf,
				    "-extensions", "v3_ca", "-newkey", "ec",
				    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
				    "-keyout", key, "-out", ret_pem, "-days", "2",
				    "-subj", subj, NULL};
	return run_openssl(h, argv);
}

/* make_leaf - a key and a cert for `cn` with extensions `ext`, signed by
 * ca_pem/ca_key: <dir>/<name>.pem and <name>.key */
static int make_leaf(const struct harness_etcd *h, const char *cnf, const char *name,
                     const char *cn, const char *ext, const char *ca_pem, const char *ca_key,
                     int serial, char *ret_pem, size_t pem_len, char *ret_key, size_t key_len)
{
	char csr[320], subj[96], serial_s[16];
	snprintf(ret_pem, pem_len, "%s/%s.pem", h->dir, name);
	snprintf(ret_key, key_len, "%s/%s.key", h->dir, name);
	snprintf(csr, sizeof(csr), "%s/%s.csr", h->dir, name);
	snprintf(subj, sizeof(subj), "/CN=%s", cn);
	snprintf(serial_s, sizeof(serial_s), "%d", serial);
	const char *const req[] = {"openssl", "req", "-new", "-config", cnf, "-newkey", "ec",
				   "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
				   "-keyout", ret_key, "-out", csr, "-subj", subj, NULL};
	int r = run_openssl(h, req);
	if (r < 0)
		return r;
	const char *const sign[] = {"openssl", "x509", "-req", "-in", csr, "-CA", ca_pem,
				    "-CAkey", ca_key, "-set_serial", serial_s, "-days", "2",
				    "-extfile", cnf, "-extensions", ext, "-out", ret_pem, NULL};
	return run_openssl(h, sign);
}

/* tls_prepare - write the config and make both PKIs in h->dir */
static int tls_prepare(struct harness_etcd *h)
{
	char cnf[320], ca_key[320], other_ca_key[320];
	snprintf(cnf, sizeof(cnf), "%s/openssl.cnf", h->dir);
	FILE *f = fopen(cnf, "w");
	if (!f)
		return -errno;
	size_t n = fwrite(tls_cnf, 1, sizeof(tls_cnf) - 1, f);
	if (fclose(f) != 0 || n != sizeof(tls_cnf) - 1)
		return -EIO;
	int r = make_ca(h, cnf, "ca", h->ca, sizeof(h->ca), ca_key, sizeof(ca_key));
	if (r == 0)
		r = make_leaf(h, cnf, "server", "localhost", "v3_server", h->ca, ca_key, 1,
			      h->server_cert, sizeof(h->server_cert), h->server_key,
			      sizeof(h->server_key));
	if (r == 0)
		r = make_leaf(h, cnf, "client", "leasehold-test-client", "v3_client", h->ca, ca_key,
			      2, h->client_cert, sizeof(h->client_cert), h->client_key,
			      sizeof(h->client_key));
	if (r == 0)
		r = make_ca(h, cnf, "other-ca", h->other_ca, sizeof(h->other_ca), other_ca_key,
			    sizeof(other_ca_key));
	if (r == 0)
		r = make_leaf(h, cnf, "other-client", "leasehold-test-client", "v3_client",
			      h->other_ca, other_ca_key, 3, h->other_cert, sizeof(h->other_cert),
			      h->other_key, sizeof(h->other_key));
	return r;
}

/* one blocking POST to member 0's gateway, answered 200 */
static void gateway_post(const struct harness_etcd *h, const char *path, const char *body)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", harness_etcd_url(h, 0), path);
	CURL *e = curl_easy_init();
	CHECK(e != NULL);
	FILE *sink = fopen("/dev/null", "w");
	CHECK(sink != NULL);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, sink);
	if (h->tls)
		curl_easy_setopt(e, CURLOPT_CAINFO, h->ca);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	CHECK_INT_EQ(curl_easy_perform(e), CURLE_OK);
	long code = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	CHECK_INT_EQ(code, 200);
	fclose(sink);
	curl_easy_cleanup(e);
}

void harness_etcd_enable_auth(const struct harness_etcd *h, const char *password)
{
	char body[256];
	snprintf(body, sizeof(body), "{\"name\":\"root\",\"password\":\"%s\"}", password);
	gateway_post(h, "/v3/auth/user/add", body);
	gateway_post(h, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}");
	gateway_post(h, "/v3/auth/enable", "{}");
}

/* the three files of one CA's set into the out pointers that are not NULL */
static int tls_set(const struct harness_etcd *h, const char *ca, const char *cert, const char *key,
		   const char **ret_ca, const char **ret_cert, const char **ret_key)
{
	if (!h->tls)
		return -EINVAL;
	const char *const in[3] = {ca, cert, key};
	const char **const out[3] = {ret_ca, ret_cert, ret_key};
	for (int i = 0; i < 3; i++)
		if (out[i])
			*out[i] = in[i];
	return 0;
}

int harness_tls_files(const struct harness_etcd *h, const char **ret_ca, const char **ret_cert,
		      const char **ret_key)
{
	return tls_set(h, h->ca, h->client_cert, h->client_key, ret_ca, ret_cert, ret_key);
}

int harness_tls_other_files(const struct harness_etcd *h, const char **ret_ca,
                            const char **ret_cert, const char **ret_key)
{
	return tls_set(h, h->other_ca, h->other_cert, h->other_key, ret_ca, ret_cert, ret_key);
}
