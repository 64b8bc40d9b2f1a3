/* SPDX-License-Identifier: MIT */
/*
 * configured.c - a test plugin for the configuration API (ABI 1.2): it logs
 * what api->config() says in init, reconcile and on_config_changed, one
 * line each ("CFG <where> rev=R flags=F cluster=<doc> local=<doc>"), and its
 * validate_config refuses any document with a key "reject". Its
 * on_config_changed refuses a cluster document with a key "refuse_change"
 * (with a reason) or "refuse_silently" (without one).
 *
 * Built three times: "configured" (ABI 1.2); with -DCONFIGURED_ABI_1_1,
 * "configured11": the same callbacks in memory but a descriptor that says
 * ABI 1.1 (size and minor), which the host must treat exactly as a 1.1
 * plugin: never call on_config_changed or validate_config; and with
 * -DCONFIGURED_RELEASE_1_1, "configured" release 1.1.0, whose
 * validate_config also refuses a key "gone_in_1_1" (a newer release that
 * drops a setting the running one takes).
 */
#include <string.h>

#include <leasehold/plugin.h>

#ifdef CONFIGURED_ABI_1_1
#define NAME "configured11"
#else
#define NAME "configured"
#endif

static void log_config(struct lh_ctx *ctx, const char *where, const struct lh_config *c)
{
	lh_logf(ctx, LH_LOG_INFO, "CFG %s %s rev=%lld flags=%u cluster=%s local=%s", NAME, where,
		(long long)c->cluster_revision, c->flags, c->cluster ? c->cluster : "(none)",
		c->local ? c->local : "(none)");
}

static int32_t p_init(struct lh_ctx *ctx)
{
	if (LH_HOST_HAS(ctx->host, config))
		log_config(ctx, "init", ctx->host->config(ctx));
	else
		lh_logf(ctx, LH_LOG_INFO, "CFG %s init without a config API", NAME);
	return 0;
}

static int32_t p_reconcile(struct lh_ctx *ctx)
{
	log_config(ctx, "reconcile", ctx->host->config(ctx));
	return 0;
}

static int32_t p_changed(struct lh_ctx *ctx, const struct lh_config *c)
{
	log_config(ctx, "changed", c);
	if (c->cluster && strstr(c->cluster, "\"refuse_change\"")) {
		ctx->host->set_error(ctx, "the key 'refuse_change' is refused on this node");
		return -22; /* -EINVAL */
	}
	if (c->cluster && strstr(c->cluster, "\"refuse_silently\""))
		return -22;
	return 0;
}

static int32_t p_validate(struct lh_ctx *ctx, const char *json, uint64_t len)
{
	lh_logf(ctx, LH_LOG_INFO, "CFG %s validate %llu bytes", NAME, (unsigned long long)len);
	if (strstr(json, "\"reject\"")) {
		ctx->host->set_error(ctx, "the key 'reject' is not allowed here");
		return -22; /* -EINVAL */
	}
#ifdef CONFIGURED_RELEASE_1_1
	if (strstr(json, "\"gone_in_1_1\"")) {
		ctx->host->set_error(ctx, "the key 'gone_in_1_1' is gone in release 1.1.0");
		return -22;
	}
#endif
	return 0;
}

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
#ifdef CONFIGURED_ABI_1_1
    .magic_major = LH_PLUGIN_MAGIC_MAJOR,
    .abi_minor = 1,
    .size = (uint32_t)LH_PLUGIN_SIZE_1_1,
#else
    LH_PLUGIN_HEADER_INIT,
#endif
    .name = NAME,
#ifdef CONFIGURED_RELEASE_1_1
    .release = {1, 1, 0},
#else
    .release = {1, 0, 0},
#endif
    .min_reconciler_release = {1, 0, 0},
    .min_compatible_release = {1, 0, 0},
    .init = p_init,
    .reconcile = p_reconcile,
    .on_config_changed = p_changed,
    .validate_config = p_validate,
};
