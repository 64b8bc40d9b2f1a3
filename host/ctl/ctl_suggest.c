/* SPDX-License-Identifier: MIT */
/*
 * ctl_suggest.c - the nearest known word to a mistyped one (ctl_suggest.h).
 */
#include "config.h"

#include <string.h>

#include "ctl/ctl_suggest.h"

#define CTL_SUGGEST_MAX 64
#define CTL_SUGGEST_FAR ((size_t)-1)

size_t ctl_suggest_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[CTL_SUGGEST_MAX + 1];

	if (la > CTL_SUGGEST_MAX || lb > CTL_SUGGEST_MAX)
		return CTL_SUGGEST_FAR;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0]; /* d[i-1][j-1] */
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j]; /* d[i-1][j] */
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *ctl_suggest(const char *s, const char *const *cands, size_t n)
{
	const char *best = NULL, *prefix_of = NULL;
	size_t best_d = CTL_SUGGEST_FAR, sl = s ? strlen(s) : 0, prefixes = 0;

	if (sl == 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!cands[i] || strcmp(cands[i], s) == 0)
			continue;
		if (strncmp(cands[i], s, sl) == 0) {
			prefixes++;
			prefix_of = cands[i];
		}
		size_t d = ctl_suggest_distance(s, cands[i]);
		if (d < best_d) {
			best_d = d;
			best = cands[i];
		}
	}
	if (best && best_d <= 2 && best_d * 2 < sl)
		return best;
	return prefixes == 1 ? prefix_of : NULL;
}
