/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "proto/leasehold.pb-c.h"
#include "testutil.h"

struct etcd_client *tu_client(struct tu *t, const char *urls)
{
	char *copy = strdup(urls);
	const char *eps[8];
	size_t n = 0;
	for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && n < 8;
	     p = strtok_r(NULL, ",", &save))
		eps[n++] = p;
	struct etcd_config cfg = {.endpoints = eps, .n_endpoints = n};
	struct etcd_client *c;
	CHECK_OK(etcd_client_new(t->loop, &cfg, &c));
	free(copy);
	return c;
}

void tu_init(struct tu *t, const char *urls)
{
	CHECK_OK(loop_new(&t->loop));
	t->etcd = tu_client(t, urls);
}

void tu_fini(struct tu *t)
{
	etcd_client_free(t->etcd);
	loop_free(t->loop);
}

struct sync_call {
	bool done;
	int err;
	int64_t rev;
	uint8_t *value;
	size_t len;
	bool found;
};

static void on_sync(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct sync_call *s = ud;
	(void)c;
	s->done = true;
	s->err = err;
	if (err == 0) {
		s->rev = r->header.revision;
		if (r->n_kvs > 0) {
			s->found = true;
			s->len = r->kvs[0].value_len;
			s->value = malloc(s->len + 1);
			if (s->len)
				memcpy(s->value, r->kvs[0].value, s->len);
			s->value[s->len] = 0;
		}
	}
}

static void sync_wait(struct tu *t, struct sync_call *s, const char *what)
{
	if (loop_run_until(t->loop, &s->done, loop_now() + 10 * LOOP_NS_PER_S) < 0) {
		fprintf(stderr, "tu: %s timed out\n", what);
		exit(1);
	}
	if (s->err < 0) {
		fprintf(stderr, "tu: %s failed: %s\n", what, etcd_strerror(s->err));
		exit(1);
	}
}

int64_t tu_put_lease(struct tu *t, const char *key, const void *v, size_t len, int64_t lease)
{
	struct sync_call s = {0};
	struct etcd_op op = {.type = ETCD_OP_PUT, .key = key, .key_len = strlen(key), .value = v,
	                     .value_len = len, .lease = lease};
	CHECK_OK(etcd_put(t->etcd, &op, NULL, on_sync, &s, NULL));
	sync_wait(t, &s, "put");
	return s.rev;
}

int64_t tu_put(struct tu *t, const char *key, const void *v, size_t len)
{
	return tu_put_lease(t, key, v, len, 0);
}

int64_t tu_del(struct tu *t, const char *key)
{
	struct sync_call s = {0};
	struct etcd_op op = {.type = ETCD_OP_DELETE, .key = key, .key_len = strlen(key)};
	CHECK_OK(etcd_delete(t->etcd, &op, NULL, on_sync, &s, NULL));
	sync_wait(t, &s, "delete");
	return s.rev;
}

int64_t tu_del_prefix(struct tu *t, const char *prefix)
{
	struct sync_call s = {0};
	uint8_t end[512];
	struct etcd_op op = {.type = ETCD_OP_DELETE, .key = prefix, .key_len = strlen(prefix),
	                     .range_end = end,
	                     .range_end_len = etcd_prefix_end(prefix, strlen(prefix), end)};
	CHECK_OK(etcd_delete(t->etcd, &op, NULL, on_sync, &s, NULL));
	sync_wait(t, &s, "delete prefix");
	return s.rev;
}

void tu_revoke(struct tu *t, int64_t lease)
{
	struct sync_call s = {0};
	CHECK_OK(etcd_lease_revoke(t->etcd, lease, NULL, on_sync, &s, NULL));
	if (loop_run_until(t->loop, &s.done, loop_now() + 10 * LOOP_NS_PER_S) < 0) {
		fprintf(stderr, "tu: revoke timed out\n");
		exit(1);
	}
	if (s.err < 0 && s.err != -ENOENT) {
		fprintf(stderr, "tu: revoke failed: %s\n", etcd_strerror(s.err));
		exit(1);
	}
	free(s.value);
}

int64_t tu_revision(struct tu *t)
{
	struct sync_call s = {0};
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = "\0", .key_len = 1, .count_only = true};
	CHECK_OK(etcd_range(t->etcd, &op, NULL, on_sync, &s, NULL));
	sync_wait(t, &s, "revision");
	free(s.value);
	return s.rev;
}

uint8_t *tu_get(struct tu *t, const char *key, size_t *ret_len)
{
	struct sync_call s = {0};
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = key, .key_len = strlen(key)};
	CHECK_OK(etcd_range(t->etcd, &op, NULL, on_sync, &s, NULL));
	sync_wait(t, &s, "get");
	if (ret_len)
		*ret_len = s.len;
	return s.value;
}

struct list_call {
	bool done;
	int err;
	struct etcd_kv **kvs;
	size_t n;
};

static void on_list(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	struct list_call *l = ud;
	(void)c;
	l->done = true;
	l->err = err;
	if (err < 0)
		return;
	l->kvs = calloc(r->n_kvs + 1, sizeof(*l->kvs));
	for (size_t i = 0; i < r->n_kvs; i++)
		l->kvs[i] = etcd_kv_dup(&r->kvs[i]);
	l->n = r->n_kvs;
}

size_t tu_list(struct tu *t, const char *prefix, struct etcd_kv ***ret)
{
	struct list_call l = {0};
	uint8_t end[512];
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = prefix, .key_len = strlen(prefix),
	                     .range_end = end,
	                     .range_end_len = etcd_prefix_end(prefix, strlen(prefix), end)};
	CHECK_OK(etcd_range(t->etcd, &op, NULL, on_list, &l, NULL));
	if (loop_run_until(t->loop, &l.done, loop_now() + 10 * LOOP_NS_PER_S) < 0 || l.err < 0) {
		fprintf(stderr, "tu: list %s failed\n", prefix);
		exit(1);
	}
	*ret = l.kvs;
	return l.n;
}

void tu_list_free(struct etcd_kv **kvs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		etcd_kv_free(kvs[i]);
	free(kvs);
}

struct etcd_kv *tu_get_kv(struct tu *t, const char *key)
{
	struct etcd_kv **kvs, *kv = NULL;
	size_t n = tu_list(t, key, &kvs);
	for (size_t i = 0; i < n && !kv; i++)
		if (kvs[i]->key_len == strlen(key)) {
			kv = etcd_kv_dup(kvs[i]);
			CHECK(kv != NULL);
		}
	tu_list_free(kvs, n);
	return kv;
}

int64_t tu_put_member(struct tu *t, const char *prefix, const char *plugin, const char *node,
                      struct release r)
{
	Leasehold__Release pr = LEASEHOLD__RELEASE__INIT;
	pr.major = r.major;
	pr.minor = r.minor;
	pr.patch = r.patch;
	Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
	m.node_id = (char *)node;
	m.release = &pr;
	uint8_t buf[256];
	size_t n = leasehold__member__pack(&m, buf);
	char key[256];
	snprintf(key, sizeof(key), "%s/%s/members/%s", prefix, plugin, node);
	return tu_put(t, key, buf, n);
}

size_t tu_status_encode(int state, struct release version, struct release mcr, uint8_t *buf)
{
	Leasehold__Release pv = LEASEHOLD__RELEASE__INIT, pm = LEASEHOLD__RELEASE__INIT;
	pv.major = version.major;
	pv.minor = version.minor;
	pv.patch = version.patch;
	pm.major = mcr.major;
	pm.minor = mcr.minor;
	pm.patch = mcr.patch;
	Leasehold__ReconcilerStatus s = LEASEHOLD__RECONCILER_STATUS__INIT;
	s.state = (Leasehold__ReconcilerStatus__State)state;
	s.version = &pv;
	s.minimum_compatible_release = &pm;
	CHECK(leasehold__reconciler_status__get_packed_size(&s) <= TU_STATUS_MAX);
	return leasehold__reconciler_status__pack(&s, buf);
}

int64_t tu_put_status(struct tu *t, const char *prefix, const char *plugin, int state,
                      struct release version, struct release mcr)
{
	uint8_t buf[TU_STATUS_MAX];
	size_t n = tu_status_encode(state, version, mcr, buf);
	char key[256];
	snprintf(key, sizeof(key), "%s/%s/status", prefix, plugin);
	return tu_put(t, key, buf, n);
}

bool tu_get_status(struct tu *t, const char *prefix, const char *plugin, int *ret_state,
                   struct release *ret_version, struct release *ret_mcr)
{
	char key[256];
	snprintf(key, sizeof(key), "%s/%s/status", prefix, plugin);
	size_t n;
	uint8_t *v = tu_get(t, key, &n);
	if (!v)
		return false;
	Leasehold__ReconcilerStatus *s = leasehold__reconciler_status__unpack(NULL, n, v);
	free(v);
	if (!s || !s->version || !s->minimum_compatible_release) {
		if (s)
			leasehold__reconciler_status__free_unpacked(s, NULL);
		return false;
	}
	*ret_state = s->state;
	*ret_version = REL(s->version->major, s->version->minor, s->version->patch);
	*ret_mcr = REL(s->minimum_compatible_release->major, s->minimum_compatible_release->minor,
	               s->minimum_compatible_release->patch);
	leasehold__reconciler_status__free_unpacked(s, NULL);
	return true;
}

void tu_wait(struct tu *t, bool (*pred)(void *), void *arg, int timeout_ms, const char *what)
{
	uint64_t deadline = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (!pred(arg)) {
		if (loop_now() >= deadline) {
			fprintf(stderr, "timed out after %d ms waiting for: %s\n", timeout_ms, what);
			exit(1);
		}
		int r = loop_run_once(t->loop, 50);
		if (r < 0) {
			fprintf(stderr, "loop failed: %d\n", r);
			exit(1);
		}
	}
}

void tu_check_value(struct tu *t, const char *key, const char *want)
{
	size_t len;
	uint8_t *v = tu_get(t, key, &len);
	CHECK_STR_EQ((char *)v, want);
	free(v);
}

bool tu_has_key(struct tu *t, const char *key)
{
	size_t len;
	uint8_t *v = tu_get(t, key, &len);
	free(v);
	return v != NULL;
}

/* what tu_wait_key and tu_wait_value wait for */
struct tu_want {
	struct tu *t;
	const char *key;
	bool any;	   /* any value will do (value NULL: absent) */
	const char *value; /* the text the key must hold; NULL: absent */
};

static bool tu_p_want(void *arg)
{
	const struct tu_want *w = arg;
	size_t len;
	char *v = (char *)tu_get(w->t, w->key, &len);
	bool ok = !v ? !w->value : w->any || (w->value && strcmp(v, w->value) == 0);
	free(v);
	return ok;
}

void tu_wait_key(struct tu *t, const char *key, bool present, int timeout_ms, const char *what)
{
	struct tu_want w = {t, key, present, present ? "" : NULL};
	tu_wait(t, tu_p_want, &w, timeout_ms, what);
}

void tu_wait_value(struct tu *t, const char *key, const char *value, int timeout_ms,
		   const char *what)
{
	struct tu_want w = {t, key, false, value};
	tu_wait(t, tu_p_want, &w, timeout_ms, what);
}

size_t tu_keys_of_lease(struct tu *t, const char *prefix, int64_t lease)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(t, prefix, &kvs), k = 0;
	for (size_t i = 0; i < n; i++)
		k += kvs[i]->lease == lease;
	tu_list_free(kvs, n);
	return k;
}

int64_t tu_election_lease(struct tu *t, const char *prefix, const char *plugin, const char *node)
{
	char pfx[256];
	snprintf(pfx, sizeof(pfx), "%s/%s/election/", prefix, plugin);
	struct etcd_kv **kvs;
	size_t n = tu_list(t, pfx, &kvs);
	int64_t l = 0;
	for (size_t i = 0; i < n; i++)
		if (kvs[i]->value_len == strlen(node) && memcmp(kvs[i]->value, node, strlen(node)) == 0)
			l = kvs[i]->lease;
	tu_list_free(kvs, n);
	return l;
}

bool tu_term_recorded(struct tu *t, const char *prefix, const char *plugin)
{
	char pfx[256], key[320];
	snprintf(pfx, sizeof(pfx), "%s/%s/election/", prefix, plugin);
	struct etcd_kv **kvs;
	size_t n = tu_list(t, pfx, &kvs);
	int64_t token = 0;
	for (size_t i = 0; i < n; i++)
		if (!token || kvs[i]->create_revision < token)
			token = kvs[i]->create_revision;
	tu_list_free(kvs, n);
	if (!token)
		return false;
	snprintf(key, sizeof(key), "%s/%s/term-history/%020" PRId64, prefix, plugin, token);
	size_t len;
	uint8_t *v = tu_get(t, key, &len);
	free(v);
	return v != NULL;
}

int tu_unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}
