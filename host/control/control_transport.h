/* SPDX-License-Identifier: MIT */
/*
 * control_transport.h - the control socket itself: a listening AF_UNIX
 * stream socket served on the daemon's loop, carrying control_wire.h frames.
 * It knows connections, frames, peers and deadlines; what a frame means is
 * control.c's business.
 *
 * Why not nng: the control socket used nng rep0 over ipc://. In nng up to
 * 1.5.2 (the libnng1 of Debian 12) a peer that disconnects during the SP
 * handshake breaks the ipc listener (nng issue #1518, fixed by commit
 * 9248ed7 "Disconnect during negotiation breaks listener", first released in
 * nng 1.6.0): after one `nc -U` or health probe that connected and closed,
 * the daemon's loop and nng's poller spun at 100% CPU and no leaseholdctl
 * call was answered again. The control socket is not the host<->plugin bus,
 * so it does not need nng: it is a plain socket on the loop whose every
 * state is bounded (see the limits below).
 *
 * Design notes
 * - Loop thread only. One connection carries one request at a time; after
 *   its reply is written it may send the next one.
 * - A connection is READING (a frame; a deadline of CONTROL_IO_TIMEOUT_MS for
 *   the whole frame, so a peer that sends half a header and hangs is closed),
 *   WAITING (its request was handed to ops->request and is unanswered: no
 *   deadline here, the request kind has its own; only a hang-up is watched)
 *   or WRITING (the reply; the same deadline for the whole reply, so a peer
 *   that does not read cannot keep it). A hang-up or error in any state
 *   closes the connection at once: epoll reports EPOLLHUP whatever the mask,
 *   and a hang-up left open is what makes an event loop spin.
 * - Peers: SO_PEERCRED at accept; a uid other than root and the daemon's
 *   own euid gets ops->refusal(-EPERM) as its only frame and is closed
 *   without anything it sent being read. The file is 0600 (chmod'ed between
 *   bind() and listen(), so no connection is ever accepted with a wider
 *   mode), so this only matters when the mode was widened.
 * - Limits: CONTROL_MAX_CONNS connections. At the limit a new connection
 *   evicts the oldest connection that has no request in progress (READING);
 *   when every connection has one, the newcomer gets ops->refusal(-EBUSY).
 *   Frames over config.max_request are read, dropped and announced as too
 *   large; over config.max_wire (or with a wrong magic) the connection is
 *   closed. When accept() fails for lack of fds or memory the listener pauses
 *   for 100 ms rather than spin on a readable listening socket.
 * - One daemon per path: the transport holds an flock on "PATH.lock" for its
 *   life. A second daemon on the same path fails to start with -EADDRINUSE
 *   and leaves the first one's socket alone. Holding the lock, a socket file
 *   that refuses connections is stale (a daemon that was killed) and is
 *   replaced; one that accepts a connection (a daemon that does not take the
 *   lock, e.g. an older leasehold) is left alone: -EADDRINUSE. A path that
 *   exists and is not a socket is never removed: -EEXIST.
 */
#ifndef LH_CONTROL_TRANSPORT_H
#define LH_CONTROL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/loop.h"

/* connections at most (parked wait-ready and pending roles requests hold
 * one each: keep above control_internal.h's CONTROL_MAX_PARKED +
 * CONTROL_MAX_ASYNC) */
#define CONTROL_MAX_CONNS 384
/* a frame must be read, and a reply written, within this */
#define CONTROL_IO_TIMEOUT_MS 5000

struct control_transport;
struct control_conn;

struct control_transport_ops {
	/* request - a complete frame from conn: buf (len bytes, borrowed for the
	 * call), or buf NULL when its len bytes were over max_request and
	 * skipped. The connection reads nothing more until it is answered with
	 * control_conn_reply (now or later). */
	void (*request)(void *ud, struct control_conn *conn, const uint8_t *buf, size_t len);
	/* closed - conn went away (hang-up, error) while its request was
	 * unanswered; the handle is invalid once this returns. Not called from
	 * control_transport_free. */
	void (*closed)(void *ud, struct control_conn *conn);
	/* refusal - the frame payload sent to a connection refused before
	 * anything is read from it: why is -EPERM (uid not allowed) or -EBUSY
	 * (too many connections). On 0, *ret_buf is malloc'd (the transport
	 * frees it); on -errno the connection is closed without a word. */
	int (*refusal)(void *ud, int why, uid_t uid, uint8_t **ret_buf, size_t *ret_len);
};

struct control_transport_config {
	const char *path;   /* the socket file */
	size_t max_request; /* frames kept up to this; bigger: buf NULL */
	size_t max_wire;    /* bigger frames close the connection */
};

/* control_transport_new - take the lock, replace a stale socket, listen on
 * cfg->path (mode 0600; its directory is created, 0755, if missing). On
 * success *ret owns the transport; ops and ud must outlive it. Returns 0 or
 * -errno with a message in err (-EADDRINUSE: another daemon serves the path;
 * -EEXIST: the path is not a socket); *ret untouched on failure. */
int control_transport_new(struct loop *l, const struct control_transport_config *cfg,
			  const struct control_transport_ops *ops, void *ud,
			  struct control_transport **ret, char *err, size_t err_len);

/* control_transport_free - close every connection (no ops are called),
 * remove the socket file (if it is still ours) and the lock file. Loop
 * thread, not from inside an op. Accepts NULL. */
void control_transport_free(struct control_transport *t);

/* control_transport_conns - open connections (tests, stats). */
size_t control_transport_conns(const struct control_transport *t);

/* control_conn_reply - answer conn's request with one frame of len bytes
 * (copied). The connection then reads its next request. If the reply cannot
 * be queued (out of memory, len too large) the connection is closed instead.
 * Never frees conn synchronously, so it may be called from inside
 * ops->request. Returns 0 or -errno. */
int control_conn_reply(struct control_conn *conn, const void *buf, size_t len);

/* control_conn_close - give up on conn's request: the connection is closed
 * (on the loop, never synchronously) without an answer; ops->closed is not
 * called for it. */
void control_conn_close(struct control_conn *conn);

/* control_conn_set_data / control_conn_data - one pointer the owner of the
 * request keeps on the connection. */
void control_conn_set_data(struct control_conn *conn, void *data);
void *control_conn_data(const struct control_conn *conn);

#endif
