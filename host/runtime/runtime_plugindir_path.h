/* SPDX-License-Identifier: MIT */
/*
 * runtime_plugindir_path.h - what the configured plugin directory path
 * names right now, and which directory entries decide that.
 *
 * Design notes
 * - inotify watches inodes, the operator configures a path. A deploy tool
 *   replaces a directory (`mv plugins plugins.old; mv new plugins`), swaps a
 *   symlink (`plugins.d -> releases/42`) or replaces a parent; the path then
 *   names another directory while the old inode lives on elsewhere. To
 *   follow the path, the watcher must watch every directory entry that the
 *   kernel's lookup of the path goes through: an "anchor" (the physical
 *   directory that holds a component, and the component's name). A rename,
 *   creation or removal of an anchor's name in its directory may change
 *   what the path names; nothing else can.
 * - The walk is the kernel's: component by component from '/', a symlink's
 *   target spliced in front of the rest (an absolute target restarts at
 *   '/'), ".." the physical parent of what was reached so far, at most 40
 *   symlinks (ELOOP), as path_resolution(7) says. Every component looked at
 *   is an anchor, also the symlinks' own names and the components of their
 *   targets, so a swap anywhere in a chain of links is seen.
 * - Pure file-system reads (lstat, readlink); no inotify here.
 */
#ifndef LH_PLUGINDIR_PATH_H
#define LH_PLUGINDIR_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* one directory entry the lookup went through */
struct plugindir_anchor {
	char *dir;  /* physical directory (no symlink in it) that holds name */
	char *name; /* one component */
};

struct plugindir_path {
	struct plugindir_anchor *anchors; /* in the order of the walk */
	size_t n_anchors;
	char *resolved; /* physical path of the directory the path names; NULL when err */
	int err;	/* 0, or -errno: why the path names no directory now
			   (-ENOENT, -ENOTDIR, -ELOOP, -EACCES, -ENAMETOOLONG) */
};

/* plugindir_path_resolve - walk the absolute path `path` (read only) and
 * fill *ret: the anchors seen up to where the walk ended, and either the
 * resolved directory or the reason in ret->err. Returns 0 (whether or not
 * the path names a directory now), or -ENOMEM / -EINVAL (path not
 * absolute); then *ret holds nothing to free. *ret is the caller's
 * (plugindir_path_clear). */
int plugindir_path_resolve(const char *path, struct plugindir_path *ret);

/* plugindir_path_equal - same anchors, same outcome. Pure. */
bool plugindir_path_equal(const struct plugindir_path *a, const struct plugindir_path *b);

/* plugindir_path_clear - free what *p holds and zero it. Accepts a zeroed p. */
void plugindir_path_clear(struct plugindir_path *p);

#endif
