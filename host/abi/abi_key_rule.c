/* SPDX-License-Identifier: MIT */
/*
 * abi_key_rule.c - the rules of plugin.h "Keys and values" for a relative
 * key, in one place: the host checks every plugin request with them, and
 * the worker checks apply's whole set with them before the first write.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "abi/abi_key_rule.h"
#include "leasehold/plugin.h"

const char *abi_key_rule(const void *key, size_t len, bool prefix)
{
	struct {
		const uint8_t *data;
		size_t len;
	} k = {key, len};
	if (k.len > LH_KEY_MAX)
		return "longer than LH_KEY_MAX (4096 bytes)";
	if (k.len == 0)
		return prefix ? NULL : "empty (only a prefix may be empty: all of the data prefix)";
	if (memchr(k.data, 0, k.len))
		return "holds a NUL byte";
	if (k.data[0] == '/')
		return "starts with '/' (keys are relative to the data prefix; an absolute key "
		       "would be written under it)";
	/* the components between '/'; the last may be empty (a prefix "a/"),
	 * and a prefix's last one is only the start of one ("a/." matches
	 * "a/.x"), so it is not a component of its own */
	for (size_t at = 0; at < k.len;) {
		const uint8_t *sl = memchr(k.data + at, '/', k.len - at);
		size_t end = sl ? (size_t)(sl - k.data) : k.len;
		size_t n = end - at;
		bool dots = (n == 1 && k.data[at] == '.') ||
			    (n == 2 && k.data[at] == '.' && k.data[at + 1] == '.');
		if (n == 0)
			return "holds an empty component (\"//\")";
		if (dots && (sl || !prefix))
			return "holds a \".\" or \"..\" component";
		at = end + 1;
	}
	if (prefix && k.data[k.len - 1] == 0xff)
		return "is a prefix ending in byte 0xff (its range would not end under the key)";
	return NULL;
}

