/* SPDX-License-Identifier: MIT */
/*
 * browser.h - a real headless Chromium for the dashboard's tests, driven
 * over the DevTools protocol on --remote-debugging-pipe (fd 3 carries
 * commands to it, fd 4 its answers, each message JSON ended by a NUL): one
 * live page that keeps running (and long-polling) between checks, its DOM
 * read with Runtime.evaluate, screenshots with Page.captureScreenshot.
 * Blocking; one browser per test; killed at exit.
 */
#ifndef LH_TEST_BROWSER_H
#define LH_TEST_BROWSER_H

#include <stdbool.h>

struct browser;

/* browser_find - the path of Chromium (LH_CHROMIUM, else chromium or
 * chromium-browser on PATH) into buf; false when there is none */
bool browser_find(char *buf, size_t len);
/* browser_open - start Chromium (path from browser_find) on url with a
 * profile under dir and attach to its page. Exits the test on failure. */
struct browser *browser_open(const char *path, const char *dir, const char *url);
/* browser_eval - the value of JS expression expr (it must evaluate to a
 * string) in the page, malloc'd; NULL when it threw or is not a string.
 * Exits the test when the browser does not answer within 20 s. */
char *browser_eval(struct browser *b, const char *expr);
/* browser_screenshot - a PNG of the page into file. 0 or -1. */
int browser_screenshot(struct browser *b, const char *file);
/* browser_close - end Chromium and wait for it. Accepts NULL. */
void browser_close(struct browser *b);

#endif
