/* SPDX-License-Identifier: MIT */
/*
 * election_fixture.c - see election_fixture.h.
 */
#include "config.h"

#include "check.h"
#include "election_fixture.h"

/* the session's events, to the election at *(struct election **)ud */
static void efx_up(void *ud, int64_t lease)
{
	struct election *el = *(struct election **)ud;
	if (el)
		election_session_up(el, lease);
}

static void efx_lost(void *ud, int64_t old, const char *why)
{
	(void)old;
	(void)why;
	struct election *el = *(struct election **)ud;
	if (el)
		election_session_lost(el);
}

static const struct session_ops efx_session_ops = {.up = efx_up, .lost = efx_lost};

void efx_node_start(struct tu *t, const struct efx_node_config *c, struct etcd_client **etcd,
		    struct session **sess, struct election **el)
{
	*el = NULL;
	*etcd = tu_client(t, c->urls);
	CHECK_OK(session_new(t->loop, *etcd, c->ttl, &efx_session_ops, el, sess));
	struct election_config cfg = {
		.prefix = c->prefix,
		.name = c->plugin,
		.node_id = c->node_id,
		.releases = c->rel,
		.reconcile_wait_ns = 10 * LOOP_NS_PER_MS,
		.reconcile_interval_ns = 3600 * LOOP_NS_PER_S,
	};
	CHECK_OK(election_new(t->loop, *etcd, *sess, &cfg, el));
	if (c->ops)
		election_set_driver(*el, c->ops, c->drv, &c->rel, NULL, NULL);
	if (c->held)
		election_hold(*el, true, "test: not yet");
	CHECK_OK(election_start(*el));
	session_start(*sess);
}

static void efx_on_stopped(void *ud)
{
	*(bool *)ud = true;
}

static bool efx_p_stopped(void *a)
{
	return *(bool *)a;
}

void efx_node_stop(struct tu *t, struct election *el, struct session *sess)
{
	bool stopped = false;
	election_stop(el, efx_on_stopped, &stopped);
	tu_wait(t, efx_p_stopped, &stopped, 10000, "election stopped");
	session_revoke(sess, NULL, NULL);
}

void efx_node_free(struct election *el, struct session *sess, struct etcd_client *etcd)
{
	election_free(el);
	session_free(sess);
	etcd_client_free(etcd);
}

struct election_info efx_info(struct election *el)
{
	struct election_info i;
	election_get_info(el, &i);
	return i;
}

bool efx_p_standby(void *el)
{
	return efx_info(el).state == ELECTION_STANDBY;
}

bool efx_p_campaigning(void *el)
{
	return efx_info(el).state == ELECTION_CAMPAIGNING;
}
