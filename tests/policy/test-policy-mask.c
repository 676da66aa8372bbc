/* Token masks are exact: the cached trie-walk mask equals the brute-force mask (every token's
 * bytes fed through the automaton on its own) at many states, for the committed Tekken-style
 * tokenizer fixture and for a synthetic vocabulary whose tokens span JSON structure ("},",
 * "\":\"", partial UTF-8, escapes, "</think>" in pieces), including the stop tokens, states
 * near string budgets and the states of a think block, open and closing.
 * Then random-logit decoding under the mask always ends in a step that parses: the guarantee the
 * agent relies on (even random weights give schema-valid steps). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "engine.h"
#include "policy-internal.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct policy_grammar *g;

/* A vocabulary as the brute force sees it: bytes per id (NULL: never allowed) and stop ids. */
struct vocab {
	size_t n;
	const uint8_t **bytes;
	size_t *lens;
	int32_t stops[2];
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static bool is_stop(const struct vocab *v, int32_t id)
{
	return id == v->stops[0] || id == v->stops[1];
}

static void brute_mask(const struct vocab *v, const struct policy_matcher *m, uint32_t *bits)
{
	memset(bits, 0, (v->n + 31) / 32 * sizeof(*bits));
	for (size_t id = 0; id < v->n; id++) {
		bool ok;
		if (is_stop(v, (int32_t)id)) {
			ok = policy_matcher_is_complete(m);
		} else if (!v->bytes[id] || v->lens[id] == 0) {
			ok = false;
		} else {
			struct policy_matcher t = *m;
			ok = policy_matcher_feed(&t, v->bytes[id], v->lens[id]) == 0;
		}
		if (ok)
			bits[id / 32] |= 1u << (id % 32);
	}
}

struct stats {
	size_t states, mismatches;
};

static void compare_at(const struct vocab *v, struct policy_masker *mk, const struct policy_matcher *m,
		       struct stats *st)
{
	size_t words = (v->n + 31) / 32;
	uint32_t *fast = calloc(words, sizeof(*fast)), *slow = calloc(words, sizeof(*slow));
	int n = policy_masker_compute(mk, m, fast);
	brute_mask(v, m, slow);
	int count = 0;
	for (size_t w = 0; w < words; w++)
		count += __builtin_popcount(slow[w]);
	CHECK(n > 0); /* never a dead end */
	CHECK_INT_EQ(n, count);
	if (memcmp(fast, slow, words * sizeof(*fast)) != 0) {
		if (st->mismatches++ < 5) {
			for (size_t id = 0; id < v->n; id++) {
				bool a = fast[id / 32] >> (id % 32) & 1, b = slow[id / 32] >> (id % 32) & 1;
				if (a != b)
					fprintf(stderr, "node %u sub %u len %u: id %zu fast %d brute %d\n",
						m->node, m->sub, m->len, id, a, b);
			}
		}
	}
	/* Applying the mask to logits forbids exactly the ids outside it. */
	float *logits = malloc(v->n * sizeof(*logits));
	for (size_t i = 0; i < v->n; i++)
		logits[i] = (float)i;
	CHECK_INT_EQ(policy_masker_apply(mk, m, logits), count);
	for (size_t i = 0; i < v->n; i++)
		if ((slow[i / 32] >> (i % 32) & 1) != (logits[i] != -INFINITY))
			st->mismatches++;
	free(logits);
	st->states++;
	free(fast);
	free(slow);
}

/* States: every byte prefix of some corpus steps, a sample of the others' prefixes, and the
 * last bytes of every string budget. */
static void compare_states(const struct vocab *v, struct policy_masker *mk, const char *what)
{
	struct corpus c = {0};
	struct stats st = {0};
	corpus_build(&c);
	for (size_t i = 0; i < c.n; i++) {
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		size_t n = strlen(c.items[i]);
		size_t stride = i % 15 == 0 ? 1 : 17 + i % 5;
		for (size_t k = 0; k <= n; k++) {
			if (k % stride == 0 || k == n)
				compare_at(v, mk, &m, &st);
			if (k < n)
				REQUIRE(policy_matcher_feed(&m, c.items[i] + k, 1) == 0);
		}
	}
	/* Near each string's budget: note, thought, element, content, with plain bytes and after
	 * the start of a multi-byte character or an escape. */
	static const char *const heads[] = {
		"{\"note\":\"",
		"{\"note\":null,\"thought\":\"",
		"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"move\",\"element\":\"",
		"{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":\"answer\",\"content\":\"",
	};
	static const size_t maxes[] = {POLICY_MAX_NOTE_BYTES, POLICY_MAX_THOUGHT_BYTES,
				       POLICY_MAX_ELEMENT_BYTES, POLICY_MAX_CONTENT_BYTES};
	static const char *const tails[] = {"", "\xe6", "\\", "\\u", "\\ud83d", "\xf0\x9f"};
	char *fill = malloc(POLICY_MAX_CONTENT_BYTES);
	memset(fill, 'a', POLICY_MAX_CONTENT_BYTES);
	for (size_t h = 0; h < ARRAY_SIZE(heads); h++) {
		for (size_t room = 0; room <= 70; room++) {
			for (size_t t = 0; t < ARRAY_SIZE(tails); t++) {
				struct policy_matcher m;
				policy_matcher_init(&m, g);
				REQUIRE(policy_matcher_feed(&m, heads[h], strlen(heads[h])) == 0);
				REQUIRE(policy_matcher_feed(&m, fill, maxes[h] - room) == 0);
				if (policy_matcher_feed(&m, tails[t], strlen(tails[t])) < 0)
					continue;
				if (room < 14 || room % 5 == 0)
					compare_at(v, mk, &m, &st);
			}
		}
	}
	free(fill);
	fprintf(stderr, "%s: %zu states compared, %zu mismatches\n", what, st.states, st.mismatches);
	CHECK(st.states > 1000);
	CHECK_INT_EQ(st.mismatches, 0);
	uint64_t hits, misses;
	policy_masker_stats(mk, &hits, &misses);
	/* Cached masks were used; the budget states alone (about 500 distinct string states)
	 * outnumber the cache entries, so the comparison also covers masks computed after the
	 * cache started over. */
	CHECK(hits > 0);
	CHECK(misses > 0);
	corpus_free(&c);
}

/* Thinking states: every byte of a think block, its "</think>", the gap and a step, and the same
 * states closing (a budget spent) at several points, against the brute force. */
static void compare_thinking(const struct vocab *v, struct policy_masker *mk, const char *what)
{
	static const char text[] = "Plan: open the <b>menu</b> </thi \xc3\xa9\xe6\x97\xa5 <<//\n"
				   "</think>\n{\"note\":null,\"thought\":\"t\",\"tool_call\":"
				   "{\"tool_name\":\"wait\",\"duration\":1}}";
	struct stats st = {0};
	struct policy_matcher m;

	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	for (size_t k = 0; k <= strlen(text); k++) {
		compare_at(v, mk, &m, &st);
		if (policy_matcher_thinking(&m)) {
			struct policy_matcher c = m;

			policy_matcher_close_thinking(&c);
			compare_at(v, mk, &c, &st);
		}
		if (k < strlen(text))
			REQUIRE(policy_matcher_feed(&m, text + k, 1) == 0);
	}
	fprintf(stderr, "%s thinking: %zu states, %zu mismatches\n", what, st.states, st.mismatches);
	CHECK_INT_EQ(st.mismatches, 0);
}

/* Random logits from a think block whose budget closes it after a few tokens: the block ends
 * in "</think>" and what follows parses as a step. */
static void thinking_walks(const struct vocab *v, struct policy_masker *mk, int walks, const char *what)
{
	float *logits = malloc(v->n * sizeof(*logits));
	char *text = malloc(64 * 1024);

	for (int w = 0; w < walks; w++) {
		struct engine_sampling sp = {.temperature = 1.0f, .seed = (uint64_t)w + 101};
		struct engine_sampler *sm = engine_sampler_create(&sp);
		struct policy_matcher m;
		size_t len = 0, n_tok = 0, think_len, step_at;
		bool done = false;

		REQUIRE(sm && policy_matcher_init_thinking(&m, g) == 0);
		while (!done && n_tok < 20000) {
			if (n_tok == (size_t)(5 + w * 7))
				policy_matcher_close_thinking(&m); /* the budget */
			for (size_t i = 0; i < v->n; i++)
				logits[i] = (float)(rng() % 1000) / 100.0f;
			REQUIRE(policy_masker_apply(mk, &m, logits) > 0);
			int32_t id = engine_sampler_sample(sm, logits, (int)v->n);
			int r = policy_masker_feed(mk, &m, id);
			n_tok++;
			CHECK(r >= 0);
			if (r != 0) {
				done = r == 1;
				break;
			}
			REQUIRE(len + v->lens[id] < 64 * 1024);
			memcpy(text + len, v->bytes[id], v->lens[id]);
			len += v->lens[id];
		}
		engine_sampler_destroy(sm);
		CHECK(done);
		REQUIRE(policy_split_thinking(text, len, &think_len, &step_at) == 0);
		struct policy_step st;
		char err[256] = "";
		int r = policy_step_parse(text + step_at, len - step_at, &st, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "%s thinking walk %d: %s: %.*s\n", what, w, err, (int)len, text);
		CHECK_INT_EQ(r, 0);
		if (r == 0)
			policy_step_finish(&st);
	}
	free(logits);
	free(text);
}

/* Random logits, sampled by the engine's sampler under the mask, until a stop id: the text
 * always parses. Logits of tokens with a quote or brace get a random boost in half the walks
 * so that strings end early and many tools are reached. */
static void random_walks(const struct vocab *v, struct policy_masker *mk, int walks, const char *what)
{
	float *logits = malloc(v->n * sizeof(*logits));
	char *text = malloc(64 * 1024);
	unsigned tools_seen = 0;
	size_t max_tokens = 0;
	for (int w = 0; w < walks; w++) {
		struct engine_sampling sp = {.temperature = 1.0f, .seed = (uint64_t)w + 1};
		struct engine_sampler *sm = engine_sampler_create(&sp);
		REQUIRE(sm);
		struct policy_matcher m;
		policy_matcher_init(&m, g);
		size_t len = 0, n_tok = 0;
		bool done = false;
		while (!done && n_tok < 20000) {
			for (size_t i = 0; i < v->n; i++) {
				logits[i] = (float)(rng() % 1000) / 100.0f;
				if (w % 2 && v->bytes[i] &&
				    (memchr(v->bytes[i], '"', v->lens[i]) ||
				     memchr(v->bytes[i], '}', v->lens[i])))
					logits[i] += 4.0f;
			}
			int allowed = policy_masker_apply(mk, &m, logits);
			REQUIRE(allowed > 0);
			int32_t id = engine_sampler_sample(sm, logits, (int)v->n);
			REQUIRE(id >= 0);
			n_tok++;
			int r = policy_masker_feed(mk, &m, id);
			CHECK(r >= 0);
			if (r < 0)
				break;
			if (r == 1) {
				done = true;
				break;
			}
			REQUIRE(len + v->lens[id] < 64 * 1024);
			memcpy(text + len, v->bytes[id], v->lens[id]);
			len += v->lens[id];
		}
		engine_sampler_destroy(sm);
		CHECK(done);
		max_tokens = MAX(max_tokens, n_tok);
		struct policy_step st;
		char err[256] = "";
		int r = policy_step_parse(text, len, &st, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "%s walk %d: %s: %.*s\n", what, w, err, (int)len, text);
		CHECK_INT_EQ(r, 0);
		if (r == 0) {
			tools_seen |= 1u << st.action.tool;
			policy_step_finish(&st);
		}
	}
	fprintf(stderr, "%s: %d walks, tools seen 0x%x, longest %zu tokens\n", what, walks, tools_seen,
		max_tokens);
	CHECK(__builtin_popcount(tools_seen) >= 6);
	free(logits);
	free(text);
}

static void add_token(struct vocab *v, size_t *cap, const void *bytes, size_t len)
{
	if (v->n == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		v->bytes = xreallocarray(v->bytes, *cap, sizeof(*v->bytes));
		v->lens = xreallocarray(v->lens, *cap, sizeof(*v->lens));
	}
	uint8_t *copy = NULL;
	if (bytes) {
		copy = xmalloc(len ? len : 1);
		memcpy(copy, bytes, len);
	}
	v->bytes[v->n] = copy;
	v->lens[v->n++] = len;
}

/* A vocabulary whose tokens span the structure: a hole and two stop ids first, every byte,
 * JSON pieces, schema words, partial UTF-8 sequences, escapes, duplicates, and random strings
 * over the characters of a step. */
static void synthetic_vocab(struct vocab *v)
{
	size_t cap = 0;
	static const char *const pieces[] = {
		"{\"",
		"\"}",
		"\"},",
		"\"}}",
		"}}",
		"\":\"",
		"\":",
		"\",\"",
		",\"",
		"\":{\"",
		"null",
		"true",
		"false",
		"\"note",
		"\"thought\"",
		"tool_call",
		"tool_name",
		"\":null,\"",
		"click",
		"double_click",
		"_click",
		"element",
		"scroll",
		"direction",
		"\\u",
		"\\n",
		"\\\"",
		"\\\\",
		"\\ud83d",
		"\\ude00",
		"\\u00",
		"10",
		"100",
		"1000",
		"00",
		"01",
		"50",
		"5",
		"[\"",
		"\"]",
		"\"]}}",
		"\"]",
		",\"repeat_count\":",
		" the",
		"\xc3\xa9",
		"\xe6\x97\xa5\xe6\x9c\xac",
		"\xf0\x9f\x8e\x89",
		"\xe6\x97",
		"\x97\xa5",
		"\xf0\x9f",
		"\x8e\x89\"",
		"ctrl",
		"\"ctrl\"",
		"enter",
		"\"f1",
		"2\"]",
		"\"},\"",
		"{\"note\":",
		"{\"note\":null,\"thought\":\"",
		"\",\"tool_call\":{\"tool_name\":\"",
		"\"}}",
		"e\"",
		"F",
		"Shift",
		"\"left\"}}",
		"\"down\",\"scroll_size\":",
		"\":true}}",
		"\":false,\"",
		"wait",
		"\",\"x\":",
		",\"y\":",
		"}} ",
		"\"\"",
		"\n",
		"\"\n",
		"</think>",
		"</",
		"think",
		"think>",
		"<",
		"</think>\n\n",
		"</think>{\"note\":",
		">\n{\"",
		"k>\n",
		"th",
		"ink>",
		"\n\n",
	};
	add_token(v, &cap, NULL, 0); /* 0: a hole */
	add_token(v, &cap, NULL, 0); /* 1: stop */
	add_token(v, &cap, NULL, 0); /* 2: stop */
	v->stops[0] = 1;
	v->stops[1] = 2;
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;
		add_token(v, &cap, &c, 1);
	}
	for (size_t i = 0; i < ARRAY_SIZE(pieces); i++)
		add_token(v, &cap, pieces[i], strlen(pieces[i]));
	add_token(v, &cap, "\"},", 3); /* a duplicate */
	static const char alphabet[] = "{}[]\":,\\0123456789abcdeflnrstuxyFC _\xc3\xa9\xe2\x82\xac";
	for (int i = 0; i < 3000; i++) {
		char t[16];
		size_t len = 1 + rng() % 12;
		for (size_t k = 0; k < len; k++)
			t[k] = alphabet[rng() % (sizeof(alphabet) - 1)];
		add_token(v, &cap, t, len);
	}
}

static void vocab_free(struct vocab *v)
{
	for (size_t i = 0; i < v->n; i++)
		free((void *)v->bytes[i]);
	free(v->bytes);
	free(v->lens);
}

static void test_synthetic(void)
{
	struct vocab v = {0};
	synthetic_vocab(&v);
	struct policy_masker *mk = policy_masker_create_raw(g, v.bytes, v.lens, v.n, v.stops, 2);
	REQUIRE(mk);
	CHECK_INT_EQ(policy_masker_n_tokens(mk), v.n);
	compare_states(&v, mk, "synthetic");
	random_walks(&v, mk, 24, "synthetic");
	compare_thinking(&v, mk, "synthetic");
	thinking_walks(&v, mk, 12, "synthetic");

	/* Stops: forbidden until the step is complete, then the only ids allowed. */
	struct policy_matcher m;
	policy_matcher_init(&m, g);
	CHECK_INT_EQ(policy_masker_feed(mk, &m, 1), -EILSEQ);
	CHECK_INT_EQ(policy_masker_feed(mk, &m, 0), -EILSEQ);
	CHECK_INT_EQ(policy_masker_feed(mk, &m, (int32_t)v.n), -EINVAL);
	static const char step[] = "{\"note\":null,\"thought\":\"t\",\"tool_call\":{\"tool_name\":"
				   "\"wait\",\"duration\":1}}";
	REQUIRE(policy_matcher_feed(&m, step, strlen(step)) == 0);
	uint32_t *bits = calloc((v.n + 31) / 32, sizeof(*bits));
	CHECK_INT_EQ(policy_masker_compute(mk, &m, bits), 2);
	CHECK_INT_EQ(bits[0], 0x6);
	CHECK_INT_EQ(policy_masker_feed(mk, &m, 2), 1);
	free(bits);

	/* A matcher of another grammar is refused. */
	struct policy_grammar *other = policy_grammar_create_holo3();
	struct policy_matcher mo;
	policy_matcher_init(&mo, other);
	float *logits = calloc(v.n, sizeof(*logits));
	CHECK_INT_EQ(policy_masker_apply(mk, &mo, logits), -EINVAL);
	free(logits);
	policy_grammar_destroy(other);
	policy_masker_destroy(mk);
	vocab_free(&v);
}

static void test_tokenizer(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/tekken/tokenizer.json", root ? root : ".");
	struct engine_tokenizer *tok = engine_tokenizer_load(path, err, sizeof(err));
	if (!tok)
		fprintf(stderr, "%s\n", err);
	REQUIRE(tok);
	size_t n = engine_tokenizer_vocab_size(tok);
	struct vocab v = {.n = n};
	v.bytes = calloc(n, sizeof(*v.bytes));
	v.lens = calloc(n, sizeof(*v.lens));
	v.stops[0] = engine_tokenizer_token_id(tok, "<SPECIAL_12>");
	v.stops[1] = engine_tokenizer_token_id(tok, "</s>");
	REQUIRE(v.stops[0] >= 0 && v.stops[1] >= 0);
	size_t spanning = 0;
	for (size_t id = 0; id < n; id++) {
		const uint8_t *b;
		size_t len;
		if (engine_tokenizer_is_special(tok, (int32_t)id) ||
		    engine_tokenizer_token_bytes(tok, (int32_t)id, &b, &len) < 0)
			continue;
		v.bytes[id] = b;
		v.lens[id] = len;
		/* Tokens that cross from a string into the structure, like "\":" or "\",". */
		if (len > 1 && memchr(b, '"', len) &&
		    (memchr(b, ':', len) || memchr(b, ',', len) || memchr(b, '}', len) || memchr(b, '{', len)))
			spanning++;
	}
	fprintf(stderr, "tekken fixture: %zu ids, %zu tokens span JSON structure\n", n, spanning);
	CHECK(spanning >= 4);
	struct policy_masker *mk = policy_masker_create(g, tok, n, v.stops, 2);
	REQUIRE(mk);
	compare_states(&v, mk, "tekken");
	random_walks(&v, mk, 24, "tekken");
	compare_thinking(&v, mk, "tekken");
	thinking_walks(&v, mk, 6, "tekken");
	policy_masker_destroy(mk);

	/* The model may have more logits rows than the tokenizer has ids: those are never
	 * allowed. */
	mk = policy_masker_create(g, tok, n + 40, v.stops, 2);
	REQUIRE(mk);
	float *logits = calloc(n + 40, sizeof(*logits));
	struct policy_matcher m;
	policy_matcher_init(&m, g);
	CHECK(policy_masker_apply(mk, &m, logits) > 0);
	for (size_t i = n; i < n + 40; i++)
		CHECK(logits[i] == -INFINITY);
	free(logits);
	policy_masker_destroy(mk);
	CHECK(policy_masker_create(g, tok, n, (int32_t[]){(int32_t)n}, 1) == NULL);
	CHECK(errno == EINVAL);
	free(v.bytes);
	free(v.lens);
	engine_tokenizer_destroy(tok);
}

/* A vocabulary whose "</think>" is a special token (as some tokenizers mark it): the masker
 * allows it where the think block may close, and nowhere in the step. */
static void test_special_think_close(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	static const char from[] = "\"content\": \"</think>\",\n   \"single_word\": false,\n   "
				   "\"lstrip\": false,\n   \"rstrip\": false,\n   \"normalized\": true,\n"
				   "   \"special\": false";
	char path[4096], tmp[] = "/tmp/test-policy-mask-XXXXXX", err[256];
	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/tekken/tokenizer.json", root ? root : ".");
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	char *text = malloc(8 << 20);
	REQUIRE(text);
	size_t n = fread(text, 1, (8 << 20) - 1, f);
	fclose(f);
	text[n] = 0;
	char *at = strstr(text, from);
	REQUIRE(at); /* the fixture's entry, as tools/make_tokenizer_fixture.py writes it */
	memcpy(at + strlen(from) - strlen("false"), "true ", 5);
	int fd = mkstemp(tmp);
	REQUIRE(fd >= 0 && write(fd, text, n) == (ssize_t)n);
	close(fd);
	struct engine_tokenizer *tok = engine_tokenizer_load(tmp, err, sizeof(err));
	if (!tok)
		fprintf(stderr, "%s\n", err);
	REQUIRE(tok);
	int32_t close_id = engine_tokenizer_token_id(tok, "</think>");
	int32_t stops[1] = {engine_tokenizer_token_id(tok, "<SPECIAL_12>")};
	REQUIRE(close_id >= 0 && engine_tokenizer_is_special(tok, close_id));
	size_t nv = engine_tokenizer_vocab_size(tok);
	struct policy_masker *mk = policy_masker_create(g, tok, nv, stops, 1);
	REQUIRE(mk);
	uint32_t *bits = calloc((nv + 31) / 32, sizeof(*bits));
	struct policy_matcher m;
	REQUIRE(policy_matcher_init_thinking(&m, g) == 0);
	REQUIRE(policy_matcher_feed(&m, "plan", 4) == 0);
	REQUIRE(policy_masker_compute(mk, &m, bits) > 0);
	CHECK(bits[close_id / 32] >> (close_id % 32) & 1);
	policy_matcher_close_thinking(&m);
	CHECK(policy_masker_compute(mk, &m, bits) > 0);
	CHECK(bits[close_id / 32] >> (close_id % 32) & 1);
	CHECK_INT_EQ(policy_masker_feed(mk, &m, close_id), 0);
	CHECK(!policy_matcher_thinking(&m));
	REQUIRE(policy_masker_compute(mk, &m, bits) > 0);
	CHECK(!(bits[close_id / 32] >> (close_id % 32) & 1)); /* the step starts with '{' */
	/* the other specials stay forbidden in the block */
	policy_matcher_init_thinking(&m, g);
	REQUIRE(policy_masker_compute(mk, &m, bits) > 0);
	int32_t turn = engine_tokenizer_token_id(tok, "<SPECIAL_11>");
	CHECK(!(bits[turn / 32] >> (turn % 32) & 1));
	free(bits);
	policy_masker_destroy(mk);
	engine_tokenizer_destroy(tok);
	unlink(tmp);
	free(text);
}

int main(void)
{
	g = policy_grammar_create_holo3();
	REQUIRE(g);
	test_synthetic();
	test_tokenizer();
	test_special_think_close();
	policy_grammar_destroy(g);
	return test_exit();
}
