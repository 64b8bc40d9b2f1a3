/* SPDX-License-Identifier: MIT */
/*
 * election_pin_request.c - check and write (or delete) a plugin's pin (see
 * the design notes in election_pin_request.h).
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "election/election.h"
#include "election/election_pin.h"
#include "election/election_pin_request.h"

#define PIN_CTX_MAGIC 0x50494e52u

struct pin_ctx {
	uint32_t magic; /* PIN_CTX_MAGIC */
	struct etcd_client *etcd;
	pin_done_fn done;
	void *ud;
	char *name, *requester, *k_range, *k_members, *k_status, *k_pin;
	uint8_t k_range_end[600];
	size_t k_range_end_len;
	struct pin_request rq; /* strings point into the fields above */
	/* what the check relied on (the write compares it) */
	int64_t status_mod;
	char member_key[600];
	int64_t member_mod;
	bool forced;
	char warning[512];
};

static void pin_request_ctx_free(struct pin_ctx *c)
{
	free(c->name);
	free(c->requester);
	free(c->k_range);
	free(c->k_members);
	free(c->k_status);
	free(c->k_pin);
	c->magic = 0;
	free(c);
}

static struct pin_ctx *pin_request_ctx_of(void *ud)
{
	struct pin_ctx *c = ud;
	assert(c != NULL && c->magic == PIN_CTX_MAGIC);
	return c;
}

static void pin_request_finish(struct pin_ctx *c, int err, const char *msg, int64_t rev)
{
	c->done(c->ud, err, msg, err == 0 && c->warning[0] ? c->warning : NULL, err == 0 ? rev : 0);
	pin_request_ctx_free(c);
}

static void pin_request_fail(struct pin_ctx *c, const char *what, int err)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "cannot %s: %s", what, etcd_strerror(err));
	pin_request_finish(c, err, msg, 0);
}

static bool pin_request_kv_is(const struct etcd_kv *kv, const char *k)
{
	return kv->key_len == strlen(k) && memcmp(kv->key, k, kv->key_len) == 0;
}

static bool pin_request_kv_under(const struct etcd_kv *kv, const char *p)
{
	size_t n = strlen(p);
	return kv->key_len > n && memcmp(kv->key, p, n) == 0;
}

/* the member releases present, "1.0.0, 2.0.0" (distinct, in key order) */
static void pin_request_present(const struct etcd_response *range, const struct pin_ctx *c,
                                char *buf, size_t len)
{
	struct release seen[16];
	size_t n = 0, l = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < range->n_kvs && n < 16; i++) {
		struct release r;
		char x[RELEASE_STRLEN];
		if (!pin_request_kv_under(&range->kvs[i], c->k_members) ||
		    election_decode_member(range->kvs[i].value, range->kvs[i].value_len, &r, NULL) < 0)
			continue;
		size_t j = 0;
		while (j < n && release_cmp(seen[j], r) != 0)
			j++;
		if (j < n)
			continue;
		seen[n++] = r;
		int w = snprintf(buf + l, len - l, "%s%s", l ? ", " : "", release_format(r, x, sizeof(x)));
		if (w < 0 || (size_t)w >= len - l)
			break;
		l += (size_t)w;
	}
}

/* check - the refusals on the state read; 0 or -errno with the reason */
static int pin_request_check(struct pin_ctx *c, const struct etcd_response *range, char *msg,
                             size_t len)
{
	char x[RELEASE_STRLEN], y[RELEASE_STRLEN], present[256];
	struct status_rec st = {0};
	size_t n_members = 0;
	for (size_t i = 0; i < range->n_kvs; i++) {
		const struct etcd_kv *kv = &range->kvs[i];
		struct release r;
		if (pin_request_kv_is(kv, c->k_status)) {
			election_status_decode(kv->value, kv->value_len, &st);
			c->status_mod = kv->mod_revision;
		} else if (pin_request_kv_under(kv, c->k_members)) {
			n_members++;
			if (!c->member_mod &&
			    election_decode_member(kv->value, kv->value_len, &r, NULL) == 0 &&
			    release_cmp(r, c->rq.release) == 0 && kv->key_len < sizeof(c->member_key)) {
				memcpy(c->member_key, kv->key, kv->key_len);
				c->member_key[kv->key_len] = '\0';
				c->member_mod = kv->mod_revision;
			}
		}
	}
	if (n_members == 0) {
		snprintf(msg, len, "plugin '%s' has no members in etcd (unknown plugin)", c->name);
		return -ENOENT;
	}
	if (c->rq.unpin)
		return 0;
	release_format(c->rq.release, x, sizeof(x));
	if (!c->member_mod) {
		pin_request_present(range, c, present, sizeof(present));
		snprintf(msg, len, "no member of plugin '%s' runs release %s (present: %s); a pin "
		         "names a release that runs", c->name, x, present[0] ? present : "none");
		return -ESRCH;
	}
	if (st.valid && release_less(c->rq.release, st.version)) {
		release_format(st.version, y, sizeof(y));
		if (!c->rq.force) {
			snprintf(msg, len, "release %s is older than the status's version %s: its "
			         "reconciled state would be handed back to an older reconciler; "
			         "--force does that", x, y);
			return -ERANGE;
		}
		c->forced = true;
		snprintf(c->warning, sizeof(c->warning),
		         "warning: release %s is older than the status's version %s: a leader of %s "
		         "takes the reconciled state back (it restricts the status to %s and "
		         "reconciles with %s's code); nodes that need a reconciler newer than %s "
		         "stop being ready", x, y, x, x, x, x);
	}
	return 0;
}

static void pin_request_on_written(struct etcd_client *cl, int err, const struct etcd_response *r,
                                   void *ud)
{
	(void)cl;
	struct pin_ctx *c = pin_request_ctx_of(ud);
	char msg[256];
	if (err < 0) {
		pin_request_fail(c, c->rq.unpin ? "delete the pin" : "write the pin", err);
		return;
	}
	if (!r->succeeded) {
		snprintf(msg, sizeof(msg), "plugin '%s' changed while the pin was checked (its "
		         "status or the member that runs the release); try again", c->name);
		pin_request_finish(c, -EBUSY, msg, 0);
		return;
	}
	pin_request_finish(c, 0, NULL, r->header.revision);
}

static void pin_request_write(struct pin_ctx *c)
{
	struct etcd_compare cmps[2];
	size_t nc = 0;
	uint8_t *buf = NULL;
	size_t n = 0;
	struct etcd_op op = {.type = ETCD_OP_DELETE, .key = c->k_pin, .key_len = strlen(c->k_pin)};
	if (!c->rq.unpin) {
		if (election_pin_encode(c->rq.release, c->forced, c->requester, (int64_t)time(NULL),
		                        &buf, &n) < 0) {
			pin_request_finish(c, -ENOMEM, "out of memory", 0);
			return;
		}
		op.type = ETCD_OP_PUT;
		op.value = buf;
		op.value_len = n;
		cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
		                                   .key = c->k_status, .key_len = strlen(c->k_status),
		                                   .number = c->status_mod};
		cmps[nc++] = (struct etcd_compare){.target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
		                                   .key = c->member_key,
		                                   .key_len = strlen(c->member_key),
		                                   .number = c->member_mod};
	}
	int rc = etcd_txn(c->etcd, cmps, nc, &op, 1, NULL, 0, NULL, pin_request_on_written, c, NULL);
	free(buf);
	if (rc < 0)
		pin_request_fail(c, c->rq.unpin ? "delete the pin" : "write the pin", rc);
}

static void pin_request_on_read(struct etcd_client *cl, int err, const struct etcd_response *r,
                                void *ud)
{
	(void)cl;
	struct pin_ctx *c = pin_request_ctx_of(ud);
	char msg[512];
	if (err < 0 || r->n_responses < 1) {
		pin_request_fail(c, "read the plugin's state from etcd", err < 0 ? err : -EBADMSG);
		return;
	}
	int rc = pin_request_check(c, &r->responses[0], msg, sizeof(msg));
	if (rc < 0) {
		pin_request_finish(c, rc, msg, 0);
		return;
	}
	pin_request_write(c);
}

static char *pin_request_join(const char *p, size_t pl, const char *name, const char *rest)
{
	char *s = NULL;
	if (asprintf(&s, "%.*s/%s/%s", (int)pl, p, name, rest) < 0)
		return NULL;
	return s;
}

int pin_request_start(struct etcd_client *etcd, const struct pin_request *rq, pin_done_fn done,
                      void *ud)
{
	if (!etcd || !rq || !rq->prefix || !rq->name || !*rq->name || strchr(rq->name, '/') ||
	    strlen(rq->name) > 255 || !done)
		return -EINVAL;
	struct pin_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->magic = PIN_CTX_MAGIC;
	c->etcd = etcd;
	c->done = done;
	c->ud = ud;
	c->rq = *rq;
	size_t pl = strlen(rq->prefix);
	while (pl > 0 && rq->prefix[pl - 1] == '/')
		pl--;
	c->name = strdup(rq->name);
	c->requester = strdup(rq->requester ? rq->requester : "");
	c->k_range = pin_request_join(rq->prefix, pl, rq->name, "election/");
	c->k_members = pin_request_join(rq->prefix, pl, rq->name, "members/");
	c->k_status = pin_request_join(rq->prefix, pl, rq->name, "status");
	c->k_pin = pin_request_join(rq->prefix, pl, rq->name, PIN_KEY);
	int r = -ENOMEM;
	if (!c->name || !c->requester || !c->k_range || !c->k_members || !c->k_status || !c->k_pin ||
	    strlen(c->k_status) + 1 > sizeof(c->k_range_end))
		goto fail;
	c->rq.name = c->name;
	c->rq.requester = c->requester;
	c->rq.prefix = NULL;
	/* [P/N/election/, P/N/status] as the hosts watch it */
	c->k_range_end_len = strlen(c->k_status) + 1;
	memcpy(c->k_range_end, c->k_status, c->k_range_end_len);
	struct etcd_op op = {.type = ETCD_OP_RANGE, .key = c->k_range, .key_len = strlen(c->k_range),
	                     .range_end = c->k_range_end, .range_end_len = c->k_range_end_len};
	r = etcd_txn(etcd, NULL, 0, &op, 1, NULL, 0, NULL, pin_request_on_read, c, NULL);
	if (r == 0)
		return 0;
fail:
	pin_request_ctx_free(c);
	return r;
}
