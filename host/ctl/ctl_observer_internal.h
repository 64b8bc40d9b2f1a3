/* SPDX-License-Identifier: MIT */
/*
 * ctl_observer_internal.h - what the parts of observer mode share
 * (ctl_observer.c, ctl_observer_switchover.c, ctl_observer_config.c): the
 * client, the answer helpers, and the verbs kept in their own files.
 *
 * Loop thread only. Functions return leaseholdctl exit codes (ctl.h) and
 * print what went wrong, like ctl_observer_call.
 */
#ifndef LH_CTL_OBSERVER_INTERNAL_H
#define LH_CTL_OBSERVER_INTERNAL_H

#include <stdint.h>

#include "ctl/ctl_cluster_view.h"
#include "control/control.h"
#include "ctl/ctl.h"
#include "ctl/ctl_observer.h"

struct ctl_observer {
	struct loop *loop;
	struct etcd_client *etcd;
	char prefix[256];
	char by[160]; /* the requester named in the records we write */
	char password[256];
	char *eps_buf;
};

/* ctl_observer_answer - pack a as the control server packs a reply and
 * decode it as the client decodes one: EXIT_OK with *ret_resp */
int ctl_observer_answer(const struct control_answer *a, Response **ret_resp);
/* ctl_observer_refuse - an answer with code (not CODE_OK) and message */
int ctl_observer_refuse(int code, const char *msg, Response **ret_resp);
/* ctl_observer_etcd_failed - print an etcd error: EXIT_TIMEOUT for
 * -ETIMEDOUT, else EXIT_NOTOK */
int ctl_observer_etcd_failed(int err);
/* ctl_observer_require_plugin - plugin name's view (it has a member or a
 * node state record): EXIT_OK with *ret_view (free with cluster_view_free);
 * else the exit code, having answered NOT_FOUND into *ret_resp or printed
 * the etcd error */
int ctl_observer_require_plugin(struct ctl_observer *ob, const char *name, uint64_t deadline,
                                struct cluster_view **ret_view, Response **ret_resp);

/* ctl_observer_pin - KIND_RELEASE_PIN / KIND_RELEASE_UNPIN (ctl_observer_pin.c) */
int ctl_observer_pin(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                     uint64_t deadline, Response **ret_resp);
/* ctl_observer_switchover - KIND_SWITCHOVER (ctl_observer_switchover.c) */
int ctl_observer_switchover(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                            uint64_t deadline, Response **ret_resp);
/* ctl_observer_config - KIND_CONFIG_GET / KIND_CONFIG_SET
 * (ctl_observer_config.c) */
int ctl_observer_config(struct ctl_observer *ob, const Leasehold__Control__Request *req,
                        uint64_t deadline, Response **ret_resp);

#endif
