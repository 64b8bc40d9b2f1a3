/* SPDX-License-Identifier: MIT */
/*
 * abi_loader.c - see abi_loader.h for the design notes.
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi_config_schema.h"
#include "abi/abi_elf.h"
#include "abi/abi_loader.h"

#if defined(__x86_64__)
#define HOST_EM EM_X86_64
#elif defined(__aarch64__)
#define HOST_EM EM_AARCH64
#elif defined(__i386__)
#define HOST_EM EM_386
#elif defined(__arm__)
#define HOST_EM EM_ARM
#elif defined(__riscv)
#define HOST_EM EM_RISCV
#elif defined(__powerpc64__)
#define HOST_EM EM_PPC64
#elif defined(__s390x__)
#define HOST_EM EM_S390
#endif

#if UINTPTR_MAX == 0xffffffffffffffffu
#define HOST_CLASS ELFCLASS64
typedef Elf64_Ehdr host_ehdr;
typedef Elf64_Phdr host_phdr;
#else
#define HOST_CLASS ELFCLASS32
typedef Elf32_Ehdr host_ehdr;
typedef Elf32_Phdr host_phdr;
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

static atomic_uint g_copy_counter;

static void loader_seterr(char *err, size_t err_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void loader_seterr(char *err, size_t err_len, const char *fmt, ...)
{
	if (!err || err_len == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
}

int loader_name_valid(const char *name)
{
	size_t n = 0;
	if (!name)
		return 0;
	for (; name[n]; n++) {
		char c = name[n];
		if (n >= LH_PLUGIN_NAME_MAX)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return n > 0;
}

int loader_is_candidate(const char *file)
{
	size_t n = strlen(file);
	if (n <= 3 || n > 255 || file[0] == '.' || strchr(file, '/'))
		return 0;
	return strcmp(file + n - 3, ".so") == 0;
}

int loader_find_by_name(const struct loader_plugin *const *plugins, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (plugins[i] && strcmp(plugins[i]->name, name) == 0)
			return (int)i;
	return -ENOENT;
}

/* owner root or euid, not group/world-writable (a root-owned sticky dir may
 * be world-writable when allow_sticky). */
static int loader_check_owner_mode(const struct stat *st, bool allow_sticky, const char *what,
                            const char *path, char *err, size_t err_len)
{
	uid_t euid = geteuid();
	if (st->st_uid != 0 && st->st_uid != euid) {
		loader_seterr(err, err_len, "%s %s is owned by uid %u, not by root or uid %u", what, path,
		       (unsigned)st->st_uid, (unsigned)euid);
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		if (allow_sticky && (st->st_mode & S_ISVTX) && st->st_uid == 0)
			return 0;
		loader_seterr(err, err_len, "%s %s is %s-writable (mode %04o)", what, path,
		       (st->st_mode & S_IWOTH) ? "world" : "group", (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* the name of the depth-th parent of the resolved path rp, for messages */
static void loader_parent_name(const char *rp, int depth, char *out, size_t len)
{
	snprintf(out, len, "%s", rp ? rp : "?");
	for (int i = 0; i < depth && rp; i++) {
		char *slash = strrchr(out, '/');
		if (!slash)
			break;
		if (slash == out) {
			out[1] = 0;
			break;
		}
		*slash = 0;
	}
}

/* Check dirfd and every parent up to / through "..". */
static int loader_check_dir_chain(int dirfd, const char *dir, char *err, size_t err_len)
{
	char *rp = realpath(dir, NULL); /* only for messages */
	char shown[PATH_MAX];
	int fd = dup(dirfd), r = 0;
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	for (int depth = 0;; depth++) {
		struct stat st, pst;
		if (fstat(fd, &st) < 0) {
			r = -errno;
			loader_seterr(err, err_len, "cannot stat a parent of %s: %s", dir, strerror(-r));
			goto out;
		}
		loader_parent_name(rp, depth, shown, sizeof(shown));
		r = loader_check_owner_mode(&st, true, depth == 0 ? "plugin directory" : "parent directory",
		                     shown, err, err_len);
		if (r < 0)
			goto out;
		int pfd = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0) {
			r = -errno;
			loader_seterr(err, err_len, "cannot open a parent of %s: %s", dir, strerror(-r));
			goto out;
		}
		if (fstat(pfd, &pst) < 0) {
			r = -errno;
			close(pfd);
			loader_seterr(err, err_len, "cannot stat a parent of %s: %s", dir, strerror(-r));
			goto out;
		}
		close(fd);
		fd = pfd;
		if (pst.st_dev == st.st_dev && pst.st_ino == st.st_ino)
			break; /* reached / */
		if (depth > 4096) {
			r = -ELOOP;
			loader_seterr(err, err_len, "directory chain of %s too deep", dir);
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	free(rp);
	return r;
}

int loader_private_dir_prepare(const char *path, char *err, size_t err_len)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST) {
		int r = -errno;
		loader_seterr(err, err_len, "cannot create private directory %s: %s", path, strerror(-r));
		return r;
	}
	struct stat lst;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		loader_seterr(err, err_len, "private directory %s is a symbolic link (refused)", path);
		return -ELOOP;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		loader_seterr(err, err_len, "cannot open private directory %s: %s", path, strerror(-r));
		return r;
	}
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		loader_seterr(err, err_len, "cannot stat private directory %s: %s", path, strerror(-r));
	} else if (st.st_uid != geteuid() || (st.st_mode & 07777) != 0700) {
		r = -EPERM;
		loader_seterr(err, err_len, "private directory %s must be owned by uid %u with mode 0700 (is uid %u, mode %04o)",
		       path, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	close(fd);
	return r;
}

static int loader_read_all(int fd, size_t size, uint8_t **ret_buf)
{
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return -ENOMEM;
	size_t off = 0;
	while (off < size) {
		ssize_t n = read(fd, buf + off, size - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int r = -errno;
			free(buf);
			return r;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off != size) {
		free(buf);
		return -EIO; /* changed size while we read it */
	}
	*ret_buf = buf;
	return 0;
}

static int loader_write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static bool loader_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* The ELF checks on the file's bytes. */
static int loader_check_elf(const uint8_t *buf, size_t size, char *err, size_t err_len)
{
	if (size < SELFMAG || memcmp(buf, ELFMAG, SELFMAG) != 0) {
		loader_seterr(err, err_len, "not an ELF file (no ELF magic)");
		return -ENOEXEC;
	}
	if (size < sizeof(host_ehdr)) {
		loader_seterr(err, err_len, "truncated ELF file: %zu bytes, the ELF header needs %zu", size,
		       sizeof(host_ehdr));
		return -ENOEXEC;
	}
	if (buf[EI_CLASS] != HOST_CLASS || buf[EI_DATA] != HOST_DATA) {
		loader_seterr(err, err_len, "ELF class/byte order (%u/%u) differ from the host's (%u/%u)",
		       buf[EI_CLASS], buf[EI_DATA], HOST_CLASS, HOST_DATA);
		return -ENOEXEC;
	}
	host_ehdr eh;
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_type != ET_DYN) {
		loader_seterr(err, err_len, "not an ELF shared object (ELF type %u)", (unsigned)eh.e_type);
		return -ENOEXEC;
	}
#ifdef HOST_EM
	if (eh.e_machine != HOST_EM) {
		loader_seterr(err, err_len, "ELF machine %u differs from the host's (%u)",
		       (unsigned)eh.e_machine, (unsigned)HOST_EM);
		return -ENOEXEC;
	}
#endif
	if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(host_phdr) ||
	    !loader_range_ok(eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize, size)) {
		loader_seterr(err, err_len, "truncated ELF file: program headers lie outside its %zu bytes", size);
		return -ENOEXEC;
	}
	if (eh.e_shnum != 0 && !loader_range_ok(eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize, size)) {
		loader_seterr(err, err_len, "truncated ELF file: section headers lie outside its %zu bytes", size);
		return -ENOEXEC;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		host_phdr ph;
		memcpy(&ph, buf + eh.e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) &&
		    !loader_range_ok(ph.p_offset, ph.p_filesz, size)) {
			loader_seterr(err, err_len,
			       "truncated ELF file: segment %u needs %llu bytes, the file has %zu", i,
			       (unsigned long long)ph.p_offset + (unsigned long long)ph.p_filesz, size);
			return -ENOEXEC;
		}
	}
	return 0;
}

static uint64_t loader_fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

static bool loader_release_below(struct lh_release a, struct lh_release b)
{
	struct release x = {a.major, a.minor, a.patch}, y = {b.major, b.minor, b.patch};
	return release_less(x, y);
}

/* p lies inside the object loaded at base? */
static bool loader_in_object(const void *p, const void *base)
{
	Dl_info info;
	if (!p || !base)
		return true;
	return dladdr(p, &info) != 0 && info.dli_fbase == base;
}

/* loader_check_head - the three words that protect the rest: magic, ABI
 * major and minor, and the size the plugin saw, against the bytes there are.
 * On 0 *ret_minor and *ret_size hold what the plugin declares. */
static int loader_check_head(const void *d, size_t avail, uint32_t *ret_minor, uint32_t *ret_size,
                             char *err, size_t err_len)
{
	const size_t head = 3 * sizeof(uint32_t);
	if (avail < head) {
		loader_seterr(err, err_len, "descriptor %s is too small (%zu bytes)", LH_PLUGIN_SYMBOL, avail);
		return -EPROTO;
	}
	uint32_t w[3];
	memcpy(w, d, sizeof(w));
	uint32_t magic_major = w[0], minor = w[1], size = w[2];
	if ((magic_major >> 16) != LH_PLUGIN_MAGIC) {
		loader_seterr(err, err_len, "wrong descriptor magic 0x%04x (expected 0x%04x): not a leasehold plugin",
		       magic_major >> 16, LH_PLUGIN_MAGIC);
		return -EPROTO;
	}
	if ((magic_major & 0xffffu) != LH_PLUGIN_ABI_MAJOR) {
		loader_seterr(err, err_len, "plugin ABI major %u does not match the host's ABI major %u",
		       magic_major & 0xffffu, LH_PLUGIN_ABI_MAJOR);
		return -EPROTO;
	}
	if (minor > LH_PLUGIN_ABI_MINOR) {
		loader_seterr(err, err_len, "plugin ABI minor %u is newer than the host's ABI %u.%u", minor,
		       LH_PLUGIN_ABI_MAJOR, LH_PLUGIN_ABI_MINOR);
		return -EPROTO;
	}
	if (size < LH_PLUGIN_SIZE_1_0) {
		loader_seterr(err, err_len, "descriptor size %u is smaller than the ABI 1.0 minimum %zu", size,
		       (size_t)LH_PLUGIN_SIZE_1_0);
		return -EPROTO;
	}
	if (avail != SIZE_MAX && size > avail) {
		loader_seterr(err, err_len, "descriptor size %u exceeds the %zu bytes of symbol %s", size, avail,
		       LH_PLUGIN_SYMBOL);
		return -EPROTO;
	}
	*ret_minor = minor;
	*ret_size = size;
	return 0;
}

/* loader_drop_undeclared - fields of a minor the plugin does not declare are
 * absent, whatever its size: a field appended to the ABI is cleared here
 * unless both the minor and the size cover it */
static void loader_drop_undeclared(struct lh_plugin *desc, uint32_t minor, uint32_t size)
{
	if (minor < 1 || size < LH_PLUGIN_SIZE_1_1)
		desc->role = NULL;
	if (minor < 2 || size < LH_PLUGIN_SIZE_1_2_WATCH)
		desc->on_watch_events = NULL;
	/* ABI 1.2 configuration callbacks (pconfig) */
	if (minor < 2 || size < LH_PLUGIN_SIZE_1_2_CONFIG) {
		desc->on_config_changed = NULL;
		desc->validate_config = NULL;
	}
	/* ABI 1.3 configuration schema */
	if (minor < 3 || size < LH_PLUGIN_SIZE_1_3_SCHEMA) {
		desc->config_fields = NULL;
		desc->n_config_fields = 0;
		desc->config_field_size = 0;
	}
	/* ABI 1.3 keyed reconcile */
	if (minor < 3 || size < LH_PLUGIN_SIZE_1_3_KEYED) {
		desc->reconcile_key = NULL;
		desc->key_of = NULL;
		desc->key_backoff_min_ms = desc->key_backoff_max_ms = 0;
	}
	if (minor < 3 || size < LH_PLUGIN_SIZE_1_3_CONCURRENCY)
		desc->key_concurrency = 0;
}

/* loader_check_name - the name points into the plugin (read only then) and
 * is a valid plugin name; a refusal shows it with unprintables as '?' */
static int loader_check_name(const struct lh_plugin *desc, const void *object_base, char *err,
                             size_t err_len)
{
	if (desc->name && !loader_in_object(desc->name, object_base)) {
		loader_seterr(err, err_len, "plugin name does not point into the plugin");
		return -EPROTO;
	}
	if (!desc->name || !desc->name[0]) {
		loader_seterr(err, err_len, "plugin name is empty");
		return -EINVAL;
	}
	if (!loader_name_valid(desc->name)) {
		char shown[LH_PLUGIN_NAME_MAX + 2];
		size_t i = 0;
		for (; i < sizeof(shown) - 1 && desc->name[i]; i++)
			shown[i] = (desc->name[i] >= 0x20 && desc->name[i] < 0x7f) ? desc->name[i] : '?';
		shown[i] = 0;
		loader_seterr(err, err_len, "invalid plugin name \"%s\" (allowed: [a-z0-9_-], 1 to %d characters)",
		       shown, LH_PLUGIN_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

/* loader_check_release_floor - the plugin's release is not below a floor it
 * declares itself (what: the field's name, for the message) */
static int loader_check_release_floor(struct lh_release release, struct lh_release floor,
                                      const char *what, char *err, size_t err_len)
{
	if (!loader_release_below(release, floor))
		return 0;
	char a[RELEASE_STRLEN], b[RELEASE_STRLEN];
	struct release rel = {release.major, release.minor, release.patch};
	struct release m = {floor.major, floor.minor, floor.patch};
	loader_seterr(err, err_len, "release %s is below its own %s %s", release_format(rel, a, sizeof(a)),
	              what, release_format(m, b, sizeof(b)));
	return -EINVAL;
}

/* loader_check_role - an optional role points into the plugin and is a
 * valid name */
static int loader_check_role(const struct lh_plugin *desc, const void *object_base, char *err,
                             size_t err_len)
{
	if (desc->role && !loader_in_object(desc->role, object_base)) {
		loader_seterr(err, err_len, "plugin role does not point into the plugin");
		return -EPROTO;
	}
	if (desc->role && !loader_name_valid(desc->role)) {
		loader_seterr(err, err_len, "invalid plugin role (allowed: [a-z0-9_-], 1 to %d characters)",
		       LH_PLUGIN_NAME_MAX);
		return -EINVAL;
	}
	return 0;
}

int loader_validate_descriptor(const void *d, size_t avail, const void *object_base,
                               struct lh_plugin *ret_desc, char *err, size_t err_len)
{
	uint32_t minor, size;
	int r = loader_check_head(d, avail, &minor, &size, err, err_len);
	if (r < 0)
		return r;
	struct lh_plugin desc;
	memset(&desc, 0, sizeof(desc));
	memcpy(&desc, d, size < sizeof(desc) ? size : sizeof(desc));
	if (desc.flags & ~LH_PLUGIN_F_KNOWN) {
		loader_seterr(err, err_len, "descriptor flags 0x%x include bits this host does not know (0x%x)",
		       desc.flags, desc.flags & ~LH_PLUGIN_F_KNOWN);
		return -EPROTO;
	}
	loader_drop_undeclared(&desc, minor, size);
	if ((r = loader_check_name(&desc, object_base, err, err_len)) < 0 ||
	    (r = loader_check_release_floor(desc.release, desc.min_compatible_release,
	                                    "min_compatible_release", err, err_len)) < 0 ||
	    (r = loader_check_release_floor(desc.release, desc.min_reconciler_release,
	                                    "min_reconciler_release", err, err_len)) < 0)
		return r;
	if (!desc.reconcile && !desc.reconcile_key) {
		loader_seterr(err, err_len, "required callback reconcile is missing (or, ABI 1.3, "
		              "reconcile_key)");
		return -EINVAL;
	}
	if (desc.key_of && !desc.reconcile_key) {
		loader_seterr(err, err_len, "key_of without reconcile_key: there is no queue to feed");
		return -EINVAL;
	}
	if (desc.key_concurrency > LH_KEY_CONCURRENCY_MAX) {
		loader_seterr(err, err_len, "key_concurrency %u is above the host's maximum of %u",
		              desc.key_concurrency, LH_KEY_CONCURRENCY_MAX);
		return -EINVAL;
	}
	if (desc.key_concurrency > 1 && !desc.reconcile_key) {
		loader_seterr(err, err_len, "key_concurrency without reconcile_key: there is no queue "
		              "to run concurrently");
		return -EINVAL;
	}
	if (desc.key_concurrency == 0)
		desc.key_concurrency = 1; /* 0 means one at a time */
	if ((r = loader_check_role(&desc, object_base, err, err_len)) < 0)
		return r;
	char why[400];
	r = abi_schema_validate(&desc, object_base ? loader_in_object : NULL, object_base, why,
	                        sizeof(why));
	if (r < 0) {
		loader_seterr(err, err_len, "%s", why);
		return r;
	}
	*ret_desc = desc;
	return 0;
}

static int loader_check_symbol(void *handle, const void *sym, struct lh_plugin *ret_desc, char *err,
                        size_t err_len)
{
	Dl_info info;
	const ElfW(Sym) *es = NULL;
	if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es) {
		loader_seterr(err, err_len, "cannot locate symbol %s in the plugin", LH_PLUGIN_SYMBOL);
		return -EPROTO;
	}
	(void)handle;
	if (ELF64_ST_TYPE(es->st_info) != STT_OBJECT) {
		loader_seterr(err, err_len, "symbol %s is not a data object (it must be a const struct lh_plugin)",
		       LH_PLUGIN_SYMBOL);
		return -EPROTO;
	}
	const void *base = info.dli_fbase;
	int r = loader_validate_descriptor(sym, (size_t)es->st_size, base, ret_desc, err, err_len);
	if (r < 0)
		return r;
	struct {
		const char *n;
		const void *p;
	} cbs[] = {
		{"init", (const void *)ret_desc->init},
		{"on_elected", (const void *)ret_desc->on_elected},
		{"on_releases_changed", (const void *)ret_desc->on_releases_changed},
		{"reconcile", (const void *)ret_desc->reconcile},
		{"on_deposed", (const void *)ret_desc->on_deposed},
		{"fini", (const void *)ret_desc->fini},
		{"on_watch_events", (const void *)ret_desc->on_watch_events},
		{"on_config_changed", (const void *)ret_desc->on_config_changed},
		{"validate_config", (const void *)ret_desc->validate_config},
		{"reconcile_key", (const void *)ret_desc->reconcile_key},
		{"key_of", (const void *)ret_desc->key_of},
	};
	for (size_t i = 0; i < sizeof(cbs) / sizeof(cbs[0]); i++) {
		if (!loader_in_object(cbs[i].p, base)) {
			loader_seterr(err, err_len, "callback %s does not point into the plugin", cbs[i].n);
			return -EPROTO;
		}
	}
	return 0;
}

void loader_close(struct loader_plugin *p)
{
	if (!p)
		return;
	if (p->handle)
		dlclose(p->handle);
	if (p->copy_path)
		unlink(p->copy_path);
	free(p->copy_path);
	free(p->file);
	free(p);
}

/* loader_open, step 1: open plugin_dir/file without following links, check
 * the directory chain, the file's owner, mode and size, read it whole and
 * check that it is an ELF shared object of this machine. Fills p's identity
 * (dev, ino, size, content hash); *ret_buf (p->file_size bytes) is the
 * caller's. */
static int loader_read_checked(const char *plugin_dir, const char *file, struct loader_plugin *p,
                        uint8_t **ret_buf, char *err, size_t err_len)
{
	uint8_t *buf = NULL;
	int dirfd = -1, fd = -1, r;

	dirfd = open(plugin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		r = -errno;
		loader_seterr(err, err_len, "cannot open plugin directory %s: %s", plugin_dir, strerror(-r));
		goto out;
	}
	r = loader_check_dir_chain(dirfd, plugin_dir, err, err_len);
	if (r < 0)
		goto out;

	fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		if (r == -ELOOP)
			loader_seterr(err, err_len, "%s is a symbolic link (refused)", file);
		else
			loader_seterr(err, err_len, "cannot open %s: %s", file, strerror(-r));
		goto out;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		loader_seterr(err, err_len, "cannot stat %s: %s", file, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EPERM;
		loader_seterr(err, err_len, "%s is not a regular file", file);
		goto out;
	}
	r = loader_check_owner_mode(&st, false, "plugin file", file, err, err_len);
	if (r < 0)
		goto out;
	if (st.st_size <= 0 || (uint64_t)st.st_size > LOADER_MAX_FILE_SIZE) {
		r = st.st_size <= 0 ? -ENOEXEC : -EFBIG;
		loader_seterr(err, err_len, "%s has an unreasonable size (%lld bytes)", file,
		       (long long)st.st_size);
		goto out;
	}
	r = loader_read_all(fd, (size_t)st.st_size, &buf);
	if (r < 0) {
		loader_seterr(err, err_len, "cannot read %s: %s", file,
		       r == -EIO ? "it changed size while being read" : strerror(-r));
		goto out;
	}
	r = loader_check_elf(buf, (size_t)st.st_size, err, err_len);
	if (r < 0)
		goto out;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->file_size = st.st_size;
	p->content_hash = loader_fnv1a(buf, (size_t)st.st_size);
	*ret_buf = buf;
	buf = NULL;
out:
	if (fd >= 0)
		close(fd);
	if (dirfd >= 0)
		close(dirfd);
	free(buf);
	return r;
}

/* loader_open, step 2: write buf[len] to a fresh private copy in
 * private_dir (owned by us, closed to others), named after file, the pid
 * and a counter; sets p->copy_path (loader_close removes the copy, also
 * when a later step fails). */
static int loader_copy_private(const char *private_dir, const char *file, const uint8_t *buf, size_t len,
                        struct loader_plugin *p, char *err, size_t err_len)
{
	char copy_name[NAME_MAX + 1];
	int pfd, cfd = -1, r;

	pfd = open(private_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0) {
		r = -errno;
		loader_seterr(err, err_len, "cannot open private directory %s: %s", private_dir, strerror(-r));
		return r;
	}
	struct stat pst;
	if (fstat(pfd, &pst) < 0 || pst.st_uid != geteuid() || (pst.st_mode & 077) != 0) {
		r = -EPERM;
		loader_seterr(err, err_len, "private directory %s must be owned by uid %u and not accessible to others",
		       private_dir, (unsigned)geteuid());
		goto out;
	}
	size_t base_len = strlen(file) - 3;
	if (base_len > 200)
		base_len = 200;
	snprintf(copy_name, sizeof(copy_name), "%.*s.%ld.%u.so", (int)base_len, file, (long)getpid(),
	         atomic_fetch_add(&g_copy_counter, 1u));
	cfd = openat(pfd, copy_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (cfd < 0) {
		r = -errno;
		loader_seterr(err, err_len, "cannot create private copy %s/%s: %s", private_dir, copy_name,
		       strerror(-r));
		goto out;
	}
	size_t plen = strlen(private_dir) + 1 + strlen(copy_name) + 1;
	p->copy_path = malloc(plen);
	if (!p->copy_path) {
		r = -ENOMEM;
		unlinkat(pfd, copy_name, 0);
		loader_seterr(err, err_len, "out of memory");
		goto out;
	}
	snprintf(p->copy_path, plen, "%s/%s", private_dir, copy_name);
	r = loader_write_all(cfd, buf, len);
	if (r == 0 && close(cfd) < 0)
		r = -errno;
	cfd = -1;
	if (r < 0)
		loader_seterr(err, err_len, "cannot write private copy %s: %s", p->copy_path, strerror(-r));
out:
	if (cfd >= 0)
		close(cfd);
	close(pfd);
	return r;
}

/* loader_open, step 3: dlopen the private copy, find the descriptor, check
 * it (ABI, size, callbacks, releases) and fill p's fields from it. buf[len]
 * are the file's bytes: when dlsym finds no descriptor, its .symtab tells a
 * hidden one (a build that forgot the export) from none at all. */
static int loader_dlopen_copy(struct loader_plugin *p, const uint8_t *buf, size_t len, char *err,
                              size_t err_len)
{
	dlerror();
	p->handle = dlopen(p->copy_path, RTLD_NOW | RTLD_LOCAL);
	if (!p->handle) {
		const char *de = dlerror();
		loader_seterr(err, err_len, "dlopen failed: %s", de ? de : "unknown error");
		return -ENOEXEC;
	}
	dlerror();
	void *sym = dlsym(p->handle, LH_PLUGIN_SYMBOL);
	if (!sym && abi_elf_symtab_defines(buf, len, LH_PLUGIN_SYMBOL) == 1) {
		loader_seterr(err, err_len, "symbol %s not exported: build with LH_PLUGIN_EXPORT",
		              LH_PLUGIN_SYMBOL);
		return -ENOENT;
	}
	if (!sym) {
		loader_seterr(err, err_len, "missing symbol %s (not a leasehold plugin)", LH_PLUGIN_SYMBOL);
		return -EPROTO; /* like a wrong magic: the file is there, the plugin is not */
	}
	int r = loader_check_symbol(p->handle, sym, &p->desc, err, err_len);
	if (r < 0)
		return r;
	snprintf(p->name, sizeof(p->name), "%s", p->desc.name);
	snprintf(p->role, sizeof(p->role), "%s", p->desc.role ? p->desc.role : "");
	p->abi_minor = p->desc.abi_minor;
	p->desc_size = p->desc.size;
	p->release = (struct release){p->desc.release.major, p->desc.release.minor,
	                              p->desc.release.patch};
	p->min_reconciler_release = (struct release){p->desc.min_reconciler_release.major,
	                                             p->desc.min_reconciler_release.minor,
	                                             p->desc.min_reconciler_release.patch};
	p->min_compatible_release = (struct release){p->desc.min_compatible_release.major,
	                                             p->desc.min_compatible_release.minor,
	                                             p->desc.min_compatible_release.patch};
	return 0;
}

int loader_open(const char *plugin_dir, const char *file, const char *private_dir,
                struct loader_plugin **ret_plugin, char *err, size_t err_len)
{
	struct loader_plugin *p = NULL;
	uint8_t *buf = NULL;
	int r;

	if (!file || !loader_is_candidate(file)) {
		loader_seterr(err, err_len, "invalid plugin file name \"%s\" (want NAME.so, no '/', no leading dot)",
		       file ? file : "");
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->file = strdup(file))) {
		r = -ENOMEM;
		loader_seterr(err, err_len, "out of memory");
		goto fail;
	}
	r = loader_read_checked(plugin_dir, file, p, &buf, err, err_len);
	if (r < 0)
		goto fail;
	r = loader_copy_private(private_dir, file, buf, (size_t)p->file_size, p, err, err_len);
	if (r < 0)
		goto fail;
	r = loader_dlopen_copy(p, buf, (size_t)p->file_size, err, err_len);
	if (r < 0)
		goto fail;
	free(buf);
	*ret_plugin = p;
	return 0;

fail:
	free(buf);
	loader_close(p);
	return r;
}

/* ---- stale private copies ---- */

/* s is 1..n decimal digits up to `end` (exclusive); *ret its value */
static bool loader_digits(const char *s, const char *end, unsigned long long *ret)
{
	unsigned long long v = 0;
	if (s >= end || end - s > 19)
		return false;
	for (const char *p = s; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned long long)(*p - '0');
	}
	*ret = v;
	return true;
}

/* name is one of ours for process `pid`: "<base>.<pid>.<n>.so" (a private
 * copy, loader_open) or "w<pid>.<n>.<g>.sock" (a worker bus socket,
 * runtime_instance_process.c); *ret_socket tells which */
static bool loader_stale_name(const char *name, unsigned long long pid, bool *ret_socket)
{
	size_t len = strlen(name);
	unsigned long long v;
	const char *end = name + len;
	if (len > 5 && strcmp(end - 5, ".sock") == 0 && name[0] == 'w') {
		const char *a = name + 1, *b = strchr(a, '.');
		const char *c = b ? strchr(b + 1, '.') : NULL;
		if (!b || !c || !loader_digits(a, b, &v) || v != pid || !loader_digits(b + 1, c, &v) ||
		    !loader_digits(c + 1, end - 5, &v))
			return false;
		*ret_socket = true;
		return true;
	}
	if (len > 3 && strcmp(end - 3, ".so") == 0) {
		/* from the end: ".so", then <n>, then <pid>, then a non-empty base */
		const char *n_end = end - 3, *n = n_end;
		while (n > name && n[-1] != '.')
			n--;
		if (n <= name + 1 || !loader_digits(n, n_end, &v))
			return false;
		const char *p_end = n - 1, *p = p_end;
		while (p > name && p[-1] != '.')
			p--;
		if (p <= name + 1 || !loader_digits(p, p_end, &v) || v != pid)
			return false;
		*ret_socket = false;
		return true;
	}
	return false;
}

/* remove our stale files from the directory dfd (of process pid); count */
static int loader_remove_stale_files(int dfd, unsigned long long pid)
{
	int n = 0, fd = dup(dfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (struct dirent *de; (de = readdir(dir)) != NULL;) {
		struct stat st;
		bool sock;
		if (!loader_stale_name(de->d_name, pid, &sock) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid != geteuid() ||
		    (sock ? !S_ISSOCK(st.st_mode) : !S_ISREG(st.st_mode)))
			continue;
		if (unlinkat(dfd, de->d_name, 0) == 0)
			n++;
	}
	closedir(dir);
	return n;
}

int loader_remove_stale(const char *runtime_dir, const char *own_dir)
{
	const char *own_base = own_dir ? strrchr(own_dir, '/') : NULL;
	own_base = own_base ? own_base + 1 : own_dir;
	int rfd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	int fd = dup(rfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		int r = -errno;
		if (fd >= 0)
			close(fd);
		close(rfd);
		return r;
	}
	int removed = 0;
	for (struct dirent *de; (de = readdir(dir)) != NULL;) {
		unsigned long long pid;
		const char *name = de->d_name;
		if (strncmp(name, "plugins.", 8) != 0 || !loader_digits(name + 8, name + strlen(name), &pid) ||
		    pid == 0 || pid > INT_MAX)
			continue;
		bool own = own_base && strcmp(name, own_base) == 0;
		/* alive (or not ours to ask: EPERM): its files are in use */
		if (!own && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		struct stat st;
		int dfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		if (fstat(dfd, &st) < 0 || st.st_uid != geteuid()) {
			close(dfd);
			continue;
		}
		removed += loader_remove_stale_files(dfd, pid);
		close(dfd);
		if (!own)
			unlinkat(rfd, name, AT_REMOVEDIR); /* fails, and stays, if not empty */
	}
	closedir(dir);
	close(rfd);
	return removed;
}
