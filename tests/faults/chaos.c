/* SPDX-License-Identifier: MIT */
/*
 * chaos - a seeded randomized fault runner: a 3-member etcd and four
 * leasehold hosts (example plugin), each host in its own network namespace
 * (tests/lib/partition.h), random faults for a while, then everything healed,
 * rolled forward to the newest release and checked.
 *
 * Design notes
 * - One seed (CHAOS_SEED, random when empty; printed first) drives every
 *   choice: the fault kind, its target, how long it is held, the pause
 *   before the next one, the release a reload goes to. Faults run one after
 *   the other, each healed before the next, for CHAOS_SECONDS (default 60).
 *   The same seed gives the same sequence of faults; what the daemons do in
 *   between depends on the machine's timing and cannot be replayed exactly.
 * - Faults: SIGKILL (then restart), SIGSTOP for longer than the TTL (then
 *   SIGCONT), SIGTERM (the daemon must exit 0; then restart), the host's
 *   link down, its packets from or to etcd dropped (nftables), an etcd
 *   member SIGKILLed and restarted, a hot reload forward (the example plugin
 *   of a newer release dropped into the host's plugin dir: 1.0.0, 1.1.0,
 *   1.2.0), an incompatible rollout (while a host runs 1.0.0: some hosts
 *   reloaded to 1.1.0 or 1.2.0, the inputs changed, a hold, then the
 *   rest, and one time in two one of them back to 1.0.0 for a while and
 *   forward again), SIGKILL of the plugin worker of a host in process isolation
 *   (hosts c and d run --isolation process), and the operator's verbs
 *   through the real leaseholdctl on a host's control socket (the loop
 *   pumped while it runs): switchover with and without --to, pause held
 *   then resumed (a reconcile request while paused must be refused),
 *   reconcile requests, config set of a new label (or of one the plugin
 *   must refuse, which may not be stored), a restart with another
 *   --priority, a stop followed by members forget and a restart (never
 *   of the only host on the newest release: a downgrade on purpose); and
 *   bursts of writes to the plugin's inputs (desired/k0..k9); staged
 *   promotion: `release pin` at the oldest release a host runs (or the
 *   next the CLI accepts; never forced), held while the inputs change and
 *   one time in two a host at or below the pin gets the newest file (it
 *   waits), then `release unpin`: from one TTL after the pin was accepted
 *   until the unpin, no journal record of a release newer than the pin;
 *   and a host whose reconciles fail for a while (the example plugin's
 *   LH_EXAMPLE_FAIL_FILE; hosts run --unhealthy-hold-down 2s): a failing
 *   leader withdraws while another node can act, and comes back.
 * - A switchover the CLI reports done must not leave the plugin without a
 *   fenced write for longer than the TTL: from the later of the request and
 *   the old term's last journal record to the new term's first, by the
 *   runner's clock (not measured while the rollout stands still: nobody
 *   writes then). The longest is reported.
 * - Releases: every host starts on 1.0.0. A host that is restarted runs the
 *   release it had, or the newest once any reload happened (the rollout has
 *   begun): a host is never restarted backwards, and after the chaos every
 *   host still older is reloaded to the newest, so that with every member
 *   record at 1.2.0 the rollout can complete. Every host that was stopped is
 *   restarted: with persistent member records a host left down would hold
 *   the rollout back forever.
 * - A host that exits without being told to, a SIGTERM that does not end the
 *   daemon with status 0, an etcd member that does not come back: each is a
 *   violation (printed), and the host is started again so the run goes on.
 * - Checks at the end: every member registered at 1.2.0, status DONE
 *   1.2.0, a final value written to every input shows in its output (looked
 *   at on each journal record: outputs change only in a fenced write),
 *   exactly one host says it leads and it is the observer's leader, the
 *   invariant checker over the whole etcd history (tests/lib/invariants.h,
 *   the output checks included, and (g): every input reflected), and no
 *   journal record of an older release after the first status DONE 1.2.0
 *   (the rollout completed); the checker's (r) also holds mid-rollout: no
 *   output written by a release older than a status the rollout reached.
 * - Dead time: the runner notes when it sees each journal record (the
 *   plugin's fenced write). Each gap between two consecutive records is
 *   put down to the last fault injected before the next record was due
 *   (400 ms after the gap began: a leader writes every 300 ms); a kind's
 *   dead time is the longest gap put down to one of its faults. This
 *   attributes a stretch to the fault that began it, even when later
 *   faults fall inside it. Stretches that begin while the rollout waits
 *   (a member on 1.0.0, another on 1.1.0 or newer: the newer releases
 *   cannot act until the old member is upgraded, and the 1.0.0 leader
 *   keeps reconciling meanwhile) are reported apart, as "rollout under
 *   way". It is measured by the runner's clock at
 *   the pace of its loop (20 ms), and a step that blocks the runner (an etcd
 *   member's restart waits for it to be healthy) makes the records it
 *   missed look later. Reported per fault kind, never asserted (the
 *   switchover's handover bound above aside): speed belongs in `make bench`.
 * - Output: the seed, one line per fault (and the CLI's answer), the
 *   invariant checker's lines, then `chaos: N faults, M writes, K terms, V
 *   violations`, the faults per kind, the longest switchover handover and
 *   the dead time per fault kind. Exit 0 when V is 0, 1 otherwise (the host
 *   logs dumped), 77 when namespaces cannot be made here (not root, no
 *   ip/nft).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "election/election.h"
#include "election/election_internal.h"
#include "proto/leasehold.pb-c.h"
#include "partition.h"

#define N_HOSTS 4
#define FIRST_ISOLATED 2 /* hosts c and d run their plugin in a worker process */
#define N_ETCD 3
#define DEFAULT_SECONDS 60
/* how long the end state may take to converge on a loaded machine */
#define SETTLE_MS 90000
/* a leader writes every 300 ms (--reconcile-interval); a fault injected
 * within this long after a record is the cause of the stretch that follows */
#define WRITE_DUE_MS 400
/* the inputs the runner writes: desired/k0 .. k<N_INPUTS - 1> (one
 * reconcile's writes stay in one txn: the plugin chunks at 100 ops) */
#define N_INPUTS 10
/* the example plugin fails its reconciles while this file exists */
#define FAIL_ENV "LH_EXAMPLE_FAIL_FILE="

static const char *const RELEASES[] = {"1.0.0", "1.1.0", "1.2.0"};
#define N_RELEASES ((int)(sizeof(RELEASES) / sizeof(RELEASES[0])))
#define NEWEST (N_RELEASES - 1)

enum fault_kind {
	F_KILL,
	F_STOP,
	F_TERM,
	F_LINK_DOWN,
	F_DROP_FROM_ETCD,
	F_DROP_TO_ETCD,
	F_ETCD_KILL,
	F_RELOAD,
	F_WORKER_KILL,
	F_SWITCHOVER,
	F_SWITCHOVER_TO,
	F_PAUSE,
	F_RECONCILE,
	F_CONFIG,
	F_PRIORITY,
	F_FORGET,
	F_INPUTS,
	F_ROLLOUT,
	F_PIN,
	F_BROKEN,
	F_KINDS
};

static const char *const KIND_NAME[F_KINDS] = {
    [F_KILL] = "SIGKILL",
    [F_STOP] = "SIGSTOP past the TTL",
    [F_TERM] = "SIGTERM",
    [F_LINK_DOWN] = "link down",
    [F_DROP_FROM_ETCD] = "packets from etcd dropped",
    [F_DROP_TO_ETCD] = "packets to etcd dropped",
    [F_ETCD_KILL] = "etcd member killed",
    [F_RELOAD] = "hot reload forward",
    [F_WORKER_KILL] = "plugin worker killed",
    [F_SWITCHOVER] = "switchover",
    [F_SWITCHOVER_TO] = "switchover --to",
    [F_PAUSE] = "pause, then resume",
    [F_RECONCILE] = "reconcile request",
    [F_CONFIG] = "config set",
    [F_PRIORITY] = "restart, new priority",
    [F_FORGET] = "stop, members forget",
    [F_INPUTS] = "input writes",
    [F_ROLLOUT] = "incompatible rollout",
    [F_PIN] = "release pin, then unpin",
    [F_BROKEN] = "broken reconciles",
};

struct fault {
	enum fault_kind kind;
	uint64_t at; /* loop_now() of the injection */
	/* the rollout stood still before or after it: a 1.1.0-or-newer leader
	 * does not reconcile while a 1.0.0 member remains (the design's
	 * protocol, step 4), whatever the fault */
	bool rollout_waits;
};

static struct {
	struct pcluster c;
	uint64_t rng;
	unsigned long long seed;
	long seconds;
	int rel[N_HOSTS]; /* index into RELEASES: what the host runs (its plugin dir) */
	bool rollout_begun;
	uint64_t t0;
	uint64_t *write_at; /* when the runner saw each journal record */
	size_t n_writes, cap_writes;
	struct fault *faults;
	size_t n_faults, cap_faults;
	int violations;
	char worker[1024];
	int prio[N_HOSTS];   /* --priority of each host (0: the default) */
	uint64_t input_seq;  /* values written to the inputs so far */
	long handover_worst; /* the longest switchover handover seen, ms */
	size_t handovers;    /* switchovers whose handover was measured */
	size_t kind_count[F_KINDS];
	/* each host's LH_EXAMPLE_FAIL_FILE=PATH (fail_file: PATH) */
	char fail_env[N_HOSTS][740];
	int pins;                     /* pins the CLI accepted */
} G;

/* ---- the seeded generator (splitmix64: small, and the same everywhere) ---- */

static uint64_t rng_next(void)
{
	uint64_t z = (G.rng += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int rng_range(int lo, int hi)
{
	return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

static long ms_since(uint64_t t)
{
	return (long)((loop_now() - t) / LOOP_NS_PER_MS);
}

static double secs_since_start(void)
{
	return (double)(loop_now() - G.t0) / (double)LOOP_NS_PER_S;
}

/* a violation: printed, counted, and the log tail of h dumped (h may be NULL) */
static void violation(struct host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct host *h, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	G.violations++;
	fprintf(stderr, "chaos: VIOLATION at +%.1f s: %s%s%s\n", secs_since_start(), what,
		h ? " on " : "", h ? h->node : "");
	if (h)
		host_dump_log(h);
}

/* ---- the loop, with the journal's arrival times noted ---- */

static void note_writes(void)
{
	const struct jrec *r;
	size_t n = jwatch_records(G.c.jw, &r);
	uint64_t now = loop_now();
	while (G.n_writes < n) {
		if (G.n_writes == G.cap_writes) {
			G.cap_writes = G.cap_writes ? 2 * G.cap_writes : 1024;
			G.write_at = realloc(G.write_at, G.cap_writes * sizeof(*G.write_at));
			CHECK(G.write_at != NULL);
		}
		G.write_at[G.n_writes++] = now;
	}
}

static void pump(void)
{
	loop_run_once(G.c.t.loop, 20);
	note_writes();
}

/* the length of a fault or of a pause: a parameter, never a wait for an event */
static void run_for(int ms)
{
	uint64_t t = loop_now();
	while (ms_since(t) < ms)
		pump();
}

/* ---- hosts ---- */

/* the daemon flags of host i: isolation (c, d) and its priority */
static const char *const *host_args(int i)
{
	static const char *args[N_HOSTS][10];
	static char prio[N_HOSTS][16];
	int n = 0;
	if (i >= FIRST_ISOLATED) {
		args[i][n++] = "--isolation";
		args[i][n++] = "process";
		args[i][n++] = "--worker";
		args[i][n++] = G.worker;
	}
	/* a broken host withdraws after 3 failures (the default) and may lead
	 * again 2 s later, so that one fault sees both */
	args[i][n++] = "--unhealthy-hold-down";
	args[i][n++] = "2s";
	if (G.prio[i]) {
		snprintf(prio[i], sizeof(prio[i]), "%d", G.prio[i]);
		args[i][n++] = "--priority";
		args[i][n++] = prio[i];
	}
	args[i][n] = NULL;
	return args[i];
}

static void start_host(int i)
{
	if (G.rollout_begun)
		G.rel[i] = NEWEST;
	const char *env[] = {G.fail_env[i], NULL};
	pc_start_args(&G.c, i, RELEASES[G.rel[i]], env, NULL, host_args(i));
}

/* run the loop until host i has exited or timeout_ms passed; true when it exited */
static bool wait_exit(int i, int timeout_ms)
{
	uint64_t t = loop_now();
	while (host_alive(&G.c.host[i])) {
		if (ms_since(t) >= timeout_ms)
			return false;
		pump();
	}
	return true;
}

/* a host that ended without being told to is a violation; start it again */
static void check_hosts_alive(void)
{
	for (int i = 0; i < N_HOSTS; i++) {
		struct host *h = &G.c.host[i];
		if (host_alive(h))
			continue;
		violation(h, "the daemon exited by itself (status %d)", h->exit_status);
		start_host(i);
	}
}

/* ---- faults ---- */

/* some member runs 1.0.0 while another runs a release whose minimum
 * compatible release is 1.1.0: no leader may reconcile until it is upgraded */
static bool rollout_waits(void)
{
	bool old = false, new = false;
	for (int i = 0; i < N_HOSTS; i++) {
		old |= G.rel[i] == 0;
		new |= G.rel[i] > 0;
	}
	return old && new;
}

static void note_fault(enum fault_kind k)
{
	if (G.n_faults == G.cap_faults) {
		G.cap_faults = G.cap_faults ? 2 * G.cap_faults : 64;
		G.faults = realloc(G.faults, G.cap_faults * sizeof(*G.faults));
		CHECK(G.faults != NULL);
	}
	G.faults[G.n_faults++] = (struct fault){k, loop_now(), rollout_waits()};
	G.kind_count[k]++;
}

static void say(enum fault_kind k, const char *target, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(enum fault_kind k, const char *target, const char *fmt, ...)
{
	char rest[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	fprintf(stderr, "chaos: +%.1f s fault %zu: %s on %s%s\n", secs_since_start(), G.n_faults,
		KIND_NAME[k], target, rest);
}

static bool any_host_behind(void)
{
	for (int i = 0; i < N_HOSTS; i++)
		if (G.rel[i] < NEWEST)
			return true;
	return false;
}

/* host i runs a release no other host has reached: forgetting it leaves no
 * member at the status's version, the downgrade the design allows on
 * purpose (docs/design.md "A downgrade"), which the checks here refuse */
static bool only_host_on_newest(int i)
{
	for (int j = 0; j < N_HOSTS; j++)
		if (j != i && G.rel[j] >= G.rel[i])
			return false;
	return true;
}

static bool any_host_on_first(void)
{
	for (int i = 0; i < N_HOSTS; i++)
		if (G.rel[i] == 0)
			return true;
	return false;
}

/* SIGTERM host i: it must exit 0 within 30 s (else it is killed) */
static void stop_host(int i)
{
	struct host *h = &G.c.host[i];
	host_signal(h, SIGTERM);
	if (!wait_exit(i, 30000)) {
		violation(h, "SIGTERM did not end the daemon within 30 s");
		host_signal(h, SIGKILL);
		CHECK(wait_exit(i, 10000));
	} else if (h->exit_status != 0) {
		violation(h, "SIGTERM ended the daemon with status %d", h->exit_status);
	}
}

static void fault_signal_restart(enum fault_kind k, int i)
{
	struct host *h = &G.c.host[i];
	int down_ms = rng_range(0, 3000);
	if (k == F_KILL) {
		say(k, h->node, ", down %d ms", down_ms);
		host_signal(h, SIGKILL);
		if (!wait_exit(i, 10000))
			violation(h, "SIGKILL did not end the daemon within 10 s");
	} else {
		say(k, h->node, ", down %d ms after it exited", down_ms);
		stop_host(i);
	}
	run_for(down_ms);
	start_host(i);
}

static void fault_stop(int i)
{
	struct host *h = &G.c.host[i];
	int ms = PC_TTL_MS + rng_range(500, 3000);
	say(F_STOP, h->node, ", stopped %d ms", ms);
	host_signal(h, SIGSTOP);
	run_for(ms);
	host_signal(h, SIGCONT);
}

static void fault_network(enum fault_kind k, int i)
{
	static const enum pc_fault how[] = {
	    [F_LINK_DOWN] = PC_LINK_DOWN,
	    [F_DROP_FROM_ETCD] = PC_DROP_FROM_ETCD,
	    [F_DROP_TO_ETCD] = PC_DROP_TO_ETCD,
	};
	struct host *h = &G.c.host[i];
	int ms = rng_range(500, 5000);
	say(k, h->node, ", held %d ms", ms);
	pc_fault(&G.c, h, how[k]);
	run_for(ms);
	pc_heal(&G.c, h);
}

static void fault_etcd(int m)
{
	int ms = rng_range(500, 4000);
	char target[32];
	snprintf(target, sizeof(target), "member %d", m);
	say(F_ETCD_KILL, target, ", down %d ms", ms);
	CHECK_OK(harness_etcd_kill(G.c.etcd, m));
	run_for(ms);
	int err = harness_etcd_restart(G.c.etcd, m);
	if (err < 0) {
		fprintf(stderr, "chaos: etcd member %d: %s\n", m, strerror(-err));
		violation(NULL, "an etcd member did not come back");
	}
}

/* i: a host that is behind; to: a newer release */
static void fault_reload(int i, int to)
{
	struct host *h = &G.c.host[i];
	say(F_RELOAD, h->node, ", %s -> %s", RELEASES[G.rel[i]], RELEASES[to]);
	G.rel[i] = to;
	G.rollout_begun = true;
	host_install_plugin(h, RELEASES[to], "reconciler.so");
}

static void fault_inputs(void);

/* an incompatible rollout while a 1.0.0 host remains: hosts behind a newer
 * release (1.1.0 or 1.2.0, both min_compatible 1.1.0) from i on are
 * reloaded to it, some now, the rest after the inputs changed and a hold;
 * meanwhile a 1.0.0 leader keeps reconciling, and once the status reached
 * the newer release no older one may write an output again (invariants.h
 * (r)). Only while a host runs 1.0.0 (one_fault makes sure). */
static void fault_rollout(int i)
{
	int behind[N_HOSTS], n = 0, to = rng_range(1, NEWEST);
	for (int x = 0; x < N_HOSTS; x++)
		if (G.rel[(i + x) % N_HOSTS] < to)
			behind[n++] = (i + x) % N_HOSTS;
	G.rollout_begun = true;
	int first = rng_range(1, n > 1 ? n - 1 : 1); /* reloaded before the hold */
	say(F_ROLLOUT, "the cluster", ", %d of %d hosts to %s first", first, n, RELEASES[to]);
	for (int x = 0; x < n; x++) {
		if (x == first) { /* the rollout half done: inputs change, then a hold */
			fault_inputs();
			run_for(rng_range(300, 2500));
		}
		struct host *h = &G.c.host[behind[x]];
		fprintf(stderr, "chaos:   reload %s %s -> %s\n", h->node, RELEASES[G.rel[behind[x]]],
			RELEASES[to]);
		G.rel[behind[x]] = to;
		host_install_plugin(h, RELEASES[to], "reconciler.so");
		run_for(rng_range(0, 500));
	}
	/* one time in two, one of them goes back to 1.0.0 for a while: an
	 * older member beside newer ones may not lead (the status's version
	 * is newer once the newer release acted), then forward again */
	if (rng_range(0, 1) == 0) {
		struct host *h = &G.c.host[behind[0]];
		int ms = rng_range(500, 2500);
		fprintf(stderr, "chaos:   reload %s %s -> %s for %d ms, then back\n", h->node,
			RELEASES[to], RELEASES[0], ms);
		host_install_plugin(h, RELEASES[0], "reconciler.so");
		run_for(ms);
		host_install_plugin(h, RELEASES[to], "reconciler.so");
	}
}

static void fault_worker(int i)
{
	struct host *h = &G.c.host[i];
	pid_t w = h->pid > 0 ? host_worker_pid(h->pid) : 0;
	say(F_WORKER_KILL, h->node, w ? "" : " (no worker running right now: nothing killed)");
	if (w > 0 && kill(w, SIGKILL) != 0)
		fprintf(stderr, "chaos: kill worker %d: %s\n", (int)w, strerror(errno));
}

/* ---- the operator's verbs (the real leaseholdctl) and the input writer ---- */

/* `leaseholdctl ARGS` against host i's control socket, the loop pumped while
 * it runs (the observer and the journal stay current); its exit code, or -1
 * when it did not end within timeout_ms (then it is killed). o is filled
 * either way (free with ctl_out_free). */
static int ctl(int i, struct ctl_out *o, int timeout_ms, const char *const *args)
{
	struct ctl_proc p;
	ctl_spawn(&p, G.c.host[i].control, args);
	uint64_t t = loop_now();
	while (ctl_running_for(&p, 1) && ms_since(t) < timeout_ms)
		pump();
	if (ctl_finish(&p, o, 1000) < 0) {
		*o =
		    (struct ctl_out){.status = -1, .out = strdup(""), .err = strdup("(timed out)")};
		CHECK(o->out && o->err);
		return -1;
	}
	return o->status;
}

/* the CLI's answer in one line of the fault log */
static void say_ctl(const char *verb, const struct ctl_out *o)
{
	const char *m = *o->err ? o->err : o->out;
	fprintf(stderr, "chaos:   %s: exit %d in %ld ms: %.*s\n", verb, o->status, o->ms,
		(int)strcspn(m, "\n"), m);
}

static int other_host(int i)
{
	return (i + rng_range(1, N_HOSTS - 1)) % N_HOSTS;
}

/* the token of the last journal record seen (0: none) */
static int64_t last_token(void)
{
	const struct jrec *r;
	size_t n = jwatch_records(G.c.jw, &r);
	return n ? r[n - 1].token : 0;
}

/* after a switchover that happened (asked at t_ask, the last record before
 * it at index w0 - 1): how long nobody wrote, from the later of the old
 * term's last record and the request to the new term's first record. A
 * stalled rollout writes nothing: not measured then. */
static void measure_handover(uint64_t t_ask, size_t w0, int64_t old_tok)
{
	if (w0 == 0 || rollout_waits())
		return;
	uint64_t t = loop_now();
	while (last_token() == old_tok && ms_since(t) < SETTLE_MS)
		pump();
	const struct jrec *r;
	size_t n = jwatch_records(G.c.jw, &r), k = w0;
	while (k < n && r[k].token == old_tok)
		k++;
	if (k >= n)
		return;
	uint64_t from = G.write_at[k - 1] > t_ask ? G.write_at[k - 1] : t_ask;
	long gap = (long)((G.write_at[k] - from) / LOOP_NS_PER_MS);
	fprintf(stderr,
		"chaos:   handover: %ld ms without a fenced write (token %" PRId64 " -> %" PRId64
		")\n",
		gap, old_tok, r[k].token);
	G.handovers++;
	if (gap > G.handover_worst)
		G.handover_worst = gap;
	if (gap > PC_TTL_MS)
		violation(NULL,
			  "a switchover left the plugin without a writing leader for %ld ms "
			  "(more than the TTL, %d ms)",
			  gap, PC_TTL_MS);
}

/* switchover from host i, to host `to` (-1: the next in line) */
static void fault_switchover(enum fault_kind k, int i, int to)
{
	struct ctl_out o;
	const char *args[] = {"switchover",
			      PC_PLUGIN,
			      "--timeout",
			      "10s",
			      to >= 0 ? "--to" : NULL,
			      to >= 0 ? G.c.host[to].node : NULL,
			      NULL};
	say(k, G.c.host[i].node, "%s%s", to >= 0 ? ", to " : "", to >= 0 ? G.c.host[to].node : "");
	note_writes();
	size_t w0 = G.n_writes;
	int64_t old_tok = last_token();
	uint64_t t_ask = loop_now();
	int st = ctl(i, &o, 15000, args);
	say_ctl("switchover", &o);
	ctl_out_free(&o);
	if (st == 0)
		measure_handover(t_ask, w0, old_tok);
}

/* pause from host i, held, then resume (from any host: it must succeed);
 * while paused a reconcile request must be refused */
static void fault_pause(int i)
{
	struct ctl_out o;
	int ms = rng_range(500, 4000);
	say(F_PAUSE, G.c.host[i].node, ", held %d ms", ms);
	int st = ctl(i, &o, 15000, (const char *const[]){"pause", PC_PLUGIN, NULL});
	say_ctl("pause", &o);
	ctl_out_free(&o);
	run_for(ms / 2);
	if (st == 0) {
		int j = other_host(i);
		st = ctl(j, &o, 15000,
			 (const char *const[]){"reconcile", PC_PLUGIN, "--timeout", "5", NULL});
		say_ctl("reconcile while paused", &o);
		if (st == 0)
			violation(&G.c.host[j], "a reconcile request was served while paused");
		ctl_out_free(&o);
	}
	run_for(ms - ms / 2);
	uint64_t t = loop_now();
	for (int j = i;; j = (j + 1) % N_HOSTS) {
		st = ctl(j, &o, 15000, (const char *const[]){"resume", PC_PLUGIN, NULL});
		say_ctl("resume", &o);
		ctl_out_free(&o);
		if (st == 0)
			break;
		if (ms_since(t) > 30000) {
			violation(NULL, "no host could resume the plugin within 30 s");
			break;
		}
	}
}

static void fault_reconcile(int i)
{
	struct ctl_out o;
	say(F_RECONCILE, G.c.host[i].node, "%s", "");
	ctl(i, &o, 15000, (const char *const[]){"reconcile", PC_PLUGIN, "--timeout", "5", NULL});
	say_ctl("reconcile", &o);
	ctl_out_free(&o);
}

/* a new label for the plugin's outputs, or (one in four) one the plugin
 * must refuse before anything is written */
static void fault_config(int i)
{
	struct host *h = &G.c.host[i];
	bool bad = rng_range(0, 3) == 0;
	char path[700], doc[64];
	snprintf(path, sizeof(path), "%s/chaos-config.json", h->dir);
	if (bad)
		snprintf(doc, sizeof(doc), "{\"label\": \"not a label %d\"}", rng_range(0, 99));
	else
		snprintf(doc, sizeof(doc), "{\"label\": \"l%d\"}", rng_range(0, 99));
	say(F_CONFIG, h->node, ", %s", doc);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	CHECK(fputs(doc, f) >= 0 && fclose(f) == 0);
	struct ctl_out o;
	int st = ctl(i, &o, 15000, (const char *const[]){"config", "set", PC_PLUGIN, path, NULL});
	say_ctl("config set", &o);
	ctl_out_free(&o);
	if (bad && st == 0)
		violation(h, "a label the plugin refuses was stored");
}

/* host i restarted with another --priority: a higher one takes the lead */
static void fault_priority(int i)
{
	struct host *h = &G.c.host[i];
	int p = (G.prio[i] + rng_range(1, 2)) % 3;
	say(F_PRIORITY, h->node, ", priority %d -> %d", G.prio[i], p);
	stop_host(i);
	G.prio[i] = p;
	start_host(i);
}

/* host i stopped, forgotten from another host, restarted later: it must
 * register again (the end checks every member) */
static void fault_forget(int i)
{
	struct host *h = &G.c.host[i];
	int down_ms = rng_range(0, 3000), j = other_host(i);
	say(F_FORGET, h->node, ", from %s, down %d ms after it exited", G.c.host[j].node, down_ms);
	stop_host(i);
	struct ctl_out o;
	ctl(j, &o, 35000,
	    (const char *const[]){"members", "forget", PC_PLUGIN, h->node, "--yes", NULL});
	say_ctl("members forget", &o);
	ctl_out_free(&o);
	run_for(down_ms);
	start_host(i);
}

static void input_key(int n, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/data/desired/k%d", PC_PREFIX, PC_PLUGIN, n);
}

/* a burst of input changes: puts, and one in four a delete */
static void fault_inputs(void)
{
	int n = rng_range(1, 12);
	say(F_INPUTS, "the inputs", ", %d changes", n);
	for (int c = 0; c < n; c++) {
		char key[128], val[32];
		input_key(rng_range(0, N_INPUTS - 1), key, sizeof(key));
		if (rng_range(0, 3) == 0) {
			tu_del(&G.c.t, key);
			continue;
		}
		snprintf(val, sizeof(val), "v%" PRIu64, ++G.input_seq);
		tu_put(&G.c.t, key, val, strlen(val));
	}
}

static const char *fail_file(int i)
{
	return G.fail_env[i] + strlen(FAIL_ENV);
}

static int release_index(const char *r)
{
	for (int i = 0; i < N_RELEASES; i++)
		if (strcmp(RELEASES[i], r) == 0)
			return i;
	return -1;
}

/* `release pin` at release `at` from host i: the CLI's exit code */
static int pin_at(int i, int at)
{
	struct ctl_out o;
	int st = ctl(i, &o, 15000,
		     (const char *const[]){"release", "pin", PC_PLUGIN, RELEASES[at], NULL});
	say_ctl("release pin", &o);
	ctl_out_free(&o);
	return st;
}

/* from t_pin plus one TTL on, no journal record of a release newer than
 * the pin at `at` (records from index w0 on) */
static void check_pin_held(size_t w0, uint64_t t_pin, int at)
{
	const struct jrec *r;
	note_writes();
	size_t n = jwatch_records(G.c.jw, &r);
	for (size_t k = w0; k < n && k < G.n_writes; k++)
		if (G.write_at[k] > t_pin + (uint64_t)PC_TTL_MS * LOOP_NS_PER_MS &&
		    release_index(r[k].release) > at)
			violation(NULL, "%s wrote for %s while the pin at %s held", r[k].node,
				  r[k].release, RELEASES[at]);
}

/* staged promotion: a pin at the oldest release a host runs (the CLI
 * refuses one older than the status's version: then the next one up;
 * never forced, a forced pin hands the state back on purpose), held
 * while the inputs change and, one time in two, a host at or below the
 * pin gets the newest file (which waits while the pin holds), then
 * unpinned. From one TTL after the pin was accepted until the unpin no
 * journal record may come from a release newer than the pin: a leader of
 * a newer release leaves at once, and one whose view lagged is fenced out
 * within the TTL */
static void fault_pin(int i)
{
	int at = NEWEST, ms = rng_range(1000, 5000), st = -1;
	for (int x = 0; x < N_HOSTS; x++)
		if (G.rel[x] < at)
			at = G.rel[x];
	say(F_PIN, G.c.host[i].node, ", at %s or the next accepted, held %d ms", RELEASES[at], ms);
	for (; at <= NEWEST && (st = pin_at(i, at)) != 0; at++)
		;
	if (st == 0) {
		G.pins++;
		note_writes();
		uint64_t t_pin = loop_now();
		size_t w0 = G.n_writes;
		fault_inputs();
		int j = -1; /* one time in two: the first host at or below the pin */
		if (rng_range(0, 1) == 0)
			for (int y = 0; y < N_HOSTS && j < 0; y++)
				if (G.rel[(i + y) % N_HOSTS] <= at && G.rel[(i + y) % N_HOSTS] < NEWEST)
					j = (i + y) % N_HOSTS;
		if (j >= 0) {
			fprintf(stderr, "chaos:   %s gets the %s file while pinned (it waits)\n",
				G.c.host[j].node, RELEASES[NEWEST]);
			G.rel[j] = NEWEST; /* what it runs once the pin is gone */
			G.rollout_begun = true;
			host_install_plugin(&G.c.host[j], RELEASES[NEWEST], "reconciler.so");
		}
		run_for(ms);
		check_pin_held(w0, t_pin, at);
	}
	/* unpin whatever happened (a refused pin may still have been written
	 * by a request that timed out): from any host, until one succeeds */
	uint64_t t = loop_now();
	for (int j = i;; j = (j + 1) % N_HOSTS) {
		struct ctl_out o;
		st = ctl(j, &o, 15000, (const char *const[]){"release", "unpin", PC_PLUGIN, NULL});
		say_ctl("release unpin", &o);
		ctl_out_free(&o);
		if (st == 0)
			break;
		if (ms_since(t) > 30000) {
			violation(NULL, "no host could unpin the plugin within 30 s");
			break;
		}
	}
}

/* host i's reconciles fail (the example plugin's LH_EXAMPLE_FAIL_FILE)
 * while the inputs change, for a while, then work again: a failing leader
 * withdraws after --unhealthy-after failures while another node can act,
 * and takes part again after its hold-down */
static void fault_broken(int i)
{
	struct host *h = &G.c.host[i];
	int ms = rng_range(1500, 6000);
	say(F_BROKEN, h->node, ", for %d ms", ms);
	FILE *f = fopen(fail_file(i), "w");
	CHECK(f != NULL && fclose(f) == 0);
	fault_inputs();
	run_for(ms);
	CHECK(unlink(fail_file(i)) == 0);
}

/* one fault, chosen, injected, held and healed */
static void one_fault(void)
{
	enum fault_kind k = (enum fault_kind)rng_range(0, F_KINDS - 1);
	int i = rng_range(0, N_HOSTS - 1);
	/* while the rollout stands still nobody writes, and faults test less:
	 * move it on more often (one draw in three is a reload then) */
	if (rng_range(0, 2) == 0 && rollout_waits())
		k = F_RELOAD;
	if (k == F_RELOAD && !any_host_behind())
		k = F_KILL; /* nothing left to roll forward */
	if (k == F_FORGET && only_host_on_newest(i))
		k = F_TERM; /* forgetting it would be a downgrade on purpose */
	if (k == F_ROLLOUT && !any_host_on_first())
		k = F_KILL; /* no 1.0.0 host left: nothing is incompatible any more */
	note_fault(k);
	switch (k) {
	case F_KILL:
	case F_TERM:
		fault_signal_restart(k, i);
		break;
	case F_STOP:
		fault_stop(i);
		break;
	case F_LINK_DOWN:
	case F_DROP_FROM_ETCD:
	case F_DROP_TO_ETCD:
		fault_network(k, i);
		break;
	case F_ETCD_KILL:
		fault_etcd(rng_range(0, N_ETCD - 1));
		break;
	case F_RELOAD:
		while (G.rel[i] == NEWEST)
			i = (i + 1) % N_HOSTS;
		fault_reload(i, rng_range(G.rel[i] + 1, NEWEST));
		break;
	case F_WORKER_KILL:
		fault_worker(FIRST_ISOLATED + i % (N_HOSTS - FIRST_ISOLATED));
		break;
	case F_SWITCHOVER:
		fault_switchover(k, i, -1);
		break;
	case F_SWITCHOVER_TO:
		fault_switchover(k, i, rng_range(0, N_HOSTS - 1));
		break;
	case F_PAUSE:
		fault_pause(i);
		break;
	case F_RECONCILE:
		fault_reconcile(i);
		break;
	case F_CONFIG:
		fault_config(i);
		break;
	case F_PRIORITY:
		fault_priority(i);
		break;
	case F_FORGET:
		fault_forget(i);
		break;
	case F_INPUTS:
		fault_inputs();
		break;
	case F_ROLLOUT:
		fault_rollout(i);
		break;
	case F_PIN:
		fault_pin(i);
		break;
	case F_BROKEN:
		fault_broken(i);
		break;
	case F_KINDS:
		break;
	}
	check_hosts_alive();
	G.faults[G.n_faults - 1].rollout_waits |= rollout_waits();
}

/* ---- the end ---- */

/* exactly one host says it leads, and it is the one the observer sees */
static void check_one_leader(void)
{
	uint64_t t = loop_now();
	char names[N_HOSTS * 4] = "";
	int leading;
	const char *seen;
	do {
		pump();
		seen = obs_leader(G.c.obs);
		leading = 0;
		names[0] = 0;
		const char *the = NULL;
		for (int i = 0; i < N_HOSTS; i++) {
			char st[32];
			host_plugin_state(&G.c.host[i], PC_PLUGIN, st, sizeof(st), NULL);
			if (strcmp(st, "leading") == 0) {
				leading++;
				the = G.c.host[i].node;
				strncat(names, the, sizeof(names) - strlen(names) - 2);
				strcat(names, " ");
			}
		}
		if (leading == 1 && seen && strcmp(seen, the) == 0) {
			fprintf(stderr, "chaos: one leader at the end: %s\n", the);
			return;
		}
		/* a deposed host's own view may lag its loss by a loop turn:
		 * look again for a while before calling it a violation */
	} while (ms_since(t) < 20000);
	fprintf(stderr, "chaos: %d hosts say they lead (%s), the observer sees %s\n", leading,
		names, seen ? seen : "none");
	violation(NULL, "not exactly one leader at the end");
}

/* the value's "release=x.y.z" field into buf ("" when absent) */
static void journal_release(const struct inv_event *e, char *buf, size_t len)
{
	const char *p = strstr((const char *)e->val, "release=");
	buf[0] = 0;
	if (p)
		snprintf(buf, len, "%.*s", (int)strcspn(p + 8, " "), p + 8);
}

/* no journal record of an older release after the first status DONE at the
 * newest; every input reflected in the outputs (invariants.h (g)) */
static void check_no_old_writes(void)
{
	struct inv_history h;
	inv_history_load(&G.c.t, PC_PREFIX, &h);
	char status_key[128], journal[128];
	snprintf(status_key, sizeof(status_key), "%s/%s/status", PC_PREFIX, PC_PLUGIN);
	snprintf(journal, sizeof(journal), "%s/%s/data/journal/", PC_PREFIX, PC_PLUGIN);
	struct release newest;
	CHECK_OK(release_parse(RELEASES[NEWEST], &newest));
	int64_t done_rev = 0;
	for (size_t i = 0; i < h.n; i++) {
		const struct inv_event *e = &h.ev[i];
		if (e->del)
			continue;
		int state;
		struct release v, m;
		if (!done_rev && strcmp(e->key, status_key) == 0 &&
		    election_decode_status(e->val, e->val_len, &state, &v, &m) == 0 &&
		    state == LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE &&
		    release_cmp(v, newest) == 0)
			done_rev = e->rev;
		if (!done_rev || strncmp(e->key, journal, strlen(journal)) != 0)
			continue;
		char rel[16];
		journal_release(e, rel, sizeof(rel));
		if (strcmp(rel, RELEASES[NEWEST]) != 0)
			violation(NULL,
				  "journal record %s of release %s at revision %" PRId64
				  ", after the rollout completed at revision %" PRId64,
				  e->key, rel, e->rev, done_rev);
	}
	if (!done_rev)
		violation(NULL, "no status DONE at the newest release in the history");
	else
		fprintf(stderr, "chaos: the rollout completed at revision %" PRId64 "\n", done_rev);
	int v = inv_check_inputs_reflected(&h, PC_PREFIX, PC_PLUGIN);
	if (v)
		violation(NULL, "%d outputs do not reflect their inputs at the end", v);
	inv_history_free(&h);
}

/* heal, roll forward, converge */
static void converge(void)
{
	check_hosts_alive();
	size_t n = G.n_writes;
	for (int i = 0; i < N_HOSTS; i++) {
		if (G.rel[i] == NEWEST)
			continue;
		fprintf(stderr, "chaos: rolling %s forward %s -> %s\n", G.c.host[i].node,
			RELEASES[G.rel[i]], RELEASES[NEWEST]);
		G.rel[i] = NEWEST;
		host_install_plugin(&G.c.host[i], RELEASES[NEWEST], "reconciler.so");
	}
	/* the last fault's dead time ends with the next write (a stalled
	 * rollout moves on once the last 1.0.0 host is reloaded) */
	uint64_t t = loop_now();
	while (G.n_writes == n && ms_since(t) < SETTLE_MS)
		pump();
	struct release newest;
	CHECK_OK(release_parse(RELEASES[NEWEST], &newest));
	for (int i = 0; i < N_HOSTS; i++)
		obs_wait_member_release(G.c.obs, G.c.host[i].node, newest, SETTLE_MS);
	obs_wait_status_done(G.c.obs, newest, SETTLE_MS);
	pc_wait_leader_other(&G.c, NULL, SETTLE_MS);
	/* any node's records: the leader may still hand over to a node of a
	 * higher priority that came back last */
	jwatch_wait(G.c.jw, NULL, jwatch_count(G.c.jw, NULL, 0) + 2, SETTLE_MS,
		    "a leader reconciles at the end");
	note_writes();
	check_hosts_alive();
}

/* every output carries its input's final value */
static bool outputs_final(void)
{
	for (int n = 0; n < N_INPUTS; n++) {
		char key[128], want[16];
		snprintf(key, sizeof(key), "%s/%s/data/out/k%d", PC_PREFIX, PC_PLUGIN, n);
		snprintf(want, sizeof(want), "final%d", n);
		size_t len;
		char *v = (char *)tu_get(&G.c.t, key, &len);
		bool ok = v && strstr(v, want);
		free(v);
		if (!ok)
			return false;
	}
	return true;
}

/* a final value into every input, then wait until the outputs show them:
 * outputs change only in a fenced write, so look again at each journal
 * record */
static void converge_inputs(void)
{
	for (int n = 0; n < N_INPUTS; n++) {
		char key[128], val[16];
		input_key(n, key, sizeof(key));
		snprintf(val, sizeof(val), "final%d", n);
		tu_put(&G.c.t, key, val, strlen(val));
	}
	uint64_t t = loop_now();
	while (!outputs_final()) {
		size_t n = G.n_writes;
		while (G.n_writes == n && ms_since(t) < SETTLE_MS)
			pump();
		if (ms_since(t) >= SETTLE_MS) {
			violation(NULL,
				  "the outputs did not show the inputs' final values within %d ms",
				  SETTLE_MS);
			return;
		}
	}
	fprintf(stderr, "chaos: every output shows its input's final value after %ld ms\n",
		ms_since(t));
}

/* the fault a dead stretch starting at `a` (a journal record) belongs to:
 * the last one injected before the next record was due (a fault injected
 * right after a record stops the next one), or -1 when none was */
static long fault_of_gap(uint64_t a)
{
	long f = -1;
	for (size_t i = 0; i < G.n_faults; i++)
		if (G.faults[i].at <= a + WRITE_DUE_MS * LOOP_NS_PER_MS)
			f = (long)i;
	return f;
}

static void report_dead_time(uint64_t chaos_end)
{
	long worst[F_KINDS] = {0}, worst_rollout = 0;
	size_t count[F_KINDS] = {0}, count_rollout = 0;
	for (size_t f = 0; f < G.n_faults; f++) {
		if (G.faults[f].rollout_waits)
			count_rollout++;
		else
			count[G.faults[f].kind]++;
	}
	/* every gap between consecutive records from the first fault until
	 * the first record after the chaos */
	for (size_t w = 0; w + 1 < G.n_writes; w++) {
		uint64_t a = G.write_at[w], b = G.write_at[w + 1];
		if (a > chaos_end)
			break;
		long f = fault_of_gap(a);
		if (f < 0)
			continue;
		long gap = (long)((b - a) / LOOP_NS_PER_MS);
		enum fault_kind k = G.faults[f].kind;
		if (G.faults[f].rollout_waits) {
			if (gap > worst_rollout)
				worst_rollout = gap;
		} else if (gap > worst[k]) {
			worst[k] = gap;
		}
	}
	for (int k = 0; k < F_KINDS; k++)
		if (count[k])
			printf("chaos: dead time %-26s %6ld ms (longest, %zu faults)\n",
			       KIND_NAME[k], worst[k], count[k]);
		else
			printf("chaos: dead time %-26s      - (none outside a waiting rollout)\n",
			       KIND_NAME[k]);
	printf("chaos: dead time %-26s %6ld ms (longest, %zu faults while a 1.0.0 member "
	       "held the newer releases back)\n",
	       "rollout under way", worst_rollout, count_rollout);
}

/* how many faults of each kind, and the switchovers' handovers */
static void report_kinds(void)
{
	char line[1024] = "";
	for (int k = 0; k < F_KINDS; k++) {
		size_t l = strlen(line);
		snprintf(line + l, sizeof(line) - l, "%s%s %zu", k ? ", " : "", KIND_NAME[k],
			 G.kind_count[k]);
	}
	printf("chaos: faults per kind: %s\n", line);
	printf("chaos: switchover handovers measured: %zu, the longest %ld ms without a fenced "
	       "write (bound: the TTL, %d ms)\n",
	       G.handovers, G.handover_worst, PC_TTL_MS);
	printf("chaos: pins the CLI accepted: %d\n", G.pins);
}

/* ---- parameters ---- */

static void read_parameters(void)
{
	const char *s = getenv("CHAOS_SEED");
	if (s && *s) {
		char *end;
		errno = 0;
		G.seed = strtoull(s, &end, 0);
		if (errno || *end) {
			fprintf(stderr, "chaos: CHAOS_SEED=%s is not a number\n", s);
			exit(99);
		}
	} else {
		uint64_t r;
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		/* short enough to retype */
		G.seed = r % 1000000000ULL;
	}
	G.rng = G.seed;
	G.seconds = DEFAULT_SECONDS;
	s = getenv("CHAOS_SECONDS");
	if (s && *s) {
		char *end;
		errno = 0;
		G.seconds = strtol(s, &end, 10);
		if (errno || *end || G.seconds < 1) {
			fprintf(stderr, "chaos: CHAOS_SECONDS=%s is not a positive number\n", s);
			exit(99);
		}
	}
	const char *b = getenv("LH_BUILDDIR");
	snprintf(G.worker, sizeof(G.worker), "%s/leasehold-worker", b && *b ? b : ".");
}

int main(void)
{
	read_parameters();
	/* stdout is the test's log too: keep the lines in order with stderr */
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("chaos: seed %llu, %ld s (again: make chaos SEED=%llu SECONDS=%ld)\n", G.seed,
	       G.seconds, G.seed, G.seconds);

	pc_init_cluster(&G.c, "lhchaos", N_HOSTS, N_ETCD);
	for (int i = 0; i < N_HOSTS; i++) {
		char env[sizeof(G.fail_env[i])];
		snprintf(env, sizeof(env), "%s%s/fail", FAIL_ENV, G.c.host[i].dir);
		memcpy(G.fail_env[i], env, sizeof(env));
		start_host(i);
	}
	obs_wait_members(G.c.obs, N_HOSTS, 30000);
	obs_wait_status_done(G.c.obs, REL(1, 0, 0), 30000);
	pc_wait_leader_other(&G.c, NULL, 30000);
	jwatch_wait(G.c.jw, NULL, 1, 30000, "the first leader reconciles");

	G.t0 = loop_now();
	while (ms_since(G.t0) < G.seconds * 1000) {
		one_fault();
		run_for(rng_range(0, 1500));
	}
	uint64_t chaos_end = loop_now();
	fprintf(stderr, "chaos: +%.1f s all faults healed; converging\n", secs_since_start());

	converge();
	converge_inputs();
	check_one_leader();
	struct inv_stats st;
	memset(&st, 0, sizeof(st));
	int v = inv_check_all(&G.c.t, PC_PREFIX, PC_PLUGIN, &st);
	G.violations += v;
	check_no_old_writes();

	printf("chaos: %zu faults, %zu writes, %zu terms, %d violations\n", G.n_faults, st.journal,
	       st.terms, G.violations);
	report_kinds();
	report_dead_time(chaos_end);
	if (G.violations) {
		hosts_dump_logs();
		printf("chaos: FAILED with seed %llu (again: make chaos SEED=%llu SECONDS=%ld)\n",
		       G.seed, G.seed, G.seconds);
		return 1;
	}
	pc_stop_all(&G.c);
	pc_fini(&G.c);
	free(G.write_at);
	free(G.faults);
	return 0;
}
