/* SPDX-License-Identifier: MIT */
/*
 * nngwedge.c - LD_PRELOAD for tests: nng_close() that never returns, as
 * nng 1.5.2 does when its reaper thread is wedged (docs/design.md, "Closing
 * a worker's bus"). In a process named LH_NNG_WEDGE_PROG, the
 * LH_NNG_WEDGE_AT-th call of nng_close (1-based) blocks forever (in read()
 * on a pipe nobody writes); every other call is nng's own.
 */
#define _GNU_SOURCE /* RTLD_NEXT, program_invocation_short_name */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>

static unsigned g_calls;

int nng_close(nng_socket s)
{
	int (*real)(nng_socket) = (int (*)(nng_socket))dlsym(RTLD_NEXT, "nng_close");
	const char *prog = getenv("LH_NNG_WEDGE_PROG"), *at = getenv("LH_NNG_WEDGE_AT");
	if (prog && at && strcmp(program_invocation_short_name, prog) == 0 &&
	    __atomic_add_fetch(&g_calls, 1, __ATOMIC_SEQ_CST) == strtoul(at, NULL, 10)) {
		int fds[2];
		char c;
		if (pipe(fds) == 0)
			while (read(fds[0], &c, 1) < 0 && errno == EINTR)
				;
		abort(); /* not reached: nobody writes */
	}
	return real ? real(s) : NNG_ENOTSUP;
}
