/* A corpus of valid steps in the canonical layout, generated independently of the library's
 * serializer: every tool, every subset of its optional arguments, several values per type
 * (range ends, escapes, non-ASCII text, null and string notes). Shared by the policy tests. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "policy-internal.h"

struct corpus {
	char **items;
	size_t n, cap;
};

static inline void corpus_add(struct corpus *c, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
static inline void corpus_add(struct corpus *c, const char *format, ...)
{
	va_list ap;
	char *s;
	va_start(ap, format);
	if (vasprintf(&s, format, ap) < 0)
		abort();
	va_end(ap);
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->items = xreallocarray(c->items, c->cap, sizeof(*c->items));
	}
	c->items[c->n++] = s;
}

static inline void corpus_free(struct corpus *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->items[i]);
	free(c->items);
}

/* JSON string literals (with quotes) used for note, thought, element and content. */
static const char *const corpus_strings[] = {
	"\"\"",
	"\"OK button\"",
	"\"the \\\"Save\\\" button \\\\ path\\/to \\b\\f\\n\\r\\t end\"",
	"\"caf\\u00e9 \\u00E9 \\uD83D\\uDE00 \\u2028\"",
	"\"h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89 \xe2\x82\xac \xed\x9f\xbf "
	"\xf4\x8f\xbf\xbf\"",
	"\"line one\\nline two\"",
};
#define CORPUS_N_STRINGS (sizeof(corpus_strings) / sizeof(corpus_strings[0]))

static const char *const corpus_keys[] = {
	"[\"ctrl\",\"c\"]",
	"[\"CTRL\",\"Shift\",\"T\"]",
	"[\"F5\"]",
	"[\"\\\"\"]",
	"[\"a\",\"b\",\"c\",\"d\",\"f24\"]",
	"[\"enter\"]",
	"[\"\\\\\",\" \",\"ArrowLeft\"]",
};
#define CORPUS_N_KEYS (sizeof(corpus_keys) / sizeof(corpus_keys[0]))

static const char *const corpus_key[] = {"\"enter\"", "\"A\"", "\"f12\"", "\"shift\"", "\"~\""};

static inline void corpus_value(char *buf, size_t size, const struct ipc_tool_arg *a, unsigned v)
{
	switch (a->type) {
	case IPC_ARG_STRING:
		snprintf(buf, size, "%s", corpus_strings[v % CORPUS_N_STRINGS]);
		break;
	case IPC_ARG_INT: {
		int vals[] = {a->lo, a->hi, (a->lo + a->hi) / 2, a->lo + 1 <= a->hi ? a->lo + 1 : a->lo,
			      a->hi >= 10 ? 10 : a->hi};
		snprintf(buf, size, "%d", vals[v % 5]);
		break;
	}
	case IPC_ARG_BOOL:
		snprintf(buf, size, "%s", v % 2 ? "true" : "false");
		break;
	case IPC_ARG_BUTTON:
		snprintf(buf, size, "\"%s\"", ipc_button_to_string((enum ipc_button)(v % 3)));
		break;
	case IPC_ARG_DIRECTION:
		snprintf(buf, size, "\"%s\"", ipc_direction_to_string((enum ipc_direction)(v % 4)));
		break;
	case IPC_ARG_KEYS:
		snprintf(buf, size, "%s", corpus_keys[v % CORPUS_N_KEYS]);
		break;
	case IPC_ARG_KEY:
		snprintf(buf, size, "%s", corpus_key[v % 5]);
		break;
	case IPC_ARG_GOALS:
		snprintf(buf, size, "[{\"title\":\"%s\",\"status\":\"%s\"}]", v % 2 ? "Open it" : "",
			 ipc_goal_status_to_string((enum ipc_goal_status)(v % 4)));
		break;
	}
}

/* Every tool x every subset of optional arguments x 5 value variants. */
static inline void corpus_build(struct corpus *c)
{
	unsigned counter = 0;
	for (int t = 0; t < IPC_TOOL_MODEL_COUNT; t++) {
		const struct ipc_tool_layout *l = policy_tool_layout((enum ipc_tool)t);
		if (!l)
			abort();
		size_t n_opt = 0;
		for (size_t i = 0; i < l->n_args; i++)
			n_opt += !l->args[i].required;
		for (unsigned subset = 0; subset < (1u << n_opt); subset++) {
			for (unsigned variant = 0; variant < 5; variant++, counter++) {
				char call[2048], val[512];
				int off = snprintf(call, sizeof(call), "{\"tool_name\":\"%s\"",
						   ipc_tool_to_string((enum ipc_tool)t));
				for (size_t i = 0, o = 0; i < l->n_args; i++) {
					bool present = l->args[i].required;
					if (!present && (subset >> o++) & 1)
						present = true;
					if (!present)
						continue;
					corpus_value(val, sizeof(val), &l->args[i], variant + (unsigned)i);
					off += snprintf(call + off, sizeof(call) - (size_t)off, ",\"%s\":%s",
							l->args[i].name, val);
				}
				const char *note = counter % 3 == 0 ?
							   "null" :
							   corpus_strings[counter % CORPUS_N_STRINGS];
				corpus_add(c, "{\"note\":%s,\"thought\":%s,\"tool_call\":%s}}", note,
					   corpus_strings[(counter + 1) % CORPUS_N_STRINGS], call);
			}
		}
	}
}
