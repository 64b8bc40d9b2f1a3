/* SPDX-License-Identifier: MIT */
/*
 * control_client.h - the client side of the control socket (leaseholdctl,
 * tests): one request, one reply, on a fresh connection, within a deadline.
 * Blocking; uses no global state (any thread; SIGPIPE is never raised).
 */
#ifndef LH_CONTROL_CLIENT_H
#define LH_CONTROL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* control_client_call - connect to the socket at path, send req (len bytes,
 * one frame), read one reply frame of at most max_reply bytes; all within
 * timeout_ms. On 0, *ret_buf (malloc'd, caller frees) holds the *ret_len
 * bytes of the reply. The daemon's refusal (another uid, too many
 * connections) is a reply like any other (Response.code CODE_REFUSED), read
 * even when the request could not be written. Errors, each a different
 * situation for the operator:
 *   -ENOENT       no socket file (no daemon started on this path)
 *   -ECONNREFUSED a socket file nobody listens on (a daemon died: stale)
 *   -ENOTSOCK     the path exists but is not a socket
 *   -EACCES       the socket (or its directory) is not accessible to us
 *   -ETIMEDOUT    no complete answer within timeout_ms
 *   -ECONNRESET   the daemon closed the connection without an answer
 *   -EBADMSG      the answer is not a control frame
 *   -EMSGSIZE     the answer is over max_reply
 *   -EINVAL       the path is too long for a socket address
 *   other -errno  from the system */
int control_client_call(const char *path, const void *req, size_t len, int64_t timeout_ms,
			size_t max_reply, uint8_t **ret_buf, size_t *ret_len);

#endif
