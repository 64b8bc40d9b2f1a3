/* SPDX-License-Identifier: MIT */
/*
 * test_roles - roles from etcd drive which plugins a node runs (the
 * roleserve seed), with real hosts, a real etcd and a role-bound build of the
 * example plugin (role "controller"):
 *  - without the role a host holds the plugin back (standby, with the reason)
 *    and registers no member; the first node and later nodes take the same path;
 *  - assigning the role joins membership and election, without a restart;
 *  - removing the role from the leader hands leadership over within 1 s (the
 *    term history says role-removed; a switchover to it is refused), with
 *    no overlap of reconciles (journal);
 *  - moving the role moves membership;
 *  - garbage in a roles key is an error shown by the CLI, never a crash;
 *  - --role seeds only a node that has no record.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "election/election.h"
#include "harness.h"
#include "hosts.h"
#include "proto/leasehold.pb-c.h"
#include "election/election_roles.h"
#include "etcd/etcd_session.h"
#include "testutil.h"

#define PFX "/lhr"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct session *g_sess;
static struct election *g_obs;
static struct host H[3];

static const char *const ARGS[] = {HOST_TEST_ARGS(PFX), "--log-level", "debug", NULL};

static void s_up(void *ud, int64_t l)
{
	(void)ud;
	(void)l;
}
static void s_lost(void *ud, int64_t l, const char *w)
{
	(void)ud;
	(void)l;
	(void)w;
}
static const struct session_ops s_ops = {.up = s_up, .lost = s_lost};

static void install_controller_plugin(struct host *h)
{
	char src[1024];
	const char *b = getenv("LH_BUILDDIR");
	snprintf(src, sizeof(src), "%s/tests/plugins/.libs/reconciler-controller.so", b ? b : ".");
	host_install_file(h, src, "reconciler.so", 0644);
}

static void put_roles(const char *node, const char *const *roles, size_t n)
{
	Leasehold__NodeRoles m = LEASEHOLD__NODE_ROLES__INIT;
	m.node_id = (char *)node;
	m.roles = (char **)roles;
	m.n_roles = n;
	uint8_t buf[1024];
	size_t len = leasehold__node_roles__pack(&m, buf);
	char key[256];
	snprintf(key, sizeof(key), PFX "/roles/%s", node);
	tu_put(&T, key, buf, len);
}

static size_t member_count(void)
{
	struct election_member m[8];
	return election_members(g_obs, m, 8);
}

static bool has_member(const char *node)
{
	struct election_member m[8];
	size_t n = election_members(g_obs, m, 8);
	for (size_t i = 0; i < n && i < 8; i++)
		if (strcmp(m[i].node_id, node) == 0)
			return true;
	return false;
}

static const char *leader(void)
{
	struct election_info i;
	election_get_info(g_obs, &i);
	return i.leader;
}

static const char *g_want_nodes[3];
static size_t g_n_want;
static bool p_members_exactly(void *a)
{
	(void)a;
	if (member_count() != g_n_want)
		return false;
	for (size_t i = 0; i < g_n_want; i++)
		if (!has_member(g_want_nodes[i]))
			return false;
	return true;
}

static void wait_members(const char *what, size_t n, ...)
{
	va_list ap;
	va_start(ap, n);
	g_n_want = n;
	for (size_t i = 0; i < n; i++)
		g_want_nodes[i] = va_arg(ap, const char *);
	va_end(ap);
	tu_wait(&T, p_members_exactly, NULL, 10000, what);
}

static bool p_has_leader_in_members(void *a)
{
	(void)a;
	const char *l = leader();
	return l && has_member(l);
}

/* run leaseholdctl against host h; output into buf; returns the exit code */
static int ctl(struct host *h, char *out, size_t len, const char *a1, const char *a2,
               const char *a3)
{
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		execl(built_binary("leaseholdctl"), "leaseholdctl", "--control", h->control, a1, a2, a3,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t k;
	while (n + 1 < len && (k = read(p[0], out + n, len - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = 0;
	close(p[0]);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static struct host *g_h;
static const char *g_needle;
static bool p_status_contains(void *a)
{
	(void)a;
	char out[8192];
	ctl(g_h, out, sizeof(out), "status", PLUGIN, NULL);
	return strstr(out, g_needle) != NULL;
}

static void wait_status_text(struct host *h, const char *needle, const char *what)
{
	g_h = h;
	g_needle = needle;
	tu_wait(&T, p_status_contains, NULL, 10000, what);
}

static void test_no_role_holds_plugin_back(void)
{
	for (int i = 0; i < 3; i++) {
		install_controller_plugin(&H[i]);
		host_start(&H[i], harness_etcd_urls(g_etcd), ARGS);
	}
	/* every host: standby, held back with the reason; nobody registers */
	for (int i = 0; i < 3; i++)
		wait_status_text(&H[i], "needs role 'controller', not assigned to this node",
		                 "held back for a missing role");
	char out[8192];
	CHECK_INT_EQ(ctl(&H[0], out, sizeof(out), "status", PLUGIN, NULL), 0);
	CHECK(strstr(out, "state:         standby") != NULL);
	CHECK_INT_EQ(member_count(), 0);
}

static void test_assigning_the_role_joins(void)
{
	static const char *const controller[] = {"controller"};
	put_roles("a", controller, 1);
	put_roles("b", controller, 1);
	wait_members("a and b registered", 2, "a", "b");
	tu_wait(&T, p_has_leader_in_members, NULL, 10000, "a leader among a and b");
	/* c still holds back */
	CHECK(!has_member("c"));
	wait_status_text(&H[2], "needs role 'controller'", "c still held back");
}

static int cmp_mod(const void *x, const void *y)
{
	const struct etcd_kv *a = *(struct etcd_kv *const *)x, *b = *(struct etcd_kv *const *)y;
	return a->mod_revision < b->mod_revision ? -1 : a->mod_revision > b->mod_revision;
}

static void check_journal(void)
{
	struct etcd_kv **kvs;
	size_t n = tu_list(&T, PFX "/" PLUGIN "/data/journal/", &kvs);
	qsort(kvs, n, sizeof(*kvs), cmp_mod);
	long long last = 0;
	char last_node[64] = "";
	for (size_t i = 0; i < n; i++) {
		char node[64];
		long long tok;
		CHECK(sscanf((const char *)kvs[i]->value, "node=%63s token=%lld", node, &tok) == 2);
		CHECK(tok >= last);
		if (tok == last)
			CHECK_STR_EQ(node, last_node);
		last = tok;
		snprintf(last_node, sizeof(last_node), "%s", node);
	}
	tu_list_free(kvs, n);
}

static char g_old_leader[32];
static bool p_leader_changed(void *a)
{
	(void)a;
	const char *l = leader();
	return l && strcmp(l, g_old_leader) != 0 && has_member(l);
}

static void test_removing_the_role_from_the_leader_hands_over(void)
{
	snprintf(g_old_leader, sizeof(g_old_leader), "%s", leader());
	uint64_t t0 = loop_now();
	put_roles(g_old_leader, NULL, 0);
	tu_wait(&T, p_leader_changed, NULL, 1000, "handover within 1 s after the role was removed");
	fprintf(stderr, "handover after role removal: %llu ms\n",
	        (unsigned long long)((loop_now() - t0) / LOOP_NS_PER_MS));
	const char *other = strcmp(g_old_leader, "a") == 0 ? "b" : "a";
	wait_members("old leader's member record removed", 1, other);
	/* the term history says why; a switchover to the node without the
	 * role is refused with that reason */
	struct host *oh = strcmp(other, "a") == 0 ? &H[0] : &H[1];
	char out[16384], to[64];
	CHECK_INT_EQ(ctl(oh, out, sizeof(out), "history", PLUGIN, NULL), 0);
	CHECK(strstr(out, "role-removed") != NULL);
	snprintf(to, sizeof(to), "--to=%s", g_old_leader);
	CHECK_INT_EQ(ctl(oh, out, sizeof(out), "switchover", PLUGIN, to), 2);
	CHECK(strstr(out, "lacks role 'controller', which plugin 'reconciler' needs") != NULL);
	check_journal();
}

static void test_moving_the_role_moves_membership(void)
{
	/* give the role to c, take it from the remaining holder */
	static const char *const controller[] = {"controller"};
	const char *holder = leader();
	char h[32];
	snprintf(h, sizeof(h), "%s", holder);
	put_roles("c", controller, 1);
	put_roles(h, NULL, 0);
	wait_members("membership moved to c", 1, "c");
	snprintf(g_old_leader, sizeof(g_old_leader), "%s", h);
	tu_wait(&T, p_leader_changed, NULL, 5000, "c leads");
	CHECK_STR_EQ(leader(), "c");
	check_journal();
}

static void test_garbage_roles_record_is_an_error_not_a_crash(void)
{
	/* c holds the role and leads; its record turns to garbage */
	tu_put(&T, PFX "/roles/c", "\xff\xfe garbage \x01", 12);
	wait_status_text(&H[2], "roles record is invalid", "the CLI shows the invalid roles record");
	/* fail safe: the role-bound plugin leaves; the daemon lives on */
	wait_members("c left on an invalid record", 0);
	CHECK(kill(H[2].pid, 0) == 0);
	/* a record naming another node is invalid too */
	static const char *const controller[] = {"controller"};
	Leasehold__NodeRoles m = LEASEHOLD__NODE_ROLES__INIT;
	m.node_id = (char *)"someone-else";
	m.roles = (char **)controller;
	m.n_roles = 1;
	uint8_t buf[256];
	size_t len = leasehold__node_roles__pack(&m, buf);
	tu_put(&T, PFX "/roles/c", buf, len);
	wait_status_text(&H[2], "names node 'someone-else'", "wrong node id in the record");
	/* repaired: c joins again */
	put_roles("c", controller, 1);
	wait_members("c back after the repair", 1, "c");
}

static void test_role_flag_seeds_only_a_node_without_record(void)
{
	/* a fresh node d with --role controller: its record is created */
	struct host d;
	host_setup(&d, harness_dir(g_etcd), "d");
	install_controller_plugin(&d);
	const char *const args[] = {"--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0",
	                            "--role", "controller", NULL};
	host_start(&d, harness_etcd_urls(g_etcd), args);
	wait_members("d seeded with the role joins", 2, "c", "d");
	size_t n;
	uint8_t *v = tu_get(&T, PFX "/roles/d", &n);
	CHECK(v != NULL);
	char **roles;
	size_t nr;
	char err[128];
	CHECK_OK(roles_decode(v, n, "d", &roles, &nr, err, sizeof(err)));
	CHECK_INT_EQ(nr, 1);
	CHECK_STR_EQ(roles[0], "controller");
	roles_strv_free(roles, nr);
	free(v);
	host_signal(&d, SIGTERM);
	CHECK_OK(host_wait(&d, 10000));
	CHECK_INT_EQ(d.exit_status, 0);

	/* a (no role now, has a record) restarted with --role: the record wins */
	host_signal(&H[0], SIGTERM);
	CHECK_OK(host_wait(&H[0], 10000));
	host_start(&H[0], harness_etcd_urls(g_etcd), args);
	wait_status_text(&H[0], "needs role 'controller', not assigned", "--role ignored for a");
	CHECK(!has_member("a"));
}

int main(void)
{
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	CHECK_OK(session_new(T.loop, T.etcd, 10, &s_ops, NULL, &g_sess));
	struct election_config cfg = {.prefix = PFX, .name = PLUGIN, .node_id = "observer",
	                              .releases = {{1, 0, 0}, {1, 0, 0}, {1, 0, 0}}};
	CHECK_OK(election_new(T.loop, T.etcd, g_sess, &cfg, &g_obs));
	CHECK_OK(election_start(g_obs));
	host_setup(&H[0], harness_dir(g_etcd), "a");
	host_setup(&H[1], harness_dir(g_etcd), "b");
	host_setup(&H[2], harness_dir(g_etcd), "c");

	RUN(test_no_role_holds_plugin_back);
	RUN(test_assigning_the_role_joins);
	RUN(test_removing_the_role_from_the_leader_hands_over);
	RUN(test_moving_the_role_moves_membership);
	RUN(test_garbage_roles_record_is_an_error_not_a_crash);
	RUN(test_role_flag_seeds_only_a_node_without_record);

	for (int i = 0; i < 3; i++)
		host_signal(&H[i], SIGTERM);
	for (int i = 0; i < 3; i++) {
		CHECK_OK(host_wait(&H[i], 10000));
		CHECK_INT_EQ(H[i].exit_status, 0);
	}
	election_free(g_obs);
	session_free(g_sess);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
