/* holoctl windows: the client windows on a display and the pointer (GET /v1/windows), as
 * `wmctrl -lpGx` lists them; the same lines are the text of holoctl mcp's `windows` tool. */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_DISPLAY = CLI_OPT_FIRST_COMMAND_OPTION };

static const struct option windows_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"display", required_argument, NULL, OPT_DISPLAY},
	{0},
};

/* A member as text: the string, the integer in decimal, or "-" for null or absent. */
static void member_text(json_t *o, const char *name, char *buf, size_t size)
{
	json_t *v = json_object_get(o, name);

	if (json_is_string(v))
		snprintf(buf, size, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		snprintf(buf, size, "-");
}

void cli_print_windows(FILE *out, json_t *answer, unsigned width)
{
	static const char *const headers[] = {"", "ID", "DESKTOP", "PID", "CLASS", "GEOMETRY", "TITLE"};
	json_t *windows = json_object_get(answer, "windows"), *w;
	json_t *pointer = json_object_get(answer, "pointer");
	size_t i;

	if (json_array_size(windows) == 0) {
		fprintf(out, "no client windows\n");
	} else {
		struct cli_table *t = cli_table_create(ARRAY_SIZE(headers), headers);
		cli_table_set_align(t, 2, CLI_ALIGN_RIGHT);
		cli_table_set_align(t, 3, CLI_ALIGN_RIGHT);
		cli_table_set_flexible(t, 4);
		cli_table_set_flexible(t, 6);
		cli_table_set_width(t, width);
		json_array_foreach(windows, i, w)
		{
			char id[24], desktop[24], pid[24], geometry[96], *cls;
			json_t *desk = json_object_get(w, "desktop");
			snprintf(id, sizeof(id), "0x%08llx",
				 (unsigned long long)json_integer_value(json_object_get(w, "id")));
			/* wmctrl's -1 for a window on every desktop. */
			if (json_is_integer(desk) && json_integer_value(desk) < 0)
				snprintf(desktop, sizeof(desktop), "all");
			else
				member_text(w, "desktop", desktop, sizeof(desktop));
			member_text(w, "pid", pid, sizeof(pid));
			snprintf(geometry, sizeof(geometry),
				 "%" JSON_INTEGER_FORMAT "x%" JSON_INTEGER_FORMAT "%+" JSON_INTEGER_FORMAT
				 "%+" JSON_INTEGER_FORMAT,
				 json_integer_value(json_object_get(w, "width")),
				 json_integer_value(json_object_get(w, "height")),
				 json_integer_value(json_object_get(w, "x")),
				 json_integer_value(json_object_get(w, "y")));
			const char *inst = json_string_value(json_object_get(w, "instance"));
			const char *klass = json_string_value(json_object_get(w, "class"));
			cls = xasprintf("%s.%s", inst ? inst : "", klass ? klass : "");
			const char *row[] = {json_is_true(json_object_get(w, "focused")) ? "*" : "",
					     id,
					     desktop,
					     pid,
					     cls,
					     geometry,
					     json_string_value(json_object_get(w, "title"))};
			cli_table_add_row(t, row);
			free(cls);
		}
		cli_table_print(t, out);
		cli_table_destroy(t);
	}
	if (json_is_object(pointer))
		fprintf(out, "pointer at %" JSON_INTEGER_FORMAT ",%" JSON_INTEGER_FORMAT "\n",
			json_integer_value(json_object_get(pointer, "x")),
			json_integer_value(json_object_get(pointer, "y")));
	else
		fprintf(out, "pointer on another screen\n");
	if (json_array_size(windows) > 0 && json_is_null(json_object_get(answer, "focus")))
		fprintf(out, "no window has the keyboard focus: keys would go to the root window\n");
}

static int windows_run(struct cli_context *ctx, int argc, char **argv)
{
	const char *display = NULL;
	json_t *answer = NULL;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, windows_options, NULL)) != -1) {
		if (c == OPT_DISPLAY) {
			/* Sent in the query string as it is: only the characters of display
			 * names. */
			if (!optarg[0] || strlen(optarg) > IPC_MAX_DISPLAY_NAME_BYTES ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789:._-") != strlen(optarg))
				return cli_usage_error(ctx, &cli_cmd_windows,
						       "--display takes a display name such as :1, not "
						       "'%s'",
						       optarg);
			display = optarg;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_windows, c, argv);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_windows, "unexpected argument '%s'", argv[optind]);

	char *path =
		xasprintf(IPC_API_PREFIX "/windows%s%s", display ? "?display=" : "", display ? display : "");
	r = cli_api_json(ctx, "GET", path, NULL, &answer);
	free(path);
	if (r == 0 && !ctx->json) {
		if (!json_is_array(json_object_get(answer, "windows")))
			r = cli_error(ctx, "holod's answer has no \"windows\" array");
		else
			cli_print_windows(ctx->out, answer, cli_output_width(ctx->out));
	}
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_windows = {
	.name = "windows",
	.args = "[--display NAME]",
	.summary = "list the windows on the screen and the pointer's position",
	.help = "Lists the client windows of a display holod drives, topmost first, as wmctrl\n"
		"-lpGx does: a * for the one with the keyboard focus, the window id, its\n"
		"virtual desktop (all: every desktop; -: no window manager says), its process\n"
		"id, instance.class (WM_CLASS: what --class matches), geometry WxH+X+Y in root\n"
		"pixels, and title; then where the pointer is.\n"
		"  --display NAME   this display of holod's (default: its first)\n",
	.run = windows_run,
};
