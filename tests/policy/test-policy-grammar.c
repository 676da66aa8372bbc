/* The step grammar accepts exactly the canonical steps: every generated valid step (and every
 * prefix of it, complete only at its end), none of the invalid ones (checked at the byte where
 * they go wrong); the parser accepts what the grammar accepts, its canonical serialization is
 * accepted by the grammar again, and the grammar's tool layout agrees with ipc's. A thinking
 * matcher accepts a think block before the step, and a spent budget only lets it close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "corpus.h"
#include "policy-internal.h"
#include "test.h"
#include "keys.h"

TEST_DEFINE_GLOBALS;

static struct policy_grammar *g;

/* Feeds s byte by byte: returns the offset of the first rejected byte, or -1 when all bytes
 * are accepted; *complete says whether the whole text is a step. */
static long reject_at(const char *s, size_t n, bool *complete)
{
	struct policy_matcher m;
	policy_matcher_init(&m, g);
	for (size_t i = 0; i < n; i++) {
		if (policy_matcher_is_complete(&m) && complete)
			*complete = true;
		if (policy_matcher_feed(&m, s + i, 1) < 0)
			return (long)i;
	}
	if (complete)
		*complete = policy_matcher_is_complete(&m);
	return -1;
}

static bool accepts(const char *s)
{
	bool complete = false;
	return reject_at(s, strlen(s), &complete) < 0 && complete;
}

static void test_corpus(void)
{
	struct corpus c = {0};
	corpus_build(&c);
	CHECK_INT_EQ(c.n, 95); /* 19 optional-argument subsets over 13 tools, 5 variants */
	for (size_t i = 0; i < c.n; i++) {
		const char *s = c.items[i];
		size_t n = strlen(s);
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		bool ok = true;
		for (size_t k = 0; k < n && ok; k++) {
			if (policy_matcher_is_complete(&m))
				ok = false; /* complete before the end */
			if (policy_matcher_feed(&m, s + k, 1) < 0) {
				fprintf(stderr, "rejected at %zu: %s\n", k, s);
				ok = false;
			}
		}
		CHECK(ok);
		CHECK(policy_matcher_is_complete(&m));
		/* Nothing may follow a complete step: no trailing garbage, no second object. */
		CHECK(policy_matcher_feed(&m, "{", 1) == -EILSEQ);
		CHECK(policy_matcher_feed(&m, " ", 1) == -EILSEQ);
		CHECK(policy_matcher_feed(&m, "\n", 1) == -EILSEQ);

		/* Whole-buffer feeding agrees with byte feeding and is atomic on error. */
		policy_matcher_init(&m, g);
		CHECK(policy_matcher_feed(&m, s, n) == 0);
		struct policy_matcher before = m;
		CHECK(policy_matcher_feed(&m, "}", 1) == -EILSEQ);
		CHECK(memcmp(&before, &m, sizeof(m)) == 0);

		/* The parser takes every grammar step, and its canonical form is a grammar step. */
		struct policy_step st;
		char err[256] = "";
		int r = policy_step_parse(s, n, &st, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "parse failed: %s: %s\n", err, s);
		CHECK_INT_EQ(r, 0);
		if (r == 0) {
			char *canon = policy_step_to_json(&st);
			REQUIRE(canon);
			if (!accepts(canon))
				fprintf(stderr, "canonical form rejected: %s\n", canon);
			CHECK(accepts(canon));
			struct policy_step st2;
			CHECK_INT_EQ(policy_step_parse(canon, strlen(canon), &st2, err, sizeof(err)), 0);
			char *canon2 = policy_step_to_json(&st2);
			CHECK_STR_EQ(canon2, canon);
			free(canon2);
			free(canon);
			policy_step_finish(&st2);
			policy_step_finish(&st);
		}
	}
	corpus_free(&c);
}

#define PRE "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":"

/* Invalid texts; '|' marks the first byte the grammar must reject (no mark: every byte is
 * accepted but the step is incomplete). */
static const char *const bad_texts[] = {
	/* key order, names, layout */
	"{\"|thought\":\"t\",\"note\":null}",
	"{\"note\":| null}",
	"| {\"note\":null}",
	"{\"note\":nul|}",
	/* the script-only tools and grounded targets are not the model's */
	"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"|launch\"}}",
	"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait|_for\"}}",
	"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"a|ctivate\"}}",
	"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"click\",\"|target\":\"a\"}}",
	"{\"note\":\"a\",\"t|ool_call\":{}}",
	PRE "\"click\",\"|x\":1,\"y\":2,\"element\":\"e\"}}",
	PRE "\"click\",\"element\":\"e\",\"|y\":2,\"x\":1}}",
	PRE "\"cl|ack\",\"element\":\"e\"}}",
	PRE "\"|Click\",\"element\":\"e\"}}",
	PRE "\"click\"|}}",
	PRE "\"click\",\"element\":\"e\"|}}",
	PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":2,\"|extra\":1}}",
	PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":2,\"button\":\"left\"}}|x",
	PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":2,\"button\":\"left\"}}|{",
	PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":2,\"button\":\"|double\"}}",
	PRE "\"wait\",\"duration\":5}",
	PRE "\"wait\",\"duration\":5",
	/* numbers */
	PRE "\"click\",\"element\":\"e\",\"x\":100|1",
	PRE "\"click\",\"element\":\"e\",\"x\":0|1",
	PRE "\"click\",\"element\":\"e\",\"x\":|-1",
	PRE "\"click\",\"element\":\"e\",\"x\":1|.5",
	PRE "\"click\",\"element\":\"e\",\"x\":|\"1\"",
	PRE "\"click\",\"element\":\"e\",\"x\":|,",
	PRE "\"wait\",\"duration\":|0}}",
	PRE "\"wait\",\"duration\":3|1}}",
	PRE "\"wait\",\"duration\":30|0}}",
	PRE "\"hotkey\",\"keys\":[\"a\"],\"repeat_count\":1|1}}",
	PRE "\"scroll\",\"element\":\"e\",\"x\":1,\"y\":2,\"direction\":\"up\",\"scroll_size\":5|1}}",
	PRE "\"scroll\",\"element\":\"e\",\"x\":1,\"y\":2,\"|scroll_size\":5}}",
	/* booleans and key names */
	PRE "\"write\",\"content\":\"x\",\"press_enter\":|True}}",
	PRE "\"write\",\"content\":\"x\",\"overwrite\":false|,\"press_enter\":true}}",
	PRE "\"hotkey\",\"keys\":[|]}}",
	PRE "\"hotkey\",\"keys\":[\"ctr|\"]}}",
	PRE "\"hotkey\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\"|,\"f\"]}}",
	PRE "\"hotkey\",\"keys\":|\"ctrl+c\"}}",
	PRE "\"key_down\",\"key\":\"f2|5\"}}",
	PRE "\"key_down\",\"key\":\"a|b\"}}",
	/* strings */
	"{\"note\":\"a|\nb\"}",
	"{\"note\":\"\\|x\"}",
	"{\"note\":\"\\u00|g0\"}",
	"{\"note\":\"\\u000|0\"}",
	"{\"note\":\"\\ud|c00\"}",
	"{\"note\":\"\\ud800\\u|0041\"}",
	"{\"note\":\"\\ud800|x\"}",
	"{\"note\":\"|\xc0\xaf\"}",
	"{\"note\":\"\xe0|\x80\x80\"}",
	"{\"note\":\"\xed|\xa0\x80\"}",
	"{\"note\":\"\xf4|\x90\x80\x80\"}",
	"{\"note\":\"|\xff\"}",
	"{\"note\":\"\xc3|\"}",
};

static void test_rejects(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_texts); i++) {
		char text[512];
		const char *t = bad_texts[i], *mark = strchr(t, '|');
		long want = mark ? (long)(mark - t) : -1;
		snprintf(text, sizeof(text), "%.*s%s", mark ? (int)(mark - t) : (int)strlen(t), t,
			 mark ? mark + 1 : "");
		bool complete = false;
		long at = reject_at(text, strlen(text), &complete);
		if (at != want)
			fprintf(stderr, "case %zu: rejected at %ld, expected %ld: %s\n", i, at, want, text);
		CHECK_INT_EQ(at, want);
		if (want < 0)
			CHECK(!complete);
	}
}

/* Strings stop at their byte budget, and no budget leaves a prefix without a way to finish:
 * at every length the string can still be closed. */
static void test_string_budget(void)
{
	struct policy_matcher m, t;
	char buf[POLICY_MAX_NOTE_BYTES + 64];
	policy_matcher_init(&m, g);
	REQUIRE(policy_matcher_feed(&m, "{\"note\":\"", 9) == 0);
	memset(buf, 'a', sizeof(buf));
	REQUIRE(policy_matcher_feed(&m, buf, POLICY_MAX_NOTE_BYTES - 11) == 0);
	/* 11 bytes left: a surrogate-pair escape (12) no longer fits, a \u escape (6) does. */
	t = m;
	CHECK(policy_matcher_feed(&t, "\\ud83d", 6) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\\ud7ff", 6) == 0);
	t = m;
	CHECK(policy_matcher_feed(&t, "\\u00e9", 6) == 0);
	REQUIRE(policy_matcher_feed(&m, buf, 8) == 0);
	/* 3 bytes left: a 4-byte character no longer fits, a 3-byte one does. */
	t = m;
	CHECK(policy_matcher_feed(&t, "\xf0", 1) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\xe2\x82\xac", 3) == 0);
	CHECK(policy_matcher_feed(&t, "a", 1) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\\", 1) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\"", 1) == 0);
	t = m;
	CHECK(policy_matcher_feed(&t, "\\u", 2) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\\n", 2) == 0);
	CHECK(policy_matcher_feed(&t, "a", 1) == 0);
	CHECK(policy_matcher_feed(&t, "a", 1) == -EILSEQ);
	CHECK(policy_matcher_feed(&t, "\",\"thought\":\"", 13) == 0);
}

/* The parser: any JSON layout, errors that name the field, the schema's stricter rules. */
static void test_parser(void)
{
	struct policy_step st;
	char err[256];
	static const char spaced[] =
		"{ \"tool_call\" : {\"y\": 7, \"x\": 1000, \"tool_name\": \"click\", "
		"\"element\": \"OK\", \"button\": \"right\"}, \"thought\": \"go\", \"note\": \"n\" }";
	REQUIRE(policy_step_parse(spaced, strlen(spaced), &st, err, sizeof(err)) == 0);
	CHECK_STR_EQ(st.note, "n");
	CHECK_STR_EQ(st.thought, "go");
	CHECK_INT_EQ(st.action.tool, IPC_TOOL_CLICK);
	CHECK_INT_EQ(st.action.x, 1000);
	CHECK_INT_EQ(st.action.y, 7);
	CHECK_INT_EQ(st.action.button, IPC_BUTTON_RIGHT);
	char *canon = policy_step_to_json(&st);
	CHECK_STR_EQ(canon, "{\"note\":\"n\",\"thought\":\"go\",\"tool_call\":{\"tool_name\":\"click\","
			    "\"element\":\"OK\",\"x\":1000,\"y\":7,\"button\":\"right\"}}");
	free(canon);
	policy_step_finish(&st);

	/* Defaults are written out by the serializer. */
	static const char minimal[] =
		PRE "\"scroll\",\"element\":\"list\",\"x\":5,\"y\":6,\"direction\":\"down\"}}";
	REQUIRE(policy_step_parse(minimal, strlen(minimal), &st, err, sizeof(err)) == 0);
	CHECK(st.note == NULL);
	canon = policy_step_to_json(&st);
	CHECK_STR_EQ(canon, PRE "\"scroll\",\"element\":\"list\",\"x\":5,\"y\":6,\"direction\":"
				"\"down\",\"scroll_size\":5}}");
	free(canon);
	policy_step_finish(&st);

	/* ask_user: the question is the action's content; its answer comes from the user. */
	static const char ask[] = PRE "\"ask_user\",\"question\":\"Which file?\"}}";
	REQUIRE(policy_step_parse(ask, strlen(ask), &st, err, sizeof(err)) == 0);
	CHECK_INT_EQ(st.action.tool, IPC_TOOL_ASK_USER);
	CHECK_STR_EQ(st.action.content, "Which file?");
	canon = policy_step_to_json(&st);
	CHECK_STR_EQ(canon, ask);
	CHECK(accepts(canon));
	free(canon);
	policy_step_finish(&st);

	static const struct {
		const char *text;
		int err;
		const char *msg;
	} bads[] = {
		{PRE "\"ask_user\"}}", -EINVAL, "tool_call.question: missing (required for 'ask_user')"},
		{PRE "\"ask_user\",\"question\":\"q\",\"content\":\"c\"}}", -EINVAL,
		 "tool_call.content: unknown field for tool 'ask_user'"},
		{"[]", -EINVAL, "expected a step object"},
		{"{\"note\":null,\"thought\":\"t\"", -EINVAL, "invalid JSON"},
		{"{\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}", -EINVAL,
		 "note: missing"},
		{"{\"note\":null,\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}", -EINVAL,
		 "thought: missing"},
		{"{\"note\":null,\"thought\":\"t\"}", -EINVAL, "tool_call: missing"},
		{"{\"note\":1,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}",
		 -EINVAL, "note: expected a string"},
		{"{\"note\":null,\"thought\":\"t\",\"extra\":1,\"tool_call\":{}}", -EINVAL,
		 "extra: unknown field"},
		{PRE "\"click\",\"x\":1,\"y\":2}}", -EINVAL, "tool_call.element: missing"},
		{PRE "\"wait\",\"duration\":1.5}}", -EINVAL, "tool_call.duration: expected an integer"},
		{PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":1001}}", -EINVAL,
		 "tool_call.y: 1001 is out of range 0..1000"},
		{PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":1,\"direction\":\"up\"}}", -EINVAL,
		 "tool_call.direction: unknown field for tool 'click'"},
		{PRE "\"hotkey\",\"keys\":[\"ctrl\",\"ctr\"]}}", -EINVAL,
		 "tool_call.keys[1]: unknown key name 'ctr'"},
		{PRE "\"hotkey\",\"keys\":[\"arrow_left\"]}}", -EINVAL,
		 "tool_call.keys[0]: 'arrow_left' is not a key name of the schema"},
		{PRE "\"fly\"}}", -EINVAL, "tool_call.tool_name: unknown tool 'fly'"},
		{PRE "\"launch\",\"command\":[\"xterm\"]}}", -EINVAL,
		 "tool_call.tool_name: 'launch' is a script-only tool"},
		{PRE "\"click\",\"element\":\"e\",\"target\":\"OK\"}}", -EINVAL, "tool_call.x: missing"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
		memset(&st, 0x5a, sizeof(st));
		err[0] = 0;
		int r = policy_step_parse(bads[i].text, strlen(bads[i].text), &st, err, sizeof(err));
		CHECK_INT_EQ(r, bads[i].err);
		bool has = strstr(err, bads[i].msg) != NULL;
		if (!has)
			fprintf(stderr, "case %zu: message '%s' lacks the expected text\n", i, err);
		CHECK(has);
		CHECK(((unsigned char *)&st)[0] == 0x5a); /* untouched on error */
	}
	/* Over the named limits, counted as written: 1023 bytes and a newline decode to 1024 bytes
	 * but are written as 1025. */
	char *big = malloc(POLICY_MAX_THOUGHT_BYTES + 200);
	for (int nl = 0; nl < 2; nl++) {
		int n = snprintf(big, 64, "{\"note\":null,\"thought\":\"");
		memset(big + n, 'x', POLICY_MAX_THOUGHT_BYTES + 1);
		n += POLICY_MAX_THOUGHT_BYTES + 1;
		if (nl)
			big[n - 2] = '\\', big[n - 1] = 'n';
		snprintf(big + n, 100, "\",\"tool_call\":{\"tool_name\":\"wait\",\"duration\":1}}");
		err[0] = 0;
		CHECK_INT_EQ(policy_step_parse(big, strlen(big), &st, err, sizeof(err)), -E2BIG);
		CHECK_STR_EQ(err, "thought: 1025 bytes exceed the limit of 1024");
		/* One byte less is within the limit. */
		memmove(big + 30, big + 31, strlen(big + 31) + 1);
		CHECK_INT_EQ(policy_step_parse(big, strlen(big), &st, err, sizeof(err)), 0);
		policy_step_finish(&st);
	}
	free(big);
}

/* The grammar's layout and ipc's action parser agree: for every tool, every argument name of
 * any tool is accepted by ipc exactly when the layout lists it for that tool, and every enum
 * spelling means the enum value of its index. */
static void test_agrees_with_ipc(void)
{
	for (int t = 0; t < IPC_TOOL_MODEL_COUNT; t++) {
		const struct ipc_tool_layout *l = policy_tool_layout((enum ipc_tool)t);
		REQUIRE(l);
		char base[1024], val[256];
		int off = snprintf(base, sizeof(base), "{\"tool_name\":\"%s\"",
				   ipc_tool_to_string((enum ipc_tool)t));
		for (size_t i = 0; i < l->n_args; i++) {
			corpus_value(val, sizeof(val), &l->args[i], 1);
			if (l->args[i].required)
				off += snprintf(base + off, sizeof(base) - (size_t)off, ",\"%s\":%s",
						l->args[i].name, val);
		}
		struct ipc_action a;
		char err[256];
		char call[1400];
		snprintf(call, sizeof(call), "%s}", base);
		CHECK_INT_EQ(ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &a, err, sizeof(err)), 0);
		ipc_action_finish(&a);
		/* Every argument of every tool, added to this tool. */
		for (int u = 0; u < IPC_TOOL_MODEL_COUNT; u++) {
			const struct ipc_tool_layout *lu = policy_tool_layout((enum ipc_tool)u);
			for (size_t i = 0; i < lu->n_args; i++) {
				bool listed = false, present = false;
				for (size_t j = 0; j < l->n_args; j++) {
					if (strcmp(l->args[j].name, lu->args[i].name) == 0) {
						listed = true;
						present = l->args[j].required;
					}
				}
				if (present)
					continue;
				corpus_value(val, sizeof(val), &lu->args[i], 2);
				snprintf(call, sizeof(call), "%s,\"%s\":%s}", base, lu->args[i].name, val);
				int r = ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &a, err,
							 sizeof(err));
				if ((r == 0) != listed)
					fprintf(stderr, "ipc and layout disagree: %s -> %s\n", call,
						r ? err : "accepted");
				CHECK((r == 0) == listed);
				if (r == 0)
					ipc_action_finish(&a);
			}
			/* A required argument left out is refused by ipc too, except `element`,
			 * which only the model's schema requires. */
		}
		for (size_t j = 0; j < l->n_args; j++) {
			if (!l->args[j].required || strcmp(l->args[j].name, "element") == 0)
				continue;
			char *p = strstr(base, l->args[j].name) - 2;
			char *e = strchr(p + 1, ',');
			snprintf(call, sizeof(call), "%.*s%s}", (int)(p - base), base, e ? e : "");
			CHECK(ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &a, err, sizeof(err)) <
			      0);
		}
	}
	/* ipc's spellings (what the grammar and the serializer use) are what its action parser
	 * reads, value for value. */
	CHECK(ipc_button_to_string((enum ipc_button)3) == NULL);
	CHECK(ipc_direction_to_string((enum ipc_direction)4) == NULL);
	for (int b = 0; b < 3; b++) {
		char call[256];
		struct ipc_action a;
		REQUIRE(ipc_button_to_string((enum ipc_button)b));
		snprintf(call, sizeof(call), "{\"tool_name\":\"click\",\"x\":1,\"y\":1,\"button\":\"%s\"}",
			 ipc_button_to_string((enum ipc_button)b));
		REQUIRE(ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &a, NULL, 0) == 0);
		CHECK_INT_EQ(a.button, b);
		ipc_action_finish(&a);
	}
	for (int d = 0; d < 4; d++) {
		char call[256];
		struct ipc_action a;
		REQUIRE(ipc_direction_to_string((enum ipc_direction)d));
		snprintf(call, sizeof(call),
			 "{\"tool_name\":\"scroll\",\"x\":1,\"y\":1,\"direction\":"
			 "\"%s\"}",
			 ipc_direction_to_string((enum ipc_direction)d));
		REQUIRE(ipc_action_parse(call, strlen(call), IPC_COORDS_MODEL, &a, NULL, 0) == 0);
		CHECK_INT_EQ(a.direction, d);
		ipc_action_finish(&a);
	}
	/* Every key name of the grammar is one x11 knows (the grammar refuses to build
	 * otherwise); the list is what the parser holds steps to. */
	for (size_t i = 0; policy_key_name(i); i++) {
		uint32_t ks;
		CHECK(keys_lookup(policy_key_name(i), &ks) == 0);
		CHECK(policy_key_name_ok(policy_key_name(i)));
	}
	CHECK(!policy_key_name_ok("f25"));
	CHECK(!policy_key_name_ok("f0"));
	CHECK(policy_key_name_ok("F24"));
	CHECK(!policy_key_name_ok(""));
	CHECK(!policy_key_name_ok("\x01"));
}

/* The grounding grammar: a point in model space and nothing else. */
static void test_point_grammar(void)
{
	struct policy_grammar *pg = policy_grammar_create_point();
	REQUIRE(pg);
	static const struct {
		const char *text;
		bool ok;
	} cases[] = {
		{"{\"x\":0,\"y\":1000}", true},	 {"{\"x\":512,\"y\":7}", true},
		{"{\"x\":1001,\"y\":0}", false}, {"{\"x\":05,\"y\":0}", false},
		{"{\"y\":1,\"x\":1}", false},	 {"{\"x\":1,\"y\":1,}", false},
		{"{\"x\": 1,\"y\":1}", false},	 {"{\"x\":-1,\"y\":1}", false},
		{"{\"x\":1,\"y\":1", false},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct policy_matcher m;
		policy_matcher_init(&m, pg);
		bool ok = policy_matcher_feed(&m, cases[i].text, strlen(cases[i].text)) == 0 &&
			  policy_matcher_is_complete(&m);
		if (ok != cases[i].ok)
			fprintf(stderr, "point grammar: %s %s\n", cases[i].text, ok ? "accepted" : "refused");
		CHECK(ok == cases[i].ok);
	}
	policy_grammar_destroy(pg);
}

/* The JSON Schema the holo3 prompt shows and a remote server constrains its output with
 * (policy_step_json_schema): one alternative per tool, each naming the tool and exactly the layout's
 * arguments, required as the grammar requires them, ranges and enums as the grammar's, the same key names. */
static void test_json_schema(void)
{
	char *text = policy_step_json_schema();
	REQUIRE(text);
	json_t *s = json_loads(text, 0, NULL);
	REQUIRE(s);
	json_t *req = json_object_get(s, "required");
	CHECK_INT_EQ(json_array_size(req), 3);
	CHECK(json_is_false(json_object_get(s, "additionalProperties")));
	json_t *tools =
		json_object_get(json_object_get(json_object_get(s, "properties"), "tool_call"), "anyOf");
	CHECK_INT_EQ(json_array_size(tools), IPC_TOOL_MODEL_COUNT);
	for (int t = 0; t < IPC_TOOL_MODEL_COUNT; t++) {
		const struct ipc_tool_layout *l = policy_tool_layout((enum ipc_tool)t);
		json_t *alt = json_array_get(tools, (size_t)t);
		json_t *props = json_object_get(alt, "properties");
		CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(props, "tool_name"), "const")),
			     ipc_tool_to_string((enum ipc_tool)t));
		CHECK_INT_EQ(json_object_size(props), l->n_args + 1);
		size_t n_required = 1;
		for (size_t i = 0; i < l->n_args; i++) {
			json_t *a = json_object_get(props, l->args[i].name);
			CHECK(a != NULL);
			if (l->args[i].type == IPC_ARG_INT) {
				CHECK_INT_EQ(json_integer_value(json_object_get(a, "minimum")), l->args[i].lo);
				CHECK_INT_EQ(json_integer_value(json_object_get(a, "maximum")), l->args[i].hi);
			}
			n_required += l->args[i].required;
		}
		CHECK_INT_EQ(json_array_size(json_object_get(alt, "required")), n_required);
	}
	/* Key names are one "$defs" entry; hotkey.keys' items and key_down/key_up.key refer to
	 * it. */
	const char *ref = "#/$defs/key";
	CHECK_STR_EQ(json_string_value(json_object_get(
			     json_object_get(json_object_get(json_object_get(json_array_get(tools,
											    IPC_TOOL_HOTKEY),
									     "properties"),
							     "keys"),
					     "items"),
			     "$ref")),
		     ref);
	for (int t = IPC_TOOL_KEY_DOWN; t <= IPC_TOOL_KEY_UP; t++)
		CHECK_STR_EQ(json_string_value(
				     json_object_get(json_object_get(json_object_get(json_array_get(tools,
												    (size_t)t),
										     "properties"),
								     "key"),
						     "$ref")),
			     ref);
	/* The key names: the grammar's, f1..f24 and single printable characters. */
	json_t *keys = json_object_get(json_object_get(json_object_get(s, "$defs"), "key"), "enum");
	size_t n_names = 0;
	while (policy_key_name(n_names))
		n_names++;
	/* Without '"' and '\\', which llama.cpp's converter writes unescaped into its grammar. */
	CHECK_INT_EQ(json_array_size(keys), n_names + 24 + 93);
	size_t i;
	json_t *k;
	json_array_foreach(keys, i, k)
	{
		CHECK(policy_key_name_ok(json_string_value(k)));
		CHECK(strpbrk(json_string_value(k), "\"\\") == NULL);
	}
	/* Written as Python's json.dumps writes it (", " and ": ", one line), the form the
	 * published harnesses show the model: the same text comes back from a dump in that
	 * style. */
	char *again = json_dumps(s, JSON_PRESERVE_ORDER);
	REQUIRE(again);
	CHECK_STR_EQ(text, again);
	free(again);
	CHECK(strchr(text, '\n') == NULL);
	/* No maxLength above 1000 anywhere: llama.cpp's grammar parser refuses those rules. */
	for (const char *p = strstr(text, "\"maxLength\":"); p; p = strstr(p + 1, "\"maxLength\":"))
		CHECK(atoi(p + strlen("\"maxLength\":")) <= 1000);
	json_decref(s);
	free(text);
}

static long think_reject_at(const char *s, size_t n)
{
	struct policy_matcher m;

	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	for (size_t i = 0; i < n; i++)
		if (policy_matcher_feed(&m, s + i, 1) < 0)
			return (long)i;
	return -1;
}

/* The think block before a step: free UTF-8 text up to the first "</think>", a gap of at most
 * two newlines or spaces, then the step; a budget that closes the block allows only the rest of
 * "</think>". */
static void test_thinking(void)
{
	static const char step[] = "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":"
				   "\"wait\",\"duration\":1}}";
	static const char thought[] = "The <b>menu</b> is open </thin \xc3\xa9\xe6\x97\xa5 <</ \"}\n";
	struct policy_grammar *pg = policy_grammar_create_point();
	struct policy_matcher m;
	char text[512];
	size_t tl, so;

	REQUIRE(pg);
	CHECK_INT_EQ(policy_matcher_init_thinking(&m, pg), -EINVAL);
	policy_grammar_destroy(pg);

	/* free text, "</think>", the gap, the step: complete only at the end */
	snprintf(text, sizeof(text), "%s</think>\n\n%s", thought, step);
	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	for (size_t i = 0; i < strlen(text); i++) {
		bool in_think = i < strlen(thought) + strlen("</think>");
		CHECK(policy_matcher_thinking(&m) == in_think);
		CHECK(!policy_matcher_is_complete(&m));
		REQUIRE(policy_matcher_feed(&m, text + i, 1) == 0);
	}
	CHECK(policy_matcher_is_complete(&m));
	CHECK_INT_EQ(policy_split_thinking(text, strlen(text), &tl, &so), 0);
	CHECK_INT_EQ(tl, strlen(thought));
	CHECK_STR_EQ(text + so, step);
	CHECK_INT_EQ(policy_split_thinking(step, strlen(step), &tl, &so), -EINVAL);
	/* no gap at all, and a special-free "</think>{" */
	snprintf(text, sizeof(text), "</think>%s", step);
	CHECK_INT_EQ(think_reject_at(text, strlen(text)), -1);

	/* the first "</think>" ends the block: more thought after it is no step */
	CHECK_INT_EQ(think_reject_at("a</think>b</think>{", 19), 9);
	/* the gap holds at most two bytes */
	snprintf(text, sizeof(text), "x</think> \n %s", step);
	CHECK_INT_EQ(think_reject_at(text, strlen(text)), 11);
	/* valid UTF-8 without NUL */
	CHECK_INT_EQ(think_reject_at("ab\0", 3), 2);
	CHECK_INT_EQ(think_reject_at("a\xff", 2), 1);
	CHECK_INT_EQ(think_reject_at("a\xe6\x97<", 4), 3);
	CHECK_INT_EQ(think_reject_at("\xed\xa0\x80", 3), 1); /* a surrogate */

	/* closing: only the rest of "</think>" */
	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	REQUIRE(policy_matcher_feed(&m, "so </th", 7) == 0);
	policy_matcher_close_thinking(&m);
	CHECK_INT_EQ(policy_matcher_feed(&m, "x", 1), -EILSEQ);
	CHECK_INT_EQ(policy_matcher_feed(&m, "ink", 3), 0);
	CHECK(policy_matcher_thinking(&m));
	CHECK_INT_EQ(policy_matcher_feed(&m, ">\n{", 3), 0);
	CHECK(!policy_matcher_thinking(&m));
	policy_matcher_close_thinking(&m); /* no effect on the step */
	CHECK_INT_EQ(policy_matcher_feed(&m, step + 1, strlen(step) - 1), 0);
	CHECK(policy_matcher_is_complete(&m));
	/* closing in the middle of a character: the character first */
	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	REQUIRE(policy_matcher_feed(&m, "\xe6", 1) == 0);
	policy_matcher_close_thinking(&m);
	CHECK_INT_EQ(policy_matcher_feed(&m, "<", 1), -EILSEQ);
	CHECK_INT_EQ(policy_matcher_feed(&m, "\x97\xa5", 2), 0);
	CHECK_INT_EQ(policy_matcher_feed(&m, "a", 1), -EILSEQ);
	CHECK_INT_EQ(policy_matcher_feed(&m, "</think>", 8), 0);
	CHECK(!policy_matcher_thinking(&m));
}

int main(void)
{
	test_json_schema();
	test_point_grammar();
	g = policy_grammar_create_holo3();
	REQUIRE(g);
	CHECK(policy_format_find("holo3") == &policy_format_holo3);
	CHECK(policy_format_find("holo1") == NULL);
	/* sampled as the published harnesses sample (docs/policy.md) */
	CHECK(policy_format_holo3.sampling.temperature == 0.8 && policy_format_holo3.sampling.top_p == 0.95);
	test_corpus();
	test_rejects();
	test_string_budget();
	test_parser();
	test_agrees_with_ipc();
	test_thinking();
	policy_grammar_destroy(g);
	return test_exit();
}
