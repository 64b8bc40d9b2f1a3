/* SPDX-License-Identifier: MIT */
/*
 * log.h - the host's logger. One line per message on stderr, in one of two
 * formats:
 *   text: 2026-01-02T03:04:05.678Z INFO  <prefix> <component>: <message>
 *   json: {"time":"2026-01-02T03:04:05.678Z","level":"info","node":"<prefix>",
 *          "component":"...","plugin":"...", <fields>, "message":"..."}
 * Time is RFC 3339 in UTC with milliseconds. When stderr is the systemd
 * journal (JOURNAL_STREAM names stderr's device and inode), every line
 * starts with a syslog priority "<N>" (so `journalctl -p err` works) and
 * the text format leaves the time out (the journal stamps each line).
 *
 * Thread-safe (one write(2) per line). Library-like modules (etcd client,
 * codecs) do not log above debug; the daemon layer logs errors where it
 * handles them, once. Bytes from outside (plugin names, etcd keys, plugin
 * messages) are made harmless: control characters become '?' in text; JSON
 * escapes them and replaces invalid UTF-8 with U+FFFD.
 */
#ifndef LH_LOG_H
#define LH_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON = 1 };

/* the environment variable that carries the format to processes the daemon
 * starts (plugin workers), and a default for the daemon itself */
#define LOG_FORMAT_ENV "LEASEHOLD_LOG_FORMAT"

/* log_set_level / log_get_level - the global threshold (default info). */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* log_parse_level - "error|warn|info|debug" -> level; returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *ret_lvl);
/* log_set_prefix - a tag put on every line (the node id; "node" in JSON); copied. */
void log_set_prefix(const char *prefix);
/* log_parse_format - "text|json" -> format; returns 0 or -EINVAL. */
int log_parse_format(const char *s, enum log_format *ret_fmt);
/* log_set_format - the line format (default: $LEASEHOLD_LOG_FORMAT, else text). */
void log_set_format(enum log_format fmt);
enum log_format log_get_format(void);
/* log_set_journal - force the journal conventions on or off (default: on
 * when JOURNAL_STREAM names stderr, see log_stderr_is_journal). */
void log_set_journal(bool on);
/* log_stderr_is_journal - JOURNAL_STREAM ("DEV:INO") names the fd the
 * logger writes to (fstat). */
bool log_stderr_is_journal(void);
/* log_set_fd - write lines to fd instead of stderr (not owned; the caller
 * keeps it open while anything may log). See worker_stderr_relay.h. */
void log_set_fd(int fd);
/* log_get_fd - the fd lines go to (async-signal-safe: for crash reports) */
int log_get_fd(void);

/* A field of a structured message, shown in JSON only (the text line says
 * it in the message). value is a string; number = true writes it unquoted
 * when it is a decimal integer. Keys must not repeat the fixed ones. */
struct log_field {
	const char *key;
	const char *value;
	bool number;
};

void log_msg(enum log_level lvl, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* log_msg_fields - log_msg with the plugin the message is about (NULL =
 * none; a component "plugin NAME" names its plugin itself) and fields. */
void log_msg_fields(enum log_level lvl, const char *component, const char *plugin,
                    const struct log_field *fields, size_t n_fields, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* One line as the formatter sees it (for tests; log_msg fills it). */
struct log_line {
	struct timespec time; /* CLOCK_REALTIME */
	enum log_level level;
	enum log_format format;
	bool journal;
	const char *prefix;    /* "" = none */
	const char *component;
	const char *plugin;    /* NULL = none */
	const struct log_field *fields;
	size_t n_fields;
	const char *message;   /* arbitrary bytes up to NUL */
};

/* log_format_line - the line for l, '\n' included, into buf (len >= 64);
 * returns its length (< len). An overlong message is cut, never the line's
 * structure (a JSON line stays one valid object). */
size_t log_format_line(char *buf, size_t len, const struct log_line *l);

#define log_error(comp, ...) log_msg(LOG_LVL_ERROR, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_LVL_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) log_msg(LOG_LVL_INFO, comp, __VA_ARGS__)
#define log_debug(comp, ...) \
	do { \
		if (log_get_level() >= LOG_LVL_DEBUG) \
			log_msg(LOG_LVL_DEBUG, comp, __VA_ARGS__); \
	} while (0)

#endif
