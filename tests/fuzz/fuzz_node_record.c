/* SPDX-License-Identifier: MIT */
/*
 * fuzz_node_record.c - node_record_decode (host/election/election_node_record.h) on hostile
 * bytes: P/N/nodes/<node-id> values, read by every host's mirror and by
 * leaseholdctl in observer mode. Anything accepted has printable, bounded,
 * NUL-terminated strings and survives an encode/decode round trip
 * unchanged (the encoder writes what the decoder reads).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "election/election_node_record.h"

static void check_text(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	FUZZ_CHECK(n < cap);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(s[i] >= 0x20 && s[i] < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct node_record r, again;
	int e = node_record_decode(data, size, &r);
	FUZZ_CHECK(e == 0 || e == -EBADMSG);
	if (e < 0)
		return 0;
	FUZZ_CHECK(r.version >= 1);
	FUZZ_CHECK(r.node[0] != '\0' && strchr(r.node, '/') == NULL);
	check_text(r.node, sizeof(r.node));
	check_text(r.state, sizeof(r.state));
	check_text(r.reason, sizeof(r.reason));
	check_text(r.not_ready, sizeof(r.not_ready));
	check_text(r.reconcile_error, sizeof(r.reconcile_error));
	FUZZ_CHECK(r.since >= 0 && r.reconcile_at >= 0);
	char *v;
	size_t n;
	FUZZ_CHECK(node_record_encode(&r, &v, &n) == 0);
	FUZZ_CHECK(node_record_decode(v, n, &again) == 0);
	FUZZ_CHECK(strcmp(again.node, r.node) == 0 && strcmp(again.state, r.state) == 0);
	FUZZ_CHECK(release_cmp(again.release, r.release) == 0 && again.ready == r.ready);
	FUZZ_CHECK(again.reconcile_at == r.reconcile_at && again.since == r.since);
	free(v);
	return 0;
}
