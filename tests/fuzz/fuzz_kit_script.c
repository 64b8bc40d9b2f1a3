/* SPDX-License-Identifier: MIT */
/*
 * fuzz_kit_script.c - leasehold-plugin-test's script parser
 * (tests/kit/kit_script.h), which reads a file an author wrote.
 *
 * Input: a script (any bytes). Invariants: parsed (0) or refused with
 * -EINVAL and a message naming its line (or the script's size); every
 * parsed statement has a known op, a line within the input, a key where its
 * shape needs one, a value of the stated length without NUL bytes, and a
 * host number in 1..2.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kit_script.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kit_script *s = NULL;
	char err[512] = "";
	int r = kit_script_parse((const char *)data, size, 2, &s, err, sizeof(err));
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
	if (r == -EINVAL)
		FUZZ_CHECK(strncmp(err, "line ", 5) == 0 || strncmp(err, "the script has ", 15) == 0);
	if (r != 0)
		return 0;
	for (size_t i = 0; i < s->n_steps; i++) {
		const struct kit_step *st = &s->steps[i];
		FUZZ_CHECK((unsigned)st->op < KIT_OP_COUNT);
		FUZZ_CHECK(st->line >= 1 && st->line <= size);
		FUZZ_CHECK(st->host >= 0 && st->host <= 2);
		if (st->key)
			FUZZ_CHECK(st->key[0] != 0 && strlen(st->key) <= KIT_SCRIPT_MAX_KEY);
		if (st->value)
			FUZZ_CHECK(strlen(st->value) == st->value_len);
	}
	kit_script_free(s);
	return 0;
}
