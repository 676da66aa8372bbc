/* holoctl run: start a task (POST /v1/tasks) from a script or an instruction, and with --follow
 * print its steps live from GET /v1/tasks/{id}/events (NDJSON, one event per line). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
	OPT_SCRIPT = CLI_OPT_FIRST_COMMAND_OPTION,
	OPT_MAX_STEPS,
	OPT_MAX_SECONDS,
	OPT_DRY_RUN,
	OPT_SETTLE_MS,
	OPT_COORDS,
	OPT_FOLLOW,
	OPT_HISTORY,
	OPT_WINDOW,
	OPT_MAX_TILES,
	OPT_DISPLAY,
	OPT_TEMPERATURE,
	OPT_TOP_P,
	OPT_SEED,
	OPT_THINKING,
	OPT_THINKING_TOKENS,
	OPT_POLICY_FORMAT,
	OPT_STUCK_WARN,
	OPT_STUCK_STOP,
	OPT_APPROVE,
	OPT_TAKEOVER,
	OPT_ASK_TIMEOUT,
};

static const struct option run_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"script", required_argument, NULL, OPT_SCRIPT},
	{"max-steps", required_argument, NULL, OPT_MAX_STEPS},
	{"max-seconds", required_argument, NULL, OPT_MAX_SECONDS},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{"settle-ms", required_argument, NULL, OPT_SETTLE_MS},
	{"coords", required_argument, NULL, OPT_COORDS},
	{"follow", no_argument, NULL, 'f'},
	{"history", required_argument, NULL, OPT_HISTORY},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"max-tiles", required_argument, NULL, OPT_MAX_TILES},
	{"display", required_argument, NULL, OPT_DISPLAY},
	{"temperature", required_argument, NULL, OPT_TEMPERATURE},
	{"top-p", required_argument, NULL, OPT_TOP_P},
	{"seed", required_argument, NULL, OPT_SEED},
	{"thinking", required_argument, NULL, OPT_THINKING},
	{"thinking-tokens", required_argument, NULL, OPT_THINKING_TOKENS},
	{"policy-format", required_argument, NULL, OPT_POLICY_FORMAT},
	{"stuck-warn", required_argument, NULL, OPT_STUCK_WARN},
	{"stuck-stop", required_argument, NULL, OPT_STUCK_STOP},
	{"approve", required_argument, NULL, OPT_APPROVE},
	{"takeover", required_argument, NULL, OPT_TAKEOVER},
	{"ask-timeout", required_argument, NULL, OPT_ASK_TIMEOUT},
	{0},
};

/* A number written whole (its range is the request parser's to check). */
static int parse_real(const char *s, double *ret)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v != v)
		return -EINVAL;
	*ret = v;
	return 0;
}

void cli_run_args_finish(struct cli_run_args *a)
{
	free(a->body);
	*a = (struct cli_run_args){0};
}

/* Bytes looked at to tell a JSON script from other files. */
#define RUN_SNIFF_BYTES 256

/* Whether the lone argument of `holoctl run` is a script file: 1 (a file named *.json, or one
 * whose text starts as JSON does: it is run as a script, and a line says so), 0 (an
 * instruction), or -1 after a usage error: a *.json name that is no readable file, a file that
 * is no script. */
static int script_file_argument(struct cli_context *ctx, const char *arg)
{
	size_t n = strlen(arg);
	bool json_name = n > 5 && strcmp(arg + n - 5, ".json") == 0;
	char head[RUN_SNIFF_BYTES];
	struct stat st;
	FILE *f;

	int err = stat(arg, &st) < 0 ? errno : 0;
	if (err || !S_ISREG(st.st_mode)) {
		if (!json_name)
			return 0;
		cli_usage_error(ctx, &cli_cmd_run,
				"'%s' looks like a script file but is not one (%s): give --script "
				"FILE to run a script, or an instruction in words",
				arg, err ? strerror(err) : "not a regular file");
		return -1;
	}
	f = fopen(arg, "r");
	n = f ? fread(head, 1, sizeof(head), f) : 0;
	if (f)
		fclose(f);
	size_t i = 0;
	while (i < n && strchr(" \t\r\n", head[i]))
		i++;
	if (json_name || (i < n && (head[i] == '[' || head[i] == '{'))) {
		fprintf(ctx->err,
			"holoctl run: '%s' is a file: running it as a script (as with "
			"--script %s)\n",
			arg, arg);
		return 1;
	}
	cli_usage_error(ctx, &cli_cmd_run,
			"'%s' is a file but not a JSON script: give --script FILE for a script, or "
			"an instruction that is not a file's name",
			arg);
	return -1;
}

int cli_run_parse(struct cli_context *ctx, int argc, char **argv, struct cli_run_args *ret)
{
	struct cli_run_args a = {0};
	struct ipc_task_request *check = NULL;
	const char *script = NULL, *coords = NULL, *history = NULL, *display = NULL;
	const char *policy_format = NULL, *approve = NULL, *takeover = NULL;
	long max_steps = 0, max_seconds = 0, settle_ms = -1, window = 0, max_tiles = 0, seed = -1;
	long ask_timeout = 0;
	double temperature = -1, top_p = -1;
	long thinking_tokens = 0, stuck_warn = -1, stuck_stop = -1;
	int thinking = -1; /* -1: holod's default */
	bool dry_run = false;
	char err[CLI_MAX_ERROR_LEN + 256];
	json_t *body = NULL;
	char *text = NULL;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS "f", run_options, NULL)) != -1) {
		switch (c) {
		case OPT_SCRIPT:
			script = optarg;
			break;
		case OPT_MAX_STEPS:
			if (cli_parse_int(optarg, 1, IPC_MAX_TASK_STEPS, &max_steps) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--max-steps must be from 1 to %d, not '%s'",
						       IPC_MAX_TASK_STEPS, optarg);
			break;
		case OPT_MAX_SECONDS:
			if (cli_parse_int(optarg, 1, IPC_MAX_TASK_SECONDS, &max_seconds) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--max-seconds must be from 1 to %d, not '%s'",
						       IPC_MAX_TASK_SECONDS, optarg);
			break;
		case OPT_ASK_TIMEOUT:
			if (cli_parse_int(optarg, 1, IPC_MAX_TASK_SECONDS, &ask_timeout) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--ask-timeout must be from 1 to %d seconds, not '%s'",
						       IPC_MAX_TASK_SECONDS, optarg);
			break;
		case OPT_DRY_RUN:
			dry_run = true;
			break;
		case OPT_SETTLE_MS:
			if (cli_parse_int(optarg, 0, IPC_MAX_SETTLE_MS, &settle_ms) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--settle-ms must be from 0 to %d, not '%s'",
						       IPC_MAX_SETTLE_MS, optarg);
			break;
		case OPT_COORDS:
			if (ipc_coords_from_string(optarg) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--coords must be pixels or model, not '%s'", optarg);
			coords = optarg;
			break;
		case 'f':
			a.follow = true;
			break;
		case OPT_TAKEOVER:
			if (ipc_takeover_from_string(optarg) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--takeover must be pause, ignore or cancel, not "
						       "'%s'",
						       optarg);
			takeover = optarg;
			break;
		case OPT_DISPLAY:
			display = optarg; /* checked with the whole request below */
			break;
		case OPT_APPROVE:
			if (ipc_approve_from_string(optarg) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--approve must be none, risky or all, not '%s'",
						       optarg);
			approve = optarg;
			break;
		case OPT_HISTORY:
			if (ipc_history_from_string(optarg) < 0)
				return cli_usage_error(
					ctx, &cli_cmd_run,
					"--history must be rolling, persistent or window, not '%s'", optarg);
			history = optarg;
			break;
		case OPT_POLICY_FORMAT:
			if (ipc_policy_format_from_string(optarg) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--policy-format must be holo3 or holo-nano, not '%s'",
						       optarg);
			policy_format = optarg;
			break;
		case OPT_WINDOW:
			if (cli_parse_int(optarg, 1, IPC_MAX_HISTORY_WINDOW, &window) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--window must be from 1 to %d, not '%s'",
						       IPC_MAX_HISTORY_WINDOW, optarg);
			break;
		case OPT_MAX_TILES:
			if (cli_parse_int(optarg, 1, IPC_MAX_TILES, &max_tiles) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--max-tiles must be from 1 to %d, not '%s'",
						       IPC_MAX_TILES, optarg);
			break;
		case OPT_TEMPERATURE:
			if (parse_real(optarg, &temperature) < 0 || temperature < 0 ||
			    temperature > IPC_MAX_TEMPERATURE)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--temperature must be from 0 (greedy) to %g, "
						       "not '%s'",
						       IPC_MAX_TEMPERATURE, optarg);
			break;
		case OPT_TOP_P:
			if (parse_real(optarg, &top_p) < 0 || top_p <= 0 || top_p > 1)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--top-p must be above 0 and at most 1, not '%s'",
						       optarg);
			break;
		case OPT_SEED:
			if (cli_parse_int(optarg, 0, (long)IPC_MAX_SEED, &seed) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--seed must be from 0 to %llu, not '%s'",
						       (unsigned long long)IPC_MAX_SEED, optarg);
			break;
		case OPT_THINKING:
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--thinking must be on or off, not '%s'", optarg);
			thinking = strcmp(optarg, "on") == 0;
			break;
		case OPT_THINKING_TOKENS:
			if (cli_parse_int(optarg, 1, IPC_MAX_THINKING_TOKENS, &thinking_tokens) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--thinking-tokens must be from 1 to %d, not '%s'",
						       IPC_MAX_THINKING_TOKENS, optarg);
			break;
		case OPT_STUCK_WARN:
		case OPT_STUCK_STOP:
			if (cli_parse_int(optarg, 0, IPC_MAX_STUCK_STEPS,
					  c == OPT_STUCK_WARN ? &stuck_warn : &stuck_stop) < 0)
				return cli_usage_error(ctx, &cli_cmd_run,
						       "--stuck-%s must be from 0 (off) to %d, not '%s'",
						       c == OPT_STUCK_WARN ? "warn" : "stop",
						       IPC_MAX_STUCK_STEPS, optarg);
			break;
		default:
			r = cli_common_option(ctx, &cli_cmd_run, c, argv);
			if (r == CLI_EXIT_OK) {
				a.help = true;
				*ret = a;
				return CLI_EXIT_OK;
			}
			if (r >= 0)
				return r;
			break;
		}
	}

	/* `holoctl run steps.json`: the one argument names a script file, not an instruction. */
	if (!script && argc - optind == 1) {
		r = script_file_argument(ctx, argv[optind]);
		if (r < 0)
			return CLI_EXIT_USAGE;
		if (r > 0)
			script = argv[optind++];
	}
	if (script && optind < argc)
		return cli_usage_error(ctx, &cli_cmd_run,
				       "give either --script FILE or an instruction, not both ('%s')",
				       argv[optind]);
	if (!script && optind >= argc)
		return cli_usage_error(
			ctx, &cli_cmd_run,
			"what should holod do? give --script FILE (- for stdin) or an instruction");

	if (script &&
	    (history || window || max_tiles || temperature >= 0 || top_p >= 0 || seed >= 0 || thinking >= 0 ||
	     thinking_tokens || policy_format || stuck_warn >= 0 || stuck_stop >= 0))
		return cli_usage_error(ctx, &cli_cmd_run,
				       "--history, --window, --max-tiles, --temperature, --top-p, "
				       "--seed, --thinking, --thinking-tokens, --policy-format, "
				       "--stuck-warn and --stuck-stop apply to instructions only");
	if (script) {
		if (cli_script_read(script, ctx->in, &body, err, sizeof(err)) < 0)
			return cli_usage_error(ctx, &cli_cmd_run, "%s", err);
		if (coords)
			json_object_set_new(body, "coords", json_string(coords));
	} else {
		if (coords)
			return cli_usage_error(ctx, &cli_cmd_run, "--coords applies to scripts only");
		/* Several words are one instruction: `holoctl run open the settings`. */
		size_t len = 0;
		for (int i = optind; i < argc; i++)
			len += strlen(argv[i]) + 1;
		char *instruction = xmalloc(len + 1);
		instruction[0] = '\0';
		for (int i = optind; i < argc; i++) {
			if (i > optind)
				strcat(instruction, " ");
			strcat(instruction, argv[i]);
		}
		body = json_pack("{s:s}", "instruction", instruction);
		free(instruction);
		if (!body)
			return cli_usage_error(ctx, &cli_cmd_run, "the instruction is not valid UTF-8");
	}
	/* Options on the command line override those of the script file. */
	if (max_steps)
		json_object_set_new(body, "max_steps", json_integer(max_steps));
	if (max_seconds)
		json_object_set_new(body, "max_seconds", json_integer(max_seconds));
	if (settle_ms >= 0)
		json_object_set_new(body, "settle_ms", json_integer(settle_ms));
	if (ask_timeout)
		json_object_set_new(body, "ask_timeout", json_integer(ask_timeout));
	if (dry_run)
		json_object_set_new(body, "dry_run", json_true());
	if (history)
		json_object_set_new(body, "history", json_string(history));
	if (policy_format)
		json_object_set_new(body, "policy_format", json_string(policy_format));
	if (window)
		json_object_set_new(body, "window", json_integer(window));
	if (max_tiles)
		json_object_set_new(body, "max_tiles", json_integer(max_tiles));
	if (thinking >= 0)
		json_object_set_new(body, "thinking", json_boolean(thinking));
	if (thinking_tokens)
		json_object_set_new(body, "thinking_tokens", json_integer(thinking_tokens));
	if (stuck_warn >= 0)
		json_object_set_new(body, "stuck_warn", json_integer(stuck_warn));
	if (stuck_stop >= 0)
		json_object_set_new(body, "stuck_stop", json_integer(stuck_stop));
	if (display)
		json_object_set_new(body, "display", json_string(display));
	if (approve)
		json_object_set_new(body, "approve", json_string(approve));
	if (takeover)
		json_object_set_new(body, "takeover", json_string(takeover));
	if (temperature >= 0)
		json_object_set_new(body, "temperature", json_real(temperature));
	if (top_p >= 0)
		json_object_set_new(body, "top_p", json_real(top_p));
	if (seed >= 0)
		json_object_set_new(body, "seed", json_integer(seed));

	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return cli_error(ctx, "out of memory");
	if (strlen(text) > IPC_MAX_BODY_BYTES) {
		free(text);
		return cli_usage_error(ctx, &cli_cmd_run,
				       "the task is larger than holod accepts (%d bytes as compact "
				       "JSON); split the script",
				       IPC_MAX_BODY_BYTES);
	}
	r = ipc_task_request_parse(text, strlen(text), &check, err, sizeof(err));
	if (r < 0) {
		free(text);
		return cli_usage_error(ctx, &cli_cmd_run, "%s", err);
	}
	ipc_task_request_destroy(check);
	a.body = text;
	*ret = a;
	return 0;
}

/* State of one --follow stream. */
struct follow {
	struct cli_context *ctx;
	long long task_id;
	char *final_status; /* the task's final status once an event carried it */
	char *final_error;
	long long steps;
	long long events; /* event lines handled so far */
	long long skip;	  /* a stream opened again repeats what was handled: skip that many */
	bool midline;	  /* a streamed thought is being printed: its line is not ended yet */
	char shown[32];	  /* the last status printed ("task N queued"); "" none yet */
	int thought_step, thought_attempt; /* whose */
};

static void end_line(struct follow *f)
{
	if (f->midline)
		fputc('\n', f->ctx->out);
	f->midline = false;
}

/* One progress event (docs/api.md, "Progress events") as a line, the thought streamed inline
 * on its own line as it is decoded; "step N [+1.2s]" is the clock of the step. */
static void print_progress(struct follow *f, json_t *event)
{
	FILE *out = f->ctx->out;
	const char *phase = json_string_value(json_object_get(event, "phase"));
	json_t *stepj = json_object_get(event, "step");
	json_t *ms = json_object_get(event, "elapsed_ms");
	long long id = f->task_id;
	char head[64];

	if (!phase)
		return;
	if (json_is_integer(stepj))
		snprintf(head, sizeof(head), "step %" JSON_INTEGER_FORMAT " [+%.1fs]",
			 json_integer_value(stepj), json_integer_value(ms) / 1000.0);
	else
		snprintf(head, sizeof(head), "task %lld [+%.1fs]", id, json_integer_value(ms) / 1000.0);
#define N(key) json_integer_value(json_object_get(event, key))
	if (strcmp(phase, "decode") == 0) {
		const char *text = json_string_value(json_object_get(event, "thought"));
		if (!text)
			return;
		int step = (int)N("step"), attempt = (int)N("attempt");
		if (!f->midline || step != f->thought_step || attempt != f->thought_attempt) {
			end_line(f);
			fprintf(out, "%s thought: ", head);
			f->midline = true;
			f->thought_step = step;
			f->thought_attempt = attempt;
		}
		fputs(text, out);
		return;
	}
	end_line(f);
	if (strcmp(phase, "queued") == 0) {
		long long ahead = N("ahead");
		if (ahead > 0)
			fprintf(out, "task %lld queued behind %lld task%s\n", id, ahead,
				ahead == 1 ? "" : "s");
		else
			fprintf(out, "task %lld queued, next to run\n", id);
	} else if (strcmp(phase, "loading") == 0) {
		fprintf(out, "task %lld waits for the model to load: %.1f of %.1f MiB\n", id,
			N("bytes") / 1048576.0, N("total") / 1048576.0);
	} else if (strcmp(phase, "admission") == 0) {
		fprintf(out, "task %lld waits for model memory: position %lld\n", id, N("position"));
	} else if (strcmp(phase, "admitted") == 0) {
		fprintf(out, "%s admitted: the model takes the task\n", head);
	} else if (strcmp(phase, "capture") == 0) {
		fprintf(out, "%s capture\n", head);
	} else if (strcmp(phase, "vision") == 0) {
		fprintf(out, "%s vision: tile %lld of %lld\n", head, N("tile"), N("tiles"));
	} else if (strcmp(phase, "prefill") == 0) {
		const char *what = json_string_value(json_object_get(event, "what"));
		fprintf(out, "%s prefill (%s): %lld of %lld tokens\n", head, what ? what : "?", N("done"),
			N("total"));
	} else if (strcmp(phase, "retry") == 0) {
		const char *e = json_string_value(json_object_get(event, "error"));
		fprintf(out, "%s retry (attempt %lld): %s\n", head, N("attempt"), e ? e : "");
	} else if (strcmp(phase, "action") == 0) {
		char *call = json_dumps(json_object_get(event, "tool_call"), JSON_COMPACT);
		fprintf(out, "%s action: %s\n", head, call ? call : "null");
		free(call);
	} else if (strcmp(phase, "acted") == 0) {
		const char *r = json_string_value(json_object_get(event, "result"));
		const char *e = json_string_value(json_object_get(event, "error"));
		fprintf(out, "%s %s: %s\n", head, r ? "done" : "failed", r ? r : e ? e : "");
	} else if (strcmp(phase, "interrupted") == 0) {
		const char *why = json_string_value(json_object_get(event, "why"));
		fprintf(out, "%s decode interrupted (%s): the step is decided again once resumed\n", head,
			why ? why : "?");
	} else if (strcmp(phase, "dropped") == 0) {
		fprintf(out, "task %lld: %lld progress events dropped (holoctl read too slowly)\n", id,
			N("events"));
	}
#undef N
}

/* The task status an event carries: "status" at the top, or in a "task" member. */
static json_t *event_task(json_t *event)
{
	json_t *task = json_object_get(event, "task");
	return json_is_object(task) ? task : event;
}

static int follow_line(const char *line, size_t len, void *userdata)
{
	struct follow *f = userdata;
	struct cli_context *ctx = f->ctx;
	json_error_t jerr;
	json_t *event, *step;
	const char *status;

	if (len == 0)
		return 0; /* keep-alive */
	event = json_loadb(line, len, 0, &jerr);
	if (!json_is_object(event)) {
		json_decref(event);
		cli_error(ctx,
			  "holod sent an event that is not a JSON object (%s); the task goes on: "
			  "`holoctl show %lld`",
			  jerr.text, f->task_id);
		return -ECANCELED;
	}
	const char *kind = json_string_value(json_object_get(event, "event"));
	/* A stream opened again repeats the task, step and end events, not the others (progress
	 * and status changes are told once, as they happen). */
	bool replayed = !kind || (strcmp(kind, "progress") != 0 && strcmp(kind, "status") != 0);
	if (replayed && f->skip > 0) {
		f->skip--;
		json_decref(event);
		return 0;
	}
	if (replayed)
		f->events++;
	if (ctx->json) {
		fwrite(line, 1, len, ctx->out);
		fputc('\n', ctx->out);
	}
	step = json_object_get(event, "step");
	if (kind && strcmp(kind, "progress") == 0) {
		if (!ctx->json)
			print_progress(f, event);
	} else if (kind && (strcmp(kind, "status") == 0 || strcmp(kind, "task") == 0)) {
		/* what the task is now, once per change: "queued" is not left standing once it
		 * runs; a final status is told by the outcome line */
		const char *st = json_string_value(json_object_get(event_task(event), "status"));
		int sv = st ? ipc_task_status_from_string(st) : -EINVAL;
		if (!ctx->json && sv >= 0 && !ipc_task_status_is_final((enum ipc_task_status)sv) &&
		    strcmp(st, f->shown) != 0) {
			end_line(f);
			fprintf(ctx->out, "task %lld %s\n", f->task_id, st);
			snprintf(f->shown, sizeof(f->shown), "%s", st);
		}
	} else if (json_is_object(step)) {
		f->steps++;
		if (!ctx->json) {
			end_line(f);
			cli_print_step_line(ctx, step);
		}
	}
	json_t *waiting = json_object_get(event, "waiting");
	if (json_is_object(waiting) && !ctx->json)
		cli_print_waiting(ctx, f->task_id, waiting);
	status = json_string_value(json_object_get(event_task(event), "status"));
	if (status && ipc_task_status_from_string(status) >= 0 &&
	    ipc_task_status_is_final((enum ipc_task_status)ipc_task_status_from_string(status))) {
		const char *error = json_string_value(json_object_get(event_task(event), "error"));
		free(f->final_status);
		free(f->final_error);
		f->final_status = xstrdup(status);
		f->final_error = error ? xstrdup(error) : NULL;
	}
	if (!ctx->json)
		fflush(ctx->out); /* live: a step is visible as soon as it happened */
	json_decref(event);
	return 0;
}

static volatile sig_atomic_t follow_interrupts; /* Ctrl-C presses while following */

static void follow_sigint(int sig)
{
	(void)sig;
	follow_interrupts++;
}

/* Follows the event stream; the first Ctrl-C asks holod to cancel the task and goes on
 * following (the task ends 'cancelled' at its next safe point), a second one stops following and
 * leaves the task to run on. Returns what cli_api_stream does, or -EINTR after that second one. */
static int follow_stream(struct cli_context *ctx, struct follow *f)
{
	char *path = xasprintf(IPC_API_PREFIX "/tasks/%lld/events", f->task_id);
	struct sigaction sa = {.sa_handler = follow_sigint}, old;
	bool handler = false, cancelled = false;
	int r;

	/* A Ctrl-C that the caller ignores (a background job of a shell) stays ignored. */
	if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN) {
		follow_interrupts = 0;
		sigemptyset(&sa.sa_mask);
		handler = sigaction(SIGINT, &sa, NULL) == 0;
	}
	ctx->interrupt = handler ? &follow_interrupts : NULL;
	ctx->interrupt_seen = 0;
	for (;;) {
		r = cli_api_stream(ctx, path, follow_line, f);
		if (r != -EINTR)
			break;
		if (!cancelled) {
			if (follow_interrupts < 2)
				fprintf(ctx->err,
					"holoctl: cancelling task %lld (Ctrl-C again to stop following "
					"it)\n",
					f->task_id);
			char *cancel = xasprintf(IPC_API_PREFIX "/tasks/%lld/cancel", f->task_id);
			char *body = NULL;
			size_t size;
			/* Its answer is not printed, even with --json: the events say how the task
			 * ends. */
			if (cli_api_raw(ctx, "POST", cancel, NULL, &body, &size, NULL) == 0)
				free(body);
			free(cancel);
			cancelled = true;
		}
		/* A second Ctrl-C, also one pressed while the cancel was sent, stops following. */
		if (follow_interrupts >= 2) {
			fprintf(ctx->err,
				"holoctl: stopped following task %lld; it runs on until it stops at "
				"its next safe point (see `holoctl show %lld`)\n",
				f->task_id, f->task_id);
			break;
		}
		ctx->interrupt_seen = 1;
		/* The stream starts over from the task's first event: skip what was shown. */
		f->skip = f->events;
		f->events = 0;
	}
	ctx->interrupt = NULL;
	if (handler)
		sigaction(SIGINT, &old, NULL);
	free(path);
	return r;
}

int cli_follow_task(struct cli_context *ctx, long long id, const char *shown)
{
	struct follow f = {.ctx = ctx, .task_id = id};
	snprintf(f.shown, sizeof(f.shown), "%s", shown ? shown : "");
	int r;

	r = follow_stream(ctx, &f);
	if (r == -EINTR) {
		r = CLI_EXIT_DETACHED;
		goto cleanup;
	}
	if (r == -ECONNRESET) {
		fprintf(ctx->err,
			"holoctl: lost holod while following task %lld; its outcome is unknown "
			"(see `holoctl show %lld` once holod runs again)\n",
			id, id);
		r = CLI_EXIT_TASK_UNKNOWN;
		goto cleanup;
	}
	if (r != 0)
		goto cleanup;
	if (!ctx->json)
		end_line(&f);
	if (!f.final_status) {
		fprintf(ctx->err,
			"holoctl: the event stream of task %lld ended without its final status "
			"(see `holoctl show %lld`)\n",
			id, id);
		r = CLI_EXIT_TASK_UNKNOWN;
		goto cleanup;
	}
	if (!ctx->json)
		fprintf(ctx->out, "task %lld %s after %lld step%s%s%s\n", id, f.final_status, f.steps,
			f.steps == 1 ? "" : "s", f.final_error ? ": " : "",
			f.final_error ? f.final_error : "");
	r = cli_exit_for_task_status(f.final_status);

cleanup:
	free(f.final_status);
	free(f.final_error);
	return r;
}

static int run_run(struct cli_context *ctx, int argc, char **argv)
{
	struct cli_run_args a;
	json_t *answer = NULL, *id;
	int r;

	r = cli_run_parse(ctx, argc, argv, &a);
	if (r != 0 || a.help)
		return r;
	r = cli_api_json(ctx, "POST", IPC_API_PREFIX "/tasks", a.body, &answer);
	if (r != 0)
		goto cleanup;
	id = json_object_get(answer, "id");
	if (!json_is_integer(id) || json_integer_value(id) <= 0) {
		r = cli_error(ctx, "holod accepted the task but its answer has no task \"id\"");
		goto cleanup;
	}
	if (!ctx->json) {
		const char *status = json_string_value(json_object_get(answer, "status"));
		if (a.follow)
			fprintf(ctx->out, "task %" JSON_INTEGER_FORMAT " %s\n", json_integer_value(id),
				status ? status : "created");
		else
			fprintf(ctx->out,
				"task %" JSON_INTEGER_FORMAT
				" %s (see its steps with `holoctl show %" JSON_INTEGER_FORMAT "`)\n",
				json_integer_value(id), status ? status : "created", json_integer_value(id));
		fflush(ctx->out);
	}
	if (a.follow)
		r = cli_follow_task(ctx, (long long)json_integer_value(id),
				    json_string_value(json_object_get(answer, "status")));

cleanup:
	json_decref(answer);
	cli_run_args_finish(&a);
	return r;
}

const struct cli_command cli_cmd_run = {
	.name = "run",
	.args = "[options] (--script FILE | FILE.json | INSTRUCTION)",
	.summary = "start a task from a script of actions or an instruction",
	.help = "A script is a JSON array of actions, or an object {\"actions\": [...], options}\n"
		"with the options of the API (max_steps, max_seconds, settle_ms, dry_run, "
		"coords).\n"
		"One action per tool call, as the model writes them, for example:\n"
		"  [{\"tool_name\": \"click\", \"x\": 640, \"y\": 400},\n"
		"   {\"tool_name\": \"write\", \"content\": \"hello\", \"press_enter\": true},\n"
		"   {\"tool_name\": \"hotkey\", \"keys\": [\"ctrl\", \"s\"]}]\n"
		"The script is checked before it is sent; errors name the action and field.\n"
		"A lone argument that names a file (FILE.json, or a file starting with [ or {)\n"
		"runs that file as a script, as --script FILE does, and says so; a *.json name\n"
		"that is no file, or a file that is no JSON, is refused: an instruction never is\n"
		"a file's name.\n"
		"An instruction needs a model loaded in holod.\n"
		"\n"
		"Options:\n"
		"  --script FILE          the script to run (- reads it from stdin)\n"
		"  -f, --follow           print each step as it happens and exit with the task's\n"
		"                         outcome: 0 succeeded, 3 failed, 4 cancelled, 5 "
		"interrupted,\n"
		"                         6 the stream ended without a final status (holod lost),\n"
		"                         7 stuck (--stuck-stop)\n"
		"  --max-steps N          stop after N steps (1..10000)\n"
		"  --max-seconds N        stop after N seconds (1..86400)\n"
		"  --settle-ms N          wait N ms after each action before the screenshot\n"
		"  --dry-run              journal the steps without injecting anything\n"
		"  --coords pixels|model  how the script's x/y are read (default pixels)\n"
		"  --history MODE         instruction: rolling (the last --window screenshots,\n"
		"                         older ones evicted into a snapshot), persistent (one\n"
		"                         resident session) or window (the last --window\n"
		"                         screenshots re-sent); default: holod's --history\n"
		"  --window K             instruction: screenshots kept in the prompt (1..64)\n"
		"  --max-tiles N          instruction: image tiles per screenshot (1..48)\n"
		"  --temperature T        instruction: sampling temperature, 0 (greedy)..2\n"
		"  --top-p P              instruction: nucleus mass, above 0 up to 1\n"
		"  --seed N               instruction: the sampling's seed (0..4294967295); the\n"
		"                         seed a task ran with is in `holoctl show`: passing it\n"
		"                         again samples the same steps\n"
		"  --thinking on|off      instruction: the model thinks before each step\n"
		"                         (default: holod's --thinking)\n"
		"  --thinking-tokens N    instruction: most tokens of that thinking per step\n"
		"  --stuck-warn N         instruction: after N steps in a row that left the\n"
		"                         screen unchanged or repeated one action, the model\n"
		"                         is told so (0: never; default: holod's, 3)\n"
		"  --stuck-stop N         instruction: after N such steps the task ends with\n"
		"                         status stuck (0: never; default: holod's, 6)\n"
		"  --display NAME         run on this display of holod's (see `holoctl "
		"status`);\n"
		"                         default: the first that is free\n"
		"  --approve MODE         which actions wait for `holoctl approve` or `deny`:\n"
		"                         none, risky (holod's approval rules) or all;\n"
		"                         default: holod's --approve\n"
		"  --takeover MODE        what input of a person on the display does to the\n"
		"                         task: pause (at once; `holoctl resume` hands it\n"
		"                         back), ignore or cancel; default: holod's --takeover\n"
		"  --ask-timeout S        how long a question of the task's (ask_user) waits\n"
		"                         for `holoctl reply` before the task fails (1..86400);\n"
		"                         default: holod's --ask-timeout\n"
		"Options given here override those in the script file. Ctrl-C during --follow\n"
		"cancels the task and follows it to its end; a second Ctrl-C stops following\n"
		"(exit status 130) and leaves the task to stop on its own.\n"
		"With --json: the created task, then (--follow) each event line as holod sends "
		"it.\n",
	.run = run_run,
};
