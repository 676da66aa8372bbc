/* holoctl prune: retention (POST /v1/prune?older_than=SECONDS). It asks first on a terminal, as
 * what it removes cannot come back: the same request with dry_run=true says what would go and
 * the cutoff holod took for it ("before"), and the prune confirmed sends that cutoff
 * (?before=), so no task that finished while the user read the list goes unseen. */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum {
	OPT_OLDER_THAN = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_DRY_RUN,
	OPT_YES,
};

static const struct option prune_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"older-than", required_argument, NULL, OPT_OLDER_THAN},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"yes", no_argument, NULL, OPT_YES},
	{0},
};

/* Longest answer read to the question: "yes" and a newline, with room to tell a longer one. */
#define PRUNE_MAX_ANSWER 16

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

/* The dry run's answer for a person: the tasks that would go, then how many and the bytes. */
static void print_preview(struct cli_context *ctx, json_t *answer, const char *age)
{
	static const char *const headers[] = {"ID", "STATUS", "FINISHED"};
	json_t *list = json_object_get(answer, "would_prune"), *task;
	json_int_t count = json_integer_value(json_object_get(answer, "tasks"));
	json_int_t bytes = json_integer_value(json_object_get(answer, "bytes_freed"));
	size_t i;

	if (count == 0) {
		fprintf(ctx->out, "no task finished over %s ago: nothing to prune\n", age);
		return;
	}
	struct cli_table *t = cli_table_create(ARRAY_SIZE(headers), headers);
	cli_table_set_align(t, 0, CLI_ALIGN_RIGHT);
	json_array_foreach(list, i, task)
	{
		char id[24];
		snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(task, "id")));
		const char *row[] = {id, json_string_value(json_object_get(task, "status")),
				     json_string_value(json_object_get(task, "finished_at"))};
		cli_table_add_row(t, row);
	}
	cli_table_print(t, ctx->out);
	cli_table_destroy(t);
	if ((json_int_t)json_array_size(list) < count)
		fprintf(ctx->out, "(the newest %zu of them listed)\n", json_array_size(list));
	fprintf(ctx->out,
		"would prune %" JSON_INTEGER_FORMAT " task(s) finished over %s ago, "
		"with %" JSON_INTEGER_FORMAT " bytes of screenshots (%.1f MiB)\n",
		count, age, bytes, (double)bytes / (1024.0 * 1024.0));
}

/* Asks on the terminal; true for "y" or "yes". */
static bool confirm(struct cli_context *ctx, json_int_t count)
{
	char answer[PRUNE_MAX_ANSWER];

	fprintf(ctx->out,
		"remove these %" JSON_INTEGER_FORMAT " task(s), their steps and "
		"screenshots? [y/N] ",
		count);
	fflush(ctx->out);
	if (!fgets(answer, sizeof(answer), ctx->in))
		return false;
	answer[strcspn(answer, "\n")] = '\0';
	return strcasecmp(answer, "y") == 0 || strcasecmp(answer, "yes") == 0;
}

static int prune_run(struct cli_context *ctx, int argc, char **argv)
{
	const char *age = NULL;
	json_t *answer = NULL;
	bool dry_run = false, yes = false;
	json_int_t before = -1; /* the dry run's cutoff, once confirmed */
	long seconds;
	char *path;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS "y", prune_options, NULL)) != -1) {
		switch (c) {
		case OPT_OLDER_THAN:
			age = optarg;
			break;
		case OPT_DRY_RUN:
			dry_run = true;
			break;
		case OPT_YES:
		case 'y':
			yes = true;
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_prune, c, argv);
			if (r >= 0)
				return r;
			break;
		}
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
	/* Nobody to ask: refuse before anything is sent, saying how to go on. */
	if (!dry_run && !yes && !isatty(fileno(ctx->in)))
		return cli_usage_error(ctx, &cli_cmd_prune,
				       "will not remove tasks without asking, and standard input is "
				       "not a terminal to ask on: give --yes to prune, or --dry-run "
				       "to list what would go");
	if (dry_run || !yes) {
		path = xasprintf(IPC_API_PREFIX "/prune?older_than=%ld&dry_run=true", seconds);
		r = cli_api_json(ctx, "POST", path, NULL, &answer);
		free(path);
		if (r != 0 || (dry_run && ctx->json))
			goto cleanup;
		if (!json_is_integer(json_object_get(answer, "tasks"))) {
			r = cli_error(ctx, "holod's answer to the dry run has no \"tasks\" count");
			goto cleanup;
		}
		before = json_integer_value(json_object_get(answer, "before"));
		if (!dry_run && (!json_is_integer(json_object_get(answer, "before")) || before < 0)) {
			r = cli_error(ctx, "holod's answer to the dry run has no \"before\" cutoff");
			goto cleanup;
		}
		if (dry_run || !ctx->json)
			print_preview(ctx, answer, age);
		json_int_t count = json_integer_value(json_object_get(answer, "tasks"));
		if (dry_run || count == 0)
			goto cleanup;
		if (!confirm(ctx, count)) {
			fprintf(ctx->out, "nothing pruned\n");
			r = CLI_EXIT_ERROR;
			goto cleanup;
		}
		json_decref(answer);
		answer = NULL;
	}
	/* Confirmed: exactly the cutoff of the list shown (what finished since stays). */
	if (before >= 0)
		path = xasprintf(IPC_API_PREFIX "/prune?before=%" JSON_INTEGER_FORMAT, before);
	else
		path = xasprintf(IPC_API_PREFIX "/prune?older_than=%ld", seconds);
	r = cli_api_json(ctx, "POST", path, NULL, &answer);
	free(path);
	if (r != 0 || ctx->json)
		goto cleanup;
	json_int_t bytes = json_integer_value(json_object_get(answer, "bytes_freed"));
	fprintf(ctx->out,
		"pruned %" JSON_INTEGER_FORMAT " task(s) finished over %s ago; "
		"%" JSON_INTEGER_FORMAT " bytes of screenshots freed (%.1f MiB)\n",
		json_integer_value(json_object_get(answer, "tasks")), age, bytes,
		(double)bytes / (1024.0 * 1024.0));
cleanup:
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_prune = {
	.name = "prune",
	.args = "--older-than AGE [--dry-run | --yes]",
	.summary = "remove tasks that finished more than AGE ago",
	.help = "Removes the tasks that finished more than AGE ago (90s, 15m, 12h, 30d, 8w), with\n"
		"their steps and screenshots, in one journal transaction, and prints how many\n"
		"and the bytes freed. Queued and running tasks are never removed. holod can do\n"
		"this by itself after each task: --prune-days / prune-days in holod.conf.\n"
		"On a terminal it lists the tasks that would go and asks first; with standard\n"
		"input not a terminal (a script, cron) it refuses unless given --yes.\n"
		"  --dry-run   list what would go (id, status, finished) and remove nothing\n"
		"  -y, --yes   remove without asking\n",
	.run = prune_run,
};
