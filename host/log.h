/*
 * log.h - the host's logger. One line per message on stderr:
 *   <level> <component>: <message>
 * Thread-safe (one write(2) per line). Library-like modules (etcd client,
 * codecs) do not log above debug; the daemon layer logs errors where it
 * handles them, once.
 */
#ifndef LH_LOG_H
#define LH_LOG_H

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* log_set_level / log_get_level - the global threshold (default info). */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* log_parse_level - "error|warn|info|debug" -> level; returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *ret_lvl);
/* log_set_prefix - a tag put on every line (e.g. the node id); copied. */
void log_set_prefix(const char *prefix);

void log_msg(enum log_level lvl, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_error(comp, ...) log_msg(LOG_LVL_ERROR, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_LVL_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) log_msg(LOG_LVL_INFO, comp, __VA_ARGS__)
#define log_debug(comp, ...) \
	do { \
		if (log_get_level() >= LOG_LVL_DEBUG) \
			log_msg(LOG_LVL_DEBUG, comp, __VA_ARGS__); \
	} while (0)

#endif
