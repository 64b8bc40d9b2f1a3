/* SPDX-License-Identifier: MIT */
/*
 * test_ctl_habits_e2e - leaseholdctl's operator habits against a real
 * `leasehold` daemon (real etcd, the real example plugin): -o wide,
 * --no-headers and tables cut to $COLUMNS; -o yaml parsed by PyYAML equal
 * to -o json for every listing verb (skipped without python3-yaml); the
 * bash completion script completing verbs, sub-verbs and plugin names when
 * driven through COMP_WORDS (and the zsh one with compadd stubbed, skipped
 * without zsh); "did you mean" for a mistyped verb and plugin
 * name; --help and --version on every verb and sub-verb (history's help
 * naming every term end reason); -w redrawing `plugins` when a pause
 * changes it, not while nothing changes, and ending with 0 on SIGINT;
 * errors that name what failed (observer mode against something that is
 * not etcd: the URL and the HTTP status (404); reconcile while paused; a refused
 * switchover's JSON naming the leader).
 *
 * Waiting is for events with deadlines: the leader through an in-process
 * observer election, a redraw by reading the watching leaseholdctl's output.
 */
#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "e2e_fixture.h"
#include "election/election.h"
#include "harness.h"
#include "hosts.h"
#include "proto/leasehold.pb-c.h"
#include "testutil.h"

#define PFX "/lhhabits"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A;
static int g_http_port;
static char g_http_addr[64];
static const char *g_args[] = {HOST_TEST_ARGS(PFX), "--http", g_http_addr, NULL};

static bool p_term_recorded(void *arg)
{
	(void)arg;
	return tu_term_recorded(&T, PFX, PLUGIN);
}

static bool pl_paused(struct json_object *p, const void *arg)
{
	(void)arg;
	struct json_object *v = p ? jget(p, "paused") : NULL;
	return v && json_object_get_boolean(v);
}

/* count_lines_over - lines of s longer than w bytes */
static int count_lines_over(const char *s, size_t w)
{
	int n = 0;
	while (*s) {
		size_t l = strcspn(s, "\n");
		n += l > w;
		s += l + (s[l] == '\n');
	}
	return n;
}

static void test_wide_no_headers_columns(void)
{
	struct ctl_out o;

	/* a pipe, no $COLUMNS: nothing is cut (scripts read every cell) */
	unsetenv("COLUMNS");
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", NULL), 0);
	CHECK(strstr(o.out, "| NAME") && !strchr(o.out, '~'));
	ctl_out_free(&o);

	/* 80 columns: every line of the tables fits, cut cells end in '~' */
	setenv("COLUMNS", "80", 1);
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", NULL), 0);
	if (count_lines_over(o.out, 80))
		fprintf(stderr, "not cut to 80 columns:\n%s", o.out);
	CHECK_INT_EQ(count_lines_over(o.out, 80), 0);
	CHECK(strchr(o.out, '~') != NULL);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, NULL), 0);
	CHECK_INT_EQ(count_lines_over(o.out, 80), 0);
	ctl_out_free(&o);

	/* wide: never cut, whatever $COLUMNS says */
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", "-o", "wide", NULL), 0);
	CHECK(count_lines_over(o.out, 80) > 0);
	CHECK(strchr(o.out, '~') == NULL);
	char cell[128];
	CHECK_STR_EQ(ctl_table_cell(o.out, PLUGIN, "LEADER", cell, sizeof(cell)), "a");
	ctl_out_free(&o);
	unsetenv("COLUMNS");

	/* --no-headers: the data rows only, one per plugin */
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", "--no-headers", NULL), 0);
	CHECK(strncmp(o.out, "| " PLUGIN " ", strlen("| " PLUGIN " ")) == 0);
	CHECK(!strstr(o.out, "NAME") && !strstr(o.out, "+-") && !strstr(o.out, "Node:"));
	CHECK_INT_EQ(count_lines_over(o.out, 0), 1);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "history", PLUGIN, "--no-headers", NULL), 0);
	CHECK(!strstr(o.out, "TOKEN") && strstr(o.out, "| a "));
	ctl_out_free(&o);

	/* refused where there is no table */
	CHECK_INT_EQ(host_ctl(&A, &o, "version", "--no-headers", NULL), 2);
	CHECK(strstr(o.err, "prints no table"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "reload", "-o", "wide", NULL), 2);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "plugins", "-o", "xml", NULL), 2);
	CHECK(strstr(o.err, "table, wide, json or yaml"));
	ctl_out_free(&o);
}

/* yaml_equals_json - python3's yaml.safe_load of y equals json.load of j;
 * 0 yes, 1 no, 77 no python3 with PyYAML */
static int yaml_equals_json(const char *y, const char *j)
{
	char dir[] = "/tmp/lhyamlXXXXXX", yp[64], jp[64], cmd[512];
	CHECK(mkdtemp(dir) != NULL);
	snprintf(yp, sizeof(yp), "%s/a.yaml", dir);
	snprintf(jp, sizeof(jp), "%s/a.json", dir);
	FILE *f = fopen(yp, "w");
	CHECK(f && fputs(y, f) >= 0 && fclose(f) == 0);
	f = fopen(jp, "w");
	CHECK(f && fputs(j, f) >= 0 && fclose(f) == 0);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import sys, json\n"
		 "try:\n import yaml\n"
		 "except ImportError:\n sys.exit(77)\n"
		 "y = yaml.safe_load(open(sys.argv[1]))\n"
		 "sys.exit(0 if y == json.load(open(sys.argv[2])) else 1)' %s %s",
		 yp, jp);
	int st = system(cmd);
	unlink(yp);
	unlink(jp);
	rmdir(dir);
	CHECK(st != -1 && WIFEXITED(st));
	return WEXITSTATUS(st) == 127 ? 77 : WEXITSTATUS(st);
}

static void test_yaml_is_the_json(void)
{
	static const char *const verbs[][2] = {
	    {"plugins", NULL}, {"status", PLUGIN}, {"members", PLUGIN},
	    {"history", PLUGIN}, {"release", PLUGIN}, {"roles", "list"}};
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		struct ctl_out y, j;
		int ry = host_ctl(&A, &y, verbs[i][0], "-o", "yaml", verbs[i][1], NULL);
		int rj = host_ctl(&A, &j, verbs[i][0], "-o", "json", verbs[i][1], NULL);
		if (ry || rj)
			fprintf(stderr, "%s %s: %d %s / %d %s\n", verbs[i][0],
				verbs[i][1] ? verbs[i][1] : "", ry, y.err, rj, j.err);
		CHECK_INT_EQ(ry, 0);
		CHECK_INT_EQ(rj, 0);
		CHECK(strncmp(y.out, "---\n", 4) == 0);
		int r = yaml_equals_json(y.out, j.out);
		if (r == 1)
			fprintf(stderr, "%s: the YAML\n%s\nis not the JSON\n%s\n", verbs[i][0], y.out,
				j.out);
		ctl_out_free(&y);
		ctl_out_free(&j);
		if (r == 77)
			SKIP_CASE("python3 with PyYAML (python3-yaml) is not installed");
		CHECK_INT_EQ(r, 0);
	}
	/* a string that looks like YAML's other types stays a string */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "members", PLUGIN, "-o", "yaml", NULL), 0);
	CHECK(strstr(o.out, "\"release\": \"1.0.0\""));
	ctl_out_free(&o);
}

/* shell_output - what `SHELL -c 'HEAD WORDS TAIL'` prints, with the
 * directory of the leaseholdctl just built first on PATH; malloc'd. The
 * shell must exit 0. */
static char *shell_output(const char *shell, const char *head, const char *words,
                          const char *tail)
{
	char cmd[4096], dir[512];
	snprintf(dir, sizeof(dir), "%s", built_binary("leaseholdctl"));
	*strrchr(dir, '/') = '\0';
	snprintf(cmd, sizeof(cmd), "PATH='%s':\"$PATH\" %s -c '%s%s%s'", dir, shell, head, words,
	         tail);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	char *buf = calloc(1, 8192);
	CHECK(buf != NULL);
	size_t n = fread(buf, 1, 8191, p);
	buf[n] = '\0';
	CHECK_INT_EQ(pclose(p), 0);
	return buf;
}

/* complete - the words bash's completion offers for the command line
 * words (the last one is being completed) */
static char *complete(const char *words)
{
	char *buf = shell_output("bash",
	                         "source <(leaseholdctl completion bash) || exit 9\n"
	                         "COMP_WORDS=(",
	                         words,
	                         "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
	                         "COMP_LINE=\"${COMP_WORDS[*]}\"; COMP_POINT=${#COMP_LINE}\n"
	                         "_leaseholdctl; echo \"${COMPREPLY[*]}\"");
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* commands_of - the "Commands:" section of `--help` (cut at its end, in
 * place), from its first line on */
static char *commands_of(char *help)
{
	char *l = strstr(help, "Commands:\n");
	CHECK(l != NULL);
	char *end = strstr(l, "\n\n");
	if (end)
		end[1] = '\0';
	return l + strlen("Commands:");
}

static void test_completion_bash(void)
{
	char words[1024];
	char *c = complete("leaseholdctl pl");
	CHECK_STR_EQ(c, "plugins");
	free(c);
	CHECK_STR_EQ((c = complete("leaseholdctl roles s")), "set");
	free(c);
	CHECK_STR_EQ((c = complete("leaseholdctl completion z")), "zsh");
	free(c);
	CHECK_STR_EQ((c = complete("leaseholdctl plugins -o y")), "yaml");
	free(c);
	CHECK_STR_EQ((c = complete("leaseholdctl plugins --no-h")), "--no-headers");
	free(c);
	/* --opt=value: bash breaks the word at '=' and replaces the value */
	CHECK_STR_EQ((c = complete("leaseholdctl plugins --output=js")), "json");
	free(c);
	char conf[700];
	snprintf(conf, sizeof(conf), "%s/ctl-completion.conf", A.dir);
	FILE *f = fopen(conf, "w");
	CHECK(f != NULL && fclose(f) == 0);
	snprintf(words, sizeof(words), "leaseholdctl --config=%s/ctl-comp", A.dir);
	CHECK_STR_EQ((c = complete(words)), conf);
	free(c);
	snprintf(words, sizeof(words), "leaseholdctl --control=%s status rec", A.control);
	CHECK_STR_EQ((c = complete(words)), PLUGIN);
	free(c);
	/* plugin names come from the daemon named on the line */
	snprintf(words, sizeof(words), "leaseholdctl --control %s status rec", A.control);
	CHECK_STR_EQ((c = complete(words)), PLUGIN);
	free(c);
	snprintf(words, sizeof(words), "leaseholdctl --control %s members f", A.control);
	CHECK_STR_EQ((c = complete(words)), "forget");
	free(c);
	/* every verb of the help is offered first */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "--help", NULL), 0);
	c = complete("leaseholdctl \"\"");
	for (const char *l = commands_of(o.out); l && (l = strstr(l, "\n  ")); l++) {
		char verb[64];
		if (sscanf(l, "\n  %63[a-z-]", verb) != 1)
			break;
		char pat[80];
		snprintf(pat, sizeof(pat), " %s ", verb);
		char padded[4200];
		snprintf(padded, sizeof(padded), " %s ", c);
		if (!strstr(padded, pat))
			fprintf(stderr, "completion lacks '%s': %s\n", verb, c);
		CHECK(strstr(padded, pat) != NULL);
	}
	free(c);
	ctl_out_free(&o);
}

/* zsh_complete - what the zsh script offers for words (a zsh array
 * literal, the last word being completed): compadd, _describe and compset stubbed
 * to print what they are given */
static char *zsh_complete(const char *words)
{
	return shell_output("zsh -f",
	                    "compadd() { print -r -- \"compadd $*\" }\n"
	                    "_describe() { print -r -- \"describe ${(P)2}\" }\n_files() { print files }\n"
	                    "compset() { print -r -- \"compset $*\" }\n"
	                    "eval \"$(leaseholdctl completion zsh)\" >/dev/null\n"
	                    "words=(",
	                    words, "); CURRENT=${#words}; _leaseholdctl");
}

static void test_completion_zsh(void)
{
	char words[1024];
	if (system("command -v zsh >/dev/null 2>&1") != 0)
		SKIP_CASE("zsh is not installed");
	char *c = zsh_complete("leaseholdctl pl");
	CHECK(strncmp(c, "describe ", 9) == 0 && strstr(c, " plugins:list every plugin"));
	free(c);
	CHECK_STR_EQ((c = zsh_complete("leaseholdctl roles s")), "compadd -- list set clear\n");
	free(c);
	CHECK_STR_EQ((c = zsh_complete("leaseholdctl plugins -o y")), "compadd table wide json yaml\n");
	free(c);
	CHECK_STR_EQ((c = zsh_complete("leaseholdctl plugins --output=j")),
		     "compset -P 1 *=\ncompadd table wide json yaml\n");
	free(c);
	CHECK_STR_EQ((c = zsh_complete("leaseholdctl --config=/e")), "compset -P 1 *=\nfiles\n");
	free(c);
	snprintf(words, sizeof(words), "leaseholdctl --control %s status rec", A.control);
	c = zsh_complete(words);
	CHECK(strncmp(c, "compadd -- ", 11) == 0 && strstr(c, " " PLUGIN));
	free(c);
}

static void test_did_you_mean(void)
{
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&A, &o, "plugns", NULL), 2);
	CHECK(strstr(o.err, "unknown command 'plugns' (did you mean 'plugins'?)"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "rols", "list", NULL), 2);
	CHECK(strstr(o.err, "did you mean 'roles'?"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "status", "reconciller", NULL), 2);
	CHECK(strstr(o.err, "did you mean '" PLUGIN "'?"));
	ctl_out_free(&o);
	/* nothing near: no suggestion */
	CHECK_INT_EQ(host_ctl(&A, &o, "status", "zzzzzzzz", NULL), 2);
	CHECK(!strstr(o.err, "did you mean"));
	ctl_out_free(&o);
}

/* every verb and sub-verb of the help: --help prints its usage, exit 0;
 * --version prints the version, exit 0 */
static void test_help_and_version_everywhere(void)
{
	struct ctl_out o, h;
	CHECK_INT_EQ(host_ctl(&A, &o, "--help", NULL), 0);
	size_t n = 0;
	for (const char *l = commands_of(o.out); l && (l = strstr(l, "\n  ")); l++) {
		char w1[64], w2[64] = "";
		int k = sscanf(l, "\n  %63[a-z-] %63[a-z]", w1, w2);
		if (k < 1)
			break;
		/* a second word in lower case is a sub-verb (roles set, config get) */
		bool sub = k == 2;
		CHECK_INT_EQ(host_ctl(&A, &h, w1, sub ? w2 : "--help", sub ? "--help" : NULL, NULL), 0);
		if (!strstr(h.out, "Usage: leaseholdctl") || !strstr(h.out, w1))
			fprintf(stderr, "%s %s --help printed:\n%s%s\n", w1, w2, h.out, h.err);
		CHECK(strstr(h.out, "Usage: leaseholdctl") && strstr(h.out, w1));
		ctl_out_free(&h);
		CHECK_INT_EQ(host_ctl(&A, &h, w1, sub ? w2 : "--version", sub ? "--version" : NULL,
				      NULL),
			     0);
		if (strncmp(h.out, "leaseholdctl ", 13) != 0)
			fprintf(stderr, "%s %s --version printed:\n%s%s\n", w1, w2, h.out, h.err);
		CHECK(strncmp(h.out, "leaseholdctl ", 13) == 0);
		ctl_out_free(&h);
		n++;
	}
	CHECK(n >= 20);
	ctl_out_free(&o);

	/* the groups and the sub-verbs the issue names */
	CHECK_INT_EQ(host_ctl(&A, &o, "config", "--help", NULL), 0);
	CHECK(strstr(o.out, "config get") && strstr(o.out, "config edit"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "members", "forget", "--help", NULL), 0);
	CHECK(strstr(o.out, "members forget NAME NODE"));
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "roles", "--help", NULL), 0);
	ctl_out_free(&o);

	/* history names every end reason the daemon records */
	CHECK_INT_EQ(host_ctl(&A, &o, "history", "--help", NULL), 0);
	const ProtobufCEnumDescriptor *d = &leasehold__term__end_reason__descriptor;
	for (unsigned i = 0; i < d->n_values; i++) {
		const char *r = election_term_end_name(d->values[i].value);
		char pat[64];
		snprintf(pat, sizeof(pat), " %s", r);
		if (r[0] && !strstr(o.out, pat))
			fprintf(stderr, "history --help lacks '%s'\n", r);
		CHECK(!r[0] || strstr(o.out, pat));
	}
	ctl_out_free(&o);
}

static long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* wait_output - read p's output until it holds needle n times; false after
 * timeout_ms */
static bool wait_output(struct ctl_proc *p, const char *needle, int n, int timeout_ms)
{
	long end = mono_ms() + timeout_ms;
	for (;;) {
		int seen = 0;
		for (const char *s = p->out; s && (s = strstr(s, needle)); s++)
			seen++;
		if (seen >= n)
			return true;
		if (mono_ms() >= end || !ctl_running_for(p, 100))
			return false;
	}
}

/* the title of each drawing of `plugins` */
#define DRAW "+ Node: a "

static void test_watch_redraws_on_change(void)
{
	struct ctl_proc p;
	struct ctl_out o;
	const char *args[] = {"plugins", "-w", NULL};

	ctl_spawn(&p, A.control, args);
	CHECK(wait_output(&p, DRAW, 1, 15000));
	/* a redraw starts with the time: one so far */
	CHECK(strncmp(p.out, "20", 2) == 0 && p.out[19] == 'Z');
	/* nothing changes: no redraw over a few polls (a bounded window) */
	CHECK(!wait_output(&p, DRAW, 2, 1600));

	CHECK_INT_EQ(host_ctl(&A, &o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	CHECK(wait_output(&p, "paused", 1, 15000));
	CHECK_INT_EQ(host_ctl(&A, &o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	CHECK(wait_output(&p, DRAW, 3, 15000));

	kill(p.pid, SIGINT);
	CHECK_INT_EQ(ctl_finish(&p, &o, 10000), 0);
	CHECK_INT_EQ(o.status, 0);
	ctl_out_free(&o);

	/* only where it can redraw */
	CHECK_INT_EQ(host_ctl(&A, &o, "status", PLUGIN, "-w", NULL), 2);
	CHECK(strstr(o.err, "does not take --watch"));
	ctl_out_free(&o);
}

/* errors that name what failed: observer mode pointed at something that is
 * not etcd names the URL and the HTTP status; a reconcile while paused says
 * "paused"; a refused switchover's JSON says who leads */
static void test_errors_name_what_failed(void)
{
	struct ctl_out o;
	char url[96], want[160];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", g_http_port);
	const char *args[] = {"--etcd", url, "plugins", NULL};
	ctl_run(&o, NULL, args);
	snprintf(want, sizeof(want), "etcd: request failed: %s/v3/", url);
	if (!strstr(o.err, want) || !strstr(o.err, ": HTTP 404"))
		fprintf(stderr, "observer against the HTTP endpoint said: %s\n", o.err);
	CHECK_INT_EQ(o.status, 1);
	CHECK(strstr(o.err, want) && strstr(o.err, ": HTTP 404"));
	ctl_out_free(&o);

	CHECK_INT_EQ(host_ctl(&A, &o, "pause", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	/* the pause reaches a's view through its watch, after the verb's reply */
	json_object_put(ctl_wait_plugin(&A, PLUGIN, pl_paused, NULL, 10000, "a sees the pause"));
	CHECK_INT_EQ(host_ctl(&A, &o, "reconcile", PLUGIN, NULL), 2);
	CHECK(strstr(o.err, "paused") && !strstr(o.err, "busy"));
	ctl_out_free(&o);
	/* refused while paused: who leads is in the JSON */
	CHECK_INT_EQ(host_ctl(&A, &o, "switchover", PLUGIN, "-o", "json", NULL), 2);
	json_object *j = json_tokener_parse(o.out);
	CHECK(j != NULL);
	CHECK_STR_EQ(jstr(j, "leader"), "a");
	CHECK(jstr(j, "error") != NULL);
	json_object_put(j);
	ctl_out_free(&o);
	CHECK_INT_EQ(host_ctl(&A, &o, "resume", PLUGIN, NULL), 0);
	ctl_out_free(&o);
}

int main(void)
{
	int port[1];
	CHECK_OK(harness_free_ports(port, 1));
	g_http_port = port[0];
	snprintf(g_http_addr, sizeof(g_http_addr), "127.0.0.1:%d", g_http_port);
	e2e_start(&g_etcd, &T, (struct host *const[]){&A, NULL}, &g_obs, PFX, PLUGIN);
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_start(&A, harness_etcd_urls(g_etcd), g_args);
	obs_wait_leader(g_obs, "a", 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);
	/* the term's history record follows the status DONE write */
	tu_wait(&T, p_term_recorded, NULL, 10000, "a's term in the history");

	RUN(test_wide_no_headers_columns);
	RUN(test_yaml_is_the_json);
	RUN(test_completion_bash);
	RUN(test_completion_zsh);
	RUN(test_did_you_mean);
	RUN(test_help_and_version_everywhere);
	RUN(test_watch_redraws_on_change);
	RUN(test_errors_name_what_failed);

	host_signal(&A, SIGTERM);
	CHECK_OK(host_wait(&A, 15000));
	e2e_stop(g_etcd, &T, g_obs);
	return CHECK_EXIT();
}
