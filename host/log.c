#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static _Atomic int g_level = LOG_LVL_INFO;
static char g_prefix[64];

void log_set_level(enum log_level lvl)
{
	atomic_store(&g_level, (int)lvl);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&g_level);
}

int log_parse_level(const char *s, enum log_level *ret_lvl)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, names[i]) == 0) {
			*ret_lvl = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void log_set_prefix(const char *prefix)
{
	snprintf(g_prefix, sizeof(g_prefix), "%s", prefix ? prefix : "");
}

void log_msg(enum log_level lvl, const char *component, const char *fmt, ...)
{
	static const char *const tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};
	if ((int)lvl > atomic_load(&g_level))
		return;
	char line[2048];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s %s%s%s: ", tm.tm_hour,
	                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, tags[lvl], g_prefix,
	                 g_prefix[0] ? " " : "", component);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2;
	/* neutralise control characters coming from outside (plugin names, etcd keys) */
	for (size_t i = (size_t)n; i < len; i++)
		if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
			line[i] = '?';
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
