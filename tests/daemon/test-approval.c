/* The approval rules (daemon/approval.c): what --approve risky holds with the built-in rules
 * (the hotkeys that close or kill, write into a terminal, launch), what a rule file changes
 * (user window regexes, replaced lists), what none and all do, and rule files that are refused
 * with the member named. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approval.h"
#include "common.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char dir[] = "/tmp/test-approval-XXXXXX";

static struct ipc_action act(const char *json)
{
	struct ipc_action a;
	char err[256];
	if (ipc_action_parse(json, strlen(json), IPC_COORDS_PIXELS, &a, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", json, err);
		abort();
	}
	return a;
}

/* Whether `json` is held under `mode` on window `w` (class; title "Doc"). */
static bool held(const struct approval_rules *r, enum ipc_approve mode, const char *json, const char *cls,
		 char *why, size_t whylen)
{
	struct ipc_action a = act(json);
	struct approval_window w = {"Doc", cls, cls};
	why[0] = '\0';
	bool h = approval_check(r, mode, &a, cls ? &w : NULL, NULL, why, whylen);
	ipc_action_finish(&a);
	return h;
}

static void test_defaults(void)
{
	struct approval_rules *r = approval_rules_default();
	char why[512];
	REQUIRE(r);
	/* hotkeys that close or kill, in any order, case and with more keys */
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"alt\",\"F4\"]}", NULL, why,
		   sizeof(why)));
	CHECK_STR_EQ(why, "hotkey presses alt+f4, one of the approval rules' hotkeys");
	CHECK(held(r, IPC_APPROVE_RISKY,
		   "{\"tool_name\":\"hotkey\",\"keys\":[\"delete\",\"control\",\"alt\"]}", NULL, why,
		   sizeof(why)));
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"W\"]}", NULL, why,
		   sizeof(why)));
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"shift\",\"q\"]}",
		   NULL, why, sizeof(why)));
	CHECK(held(r, IPC_APPROVE_RISKY,
		   "{\"tool_name\":\"hold_and_tap_key\",\"hold_keys\":[\"alt\"],"
		   "\"tap_keys\":[\"tab\",\"f4\"]}",
		   NULL, why, sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"c\"]}", NULL, why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"w\"]}", NULL, why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"f4\"]}", NULL, why,
		    sizeof(why)));
	/* write into a terminal, by class or instance, whatever the case */
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"write\",\"content\":\"rm -rf ~\"}", "XTerm", why,
		   sizeof(why)));
	CHECK_STR_EQ(why, "write types into a terminal (window class XTerm)");
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"write\",\"content\":\"ls\"}", "Alacritty", why,
		   sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"write\",\"content\":\"hello\"}", "Mousepad", why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"write\",\"content\":\"hello\"}", NULL, why,
		    sizeof(why)));
	/* a click into a terminal is not a write */
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"click\",\"x\":1,\"y\":2}", "XTerm", why,
		    sizeof(why)));
	/* launch */
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"launch\",\"command\":[\"xterm\"]}", NULL, why,
		   sizeof(why)));
	CHECK_STR_EQ(why, "launch is in the approval rules' tools");
	/* all: everything that acts; none: nothing; never what does not act */
	CHECK(held(r, IPC_APPROVE_ALL, "{\"tool_name\":\"click\",\"x\":1,\"y\":2}", NULL, why, sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_ALL, "{\"tool_name\":\"answer\",\"content\":\"x\"}", NULL, why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_ALL, "{\"tool_name\":\"ask_user\",\"question\":\"x\"}", NULL, why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_ALL, "{\"tool_name\":\"wait\",\"duration\":1}", NULL, why, sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_NONE, "{\"tool_name\":\"hotkey\",\"keys\":[\"alt\",\"f4\"]}", NULL, why,
		    sizeof(why)));
	CHECK(!held(r, IPC_APPROVE_DEFAULT, "{\"tool_name\":\"launch\",\"command\":[\"xterm\"]}", NULL, why,
		    sizeof(why)));
	approval_rules_destroy(r);
}

static char *write_rules(const char *name, const char *text)
{
	char *path = path_join(dir, name);
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_file(void)
{
	char err[1024], why[512];
	char *path = write_rules("rules.json",
				 "{\"hotkeys\": [\"ctrl+s\"], \"tools\": [\"click\"],"
				 " \"windows\": [{\"title\": \"(?i)bank|password\"},"
				 "               {\"class\": \"^Firefox$\", \"title\": \"Checkout\"}]}");
	struct approval_rules *r = approval_rules_load(path, err, sizeof(err));
	if (!r)
		fprintf(stderr, "%s\n", err);
	REQUIRE(r);
	/* hotkeys replaced: alt+f4 no longer, ctrl+s now */
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"alt\",\"f4\"]}", NULL, why,
		    sizeof(why)));
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"]}", NULL, why,
		   sizeof(why)));
	/* tools replaced: launch no longer */
	CHECK(!held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"launch\",\"command\":[\"xterm\"]}", NULL, why,
		    sizeof(why)));
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"click\",\"x\":1,\"y\":2}", NULL, why, sizeof(why)));
	/* terminals kept (the file leaves them out) */
	CHECK(held(r, IPC_APPROVE_RISKY, "{\"tool_name\":\"write\",\"content\":\"x\"}", "xterm", why,
		   sizeof(why)));
	/* user regexes on the window acted on: any action */
	struct ipc_action a = act("{\"tool_name\":\"scroll\",\"x\":1,\"y\":2,\"direction\":\"up\"}");
	struct approval_window online = {"My BANK - Chromium", "Chromium", "chromium"};
	struct approval_window shop = {"Checkout", "Firefox", "Navigator"};
	struct approval_window other = {"Checkout", "Chromium", "chromium"};
	CHECK(approval_check(r, IPC_APPROVE_RISKY, &a, &online, NULL, why, sizeof(why)));
	CHECK(strstr(why, "scroll acts on a window the approval rules name (title ~ \"(?i)bank|"
			  "password\")") != NULL);
	CHECK(approval_check(r, IPC_APPROVE_RISKY, &a, &shop, NULL, why, sizeof(why)));
	CHECK(!approval_check(r, IPC_APPROVE_RISKY, &a, &other, NULL, why, sizeof(why)));
	CHECK(!approval_check(r, IPC_APPROVE_RISKY, &a, NULL, NULL, why, sizeof(why)));
	ipc_action_finish(&a);
	approval_rules_destroy(r);
	free(path);

	/* Refused, naming the file and the member. */
	static const struct {
		const char *text, *msg;
		int err;
	} bad[] = {
		{"{\"hotkeys\": [\"ctrl+ctr\"]}", "hotkeys[0]: 'ctrl+ctr': unknown key name 'ctr'", EINVAL},
		{"{\"hotkey\": []}", "hotkey: unknown member", EINVAL},
		{"{\"tools\": [\"answer\"]}", "tools[0]: 'answer' is not a tool that acts", EINVAL},
		{"{\"tools\": [\"fly\"]}", "tools[0]: 'fly' is not a tool that acts", EINVAL},
		{"{\"windows\": [{\"title\": \"(\"}]}", "windows[0].title: invalid regex", EINVAL},
		{"{\"windows\": [{\"name\": \"x\"}]}", "windows[0].name: unknown member", EINVAL},
		{"{\"windows\": [{}]}", "windows[0]: needs title, class or instance", EINVAL},
		{"{\"terminals\": \"xterm\"}", "terminals: expected an array", EINVAL},
		{"{\"terminals\": [\"\"]}", "terminals[0]: expected a non-empty string", EINVAL},
		{"[1]", "expected an object", EINVAL},
		{"{\"tools\": [", "invalid JSON at line 1", EINVAL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		path = write_rules("bad.json", bad[i].text);
		err[0] = '\0';
		errno = 0;
		r = approval_rules_load(path, err, sizeof(err));
		CHECK(r == NULL);
		CHECK_INT_EQ(errno, bad[i].err);
		bool has = strstr(err, bad[i].msg) != NULL && strstr(err, path) != NULL;
		if (!has)
			fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, err, bad[i].msg);
		CHECK(has);
		approval_rules_destroy(r);
		free(path);
	}
	/* Over the limits. */
	char *big = xmalloc(APPROVAL_MAX_FILE_BYTES + 64);
	memset(big, ' ', APPROVAL_MAX_FILE_BYTES + 10);
	memcpy(big, "{}", 2);
	big[APPROVAL_MAX_FILE_BYTES + 10] = '\0';
	path = write_rules("big.json", big);
	CHECK(approval_rules_load(path, err, sizeof(err)) == NULL && errno == E2BIG);
	free(path);
	size_t off = (size_t)sprintf(big, "{\"terminals\": [");
	for (int i = 0; i <= APPROVAL_MAX_RULES; i++)
		off += (size_t)sprintf(big + off, "%s\"t%d\"", i ? "," : "", i);
	sprintf(big + off, "]}");
	path = write_rules("many.json", big);
	CHECK(approval_rules_load(path, err, sizeof(err)) == NULL && errno == E2BIG);
	CHECK(strstr(err, "terminals: 65 entries exceed the limit of 64") != NULL);
	free(path);
	free(big);
	path = path_join(dir, "missing.json");
	CHECK(approval_rules_load(path, err, sizeof(err)) == NULL && errno == ENOENT);
	free(path);
}

static void test_data_url(void)
{
	const unsigned char png[] = {0x89, 'P', 'N', 'G'};
	char *url = approval_png_data_url(png, sizeof(png));
	CHECK_STR_EQ(url, "data:image/png;base64,iVBORw==");
	free(url);
	url = approval_png_data_url(png, 3);
	CHECK_STR_EQ(url, "data:image/png;base64,iVBO");
	free(url);
}

/* Runs `json` as a step that ran: its key_down / key_up change what is held. */
static void ran(struct approval_held *h, const char *json)
{
	struct ipc_action a = act(json);
	approval_held_note(h, &a);
	ipc_action_finish(&a);
}

/* Whether `json` is held under --approve risky while `h` holds keys down. */
static bool held_with(const struct approval_rules *r, const struct approval_held *h, const char *json,
		      char *why, size_t whylen)
{
	struct ipc_action a = act(json);
	why[0] = '\0';
	bool b = approval_check(r, IPC_APPROVE_RISKY, &a, NULL, h, why, whylen);
	ipc_action_finish(&a);
	return b;
}

/* A combination spread over two steps: a key held down by an earlier key_down and a key pressed
 * later make the risky hotkey, held as the hotkey itself is; released, they no longer do. */
static void test_held_keys(void)
{
	struct approval_rules *r = approval_rules_default();
	struct approval_held h = {0};
	char why[512];
	REQUIRE(r);
	const char *w = "{\"tool_name\":\"hotkey\",\"keys\":[\"w\"]}";
	CHECK(!held_with(r, &h, w, why, sizeof(why)));
	ran(&h, "{\"tool_name\":\"key_down\",\"key\":\"ctrl\"}");
	CHECK(h.n == 1);
	CHECK(held_with(r, &h, w, why, sizeof(why)));
	CHECK_STR_EQ(why, "hotkey presses ctrl+w with the key(s) held down by an earlier key_down, "
			  "one of the approval rules' hotkeys");
	/* without what the earlier step holds, the same step is not held */
	CHECK(!held_with(r, NULL, w, why, sizeof(why)));
	CHECK(!held_with(r, &h, "{\"tool_name\":\"hotkey\",\"keys\":[\"c\"]}", why, sizeof(why)));
	/* another name of the same key, typed text, a second key_down, hold_and_tap_key */
	CHECK(held_with(r, &h, "{\"tool_name\":\"hotkey\",\"keys\":[\"Q\"]}", why, sizeof(why)));
	CHECK(held_with(r, &h, "{\"tool_name\":\"write\",\"content\":\"new window\"}", why, sizeof(why)));
	CHECK_STR_EQ(why, "write presses ctrl+w with the key(s) held down by an earlier key_down, "
			  "one of the approval rules' hotkeys");
	CHECK(!held_with(r, &h, "{\"tool_name\":\"write\",\"content\":\"abc\"}", why, sizeof(why)));
	CHECK(held_with(r, &h, "{\"tool_name\":\"key_down\",\"key\":\"w\"}", why, sizeof(why)));
	CHECK(held_with(r, &h,
			"{\"tool_name\":\"hold_and_tap_key\",\"hold_keys\":[\"shift\"],"
			"\"tap_keys\":[\"q\"]}",
			why, sizeof(why)));
	/* alt held, then f4 pressed down: alt+f4 */
	ran(&h, "{\"tool_name\":\"key_down\",\"key\":\"alt\"}");
	CHECK(held_with(r, &h, "{\"tool_name\":\"key_down\",\"key\":\"F4\"}", why, sizeof(why)));
	CHECK(strstr(why, "presses alt+f4 with") != NULL);
	/* released (ctrl by another of its names), the w alone is harmless again */
	ran(&h, "{\"tool_name\":\"key_up\",\"key\":\"alt\"}");
	ran(&h, "{\"tool_name\":\"key_up\",\"key\":\"control\"}");
	CHECK(h.n == 0);
	CHECK(!held_with(r, &h, w, why, sizeof(why)));
	/* more keys held than are tracked: any key press is held (fails closed) */
	static const char *const many[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
					   "j", "k", "l", "m", "n", "o", "p", "r"};
	for (size_t i = 0; i < ARRAY_SIZE(many); i++) {
		char *j = xasprintf("{\"tool_name\":\"key_down\",\"key\":\"%s\"}", many[i]);
		ran(&h, j);
		free(j);
	}
	CHECK(h.overflow);
	CHECK(held_with(r, &h, "{\"tool_name\":\"hotkey\",\"keys\":[\"x\"]}", why, sizeof(why)));
	CHECK(!held_with(r, &h, "{\"tool_name\":\"click\",\"x\":1,\"y\":2}", why, sizeof(why)));
	approval_rules_destroy(r);
}

int main(void)
{
	REQUIRE(mkdtemp(dir));
	test_defaults();
	test_held_keys();
	test_file();
	test_data_url();
	char *cmd = xasprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	free(cmd);
	return test_exit();
}
