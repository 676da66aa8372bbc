/* How steps and tasks read in human output: the table of `holoctl show`, the live lines of
 * `run --follow` and the answer of `holoctl do`. The objects are those of docs/api.md (one step:
 * index, tool_call, status, coords, model, pixels, result, error, timings_us, screenshots, and
 * for instruction tasks `agent`: thought, note, raw_output, tokens). */
#include "cli.h"

#include "common.h"
#include "ipc.h"
#include "table.h"

#include <stdlib.h>
#include <string.h>

/* Integer member or -1. */
static long long int_member(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static const char *str_member(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

void cli_format_point(json_t *p, char *buf, size_t size)
{
	json_t *x = json_object_get(p, "x"), *y = json_object_get(p, "y");
	json_t *x2 = json_object_get(p, "x2"), *y2 = json_object_get(p, "y2");

	if (!json_is_integer(x) || !json_is_integer(y)) {
		snprintf(buf, size, "-");
		return;
	}
	if (json_is_integer(x2) && json_is_integer(y2))
		snprintf(buf, size, "%lld,%lld->%lld,%lld", (long long)json_integer_value(x),
			 (long long)json_integer_value(y), (long long)json_integer_value(x2),
			 (long long)json_integer_value(y2));
	else
		snprintf(buf, size, "%lld,%lld", (long long)json_integer_value(x),
			 (long long)json_integer_value(y));
}

void cli_format_tool_args(json_t *call, char *buf, size_t size)
{
	const char *tool = str_member(call, "tool_name");
	const char *element = str_member(call, "element");
	json_t *v;

	buf[0] = '\0';
	if (!tool)
		return;
	if (strcmp(tool, "write") == 0 || strcmp(tool, "answer") == 0) {
		snprintf(buf, size, "\"%s\"%s%s",
			 str_member(call, "content") ? str_member(call, "content") : "",
			 json_is_true(json_object_get(call, "press_enter")) ? " +enter" : "",
			 json_is_true(json_object_get(call, "overwrite")) ? " overwrite" : "");
	} else if (strcmp(tool, "hotkey") == 0) {
		size_t o = 0, i;
		json_array_foreach(json_object_get(call, "keys"), i, v)
		{
			int n = snprintf(buf + o, size - o, "%s%s", i ? "+" : "",
					 json_string_value(v) ? json_string_value(v) : "?");
			if (n < 0 || (size_t)n >= size - o)
				break;
			o += (size_t)n;
		}
		if (int_member(call, "repeat_count") > 1 && o < size)
			snprintf(buf + o, size - o, " x%lld", int_member(call, "repeat_count"));
	} else if (strcmp(tool, "key_down") == 0 || strcmp(tool, "key_up") == 0) {
		snprintf(buf, size, "%s", str_member(call, "key") ? str_member(call, "key") : "");
	} else if (strcmp(tool, "wait") == 0) {
		v = json_object_get(call, "duration");
		snprintf(buf, size, "%g s", json_is_number(v) ? json_number_value(v) : 0.0);
	} else if (strcmp(tool, "scroll") == 0) {
		snprintf(buf, size, "%s %lld",
			 str_member(call, "direction") ? str_member(call, "direction") : "?",
			 int_member(call, "scroll_size"));
	} else if (strcmp(tool, "click") == 0 && str_member(call, "button") &&
		   strcmp(str_member(call, "button"), "left") != 0) {
		snprintf(buf, size, "%s%s%s", str_member(call, "button"), element ? " " : "",
			 element ? element : "");
	} else if (element) {
		snprintf(buf, size, "%s", element);
	}
}

bool cli_format_step_tokens(json_t *agent, char *buf, size_t size)
{
	json_t *tokens = json_object_get(agent, "tokens");
	long long decoded = int_member(tokens, "decoded"), forced = int_member(tokens, "forced");
	long long forwards = int_member(tokens, "forwards");

	if (decoded < 0)
		return false;
	if (forced < 0 || forwards < 0) /* a remote server's step, or one journaled before 11 */
		snprintf(buf, size, "%lld decoded", decoded);
	else
		snprintf(buf, size, "%lld decoded, %lld forced (jump-forward), %lld forwards", decoded,
			 forced, forwards);
	return true;
}

/* Total time of a step: the sum of its phases (null phases count as 0); -1 when unknown. */
static long long step_total_us(json_t *timings)
{
	static const char *const phases[] = {"capture", "preprocess", "encode", "prefill",	"decode",
					     "map",	"inject",     "settle", "capture_after"};
	long long total = 0;
	bool any = false;

	for (size_t i = 0; i < ARRAY_SIZE(phases); i++) {
		long long v = int_member(timings, phases[i]);
		if (v >= 0) {
			total += v;
			any = true;
		}
	}
	return any ? total : -1;
}

static const char *step_outcome(json_t *step)
{
	const char *error = str_member(step, "error");
	const char *result = str_member(step, "result");
	return error ? error : result ? result : "";
}

/* Whether the step ran with its keys going to the root window: no window had the focus. */
static bool step_warned_no_focus(json_t *step)
{
	const char *status = str_member(step, "status");
	const char *result = str_member(step, "result");

	return status && strcmp(status, "ok") == 0 && result && strstr(result, "(" IPC_NO_FOCUS_WARNING ")");
}

/* The status a person reads: "warning" for a step that ran but whose keys went nowhere. */
static const char *step_status_shown(json_t *step)
{
	return step_warned_no_focus(step) ? "warning" : str_member(step, "status");
}

/* Whether any step came from the model (instruction tasks): its phases get columns. */
static bool any_agent_step(json_t *steps)
{
	json_t *step;
	size_t i;

	json_array_foreach(steps, i, step) if (json_is_object(json_object_get(step, "agent"))) return true;
	return false;
}

/* Room for a tool call's arguments whole: a write's content and its flags. */
#define ARGS_BYTES (IPC_MAX_CONTENT_BYTES + 64)

int cli_print_steps_table(struct cli_context *ctx, json_t *steps, unsigned width)
{
	/* Capture, then the model's phases (instruction tasks), then inject and settle: the
	 * order a step runs them in. */
	static const char *const script_headers[] = {"#",      "TOOL",	 "ARGS",    "MODEL",
						     "PIXELS", "STATUS", "CAPTURE", "INJECT",
						     "SETTLE", "TOTAL",	 "RESULT"};
	static const char *const agent_headers[] = {"#",      "TOOL",	 "ARGS",    "MODEL",  "PIXELS",
						    "STATUS", "CAPTURE", "PREPROC", "VISION", "PREFILL",
						    "DECODE", "INJECT",	 "SETTLE",  "TOTAL",  "RESULT"};
	static const char *const model_phases[] = {"preprocess", "encode", "prefill", "decode"};
	bool agent = any_agent_step(steps);
	const char *const *headers = agent ? agent_headers : script_headers;
	size_t ncol = agent ? ARRAY_SIZE(agent_headers) : ARRAY_SIZE(script_headers);
	struct cli_table *t = cli_table_create(ncol, headers);
	char *args = xmalloc(ARGS_BYTES);
	json_t *step;
	size_t i;
	int r;

	for (size_t c = 0; c < ncol; c++)
		if (c == 0 || (c >= 6 && c + 1 < ncol))
			cli_table_set_align(t, c, CLI_ALIGN_RIGHT);
	/* The arguments and the result are free text: they give way to fit the width. */
	cli_table_set_flexible(t, 2);
	cli_table_set_flexible(t, ncol - 1);
	cli_table_set_width(t, width);
	json_array_foreach(steps, i, step)
	{
		char idx[24], model[64], pixels[64], capture[32], phases[4][32], inject[32], settle[32],
			total[32];
		json_t *call = json_object_get(step, "tool_call");
		json_t *timings = json_object_get(step, "timings_us");
		const char *row[ARRAY_SIZE(agent_headers)];
		size_t n = 0;

		snprintf(idx, sizeof(idx), "%lld", int_member(step, "index"));
		cli_format_tool_args(call, args, ARGS_BYTES);
		cli_format_point(json_object_get(step, "model"), model, sizeof(model));
		cli_format_point(json_object_get(step, "pixels"), pixels, sizeof(pixels));
		cli_format_duration_us(int_member(timings, "capture"), capture, sizeof(capture));
		cli_format_duration_us(int_member(timings, "inject"), inject, sizeof(inject));
		cli_format_duration_us(int_member(timings, "settle"), settle, sizeof(settle));
		cli_format_duration_us(step_total_us(timings), total, sizeof(total));
		row[n++] = idx;
		row[n++] = str_member(call, "tool_name");
		row[n++] = args;
		row[n++] = model;
		row[n++] = pixels;
		row[n++] = step_status_shown(step);
		row[n++] = capture;
		for (size_t p = 0; agent && p < ARRAY_SIZE(model_phases); p++) {
			cli_format_duration_us(int_member(timings, model_phases[p]), phases[p],
					       sizeof(phases[p]));
			row[n++] = phases[p];
		}
		row[n++] = inject;
		row[n++] = settle;
		row[n++] = total;
		row[n++] = step_outcome(step);
		cli_table_add_row(t, row);
	}
	r = cli_table_print(t, ctx->out);
	cli_table_destroy(t);
	free(args);
	return r;
}

void cli_print_step_texts(struct cli_context *ctx, json_t *steps, unsigned width)
{
	static const char *const said[] = {"thought", "note", "reasoning"};
	json_t *step;
	size_t i;

	json_array_foreach(steps, i, step)
	{
		json_t *agent = json_object_get(step, "agent");
		if (!json_is_object(agent))
			continue;
		fprintf(ctx->out, "\nstep %lld\n", int_member(step, "index"));
		char tokens[128];
		if (cli_format_step_tokens(agent, tokens, sizeof(tokens)))
			fprintf(ctx->out, "  tokens: %s\n", tokens);
		for (size_t k = 0; k < ARRAY_SIZE(said); k++) {
			const char *text = str_member(agent, said[k]);
			char label[16];
			if (k == 2 && (!text || !text[0]))
				continue; /* the think block, when thinking was on */
			snprintf(label, sizeof(label), "%s: ", said[k]);
			cli_print_wrapped(ctx->out, label, text && text[0] ? text : "(none)", 2, width);
		}
	}
}

void cli_print_step_line(struct cli_context *ctx, json_t *step)
{
	char pixels[64], model[64], where[160], total[32];
	char *args = xmalloc(ARGS_BYTES);
	json_t *call = json_object_get(step, "tool_call");
	const char *status = step_status_shown(step);
	const char *outcome = step_outcome(step);
	char *shown_args, *shown_outcome;

	cli_format_tool_args(call, args, ARGS_BYTES);
	cli_format_point(json_object_get(step, "pixels"), pixels, sizeof(pixels));
	cli_format_point(json_object_get(step, "model"), model, sizeof(model));
	/* " @ 80,60", or with model coordinates " @ 80,60 (model 100,100)". */
	where[0] = '\0';
	if (strcmp(pixels, "-") != 0)
		snprintf(where, sizeof(where), " @ %s%s%s%s", pixels, strcmp(model, "-") ? " (model " : "",
			 strcmp(model, "-") ? model : "", strcmp(model, "-") ? ")" : "");
	cli_format_duration_us(step_total_us(json_object_get(step, "timings_us")), total, sizeof(total));
	shown_args = cli_table_render_cell(args);
	shown_outcome = cli_table_render_cell(outcome);
	fprintf(ctx->out, "step %lld  %s%s%s%s  %s  %s%s%s\n", int_member(step, "index"),
		str_member(call, "tool_name") ? str_member(call, "tool_name") : "?", args[0] ? " " : "",
		shown_args, where, status ? status : "?", total, outcome[0] ? ": " : "", shown_outcome);
	free(shown_args);
	free(shown_outcome);
	free(args);
	/* What the model said about the step (instruction tasks). */
	json_t *agent = json_object_get(step, "agent");
	static const char *const said[] = {"thought", "note", "reasoning"};
	for (size_t i = 0; json_is_object(agent) && i < ARRAY_SIZE(said); i++) {
		const char *text = str_member(agent, said[i]);
		if (i > 0 && (!text || !text[0]))
			continue;
		char *shown = cli_table_render_cell(text && text[0] ? text : "(empty)");
		fprintf(ctx->out, "        %s: %s\n", said[i], shown);
		free(shown);
	}
}

int cli_print_action_answer(struct cli_context *ctx, json_t *answer)
{
	json_t *step = json_object_get(answer, "step");
	json_t *steps = json_object_get(answer, "steps");
	json_t *task = json_object_get(answer, "task");
	const char *status, *error;

	if (!json_is_object(step) && json_is_array(steps))
		step = json_array_get(steps, 0);
	if (!json_is_object(task))
		task = answer;
	if (json_is_object(step))
		cli_print_step_line(ctx, step);
	if (json_is_object(step) && step_warned_no_focus(step))
		fprintf(ctx->err,
			"holoctl: warning: %s; activate a window first (holoctl do activate "
			"--title RE), or give --require-focus to fail instead\n",
			IPC_NO_FOCUS_WARNING);
	status = str_member(task, "status");
	error = str_member(task, "error");
	if (status && strcmp(status, "succeeded") != 0)
		return cli_error(ctx, "the action %s%s%s", status, error ? ": " : "", error ? error : "");
	if (!json_is_object(step) && !status)
		return cli_error(ctx, "holod's answer has neither the step nor a status");
	return CLI_EXIT_OK;
}
