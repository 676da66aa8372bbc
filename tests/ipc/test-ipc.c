/* ipc: the action vocabulary's parser names the offending field, enforces every named limit and
 * round-trips through the serializer. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common.h"
#include "ipc.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char err[512];

static int parse_task(const char *json, struct ipc_task_request **ret)
{
	err[0] = '\0';
	return ipc_task_request_parse(json, strlen(json), ret, err, sizeof(err));
}

/* Expects a failure with `code` and a message starting with `prefix`. */
static void expect_error(const char *json, int code, const char *prefix)
{
	struct ipc_task_request *req = NULL;
	int r = parse_task(json, &req);
	CHECK_INT_EQ(r, code);
	CHECK(req == NULL);
	if (strncmp(err, prefix, strlen(prefix)) != 0) {
		fprintf(stderr, "for %s\n  expected message starting with: %s\n  got: %s\n", json, prefix,
			err);
		test_failures++;
	}
}

static void test_script_ok(void)
{
	const char *json =
		"{\"script\": ["
		"{\"tool_name\": \"click\", \"element\": \"OK\", \"x\": 10, \"y\": 20, \"button\": "
		"\"right\"},"
		"{\"tool_name\": \"double_click\", \"x\": 1, \"y\": 2},"
		"{\"tool_name\": \"drag\", \"x\": 1, \"y\": 2, \"x2\": 300, \"y2\": 400},"
		"{\"tool_name\": \"scroll\", \"x\": 5, \"y\": 6, \"direction\": \"down\"},"
		"{\"tool_name\": \"write\", \"content\": \"h\\u00e9llo\\n\", \"press_enter\": true},"
		"{\"tool_name\": \"hotkey\", \"keys\": [\"ctrl\", \"shift\", \"t\"], \"repeat_count\": 2},"
		"{\"tool_name\": \"key_down\", \"key\": \"shift\"},"
		"{\"tool_name\": \"key_up\", \"key\": \"shift\"},"
		"{\"tool_name\": \"wait\", \"duration\": 1.5},"
		"{\"tool_name\": \"answer\", \"content\": \"done\"}"
		"], \"coords\": \"pixels\", \"max_steps\": 20, \"max_seconds\": 60, \"settle_ms\": 0,"
		" \"dry_run\": true}";
	struct ipc_task_request *req = NULL;

	REQUIRE(parse_task(json, &req) == 0);
	CHECK_INT_EQ(req->kind, IPC_TASK_KIND_SCRIPT);
	CHECK_INT_EQ(req->n_actions, 10);
	CHECK_INT_EQ(req->coords, IPC_COORDS_PIXELS);
	CHECK_INT_EQ(req->options.max_steps, 20);
	CHECK_INT_EQ(req->options.max_seconds, 60);
	CHECK_INT_EQ(req->options.settle_ms, 0);
	CHECK(req->options.dry_run);
	CHECK_INT_EQ(req->actions[0].tool, IPC_TOOL_CLICK);
	CHECK_STR_EQ(req->actions[0].element, "OK");
	CHECK_INT_EQ(req->actions[0].button, IPC_BUTTON_RIGHT);
	CHECK_INT_EQ(req->actions[1].button, IPC_BUTTON_LEFT);
	CHECK_INT_EQ(req->actions[2].x2, 300);
	CHECK_INT_EQ(req->actions[3].direction, IPC_DIRECTION_DOWN);
	CHECK_INT_EQ(req->actions[3].scroll_size, IPC_DEFAULT_SCROLL_SIZE);
	CHECK_STR_EQ(req->actions[4].content, "h\xc3\xa9llo\n");
	CHECK(req->actions[4].press_enter);
	CHECK(!req->actions[4].overwrite);
	CHECK_INT_EQ(req->actions[5].n_keys, 3);
	CHECK_STR_EQ(req->actions[5].keys[2], "t");
	CHECK_INT_EQ(req->actions[5].repeat_count, 2);
	CHECK_STR_EQ(req->actions[6].key, "shift");
	CHECK_INT_EQ(req->actions[8].duration_ms, 1500);
	CHECK_STR_EQ(req->actions[9].content, "done");

	/* Serialize, parse again, serialize again: the same text. */
	char *a = ipc_task_request_to_json(req);
	REQUIRE(a);
	struct ipc_task_request *again = NULL;
	REQUIRE(parse_task(a, &again) == 0);
	char *b = ipc_task_request_to_json(again);
	CHECK_STR_EQ(a, b);
	free(a);
	free(b);
	ipc_task_request_destroy(again);
	ipc_task_request_destroy(req);
}

/* "replay_of": a script records the task it replays, and keeps it through the spec. */
static void test_replay_of(void)
{
	struct ipc_task_request *req = NULL;
	REQUIRE(parse_task("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}],"
			   " \"replay_of\": 7}",
			   &req) == 0);
	CHECK_INT_EQ(req->replay_of, 7);
	char *a = ipc_task_request_to_json(req);
	REQUIRE(a);
	CHECK(strstr(a, "\"replay_of\": 7") || strstr(a, "\"replay_of\":7"));
	free(a);
	ipc_task_request_destroy(req);
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], \"replay_of\": 0}", -EINVAL,
		     "replay_of:");
	expect_error("{\"instruction\": \"x\", \"replay_of\": 3}", -EINVAL, "replay_of: unknown field");
}

/* "display": a task or an action may name the display it runs on; the name is kept in the
 * spec and bounded. */
static void test_display(void)
{
	struct ipc_task_request *req = NULL, *back = NULL;
	REQUIRE(parse_task("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}],"
			   " \"display\": \":12\"}",
			   &req) == 0);
	CHECK_STR_EQ(req->options.display, ":12");
	char *a = ipc_task_request_to_json(req);
	REQUIRE(a);
	REQUIRE(parse_task(a, &back) == 0);
	CHECK_STR_EQ(back->options.display, ":12");
	free(a);
	ipc_task_request_destroy(back);
	ipc_task_request_destroy(req);
	REQUIRE(parse_task("{\"instruction\": \"x\", \"display\": \"host:0.1\"}", &req) == 0);
	CHECK_STR_EQ(req->options.display, "host:0.1");
	ipc_task_request_destroy(req);
	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK(req->options.display == NULL);
	ipc_task_request_destroy(req);
	static const char action[] = "{\"action\": {\"tool_name\": \"move\", \"x\": 1, \"y\": 1},"
				     " \"display\": \":3\"}";
	REQUIRE(ipc_action_request_parse(action, strlen(action), &req, err, sizeof(err)) == 0);
	CHECK_STR_EQ(req->options.display, ":3");
	ipc_task_request_destroy(req);

	expect_error("{\"instruction\": \"x\", \"display\": 1}", -EINVAL, "display:");
	expect_error("{\"instruction\": \"x\", \"display\": \"\"}", -EINVAL, "display:");
	expect_error("{\"instruction\": \"x\", \"display\": \": 1\"}", -EINVAL, "display:");
	char *longname =
		xasprintf("{\"instruction\": \"x\", \"display\": \":%0*d\"}", IPC_MAX_DISPLAY_NAME_BYTES, 1);
	expect_error(longname, -E2BIG, "display:");
	free(longname);
}

/* An instruction's sampling: each field set or left to holod; ranges checked with the field
 * named; the spec holod journals keeps them (a task is run again with its recorded seed). */
static void test_sampling(void)
{
	struct ipc_task_request *req = NULL, *back = NULL;
	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK(!req->options.has_temperature && !req->options.has_top_p && !req->options.has_seed);
	char *a = ipc_task_request_to_json(req);
	REQUIRE(a);
	CHECK(!strstr(a, "temperature") && !strstr(a, "top_p") && !strstr(a, "seed"));
	free(a);
	ipc_task_request_destroy(req);

	REQUIRE(parse_task("{\"instruction\": \"x\", \"temperature\": 0, \"top_p\": 0.9,"
			   " \"seed\": 4294967295}",
			   &req) == 0);
	CHECK(req->options.has_temperature && req->options.temperature == 0.0);
	CHECK(req->options.has_top_p && req->options.top_p == 0.9);
	CHECK(req->options.has_seed && req->options.seed == 4294967295u);
	a = ipc_task_request_to_json(req);
	REQUIRE(a);
	REQUIRE(parse_task(a, &back) == 0);
	CHECK(back->options.has_temperature && back->options.temperature == 0.0);
	CHECK(back->options.has_top_p && back->options.top_p == 0.9);
	CHECK(back->options.has_seed && back->options.seed == 4294967295u);
	free(a);
	ipc_task_request_destroy(back);
	ipc_task_request_destroy(req);
	REQUIRE(parse_task("{\"instruction\": \"x\", \"temperature\": 2, \"top_p\": 1}", &req) == 0);
	CHECK(req->options.temperature == 2.0 && req->options.top_p == 1.0);
	ipc_task_request_destroy(req);

	expect_error("{\"instruction\": \"x\", \"temperature\": 2.5}", -EINVAL,
		     "temperature: 2.5 is out of range 0..2");
	expect_error("{\"instruction\": \"x\", \"temperature\": -0.1}", -EINVAL, "temperature:");
	expect_error("{\"instruction\": \"x\", \"temperature\": \"hot\"}", -EINVAL,
		     "temperature: expected a number");
	expect_error("{\"instruction\": \"x\", \"top_p\": 0}", -EINVAL, "top_p: 0 is out of range above 0..1");
	expect_error("{\"instruction\": \"x\", \"top_p\": 1.5}", -EINVAL, "top_p:");
	expect_error("{\"instruction\": \"x\", \"seed\": -1}", -EINVAL, "seed:");
	expect_error("{\"instruction\": \"x\", \"seed\": 4294967296}", -EINVAL, "seed:");
	expect_error("{\"instruction\": \"x\", \"seed\": 1.5}", -EINVAL, "seed: expected an integer");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], \"seed\": 1}", -EINVAL,
		     "seed: unknown field");
}

/* replay --check: one recorded step per action, a threshold 0..1, only with replay_of; it
 * round-trips through the spec holod journals. */
static void test_replay_check(void)
{
	static const char two[] = "{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1},"
				  " {\"tool_name\": \"wait\", \"duration\": 1}], \"replay_of\": 7, ";
	struct ipc_task_request *req = NULL, *back = NULL;
	char *json = xasprintf("%s\"check\": {\"threshold\": 0.25, \"steps\": [3, 5]}}", two);
	REQUIRE(parse_task(json, &req) == 0);
	free(json);
	REQUIRE(req->check_steps);
	CHECK_INT_EQ(req->check_steps[0], 3);
	CHECK_INT_EQ(req->check_steps[1], 5);
	CHECK(req->check_threshold == 0.25);
	char *a = ipc_task_request_to_json(req);
	REQUIRE(a);
	REQUIRE(parse_task(a, &back) == 0);
	CHECK(back->check_steps && back->check_steps[1] == 5 && back->check_threshold == 0.25);
	free(a);
	ipc_task_request_destroy(back);
	ipc_task_request_destroy(req);

	json = xasprintf("%s\"check\": {\"threshold\": 0.25, \"steps\": [3]}}", two);
	expect_error(json, -EINVAL, "check.steps: expected an array of 2 step indices");
	free(json);
	json = xasprintf("%s\"check\": {\"threshold\": 1.5, \"steps\": [3, 5]}}", two);
	expect_error(json, -EINVAL, "check.threshold: expected a number from 0 to 1");
	free(json);
	json = xasprintf("%s\"check\": {\"threshold\": 0, \"steps\": [3, -1]}}", two);
	expect_error(json, -EINVAL, "check.steps[1]: expected a step index");
	free(json);
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}],"
		     " \"check\": {\"threshold\": 0, \"steps\": [0]}}",
		     -EINVAL, "check: needs \"replay_of\"");
}

static void test_errors(void)
{
	expect_error("{\"script\": [", -EINVAL, "invalid JSON at line 1");
	expect_error("[]", -EINVAL, "expected an object");
	expect_error("{}", -EINVAL, "exactly one of");
	expect_error("{\"script\": [], \"instruction\": \"x\"}", -EINVAL, "exactly one of");
	expect_error("{\"script\": []}", -EINVAL, "script: expected a non-empty array");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1, \"y\": 1}], \"bogus\": 1}", -EINVAL,
		     "bogus: unknown field");
	expect_error("{\"script\": [{\"tool_name\": \"clik\", \"x\": 1, \"y\": 1}]}", -EINVAL,
		     "script[0].tool_name: unknown tool 'clik'");
	expect_error("{\"script\": [{\"x\": 1}]}", -EINVAL, "script[0].tool_name: missing");
	expect_error("{\"script\": [42]}", -EINVAL, "script[0]: expected an action object");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": \"1\", \"y\": 1}]}", -EINVAL,
		     "script[0].x: expected an integer");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1.5, \"y\": 1}]}", -EINVAL,
		     "script[0].x: expected an integer");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1}]}", -EINVAL,
		     "script[0].y: missing (required for 'click')");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1, \"y\": 1, \"key\": \"a\"}]}",
		     -EINVAL, "script[0].key: unknown field for tool 'click'");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1, \"y\": 1,"
		     " \"button\": \"left2\"}]}",
		     -EINVAL, "script[0].button: unknown value 'left2'");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1},"
		     " {\"tool_name\": \"wait\", \"duration\": 1},"
		     " {\"tool_name\": \"hotkey\", \"keys\": [\"ctrl\", \"ctr\"]}]}",
		     -EINVAL, "script[2].keys[1]: unknown key name 'ctr'");
	/* Text the display would refuse is a bad request, not a failed step later. */
	expect_error("{\"script\": [{\"tool_name\": \"write\", \"content\": \"ok\"},"
		     " {\"tool_name\": \"write\", \"content\": \"bell\\u0007\"}]}",
		     -EINVAL,
		     "script[1].content: control character U+0007 at byte 4 cannot be typed (only "
		     "newline and tab are)");
	{
		/* An answer is not typed: any text is fine. */
		struct ipc_task_request *ok = NULL;
		CHECK_INT_EQ(parse_task("{\"script\": [{\"tool_name\": \"answer\","
					" \"content\": \"bell\\u0007\"}]}",
					&ok),
			     0);
		ipc_task_request_destroy(ok);
	}
	expect_error("{\"script\": [{\"tool_name\": \"key_down\", \"key\": \"hyperdrive\"}]}", -EINVAL,
		     "script[0].key: unknown key name 'hyperdrive'");
	expect_error("{\"script\": [{\"tool_name\": \"hotkey\", \"keys\": []}]}", -EINVAL,
		     "script[0].keys: expected a non-empty array");
	expect_error("{\"script\": [{\"tool_name\": \"hotkey\", \"keys\": [\"a\", \"b\", \"c\","
		     " \"d\", \"e\", \"f\"]}]}",
		     -E2BIG, "script[0].keys: 6 keys exceed the limit of 5");
	expect_error("{\"script\": [{\"tool_name\": \"hotkey\", \"keys\": [\"a\"],"
		     " \"repeat_count\": 21}]}",
		     -EINVAL, "script[0].repeat_count: 21 is out of range 1..20");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 31}]}", -EINVAL,
		     "script[0].duration: 31 seconds is out of range");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 0}]}", -EINVAL,
		     "script[0].duration:");
	expect_error("{\"script\": [{\"tool_name\": \"scroll\", \"x\": 1, \"y\": 1,"
		     " \"direction\": \"down\", \"scroll_size\": 101}]}",
		     -EINVAL, "script[0].scroll_size: 101 is out of range 1..100");
	expect_error("{\"script\": [{\"tool_name\": \"scroll\", \"x\": 1, \"y\": 1}]}", -EINVAL,
		     "script[0].direction: missing");
	expect_error("{\"script\": [{\"tool_name\": \"write\", \"content\": \"a\\u0000b\"}]}", -EINVAL,
		     "invalid JSON at line 1 column 56: \\u0000 is not allowed");
	expect_error("{\"script\": [{\"tool_name\": \"write\", \"content\": 5}]}", -EINVAL,
		     "script[0].content: expected a string");
	expect_error("{\"script\": [{\"tool_name\": \"write\", \"content\": \"x\","
		     " \"press_enter\": 1}]}",
		     -EINVAL, "script[0].press_enter: expected true or false");
	/* Model coordinates stop at 1000, pixels at the X11 limit. */
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1001, \"y\": 1}],"
		     " \"coords\": \"model\"}",
		     -EINVAL, "script[0].x: 1001 is out of range 0..1000");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": -1, \"y\": 1}]}", -EINVAL,
		     "script[0].x: -1 is out of range 0..32767");
	expect_error("{\"script\": [{\"tool_name\": \"move\", \"x\": 1, \"y\": 1}],"
		     " \"coords\": \"inches\"}",
		     -EINVAL, "coords: expected \"pixels\" or \"model\"");
	expect_error("{\"script\": [{\"tool_name\": \"move\", \"x\": 1, \"y\": 1}],"
		     " \"max_steps\": 0}",
		     -EINVAL, "max_steps: 0 is out of range");
	expect_error("{\"script\": [{\"tool_name\": \"move\", \"x\": 1, \"y\": 1}],"
		     " \"dry_run\": \"yes\"}",
		     -EINVAL, "dry_run: expected true or false");
	expect_error("{\"script\": [{\"tool_name\": \"move\", \"x\": 1, \"y\": 1, \"x\": 2}]}", -EINVAL,
		     "invalid JSON");
	expect_error("{\"instruction\": \"\"}", -EINVAL, "instruction: expected a non-empty string");
	expect_error("{\"instruction\": \"x\", \"coords\": \"model\"}", -EINVAL, "coords: unknown field");
}

static void test_limits(void)
{
	/* One action over IPC_MAX_SCRIPT_ACTIONS: -E2BIG (the daemon's 413). */
	size_t n = IPC_MAX_SCRIPT_ACTIONS + 1;
	const char *one = "{\"tool_name\":\"move\",\"x\":1,\"y\":1},";
	char *json = malloc(n * strlen(one) + 32);
	REQUIRE(json);
	strcpy(json, "{\"script\":[");
	for (size_t i = 0; i < n; i++)
		strcat(json, one);
	json[strlen(json) - 1] = ']';
	strcat(json, "}");
	expect_error(json, -E2BIG, "script: 1001 actions exceed the limit of 1000");
	/* Exactly at the limit is fine. */
	char *last = strrchr(json, '{');
	strcpy(last - 1, "]}");
	struct ipc_task_request *req = NULL;
	CHECK_INT_EQ(parse_task(json, &req), 0);
	if (req)
		CHECK_INT_EQ(req->n_actions, IPC_MAX_SCRIPT_ACTIONS);
	ipc_task_request_destroy(req);
	free(json);

	size_t big = IPC_MAX_CONTENT_BYTES + 1;
	json = malloc(big + 64);
	REQUIRE(json);
	strcpy(json, "{\"script\":[{\"tool_name\":\"write\",\"content\":\"");
	size_t off = strlen(json);
	memset(json + off, 'a', big);
	strcpy(json + off + big, "\"}]}");
	expect_error(json, -E2BIG, "script[0].content: 65537 bytes exceed the limit of 65536");
	free(json);
}

static void test_action_request(void)
{
	struct ipc_task_request *req = NULL;
	const char *json = "{\"action\": {\"tool_name\": \"click\", \"x\": 500, \"y\": 500},"
			   " \"coords\": \"model\"}";
	REQUIRE(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)) == 0);
	CHECK_INT_EQ(req->n_actions, 1);
	CHECK_INT_EQ(req->coords, IPC_COORDS_MODEL);
	CHECK_INT_EQ(req->actions[0].x, 500);

	char *body = ipc_action_request_to_json(&req->actions[0], req->coords, true);
	REQUIRE(body);
	struct ipc_task_request *again = NULL;
	CHECK_INT_EQ(ipc_action_request_parse(body, strlen(body), &again, err, sizeof(err)), 0);
	if (again) {
		CHECK(again->options.dry_run);
		CHECK_INT_EQ(again->coords, IPC_COORDS_MODEL);
	}
	ipc_task_request_destroy(again);
	free(body);
	ipc_task_request_destroy(req);

	json = "{\"action\": {\"tool_name\": \"hotkey\", \"keys\": [\"ctr\"]}}";
	CHECK_INT_EQ(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "action.keys[0]: unknown key name 'ctr': did you mean 'ctrl'?");
	json = "{\"action\": {\"tool_name\": \"write\", \"content\": \"a\\u001bb\"}}";
	CHECK_INT_EQ(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "action.content: control character U+001B at byte 1 cannot be typed (only "
			  "newline and tab are)");
	json = "{\"tool_name\": \"click\", \"x\": 1, \"y\": 1}";
	CHECK_INT_EQ(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "tool_name: unknown field");
	/* require_focus, as for scripts (holoctl do --require-focus). */
	json = "{\"action\": {\"tool_name\": \"write\", \"content\": \"a\"}, \"require_focus\": true}";
	REQUIRE(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)) == 0);
	CHECK(req->options.require_focus);
	ipc_task_request_destroy(req);
	req = NULL;
	json = "{\"action\": {\"tool_name\": \"write\", \"content\": \"a\"}, \"require_focus\": 1}";
	CHECK_INT_EQ(ipc_action_request_parse(json, strlen(json), &req, err, sizeof(err)), -EINVAL);
	CHECK_STR_EQ(err, "require_focus: expected true or false");

	/* A single action on its own. */
	struct ipc_action a;
	json = "{\"tool_name\": \"write\", \"content\": \"x\", \"overwrite\": true}";
	REQUIRE(ipc_action_parse(json, strlen(json), IPC_COORDS_PIXELS, &a, err, sizeof(err)) == 0);
	CHECK(a.overwrite);
	char *s = ipc_action_to_json(&a);
	CHECK_STR_EQ(s, "{\"tool_name\":\"write\",\"content\":\"x\",\"press_enter\":false,"
			"\"overwrite\":true}");
	free(s);
	ipc_action_finish(&a);
	CHECK(a.content == NULL);
}

static void test_names_and_socket(void)
{
	for (int i = 0; i < IPC_TOOL_COUNT_; i++)
		CHECK_INT_EQ(ipc_tool_from_string(ipc_tool_to_string(i)), i);
	CHECK_INT_EQ(ipc_tool_from_string("Click"), -EINVAL);
	CHECK(ipc_tool_to_string(IPC_TOOL_COUNT_) == NULL);
	for (int i = 0; ipc_button_to_string((enum ipc_button)i); i++)
		CHECK_INT_EQ(ipc_button_from_string(ipc_button_to_string((enum ipc_button)i)), i);
	for (int i = 0; ipc_direction_to_string((enum ipc_direction)i); i++)
		CHECK_INT_EQ(ipc_direction_from_string(ipc_direction_to_string((enum ipc_direction)i)), i);
	CHECK_INT_EQ(ipc_button_from_string("Left"), -EINVAL);
	CHECK_INT_EQ(ipc_direction_from_string("sideways"), -EINVAL);
	for (int i = IPC_TASK_QUEUED; i <= IPC_TASK_INTERRUPTED; i++)
		CHECK_INT_EQ(ipc_task_status_from_string(ipc_task_status_to_string(i)), i);
	CHECK(!ipc_task_status_is_final(IPC_TASK_RUNNING));
	CHECK(ipc_task_status_is_final(IPC_TASK_INTERRUPTED));

	char *p = NULL;
	setenv(IPC_SOCKET_ENV, "/tmp/x/holod.sock", 1);
	CHECK_INT_EQ(ipc_socket_path(&p), 0);
	CHECK_STR_EQ(p, "/tmp/x/holod.sock");
	free(p);
	unsetenv(IPC_SOCKET_ENV);
	setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
	CHECK_INT_EQ(ipc_socket_path(&p), 0);
	CHECK_STR_EQ(p, "/run/user/4242/holod/holod.sock");
	free(p);
	char longdir[300];
	memset(longdir, 'a', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = '\0';
	setenv("XDG_RUNTIME_DIR", longdir, 1);
	CHECK_INT_EQ(ipc_socket_path(&p), -ENAMETOOLONG);
}

/* Mutated inputs (a fixed-seed xorshift, so a failure reproduces): the parser either accepts
 * (and then what it accepted round-trips) or refuses with a message; under ASan this is also
 * the memory-safety check of every path through it. */
static void test_mutations(void)
{
	const char *seed = "{\"script\": [{\"tool_name\": \"click\", \"x\": 10, \"y\": 20},"
			   " {\"tool_name\": \"hotkey\", \"keys\": [\"ctrl\", \"s\"]},"
			   " {\"tool_name\": \"write\", \"content\": \"abc\", \"overwrite\": true},"
			   " {\"tool_name\": \"scroll\", \"x\": 1, \"y\": 2, \"direction\": \"up\"},"
			   " {\"tool_name\": \"wait\", \"duration\": 2}], \"coords\": \"model\","
			   " \"max_steps\": 5}";
	const char alphabet[] = "{}[]\",:0123456789.-eE \\tnruxyfalse";
	size_t n = strlen(seed);
	char buf[512];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int accepted = 0, refused = 0;

	for (int iter = 0; iter < 20000; iter++) {
		memcpy(buf, seed, n + 1);
		size_t len = n;
		int edits = 1 + (int)(x % 4);
		for (int e = 0; e < edits && len > 1; e++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t pos = (size_t)(x >> 16) % len;
			switch (x % 3) {
			case 0: /* replace */
				buf[pos] = alphabet[(x >> 40) % (sizeof(alphabet) - 1)];
				break;
			case 1: /* delete */
				memmove(buf + pos, buf + pos + 1, len - pos);
				len--;
				break;
			default: /* truncate */
				len = pos + 1;
				buf[len] = '\0';
			}
		}
		struct ipc_task_request *req = NULL;
		err[0] = '\0';
		int r = ipc_task_request_parse(buf, len, &req, err, sizeof(err));
		if (r < 0) {
			refused++;
			if (!err[0] || req) {
				fprintf(stderr, "refused without a message: %s\n", buf);
				test_failures++;
			}
			continue;
		}
		accepted++;
		char *json = ipc_task_request_to_json(req);
		struct ipc_task_request *again = NULL;
		if (!json || ipc_task_request_parse(json, strlen(json), &again, err, sizeof(err)) < 0) {
			fprintf(stderr, "accepted but does not round-trip: %s -> %s (%s)\n", buf,
				json ? json : "(null)", err);
			test_failures++;
		}
		free(json);
		ipc_task_request_destroy(again);
		ipc_task_request_destroy(req);
	}
	/* The mutations must exercise both outcomes, or this test proves nothing. */
	CHECK(accepted > 100);
	CHECK(refused > 1000);
}

/* The script-only actions (issue 15): launch, wait_for, activate, grounded targets and
 * require_focus parse, round-trip, and name the field of each mistake. */
static void test_desktop_actions(void)
{
	const char *json =
		"{\"script\": ["
		"{\"tool_name\": \"launch\", \"command\": [\"mousepad\", \"/tmp/a b.txt\"],"
		" \"wait_window\": {\"class\": \"^Mousepad$\"}, \"timeout\": 2.5},"
		"{\"tool_name\": \"wait_for\", \"window\": {\"title\": \"Save\", \"instance\": \"^m\"}},"
		"{\"tool_name\": \"wait_for\", \"window_gone\": {\"title\": \"Save\"}, \"timeout\": 1},"
		"{\"tool_name\": \"wait_for\", \"focus\": {\"class\": \"XTerm\"}},"
		"{\"tool_name\": \"wait_for\", \"screen_stable\": {\"ms\": 500}},"
		"{\"tool_name\": \"wait_for\", \"region_changed\": {\"x\": 1, \"y\": 2, \"width\": 3,"
		" \"height\": 4}},"
		"{\"tool_name\": \"activate\", \"window\": {\"title\": \"Sav(e|ing)\"}},"
		"{\"tool_name\": \"click\", \"target\": \"the Save button\", \"button\": \"right\"},"
		"{\"tool_name\": \"drag\", \"target\": \"a\", \"target2\": \"b\"}"
		"], \"require_focus\": true}";
	struct ipc_task_request *req = NULL;

	REQUIRE(parse_task(json, &req) == 0);
	CHECK(req->options.require_focus);
	const struct ipc_action *a = req->actions;
	CHECK_INT_EQ(a[0].tool, IPC_TOOL_LAUNCH);
	CHECK_INT_EQ(a[0].argc, 2);
	CHECK_STR_EQ(a[0].argv[1], "/tmp/a b.txt");
	CHECK(a[0].argv[2] == NULL);
	CHECK(a[0].has_match);
	CHECK_STR_EQ(a[0].match.class_name, "^Mousepad$");
	CHECK_INT_EQ(a[0].timeout_ms, 2500);
	CHECK_INT_EQ(a[1].wait_kind, IPC_WAIT_WINDOW);
	CHECK_INT_EQ(a[1].timeout_ms, IPC_DEFAULT_WAIT_FOR_MS);
	CHECK_STR_EQ(a[1].match.instance, "^m");
	CHECK_INT_EQ(a[2].wait_kind, IPC_WAIT_WINDOW_GONE);
	CHECK_INT_EQ(a[3].wait_kind, IPC_WAIT_FOCUS);
	CHECK_INT_EQ(a[4].stable_ms, 500);
	CHECK_INT_EQ(a[5].rh, 4);
	CHECK_INT_EQ(a[6].tool, IPC_TOOL_ACTIVATE);
	CHECK_STR_EQ(a[7].target, "the Save button");
	CHECK(ipc_action_is_grounded(&a[7]));
	CHECK(!ipc_action_is_grounded(&a[1]));
	CHECK_STR_EQ(a[8].target2, "b");

	char *one = ipc_task_request_to_json(req);
	REQUIRE(one);
	struct ipc_task_request *again = NULL;
	REQUIRE(parse_task(one, &again) == 0);
	char *two = ipc_task_request_to_json(again);
	CHECK_STR_EQ(one, two);
	CHECK(strstr(one, "\"target\":\"the Save button\"") != NULL);
	CHECK(strstr(one, "\"require_focus\":true") != NULL);
	free(one);
	free(two);
	ipc_task_request_destroy(again);

	/* The matcher: unanchored regexes over title, class and instance, all present ones. */
	char e[256];
	struct ipc_window_matcher *mt = ipc_window_matcher_create(&a[1].match, e, sizeof(e));
	REQUIRE(mt);
	CHECK(ipc_window_matcher_test(mt, "Save As", "Mousepad", "mousepad"));
	CHECK(!ipc_window_matcher_test(mt, "Save As", "Mousepad", "xterm"));
	CHECK(!ipc_window_matcher_test(mt, "Open", "Mousepad", "mousepad"));
	CHECK(!ipc_window_matcher_test(mt, NULL, NULL, NULL));
	ipc_window_matcher_destroy(mt);
	char desc[128];
	CHECK_STR_EQ(ipc_window_match_describe(&a[1].match, desc, sizeof(desc)),
		     "title ~ \"Save\", instance ~ \"^m\"");
	ipc_task_request_destroy(req);

	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"window\": {\"title\": \"(Save\"}}]}",
		     -EINVAL,
		     "script[0].window.title: invalid regex at offset 5: missing closing parenthesis");
	expect_error("{\"script\": [{\"tool_name\": \"activate\", \"window\": {\"class\": \"[a\"}}]}",
		     -EINVAL, "script[0].window.class: invalid regex");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"timeout\": 3}]}", -EINVAL,
		     "script[0]: wait_for needs one condition");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"window\": {\"title\": \"a\"},"
		     " \"focus\": {\"title\": \"a\"}}]}",
		     -EINVAL, "script[0].focus: one condition per wait_for step");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"window\": {}}]}", -EINVAL,
		     "script[0].window: expected a window match");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"window\": {\"name\": \"a\"}}]}", -EINVAL,
		     "script[0].window.name: unknown field");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"screen_stable\": {\"ms\": 10}}]}",
		     -EINVAL, "script[0].screen_stable.ms: 10 is out of range 50..60000");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"region_changed\": {\"x\": 0,"
		     " \"y\": 0, \"width\": 0, \"height\": 5}}]}",
		     -EINVAL, "script[0].region_changed.width: 0 is out of range");
	expect_error("{\"script\": [{\"tool_name\": \"wait_for\", \"screen_stable\": {\"ms\": 100},"
		     " \"timeout\": 601}]}",
		     -EINVAL, "script[0].timeout: 601 seconds is out of range");
	expect_error("{\"script\": [{\"tool_name\": \"launch\"}]}", -EINVAL,
		     "script[0].command: missing (required for 'launch')");
	expect_error("{\"script\": [{\"tool_name\": \"launch\", \"command\": []}]}", -EINVAL,
		     "script[0].command: expected a non-empty array");
	expect_error("{\"script\": [{\"tool_name\": \"launch\", \"command\": [\"\"]}]}", -EINVAL,
		     "script[0].command: the program name is empty");
	expect_error("{\"script\": [{\"tool_name\": \"launch\", \"command\": [\"a\", 1]}]}", -EINVAL,
		     "script[0].command[1]: expected a string");
	expect_error("{\"script\": [{\"tool_name\": \"activate\"}]}", -EINVAL,
		     "script[0].window: missing (required for 'activate')");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"target\": \"OK\", \"x\": 1,"
		     " \"y\": 2}]}",
		     -EINVAL, "script[0].target: give either 'target' or 'x' and 'y'");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"target\": \"  \"}]}", -EINVAL,
		     "script[0].target: expected a description");
	expect_error("{\"script\": [{\"tool_name\": \"drag\", \"target\": \"a\", \"x2\": 1,"
		     " \"y2\": 1}]}",
		     -EINVAL, "script[0].target2: missing: a drag takes both");
	expect_error("{\"script\": [{\"tool_name\": \"triple_click\", \"target\": \"a\"}]}", -EINVAL,
		     "script[0].target: unknown field for tool 'triple_click'");
	expect_error("{\"script\": [{\"tool_name\": \"click\"}]}", -EINVAL,
		     "script[0].x: missing (required for 'click')");
	expect_error("{\"instruction\": \"x\", \"require_focus\": true}", -EINVAL,
		     "require_focus: unknown field");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}],"
		     " \"require_focus\": 1}",
		     -EINVAL, "require_focus: expected true or false");

	/* Limits: 413. */
	char big[IPC_MAX_TARGET_BYTES + 128];
	snprintf(big, sizeof(big), "{\"script\": [{\"tool_name\": \"move\", \"target\": \"%0*d\"}]}",
		 IPC_MAX_TARGET_BYTES + 1, 0);
	expect_error(big, -E2BIG, "script[0].target: 513 bytes exceed the limit of 512");
	char *many = xasprintf("{\"script\": [{\"tool_name\": \"launch\", \"command\": [\"a\"%s]}]}",
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\""
			       ",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\",\"b\"");
	expect_error(many, -E2BIG, "script[0].command: 65 arguments exceed the limit of 64");
	free(many);
}

/* "takeover" (issue 32): pause, ignore or cancel by name, for scripts and instructions, kept
 * in the spec; absent: the daemon's default; anything else is refused naming them. */
static void test_takeover(void)
{
	static const char *const names[] = {"pause", "ignore", "cancel"};
	static const enum ipc_takeover modes[] = {IPC_TAKEOVER_PAUSE, IPC_TAKEOVER_IGNORE,
						  IPC_TAKEOVER_CANCEL};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		for (int script = 0; script < 2; script++) {
			struct ipc_task_request *req = NULL, *back = NULL;
			char *json = xasprintf(
				script ? "{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], "
					 "\"takeover\": \"%s\"}" :
					 "{\"instruction\": \"x\", \"takeover\": \"%s\"}",
				names[i]);
			REQUIRE(parse_task(json, &req) == 0);
			CHECK_INT_EQ(req->options.takeover, modes[i]);
			CHECK_STR_EQ(ipc_takeover_to_string(modes[i]), names[i]);
			char *a = ipc_task_request_to_json(req);
			REQUIRE(a && parse_task(a, &back) == 0);
			CHECK_INT_EQ(back->options.takeover, modes[i]);
			free(a);
			free(json);
			ipc_task_request_destroy(back);
			ipc_task_request_destroy(req);
		}
	struct ipc_task_request *req = NULL;
	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.takeover, IPC_TAKEOVER_DEFAULT);
	ipc_task_request_destroy(req);
	CHECK(ipc_takeover_to_string(IPC_TAKEOVER_DEFAULT) == NULL);
	CHECK_INT_EQ(ipc_takeover_from_string("resume"), -EINVAL);
	expect_error("{\"instruction\": \"x\", \"takeover\": \"stop\"}", -EINVAL,
		     "takeover: expected \"pause\", \"ignore\" or \"cancel\"");
	expect_error("{\"instruction\": \"x\", \"takeover\": true}", -EINVAL,
		     "takeover: expected \"pause\", \"ignore\" or \"cancel\"");
}

/* "history": the three modes by name, kept in the spec; anything else is refused naming them. */
static void test_history(void)
{
	static const char *const names[] = {"rolling", "persistent", "window"};
	static const enum ipc_history modes[] = {IPC_HISTORY_ROLLING, IPC_HISTORY_PERSISTENT,
						 IPC_HISTORY_WINDOW};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		struct ipc_task_request *req = NULL, *back = NULL;
		char *json = xasprintf("{\"instruction\": \"x\", \"history\": \"%s\"}", names[i]);
		REQUIRE(parse_task(json, &req) == 0);
		CHECK_INT_EQ(req->options.history, modes[i]);
		CHECK_STR_EQ(ipc_history_to_string(modes[i]), names[i]);
		char *a = ipc_task_request_to_json(req);
		REQUIRE(a && parse_task(a, &back) == 0);
		CHECK_INT_EQ(back->options.history, modes[i]);
		free(a);
		free(json);
		ipc_task_request_destroy(back);
		ipc_task_request_destroy(req);
	}
	struct ipc_task_request *req = NULL;
	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.history, IPC_HISTORY_DEFAULT);
	ipc_task_request_destroy(req);
	CHECK(ipc_history_to_string(IPC_HISTORY_DEFAULT) == NULL);
	expect_error("{\"instruction\": \"x\", \"history\": \"roll\"}", -EINVAL,
		     "history: expected \"rolling\", \"persistent\" or \"window\"");
}

/* "policy_format": holo3 or holo-nano by name, kept in the spec; absent: the daemon's default;
 * an unknown name is refused naming the two; instructions only. */
static void test_policy_format(void)
{
	static const char *const names[] = {"holo3", "holo-nano"};
	static const enum ipc_policy_format fmts[] = {IPC_POLICY_FORMAT_HOLO3, IPC_POLICY_FORMAT_HOLO_NANO};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		struct ipc_task_request *req = NULL, *back = NULL;
		char *json = xasprintf("{\"instruction\": \"x\", \"policy_format\": \"%s\"}", names[i]);
		REQUIRE(parse_task(json, &req) == 0);
		CHECK_INT_EQ(req->options.policy_format, fmts[i]);
		CHECK_STR_EQ(ipc_policy_format_to_string(fmts[i]), names[i]);
		char *a = ipc_task_request_to_json(req);
		REQUIRE(a && parse_task(a, &back) == 0);
		CHECK_INT_EQ(back->options.policy_format, fmts[i]);
		free(a);
		free(json);
		ipc_task_request_destroy(back);
		ipc_task_request_destroy(req);
	}
	struct ipc_task_request *req = NULL;
	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.policy_format, IPC_POLICY_FORMAT_DEFAULT);
	ipc_task_request_destroy(req);
	CHECK(ipc_policy_format_to_string(IPC_POLICY_FORMAT_DEFAULT) == NULL);
	expect_error("{\"instruction\": \"x\", \"policy_format\": \"holo1\"}", -EINVAL,
		     "policy_format: expected \"holo3\" or \"holo-nano\"");
	expect_error("{\"instruction\": \"x\", \"policy_format\": 3}", -EINVAL, "policy_format: expected");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], "
		     "\"policy_format\": \"holo3\"}",
		     -EINVAL, "policy_format: unknown field");
}

/* "thinking" (true/false, kept as on/off, absent: the daemon's default) and "thinking_tokens"
 * (1..IPC_MAX_THINKING_TOKENS) on instructions only. */
static void test_thinking(void)
{
	struct ipc_task_request *req = NULL, *back = NULL;

	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.thinking, IPC_THINKING_DEFAULT);
	CHECK_INT_EQ(req->options.thinking_tokens, 0);
	ipc_task_request_destroy(req);
	for (int on = 0; on < 2; on++) {
		char *json = xasprintf("{\"instruction\": \"x\", \"thinking\": %s, "
				       "\"thinking_tokens\": 300}",
				       on ? "true" : "false");
		REQUIRE(parse_task(json, &req) == 0);
		CHECK_INT_EQ(req->options.thinking, on ? IPC_THINKING_ON : IPC_THINKING_OFF);
		CHECK_INT_EQ(req->options.thinking_tokens, 300);
		char *a = ipc_task_request_to_json(req);
		REQUIRE(a && parse_task(a, &back) == 0);
		CHECK_INT_EQ(back->options.thinking, req->options.thinking);
		CHECK_INT_EQ(back->options.thinking_tokens, 300);
		free(a);
		free(json);
		ipc_task_request_destroy(back);
		ipc_task_request_destroy(req);
	}
	expect_error("{\"instruction\": \"x\", \"thinking\": \"on\"}", -EINVAL,
		     "thinking: expected true or false");
	expect_error("{\"instruction\": \"x\", \"thinking_tokens\": 0}", -EINVAL, "thinking_tokens");
	expect_error("{\"instruction\": \"x\", \"thinking_tokens\": 65537}", -EINVAL, "thinking_tokens");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], \"thinking\": true}",
		     -EINVAL, "thinking: unknown field");
}

/* "jump_forward" (true/false, kept; absent: the daemon's default) on instructions only. */
static void test_jump_forward(void)
{
	struct ipc_task_request *req = NULL, *back = NULL;

	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.jump_forward, IPC_SWITCH_DEFAULT);
	char *a = ipc_task_request_to_json(req);
	CHECK(a && !strstr(a, "jump_forward"));
	free(a);
	ipc_task_request_destroy(req);
	for (int on = 0; on < 2; on++) {
		char *json =
			xasprintf("{\"instruction\": \"x\", \"jump_forward\": %s}", on ? "true" : "false");
		REQUIRE(parse_task(json, &req) == 0);
		CHECK_INT_EQ(req->options.jump_forward, on ? IPC_SWITCH_ON : IPC_SWITCH_OFF);
		a = ipc_task_request_to_json(req);
		REQUIRE(a && parse_task(a, &back) == 0);
		CHECK_INT_EQ(back->options.jump_forward, req->options.jump_forward);
		free(a);
		free(json);
		ipc_task_request_destroy(back);
		ipc_task_request_destroy(req);
	}
	expect_error("{\"instruction\": \"x\", \"jump_forward\": 1}", -EINVAL,
		     "jump_forward: expected true or false");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], "
		     "\"jump_forward\": true}",
		     -EINVAL, "jump_forward: unknown field");
}

/* "stuck_warn" and "stuck_stop" (0: off, ..IPC_MAX_STUCK_STEPS; absent: -1, the daemon's
 * default) on instructions only; the status "stuck" is final. */
static void test_stuck(void)
{
	struct ipc_task_request *req = NULL, *back = NULL;

	REQUIRE(parse_task("{\"instruction\": \"x\"}", &req) == 0);
	CHECK_INT_EQ(req->options.stuck_warn, -1);
	CHECK_INT_EQ(req->options.stuck_stop, -1);
	char *a = ipc_task_request_to_json(req);
	CHECK(a && !strstr(a, "stuck"));
	free(a);
	ipc_task_request_destroy(req);
	REQUIRE(parse_task("{\"instruction\": \"x\", \"stuck_warn\": 0, \"stuck_stop\": 1000}", &req) == 0);
	CHECK_INT_EQ(req->options.stuck_warn, 0);
	CHECK_INT_EQ(req->options.stuck_stop, 1000);
	a = ipc_task_request_to_json(req);
	REQUIRE(a && parse_task(a, &back) == 0);
	CHECK_INT_EQ(back->options.stuck_warn, 0);
	CHECK_INT_EQ(back->options.stuck_stop, 1000);
	free(a);
	ipc_task_request_destroy(back);
	ipc_task_request_destroy(req);
	expect_error("{\"instruction\": \"x\", \"stuck_stop\": 1001}", -EINVAL, "stuck_stop");
	expect_error("{\"instruction\": \"x\", \"stuck_warn\": -1}", -EINVAL, "stuck_warn");
	expect_error("{\"script\": [{\"tool_name\": \"wait\", \"duration\": 1}], "
		     "\"stuck_warn\": 2}",
		     -EINVAL, "stuck_warn: unknown field");
	CHECK_STR_EQ(ipc_task_status_to_string(IPC_TASK_STUCK), "stuck");
	CHECK_INT_EQ(ipc_task_status_from_string("stuck"), IPC_TASK_STUCK);
	CHECK(ipc_task_status_is_final(IPC_TASK_STUCK));
}

/* The holo-nano harness's actions: hold_and_tap_key, drag_to, update_plan parse, keep every
 * member through the serializer, and bad input names the field and the limit. */
static void test_nano_actions(void)
{
	const char *json =
		"{\"script\": ["
		"{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"ctrl\", \"shift\"],"
		" \"tap_keys\": [\"tab\", \"tab\", \"a\"]},"
		"{\"tool_name\": \"drag_to\", \"element\": \"the bin\", \"x\": 700, \"y\": 20},"
		"{\"tool_name\": \"update_plan\", \"goals\": [{\"title\": \"Open the file\","
		" \"status\": \"done\"}, {\"status\": \"running\", \"title\": \"Save it\"},"
		" {\"title\": \"Close\", \"status\": \"todo\"}, {\"title\": \"x\", \"status\": \"failed\"}]}"
		"], \"coords\": \"model\"}";
	struct ipc_task_request *req = NULL;

	REQUIRE(parse_task(json, &req) == 0);
	CHECK_INT_EQ(req->n_actions, 3);
	const struct ipc_action *a = req->actions;
	CHECK_INT_EQ(a[0].tool, IPC_TOOL_HOLD_AND_TAP_KEY);
	CHECK_INT_EQ(a[0].n_hold_keys, 2);
	CHECK_STR_EQ(a[0].hold_keys[1], "shift");
	CHECK_INT_EQ(a[0].n_tap_keys, 3);
	CHECK_STR_EQ(a[0].tap_keys[2], "a");
	CHECK_INT_EQ(a[1].tool, IPC_TOOL_DRAG_TO);
	CHECK(ipc_tool_has_point(IPC_TOOL_DRAG_TO));
	CHECK_STR_EQ(a[1].element, "the bin");
	CHECK_INT_EQ(a[1].x, 700);
	CHECK_INT_EQ(a[2].tool, IPC_TOOL_UPDATE_PLAN);
	CHECK_INT_EQ(a[2].n_goals, 4);
	CHECK_STR_EQ(a[2].goals[1].title, "Save it");
	CHECK_INT_EQ(a[2].goals[1].status, IPC_GOAL_RUNNING);
	CHECK_INT_EQ(a[2].goals[3].status, IPC_GOAL_FAILED);
	CHECK_STR_EQ(ipc_tool_to_string(IPC_TOOL_HOLD_AND_TAP_KEY), "hold_and_tap_key");
	CHECK_INT_EQ(ipc_tool_from_string("drag_to"), IPC_TOOL_DRAG_TO);
	CHECK_INT_EQ(ipc_tool_from_string("update_plan"), IPC_TOOL_UPDATE_PLAN);
	CHECK_STR_EQ(ipc_goal_status_to_string(IPC_GOAL_TODO), "todo");
	CHECK(ipc_goal_status_to_string((enum ipc_goal_status)4) == NULL);
	CHECK_INT_EQ(ipc_goal_status_from_string("started"), -EINVAL);

	char *s = ipc_action_to_json(&a[0]);
	CHECK_STR_EQ(s, "{\"tool_name\":\"hold_and_tap_key\",\"hold_keys\":[\"ctrl\",\"shift\"],"
			"\"tap_keys\":[\"tab\",\"tab\",\"a\"]}");
	free(s);
	s = ipc_action_to_json(&a[1]);
	CHECK_STR_EQ(s, "{\"tool_name\":\"drag_to\",\"element\":\"the bin\",\"x\":700,\"y\":20}");
	free(s);
	s = ipc_action_to_json(&a[2]);
	CHECK_STR_EQ(s, "{\"tool_name\":\"update_plan\",\"goals\":[{\"title\":\"Open the file\","
			"\"status\":\"done\"},{\"title\":\"Save it\",\"status\":\"running\"},"
			"{\"title\":\"Close\",\"status\":\"todo\"},{\"title\":\"x\",\"status\":"
			"\"failed\"}]}");
	free(s);
	char *x = ipc_task_request_to_json(req);
	REQUIRE(x);
	struct ipc_task_request *again = NULL;
	REQUIRE(parse_task(x, &again) == 0);
	char *y = ipc_task_request_to_json(again);
	CHECK_STR_EQ(x, y);
	free(x);
	free(y);
	ipc_task_request_destroy(again);
	ipc_task_request_destroy(req);

	/* Bad input. */
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"tap_keys\": [\"a\"]}]}", -EINVAL,
		     "script[0].hold_keys: missing (required for 'hold_and_tap_key')");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"ctrl\"]}]}",
		     -EINVAL, "script[0].tap_keys: missing (required for 'hold_and_tap_key')");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [],"
		     " \"tap_keys\": [\"a\"]}]}",
		     -EINVAL, "script[0].hold_keys: expected a non-empty array of key names");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"a\","
		     " \"b\", \"c\", \"d\"], \"tap_keys\": [\"a\"]}]}",
		     -E2BIG, "script[0].hold_keys: 4 keys exceed the limit of 3");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"alt\"],"
		     " \"tap_keys\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\"]}]}",
		     -E2BIG, "script[0].tap_keys: 6 keys exceed the limit of 5");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"alt\"],"
		     " \"tap_keys\": [\"tab\", \"tabb\"]}]}",
		     -EINVAL, "script[0].tap_keys[1]: unknown key name 'tabb'");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [5],"
		     " \"tap_keys\": [\"a\"]}]}",
		     -EINVAL, "script[0].hold_keys[0]: expected a string");
	expect_error("{\"script\": [{\"tool_name\": \"hold_and_tap_key\", \"hold_keys\": [\"alt\"],"
		     " \"tap_keys\": [\"a\"], \"keys\": [\"a\"]}]}",
		     -EINVAL, "script[0].keys: unknown field for tool 'hold_and_tap_key'");
	expect_error("{\"script\": [{\"tool_name\": \"drag_to\", \"x\": 1}]}", -EINVAL,
		     "script[0].y: missing (required for 'drag_to')");
	expect_error("{\"script\": [{\"tool_name\": \"drag_to\", \"x\": 1, \"y\": 1001}],"
		     " \"coords\": \"model\"}",
		     -EINVAL, "script[0].y: 1001 is out of range 0..1000");
	expect_error("{\"script\": [{\"tool_name\": \"drag_to\", \"x\": 1, \"y\": 1, \"x2\": 3}]}", -EINVAL,
		     "script[0].x2: unknown field for tool 'drag_to'");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\"}]}", -EINVAL,
		     "script[0].goals: missing (required for 'update_plan')");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": []}]}", -EINVAL,
		     "script[0].goals: expected a non-empty array of goals");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [\"open\"]}]}", -EINVAL,
		     "script[0].goals[0]: expected a goal");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [{\"title\": \"a\"}]}]}",
		     -EINVAL, "script[0].goals[0].status: missing");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [{\"status\": \"todo\"}]}]}",
		     -EINVAL, "script[0].goals[0].title: missing");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [{\"title\": \"a\","
		     " \"status\": \"todo\", \"why\": 1}]}]}",
		     -EINVAL, "script[0].goals[0].why: unknown field");
	expect_error("{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [{\"title\": \"a\","
		     " \"status\": 3}]}]}",
		     -EINVAL, "script[0].goals[0].status: expected one of todo, running, done, failed");

	/* The limits: 20 goals, IPC_MAX_GOAL_TITLE_BYTES a title. */
	char *big = xmalloc(IPC_MAX_GOAL_TITLE_BYTES + 4096);
	size_t off = (size_t)sprintf(big, "{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": [");
	for (int i = 0; i < IPC_MAX_PLAN_GOALS + 1; i++)
		off += (size_t)sprintf(big + off, "%s{\"title\": \"g\", \"status\": \"todo\"}", i ? ", " : "");
	sprintf(big + off, "]}]}");
	expect_error(big, -E2BIG, "script[0].goals: 21 goals exceed the limit of 20");
	off = (size_t)sprintf(big, "{\"script\": [{\"tool_name\": \"update_plan\", \"goals\": "
				   "[{\"status\": \"todo\", \"title\": \"");
	memset(big + off, 'a', IPC_MAX_GOAL_TITLE_BYTES + 1);
	off += IPC_MAX_GOAL_TITLE_BYTES + 1;
	sprintf(big + off, "\"}]}]}");
	expect_error(big, -E2BIG, "script[0].goals[0].title: 513 bytes exceed the limit of 512");
	free(big);
}

/* The tool table (ipc/tools.c) is what the parser accepts: every member it lists for a tool is
 * a member the parser reads for that tool, and the formats' views name only such members. */
static void test_tool_table(void)
{
	char msg[512], json[256];
	struct ipc_action a;

	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		const struct ipc_tool_info *info = ipc_tool_info((enum ipc_tool)t);
		REQUIRE(info && info->name && info->fields);
		CHECK_INT_EQ(ipc_tool_from_string(info->name), t);
		for (const char *p = info->fields; *p;) {
			size_t n = strcspn(p, " ");
			/* a value of the wrong type for every member: the parser names the member's
			 * value, never "unknown field" */
			snprintf(json, sizeof(json), "{\"tool_name\": \"%s\", \"%.*s\": {\"\": []}}",
				 info->name, (int)n, p);
			int r = ipc_action_parse(json, strlen(json), IPC_COORDS_PIXELS, &a, msg, sizeof(msg));
			if (r == 0)
				ipc_action_finish(&a);
			if (strstr(msg, "unknown field for tool")) {
				fprintf(stderr, "%s: %s\n", json, msg);
				test_failures++;
			}
			p += n;
			p += strspn(p, " ");
		}
		CHECK(!ipc_tool_has_field((enum ipc_tool)t, "bogus"));
		CHECK(ipc_tool_has_field((enum ipc_tool)t, "tool_name"));
	}
	for (int f = IPC_POLICY_FORMAT_HOLO3; f <= IPC_POLICY_FORMAT_HOLO_NANO; f++) {
		const struct ipc_model_tool *m;
		size_t n = 0;
		for (; (m = ipc_model_tool((enum ipc_policy_format)f, n)); n++) {
			CHECK(m->name && m->help && m->layout.n_args > 0);
			for (size_t i = 0; i < m->layout.n_args; i++)
				CHECK(ipc_tool_has_field(m->tool, m->layout.args[i].name));
		}
		CHECK_INT_EQ(n, f == IPC_POLICY_FORMAT_HOLO3 ? IPC_TOOL_MODEL_COUNT : 13);
	}
	CHECK(!ipc_model_tool(IPC_POLICY_FORMAT_DEFAULT, 0));
	CHECK(ipc_tool_has_point(IPC_TOOL_DRAG_TO) && !ipc_tool_has_point(IPC_TOOL_WRITE));

	/* The clients' view (holoctl mcp's action tools): every tool but the model's own
	 * (answer, ask_user, update_plan) is offered, its schema a JSON object whose members the
	 * parser reads for that tool, the required ones among them. */
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		const struct ipc_tool_client *c = &ipc_tool_info((enum ipc_tool)t)->client;
		bool own = t == IPC_TOOL_ANSWER || t == IPC_TOOL_ASK_USER || t == IPC_TOOL_UPDATE_PLAN;
		json_t *props, *req, *v;
		const char *key;
		size_t i;

		CHECK_INT_EQ(c->title == NULL, own);
		if (!c->title) {
			CHECK(!c->description && !c->properties && !c->required);
			continue;
		}
		CHECK(c->description && c->description[0]);
		props = json_loads(c->properties, 0, NULL);
		if (!json_is_object(props) || json_object_size(props) == 0) {
			fprintf(stderr, "%s: the client schema's properties are no JSON object\n",
				ipc_tool_to_string((enum ipc_tool)t));
			test_failures++;
		}
		json_object_foreach(props, key, v)
		{
			if (!ipc_tool_has_field((enum ipc_tool)t, key) || !json_is_object(v) ||
			    strcmp(key, "tool_name") == 0) {
				fprintf(stderr, "%s: the client schema's '%s' is no member it takes\n",
					ipc_tool_to_string((enum ipc_tool)t), key);
				test_failures++;
			}
		}
		req = c->required ? json_loads(c->required, 0, NULL) : json_array();
		CHECK(json_is_array(req));
		json_array_foreach(req, i, v)
			CHECK(json_is_string(v) && json_object_get(props, json_string_value(v)));
		json_decref(req);
		json_decref(props);
	}
}

/* "did you mean" for a misspelt tool, member or key name; nothing for a word far from all. */
static void test_did_you_mean(void)
{
	expect_error("{\"script\": [{\"tool_name\": \"clik\", \"x\": 1, \"y\": 1}]}", -EINVAL,
		     "script[0].tool_name: unknown tool 'clik': did you mean 'click'? (expected one "
		     "of click, double_click,");
	expect_error("{\"script\": [{\"tool_name\": \"dobule_click\", \"x\": 1, \"y\": 1}]}", -EINVAL,
		     "script[0].tool_name: unknown tool 'dobule_click': did you mean 'double_click'?");
	expect_error("{\"script\": [{\"tool_name\": \"fly\"}]}", -EINVAL,
		     "script[0].tool_name: unknown tool 'fly' (expected one of");
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1, \"y\": 1, "
		     "\"buton\": \"left\"}]}",
		     -EINVAL, "script[0].buton: unknown field for tool 'click': did you mean 'button'?");
	/* a member of another tool is no suggestion for this one */
	expect_error("{\"script\": [{\"tool_name\": \"click\", \"x\": 1, \"y\": 1, "
		     "\"key\": \"a\"}]}",
		     -EINVAL, "script[0].key: unknown field for tool 'click'");
	expect_error("{\"script\": [{\"tool_name\": \"hotkey\", \"keys\": [\"ctrl\", "
		     "\"escpae\"]}]}",
		     -EINVAL, "script[0].keys[1]: unknown key name 'escpae': did you mean 'escape'?");
	expect_error("{\"script\": [{\"tool_name\": \"key_down\", \"key\": \"hyperdrive\"}]}", -EINVAL,
		     "script[0].key: unknown key name 'hyperdrive'");
}

int main(void)
{
	test_tool_table();
	test_did_you_mean();
	test_nano_actions();
	test_history();
	test_takeover();
	test_thinking();
	test_jump_forward();
	test_stuck();
	test_policy_format();
	test_desktop_actions();
	test_script_ok();
	test_errors();
	test_replay_of();
	test_display();
	test_sampling();
	test_replay_check();
	test_limits();
	test_action_request();
	test_names_and_socket();
	test_mutations();
	return test_exit();
}
