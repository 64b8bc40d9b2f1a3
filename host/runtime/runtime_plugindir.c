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
	char *dir;
	uint64_t debounce_ns;
	plugindir_cb cb;
	void *userdata;
	int ifd;
	int wd;
	struct loop_io *io;
	struct pending *pending;
	char **known; /* names reported CHANGED and not REMOVED since */
	size_t n_known, cap_known;
	bool gone;
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

/* the entry exists as a candidate (regular file or symlink)? */
static bool plugindir_present(const struct plugindir *pd, const char *name)
{
	struct stat st;
	int dfd = open(pd->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	int r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
	close(dfd);
	return r == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode));
}

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

static struct pending *plugindir_pending_find(struct plugindir *pd, const char *name)
{
	for (struct pending *p = pd->pending; p; p = p->next)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* report the current state of one name */
static void plugindir_report(struct plugindir *pd, const char *name)
{
	if (plugindir_present(pd, name)) {
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
	uint64_t now = loop_now();
	struct pending *p = plugindir_pending_find(pd, name);
	if (!p) {
		size_t n = strlen(name);
		p = calloc(1, sizeof(*p) + n + 1);
		if (!p)
			return;
		memcpy(p->name, name, n + 1);
		p->pd = pd;
		p->first_ns = now;
		if (loop_timer_new(pd->loop, plugindir_pending_fire, p, &p->timer) < 0) {
			free(p);
			return;
		}
		p->next = pd->pending;
		pd->pending = p;
	}
	uint64_t when = now + pd->debounce_ns;
	uint64_t limit = p->first_ns + MAX_DELAY_FACTOR * pd->debounce_ns;
	loop_timer_arm_at(p->timer, when < limit ? when : limit);
}

static void plugindir_dir_gone(struct plugindir *pd)
{
	pd->gone = true;
	while (pd->pending)
		plugindir_pending_free(pd, pd->pending);
	loop_io_free(pd->io);
	pd->io = NULL;
	while (pd->n_known > 0) {
		char *name = pd->known[--pd->n_known];
		pd->cb(pd->userdata, PLUGINDIR_REMOVED, name);
		free(name);
	}
	pd->cb(pd->userdata, PLUGINDIR_DIR_GONE, NULL);
}

static void plugindir_on_inotify(struct loop_io *io, int fd, uint32_t events, void *userdata)
{
	struct plugindir *pd = userdata;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool rescan = false, gone = false;
	(void)io;
	(void)events;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW)
				rescan = true;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT))
				gone = true;
			if (ev->len == 0 || (ev->mask & IN_ISDIR))
				continue;
			if (!loader_is_candidate(ev->name))
				continue;
			if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM))
				plugindir_note_event(pd, ev->name);
		}
	}
	if (gone) {
		plugindir_dir_gone(pd);
		return;
	}
	if (rescan)
		plugindir_scan(pd);
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
	pd->debounce_ns = debounce_ns ? debounce_ns : PLUGINDIR_DEBOUNCE_DEFAULT_NS;
	pd->cb = cb;
	pd->userdata = userdata;
	pd->dir = strdup(dir);
	if (!pd->dir) {
		r = -ENOMEM;
		goto fail;
	}
	pd->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (pd->ifd < 0) {
		r = -errno;
		goto fail;
	}
	pd->wd = inotify_add_watch(pd->ifd, dir,
	                           IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
	                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
	if (pd->wd < 0) {
		r = -errno;
		goto fail;
	}
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

int plugindir_scan(struct plugindir *pd)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	int dfd = open(pd->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
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
			if (errno) {
				r = -errno;
				goto out;
			}
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
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			char **nn = realloc(names, c * sizeof(*nn));
			if (!nn) {
				r = -ENOMEM;
				goto out;
			}
			names = nn;
			cap = c;
		}
		if (!(names[n] = strdup(de->d_name))) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), plugindir_cmp_names);

	/* names known before but absent now */
	for (size_t i = 0; i < pd->n_known;) {
		char *k = pd->known[i];
		if (n == 0 || !bsearch(&k, names, n, sizeof(*names), plugindir_cmp_names)) {
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
	for (size_t i = 0; i < n; i++) {
		struct pending *p = plugindir_pending_find(pd, names[i]);
		if (p)
			plugindir_pending_free(pd, p);
		plugindir_known_add(pd, names[i]);
		pd->cb(pd->userdata, PLUGINDIR_CHANGED, names[i]);
	}
	r = (int)n;
out:
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
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
	while (pd->pending)
		plugindir_pending_free(pd, pd->pending);
	loop_io_free(pd->io);
	if (pd->ifd >= 0)
		close(pd->ifd);
	for (size_t i = 0; i < pd->n_known; i++)
		free(pd->known[i]);
	free(pd->known);
	free(pd->dir);
	free(pd);
}
