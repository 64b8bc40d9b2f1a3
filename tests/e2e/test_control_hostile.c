/* SPDX-License-Identifier: MIT */
/*
 * test_control_hostile.c - a real leasehold daemon's control socket against
 * clients that do not play by the rules: connect and close, garbage, half a
 * header then silence (ours and nng's SP one), a client that leaves with its
 * request unanswered, 200 of those in a burst, a second daemon started on
 * the same path, and a peer of another uid (root only; skipped otherwise).
 * Also the host<->worker bus (nng pair1 over ipc, process isolation): a
 * stray client that connects to a restarting worker's bus socket and hangs
 * up before the worker's handshake must not keep the plugin from coming
 * back (with nng 1.5.2 it breaks that listener: the daemon then gives the
 * worker up after its attach deadline and starts another).
 *
 * After each: `leaseholdctl plugins` works (a wedged daemon does not answer
 * at all: the run is killed after 3 s), the daemon answers a PLUGINS
 * request within 1 s (timed from the connect, in this process: the start
 * of a sanitized leaseholdctl on a loaded machine is no part of the
 * daemon's latency) and it uses next to no CPU over the next second
 * (utime+stime from /proc/PID/stat, sampled until a deadline: a spinning
 * daemon burns a whole core).
 */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "control/control_client.h"
#include "testutil.h"
#include "harness.h"
#include "hosts.h"

#include <json-c/json.h>

#define PFX "/lhhostile"
/* CPU the daemon may use in the second after an attack, in clock ticks
 * (a spinning loop uses about sysconf(_SC_CLK_TCK) per thread) */
#define IDLE_TICKS_MAX 30

static struct harness_etcd *g_etcd;
static struct host A, B, C;
static char g_path[sizeof(A.control)]; /* A's socket file */
static bool g_done;

static const char *const HOST_ARGS[] = {"--prefix",	     PFX,  "--ttl", "2",
					"--reconcile-wait", "0", "--log-level", "debug",
					NULL};

static void dump_on_failure(void)
{
	if (!g_done)
		hosts_dump_logs();
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* cpu_ticks - utime + stime of pid (fields 14 and 15 of /proc/PID/stat). */
static unsigned long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;
	char *p;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	CHECK(p != NULL);
	/* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(14) stime(15) */
	CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) ==
	      2);
	return ut + st;
}


static void raw_send(int fd, const void *buf, size_t len)
{
	CHECK(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* closed_by_peer - wait up to ms for the daemon to close fd (EOF or reset);
 * bytes it sends meanwhile are discarded. */
static bool closed_by_peer(int fd, int ms)
{
	long deadline = now_ms() + ms;
	for (;;) {
		long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		char tmp[512];
		if (left <= 0)
			return false;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		ssize_t n = recv(fd, tmp, sizeof(tmp), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
}

/* answer_ms - how long A takes to answer a PLUGINS request on a fresh
 * connection (at most 3 s: more fails the test) */
static long answer_ms(const char *after)
{
	static const uint8_t req[4] = {0x08, 0x01, 0x10, 0x01}; /* protocol 1, PLUGINS */
	uint8_t *reply = NULL;
	size_t len = 0;
	long t0 = now_ms();
	int r = control_client_call(g_path, req, sizeof(req), 3000, 1 << 20, &reply, &len);
	long ms = now_ms() - t0;
	if (r < 0 || len == 0) {
		fprintf(stderr, "after %s: no answer to a PLUGINS request: %s\n", after,
			r < 0 ? strerror(-r) : "an empty reply");
		exit(1);
	}
	free(reply);
	return ms;
}

/* expect_healthy - the checks after every attack (see the file comment). */
static void expect_healthy(const char *after)
{
	struct ctl_proc p;
	struct ctl_out o;
	static const char *const args[] = {"plugins", NULL};
	unsigned long long t0;
	long deadline, ms;

	ctl_spawn(&p, A.control, args);
	if (ctl_finish(&p, &o, 3000) < 0) {
		fprintf(stderr, "after %s: leaseholdctl plugins got no answer within 3 s\n", after);
		exit(1);
	}
	if (o.status != 0) {
		fprintf(stderr, "after %s: leaseholdctl plugins: exit %d: %s\n", after, o.status,
			o.err);
		exit(1);
	}
	CHECK(strstr(o.out, "reconciler") != NULL);
	ctl_out_free(&o);
	ms = answer_ms(after);
	if (ms >= 1000) {
		fprintf(stderr, "after %s: the daemon took %ld ms to answer\n", after, ms);
		exit(1);
	}

	t0 = cpu_ticks(A.pid);
	deadline = now_ms() + 1000;
	while (now_ms() < deadline) {
		unsigned long long used = cpu_ticks(A.pid) - t0;
		if (used > IDLE_TICKS_MAX) {
			fprintf(stderr, "after %s: the daemon used %llu ticks of CPU within 1 s\n",
				after, used);
			exit(1);
		}
		poll(NULL, 0, 50); /* sampling; the deadline ends the check */
	}
	fprintf(stderr, "after %s: answered (%ld ms), %llu CPU ticks in the next second\n", after,
		ms, cpu_ticks(A.pid) - t0);
}

/* ---- attacks ---------------------------------------------------------- */

static void test_connect_and_close(void)
{
	int fd = tu_unix_connect(g_path);
	CHECK(fd >= 0);
	close(fd);
	expect_healthy("connect+close");
}

static void test_garbage_bytes(void)
{
	static const uint8_t garbage[] = "GET / HTTP/1.0\r\n\r\n\xff\xfe\x00\x01";
	int fd = tu_unix_connect(g_path);
	CHECK(fd >= 0);
	raw_send(fd, garbage, sizeof(garbage));
	CHECK(closed_by_peer(fd, 5000)); /* not a control client: closed at once */
	close(fd);
	/* and garbage followed by a close */
	fd = tu_unix_connect(g_path);
	CHECK(fd >= 0);
	raw_send(fd, garbage, sizeof(garbage));
	close(fd);
	expect_healthy("garbage bytes");
}

static void test_half_header_then_silence(void)
{
	static const uint8_t sp_half[4] = {0, 'S', 'P', 0}; /* half an nng SP header */
	static const uint8_t lh_half[5] = {'L', 'H', 'C', '1', 0};
	int fd_sp = tu_unix_connect(g_path), fd_lh = tu_unix_connect(g_path);
	long t0 = now_ms();

	CHECK(fd_sp >= 0 && fd_lh >= 0);
	raw_send(fd_sp, sp_half, sizeof(sp_half));
	raw_send(fd_lh, lh_half, sizeof(lh_half));
	expect_healthy("half a header (still hanging)");
	CHECK(closed_by_peer(fd_sp, 5000));
	/* our own half header: closed by the read deadline (5 s) */
	CHECK(closed_by_peer(fd_lh, 15000));
	fprintf(stderr, "half header closed after %ld ms\n", now_ms() - t0);
	close(fd_sp);
	close(fd_lh);
	expect_healthy("half a header");
}

static void test_client_leaves_unanswered(void)
{
	/* a packed PLUGINS request: protocol 1, kind 1 */
	static const uint8_t req[4] = {0x08, 0x01, 0x10, 0x01};
	uint8_t hdr[8] = {'L', 'H', 'C', '1', 0, 0, 0, 0};
	size_t len = sizeof(req);
	int fd;

	hdr[6] = (uint8_t)(len >> 8);
	hdr[7] = (uint8_t)len;
	/* a request sent, the connection closed before the answer */
	fd = tu_unix_connect(g_path);
	CHECK(fd >= 0);
	raw_send(fd, hdr, sizeof(hdr));
	raw_send(fd, req, len);
	close(fd);
	/* half a request body, then gone */
	fd = tu_unix_connect(g_path);
	CHECK(fd >= 0);
	raw_send(fd, hdr, sizeof(hdr));
	raw_send(fd, req, len / 2);
	close(fd);
	/* the daemon frozen while a client gives up (leaseholdctl's timeout) */
	kill(A.pid, SIGSTOP);
	fd = tu_unix_connect(g_path); /* queued in the backlog */
	CHECK(fd >= 0);
	close(fd);
	kill(A.pid, SIGCONT);
	expect_healthy("clients leaving with their request unanswered");
}

static void test_burst_200(void)
{
	static const uint8_t garbage[] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1, 2};
	static const uint8_t lh_half[3] = {'L', 'H', 'C'};
	int kept[70];
	size_t n_kept = 0;

	for (int i = 0; i < 200; i++) {
		int fd = tu_unix_connect(g_path);
		CHECK(fd >= 0);
		switch (i % 3) {
		case 0:
			close(fd);
			break;
		case 1:
			raw_send(fd, garbage, sizeof(garbage));
			close(fd);
			break;
		default:
			raw_send(fd, lh_half, sizeof(lh_half));
			kept[n_kept++] = fd; /* left hanging */
			break;
		}
	}
	expect_healthy("a burst of 200 connections");
	for (size_t i = 0; i < n_kept; i++)
		close(kept[i]);
	expect_healthy("the burst's connections closed");
}

static void test_second_daemon_same_path(void)
{
	long from;
	char *log;

	host_install_plugin(&B, "1.0.0", "reconciler.so");
	memcpy(B.control, A.control, sizeof(B.control));
	from = host_log_size(&B);
	host_start(&B, harness_etcd_urls(g_etcd), HOST_ARGS);
	CHECK_OK(host_wait(&B, 15000));
	CHECK(B.exit_status != 0);
	log = host_log_since(&B, from);
	if (!strstr(log, "another leasehold serves")) {
		fprintf(stderr, "second daemon's log:\n%s\n", log);
		exit(1);
	}
	free(log);
	expect_healthy("a second daemon on the same path");
}

/* as_nobody - in a child with uid/gid 65534: leaseholdctl plugins against
 * A; returns its exit code, with its stderr in err. */
static int as_nobody(char *err, size_t err_len)
{
	int pe[2], status;
	ssize_t n;
	size_t got = 0;
	pid_t pid;
	const char *cli = built_binary("leaseholdctl");

	CHECK(pipe2(pe, O_CLOEXEC) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(pe[1], 2);
		dup2(pe[1], 1);
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(99);
		execl(cli, cli, "--control", A.control, "plugins", (char *)NULL);
		_exit(98);
	}
	close(pe[1]);
	while (got + 1 < err_len && (n = read(pe[0], err + got, err_len - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(pe[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) < 98);
	return WEXITSTATUS(status);
}

static void test_other_uid(void)
{
	char err[4096], dir[sizeof(g_path)], *slash;
	struct stat st;

	if (geteuid() != 0) {
		SKIP_CASE("needs root to run a client as uid 65534");
	}
	/* leaseholdctl itself must be reachable for uid 65534 */
	if (stat(built_binary("leaseholdctl"), &st) < 0 || !(st.st_mode & S_IXOTH)) {
		SKIP_CASE("the built leaseholdctl is not executable by others");
	}
	/* let uid 65534 reach the socket's directory (not the socket) */
	snprintf(dir, sizeof(dir), "%s", g_path);
	while ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		if (stat(dir, &st) == 0 && st.st_uid == 0)
			chmod(dir, (st.st_mode & 07777) | 0011);
		if (strcmp(dir, "/tmp") == 0)
			break;
	}
	/* the file is 0600: the kernel says no */
	CHECK_INT_EQ(as_nobody(err, sizeof(err)), 5);
	CHECK(strstr(err, "permission denied") != NULL);
	expect_healthy("a peer of another uid (permission denied)");
	/* with the file opened up, the daemon says no, and says so */
	CHECK(chmod(g_path, 0666) == 0);
	CHECK_INT_EQ(as_nobody(err, sizeof(err)), 6);
	if (!strstr(err, "refused by the daemon: uid 65534 may not use this daemon")) {
		fprintf(stderr, "stderr as uid 65534: %s\n", err);
		exit(1);
	}
	CHECK(chmod(g_path, 0600) == 0);
	expect_healthy("a peer of another uid (refused)");
}

/* ---- the host<->worker bus ------------------------------------------- */

static char g_worker[1024];
static const char *const ISO_ARGS[] = {
    "--prefix",	   "/lhhostile-bus", "--ttl", "2", "--reconcile-wait", "0", "--isolation",
    "process",	   "--worker",	     g_worker, "--log-level", "debug", NULL};

/* worker_of - the leasehold-worker child of daemon pid (0 if none) */
static pid_t worker_of(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	CHECK(d != NULL);
	while ((de = readdir(d))) {
		char path[300], buf[512];
		int fd, ppid = 0;
		ssize_t n;
		char *rp;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		rp = strrchr(buf, ')');
		if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != pid)
			continue;
		if (strstr(buf, "(leasehold-work"))
			found = (pid_t)strtol(de->d_name, NULL, 10);
	}
	closedir(d);
	return found;
}

/* plugins_dir - C's private dir for worker sockets (run/plugins.PID) */
static void plugins_dir(char *buf, size_t len)
{
	char run[700];
	DIR *d;
	struct dirent *de;

	snprintf(run, sizeof(run), "%s/run", C.dir);
	d = opendir(run);
	CHECK(d != NULL);
	buf[0] = '\0';
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "plugins.", 8) == 0)
			CHECK((size_t)snprintf(buf, len, "%s/%s", run, de->d_name) < len);
	closedir(d);
	CHECK(buf[0] != '\0');
}

/* drain_events - forget the creations ifd has queued so far. With nng
 * 1.5.2 the stray client breaks the listener it hits: the daemon then gives
 * that worker up after its attach deadline and creates one more socket, the
 * one the plugin leads with. Its creation is still queued when the next
 * round kills that worker; taken for "the next socket" it sends the stray to
 * the socket of the worker just killed (gone, or refusing, once the daemon
 * has reaped it), not to the restarted worker's. */
static void drain_events(int ifd)
{
	char raw[4096];
	while (read(ifd, raw, sizeof(raw)) > 0)
		;
	CHECK(errno == EAGAIN);
}

/* stray_on_next_socket - wait (inotify, deadline 10 s) for the next bus
 * socket created in dir and connect to it at once, before the worker can
 * finish its handshake; hang up (after half an SP header when half). */
static void stray_on_next_socket(int ifd, const char *dir, bool half)
{
	long deadline = now_ms() + 10000;
	for (;;) {
		union {
			struct inotify_event ev;
			char raw[4096];
		} u;
		struct pollfd p = {.fd = ifd, .events = POLLIN};
		long left = deadline - now_ms();
		ssize_t n;
		CHECK(left > 0);
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = read(ifd, u.raw, sizeof(u.raw));
		CHECK(n > 0);
		for (char *q = u.raw; q < u.raw + n;) {
			struct inotify_event *ev = (struct inotify_event *)(void *)q;
			size_t l = ev->len ? strlen(ev->name) : 0;
			q += sizeof(*ev) + ev->len;
			if (l < 5 || strcmp(ev->name + l - 5, ".sock") != 0)
				continue;
			char path[1024];
			int fd = -1;
			CHECK((size_t)snprintf(path, sizeof(path), "%s/%s", dir, ev->name) < 108);
			/* between bind() and listen() a connect is refused: retry
			 * until the deadline (a loaded machine can take a while
			 * from one to the other) */
			while ((fd = tu_unix_connect(path)) == -ECONNREFUSED && now_ms() < deadline)
				sched_yield();
			if (fd < 0)
				fprintf(stderr, "stray connect to %s: %s\n", path, strerror(-fd));
			CHECK(fd >= 0);
			fprintf(stderr, "bus: a stray client on %s\n", ev->name);
			if (half)
				CHECK(send(fd, "\0SP\0", 4, MSG_NOSIGNAL) == 4);
			close(fd);
			return;
		}
	}
}

/* wait_leading - until the plugin on C is leading with a worker other than
 * `not`; returns that worker's pid. */
static pid_t wait_leading(pid_t not, int timeout_ms, const char *what)
{
	long deadline = now_ms() + timeout_ms;
	for (;;) {
		pid_t w = worker_of(C.pid);
		struct json_object *p = w && w != not ? ctl_plugin_json(&C, "reconciler") : NULL;
		const char *st = p ? jstr(p, "state") : NULL;
		bool ok = st && strcmp(st, "leading") == 0;
		if (p)
			json_object_put(p);
		if (ok)
			return w;
		if (now_ms() >= deadline) {
			fprintf(stderr, "%s: the plugin did not lead again within %d ms\n", what,
				timeout_ms);
			host_dump_log(&C);
			exit(1);
		}
		poll(NULL, 0, 50); /* polling the CLI: it offers no event */
	}
}

static void test_bus_stray_client_during_worker_restart(void)
{
	char dir[900];
	int ifd;
	pid_t w;

	/* nng 1.5.2 never frees a listener broken by a stray client (what this
	 * test makes happen): LeakSanitizer must not count that against the
	 * daemon, which closes the socket as it should */
	static char supp[700], lsan[800];
	const char *env[] = {lsan, NULL};
	FILE *f;
	snprintf(supp, sizeof(supp), "%s/lsan-nng.supp", C.dir);
	f = fopen(supp, "w");
	CHECK(f != NULL);
	fputs("leak:libnng.so\n", f);
	CHECK(fclose(f) == 0);
	snprintf(lsan, sizeof(lsan), "LSAN_OPTIONS=suppressions=%s:print_suppressions=0", supp);

	snprintf(g_worker, sizeof(g_worker), "%s", built_binary("leasehold-worker"));
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	host_start_env(&C, harness_etcd_urls(g_etcd), ISO_ARGS, env);
	host_wait_control(&C, 20000);
	w = wait_leading(0, 20000, "start-up");
	plugins_dir(dir, sizeof(dir));
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	CHECK(ifd >= 0);
	CHECK(inotify_add_watch(ifd, dir, IN_CREATE) >= 0);
	for (int i = 0; i < 2; i++) {
		long t0 = now_ms();
		drain_events(ifd); /* only a socket made after the kill counts */
		CHECK(kill(w, SIGKILL) == 0);
		stray_on_next_socket(ifd, dir, i == 1);
		w = wait_leading(w, 30000, "a worker restart with a stray client on its bus socket");
		fprintf(stderr, "bus: the plugin led again %ld ms after its worker was killed\n",
			now_ms() - t0);
	}
	close(ifd);
	host_signal(&C, SIGTERM);
	CHECK_OK(host_wait(&C, 10000));
	if (C.exit_status != 0)
		host_dump_log(&C);
	CHECK_INT_EQ(C.exit_status, 0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	/* after the harness's own exit handler, so that it runs before the
	 * harness removes the directory that holds the daemons' logs */
	atexit(dump_on_failure);
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	host_setup(&C, harness_dir(g_etcd), "c");
	CHECK(strncmp(A.control, "ipc://", 6) == 0);
	memcpy(g_path, A.control + 6, strlen(A.control + 6) + 1);
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), HOST_ARGS);
	host_wait_control(&A, 20000);
	expect_healthy("start-up");

	RUN(test_connect_and_close);
	RUN(test_garbage_bytes);
	RUN(test_half_header_then_silence);
	RUN(test_client_leaves_unanswered);
	RUN(test_burst_200);
	RUN(test_second_daemon_same_path);
	RUN(test_other_uid);
	RUN(test_bus_stray_client_during_worker_restart);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 10000));
	CHECK_INT_EQ(A.exit_status, 0);
	g_done = true;
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
