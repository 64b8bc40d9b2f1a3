/* SPDX-License-Identifier: MIT */
/*
 * reports.c - benchplugin.c's reports received on the driver's loop
 * (reports.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/loop.h"
#include "check.h"
#include "reports.h"

struct bench_ev *bench_ev;
size_t bench_nev;
static size_t bench_capev;
static struct loop_io *bench_sock_io;

static void bench_reports_on_sock(struct loop_io *io, int fd, uint32_t events, void *ud)
{
	(void)io;
	(void)events;
	(void)ud;
	char buf[512];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (n <= 0)
			return;
		buf[n] = 0;
		struct bench_ev e;
		memset(&e, 0, sizeof(e));
		if (sscanf(buf, "%c %31s %63s %15s %" SCNu64 " %" SCNd64 " %" SCNd64, &e.type, e.node,
		           e.name, e.rel, &e.t, &e.a, &e.b) != 7)
			continue;
		if (bench_nev == bench_capev) {
			bench_capev = bench_capev ? bench_capev * 2 : 1024;
			bench_ev = realloc(bench_ev, bench_capev * sizeof(*bench_ev));
			CHECK(bench_ev);
		}
		bench_ev[bench_nev++] = e;
	}
}

void bench_reports_open(struct loop *loop, const char *dir)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char path[sizeof(a.sun_path) + 16];
	snprintf(path, sizeof(path), "%s/ev.sock", dir);
	CHECK(strlen(path) < sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	int sz = 4 << 20;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	CHECK_OK(loop_io_add(loop, fd, EPOLLIN, bench_reports_on_sock, NULL, &bench_sock_io));
	CHECK(setenv("LH_BENCH_SOCK", a.sun_path, 1) == 0);
}

long bench_ev_find(size_t from, char type, const char *node, const char *name, const char *rel,
		   int64_t a, bool match_a)
{
	for (size_t i = from; i < bench_nev; i++) {
		const struct bench_ev *e = &bench_ev[i];
		if (e->type != type || (node && strcmp(e->node, node)) || (name && strcmp(e->name, name)) ||
		    (rel && strcmp(e->rel, rel)) || (match_a && e->a != a))
			continue;
		return (long)i;
	}
	return -1;
}
