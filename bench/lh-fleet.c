/* SPDX-License-Identifier: MIT */
/*
 * lh-fleet.c - `make fleet` (bench/fleet.sh): a fleet of real leasehold
 * hosts on one 3-member etcd on this machine, measured from etcd's side.
 * Not a test: nothing asserts on a figure; a wait that passes its deadline
 * ends the run (exit 1) naming what it waited for.
 *
 * Usage: lh-fleet PLUGIN_DIR OUT_MD. PLUGIN_DIR holds fleet-a-1.0.0.so,
 * fleet-b-1.0.0.so and fleet-b-1.1.0.so (bench/benchplugin.c built by
 * fleet.sh). Environment: FLEET_HOSTS (default 200), FLEET_BATCH (hosts
 * reloaded at once in the rollout, default 5), FLEET_KILL (hosts SIGKILLed
 * at once, default 20), FLEET_SEED (which hosts, default 1), FLEET_WAVE
 * (hosts started at once, default 20), FLEET_TTL (the hosts' --ttl, default
 * 10), LH_BUILDDIR.
 *
 * Design notes
 * - Every host is a `leasehold` process (tests/lib/hosts.h) with its own
 *   plugin dir, control socket and node id (n001...), `--http none`,
 *   `--isolation thread` (a worker process per plugin would be 2 x
 *   FLEET_HOSTS more processes on a machine that also runs etcd: nothing
 *   the fleet measures on etcd's side depends on the isolation),
 *   `--reconcile-wait 0` (as make bench: a new leader's first reconcile
 *   waits for nothing outside etcd), `--ttl FLEET_TTL`, the defaults
 *   otherwise (reconcile every 30 s). Host i lists the members starting at
 *   member i mod 3, so the fleet's load spreads over the three as a real
 *   fleet's configuration would spread it. Hosts start FLEET_WAVE at a
 *   time, a wave once the one before is in the member lists (a fleet does
 *   not boot in one second; 200 hosts at once on 2 CPUs took etcd past its
 *   request timeouts and the hosts' sessions with it), and the fleet is
 *   left to settle (every host campaigning, etcd with no watcher behind)
 *   before anything is measured. etcd runs with its own raft timing
 *   (heartbeat 100 ms, election timeout 1 s), not the harness's faster one.
 * - Cluster events are observed by two observers (tests/lib/hosts.h: an
 *   election that never campaigns, one per plugin, fed by its own watch)
 *   in this process's loop, and by the plugins' own reports
 *   (bench/reports.h): every wait is for an observed event with a
 *   deadline. Time without a leader comes from the reports: a plugin's
 *   on_deposed to the next on_elected of any host, both on one clock.
 * - Connections are counted like `ss -tnp` counts them: the socket inodes
 *   of each host's /proc/PID/fd matched against /proc/net/tcp's
 *   established connections to a member's client port.
 * - Watch events: etcd's etcd_debugging_mvcc_events_total (events sent to
 *   watchers, summed over the members); the watchers are the fleet's
 *   hosts, the two observers and, during the rollout, the driver's watch
 *   of fleet-b's keys.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/loop.h"
#include "base/procstat.h"
#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "reports.h"
#include "testutil.h"

#define MEMBERS 3
#define REL_OLD REL(1, 0, 0)
#define REL_NEW REL(1, 1, 0)

static struct harness_etcd *g_etcd;
static struct tu T;
static FILE *g_md;
static const char *g_plugins;
static struct host *g_hosts;
static int g_n, g_batch, g_kill, g_ttl;
static struct observer *g_obs[2]; /* fleet-a, fleet-b */
static const char *const g_names[2] = {"fleet-a", "fleet-b"};
static int g_port[MEMBERS];

static int env_int(const char *name, int def, int min)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	long x = strtol(v, &end, 10);
	if (*end || x < min || x > 100000) {
		fprintf(stderr, "lh-fleet: %s must be a whole number >= %d\n", name, min);
		exit(2);
	}
	return (int)x;
}

static double ms_since(uint64_t t0)
{
	return (double)(loop_now() - t0) / 1e6;
}

/* fleet_wait - tu_wait that, on its deadline, has describe(arg) say what
 * was seen before the run ends (the table so far stays: g_md is line
 * buffered) */
static void fleet_wait(bool (*pred)(void *), void *arg, int timeout_ms, const char *what,
		       void (*describe)(void *))
{
	uint64_t deadline = loop_now() + (uint64_t)timeout_ms * LOOP_NS_PER_MS;
	while (!pred(arg)) {
		if (loop_now() >= deadline) {
			fprintf(stderr, "lh-fleet: timed out after %d ms waiting for %s\n", timeout_ms,
				what);
			if (describe)
				describe(arg);
			exit(1);
		}
		CHECK(loop_run_once(T.loop, 50) >= 0);
	}
}

/* ---- etcd's /metrics ---- */

struct scrape {
	double streams, watchers, events, slow, pending, keepalives, watch_open;
	int64_t revision; /* the highest member's */
};

/* sum of every sample of family `name` whose line contains `filter` (NULL:
 * every sample) */
static double metric_sum(const char *text, const char *name, const char *filter)
{
	double sum = 0;
	size_t nl = strlen(name);
	for (const char *l = text; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		if (len > nl && strncmp(l, name, nl) == 0 && (l[nl] == ' ' || l[nl] == '{')) {
			char line[1024];
			snprintf(line, sizeof(line), "%.*s", (int)len, l);
			const char *sp = strrchr(line, ' ');
			if (sp && (!filter || strstr(line, filter)))
				sum += strtod(sp + 1, NULL);
		}
		l = end ? end + 1 : NULL;
	}
	return sum;
}

static void scrape(struct scrape *s)
{
	memset(s, 0, sizeof(*s));
	for (int m = 0; m < MEMBERS; m++) {
		struct http_reply r;
		/* a busy etcd answers late; a range through the gateway would
		 * queue behind the same work */
		if (http_request(g_port[m], NULL, "/metrics", 30000, &r) != 200) {
			fprintf(stderr, "lh-fleet: GET /metrics of member %d: %ld\n", m, r.status);
			exit(1);
		}
		const char *w = "grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\"";
		s->streams += metric_sum(r.body, "etcd_debugging_mvcc_watch_stream_total", NULL);
		s->watchers += metric_sum(r.body, "etcd_debugging_mvcc_watcher_total", NULL);
		s->events += metric_sum(r.body, "etcd_debugging_mvcc_events_total", NULL);
		s->slow += metric_sum(r.body, "etcd_debugging_mvcc_slow_watcher_total", NULL);
		s->pending += metric_sum(r.body, "etcd_debugging_mvcc_pending_events_total", NULL);
		int64_t rev = (int64_t)metric_sum(r.body, "etcd_debugging_mvcc_current_revision", NULL);
		s->revision = rev > s->revision ? rev : s->revision;
		s->keepalives += metric_sum(r.body, "grpc_server_started_total",
					    "grpc_method=\"LeaseKeepAlive\"");
		s->watch_open += metric_sum(r.body, "grpc_server_started_total", w) -
				 metric_sum(r.body, "grpc_server_handled_total", w);
		http_reply_free(&r);
	}
}

/* ---- /proc ---- */

static double proc_cpu(pid_t pid)
{
	char p[64], buf[2048];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return 0; /* gone (a killed host): its time is not counted */
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	struct procstat ps = {0};
	if (procstat_parse_stat(buf, n, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), 0, &ps) < 0)
		return 0;
	return ps.cpu_seconds;
}

static double fleet_cpu(void)
{
	double s = 0;
	for (int i = 0; i < g_n; i++)
		if (g_hosts[i].pid > 0)
			s += proc_cpu(g_hosts[i].pid);
	return s;
}

static double etcd_cpu(void)
{
	double s = 0;
	for (int m = 0; m < MEMBERS; m++)
		s += proc_cpu(harness_etcd_pid(g_etcd, m));
	return s;
}

/* each member's peak RSS starts again from its current RSS */
static void etcd_peak_reset(void)
{
	for (int m = 0; m < MEMBERS; m++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/clear_refs", (int)harness_etcd_pid(g_etcd, m));
		FILE *f = fopen(p, "w");
		CHECK(f != NULL);
		fputs("5", f);
		CHECK(fclose(f) == 0);
	}
}

/* the largest VmHWM of the members, MB */
static double etcd_peak_mb(void)
{
	double mx = 0;
	for (int m = 0; m < MEMBERS; m++) {
		char p[64], line[256];
		snprintf(p, sizeof(p), "/proc/%d/status", (int)harness_etcd_pid(g_etcd, m));
		FILE *f = fopen(p, "r");
		CHECK(f != NULL);
		while (fgets(line, sizeof(line), f)) {
			double kb;
			if (sscanf(line, "VmHWM: %lf kB", &kb) == 1 && kb / 1024 > mx)
				mx = kb / 1024;
		}
		fclose(f);
	}
	return mx;
}

/* ---- connections (what `ss -tnp` shows) ---- */

struct sockref {
	unsigned long ino;
	int host;
};

static int sockref_cmp(const void *a, const void *b)
{
	unsigned long x = ((const struct sockref *)a)->ino, y = ((const struct sockref *)b)->ino;
	return x < y ? -1 : x > y;
}

/* the socket inodes of every live host, sorted; *ret_n entries */
static struct sockref *host_sockets(size_t *ret_n)
{
	size_t n = 0, cap = 1024;
	struct sockref *v = malloc(cap * sizeof(*v));
	CHECK(v != NULL);
	for (int i = 0; i < g_n; i++) {
		char d[64];
		if (g_hosts[i].pid <= 0)
			continue;
		snprintf(d, sizeof(d), "/proc/%d/fd", (int)g_hosts[i].pid);
		DIR *dir = opendir(d);
		for (struct dirent *e; dir && (e = readdir(dir));) {
			char p[320], l[64];
			unsigned long ino;
			snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
			ssize_t k = readlink(p, l, sizeof(l) - 1);
			if (k <= 0)
				continue;
			l[k] = 0;
			if (sscanf(l, "socket:[%lu]", &ino) != 1)
				continue;
			if (n == cap)
				CHECK((v = realloc(v, (cap *= 2) * sizeof(*v))) != NULL);
			v[n++] = (struct sockref){ino, i};
		}
		if (dir)
			closedir(dir);
	}
	qsort(v, n, sizeof(*v), sockref_cmp);
	*ret_n = n;
	return v;
}

/* per_host[i]: host i's established connections to any member's client
 * port; per_member[m]: the fleet's to member m */
static void count_conns(int *per_host, int per_member[MEMBERS])
{
	size_t n;
	struct sockref *refs = host_sockets(&n);
	memset(per_host, 0, sizeof(int) * (size_t)g_n);
	memset(per_member, 0, sizeof(int) * MEMBERS);
	FILE *f = fopen("/proc/net/tcp", "r");
	CHECK(f != NULL);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		unsigned rport, st;
		unsigned long ino;
		if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &rport,
			   &st, &ino) != 3 || st != 1 /* TCP_ESTABLISHED */)
			continue;
		struct sockref key = {ino, 0}, *hit;
		hit = bsearch(&key, refs, n, sizeof(*refs), sockref_cmp);
		for (int m = 0; hit && m < MEMBERS; m++)
			if ((int)rport == g_port[m]) {
				per_host[hit->host]++;
				per_member[m]++;
			}
	}
	fclose(f);
	free(refs);
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* ---- the fleet ---- */

static int node_index(const char *node)
{
	int i;
	return node && sscanf(node, "n%d", &i) == 1 && i >= 1 && i <= g_n ? i - 1 : -1;
}

struct up_want {
	size_t members; /* hosts started so far */
	bool led;       /* and both plugins led */
};

static bool p_fleet_up(void *arg)
{
	const struct up_want *w = arg;
	for (int k = 0; k < 2; k++)
		if (obs_members(g_obs[k]) != w->members || (w->led && !obs_leader(g_obs[k])))
			return false;
	return true;
}

/* start every host, FLEET_WAVE at a time (each wave once the one before
 * is in both plugins' member lists), and wait until both plugins have a
 * leader; returns the ms that took */
static double fleet_start(int wave)
{
	static char urls[MEMBERS][512];
	for (int r = 0; r < MEMBERS; r++) {
		size_t len = 0;
		for (int m = 0; m < MEMBERS; m++)
			len += (size_t)snprintf(urls[r] + len, sizeof(urls[r]) - len, "%s%s",
						m ? "," : "", harness_etcd_url(g_etcd, (r + m) % MEMBERS));
	}
	static char ttl[16];
	snprintf(ttl, sizeof(ttl), "%d", g_ttl);
	static const char *extra[] = {"--isolation", "thread", "--reconcile-wait", "0", "--ttl", ttl,
				      NULL};
	char a[1024], b[1024];
	snprintf(a, sizeof(a), "%s/fleet-a-1.0.0.so", g_plugins);
	snprintf(b, sizeof(b), "%s/fleet-b-1.0.0.so", g_plugins);
	g_hosts = calloc((size_t)g_n, sizeof(*g_hosts));
	CHECK(g_hosts != NULL);
	uint64_t t0 = loop_now();
	for (int i = 0; i < g_n; i++) {
		char node[16];
		snprintf(node, sizeof(node), "n%03d", i + 1);
		host_setup(&g_hosts[i], harness_dir(g_etcd), node);
		host_install_file(&g_hosts[i], a, "fleet-a.so", 0755);
		host_install_file(&g_hosts[i], b, "fleet-b.so", 0755);
		host_start(&g_hosts[i], urls[i % MEMBERS], extra);
		struct up_want w = {.members = (size_t)i + 1, .led = i + 1 == g_n};
		if ((i + 1) % wave == 0 || i + 1 == g_n)
			tu_wait(&T, p_fleet_up, &w, 120000, "the wave's hosts members of both plugins");
	}
	return ms_since(t0);
}

/* PROBE_KEY - in the range every host's election mirror of fleet-a watches
 * (election/ .. status) and in no record's layout: every mirror ignores it */
#define PROBE_KEY "/leasehold/fleet-a/nodes~settle-probe"

struct settle_want {
	uint64_t next_scrape;
	bool etcd_idle;
	int64_t probe_rev;   /* the probe's put, 0: none in flight */
	double probe_before; /* the pending-event gauge before the probe */
	double held;         /* settled with this many events held for no watcher */
	double slow, pending; /* of the last scrape, for a timeout's report */
};

/* Both plugins led with every host campaigning, and no watcher of etcd
 * behind. etcd's metrics have no event to wait on: read once a second.
 * A watcher behind shows as a slow watcher (unsynced or victim), or as
 * events in its stream's channel (the pending-event gauge, from the send
 * into the channel until the stream's send loop takes them). The gauge
 * also counts responses that send loop keeps for a watch id it is not
 * announcing (v3rpc/watch.go: a response that arrives after the id's
 * cancellation waits there until the stream ends), which no watcher will
 * ever take: a remainder with no slow watcher is told apart by a probe,
 * one event that every host's stream carries. A stream behind takes it
 * into its channel (the gauge grows) or makes its watcher a victim (a
 * slow watcher); held responses stay as they are. */
static bool p_settled(void *arg)
{
	struct settle_want *w = arg;
	for (int k = 0; k < 2; k++)
		if (obs_campaigning(g_obs[k]) != (size_t)g_n || !obs_leader(g_obs[k]))
			return false;
	if (loop_now() < w->next_scrape)
		return w->etcd_idle;
	struct scrape s;
	scrape(&s);
	w->slow = s.slow;
	w->pending = s.pending;
	w->next_scrape = loop_now() + 1000 * LOOP_NS_PER_MS;
	if (w->probe_rev && s.revision >= w->probe_rev) {
		/* the probe is a second old: every stream had it */
		w->etcd_idle = s.slow == 0 && s.pending == w->probe_before;
		if (w->etcd_idle)
			w->held = s.pending;
		w->probe_rev = 0;
		return w->etcd_idle;
	}
	w->etcd_idle = s.slow == 0 && s.pending == 0;
	if (!w->etcd_idle && s.slow == 0 && !w->probe_rev) {
		w->probe_before = s.pending;
		w->probe_rev = tu_put(&T, PROBE_KEY, "probe", 5);
	}
	return w->etcd_idle;
}

static void settle_describe(void *arg)
{
	const struct settle_want *w = arg;
	fprintf(stderr,
		"lh-fleet: campaigning %zu and %zu of %d, leaders %s and %s; etcd's last scrape: "
		"%.0f slow watchers, %.0f pending events\n",
		obs_campaigning(g_obs[0]), obs_campaigning(g_obs[1]), g_n,
		obs_leader(g_obs[0]) ? obs_leader(g_obs[0]) : "(none)",
		obs_leader(g_obs[1]) ? obs_leader(g_obs[1]) : "(none)", w->slow, w->pending);
}

/* wait for p_settled; returns the ms it took, *ret_held the events etcd
 * holds for no watcher then */
static double fleet_settle(double *ret_held)
{
	struct settle_want w = {0};
	uint64_t t0 = loop_now();
	fleet_wait(p_settled, &w, 300000, "the fleet settled", settle_describe);
	double ms = ms_since(t0);
	tu_del(&T, PROBE_KEY); /* (no revision when there is none) */
	*ret_held = w.held;
	return ms;
}

static void report_conns(void)
{
	int *ph = calloc((size_t)g_n, sizeof(int)), pm[MEMBERS], total = 0;
	CHECK(ph != NULL);
	count_conns(ph, pm);
	for (int i = 0; i < g_n; i++)
		total += ph[i];
	qsort(ph, (size_t)g_n, sizeof(int), int_cmp);
	struct scrape s;
	scrape(&s);
	fprintf(g_md, "## Connections and watch streams (every host a member, both plugins led)\n\n");
	fprintf(g_md, "| what | total | per host |\n|---|---|---|\n");
	fprintf(g_md, "| TCP connections of the hosts to the members' client ports (/proc/net/tcp, as `ss -tnp`) | %d (member 0: %d, 1: %d, 2: %d) | min %d, median %d, max %d |\n",
		total, pm[0], pm[1], pm[2], ph[0], ph[g_n / 2], ph[g_n - 1]);
	fprintf(g_md, "| etcd watch streams (`etcd_debugging_mvcc_watch_stream_total`, summed over the members) | %.0f | %.2f |\n",
		s.streams, s.streams / g_n);
	fprintf(g_md, "| etcd watchers (`etcd_debugging_mvcc_watcher_total`) | %.0f | %.2f |\n",
		s.watchers, s.watchers / g_n);
	fprintf(g_md, "| open gRPC Watch streams (`grpc_server_started_total` − `grpc_server_handled_total`, method Watch) | %.0f | %.2f |\n\n",
		s.watch_open, s.watch_open / g_n);
	fprintf(g_md, "The totals include the driver's two observers (one watch each).\n\n");
	free(ph);
}

/* ---- the rolling upgrade ---- */

/* who leads fleet-b by the plugins' own reports: on_elected (E) and
 * on_deposed (D), in the order of their CLOCK_MONOTONIC instants */
struct lead {
	int leading;       /* instances between E and D */
	char rel[16];      /* release of the last instance elected */
	uint64_t dark_t0;  /* when leading fell to 0 */
	double longest_ms; /* longest stretch with leading 0 */
	uint64_t write_t0; /* when leading fell to 0, until the next fenced write (W) */
	double longest_write_ms;
	int elections;
};

static int ev_t_cmp(const void *a, const void *b)
{
	uint64_t x = bench_ev[*(const size_t *)a].t, y = bench_ev[*(const size_t *)b].t;
	return x < y ? -1 : x > y;
}

/* st walked over fleet-b's E, D and W reports from index `from` on */
static void lead_walk(size_t from, struct lead *st)
{
	size_t n = 0, *ix = malloc((bench_nev - from + 1) * sizeof(*ix));
	CHECK(ix != NULL);
	for (size_t i = from; i < bench_nev; i++)
		if (strchr("EDW", bench_ev[i].type) &&
		    strcmp(bench_ev[i].name, "fleet-b") == 0)
			ix[n++] = i;
	qsort(ix, n, sizeof(*ix), ev_t_cmp);
	for (size_t k = 0; k < n; k++) {
		const struct bench_ev *e = &bench_ev[ix[k]];
		if (e->type == 'D' && --st->leading == 0) {
			st->dark_t0 = e->t;
			st->write_t0 = st->write_t0 ? st->write_t0 : e->t;
		}
		if (e->type == 'W' && st->write_t0) {
			double ms = (double)(e->t - st->write_t0) / 1e6;
			st->longest_write_ms = ms > st->longest_write_ms ? ms : st->longest_write_ms;
			st->write_t0 = 0;
		}
		if (e->type != 'E')
			continue;
		st->elections++;
		snprintf(st->rel, sizeof(st->rel), "%s", e->rel);
		if (st->leading++ == 0 && st->dark_t0) {
			double ms = (double)(e->t - st->dark_t0) / 1e6;
			st->longest_ms = ms > st->longest_ms ? ms : st->longest_ms;
		}
	}
	free(ix);
}

struct step_want {
	size_t from;      /* the step's first report */
	struct lead at0;  /* the leadership at the step's start */
	struct lead now;  /* at0 walked over the step's reports */
	size_t upgraded;  /* hosts n001.. that run 1.1.0 once the step is done */
};

/* the step is done when its hosts' member records say 1.1.0, an upgraded
 * host leads (the newest release that can act) by the observer, and by the
 * reports one 1.1.0 instance is in its term and has written */
static bool p_step_done(void *arg)
{
	struct step_want *w = arg;
	int l = node_index(obs_leader(g_obs[1]));
	if (obs_members_at(g_obs[1], REL_NEW) != w->upgraded || l < 0 || (size_t)l >= w->upgraded)
		return false;
	w->now = w->at0;
	lead_walk(w->from, &w->now);
	return w->now.leading == 1 && strcmp(w->now.rel, "1.1.0") == 0 && !w->now.write_t0;
}

static void step_describe(void *arg)
{
	struct step_want *w = arg;
	const char *l = obs_leader(g_obs[1]);
	fprintf(stderr, "lh-fleet: members at 1.1.0 %zu of %zu wanted, observer's leader %s; reports: %d instances in a term, the last elected at %s%s\n",
		obs_members_at(g_obs[1], REL_NEW), w->upgraded, l ? l : "(none)", w->now.leading,
		w->now.rel, w->now.write_t0 ? ", no fenced write since the last on_deposed" : "");
}

/* ---- fleet-b's writes by key class (docs/design.md, "etcd key layout") ---- */

#define SYNC_KEY "/leasehold/fleet-b/~fleet-sync" /* after status: no mirror sees it */
static const char *const g_class[] = {"members", "election", "nodes", "status", "handover",
				      "term-history", "data", "other"};
#define N_CLASS (sizeof(g_class) / sizeof(g_class[0]))

struct keywatch {
	struct etcd_watch *w;
	long puts[N_CLASS], dels[N_CLASS];
	bool synced;
};

static void keywatch_on(struct etcd_watch *w, int err, int64_t rev, const struct etcd_event *ev,
			size_t n, void *ud)
{
	(void)w;
	(void)rev;
	struct keywatch *k = ud;
	const size_t pl = strlen("/leasehold/fleet-b/");
	for (size_t i = 0; err >= 0 && i < n; i++) {
		char key[256];
		snprintf(key, sizeof(key), "%.*s", (int)ev[i].kv.key_len, (const char *)ev[i].kv.key);
		if (strcmp(key, SYNC_KEY) == 0) {
			k->synced = true;
			continue;
		}
		size_t c = 0;
		while (c + 1 < N_CLASS && strncmp(key + pl, g_class[c], strlen(g_class[c])) != 0)
			c++;
		if (ev[i].type == ETCD_EVENT_PUT)
			k->puts[c]++;
		else
			k->dels[c]++;
	}
}

static void keywatch_start(struct keywatch *k)
{
	memset(k, 0, sizeof(*k));
	const char *p = "/leasehold/fleet-b/";
	uint8_t end[64];
	size_t el = etcd_prefix_end(p, strlen(p), end);
	struct scrape s;
	scrape(&s);
	CHECK_OK(etcd_watch_start(T.etcd, p, strlen(p), end, el, s.revision + 1, 0, keywatch_on, k,
				  &k->w));
}

static bool p_synced(void *arg)
{
	return ((struct keywatch *)arg)->synced;
}

/* every event up to now counted (the sync key's own put is the last) */
static void keywatch_stop(struct keywatch *k)
{
	tu_put(&T, SYNC_KEY, "x", 1);
	tu_wait(&T, p_synced, k, 30000, "the key-class watch at the sync key");
	etcd_watch_cancel(k->w);
	tu_del(&T, SYNC_KEY);
}

static void report_keys(const struct keywatch *k)
{
	fprintf(g_md, "fleet-b's writes in the rollout, by key (a watch of the driver's over `/leasehold/fleet-b/`); the election mirror of every host running fleet-b watches `election/` to `status`:\n\n");
	fprintf(g_md, "| key | puts | deletes | per reloaded host | every host sees it |\n|---|---|---|---|---|\n");
	for (size_t c = 0; c < N_CLASS; c++) {
		const char *seen = c < 5 ? "yes" : c + 1 < N_CLASS ? "no" : "between election/ and status";
		if (k->puts[c] + k->dels[c])
			fprintf(g_md, "| %s | %ld | %ld | %.2f | %s |\n", g_class[c], k->puts[c],
				k->dels[c], (double)(k->puts[c] + k->dels[c]) / g_n, seen);
	}
	fprintf(g_md, "\n");
}

struct rollout {
	double ms, etcd_cpu, etcd_peak_mb, fleet_cpu, events, longest_dark_ms;
	double longest_write_ms;
	int64_t revs;
	int elections;
};

static void rollout_step(int s, const char *src, struct lead *lead, struct rollout *ro)
{
	struct scrape s0, s1;
	scrape(&s0);
	int from = s * g_batch, to = from + g_batch < g_n ? from + g_batch : g_n;
	struct step_want w = {.from = bench_nev, .at0 = *lead, .upgraded = (size_t)to};
	w.at0.longest_ms = w.at0.longest_write_ms = 0;
	w.at0.elections = 0;
	uint64_t t0 = loop_now();
	for (int i = from; i < to; i++)
		host_install_file(&g_hosts[i], src, "fleet-b.so", 0755);
	fleet_wait(p_step_done, &w, 120000, "the step's hosts at fleet-b 1.1.0, one of them leading",
		   step_describe);
	double ms = ms_since(t0);
	scrape(&s1);
	double ev = s1.events - s0.events;
	fprintf(g_md, "| %d | n%03d-n%03d | %.1f | %.2f | %.2f | %d | %" PRId64 " | %.0f | %.1f |\n",
		s + 1, from + 1, to, ms, w.now.longest_ms, w.now.longest_write_ms, w.now.elections,
		s1.revision - s0.revision, ev, ev / (g_n + 2));
	ro->longest_write_ms = w.now.longest_write_ms > ro->longest_write_ms ? w.now.longest_write_ms
									 : ro->longest_write_ms;
	ro->longest_dark_ms = w.now.longest_ms > ro->longest_dark_ms ? w.now.longest_ms : ro->longest_dark_ms;
	ro->elections += w.now.elections;
	*lead = w.now;
}

static void rollout(struct rollout *ro)
{
	char src[1024];
	snprintf(src, sizeof(src), "%s/fleet-b-1.1.0.so", g_plugins);
	fprintf(g_md, "## Rolling upgrade of fleet-b 1.0.0 → 1.1.0 (compatible, hot reload), %d hosts at a time\n\n",
		g_batch);
	fprintf(g_md, "Each step replaces fleet-b.so on its hosts at once and ends when the observer sees their member records at 1.1.0 and an upgraded host leading, and that host's plugin reported `on_elected` and a fenced write. Without a leader: from a plugin's `on_deposed` to the next `on_elected` of any host (the plugins' reports, one clock). Events: etcd's events sent to watchers in the step (a step's late deliveries count in the next), per watcher: divided by the %d hosts and 2 observers.\n\n",
		g_n);
	fprintf(g_md, "| step | hosts | time ms | longest without a leader ms | `on_deposed` → next fenced write ms | `on_elected` calls | etcd revisions | watch events | per watcher |\n|---|---|---|---|---|---|---|---|---|\n");
	struct scrape s0, s1;
	scrape(&s0);
	double ec0 = etcd_cpu(), fc0 = fleet_cpu();
	etcd_peak_reset();
	struct lead lead = {.leading = 1, .rel = "1.0.0"};
	struct keywatch kw;
	keywatch_start(&kw);
	uint64_t t0 = loop_now();
	for (int s = 0; s * g_batch < g_n; s++)
		rollout_step(s, src, &lead, ro);
	ro->ms = ms_since(t0);
	ro->etcd_cpu = etcd_cpu() - ec0;
	ro->fleet_cpu = fleet_cpu() - fc0;
	ro->etcd_peak_mb = etcd_peak_mb();
	scrape(&s1);
	ro->revs = s1.revision - s0.revision;
	ro->events = s1.events - s0.events;
	keywatch_stop(&kw);
	fprintf(g_md, "\n");
	report_keys(&kw);
}

static void report_rollout(const struct rollout *ro)
{
	double s = ro->ms / 1000;
	fprintf(g_md, "| rollout | figure |\n|---|---|\n");
	fprintf(g_md, "| total time | %.2f s (%d steps) |\n", s, (g_n + g_batch - 1) / g_batch);
	fprintf(g_md, "| longest time without a leader in any step | %.2f ms (`on_deposed` → the next fenced write: %.2f ms; `on_elected` calls in all: %d) |\n",
		ro->longest_dark_ms, ro->longest_write_ms, ro->elections);
	fprintf(g_md, "| etcd revisions (writes) | %" PRId64 " (%.1f per reloaded host) |\n", ro->revs,
		(double)ro->revs / g_n);
	fprintf(g_md, "| watch events sent by etcd | %.0f (%.1f per watcher; %.1f per write) |\n",
		ro->events, ro->events / (g_n + 2), ro->revs ? ro->events / (double)ro->revs : 0);
	fprintf(g_md, "| etcd CPU (3 members, utime+stime) | %.2f s (%.1f µs per event sent) |\n",
		ro->etcd_cpu, ro->events ? ro->etcd_cpu * 1e6 / ro->events : 0);
	fprintf(g_md, "| etcd peak RSS (the largest member's VmHWM, reset at the start) | %.1f MB |\n",
		ro->etcd_peak_mb);
	fprintf(g_md, "| daemons' CPU (every host, utime+stime) | %.2f s (%.1f µs per event received; %.2f%% of a CPU per host) |\n\n",
		ro->fleet_cpu, ro->events ? ro->fleet_cpu * 1e6 / ro->events : 0,
		100 * ro->fleet_cpu / s / g_n);
}

/* ---- SIGKILL of FLEET_KILL hosts at once ---- */

struct kill_want {
	const bool *killed;
	uint64_t t0;      /* the kill, loop_now() */
	uint64_t t0_mono; /* the same instant on the plugins' clock */
	size_t from;      /* the first report after the kill */
	double obs_ms[2]; /* < 0 until the observer sees plugin k led by a live host */
	double ev_ms[2];  /* < 0 until a live host's plugin k reports on_elected */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool p_led_again(void *arg)
{
	struct kill_want *w = arg;
	bool all = true;
	for (int k = 0; k < 2; k++) {
		int l = node_index(obs_leader(g_obs[k]));
		if (w->obs_ms[k] < 0 && l >= 0 && !w->killed[l])
			w->obs_ms[k] = ms_since(w->t0);
		for (long i = (long)w->from; w->ev_ms[k] < 0 && i >= 0;) {
			i = bench_ev_find((size_t)i, 'E', NULL, g_names[k], NULL, 0, false);
			if (i >= 0 && !w->killed[node_index(bench_ev[i].node)])
				w->ev_ms[k] = (double)(bench_ev[i].t - w->t0_mono) / 1e6;
			i += i >= 0;
		}
		all = all && w->obs_ms[k] >= 0 && w->ev_ms[k] >= 0;
	}
	return all;
}

/* the two leaders and random others up to g_kill */
static int pick_victims(bool *killed)
{
	int n = 0;
	for (int k = 0; k < 2; k++) {
		int l = node_index(obs_leader(g_obs[k]));
		CHECK(l >= 0);
		n += !killed[l];
		killed[l] = true;
	}
	while (n < g_kill) {
		int i = rand() % g_n;
		n += !killed[i];
		killed[i] = true;
	}
	return n;
}

static void kill_hosts(void)
{
	bool *killed = calloc((size_t)g_n, sizeof(bool));
	CHECK(killed != NULL);
	char leaders[2][32];
	for (int k = 0; k < 2; k++)
		snprintf(leaders[k], sizeof(leaders[k]), "%s", obs_leader(g_obs[k]));
	int n = pick_victims(killed);
	struct kill_want w = {.killed = killed, .obs_ms = {-1, -1}, .ev_ms = {-1, -1}};
	w.from = bench_nev;
	w.t0_mono = mono_ns();
	w.t0 = loop_now();
	for (int i = 0; i < g_n; i++)
		if (killed[i])
			host_signal(&g_hosts[i], SIGKILL);
	for (int i = 0; i < g_n; i++)
		if (killed[i])
			CHECK_OK(host_wait(&g_hosts[i], 5000));
	tu_wait(&T, p_led_again, &w, 60000 + 3000 * g_ttl, "both plugins led by a live host");
	fprintf(g_md, "## SIGKILL of %d hosts at once (both leaders among them), --ttl %d\n\n", n, g_ttl);
	fprintf(g_md, "| plugin | leader killed | SIGKILL → a live host's plugin in `on_elected` | SIGKILL → the observer sees a live host lead |\n|---|---|---|---|\n");
	for (int k = 0; k < 2; k++)
		fprintf(g_md, "| %s | %s | %.0f ms | %.0f ms |\n", g_names[k], leaders[k], w.ev_ms[k],
			w.obs_ms[k]);
	fprintf(g_md, "\n");
	free(killed);
}

static void fleet_stop(void)
{
	struct host **live = calloc((size_t)g_n, sizeof(*live));
	CHECK(live != NULL);
	size_t n = 0;
	for (int i = 0; i < g_n; i++)
		if (g_hosts[i].pid > 0)
			live[n++] = &g_hosts[i];
	hosts_terminate(live, n, 60000, false);
	free(live);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: lh-fleet PLUGIN_DIR OUT_MD\n");
		return 2;
	}
	g_plugins = argv[1];
	g_n = env_int("FLEET_HOSTS", 200, 2);
	g_batch = env_int("FLEET_BATCH", 5, 1);
	g_kill = env_int("FLEET_KILL", 20, 2);
	g_ttl = env_int("FLEET_TTL", 10, 2);
	if (g_kill > g_n / 2)
		g_kill = g_n / 2 < 2 ? 2 : g_n / 2;
	srand((unsigned)env_int("FLEET_SEED", 1, 0));
	g_md = fopen(argv[2], "w");
	CHECK(g_md != NULL);
	setvbuf(g_md, NULL, _IOLBF, 0);
	/* etcd's own raft timing, not the harness's faster one: a fleet on a
	 * shared machine is no place for a 500 ms election timeout */
	static const char *const etcd_args[] = {"--heartbeat-interval", "100", "--election-timeout",
						"1000", NULL};
	CHECK_OK(harness_etcd_start(MEMBERS, etcd_args, &g_etcd));
	for (int m = 0; m < MEMBERS; m++)
		CHECK(sscanf(harness_etcd_url(g_etcd, m), "http://127.0.0.1:%d", &g_port[m]) == 1);
	tu_init(&T, harness_etcd_urls(g_etcd));
	bench_reports_open(T.loop, harness_dir(g_etcd));
	for (int k = 0; k < 2; k++)
		g_obs[k] = obs_new(&T, "/leasehold", g_names[k], REL_OLD, REL_OLD, REL_OLD);
	fprintf(stderr, "lh-fleet: %d hosts, batch %d, kill %d, ttl %d, etcd %s\n", g_n, g_batch,
		g_kill, g_ttl, harness_etcd_urls(g_etcd));
	int wave = env_int("FLEET_WAVE", 20, 1);
	double start_ms = fleet_start(wave);
	fprintf(g_md, "Fleet up (the first host started → both plugins have %d members and a leader; hosts started %d at a time, each wave once the one before was in both member lists): %.1f s.\n\n",
		g_n, wave, start_ms / 1000);
	double held;
	double settle_ms = fleet_settle(&held);
	fprintf(g_md, "Then settled (every host campaigning for both plugins, etcd without a watcher behind: no slow watcher, no pending event): %.1f s later",
		settle_ms / 1000);
	if (held > 0)
		fprintf(g_md, " (etcd's pending-event gauge kept %.0f events, held for no watcher: a probe event passed every stream and left it unchanged; bench/README.md)", held);
	fprintf(g_md, ".\n\n");
	report_conns();
	struct scrape s0, s1;
	scrape(&s0);
	uint64_t t0 = loop_now();
	struct rollout ro = {0};
	rollout(&ro);
	report_rollout(&ro);
	kill_hosts();
	scrape(&s1);
	double secs = ms_since(t0) / 1000;
	fprintf(g_md, "Lease keepalives from the rollout's start to the end of the SIGKILL recovery (%.1f s; gRPC LeaseKeepAlive streams started: the gateway opens one per renewal): %.0f, %.1f/s, %.3f/s per host (a renewal every TTL/3 is %.3f/s).\n",
		secs, s1.keepalives - s0.keepalives, (s1.keepalives - s0.keepalives) / secs,
		(s1.keepalives - s0.keepalives) / secs / g_n, 3.0 / g_ttl);
	fleet_stop();
	for (int k = 0; k < 2; k++)
		obs_free(g_obs[k]);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	CHECK(fclose(g_md) == 0);
	fprintf(stderr, "lh-fleet: done\n");
	return 0;
}
