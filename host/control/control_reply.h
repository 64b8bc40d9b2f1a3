/* SPDX-License-Identifier: MIT */
/*
 * control_reply.h - building a control Response (proto/control.proto) from
 * the daemon's records (control.h): the server (control.c) answers with it,
 * and observer mode (leaseholdctl --etcd) packs the same answer from etcd
 * (control_answer_pack), so both are printed by the same code.
 *
 * Ownership: a struct control_reply borrows the strings it is given (valid
 * until the reply is packed) or keeps copies (control_reply_str), and owns
 * every sub-message it allocates; control_reply_fini frees them all.
 * Errors: the builders return 0 or -ENOMEM (the reply is then incomplete
 * and must not be sent). Not thread-safe; no global state.
 */
#ifndef LH_CONTROL_REPLY_H
#define LH_CONTROL_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "proto/control.pb-c.h"
#include "base/release.h"

/* Storage for one Plugin message and its sub-messages. */
struct pb_plugin {
	Leasehold__Control__Plugin p;
	Leasehold__Control__Release rel, min, max, sver, smcr, pin, acting;
	Leasehold__Control__Releases rs;
	Leasehold__Control__Status st;
	Leasehold__Control__Reconcile rc;
};

/* Storage for n Member messages (a members reply, or a plugin's nodes). */
struct pb_members {
	Leasehold__Control__Member *m;
	Leasehold__Control__Release *rel, *nrel;
	Leasehold__Control__NodeState *ns;
	Leasehold__Control__Member **mp;
	size_t n;
};

/* A reply under construction; strings are borrowed from the ops (valid until
 * we return to the loop) or owned copies listed in `owned`. */
struct control_reply {
	Leasehold__Control__Response r;
	struct pb_plugin *plugins;
	Leasehold__Control__Plugin **pp;
	Leasehold__Control__RoleEntry *roles;
	Leasehold__Control__RoleEntry **rolep;
	char **rstr; /* every entry's role names, one flat array */
	Leasehold__Control__Term *terms;
	Leasehold__Control__Release *trel;
	Leasehold__Control__Term **termp;
	char *owned[16];
	size_t n_owned;
	struct pb_members **mlists; /* the node rows of each plugin (nodes) */
	size_t n_mlists;
	char msg[512];
};

void control_reply_init(struct control_reply *rp);
void control_reply_fini(struct control_reply *rp);
/* control_reply_str - s for a string field: borrowed when it is at most
 * CONTROL_STRING_MAX bytes, else a copy cut to that length the reply owns
 * ("" for NULL; "(too long)" when no copy can be kept) */
char *control_reply_str(struct control_reply *rp, const char *s);
void control_reply_release(Leasehold__Control__Release *m, struct release r);
/* control_reply_error - a reply of code with a formatted message */
void control_reply_error(struct control_reply *rp, Leasehold__Control__Code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int control_reply_plugins(struct control_reply *rp, const struct control_plugin *src, size_t n);
/* control_reply_member_list - n Member messages from src into *ret_mp
 * (NULL when n is 0), owned by the reply */
int control_reply_member_list(struct control_reply *rp, const struct control_member *src, size_t n,
			      Leasehold__Control__Member ***ret_mp);
int control_reply_members(struct control_reply *rp, const struct control_member *src, size_t n);
int control_reply_roles(struct control_reply *rp, const struct control_role_entry *src, size_t n);
int control_reply_terms(struct control_reply *rp, const struct control_term *src, size_t n);
/* control_reply_pack - finish rp (protocol, node, version) and pack it into
 * a malloc'd buffer the caller frees. 0 or -ENOMEM. */
int control_reply_pack(struct control_reply *rp, const char *node, uint8_t **ret_buf,
                       size_t *ret_len);

#endif
