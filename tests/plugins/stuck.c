/* SPDX-License-Identifier: MIT */
/*
 * stuck.c - a test plugin for real daemons that hangs or crashes in a
 * chosen callback, chosen per release by an environment variable, so one
 * host can run a broken release and roll to a fixed one by hot reload:
 *
 *   LH_STUCK_<major>_<minor>_<patch>=ACTION:CALLBACK
 *
 * ACTION: hang (block forever in poll(): never returns), segv (a write to
 * an unmapped address), abort, exit (exit(3)); CALLBACK: init, on_elected,
 * on_releases_changed, reconcile, on_deposed, fini. Unset: every callback
 * returns at once. Built as stuck-1.0.0.so and stuck-1.1.0.so.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <leasehold/plugin.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define ENV_NAME                                                                                   \
	"LH_STUCK_" STR(STUCK_RELEASE_MAJOR) "_" STR(STUCK_RELEASE_MINOR) "_" STR(STUCK_RELEASE_PATCH)

/* an unmapped, aligned, non-NULL address; volatile: a real fault */
static volatile unsigned long g_bad_addr = 16;

static void act(const char *callback)
{
	const char *v = getenv(ENV_NAME);
	const char *colon = v ? strchr(v, ':') : NULL;
	if (!colon || strcmp(colon + 1, callback) != 0)
		return;
	size_t n = (size_t)(colon - v);
	if (n == 4 && strncmp(v, "hang", 4) == 0) {
		for (;;)
			poll(NULL, 0, -1); /* a plugin that never returns */
	} else if (n == 4 && strncmp(v, "segv", 4) == 0) {
		*(volatile int *)g_bad_addr = 1;
	} else if (n == 5 && strncmp(v, "abort", 5) == 0) {
		abort();
	} else if (n == 4 && strncmp(v, "exit", 4) == 0) {
		exit(3);
	}
}

static int32_t s_init(struct lh_ctx *ctx)
{
	(void)ctx;
	act("init");
	return 0;
}

static int32_t s_on_elected(struct lh_ctx *ctx, int64_t token)
{
	(void)ctx;
	(void)token;
	act("on_elected");
	return 0;
}

static int32_t s_on_releases_changed(struct lh_ctx *ctx, const struct lh_releases *r)
{
	(void)ctx;
	(void)r;
	act("on_releases_changed");
	return 0;
}

static int32_t s_reconcile(struct lh_ctx *ctx)
{
	(void)ctx;
	act("reconcile");
	return 0;
}

static void s_on_deposed(struct lh_ctx *ctx)
{
	(void)ctx;
	act("on_deposed");
}

static void s_fini(struct lh_ctx *ctx)
{
	(void)ctx;
	act("fini");
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
    LH_PLUGIN_HEADER_INIT,
    .name = "stuck",
    .release = {STUCK_RELEASE_MAJOR, STUCK_RELEASE_MINOR, STUCK_RELEASE_PATCH},
    .min_reconciler_release = {1, 0, 0},
    .min_compatible_release = {1, 0, 0},
    .init = s_init,
    .on_elected = s_on_elected,
    .on_releases_changed = s_on_releases_changed,
    .reconcile = s_reconcile,
    .on_deposed = s_on_deposed,
    .fini = s_fini,
};
