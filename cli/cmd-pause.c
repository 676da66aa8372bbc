/* holoctl pause / resume: hold a running task between two steps and hand it back
 * (POST /v1/tasks/{id}/pause, /resume). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const struct option pause_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{0},
};

static int pause_or_resume(struct cli_context *ctx, const struct cli_command *cmd, int argc, char **argv)
{
	json_t *answer = NULL;
	long id;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, pause_options, NULL)) != -1) {
		r = cli_common_option(ctx, cmd, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, cmd, "needs exactly one task ID");
	r = cli_parse_task_id(ctx, cmd, argv[optind], &id);
	if (r != 0)
		return r;
	char *path = xasprintf(IPC_API_PREFIX "/tasks/%ld/%s", id, cmd->name);
	r = cli_api_json(ctx, "POST", path, NULL, &answer);
	free(path);
	if (r == 0 && !ctx->json) {
		const char *status = json_string_value(json_object_get(answer, "status"));
		if (cmd == &cli_cmd_pause)
			fprintf(ctx->out,
				status && strcmp(status, "paused") == 0 ?
					"task %ld paused\n" :
					"task %ld: pausing, it holds before its next step\n",
				id);
		else
			fprintf(ctx->out, "task %ld resumed: it looks at the screen again\n", id);
	}
	json_decref(answer);
	return r;
}

static int pause_run(struct cli_context *ctx, int argc, char **argv)
{
	return pause_or_resume(ctx, &cli_cmd_pause, argc, argv);
}

static int resume_run(struct cli_context *ctx, int argc, char **argv)
{
	return pause_or_resume(ctx, &cli_cmd_resume, argc, argv);
}

const struct cli_command cli_cmd_pause = {
	.name = "pause",
	.args = "ID",
	.summary = "hold a running task before its next step",
	.help = "The task finishes the step under way (its action included) and holds before\n"
		"the next one, keeping its model session; its status is paused. `holoctl\n"
		"resume ID` hands it back. A task that is not running is refused (exit 1).\n",
	.run = pause_run,
};

const struct cli_command cli_cmd_resume = {
	.name = "resume",
	.args = "ID",
	.summary = "hand a paused task back: it looks at the screen again and goes on",
	.help = "The task takes a new screenshot and goes on from the same session state.\n"
		"A task that is not paused is refused (exit 1).\n",
	.run = resume_run,
};
