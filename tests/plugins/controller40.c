/* SPDX-License-Identifier: MIT */
#include <leasehold/plugin.h>
#ifndef MAJOR
#define MAJOR 1 /* -DMAJOR=2 builds 2.0.0: outputs "<greeting>, <input>!", new to 1.x readers */
#endif
static int32_t reconcile(struct lh_ctx *ctx)
{
	const char *greeting = ctx->host->config_string(ctx, "greeting", "hello");
	const struct lh_op_result *in; /* like all the host gives: valid until we return */
	struct lh_apply_result res;
	int32_t r = ctx->host->range(ctx, "in/", 3, LH_F_PREFIX, 0, &in);
	struct lh_apply_kv *set = r ? NULL : ctx->host->alloc(ctx, sizeof(*set) * (in->n_kvs + 1));
	for (uint64_t i = 0, n; set && i < in->n_kvs; i++) {
		const struct lh_kv *e = &in->kvs[i];
		char *k = lh_printf(ctx, "out/%s", lh_key_strip(e->key, e->key_len, "in/", &n));
		char *v = lh_printf(ctx, MAJOR > 1 ? "%s, %s!" : "%s, %s", greeting, e->value);
		if (!k || !v)
			return -ENOMEM;
		set[i] = (struct lh_apply_kv){k, strlen(k), v, strlen(v)};
	}
	return r ? r : set ? ctx->host->apply(ctx, "out/", 4, set, in->n_kvs, 0, &res) : -ENOMEM;
}
static int32_t init(struct lh_ctx *ctx)
{
	return ctx->host->watch(ctx, "in/", 3, 0) < 0 ? -EIO : 0;
}
static int32_t changed(struct lh_ctx *ctx, const struct lh_watch_batch *b)
{
	return (void)b, ctx->host->request_reconcile(ctx); /* coalesced */
}
static int32_t configured(struct lh_ctx *ctx, const struct lh_config *c)
{
	return (void)c, (void)ctx->host->request_reconcile(ctx), 0; /* -ESTALE on a standby */
}
static const struct lh_config_field f[] = {{"greeting", LH_CONFIG_STRING, 0, "\"hello\"", 0, 0, 0}};
const struct lh_plugin leasehold_plugin = {LH_PLUGIN_HEADER_INIT, .name = "controller40",
	.release = {MAJOR, 0, 0}, .min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {MAJOR, 0, 0}, .init = init, .reconcile = reconcile,
	.on_watch_events = changed, .on_config_changed = configured, .config_fields = f,
	.n_config_fields = 1, .config_field_size = sizeof(f[0])};
