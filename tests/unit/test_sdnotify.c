/* SPDX-License-Identifier: MIT */
/*
 * test_sdnotify - the daemon speaks systemd's notification protocol to a
 * NOTIFY_SOCKET of the test's own (an AF_UNIX datagram socket in the test's
 * dir, and an abstract one), with a real daemon, a real etcd and the example
 * plugin:
 *  - READY=1 comes once the etcd session holds a lease and the plugin's
 *    election has read its state from etcd (never before), exactly once;
 *  - STATUS= one-line summaries follow the state ("1 plugin, leading 1,
 *    etcd ok");
 *  - WATCHDOG=1 comes from the event loop at half WATCHDOG_USEC; a stopped
 *    daemon (SIGSTOP) sends none, so systemd would restart it; it pings again
 *    on SIGCONT;
 *  - SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1 again;
 *  - SIGTERM: STOPPING=1, then a clean exit;
 *  - WATCHDOG_PID of another process: no pings; the variables are not passed
 *    on to the plugin workers (process isolation);
 *  - a NOTIFY_SOCKET that is no address is warned about and ignored;
 *  - the WATCHDOG_USEC/WATCHDOG_PID parser refuses garbage.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "base/sdnotify.h"
#include "testutil.h"

#define PFX "/lhsdn"

static struct harness_etcd *g_etcd;
static struct host A, B;

static const char *const ARGS[] = {"--prefix", PFX, "--ttl", "5", "--reconcile-wait", "0",
                                   "--reconcile-interval", "1h", NULL};

static long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* a datagram listener; addr "@name" is abstract */
static int listen_dgram(const char *addr)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(addr);
	CHECK(len < sizeof(sa.sun_path));
	memcpy(sa.sun_path, addr, len);
	socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	if (addr[0] == '@')
		sa.sun_path[0] = '\0';
	else
		sl++;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK_OK(bind(fd, (struct sockaddr *)&sa, sl));
	return fd;
}

/* the next datagram into buf (NUL-terminated) within timeout_ms: its length,
 * or -1 on timeout */
static int recv_within(int fd, char *buf, size_t len, int timeout_ms)
{
	long end = mono_ms() + timeout_ms;
	for (;;) {
		long left = end - mono_ms();
		if (left < 0)
			left = 0;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r >= 0);
		if (r == 0)
			return -1;
		ssize_t n = recv(fd, buf, len - 1, 0);
		CHECK(n >= 0);
		buf[n] = 0;
		fprintf(stderr, "  notify: %s\n", buf);
		return (int)n;
	}
}

/* whether line `kv` ("KEY=VALUE" or "KEY=" for any value) is a line of msg */
static bool has_line(const char *msg, const char *kv)
{
	size_t n = strlen(kv);
	for (const char *p = msg; p && *p;) {
		if (strncmp(p, kv, n) == 0 && (kv[n - 1] == '=' || p[n] == '\n' || p[n] == 0))
			return true;
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return false;
}

/* wait for a datagram with line kv (other datagrams are skipped, but a
 * READY=1 among them fails the test when forbid_ready); into buf */
static void wait_line(int fd, const char *kv, char *buf, size_t len, int timeout_ms,
                      bool forbid_ready)
{
	long end = mono_ms() + timeout_ms;
	for (;;) {
		long left = end - mono_ms();
		if (left <= 0 || recv_within(fd, buf, len, (int)left) < 0) {
			fprintf(stderr, "no '%s' within %d ms\n", kv, timeout_ms);
			hosts_dump_logs();
			exit(1);
		}
		if (has_line(buf, kv))
			return;
		if (forbid_ready && has_line(buf, "READY=1")) {
			fprintf(stderr, "READY=1 before '%s'\n", kv);
			hosts_dump_logs();
			exit(1);
		}
	}
}

/* datagrams with line kv received within ms */
static int count_lines_for(int fd, const char *kv, int ms)
{
	char buf[512];
	int n = 0;
	long end = mono_ms() + ms;
	for (long left; (left = end - mono_ms()) > 0;)
		if (recv_within(fd, buf, sizeof(buf), (int)left) >= 0 && has_line(buf, kv))
			n++;
	return n;
}

/* the process state letter of pid (/proc/PID/stat), or 0 */
static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static int g_fd;

static void test_ready_status_watchdog_reload_stop(void)
{
	char path[700], env_sock[720], buf[512];
	snprintf(path, sizeof(path), "%s/notify.sock", harness_dir(g_etcd));
	g_fd = listen_dgram(path);
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);
	/* pings every 250 ms */
	const char *const env[] = {env_sock, "WATCHDOG_USEC=500000", NULL};
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_start_env(&A, harness_etcd_urls(g_etcd), ARGS, env);

	/* READY=1: the session is up and the election synced by then */
	wait_line(g_fd, "READY=1", buf, sizeof(buf), 60000, false);
	CHECK(strstr(buf, "\nSTATUS=1 plugin, ") != NULL);
	CHECK(host_log_count(&A, 0, " granted, ttl ") == 1);
	CHECK(host_log_count(&A, 0, "plugin reconciler 1.0.0 loaded") == 1);
	CHECK(host_log_count(&A, 0, "synced with etcd: ready") == 1);
	struct json_object *p = ctl_plugin_json(&A, "reconciler");
	CHECK(p != NULL);
	const char *state = jstr(p, "state");
	fprintf(stderr, "  state at READY=1 (or later): %s\n", state ? state : "?");
	CHECK(state && strcmp(state, "loading") != 0);
	json_object_put(p);

	/* a summary once it leads; no second READY=1 meanwhile */
	for (;;) {
		wait_line(g_fd, "STATUS=", buf, sizeof(buf), 30000, true);
		if (strstr(buf, "STATUS=1 plugin, leading 1, etcd ok"))
			break;
	}

	/* the watchdog: ~8 pings in 2 s; at least 3 even on a loaded machine */
	int pings = count_lines_for(g_fd, "WATCHDOG=1", 2000);
	fprintf(stderr, "  %d pings in 2 s\n", pings);
	CHECK(pings >= 3);
	CHECK(pings <= 9); /* never faster than the interval asked for */

	/* a stopped daemon does not ping */
	host_signal(&A, SIGSTOP);
	long end = mono_ms() + 10000;
	while (proc_state(A.pid) != 'T') {
		CHECK(mono_ms() < end);
		(void)recv_within(g_fd, buf, sizeof(buf), 10);
	}
	while (recv_within(g_fd, buf, sizeof(buf), 0) >= 0)
		; /* what was sent before it stopped */
	CHECK_INT_EQ(count_lines_for(g_fd, "WATCHDOG=1", 1500), 0);
	host_signal(&A, SIGCONT);
	wait_line(g_fd, "WATCHDOG=1", buf, sizeof(buf), 10000, false);

	/* reload: RELOADING=1 with the monotonic time, then READY=1 */
	host_signal(&A, SIGHUP);
	wait_line(g_fd, "RELOADING=1", buf, sizeof(buf), 10000, true);
	const char *mu = strstr(buf, "MONOTONIC_USEC=");
	CHECK(mu != NULL);
	unsigned long long usec = strtoull(mu + strlen("MONOTONIC_USEC="), NULL, 10);
	long diff = mono_ms() - (long)(usec / 1000);
	CHECK(diff >= 0 && diff < 10000);
	wait_line(g_fd, "READY=1", buf, sizeof(buf), 30000, false);

	/* stop */
	host_signal(&A, SIGTERM);
	wait_line(g_fd, "STOPPING=1", buf, sizeof(buf), 10000, true);
	CHECK_OK(host_wait(&A, 30000));
	CHECK_INT_EQ(A.exit_status, 0);
	close(g_fd);
	unlink(path);
}

/* WATCHDOG_PID names another process: no pings. An abstract socket name. A
 * worker process does not see the variables. */
static void test_abstract_socket_other_watchdog_pid(void)
{
	char name[64], env_sock[96], env_pid[64], buf[512];
	snprintf(name, sizeof(name), "@lh-test-sdnotify-%ld", (long)getpid());
	int fd = listen_dgram(name);
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", name);
	snprintf(env_pid, sizeof(env_pid), "WATCHDOG_PID=%ld", (long)getpid());
	const char *const env[] = {env_sock, "WATCHDOG_USEC=100000", env_pid, NULL};
	const char *const args[] = {"--prefix", PFX "b", "--ttl", "5", "--isolation", "process",
	                            NULL};
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_start_env(&B, harness_etcd_urls(g_etcd), args, env);
	wait_line(fd, "READY=1", buf, sizeof(buf), 60000, false);
	CHECK(host_log_count(&B, 0, "plugin reconciler 1.0.0 loaded") == 1);
	CHECK(host_log_count(&B, 0, "systemd notification on; no watchdog") == 1);
	CHECK_INT_EQ(count_lines_for(fd, "WATCHDOG=1", 1000), 0);

	/* the worker's environment has none of the three */
	char path[96], env_buf[65536];
	snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)B.pid, (long)B.pid);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	long wpid = 0;
	CHECK(fscanf(f, "%ld", &wpid) == 1); /* its only child: the plugin's worker */
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%ld/environ", wpid);
	FILE *e = fopen(path, "r");
	CHECK(e != NULL);
	size_t n = fread(env_buf, 1, sizeof(env_buf) - 1, e);
	fclose(e);
	CHECK(n > 0);
	bool seen = false;
	for (size_t i = 0; i < n; i += strlen(env_buf + i) + 1)
		if (strncmp(env_buf + i, "NOTIFY_SOCKET=", 14) == 0 ||
		    strncmp(env_buf + i, "WATCHDOG_", 9) == 0)
			seen = true;
	CHECK(!seen);

	host_signal(&B, SIGTERM);
	wait_line(fd, "STOPPING=1", buf, sizeof(buf), 10000, true);
	CHECK_OK(host_wait(&B, 30000));
	CHECK_INT_EQ(B.exit_status, 0);
	close(fd);
}

/* a NOTIFY_SOCKET that is no address: a warning, and the daemon runs */
static void test_bad_notify_socket_is_harmless(void)
{
	struct host c;
	host_setup(&c, harness_dir(g_etcd), "c");
	const char *const env[] = {"NOTIFY_SOCKET=relative/notify", "WATCHDOG_USEC=100000", NULL};
	const char *const args[] = {"--prefix", PFX "c", "--ttl", "5", NULL};
	host_start_env(&c, harness_etcd_urls(g_etcd), args, env);
	host_wait_control(&c, 30000);
	CHECK(host_log_count(&c, 0, "NOTIFY_SOCKET is not a usable socket address") == 1);
	host_signal(&c, SIGTERM);
	CHECK_OK(host_wait(&c, 30000));
	CHECK_INT_EQ(c.exit_status, 0);
}

static void test_watchdog_env_parser(void)
{
	CHECK_INT_EQ(sdnotify_watchdog_interval("1000000", NULL, 42), 500000000ull);
	CHECK_INT_EQ(sdnotify_watchdog_interval("1000000", "42", 42), 500000000ull);
	CHECK_INT_EQ(sdnotify_watchdog_interval("1000000", "43", 42), 0);
	CHECK_INT_EQ(sdnotify_watchdog_interval(NULL, NULL, 42), 0);
	static const char *const bad[] = {"", "0", "-1", "1e6", " 100", "100 ", "0x10", "abc",
	                                  "99999999999999999999999", "18446744073709551615"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT_EQ(sdnotify_watchdog_interval(bad[i], NULL, 42), 0);
	CHECK_INT_EQ(sdnotify_watchdog_interval("1000", "42x", 42), 0);
	CHECK_INT_EQ(sdnotify_watchdog_interval("1000", "", 42), 0);
	struct sdnotify *n;
	CHECK_INT_EQ(sdnotify_new("", &n), -EINVAL);
	CHECK_INT_EQ(sdnotify_new("relative/path", &n), -EINVAL);
	char longp[200];
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	CHECK_INT_EQ(sdnotify_new(longp, &n), -EINVAL);
	/* a socket nobody listens on: an error for the caller, nothing else */
	CHECK_OK(sdnotify_new("/nonexistent/notify", &n));
	CHECK(sdnotify_send(n, "READY=1") < 0);
	sdnotify_free(n);
	CHECK_OK(sdnotify_send(NULL, "READY=1"));
}

int main(void)
{
	RUN(test_watchdog_env_parser);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	RUN(test_ready_status_watchdog_reload_stop);
	RUN(test_abstract_socket_other_watchdog_pid);
	RUN(test_bad_notify_socket_is_harmless);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
