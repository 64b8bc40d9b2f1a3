/* SPDX-License-Identifier: MIT */
/*
 * runtime_instance_process.c - process isolation: worker generations (a
 * fresh bus and child each), posix_spawn of leasehold-worker, reaping
 * through a pidfd, restart with backoff, the attach deadline, and settling
 * everything a lost worker leaves (pi_gen_lost). Reading guide:
 * runtime_instance.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "lh_worker_paths.h"
#include "base/log.h"
#include "runtime/runtime_closer.h"
#include "runtime/runtime_instance_internal.h"

uint64_t pi_exit_grace_ns(const struct plugin_instance *pi)
{
	return (uint64_t)(pi->cfg.exit_grace_ms ? pi->cfg.exit_grace_ms : DEFAULT_EXIT_GRACE_MS) *
	       LOOP_NS_PER_MS;
}

static uint32_t pi_process_restart_min_ms(const struct plugin_instance *pi)
{
	return pi->cfg.restart_min_ms ? pi->cfg.restart_min_ms : DEFAULT_RESTART_MIN_MS;
}

static uint32_t pi_process_restart_max_ms(const struct plugin_instance *pi)
{
	uint32_t mx = pi->cfg.restart_max_ms ? pi->cfg.restart_max_ms : DEFAULT_RESTART_MAX_MS;
	return mx < pi_process_restart_min_ms(pi) ? pi_process_restart_min_ms(pi) : mx;
}

static int pi_process_sys_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

void pi_child_kill(const struct child *c)
{
	if (c->pidfd >= 0 && syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0) < 0 &&
	    errno != ESRCH)
		log_warn(c->pi->log_comp, "cannot kill worker %ld: %s", (long)c->pid,
			 strerror(errno));
}

static void pi_process_child_unlink(struct plugin_instance *pi, struct child *c)
{
	for (struct child **pp = &pi->children; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	if (pi->cur == c)
		pi->cur = NULL;
}

void pi_child_free(struct child *c)
{
	if (!c)
		return;
	loop_io_free(c->io);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c);
}

static void pi_process_describe_status(int status, char *buf, size_t len)
{
	if (status == -1) {
		pi_fmt(buf, len, "ended (exit status unknown)");
	} else if (WIFSIGNALED(status)) {
		const char *abbr = sigabbrev_np(WTERMSIG(status));
		pi_fmt(buf, len, "was killed by signal %d (SIG%s)%s", WTERMSIG(status),
		       abbr ? abbr : "?", WCOREDUMP(status) ? ", core dumped" : "");
	} else if (WIFEXITED(status)) {
		int code = WEXITSTATUS(status);
		const char *what = code == WORKER_EXIT_OK	? ""
				   : code == WORKER_EXIT_USAGE	? " (bad worker command line)"
				   : code == WORKER_EXIT_LOAD	? " (cannot load the plugin)"
				   : code == WORKER_EXIT_BUS	? " (cannot connect to the host)"
				   : code == WORKER_EXIT_NOMEM	? " (out of memory)"
				   : code == WORKER_EXIT_PARENT ? " (parent gone)"
				   : code == 127		? " (cannot execute the worker)"
								: "";
		pi_fmt(buf, len, "exited with status %d%s", code, what);
	} else {
		pi_fmt(buf, len, "ended (wait status 0x%x)", (unsigned)status);
	}
}

static void pi_process_gate_free(void *arg)
{
	struct pi_gate *g = arg;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* The generation's socket goes to the closer thread with its gate: nng_close
 * waits for nng's threads (the pipes' teardown, a pipe callback in progress)
 * and must not do so on the loop. From here on the gate refuses every
 * connection; the callback never touches pi. */
static void pi_process_close_bus(struct plugin_instance *pi)
{
	struct pi_gate *g = pi->gate;
	pi->gate = NULL;
	if (g) {
		pthread_mutex_lock(&g->mu);
		g->expect_pid = 0;
		pthread_mutex_unlock(&g->mu);
	}
	if (!pi->hsock_open) {
		if (g)
			pi_process_gate_free(g); /* no socket: no callback has it */
		return;
	}
	pi->hsock_open = false;
	if (runtime_closer_close(pi->hsock, pi_process_gate_free, g) < 0) {
		/* no closer thread: this one close may wait on the loop */
		log_error(pi->log_comp, "no closer thread: closing the worker bus here");
		nng_close(pi->hsock);
		if (g)
			pi_process_gate_free(g);
	}
}

/* Close the current generation's bus (the child, if alive, sees its peer go
 * and exits). Nothing is completed here. */
void pi_gen_close(struct plugin_instance *pi)
{
	if (!pi->process)
		return;
	pi->bus_up = false;
	loop_io_free(pi->rio);
	pi->rio = NULL;
	loop_io_free(pi->sio);
	pi->sio = NULL;
	pi_process_close_bus(pi);
	while (pi->out_head) {
		struct outmsg *o = pi->out_head;
		pi->out_head = o->next;
		nng_msg_free(o->msg);
		free(o);
	}
	pi->out_tail = NULL;
	pi_txns_orphan(pi); /* the answers go nowhere */
	loop_timer_disarm(pi->attach_timer);
	if (pi->cur) {
		pi->cur->current = false;
		pi->cur = NULL;
	}
	pi->stats.worker_pid = 0;
	const char *path = strncmp(pi->url, "ipc://", 6) == 0 ? pi->url + 6 : NULL;
	if (path)
		unlink(path); /* normally gone already */
}

static void pi_process_schedule_restart(struct plugin_instance *pi)
{
	uint64_t now = loop_now();
	uint32_t mn = pi_process_restart_min_ms(pi), mx = pi_process_restart_max_ms(pi);
	if (!pi->backoff_ms ||
	    (pi->up_since && now - pi->up_since >= (uint64_t)mx * LOOP_NS_PER_MS))
		pi->backoff_ms = mn; /* the last worker ran long enough: start over */
	pi->up_since = 0;
	uint64_t delay = pi->backoff_ms;
	pi->backoff_ms = delay * 2 > mx ? mx : delay * 2;
	pi->stats.next_restart_ms = delay;
	log_info(pi->log_comp, "restarting the plugin worker in %llu ms",
		 (unsigned long long)delay);
	loop_timer_arm_in(pi->restart_timer, delay * LOOP_NS_PER_MS);
}

/* Process mode: the current worker is gone or must go (reason says why).
 * Settles every pending event exactly once, reports, schedules a restart. */
void pi_gen_lost(struct plugin_instance *pi, const char *reason)
{
	if (!pi->process || !pi->bus_up)
		return;
	if (pi->cur)
		pi_child_kill(pi->cur); /* make sure: it may only be hung or confused */
	struct event *sent = pi_sent_take_all(pi), *ev = sent;
	if (!pi->stop_after_reap)
		loop_timer_disarm(pi->cb_timer);
	pi_gen_close(pi);
	bool first_init = ev && ev->kind == EV_INIT && !pi->init_reported;
	if (first_init)
		log_error(pi->log_comp, "%s", reason);
	else
		pi_report_failure(pi, reason); /* on_failed first, then the completions */
	pi->leading = false; /* a dead worker gets no on_deposed; a new one starts fresh */
	pi_watch_stop(pi);
	pi->term_elected_sent = false;
	for (struct event *next; ev; ev = next) {
		next = ev->next;
		if (ev->kind != EV_FINI && ev->kind != EV_INIT)
			pi->stats.dropped++;
		if (ev->kind == EV_RECONCILE) {
			pi->stats.reconciles_failed++;
			pi_completion_push(pi, COMP_RECONCILE, (void (*)(void))ev->done,
					   ev->done_ud, -EIO, reason);
		} else if (ev->kind == EV_VALIDATE) {
			pi_event_complete_cancelled(pi, ev, -EIO, reason);
		} else if (first_init && ev == sent) {
			pi->init_reported = true;
			pi_state_set(pi, PLUGIN_INSTANCE_FAILED);
			pi_fmt(pi->init_error, sizeof(pi->init_error), "init failed: %s", reason);
			if (pi->cfg.on_init)
				pi_completion_push(pi, COMP_INIT, (void (*)(void))pi->cfg.on_init,
						   pi->cfg.userdata, -EIO, pi->init_error);
		}
		pi_event_free(ev);
	}
	/* nothing queued can reach this worker; a FINI is settled by finish_stop */
	while (pi->q_head) {
		struct event *q = pi->q_head;
		pi->q_head = q->next;
		pi->stats.queued--;
		if (q->kind != EV_FINI) {
			pi->stats.dropped++;
			pi_event_complete_cancelled(pi, q, -EIO, reason);
		}
		pi_event_free(q);
	}
	pi->q_tail = NULL;
	if (pi->stop_requested)
		pi_finish_stop(pi);
	else if (!first_init && pi->state != PLUGIN_INSTANCE_FAILED)
		pi_process_schedule_restart(pi);
	pi_maybe_drained(pi);
}

/* the child's pidfd is readable: it exited */
static void pi_process_on_child_exit(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct child *c = userdata;
	struct plugin_instance *pi = c->pi;
	int status = -1;
	(void)io;
	(void)fd;
	(void)events;
	pid_t r = waitpid(c->pid, &status, WNOHANG);
	if (r == 0)
		return; /* not yet */
	if (r < 0)
		status = -1; /* reaped by someone else (ECHILD) */
	pi->stats.last_exit_status = status;
	pi_process_child_unlink(pi, c);
	char what[160];
	pi_process_describe_status(status, what, sizeof(what));
	if (c->current) {
		/* what the worker managed to send before it died comes first */
		pi_on_readable(NULL, -1, 0, pi);
	}
	if (c->current) {
		char reason[400];
		/* the page, not the sent list: acks the child queued before it
		 * died may never have left it (a batch's on_elected and replay
		 * look pending while reconcile ran) */
		struct worker_activity_snapshot snap = {0, 0, 0};
		uint64_t now = loop_now();
		if (pi->activity_page)
			worker_activity_read(pi->activity_page, &snap);
		if (snap.seq)
			pi_fmt(
			    reason, sizeof(reason),
			    "plugin worker (pid %ld) %s during %s (after %llu ms)", (long)c->pid,
			    what, worker_callback_name(snap.kind),
			    (unsigned long long)((now > snap.since_ns ? now - snap.since_ns : 0) /
						 LOOP_NS_PER_MS));
		else
			pi_fmt(reason, sizeof(reason),
			       "plugin worker (pid %ld) %s outside any callback", (long)c->pid,
			       what);
		pi_gen_lost(pi, reason);
	} else if (status != 0) {
		log_debug(pi->log_comp, "former plugin worker (pid %ld) %s", (long)c->pid, what);
	}
	pi_child_free(c);
	if (pi->stop_after_reap && !pi->children) {
		pi->stop_after_reap = false;
		loop_timer_disarm(pi->cb_timer);
		pi_stopped_now(pi);
	}
}

/* the current worker's bus connection was not accepted in time (see
 * WORKER_ATTACH_TIMEOUT_MS): it is lost like a crashed one */
void pi_on_attach_timer(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	char reason[320];
	bool attached;
	(void)t;
	if (!pi->process || !pi->bus_up || !pi->cur || !pi->gate)
		return;
	pthread_mutex_lock(&pi->gate->mu);
	attached = pi->gate->attached;
	pthread_mutex_unlock(&pi->gate->mu);
	if (attached)
		return;
	pi_fmt(
	    reason, sizeof(reason),
	    "plugin worker (pid %ld) was not connected to the bus within %u ms: killed (with nng "
	    "before 1.6.0, a local client that connects to the bus socket and hangs up does this)",
	    (long)pi->cur->pid, WORKER_ATTACH_TIMEOUT_MS);
	pi_gen_lost(pi, reason);
}

/* nng pipe callback (an nng thread): accept only the child we spawned. It
 * touches only the generation's gate (arg), which outlives the socket's
 * callbacks, and nng_pipe_close of a pipe not yet added does not wait. */
static void pi_process_on_pipe_add(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct pi_gate *g = arg;
	uint64_t peer = 0;
	(void)ev;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &peer) != 0)
		peer = 0;
	pthread_mutex_lock(&g->mu); /* held by gen_start across posix_spawn */
	bool ok = g->expect_pid > 0 && peer == (uint64_t)g->expect_pid;
	if (ok)
		g->attached = true;
	pthread_mutex_unlock(&g->mu);
	if (!ok)
		nng_pipe_close(p);
}

/* buf[len] = dir/rel/leasehold-worker when that is executable (rel NULL:
 * dir/leasehold-worker); 0, -ENOENT or -ENAMETOOLONG */
static int pi_process_worker_in(const char *dir, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX + 64];
	int n = rel ? snprintf(path, sizeof(path), "%s/%s/leasehold-worker", dir, rel)
	            : snprintf(path, sizeof(path), "%s/leasehold-worker", dir);
	if (n < 0 || (size_t)n >= sizeof(path) || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (access(path, X_OK) < 0)
		return -ENOENT;
	memcpy(buf, path, (size_t)n + 1);
	return 0;
}

int plugin_instance_default_worker_path(char *buf, size_t len)
{
	char exe[PATH_MAX];
	int n = snprintf(buf, len, "%s/leasehold-worker", LH_PKGLIBEXECDIR);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (access(buf, X_OK) == 0)
		return 0;
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k <= 0)
		return -ENOENT;
	exe[k] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	/* a build tree keeps it beside the daemon; a moved installation where
	 * the installed layout puts it relative to bindir */
	if (pi_process_worker_in(exe, NULL, buf, len) == 0 ||
	    pi_process_worker_in(exe, LH_PKGLIBEXECDIR_FROM_BINDIR, buf, len) == 0)
		return 0;
	/* buf holds the installed path again, for the caller's message */
	snprintf(buf, len, "%s/leasehold-worker", LH_PKGLIBEXECDIR);
	return -ENOENT;
}

/* posix_spawn the helper for url; on success *ret_pid. Called with the gate's mu held. */
static int pi_process_spawn_worker(struct plugin_instance *pi, pid_t *ret_pid)
{
	extern char **environ;
	char dev[32], ino[32], parent[32], txn[32], lvl[8];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	pid_t pid;
	int r;

	pi_fmt(dev, sizeof(dev), "%llu", (unsigned long long)pi->copy_dev);
	pi_fmt(ino, sizeof(ino), "%llu", (unsigned long long)pi->copy_ino);
	pi_fmt(parent, sizeof(parent), "%ld", (long)getpid());
	pi_fmt(txn, sizeof(txn), "%u", pi->cfg.txn_timeout_ms);
	pi_fmt(lvl, sizeof(lvl), "%d", (int)log_get_level());
	char *const argv[] = {
	    (char *)"leasehold-worker",
	    (char *)"--url",
	    pi->url,
	    (char *)"--plugin",
	    pi->lp->copy_path,
	    (char *)"--dev",
	    dev,
	    (char *)"--ino",
	    ino,
	    (char *)"--name",
	    pi->lp->name,
	    (char *)"--parent",
	    parent,
	    (char *)"--txn-timeout-ms",
	    txn,
	    (char *)"--log-level",
	    lvl,
	    (char *)"--activity-fd",
	    (char *)"3",
	    NULL,
	};
	r = -posix_spawn_file_actions_init(&fa);
	if (r < 0)
		return r;
	r = -posix_spawnattr_init(&attr);
	if (r < 0) {
		posix_spawn_file_actions_destroy(&fa);
		return r;
	}
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	/* the daemon blocks its signalfd signals and ignores SIGPIPE: not the child */
	if ((r = -posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						      POSIX_SPAWN_SETPGROUP)) < 0 ||
	    (r = -posix_spawnattr_setsigmask(&attr, &none)) < 0 ||
	    (r = -posix_spawnattr_setsigdefault(&attr, &all)) < 0 ||
	    (r = -posix_spawnattr_setpgroup(&attr, 0)) < 0 ||
	    (r = -posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) < 0)
		goto cleanup;
	if (pi->worker_stderr &&
	    (r = -posix_spawn_file_actions_addopen(&fa, 2, pi->worker_stderr,
						   O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0)
		goto cleanup;
	if ((r = -posix_spawn_file_actions_adddup2(&fa, 2, 1)) < 0 ||
	    (r = -posix_spawn_file_actions_adddup2(&fa, pi->activity_fd, 3)) < 0)
		goto cleanup;
	r = -posix_spawn(&pid, pi->worker_path, &fa, &attr, argv, environ);
	if (r == 0)
		*ret_pid = pid;
cleanup:
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return r;
}

/* the generation's gate and its listening bus socket on pi->url, with the
 * fds the loop watches. 0 or -errno; on failure pi_gen_close cleans up. */
static int pi_process_open_bus(struct plugin_instance *pi)
{
	nng_listener lst;
	int rv;
	if (!(pi->gate = calloc(1, sizeof(*pi->gate))))
		return -ENOMEM;
	pthread_mutex_init(&pi->gate->mu, NULL);
	if ((rv = nng_pair1_open(&pi->hsock)) != 0)
		return pi_nng_to_errno(rv);
	pi->hsock_open = true;
	nng_socket_set_int(pi->hsock, NNG_OPT_SENDBUF, 64);
	nng_socket_set_int(pi->hsock, NNG_OPT_RECVBUF, 64);
	if ((rv = nng_pipe_notify(pi->hsock, NNG_PIPE_EV_ADD_PRE, pi_process_on_pipe_add,
				  pi->gate)) != 0 ||
	    (rv = nng_listener_create(&lst, pi->hsock, pi->url)) != 0 ||
	    (rv = nng_listener_set_int(lst, NNG_OPT_IPC_PERMISSIONS, 0600)) != 0 ||
	    (rv = nng_listener_start(lst, 0)) != 0 ||
	    (rv = nng_socket_get_int(pi->hsock, NNG_OPT_RECVFD, &pi->rfd)) != 0 ||
	    (rv = nng_socket_get_int(pi->hsock, NNG_OPT_SENDFD, &pi->sfd)) != 0)
		return pi_nng_to_errno(rv);
	return 0;
}

/* Process mode: a fresh bus and a fresh child, then INIT. 0 or -errno. */
int pi_gen_start(struct plugin_instance *pi)
{
	struct child *c = NULL;
	pid_t pid = 0;
	int r = 0;

	/* one generation at a time: the last one was closed (pi_gen_close; its
	 * socket may still be closing on the closer thread, on its own path) */
	assert(pi->process && !pi->bus_up && !pi->cur && !pi->hsock_open && !pi->gate);
	pi->gen++;
	memset(pi->activity_page, 0, sizeof(*pi->activity_page)); /* nothing of the last child */
	pi_fmt(pi->url, sizeof(pi->url), "ipc://%s/w%ld.%u.%llu.sock", pi->runtime_dir,
	       (long)getpid(), pi->instance_id, (unsigned long long)pi->gen);
	if (strlen(pi->url) - 6 >= 108) /* sizeof(sun_path) */
		return -ENAMETOOLONG;
	if ((r = pi_process_open_bus(pi)) < 0)
		goto fail;
	r = loop_io_add(pi->loop, pi->rfd, EPOLLIN, pi_on_readable, pi, &pi->rio);
	if (r < 0)
		goto fail;
	c = calloc(1, sizeof(*c));
	struct event *init = pi_event_new(EV_INIT);
	if (!c || !init) {
		free(init);
		r = -ENOMEM;
		goto fail;
	}
	c->pi = pi;
	c->pidfd = -1;
	pthread_mutex_lock(&pi->gate->mu);
	r = pi_process_spawn_worker(pi, &pid);
	if (r == 0) {
		pi->gate->expect_pid = pid;
		pi->gate->attached = false;
	}
	pthread_mutex_unlock(&pi->gate->mu);
	if (r < 0) {
		free(init);
		log_error(pi->log_comp, "cannot start %s: %s", pi->worker_path, strerror(-r));
		goto fail;
	}
	c->pid = pid;
	c->pidfd = pi_process_sys_pidfd_open(pid);
	if (c->pidfd < 0 ||
	    (r = loop_io_add(pi->loop, c->pidfd, EPOLLIN, pi_process_on_child_exit, c, &c->io)) < 0) {
		if (c->pidfd < 0)
			r = -errno;
		log_error(pi->log_comp, "cannot watch worker %ld: %s", (long)pid, strerror(-r));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		free(init);
		goto fail;
	}
	c->current = true;
	c->next = pi->children;
	pi->children = c;
	pi->cur = c;
	pi->bus_up = true;
	pi->stats.worker_pid = (int32_t)pid;
	log_debug(pi->log_comp, "worker %ld started on %s", (long)pid, pi->url);
	loop_timer_arm_in(pi->attach_timer, (uint64_t)WORKER_ATTACH_TIMEOUT_MS * LOOP_NS_PER_MS);
	pi_enqueue(pi, init);
	pi_pump(pi);
	return 0;
fail:
	pi_child_free(c);
	pi_gen_close(pi);
	return r;
}

void pi_on_restart(struct loop_timer *t, void *userdata)
{
	struct plugin_instance *pi = userdata;
	(void)t;
	if (pi->stop_requested || pi->bus_up)
		return;
	pi->stats.worker_restarts++;
	int r = pi_gen_start(pi);
	if (r < 0) {
		char reason[256];
		pi_fmt(reason, sizeof(reason), "cannot restart the plugin worker: %s",
		       strerror(-r));
		pi_report_failure(pi, reason);
		pi_process_schedule_restart(pi);
	}
}

/* process mode: resolve and check what the child needs */
int pi_process_prepare(struct plugin_instance *pi)
{
	char buf[PATH_MAX];
	struct stat st;
	int r;
	if (pi->cfg.worker_path) {
		pi->worker_path = strdup(pi->cfg.worker_path);
	} else {
		r = plugin_instance_default_worker_path(buf, sizeof(buf));
		if (r < 0) {
			log_error(pi->log_comp,
				  "process isolation: no leasehold-worker program (%s)", buf);
			return r;
		}
		pi->worker_path = strdup(buf);
	}
	if (!pi->worker_path)
		return -ENOMEM;
	if (access(pi->worker_path, X_OK) < 0) {
		r = -errno;
		log_error(pi->log_comp, "process isolation: %s: %s", pi->worker_path, strerror(-r));
		return r;
	}
	if (!pi->lp->copy_path || stat(pi->lp->copy_path, &st) < 0)
		return pi->lp->copy_path ? -errno : -EINVAL;
	pi->copy_dev = st.st_dev;
	pi->copy_ino = st.st_ino;
	if (pi->cfg.runtime_dir) {
		pi->runtime_dir = strdup(pi->cfg.runtime_dir);
	} else {
		const char *slash = strrchr(pi->lp->copy_path, '/');
		pi->runtime_dir =
		    slash ? strndup(pi->lp->copy_path, (size_t)(slash - pi->lp->copy_path))
			  : strdup(".");
	}
	if (!pi->runtime_dir)
		return -ENOMEM;
	if (pi->cfg.worker_stderr && !(pi->worker_stderr = strdup(pi->cfg.worker_stderr)))
		return -ENOMEM;
	/* the children's activity page; posix_spawn's dup2 makes it fd 3 of
	 * the child, without MFD_CLOEXEC's effect there */
	pi->activity_fd = memfd_create("leasehold-activity", MFD_CLOEXEC);
	if (pi->activity_fd < 0)
		return -errno;
	if (ftruncate(pi->activity_fd, (off_t)sizeof(*pi->activity_page)) < 0)
		return -errno;
	void *m = mmap(NULL, sizeof(*pi->activity_page), PROT_READ | PROT_WRITE, MAP_SHARED,
		       pi->activity_fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	pi->activity_page = m;
	return 0;
}
