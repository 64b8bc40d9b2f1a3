/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer.c - leaseholdctl answering from etcd (ctl_observer.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ctl/ctl_cluster_view.h"
#include "control/control_codec.h"
#include "control/control_terms.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_observer_internal.h"
#include "election/election.h"
#include "proto/leasehold.pb-c.h"
#include "election/election_roles.h"

#define MAX_ENDPOINTS 16

struct loop *ctl_observer_loop(struct ctl_observer *ob)
{
	return ob->loop;
}

struct etcd_client *ctl_observer_etcd(struct ctl_observer *ob)
{
	return ob->etcd;
}

const char *ctl_observer_prefix(const struct ctl_observer *ob)
{
	return ob->prefix;
}

/* ctl_observer_read_password - from the terminal, not echoed; 0 or -errno */
static int ctl_observer_read_password(const char *user, char *buf, size_t len)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	struct termios old, quiet;
	if (fd < 0)
		return -errno;
	if (tcgetattr(fd, &old) < 0) {
		close(fd);
		return -ENOTTY;
	}
	dprintf(fd, "etcd password for %s: ", user);
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	tcsetattr(fd, TCSAFLUSH, &quiet);
	ssize_t n = read(fd, buf, len - 1);
	tcsetattr(fd, TCSAFLUSH, &old);
	dprintf(fd, "\n");
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

/* the open observer's etcd client (one per run of leaseholdctl): what
 * ctl_observer_etcd_failed names beside an error */
static const struct etcd_client *ctl_observer_client;

int ctl_observer_open(const struct ctl_etcd_opts *o, struct ctl_observer **ret)
{
	struct ctl_observer *ob = calloc(1, sizeof(*ob));
	const char *eps[MAX_ENDPOINTS];
	size_t n = 0;
	char host[128];
	const char *prefix = o->prefix && o->prefix[0] ? o->prefix : "/leasehold";

	if (!ob || !(ob->eps_buf = strdup(o->endpoints))) {
		fprintf(stderr, "leaseholdctl: out of memory\n");
		free(ob);
		return EXIT_ERR;
	}
	if (prefix[0] != '/' || strlen(prefix) > 200) {
		fprintf(stderr, "leaseholdctl: --prefix must start with '/' (at most 200 bytes)\n");
		goto fail;
	}
	snprintf(ob->prefix, sizeof(ob->prefix), "%s", prefix);
	for (size_t l = strlen(ob->prefix); l > 1 && ob->prefix[l - 1] == '/'; l--)
		ob->prefix[l - 1] = '\0';
	for (char *p = ob->eps_buf; p && *p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (*p) {
			if (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0) {
				fprintf(stderr, "leaseholdctl: --etcd endpoints must be http:// or "
				                "https:// URLs, not '%s'\n", p);
				goto fail;
			}
			if (n == MAX_ENDPOINTS) {
				fprintf(stderr, "leaseholdctl: --etcd: at most %d endpoints\n",
				        MAX_ENDPOINTS);
				goto fail;
			}
			eps[n++] = p;
		}
		p = comma ? comma + 1 : NULL;
	}
	if (n == 0) {
		fprintf(stderr, "leaseholdctl: --etcd needs at least one URL\n");
		goto fail;
	}
	const char *pw = NULL;
	if (o->user) {
		pw = getenv("LEASEHOLD_ETCD_PASSWORD");
		if (!pw) {
			int r = ctl_observer_read_password(o->user, ob->password, sizeof(ob->password));
			if (r < 0) {
				fprintf(stderr, "leaseholdctl: --etcd-user needs the password in "
				                "LEASEHOLD_ETCD_PASSWORD (no terminal to ask on)\n");
				goto fail;
			}
			pw = ob->password;
		}
	}
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(ob->by, sizeof(ob->by), "leaseholdctl@%s", host);
	struct etcd_config cfg = {.endpoints = eps, .n_endpoints = n, .cacert = o->cacert,
	                          .cert = o->cert, .key = o->key, .user = o->user,
	                          .password = pw};
	if (loop_new(&ob->loop) < 0 || etcd_client_new(ob->loop, &cfg, &ob->etcd) < 0) {
		fprintf(stderr, "leaseholdctl: cannot set up the etcd client\n");
		goto fail;
	}
	ctl_observer_client = ob->etcd;
	*ret = ob;
	return EXIT_OK;
fail:
	ctl_observer_close(ob);
	return EXIT_ERR;
}

void ctl_observer_close(struct ctl_observer *ob)
{
	if (!ob)
		return;
	if (ctl_observer_client == ob->etcd)
		ctl_observer_client = NULL;
	etcd_client_free(ob->etcd);
	loop_free(ob->loop);
	memset(ob->password, 0, sizeof(ob->password));
	free(ob->eps_buf);
	free(ob);
}

/* ---- blocking reads on the loop ---- */

void ctl_kvs_free(struct ctl_kvs *k)
{
	for (size_t i = 0; i < k->n; i++)
		etcd_kv_free(k->kvs[i]);
	free(k->kvs);
	memset(k, 0, sizeof(*k));
}

struct wait {
	bool done;
	int err;
	struct ctl_kvs kvs;
	int64_t rev;
};

static void ctl_observer_on_range(struct etcd_client *c, int err, const struct etcd_response *r, void *ud)
{
	(void)c;
	struct wait *w = ud;
	w->done = true;
	w->err = err;
	if (err < 0)
		return;
	w->kvs.revision = r->header.revision;
	w->kvs.kvs = calloc(r->n_kvs ? r->n_kvs : 1, sizeof(*w->kvs.kvs));
	if (!w->kvs.kvs) {
		w->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < r->n_kvs; i++) {
		w->kvs.kvs[i] = etcd_kv_dup(&r->kvs[i]);
		if (!w->kvs.kvs[i]) {
			w->err = -ENOMEM;
			return;
		}
		w->kvs.n++;
	}
}

/* run - the loop until w is done or the deadline passed; 0 or -ETIMEDOUT */
static int ctl_observer_run(struct ctl_observer *ob, struct wait *w, uint64_t deadline)
{
	if (loop_run_until(ob->loop, &w->done, deadline) < 0 || !w->done)
		return -ETIMEDOUT;
	return 0;
}

int ctl_observer_range(struct ctl_observer *ob, const char *key, const uint8_t *end,
                       size_t end_len, int64_t revision, bool keys_only, uint64_t deadline,
                       struct ctl_kvs *ret)
{
	struct wait w = {0};
	uint8_t pend[512];
	size_t kl = strlen(key);
	if (!end) {
		if (kl > sizeof(pend))
			return -EINVAL;
		end_len = etcd_prefix_end(key, kl, pend);
		end = pend;
	}
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = key, .key_len = kl, .range_end = end,
	                     .range_end_len = end_len, .revision = revision,
	                     .keys_only = keys_only};
	struct etcd_call *call = NULL;
	int r = etcd_range(ob->etcd, &op, NULL, ctl_observer_on_range, &w, &call);
	if (r < 0)
		return r;
	if (ctl_observer_run(ob, &w, deadline) < 0) {
		etcd_call_cancel(call);
		ctl_kvs_free(&w.kvs);
		return -ETIMEDOUT;
	}
	if (w.err < 0) {
		ctl_kvs_free(&w.kvs);
		return w.err;
	}
	*ret = w.kvs;
	return 0;
}

void ctl_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int ctl_observer_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int ctl_observer_plugins(struct ctl_observer *ob, int64_t revision, uint64_t deadline,
                         char ***ret_names, size_t *ret_n, int64_t *ret_revision)
{
	struct ctl_kvs k;
	char base[300];
	snprintf(base, sizeof(base), "%s/", ob->prefix);
	int r = ctl_observer_range(ob, base, NULL, 0, revision, true, deadline, &k);
	if (r < 0)
		return r;
	size_t bl = strlen(base), n = 0;
	char **names = calloc(k.n ? k.n : 1, sizeof(*names));
	if (!names) {
		ctl_kvs_free(&k);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k.n; i++) {
		const char *s = (const char *)k.kvs[i]->key + bl;
		size_t sl = k.kvs[i]->key_len - bl;
		const char *slash = memchr(s, '/', sl);
		if (!slash)
			continue;
		size_t nl = (size_t)(slash - s);
		const char *rest = slash + 1;
		size_t rl = sl - nl - 1;
		if (!((rl > 8 && memcmp(rest, "members/", 8) == 0) ||
		      (rl > 6 && memcmp(rest, "nodes/", 6) == 0)))
			continue;
		if (n > 0 && strlen(names[n - 1]) == nl && memcmp(names[n - 1], s, nl) == 0)
			continue; /* keys come sorted: a plugin's keys are adjacent */
		char *name = strndup(s, nl);
		if (!name) {
			ctl_names_free(names, n);
			ctl_kvs_free(&k);
			return -ENOMEM;
		}
		if (!control_codec_name_ok(name)) {
			free(name);
			continue;
		}
		names[n++] = name;
	}
	/* "members/" and "nodes/" of one plugin are adjacent but another
	 * plugin's keys may sort between a prefix-sharing pair: dedupe */
	qsort(names, n, sizeof(*names), ctl_observer_cmp_names);
	size_t u = 0;
	for (size_t i = 0; i < n; i++) {
		if (u > 0 && strcmp(names[u - 1], names[i]) == 0) {
			free(names[i]);
			continue;
		}
		names[u++] = names[i];
	}
	*ret_names = names;
	*ret_n = u;
	*ret_revision = k.revision;
	ctl_kvs_free(&k);
	return 0;
}

/* ---- answers ---- */

int ctl_observer_etcd_failed(int err)
{
	const char *at = ctl_observer_client ? etcd_client_last_failure(ctl_observer_client) : "";
	if (err == -ETIMEDOUT) {
		fprintf(stderr, "leaseholdctl: no answer from etcd in time\n");
		return EXIT_TIMEOUT;
	}
	if (err == -EIO && at[0]) /* "etcd: request failed" says no more */
		fprintf(stderr, "leaseholdctl: %s: %s\n", etcd_strerror(err), at);
	else
		fprintf(stderr, "leaseholdctl: %s\n", etcd_strerror(err));
	return EXIT_NOTOK;
}

int ctl_observer_answer(const struct control_answer *a, Response **ret_resp)
{
	uint8_t *buf;
	size_t len;
	const char *why;
	if (control_answer_pack(a, &buf, &len) < 0) {
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	int r = control_codec_response_decode(buf, len, ret_resp, &why);
	free(buf);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: %s\n", why);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

int ctl_observer_refuse(int code, const char *msg, Response **ret_resp)
{
	struct control_answer a = {.code = code, .message = msg};
	return ctl_observer_answer(&a, ret_resp);
}

/* views - the cluster views of the plugins (one named, or all) at one
 * revision; *ret_views[i] free with cluster_view_free */
static int ctl_observer_views(struct ctl_observer *ob, const char *only, uint64_t deadline,
                 struct cluster_view ***ret_views, size_t *ret_n)
{
	char **names = NULL;
	size_t n = 0;
	int64_t rev;
	int r = ctl_observer_plugins(ob, 0, deadline, &names, &n, &rev);
	if (r < 0)
		return r;
	struct cluster_view **vs = calloc(n ? n : 1, sizeof(*vs));
	size_t k = 0;
	if (!vs)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (only && strcmp(only, names[i]) != 0)
			continue;
		char from[512], to[512], cfg[512];
		struct ctl_kvs range, conf;
		snprintf(from, sizeof(from), "%s/%s/election/", ob->prefix, names[i]);
		int tl = snprintf(to, sizeof(to), "%s/%s/status", ob->prefix, names[i]);
		snprintf(cfg, sizeof(cfg), "%s/%s/config", ob->prefix, names[i]);
		/* [election/, status] inclusive: status + a NUL byte */
		r = ctl_observer_range(ob, from, (const uint8_t *)to, (size_t)tl + 1, rev, false,
		                       deadline, &range);
		if (r < 0)
			break;
		uint8_t cend[512];
		size_t cl = strlen(cfg);
		memcpy(cend, cfg, cl);
		cend[cl] = '\0';
		r = ctl_observer_range(ob, cfg, cend, cl + 1, rev, true, deadline, &conf);
		if (r < 0) {
			ctl_kvs_free(&range);
			break;
		}
		r = cluster_view_build(ob->prefix, names[i],
		                       (const struct etcd_kv *const *)range.kvs, range.n, rev,
		                       conf.n ? conf.kvs[0]->mod_revision : 0, &vs[k]);
		ctl_kvs_free(&range);
		ctl_kvs_free(&conf);
		if (r == 0)
			k++;
	}
	ctl_names_free(names, n);
	if (r < 0) {
		for (size_t i = 0; i < k; i++)
			cluster_view_free(vs[i]);
		free(vs);
		return r;
	}
	*ret_views = vs;
	*ret_n = k;
	return 0;
}

static void ctl_observer_views_free(struct cluster_view **vs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cluster_view_free(vs[i]);
	free(vs);
}

static int ctl_observer_answer_views(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                        uint64_t deadline, Response **ret_resp)
{
	bool all = req->kind == LEASEHOLD__CONTROL__KIND__KIND_PLUGINS;
	struct cluster_view **vs = NULL;
	size_t n = 0;
	int r = ctl_observer_views(ob, all ? NULL : req->name, deadline, &vs, &n);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	if (!all && n == 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "no plugin named '%s' in etcd under %s", req->name,
		         ob->prefix);
		ctl_observer_views_free(vs, n);
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, msg, ret_resp);
	}
	struct control_plugin *ps = calloc(n ? n : 1, sizeof(*ps));
	const struct control_member **rows = calloc(n ? n : 1, sizeof(*rows));
	size_t *nrows = calloc(n ? n : 1, sizeof(*nrows));
	if (!ps || !rows || !nrows) {
		free(ps);
		free(rows);
		free(nrows);
		ctl_observer_views_free(vs, n);
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < n; i++) {
		ps[i] = vs[i]->plugin;
		rows[i] = vs[i]->rows;
		nrows[i] = vs[i]->n_rows;
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK};
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS) {
		a.members = vs[0]->rows;
		a.n_members = vs[0]->n_rows;
	} else {
		a.plugins = ps;
		a.n_plugins = n;
		a.plugin_nodes = rows;
		a.n_plugin_nodes = nrows;
	}
	r = ctl_observer_answer(&a, ret_resp);
	free(ps);
	free(rows);
	free(nrows);
	ctl_observer_views_free(vs, n);
	return r;
}

int ctl_observer_require_plugin(struct ctl_observer *ob, const char *name, uint64_t deadline,
                                struct cluster_view **ret_view, Response **ret_resp)
{
	struct cluster_view **vs = NULL;
	size_t n = 0;
	char msg[512];
	int r = ctl_observer_views(ob, name, deadline, &vs, &n);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	if (n == 0) {
		free(vs);
		snprintf(msg, sizeof(msg), "no plugin named '%s' in etcd under %s", name, ob->prefix);
		r = ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND, msg, ret_resp);
		return r == EXIT_OK ? EXIT_NOTOK : r; /* an answer, not a view */
	}
	*ret_view = vs[0];
	free(vs);
	return EXIT_OK;
}

static void ctl_observer_on_done(void *ud, int err)
{
	struct wait *w = ud;
	w->done = true;
	w->err = err;
}

static void ctl_observer_on_done_rev(void *ud, int err, int64_t rev)
{
	struct wait *w = ud;
	w->done = true;
	w->err = err;
	w->rev = rev;
}

struct hist_wait {
	bool done;
	int err;
	struct control_answer a;
	struct control_term *terms;
	uint8_t *packed;
	size_t packed_len;
	int packed_err;
};

static void ctl_observer_on_history(void *ud, int err, const struct election_term *t, size_t n)
{
	struct hist_wait *h = ud;
	h->done = true;
	h->err = err;
	if (err < 0)
		return;
	if (control_terms_from(t, n, &h->terms) < 0) {
		h->err = -ENOMEM;
		return;
	}
	/* the strings live for this callback only: pack now */
	h->a.code = LEASEHOLD__CONTROL__CODE__CODE_OK;
	h->a.terms = h->terms;
	h->a.n_terms = n;
	h->packed_err = control_answer_pack(&h->a, &h->packed, &h->packed_len);
	free(h->terms);
	h->terms = NULL;
}

static int ctl_observer_answer_history(struct ctl_observer *ob, const char *name, uint64_t deadline,
                          Response **ret_resp)
{
	struct cluster_view *v = NULL;
	int r = ctl_observer_require_plugin(ob, name, deadline, &v, ret_resp);
	if (r != EXIT_OK)
		return *ret_resp ? EXIT_OK : r;
	cluster_view_free(v);
	struct hist_wait h = {0};
	r = election_history_at(ob->etcd, ob->prefix, name, ctl_observer_on_history, &h);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	if (loop_run_until(ob->loop, &h.done, deadline) < 0 || !h.done)
		return ctl_observer_etcd_failed(-ETIMEDOUT); /* the callback may still come: we exit */
	if (h.err < 0)
		return ctl_observer_etcd_failed(h.err);
	if (h.packed_err < 0) {
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	const char *why;
	r = control_codec_response_decode(h.packed, h.packed_len, ret_resp, &why);
	free(h.packed);
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: %s\n", why);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

static int ctl_observer_answer_roles(struct ctl_observer *ob, uint64_t deadline, Response **ret_resp)
{
	char base[300];
	struct ctl_kvs k;
	snprintf(base, sizeof(base), "%s/roles/", ob->prefix);
	int r = ctl_observer_range(ob, base, NULL, 0, 0, false, deadline, &k);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	size_t bl = strlen(base), n = 0;
	struct control_role_entry *es = calloc(k.n ? k.n : 1, sizeof(*es));
	char ***rolesv = calloc(k.n ? k.n : 1, sizeof(*rolesv));
	size_t *nroles = calloc(k.n ? k.n : 1, sizeof(*nroles));
	char **ids = calloc(k.n ? k.n : 1, sizeof(*ids));
	char (*errs)[160] = calloc(k.n ? k.n : 1, sizeof(*errs));
	if (!es || !rolesv || !nroles || !ids || !errs) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < k.n; i++) {
		size_t idl = k.kvs[i]->key_len - bl;
		const char *id = (const char *)k.kvs[i]->key + bl;
		if (idl == 0 || memchr(id, '/', idl) || memchr(id, '\0', idl))
			continue;
		ids[n] = strndup(id, idl);
		if (!ids[n]) {
			r = -ENOMEM;
			goto out;
		}
		es[n].node_id = ids[n];
		if (roles_decode(k.kvs[i]->value, k.kvs[i]->value_len, ids[n], &rolesv[n],
		                 &nroles[n], errs[n], sizeof(errs[n])) < 0) {
			es[n].error = errs[n];
		} else {
			es[n].roles = (const char *const *)rolesv[n];
			es[n].n_roles = nroles[n];
		}
		n++;
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK, .roles = es,
	                           .n_roles = n};
	r = ctl_observer_answer(&a, ret_resp) == EXIT_OK ? 0 : -EBADMSG;
out:
	for (size_t i = 0; i < n; i++) {
		free(ids[i]);
		if (rolesv && rolesv[i])
			roles_strv_free(rolesv[i], nroles[i]);
	}
	free(es);
	free(rolesv);
	free(nroles);
	free(ids);
	free(errs);
	ctl_kvs_free(&k);
	if (r == -EBADMSG)
		return EXIT_ERR;
	if (r < 0) {
		fprintf(stderr, "leaseholdctl: out of memory\n");
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* settle - a call started with result r (0, or -errno when it did not
 * start): its outcome once w is done, -ETIMEDOUT past the deadline */
static int ctl_observer_settle(struct ctl_observer *ob, int r, struct wait *w, uint64_t deadline)
{
	if (r < 0)
		return r;
	if (ctl_observer_run(ob, w, deadline) < 0)
		return -ETIMEDOUT;
	return w->err;
}

static int ctl_observer_answer_pause(struct ctl_observer *ob, const char *name, bool pause,
                        uint64_t deadline, Response **ret_resp)
{
	struct cluster_view *v = NULL;
	char err[256] = "", msg[512];
	int r = ctl_observer_require_plugin(ob, name, deadline, &v, ret_resp);
	if (r != EXIT_OK)
		return *ret_resp ? EXIT_OK : r;
	cluster_view_free(v);
	struct wait w = {0};
	r = ctl_observer_settle(ob, election_pause_at(ob->etcd, ob->prefix, name, ob->by, pause, ctl_observer_on_done, &w,
	                                 err, sizeof(err)),
	           &w, deadline);
	if (r < 0) {
		snprintf(msg, sizeof(msg), "cannot %s plugin '%s': %s%s", pause ? "pause" : "resume",
		         name, err[0] ? err : etcd_strerror(r),
		         r == -ETIMEDOUT ? " (the write may or may not have happened)" : "");
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK};
	return ctl_observer_answer(&a, ret_resp);
}

struct served_wait {
	bool done;
	int64_t request;
	bool ok;
	char error[256];
	int err;
};

static void ctl_observer_on_served(struct etcd_watch *w, int err, int64_t revision, const struct etcd_event *ev,
                      size_t n, void *ud)
{
	(void)w;
	(void)revision;
	struct served_wait *s = ud;
	if (err < 0) {
		s->err = err;
		s->done = true;
		return;
	}
	for (size_t i = 0; i < n && !s->done; i++) {
		if (ev[i].type == ETCD_EVENT_DELETE)
			continue;
		Leasehold__ReconcileServed *q = leasehold__reconcile_served__unpack(
			NULL, ev[i].kv.value_len, ev[i].kv.value);
		if (!q)
			continue;
		if (q->request_revision >= s->request) {
			s->done = true;
			s->ok = q->ok;
			snprintf(s->error, sizeof(s->error), "%s", q->error ? q->error : "");
		}
		leasehold__reconcile_served__free_unpacked(q, NULL);
	}
}

static int ctl_observer_answer_reconcile(struct ctl_observer *ob, const char *name, uint32_t timeout_ms,
                            uint64_t deadline, Response **ret_resp)
{
	struct cluster_view *v = NULL;
	char err[256] = "", msg[600];
	int r = ctl_observer_require_plugin(ob, name, deadline, &v, ret_resp);
	if (r != EXIT_OK)
		return *ret_resp ? EXIT_OK : r;
	bool paused = v->plugin.paused;
	cluster_view_free(v);
	if (paused) {
		snprintf(msg, sizeof(msg), "plugin '%s' is paused: no reconcile runs until "
		         "`leaseholdctl resume %s`", name, name);
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_BUSY, msg, ret_resp);
	}
	struct wait w = {0};
	r = ctl_observer_settle(ob, election_request_reconcile_at(ob->etcd, ob->prefix, name, ob->by,
	                                             ctl_observer_on_done_rev, &w, err, sizeof(err)),
	           &w, deadline);
	if (r < 0) {
		snprintf(msg, sizeof(msg), "cannot request a reconcile of plugin '%s': %s", name,
		         err[0] ? err : etcd_strerror(r));
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	struct control_answer a = {.code = LEASEHOLD__CONTROL__CODE__CODE_OK, .revision = w.rev};
	if (timeout_ms == 0)
		return ctl_observer_answer(&a, ret_resp);
	/* the leader's answer is a put of P/N/reconcile-served after our request */
	char key[512];
	int kl = snprintf(key, sizeof(key), "%s/%s/reconcile-served", ob->prefix, name);
	struct served_wait s = {.request = w.rev};
	struct etcd_watch *watch = NULL;
	r = etcd_watch_start(ob->etcd, key, (size_t)kl, NULL, 0, w.rev + 1, 0, ctl_observer_on_served, &s,
	                     &watch);
	if (r < 0)
		return ctl_observer_etcd_failed(r);
	uint64_t until = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	bool answered = loop_run_until(ob->loop, &s.done, until) == 0 && s.done;
	etcd_watch_cancel(watch);
	if (!answered) {
		snprintf(msg, sizeof(msg), "the leader did not serve reconcile request %" PRId64
		         " within %.1f s (the request stays and is served when a leader can)",
		         w.rev, (double)timeout_ms / 1000.0);
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_TIMEOUT, msg, ret_resp);
	}
	if (s.err < 0)
		return ctl_observer_etcd_failed(s.err);
	if (!s.ok) {
		snprintf(msg, sizeof(msg), "the leader's reconcile failed: %s",
		         s.error[0] ? s.error : "(no message)");
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_FAILED, msg, ret_resp);
	}
	return ctl_observer_answer(&a, ret_resp);
}

int ctl_observer_call(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                      int64_t timeout_ms, Response **ret_resp)
{
	uint64_t deadline = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	char msg[256];
	switch (req->kind) {
	case LEASEHOLD__CONTROL__KIND__KIND_PLUGINS:
	case LEASEHOLD__CONTROL__KIND__KIND_STATUS:
	case LEASEHOLD__CONTROL__KIND__KIND_MEMBERS:
		return ctl_observer_answer_views(ob, req, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_HISTORY:
		return ctl_observer_answer_history(ob, req->name, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_ROLES_LIST:
		return ctl_observer_answer_roles(ob, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_PAUSE:
	case LEASEHOLD__CONTROL__KIND__KIND_RESUME:
		return ctl_observer_answer_pause(ob, req->name, req->kind == LEASEHOLD__CONTROL__KIND__KIND_PAUSE,
		                    deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_RECONCILE:
		return ctl_observer_answer_reconcile(ob, req->name, req->timeout_ms, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_SWITCHOVER:
		return ctl_observer_switchover(ob, req, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_PIN:
	case LEASEHOLD__CONTROL__KIND__KIND_RELEASE_UNPIN:
		return ctl_observer_pin(ob, req, deadline, ret_resp);
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET:
	case LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET:
		return ctl_observer_config(ob, req, deadline, ret_resp);
	default:
		snprintf(msg, sizeof(msg),
		         "%s needs the local daemon: it is not available with --etcd (observer "
		         "mode); run it on a node, against its control socket",
		         control_codec_kind_str((int)req->kind));
		return ctl_observer_refuse(LEASEHOLD__CONTROL__CODE__CODE_UNKNOWN_KIND, msg, ret_resp);
	}
}
