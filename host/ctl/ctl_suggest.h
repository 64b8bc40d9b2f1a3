/* SPDX-License-Identifier: MIT */
/*
 * ctl_suggest.h - "did you mean": the known word nearest a mistyped one
 * (a verb, a plugin name), by edit distance. Pure functions, any thread.
 */
#ifndef LH_CTL_SUGGEST_H
#define LH_CTL_SUGGEST_H

#include <stddef.h>

/* ctl_suggest_distance - the Levenshtein distance of a and b (insert,
 * delete, replace one byte); words longer than 64 bytes count as far */
size_t ctl_suggest_distance(const char *a, const char *b);
/* ctl_suggest - of cands[0..n) (borrowed), the one nearest s when it is
 * near enough to be a typo (distance at most 2, and less than half of s's
 * length; or s is a prefix of exactly that one), else NULL. Ties: the first. */
const char *ctl_suggest(const char *s, const char *const *cands, size_t n);

#endif
