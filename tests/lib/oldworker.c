/* SPDX-License-Identifier: MIT */
/*
 * oldworker.c - stands in for a leasehold-worker of an older release, for
 * test_isolation: it takes the command line the host gives a worker, dials
 * the bus and answers every event as done, without a bus version (as every
 * worker did before the version check). It does not load the plugin. It
 * exits when it answered FINI or when the host closes the bus.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/protocol/pair1/pair.h>

#include "proto/bus.pb-c.h"
#include "abi/abi_bus.h"

int main(int argc, char **argv)
{
	const char *url = NULL;
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--url") == 0)
			url = argv[i + 1];
	nng_socket s;
	if (!url || nng_pair1_open(&s) != 0 || nng_dial(s, url, NULL, 0) != 0) {
		fprintf(stderr, "oldworker: cannot dial %s\n", url ? url : "(no --url)");
		return 66;
	}
	for (;;) {
		nng_msg *m;
		if (nng_recvmsg(s, &m, 0) != 0)
			break; /* the host closed the bus */
		Leasehold__Bus__ToWorker *tw =
		    leasehold__bus__to_worker__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
		nng_msg_free(m);
		if (!tw)
			continue;
		bool fini = false;
		if (tw->msg_case == LEASEHOLD__BUS__TO_WORKER__MSG_EVENT && tw->event) {
			fini = tw->event->kind_case == LEASEHOLD__BUS__EVENT__KIND_FINI;
			Leasehold__Bus__EventDone done = LEASEHOLD__BUS__EVENT_DONE__INIT;
			done.seq = tw->event->seq;
			Leasehold__Bus__ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
			th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_DONE;
			th.done = &done;
			nng_msg *out = bus_pack_msg(&th.base);
			if (out && nng_sendmsg(s, out, 0) != 0)
				nng_msg_free(out);
		}
		leasehold__bus__to_worker__free_unpacked(tw, NULL);
		if (fini)
			break;
	}
	nng_close(s);
	return 0;
}
