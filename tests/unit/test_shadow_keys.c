/* SPDX-License-Identifier: MIT */
/*
 * test_shadow_keys.c - the keys of a keyed plugin's shadow run
 * (host/runtime/runtime_instance_shadow_keys.c), from the worker's answers
 * to its snapshot batches, which are hostile: an empty key, one over
 * LH_KEY_MAX, more keys than the batch had events, an answer that says its
 * keys are incomplete are each refused whole; good keys are kept once each
 * in the order first seen, at most PLUGIN_SHADOW_MAX_KEYS, then noted as
 * truncated; each key becomes one shadow EV_KEY event of the run. Also
 * random answers, checked against a plain model.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/runtime_instance_internal.h"

/* an answer carrying the n keys k[] (borrowed) */
static EventDone answer(ProtobufCBinaryData *k, size_t n)
{
	EventDone d = LEASEHOLD__BUS__EVENT_DONE__INIT;
	d.n_keys = n;
	d.keys = k;
	return d;
}

static ProtobufCBinaryData bin(const char *s)
{
	return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

/* the next key's event is `want` (NULL: none left) */
static void next_is(struct pi_shadow_keys *ks, const char *want)
{
	struct event *ev = (struct event *)1;
	CHECK_OK(pi_shadow_keys_next(ks, 7, &ev));
	if (!want) {
		CHECK(ev == NULL);
		return;
	}
	CHECK(ev != NULL);
	CHECK_INT_EQ(ev->kind, EV_KEY);
	CHECK(ev->shadow);
	CHECK_INT_EQ(ev->shadow_run, 7);
	CHECK_INT_EQ(ev->doc_len, strlen(want));
	CHECK(memcmp(ev->doc, want, ev->doc_len) == 0 && ev->doc[ev->doc_len] == 0);
	free(ev);
}

static void test_shadow_keys_once_each_in_order(void)
{
	struct pi_shadow_keys *ks = NULL;
	ProtobufCBinaryData a[] = {bin("in/b"), bin("in/a")}, b[] = {bin("in/a"), bin("in/c")};
	EventDone d = answer(a, 2);
	CHECK_OK(pi_shadow_keys_add(&ks, &d, 2));
	d = answer(b, 2);
	CHECK_OK(pi_shadow_keys_add(&ks, &d, 5));
	CHECK_INT_EQ(pi_shadow_keys_count(ks), 3);
	CHECK(!pi_shadow_keys_truncated(ks));
	next_is(ks, "in/b");
	next_is(ks, "in/a");
	next_is(ks, "in/c");
	next_is(ks, NULL);
	pi_shadow_keys_free(ks);
	/* no keys at all: no list, no event */
	ks = NULL;
	d = answer(NULL, 0);
	CHECK_OK(pi_shadow_keys_add(&ks, &d, 3));
	CHECK(ks == NULL);
	next_is(NULL, NULL);
	CHECK_INT_EQ(pi_shadow_keys_count(NULL), 0);
}

static void test_shadow_keys_hostile_answers_refused_whole(void)
{
	static char big[LH_KEY_MAX + 2];
	memset(big, 'k', LH_KEY_MAX + 1);
	struct pi_shadow_keys *ks = NULL;
	ProtobufCBinaryData empty[] = {bin("in/ok"), {0, (uint8_t *)""}};
	ProtobufCBinaryData over[] = {bin("in/ok"), bin(big)};
	ProtobufCBinaryData three[] = {bin("in/x"), bin("in/y"), bin("in/z")};
	EventDone d = answer(empty, 2);
	CHECK_INT_EQ(pi_shadow_keys_add(&ks, &d, 2), -EBADMSG);
	d = answer(over, 2);
	CHECK_INT_EQ(pi_shadow_keys_add(&ks, &d, 2), -EBADMSG);
	d = answer(three, 3);
	CHECK_INT_EQ(pi_shadow_keys_add(&ks, &d, 2), -EBADMSG); /* more keys than events */
	d = answer(three, 3);
	d.keys_incomplete = true;
	CHECK_INT_EQ(pi_shadow_keys_add(&ks, &d, 3), -EPROTO);
	CHECK(ks == NULL); /* nothing of any of them was kept */
	/* exactly LH_KEY_MAX is a key */
	big[LH_KEY_MAX] = 0;
	ProtobufCBinaryData max[] = {bin(big)};
	d = answer(max, 1);
	CHECK_OK(pi_shadow_keys_add(&ks, &d, 1));
	next_is(ks, big);
	pi_shadow_keys_free(ks);
}

static void test_shadow_keys_bounded(void)
{
	struct pi_shadow_keys *ks = NULL;
	char names[PLUGIN_SHADOW_MAX_KEYS + 10][16];
	ProtobufCBinaryData k[PLUGIN_SHADOW_MAX_KEYS + 10];
	for (size_t i = 0; i < PLUGIN_SHADOW_MAX_KEYS + 10; i++) {
		snprintf(names[i], sizeof(names[i]), "in/%zu", i);
		k[i] = bin(names[i]);
	}
	EventDone d = answer(k, PLUGIN_SHADOW_MAX_KEYS + 10);
	CHECK_OK(pi_shadow_keys_add(&ks, &d, PLUGIN_SHADOW_MAX_KEYS + 10));
	CHECK_INT_EQ(pi_shadow_keys_count(ks), PLUGIN_SHADOW_MAX_KEYS);
	CHECK(pi_shadow_keys_truncated(ks));
	for (size_t i = 0; i < PLUGIN_SHADOW_MAX_KEYS; i++)
		next_is(ks, names[i]);
	next_is(ks, NULL);
	pi_shadow_keys_free(ks);
}

/* random answers of random keys (a small alphabet, so keys repeat):
 * kept as a plain model keeps them, refusals changing nothing */
static void test_shadow_keys_random_against_model(void)
{
	srand(27);
	for (int round = 0; round < 50; round++) {
		struct pi_shadow_keys *ks = NULL;
		char model[64][8];
		size_t n_model = 0;
		for (int a = 0; a < 20; a++) {
			char names[6][8];
			ProtobufCBinaryData k[6];
			size_t n = (size_t)(rand() % 6), n_events = (size_t)(rand() % 7);
			bool bad = n > n_events;
			for (size_t i = 0; i < n; i++) {
				int len = rand() % 4; /* 0: an empty key */
				for (int c = 0; c < len; c++)
					names[i][c] = (char)('a' + rand() % 3);
				names[i][len] = 0;
				k[i] = (ProtobufCBinaryData){(size_t)len, (uint8_t *)names[i]};
				bad |= len == 0;
			}
			EventDone d = answer(k, n);
			int r = pi_shadow_keys_add(&ks, &d, n_events);
			CHECK_INT_EQ(r, bad ? -EBADMSG : 0);
			for (size_t i = 0; !bad && i < n; i++) {
				size_t j = 0;
				while (j < n_model && strcmp(model[j], names[i]) != 0)
					j++;
				if (j == n_model)
					snprintf(model[n_model++], sizeof(model[0]), "%s", names[i]);
			}
		}
		CHECK_INT_EQ(pi_shadow_keys_count(ks), n_model);
		for (size_t i = 0; i < n_model; i++)
			next_is(ks, model[i]);
		next_is(ks, NULL);
		pi_shadow_keys_free(ks);
	}
}

int main(void)
{
	RUN(test_shadow_keys_once_each_in_order);
	RUN(test_shadow_keys_hostile_answers_refused_whole);
	RUN(test_shadow_keys_bounded);
	RUN(test_shadow_keys_random_against_model);
	return 0;
}
