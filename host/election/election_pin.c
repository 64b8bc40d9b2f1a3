/* SPDX-License-Identifier: MIT */
/*
 * election_pin.c - the pin record (see election_pin.h): its codec, and the
 * election mirror's copy of it (applied like the pause record: a key of
 * the watched range, gone when a full read no longer holds it).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_internal.h"
#include "election/election_pin.h"
#include "base/log.h"
#include "proto/leasehold.pb-c.h"

int election_pin_decode(const uint8_t *v, size_t len, struct rule_pin *ret_pin, char *ret_by,
                        size_t by_len, int64_t *ret_at)
{
	*ret_pin = (struct rule_pin){.set = false};
	if (ret_by && by_len)
		ret_by[0] = '\0';
	if (ret_at)
		*ret_at = 0;
	Leasehold__Pin *p = leasehold__pin__unpack(NULL, len, v);
	if (!p)
		return -EBADMSG;
	if (!p->release) {
		leasehold__pin__free_unpacked(p, NULL);
		return -EBADMSG;
	}
	ret_pin->set = true;
	ret_pin->forced = p->forced;
	ret_pin->release = (struct release){p->release->major, p->release->minor, p->release->patch};
	if (ret_by && by_len) {
		size_t n = p->node ? strnlen(p->node, by_len - 1) : 0;
		for (size_t i = 0; i < n; i++)
			ret_by[i] = p->node[i] >= 0x20 && p->node[i] < 0x7f ? p->node[i] : '?';
		ret_by[n] = '\0';
	}
	if (ret_at)
		*ret_at = p->at_unix;
	leasehold__pin__free_unpacked(p, NULL);
	return 0;
}

int election_pin_encode(struct release rel, bool forced, const char *by, int64_t at,
                        uint8_t **ret, size_t *ret_len)
{
	Leasehold__Release r = LEASEHOLD__RELEASE__INIT;
	r.major = rel.major;
	r.minor = rel.minor;
	r.patch = rel.patch;
	Leasehold__Pin p = LEASEHOLD__PIN__INIT;
	p.release = &r;
	p.forced = forced;
	p.node = (char *)(by ? by : "");
	p.at_unix = at;
	size_t n = leasehold__pin__get_packed_size(&p);
	uint8_t *b = malloc(n ? n : 1);
	if (!b)
		return -ENOMEM;
	leasehold__pin__pack(&p, b);
	*ret = b;
	*ret_len = n;
	return 0;
}

/* ---- the mirror ---- */

int election_pin_init(struct election *e)
{
	if (asprintf(&e->k_pin, "%s/%s/" PIN_KEY, e->prefix, e->name) < 0) {
		e->k_pin = NULL;
		return -ENOMEM;
	}
	return 0;
}

void election_pin_free(struct election *e)
{
	free(e->k_pin);
	e->k_pin = NULL;
}

static void election_pin_log(const struct election *e, const struct rule_pin *was)
{
	char a[RELEASE_STRLEN];
	if (was->set == e->pin.set && was->forced == e->pin.forced &&
	    (!was->set || release_cmp(was->release, e->pin.release) == 0))
		return;
	if (!e->pin.set)
		log_info("election", "%s: %s", e->name,
		         e->pin_error[0] ? e->pin_error : "unpinned by an operator");
	else
		log_info("election", "%s: pinned at release %s by an operator%s: no newer release "
		         "campaigns", e->name, release_format(e->pin.release, a, sizeof(a)),
		         e->pin.forced ? " (forced)" : "");
}

bool election_pin_apply(struct election *e, const struct etcd_kv *kv, bool del)
{
	if (kv->key_len != strlen(e->k_pin) || memcmp(kv->key, e->k_pin, kv->key_len) != 0)
		return false;
	struct rule_pin was = e->pin;
	e->pin_error[0] = '\0';
	e->pin_mod_rev = del ? 0 : kv->mod_revision;
	if (del) {
		e->pin = (struct rule_pin){.set = false};
		e->pin_by[0] = '\0';
		e->pin_at = 0;
	} else {
		e->pin_seen = true;
		if (election_pin_decode(kv->value, kv->value_len, &e->pin, e->pin_by,
		                        sizeof(e->pin_by), &e->pin_at) < 0) {
			snprintf(e->pin_error, sizeof(e->pin_error),
			         "the pin record does not decode (ignored: no pin)");
			log_warn("election", "%s: %s", e->name, e->pin_error);
		}
	}
	election_pin_log(e, &was);
	return true;
}

void election_pin_sync_begin(struct election *e)
{
	e->pin_seen = false;
	e->pin_mod_rev = 0;
}

void election_pin_sync_end(struct election *e)
{
	if (!e->pin_seen && (e->pin.set || e->pin_error[0])) {
		struct etcd_kv gone = {.key = (uint8_t *)e->k_pin, .key_len = strlen(e->k_pin)};
		election_pin_apply(e, &gone, true);
	}
}

int election_release_pin(struct election *e, bool unpin, struct release rel, bool force,
                         pin_done_fn done, void *ud)
{
	CHECK_OBJ(e, ELECTION_MAGIC);
	struct pin_request rq = {.prefix = e->prefix, .name = e->name, .requester = e->node_id,
	                         .unpin = unpin, .release = rel, .force = force};
	return pin_request_start(e->etcd, &rq, done, ud);
}
