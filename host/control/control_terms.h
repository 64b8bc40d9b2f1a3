/* SPDX-License-Identifier: MIT */
/*
 * control_terms.h - a plugin's term history (election.h) as the control
 * socket's terms (control.h): the one conversion the daemon's control ops
 * and leaseholdctl's observer mode share.
 */
#ifndef LH_CONTROL_TERMS_H
#define LH_CONTROL_TERMS_H

#include <stddef.h>

#include "control/control.h"
#include "election/election.h"

/* control_terms_from - n terms t (borrowed) -> *ret (malloc'd array, the
 * caller frees it; its strings point into t, so it lives no longer than
 * t). n may be 0 (*ret NULL). 0 or -ENOMEM (*ret untouched). */
int control_terms_from(const struct election_term *t, size_t n, struct control_term **ret);

#endif
