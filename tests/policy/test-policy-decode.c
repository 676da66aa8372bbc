/* Constrained decoding with a real (tiny, random-weight) model: the rendered prompt is appended
 * to an engine session, then each logits row is masked, sampled, fed to the matcher and decoded,
 * as the agent does. A greedy and a sampled run over two persistent steps each end in a step that
 * parses: random weights still give schema-valid steps. The model has more logits rows (1280)
 * than its tokenizer has ids (1234); the masker never allows the rows without a token. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "policy.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

#define MAX_STEP_TOKENS 8000

/* Decodes one step from logits (the row after the prompt). Returns the number of tokens fed to
 * the session, the text in *text. */
static size_t decode_step(struct engine_session *s, const struct engine_tokenizer *tok,
			  struct policy_masker *mk, const struct policy_grammar *g, struct engine_sampler *sm,
			  float *logits, int vocab, char *text, size_t *ret_len)
{
	struct policy_matcher m;
	size_t len = 0, fed = 0;
	policy_matcher_init(&m, g);
	for (int n = 0; n < MAX_STEP_TOKENS; n++) {
		int allowed = policy_masker_apply(mk, &m, logits);
		REQUIRE(allowed > 0);
		for (int i = (int)engine_tokenizer_vocab_size(tok); i < vocab; i++)
			CHECK(logits[i] == -INFINITY);
		int32_t id = engine_sampler_sample(sm, logits, vocab);
		REQUIRE(id >= 0);
		int r = policy_masker_feed(mk, &m, id);
		REQUIRE(r >= 0);
		if (r == 1) {
			*ret_len = len;
			return fed;
		}
		const uint8_t *b;
		size_t blen;
		REQUIRE(engine_tokenizer_token_bytes(tok, id, &b, &blen) == 0);
		REQUIRE(len + blen < 64 * 1024);
		memcpy(text + len, b, blen);
		len += blen;
		REQUIRE(engine_session_decode(s, id, logits) == 0);
		fed++;
	}
	REQUIRE(!"no stop within MAX_STEP_TOKENS");
	return 0;
}

static void append(struct engine_session *s, const struct policy_piece *p, float *logits)
{
	REQUIRE(engine_session_append(s, p->ids, NULL, p->n_ids,
				      logits ? ENGINE_LOGITS_LAST : ENGINE_LOGITS_NONE, logits) == 0);
}

int main(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char dir[4096], err[512];
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/models/tiny-chat", root ? root : ".");
	engine_set_threads(1);
	struct engine_model *model = engine_model_load(dir, err, sizeof(err));
	if (!model)
		fprintf(stderr, "%s\n", err);
	REQUIRE(model);
	struct engine_backend *backend = test_env_backend(model);
	REQUIRE(backend);
	const struct engine_tokenizer *tok = engine_model_tokenizer(model);
	REQUIRE(tok);
	struct engine_model_info info;
	REQUIRE(engine_model_get_info(model, &info) == 0);
	CHECK(info.vocab > (int)engine_tokenizer_vocab_size(tok));

	struct policy_grammar *g = policy_grammar_create_holo3();
	REQUIRE(g);
	struct policy_env env = {.screen_width = 1280, .screen_height = 720};
	struct policy_renderer *r = policy_renderer_create(&policy_format_holo3, tok, &env, 4);
	REQUIRE(r);
	int32_t stops[2] = {policy_renderer_stop_id(r), engine_tokenizer_token_id(tok, "</s>")};
	struct policy_masker *mk = policy_masker_create(g, tok, (size_t)info.vocab, stops, 2);
	REQUIRE(mk);

	struct policy_piece prefix, step0, close, step1;
	REQUIRE(policy_render_prefix(r, "Open the text editor", &prefix) == 0);
	struct policy_observation obs0 = {.n_tiles = 1};
	REQUIRE(policy_render_step(r, &obs0, false, &step0) == 0);
	REQUIRE(policy_render_close(r, &close) == 0);

	float *logits = malloc((size_t)info.vocab * sizeof(float));
	char *text = malloc(64 * 1024);
	unsigned tools = 0;
	for (int run = 0; run < 2; run++) {
		struct engine_sampling sp = {.temperature = run == 0 ? 0.0f : 1.0f, .seed = (uint64_t)run};
		struct engine_sampler *sm = engine_sampler_create(&sp);
		REQUIRE(sm);
		struct engine_session *s = engine_session_create_on(backend, 4 * MAX_STEP_TOKENS);
		REQUIRE(s);
		append(s, &prefix, NULL);
		append(s, &step0, logits);
		struct policy_step st;
		size_t len;
		for (int k = 0; k < 2; k++) {
			int before = engine_session_n_tokens(s);
			size_t fed = decode_step(s, tok, mk, g, sm, logits, info.vocab, text, &len);
			CHECK_INT_EQ(engine_session_n_tokens(s), before + (int)fed);
			int pr = policy_step_parse(text, len, &st, err, sizeof(err));
			if (pr < 0)
				fprintf(stderr, "run %d step %d: %s: %.*s\n", run, k, err, (int)len, text);
			CHECK_INT_EQ(pr, 0);
			if (pr < 0)
				break;
			tools |= 1u << st.action.tool;
			/* Persistent: close the turn, then the next observation with this result. */
			struct policy_tool_result res = {.tool = st.action.tool, .text = "done"};
			struct policy_observation obs1 = {.n_tiles = 1, .result = &res};
			REQUIRE(policy_render_step(r, &obs1, false, &step1) == 0);
			append(s, &close, NULL);
			append(s, &step1, logits);
			policy_piece_finish(&step1);
			policy_step_finish(&st);
		}
		engine_session_destroy(s);
		engine_sampler_destroy(sm);
	}
	fprintf(stderr, "tools decoded: 0x%x\n", tools);
	CHECK(tools != 0);

	free(text);
	free(logits);
	policy_piece_finish(&prefix);
	policy_piece_finish(&step0);
	policy_piece_finish(&close);
	policy_masker_destroy(mk);
	policy_renderer_destroy(r);
	policy_grammar_destroy(g);
	engine_backend_destroy(backend);
	engine_model_destroy(model);
	return test_exit();
}
