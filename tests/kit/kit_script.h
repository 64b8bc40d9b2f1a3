/* SPDX-License-Identifier: MIT */
/*
 * kit_script.h - the script language of leasehold-plugin-test(1): parsed
 * and checked whole before anything starts, so a bad script changes
 * nothing and names its line.
 *
 * A script is lines; blanks (space, tab) separate words; an empty line or
 * one whose first word starts with '#' is ignored. A VALUE (put, wait-key,
 * expect-key) is the rest of the line after the key and the blanks that
 * follow it, exactly as written (inner and trailing blanks kept); the word
 * "" alone is the empty value. A KEY is one word: relative to the plugin's
 * data prefix (P/NAME/data/), or a full etcd key when it starts with '/'.
 * The statements are the rows of KIT_OPS below; man/leasehold-plugin-test.1
 * documents them.
 *
 * Limits (refused with the line number): a script of at most 1 MiB and
 * 10000 statements, lines of at most 64 KiB, no NUL or other control byte
 * but tab (a '\r' before the newline is dropped), keys of at most 4096
 * bytes, host numbers 1..n_hosts, a config document that is a JSON object.
 * Thread-safety: none needed; pure apart from allocation.
 */
#ifndef LH_KIT_SCRIPT_H
#define LH_KIT_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "base/release.h"

/* argument shapes */
#define KIT_ARGS_NONE 0      /* op */
#define KIT_ARGS_KEY 1       /* op KEY */
#define KIT_ARGS_KEY_VALUE 2 /* op KEY VALUE */
#define KIT_ARGS_HOST 3      /* op N */
#define KIT_ARGS_FILE 4      /* op FILE */
#define KIT_ARGS_HOST_FILE 5 /* op N FILE */
#define KIT_ARGS_RELEASE 6   /* op MAJOR.MINOR.PATCH */
#define KIT_ARGS_JSON 7      /* op JSON-OBJECT (rest of the line) */
#define KIT_ARGS_DURATION 8  /* op DURATION (duration_parse) */

/* X(name, word, shape): every statement */
#define KIT_OPS(X) \
	X(PUT, "put", KIT_ARGS_KEY_VALUE) \
	X(DELETE, "delete", KIT_ARGS_KEY) \
	X(WAIT_KEY, "wait-key", KIT_ARGS_KEY_VALUE) \
	X(WAIT_ABSENT, "wait-absent", KIT_ARGS_KEY) \
	X(EXPECT_KEY, "expect-key", KIT_ARGS_KEY_VALUE) \
	X(EXPECT_ABSENT, "expect-absent", KIT_ARGS_KEY) \
	X(WAIT_LEADER, "wait-leader", KIT_ARGS_NONE) \
	X(FAILOVER, "failover", KIT_ARGS_NONE) \
	X(KILL_LEADER, "kill-leader", KIT_ARGS_NONE) \
	X(STOP_HOST, "stop-host", KIT_ARGS_HOST) \
	X(START_HOST, "start-host", KIT_ARGS_HOST) \
	X(START_STOPPED, "start-stopped", KIT_ARGS_NONE) \
	X(RELOAD, "reload", KIT_ARGS_FILE) \
	X(RELOAD_HOST, "reload-host", KIT_ARGS_HOST_FILE) \
	X(WAIT_RELEASE, "wait-release", KIT_ARGS_RELEASE) \
	X(CONFIG, "config", KIT_ARGS_JSON) \
	X(TIMEOUT, "timeout", KIT_ARGS_DURATION)

enum kit_op {
#define KIT_OP_ENUM(name, word, shape) KIT_OP_##name,
	KIT_OPS(KIT_OP_ENUM)
#undef KIT_OP_ENUM
	KIT_OP_COUNT
};

#define KIT_SCRIPT_MAX_BYTES (1024u * 1024u)
#define KIT_SCRIPT_MAX_STEPS 10000u
#define KIT_SCRIPT_MAX_LINE 65536u
#define KIT_SCRIPT_MAX_KEY 4096u

/* one statement; strings owned by the script */
struct kit_step {
	enum kit_op op;
	unsigned line;        /* 1-based line in the script */
	int host;             /* 1..n_hosts for *_HOST shapes, else 0 */
	char *key;            /* KEY shapes: as written (relative or absolute) */
	char *value;          /* VALUE, FILE or JSON (NUL-terminated) */
	size_t value_len;
	struct release release; /* wait-release */
	uint64_t duration_ns;   /* timeout */
};

struct kit_script {
	struct kit_step *steps;
	size_t n_steps;
};

/* kit_script_parse - text[len] (need not be NUL-terminated) for a run of
 * n_hosts hosts -> *ret (free with kit_script_free). Returns 0, or -EINVAL
 * with "line N: what is wrong" in err[err_len] (*ret untouched), or
 * -ENOMEM. */
int kit_script_parse(const char *text, size_t len, int n_hosts, struct kit_script **ret,
		     char *err, size_t err_len);
/* kit_script_free - accepts NULL */
void kit_script_free(struct kit_script *s);
/* kit_op_word - the statement's word ("wait-key"); "?" out of range */
const char *kit_op_word(enum kit_op op);

#endif
