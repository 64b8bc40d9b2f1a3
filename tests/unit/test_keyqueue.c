/* SPDX-License-Identifier: MIT */
/*
 * test_keyqueue.c - the keyed plugin's work queue
 * (host/runtime/runtime_keyqueue.h): deduplication, one key at a time or
 * up to a concurrency (never one key twice), a change during its own
 * reconcile, back-off doubling and its cap,
 * requeue-after, epochs, and a long random run checked step by step
 * against a plain model of the contract. Pure: times are given.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "runtime/runtime_keyqueue.h"

#define MS 1000000ull

static struct keyqueue *kq_conc(uint32_t min_ms, uint32_t max_ms, uint32_t concurrency)
{
	struct keyqueue_config c = {min_ms, max_ms, concurrency};
	struct keyqueue *q;
	CHECK_OK(keyqueue_new(&c, &q));
	return q;
}

static struct keyqueue *kq(uint32_t min_ms, uint32_t max_ms)
{
	struct keyqueue_config c = {min_ms, max_ms, 0};
	struct keyqueue *q;
	CHECK_OK(keyqueue_new(&c, &q));
	return q;
}

static void take_is(struct keyqueue *q, uint64_t now, const char *want)
{
	const struct keyqueue_item *it = keyqueue_take(q, now);
	if (!want) {
		CHECK(it == NULL);
		return;
	}
	CHECK(it != NULL);
	CHECK_STR_EQ(it->key, want);
}

static void settle(struct keyqueue *q, const char *k, enum keyqueue_outcome o, uint64_t after,
		   uint64_t now)
{
	keyqueue_settle(q, k, strlen(k), 1, o, after, now);
}

/* a key changed many times is reconciled once; order is first change */
static void test_keyqueue_dedup_and_order(void)
{
	struct keyqueue *q = kq(0, 0);
	CHECK_OK(keyqueue_add(q, "b", 1, 1));
	CHECK_OK(keyqueue_add(q, "a", 1, 2));
	CHECK_OK(keyqueue_add(q, "b", 1, 3));
	CHECK_INT_EQ(keyqueue_add(q, "", 0, 3), -EINVAL);
	struct keyqueue_stats st;
	keyqueue_get_stats(q, 10, &st);
	CHECK_INT_EQ(st.depth, 2);
	CHECK_INT_EQ(st.added, 3);
	CHECK_INT_EQ(st.oldest_ns, 9);
	take_is(q, 10, "b");
	take_is(q, 10, NULL); /* one at a time */
	settle(q, "b", KEYQUEUE_DONE, 0, 11);
	take_is(q, 11, "a");
	settle(q, "a", KEYQUEUE_DONE, 0, 12);
	take_is(q, 12, NULL);
	keyqueue_get_stats(q, 12, &st);
	CHECK(st.depth == 0 && st.done == 2);
	keyqueue_free(q);
}

/* a change while its key runs is not lost, whatever the outcome */
static void test_keyqueue_change_while_running(void)
{
	struct keyqueue *q = kq(100, 1000);
	CHECK_OK(keyqueue_add(q, "k", 1, 0));
	take_is(q, 0, "k");
	CHECK_OK(keyqueue_add(q, "k", 1, 1));
	settle(q, "k", KEYQUEUE_DONE, 0, 2);
	take_is(q, 2, "k");
	CHECK_OK(keyqueue_add(q, "k", 1, 3));
	settle(q, "k", KEYQUEUE_FAILED, 0, 4);
	take_is(q, 4, "k"); /* ready at once, not after a back-off */
	settle(q, "k", KEYQUEUE_DONE, 0, 5);
	take_is(q, 5, NULL);
	keyqueue_free(q);
}

/* up to the concurrency of different keys run at once, settled in any
 * order; a running key changed meanwhile is not handed out a second time
 * while it runs, and runs again after it settles */
static void test_keyqueue_concurrency(void)
{
	struct keyqueue *q = kq_conc(0, 0, 3);
	const char *keys[] = {"a", "b", "c", "d"};
	for (int i = 0; i < 4; i++)
		CHECK_OK(keyqueue_add(q, keys[i], 1, (uint64_t)i));
	const struct keyqueue_item *a = keyqueue_take(q, 5);
	take_is(q, 5, "b");
	take_is(q, 5, "c");
	take_is(q, 5, NULL); /* three run */
	struct keyqueue_stats st;
	keyqueue_get_stats(q, 5, &st);
	CHECK(st.running == 3 && st.concurrency == 3 && st.ready == 1 && st.depth == 4);
	CHECK_OK(keyqueue_add(q, "b", 1, 6)); /* b runs: dirty, not ready */
	settle(q, "c", KEYQUEUE_DONE, 0, 7); /* out of order */
	take_is(q, 7, "d");
	take_is(q, 7, NULL); /* a, b, d run; b is not handed out twice */
	CHECK_STR_EQ(a->key, "a"); /* a's item outlives the others' takes and settles */
	settle(q, "b", KEYQUEUE_DONE, 0, 8);
	take_is(q, 8, "b"); /* its change during the run */
	take_is(q, 8, NULL);
	settle(q, "a", KEYQUEUE_FAILED, 0, 9);
	settle(q, "d", KEYQUEUE_DONE, 0, 9);
	settle(q, "d", KEYQUEUE_DONE, 0, 9); /* not running: ignored */
	keyqueue_get_stats(q, 9, &st);
	CHECK(st.running == 1 && st.waiting == 1 && st.done == 3 && st.failed == 1);
	keyqueue_free(q);
	/* 0 means one at a time */
	q = kq_conc(0, 0, 0);
	CHECK_OK(keyqueue_add(q, "a", 1, 0));
	CHECK_OK(keyqueue_add(q, "b", 1, 0));
	take_is(q, 0, "a");
	take_is(q, 0, NULL);
	keyqueue_free(q);
}

/* failures back off min, 2min, 4min ... up to max; success forgets */
static void test_keyqueue_backoff(void)
{
	struct keyqueue *q = kq(10, 50);
	CHECK_INT_EQ(keyqueue_backoff_ns(q, 1), 10 * MS);
	CHECK_INT_EQ(keyqueue_backoff_ns(q, 3), 40 * MS);
	CHECK_INT_EQ(keyqueue_backoff_ns(q, 4), 50 * MS);
	CHECK_INT_EQ(keyqueue_backoff_ns(q, 1000), 50 * MS);
	uint64_t t = 0;
	CHECK_OK(keyqueue_add(q, "k", 1, t));
	uint64_t want[] = {10, 20, 40, 50, 50};
	for (size_t i = 0; i < 5; i++) {
		const struct keyqueue_item *it = keyqueue_take(q, t);
		CHECK(it && it->failures == i);
		settle(q, "k", KEYQUEUE_FAILED, 0, t);
		CHECK_INT_EQ(keyqueue_next_due(q), t + want[i] * MS);
		take_is(q, t + want[i] * MS - 1, NULL);
		t += want[i] * MS;
	}
	take_is(q, t, "k");
	settle(q, "k", KEYQUEUE_DONE, 0, t);
	CHECK_OK(keyqueue_add(q, "k", 1, t));
	const struct keyqueue_item *it = keyqueue_take(q, t);
	CHECK(it && it->failures == 0);
	/* a change during a back-off makes the key ready now, count kept */
	settle(q, "k", KEYQUEUE_FAILED, 0, t);
	CHECK_OK(keyqueue_add(q, "k", 1, t + 1));
	CHECK_INT_EQ(keyqueue_next_due(q), 0);
	it = keyqueue_take(q, t + 1);
	CHECK(it && it->failures == 1);
	keyqueue_free(q);
}

/* requeue-after is a delay, not a failure; 0 means at once */
static void test_keyqueue_requeue_after(void)
{
	struct keyqueue *q = kq(0, 0);
	CHECK_OK(keyqueue_add(q, "k", 1, 0));
	take_is(q, 0, "k");
	settle(q, "k", KEYQUEUE_AFTER, 500 * MS, 0);
	take_is(q, 499 * MS, NULL);
	const struct keyqueue_item *it = keyqueue_take(q, 500 * MS);
	CHECK(it && it->failures == 0);
	settle(q, "k", KEYQUEUE_AFTER, 0, 500 * MS);
	take_is(q, 500 * MS, "k");
	struct keyqueue_stats st;
	keyqueue_get_stats(q, 0, &st);
	CHECK_INT_EQ(st.requeued, 2);
	keyqueue_free(q);
}

/* a clear starts a new epoch: the old term's reconcile settles nothing */
static void test_keyqueue_epochs(void)
{
	struct keyqueue *q = kq(0, 0);
	CHECK_OK(keyqueue_add(q, "k", 1, 0));
	const struct keyqueue_item *it = keyqueue_take(q, 0);
	uint64_t old = it->epoch;
	keyqueue_clear(q);
	CHECK_OK(keyqueue_add(q, "k", 1, 1));
	keyqueue_settle(q, "k", 1, old, KEYQUEUE_DONE, 0, 2); /* ignored */
	it = keyqueue_take(q, 2);
	CHECK(it && it->epoch == old + 1);
	struct keyqueue_stats st;
	keyqueue_get_stats(q, 2, &st);
	CHECK(st.dropped == 1 && st.depth == 1 && st.running == 1);
	keyqueue_free(q);
}

/* ---- a random run against a plain model ---- */

#define NK 40
enum m_where { M_NONE, M_READY, M_WAIT, M_RUN };
struct m_key {
	enum m_where where;
	bool dirty;
	uint32_t failures;
	uint64_t due, seq; /* seq: FIFO order among ready keys */
};
struct model {
	struct m_key k[NK];
	uint64_t seq;
	int conc, n_running;
};

static void m_ready(struct model *m, int i)
{
	m->k[i].where = M_READY;
	m->k[i].seq = ++m->seq;
}

static void m_wake(struct model *m, uint64_t now)
{
	for (;;) { /* in due order, ties by key index as the heap may not: see below */
		int best = -1;
		for (int i = 0; i < NK; i++)
			if (m->k[i].where == M_WAIT && m->k[i].due <= now &&
			    (best < 0 || m->k[i].due < m->k[best].due))
				best = i;
		if (best < 0)
			return;
		m_ready(m, best);
	}
}

static int m_take(struct model *m, uint64_t now)
{
	m_wake(m, now);
	if (m->n_running >= m->conc)
		return -1;
	int best = -1;
	for (int i = 0; i < NK; i++)
		if (m->k[i].where == M_READY && (best < 0 || m->k[i].seq < m->k[best].seq))
			best = i;
	if (best >= 0) {
		m->k[best].where = M_RUN;
		m->k[best].dirty = false;
		m->n_running++;
	}
	return best;
}

/* the r-th running key of the model (0 <= r < n_running) */
static int m_running_nth(const struct model *m, int r)
{
	for (int i = 0; i < NK; i++)
		if (m->k[i].where == M_RUN && r-- == 0)
			return i;
	return -1;
}

/* every step's outcome and the held count, at a concurrency of conc */
static void keyqueue_against_model(uint32_t conc)
{
	struct keyqueue *q = kq_conc(3, 40, conc);
	struct model m = {.conc = (int)conc};
	unsigned seed = 12345;
	uint64_t now = 0;
	char name[NK][8];
	for (int i = 0; i < NK; i++)
		snprintf(name[i], sizeof(name[i]), "k%d", i);
	for (int step = 0; step < 200000; step++) {
		seed = seed * 1103515245u + 12345u;
		unsigned r = (seed >> 8) % 100;
		now += ((seed >> 20) % 3) * MS; /* distinct due times are rare enough to tie */
		if (r < 45) {
			int i = (int)((seed >> 4) % NK);
			CHECK_OK(keyqueue_add(q, name[i], strlen(name[i]), now));
			struct m_key *k = &m.k[i];
			if (k->where == M_NONE)
				m_ready(&m, i);
			else if (k->where == M_RUN)
				k->dirty = true;
			else if (k->where == M_WAIT)
				m_ready(&m, i);
		} else if (r < 75) {
			const struct keyqueue_item *it = keyqueue_take(q, now);
			int want = m_take(&m, now);
			/* ties in due time may wake in another order: compare the
			 * set when the model's pick is not the queue's */
			if (want < 0)
				CHECK(it == NULL);
			else {
				CHECK(it != NULL);
				int got = (int)strtol(it->key + 1, NULL, 10);
				if (got != want) {
					CHECK(m.k[got].where == M_READY);
					m.k[want].where = M_READY; /* undo the model's pick */
					m.k[got].where = M_RUN;
					m.k[got].dirty = false;
					want = got;
				}
				CHECK_INT_EQ(it->failures, m.k[want].failures);
			}
		} else if (m.n_running > 0) {
			int i = m_running_nth(&m, (int)((seed >> 14) % (unsigned)m.n_running));
			enum keyqueue_outcome o = r < 85 ? KEYQUEUE_DONE : r < 95 ? KEYQUEUE_FAILED
										   : KEYQUEUE_AFTER;
			uint64_t after = ((seed >> 12) % 4) * MS;
			keyqueue_settle(q, name[i], strlen(name[i]), 1, o, after, now);
			struct m_key *k = &m.k[i];
			m.n_running--;
			if (o == KEYQUEUE_DONE)
				k->failures = 0;
			if (o == KEYQUEUE_FAILED)
				k->failures++;
			uint64_t delay = o == KEYQUEUE_FAILED ? keyqueue_backoff_ns(q, k->failures)
							      : after;
			if (k->dirty || (o == KEYQUEUE_AFTER && delay == 0))
				m_ready(&m, i);
			else if (o == KEYQUEUE_DONE)
				*k = (struct m_key){0};
			else {
				k->where = M_WAIT;
				k->due = now + delay;
			}
		}
		struct keyqueue_stats st;
		keyqueue_get_stats(q, now, &st);
		uint64_t held = 0;
		for (int i = 0; i < NK; i++)
			held += m.k[i].where != M_NONE;
		CHECK_INT_EQ(st.depth, held);
		CHECK_INT_EQ(st.running, m.n_running);
		CHECK(st.running <= conc);
	}
	keyqueue_free(q);
}

static void test_keyqueue_against_model(void)
{
	keyqueue_against_model(1);
	keyqueue_against_model(4);
}

/* many distinct keys: the table grows, each comes out once */
static void test_keyqueue_many_keys(void)
{
	struct keyqueue *q = kq(0, 0);
	char k[32];
	for (int i = 0; i < 20000; i++) {
		int n = snprintf(k, sizeof(k), "in/%d", i % 10000);
		CHECK_OK(keyqueue_add(q, k, (size_t)n, (uint64_t)i));
	}
	int count = 0;
	for (const struct keyqueue_item *it; (it = keyqueue_take(q, 1)); count++)
		keyqueue_settle(q, it->key, it->len, it->epoch, KEYQUEUE_DONE, 0, 1);
	CHECK_INT_EQ(count, 10000);
	char big[KEYQUEUE_KEY_MAX + 1];
	memset(big, 'x', sizeof(big));
	CHECK_INT_EQ(keyqueue_add(q, big, sizeof(big), 0), -EINVAL);
	CHECK_OK(keyqueue_add(q, big, sizeof(big) - 1, 0));
	keyqueue_free(q);
}

int main(void)
{
	RUN(test_keyqueue_dedup_and_order);
	RUN(test_keyqueue_change_while_running);
	RUN(test_keyqueue_concurrency);
	RUN(test_keyqueue_backoff);
	RUN(test_keyqueue_requeue_after);
	RUN(test_keyqueue_epochs);
	RUN(test_keyqueue_against_model);
	RUN(test_keyqueue_many_keys);
	return 0;
}
