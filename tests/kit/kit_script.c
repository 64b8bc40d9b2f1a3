/* SPDX-License-Identifier: MIT */
/*
 * kit_script.c - see kit_script.h. One line at a time: split into words,
 * the statement looked up in KIT_OPS, its arguments checked by shape.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/duration.h"
#include "kit_script.h"

struct kit_op_row {
	const char *word;
	int shape;
};

static const struct kit_op_row kit_script_ops[KIT_OP_COUNT] = {
#define KIT_OP_ROW(name, word, shape) [KIT_OP_##name] = {word, shape},
	KIT_OPS(KIT_OP_ROW)
#undef KIT_OP_ROW
};

/* the line being parsed: its remaining bytes and its number */
struct kit_cursor {
	const char *p, *end;
	unsigned line;
	char *err;
	size_t err_len;
};

const char *kit_op_word(enum kit_op op)
{
	return (unsigned)op < KIT_OP_COUNT ? kit_script_ops[op].word : "?";
}

static int kit_script_fail(struct kit_cursor *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int kit_script_fail(struct kit_cursor *c, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (c->line)
		snprintf(c->err, c->err_len, "line %u: %s", c->line, what);
	else
		snprintf(c->err, c->err_len, "%s", what);
	return -EINVAL;
}

static bool kit_script_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

static void kit_script_skip_blanks(struct kit_cursor *c)
{
	while (c->p < c->end && kit_script_blank(*c->p))
		c->p++;
}

/* the next word (false when the line has none left) */
static bool kit_script_word(struct kit_cursor *c, const char **ret_w, size_t *ret_n)
{
	kit_script_skip_blanks(c);
	if (c->p == c->end)
		return false;
	const char *w = c->p;
	while (c->p < c->end && !kit_script_blank(*c->p))
		c->p++;
	*ret_w = w;
	*ret_n = (size_t)(c->p - w);
	return true;
}

static int kit_script_dup(const char *s, size_t n, char **ret)
{
	char *d = malloc(n + 1);
	if (!d)
		return -ENOMEM;
	memcpy(d, s, n);
	d[n] = 0;
	*ret = d;
	return 0;
}

/* nothing may follow the arguments */
static int kit_script_end(struct kit_cursor *c, const char *op)
{
	const char *w;
	size_t n;
	if (kit_script_word(c, &w, &n))
		return kit_script_fail(c, "%s: unexpected \"%.*s\" after its arguments", op,
				       (int)(n > 64 ? 64 : n), w);
	return 0;
}

static int kit_script_key(struct kit_cursor *c, const char *op, struct kit_step *st)
{
	const char *w;
	size_t n;
	if (!kit_script_word(c, &w, &n))
		return kit_script_fail(c, "%s needs a KEY", op);
	if (n > KIT_SCRIPT_MAX_KEY)
		return kit_script_fail(c, "%s: key of %zu bytes (at most %u)", op, n,
				       KIT_SCRIPT_MAX_KEY);
	if (n == 1 && w[0] == '/')
		return kit_script_fail(c, "%s: the key \"/\" names nothing", op);
	return kit_script_dup(w, n, &st->key);
}

/* the rest of the line, exactly as written; "" alone is the empty value */
static int kit_script_rest(struct kit_cursor *c, const char *op, const char *what,
			   struct kit_step *st)
{
	kit_script_skip_blanks(c);
	size_t n = (size_t)(c->end - c->p);
	if (n == 0)
		return kit_script_fail(c, "%s needs a %s%s", op, what,
				       strcmp(what, "VALUE") == 0 ? " (\"\" for the empty value)" : "");
	if (n == 2 && c->p[0] == '"' && c->p[1] == '"')
		n = 0;
	st->value_len = n;
	int r = kit_script_dup(c->p, n, &st->value);
	c->p = c->end;
	return r;
}

static int kit_script_host(struct kit_cursor *c, const char *op, int n_hosts, struct kit_step *st)
{
	const char *w;
	size_t n;
	if (!kit_script_word(c, &w, &n))
		return kit_script_fail(c, "%s needs a host number (1 to %d)", op, n_hosts);
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (w[i] < '0' || w[i] > '9' || v > 1000) {
			v = -1;
			break;
		}
		v = v * 10 + (w[i] - '0');
	}
	if (v < 1 || v > n_hosts)
		return kit_script_fail(c, "%s: host \"%.*s\" is not a number from 1 to %d", op,
				       (int)(n > 16 ? 16 : n), w, n_hosts);
	st->host = (int)v;
	return 0;
}

static int kit_script_file(struct kit_cursor *c, const char *op, struct kit_step *st)
{
	const char *w;
	size_t n;
	if (!kit_script_word(c, &w, &n))
		return kit_script_fail(c, "%s needs a plugin FILE", op);
	if (n > 4096)
		return kit_script_fail(c, "%s: file name of %zu bytes", op, n);
	st->value_len = n;
	return kit_script_dup(w, n, &st->value);
}

/* a word of at most 63 bytes, NUL-terminated into buf */
static int kit_script_small_word(struct kit_cursor *c, const char *op, const char *what,
				 char buf[64])
{
	const char *w;
	size_t n;
	if (!kit_script_word(c, &w, &n))
		return kit_script_fail(c, "%s needs a %s", op, what);
	if (n > 63)
		return kit_script_fail(c, "%s: \"%.32s...\" is not a %s", op, w, what);
	memcpy(buf, w, n);
	buf[n] = 0;
	return 0;
}

static int kit_script_json(struct kit_cursor *c, const char *op, struct kit_step *st)
{
	int r = kit_script_rest(c, op, "JSON object", st);
	if (r < 0)
		return r;
	struct json_tokener *tok = json_tokener_new();
	if (!tok)
		return -ENOMEM;
	json_object *o = json_tokener_parse_ex(tok, st->value, (int)st->value_len);
	bool whole = o && json_tokener_get_error(tok) == json_tokener_success &&
		     (size_t)json_tokener_get_parse_end(tok) == st->value_len;
	bool object = whole && json_object_is_type(o, json_type_object);
	json_object_put(o);
	json_tokener_free(tok);
	if (!object)
		return kit_script_fail(c, "%s: not a JSON object: %.64s", op, st->value);
	return 0;
}

/* the arguments of st->op, by its shape */
static int kit_script_args(struct kit_cursor *c, int n_hosts, struct kit_step *st)
{
	const char *op = kit_script_ops[st->op].word;
	char word[64];
	int r = 0;
	switch (kit_script_ops[st->op].shape) {
	case KIT_ARGS_NONE:
		break;
	case KIT_ARGS_KEY:
		r = kit_script_key(c, op, st);
		break;
	case KIT_ARGS_KEY_VALUE:
		r = kit_script_key(c, op, st);
		if (r == 0)
			r = kit_script_rest(c, op, "VALUE", st);
		break;
	case KIT_ARGS_HOST:
		r = kit_script_host(c, op, n_hosts, st);
		break;
	case KIT_ARGS_FILE:
		r = kit_script_file(c, op, st);
		break;
	case KIT_ARGS_HOST_FILE:
		r = kit_script_host(c, op, n_hosts, st);
		if (r == 0)
			r = kit_script_file(c, op, st);
		break;
	case KIT_ARGS_RELEASE:
		r = kit_script_small_word(c, op, "release (MAJOR.MINOR.PATCH)", word);
		if (r == 0 && release_parse(word, &st->release) < 0)
			r = kit_script_fail(c, "%s: \"%s\" is not a release (MAJOR.MINOR.PATCH)", op,
					    word);
		break;
	case KIT_ARGS_JSON:
		r = kit_script_json(c, op, st);
		break;
	case KIT_ARGS_DURATION:
		r = kit_script_small_word(c, op, "duration (30s, 500ms, 2m)", word);
		if (r == 0 && (duration_parse(word, &st->duration_ns) < 0 || st->duration_ns == 0))
			r = kit_script_fail(c, "%s: \"%s\" is not a positive duration (30s, 500ms, 2m)",
					    op, word);
		break;
	}
	if (r == 0)
		r = kit_script_end(c, op);
	return r;
}

static void kit_script_step_clear(struct kit_step *st)
{
	free(st->key);
	free(st->value);
	memset(st, 0, sizeof(*st));
}

/* one line: 1 a statement into *st, 0 nothing (blank, comment), <0 refused */
static int kit_script_line(struct kit_cursor *c, int n_hosts, struct kit_step *st)
{
	for (const char *q = c->p; q < c->end; q++) {
		unsigned char ch = (unsigned char)*q;
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return kit_script_fail(c, "control byte 0x%02x", ch);
	}
	const char *w;
	size_t n;
	if (!kit_script_word(c, &w, &n) || w[0] == '#')
		return 0;
	memset(st, 0, sizeof(*st));
	st->line = c->line;
	unsigned op;
	for (op = 0; op < KIT_OP_COUNT; op++)
		if (strlen(kit_script_ops[op].word) == n && memcmp(kit_script_ops[op].word, w, n) == 0)
			break;
	if (op == KIT_OP_COUNT)
		return kit_script_fail(c, "unknown statement \"%.*s\"", (int)(n > 32 ? 32 : n), w);
	st->op = (enum kit_op)op;
	int r = kit_script_args(c, n_hosts, st);
	if (r < 0) {
		kit_script_step_clear(st);
		return r;
	}
	return 1;
}

void kit_script_free(struct kit_script *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_steps; i++)
		kit_script_step_clear(&s->steps[i]);
	free(s->steps);
	free(s);
}

int kit_script_parse(const char *text, size_t len, int n_hosts, struct kit_script **ret,
		     char *err, size_t err_len)
{
	struct kit_cursor c = {.err = err, .err_len = err_len};
	if (len > KIT_SCRIPT_MAX_BYTES)
		return kit_script_fail(&c, "the script has %zu bytes (at most %u)", len,
				       KIT_SCRIPT_MAX_BYTES);
	struct kit_script *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	const char *p = text, *end = text + len;
	size_t cap = 0;
	int r = 0;
	for (unsigned line = 1; p < end && r >= 0; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		c = (struct kit_cursor){.p = p, .end = le, .line = line, .err = err, .err_len = err_len};
		p = nl ? nl + 1 : end;
		if ((size_t)(le - c.p) > KIT_SCRIPT_MAX_LINE) {
			r = kit_script_fail(&c, "line of %zu bytes (at most %u)", (size_t)(le - c.p),
					    KIT_SCRIPT_MAX_LINE);
			break;
		}
		if (c.end > c.p && c.end[-1] == '\r')
			c.end--;
		struct kit_step st;
		r = kit_script_line(&c, n_hosts, &st);
		if (r <= 0)
			continue;
		if (s->n_steps == KIT_SCRIPT_MAX_STEPS) {
			kit_script_step_clear(&st);
			r = kit_script_fail(&c, "more than %u statements", KIT_SCRIPT_MAX_STEPS);
			break;
		}
		if (s->n_steps == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct kit_step *ns = realloc(s->steps, ncap * sizeof(*ns));
			if (!ns) {
				kit_script_step_clear(&st);
				r = -ENOMEM;
				break;
			}
			s->steps = ns;
			cap = ncap;
		}
		s->steps[s->n_steps++] = st;
	}
	if (r < 0) {
		kit_script_free(s);
		return r;
	}
	*ret = s;
	return 0;
}
