/* SPDX-License-Identifier: MIT */
/*
 * election_known.c - whether etcd holds a trace of a plugin or a node (see
 * election_known.h).
 *
 * Design notes
 * - A plugin: one txn without compares whose three ranges count the keys
 *   below P/N/members/, P/N/nodes/ and P/N/term-history/ (count_only: no
 *   values travel), so the three are read at one revision in one round trip.
 * - A node: the keys (keys_only) below P/, matched against
 *   P/<name>/members/NODE and P/<name>/nodes/NODE. There is no index by
 *   node id; this read is for an operator's command, not a hot path.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_known.h"

struct known_call {
	election_known_fn done;
	void *ud;
	size_t base_len; /* strlen("P/") */
	char node[];     /* election_known_node: the node id */
};

/* election_known_base - "P/" from prefix (a trailing '/' ignored) into buf;
 * its length, or -EINVAL when it does not fit */
static int election_known_base(const char *prefix, char *buf, size_t len)
{
	size_t pl = strlen(prefix);
	while (pl > 0 && prefix[pl - 1] == '/')
		pl--;
	int n = snprintf(buf, len, "%.*s/", (int)pl, prefix);
	return n < 0 || (size_t)n >= len ? -EINVAL : n;
}

static void election_known_on_counts(struct etcd_client *c, int err,
                                     const struct etcd_response *resp, void *ud)
{
	struct known_call *kc = ud;
	bool known = false;
	(void)c;
	if (err == 0 && (!resp->succeeded || resp->n_responses != 3))
		err = -EPROTO;
	for (size_t i = 0; err == 0 && i < resp->n_responses; i++)
		known = known || resp->responses[i].count > 0;
	kc->done(kc->ud, err, err == 0 && known);
	free(kc);
}

int election_known_plugin(struct etcd_client *etcd, const char *prefix, const char *name,
                          uint32_t timeout_ms, election_known_fn done, void *ud,
                          struct etcd_call **ret_call)
{
	static const char *const subs[3] = {"members/", "nodes/", "term-history/"};
	char base[512], keys[3][768];
	uint8_t ends[3][768];
	struct etcd_op ops[3];
	int bl;

	if (!etcd || !prefix || !name || !name[0] || strchr(name, '/') || !done)
		return -EINVAL;
	if ((bl = election_known_base(prefix, base, sizeof(base))) < 0)
		return bl;
	for (size_t i = 0; i < 3; i++) {
		int kl = snprintf(keys[i], sizeof(keys[i]), "%s%s/%s", base, name, subs[i]);
		if (kl < 0 || (size_t)kl >= sizeof(keys[i]))
			return -EINVAL;
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].type = ETCD_OP_RANGE;
		ops[i].key = keys[i];
		ops[i].key_len = (size_t)kl;
		ops[i].range_end = ends[i];
		ops[i].range_end_len = etcd_prefix_end(keys[i], (size_t)kl, ends[i]);
		ops[i].count_only = true;
	}
	struct known_call *kc = calloc(1, sizeof(*kc) + 1);
	if (!kc)
		return -ENOMEM;
	kc->done = done;
	kc->ud = ud;
	struct etcd_call_opts o = {.timeout_ms = timeout_ms};
	int r = etcd_txn(etcd, NULL, 0, ops, 3, NULL, 0, &o, election_known_on_counts, kc, ret_call);
	if (r < 0)
		free(kc);
	return r;
}

/* election_known_node_key - whether key (below base "P/", base_len bytes)
 * is P/N/members/node or P/N/nodes/node for some N */
static bool election_known_node_key(const uint8_t *key, size_t key_len, size_t base_len,
                                    const char *node)
{
	if (key_len <= base_len)
		return false;
	const char *s = (const char *)key + base_len;
	size_t sl = key_len - base_len, nl = strlen(node);
	const char *slash = memchr(s, '/', sl);
	if (!slash || slash == s)
		return false;
	const char *rest = slash + 1;
	size_t rl = sl - (size_t)(rest - s);
	static const char *const subs[2] = {"members/", "nodes/"};
	for (size_t i = 0; i < 2; i++) {
		size_t l = strlen(subs[i]);
		if (rl == l + nl && memcmp(rest, subs[i], l) == 0 && memcmp(rest + l, node, nl) == 0)
			return true;
	}
	return false;
}

static void election_known_on_keys(struct etcd_client *c, int err,
                                   const struct etcd_response *resp, void *ud)
{
	struct known_call *kc = ud;
	bool known = false;
	(void)c;
	for (size_t i = 0; err == 0 && !known && i < resp->n_kvs; i++)
		known = election_known_node_key(resp->kvs[i].key, resp->kvs[i].key_len,
		                                kc->base_len, kc->node);
	kc->done(kc->ud, err, known);
	free(kc);
}

int election_known_node(struct etcd_client *etcd, const char *prefix, const char *node,
                        uint32_t timeout_ms, election_known_fn done, void *ud,
                        struct etcd_call **ret_call)
{
	char base[512];
	uint8_t end[512];
	int bl;

	if (!etcd || !prefix || !node || !node[0] || strchr(node, '/') || !done)
		return -EINVAL;
	if ((bl = election_known_base(prefix, base, sizeof(base))) < 0)
		return bl;
	size_t nl = strlen(node);
	struct known_call *kc = calloc(1, sizeof(*kc) + nl + 1);
	if (!kc)
		return -ENOMEM;
	kc->done = done;
	kc->ud = ud;
	kc->base_len = (size_t)bl;
	memcpy(kc->node, node, nl + 1);
	struct etcd_op op = {.type = ETCD_OP_RANGE,
	                     .key = base,
	                     .key_len = (size_t)bl,
	                     .range_end = end,
	                     .range_end_len = etcd_prefix_end(base, (size_t)bl, end),
	                     .keys_only = true};
	struct etcd_call_opts o = {.timeout_ms = timeout_ms};
	int r = etcd_range(etcd, &op, &o, election_known_on_keys, kc, ret_call);
	if (r < 0)
		free(kc);
	return r;
}
