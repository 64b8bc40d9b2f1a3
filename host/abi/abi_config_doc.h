/* SPDX-License-Identifier: MIT */
/*
 * abi_config_doc.h - a plugin's configuration documents (ABI 1.2): the
 * cluster-wide one in etcd (P/N/config) and the node-local one from
 * `leasehold --plugin-config NAME=FILE`; the checks every document passes
 * before a plugin sees it, and the `--plugin-config` argument.
 *
 * Design notes
 * - A document is a JSON object (a settings record: a bare number or list
 *   at the top is refused as the likely mistake it is), in UTF-8 text
 *   without NUL bytes, at most PLUGIN_CONFIG_MAX bytes. Every document from
 *   outside (etcd, a file, a control request) is hostile and checked here
 *   before it is stored or handed to a plugin.
 * - The bound, 32 KiB: configuration is settings, not data (data lives
 *   under P/N/data/); every node keeps the document per plugin and hands it
 *   to the plugin's worker on every change; one `config set` must fit in one
 *   control request (64 KiB, control_codec.h); and it is far below etcd's
 *   default request limit (1.5 MiB).
 * - Ownership: struct plugin_config owns its strings (malloc'd, each with a
 *   NUL after its length).
 */
#ifndef LH_PLUGIN_CONFIG_DOC_H
#define LH_PLUGIN_CONFIG_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the largest document, in bytes */
#define PLUGIN_CONFIG_MAX ((size_t)32 * 1024)
/* json-c's nesting bound for a document */
#define PLUGIN_CONFIG_MAX_DEPTH 64

/* What a plugin sees (struct lh_config): both documents, each NULL when
 * absent. */
struct plugin_config {
	char *cluster; /* valid JSON object text, or NULL (no P/N/config) */
	size_t cluster_len;
	int64_t cluster_rev;  /* its mod_revision, 0 when absent */
	bool cluster_invalid; /* etcd holds a bad document; cluster is the last good one */
	char *local;	      /* the node-local document, or NULL */
	size_t local_len;
};

/* plugin_config_doc_check - is buf[0..len) a document (see the notes)?
 * Returns 0, or -EMSGSIZE (too large) / -EBADMSG (not a JSON object) with
 * one sentence in err. buf is only read; it need not be NUL-terminated. */
int plugin_config_doc_check(const void *buf, size_t len, char *err, size_t err_len);

/* plugin_config_doc_read_file - read and check the document in file `path`
 * (a node-local document). Returns 0 with *ret_doc (malloc'd, NUL after
 * *ret_len bytes; the caller frees it), or -errno with one sentence naming
 * the file in err (*ret_doc untouched). */
int plugin_config_doc_read_file(const char *path, char **ret_doc, size_t *ret_len, char *err,
				size_t err_len);

/* plugin_config_parse_flag - the value of `--plugin-config NAME=FILE`:
 * NAME a plugin name ([a-z0-9_-]{1,63}), FILE a non-empty path. The one
 * place the argument is parsed (the daemon's configuration file maps its
 * per-plugin key onto the same thing). Returns 0 with NAME in
 * ret_name[LH_PLUGIN_NAME_MAX + 1] and *ret_file pointing into arg (borrowed
 * as long as arg), or -EINVAL with a sentence in err (outputs untouched). */
int plugin_config_parse_flag(const char *arg, char *ret_name, const char **ret_file, char *err,
			     size_t err_len);

/* plugin_config_copy - *dst becomes a deep copy of src (dst's old contents
 * are freed only on success). Returns 0 or -ENOMEM. */
int plugin_config_copy(struct plugin_config *dst, const struct plugin_config *src);
/* plugin_config_equal - the same documents (bytes and revision) */
bool plugin_config_equal(const struct plugin_config *a, const struct plugin_config *b);
/* plugin_config_clear - free what c holds and zero it. Accepts NULL. */
void plugin_config_clear(struct plugin_config *c);

#endif
