/* SPDX-License-Identifier: MIT */
/*
 * kit_internal.h - the world shared by kit_run.c (hosts) and kit_keys.c
 * (keys); nothing outside tests/kit includes it.
 */
#ifndef LH_KIT_INTERNAL_H
#define LH_KIT_INTERNAL_H

#include <stdbool.h>

#include "hosts.h"
#include "kit_run.h"
#include "testutil.h"

#define KIT_MAX_HOSTS 8

struct kit_world {
	struct kit_options o;
	struct harness_etcd *etcd;
	struct tu tu;                 /* the runner's own etcd client and loop */
	struct host hosts[KIT_MAX_HOSTS];
	bool up[KIT_MAX_HOSTS];       /* started and not seen to exit */
	char file[256];               /* the plugin's file name in each plugin dir */
	char name[64];                /* the plugin's name, as its hosts report it */
	char prefix[128];             /* its data prefix, P/NAME/data/ */
	uint64_t timeout_ns;          /* the deadline of each wait */
};

/* kit_timeout_ms - the current deadline of a wait, in ms */
int kit_timeout_ms(const struct kit_world *w);
/* kit_fail - print "FAIL line N: op: what" and the hosts' logs; returns 1 */
int kit_fail(struct kit_world *w, const struct kit_step *st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* kit_keys_write - put / delete; 0 or 1 (failed) */
int kit_keys_write(struct kit_world *w, const struct kit_step *st);
/* kit_keys_check - wait-key / wait-absent / expect-key / expect-absent */
int kit_keys_check(struct kit_world *w, const struct kit_step *st);

#endif
