/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "abi/abi_bus.h"

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
