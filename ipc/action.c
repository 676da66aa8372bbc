/* The action vocabulary of agent.md 1.1: JSON <-> struct ipc_action, with validation that names
 * the offending field. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

static const char *const field_names[] = {
	"tool_name", "element", "x", "y", "x2", "y2", "button", "direction", "scroll_size",
	"content", "press_enter", "overwrite", "keys", "repeat_count", "key", "duration",
};

#define F_POINT (F_TOOL_NAME | F_ELEMENT | F_X | F_Y)

static const unsigned tool_fields[IPC_TOOL_COUNT_] = {
	[IPC_TOOL_CLICK] = F_POINT | F_BUTTON,
	[IPC_TOOL_DOUBLE_CLICK] = F_POINT,
	[IPC_TOOL_TRIPLE_CLICK] = F_POINT,
	[IPC_TOOL_MOVE] = F_POINT,
	[IPC_TOOL_DRAG] = F_POINT | F_X2 | F_Y2,
	[IPC_TOOL_SCROLL] = F_POINT | F_DIRECTION | F_SCROLL_SIZE,
	[IPC_TOOL_WRITE] = F_TOOL_NAME | F_CONTENT | F_PRESS_ENTER | F_OVERWRITE,
	[IPC_TOOL_HOTKEY] = F_TOOL_NAME | F_KEYS | F_REPEAT,
	[IPC_TOOL_KEY_DOWN] = F_TOOL_NAME | F_KEY,
	[IPC_TOOL_KEY_UP] = F_TOOL_NAME | F_KEY,
	[IPC_TOOL_WAIT] = F_TOOL_NAME | F_DURATION,
	[IPC_TOOL_ANSWER] = F_TOOL_NAME | F_CONTENT,
};

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

static int get_int(struct ctx *c, const char *name, bool required, int lo, int hi, int def,
		   int *ret)
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
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "expected an integer, got %s", json_is_real(v) ? "a fraction" :
				    json_is_string(v) ? "a string" : "another type");
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "%lld is out of range %d..%d", (long long)i, lo, hi);
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
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, at(c, name),
				    "expected true or false");
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
		return ipc_error_at(c->errbuf, c->errlen, -EINVAL, path,
				    "contains a NUL character");
	if (n > max)
		return ipc_error_at(c->errbuf, c->errlen, -E2BIG, path,
				    "%zu bytes exceed the limit of %zu", n, max);
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

static int check_key_name(struct ctx *c, const json_t *v, const char *path, char **ret)
{
	char *name = NULL;
	uint32_t keysym;
	int r = get_string_at(c, v, path, IPC_MAX_KEY_NAME_BYTES, &name);
	if (r < 0)
		return r;
	if (keys_lookup(name, &keysym) < 0) {
		r = ipc_error_at(c->errbuf, c->errlen, -EINVAL, path, "unknown key name '%s'", name);
		free(name);
		return r;
	}
	*ret = name;
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
		return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "tool_name"),
				    "expected a string");
	r = ipc_tool_from_string(json_string_value(tn));
	if (r < 0)
		return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, "tool_name"),
				    "unknown tool '%s' (expected one of click, double_click, "
				    "triple_click, move, drag, scroll, write, hotkey, key_down, "
				    "key_up, wait, answer)",
				    json_string_value(tn));
	a.tool = (enum ipc_tool)r;
	c.tool = ipc_tool_to_string(a.tool);

	const char *key;
	json_t *val;
	json_object_foreach((json_t *)obj, key, val) {
		int idx = field_index(key);
		if (idx < 0 || !(tool_fields[a.tool] & (1u << idx)))
			return ipc_error_at(errbuf, errlen, -EINVAL, at(&c, key),
					    "unknown field for tool '%s'", c.tool);
	}

	int cmax = coords == IPC_COORDS_MODEL ? IPC_MODEL_COORD_MAX : IPC_MAX_PIXEL_COORD;
	unsigned f = tool_fields[a.tool];

	if (f & F_ELEMENT && (r = get_string(&c, "element", false, IPC_MAX_ELEMENT_BYTES,
					     &a.element)) < 0)
		goto error;
	if (f & F_X && (r = get_int(&c, "x", true, 0, cmax, 0, &a.x)) < 0)
		goto error;
	if (f & F_Y && (r = get_int(&c, "y", true, 0, cmax, 0, &a.y)) < 0)
		goto error;
	if (f & F_X2 && (r = get_int(&c, "x2", true, 0, cmax, 0, &a.x2)) < 0)
		goto error;
	if (f & F_Y2 && (r = get_int(&c, "y2", true, 0, cmax, 0, &a.y2)) < 0)
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
	if (f & F_CONTENT &&
	    (r = get_string(&c, "content", true, IPC_MAX_CONTENT_BYTES, &a.content)) < 0)
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
	if (f & F_REPEAT && (r = get_int(&c, "repeat_count", false, 1, IPC_MAX_HOTKEY_REPEAT, 1,
					 &a.repeat_count)) < 0)
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
					 "%g seconds is out of range 0.001..%d", s,
					 IPC_MAX_WAIT_MS / 1000);
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

json_t *ipc_action_to_json_value(const struct ipc_action *a)
{
	const char *name = ipc_tool_to_string(a->tool);
	if (!name)
		return NULL;
	json_t *o = json_object();
	if (!o)
		return NULL;
	unsigned f = tool_fields[a->tool];
	int r = set_new(o, "tool_name", json_string(name));

	if (f & F_ELEMENT && a->element)
		r |= set_new(o, "element", json_string(a->element));
	if (f & F_X)
		r |= set_new(o, "x", json_integer(a->x));
	if (f & F_Y)
		r |= set_new(o, "y", json_integer(a->y));
	if (f & F_X2)
		r |= set_new(o, "x2", json_integer(a->x2));
	if (f & F_Y2)
		r |= set_new(o, "y2", json_integer(a->y2));
	if (f & F_BUTTON && (unsigned)a->button < ARRAY_SIZE(ipc_button_names))
		r |= set_new(o, "button", json_string(ipc_button_names[a->button]));
	if (f & F_DIRECTION && (unsigned)a->direction < ARRAY_SIZE(ipc_direction_names))
		r |= set_new(o, "direction", json_string(ipc_direction_names[a->direction]));
	if (f & F_SCROLL_SIZE)
		r |= set_new(o, "scroll_size", json_integer(a->scroll_size));
	if (f & F_CONTENT)
		r |= set_new(o, "content", json_string(a->content ? a->content : ""));
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
