/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer_config.c - `leaseholdctl --etcd URL config get|set|edit
 * NAME`: the plugin's cluster-wide configuration read and written straight
 * in etcd at P/N/config, with the daemon's answers (daemon_plugin_config.c),
 * so that ctl_plugin_config.c prints both alike.
 *
 * Design notes
 * - The write is the daemon's: one txn that puts the document only if the
 *   key's mod revision is still the one the operator's copy came from (0:
 *   no key), else reads the revision it is at (CODE_CONFLICT, exit 8).
 * - Every document is checked (plugin_config_doc_check: a JSON object within
 *   PLUGIN_CONFIG_MAX) here, as the daemon checks it. The plugin's own
 *   validate_config cannot run: no plugin is loaded on this machine. The
 *   nodes then hand the document to on_config_changed unvalidated (a
 *   refusal there is logged and shown as the plugin's last error);
 *   ctl_plugin_config.c says so when it writes in observer mode.
 * - Without --force, a plugin that has never run (election_known.h) is
 *   refused before the write, with the daemon's words (CODE_NOT_FOUND).
 * - A stored value is hostile: checked before it is called valid, and at
 *   most PLUGIN_CONFIG_MAX bytes of it are answered (the error says why it
 *   is not valid, as the daemon's does).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl/ctl_observer_internal.h"
#include "abi/abi_config_doc.h"
#include "election/election_known.h"

#define CONFIG_WRITE_TIMEOUT_MS 10000

struct written {
	bool done;
	int err;
	bool succeeded;
	int64_t revision; /* the write's, or the key's mod revision on a lost race */
};

static void ctl_observer_config_on_txn(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct written *w = ud;
	w->done = true;
	w->err = err;
	if (err < 0)
		return;
	w->succeeded = r->succeeded;
	if (r->succeeded)
		w->revision = r->header.revision;
	else if (r->n_responses == 1 && r->responses[0].n_kvs == 1)
		w->revision = r->responses[0].kvs[0].mod_revision;
}

struct known {
	bool done, known;
	int err;
};

static void ctl_observer_config_on_known(void *ud, int err, bool known)
{
	struct known *k = ud;
	k->done = true;
	k->err = err;
	k->known = known;
}

/* ctl_observer_config_check_known - *ret_known true when plugin name has
 * run (EXIT_OK, nothing answered); else the refusal answered into *ret_resp
 * (EXIT_OK) or the exit code of an etcd timeout (printed) */
static int ctl_observer_config_check_known(struct ctl_observer *ob, const char *name,
                                           uint64_t deadline, bool *ret_known,
                                           Response **ret_resp)
{
	char msg[700];
	struct known k = {0};
	struct etcd_call *call = NULL;
	int r = election_known_plugin(ob->etcd, ob->prefix, name, CONFIG_WRITE_TIMEOUT_MS,
	                              ctl_observer_config_on_known, &k, &call);
	if (r == 0 && (loop_run_until(ob->loop, &k.done, deadline) < 0 || !k.done)) {
		etcd_call_cancel(call);
		return ctl_observer_etcd_failed(-ETIMEDOUT);
	}
	if (r == 0)
		r = k.err;
	if (r < 0) {
		snprintf(msg, sizeof(msg), "cannot check whether plugin %s has run: %s", name,
		         etcd_strerror(r));
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	*ret_known = k.known;
	if (k.known)
		return EXIT_OK;
	snprintf(msg, sizeof(msg),
	         "plugin %s has never run: etcd holds no member record, node state record or "
	         "term of it (a typo?); nothing written (--force writes it anyway, e.g. before "
	         "the plugin is deployed)",
	         name);
	return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, msg, ret_resp);
}

static int ctl_observer_config_get(struct ctl_observer *ob, const char *key, uint64_t deadline,
                      Response **ret_resp)
{
	struct ctl_kvs k;
	char why[256], msg[600];
	uint8_t end[512];
	size_t kl = strlen(key);
	memcpy(end, key, kl);
	end[kl] = '\0'; /* the key alone: [key, key + NUL) */
	int r = ctl_observer_range(ob, key, end, kl + 1, 0, false, deadline, &k);
	if (r < 0) {
		snprintf(msg, sizeof(msg), "cannot read %s: %s", key, etcd_strerror(r));
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK};
	if (k.n == 1) {
		const struct etcd_kv *kv = k.kvs[0];
		bool bad = plugin_config_doc_check(kv->value, kv->value_len, why, sizeof(why)) < 0;
		a.config_document = kv->value ? (const void *)kv->value : "";
		a.config_len = kv->value_len > PLUGIN_CONFIG_MAX ? PLUGIN_CONFIG_MAX : kv->value_len;
		a.config_revision = kv->mod_revision;
		a.config_error = bad ? why : NULL;
	}
	r = ctl_observer_answer(&a, ret_resp);
	ctl_kvs_free(&k);
	return r;
}

static int ctl_observer_config_set(struct ctl_observer *ob, const char *key, const char *name,
                      const ProtobufCBinaryData *doc, int64_t expect_rev, bool force,
                      uint64_t deadline, Response **ret_resp)
{
	char why[256], msg[700];
	if (plugin_config_doc_check(doc->data, doc->len, why, sizeof(why)) < 0) {
		snprintf(msg, sizeof(msg), "refusing the configuration of plugin %s: %s", name, why);
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST, msg, ret_resp);
	}
	bool known = force;
	if (!force) {
		int ret = ctl_observer_config_check_known(ob, name, deadline, &known, ret_resp);
		if (ret != EXIT_OK || !known)
			return ret;
	}
	size_t kl = strlen(key);
	struct etcd_compare cmp = {.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .key = key,
	                           .key_len = kl, .number = expect_rev};
	struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .key_len = kl,
	                      .value = doc->data, .value_len = doc->len};
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = key, .key_len = kl, .keys_only = true};
	struct etcd_call_opts o = {.timeout_ms = CONFIG_WRITE_TIMEOUT_MS};
	struct written w = {0};
	struct etcd_call *call = NULL;
	int r = etcd_txn(ob->etcd, &cmp, 1, &put, 1, &get, 1, &o, ctl_observer_config_on_txn, &w, &call);
	if (r == 0 && (loop_run_until(ob->loop, &w.done, deadline) < 0 || !w.done)) {
		etcd_call_cancel(call);
		r = -ETIMEDOUT;
	} else if (r == 0) {
		r = w.err;
	}
	if (r < 0) {
		snprintf(msg, sizeof(msg), "writing %s failed: %s%s", key, etcd_strerror(r),
		         r == -ETIMEDOUT ? " (the write may or may not have happened: check with "
		                           "leaseholdctl config get)"
		                         : "");
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK,
	                           .config_revision = w.revision};
	if (!w.succeeded) {
		snprintf(msg, sizeof(msg),
		         "plugin %s's configuration changed meanwhile: it is at revision %" PRId64
		         ", this change was made from revision %" PRId64
		         "; nothing was written (read it again with leaseholdctl config get and "
		         "retry)",
		         name, w.revision, expect_rev);
		a.code = LEASEHOLD__CONTROL__CODE__CODE_CONFLICT;
		a.message = msg;
	}
	return ctl_observer_answer(&a, ret_resp);
}

int ctl_observer_config(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                        uint64_t deadline, Response **ret_resp)
{
	char key[512];
	snprintf(key, sizeof(key), "%s/%s/config", ob->prefix, req->name);
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET)
		return ctl_observer_config_set(ob, key, req->name, &req->config_document, req->config_revision,
		                  req->force, deadline, ret_resp);
	return ctl_observer_config_get(ob, key, deadline, ret_resp);
}
