/* SPDX-License-Identifier: MIT */
/*
 * etcd_call.c - calls of the etcd client: a deadline for the whole call,
 * connection failures retried on the next endpoint (once per endpoint),
 * attempts (etcd_call_opts) moved on when unanswered or "unavailable", one
 * re-authentication on a rejected token; and the KV, txn, lease and
 * compaction API built on them. Reading guide: etcd.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "etcd/etcd_internal.h"
#include "base/log.h"

struct etcd_call *etcd_call_alloc(struct etcd_client *c, const char *kind, const char *path,
				  char *body, const struct etcd_call_opts *o, etcd_cb cb, void *ud)
{
	struct etcd_call *call = calloc(1, sizeof(*call));
	if (!call)
		return NULL;
	call->magic = ETCD_CALL_MAGIC;
	call->x.kind = XFER_CALL;
	call->x.c = c;
	call->x.path = path;
	call->x.body = body;
	call->kind = kind;
	call->cb = cb;
	call->ud = ud;
	uint32_t t = o && o->timeout_ms ? o->timeout_ms : c->request_timeout_ms;
	call->started = loop_now();
	call->deadline = call->started + ms_to_ns(t);
	if (o) {
		call->attempt_ns = ms_to_ns(o->attempt_timeout_ms);
		call->require_leader = o->require_leader;
	}
	return call;
}

void etcd_call_free(struct etcd_call *call)
{
	CHECK_OBJ(call, ETCD_CALL_MAGIC);
	etcd_xfer_release(&call->x);
	call->magic = 0;
	free(call);
}

static void etcd_call_link(struct etcd_call *call)
{
	struct etcd_client *c = call->x.c;
	call->prev = NULL;
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
}

void etcd_call_unlink(struct etcd_call *call)
{
	struct etcd_client *c = call->x.c;
	if (call->prev)
		call->prev->next = call->next;
	else if (c->calls == call)
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	call->prev = call->next = NULL;
}

/* call_finish - run the callback (if any) and free the call. */
void etcd_call_finish(struct etcd_call *call, int err, const struct etcd_response *resp)
{
	CHECK_OBJ(call, ETCD_CALL_MAGIC);
	struct etcd_client *c = call->x.c;
	etcd_call_unlink(call);
	etcd_xfer_release(&call->x);
	call->magic = 0; /* the handle is invalid once the callback has started */
	if (etcd_err_unreachable(err))
		c->unreachable = true;
	else if (err != -ECANCELED)
		c->unreachable = false; /* etcd answered (with a result or an error of its own) */
	if (c->observer)
		c->observer->call_done(c->observer_ud, call->kind, err, loop_now() - call->started);
	if (call->cb)
		call->cb(call->x.c, err, resp, call->ud);
	free(call);
}

/* etcd_call_retry_elsewhere - for a call with attempts (etcd_call_opts): its attempt
 * went unanswered (unavailable false) or was answered "unavailable": move
 * the client on and send the call again while its deadline and its budget
 * allow. True when it was sent again (the call lives on). */
static bool etcd_call_retry_elsewhere(struct etcd_call *call, bool unavailable)
{
	struct xfer *x = &call->x;
	struct etcd_client *c = x->c;
	if (!call->attempt_ns || x->is_auth || loop_now() >= call->deadline)
		return false;
	if (unavailable && ++call->unavailable_tries >= c->n_endpoints)
		return false;
	etcd_advance_endpoint(x);
	etcd_xfer_detach(x);
	return etcd_xfer_send(x) == 0;
}

void etcd_call_on_done(struct etcd_call *call, CURLcode rc)
{
	CHECK_OBJ(call, ETCD_CALL_MAGIC);
	struct xfer *x = &call->x;
	struct etcd_client *c = x->c;
	CURL *e = x->easy;
	long http = 0;
	int err;
	struct etcd_response *resp = NULL, *eresp = NULL;

	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
	if (rc != CURLE_OK)
		log_debug("etcd", "%s on %s: %s", x->path, c->endpoints[x->ep],
			  x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
	if (rc != CURLE_OK && etcd_is_connect_failure(e, rc)) {
		etcd_advance_endpoint(x);
		x->ep_tries++;
		etcd_xfer_detach(x);
		if (x->ep_tries < c->n_endpoints && loop_now() < call->deadline) {
			int r = etcd_xfer_send(x);
			if (r == 0)
				return;
			err = r;
		} else
			err = loop_now() >= call->deadline ? -ETIMEDOUT : -ECONNREFUSED;
		if (x->is_auth) {
			c->auth_call = NULL;
			etcd_call_unlink(call);
			etcd_call_free(call);
			etcd_auth_done(c, err);
			return;
		}
		etcd_call_finish(call, err, NULL);
		return;
	}
	if (x->is_auth) {
		etcd_auth_call_done(call, rc, e, http);
		return;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT && etcd_call_retry_elsewhere(call, false))
		return;
	etcd_xfer_detach(x);
	if (rc != CURLE_OK) {
		etcd_call_finish(call, etcd_curl_to_errno(x, rc), NULL);
		return;
	}
	err = etcd_json_parse_response(call->kind, x->resp.data ? x->resp.data : "", x->resp.len,
				       &resp, &eresp);
	if (err == 0 && http / 100 != 2) {
		/* a success shape with an HTTP error status: not the gateway */
		etcd_response_free(resp);
		resp = NULL;
		err = -EIO;
	} else if (err == -EBADMSG && http / 100 != 2)
		err = -EIO; /* e.g. an HTML 404 from something that is not etcd */
	if (err == -EIO)
		snprintf(c->last_failure, sizeof(c->last_failure), "%s%s: HTTP %ld",
			 c->endpoints[x->ep], x->path, http);
	if (err == -EAGAIN && eresp && etcd_call_retry_elsewhere(call, true)) {
		log_debug("etcd", "%s on %s: %s; trying %s", x->path, c->endpoints[x->ep],
			  eresp->error_message ? eresp->error_message : "unavailable",
			  c->endpoints[c->cur_ep]);
		etcd_response_free(eresp);
		return;
	}
	if (eresp && c->user && !call->reauthed &&
	    etcd_is_invalid_token(eresp->grpc_code, eresp->error_message)) {
		/* expired/revoked token: authenticate again and retry once */
		log_debug("etcd", "token rejected (%s), re-authenticating", eresp->error_message);
		etcd_response_free(eresp);
		call->reauthed = true;
		etcd_drop_token(c, x->token_gen);
		x->ep_tries = 0;
		etcd_xfer_submit(x);
		return;
	}
	etcd_call_finish(call, err, err < 0 ? eresp : resp);
	etcd_response_free(resp);
	etcd_response_free(eresp);
}

/* etcd_call_start - queue a call; body is owned on success and on failure. */
static int etcd_call_start(struct etcd_client *c, const char *kind, const char *path, char *body,
		      const struct etcd_call_opts *o, etcd_cb cb, void *ud,
		      struct etcd_call **ret_call)
{
	int r;
	if (!cb) {
		free(body);
		return -EINVAL;
	}
	struct etcd_call *call = etcd_call_alloc(c, kind, path, body, o, cb, ud);
	if (!call) {
		free(body);
		return -ENOMEM;
	}
	if (c->user && !c->token) {
		r = etcd_auth_start(c);
		if (r < 0)
			goto fail;
		etcd_wait_push(&call->x);
	} else {
		r = etcd_xfer_send(&call->x);
		if (r < 0)
			goto fail;
	}
	etcd_call_link(call);
	if (ret_call)
		*ret_call = call;
	return 0;
fail:
	etcd_call_free(call);
	return r;
}

void etcd_call_cancel(struct etcd_call *call)
{
	if (!call)
		return;
	CHECK_OBJ(call, ETCD_CALL_MAGIC);
	etcd_call_unlink(call);
	etcd_call_free(call);
}

int etcd_range(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
	       etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_range_req(op, &body);
	return r < 0 ? r : etcd_call_start(c, "range", "/v3/kv/range", body, o, cb, ud, ret_call);
}

int etcd_put(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
	     etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_put_req(op, &body);
	return r < 0 ? r : etcd_call_start(c, "put", "/v3/kv/put", body, o, cb, ud, ret_call);
}

int etcd_delete(struct etcd_client *c, const struct etcd_op *op, const struct etcd_call_opts *o,
		etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_delete_req(op, &body);
	return r < 0
		   ? r
		   : etcd_call_start(c, "deleterange", "/v3/kv/deleterange", body, o, cb, ud, ret_call);
}

int etcd_txn(struct etcd_client *c, const struct etcd_compare *cmps, size_t n_cmps,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, const struct etcd_call_opts *o, etcd_cb cb, void *ud,
	     struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_txn_req(cmps, n_cmps, success, n_success, failure, n_failure, &body);
	return r < 0 ? r : etcd_call_start(c, "txn", "/v3/kv/txn", body, o, cb, ud, ret_call);
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, const struct etcd_call_opts *o,
		     etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	if (ttl_s <= 0)
		return -EINVAL;
	int r = etcd_json_int_req("TTL", ttl_s, &body);
	return r < 0 ? r
		     : etcd_call_start(c, "lease_grant", "/v3/lease/grant", body, o, cb, ud, ret_call);
}

int etcd_lease_keepalive(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
			 etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_int_req("ID", lease_id, &body);
	return r < 0 ? r
		     : etcd_call_start(c, "lease_keepalive", "/v3/lease/keepalive", body, o, cb, ud,
				  ret_call);
}

int etcd_lease_revoke(struct etcd_client *c, int64_t lease_id, const struct etcd_call_opts *o,
		      etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_int_req("ID", lease_id, &body);
	return r < 0 ? r
		     : etcd_call_start(c, "lease_revoke", "/v3/lease/revoke", body, o, cb, ud, ret_call);
}

int etcd_lease_timetolive(struct etcd_client *c, int64_t lease_id, bool with_keys,
			  const struct etcd_call_opts *o, etcd_cb cb, void *ud,
			  struct etcd_call **ret_call)
{
	char *body = NULL;
	int r = etcd_json_timetolive_req(lease_id, with_keys, &body);
	return r < 0 ? r
		     : etcd_call_start(c, "lease_timetolive", "/v3/lease/timetolive", body, o, cb, ud,
				  ret_call);
}

int etcd_compact(struct etcd_client *c, int64_t revision, bool physical,
		 const struct etcd_call_opts *o, etcd_cb cb, void *ud, struct etcd_call **ret_call)
{
	char *body = NULL;
	if (revision <= 0)
		return -EINVAL;
	int r = etcd_json_compact_req(revision, physical, &body);
	return r < 0 ? r : etcd_call_start(c, "compact", "/v3/kv/compaction", body, o, cb, ud, ret_call);
}
