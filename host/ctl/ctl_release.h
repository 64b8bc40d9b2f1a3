/* SPDX-License-Identifier: MIT */
/*
 * ctl_release.h - `leaseholdctl release NAME`: one plugin's rollout as the
 * answering daemon (or observer mode) sees it: the pin, the release that
 * may act and why, the leader and its release, the members per release
 * with their readiness. Built from one STATUS answer (its Plugin and node
 * rows); the pin's fields also go into `plugins`/`status` JSON.
 * Threading: the CLI's one thread.
 */
#ifndef LH_CTL_RELEASE_H
#define LH_CTL_RELEASE_H

#include <json-c/json.h>

#include "ctl/ctl_views.h"

/* ctl_release_view - print the rollout of r's one plugin (JSON when json);
 * an exit code */
int ctl_release_view(const Response *r, bool json);

/* ctl_release_pin_line - p's pin in words into buf ("1.0.0 (by a at T)",
 * "none", or why the record is ignored); returns buf */
const char *ctl_release_pin_line(const Plugin *p, char *buf, size_t len);

#endif
