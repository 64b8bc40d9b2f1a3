/* SPDX-License-Identifier: MIT */
/*
 * recorder.h - shared between the "recorder" test plugin and the tests that
 * load it (the test finds the state with dlsym(handle, "recorder_get")).
 * Every field is protected by mu; the plugin signals cv and writes 1 to
 * notify_fd (an eventfd the test watches with the loop) on every change.
 */
#ifndef LH_TEST_RECORDER_H
#define LH_TEST_RECORDER_H

#include <pthread.h>
#include <stdint.h>

#define RECORDER_MAX 256
#define RECORDER_LINE 256

/* txn_mode values */
#define RECORDER_TXN_NONE 0
#define RECORDER_TXN_PUT_RANGE 1 /* put a/k=v1,a/j=v2 if a/k absent; range a/ */
#define RECORDER_TXN_CONTEXT 2   /* record token, node id, prefix; log a line */
#define RECORDER_TXN_OUTSIDE 3   /* a txn attempt from a plugin thread outside the callback */

struct recorder {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int notify_fd;                 /* -1: none */
	char trace[RECORDER_MAX][RECORDER_LINE];
	int n;
	int hold;          /* reconcile blocks while non-zero */
	int in_reconcile;  /* 1 while reconcile runs */
	int32_t reconcile_result;
	char reconcile_msg[128];
	int32_t init_result;
	int txn_mode;
	int elected_txn; /* on_elected runs one put (key e/k) first */
};

typedef struct recorder *(*recorder_get_fn)(void);

#endif
