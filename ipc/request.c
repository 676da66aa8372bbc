/* Request bodies of POST /v1/tasks and POST /v1/actions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "json-internal.h"
#include "keys.h"

void ipc_task_request_destroy(struct ipc_task_request *req)
{
	if (!req)
		return;
	free(req->instruction);
	free(req->options.display);
	for (size_t i = 0; i < req->n_actions; i++)
		ipc_action_finish(&req->actions[i]);
	free(req->actions);
	free(req->check_steps);
	free(req);
}

static int check_members(const json_t *root, const char *const *allowed, size_t n, char *errbuf, size_t errlen)
{
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)root, key, val)
	{
		bool ok = false;
		for (size_t i = 0; i < n && !ok; i++)
			ok = strcmp(key, allowed[i]) == 0;
		if (!ok)
			return ipc_error_at(errbuf, errlen, -EINVAL, key, "unknown field");
	}
	return 0;
}

static int get_uint(const json_t *root, const char *name, uint32_t lo, uint32_t hi, uint32_t *ret,
		    bool *ret_present, char *errbuf, size_t errlen)
{
	json_t *v = json_object_get(root, name);
	if (!v) {
		*ret_present = false;
		return 0;
	}
	if (!json_is_integer(v))
		return ipc_error_at(errbuf, errlen, -EINVAL, name, "expected an integer");
	json_int_t i = json_integer_value(v);
	if (i < (json_int_t)lo || i > (json_int_t)hi)
		return ipc_error_at(errbuf, errlen, -EINVAL, name, "%lld is out of range %u..%u",
				    (long long)i, lo, hi);
	*ret = (uint32_t)i;
	*ret_present = true;
	return 0;
}

/* A write the display would refuse (a control character, invalid UTF-8) is a bad request now,
 * not a failed step later. The model's own steps are not checked here: their failure is
 * reported back to the model as the action's error. */
/* "check": {"threshold": T, "steps": [...]}, one recorded step per action of the script. */
static int parse_check(const json_t *root, struct ipc_task_request *req, size_t n_actions, char *errbuf,
		       size_t errlen)
{
	static const char *const members[] = {"threshold", "steps"};
	json_t *check = json_object_get(root, "check");
	json_t *steps = json_object_get(check, "steps");
	json_t *t = json_object_get(check, "threshold");
	int r;

	if (!check)
		return 0;
	if (!json_is_object(check))
		return ipc_error_at(errbuf, errlen, -EINVAL, "check",
				    "expected an object with \"threshold\" and \"steps\"");
	if (!req->replay_of)
		return ipc_error_at(errbuf, errlen, -EINVAL, "check",
				    "needs \"replay_of\": the task whose screenshots it compares with");
	if ((r = check_members(check, members, ARRAY_SIZE(members), errbuf, errlen)) < 0)
		return r;
	if (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1)
		return ipc_error_at(errbuf, errlen, -EINVAL, "check.threshold",
				    "expected a number from 0 to 1");
	if (!json_is_array(steps) || json_array_size(steps) != n_actions)
		return ipc_error_at(errbuf, errlen, -EINVAL, "check.steps",
				    "expected an array of %zu step indices, one per action", n_actions);
	req->check_steps = xcalloc(n_actions, sizeof(*req->check_steps));
	for (size_t i = 0; i < n_actions; i++) {
		json_t *v = json_array_get(steps, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= IPC_MAX_TASK_STEPS) {
			char path[32];
			snprintf(path, sizeof(path), "check.steps[%zu]", i);
			return ipc_error_at(errbuf, errlen, -EINVAL, path, "expected a step index 0..%d",
					    IPC_MAX_TASK_STEPS - 1);
		}
		req->check_steps[i] = (uint32_t)json_integer_value(v);
	}
	req->check_threshold = json_number_value(t);
	return 0;
}

static int check_typeable(const struct ipc_action *a, const char *prefix, char *errbuf, size_t errlen)
{
	char why[160], path[64];
	int r;

	if (a->tool != IPC_TOOL_WRITE || (r = keys_text_validate(a->content, why, sizeof(why))) >= 0)
		return 0;
	snprintf(path, sizeof(path), "%s.content", prefix);
	return ipc_error_at(errbuf, errlen, r, path, "%s", why);
}

/* coords, max_steps, max_seconds, settle_ms, dry_run: common to both request kinds. */
static int parse_options(const json_t *root, struct ipc_task_request *req, char *errbuf, size_t errlen)
{
	uint32_t u = 0;
	bool present;
	int r;

	req->coords = IPC_COORDS_PIXELS;
	req->options.settle_ms = -1;
	req->options.stuck_warn = -1;
	req->options.stuck_stop = -1;

	json_t *c = json_object_get(root, "coords");
	if (c) {
		r = json_is_string(c) ? ipc_coords_from_string(json_string_value(c)) : -EINVAL;
		if (r < 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "coords",
					    "expected \"pixels\" or \"model\"");
		req->coords = (enum ipc_coords)r;
	}
	if ((r = get_uint(root, "max_steps", 1, IPC_MAX_TASK_STEPS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.max_steps = u;
	if ((r = get_uint(root, "max_seconds", 1, IPC_MAX_TASK_SECONDS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.max_seconds = u;
	if ((r = get_uint(root, "settle_ms", 0, IPC_MAX_SETTLE_MS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.settle_ms = (int32_t)u;
	if ((r = get_uint(root, "ask_timeout", 1, IPC_MAX_TASK_SECONDS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.ask_timeout = u;
	json_t *ap = json_object_get(root, "approve");
	if (ap) {
		r = json_is_string(ap) ? ipc_approve_from_string(json_string_value(ap)) : -EINVAL;
		if (r < 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "approve",
					    "expected \"none\", \"risky\" or \"all\"");
		req->options.approve = (enum ipc_approve)r;
	}
	json_t *d = json_object_get(root, "dry_run");
	if (d) {
		if (!json_is_boolean(d))
			return ipc_error_at(errbuf, errlen, -EINVAL, "dry_run", "expected true or false");
		req->options.dry_run = json_is_true(d);
	}
	json_t *to = json_object_get(root, "takeover");
	if (to) {
		int t = json_is_string(to) ? ipc_takeover_from_string(json_string_value(to)) : -EINVAL;
		if (t < 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "takeover",
					    "expected \"pause\", \"ignore\" or \"cancel\"");
		req->options.takeover = (enum ipc_takeover)t;
	}
	json_t *disp = json_object_get(root, "display");
	if (disp) {
		if (!json_is_string(disp) || json_string_length(disp) == 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "display",
					    "expected a display name such as \":1\"");
		size_t n = json_string_length(disp);
		if (n > IPC_MAX_DISPLAY_NAME_BYTES)
			return ipc_error_at(errbuf, errlen, -E2BIG, "display",
					    "%zu bytes exceed the limit of %d", n, IPC_MAX_DISPLAY_NAME_BYTES);
		const char *v = json_string_value(disp);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)v[i] <= ' ' || v[i] == 0x7f)
				return ipc_error_at(errbuf, errlen, -EINVAL, "display",
						    "a display name has no spaces or control "
						    "characters");
		req->options.display = xstrndup(v, n);
	}
	return 0;
}

const char *ipc_takeover_to_string(enum ipc_takeover t)
{
	switch (t) {
	case IPC_TAKEOVER_PAUSE:
		return "pause";
	case IPC_TAKEOVER_IGNORE:
		return "ignore";
	case IPC_TAKEOVER_CANCEL:
		return "cancel";
	default:
		return NULL;
	}
}

int ipc_takeover_from_string(const char *s)
{
	for (int t = IPC_TAKEOVER_PAUSE; t <= IPC_TAKEOVER_CANCEL; t++)
		if (s && strcmp(s, ipc_takeover_to_string((enum ipc_takeover)t)) == 0)
			return t;
	return -EINVAL;
}

const char *ipc_history_to_string(enum ipc_history h)
{
	switch (h) {
	case IPC_HISTORY_PERSISTENT:
		return "persistent";
	case IPC_HISTORY_WINDOW:
		return "window";
	case IPC_HISTORY_ROLLING:
		return "rolling";
	default:
		return NULL;
	}
}

int ipc_history_from_string(const char *s)
{
	if (s && strcmp(s, "persistent") == 0)
		return IPC_HISTORY_PERSISTENT;
	if (s && strcmp(s, "window") == 0)
		return IPC_HISTORY_WINDOW;
	if (s && strcmp(s, "rolling") == 0)
		return IPC_HISTORY_ROLLING;
	return -EINVAL;
}

const char *ipc_policy_format_to_string(enum ipc_policy_format f)
{
	switch (f) {
	case IPC_POLICY_FORMAT_HOLO3:
		return "holo3";
	case IPC_POLICY_FORMAT_HOLO_NANO:
		return "holo-nano";
	default:
		return NULL;
	}
}

int ipc_policy_format_from_string(const char *s)
{
	if (s && strcmp(s, "holo3") == 0)
		return IPC_POLICY_FORMAT_HOLO3;
	if (s && strcmp(s, "holo-nano") == 0)
		return IPC_POLICY_FORMAT_HOLO_NANO;
	return -EINVAL;
}

/* A number lo..hi (lo itself excluded when lo_open) into *ret, or absent. */
static int get_real(const json_t *root, const char *name, double lo, bool lo_open, double hi, double *ret,
		    bool *ret_present, char *errbuf, size_t errlen)
{
	json_t *v = json_object_get(root, name);
	*ret_present = false;
	if (!v)
		return 0;
	if (!json_is_number(v))
		return ipc_error_at(errbuf, errlen, -EINVAL, name, "expected a number");
	double d = json_number_value(v);
	if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
		return ipc_error_at(errbuf, errlen, -EINVAL, name, "%g is out of range %s%g..%g", d,
				    lo_open ? "above " : "", lo, hi);
	*ret = d;
	*ret_present = true;
	return 0;
}

/* history, policy_format, window, max_tiles, temperature, top_p, seed, thinking,
 * thinking_tokens, stuck_warn, stuck_stop: instruction tasks only. */
static int parse_agent_options(const json_t *root, struct ipc_task_request *req, char *errbuf, size_t errlen)
{
	uint32_t u = 0;
	bool present = false; /* written by get_uint; gcc -O3 cannot see that through its errors */
	int r;

	json_t *h = json_object_get(root, "history");
	if (h) {
		r = json_is_string(h) ? ipc_history_from_string(json_string_value(h)) : -EINVAL;
		if (r < 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "history",
					    "expected \"rolling\", \"persistent\" or \"window\"");
		req->options.history = (enum ipc_history)r;
	}
	json_t *pf = json_object_get(root, "policy_format");
	if (pf) {
		r = json_is_string(pf) ? ipc_policy_format_from_string(json_string_value(pf)) : -EINVAL;
		if (r < 0)
			return ipc_error_at(errbuf, errlen, -EINVAL, "policy_format",
					    "expected \"holo3\" or \"holo-nano\"");
		req->options.policy_format = (enum ipc_policy_format)r;
	}
	if ((r = get_uint(root, "window", 1, IPC_MAX_HISTORY_WINDOW, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.window = u;
	if ((r = get_uint(root, "max_tiles", 1, IPC_MAX_TILES, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.max_tiles = u;
	if ((r = get_real(root, "temperature", 0.0, false, IPC_MAX_TEMPERATURE, &req->options.temperature,
			  &req->options.has_temperature, errbuf, errlen)) < 0)
		return r;
	if ((r = get_real(root, "top_p", 0.0, true, 1.0, &req->options.top_p, &req->options.has_top_p, errbuf,
			  errlen)) < 0)
		return r;
	if ((r = get_uint(root, "seed", 0, (uint32_t)IPC_MAX_SEED, &u, &present, errbuf, errlen)) < 0)
		return r;
	req->options.has_seed = present;
	if (present)
		req->options.seed = u;
	json_t *th = json_object_get(root, "thinking");
	if (th) {
		if (!json_is_boolean(th))
			return ipc_error_at(errbuf, errlen, -EINVAL, "thinking", "expected true or false");
		req->options.thinking = json_is_true(th) ? IPC_THINKING_ON : IPC_THINKING_OFF;
	}
	json_t *jf = json_object_get(root, "jump_forward");
	if (jf) {
		if (!json_is_boolean(jf))
			return ipc_error_at(errbuf, errlen, -EINVAL, "jump_forward", "expected true or false");
		req->options.jump_forward = json_is_true(jf) ? IPC_SWITCH_ON : IPC_SWITCH_OFF;
	}
	if ((r = get_uint(root, "thinking_tokens", 1, IPC_MAX_THINKING_TOKENS, &u, &present, errbuf,
			  errlen)) < 0)
		return r;
	if (present)
		req->options.thinking_tokens = u;
	if ((r = get_uint(root, "stuck_warn", 0, IPC_MAX_STUCK_STEPS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.stuck_warn = (int32_t)u;
	if ((r = get_uint(root, "stuck_stop", 0, IPC_MAX_STUCK_STEPS, &u, &present, errbuf, errlen)) < 0)
		return r;
	if (present)
		req->options.stuck_stop = (int32_t)u;
	return 0;
}

int ipc_task_request_parse(const char *json, size_t len, struct ipc_task_request **ret, char *errbuf,
			   size_t errlen)
{
	static const char *const script_members[] = {"script",	      "coords",	   "max_steps",
						     "max_seconds",   "settle_ms", "dry_run",
						     "replay_of",     "display",   "check",
						     "require_focus", "approve",   "takeover",
						     "ask_timeout"};
	static const char *const instruction_members[] = {"instruction",  "max_steps",	     "max_seconds",
							  "settle_ms",	  "dry_run",	     "history",
							  "window",	  "max_tiles",	     "display",
							  "temperature",  "top_p",	     "seed",
							  "thinking",	  "thinking_tokens", "policy_format",
							  "stuck_warn",	  "stuck_stop",	     "approve",
							  "jump_forward", "takeover",	     "ask_timeout"};
	struct ipc_task_request *req = NULL;
	json_t *root;
	int r;

	root = ipc_json_load(json, len, errbuf, errlen);
	if (!root)
		return -EINVAL;
	if (!json_is_object(root)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, NULL,
				 "expected an object with \"script\" or \"instruction\"");
		goto finish;
	}

	json_t *script = json_object_get(root, "script");
	json_t *instr = json_object_get(root, "instruction");
	if (!!script == !!instr) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, NULL,
				 "exactly one of \"script\" (a list of actions) or \"instruction\" "
				 "(text for the model) is required");
		goto finish;
	}

	req = xcalloc(1, sizeof(*req));
	req->kind = script ? IPC_TASK_KIND_SCRIPT : IPC_TASK_KIND_INSTRUCTION;
	if ((r = script ? check_members(root, script_members, ARRAY_SIZE(script_members), errbuf, errlen) :
			  check_members(root, instruction_members, ARRAY_SIZE(instruction_members), errbuf,
					errlen)) < 0)
		goto finish;
	if ((r = parse_options(root, req, errbuf, errlen)) < 0)
		goto finish;
	if (script) {
		if (!json_is_array(script) || json_array_size(script) == 0) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, "script",
					 "expected a non-empty array of actions");
			goto finish;
		}
		size_t n = json_array_size(script);
		if (n > IPC_MAX_SCRIPT_ACTIONS) {
			r = ipc_error_at(errbuf, errlen, -E2BIG, "script",
					 "%zu actions exceed the limit of %d", n, IPC_MAX_SCRIPT_ACTIONS);
			goto finish;
		}
		uint32_t id = 0;
		bool present;
		if ((r = get_uint(root, "replay_of", 1, INT32_MAX, &id, &present, errbuf, errlen)) < 0)
			goto finish;
		req->replay_of = present ? id : 0;
		if ((r = parse_check(root, req, n, errbuf, errlen)) < 0)
			goto finish;
		json_t *rf = json_object_get(root, "require_focus");
		if (rf && !json_is_boolean(rf)) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, "require_focus", "expected true or false");
			goto finish;
		}
		req->options.require_focus = rf && json_is_true(rf);
		req->actions = xcalloc(n, sizeof(*req->actions));
		for (size_t i = 0; i < n; i++) {
			char prefix[32];
			snprintf(prefix, sizeof(prefix), "script[%zu]", i);
			r = ipc_action_from_json(json_array_get(script, i), req->coords, prefix,
						 &req->actions[i], errbuf, errlen);
			if (r < 0)
				goto finish;
			req->n_actions++;
			if ((r = check_typeable(&req->actions[i], prefix, errbuf, errlen)) < 0)
				goto finish;
		}
	} else {
		if ((r = parse_agent_options(root, req, errbuf, errlen)) < 0)
			goto finish;
		if (!json_is_string(instr) || json_string_length(instr) == 0) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, "instruction",
					 "expected a non-empty string");
			goto finish;
		}
		size_t n = json_string_length(instr);
		if (n > IPC_MAX_INSTRUCTION_BYTES) {
			r = ipc_error_at(errbuf, errlen, -E2BIG, "instruction",
					 "%zu bytes exceed the limit of %d", n, IPC_MAX_INSTRUCTION_BYTES);
			goto finish;
		}
		if (memchr(json_string_value(instr), '\0', n)) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, "instruction", "contains a NUL character");
			goto finish;
		}
		req->instruction = xstrndup(json_string_value(instr), n);
	}

	*ret = req;
	req = NULL;
	r = 0;
finish:
	ipc_task_request_destroy(req);
	json_decref(root);
	return r;
}

int ipc_action_request_parse(const char *json, size_t len, struct ipc_task_request **ret, char *errbuf,
			     size_t errlen)
{
	static const char *const members[] = {"action",	   "coords",  "dry_run",
					      "settle_ms", "display", "require_focus"};
	struct ipc_task_request *req = NULL;
	json_t *root;
	int r;

	root = ipc_json_load(json, len, errbuf, errlen);
	if (!root)
		return -EINVAL;
	if (!json_is_object(root)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, NULL, "expected an object {\"action\": {...}}");
		goto finish;
	}
	if ((r = check_members(root, members, ARRAY_SIZE(members), errbuf, errlen)) < 0)
		goto finish;
	json_t *action = json_object_get(root, "action");
	if (!action) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, "action", "missing");
		goto finish;
	}
	req = xcalloc(1, sizeof(*req));
	req->kind = IPC_TASK_KIND_SCRIPT;
	if ((r = parse_options(root, req, errbuf, errlen)) < 0)
		goto finish;
	json_t *rf = json_object_get(root, "require_focus");
	if (rf && !json_is_boolean(rf)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, "require_focus", "expected true or false");
		goto finish;
	}
	req->options.require_focus = rf && json_is_true(rf);
	req->actions = xcalloc(1, sizeof(*req->actions));
	if ((r = ipc_action_from_json(action, req->coords, "action", &req->actions[0], errbuf, errlen)) < 0)
		goto finish;
	req->n_actions = 1;
	if ((r = check_typeable(&req->actions[0], "action", errbuf, errlen)) < 0)
		goto finish;

	*ret = req;
	req = NULL;
	r = 0;
finish:
	ipc_task_request_destroy(req);
	json_decref(root);
	return r;
}

static char *dump(json_t *o)
{
	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		errno = ENOMEM;
	return s;
}

char *ipc_task_request_to_json(const struct ipc_task_request *req)
{
	json_t *o = json_object();
	int r = 0;

	if (!o)
		return dump(NULL);
	if (req->kind == IPC_TASK_KIND_INSTRUCTION) {
		r |= json_object_set_new(o, "instruction",
					 json_string(req->instruction ? req->instruction : ""));
	} else {
		json_t *arr = json_array();
		r |= json_object_set_new(o, "script", arr);
		for (size_t i = 0; arr && i < req->n_actions; i++) {
			json_t *a = ipc_action_to_json_value(&req->actions[i]);
			r |= a ? json_array_append_new(arr, a) : -1;
		}
		r |= json_object_set_new(o, "coords", json_string(ipc_coords_to_string(req->coords)));
		if (req->replay_of)
			r |= json_object_set_new(o, "replay_of", json_integer(req->replay_of));
		if (req->check_steps) {
			json_t *steps = json_array();
			for (size_t i = 0; steps && i < req->n_actions; i++)
				r |= json_array_append_new(steps, json_integer(req->check_steps[i]));
			r |= json_object_set_new(o, "check",
						 json_pack("{s:f, s:o}", "threshold", req->check_threshold,
							   "steps", steps));
		}
		if (req->options.require_focus)
			r |= json_object_set_new(o, "require_focus", json_true());
	}
	if (req->options.max_steps)
		r |= json_object_set_new(o, "max_steps", json_integer(req->options.max_steps));
	if (req->options.max_seconds)
		r |= json_object_set_new(o, "max_seconds", json_integer(req->options.max_seconds));
	if (req->options.settle_ms >= 0)
		r |= json_object_set_new(o, "settle_ms", json_integer(req->options.settle_ms));
	r |= json_object_set_new(o, "dry_run", json_boolean(req->options.dry_run));
	if (req->options.approve != IPC_APPROVE_DEFAULT)
		r |= json_object_set_new(o, "approve",
					 json_string(ipc_approve_to_string(req->options.approve)));
	if (req->options.ask_timeout)
		r |= json_object_set_new(o, "ask_timeout", json_integer(req->options.ask_timeout));
	if (req->options.takeover != IPC_TAKEOVER_DEFAULT)
		r |= json_object_set_new(o, "takeover",
					 json_string(ipc_takeover_to_string(req->options.takeover)));
	if (req->options.display)
		r |= json_object_set_new(o, "display", json_string(req->options.display));
	if (req->options.history != IPC_HISTORY_DEFAULT)
		r |= json_object_set_new(o, "history",
					 json_string(ipc_history_to_string(req->options.history)));
	if (req->options.policy_format != IPC_POLICY_FORMAT_DEFAULT)
		r |= json_object_set_new(o, "policy_format",
					 json_string(ipc_policy_format_to_string(req->options.policy_format)));
	if (req->options.window)
		r |= json_object_set_new(o, "window", json_integer(req->options.window));
	if (req->options.max_tiles)
		r |= json_object_set_new(o, "max_tiles", json_integer(req->options.max_tiles));
	if (req->options.has_temperature)
		r |= json_object_set_new(o, "temperature", json_real(req->options.temperature));
	if (req->options.has_top_p)
		r |= json_object_set_new(o, "top_p", json_real(req->options.top_p));
	if (req->options.has_seed)
		r |= json_object_set_new(o, "seed", json_integer(req->options.seed));
	if (req->options.thinking != IPC_THINKING_DEFAULT)
		r |= json_object_set_new(o, "thinking",
					 json_boolean(req->options.thinking == IPC_THINKING_ON));
	if (req->options.jump_forward != IPC_SWITCH_DEFAULT)
		r |= json_object_set_new(o, "jump_forward",
					 json_boolean(req->options.jump_forward == IPC_SWITCH_ON));
	if (req->options.thinking_tokens)
		r |= json_object_set_new(o, "thinking_tokens", json_integer(req->options.thinking_tokens));
	if (req->options.stuck_warn >= 0)
		r |= json_object_set_new(o, "stuck_warn", json_integer(req->options.stuck_warn));
	if (req->options.stuck_stop >= 0)
		r |= json_object_set_new(o, "stuck_stop", json_integer(req->options.stuck_stop));
	if (r) {
		json_decref(o);
		return dump(NULL);
	}
	return dump(o);
}

char *ipc_action_request_to_json(const struct ipc_action *a, enum ipc_coords coords, bool dry_run)
{
	json_t *action = ipc_action_to_json_value(a);
	if (!action) {
		errno = EINVAL;
		return NULL;
	}
	return dump(json_pack("{s:o, s:s, s:b}", "action", action, "coords", ipc_coords_to_string(coords),
			      "dry_run", dry_run));
}

int ipc_answer_parse(const char *json, size_t len, const char *member, bool required, char **ret,
		     char *errbuf, size_t errlen)
{
	json_t *root = NULL;
	char *text = NULL;
	int r = 0;

	if (len == 0 && !required) {
		*ret = NULL;
		return 0;
	}
	root = ipc_json_load(json, len, errbuf, errlen);
	if (!root)
		return -EINVAL;
	if (!json_is_object(root)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, NULL, "expected an object {\"%s\": \"...\"}",
				 member);
		goto finish;
	}
	const char *const members[] = {member};
	if ((r = check_members(root, members, 1, errbuf, errlen)) < 0)
		goto finish;
	json_t *v = json_object_get(root, member);
	if (!v) {
		if (required)
			r = ipc_error_at(errbuf, errlen, -EINVAL, member, "missing");
		goto finish;
	}
	if (!json_is_string(v)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, member, "expected a string");
		goto finish;
	}
	size_t n = json_string_length(v);
	if (memchr(json_string_value(v), '\0', n)) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, member, "contains a NUL character");
		goto finish;
	}
	if (n > IPC_MAX_REPLY_BYTES) {
		r = ipc_error_at(errbuf, errlen, -E2BIG, member, "%zu bytes exceed the limit of %d", n,
				 IPC_MAX_REPLY_BYTES);
		goto finish;
	}
	if (required && n == 0) {
		r = ipc_error_at(errbuf, errlen, -EINVAL, member, "empty");
		goto finish;
	}
	text = xstrndup(json_string_value(v), n);
finish:
	json_decref(root);
	if (r >= 0)
		*ret = text;
	return r;
}
