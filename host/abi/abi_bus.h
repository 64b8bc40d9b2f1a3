/* SPDX-License-Identifier: MIT */
/*
 * abi_bus.h - small helpers shared by both ends of the host <-> worker bus
 * (plugin_instance*.c on the host loop, worker.c on the worker): short names
 * of the bus messages, protobuf-c bytes fields and packing a message into an
 * nng message.
 */
#ifndef LH_BUS_MSG_H
#define LH_BUS_MSG_H

#include <stddef.h>

#include <nng/nng.h>
#include <protobuf-c/protobuf-c.h>

#include "proto/bus.pb-c.h"

/* The version of the bus protocol (proto/bus.proto), exchanged at INIT and
 * checked by both sides: they must speak the same one. 2: the Events batch
 * and the check itself (1 was never sent: its peers send 0). Raise it with
 * every change an older peer would misread. 3: ABI 1.2 watches (read grants
 * in INIT, watches in its answer, WatchEvents, RangeRequest,
 * RequestReconcile). 4: apply's paged ranges. 5: ABI 1.3 keyed reconcile
 * (ReconcileKey, EventDone's requeue_after_ms and keys). */
#define LH_BUS_VERSION 5u

typedef Leasehold__Bus__ToWorker ToWorker;
typedef Leasehold__Bus__ToHost ToHost;
typedef Leasehold__Bus__Event Event;
typedef Leasehold__Bus__EventDone EventDone;
typedef Leasehold__Bus__TxnRequest TxnRequest;
typedef Leasehold__Bus__TxnReply TxnReply;
typedef Leasehold__Bus__Op BusOp;
typedef Leasehold__Bus__Compare BusCompare;
typedef Leasehold__Bus__OpResult BusOpResult;
typedef Leasehold__Bus__Kv BusKv;

/* bus_bin - a bytes field viewing p[0..len) (borrowed, not copied) */
ProtobufCBinaryData bus_bin(const void *p, size_t len);
/* bus_bin_str - a bytes field viewing the string s (NULL = empty) */
ProtobufCBinaryData bus_bin_str(const char *s);
/* bus_pack_msg - pack m into a new nng message (caller owns it); NULL on ENOMEM */
nng_msg *bus_pack_msg(const ProtobufCMessage *m);

#endif
