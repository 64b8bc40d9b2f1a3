/* SPDX-License-Identifier: MIT */
/* abi_config_doc.c - see abi_config_doc.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "abi/abi_loader.h"
#include "abi/abi_config_doc.h"

int plugin_config_doc_check(const void *buf, size_t len, char *err, size_t err_len)
{
	if (len > PLUGIN_CONFIG_MAX) {
		snprintf(err, err_len, "the document is %zu bytes, more than the %zu allowed", len,
			 PLUGIN_CONFIG_MAX);
		return -EMSGSIZE;
	}
	if (len == 0 || memchr(buf, '\0', len)) {
		snprintf(err, err_len, "%s",
			 len ? "the document contains a NUL byte"
			     : "the document is empty (want a JSON object)");
		return -EBADMSG;
	}
	struct json_tokener *tok = json_tokener_new_ex(PLUGIN_CONFIG_MAX_DEPTH);
	if (!tok) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	int r = 0;
	if (je == json_tokener_continue) {
		snprintf(err, err_len, "not valid JSON: the document ends early");
		r = -EBADMSG;
	} else if (je != json_tokener_success) {
		snprintf(err, err_len, "not valid JSON: %s at byte %zu",
			 json_tokener_error_desc(je), end);
		r = -EBADMSG;
	} else if (!json_object_is_type(o, json_type_object)) {
		snprintf(err, err_len, "not a JSON object (the document must be {...})");
		r = -EBADMSG;
	} else {
		const char *p = buf;
		for (size_t i = end; i < len; i++) {
			if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') {
				snprintf(err, err_len,
					 "not valid JSON: more after the object (byte %zu)", i);
				r = -EBADMSG;
				break;
			}
		}
	}
	json_object_put(o);
	json_tokener_free(tok);
	return r;
}

int plugin_config_doc_read_file(const char *path, char **ret_doc, size_t *ret_len, char *err,
				size_t err_len)
{
	char why[256];
	int r, fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "cannot open %s: %s", path, strerror(-r));
		return r;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = errno ? -errno : -EINVAL;
		snprintf(err, err_len, "%s is not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	/* read one byte past the bound: a longer file is refused as such */
	char *buf = malloc(PLUGIN_CONFIG_MAX + 2);
	size_t len = 0;
	if (!buf) {
		close(fd);
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, PLUGIN_CONFIG_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			snprintf(err, err_len, "cannot read %s: %s", path, strerror(-r));
			free(buf);
			close(fd);
			return r;
		}
		if (n == 0 || (len += (size_t)n) > PLUGIN_CONFIG_MAX)
			break;
	}
	close(fd);
	r = plugin_config_doc_check(buf, len, why, sizeof(why));
	if (r < 0) {
		if (r == -EMSGSIZE)
			snprintf(err, err_len, "%s is larger than %zu bytes", path,
				 PLUGIN_CONFIG_MAX);
		else
			snprintf(err, err_len, "%s: %s", path, why);
		free(buf);
		return r;
	}
	buf[len] = 0;
	*ret_doc = buf;
	*ret_len = len;
	return 0;
}

int plugin_config_parse_flag(const char *arg, char *ret_name, const char **ret_file, char *err,
			     size_t err_len)
{
	const char *eq = arg ? strchr(arg, '=') : NULL;
	char name[LH_PLUGIN_NAME_MAX + 2];
	if (!eq || eq == arg || !eq[1]) {
		snprintf(err, err_len,
			 "--plugin-config wants NAME=FILE (e.g. "
			 "reconciler=/etc/leasehold/reconciler.json)");
		return -EINVAL;
	}
	size_t n = (size_t)(eq - arg);
	if (n > LH_PLUGIN_NAME_MAX)
		n = LH_PLUGIN_NAME_MAX + 1; /* too long: refused below */
	memcpy(name, arg, n);
	name[n] = 0;
	if (!loader_name_valid(name)) {
		snprintf(err, err_len,
			 "--plugin-config: invalid plugin name (allowed: [a-z0-9_-], 1 to %d "
			 "characters)",
			 LH_PLUGIN_NAME_MAX);
		return -EINVAL;
	}
	memcpy(ret_name, name, n + 1);
	*ret_file = eq + 1;
	return 0;
}

static int plugin_config_doc_dup_doc(const char *s, size_t len, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	char *d = malloc(len + 1);
	if (!d)
		return -ENOMEM;
	memcpy(d, s, len);
	d[len] = 0;
	*ret = d;
	return 0;
}

int plugin_config_copy(struct plugin_config *dst, const struct plugin_config *src)
{
	struct plugin_config n = *src;
	if (plugin_config_doc_dup_doc(src->cluster, src->cluster_len, &n.cluster) < 0)
		return -ENOMEM;
	if (plugin_config_doc_dup_doc(src->local, src->local_len, &n.local) < 0) {
		free(n.cluster);
		return -ENOMEM;
	}
	plugin_config_clear(dst);
	*dst = n;
	return 0;
}

static bool plugin_config_doc_equal(const char *a, size_t al, const char *b, size_t bl)
{
	if (!a || !b)
		return !a && !b;
	return al == bl && memcmp(a, b, al) == 0;
}

bool plugin_config_equal(const struct plugin_config *a, const struct plugin_config *b)
{
	return a->cluster_rev == b->cluster_rev && a->cluster_invalid == b->cluster_invalid &&
	       plugin_config_doc_equal(a->cluster, a->cluster_len, b->cluster, b->cluster_len) &&
	       plugin_config_doc_equal(a->local, a->local_len, b->local, b->local_len);
}

void plugin_config_clear(struct plugin_config *c)
{
	if (!c)
		return;
	free(c->cluster);
	free(c->local);
	memset(c, 0, sizeof(*c));
}
