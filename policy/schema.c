/* The step schema as JSON Schema: the copy the holo3 system prompt shows the model in its
 * <output_format> block, and the one servers that constrain their output with a schema get (the
 * remote provider's response_format), as H's Agent loop documentation has both copies be the
 * same. Built from the same layout table as the grammar, so none of them can drift apart; the
 * grammar stays stricter where JSON Schema cannot say it (string limits count bytes as written,
 * not characters), and the parser is the judge of all. Written as Python's json.dumps writes
 * (", " and ": " separators, one line), the form the published harnesses put in their prompts;
 * the key names are one "$defs" entry that hotkey.keys and key_down/key_up.key refer to. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>

#include <jansson.h>

#include "common.h"
#include "policy-internal.h"

/* Largest maxLength written. llama.cpp's schema converter (llama-cpp-python's server) turns
 * maxLength N into N nested optional rules, and its grammar parser refuses N >= 1024 and stops
 * the server; a longer string is bounded by the request's max_tokens instead, and the parser's
 * byte limits stay the contract. */
#define SCHEMA_MAX_LENGTH 1000

json_t *policy_key_enum_schema(void)
{
	json_t *names = json_array();
	char buf[8];

	for (size_t i = 0; policy_key_name(i); i++)
		json_array_append_new(names, json_string(policy_key_name(i)));
	for (int f = 1; f <= 24; f++) {
		snprintf(buf, sizeof(buf), "f%d", f);
		json_array_append_new(names, json_string(buf));
	}
	for (int c = 0x20; c < 0x7f; c++) {
		/* llama.cpp's converter writes enum values into its grammar unescaped: '"' and
		 * '\\' break it (the server stops). The grammar's own decoding keeps them. */
		if (c == '"' || c == '\\')
			continue;
		buf[0] = (char)c;
		buf[1] = '\0';
		json_array_append_new(names, json_string(buf));
	}
	return json_pack("{s:s, s:o}", "type", "string", "enum", names);
}

#define KEY_REF "#/$defs/key"

json_t *policy_arg_json_schema(const struct ipc_tool_arg *a)
{
	switch (a->type) {
	case IPC_ARG_STRING:
		if (a->max > SCHEMA_MAX_LENGTH)
			return json_pack("{s:s}", "type", "string");
		return json_pack("{s:s, s:I}", "type", "string", "maxLength", (json_int_t)a->max);
	case IPC_ARG_INT:
		return json_pack("{s:s, s:i, s:i}", "type", "integer", "minimum", a->lo, "maximum", a->hi);
	case IPC_ARG_BOOL:
		return json_pack("{s:s}", "type", "boolean");
	case IPC_ARG_BUTTON:
		return json_pack("{s:s, s:[s,s,s]}", "type", "string", "enum", "left", "right", "middle");
	case IPC_ARG_DIRECTION:
		return json_pack("{s:s, s:[s,s,s,s]}", "type", "string", "enum", "up", "down", "left",
				 "right");
	case IPC_ARG_KEYS:
		return json_pack("{s:s, s:{s:s}, s:i, s:i}", "type", "array", "items", "$ref", KEY_REF,
				 "minItems", 1, "maxItems", a->hi ? a->hi : IPC_MAX_HOTKEY_KEYS);
	case IPC_ARG_KEY:
		return json_pack("{s:s}", "$ref", KEY_REF);
	case IPC_ARG_GOALS: /* holo-nano's update_plan */
		return json_pack("{s:s, s:{s:s, s:{s:{s:s, s:i}, s:{s:s, s:[s,s,s,s]}}, s:[s,s], s:b}, "
				 "s:i, s:i}",
				 "type", "array", "items", "type", "object", "properties", "title", "type",
				 "string", "maxLength", IPC_MAX_GOAL_TITLE_BYTES, "status", "type", "string",
				 "enum", "todo", "running", "done", "failed", "required", "title", "status",
				 "additionalProperties", 0, "minItems", 1, "maxItems", IPC_MAX_PLAN_GOALS);
	}
	return NULL;
}

char *policy_step_json_schema(void)
{
	json_t *tools = json_array();
	char *text = NULL;

	const struct ipc_model_tool *tool;
	for (size_t t = 0; (tool = ipc_model_tool(IPC_POLICY_FORMAT_HOLO3, t)); t++) {
		const struct ipc_tool_layout *l = &tool->layout;
		json_t *props =
			json_pack("{s:{s:s, s:s}}", "tool_name", "type", "string", "const", tool->name);
		json_t *req = json_pack("[s]", "tool_name");
		for (size_t i = 0; i < l->n_args; i++) {
			json_object_set_new(props, l->args[i].name, policy_arg_json_schema(&l->args[i]));
			if (l->args[i].required)
				json_array_append_new(req, json_string(l->args[i].name));
		}
		json_array_append_new(tools, json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties",
						       props, "required", req, "additionalProperties", 0));
	}
	/* note and thought (1024 bytes) are past SCHEMA_MAX_LENGTH; "type": ["string", "null"]
	 * would also lose a maxLength in llama.cpp's converter, so note is an anyOf. */
	static_assert(POLICY_MAX_NOTE_BYTES > SCHEMA_MAX_LENGTH &&
			      POLICY_MAX_THOUGHT_BYTES > SCHEMA_MAX_LENGTH,
		      "note and thought would need a maxLength");
	json_t *schema =
		json_pack("{s:{s:o}, s:s, s:{s:{s:[{s:s}, {s:s}]}, s:{s:s}, s:{s:o}}, s:[s,s,s], s:b}",
			  "$defs", "key", policy_key_enum_schema(), "type", "object", "properties", "note",
			  "anyOf", "type", "string", "type", "null", "thought", "type", "string", "tool_call",
			  "anyOf", tools, "required", "note", "thought", "tool_call", "additionalProperties",
			  0);
	if (schema)
		text = json_dumps(schema, JSON_PRESERVE_ORDER);
	json_decref(schema);
	if (!text)
		errno = ENOMEM;
	return text;
}
