/* SPDX-License-Identifier: MIT */
/*
 * worker_main.c - `leasehold-worker`: the child process of process
 * isolation. It loads ONE plugin from the daemon's private copy and runs the
 * same worker loop as a worker thread (worker.c) over nng pair1 on ipc://.
 *
 *   leasehold-worker --url ipc://DIR/wPID.N.G.sock --plugin PRIVATE_COPY
 *                    --dev DEV --ino INO --name NAME --parent PID
 *                    [--txn-timeout-ms N] [--log-level 0..3] [--activity-fd 3]
 *
 * Design notes
 * - Started by runtime_instance.c with posix_spawn: own process group,
 *   default signal dispositions, empty mask, stdin /dev/null. It closes every
 *   other inherited fd, asks for SIGKILL when its parent dies and checks the
 *   parent is still the one named on the command line.
 * - The plugin file is opened with O_NOFOLLOW and must be the inode the host
 *   named (dev/ino of its private copy); it is dlopened through
 *   /proc/self/fd/N, so what runs is exactly what the host loaded, and the
 *   descriptor is validated again (the same checks as the loader) before
 *   anything of the plugin runs, its name compared with the host's.
 * - The host listens; this side dials once (synchronously). When the host
 *   goes away (its socket closes: the pipe is removed) the worker socket is
 *   closed and the process exits; after FINI the process waits for that (the
 *   host closes after reading the ack), so the ack is never lost.
 * - --activity-fd: a shared memory file (memfd) of the host's, mapped here;
 *   the worker publishes the running callback in it (worker.h), so the host
 *   knows which callback ran when this process died, whatever messages
 *   were still unsent.
 * - Exit codes: WORKER_EXIT_* (worker.h). A crash of the plugin is what it
 *   is: the host sees the signal through its pidfd; this process writes
 *   one line naming the plugin and the callback first (worker_crash_report.h).
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "worker/worker_crash_report.h"
#include "abi/abi_loader.h"
#include "base/log.h"
#include "base/loop.h"
#include "worker/worker_stderr_relay.h"
#include "worker/worker.h"

#define COMP "worker"
#define FINI_LINGER_MS 5000

struct args {
	const char *url;
	const char *plugin;
	const char *name;
	unsigned long long dev, ino;
	long parent;
	unsigned long txn_timeout_ms;
	long log_level;
	long activity_fd; /* -1 = none */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_pipe_gone; /* the host's end went away */
static bool g_worker_done;
static int g_worker_ret;

static int worker_main_parse_ull(const char *s, unsigned long long max, unsigned long long *ret)
{
	char *end = NULL;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int worker_main_parse_args(int argc, char **argv, struct args *a)
{
	unsigned long long v;
	a->txn_timeout_ms = 30000;
	a->log_level = LOG_LVL_INFO;
	a->parent = -1;
	a->activity_fd = -1;
	for (int i = 1; i < argc; i += 2) {
		const char *k = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (!val)
			return -EINVAL;
		if (strcmp(k, "--url") == 0)
			a->url = val;
		else if (strcmp(k, "--plugin") == 0)
			a->plugin = val;
		else if (strcmp(k, "--name") == 0)
			a->name = val;
		else if (strcmp(k, "--dev") == 0 && worker_main_parse_ull(val, ULLONG_MAX, &a->dev) == 0)
			;
		else if (strcmp(k, "--ino") == 0 && worker_main_parse_ull(val, ULLONG_MAX, &a->ino) == 0)
			;
		else if (strcmp(k, "--parent") == 0 && worker_main_parse_ull(val, INT_MAX, &v) == 0)
			a->parent = (long)v;
		else if (strcmp(k, "--txn-timeout-ms") == 0 && worker_main_parse_ull(val, UINT32_MAX, &v) == 0)
			a->txn_timeout_ms = (unsigned long)v;
		else if (strcmp(k, "--log-level") == 0 && worker_main_parse_ull(val, LOG_LVL_DEBUG, &v) == 0)
			a->log_level = (long)v;
		else if (strcmp(k, "--activity-fd") == 0 && worker_main_parse_ull(val, 3, &v) == 0 && v == 3)
			a->activity_fd = (long)v;
		else
			return -EINVAL;
	}
	return a->url && a->plugin && a->name && a->parent > 0 ? 0 : -EINVAL;
}

/* the same checks as loader_open after its dlopen */
static int worker_main_load_plugin(const struct args *a, void **ret_handle, struct lh_plugin *ret_desc)
{
	char err[LOADER_ERR_MAX], path[64];
	struct stat st;
	void *h = NULL;
	int r = -EPROTO;
	int fd = open(a->plugin, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		log_error(COMP, "cannot open %s: %s", a->plugin, strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (unsigned long long)st.st_dev != a->dev ||
	    (unsigned long long)st.st_ino != a->ino) {
		log_error(COMP, "%s is not the file the host loaded", a->plugin);
		close(fd);
		return -ESTALE;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	dlerror();
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	close(fd);
	if (!h) {
		const char *de = dlerror();
		log_error(COMP, "dlopen %s failed: %s", a->plugin, de ? de : "unknown error");
		return -ENOEXEC;
	}
	const void *sym = dlsym(h, LH_PLUGIN_SYMBOL);
	Dl_info info;
	const ElfW(Sym) *es = NULL;
	if (!sym || !dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es ||
	    ELF64_ST_TYPE(es->st_info) != STT_OBJECT) {
		log_error(COMP, "%s: no usable %s symbol", a->plugin, LH_PLUGIN_SYMBOL);
		goto fail;
	}
	r = loader_validate_descriptor(sym, (size_t)es->st_size, info.dli_fbase, ret_desc, err,
				       sizeof(err));
	if (r < 0) {
		log_error(COMP, "%s: %s", a->plugin, err);
		goto fail;
	}
	const void *cbs[] = {
	    (const void *)ret_desc->init,
	    (const void *)ret_desc->on_elected,
	    (const void *)ret_desc->on_releases_changed,
	    (const void *)ret_desc->reconcile,
	    (const void *)ret_desc->on_deposed,
	    (const void *)ret_desc->fini,
	    (const void *)ret_desc->on_watch_events,
	    (const void *)ret_desc->on_config_changed,
	    (const void *)ret_desc->validate_config,
	    (const void *)ret_desc->reconcile_key,
	    (const void *)ret_desc->key_of,
	};
	for (size_t i = 0; i < sizeof(cbs) / sizeof(cbs[0]); i++) {
		Dl_info ci;
		if (cbs[i] && (!dladdr(cbs[i], &ci) || ci.dli_fbase != info.dli_fbase)) {
			log_error(COMP, "%s: a callback does not point into the plugin", a->plugin);
			r = -EPROTO;
			goto fail;
		}
	}
	if (strcmp(ret_desc->name, a->name) != 0) {
		log_error(COMP, "%s declares '%s', the host loaded '%s'", a->plugin, ret_desc->name,
			  a->name);
		r = -ESTALE;
		goto fail;
	}
	*ret_handle = h;
	return 0;
fail:
	dlclose(h);
	return r < 0 ? r : -EPROTO;
}

static void worker_main_on_pipe_rem(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)p;
	(void)ev;
	(void)arg;
	pthread_mutex_lock(&g_mu);
	g_pipe_gone = true;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
}

static void *worker_main_thread(void *arg)
{
	int r = worker_run(arg);
	pthread_mutex_lock(&g_mu);
	g_worker_done = true;
	g_worker_ret = r;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

/* wait (on g_cv, g_mu held) until *flag or ms elapsed; ms < 0 = forever */
static void worker_main_wait_flag(const bool *flag, int ms)
{
	struct timespec dl = loop_deadline_ts(CLOCK_MONOTONIC, ms >= 0 ? (uint64_t)ms : 0);
	while (!*flag) {
		if (ms < 0)
			pthread_cond_wait(&g_cv, &g_mu);
		else if (pthread_cond_timedwait(&g_cv, &g_mu, &dl) == ETIMEDOUT)
			break;
	}
}

/* worker_main_prepare_process - what the process needs before the plugin
 * is loaded: no fd of the daemon's left open, the activity page mapped
 * (ret_activity, NULL without --activity-fd), crash reports, the log's
 * prefix and the relay of the plugin's own stderr, the clock of g_cv.
 * Returns 0 or a WORKER_EXIT_* code. */
static int worker_main_prepare_process(const struct args *a, struct worker_activity **ret_activity)
{
	pthread_condattr_t ca;
	int rv;

	/* nothing of the daemon's (sockets, etcd connections) stays open here */
	int first_closed = a->activity_fd == 3 ? 4 : 3;
	if (close_range((unsigned)first_closed, ~0u, 0) < 0) {
		for (int fd = first_closed; fd < 1024; fd++)
			close(fd);
	}
	struct worker_activity *activity = NULL;
	if (a->activity_fd >= 0) {
		void *m = mmap(NULL, sizeof(*activity), PROT_READ | PROT_WRITE, MAP_SHARED,
			       (int)a->activity_fd, 0);
		close((int)a->activity_fd);
		if (m == MAP_FAILED) {
			fprintf(stderr, "leasehold-worker: cannot map the activity page: %s\n",
			        strerror(errno));
			return WORKER_EXIT_USAGE;
		}
		activity = m;
	}
	crash_report_install("the worker process dies; the host restarts it (process isolation)");
	log_set_level((enum log_level)a->log_level);
	char tag[LH_PLUGIN_NAME_MAX + 32];
	snprintf(tag, sizeof(tag), "worker %s[%ld]", a->name, (long)getpid());
	log_set_prefix(tag);
	char comp[LH_PLUGIN_NAME_MAX + 16];
	snprintf(comp, sizeof(comp), "plugin %s", a->name);
	if ((rv = stderr_relay_start(comp)) < 0)
		log_warn(COMP, "cannot relay the plugin's own stderr (it stays unprefixed): %s",
		         strerror(-rv));
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g_cv, &ca);
	pthread_condattr_destroy(&ca);
	*ret_activity = activity;
	return 0;
}

/* worker_main_dial - the bus socket, connected to the host's listener.
 * Returns 0 (ret_sock open) or WORKER_EXIT_BUS (nothing left open). */
static int worker_main_dial(const struct args *a, nng_socket *ret_sock)
{
	nng_socket sock;
	int rv;

	if ((rv = nng_pair1_open(&sock)) != 0) {
		log_error(COMP, "cannot open the bus socket: %s", nng_strerror(rv));
		return WORKER_EXIT_BUS;
	}
	nng_socket_set_int(sock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(sock, NNG_OPT_RECVBUF, 64);
	nng_pipe_notify(sock, NNG_PIPE_EV_REM_POST, worker_main_on_pipe_rem, NULL);
	if ((rv = nng_dial(sock, a->url, NULL, 0)) != 0) {
		log_error(COMP, "cannot connect to %s: %s", a->url, nng_strerror(rv));
		nng_close(sock);
		return WORKER_EXIT_BUS;
	}
	*ret_sock = sock;
	return 0;
}

/* worker_main_run - run the worker thread until it is done or the host is
 * gone, then close the bus. Returns whether the thread ended (else a
 * callback still runs and the process must leave without joining it). */
static bool worker_main_run(pthread_t t, nng_socket sock)
{
	pthread_mutex_lock(&g_mu);
	while (!g_worker_done && !g_pipe_gone)
		pthread_cond_wait(&g_cv, &g_mu);
	bool fini_done = g_worker_done && g_worker_ret == 0;
	if (fini_done)
		worker_main_wait_flag(&g_pipe_gone, FINI_LINGER_MS); /* let the ack reach the host */
	pthread_mutex_unlock(&g_mu);
	/* the host is gone (or done with us): end the worker's recv */
	nng_close(sock);
	pthread_mutex_lock(&g_mu);
	worker_main_wait_flag(&g_worker_done, 1000);
	bool joined = g_worker_done;
	pthread_mutex_unlock(&g_mu);
	if (joined)
		pthread_join(t, NULL);
	return joined;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	struct lh_plugin desc;
	struct worker *w = NULL;
	struct worker_activity *activity = NULL;
	void *handle = NULL;
	nng_socket sock;
	pthread_t t;
	int code;

	/* die with the daemon, even while a callback hangs */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (worker_main_parse_args(argc, argv, &a) < 0) {
		fprintf(stderr, "usage: leasehold-worker --url URL --plugin FILE --dev N --ino N "
				"--name NAME --parent PID [--txn-timeout-ms N] [--log-level 0-3]\n"
				"       [--activity-fd 3]\n"
				"(started by the leasehold daemon for process isolation)\n");
		return WORKER_EXIT_USAGE;
	}
	if ((long)getppid() != a.parent)
		return WORKER_EXIT_PARENT;
	if ((code = worker_main_prepare_process(&a, &activity)) != 0)
		return code;
	if (worker_main_load_plugin(&a, &handle, &desc) < 0)
		return WORKER_EXIT_LOAD;
	if ((code = worker_main_dial(&a, &sock)) != 0)
		goto out_handle;
	if (worker_new(&desc, sock, (uint32_t)a.txn_timeout_ms, &w) < 0) {
		code = WORKER_EXIT_NOMEM;
		goto out_sock;
	}
	worker_set_activity(w, activity);
	if (pthread_create(&t, NULL, worker_main_thread, w) != 0) {
		code = WORKER_EXIT_NOMEM;
		goto out_sock;
	}
	if (!worker_main_run(t, sock)) {
		/* a callback still runs (the host went away meanwhile): leave now */
		_exit(WORKER_EXIT_OK);
	}
	worker_free(w);
	dlclose(handle);
	nng_fini();
	return WORKER_EXIT_OK;

out_sock:
	nng_close(sock);
	worker_free(w);
out_handle:
	dlclose(handle);
	nng_fini();
	return code;
}
