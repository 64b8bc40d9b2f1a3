/* SPDX-License-Identifier: MIT */
/*
 * test_log - the log line formats (host/base/log.h):
 *  - text: RFC 3339 UTC time with milliseconds, level, node, component,
 *    message; control characters masked;
 *  - json: one object per line with time, level, node, component, plugin
 *    (also from a "plugin NAME" component), message and the fields (numbers
 *    unquoted), parsed back with json-c in strict UTF-8 mode;
 *  - journal: a "<N>" syslog priority first, no time in text;
 *  - garbage: random bytes in every string and cut buffers of every size
 *    still give one valid JSON object on one line;
 *  - a real daemon (real etcd, the example plugin) with --log-format json
 *    writes nothing but JSON lines, the election's fencing token as a
 *    number and the loaded release; with JOURNAL_STREAM naming its stderr
 *    it writes priority prefixes and no time; a bad --log-format exits 2;
 *  - a plugin's own stdout/stderr in a leasehold-worker is relayed as log
 *    lines with its name, also what it wrote just before it crashed.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "base/log.h"

/* json-c, strict, UTF-8 validated; NULL when s is not exactly one object
 * followed by "\n" */
static struct json_object *parse_line(const char *s, size_t len)
{
	if (len == 0 || s[len - 1] != '\n' || memchr(s, '\n', len - 1))
		return NULL;
	struct json_tokener *tok = json_tokener_new();
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *o = json_tokener_parse_ex(tok, s, (int)len - 1);
	bool ok = o && json_tokener_get_error(tok) == json_tokener_success &&
	          json_tokener_get_parse_end(tok) == len - 1 &&
	          json_object_is_type(o, json_type_object);
	json_tokener_free(tok);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const char *jfield(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static const struct timespec T0 = {1767323045, 678900000}; /* 2026-01-02T03:04:05.678Z */

static void test_text(void)
{
	char buf[512];
	struct log_line l = {.time = T0, .level = LOG_LVL_WARN, .prefix = "node1",
	                     .component = "election", .message = "a\x01" "b\tc\nd"};
	size_t n = log_format_line(buf, sizeof(buf), &l);
	buf[n] = 0;
	CHECK_STR_EQ(buf, "2026-01-02T03:04:05.678Z WARN  node1 election: a?b\tc?d\n");
	l.journal = true;
	l.level = LOG_LVL_ERROR;
	n = log_format_line(buf, sizeof(buf), &l);
	buf[n] = 0;
	CHECK_STR_EQ(buf, "<3>ERROR node1 election: a?b\tc?d\n");
	l.level = LOG_LVL_DEBUG;
	l.prefix = "";
	n = log_format_line(buf, sizeof(buf), &l);
	buf[n] = 0;
	CHECK_STR_EQ(buf, "<7>DEBUG election: a?b\tc?d\n");
	/* cut: still one line */
	char big[3000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	l.message = big;
	l.journal = false;
	n = log_format_line(buf, 100, &l);
	CHECK(n <= 100 && buf[n - 1] == '\n' && !memchr(buf, '\n', n - 1));
}

static void test_json(void)
{
	char buf[1024];
	const struct log_field f[] = {{"token", "42", true}, {"release", "1.2.3", false},
	                              {"odd", "12x", true}, {"neg", "-7", true},
	                              {"zeros", "007", true}, {"zero", "0", true}};
	struct log_line l = {.time = T0, .level = LOG_LVL_INFO, .format = LOG_FORMAT_JSON,
	                     .prefix = "node\"1", .component = "election", .plugin = "rec",
	                     .fields = f, .n_fields = 6,
	                     .message = "quote\" backslash\\ nl\n tab\t ctl\x1f del\x7f \xc3\xa9"};
	size_t n = log_format_line(buf, sizeof(buf), &l);
	struct json_object *o = parse_line(buf, n);
	CHECK(o != NULL);
	CHECK_STR_EQ(jfield(o, "time"), "2026-01-02T03:04:05.678Z");
	CHECK_STR_EQ(jfield(o, "level"), "info");
	CHECK_STR_EQ(jfield(o, "node"), "node\"1");
	CHECK_STR_EQ(jfield(o, "component"), "election");
	CHECK_STR_EQ(jfield(o, "plugin"), "rec");
	CHECK_STR_EQ(jfield(o, "message"), l.message);
	struct json_object *v;
	CHECK(json_object_object_get_ex(o, "token", &v) && json_object_is_type(v, json_type_int));
	CHECK_INT_EQ(json_object_get_int64(v), 42);
	CHECK(json_object_object_get_ex(o, "neg", &v) && json_object_get_int64(v) == -7);
	CHECK(json_object_object_get_ex(o, "odd", &v) && json_object_is_type(v, json_type_string));
	CHECK_STR_EQ(jfield(o, "zeros"), "007"); /* a string: JSON has no leading zeros */
	CHECK(json_object_object_get_ex(o, "zeros", &v) && json_object_is_type(v, json_type_string));
	CHECK(json_object_object_get_ex(o, "zero", &v) && json_object_is_type(v, json_type_int));
	CHECK_STR_EQ(jfield(o, "release"), "1.2.3");
	json_object_put(o);

	/* a plugin's own component names it */
	struct log_line p = {.time = T0, .level = LOG_LVL_ERROR, .format = LOG_FORMAT_JSON,
	                     .component = "plugin reconciler", .message = "m"};
	n = log_format_line(buf, sizeof(buf), &p);
	o = parse_line(buf, n);
	CHECK(o != NULL);
	CHECK_STR_EQ(jfield(o, "component"), "plugin");
	CHECK_STR_EQ(jfield(o, "plugin"), "reconciler");
	CHECK(jfield(o, "node") == NULL);
	json_object_put(o);

	/* invalid UTF-8 becomes U+FFFD; overlong and surrogate forms too */
	p.message = "a\xff" "b\xc0\xaf" "c\xed\xa0\x80" "d\xf4\x90\x80\x80" "e\xe2\x82";
	n = log_format_line(buf, sizeof(buf), &p);
	o = parse_line(buf, n);
	CHECK(o != NULL);
	CHECK(strncmp(jfield(o, "message"), "a\xef\xbf\xbd" "b", 5) == 0);
	CHECK(strchr(jfield(o, "message"), 'e') != NULL);
	json_object_put(o);

	/* journal: the priority, then the object (it keeps its time) */
	p.journal = true;
	p.message = "m";
	n = log_format_line(buf, sizeof(buf), &p);
	CHECK(strncmp(buf, "<3>{", 4) == 0);
	o = parse_line(buf + 3, n - 3);
	CHECK(o != NULL && jfield(o, "time") != NULL);
	json_object_put(o);
}

static char *random_string(size_t max)
{
	size_t n = (size_t)rand() % max;
	char *s = malloc(n + 1);
	CHECK(s != NULL);
	for (size_t i = 0; i < n; i++) {
		int k = rand() % 4;
		/* mostly the bytes that matter: controls, quotes, high bytes */
		s[i] = (char)(k == 0   ? 1 + rand() % 0x1f
		              : k == 1 ? "\"\\\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f"[rand() % 11]
		              : k == 2 ? 0x80 + rand() % 0x80
		                       : 0x20 + rand() % 0x5f);
		if (!s[i])
			s[i] = 'z';
	}
	s[n] = 0;
	return s;
}

static void test_json_garbage(void)
{
	srand(12345);
	static char buf[20000];
	for (int iter = 0; iter < 20000; iter++) {
		char *msg = random_string(iter % 10 == 0 ? 5000 : 300);
		char *pre = random_string(40), *comp = random_string(40), *plug = random_string(40);
		char *v1 = random_string(100), *v2 = random_string(30);
		const struct log_field f[] = {{"k1", v1, false}, {"k2", v2, true}};
		struct log_line l = {.time = {rand(), rand() % 1000000000}, .level = rand() % 4,
		                     .format = LOG_FORMAT_JSON, .journal = rand() % 2,
		                     .prefix = pre, .component = comp,
		                     .plugin = rand() % 2 ? plug : NULL, .fields = f,
		                     .n_fields = 2, .message = msg};
		size_t cap = iter % 3 == 0 ? 64 + (size_t)rand() % 600 : sizeof(buf);
		size_t n = log_format_line(buf, cap, &l);
		CHECK(n <= cap);
		size_t skip = l.journal ? 3 : 0;
		struct json_object *o = parse_line(buf + skip, n - skip);
		if (!o) {
			fprintf(stderr, "not one JSON object (cap %zu): %.*s\n", cap, (int)n, buf);
			exit(1);
		}
		CHECK(jfield(o, "time") && jfield(o, "level"));
		/* with room, nothing is cut */
		if (cap == sizeof(buf)) {
			CHECK(jfield(o, "message") != NULL);
			CHECK(jfield(o, "k1") != NULL);
		}
		json_object_put(o);
		/* the text format of the same: one line, no control bytes */
		l.format = LOG_FORMAT_TEXT;
		n = log_format_line(buf, cap, &l);
		CHECK(n <= cap && buf[n - 1] == '\n');
		for (size_t i = 0; i + 1 < n; i++)
			CHECK((unsigned char)buf[i] >= 0x20 || buf[i] == '\t');
		free(msg);
		free(pre);
		free(comp);
		free(plug);
		free(v1);
		free(v2);
	}
}

static void test_parse(void)
{
	enum log_format f;
	CHECK_OK(log_parse_format("json", &f));
	CHECK_INT_EQ(f, LOG_FORMAT_JSON);
	CHECK_OK(log_parse_format("text", &f));
	CHECK_INT_EQ(f, LOG_FORMAT_TEXT);
	CHECK(log_parse_format("JSON", &f) < 0);
	CHECK(log_parse_format("", &f) < 0);
	CHECK(log_parse_format(NULL, &f) < 0);
	/* JOURNAL_STREAM must name stderr exactly */
	struct stat st;
	CHECK_OK(fstat(STDERR_FILENO, &st));
	char v[64];
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", v, 1);
	CHECK(log_stderr_is_journal());
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino + 1);
	setenv("JOURNAL_STREAM", v, 1);
	CHECK(!log_stderr_is_journal());
	static const char *const bad[] = {"", "1", "1:", ":1", "1:2x", "x:y", "1:2:3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("JOURNAL_STREAM", bad[i], 1);
		CHECK(!log_stderr_is_journal());
	}
	unsetenv("JOURNAL_STREAM");
	CHECK(!log_stderr_is_journal());
}

/* ---- a real daemon ---- */

static struct harness_etcd *g_etcd;

static void test_daemon_json(void)
{
	struct host h;
	host_setup(&h, harness_dir(g_etcd), "j");
	host_install_plugin(&h, "1.0.0", "reconciler.so");
	const char *const args[] = {"--prefix", "/lhlogj", "--log-format", "json", "--ttl", "5",
	                            "--isolation", "thread", NULL};
	host_start(&h, harness_etcd_urls(g_etcd), args);
	host_wait_state(&h, "reconciler", "leading", true, 60000);
	host_signal(&h, SIGTERM);
	CHECK_OK(host_wait(&h, 30000));
	CHECK_INT_EQ(h.exit_status, 0);
	char *log = host_log_since(&h, 0);
	int lines = 0;
	bool startup = false, elected = false, loaded = false;
	for (char *s = log, *nl; *s; s = nl + 1) {
		nl = strchr(s, '\n');
		CHECK(nl != NULL);
		struct json_object *o = parse_line(s, (size_t)(nl - s + 1));
		if (!o) {
			fprintf(stderr, "not a JSON line: %.*s\n", (int)(nl - s), s);
			exit(1);
		}
		lines++;
		CHECK_STR_EQ(jfield(o, "node"), "j");
		const char *m = jfield(o, "message");
		struct json_object *v;
		if (strstr(m, "starting: plugin ABI")) {
			startup = true;
			CHECK_STR_EQ(jfield(o, "version"), PACKAGE_VERSION);
			CHECK_STR_EQ(jfield(o, "isolation"), "thread");
			CHECK(strstr(jfield(o, "flags"), "--log-format json") != NULL);
		}
		if (strstr(m, "elected (fencing token")) {
			elected = true;
			CHECK_STR_EQ(jfield(o, "plugin"), "reconciler");
			CHECK(json_object_object_get_ex(o, "token", &v) &&
			      json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0);
		}
		if (strstr(m, "plugin reconciler 1.0.0 loaded")) {
			loaded = true;
			CHECK_STR_EQ(jfield(o, "release"), "1.0.0");
			CHECK_STR_EQ(jfield(o, "plugin"), "reconciler");
		}
		json_object_put(o);
	}
	fprintf(stderr, "  %d JSON lines\n", lines);
	CHECK(startup && elected && loaded);
	free(log);
}

static void test_daemon_journal_and_bad_flag(void)
{
	struct host h;
	host_setup(&h, harness_dir(g_etcd), "jn");
	/* the log file exists before the start: its dev:ino is the "journal" */
	FILE *f = fopen(h.log, "a");
	CHECK(f != NULL);
	fclose(f);
	struct stat st;
	CHECK_OK(stat(h.log, &st));
	char env[96];
	snprintf(env, sizeof(env), "JOURNAL_STREAM=%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino);
	const char *const envp[] = {env, NULL};
	const char *const args[] = {"--prefix", "/lhlogjn", "--ttl", "5", NULL};
	host_start_env(&h, harness_etcd_urls(g_etcd), args, envp);
	host_wait_control(&h, 30000);
	host_signal(&h, SIGTERM);
	CHECK_OK(host_wait(&h, 30000));
	CHECK_INT_EQ(h.exit_status, 0);
	char *log = host_log_since(&h, 0);
	CHECK(strncmp(log, "<6>INFO  jn daemon: leasehold ", 30) == 0);
	CHECK(strstr(log, "(journal)") != NULL);
	for (char *s = log; *s; s = strchr(s, '\n') + 1)
		CHECK(s[0] == '<' && s[1] >= '3' && s[1] <= '7' && s[2] == '>' &&
		      (strncmp(s + 3, "INFO ", 5) == 0 || strncmp(s + 3, "WARN ", 5) == 0 ||
		       strncmp(s + 3, "ERROR", 5) == 0 || strncmp(s + 3, "DEBUG", 5) == 0));
	free(log);

	/* a bad --log-format: usage error */
	struct host b;
	host_setup(&b, harness_dir(g_etcd), "bad");
	const char *const bad[] = {"--log-format", "xml", NULL};
	host_start(&b, harness_etcd_urls(g_etcd), bad);
	CHECK_OK(host_wait(&b, 30000));
	CHECK_INT_EQ(b.exit_status, 2);
	CHECK(host_log_count(&b, 0, "--log-format must be text or json") == 1);
}

struct log_wait {
	const struct host *h;
	const char *needle;
};

static bool log_has(struct json_object *p, const void *arg)
{
	(void)p;
	const struct log_wait *w = arg;
	return host_log_count(w->h, 0, w->needle) > 0;
}

/* process mode: what the plugin writes to stdout/stderr itself comes out as
 * log lines with its name, the last words of a crash included */
static void test_worker_stray_output_prefixed(void)
{
	struct host h;
	host_setup(&h, harness_dir(g_etcd), "noisy");
	host_install_file(&h, built_test_plugin("noisy"), "noisy.so", 0644);
	const char *const args[] = {"--prefix", "/lhlognoisy", "--ttl", "5", "--isolation",
	                            "process", NULL};
	const char *const env[] = {"LH_NOISY_ABORT=1", NULL};
	host_start_env(&h, harness_etcd_urls(g_etcd), args, env);
	static const char *const lines[] = {
		"plugin noisy: noisy says hello on stderr",
		"plugin noisy: noisy says hello on stdout",
		"plugin noisy: noisy last words? without a newline",
	};
	for (size_t i = 0; i < 3; i++) {
		struct log_wait w = {&h, lines[i]};
		json_object_put(ctl_wait_plugin(&h, "noisy", log_has, &w, 60000, lines[i]));
	}
	host_signal(&h, SIGTERM);
	CHECK_OK(host_wait(&h, 30000));
	/* every one of them prefixed (the worker restarts: several times) */
	CHECK_INT_EQ(host_log_count(&h, 0, "noisy says hello on stderr"),
	             host_log_count(&h, 0, lines[0]));
	CHECK_INT_EQ(host_log_count(&h, 0, "noisy last words"), host_log_count(&h, 0, lines[2]));
	CHECK(host_log_count(&h, 0, "INFO  worker noisy[") > 0);
}

int main(void)
{
	log_set_journal(false);
	RUN(test_text);
	RUN(test_json);
	RUN(test_json_garbage);
	RUN(test_parse);
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	RUN(test_daemon_json);
	RUN(test_daemon_journal_and_bad_flag);
	RUN(test_worker_stray_output_prefixed);
	harness_etcd_free(g_etcd);
	return CHECK_EXIT();
}
