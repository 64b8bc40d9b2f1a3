/* SPDX-License-Identifier: MIT */
/*
 * test_loader.c - the plugin loader against real .so files built by make:
 * every refusal case with its exact message, a good load, and hot reload
 * (a file renamed over the old one loads NEW code).
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi_loader.h"
#include "check.h"
#include "files.h"
#include "instance_fixture.h"

static struct ifx_dirs D; /* the temp root, its plugin and private dirs */

static void path_of(char out[PATH_MAX], size_t len, const char *rel)
{
	snprintf(out, len, "%s/%s", D.build, rel);
}

static void read_file(const char *path, char **ret, size_t *ret_len)
{
	*ret = (char *)test_load_built(path, ret_len);
}

/* write bytes as dir/name with mode, via a temp name and rename (like an installer) */
static void put_bytes(const char *dir, const char *name, const void *buf, size_t len, mode_t mode)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, buf, len) == (ssize_t)len);
	CHECK(fchmod(fd, mode) == 0);
	CHECK(close(fd) == 0);
	CHECK(rename(tmp, dst) == 0);
}

/* copy a built plugin (path relative to the build dir) into the plugin dir */
static void install(const char *built, const char *name, mode_t mode)
{
	char src[PATH_MAX];
	char *buf;
	size_t len;
	path_of(src, sizeof(src), built);
	read_file(src, &buf, &len);
	put_bytes(D.plugins, name, buf, len, mode);
	free(buf);
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	size_t n = 0;
	CHECK(d);
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void remove_in(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
}

/* loader_open must fail with err and exactly msg, leaving no copy behind */
static void expect_refused_in(const char *dir, const char *file, int err, const char *msg)
{
	struct loader_plugin *p = (struct loader_plugin *)(uintptr_t)0x1;
	char buf[LOADER_ERR_MAX] = "";
	int r = loader_open(dir, file, D.private_dir, &p, buf, sizeof(buf));
	if (r != err || strcmp(buf, msg) != 0)
		fprintf(stderr, "  got r=%d \"%s\"\n  want r=%d \"%s\"\n", r, buf, err, msg);
	CHECK_INT_EQ(r, err);
	CHECK_STR_EQ(buf, msg);
	CHECK(p == (struct loader_plugin *)(uintptr_t)0x1); /* untouched */
	CHECK_INT_EQ(count_entries(D.private_dir), 0);
}

static void expect_refused(const char *file, int err, const char *msg)
{
	expect_refused_in(D.plugins, file, err, msg);
}

static struct loader_plugin *load_ok(const char *file)
{
	struct loader_plugin *p = NULL;
	char buf[LOADER_ERR_MAX] = "";
	int r = loader_open(D.plugins, file, D.private_dir, &p, buf, sizeof(buf));
	if (r < 0)
		fprintf(stderr, "loader_open(%s): %d %s\n", file, r, buf);
	CHECK_OK(r);
	CHECK(p);
	return p;
}

static void test_good_plugin_loads(void)
{
	install("tests/plugins/.libs/good.so", "good.so", 0644);
	struct loader_plugin *p = load_ok("good.so");
	CHECK_STR_EQ(p->name, "good");
	CHECK_STR_EQ(p->file, "good.so");
	CHECK_INT_EQ(p->release.major, 1);
	CHECK_INT_EQ(p->release.minor, 0);
	CHECK_INT_EQ(p->abi_minor, LH_PLUGIN_ABI_MINOR);
	CHECK_INT_EQ(p->desc_size, sizeof(struct lh_plugin));
	CHECK(p->desc.reconcile != NULL);
	CHECK(p->desc.init == NULL && p->desc.fini == NULL); /* optional, absent */
	CHECK(p->handle != NULL);
	/* the private copy exists while loaded, under a unique name */
	CHECK_INT_EQ(count_entries(D.private_dir), 1);
	CHECK(strncmp(p->copy_path, D.private_dir, strlen(D.private_dir)) == 0);
	CHECK(strstr(p->copy_path, "/good.") != NULL);
	struct stat st;
	CHECK(stat(p->copy_path, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 0777, 0600);
	loader_close(p);
	CHECK_INT_EQ(count_entries(D.private_dir), 0);
	loader_close(NULL);
}

/* a descriptor defined without LH_PLUGIN_EXPORT under -fvisibility=hidden
 * is exported by the header's declaration; one hidden by an export list is
 * refused with what to do about it */
static void test_descriptor_export(void)
{
	install("tests/plugins/.libs/good-noexport.so", "good-noexport.so", 0644);
	struct loader_plugin *p = load_ok("good-noexport.so");
	CHECK_STR_EQ(p->name, "good");
	loader_close(p);
	remove_in(D.plugins, "good-noexport.so");
	install("tests/plugins/.libs/bad-hidden.so", "bad-hidden.so", 0644);
	expect_refused("bad-hidden.so", -ENOENT,
		       "symbol leasehold_plugin not exported: build with LH_PLUGIN_EXPORT");
	remove_in(D.plugins, "bad-hidden.so");
}

static void test_example_descriptors(void)
{
	install("plugins/reconciler-1.0.0.so", "reconciler.so", 0755);
	struct loader_plugin *a = load_ok("reconciler.so");
	CHECK_STR_EQ(a->name, "reconciler");
	CHECK(a->release.major == 1 && a->release.minor == 0 && a->release.patch == 0);
	CHECK(a->min_reconciler_release.major == 1 && a->min_reconciler_release.minor == 0);
	CHECK(a->min_compatible_release.major == 1 && a->min_compatible_release.minor == 0);
	CHECK(a->desc.init && a->desc.on_elected && a->desc.reconcile && a->desc.on_deposed &&
	      a->desc.fini && a->desc.on_watch_events && a->desc.on_config_changed &&
	      a->desc.validate_config);
	/* ABI 1.3: its schema */
	CHECK(a->desc.abi_minor == 3 && a->desc.n_config_fields == 1 &&
	      strcmp(a->desc.config_fields[0].path, "label") == 0 &&
	      a->desc.config_fields[0].type == LH_CONFIG_STRING);
	install("plugins/reconciler-1.1.0.so", "reconciler-next.so", 0755);
	struct loader_plugin *b = load_ok("reconciler-next.so");
	CHECK(b->release.major == 1 && b->release.minor == 1 && b->release.patch == 0);
	CHECK(b->min_reconciler_release.major == 1 && b->min_reconciler_release.minor == 0);
	CHECK(b->min_compatible_release.major == 1 && b->min_compatible_release.minor == 1);
	CHECK(a->content_hash != b->content_hash);

	/* the daemon's duplicate-name check */
	const struct loader_plugin *list[] = {NULL, a, b};
	CHECK_INT_EQ(loader_find_by_name(list, 3, "reconciler"), 1);
	CHECK_INT_EQ(loader_find_by_name(list, 3, "other"), -ENOENT);
	loader_close(a);
	loader_close(b);
	remove_in(D.plugins, "reconciler.so");
	remove_in(D.plugins, "reconciler-next.so");
	CHECK_INT_EQ(count_entries(D.private_dir), 0);
}

static void test_hot_reload_loads_new_code(void)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/reconciler.so", D.plugins);

	install("plugins/reconciler-1.0.0.so", "reconciler.so", 0755);
	struct loader_plugin *old = load_ok("reconciler.so");
	CHECK_INT_EQ(old->release.minor, 0);

	/* what a naive host would see: glibc matches the path and returns the
	 * already loaded object (informational: this is why copies exist) */
	void *naive1 = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(naive1);

	/* the new release is written aside and renamed over the same path */
	install("plugins/reconciler-1.1.0.so", "reconciler.so", 0755);
	void *naive2 = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(naive2);
	if (naive1 == naive2) {
		const struct lh_plugin *d = dlsym(naive2, "leasehold_plugin");
		fprintf(stderr, "note: plain dlopen after rename returned the OLD handle (release %u.%u)\n",
		        d ? d->release.major : 0, d ? d->release.minor : 0);
	}
	dlclose(naive2);
	dlclose(naive1);

	struct loader_plugin *neu = load_ok("reconciler.so");
	CHECK_INT_EQ(neu->release.minor, 1); /* NEW code */
	CHECK_INT_EQ(old->release.minor, 0); /* old instance untouched */
	CHECK(neu->handle != old->handle);
	CHECK((void *)neu->desc.reconcile != (void *)old->desc.reconcile);
	const struct lh_plugin *nd = dlsym(neu->handle, "leasehold_plugin");
	const struct lh_plugin *od = dlsym(old->handle, "leasehold_plugin");
	CHECK(nd && od && nd != od);
	CHECK_INT_EQ(nd->min_compatible_release.minor, 1);
	CHECK_INT_EQ(od->min_compatible_release.minor, 0);
	CHECK_INT_EQ(count_entries(D.private_dir), 2);
	CHECK(strcmp(neu->copy_path, old->copy_path) != 0);

	/* the same content loaded twice: same hash, still two objects */
	struct loader_plugin *again = load_ok("reconciler.so");
	CHECK(again->content_hash == neu->content_hash);
	CHECK(again->handle != neu->handle);
	loader_close(again);
	loader_close(old);
	loader_close(neu);
	remove_in(D.plugins, "reconciler.so");
	CHECK_INT_EQ(count_entries(D.private_dir), 0);
}

static void test_refuse_not_elf(void)
{
	const char text[] = "#!/bin/sh\necho not a plugin\n";
	put_bytes(D.plugins, "text.so", text, sizeof(text) - 1, 0644);
	expect_refused("text.so", -ENOEXEC, "not an ELF file (no ELF magic)");
	put_bytes(D.plugins, "empty.so", "", 0, 0644);
	expect_refused("empty.so", -ENOEXEC, "empty.so has an unreasonable size (0 bytes)");
	remove_in(D.plugins, "text.so");
	remove_in(D.plugins, "empty.so");
}

static void test_refuse_truncated_elf(void)
{
	char src[PATH_MAX], msg[256];
	char *buf;
	size_t len;
	path_of(src, sizeof(src), "plugins/reconciler-1.0.0.so");
	read_file(src, &buf, &len);

	put_bytes(D.plugins, "tiny.so", buf, 40, 0644);
	snprintf(msg, sizeof(msg), "truncated ELF file: 40 bytes, the ELF header needs %zu",
	         sizeof(Elf64_Ehdr));
	expect_refused("tiny.so", -ENOEXEC, msg);

	/* cut in half: section headers (at the end) and segments lie outside */
	size_t half = len / 2;
	put_bytes(D.plugins, "half.so", buf, half, 0644);
	snprintf(msg, sizeof(msg), "truncated ELF file: section headers lie outside its %zu bytes",
	         half);
	expect_refused("half.so", -ENOEXEC, msg);
	free(buf);
	remove_in(D.plugins, "tiny.so");
	remove_in(D.plugins, "half.so");
}

static void test_refuse_not_shared_object(void)
{
	/* a well-formed ELF header of a relocatable object (ET_REL) */
	char src[PATH_MAX];
	char *buf;
	size_t len;
	path_of(src, sizeof(src), "plugins/reconciler-1.0.0.so");
	read_file(src, &buf, &len);
	Elf64_Ehdr eh;
	memcpy(&eh, buf, sizeof(eh));
	eh.e_type = ET_REL;
	memcpy(buf, &eh, sizeof(eh));
	put_bytes(D.plugins, "object.so", buf, len, 0644);
	expect_refused("object.so", -ENOEXEC, "not an ELF shared object (ELF type 1)");
	free(buf);
	remove_in(D.plugins, "object.so");
}

struct bad_case {
	const char *built;
	int err;
	const char *msg;
};

static void test_refuse_bad_descriptors(void)
{
	char small[128], big[128], minor[128];
	snprintf(minor, sizeof(minor), "plugin ABI minor %u is newer than the host's ABI 1.%u",
	         LH_PLUGIN_ABI_MINOR + 1, LH_PLUGIN_ABI_MINOR);
	snprintf(small, sizeof(small), "descriptor size 16 is smaller than the ABI 1.0 minimum %zu",
	         (size_t)LH_PLUGIN_SIZE_1_0);
	snprintf(big, sizeof(big), "descriptor size 4096 exceeds the %zu bytes of symbol leasehold_plugin",
	         sizeof(struct lh_plugin));
	const struct bad_case cases[] = {
		{"bad-nosym", -EPROTO, "missing symbol leasehold_plugin (not a leasehold plugin)"},
		{"bad-magic", -EPROTO,
		 "wrong descriptor magic 0x1234 (expected 0x4c48): not a leasehold plugin"},
		{"bad-major", -EPROTO, "plugin ABI major 2 does not match the host's ABI major 1"},
		{"bad-minor", -EPROTO, minor},
		{"bad-size-small", -EPROTO, small},
		{"bad-size-big", -EPROTO, big},
		{"bad-name-empty", -EINVAL, "plugin name is empty"},
		{"bad-name-chars", -EINVAL,
		 "invalid plugin name \"Bad Name!\" (allowed: [a-z0-9_-], 1 to 63 characters)"},
		{"bad-below-compat", -EINVAL, "release 1.0.0 is below its own min_compatible_release 1.1.0"},
		{"bad-below-reconciler", -EINVAL,
		 "release 1.0.0 is below its own min_reconciler_release 2.0.0"},
		{"bad-no-reconcile", -EINVAL, "required callback reconcile is missing (or, ABI 1.3, reconcile_key)"},
		{"bad-role", -EINVAL,
		 "invalid plugin role (allowed: [a-z0-9_-], 1 to 63 characters)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char built[PATH_MAX], name[128];
		snprintf(built, sizeof(built), "tests/plugins/.libs/%s.so", cases[i].built);
		snprintf(name, sizeof(name), "%s.so", cases[i].built);
		fprintf(stderr, "  case %s\n", cases[i].built);
		install(built, name, 0644);
		expect_refused(name, cases[i].err, cases[i].msg);
		remove_in(D.plugins, name);
	}
}

static void test_role_is_read(void)
{
	char err[LOADER_ERR_MAX];
	struct loader_plugin *p = NULL;
	install("tests/plugins/.libs/good-role.so", "good-role.so", 0644);
	CHECK_OK(loader_open(D.plugins, "good-role.so", D.private_dir, &p, err, sizeof(err)));
	CHECK_STR_EQ(p->role, "controller");
	loader_close(p);
	remove_in(D.plugins, "good-role.so");
	install("tests/plugins/.libs/good.so", "good.so", 0644);
	CHECK_OK(loader_open(D.plugins, "good.so", D.private_dir, &p, err, sizeof(err)));
	CHECK_STR_EQ(p->role, ""); /* no role: every node */
	loader_close(p);
	remove_in(D.plugins, "good.so");

	/* an ABI 1.0 descriptor is read as 1.0 even if its size covers `role` */
	struct lh_plugin d, out;
	memset(&d, 0, sizeof(d));
	d.magic_major = LH_PLUGIN_MAGIC_MAJOR;
	d.abi_minor = 0;
	d.size = sizeof(d);
	d.name = "x";
	d.role = "controller";
	d.reconcile = (int32_t(*)(struct lh_ctx *))(uintptr_t)0x1;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK(out.role == NULL);
	d.abi_minor = 1;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK(out.role == d.role);
}

static void test_validate_descriptor_memory(void)
{
	struct lh_plugin d, out;
	char err[LOADER_ERR_MAX];
	uint32_t tiny[2] = {LH_PLUGIN_MAGIC_MAJOR, 0};
	CHECK_INT_EQ(loader_validate_descriptor(tiny, sizeof(tiny), NULL, &out, err, sizeof(err)),
	             -EPROTO);
	CHECK_STR_EQ(err, "descriptor leasehold_plugin is too small (8 bytes)");
	memset(&d, 0, sizeof(d));
	d.magic_major = LH_PLUGIN_MAGIC_MAJOR;
	d.size = sizeof(d);
	d.name = "x";
	d.reconcile = (int32_t(*)(struct lh_ctx *))(uintptr_t)0x1;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK(out.reconcile == d.reconcile);
	/* the rollout flag is read; a flag bit this host does not know is refused */
	d.flags = LH_PLUGIN_F_REFERENCE_ROLLOUT;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.flags, LH_PLUGIN_F_REFERENCE_ROLLOUT);
	d.flags = LH_PLUGIN_F_REFERENCE_ROLLOUT | 0x80u;
	CHECK_INT_EQ(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)),
	             -EPROTO);
	CHECK_STR_EQ(err, "descriptor flags 0x81 include bits this host does not know (0x80)");
	d.flags = 0;
	/* key_concurrency (ABI 1.3): 0 means 1; above the bound, or without
	 * reconcile_key, refused; a 1.3 descriptor whose size ends before it
	 * runs one key at a time whatever the bytes beyond its size hold */
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.key_concurrency, 1);
	d.key_concurrency = 4; /* not read below ABI 1.3 */
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.key_concurrency, 1);
	d.abi_minor = 3;
	CHECK_INT_EQ(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)),
	             -EINVAL);
	CHECK_STR_EQ(err, "key_concurrency without reconcile_key: there is no queue to run "
	                  "concurrently");
	d.reconcile_key = (int32_t(*)(struct lh_ctx *, const char *, uint32_t))(uintptr_t)0x1;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.key_concurrency, 4);
	d.size = LH_PLUGIN_SIZE_1_3_KEYED;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.key_concurrency, 1);
	d.size = sizeof(d);
	d.key_concurrency = LH_KEY_CONCURRENCY_MAX;
	CHECK_OK(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)));
	CHECK_INT_EQ(out.key_concurrency, LH_KEY_CONCURRENCY_MAX);
	d.key_concurrency = LH_KEY_CONCURRENCY_MAX + 1;
	CHECK_INT_EQ(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)),
	             -EINVAL);
	CHECK_STR_EQ(err, "key_concurrency 65 is above the host's maximum of 64");
	d.key_concurrency = 0;
	d.reconcile_key = NULL;
	d.abi_minor = 0;
	/* a long name is refused */
	char longname[80];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	d.name = longname;
	CHECK_INT_EQ(loader_validate_descriptor(&d, sizeof(d), NULL, &out, err, sizeof(err)),
	             -EINVAL);
	CHECK(strncmp(err, "invalid plugin name", 19) == 0);
	CHECK(loader_name_valid("a-b_c9"));
	CHECK(!loader_name_valid("A"));
	CHECK(!loader_name_valid(""));
	CHECK(!loader_name_valid("a.b"));
	CHECK(loader_is_candidate("x.so"));
	CHECK(!loader_is_candidate(".x.so"));
	CHECK(!loader_is_candidate(".so"));
	CHECK(!loader_is_candidate("x.so.tmp"));
	CHECK(!loader_is_candidate("a/x.so"));
}

static void test_refuse_writable_file(void)
{
	install("tests/plugins/.libs/good.so", "gw.so", 0664);
	expect_refused("gw.so", -EPERM, "plugin file gw.so is group-writable (mode 0664)");
	install("tests/plugins/.libs/good.so", "ww.so", 0646);
	expect_refused("ww.so", -EPERM, "plugin file ww.so is world-writable (mode 0646)");
	remove_in(D.plugins, "gw.so");
	remove_in(D.plugins, "ww.so");
}

static void test_refuse_writable_dirs(void)
{
	char msg[PATH_MAX + 128];
	install("tests/plugins/.libs/good.so", "good.so", 0644);
	CHECK(chmod(D.plugins, 0777) == 0);
	snprintf(msg, sizeof(msg), "plugin directory %s is world-writable (mode 0777)", D.plugins);
	expect_refused("good.so", -EPERM, msg);
	CHECK(chmod(D.plugins, 0755) == 0);

	/* a parent two levels up: root/a/b/plugins with a group-writable */
	char a[PATH_MAX], b[PATH_MAX], pd[PATH_MAX];
	snprintf(a, sizeof(a), "%s/a", D.root);
	snprintf(b, sizeof(b), "%s/a/b", D.root);
	snprintf(pd, sizeof(pd), "%s/a/b/plugins", D.root);
	CHECK(mkdir(a, 0755) == 0 && mkdir(b, 0755) == 0 && mkdir(pd, 0755) == 0);
	CHECK(chmod(a, 0775) == 0);
	char src[PATH_MAX];
	char *buf;
	size_t len;
	path_of(src, sizeof(src), "tests/plugins/.libs/good.so");
	read_file(src, &buf, &len);
	put_bytes(pd, "good.so", buf, len, 0644);
	free(buf);
	snprintf(msg, sizeof(msg), "parent directory %s is group-writable (mode 0775)", a);
	expect_refused_in(pd, "good.so", -EPERM, msg);
	/* fixed: loads */
	CHECK(chmod(a, 0755) == 0);
	struct loader_plugin *p = NULL;
	CHECK_OK(loader_open(pd, "good.so", D.private_dir, &p, NULL, 0));
	loader_close(p);
	remove_in(pd, "good.so");
	rmdir(pd);
	rmdir(b);
	rmdir(a);
}

static void test_refuse_symlink(void)
{
	install("tests/plugins/.libs/good.so", "good.so", 0644);
	char link[PATH_MAX];
	snprintf(link, sizeof(link), "%s/link.so", D.plugins);
	CHECK(symlink("good.so", link) == 0);
	expect_refused("link.so", -ELOOP, "link.so is a symbolic link (refused)");
	unlink(link);
}

static void test_refuse_wrong_owner(void)
{
	char msg[PATH_MAX + 128];
	install("tests/plugins/.libs/good.so", "owned.so", 0644);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/owned.so", D.plugins);
	if (chown(p, 65534, 65534) < 0) {
		fprintf(stderr, "note: cannot chown (not root): wrong-owner case not run\n");
		remove_in(D.plugins, "owned.so");
		return;
	}
	snprintf(msg, sizeof(msg), "plugin file owned.so is owned by uid 65534, not by root or uid %u",
	         (unsigned)geteuid());
	expect_refused("owned.so", -EPERM, msg);
	remove_in(D.plugins, "owned.so");

	/* the directory's owner counts too */
	CHECK(chown(D.plugins, 65534, 65534) == 0);
	snprintf(msg, sizeof(msg),
		 "plugin directory %s is owned by uid 65534, not by root or uid %u", D.plugins,
		 (unsigned)geteuid());
	expect_refused("good.so", -EPERM, msg);
	CHECK(chown(D.plugins, geteuid(), getegid()) == 0);
}

static void test_refuse_bad_names_and_missing(void)
{
	expect_refused("../good.so", -EINVAL,
	               "invalid plugin file name \"../good.so\" (want NAME.so, no '/', no leading dot)");
	expect_refused(".hidden.so", -EINVAL,
	               "invalid plugin file name \".hidden.so\" (want NAME.so, no '/', no leading dot)");
	expect_refused("absent.so", -ENOENT, "cannot open absent.so: No such file or directory");
}

static void test_private_dir_checks(void)
{
	char msg[PATH_MAX + 160], pd[PATH_MAX];
	char err[LOADER_ERR_MAX];
	snprintf(pd, sizeof(pd), "%s/priv2", D.root);
	CHECK_OK(loader_private_dir_prepare(pd, err, sizeof(err))); /* created */
	struct stat st;
	CHECK(stat(pd, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK_OK(loader_private_dir_prepare(pd, err, sizeof(err))); /* exists, fine */
	CHECK(chmod(pd, 0755) == 0);
	CHECK_INT_EQ(loader_private_dir_prepare(pd, err, sizeof(err)), -EPERM);
	snprintf(msg, sizeof(msg),
	         "private directory %s must be owned by uid %u with mode 0700 (is uid %u, mode 0755)",
	         pd, (unsigned)geteuid(), (unsigned)geteuid());
	CHECK_STR_EQ(err, msg);
	/* loader_open refuses to copy into it */
	install("tests/plugins/.libs/good.so", "good.so", 0644);
	struct loader_plugin *p = NULL;
	CHECK_INT_EQ(loader_open(D.plugins, "good.so", pd, &p, err, sizeof(err)), -EPERM);
	snprintf(msg, sizeof(msg),
	         "private directory %s must be owned by uid %u and not accessible to others", pd,
	         (unsigned)geteuid());
	CHECK_STR_EQ(err, msg);
	CHECK(p == NULL);
	rmdir(pd);
	/* a symlink as private dir is refused */
	char ln[PATH_MAX];
	snprintf(ln, sizeof(ln), "%s/privlink", D.root);
	CHECK(symlink(D.private_dir, ln) == 0);
	CHECK_INT_EQ(loader_private_dir_prepare(ln, err, sizeof(err)), -ELOOP);
	snprintf(msg, sizeof(msg), "private directory %s is a symbolic link (refused)", ln);
	CHECK_STR_EQ(err, msg);
	unlink(ln);
}

int main(void)
{
	ifx_dirs_setup(&D, "test-loader");

	RUN(test_good_plugin_loads);
	RUN(test_example_descriptors);
	RUN(test_descriptor_export);
	RUN(test_hot_reload_loads_new_code);
	RUN(test_refuse_not_elf);
	RUN(test_refuse_truncated_elf);
	RUN(test_refuse_not_shared_object);
	RUN(test_refuse_bad_descriptors);
	RUN(test_validate_descriptor_memory);
	RUN(test_role_is_read);
	RUN(test_refuse_writable_file);
	RUN(test_refuse_writable_dirs);
	RUN(test_refuse_symlink);
	RUN(test_refuse_wrong_owner);
	RUN(test_refuse_bad_names_and_missing);
	RUN(test_private_dir_checks);

	return CHECK_EXIT();
}
