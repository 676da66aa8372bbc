/* holoctl prune: retention (POST /v1/prune?older_than=SECONDS). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_OLDER_THAN = CLI_OPT_FIRST_COMMAND_OPTION };

static const struct option prune_options[] = {
        CLI_COMMON_LONG_OPTIONS,
        {"older-than", required_argument, NULL, OPT_OLDER_THAN},
        {0},
};

int cli_parse_age(const char *s, long *ret_seconds)
{
	static const struct {
		char unit;
		long seconds;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
	size_t n = strlen(s);
	long v;

	if (n < 2)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (s[n - 1] != units[i].unit)
			continue;
		char *num = xstrndup(s, n - 1);
		int r = cli_parse_int(num, 0, IPC_MAX_PRUNE_AGE_S / units[i].seconds, &v);
		free(num);
		if (r < 0)
			return r;
		*ret_seconds = v * units[i].seconds;
		return 0;
	}
	return -EINVAL;
}

static int prune_run(struct cli_context *ctx, int argc, char **argv)
{
	const char *age = NULL;
	json_t *answer = NULL;
	long seconds;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, prune_options, NULL)) != -1) {
		if (c == OPT_OLDER_THAN) {
			age = optarg;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_prune, c, argv);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_prune, "unexpected argument '%s'", argv[optind]);
	if (!age)
		return cli_usage_error(ctx, &cli_cmd_prune,
		                       "give --older-than AGE (e.g. 30d; nothing is pruned without it)");
	if (cli_parse_age(age, &seconds) < 0)
		return cli_usage_error(ctx, &cli_cmd_prune,
		                       "--older-than '%s' is not an age such as 90s, 15m, 12h, 30d "
		                       "or 8w (at most ten years)",
		                       age);
	char *path = xasprintf(IPC_API_PREFIX "/prune?older_than=%ld", seconds);
	r = cli_api_json(ctx, "POST", path, NULL, &answer);
	free(path);
	if (r != 0 || ctx->json)
		goto cleanup;
	json_int_t bytes = json_integer_value(json_object_get(answer, "bytes_freed"));
	fprintf(ctx->out, "pruned %" JSON_INTEGER_FORMAT " task(s) finished over %s ago; "
	                  "%" JSON_INTEGER_FORMAT " bytes of screenshots freed (%.1f MiB)\n",
	        json_integer_value(json_object_get(answer, "tasks")), age, bytes,
	        (double)bytes / (1024.0 * 1024.0));
cleanup:
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_prune = {
        .name = "prune",
        .args = "--older-than AGE",
        .summary = "remove tasks that finished more than AGE ago",
        .help = "Removes the tasks that finished more than AGE ago (90s, 15m, 12h, 30d, 8w), with\n"
                "their steps and screenshots, in one journal transaction, and prints how many\n"
                "and the bytes freed. Queued and running tasks are never removed. holod can do\n"
                "this by itself after each task: --prune-days / prune-days in holod.conf.\n",
        .run = prune_run,
};
