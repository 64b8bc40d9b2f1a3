/* SPDX-License-Identifier: MIT */
/*
 * control_transport.c - the control socket on the loop (see
 * control_transport.h for the design notes).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control_transport.h"
#include "control/control_wire.h"
#include "base/log.h"

#define COMP "control"
/* accept() failed for lack of fds or memory: try again after this */
#define ACCEPT_PAUSE_NS (100 * LOOP_NS_PER_MS)
/* connections accepted per wake-up, so one burst cannot starve the loop */
#define ACCEPT_BATCH 64
/* bytes read per read() at most */
#define READ_CHUNK 16384

enum conn_state { C_READING, C_WAITING, C_WRITING, C_CLOSING };

struct control_conn {
	struct control_transport *t;
	int fd;
	struct loop_io *io;
	struct loop_timer *timer; /* reading/writing deadline */
	enum conn_state state;
	struct control_wire_rx rx;
	uint8_t *out; /* frame being written (header + payload) */
	size_t out_len, out_done;
	bool close_after; /* a refusal: close once it is written */
	void *data;
	struct control_conn *prev, *next; /* t->conns, oldest first */
};

struct control_transport {
	struct loop *loop;
	const struct control_transport_ops *ops;
	void *ud;
	uid_t euid;
	size_t max_request, max_wire;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char lock_path[PATH_MAX];
	int lock_fd;
	int fd;
	dev_t dev; /* the socket file we bound, to remove only ours */
	ino_t ino;
	struct loop_io *io;
	struct loop_timer *pause; /* accept() paused (EMFILE...) */
	struct control_conn *conns, *conns_tail;
	size_t n_conns;
};

/* ---- connections ------------------------------------------------------ */

static void control_transport_conn_free(struct control_conn *c)
{
	struct control_transport *t = c->t;

	loop_io_free(c->io);
	if (c->fd >= 0)
		close(c->fd);
	loop_timer_free(c->timer);
	control_wire_rx_reset(&c->rx);
	free(c->out);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		t->conns_tail = c->prev;
	t->n_conns--;
	free(c);
}

/* control_transport_conn_close - the connection is done; the owner of an unanswered request
 * hears of it first (while the handle is still valid). */
static void control_transport_conn_close(struct control_conn *c)
{
	struct control_transport *t = c->t;

	if (c->state == C_WAITING) {
		c->state = C_CLOSING; /* a reply from inside closed() is refused */
		t->ops->closed(t->ud, c);
	}
	control_transport_conn_free(c);
}

static void control_transport_conn_set(struct control_conn *c, enum conn_state s)
{
	uint32_t mask = 0;

	c->state = s;
	switch (s) {
	case C_READING:
		mask = EPOLLIN;
		loop_timer_arm_in(c->timer, CONTROL_IO_TIMEOUT_MS * LOOP_NS_PER_MS);
		break;
	case C_WRITING:
		mask = EPOLLOUT;
		loop_timer_arm_in(c->timer, CONTROL_IO_TIMEOUT_MS * LOOP_NS_PER_MS);
		break;
	case C_WAITING:
		loop_timer_disarm(c->timer);
		break; /* only a hang-up (always reported) */
	case C_CLOSING:
		/* shut down: the hang-up that follows closes it on the loop */
		shutdown(c->fd, SHUT_RDWR);
		loop_timer_arm_in(c->timer, 0);
		break;
	}
	if (loop_io_modify(c->io, mask) < 0 && s != C_CLOSING) {
		c->state = C_CLOSING;
		shutdown(c->fd, SHUT_RDWR);
		loop_timer_arm_in(c->timer, 0);
	}
}

/* control_transport_conn_write - write what is pending; 0 when all is out, -EAGAIN, or
 * another -errno (the peer is gone). */
static int control_transport_conn_write(struct control_conn *c)
{
	while (c->out_done < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_done, c->out_len - c->out_done,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
		}
		c->out_done += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_done = 0;
	return 0;
}

/* control_transport_conn_flush - write and move to the next state; closes on failure. */
static void control_transport_conn_flush(struct control_conn *c)
{
	int r = control_transport_conn_write(c);

	if (r == -EAGAIN) {
		control_transport_conn_set(c, C_WRITING);
		return;
	}
	if (r < 0 || c->close_after) {
		control_transport_conn_set(c, C_CLOSING);
		return;
	}
	control_transport_conn_set(c, C_READING);
}

/* control_transport_conn_queue - frame len bytes of buf for writing. 0 or -errno. */
static int control_transport_conn_queue(struct control_conn *c, const void *buf, size_t len)
{
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	c->out = malloc(CONTROL_WIRE_HEADER + len);
	if (!c->out)
		return -ENOMEM;
	control_wire_header(c->out, (uint32_t)len);
	if (len)
		memcpy(c->out + CONTROL_WIRE_HEADER, buf, len);
	c->out_len = CONTROL_WIRE_HEADER + len;
	c->out_done = 0;
	return 0;
}

int control_conn_reply(struct control_conn *c, const void *buf, size_t len)
{
	int r;

	if (c->state != C_WAITING)
		return -EINVAL;
	r = control_transport_conn_queue(c, buf, len);
	if (r < 0) {
		control_transport_conn_set(c, C_CLOSING);
		return r;
	}
	control_transport_conn_flush(c);
	return 0;
}

void control_conn_close(struct control_conn *c)
{
	if (c->state != C_CLOSING)
		control_transport_conn_set(c, C_CLOSING);
}

void control_conn_set_data(struct control_conn *c, void *data)
{
	c->data = data;
}

void *control_conn_data(const struct control_conn *c)
{
	return c->data;
}

/* control_transport_conn_read - read what the peer sent towards the current frame. */
static void control_transport_conn_read(struct control_conn *c)
{
	struct control_transport *t = c->t;
	uint8_t chunk[READ_CHUNK];

	for (;;) {
		size_t want = control_wire_rx_want(&c->rx), used = 0;
		ssize_t n;
		int r;

		if (want > sizeof(chunk))
			want = sizeof(chunk);
		n = recv(c->fd, chunk, want, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			control_transport_conn_close(c); /* end of stream or an error */
			return;
		}
		r = control_wire_rx_feed(&c->rx, chunk, (size_t)n, &used);
		if (r < 0) {
			log_debug(COMP, "closing a control connection: %s",
				  r == -EBADMSG	  ? "not a leasehold control client"
				  : r == -EMSGSIZE ? "frame too large"
						   : strerror(-r));
			control_transport_conn_close(c);
			return;
		}
		if (r == CONTROL_WIRE_MORE)
			continue;
		/* a whole frame: the request is the owner's until it is answered */
		control_transport_conn_set(c, C_WAITING);
		if (c->state != C_WAITING)
			return; /* could not change the mask: closing */
		t->ops->request(t->ud, c, r == CONTROL_WIRE_FRAME ? c->rx.buf : NULL, c->rx.len);
		/* the owner may have answered (c is READING again) or not: either
		 * way the payload is done with, and nothing else is read now */
		control_wire_rx_reset(&c->rx);
		return;
	}
}

static void control_transport_on_conn_io(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct control_conn *c = userdata;

	(void)io;
	(void)fd;
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* EPOLLHUP is reported whatever the mask: never leave it open.
		 * A request that came with the hang-up could not be answered
		 * anyway: it is dropped unread. */
		control_transport_conn_close(c);
		return;
	}
	switch (c->state) {
	case C_READING:
		if (events & EPOLLIN)
			control_transport_conn_read(c);
		return;
	case C_WRITING:
		if (events & EPOLLOUT)
			control_transport_conn_flush(c);
		return;
	case C_WAITING:
	case C_CLOSING:
		return;
	}
}

static void control_transport_on_conn_timer(struct loop_timer *timer, void *userdata)
{
	struct control_conn *c = userdata;

	(void)timer;
	if (c->state == C_READING && control_wire_rx_started(&c->rx))
		log_debug(COMP, "closing a control connection: no whole request within %d ms",
			  CONTROL_IO_TIMEOUT_MS);
	else if (c->state == C_WRITING)
		log_debug(COMP, "closing a control connection: the reply was not read within %d ms",
			  CONTROL_IO_TIMEOUT_MS);
	if (c->state != C_WAITING)
		control_transport_conn_close(c);
}

/* ---- accepting -------------------------------------------------------- */

/* control_transport_evict_idle - make room: close the oldest connection without a request in
 * progress. Returns true when one was closed. */
static bool control_transport_evict_idle(struct control_transport *t)
{
	for (struct control_conn *c = t->conns; c; c = c->next) {
		if (c->state == C_READING || c->state == C_CLOSING) {
			control_transport_conn_close(c);
			return true;
		}
	}
	return false;
}

/* refuse - send the owner's refusal frame, then close. */
static void control_transport_refuse(struct control_conn *c, int why, uid_t uid)
{
	struct control_transport *t = c->t;
	uint8_t *buf = NULL;
	size_t len = 0;

	if (t->ops->refusal(t->ud, why, uid, &buf, &len) < 0 || control_transport_conn_queue(c, buf, len) < 0) {
		free(buf);
		control_transport_conn_close(c);
		return;
	}
	free(buf);
	c->close_after = true;
	control_transport_conn_flush(c);
}

static void control_transport_conn_add(struct control_transport *t, int fd)
{
	struct control_conn *c = calloc(1, sizeof(*c));
	struct ucred cred = {0};
	socklen_t clen = sizeof(cred);
	bool busy = false;

	if (!c) {
		close(fd);
		return;
	}
	if (t->n_conns >= CONTROL_MAX_CONNS)
		busy = !control_transport_evict_idle(t);
	c->t = t;
	c->fd = fd;
	control_wire_rx_init(&c->rx, t->max_request, t->max_wire);
	if (loop_timer_new(t->loop, control_transport_on_conn_timer, c, &c->timer) < 0 ||
	    loop_io_add(t->loop, fd, EPOLLIN, control_transport_on_conn_io, c, &c->io) < 0) {
		loop_timer_free(c->timer);
		free(c);
		close(fd);
		return;
	}
	c->prev = t->conns_tail;
	if (t->conns_tail)
		t->conns_tail->next = c;
	else
		t->conns = c;
	t->conns_tail = c;
	t->n_conns++;
	c->state = C_CLOSING; /* until it is decided below */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
		control_transport_conn_close(c);
		return;
	}
	c->state = C_READING;
	if (cred.uid != 0 && cred.uid != t->euid) {
		log_warn(COMP, "refused a control connection from uid %u (pid %ld): only root and "
			       "uid %u may use it",
			 (unsigned)cred.uid, (long)cred.pid, (unsigned)t->euid);
		control_transport_refuse(c, -EPERM, cred.uid);
		return;
	}
	if (busy) {
		log_warn(COMP, "refused a control connection: %d requests in progress",
			 CONTROL_MAX_CONNS);
		control_transport_refuse(c, -EBUSY, cred.uid);
		return;
	}
	control_transport_conn_set(c, C_READING);
}

static void control_transport_on_pause_end(struct loop_timer *timer, void *userdata)
{
	struct control_transport *t = userdata;

	(void)timer;
	loop_io_modify(t->io, EPOLLIN);
}

static void control_transport_on_listen(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct control_transport *t = userdata;

	(void)events;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd >= 0) {
			control_transport_conn_add(t, cfd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		/* EMFILE, ENFILE, ENOBUFS, ENOMEM: the listening socket stays
		 * readable, so waiting on it now would spin */
		log_warn(COMP, "cannot accept a control connection: %s (pausing 100 ms)",
			 strerror(errno));
		loop_io_modify(io, 0);
		loop_timer_arm_in(t->pause, ACCEPT_PAUSE_NS);
		return;
	}
}

/* ---- the socket file -------------------------------------------------- */

/* control_transport_ensure_parent_dir - create the socket's directory (one level, 0755) if it
 * is missing, like /run/leasehold on a fresh boot. */
static void control_transport_ensure_parent_dir(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		log_debug(COMP, "mkdir %s: %s", dir, strerror(errno));
}

static void control_transport_fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, strlen(path) + 1); /* checked by the caller */
}

/* control_transport_take_lock - hold PATH.lock (flock) for the transport's life. The file is
 * removed at free while still locked; a daemon that locked a file that was
 * removed meanwhile notices (the path names another inode) and tries again.
 * 0, -EADDRINUSE (locked by another daemon) or -errno. */
static int control_transport_take_lock(struct control_transport *t)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct stat fst, pst;
		int fd = open(t->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int r = errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
			close(fd);
			return r;
		}
		if (fstat(fd, &fst) == 0 && stat(t->lock_path, &pst) == 0 &&
		    fst.st_dev == pst.st_dev && fst.st_ino == pst.st_ino) {
			t->lock_fd = fd;
			return 0;
		}
		close(fd);
	}
	return -EAGAIN;
}

/* control_transport_clear_stale - with the lock held: remove a socket file nobody answers on.
 * 0 (nothing there now), -EADDRINUSE (someone answers), -EEXIST (not a
 * socket) or -errno. */
static int control_transport_clear_stale(const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	control_transport_fill_addr(&sa, path);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	r = r == 0 ? 0 : errno;
	close(fd);
	if (r == 0 || r == EAGAIN)
		return -EADDRINUSE; /* accepted, or its backlog is full: alive */
	if (r != ECONNREFUSED)
		return -r;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	log_info(COMP, "removed the stale control socket %s (its daemon is gone)", path);
	return 0;
}

/* control_transport_claim_path - take the path's lock and remove a stale
 * socket left by a dead leasehold. 0 or -errno with the reason in err. */
static int control_transport_claim_path(struct control_transport *t, char *err, size_t err_len)
{
	control_transport_ensure_parent_dir(t->path);
	int r = control_transport_take_lock(t);
	if (r == -EADDRINUSE) {
		snprintf(err, err_len,
			 "another leasehold serves %s (it holds %s); stop it or use another "
			 "--control path",
			 t->path, t->lock_path);
		return r;
	} else if (r < 0) {
		snprintf(err, err_len, "cannot lock %s: %s", t->lock_path, strerror(-r));
		return r;
	}
	r = control_transport_clear_stale(t->path);
	if (r == -EADDRINUSE)
		snprintf(err, err_len,
			 "%s is in use: a process that does not take %s answers on it (an older "
			 "leasehold?)",
			 t->path, t->lock_path);
	else if (r == -EEXIST)
		snprintf(err, err_len, "%s exists and is not a socket (not removing it)", t->path);
	else if (r < 0)
		snprintf(err, err_len, "cannot check %s: %s", t->path, strerror(-r));
	return r;
}

/* control_transport_listen - bind the socket at t->path, mode 0600, and
 * listen. 0 or -errno with the reason in err (a bound path is removed). */
static int control_transport_listen(struct control_transport *t, char *err, size_t err_len)
{
	struct sockaddr_un sa;
	struct stat st;
	int r;

	t->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t->fd < 0) {
		r = -errno;
		snprintf(err, err_len, "control socket: %s", strerror(-r));
		return r;
	}
	control_transport_fill_addr(&sa, t->path);
	if (bind(t->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		snprintf(err, err_len, "cannot bind %s: %s", t->path, strerror(-r));
		return r;
	}
	/* 0600 before listen(): no connection is accepted with a wider mode */
	if (chmod(t->path, 0600) < 0 || lstat(t->path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    (st.st_mode & 07777) != 0600) {
		snprintf(err, err_len, "control socket %s: cannot make it mode 0600", t->path);
		unlink(t->path);
		return -EACCES;
	}
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	if (listen(t->fd, 128) < 0) {
		r = -errno;
		snprintf(err, err_len, "cannot listen on %s: %s", t->path, strerror(-r));
		unlink(t->path);
		return r;
	}
	return 0;
}

int control_transport_new(struct loop *l, const struct control_transport_config *cfg,
			  const struct control_transport_ops *ops, void *ud,
			  struct control_transport **ret, char *err, size_t err_len)
{
	struct control_transport *t;
	int r;

	if (!l || !cfg || !cfg->path || !ops || !ops->request || !ops->closed || !ops->refusal ||
	    !ret) {
		snprintf(err, err_len, "control: invalid arguments");
		return -EINVAL;
	}
	if (!cfg->path[0] || strlen(cfg->path) >= sizeof(t->path)) {
		snprintf(err, err_len, "control socket path '%s' is empty or too long", cfg->path);
		return -ENAMETOOLONG;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	t->loop = l;
	t->ops = ops;
	t->ud = ud;
	t->euid = geteuid();
	t->max_request = cfg->max_request;
	t->max_wire = cfg->max_wire;
	t->fd = -1;
	t->lock_fd = -1;
	snprintf(t->path, sizeof(t->path), "%s", cfg->path);
	if (snprintf(t->lock_path, sizeof(t->lock_path), "%s.lock", cfg->path) >=
	    (int)sizeof(t->lock_path)) {
		snprintf(err, err_len, "control socket path '%s' is too long", cfg->path);
		r = -ENAMETOOLONG;
		goto fail;
	}
	if ((r = control_transport_claim_path(t, err, err_len)) < 0 ||
	    (r = control_transport_listen(t, err, err_len)) < 0)
		goto fail;
	if ((r = loop_timer_new(l, control_transport_on_pause_end, t, &t->pause)) < 0 ||
	    (r = loop_io_add(l, t->fd, EPOLLIN, control_transport_on_listen, t, &t->io)) < 0) {
		snprintf(err, err_len, "control: loop: %s", strerror(-r));
		unlink(t->path);
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	t->ino = 0; /* nothing of ours to remove */
	control_transport_free(t);
	return r;
}

void control_transport_free(struct control_transport *t)
{
	struct stat st;

	if (!t)
		return;
	while (t->conns)
		control_transport_conn_free(t->conns);
	loop_io_free(t->io);
	loop_timer_free(t->pause);
	if (t->fd >= 0)
		close(t->fd);
	/* remove the file only if it is still the one we bound */
	if (t->ino && lstat(t->path, &st) == 0 && st.st_dev == t->dev && st.st_ino == t->ino)
		unlink(t->path);
	if (t->lock_fd >= 0) {
		unlink(t->lock_path); /* while locked: see control_transport_take_lock */
		close(t->lock_fd);
	}
	free(t);
}

size_t control_transport_conns(const struct control_transport *t)
{
	return t ? t->n_conns : 0;
}
