/* SPDX-License-Identifier: MIT */
/*
 * runtime_plugindir_path.c - see runtime_plugindir_path.h for the design notes.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime_plugindir_path.h"

#define PLUGINDIR_PATH_MAX_LINKS 40 /* the kernel's limit, path_resolution(7) */

/* pop the first component of `rest` (leading '/' skipped) into comp;
 * 1 = popped, 0 = none left, -ENAMETOOLONG */
static int plugindir_path_pop(char *rest, char comp[NAME_MAX + 1])
{
	size_t i = 0, n;
	while (rest[i] == '/')
		i++;
	if (!rest[i]) {
		rest[0] = 0;
		return 0;
	}
	for (n = 0; rest[i + n] && rest[i + n] != '/'; n++)
		;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(comp, rest + i, n);
	comp[n] = 0;
	memmove(rest, rest + i + n, strlen(rest + i + n) + 1);
	return 1;
}

/* cur (physical, absolute) to its parent; "/" stays */
static void plugindir_path_up(char *cur)
{
	char *slash = strrchr(cur, '/');
	if (!slash || slash == cur)
		cur[1] = 0;
	else
		*slash = 0;
}

static int plugindir_path_add(struct plugindir_path *p, const char *dir, const char *name)
{
	struct plugindir_anchor *a = realloc(p->anchors, (p->n_anchors + 1) * sizeof(*a));
	if (!a)
		return -ENOMEM;
	p->anchors = a;
	a = &p->anchors[p->n_anchors];
	a->dir = strdup(dir);
	a->name = strdup(name);
	if (!a->dir || !a->name) {
		free(a->dir);
		free(a->name);
		return -ENOMEM;
	}
	p->n_anchors++;
	return 0;
}

/* a symlink at `at` was met: put its target in front of rest; an absolute
 * target restarts the walk at '/'. 0 or -errno (the path's state). */
static int plugindir_path_splice(const char *at, char *cur, char *rest, size_t rest_len)
{
	char target[PATH_MAX], joined[PATH_MAX];
	ssize_t n = readlink(at, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENOENT;
	target[n] = 0;
	if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", target, rest) >= sizeof(joined) ||
	    strlen(joined) >= rest_len)
		return -ENAMETOOLONG;
	memcpy(rest, joined, strlen(joined) + 1);
	if (target[0] == '/')
		cur[1] = 0;
	return 0;
}

int plugindir_path_resolve(const char *path, struct plugindir_path *ret)
{
	char cur[PATH_MAX] = "/", rest[PATH_MAX], comp[NAME_MAX + 1], next[PATH_MAX];
	struct plugindir_path p = {0};
	int links = 0, r;
	if (!path || path[0] != '/')
		return -EINVAL;
	if ((size_t)snprintf(rest, sizeof(rest), "%s", path) >= sizeof(rest)) {
		p.err = -ENAMETOOLONG;
		goto done;
	}
	while ((r = plugindir_path_pop(rest, comp)) != 0) {
		if (r < 0) {
			p.err = r;
			goto done;
		}
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			plugindir_path_up(cur);
			continue;
		}
		if ((r = plugindir_path_add(&p, cur, comp)) < 0)
			goto fail;
		if ((size_t)snprintf(next, sizeof(next), "%s%s%s", cur, cur[1] ? "/" : "", comp) >=
		    sizeof(next)) {
			p.err = -ENAMETOOLONG;
			goto done;
		}
		struct stat st;
		if (lstat(next, &st) < 0) {
			p.err = -errno;
			goto done;
		}
		if (S_ISLNK(st.st_mode)) {
			if (++links > PLUGINDIR_PATH_MAX_LINKS) {
				p.err = -ELOOP;
				goto done;
			}
			if ((p.err = plugindir_path_splice(next, cur, rest, sizeof(rest))) < 0)
				goto done;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			p.err = -ENOTDIR;
			goto done;
		}
		memcpy(cur, next, strlen(next) + 1);
	}
	if (!(p.resolved = strdup(cur))) {
		r = -ENOMEM;
		goto fail;
	}
done:
	*ret = p;
	return 0;
fail:
	plugindir_path_clear(&p);
	return r;
}

static bool plugindir_path_streq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool plugindir_path_equal(const struct plugindir_path *a, const struct plugindir_path *b)
{
	if (a->err != b->err || a->n_anchors != b->n_anchors ||
	    !plugindir_path_streq(a->resolved, b->resolved))
		return false;
	for (size_t i = 0; i < a->n_anchors; i++)
		if (strcmp(a->anchors[i].dir, b->anchors[i].dir) != 0 ||
		    strcmp(a->anchors[i].name, b->anchors[i].name) != 0)
			return false;
	return true;
}

void plugindir_path_clear(struct plugindir_path *p)
{
	for (size_t i = 0; i < p->n_anchors; i++) {
		free(p->anchors[i].dir);
		free(p->anchors[i].name);
	}
	free(p->anchors);
	free(p->resolved);
	memset(p, 0, sizeof(*p));
}
