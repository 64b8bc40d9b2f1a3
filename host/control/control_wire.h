/* SPDX-License-Identifier: MIT */
/*
 * control_wire.h - the control socket's framing (leaseholdctl <-> leasehold)
 * and the rules for naming the socket.
 *
 * A frame is CONTROL_WIRE_HEADER bytes, "LHC1" and the payload length as a
 * 32-bit big-endian number, followed by the payload: one packed Request
 * (client -> daemon) or Response (daemon -> client) of proto/control.proto.
 * The magic makes a peer that speaks anything else (an nng/SP client, a
 * health probe, random bytes) fail at its first four bytes instead of
 * announcing a length the daemon would wait for.
 *
 * Everything here is pure: no I/O, no logging. The frame receiver takes
 * untrusted bytes in chunks of any size (it is fuzzed: tests/fuzz/).
 */
#ifndef LH_CONTROL_WIRE_H
#define LH_CONTROL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONTROL_WIRE_HEADER 8
#define CONTROL_WIRE_MAGIC "LHC1"

/* control_wire_header - write the header of a frame of len payload bytes. */
void control_wire_header(uint8_t out[CONTROL_WIRE_HEADER], uint32_t len);

/* A receiver for one frame at a time. Payloads up to `keep` bytes are kept
 * (rx.buf, malloc'd); longer ones up to `max` are read and dropped, and
 * announced as too large; longer than `max` or a wrong magic is an error
 * (the stream cannot be trusted any further). */
struct control_wire_rx {
	size_t keep, max;
	uint8_t head[CONTROL_WIRE_HEADER];
	size_t head_got;
	uint32_t len;	/* the payload length, once the header is complete */
	size_t body_got;
	uint8_t *buf;	/* the kept payload (len bytes), or NULL */
};

enum control_wire_status {
	CONTROL_WIRE_MORE,	/* the frame is not complete yet */
	CONTROL_WIRE_FRAME,	/* a frame is complete: rx->buf holds rx->len bytes */
	CONTROL_WIRE_TOO_LARGE, /* a frame of rx->len (> keep) bytes was skipped */
};

/* control_wire_rx_init - an empty receiver (keep <= max). */
void control_wire_rx_init(struct control_wire_rx *rx, size_t keep, size_t max);
/* control_wire_rx_want - how many bytes the current frame still needs (never
 * 0): read at most that many, so that no byte of the next frame is taken. */
size_t control_wire_rx_want(const struct control_wire_rx *rx);
/* control_wire_rx_feed - take n (<= control_wire_rx_want) bytes. Returns a
 * control_wire_status (>= 0) or -EBADMSG (wrong magic), -EMSGSIZE (length
 * over max), -ENOMEM. After CONTROL_WIRE_FRAME/TOO_LARGE the caller uses the
 * frame, then calls control_wire_rx_reset before feeding more. *ret_used is
 * how many of the n bytes were taken. */
int control_wire_rx_feed(struct control_wire_rx *rx, const uint8_t *buf, size_t n,
			 size_t *ret_used);
/* control_wire_rx_started - true when part of a frame has been received. */
bool control_wire_rx_started(const struct control_wire_rx *rx);
/* control_wire_rx_reset - free the payload and wait for the next frame. */
void control_wire_rx_reset(struct control_wire_rx *rx);

/* control_wire_path - the socket path named by a --control value: an
 * "ipc://PATH" URL (the form nng used; PATH may be relative) or a plain
 * absolute "/path". Copies it into
 * buf (len bytes). Returns 0, -EINVAL (neither form, empty path) or
 * -ENAMETOOLONG (does not fit a sockaddr_un). */
int control_wire_path(const char *url, char *buf, size_t len);

#endif
