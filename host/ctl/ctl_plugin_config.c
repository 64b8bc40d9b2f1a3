/* SPDX-License-Identifier: MIT */
/*
 * ctl_plugin_config.c - leaseholdctl config get|set|edit NAME: the plugin's
 * cluster-wide configuration (P/NAME/config) through the local daemon.
 *
 * Design notes
 * - The daemon reads and writes etcd; this side reads files, runs the
 *   editor and prints. Every document is checked here too (a JSON object
 *   within PLUGIN_CONFIG_MAX) so a mistake is reported before the daemon is
 *   asked; the daemon checks again (it trusts no client).
 * - Lost races: `set` and `edit` send the revision their copy came from;
 *   the daemon writes only over that revision. `set` without --revision
 *   uses the revision read just before the write (it protects the write,
 *   not the operator's earlier reading: pass the revision `get` printed for
 *   that); `edit` uses the revision it read before starting the editor.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control/control_codec.h"
#include "ctl/ctl_client.h"
#include "ctl/ctl_observer.h"
#include "ctl/ctl_plugin_config.h"
#include "abi/abi_loader.h"
#include "abi/abi_config_doc.h"

extern char **environ;

#define CONFIG_TIMEOUT_MS 30000 /* etcd write + the plugin's validation */

struct config_opts {
	const char *control;
	const char *config; /* --config FILE: the daemon's configuration file */
	const char *sub; /* get | set | edit */
	const char *name;
	const char *file;
	const char *revision;
	bool json, help, force, version;
	struct ctl_etcd_opts etcd; /* observer mode when etcd.endpoints is set */
};

/* where a request goes: the daemon at url, or etcd (observer mode) */
struct where {
	const char *url;
	const struct ctl_etcd_opts *etcd; /* NULL: the daemon */
	bool force; /* --force: write even for a plugin that has never run */
};

static const char *ctl_plugin_config_help_of(const char *sub)
{
#define USAGE "Usage: leaseholdctl [--control URL | --etcd URL ...] "
	if (!sub) /* config --help: the group */
		return USAGE "config get|set|edit NAME [ARGS]\n\n"
		       "A plugin's cluster-wide configuration (etcd P/NAME/config), one JSON\n"
		       "object the same on every node.\n"
		       "  config get NAME [-o json]                  print it\n"
		       "  config set NAME FILE|- [--revision R] [--force]  replace it\n"
		       "  config edit NAME [--force]                 edit it in $EDITOR\n\n"
		       "See leaseholdctl help config get|set|edit for details.\n";
	if (strcmp(sub, "get") == 0)
		return USAGE "config get NAME [-o json]\n\n" CTL_CONFIG_GET_HELP;
	if (strcmp(sub, "set") == 0)
		return USAGE "config set NAME FILE|- [--revision R] [--force]\n\n" CTL_CONFIG_SET_HELP;
	return USAGE "config edit NAME [--force]\n\n" CTL_CONFIG_EDIT_HELP;
#undef USAGE
}

/* ctl_plugin_config_etcd_opt - where the value of observer-mode option a goes, or NULL */
static const char **ctl_plugin_config_etcd_opt(struct config_opts *o, const char *a)
{
	if (strcmp(a, "--etcd") == 0)
		return &o->etcd.endpoints;
	if (strcmp(a, "--etcd-cacert") == 0)
		return &o->etcd.cacert;
	if (strcmp(a, "--etcd-cert") == 0)
		return &o->etcd.cert;
	if (strcmp(a, "--etcd-key") == 0)
		return &o->etcd.key;
	if (strcmp(a, "--etcd-user") == 0)
		return &o->etcd.user;
	if (strcmp(a, "--prefix") == 0)
		return &o->etcd.prefix;
	return NULL;
}

static int ctl_plugin_config_check(struct config_opts *o, const char *const *pos, size_t n);

/* parse - argv as a config command: 1 it is one (o filled), 0 it is not,
 * -1 a usage error (printed) */
static int ctl_plugin_config_parse(int argc, char **argv, struct config_opts *o)
{
	const char *pos[4];
	size_t n = 0;
	bool only_pos = false, is_config = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_pos && a[0] == '-' && a[1]) {
			if (strcmp(a, "--") == 0)
				only_pos = true;
			else if (ctl_plugin_config_etcd_opt(o, a)) {
				if (i + 1 >= argc) {
					if (!is_config)
						return 0; /* ctl_main.c reports it */
					ctl_fail(EXIT_ERR, "option %s needs a value", a);
					return -1;
				}
				*ctl_plugin_config_etcd_opt(o, a) = argv[++i];
			} else if (strcmp(a, "--control") == 0 || strcmp(a, "--revision") == 0 ||
				 strcmp(a, "--config") == 0) {
				if (i + 1 >= argc) {
					if (!is_config)
						return 0; /* ctl_main.c reports it */
					ctl_fail(EXIT_ERR, "option %s needs a value", a);
					return -1;
				}
				if (strcmp(a, "--control") == 0)
					o->control = argv[++i];
				else if (strcmp(a, "--config") == 0)
					o->config = argv[++i];
				else
					o->revision = argv[++i];
			} else if (strncmp(a, "--control=", 10) == 0)
				o->control = a + 10;
			else if (strncmp(a, "--config=", 9) == 0)
				o->config = a + 9;
			else if (strcmp(a, "-o") == 0 && i + 1 < argc && strcmp(argv[i + 1], "json") == 0) {
				o->json = true;
				i++;
			} else if (strcmp(a, "--output=json") == 0 || strcmp(a, "-ojson") == 0)
				o->json = true;
			else if (strncmp(a, "--revision=", 11) == 0)
				o->revision = a + 11;
			else if (strcmp(a, "--json") == 0)
				o->json = true;
			else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
				o->help = true;
			else if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
				o->version = true;
			else if (strcmp(a, "--force") == 0)
				o->force = true;
			else if (is_config) {
				ctl_fail(EXIT_ERR,
					 "unknown option '%s' (see leaseholdctl help config %s)", a,
					 n > 1 ? pos[1] : "get");
				return -1;
			}
			continue;
		}
		if (n == 0 && strcmp(a, "config") != 0)
			return 0; /* another command: ctl_main.c's */
		is_config = true;
		if (n >= 4) {
			ctl_fail(EXIT_ERR, "unexpected argument '%s'", a);
			return -1;
		}
		pos[n++] = a;
	}
	if (!is_config)
		return 0;
	return ctl_plugin_config_check(o, pos, n);
}

/* ctl_plugin_config_check - the words pos[0..n) of a config command ("config
 * SUB NAME [FILE]") and its flags into o: 1, or -1 (printed) */
static int ctl_plugin_config_check(struct config_opts *o, const char *const *pos, size_t n)
{
	if ((o->help || o->version) && n < 2)
		return 1; /* config --help: the group's help (o->sub NULL) */
	if (n < 2 || (strcmp(pos[1], "get") && strcmp(pos[1], "set") && strcmp(pos[1], "edit"))) {
		ctl_fail(EXIT_ERR, "config: want a subcommand: get, set or edit\n"
				   "Usage: leaseholdctl config get NAME [-o json] | set NAME FILE|- "
				   "[--revision R] [--force] | edit NAME [--force]");
		return -1;
	}
	o->sub = pos[1];
	if (o->help || o->version)
		return 1;
	size_t want = strcmp(o->sub, "set") == 0 ? 4 : 3;
	if (n != want) {
		ctl_fail(EXIT_ERR, "config %s: %s\n%s", o->sub,
			 n < want ? "missing argument" : "unexpected argument",
			 ctl_plugin_config_help_of(o->sub));
		return -1;
	}
	o->name = pos[2];
	o->file = n > 3 ? pos[3] : NULL;
	if (!loader_name_valid(o->name)) {
		ctl_fail(EXIT_ERR,
			 "invalid plugin name '%.64s' (allowed: [a-z0-9_-], 1 to %d characters)",
			 o->name, LH_PLUGIN_NAME_MAX);
		return -1;
	}
	if ((o->json && strcmp(o->sub, "get") != 0) ||
	    (o->revision && strcmp(o->sub, "set") != 0) || (o->force && strcmp(o->sub, "get") == 0)) {
		ctl_fail(EXIT_ERR, "config %s does not take %s", o->sub,
			 o->json       ? "--json"
			 : o->revision ? "--revision"
				       : "--force");
		return -1;
	}
	return 1;
}

/* ask - one config request; 0 with *ret_resp (an OK reply) or an exit code
 * (printed; *ret_resp set when the daemon answered, for the conflict) */
static int ctl_plugin_config_ask(const struct where *w, Leasehold__Control__Kind kind, const char *name,
	       const char *doc, size_t len, int64_t rev, Response **ret_resp)
{
	Leasehold__Control__Request req = LEASEHOLD__CONTROL__REQUEST__INIT;
	uint8_t *buf;
	bool timed_out;
	req.protocol = CONTROL_PROTOCOL;
	req.kind = kind;
	req.name = (char *)(uintptr_t)name;
	req.config_document.data = (uint8_t *)(uintptr_t)doc;
	req.config_document.len = doc ? len : 0;
	req.config_revision = rev;
	req.force = kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET && w->force;
	size_t blen = leasehold__control__request__get_packed_size(&req);
	if (!(buf = malloc(blen ? blen : 1)))
		return ctl_fail(EXIT_ERR, "out of memory");
	leasehold__control__request__pack(&req, buf);
	*ret_resp = NULL;
	int r;
	if (w->etcd) {
		struct ctl_observer *ob;
		timed_out = false;
		r = ctl_observer_open(w->etcd, &ob);
		if (r == EXIT_OK) {
			r = ctl_observer_call(ob, &req, CONFIG_TIMEOUT_MS, ret_resp);
			timed_out = r == EXIT_TIMEOUT;
			ctl_observer_close(ob);
		}
	} else {
		r = ctl_call(w->url, buf, blen, CONFIG_TIMEOUT_MS, ret_resp, &timed_out);
	}
	free(buf);
	if (r != EXIT_OK) {
		if (timed_out && kind == LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET)
			fprintf(stderr,
				"leaseholdctl: the write may or may not have happened; check "
				"with 'leaseholdctl config get %s'\n",
				name);
		return r;
	}
	Response *resp = *ret_resp;
	if (resp->code == LEASEHOLD__CONTROL__CODE__CODE_CONFLICT)
		return ctl_fail(CTL_EXIT_CONFLICT, "%s", resp->message);
	if (resp->code == LEASEHOLD__CONTROL__CODE__CODE_BAD_REQUEST)
		return ctl_fail(EXIT_ERR, "%s", resp->message);
	return ctl_check_code(resp, false);
}

/* ctl_plugin_config_read_doc - FILE or stdin ("-"), checked; *ret (malloc'd, NUL after) */
static int ctl_plugin_config_read_doc(const char *file, char **ret, size_t *ret_len)
{
	char why[400];
	if (strcmp(file, "-") != 0) {
		if (plugin_config_doc_read_file(file, ret, ret_len, why, sizeof(why)) < 0)
			return ctl_fail(EXIT_ERR, "%s; nothing written", why);
		return EXIT_OK;
	}
	char *b = malloc(PLUGIN_CONFIG_MAX + 2);
	size_t n = 0;
	if (!b)
		return ctl_fail(EXIT_ERR, "out of memory");
	n = fread(b, 1, PLUGIN_CONFIG_MAX + 1, stdin);
	if (ferror(stdin)) {
		free(b);
		return ctl_fail(EXIT_ERR, "cannot read stdin");
	}
	if (plugin_config_doc_check(b, n, why, sizeof(why)) < 0) {
		free(b);
		return ctl_fail(EXIT_ERR, "stdin: %s; nothing written", why);
	}
	b[n] = 0;
	*ret = b;
	*ret_len = n;
	return EXIT_OK;
}

static int ctl_plugin_config_cmd_get(const struct where *w, const struct config_opts *o)
{
	Response *r = NULL;
	int ret = ctl_plugin_config_ask(w, LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET, o->name, NULL, 0, 0, &r);
	if (ret != EXIT_OK)
		goto out;
	const ProtobufCBinaryData *d = &r->config_document;
	bool present = r->config_revision != 0;
	bool bad = r->config_error && r->config_error[0];
	if (o->json) {
		json_object *j = json_object_new_object();
		json_object *cfg = NULL;
		if (present && !bad && d->len) {
			struct json_tokener *tok = json_tokener_new_ex(PLUGIN_CONFIG_MAX_DEPTH);
			if (tok)
				cfg =
				    json_tokener_parse_ex(tok, (const char *)d->data, (int)d->len);
			json_tokener_free(tok);
		}
		json_object_object_add(j, "name", json_object_new_string(o->name));
		json_object_object_add(j, "revision", json_object_new_int64(r->config_revision));
		json_object_object_add(j, "config", cfg);
		json_object_object_add(j, "error",
				       bad ? json_object_new_string(r->config_error) : NULL);
		json_object_object_add(
		    j, "text",
		    bad ? json_object_new_string_len((const char *)d->data, (int)d->len) : NULL);
		printf("%s\n", json_object_to_json_string_ext(
				   j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					  JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(j);
	} else if (present) {
		fwrite(d->data, 1, d->len, stdout);
		if (d->len == 0 || d->data[d->len - 1] != '\n')
			putchar('\n');
		fprintf(stderr, "plugin %s: configuration revision %" PRId64 "\n", o->name,
			r->config_revision);
	} else
		fprintf(stderr, "plugin %s: no configuration (revision 0)\n", o->name);
	if (bad) {
		fprintf(stderr,
			"leaseholdctl: plugin %s: the stored configuration is not valid: %s\n",
			o->name, r->config_error);
		ret = EXIT_NOTOK;
	}
out:
	if (r)
		leasehold__control__response__free_unpacked(r, NULL);
	return ret;
}

/* ctl_plugin_config_current_rev - the stored document's revision, read now */
static int ctl_plugin_config_current_rev(const struct where *w, const char *name, int64_t *ret)
{
	Response *r = NULL;
	int rc = ctl_plugin_config_ask(w, LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET, name, NULL, 0, 0, &r);
	if (rc == EXIT_OK)
		*ret = r->config_revision;
	if (r)
		leasehold__control__response__free_unpacked(r, NULL);
	return rc;
}

/* put - write doc over revision rev; prints the outcome */
static int ctl_plugin_config_put(const struct where *w, const char *name, const char *doc, size_t len, int64_t rev)
{
	Response *r = NULL;
	int ret = ctl_plugin_config_ask(w, LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET, name, doc, len, rev, &r);
	if (ret == EXIT_OK)
		printf("plugin %s: configuration written at revision %" PRId64 "\n", name,
		       r->config_revision);
	if (ret == EXIT_OK && w->etcd)
		fprintf(stderr,
			"leaseholdctl: note: observer mode: written without the plugin's own "
			"validation (validate_config needs a daemon that runs the plugin); a node "
			"whose plugin refuses it shows that as the plugin's last error\n");
	if (r)
		leasehold__control__response__free_unpacked(r, NULL);
	return ret;
}

static int ctl_plugin_config_cmd_set(const struct where *w, const struct config_opts *o)
{
	char *doc = NULL, *end = NULL;
	size_t len = 0;
	int64_t rev = 0;
	int ret;
	if (o->revision) {
		errno = 0;
		long long v = strtoll(o->revision, &end, 10);
		if (errno || !end || *end || end == o->revision || v < 0)
			return ctl_fail(EXIT_ERR,
					"invalid --revision '%.32s' (an etcd revision, >= 0)",
					o->revision);
		rev = (int64_t)v;
	}
	if ((ret = ctl_plugin_config_read_doc(o->file, &doc, &len)) != EXIT_OK)
		return ret;
	if (!o->revision && (ret = ctl_plugin_config_current_rev(w, o->name, &rev)) != EXIT_OK) {
		free(doc);
		return ret;
	}
	ret = ctl_plugin_config_put(w, o->name, doc, len, rev);
	free(doc);
	return ret;
}

/* ctl_plugin_config_run_editor - $VISUAL / $EDITOR / vi on path, through sh so that an editor
 * with arguments works; 0 when it exited 0 */
static int ctl_plugin_config_run_editor(const char *path)
{
	const char *ed = getenv("VISUAL");
	if (!ed || !*ed)
		ed = getenv("EDITOR");
	if (!ed || !*ed)
		ed = "vi";
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "%s \"$1\"", ed);
	char sh[] = "sh", dash_c[] = "-c", name0[] = "sh";
	char *const args[] = {sh, dash_c, cmd, name0, (char *)(uintptr_t)path, NULL};
	pid_t pid;
	int st;
	int r = posix_spawnp(&pid, "sh", NULL, NULL, args, environ);
	if (r != 0)
		return ctl_fail(EXIT_ERR, "cannot start the editor (%s): %s", ed, strerror(r));
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return ctl_fail(EXIT_ERR, "waiting for the editor: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return ctl_fail(EXIT_ERR,
				"the editor (%s) failed; nothing written (the edit is in %s)", ed,
				path);
	return EXIT_OK;
}

/* again - ask on the terminal whether to edit again (default yes) */
static bool ctl_plugin_config_again(void)
{
	char line[64];
	fprintf(stderr, "Edit again? [Y/n] ");
	fflush(stderr);
	if (!fgets(line, sizeof(line), stdin))
		return false;
	return line[0] != 'n' && line[0] != 'N';
}

static int ctl_plugin_config_write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int ctl_plugin_config_cmd_edit(const struct where *w, const struct config_opts *o)
{
	Response *r = NULL;
	char path[4096], why[400];
	char *doc = NULL;
	size_t len = 0;
	int ret;
	if (!isatty(STDIN_FILENO))
		return ctl_fail(EXIT_ERR, "config edit needs a terminal (stdin is not one); use "
					  "'config get' and 'config set' instead");
	if ((ret = ctl_plugin_config_ask(w, LEASEHOLD__CONTROL__KIND__KIND_CONFIG_GET, o->name, NULL, 0, 0, &r)) !=
	    EXIT_OK) {
		if (r)
			leasehold__control__response__free_unpacked(r, NULL);
		return ret;
	}
	int64_t rev = r->config_revision;
	const char *start = rev ? (const char *)r->config_document.data : "{\n}\n";
	size_t start_len = rev ? r->config_document.len : strlen(start);
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/leaseholdctl-%s-XXXXXX.json", tmp && *tmp ? tmp : "/tmp",
		 o->name);
	int fd = mkstemps(path, 5);
	if (fd < 0 || ctl_plugin_config_write_all(fd, start ? start : "", start_len) < 0 || close(fd) < 0) {
		ret = ctl_fail(EXIT_ERR, "cannot write a temporary file (%s): %s", path,
			       strerror(errno));
		leasehold__control__response__free_unpacked(r, NULL);
		return ret;
	}
	for (;;) {
		if ((ret = ctl_plugin_config_run_editor(path)) != EXIT_OK)
			break;
		free(doc);
		doc = NULL;
		int rr = plugin_config_doc_read_file(path, &doc, &len, why, sizeof(why));
		if (rr == 0 && len == start_len && memcmp(doc, start, len) == 0) {
			fprintf(stderr, "plugin %s: no change; nothing written\n", o->name);
			unlink(path);
			ret = EXIT_OK;
			break;
		}
		if (rr < 0) {
			fprintf(stderr, "leaseholdctl: %s\n", why);
			if (ctl_plugin_config_again())
				continue;
			ret = ctl_fail(EXIT_ERR, "aborted; nothing written (the edit is in %s)",
				       path);
			break;
		}
		ret = ctl_plugin_config_put(w, o->name, doc, len, rev);
		if (ret == EXIT_OK)
			unlink(path);
		else if (ret == EXIT_ERR && ctl_plugin_config_again())
			continue; /* refused by the plugin's validation: fix it */
		else
			fprintf(stderr, "leaseholdctl: the edit is kept in %s\n", path);
		break;
	}
	free(doc);
	leasehold__control__response__free_unpacked(r, NULL);
	return ret;
}

int ctl_config_main(int argc, char **argv)
{
	struct config_opts o = {0};
	char url[4200];
	int r = ctl_plugin_config_parse(argc, argv, &o);
	if (r <= 0)
		return r < 0 ? EXIT_ERR : -1;
	if (o.help) {
		printf("%s", ctl_plugin_config_help_of(o.sub));
		return EXIT_OK;
	}
	if (o.version) {
		printf("leaseholdctl %s\n", PACKAGE_VERSION);
		return EXIT_OK;
	}
	struct where w = {.url = url, .etcd = o.etcd.endpoints ? &o.etcd : NULL, .force = o.force};
	if (w.etcd && (o.control || o.config))
		return ctl_fail(EXIT_ERR, "--etcd excludes --control and --config");
	if (!w.etcd && (o.etcd.cacert || o.etcd.cert || o.etcd.key || o.etcd.user || o.etcd.prefix))
		return ctl_fail(EXIT_ERR, "--etcd-cacert, --etcd-cert, --etcd-key, --etcd-user and "
					  "--prefix need --etcd (observer mode)");
	if (!w.etcd && (r = ctl_control_url(o.control, o.config, url, sizeof(url))) != EXIT_OK)
		return r;
	if (strcmp(o.sub, "get") == 0)
		r = ctl_plugin_config_cmd_get(&w, &o);
	else if (strcmp(o.sub, "set") == 0)
		r = ctl_plugin_config_cmd_set(&w, &o);
	else
		r = ctl_plugin_config_cmd_edit(&w, &o);
	if (fflush(stdout) != 0 && r == EXIT_OK)
		r = EXIT_ERR;
	return r;
}
