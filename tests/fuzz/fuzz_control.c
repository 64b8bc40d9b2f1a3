/* SPDX-License-Identifier: MIT */
/*
 * fuzz_control.c - the control protocol decoders (host/control/control_codec.h):
 * control_codec_request_decode (what the daemon's control socket decodes
 * from a client), control_codec_response_decode (what leaseholdctl
 * decodes from the daemon), and the frame receiver both sides read the
 * socket with (control_wire_rx_feed, host/control/control_wire.h).
 *
 * Input: byte 0 selects. Below 0x80: even a request, odd a response; the
 * rest is the message. 0x80 and up: a byte stream for the frame receiver;
 * byte 1 sets the size of the chunks it is fed in (1..64), and every frame
 * that comes out is decoded as a request. Invariants: a failure returns a
 * documented -errno with a reason and leaves the out pointer untouched; an
 * accepted request has a known kind and a well-formed name where the kind
 * needs one; an accepted reply has a known code and bounded strings
 * everywhere; the receiver never asks for 0 bytes nor takes more than it is
 * given, keeps exactly the frames up to its limit and refuses the rest.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/control_codec.h"
#include "control/control_wire.h"
#include "fuzz.h"

static volatile size_t g_sink;

static void touch_str(const char *s)
{
	FUZZ_CHECK(s != NULL);
	size_t n = strlen(s);
	FUZZ_CHECK(n <= CONTROL_STRING_MAX);
	g_sink += n;
}

static void fuzz_request(const uint8_t *buf, size_t len)
{
	static Leasehold__Control__Request sentinel;
	Leasehold__Control__Request *req = &sentinel;
	const char *why = NULL;
	int r = control_codec_request_decode(buf, len, &req, &why);
	if (r < 0) {
		FUZZ_CHECK(r == -EMSGSIZE || r == -EBADMSG || r == -EPROTONOSUPPORT || r == -EINVAL);
		FUZZ_CHECK(why != NULL && why[0] != 0);
		FUZZ_CHECK(req == &sentinel);
		return;
	}
	FUZZ_CHECK(r == 0 && req != &sentinel && req != NULL);
	FUZZ_CHECK(req->protocol == CONTROL_PROTOCOL);
	FUZZ_CHECK(strcmp(control_codec_kind_str((int)req->kind), "?") != 0);
	FUZZ_CHECK(req->name != NULL);
	if (req->kind == LEASEHOLD__CONTROL__KIND__KIND_STATUS ||
	    req->kind == LEASEHOLD__CONTROL__KIND__KIND_MEMBERS ||
	    req->kind == LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY)
		FUZZ_CHECK(control_codec_name_ok(req->name));
	g_sink += strlen(req->name);
	leasehold__control__request__free_unpacked(req, NULL);
}

static void touch_release(const Leasehold__Control__Release *r)
{
	struct release x = control_codec_release(r);
	g_sink += x.major + x.minor + x.patch;
}

static void fuzz_response(const uint8_t *buf, size_t len)
{
	static Leasehold__Control__Response sentinel;
	Leasehold__Control__Response *resp = &sentinel;
	const char *why = NULL;
	int r = control_codec_response_decode(buf, len, &resp, &why);
	if (r < 0) {
		FUZZ_CHECK(r == -EBADMSG);
		FUZZ_CHECK(why != NULL && why[0] != 0);
		FUZZ_CHECK(resp == &sentinel);
		return;
	}
	FUZZ_CHECK(resp != &sentinel && resp != NULL);
	g_sink += strlen(control_codec_code_str((int)resp->code));
	touch_str(resp->message);
	touch_str(resp->node);
	touch_str(resp->daemon_version);
	for (size_t i = 0; i < resp->n_plugins; i++) {
		const Leasehold__Control__Plugin *p = resp->plugins[i];
		FUZZ_CHECK(p != NULL);
		touch_str(p->name);
		touch_str(p->file);
		touch_str(p->state);
		touch_str(p->leader);
		touch_str(p->error);
		touch_str(p->held_back);
		touch_release(p->release);
		if (p->releases) {
			touch_release(p->releases->min);
			touch_release(p->releases->max);
		}
		if (p->status) {
			touch_str(p->status->state);
			touch_release(p->status->version);
			touch_release(p->status->minimum_compatible_release);
		}
		if (p->reconcile)
			touch_str(p->reconcile->last_error);
	}
	for (size_t i = 0; i < resp->n_members; i++) {
		FUZZ_CHECK(resp->members[i] != NULL);
		touch_str(resp->members[i]->node);
		touch_release(resp->members[i]->release);
	}
	leasehold__control__response__free_unpacked(resp, NULL);
}

/* small limits, so that the fuzzer reaches every branch */
#define FRAME_KEEP 256
#define FRAME_MAX 1024

static void fuzz_frames(const uint8_t *buf, size_t len)
{
	struct control_wire_rx rx;
	size_t chunk, pos = 0;

	if (len < 1)
		return;
	chunk = 1 + buf[0] % 64;
	buf++;
	len--;
	control_wire_rx_init(&rx, FRAME_KEEP, FRAME_MAX);
	while (pos < len) {
		size_t want = control_wire_rx_want(&rx), n = len - pos, used = 99999;
		int r;
		FUZZ_CHECK(want > 0);
		if (n > chunk)
			n = chunk;
		if (n > want)
			n = want;
		r = control_wire_rx_feed(&rx, buf + pos, n, &used);
		if (r < 0) {
			FUZZ_CHECK(r == -EBADMSG || r == -EMSGSIZE);
			break;
		}
		FUZZ_CHECK(used <= n);
		pos += used;
		if (r == CONTROL_WIRE_MORE) {
			FUZZ_CHECK(used == n);
			continue;
		}
		if (r == CONTROL_WIRE_FRAME) {
			FUZZ_CHECK(rx.len <= FRAME_KEEP && rx.buf != NULL);
			fuzz_request(rx.buf, rx.len);
		} else {
			FUZZ_CHECK(r == CONTROL_WIRE_TOO_LARGE);
			FUZZ_CHECK(rx.len > FRAME_KEEP && rx.len <= FRAME_MAX && rx.buf == NULL);
		}
		control_wire_rx_reset(&rx);
	}
	control_wire_rx_reset(&rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] >= 0x80)
		fuzz_frames(data + 1, size - 1);
	else if ((data[0] & 1) == 0)
		fuzz_request(data + 1, size - 1);
	else
		fuzz_response(data + 1, size - 1);
	return 0;
}
