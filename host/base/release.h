/* SPDX-License-Identifier: MIT */
/*
 * release.h - plugin releases "major.minor.patch" and release summaries.
 */
#ifndef LH_RELEASE_H
#define LH_RELEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct release {
	uint32_t major, minor, patch;
};

/* {min, max} over the members of one plugin, valid at etcd `revision`. */
struct releases {
	struct release min;
	struct release max;
	int64_t revision;
	size_t n_members;
};

/* release_cmp - <0, 0, >0 like strcmp. */
int release_cmp(struct release a, struct release b);
static inline bool release_less(struct release a, struct release b)
{
	return release_cmp(a, b) < 0;
}
/* release_parse - "1.2.3" (each part 0..999999, no sign, no extra text) ->
 * *ret. Returns 0 or -EINVAL. */
int release_parse(const char *s, struct release *ret);
/* release_format - "1.2.3" into buf (>= 24 bytes); returns buf. */
char *release_format(struct release r, char *buf, size_t len);
#define RELEASE_STRLEN 36

#endif
