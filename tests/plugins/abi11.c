/* SPDX-License-Identifier: MIT */
/*
 * abi11.c - a plugin built against the ABI 1.1 header kept in
 * tests/abi-1.1/leasehold/plugin.h (the build puts that directory first on
 * the include path): it proves that a plugin of the previous minor loads and
 * behaves exactly as before on a 1.2 host. Its reconcile writes "done" =
 * "<token>" through the host's txn; the host API table it sees is the 1.1
 * part of the host's (LH_HOST_HAS).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <leasehold/plugin.h>

#if LH_PLUGIN_ABI_MINOR != 1
#error "abi11.c must be built against the ABI 1.1 header (tests/abi-1.1)"
#endif

static int32_t a_reconcile(struct lh_ctx *ctx)
{
	char v[32];
	int n = snprintf(v, sizeof(v), "%" PRId64, ctx->host->fencing_token(ctx));
	struct lh_op put = {.type = LH_OP_PUT, .key = "done", .key_len = 4, .value = v,
			    .value_len = (uint64_t)n};
	const struct lh_txn_result *res;
	int32_t r = ctx->host->txn(ctx, NULL, 0, &put, 1, NULL, 0, &res);
	if (r < 0)
		lh_set_errorf(ctx, "txn: %s", ctx->host->last_error(ctx));
	return r;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "abi11",
	.release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, 0, 0},
	.reconcile = a_reconcile,
	.role = NULL,
};
