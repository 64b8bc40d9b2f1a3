/* SPDX-License-Identifier: MIT */
/*
 * applier.c - the "applier" test plugin (ABI 1.3): api->apply, apply_key
 * and the config accessors, driven by the environment, each result a line
 * in the trace file $LH_APPLIER_TRACE (O_APPEND, one write per line).
 * The knobs below are lines NAME=VALUE of the file $LH_APPLIER_KNOBS, read
 * on every reconcile (a worker process keeps the environment it started
 * with, so a test changes the file, not its environment).
 * reconcile runs the case CASE:
 *   set    apply N keys "out/kNNNNN" = VAL (default
 *          "v") under "out/", flags FLAGS (decimal); a value of
 *          the form "@BYTES" is that many 'x' bytes
 *   bad    apply sets the host must refuse before writing, one line each
 *   key    apply_key "out/one" = VAL, then again, then a delete
 *   config the accessors: config <prefix> <count> <on> <wait_ms> <n tags> <tag0>
 * Every apply line: apply rc=<rc> put=<n> deleted=<n> unchanged=<n> txns=<n> rev=<0|+> <last_error>
 * The schema: prefix (string, default "out/"), count (int 0..1000),
 * on (bool), wait (duration), mode (string "a" or "b"), tags (strings),
 * need.me (int, required).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <leasehold/plugin.h>

#include "trace.h"

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	trace_vline("LH_APPLIER_TRACE", fmt, ap);
	va_end(ap);
}

/* knob - the value of NAME in the knobs file (static storage per call), or NULL */
static const char *knob(const char *name)
{
	static char vals[4][256];
	static unsigned next;
	const char *path = getenv("LH_APPLIER_KNOBS");
	FILE *f = path ? fopen(path, "r") : NULL;
	char line[300];
	const char *found = NULL;
	size_t n = strlen(name);
	while (f && !found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, name, n) != 0 || line[n] != '=')
			continue;
		char *v = vals[next++ % 4];
		snprintf(v, 256, "%s", line + n + 1);
		v[strcspn(v, "\n")] = 0;
		found = v;
	}
	if (f)
		fclose(f);
	return found;
}

static void said(struct lh_ctx *ctx, int32_t rc, const struct lh_apply_result *r)
{
	say("apply rc=%d put=%llu deleted=%llu unchanged=%llu txns=%u rev=%s %s", rc,
	    (unsigned long long)r->put, (unsigned long long)r->deleted,
	    (unsigned long long)r->unchanged, r->txns, r->revision > 0 ? "+" : "0",
	    ctx->host->last_error(ctx));
}

static int32_t case_set(struct lh_ctx *ctx)
{
	const char *n_s = knob("N"), *val = knob("VAL");
	const char *fl = knob("FLAGS");
	size_t n = n_s ? strtoul(n_s, NULL, 10) : 0;
	val = val ? val : "v";
	size_t vlen = strlen(val);
	char *big = NULL;
	if (val[0] == '@') {
		vlen = strtoul(val + 1, NULL, 10);
		big = malloc(vlen ? vlen : 1);
		if (!big)
			return -ENOMEM;
		memset(big, 'x', vlen);
		val = big;
	}
	struct lh_apply_kv *kvs = calloc(n ? n : 1, sizeof(*kvs));
	char (*keys)[32] = calloc(n ? n : 1, 32);
	if (!kvs || !keys) {
		free(kvs), free(keys), free(big);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(keys[i], 32, "out/k%05zu", n - 1 - i); /* not in key order */
		kvs[i] = (struct lh_apply_kv){keys[i], strlen(keys[i]), val, vlen};
	}
	struct lh_apply_result r;
	int32_t rc = ctx->host->apply(ctx, "out/", 4, kvs, n, fl ? (uint32_t)atoi(fl) : 0, &r);
	said(ctx, rc, &r);
	free(kvs), free(keys), free(big);
	return 0;
}

static void bad_one(struct lh_ctx *ctx, const char *prefix, const struct lh_apply_kv *kvs,
                    uint64_t n, uint32_t flags)
{
	struct lh_apply_result r;
	int32_t rc = ctx->host->apply(ctx, prefix, strlen(prefix), kvs, n, flags, &r);
	said(ctx, rc, &r);
}

static int32_t case_bad(struct lh_ctx *ctx)
{
	const struct lh_apply_kv good = {"out/a", 5, "1", 1};
	const struct lh_apply_kv dup[] = {good, {"out/b", 5, "2", 1}, good};
	const struct lh_apply_kv empty_part[] = {good, {"out//x", 6, "1", 1}};
	const struct lh_apply_kv outside[] = {good, {"other/x", 7, "1", 1}};
	const struct lh_apply_kv huge[] = {good, {"out/h", 5, "x", LH_VALUE_MAX + 1}};
	bad_one(ctx, "out/", dup, 3, 0);
	bad_one(ctx, "out/", empty_part, 2, 0);
	bad_one(ctx, "out/", outside, 2, 0);
	bad_one(ctx, "out/", huge, 2, 0);
	bad_one(ctx, "out/", &good, 1, 0x80);
	bad_one(ctx, "/abs/", &good, 1, 0);
	bad_one(ctx, "out/", NULL, 1, 0);
	return 0;
}

static int32_t case_key(struct lh_ctx *ctx)
{
	const char *val = knob("VAL");
	val = val ? val : "v";
	struct lh_apply_result r;
	for (int i = 0; i < 2; i++) {
		int32_t rc = ctx->host->apply_key(ctx, "out/one", 7, val, strlen(val), &r);
		said(ctx, rc, &r);
	}
	for (int i = 0; i < 2; i++) {
		int32_t rc = ctx->host->apply_key(ctx, "out/one", 7, NULL, 0, &r);
		said(ctx, rc, &r);
	}
	return 0;
}

static int32_t case_config(struct lh_ctx *ctx)
{
	const struct lh_host_api *h = ctx->host;
	const char *const *tags = NULL;
	uint32_t n = h->config_strings(ctx, "tags", &tags);
	say("config %s %lld %d %lld %u %s %s", h->config_string(ctx, "prefix", "?"),
	    (long long)h->config_int(ctx, "count", -1), (int)h->config_bool(ctx, "on", 0),
	    (long long)h->config_duration_ms(ctx, "wait", -1), n, n ? tags[0] : "-",
	    h->config_string(ctx, "free.text", "dflt"));
	/* a field the schema does not name, of the wrong type: def and a reason */
	say("untyped %lld %s", (long long)h->config_int(ctx, "free.text", 7), h->last_error(ctx));
	return 0;
}

static int32_t applier_reconcile(struct lh_ctx *ctx)
{
	const char *c = knob("CASE");
	if (!c || !LH_HOST_HAS(ctx->host, config_strings))
		return 0;
	if (strcmp(c, "set") == 0)
		return case_set(ctx);
	if (strcmp(c, "bad") == 0)
		return case_bad(ctx);
	if (strcmp(c, "key") == 0)
		return case_key(ctx);
	if (strcmp(c, "config") == 0)
		return case_config(ctx);
	return 0;
}

static int32_t applier_on_config_changed(struct lh_ctx *ctx, const struct lh_config *c)
{
	say("changed flags=%u %s", c->flags, ctx->host->config_string(ctx, "prefix", "?"));
	return 0;
}

static const char *const modes[] = {"a", "b", NULL};
static const struct lh_config_field fields[] = {
	{.path = "prefix", .type = LH_CONFIG_STRING, .def = "\"out/\""},
	{.path = "count", .type = LH_CONFIG_INT, .min = 0, .max = 1000},
	{.path = "on", .type = LH_CONFIG_BOOL, .def = "true"},
	{.path = "wait", .type = LH_CONFIG_DURATION, .def = "\"2s\""},
	{.path = "mode", .type = LH_CONFIG_STRING, .allowed = modes},
	{.path = "tags", .type = LH_CONFIG_STRINGS},
	{.path = "need.me", .type = LH_CONFIG_INT, .flags = LH_CONFIG_REQUIRED},
};

LH_PLUGIN_EXPORT const struct lh_plugin leasehold_plugin = {
	LH_PLUGIN_HEADER_INIT,
	.name = "applier",
	.release = {1, 0, 0},
	.min_reconciler_release = {1, 0, 0},
	.min_compatible_release = {1, 0, 0},
	.reconcile = applier_reconcile,
	.on_config_changed = applier_on_config_changed,
	.config_fields = fields,
	.n_config_fields = sizeof(fields) / sizeof(fields[0]),
	.config_field_size = sizeof(struct lh_config_field),
};
