/* The action vocabulary of agent.md 1.1: JSON <-> struct ipc_action, with validation that names
 * the offending field. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common.h"
#include "json-internal.h"
#include "keys.h"

int ipc_error_at(char *errbuf, size_t errlen, int err, const char *path, const char *format, ...)
{
	if (errbuf && errlen) {
		size_t off = 0;
		if (path && path[0]) {
			int n = snprintf(errbuf, errlen, "%s: ", path);
			off = n < 0 ? 0 : MIN((size_t)n, errlen - 1);
		}
		va_list ap;
		va_start(ap, format);
		vsnprintf(errbuf + off, errlen - off, format, ap);
		va_end(ap);
	}
	return err;
}

const char *ipc_field_path(char *buf, size_t size, const char *prefix, const char *name)
{
	if (prefix && prefix[0])
		snprintf(buf, size, "%s.%s", prefix, name);
	else
		snprintf(buf, size, "%s", name);
	return buf;
}

json_t *ipc_json_load(const char *json, size_t len, char *errbuf, size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		ipc_error_at(errbuf, errlen, -EINVAL, NULL, "invalid JSON at line %d column %d: %s",
			     jerr.line, jerr.column, jerr.text);
	return root;
}

/* Which members each tool accepts, as a bit set over this table. */
enum {
	F_TOOL_NAME = 1 << 0,
	F_ELEMENT = 1 << 1,
	F_X = 1 << 2,
	F_Y = 1 << 3,
	F_X2 = 1 << 4,
	F_Y2 = 1 << 5,
	F_BUTTON = 1 << 6,
	F_DIRECTION = 1 << 7,
	F_SCROLL_SIZE = 1 << 8,
	F_CONTENT = 1 << 9,
	F_PRESS_ENTER = 1 << 10,
	F_OVERWRITE = 1 << 11,
	F_KEYS = 1 << 12,
	F_REPEAT = 1 << 13,
	F_KEY = 1 << 14,
	F_DURATION = 1 << 15,
	F_TARGET = 1 << 16,
	F_TARGET2 = 1 << 17,
	F_COMMAND = 1 << 18,
	F_WAIT_WINDOW = 1 << 19,
	F_TIMEOUT = 1 << 20,
	F_WINDOW = 1 << 21,
	F_WINDOW_GONE = 1 << 22,
	F_FOCUS = 1 << 23,
	F_SCREEN_STABLE = 1 << 24,
	F_REGION_CHANGED = 1 << 25,
	F_HOLD_KEYS = 1 << 26,
	F_TAP_KEYS = 1 << 27,
	F_GOALS = 1 << 28,
	F_QUESTION = 1 << 29,
};

static const char *const field_names[] = {
	"tool_name",	 "element",	   "x",		  "y",	      "x2",	     "y2",
	"button",	 "direction",	   "scroll_size", "content",  "press_enter", "overwrite",
	"keys",		 "repeat_count",   "key",	  "duration", "target",	     "target2",
	"command",	 "wait_window",	   "timeout",	  "window",   "window_gone", "focus",
	"screen_stable", "region_changed", "hold_keys",	  "tap_keys", "goals",	     "question",
};

/* The members a tool accepts (the tool table's "fields"), as a bit set over field_names. */
static unsigned tool_fields(enum ipc_tool t)
{
	unsigned f = 0;
	for (size_t i = 0; i < ARRAY_SIZE(field_names); i++)
		if (ipc_tool_has_field(t, field_names[i]))
			f |= 1u << i;
	return f;
}

static const char *tool_name_at(size_t i, void *data)
{
	(void)data;
	return ipc_tool_to_string((enum ipc_tool)i);
}

static const char *field_name_at(size_t i, void *data)
{
	const enum ipc_tool *t = data;
	/* the members of this tool only: a known member of another tool is no suggestion */
	for (size_t k = 0; k < ARRAY_SIZE(field_names); k++)
		if (ipc_tool_has_field(*t, field_names[k]) && i-- == 0)
			return field_names[k];
	return NULL;
}

bool ipc_action_is_grounded(const struct ipc_action *a)
{
	return a->target || a->target2;
}

static int field_index(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(field_names); i++)
		if (strcmp(field_names[i], name) == 0)
			return (int)i;
	return -1;
}

struct ctx {
	const json_t *obj;
	const char *prefix;
	const char *tool;
	char *errbuf;
	size_t errlen;
	char path[256];
};

static const char *at(struct ctx *c, const char *name)
{
	return ipc_field_path(c->path, sizeof(c->path), c->prefix, name);
}

static int get_int(struct ctx *c, const char *name, bool required, int lo, int hi, int def, int *ret)
{
	json_t *v = json_object_get(c->obj, name);
	if (!v) {
		if (required)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
					    "missing (required for '%s')", c->tool);
		*ret = def;
		return 0;
	}
	if (!json_is_integer(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name), "expected an integer, got %s",
				    json_is_real(v)   ? "a fraction" :
				    json_is_string(v) ? "a string" :
							"another type");
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name), "%lld is out of range %d..%d",
				    (long long)i, lo, hi);
	*ret = (int)i;
	return 0;
}

static int get_bool(struct ctx *c, const char *name, bool *ret)
{
	json_t *v = json_object_get(c->obj, name);
	if (!v) {
		*ret = false;
		return 0;
	}
	if (!json_is_boolean(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name), "expected true or false");
	*ret = json_is_true(v);
	return 0;
}

/* A string member without NUL bytes and at most max bytes. *ret is NULL when absent and optional. */
static int get_string_at(struct ctx *c, const json_t *v, const char *path, size_t max, char **ret)
{
	if (!json_is_string(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "expected a string");
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (memchr(s, '\0', n))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "contains a NUL character");
	if (n > max)
		return ipc_error_at(c->errbuf, c->errlen, -E2BIG, path, "%zu bytes exceed the limit of %zu",
				    n, max);
	*ret = xstrndup(s, n);
	return 0;
}

static int get_string(struct ctx *c, const char *name, bool required, size_t max, char **ret)
{
	json_t *v = json_object_get(c->obj, name);
	if (!v) {
		if (required)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
					    "missing (required for '%s')", c->tool);
		*ret = NULL;
		return 0;
	}
	return get_string_at(c, v, at(c, name), max, ret);
}

static int get_enum(struct ctx *c, const char *name, const char *const *names, size_t n, int def,
		    bool required, int *ret)
{
	json_t *v = json_object_get(c->obj, name);
	if (!v) {
		if (required)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
					    "missing (required for '%s')", c->tool);
		*ret = def;
		return 0;
	}
	if (json_is_string(v))
		for (size_t i = 0; i < n; i++)
			if (strcmp(json_string_value(v), names[i]) == 0) {
				*ret = (int)i;
				return 0;
			}
	char expected[128] = "";
	for (size_t i = 0; i < n; i++) {
		strncat(expected, i ? ", " : "", sizeof(expected) - strlen(expected) - 1);
		strncat(expected, names[i], sizeof(expected) - strlen(expected) - 1);
	}
	if (!json_is_string(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "expected a string, one of %s", expected);
	return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
			    "unknown value '%s' (expected one of %s)", json_string_value(v), expected);
}

static int check_sub_members(struct ctx *c, const json_t *obj, const char *path, const char *const *names,
			     size_t n);

static const char *key_name_at(size_t i, void *data)
{
	(void)data;
	return keys_name(i);
}

static int check_key_name(struct ctx *c, const json_t *v, const char *path, char **ret)
{
	char *name = NULL;
	uint32_t keysym;
	int r = get_string_at(c, v, path, IPC_MAX_KEY_NAME_BYTES, &name);
	if (r < 0)
		return r;
	if (keys_lookup(name, &keysym) < 0) {
		const char *near = ipc_did_you_mean(name, key_name_at, NULL);
		r = ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "unknown key name '%s'%s%s%s", name,
				 near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "");
		free(name);
		return r;
	}
	*ret = name;
	return 0;
}

/* A key list member: a non-empty array of at most max names of the closed key list. */
static int get_key_list(struct ctx *c, const char *name, size_t max, char **keys, size_t *n)
{
	json_t *v = json_object_get(c->obj, name);
	char path[256];
	int r;

	snprintf(path, sizeof(path), "%s", at(c, name));
	if (!v)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "missing (required for '%s')",
				    c->tool);
	if (!json_is_array(v) || json_array_size(v) == 0)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
				    "expected a non-empty array of key names");
	if (json_array_size(v) > max)
		return ipc_error_at(c->errbuf, c->errlen, -E2BIG, path, "%zu keys exceed the limit of %zu",
				    json_array_size(v), max);
	for (size_t i = 0; i < json_array_size(v); i++) {
		char kp[300];
		snprintf(kp, sizeof(kp), "%s[%zu]", path, i);
		if ((r = check_key_name(c, json_array_get(v, i), kp, &keys[i])) < 0)
			return r;
		(*n)++;
	}
	return 0;
}

/* update_plan.goals: 1..IPC_MAX_PLAN_GOALS objects {"title": S, "status": todo|running|...}. */
static int get_goals(struct ctx *c, struct ipc_action *a)
{
	static const char *const names[] = {"title", "status"};
	json_t *v = json_object_get(c->obj, "goals");
	char path[256], sub[320];
	int r;

	snprintf(path, sizeof(path), "%s", at(c, "goals"));
	if (!v)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
				    "missing (required for 'update_plan')");
	if (!json_is_array(v) || json_array_size(v) == 0)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
				    "expected a non-empty array of goals such as "
				    "{\"title\": \"Open the settings\", \"status\": \"running\"}");
	if (json_array_size(v) > IPC_MAX_PLAN_GOALS)
		return ipc_error_at(c->errbuf, c->errlen, -E2BIG, path, "%zu goals exceed the limit of %d",
				    json_array_size(v), IPC_MAX_PLAN_GOALS);
	a->goals = xcalloc(json_array_size(v), sizeof(*a->goals));
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *g = json_array_get(v, i);
		char gp[300];
		snprintf(gp, sizeof(gp), "%s[%zu]", path, i);
		if (!json_is_object(g))
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, gp,
					    "expected a goal {\"title\": ..., \"status\": ...}");
		if ((r = check_sub_members(c, g, gp, names, ARRAY_SIZE(names))) < 0)
			return r;
		struct ipc_goal *goal = &a->goals[a->n_goals];
		json_t *t = json_object_get(g, "title"), *st = json_object_get(g, "status");
		snprintf(sub, sizeof(sub), "%s.title", gp);
		if (!t)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "missing");
		if ((r = get_string_at(c, t, sub, IPC_MAX_GOAL_TITLE_BYTES, &goal->title)) < 0)
			return r;
		a->n_goals++; /* an empty title is valid, as in the holo-nano schema */
		snprintf(sub, sizeof(sub), "%s.status", gp);
		if (!st)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "missing");
		r = json_is_string(st) ? ipc_goal_status_from_string(json_string_value(st)) : -EINVAL;
		if (r < 0)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub,
					    "expected one of todo, running, done, failed");
		goal->status = (enum ipc_goal_status)r;
	}
	return 0;
}

/* "timeout" in seconds (fractions allowed) into *ret_ms, def_ms when absent. */
static int get_timeout(struct ctx *c, uint32_t def_ms, uint32_t *ret_ms)
{
	json_t *v = json_object_get(c->obj, "timeout");
	if (!v) {
		*ret_ms = def_ms;
		return 0;
	}
	if (!json_is_number(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, "timeout"),
				    "expected a number of seconds");
	double s = json_number_value(v);
	double ms = round(s * 1000.0);
	if (!(ms >= 1.0 && ms <= IPC_MAX_WAIT_FOR_MS))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, "timeout"),
				    "%g seconds is out of range 0.001..%d", s, IPC_MAX_WAIT_FOR_MS / 1000);
	*ret_ms = (uint32_t)ms;
	return 0;
}

static void match_finish(struct ipc_window_match *m)
{
	free(m->title);
	free(m->class_name);
	free(m->instance);
	memset(m, 0, sizeof(*m));
}

/* The member names of a window match, in struct order. */
static const char *const match_names[] = {"title", "class", "instance"};

static char **match_slot(struct ipc_window_match *m, size_t i)
{
	return i == 0 ? &m->title : i == 1 ? &m->class_name : &m->instance;
}

/* Compiles one regex of a match; NULL with errbuf filled ("<path>: invalid regex ..."). */
static pcre2_code *compile_regex(const char *pattern, const char *path, char *errbuf, size_t errlen)
{
	int code;
	PCRE2_SIZE offset;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
				       PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &offset, NULL);
	if (!re) {
		PCRE2_UCHAR why[160];
		if (pcre2_get_error_message(code, why, sizeof(why)) < 0)
			snprintf((char *)why, sizeof(why), "error %d", code);
		ipc_error_at(errbuf, errlen, -EINVAL, path, "invalid regex at offset %zu: %s", (size_t)offset,
			     (const char *)why);
	}
	return re;
}

/* A window match object at `path`: {"title": RE, "class": RE, "instance": RE}, at least one. */
static int get_match(struct ctx *c, const json_t *v, const char *path, struct ipc_window_match *ret)
{
	struct ipc_window_match m = {0};
	char sub[320];
	const char *key;
	json_t *val;
	int r;

	if (!json_is_object(v) || json_object_size(v) == 0)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
				    "expected a window match such as {\"title\": \"Save\", "
				    "\"class\": \"Mousepad\", \"instance\": \"mousepad\"}");
	json_object_foreach((json_t *)v, key, val)
	{
		size_t i;
		for (i = 0; i < ARRAY_SIZE(match_names); i++)
			if (strcmp(key, match_names[i]) == 0)
				break;
		snprintf(sub, sizeof(sub), "%s.%s", path, key);
		if (i == ARRAY_SIZE(match_names)) {
			r = ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub,
					 "unknown field (expected title, class or instance)");
			goto error;
		}
		if ((r = get_string_at(c, val, sub, IPC_MAX_MATCH_BYTES, match_slot(&m, i))) < 0)
			goto error;
		pcre2_code *re = compile_regex(*match_slot(&m, i), sub, c->errbuf, c->errlen);
		if (!re) {
			r = -EINVAL;
			goto error;
		}
		pcre2_code_free(re);
	}
	*ret = m;
	return 0;
error:
	match_finish(&m);
	return r;
}

/* launch.command: a non-empty array of strings, the program first. */
static int get_command(struct ctx *c, struct ipc_action *a)
{
	json_t *v = json_object_get(c->obj, "command");
	char sub[320];
	int r;

	if (!v)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, "command"),
				    "missing (required for 'launch')");
	if (!json_is_array(v) || json_array_size(v) == 0)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, "command"),
				    "expected a non-empty array: the program, then its arguments");
	if (json_array_size(v) > IPC_MAX_LAUNCH_ARGS)
		return ipc_error_at(c->errbuf, c->errlen, -E2BIG, at(c, "command"),
				    "%zu arguments exceed the limit of %d", json_array_size(v),
				    IPC_MAX_LAUNCH_ARGS);
	a->argv = xcalloc(json_array_size(v) + 1, sizeof(*a->argv));
	for (size_t i = 0; i < json_array_size(v); i++) {
		snprintf(sub, sizeof(sub), "%s[%zu]", at(c, "command"), i);
		if ((r = get_string_at(c, json_array_get(v, i), sub, IPC_MAX_LAUNCH_ARG_BYTES, &a->argv[i])) <
		    0)
			return r;
		a->argc++;
	}
	if (a->argv[0][0] == '\0')
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, "command"),
				    "the program name is empty");
	return 0;
}

/* A non-negative integer member of a nested object. */
static int get_sub_int(struct ctx *c, const json_t *obj, const char *path, const char *name, int lo, int hi,
		       int *ret)
{
	char sub[320];
	snprintf(sub, sizeof(sub), "%s.%s", path, name);
	json_t *v = json_object_get(obj, name);
	if (!v)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "missing");
	if (!json_is_integer(v))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "expected an integer");
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "%lld is out of range %d..%d",
				    (long long)i, lo, hi);
	*ret = (int)i;
	return 0;
}

/* Refuses members of a nested object other than `names`. */
static int check_sub_members(struct ctx *c, const json_t *obj, const char *path, const char *const *names,
			     size_t n)
{
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)obj, key, val)
	{
		size_t i;
		for (i = 0; i < n && strcmp(key, names[i]) != 0; i++)
			;
		if (i == n) {
			char sub[320];
			snprintf(sub, sizeof(sub), "%s.%s", path, key);
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, sub, "unknown field");
		}
	}
	return 0;
}

/* wait_for: exactly one condition member. */
static int get_wait_condition(struct ctx *c, struct ipc_action *a)
{
	int found = -1, r;
	for (size_t k = 0; k < IPC_N_WAIT_KIND_NAMES; k++) {
		if (!json_object_get(c->obj, ipc_wait_kind_names[k]))
			continue;
		if (found >= 0)
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, ipc_wait_kind_names[k]),
					    "one condition per wait_for step ('%s' is given too)",
					    ipc_wait_kind_names[found]);
		found = (int)k;
	}
	if (found < 0)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, c->prefix,
				    "wait_for needs one condition: window, window_gone, focus, "
				    "screen_stable or region_changed");
	a->wait_kind = (enum ipc_wait_kind)found;
	const char *name = ipc_wait_kind_names[found];
	char path[300];
	snprintf(path, sizeof(path), "%s", at(c, name));
	json_t *v = json_object_get(c->obj, name);
	switch (a->wait_kind) {
	case IPC_WAIT_WINDOW:
	case IPC_WAIT_WINDOW_GONE:
	case IPC_WAIT_FOCUS:
		if ((r = get_match(c, v, path, &a->match)) < 0)
			return r;
		a->has_match = true;
		return 0;
	case IPC_WAIT_SCREEN_STABLE: {
		static const char *const names[] = {"ms"};
		int ms;
		if (!json_is_object(v))
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "expected {\"ms\": N}");
		if ((r = check_sub_members(c, v, path, names, ARRAY_SIZE(names))) < 0 ||
		    (r = get_sub_int(c, v, path, "ms", IPC_MIN_STABLE_MS, IPC_MAX_STABLE_MS, &ms)) < 0)
			return r;
		a->stable_ms = (uint32_t)ms;
		return 0;
	}
	case IPC_WAIT_REGION_CHANGED: {
		static const char *const names[] = {"x", "y", "width", "height"};
		if (!json_is_object(v))
			return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
					    "expected {\"x\": X, \"y\": Y, \"width\": W, "
					    "\"height\": H} in pixels");
		if ((r = check_sub_members(c, v, path, names, ARRAY_SIZE(names))) < 0 ||
		    (r = get_sub_int(c, v, path, "x", 0, IPC_MAX_PIXEL_COORD, &a->rx)) < 0 ||
		    (r = get_sub_int(c, v, path, "y", 0, IPC_MAX_PIXEL_COORD, &a->ry)) < 0 ||
		    (r = get_sub_int(c, v, path, "width", 1, IPC_MAX_PIXEL_COORD, &a->rw)) < 0 ||
		    (r = get_sub_int(c, v, path, "height", 1, IPC_MAX_PIXEL_COORD, &a->rh)) < 0)
			return r;
		return 0;
	}
	}
	return -EINVAL;
}

/* A grounded point: "target" instead of x and y (or "target2" instead of x2 and y2). */
static int get_target(struct ctx *c, const char *name, const char *xn, const char *yn, char **ret)
{
	int r = get_string(c, name, false, IPC_MAX_TARGET_BYTES, ret);
	if (r < 0 || !*ret)
		return r;
	if ((*ret)[strspn(*ret, " \t\n")] == '\0')
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "expected a description of what to point at, such as "
				    "\"the Save button\"");
	if (json_object_get(c->obj, xn) || json_object_get(c->obj, yn))
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "give either '%s' or '%s' and '%s', not both", name, xn, yn);
	return 0;
}

int ipc_action_from_json(const json_t *obj, enum ipc_coords coords, const char *prefix,
			 struct ipc_action *ret, char *errbuf, size_t errlen)
{
	struct ctx c = {.obj = obj, .prefix = prefix, .errbuf = errbuf, .errlen = errlen};
	struct ipc_action a = {0};
	int r, v = 0;

	if (!json_is_object(obj))
		return ipc_error_at(errbuf, errlen, -EINVAL, prefix,
				    "expected an action object such as {\"tool_name\": \"click\", ...}");

	json_t *tn = json_object_get(obj, "tool_name");
	if (!tn)
		return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "tool_name"), "missing");
	if (!json_is_string(tn))
		return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "tool_name"), "expected a string");
	r = ipc_tool_from_string(json_string_value(tn));
	if (r < 0) {
		char expected[512] = "", hint[96] = "";
		for (size_t t = 0; t < IPC_TOOL_COUNT_; t++)
			snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s%s",
				 t ? ", " : "", ipc_tool_to_string((enum ipc_tool)t));
		const char *near = ipc_did_you_mean(json_string_value(tn), tool_name_at, NULL);
		if (near)
			snprintf(hint, sizeof(hint), ": did you mean '%s'?", near);
		return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "tool_name"),
				    "unknown tool '%s'%s (expected one of %s)", json_string_value(tn), hint,
				    expected);
	}
	a.tool = (enum ipc_tool)r;
	c.tool = ipc_tool_to_string(a.tool);

	const char *key;
	json_t *val;
	json_object_foreach((json_t *)obj, key, val)
	{
		int idx = field_index(key);
		if (idx < 0 || !(tool_fields(a.tool) & (1u << idx))) {
			const char *near = ipc_did_you_mean(key, field_name_at, &a.tool);
			return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, key),
					    "unknown field for tool '%s'%s%s%s", c.tool,
					    near ? ": did you mean '" : "", near ? near : "",
					    near ? "'?" : "");
		}
	}

	int cmax = coords == IPC_COORDS_MODEL ? IPC_MODEL_COORD_MAX : IPC_MAX_PIXEL_COORD;
	unsigned f = tool_fields(a.tool);

	if (f & F_ELEMENT && (r = get_string(&c, "element", false, IPC_MAX_ELEMENT_BYTES, &a.element)) < 0)
		goto error;
	if (f & F_TARGET && (r = get_target(&c, "target", "x", "y", &a.target)) < 0)
		goto error;
	if (f & F_TARGET2 && (r = get_target(&c, "target2", "x2", "y2", &a.target2)) < 0)
		goto error;
	if (a.tool == IPC_TOOL_DRAG && !a.target != !a.target2) {
		/* One coordinate space per step: a located point is in model space. */
		r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, a.target ? "target2" : "target"),
				 "missing: a drag takes both ends as targets or both as x/y");
		goto error;
	}
	if (f & F_X && (r = get_int(&c, "x", !a.target, 0, cmax, 0, &a.x)) < 0)
		goto error;
	if (f & F_Y && (r = get_int(&c, "y", !a.target, 0, cmax, 0, &a.y)) < 0)
		goto error;
	if (f & F_X2 && (r = get_int(&c, "x2", !a.target2, 0, cmax, 0, &a.x2)) < 0)
		goto error;
	if (f & F_Y2 && (r = get_int(&c, "y2", !a.target2, 0, cmax, 0, &a.y2)) < 0)
		goto error;
	if (f & F_COMMAND && (r = get_command(&c, &a)) < 0)
		goto error;
	if (f & F_WAIT_WINDOW && json_object_get(obj, "wait_window")) {
		char path[300];
		snprintf(path, sizeof(path), "%s", at(&c, "wait_window"));
		if ((r = get_match(&c, json_object_get(obj, "wait_window"), path, &a.match)) < 0)
			goto error;
		a.has_match = true;
	}
	if (a.tool == IPC_TOOL_WAIT_FOR && (r = get_wait_condition(&c, &a)) < 0)
		goto error;
	if (a.tool == IPC_TOOL_ACTIVATE) {
		json_t *w = json_object_get(obj, "window");
		char path[300];
		snprintf(path, sizeof(path), "%s", at(&c, "window"));
		if (!w) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, path, "missing (required for 'activate')");
			goto error;
		}
		if ((r = get_match(&c, w, path, &a.match)) < 0)
			goto error;
		a.has_match = true;
	}
	if (f & F_TIMEOUT && (r = get_timeout(&c, IPC_DEFAULT_WAIT_FOR_MS, &a.timeout_ms)) < 0)
		goto error;
	if (f & F_BUTTON) {
		if ((r = get_enum(&c, "button", ipc_button_names, ARRAY_SIZE(ipc_button_names),
				  IPC_BUTTON_LEFT, false, &v)) < 0)
			goto error;
		a.button = (enum ipc_button)v;
	}
	if (f & F_DIRECTION) {
		if ((r = get_enum(&c, "direction", ipc_direction_names, ARRAY_SIZE(ipc_direction_names), 0,
				  true, &v)) < 0)
			goto error;
		a.direction = (enum ipc_direction)v;
	}
	if (f & F_SCROLL_SIZE && (r = get_int(&c, "scroll_size", false, 1, IPC_MAX_SCROLL_SIZE,
					      IPC_DEFAULT_SCROLL_SIZE, &a.scroll_size)) < 0)
		goto error;
	if (f & F_CONTENT && (r = get_string(&c, "content", true, IPC_MAX_CONTENT_BYTES, &a.content)) < 0)
		goto error;
	if (f & F_QUESTION && (r = get_string(&c, "question", true, IPC_MAX_QUESTION_BYTES, &a.content)) < 0)
		goto error;
	if (f & F_PRESS_ENTER && (r = get_bool(&c, "press_enter", &a.press_enter)) < 0)
		goto error;
	if (f & F_OVERWRITE && (r = get_bool(&c, "overwrite", &a.overwrite)) < 0)
		goto error;
	if (f & F_KEYS) {
		json_t *keys = json_object_get(obj, "keys");
		if (!keys) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "keys"),
					 "missing (required for 'hotkey')");
			goto error;
		}
		if (!json_is_array(keys) || json_array_size(keys) == 0) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "keys"),
					 "expected a non-empty array of key names");
			goto error;
		}
		if (json_array_size(keys) > IPC_MAX_HOTKEY_KEYS) {
			r = ipc_error_at(errbuf, errlen, -E2BIG, at(&c, "keys"),
					 "%zu keys exceed the limit of %d", json_array_size(keys),
					 IPC_MAX_HOTKEY_KEYS);
			goto error;
		}
		for (size_t i = 0; i < json_array_size(keys); i++) {
			char kp[300];
			snprintf(kp, sizeof(kp), "%s[%zu]", at(&c, "keys"), i);
			if ((r = check_key_name(&c, json_array_get(keys, i), kp, &a.keys[i])) < 0)
				goto error;
			a.n_keys++;
		}
	}
	if (f & F_HOLD_KEYS &&
	    (r = get_key_list(&c, "hold_keys", IPC_MAX_HOLD_KEYS, a.hold_keys, &a.n_hold_keys)) < 0)
		goto error;
	if (f & F_TAP_KEYS &&
	    (r = get_key_list(&c, "tap_keys", IPC_MAX_TAP_KEYS, a.tap_keys, &a.n_tap_keys)) < 0)
		goto error;
	if (f & F_GOALS && (r = get_goals(&c, &a)) < 0)
		goto error;
	if (f & F_REPEAT &&
	    (r = get_int(&c, "repeat_count", false, 1, IPC_MAX_HOTKEY_REPEAT, 1, &a.repeat_count)) < 0)
		goto error;
	if (f & F_KEY) {
		json_t *k = json_object_get(obj, "key");
		if (!k) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "key"),
					 "missing (required for '%s')", c.tool);
			goto error;
		}
		char kp[300];
		snprintf(kp, sizeof(kp), "%s", at(&c, "key"));
		if ((r = check_key_name(&c, k, kp, &a.key)) < 0)
			goto error;
	}
	if (f & F_DURATION) {
		json_t *d = json_object_get(obj, "duration");
		if (!d) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "duration"),
					 "missing (required for 'wait')");
			goto error;
		}
		if (!json_is_number(d)) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "duration"),
					 "expected a number of seconds");
			goto error;
		}
		double s = json_number_value(d);
		double ms = round(s * 1000.0);
		if (!(ms >= 1.0 && ms <= IPC_MAX_WAIT_MS)) {
			r = ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "duration"),
					 "%g seconds is out of range 0.001..%d", s, IPC_MAX_WAIT_MS / 1000);
			goto error;
		}
		a.duration_ms = (uint32_t)ms;
	}

	*ret = a;
	return 0;

error:
	ipc_action_finish(&a);
	return r;
}

void ipc_action_finish(struct ipc_action *a)
{
	if (!a)
		return;
	free(a->element);
	free(a->content);
	for (size_t i = 0; i < a->n_keys; i++)
		free(a->keys[i]);
	free(a->key);
	for (size_t i = 0; i < a->n_hold_keys; i++)
		free(a->hold_keys[i]);
	for (size_t i = 0; i < a->n_tap_keys; i++)
		free(a->tap_keys[i]);
	for (size_t i = 0; i < a->n_goals; i++)
		free(a->goals[i].title);
	free(a->goals);
	free(a->target);
	free(a->target2);
	for (size_t i = 0; i < a->argc; i++)
		free(a->argv[i]);
	free(a->argv);
	match_finish(&a->match);
	memset(a, 0, sizeof(*a));
}

int ipc_action_parse(const char *json, size_t len, enum ipc_coords coords, struct ipc_action *ret,
		     char *errbuf, size_t errlen)
{
	json_t *root = ipc_json_load(json, len, errbuf, errlen);
	if (!root)
		return -EINVAL;
	int r = ipc_action_from_json(root, coords, "", ret, errbuf, errlen);
	json_decref(root);
	return r;
}

static int set_new(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

static json_t *match_to_json(const struct ipc_window_match *m)
{
	json_t *o = json_object();
	int r = o ? 0 : -1;
	for (size_t i = 0; o && i < ARRAY_SIZE(match_names); i++) {
		const char *v = *match_slot((struct ipc_window_match *)m, i);
		if (v)
			r |= set_new(o, match_names[i], json_string(v));
	}
	if (r != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ipc_action_to_json_value(const struct ipc_action *a)
{
	const char *name = ipc_tool_to_string(a->tool);
	if (!name)
		return NULL;
	json_t *o = json_object();
	if (!o)
		return NULL;
	unsigned f = tool_fields(a->tool);
	int r = set_new(o, "tool_name", json_string(name));

	if (f & F_ELEMENT && a->element)
		r |= set_new(o, "element", json_string(a->element));
	if (f & F_TARGET && a->target)
		r |= set_new(o, "target", json_string(a->target));
	else if (f & F_X) {
		r |= set_new(o, "x", json_integer(a->x));
		r |= set_new(o, "y", json_integer(a->y));
	}
	if (f & F_TARGET2 && a->target2)
		r |= set_new(o, "target2", json_string(a->target2));
	else if (f & F_X2) {
		r |= set_new(o, "x2", json_integer(a->x2));
		r |= set_new(o, "y2", json_integer(a->y2));
	}
	if (f & F_COMMAND) {
		json_t *arr = json_array();
		r |= set_new(o, "command", arr);
		for (size_t i = 0; arr && i < a->argc; i++)
			r |= json_array_append_new(arr, json_string(a->argv[i]));
	}
	if ((f & (F_WAIT_WINDOW | F_WINDOW)) && a->has_match) {
		const char *member = a->tool == IPC_TOOL_LAUNCH	  ? "wait_window" :
				     a->tool == IPC_TOOL_WAIT_FOR ? ipc_wait_kind_to_string(a->wait_kind) :
								    "window";
		r |= set_new(o, member, match_to_json(&a->match));
	}
	if (a->tool == IPC_TOOL_WAIT_FOR && a->wait_kind == IPC_WAIT_SCREEN_STABLE)
		r |= set_new(o, "screen_stable", json_pack("{s:I}", "ms", (json_int_t)a->stable_ms));
	if (a->tool == IPC_TOOL_WAIT_FOR && a->wait_kind == IPC_WAIT_REGION_CHANGED)
		r |= set_new(o, "region_changed",
			     json_pack("{s:i, s:i, s:i, s:i}", "x", a->rx, "y", a->ry, "width", a->rw,
				       "height", a->rh));
	if (f & F_TIMEOUT)
		r |= set_new(o, "timeout", json_real(a->timeout_ms / 1000.0));
	if (f & F_BUTTON && (unsigned)a->button < ARRAY_SIZE(ipc_button_names))
		r |= set_new(o, "button", json_string(ipc_button_names[a->button]));
	if (f & F_DIRECTION && (unsigned)a->direction < ARRAY_SIZE(ipc_direction_names))
		r |= set_new(o, "direction", json_string(ipc_direction_names[a->direction]));
	if (f & F_SCROLL_SIZE)
		r |= set_new(o, "scroll_size", json_integer(a->scroll_size));
	if (f & F_CONTENT)
		r |= set_new(o, "content", json_string(a->content ? a->content : ""));
	if (f & F_QUESTION)
		r |= set_new(o, "question", json_string(a->content ? a->content : ""));
	if (f & F_PRESS_ENTER)
		r |= set_new(o, "press_enter", json_boolean(a->press_enter));
	if (f & F_OVERWRITE)
		r |= set_new(o, "overwrite", json_boolean(a->overwrite));
	if (f & F_KEYS) {
		json_t *arr = json_array();
		r |= set_new(o, "keys", arr);
		for (size_t i = 0; arr && i < a->n_keys; i++)
			r |= json_array_append_new(arr, json_string(a->keys[i]));
	}
	if (f & F_HOLD_KEYS) {
		json_t *arr = json_array();
		r |= set_new(o, "hold_keys", arr);
		for (size_t i = 0; arr && i < a->n_hold_keys; i++)
			r |= json_array_append_new(arr, json_string(a->hold_keys[i]));
	}
	if (f & F_TAP_KEYS) {
		json_t *arr = json_array();
		r |= set_new(o, "tap_keys", arr);
		for (size_t i = 0; arr && i < a->n_tap_keys; i++)
			r |= json_array_append_new(arr, json_string(a->tap_keys[i]));
	}
	if (f & F_GOALS) {
		json_t *arr = json_array();
		r |= set_new(o, "goals", arr);
		for (size_t i = 0; arr && i < a->n_goals; i++) {
			const char *st = ipc_goal_status_to_string(a->goals[i].status);
			r |= st ? json_array_append_new(arr, json_pack("{s:s, s:s}", "title",
								       a->goals[i].title, "status", st)) :
				  -1;
		}
	}
	if (f & F_REPEAT)
		r |= set_new(o, "repeat_count", json_integer(a->repeat_count));
	if (f & F_KEY)
		r |= set_new(o, "key", json_string(a->key ? a->key : ""));
	if (f & F_DURATION)
		r |= set_new(o, "duration", json_real(a->duration_ms / 1000.0));
	if (r != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

char *ipc_action_to_json(const struct ipc_action *a)
{
	json_t *o = ipc_action_to_json_value(a);
	if (!o) {
		errno = a && ipc_tool_to_string(a->tool) ? ENOMEM : EINVAL;
		return NULL;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		errno = ENOMEM;
	return s;
}

/* ---- window matcher ------------------------------------------------------------------------ */

struct ipc_window_matcher {
	pcre2_code *re[3]; /* title, class, instance; NULL: not part of the match */
	pcre2_match_data *md;
};

void ipc_window_matcher_destroy(struct ipc_window_matcher *mt)
{
	if (!mt)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(mt->re); i++)
		pcre2_code_free(mt->re[i]);
	pcre2_match_data_free(mt->md);
	free(mt);
}

struct ipc_window_matcher *ipc_window_matcher_create(const struct ipc_window_match *m, char *errbuf,
						     size_t errlen)
{
	struct ipc_window_matcher *mt = xcalloc(1, sizeof(*mt));
	for (size_t i = 0; i < ARRAY_SIZE(match_names); i++) {
		const char *p = *match_slot((struct ipc_window_match *)m, i);
		if (!p)
			continue;
		mt->re[i] = compile_regex(p, match_names[i], errbuf, errlen);
		if (!mt->re[i]) {
			ipc_window_matcher_destroy(mt);
			errno = EINVAL;
			return NULL;
		}
	}
	mt->md = pcre2_match_data_create(1, NULL);
	if (!mt->md) {
		ipc_window_matcher_destroy(mt);
		errno = ENOMEM;
		return NULL;
	}
	return mt;
}

bool ipc_window_matcher_test(const struct ipc_window_matcher *mt, const char *title, const char *class_name,
			     const char *instance)
{
	const char *values[] = {title, class_name, instance};
	for (size_t i = 0; i < ARRAY_SIZE(mt->re); i++) {
		if (!mt->re[i])
			continue;
		const char *v = values[i] ? values[i] : "";
		if (pcre2_match(mt->re[i], (PCRE2_SPTR)v, strlen(v), 0, 0, mt->md, NULL) < 0)
			return false;
	}
	return true;
}

const char *ipc_window_match_describe(const struct ipc_window_match *m, char *buf, size_t size)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(match_names) && off < size; i++) {
		const char *p = *match_slot((struct ipc_window_match *)m, i);
		if (p) {
			int n = snprintf(buf + off, size - off, "%s%s ~ \"%s\"", off ? ", " : "",
					 match_names[i], p);
			off = n < 0 ? size : off + (size_t)n;
		}
	}
	return buf;
}
