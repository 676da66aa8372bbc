/* holoctl list: tasks, newest first (GET /v1/tasks?status=&limit=&offset=). */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_STATUS = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_LIMIT,
	OPT_OFFSET,
	OPT_WIDE,
};

static const struct option list_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"status", required_argument, NULL, OPT_STATUS},
	{"limit", required_argument, NULL, OPT_LIMIT},
	{"offset", required_argument, NULL, OPT_OFFSET},
	{"wide", no_argument, NULL, OPT_WIDE},
	{0},
};

/* What a task was asked: its instruction, or "script (N actions)" (malloc'd). */
static char *describe_task(json_t *task)
{
	json_t *spec = json_object_get(task, "spec");
	const char *instruction = json_string_value(json_object_get(spec, "instruction"));
	json_t *script = json_object_get(spec, "script");

	if (instruction)
		return xstrdup(instruction);
	if (json_array_size(script) == 1) {
		/* One action (holoctl do): say which, its arguments whole (a write's content). */
		json_t *call = json_array_get(script, 0);
		char *args = xmalloc(IPC_MAX_CONTENT_BYTES + 64), point[64], *s;
		cli_format_tool_args(call, args, IPC_MAX_CONTENT_BYTES + 64);
		cli_format_point(call, point, sizeof(point));
		s = xasprintf("%s%s%s%s%s",
			      json_string_value(json_object_get(call, "tool_name")) ?
				      json_string_value(json_object_get(call, "tool_name")) :
				      "?",
			      args[0] ? " " : "", args, strcmp(point, "-") ? " @ " : "",
			      strcmp(point, "-") ? point : "");
		free(args);
		return s;
	}
	if (json_is_array(script))
		return xasprintf("script (%zu actions)", json_array_size(script));
	return xstrdup(json_string_value(json_object_get(task, "kind")) ?
			       json_string_value(json_object_get(task, "kind")) :
			       "-");
}

static int list_run(struct cli_context *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"ID", "STATUS", "STEPS", "CREATED", "TASK", "ERROR"};
	const char *status = NULL;
	bool wide = false;
	long limit = IPC_DEFAULT_LIST_LIMIT, offset = 0;
	json_t *answer = NULL, *tasks, *task;
	char *path;
	size_t i;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, list_options, NULL)) != -1) {
		switch (c) {
		case OPT_STATUS:
			if (ipc_task_status_from_string(optarg) < 0)
				return cli_usage_error(ctx, &cli_cmd_list,
						       "--status must be queued, running, succeeded, failed, "
						       "cancelled, interrupted or stuck, not '%s'",
						       optarg);
			status = optarg;
			break;
		case OPT_LIMIT:
			if (cli_parse_int(optarg, 1, IPC_MAX_LIST_LIMIT, &limit) < 0)
				return cli_usage_error(ctx, &cli_cmd_list,
						       "--limit must be from 1 to %d, not '%s'",
						       IPC_MAX_LIST_LIMIT, optarg);
			break;
		case OPT_OFFSET:
			if (cli_parse_int(optarg, 0, 1000000000L, &offset) < 0)
				return cli_usage_error(ctx, &cli_cmd_list,
						       "--offset must be a number >= 0, not '%s'", optarg);
			break;
		case OPT_WIDE:
			wide = true;
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_list, c, argv);
			if (r >= 0)
				return r;
			break;
		}
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_list, "unexpected argument '%s'", argv[optind]);

	path = xasprintf(IPC_API_PREFIX "/tasks?limit=%ld&offset=%ld%s%s", limit, offset,
			 status ? "&status=" : "", status ? status : "");
	r = cli_api_json(ctx, "GET", path, NULL, &answer);
	free(path);
	if (r != 0 || ctx->json) {
		json_decref(answer);
		return r;
	}
	tasks = json_object_get(answer, "tasks");
	if (!json_is_array(tasks)) {
		json_decref(answer);
		return cli_error(ctx, "holod's task list has no \"tasks\" array");
	}
	if (json_array_size(tasks) == 0) {
		fprintf(ctx->out, "no %s%stasks%s\n", status ? status : "", status ? " " : "",
			offset ? " at this offset" : "");
		json_decref(answer);
		return CLI_EXIT_OK;
	}

	struct cli_table *t = cli_table_create(ARRAY_SIZE(headers), headers);
	cli_table_set_align(t, 0, CLI_ALIGN_RIGHT);
	cli_table_set_align(t, 2, CLI_ALIGN_RIGHT);
	/* What the task was asked and its error give way to fit the width. */
	cli_table_set_flexible(t, 4);
	cli_table_set_flexible(t, 5);
	cli_table_set_width(t, wide ? 0 : cli_output_width(ctx->out));
	json_array_foreach(tasks, i, task)
	{
		char id[24], steps[24], *what;
		json_t *err = json_object_get(task, "error");
		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(task, "id")));
		snprintf(steps, sizeof(steps), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(task, "steps")));
		what = describe_task(task);
		const char *row[] = {id,    json_string_value(json_object_get(task, "status")),
				     steps, json_string_value(json_object_get(task, "created_at")),
				     what,  json_is_string(err) ? json_string_value(err) : ""};
		cli_table_add_row(t, row);
		free(what);
	}
	r = cli_table_print(t, ctx->out) < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	cli_table_destroy(t);

	json_t *total = json_object_get(answer, "total");
	if (json_is_integer(total)) {
		long long shown_end = offset + (long long)json_array_size(tasks);
		fprintf(ctx->out, "tasks %ld-%lld of %" JSON_INTEGER_FORMAT "%s", offset + 1, shown_end,
			json_integer_value(total), shown_end < json_integer_value(total) ? "" : "\n");
		if (shown_end < json_integer_value(total))
			fprintf(ctx->out, " (next page: --offset %lld)\n", shown_end);
	}
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_list = {
	.name = "list",
	.args = "[--status STATUS] [--limit N] [--offset N] [--wide]",
	.summary = "list tasks, newest first",
	.help = "Options:\n"
		"  --status STATUS  only tasks in this status: queued, running, succeeded,\n"
		"                   failed, cancelled, interrupted, stuck\n"
		"  --limit N        at most N tasks (default 50, at most 500)\n"
		"  --offset N       skip the N newest (paging)\n"
		"  --wide           never cut what a task was asked nor its error; otherwise\n"
		"                   they are cut with \"...\" to fit the terminal's width (or\n"
		"                   $COLUMNS), and print whole into a pipe or a file\n",
	.run = list_run,
};
