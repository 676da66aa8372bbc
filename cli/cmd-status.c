/* holoctl status: what holod is doing (GET /v1/status). */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const struct option status_options[] = {
        CLI_COMMON_LONG_OPTIONS,
        {0},
};

/* Flattens nested objects into "queue.length"-style keys, one row per scalar. */
static void add_rows(struct cli_table *t, const char *prefix, json_t *o)
{
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v)
	{
		if (!prefix && strcmp(key, "displays") == 0)
			continue; /* one row per display: add_display_rows */
		char *name = prefix ? xasprintf("%s.%s", prefix, key) : xstrdup(key);
		if (json_is_object(v) && json_object_size(v) > 0) {
			add_rows(t, name, v);
		} else {
			char *text = json_is_string(v) ? xstrdup(json_string_value(v))
			             : json_is_null(v)
			                     ? xstrdup("-")
			                     : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			const char *row[] = {name, text ? text : "?"};
			cli_table_add_row(t, row);
			free(text);
		}
		free(name);
	}
}

/* "display :1    running task 7" / "display :2    idle", for every display holod drives. */
static void add_display_rows(struct cli_table *t, json_t *displays)
{
	size_t i;
	json_t *d;

	json_array_foreach(displays, i, d)
	{
		const char *name = json_string_value(json_object_get(d, "name"));
		json_t *running = json_object_get(d, "running");
		char *left = xasprintf("display %s", name ? name : "$DISPLAY");
		char *right = json_is_integer(running)
		                      ? xasprintf("running task %" JSON_INTEGER_FORMAT,
		                                  json_integer_value(running))
		                      : xstrdup("idle");
		const char *row[] = {left, right};
		cli_table_add_row(t, row);
		free(left);
		free(right);
	}
}

static int status_run(struct cli_context *ctx, int argc, char **argv)
{
	static const char *const headers[] = {"FIELD", "VALUE"};
	json_t *answer = NULL;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, status_options, NULL)) !=
	       -1) {
		r = cli_common_option(ctx, &cli_cmd_status, c, argv);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_status, "unexpected argument '%s'",
		                       argv[optind]);

	r = cli_api_json(ctx, "GET", IPC_API_PREFIX "/status", NULL, &answer);
	if (r != 0 || ctx->json) {
		json_decref(answer);
		return r;
	}
	if (!json_is_object(answer)) {
		json_decref(answer);
		return cli_error(ctx, "holod's status is not a JSON object");
	}
	struct cli_table *t = cli_table_create(2, headers);
	add_rows(t, NULL, answer);
	add_display_rows(t, json_object_get(answer, "displays"));
	r = cli_table_print(t, ctx->out) < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	cli_table_destroy(t);
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_status = {
        .name = "status",
        .args = "",
        .summary = "show holod's version, displays, model, queue and running tasks",
        .help = "Prints one FIELD VALUE row per member of GET /v1/status (nested members as\n"
                "parent.child), then one row per display holod drives with the task running "
                "there.\n",
        .run = status_run,
};
