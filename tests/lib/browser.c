/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "browser.h"
#include "check.h"

#define BROWSER_ANSWER_MS 20000

struct browser {
	pid_t pid;
	int to_fd, from_fd; /* our ends of its fd 3 and fd 4 */
	char *buf;          /* what it sent that is not a whole message yet */
	size_t len, cap;
	int next_id;
	char session[128];
};

static struct browser *g_open; /* killed at exit */

static long browser_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

bool browser_find(char *buf, size_t len)
{
	const char *env = getenv("LH_CHROMIUM");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return access(buf, X_OK) == 0;
	}
	static const char *const names[] = {"chromium", "chromium-browser"};
	const char *path = getenv("PATH");
	for (size_t n = 0; n < 2; n++) {
		const char *p = path ? path : "/usr/bin:/bin";
		while (*p) {
			size_t dl = strcspn(p, ":");
			snprintf(buf, len, "%.*s/%s", (int)dl, p, names[n]);
			if (dl && access(buf, X_OK) == 0)
				return true;
			p += dl + (p[dl] == ':');
		}
	}
	return false;
}

static void browser_kill_at_exit(void)
{
	browser_close(g_open);
}

/* the next whole message from it (malloc'd), or NULL after deadline */
static char *browser_read(struct browser *b, long deadline)
{
	for (;;) {
		char *nul = b->len ? memchr(b->buf, 0, b->len) : NULL;
		if (nul) {
			size_t n = (size_t)(nul - b->buf);
			char *msg = strdup(b->buf);
			memmove(b->buf, nul + 1, b->len - n - 1);
			b->len -= n + 1;
			return msg;
		}
		long left = deadline - browser_now_ms();
		struct pollfd pfd = {.fd = b->from_fd, .events = POLLIN};
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return NULL;
		if (b->cap - b->len < 65536) {
			b->cap = b->cap ? b->cap * 2 : 131072;
			b->buf = realloc(b->buf, b->cap);
			CHECK(b->buf != NULL);
		}
		ssize_t r = read(b->from_fd, b->buf + b->len, b->cap - b->len);
		if (r <= 0)
			return NULL;
		b->len += (size_t)r;
	}
}

/* send method(params) (params taken; NULL: none) and wait for its result
 * (a new reference; NULL on an error answer) */
static json_object *browser_call(struct browser *b, const char *method, json_object *params,
                                 bool in_session)
{
	int id = ++b->next_id;
	json_object *m = json_object_new_object();
	json_object_object_add(m, "id", json_object_new_int(id));
	json_object_object_add(m, "method", json_object_new_string(method));
	json_object_object_add(m, "params", params ? params : json_object_new_object());
	if (in_session)
		json_object_object_add(m, "sessionId", json_object_new_string(b->session));
	const char *s = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN);
	size_t n = strlen(s) + 1; /* with its NUL */
	for (size_t off = 0; off < n;) {
		ssize_t w = write(b->to_fd, s + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		CHECK(w > 0);
		off += (size_t)w;
	}
	json_object_put(m);
	long deadline = browser_now_ms() + BROWSER_ANSWER_MS;
	for (;;) {
		char *msg = browser_read(b, deadline);
		if (!msg) {
			fprintf(stderr, "chromium did not answer %s in %d ms\n", method, BROWSER_ANSWER_MS);
			exit(1);
		}
		json_object *a = json_tokener_parse(msg), *v;
		free(msg);
		if (a && json_object_object_get_ex(a, "id", &v) && json_object_get_int(v) == id) {
			json_object *res = NULL;
			if (json_object_object_get_ex(a, "result", &v))
				res = json_object_get(v);
			else
				fprintf(stderr, "chromium: %s: %s\n", method,
				        json_object_to_json_string(a));
			json_object_put(a);
			return res;
		}
		json_object_put(a); /* an event, or another answer */
	}
}

static pid_t browser_spawn(const char *path, const char *dir, int to[2], int from[2])
{
	char profile[600], arg[700];
	snprintf(profile, sizeof(profile), "%s/chromium-profile", dir);
	mkdir(profile, 0700);
	snprintf(arg, sizeof(arg), "--user-data-dir=%s", profile);
	char log[600];
	snprintf(log, sizeof(log), "%s/chromium.log", dir);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0); /* its helpers go with it at browser_close */
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		/* fds 3 and 4 are the protocol's: move the pipes there */
		int in = dup(to[0]), out = dup(from[1]);
		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		if (in < 0 || out < 0 || dup2(in, 3) < 0 || dup2(out, 4) < 0)
			_exit(127);
		execl(path, path, "--headless", "--no-sandbox", "--disable-gpu",
		      "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
		      "--disable-extensions", "--disable-background-networking",
		      "--window-size=1280,900", "--remote-debugging-pipe", arg, "about:blank",
		      (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	return pid;
}

struct browser *browser_open(const char *path, const char *dir, const char *url)
{
	int to[2], from[2];
	CHECK(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0);
	struct browser *b = calloc(1, sizeof(*b));
	CHECK(b != NULL);
	b->pid = browser_spawn(path, dir, to, from);
	b->to_fd = to[1];
	b->from_fd = from[0];
	signal(SIGPIPE, SIG_IGN);
	g_open = b;
	atexit(browser_kill_at_exit);
	json_object *p = json_object_new_object();
	json_object_object_add(p, "url", json_object_new_string(url));
	json_object *r = browser_call(b, "Target.createTarget", p, false), *v;
	CHECK(r && json_object_object_get_ex(r, "targetId", &v));
	p = json_object_new_object();
	json_object_object_add(p, "targetId", json_object_get(v));
	json_object_object_add(p, "flatten", json_object_new_boolean(1));
	json_object_put(r);
	r = browser_call(b, "Target.attachToTarget", p, false);
	CHECK(r && json_object_object_get_ex(r, "sessionId", &v));
	snprintf(b->session, sizeof(b->session), "%s", json_object_get_string(v));
	json_object_put(r);
	return b;
}

char *browser_eval(struct browser *b, const char *expr)
{
	json_object *p = json_object_new_object();
	json_object_object_add(p, "expression", json_object_new_string(expr));
	json_object_object_add(p, "returnByValue", json_object_new_boolean(1));
	json_object *r = browser_call(b, "Runtime.evaluate", p, true), *res, *v;
	char *out = NULL;
	if (r && json_object_object_get_ex(r, "result", &res) &&
	    json_object_object_get_ex(res, "value", &v) && json_object_is_type(v, json_type_string))
		out = strdup(json_object_get_string(v));
	json_object_put(r);
	return out;
}

static int browser_b64(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int browser_screenshot(struct browser *b, const char *file)
{
	json_object *p = json_object_new_object();
	json_object_object_add(p, "format", json_object_new_string("png"));
	json_object *r = browser_call(b, "Page.captureScreenshot", p, true), *v;
	int rc = -1;
	FILE *f = NULL;
	if (r && json_object_object_get_ex(r, "data", &v) && (f = fopen(file, "wb"))) {
		const char *s = json_object_get_string(v);
		unsigned acc = 0;
		int bits = 0;
		for (; *s; s++) {
			int d = browser_b64(*s);
			if (d < 0)
				continue; /* '=' padding */
			acc = (acc << 6) | (unsigned)d;
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				fputc((int)((acc >> bits) & 0xff), f);
			}
		}
		rc = fclose(f) == 0 ? 0 : -1;
	}
	json_object_put(r);
	return rc;
}

void browser_close(struct browser *b)
{
	if (!b)
		return;
	if (g_open == b)
		g_open = NULL;
	close(b->to_fd); /* its end of the pipe closes: it exits */
	close(b->from_fd);
	kill(-b->pid, SIGTERM); /* its own process group (browser_spawn) */
	waitpid(b->pid, NULL, 0);
	free(b->buf);
	free(b);
}
