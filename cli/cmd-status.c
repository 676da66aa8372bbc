/* holoctl status: what holod is doing (GET /v1/status): a short summary for a person, every
 * counter with --all, the object itself with --json. */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_ALL = CLI_OPT_FIRST_COMMAND_OPTION };

static const struct option status_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"all", no_argument, NULL, OPT_ALL},
	{0},
};

static const char *str_of(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

/* "12.3 GiB" for an integer member of bytes; NULL when it is not one. */
static char *gib_of(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v))
		return NULL;
	return xasprintf("%.1f GiB", (double)json_integer_value(v) / (1024.0 * 1024.0 * 1024.0));
}

/* The model line: what is loaded where, or why there is none. */
static void print_model(FILE *out, json_t *status)
{
	json_t *model = json_object_get(status, "model");
	json_t *provider = json_object_get(status, "provider");
	const char *state = str_of(model, "state");

	if (json_is_object(provider) && str_of(provider, "name") &&
	    strcmp(str_of(provider, "name"), "remote") == 0) {
		fprintf(out, "model     %s on the remote server %s\n",
			str_of(provider, "model") ? str_of(provider, "model") : "(not asked yet)",
			str_of(provider, "endpoint") ? str_of(provider, "endpoint") : "?");
		return;
	}
	if (!json_is_object(model)) {
		fprintf(out, "model     none: holod was started without --model (scripts run; "
			     "instructions need a model)\n");
		return;
	}
	const char *name = str_of(model, "name") ? str_of(model, "name") : str_of(model, "path");
	if (state && strcmp(state, "failed") == 0) {
		fprintf(out, "model     %s failed to load: %s\n", name ? name : "?",
			str_of(model, "error") ? str_of(model, "error") : "(no reason given)");
		return;
	}
	if (state && strcmp(state, "loading") == 0) {
		json_t *load = json_object_get(model, "load");
		json_int_t bytes = json_integer_value(json_object_get(load, "bytes"));
		json_int_t total = json_integer_value(json_object_get(load, "total"));
		if (total > 0)
			fprintf(out, "model     %s loading: %.1f of %.1f GiB (%d%%)\n", name ? name : "?",
				(double)bytes / (1024.0 * 1024.0 * 1024.0),
				(double)total / (1024.0 * 1024.0 * 1024.0), (int)(100 * bytes / total));
		else
			fprintf(out, "model     %s loading\n", name ? name : "?");
		return;
	}
	fprintf(out, "model     %s %s", name ? name : "?", state ? state : "?");
	const char *what[] = {str_of(model, "backend"), str_of(model, "precision"), str_of(model, "weights")};
	if (what[0])
		fprintf(out, " on %s", what[0]);
	if (what[1])
		fprintf(out, ", %s", what[1]);
	if (what[2])
		fprintf(out, ", %s weights", what[2]);
	fputc('\n', out);
	/* Memory: the weights and the sessions' state, and what the device has. */
	char *weights = gib_of(model, "device_weight_bytes");
	char *state_mem = gib_of(model, "device_state_bytes");
	char *free_mem = gib_of(model, "device_memory_free");
	char *total_mem = gib_of(model, "device_memory_total");
	if (!weights)
		weights = gib_of(model, "weight_bytes");
	if (weights || state_mem) {
		fprintf(out, "memory    %s weights, %s sessions (%" JSON_INTEGER_FORMAT ")",
			weights ? weights : "?", state_mem ? state_mem : "?",
			json_integer_value(json_object_get(model, "sessions")));
		if (free_mem && total_mem)
			fprintf(out, "; %s free of %s", free_mem, total_mem);
		fputc('\n', out);
	}
	free(weights);
	free(state_mem);
	free(free_mem);
	free(total_mem);
}

void cli_print_status_summary(FILE *out, json_t *status)
{
	json_t *displays = json_object_get(status, "displays"), *d;
	json_t *queue = json_object_get(status, "queue"), *q;
	size_t i, running = 0;

	fprintf(out, "holod     %s (pid %" JSON_INTEGER_FORMAT ")\n",
		str_of(status, "version") ? str_of(status, "version") : "?",
		json_integer_value(json_object_get(status, "pid")));
	print_model(out, status);
	json_array_foreach(displays, i, d)
	{
		json_t *task = json_object_get(d, "running");
		fprintf(out, "%-9s %s", i == 0 ? "displays" : "",
			str_of(d, "name") ? str_of(d, "name") : "$DISPLAY");
		if (json_is_integer(task)) {
			fprintf(out, ": running task %" JSON_INTEGER_FORMAT "\n", json_integer_value(task));
			running++;
		} else {
			fprintf(out, ": idle%s\n",
				json_is_false(json_object_get(d, "connected")) ? " (not connected yet)" : "");
		}
	}
	fprintf(out, "tasks     %zu running, %zu queued", running, json_array_size(queue));
	json_array_foreach(queue, i, q)
		fprintf(out, "%s%" JSON_INTEGER_FORMAT, i ? ", " : " (", json_integer_value(q));
	fprintf(out, "%s\n", json_array_size(queue) ? ")" : "");
}

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
			char *text = json_is_string(v) ? xstrdup(json_string_value(v)) :
				     json_is_null(v)   ? xstrdup("-") :
							 json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
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
		char *right = json_is_integer(running) ? xasprintf("running task %" JSON_INTEGER_FORMAT,
								   json_integer_value(running)) :
							 xstrdup("idle");
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
	bool all = false;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, status_options, NULL)) != -1) {
		if (c == OPT_ALL) {
			all = true;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_status, c, argv);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_status, "unexpected argument '%s'", argv[optind]);

	r = cli_api_json(ctx, "GET", IPC_API_PREFIX "/status", NULL, &answer);
	if (r != 0 || ctx->json) {
		json_decref(answer);
		return r;
	}
	if (!json_is_object(answer)) {
		json_decref(answer);
		return cli_error(ctx, "holod's status is not a JSON object");
	}
	if (!all) {
		cli_print_status_summary(ctx->out, answer);
		json_decref(answer);
		return ferror(ctx->out) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
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
	.args = "[--all]",
	.summary = "show holod's version, displays, model, queue and running tasks",
	.help = "Prints a summary: holod's version, the model (name, state, backend, precision,\n"
		"weights format; why there is none, or why it failed), its memory in GiB, each\n"
		"display and the task running there, the tasks running and queued.\n"
		"  --all    every counter instead: one FIELD VALUE row per member of\n"
		"           GET /v1/status (nested members as parent.child), then one row per\n"
		"           display\n"
		"  --json   the status object itself, as holod sent it\n",
	.run = status_run,
};
