/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "http/http_head.h"

static bool http_head_is_tchar(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

int http_head_parse(char *head, unsigned max_lines, char *req, size_t req_len)
{
	char *eol = strchr(head, '\n');
	if (!eol)
		return 400;
	size_t line_len = (size_t)(eol - head);
	if (line_len && head[line_len - 1] == '\r')
		line_len--;
	head[line_len] = 0;
	/* METHOD SP TARGET SP VERSION */
	char *sp1 = strchr(head, ' ');
	if (!sp1 || sp1 == head || sp1 - head > 16)
		return 400;
	for (char *p = head; p < sp1; p++)
		if (!http_head_is_tchar(*p))
			return 400;
	char *target = sp1 + 1;
	char *sp2 = strchr(target, ' ');
	if (!sp2 || target[0] != '/' || sp2 - target > 1024)
		return 400;
	for (char *p = target; p < sp2; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return 400;
	const char *version = sp2 + 1;
	if (strcmp(version, "HTTP/1.1") != 0 && strcmp(version, "HTTP/1.0") != 0)
		return strncmp(version, "HTTP/", 5) == 0 ? 505 : 400;
	/* header lines: counted and shaped, then dropped */
	unsigned lines = 0;
	for (char *l = eol + 1; *l && *l != '\r' && *l != '\n';) {
		char *e = strchr(l, '\n');
		if (!e)
			return 400;
		if (++lines > max_lines)
			return 431;
		char *colon = memchr(l, ':', (size_t)(e - l));
		if (!colon || colon == l)
			return 400;
		for (char *p = l; p < colon; p++)
			if (!http_head_is_tchar(*p))
				return 400;
		for (char *p = colon + 1; p < e; p++)
			if ((unsigned char)*p < 0x20 && *p != '\t' && !(*p == '\r' && p + 1 == e))
				return 400;
		l = e + 1;
	}
	int n = snprintf(req, req_len, "%.*s %.*s HTTP/1.1\r\nHost: leasehold\r\nConnection: close\r\n\r\n",
	                 (int)(sp1 - head), head, (int)(sp2 - target), target);
	return n > 0 && (size_t)n < req_len ? 0 : 400;
}
