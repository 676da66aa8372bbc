/* Jump-forward (docs/policy.md): the grammar reports the bytes it forces after a prefix (the
 * holo3 and holo-nano step grammars: literal runs, none at a choice point or at the end, and on
 * every prefix of the corpus a run that the step itself continues with); the masker turns a run
 * into ids of the tiny agent model's tokenizer: the canonical encoding of the run, each id
 * allowed by the mask in turn, the last one left to the model exactly when a longer token could
 * extend it past the ids. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "engine.h"
#include "policy-internal.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

/* The run forced after prefix, as a NUL-terminated string. */
static const char *forced_after(const struct policy_grammar *g, const char *prefix)
{
	static char buf[POLICY_MAX_FORCED_BYTES + 1];
	struct policy_matcher m;
	policy_matcher_init(&m, g);
	REQUIRE(policy_matcher_feed(&m, prefix, strlen(prefix)) == 0);
	size_t n = policy_matcher_forced(&m, (uint8_t *)buf, POLICY_MAX_FORCED_BYTES);
	buf[n] = '\0';
	return buf;
}

static void test_holo3_runs(void)
{
	struct policy_grammar *g = policy_grammar_create_holo3();
	REQUIRE(g);
	CHECK_STR_EQ(forced_after(g, ""), "{\"note\":");
	CHECK_STR_EQ(forced_after(g, "{\""), "note\":");
	CHECK_STR_EQ(forced_after(g, "{\"note\":"), ""); /* null or a string */
	CHECK_STR_EQ(forced_after(g, "{\"note\":n"), "ull,\"thought\":\"");
	CHECK_STR_EQ(forced_after(g, "{\"note\":\""), ""); /* string content */
	CHECK_STR_EQ(forced_after(g, "{\"note\":null,\"thought\":\"t\""), ",\"tool_call\":{\"tool_name\":\"");
	const char *tc = "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"";
	char p[512];
	CHECK_STR_EQ(forced_after(g, tc), ""); /* which tool */
	snprintf(p, sizeof(p), "%sc", tc);
	CHECK_STR_EQ(forced_after(g, p), "lick\",\"element\":\"");
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\"", tc);
	CHECK_STR_EQ(forced_after(g, p), ",\"x\":");
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":5", tc);
	CHECK_STR_EQ(forced_after(g, p), ""); /* another digit or the comma */
	/* 1000 is the largest coordinate: no digit fits after it */
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1000", tc);
	CHECK_STR_EQ(forced_after(g, p), ",\"y\":");
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1,\"y\":2", tc);
	CHECK_STR_EQ(forced_after(g, p), ""); /* a digit, ,"button": or }} */
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1,\"y\":2}", tc);
	CHECK_STR_EQ(forced_after(g, p), "}");
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1,\"y\":2}}", tc);
	CHECK_STR_EQ(forced_after(g, p), ""); /* the end */
	/* case-folded key names are a choice between two bytes */
	snprintf(p, sizeof(p), "%shotkey\",\"keys\":[\"", tc);
	CHECK_STR_EQ(forced_after(g, p), "");
	/* cap */
	struct policy_matcher m;
	uint8_t two[2];
	policy_matcher_init(&m, g);
	CHECK_INT_EQ(policy_matcher_forced(&m, two, 2), 2);
	CHECK(memcmp(two, "{\"", 2) == 0);

	/* On every prefix of every corpus step, the step goes on with the forced run. */
	struct corpus c = {0};
	corpus_build(&c);
	size_t runs = 0;
	for (size_t i = 0; i < c.n; i++) {
		const char *s = c.items[i];
		size_t n = strlen(s);
		policy_matcher_init(&m, g);
		for (size_t k = 0; k <= n; k++) {
			uint8_t run[POLICY_MAX_FORCED_BYTES];
			size_t f = policy_matcher_forced(&m, run, sizeof(run));
			if (!(k + f <= n && memcmp(run, s + k, f) == 0)) {
				fprintf(stderr, "forced run at %zu of %s: %.*s\n", k, s, (int)f,
					(const char *)run);
				CHECK(false);
				break;
			}
			runs += f > 0;
			if (k < n)
				REQUIRE(policy_matcher_feed(&m, s + k, 1) == 0);
		}
	}
	CHECK(runs > c.n * 10);
	corpus_free(&c);
	policy_grammar_destroy(g);
}

static void test_nano_runs(void)
{
	struct policy_grammar *g = policy_grammar_create_holo_nano();
	REQUIRE(g);
	CHECK_STR_EQ(forced_after(g, ""), "{\"note\":");
	CHECK_STR_EQ(forced_after(g, "{\"note\":null,\"thought\":\"t\""), ",\"tool_call\":{\"tool_name\":\"");
	const char *tc = "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"";
	char p[512];
	snprintf(p, sizeof(p), "%sc", tc);
	CHECK_STR_EQ(forced_after(g, p), "lick_desktop\",\"element\":\"");
	snprintf(p, sizeof(p), "%shol", tc);
	CHECK_STR_EQ(forced_after(g, p), "d_and_tap_key_desktop\",\"hold_keys\":[\"");
	snprintf(p, sizeof(p), "%sdr", tc);
	CHECK_STR_EQ(forced_after(g, p), "ag_to_desktop\",\"element\":\"");
	snprintf(p, sizeof(p), "%sd", tc);
	CHECK_STR_EQ(forced_after(g, p), ""); /* double_click_desktop or drag_to_desktop */
	policy_grammar_destroy(g);
}

/* The ids' bytes, appended to out. */
static size_t ids_bytes(const struct engine_tokenizer *tok, const int32_t *ids, size_t n, char *out)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b;
		size_t bl;
		REQUIRE(engine_tokenizer_token_bytes(tok, ids[i], &b, &bl) == 0);
		memcpy(out + len, b, bl);
		len += bl;
	}
	out[len] = '\0';
	return len;
}

/* Whether an id allowed at state m has bytes that start with prefix[0..n) and are longer. */
static bool allowed_extension(struct policy_masker *mk, const struct engine_tokenizer *tok,
			      const struct policy_matcher *m, const char *prefix, size_t n)
{
	size_t n_tok = policy_masker_n_tokens(mk);
	uint32_t *bits = calloc((n_tok + 31) / 32, sizeof(*bits));
	bool found = false;
	REQUIRE(bits && policy_masker_compute(mk, m, bits) > 0);
	for (size_t id = 0; id < n_tok && !found; id++) {
		const uint8_t *b;
		size_t bl;
		if (!(bits[id / 32] >> (id % 32) & 1) ||
		    engine_tokenizer_token_bytes(tok, (int32_t)id, &b, &bl) < 0)
			continue;
		found = bl > n && memcmp(b, prefix, n) == 0;
	}
	free(bits);
	return found;
}

/* The ids forced after prefix: their properties, and their number. */
static size_t check_forced(struct policy_masker *mk, const struct engine_tokenizer *tok,
			   const struct policy_grammar *g, const char *prefix)
{
	struct policy_matcher m, before;
	uint8_t run[POLICY_MAX_FORCED_BYTES + 1];
	int32_t ids[POLICY_MAX_FORCED_BYTES], *canon = NULL;
	char text[4 * POLICY_MAX_FORCED_BYTES];
	size_t n_canon = 0;

	policy_matcher_init(&m, g);
	REQUIRE(policy_matcher_feed(&m, prefix, strlen(prefix)) == 0);
	before = m;
	size_t n_run = policy_matcher_forced(&m, run, POLICY_MAX_FORCED_BYTES);
	int n = policy_masker_forced(mk, tok, &m, ids, ARRAY_SIZE(ids));
	REQUIRE(n >= 0);
	CHECK(memcmp(&m, &before, sizeof(m)) == 0);
	if (n_run == 0) {
		CHECK_INT_EQ(n, 0);
		return 0;
	}
	/* a prefix of the run's canonical encoding */
	REQUIRE(engine_tokenizer_encode(tok, (const char *)run, n_run, false, &canon, &n_canon) == 0);
	REQUIRE((size_t)n <= n_canon);
	CHECK(memcmp(ids, canon, (size_t)n * sizeof(*ids)) == 0);
	/* each allowed in turn, their bytes the run's */
	size_t len = ids_bytes(tok, ids, (size_t)n, text);
	CHECK(len <= n_run && memcmp(text, run, len) == 0);
	for (int i = 0; i < n; i++)
		REQUIRE(policy_masker_feed(mk, &m, ids[i]) == 0);
	/* the boundary rule */
	if ((size_t)n < n_canon) {
		/* the first id left out: a longer allowed token could have taken its place */
		size_t cl = ids_bytes(tok, canon + n, 1, text);
		CHECK(allowed_extension(mk, tok, &m, text, cl));
	} else if (n > 0 && !policy_matcher_is_complete(&m)) {
		/* all kept: no token extends the last one past the run */
		struct policy_matcher b2 = before;
		for (int i = 0; i + 1 < n; i++)
			REQUIRE(policy_masker_feed(mk, &b2, ids[i]) == 0);
		size_t ll = ids_bytes(tok, ids + n - 1, 1, text);
		CHECK(!allowed_extension(mk, tok, &b2, text, ll));
	}
	free(canon);
	return (size_t)n;
}

static void test_tokens(const char *root)
{
	char path[4096], err[512];
	snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny-agent/tokenizer.json", root);
	struct engine_tokenizer *tok = engine_tokenizer_load(path, err, sizeof(err));
	if (!tok)
		fprintf(stderr, "%s\n", err);
	REQUIRE(tok);
	struct policy_grammar *g = policy_grammar_create_holo3();
	REQUIRE(g);
	int32_t stop = engine_tokenizer_token_id(tok, "<SPECIAL_12>");
	REQUIRE(stop >= 0);
	struct policy_masker *mk = policy_masker_create(g, tok, engine_tokenizer_vocab_size(tok), &stop, 1);
	REQUIRE(mk);

	const char *tc = "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"";
	char p[512];
	CHECK(check_forced(mk, tok, g, "") > 0);
	CHECK(check_forced(mk, tok, g, "{\"note\":n") > 0);
	CHECK(check_forced(mk, tok, g, "{\"note\":null,\"thought\":\"t\"") > 3);
	CHECK_INT_EQ(check_forced(mk, tok, g, "{\"note\":\""), 0);
	CHECK_INT_EQ(check_forced(mk, tok, g, tc), 0);
	snprintf(p, sizeof(p), "%sc", tc);
	CHECK(check_forced(mk, tok, g, p) > 0);
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1000", tc);
	CHECK(check_forced(mk, tok, g, p) > 0);
	/* the end of the step: the closing brace is kept, nothing can follow it */
	snprintf(p, sizeof(p), "%sclick\",\"element\":\"e\",\"x\":1,\"y\":2}", tc);
	CHECK_INT_EQ(check_forced(mk, tok, g, p), 1);
	/* cap, and errors */
	struct policy_matcher m;
	int32_t one[1];
	policy_matcher_init(&m, g);
	CHECK(policy_masker_forced(mk, tok, &m, one, 1) <= 1);
	CHECK_INT_EQ(policy_masker_forced(mk, tok, &m, one, 0), 0);
	CHECK_INT_EQ(policy_masker_forced(mk, NULL, &m, one, 1), -EINVAL);
	struct policy_grammar *other = policy_grammar_create_point();
	REQUIRE(other);
	policy_matcher_init(&m, other);
	CHECK_INT_EQ(policy_masker_forced(mk, tok, &m, one, 1), -EINVAL);
	policy_grammar_destroy(other);

	/* Over the corpus: at every prefix, the properties hold; structure is jumped over. */
	struct corpus c = {0};
	corpus_build(&c);
	size_t total = 0;
	for (size_t i = 0; i < c.n; i += 7) {
		const char *s = c.items[i];
		for (size_t k = 0; k < strlen(s); k++) {
			snprintf(p, sizeof(p), "%.*s", (int)k, s);
			if (strlen(p) == k)
				total += check_forced(mk, tok, g, p);
		}
	}
	CHECK(total > 0);
	corpus_free(&c);

	policy_masker_destroy(mk);
	policy_grammar_destroy(g);
	engine_tokenizer_destroy(tok);
}

int main(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	test_holo3_runs();
	test_nano_runs();
	test_tokens(root ? root : ".");
	return test_exit();
}
