/* SPDX-License-Identifier: MIT */
/*
 * test_partition_rollout - an incompatible rolling upgrade (1.0.0 to 1.1.0,
 * min_compatible 1.1.0, the default rule) with the first upgraded node cut
 * off from etcd past its TTL mid-rollout.
 *
 * Three hosts on 1.0.0. A standby hot-reloads 1.1.0 and its link goes
 * down for longer than the TTL: its member record stays (membership, not
 * liveness), so 1.1.0 still cannot act and the 1.0.0 leader keeps its term
 * and acts on an input changed meanwhile (v1 output, the same fencing
 * token). The other two upgrade, the leader last: one handover to a
 * connected 1.1.0 node, which writes DONE 1.1.0 and acts on a new input
 * (v2). Healed, the cut-off node rejoins as a 1.1.0 standby. The invariant
 * checker holds over the whole history, (r) included: no output written by
 * 1.0.0 after the status reached 1.1.0. Skips (77) without network
 * namespaces.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "check.h"
#include "partition.h"

static struct pcluster C;
static struct host *L, *CUT, *OTHER; /* the 1.0.0 leader, the cut node, the third */
static int64_t g_token;

struct want_kv {
	char key[160];
	const char *value;
};

static bool p_value(void *a)
{
	struct want_kv *w = a;
	size_t n;
	uint8_t *v = tu_get(&C.t, w->key, &n);
	bool ok = v && strcmp((char *)v, w->value) == 0;
	free(v);
	return ok;
}

/* put desired/name = value; wait for out/name = want (acted on by a watch:
 * well within the 300 ms reconcile interval; the deadline has room for a
 * loaded machine). Returns the elapsed ms. */
static long input_acted_on(const char *name, const char *value, const char *want,
			   const char *what)
{
	char key[160];
	snprintf(key, sizeof(key), "%s/%s/data/desired/%s", PC_PREFIX, PC_PLUGIN, name);
	struct want_kv w = {.value = want};
	snprintf(w.key, sizeof(w.key), "%s/%s/data/out/%s", PC_PREFIX, PC_PLUGIN, name);
	uint64_t t0 = loop_now();
	tu_put(&C.t, key, value, strlen(value));
	tu_wait(&C.t, p_value, &w, 10000, what);
	long ms = (long)((loop_now() - t0) / LOOP_NS_PER_MS);
	fprintf(stderr, "%s: %ld ms\n", what, ms);
	return ms;
}

static void test_newest_node_cut_off_mid_rollout(void)
{
	pc_start_all(&C, "1.0.0");
	L = pc_wait_leader_other(&C, NULL, 20000);
	int li = pc_index(&C, L);
	CUT = &C.host[(li + 1) % 3];
	OTHER = &C.host[(li + 2) % 3];
	g_token = host_fencing_token(L, PC_PLUGIN);
	CHECK(g_token > 0);

	host_install_plugin(CUT, "1.1.0", "reconciler.so");
	obs_wait_member_release(C.obs, CUT->node, REL(1, 1, 0), 20000);
	long mark = host_log_size(CUT);
	pc_fault(&C, CUT, PC_LINK_DOWN);
	pc_wait_log(&C, CUT, mark, "local deadline passed", 10000);
	pc_run_for(&C, PC_TTL_MS + 1000); /* past the lease on etcd too */

	input_acted_on("x1", "v1", "value=v1", "the 1.0.0 leader acts with 1.1.0 cut off");
	CHECK_INT_EQ(host_fencing_token(L, PC_PLUGIN), g_token);
	CHECK_STR_EQ(obs_leader(C.obs), L->node);
}

static void test_rest_upgrade_while_cut_off(void)
{
	host_install_plugin(OTHER, "1.1.0", "reconciler.so");
	obs_wait_member_release(C.obs, OTHER->node, REL(1, 1, 0), 20000);
	input_acted_on("x2", "v2", "value=v2", "still 1.0.0, two 1.1.0 members");
	CHECK_INT_EQ(host_fencing_token(L, PC_PLUGIN), g_token);

	host_install_plugin(L, "1.1.0", "reconciler.so");
	obs_wait_member_release(C.obs, L->node, REL(1, 1, 0), 20000);
	obs_wait_status_done(C.obs, REL(1, 1, 0), 20000);
	const char *now = obs_leader(C.obs);
	CHECK(now != NULL && strcmp(now, CUT->node) != 0);
	input_acted_on("x3", "v3", "{\"value\":\"v3\",\"format\":2}", "1.1.0 acts once it leads");
}

static void test_healed_rejoins(void)
{
	long mark = host_log_size(CUT);
	pc_heal(&C, CUT);
	pc_wait_log(&C, CUT, mark, "granted", 15000);
	host_wait_state(CUT, PC_PLUGIN, "campaigning", true, 15000);
	input_acted_on("x4", "v4", "{\"value\":\"v4\",\"format\":2}", "after the heal");
	pc_check_invariants(&C);
}

int main(void)
{
	pc_init(&C, 3);
	RUN(test_newest_node_cut_off_mid_rollout);
	RUN(test_rest_upgrade_while_cut_off);
	RUN(test_healed_rejoins);
	pc_stop_all(&C);
	pc_fini(&C);
	return CHECK_EXIT();
}
