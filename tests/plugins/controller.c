/* SPDX-License-Identifier: MIT */
/* controller.c - the plugin guide's controller: for every input in/<name>,
 * the output <prefix><name> = "<label>:<input>"; orphans are deleted. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <leasehold/plugin.h>

static int32_t reconcile(struct lh_ctx *ctx)
{
	const struct lh_host_api *h = ctx->host;
	const char *out = h->config_string(ctx, "prefix", ""), *label = h->config_string(ctx, "label", "");
	const struct lh_op_result *in;
	int32_t r = h->range(ctx, "in/", 3, LH_F_PREFIX, 0, &in); /* valid until we return */
	size_t n = r < 0 ? 0 : in->n_kvs;
	struct lh_apply_kv *want = calloc(n + 1, sizeof(*want));
	char **mem = calloc(2 * n + 1, sizeof(*mem));
	for (size_t i = 0; r == 0 && i < n && want && mem; i++) {
		uint64_t len;
		const char *name = lh_key_strip(in->kvs[i].key, in->kvs[i].key_len, "in/", &len);
		if (asprintf(&mem[2 * i], "%s%.*s", out, (int)len, name) < 0 ||
		    asprintf(&mem[2 * i + 1], "%s:%s", label, (const char *)in->kvs[i].value) < 0)
			return -ENOMEM; /* (a sketch: leaks what it had) */
		want[i] = (struct lh_apply_kv){mem[2 * i], strlen(mem[2 * i]), mem[2 * i + 1], strlen(mem[2 * i + 1])};
	}
	struct lh_apply_result res;
	if (r == 0)
		r = want && mem ? h->apply(ctx, out, strlen(out), want, n, 0, &res) : -ENOMEM;
	for (size_t i = 0; mem && i < 2 * n; i++)
		free(mem[i]);
	free(mem), free(want);
	return r;
}
static int32_t init(struct lh_ctx *ctx) { return ctx->host->watch(ctx, "in/", 3, 0) < 0 ? -EINVAL : 0; }
static int32_t changed(struct lh_ctx *ctx, const struct lh_watch_batch *b) { (void)b; return ctx->host->request_reconcile(ctx); }
static int32_t reconfigured(struct lh_ctx *ctx, const struct lh_config *c) { (void)c; ctx->host->request_reconcile(ctx); return 0; }

static const struct lh_config_field fields[] = {
	{.path = "prefix", .type = LH_CONFIG_STRING, .def = "\"out/\""},
	{.path = "label", .type = LH_CONFIG_STRING, .def = "\"blue\""},
};
LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT, .name = "controller", .release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0}, .min_compatible_release = {1, 0, 0},
	.init = init, .reconcile = reconcile, .on_watch_events = changed, .on_config_changed = reconfigured,
	.config_fields = fields, .n_config_fields = 2, .config_field_size = sizeof(struct lh_config_field),
};
