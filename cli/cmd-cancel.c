/* holoctl cancel: stop a queued or running task (POST /v1/tasks/{id}/cancel), or all of them
 * (POST /v1/tasks/cancel). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <stdlib.h>

enum {
	OPT_ALL = CLI_OPT_FIRST_COMMAND_OPTION,
};

static const struct option cancel_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"all", no_argument, NULL, OPT_ALL},
	{0},
};

/* "3 (5, 6, 7)" */
static void print_ids(FILE *f, json_t *ids)
{
	size_t i;
	json_t *id;
	fprintf(f, "%zu", json_array_size(ids));
	json_array_foreach(ids, i, id)
		fprintf(f, "%s%" JSON_INTEGER_FORMAT, i ? ", " : " (", json_integer_value(id));
	if (json_array_size(ids))
		fputc(')', f);
}

static int cancel_all(struct cli_context *ctx)
{
	json_t *answer = NULL;
	int r = cli_api_json(ctx, "POST", IPC_API_PREFIX "/tasks/cancel", NULL, &answer);
	if (r == 0 && !ctx->json) {
		json_t *cancelled = json_object_get(answer, "cancelled");
		json_t *stopping = json_object_get(answer, "stopping");
		if (!json_array_size(cancelled) && !json_array_size(stopping)) {
			fprintf(ctx->out, "no task was queued or running\n");
		} else {
			fprintf(ctx->out, "cancelled ");
			print_ids(ctx->out, cancelled);
			fprintf(ctx->out, " queued task(s); ");
			print_ids(ctx->out, stopping);
			fprintf(ctx->out, " running task(s) stop at their next safe point\n");
		}
	}
	json_decref(answer);
	return r;
}

static int cancel_run(struct cli_context *ctx, int argc, char **argv)
{
	json_t *answer = NULL;
	long id;
	char *path;
	bool all = false;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, cancel_options, NULL)) != -1) {
		if (c == OPT_ALL) {
			all = true;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_cancel, c, argv);
		if (r >= 0)
			return r;
	}
	if (all) {
		if (optind != argc)
			return cli_usage_error(ctx, &cli_cmd_cancel,
					       "--all cancels every task: give no task ID");
		return cancel_all(ctx);
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_cancel, "needs exactly one task ID (or --all)");
	r = cli_parse_task_id(ctx, &cli_cmd_cancel, argv[optind], &id);
	if (r != 0)
		return r;

	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/cancel", id);
	r = cli_api_json(ctx, "POST", path, NULL, &answer);
	free(path);
	if (r == 0 && !ctx->json) {
		const char *status = json_string_value(json_object_get(answer, "status"));
		int st = status ? ipc_task_status_from_string(status) : -EINVAL;
		/* A running task answers before it has stopped (HTTP 202). */
		if (st >= 0 && ipc_task_status_is_final((enum ipc_task_status)st))
			fprintf(ctx->out, "task %ld %s\n", id, status);
		else
			fprintf(ctx->out, "task %ld: cancelling, it stops at the next safe point\n", id);
	}
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_cancel = {
	.name = "cancel",
	.args = "ID | --all",
	.summary = "cancel a queued or running task",
	.help = "A running task stops at the next safe point: held keys and buttons are released "
		"and\n"
		"the task ends with status cancelled. Cancelling a finished task is an error.\n"
		"--all cancels every queued task and stops every running one, on every "
		"display.\n",
	.run = cancel_run,
};
