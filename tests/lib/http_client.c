/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_client.h"

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct http_reply *r = ud;
	size_t add = sz * n;
	char *nb = realloc(r->body, r->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, p, add);
	r->body = nb;
	r->len += add;
	r->body[r->len] = 0;
	return add;
}

long http_request(int port, const char *method, const char *path, int timeout_ms,
                  struct http_reply *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->body = calloc(1, 1);
	CHECK(ret->body != NULL);
	char url[512];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	CURL *c = curl_easy_init();
	CHECK(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	if (method && strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (method && strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
		char *ct = NULL;
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		snprintf(ret->ctype, sizeof(ret->ctype), "%s", ct ? ct : "");
	}
	curl_easy_cleanup(c);
	return ret->status;
}

void http_reply_free(struct http_reply *r)
{
	free(r->body);
	r->body = NULL;
}

long http_status(int port, const char *path)
{
	struct http_reply r;
	long s = http_request(port, NULL, path, 5000, &r);
	http_reply_free(&r);
	return s;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int http_raw(int port, const void *req, size_t len, int timeout_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -2;
	}
	long deadline = now_ms() + timeout_ms;
	/* the peer may close before reading everything: that is an answer too */
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, (const char *)req + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break;
		struct pollfd p = {fd, POLLOUT | POLLIN, 0};
		long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			close(fd);
			return -1;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			break;
	}
	char buf[256];
	size_t got = 0;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			close(fd);
			return got >= 12 ? (int)strtol(buf + 9, NULL, 10) : -1;
		}
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = 0;
		if (got >= 12)
			break;
	}
	close(fd);
	buf[got] = 0;
	if (got < 12 || strncmp(buf, "HTTP/1.", 7) != 0)
		return 0;
	return (int)strtol(buf + 9, NULL, 10);
}

int http_open_partial(int port, const char *partial)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, partial, strlen(partial), MSG_NOSIGNAL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int http_metric(const char *text, const char *series, double *ret_value)
{
	size_t n = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ') {
			*ret_value = strtod(p + n + 1, NULL);
			return 0;
		}
	}
	return -1;
}

int http_metrics_get(int port, const char *const *series, double *values, size_t n)
{
	struct http_reply rep = {0};
	int ok = http_request(port, "GET", "/metrics", 5000, &rep) == 200;
	for (size_t i = 0; i < n; i++)
		if (!ok || http_metric(rep.body, series[i], &values[i]) < 0)
			values[i] = -1;
	http_reply_free(&rep);
	return ok ? 0 : -1;
}
