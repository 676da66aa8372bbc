/* holoctl do: run one action now (POST /v1/actions).
 *
 * The arguments become a struct ipc_action, serialized and validated by the ipc module, so the
 * CLI accepts exactly what holod accepts and reports a bad key name or coordinate before sending.
 */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "keys.h"

#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_BUTTON = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_ELEMENT,
	OPT_ENTER,
	OPT_OVERWRITE,
	OPT_REPEAT,
	OPT_COORDS,
	OPT_DRY_RUN,
	OPT_SETTLE_MS,
	OPT_DISPLAY,
	OPT_TARGET,
	OPT_TARGET2,
	OPT_TITLE,
	OPT_CLASS,
	OPT_INSTANCE,
	OPT_TIMEOUT,
	OPT_REQUIRE_FOCUS,
};

static const struct option do_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"button", required_argument, NULL, OPT_BUTTON},
	{"element", required_argument, NULL, OPT_ELEMENT},
	{"enter", no_argument, NULL, OPT_ENTER},
	{"overwrite", no_argument, NULL, OPT_OVERWRITE},
	{"repeat", required_argument, NULL, OPT_REPEAT},
	{"coords", required_argument, NULL, OPT_COORDS},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"settle-ms", required_argument, NULL, OPT_SETTLE_MS},
	{"display", required_argument, NULL, OPT_DISPLAY},
	{"target", required_argument, NULL, OPT_TARGET},
	{"target2", required_argument, NULL, OPT_TARGET2},
	{"title", required_argument, NULL, OPT_TITLE},
	{"class", required_argument, NULL, OPT_CLASS},
	{"instance", required_argument, NULL, OPT_INSTANCE},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"require-focus", no_argument, NULL, OPT_REQUIRE_FOCUS},
	{0},
};

/* The click aliases; every other action is a tool of ipc's table that has a command line
 * (struct ipc_tool_cli: its arguments, usage and help). */
static const struct {
	const char *name;
	enum ipc_button button;
} click_aliases[] = {
	{"right_click", IPC_BUTTON_RIGHT},
	{"middle_click", IPC_BUTTON_MIDDLE},
};

/* The tool of an action name typed on the command line, or -EINVAL. */
static int do_tool(const char *name, int *ret_button)
{
	*ret_button = -1;
	for (size_t i = 0; i < ARRAY_SIZE(click_aliases); i++)
		if (strcmp(name, click_aliases[i].name) == 0) {
			*ret_button = (int)click_aliases[i].button;
			return IPC_TOOL_CLICK;
		}
	int t = ipc_tool_from_string(name);
	return t >= 0 && ipc_tool_info((enum ipc_tool)t)->cli.args ? t : -EINVAL;
}

/* The i-th action name `do` takes: the tools with a command line, each click alias after click. */
static const char *do_name_at(size_t i, void *data)
{
	(void)data;
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		if (!ipc_tool_info((enum ipc_tool)t)->cli.args)
			continue;
		if (i-- == 0)
			return ipc_tool_to_string((enum ipc_tool)t);
		if (t == IPC_TOOL_CLICK) {
			if (i < ARRAY_SIZE(click_aliases))
				return click_aliases[i].name;
			i -= ARRAY_SIZE(click_aliases);
		}
	}
	return NULL;
}

/* The rest of `holoctl do --help`: the actions from the tool table, then the options. */
static void print_help(FILE *f)
{
	fprintf(f, "Actions:\n");
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		const struct ipc_tool_cli *cli = &ipc_tool_info((enum ipc_tool)t)->cli;
		if (cli->args && cli->help)
			fputs(cli->help, f);
	}
	fputs("  click/double_click/move --target TEXT    drag --target TEXT --target2 TEXT\n"
	      "                         the model locates TEXT on the screen (needs --model)\n"
	      "  keys                   list the key names (sends nothing)\n"
	      "\n"
	      "Options:\n"
	      "  --coords pixels|model  X Y are root-window pixels (default) or 0..1000 model space\n"
	      "  --element TEXT         describe the target (journaled with the step)\n"
	      "  --dry-run              journal the action without injecting it\n"
	      "  --settle-ms N          wait N ms after the action before the screenshot\n"
	      "  --display NAME         run it on this display of holod's (default: the first free)\n"
	      "  --require-focus        write, hotkey, hold_and_tap_key: fail (exit 1) rather than\n"
	      "                         type when no window has the keyboard focus; without it the\n"
	      "                         keys go to the root window and the step says warning\n"
	      "  --json                 print holod's JSON answer\n"
	      "Text starting with '-' goes after `--`: holoctl do write -- \"-1\" (a negative number\n"
	      "is an argument, not an option).\n"
	      "Each action is a task of its own, and holod releases held keys when a task ends: to\n"
	      "hold a key across actions, put key_down ... key_up in a script (holoctl run).\n",
	      f);
}

/* "--button applies to click only": the tools with a command line that take `member`. */
static int not_for(struct cli_context *ctx, const char *opts, const char *member)
{
	char tools[256] = "";
	size_t n = 0, k = 0;

	for (int t = 0; t < IPC_TOOL_COUNT_; t++)
		n += ipc_tool_info((enum ipc_tool)t)->cli.args && ipc_tool_has_field(t, member);
	for (int t = 0; t < IPC_TOOL_COUNT_; t++) {
		if (!ipc_tool_info((enum ipc_tool)t)->cli.args || !ipc_tool_has_field(t, member))
			continue;
		snprintf(tools + strlen(tools), sizeof(tools) - strlen(tools), "%s%s",
			 k == 0	    ? "" :
			 k + 1 == n ? " and " :
				      ", ",
			 ipc_tool_to_string(t));
		k++;
	}
	return cli_usage_error(ctx, &cli_cmd_do, "%s %s to %s only", opts,
			       strchr(opts, ' ') ? "apply" : "applies", tools);
}

/* A number of seconds: more than 0 and at most max_ms / 1000; the milliseconds, at least 1. */
static bool parse_seconds(const char *s, uint32_t max_ms, uint32_t *ret_ms)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v > 0) || v * 1000.0 > max_ms)
		return false;
	*ret_ms = (uint32_t)MAX(1, lround(v * 1000.0));
	return true;
}

/* A number of seconds for --timeout: 0.001..IPC_MAX_WAIT_FOR_MS / 1000. */
static int parse_timeout(struct cli_context *ctx, const char *s, uint32_t *ret_ms)
{
	if (!parse_seconds(s, IPC_MAX_WAIT_FOR_MS, ret_ms) || strtod(s, NULL) * 1000.0 < 1.0)
		return cli_usage_error(ctx, &cli_cmd_do,
				       "--timeout takes seconds, more than 0 and at most %d, not '%s'",
				       IPC_MAX_WAIT_FOR_MS / 1000, s);
	return 0;
}

static int parse_coord(struct cli_context *ctx, const char *what, const char *s, int *ret)
{
	long v;
	if (cli_parse_int(s, 0, IPC_MAX_PIXEL_COORD, &v) < 0)
		return cli_usage_error(ctx, &cli_cmd_do, "%s must be an integer from 0 to %d, not '%s'", what,
				       IPC_MAX_PIXEL_COORD, s);
	*ret = (int)v;
	return 0;
}

/* The key lists' limits, as holoctl says them. */
static const struct {
	const char *member;
	size_t max;
	const char *says;
} key_lists[] = {
	{"keys", IPC_MAX_HOTKEY_KEYS, "a hotkey has"},
	{"hold_keys", IPC_MAX_HOLD_KEYS, "hold_and_tap_key holds"},
	{"tap_keys", IPC_MAX_TAP_KEYS, "hold_and_tap_key taps"},
};

/* Appends the key names of "ctrl+shift+t" to the array `keys` (at most max in all). */
static int parse_keys(struct cli_context *ctx, const char *arg, json_t *keys, size_t max, const char *says)
{
	for (const char *p = arg;;) {
		const char *plus = strchr(p, '+');
		size_t len = plus ? (size_t)(plus - p) : strlen(p);
		if (len == 0)
			return cli_usage_error(ctx, &cli_cmd_do,
					       "empty key name in '%s' (write the plus key as 'plus')", arg);
		if (json_array_size(keys) == max)
			return cli_usage_error(ctx, &cli_cmd_do, "%s at most %zu keys", says, max);
		json_array_append_new(keys, json_stringn(p, len));
		if (!plus)
			return 0;
		p = plus + 1;
	}
}

/* One positional argument into `member` of the action (an array member takes one element). */
static int fill_member(struct cli_context *ctx, const char *tool, const char *member, const char *arg,
		       json_t *act)
{
	long v;
	int x = 0;

	if (strcmp(member, "x") == 0 || strcmp(member, "y") == 0 || strcmp(member, "x2") == 0 ||
	    strcmp(member, "y2") == 0) {
		char what[4];
		for (size_t i = 0; i < sizeof(what); i++)
			what[i] = (char)toupper((unsigned char)member[i]);
		if (parse_coord(ctx, what, arg, &x) != 0)
			return CLI_EXIT_USAGE;
		return json_object_set_new(act, member, json_integer(x));
	}
	if (strcmp(member, "direction") == 0) {
		if (ipc_direction_from_string(arg) < 0)
			return cli_usage_error(ctx, &cli_cmd_do,
					       "%s direction must be up, down, left or right, not '%s'", tool,
					       arg);
		return json_object_set_new(act, member, json_string(arg));
	}
	if (strcmp(member, "scroll_size") == 0) {
		if (cli_parse_int(arg, 1, IPC_MAX_SCROLL_SIZE, &v) < 0)
			return cli_usage_error(ctx, &cli_cmd_do, "%s notches must be from 1 to %d, not '%s'",
					       tool, IPC_MAX_SCROLL_SIZE, arg);
		return json_object_set_new(act, member, json_integer(v));
	}
	if (strcmp(member, "content") == 0) {
		/* Text the display cannot type is the user's mistake: say where, before JSON
		 * (which cannot carry invalid UTF-8) is even built. */
		char why[160];
		if (keys_text_validate(arg, why, sizeof(why)) < 0)
			return cli_usage_error(ctx, &cli_cmd_do, "%s: %s", tool, why);
		return json_object_set_new(act, member, json_string(arg));
	}
	if (strcmp(member, "duration") == 0) {
		uint32_t ms;
		if (!parse_seconds(arg, IPC_MAX_WAIT_MS, &ms))
			return cli_usage_error(ctx, &cli_cmd_do,
					       "%s takes seconds, more than 0 and at most %d, not '%s'", tool,
					       IPC_MAX_WAIT_MS / 1000, arg);
		return json_object_set_new(act, member, json_real(ms / 1000.0));
	}
	for (size_t i = 0; i < ARRAY_SIZE(key_lists); i++) {
		if (strcmp(member, key_lists[i].member) != 0)
			continue;
		json_t *keys = json_object_get(act, member);
		if (!keys)
			json_object_set_new(act, member, keys = json_array());
		return parse_keys(ctx, arg, keys, key_lists[i].max, key_lists[i].says) == 0 ? 0 :
											      CLI_EXIT_USAGE;
	}
	if (strcmp(member, "goals") == 0) {
		const char *colon = strchr(arg, ':');
		char status[16];
		size_t n = colon ? (size_t)(colon - arg) : 0;
		snprintf(status, sizeof(status), "%.*s", (int)MIN(n, sizeof(status) - 1), arg);
		if (!colon || n >= sizeof(status) || ipc_goal_status_from_string(status) < 0)
			return cli_usage_error(ctx, &cli_cmd_do,
					       "a goal is STATUS:TITLE with STATUS todo, running, done "
					       "or failed, not '%s'",
					       arg);
		json_t *goals = json_object_get(act, member);
		if (!goals)
			json_object_set_new(act, member, goals = json_array());
		return json_array_append_new(goals,
					     json_pack("{s:s, s:s}", "title", colon + 1, "status", status));
	}
	if (strcmp(member, "command") == 0) {
		json_t *argv = json_object_get(act, member);
		if (!argv)
			json_object_set_new(act, member, argv = json_array());
		return json_array_append_new(argv, json_string(arg));
	}
	/* a string member the parser checks (key) */
	return json_object_set_new(act, member, json_string(arg));
}

/* The positional arguments into the members the tool's `fill` names, in order. */
static int fill_args(struct cli_context *ctx, enum ipc_tool tool, int nargs, char **args, json_t *act)
{
	const char *p = ipc_tool_info(tool)->cli.fill, *name = ipc_tool_to_string(tool);
	int i = 0, r;

	while (*p && i < nargs) {
		char member[32];
		size_t len = strcspn(p, " ");
		bool rest = len > 0 && p[len - 1] == '*';
		snprintf(member, sizeof(member), "%.*s", (int)(len - rest), p);
		do {
			if ((r = fill_member(ctx, name, member, args[i++], act)) != 0)
				return r < 0 ? cli_error(ctx, "out of memory") : r;
		} while (rest && i < nargs);
		p += len;
		p += strspn(p, " ");
	}
	return 0;
}

/* wait_for's condition: a window match, or screen_stable MS, or region_changed X Y W H. */
static int fill_wait_for(struct cli_context *ctx, int nargs, char **args, bool matches, json_t *act)
{
	int k, r = 0;
	long v;

	for (k = 0; ipc_wait_kind_to_string((enum ipc_wait_kind)k); k++)
		if (strcmp(args[0], ipc_wait_kind_to_string((enum ipc_wait_kind)k)) == 0)
			break;
	if (!ipc_wait_kind_to_string((enum ipc_wait_kind)k))
		return cli_usage_error(ctx, &cli_cmd_do,
				       "wait_for takes window, window_gone, focus, screen_stable or "
				       "region_changed, not '%s'",
				       args[0]);
	int want = k == IPC_WAIT_SCREEN_STABLE ? 2 : k == IPC_WAIT_REGION_CHANGED ? 5 : 1;
	if (nargs != want || (want == 1) != matches)
		return cli_usage_error(ctx, &cli_cmd_do, "usage: holoctl do wait_for %s",
				       want == 2 ? "screen_stable MS" :
				       want == 5 ? "region_changed X Y WIDTH HEIGHT" :
						   "window|window_gone|focus --title/--class/"
						   "--instance RE");
	if (want == 2) {
		if (cli_parse_int(args[1], IPC_MIN_STABLE_MS, IPC_MAX_STABLE_MS, &v) < 0)
			return cli_usage_error(ctx, &cli_cmd_do,
					       "screen_stable takes milliseconds from %d to %d, not '%s'",
					       IPC_MIN_STABLE_MS, IPC_MAX_STABLE_MS, args[1]);
		json_object_set_new(act, args[0], json_pack("{s:I}", "ms", (json_int_t)v));
	}
	if (want == 5) {
		static const char *const names[] = {"x", "y", "width", "height"};
		json_t *region = json_object();
		json_object_set_new(act, args[0], region);
		for (int i = 0; i < 4 && r == 0; i++) {
			int x = 0;
			r = parse_coord(ctx, "region_changed's X, Y, WIDTH and HEIGHT", args[1 + i], &x);
			if (r == 0)
				json_object_set_new(region, names[i], json_integer(x));
		}
	}
	return r;
}

/* A negative number as an argument ("click -5 10"), not an option, for getopt to leave alone. */
static bool is_negative_number(const char *s)
{
	char *end;
	if (s[0] != '-' || !(isdigit((unsigned char)s[1]) || s[1] == '.'))
		return false;
	(void)strtod(s, &end);
	return *end == '\0';
}

/* Whether argv[i] is the value of the option before it (--settle-ms -1). */
static bool is_option_value(char **argv, int i)
{
	const char *prev = argv[i - 1];
	if (strncmp(prev, "--", 2) != 0 || strchr(prev, '='))
		return false;
	for (const struct option *o = do_options; o->name; o++)
		if (strcmp(prev + 2, o->name) == 0)
			return o->has_arg == required_argument;
	return false;
}

/* `holoctl do keys`: the key names a hotkey, key_down, key_up or hold_and_tap_key takes. */
static int print_keys(struct cli_context *ctx)
{
	size_t col = 0;
	for (size_t i = 0; keys_name(i); i++) {
		size_t n = strlen(keys_name(i));
		if (col && col + 1 + n > 78) {
			fputc('\n', ctx->out);
			col = 0;
		}
		col += (size_t)fprintf(ctx->out, "%s%s", col ? " " : "", keys_name(i));
	}
	fprintf(ctx->out,
		"%s"
		"f1 .. f24, and a single character: a, 1, %%, ...\n"
		"X's own keysym names too: KP_Add, XF86AudioPlay, U2014 (a code point), ...\n"
		"Names are matched without regard to case; join keys pressed together with '+':\n"
		"ctrl+shift+t (the plus key itself is 'plus').\n",
		col ? "\n" : "");
	return CLI_EXIT_OK;
}

int cli_do_build_request(struct cli_context *ctx, int argc, char **argv, char **ret_body)
{
	struct ipc_task_request *check = NULL;
	enum ipc_coords coords = IPC_COORDS_PIXELS;
	const char *element = NULL, *display = NULL, *target = NULL, *target2 = NULL;
	const char *match[3] = {NULL}; /* title, class, instance: borrowed from argv */
	uint32_t timeout_ms = IPC_DEFAULT_WAIT_FOR_MS;
	bool has_timeout = false;
	int button = -1, settle_ms = -1, c, r;
	long repeat = 0, v;
	bool dry_run = false, enter = false, overwrite = false, require_focus = false;
	char *action_json = NULL, *body = NULL;
	char errbuf[CLI_MAX_ERROR_LEN];
	json_t *req = NULL, *act = NULL, *action = NULL;
	json_error_t jerr;

	/* getopt would read "-5" as an option: such arguments travel marked, unmarked after it */
	char **av = xcalloc((size_t)argc + 1, sizeof(*av)),
	     **marked = xcalloc((size_t)argc + 1, sizeof(*marked));
	for (int i = 0, n = 0; i < argc; i++)
		av[i] = i > 0 && is_negative_number(argv[i]) && !is_option_value(argv, i) ?
				(marked[n++] = xasprintf("\x1f%s", argv[i])) :
				argv[i];

	cli_getopt_reset();
	while ((c = getopt_long(argc, av, CLI_COMMON_SHORT_OPTIONS, do_options, NULL)) != -1) {
		switch (c) {
		case OPT_BUTTON:
			button = ipc_button_from_string(optarg);
			if (button < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
						    "--button must be left, right or middle, not '%s'",
						    optarg);
				goto out;
			}
			break;
		case OPT_ELEMENT:
			element = optarg;
			break;
		case OPT_ENTER:
			enter = true;
			break;
		case OPT_OVERWRITE:
			overwrite = true;
			break;
		case OPT_REPEAT:
			if (cli_parse_int(optarg, 1, IPC_MAX_HOTKEY_REPEAT, &repeat) < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
						    "--repeat must be from 1 to %d, not '%s'",
						    IPC_MAX_HOTKEY_REPEAT, optarg);
				goto out;
			}
			break;
		case OPT_COORDS:
			r = ipc_coords_from_string(optarg);
			if (r < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
						    "--coords must be pixels or model, not '%s'", optarg);
				goto out;
			}
			coords = (enum ipc_coords)r;
			break;
		case OPT_DRY_RUN:
			dry_run = true;
			break;
		case OPT_REQUIRE_FOCUS:
			require_focus = true;
			break;
		case OPT_SETTLE_MS:
			if (cli_parse_int(optarg, 0, IPC_MAX_SETTLE_MS, &v) < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
						    "--settle-ms must be from 0 to %d, not '%s'",
						    IPC_MAX_SETTLE_MS, optarg);
				goto out;
			}
			settle_ms = (int)v;
			break;
		case OPT_DISPLAY:
			display = optarg; /* checked with the whole request below */
			break;
		case OPT_TARGET:
			target = optarg;
			break;
		case OPT_TARGET2:
			target2 = optarg;
			break;
		case OPT_TITLE:
		case OPT_CLASS:
		case OPT_INSTANCE:
			match[c - OPT_TITLE] = optarg; /* regexes: checked by ipc with the request */
			break;
		case OPT_TIMEOUT:
			if ((r = parse_timeout(ctx, optarg, &timeout_ms)) != 0)
				goto out;
			has_timeout = true;
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_do, c, av);
			if (r == CLI_EXIT_OK) {
				*ret_body = NULL;
				goto out;
			}
			if (r >= 0)
				goto out;
			break;
		}
	}

	int nargs = argc - optind;
	char **args = av + optind;
	for (int i = 0; i < nargs; i++)
		if (args[i][0] == '\x1f')
			args[i]++;
	if (nargs < 1) {
		r = cli_usage_error(ctx, &cli_cmd_do, "which action? e.g. `holoctl do click 640 400`");
		goto out;
	}
	if (strcmp(args[0], "keys") == 0) {
		*ret_body = NULL;
		r = nargs == 1 ? print_keys(ctx) :
				 cli_usage_error(ctx, &cli_cmd_do,
						 "usage: holoctl do keys (no "
						 "arguments): it lists the key names");
		goto out;
	}

	int alias_button, t = do_tool(args[0], &alias_button);
	if (t < 0) {
		char names[512] = "";
		const char *near = ipc_did_you_mean(args[0], do_name_at, NULL);
		for (size_t i = 0; do_name_at(i, NULL); i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
				 do_name_at(i, NULL));
		r = cli_usage_error(ctx, &cli_cmd_do, "unknown action '%s'%s%s%s (one of %s)", args[0],
				    near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "", names);
		goto out;
	}
	const enum ipc_tool tool = (enum ipc_tool)t;
	const struct ipc_tool_cli *cli = &ipc_tool_info(tool)->cli;
	nargs--;
	args++;

	/* A target stands for X Y (a drag's --target2 for X2 Y2). */
	const bool targeted = target || target2;
	const bool matches = match[0] || match[1] || match[2];
	r = 0;
	if (target && !ipc_tool_has_field(tool, "target"))
		r = not_for(ctx, "--target", "target");
	else if (target2 && !ipc_tool_has_field(tool, "target2"))
		r = not_for(ctx, "--target2", "target2");
	else if (targeted && nargs > 0)
		r = cli_usage_error(ctx, &cli_cmd_do, "give either --target or coordinates, not both");
	else if (matches && !ipc_tool_has_field(tool, "wait_window") && !ipc_tool_has_field(tool, "window"))
		r = cli_usage_error(ctx, &cli_cmd_do,
				    "--title, --class and --instance apply to launch, wait_for and "
				    "activate");
	else if (has_timeout && !ipc_tool_has_field(tool, "timeout"))
		r = not_for(ctx, "--timeout", "timeout");
	else if (!targeted && (nargs < cli->min_args || nargs > cli->max_args))
		r = cli_usage_error(ctx, &cli_cmd_do, "usage: holoctl do %s %s%s", args[-1], cli->args,
				    ipc_tool_has_field(tool, "content") && nargs > 1 ? " (quote the text)" :
										       "");
	else if (button >= 0 && (!ipc_tool_has_field(tool, "button") || alias_button >= 0))
		r = not_for(ctx, "--button", "button");
	else if ((enter || overwrite) && !ipc_tool_has_field(tool, "press_enter"))
		r = not_for(ctx, "--enter and --overwrite", "press_enter");
	else if (repeat && !ipc_tool_has_field(tool, "repeat_count"))
		r = not_for(ctx, "--repeat", "repeat_count");
	else if (element && !ipc_tool_has_field(tool, "element"))
		r = cli_usage_error(ctx, &cli_cmd_do, "--element applies to pointer actions only");
	else if (ipc_tool_has_field(tool, "window") && !ipc_tool_has_field(tool, "focus") && !matches)
		r = cli_usage_error(ctx, &cli_cmd_do, "%s needs --title, --class or --instance", args[-1]);
	if (r != 0)
		goto out;

	act = json_pack("{s:s}", "tool_name", ipc_tool_to_string(tool));
	if (!act) {
		r = cli_error(ctx, "out of memory");
		goto out;
	}
	if (targeted) {
		/* ipc says when one end of a drag is missing */
		if (target)
			json_object_set_new(act, "target", json_string(target));
		if (target2)
			json_object_set_new(act, "target2", json_string(target2));
	} else if (cli->fill) {
		r = fill_args(ctx, tool, nargs, args, act);
	} else {
		r = fill_wait_for(ctx, nargs, args, matches, act);
	}
	if (r != 0)
		goto out;
	if (alias_button >= 0 || button >= 0)
		json_object_set_new(act, "button",
				    json_string(ipc_button_to_string(
					    (enum ipc_button)(alias_button >= 0 ? alias_button : button))));
	if (enter)
		json_object_set_new(act, "press_enter", json_true());
	if (overwrite)
		json_object_set_new(act, "overwrite", json_true());
	if (repeat)
		json_object_set_new(act, "repeat_count", json_integer(repeat));
	if (element)
		json_object_set_new(act, "element", json_string(element));
	if (matches) {
		static const char *const names[] = {"title", "class", "instance"};
		json_t *m = json_object();
		for (int i = 0; i < 3; i++)
			if (match[i])
				json_object_set_new(m, names[i], json_string(match[i]));
		json_object_set_new(act,
				    tool == IPC_TOOL_WAIT_FOR		    ? args[0] :
				    ipc_tool_has_field(tool, "wait_window") ? "wait_window" :
									      "window",
				    m);
	}
	if (ipc_tool_has_field(tool, "timeout"))
		json_object_set_new(act, "timeout", json_real(timeout_ms / 1000.0));

	/* ipc is the judge (key names, regexes, ranges in model space), and writes the action
	 * with its defaults */
	req = json_pack("{s:O, s:s, s:b}", "action", act, "coords", ipc_coords_to_string(coords), "dry_run",
			dry_run);
	if (req && settle_ms >= 0)
		json_object_set_new(req, "settle_ms", json_integer(settle_ms));
	if (req && display)
		json_object_set_new(req, "display", json_string(display));
	if (req && require_focus)
		json_object_set_new(req, "require_focus", json_true());
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (!body) {
		r = cli_error(ctx, "out of memory");
		goto out;
	}
	r = ipc_action_request_parse(body, strlen(body), &check, errbuf, sizeof(errbuf));
	free(body);
	body = NULL;
	if (r < 0) {
		r = cli_usage_error(ctx, &cli_cmd_do, "%s", errbuf);
		goto out;
	}
	action_json = ipc_action_to_json(&check->actions[0]);
	action = action_json ? json_loads(action_json, 0, &jerr) : NULL;
	if (!action) {
		r = cli_error(ctx, "cannot serialize the action: %s", strerror(errno));
		goto out;
	}
	json_object_set(req, "action", action);
	body = json_dumps(req, JSON_COMPACT);
	if (!body) {
		r = cli_error(ctx, "out of memory");
		goto out;
	}
	*ret_body = body;
	r = 0;

out:
	ipc_task_request_destroy(check);
	json_decref(req);
	json_decref(act);
	json_decref(action);
	free(action_json);
	for (int i = 0; marked[i]; i++)
		free(marked[i]);
	free(marked);
	free(av);
	return r;
}

static int do_run(struct cli_context *ctx, int argc, char **argv)
{
	char *body = NULL;
	json_t *answer = NULL;
	int r;

	r = cli_do_build_request(ctx, argc, argv, &body);
	if (r != 0 || !body)
		return r;
	r = cli_api_json(ctx, "POST", IPC_API_PREFIX "/actions", body, &answer);
	if (r == 0 && !ctx->json)
		r = cli_print_action_answer(ctx, answer);
	json_decref(answer);
	free(body);
	return r;
}

const struct cli_command cli_cmd_do = {
	.name = "do",
	.args = "[options] ACTION ARGS...",
	.summary = "run one action now",
	.help = "Runs one action of the tool vocabulary now, on the display's queue (it waits for "
		"a\n"
		"running task to finish), and journals it as a one-step task.\n"
		"\n",
	.help_more = print_help,
	.run = do_run,
};
