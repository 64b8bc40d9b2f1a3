/* SPDX-License-Identifier: MIT */
/*
 * control_wire.c - control socket framing (see control_wire.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "control/control_wire.h"

void control_wire_header(uint8_t out[CONTROL_WIRE_HEADER], uint32_t len)
{
	memcpy(out, CONTROL_WIRE_MAGIC, 4);
	out[4] = (uint8_t)(len >> 24);
	out[5] = (uint8_t)(len >> 16);
	out[6] = (uint8_t)(len >> 8);
	out[7] = (uint8_t)len;
}

void control_wire_rx_init(struct control_wire_rx *rx, size_t keep, size_t max)
{
	memset(rx, 0, sizeof(*rx));
	rx->keep = keep;
	rx->max = max < keep ? keep : max;
}

size_t control_wire_rx_want(const struct control_wire_rx *rx)
{
	if (rx->head_got < CONTROL_WIRE_HEADER)
		return CONTROL_WIRE_HEADER - rx->head_got;
	if (rx->body_got < rx->len)
		return rx->len - rx->body_got;
	return 1; /* complete: the caller resets before feeding more */
}

bool control_wire_rx_started(const struct control_wire_rx *rx)
{
	return rx->head_got > 0;
}

void control_wire_rx_reset(struct control_wire_rx *rx)
{
	free(rx->buf);
	control_wire_rx_init(rx, rx->keep, rx->max);
}

/* the header is complete: check it, make room for a kept payload */
static int control_wire_take_header(struct control_wire_rx *rx)
{
	uint32_t len;

	if (memcmp(rx->head, CONTROL_WIRE_MAGIC, 4) != 0)
		return -EBADMSG;
	len = (uint32_t)rx->head[4] << 24 | (uint32_t)rx->head[5] << 16 |
	      (uint32_t)rx->head[6] << 8 | (uint32_t)rx->head[7];
	if (len > rx->max)
		return -EMSGSIZE;
	rx->len = len;
	if (len <= rx->keep) {
		rx->buf = malloc(len ? len : 1);
		if (!rx->buf)
			return -ENOMEM;
	}
	return 0;
}

int control_wire_rx_feed(struct control_wire_rx *rx, const uint8_t *buf, size_t n,
			 size_t *ret_used)
{
	size_t used = 0, take;
	int r;

	*ret_used = 0;
	if (rx->head_got < CONTROL_WIRE_HEADER) {
		take = CONTROL_WIRE_HEADER - rx->head_got;
		if (take > n)
			take = n;
		memcpy(rx->head + rx->head_got, buf, take);
		rx->head_got += take;
		used = take;
		/* a wrong magic is known as soon as its bytes are in */
		if (memcmp(rx->head, CONTROL_WIRE_MAGIC,
			   rx->head_got < 4 ? rx->head_got : 4) != 0)
			return -EBADMSG;
		if (rx->head_got < CONTROL_WIRE_HEADER) {
			*ret_used = used;
			return CONTROL_WIRE_MORE;
		}
		r = control_wire_take_header(rx);
		if (r < 0)
			return r;
	}
	take = rx->len - rx->body_got;
	if (take > n - used)
		take = n - used;
	if (rx->buf && take > 0)
		memcpy(rx->buf + rx->body_got, buf + used, take);
	rx->body_got += take;
	used += take;
	*ret_used = used;
	if (rx->body_got < rx->len)
		return CONTROL_WIRE_MORE;
	return rx->buf ? CONTROL_WIRE_FRAME : CONTROL_WIRE_TOO_LARGE;
}

int control_wire_path(const char *url, char *buf, size_t len)
{
	const char *path = url;
	size_t n;

	if (!url)
		return -EINVAL;
	if (strncmp(url, "ipc://", 6) == 0)
		path = url + 6; /* as with nng, a relative path is allowed here */
	else if (url[0] != '/')
		return -EINVAL;
	if (!path[0])
		return -EINVAL;
	n = strlen(path);
	if (n >= sizeof(((struct sockaddr_un *)0)->sun_path) || n >= len)
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	return 0;
}
