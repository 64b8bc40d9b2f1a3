/* SPDX-License-Identifier: MIT */
/*
 * gen_seeds.c - writes the binary seed inputs (packed protobufs) of the
 * records, bus, control and grpc corpora. Not part of the build; run.sh compiles
 * it so it cannot rot. Regenerate with:
 *   tests/fuzz/run.sh BUILDDIR --gen-seeds
 * Each file is a selector byte (see the target's header) + one packed
 * message; a grpc seed is a stream of gRPC frames (a 5-byte prefix each).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/bus.pb-c.h"
#include "proto/control.pb-c.h"
#include "proto/etcd_watch.pb-c.h"
#include "proto/leasehold.pb-c.h"

static const char *g_dir;

/* put - write <dir>/<target>/<name> = sel + msg (sel < 0: no selector) */
static void put(const char *target, const char *name, int sel, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n + 1);
	if (!buf)
		exit(1);
	size_t off = 0;
	if (sel >= 0)
		buf[off++] = (uint8_t)sel;
	protobuf_c_message_pack(m, buf + off);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/%s", g_dir, target, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, n + off, f) != n + off || fclose(f) != 0) {
		fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	free(buf);
}

static void records(void)
{
	Leasehold__Release r1 = LEASEHOLD__RELEASE__INIT, r2 = LEASEHOLD__RELEASE__INIT;
	r1.major = 1;
	r2.major = 1;
	r2.minor = 1;
	Leasehold__Member m = LEASEHOLD__MEMBER__INIT;
	m.node_id = (char *)"node-a";
	m.release = &r2;
	m.host_version = (char *)"0.1.0";
	put("records", "member", 0, &m.base);
	m.release = NULL;
	put("records", "member_no_release", 0, &m.base);
	Leasehold__ReconcilerStatus s = LEASEHOLD__RECONCILER_STATUS__INIT;
	s.state = LEASEHOLD__RECONCILER_STATUS__STATE__STATE_DONE;
	s.version = &r2;
	s.minimum_compatible_release = &r1;
	put("records", "status_done", 1, &s.base);
	s.state = LEASEHOLD__RECONCILER_STATUS__STATE__STATE_WORKING;
	put("records", "status_working", 1, &s.base);
	s.state = (Leasehold__ReconcilerStatus__State)7;
	put("records", "status_bad_state", 1, &s.base);
	Leasehold__NodeRoles nr = LEASEHOLD__NODE_ROLES__INIT;
	char *roles[] = {(char *)"kubernetes-controller", (char *)"consensus-member"};
	nr.node_id = (char *)"node-a";
	nr.roles = roles;
	nr.n_roles = 2;
	put("records", "node_roles", 2, &nr.base);
}

static void bus(void)
{
	Leasehold__Bus__EventDone d = LEASEHOLD__BUS__EVENT_DONE__INIT;
	d.seq = 4;
	Leasehold__Bus__ToHost th = LEASEHOLD__BUS__TO_HOST__INIT;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_DONE;
	th.done = &d;
	put("bus", "event_done", -1, &th.base);
	d.err = -5;
	d.message.data = (uint8_t *)"reconcile failed";
	d.message.len = 16;
	put("bus", "event_done_error", -1, &th.base);

	Leasehold__Bus__Op put_op = LEASEHOLD__BUS__OP__INIT, range_op = LEASEHOLD__BUS__OP__INIT;
	put_op.type = 1; /* LH_OP_PUT */
	put_op.key.data = (uint8_t *)"a/k";
	put_op.key.len = 3;
	put_op.value.data = (uint8_t *)"v1";
	put_op.value.len = 2;
	range_op.type = 0; /* LH_OP_RANGE */
	range_op.flags = 1; /* LH_F_PREFIX */
	range_op.key.data = (uint8_t *)"a/";
	range_op.key.len = 2;
	Leasehold__Bus__Op *succ[] = {&put_op, &range_op};
	Leasehold__Bus__Op *fail[] = {&range_op};
	Leasehold__Bus__Compare cmp = LEASEHOLD__BUS__COMPARE__INIT;
	cmp.target = 1; /* create */
	cmp.result = 0; /* equal */
	cmp.key.data = (uint8_t *)"a/k";
	cmp.key.len = 3;
	Leasehold__Bus__Compare *cmps[] = {&cmp};
	Leasehold__Bus__TxnRequest t = LEASEHOLD__BUS__TXN_REQUEST__INIT;
	t.id = 1;
	t.compares = cmps;
	t.n_compares = 1;
	t.success = succ;
	t.n_success = 2;
	t.failure = fail;
	t.n_failure = 1;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_TXN;
	th.txn = &t;
	put("bus", "txn_request", -1, &th.base);

	Leasehold__Bus__Log lg = LEASEHOLD__BUS__LOG__INIT;
	lg.level = 2;
	lg.message.data = (uint8_t *)"reconciled 3 objects";
	lg.message.len = 20;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_LOG;
	th.log = &lg;
	put("bus", "log", -1, &th.base);

	Leasehold__Bus__ProtocolError pe = LEASEHOLD__BUS__PROTOCOL_ERROR__INIT;
	pe.message.data = (uint8_t *)"unexpected txn reply id 9";
	pe.message.len = 25;
	th.msg_case = LEASEHOLD__BUS__TO_HOST__MSG_PROTOCOL_ERROR;
	th.protocol_error = &pe;
	put("bus", "protocol_error", -1, &th.base);
}

static void control(void)
{
	Leasehold__Control__Request rq = LEASEHOLD__CONTROL__REQUEST__INIT;
	rq.protocol = 1;
	rq.kind = LEASEHOLD__CONTROL__KIND__KIND_PLUGINS;
	rq.name = (char *)"";
	put("control", "req_plugins", 0, &rq.base);
	rq.kind = LEASEHOLD__CONTROL__KIND__KIND_WAIT_READY;
	rq.name = (char *)"reconciler";
	rq.timeout_ms = 30000;
	put("control", "req_wait_ready", 0, &rq.base);
	rq.kind = LEASEHOLD__CONTROL__KIND__KIND_STATUS;
	rq.timeout_ms = 0;
	put("control", "req_status", 0, &rq.base);

	Leasehold__Control__Release r1 = LEASEHOLD__CONTROL__RELEASE__INIT;
	Leasehold__Control__Release r2 = LEASEHOLD__CONTROL__RELEASE__INIT;
	r1.major = 1;
	r2.major = 1;
	r2.minor = 1;
	Leasehold__Control__Releases rs = LEASEHOLD__CONTROL__RELEASES__INIT;
	rs.min = &r1;
	rs.max = &r2;
	rs.revision = 12;
	rs.members = 3;
	Leasehold__Control__Status st = LEASEHOLD__CONTROL__STATUS__INIT;
	st.state = (char *)"DONE";
	st.version = &r2;
	st.minimum_compatible_release = &r1;
	Leasehold__Control__Reconcile rc = LEASEHOLD__CONTROL__RECONCILE__INIT;
	rc.count = 5;
	rc.last_ok = 1;
	rc.last_error = (char *)"";
	rc.last_at = 1790000000;
	Leasehold__Control__Plugin p = LEASEHOLD__CONTROL__PLUGIN__INIT;
	p.name = (char *)"reconciler";
	p.file = (char *)"reconciler-1.1.0.so";
	p.release = &r2;
	p.state = (char *)"leading";
	p.leader = (char *)"node-a";
	p.ready = 1;
	p.releases = &rs;
	p.status = &st;
	p.reconcile = &rc;
	p.error = (char *)"";
	p.held_back = (char *)"";
	p.fencing_token = 42;
	Leasehold__Control__Plugin *ps[] = {&p};
	Leasehold__Control__Response resp = LEASEHOLD__CONTROL__RESPONSE__INIT;
	resp.code = LEASEHOLD__CONTROL__CODE__CODE_OK;
	resp.message = (char *)"";
	resp.protocol = 1;
	resp.node = (char *)"node-a";
	resp.daemon_version = (char *)"0.1.0";
	resp.plugins = ps;
	resp.n_plugins = 1;
	put("control", "resp_plugins", 1, &resp.base);
	Leasehold__Control__Member mb = LEASEHOLD__CONTROL__MEMBER__INIT;
	mb.node = (char *)"node-b";
	mb.release = &r1;
	mb.leader = 1;
	Leasehold__Control__Member *mbs[] = {&mb};
	resp.plugins = NULL;
	resp.n_plugins = 0;
	resp.members = mbs;
	resp.n_members = 1;
	put("control", "resp_members", 1, &resp.base);
	resp.members = NULL;
	resp.n_members = 0;
	resp.code = LEASEHOLD__CONTROL__CODE__CODE_NOT_FOUND;
	resp.message = (char *)"no plugin named \"x\"";
	put("control", "resp_not_found", 1, &resp.base);
}

/* plugin configuration (ABI 1.2): a config set request, a config get
 * reply, and the host's ConfigChanged / ValidateConfig events (the ToWorker
 * half of the bus target) */
static void pconfig(void)
{
	static const char doc[] = "{\"replicas\": 3}";
	Leasehold__Control__Request rq = LEASEHOLD__CONTROL__REQUEST__INIT;
	rq.protocol = 1;
	rq.kind = LEASEHOLD__CONTROL__KIND__KIND_CONFIG_SET;
	rq.name = (char *)"reconciler";
	rq.config_document.data = (uint8_t *)doc;
	rq.config_document.len = sizeof(doc) - 1;
	rq.config_revision = 42;
	put("control", "req_config_set", 0, &rq.base);
	Leasehold__Control__Response resp = LEASEHOLD__CONTROL__RESPONSE__INIT;
	resp.protocol = 1;
	resp.config_document = rq.config_document;
	resp.config_revision = 42;
	resp.config_error = (char *)"";
	put("control", "resp_config_get", 1, &resp.base);
	resp.code = LEASEHOLD__CONTROL__CODE__CODE_CONFLICT;
	resp.message = (char *)"changed meanwhile";
	put("control", "resp_config_conflict", 1, &resp.base);

	Leasehold__Bus__Config c = LEASEHOLD__BUS__CONFIG__INIT;
	c.has_cluster = 1;
	c.cluster = rq.config_document;
	c.cluster_revision = 42;
	c.has_local = 1;
	c.local.data = (uint8_t *)"{}";
	c.local.len = 2;
	Leasehold__Bus__ConfigChanged cc = LEASEHOLD__BUS__CONFIG_CHANGED__INIT;
	cc.config = &c;
	Leasehold__Bus__Event ev = LEASEHOLD__BUS__EVENT__INIT;
	ev.seq = 7;
	ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_CONFIG_CHANGED;
	ev.config_changed = &cc;
	Leasehold__Bus__ToWorker tw = LEASEHOLD__BUS__TO_WORKER__INIT;
	tw.msg_case = LEASEHOLD__BUS__TO_WORKER__MSG_EVENT;
	tw.event = &ev;
	put("bus", "to_worker_config_changed", -1, &tw.base);
	Leasehold__Bus__ValidateConfig vc = LEASEHOLD__BUS__VALIDATE_CONFIG__INIT;
	vc.document = rq.config_document;
	ev.kind_case = LEASEHOLD__BUS__EVENT__KIND_VALIDATE_CONFIG;
	ev.validate_config = &vc;
	put("bus", "to_worker_validate_config", -1, &tw.base);
}

/* put_grpc - write <dir>/grpc/<name> = the messages as gRPC frames, the
 * last one cut to `cut` bytes of its frame when cut > 0 */
static void put_grpc(const char *name, const ProtobufCMessage *const *ms, size_t n, size_t cut)
{
	uint8_t buf[4096];
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = protobuf_c_message_get_packed_size(ms[i]);
		if (off + 5 + len > sizeof(buf))
			exit(1);
		buf[off] = 0;
		buf[off + 1] = (uint8_t)(len >> 24);
		buf[off + 2] = (uint8_t)(len >> 16);
		buf[off + 3] = (uint8_t)(len >> 8);
		buf[off + 4] = (uint8_t)len;
		protobuf_c_message_pack(ms[i], buf + off + 5);
		off += i + 1 == n && cut > 0 && cut < 5 + len ? cut : 5 + len;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/grpc/%s", g_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, off, f) != off || fclose(f) != 0) {
		fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

static void grpc(void)
{
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	h.cluster_id = 5086232886149518520u;
	h.member_id = 3312585545381294396u;
	h.revision = 7;
	h.raft_term = 2;
	Etcdserverpb__WatchResponse created = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	created.header = &h;
	created.watch_id = 1;
	created.created = 1;
	const ProtobufCMessage *one[] = {&created.base};
	put_grpc("watch_created", one, 1, 0);

	Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT, prev = kv, del = kv;
	kv.key = (ProtobufCBinaryData){7, (uint8_t *)"/lh/r/x"};
	kv.value = (ProtobufCBinaryData){2, (uint8_t *)"v2"};
	kv.create_revision = 4;
	kv.mod_revision = 7;
	kv.version = 2;
	kv.lease = 7587883197470441475;
	prev = kv;
	prev.value = (ProtobufCBinaryData){2, (uint8_t *)"v1"};
	prev.mod_revision = 4;
	prev.version = 1;
	del.key = (ProtobufCBinaryData){7, (uint8_t *)"/lh/r/y"};
	del.mod_revision = 7;
	Etcdserverpb__Event put_ev = ETCDSERVERPB__EVENT__INIT, del_ev = put_ev;
	put_ev.kv = &kv;
	put_ev.prev_kv = &prev;
	del_ev.type = ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE;
	del_ev.kv = &del;
	Etcdserverpb__Event *evs[] = {&put_ev, &del_ev};
	Etcdserverpb__WatchResponse events = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	events.header = &h;
	events.watch_id = 1;
	events.n_events = 2;
	events.events = evs;
	const ProtobufCMessage *ev1[] = {&events.base};
	put_grpc("watch_events", ev1, 1, 0);

	Etcdserverpb__WatchResponse progress = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	progress.header = &h;
	progress.watch_id = 2;
	Etcdserverpb__WatchResponse compacted = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	compacted.header = &h;
	compacted.watch_id = 3;
	compacted.canceled = 1;
	compacted.compact_revision = 5;
	compacted.cancel_reason = (char *)"mvcc: required revision has been compacted";
	const ProtobufCMessage *stream[] = {&created.base, &events.base, &progress.base,
					    &compacted.base};
	put_grpc("stream_four_watch_ids", stream, 4, 0);
	put_grpc("stream_cut_in_a_frame", stream, 2, 9);
	Etcdserverpb__WatchResponse denied = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	denied.header = &h;
	denied.watch_id = 4;
	denied.created = 1;
	denied.canceled = 1;
	denied.cancel_reason = (char *)"etcdserver: permission denied";
	const ProtobufCMessage *den[] = {&denied.base};
	put_grpc("watch_denied", den, 1, 0);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_seeds CORPUS_DIR (tests/fuzz/corpus)\n");
		return 2;
	}
	g_dir = argv[1];
	records();
	bus();
	control();
	pconfig();
	grpc();
	return 0;
}
