/* SPDX-License-Identifier: MIT */
/*
 * control_client.c - one control request from the client side (see
 * control_client.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/control_client.h"
#include "control/control_wire.h"

static int64_t control_client_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* control_client_wait_for - poll fd for events until deadline. 0, -ETIMEDOUT or -errno. */
static int control_client_wait_for(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - control_client_mono_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 0; /* readable/writable, or an error the next call reports */
	}
}

/* control_client_do_connect - blocking connect bounded by the deadline (a daemon frozen
 * with a full backlog makes connect() wait). 0 or -errno. */
static int control_client_do_connect(int fd, const char *path, int64_t deadline)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int64_t left = deadline - control_client_mono_ms();
	struct timeval tv;
	struct stat st;

	if (left <= 0)
		return -ETIMEDOUT;
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EINPROGRESS)
			return -ETIMEDOUT;
		if (errno == ECONNREFUSED && lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
			return -ENOTSOCK;
		if (errno == EPERM)
			return -EACCES;
		return -errno;
	}
}

/* control_client_send_all - write the frame; -EPIPE/-ECONNRESET when the daemon closed
 * (it may still have left a refusal to read). */
static int control_client_send_all(int fd, const uint8_t *buf, size_t len, int64_t deadline)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0) {
			done += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int r = control_client_wait_for(fd, POLLOUT, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

/* control_client_recv_frame - read one frame into rx. 0 or -errno. */
static int control_client_recv_frame(int fd, struct control_wire_rx *rx, int64_t deadline)
{
	uint8_t chunk[16384];

	for (;;) {
		size_t want = control_wire_rx_want(rx), used;
		ssize_t n;
		int r;

		if (want > sizeof(chunk))
			want = sizeof(chunk);
		n = recv(fd, chunk, want, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			r = control_client_wait_for(fd, POLLIN, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return errno == EPIPE ? -ECONNRESET : -errno;
		if (n == 0)
			return -ECONNRESET;
		r = control_wire_rx_feed(rx, chunk, (size_t)n, &used);
		if (r < 0)
			return r;
		if (r == CONTROL_WIRE_FRAME)
			return 0;
		if (r == CONTROL_WIRE_TOO_LARGE)
			return -EMSGSIZE;
	}
}

int control_client_call(const char *path, const void *req, size_t len, int64_t timeout_ms,
			size_t max_reply, uint8_t **ret_buf, size_t *ret_len)
{
	int64_t deadline = control_client_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	struct control_wire_rx rx;
	uint8_t *frame = NULL;
	int fd, r, sent;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path) || len > UINT32_MAX)
		return -EINVAL;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	control_wire_rx_init(&rx, max_reply, max_reply);
	r = control_client_do_connect(fd, path, deadline);
	if (r < 0)
		goto out;
	frame = malloc(CONTROL_WIRE_HEADER + len);
	if (!frame) {
		r = -ENOMEM;
		goto out;
	}
	control_wire_header(frame, (uint32_t)len);
	if (len)
		memcpy(frame + CONTROL_WIRE_HEADER, req, len);
	sent = control_client_send_all(fd, frame, CONTROL_WIRE_HEADER + len, deadline);
	if (sent < 0 && sent != -EPIPE && sent != -ECONNRESET) {
		r = sent;
		goto out;
	}
	/* sent, or the daemon closed first: a refusal may be waiting */
	r = control_client_recv_frame(fd, &rx, deadline);
	if (r == 0) {
		*ret_buf = rx.buf;
		*ret_len = rx.len;
		rx.buf = NULL;
	}
out:
	free(frame);
	control_wire_rx_reset(&rx);
	close(fd);
	return r;
}
