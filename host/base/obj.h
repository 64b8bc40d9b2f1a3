/* SPDX-License-Identifier: MIT */
/*
 * obj.h - object checks (after Varnish's miniobj.h). An object whose
 * pointer comes back later through a callback (an etcd reply, a timer, a
 * driver's answer) carries a `magic` field: the object's own constant
 * while it is alive, 0 once it is freed. CHECK_OBJ at the callback stops a
 * stale or foreign pointer at an assert instead of using it.
 *
 * Each subsystem defines its magic numbers next to its objects (four ASCII
 * letters, e.g. 0x454c4543u "ELEC"); the owner sets `magic` when the
 * object is made and clears it when the object is freed.
 */
#ifndef LH_OBJ_H
#define LH_OBJ_H

#include <assert.h>

/* CHECK_OBJ - p is non-NULL and its magic is m */
#define CHECK_OBJ(p, m) assert((p) != NULL && (p)->magic == (m))

#endif
