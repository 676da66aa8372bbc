/* policy internals shared by the module's files and its white-box tests. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "policy.h"

enum gnode_kind {
	GNODE_TRIE,   /* one of a set of byte strings (prefix-free); each leads to a node */
	GNODE_STRING, /* JSON string content up to `max` bytes, then the closing quote */
	GNODE_INT,    /* JSON integer in lo..hi, no leading zeros; the next byte goes to `next` */
	GNODE_KEYSEP, /* inside a hotkey key list: ',' (another key) or ']' */
	GNODE_END,    /* a whole step: no more bytes */
	GNODE_THINK,  /* a think block's text up to its "</think>" (sub: bytes of it matched; val:
		       * 1 once it may only close), then `next` */
	GNODE_SPACE,  /* up to `max` bytes of '\n' or ' ' (sub: how many); any other byte goes to
		       * `next` */
};

#define GTRIE_NO_LEAF UINT32_MAX
#define GNODE_DEFAULT (UINT32_MAX - 1)

/* Grammar tries: children are sibling-linked. A leaf ends a word and names the node that
 * follows (GNODE_DEFAULT: the owning GNODE_TRIE's `next`). Words are prefix-free, so a leaf
 * has no children. */
struct gtrie_node {
	uint32_t first_child;
	uint32_t next_sibling;
	uint32_t leaf_next; /* GTRIE_NO_LEAF for inner nodes */
	uint8_t byte;
};

struct gnode {
	enum gnode_kind kind;
	bool fold_case;	  /* TRIE: A-Z match as a-z */
	bool keeps_count; /* entering this node keeps matcher.count (hotkey list) */
	uint32_t root;	  /* TRIE: trie root; KEYSEP: the key-name TRIE node to loop to */
	uint32_t next;	  /* TRIE: default next; STRING/INT/KEYSEP: node after */
	uint32_t max;	  /* STRING: byte limit; KEYSEP: most keys */
	int32_t lo, hi;	  /* INT */
};

struct policy_grammar {
	struct gnode *nodes;
	size_t n_nodes;
	struct gtrie_node *trie;
	size_t n_trie;
	uint32_t start;
	uint32_t think; /* the think block before the step; UINT32_MAX: the grammar has none */
};

/* One byte step of the automaton; returns false (m untouched or partly touched: callers step
 * a copy) when the byte leaves the language. */
bool policy_grammar_step(struct policy_matcher *m, uint8_t b);

/* The canonical-layout grammar over a format's tools (ipc's tool table, ipc_model_tool()).
 * NULL + errno. */
struct policy_grammar *policy_grammar_build(enum ipc_policy_format f);

/* One argument's JSON Schema (schema.c; keys refer to "#/$defs/key"), a new reference. */
json_t *policy_arg_json_schema(const struct ipc_tool_arg *a);
/* The "$defs" "key" entry: holod's closed key-name list as an enum, a new reference. */
json_t *policy_key_enum_schema(void);

/* holo3's layout of an ipc tool (ipc's tool table), or NULL for a tool outside its vocabulary. */
const struct ipc_tool_layout *policy_tool_layout(enum ipc_tool tool);

/* Whether the grammar accepts `name` as a key name (the parser holds steps to the same list). */
bool policy_key_name_ok(const char *name);

/* ---- step parsing helpers (step.c), shared by the formats' parsers ------------------------ */

/* Writes the message into errbuf (when given) and returns err. */
int policy_fail(char *errbuf, size_t errlen, int err, const char *format, ...)
	__attribute__((format(printf, 4, 5)));

/* Bytes between the quotes when jansson writes s (what the serializers emit). */
size_t policy_written_len(const char *s, size_t n);

/* v is a JSON string without NUL whose written form fits max bytes; else a clear error naming
 * field (-EINVAL, -E2BIG). */
int policy_check_string(const json_t *v, const char *field, size_t max, char *errbuf, size_t errlen);

/* A step's text parsed as a JSON object holding only note, thought and tool_call (the size
 * checked against POLICY_MAX_STEP_BYTES, duplicate keys refused): *ret owns it. The formats'
 * parsers check the fields' values. 0, or -EINVAL / -E2BIG with the message in errbuf. */
int policy_step_load(const char *text, size_t len, json_t **ret, char *errbuf, size_t errlen);
