/* SPDX-License-Identifier: MIT */
/*
 * abi_loader.h - load one plugin file safely: file checks, a private copy,
 * dlopen, and validation of the descriptor before anything in it is called.
 *
 * Design notes
 * - Checks (sudo's and OpenSSH's): the file is opened with
 *   O_NOFOLLOW|O_CLOEXEC relative to the plugin directory (openat, so a
 *   symlink is refused) and checked through that fd: a regular file, owned by
 *   root or the daemon's euid, not group- or world-writable. The plugin
 *   directory and every parent up to / get the same owner/mode check, walked
 *   with openat(fd, "..") so no path is re-resolved. Exception: a root-owned
 *   sticky directory (/tmp) may be world-writable, since the sticky bit keeps
 *   other users from renaming or removing the entries inside it (and those
 *   entries are checked themselves).
 * - The bytes read are checked as an ELF shared object of the host's class,
 *   byte order and machine, whose header tables and loadable segments lie
 *   inside the file (a truncated copy is refused before dlopen sees it).
 * - Those same bytes are written to a private 0700 directory under a unique
 *   name (<base>.<pid>.<counter>.so) and that copy is dlopen()ed with
 *   RTLD_NOW|RTLD_LOCAL. glibc returns the already-loaded handle for the same
 *   path and for any link to a loaded file (matched by dev/inode), so only a
 *   fresh copy brings new code in. The copy is kept on disk until
 *   loader_close(): unlinking it early would let a later copy reuse its inode
 *   and be matched to the old object.
 * - The descriptor `leasehold_plugin` is validated before any code of the
 *   plugin runs: it must be a data symbol of the object, large enough for
 *   what it claims; magic and ABI major equal, minor not newer, size not
 *   smaller than ABI 1.0; name [a-z0-9_-]{1,63} inside the object; release not
 *   below its own min_reconciler_release or min_compatible_release; reconcile
 *   present; every callback pointing into the object. Only the fields below
 *   the declared size are read, into a zero-filled host copy.
 * - Any failure returns -errno, one clear sentence in the caller's buffer,
 *   dlcloses and unlinks the copy. Nothing of the plugin has run by then
 *   (except ELF constructors, which dlopen runs: a plugin should have none).
 * - Thread-safety: the loader has no global state except an atomic counter;
 *   dlopen/dlclose are serialised by glibc.
 */
#ifndef LH_LOADER_H
#define LH_LOADER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <leasehold/plugin.h>

#include "base/release.h"

/* Longest file size the loader accepts (a plugin is a small .so). */
#define LOADER_MAX_FILE_SIZE (256u * 1024u * 1024u)

/* a buffer size that holds any loader error message */
#define LOADER_ERR_MAX 512

/* One loaded plugin. All fields are read-only for the user. */
struct loader_plugin {
	void *handle;      /* dlopen handle (owned) */
	char *copy_path;   /* private copy (owned; unlinked by loader_close) */
	char *file;        /* file name inside the plugin dir (owned) */
	char name[LH_PLUGIN_NAME_MAX + 1];
	char role[LH_PLUGIN_NAME_MAX + 1]; /* "" = runs on every node (ABI 1.1) */
	struct release release;
	struct release min_reconciler_release;
	struct release min_compatible_release;
	uint32_t abi_minor;  /* the descriptor's minor */
	uint32_t desc_size;  /* the descriptor's declared size */
	/* the descriptor as far as the plugin declared it, zero-filled beyond:
	 * callbacks the plugin does not have are NULL. Function pointers point
	 * into `handle`: valid until loader_close(). */
	struct lh_plugin desc;
	/* identity of the file that was loaded */
	dev_t dev;
	ino_t ino;
	off_t file_size;
	uint64_t content_hash; /* FNV-1a 64 over the bytes: equal = same content */
};

/* loader_private_dir_prepare - make sure `path` exists as a directory owned by
 * the euid with mode 0700 (created when missing; its parent must exist). An
 * existing directory with another owner or mode, or a symlink, is refused.
 * Returns 0 or -errno with a message in err (may be NULL). */
int loader_private_dir_prepare(const char *path, char *err, size_t err_len);

/* loader_remove_stale - remove what daemons that died without cleaning up
 * left in `runtime_dir`: for each private directory "plugins.<PID>" of a
 * process that no longer exists, and for own_dir (this process's private
 * directory: a daemon that had the same pid before, as in a container where
 * it is always pid 1, may have left files there), the private copies
 * "<base>.<PID>.<N>.so" and worker sockets "w<PID>.<N>.<G>.sock" with that
 * directory's PID; then the dead process's directory itself if it is empty.
 * Only entries owned by the euid are touched: directories that are real
 * directories, copies that are regular files, sockets that are sockets
 * (lstat semantics: a symlink is never followed nor removed); anything else
 * stays. A directory of a live process other than own_dir is never
 * touched. Call it before the first loader_open into own_dir. Returns the
 * number of files removed, or -errno when runtime_dir cannot be read. */
int loader_remove_stale(const char *runtime_dir, const char *own_dir);

/* loader_open - load `file` (a plain name, no '/') from `plugin_dir`, copying
 * it into `private_dir` (see loader_private_dir_prepare).
 * On success returns 0 and *ret_plugin owns the loaded plugin (free with
 * loader_close). On failure returns -errno, writes one sentence to
 * err[err_len] (when err is non-NULL; LOADER_ERR_MAX is enough), leaves
 * *ret_plugin untouched and leaves no copy behind. Strings are only read. */
int loader_open(const char *plugin_dir, const char *file, const char *private_dir,
                struct loader_plugin **ret_plugin, char *err, size_t err_len);

/* loader_close - dlclose, unlink the private copy, free. Accepts NULL. The
 * caller must make sure no code of the plugin runs any more (worker joined). */
void loader_close(struct loader_plugin *p);

/* loader_validate_descriptor - the descriptor checks alone, on memory the
 * caller owns (used by loader_open and by tests). `avail` is the number of
 * readable bytes at d (e.g. the ELF symbol size), or SIZE_MAX if unknown.
 * With object_base non-NULL (dladdr's dli_fbase of the plugin), the name
 * pointer must point into that object before it is read. On success copies
 * what was declared into *ret_desc (zero-filled beyond) and returns 0; else
 * -errno and a message in err, *ret_desc untouched. */
int loader_validate_descriptor(const void *d, size_t avail, const void *object_base,
                               struct lh_plugin *ret_desc, char *err, size_t err_len);

/* loader_name_valid - name matches [a-z0-9_-]{1,63}. */
int loader_name_valid(const char *name);

/* loader_find_by_name - index of the first of plugins[0..n) named `name`
 * (NULL entries are skipped), or -ENOENT. For the daemon's duplicate check:
 * a newly loaded plugin whose name is already served by a DIFFERENT file is
 * a conflict. Pointers are only read. */
int loader_find_by_name(const struct loader_plugin *const *plugins, size_t n, const char *name);

/* loader_is_candidate - whether a directory entry name looks like a plugin
 * file: ends in ".so", has something before it, does not start with '.',
 * no '/', at most 255 bytes. Shared with plugindir. */
int loader_is_candidate(const char *file);

#endif
