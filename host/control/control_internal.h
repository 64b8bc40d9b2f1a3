/* SPDX-License-Identifier: MIT */
/*
 * control_internal.h - what the control server's files share: the server
 * (struct control), the requests it keeps until they are answered (struct
 * request; the design notes atop control.c say when), and the functions one
 * file calls in another. Loop thread only; no other folder includes it.
 */
#ifndef LH_CONTROL_INTERNAL_H
#define LH_CONTROL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "control/control_codec.h"
#include "control/control_reply.h"
#include "control/control_transport.h"

#define COMP "control"
/* wait-ready requests parked at most at once; more get CODE_BUSY */
#define CONTROL_MAX_PARKED 256
/* roles_set/roles_clear requests waiting for done() at most at once; more
 * get CODE_BUSY */
#define CONTROL_MAX_ASYNC 64

enum request_state { R_PARKED, R_ASYNC };

/* a request answered later (see the design notes) */
struct request {
	struct control *c;
	struct control_conn *conn; /* NULL once the client went away */
	enum request_state state;
	struct request *prev, *next;	 /* c->requests */
	struct loop_timer *timer;	 /* parked: the wait-ready deadline */
	uint32_t timeout_ms;		 /* parked: as asked */
	char name[CONTROL_NAME_MAX + 1]; /* parked: plugin; async: node id */
	/* async (roles_set / roles_clear / members_forget) */
	int kind;			   /* the request's kind */
	char plugin[CONTROL_NAME_MAX + 1]; /* members_forget: the plugin */
	int64_t rev;	 /* parked reconcile, switchover: the request's revision */
	char target[CONTROL_NODE_MAX + 1]; /* switchover: the target ("" = any) */
	char from[CONTROL_NODE_MAX + 1];   /* ... and the leader it asked to leave */
	bool in_op;	 /* the op has not returned yet */
	bool early_done; /* done() ran while in_op: the result below */
	int early_err;
	char early_msg[256];
};

struct control {
	struct loop *loop;
	const struct control_ops *ops;
	void *ud;
	struct control_transport *transport;
	struct request *requests;
	size_t n_parked;
	size_t n_async;
	bool busy;	     /* inside a handler: control_notify() is deferred */
	bool notify_pending; /* control_notify() was called while busy */
	struct control_plugin *pbuf;
	size_t pcap;
	struct control_member *mbuf;
	size_t mcap;
	struct control_role_entry *rbuf;
	size_t rcap;
};

/* ---- control.c: answering and the requests kept ---- */

/* control_send_reply - answer conn's request with rp (rp stays the
 * caller's); out of memory closes the connection */
void control_send_reply(struct control *c, struct control_conn *conn, struct control_reply *rp);
/* control_request_new - a request kept on conn, linked into c (the caller
 * sets its state and counts it); NULL when out of memory */
struct request *control_request_new(struct control *c, struct control_conn *conn);
/* control_request_free - unlink, uncount and free rq; its connection (if
 * any) forgets it */
void control_request_free(struct request *rq);
/* control_run_deferred_notify - leave the busy section; run a
 * control_notify() that came in meanwhile */
void control_run_deferred_notify(struct control *c);

/* ---- control_verbs.c: the daemon's rows and the verbs answered at once ---- */

/* control_fetch_plugins - every plugin row into c->pbuf (*ret_n rows;
 * valid until the next fetch). 0, -ENOMEM or -EAGAIN. */
int control_fetch_plugins(struct control *c, size_t *ret_n);
/* control_find_plugin - the row of plugin (or file) name among the n
 * fetched, or NULL */
const struct control_plugin *control_find_plugin(const struct control *c, size_t n, const char *name);
/* control_not_supported - the reply when the daemon lacks an op */
void control_not_supported(struct control_reply *rp);
/* the verbs: each fills rp; those returning bool return true when the
 * request is kept and answered later (no reply to send now) */
void control_do_plugins(struct control *c, struct control_reply *rp);
void control_do_status(struct control *c, struct control_reply *rp, const char *name);
void control_do_members(struct control *c, struct control_reply *rp, const char *name);
void control_do_reload(struct control *c, struct control_reply *rp, const char *name);
bool control_do_wait_ready(struct control *c, struct control_conn *conn, struct control_reply *rp,
			   const char *name, uint32_t timeout_ms);
void control_do_roles_list(struct control *c, struct control_reply *rp);
void control_do_leave(struct control *c, struct control_reply *rp);

/* ---- control_writes.c: the operator's record writes ---- */

bool control_do_async(struct control *c, struct control_conn *conn, struct control_reply *rp,
		      const Leasehold__Control__Request *req);

/* ---- control_deferred.c: the verbs the daemon answers later ---- */

bool control_do_verb(struct control *c, struct control_conn *conn, struct control_reply *rp,
		     const Leasehold__Control__Request *req);
bool control_do_shadow(struct control *c, struct control_conn *conn, struct control_reply *rp,
		       const Leasehold__Control__Request *req);
bool control_do_config(struct control *c, struct control_conn *conn, struct control_reply *rp,
		       const Leasehold__Control__Request *req);
/* control_reconcile_answer, control_switchover_answer - a parked request
 * whose plugin row p (NULL: gone) may answer it: fill rp and return true
 * when it is answered (control_notify then unparks it) */
bool control_reconcile_answer(const struct request *rq, const struct control_plugin *p,
			      struct control_reply *rp);
bool control_switchover_answer(const struct request *rq, const struct control_plugin *p,
			       struct control_reply *rp);

#endif
