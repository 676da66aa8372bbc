/* The approval rules and their matcher (approval.h). */
#include "approval.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common.h"
#include "keys.h"

struct combo {
	uint32_t keysyms[KEYS_MAX_PER_COMBO];
	size_t n;
	char text[APPROVAL_MAX_NAME_BYTES];
};

struct approval_rules {
	struct combo hotkeys[APPROVAL_MAX_RULES];
	size_t n_hotkeys;
	char terminals[APPROVAL_MAX_RULES][APPROVAL_MAX_NAME_BYTES];
	size_t n_terminals;
	bool tools[IPC_TOOL_COUNT_];
	struct ipc_window_matcher *windows[APPROVAL_MAX_RULES];
	char window_text[APPROVAL_MAX_RULES][IPC_MAX_MATCH_BYTES * 3 + 64];
	size_t n_windows;
};

/* The defaults: the hotkeys that close or kill (a window, a tab, an application, the session),
 * the common X terminal emulators' classes, and launch (a program of the model's choosing). */
static const char *const default_hotkeys[] = {"alt+f4", "ctrl+alt+delete", "ctrl+w", "ctrl+q"};
static const char *const default_terminals[] = {
	"xterm",
	"uxterm",
	"rxvt",
	"urxvt",
	"gnome-terminal",
	"gnome-terminal-server",
	"konsole",
	"xfce4-terminal",
	"lxterminal",
	"mate-terminal",
	"terminator",
	"tilix",
	"alacritty",
	"kitty",
	"foot",
	"wezterm",
	"st",
	"st-256color",
	"sakura",
	"terminology",
	"qterminal",
	"deepin-terminal",
	"kgx",
	"ptyxis",
	"ghostty",
};

/* Letters compare without case (a combination written "ctrl+W" is ctrl+w). */
static uint32_t fold(uint32_t sym)
{
	return sym >= 'A' && sym <= 'Z' ? sym + ('a' - 'A') : sym;
}

static int combo_parse(const char *text, struct combo *ret, char *err, size_t errlen)
{
	char names[KEYS_MAX_PER_COMBO][KEYS_MAX_NAME];
	struct combo c = {0};
	char why[160] = "";
	int n = keys_combo_split(text, names, KEYS_MAX_PER_COMBO, why, sizeof(why));
	if (n < 0) {
		snprintf(err, errlen, "'%s': %s", text, why);
		return n;
	}
	for (int i = 0; i < n; i++) {
		if (keys_lookup(names[i], &c.keysyms[c.n]) < 0) {
			snprintf(err, errlen, "'%s': unknown key name '%s'", text, names[i]);
			return -EINVAL;
		}
		c.keysyms[c.n] = fold(c.keysyms[c.n]);
		c.n++;
	}
	snprintf(c.text, sizeof(c.text), "%s", text);
	*ret = c;
	return 0;
}

static struct approval_rules *rules_new(void)
{
	struct approval_rules *r = xcalloc(1, sizeof(*r));
	char err[512];
	for (size_t i = 0; i < ARRAY_SIZE(default_hotkeys); i++) {
		int e = combo_parse(default_hotkeys[i], &r->hotkeys[r->n_hotkeys++], err, sizeof(err));
		assert(e == 0); /* the table above is ours */
		(void)e;
	}
	for (size_t i = 0; i < ARRAY_SIZE(default_terminals); i++)
		snprintf(r->terminals[r->n_terminals++], APPROVAL_MAX_NAME_BYTES, "%s", default_terminals[i]);
	r->tools[IPC_TOOL_LAUNCH] = true;
	return r;
}

struct approval_rules *approval_rules_default(void)
{
	return rules_new();
}

void approval_rules_destroy(struct approval_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_windows; i++)
		ipc_window_matcher_destroy(r->windows[i]);
	free(r);
}

/* A list member: an array of at most APPROVAL_MAX_RULES entries. */
static int list_of(const json_t *v, const char *member, char *err, size_t errlen)
{
	if (!json_is_array(v)) {
		snprintf(err, errlen, "%s: expected an array", member);
		return -EINVAL;
	}
	if (json_array_size(v) > APPROVAL_MAX_RULES) {
		snprintf(err, errlen, "%s: %zu entries exceed the limit of %d", member, json_array_size(v),
			 APPROVAL_MAX_RULES);
		return -E2BIG;
	}
	return 0;
}

static int string_at(const json_t *v, const char *member, size_t i, size_t max, const char **ret, char *err,
		     size_t errlen)
{
	if (!json_is_string(v) || json_string_length(v) == 0) {
		snprintf(err, errlen, "%s[%zu]: expected a non-empty string", member, i);
		return -EINVAL;
	}
	if (json_string_length(v) >= max) {
		snprintf(err, errlen, "%s[%zu]: %zu bytes exceed the limit of %zu", member, i,
			 json_string_length(v), max - 1);
		return -E2BIG;
	}
	*ret = json_string_value(v);
	return 0;
}

static int parse_rules(struct approval_rules *r, const json_t *root, char *err, size_t errlen)
{
	static const char *const members[] = {"hotkeys", "terminals", "tools", "windows"};
	const char *key, *s;
	json_t *v, *e;
	size_t i;
	int rc;

	if (!json_is_object(root)) {
		snprintf(err, errlen, "expected an object {\"hotkeys\": [...], ...}");
		return -EINVAL;
	}
	json_object_foreach((json_t *)root, key, v)
	{
		bool known = false;
		for (size_t k = 0; k < ARRAY_SIZE(members); k++)
			known |= strcmp(key, members[k]) == 0;
		if (!known) {
			snprintf(err, errlen,
				 "%s: unknown member (expected hotkeys, terminals, tools "
				 "or windows)",
				 key);
			return -EINVAL;
		}
		if ((rc = list_of(v, key, err, errlen)) < 0)
			return rc;
	}
	if ((v = json_object_get(root, "hotkeys"))) {
		r->n_hotkeys = 0;
		json_array_foreach(v, i, e)
		{
			char why[512];
			if ((rc = string_at(e, "hotkeys", i, APPROVAL_MAX_NAME_BYTES, &s, err, errlen)) < 0)
				return rc;
			if ((rc = combo_parse(s, &r->hotkeys[r->n_hotkeys], why, sizeof(why))) < 0) {
				snprintf(err, errlen, "hotkeys[%zu]: %s", i, why);
				return rc;
			}
			r->n_hotkeys++;
		}
	}
	if ((v = json_object_get(root, "terminals"))) {
		r->n_terminals = 0;
		json_array_foreach(v, i, e)
		{
			if ((rc = string_at(e, "terminals", i, APPROVAL_MAX_NAME_BYTES, &s, err, errlen)) < 0)
				return rc;
			snprintf(r->terminals[r->n_terminals++], APPROVAL_MAX_NAME_BYTES, "%s", s);
		}
	}
	if ((v = json_object_get(root, "tools"))) {
		memset(r->tools, 0, sizeof(r->tools));
		json_array_foreach(v, i, e)
		{
			if ((rc = string_at(e, "tools", i, APPROVAL_MAX_NAME_BYTES, &s, err, errlen)) < 0)
				return rc;
			int t = ipc_tool_from_string(s);
			if (t < 0 || !approval_acts((enum ipc_tool)t)) {
				snprintf(err, errlen,
					 "tools[%zu]: '%s' is not a tool that acts on the "
					 "desktop",
					 i, s);
				return -EINVAL;
			}
			r->tools[t] = true;
		}
	}
	if ((v = json_object_get(root, "windows"))) {
		json_array_foreach(v, i, e)
		{
			static const char *const fields[] = {"title", "class", "instance"};
			struct ipc_window_match m = {0};
			const char *f;
			json_t *fv;
			if (!json_is_object(e)) {
				snprintf(err, errlen,
					 "windows[%zu]: expected an object {\"title\": "
					 "\"regex\", \"class\": ..., \"instance\": ...}",
					 i);
				return -EINVAL;
			}
			json_object_foreach(e, f, fv)
			{
				size_t k = 0;
				while (k < ARRAY_SIZE(fields) && strcmp(f, fields[k]) != 0)
					k++;
				if (k == ARRAY_SIZE(fields)) {
					snprintf(err, errlen,
						 "windows[%zu].%s: unknown member (expected "
						 "title, class or instance)",
						 i, f);
					return -EINVAL;
				}
				if (!json_is_string(fv) || json_string_length(fv) > IPC_MAX_MATCH_BYTES) {
					snprintf(err, errlen,
						 "windows[%zu].%s: expected a regex of at "
						 "most %d bytes",
						 i, f, IPC_MAX_MATCH_BYTES);
					return -EINVAL;
				}
				char **slot = k == 0 ? &m.title : k == 1 ? &m.class_name : &m.instance;
				*slot = (char *)json_string_value(fv);
			}
			if (!m.title && !m.class_name && !m.instance) {
				snprintf(err, errlen, "windows[%zu]: needs title, class or instance", i);
				return -EINVAL;
			}
			char why[256] = "";
			struct ipc_window_matcher *mt = ipc_window_matcher_create(&m, why, sizeof(why));
			if (!mt) {
				snprintf(err, errlen, "windows[%zu].%s", i, why);
				return -errno;
			}
			ipc_window_match_describe(&m, r->window_text[r->n_windows], sizeof(r->window_text[0]));
			r->windows[r->n_windows++] = mt;
		}
	}
	return 0;
}

struct approval_rules *approval_rules_load(const char *path, char *err, size_t errlen)
{
	struct approval_rules *r = NULL;
	char why[1024] = "";
	json_error_t je;
	struct stat st;
	int rc;

	FILE *f = fopen(path, "rb");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot open the approval rules %s: %s", path, strerror(-rc));
		errno = -rc;
		return NULL;
	}
	if (fstat(fileno(f), &st) == 0 && st.st_size > APPROVAL_MAX_FILE_BYTES) {
		snprintf(err, errlen, "the approval rules %s: %lld bytes exceed the limit of %d", path,
			 (long long)st.st_size, APPROVAL_MAX_FILE_BYTES);
		fclose(f);
		errno = E2BIG;
		return NULL;
	}
	json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
	fclose(f);
	if (!root) {
		snprintf(err, errlen, "the approval rules %s: invalid JSON at line %d column %d: %s", path,
			 je.line, je.column, je.text);
		errno = EINVAL;
		return NULL;
	}
	r = rules_new();
	if ((rc = parse_rules(r, root, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "the approval rules %s: %s", path, why);
		approval_rules_destroy(r);
		json_decref(root);
		errno = -rc;
		return NULL;
	}
	json_decref(root);
	return r;
}

bool approval_acts(enum ipc_tool tool)
{
	switch (tool) {
	case IPC_TOOL_ANSWER:
	case IPC_TOOL_ASK_USER:
	case IPC_TOOL_UPDATE_PLAN:
	case IPC_TOOL_WAIT:
	case IPC_TOOL_WAIT_FOR:
		return false;
	default:
		return (unsigned)tool < IPC_TOOL_COUNT_;
	}
}

/* A key name's folded keysym; 0 when the name is unknown. */
static uint32_t sym_of(const char *name)
{
	uint32_t sym;
	return name && keys_lookup(name, &sym) == 0 ? fold(sym) : 0;
}

void approval_held_note(struct approval_held *h, const struct ipc_action *a)
{
	uint32_t sym = a->tool == IPC_TOOL_KEY_DOWN || a->tool == IPC_TOOL_KEY_UP ? sym_of(a->key) : 0;
	if (!sym)
		return;
	size_t i = 0;
	while (i < h->n && h->keysyms[i] != sym)
		i++;
	if (a->tool == IPC_TOOL_KEY_UP) {
		if (i < h->n)
			h->keysyms[i] = h->keysyms[--h->n];
	} else if (i == h->n) {
		if (h->n < APPROVAL_MAX_HELD_KEYS)
			h->keysyms[h->n++] = sym;
		else
			h->overflow = true;
	}
}

/* Whether the keys pressed together, with those held by earlier steps (may be NULL), include
 * every key of combination c. */
static bool presses(const struct combo *c, char *const *keys, size_t n, const char *extra,
		    const struct approval_held *held)
{
	uint32_t syms[KEYS_MAX_PER_COMBO + 1 + APPROVAL_MAX_HELD_KEYS];
	size_t m = 0;

	for (size_t i = 0; i < n && m < KEYS_MAX_PER_COMBO; i++)
		if ((syms[m] = sym_of(keys[i])))
			m++;
	if (extra && (syms[m] = sym_of(extra)))
		m++;
	for (size_t i = 0; held && i < held->n; i++)
		syms[m++] = held->keysyms[i];
	for (size_t k = 0; k < c->n; k++) {
		bool found = false;
		for (size_t i = 0; i < m && !found; i++)
			found = syms[i] == c->keysyms[k];
		if (!found)
			return false;
	}
	return c->n > 0;
}

static bool is_terminal(const struct approval_rules *r, const struct approval_window *w)
{
	for (size_t i = 0; w && i < r->n_terminals; i++)
		if ((w->class_name && strcasecmp(w->class_name, r->terminals[i]) == 0) ||
		    (w->instance && strcasecmp(w->instance, r->terminals[i]) == 0))
			return true;
	return false;
}

/* Whether action `a` presses every key of c, counting the keys `held` holds down (NULL:
 * none): a hotkey's keys, hold_and_tap_key's hold keys with one tap key, a key_down's key,
 * or one character (or the Enter) of a write. */
static bool action_presses(const struct combo *c, const struct ipc_action *a, const struct approval_held *held)
{
	switch (a->tool) {
	case IPC_TOOL_HOTKEY:
		return presses(c, a->keys, a->n_keys, NULL, held);
	case IPC_TOOL_HOLD_AND_TAP_KEY:
		for (size_t k = 0; k < a->n_tap_keys; k++)
			if (presses(c, a->hold_keys, a->n_hold_keys, a->tap_keys[k], held))
				return true;
		return false;
	case IPC_TOOL_KEY_DOWN:
		return held && presses(c, NULL, 0, a->key, held);
	case IPC_TOOL_WRITE:
		if (!held || !held->n || !a->content)
			return false;
		/* a character typed while ctrl is held is ctrl+that key */
		for (const char *p = a->content; *p; p++) {
			char key[2] = {*p, '\0'};
			if ((unsigned char)*p > ' ' && (unsigned char)*p < 0x7f &&
			    presses(c, NULL, 0, key, held))
				return true;
		}
		return a->press_enter && presses(c, NULL, 0, "enter", held);
	default:
		return false;
	}
}

static bool presses_keys(enum ipc_tool t)
{
	return t == IPC_TOOL_HOTKEY || t == IPC_TOOL_HOLD_AND_TAP_KEY || t == IPC_TOOL_KEY_DOWN ||
	       t == IPC_TOOL_WRITE;
}

bool approval_check(const struct approval_rules *r, enum ipc_approve mode, const struct ipc_action *a,
		    const struct approval_window *w, const struct approval_held *held, char *why,
		    size_t whylen)
{
	const char *tool = ipc_tool_to_string(a->tool);

	if (mode == IPC_APPROVE_NONE || mode == IPC_APPROVE_DEFAULT || !approval_acts(a->tool))
		return false;
	if (mode == IPC_APPROVE_ALL) {
		snprintf(why, whylen, "--approve all holds every action");
		return true;
	}
	if (r->tools[a->tool]) {
		snprintf(why, whylen, "%s is in the approval rules' tools", tool);
		return true;
	}
	if (held && held->overflow && presses_keys(a->tool)) {
		snprintf(why, whylen,
			 "%s presses keys while more than %d keys are held down by "
			 "earlier steps",
			 tool, APPROVAL_MAX_HELD_KEYS);
		return true;
	}
	for (size_t i = 0; i < r->n_hotkeys; i++) {
		const struct combo *c = &r->hotkeys[i];
		if (action_presses(c, a, NULL)) {
			snprintf(why, whylen, "%s presses %s, one of the approval rules' hotkeys", tool,
				 c->text);
			return true;
		}
		if (held && held->n && action_presses(c, a, held)) {
			snprintf(why, whylen,
				 "%s presses %s with the key(s) held down by an earlier "
				 "key_down, one of the approval rules' hotkeys",
				 tool, c->text);
			return true;
		}
	}
	if (a->tool == IPC_TOOL_WRITE && is_terminal(r, w)) {
		snprintf(why, whylen, "write types into a terminal (window class %s)",
			 w->class_name && w->class_name[0] ? w->class_name : w->instance);
		return true;
	}
	for (size_t i = 0; w && i < r->n_windows; i++)
		if (ipc_window_matcher_test(r->windows[i], w->title, w->class_name, w->instance)) {
			snprintf(why, whylen, "%s acts on a window the approval rules name (%s)", tool,
				 r->window_text[i]);
			return true;
		}
	return false;
}

char *approval_png_data_url(const unsigned char *png, size_t n)
{
	static const char prefix[] = "data:image/png;base64,";
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t out = sizeof(prefix) - 1 + (n + 2) / 3 * 4;
	char *s = xmalloc(out + 1), *p = s + sizeof(prefix) - 1;
	memcpy(s, prefix, sizeof(prefix) - 1);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)png[i] << 16 | (i + 1 < n ? (uint32_t)png[i + 1] << 8 : 0) |
			     (i + 2 < n ? png[i + 2] : 0);
		*p++ = b64[v >> 18 & 63];
		*p++ = b64[v >> 12 & 63];
		*p++ = i + 1 < n ? b64[v >> 6 & 63] : '=';
		*p++ = i + 2 < n ? b64[v & 63] : '=';
	}
	*p = '\0';
	return s;
}
