/* SPDX-License-Identifier: MIT */
/*
 * worker_config_api.c - the typed configuration accessors of the host API
 * (ABI 1.3: config_string, config_int, config_bool, config_duration_ms,
 * config_strings) and the schema check of a cluster document, on the
 * worker's side. The document is parsed once per state (lazily, on the
 * first accessor call after a change); the schema's defaults once per
 * worker. Strings handed out point into these parsed objects, which live
 * until the configuration changes, which happens only between callbacks:
 * valid until the callback returns, as plugin.h promises.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi_config_schema.h"
#include "worker/worker_internal.h"

bool worker_config_schema_refuses(const struct worker *w, const char *doc, size_t len, char *why,
                                  size_t why_len)
{
	return abi_schema_check_text(&w->desc, doc, len, why, why_len) < 0;
}

void worker_config_forget(struct worker *w)
{
	json_object_put(w->cfg_json);
	w->cfg_json = NULL;
	w->cfg_json_done = false;
}

void worker_config_free(struct worker *w)
{
	worker_config_forget(w);
	for (uint32_t i = 0; w->schema_defs && i < w->desc.n_config_fields; i++)
		json_object_put(w->schema_defs[i]);
	free(w->schema_defs);
	w->schema_defs = NULL;
}

int32_t worker_config_validate(struct worker *w, const char *doc, size_t len)
{
	/* the accessors answer from the document being validated: a plugin
	 * checks a candidate with them as it reads its configuration, with no
	 * JSON parser of its own */
	json_object *cur = w->cfg_json;
	bool cur_done = w->cfg_json_done;
	w->cfg_json = abi_schema_parse_doc(doc, len);
	w->cfg_json_done = true;
	w->validating = true;
	int32_t err = w->desc.validate_config(&w->ctx, doc, len);
	w->validating = false;
	json_object_put(w->cfg_json);
	w->cfg_json = cur;
	w->cfg_json_done = cur_done;
	return err;
}

/* worker_config_doc - the cluster document parsed, or NULL. Concurrent
 * reconcile_key calls may ask at once: the parse is made once, under
 * cfg_mu; the parsed objects are then only read until the configuration
 * changes, which never happens while keys run. */
static json_object *worker_config_doc(struct worker *w)
{
	pthread_mutex_lock(&w->cfg_mu);
	if (!w->cfg_json_done && w->cfg.cluster) {
		w->cfg_json = abi_schema_parse_doc(w->cfg.cluster, (size_t)w->cfg.cluster_len);
		w->cfg_json_done = true;
	}
	json_object *doc = w->cfg_json;
	pthread_mutex_unlock(&w->cfg_mu);
	return doc;
}

/* worker_config_default - the schema's default for path, or NULL */
static json_object *worker_config_default(struct worker *w, const char *path)
{
	const struct lh_config_field *f = abi_schema_find(&w->desc, path);
	if (!f || !f->def)
		return NULL;
	uint32_t i = (uint32_t)(((const char *)f - (const char *)w->desc.config_fields) /
	                        w->desc.config_field_size);
	json_object *def = NULL;
	pthread_mutex_lock(&w->cfg_mu); /* as worker_config_doc */
	if (!w->schema_defs)
		w->schema_defs = calloc(w->desc.n_config_fields, sizeof(*w->schema_defs));
	if (w->schema_defs && !w->schema_defs[i])
		w->schema_defs[i] = abi_schema_parse(f->def, strlen(f->def));
	if (w->schema_defs)
		def = w->schema_defs[i];
	pthread_mutex_unlock(&w->cfg_mu);
	return def;
}

/* worker_config_value - the value at path of the given type, or NULL (the
 * caller's def): the document's, else the schema's default. A value of
 * another type is logged and named in last_error. */
static json_object *worker_config_value(struct lh_ctx *ctx, const char *path, uint32_t type)
{
	struct worker *w = worker_from_ctx(ctx);
	if (!worker_on_own_thread(w) || !path)
		return NULL;
	json_object *v = abi_schema_lookup(worker_config_doc(w), path);
	if (!v)
		v = worker_config_default(w, path);
	if (!v)
		return NULL;
	struct lh_config_field f = {.path = path, .type = type};
	char why[300];
	/* the check prints a mismatched v into json-c's buffer inside v, which
	 * concurrent reconcile_key calls share: one at a time */
	pthread_mutex_lock(&w->cfg_mu);
	int ok = abi_schema_value_ok(&f, path, v, why, sizeof(why));
	pthread_mutex_unlock(&w->cfg_mu);
	if (ok < 0) {
		worker_api_txn_fail(w, "configuration %s; the default is used", why);
		ctx->host->log(ctx, LH_LOG_WARN, ctx->host->last_error(ctx));
		return NULL;
	}
	return v;
}

static const char *worker_config_string(struct lh_ctx *ctx, const char *path, const char *def)
{
	json_object *v = worker_config_value(ctx, path, LH_CONFIG_STRING);
	return v ? json_object_get_string(v) : def;
}

static int64_t worker_config_int(struct lh_ctx *ctx, const char *path, int64_t def)
{
	json_object *v = worker_config_value(ctx, path, LH_CONFIG_INT);
	return v ? json_object_get_int64(v) : def;
}

static int32_t worker_config_bool(struct lh_ctx *ctx, const char *path, int32_t def)
{
	json_object *v = worker_config_value(ctx, path, LH_CONFIG_BOOL);
	return v ? (json_object_get_boolean(v) ? 1 : 0) : def;
}

static int64_t worker_config_duration_ms(struct lh_ctx *ctx, const char *path, int64_t def)
{
	json_object *v = worker_config_value(ctx, path, LH_CONFIG_DURATION);
	int64_t ms;
	return v && abi_schema_duration_ms(v, &ms) == 0 ? ms : def;
}

static uint32_t worker_config_strings(struct lh_ctx *ctx, const char *path,
                                      const char *const **ret_items)
{
	json_object *v = worker_config_value(ctx, path, LH_CONFIG_STRINGS);
	size_t n = v ? json_object_array_length(v) : 0;
	const char **items = n ? worker_arena_alloc(worker_from_ctx(ctx), n * sizeof(*items)) : NULL;
	if (ret_items)
		*ret_items = items;
	if (!items)
		return 0;
	for (size_t i = 0; i < n; i++)
		items[i] = json_object_get_string(json_object_array_get_idx(v, i));
	return (uint32_t)n;
}

/* api->alloc: the callback's arena (it is here beside the one other user
 * of the arena in the API, config_strings) */
static void *worker_config_api_alloc(struct lh_ctx *ctx, uint64_t size)
{
	struct worker *w = worker_from_ctx(ctx);
	if (!worker_on_own_thread(w) || size == 0 || size > (1u << 30))
		return NULL;
	return worker_arena_alloc(w, (size_t)size);
}

void worker_config_api_init(struct worker *w)
{
	w->api.alloc = worker_config_api_alloc;
	w->api.config_string = worker_config_string;
	w->api.config_int = worker_config_int;
	w->api.config_bool = worker_config_bool;
	w->api.config_duration_ms = worker_config_duration_ms;
	w->api.config_strings = worker_config_strings;
}
