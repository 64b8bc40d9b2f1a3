/* SPDX-License-Identifier: MIT */
/*
 * control_terms.c - election terms -> control terms (control_terms.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "control/control_terms.h"

int control_terms_from(const struct election_term *t, size_t n, struct control_term **ret)
{
	struct control_term *out = NULL;
	if (n > 0 && !(out = calloc(n, sizeof(*out))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		out[i] = (struct control_term){.node = t[i].node,
		                               .release = t[i].release,
		                               .token = t[i].token,
		                               .start_rev = t[i].start_rev,
		                               .start_unix = t[i].start_unix,
		                               .end_rev = t[i].end_rev,
		                               .end_unix = t[i].end_unix,
		                               .end_reason = t[i].end_reason,
		                               .end_detail = t[i].end_detail,
		                               .invalid = !t[i].valid};
	*ret = out;
	return 0;
}
