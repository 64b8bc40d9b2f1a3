/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - Prometheus text exposition (format 0.0.4): fixed-bucket
 * histograms and the rendering of metric families into one text buffer.
 *
 * Design notes
 * - Nothing here is thread-safe: the owner (the host loop) updates and
 *   renders; the rendered text is what crosses threads (http.h).
 * - A family is written as a whole: metrics_family() writes its HELP and
 *   TYPE lines, then the caller writes every sample of it (all label sets)
 *   before starting the next family, as the format requires.
 * - Histograms have fixed upper bounds chosen by the owner (in base units:
 *   seconds); the +Inf bucket, _sum and _count are rendered here. Buckets
 *   are stored non-cumulative and summed when rendered.
 * - Label values are escaped (\\, \", \n); names are the caller's constants.
 * - Output errors are sticky: after a failed allocation every later call is
 *   a no-op and metrics_text_take() reports -ENOMEM.
 */
#ifndef LH_METRICS_H
#define LH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_HIST_MAX_BUCKETS 16

struct metrics_hist {
	const double *bounds; /* ascending upper bounds (static), n_bounds of them */
	size_t n_bounds;      /* <= METRICS_HIST_MAX_BUCKETS */
	uint64_t counts[METRICS_HIST_MAX_BUCKETS + 1]; /* the last one is +Inf */
	double sum;
	uint64_t count;
};

/* bucket bounds (seconds) for etcd round trips and plugin callbacks */
extern const double metrics_bounds_request[];
extern const size_t metrics_n_bounds_request;
/* bucket bounds (seconds) for the host <-> plugin bus (tens of us to ms) */
extern const double metrics_bounds_bus[];
extern const size_t metrics_n_bounds_bus;

/* metrics_hist_init - an empty histogram over bounds (borrowed: static). */
void metrics_hist_init(struct metrics_hist *h, const double *bounds, size_t n_bounds);
/* metrics_hist_observe - count one value (seconds; negative counts as 0). */
void metrics_hist_observe(struct metrics_hist *h, double v);
/* metrics_hist_add - add src's counts and sum into dst (same bounds). */
void metrics_hist_add(struct metrics_hist *dst, const struct metrics_hist *src);

/* A growing text buffer. */
struct metrics_text {
	char *buf;
	size_t len, cap;
	bool failed;
};

/* metrics_family - start a family: "# HELP name help" and "# TYPE name type"
 * (type: "counter", "gauge", "histogram"). */
void metrics_family(struct metrics_text *t, const char *name, const char *type, const char *help);

/* A sample's labels: up to 3 name/value pairs; a NULL name ends them. */
struct metrics_label {
	const char *name;
	const char *value;
};

/* metrics_sample - one line "name{labels} value". labels may be NULL. */
void metrics_sample(struct metrics_text *t, const char *name, const struct metrics_label *labels,
                    size_t n_labels, double value);
/* metrics_sample_hist - the _bucket lines (cumulative, le="..." last), _sum
 * and _count of a histogram under `name`. */
void metrics_sample_hist(struct metrics_text *t, const char *name,
                         const struct metrics_label *labels, size_t n_labels,
                         const struct metrics_hist *h);

/* metrics_text_take - the text (NUL-terminated, malloc'd; the caller frees)
 * and its length; t is empty afterwards. Returns 0 or -ENOMEM (nothing is
 * returned then and t is reset). */
int metrics_text_take(struct metrics_text *t, char **ret_text, size_t *ret_len);
/* metrics_text_reset - free what t holds. */
void metrics_text_reset(struct metrics_text *t);

#endif
