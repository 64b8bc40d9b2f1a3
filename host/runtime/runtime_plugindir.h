/* SPDX-License-Identifier: MIT */
/*
 * runtime_plugindir.h - watch the plugin directory (--plugin-dir) and tell the owner
 * which plugin files appeared, were replaced or went away. It loads nothing:
 * the daemon decides (load, reload, stop).
 *
 * Design notes
 * - Candidates are entries named "*.so" that do not start with '.' (editors,
 *   rsync and `install` write dotted or suffixed temp names first, then
 *   rename into place) and are regular files or symbolic links. Symlinks are
 *   reported on purpose: the loader refuses them with a clear error, which an
 *   operator sees in `leaseholdctl plugins`, instead of a silently ignored
 *   file. Directories, fifos, sockets and devices are ignored.
 * - inotify on the directory (IN_CLOSE_WRITE, IN_MOVED_TO, IN_DELETE,
 *   IN_MOVED_FROM), non-blocking, registered with the loop. A file being
 *   written is reported only once it is closed (close_write) or renamed in
 *   (moved_to): the recommended way to install a plugin is write-then-rename.
 * - Bursts are coalesced per file name: the first event starts a timer of
 *   `debounce` (default 50 ms), every further event pushes it back by
 *   `debounce` again, but never beyond 10 x debounce after the first event
 *   (so a file rewritten without pause is still picked up). When the timer
 *   fires, the CURRENT state of the entry decides the report: present ->
 *   PLUGINDIR_CHANGED, absent and previously reported -> PLUGINDIR_REMOVED.
 *   A file replaced 100 times within a second gives about two reports.
 * - plugindir_scan() reports CHANGED for every candidate present (sorted by
 *   name) and REMOVED for every name reported before that is gone. The daemon
 *   calls it once at start and on SIGHUP; a "changed" report for an
 *   unchanged file is normal (compare loader_plugin.content_hash to skip it).
 *   An inotify queue overflow triggers a walk and a scan by itself.
 * - The configured PATH is followed, not the inode it named at start
 *   (runtime_plugindir_path.h): every directory entry the lookup of the path
 *   goes through is watched (each parent for the next component's name, a
 *   symlink's parent for the link's name, the components of its target), and
 *   so is the directory it names. When one of them changes (a directory
 *   replaced, a symlink swapped, a parent replaced, the directory moved away
 *   or deleted), the path is walked again after the same debounce, the
 *   watches are moved to what it names now, and a present directory is
 *   rescanned: the difference to the names known is one batch of CHANGED and
 *   REMOVED reports, as plugindir_scan() gives. File reports pending when the
 *   walk becomes due are dropped (the rescan covers them), and a name is
 *   never reported REMOVED from a directory that is no longer the one at the
 *   path.
 * - A path that names no directory (gone: moved away, deleted, a dangling
 *   link) is reported as PLUGINDIR_DIR_GONE (file NULL; once per reason,
 *   see plugindir_error) and removes nothing: the names stay known. The
 *   parents stay watched; once the path names a directory again,
 *   PLUGINDIR_DIR_BACK (file NULL) is reported, then the rescan's batch,
 *   compared with the names known before it went: a name that the returned
 *   directory lacks is REMOVED (it is not in the directory that is present).
 * - An EMPTY directory (no candidate) where another one was, or back after
 *   the path named none, while names are known, is a directory being filled
 *   (`mkdir`, then copies), not a release without plugins: it is reported as
 *   DIR_GONE with plugindir_error() -ENODATA and removes nothing; the first
 *   candidate that appears in it makes it a present directory (DIR_BACK,
 *   then its batch). A directory that stays the same inode and loses its
 *   files reports each REMOVED.
 * - Callbacks run on the loop thread, never from inside plugindir_new. The
 *   owner must not call plugindir_scan or plugindir_free from inside one
 *   (defer it to a timer).
 * - Several files may provide one plugin name (x.so and x-1.3.0.so).
 *   plugindir_prefer() is the rule that picks the one that runs: the newest
 *   release; between equal releases the file that runs now keeps running
 *   (no reload for nothing); otherwise the file name that sorts first
 *   (strcmp), so the choice never depends on the order files were created
 *   or listed. Only files that loaded and initialised take part: a file the
 *   loader refuses has no trustworthy name or release at all.
 */
#ifndef LH_PLUGINDIR_H
#define LH_PLUGINDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/loop.h"
#include "base/release.h"

struct plugindir;

enum plugindir_event {
	PLUGINDIR_CHANGED = 1, /* file appeared or was replaced: (re)load it */
	PLUGINDIR_REMOVED = 2, /* file is gone: stop what it provided */
	PLUGINDIR_DIR_GONE = 3, /* the path names no directory now (file == NULL) */
	PLUGINDIR_DIR_BACK = 4, /* ... names one again; its rescan follows (file == NULL) */
};

/* file is borrowed: valid during the call only */
typedef void (*plugindir_cb)(void *userdata, enum plugindir_event ev, const char *file);

#define PLUGINDIR_DEBOUNCE_DEFAULT_NS (50 * LOOP_NS_PER_MS)

/* plugindir_new - start watching `dir` (copied; a relative path is taken
 * from the current directory now) on loop l. debounce_ns 0 = default. No
 * scan is done: call plugindir_scan() for the initial state. Returns 0 or
 * -errno (-ENOENT, -ENOTDIR, ...: `dir` names no directory now); *ret_pd
 * owned by the caller (plugindir_free). */
int plugindir_new(struct loop *l, const char *dir, uint64_t debounce_ns, plugindir_cb cb,
                  void *userdata, struct plugindir **ret_pd);

/* plugindir_scan - walk the path, move the watches to what it names and
 * report the directory's current state (see above). Calls cb synchronously.
 * Returns the number of CHANGED reports, or -errno when the path names no
 * directory (then only PLUGINDIR_DIR_GONE may have been reported, the first
 * time) or on ENOMEM. Pending debounced events for names reported here are
 * cancelled. */
int plugindir_scan(struct plugindir *pd);

/* plugindir_error - 0 while the path names a directory, else -errno: why
 * not (the state PLUGINDIR_DIR_GONE reported); -ENODATA: it names an empty
 * directory in place of the one the plugins came from. */
int plugindir_error(const struct plugindir *pd);

/* plugindir_path - the watched directory (borrowed, lives as long as pd). */
const char *plugindir_path(const struct plugindir *pd);

/* one file that provides a plugin name, as plugindir_prefer sees it */
struct plugindir_candidate {
	const char *file;        /* file name in the directory (borrowed) */
	struct release release;  /* the release its descriptor declares */
	bool current;            /* this file is the one that runs now */
};

/* plugindir_prefer - >0 when a should run rather than b, <0 when b should,
 * 0 only when both name the same file. Pure; pointers are only read. */
int plugindir_prefer(const struct plugindir_candidate *a, const struct plugindir_candidate *b);

/* plugindir_free - stop watching, cancel pending reports. Accepts NULL. */
void plugindir_free(struct plugindir *pd);

#endif
