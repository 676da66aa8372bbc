/* Steps of the holo3 format: parse + validate (any JSON layout), serialize canonically.
 *
 * The tool call is parsed by ipc (one tool vocabulary); this file checks what the step adds
 * around it and what the model-facing schema is stricter about than scripts are: note and
 * thought, `element` required for pointer tools, whole seconds for `wait`, and the string limits
 * of the canonical layout measured as written by the serializer. So every step this parser
 * accepts serializes to text the grammar accepts.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

void policy_step_finish(struct policy_step *s)
{
	if (!s)
		return;
	free(s->note);
	free(s->thought);
	ipc_action_finish(&s->action);
	memset(s, 0, sizeof(*s));
}

int policy_fail(char *errbuf, size_t errlen, int err, const char *format, ...)
{
	if (errbuf && errlen) {
		va_list ap;
		va_start(ap, format);
		vsnprintf(errbuf, errlen, format, ap);
		va_end(ap);
	}
	return err;
}

size_t policy_written_len(const char *s, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
			len += 2;
		else if (c < 0x20)
			len += 6;
		else
			len += 1;
	}
	return len;
}

int policy_check_string(const json_t *v, const char *field, size_t max, char *errbuf, size_t errlen)
{
	if (!json_is_string(v))
		return policy_fail(errbuf, errlen, -EINVAL, "%s: expected a string", field);
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (memchr(s, '\0', n))
		return policy_fail(errbuf, errlen, -EINVAL, "%s: contains a NUL character", field);
	size_t w = policy_written_len(s, n);
	if (w > max)
		return policy_fail(errbuf, errlen, -E2BIG, "%s: %zu bytes exceed the limit of %zu", field, w,
				   max);
	return 0;
}

int policy_step_load(const char *text, size_t len, json_t **ret, char *errbuf, size_t errlen)
{
	json_error_t jerr;
	json_t *root;

	*ret = NULL;
	if (!text)
		return policy_fail(errbuf, errlen, -EINVAL, "no step text");
	if (len > POLICY_MAX_STEP_BYTES)
		return policy_fail(errbuf, errlen, -E2BIG, "step: %zu bytes exceed the limit of %d", len,
				   POLICY_MAX_STEP_BYTES);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return policy_fail(errbuf, errlen, -EINVAL, "invalid JSON at line %d column %d: %s",
				   jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root)) {
		int r = policy_fail(errbuf, errlen, -EINVAL,
				    "expected a step object {\"note\", \"thought\", "
				    "\"tool_call\"}");
		json_decref(root);
		return r;
	}
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		if (strcmp(key, "note") != 0 && strcmp(key, "thought") != 0 && strcmp(key, "tool_call") != 0) {
			int r = policy_fail(errbuf, errlen, -EINVAL, "%s: unknown field", key);
			json_decref(root);
			return r;
		}
	}
	*ret = root;
	return 0;
}

int policy_step_parse(const char *text, size_t len, struct policy_step *ret, char *errbuf, size_t errlen)
{
	struct policy_step s = {0};
	json_t *root = NULL;
	char *call = NULL;
	int r;

	if ((r = policy_step_load(text, len, &root, errbuf, errlen)) < 0)
		return r;

	json_t *note = json_object_get(root, "note");
	if (!note) {
		r = policy_fail(errbuf, errlen, -EINVAL, "note: missing (null or a string)");
		goto out;
	}
	if (!json_is_null(note)) {
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
	/* What ipc's scripts allow but the model's schema does not. */
	json_t *tn = json_object_get(tc, "tool_name");
	int tool = tn && json_is_string(tn) ? ipc_tool_from_string(json_string_value(tn)) : -1;
	const struct ipc_tool_layout *l = tool >= 0 ? policy_tool_layout(tool) : NULL;
	for (size_t i = 0; l && i < l->n_args; i++) {
		const struct ipc_tool_arg *a = &l->args[i];
		json_t *v = json_object_get(tc, a->name);
		char field[64];
		snprintf(field, sizeof(field), "tool_call.%s", a->name);
		if (!v) {
			if (a->required) {
				r = policy_fail(errbuf, errlen, -EINVAL, "%s: missing (required for '%s')",
						field, json_string_value(tn));
				goto out;
			}
			continue;
		}
		if (a->type == IPC_ARG_STRING &&
		    (r = policy_check_string(v, field, a->max, errbuf, errlen)) < 0)
			goto out;
		if (a->type == IPC_ARG_INT && !json_is_integer(v)) {
			r = policy_fail(errbuf, errlen, -EINVAL, "%s: expected an integer", field);
			goto out;
		}
		if (a->type == IPC_ARG_INT &&
		    (json_integer_value(v) < a->lo || json_integer_value(v) > a->hi)) {
			r = policy_fail(errbuf, errlen, -EINVAL, "%s: %lld is out of range %d..%d", field,
					(long long)json_integer_value(v), a->lo, a->hi);
			goto out;
		}
	}
	call = json_dumps(tc, JSON_COMPACT | JSON_PRESERVE_ORDER);
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
	/* The script-only tools are not the model's to use (a "target" is refused above: the
	 * layout requires x and y, and ipc refuses a target beside them). */
	if (s.action.tool >= IPC_TOOL_MODEL_COUNT) {
		r = policy_fail(errbuf, errlen, -EINVAL, "tool_call.tool_name: '%s' is a script-only tool",
				ipc_tool_to_string(s.action.tool));
		goto out;
	}
	for (size_t k = 0; k < s.action.n_keys; k++)
		if (!policy_key_name_ok(s.action.keys[k])) {
			r = policy_fail(errbuf, errlen, -EINVAL,
					"tool_call.keys[%zu]: '%s' is not a key name of "
					"the schema",
					k, s.action.keys[k]);
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
	json_decref(root);
	return r;
}

static int add(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

char *policy_step_to_json(const struct policy_step *step)
{
	const struct ipc_action *a;
	const struct ipc_tool_layout *l;
	json_t *root = NULL, *tc = NULL;
	char *out = NULL;
	int r = 0;

	if (!step || !step->thought || !(l = policy_tool_layout((a = &step->action)->tool))) {
		errno = EINVAL;
		return NULL;
	}
	root = json_object();
	tc = json_object();
	if (!root || !tc)
		goto oom;
	r |= add(root, "note", step->note ? json_string(step->note) : json_null());
	r |= add(root, "thought", json_string(step->thought));
	r |= json_object_set(root, "tool_call", tc);
	r |= add(tc, "tool_name", json_string(ipc_tool_to_string(a->tool)));
	for (size_t i = 0; i < l->n_args; i++) {
		const char *name = l->args[i].name;
		json_t *v = NULL, *arr;
		switch (l->args[i].type) {
		case IPC_ARG_STRING:
			v = json_string(strcmp(name, "element") == 0 ? (a->element ? a->element : "") :
								       (a->content ? a->content : ""));
			break;
		case IPC_ARG_INT: {
			int x = strcmp(name, "x") == 0		  ? a->x :
				strcmp(name, "y") == 0		  ? a->y :
				strcmp(name, "x2") == 0		  ? a->x2 :
				strcmp(name, "y2") == 0		  ? a->y2 :
				strcmp(name, "scroll_size") == 0  ? a->scroll_size :
				strcmp(name, "repeat_count") == 0 ? a->repeat_count :
				strcmp(name, "duration") == 0	  ? (int)(a->duration_ms / 1000) :
								    -1;
			if (strcmp(name, "duration") == 0 && a->duration_ms % 1000 != 0) {
				errno = EINVAL; /* the schema has whole seconds only */
				goto fail;
			}
			v = json_integer(x);
			break;
		}
		case IPC_ARG_BOOL:
			v = json_boolean(strcmp(name, "press_enter") == 0 ? a->press_enter : a->overwrite);
			break;
		case IPC_ARG_BUTTON:
			if (!ipc_button_to_string(a->button))
				goto inval;
			v = json_string(ipc_button_to_string(a->button));
			break;
		case IPC_ARG_DIRECTION:
			if (!ipc_direction_to_string(a->direction))
				goto inval;
			v = json_string(ipc_direction_to_string(a->direction));
			break;
		case IPC_ARG_KEYS:
			if (a->n_keys == 0 || a->n_keys > IPC_MAX_HOTKEY_KEYS)
				goto inval;
			v = arr = json_array();
			for (size_t k = 0; arr && k < a->n_keys; k++)
				r |= json_array_append_new(arr, json_string(a->keys[k]));
			break;
		case IPC_ARG_KEY:
			if (!a->key)
				goto inval;
			v = json_string(a->key);
			break;
		case IPC_ARG_GOALS: /* not in holo3's layout */
			goto inval;
		}
		r |= add(tc, name, v);
	}
	if (r != 0)
		goto oom;
	out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!out)
		goto oom;
	json_decref(tc);
	json_decref(root);
	return out;
inval:
	errno = EINVAL;
	goto fail;
oom:
	errno = ENOMEM;
fail:
	json_decref(tc);
	json_decref(root);
	return NULL;
}
