/* holoctl follow: follow a task that is queued, running or finished, as `run --follow` does
 * (GET /v1/tasks/{id}/events): its progress during each step, each step, then its outcome. */
#include "cli.h"

#include "common.h"

#include <getopt.h>

static const struct option follow_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{0},
};

static int follow_run(struct cli_context *ctx, int argc, char **argv)
{
	long id;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, follow_options, NULL)) != -1) {
		r = cli_common_option(ctx, &cli_cmd_follow, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_follow, "needs exactly one task ID");
	r = cli_parse_task_id(ctx, &cli_cmd_follow, argv[optind], &id);
	if (r != 0)
		return r;
	return cli_follow_task(ctx, (long long)id, NULL);
}

const struct cli_command cli_cmd_follow = {
	.name = "follow",
	.args = "ID",
	.summary = "follow a task live: its progress in each step, its steps, its outcome",
	.help = "Prints what task ID does as it happens, as `run --follow` does: its place in\n"
		"the queue, then for each step the capture, the vision encoder's tiles, the\n"
		"prefill's tokens, the thought as the model writes it, the action and its\n"
		"result, each with the step's clock; then the outcome. Exit status as for\n"
		"`run --follow`: 0 succeeded, 3 failed, 4 cancelled, 5 interrupted, 6 the\n"
		"stream ended without a final status. Ctrl-C cancels the task and follows it\n"
		"to its end; a second Ctrl-C stops following.\n"
		"With --json: each event line as holod sends it.\n",
	.run = follow_run,
};
