/* holoctl mcp's protocol half: JSON-RPC classification, the tool table and the holod request
 * each tools/call becomes, resource URIs. Pure (no socket, no thread), so tests and the fuzz
 * target (tests/cli/fuzz-mcp.c) drive it without a daemon. */
#include "mcp.h"

#include "common.h"
#include "holod-config.h"
#include "ipc.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const mcp_protocol_versions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
const size_t mcp_protocol_versions_count = ARRAY_SIZE(mcp_protocol_versions);

/* The first revision with the tasks utility. */
#define MCP_TASKS_VERSION "2025-11-25"

const char *mcp_negotiate_version(const char *requested)
{
	for (size_t i = 0; requested && i < mcp_protocol_versions_count; i++)
		if (strcmp(requested, mcp_protocol_versions[i]) == 0)
			return mcp_protocol_versions[i];
	return mcp_protocol_versions[mcp_protocol_versions_count - 1];
}

/* ---- JSON-RPC --------------------------------------------------------------------------------- */

json_t *mcp_error_response(json_t *id, int code, const char *fmt, ...)
{
	char msg[MCP_MAX_MESSAGE];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
			 "code", code, "message", msg);
}

json_t *mcp_result_response(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result);
}

/* An id the specification allows: a string (bounded here) or an integer. */
static bool valid_id(json_t *id)
{
	if (json_is_string(id))
		return json_string_length(id) <= MCP_MAX_ID_BYTES;
	return json_is_integer(id);
}

static unsigned depth_of(json_t *v, unsigned depth)
{
	unsigned max = depth;
	const char *key;
	json_t *child;
	size_t i;

	if (depth > MCP_MAX_DEPTH)
		return depth;
	if (json_is_object(v)) {
		json_object_foreach(v, key, child)
		{
			unsigned d = depth_of(child, depth + 1);
			if (d > max)
				max = d;
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, child)
		{
			unsigned d = depth_of(child, depth + 1);
			if (d > max)
				max = d;
		}
	}
	return max;
}

void mcp_message_finish(struct mcp_message *m)
{
	json_decref(m->root);
	*m = (struct mcp_message){0};
}

int mcp_message_parse(const char *line, size_t len, struct mcp_message *ret, json_t **ret_error)
{
	json_error_t jerr;
	json_t *root, *id, *method, *params, *version;

	*ret = (struct mcp_message){0};
	*ret_error = NULL;
	if (len > MCP_MAX_LINE_BYTES) {
		*ret_error = mcp_error_response(NULL, MCP_ERR_INVALID_REQUEST,
						"message of %zu bytes, over the limit of %u bytes "
						"(MCP_MAX_LINE_BYTES)",
						len, MCP_MAX_LINE_BYTES);
		return MCP_ERR_INVALID_REQUEST;
	}
	/* JSON_REJECT_DUPLICATES: one meaning per member; JSON_ALLOW_NUL is left off, so a string
	 * holding U+0000 is refused before it can be cut short. */
	root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		*ret_error = mcp_error_response(NULL, MCP_ERR_PARSE, "invalid JSON at line %d column %d: %s",
						jerr.line, jerr.column, jerr.text);
		return MCP_ERR_PARSE;
	}
	if (json_is_array(root)) {
		json_decref(root);
		*ret_error = mcp_error_response(NULL, MCP_ERR_INVALID_REQUEST,
						"JSON-RPC batches are not part of MCP since "
						"2025-06-18: send one message per line");
		return MCP_ERR_INVALID_REQUEST;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		*ret_error = mcp_error_response(NULL, MCP_ERR_INVALID_REQUEST, "a message is a JSON object");
		return MCP_ERR_INVALID_REQUEST;
	}
	id = json_object_get(root, "id");
	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	version = json_object_get(root, "jsonrpc");
	/* An id good enough to answer with, when the rest is wrong. */
	json_t *answer_id = id && valid_id(id) ? id : NULL;
	const char *why = NULL;

	if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0)
		why = "\"jsonrpc\" must be \"2.0\"";
	else if (depth_of(root, 0) > MCP_MAX_DEPTH)
		why = "the message nests deeper than 64 levels (MCP_MAX_DEPTH)";
	else if (id && !valid_id(id))
		why = json_is_string(id) ? "\"id\" is longer than 256 bytes (MCP_MAX_ID_BYTES)" :
					   "\"id\" must be a string or an integer";
	else if (method && !json_is_string(method))
		why = "\"method\" must be a string";
	else if (method && json_string_length(method) > MCP_MAX_METHOD_BYTES)
		why = "\"method\" is longer than 128 bytes (MCP_MAX_METHOD_BYTES)";
	else if (params && !json_is_object(params) && !json_is_array(params))
		why = "\"params\" must be an object";
	else if (!method && !id)
		why = "a message has a \"method\" (request, notification) or an \"id\" (response)";
	else if (!method && !json_object_get(root, "result") && !json_object_get(root, "error"))
		why = "a request needs a \"method\"";
	if (why) {
		*ret_error = mcp_error_response(answer_id, MCP_ERR_INVALID_REQUEST, "%s", why);
		json_decref(root);
		return MCP_ERR_INVALID_REQUEST;
	}
	ret->root = root;
	ret->id = id;
	ret->method = method ? json_string_value(method) : NULL;
	ret->params = json_is_object(params) ? params : NULL;
	if (json_is_array(params)) {
		/* By position: no MCP method takes that. */
		*ret_error =
			id ? mcp_error_response(id, MCP_ERR_INVALID_PARAMS, "\"params\" must be an object") :
			     NULL;
		mcp_message_finish(ret);
		return MCP_ERR_INVALID_PARAMS;
	}
	ret->kind = !method ? MCP_MSG_RESPONSE : id ? MCP_MSG_REQUEST : MCP_MSG_NOTIFICATION;
	return 0;
}

/* ---- initialize ------------------------------------------------------------------------------- */

json_t *mcp_initialize_result(const char *version)
{
	json_t *caps = json_pack("{s:{s:b}, s:{s:b, s:b}}", "tools", "listChanged", 0, "resources",
				 "subscribe", 0, "listChanged", 0);
	if (strcmp(version, MCP_TASKS_VERSION) >= 0)
		json_object_set_new(caps, "tasks",
				    json_pack("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel", "requests",
					      "tools", "call"));
	return json_pack("{s:s, s:o, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version, "capabilities",
			 caps, "serverInfo", "name", "holod", "title", "holod (through holoctl mcp)",
			 "version", HOLOD_VERSION, "instructions",
			 "Drives the X11 desktop that holod owns. Take a screenshot first; act with the "
			 "action tools (pixel coordinates of the screenshot unless coords is \"model\", "
			 "0..1000 over the primary monitor), or hand a whole job to holod's own model with "
			 "run_task. Every action is journaled as a holod task: holod://tasks/ID resources "
			 "hold the task, its steps and a review page.");
}

/* ---- tools ------------------------------------------------------------------------------------ */

/* Options every screen tool takes: they go to the task, not into the action. */
static const char common_props[] =
	"{\"coords\": {\"type\": \"string\", \"enum\": [\"pixels\", \"model\"], \"description\": "
	"\"pixels (default): root-window pixels of the screenshot; model: 0..1000 over the "
	"primary monitor\"},"
	"\"dry_run\": {\"type\": \"boolean\", \"description\": \"journal the step, inject "
	"nothing\"},"
	"\"settle_ms\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 10000, "
	"\"description\": \"pause after the action before the after-screenshot\"},"
	"\"display\": {\"type\": \"string\", \"maxLength\": 64, \"description\": \"one of the "
	"displays holod drives (status tool); default the first free one\"},"
	"\"require_focus\": {\"type\": \"boolean\", \"description\": \"fail when no window "
	"has the keyboard focus\"}}";

enum tool_kind { T_RUN, T_ACTION, T_LOCATE, T_SCREENSHOT, T_WINDOWS, T_STATUS, T_CANCEL, T_REPLY };

struct mcp_tool {
	const char *name, *title, *description;
	const char *props;    /* the JSON object of its own properties */
	const char *required; /* a JSON array, or NULL */
	enum tool_kind kind;
	bool read_only;
};

/* holoctl mcp's own tools; the action tools come from ipc's action-tool table, in its order,
 * where the T_ACTION entry stands. */
static const struct mcp_tool tools[] = {
	{"run_task", "Run a holod task",
	 "Runs a task on the desktop and waits for its end: an instruction for holod's own "
	 "model (needs holod --model) or a script of actions (the action tools' objects with "
	 "their tool_name). Progress notifications follow its steps when a progressToken is "
	 "given; cancelling the request cancels the task. Members are POST /v1/tasks's "
	 "(docs/api.md): budgets max_steps and max_seconds, settle_ms, coords, display, "
	 "dry_run, and the model's options.",
	 "{\"instruction\": {\"type\": \"string\", \"maxLength\": 8192},"
	 "\"script\": {\"type\": \"array\", \"minItems\": 1, \"maxItems\": 1000, \"items\": "
	 "{\"type\": \"object\", \"required\": [\"tool_name\"]}},"
	 "\"max_steps\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10000},"
	 "\"max_seconds\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 86400},"
	 "\"require_focus\": {\"type\": \"boolean\"},"
	 "\"history\": {\"type\": \"string\", \"enum\": [\"rolling\", \"persistent\", "
	 "\"window\"]},"
	 "\"policy_format\": {\"type\": \"string\", \"enum\": [\"holo3\", \"holo-nano\"]},"
	 "\"window\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 64},"
	 "\"max_tiles\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 48},"
	 "\"temperature\": {\"type\": \"number\", \"minimum\": 0, \"maximum\": 2},"
	 "\"top_p\": {\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 1},"
	 "\"seed\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 4294967295},"
	 "\"thinking\": {\"type\": \"boolean\"},"
	 "\"thinking_tokens\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 65536},"
	 "\"stuck_warn\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 1000},"
	 "\"stuck_stop\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 1000}}",
	 NULL, T_RUN, false},
	{"screenshot", "Screenshot", "The whole screen now, as a PNG image.",
	 "{\"display\": {\"type\": \"string\", \"maxLength\": 64}}", NULL, T_SCREENSHOT, true},
	{"locate", "Locate on the screen",
	 "Finds a described target on the primary monitor with holod's model (one grounded "
	 "step, nothing is clicked) and answers its point in pixels and in 0..1000 model "
	 "coordinates. Needs holod --model.",
	 "{\"target\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 512},"
	 "\"display\": {\"type\": \"string\", \"maxLength\": 64}}",
	 "[\"target\"]", T_LOCATE, true},
	/* here: the action tools of ipc's table (ipc_tool_info's client member) */
	{NULL, NULL, NULL, NULL, NULL, T_ACTION, false},
	{"windows", "List windows",
	 "The client windows on the screen, topmost first (id, desktop, pid, class, geometry, "
	 "title, which has the keyboard focus), and the pointer's position (GET /v1/windows).",
	 "{\"display\": {\"type\": \"string\", \"maxLength\": 64}}", NULL, T_WINDOWS, true},
	{"status", "holod's status",
	 "holod's state: model, displays, the running task and the queue (GET /v1/status).", "{}", NULL,
	 T_STATUS, true},
	{"cancel_task", "Cancel a task", "Cancels a queued or running holod task by its id.",
	 "{\"task_id\": {\"type\": \"integer\", \"minimum\": 1}}", "[\"task_id\"]", T_CANCEL, false},
	{"reply_task", "Answer a task's question",
	 "Answers the question a waiting task asked its user (an ask_user step: the task is "
	 "waiting_for_user, and run_task's progress says so); the text becomes the step's "
	 "result, which the model reads.",
	 "{\"task_id\": {\"type\": \"integer\", \"minimum\": 1},"
	 "\"text\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 4096}}",
	 "[\"task_id\", \"text\"]", T_REPLY, false},
};

/* The action tool t as an MCP tool; false when ipc's table offers it to no client. */
static bool action_tool(enum ipc_tool t, struct mcp_tool *ret)
{
	const struct ipc_tool_info *info = ipc_tool_info(t);

	if (!info || !info->client.title)
		return false;
	*ret = (struct mcp_tool){info->name,
				 info->client.title,
				 info->client.description,
				 info->client.properties,
				 info->client.required,
				 T_ACTION,
				 info->client.read_only};
	return true;
}

static bool tool_find(const char *name, struct mcp_tool *ret)
{
	int t;

	for (size_t i = 0; name && i < ARRAY_SIZE(tools); i++)
		if (tools[i].name && strcmp(tools[i].name, name) == 0) {
			*ret = tools[i];
			return true;
		}
	t = ipc_tool_from_string(name);
	return t >= 0 && action_tool((enum ipc_tool)t, ret);
}

static json_t *tool_schema(const struct mcp_tool *t)
{
	json_t *props = json_loads(t->props, 0, NULL);
	json_t *schema;

	if (!json_is_object(props))
		abort(); /* a table is wrong: the unit tests catch it */
	if (t->kind == T_ACTION || t->kind == T_RUN) {
		json_t *common = json_loads(common_props, 0, NULL);
		if (!common)
			abort();
		json_object_update_missing(props, common);
		json_decref(common);
	}
	/* run_task's members are POST /v1/tasks's, which holod checks (and may grow): the
	 * schema lists them without closing the set. */
	schema = json_pack("{s:s, s:o}", "type", "object", "properties", props);
	if (t->kind != T_RUN)
		json_object_set_new(schema, "additionalProperties", json_false());
	if (t->required)
		json_object_set_new(schema, "required", json_loads(t->required, 0, NULL));
	return schema;
}

static json_t *tool_entry(const struct mcp_tool *t, const char *version)
{
	json_t *tool =
		json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b}}", "name", t->name, "title", t->title,
			  "description", t->description, "inputSchema", tool_schema(t), "annotations",
			  "title", t->title, "readOnlyHint", t->read_only, "openWorldHint", 0);
	if (t->kind == T_RUN && (!version || strcmp(version, MCP_TASKS_VERSION) >= 0))
		json_object_set_new(tool, "execution", json_pack("{s:s}", "taskSupport", "optional"));
	return tool;
}

json_t *mcp_tools_list(const char *version)
{
	json_t *list = json_array();

	for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
		if (tools[i].kind == T_ACTION) {
			for (int a = 0; a < IPC_TOOL_COUNT_; a++) {
				struct mcp_tool t;
				if (action_tool((enum ipc_tool)a, &t))
					json_array_append_new(list, tool_entry(&t, version));
			}
			continue;
		}
		json_array_append_new(list, tool_entry(&tools[i], version));
	}
	return json_pack("{s:o}", "tools", list);
}

/* Task options that stay out of an action. */
static const char *const task_options[] = {"coords", "dry_run", "settle_ms", "display", "require_focus"};

static bool is_task_option(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(task_options); i++)
		if (strcmp(task_options[i], key) == 0)
			return true;
	return false;
}

/* Validates body with ipc's parser (what holod accepts), and for an action call refers to the
 * argument by its own name ("x: ..." rather than "script[0].x: ..."). */
static int validate_body(const char *body, bool action, char *err, size_t errlen)
{
	struct ipc_task_request *req = NULL;
	char buf[MCP_MAX_MESSAGE];
	int r;

	if (strlen(body) > IPC_MAX_BODY_BYTES) {
		snprintf(err, errlen, "the task is %zu bytes of JSON, over holod's limit of %d bytes",
			 strlen(body), IPC_MAX_BODY_BYTES);
		return -E2BIG;
	}
	r = ipc_task_request_parse(body, strlen(body), &req, buf, sizeof(buf));
	ipc_task_request_destroy(req);
	if (r < 0) {
		const char *msg = buf;
		if (action && strncmp(msg, "script[0].", 10) == 0)
			msg += 10;
		else if (action && strncmp(msg, "script[0]: ", 11) == 0)
			msg += 11;
		snprintf(err, errlen, "%s", msg);
		return r == -E2BIG ? -E2BIG : -EINVAL;
	}
	return 0;
}

static char *dump(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);
	if (!s)
		abort(); /* out of memory */
	return s;
}

void mcp_plan_finish(struct mcp_plan *p)
{
	free(p->body);
	free(p->display);
	*p = (struct mcp_plan){0};
}

static int display_arg(json_t *args, char **ret, char *err, size_t errlen)
{
	json_t *d = json_object_get(args, "display");
	if (!d)
		return 0;
	if (!json_is_string(d) || json_string_length(d) == 0 ||
	    json_string_length(d) > IPC_MAX_DISPLAY_NAME_BYTES) {
		snprintf(err, errlen, "display: expected an X display name of 1..%d bytes",
			 IPC_MAX_DISPLAY_NAME_BYTES);
		return -EINVAL;
	}
	*ret = xstrdup(json_string_value(d));
	return 0;
}

static int only_members(json_t *args, const char *const *names, size_t n, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	json_object_foreach(args, key, v)
	{
		size_t i;
		for (i = 0; i < n; i++)
			if (strcmp(key, names[i]) == 0)
				break;
		if (i == n) {
			snprintf(err, errlen, "%.64s: unknown argument", key);
			return -EINVAL;
		}
	}
	return 0;
}

int mcp_plan_tool_call(json_t *params, struct mcp_plan *ret, char *err, size_t errlen)
{
	json_t *name = json_object_get(params, "name");
	json_t *args = json_object_get(params, "arguments");
	json_t *task = json_object_get(params, "task");
	struct mcp_tool found, *t = &found;
	json_t *body = NULL;
	int r = 0;

	*ret = (struct mcp_plan){0};
	err[0] = '\0';
	if (!json_is_string(name)) {
		snprintf(err, errlen, "tools/call needs the tool's \"name\" (a string)");
		return MCP_ERR_INVALID_PARAMS;
	}
	if (!tool_find(json_string_value(name), &found)) {
		snprintf(err, errlen, "unknown tool '%.64s' (tools/list names them)", json_string_value(name));
		return MCP_ERR_INVALID_PARAMS;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		snprintf(err, errlen, "\"arguments\" must be an object");
		return MCP_ERR_INVALID_PARAMS;
	}
	if (task && (!json_is_object(task) || t->kind != T_RUN)) {
		snprintf(err, errlen,
			 t->kind == T_RUN ? "\"task\" must be an object" :
					    "tool '%s' cannot run as an MCP task (execution."
					    "taskSupport is forbidden); call it without \"task\"",
			 t->name);
		return MCP_ERR_INVALID_PARAMS;
	}
	if (!json_is_object(args))
		args = NULL;
	ret->tool = t->name;
	ret->wants_task = task != NULL;

	switch (t->kind) {
	case T_RUN:
		ret->kind = MCP_PLAN_TASK;
		if (!args) {
			snprintf(err, errlen, "run_task needs an instruction or a script");
			return -EINVAL;
		}
		ret->body = dump(args);
		r = validate_body(ret->body, false, err, errlen);
		break;
	case T_ACTION: {
		json_t *action = json_pack("{s:s}", "tool_name", t->name);
		const char *key;
		json_t *v;

		body = json_object();
		json_object_foreach(args, key, v)
		{
			if (strcmp(key, "tool_name") == 0) {
				snprintf(err, errlen, "tool_name: the tool's name says it");
				json_decref(action);
				r = -EINVAL;
				goto out;
			}
			json_object_set(is_task_option(key) ? body : action, key, v);
		}
		json_object_set_new(body, "script", json_pack("[o]", action));
		ret->kind = MCP_PLAN_ACTION;
		ret->body = dump(body);
		r = validate_body(ret->body, true, err, errlen);
		break;
	}
	case T_LOCATE: {
		static const char *const names[] = {"target", "display"};
		json_t *target = json_object_get(args, "target");

		if ((r = only_members(args, names, ARRAY_SIZE(names), err, errlen)) < 0)
			goto out;
		if (!json_is_string(target) || json_string_length(target) == 0) {
			snprintf(err, errlen, "target: expected a description of what to find");
			r = -EINVAL;
			goto out;
		}
		/* A dry-run move: the model locates the target, nothing is injected. */
		body = json_pack("{s:[{s:s, s:O}], s:b}", "script", "tool_name", "move", "target", target,
				 "dry_run", 1);
		if (json_object_get(args, "display"))
			json_object_set(body, "display", json_object_get(args, "display"));
		ret->kind = MCP_PLAN_LOCATE;
		ret->body = dump(body);
		r = validate_body(ret->body, true, err, errlen);
		break;
	}
	case T_SCREENSHOT:
	case T_WINDOWS: {
		static const char *const names[] = {"display"};
		ret->kind = t->kind == T_WINDOWS ? MCP_PLAN_WINDOWS : MCP_PLAN_SCREENSHOT;
		if ((r = only_members(args, names, ARRAY_SIZE(names), err, errlen)) < 0)
			goto out;
		r = display_arg(args, &ret->display, err, errlen);
		break;
	}
	case T_STATUS:
		ret->kind = MCP_PLAN_STATUS;
		r = only_members(args, NULL, 0, err, errlen);
		break;
	case T_CANCEL:
	case T_REPLY: {
		static const char *const names[] = {"task_id", "text"};
		json_t *id = json_object_get(args, "task_id");
		json_t *text = json_object_get(args, "text");
		ret->kind = t->kind == T_CANCEL ? MCP_PLAN_CANCEL : MCP_PLAN_REPLY;
		if ((r = only_members(args, names, t->kind == T_CANCEL ? 1 : 2, err, errlen)) < 0)
			goto out;
		if (t->kind == T_REPLY) {
			if (!json_is_string(text) || json_string_length(text) == 0 ||
			    json_string_length(text) > IPC_MAX_REPLY_BYTES) {
				snprintf(err, errlen, "text: expected the answer, 1..%d bytes",
					 IPC_MAX_REPLY_BYTES);
				r = json_string_length(text) > IPC_MAX_REPLY_BYTES ? -E2BIG : -EINVAL;
				goto out;
			}
			body = json_pack("{s:O}", "text", text);
			ret->body = dump(body);
		}
		if (!json_is_integer(id) || json_integer_value(id) < 1) {
			snprintf(err, errlen, "task_id: expected a task id (an integer from 1)");
			r = -EINVAL;
			goto out;
		}
		ret->task_id = (long long)json_integer_value(id);
		break;
	}
	}
out:
	json_decref(body);
	if (r < 0) {
		const char *tool = ret->tool;
		mcp_plan_finish(ret);
		ret->tool = tool;
	}
	return r;
}

/* ---- resources -------------------------------------------------------------------------------- */

json_t *mcp_resource_templates(void)
{
	return json_pack("{s:[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s},"
			 " {s:s, s:s, s:s, s:s}]}",
			 "resourceTemplates", "uriTemplate", "holod://tasks/{id}", "name", "task",
			 "description", "A holod task: its request, status, result or error, provenance",
			 "mimeType", "application/json", "uriTemplate", "holod://tasks/{id}/steps", "name",
			 "steps", "description",
			 "The task's steps: actions, points in both spaces, results, timings, the model's "
			 "thoughts",
			 "mimeType", "application/json", "uriTemplate", "holod://tasks/{id}/report", "name",
			 "report", "description",
			 "The task's review page (holoctl report): self-contained HTML, screenshots "
			 "embedded",
			 "mimeType", "text/html", "uriTemplate",
			 "holod://tasks/{id}/steps/{n}/screenshot/{which}", "name", "step-screenshot",
			 "description", "The PNG before or after (which) step n", "mimeType", "image/png");
}

/* A decimal number from 0 (no sign, no leading zero but 0 itself) ending at a '/' or the end;
 * advances *p. */
static bool read_number(const char **p, long long min, long long *ret)
{
	const char *s = *p;
	long long v = 0;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (LLONG_MAX - 9) / 10)
			return false;
		v = v * 10 + (*s - '0');
	}
	if (v < min)
		return false;
	*ret = v;
	*p = s;
	return true;
}

int mcp_resource_parse(const char *uri, struct mcp_resource *ret)
{
	static const char prefix[] = "holod://tasks/";
	const char *p;

	*ret = (struct mcp_resource){0};
	if (!uri || strlen(uri) > MCP_MAX_URI_BYTES || strncmp(uri, prefix, strlen(prefix)) != 0)
		return -EINVAL;
	p = uri + strlen(prefix);
	if (!read_number(&p, 1, &ret->task_id))
		return -EINVAL;
	if (*p == '\0') {
		ret->kind = MCP_RES_TASK;
		return 0;
	}
	if (strcmp(p, "/steps") == 0) {
		ret->kind = MCP_RES_STEPS;
		return 0;
	}
	if (strcmp(p, "/report") == 0) {
		ret->kind = MCP_RES_REPORT;
		return 0;
	}
	if (strncmp(p, "/steps/", 7) != 0)
		return -EINVAL;
	p += 7;
	if (!read_number(&p, 0, &ret->step))
		return -EINVAL;
	if (strcmp(p, "/screenshot/before") == 0)
		ret->before = true;
	else if (strcmp(p, "/screenshot/after") != 0)
		return -EINVAL;
	ret->kind = MCP_RES_SCREENSHOT;
	return 0;
}

char *mcp_base64(const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = xmalloc((n + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		*o++ = tab[v >> 18], *o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63], *o++ = tab[v & 63];
	}
	if (n - i == 1) {
		unsigned v = (unsigned)p[i] << 16;
		*o++ = tab[v >> 18], *o++ = tab[(v >> 12) & 63], *o++ = '=', *o++ = '=';
	} else if (n - i == 2) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;
		*o++ = tab[v >> 18], *o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63], *o++ = '=';
	}
	*o = '\0';
	return out;
}
