/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/sdnotify.h"

struct sdnotify {
	int fd;
	struct sockaddr_un addr;
	socklen_t addr_len;
};

/* sdnotify_parse_u64 - a whole decimal number, nothing else around it */
static int sdnotify_parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return 0;
}

uint64_t sdnotify_watchdog_interval(const char *usec, const char *pid, pid_t self)
{
	uint64_t us, p;
	if (sdnotify_parse_u64(usec, &us) < 0 || us == 0 || us > UINT64_MAX / 1000)
		return 0;
	/* WATCHDOG_PID absent: the watchdog is ours (older managers, tests) */
	if (pid && (sdnotify_parse_u64(pid, &p) < 0 || p != (uint64_t)self))
		return 0;
	/* half the timeout, as sd_watchdog_enabled(3) recommends: one late
	 * ping is no restart */
	return us * 1000 / 2;
}

int sdnotify_new(const char *address, struct sdnotify **ret_n)
{
	size_t len = address ? strlen(address) : 0;
	if (len == 0 || len >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
	    (address[0] != '/' && address[0] != '@'))
		return -EINVAL;
	struct sdnotify *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, address, len);
	if (address[0] == '@')
		n->addr.sun_path[0] = '\0'; /* abstract: the name's bytes, no terminator */
	else
		len++; /* a path: with its terminator */
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		int r = -errno;
		free(n);
		return r;
	}
	*ret_n = n;
	return 0;
}

void sdnotify_free(struct sdnotify *n)
{
	if (!n)
		return;
	close(n->fd);
	free(n);
}

int sdnotify_send(struct sdnotify *n, const char *state)
{
	if (!n)
		return 0;
	ssize_t w = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT,
	                   (const struct sockaddr *)&n->addr, n->addr_len);
	return w < 0 ? -errno : 0;
}

int sdnotify_from_env(struct sdnotify **ret_n, uint64_t *ret_watchdog_ns)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	struct sdnotify *n = NULL;
	uint64_t wd = 0;
	if (sock && *sock) {
		int r = sdnotify_new(sock, &n);
		if (r < 0)
			return r;
		wd = sdnotify_watchdog_interval(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"),
		                                getpid());
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	*ret_n = n;
	*ret_watchdog_ns = n ? wd : 0;
	return 0;
}
