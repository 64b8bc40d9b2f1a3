/* SPDX-License-Identifier: MIT */
/* controller.c - a controller for the apply tests: every input in/<name> gets the output
 * <prefix><name> = "<label>:<input>" (prefix, label: cluster config); orphans are deleted. */
#include <leasehold/plugin.h>

static int32_t reconcile(struct lh_ctx *ctx)
{
	const struct lh_host_api *h = ctx->host;
	const char *out = h->config_string(ctx, "prefix", ""), *label = h->config_string(ctx, "label", "");
	const struct lh_op_result *in; /* like everything below: valid until we return */
	int32_t r = h->range(ctx, "in/", 3, LH_F_PREFIX, 0, &in);
	if (r < 0)
		return r;
	struct lh_apply_kv *want = h->alloc(ctx, (in->n_kvs + 1) * sizeof(*want));
	for (uint64_t i = 0, len; want && i < in->n_kvs; i++) {
		const char *name = lh_key_strip(in->kvs[i].key, in->kvs[i].key_len, "in/", &len);
		const char *k = lh_printf(ctx, "%s%.*s", out, (int)len, name);
		const char *v = lh_printf(ctx, "%s:%s", label, (const char *)in->kvs[i].value);
		if (!k || !v)
			return -ENOMEM;
		want[i] = (struct lh_apply_kv){k, strlen(k), v, strlen(v)};
	}
	struct lh_apply_result res;
	return want ? h->apply(ctx, out, strlen(out), want, in->n_kvs, 0, &res) : -ENOMEM;
}
static int32_t init(struct lh_ctx *ctx) { return ctx->host->watch(ctx, "in/", 3, 0) < 0 ? -EINVAL : 0; }
static int32_t changed(struct lh_ctx *ctx, const struct lh_watch_batch *b) { (void)b; return ctx->host->request_reconcile(ctx); }
static int32_t configured(struct lh_ctx *ctx, const struct lh_config *c) { (void)c; ctx->host->request_reconcile(ctx); return 0; }

static const struct lh_config_field fields[] = {
	{.path = "prefix", .type = LH_CONFIG_STRING, .def = "\"out/\""},
	{.path = "label", .type = LH_CONFIG_STRING, .def = "\"blue\""},
};
LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT, .name = "controller", .release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0}, .min_compatible_release = {1, 0, 0},
	.init = init, .reconcile = reconcile, .on_watch_events = changed, .on_config_changed = configured,
	.config_fields = fields, .n_config_fields = 2, .config_field_size = sizeof(struct lh_config_field),
};
