/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - shared by the fuzz targets (tests/fuzz/fuzz_*.c) and the replay
 * runner (tests/fuzz/replay.c).
 *
 * Each target defines LLVMFuzzerTestOneInput. Built two ways:
 * - tests/fuzz/run.sh: clang -fsanitize=fuzzer,address,undefined (libFuzzer
 *   provides main);
 * - make check: with the normal compiler, linked with replay.c, whose main()
 *   feeds every file of the seed corpus and of the regressions directory.
 * A target that needs one-time setup defines LLVMFuzzerInitialize; one that
 * wants its state torn down at the end of a replay defines fuzz_cleanup (both
 * optional; replay.c declares them weak).
 */
#ifndef LH_FUZZ_H
#define LH_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* LLVMFuzzerTestOneInput - run one input; always returns 0. Crashes (ASan,
 * UBSan, abort) are the findings. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* LLVMFuzzerInitialize - optional one-time setup, before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
/* fuzz_cleanup - optional teardown after the last replayed input (replay.c
 * only; libFuzzer never calls it). */
void fuzz_cleanup(void);

/* FUZZ_CHECK - an invariant of the code under test; a violation aborts
 * (a finding, like a sanitizer report). */
#define FUZZ_CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, \
			        #cond); \
			abort(); \
		} \
	} while (0)

#endif
