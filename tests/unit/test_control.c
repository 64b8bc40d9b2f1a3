/* SPDX-License-Identifier: MIT */
/*
 * test_control.c - the control socket server and the leaseholdctl binary.
 *
 * The server runs in-process on a loop driven by its own thread, with test
 * control_ops returning fixed plugin data; the test thread plays the
 * clients: the built $LH_BUILDDIR/leaseholdctl as a subprocess,
 * control_client_call and raw sockets for hostile input and the burst, and a
 * forked child with another uid. Everything waits for events with deadlines; nothing sleeps.
 *
 * The roles ops keep the done() of a roles_set/roles_clear in S, so a test
 * decides when (and how) the asynchronous write completes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "testutil.h"
#include "control/control.h"
#include "control/control_client.h"
#include "control/control_codec.h"
#include "control/control_transport.h"
#include "control/control_wire.h"
#include "base/loop.h"

extern char **environ;

typedef Leasehold__Control__Response Response;

/* ---- the server, on a loop thread -------------------------------------- */

static struct {
	struct loop *loop;
	struct control *ctl;
	pthread_t thread;
	int callfd;
	struct loop_io *callio;
	pthread_mutex_t mtx;
	pthread_cond_t cond;
	void (*fn)(void *);
	void *fn_arg;
	bool fn_done;
	unsigned plugins_calls; /* under mtx */
	unsigned roles_calls;	/* under mtx: roles_set/roles_clear ops run */

	/* loop thread only (or via call_on_loop) */
	bool roles_ready;
	bool roles_gone;
	bool notify_in_op; /* ops call control_notify() like the daemon does */
	int reload_calls;
	bool reload_null;
	char reload_name[64];
	bool held_mode; /* "roles" plugin: held back by a role, no error at all */
	int roles_list_calls;
	bool roles_was_clear;
	char roles_node[256];
	char roles_joined[8192]; /* the roles of the last roles_set, "a,b" */
	size_t roles_n;
	control_done_fn roles_done; /* the pending write's completion, or NULL */
	void *roles_done_ctx;

	char dir[64];
	char path[128];
	char url[160];
	const char *cli;
} S;

static uint64_t now_ms(void)
{
	return loop_now() / LOOP_NS_PER_MS;
}

static struct timespec abs_deadline(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static size_t op_plugins(void *ud, struct control_plugin *out, size_t max)
{
	struct control_plugin p[3];
	size_t n = 0;

	(void)ud;
	memset(p, 0, sizeof(p));
	p[n].name = "reconciler";
	p[n].file = "reconciler.so";
	p[n].release = (struct release){1, 1, 0};
	p[n].has_release = true;
	p[n].state = "leading";
	p[n].leader = "node-a";
	p[n].ready = true;
	p[n].releases = (struct releases){{1, 0, 0}, {1, 1, 0}, 42, 3};
	p[n].status_present = true;
	p[n].status_state = "DONE";
	p[n].status_version = (struct release){1, 1, 0};
	p[n].status_min_compatible = (struct release){1, 0, 0};
	p[n].reconcile_count = 12;
	p[n].reconcile_last_ok = true;
	p[n].reconcile_last_at = 1700000000;
	p[n].fencing_token = 77;
	n++;
	if (!S.roles_gone) {
		p[n].name = "roles";
		p[n].file = "roles.so";
		p[n].release = (struct release){1, 0, 0};
		p[n].has_release = true;
		p[n].state = "standby";
		p[n].leader = "node-b";
		p[n].ready = S.roles_ready;
		p[n].releases = (struct releases){{1, 0, 0}, {2, 0, 0}, 43, 2};
		p[n].status_present = true;
		p[n].status_state = "WORKING";
		p[n].status_version = (struct release){1, 0, 0};
		p[n].status_min_compatible = (struct release){1, 0, 0};
		p[n].reconcile_last_error = "etcd: deadline exceeded";
		p[n].reconcile_last_at = 1700000100;
		p[n].held_back = "release 2.0.0 is present";
		if (S.held_mode) {
			p[n].reconcile_last_error = NULL;
			p[n].held_back = "needs role 'controller', not assigned to this node";
		}
		n++;
	}
	p[n].name = "broken";
	p[n].file = "broken.so";
	/* refused: nothing runs, so no release (JSON null, table "-") */
	p[n].state = "failed";
	p[n].error = "ABI major 2, host expects 1";
	n++;

	for (size_t i = 0; i < n && i < max; i++)
		out[i] = p[i];
	if (S.notify_in_op)
		control_notify(S.ctl); /* re-entrant: must be deferred, not recurse */
	pthread_mutex_lock(&S.mtx);
	S.plugins_calls++;
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.mtx);
	return n;
}

static int op_members(void *ud, const char *name, struct control_member *out, size_t max,
		      size_t *ret_total)
{
	static const struct control_member m[3] = {
	    {"node-a", {1, 1, 0}, true, true},
	    {"node-b", {1, 0, 0}, false, false},
	    {"node-c", {1, 1, 0}, false, true},
	};
	(void)ud;
	if (strcmp(name, "reconciler") != 0)
		return -ENOENT;
	for (size_t i = 0; i < 3 && i < max; i++)
		out[i] = m[i];
	*ret_total = 3;
	return 0;
}

static int op_reload(void *ud, const char *name, char *err, size_t err_len)
{
	(void)ud;
	control_notify(S.ctl); /* the daemon does this when an entry changes */
	S.reload_calls++;
	S.reload_null = name == NULL;
	snprintf(S.reload_name, sizeof(S.reload_name), "%s", name ? name : "");
	if (name && strcmp(name, "broken") == 0) {
		snprintf(err, err_len, "boom: ABI mismatch");
		return -EIO;
	}
	if (name && strcmp(name, "reconciler") != 0 && strcmp(name, "roles") != 0)
		return -ENOENT;
	return 0;
}

static const char *op_node_id(void *ud)
{
	(void)ud;
	return "node-a";
}

static const char *const node_a_roles[] = {"controller", "worker"};

static size_t op_roles_list(void *ud, struct control_role_entry *out, size_t max)
{
	const struct control_role_entry e[3] = {
	    {"node-a", node_a_roles, 2, NULL},
	    {"node-b", NULL, 0, NULL},
	    {"node-c", NULL, 0, "invalid role name (allowed: [a-z0-9_-], 1 to 63 characters)"},
	};
	(void)ud;
	for (size_t i = 0; i < 3 && i < max; i++)
		out[i] = e[i];
	S.roles_list_calls++;
	return 3;
}

/* roles_op - the test's roles_set/roles_clear. Node names pick a behaviour:
 * "now-fail" fails at once (-ENOTCONN), "daemon-says-no" is refused by the
 * "daemon" (-EINVAL), "sync" completes before returning, "sync-twice" too
 * but twice (the second must be ignored); anything else is held in S until
 * a test completes it. */
static int roles_op(bool clear, const char *node, const char *const *roles, size_t n,
		    control_done_fn done, void *done_ctx, char *err, size_t err_len)
{
	size_t pos = 0;
	int r = 0;

	S.roles_was_clear = clear;
	snprintf(S.roles_node, sizeof(S.roles_node), "%s", node);
	S.roles_n = n;
	S.roles_joined[0] = '\0';
	for (size_t i = 0; i < n && pos < sizeof(S.roles_joined); i++)
		pos += (size_t)snprintf(S.roles_joined + pos, sizeof(S.roles_joined) - pos, "%s%s",
					i ? "," : "", roles[i]);
	if (strcmp(node, "now-fail") == 0) {
		snprintf(err, err_len, "etcd: not connected");
		r = -ENOTCONN;
	} else if (strcmp(node, "daemon-says-no") == 0) {
		snprintf(err, err_len, "the daemon refuses node '%s'", node);
		r = -EINVAL;
	} else if (strcmp(node, "sync") == 0) {
		done(done_ctx, 0, NULL);
	} else if (strcmp(node, "sync-twice") == 0) {
		done(done_ctx, 0, NULL);
		done(done_ctx, -EIO, "a second completion");
	} else {
		CHECK(S.roles_done == NULL); /* one at a time in these tests */
		S.roles_done = done;
		S.roles_done_ctx = done_ctx;
	}
	pthread_mutex_lock(&S.mtx);
	S.roles_calls++;
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.mtx);
	return r;
}

static int op_roles_set(void *ud, const char *node, const char *const *roles, size_t n,
			bool force, control_done_fn done, void *done_ctx, char *err, size_t err_len)
{
	(void)ud;
	(void)force;
	return roles_op(false, node, roles, n, done, done_ctx, err, err_len);
}

static int op_roles_clear(void *ud, const char *node, control_done_fn done, void *done_ctx,
			  char *err, size_t err_len)
{
	(void)ud;
	return roles_op(true, node, NULL, 0, done, done_ctx, err, err_len);
}

static const struct control_ops ops = {
    .plugins = op_plugins,
    .members = op_members,
    .reload = op_reload,
    .node_id = op_node_id,
    .roles_list = op_roles_list,
    .roles_set = op_roles_set,
    .roles_clear = op_roles_clear,
};

/* a daemon without roles support (the roles ops are NULL) */
static const struct control_ops ops_noroles = {
    .plugins = op_plugins,
    .members = op_members,
    .reload = op_reload,
    .node_id = op_node_id,
};

static void on_call(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	uint64_t v;
	void (*fn)(void *);
	void *arg;
	(void)io;
	(void)events;
	(void)ud;
	if (read(fd, &v, sizeof(v)) < 0)
		return;
	pthread_mutex_lock(&S.mtx);
	fn = S.fn;
	arg = S.fn_arg;
	S.fn = NULL;
	pthread_mutex_unlock(&S.mtx);
	if (!fn)
		return;
	fn(arg);
	pthread_mutex_lock(&S.mtx);
	S.fn_done = true;
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.mtx);
}

/* call_on_loop - run fn(arg) on the loop thread and wait for it (10 s). */
static void call_on_loop(void (*fn)(void *), void *arg)
{
	struct timespec dl = abs_deadline(10000);
	uint64_t one = 1;

	pthread_mutex_lock(&S.mtx);
	S.fn = fn;
	S.fn_arg = arg;
	S.fn_done = false;
	pthread_mutex_unlock(&S.mtx);
	CHECK(write(S.callfd, &one, sizeof(one)) == sizeof(one));
	pthread_mutex_lock(&S.mtx);
	while (!S.fn_done)
		CHECK(pthread_cond_timedwait(&S.cond, &S.mtx, &dl) == 0);
	pthread_mutex_unlock(&S.mtx);
}

/* wait_calls - until *count (a counter of S, under S.mtx) is at least n
 * (10 s) */
static void wait_calls(const unsigned *count, unsigned n)
{
	struct timespec dl = abs_deadline(10000);
	pthread_mutex_lock(&S.mtx);
	while (*count < n)
		CHECK(pthread_cond_timedwait(&S.cond, &S.mtx, &dl) == 0);
	pthread_mutex_unlock(&S.mtx);
}

/* read_calls - *count (a counter of S) read under S.mtx */
static unsigned read_calls(const unsigned *count)
{
	pthread_mutex_lock(&S.mtx);
	unsigned n = *count;
	pthread_mutex_unlock(&S.mtx);
	return n;
}

/* the plugins op's runs, and the roles_set/roles_clear ops' runs */
static void wait_plugins_calls(unsigned n)
{
	wait_calls(&S.plugins_calls, n);
}

static void wait_roles_calls(unsigned n)
{
	wait_calls(&S.roles_calls, n);
}

static unsigned roles_calls(void)
{
	return read_calls(&S.roles_calls);
}

static unsigned plugins_calls(void)
{
	return read_calls(&S.plugins_calls);
}

static void *loop_thread(void *arg)
{
	(void)arg;
	loop_run(S.loop);
	return NULL;
}

static void quit_fn(void *arg)
{
	(void)arg;
	loop_quit(S.loop, 0);
}

static void free_ctl_fn(void *arg)
{
	struct control **c = arg;
	control_free(*c);
	*c = NULL;
}

static size_t waiting_result;
static void waiting_fn(void *arg)
{
	(void)arg;
	waiting_result = control_waiting(S.ctl);
}

static size_t waiting(void)
{
	call_on_loop(waiting_fn, NULL);
	return waiting_result;
}

static size_t pending_result;
static void pending_fn(void *arg)
{
	struct control *const *c = arg;
	pending_result = control_pending(*c);
}

/* pending - control_pending() of *c, read on the loop thread */
static size_t pending(struct control *const *c)
{
	call_on_loop(pending_fn, (void *)c);
	return pending_result;
}

struct completion {
	int err;
	const char *msg;
};

/* complete_fn - the "daemon" finishes the held roles write (loop thread) */
static void complete_fn(void *arg)
{
	const struct completion *x = arg;
	control_done_fn done = S.roles_done;
	void *ctx = S.roles_done_ctx;
	CHECK(done != NULL);
	S.roles_done = NULL;
	S.roles_done_ctx = NULL;
	done(ctx, x->err, x->msg);
}

/* forget_done_fn - drop a held completion without calling it (its server
 * was freed: calling it now is forbidden) */
static void forget_done_fn(void *arg)
{
	(void)arg;
	CHECK(S.roles_done != NULL);
	S.roles_done = NULL;
	S.roles_done_ctx = NULL;
}

static void set_held_mode_fn(void *arg)
{
	S.held_mode = *(bool *)arg;
}

static void set_notify_in_op_fn(void *arg)
{
	S.notify_in_op = *(bool *)arg;
}

static void set_ready_fn(void *arg)
{
	S.roles_ready = *(bool *)arg;
}

static void notify_fn(void *arg)
{
	(void)arg;
	control_notify(S.ctl);
}

static void flip_ready_and_notify_fn(void *arg)
{
	(void)arg;
	S.roles_ready = true;
	control_notify(S.ctl);
}

static void gone_and_notify_fn(void *arg)
{
	S.roles_gone = *(bool *)arg;
	control_notify(S.ctl);
}

static void server_start(void)
{
	char err[256] = "";
	const char *bd = getenv("LH_BUILDDIR");
	static char cli[4096];

	snprintf(cli, sizeof(cli), "%s/leaseholdctl", bd && bd[0] ? bd : ".");
	S.cli = cli;
	CHECK(access(S.cli, X_OK) == 0);
	pthread_mutex_init(&S.mtx, NULL);
	pthread_cond_init(&S.cond, NULL);
	snprintf(S.dir, sizeof(S.dir), "/tmp/lh-ctl-XXXXXX");
	CHECK(mkdtemp(S.dir) != NULL);
	snprintf(S.path, sizeof(S.path), "%s/control.sock", S.dir);
	snprintf(S.url, sizeof(S.url), "ipc://%s", S.path);
	CHECK_OK(loop_new(&S.loop));
	S.callfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(S.callfd >= 0);
	CHECK_OK(loop_io_add(S.loop, S.callfd, EPOLLIN, on_call, NULL, &S.callio));
	if (control_new(S.loop, S.url, &ops, NULL, &S.ctl, err, sizeof(err)) < 0) {
		fprintf(stderr, "control_new: %s\n", err);
		exit(1);
	}
	CHECK(pthread_create(&S.thread, NULL, loop_thread, NULL) == 0);
}

static void server_stop(void)
{
	call_on_loop(free_ctl_fn, &S.ctl);
	call_on_loop(quit_fn, NULL);
	pthread_join(S.thread, NULL);
	loop_io_free(S.callio);
	close(S.callfd);
	loop_free(S.loop);
	rmdir(S.dir);
}

/* ---- running leaseholdctl ---------------------------------------------- */

struct cli {
	pid_t pid;
	int out, err;
	uint64_t started_ms;
};

/* cli_start - spawn leaseholdctl with args (NULL-terminated); env_control
 * sets LEASEHOLD_CONTROL (else it is removed from the environment). */
static void cli_startv(struct cli *c, const char *env_control, const char *const *args)
{
	char *argv[96];
	char *envp[256];
	char envc[512];
	size_t n = 0, e = 0;
	int po[2], pe[2];
	posix_spawn_file_actions_t fa;

	argv[n++] = (char *)S.cli;
	for (size_t i = 0; args[i] && n < 95; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	for (char **v = environ; *v && e < 250; v++)
		if (strncmp(*v, "LEASEHOLD_CONTROL=", 18) != 0)
			envp[e++] = *v;
	if (env_control) {
		snprintf(envc, sizeof(envc), "LEASEHOLD_CONTROL=%s", env_control);
		envp[e++] = envc;
	}
	envp[e] = NULL;

	CHECK(pipe2(po, O_CLOEXEC) == 0);
	CHECK(pipe2(pe, O_CLOEXEC) == 0);
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, po[1], 1) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, pe[1], 2) == 0);
	CHECK(posix_spawn(&c->pid, S.cli, &fa, NULL, argv, envp) == 0);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	close(pe[1]);
	c->out = po[0];
	c->err = pe[0];
	c->started_ms = now_ms();
}

/* cli_finish - collect output and the exit code, within timeout_ms (else
 * the child is killed and the test fails). Caller frees both outputs. */
static int cli_finish(struct cli *c, int timeout_ms, char **ret_out, char **ret_err)
{
	char *buf[2] = {NULL, NULL};
	size_t len[2] = {0, 0};
	int fds[2] = {c->out, c->err};
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int status = 0;

	for (int i = 0; i < 2; i++) {
		buf[i] = calloc(1, 1);
		CHECK(buf[i]);
	}
	while (fds[0] >= 0 || fds[1] >= 0) {
		struct pollfd pfd[2];
		nfds_t k = 0;
		uint64_t now = now_ms();
		if (now >= deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, NULL, 0);
			fprintf(stderr, "leaseholdctl did not finish within %d ms\n", timeout_ms);
			exit(1);
		}
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				pfd[k++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
		int r = poll(pfd, k, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r >= 0);
		for (nfds_t j = 0; j < k; j++) {
			if (!pfd[j].revents)
				continue;
			int i = pfd[j].fd == fds[0] ? 0 : 1;
			char tmp[4096];
			ssize_t got = read(fds[i], tmp, sizeof(tmp));
			if (got <= 0) {
				close(fds[i]);
				fds[i] = -1;
				continue;
			}
			char *nb = realloc(buf[i], len[i] + (size_t)got + 1);
			CHECK(nb);
			buf[i] = nb;
			memcpy(buf[i] + len[i], tmp, (size_t)got);
			len[i] += (size_t)got;
			buf[i][len[i]] = '\0';
		}
	}
	CHECK(waitpid(c->pid, &status, 0) == c->pid);
	if (ret_out)
		*ret_out = buf[0];
	else
		free(buf[0]);
	if (ret_err)
		*ret_err = buf[1];
	else
		free(buf[1]);
	if (!WIFEXITED(status)) {
		fprintf(stderr, "leaseholdctl died (status %d)\n", status);
		exit(1);
	}
	return WEXITSTATUS(status);
}

/* run - leaseholdctl --control S.url ARGS...; returns the exit code. */
static int run(char **out, char **err, ...)
{
	const char *args[32];
	size_t n = 0;
	va_list ap;
	struct cli c;

	args[n++] = "--control";
	args[n++] = S.url;
	va_start(ap, err);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 31;)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	cli_startv(&c, NULL, args);
	return cli_finish(&c, 20000, out, err);
}

#define CHECK_CONTAINS(hay, needle)                                                                \
	do {                                                                                       \
		if (!strstr((hay), (needle))) {                                                    \
			fprintf(stderr, "%s:%d: expected to find \"%s\" in:\n%s\n", __FILE__,      \
				__LINE__, (needle), (hay));                                        \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* ---- raw clients -------------------------------------------------------- */

/* raw_call_at - send bytes as one frame to the socket at path, wait up to
 * 10 s for a reply; returns the decoded reply (caller frees) or exits. */
static Response *raw_call_at(const char *path, const void *buf, size_t len)
{
	uint8_t *rep = NULL;
	size_t rlen = 0;
	Response *r = NULL;
	const char *why = "";
	int rc = control_client_call(path, buf, len, 10000, CONTROL_MAX_REPLY, &rep, &rlen);

	if (rc < 0) {
		fprintf(stderr, "control call: %s\n", strerror(-rc));
		exit(1);
	}
	if (control_codec_response_decode(rep, rlen, &r, &why) < 0) {
		fprintf(stderr, "reply: %s\n", why);
		exit(1);
	}
	free(rep);
	return r;
}

static Response *raw_call(const void *buf, size_t len)
{
	return raw_call_at(S.path, buf, len);
}

/* raw_connect - a connected stream socket to path (exits on failure). */
static int raw_connect(const char *path)
{
	int fd = tu_unix_connect(path);
	CHECK(fd >= 0);
	return fd;
}

/* raw_send_frame - buf as one frame on fd. */
static void raw_send_frame(int fd, const void *buf, size_t len)
{
	uint8_t hdr[CONTROL_WIRE_HEADER];
	control_wire_header(hdr, (uint32_t)len);
	CHECK(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) == (ssize_t)sizeof(hdr));
	CHECK(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
}

/* raw_closed_unanswered - within ms, the server closes fd without sending
 * a byte. */
static bool raw_closed_unanswered(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b;
	if (poll(&p, 1, ms) != 1)
		return false;
	ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static Response *raw_request(Leasehold__Control__Kind kind, const char *name, uint32_t timeout_ms)
{
	uint8_t *buf;
	size_t len;
	Response *r;
	CHECK_OK(control_codec_request_encode(kind, name, timeout_ms, &buf, &len));
	r = raw_call(buf, len);
	free(buf);
	return r;
}

static void expect_code(Response *r, Leasehold__Control__Code code)
{
	CHECK_INT_EQ(r->code, code);
	if (code != LEASEHOLD__CONTROL__CODE__CODE_OK)
		CHECK(r->message[0] != '\0');
	leasehold__control__response__free_unpacked(r, NULL);
}

static void expect_serving(void)
{
	Response *r = raw_request(LEASEHOLD__CONTROL__KIND__KIND_PLUGINS, NULL, 0);
	CHECK_INT_EQ(r->code, LEASEHOLD__CONTROL__CODE__CODE_OK);
	CHECK_INT_EQ(r->n_plugins, 3);
	CHECK_STR_EQ(r->node, "node-a");
	CHECK_STR_EQ(r->daemon_version, PACKAGE_VERSION);
	leasehold__control__response__free_unpacked(r, NULL);
}

/* ---- tests: socket ------------------------------------------------------ */

static void test_socket_file_mode_0600(void)
{
	struct stat st;
	CHECK(lstat(S.path, &st) == 0);
	CHECK(S_ISSOCK(st.st_mode));
	CHECK_INT_EQ(st.st_mode & 07777, 0600);
	CHECK_INT_EQ(st.st_uid, geteuid());
}

/* ---- tests: leaseholdctl ------------------------------------------------ */

static const char expected_table[] =
    "+ Node: node-a "
    "--------+---------+--------+-------+--------------+---------------+------------+--------------"
    "---------------+\n"
    "| NAME       | RELEASE | STATE   | LEADER | READY | MEMBERS      | STATUS        | RECONCILES "
    "| LAST ERROR                  |\n"
    "+------------+---------+---------+--------+-------+--------------+---------------+------------"
    "+-----------------------------+\n"
    "| reconciler | 1.1.0   | leading | node-a | yes   | 1.0.0..1.1.0 | DONE 1.1.0    |         12 "
    "| -                           |\n"
    "| roles      | 1.0.0   | standby | node-b | no    | 1.0.0..2.0.0 | WORKING 1.0.0 |          0 "
    "| etcd: deadline exceeded     |\n"
    "| broken     | -       | failed  | -      | no    | -            | -             |          0 "
    "| ABI major 2, host expects 1 |\n"
    "+------------+---------+---------+--------+-------+--------------+---------------+------------"
    "+-----------------------------+\n"
    "\n"
    "+ Nodes -----+--------+---------+--------+-------------+-------+-------+----------------+------"
    "-----------------------------+-------+\n"
    "| PLUGIN     | NODE   | RELEASE | LEADER | CAMPAIGNING | STATE | READY | LAST RECONCILE | "
    "REASON                            | LOCAL |\n"
    "+------------+--------+---------+--------+-------------+-------+-------+----------------+------"
    "-----------------------------+-------+\n"
    "| reconciler | node-a | 1.1.0   | yes    | yes         | down  | -     | -              | no "
    "state record (no live session) |       |\n"
    "| reconciler | node-b | 1.0.0   | no     | no          | down  | -     | -              | no "
    "state record (no live session) |       |\n"
    "| reconciler | node-c | 1.1.0   | no     | yes         | down  | -     | -              | no "
    "state record (no live session) |       |\n"
    "+------------+--------+---------+--------+-------------+-------+-------+----------------+------"
    "-----------------------------+-------+\n";

static void test_cli_plugins_table(void)
{
	char *out, *err;
	CHECK_INT_EQ(run(&out, &err, "plugins", NULL), 0);
	if (strcmp(out, expected_table) != 0) {
		fprintf(stderr, "table differs; got:\n%s\nexpected:\n%s", out, expected_table);
		exit(1);
	}
	CHECK_STR_EQ(err, "");
	free(out);
	free(err);
}

static json_object *jget(json_object *o, const char *key)
{
	json_object *v = NULL;
	if (!json_object_object_get_ex(o, key, &v)) {
		fprintf(stderr, "missing JSON key '%s' in %s\n", key,
			json_object_to_json_string(o));
		exit(1);
	}
	return v; /* may be NULL for a JSON null */
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v = jget(o, key);
	CHECK(v && json_object_is_type(v, json_type_string));
	return json_object_get_string(v);
}

static void jnull(json_object *o, const char *key)
{
	CHECK(jget(o, key) == NULL);
}

static int64_t jint(json_object *o, const char *key)
{
	json_object *v = jget(o, key);
	CHECK(v && json_object_is_type(v, json_type_int));
	return json_object_get_int64(v);
}

static bool jbool(json_object *o, const char *key)
{
	json_object *v = jget(o, key);
	CHECK(v && json_object_is_type(v, json_type_boolean));
	return json_object_get_boolean(v);
}

static void check_reconciler_json(json_object *p)
{
	json_object *rs, *st, *rc;
	CHECK_STR_EQ(jstr(p, "name"), "reconciler");
	CHECK_STR_EQ(jstr(p, "file"), "reconciler.so");
	CHECK_STR_EQ(jstr(p, "release"), "1.1.0");
	CHECK_STR_EQ(jstr(p, "state"), "leading");
	CHECK_STR_EQ(jstr(p, "leader"), "node-a");
	CHECK(jbool(p, "ready"));
	rs = jget(p, "releases");
	CHECK_STR_EQ(jstr(rs, "min"), "1.0.0");
	CHECK_STR_EQ(jstr(rs, "max"), "1.1.0");
	CHECK_INT_EQ(jint(rs, "revision"), 42);
	CHECK_INT_EQ(jint(rs, "members"), 3);
	st = jget(p, "status");
	CHECK(st);
	CHECK_STR_EQ(jstr(st, "state"), "DONE");
	CHECK_STR_EQ(jstr(st, "version"), "1.1.0");
	CHECK_STR_EQ(jstr(st, "minimum_compatible_release"), "1.0.0");
	rc = jget(p, "reconcile");
	CHECK_INT_EQ(jint(rc, "count"), 12);
	CHECK(jbool(rc, "last_ok"));
	jnull(rc, "last_error");
	CHECK_STR_EQ(jstr(rc, "last_at"), "2023-11-14T22:13:20Z");
	jnull(p, "error");
	jnull(p, "held_back");
	CHECK_INT_EQ(jint(p, "fencing_token"), 77);
}

static void test_cli_plugins_json(void)
{
	char *out, *err;
	json_object *a, *p, *rs, *st, *rc;

	CHECK_INT_EQ(run(&out, &err, "plugins", "--json", NULL), 0);
	a = json_tokener_parse(out);
	CHECK(a && json_object_is_type(a, json_type_array));
	CHECK_INT_EQ(json_object_array_length(a), 3);

	check_reconciler_json(json_object_array_get_idx(a, 0));

	p = json_object_array_get_idx(a, 1);
	CHECK_STR_EQ(jstr(p, "name"), "roles");
	CHECK_STR_EQ(jstr(p, "file"), "roles.so");
	CHECK_STR_EQ(jstr(p, "release"), "1.0.0");
	CHECK_STR_EQ(jstr(p, "state"), "standby");
	CHECK_STR_EQ(jstr(p, "leader"), "node-b");
	CHECK(!jbool(p, "ready"));
	rs = jget(p, "releases");
	CHECK_STR_EQ(jstr(rs, "min"), "1.0.0");
	CHECK_STR_EQ(jstr(rs, "max"), "2.0.0");
	CHECK_INT_EQ(jint(rs, "revision"), 43);
	st = jget(p, "status");
	CHECK_STR_EQ(jstr(st, "state"), "WORKING");
	CHECK_STR_EQ(jstr(st, "version"), "1.0.0");
	CHECK_STR_EQ(jstr(st, "minimum_compatible_release"), "1.0.0");
	rc = jget(p, "reconcile");
	CHECK_INT_EQ(jint(rc, "count"), 0);
	CHECK(!jbool(rc, "last_ok"));
	CHECK_STR_EQ(jstr(rc, "last_error"), "etcd: deadline exceeded");
	CHECK_STR_EQ(jstr(rc, "last_at"), "2023-11-14T22:15:00Z");
	jnull(p, "error");
	CHECK_STR_EQ(jstr(p, "held_back"), "release 2.0.0 is present");

	p = json_object_array_get_idx(a, 2);
	CHECK_STR_EQ(jstr(p, "name"), "broken");
	CHECK_STR_EQ(jstr(p, "state"), "failed");
	jnull(p, "release");
	jnull(p, "leader");
	CHECK(!jbool(p, "ready"));
	rs = jget(p, "releases");
	jnull(rs, "min");
	jnull(rs, "max");
	CHECK_INT_EQ(jint(rs, "members"), 0);
	jnull(p, "status");
	rc = jget(p, "reconcile");
	jnull(rc, "last_error");
	jnull(rc, "last_at");
	CHECK_STR_EQ(jstr(p, "error"), "ABI major 2, host expects 1");

	json_object_put(a);
	free(out);
	free(err);
}

/* the node table under its title line, as status and members print it for
 * the fake cluster (three nodes, none with a live session) */
#define NODE_ROWS                                                                                  \
	"| NODE   | RELEASE | LEADER | CAMPAIGNING | STATE | READY | LAST RECONCILE | REASON                            | LOCAL |\n" \
	"+--------+---------+--------+-------------+-------+-------+----------------+-----------------------------------+-------+\n" \
	"| node-a | 1.1.0   | yes    | yes         | down  | -     | -              | no state record (no live session) |       |\n" \
	"| node-b | 1.0.0   | no     | no          | down  | -     | -              | no state record (no live session) |       |\n" \
	"| node-c | 1.1.0   | no     | yes         | down  | -     | -              | no state record (no live session) |       |\n" \
	"+--------+---------+--------+-------------+-------+-------+----------------+-----------------------------------+-------+\n"

static void test_cli_status(void)
{
	char *out, *err;
	json_object *o;

	CHECK_INT_EQ(run(&out, &err, "status", "reconciler", NULL), 0);
	CHECK_STR_EQ(out, "name:          reconciler\n"
			  "node:          node-a\n"
			  "file:          reconciler.so\n"
			  "release:       1.1.0\n"
			  "state:         leading\n"
			  "leader:        node-a\n"
			  "ready:         yes\n"
			  "members:       3 (1.0.0..1.1.0, revision 42)\n"
			  "status:        DONE 1.1.0 (minimum compatible release 1.0.0)\n"
			  "reconciles:    12 (last ok at 2023-11-14T22:13:20Z)\n"
			  "last error:    -\n"
			  "error:         -\n"
			  "held back:     -\n"
			  "fencing token: 77\n"
			  "+ Nodes -+---------+--------+-------------+-------+-------+----------------+-----------------------------------+-------+\n"
			  NODE_ROWS);
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "status", "reconciler", "--json", NULL), 0);
	o = json_tokener_parse(out);
	CHECK(o && json_object_is_type(o, json_type_object));
	check_reconciler_json(o);
	json_object_put(o);
	free(out);
	free(err);
}

static void test_cli_members(void)
{
	char *out, *err;
	json_object *a, *m;

	CHECK_INT_EQ(run(&out, &err, "members", "reconciler", NULL), 0);
	CHECK_STR_EQ(out, "+ Node: node-a ----+--------+-------------+-------+-------+----------------+-----------------------------------+-------+\n"
			  NODE_ROWS);
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "members", "reconciler", "--json", NULL), 0);
	a = json_tokener_parse(out);
	CHECK(a && json_object_is_type(a, json_type_array));
	CHECK_INT_EQ(json_object_array_length(a), 3);
	m = json_object_array_get_idx(a, 0);
	CHECK_STR_EQ(jstr(m, "node"), "node-a");
	CHECK_STR_EQ(jstr(m, "release"), "1.1.0");
	CHECK(jbool(m, "leader"));
	m = json_object_array_get_idx(a, 1);
	CHECK_STR_EQ(jstr(m, "node"), "node-b");
	CHECK_STR_EQ(jstr(m, "release"), "1.0.0");
	CHECK(!jbool(m, "leader"));
	CHECK(!jbool(m, "campaigning"));
	m = json_object_array_get_idx(a, 2);
	CHECK(jbool(m, "campaigning"));
	CHECK_STR_EQ(jstr(m, "node"), "node-c");
	CHECK(!jbool(m, "leader"));
	json_object_put(a);
	free(out);
	free(err);
}

static void test_cli_unknown_plugin_exit_2(void)
{
	char *out, *err;

	CHECK_INT_EQ(run(&out, &err, "status", "nope", NULL), 2);
	CHECK_STR_EQ(out, "");
	CHECK_CONTAINS(err, "no plugin named 'nope'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "members", "nope", "--json", NULL), 2);
	CHECK_STR_EQ(out, "");
	CHECK_CONTAINS(err, "no plugin named 'nope'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "nope", "--timeout", "5", NULL), 2);
	CHECK_CONTAINS(err, "no plugin named 'nope'");
	free(out);
	free(err);
}

static void test_cli_wait_ready_already_ready(void)
{
	char *out, *err;
	uint64_t t0 = now_ms();
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "reconciler", NULL), 0);
	CHECK(now_ms() - t0 < 10000);
	CHECK_STR_EQ(out, "reconciler is ready\n");
	free(out);
	free(err);
}

/* The CLI's request is parked in the server; only control_notify after the
 * readiness flip answers it, while other requests keep being served. */
static void test_cli_wait_ready_long_poll(void)
{
	const char *args[] = {"--control", S.url, "wait-ready", "roles", "--timeout", "20", NULL};
	bool f = false, t = true;
	struct cli c;
	char *out, *err;
	unsigned calls;
	uint64_t flipped;

	call_on_loop(set_ready_fn, &f);
	call_on_loop(set_notify_in_op_fn, &t);
	calls = plugins_calls();
	cli_startv(&c, NULL, args);
	wait_plugins_calls(calls + 1); /* the server looked at "roles" and parked */
	CHECK_INT_EQ(waiting(), 1);

	/* another request is served while one is parked */
	CHECK_INT_EQ(run(&out, &err, "plugins", "--json", NULL), 0);
	free(out);
	free(err);
	CHECK_INT_EQ(waiting(), 1);

	/* a notify without a change answers nothing */
	call_on_loop(notify_fn, NULL);
	CHECK_INT_EQ(waiting(), 1);
	CHECK_INT_EQ(waitpid(c.pid, NULL, WNOHANG), 0);

	flipped = now_ms();
	call_on_loop(flip_ready_and_notify_fn, NULL);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 0);
	CHECK(now_ms() - flipped < 10000); /* well before the 20 s timeout */
	CHECK_STR_EQ(out, "roles is ready\n");
	CHECK_INT_EQ(waiting(), 0);
	free(out);
	free(err);
	call_on_loop(set_ready_fn, &f);
	call_on_loop(set_notify_in_op_fn, &f);
}

static void test_cli_wait_ready_timeout_exit_1(void)
{
	char *out, *err;
	uint64_t t0 = now_ms();

	CHECK_INT_EQ(run(&out, &err, "wait-ready", "roles", "--timeout", "0.3", NULL), 1);
	CHECK(now_ms() - t0 >= 300);
	CHECK_CONTAINS(err, "not ready");
	CHECK_INT_EQ(waiting(), 0);
	free(out);
	free(err);
	/* 0 = check once */
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "roles", "--timeout", "0", NULL), 1);
	free(out);
	free(err);
}

/* A plugin that disappears while waited for ends the wait with exit 2. */
static void test_cli_wait_ready_plugin_removed(void)
{
	const char *args[] = {"--control", S.url, "wait-ready", "roles", "--timeout", "20", NULL};
	bool gone = true, back = false;
	struct cli c;
	char *out, *err;
	unsigned calls = plugins_calls();

	cli_startv(&c, NULL, args);
	wait_plugins_calls(calls + 1);
	CHECK_INT_EQ(waiting(), 1);
	call_on_loop(gone_and_notify_fn, &gone);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 2);
	CHECK_CONTAINS(err, "went away");
	free(out);
	free(err);
	call_on_loop(gone_and_notify_fn, &back);
}

static void test_cli_reload_calls_op(void)
{
	char *out, *err;

	CHECK_INT_EQ(run(&out, &err, "reload", "reconciler", NULL), 0);
	CHECK_STR_EQ(out, "reload requested: reconciler\n");
	CHECK_INT_EQ(S.reload_calls, 1);
	CHECK(!S.reload_null);
	CHECK_STR_EQ(S.reload_name, "reconciler");
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "reload", NULL), 0);
	CHECK_INT_EQ(S.reload_calls, 2);
	CHECK(S.reload_null);
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "reload", "broken", NULL), 1);
	CHECK_CONTAINS(err, "boom: ABI mismatch");
	CHECK_STR_EQ(S.reload_name, "broken");
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "reload", "nope", NULL), 2);
	CHECK_CONTAINS(err, "no plugin named 'nope'");
	CHECK_INT_EQ(S.reload_calls, 4);
	free(out);
	free(err);
}

static void test_cli_version(void)
{
	char *out, *err;
	CHECK_INT_EQ(run(&out, &err, "version", NULL), 0);
	CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\nleasehold " PACKAGE_VERSION
			  " (node node-a, protocol 1)\n");
	free(out);
	free(err);
}

static void test_cli_env_control(void)
{
	const char *args[] = {"plugins", "--json", NULL};
	char missing[256];
	struct cli c;
	char *out, *err;

	cli_startv(&c, S.url, args);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 0);
	CHECK(out[0] == '[');
	free(out);
	free(err);

	snprintf(missing, sizeof(missing), "ipc://%s/other.sock", S.dir);
	cli_startv(&c, missing, args);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 3);
	CHECK_CONTAINS(err, missing);
	free(out);
	free(err);
}

/* Every reason the daemon cannot be asked has its own message and exit
 * code (3 no socket file, 4 stale socket, 7 no answer; 5 and 6 need another
 * uid: tests/e2e/test_control_hostile.c). */
static void test_cli_daemon_unreachable_exit_codes(void)
{
	char url[256], path[100], expect[512];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *args[] = {"--control", url, "plugins", NULL};
	struct cli c;
	char *out, *err;
	int fd;

	/* no socket file at all */
	snprintf(url, sizeof(url), "ipc://%s/nope.sock", S.dir);
	cli_startv(&c, NULL, args);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 3);
	snprintf(expect, sizeof(expect),
		 "leaseholdctl: cannot reach leasehold at %s: no such socket file: is the daemon "
		 "running?\n",
		 url);
	CHECK_STR_EQ(err, expect);
	CHECK_STR_EQ(out, "");
	free(out);
	free(err);

	/* version: the client's line all the same */
	{
		const char *v[] = {"--control", url, "version", NULL};
		cli_startv(&c, NULL, v);
		CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 3);
		CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\n");
		CHECK_CONTAINS(err, "no such socket file");
		free(out);
		free(err);
	}

	/* a stale socket file nobody listens on */
	snprintf(path, sizeof(path), "%s/stale.sock", S.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	snprintf(url, sizeof(url), "ipc://%s", path);
	cli_startv(&c, NULL, args);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 4);
	snprintf(expect, sizeof(expect),
		 "leaseholdctl: cannot reach leasehold at %s: connection refused: a stale socket "
		 "file (the daemon that made it is gone): is the daemon running?\n",
		 url);
	CHECK_STR_EQ(err, expect);
	free(out);
	free(err);
	/* wait-ready too, and a plain path names the same socket */
	{
		const char *w[] = {"--control", path, "wait-ready", "x", NULL};
		cli_startv(&c, NULL, w);
		CHECK_INT_EQ(cli_finish(&c, 20000, NULL, &err), 4);
		CHECK_CONTAINS(err, "connection refused");
		free(err);
	}
	unlink(path);

	/* something else than a socket */
	snprintf(path, sizeof(path), "%s/plain-file", S.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(url, sizeof(url), "ipc://%s", path);
	cli_startv(&c, NULL, args);
	CHECK_INT_EQ(cli_finish(&c, 20000, NULL, &err), 2);
	CHECK_CONTAINS(err, "is not a socket");
	free(err);
	unlink(path);

	/* a listener that never answers (a frozen daemon): exit 7 after the
	 * deadline (wait-ready --timeout 0: the 5 s margin) */
	snprintf(path, sizeof(path), "%s/frozen.sock", S.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(fd, 8) == 0);
	{
		const char *w[] = {"--control", path, "wait-ready", "x", "--timeout", "0", NULL};
		cli_startv(&c, NULL, w);
		CHECK_INT_EQ(cli_finish(&c, 20000, NULL, &err), 7);
		CHECK_CONTAINS(err, "no answer from leasehold at");
		CHECK_CONTAINS(err, "within 5.0 s");
		free(err);
	}
	close(fd);
	unlink(path);
}

static void test_cli_usage_and_help(void)
{
	char *out, *err;
	struct cli c;
	const char *none[] = {NULL};

	cli_startv(&c, NULL, none);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 2);
	CHECK_CONTAINS(err, "Usage: leaseholdctl");
	CHECK_STR_EQ(out, "");
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "frobnicate", NULL), 2);
	CHECK_CONTAINS(err, "unknown command 'frobnicate'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "status", NULL), 2);
	CHECK_CONTAINS(err, "Usage: leaseholdctl [--control URL] status NAME");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "plugins", "extra", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "plugins", "--bogus", NULL), 2);
	CHECK_CONTAINS(err, "unknown option '--bogus'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "reload", "--json", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "roles", "--timeout", "abc", NULL), 2);
	CHECK_CONTAINS(err, "invalid --timeout");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "roles", "--timeout", "-1", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "wait-ready", "roles", "--timeout", NULL), 2);
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "--help", NULL), 0);
	CHECK_CONTAINS(out, "Exit codes:");
	CHECK_CONTAINS(out, "wait-ready NAME [--timeout DUR]");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "help", NULL), 0);
	CHECK_CONTAINS(out, "Exit codes:");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "help", "members", NULL), 0);
	CHECK_CONTAINS(out, "members NAME [-o table|wide|json|yaml] [--no-headers] [-w]");
	free(out);
	free(err);
	static const char *const cmds[] = {"plugins",	 "status", "members",
					   "wait-ready", "reload", "version"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		CHECK_INT_EQ(run(&out, &err, cmds[i], "--help", NULL), 0);
		CHECK_CONTAINS(out, "Usage: leaseholdctl [--control URL] ");
		CHECK_CONTAINS(out, cmds[i]);
		CHECK_CONTAINS(out, "Exit codes");
		free(out);
		free(err);
		CHECK_INT_EQ(run(&out, &err, cmds[i], "--version", NULL), 0);
		CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\n");
		free(out);
		free(err);
	}
	CHECK_INT_EQ(run(&out, &err, "--version", NULL), 0);
	CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\n");
	free(out);
	free(err);
}

/* ---- tests: roles ------------------------------------------------------- */

static const char expected_roles_table[] =
    "+ Node: node-a --------------+-------------------------------------------------------------+\n"
    "| NODE   | ROLES             | ERROR                                                       |\n"
    "+--------+-------------------+-------------------------------------------------------------+\n"
    "| node-a | controller,worker | -                                                           |\n"
    "| node-b | -                 | -                                                           |\n"
    "| node-c | -                 | invalid role name (allowed: [a-z0-9_-], 1 to 63 characters) |\n"
    "+--------+-------------------+-------------------------------------------------------------+"
    "\n";

static void test_cli_roles_list_table(void)
{
	char *out, *err;
	CHECK_INT_EQ(run(&out, &err, "roles", "list", NULL), 0);
	if (strcmp(out, expected_roles_table) != 0) {
		fprintf(stderr, "roles table differs; got:\n%s\nexpected:\n%s", out,
			expected_roles_table);
		exit(1);
	}
	CHECK_STR_EQ(err, "");
	free(out);
	free(err);
}

static void test_cli_roles_list_json(void)
{
	char *out, *err;
	json_object *a, *e, *r;

	CHECK_INT_EQ(run(&out, &err, "roles", "list", "--json", NULL), 0);
	CHECK_STR_EQ(err, "");
	a = json_tokener_parse(out);
	CHECK(a && json_object_is_type(a, json_type_array));
	CHECK_INT_EQ(json_object_array_length(a), 3);

	e = json_object_array_get_idx(a, 0);
	CHECK_INT_EQ(json_object_object_length(e), 3);
	CHECK_STR_EQ(jstr(e, "node"), "node-a");
	r = jget(e, "roles");
	CHECK(r && json_object_is_type(r, json_type_array));
	CHECK_INT_EQ(json_object_array_length(r), 2);
	CHECK_STR_EQ(json_object_get_string(json_object_array_get_idx(r, 0)), "controller");
	CHECK_STR_EQ(json_object_get_string(json_object_array_get_idx(r, 1)), "worker");
	jnull(e, "error");

	e = json_object_array_get_idx(a, 1);
	CHECK_STR_EQ(jstr(e, "node"), "node-b");
	r = jget(e, "roles");
	CHECK(r && json_object_is_type(r, json_type_array));
	CHECK_INT_EQ(json_object_array_length(r), 0);
	jnull(e, "error");

	e = json_object_array_get_idx(a, 2);
	CHECK_STR_EQ(jstr(e, "node"), "node-c");
	r = jget(e, "roles");
	CHECK(r && json_object_is_type(r, json_type_array));
	CHECK_INT_EQ(json_object_array_length(r), 0);
	CHECK_STR_EQ(jstr(e, "error"),
		     "invalid role name (allowed: [a-z0-9_-], 1 to 63 characters)");
	json_object_put(a);
	free(out);
	free(err);
}

/* The reply to roles set comes only after the op's done(): while the test
 * holds the completion, the CLI keeps waiting and the server keeps serving. */
static void test_cli_roles_set_waits_for_done(void)
{
	const char *args[] = {"--control", S.url,	 "roles",  "set",
			      "node-b",	   "controller", "worker", NULL};
	struct completion ok = {0, NULL};
	unsigned calls = roles_calls();
	struct cli c;
	char *out, *err;

	cli_startv(&c, NULL, args);
	wait_roles_calls(calls + 1);
	CHECK(!S.roles_was_clear);
	CHECK_STR_EQ(S.roles_node, "node-b");
	CHECK_INT_EQ(S.roles_n, 2);
	CHECK_STR_EQ(S.roles_joined, "controller,worker");
	CHECK_INT_EQ(pending(&S.ctl), 1);

	/* other requests are served meanwhile; the CLI still waits */
	CHECK_INT_EQ(run(&out, &err, "roles", "list", NULL), 0);
	free(out);
	free(err);
	expect_serving();
	CHECK_INT_EQ(waitpid(c.pid, NULL, WNOHANG), 0);
	CHECK_INT_EQ(pending(&S.ctl), 1);

	call_on_loop(complete_fn, &ok);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 0);
	CHECK_STR_EQ(out, "node node-b: roles set to controller,worker\n");
	CHECK_STR_EQ(err, "");
	CHECK_INT_EQ(pending(&S.ctl), 0);
	free(out);
	free(err);
	expect_serving();
}

static void test_cli_roles_set_empty_set(void)
{
	const char *args[] = {"--control", S.url, "roles", "set", "node-b", NULL};
	struct completion ok = {0, NULL};
	unsigned calls = roles_calls();
	struct cli c;
	char *out, *err;

	cli_startv(&c, NULL, args);
	wait_roles_calls(calls + 1);
	CHECK(!S.roles_was_clear);
	CHECK_STR_EQ(S.roles_node, "node-b");
	CHECK_INT_EQ(S.roles_n, 0);
	CHECK_INT_EQ(waitpid(c.pid, NULL, WNOHANG), 0);
	call_on_loop(complete_fn, &ok);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 0);
	CHECK_STR_EQ(out, "node node-b: roles set to (none)\n");
	CHECK_CONTAINS(err, "note: no ROLE given");
	free(out);
	free(err);
}

static void test_cli_roles_clear_waits_for_done(void)
{
	const char *args[] = {"--control", S.url, "roles", "clear", "node-c", NULL};
	struct completion ok = {0, NULL};
	unsigned calls = roles_calls();
	struct cli c;
	char *out, *err;

	cli_startv(&c, NULL, args);
	wait_roles_calls(calls + 1);
	CHECK(S.roles_was_clear);
	CHECK_STR_EQ(S.roles_node, "node-c");
	CHECK_INT_EQ(pending(&S.ctl), 1);
	expect_serving();
	CHECK_INT_EQ(waitpid(c.pid, NULL, WNOHANG), 0);
	call_on_loop(complete_fn, &ok);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 0);
	CHECK_STR_EQ(out, "node node-c: roles record deleted\n");
	CHECK_STR_EQ(err, "");
	CHECK_INT_EQ(pending(&S.ctl), 0);
	free(out);
	free(err);
}

static void test_cli_roles_write_failed_exit_1(void)
{
	const char *set[] = {"--control", S.url, "roles", "set", "node-b", "worker", NULL};
	const char *clr[] = {"--control", S.url, "roles", "clear", "node-b", NULL};
	struct completion fail = {-ETIMEDOUT, "etcd: deadline exceeded"};
	struct completion fail_nomsg = {-ECONNREFUSED, NULL};
	unsigned calls = roles_calls();
	struct cli c;
	char *out, *err;

	/* failed later, in "etcd" */
	cli_startv(&c, NULL, set);
	wait_roles_calls(calls + 1);
	call_on_loop(complete_fn, &fail);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 1);
	CHECK_STR_EQ(out, "");
	CHECK_STR_EQ(
	    err, "leaseholdctl: cannot set the roles of node 'node-b': etcd: deadline exceeded\n");
	free(out);
	free(err);

	cli_startv(&c, NULL, clr);
	wait_roles_calls(calls + 2);
	call_on_loop(complete_fn, &fail_nomsg);
	CHECK_INT_EQ(cli_finish(&c, 15000, &out, &err), 1);
	CHECK_CONTAINS(err, "cannot clear the roles of node 'node-b': ");
	CHECK_CONTAINS(err, strerror(ECONNREFUSED));
	free(out);
	free(err);

	/* failed at once */
	CHECK_INT_EQ(run(&out, &err, "roles", "set", "now-fail", "worker", NULL), 1);
	CHECK_STR_EQ(err, "leaseholdctl: cannot set the roles of node 'now-fail': etcd: not "
			  "connected\n");
	free(out);
	free(err);
	/* refused by the daemon's own validation: a bad request, exit 2 */
	CHECK_INT_EQ(run(&out, &err, "roles", "clear", "daemon-says-no", NULL), 2);
	CHECK_CONTAINS(err, "bad request: the daemon refuses node 'daemon-says-no'");
	free(out);
	free(err);
	CHECK_INT_EQ(roles_calls(), calls + 4);
	CHECK_INT_EQ(pending(&S.ctl), 0);
	CHECK(S.roles_done == NULL);
	expect_serving();
}

/* done() from inside the op: answered when the op returns; a second done()
 * is ignored. */
static void test_cli_roles_done_inside_op(void)
{
	char *out, *err;
	unsigned calls = roles_calls();

	CHECK_INT_EQ(run(&out, &err, "roles", "set", "sync-twice", "worker", NULL), 0);
	CHECK_STR_EQ(out, "node sync-twice: roles set to worker\n");
	free(out);
	free(err);
	CHECK_INT_EQ(roles_calls(), calls + 1);
	CHECK_INT_EQ(pending(&S.ctl), 0);
	expect_serving();
}

static void test_cli_roles_invalid_exit_2(void)
{
	char *out, *err;
	unsigned calls = roles_calls();
	char long_role[80], long_node[140];
	const char *many[96];
	char names[70][8];
	size_t n = 0;
	struct cli c;

	memset(long_role, 'a', 64);
	long_role[64] = '\0';
	memset(long_node, 'n', 129);
	long_node[129] = '\0';

	static const struct {
		const char *node, *role, *expect;
	} bad[] = {
	    {"node-b", "Controller", "invalid role name"},
	    {"node-b", "a.b", "invalid role name"},
	    {"node-b", "", "invalid role name"},
	    {"a/b", "worker", "invalid node id 'a/b'"},
	    {"node b", "worker", "invalid node id"},
	    {"node-b\x01", "worker", "invalid node id"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT_EQ(run(&out, &err, "roles", "set", bad[i].node, bad[i].role, NULL), 2);
		CHECK_STR_EQ(out, "");
		CHECK_CONTAINS(err, bad[i].expect);
		CHECK_CONTAINS(err, "Usage: leaseholdctl [--control URL] roles set NODE [ROLE...]");
		free(out);
		free(err);
	}
	CHECK_INT_EQ(run(&out, &err, "roles", "set", "node-b", long_role, NULL), 2);
	CHECK_CONTAINS(err, "invalid role name");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "set", long_node, "worker", NULL), 2);
	CHECK_CONTAINS(err, "invalid node id");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "clear", long_node, NULL), 2);
	CHECK_CONTAINS(err, "invalid node id");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "set", "node-b", "worker", "x", "worker", NULL), 2);
	CHECK_CONTAINS(err, "a role is named twice: 'worker'");
	free(out);
	free(err);

	/* 65 roles */
	many[n++] = "--control";
	many[n++] = S.url;
	many[n++] = "roles";
	many[n++] = "set";
	many[n++] = "node-b";
	for (int i = 0; i < 65; i++) {
		snprintf(names[i], sizeof(names[i]), "r%d", i);
		many[n++] = names[i];
	}
	many[n] = NULL;
	cli_startv(&c, NULL, many);
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 2);
	CHECK_CONTAINS(err, "too many roles (at most 64)");
	free(out);
	free(err);
	/* 64 are fine */
	many[n - 1] = NULL;
	cli_startv(&c, NULL, many);
	wait_roles_calls(calls + 1);
	CHECK_INT_EQ(S.roles_n, 64);
	{
		struct completion ok = {0, NULL};
		call_on_loop(complete_fn, &ok);
	}
	CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 0);
	free(out);
	free(err);

	/* usage */
	CHECK_INT_EQ(run(&out, &err, "roles", NULL), 2);
	CHECK_CONTAINS(err, "missing subcommand");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "frob", NULL), 2);
	CHECK_CONTAINS(err, "unknown roles subcommand 'frob'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "set", NULL), 2);
	CHECK_CONTAINS(err, "missing argument");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "clear", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "clear", "node-b", "worker", NULL), 2);
	CHECK_CONTAINS(err, "unexpected argument 'worker'");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "list", "node-b", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "set", "node-b", "x", "--json", NULL), 2);
	free(out);
	free(err);
	CHECK_INT_EQ(roles_calls(), calls + 1); /* only the 64-role set reached the op */
}

/* Hostile ROLES_SET/ROLES_CLEAR requests that bypass the CLI's checks. */
static void test_server_roles_bad_requests(void)
{
	static const char *const upper[] = {"Worker"};
	static const char *const dup[] = {"a", "a"};
	static const char *const one[] = {"worker"};
	static const char *const empty[] = {""};
	const char *too_many[65];
	char names[65][8];
	char long_node[140];
	unsigned calls = roles_calls();
	uint8_t *buf;
	size_t len;

	memset(long_node, 'n', 129);
	long_node[129] = '\0';
	for (int i = 0; i < 65; i++) {
		snprintf(names[i], sizeof(names[i]), "r%d", i);
		too_many[i] = names[i];
	}
	const struct {
		Leasehold__Control__Kind kind;
		const char *node;
		const char *const *roles;
		size_t n;
	} bad[] = {
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "node-b", upper, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "node-b", dup, 2},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "node-b", empty, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "node-b", too_many, 65},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "", one, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "a/b", one, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, long_node, one, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET, "a\x7f", one, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR, "node-b", one, 1},
	    {LEASEHOLD__CONTROL__KIND__KIND_ROLES_CLEAR, "", NULL, 0},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_OK(control_codec_roles_request_encode(bad[i].kind, bad[i].node, bad[i].roles,
							    bad[i].n, &buf, &len));
		expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
		free(buf);
	}
	CHECK_INT_EQ(roles_calls(), calls);
	expect_serving();
}

/* check_last_roles_valid - what the last roles op got passes the rules. */
static void check_last_roles_valid(void)
{
	char copy[sizeof(S.roles_joined)];
	size_t n = 0;

	CHECK(control_codec_node_ok(S.roles_node));
	CHECK(S.roles_n <= CONTROL_ROLES_MAX);
	snprintf(copy, sizeof(copy), "%s", S.roles_joined);
	for (char *p = copy, *comma; S.roles_n > 0; p = comma + 1) {
		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		CHECK(control_codec_role_ok(p));
		n++;
		if (!comma)
			break;
	}
	CHECK_INT_EQ(n, S.roles_n);
}

/* Garbage and truncated ROLES_SET bytes: an error reply; the op only ever
 * sees a request that is valid (a flipped byte may yield one). */
static void test_server_roles_garbage(void)
{
	static const char *const roles[] = {"controller", "worker"};
	static const uint8_t bad_node_type[] = {0x08, 0x01, 0x10, 0x08, 0x28, 0x01};
	unsigned calls = roles_calls(), valid = 0;
	uint8_t *buf;
	size_t len;

	/* node "sync": a request that reaches the op completes at once */
	CHECK_OK(control_codec_roles_request_encode(LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET,
						    "sync", roles, 2, &buf, &len));
	for (size_t cut = 1; cut < len; cut++) {
		unsigned before = roles_calls();
		Response *r = raw_call(buf, len - cut);
		if (roles_calls() != before) {
			/* cut exactly after a whole role: still a valid, shorter set */
			CHECK_INT_EQ(r->code, LEASEHOLD__CONTROL__CODE__CODE_OK);
			check_last_roles_valid();
			valid++;
		} else {
			CHECK(r->code != LEASEHOLD__CONTROL__CODE__CODE_OK);
			CHECK(r->message[0] != '\0');
		}
		leasehold__control__response__free_unpacked(r, NULL);
	}
	/* every byte flipped in turn */
	for (size_t i = 0; i < len; i++) {
		unsigned before = roles_calls();
		uint8_t *x = malloc(len);
		Response *r;
		CHECK(x);
		memcpy(x, buf, len);
		x[i] ^= 0xff;
		r = raw_call(x, len);
		if (roles_calls() != before) {
			check_last_roles_valid();
			valid++;
		}
		CHECK(r->code == LEASEHOLD__CONTROL__CODE__CODE_OK || r->message[0] != '\0');
		leasehold__control__response__free_unpacked(r, NULL);
		free(x);
	}
	free(buf);
	calls += valid;
	/* field 5 (node) as a varint instead of a string */
	expect_code(raw_call(bad_node_type, sizeof(bad_node_type)),
		    LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	CHECK_INT_EQ(roles_calls(), calls);
	expect_serving();
}

/* A standby plugin held back without any error: LAST ERROR says why. */
static void test_cli_plugins_held_back_shown(void)
{
	char *out, *err;
	json_object *a, *p;
	bool t = true, f = false;

	call_on_loop(set_held_mode_fn, &t);
	CHECK_INT_EQ(run(&out, &err, "plugins", NULL), 0);
	CHECK_CONTAINS(out, "| roles      | 1.0.0   | standby | node-b | no    | 1.0.0..2.0.0 | "
			    "WORKING 1.0.0 |          0 | held: needs role 'controller', not "
			    "assigned to this node |\n");
	/* an error still wins over the held-back reason */
	CHECK_CONTAINS(out, "| ABI major 2, host expects 1 ");
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "plugins", "--json", NULL), 0);
	a = json_tokener_parse(out);
	CHECK(a && json_object_is_type(a, json_type_array));
	p = json_object_array_get_idx(a, 1);
	CHECK_STR_EQ(jstr(p, "name"), "roles");
	CHECK_STR_EQ(jstr(p, "state"), "standby");
	CHECK_STR_EQ(jstr(p, "held_back"), "needs role 'controller', not assigned to this node");
	jnull(p, "error");
	jnull(jget(p, "reconcile"), "last_error");
	json_object_put(a);
	free(out);
	free(err);

	CHECK_INT_EQ(run(&out, &err, "status", "roles", NULL), 0);
	CHECK_CONTAINS(out, "state:         standby\n");
	CHECK_CONTAINS(out, "held back:     needs role 'controller', not assigned to this node\n");
	free(out);
	free(err);
	call_on_loop(set_held_mode_fn, &f);
}

static void test_cli_roles_help(void)
{
	char *out, *err;
	static const char *const subs[] = {"list", "set", "clear"};

	CHECK_INT_EQ(run(&out, &err, "--help", NULL), 0);
	CHECK_CONTAINS(out, "roles list");
	CHECK_CONTAINS(out, "roles set NODE [ROLE...]");
	CHECK_CONTAINS(out, "roles clear NODE");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "roles", "--help", NULL), 0);
	CHECK_CONTAINS(out, "Usage: leaseholdctl [--control URL] roles list|set|clear");
	CHECK_CONTAINS(out, "roles set NODE [ROLE...]");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "help", "roles", NULL), 0);
	CHECK_CONTAINS(out, "roles list|set|clear");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "help", "roles", "set", NULL), 0);
	CHECK_CONTAINS(out, "Usage: leaseholdctl [--control URL] roles set NODE [ROLE...]");
	free(out);
	free(err);
	CHECK_INT_EQ(run(&out, &err, "help", "roles", "nope", NULL), 2);
	free(out);
	free(err);
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char syn[64];
		snprintf(syn, sizeof(syn), "Usage: leaseholdctl [--control URL] roles %s", subs[i]);
		CHECK_INT_EQ(run(&out, &err, "roles", subs[i], "--help", NULL), 0);
		CHECK_CONTAINS(out, syn);
		CHECK_CONTAINS(out, "Exit codes");
		free(out);
		free(err);
		CHECK_INT_EQ(run(&out, &err, "roles", subs[i], "--version", NULL), 0);
		CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\n");
		free(out);
		free(err);
	}
	CHECK_INT_EQ(run(&out, &err, "roles", "--version", NULL), 0);
	CHECK_STR_EQ(out, "leaseholdctl " PACKAGE_VERSION "\n");
	free(out);
	free(err);
}

/* ---- tests: server robustness ------------------------------------------- */

static void test_server_garbage_bytes(void)
{
	static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x07, 0x00};
	expect_code(raw_call(garbage, sizeof(garbage)), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	expect_code(raw_call("", 0), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	expect_serving();
}

static void test_server_oversized_request(void)
{
	size_t len = 100 * 1024;
	uint8_t *big = malloc(len);
	CHECK(big);
	memset(big, 0x08, len); /* field 1, varint 8, repeated: valid-looking */
	expect_code(raw_call(big, len), LEASEHOLD__CONTROL__CODE__CODE_TOO_LARGE);
	free(big);
	expect_serving();
}

/* A frame announced over CONTROL_MAX_WIRE closes the connection at once;
 * CONTROL_MAX_CONNS idle connections do not keep a new client out (the
 * oldest idle one makes room). */
static void test_server_connection_limits(void)
{
	uint8_t hdr[CONTROL_WIRE_HEADER];
	struct rlimit rl;
	int fd, *fds;

	fd = raw_connect(S.path);
	control_wire_header(hdr, (uint32_t)CONTROL_MAX_WIRE + 1);
	CHECK(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) == (ssize_t)sizeof(hdr));
	CHECK(raw_closed_unanswered(fd, 10000));
	close(fd);
	expect_serving();

	/* both ends of every connection live in this process */
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	if (rl.rlim_cur < 2 * CONTROL_MAX_CONNS + 128 && rl.rlim_max >= 2 * CONTROL_MAX_CONNS + 128) {
		rl.rlim_cur = 2 * CONTROL_MAX_CONNS + 128;
		CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	}
	if (rl.rlim_cur < 2 * CONTROL_MAX_CONNS + 128) {
		SKIP_CASE("RLIMIT_NOFILE is too low for the connection limit");
	}
	fds = calloc(CONTROL_MAX_CONNS, sizeof(*fds));
	CHECK(fds);
	for (int i = 0; i < CONTROL_MAX_CONNS; i++)
		fds[i] = raw_connect(S.path);
	expect_serving();
	expect_serving();
	for (int i = 0; i < CONTROL_MAX_CONNS; i++)
		close(fds[i]);
	free(fds);
	expect_serving();
}

static void test_server_unknown_kind(void)
{
	uint8_t *buf;
	size_t len;
	CHECK_OK(control_codec_request_encode((Leasehold__Control__Kind)99, NULL, 0, &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND);
	free(buf);
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_UNSPECIFIED, NULL, 0,
					      &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND);
	free(buf);
	expect_serving();
}

static void test_server_truncated_protobuf(void)
{
	uint8_t *buf;
	size_t len;
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_STATUS, "reconciler",
					      0, &buf, &len));
	CHECK(len > 4);
	expect_code(raw_call(buf, len - 3), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_OK);
	free(buf);
	expect_serving();
}

static void test_server_invalid_fields(void)
{
	uint8_t *buf;
	size_t len;
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;
	uint8_t raw[64];

	/* a name with a control byte */
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_STATUS, "a\x01z", 0,
					      &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	free(buf);
	/* a request that needs a name without one */
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY, NULL, 10,
					      &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	free(buf);
	/* another protocol revision */
	req.protocol = 7;
	req.kind = LEASEHOLD__CONTROL__KIND__KIND_PLUGINS;
	len = leasehold__control__request__get_packed_size(&req);
	CHECK(len <= sizeof(raw));
	leasehold__control__request__pack(&req, raw);
	expect_code(raw_call(raw, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	/* a switchover to a node id that is no node id; one with roles */
	CHECK_OK(control_codec_switchover_request_encode("x", "a/b", 30000, &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	free(buf);
	req.protocol = CONTROL_PROTOCOL;
	req.kind = LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER;
	req.name = (char *)"x";
	char *one_role[] = {(char *)"r"};
	req.roles = one_role;
	req.n_roles = 1;
	len = leasehold__control__request__get_packed_size(&req);
	CHECK(len <= sizeof(raw));
	leasehold__control__request__pack(&req, raw);
	expect_code(raw_call(raw, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	/* a valid switchover to a daemon without the op */
	CHECK_OK(control_codec_switchover_request_encode("x", NULL, 30000, &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND);
	free(buf);
	/* a pin of no release is refused by the decoder; a valid one reaches
	 * a daemon without the op */
	CHECK_OK(control_codec_pin_request_encode("x", "1.x", false, &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	free(buf);
	CHECK_OK(control_codec_pin_request_encode("x", "1.0.0", true, &buf, &len));
	expect_code(raw_call(buf, len), LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND);
	free(buf);
	/* the status of a plugin that does not exist */
	expect_code(raw_request(LEASEHOLD__CONTROL__KIND__KIND_STATUS, "nope", 0),
		    LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND);
	expect_serving();
}

/* the burst: threads that each make their share of requests, one
 * connection per request, all at once */
enum { BURST_N = 1000, BURST_THREADS = 16 };

struct burst_thread {
	pthread_t t;
	int first;
	int ok;
};

static void *burst_thread_fn(void *arg)
{
	static const int kinds[] = {
	    LEASEHOLD__CONTROL__KIND__KIND_PLUGINS, LEASEHOLD__CONTROL__KIND__KIND_STATUS,
	    LEASEHOLD__CONTROL__KIND__KIND_MEMBERS, LEASEHOLD__CONTROL__KIND__KIND_VERSION};
	struct burst_thread *bt = arg;

	for (int i = bt->first; i < BURST_N; i += BURST_THREADS) {
		int kind = kinds[i % 4];
		uint8_t *buf, *rep = NULL;
		size_t len, rlen = 0;
		Response *r = NULL;
		const char *why;
		if (control_codec_request_encode((Leasehold__Control__Kind)kind, "reconciler", 0,
						 &buf, &len) < 0)
			continue;
		if (control_client_call(S.path, buf, len, 20000, CONTROL_MAX_REPLY, &rep, &rlen) ==
			0 &&
		    control_codec_response_decode(rep, rlen, &r, &why) == 0) {
			bt->ok += r->code == LEASEHOLD__CONTROL__CODE__CODE_OK &&
				  (kind != LEASEHOLD__CONTROL__KIND__KIND_PLUGINS ||
				   r->n_plugins == 3) &&
				  (kind != LEASEHOLD__CONTROL__KIND__KIND_MEMBERS ||
				   r->n_members == 3);
			leasehold__control__response__free_unpacked(r, NULL);
		}
		free(rep);
		free(buf);
	}
	return NULL;
}

static void test_server_burst_1000(void)
{
	struct burst_thread bt[BURST_THREADS];
	int ok = 0;

	for (int i = 0; i < BURST_THREADS; i++) {
		bt[i].first = i;
		bt[i].ok = 0;
		CHECK(pthread_create(&bt[i].t, NULL, burst_thread_fn, &bt[i]) == 0);
	}
	for (int i = 0; i < BURST_THREADS; i++) {
		CHECK(pthread_join(bt[i].t, NULL) == 0);
		ok += bt[i].ok;
	}
	CHECK_INT_EQ(ok, BURST_N);
	expect_serving();
}

/* ---- tests: peers -------------------------------------------------------- */

/* raw_sp_probe - speak nng's SP-over-ipc handshake by hand, as an old
 * client would (async-signal-safe: used in a forked child). Returns a bit
 * set: 1 connected, 2 got at least 8 bytes (the refusal), 4 the server
 * closed the connection, 8 connect failed with EACCES. Waits at most timeout_ms for the close. */
static int raw_sp_probe(const char *path, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static const uint8_t hello[8] = {0, 'S', 'P', 0, 0, 48 /* req0 */, 0, 0};
	uint8_t in[64];
	size_t got = 0, plen = strlen(path);
	int fd, res = 0;

	if (plen >= sizeof(sa.sun_path))
		return 0;
	memcpy(sa.sun_path, path, plen + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		res = errno == EACCES ? 8 : 0;
		close(fd);
		return res;
	}
	res |= 1;
	/* a refused peer may find the connection closed already (EPIPE): what
	 * the server sent before is still there to read */
	ssize_t wrote = write(fd, hello, sizeof(hello));
	(void)wrote;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r <= 0)
			break; /* timeout: still open */
		ssize_t n = read(fd, in, sizeof(in));
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			res |= 4;
			break;
		}
		if (n < 0)
			break;
		got += (size_t)n;
		if (got >= 8)
			res |= 2;
	}
	close(fd);
	return res;
}

static int probe_as_nobody(void)
{
	pid_t pid = fork();
	int status;
	CHECK(pid >= 0);
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(99);
		_exit(raw_sp_probe(S.path, 10000));
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) != 99);
	return WEXITSTATUS(status);
}

static void test_server_refuses_other_uid(void)
{
	int res;

	if (geteuid() != 0) {
		SKIP_CASE("needs root to run a peer as uid 65534");
	}
	CHECK(chmod(S.dir, 0711) == 0);
	/* mode 0600 keeps other users out at connect() already */
	res = probe_as_nobody();
	CHECK_INT_EQ(res, 8);

	/* with the file opened up, the uid check answers with a refusal and
	 * closes the connection */
	CHECK(chmod(S.path, 0666) == 0);
	res = probe_as_nobody();
	CHECK_INT_EQ(res, 1 | 2 | 4);
	/* ...while root on the same socket is answered */
	expect_serving();
	CHECK(chmod(S.path, 0600) == 0);
	CHECK(chmod(S.dir, 0700) == 0);
}

/* A second server freed while a wait-ready is parked: no answer, no leak,
 * and the socket file is gone. */
static struct control *ctl2;
static char url2[240];
static void new_ctl2_fn(void *arg)
{
	char err[256];
	(void)arg;
	CHECK_OK(control_new(S.loop, url2, &ops, NULL, &ctl2, err, sizeof(err)));
}

static void test_server_free_with_pending_wait(void)
{
	uint8_t *buf;
	size_t len;
	unsigned calls;
	bool f = false;
	char path2[160];
	struct stat st;
	int fd;

	call_on_loop(set_ready_fn, &f);
	snprintf(path2, sizeof(path2), "%s/second.sock", S.dir);
	snprintf(url2, sizeof(url2), "ipc://%s", path2);
	call_on_loop(new_ctl2_fn, NULL);
	CHECK(lstat(path2, &st) == 0 && (st.st_mode & 0777) == 0600);

	fd = raw_connect(path2);
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY, "roles",
					      60000, &buf, &len));
	calls = plugins_calls();
	raw_send_frame(fd, buf, len);
	free(buf);
	wait_plugins_calls(calls + 1);
	call_on_loop(free_ctl_fn, &ctl2);
	CHECK(raw_closed_unanswered(fd, 10000)); /* no answer after the server is gone */
	close(fd);
	CHECK(lstat(path2, &st) < 0 && errno == ENOENT);
	expect_serving();
}

/* A parked wait-ready whose client goes away is dropped at once (not kept
 * until its timeout), and the server goes on serving. */
static void test_server_parked_client_gone(void)
{
	uint8_t *buf;
	size_t len;
	unsigned calls;
	bool f = false;
	uint64_t deadline;
	int fd;

	call_on_loop(set_ready_fn, &f);
	fd = raw_connect(S.path);
	CHECK_OK(control_codec_request_encode(LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY, "roles",
					      60000, &buf, &len));
	calls = plugins_calls();
	raw_send_frame(fd, buf, len);
	free(buf);
	wait_plugins_calls(calls + 1);
	CHECK_INT_EQ(waiting(), 1);
	close(fd);
	deadline = now_ms() + 10000;
	while (waiting() != 0) {
		CHECK(now_ms() < deadline);
		poll(NULL, 0, 5); /* until the loop saw the hang-up (deadline above) */
	}
	expect_serving();
}

/* A second server on the same path is refused and leaves the first one's
 * socket alone; a stale socket file is replaced; a path that is not a
 * socket is never removed. */
static void test_server_second_on_same_path(void)
{
	struct control *other = NULL;
	char err[512] = "", path[100];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, r;

	r = control_new(S.loop, S.url, &ops, NULL, &other, err, sizeof(err));
	CHECK_INT_EQ(r, -EADDRINUSE);
	CHECK(other == NULL);
	CHECK_CONTAINS(err, "another leasehold serves");
	expect_serving();

	/* stale: a socket file nobody listens on (a killed daemon) */
	snprintf(path, sizeof(path), "%s/stale2.sock", S.dir);
	memcpy(sa.sun_path, path, strlen(path) + 1); /* S.dir is short */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	snprintf(url2, sizeof(url2), "%s", path); /* the plain-path form */
	call_on_loop(new_ctl2_fn, NULL);
	expect_code(raw_call_at(path, "", 0), LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST);
	call_on_loop(free_ctl_fn, &ctl2);
	CHECK(lstat(path, &st) < 0 && errno == ENOENT);

	/* not a socket */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	r = control_new(S.loop, path, &ops, NULL, &other, err, sizeof(err));
	CHECK_INT_EQ(r, -EEXIST);
	CHECK_CONTAINS(err, "is not a socket");
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
	unlink(path);

	/* neither an ipc:// URL nor an absolute path */
	r = control_new(S.loop, "tcp://127.0.0.1:1", &ops, NULL, &other, err, sizeof(err));
	CHECK_INT_EQ(r, -EINVAL);
}

/* A daemon whose roles ops are NULL: a clear "not supported", exit 2. */
static struct control *ctl3;
static char url3[240];
static void new_ctl3_fn(void *arg)
{
	char err[256];
	(void)arg;
	CHECK_OK(control_new(S.loop, url3, &ops_noroles, NULL, &ctl3, err, sizeof(err)));
}

static void test_cli_roles_not_supported_exit_2(void)
{
	const char *cmds[][5] = {
	    {"--control", url3, "roles", "list", NULL},
	    {"--control", url3, "roles", "set", "node-b"},
	    {"--control", url3, "roles", "clear", "node-b"},
	};
	unsigned calls = roles_calls();
	int list_calls = S.roles_list_calls;
	struct cli c;
	char *out, *err;

	snprintf(url3, sizeof(url3), "ipc://%s/noroles.sock", S.dir);
	call_on_loop(new_ctl3_fn, NULL);
	for (size_t i = 0; i < 3; i++) {
		const char *args[7];
		memcpy(args, cmds[i], sizeof(cmds[i]));
		args[5] = i == 1 ? "worker" : NULL;
		args[6] = NULL;
		cli_startv(&c, NULL, args);
		CHECK_INT_EQ(cli_finish(&c, 20000, &out, &err), 2);
		CHECK_STR_EQ(out, "");
		CHECK_CONTAINS(err, "this leasehold daemon does not support roles");
		CHECK_CONTAINS(err, "roles are not supported by this daemon");
		free(out);
		free(err);
	}
	CHECK_INT_EQ(roles_calls(), calls);
	CHECK_INT_EQ(S.roles_list_calls, list_calls);
	call_on_loop(free_ctl_fn, &ctl3);
}

/* A server freed while a roles write waits for done(): no reply, no leak
 * (LSan), no crash; the done() is then never called (control.h's rule). */
static void test_server_free_with_pending_roles(void)
{
	static const char *const roles[] = {"controller"};
	unsigned calls = roles_calls();
	uint8_t *buf;
	size_t len;
	char path2[160];
	struct stat st;
	int fd;

	snprintf(path2, sizeof(path2), "%s/third.sock", S.dir);
	snprintf(url2, sizeof(url2), "ipc://%s", path2);
	call_on_loop(new_ctl2_fn, NULL);

	fd = raw_connect(path2);
	CHECK_OK(control_codec_roles_request_encode(LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET,
						    "node-b", roles, 1, &buf, &len));
	raw_send_frame(fd, buf, len);
	free(buf);
	wait_roles_calls(calls + 1);
	CHECK_INT_EQ(pending(&ctl2), 1);
	CHECK(S.roles_done != NULL);
	call_on_loop(free_ctl_fn, &ctl2);
	call_on_loop(forget_done_fn, NULL);
	CHECK(raw_closed_unanswered(fd, 10000)); /* no answer after the server is gone */
	close(fd);
	CHECK(lstat(path2, &st) < 0 && errno == ENOENT);
	expect_serving();
}

/* A roles write whose client went away: done() still arrives (the daemon
 * holds the context) and is taken without an answer, no leak (LSan). */
static void test_server_roles_client_gone(void)
{
	static const char *const roles[] = {"controller"};
	static const struct completion ok = {0, NULL};
	unsigned calls = roles_calls();
	uint8_t *buf;
	size_t len;
	int fd;

	fd = raw_connect(S.path);
	CHECK_OK(control_codec_roles_request_encode(LEASEHOLD__CONTROL__KIND__KIND_ROLES_SET,
						    "node-b", roles, 1, &buf, &len));
	raw_send_frame(fd, buf, len);
	free(buf);
	wait_roles_calls(calls + 1);
	CHECK_INT_EQ(pending(&S.ctl), 1);
	close(fd);
	expect_serving(); /* the loop has seen the hang-up by now or later: either way */
	CHECK_INT_EQ(pending(&S.ctl), 1);
	call_on_loop(complete_fn, (void *)&ok);
	CHECK_INT_EQ(pending(&S.ctl), 0);
	expect_serving();
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	server_start();
	RUN(test_socket_file_mode_0600);
	RUN(test_cli_plugins_table);
	RUN(test_cli_plugins_json);
	RUN(test_cli_status);
	RUN(test_cli_members);
	RUN(test_cli_unknown_plugin_exit_2);
	RUN(test_cli_wait_ready_already_ready);
	RUN(test_cli_wait_ready_long_poll);
	RUN(test_cli_wait_ready_timeout_exit_1);
	RUN(test_cli_wait_ready_plugin_removed);
	RUN(test_cli_reload_calls_op);
	RUN(test_cli_version);
	RUN(test_cli_env_control);
	RUN(test_cli_daemon_unreachable_exit_codes);
	RUN(test_cli_usage_and_help);
	RUN(test_server_garbage_bytes);
	RUN(test_server_oversized_request);
	RUN(test_server_connection_limits);
	RUN(test_server_unknown_kind);
	RUN(test_server_truncated_protobuf);
	RUN(test_server_invalid_fields);
	RUN(test_server_burst_1000);
	RUN(test_server_refuses_other_uid);
	RUN(test_server_free_with_pending_wait);
	RUN(test_cli_roles_list_table);
	RUN(test_cli_roles_list_json);
	RUN(test_cli_roles_set_waits_for_done);
	RUN(test_cli_roles_set_empty_set);
	RUN(test_cli_roles_clear_waits_for_done);
	RUN(test_cli_roles_write_failed_exit_1);
	RUN(test_cli_roles_done_inside_op);
	RUN(test_cli_roles_invalid_exit_2);
	RUN(test_cli_roles_help);
	RUN(test_cli_roles_not_supported_exit_2);
	RUN(test_cli_plugins_held_back_shown);
	RUN(test_server_roles_bad_requests);
	RUN(test_server_roles_garbage);
	RUN(test_server_free_with_pending_roles);
	RUN(test_server_roles_client_gone);
	RUN(test_server_parked_client_gone);
	RUN(test_server_second_on_same_path);
	server_stop();
	return CHECK_EXIT();
}
