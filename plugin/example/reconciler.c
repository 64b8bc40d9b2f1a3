/* SPDX-License-Identifier: MIT */
/*
 * reconciler.c - the example plugin "reconciler" (ABI 1.3): each input
 * desired/<name> gets the output out/<name> in this release's format (1.0.x
 * "value=<v>[;label=<l>]", 1.1.0+ {"value":"<v>","format":2[,"label":"<l>"]}),
 * outputs without an input go, config/schema + config/items/<i> are its own
 * state. Each reconcile first writes journal/<token>-<n> (node, token,
 * release, items) for the invariant checker (tests/lib/invariants.h), then
 * hands config/ and out/ to api->apply. Setting: "label", a string (schema)
 * of [A-Za-z0-9._-]{0,63}. Builds, knobs: docs/plugin-guide.md, "The example plugin".
 */
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#ifndef LH_EXAMPLE_RELEASE_MAJOR
#define LH_EXAMPLE_RELEASE_MAJOR 1
#endif
#ifndef LH_EXAMPLE_RELEASE_MINOR
#define LH_EXAMPLE_RELEASE_MINOR 0
#endif
#ifndef LH_EXAMPLE_RELEASE_PATCH
#define LH_EXAMPLE_RELEASE_PATCH 0
#endif
#define FORMAT_V2 (LH_EXAMPLE_RELEASE_MAJOR > 1 || LH_EXAMPLE_RELEASE_MINOR >= 1)
#define ITEM_FORMAT \
	(FORMAT_V2 ? "{\"item\":%u,\"state\":\"ready\",\"format\":2}" : "item=%u;state=ready")
#define LABEL_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

struct state {
	uint32_t items, fail_first, delay_ms;
	uint64_t reconciles, journal_counter; /* journal/<token>-<counter> */
	int64_t token; /* the current term's, 0 when not leading */
	char label[64]; /* "" = none */
};

static uint32_t env_u32(const char *name, uint32_t def, uint32_t max)
{
	char *end = NULL, *s = getenv(name);
	unsigned long v = s && *s >= '0' && *s <= '9' ? strtoul(s, &end, 10) : max + 1ul;
	return v > max || (end && *end) ? def : (uint32_t)v; /* strtoul's overflow: > max */
}

/* materialize - an input value in this release's format (in the arena) */
static const char *materialize(struct lh_ctx *ctx, const char *in, const char *label)
{
	const char *sep = *label ? FORMAT_V2 ? ",\"label\":\"" : ";label=" : "";
#if FORMAT_V2
	char *esc = ctx->host->alloc(ctx, 6 * strlen(in) + 1), *o = esc;
	for (; esc && *in; in++) { /* JSON string escaping */
		unsigned char c = (unsigned char)*in;
		bool esc_it = c < 0x20 || c == '"' || c == '\\';
		o += esc_it ? snprintf(o, 7, "\\u%04x", c) : (*o = *in, 1);
	}
	return esc ? lh_printf(ctx, "{\"value\":\"%s\",\"format\":2%s%s%s}", esc, sep, label,
	                       *label ? "\"" : "") : NULL;
#else
	return lh_printf(ctx, "value=%s%s%s", in, sep, label);
#endif
}

/* journal - this term's next record, in a fenced txn that runs only if the
 * record does not exist yet */
static int32_t journal(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	const struct lh_host_api *h = ctx->host;
	const struct lh_txn_result *res;
	int64_t tok = h->fencing_token(ctx);
	const char *k = lh_printf(ctx, "journal/%016" PRIx64 "-%08" PRIu64, (uint64_t)tok,
	                          st->journal_counter++);
	const char *v = lh_printf(ctx, "node=%s token=%" PRId64 " release=%d.%d.%d items=%u",
	                          h->node_id(ctx), tok, LH_EXAMPLE_RELEASE_MAJOR,
	                          LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH, st->items);
	if (!k || !v)
		return -ENOMEM;
	struct lh_op put = {LH_OP_PUT, 0, k, strlen(k), v, strlen(v), 0};
	struct lh_compare fresh = {.target = LH_CMP_CREATE, .key = k, .key_len = strlen(k)};
	int32_t r = h->txn(ctx, &fresh, 1, &put, 1, NULL, 0, &res);
	if (r < 0 || !res->succeeded) /* a failed compare: the record exists, or the fence */
		lh_set_errorf(ctx, "writing: %s", r < 0 ? h->last_error(ctx) : "txn compare failed "
		              "(journal record exists or not leading)");
	return r < 0 ? r : res->succeeded ? 0 : -EAGAIN;
}

/* converge - apply set[0..n) to prefix (a NULL set, key or value: the arena
 * ran out of memory) */
static int32_t converge(struct lh_ctx *ctx, const char *prefix, struct lh_apply_kv *set, size_t n)
{
	struct lh_apply_result res;
	int32_t r = set ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = set[i].key && set[i].value ? 0 : -ENOMEM;
	if (r == 0 && (r = ctx->host->apply(ctx, prefix, strlen(prefix), set, n, 0, &res)) < 0)
		lh_set_errorf(ctx, "applying %s: %s", prefix, ctx->host->last_error(ctx));
	else if (r < 0)
		ctx->host->set_error(ctx, "out of memory");
	return r;
}

static struct lh_apply_kv kv(const char *key, const char *value)
{
	return (struct lh_apply_kv){key, key ? strlen(key) : 0, value, value ? strlen(value) : 0};
}

static int32_t rc_reconcile(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	const struct lh_op_result *in; /* valid until we return, like all the arena holds */
	const char *ff = getenv("LH_EXAMPLE_FAIL_FILE");
	int32_t r = ++st->reconciles <= st->fail_first ? -EAGAIN : 0;
	if (st->delay_ms)
		poll(NULL, 0, (int)st->delay_ms); /* slow work, on the plugin's own thread */
	if (ff && *ff && access(ff, F_OK) == 0) {
		lh_set_errorf(ctx, "failing on purpose (%s exists, LH_EXAMPLE_FAIL_FILE)", ff);
		return -EIO;
	}
	if (r < 0)
		lh_set_errorf(ctx, "failing on purpose (attempt %" PRIu64 " of %u, "
		              "LH_EXAMPLE_FAIL_FIRST)", st->reconciles, st->fail_first);
	if (r < 0 || (r = journal(ctx)) < 0)
		return r;
	struct lh_apply_kv *set = ctx->host->alloc(ctx, (st->items + 1) * sizeof(*set));
	for (uint32_t i = 0; set && i < st->items; i++)
		set[i] = kv(lh_printf(ctx, "config/items/%u", i), lh_printf(ctx, ITEM_FORMAT, i));
	if (set)
		set[st->items] = kv("config/schema", FORMAT_V2 ? "reconciler/v2" : "reconciler/v1");
	if ((r = converge(ctx, "config/", set, st->items + 1u)) < 0)
		return r;
	if ((r = ctx->host->range(ctx, "desired/", 8, LH_F_PREFIX, 0, &in)) < 0) {
		lh_set_errorf(ctx, "reading desired/: %s", ctx->host->last_error(ctx));
		return r;
	}
	set = ctx->host->alloc(ctx, (in->n_kvs + 1) * sizeof(*set));
	for (uint64_t i = 0, len; set && i < in->n_kvs; i++) {
		const struct lh_kv *e = &in->kvs[i];
		const char *name = lh_key_strip(e->key, e->key_len, "desired/", &len);
		set[i] = kv(lh_printf(ctx, "out/%s", name),
		            materialize(ctx, (const char *)e->value, st->label));
	}
	return converge(ctx, "out/", set, in->n_kvs);
}

static int32_t rc_on_watch_events(struct lh_ctx *ctx, const struct lh_watch_batch *wb)
{
	lh_logf(ctx, LH_LOG_DEBUG, "watch batch: %" PRIu64 " event(s), flags 0x%x, revision "
	        "%" PRId64, wb->n_events, wb->flags, wb->revision);
	int32_t r = ctx->host->request_reconcile(ctx); /* coalesced: one more reconcile */
	/* -ESTALE: not leading, a shadow run's snapshot; its reconcile follows anyway */
	return r == -ESTALE ? 0 : r;
}

/* config_label - the configured label (config_string: in validate_config, the
 * candidate's), or NULL when it is not [A-Za-z0-9._-]{0,63} */
static const char *config_label(struct lh_ctx *ctx)
{
	const char *l = ctx->host->config_string(ctx, "label", "");
	return strlen(l) < 64 && strspn(l, LABEL_CHARS) == strlen(l) ? l : NULL;
}

static int32_t rc_on_config_changed(struct lh_ctx *ctx, const struct lh_config *c)
{
	struct state *st = ctx->user;
	const char *l = config_label(ctx);
	if (!l) {
		lh_set_errorf(ctx, "configuration revision %" PRId64 ": label is not valid; "
		              "keeping '%s'", c->cluster_revision, st->label);
		return -EINVAL;
	}
	bool changed = strcmp(l, st->label) != 0;
	snprintf(st->label, sizeof(st->label), "%s", l);
	/* the leader rewrites its outputs; a standby only keeps the setting */
	return changed && st->token ? ctx->host->request_reconcile(ctx) : 0;
}

static int32_t rc_init(struct lh_ctx *ctx)
{
	struct state *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->items = env_u32("LH_EXAMPLE_ITEMS", 3, 1000);
	st->fail_first = env_u32("LH_EXAMPLE_FAIL_FIRST", 0, UINT32_MAX - 1);
	st->delay_ms = env_u32("LH_EXAMPLE_DELAY_MS", 0, 600000);
	ctx->user = st;
	if (rc_on_config_changed(ctx, ctx->host->config(ctx)) < 0) /* the label, from init on */
		lh_logf(ctx, LH_LOG_WARN, "the configured label is not valid: outputs carry none");
	int32_t r = ctx->host->watch(ctx, "desired/", 8, 0);
	if (r < 0) {
		lh_set_errorf(ctx, "watch desired/: %s", ctx->host->last_error(ctx));
		free(st);
		return r;
	}
	return 0;
}

static int32_t rc_on_elected(struct lh_ctx *ctx, int64_t token)
{
	((struct state *)ctx->user)->token = token;
	lh_logf(ctx, LH_LOG_INFO, "leading with fencing token %" PRId64, token);
	return 0;
}

static int32_t rc_validate_config(struct lh_ctx *ctx, const char *json, uint64_t len)
{
	(void)json, (void)len; /* the schema checked it; config_label() reads it */
	if (config_label(ctx))
		return 0;
	ctx->host->set_error(ctx, "\"label\" must be a string of [A-Za-z0-9._-], at most 63 bytes");
	return -EINVAL;
}

static void rc_on_deposed(struct lh_ctx *ctx)
{
	struct state *st = ctx->user;
	lh_logf(ctx, LH_LOG_INFO, "no longer leading (token %" PRId64 ")", st->token);
	st->token = 0;
}

static void rc_fini(struct lh_ctx *ctx)
{
	free(ctx->user);
}

static const struct lh_config_field rc_fields[] = {{.path = "label", .type = LH_CONFIG_STRING}};

const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
#ifdef LH_EXAMPLE_REFERENCE_ROLLOUT
	.flags = LH_PLUGIN_F_REFERENCE_ROLLOUT,
#endif
	.name = "reconciler",
	.release = {LH_EXAMPLE_RELEASE_MAJOR, LH_EXAMPLE_RELEASE_MINOR, LH_EXAMPLE_RELEASE_PATCH},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, FORMAT_V2 ? 1 : 0, 0},
	.init = rc_init, .on_elected = rc_on_elected, .reconcile = rc_reconcile,
	.on_deposed = rc_on_deposed, .fini = rc_fini,
#ifdef LH_EXAMPLE_ROLE
	.role = LH_EXAMPLE_ROLE,
#endif
	.on_watch_events = rc_on_watch_events, .on_config_changed = rc_on_config_changed,
	.validate_config = rc_validate_config, .config_fields = rc_fields, .n_config_fields = 1,
	.config_field_size = sizeof(struct lh_config_field),
};
