/* SPDX-License-Identifier: MIT */
/*
 * runtime_plugindir.c - see runtime_plugindir.h for the design notes.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi_loader.h"
#include "runtime/runtime_plugindir.h"
#include "runtime/runtime_plugindir_path.h"

#define MAX_DELAY_FACTOR 10

/* one name with a debounced report pending */
struct pending {
	struct plugindir *pd;
	struct loop_timer *timer;
	uint64_t first_ns;
	struct pending *next;
	char name[];
};

struct plugindir {
	struct loop *loop;
	char *dir; /* as configured */
	char *abs; /* dir made absolute at plugindir_new (the walk starts at '/') */
	uint64_t debounce_ns;
	plugindir_cb cb;
	void *userdata;
	int ifd;
	struct loop_io *io;
	struct pending *pending;
	char **known; /* names reported CHANGED and not REMOVED since */
	size_t n_known, cap_known;
	/* following the path (runtime_plugindir_path.h): the walk as last
	 * armed, the watch of each anchor's directory (anchor_wd[i]) and of the
	 * directory itself (dir_wd, -1 while the path names none) */
	struct plugindir_path path;
	int *anchor_wd;
	int dir_wd;
	dev_t dir_dev; /* identity of the armed directory */
	ino_t dir_ino;
	dev_t scan_dev; /* ... and of the one the known names were read from */
	ino_t scan_ino;
	/* 0, or -errno: the path names no directory (gone), or -ENODATA: it
	 * names another, empty one than the names were read from */
	int err;
	/* an anchor changed: re-walk after a debounce, as for file events */
	struct loop_timer *resolve_timer;
	uint64_t resolve_first_ns;
	bool resolve_pending;
};

static ssize_t plugindir_known_index(const struct plugindir *pd, const char *name)
{
	for (size_t i = 0; i < pd->n_known; i++)
		if (strcmp(pd->known[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

static int plugindir_known_add(struct plugindir *pd, const char *name)
{
	if (plugindir_known_index(pd, name) >= 0)
		return 0;
	if (pd->n_known == pd->cap_known) {
		size_t cap = pd->cap_known ? pd->cap_known * 2 : 8;
		char **k = realloc(pd->known, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		pd->known = k;
		pd->cap_known = cap;
	}
	char *dup = strdup(name);
	if (!dup)
		return -ENOMEM;
	pd->known[pd->n_known++] = dup;
	return 0;
}

static void plugindir_known_del(struct plugindir *pd, const char *name)
{
	ssize_t i = plugindir_known_index(pd, name);
	if (i < 0)
		return;
	free(pd->known[i]);
	pd->known[i] = pd->known[--pd->n_known];
}

/* directory events that change the set of candidates */
#define PLUGINDIR_FILE_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)
/* an anchor's directory: entries that appear or go (its name among them) */
#define PLUGINDIR_ENTRY_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)
/* the watched inode itself went away or elsewhere */
#define PLUGINDIR_SELF_MASK (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)

static void plugindir_pending_free(struct plugindir *pd, struct pending *p)
{
	struct pending **pp = &pd->pending;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	loop_timer_free(p->timer);
	free(p);
}

static void plugindir_pending_drop_all(struct plugindir *pd)
{
	while (pd->pending)
		plugindir_pending_free(pd, pd->pending);
}

static struct pending *plugindir_pending_find(struct plugindir *pd, const char *name)
{
	for (struct pending *p = pd->pending; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* (re)arm a debounced timer: `debounce` after now, never beyond
 * MAX_DELAY_FACTOR x debounce after first_ns */
static void plugindir_debounce(const struct plugindir *pd, struct loop_timer *t, uint64_t first_ns)
{
	uint64_t when = loop_now() + pd->debounce_ns;
	uint64_t limit = first_ns + MAX_DELAY_FACTOR * pd->debounce_ns;
	loop_timer_arm_at(t, when < limit ? when : limit);
}

/* what the path names may have changed: walk it again after the burst.
 * Reports of single files wait for that walk's rescan, which covers them. */
static void plugindir_resolve_soon(struct plugindir *pd)
{
	if (!pd->resolve_pending) {
		pd->resolve_pending = true;
		pd->resolve_first_ns = loop_now();
	}
	plugindir_pending_drop_all(pd);
	plugindir_debounce(pd, pd->resolve_timer, pd->resolve_first_ns);
}

/* 1 when the entry exists as a candidate (regular file or symlink) in the
 * armed directory, 0 when not, -ESTALE when the path names another
 * directory now (or none): then only a walk can tell */
static int plugindir_present(const struct plugindir *pd, const char *name)
{
	struct stat st, dst;
	int dfd = open(pd->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -ESTALE;
	if (fstat(dfd, &dst) < 0 || dst.st_dev != pd->dir_dev || dst.st_ino != pd->dir_ino) {
		close(dfd);
		return -ESTALE;
	}
	int r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
	close(dfd);
	return r == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

/* report the current state of one name */
static void plugindir_report(struct plugindir *pd, const char *name)
{
	if (pd->err || pd->resolve_pending)
		return; /* the rescan after the walk reports it */
	int present = plugindir_present(pd, name);
	if (present < 0) {
		/* never a removal from a directory that is no longer the one at
		 * the path: that is for the walk to decide */
		plugindir_resolve_soon(pd);
	} else if (present) {
		plugindir_known_add(pd, name); /* on ENOMEM we may miss a later REMOVED: acceptable */
		pd->cb(pd->userdata, PLUGINDIR_CHANGED, name);
	} else if (plugindir_known_index(pd, name) >= 0) {
		plugindir_known_del(pd, name);
		pd->cb(pd->userdata, PLUGINDIR_REMOVED, name);
	}
}

static void plugindir_pending_fire(struct loop_timer *t, void *userdata)
{
	struct pending *p = userdata;
	struct plugindir *pd = p->pd;
	char name[NAME_MAX + 1];
	(void)t;
	snprintf(name, sizeof(name), "%s", p->name);
	plugindir_pending_free(pd, p);
	plugindir_report(pd, name);
}

static void plugindir_note_event(struct plugindir *pd, const char *name)
{
	if (pd->resolve_pending)
		return; /* the walk's rescan covers it */
	struct pending *p = plugindir_pending_find(pd, name);
	if (!p) {
		size_t n = strlen(name);
		p = calloc(1, sizeof(*p) + n + 1);
		if (!p)
			return;
		memcpy(p->name, name, n + 1);
		p->pd = pd;
		p->first_ns = loop_now();
		if (loop_timer_new(pd->loop, plugindir_pending_fire, p, &p->timer) < 0) {
			free(p);
			return;
		}
		p->next = pd->pending;
		pd->pending = p;
	}
	plugindir_debounce(pd, p->timer, p->first_ns);
}

/* an event on an anchor that may change what the path names */
static bool plugindir_is_anchor_event(const struct plugindir *pd, const struct inotify_event *ev)
{
	for (size_t i = 0; i < pd->path.n_anchors; i++) {
		if (pd->anchor_wd[i] != ev->wd)
			continue;
		if (ev->mask & PLUGINDIR_SELF_MASK)
			return true;
		if (ev->len && (ev->mask & PLUGINDIR_ENTRY_MASK) &&
		    strcmp(ev->name, pd->path.anchors[i].name) == 0)
			return true;
	}
	return false;
}

static void plugindir_on_inotify(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct plugindir *pd = userdata;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool walk = false;
	(void)io;
	(void)events;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) { /* events were lost: anchors' too */
				walk = true;
				continue;
			}
			if (plugindir_is_anchor_event(pd, ev))
				walk = true;
			if (pd->dir_wd < 0 || ev->wd != pd->dir_wd)
				continue; /* a watch dropped since, or an anchor's other entries */
			if (ev->mask & PLUGINDIR_SELF_MASK) {
				walk = true;
				continue;
			}
			if (pd->err) { /* an empty replacement being filled */
				walk = true;
				continue;
			}
			if (ev->len == 0 || (ev->mask & IN_ISDIR) || !loader_is_candidate(ev->name))
				continue;
			if (ev->mask & PLUGINDIR_FILE_MASK)
				plugindir_note_event(pd, ev->name);
		}
	}
	if (walk)
		plugindir_resolve_soon(pd);
}

/* wd, or -errno; IN_MASK_ADD: an inode watched for two roles keeps both */
static int plugindir_watch(struct plugindir *pd, const char *dir, uint32_t mask)
{
	int wd = inotify_add_watch(pd->ifd, dir, mask | IN_MASK_ADD | IN_ONLYDIR | IN_DONT_FOLLOW);
	return wd < 0 ? -errno : wd;
}

static bool plugindir_wd_in_use(const struct plugindir *pd, int wd)
{
	if (wd == pd->dir_wd)
		return true;
	for (size_t i = 0; i < pd->path.n_anchors; i++)
		if (pd->anchor_wd[i] == wd)
			return true;
	return false;
}

/* watch what walk p went through: *ret_aw[i] for each anchor (-errno when
 * unwatchable: then a change there goes unseen until the next walk),
 * *ret_dir_wd and *ret_st for the directory (p->err set when it cannot be
 * watched). 0 or -ENOMEM. */
static int plugindir_arm_walk(struct plugindir *pd, struct plugindir_path *p, int **ret_aw,
                              int *ret_dir_wd, struct stat *ret_st)
{
	int *aw = calloc(p->n_anchors ? p->n_anchors : 1, sizeof(*aw));
	if (!aw)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_anchors; i++)
		aw[i] = plugindir_watch(pd, p->anchors[i].dir,
		                        PLUGINDIR_ENTRY_MASK | IN_DELETE_SELF | IN_MOVE_SELF);
	*ret_dir_wd = -1;
	if (!p->err) {
		int wd = plugindir_watch(pd, p->resolved,
		                         PLUGINDIR_FILE_MASK | IN_DELETE_SELF | IN_MOVE_SELF);
		if (wd < 0)
			p->err = wd;
		else if (stat(p->resolved, ret_st) < 0)
			p->err = -errno;
		else
			*ret_dir_wd = wd;
	}
	*ret_aw = aw;
	return 0;
}

/* plugindir_rearm - walk the path again, watch what it went through, drop
 * the watches no longer needed (an inode watched before and now keeps its
 * watch: no event is lost in between). Sets pd->err. 0 or -ENOMEM (then
 * the previous watches stay). */
static int plugindir_rearm(struct plugindir *pd)
{
	struct plugindir_path p, check, old;
	struct stat st = {0};
	int *aw, dir_wd, r;
	if ((r = plugindir_path_resolve(pd->abs, &p)) < 0)
		return r;
	if ((r = plugindir_arm_walk(pd, &p, &aw, &dir_wd, &st)) < 0) {
		plugindir_path_clear(&p);
		return r;
	}
	/* a change between the walk and its watches made no event: look again */
	bool moved =
	        plugindir_path_resolve(pd->abs, &check) < 0 || !plugindir_path_equal(&p, &check);
	plugindir_path_clear(&check);
	old = pd->path;
	int *old_aw = pd->anchor_wd, old_dir = pd->dir_wd;
	pd->path = p;
	pd->anchor_wd = aw;
	pd->dir_wd = dir_wd;
	pd->err = p.err;
	pd->dir_dev = st.st_dev;
	pd->dir_ino = st.st_ino;
	for (size_t i = 0; i <= old.n_anchors; i++) {
		int wd = i < old.n_anchors ? old_aw[i] : old_dir;
		if (wd >= 0 && !plugindir_wd_in_use(pd, wd))
			inotify_rm_watch(pd->ifd, wd); /* EINVAL for a duplicate: fine */
	}
	free(old_aw);
	plugindir_path_clear(&old);
	if (moved)
		plugindir_resolve_soon(pd);
	return 0;
}

struct plugindir_names {
	char **v;
	size_t n, cap;
};

static int plugindir_read_names(struct plugindir *pd, struct plugindir_names *ret);
static int plugindir_apply_names(struct plugindir *pd, const struct plugindir_names *names);
static void plugindir_names_free(struct plugindir_names *names);

/* the state of the path after a walk (pd->err) and, when it names a
 * directory, its names; 0 or -ENOMEM */
static int plugindir_settle(struct plugindir *pd, int old_err, struct plugindir_names *names)
{
	int r;
	if (pd->err)
		return 0;
	if ((r = plugindir_read_names(pd, names)) < 0) {
		if (r == -ENOMEM)
			return r;
		pd->err = r;
		return 0;
	}
	/* an empty directory in place of the one the names were read from (or
	 * back after it was gone) is one being filled (`mkdir`, then copies):
	 * no release to apply yet. A directory that holds files is applied in
	 * full. */
	bool anew = old_err != 0 || pd->dir_dev != pd->scan_dev || pd->dir_ino != pd->scan_ino;
	if (names->n == 0 && pd->n_known > 0 && anew)
		pd->err = -ENODATA;
	return 0;
}

/* plugindir_refresh - walk and arm again, report a change of the path's
 * state (DIR_GONE once per reason, DIR_BACK once), rescan a present
 * directory as one batch. Returns the number of CHANGED reports or -errno. */
static int plugindir_refresh(struct plugindir *pd)
{
	struct plugindir_names names = {0};
	int old_err = pd->err;
	int r = plugindir_rearm(pd);
	if (r == 0)
		r = plugindir_settle(pd, old_err, &names);
	if (r < 0) {
		/* out of memory: nothing was reported, the next walk compares
		 * with the state last reported */
		pd->err = old_err;
		plugindir_resolve_soon(pd);
		return r;
	}
	if (pd->err) {
		/* nothing is removed because a directory went: the names stay
		 * known, and the directory that comes back is compared to them */
		plugindir_names_free(&names);
		plugindir_pending_drop_all(pd);
		if (pd->err != old_err)
			pd->cb(pd->userdata, PLUGINDIR_DIR_GONE, NULL);
		return pd->err;
	}
	if (old_err)
		pd->cb(pd->userdata, PLUGINDIR_DIR_BACK, NULL);
	pd->scan_dev = pd->dir_dev;
	pd->scan_ino = pd->dir_ino;
	r = plugindir_apply_names(pd, &names);
	plugindir_names_free(&names);
	return r;
}

static void plugindir_resolve_fire(struct loop_timer *t, void *userdata)
{
	struct plugindir *pd = userdata;
	(void)t;
	pd->resolve_pending = false;
	(void)plugindir_refresh(pd); /* reported through the callback */
}

static int plugindir_absolute(const char *dir, char **ret)
{
	char cwd[PATH_MAX];
	if (dir[0] == '/') {
		*ret = strdup(dir);
		return *ret ? 0 : -ENOMEM;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	size_t n = strlen(cwd) + 1 + strlen(dir) + 1;
	if (!(*ret = malloc(n)))
		return -ENOMEM;
	snprintf(*ret, n, "%s/%s", cwd, dir);
	return 0;
}

int plugindir_new(struct loop *l, const char *dir, uint64_t debounce_ns, plugindir_cb cb,
                  void *userdata, struct plugindir **ret_pd)
{
	struct plugindir *pd = calloc(1, sizeof(*pd));
	int r;
	if (!pd)
		return -ENOMEM;
	pd->loop = l;
	pd->ifd = -1;
	pd->dir_wd = -1;
	pd->debounce_ns = debounce_ns ? debounce_ns : PLUGINDIR_DEBOUNCE_DEFAULT_NS;
	pd->cb = cb;
	pd->userdata = userdata;
	if (!(pd->dir = strdup(dir))) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = plugindir_absolute(dir, &pd->abs)) < 0)
		goto fail;
	pd->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (pd->ifd < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = loop_timer_new(l, plugindir_resolve_fire, pd, &pd->resolve_timer)) < 0)
		goto fail;
	if ((r = plugindir_rearm(pd)) < 0)
		goto fail;
	if ((r = pd->err) < 0) /* the directory must exist to start with */
		goto fail;
	r = loop_io_add(l, pd->ifd, EPOLLIN, plugindir_on_inotify, pd, &pd->io);
	if (r < 0)
		goto fail;
	*ret_pd = pd;
	return 0;
fail:
	plugindir_free(pd);
	return r;
}

static int plugindir_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void plugindir_names_free(struct plugindir_names *names)
{
	for (size_t i = 0; i < names->n; i++)
		free(names->v[i]);
	free(names->v);
	memset(names, 0, sizeof(*names));
}

static int plugindir_names_add(struct plugindir_names *names, const char *name)
{
	if (names->n == names->cap) {
		size_t c = names->cap ? names->cap * 2 : 16;
		char **nn = realloc(names->v, c * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		names->v = nn;
		names->cap = c;
	}
	if (!(names->v[names->n] = strdup(name)))
		return -ENOMEM;
	names->n++;
	return 0;
}

/* the candidates at the path now, sorted; 0 or -errno (*ret then empty) */
static int plugindir_read_names(struct plugindir *pd, struct plugindir_names *ret)
{
	struct plugindir_names names = {0};
	struct stat dst;
	int r = 0;
	int dfd = open(pd->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &dst) == 0 && (dst.st_dev != pd->dir_dev || dst.st_ino != pd->dir_ino))
		plugindir_resolve_soon(pd); /* swapped since the walk: read it, walk again */
	DIR *d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			r = -errno;
			break;
		}
		if (!loader_is_candidate(de->d_name))
			continue;
		if (de->d_type != DT_REG && de->d_type != DT_LNK) {
			struct stat st;
			if (de->d_type != DT_UNKNOWN ||
			    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
				continue;
		}
		if ((r = plugindir_names_add(&names, de->d_name)) < 0)
			break;
	}
	closedir(d);
	if (r < 0) {
		plugindir_names_free(&names);
		return r;
	}
	if (names.n > 1)
		qsort(names.v, names.n, sizeof(*names.v), plugindir_cmp_names);
	*ret = names;
	return 0;
}

/* report the difference between the names known and `names` (sorted):
 * REMOVED for each known name absent, CHANGED for each present. Returns
 * the number of CHANGED reports. */
static int plugindir_apply_names(struct plugindir *pd, const struct plugindir_names *names)
{
	for (size_t i = 0; i < pd->n_known;) {
		char *k = pd->known[i];
		if (names->n == 0 ||
		    !bsearch(&k, names->v, names->n, sizeof(*names->v), plugindir_cmp_names)) {
			struct pending *p = plugindir_pending_find(pd, k);
			if (p)
				plugindir_pending_free(pd, p);
			pd->known[i] = pd->known[--pd->n_known];
			pd->cb(pd->userdata, PLUGINDIR_REMOVED, k);
			free(k);
			continue;
		}
		i++;
	}
	for (size_t i = 0; i < names->n; i++) {
		struct pending *p = plugindir_pending_find(pd, names->v[i]);
		if (p)
			plugindir_pending_free(pd, p);
		plugindir_known_add(pd, names->v[i]);
		pd->cb(pd->userdata, PLUGINDIR_CHANGED, names->v[i]);
	}
	return (int)names->n;
}

int plugindir_scan(struct plugindir *pd)
{
	/* a walk that was due happens now: its rescan is this one */
	pd->resolve_pending = false;
	loop_timer_disarm(pd->resolve_timer);
	return plugindir_refresh(pd);
}

int plugindir_error(const struct plugindir *pd)
{
	return pd->err;
}

int plugindir_prefer(const struct plugindir_candidate *a, const struct plugindir_candidate *b)
{
	int c = release_cmp(a->release, b->release);
	if (c != 0)
		return c;
	if (a->current != b->current)
		return a->current ? 1 : -1;
	c = strcmp(a->file, b->file);
	return c < 0 ? 1 : c > 0 ? -1 : 0;
}

const char *plugindir_path(const struct plugindir *pd)
{
	return pd->dir;
}

void plugindir_free(struct plugindir *pd)
{
	if (!pd)
		return;
	plugindir_pending_drop_all(pd);
	loop_timer_free(pd->resolve_timer);
	loop_io_free(pd->io);
	if (pd->ifd >= 0)
		close(pd->ifd);
	plugindir_path_clear(&pd->path);
	free(pd->anchor_wd);
	free(pd->abs);
	for (size_t i = 0; i < pd->n_known; i++)
		free(pd->known[i]);
	free(pd->known);
	free(pd->dir);
	free(pd);
}
