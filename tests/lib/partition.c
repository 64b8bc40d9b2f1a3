/* SPDX-License-Identifier: MIT */
/*
 * partition.c - the partition tests' fixture (see partition.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "partition.h"


static long ms_since(uint64_t t0)
{
	return (long)((loop_now() - t0) / LOOP_NS_PER_MS);
}

void pc_init(struct pcluster *c, int n_hosts)
{
	pc_init_cluster(c, "lhpart", n_hosts, 1);
}

void pc_init_cluster(struct pcluster *c, const char *tag, int n_hosts, int etcd_members)
{
	CHECK(n_hosts > 0 && n_hosts <= PC_MAX_HOSTS);
	memset(c, 0, sizeof(*c));
	/* first: the hub must be entered before etcd or any socket exists */
	c->net = netns_new_or_skip(tag);
	/* etcd listens on every address of the hub, which holds only the
	 * test's own addresses: loopback and the hub side of each pair */
	CHECK_OK(harness_etcd_start_listen(etcd_members, "0.0.0.0", NULL, &c->etcd));
	tu_init(&c->t, harness_etcd_urls(c->etcd));
	c->obs = obs_new(&c->t, PC_PREFIX, PC_PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	c->jw = jwatch_new(&c->t, PC_PREFIX, PC_PLUGIN, 1);
	c->n = n_hosts;
	for (int i = 0; i < n_hosts; i++) {
		char node[2] = {(char)('a' + i), 0};
		struct host *h = &c->host[i];
		host_setup(h, harness_dir(c->etcd), node);
		int k = netns_add_host(c->net, node);
		CHECK_OK(k);
		c->pair[i] = k;
		host_set_exec_prefix(h, netns_exec_prefix(c->net, k));
		CHECK(netns_urls(c->net, k, harness_etcd_urls(c->etcd), c->urls[i],
				 sizeof(c->urls[i])) != NULL);
	}
}

void pc_start(struct pcluster *c, int i, const char *release, const char *const *envp,
	      const char *interval)
{
	pc_start_args(c, i, release, envp, interval, NULL);
}

void pc_start_args(struct pcluster *c, int i, const char *release, const char *const *envp,
		   const char *interval, const char *const *extra)
{
	enum { MAX_EXTRA = 16 };
	const char *args[11 + MAX_EXTRA + 1] = {"--prefix",
				    PC_PREFIX,
				    "--ttl",
				    "2",
				    "--reconcile-wait",
				    "0",
				    "--reconcile-interval",
				    interval ? interval : "300ms",
				    "--log-level",
				    "debug",
				    NULL};
	size_t n = 10;
	for (size_t k = 0; extra && extra[k]; k++) {
		CHECK(k < MAX_EXTRA);
		args[n++] = extra[k];
	}
	args[n] = NULL;
	host_install_plugin(&c->host[i], release, "reconciler.so");
	host_start_env(&c->host[i], c->urls[i], args, envp);
}

void pc_start_all(struct pcluster *c, const char *release)
{
	struct release r;
	CHECK_OK(release_parse(release, &r));
	for (int i = 0; i < c->n; i++)
		pc_start(c, i, release, NULL, NULL);
	obs_wait_members(c->obs, (size_t)c->n, 20000);
	obs_wait_status_done(c->obs, r, 20000);
	pc_wait_leader_other(c, NULL, 15000);
}

void pc_stop_all(struct pcluster *c)
{
	for (int i = 0; i < c->n; i++)
		if (host_alive(&c->host[i]))
			host_signal(&c->host[i], SIGTERM);
	for (int i = 0; i < c->n; i++) {
		if (c->host[i].pid <= 0)
			continue;
		CHECK_OK(host_wait(&c->host[i], 15000));
		if (c->host[i].exit_status != 0) {
			fprintf(stderr, "host %s exited with %d\n", c->host[i].node,
				c->host[i].exit_status);
			hosts_dump_logs();
			CHECK_INT_EQ(c->host[i].exit_status, 0);
		}
	}
}

void pc_fini(struct pcluster *c)
{
	jwatch_free(c->jw);
	obs_free(c->obs);
	tu_fini(&c->t);
	harness_etcd_free(c->etcd);
	netns_free(c->net);
}

struct host *pc_host(struct pcluster *c, const char *node)
{
	for (int i = 0; node && i < c->n; i++)
		if (strcmp(c->host[i].node, node) == 0)
			return &c->host[i];
	fprintf(stderr, "no host named %s\n", node ? node : "(null)");
	exit(1);
}

int pc_index(const struct pcluster *c, const struct host *h)
{
	for (int i = 0; i < c->n; i++)
		if (&c->host[i] == h)
			return i;
	fprintf(stderr, "host %s is not in the cluster\n", h->node);
	exit(1);
}

struct host *pc_wait_leader_other(struct pcluster *c, const char *not, int timeout_ms)
{
	uint64_t t0 = loop_now();
	for (;;) {
		const char *l = obs_leader(c->obs);
		if (l && (!not || strcmp(l, not) != 0))
			return pc_host(c, l);
		if (ms_since(t0) >= timeout_ms) {
			fprintf(stderr, "timed out after %d ms waiting for a leader other than %s\n",
				timeout_ms, not ? not : "(none)");
			hosts_dump_logs();
			exit(1);
		}
		loop_run_once(c->t.loop, 20);
	}
}

void pc_run_for(struct pcluster *c, int ms)
{
	uint64_t t0 = loop_now();
	while (ms_since(t0) < ms)
		loop_run_once(c->t.loop, 20);
}

long pc_wait_log(struct pcluster *c, const struct host *h, long from, const char *needle,
		 int timeout_ms)
{
	uint64_t t0 = loop_now();
	while (host_log_count(h, from, needle) == 0) {
		if (ms_since(t0) >= timeout_ms) {
			fprintf(stderr, "timed out after %d ms waiting for \"%s\" in the log of %s\n",
				timeout_ms, needle, h->node);
			hosts_dump_logs();
			exit(1);
		}
		/* the log is a file: nothing to wait on but the loop's pace */
		loop_run_once(c->t.loop, 20);
	}
	return ms_since(t0);
}

int64_t pc_host_lease(const struct host *h, long from)
{
	char *log = host_log_since(h, from);
	uint64_t id = 0;
	for (const char *p = log; (p = strstr(p, "lease ")) != NULL; p += 6) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p + 6, &end, 16);
		if (!errno && end > p + 6 && strncmp(end, " granted", 8) == 0)
			id = v;
	}
	free(log);
	return (int64_t)id;
}

struct ttl_call {
	bool done;
	int err;
	int64_t ttl;
};

static void on_ttl(struct etcd_client *cl, int err, const struct etcd_response *r, void *ud)
{
	struct ttl_call *t = ud;
	(void)cl;
	t->done = true;
	t->err = err;
	t->ttl = err == 0 ? r->ttl : 0;
}

long pc_wait_lease_gone(struct pcluster *c, int64_t id, int timeout_ms)
{
	uint64_t t0 = loop_now();
	for (;;) {
		struct ttl_call t = {0};
		CHECK_OK(etcd_lease_timetolive(c->t.etcd, id, false, NULL, on_ttl, &t, NULL));
		CHECK_OK(loop_run_until(c->t.loop, &t.done, loop_now() + 10 * LOOP_NS_PER_S));
		if (t.err == 0 && t.ttl == -1)
			return ms_since(t0);
		if (ms_since(t0) >= timeout_ms) {
			fprintf(stderr, "lease %" PRIx64 " still known to etcd after %d ms (%s)\n",
				(uint64_t)id, timeout_ms, t.err ? etcd_strerror(t.err) : "alive");
			hosts_dump_logs();
			exit(1);
		}
		/* etcd gives no event for a lease's expiry: ask again, paced */
		loop_run_once(c->t.loop, 50);
	}
}

void pc_check_invariants(struct pcluster *c)
{
	int v = inv_check_all(&c->t, PC_PREFIX, PC_PLUGIN, NULL);
	if (v != 0)
		hosts_dump_logs();
	CHECK_INT_EQ(v, 0);
}

const char *pc_fault_name(enum pc_fault f)
{
	switch (f) {
	case PC_LINK_DOWN:
		return "link down";
	case PC_DROP_FROM_ETCD:
		return "packets from etcd dropped";
	case PC_DROP_TO_ETCD:
		return "packets to etcd dropped";
	}
	return "?";
}

void pc_fault(struct pcluster *c, const struct host *h, enum pc_fault f)
{
	int k = c->pair[pc_index(c, h)];
	switch (f) {
	case PC_LINK_DOWN:
		CHECK_OK(netns_link_set(c->net, k, false));
		break;
	case PC_DROP_FROM_ETCD:
		CHECK_OK(netns_cut(c->net, k, NETNS_DROP_FROM_HUB));
		break;
	case PC_DROP_TO_ETCD:
		CHECK_OK(netns_cut(c->net, k, NETNS_DROP_TO_HUB));
		break;
	}
}

void pc_heal(struct pcluster *c, const struct host *h)
{
	CHECK_OK(netns_heal(c->net, c->pair[pc_index(c, h)]));
}

void pc_check_token_silent(struct pcluster *c, int64_t token, int64_t rev, const char *who)
{
	const struct jrec *r;
	size_t n = jwatch_records(c->jw, &r);
	for (size_t i = 0; i < n; i++)
		if (r[i].token == token && r[i].rev > rev) {
			fprintf(stderr,
				"%s: stale token %" PRId64 " wrote a journal record at revision %" PRId64
				" after revision %" PRId64 "\n",
				who, token, r[i].rev, rev);
			hosts_dump_logs();
			CHECK(!"a cut-off leader's write got through");
		}
}

/* the log line's time relative to ref (wall ms of day); fails when absent */
static long log_time(const struct host *h, long from, const char *needle, long ref)
{
	long t = host_log_ms_after(h, from, needle, ref);
	if (t == LONG_MIN) {
		fprintf(stderr, "no \"%s\" in the log of %s\n", needle, h->node);
		hosts_dump_logs();
		exit(1);
	}
	return t;
}

void pc_cut_leader(struct pcluster *c, enum pc_fault f, struct pc_cut *ret)
{
	pc_cut_leader_after(c, f, NULL, NULL, ret);
}

void pc_cut_leader_after(struct pcluster *c, enum pc_fault f,
			 void (*before)(struct pcluster *c, struct host *leader, void *arg), void *arg,
			 struct pc_cut *ret)
{
	memset(ret, 0, sizeof(*ret));
	struct host *L = pc_wait_leader_other(c, NULL, 15000);
	host_wait_state(L, PC_PLUGIN, "leading", true, 10000);
	char st[32];
	host_plugin_state(L, PC_PLUGIN, st, sizeof(st), &ret->old_token);
	CHECK(ret->old_token > 0);
	jwatch_wait(c->jw, L->node, jwatch_count(c->jw, L->node, 0) + 1, 10000,
		    "the leader reconciles before the cut");
	long mark[PC_MAX_HOSTS];
	for (int i = 0; i < c->n; i++)
		mark[i] = host_log_size(&c->host[i]);
	if (before)
		before(c, L, arg);
	long ref = wall_ms_of_day();
	ret->old_leader = L;
	ret->cut_at = loop_now();
	pc_fault(c, L, f);

	/* a successor leads and makes its first fenced write */
	struct host *S = pc_wait_leader_other(c, L->node, 30000);
	ret->successor = S;
	ret->lead_ms = ms_since(ret->cut_at);
	jwatch_wait(c->jw, S->node, jwatch_count(c->jw, S->node, 0) + 1, 10000,
		    "the successor reconciles");
	const struct jrec *r;
	size_t n = jwatch_records(c->jw, &r);
	for (size_t i = 0; i < n && !ret->first_new_rev; i++)
		if (strcmp(r[i].node, S->node) == 0 && r[i].token > ret->old_token) {
			ret->first_new_rev = r[i].rev;
			ret->new_token = r[i].token;
		}
	CHECK(ret->first_new_rev > 0);

	/* the old leader stepped down by its local deadline (lost, or left
	 * earlier on its own, e.g. draining for a reload), before the successor
	 * was elected (both times from the daemons' own log lines; the
	 * successor's first fenced write follows its election) */
	int li = pc_index(c, L), si = pc_index(c, S);
	pc_wait_log(c, L, mark[li], "local deadline passed", 10000);
	pc_wait_log(c, L, mark[li], " leadership: ", 10000);
	ret->lost_ms = log_time(L, mark[li], " leadership: ", ref);
	ret->elected_ms = log_time(S, mark[si], "elected (fencing token", ref);
	long deadline_ms = log_time(L, mark[li], "local deadline passed", ref);
	char *log = host_log_since(L, mark[li]);
	const char *why = strstr(log, " leadership: ");
	if (!why)
		why = log;
	while (why > log && why[-1] != ' ')
		why--;
	fprintf(stderr,
		"%s on leader %s: session lost by the local deadline at +%ld ms, \"%.*s\" at +%ld "
		"ms; %s elected at +%ld ms, seen leading at +%ld ms (bound %d ms)\n",
		pc_fault_name(f), L->node, deadline_ms, (int)strcspn(why, "\n"), why, ret->lost_ms,
		S->node, ret->elected_ms, ret->lead_ms, PC_LEAD_BOUND_MS);
	free(log);
	if (!(ret->lost_ms < ret->elected_ms) || ret->lost_ms > deadline_ms + 5) {
		hosts_dump_logs();
		CHECK(ret->lost_ms < ret->elected_ms);
		/* logged in the same loop turn as the deadline, or before it */
		CHECK(ret->lost_ms <= deadline_ms + 5);
	}
	/* the successor cannot win before the old lease expired on etcd */
	CHECK(ret->lead_ms >= PC_TTL_MS / 2);
	CHECK(ret->lead_ms <= PC_LEAD_BOUND_MS);
	/* the old leader's own view says so too */
	host_wait_state(L, PC_PLUGIN, "leading", false, 10000);
	pc_check_token_silent(c, ret->old_token, ret->first_new_rev, L->node);
	pc_check_invariants(c);
}

void pc_hold_until(struct pcluster *c, uint64_t t0, int ms)
{
	long held = ms_since(t0);
	if (held < ms)
		pc_run_for(c, (int)(ms - held));
}

void pc_cut_hold_heal(struct pcluster *c, enum pc_fault f)
{
	struct pc_cut cut;
	pc_cut_leader(c, f, &cut);
	pc_hold_until(c, cut.cut_at, 2 * PC_TTL_MS);
	pc_heal_and_rejoin(c, &cut);
}

void pc_heal_and_rejoin(struct pcluster *c, const struct pc_cut *cut)
{
	struct host *L = cut->old_leader, *S = cut->successor;
	long mark = host_log_size(L);
	uint64_t t0 = loop_now();
	pc_heal(c, L);
	pc_wait_log(c, L, mark, "granted", 15000);
	host_wait_state(L, PC_PLUGIN, "campaigning", true, 15000);
	fprintf(stderr, "healed %s: a new lease and campaigning again after %ld ms\n", L->node,
		ms_since(t0));
	jwatch_wait(c->jw, S->node, jwatch_count(c->jw, S->node, 0) + 2, 10000,
		    "the successor keeps reconciling after the heal");
	const char *l = obs_leader(c->obs);
	CHECK_STR_EQ(l, S->node);
	char st[32];
	int64_t tok;
	CHECK_STR_EQ(host_plugin_state(S, PC_PLUGIN, st, sizeof(st), &tok), "leading");
	CHECK_INT_EQ(tok, cut->new_token);
	pc_check_token_silent(c, cut->old_token, cut->first_new_rev, L->node);
	pc_check_invariants(c);
}
