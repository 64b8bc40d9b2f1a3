/* SPDX-License-Identifier: MIT */
/*
 * hosts.h - real `leasehold` processes for end-to-end tests: each host gets
 * its own plugin dir, runtime dir and control socket under a temp dir; its
 * log goes to <dir>/<node>.log. Every host is killed at exit.
 */
#ifndef LH_TEST_HOSTS_H
#define LH_TEST_HOSTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/release.h"

struct host {
	char node[32];
	char dir[512]; /* host's own dir */
	char plugin_dir[600];
	char control[640]; /* ipc://... */
	char log[600];
	pid_t pid;
	int exit_status; /* after host_wait: exit code, or 128+signal */
	/* argv put before `leasehold ...` (NULL-terminated, borrowed; NULL =
	 * none), e.g. {"/usr/sbin/ip", "netns", "exec", NAME, NULL} from
	 * tests/lib/netns.h; the wrapper must exec in place so that pid stays the
	 * daemon's */
	const char *const *exec_prefix;
};

/* host_setup - make dirs for node under base (no process yet) */
void host_setup(struct host *h, const char *base, const char *node);
/* host_forget - take h off the list of hosts killed at exit and dumped by
 * hosts_dump_logs (before h's memory goes; its process is the caller's) */
void host_forget(struct host *h);
/* host_of_node - the first host set up (and not forgotten) as node; fails
 * the test when node is NULL or no such host was set up: for the tests'
 * "the leader, as one of my hosts" */
struct host *host_of_node(const char *node);
/* host_set_exec_prefix - run h's daemon through prefix from the next start
 * on (see struct host; set it after host_setup, which clears it) */
void host_set_exec_prefix(struct host *h, const char *const *prefix);
/* host_start - start leasehold for h against etcd urls with extra args
 * (NULL-terminated, may be NULL). Exits the test on failure. */
void host_start(struct host *h, const char *urls, const char *const *extra);
/* HOST_TEST_ARGS - the daemon flags most end-to-end hosts start with, to
 * open a NULL-terminated argument list: prefix, a 2 s session TTL, no wait
 * before the first reconcile, no periodic one within a test. */
#define HOST_TEST_ARGS(prefix)                                                                     \
	"--prefix", (prefix), "--ttl", "2", "--reconcile-wait", "0", "--reconcile-interval", "1h"
/* host_signal - send sig */
void host_signal(struct host *h, int sig);
/* host_wait - wait for exit up to timeout_ms; returns 0 or -ETIMEDOUT */
int host_wait(struct host *h, int timeout_ms);
/* host_install_plugin - copy the built example plugin of `release`
 * ("1.0.0"/"1.1.0"/...) into the host's plugin dir as `as` (write to a temp
 * name, then rename: the documented way). */
void host_install_plugin(struct host *h, const char *release, const char *as);
/* path of a built plugin file (static buffer) */
const char *built_plugin(const char *release);
/* path of the built binary `name` (leasehold, leaseholdctl) (static buffer):
 * in the directory hosts_set_bindir gave, else in $LH_BUILDDIR */
const char *built_binary(const char *name);
/* hosts_set_bindir - run leasehold and leaseholdctl from dir from now on
 * (copied; NULL or "": back to $LH_BUILDDIR). For leasehold-plugin-test,
 * which runs the programs installed beside it. */
void hosts_set_bindir(const char *dir);
/* dump the host log tail to stderr (for failures) */
void host_dump_log(const struct host *h);

/* ---- additions for the end-to-end CLI / plugin-dir tests ---- */

/* host_start_env - like host_start, with envp ("NAME=VALUE" strings,
 * NULL-terminated, may be NULL) added to the test's environment for the
 * daemon (and so for its plugins); an entry overrides a variable of the same
 * name. Exits the test on failure. */
void host_start_env(struct host *h, const char *urls, const char *const *extra,
		    const char *const *envp);
/* host_start_args - start leasehold with exactly args (NULL-terminated)
 * and envp as for host_start_env: none of h's flags (dirs, control socket,
 * node id), which a configuration file may then give. */
void host_start_args(struct host *h, const char *const *args, const char *const *envp);

/* host_install_file - copy the file at src into the host's plugin dir as `as`
 * with mode `mode` (write to a temp name, then rename). */
void host_install_file(struct host *h, const char *src, const char *as, mode_t mode);
/* host_install_text - same with `text` as the file's content */
void host_install_text(struct host *h, const char *text, const char *as, mode_t mode);
/* host_plugin_path - <plugin dir>/<file> into buf; returns buf */
char *host_plugin_path(const struct host *h, const char *file, char *buf, size_t len);

/* host_log_size - current size of the host's log (0 when absent) */
long host_log_size(const struct host *h);
/* host_log_since - the log from byte `from` on (malloc'd, NUL-terminated;
 * never NULL) */
char *host_log_since(const struct host *h, long from);

/* path of a built check-only test plugin, e.g. "bad-magic" ->
 * $LH_BUILDDIR/tests/plugins/.libs/bad-magic.so (static buffer) */
const char *built_test_plugin(const char *name);

/* a finished leaseholdctl run */
struct ctl_out {
	int status; /* exit code, or 128+signal */
	char *out;  /* stdout (malloc'd, NUL-terminated) */
	char *err;  /* stderr (malloc'd, NUL-terminated) */
	long ms;    /* wall time of the run */
};
/* a leaseholdctl run in progress */
struct ctl_proc {
	pid_t pid;
	int out_fd, err_fd;
	char *out, *err;
	size_t out_len, err_len;
	long start_ms;
};

/* ctl_spawn - start `leaseholdctl --control control args...` (args
 * NULL-terminated; control NULL: no --control) with stdout/stderr captured.
 * Exits the test on failure. */
void ctl_spawn(struct ctl_proc *p, const char *control, const char *const *args);
/* ctl_finish - collect p's output and exit status into o, waiting at most
 * timeout_ms; on timeout the process is killed and -ETIMEDOUT returned (o
 * untouched). 0 on success; p is consumed either way. */
int ctl_finish(struct ctl_proc *p, struct ctl_out *o, int timeout_ms);
/* ctl_running_for - collect p's output for ms; true when it is still running
 * then (has not closed its stdout and stderr) */
bool ctl_running_for(struct ctl_proc *p, int ms);
/* ctl_run - spawn + finish with a 30 s deadline (a timeout fails the test) */
void ctl_run(struct ctl_out *o, const char *control, const char *const *args);
/* host_ctl - ctl_run against h's control socket; the arguments after o are
 * leaseholdctl's (NULL-terminated). Returns o->status. */
int host_ctl(const struct host *h, struct ctl_out *o, ...) __attribute__((sentinel));
void ctl_out_free(struct ctl_out *o);
/* ctl_observer_argv - `leaseholdctl --etcd urls --prefix prefix extra...
 * args...` in observer mode (no daemon; extra and args NULL-terminated,
 * extra may be NULL), as ctl_run. Returns o->status. */
int ctl_observer_argv(struct ctl_out *o, const char *urls, const char *prefix,
		      const char *const *extra, const char *const *args);
/* ctl_observer_vrun - ctl_observer_argv with args from ap (NULL-terminated),
 * for a test's own variadic wrapper */
int ctl_observer_vrun(struct ctl_out *o, const char *urls, const char *prefix,
		      const char *const *extra, va_list ap);
/* host_wait_control - after host_start: poll `leaseholdctl version` until the
 * daemon answers (nothing to wait on from outside); after timeout_ms dump the
 * logs and exit(1). Returns the elapsed ms. */
long host_wait_control(const struct host *h, int timeout_ms);

/* hosts_terminate - SIGTERM the n hosts, then wait for each (timeout_ms
 * each; a host still running fails the test); with clean, each must have
 * exited 0 (a graceful shutdown with no sanitizer report) */
void hosts_terminate(struct host *const *hs, size_t n, int timeout_ms, bool clean);
/* hosts_dump_logs - host_dump_log for every host set up so far */
void hosts_dump_logs(void);

/* ---- parsing leaseholdctl output ---- */
/* ctl_table_cell - in a box table printed by leaseholdctl (plugins, members),
 * the cell of column `column` (header text) in the row whose first cell is
 * `row`, trimmed, into buf. Returns buf, or NULL when there is no such row or
 * column. */
const char *ctl_table_cell(const char *out, const char *row, const char *column, char *buf,
			   size_t len);
/* ctl_table_rows - number of data rows of the (first) table in out */
int ctl_table_rows(const char *out);

/* host_quiet_session_ops - session events that do nothing: for a session
 * that only holds a lease (an observer's) */
struct session_ops;
extern const struct session_ops host_quiet_session_ops;

/* ---- an observer: an election that never campaigns, fed by its own watch,
 * to wait for cluster events (leader, members, status) with a deadline ---- */
struct tu;
struct observer;
/* obs_new - observe plugin under prefix as a consumer of release rel with
 * min_reconciler/min_compatible as given. Exits the test on failure. */
struct observer *obs_new(struct tu *t, const char *prefix, const char *plugin, struct release rel,
			 struct release min_reconciler, struct release min_compatible);
void obs_free(struct observer *o);
/* current leader (borrowed until the loop runs again) or NULL */
const char *obs_leader(struct observer *o);
size_t obs_members(struct observer *o);
/* obs_members_at - how many members run release r (every member counted,
 * however many) */
size_t obs_members_at(struct observer *o, struct release r);
/* obs_campaigning - how many members campaign (have an election key) */
size_t obs_campaigning(struct observer *o);
/* the observed consumer would be ready */
bool obs_ready(struct observer *o);
/* waits: run the loop until the condition holds; after timeout_ms print
 * `what`, dump every host log and exit(1). Return the elapsed ms. */
long obs_wait_leader(struct observer *o, const char *node, int timeout_ms);
long obs_wait_members(struct observer *o, size_t n, int timeout_ms);
long obs_wait_member_release(struct observer *o, const char *node, struct release r,
			     int timeout_ms);
long obs_wait_status_done(struct observer *o, struct release version, int timeout_ms);

/* ---- leaseholdctl plugins --json ---- */
struct json_object;
/* ctl_plugins_json - `plugins --json` on h, parsed (the array; caller puts).
 * A failing run or unparsable output fails the test. */
struct json_object *ctl_plugins_json(const struct host *h);
/* ctl_plugin_json - the object of plugin `name` (matched against "name",
 * then "file") from `plugins --json` (a new reference; caller puts), or NULL */
struct json_object *ctl_plugin_json(const struct host *h, const char *name);
/* ctl_wait_plugin - poll `plugins --json` on h (the CLI gives no event to
 * wait on) until pred(plugin object or NULL when absent, arg) is true;
 * returns that object (caller puts; NULL when pred accepted absence). After
 * timeout_ms: print `what` and the last JSON, dump the host logs, exit(1). */
struct json_object *ctl_wait_plugin(const struct host *h, const char *name,
				    bool (*pred)(struct json_object *p, const void *arg),
				    const void *arg, int timeout_ms, const char *what);
/* small accessors on a plugin object: a member by dotted path ("status.version");
 * NULL when absent or JSON null */
struct json_object *jget(struct json_object *o, const char *path);
const char *jstr(struct json_object *o, const char *path);
/* the same, for a member that must be there with that type (else the test
 * fails) */
int64_t jint(struct json_object *o, const char *path);
bool jbool(struct json_object *o, const char *path);
/* host_fencing_token - plugin's fencing_token in `plugins --json` on h (0:
 * not leading); the plugin must be listed */
int64_t host_fencing_token(const struct host *h, const char *plugin);
/* host_history_json - `history plugin --json` on h, printed to stderr and
 * parsed: the array of terms, newest first (caller puts). A failing run or
 * anything but an array fails the test. */
struct json_object *host_history_json(const struct host *h, const char *plugin);

/* ---- additions for the fault suite (tests/test_faults_*.c) ---- */
/* host_plugin_state - `plugins --json` on h: the state of plugin (into buf;
 * "absent" when not listed) and its fencing token (0 when not leading) into
 * *ret_token (may be NULL). Returns buf. */
const char *host_plugin_state(const struct host *h, const char *plugin, char *buf, size_t len,
			      int64_t *ret_token);
/* host_wait_state - poll `plugins --json` until plugin's state is (is) or is
 * not (!is) `state`; returns the elapsed ms. After timeout_ms: print, dump the
 * logs, exit(1). */
long host_wait_state(const struct host *h, const char *plugin, const char *state, bool is,
		     int timeout_ms);
/* host_alive - h's process still runs (an exit is collected into
 * h->exit_status and h->pid cleared) */
bool host_alive(struct host *h);
/* host_private_copies - plugin copies (*.so) in h's private plugin dir
 * (<dir>/run/plugins.<pid>) */
int host_private_copies(const struct host *h);
/* host_mapped_copies - distinct private plugin copies mapped in h's process
 * (/proc/<pid>/maps), i.e. plugin instances loaded */
int host_mapped_copies(const struct host *h);
/* host_log_count - occurrences of needle in h's log from byte `from` on */
size_t host_log_count(const struct host *h, long from, const char *needle);
/* host_wait_log - run t's loop until needle occurs at least n times in h's
 * log from byte `from` on; after timeout_ms dump the logs and fail the
 * test (tu_wait). */
struct tu;
void host_wait_log(struct tu *t, const struct host *h, long from, const char *needle, size_t n,
		   int timeout_ms);
/* host_wait_log_any - run t's loop until needle occurs in the log of one of
 * the n hosts hs[i] from byte from[i] on (the one that acts, wherever it
 * runs); after timeout_ms fail the test (tu_wait). Borrows the arrays for
 * the call. */
void host_wait_log_any(struct tu *t, const struct host *const *hs, const long *from, size_t n,
		       const char *needle, int timeout_ms);
/* host_log_ms_after - the first log line from byte `from` on that contains
 * needle: its timestamp (the daemon's wall clock, ms of the day) minus
 * ref_ms (a wall_ms_of_day() taken by the test), in ms (negative when the
 * line is older); LONG_MIN when there is no such line */
long host_log_ms_after(const struct host *h, long from, const char *needle, long ref_ms);
/* host_worker_pid - the leasehold-worker child (--isolation process) of
 * daemon pid `daemon`, found in /proc; 0 when it has none right now */
pid_t host_worker_pid(pid_t daemon);
/* host_worker_pids - every leasehold-worker child of daemon (what runs, a
 * standby, one that stops): up to max into pids; returns how many there are */
size_t host_worker_pids(pid_t daemon, pid_t *pids, size_t max);
/* wall_ms_of_day - CLOCK_REALTIME as ms since midnight UTC (the log's clock) */
long wall_ms_of_day(void);

#endif
