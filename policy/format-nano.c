/* The holo-nano format's steps (docs/policy.md, "The published contracts and holod"): the tool
 * table of the published harness (NVIDIA's Nemotron cookbook port of holo-nano, its pydantic
 * `Step` union) mapped onto holod's actions, its grammar, and its step parser and serializer.
 *
 * The model writes the published tool names (`click_desktop`, ...) with the published
 * arguments, ranges and defaults; a step becomes ipc's struct ipc_action (the one action
 * vocabulary: the executor runs it) by renaming the tool and writing out the published defaults
 * where ipc's differ (scroll_size 10). Key names are holod's closed list (item 22: a free string
 * could spell a key x11 lacks). The canonical layout is what pydantic's model_dump_json writes:
 * compact, fields in class order, every default written, note null kept.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

/* The published union's tools, its order (UpdatePlan .. Answer) and each class's field order
 * are holo-nano's view of ipc's tool table (ipc_model_tool(IPC_POLICY_FORMAT_HOLO_NANO, i)). */
static const struct ipc_model_tool *nano_tool(size_t i)
{
	return ipc_model_tool(IPC_POLICY_FORMAT_HOLO_NANO, i);
}

static const struct ipc_model_tool *by_name(const char *name)
{
	for (size_t i = 0; name && nano_tool(i); i++)
		if (strcmp(nano_tool(i)->name, name) == 0)
			return nano_tool(i);
	return NULL;
}

static const struct ipc_model_tool *by_tool(enum ipc_tool tool)
{
	for (size_t i = 0; nano_tool(i); i++)
		if (nano_tool(i)->tool == tool)
			return nano_tool(i);
	return NULL;
}

struct policy_grammar *policy_grammar_create_holo_nano(void)
{
	return policy_grammar_build(IPC_POLICY_FORMAT_HOLO_NANO);
}

static int check_args(const struct ipc_model_tool *t, const json_t *tc, char *errbuf, size_t errlen)
{
	int r;
	for (size_t i = 0; i < t->layout.n_args; i++) {
		const struct ipc_tool_arg *a = &t->layout.args[i];
		json_t *v = json_object_get(tc, a->name);
		char field[64];
		snprintf(field, sizeof(field), "tool_call.%s", a->name);
		if (!v) {
			if (a->required)
				return policy_fail(errbuf, errlen, -EINVAL, "%s: missing (required for '%s')",
						   field, t->name);
			continue;
		}
		if (a->type == IPC_ARG_STRING &&
		    (r = policy_check_string(v, field, a->max, errbuf, errlen)) < 0)
			return r;
		if (a->type == IPC_ARG_INT && !json_is_integer(v))
			return policy_fail(errbuf, errlen, -EINVAL, "%s: expected an integer", field);
		if (a->type == IPC_ARG_INT && (json_integer_value(v) < a->lo || json_integer_value(v) > a->hi))
			return policy_fail(errbuf, errlen, -EINVAL, "%s: %lld is out of range %d..%d", field,
					   (long long)json_integer_value(v), a->lo, a->hi);
		if (a->type == IPC_ARG_GOALS && json_is_array(v)) {
			size_t k;
			json_t *g;
			json_array_foreach(v, k, g)
			{
				json_t *title = json_is_object(g) ? json_object_get(g, "title") : NULL;
				char gf[96];
				snprintf(gf, sizeof(gf), "tool_call.goals[%zu].title", k);
				if (title && (r = policy_check_string(title, gf, IPC_MAX_GOAL_TITLE_BYTES,
								      errbuf, errlen)) < 0)
					return r;
			}
		}
	}
	return 0;
}

static bool key_list_ok(char *const *keys, size_t n, const char *field, char *errbuf, size_t errlen)
{
	for (size_t k = 0; k < n; k++)
		if (!policy_key_name_ok(keys[k])) {
			policy_fail(errbuf, errlen, -EINVAL,
				    "tool_call.%s[%zu]: '%s' is not a key name of "
				    "the schema",
				    field, k, keys[k]);
			return false;
		}
	return true;
}

int policy_nano_step_parse(const char *text, size_t len, struct policy_step *ret, char *errbuf, size_t errlen)
{
	struct policy_step s = {0};
	json_t *root = NULL, *call_obj = NULL;
	char *call = NULL;
	int r;

	if ((r = policy_step_load(text, len, &root, errbuf, errlen)) < 0)
		return r;
	/* The published schema: note optional (default null), thought and tool_call required. */
	json_t *note = json_object_get(root, "note");
	if (note && !json_is_null(note)) {
		if ((r = policy_check_string(note, "note", POLICY_MAX_NOTE_BYTES, errbuf, errlen)) < 0)
			goto out;
		s.note = xstrdup(json_string_value(note));
	}
	json_t *thought = json_object_get(root, "thought");
	if (!thought) {
		r = policy_fail(errbuf, errlen, -EINVAL, "thought: missing");
		goto out;
	}
	if ((r = policy_check_string(thought, "thought", POLICY_MAX_THOUGHT_BYTES, errbuf, errlen)) < 0)
		goto out;
	s.thought = xstrdup(json_string_value(thought));

	json_t *tc = json_object_get(root, "tool_call");
	if (!tc || !json_is_object(tc)) {
		r = policy_fail(errbuf, errlen, -EINVAL, "tool_call: %s",
				tc ? "expected an object" : "missing");
		goto out;
	}
	json_t *tn = json_object_get(tc, "tool_name");
	if (!tn || !json_is_string(tn)) {
		r = policy_fail(errbuf, errlen, -EINVAL, "tool_call.tool_name: %s",
				tn ? "expected a string" : "missing");
		goto out;
	}
	const struct ipc_model_tool *t = by_name(json_string_value(tn));
	if (!t) {
		char names[512] = "";
		for (size_t i = 0; nano_tool(i); i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
				 nano_tool(i)->name);
		r = policy_fail(errbuf, errlen, -EINVAL, "tool_call.tool_name: unknown tool '%s' (one of %s)",
				json_string_value(tn), names);
		goto out;
	}
	if ((r = check_args(t, tc, errbuf, errlen)) < 0)
		goto out;
	/* ipc's action: the tool renamed, the published defaults written where ipc's differ. */
	call_obj = json_deep_copy(tc);
	if (!call_obj ||
	    json_object_set_new(call_obj, "tool_name", json_string(ipc_tool_to_string(t->tool))) < 0 ||
	    (t->tool == IPC_TOOL_SCROLL && !json_object_get(call_obj, "scroll_size") &&
	     json_object_set_new(call_obj, "scroll_size", json_integer(POLICY_NANO_DEFAULT_SCROLL_SIZE)) < 0)) {
		r = -ENOMEM;
		goto out;
	}
	call = json_dumps(call_obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!call) {
		r = -ENOMEM;
		goto out;
	}
	char ierr[256] = "";
	r = ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &s.action, ierr, sizeof(ierr));
	if (r < 0) {
		policy_fail(errbuf, errlen, r, "tool_call.%s", ierr);
		goto out;
	}
	if (!key_list_ok(s.action.keys, s.action.n_keys, "keys", errbuf, errlen) ||
	    !key_list_ok(s.action.hold_keys, s.action.n_hold_keys, "hold_keys", errbuf, errlen) ||
	    !key_list_ok(s.action.tap_keys, s.action.n_tap_keys, "tap_keys", errbuf, errlen)) {
		r = -EINVAL;
		goto out;
	}
	if (s.action.key && !policy_key_name_ok(s.action.key)) {
		r = policy_fail(errbuf, errlen, -EINVAL,
				"tool_call.key: '%s' is not a key name of the schema", s.action.key);
		goto out;
	}
	*ret = s;
	memset(&s, 0, sizeof(s));
	r = 0;
out:
	policy_step_finish(&s);
	free(call);
	json_decref(call_obj);
	json_decref(root);
	return r;
}

static json_t *key_array(char *const *keys, size_t n, size_t max)
{
	if (n == 0 || n > max)
		return NULL;
	json_t *arr = json_array();
	for (size_t k = 0; arr && k < n; k++)
		if (json_array_append_new(arr, json_string(keys[k])) < 0) {
			json_decref(arr);
			return NULL;
		}
	return arr;
}

static json_t *arg_value(const struct ipc_tool_arg *arg, const struct ipc_action *a)
{
	const char *name = arg->name;
	switch (arg->type) {
	case IPC_ARG_STRING:
		return json_string(strcmp(name, "element") == 0 ? (a->element ? a->element : "") :
								  (a->content ? a->content : ""));
	case IPC_ARG_INT:
		return json_integer(strcmp(name, "x") == 0	     ? a->x :
				    strcmp(name, "y") == 0	     ? a->y :
				    strcmp(name, "scroll_size") == 0 ? a->scroll_size :
								       a->repeat_count);
	case IPC_ARG_BOOL:
		return json_boolean(strcmp(name, "press_enter") == 0 ? a->press_enter : a->overwrite);
	case IPC_ARG_BUTTON:
		return ipc_button_to_string(a->button) ? json_string(ipc_button_to_string(a->button)) : NULL;
	case IPC_ARG_DIRECTION:
		return ipc_direction_to_string(a->direction) ?
			       json_string(ipc_direction_to_string(a->direction)) :
			       NULL;
	case IPC_ARG_KEYS:
		return strcmp(name, "hold_keys") == 0 ?
			       key_array(a->hold_keys, a->n_hold_keys, IPC_MAX_HOLD_KEYS) :
		       strcmp(name, "tap_keys") == 0 ?
			       key_array(a->tap_keys, a->n_tap_keys, IPC_MAX_TAP_KEYS) :
			       key_array(a->keys, a->n_keys, IPC_MAX_HOTKEY_KEYS);
	case IPC_ARG_KEY:
		return a->key ? json_string(a->key) : NULL;
	case IPC_ARG_GOALS: {
		if (a->n_goals == 0 || a->n_goals > IPC_MAX_PLAN_GOALS)
			return NULL;
		json_t *arr = json_array();
		for (size_t k = 0; arr && k < a->n_goals; k++) {
			const char *st = ipc_goal_status_to_string(a->goals[k].status);
			json_t *g = st && a->goals[k].title ? json_pack("{s:s, s:s}", "title",
									a->goals[k].title, "status", st) :
							      NULL;
			if (!g || json_array_append_new(arr, g) < 0) {
				json_decref(arr);
				return NULL;
			}
		}
		return arr;
	}
	}
	return NULL;
}

char *policy_nano_step_to_json(const struct policy_step *step)
{
	const struct ipc_model_tool *t;
	json_t *root = NULL, *tc = NULL;
	char *out = NULL;
	int r = 0;

	if (!step || !step->thought || !(t = by_tool(step->action.tool))) {
		errno = EINVAL;
		return NULL;
	}
	root = json_object();
	tc = json_object();
	if (!root || !tc)
		goto oom;
	r |= json_object_set_new(root, "note", step->note ? json_string(step->note) : json_null());
	r |= json_object_set_new(root, "thought", json_string(step->thought));
	r |= json_object_set(root, "tool_call", tc);
	r |= json_object_set_new(tc, "tool_name", json_string(t->name));
	for (size_t i = 0; i < t->layout.n_args; i++) {
		json_t *v = arg_value(&t->layout.args[i], &step->action);
		if (!v) {
			errno = EINVAL;
			goto fail;
		}
		r |= json_object_set_new(tc, t->layout.args[i].name, v);
	}
	if (r != 0)
		goto oom;
	out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!out)
		goto oom;
	json_decref(tc);
	json_decref(root);
	return out;
oom:
	errno = ENOMEM;
fail:
	json_decref(tc);
	json_decref(root);
	return NULL;
}

/* ---- system text ----------------------------------------------------------------------------- */

/* Appends n bytes to a growing buffer. */
static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		*cap = MAX(2 * *cap, *len + n + 1);
		*buf = xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Where the sentence holding byte `at` of line-structured text starts (after the ". " that
 * ends the previous sentence on its line, at that space) and ends (its final '.', or the end
 * of the line). */
static void sentence_around(const char *t, size_t len, size_t at, size_t *ret_start, size_t *ret_end)
{
	size_t s = at;
	while (s > 0 && t[s - 1] != '\n' && !(s >= 2 && t[s - 2] == '.' && t[s - 1] == ' '))
		s--;
	if (s >= 2 && t[s - 2] == '.' && t[s - 1] == ' ')
		s--; /* the space before the sentence goes with it */
	size_t e = at;
	while (e < len && t[e] != '\n' &&
	       !(t[e] == '.' && (e + 1 == len || t[e + 1] == '\n' || t[e + 1] == ' ')))
		e++;
	if (e < len && t[e] == '.')
		e++;
	*ret_start = s;
	*ret_end = e;
}

int policy_nano_system_text(const char *tmpl, size_t tlen, const char *schema, size_t slen,
			    const struct policy_nano_env *env, char **ret, char *errbuf, size_t errlen)
{
	char *buf = NULL, num[24];
	size_t len = 0, cap = 0, skip_to = 0;

	if (!tmpl || !schema || !env || !env->date || !env->os_name || env->max_steps == 0 ||
	    env->max_time_s == 0)
		return policy_fail(errbuf, errlen, -EINVAL,
				   "system text: a template, a schema, the date, "
				   "the OS name and both budgets are needed");
	if (tlen > POLICY_NANO_MAX_TEMPLATE_BYTES || slen > POLICY_NANO_MAX_SCHEMA_BYTES)
		return policy_fail(errbuf, errlen, -E2BIG,
				   "system text: the template (%zu bytes) or the "
				   "schema (%zu bytes) exceeds its limit (%d, %d)",
				   tlen, slen, POLICY_NANO_MAX_TEMPLATE_BYTES, POLICY_NANO_MAX_SCHEMA_BYTES);
	put(&buf, &len, &cap, "", 0);
	for (size_t i = 0; i < tlen;) {
		const char *c = tmpl + i;
		if ((*c == '{' || *c == '}') && i + 1 < tlen && c[1] == *c) {
			if (i >= skip_to)
				put(&buf, &len, &cap, c, 1); /* "{{" and "}}" are braces, as in str.format */
			i += 2;
			continue;
		}
		if (*c == '}') {
			free(buf);
			return policy_fail(errbuf, errlen, -EINVAL,
					   "system template: a single '}' at byte %zu", i);
		}
		if (*c != '{') {
			if (i >= skip_to)
				put(&buf, &len, &cap, c, 1);
			i++;
			continue;
		}
		const char *close = memchr(c, '}', tlen - i);
		size_t n = close ? (size_t)(close - c) - 1 : 0;
		const char *field = c + 1, *value = NULL;
		if (close && n == 10 && memcmp(field, "start_time", n) == 0) {
			value = env->date;
		} else if (close && n == 9 && memcmp(field, "max_steps", n) == 0) {
			snprintf(num, sizeof(num), "%u", env->max_steps);
			value = num;
		} else if (close && n == 10 && memcmp(field, "max_time_s", n) == 0) {
			snprintf(num, sizeof(num), "%u", env->max_time_s);
			value = num;
		} else if (close && n == 7 && memcmp(field, "os_name", n) == 0) {
			value = env->os_name;
		} else if (close && n == 8 && memcmp(field, "password", n) == 0) {
			if (env->password) {
				value = env->password;
			} else {
				/* No password configured: the sentence naming it is left out.
				 * Its bytes before the field were copied as they are (a field or
				 * brace there is refused). */
				size_t s, e;
				sentence_around(tmpl, tlen, i, &s, &e);
				if (memchr(tmpl + s, '{', i - s) || memchr(tmpl + s, '}', i - s) ||
				    i - s > len) {
					free(buf);
					return policy_fail(errbuf, errlen, -EINVAL,
							   "system template: the "
							   "sentence of {password} holds another field");
				}
				len -= i - s;
				buf[len] = '\0';
				skip_to = e;
				i = (size_t)(close - tmpl) + 1;
				continue;
			}
		} else {
			free(buf);
			return policy_fail(errbuf, errlen, -EINVAL,
					   "system template: unknown field '%.*s' at "
					   "byte %zu (known: start_time, max_steps, max_time_s, os_name, "
					   "password)",
					   close ? (int)MIN(n, 64) : 16, field, i);
		}
		if (i >= skip_to)
			put(&buf, &len, &cap, value, strlen(value));
		i = (size_t)(close - tmpl) + 1;
	}
	static const char open[] = "\n<output_format>\n```json\n", end[] = "\n```\n</output_format>\n";
	put(&buf, &len, &cap, open, sizeof(open) - 1);
	put(&buf, &len, &cap, schema, slen);
	put(&buf, &len, &cap, end, sizeof(end) - 1);
	*ret = buf;
	return 0;
}

/* ---- holod's own text, the schema and the format ------------------------------------------------ */

/* The Step schema generated from the tool table's holo-nano view (the grammar's table, so the two copies
 * agree): note optional (string or null), thought and tool_call required, tool_call one of the thirteen with
 * its tool_name const; json.dumps' default separators (", ", ": "). malloc'd; NULL + errno. */
char *policy_nano_json_schema(void)
{
	json_t *tools = json_array();
	char *text = NULL;

	for (size_t t = 0; nano_tool(t); t++) {
		const struct ipc_tool_layout *l = &nano_tool(t)->layout;
		json_t *props = json_pack("{s:{s:s, s:s}}", "tool_name", "type", "string", "const",
					  nano_tool(t)->name);
		json_t *req = json_pack("[s]", "tool_name");
		for (size_t i = 0; i < l->n_args; i++) {
			json_t *a = policy_arg_json_schema(&l->args[i]);
			if (a && l->args[i].type == IPC_ARG_INT && !l->args[i].required)
				json_object_set_new(a, "default", json_integer(l->args[i].def));
			else if (a && l->args[i].type == IPC_ARG_BOOL)
				json_object_set_new(a, "default", json_false());
			else if (a && l->args[i].type == IPC_ARG_BUTTON)
				json_object_set_new(a, "default", json_string("left"));
			json_object_set_new(props, l->args[i].name, a);
			if (l->args[i].required)
				json_array_append_new(req, json_string(l->args[i].name));
		}
		json_array_append_new(tools, json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties",
						       props, "required", req, "additionalProperties", 0));
	}
	json_t *schema =
		json_pack("{s:{s:o}, s:s, s:{s:{s:[{s:s}, {s:s}], s:n}, s:{s:s}, s:{s:o}}, s:[s,s], s:b}",
			  "$defs", "key", policy_key_enum_schema(), "type", "object", "properties", "note",
			  "anyOf", "type", "string", "type", "null", "default", "thought", "type", "string",
			  "tool_call", "anyOf", tools, "required", "thought", "tool_call",
			  "additionalProperties", 0);
	if (schema)
		text = json_dumps(schema, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(schema);
	if (!text)
		errno = ENOMEM;
	return text;
}

/* holod's own holo-nano system text (docs/policy.md): the contract of the published harness
 * (its tools, the step, the output format with the JSON Schema in an <output_format> block)
 * said in holod's words, for users without the published copy. */
static char *nano_own_text(const struct policy_env *env)
{
	char *buf = NULL, line[1024];
	size_t len = 0, cap = 0;

	snprintf(line, sizeof(line),
		 "You are a computer-use agent working on a local Linux desktop "
		 "to complete the user's task.");
	put(&buf, &len, &cap, line, strlen(line));
	if (env->date && env->date[0]) {
		snprintf(line, sizeof(line), " Today is %s.", env->date);
		put(&buf, &len, &cap, line, strlen(line));
	}
	if (env->max_steps && env->max_time_s) {
		snprintf(line, sizeof(line), " You have at most %u steps or %u seconds.", env->max_steps,
			 env->max_time_s);
		put(&buf, &len, &cap, line, strlen(line));
	}
	snprintf(line, sizeof(line),
		 "\n\nEach step you see the screen in an <observation> block. The output of the "
		 "tool you called last comes before it, in a <tool_output> block (an <error> block "
		 "when the tool failed). Reply with exactly one step: a JSON object with \"note\" "
		 "(facts to keep across steps, or null), \"thought\" (one short line: what you do "
		 "now and why) and \"tool_call\" (one tool with its arguments).\n\nRules:\n"
		 "- x and y are integers from 0 to %d relative to the screenshot: (0, 0) is its "
		 "top-left corner, (%d, %d) its bottom-right corner.\n",
		 IPC_MODEL_COORD_MAX, IPC_MODEL_COORD_MAX, IPC_MODEL_COORD_MAX);
	put(&buf, &len, &cap, line, strlen(line));
	static const char rules[] = "- Keep a plan with update_plan for tasks of several parts.\n"
				    "- Check on the screen that the task is done before you answer.\n";
	put(&buf, &len, &cap, rules, sizeof(rules) - 1);
	char rule[POLICY_MAX_SECRETS_RULE];
	policy_secrets_rule(env, rule, sizeof(rule));
	put(&buf, &len, &cap, rule, strlen(rule));
	put(&buf, &len, &cap, "\nTools:\n", 8);
	for (size_t t = 0; nano_tool(t); t++) {
		const struct ipc_model_tool *tool = nano_tool(t);
		const struct ipc_tool_layout *l = &tool->layout;
		put(&buf, &len, &cap, "- ", 2);
		put(&buf, &len, &cap, tool->name, strlen(tool->name));
		put(&buf, &len, &cap, "(", 1);
		for (size_t i = 0; i < l->n_args; i++) {
			const struct ipc_tool_arg *a = &l->args[i];
			char def[24] = "";
			if (!a->required)
				snprintf(def, sizeof(def),
					 a->type == IPC_ARG_BOOL   ? "=false" :
					 a->type == IPC_ARG_BUTTON ? "=\"left\"" :
								     "=%d",
					 a->def);
			snprintf(line, sizeof(line), "%s%s%s", i ? ", " : "", a->name, def);
			put(&buf, &len, &cap, line, strlen(line));
		}
		put(&buf, &len, &cap, "): ", 3);
		put(&buf, &len, &cap, tool->help, strlen(tool->help));
		put(&buf, &len, &cap, ".\n", 2);
	}
	static const char keys[] = "\nKey names: a single character, f1..f24, or one of";
	put(&buf, &len, &cap, keys, sizeof(keys) - 1);
	for (size_t i = 0; policy_key_name(i); i++) {
		snprintf(line, sizeof(line), "%s %s", i ? "," : "", policy_key_name(i));
		put(&buf, &len, &cap, line, strlen(line));
	}
	static const char tail[] = ".\n\nOutput format: JSON, one object that follows this schema.\n";
	put(&buf, &len, &cap, tail, sizeof(tail) - 1);
	char *schema = policy_nano_json_schema();
	if (!schema) {
		free(buf);
		return NULL;
	}
	static const char open[] = "\n<output_format>\n```json\n", end[] = "\n```\n</output_format>\n";
	put(&buf, &len, &cap, open, sizeof(open) - 1);
	put(&buf, &len, &cap, schema, strlen(schema));
	put(&buf, &len, &cap, end, sizeof(end) - 1);
	free(schema);
	return buf;
}

/* The published text when the daemon read a verified local copy (env->published), else
 * holod's own. */
static char *nano_system_text(const struct policy_env *env)
{
	if (!env) {
		errno = EINVAL;
		return NULL;
	}
	if (!env->published)
		return nano_own_text(env);
	const struct policy_published *p = env->published;
	struct policy_nano_env ne = {.date = env->date ? env->date : "",
				     .max_steps = env->max_steps ? env->max_steps : 50,
				     .max_time_s = env->max_time_s ? env->max_time_s : 1800,
				     .os_name = "Linux"};
	char *text = NULL, err[256];
	int r = policy_nano_system_text(p->nano_template, p->nano_template_len, p->nano_schema,
					p->nano_schema_len, &ne, &text, err, sizeof(err));
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	return text;
}

static const char *nano_tool_name(enum ipc_tool tool)
{
	const struct ipc_model_tool *t = by_tool(tool);
	return t ? t->name : NULL;
}

/* holo-nano: what the harness writes. A desktop tool's output is pyautogui's, empty on a plain
 * success (here the executor's warning, if any), "error: ..." on a failure (the harness wraps
 * output starting so in <error>); nothing at all after update_plan or answer. ask_user's result
 * is the user's reply, said as it is. */
static int nano_model_result(const struct ipc_action *a, bool failed, const char *text, const char *warning,
			     char **ret)
{
	if (!a || !text || !ret)
		return -EINVAL;
	if (a->tool == IPC_TOOL_UPDATE_PLAN || a->tool == IPC_TOOL_ANSWER)
		*ret = NULL;
	else if (failed)
		*ret = strncmp(text, "error:", 6) == 0 ? xstrdup(text) : xasprintf("error: %s", text);
	else if (a->tool == IPC_TOOL_ASK_USER)
		*ret = xstrdup(text);
	else
		*ret = xstrdup(warning ? warning : "");
	return 0;
}

/* The harness has no localization request of its own: it locates through a step's `element`
 * (its system text's "Element Localization") and its x, y ("integers in [0, 1000], normalized
 * against the screenshot", origin top-left). A grounding asks for that point in those words,
 * the target as the element, after the format's task prefix "Task: " (docs/policy.md). */
static char *nano_ground_text(const char *target)
{
	return xasprintf("Locate this element on the screen: %s. Answer with the point to act on "
			 "as {\"x\":X,\"y\":Y}, where x and y are integers in [0, %d], normalized "
			 "against the screenshot; the origin is its top-left corner.",
			 target, IPC_MODEL_COORD_MAX);
}

const struct policy_format policy_format_holo_nano = {
	.name = "holo-nano",
	/* the published harness: temperature 0.8, top_p 0.95 */
	.sampling = {.temperature = 0.8, .top_p = 0.95},
	.grammar_create = policy_grammar_create_holo_nano,
	.step_parse = policy_nano_step_parse,
	.step_to_json = policy_nano_step_to_json,
	.system_text = nano_system_text,
	.tool_name = nano_tool_name,
	.model_result = nano_model_result,
	.ground_text = nano_ground_text,
	.turns =
		{
			.observation_open = "<observation>\n",
			.observation_close = "\n</observation>",
			.evicted = "[Image omitted by context cleaning]",
			.result_own_turn = true,
			.result_newlines = true,
			.result_max_chars = 2000,
		},
};

/* ---- the published copy --------------------------------------------------------------------- */

/* Reads dir/name whole (at most max bytes) and checks its SHA-256. */
static int read_verified(const char *dir, const char *name, size_t max, const char *sha, char **ret,
			 size_t *ret_len, char *errbuf, size_t errlen)
{
	char *path = xasprintf("%s/%s", dir, name), got[65];
	FILE *f = fopen(path, "rb");
	int r;

	if (!f) {
		r = policy_fail(errbuf, errlen, -errno, "%s: %s", path, strerror(errno));
		free(path);
		return r;
	}
	char *buf = xmalloc(max + 1);
	size_t n = fread(buf, 1, max + 1, f);
	bool bad = ferror(f);
	fclose(f);
	if (bad || n > max) {
		r = policy_fail(errbuf, errlen, bad ? -EIO : -E2BIG,
				bad ? "%s: read error" : "%s: over %zu bytes", path, max);
		goto out;
	}
	buf[n] = '\0';
	ipc_sha256_hex(buf, n, got);
	if (strcmp(got, sha) != 0) {
		r = policy_fail(errbuf, errlen, -EBADMSG, "%s: SHA-256 %s, not the published %s", path, got,
				sha);
		goto out;
	}
	*ret = buf;
	*ret_len = n;
	buf = NULL;
	r = 0;
out:
	free(buf);
	free(path);
	return r;
}

int policy_published_load(const char *dir, struct policy_published *ret, char *errbuf, size_t errlen)
{
	char *tmpl = NULL, *schema = NULL;
	size_t tlen = 0, slen = 0;
	int r;

	if (!dir || !ret)
		return policy_fail(errbuf, errlen, -EINVAL, "no folder given");
	if ((r = read_verified(dir, POLICY_NANO_TEMPLATE_FILE, POLICY_NANO_MAX_TEMPLATE_BYTES,
			       POLICY_NANO_TEMPLATE_SHA256, &tmpl, &tlen, errbuf, errlen)) < 0)
		return r;
	if ((r = read_verified(dir, POLICY_NANO_SCHEMA_FILE, POLICY_NANO_MAX_SCHEMA_BYTES,
			       POLICY_NANO_SCHEMA_SHA256, &schema, &slen, errbuf, errlen)) < 0) {
		free(tmpl);
		return r;
	}
	*ret = (struct policy_published){.nano_template = tmpl,
					 .nano_template_len = tlen,
					 .nano_schema = schema,
					 .nano_schema_len = slen};
	return 0;
}

void policy_published_finish(struct policy_published *p)
{
	if (!p)
		return;
	free((char *)p->nano_template);
	free((char *)p->nano_schema);
	memset(p, 0, sizeof(*p));
}
