/* SPDX-License-Identifier: MIT */
/* lh-freeport - print N free TCP ports on 127.0.0.1 (for the demo script).
 * Each port is found by binding port 0; all are held until all are found, so
 * the N ports are distinct. */
#include "config.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1;
	if (n < 1 || n > 64) {
		fprintf(stderr, "usage: lh-freeport [N (1..64)]\n");
		return 2;
	}
	int fds[64];
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(a);
		if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    getsockname(fds[i], (struct sockaddr *)&a, &len) < 0) {
			perror("lh-freeport");
			return 1;
		}
		printf("%d\n", ntohs(a.sin_port));
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return 0;
}
