/* SPDX-License-Identifier: MIT */
/*
 * test_abi_elf.c - the .symtab reader behind "symbol leasehold_plugin not
 * exported" (host/abi/abi_elf.c): it finds a hidden descriptor in a real
 * test plugin, and garbage (truncations, flipped bytes in the headers and
 * tables of a real .so, random bytes) gets an answer, never a read outside
 * the buffer (each attempt reads an exact-size heap copy, under ASan).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi_elf.h"
#include "check.h"
#include "files.h"
#include "rng.h"

static uint8_t *elf_load(const char *rel, size_t *ret_len)
{
	const char *b = getenv("LH_BUILDDIR");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", b && *b ? b : ".", rel);
	return test_load_built(path, ret_len);
}

/* one answer on an exact-size copy of buf[len] (ASan sees any overread) */
static int elf_try(const uint8_t *buf, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	CHECK(copy);
	if (len)
		memcpy(copy, buf, len);
	int r = abi_elf_symtab_defines(copy, len, "leasehold_plugin");
	free(copy);
	CHECK(r == 1 || r == 0 || r == -ENOEXEC);
	return r;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t elf_rand(void)
{
	return test_rng_next(&g_rng);
}

static void test_finds_hidden_and_visible(void)
{
	size_t len;
	uint8_t *hidden = elf_load("tests/plugins/.libs/bad-hidden.so", &len);
	CHECK_INT_EQ(abi_elf_symtab_defines(hidden, len, "leasehold_plugin"), 1);
	CHECK_INT_EQ(abi_elf_symtab_defines(hidden, len, "leasehold_plugin_v2"), 0);
	CHECK_INT_EQ(abi_elf_symtab_defines(hidden, len, "leasehold_plugi"), 0);
	CHECK_INT_EQ(abi_elf_symtab_defines(hidden, len, ""), -EINVAL);
	CHECK_INT_EQ(abi_elf_symtab_defines(hidden, len, NULL), -EINVAL);
	free(hidden);
	uint8_t *nosym = elf_load("tests/plugins/.libs/bad-nosym.so", &len);
	CHECK_INT_EQ(abi_elf_symtab_defines(nosym, len, "leasehold_plugin"), 0);
	free(nosym);
	const uint8_t junk[] = "not an ELF file at all, just text";
	CHECK_INT_EQ(abi_elf_symtab_defines(junk, sizeof(junk), "leasehold_plugin"), -ENOEXEC);
	CHECK_INT_EQ(abi_elf_symtab_defines(NULL, 0, "leasehold_plugin"), -ENOEXEC);
}

/* every prefix of a real plugin file (the section headers sit at its end,
 * so most prefixes cut them or the tables they point at) */
static void test_truncations(void)
{
	size_t len;
	uint8_t *buf = elf_load("tests/plugins/.libs/bad-hidden.so", &len);
	/* no prefix may crash or read past its end (ASan); the whole file
	 * still finds the symbol (the step may not land on len itself) */
	for (size_t n = 0; n < len; n += (n < 4096 ? 1 : 7))
		(void)elf_try(buf, n);
	CHECK_INT_EQ(elf_try(buf, len), 1);
	free(buf);
}

/* flipped bytes: in the ELF header, the section headers, anywhere */
static void test_mutations(void)
{
	size_t len;
	uint8_t *orig = elf_load("tests/plugins/.libs/bad-hidden.so", &len);
	uint8_t *buf = malloc(len);
	CHECK(buf);
	uint64_t shoff;
	memcpy(&shoff, orig + (sizeof(void *) == 8 ? 0x28 : 0x20), sizeof(void *) == 8 ? 8 : 4);
	if (sizeof(void *) != 8)
		shoff &= 0xffffffffu;
	CHECK(shoff < len);
	for (int round = 0; round < 20000; round++) {
		memcpy(buf, orig, len);
		int flips = 1 + (int)(elf_rand() % 8);
		for (int k = 0; k < flips; k++) {
			uint64_t where = elf_rand();
			size_t at;
			switch (where % 3) {
			case 0: at = (size_t)((where >> 8) % 64); break;
			case 1: at = (size_t)(shoff + (where >> 8) % (len - shoff)); break;
			default: at = (size_t)((where >> 8) % len); break;
			}
			buf[at] = (uint8_t)elf_rand();
		}
		elf_try(buf, len);
	}
	/* random bytes behind a valid ELF identification */
	for (int round = 0; round < 2000; round++) {
		size_t n = 64 + (size_t)(elf_rand() % 4096);
		uint8_t *r = malloc(n);
		CHECK(r);
		for (size_t i = 0; i < n; i++)
			r[i] = (uint8_t)elf_rand();
		memcpy(r, orig, 16);
		elf_try(r, n);
		free(r);
	}
	free(buf);
	free(orig);
}

int main(void)
{
	RUN(test_finds_hidden_and_visible);
	RUN(test_truncations);
	RUN(test_mutations);
	return 0;
}
