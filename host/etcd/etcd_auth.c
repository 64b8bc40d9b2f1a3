/* SPDX-License-Identifier: MIT */
/*
 * etcd_auth.c - authentication of the etcd client: a transfer that needs a
 * token and has none waits on the client's wait list; a single
 * authenticate call serves all waiters; a token the server rejects is
 * dropped once per token. Reading guide: etcd.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

void etcd_wait_unlink(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (!x->waiting_auth)
		return;
	if (x->wprev)
		x->wprev->wnext = x->wnext;
	else
		c->wait_head = x->wnext;
	if (x->wnext)
		x->wnext->wprev = x->wprev;
	else
		c->wait_tail = x->wprev;
	x->wprev = x->wnext = NULL;
	x->waiting_auth = false;
}

void etcd_wait_push(struct xfer *x)
{
	struct etcd_client *c = x->c;
	x->waiting_auth = true;
	x->wnext = NULL;
	x->wprev = c->wait_tail;
	if (c->wait_tail)
		c->wait_tail->wnext = x;
	else
		c->wait_head = x;
	c->wait_tail = x;
}

/* auth_start - send the authenticate call unless one is in flight. */
int etcd_auth_start(struct etcd_client *c)
{
	if (c->auth_call)
		return 0;
	char *body = NULL;
	int r = etcd_json_auth_req(c->user, c->password, &body);
	if (r < 0)
		return r;
	struct etcd_call *call =
	    etcd_call_alloc(c, "authenticate", "/v3/auth/authenticate", body, NULL, NULL, NULL);
	if (!call) {
		free(body);
		return -ENOMEM;
	}
	call->x.is_auth = true;
	r = etcd_xfer_send(&call->x);
	if (r < 0) {
		etcd_call_free(call);
		return r;
	}
	c->auth_call = call;
	return 0;
}

/* etcd_auth_xfer_fail - a transfer could not be (re)started: report err to its owner. */
static void etcd_auth_xfer_fail(struct xfer *x, int err)
{
	if (x->kind == XFER_CALL)
		etcd_call_finish((struct etcd_call *)(void *)x, err, NULL);
	else
		etcd_stream_failed(x->c, err);
}

/* xfer_submit - send now, or wait for a token. Called from the loop only
 * (or from an API call for a fresh call, where failures are returned). */
void etcd_xfer_submit(struct xfer *x)
{
	struct etcd_client *c = x->c;
	if (c->user && !x->is_auth && !c->token) {
		etcd_wait_push(x);
		int r = etcd_auth_start(c);
		if (r < 0) {
			etcd_wait_unlink(x);
			etcd_auth_xfer_fail(x, r);
		}
		return;
	}
	int r = etcd_xfer_send(x);
	if (r < 0)
		etcd_auth_xfer_fail(x, r);
}

void etcd_auth_done(struct etcd_client *c, int err)
{
	/* release waiters one at a time: callbacks may cancel others */
	while (c->wait_head) {
		struct xfer *x = c->wait_head;
		etcd_wait_unlink(x);
		if (err < 0) {
			etcd_auth_xfer_fail(x, err);
			continue;
		}
		if (!c->token) {
			/* token dropped again meanwhile: queue behind a new auth */
			etcd_xfer_submit(x);
			continue;
		}
		int r = etcd_xfer_send(x);
		if (r < 0)
			etcd_auth_xfer_fail(x, r);
	}
}

bool etcd_is_invalid_token(int grpc_code, const char *msg)
{
	return grpc_code == 16 || (msg && strstr(msg, "invalid auth token"));
}

/* drop_token - forget the token a transfer was sent with (once per token). */
void etcd_drop_token(struct etcd_client *c, uint64_t gen)
{
	if (c->token && gen == c->token_gen) {
		free(c->token);
		c->token = NULL;
	}
}

void etcd_auth_call_done(struct etcd_call *call, CURLcode rc, CURL *e, long http)
{
	struct etcd_client *c = call->x.c;
	int err = 0;
	if (rc != CURLE_OK)
		err = etcd_curl_to_errno(&call->x, rc);
	else {
		char *token = NULL;
		err = etcd_json_auth_token(call->x.resp.data ? call->x.resp.data : "",
					   call->x.resp.len, &token);
		if (err == 0) {
			free(c->token);
			c->token = token;
			c->token_gen++;
			c->n_auth++;
		} else if (err != -EBADMSG && err != -ENOMEM)
			err = -EACCES; /* any gateway error of authenticate: auth failed */
		else if (http / 100 != 2)
			err = -EIO;
	}
	log_debug("etcd", "authenticate: %s", err < 0 ? etcd_strerror(err) : "ok");
	c->auth_call = NULL;
	etcd_call_unlink(call);
	etcd_call_free(call);
	etcd_auth_done(c, err);
}
