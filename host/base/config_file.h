/* SPDX-License-Identifier: MIT */
/*
 * config_file.h - the daemon's configuration file (YAML, read with libyaml's
 * document API) turned into the command-line flags it stands for.
 *
 * Design notes
 * - The file has no keys of its own: a top-level key is a long flag name of
 *   the daemon (the caller's table says which flags are keys and what YAML
 *   shapes each takes), and `plugins: {NAME: {KEY: VALUE}}` holds per-plugin
 *   keys, each of which is one row that says the flag it becomes. So the
 *   decoder checks only the shape (syntax, unknown key, wrong type, duplicate
 *   key); the value is checked by the same code that checks the flag, and a
 *   flag added to the table is a key at once.
 * - Every setting keeps the line it came from, so any error, even one found
 *   by the flag's own check, is reported as FILE:LINE.
 * - The file is hostile input (tests/fuzz/fuzz_config.c): bounded size,
 *   bounded number of settings, aliases refused (no expansion bombs).
 */
#ifndef LH_CONFIG_FILE_H
#define LH_CONFIG_FILE_H

#include <stddef.h>

/* the YAML shapes a key takes, and the flag arguments they become */
enum config_key_kind {
	CONFIG_KEY_NONE,     /* a flag that is no key (--config, --help) */
	CONFIG_KEY_SCALAR,   /* key: V            -> --flag V */
	CONFIG_KEY_JOINED,   /* key: V | [A, B]   -> --flag V | --flag A,B */
	CONFIG_KEY_REPEATED, /* key: V | [A, B]   -> --flag V | --flag A --flag B */
	CONFIG_KEY_RULES,    /* REPEATED, or {K: V, ...} -> --flag K=V ... */
};

/* config_key - one top-level key: `name` is the long flag's name */
struct config_key {
	const char *name;
	enum config_key_kind kind;
};

/* config_plugin_key - one key of a `plugins: NAME:` section. It becomes
 * --flag NAME<sep>ARG, with ARG built from the value as `kind` says (for
 * CONFIG_KEY_RULES, NAME<sep>K=V per entry of a mapping). */
struct config_plugin_key {
	const char *key;
	const char *flag;
	char sep;
	enum config_key_kind kind;
};

struct config_schema {
	const struct config_key *keys; /* n_keys rows */
	size_t n_keys;
	const struct config_plugin_key *plugin_keys;
	size_t n_plugin_keys;
};

/* one flag argument read from the file */
struct config_setting {
	const char *flag; /* the long flag's name (borrowed from the schema) */
	char *key;        /* where it is, for errors: "ttl", "plugins: NAME: KEY" (owned) */
	char *value;      /* its argument (owned by the config_file) */
	unsigned line;    /* 1-based line of the value in the file */
};

struct config_file {
	char *path; /* as given */
	struct config_setting *settings; /* in file order */
	size_t n_settings;
};

#define CONFIG_FILE_MAX_BYTES (1024 * 1024)
#define CONFIG_FILE_MAX_SETTINGS 4096
#define CONFIG_ERR_MAX 512

/* config_file_decode - decode the YAML text buf[0..len) against schema.
 * path names the file in errors. Returns 0 and *ret (caller frees with
 * config_file_free), or -EINVAL (bad file) / -ENOMEM with one line
 * "PATH:LINE: what is wrong" in err; *ret untouched on failure. An empty
 * document (or a file of comments) has no settings. */
int config_file_decode(const char *path, const char *buf, size_t len,
		       const struct config_schema *schema, struct config_file **ret, char *err,
		       size_t err_len);

/* config_file_load - read the file at path (at most CONFIG_FILE_MAX_BYTES)
 * and decode it. Returns 0, -errno from opening or reading (err says it), or
 * what config_file_decode returns. */
int config_file_load(const char *path, const struct config_schema *schema,
		     struct config_file **ret, char *err, size_t err_len);

/* config_file_free - NULL is fine */
void config_file_free(struct config_file *cf);

#endif
