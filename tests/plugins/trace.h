/* SPDX-License-Identifier: MIT */
/*
 * trace.h - the trace file a test plugin writes one line per event to, for
 * the test that loaded it to read: the file is named by an environment
 * variable of the plugin's own (LH_APPLIER_TRACE, LH_WATCHER_TRACE). Each
 * line is one O_APPEND write, so lines of several threads or processes do
 * not mix. Linked into each plugin that uses it, hidden: the plugin still
 * exports only its descriptor.
 */
#ifndef LH_TEST_PLUGIN_TRACE_H
#define LH_TEST_PLUGIN_TRACE_H

#include <stdarg.h>

/* the longest line written, newline included; longer ones are cut */
#define TRACE_LINE_MAX 1200

/* trace_vline - append the formatted line and a newline to the file named by
 * $env; nothing when env is unset or the file cannot be opened (the test
 * then misses the line and fails) */
void trace_vline(const char *env, const char *fmt, va_list ap)
	__attribute__((visibility("hidden"), format(printf, 2, 0)));

#endif
