/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

static _Atomic int g_level = LOG_LVL_INFO;
static _Atomic int g_format = -1;  /* -1: not decided yet ($LEASEHOLD_LOG_FORMAT) */
static _Atomic int g_journal = -1; /* -1: not decided yet (JOURNAL_STREAM) */
static _Atomic int g_fd = STDERR_FILENO;
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

int log_parse_format(const char *s, enum log_format *ret_fmt)
{
	if (s && strcmp(s, "text") == 0)
		*ret_fmt = LOG_FORMAT_TEXT;
	else if (s && strcmp(s, "json") == 0)
		*ret_fmt = LOG_FORMAT_JSON;
	else
		return -EINVAL;
	return 0;
}

void log_set_format(enum log_format fmt)
{
	atomic_store(&g_format, (int)fmt);
}

enum log_format log_get_format(void)
{
	int f = atomic_load(&g_format);
	if (f < 0) {
		enum log_format e;
		f = log_parse_format(getenv(LOG_FORMAT_ENV), &e) == 0 ? (int)e : LOG_FORMAT_TEXT;
		atomic_store(&g_format, f);
	}
	return (enum log_format)f;
}

void log_set_journal(bool on)
{
	atomic_store(&g_journal, on ? 1 : 0);
}

bool log_stderr_is_journal(void)
{
	/* systemd sets JOURNAL_STREAM to the device and inode of the stream
	 * it connected; stderr redirected elsewhere (a file, a pipe) no
	 * longer matches, and the journal conventions would be wrong there */
	const char *s = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	int end = 0;
	if (!s || sscanf(s, "%llu:%llu%n", &dev, &ino, &end) != 2 || s[end] != '\0')
		return false;
	struct stat st;
	if (fstat(atomic_load(&g_fd), &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_fd(int fd)
{
	atomic_store(&g_fd, fd);
}

int log_get_fd(void)
{
	return atomic_load(&g_fd);
}

static bool log_journal_on(void)
{
	int j = atomic_load(&g_journal);
	if (j < 0) {
		j = log_stderr_is_journal() ? 1 : 0;
		atomic_store(&g_journal, j);
	}
	return j == 1;
}

/* ---- formatting ---- */

/* an output buffer that never overflows: writers check room first */
struct out {
	char *p;
	size_t n, cap;
};

static bool log_room(const struct out *o, size_t k, size_t reserve)
{
	return o->n + k + reserve <= o->cap;
}

static void log_put(struct out *o, const char *s, size_t k)
{
	memcpy(o->p + o->n, s, k);
	o->n += k;
}

/* log_put_text - s with control characters (but tab) as '?', as much as fits
 * before `reserve` */
static void log_put_text(struct out *o, const char *s, size_t reserve)
{
	for (; *s && log_room(o, 1, reserve); s++)
		o->p[o->n++] = (unsigned char)*s < 0x20 && *s != '\t' ? '?' : *s;
}

/* log_utf8_len - the length of the valid UTF-8 sequence at s (1..4), or 0 when
 * the bytes there are not one (bad lead, missing continuation, overlong,
 * surrogate, above U+10FFFF) */
static size_t log_utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* log_put_json_string - "s" escaped; the content is cut (at a whole character)
 * so that the closing quote and `reserve` bytes still fit. Returns false
 * when not even the quotes fit (nothing written). */
static bool log_put_json_string(struct out *o, const char *s, size_t reserve)
{
	if (!log_room(o, 2, reserve))
		return false;
	log_put(o, "\"", 1);
	const unsigned char *u = (const unsigned char *)s;
	while (*u) {
		char esc[8];
		const char *w = esc;
		size_t k = 2, adv = 1;
		esc[0] = '\\';
		switch (*u) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			if (*u < 0x20 || *u == 0x7f) {
				snprintf(esc, sizeof(esc), "\\u%04x", *u);
				k = 6;
			} else if ((adv = log_utf8_len(u)) == 0) {
				w = "\\ufffd"; /* not UTF-8: the replacement character */
				k = 6;
				adv = 1;
			} else {
				w = (const char *)u;
				k = adv;
			}
		}
		if (!log_room(o, k, 1 + reserve))
			break;
		log_put(o, w, k);
		u += adv;
	}
	log_put(o, "\"", 1);
	return true;
}

/* log_put_member - ,"key":"value" (or a bare number); skipped when the key does
 * not fit whole */
static void log_put_member(struct out *o, const char *key, const char *value, bool number,
                       size_t reserve)
{
	size_t kl = strlen(key);
	if (number) {
		const char *d = value[0] == '-' ? value + 1 : value;
		size_t vl = strlen(value);
		/* JSON's integer grammar: no leading zeros */
		number = *d && strspn(d, "0123456789") == strlen(d) && (d[0] != '0' || !d[1]) &&
		         vl <= 20;
		if (number) {
			if (log_room(o, kl + vl + 4, reserve)) {
				log_put(o, ",\"", 2);
				log_put(o, key, kl);
				log_put(o, "\":", 2);
				log_put(o, value, vl);
			}
			return;
		}
	}
	if (!log_room(o, kl + 4 + 2, reserve))
		return;
	log_put(o, ",", 1);
	log_put_json_string(o, key, reserve + 3);
	log_put(o, ":", 1);
	log_put_json_string(o, value, reserve);
}

static void log_format_time(const struct timespec *ts, char *buf, size_t len)
{
	struct tm tm;
	gmtime_r(&ts->tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (long)(ts->tv_nsec / 1000000));
}

size_t log_format_line(char *buf, size_t len, const struct log_line *l)
{
	static const char *const tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG"};
	static const char *const names[] = {"error", "warn", "info", "debug"};
	static const char *const prio[] = {"<3>", "<4>", "<6>", "<7>"}; /* syslog's */
	int lvl = l->level >= LOG_LVL_ERROR && l->level <= LOG_LVL_DEBUG ? (int)l->level : 0;
	struct out o = {buf, 0, len};
	char when[48];
	log_format_time(&l->time, when, sizeof(when));
	const char *prefix = l->prefix ? l->prefix : "";
	const char *comp = l->component ? l->component : "";
	const char *plugin = l->plugin;
	if (l->journal)
		log_put(&o, prio[lvl], 3);
	if (l->format == LOG_FORMAT_JSON) {
		/* a component "plugin NAME" is the plugin's own: name it */
		if (!plugin && strncmp(comp, "plugin ", 7) == 0) {
			plugin = comp + 7;
			comp = "plugin";
		}
		const size_t tail = 2; /* "}\n" */
		log_put(&o, "{", 1);
		log_put(&o, "\"time\":", 7);
		log_put_json_string(&o, when, tail);
		log_put_member(&o, "level", names[lvl], false, tail);
		if (*prefix)
			log_put_member(&o, "node", prefix, false, tail);
		log_put_member(&o, "component", comp, false, tail);
		if (plugin)
			log_put_member(&o, "plugin", plugin, false, tail);
		/* the fields before the message: a cut takes the message's end */
		for (size_t i = 0; i < l->n_fields; i++)
			if (l->fields[i].key && l->fields[i].value)
				log_put_member(&o, l->fields[i].key, l->fields[i].value, l->fields[i].number,
				           tail);
		log_put_member(&o, "message", l->message ? l->message : "", false, tail);
		log_put(&o, "}\n", 2);
		return o.n;
	}
	const size_t tail = 1; /* "\n" */
	if (!l->journal) { /* the journal stamps each line itself */
		log_put_text(&o, when, tail);
		log_put_text(&o, " ", tail);
	}
	log_put_text(&o, tags[lvl], tail);
	log_put_text(&o, " ", tail);
	if (*prefix) {
		log_put_text(&o, prefix, tail);
		log_put_text(&o, " ", tail);
	}
	log_put_text(&o, comp, tail);
	log_put_text(&o, ": ", tail);
	log_put_text(&o, l->message ? l->message : "", tail);
	log_put(&o, "\n", 1);
	return o.n;
}

static void log_vlog(enum log_level lvl, const char *component, const char *plugin,
                 const struct log_field *fields, size_t n_fields, const char *fmt, va_list ap)
{
	if ((int)lvl > atomic_load(&g_level))
		return;
	char msg[2048], line[8192];
	int m = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (m < 0)
		return;
	struct log_line l = {
		.level = lvl,
		.format = log_get_format(),
		.journal = log_journal_on(),
		.prefix = g_prefix,
		.component = component,
		.plugin = plugin,
		.fields = fields,
		.n_fields = n_fields,
		.message = msg,
	};
	clock_gettime(CLOCK_REALTIME, &l.time);
	size_t len = log_format_line(line, sizeof(line), &l);
	ssize_t w = write(atomic_load(&g_fd), line, len);
	(void)w;
}

void log_msg(enum log_level lvl, const char *component, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vlog(lvl, component, NULL, NULL, 0, fmt, ap);
	va_end(ap);
}

void log_msg_fields(enum log_level lvl, const char *component, const char *plugin,
                    const struct log_field *fields, size_t n_fields, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vlog(lvl, component, plugin, fields, n_fields, fmt, ap);
	va_end(ap);
}
