/* holoctl cancel: stop a queued or running task (POST /v1/tasks/{id}/cancel). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <stdlib.h>

static const struct option cancel_options[] = {
        CLI_COMMON_LONG_OPTIONS,
        {0},
};

static int cancel_run(struct cli_context *ctx, int argc, char **argv)
{
	json_t *answer = NULL;
	long id;
	char *path;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, cancel_options, NULL)) !=
	       -1) {
		r = cli_common_option(ctx, &cli_cmd_cancel, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_cancel, "needs exactly one task ID");
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
			fprintf(ctx->out, "task %ld: cancelling, it stops at the next safe point\n",
			        id);
	}
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_cancel = {
        .name = "cancel",
        .args = "ID",
        .summary = "cancel a queued or running task",
        .help = "A running task stops at the next safe point: held keys and buttons are released "
                "and\n"
                "the task ends with status cancelled. Cancelling a finished task is an error.\n",
        .run = cancel_run,
};
