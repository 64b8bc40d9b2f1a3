/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"

/* 1 ms .. 10 s: an etcd round trip on a healthy cluster is milliseconds; a
 * request near its 5 s deadline must still land in a finite bucket */
const double metrics_bounds_request[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,   0.25,   0.5,   1,    2.5,   5,    10};
const size_t metrics_n_bounds_request =
    sizeof(metrics_bounds_request) / sizeof(metrics_bounds_request[0]);

const double metrics_bounds_bus[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                     0.005,   0.01,   0.025,   0.05,   0.1,   0.25};
const size_t metrics_n_bounds_bus = sizeof(metrics_bounds_bus) / sizeof(metrics_bounds_bus[0]);

void metrics_hist_add(struct metrics_hist *dst, const struct metrics_hist *src)
{
	if (dst->n_bounds != src->n_bounds)
		return; /* different bounds do not add up: keep dst as it is */
	for (size_t i = 0; i <= src->n_bounds && i <= METRICS_HIST_MAX_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->sum += src->sum;
	dst->count += src->count;
}

void metrics_hist_init(struct metrics_hist *h, const double *bounds, size_t n_bounds)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n_bounds = n_bounds > METRICS_HIST_MAX_BUCKETS ? METRICS_HIST_MAX_BUCKETS : n_bounds;
}

void metrics_hist_observe(struct metrics_hist *h, double v)
{
	if (!(v > 0)) /* also NaN */
		v = 0;
	size_t i = 0;
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

static void metrics_put(struct metrics_text *t, const char *s, size_t n)
{
	if (t->failed)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *nb = realloc(t->buf, cap);
		if (!nb) {
			t->failed = true;
			return;
		}
		t->buf = nb;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = 0;
}

static void metrics_puts_(struct metrics_text *t, const char *s)
{
	metrics_put(t, s, strlen(s));
}

static void metrics_put_value(struct metrics_text *t, double v)
{
	char b[64];
	if (isnan(v))
		snprintf(b, sizeof(b), "NaN");
	else if (isinf(v))
		snprintf(b, sizeof(b), v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0) /* exact integers as such */
		snprintf(b, sizeof(b), "%.0f", v);
	else
		snprintf(b, sizeof(b), "%.17g", v);
	metrics_puts_(t, b);
}

/* label values come from outside (plugin names, releases): escape them */
static void metrics_put_label_value(struct metrics_text *t, const char *v)
{
	for (const char *p = v ? v : ""; *p; p++) {
		if (*p == '\\')
			metrics_puts_(t, "\\\\");
		else if (*p == '"')
			metrics_puts_(t, "\\\"");
		else if (*p == '\n')
			metrics_puts_(t, "\\n");
		else
			metrics_put(t, p, 1);
	}
}

static void metrics_put_labels(struct metrics_text *t, const struct metrics_label *labels, size_t n,
                       const char *le)
{
	if (!n && !le)
		return;
	metrics_puts_(t, "{");
	for (size_t i = 0; i < n; i++) {
		if (i)
			metrics_puts_(t, ",");
		metrics_puts_(t, labels[i].name);
		metrics_puts_(t, "=\"");
		metrics_put_label_value(t, labels[i].value);
		metrics_puts_(t, "\"");
	}
	if (le) {
		if (n)
			metrics_puts_(t, ",");
		metrics_puts_(t, "le=\"");
		metrics_puts_(t, le);
		metrics_puts_(t, "\"");
	}
	metrics_puts_(t, "}");
}

void metrics_family(struct metrics_text *t, const char *name, const char *type, const char *help)
{
	metrics_puts_(t, "# HELP ");
	metrics_puts_(t, name);
	metrics_puts_(t, " ");
	metrics_puts_(t, help); /* constants of ours: no escaping needed */
	metrics_puts_(t, "\n# TYPE ");
	metrics_puts_(t, name);
	metrics_puts_(t, " ");
	metrics_puts_(t, type);
	metrics_puts_(t, "\n");
}

static void metrics_write_sample(struct metrics_text *t, const char *name, const char *suffix,
                   const struct metrics_label *labels, size_t n_labels, const char *le, double v)
{
	metrics_puts_(t, name);
	metrics_puts_(t, suffix);
	metrics_put_labels(t, labels, n_labels, le);
	metrics_puts_(t, " ");
	metrics_put_value(t, v);
	metrics_puts_(t, "\n");
}

void metrics_sample(struct metrics_text *t, const char *name, const struct metrics_label *labels,
                    size_t n_labels, double value)
{
	metrics_write_sample(t, name, "", labels, n_labels, NULL, value);
}

void metrics_sample_hist(struct metrics_text *t, const char *name,
                         const struct metrics_label *labels, size_t n_labels,
                         const struct metrics_hist *h)
{
	uint64_t cum = 0;
	char le[64];
	for (size_t i = 0; i <= h->n_bounds; i++) {
		cum += h->counts[i];
		if (i < h->n_bounds)
			snprintf(le, sizeof(le), "%g", h->bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		metrics_write_sample(t, name, "_bucket", labels, n_labels, le, (double)cum);
	}
	metrics_write_sample(t, name, "_sum", labels, n_labels, NULL, h->sum);
	metrics_write_sample(t, name, "_count", labels, n_labels, NULL, (double)h->count);
}

int metrics_text_take(struct metrics_text *t, char **ret_text, size_t *ret_len)
{
	if (!t->failed && !t->buf)
		metrics_put(t, "", 0);
	if (t->failed) {
		metrics_text_reset(t);
		return -ENOMEM;
	}
	*ret_text = t->buf;
	*ret_len = t->len;
	memset(t, 0, sizeof(*t));
	return 0;
}

void metrics_text_reset(struct metrics_text *t)
{
	free(t->buf);
	memset(t, 0, sizeof(*t));
}
