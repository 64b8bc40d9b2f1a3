/* SPDX-License-Identifier: MIT */
/*
 * fuzz_descriptor.c - loader_validate_descriptor (host/abi/abi_loader.h) on arbitrary
 * bytes as the plugin descriptor, avail = the input size.
 *
 * The descriptor holds pointers (name, callbacks) that arbitrary bytes cannot
 * make valid, and the validator dereferences `name` once it is known to lie
 * inside the plugin object. So the 8 bytes of the name field are read as a
 * selector, not used as an address:
 *   low 2 bits 0: NULL name;
 *              1: the input bytes after sizeof(struct lh_plugin), as a
 *                 NUL-terminated heap string (the fuzzed name);
 *              2: the same string, but object_base is this program's own
 *                 base, so the "name points into the plugin" check runs
 *                 and refuses the heap pointer;
 *              3: a string inside this program with object_base = this
 *                 program (passes the check; the name is then validated).
 * ABI 1.1's `role` pointer (when the header has it) gets the same
 * treatment from the low 2 bits of its own field: 0 NULL, 1 the part of the
 * tail after the name's NUL (heap), 2 and 3 that string copied into this
 * program's image.
 * Everything else (magic, ABI, size, releases, callback pointers, which are
 * only compared with NULL here) comes from the input unchanged. Invariants:
 * a failure leaves *ret_desc untouched and writes a message; success implies
 * a valid name, reconcile set, and releases not below their minimums.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "abi/abi_loader.h"

/* a name inside this program's image, for selector 3 (writable, so the
 * harness can put fuzzed bytes in it) */
static char g_static_name[LH_PLUGIN_NAME_MAX + 8];
#ifdef LH_PLUGIN_SIZE_1_1
static char g_static_role[LH_PLUGIN_NAME_MAX + 8];
#endif

/* copy_bounded - s into dst[dst_len], cut and NUL-terminated */
static void copy_bounded(char *dst, size_t dst_len, const char *s)
{
	size_t n = strlen(s);
	if (n > dst_len - 1)
		n = dst_len - 1;
	memcpy(dst, s, n);
	dst[n] = 0;
}

static const void *self_base(void)
{
	static const void *base;
	if (!base) {
		Dl_info info;
		if (dladdr((const void *)g_static_name, &info) != 0)
			base = info.dli_fbase;
	}
	return base;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const size_t name_off = offsetof(struct lh_plugin, name);
	uint8_t *d = malloc(size ? size : 1);
	if (!d)
		return 0;
	if (size)
		memcpy(d, data, size);

	/* the tail after the descriptor is the candidate name */
	size_t tail_len = size > sizeof(struct lh_plugin) ? size - sizeof(struct lh_plugin) : 0;
	char *name = malloc(tail_len + 1);
	if (!name) {
		free(d);
		return 0;
	}
	if (tail_len)
		memcpy(name, data + sizeof(struct lh_plugin), tail_len);
	name[tail_len] = 0;

	const void *object_base = NULL;
	if (size >= name_off + sizeof(const char *)) {
		uint8_t sel = d[name_off] & 3;
		const char *p = NULL;
		if (sel == 1 || sel == 2)
			p = name;
		if (sel == 2)
			object_base = self_base();
		if (sel == 3) {
			copy_bounded(g_static_name, sizeof(g_static_name), name);
			p = g_static_name;
			object_base = self_base();
		}
		memcpy(d + name_off, &p, sizeof(p));
	}
#ifdef LH_PLUGIN_SIZE_1_1
	const size_t role_off = offsetof(struct lh_plugin, role);
	if (size >= role_off + sizeof(const char *)) {
		/* the role string: what follows the name's NUL in the tail */
		const char *role = name + strlen(name);
		if ((size_t)(role - name) < tail_len)
			role++;
		uint8_t sel = d[role_off] & 3;
		const char *p = NULL;
		if (sel == 1)
			p = role;
		else if (sel >= 2) {
			copy_bounded(g_static_role, sizeof(g_static_role), role);
			p = g_static_role;
		}
		memcpy(d + role_off, &p, sizeof(p));
	}
#endif

#ifdef LH_PLUGIN_SIZE_1_3_SCHEMA
	/* the schema array (ABI 1.3): a pointer from the input points anywhere
	 * and nothing vouches for it here (no object to check it against), so
	 * it is NULL; a count without an array is still refused.
	 * fuzz_plugin_config fuzzes the fields themselves. */
	const size_t cf_off = offsetof(struct lh_plugin, config_fields);
	if (size >= cf_off + sizeof(void *))
		memset(d + cf_off, 0, sizeof(void *));
#endif

	struct lh_plugin sentinel, desc;
	memset(&sentinel, 0xa5, sizeof(sentinel));
	desc = sentinel;
	char err[LOADER_ERR_MAX];
	err[0] = 0;
	int r = loader_validate_descriptor(d, size, object_base, &desc, err, sizeof(err));
	FUZZ_CHECK(r <= 0);
	if (r < 0) {
		FUZZ_CHECK(memcmp(&desc, &sentinel, sizeof(desc)) == 0);
		FUZZ_CHECK(err[0] != 0);
		FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
	} else {
		FUZZ_CHECK(desc.name != NULL);
		FUZZ_CHECK(loader_name_valid(desc.name));
		/* a reconcile, or (ABI 1.3) a keyed one; key_of only with it */
		FUZZ_CHECK(desc.reconcile != NULL || desc.reconcile_key != NULL);
		FUZZ_CHECK(desc.key_of == NULL || desc.reconcile_key != NULL);
		FUZZ_CHECK(desc.reconcile_key == NULL ||
			   (desc.abi_minor >= 3 && desc.size >= LH_PLUGIN_SIZE_1_3_KEYED));
		FUZZ_CHECK(desc.size >= LH_PLUGIN_SIZE_1_0 && desc.size <= size);
#ifdef LH_PLUGIN_SIZE_1_3_CONCURRENCY
		/* 1 (what 0 and an older descriptor mean) up to the bound; above 1
		 * only for a keyed plugin */
		FUZZ_CHECK(desc.key_concurrency >= 1 && desc.key_concurrency <= LH_KEY_CONCURRENCY_MAX);
		FUZZ_CHECK(desc.key_concurrency == 1 || desc.reconcile_key != NULL);
#endif
	}
	free(name);
	free(d);
	return 0;
}
