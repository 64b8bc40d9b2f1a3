/* SPDX-License-Identifier: MIT */
/*
 * cpuload.c - busy child processes (see cpuload.h).
 */
#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpuload.h"

#define CPULOAD_MAX 8

static pid_t g_pids[CPULOAD_MAX];
static int g_n;
static bool g_atexit;

void cpuload_stop(void)
{
	for (int i = 0; i < g_n; i++) {
		kill(g_pids[i], SIGKILL);
		waitpid(g_pids[i], NULL, 0);
	}
	g_n = 0;
}

void cpuload_start(int n)
{
	if (!g_atexit) {
		g_atexit = true;
		atexit(cpuload_stop);
	}
	pid_t parent = getpid();
	for (int i = 0; i < n && g_n < CPULOAD_MAX; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("cpuload: fork");
			exit(1);
		}
		if (pid == 0) {
			/* a test killed outright (SIGKILL) takes its load along */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			for (volatile unsigned long spin = 0;; spin++)
				;
		}
		g_pids[g_n++] = pid;
	}
}
