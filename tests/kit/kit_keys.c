/* SPDX-License-Identifier: MIT */
/*
 * kit_keys.c - the statements on keys. A wait reads the key, then watches
 * it from the revision after that read, so no change between the two is
 * missed and no poll is needed.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"
#include "kit_internal.h"

/* a key's value as last seen */
struct kit_keys_seen {
	bool done;      /* the read finished (a call's flag) */
	bool present;
	char *value;    /* NUL-terminated, NULL when absent */
	size_t len;
	int64_t revision;
	int err;
};

static void kit_keys_set(struct kit_keys_seen *s, const struct etcd_kv *kv)
{
	free(s->value);
	s->value = NULL;
	s->len = 0;
	s->present = kv != NULL;
	if (!kv)
		return;
	s->value = malloc(kv->value_len + 1);
	if (!s->value) {
		s->err = -ENOMEM;
		return;
	}
	if (kv->value_len)
		memcpy(s->value, kv->value, kv->value_len);
	s->value[kv->value_len] = 0;
	s->len = kv->value_len;
}

static void kit_keys_on_call(struct etcd_client *c, int err, const struct etcd_response *r,
			     void *ud)
{
	struct kit_keys_seen *s = ud;
	(void)c;
	s->done = true;
	s->err = err;
	if (err < 0)
		return;
	s->revision = r->header.revision;
	if (r->op_type == ETCD_OP_RANGE)
		kit_keys_set(s, r->n_kvs > 0 ? &r->kvs[0] : NULL);
}

static void kit_keys_on_watch(struct etcd_watch *wt, int err, int64_t revision,
			      const struct etcd_event *events, size_t n, void *ud)
{
	struct kit_keys_seen *s = ud;
	(void)wt;
	(void)revision;
	if (err < 0) {
		s->err = err;
		return;
	}
	for (size_t i = 0; i < n; i++)
		kit_keys_set(s, events[i].type == ETCD_EVENT_PUT ? &events[i].kv : NULL);
}

/* the full etcd key of a script key */
static void kit_keys_full(const struct kit_world *w, const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", key[0] == '/' ? "" : w->prefix, key);
}

/* run the runner's loop until the call in flight sets s->done (30 s at most:
 * etcd answers a single-key call long before) */
static int kit_keys_call_wait(struct kit_world *w, struct kit_keys_seen *s)
{
	if (loop_run_until(w->tu.loop, &s->done, loop_now() + 30 * LOOP_NS_PER_S) < 0)
		return -ETIMEDOUT;
	return s->err;
}

int kit_keys_write(struct kit_world *w, const struct kit_step *st)
{
	char key[KIT_SCRIPT_MAX_KEY + 160];
	kit_keys_full(w, st->key, key, sizeof(key));
	struct kit_keys_seen s = {0};
	struct etcd_op op = {.type = st->op == KIT_OP_PUT ? ETCD_OP_PUT : ETCD_OP_DELETE,
			     .key = key, .key_len = strlen(key),
			     .value = st->value, .value_len = st->value_len};
	int r = op.type == ETCD_OP_PUT ? etcd_put(w->tu.etcd, &op, NULL, kit_keys_on_call, &s, NULL)
				       : etcd_delete(w->tu.etcd, &op, NULL, kit_keys_on_call, &s, NULL);
	if (r == 0)
		r = kit_keys_call_wait(w, &s);
	free(s.value);
	if (r < 0)
		return kit_fail(w, st, "%s: %s", key, etcd_strerror(r));
	return 0;
}

static bool kit_keys_match(const struct kit_step *st, const struct kit_keys_seen *s)
{
	bool want_present = st->op == KIT_OP_WAIT_KEY || st->op == KIT_OP_EXPECT_KEY;
	if (!want_present)
		return !s->present;
	return s->present && s->len == st->value_len && memcmp(s->value, st->value, s->len) == 0;
}

static int kit_keys_report(struct kit_world *w, const struct kit_step *st, const char *key,
			   const struct kit_keys_seen *s, bool waited)
{
	char want[600], found[600];
	if (st->op == KIT_OP_WAIT_KEY || st->op == KIT_OP_EXPECT_KEY)
		snprintf(want, sizeof(want), "\"%.512s\"", st->value);
	else
		snprintf(want, sizeof(want), "no key");
	if (s->present)
		snprintf(found, sizeof(found), "\"%.512s\"", s->value);
	else
		snprintf(found, sizeof(found), "no key");
	if (waited)
		return kit_fail(w, st, "%s: expected %s, found %s after %d ms", key, want, found,
				kit_timeout_ms(w));
	return kit_fail(w, st, "%s: expected %s, found %s", key, want, found);
}

int kit_keys_check(struct kit_world *w, const struct kit_step *st)
{
	char key[KIT_SCRIPT_MAX_KEY + 160];
	kit_keys_full(w, st->key, key, sizeof(key));
	struct kit_keys_seen s = {0};
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = key, .key_len = strlen(key)};
	int r = etcd_range(w->tu.etcd, &op, NULL, kit_keys_on_call, &s, NULL);
	if (r == 0)
		r = kit_keys_call_wait(w, &s);
	if (r < 0) {
		free(s.value);
		return kit_fail(w, st, "%s: %s", key, etcd_strerror(r));
	}
	bool waits = st->op == KIT_OP_WAIT_KEY || st->op == KIT_OP_WAIT_ABSENT;
	if (kit_keys_match(st, &s) || !waits) {
		int rc = kit_keys_match(st, &s) ? 0 : kit_keys_report(w, st, key, &s, false);
		free(s.value);
		return rc;
	}
	struct etcd_watch *wt = NULL;
	r = etcd_watch_start(w->tu.etcd, key, strlen(key), NULL, 0, s.revision + 1, 0,
			     kit_keys_on_watch, &s, &wt);
	uint64_t deadline = loop_now() + w->timeout_ns;
	while (r == 0 && s.err == 0 && !kit_keys_match(st, &s) && loop_now() < deadline) {
		int k = loop_run_once(w->tu.loop, 100);
		r = k < 0 ? k : 0;
	}
	if (wt)
		etcd_watch_cancel(wt);
	int rc;
	if (r < 0 || s.err < 0)
		rc = kit_fail(w, st, "%s: watch failed: %s", key, etcd_strerror(r < 0 ? r : s.err));
	else
		rc = kit_keys_match(st, &s) ? 0 : kit_keys_report(w, st, key, &s, true);
	free(s.value);
	return rc;
}
