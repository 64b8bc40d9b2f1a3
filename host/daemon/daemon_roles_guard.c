/* SPDX-License-Identifier: MIT */
/*
 * daemon_roles_guard.c - `roles set` for a node this daemon is not: written
 * only once etcd shows the node has registered (election_known.h), so that
 * a mistyped node id does not leave a roles record no node reads.
 * `--force` (Request.force) skips this; the daemon's own node needs no check.
 * Everything runs on the loop thread.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_internal.h"
#include "election/election_known.h"
#include "election/election_roles.h"

/* the node check waits this long for etcd */
#define ROLES_GUARD_TIMEOUT_MS 10000u

struct roles_guard {
	struct daemon *d;
	control_done_fn done;
	void *done_ctx;
	char *node;
	char **roles;
	size_t n;
};

static void daemon_roles_guard_free(struct roles_guard *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->roles[i]);
	free(g->roles);
	free(g->node);
	free(g);
}

static void daemon_roles_guard_on_written(void *ud, int err)
{
	struct roles_guard *g = ud;
	g->done(g->done_ctx, err, err < 0 ? etcd_strerror(err) : NULL);
	daemon_roles_guard_free(g);
}

static void daemon_roles_guard_on_known(void *ud, int err, bool known)
{
	struct roles_guard *g = ud;
	char msg[400];
	if (err == 0 && known) {
		err = roles_set(g->d->roles, g->node, (const char *const *)g->roles, g->n,
		                daemon_roles_guard_on_written, g);
		if (err == 0)
			return;
		snprintf(msg, sizeof(msg), "%s", strerror(-err));
	} else if (err == 0) {
		snprintf(msg, sizeof(msg),
		         "node %s has never registered: etcd holds no member record or node state "
		         "record of it for any plugin (a typo?); nothing written (--force writes it "
		         "anyway, e.g. before the node first starts)",
		         g->node);
		err = -ENOENT;
	} else {
		snprintf(msg, sizeof(msg), "cannot check whether node %s has registered: %s", g->node,
		         etcd_strerror(err));
	}
	g->done(g->done_ctx, err, msg);
	daemon_roles_guard_free(g);
}

int daemon_roles_set_if_known(struct daemon *d, const char *node, const char *const *roles,
                              size_t n, control_done_fn done, void *done_ctx, char *err,
                              size_t err_len)
{
	struct roles_guard *g = calloc(1, sizeof(*g));
	int r = -ENOMEM;
	if (!g || !(g->node = strdup(node)) || !(g->roles = calloc(n ? n : 1, sizeof(char *))))
		goto fail;
	for (; g->n < n; g->n++)
		if (!(g->roles[g->n] = strdup(roles[g->n])))
			goto fail;
	g->d = d;
	g->done = done;
	g->done_ctx = done_ctx;
	r = election_known_node(d->etcd, d->cfg->prefix, node, ROLES_GUARD_TIMEOUT_MS,
	                        daemon_roles_guard_on_known, g, NULL);
	if (r == 0)
		return 0;
	snprintf(err, err_len, "cannot check whether node %s has registered: %s", node,
	         etcd_strerror(r));
fail:
	if (r == -ENOMEM)
		snprintf(err, err_len, "out of memory");
	if (g)
		daemon_roles_guard_free(g);
	return r;
}
