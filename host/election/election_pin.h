/* SPDX-License-Identifier: MIT */
/*
 * election_pin.h - the operator's pin of a plugin's rollout: the record
 * P/N/pin (proto Pin), what it means for the release rule
 * (election_release_rule.h, struct rule_pin), and its decoder, shared by the
 * election mirror, the switchover and pin requests, observer mode and the
 * records fuzz target.
 *
 * Design notes
 * - Key. "pin" sorts between "paused" and "reconcile-request", inside the
 *   range every host watches ([P/N/election/, P/N/status]): every host
 *   mirrors it with no second watch, and hosts whose mirrors are at one
 *   revision compute one answer.
 * - A value that does not decode is ignored, as if there were no pin (and
 *   logged). That is safe for the state: without a pin the rule is the
 *   default one, which never hands the state to a release that cannot
 *   read it (rules (a) and (b)); what is lost is only the staging: a newer
 *   release that can act may lead before the operator checked it. The
 *   other choice, "nobody campaigns", would stop every reconcile on a
 *   stray write. `release unpin` deletes it whatever it holds.
 * Threading: none; pure functions, any thread.
 */
#ifndef LH_ELECTION_PIN_H
#define LH_ELECTION_PIN_H

#include <stddef.h>
#include <stdint.h>

#include "election/election_release_rule.h"

/* the key of the pin below P/N/ */
#define PIN_KEY "pin"

/* election_pin_decode - a P/N/pin value (hostile bytes) -> *ret_pin (set,
 * forced, release) and, when ret_by is not NULL, the writer's node id
 * (printable, at most by_len - 1 bytes) and *ret_at (unix s, 0 unknown).
 * Returns 0, or -EBADMSG (does not unpack, or no release): the outputs are
 * then "no pin" (ret_pin->set false), ret_by "". */
int election_pin_decode(const uint8_t *v, size_t len, struct rule_pin *ret_pin, char *ret_by,
                        size_t by_len, int64_t *ret_at);

/* election_pin_encode - the record for a pin at rel written by node `by`
 * at unix time at; malloc'd into *ret (free), 0 or -ENOMEM */
int election_pin_encode(struct release rel, bool forced, const char *by, int64_t at,
                        uint8_t **ret, size_t *ret_len);

#endif
