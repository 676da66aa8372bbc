/* holoctl show: one task and the table of its steps (GET /v1/tasks/{id} and .../steps). */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const struct option show_options[] = {
        CLI_COMMON_LONG_OPTIONS,
        {0},
};

/* The steps answer is {"steps": [...]} (a bare array is accepted too). */
static json_t *steps_array(json_t *answer)
{
	return json_is_array(answer) ? answer : json_object_get(answer, "steps");
}

static void print_task(struct cli_context *ctx, json_t *task)
{
	static const char *const fields[] = {"status",     "kind",        "display", "created_at",
	                                     "started_at", "finished_at", "result",  "error"};
	static const char *const headers[] = {"FIELD", "VALUE"};
	json_t *spec = json_object_get(task, "spec");
	const char *instruction = json_string_value(json_object_get(spec, "instruction"));
	struct cli_table *t = cli_table_create(2, headers);

	fprintf(ctx->out, "task %" JSON_INTEGER_FORMAT "%s%s\n",
	        json_integer_value(json_object_get(task, "id")), instruction ? ": " : "",
	        instruction ? instruction : "");
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		const char *v = json_string_value(json_object_get(task, fields[i]));
		if (!v)
			continue;
		const char *row[] = {fields[i], v};
		cli_table_add_row(t, row);
	}
	/* A header line adds nothing to a key/value list. */
	cli_table_hide_header(t);
	cli_table_print(t, ctx->out);
	cli_table_destroy(t);
}

static int show_run(struct cli_context *ctx, int argc, char **argv)
{
	json_t *task = NULL, *steps = NULL;
	long id;
	char *path;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, show_options, NULL)) != -1) {
		r = cli_common_option(ctx, &cli_cmd_show, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_show, "needs exactly one task ID");
	r = cli_parse_task_id(ctx, &cli_cmd_show, argv[optind], &id);
	if (r != 0)
		return r;

	path = xasprintf(IPC_API_PREFIX "/tasks/%ld", id);
	r = cli_api_json(ctx, "GET", path, NULL, &task);
	free(path);
	if (r != 0)
		goto cleanup;
	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/steps", id);
	r = cli_api_json(ctx, "GET", path, NULL, &steps);
	free(path);
	if (r != 0 || ctx->json)
		goto cleanup;

	if (!json_is_array(steps_array(steps))) {
		r = cli_error(
		        ctx, "holod's answer for the steps of task %ld has no \"steps\" array", id);
		goto cleanup;
	}
	print_task(ctx, task);
	fputc('\n', ctx->out);
	if (json_array_size(steps_array(steps)) == 0)
		fprintf(ctx->out, "no steps yet\n");
	else if (cli_print_steps_table(ctx, steps_array(steps)) < 0)
		r = CLI_EXIT_ERROR;

cleanup:
	json_decref(task);
	json_decref(steps);
	return r;
}

const struct cli_command cli_cmd_show = {
        .name = "show",
        .args = "ID",
        .summary = "show a task and the table of its steps",
        .help = "Prints the task (status, times, result or error) and one row per step: index, "
                "tool,\n"
                "arguments, target in model space (0..1000) and in pixels, status, the time of "
                "each\n"
                "phase (capture, inject, settle) and in total, and the result or error.\n"
                "With --json: the task object and the steps answer, one JSON document per line.\n",
        .run = show_run,
};
