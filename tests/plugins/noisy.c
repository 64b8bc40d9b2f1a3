/* SPDX-License-Identifier: MIT */
/*
 * noisy.c - a test plugin "noisy" that writes to stdout and stderr directly
 * instead of logging through the host: in init, one line on stderr, one on
 * stdout, a control byte, and a last line without a newline; then, when
 * $LH_NOISY_ABORT is set, it aborts (what a crashing plugin wrote last must
 * still reach the log).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <leasehold/plugin.h>

static int32_t noisy_init(struct lh_ctx *ctx)
{
	(void)ctx;
	fprintf(stderr, "noisy says hello on stderr\n");
	fflush(stderr);
	printf("noisy says hello on stdout\n");
	fflush(stdout);
	static const char last[] = "noisy last words\x01 without a newline";
	ssize_t w = write(STDERR_FILENO, last, sizeof(last) - 1);
	(void)w;
	if (getenv("LH_NOISY_ABORT"))
		abort();
	return 0;
}

static int32_t noisy_reconcile(struct lh_ctx *ctx)
{
	(void)ctx;
	return 0;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "noisy",
	.release = {1, 0, 0},
	.min_compatible_release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0},
	.init = noisy_init,
	.reconcile = noisy_reconcile,
};
