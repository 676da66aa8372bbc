/* holoctl reply, approve, deny: answer what a running task waits for from its user (POST
 * /v1/tasks/{id}/reply, .../approve, .../deny; docs/api.md "The user in the loop"), and the
 * lines that show such a wait (run --follow, show). */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static const struct option answer_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{0},
};

void cli_print_waiting(struct cli_context *ctx, long long id, json_t *w)
{
	const char *kind = json_string_value(json_object_get(w, "for"));
	json_int_t step = json_integer_value(json_object_get(w, "step"));
	json_int_t timeout = json_integer_value(json_object_get(w, "timeout_s"));

	if (kind && strcmp(kind, "reply") == 0) {
		const char *q = json_string_value(json_object_get(w, "question"));
		fprintf(ctx->out, "task %lld step %" JSON_INTEGER_FORMAT " asks: %s\n", id, step, q ? q : "");
		fprintf(ctx->out,
			"  answer within %" JSON_INTEGER_FORMAT " s: holoctl reply %lld "
			"\"TEXT\"\n",
			timeout, id);
		return;
	}
	const char *reason = json_string_value(json_object_get(w, "reason"));
	const char *thought = json_string_value(json_object_get(w, "thought"));
	json_t *target = json_object_get(w, "target");
	char *action = json_dumps(json_object_get(w, "action"), JSON_COMPACT | JSON_PRESERVE_ORDER);
	fprintf(ctx->out, "task %lld step %" JSON_INTEGER_FORMAT " waits for approval: %s\n", id, step,
		action ? action : "?");
	free(action);
	if (reason)
		fprintf(ctx->out, "  held because: %s\n", reason);
	if (json_is_object(target)) {
		const char *title = json_string_value(json_object_get(target, "title"));
		const char *cls = json_string_value(json_object_get(target, "class"));
		fprintf(ctx->out, "  window: %s%s%s%s\n", title ? title : "", cls ? " (" : "", cls ? cls : "",
			cls ? ")" : "");
	}
	if (thought)
		fprintf(ctx->out, "  thought: %s\n", thought);
	fprintf(ctx->out,
		"  within %" JSON_INTEGER_FORMAT " s: holoctl approve %lld, or holoctl "
		"deny %lld [REASON]\n",
		timeout, id, id);
}

/* argv: NAME ID [TEXT]; text_args: 0 (approve), 1 required (reply), 1 optional (deny). */
static int answer_run(struct cli_context *ctx, const struct cli_command *cmd, int argc, char **argv,
		      const char *route, const char *member, bool required)
{
	json_t *answer = NULL;
	char *path, *body = NULL;
	long id;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, answer_options, NULL)) != -1) {
		r = cli_common_option(ctx, cmd, c, argv);
		if (r >= 0)
			return r;
	}
	int n = argc - optind, max = member ? 2 : 1, min = required ? 2 : 1;
	if (n < min || n > max)
		return cli_usage_error(ctx, cmd,
				       !member	? "needs exactly one task ID" :
				       required ? "needs a task ID and the reply's text" :
						  "needs a task ID and, optionally, a reason");
	r = cli_parse_task_id(ctx, cmd, argv[optind], &id);
	if (r != 0)
		return r;
	if (n == 2) {
		const char *text = argv[optind + 1];
		if (strlen(text) > IPC_MAX_REPLY_BYTES)
			return cli_usage_error(ctx, cmd, "the text is longer than the limit of %d bytes",
					       IPC_MAX_REPLY_BYTES);
		if (required && !text[0])
			return cli_usage_error(ctx, cmd, "the reply is empty");
		json_t *o = json_pack("{s:s}", member, text);
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!body)
			return cli_usage_error(ctx, cmd, "the text is not valid UTF-8");
	}
	path = xasprintf(IPC_API_PREFIX "/tasks/%ld/%s", id, route);
	r = cli_api_json(ctx, "POST", path, body, &answer);
	free(path);
	free(body);
	if (r == 0 && !ctx->json)
		fprintf(ctx->out, "task %ld: %s\n", id,
			strcmp(route, "reply") == 0   ? "reply sent" :
			strcmp(route, "approve") == 0 ? "approved: the action runs" :
							"denied: the action does not run");
	json_decref(answer);
	return r;
}

static int reply_run(struct cli_context *ctx, int argc, char **argv)
{
	return answer_run(ctx, &cli_cmd_reply, argc, argv, "reply", "text", true);
}

static int approve_run(struct cli_context *ctx, int argc, char **argv)
{
	return answer_run(ctx, &cli_cmd_approve, argc, argv, "approve", NULL, false);
}

static int deny_run(struct cli_context *ctx, int argc, char **argv)
{
	return answer_run(ctx, &cli_cmd_deny, argc, argv, "deny", "reason", false);
}

const struct cli_command cli_cmd_reply = {
	.name = "reply",
	.args = "ID TEXT",
	.summary = "answer the question a task's model asked (ask_user)",
	.help = "The task waits (status waiting_for_user) until the reply, which the model reads "
		"as the\n"
		"output of its ask_user step, or until holod's --ask-timeout, when the task "
		"fails.\n"
		"Replying to a task that asked nothing is an error.\n",
	.run = reply_run,
};

const struct cli_command cli_cmd_approve = {
	.name = "approve",
	.args = "ID",
	.summary = "let a task's held action run (--approve)",
	.help = "A task run with --approve risky or all holds the actions its rules name (status\n"
		"waiting_for_approval) until approve or deny, or holod's --approve-timeout, "
		"when the\n"
		"step fails without acting. Approving a task that holds nothing is an error.\n",
	.run = approve_run,
};

const struct cli_command cli_cmd_deny = {
	.name = "deny",
	.args = "ID [REASON]",
	.summary = "refuse a task's held action (--approve)",
	.help = "The held action does not run. An instruction task's model reads the denial, with "
		"the\n"
		"reason, as the step's error and goes on; a script's step fails, and the task "
		"with it.\n",
	.run = deny_run,
};
