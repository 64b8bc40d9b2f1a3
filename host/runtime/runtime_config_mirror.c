/* SPDX-License-Identifier: MIT */
/* runtime_config_mirror.c - see runtime_config_mirror.h. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/runtime_config_mirror.h"

struct plugin_config_mirror {
	struct loop *loop;
	struct etcd_client *etcd;
	char *key;  /* P/N/config */
	char *name; /* the plugin, for the log */
	void (*changed)(void *);
	void *ud;
	bool read;
	char *doc;
	size_t len;
	int64_t rev;
	char *error;
	int64_t error_rev;
	struct etcd_call *call;
	struct etcd_watch *watch;
	struct loop_timer *retry;
	uint64_t backoff;
};

static void plugin_config_mirror_set_error(struct plugin_config_mirror *m, const char *why, int64_t rev)
{
	char buf[400];
	free(m->error);
	m->error = NULL;
	m->error_rev = 0;
	if (!why)
		return;
	snprintf(buf, sizeof(buf),
		 "%s at revision %" PRId64 " is not a valid configuration: %s; "
		 "the plugin keeps the last good one",
		 m->key, rev, why);
	m->error = strdup(buf);
	m->error_rev = rev;
}

/* absent - no document (the key does not exist) */
static void plugin_config_mirror_absent(struct plugin_config_mirror *m)
{
	free(m->doc);
	m->doc = NULL;
	m->len = 0;
	m->rev = 0;
	plugin_config_mirror_set_error(m, NULL, 0);
}

/* apply - the key's value (del: deleted) */
static void plugin_config_mirror_apply(struct plugin_config_mirror *m, const struct etcd_kv *kv, bool del)
{
	if (kv->key_len != strlen(m->key) || memcmp(kv->key, m->key, kv->key_len) != 0)
		return;
	if (del) {
		plugin_config_mirror_absent(m);
		return;
	}
	char why[256];
	if (plugin_config_doc_check(kv->value, kv->value_len, why, sizeof(why)) < 0) {
		if (m->error_rev != kv->mod_revision) /* once per bad revision, not per resync */
			log_error("config",
				  "plugin %s: %s at revision %" PRId64 " is not a valid "
				  "configuration (%s); the plugin keeps the last good one",
				  m->name, m->key, kv->mod_revision, why);
		plugin_config_mirror_set_error(m, why, kv->mod_revision);
		return;
	}
	char *d = malloc(kv->value_len + 1);
	if (!d) {
		log_error("config", "plugin %s: out of memory; keeping the previous configuration",
			  m->name);
		return;
	}
	memcpy(d, kv->value, kv->value_len);
	d[kv->value_len] = 0;
	free(m->doc);
	m->doc = d;
	m->len = kv->value_len;
	m->rev = kv->mod_revision;
	plugin_config_mirror_set_error(m, NULL, 0);
}

static void plugin_config_mirror_sync_start(struct plugin_config_mirror *m);

static void plugin_config_mirror_retry_later(struct plugin_config_mirror *m)
{
	loop_timer_arm_in(m->retry, m->backoff);
	m->backoff = m->backoff * 2 > 2 * LOOP_NS_PER_S ? 2 * LOOP_NS_PER_S : m->backoff * 2;
}

static void plugin_config_mirror_on_watch(struct etcd_watch *w, int err, int64_t rev, const struct etcd_event *ev,
		     size_t n, void *ud)
{
	struct plugin_config_mirror *m = ud;
	(void)w;
	(void)rev;
	if (err < 0) {
		/* compacted: read the key again (what it holds now is what counts) */
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "config",
			"plugin %s: watch of %s ended (%s); reading it again", m->name, m->key,
			etcd_strerror(err));
		etcd_watch_cancel(m->watch);
		m->watch = NULL;
		plugin_config_mirror_sync_start(m);
		return;
	}
	for (size_t i = 0; i < n; i++)
		plugin_config_mirror_apply(m, &ev[i].kv, ev[i].type == ETCD_EVENT_DELETE);
	if (n)
		m->changed(m->ud);
}

static void plugin_config_mirror_on_range(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct plugin_config_mirror *m = ud;
	(void)c;
	m->call = NULL;
	if (err < 0) {
		log_msg(etcd_err_unreachable(err) ? LOG_LVL_DEBUG : LOG_LVL_WARN, "config",
			"plugin %s: reading %s failed: %s; retrying", m->name, m->key,
			etcd_strerror(err));
		plugin_config_mirror_retry_later(m);
		return;
	}
	if (resp->n_kvs == 0)
		plugin_config_mirror_absent(m);
	for (size_t i = 0; i < resp->n_kvs; i++)
		plugin_config_mirror_apply(m, &resp->kvs[i], false);
	int rc = etcd_watch_start(m->etcd, m->key, strlen(m->key), NULL, 0,
				  resp->header.revision + 1, 0, plugin_config_mirror_on_watch, m, &m->watch);
	if (rc < 0) {
		plugin_config_mirror_retry_later(m);
		return;
	}
	m->backoff = 100 * LOOP_NS_PER_MS;
	m->read = true;
	m->changed(m->ud);
}

static void plugin_config_mirror_sync_start(struct plugin_config_mirror *m)
{
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = m->key, .key_len = strlen(m->key)};
	if (etcd_range(m->etcd, &op, NULL, plugin_config_mirror_on_range, m, &m->call) < 0)
		plugin_config_mirror_retry_later(m);
}

static void plugin_config_mirror_on_retry(struct loop_timer *t, void *ud)
{
	(void)t;
	struct plugin_config_mirror *m = ud;
	if (!m->call && !m->watch)
		plugin_config_mirror_sync_start(m);
}

char *plugin_config_key(const char *prefix, const char *name)
{
	size_t pl = strlen(prefix);
	while (pl > 0 && prefix[pl - 1] == '/')
		pl--;
	size_t kl = pl + 1 + strlen(name) + strlen("/config") + 1;
	char *k = malloc(kl);
	if (k)
		snprintf(k, kl, "%.*s/%s/config", (int)pl, prefix, name);
	return k;
}

int plugin_config_mirror_new(struct loop *l, struct etcd_client *etcd, const char *prefix,
			     const char *name, void (*changed)(void *ud), void *ud,
			     struct plugin_config_mirror **ret)
{
	struct plugin_config_mirror *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->loop = l;
	m->etcd = etcd;
	m->changed = changed;
	m->ud = ud;
	m->backoff = 100 * LOOP_NS_PER_MS;
	m->key = plugin_config_key(prefix, name);
	m->name = strdup(name);
	int r = -ENOMEM;
	if (!m->key || !m->name)
		goto fail;
	if ((r = loop_timer_new(l, plugin_config_mirror_on_retry, m, &m->retry)) < 0)
		goto fail;
	*ret = m;
	return 0;
fail:
	plugin_config_mirror_free(m);
	return r;
}

void plugin_config_mirror_start(struct plugin_config_mirror *m)
{
	if (!m->call && !m->watch)
		plugin_config_mirror_sync_start(m);
}

void plugin_config_mirror_free(struct plugin_config_mirror *m)
{
	if (!m)
		return;
	if (m->call)
		etcd_call_cancel(m->call);
	if (m->watch)
		etcd_watch_cancel(m->watch);
	loop_timer_free(m->retry);
	free(m->key);
	free(m->name);
	free(m->doc);
	free(m->error);
	free(m);
}

void plugin_config_mirror_get(const struct plugin_config_mirror *m, struct plugin_config_view *ret)
{
	*ret = (struct plugin_config_view){.read = m->read,
					   .doc = m->doc,
					   .len = m->len,
					   .rev = m->rev,
					   .error = m->error,
					   .error_rev = m->error_rev};
}

const char *plugin_config_mirror_key(const struct plugin_config_mirror *m)
{
	return m->key;
}
