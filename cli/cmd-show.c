/* holoctl show: one task and the table of its steps (GET /v1/tasks/{id} and .../steps). */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum {
	OPT_STEPS = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_WIDE,
};

static const struct option show_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"steps", required_argument, NULL, OPT_STEPS},
	{"wide", no_argument, NULL, OPT_WIDE},
	{0},
};

/* --steps A-B, A- or A: the range of step indices shown (inclusive). */
static int parse_range(const char *s, long *ret_from, long *ret_to)
{
	char *copy = xstrdup(s), *dash = strchr(copy, '-');
	int r;

	if (dash)
		*dash = '\0';
	r = cli_parse_int(copy, 0, IPC_MAX_TASK_STEPS, ret_from);
	if (r >= 0) {
		if (!dash)
			*ret_to = *ret_from;
		else if (!dash[1])
			*ret_to = IPC_MAX_TASK_STEPS;
		else
			r = cli_parse_int(dash + 1, *ret_from, IPC_MAX_TASK_STEPS, ret_to);
	}
	free(copy);
	return r;
}

/* A new array of the steps whose index is in [from, to]. */
static json_t *steps_in_range(json_t *steps, long from, long to)
{
	json_t *out = json_array(), *step;
	size_t i;

	json_array_foreach(steps, i, step)
	{
		json_t *idx = json_object_get(step, "index");
		if (json_is_integer(idx) && json_integer_value(idx) >= from && json_integer_value(idx) <= to)
			json_array_append(out, step);
	}
	return out;
}

/* One line of what produced the task (docs/journal.md, provenance). */
static void add_provenance_rows(struct cli_table *t, json_t *p)
{
	json_t *model = json_object_get(p, "model"), *screen = json_object_get(p, "screen");
	json_t *sampling = json_object_get(p, "sampling");
	char buf[512];

	if (json_is_object(model)) {
		const char *sha = json_string_value(json_object_get(model, "sha256"));
		snprintf(buf, sizeof(buf), "%s (sha256 %.12s) on %s, %s",
			 json_string_value(json_object_get(model, "name")) ?: "?", sha ? sha : "-",
			 json_string_value(json_object_get(model, "backend")) ?: "?",
			 json_string_value(json_object_get(model, "precision")) ?: "?");
		const char *row[] = {"model", buf};
		cli_table_add_row(t, row);
	}
	if (json_is_object(sampling)) {
		json_t *top_p = json_object_get(sampling, "top_p");
		char tp[32] = "";
		if (json_is_number(top_p))
			snprintf(tp, sizeof(tp), ", top_p %g", json_number_value(top_p));
		snprintf(buf, sizeof(buf),
			 "temperature %g%s, seed %" JSON_INTEGER_FORMAT
			 ", %s history (window %" JSON_INTEGER_FORMAT ")",
			 json_number_value(json_object_get(sampling, "temperature")), tp,
			 json_integer_value(json_object_get(sampling, "seed")),
			 json_string_value(json_object_get(p, "history")) ?: "?",
			 json_integer_value(json_object_get(p, "window")));
		const char *row[] = {"sampling", buf};
		cli_table_add_row(t, row);
	}
	if (json_is_object(screen)) {
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT "x%" JSON_INTEGER_FORMAT,
			 json_integer_value(json_object_get(screen, "width")),
			 json_integer_value(json_object_get(screen, "height")));
		const char *row[] = {"screen", buf};
		cli_table_add_row(t, row);
	}
	const char *version = json_string_value(json_object_get(p, "holod_version"));
	if (version) {
		const char *row[] = {"holod", version};
		cli_table_add_row(t, row);
	}
}

/* The steps answer is {"steps": [...]} (a bare array is accepted too). */
static json_t *steps_array(json_t *answer)
{
	return json_is_array(answer) ? answer : json_object_get(answer, "steps");
}

static void print_task(struct cli_context *ctx, json_t *task, unsigned width)
{
	static const char *const fields[] = {"status",	   "kind",	  "display", "created_at",
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
	/* why it ended stuck, the reason and the steps first (the whole evidence: --json) */
	json_t *stuck = json_object_get(task, "stuck");
	if (json_is_object(stuck)) {
		json_t *steps = json_object_get(stuck, "steps");
		const char *reason = json_string_value(json_object_get(stuck, "reason"));
		const char *sha = json_string_value(json_object_get(stuck, "screen_sha256"));
		char *ev = xasprintf("%s, steps %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT "%s%.12s",
				     reason ? reason : "?", json_integer_value(json_array_get(steps, 0)),
				     json_integer_value(json_array_get(steps, 1)), sha ? ", screen " : "",
				     sha ? sha : "");
		const char *row[] = {"stuck", ev};
		cli_table_add_row(t, row);
		free(ev);
	}
	add_provenance_rows(t, json_object_get(task, "provenance"));
	/* A header line adds nothing to a key/value list. */
	cli_table_hide_header(t);
	cli_table_set_flexible(t, 1);
	cli_table_set_width(t, width);
	cli_table_print(t, ctx->out);
	cli_table_destroy(t);
	json_t *waiting = json_object_get(task, "waiting");
	if (json_is_object(waiting))
		cli_print_waiting(ctx, (long long)json_integer_value(json_object_get(task, "id")), waiting);
}

static int show_run(struct cli_context *ctx, int argc, char **argv)
{
	json_t *task = NULL, *steps = NULL, *shown = NULL;
	long id, from = 0, to = IPC_MAX_TASK_STEPS;
	bool wide = false;
	unsigned width;
	char *path;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, show_options, NULL)) != -1) {
		if (c == OPT_STEPS) {
			if (parse_range(optarg, &from, &to) < 0)
				return cli_usage_error(ctx, &cli_cmd_show,
						       "--steps '%s' is not a range of step indices "
						       "(A-B, A- or A, with A <= B)",
						       optarg);
			continue;
		}
		if (c == OPT_WIDE) {
			wide = true;
			continue;
		}
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
		r = cli_error(ctx, "holod's answer for the steps of task %ld has no \"steps\" array", id);
		goto cleanup;
	}
	width = wide ? 0 : cli_output_width(ctx->out);
	print_task(ctx, task, width);
	fputc('\n', ctx->out);
	shown = steps_in_range(steps_array(steps), from, to);
	if (!shown) {
		r = cli_error(ctx, "out of memory");
		goto cleanup;
	}
	if (json_array_size(steps_array(steps)) == 0) {
		fprintf(ctx->out, "no steps yet\n");
	} else if (json_array_size(shown) == 0) {
		fprintf(ctx->out, "no steps in the range %ld-%ld (the task has %zu)\n", from, to,
			json_array_size(steps_array(steps)));
	} else if (cli_print_steps_table(ctx, shown, width) < 0) {
		r = CLI_EXIT_ERROR;
	} else {
		cli_print_step_texts(ctx, shown, cli_terminal_width(ctx->out));
	}

cleanup:
	json_decref(task);
	json_decref(steps);
	json_decref(shown);
	return r;
}

const struct cli_command cli_cmd_show = {
	.name = "show",
	.args = "[--steps A-B] [--wide] ID",
	.summary = "show a task and the table of its steps",
	.help = "Prints the task (status, times, result or error, and what produced it: model,\n"
		"sampling, screen, holod version) and one row per step: index, tool, arguments,\n"
		"target in model space (0..1000) and in pixels, status, the time of each phase\n"
		"(capture; for instruction tasks the model's preprocess, vision, prefill and\n"
		"decode; inject, settle) and in total, and the result or error. For instruction\n"
		"tasks the model's decode counts (tokens decoded, forced by jump-forward,\n"
		"forwards), thought and note follow per step, wrapped to the terminal\n"
		"($COLUMNS when not a terminal).\n"
		"On a terminal (or with $COLUMNS set) the arguments, results and errors are cut\n"
		"with \"...\" so that each row fits its width; into a pipe or a file they print whole.\n"
		"  --steps A-B   only steps A to B (A- from A on, A only A)\n"
		"  --wide        never cut: every argument, result and error whole\n"
		"With --json: the task object and the steps answer, one JSON document per line.\n",
	.run = show_run,
};
