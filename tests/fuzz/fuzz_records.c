/* SPDX-License-Identifier: MIT */
/*
 * fuzz_records.c - records read back from etcd (proto/leasehold.proto):
 * Member (P/N/members/<id>), ReconcilerStatus (P/N/status) and NodeRoles
 * (P/roles/<id>) on hostile bytes.
 *
 * Member and ReconcilerStatus go through the host's own decoders,
 * election_decode_member / election_decode_status (host/election/election_internal.h), which
 * the election's mirror uses; the target checks they agree with a raw
 * protobuf-c unpack and survive a pack/unpack round trip of anything accepted.
 * NodeRoles goes through the host's own public decoder, roles_decode
 * (host/election/election_roles.h), after the raw unpack: accepted records hold at most
 * ROLES_MAX valid role names.
 *
 * Pin (P/N/pin) goes through election_pin_decode (host/election/election_pin.h):
 * a value it accepts has a release and a printable writer, one it refuses
 * leaves "no pin" (the mirror ignores it), and the release rule decided
 * under what it accepts never names a release newer than the pin.
 *
 * Input: byte 0 selects the message (mod 4: 0 Member, 1 ReconcilerStatus,
 * 2 NodeRoles, 3 Pin); the rest is the record value.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/leasehold.pb-c.h"
#include "election/election_internal.h"
#include "election/election_roles.h"
#include "election/election_pin.h"

static volatile size_t g_sink;

static void touch_str(const char *s)
{
	/* protobuf-c gives "" (a static default) for an absent proto3 string */
	FUZZ_CHECK(s != NULL);
	g_sink += strlen(s);
}

/* strip_unknown - drop the unknown fields of m and of every message nested in
 * it. protobuf-c 1.4.1 keeps fields it cannot interpret (even a field number
 * 0 in a non-minimal varint, 80 00) at any depth, and packs them back in a
 * form its own unpack refuses; the host ignores unknown fields, so round trips
 * are checked on known fields only. m came from unpack with the default
 * allocator, so the dropped fields are freed here and free_unpacked stays
 * balanced. */
static void strip_unknown(ProtobufCMessage *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		free(m->unknown_fields[i].data);
	free(m->unknown_fields);
	m->unknown_fields = NULL;
	m->n_unknown_fields = 0;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		char *at = (char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(size_t *)((char *)m + f->quantifier_offset);
			ProtobufCMessage **v = *(ProtobufCMessage ***)at;
			for (size_t k = 0; k < n; k++)
				strip_unknown(v[k]);
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
			continue;
		strip_unknown(*(ProtobufCMessage **)at);
	}
}

/* pack_known - pack m with its unknown fields (at every depth) dropped.
 * Returns the malloc'd buffer (caller frees) and its length. */
static uint8_t *pack_known(ProtobufCMessage *m, size_t *ret_len)
{
	strip_unknown(m);
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	FUZZ_CHECK(buf != NULL);
	FUZZ_CHECK(protobuf_c_message_pack(m, buf) == n);
	*ret_len = n;
	return buf;
}

/* the host's decoder of P/N/members/<id>, plus a pack/unpack round trip */
static void fuzz_member(const uint8_t *v, size_t len)
{
	struct release rel = {0};
	int r = election_decode_member(v, len, &rel, NULL);
	FUZZ_CHECK(r == 0 || r == -EBADMSG);
	Leasehold__Member *m = leasehold__member__unpack(NULL, len, v);
	FUZZ_CHECK((r == 0) == (m != NULL && m->release != NULL));
	if (!m)
		return;
	touch_str(m->node_id);
	touch_str(m->host_version);
	if (r == 0)
		FUZZ_CHECK(rel.major == m->release->major && rel.minor == m->release->minor &&
		           rel.patch == m->release->patch);
	size_t n;
	uint8_t *buf = pack_known(&m->base, &n);
	struct release rel2 = {0};
	FUZZ_CHECK(election_decode_member(buf, n, &rel2, NULL) == r);
	FUZZ_CHECK(r != 0 || release_cmp(rel, rel2) == 0);
	free(buf);
	leasehold__member__free_unpacked(m, NULL);
}

/* the host's decoder of P/N/status, plus a pack/unpack round trip */
static void fuzz_status(const uint8_t *v, size_t len)
{
	int st = 0;
	struct release ver = {0}, mcr = {0};
	int r = election_decode_status(v, len, &st, &ver, &mcr);
	FUZZ_CHECK(r == 0 || r == -EBADMSG);
	Leasehold__ReconcilerStatus *s = leasehold__reconciler_status__unpack(NULL, len, v);
	/* accepted exactly when both releases are present (any state, as in the reference algorithm) */
	FUZZ_CHECK((r == 0) == (s && s->version && s->minimum_compatible_release));
	if (r == 0)
		FUZZ_CHECK(st == (int)s->state);
	if (!s) {
		FUZZ_CHECK(r != 0);
		return;
	}
	size_t n;
	uint8_t *buf = pack_known(&s->base, &n);
	int st2 = 0;
	struct release ver2 = {0}, mcr2 = {0};
	FUZZ_CHECK(election_decode_status(buf, n, &st2, &ver2, &mcr2) == r);
	FUZZ_CHECK(r != 0 || (st == st2 && release_cmp(ver, ver2) == 0 && release_cmp(mcr, mcr2) == 0));
	free(buf);
	leasehold__reconciler_status__free_unpacked(s, NULL);
}

static void fuzz_roles(const uint8_t *v, size_t len)
{
	Leasehold__NodeRoles *r = leasehold__node_roles__unpack(NULL, len, v);
	if (!r)
		return;
	touch_str(r->node_id);
	FUZZ_CHECK(r->n_roles == 0 || r->roles != NULL);
	for (size_t i = 0; i < r->n_roles; i++)
		touch_str(r->roles[i]);
	size_t n;
	uint8_t *buf = pack_known(&r->base, &n);
	Leasehold__NodeRoles *again = leasehold__node_roles__unpack(NULL, n, buf);
	FUZZ_CHECK(again != NULL);
	FUZZ_CHECK(again->n_roles == r->n_roles);
	leasehold__node_roles__free_unpacked(again, NULL);
	free(buf);
	leasehold__node_roles__free_unpacked(r, NULL);
}

/* roles_decode - the host's decoder of P/roles/<id> for node "node-a" */
static void fuzz_roles_decode(const uint8_t *v, size_t len)
{
	char **roles = NULL, err[256];
	size_t n = 0;
	err[0] = 0;
	int r = roles_decode(v, len, "node-a", &roles, &n, err, sizeof(err));
	if (r < 0) {
		FUZZ_CHECK(r == -EBADMSG || r == -ENOMEM);
		FUZZ_CHECK(err[0] != 0 && memchr(err, 0, sizeof(err)) != NULL);
		return;
	}
	FUZZ_CHECK(r == 0);
	FUZZ_CHECK(n <= ROLES_MAX);
	FUZZ_CHECK(n == 0 || roles != NULL);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(roles[i] != NULL && roles_name_valid(roles[i]));
	roles_strv_free(roles, n);
}

/* election_pin_decode, then the rule under the pin over members 1.0.0 and 9.0.0 */
static void fuzz_pin(const uint8_t *v, size_t len)
{
	struct rule_pin pin;
	char by[129];
	int64_t at;
	int r = election_pin_decode(v, len, &pin, by, sizeof(by), &at);
	FUZZ_CHECK(memchr(by, 0, sizeof(by)) != NULL);
	if (r < 0) {
		FUZZ_CHECK(r == -EBADMSG && !pin.set && by[0] == '\0');
		return;
	}
	FUZZ_CHECK(pin.set);
	for (size_t i = 0; by[i]; i++)
		FUZZ_CHECK(by[i] >= 0x20 && by[i] < 0x7f);
	struct relcount rc[2] = {
	    {.rr = {.release = {1, 0, 0}, .min_compatible = {1, 0, 0}, .declared = true}, .count = 1},
	    {.rr = {.release = {9, 0, 0}, .min_compatible = {9, 0, 0}, .declared = true}, .count = 1},
	};
	struct rule_status st = {.valid = true, .version = {1, 0, 0}, .min_compatible = {1, 0, 0}};
	struct rule_answer a;
	release_rule_decide_pinned(NULL, rc, 2, false, &st, &pin, &a);
	FUZZ_CHECK(a.basis == RULE_NONE || !release_less(pin.release, a.release));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
		fuzz_member(data + 1, size - 1);
		break;
	case 1:
		fuzz_status(data + 1, size - 1);
		break;
	case 2:
		fuzz_roles(data + 1, size - 1);
		fuzz_roles_decode(data + 1, size - 1);
		break;
	default:
		fuzz_pin(data + 1, size - 1);
		break;
	}
	return 0;
}
