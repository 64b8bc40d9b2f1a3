/* SPDX-License-Identifier: MIT */
/*
 * invariants.h - the fault suite's invariant checker over the FULL etcd
 * history of a prefix, for the example plugin ("reconciler").
 *
 * Design notes
 * - The history is read with one watch from revision 1 over every key (the
 *   harness's etcd is never compacted and belongs to one test program), up to
 *   the revision a range returned just before: every revision <= it carries
 *   at least one event, so the last event reaches it. Only keys under the
 *   prefix are kept. The checks work on that in-memory history, so the
 *   self-test can feed them a fabricated one (inv_history_add).
 * - The example plugin appends P/N/data/journal/<token 16 hex>-<n 8 digits> =
 *   "node=<id> token=<t> release=<x.y.z> items=<n>" in a fenced txn of its
 *   own at the start of every reconcile, before the reconcile's writes
 *   (which api->apply sends in txns of the host's). A write belongs to the
 *   record in its txn, else to the latest record before it: on a correct
 *   host that is its reconcile's, since a term's writes are fenced to the
 *   life of its election key and the next term writes its first record
 *   only after that key is gone. The checks:
 *   (a) overlap:  along revision order journal tokens never go back, and all
 *                 records of one token come from one node;
 *   (b) fence:    a record at revision R with token T lies inside the life of
 *                 the election key created at revision T (a PUT under
 *                 P/N/election/ with create_revision == T) and R < the
 *                 revision that deleted that key. A shadow run
 *                 (leaseholdctl shadow) writes nothing: its plugin sees
 *                 token 0, so a record of its that leaked into etcd would
 *                 name token 0, whose election key never exists, and
 *                 breaks (b);
 *   (c) status:   along P/N/status the version never decreases, and a DONE is
 *                 never followed by an older DONE (undecodable values, e.g.
 *                 injected garbage, are skipped and counted);
 *   (d) desired:  at the end (the history replayed, and checked against a
 *                 live range when loaded from etcd), P/N/data/config/schema
 *                 and config/items/0..n-1 exist in the format of the final
 *                 status version (1.0.x: v1 "item=<i>;state=ready", 1.1.x and
 *                 later: v2 JSON), n = "items=" of the last journal record,
 *                 and no other item exists; the final status is DONE.
 * - The example plugin's inputs are P/N/data/desired/<name> (written by
 *   anyone), its outputs P/N/data/out/<name>, written only after a journal
 *   record of the writer's term (see above). The output checks:
 *   (e) outputs fenced: every PUT or DELETE of an output belongs to a
 *                 journal record, and its revision lies inside the life of
 *                 that record's election key (created before it, deleted
 *                 after it): the writer's term. A write with no record at
 *                 or before it, or one after the term of the latest record
 *                 ended, is unfenced;
 *   (f) release order: along revision order no output is written by a
 *                 release older than one that wrote that output before (the
 *                 release of the journal record the write belongs to);
 *   (r) no rollback: along revision order no output is written (PUT or
 *                 DELETE) by a release older than the newest version the
 *                 status has reached before it (the release of the journal
 *                 record the write belongs to): once a newer release's
 *                 status is written, an older one never acts on the outputs
 *                 again, even on an output the newer one has not written
 *                 yet (a downgrade on purpose, which also trips (c), aside);
 *   (p) pause:    between a PUT of P/N/paused and the DELETE that ends it,
 *                 every write under P/N/data/ (inputs aside) belongs to one
 *                 journal record, and its token's election key lived at the
 *                 pause's revision: a reconcile that was running when the
 *                 pause arrived finishes (docs/operations.md); nothing
 *                 starts (no second record);
 *   (g) inputs reflected, at the end only (not part of inv_check_all: it
 *                 needs a converged cluster): every input desired/<name> = v
 *                 has out/<name> = v materialized in the final status
 *                 version's format with the label of the final P/N/config,
 *                 and no output exists without its input.
 * - Every violation is printed as one line naming the invariant, the key,
 *   the node/token and the revisions involved. The check functions return the
 *   number of violations (0 = holds).
 */
#ifndef LH_TEST_INVARIANTS_H
#define LH_TEST_INVARIANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tu;

struct inv_event {
	int64_t rev;  /* mod_revision of the event */
	bool del;     /* DELETE (value empty) */
	char *key;    /* NUL-terminated copy */
	uint8_t *val; /* NUL-terminated copy (val_len excludes the NUL) */
	size_t val_len;
	int64_t create_rev; /* PUT: create_revision; DELETE: 0 */
};

struct inv_history {
	struct inv_event *ev; /* in revision order (ties: etcd's order in the txn) */
	size_t n, cap;
	int64_t head_rev; /* the revision the history reaches */
};

/* inv_history_load - the whole history of keys under prefix from revision 1
 * (see the notes). Exits the test on failure (deadline 30 s). */
void inv_history_load(struct tu *t, const char *prefix, struct inv_history *ret);
/* inv_history_add - append one event (fabricated histories; copies key/val) */
void inv_history_add(struct inv_history *h, int64_t rev, bool del, const char *key, const void *val,
		     size_t val_len, int64_t create_rev);
void inv_history_free(struct inv_history *h);

/* what a check saw, for the summary line and for tests */
struct inv_stats {
	size_t journal; /* journal records */
	size_t terms;	/* distinct tokens */
	size_t status_writes;
	size_t status_garbage; /* undecodable status values skipped by (c) */
	int64_t last_token;
	char last_node[64];
};

/* the four checks on a history of plugin `plugin` under prefix; each returns
 * the number of violations and prints one line per violation */
int inv_check_overlap(const struct inv_history *h, const char *prefix, const char *plugin,
		      struct inv_stats *st);
int inv_check_fence(const struct inv_history *h, const char *prefix, const char *plugin);
int inv_check_status(const struct inv_history *h, const char *prefix, const char *plugin,
		     struct inv_stats *st);
int inv_check_desired(const struct inv_history *h, const char *prefix, const char *plugin);

/* the output checks (e), (f), (r), (p) and (g) of the notes, as the four above */
int inv_check_outputs_fenced(const struct inv_history *h, const char *prefix, const char *plugin);
int inv_check_output_releases(const struct inv_history *h, const char *prefix, const char *plugin);
int inv_check_output_status(const struct inv_history *h, const char *prefix, const char *plugin);
int inv_check_pause(const struct inv_history *h, const char *prefix, const char *plugin);
int inv_check_inputs_reflected(const struct inv_history *h, const char *prefix, const char *plugin);

/* inv_check_all - load the history, run (a)-(f), (r) and (p), compare the replayed end
 * state of prefix with a live range; print a summary. Returns the number of
 * violations (the caller CHECKs it is 0). */
int inv_check_all(struct tu *t, const char *prefix, const char *plugin, struct inv_stats *st);

/* ---- waiting on the journal (an event source for scenarios) ---- */

struct jrec {
	int64_t rev;
	int64_t token;
	char node[64];
	char release[16];
};

struct jwatch;
/* jwatch_new - watch P/N/data/journal/ from revision from_rev (0 = now). */
struct jwatch *jwatch_new(struct tu *t, const char *prefix, const char *plugin, int64_t from_rev);
void jwatch_free(struct jwatch *j);
/* records seen so far (borrowed until the loop runs again) */
size_t jwatch_records(const struct jwatch *j, const struct jrec **ret);
/* jwatch_wait - run t's loop until at least n records of node (NULL: any)
 * were seen since the watch started; after timeout_ms print `what`, dump the
 * host logs and exit(1). Returns the elapsed ms. */
long jwatch_wait(struct jwatch *j, const char *node, size_t n, int timeout_ms, const char *what);
/* jwatch_count - records of node (NULL: any), of token tok (0: any) */
size_t jwatch_count(const struct jwatch *j, const char *node, int64_t tok);

#endif
