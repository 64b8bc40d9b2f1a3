/* SPDX-License-Identifier: MIT */
/*
 * ctl_plugin_config.h - leaseholdctl's `config get|set|edit` (plugin
 * configuration, ABI 1.2).
 */
#ifndef LH_CTL_PLUGIN_CONFIG_H
#define LH_CTL_PLUGIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/control.pb-c.h"

/* the exit code of a lost race: another write came first */
#define CTL_EXIT_CONFLICT 8

#define CTL_CONFIG_GET_HELP                                                          \
	"Print plugin NAME's cluster-wide configuration, the JSON document in etcd\n" \
	"at P/NAME/config, on stdout, and its etcd revision on stderr (as\n"          \
	"'plugin NAME: configuration revision R'). No document: nothing on stdout,\n" \
	"revision 0. A stored document that is not a valid JSON object (written\n"  \
	"behind leaseholdctl's back) is printed as stored, with the error; exit 1.\n" \
	"Works for any plugin name, running on this node or not.\n"                \
	"--json prints {\"name\", \"revision\", \"config\" (the object or null),\n"     \
	"\"error\" (null or why it is not valid), \"text\" (null, or the stored bytes\n" \
	"when not valid)}.\n"
#define CTL_CONFIG_SET_HELP                                                           \
	"Replace plugin NAME's cluster-wide configuration with the JSON object in\n"   \
	"FILE ('-': stdin; at most 32 KiB). Checked first: a JSON object, then the\n"  \
	"plugin's own validate_config when the plugin runs on this node. Written\n"    \
	"only if the stored document is still the one of revision R (--revision R,\n" \
	"as 'config get' printed it; 0 = there must be none); without --revision,\n"   \
	"the revision read just before the write. So two operators cannot overwrite\n" \
	"each other blindly: the second gets exit 8 and nothing is written.\n"        \
	"Refused unless the plugin has run somewhere: etcd holds a member record,\n"  \
	"a node state record or a term of it (so a typo in NAME writes nothing);\n"  \
	"--force writes anyway (a plugin not deployed yet).\n"                      \
	"Exit 0 written, 1 the write failed, 2 refused (not a JSON object, the\n"      \
	"plugin's validation, a plugin that has never run), 8 the configuration\n"   \
	"changed since revision R.\n"
#define CTL_CONFIG_EDIT_HELP                                                          \
	"Edit plugin NAME's cluster-wide configuration in $VISUAL, else $EDITOR,\n"    \
	"else vi (a copy in a private temporary file). Needs a terminal on stdin.\n"   \
	"No change: nothing is written. Not a valid JSON object, or refused by the\n"  \
	"plugin's validation: edit again or abort (the edit is kept in the file).\n"   \
	"Written only if nobody changed the configuration since it was read (else\n"   \
	"exit 8, the edit kept in the file). A plugin that has never run is\n"       \
	"refused as by config set (--force writes anyway). Exit codes as for\n"      \
	"config set.\n"

/* ctl_config_main - `leaseholdctl [OPTIONS] config get|set|edit ...`: runs
 * the command and returns its exit code, or -1 when argv is not a config
 * command (ctl_main.c then goes on). */
int ctl_config_main(int argc, char **argv);

#endif
