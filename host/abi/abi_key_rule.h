/* SPDX-License-Identifier: MIT */
/*
 * abi_key_rule.h - which rule of plugin.h "Keys and values" a key relative
 * to a plugin's data prefix breaks. A pure function, any thread.
 */
#ifndef LH_ABI_KEY_RULE_H
#define LH_ABI_KEY_RULE_H

#include <stdbool.h>
#include <stddef.h>

/* abi_key_rule - the rule key[0..len) breaks as a key (prefix false) or a
 * prefix (LH_F_PREFIX: may be empty), as a phrase ("holds a NUL byte"), or
 * NULL when it keeps them all. key may be NULL when len is 0. */
const char *abi_key_rule(const void *key, size_t len, bool prefix);

#endif
