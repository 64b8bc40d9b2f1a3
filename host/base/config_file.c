/* SPDX-License-Identifier: MIT */
/*
 * config_file.c - the YAML configuration file (see config_file.h).
 *
 * Two passes over the text: libyaml's event parser first, only to refuse
 * aliases (a document may expand them without bound) and deep nesting
 * before anything is built, then its document API, whose nodes carry the
 * marks the errors quote.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/config_file.h"

#define MAX_DEPTH 16
#define MAX_PAIRS 4096 /* keys of one mapping (the duplicate check is quadratic) */

struct decoder {
	const char *path;
	const struct config_schema *schema;
	yaml_document_t *doc;
	struct config_file *cf;
	size_t cap;
	char *err;
	size_t err_len;
};

static int config_file_fail(struct decoder *d, const yaml_mark_t *mark, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int config_file_fail(struct decoder *d, const yaml_mark_t *mark, const char *fmt, ...)
{
	char what[CONFIG_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(d->err, d->err_len, "%s:%zu: %s", d->path, mark->line + 1, what);
	return -EINVAL;
}

static const char *config_file_scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* a plain ~, null or empty scalar: YAML's null, which no flag takes */
static bool config_file_is_null(const yaml_node_t *n)
{
	if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *s = config_file_scalar(n);
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	       strcmp(s, "NULL") == 0;
}

/* a scalar usable as a flag argument; `what` names it in errors */
static int config_file_check_scalar(struct decoder *d, const yaml_node_t *n, const char *what)
{
	if (n->type != YAML_SCALAR_NODE)
		return config_file_fail(d, &n->start_mark, "%s takes a single value, not a %s", what,
			    n->type == YAML_MAPPING_NODE ? "mapping" : "list");
	if (config_file_is_null(n))
		return config_file_fail(d, &n->start_mark, "%s needs a value", what);
	if (strlen(config_file_scalar(n)) != n->data.scalar.length)
		return config_file_fail(d, &n->start_mark, "%s: a value must not contain a NUL byte", what);
	return 0;
}

/* add - one setting of key `what`: --flag prefix+a[+"="+b] from the given line */
static int config_file_add(struct decoder *d, const char *what, const char *flag, const char *prefix,
	       const char *a, const char *b, const yaml_mark_t *mark)
{
	struct config_file *cf = d->cf;
	if (cf->n_settings >= CONFIG_FILE_MAX_SETTINGS)
		return config_file_fail(d, mark, "more than %d settings", CONFIG_FILE_MAX_SETTINGS);
	if (cf->n_settings == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct config_setting *s = realloc(cf->settings, cap * sizeof(*s));
		if (!s)
			goto oom;
		cf->settings = s;
		d->cap = cap;
	}
	size_t len = strlen(prefix) + strlen(a) + (b ? 1 + strlen(b) : 0) + 1;
	char *v = malloc(len), *key = strdup(what);
	if (!v || !key) {
		free(v);
		free(key);
		goto oom;
	}
	snprintf(v, len, "%s%s%s%s", prefix, a, b ? "=" : "", b ? b : "");
	cf->settings[cf->n_settings++] = (struct config_setting){
		.flag = flag, .key = key, .value = v, .line = (unsigned)mark->line + 1};
	return 0;
oom:
	snprintf(d->err, d->err_len, "%s: out of memory", d->path);
	return -ENOMEM;
}

/* the keys of mapping m, each a scalar, none twice */
static int config_file_check_keys(struct decoder *d, const yaml_node_t *m, const char *what)
{
	const yaml_node_pair_t *first = m->data.mapping.pairs.start;
	const yaml_node_pair_t *top = m->data.mapping.pairs.top;
	if (top - first > MAX_PAIRS)
		return config_file_fail(d, &m->start_mark, "%s has more than %d keys", what, MAX_PAIRS);
	for (const yaml_node_pair_t *p = first; p < top; p++) {
		const yaml_node_t *k = yaml_document_get_node(d->doc, p->key);
		if (k->type != YAML_SCALAR_NODE || config_file_is_null(k) ||
		    strlen(config_file_scalar(k)) != k->data.scalar.length)
			return config_file_fail(d, &k->start_mark, "a key in %s must be a plain name", what);
		for (const yaml_node_pair_t *q = first; q < p; q++) {
			const yaml_node_t *o = yaml_document_get_node(d->doc, q->key);
			if (strcmp(config_file_scalar(o), config_file_scalar(k)) == 0)
				return config_file_fail(d, &k->start_mark, "duplicate key '%s' in %s (first on line %zu)",
					    config_file_scalar(k), what, o->start_mark.line + 1);
		}
	}
	return 0;
}

/* value - the value node v of key `what` (flag `flag`, shape `kind`) as
 * settings --flag prefix+... */
static int config_file_value(struct decoder *d, const char *what, const char *flag, enum config_key_kind kind,
		 const char *prefix, const yaml_node_t *v)
{
	int r;

	if (v->type == YAML_SCALAR_NODE || kind == CONFIG_KEY_SCALAR) {
		if ((r = config_file_check_scalar(d, v, what)) < 0)
			return r;
		return config_file_add(d, what, flag, prefix, config_file_scalar(v), NULL, &v->start_mark);
	}
	if (v->type == YAML_SEQUENCE_NODE) {
		const yaml_node_item_t *i = v->data.sequence.items.start;
		const yaml_node_item_t *top = v->data.sequence.items.top;
		if (i == top)
			return config_file_fail(d, &v->start_mark, "%s: an empty list", what);
		if (kind == CONFIG_KEY_JOINED) {
			size_t len = 1;
			for (const yaml_node_item_t *j = i; j < top; j++) {
				const yaml_node_t *e = yaml_document_get_node(d->doc, *j);
				if ((r = config_file_check_scalar(d, e, what)) < 0)
					return r;
				if (strchr(config_file_scalar(e), ','))
					return config_file_fail(d, &e->start_mark, "%s: a list item must not contain ','",
						    what);
				len += e->data.scalar.length + 1;
			}
			char *joined = malloc(len);
			if (!joined) {
				snprintf(d->err, d->err_len, "%s: out of memory", d->path);
				return -ENOMEM;
			}
			size_t at = 0;
			for (const yaml_node_item_t *j = i; j < top; j++) {
				const yaml_node_t *e = yaml_document_get_node(d->doc, *j);
				if (j > i)
					joined[at++] = ',';
				memcpy(joined + at, config_file_scalar(e), e->data.scalar.length);
				at += e->data.scalar.length;
			}
			joined[at] = '\0';
			r = config_file_add(d, what, flag, prefix, joined, NULL, &v->start_mark);
			free(joined);
			return r;
		}
		for (; i < top; i++) {
			const yaml_node_t *e = yaml_document_get_node(d->doc, *i);
			if ((r = config_file_check_scalar(d, e, what)) < 0 ||
			    (r = config_file_add(d, what, flag, prefix, config_file_scalar(e), NULL, &e->start_mark)) < 0)
				return r;
		}
		return 0;
	}
	/* a mapping */
	if (kind != CONFIG_KEY_RULES)
		return config_file_fail(d, &v->start_mark, "%s takes a value or a list, not a mapping", what);
	if ((r = config_file_check_keys(d, v, what)) < 0)
		return r;
	for (const yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *k = yaml_document_get_node(d->doc, p->key);
		const yaml_node_t *e = yaml_document_get_node(d->doc, p->value);
		if ((r = config_file_check_scalar(d, e, what)) < 0 ||
		    (r = config_file_add(d, what, flag, prefix, config_file_scalar(k), config_file_scalar(e), &e->start_mark)) < 0)
			return r;
	}
	return 0;
}

static const struct config_key *config_file_find_key(const struct config_schema *s, const char *name)
{
	for (size_t i = 0; i < s->n_keys; i++)
		if (strcmp(s->keys[i].name, name) == 0)
			return &s->keys[i];
	return NULL;
}

static const struct config_plugin_key *config_file_find_plugin_key(const struct config_schema *s,
						       const char *name)
{
	for (size_t i = 0; i < s->n_plugin_keys; i++)
		if (strcmp(s->plugin_keys[i].key, name) == 0)
			return &s->plugin_keys[i];
	return NULL;
}

/* plugins: {NAME: {KEY: VALUE}} */
static int config_file_plugins(struct decoder *d, const yaml_node_t *m)
{
	int r;

	if (m->type != YAML_MAPPING_NODE)
		return config_file_fail(d, &m->start_mark, "plugins takes a mapping of plugin names to settings");
	if ((r = config_file_check_keys(d, m, "plugins")) < 0)
		return r;
	for (const yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *k = yaml_document_get_node(d->doc, p->key);
		const yaml_node_t *sec = yaml_document_get_node(d->doc, p->value);
		const char *name = config_file_scalar(k);
		char what[128], prefix[128];
		if (strpbrk(name, ":=,") || strlen(name) > 64)
			return config_file_fail(d, &k->start_mark, "'%.64s' is not a plugin name", name);
		snprintf(what, sizeof(what), "plugins: %s", name);
		if (sec->type != YAML_MAPPING_NODE)
			return config_file_fail(d, &sec->start_mark, "%s takes a mapping of settings", what);
		if ((r = config_file_check_keys(d, sec, what)) < 0)
			return r;
		for (const yaml_node_pair_t *q = sec->data.mapping.pairs.start;
		     q < sec->data.mapping.pairs.top; q++) {
			const yaml_node_t *kk = yaml_document_get_node(d->doc, q->key);
			const struct config_plugin_key *pk = config_file_find_plugin_key(d->schema, config_file_scalar(kk));
			if (!pk)
				return config_file_fail(d, &kk->start_mark, "unknown key '%s' in %s", config_file_scalar(kk), what);
			snprintf(what, sizeof(what), "plugins: %s: %s", name, pk->key);
			snprintf(prefix, sizeof(prefix), "%s%c", name, pk->sep);
			if ((r = config_file_value(d, what, pk->flag, pk->kind, prefix,
				       yaml_document_get_node(d->doc, q->value))) < 0)
				return r;
			snprintf(what, sizeof(what), "plugins: %s", name);
		}
	}
	return 0;
}

static int config_file_root(struct decoder *d, const yaml_node_t *m)
{
	int r;

	if (m->type != YAML_MAPPING_NODE)
		return config_file_fail(d, &m->start_mark, "the file must be a mapping of settings (key: value)");
	if ((r = config_file_check_keys(d, m, "the file")) < 0)
		return r;
	for (const yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *k = yaml_document_get_node(d->doc, p->key);
		const yaml_node_t *v = yaml_document_get_node(d->doc, p->value);
		if (strcmp(config_file_scalar(k), "plugins") == 0) {
			if ((r = config_file_plugins(d, v)) < 0)
				return r;
			continue;
		}
		const struct config_key *key = config_file_find_key(d->schema, config_file_scalar(k));
		if (!key)
			return config_file_fail(d, &k->start_mark, "unknown key '%.80s'", config_file_scalar(k));
		if (key->kind == CONFIG_KEY_NONE)
			return config_file_fail(d, &k->start_mark, "'%s' is a command-line flag only", key->name);
		if ((r = config_file_value(d, key->name, key->name, key->kind, "", v)) < 0)
			return r;
	}
	return 0;
}

static int config_file_syntax_error(struct decoder *d, const yaml_parser_t *p)
{
	if (p->error == YAML_MEMORY_ERROR) {
		snprintf(d->err, d->err_len, "%s: out of memory", d->path);
		return -ENOMEM;
	}
	const char *problem = p->problem ? p->problem : "malformed YAML";
	if (p->context)
		return config_file_fail(d, &p->problem_mark, "YAML syntax: %s %s (line %zu)", problem, p->context,
			    p->context_mark.line + 1);
	return config_file_fail(d, &p->problem_mark, "YAML syntax: %s", problem);
}

/* the first pass: no alias, no deep nesting, one document at most */
static int config_file_screen(struct decoder *d, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, docs = 0, r = 0;
	bool done = false;

	if (!yaml_parser_initialize(&p)) {
		snprintf(d->err, d->err_len, "%s: out of memory", d->path);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (!done && r == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			r = config_file_syntax_error(d, &p);
			break;
		}
		switch (ev.type) {
		case YAML_ALIAS_EVENT:
			r = config_file_fail(d, &ev.start_mark, "aliases (*name) are not supported");
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				r = config_file_fail(d, &ev.start_mark, "the file must hold one YAML document");
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > MAX_DEPTH)
				r = config_file_fail(d, &ev.start_mark, "nested deeper than %d levels", MAX_DEPTH);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return r;
}

void config_file_free(struct config_file *cf)
{
	if (!cf)
		return;
	for (size_t i = 0; i < cf->n_settings; i++) {
		free(cf->settings[i].key);
		free(cf->settings[i].value);
	}
	free(cf->settings);
	free(cf->path);
	free(cf);
}

int config_file_decode(const char *path, const char *buf, size_t len,
		       const struct config_schema *schema, struct config_file **ret, char *err,
		       size_t err_len)
{
	struct decoder d = {.path = path, .schema = schema, .err = err, .err_len = err_len};
	yaml_parser_t p;
	yaml_document_t doc;
	int r;

	if (len > CONFIG_FILE_MAX_BYTES) {
		snprintf(err, err_len, "%s: larger than %d bytes", path, CONFIG_FILE_MAX_BYTES);
		return -EINVAL;
	}
	if ((r = config_file_screen(&d, buf, len)) < 0)
		return r;
	d.cf = calloc(1, sizeof(*d.cf));
	if (!d.cf || !(d.cf->path = strdup(path)) || !yaml_parser_initialize(&p)) {
		config_file_free(d.cf);
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	if (!yaml_parser_load(&p, &doc)) {
		r = config_file_syntax_error(&d, &p);
	} else {
		d.doc = &doc;
		yaml_node_t *top = yaml_document_get_root_node(&doc);
		if (top)
			r = config_file_root(&d, top);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&p);
	if (r < 0) {
		config_file_free(d.cf);
		return r;
	}
	*ret = d.cf;
	return 0;
}

int config_file_load(const char *path, const struct config_schema *schema,
		     struct config_file **ret, char *err, size_t err_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), r; /* a FIFO must not block us */
	struct stat st;
	char *buf = NULL;
	size_t len = 0;

	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		snprintf(err, err_len, "%s: not a regular file", path);
		goto out;
	}
	/* read to EOF: the size may change under us; one byte more than the
	 * limit tells a file that is too large */
	buf = malloc(CONFIG_FILE_MAX_BYTES + 1);
	if (!buf) {
		r = -ENOMEM;
		snprintf(err, err_len, "%s: out of memory", path);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, CONFIG_FILE_MAX_BYTES + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			snprintf(err, err_len, "%s: cannot read: %s", path, strerror(-r));
			goto out;
		}
		if (n == 0 || (len += (size_t)n) > CONFIG_FILE_MAX_BYTES)
			break;
	}
	r = config_file_decode(path, buf, len, schema, ret, err, err_len);
out:
	free(buf);
	close(fd);
	return r;
}
