/* SPDX-License-Identifier: MIT */
/*
 * daemon_plugin_config.c - the daemon's side of plugin configuration (ABI
 * 1.2): each plugin entry mirrors P/N/config (runtime_config_mirror.h) and
 * hands every change to its instances; a new instance starts with the
 * cluster document and its node-local file; and the control ops `config
 * get` / `config set`.
 *
 * Design notes
 * - An instance's init runs only once P/N/config was read (daemon.c
 *   daemon_files_entry_load starts it with hold_init until daemon_config_ready), so init
 *   sees the cluster's document.
 *   Afterwards a session loss or a resync keeps the last document read: a
 *   plugin keeps running on what it has.
 * - `config set` is checked here before anything is written: a JSON object
 *   within PLUGIN_CONFIG_MAX, then the plugin's validate_config when the
 *   plugin runs on this node, and then its standby's (the release a pin
 *   holds back, loaded beside what runs): what the unpin would run here must
 *   accept the document too, or the rollout would swap to a release that
 *   refuses the configuration in force. The write is one txn comparing the key's mod
 *   revision with the one the operator's copy came from (0: none may
 *   exist), so of two operators editing the same revision exactly one
 *   wins; the other gets -ESTALE and the current revision.
 * - A plugin that does not run here and has never run anywhere
 *   (election_known.h) is refused with -ENOENT unless forced: a typo in the
 *   name would leave a document no node reads.
 * - Everything runs on the loop thread.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_internal.h"
#include "base/log.h"
#include "abi/abi_config_doc.h"
#include "election/election_known.h"

/* the write of a config set waits this long for etcd */
#define CONFIG_WRITE_TIMEOUT_MS 10000u

/* ---- the mirror and the instances ---- */

/* daemon_plugin_config_with_cluster - c's local document and the mirror's cluster one into *ret */
static int daemon_plugin_config_with_cluster(const struct plugin_config_view *v, const struct plugin_config *c,
			struct plugin_config *ret)
{
	struct plugin_config src = {
	    .cluster = (char *)(uintptr_t)v->doc,
	    .cluster_len = v->len,
	    .cluster_rev = v->rev,
	    .cluster_invalid = v->error != NULL,
	    .local = c ? c->local : NULL,
	    .local_len = c ? c->local_len : 0,
	};
	return plugin_config_copy(ret, &src);
}

static void daemon_plugin_config_hand_over(struct plugin_instance *pi, const struct plugin_config_view *v)
{
	struct plugin_config n = {0};
	if (!pi)
		return;
	if (daemon_plugin_config_with_cluster(v, plugin_instance_config(pi), &n) < 0 ||
	    plugin_instance_set_config(pi, &n) < 0)
		log_error("config", "out of memory: a configuration change was not handed over");
	plugin_config_clear(&n);
}

static void daemon_plugin_config_on_mirror_changed(void *ud)
{
	struct entry *e = ud;
	struct plugin_config_view v;
	plugin_config_mirror_get(e->cfgm, &v);
	if (!v.read)
		return;
	daemon_plugin_config_hand_over(e->pi, &v);
	daemon_plugin_config_hand_over(e->next_pi, &v); /* its init may have waited for this */
	daemon_plugin_config_hand_over(e->standby_pi, &v);
	daemon_notify(e->d);
}

int daemon_config_entry_start(struct entry *e)
{
	if (e->cfgm)
		return 0;
	int r = plugin_config_mirror_new(e->d->loop, e->d->etcd, e->d->cfg->prefix, e->name,
					 daemon_plugin_config_on_mirror_changed, e, &e->cfgm);
	if (r < 0)
		return r;
	plugin_config_mirror_start(e->cfgm);
	return 0;
}

void daemon_config_entry_free(struct entry *e)
{
	plugin_config_mirror_free(e->cfgm);
	e->cfgm = NULL;
}

bool daemon_config_ready(const struct entry *e)
{
	struct plugin_config_view v;
	if (!e->cfgm)
		return false;
	plugin_config_mirror_get(e->cfgm, &v);
	return v.read;
}

/* daemon_plugin_config_file_of - plugin name's --plugin-config file, or NULL */
static const char *daemon_plugin_config_file_of(const struct daemon *d, const char *name)
{
	for (size_t i = 0; i < d->cfg->n_plugin_configs; i++)
		if (strcmp(d->cfg->plugin_config_names[i], name) == 0)
			return d->cfg->plugin_config_files[i];
	return NULL;
}

int daemon_config_for_instance(struct entry *e, struct plugin_config *ret, char *err,
			       size_t err_len)
{
	struct plugin_config_view v;
	struct plugin_config local = {0};
	const char *file = daemon_plugin_config_file_of(e->d, e->name);
	char why[400];
	int r;
	if (file) {
		r = plugin_config_doc_read_file(file, &local.local, &local.local_len, why,
						sizeof(why));
		if (r < 0) {
			snprintf(err, err_len, "node-local configuration (--plugin-config): %s",
				 why);
			return r;
		}
	}
	plugin_config_mirror_get(e->cfgm, &v);
	r = daemon_plugin_config_with_cluster(&v, &local, ret);
	plugin_config_clear(&local);
	if (r < 0)
		snprintf(err, err_len, "out of memory");
	return r;
}

const char *daemon_config_error(struct entry *e)
{
	struct plugin_config_view v = {0};
	int64_t rev = 0;
	const char *refused = e->pi ? plugin_instance_config_refusal(e->pi, &rev) : NULL;
	if (e->cfgm)
		plugin_config_mirror_get(e->cfgm, &v);
	if (!v.error && !refused)
		return NULL;
	size_t n = sizeof(e->config_error), o = 0;
	if (v.error)
		o = (size_t)snprintf(e->config_error, n, "%s", v.error);
	if (refused && o < n) {
		if (rev)
			/* short: the table's LAST ERROR cell shows about 60 characters */
			snprintf(e->config_error + o, n - o,
				 "%srefused by the plugin at revision %" PRId64 ": %s", o ? "; " : "",
				 rev, refused);
		else
			snprintf(e->config_error + o, n - o, "%srefused by the plugin: %s",
				 o ? "; " : "", refused);
	}
	return e->config_error;
}

void daemon_config_observe(struct entry *e)
{
	struct plugin_config_view v = {0};
	int64_t rev = 0;
	const char *refused = e->pi ? plugin_instance_config_refusal(e->pi, &rev) : NULL;
	if (e->cfgm)
		plugin_config_mirror_get(e->cfgm, &v);
	plugin_metrics_observe_config(&e->pm, v.error != NULL, v.error_rev, refused != NULL, rev);
}

void daemon_config_fill(struct entry *e, struct control_plugin *p)
{
	struct plugin_config_view v;
	p->config_error = daemon_config_error(e);
	if (!e->cfgm)
		return;
	plugin_config_mirror_get(e->cfgm, &v);
	p->config_revision = v.rev;
}

/* ---- config get / config set ---- */

struct config_call {
	struct daemon *d;
	control_config_fn done;
	void *done_ctx;
	char name[LH_PLUGIN_NAME_MAX + 1];
	char *key;
	int64_t expect_rev;
	bool standby_asked; /* the standby's validate_config was asked (after the running one's) */
	char standby_release[RELEASE_STRLEN]; /* ... of this release */
	size_t len;
	char doc[]; /* config set: the document, NUL after it */
};

static void daemon_plugin_config_call_free(struct config_call *cc)
{
	free(cc->key);
	free(cc);
}

static struct config_call *daemon_plugin_config_call_new(struct daemon *d, const char *name, const void *doc, size_t len,
				    control_config_fn done, void *done_ctx)
{
	struct config_call *cc = calloc(1, sizeof(*cc) + len + 1);
	if (!cc)
		return NULL;
	cc->d = d;
	cc->done = done;
	cc->done_ctx = done_ctx;
	snprintf(cc->name, sizeof(cc->name), "%s", name);
	if (len)
		memcpy(cc->doc, doc, len);
	cc->len = len;
	if (!(cc->key = plugin_config_key(d->cfg->prefix, name))) {
		free(cc);
		return NULL;
	}
	return cc;
}

static int daemon_plugin_config_check_name(const char *name, char *err, size_t err_len)
{
	if (loader_name_valid(name))
		return 0;
	snprintf(err, err_len, "invalid plugin name (allowed: [a-z0-9_-], 1 to %d characters)",
		 LH_PLUGIN_NAME_MAX);
	return -EINVAL;
}

static void daemon_plugin_config_on_get(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct config_call *cc = ud;
	char msg[300], why[256];
	(void)c;
	if (err < 0) {
		snprintf(msg, sizeof(msg), "cannot read %s: %s", cc->key, etcd_strerror(err));
		cc->done(cc->done_ctx, err, msg, NULL, 0, 0, NULL);
	} else if (resp->n_kvs == 0) {
		cc->done(cc->done_ctx, 0, NULL, NULL, 0, 0, NULL);
	} else {
		const struct etcd_kv *kv = &resp->kvs[0];
		bool bad = plugin_config_doc_check(kv->value, kv->value_len, why, sizeof(why)) < 0;
		/* a value written behind the CLI's back may be up to etcd's
		 * request limit: the reply carries at most the bound (the error
		 * says how large it is) */
		size_t len = kv->value_len > PLUGIN_CONFIG_MAX ? PLUGIN_CONFIG_MAX : kv->value_len;
		cc->done(cc->done_ctx, 0, NULL, kv->value ? (const char *)kv->value : "", len,
			 kv->mod_revision, bad ? why : NULL);
	}
	daemon_plugin_config_call_free(cc);
}

int daemon_config_get(void *ud, const char *name, control_config_fn done, void *done_ctx, char *err,
		      size_t err_len)
{
	struct daemon *d = ud;
	int r = daemon_plugin_config_check_name(name, err, err_len);
	if (r < 0)
		return r;
	struct config_call *cc = daemon_plugin_config_call_new(d, name, NULL, 0, done, done_ctx);
	if (!cc) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = cc->key, .key_len = strlen(cc->key)};
	r = etcd_range(d->etcd, &op, NULL, daemon_plugin_config_on_get, cc, NULL);
	if (r < 0) {
		snprintf(err, err_len, "cannot read %s: %s", cc->key, etcd_strerror(r));
		daemon_plugin_config_call_free(cc);
	}
	return r;
}

static void daemon_plugin_config_on_written(struct etcd_client *c, int err, const struct etcd_response *resp, void *ud)
{
	struct config_call *cc = ud;
	char msg[400];
	(void)c;
	if (err < 0) {
		snprintf(msg, sizeof(msg), "writing %s failed: %s%s", cc->key, etcd_strerror(err),
			 err == -ETIMEDOUT ? " (the write may or may not have happened: check "
					     "with leaseholdctl config get)"
					   : "");
		cc->done(cc->done_ctx, err, msg, NULL, 0, 0, NULL);
	} else if (resp->succeeded) {
		log_info("config",
			 "plugin %s: configuration written at revision %" PRId64
			 " (it replaced revision %" PRId64 ")",
			 cc->name, resp->header.revision, cc->expect_rev);
		cc->done(cc->done_ctx, 0, NULL, NULL, 0, resp->header.revision, NULL);
	} else {
		int64_t now = 0;
		if (resp->n_responses == 1 && resp->responses[0].n_kvs == 1)
			now = resp->responses[0].kvs[0].mod_revision;
		snprintf(msg, sizeof(msg),
			 "plugin %s's configuration changed meanwhile: it is at revision %" PRId64
			 ", this change was made from revision %" PRId64
			 "; nothing was written (read "
			 "it again with leaseholdctl config get and retry)",
			 cc->name, now, cc->expect_rev);
		cc->done(cc->done_ctx, -ESTALE, msg, NULL, 0, now, NULL);
	}
	daemon_plugin_config_call_free(cc);
}

/* daemon_plugin_config_write_now - start the compare-and-put; 0, or -errno (cc untouched) */
static int daemon_plugin_config_write_now(struct config_call *cc)
{
	struct etcd_compare cmp = {.target = ETCD_CMP_MOD,
				   .result = ETCD_CMP_EQUAL,
				   .key = cc->key,
				   .key_len = strlen(cc->key),
				   .number = cc->expect_rev};
	struct etcd_op put = {.type = ETCD_OP_PUT,
			      .key = cc->key,
			      .key_len = strlen(cc->key),
			      .value = cc->doc,
			      .value_len = cc->len};
	struct etcd_op get = {
	    .type = ETCD_OP_RANGE, .key = cc->key, .key_len = strlen(cc->key), .keys_only = true};
	struct etcd_call_opts o = {.timeout_ms = CONFIG_WRITE_TIMEOUT_MS};
	return etcd_txn(cc->d->etcd, &cmp, 1, &put, 1, &get, 1, &o, daemon_plugin_config_on_written, cc, NULL);
}

static void daemon_plugin_config_on_validated(void *ud, int err, const char *msg);

/* daemon_plugin_config_ask - ask pi (what runs here, or the standby: the
 * release a pin holds back, which runs here once unpinned) to validate cc's
 * document; 1: asked (daemon_plugin_config_on_validated answers), 0: pi
 * has no validate_config, or -errno with the reason in err */
static int daemon_plugin_config_ask(struct config_call *cc, struct plugin_instance *pi,
				    bool standby, char *err, size_t err_len)
{
	cc->standby_asked = standby;
	if (standby)
		release_format(plugin_instance_plugin(pi)->release, cc->standby_release,
			       sizeof(cc->standby_release));
	int r = plugin_instance_validate_config(pi, cc->doc, cc->len, daemon_plugin_config_on_validated,
						cc);
	if (r == 0)
		return 1;
	if (r == -EOPNOTSUPP)
		return 0;
	snprintf(err, err_len,
		 "plugin %s%s%s%s cannot validate the configuration now (%s); try again", cc->name,
		 standby ? "'s release " : " runs here but",
		 standby ? cc->standby_release : "",
		 standby ? ", loaded beside what runs while the pin holds it back," : "",
		 r == -EAGAIN ? "it is failed, restarting or stopping" : strerror(-r));
	return r == -EAGAIN ? -EBUSY : r;
}

/* daemon_plugin_config_standby_of - the standby of cc's plugin to ask
 * after the running release accepted, or NULL (none, or asked already) */
static struct plugin_instance *daemon_plugin_config_standby_of(const struct config_call *cc)
{
	struct entry *e = daemon_find_name(cc->d, cc->name);
	if (cc->standby_asked || !e || !e->pi || !e->standby_pi || !e->standby_ready)
		return NULL;
	return e->standby_pi;
}

/* daemon_plugin_config_validate_rest - the standby's validation if one
 * is due, else the write; 0 (the answer comes later) or -errno with the
 * reason in err */
static int daemon_plugin_config_validate_rest(struct config_call *cc, char *err, size_t err_len)
{
	struct plugin_instance *standby = daemon_plugin_config_standby_of(cc);
	int r = standby ? daemon_plugin_config_ask(cc, standby, true, err, err_len) : 0;
	if (r != 0)
		return r > 0 ? 0 : r;
	if ((r = daemon_plugin_config_write_now(cc)) < 0)
		snprintf(err, err_len, "cannot write %s: %s", cc->key, etcd_strerror(r));
	return r;
}

static void daemon_plugin_config_on_validated(void *ud, int err, const char *msg)
{
	struct config_call *cc = ud;
	char buf[700];
	if (err < 0) {
		snprintf(buf, sizeof(buf), "plugin %s%s%s%s refused the configuration: %s", cc->name,
			 cc->standby_asked ? "'s release " : "",
			 cc->standby_asked ? cc->standby_release : "",
			 cc->standby_asked ? ", which the pin holds back (it runs here once unpinned),"
					   : "",
			 msg && msg[0] ? msg : strerror(-err));
		/* the plugin's answer on the document is a bad request; a worker
		 * that went away is not */
		cc->done(cc->done_ctx, err == -EIO || err == -ECANCELED ? err : -EINVAL, buf, NULL,
			 0, 0, NULL);
		daemon_plugin_config_call_free(cc);
		return;
	}
	int r = daemon_plugin_config_validate_rest(cc, buf, sizeof(buf));
	if (r < 0) {
		cc->done(cc->done_ctx, r, buf, NULL, 0, 0, NULL);
		daemon_plugin_config_call_free(cc);
	}
}

/* daemon_plugin_config_go - validate with every release that runs here or
 * would once unpinned (the standby), then write; 0, or -errno with the
 * reason in err (cc untouched) */
static int daemon_plugin_config_go(struct config_call *cc, char *err, size_t err_len)
{
	struct entry *e = daemon_find_name(cc->d, cc->name);
	int r = e && e->pi ? daemon_plugin_config_ask(cc, e->pi, false, err, err_len) : 0;
	if (r != 0)
		return r > 0 ? 0 : r;
	return daemon_plugin_config_validate_rest(cc, err, err_len);
}

static void daemon_plugin_config_on_known(void *ud, int err, bool known)
{
	struct config_call *cc = ud;
	char msg[700];
	if (err == 0 && !known) {
		snprintf(msg, sizeof(msg),
			 "plugin %s has never run: etcd holds no member record, node state record "
			 "or term of it (a typo?); nothing written (--force writes it anyway, e.g. "
			 "before the plugin is deployed)",
			 cc->name);
		err = -ENOENT;
	} else if (err < 0) {
		snprintf(msg, sizeof(msg), "cannot check whether plugin %s has run: %s", cc->name,
			 etcd_strerror(err));
	} else if ((err = daemon_plugin_config_go(cc, msg, sizeof(msg))) == 0) {
		return;
	}
	cc->done(cc->done_ctx, err, msg, NULL, 0, 0, NULL);
	daemon_plugin_config_call_free(cc);
}

int daemon_config_set(void *ud, const char *name, const void *doc, size_t len, int64_t expect_rev,
		      bool force, control_config_fn done, void *done_ctx, char *err, size_t err_len)
{
	struct daemon *d = ud;
	char why[256];
	int r = daemon_plugin_config_check_name(name, err, err_len);
	if (r < 0)
		return r;
	if (plugin_config_doc_check(doc, len, why, sizeof(why)) < 0) {
		snprintf(err, err_len, "refusing the configuration of plugin %s: %s", name, why);
		return -EINVAL;
	}
	struct config_call *cc = daemon_plugin_config_call_new(d, name, doc, len, done, done_ctx);
	if (!cc) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	cc->expect_rev = expect_rev;
	struct entry *e = daemon_find_name(d, name);
	if (force || (e && e->el))
		r = daemon_plugin_config_go(cc, err, err_len); /* it runs here: it has run */
	else if ((r = election_known_plugin(d->etcd, d->cfg->prefix, name, CONFIG_WRITE_TIMEOUT_MS,
					    daemon_plugin_config_on_known, cc, NULL)) < 0)
		snprintf(err, err_len, "cannot check whether plugin %s has run: %s", name,
			 etcd_strerror(r));
	if (r < 0)
		daemon_plugin_config_call_free(cc);
	return r;
}
