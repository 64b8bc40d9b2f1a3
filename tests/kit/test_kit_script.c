/* SPDX-License-Identifier: MIT */
/*
 * test_kit_script.c - leasehold-plugin-test's script parser: every
 * statement with its arguments, values exactly as written, and each kind of
 * bad script refused with its line number and reason; garbage (random bytes
 * and mutated scripts) answered without a crash or a leak.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kit_script.h"
#include "rng.h"

static struct kit_script *parse_ok(const char *text, int n_hosts)
{
	struct kit_script *s = NULL;
	char err[512] = "";
	int r = kit_script_parse(text, strlen(text), n_hosts, &s, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "  refused: %s\n", err);
	CHECK_OK(r);
	CHECK(s);
	return s;
}

static void expect_refused(const char *text, int n_hosts, const char *msg)
{
	struct kit_script *s = (struct kit_script *)(uintptr_t)0x1;
	char err[512] = "";
	int r = kit_script_parse(text, strlen(text), n_hosts, &s, err, sizeof(err));
	if (r != -EINVAL || strcmp(err, msg) != 0)
		fprintf(stderr, "  script %s\n  got %d \"%s\"\n  want \"%s\"\n", text, r, err, msg);
	CHECK_INT_EQ(r, -EINVAL);
	CHECK_STR_EQ(err, msg);
	CHECK(s == (struct kit_script *)(uintptr_t)0x1); /* untouched */
}

static void test_every_statement(void)
{
	struct kit_script *s = parse_ok(
	    "# a comment\n"
	    "\n"
	    "   put desired/a   two  words \n"
	    "put /abs/key \"\"\r\n"
	    "delete desired/a\n"
	    "wait-key out/a value=x;label=blue\n"
	    "wait-absent out/b\n"
	    "expect-key out/a {\"value\":\"x\"}\n"
	    "expect-absent out/c\n"
	    "\twait-leader\n"
	    "failover\n"
	    "kill-leader\n"
	    "stop-host 2\n"
	    "start-host 1\n"
	    "start-stopped\n"
	    "reload other-1.1.0.so\n"
	    "reload-host 2 /tmp/x.so\n"
	    "wait-release 1.10.0\n"
	    "config {\"label\": \"blue\"}\n"
	    "timeout 1500ms",
	    2);
	CHECK_INT_EQ(s->n_steps, 18);
	const struct kit_step *st = s->steps;
	CHECK_INT_EQ(st[0].op, KIT_OP_PUT);
	CHECK_INT_EQ(st[0].line, 3);
	CHECK_STR_EQ(st[0].key, "desired/a");
	CHECK_STR_EQ(st[0].value, "two  words "); /* exactly as written */
	CHECK_INT_EQ(st[0].value_len, 11);
	CHECK_STR_EQ(st[1].key, "/abs/key");
	CHECK_INT_EQ(st[1].value_len, 0); /* "" is the empty value; \r dropped */
	CHECK_INT_EQ(st[2].op, KIT_OP_DELETE);
	CHECK_STR_EQ(st[3].value, "value=x;label=blue");
	CHECK_INT_EQ(st[4].op, KIT_OP_WAIT_ABSENT);
	CHECK_STR_EQ(st[5].value, "{\"value\":\"x\"}");
	CHECK_INT_EQ(st[6].op, KIT_OP_EXPECT_ABSENT);
	CHECK_INT_EQ(st[7].op, KIT_OP_WAIT_LEADER);
	CHECK_INT_EQ(st[8].op, KIT_OP_FAILOVER);
	CHECK_INT_EQ(st[9].op, KIT_OP_KILL_LEADER);
	CHECK_INT_EQ(st[10].op, KIT_OP_STOP_HOST);
	CHECK_INT_EQ(st[10].host, 2);
	CHECK_INT_EQ(st[11].host, 1);
	CHECK_INT_EQ(st[12].op, KIT_OP_START_STOPPED);
	CHECK_STR_EQ(st[13].value, "other-1.1.0.so");
	CHECK_INT_EQ(st[14].host, 2);
	CHECK_STR_EQ(st[14].value, "/tmp/x.so");
	CHECK_INT_EQ(st[15].release.minor, 10);
	CHECK_STR_EQ(st[16].value, "{\"label\": \"blue\"}");
	CHECK_INT_EQ(st[17].duration_ns, 1500000000ull);
	CHECK_INT_EQ(st[17].line, 20);
	CHECK_STR_EQ(kit_op_word(st[3].op), "wait-key");
	CHECK_STR_EQ(kit_op_word(KIT_OP_COUNT), "?");
	kit_script_free(s);
	kit_script_free(NULL);
	s = parse_ok("", 1);
	CHECK_INT_EQ(s->n_steps, 0);
	kit_script_free(s);
}

static void test_bad_scripts(void)
{
	static const struct {
		const char *script;
		int hosts;
		const char *error;
	} refused[] = {
	    {"wait-leader\nfrobnicate x\n", 1, "line 2: unknown statement \"frobnicate\""},
	    {"put\n", 1, "line 1: put needs a KEY"},
	    {"put k\n", 1, "line 1: put needs a VALUE (\"\" for the empty value)"},
	    {"wait-key k   \n", 1, "line 1: wait-key needs a VALUE (\"\" for the empty value)"},
	    {"delete a b\n", 1, "line 1: delete: unexpected \"b\" after its arguments"},
	    {"delete /\n", 1, "line 1: delete: the key \"/\" names nothing"},
	    {"wait-leader now\n", 1, "line 1: wait-leader: unexpected \"now\" after its arguments"},
	    {"stop-host 3\n", 2, "line 1: stop-host: host \"3\" is not a number from 1 to 2"},
	    {"stop-host 0\n", 2, "line 1: stop-host: host \"0\" is not a number from 1 to 2"},
	    {"start-host x1\n", 2, "line 1: start-host: host \"x1\" is not a number from 1 to 2"},
	    {"start-host 99999999999999999999\n", 2, "line 1: start-host: host \"9999999999999999\" is not a number from 1 to 2"},
	    {"stop-host\n", 2, "line 1: stop-host needs a host number (1 to 2)"},
	    {"reload\n", 1, "line 1: reload needs a plugin FILE"},
	    {"reload-host 1\n", 1, "line 1: reload-host needs a plugin FILE"},
	    {"wait-release 1.2\n", 1, "line 1: wait-release: \"1.2\" is not a release (MAJOR.MINOR.PATCH)"},
	    {"config [1,2]\n", 1, "line 1: config: not a JSON object: [1,2]"},
	    {"config {\"a\":1} x\n", 1, "line 1: config: not a JSON object: {\"a\":1} x"},
	    {"config\n", 1, "line 1: config needs a JSON object"},
	    {"timeout 0s\n", 1, "line 1: timeout: \"0s\" is not a positive duration (30s, 500ms, 2m)"},
	    {"timeout soon\n", 1, "line 1: timeout: \"soon\" is not a positive duration (30s, 500ms, 2m)"},
	    {"put k v\x01w\n", 1, "line 1: control byte 0x01"},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		expect_refused(refused[i].script, refused[i].hosts, refused[i].error);
	char nul[] = "wait-leader\nput k a\0b\n";
	struct kit_script *s = NULL;
	char err[256];
	CHECK_INT_EQ(kit_script_parse(nul, sizeof(nul) - 1, 1, &s, err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "line 2: control byte 0x00");
	/* limits: a key, a line, the whole script, the statements */
	size_t big = KIT_SCRIPT_MAX_KEY + 8;
	char *t = malloc(KIT_SCRIPT_MAX_BYTES + 64);
	CHECK(t);
	memcpy(t, "delete ", 7);
	memset(t + 7, 'k', KIT_SCRIPT_MAX_KEY + 1);
	t[7 + KIT_SCRIPT_MAX_KEY + 1] = 0;
	expect_refused(t, 1, "line 1: delete: key of 4097 bytes (at most 4096)");
	memset(t, 'x', KIT_SCRIPT_MAX_LINE + 1);
	t[KIT_SCRIPT_MAX_LINE + 1] = 0;
	expect_refused(t, 1, "line 1: line of 65537 bytes (at most 65536)");
	memset(t, '\n', KIT_SCRIPT_MAX_BYTES + 1);
	t[KIT_SCRIPT_MAX_BYTES + 1] = 0;
	expect_refused(t, 1, "the script has 1048577 bytes (at most 1048576)");
	size_t o = 0;
	for (unsigned i = 0; i <= KIT_SCRIPT_MAX_STEPS; i++)
		o += (size_t)snprintf(t + o, 32, "wait-leader\n");
	expect_refused(t, 1, "line 10001: more than 10000 statements");
	(void)big;
	free(t);
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
	return test_rng_next(&g_rng);
}

/* random bytes, and a good script with bytes flipped, cut or replaced:
 * parsed or refused, never a crash (ASan) or a leak */
static void test_garbage(void)
{
	static const char good[] = "put desired/a alpha\nwait-key out/a value=alpha\n"
				   "config {\"label\":\"b\"}\nstop-host 2\nwait-release 1.1.0\n"
				   "timeout 5s\nreload-host 1 x.so\n";
	char buf[512];
	for (int round = 0; round < 30000; round++) {
		size_t n;
		if (round % 2) {
			n = (size_t)(rnd() % sizeof(buf));
			for (size_t i = 0; i < n; i++)
				buf[i] = rnd() % 4 ? "pw -tk\n\"{}0123456789.s/"[rnd() % 24] : (char)rnd();
		} else {
			n = sizeof(good) - 1 - (size_t)(rnd() % 20);
			memcpy(buf, good, n);
			for (int k = 0; k < 4; k++)
				buf[rnd() % n] = (char)rnd();
		}
		char *exact = malloc(n ? n : 1);
		CHECK(exact);
		memcpy(exact, buf, n);
		struct kit_script *s = NULL;
		char err[256];
		int r = kit_script_parse(exact, n, 2, &s, err, sizeof(err));
		CHECK(r == 0 || r == -EINVAL);
		if (r == 0)
			kit_script_free(s);
		else
			CHECK(strncmp(err, "line ", 5) == 0);
		free(exact);
	}
}

int main(void)
{
	RUN(test_every_statement);
	RUN(test_bad_scripts);
	RUN(test_garbage);
	return 0;
}
