/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "abi/abi_bus.h"
#include "etcd/etcd.h"

ProtobufCBinaryData bus_bin(const void *p, size_t len)
{
	ProtobufCBinaryData b = {.len = len, .data = (uint8_t *)(uintptr_t)p};
	return b;
}

ProtobufCBinaryData bus_bin_str(const char *s)
{
	return bus_bin(s, s ? strlen(s) : 0);
}

nng_msg *bus_pack_msg(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	nng_msg *msg;
	if (nng_msg_alloc(&msg, n) != 0)
		return NULL;
	protobuf_c_message_pack(m, nng_msg_body(msg));
	return msg;
}

void bus_kv_from_etcd(BusKv *b, const struct etcd_kv *kv, size_t strip)
{
	leasehold__bus__kv__init(b);
	b->key = bus_bin(kv->key + strip, kv->key_len - strip);
	b->value = bus_bin(kv->value, kv->value ? kv->value_len : 0);
	b->create_revision = kv->create_revision;
	b->mod_revision = kv->mod_revision;
	b->version = kv->version;
}
