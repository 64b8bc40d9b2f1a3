/* SPDX-License-Identifier: MIT */
/*
 * election_pin_request.h - writing or deleting one plugin's pin (P/N/pin,
 * election_pin.h) after checking it against the plugin's records in etcd:
 * `leaseholdctl release pin NAME VERSION [--force]` and `release unpin
 * NAME`, from a daemon or in observer mode (the same code, an etcd client
 * is all it needs).
 *
 * Design notes
 * - Two etcd calls: one read of the watched range [P/N/election/,
 *   P/N/status], then the write txn. The write compares what the check
 *   relied on: the status record's mod_revision (0: absent) and the
 *   mod_revision of one member record that runs the pinned release. A
 *   status that moved or a member that left meanwhile fails the compare:
 *   the request is refused ("changed under the request"), never applied
 *   on a state nobody checked.
 * - Refusals (before anything is written): no member record at all (an
 *   unknown plugin), no member that runs the release, a release older
 *   than the status's version without force. With force such a pin is
 *   written with its `forced` flag and the caller gets a warning to print.
 * Threading: the loop thread of the etcd client. Errors: 0 or -errno.
 */
#ifndef LH_ELECTION_PIN_REQUEST_H
#define LH_ELECTION_PIN_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "base/release.h"
#include "etcd/etcd.h"

struct pin_request {
	const char *prefix;    /* P, e.g. "/leasehold" (trailing '/' ignored) */
	const char *name;      /* plugin N */
	const char *requester; /* who asks: recorded in the pin */
	bool unpin;            /* delete the pin (release and force unused) */
	struct release release;
	bool force;            /* pin even below the status's version */
};

/* pin_done_fn - the outcome: err 0 (written at etcd revision rev; warning
 * non-NULL: a forced pin below the status, say so to the operator), or
 * -errno with a one-line reason in msg: -ENOENT no member record of the
 * plugin (unknown plugin), -ESRCH no member runs the release, -ERANGE older
 * than the status's version (no force), -EBUSY the records changed under
 * the request, else an etcd error. Strings are borrowed for the call. */
typedef void (*pin_done_fn)(void *ud, int err, const char *msg, const char *warning, int64_t rev);

/* pin_request_start - read, check, write. rq's strings are copied. 0 when
 * started: done runs exactly once later on the loop (never before this
 * returns); or -errno (-EINVAL bad argument, -ENOMEM, an etcd error) and
 * done never runs. */
int pin_request_start(struct etcd_client *etcd, const struct pin_request *rq, pin_done_fn done,
                      void *ud);

#endif
