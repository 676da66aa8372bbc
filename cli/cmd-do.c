/* holoctl do: run one action now (POST /v1/actions).
 *
 * The arguments become a struct ipc_action, serialized and validated by the ipc module, so the
 * CLI accepts exactly what holod accepts and reports a bad key name or coordinate before sending.
 */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "keys.h"

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
        {0},
};

/* Tools as typed on the command line, with the click aliases. */
static const struct {
	const char *name;
	enum ipc_tool tool;
	int button; /* -1: from --button */
	const char *args;
	int min_args, max_args;
} do_tools[] = {
        {"click", IPC_TOOL_CLICK, -1, "X Y", 2, 2},
        {"right_click", IPC_TOOL_CLICK, IPC_BUTTON_RIGHT, "X Y", 2, 2},
        {"middle_click", IPC_TOOL_CLICK, IPC_BUTTON_MIDDLE, "X Y", 2, 2},
        {"double_click", IPC_TOOL_DOUBLE_CLICK, -1, "X Y", 2, 2},
        {"triple_click", IPC_TOOL_TRIPLE_CLICK, -1, "X Y", 2, 2},
        {"move", IPC_TOOL_MOVE, -1, "X Y", 2, 2},
        {"drag", IPC_TOOL_DRAG, -1, "X Y X2 Y2", 4, 4},
        {"scroll", IPC_TOOL_SCROLL, -1, "X Y up|down|left|right [NOTCHES]", 3, 4},
        {"write", IPC_TOOL_WRITE, -1, "TEXT", 1, 1},
        {"hotkey", IPC_TOOL_HOTKEY, -1, "KEY[+KEY...] [KEY...]", 1, IPC_MAX_HOTKEY_KEYS},
        {"key_down", IPC_TOOL_KEY_DOWN, -1, "KEY", 1, 1},
        {"key_up", IPC_TOOL_KEY_UP, -1, "KEY", 1, 1},
        {"wait", IPC_TOOL_WAIT, -1, "SECONDS", 1, 1},
        {"launch", IPC_TOOL_LAUNCH, -1, "[--title RE] [--class RE] -- PROGRAM [ARG...]", 1,
         IPC_MAX_LAUNCH_ARGS},
        {"wait_for", IPC_TOOL_WAIT_FOR, -1,
         "window|window_gone|focus --title/--class/--instance RE | screen_stable MS | "
         "region_changed X Y W H",
         1, 5},
        {"activate", IPC_TOOL_ACTIVATE, -1, "--title/--class/--instance RE", 0, 0},
        {"hold_and_tap_key", IPC_TOOL_HOLD_AND_TAP_KEY, -1, "HOLD[+HOLD...] TAP [TAP...]", 2,
         1 + IPC_MAX_TAP_KEYS},
        {"drag_to", IPC_TOOL_DRAG_TO, -1, "X Y", 2, 2},
        {"update_plan", IPC_TOOL_UPDATE_PLAN, -1, "STATUS:TITLE [STATUS:TITLE...]", 1,
         IPC_MAX_PLAN_GOALS},
};

/* A number of seconds for --timeout: 0.001..IPC_MAX_WAIT_FOR_MS / 1000. */
static int parse_timeout(struct cli_context *ctx, const char *s, uint32_t *ret_ms)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v * 1000.0 >= 1.0) || v * 1000.0 > IPC_MAX_WAIT_FOR_MS)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--timeout takes seconds, more than 0 and at most %d, not '%s'",
		                       IPC_MAX_WAIT_FOR_MS / 1000, s);
	*ret_ms = (uint32_t)lround(v * 1000.0);
	return 0;
}

static int parse_coord(struct cli_context *ctx, const char *what, const char *s, int *ret)
{
	long v;
	if (cli_parse_int(s, 0, IPC_MAX_PIXEL_COORD, &v) < 0)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "%s must be an integer from 0 to %d, not '%s'", what,
		                       IPC_MAX_PIXEL_COORD, s);
	*ret = (int)v;
	return 0;
}

/* Splits "ctrl+shift+t" (and further arguments) into a->keys. */
static int parse_keys(struct cli_context *ctx, int n, char **args, struct ipc_action *a)
{
	for (int i = 0; i < n; i++) {
		const char *p = args[i];
		for (;;) {
			const char *plus = strchr(p, '+');
			size_t len = plus ? (size_t)(plus - p) : strlen(p);
			if (len == 0)
				return cli_usage_error(
				        ctx, &cli_cmd_do,
				        "empty key name in '%s' (write the plus key as 'plus')",
				        args[i]);
			if (a->n_keys == IPC_MAX_HOTKEY_KEYS)
				return cli_usage_error(ctx, &cli_cmd_do,
				                       "a hotkey has at most %d keys",
				                       IPC_MAX_HOTKEY_KEYS);
			a->keys[a->n_keys++] = xstrndup(p, len);
			if (!plus)
				break;
			p = plus + 1;
		}
	}
	return 0;
}

int cli_do_build_request(struct cli_context *ctx, int argc, char **argv, char **ret_body)
{
	struct ipc_action a = {0};
	struct ipc_task_request *check = NULL;
	enum ipc_coords coords = IPC_COORDS_PIXELS;
	const char *element = NULL, *display = NULL, *target = NULL, *target2 = NULL;
	struct ipc_window_match match = {0}; /* borrowed from argv; copied into the action */
	uint32_t timeout_ms = IPC_DEFAULT_WAIT_FOR_MS;
	bool has_timeout = false;
	int button = -1, settle_ms = -1, c, r;
	long repeat = 0, v;
	bool dry_run = false, enter = false, overwrite = false;
	char *action_json = NULL, *body = NULL;
	char errbuf[CLI_MAX_ERROR_LEN];
	json_t *req = NULL, *action = NULL;
	json_error_t jerr;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, do_options, NULL)) != -1) {
		switch (c) {
		case OPT_BUTTON:
			button = ipc_button_from_string(optarg);
			if (button < 0)
				return cli_usage_error(
				        ctx, &cli_cmd_do,
				        "--button must be left, right or middle, not '%s'", optarg);
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
			if (cli_parse_int(optarg, 1, IPC_MAX_HOTKEY_REPEAT, &repeat) < 0)
				return cli_usage_error(ctx, &cli_cmd_do,
				                       "--repeat must be from 1 to %d, not '%s'",
				                       IPC_MAX_HOTKEY_REPEAT, optarg);
			break;
		case OPT_COORDS:
			r = ipc_coords_from_string(optarg);
			if (r < 0)
				return cli_usage_error(ctx, &cli_cmd_do,
				                       "--coords must be pixels or model, not '%s'",
				                       optarg);
			coords = (enum ipc_coords)r;
			break;
		case OPT_DRY_RUN:
			dry_run = true;
			break;
		case OPT_SETTLE_MS:
			if (cli_parse_int(optarg, 0, IPC_MAX_SETTLE_MS, &v) < 0)
				return cli_usage_error(ctx, &cli_cmd_do,
				                       "--settle-ms must be from 0 to %d, not '%s'",
				                       IPC_MAX_SETTLE_MS, optarg);
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
			match.title = optarg; /* regexes: checked by ipc with the request */
			break;
		case OPT_CLASS:
			match.class_name = optarg;
			break;
		case OPT_INSTANCE:
			match.instance = optarg;
			break;
		case OPT_TIMEOUT:
			if ((r = parse_timeout(ctx, optarg, &timeout_ms)) != 0)
				return r;
			has_timeout = true;
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_do, c, argv);
			if (r == CLI_EXIT_OK) {
				*ret_body = NULL;
				return CLI_EXIT_OK;
			}
			if (r >= 0)
				return r;
			break;
		}
	}

	int nargs = argc - optind;
	char **args = argv + optind;
	if (nargs < 1)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "which action? e.g. `holoctl do click 640 400`");

	size_t t;
	for (t = 0; t < ARRAY_SIZE(do_tools); t++)
		if (strcmp(do_tools[t].name, args[0]) == 0)
			break;
	if (t == ARRAY_SIZE(do_tools))
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "unknown action '%s' (one of click, right_click, "
		                       "middle_click, double_click, triple_click, move, drag, "
		                       "scroll, write, hotkey, key_down, key_up, wait, launch, "
		                       "wait_for, activate, hold_and_tap_key, drag_to, update_plan)",
		                       args[0]);
	nargs--;
	args++;
	/* A target stands for X Y (a drag's --target2 for X2 Y2). */
	const bool targeted = target || target2;
	const enum ipc_tool tool = do_tools[t].tool;
	if (targeted && tool != IPC_TOOL_CLICK && tool != IPC_TOOL_DOUBLE_CLICK &&
	    tool != IPC_TOOL_MOVE && tool != IPC_TOOL_DRAG)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--target applies to click, double_click, move and drag");
	if (target2 && tool != IPC_TOOL_DRAG)
		return cli_usage_error(ctx, &cli_cmd_do, "--target2 applies to drag only");
	if (targeted && nargs > 0)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "give either --target or coordinates, not both");
	const bool matches = match.title || match.class_name || match.instance;
	if (matches && tool != IPC_TOOL_LAUNCH && tool != IPC_TOOL_WAIT_FOR &&
	    tool != IPC_TOOL_ACTIVATE)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--title, --class and --instance apply to launch, wait_for "
		                       "and activate");
	if (has_timeout && tool != IPC_TOOL_LAUNCH && tool != IPC_TOOL_WAIT_FOR &&
	    tool != IPC_TOOL_ACTIVATE)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--timeout applies to launch, wait_for and activate");
	if (!targeted && (nargs < do_tools[t].min_args || nargs > do_tools[t].max_args))
		return cli_usage_error(
		        ctx, &cli_cmd_do, "usage: holoctl do %s %s%s", do_tools[t].name,
		        do_tools[t].args,
		        do_tools[t].tool == IPC_TOOL_WRITE && nargs > 1 ? " (quote the text)" : "");

	a.tool = do_tools[t].tool;
	if (button >= 0 && (a.tool != IPC_TOOL_CLICK || do_tools[t].button >= 0))
		return cli_usage_error(ctx, &cli_cmd_do, "--button applies to click only");
	if ((enter || overwrite) && a.tool != IPC_TOOL_WRITE)
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--enter and --overwrite apply to write only");
	if (repeat && a.tool != IPC_TOOL_HOTKEY)
		return cli_usage_error(ctx, &cli_cmd_do, "--repeat applies to hotkey only");
	if (element && !ipc_tool_has_point(a.tool))
		return cli_usage_error(ctx, &cli_cmd_do,
		                       "--element applies to pointer actions only");

	r = 0;
	switch (a.tool) {
	case IPC_TOOL_CLICK:
		a.button = (enum ipc_button)(do_tools[t].button >= 0 ? do_tools[t].button
		                             : button >= 0           ? button
		                                                     : IPC_BUTTON_LEFT);
		/* fall through */
	case IPC_TOOL_DOUBLE_CLICK:
	case IPC_TOOL_TRIPLE_CLICK:
	case IPC_TOOL_MOVE:
		if (targeted) {
			a.target = xstrdup(target);
			break;
		}
		r = parse_coord(ctx, "X", args[0], &a.x);
		if (r == 0)
			r = parse_coord(ctx, "Y", args[1], &a.y);
		break;
	case IPC_TOOL_DRAG:
		if (targeted) {
			/* ipc says when one end is missing. */
			a.target = target ? xstrdup(target) : NULL;
			a.target2 = target2 ? xstrdup(target2) : NULL;
			break;
		}
		r = parse_coord(ctx, "X", args[0], &a.x);
		if (r == 0)
			r = parse_coord(ctx, "Y", args[1], &a.y);
		if (r == 0)
			r = parse_coord(ctx, "X2", args[2], &a.x2);
		if (r == 0)
			r = parse_coord(ctx, "Y2", args[3], &a.y2);
		break;
	case IPC_TOOL_SCROLL:
		r = parse_coord(ctx, "X", args[0], &a.x);
		if (r == 0)
			r = parse_coord(ctx, "Y", args[1], &a.y);
		if (r != 0)
			break;
		r = ipc_direction_from_string(args[2]);
		if (r < 0) {
			r = cli_usage_error(
			        ctx, &cli_cmd_do,
			        "scroll direction must be up, down, left or right, not '%s'",
			        args[2]);
			break;
		}
		a.direction = (enum ipc_direction)r;
		r = 0;
		a.scroll_size = IPC_DEFAULT_SCROLL_SIZE;
		if (nargs == 4) {
			if (cli_parse_int(args[3], 1, IPC_MAX_SCROLL_SIZE, &v) < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
				                    "scroll notches must be from 1 to %d, not '%s'",
				                    IPC_MAX_SCROLL_SIZE, args[3]);
				break;
			}
			a.scroll_size = (int)v;
		}
		break;
	case IPC_TOOL_WRITE: {
		/* Text the display cannot type is the user's mistake: say where, before JSON (which
		 * cannot carry invalid UTF-8) is even built. */
		char why[160];
		if (keys_text_validate(args[0], why, sizeof(why)) < 0) {
			r = cli_usage_error(ctx, &cli_cmd_do, "write: %s", why);
			break;
		}
		a.content = xstrdup(args[0]);
		a.press_enter = enter;
		a.overwrite = overwrite;
		break;
	}
	case IPC_TOOL_HOTKEY:
		r = parse_keys(ctx, nargs, args, &a);
		a.repeat_count = repeat ? (int)repeat : 1;
		break;
	case IPC_TOOL_KEY_DOWN:
	case IPC_TOOL_KEY_UP:
		a.key = xstrdup(args[0]);
		break;
	case IPC_TOOL_HOLD_AND_TAP_KEY: {
		/* "ctrl+shift" then the tap keys; ipc checks every name. */
		struct ipc_action hold = {0};
		r = parse_keys(ctx, 1, args, &hold);
		if (r == 0 && hold.n_keys > IPC_MAX_HOLD_KEYS)
			r = cli_usage_error(ctx, &cli_cmd_do, "hold_and_tap_key holds at most %d keys",
			                    IPC_MAX_HOLD_KEYS);
		for (size_t i = 0; i < hold.n_keys; i++) {
			if (r == 0)
				a.hold_keys[a.n_hold_keys++] = hold.keys[i];
			else
				free(hold.keys[i]);
		}
		for (int i = 1; r == 0 && i < nargs; i++)
			a.tap_keys[a.n_tap_keys++] = xstrdup(args[i]);
		break;
	}
	case IPC_TOOL_DRAG_TO:
		r = parse_coord(ctx, "X", args[0], &a.x);
		if (r == 0)
			r = parse_coord(ctx, "Y", args[1], &a.y);
		break;
	case IPC_TOOL_UPDATE_PLAN:
		a.goals = xcalloc((size_t)nargs, sizeof(*a.goals));
		for (int i = 0; i < nargs && r == 0; i++) {
			const char *colon = strchr(args[i], ':');
			char status[16];
			size_t n = colon ? (size_t)(colon - args[i]) : 0;
			snprintf(status, sizeof(status), "%.*s", (int)MIN(n, sizeof(status) - 1),
			         args[i]);
			int st = colon && n < sizeof(status) ? ipc_goal_status_from_string(status) :
			                                         -EINVAL;
			if (st < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
				                    "a goal is STATUS:TITLE with STATUS todo, running, "
				                    "done or failed, not '%s'", args[i]);
				break;
			}
			a.goals[a.n_goals].status = (enum ipc_goal_status)st;
			a.goals[a.n_goals++].title = xstrdup(colon + 1);
		}
		break;
	case IPC_TOOL_WAIT: {
		char *end;
		double s = strtod(args[0], &end);
		if (end == args[0] || *end || !(s > 0) || s * 1000.0 > IPC_MAX_WAIT_MS) {
			r = cli_usage_error(
			        ctx, &cli_cmd_do,
			        "wait takes seconds, more than 0 and at most %d, not '%s'",
			        IPC_MAX_WAIT_MS / 1000, args[0]);
			break;
		}
		a.duration_ms = (uint32_t)lround(s * 1000.0);
		if (a.duration_ms == 0)
			a.duration_ms = 1;
		break;
	}
	case IPC_TOOL_LAUNCH:
		a.argv = xcalloc((size_t)nargs + 1, sizeof(*a.argv));
		for (int i = 0; i < nargs; i++)
			a.argv[a.argc++] = xstrdup(args[i]);
		a.has_match = matches;
		a.timeout_ms = timeout_ms;
		break;
	case IPC_TOOL_WAIT_FOR: {
		int k;
		for (k = 0; ipc_wait_kind_to_string((enum ipc_wait_kind)k); k++)
			if (strcmp(args[0], ipc_wait_kind_to_string((enum ipc_wait_kind)k)) == 0)
				break;
		if (!ipc_wait_kind_to_string((enum ipc_wait_kind)k)) {
			r = cli_usage_error(ctx, &cli_cmd_do,
			                    "wait_for takes window, window_gone, focus, screen_stable "
			                    "or region_changed, not '%s'", args[0]);
			break;
		}
		a.wait_kind = (enum ipc_wait_kind)k;
		a.timeout_ms = timeout_ms;
		int want = a.wait_kind == IPC_WAIT_SCREEN_STABLE ? 2 :
		           a.wait_kind == IPC_WAIT_REGION_CHANGED ? 5 : 1;
		if (nargs != want || (want == 1) != matches) {
			r = cli_usage_error(ctx, &cli_cmd_do, "usage: holoctl do wait_for %s",
			                    want == 2 ? "screen_stable MS" :
			                    want == 5 ? "region_changed X Y WIDTH HEIGHT" :
			                                "window|window_gone|focus --title/--class/"
			                                "--instance RE");
			break;
		}
		a.has_match = matches;
		if (want == 2) {
			if (cli_parse_int(args[1], IPC_MIN_STABLE_MS, IPC_MAX_STABLE_MS, &v) < 0) {
				r = cli_usage_error(ctx, &cli_cmd_do,
				                    "screen_stable takes milliseconds from %d to %d, "
				                    "not '%s'", IPC_MIN_STABLE_MS, IPC_MAX_STABLE_MS,
				                    args[1]);
				break;
			}
			a.stable_ms = (uint32_t)v;
		}
		if (want == 5) {
			int *dst[] = {&a.rx, &a.ry, &a.rw, &a.rh};
			for (int i = 0; i < 4 && r == 0; i++)
				r = parse_coord(ctx, "region_changed's X, Y, WIDTH and HEIGHT",
				                args[1 + i], dst[i]);
		}
		break;
	}
	case IPC_TOOL_ACTIVATE:
		if (!matches) {
			r = cli_usage_error(ctx, &cli_cmd_do,
			                    "activate needs --title, --class or --instance");
			break;
		}
		a.has_match = true;
		a.timeout_ms = timeout_ms;
		break;
	default:
		r = cli_usage_error(ctx, &cli_cmd_do, "'%s' cannot be run with do", args[0]);
		break;
	}
	if (r != 0)
		goto cleanup_action;
	if (element && ipc_tool_has_point(a.tool))
		a.element = xstrdup(element);
	if (a.has_match) {
		a.match.title = match.title ? xstrdup(match.title) : NULL;
		a.match.class_name = match.class_name ? xstrdup(match.class_name) : NULL;
		a.match.instance = match.instance ? xstrdup(match.instance) : NULL;
	}

	action_json = ipc_action_to_json(&a);
	if (!action_json) {
		r = cli_error(ctx, "cannot serialize the action: %s", strerror(errno));
		goto cleanup_action;
	}
	action = json_loads(action_json, 0, &jerr);
	if (!action) {
		r = cli_error(ctx, "cannot serialize the action: %s", jerr.text);
		goto cleanup_action;
	}
	req = json_pack("{s:O, s:s, s:b}", "action", action, "coords", ipc_coords_to_string(coords),
	                "dry_run", dry_run);
	if (req && settle_ms >= 0)
		json_object_set_new(req, "settle_ms", json_integer(settle_ms));
	if (req && display)
		json_object_set_new(req, "display", json_string(display));
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (!body) {
		r = cli_error(ctx, "out of memory");
		goto cleanup_json;
	}
	r = ipc_action_request_parse(body, strlen(body), &check, errbuf, sizeof(errbuf));
	if (r < 0) {
		r = cli_usage_error(ctx, &cli_cmd_do, "%s", errbuf);
		free(body);
		goto cleanup_json;
	}
	ipc_task_request_destroy(check);
	*ret_body = body;
	r = 0;

cleanup_json:
	json_decref(req);
	json_decref(action);
cleanup_action:
	free(action_json);
	ipc_action_finish(&a);
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
                "\n"
                "Actions:\n"
                "  click X Y [--button left|right|middle]   right_click X Y   middle_click X Y\n"
                "  double_click X Y     triple_click X Y     move X Y     drag X Y X2 Y2\n"
                "  scroll X Y up|down|left|right [NOTCHES]  (default 5 notches, at most 100)\n"
                "  write TEXT [--enter] [--overwrite]       (--overwrite selects all first)\n"
                "  hotkey KEY[+KEY...] [--repeat N]         e.g. ctrl+s, ctrl+shift+t, Return\n"
                "  key_down KEY     key_up KEY              wait SECONDS (at most 30)\n"
                "  hold_and_tap_key HOLD[+HOLD...] TAP [TAP...]  e.g. alt tab tab: hold, tap each\n"
                "  drag_to X Y            drag from where the pointer is to X Y\n"
                "  update_plan STATUS:TITLE...  journal a plan (todo|running|done|failed), "
                "no input\n"
                "  click/double_click/move --target TEXT    drag --target TEXT --target2 TEXT\n"
                "                         the model locates TEXT on the screen (needs --model)\n"
                "  launch [--class RE] [--title RE] -- PROGRAM [ARG...]\n"
                "                         start it on the display; wait for its window if asked\n"
                "  wait_for window|window_gone|focus --title/--class/--instance RE\n"
                "  wait_for screen_stable MS            wait_for region_changed X Y W H\n"
                "  activate --title/--class/--instance RE  raise and focus a window\n"
                "  (RE: a PCRE2 regex; --timeout SECONDS, default 10, at most 600)\n"
                "\n"
                "Options:\n"
                "  --coords pixels|model  X Y are root-window pixels (default) or 0..1000 model "
                "space\n"
                "  --element TEXT         describe the target (journaled with the step)\n"
                "  --dry-run              journal the action without injecting it\n"
                "  --settle-ms N          wait N ms after the action before the screenshot\n"
                "  --display NAME         run it on this display of holod's (default: the first "
                "free)\n"
                "  --json                 print holod's JSON answer\n"
                "Text starting with '-' goes after `--`: holoctl do write -- \"-1\"\n"
                "Each action is a task of its own, and holod releases held keys when a task ends: "
                "to\n"
                "hold a key across actions, put key_down ... key_up in a script (holoctl run).\n",
        .run = do_run,
};
