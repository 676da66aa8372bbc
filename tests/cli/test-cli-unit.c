/* holoctl without a daemon: arguments -> request bodies (the `do` mapping, run options, script
 * files), usage errors, tables and formatting, and what the user sees when holod is not there. */
#include "cli.h"
#include "common.h"
#include "holod-config.h"
#include "http.h"
#include "ipc.h"
#include "mcp.h"
#include "table.h"
#include "test.h"

#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

/* A context whose output and errors land in memory. */
struct capture {
	struct cli_context ctx;
	char *out, *err;
	size_t out_len, err_len;
};

static void capture_init(struct capture *c)
{
	*c = (struct capture){0};
	c->ctx.out = open_memstream(&c->out, &c->out_len);
	c->ctx.err = open_memstream(&c->err, &c->err_len);
	REQUIRE(c->ctx.out && c->ctx.err);
}

static void capture_flush(struct capture *c)
{
	fflush(c->ctx.out);
	fflush(c->ctx.err);
}

static void capture_finish(struct capture *c)
{
	fclose(c->ctx.out);
	fclose(c->ctx.err);
	free(c->out);
	free(c->err);
	free(c->ctx.socket_owned);
}

/* Runs `holoctl do ARGS...` up to building the request; returns the exit status and the body
 * parsed back into JSON (NULL when none). */
static int build_do(json_t **ret_body, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	struct capture c;
	char *body = NULL;
	int r;

	argv[argc++] = "do";
	va_start(ap, ret_body);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;

	capture_init(&c);
	r = cli_do_build_request(&c.ctx, argc, argv, &body);
	capture_flush(&c);
	*ret_body = body ? json_loads(body, 0, NULL) : NULL;
	if (body)
		REQUIRE(*ret_body);
	free(body);
	capture_finish(&c);
	return r;
}

static json_t *action_of(json_t *body)
{
	return json_object_get(body, "action");
}

static const char *str_at(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static long long int_at(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -999;
}

static void test_do_mapping(void)
{
	json_t *b;

	CHECK_INT_EQ(build_do(&b, "click", "640", "400", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "click");
	CHECK_INT_EQ(int_at(action_of(b), "x"), 640);
	CHECK_INT_EQ(int_at(action_of(b), "y"), 400);
	CHECK_STR_EQ(str_at(action_of(b), "button"), "left");
	CHECK_STR_EQ(str_at(b, "coords"), "pixels");
	CHECK(json_is_false(json_object_get(b, "dry_run")));
	CHECK(!json_object_get(b, "settle_ms"));
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "right_click", "1", "2", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "click");
	CHECK_STR_EQ(str_at(action_of(b), "button"), "right");
	json_decref(b);

	/* Options anywhere after the tool, and the shared ones set on the context. */
	CHECK_INT_EQ(build_do(&b, "click", "--button", "middle", "5", "6", "--element", "OK", "--coords",
			      "model", "--dry-run", "--settle-ms", "250", NULL),
		     0);
	CHECK_STR_EQ(str_at(action_of(b), "button"), "middle");
	CHECK_STR_EQ(str_at(action_of(b), "element"), "OK");
	CHECK_STR_EQ(str_at(b, "coords"), "model");
	CHECK(json_is_true(json_object_get(b, "dry_run")));
	CHECK_INT_EQ(int_at(b, "settle_ms"), 250);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "double_click", "7", "8", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "double_click");
	CHECK(!json_object_get(action_of(b), "button"));
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "drag", "10", "20", "300", "40", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "drag");
	CHECK_INT_EQ(int_at(action_of(b), "x2"), 300);
	CHECK_INT_EQ(int_at(action_of(b), "y2"), 40);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "scroll", "100", "200", "down", "3", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "direction"), "down");
	CHECK_INT_EQ(int_at(action_of(b), "scroll_size"), 3);
	json_decref(b);
	CHECK_INT_EQ(build_do(&b, "scroll", "100", "200", "left", NULL), 0);
	CHECK_INT_EQ(int_at(action_of(b), "scroll_size"), IPC_DEFAULT_SCROLL_SIZE);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "write", "hello world", "--enter", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "content"), "hello world");
	CHECK(json_is_true(json_object_get(action_of(b), "press_enter")));
	CHECK(json_is_false(json_object_get(action_of(b), "overwrite")));
	json_decref(b);
	/* After --, text that looks like an option is text. */
	CHECK_INT_EQ(build_do(&b, "write", "--", "--json", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "content"), "--json");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "hotkey", "ctrl+shift+t", NULL), 0);
	json_t *keys = json_object_get(action_of(b), "keys");
	CHECK_INT_EQ(json_array_size(keys), 3);
	CHECK_STR_EQ(json_string_value(json_array_get(keys, 0)), "ctrl");
	CHECK_STR_EQ(json_string_value(json_array_get(keys, 1)), "shift");
	CHECK_STR_EQ(json_string_value(json_array_get(keys, 2)), "t");
	CHECK_INT_EQ(int_at(action_of(b), "repeat_count"), 1);
	json_decref(b);
	CHECK_INT_EQ(build_do(&b, "hotkey", "ctrl", "s", "--repeat", "3", NULL), 0);
	keys = json_object_get(action_of(b), "keys");
	CHECK_INT_EQ(json_array_size(keys), 2);
	CHECK_STR_EQ(json_string_value(json_array_get(keys, 1)), "s");
	CHECK_INT_EQ(int_at(action_of(b), "repeat_count"), 3);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "key_down", "shift", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "key_down");
	CHECK_STR_EQ(str_at(action_of(b), "key"), "shift");
	json_decref(b);
	CHECK_INT_EQ(build_do(&b, "key_up", "shift", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "key_up");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "wait", "2", NULL), 0);
	CHECK_NEAR(json_number_value(json_object_get(action_of(b), "duration")), 2.0, 1e-9);
	json_decref(b);
	CHECK_INT_EQ(build_do(&b, "wait", "0.5", NULL), 0);
	CHECK_NEAR(json_number_value(json_object_get(action_of(b), "duration")), 0.5, 1e-9);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "move", "0", "0", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "tool_name"), "move");
	json_decref(b);

	/* --help prints the command's help and builds nothing. */
	struct capture c;
	char *argv[] = {"do", "--help", NULL};
	char *body = (char *)"sentinel";
	capture_init(&c);
	CHECK_INT_EQ(cli_do_build_request(&c.ctx, 2, argv, &body), 0);
	capture_flush(&c);
	CHECK(body == NULL);
	CHECK(c.out && strstr(c.out, "Usage: holoctl do"));
	capture_finish(&c);
}

/* Each bad command line fails with the usage status, sends nothing, and says what is wrong. */
static void expect_do_error(const char *needle, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	struct capture c;
	char *body = NULL;

	argv[argc++] = "do";
	va_start(ap, needle);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;

	capture_init(&c);
	int r = cli_do_build_request(&c.ctx, argc, argv, &body);
	capture_flush(&c);
	if (r != CLI_EXIT_USAGE || body || !c.err || !strstr(c.err, needle)) {
		fprintf(stderr, "do %s ...: status %d, stderr \"%s\", wanted \"%s\"\n",
			argv[1] ? argv[1] : "", r, c.err ? c.err : "", needle);
		test_failures++;
	}
	free(body);
	capture_finish(&c);
}

/* The holo-nano format's actions through holoctl do. */
static void test_do_nano(void)
{
	json_t *b, *a;

	CHECK_INT_EQ(build_do(&b, "hold_and_tap_key", "ctrl+shift", "tab", "a", NULL), 0);
	a = action_of(b);
	CHECK_STR_EQ(str_at(a, "tool_name"), "hold_and_tap_key");
	CHECK_INT_EQ(json_array_size(json_object_get(a, "hold_keys")), 2);
	CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(a, "hold_keys"), 1)), "shift");
	CHECK_INT_EQ(json_array_size(json_object_get(a, "tap_keys")), 2);
	CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(a, "tap_keys"), 1)), "a");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "drag_to", "300", "40", "--element", "the bin", NULL), 0);
	a = action_of(b);
	CHECK_STR_EQ(str_at(a, "tool_name"), "drag_to");
	CHECK_INT_EQ(int_at(a, "x"), 300);
	CHECK_STR_EQ(str_at(a, "element"), "the bin");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "update_plan", "done:Open it", "running:Save: now", NULL), 0);
	a = action_of(b);
	json_t *g = json_array_get(json_object_get(a, "goals"), 1);
	CHECK_STR_EQ(str_at(g, "title"), "Save: now");
	CHECK_STR_EQ(str_at(g, "status"), "running");
	json_decref(b);

	expect_do_error("usage: holoctl do hold_and_tap_key", "hold_and_tap_key", "ctrl", NULL);
	expect_do_error("hold_and_tap_key holds at most 3 keys", "hold_and_tap_key", "ctrl+alt+shift+super",
			"a", NULL);
	expect_do_error("action.tap_keys[0]: unknown key name 'tabb'", "hold_and_tap_key", "alt", "tabb",
			NULL);
	expect_do_error("usage: holoctl do drag_to X Y", "drag_to", "1", NULL);
	expect_do_error("a goal is STATUS:TITLE", "update_plan", "Open it", NULL);
	expect_do_error("a goal is STATUS:TITLE", "update_plan", "started:Open it", NULL);
}

/* The script-only actions and grounded targets through holoctl do (issue 15). */
static void test_do_desktop(void)
{
	json_t *b, *a, *m;

	CHECK_INT_EQ(build_do(&b, "launch", "--class", "^Mousepad$", "--timeout", "2.5", "--", "mousepad",
			      "-q", "/tmp/x y", NULL),
		     0);
	a = action_of(b);
	CHECK_STR_EQ(str_at(a, "tool_name"), "launch");
	CHECK_INT_EQ(json_array_size(json_object_get(a, "command")), 3);
	CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(a, "command"), 1)), "-q");
	CHECK_STR_EQ(str_at(json_object_get(a, "wait_window"), "class"), "^Mousepad$");
	CHECK(json_real_value(json_object_get(a, "timeout")) == 2.5);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "launch", "--", "xterm", NULL), 0);
	CHECK(!json_object_get(action_of(b), "wait_window"));
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "wait_for", "window_gone", "--title", "Save", NULL), 0);
	m = json_object_get(action_of(b), "window_gone");
	CHECK_STR_EQ(str_at(m, "title"), "Save");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "wait_for", "screen_stable", "400", NULL), 0);
	CHECK_INT_EQ(int_at(json_object_get(action_of(b), "screen_stable"), "ms"), 400);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "wait_for", "region_changed", "1", "2", "30", "40", NULL), 0);
	CHECK_INT_EQ(int_at(json_object_get(action_of(b), "region_changed"), "height"), 40);
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "activate", "--instance", "xterm", NULL), 0);
	CHECK_STR_EQ(str_at(json_object_get(action_of(b), "window"), "instance"), "xterm");
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "click", "--target", "the Save button", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "target"), "the Save button");
	CHECK(!json_object_get(action_of(b), "x"));
	json_decref(b);

	CHECK_INT_EQ(build_do(&b, "drag", "--target", "a", "--target2", "b", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "target2"), "b");
	json_decref(b);

	expect_do_error("invalid regex at offset 1", "activate", "--title", "(", NULL);
	expect_do_error("activate needs --title, --class or --instance", "activate", NULL);
	expect_do_error("usage: holoctl do wait_for screen_stable MS", "wait_for", "screen_stable", NULL);
	expect_do_error("usage: holoctl do wait_for window|window_gone|focus", "wait_for", "focus", NULL);
	expect_do_error("wait_for takes window, window_gone", "wait_for", "dialog", NULL);
	expect_do_error("screen_stable takes milliseconds from 50", "wait_for", "screen_stable", "10", NULL);
	expect_do_error("--timeout takes seconds", "wait_for", "focus", "--title", "a", "--timeout", "0",
			NULL);
	expect_do_error("--timeout applies to launch, wait_for and activate", "click", "1", "2", "--timeout",
			"3", NULL);
	expect_do_error("--title, --class and --instance apply to", "write", "x", "--title", "a", NULL);
	expect_do_error("--target applies to click, double_click, move and drag", "scroll", "--target", "a",
			NULL);
	expect_do_error("give either --target or coordinates", "click", "--target", "a", "1", "2", NULL);
	expect_do_error("--target2 applies to drag only", "click", "--target2", "a", NULL);
	expect_do_error("action.target2: missing: a drag takes both ends", "drag", "--target", "a", NULL);
	expect_do_error("usage: holoctl do launch", "launch", NULL);
}

/* Issue 33's papercuts: negative numbers are arguments, "did you mean" for a misspelt action
 * or key name, and `do keys` lists the key names. */
static void test_do_papercuts(void)
{
	json_t *b;

	expect_do_error("X must be an integer from 0 to 32767, not '-5'", "click", "-5", "10", NULL);
	expect_do_error("Y must be an integer from 0 to 32767, not '-1.5'", "move", "3", "-1.5", NULL);
	expect_do_error("scroll notches must be from 1 to 100, not '-3'", "scroll", "1", "2", "up", "-3",
			NULL);
	/* an option's value stays the option's */
	expect_do_error("--settle-ms must be from 0 to 10000, not '-1'", "click", "1", "2", "--settle-ms",
			"-1", NULL);
	CHECK_INT_EQ(build_do(&b, "write", "-5", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "content"), "-5");
	json_decref(b);
	CHECK_INT_EQ(build_do(&b, "write", "--", "-x", NULL), 0);
	CHECK_STR_EQ(str_at(action_of(b), "content"), "-x");
	json_decref(b);
	expect_do_error("unknown option '-x'", "write", "-x", NULL);

	expect_do_error("unknown action 'clik': did you mean 'click'? (one of click, right_click, "
			"middle_click, double_click,",
			"clik", "1", "2", NULL);
	expect_do_error("unknown action 'rigth_click': did you mean 'right_click'?", "rigth_click", "1", "2",
			NULL);
	expect_do_error("unknown action 'teleport' (one of", "teleport", NULL);
	expect_do_error("unknown key name 'ctr': did you mean 'ctrl'?", "hotkey", "ctr+s", NULL);
	expect_do_error("unknown key name 'pgdwn': did you mean 'pgdn'?", "key_down", "pgdwn", NULL);

	struct capture c;
	char *argv[] = {"do", "keys", NULL};
	char *body = (char *)"sentinel";
	capture_init(&c);
	CHECK_INT_EQ(cli_do_build_request(&c.ctx, 2, argv, &body), 0);
	capture_flush(&c);
	CHECK(body == NULL);
	CHECK(c.out && strstr(c.out, "return enter") && strstr(c.out, "ctrl control") &&
	      strstr(c.out, "f1 .. f24"));
	capture_finish(&c);

	expect_do_error("usage: holoctl do keys (no arguments)", "keys", "ctrl", NULL);

	/* the actions of --help come from the tool table */
	char *help[] = {"do", "--help", NULL};
	capture_init(&c);
	CHECK_INT_EQ(cli_do_build_request(&c.ctx, 2, help, &body), 0);
	capture_flush(&c);
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		const struct ipc_tool_info *info = ipc_tool_info((enum ipc_tool)t);
		char line[64];
		snprintf(line, sizeof(line), "  %s ", info->name);
		CHECK(!info->cli.args || (c.out && strstr(c.out, line)));
	}
	CHECK(c.out && strstr(c.out, "Actions:\n  click X Y") && strstr(c.out, "\n  keys "));
	capture_finish(&c);
}

static void test_do_errors(void)
{
	expect_do_error("which action", NULL);
	expect_do_error("usage: holoctl do click X Y", "click", "1", NULL);
	expect_do_error("X must be an integer", "click", "abc", "2", NULL);
	expect_do_error("Y must be an integer", "click", "1", "40000", NULL);
	expect_do_error("X2 must be an integer", "drag", "1", "2", "x", "4", NULL);
	expect_do_error("quote the text", "write", "two", "words", NULL);
	expect_do_error("write: invalid UTF-8 at byte 2", "write", "ab\xff", NULL);
	expect_do_error("write: control character U+0007 at byte 1", "write", "a\a", NULL);
	expect_do_error("unknown key name 'ctr'", "hotkey", "ctr+s", NULL);
	expect_do_error("write the plus key as 'plus'", "hotkey", "ctrl++", NULL);
	expect_do_error("at most 5 keys", "hotkey", "a+b+c+d+e+f", NULL);
	expect_do_error("--repeat must be from 1 to 20", "hotkey", "a", "--repeat", "21", NULL);
	expect_do_error("--button applies to click only", "write", "x", "--button", "left", NULL);
	expect_do_error("--button applies to click only", "right_click", "1", "2", "--button", "left", NULL);
	expect_do_error("--button must be left, right or middle", "click", "1", "2", "--button", "up", NULL);
	expect_do_error("--enter and --overwrite apply to write only", "click", "1", "2", "--enter", NULL);
	expect_do_error("--element applies to pointer actions only", "wait", "1", "--element", "x", NULL);
	expect_do_error("scroll direction must be", "scroll", "1", "2", "sideways", NULL);
	expect_do_error("scroll notches must be from 1 to 100", "scroll", "1", "2", "up", "101", NULL);
	expect_do_error("wait takes seconds", "wait", "31", NULL);
	expect_do_error("wait takes seconds", "wait", "0", NULL);
	expect_do_error("wait takes seconds", "wait", "soon", NULL);
	expect_do_error("--coords must be pixels or model", "click", "1", "2", "--coords", "inches", NULL);
	expect_do_error("--settle-ms must be from 0", "click", "1", "2", "--settle-ms", "-1", NULL);
	/* Model space ends at 1000: checked by the ipc module, named by field. */
	expect_do_error("action.x", "click", "1001", "2", "--coords", "model", NULL);
	expect_do_error("unknown option '--bogus'", "click", "1", "2", "--bogus", NULL);
	expect_do_error("needs a value", "click", "1", "2", "--button", NULL);
}

/* ---- run ---------------------------------------------------------------------------------- */

static int parse_run(const char *stdin_text, struct cli_run_args *ret, char **ret_err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	struct capture c;
	FILE *in = fmemopen((void *)stdin_text, strlen(stdin_text), "r");
	int r;

	REQUIRE(in);
	argv[argc++] = "run";
	va_start(ap, ret_err);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;

	capture_init(&c);
	*ret = (struct cli_run_args){0};
	c.ctx.in = in;
	r = cli_run_parse(&c.ctx, argc, argv, ret);
	capture_flush(&c);
	*ret_err = xstrdup(c.err ? c.err : "");
	capture_finish(&c);
	fclose(in);
	return r;
}

static void test_run_parse(void)
{
	struct cli_run_args a;
	json_t *body;
	char *err;

	/* A bare array from stdin. */
	CHECK_INT_EQ(parse_run("[{\"tool_name\":\"click\",\"x\":1,\"y\":2},"
			       " {\"tool_name\":\"write\",\"content\":\"hi\"}]",
			       &a, &err, "--script", "-", "--follow", NULL),
		     0);
	CHECK(a.follow);
	body = json_loads(a.body ? a.body : "", 0, NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(body, "script")), 2);
	CHECK(!json_object_get(body, "max_steps"));
	json_decref(body);
	cli_run_args_finish(&a);
	CHECK_STR_EQ(err, ""); /* nothing printed on success */
	free(err);

	/* An object with options; the command line overrides them. */
	CHECK_INT_EQ(parse_run("{\"actions\":[{\"tool_name\":\"wait\",\"duration\":1}],"
			       " \"max_steps\": 5, \"settle_ms\": 10}",
			       &a, &err, "--script", "-", "--max-steps", "7", "--max-seconds", "9",
			       "--dry-run", "--coords", "model", NULL),
		     0);
	CHECK(!a.follow);
	body = json_loads(a.body ? a.body : "", 0, NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(body, "script")), 1);
	CHECK(!json_object_get(body, "actions"));
	CHECK_INT_EQ(int_at(body, "max_steps"), 7);
	CHECK_INT_EQ(int_at(body, "max_seconds"), 9);
	CHECK_INT_EQ(int_at(body, "settle_ms"), 10);
	CHECK(json_is_true(json_object_get(body, "dry_run")));
	CHECK_STR_EQ(str_at(body, "coords"), "model");
	json_decref(body);
	cli_run_args_finish(&a);
	CHECK_STR_EQ(err, ""); /* nothing printed on success */
	free(err);

	/* The API's own {"script": [...]} form is a valid file too. */
	CHECK_INT_EQ(parse_run("{\"script\":[{\"tool_name\":\"hotkey\",\"keys\":[\"ctrl\",\"s\"]}]}", &a,
			       &err, "--script", "-", NULL),
		     0);
	cli_run_args_finish(&a);
	CHECK_STR_EQ(err, ""); /* nothing printed on success */
	free(err);

	/* An instruction: several words are one. */
	CHECK_INT_EQ(parse_run("", &a, &err, "open", "the", "settings", "--max-steps", "3", NULL), 0);
	body = json_loads(a.body ? a.body : "", 0, NULL);
	CHECK_STR_EQ(str_at(body, "instruction"), "open the settings");
	CHECK_INT_EQ(int_at(body, "max_steps"), 3);
	json_decref(body);
	cli_run_args_finish(&a);
	CHECK_STR_EQ(err, ""); /* nothing printed on success */
	free(err);
}

static void expect_run_error(const char *stdin_text, const char *needle, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	struct capture c;
	struct cli_run_args a = {0};
	FILE *in = fmemopen((void *)stdin_text, strlen(stdin_text) ? strlen(stdin_text) : 1, "r");

	REQUIRE(in);
	argv[argc++] = "run";
	va_start(ap, needle);
	for (char *arg; (arg = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = arg;
	va_end(ap);
	argv[argc] = NULL;

	capture_init(&c);
	c.ctx.in = in;
	int r = cli_run_parse(&c.ctx, argc, argv, &a);
	capture_flush(&c);
	if (r != CLI_EXIT_USAGE || a.body || !c.err || !strstr(c.err, needle)) {
		fprintf(stderr, "run: status %d, stderr \"%s\", wanted \"%s\"\n", r, c.err ? c.err : "",
			needle);
		test_failures++;
	}
	cli_run_args_finish(&a);
	capture_finish(&c);
	fclose(in);
}

static void test_run_errors(void)
{
	expect_run_error("", "give --script FILE", NULL);
	expect_run_error("[]", "not both", "--script", "-", "extra", NULL);
	expect_run_error("[{\"tool_name\":\"click\",\"x\":1,\n\"y\":}]", "(stdin): invalid JSON at line 2",
			 "--script", "-", NULL);
	expect_run_error("[{\"tool_name\":\"jump\"}]", "(stdin): script[0].tool_name", "--script", "-", NULL);
	/* Errors name the field as the file spells it. */
	expect_run_error("{\"actions\":[{\"tool_name\":\"wait\",\"duration\":1},"
			 "{\"tool_name\":\"hotkey\",\"keys\":[\"ctr\"]}]}",
			 "actions[1].keys[0]: unknown key name 'ctr'", "--script", "-", NULL);
	expect_run_error("{\"steps\":[]}", "no \"actions\" list", "--script", "-", NULL);
	expect_run_error("42", "a script is a JSON array", "--script", "-", NULL);
	expect_run_error("{\"instruction\":\"x\"}", "a script file holds actions", "--script", "-", NULL);
	expect_run_error("[]", "(stdin): script", "--script", "-", NULL);
	expect_run_error("[{\"tool_name\":\"wait\",\"duration\":1}]", "unknown", "--script", "-", "--bogus",
			 NULL);
	expect_run_error("", "cannot open the script /nonexistent/s.json", "--script", "/nonexistent/s.json",
			 NULL);
	expect_run_error("", "--coords applies to scripts only", "do", "it", "--coords", "model", NULL);
	expect_run_error("", "--max-steps must be from 1", "x", "--max-steps", "0", NULL);
	expect_run_error("", "--max-seconds must be from 1", "x", "--max-seconds", "lots", NULL);
}

static void test_script_file(void)
{
	char dir[] = "/tmp/holoctl-test-XXXXXX";
	char err[CLI_MAX_ERROR_LEN + 256];
	json_t *body = NULL;

	REQUIRE(mkdtemp(dir));
	char *path = path_join(dir, "script.json");
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs("{\"actions\": [{\"tool_name\": \"move\", \"x\": 3, \"y\": 4}], \"dry_run\": true}\n", f);
	fclose(f);
	CHECK_INT_EQ(cli_script_read(path, stdin, &body, err, sizeof(err)), 0);
	CHECK(json_is_true(json_object_get(body, "dry_run")));
	CHECK_STR_EQ(str_at(json_array_get(json_object_get(body, "script"), 0), "tool_name"), "move");
	json_decref(body);

	/* Over the size limit: refused before parsing, with the limit named. */
	f = fopen(path, "w");
	REQUIRE(f);
	fputc('[', f);
	for (size_t n = 0; n < CLI_MAX_SCRIPT_BYTES; n += 64)
		fputs("                                                               \n", f);
	fputc(']', f);
	fclose(f);
	body = NULL;
	CHECK_INT_EQ(cli_script_read(path, stdin, &body, err, sizeof(err)), -EFBIG);
	CHECK(body == NULL);
	CHECK(strstr(err, "larger than") != NULL);

	/* `holoctl run FILE.json` without --script runs the file as a script, and says so. */
	struct cli_run_args a;
	char *msg, *other = path_join(dir, "steps"), *text = path_join(dir, "notes.txt");
	char *missing = path_join(dir, "typo.json");
	f = fopen(path, "w");
	REQUIRE(f);
	fputs("[{\"tool_name\": \"wait\", \"duration\": 0.5}]\n", f);
	fclose(f);
	CHECK_INT_EQ(parse_run("", &a, &msg, path, NULL), 0);
	body = json_loads(a.body ? a.body : "", 0, NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(body, "script")), 1);
	CHECK(!json_object_get(body, "instruction"));
	CHECK(strstr(msg, "is a file: running it as a script") != NULL);
	json_decref(body);
	cli_run_args_finish(&a);
	free(msg);
	/* A file without .json whose text is JSON is a script too. */
	f = fopen(other, "w");
	REQUIRE(f);
	fputs("  {\"actions\": [{\"tool_name\": \"wait\", \"duration\": 1}]}", f);
	fclose(f);
	CHECK_INT_EQ(parse_run("", &a, &msg, "--follow", other, NULL), 0);
	CHECK(a.follow);
	CHECK(a.body && strstr(a.body, "\"script\"") != NULL);
	cli_run_args_finish(&a);
	free(msg);
	/* A file that is no JSON, a *.json name that is no file: refused, nothing sent. */
	f = fopen(text, "w");
	REQUIRE(f);
	fputs("open the settings\n", f);
	fclose(f);
	CHECK_INT_EQ(parse_run("", &a, &msg, text, NULL), CLI_EXIT_USAGE);
	CHECK(strstr(msg, "is a file but not a JSON script: give --script FILE") != NULL);
	CHECK(a.body == NULL);
	free(msg);
	CHECK_INT_EQ(parse_run("", &a, &msg, missing, NULL), CLI_EXIT_USAGE);
	CHECK(strstr(msg, "looks like a script file but is not one (No such file or directory)") != NULL);
	CHECK(a.body == NULL);
	free(msg);
	/* Words stay an instruction. */
	CHECK_INT_EQ(parse_run("", &a, &msg, "open", "the", "settings", NULL), 0);
	CHECK(a.body && strstr(a.body, "\"instruction\"") != NULL);
	cli_run_args_finish(&a);
	free(msg);

	unlink(text);
	unlink(other);
	unlink(path);
	rmdir(dir);
	free(path);
	free(other);
	free(text);
	free(missing);
}

/* ---- tables and formatting ------------------------------------------------------------------ */

static char *print_table(struct cli_table *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	REQUIRE(f);
	CHECK_INT_EQ(cli_table_print(t, f), 0);
	fclose(f);
	return buf;
}

static void test_table(void)
{
	static const char *const headers[] = {"#", "TOOL", "RESULT"};
	struct cli_table *t = cli_table_create(3, headers);
	char *s;

	REQUIRE(t);
	cli_table_set_align(t, 0, CLI_ALIGN_RIGHT);
	cli_table_add_row(t, (const char *const[]){"0", "click", "ok"});
	cli_table_add_row(t, (const char *const[]){"10", "write", NULL});
	cli_table_add_row(t, (const char *const[]){"11", "héllo", "two\nlines"});
	CHECK_INT_EQ(cli_table_rows(t), 3);
	s = print_table(t);
	CHECK_STR_EQ(s, " #  TOOL   RESULT\n"
			" 0  click  ok\n"
			"10  write  -\n"
			"11  héllo  two\\nlines\n");
	free(s);
	cli_table_hide_header(t);
	s = print_table(t);
	CHECK_STR_EQ(s, " 0  click  ok\n"
			"10  write  -\n"
			"11  héllo  two\\nlines\n");
	free(s);
	cli_table_destroy(t);

	CHECK(cli_table_create(0, headers) == NULL);

	/* Empty trailing cells leave no trailing blanks. */
	t = cli_table_create(3, headers);
	cli_table_add_row(t, (const char *const[]){"1", "wait", ""});
	cli_table_add_row(t, (const char *const[]){"2", "", ""});
	s = print_table(t);
	CHECK_STR_EQ(s, "#  TOOL  RESULT\n"
			"1  wait\n"
			"2\n");
	free(s);
	cli_table_destroy(t);

	/* Cells: control bytes and invalid UTF-8 escaped, long text cut to the limit. */
	s = cli_table_render_cell("a\tb\x01\xff");
	CHECK_STR_EQ(s, "a\\tb\\x01\\xFF");
	free(s);
	/* An overlong '/', a surrogate and a truncated sequence are escaped too; é is kept. */
	s = cli_table_render_cell("\xC0\xAF \xED\xA0\x80 \xC3\xA9 \xE2\x82");
	CHECK_STR_EQ(s, "\\xC0\\xAF \\xED\\xA0\\x80 \xC3\xA9 \\xE2\\x82");
	free(s);
	/* A cell is whole however long; cutting is the table's, to its width. */
	char longtext[200];
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	s = cli_table_render_cell(longtext);
	CHECK_STR_EQ(s, longtext);
	free(s);
	s = cli_table_cut_cell("h\xC3\xA9llo world", 8);
	CHECK_STR_EQ(s, "h\xC3\xA9llo...");
	free(s);
	s = cli_table_cut_cell("h\xC3\xA9llo", 6);
	CHECK_STR_EQ(s, "h\xC3\xA9llo");
	free(s);

	/* A width cuts the flexible columns, the widest first, and never the others. */
	static const char *const h3[] = {"ID", "TASK", "ERROR"};
	t = cli_table_create(3, h3);
	cli_table_set_flexible(t, 1);
	cli_table_set_flexible(t, 2);
	cli_table_add_row(t, (const char *const[]){"123456789012345678901234567890",
						   "open the "
						   "settings and turn the volume down",
						   "short"});
	s = print_table(t);
	CHECK(strstr(s, "turn the volume down") != NULL); /* no width: whole */
	free(s);
	cli_table_set_width(t, 60);
	s = print_table(t);
	CHECK_STR_EQ(s, "ID                              TASK                   ERROR\n"
			"123456789012345678901234567890  open the settings ...  short\n");
	free(s);
	/* Narrower than the fixed columns allow: flexible ones stop at CLI_TABLE_MIN_CUT. */
	cli_table_set_width(t, 20);
	s = print_table(t);
	CHECK(strstr(s, "123456789012345678901234567890  open the ...  short\n") != NULL);
	free(s);
	cli_table_destroy(t);
	/* Two long flexible columns share what is left. */
	t = cli_table_create(3, h3);
	cli_table_set_flexible(t, 1);
	cli_table_set_flexible(t, 2);
	cli_table_set_width(t, 50);
	cli_table_add_row(t, (const char *const[]){"7", longtext, longtext});
	s = print_table(t);
	char want[128];
	snprintf(want, sizeof(want),
		 "ID  TASK                    ERROR\n"
		 "7   %.19s...  %.19s...\n",
		 longtext, longtext);
	CHECK_STR_EQ(s, want);
	free(s);
	cli_table_destroy(t);
}

static void test_format(void)
{
	char buf[64];

	cli_format_duration_us(12, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "12 us");
	cli_format_duration_us(42400, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "42 ms");
	cli_format_duration_us(1250000, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "1.25 s");
	cli_format_duration_us(-1, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "-");

	CHECK_INT_EQ(cli_exit_for_task_status("succeeded"), CLI_EXIT_OK);
	CHECK_INT_EQ(cli_exit_for_task_status("failed"), CLI_EXIT_TASK_FAILED);
	CHECK_INT_EQ(cli_exit_for_task_status("cancelled"), CLI_EXIT_TASK_CANCELLED);
	CHECK_INT_EQ(cli_exit_for_task_status("interrupted"), CLI_EXIT_TASK_INTERRUPTED);
	CHECK_INT_EQ(cli_exit_for_task_status("running"), CLI_EXIT_TASK_UNKNOWN);
	CHECK_INT_EQ(cli_exit_for_task_status(NULL), CLI_EXIT_TASK_UNKNOWN);

	long v = 0;
	CHECK_INT_EQ(cli_parse_int("42", 0, 100, &v), 0);
	CHECK_INT_EQ(v, 42);
	CHECK_INT_EQ(cli_parse_int("101", 0, 100, &v), -ERANGE);
	CHECK_INT_EQ(cli_parse_int("4x", 0, 100, &v), -EINVAL);
	CHECK_INT_EQ(cli_parse_int("", 0, 100, &v), -EINVAL);
	CHECK_INT_EQ(v, 42);

	json_t *p = json_pack("{s:i, s:i}", "x", 3, "y", 4);
	cli_format_point(p, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "3,4");
	json_object_set_new(p, "x2", json_integer(30));
	json_object_set_new(p, "y2", json_integer(40));
	cli_format_point(p, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "3,4->30,40");
	cli_format_point(json_null(), buf, sizeof(buf));
	CHECK_STR_EQ(buf, "-");
	json_decref(p);

	json_t *call = json_pack("{s:s, s:[s,s], s:i}", "tool_name", "hotkey", "keys", "ctrl", "s",
				 "repeat_count", 2);
	cli_format_tool_args(call, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "ctrl+s x2");
	json_decref(call);
	call = json_pack("{s:s, s:s, s:b}", "tool_name", "write", "content", "hi", "press_enter", 1);
	cli_format_tool_args(call, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "\"hi\" +enter");
	json_decref(call);
	call = json_pack("{s:s, s:s, s:i}", "tool_name", "scroll", "direction", "down", "scroll_size", 3);
	cli_format_tool_args(call, buf, sizeof(buf));
	CHECK_STR_EQ(buf, "down 3");
	json_decref(call);

	static const unsigned char png[24] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13,
					      'I',  'H', 'D', 'R', 0,	 0,    5,    0,	   0, 0, 2, 0xD0};
	uint32_t w = 0, h = 0;
	CHECK_INT_EQ(cli_png_size(png, sizeof(png), &w, &h), 0);
	CHECK_INT_EQ(w, 1280);
	CHECK_INT_EQ(h, 720);
	CHECK_INT_EQ(cli_png_size((const uint8_t *)"GIF89a", 6, &w, &h), -EBADMSG);

	char sha[65];
	ipc_sha256_hex("abc", 3, sha);
	CHECK_STR_EQ(sha, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

	char msg[512];
	const char *e = "{\"error\":{\"code\":\"no_model\",\"message\":\"no model is loaded\"}}";
	cli_format_api_error(503, e, strlen(e), msg, sizeof(msg));
	CHECK(strstr(msg, "no model is loaded (HTTP 503 no_model)") == msg);
	CHECK(strstr(msg, "holoctl run --script") != NULL);
	e = "{\"error\":{\"code\":\"too_many_connections\",\"message\":\"holod has 300\"}}";
	cli_format_api_error(503, e, strlen(e), msg, sizeof(msg));
	CHECK(strstr(msg, "(HTTP 503 too_many_connections); something holds many connections") != NULL);
	cli_format_api_error(502, "<html>", 6, msg, sizeof(msg));
	CHECK(strstr(msg, "HTTP 502 without an error message") != NULL);
}

/* ---- the whole program, without a daemon ------------------------------------------------------
 */

static int run_main(char **out, char **err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	size_t ol, el;
	FILE *fo = open_memstream(out, &ol), *fe = open_memstream(err, &el);

	REQUIRE(fo && fe);
	argv[argc++] = "holoctl";
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	int r = holoctl_main(argc, argv, stdin, fo, fe);
	fclose(fo);
	fclose(fe);
	return r;
}

static char *wrapped(const char *label, const char *text, unsigned indent, unsigned width)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	REQUIRE(f);
	cli_print_wrapped(f, label, text, indent, width);
	fclose(f);
	return buf;
}

/* Thoughts in `holoctl show`: wrapped at blanks to the width, continuation lines under the
 * text, a word longer than the line cut, escapes for what would move the cursor. */
static void test_wrap(void)
{
	char *s = wrapped("thought: ", "The save button is at the top right of the dialog", 2, 40);
	CHECK_STR_EQ(s, "  thought: The save button is at the top\n"
			"           right of the dialog\n");
	free(s);
	s = wrapped("note: ", "line one\nline two", 0, 40);
	CHECK_STR_EQ(s, "note: line one\n      line two\n");
	free(s);
	s = wrapped("n: ", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz", 0, 40);
	CHECK_STR_EQ(s, "n: abcdefghijklmnopqrstuvwxyzabcdefghijk\n"
			"   lmnopqrstuvwxyz\n");
	free(s);
	s = wrapped("n: ", "\x1b[2Jé\tok", 0, 40);
	CHECK_STR_EQ(s, "n: \\x1b[2Jé ok\n");
	free(s);
	/* Every printed line fits, whatever the text. */
	s = wrapped("thought: ",
		    "aa bbb cccc ddddd eeeeee fffffff gggggggg hhhhhhhhh iiiiiiiiii "
		    "jjjjjjjjjjj kkkkkkkkkkkk",
		    4, 40);
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
		CHECK(strlen(line) <= 40);
	free(s);
	setenv("COLUMNS", "132", 1);
	FILE *f = tmpfile();
	REQUIRE(f);
	CHECK_INT_EQ(cli_terminal_width(f), 132);
	setenv("COLUMNS", "10", 1);
	CHECK_INT_EQ(cli_terminal_width(f), CLI_WRAP_MIN_WIDTH);
	unsetenv("COLUMNS");
	CHECK_INT_EQ(cli_terminal_width(f), 80);
	/* Tables: $COLUMNS when set, else no limit into a file. */
	CHECK_INT_EQ(cli_output_width(f), 0);
	setenv("COLUMNS", "100", 1);
	CHECK_INT_EQ(cli_output_width(f), 100);
	unsetenv("COLUMNS");
	fclose(f);
}

/* `holoctl status`: a few lines a person reads, from the object of docs/api.md. */
static char *status_summary(const char *json)
{
	json_t *status = json_loads(json, 0, NULL);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	REQUIRE(status && f);
	cli_print_status_summary(f, status);
	fclose(f);
	json_decref(status);
	return buf;
}

static void test_status_summary(void)
{
	char *s = status_summary(
		"{\"version\": \"0.1.0\", \"api_version\": 1, \"pid\": 4242, \"display\": \":0\","
		" \"model\": {\"path\": \"/m/holotron-12b\", \"name\": \"holotron-12b\","
		" \"state\": \"ready\", \"error\": null, \"backend\": \"cuda\", \"sessions\": 1,"
		" \"precision\": \"bf16\", \"weights\": \"fp8\", \"weight_bytes\": 24600000000,"
		" \"device_weight_bytes\": 13421772800, \"device_state_bytes\": 536870912,"
		" \"device_memory_total\": 150323855360, \"device_memory_free\": 107374182400,"
		" \"batching\": {\"batches\": 18234}},"
		" \"running\": 7, \"queue\": [8, 9],"
		" \"displays\": [{\"name\": \":0\", \"running\": 7, \"connected\": true},"
		" {\"name\": \":1\", \"running\": null, \"connected\": false}],"
		" \"provider\": {\"name\": \"local\"}}");
	CHECK_STR_EQ(s, "holod     0.1.0 (pid 4242)\n"
			"model     holotron-12b ready on cuda, bf16, fp8 weights\n"
			"memory    12.5 GiB weights, 0.5 GiB sessions (1); 100.0 GiB free of 140.0 GiB\n"
			"displays  :0: running task 7\n"
			"          :1: idle (not connected yet)\n"
			"tasks     1 running, 2 queued (8, 9)\n");
	free(s);
	/* No model: why, and what still works. */
	s = status_summary("{\"version\": \"0.1.0\", \"pid\": 1, \"model\": null, \"queue\": [],"
			   " \"displays\": [{\"name\": null, \"running\": null}],"
			   " \"provider\": {\"name\": \"local\"}}");
	CHECK(strstr(s, "model     none: holod was started without --model") != NULL);
	CHECK(strstr(s, "displays  $DISPLAY: idle\n") != NULL);
	CHECK(strstr(s, "tasks     0 running, 0 queued\n") != NULL);
	free(s);
	/* A model that failed says why. */
	s = status_summary("{\"model\": {\"name\": \"x\", \"state\": \"failed\", \"error\":"
			   " \"cannot load the model /m/x: tokenizer.json: No such file\"}}");
	CHECK(strstr(s, "model     x failed to load: cannot load the model /m/x: tokenizer.json") != NULL);
	free(s);
}

static void test_age(void)
{
	long s = -1;
	CHECK_INT_EQ(cli_parse_age("30d", &s), 0);
	CHECK_INT_EQ(s, 30 * 86400);
	CHECK_INT_EQ(cli_parse_age("0s", &s), 0);
	CHECK_INT_EQ(s, 0);
	CHECK_INT_EQ(cli_parse_age("12h", &s), 0);
	CHECK_INT_EQ(s, 12 * 3600);
	CHECK_INT_EQ(cli_parse_age("2w", &s), 0);
	CHECK_INT_EQ(s, 14 * 86400);
	CHECK(cli_parse_age("30", &s) < 0);
	CHECK(cli_parse_age("d", &s) < 0);
	CHECK(cli_parse_age("-1d", &s) < 0);
	CHECK(cli_parse_age("99999d", &s) < 0); /* over ten years */
	CHECK(cli_parse_age("3x", &s) < 0);
}

/* holoctl mcp's action tools are ipc's table's (ipc_tool_info's client member): every tool it
 * offers clients is listed under its name with its description, its members and required ones,
 * the task options added; none other is; and a call plans the table's tool. */
static void test_mcp_tools(void)
{
	json_t *list = mcp_tools_list(NULL), *tool, *props, *want, *v;
	const char *key;
	size_t i, offered = 0, actions = 0;

	REQUIRE(json_is_array(json_object_get(list, "tools")));
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		const struct ipc_tool_info *info = ipc_tool_info((enum ipc_tool)t);
		json_t *found = NULL;
		json_array_foreach(json_object_get(list, "tools"), i,
				   tool) if (strcmp(json_string_value(json_object_get(tool, "name")),
						    info->name) == 0) found = tool;
		if (!info->client.title) {
			CHECK(found == NULL);
			continue;
		}
		offered++;
		REQUIRE(found != NULL);
		CHECK_STR_EQ(json_string_value(json_object_get(found, "title")), info->client.title);
		CHECK_STR_EQ(json_string_value(json_object_get(found, "description")),
			     info->client.description);
		CHECK(json_is_true(json_object_get(json_object_get(found, "annotations"), "readOnlyHint")) ==
		      info->client.read_only);
		props = json_object_get(json_object_get(found, "inputSchema"), "properties");
		want = json_loads(info->client.properties, 0, NULL);
		json_object_foreach(want, key, v) CHECK(json_equal(json_object_get(props, key), v));
		CHECK(json_object_get(props, "coords") && json_object_get(props, "require_focus"));
		CHECK_INT_EQ(json_object_size(props), json_object_size(want) + 5);
		json_decref(want);
		want = info->client.required ? json_loads(info->client.required, 0, NULL) : NULL;
		CHECK(json_equal(json_object_get(json_object_get(found, "inputSchema"), "required"), want) ||
		      (!want && !json_object_get(json_object_get(found, "inputSchema"), "required")));
		json_decref(want);
	}
	json_array_foreach(json_object_get(list, "tools"), i, tool)
	{
		const char *name = json_string_value(json_object_get(tool, "name"));
		int t = ipc_tool_from_string(name);
		if (t >= 0)
			actions++;
	}
	CHECK_INT_EQ(actions, offered);
	CHECK_INT_EQ(offered, IPC_TOOL_COUNT_ - 3); /* all but answer, ask_user, update_plan */
	json_decref(list);

	/* a call of a tool the table offers (drag_to, which holoctl mcp never spelled) plans it */
	struct mcp_plan plan;
	char err[256];
	json_t *params = json_pack("{s:s, s:{s:i, s:i, s:b}}", "name", "drag_to", "arguments", "x", 40, "y",
				   50, "dry_run", 1);
	CHECK_INT_EQ(mcp_plan_tool_call(params, &plan, err, sizeof(err)), 0);
	CHECK(plan.kind == MCP_PLAN_ACTION && plan.body && strstr(plan.body, "\"tool_name\":\"drag_to\"") &&
	      strstr(plan.body, "\"dry_run\":true"));
	mcp_plan_finish(&plan);
	json_decref(params);
	/* and one it does not offer is unknown */
	params = json_pack("{s:s, s:{s:s}}", "name", "answer", "arguments", "content", "x");
	CHECK_INT_EQ(mcp_plan_tool_call(params, &plan, err, sizeof(err)), MCP_ERR_INVALID_PARAMS);
	CHECK(strstr(err, "unknown tool 'answer'") != NULL);
	mcp_plan_finish(&plan);
	json_decref(params);
}

static void test_main(void)
{
	char *out, *err, dir[] = "/tmp/holoctl-main-XXXXXX";

	CHECK_INT_EQ(run_main(&out, &err, "--version", NULL), 0);
	CHECK(strstr(out, "holoctl " HOLOD_VERSION) == out);
	free(out), free(err);

	CHECK_INT_EQ(run_main(&out, &err, NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "Commands:") != NULL);
	free(out), free(err);

	CHECK_INT_EQ(run_main(&out, &err, "--help", NULL), 0);
	for (size_t i = 0; i < cli_commands_count; i++)
		CHECK(strstr(out, cli_commands[i]->name) != NULL);
	CHECK(strstr(out, "Exit status:") != NULL);
	free(out), free(err);

	/* Every command has its own --help. */
	for (size_t i = 0; i < cli_commands_count; i++) {
		CHECK_INT_EQ(run_main(&out, &err, cli_commands[i]->name, "--help", NULL), 0);
		CHECK(strstr(out, "Usage: holoctl ") == out);
		CHECK(strstr(out, cli_commands[i]->name) != NULL);
		free(out), free(err);
	}
	/* ... and refuses an unknown option as a usage error; neither path leaks what the command
	 * takes before it reads its options (LeakSanitizer checks it in the ASan build). */
	for (size_t i = 0; i < cli_commands_count; i++) {
		CHECK_INT_EQ(run_main(&out, &err, cli_commands[i]->name, "--no-such-option", "1", NULL),
			     CLI_EXIT_USAGE);
		CHECK(strstr(err, "no-such-option") != NULL);
		free(out), free(err);
	}
	CHECK_INT_EQ(run_main(&out, &err, "view", "--port", "70000", "1", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "--port") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "help", "show", NULL), 0);
	CHECK(strstr(out, "Usage: holoctl show [--steps A-B] [--wide] ID") == out);
	free(out), free(err);

	CHECK_INT_EQ(run_main(&out, &err, "frobnicate", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "unknown command 'frobnicate'") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "--bogus", "status", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "unknown option '--bogus'") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "show", "abc", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "'abc' is not a task ID") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "cancel", NULL), CLI_EXIT_USAGE);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "screenshot", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "give -o FILE") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "screenshot", "-o", "x.png", "--task", "3", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "--task and --step go together") != NULL);
	free(out), free(err);
	CHECK_INT_EQ(run_main(&out, &err, "list", "--status", "done", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "--status must be") != NULL);
	free(out), free(err);

	/* No daemon: the error names the socket, the cause and the fix. */
	REQUIRE(mkdtemp(dir));
	char *sock = path_join(dir, "holod.sock");
	CHECK_INT_EQ(run_main(&out, &err, "--socket", sock, "status", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, sock) != NULL);
	CHECK(strstr(err, "no such file (is holod running? start it with `holod`") != NULL);
	free(out), free(err);

	/* --socket after the command, and $HOLOD_SOCKET, pick the daemon too. */
	CHECK_INT_EQ(run_main(&out, &err, "list", "--socket", sock, NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, sock) != NULL);
	free(out), free(err);
	setenv(IPC_SOCKET_ENV, sock, 1);
	CHECK_INT_EQ(run_main(&out, &err, "do", "click", "1", "2", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, sock) != NULL);
	free(out), free(err);
	unsetenv(IPC_SOCKET_ENV);

	/* A socket file nobody listens on: a stale socket. */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	REQUIRE(fd >= 0 && strlen(sock) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, sock);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	CHECK_INT_EQ(run_main(&out, &err, "--socket", sock, "status", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, "connection refused (a stale socket") != NULL);
	free(out), free(err);
	unlink(sock);

	/* A path that cannot be a Unix socket. */
	char longpath[200];
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	CHECK_INT_EQ(run_main(&out, &err, "--socket", longpath, "status", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, "too long for a Unix socket") != NULL);
	free(out), free(err);

	/* Usage errors are found before any connection is tried. */
	CHECK_INT_EQ(run_main(&out, &err, "--socket", sock, "do", "hotkey", "ctr", NULL), CLI_EXIT_USAGE);
	CHECK(strstr(err, "is holod running") == NULL);
	free(out), free(err);

	rmdir(dir);
	free(sock);
}

int main(void)
{
	log_set_program_name("test-cli-unit");
	REQUIRE(cli_http_global_init() == 0);
	test_do_mapping();
	test_do_errors();
	test_do_papercuts();
	test_do_desktop();
	test_do_nano();
	test_run_parse();
	test_run_errors();
	test_script_file();
	test_table();
	test_format();
	test_wrap();
	test_status_summary();
	test_age();
	test_mcp_tools();
	test_main();
	cli_http_global_cleanup();
	return test_exit();
}
