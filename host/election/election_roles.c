/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/leasehold.pb-c.h"
#include "base/log.h"
#include "election/election_roles.h"

struct rec {
	char *node_id;
	char **roles;
	size_t n;
	char *error;
};

struct roles {
	struct loop *loop;
	struct etcd_client *etcd;
	char *key_prefix; /* P/roles/ */
	uint8_t key_end[512];
	size_t key_end_len;
	char *node_id;
	char **seed;
	size_t n_seed;
	void (*changed)(void *);
	void *ud;

	bool synced;
	bool seeded;
	struct rec *recs;
	size_t n_recs, cap_recs;
	struct etcd_watch *watch;
	struct etcd_call *call;
	struct loop_timer *retry;
	uint64_t backoff;
};

bool roles_name_valid(const char *s)
{
	size_t n = 0;
	if (!s)
		return false;
	for (; s[n]; n++) {
		char c = s[n];
		if (n >= ROLES_NAME_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return n > 0;
}

void roles_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int roles_decode(const uint8_t *v, size_t len, const char *node_id, char ***ret_roles,
                 size_t *ret_n, char *err, size_t err_len)
{
	Leasehold__NodeRoles *m = leasehold__node_roles__unpack(NULL, len, v);
	if (!m) {
		snprintf(err, err_len, "not a valid NodeRoles record (%zu bytes)", len);
		return -EBADMSG;
	}
	int r = -EBADMSG;
	char **out = NULL;
	size_t n = 0;
	if (m->node_id && *m->node_id && node_id && strcmp(m->node_id, node_id) != 0) {
		snprintf(err, err_len, "record names node '%.64s', not '%.64s'", m->node_id, node_id);
		goto out;
	}
	if (m->n_roles > ROLES_MAX) {
		snprintf(err, err_len, "too many roles (%zu, at most %d)", m->n_roles, ROLES_MAX);
		goto out;
	}
	out = calloc(m->n_roles + 1, sizeof(*out));
	if (!out) {
		r = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->n_roles; i++) {
		if (!roles_name_valid(m->roles[i])) {
			snprintf(err, err_len, "invalid role name (allowed: [a-z0-9_-], 1 to %d characters)",
			         ROLES_NAME_MAX);
			goto out;
		}
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup |= strcmp(out[k], m->roles[i]) == 0;
		if (dup)
			continue;
		if (!(out[n] = strdup(m->roles[i]))) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	*ret_roles = out;
	*ret_n = n;
	out = NULL;
	r = 0;
out:
	roles_strv_free(out, n);
	leasehold__node_roles__free_unpacked(m, NULL);
	return r;
}

static int roles_encode(const char *node_id, const char *const *roles, size_t n, uint8_t **ret,
                  size_t *ret_len)
{
	Leasehold__NodeRoles m = LEASEHOLD__NODE_ROLES__INIT;
	m.node_id = (char *)node_id;
	m.roles = (char **)roles;
	m.n_roles = n;
	size_t len = leasehold__node_roles__get_packed_size(&m);
	uint8_t *b = malloc(len ? len : 1);
	if (!b)
		return -ENOMEM;
	leasehold__node_roles__pack(&m, b);
	*ret = b;
	*ret_len = len;
	return 0;
}

/* ---- mirror ---- */

static void roles_rec_clear(struct rec *x)
{
	free(x->node_id);
	roles_strv_free(x->roles, x->n);
	free(x->error);
	memset(x, 0, sizeof(*x));
}

static struct rec *roles_rec_find(struct roles *r, const char *id, size_t len)
{
	for (size_t i = 0; i < r->n_recs; i++)
		if (strlen(r->recs[i].node_id) == len && memcmp(r->recs[i].node_id, id, len) == 0)
			return &r->recs[i];
	return NULL;
}

static void roles_apply(struct roles *r, const struct etcd_kv *kv, bool del)
{
	size_t pl = strlen(r->key_prefix);
	if (kv->key_len <= pl || memcmp(kv->key, r->key_prefix, pl) != 0)
		return;
	const char *id = (const char *)kv->key + pl;
	size_t idlen = kv->key_len - pl;
	if (memchr(id, '/', idlen) || memchr(id, '\0', idlen) || idlen > 128)
		return; /* outside the layout */
	struct rec *x = roles_rec_find(r, id, idlen);
	if (del) {
		if (x) {
			roles_rec_clear(x);
			*x = r->recs[--r->n_recs];
		}
		return;
	}
	if (!x) {
		if (r->n_recs == r->cap_recs) {
			size_t cap = r->cap_recs ? r->cap_recs * 2 : 8;
			struct rec *n = realloc(r->recs, cap * sizeof(*n));
			if (!n)
				return;
			r->recs = n;
			r->cap_recs = cap;
		}
		x = &r->recs[r->n_recs];
		memset(x, 0, sizeof(*x));
		if (!(x->node_id = strndup(id, idlen)))
			return;
		r->n_recs++;
	} else {
		roles_strv_free(x->roles, x->n);
		x->roles = NULL;
		x->n = 0;
		free(x->error);
		x->error = NULL;
	}
	char err[256];
	if (roles_decode(kv->value, kv->value_len, x->node_id, &x->roles, &x->n, err, sizeof(err)) < 0) {
		x->error = strdup(err);
		if (strcmp(x->node_id, r->node_id) == 0)
			log_error("roles", "this node's roles record is invalid: %s; role-bound plugins are held back",
			          err);
	}
}

static void roles_sync_start(struct roles *r);

static void roles_retry_sync(struct roles *r)
{
	loop_timer_arm_in(r->retry, r->backoff);
	r->backoff = r->backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S : r->backoff * 2;
}

static void roles_on_watch(struct etcd_watch *w, int err, int64_t rev, const struct etcd_event *ev,
                     size_t n, void *ud)
{
	struct roles *r = ud;
	(void)w;
	(void)rev;
	if (err < 0) {
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "roles",
		        "watch ended (%s); resyncing", etcd_strerror(err));
		etcd_watch_cancel(r->watch);
		r->watch = NULL;
		r->synced = false;
		roles_sync_start(r);
		r->changed(r->ud);
		return;
	}
	for (size_t i = 0; i < n; i++)
		roles_apply(r, &ev[i].kv, ev[i].type == ETCD_EVENT_DELETE);
	if (n)
		r->changed(r->ud);
}

static void roles_on_range(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct roles *r = ud;
	(void)c;
	r->call = NULL;
	if (err < 0) {
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "roles",
		        "reading roles failed: %s; retrying", etcd_strerror(err));
		roles_retry_sync(r);
		return;
	}
	for (size_t i = 0; i < r->n_recs; i++)
		roles_rec_clear(&r->recs[i]);
	r->n_recs = 0;
	for (size_t i = 0; i < resp->n_kvs; i++)
		roles_apply(r, &resp->kvs[i], false);
	int rc = etcd_watch_start(r->etcd, r->key_prefix, strlen(r->key_prefix), r->key_end,
	                          r->key_end_len, resp->header.revision + 1, 0, roles_on_watch, r,
	                          &r->watch);
	if (rc < 0) {
		roles_retry_sync(r);
		return;
	}
	r->backoff = 100 * LOOP_NS_PER_MS;
	r->synced = true;
	r->changed(r->ud);
}

static void roles_on_seed(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct roles *r = ud;
	(void)c;
	r->call = NULL;
	if (err < 0) {
		/* unknown outcome is fine: the txn only creates an absent record */
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "roles",
		        "seeding roles failed: %s; retrying", etcd_strerror(err));
		roles_retry_sync(r);
		return;
	}
	r->seeded = true;
	if (resp->succeeded)
		log_info("roles", "seeded this node's roles from --role");
	else
		log_info("roles", "this node already has roles in etcd; --role ignored");
	roles_sync_start(r);
}

static void roles_sync_start(struct roles *r)
{
	int rc;
	if (r->n_seed && !r->seeded) {
		char key[512];
		snprintf(key, sizeof(key), "%s%s", r->key_prefix, r->node_id);
		uint8_t *v;
		size_t vlen;
		if (roles_encode(r->node_id, (const char *const *)r->seed, r->n_seed, &v, &vlen) < 0) {
			roles_retry_sync(r);
			return;
		}
		struct etcd_compare cmp = {.target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL,
		                           .key = key, .key_len = strlen(key), .number = 0};
		struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = v,
		                      .value_len = vlen};
		rc = etcd_txn(r->etcd, &cmp, 1, &put, 1, NULL, 0, NULL, roles_on_seed, r, &r->call);
		free(v);
	} else {
		struct etcd_op op = {.type = ETCD_OP_RANGE, .key = r->key_prefix,
		                     .key_len = strlen(r->key_prefix), .range_end = r->key_end,
		                     .range_end_len = r->key_end_len};
		rc = etcd_range(r->etcd, &op, NULL, roles_on_range, r, &r->call);
	}
	if (rc < 0)
		roles_retry_sync(r);
}

static void roles_on_retry(struct loop_timer *t, void *ud)
{
	(void)t;
	struct roles *r = ud;
	if (!r->call && !r->watch)
		roles_sync_start(r);
}

int roles_new(struct loop *l, struct etcd_client *etcd, const char *prefix, const char *node_id,
              const char *const *seed, size_t n_seed, void (*changed)(void *ud), void *ud,
              struct roles **ret)
{
	if (n_seed > ROLES_MAX)
		return -E2BIG;
	for (size_t i = 0; i < n_seed; i++)
		if (!roles_name_valid(seed[i]))
			return -EINVAL;
	struct roles *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->loop = l;
	r->etcd = etcd;
	r->changed = changed;
	r->ud = ud;
	r->backoff = 100 * LOOP_NS_PER_MS;
	size_t pl = strlen(prefix);
	while (pl > 0 && prefix[pl - 1] == '/')
		pl--;
	int rc = -ENOMEM;
	if (asprintf(&r->key_prefix, "%.*s/roles/", (int)pl, prefix) < 0) {
		r->key_prefix = NULL;
		goto fail;
	}
	if (strlen(r->key_prefix) > sizeof(r->key_end)) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	r->key_end_len = etcd_prefix_end(r->key_prefix, strlen(r->key_prefix), r->key_end);
	if (!(r->node_id = strdup(node_id)))
		goto fail;
	if (n_seed) {
		if (!(r->seed = calloc(n_seed, sizeof(char *))))
			goto fail;
		for (size_t i = 0; i < n_seed; i++) {
			if (!(r->seed[i] = strdup(seed[i])))
				goto fail;
			r->n_seed++;
		}
	}
	if ((rc = loop_timer_new(l, roles_on_retry, r, &r->retry)) < 0)
		goto fail;
	*ret = r;
	return 0;
fail:
	roles_free(r);
	return rc;
}

int roles_start(struct roles *r)
{
	roles_sync_start(r);
	return 0;
}

void roles_free(struct roles *r)
{
	if (!r)
		return;
	if (r->watch)
		etcd_watch_cancel(r->watch);
	etcd_call_cancel(r->call);
	loop_timer_free(r->retry);
	for (size_t i = 0; i < r->n_recs; i++)
		roles_rec_clear(&r->recs[i]);
	free(r->recs);
	roles_strv_free(r->seed, r->n_seed);
	free(r->key_prefix);
	free(r->node_id);
	free(r);
}

int roles_self_has(const struct roles *r, const char *role)
{
	if (!r->synced)
		return -EAGAIN;
	for (size_t i = 0; i < r->n_recs; i++) {
		const struct rec *x = &r->recs[i];
		if (strcmp(x->node_id, r->node_id) != 0)
			continue;
		if (x->error)
			return -EBADMSG;
		for (size_t k = 0; k < x->n; k++)
			if (strcmp(x->roles[k], role) == 0)
				return 1;
		return 0;
	}
	return 0; /* no record: no roles */
}

const char *roles_self_error(const struct roles *r)
{
	for (size_t i = 0; i < r->n_recs; i++)
		if (strcmp(r->recs[i].node_id, r->node_id) == 0)
			return r->recs[i].error;
	return NULL;
}

static int roles_cmp_rec(const void *a, const void *b)
{
	return strcmp(((const struct rec *)a)->node_id, ((const struct rec *)b)->node_id);
}

size_t roles_entries(struct roles *r, struct roles_entry *out, size_t max)
{
	if (r->n_recs > 1) /* recs is NULL without a record: qsort takes none */
		qsort(r->recs, r->n_recs, sizeof(*r->recs), roles_cmp_rec);
	for (size_t i = 0; i < r->n_recs && i < max; i++) {
		out[i].node_id = r->recs[i].node_id;
		out[i].roles = (const char *const *)r->recs[i].roles;
		out[i].n_roles = r->recs[i].error ? 0 : r->recs[i].n;
		out[i].error = r->recs[i].error;
	}
	return r->n_recs;
}

struct write_ctx {
	void (*done)(void *, int);
	void *ud;
};

static void roles_on_write(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	(void)c;
	(void)resp;
	struct write_ctx *w = ud;
	w->done(w->ud, err);
	free(w);
}

static int roles_node_ok(const char *node_id)
{
	return node_id && *node_id && strlen(node_id) <= 128 && !strchr(node_id, '/');
}

int roles_set(struct roles *r, const char *node_id, const char *const *roles, size_t n,
              void (*done)(void *ud, int err), void *ud)
{
	if (!roles_node_ok(node_id) || n > ROLES_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!roles_name_valid(roles[i]))
			return -EINVAL;
	char key[512];
	snprintf(key, sizeof(key), "%s%s", r->key_prefix, node_id);
	uint8_t *v;
	size_t vlen;
	struct write_ctx *w = malloc(sizeof(*w));
	if (!w || roles_encode(node_id, roles, n, &v, &vlen) < 0) {
		free(w);
		return -ENOMEM;
	}
	w->done = done;
	w->ud = ud;
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = v,
	                      .value_len = vlen};
	int rc = etcd_put(r->etcd, &put, NULL, roles_on_write, w, NULL);
	free(v);
	if (rc < 0)
		free(w);
	return rc;
}

int roles_clear(struct roles *r, const char *node_id, void (*done)(void *ud, int err), void *ud)
{
	if (!roles_node_ok(node_id))
		return -EINVAL;
	char key[512];
	snprintf(key, sizeof(key), "%s%s", r->key_prefix, node_id);
	struct write_ctx *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->done = done;
	w->ud = ud;
	struct etcd_op del = {.type = ETCD_OP_DELETE, .key = key, .key_len = strlen(key)};
	int rc = etcd_delete(r->etcd, &del, NULL, roles_on_write, w, NULL);
	if (rc < 0)
		free(w);
	return rc;
}
