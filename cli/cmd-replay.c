/* holoctl replay: re-runs the recorded actions of a task as a new script task at the original
 * pixel coordinates (POST /v1/tasks with "replay_of"), then follows it like `run --follow`.
 * --check has holod compare each screen with the recorded one first ("check"). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_DRY_RUN = CLI_OPT_FIRST_COMMAND_OPTION, OPT_FROM, OPT_CHECK, OPT_THRESHOLD };

/* --check without --threshold: 1% of the pixels may differ (a clock, a blinking caret). */
#define REPLAY_DEFAULT_THRESHOLD 0.01

static const struct option replay_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"from", required_argument, NULL, OPT_FROM},
	{"check", no_argument, NULL, OPT_CHECK},
	{"threshold", required_argument, NULL, OPT_THRESHOLD},
	{0},
};

static void set_pixel(json_t *action, json_t *pixels, const char *from, const char *to)
{
	json_t *v = json_object_get(pixels, from);
	if (json_is_integer(v))
		json_object_set(action, to, v);
}

json_t *cli_replay_script(json_t *steps, long long task_id, long from, bool dry_run, double check_threshold,
			  size_t *ret_n)
{
	json_t *script = json_array(), *indices = json_array(), *step;
	size_t i;

	*ret_n = 0;
	json_array_foreach(steps, i, step)
	{
		const char *status = json_string_value(json_object_get(step, "status"));
		json_t *call = json_object_get(step, "tool_call");
		json_t *pixels = json_object_get(step, "pixels");
		json_t *idx = json_object_get(step, "index");
		if (!json_is_integer(idx) || json_integer_value(idx) < from || !json_is_object(call) ||
		    !status || (strcmp(status, "ok") != 0 && strcmp(status, "dry_run") != 0))
			continue;
		json_t *action = json_deep_copy(call);
		/* Pointer actions: the pixels the original run used, whatever its coordinates. */
		if (json_object_get(action, "x")) {
			if (!json_is_object(pixels)) {
				json_decref(action);
				continue;
			}
			set_pixel(action, pixels, "x", "x");
			set_pixel(action, pixels, "y", "y");
			set_pixel(action, pixels, "x2", "x2");
			set_pixel(action, pixels, "y2", "y2");
		}
		json_array_append_new(script, action);
		json_array_append(indices, idx);
	}
	*ret_n = json_array_size(script);
	if (*ret_n == 0) {
		json_decref(script);
		json_decref(indices);
		return NULL;
	}
	json_t *body = json_pack("{s:o, s:s, s:I, s:b}", "script", script, "coords", "pixels", "replay_of",
				 (json_int_t)task_id, "dry_run", dry_run);
	if (body && check_threshold >= 0)
		json_object_set_new(body, "check",
				    json_pack("{s:f, s:O}", "threshold", check_threshold, "steps", indices));
	json_decref(indices);
	return body;
}

/* "0.05" or "5%": a fraction 0..1 of the pixels. */
static int parse_threshold(const char *s, double *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end != s && *end == '%' && end[1] == '\0') {
		v /= 100;
		end++;
	}
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 1)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int replay_run(struct cli_context *ctx, int argc, char **argv)
{
	json_t *steps = NULL, *body = NULL, *answer = NULL;
	char *path, *text = NULL;
	bool dry_run = false, check = false;
	double threshold = -1;
	long id, from = 0;
	size_t n;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, replay_options, NULL)) != -1) {
		if (c == OPT_DRY_RUN) {
			dry_run = true;
			continue;
		}
		if (c == OPT_FROM) {
			if (cli_parse_int(optarg, 0, IPC_MAX_TASK_STEPS, &from) < 0)
				return cli_usage_error(ctx, &cli_cmd_replay,
						       "--from '%s' is not a step index (0..%d)", optarg,
						       IPC_MAX_TASK_STEPS);
			continue;
		}
		if (c == OPT_CHECK) {
			check = true;
			continue;
		}
		if (c == OPT_THRESHOLD) {
			if (parse_threshold(optarg, &threshold) < 0)
				return cli_usage_error(ctx, &cli_cmd_replay,
						       "--threshold '%s' is not a fraction of the pixels "
						       "(0 to 1, or 0%% to 100%%)",
						       optarg);
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_replay, c, argv);
		if (r >= 0)
			return r;
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, &cli_cmd_replay, "needs exactly one task ID");
	if (threshold >= 0 && !check)
		return cli_usage_error(ctx, &cli_cmd_replay, "--threshold goes with --check");
	if (check && threshold < 0)
		threshold = REPLAY_DEFAULT_THRESHOLD;
	if ((r = cli_parse_task_id(ctx, &cli_cmd_replay, argv[optind], &id)) != 0)
		return r;

	/* The steps are read quietly: --json prints the new task's answer and events only. */
	bool json = ctx->json;
	ctx->json = false;
	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/steps", id);
	r = cli_api_json(ctx, "GET", path, NULL, &steps);
	free(path);
	ctx->json = json;
	if (r != 0)
		goto cleanup;
	body = cli_replay_script(json_object_get(steps, "steps"), id, from, dry_run, check ? threshold : -1,
				 &n);
	if (!body) {
		r = cli_error(ctx, "task %ld has no executed step from step %ld on to replay", id, from);
		goto cleanup;
	}
	if (n > IPC_MAX_SCRIPT_ACTIONS) {
		r = cli_error(ctx,
			      "task %ld has %zu actions to replay, over the %d of one script; "
			      "replay it in parts with --from",
			      id, n, IPC_MAX_SCRIPT_ACTIONS);
		goto cleanup;
	}
	text = json_dumps(body, JSON_COMPACT);
	r = cli_api_json(ctx, "POST", IPC_API_PREFIX "/tasks", text, &answer);
	if (r != 0)
		goto cleanup;
	json_t *new_id = json_object_get(answer, "id");
	if (!json_is_integer(new_id)) {
		r = cli_error(ctx, "holod accepted the task but its answer has no task \"id\"");
		goto cleanup;
	}
	if (!ctx->json) {
		fprintf(ctx->out, "task %" JSON_INTEGER_FORMAT " replays task %ld: %zu actions%s",
			json_integer_value(new_id), id, n, dry_run ? " (dry run)" : "");
		if (check)
			fprintf(ctx->out,
				", each screen checked (at most %g%% of the pixels may "
				"differ)",
				100 * threshold);
		fputc('\n', ctx->out);
		fflush(ctx->out);
	}
	r = cli_follow_task(ctx, (long long)json_integer_value(new_id), NULL);

cleanup:
	free(text);
	json_decref(steps);
	json_decref(body);
	json_decref(answer);
	return r;
}

const struct cli_command cli_cmd_replay = {
	.name = "replay",
	.args = "[--dry-run] [--from N] [--check [--threshold T]] ID",
	.summary = "run a task's recorded actions again, at the same pixels",
	.help = "Re-runs the actions task ID executed (a script or an instruction task's model\n"
		"steps) as a new script task on the current screen, with the original pixel\n"
		"coordinates, and follows it like `run --follow` (same exit statuses). The new\n"
		"task records the one it replays (\"replay_of\" in its spec).\n"
		"  --dry-run   journal the steps and screenshots, inject nothing\n"
		"  --from N    start at step N\n"
		"  --check     before each action, compare the screen with the step's recorded\n"
		"              screenshot and stop at the first that differs, saying by how\n"
		"              much (the fraction of differing pixels and their mean difference)\n"
		"  --threshold T  the fraction of pixels that may differ (0.05 or 5%; default\n"
		"              1%)\n",
	.run = replay_run,
};
