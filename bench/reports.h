/* SPDX-License-Identifier: MIT */
/*
 * reports.h - the receiving end of bench/benchplugin.c's callback reports,
 * for the bench drivers (lh-bench, lh-fleet): one unix datagram socket on
 * the driver's loop, every report appended in arrival order.
 *
 * A report is "<ev> <node> <name> <release> <mono_ns> <a> <b>" (the
 * letters and fields: benchplugin.c's opening comment); a datagram of any
 * other shape is dropped. The driver's loop thread only.
 */
#ifndef LH_BENCH_REPORTS_H
#define LH_BENCH_REPORTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;

struct bench_ev {
	char type;
	char node[32];
	char name[64];
	char rel[16];
	uint64_t t; /* CLOCK_MONOTONIC ns, the plugin's */
	int64_t a, b;
};

/* every report so far (bench_nev of them); the array moves as it grows:
 * index it again after the loop ran */
extern struct bench_ev *bench_ev;
extern size_t bench_nev;

/* bench_reports_open - bind dir/ev.sock, receive on loop, and name it in
 * LH_BENCH_SOCK for the plugins of every host started from now on. Exits
 * the driver on failure. */
void bench_reports_open(struct loop *loop, const char *dir);

/* bench_ev_find - the first report at index >= from of this type whose
 * node, name and release match those given (NULL: any) and, with match_a,
 * whose a is a; -1 if none */
long bench_ev_find(size_t from, char type, const char *node, const char *name, const char *rel,
		   int64_t a, bool match_a);

#endif
