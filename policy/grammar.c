/* The step grammar: a byte-level automaton over the canonical step layout (docs/policy.md).
 *
 * The schema is compiled into a small graph of nodes: tries of literal words (keys, tool names,
 * enum values, key names, `null`/`true`/`false`), string contents, bounded integers and the
 * hotkey list separator. The matcher state is a node plus a few counters, so a state is copied
 * by assignment and states inside long strings differ only in the remaining byte budget, which
 * is what lets the masker cache masks per state.
 *
 * Every prefix the automaton accepts can be completed into a whole step: strings only start an
 * escape or a UTF-8 sequence that fits their budget, integers only take a digit that still
 * leads to a value in range, and trie words are prefix-free. So constrained decoding never
 * reaches a state without an allowed byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "policy-internal.h"
#include "keys.h"

/* ---- the canonical layout ------------------------------------------------------------------- */

/* Which arguments each tool takes and in which order: the formats' views of ipc's tool table
 * (ipc_model_tool()). ipc's action parser is the judge of what a tool call means; tests/policy
 * checks that the views and the parser agree on every tool and argument. `element` is required
 * there (a model always describes its target). */
const struct ipc_tool_layout *policy_tool_layout(enum ipc_tool tool)
{
	const struct ipc_model_tool *t = ipc_model_tool(IPC_POLICY_FORMAT_HOLO3, (size_t)tool);
	return t && t->layout.n_args ? &t->layout : NULL;
}

/* Model-facing key names: what the system prompt lists and the grammar accepts, besides single
 * printable ASCII characters and f1..f24. Constraining key names to a closed list (instead of
 * any string checked after parsing) is what makes every constrained step valid: a free string
 * could spell a name x11 does not know. Each name is checked against keys_lookup() when a
 * grammar is created; the keys module's table stays the one mapping to keysyms. */
static const char *const key_names[] = {
	"enter",       "return",       "esc",	    "escape",	  "tab",       "space",	     "backspace",
	"delete",      "insert",       "home",	    "end",	  "pageup",    "pagedown",   "left",
	"right",       "up",	       "down",	    "ctrl",	  "control",   "shift",	     "alt",
	"altgr",       "cmd",	       "super",	    "win",	  "meta",      "capslock",   "numlock",
	"scrolllock",  "printscreen",  "pause",	    "menu",	  "minus",     "plus",	     "equal",
	"comma",       "period",       "slash",	    "backslash",  "semicolon", "apostrophe", "grave",
	"bracketleft", "bracketright", "arrowleft", "arrowright", "arrowup",   "arrowdown",  "volumeup",
	"volumedown",  "volumemute",   "playpause",
};

const char *policy_key_name(size_t i)
{
	return i < ARRAY_SIZE(key_names) ? key_names[i] : NULL;
}

bool policy_key_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 1)
		return name[0] >= 0x20 && name[0] < 0x7f;
	for (size_t i = 0; i < ARRAY_SIZE(key_names); i++)
		if (strcasecmp(name, key_names[i]) == 0)
			return true;
	if ((n == 2 || n == 3) && (name[0] == 'f' || name[0] == 'F') && name[1] >= '1' && name[1] <= '9' &&
	    (n == 2 || (name[2] >= '0' && name[2] <= '9')))
		return atoi(name + 1) <= 24;
	return false;
}

/* ---- the automaton ------------------------------------------------------------------------- */

enum {
	ESC_NONE,
	ESC_BACKSLASH,
	ESC_HEX1, /* ESC_HEX1..ESC_HEX4: \u and 0..3 hex digits read */
	ESC_HEX2,
	ESC_HEX3,
	ESC_HEX4,
	ESC_LOW_BACKSLASH, /* after a high surrogate: "\" of the low one */
	ESC_LOW_U,
	ESC_LOW1, /* ESC_LOW1..ESC_LOW4 */
	ESC_LOW2,
	ESC_LOW3,
	ESC_LOW4,
};

/* UTF-8 sub-states: what the next continuation byte may be and how many follow. */
enum {
	U8_NONE,
	U8_C1, /* 1 more, 80..BF */
	U8_C2, /* 2 more */
	U8_C3, /* 3 more */
	U8_E0, /* A0..BF, then 1 more */
	U8_ED, /* 80..9F, then 1 more */
	U8_F0, /* 90..BF, then 2 more */
	U8_F4, /* 80..8F, then 2 more */
};

static void enter(struct policy_matcher *m, uint32_t node)
{
	const struct gnode *n = &m->grammar->nodes[node];
	m->node = node;
	m->sub = n->kind == GNODE_TRIE ? n->root : 0;
	m->val = 0;
	m->len = 0;
	m->esc = ESC_NONE;
	m->utf8 = U8_NONE;
	if (!n->keeps_count)
		m->count = 0;
}

/* Whether some integer in lo..hi starts with the digits of v (v > 0, no leading zero). */
static bool int_viable(int64_t v, int64_t lo, int64_t hi)
{
	for (int64_t span = 1; v <= hi; v *= 10, span *= 10)
		if (v + span - 1 >= lo)
			return true;
	return false;
}

static bool string_step(struct policy_matcher *m, const struct gnode *n, uint8_t b)
{
	uint32_t max = n->max, len = m->len;

	switch (m->utf8) {
	case U8_NONE:
		break;
	case U8_C1:
	case U8_C2:
	case U8_C3:
		if (b < 0x80 || b > 0xbf)
			return false;
		m->utf8 = m->utf8 == U8_C3 ? U8_C2 : m->utf8 == U8_C2 ? U8_C1 : U8_NONE;
		m->len++;
		return true;
	case U8_E0:
	case U8_ED:
		if (m->utf8 == U8_E0 ? (b < 0xa0 || b > 0xbf) : (b < 0x80 || b > 0x9f))
			return false;
		m->utf8 = U8_C1;
		m->len++;
		return true;
	case U8_F0:
	case U8_F4:
		if (m->utf8 == U8_F0 ? (b < 0x90 || b > 0xbf) : (b < 0x80 || b > 0x8f))
			return false;
		m->utf8 = U8_C2;
		m->len++;
		return true;
	}

	switch (m->esc) {
	case ESC_NONE:
		if (b == '"') {
			enter(m, n->next);
			return true;
		}
		if (b == '\\') {
			if (len + 2 > max)
				return false;
			m->esc = ESC_BACKSLASH;
			m->len++;
			return true;
		}
		if (b < 0x20)
			return false;
		if (b < 0x80) {
			if (len + 1 > max)
				return false;
			m->len++;
			return true;
		}
		{
			uint8_t next;
			uint32_t need;
			if (b >= 0xc2 && b <= 0xdf)
				next = U8_C1, need = 2;
			else if (b == 0xe0)
				next = U8_E0, need = 3;
			else if (b == 0xed)
				next = U8_ED, need = 3;
			else if (b >= 0xe1 && b <= 0xef)
				next = U8_C2, need = 3;
			else if (b == 0xf0)
				next = U8_F0, need = 4;
			else if (b >= 0xf1 && b <= 0xf3)
				next = U8_C3, need = 4;
			else if (b == 0xf4)
				next = U8_F4, need = 4;
			else
				return false;
			if (len + need > max)
				return false;
			m->utf8 = next;
			m->len++;
			return true;
		}
	case ESC_BACKSLASH:
		if (b == 'u') {
			/* \uXXXX: 6 bytes from the backslash (len - 1). */
			if (len - 1 + 6 > max)
				return false;
			m->esc = ESC_HEX1;
			m->val = 0;
			m->len++;
			return true;
		}
		if (!strchr("\"\\/bfnrt", b) || b == 0)
			return false;
		m->esc = ESC_NONE;
		m->len++;
		return true;
	case ESC_HEX1:
	case ESC_HEX2:
	case ESC_HEX3:
	case ESC_HEX4: {
		int h = hex_digit(b);
		if (h < 0)
			return false;
		uint32_t v = m->val * 16 + (uint32_t)h;
		if (m->esc == ESC_HEX2) {
			/* Two digits say whether this is a surrogate: a high one needs its low pair
			 * (12 bytes from the backslash, at len - 3); a lone low one is invalid. */
			if (v >= 0xdc && v <= 0xdf)
				return false;
			if (v >= 0xd8 && v <= 0xdb && len - 3 + 12 > max)
				return false;
		}
		m->val = v;
		m->len++;
		if (m->esc != ESC_HEX4) {
			m->esc++;
			return true;
		}
		if (v == 0)
			return false; /* \u0000: ipc refuses strings with NUL */
		m->esc = v >= 0xd800 && v <= 0xdbff ? ESC_LOW_BACKSLASH : ESC_NONE;
		return true;
	}
	case ESC_LOW_BACKSLASH:
		if (b != '\\')
			return false;
		m->esc = ESC_LOW_U;
		m->len++;
		return true;
	case ESC_LOW_U:
		if (b != 'u')
			return false;
		m->esc = ESC_LOW1;
		m->len++;
		return true;
	case ESC_LOW1:
	case ESC_LOW2:
	case ESC_LOW3:
	case ESC_LOW4: {
		int h = hex_digit(b);
		if (h < 0)
			return false;
		if (m->esc == ESC_LOW1 && h != 0xd)
			return false;
		if (m->esc == ESC_LOW2 && h < 0xc)
			return false;
		m->len++;
		m->esc = m->esc == ESC_LOW4 ? ESC_NONE : m->esc + 1;
		return true;
	}
	}
	return false;
}

/* A think block's byte: valid UTF-8 without NUL, ended by the first "</think>". sub counts the
 * bytes of "</think>" matched so far (its bytes are distinct, so a mismatch restarts the match at
 * '<' or nothing); val = 1 once the block may only close. */
static bool think_step(struct policy_matcher *m, const struct gnode *n, uint8_t b)
{
	static const char close[] = POLICY_THINK_CLOSE;

	if (m->utf8 != U8_NONE) {
		bool ok;

		switch (m->utf8) {
		case U8_E0:
			ok = b >= 0xa0 && b <= 0xbf;
			break;
		case U8_ED:
			ok = b >= 0x80 && b <= 0x9f;
			break;
		case U8_F0:
			ok = b >= 0x90 && b <= 0xbf;
			break;
		case U8_F4:
			ok = b >= 0x80 && b <= 0x8f;
			break;
		default:
			ok = b >= 0x80 && b <= 0xbf;
		}
		if (!ok)
			return false;
		m->utf8 = m->utf8 == U8_C3 || m->utf8 == U8_F0 || m->utf8 == U8_F4 ? U8_C2 :
			  m->utf8 == U8_C1					   ? U8_NONE :
										     U8_C1;
		return true;
	}
	if (m->val) {
		if (b != (uint8_t)close[m->sub])
			return false;
	} else if (b == 0) {
		return false;
	}
	if (b == (uint8_t)close[m->sub]) {
		if (++m->sub == sizeof(close) - 1)
			enter(m, n->next);
		return true;
	}
	m->sub = b == (uint8_t)close[0];
	if (b < 0x80)
		return true;
	if (b >= 0xc2 && b <= 0xdf)
		m->utf8 = U8_C1;
	else if (b == 0xe0)
		m->utf8 = U8_E0;
	else if (b == 0xed)
		m->utf8 = U8_ED;
	else if (b >= 0xe1 && b <= 0xef)
		m->utf8 = U8_C2;
	else if (b == 0xf0)
		m->utf8 = U8_F0;
	else if (b >= 0xf1 && b <= 0xf3)
		m->utf8 = U8_C3;
	else if (b == 0xf4)
		m->utf8 = U8_F4;
	else
		return false;
	return true;
}

bool policy_grammar_step(struct policy_matcher *m, uint8_t b)
{
	const struct policy_grammar *g = m->grammar;
	for (;;) {
		const struct gnode *n = &g->nodes[m->node];
		switch (n->kind) {
		case GNODE_TRIE: {
			uint8_t c = n->fold_case && b >= 'A' && b <= 'Z' ? b + ('a' - 'A') : b;
			uint32_t child = g->trie[m->sub].first_child;
			while (child != GTRIE_NO_LEAF && g->trie[child].byte != c)
				child = g->trie[child].next_sibling;
			if (child == GTRIE_NO_LEAF)
				return false;
			uint32_t leaf = g->trie[child].leaf_next;
			if (leaf == GTRIE_NO_LEAF)
				m->sub = child;
			else
				enter(m, leaf == GNODE_DEFAULT ? n->next : leaf);
			return true;
		}
		case GNODE_STRING:
			return string_step(m, n, b);
		case GNODE_INT: {
			if (b >= '0' && b <= '9') {
				int64_t v = (int64_t)m->val * 10 + (b - '0');
				if (m->sub > 0 && m->val == 0)
					return false; /* leading zero */
				if (m->sub == 0 && b == '0' ? n->lo > 0 : !int_viable(v, n->lo, n->hi))
					return false;
				m->val = (uint32_t)v;
				m->sub++;
				return true;
			}
			if (m->sub == 0 || (int64_t)m->val < n->lo || (int64_t)m->val > n->hi)
				return false;
			enter(m, n->next);
			continue; /* the byte belongs to what follows the number */
		}
		case GNODE_KEYSEP:
			if (b == ']') {
				enter(m, n->next);
				return true;
			}
			if (b == ',' && m->count + 1u < n->max) {
				m->count++;
				enter(m, n->root);
				return true;
			}
			return false;
		case GNODE_THINK:
			return think_step(m, n, b);
		case GNODE_SPACE:
			if ((b == '\n' || b == ' ') && m->sub < n->max) {
				m->sub++;
				return true;
			}
			enter(m, n->next);
			continue; /* the byte starts what follows the gap */
		case GNODE_END:
			return false;
		}
		return false;
	}
}

void policy_matcher_init(struct policy_matcher *m, const struct policy_grammar *g)
{
	memset(m, 0, sizeof(*m));
	m->grammar = g;
	enter(m, g->start);
}

int policy_matcher_feed(struct policy_matcher *m, const void *bytes, size_t n)
{
	struct policy_matcher t = *m;
	const uint8_t *p = bytes;
	for (size_t i = 0; i < n; i++)
		if (!policy_grammar_step(&t, p[i]))
			return -EILSEQ;
	*m = t;
	return 0;
}

size_t policy_matcher_forced(const struct policy_matcher *m, uint8_t *buf, size_t cap)
{
	struct policy_matcher t = *m;
	size_t n = 0;

	while (n < cap) {
		struct policy_matcher only = t, probe;
		int allowed = 0, b1 = -1;
		/* every byte value: a choice as soon as a second one fits */
		for (int b = 0; b < 256 && allowed < 2; b++) {
			probe = t;
			if (policy_grammar_step(&probe, (uint8_t)b)) {
				allowed++;
				b1 = b;
				only = probe;
			}
		}
		if (allowed != 1)
			break;
		buf[n++] = (uint8_t)b1;
		t = only;
	}
	return n;
}

bool policy_matcher_is_complete(const struct policy_matcher *m)
{
	return m->grammar->nodes[m->node].kind == GNODE_END;
}

int policy_matcher_init_thinking(struct policy_matcher *m, const struct policy_grammar *g)
{
	if (!g || g->think == UINT32_MAX)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->grammar = g;
	enter(m, g->think);
	return 0;
}

bool policy_matcher_thinking(const struct policy_matcher *m)
{
	return m->grammar->nodes[m->node].kind == GNODE_THINK;
}

void policy_matcher_close_thinking(struct policy_matcher *m)
{
	if (policy_matcher_thinking(m))
		m->val = 1;
}

int policy_split_thinking(const char *text, size_t len, size_t *ret_think_len, size_t *ret_step)
{
	const size_t n = strlen(POLICY_THINK_CLOSE);
	size_t i, gap = 0;

	for (i = 0; i + n <= len; i++)
		if (memcmp(text + i, POLICY_THINK_CLOSE, n) == 0)
			break;
	if (i + n > len)
		return -EINVAL;
	while (gap < POLICY_THINK_MAX_GAP && i + n + gap < len &&
	       (text[i + n + gap] == '\n' || text[i + n + gap] == ' '))
		gap++;
	*ret_think_len = i;
	*ret_step = i + n + gap;
	return 0;
}

/* ---- building ------------------------------------------------------------------------------ */

struct builder {
	struct policy_grammar *g;
	size_t cap_nodes, cap_trie;
};

static uint32_t new_trie_node(struct builder *b, uint8_t byte)
{
	if (b->g->n_trie == b->cap_trie) {
		b->cap_trie = b->cap_trie ? 2 * b->cap_trie : 256;
		b->g->trie = xreallocarray(b->g->trie, b->cap_trie, sizeof(*b->g->trie));
	}
	b->g->trie[b->g->n_trie] = (struct gtrie_node){
		.first_child = GTRIE_NO_LEAF,
		.next_sibling = GTRIE_NO_LEAF,
		.leaf_next = GTRIE_NO_LEAF,
		.byte = byte,
	};
	return (uint32_t)b->g->n_trie++;
}

static uint32_t new_node(struct builder *b, struct gnode n)
{
	if (b->g->n_nodes == b->cap_nodes) {
		b->cap_nodes = b->cap_nodes ? 2 * b->cap_nodes : 64;
		b->g->nodes = xreallocarray(b->g->nodes, b->cap_nodes, sizeof(*b->g->nodes));
	}
	b->g->nodes[b->g->n_nodes] = n;
	return (uint32_t)b->g->n_nodes++;
}

/* Adds word (len bytes) to the trie at root, its leaf leading to `next`. -EINVAL when the
 * words would stop being prefix-free. */
static int trie_add(struct builder *b, uint32_t root, const char *word, size_t len, uint32_t next)
{
	uint32_t cur = root;
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)word[i];
		if (b->g->trie[cur].leaf_next != GTRIE_NO_LEAF)
			return -EINVAL;
		uint32_t child = b->g->trie[cur].first_child, last = GTRIE_NO_LEAF;
		while (child != GTRIE_NO_LEAF && b->g->trie[child].byte != c) {
			last = child;
			child = b->g->trie[child].next_sibling;
		}
		if (child == GTRIE_NO_LEAF) {
			child = new_trie_node(b, c);
			if (last == GTRIE_NO_LEAF)
				b->g->trie[cur].first_child = child;
			else
				b->g->trie[last].next_sibling = child;
		} else if (i + 1 == len) {
			return -EINVAL; /* word is a prefix of another, or a duplicate */
		}
		cur = child;
	}
	b->g->trie[cur].leaf_next = next;
	return 0;
}

static uint32_t trie_node(struct builder *b, uint32_t root, uint32_t next)
{
	return new_node(b, (struct gnode){.kind = GNODE_TRIE, .root = root, .next = next});
}

/* A node matching exactly `lit`, then `next`. */
static int literal(struct builder *b, const char *lit, uint32_t next, uint32_t *ret)
{
	uint32_t root = new_trie_node(b, 0);
	int r = trie_add(b, root, lit, strlen(lit), GNODE_DEFAULT);
	if (r < 0)
		return r;
	*ret = trie_node(b, root, next);
	return 0;
}

static uint32_t string_node(struct builder *b, uint32_t max, uint32_t next)
{
	return new_node(b, (struct gnode){.kind = GNODE_STRING, .max = max, .next = next});
}

/* The trie of quoted key names: "name" for the named keys, f1..f24 and every printable ASCII
 * character (escaped where JSON needs it), matched case-insensitively. */
static int key_name_trie(struct builder *b, uint32_t *ret_root)
{
	uint32_t root = new_trie_node(b, 0), keysym;
	char w[IPC_MAX_KEY_NAME_BYTES + 8];
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(key_names); i++) {
		if (keys_lookup(key_names[i], &keysym) < 0 || strlen(key_names[i]) > IPC_MAX_KEY_NAME_BYTES)
			return -EINVAL;
		snprintf(w, sizeof(w), "\"%s\"", key_names[i]);
		if ((r = trie_add(b, root, w, strlen(w), GNODE_DEFAULT)) < 0)
			return r;
	}
	for (int f = 1; f <= 24; f++) {
		char name[8];
		snprintf(name, sizeof(name), "f%d", f);
		if (keys_lookup(name, &keysym) < 0)
			return -EINVAL;
		snprintf(w, sizeof(w), "\"%s\"", name);
		if ((r = trie_add(b, root, w, strlen(w), GNODE_DEFAULT)) < 0)
			return r;
	}
	for (int c = 0x20; c < 0x7f; c++) {
		if (c >= 'A' && c <= 'Z')
			continue; /* folded onto a..z */
		char one[2] = {(char)c, 0};
		if (keys_lookup(one, &keysym) < 0)
			return -EINVAL;
		if (c == '"' || c == '\\')
			snprintf(w, sizeof(w), "\"\\%c\"", c);
		else
			snprintf(w, sizeof(w), "\"%c\"", c);
		if ((r = trie_add(b, root, w, strlen(w), GNODE_DEFAULT)) < 0)
			return r;
	}
	*ret_root = root;
	return 0;
}

/* The JSON spellings of ipc's enums, value 0 on until NULL. */
static const char *button_name(int i)
{
	return ipc_button_to_string((enum ipc_button)i);
}

static const char *direction_name(int i)
{
	return ipc_direction_to_string((enum ipc_direction)i);
}

static uint32_t enum_trie(struct builder *b, const char *(*name)(int), int *err)
{
	uint32_t root = new_trie_node(b, 0);
	char w[64];
	for (int i = 0; name(i) && !*err; i++) {
		snprintf(w, sizeof(w), "\"%s\"", name(i));
		*err = trie_add(b, root, w, strlen(w), GNODE_DEFAULT);
	}
	return root;
}

static const char *goal_status_name(int i)
{
	return ipc_goal_status_to_string((enum ipc_goal_status)i);
}

struct roots {
	uint32_t keys, button, direction, boolean, goal_status;
};

/* The node that reads the value of `arg` (after its `"name":`), continuing at `next`. Returns
 * the node and writes the opening bytes the key word must end with (a quote for strings, a
 * bracket for the key list). */
static uint32_t value_node(struct builder *b, const struct roots *rt, const struct ipc_tool_arg *arg,
			   uint32_t next, const char **ret_open)
{
	*ret_open = "";
	switch (arg->type) {
	case IPC_ARG_STRING:
		*ret_open = "\"";
		return string_node(b, arg->max, next);
	case IPC_ARG_INT:
		return new_node(b,
				(struct gnode){.kind = GNODE_INT, .lo = arg->lo, .hi = arg->hi, .next = next});
	case IPC_ARG_BOOL:
		return trie_node(b, rt->boolean, next);
	case IPC_ARG_BUTTON:
		return trie_node(b, rt->button, next);
	case IPC_ARG_DIRECTION:
		return trie_node(b, rt->direction, next);
	case IPC_ARG_KEY: {
		uint32_t t = trie_node(b, rt->keys, next);
		b->g->nodes[t].fold_case = true;
		return t;
	}
	case IPC_ARG_KEYS: {
		*ret_open = "[";
		uint32_t sep = new_node(b, (struct gnode){.kind = GNODE_KEYSEP,
							  .keeps_count = true,
							  .max = arg->hi > 0 ? (uint32_t)arg->hi :
									       IPC_MAX_HOTKEY_KEYS,
							  .next = next});
		uint32_t t = trie_node(b, rt->keys, sep);
		b->g->nodes[t].fold_case = true;
		b->g->nodes[t].keeps_count = true;
		b->g->nodes[sep].root = t;
		return t;
	}
	case IPC_ARG_GOALS: {
		/* [{"title":"...","status":"todo"},...]: the separator loops to the next goal's
		 * opening, every node in between keeping the count of goals. */
		*ret_open = "[";
		uint32_t sep = new_node(b, (struct gnode){.kind = GNODE_KEYSEP,
							  .keeps_count = true,
							  .max = IPC_MAX_PLAN_GOALS,
							  .next = next});
		uint32_t status = trie_node(b, rt->goal_status, sep);
		uint32_t status_key = trie_node(b, new_trie_node(b, 0), status);
		uint32_t title = string_node(b, IPC_MAX_GOAL_TITLE_BYTES, status_key);
		uint32_t open = trie_node(b, new_trie_node(b, 0), title);
		if (trie_add(b, b->g->nodes[status_key].root, ",\"status\":", 10, GNODE_DEFAULT) < 0 ||
		    trie_add(b, b->g->nodes[open].root, "{\"title\":\"", 10, GNODE_DEFAULT) < 0)
			return UINT32_MAX;
		b->g->nodes[status].keeps_count = b->g->nodes[status_key].keeps_count = true;
		b->g->nodes[title].keeps_count = b->g->nodes[open].keeps_count = true;
		b->g->nodes[sep].root = open;
		return open;
	}
	}
	return next;
}

/* The arguments of one tool: returns the node after the tool name's closing quote. Built back
 * to front: after[i] is the node after argument i's value (i = -1: after the tool name); it
 * offers `,"name":` of every argument that may come next (the following optional ones and the
 * first required one) and `}}` when nothing required is left. */
static int tool_nodes(struct builder *b, const struct roots *rt, const struct ipc_tool_layout *l,
		      uint32_t end, uint32_t *ret)
{
	uint32_t value[IPC_MAX_TOOL_ARGS], after[IPC_MAX_TOOL_ARGS + 1];
	const char *open[IPC_MAX_TOOL_ARGS];
	char w[64];
	int r;

	/* after[i + 1] is the node after argument i; after[0] follows the tool name. */
	for (size_t k = 0; k <= l->n_args; k++)
		after[k] = trie_node(b, new_trie_node(b, 0), end);
	for (size_t j = l->n_args; j-- > 0;)
		if ((value[j] = value_node(b, rt, &l->args[j], after[j + 1], &open[j])) == UINT32_MAX)
			return -EINVAL;
	for (size_t k = 0; k <= l->n_args; k++) {
		uint32_t root = b->g->nodes[after[k]].root;
		bool all_optional = true;
		for (size_t j = k; j < l->n_args; j++) {
			snprintf(w, sizeof(w), ",\"%s\":%s", l->args[j].name, open[j]);
			if ((r = trie_add(b, root, w, strlen(w), value[j])) < 0)
				return r;
			if (l->args[j].required) {
				all_optional = false;
				break;
			}
		}
		if (all_optional && (r = trie_add(b, root, "}}", 2, end)) < 0)
			return r;
	}
	*ret = after[0];
	return 0;
}

void policy_grammar_destroy(struct policy_grammar *g)
{
	if (!g)
		return;
	free(g->nodes);
	free(g->trie);
	free(g);
}

struct policy_grammar *policy_grammar_create_holo3(void)
{
	return policy_grammar_build(IPC_POLICY_FORMAT_HOLO3);
}

struct policy_grammar *policy_grammar_build(enum ipc_policy_format f)
{
	const struct ipc_model_tool *tool;
	struct builder b = {.g = xcalloc(1, sizeof(struct policy_grammar))};
	struct roots rt;
	uint32_t end, thought, thought_str, note, note_str, tools_node, node;
	int r = 0;

	end = new_node(&b, (struct gnode){.kind = GNODE_END});
	if ((r = key_name_trie(&b, &rt.keys)) < 0)
		goto fail;
	rt.button = enum_trie(&b, button_name, &r);
	rt.direction = enum_trie(&b, direction_name, &r);
	rt.boolean = new_trie_node(&b, 0);
	if (r < 0 || (r = trie_add(&b, rt.boolean, "true", 4, GNODE_DEFAULT)) < 0 ||
	    (r = trie_add(&b, rt.boolean, "false", 5, GNODE_DEFAULT)) < 0)
		goto fail;
	rt.goal_status = new_trie_node(&b, 0);
	for (int i = 0; goal_status_name(i); i++) {
		char gw[32];
		snprintf(gw, sizeof(gw), "\"%s\"}", goal_status_name(i));
		if ((r = trie_add(&b, rt.goal_status, gw, strlen(gw), GNODE_DEFAULT)) < 0)
			goto fail;
	}

	/* Back to front: ,"tool_call":{"tool_name":" + one word per tool ("click"" ...). */
	uint32_t tools_root = new_trie_node(&b, 0);
	static const char tool_call[] = ",\"tool_call\":{\"tool_name\":\"";
	char w[64];
	for (size_t t = 0; (tool = ipc_model_tool(f, t)); t++) {
		if (!tool->name || strlen(tool->name) > 32 || tool->layout.n_args == 0) {
			r = -EINVAL;
			goto fail;
		}
		if ((r = tool_nodes(&b, &rt, &tool->layout, end, &node)) < 0)
			goto fail;
		snprintf(w, sizeof(w), "%s%s\"", tool_call, tool->name);
		if ((r = trie_add(&b, tools_root, w, strlen(w), node)) < 0)
			goto fail;
	}
	tools_node = trie_node(&b, tools_root, end);
	thought_str = string_node(&b, POLICY_MAX_THOUGHT_BYTES, tools_node);
	if ((r = literal(&b, ",\"thought\":\"", thought_str, &thought)) < 0)
		goto fail;
	note_str = string_node(&b, POLICY_MAX_NOTE_BYTES, thought);
	uint32_t note_root = new_trie_node(&b, 0);
	if ((r = trie_add(&b, note_root, "null", 4, thought)) < 0 ||
	    (r = trie_add(&b, note_root, "\"", 1, note_str)) < 0)
		goto fail;
	note = trie_node(&b, note_root, end);
	if ((r = literal(&b, "{\"note\":", note, &b.g->start)) < 0)
		goto fail;
	/* the think block a thinking matcher starts in, then the gap, then the step */
	node = new_node(&b,
			(struct gnode){.kind = GNODE_SPACE, .max = POLICY_THINK_MAX_GAP, .next = b.g->start});
	b.g->think = new_node(&b, (struct gnode){.kind = GNODE_THINK, .next = node});
	return b.g;

fail:
	policy_grammar_destroy(b.g);
	errno = -r;
	return NULL;
}

struct policy_grammar *policy_grammar_create_point(void)
{
	struct builder b = {.g = xcalloc(1, sizeof(struct policy_grammar))};

	b.g->think = UINT32_MAX;
	uint32_t end, y, y_key, x;
	int r;

	end = new_node(&b, (struct gnode){.kind = GNODE_END});
	uint32_t close = 0;
	if ((r = literal(&b, "}", end, &close)) < 0)
		goto fail;
	y = new_node(&b, (struct gnode){.kind = GNODE_INT, .lo = 0, .hi = IPC_MODEL_COORD_MAX, .next = close});
	if ((r = literal(&b, ",\"y\":", y, &y_key)) < 0)
		goto fail;
	x = new_node(&b, (struct gnode){.kind = GNODE_INT, .lo = 0, .hi = IPC_MODEL_COORD_MAX, .next = y_key});
	if ((r = literal(&b, "{\"x\":", x, &b.g->start)) < 0)
		goto fail;
	return b.g;

fail:
	policy_grammar_destroy(b.g);
	errno = -r;
	return NULL;
}
