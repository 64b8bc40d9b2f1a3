/* SPDX-License-Identifier: MIT */
/*
 * bad.c - test plugins that the loader must refuse, one per -D flag:
 *   BAD_NO_SYMBOL, BAD_MAGIC, BAD_MAJOR, BAD_MINOR, BAD_SIZE_SMALL,
 *   BAD_SIZE_BIG, BAD_NAME_EMPTY, BAD_NAME_CHARS, BAD_BELOW_COMPAT,
 *   BAD_BELOW_RECONCILER, BAD_NO_RECONCILE, BAD_ROLE
 * Without any flag it is a minimal valid plugin named "good"; with
 * GOOD_ROLE it is a valid plugin "good" that needs the role "controller".
 * NO_EXPORT: the descriptor is defined without LH_PLUGIN_EXPORT (built with
 * -fvisibility=hidden: the header's declaration must export it anyway; built
 * with an export list that leaves it out: hidden, and refused as such).
 * INIT_FAILS_AS_RECONCILER: a valid descriptor of plugin "reconciler" at
 * release 9.0.0 whose init always fails (a broken newer release of the
 * example plugin: it loads, but must never supersede a working file).
 */
#include <errno.h>

#include <leasehold/plugin.h>

__attribute__((unused)) static int32_t bad_reconcile(struct lh_ctx *ctx)
{
	(void)ctx;
	return 0;
}

#ifdef INIT_FAILS_AS_RECONCILER
static int32_t failing_init(struct lh_ctx *ctx)
{
	ctx->host->set_error(ctx, "this build always fails init");
	return -EIO;
}
#endif

#ifdef BAD_NO_SYMBOL
/* a descriptor under a wrong name */
LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin_v2;
const struct lh_plugin leasehold_plugin_v2 = {
	LH_PLUGIN_HEADER_INIT,
	.name = "nosymbol",
	.release = {1, 0, 0},
	.reconcile = bad_reconcile,
};
#else
#ifdef NO_EXPORT
const struct lh_plugin leasehold_plugin = {
#else
LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
#endif
#if defined(BAD_MAGIC)
	.magic_major = (0x1234u << 16) | LH_PLUGIN_ABI_MAJOR,
#elif defined(BAD_MAJOR)
	.magic_major = (LH_PLUGIN_MAGIC << 16) | (LH_PLUGIN_ABI_MAJOR + 1),
#else
	.magic_major = LH_PLUGIN_MAGIC_MAJOR,
#endif
#ifdef BAD_MINOR
	.abi_minor = LH_PLUGIN_ABI_MINOR + 1,
#else
	.abi_minor = LH_PLUGIN_ABI_MINOR,
#endif
#if defined(BAD_SIZE_SMALL)
	.size = 16,
#elif defined(BAD_SIZE_BIG)
	.size = 4096,
#else
	.size = sizeof(struct lh_plugin),
#endif
#if defined(BAD_NAME_EMPTY)
	.name = "",
#elif defined(INIT_FAILS_AS_RECONCILER)
	.name = "reconciler",
#elif defined(BAD_NAME_CHARS)
	.name = "Bad Name!",
#else
	.name = "good",
#endif
#ifdef INIT_FAILS_AS_RECONCILER
	.release = {9, 0, 0},
	.init = failing_init,
#else
	.release = {1, 0, 0},
#endif
#ifdef BAD_BELOW_COMPAT
	.min_compatible_release = {1, 1, 0},
#else
	.min_compatible_release = {1, 0, 0},
#endif
#ifdef BAD_BELOW_RECONCILER
	.min_reconciler_release = {2, 0, 0},
#else
	.min_reconciler_release = {1, 0, 0},
#endif
#ifndef BAD_NO_RECONCILE
	.reconcile = bad_reconcile,
#endif
#if defined(BAD_ROLE)
	.role = "Controller Role",
#elif defined(GOOD_ROLE)
	.role = "controller",
#endif
};
#endif
