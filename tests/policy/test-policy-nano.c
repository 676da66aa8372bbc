/* The holo-nano format's steps: the published tool names, arguments, ranges and defaults, mapped
 * onto holod's actions; the grammar built from its tool table accepts the canonical steps and
 * refuses what the published schema refuses (at the byte that goes wrong); every step sampled
 * from the grammar parses and serializes back to text the grammar accepts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "policy-internal.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct policy_grammar *g;
/* --dump: the sampled steps, one a line (tests/policy/nano-schema.sh validates them against
 * the published schema when a local copy of it exists). */
static FILE *dump;

static long reject_at(const char *s, bool *complete)
{
	struct policy_matcher m;
	policy_matcher_init(&m, g);
	for (size_t i = 0; s[i]; i++)
		if (policy_matcher_feed(&m, s + i, 1) < 0)
			return (long)i;
	*complete = policy_matcher_is_complete(&m);
	return -1;
}

static bool accepts(const char *s)
{
	bool complete = false;
	return reject_at(s, &complete) < 0 && complete;
}

#define PRE "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":"

/* Canonical steps (model_dump_json's layout) and the ipc action each means. */
static const struct {
	const char *text;
	enum ipc_tool tool;
} good[] = {
	{PRE "\"update_plan\",\"goals\":[{\"title\":\"Open it\",\"status\":\"done\"},"
	     "{\"title\":\"Save\",\"status\":\"running\"}]}}",
	 IPC_TOOL_UPDATE_PLAN},
	{PRE "\"write_desktop\",\"content\":\"hi\",\"press_enter\":true,\"overwrite\":false}}",
	 IPC_TOOL_WRITE},
	{PRE "\"click_desktop\",\"element\":\"OK\",\"x\":10,\"y\":1000,\"button\":\"right\"}}",
	 IPC_TOOL_CLICK},
	{PRE "\"double_click_desktop\",\"element\":\"f\",\"x\":0,\"y\":5}}", IPC_TOOL_DOUBLE_CLICK},
	{PRE "\"drag_to_desktop\",\"element\":\"bin\",\"x\":700,\"y\":20}}", IPC_TOOL_DRAG_TO},
	{"{\"note\":\"seen\",\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"scroll_desktop\","
	 "\"element\":\"list\",\"x\":1,\"y\":2,\"direction\":\"down\",\"scroll_size\":100}}",
	 IPC_TOOL_SCROLL},
	{PRE "\"move_to_desktop\",\"element\":\"m\",\"x\":3,\"y\":4}}", IPC_TOOL_MOVE},
	{PRE "\"key_down_desktop\",\"key\":\"shift\"}}", IPC_TOOL_KEY_DOWN},
	{PRE "\"key_up_desktop\",\"key\":\"shift\"}}", IPC_TOOL_KEY_UP},
	{PRE "\"hotkey_desktop\",\"keys\":[\"ctrl\",\"c\"],\"repeat_count\":20}}", IPC_TOOL_HOTKEY},
	{PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"alt\"],\"tap_keys\":[\"tab\",\"tab\"]}}",
	 IPC_TOOL_HOLD_AND_TAP_KEY},
	{PRE "\"answer\",\"content\":\"42\"}}", IPC_TOOL_ANSWER},
	{PRE "\"ask_user\",\"question\":\"Which account?\"}}", IPC_TOOL_ASK_USER},
};

/* Refused by the grammar at the '|'. */
static const char *const bad[] = {
	PRE "\"click|\",\"element\":\"OK\",\"x\":1,\"y\":1}}", /* holo3's name */
	PRE "\"w|ait\",\"duration\":1}}",		       /* no wait in holo-nano */
	PRE "\"drag_to_desktop\",\"element\":\"b\",\"x\":1,\"y\":1|,\"x2\":3}}",
	PRE "\"scroll_desktop\",\"element\":\"l\",\"x\":1,\"y\":2,\"direction\":\"up\","
	    "\"scroll_size\":10|1}}",
	PRE "\"hotkey_desktop\",\"keys\":[\"a\"],\"repeat_count\":2|1}}",
	PRE "\"hotkey_desktop\",\"keys\":[\"a\",\"b\",\"c\",\"d\",\"e\"|,\"f\"]}}",
	PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"a\",\"b\",\"c\"|,\"d\"],"
	    "\"tap_keys\":[\"a\"]}}",
	PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"alt\"]|}}",
	PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"h|yper\"],\"tap_keys\":[\"a\"]}}",
	PRE "\"update_plan\",\"goals\":[|]}}",
	PRE "\"update_plan\",\"goals\":[{\"title\":\"a\",\"status\":\"|started\"}]}}",
	PRE "\"update_plan\",\"goals\":[{\"|status\":\"todo\",\"title\":\"a\"}]}}",
	PRE "\"ask_user\",\"|content\":\"which?\"}}", /* the question's name */
};

static void test_grammar(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (!accepts(good[i].text))
			fprintf(stderr, "refused: %s\n", good[i].text);
		CHECK(accepts(good[i].text));
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char text[512];
		const char *mark = strchr(bad[i], '|');
		snprintf(text, sizeof(text), "%.*s%s", (int)(mark - bad[i]), bad[i], mark + 1);
		bool complete = false;
		long at = reject_at(text, &complete);
		if (at != mark - bad[i])
			fprintf(stderr, "rejected at %ld, expected %ld: %s\n", at, (long)(mark - bad[i]),
				text);
		CHECK_INT_EQ(at, mark - bad[i]);
	}
	/* 20 goals, not 21. */
	char big[2048];
	size_t off = (size_t)snprintf(big, sizeof(big), PRE "\"update_plan\",\"goals\":[");
	for (int i = 0; i < IPC_MAX_PLAN_GOALS; i++)
		off += (size_t)snprintf(big + off, sizeof(big) - off,
					"%s{\"title\":\"g\",\"status\":\"todo\"}", i ? "," : "");
	bool complete;
	CHECK(reject_at(big, &complete) < 0);
	CHECK_INT_EQ(big[off], '\0');
	big[off] = ',';
	big[off + 1] = '\0';
	CHECK_INT_EQ(reject_at(big, &complete), (long)off);
}

static void test_parser(void)
{
	char err[512];
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct policy_step s;
		err[0] = '\0';
		int r = policy_nano_step_parse(good[i].text, strlen(good[i].text), &s, err, sizeof(err));
		if (r != 0)
			fprintf(stderr, "%s: %s\n", good[i].text, err);
		REQUIRE(r == 0);
		CHECK_INT_EQ(s.action.tool, good[i].tool);
		char *back = policy_nano_step_to_json(&s);
		CHECK_STR_EQ(back, good[i].text);
		free(back);
		policy_step_finish(&s);
	}

	/* The published defaults, written out by the serializer; note may be left out. */
	struct policy_step s;
	const char *t = "{\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"scroll_desktop\","
			"\"element\":\"l\",\"x\":1,\"y\":2,\"direction\":\"up\"}}";
	REQUIRE(policy_nano_step_parse(t, strlen(t), &s, err, sizeof(err)) == 0);
	CHECK(s.note == NULL);
	CHECK_INT_EQ(s.action.scroll_size, POLICY_NANO_DEFAULT_SCROLL_SIZE);
	char *back = policy_nano_step_to_json(&s);
	CHECK_STR_EQ(back, PRE "\"scroll_desktop\",\"element\":\"l\",\"x\":1,\"y\":2,"
			       "\"direction\":\"up\",\"scroll_size\":10}}");
	CHECK(accepts(back));
	free(back);
	policy_step_finish(&s);
	t = PRE "\"click_desktop\",\"element\":\"e\",\"x\":1,\"y\":2}}";
	REQUIRE(policy_nano_step_parse(t, strlen(t), &s, err, sizeof(err)) == 0);
	back = policy_nano_step_to_json(&s);
	CHECK_STR_EQ(back, PRE "\"click_desktop\",\"element\":\"e\",\"x\":1,\"y\":2,"
			       "\"button\":\"left\"}}");
	free(back);
	policy_step_finish(&s);
	t = PRE "\"hotkey_desktop\",\"keys\":[\"ctrl\",\"s\"]}}";
	REQUIRE(policy_nano_step_parse(t, strlen(t), &s, err, sizeof(err)) == 0);
	CHECK_INT_EQ(s.action.repeat_count, 1);
	policy_step_finish(&s);
	/* Any JSON layout parses (the schema, not the grammar, is the parser's judge). */
	t = "{ \"tool_call\": {\"y\": 2, \"x\": 1, \"tool_name\": \"drag_to_desktop\","
	    " \"element\": \"e\"}, \"thought\": \"t\", \"note\": null }";
	REQUIRE(policy_nano_step_parse(t, strlen(t), &s, err, sizeof(err)) == 0);
	CHECK_INT_EQ(s.action.tool, IPC_TOOL_DRAG_TO);
	policy_step_finish(&s);

	/* Bad steps: the message names the field. */
	static const struct {
		const char *text, *msg;
		int code;
	} errs[] = {
		{PRE "\"click\",\"element\":\"e\",\"x\":1,\"y\":1}}",
		 "tool_call.tool_name: unknown tool 'click' (one of update_plan", -EINVAL},
		{PRE "\"scroll_desktop\",\"element\":\"l\",\"x\":1,\"y\":2,\"direction\":\"up\","
		     "\"scroll_size\":101}}",
		 "tool_call.scroll_size: 101 is out of range 1..100", -EINVAL},
		{PRE "\"hotkey_desktop\",\"keys\":[\"a\"],\"repeat_count\":21}}",
		 "tool_call.repeat_count: 21 is out of range 1..20", -EINVAL},
		{PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"alt\"]}}",
		 "tool_call.tap_keys: missing (required for 'hold_and_tap_key_desktop')", -EINVAL},
		{PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"a\",\"b\",\"c\",\"d\"],"
		     "\"tap_keys\":[\"a\"]}}",
		 "tool_call.hold_keys: 4 keys exceed the limit of 3", -E2BIG},
		{PRE "\"hold_and_tap_key_desktop\",\"hold_keys\":[\"alt\"],\"tap_keys\":[\"é\"]}}",
		 "tool_call.tap_keys[0]: '\xc3\xa9' is not a key name of the schema", -EINVAL},
		{PRE "\"update_plan\",\"goals\":[{\"title\":\"a\",\"status\":\"started\"}]}}",
		 "tool_call.goals[0].status: expected one of todo, running, done, failed", -EINVAL},
		{PRE "\"drag_to_desktop\",\"element\":\"e\",\"x\":1,\"y\":1,\"x2\":2}}",
		 "tool_call.x2: unknown field for tool 'drag_to'", -EINVAL},
		{PRE "\"move_to_desktop\",\"x\":1,\"y\":1}}",
		 "tool_call.element: missing (required for 'move_to_desktop')", -EINVAL},
		{"{\"note\":null,\"tool_call\":{\"tool_name\":\"answer\",\"content\":\"x\"}}",
		 "thought: missing", -EINVAL},
		{"{\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"answer\",\"content\":\"x\"},"
		 "\"plan\":1}",
		 "plan: unknown field", -EINVAL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(errs); i++) {
		err[0] = '\0';
		int r = policy_nano_step_parse(errs[i].text, strlen(errs[i].text), &s, err, sizeof(err));
		CHECK_INT_EQ(r, errs[i].code);
		if (strncmp(err, errs[i].msg, strlen(errs[i].msg)) != 0) {
			fprintf(stderr, "for %s\n  expected: %s\n  got: %s\n", errs[i].text, errs[i].msg, err);
			test_failures++;
		}
	}
	/* A goal title over its limit. */
	char big[IPC_MAX_GOAL_TITLE_BYTES + 256];
	int n = snprintf(big, sizeof(big), PRE "\"update_plan\",\"goals\":[{\"title\":\"");
	memset(big + n, 'a', IPC_MAX_GOAL_TITLE_BYTES + 1);
	snprintf(big + n + IPC_MAX_GOAL_TITLE_BYTES + 1, 64, "\",\"status\":\"todo\"}]}}");
	CHECK_INT_EQ(policy_nano_step_parse(big, strlen(big), &s, err, sizeof(err)), -E2BIG);
	CHECK_STR_EQ(err, "tool_call.goals[0].title: 513 bytes exceed the limit of 512");
}

/* A deterministic generator (no floating point). */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* Steps sampled from the grammar, byte by byte among the printable ASCII bytes it allows
 * (closing quotes and brackets preferred once the text is long, so every walk ends): each
 * parses, means a tool of the table, and serializes to a step the grammar accepts. */
static void test_sampled(void)
{
	size_t n_tools = 0;
	const struct ipc_model_tool *tools[32];
	while (n_tools < 32 && (tools[n_tools] = ipc_model_tool(IPC_POLICY_FORMAT_HOLO_NANO, n_tools)))
		n_tools++;
	bool seen[32] = {0};
	for (int k = 0; k < 600; k++) {
		char text[8192];
		size_t len = 0;
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		while (!policy_matcher_is_complete(&m) && len + 1 < sizeof(text)) {
			uint8_t allowed[96];
			size_t n = 0;
			for (int b = 0x20; b < 0x7f; b++) {
				struct policy_matcher c = m;
				uint8_t byte = (uint8_t)b;
				if (policy_matcher_feed(&c, &byte, 1) == 0)
					allowed[n++] = byte;
			}
			REQUIRE(n > 0);
			uint8_t pick = allowed[next_rand() % n];
			/* closers in order of preference: a quote ends a string first */
			static const char closers[] = "\"]}";
			for (size_t c = 0; len > 48 + (size_t)(k % 64) && c < 3; c++)
				if (memchr(allowed, closers[c], n)) {
					pick = (uint8_t)closers[c];
					break;
				}
			REQUIRE(policy_matcher_feed(&m, &pick, 1) == 0);
			text[len++] = (char)pick;
		}
		text[len] = '\0';
		REQUIRE(policy_matcher_is_complete(&m));
		struct policy_step s;
		char err[512] = "";
		int r = policy_nano_step_parse(text, len, &s, err, sizeof(err));
		if (r != 0)
			fprintf(stderr, "sampled step refused: %s\n  %s\n", text, err);
		CHECK_INT_EQ(r, 0);
		if (r != 0)
			continue;
		for (size_t t = 0; t < n_tools; t++)
			if (tools[t]->tool == s.action.tool)
				seen[t] = true;
		if (dump)
			fprintf(dump, "%s\n", text);
		char *back = policy_nano_step_to_json(&s);
		CHECK(back && accepts(back));
		free(back);
		policy_step_finish(&s);
	}
	for (size_t t = 0; t < n_tools; t++) {
		if (!seen[t])
			fprintf(stderr, "no sampled step used %s\n", tools[t]->name);
		CHECK(seen[t]);
	}
}

/* Constrained decoding over the holo-nano grammar: a synthetic vocabulary (every byte, words
 * of the layout spanning several nodes, a stop id). At every state of random masked walks the
 * mask is exactly the set of tokens the grammar accepts, the stop allowed only when the step
 * is complete; every walk ends in a step the parser accepts. */
static void test_masked(void)
{
	static const char *const words[] = {
		"{\"note\":null,\"thought\":\"",
		"\",\"tool_call\":{\"tool_name\":\"",
		"update_plan\",\"goals\":[{\"title\":\"",
		"\",\"status\":\"",
		"running\"},",
		"done\"}]}}",
		"{\"title\":\"",
		"_desktop\"",
		"\",\"x\":",
		",\"y\":",
		"}}",
		"hold_and_tap_key",
		"\"],\"tap_keys\":[\"",
		"\",\"",
		"ctrl",
		"shift\"",
		",\"scroll_size\":",
		"100",
		"20}}",
		"\"]}}",
	};
	enum { N_BYTES = 256, STOP = N_BYTES + ARRAY_SIZE(words), N_TOKENS = STOP + 1 };
	const uint8_t *bytes[N_TOKENS];
	size_t lens[N_TOKENS];
	uint8_t single[N_BYTES];
	for (int i = 0; i < N_BYTES; i++) {
		single[i] = (uint8_t)i;
		bytes[i] = &single[i];
		lens[i] = 1;
	}
	for (size_t w = 0; w < ARRAY_SIZE(words); w++) {
		bytes[N_BYTES + w] = (const uint8_t *)words[w];
		lens[N_BYTES + w] = strlen(words[w]);
	}
	bytes[STOP] = NULL;
	lens[STOP] = 0;
	int32_t stop = STOP;
	struct policy_masker *mk = policy_masker_create_raw(g, bytes, lens, N_TOKENS, &stop, 1);
	REQUIRE(mk);
	uint32_t bits[(N_TOKENS + 31) / 32];
	size_t states = 0;
	for (int k = 0; k < 150; k++) {
		char text[8192];
		size_t len = 0;
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		for (;;) {
			int n = policy_masker_compute(mk, &m, bits);
			REQUIRE(n > 0);
			states++;
			int32_t allowed[N_TOKENS];
			int n_allowed = 0;
			for (int id = 0; id < N_TOKENS; id++) {
				bool on = bits[id / 32] >> (id % 32) & 1;
				bool want;
				if (id == STOP) {
					want = policy_matcher_is_complete(&m);
				} else {
					struct policy_matcher c = m;
					want = !policy_matcher_is_complete(&m) &&
					       policy_matcher_feed(&c, bytes[id], lens[id]) == 0;
				}
				if (on != want) {
					fprintf(stderr,
						"mask of token %d is %d, grammar says %d after: "
						"%.*s\n",
						id, on, want, (int)len, text);
					test_failures++;
				}
				if (on)
					allowed[n_allowed++] = id;
			}
			CHECK_INT_EQ(n_allowed, n);
			/* Prefer the multi-byte words half of the time; closers once long. */
			int32_t pick = allowed[next_rand() % (uint32_t)n_allowed];
			if (next_rand() % 2)
				for (int i = 0; i < n_allowed; i++)
					if (allowed[i] >= N_BYTES && next_rand() % 3 == 0)
						pick = allowed[i];
			static const char closers[] = "\"]}";
			for (size_t c = 0; len > 40 + (size_t)(k % 64) && c < 3; c++)
				if (bits[(uint8_t)closers[c] / 32] >> ((uint8_t)closers[c] % 32) & 1) {
					pick = (uint8_t)closers[c];
					break;
				}
			if (bits[STOP / 32] >> (STOP % 32) & 1)
				pick = STOP;
			int r = policy_masker_feed(mk, &m, pick);
			if (r == 1)
				break;
			REQUIRE(r == 0);
			REQUIRE(len + lens[pick] < sizeof(text));
			memcpy(text + len, bytes[pick], lens[pick]);
			len += lens[pick];
		}
		struct policy_step s;
		char err[512] = "";
		int r = policy_nano_step_parse(text, len, &s, err, sizeof(err));
		if (r != 0)
			fprintf(stderr, "masked walk refused: %.*s\n  %s\n", (int)len, text, err);
		CHECK_INT_EQ(r, 0);
		if (r == 0)
			policy_step_finish(&s);
		if (dump)
			fprintf(dump, "%.*s\n", (int)len, text);
	}
	fprintf(stderr, "masked walks: %zu states compared\n", states);
	policy_masker_destroy(mk);
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	char chunk[4096];
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + n + 1 > cap) {
			cap = 2 * (len + n + 1);
			buf = xrealloc(buf, cap);
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	if (buf)
		buf[len] = '\0';
	*ret_len = len;
	return buf;
}

/* The system text: the template filled as str.format fills it, the schema block appended as
 * the port appends it; without a password the sentence naming it is left out. With the local
 * copy of the published texts (tools/policy_published.py), the rendering of the published
 * example (password "password", 50 steps, 1800 s, Linux, 2026-11-21) is the port's, byte for
 * byte. */
static void test_system_text(void)
{
	static const char tmpl[] =
		"Date {start_time}. {{literal}}\n"
		"1. **Dialogs**: Handle them. The password is `{password}` \xe2\x80\x94 use it rarely.\n"
		"Budget: {max_steps} steps or {max_time_s}s\nEnvironment: Local desktop ({os_name})\n";
	struct policy_nano_env env = {"2026-11-21", 7, 120, "Linux", "hunter2"};
	char err[256] = "", *out = NULL;
	REQUIRE(policy_nano_system_text(tmpl, strlen(tmpl), "{\"a\": 1}", 8, &env, &out, err, sizeof(err)) ==
		0);
	CHECK_STR_EQ(out, "Date 2026-11-21. {literal}\n"
			  "1. **Dialogs**: Handle them. The password is `hunter2` \xe2\x80\x94 use it "
			  "rarely.\nBudget: 7 steps or 120s\nEnvironment: Local desktop (Linux)\n"
			  "\n<output_format>\n```json\n{\"a\": 1}\n```\n</output_format>\n");
	free(out);
	env.password = NULL;
	REQUIRE(policy_nano_system_text(tmpl, strlen(tmpl), "{}", 2, &env, &out, err, sizeof(err)) == 0);
	CHECK_STR_EQ(out, "Date 2026-11-21. {literal}\n1. **Dialogs**: Handle them.\n"
			  "Budget: 7 steps or 120s\nEnvironment: Local desktop (Linux)\n"
			  "\n<output_format>\n```json\n{}\n```\n</output_format>\n");
	free(out);
	static const struct {
		const char *tmpl, *msg;
	} bad_tmpl[] = {
		{"a {max_step} b", "system template: unknown field 'max_step' at byte 2"},
		{"a { b", "system template: unknown field"},
		{"a } b", "system template: a single '}' at byte 2"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad_tmpl); i++) {
		out = NULL;
		CHECK_INT_EQ(policy_nano_system_text(bad_tmpl[i].tmpl, strlen(bad_tmpl[i].tmpl), "{}", 2,
						     &env, &out, err, sizeof(err)),
			     -EINVAL);
		CHECK(out == NULL);
		if (strncmp(err, bad_tmpl[i].msg, strlen(bad_tmpl[i].msg)) != 0) {
			fprintf(stderr, "expected %s\n  got %s\n", bad_tmpl[i].msg, err);
			test_failures++;
		}
	}
	env.max_steps = 0;
	CHECK_INT_EQ(policy_nano_system_text(tmpl, strlen(tmpl), "{}", 2, &env, &out, err, sizeof(err)),
		     -EINVAL);

	/* The published texts, when a local copy exists. */
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char path[3][1024];
	static const char *const names[] = {"system-template.txt", "step-schema.json", "system-prompt.txt"};
	char *text[3];
	size_t len[3];
	for (int k = 0; k < 3; k++) {
		snprintf(path[k], sizeof(path[k]), "%s/tests/fixtures/policy/published/local/%s",
			 root ? root : ".", names[k]);
		text[k] = slurp(path[k], &len[k]);
	}
	if (text[0] && text[1] && text[2]) {
		struct policy_nano_env pub = {"2026-11-21", 50, 1800, "Linux", "password"};
		REQUIRE(policy_nano_system_text(text[0], len[0], text[1], len[1], &pub, &out, err,
						sizeof(err)) == 0);
		CHECK_INT_EQ(strlen(out), len[2]);
		CHECK(strcmp(out, text[2]) == 0);
		free(out);
		pub.password = NULL;
		REQUIRE(policy_nano_system_text(text[0], len[0], text[1], len[1], &pub, &out, err,
						sizeof(err)) == 0);
		CHECK(strstr(out, "password for this machine") == NULL);
		CHECK(strstr(out, "Handle or dismiss as needed.\n") != NULL);
		fprintf(stderr, "the published system prompt: %zu bytes, rendered byte for byte\n", len[2]);
		free(out);
	} else {
		fprintf(stderr, "no local copy of the published texts: the published rendering is "
				"not compared (tools/policy_published.py)\n");
	}
	for (int k = 0; k < 3; k++)
		free(text[k]);
}

/* The published copy holod reads (policy_published_load): a folder without it is -ENOENT, files
 * whose SHA-256s differ -EBADMSG naming the file, a file over the limit -E2BIG; with the local
 * copy the format's system text is the published template filled with the task's values, no
 * password sentence; without it, holod's own text. */
static void test_published_load(void)
{
	char dir[] = "/tmp/test-policy-nano.XXXXXX", err[512] = "";
	struct policy_published p = {0};
	REQUIRE(mkdtemp(dir));
	CHECK_INT_EQ(policy_published_load(dir, &p, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "system-template.txt"));
	char *f = xasprintf("%s/system-template.txt", dir), *g2 = xasprintf("%s/step-schema.json", dir);
	FILE *o = fopen(f, "wb");
	REQUIRE(o);
	fputs("You are {os_name}.", o);
	fclose(o);
	o = fopen(g2, "wb");
	REQUIRE(o);
	fputs("{}", o);
	fclose(o);
	CHECK_INT_EQ(policy_published_load(dir, &p, err, sizeof(err)), -EBADMSG);
	CHECK(strstr(err, "system-template.txt: SHA-256 ") && strstr(err, POLICY_NANO_TEMPLATE_SHA256));
	o = fopen(f, "wb");
	REQUIRE(o);
	for (int i = 0; i <= POLICY_NANO_MAX_TEMPLATE_BYTES; i++)
		fputc('x', o);
	fclose(o);
	CHECK_INT_EQ(policy_published_load(dir, &p, err, sizeof(err)), -E2BIG);
	CHECK(p.nano_template == NULL);
	unlink(f);
	unlink(g2);
	rmdir(dir);
	free(f);
	free(g2);

	struct policy_env env = {.screen_width = 640,
				 .screen_height = 400,
				 .date = "2026-11-21",
				 .max_steps = 7,
				 .max_time_s = 120};
	char *own = policy_format_holo_nano.system_text(&env);
	REQUIRE(own);
	CHECK(strstr(own, "You have at most 7 steps or 120 seconds."));
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char *local = xasprintf("%s/tests/fixtures/policy/published/local", root ? root : ".");
	int r = policy_published_load(local, &p, err, sizeof(err));
	if (r == 0) {
		env.published = &p;
		char *pub = policy_format_holo_nano.system_text(&env), *want = NULL;
		struct policy_nano_env ne = {"2026-11-21", 7, 120, "Linux", NULL};
		REQUIRE(policy_nano_system_text(p.nano_template, p.nano_template_len, p.nano_schema,
						p.nano_schema_len, &ne, &want, err, sizeof(err)) == 0);
		CHECK(pub && strcmp(pub, want) == 0);
		CHECK(strcmp(pub, own) != 0);
		fprintf(stderr, "the published copy loads and fills the format's system text\n");
		free(pub);
		free(want);
		policy_published_finish(&p);
	} else {
		fprintf(stderr, "no local published copy (%s): its loading is not compared\n", err);
	}
	free(local);
	free(own);
}

/* A grounding's task in each format's words (docs/policy.md, "Grounding"): the target and the
 * point's layout in both; holo-nano's says the harness's coordinates, 0..1000 normalized against
 * the screenshot from its top-left corner, and calls the target an element, as its tools do. */
static void test_ground_text(void)
{
	const struct policy_format *const fmts[] = {&policy_format_holo3, &policy_format_holo_nano};
	char *text[2];

	for (size_t i = 0; i < 2; i++) {
		REQUIRE(fmts[i]->ground_text);
		text[i] = fmts[i]->ground_text("the \"Save\" button");
		REQUIRE(text[i]);
		CHECK(strstr(text[i], "the \"Save\" button") != NULL);
		CHECK(strstr(text[i], "{\"x\":X,\"y\":Y}") != NULL);
		CHECK(strstr(text[i], "1000") != NULL);
	}
	CHECK(strcmp(text[0], text[1]) != 0);
	CHECK(strstr(text[1], "element") != NULL);
	CHECK(strstr(text[1], "integers in [0, 1000], normalized against the screenshot") != NULL);
	CHECK(strstr(text[1], "top-left corner") != NULL);
	for (size_t i = 0; i < 2; i++)
		free(text[i]);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--dump") == 0)
		dump = stdout;
	g = policy_grammar_create_holo_nano();
	REQUIRE(g);
	test_grammar();
	test_parser();
	test_sampled();
	test_masked();
	test_system_text();
	test_published_load();
	test_ground_text();
	policy_grammar_destroy(g);
	return test_exit();
}
