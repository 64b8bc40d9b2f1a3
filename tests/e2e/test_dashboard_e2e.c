/* SPDX-License-Identifier: MIT */
/*
 * test_dashboard_e2e.c - the dashboard (docs/observability.md) in a real
 * headless Chromium against three real hosts during a hot-reload rollout
 * of the example plugin, 1.0.0 to 1.1.0. One live page on host a's
 * endpoint, never reloaded: each step changes the cluster and waits for
 * the page's DOM (updated by its long poll) to show the rows, the leader,
 * the releases, who holds the rollout back, the release that can act (the
 * release rule's answer), the pin and the terms; a screenshot per
 * step goes to tests/artifacts/test_dashboard_e2e/ in the build tree.
 * Also: /api/v1/members answers the JSON of `leaseholdctl members -o
 * json`, /api/v1/plugins carries the pin and the release that can act as
 * `leaseholdctl release NAME -o json` shows them, the page is served with
 * its CSP, and the API refuses bad queries
 * with a reason. Without Chromium the program exits 77 and says why.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "browser.h"
#include "check.h"
#include "harness.h"
#include "hosts.h"
#include "http_client.h"
#include "base/loop.h"
#include "testutil.h"

#define PFX "/lhdash"
#define PLUGIN "reconciler"

static struct harness_etcd *g_etcd;
static struct tu T;
static struct observer *g_obs;
static struct host A, B, C;
static int g_port[3];
static struct browser *g_br;
static char g_artifacts[600];

static void start(struct host *h, int port)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	const char *args[] = {"--prefix", PFX, "--ttl", "2", "--reconcile-wait", "0",
	                      "--reconcile-interval", "1h", "--http", addr, NULL};
	host_start(h, harness_etcd_urls(g_etcd), args);
}

/* the page's state as JSON: {"leader", "status", "acting" (the release that
 * can act), "canact" (its fact's text), "pin", "pintext", "rows": {node: release},
 * "lead": the leader row's "node:release", "back": the nodes marked as
 * holding the rollout back ("a,b"), "terms", "open": the open term's
 * "node:release"}; "" before its first render */
static const char DOM_EXPR[] =
    "(function(){var s=document.querySelector('section.plugin[data-plugin=\"" PLUGIN "\"]');"
    "if(document.body.dataset.loaded!=='true'||!s)return '';"
    "var o={leader:s.dataset.leader,rows:{},lead:'-',back:[],"
    "status:s.querySelector('[data-fact=status] .value').textContent,"
    "acting:s.dataset.acting,canact:s.querySelector('[data-fact=can-act] .value').textContent,"
    "pin:s.dataset.pin,pintext:s.querySelector('[data-fact=pin] .value').textContent,"
    "terms:s.querySelectorAll('li.term').length,open:'-'};"
    "[].forEach.call(s.querySelectorAll('tr.member'),function(r){"
    "o.rows[r.dataset.node]=r.dataset.release;"
    "if(r.dataset.leader==='true')o.lead=r.dataset.node+':'+r.dataset.release;"
    "if(r.dataset.holdsBack==='true')o.back.push(r.dataset.node);});"
    "o.back=o.back.sort().join(',');"
    "var t=s.querySelector('li.term[data-ended=false]');"
    "if(t)o.open=t.dataset.node+':'+t.dataset.release;"
    "return JSON.stringify(o);})()";

/* what a step expects the page to show */
struct step {
	const char *name;
	const char *rel[3];   /* the releases of rows a, b, c */
	const char *lead_rel; /* the leader row's release */
	const char *lead;     /* the leader, or NULL: any */
	const char *back;     /* the nodes holding the rollout back */
	const char *status;
	int min_terms;
	const char *acting; /* the release that can act */
	const char *pin;    /* the pinned release, "" for none */
	char last[800]; /* what the page showed last */
};

static bool p_dom(void *arg)
{
	struct step *w = arg;
	char *s = browser_eval(g_br, DOM_EXPR);
	snprintf(w->last, sizeof(w->last), "%s", s ? s : "(no answer)");
	json_object *o = s && *s ? json_tokener_parse(s) : NULL;
	free(s);
	if (!o)
		return false;
	const char *lead = jstr(o, "lead"), *leader = jstr(o, "leader"), *open = jstr(o, "open");
	json_object *rows = jget(o, "rows");
	bool ok = rows && json_object_object_length(rows) == 3 && lead && leader && open;
	static const char *const nodes[] = {"a", "b", "c"};
	for (int i = 0; ok && i < 3; i++) {
		const char *r = jstr(rows, nodes[i]);
		ok = r && strcmp(r, w->rel[i]) == 0;
	}
	/* the leader row is the plugin's leader, on the release that acts,
	 * and its term is the open one */
	size_t ll = ok ? strcspn(lead, ":") : 0;
	ok = ok && strlen(leader) == ll && strncmp(lead, leader, ll) == 0 &&
	     strcmp(lead + ll + 1, w->lead_rel) == 0 && strcmp(open, lead) == 0 &&
	     (!w->lead || strcmp(leader, w->lead) == 0);
	ok = ok && jstr(o, "back") && strcmp(jstr(o, "back"), w->back) == 0;
	ok = ok && jstr(o, "status") && strcmp(jstr(o, "status"), w->status) == 0;
	ok = ok && json_object_get_int(jget(o, "terms")) >= w->min_terms;
	/* the rule's answer beside who leads: "1.0.0 (why)" */
	const char *acting = jstr(o, "acting"), *canact = jstr(o, "canact");
	ok = ok && acting && strcmp(acting, w->acting) == 0 && canact &&
	     strncmp(canact, acting, strlen(acting)) == 0 && strstr(canact, " (") != NULL;
	const char *pin = jstr(o, "pin"), *pintext = jstr(o, "pintext");
	ok = ok && pin && strcmp(pin, w->pin) == 0 && pintext &&
	     (w->pin[0] ? strncmp(pintext, w->pin, strlen(w->pin)) == 0 && strstr(pintext, " by ")
	                : strcmp(pintext, "none") == 0);
	json_object_put(o);
	return ok;
}

/* wait for the live page to show step w, then keep its screenshot */
static void wait_page(struct step *w)
{
	uint64_t deadline = loop_now() + 20 * LOOP_NS_PER_S;
	while (!p_dom(w)) {
		if (loop_now() >= deadline) {
			fprintf(stderr, "timed out waiting for the dashboard to show step %s; it shows: %s\n",
			        w->name, w->last);
			hosts_dump_logs();
			exit(1);
		}
		CHECK(loop_run_once(T.loop, 100) >= 0); /* the observer's watch runs meanwhile */
	}
	fprintf(stderr, "# step %s: %s\n", w->name, w->last);
	char file[700];
	snprintf(file, sizeof(file), "%s/%s.png", g_artifacts, w->name);
	CHECK_OK(browser_screenshot(g_br, file));
	struct stat st;
	CHECK(stat(file, &st) == 0 && st.st_size > 1000);
}

static void upgrade(struct host *h)
{
	host_install_plugin(h, "1.1.0", "reconciler.so");
	obs_wait_member_release(g_obs, h->node, REL(1, 1, 0), 15000);
}

static void test_dashboard_follows_a_rollout(void)
{
	char path[64], url[128];
	CHECK(browser_find(path, sizeof(path)));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", g_port[0]);
	g_br = browser_open(path, harness_dir(g_etcd), url);

	static struct step s1 = {"1-all-on-1.0.0", {"1.0.0", "1.0.0", "1.0.0"}, "1.0.0", NULL, "",
	                         "DONE 1.0.0", 1, "1.0.0", ""};
	wait_page(&s1);

	/* c upgrades: 1.0.0 keeps leading (the only release that can act);
	 * a and b hold the rollout back */
	upgrade(&C);
	static struct step s2 = {"2-c-on-1.1.0", {"1.0.0", "1.0.0", "1.1.0"}, "1.0.0", NULL, "a,b",
	                         "DONE 1.0.0", 1, "1.0.0", ""};
	wait_page(&s2);

	/* b upgrades: only a runs the release that can act */
	upgrade(&B);
	static struct step s3 = {"3-b-on-1.1.0", {"1.0.0", "1.1.0", "1.1.0"}, "1.0.0", "a", "a",
	                         "DONE 1.0.0", 1, "1.0.0", ""};
	wait_page(&s3);

	/* a pin shows, and goes again */
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "release", "pin", PLUGIN, "1.0.0", NULL), 0);
	ctl_out_free(&o);
	static struct step s3p = {"3p-pinned-at-1.0.0", {"1.0.0", "1.1.0", "1.1.0"}, "1.0.0", "a",
	                          "a", "DONE 1.0.0", 1, "1.0.0", "1.0.0"};
	wait_page(&s3p);
	CHECK_INT_EQ(host_ctl(&B, &o, "release", "unpin", PLUGIN, NULL), 0);
	ctl_out_free(&o);
	static struct step s3u = {"3u-unpinned", {"1.0.0", "1.1.0", "1.1.0"}, "1.0.0", "a", "a",
	                          "DONE 1.0.0", 1, "1.0.0", ""};
	wait_page(&s3u);

	/* the last 1.0.0 host: a handover to 1.1.0, DONE 1.1.0, a new term */
	upgrade(&A);
	obs_wait_status_done(g_obs, REL(1, 1, 0), 20000);
	static struct step s4 = {"4-all-on-1.1.0", {"1.1.0", "1.1.0", "1.1.0"}, "1.1.0", NULL, "",
	                         "DONE 1.1.0", 2, "1.1.0", ""};
	wait_page(&s4);
}

/* p_api_members_is_the_cli_json - B's /api/v1/members and its `members -o
 * json` agree: every key of the CLI's object, with the same value where it
 * does not move between two reads. The page answers from a snapshot
 * published up to 50 ms after a change, so a record that moved just before
 * may differ for that long: the caller waits for agreement. */
static bool p_api_members_is_the_cli_json(void *arg)
{
	(void)arg;
	struct http_reply r;
	CHECK_INT_EQ(http_request(g_port[1], NULL, "/api/v1/members?plugin=" PLUGIN, 5000, &r), 200);
	CHECK(strstr(r.ctype, "application/json") != NULL);
	struct ctl_out o;
	CHECK_INT_EQ(host_ctl(&B, &o, "members", PLUGIN, "-o", "json", NULL), 0);
	json_object *api = json_tokener_parse(r.body), *cli = json_tokener_parse(o.out);
	CHECK(api && cli && json_object_is_type(api, json_type_array));
	bool same = json_object_array_length(api) == json_object_array_length(cli);
	for (size_t i = 0; same && i < json_object_array_length(api); i++) {
		json_object *a = json_object_array_get_idx(api, i), *c = json_object_array_get_idx(cli, i);
		same = json_object_object_length(a) == json_object_object_length(c);
		json_object_object_foreach(c, k, v) {
			json_object *av;
			if (!same)
				break;
			same = json_object_object_get_ex(a, k, &av) &&
			       (!strcmp(k, "since") || !strcmp(k, "last_reconcile") ||
			        !strcmp(json_object_to_json_string(av), json_object_to_json_string(v)));
			if (!same)
				fprintf(stderr, "members: %s differs: api %s, cli %s\n", k,
				        json_object_to_json_string(av), json_object_to_json_string(v));
		}
	}
	json_object_put(api);
	json_object_put(cli);
	ctl_out_free(&o);
	http_reply_free(&r);
	return same;
}

/* B's /api/v1/history holds at least two terms (a's ended one and the
 * current; it is re-read after a publish, so it may lag the term record) */
static bool p_api_history_two_terms(void *arg)
{
	(void)arg;
	struct http_reply r;
	CHECK_INT_EQ(http_request(g_port[1], NULL, "/api/v1/history?plugin=" PLUGIN, 5000, &r), 200);
	json_object *h = json_tokener_parse(r.body);
	CHECK(h && json_object_is_type(h, json_type_array));
	bool ok = json_object_array_length(h) >= 2 &&
	          jget(json_object_array_get_idx(h, 0), "token") != NULL;
	json_object_put(h);
	http_reply_free(&r);
	return ok;
}

/* /api/v1/members is what `leaseholdctl members -o json` prints */
static void test_api_members_is_the_cli_json(void)
{
	struct http_reply r;
	struct ctl_out o;
	tu_wait(&T, p_api_members_is_the_cli_json, NULL, 5000, "/api/v1/members = members -o json");

	/* the plugin object carries the pin and the release rule's answer as
	 * `release NAME -o json` does */
	CHECK_INT_EQ(http_request(g_port[1], NULL, "/api/v1/plugins", 5000, &r), 200);
	CHECK_INT_EQ(host_ctl(&B, &o, "release", PLUGIN, "-o", "json", NULL), 0);
	json_object *ps = json_tokener_parse(r.body), *rel = json_tokener_parse(o.out), *p = NULL;
	for (size_t i = 0; ps && i < json_object_array_length(ps); i++)
		if (strcmp(jstr(json_object_array_get_idx(ps, i), "name"), PLUGIN) == 0)
			p = json_object_array_get_idx(ps, i);
	CHECK(p && rel && jget(p, "acting") != NULL);
	CHECK_STR_EQ(jstr(p, "acting.release"), "1.1.0");
	CHECK_STR_EQ(json_object_to_json_string(jget(p, "acting")),
	             json_object_to_json_string(jget(rel, "acting")));
	CHECK_STR_EQ(json_object_to_json_string(jget(p, "pin")),
	             json_object_to_json_string(jget(rel, "pin")));
	json_object_put(ps);
	json_object_put(rel);
	ctl_out_free(&o);
	http_reply_free(&r);

	tu_wait(&T, p_api_history_two_terms, NULL, 10000, "two terms in /api/v1/history");
}

struct bad {
	const char *path;
	long status;
	const char *body;
};

/* the API's answers to what no page sends */
static void test_api_refuses_bad_queries(void)
{
	static const struct bad bad[] = {
	    {"/api/v1/history", 400, "needs ?plugin=NAME"},
	    {"/api/v1/members?plugin=", 400, "1 to 255"},
	    {"/api/v1/members?plugin=../etc", 400, "only A-Z"},
	    {"/api/v1/members?plugin=%2e%2e", 400, "only A-Z"},
	    {"/api/v1/members?plugin=a&plugin=b", 400, "repeated"},
	    {"/api/v1/members?plugin=" PLUGIN "&x=1", 400, "unknown"},
	    {"/api/v1/members?plugin=" PLUGIN "&", 400, "end in"},
	    {"/api/v1/plugins?plugin=x", 400, "unknown"},
	    {"/api/v1/members?plugin=nosuch", 404, "no plugin named 'nosuch'"},
	    {"/api/v1/history?plugin=nosuch", 404, "no plugin named"},
	    {"/api/v1/nope", 404, "no such route"},
	    {"/api/v1/events?since=x", 400, "since"},
	    {"/api/v1/events?since=184467440737095516160", 400, "since"},
	    {"/api/v1/events?since=1&since=2", 400, "repeated"},
	    {"/api/v1/events?since=0", 200, "generation"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct http_reply r;
		long s = http_request(g_port[2], NULL, bad[i].path, 5000, &r);
		if (s != bad[i].status || !strstr(r.body, bad[i].body))
			fprintf(stderr, "GET %s: %ld %s (want %ld %s)\n", bad[i].path, s, r.body,
			        bad[i].status, bad[i].body);
		CHECK_INT_EQ(s, bad[i].status);
		CHECK(strstr(r.body, bad[i].body) != NULL);
		http_reply_free(&r);
	}
	struct http_reply r;
	CHECK_INT_EQ(http_request(g_port[2], "POST", "/api/v1/plugins", 5000, &r), 405);
	http_reply_free(&r);
	/* the page: its CSP allows no origin but its own */
	CHECK_INT_EQ(http_request(g_port[2], NULL, "/", 5000, &r), 200);
	CHECK(strstr(r.ctype, "text/html") != NULL);
	CHECK(strstr(r.body, "/api/v1/events?since=") != NULL);
	http_reply_free(&r);
}

int main(void)
{
	char path[64];
	if (!browser_find(path, sizeof(path))) {
		printf("skip - the dashboard tests need Chromium (Debian's chromium; ./quickstart "
		       "installs it, or set LH_CHROMIUM)\n");
		return 77;
	}
	CHECK_OK(harness_etcd_start(1, NULL, &g_etcd));
	tu_init(&T, harness_etcd_urls(g_etcd));
	const char *bd = getenv("LH_BUILDDIR");
	snprintf(g_artifacts, sizeof(g_artifacts), "%s/tests/artifacts", bd ? bd : ".");
	mkdir(g_artifacts, 0755);
	size_t l = strlen(g_artifacts);
	snprintf(g_artifacts + l, sizeof(g_artifacts) - l, "/test_dashboard_e2e");
	mkdir(g_artifacts, 0755);
	CHECK_OK(harness_free_ports(g_port, 3));
	host_setup(&A, harness_dir(g_etcd), "a");
	host_setup(&B, harness_dir(g_etcd), "b");
	host_setup(&C, harness_dir(g_etcd), "c");
	g_obs = obs_new(&T, PFX, PLUGIN, REL(1, 0, 0), REL(1, 0, 0), REL(1, 0, 0));
	host_install_plugin(&A, "1.0.0", "reconciler.so");
	host_install_plugin(&B, "1.0.0", "reconciler.so");
	host_install_plugin(&C, "1.0.0", "reconciler.so");
	start(&A, g_port[0]);
	obs_wait_leader(g_obs, "a", 15000);
	start(&B, g_port[1]);
	start(&C, g_port[2]);
	obs_wait_members(g_obs, 3, 15000);
	obs_wait_status_done(g_obs, REL(1, 0, 0), 15000);

	RUN(test_dashboard_follows_a_rollout);
	RUN(test_api_members_is_the_cli_json);
	RUN(test_api_refuses_bad_queries);

	browser_close(g_br);
	hosts_terminate((struct host *const[]){&A, &B, &C}, 3, 15000, false);
	obs_free(g_obs);
	tu_fini(&T);
	harness_etcd_free(g_etcd);
	return 0;
}
