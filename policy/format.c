/* The holo3 policy format (agent.md 1.1, 1.2): its system prompt, and the registry of formats.
 * The tool list of the system prompt and the JSON Schema of its <output_format> block are
 * generated from the canonical layout, so the prompt, the grammar and the parser cannot drift
 * apart. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

struct strbuf {
	char *s;
	size_t len, cap;
};

static void sb_add(struct strbuf *b, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct strbuf *b, const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	int n = vsnprintf(NULL, 0, format, ap);
	va_end(ap);
	if (n < 0)
		abort();
	if (b->len + (size_t)n + 1 > b->cap) {
		b->cap = MAX(2 * b->cap, b->len + (size_t)n + 1);
		b->s = xrealloc(b->s, b->cap);
	}
	va_start(ap, format);
	vsnprintf(b->s + b->len, (size_t)n + 1, format, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static const char *button_name(int i)
{
	return ipc_button_to_string((enum ipc_button)i);
}

static const char *direction_name(int i)
{
	return ipc_direction_to_string((enum ipc_direction)i);
}

/* "a"<first_suffix>, "b" or "c": ipc's spellings of an enum, value 0 on until NULL. */
static void spellings(struct strbuf *b, const char *(*name)(int), const char *first_suffix)
{
	for (int i = 0; name(i); i++)
		sb_add(b, "%s\"%s\"%s",
		       i == 0	   ? "" :
		       name(i + 1) ? ", " :
				     " or ",
		       name(i), i == 0 ? first_suffix : "");
}

static void arg_type(struct strbuf *b, const struct ipc_tool_arg *a)
{
	switch (a->type) {
	case IPC_ARG_STRING:
		sb_add(b, "string");
		break;
	case IPC_ARG_INT:
		sb_add(b, "integer %d..%d", a->lo, a->hi);
		break;
	case IPC_ARG_BOOL:
		sb_add(b, "boolean, default false");
		break;
	case IPC_ARG_BUTTON:
		spellings(b, button_name, " (default)");
		break;
	case IPC_ARG_DIRECTION:
		spellings(b, direction_name, "");
		break;
	case IPC_ARG_KEYS:
		sb_add(b, "array of 1..%d key names", IPC_MAX_HOTKEY_KEYS);
		break;
	case IPC_ARG_KEY:
		sb_add(b, "key name");
		break;
	case IPC_ARG_GOALS:
		sb_add(b, "array of 1..%d {title, status}", IPC_MAX_PLAN_GOALS);
		break;
	}
	if (a->type == IPC_ARG_INT && !a->required)
		sb_add(b, ", default %d", a->def);
}

void policy_secrets_rule(const struct policy_env *env, char *buf, size_t len)
{
	if (env && env->secret_names && env->secret_names[0])
		snprintf(buf, len,
			 "- Secrets you can type without seeing them: %s. To type one, "
			 "write {{secret:NAME}} in a write action's content (e.g. "
			 "{{secret:%.*s}}); it is typed for you and never shown to you. Never invent "
			 "other passwords, keys or secrets: when one is needed and not given, answer "
			 "that it is missing.\n",
			 env->secret_names, (int)strcspn(env->secret_names, ","), env->secret_names);
	else
		snprintf(buf, len,
			 "- Never invent passwords, keys or other secrets: when one is "
			 "needed and not given, answer that it is missing.\n");
}

static char *holo3_system_text(const struct policy_env *env)
{
	struct strbuf b = {0};
	if (!env || env->screen_width <= 0 || env->screen_height <= 0) {
		errno = EINVAL;
		return NULL;
	}
	sb_add(&b,
	       "You are an agent that operates a Linux desktop (X11) to complete the user's "
	       "task. The screen is %dx%d pixels.",
	       env->screen_width, env->screen_height);
	if (env->date && env->date[0])
		sb_add(&b, " Today is %s.", env->date);
	sb_add(&b,
	       "\n\nEach step you see the screen in an <observation> block, after the result of "
	       "your previous action in a <tool_output> or <error> block. Answer with one step.\n\n"
	       "Rules:\n"
	       "- Take exactly one action per step.\n"
	       "- Keep durable facts (what you found, what is done) in \"note\": it is your memory "
	       "across steps. Use null when there is nothing new to keep.\n"
	       "- \"thought\" is one short line: what you do now and why.\n"
	       "- x and y are integers from 0 to %d relative to the screenshot: (0, 0) is its "
	       "top-left corner, (%d, %d) its bottom-right corner.\n"
	       "- Check on the screen that the task is done before you answer.\n",
	       IPC_MODEL_COORD_MAX, IPC_MODEL_COORD_MAX, IPC_MODEL_COORD_MAX);
	char rule[POLICY_MAX_SECRETS_RULE];
	policy_secrets_rule(env, rule, sizeof(rule));
	sb_add(&b, "%s\nTools:\n", rule);
	const struct ipc_model_tool *tool;
	for (size_t t = 0; (tool = ipc_model_tool(IPC_POLICY_FORMAT_HOLO3, t)); t++) {
		const struct ipc_tool_layout *l = &tool->layout;
		sb_add(&b, "- %s: %s.", tool->name, tool->help);
		for (size_t i = 0; i < l->n_args; i++) {
			sb_add(&b, "%s%s%s (", i ? "," : " Arguments:", " ", l->args[i].name);
			arg_type(&b, &l->args[i]);
			sb_add(&b, "%s)", l->args[i].required ? "" : ", optional");
		}
		sb_add(&b, "\n");
	}
	sb_add(&b, "\nKey names: a single character, f1..f24, or one of");
	for (size_t i = 0; policy_key_name(i); i++)
		sb_add(&b, "%s %s", i ? "," : "", policy_key_name(i));
	sb_add(&b, ".");
	/* The step's JSON Schema, the copy a schema-constrained server gets too, in the block H's
	 * Agent loop appends to the prompt (docs/policy.md, "The published contracts"). */
	char *schema = policy_step_json_schema();
	if (!schema) {
		free(b.s);
		errno = ENOMEM;
		return NULL;
	}
	sb_add(&b, "%s%s%s", POLICY_OUTPUT_FORMAT_OPEN, schema, POLICY_OUTPUT_FORMAT_CLOSE);
	free(schema);
	return b.s;
}

/* holo3: the executor's text, except that the tools with a point say it in the model's
 * coordinates (the ones the step wrote), not in the root pixels the executor names. */
static int holo3_model_result(const struct ipc_action *a, bool failed, const char *text, const char *warning,
			      char **ret)
{
	(void)warning; /* the executor's text says it */
	if (!a || !text || !ret)
		return -EINVAL;
	if (failed) {
		*ret = xstrdup(text);
		return 0;
	}
	switch (a->tool) {
	case IPC_TOOL_CLICK:
	case IPC_TOOL_DOUBLE_CLICK:
	case IPC_TOOL_TRIPLE_CLICK:
		*ret = xasprintf("clicked %s x%d at (%d,%d)", ipc_button_to_string(a->button),
				 a->tool == IPC_TOOL_CLICK	  ? 1 :
				 a->tool == IPC_TOOL_DOUBLE_CLICK ? 2 :
								    3,
				 a->x, a->y);
		break;
	case IPC_TOOL_MOVE:
		*ret = xasprintf("moved to (%d,%d)", a->x, a->y);
		break;
	case IPC_TOOL_DRAG:
		*ret = xasprintf("dragged (%d,%d) to (%d,%d)", a->x, a->y, a->x2, a->y2);
		break;
	case IPC_TOOL_DRAG_TO:
		*ret = xasprintf("dragged to (%d,%d)", a->x, a->y);
		break;
	case IPC_TOOL_SCROLL:
		*ret = xasprintf("scrolled %d notches at (%d,%d)", a->scroll_size, a->x, a->y);
		break;
	default:
		*ret = xstrdup(text);
		break;
	}
	return 0;
}

/* H's Agent loop publishes no localization request (its hai-cookbook's are Holo1/Holo2's):
 * holod's sentence. */
static char *holo3_ground_text(const char *target)
{
	return xasprintf("Locate this on the screen: %s. Answer with the point to act on as "
			 "{\"x\":X,\"y\":Y}, each from 0 to %d across the screenshot.",
			 target, IPC_MODEL_COORD_MAX);
}

const struct policy_format policy_format_holo3 = {
	.name = "holo3",
	/* H Company's agent loop and the holo-nano harness both sample at 0.8, top_p 0.95. */
	.sampling = {.temperature = 0.8, .top_p = 0.95},
	.grammar_create = policy_grammar_create_holo3,
	.step_parse = policy_step_parse,
	.step_to_json = policy_step_to_json,
	.system_text = holo3_system_text,
	.tool_name = ipc_tool_to_string,
	.model_result = holo3_model_result,
	.ground_text = holo3_ground_text,
	/* H's Agent loop (docs/policy.md's table, items 3, 4, 6, 7): the image between
	 * "<observation>\n" and "\n</observation>", the previous tool's result in a user turn of
	 * its own before the observation, newline-padded in <tool_output tool="NAME">, an evicted
	 * observation keeping its wrapper. A failed action's result says <error tool="NAME">
	 * (holod's, which H does not forbid); the result is not cut (H states no limit). */
	.turns =
		{
			.observation_open = "<observation>\n",
			.observation_close = "\n</observation>",
			.evicted = POLICY_EVICTED_TEXT,
			.result_own_turn = true,
			.result_newlines = true,
		},
};

static const struct policy_format *const formats[] = {&policy_format_holo3, &policy_format_holo_nano};

const struct policy_format *policy_format_find(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(formats); i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}
