/* SPDX-License-Identifier: MIT */
/*
 * invariants_internal.h - what the invariant checker's files share: the
 * example plugin's key layout, its journal record format, the lives of
 * election keys and the replayed end state (see invariants.h for the
 * checks). Pure functions over an inv_history; pointers returned point into
 * it and live as long as it does.
 */
#ifndef LH_TEST_INVARIANTS_INTERNAL_H
#define LH_TEST_INVARIANTS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "invariants.h"

/* the keys of plugin N under prefix P */
struct keys {
	char journal[300];  /* P/N/data/journal/ */
	char election[300]; /* P/N/election/ */
	char status[300];   /* P/N/status */
	char config[300];   /* P/N/data/config/ */
	char items[300];    /* P/N/data/config/items/ */
	char schema[300];   /* P/N/data/config/schema */
	char data[300];	    /* P/N/data/ */
	char desired[300];  /* P/N/data/desired/ (inputs) */
	char out[300];	    /* P/N/data/out/ (outputs) */
	char paused[300];   /* P/N/paused */
	char settings[300]; /* P/N/config (the plugin's cluster configuration) */
};

/* inv_make_keys - the keys of plugin under prefix (a trailing '/' or none) */
void inv_make_keys(const char *prefix, const char *plugin, struct keys *k);
/* inv_starts - s begins with p */
bool inv_starts(const char *s, const char *p);

/* a journal record, parsed */
struct jparsed {
	int64_t key_token;
	uint64_t counter;
	int64_t token;
	char node[64];
	char release[16];
	unsigned items;
};

/* inv_parse_journal - the record e whose key ends in suffix (the part after
 * P/N/data/journal/) into *ret; false, with *why set, when it does not fit
 * the format */
bool inv_parse_journal(const char *suffix, const struct inv_event *e, struct jparsed *ret,
		       const char **why);

/* an election key's life */
struct life {
	const char *key;
	const char *node;	  /* the key's value */
	int64_t created, deleted; /* deleted: INT64_MAX while alive */
};

/* inv_lives_of - every election key's life in h (malloc'd: the caller frees;
 * *ret_n entries) */
struct life *inv_lives_of(const struct inv_history *h, const struct keys *k, size_t *ret_n);
/* inv_keys_and_lives - the start the checks over election terms share: the
 * keys of plugin under prefix into *k and every election key's life in h
 * (as inv_lives_of: malloc'd, *ret_n entries, the caller frees) */
struct life *inv_keys_and_lives(const struct inv_history *h, const char *prefix,
				const char *plugin, struct keys *k, size_t *ret_n);
/* a check of one event, h->ev[i], against the election terms lv (n of
 * them) of the plugin whose keys are k: the number of violations it printed */
typedef int inv_event_check(const struct inv_history *h, size_t i, const struct keys *k,
			    const struct life *lv, size_t n);
/* inv_check_each_event - check run on every event of h in order, with the
 * keys and terms of plugin under prefix worked out once: the sum of what
 * it returned (the checks that look at one event at a time share this
 * scan) */
int inv_check_each_event(const struct inv_history *h, const char *prefix, const char *plugin,
			 inv_event_check *check);
/* inv_life_of_token - the life created at revision token, or NULL */
const struct life *inv_life_of_token(const struct life *lv, size_t n, int64_t token);

/* inv_replay - the end state: the last event of every key that is a PUT,
 * sorted by key; returns the count, *ret malloc'd (the caller frees) */
size_t inv_replay(const struct inv_history *h, const struct inv_event ***ret);
/* inv_find_key - key in a replayed state, or NULL */
const struct inv_event *inv_find_key(const struct inv_event *const *v, size_t n, const char *key);

/* one violation: printed as one line; counts into the caller's `bad` */
#define VIOL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "INVARIANT VIOLATED " __VA_ARGS__);                                \
		fputc('\n', stderr);                                                               \
		bad++;                                                                             \
	} while (0)

#endif
