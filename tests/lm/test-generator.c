/* Stepping generators (engine.h, lm_generate.c): the generations of several sessions advancing
 * together in batched forwards give each session exactly the ids engine_generate() gives it
 * alone, whatever their prompt lengths, samplers, stop ids and budgets; one that is cancelled
 * or finishes leaves the others as they were. Also the batch entry's row references and the
 * state size of a session at a length (admission). In-memory random models; the CPU backend.
 * With $HOLOD_BACKEND=cuda (meson.build's lm-generator-cuda, on a device in `gpu` and on the
 * emulation in `gpu-emu`) only the jump-forward test runs, on CUDA: its multi-token appends then
 * share passes with other sessions' prefill chunks and decode rows (the mixed eager pass), and
 * its one-token appends the decode rows' graph. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 4242;

static int32_t next_token(int vocab)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (int32_t)((rng >> 33) % (uint64_t)vocab);
}

static struct engine_model *small_model(const char *pattern, uint64_t seed)
{
	struct lm_random_spec sp = {
		.pattern = pattern,
		.hidden = 64,
		.vocab = 96,
		.intermediate = 96,
		.n_heads = 4,
		.n_kv_heads = 2,
		.head_dim = 16,
		.m_heads = 8,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 16,
		.m_conv_kernel = 4,
		.m_chunk = 8,
		.dtype = TENSOR_F32,
		.seed = seed,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	return m;
}

#define N_GEN 6
#define MAX_PROMPT 40

/* One generation's set-up: its prompt, sampler, budget, stop id, and a hook that masks the
 * odd ids (a grammar's mask) and may cancel after `cancel_at` samples. */
struct spec {
	int n_prompt;
	int32_t prompt[MAX_PROMPT];
	struct engine_sampling sampling;
	int max_new;
	int32_t stop; /* -1: none */
	bool mask_odd;
	int cancel_at; /* 0: never */
};

struct hook_state {
	const struct spec *sp;
	int calls;
};

static int hook(void *userdata, float *logits, int vocab)
{
	struct hook_state *h = userdata;
	if (h->sp->cancel_at && ++h->calls > h->sp->cancel_at)
		return -ECANCELED;
	if (h->sp->mask_odd)
		for (int i = 1; i < vocab; i += 2)
			logits[i] = -INFINITY;
	return 0;
}

static void params_of(const struct spec *sp, struct hook_state *h, struct engine_generate_params *p)
{
	*h = (struct hook_state){.sp = sp};
	*p = (struct engine_generate_params){
		.sampling = sp->sampling,
		.max_new_tokens = sp->max_new,
		.stop_ids = &sp->stop,
		.n_stop_ids = sp->stop >= 0 ? 1 : 0,
		.logits_hook = hook,
		.userdata = h,
	};
}

/* engine_generate() on a fresh session: the reference. */
static int generate_alone(struct engine_backend *b, const struct spec *sp, int32_t **ret_ids, size_t *ret_n,
			  int *ret_tokens)
{
	struct engine_session *s = engine_session_create_on(b, 256);
	REQUIRE(s);
	struct hook_state h;
	struct engine_generate_params p;
	params_of(sp, &h, &p);
	int r = engine_generate(s, NULL, sp->prompt, (size_t)sp->n_prompt, &p, ret_ids, ret_n);
	*ret_tokens = engine_session_n_tokens(s);
	engine_session_destroy(s);
	return r;
}

static void test_batched_equals_alone(struct engine_model *m)
{
	char err[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(b);
	int vocab = 96;
	struct spec sp[N_GEN] = {
		{.n_prompt = 1, .max_new = 24, .stop = -1},
		{.n_prompt = 9, .max_new = 5, .stop = -1}, /* finishes early: leaves the set */
		{.n_prompt = 33, .max_new = 24, .stop = -1, .mask_odd = true},
		{.n_prompt = 17,
		 .max_new = 24,
		 .stop = -1,
		 .sampling = {.temperature = 0.9f, .top_k = 20, .seed = 5}},
		{.n_prompt = 4, .max_new = 24, .stop = -1, .cancel_at = 7}, /* cancelled mid-way */
		{.n_prompt = 25,
		 .max_new = 24,
		 .stop = -1,
		 .sampling = {.temperature = 1.3f, .top_p = 0.9f, .seed = 9}},
	};
	for (int i = 0; i < N_GEN; i++)
		for (int k = 0; k < sp[i].n_prompt; k++)
			sp[i].prompt[k] = next_token(vocab);

	int32_t *ref_ids[N_GEN] = {0};
	size_t ref_n[N_GEN];
	int ref_tokens[N_GEN], ref_r[N_GEN];
	for (int i = 0; i < N_GEN; i++)
		ref_r[i] = generate_alone(b, &sp[i], &ref_ids[i], &ref_n[i], &ref_tokens[i]);
	/* a stop id the greedy reference emits on its way ends that generation there too */
	REQUIRE(ref_r[0] == 0 && ref_n[0] > 6);
	sp[0].stop = ref_ids[0][6];
	free(ref_ids[0]);
	ref_r[0] = generate_alone(b, &sp[0], &ref_ids[0], &ref_n[0], &ref_tokens[0]);
	CHECK_INT_EQ(ref_r[0], 0);
	CHECK(ref_n[0] <= 7);
	CHECK_INT_EQ(ref_r[4], -ECANCELED);

	struct engine_session *s[N_GEN];
	struct engine_generator *g[N_GEN];
	struct hook_state h[N_GEN];
	float *logits = malloc((size_t)vocab * sizeof(float));
	REQUIRE(logits);
	for (int i = 0; i < N_GEN; i++) {
		s[i] = engine_session_create_on(b, 256);
		REQUIRE(s[i]);
		REQUIRE(engine_session_append(s[i], sp[i].prompt, NULL, (size_t)sp[i].n_prompt,
					      ENGINE_LOGITS_LAST, logits) == 0);
		struct engine_generate_params p;
		params_of(&sp[i], &h[i], &p);
		g[i] = engine_generator_create(s[i], NULL, &p, logits);
		REQUIRE(g[i]);
		CHECK_INT_EQ(engine_generator_status(g[i]), 0);
	}
	int steps = 0, running;
	while ((running = engine_generators_step(b, g, N_GEN)) > 0) {
		CHECK(running <= N_GEN);
		steps++;
		REQUIRE(steps <= 30);
	}
	CHECK_INT_EQ(running, 0);
	for (int i = 0; i < N_GEN; i++) {
		CHECK_INT_EQ(engine_generator_status(g[i]), ref_r[i] < 0 ? ref_r[i] : 1);
		size_t n;
		const int32_t *ids = engine_generator_ids(g[i], &n);
		if (ref_r[i] == 0) {
			CHECK_INT_EQ(n, ref_n[i]);
			CHECK(n == ref_n[i] && memcmp(ids, ref_ids[i], n * sizeof(*ids)) == 0);
			CHECK_INT_EQ(engine_session_n_tokens(s[i]), ref_tokens[i]);
		} else {
			/* the cancelled one took exactly cancel_at ids, all fed back */
			CHECK_INT_EQ(n, (size_t)sp[i].cancel_at);
			CHECK_INT_EQ(engine_session_n_tokens(s[i]), sp[i].n_prompt + sp[i].cancel_at);
		}
		if (sp[i].mask_odd)
			for (size_t k = 0; k < n; k++)
				CHECK(ids[k] % 2 == 0);
	}
	/* finished generators stay finished; a step over them forwards nothing */
	CHECK_INT_EQ(engine_generators_step(b, g, N_GEN), 0);
	struct engine_batch_entry e;
	CHECK_INT_EQ(engine_generator_sample(g[1], &e), 0);
	CHECK_INT_EQ(engine_generator_fed(g[1], 0), -EINVAL); /* nothing in flight */

	for (int i = 0; i < N_GEN; i++) {
		engine_generator_destroy(g[i]);
		engine_session_destroy(s[i]);
		free(ref_ids[i]);
	}
	free(logits);
	engine_backend_destroy(b);
}

/* The halves of a step with a prefill chunk of another session in the same forward, and a
 * failed forward failing the generators fed in it. */
static void test_sample_fed(struct engine_model *m)
{
	struct engine_backend *b =
		engine_backend_create(m, &(struct engine_backend_options){.kind = ENGINE_BACKEND_CPU}, NULL,
				      0);
	REQUIRE(b);
	int vocab = 96;
	int32_t prompt[12], other[30];
	for (int i = 0; i < 12; i++)
		prompt[i] = next_token(vocab);
	for (int i = 0; i < 30; i++)
		other[i] = next_token(vocab);
	struct spec sp = {.n_prompt = 12, .max_new = 8, .stop = -1};
	memcpy(sp.prompt, prompt, sizeof(prompt));
	int32_t *ref;
	size_t ref_n;
	int ref_tokens;
	REQUIRE(generate_alone(b, &sp, &ref, &ref_n, &ref_tokens) == 0);

	float *logits = malloc((size_t)vocab * sizeof(float));
	float *other_logits = malloc((size_t)vocab * sizeof(float));
	float *alone_logits = malloc((size_t)vocab * sizeof(float));
	struct engine_session *s = engine_session_create_on(b, 64);
	struct engine_session *t = engine_session_create_on(b, 64);
	struct engine_session *u = engine_session_create_on(b, 64);
	REQUIRE(logits && other_logits && alone_logits && s && t && u);
	REQUIRE(engine_session_append(s, prompt, NULL, 12, ENGINE_LOGITS_LAST, logits) == 0);
	struct hook_state h;
	struct engine_generate_params p;
	params_of(&sp, &h, &p);
	struct engine_generator *g = engine_generator_create(s, NULL, &p, logits);
	REQUIRE(g);
	/* session t's 30 prompt ids ride along in chunks of 10 */
	for (int off = 0; off < 30; off += 10) {
		struct engine_batch_entry e[2];
		CHECK_INT_EQ(engine_generator_sample(g, &e[0]), 1);
		CHECK_INT_EQ(engine_generator_sample(g, &e[1]), -EINVAL); /* one in flight */
		e[1] = (struct engine_batch_entry){.session = t,
						   .tokens = other + off,
						   .n = 10,
						   .want = ENGINE_LOGITS_LAST,
						   .ret_logits = other_logits};
		CHECK_INT_EQ(engine_forward_batch(b, e, 2), 0);
		CHECK_INT_EQ(engine_generator_fed(g, 0), 0);
	}
	for (int off = 0; off < 30; off += 10)
		REQUIRE(engine_session_append(u, other + off, NULL, 10, ENGINE_LOGITS_LAST, alone_logits) ==
			0);
	CHECK(memcmp(other_logits, alone_logits, (size_t)vocab * sizeof(float)) == 0);
	while (engine_generators_step(b, &g, 1) > 0)
		;
	size_t n;
	const int32_t *ids = engine_generator_ids(g, &n);
	CHECK(n == ref_n && memcmp(ids, ref, n * sizeof(*ids)) == 0);
	engine_generator_destroy(g);

	/* a forward that fails fails the generator fed in it, with its error */
	REQUIRE(engine_session_append(s, prompt, NULL, 1, ENGINE_LOGITS_LAST, logits) == 0);
	g = engine_generator_create(s, NULL, &p, logits);
	REQUIRE(g);
	struct engine_batch_entry e;
	CHECK_INT_EQ(engine_generator_sample(g, &e), 1);
	CHECK_INT_EQ(engine_generator_fed(g, -EIO), -EIO);
	CHECK_INT_EQ(engine_generator_status(g), -EIO);
	CHECK_INT_EQ(engine_generators_step(b, &g, 1), 0);
	/* a generator of another backend is refused before anything runs */
	struct engine_backend *b2 =
		engine_backend_create(m, &(struct engine_backend_options){.kind = ENGINE_BACKEND_CPU}, NULL,
				      0);
	REQUIRE(b2);
	CHECK_INT_EQ(engine_generators_step(b2, &g, 1), -EINVAL);
	engine_backend_destroy(b2);
	errno = 0;
	CHECK(engine_generator_create(s, NULL, &(struct engine_generate_params){0}, logits) == NULL);
	CHECK_INT_EQ(errno, EINVAL);

	engine_generator_destroy(g);
	engine_session_destroy(s);
	engine_session_destroy(t);
	engine_session_destroy(u);
	free(ref);
	free(logits);
	free(other_logits);
	free(alone_logits);
	engine_backend_destroy(b);
}

/* An entry's row references give what engine_session_append_rows() gives; a session's state at
 * a length is what it holds once there. */
static void test_refs_and_state_at(struct engine_model *m)
{
	struct engine_backend *b =
		engine_backend_create(m, &(struct engine_backend_options){.kind = ENGINE_BACKEND_CPU}, NULL,
				      0);
	REQUIRE(b);
	int vocab = 96, hidden = 64;
	float *rows = malloc(3 * (size_t)hidden * sizeof(float));
	REQUIRE(rows);
	for (int i = 0; i < 3 * hidden; i++)
		rows[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	struct engine_rows *h = engine_rows_create(NULL, rows, 3, hidden);
	REQUIRE(h);
	int32_t ids[6] = {1, 2, 3, 4, 5, 6};
	struct engine_row_ref refs[6] = {{0}, {h, 2}, {h, 0}, {0}, {h, 1}, {0}};
	float *a = malloc((size_t)vocab * sizeof(float)), *c = malloc((size_t)vocab * sizeof(float));
	struct engine_session *s = engine_session_create_on(b, 32), *t = engine_session_create_on(b, 32);
	REQUIRE(a && c && s && t);
	size_t empty = engine_session_state_bytes(s);
	CHECK_INT_EQ(engine_session_state_bytes_at(s, 0), empty);
	size_t at6 = engine_session_state_bytes_at(s, 6);
	CHECK_INT_EQ(engine_session_n_tokens(s), 0);
	REQUIRE(engine_session_append_rows(s, ids, refs, 6, ENGINE_LOGITS_LAST, a) == 0);
	CHECK_INT_EQ(engine_session_state_bytes(s), at6);
	CHECK(at6 > empty); /* the attention layer's K/V */
	struct engine_batch_entry e = {.session = t,
				       .tokens = ids,
				       .n = 6,
				       .want = ENGINE_LOGITS_LAST,
				       .ret_logits = c,
				       .refs = refs};
	CHECK_INT_EQ(engine_forward_batch(b, &e, 1), 0);
	CHECK(memcmp(a, c, (size_t)vocab * sizeof(float)) == 0);
	/* a reference out of range, or refs with embeds, is refused */
	struct engine_row_ref bad[1] = {{h, 3}};
	const float *emb[1] = {rows};
	e = (struct engine_batch_entry){.session = t, .tokens = ids, .n = 1, .refs = bad};
	CHECK_INT_EQ(engine_forward_batch(b, &e, 1), -EINVAL);
	e = (struct engine_batch_entry){.session = t, .tokens = ids, .n = 1, .refs = refs, .embeds = emb};
	CHECK_INT_EQ(engine_forward_batch(b, &e, 1), -EINVAL);
	CHECK_INT_EQ(engine_session_n_tokens(t), 6);
	engine_session_destroy(s);
	engine_session_destroy(t);
	engine_rows_destroy(h);
	free(rows);
	free(a);
	free(c);
	engine_backend_destroy(b);
}

/* Jump-forward: a scripted generation (each sampled id is the script's, the others masked) whose
 * forced callback appends the next ids of the script after some samples. */
#define JF_LEN 40

struct jf_state {
	const int32_t *script;
	size_t pos;	/* ids of the script generated so far */
	bool jump;	/* the forced callback gives runs (off: they are sampled one by one) */
	size_t max_cap; /* the largest cap the callback was offered */
	int samples;
};

/* Where the script forces a run: after an id at a position that is 0 mod 4, the next 3. */
static bool jf_forced_at(size_t pos)
{
	return pos % 4 == 1;
}

static int jf_hook(void *userdata, float *logits, int vocab)
{
	struct jf_state *st = userdata;
	st->samples++;
	for (int i = 0; i < vocab; i++)
		if (i != st->script[st->pos])
			logits[i] = -INFINITY;
	return 0;
}

static int jf_token(void *userdata, int32_t id)
{
	struct jf_state *st = userdata;
	REQUIRE(id == st->script[st->pos]);
	st->pos++;
	return 0;
}

static int jf_forced(void *userdata, int32_t *ids, size_t cap)
{
	struct jf_state *st = userdata;
	st->max_cap = MAX(st->max_cap, cap);
	if (!st->jump || !jf_forced_at(st->pos))
		return 0;
	size_t n = MIN((size_t)3, cap);
	n = MIN(n, JF_LEN - st->pos);
	memcpy(ids, st->script + st->pos, n * sizeof(*ids));
	st->pos += n;
	return (int)n;
}

static int jf_fail(void *userdata, int32_t *ids, size_t cap)
{
	return -EBADMSG;
}

/* The greedy id of a logits row (the decode rows' next ids). */
static int32_t argmax_id(const float *v, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

/* Whether row a is within 1e-3 of b's scale (the largest |logit|, at least 1): what a session
 * after a jump, or a decode row in a batch, must give against one-by-one decoding alone. */
static bool logits_close(const float *a, const float *b, int vocab)
{
	float worst = 0, scale = 1;
	for (int i = 0; i < vocab; i++) {
		worst = MAX(worst, fabsf(a[i] - b[i]));
		scale = MAX(scale, fabsf(b[i]));
	}
	if (worst > 1e-3f * scale)
		fprintf(stderr, "logits differ by %g (scale %g)\n", worst, scale);
	return worst <= 1e-3f * scale;
}

#define JF_DECODE_ROWS 2

/* Jump-forward on backend b: the scripted generation, off then on, beside another session's
 * prompt chunks (its first forwards) and JF_DECODE_ROWS sessions' greedy decode rows (every
 * forward): the same ids with fewer forwards, the session after the jumps as after one-by-one
 * decoding, and each decode row's session as that session decoding its ids alone. */
static void test_jump_forward(struct engine_backend *b)
{
	const int vocab = 96;
	int32_t prompt[10], script[JF_LEN], other[30];
	for (int i = 0; i < 10; i++)
		prompt[i] = next_token(vocab);
	for (int i = 0; i < JF_LEN; i++)
		script[i] = next_token(vocab);
	for (int i = 0; i < 30; i++)
		other[i] = next_token(vocab);
	float *logits = malloc((size_t)vocab * sizeof(float));
	float *ref = malloc((size_t)vocab * sizeof(float));
	float *other_logits = malloc((size_t)vocab * sizeof(float));
	float *dec_logits = malloc(JF_DECODE_ROWS * (size_t)vocab * sizeof(float));
	float *alone_logits = malloc((size_t)vocab * sizeof(float));
	REQUIRE(logits && ref && other_logits && dec_logits && alone_logits);
	uint64_t forwards[2], forced[2];
	size_t n_ids[2];

	for (int jump = 0; jump < 2; jump++) {
		struct engine_session *s = engine_session_create_on(b, 128);
		struct engine_session *t = engine_session_create_on(b, 128);
		struct engine_session *d[JF_DECODE_ROWS];
		int32_t dec_ids[JF_DECODE_ROWS][JF_LEN + 2];
		int n_dec = 0;
		REQUIRE(s && t);
		REQUIRE(engine_session_append(s, prompt, NULL, 10, ENGINE_LOGITS_LAST, logits) == 0);
		for (int k = 0; k < JF_DECODE_ROWS; k++) {
			REQUIRE((d[k] = engine_session_create_on(b, 128)));
			dec_ids[k][0] = prompt[k];
		}
		struct jf_state st = {.script = script, .jump = jump};
		struct engine_generate_params p = {
			.sampling = {.temperature = 0},
			.max_new_tokens = JF_LEN,
			.logits_hook = jf_hook,
			.on_token = jf_token,
			.forced = jf_forced,
			.userdata = &st,
		};
		struct engine_generator *g = engine_generator_create(s, NULL, &p, logits);
		REQUIRE(g);
		/* another session's prompt shares the first forwards, the decode rows all: a forced
		 * run's append is one entry of the batch beside them */
		int off = 0, status = 0;
		for (;;) {
			struct engine_batch_entry e[2 + JF_DECODE_ROWS];
			int r = engine_generator_sample(g, &e[0]);
			if (r != 1)
				break;
			/* the sampled id, then up to 3 forced ones */
			CHECK(jump ? e[0].n >= 1 && e[0].n <= 4 : e[0].n == 1);
			CHECK(e[0].tokens[0] == script[st.pos - e[0].n]);
			size_t n_e = 1;
			if (off < 30) {
				e[n_e++] = (struct engine_batch_entry){.session = t,
								       .tokens = other + off,
								       .n = 10,
								       .want = ENGINE_LOGITS_LAST,
								       .ret_logits = other_logits};
				off += 10;
			}
			for (int k = 0; k < JF_DECODE_ROWS; k++)
				e[n_e++] = (struct engine_batch_entry){.session = d[k],
								       .tokens = &dec_ids[k][n_dec],
								       .n = 1,
								       .want = ENGINE_LOGITS_LAST,
								       .ret_logits = dec_logits +
										     (size_t)k * vocab};
			status = engine_forward_batch(b, e, n_e);
			REQUIRE(status == 0);
			n_dec++;
			for (int k = 0; k < JF_DECODE_ROWS; k++)
				dec_ids[k][n_dec] = argmax_id(dec_logits + (size_t)k * vocab, vocab);
			if (engine_generator_fed(g, status) != 0)
				break;
		}
		CHECK_INT_EQ(engine_generator_status(g), 1);
		size_t n;
		const int32_t *ids = engine_generator_ids(g, &n);
		/* the script, whole, and no more than max_new_tokens */
		CHECK_INT_EQ(n, JF_LEN);
		CHECK(memcmp(ids, script, n * sizeof(*ids)) == 0);
		CHECK(st.max_cap <= JF_LEN - 1);
		engine_generator_stats(g, &forwards[jump], &forced[jump]);
		n_ids[jump] = n;
		CHECK_INT_EQ(forwards[jump] + forced[jump], n - 1); /* the last id is not fed */
		CHECK_INT_EQ(n_dec, (int)forwards[jump]);
		/* the session after the jumps holds what one-by-one decoding would: the same
		 * length, and the next logits within tolerance */
		CHECK_INT_EQ(engine_session_n_tokens(s), 10 + JF_LEN - 1);
		REQUIRE(engine_session_decode(s, script[JF_LEN - 1], logits) == 0);
		if (!jump)
			memcpy(ref, logits, (size_t)vocab * sizeof(float));
		else
			CHECK(logits_close(logits, ref, vocab));
		/* each decode row's session: its ids decoded alone give the same last logits */
		for (int k = 0; k < JF_DECODE_ROWS; k++) {
			struct engine_session *alone = engine_session_create_on(b, 128);
			REQUIRE(alone);
			for (int i = 0; i < n_dec; i++)
				REQUIRE(engine_session_decode(alone, dec_ids[k][i], alone_logits) == 0);
			CHECK_INT_EQ(engine_session_n_tokens(d[k]), n_dec);
			CHECK(logits_close(dec_logits + (size_t)k * vocab, alone_logits, vocab));
			engine_session_destroy(alone);
			engine_session_destroy(d[k]);
		}
		engine_generator_destroy(g);
		engine_session_destroy(s);
		engine_session_destroy(t);
	}
	CHECK_INT_EQ(n_ids[0], n_ids[1]);
	CHECK_INT_EQ(forced[0], 0);
	CHECK_INT_EQ(forwards[0], JF_LEN - 1);
	CHECK(forced[1] > 0);
	CHECK_INT_EQ(forwards[1], JF_LEN - 1 - forced[1]);

	/* a failing callback fails the generator with its error */
	struct engine_session *s = engine_session_create_on(b, 128);
	REQUIRE(s);
	REQUIRE(engine_session_append(s, prompt, NULL, 10, ENGINE_LOGITS_LAST, logits) == 0);
	struct engine_generate_params p = {.sampling = {.temperature = 0},
					   .max_new_tokens = 4,
					   .forced = jf_fail};
	struct engine_generator *g = engine_generator_create(s, NULL, &p, logits);
	REQUIRE(g);
	struct engine_batch_entry e;
	CHECK_INT_EQ(engine_generator_sample(g, &e), -EBADMSG);
	CHECK_INT_EQ(engine_generator_status(g), -EBADMSG);
	CHECK_INT_EQ(engine_session_n_tokens(s), 10);
	engine_generator_destroy(g);
	engine_session_destroy(s);
	free(logits);
	free(ref);
	free(other_logits);
	free(dec_logits);
	free(alone_logits);
}

int main(void)
{
	const char *env = getenv("HOLOD_BACKEND");
	enum engine_backend_kind kind = ENGINE_BACKEND_CPU;

	test_skip_without_env_backend();
	if (env)
		REQUIRE(engine_backend_kind_parse(env, &kind) == 0);
	struct engine_model *m = small_model("M*-M", 57);
	if (kind == ENGINE_BACKEND_CUDA) {
		/* fp32: the jumped session within 1e-3 of one-by-one decoding on CUDA too */
		struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
		test_jump_forward(b);
		engine_backend_destroy(b);
	} else {
		test_batched_equals_alone(m);
		test_sample_fed(m);
		test_refs_and_state_at(m);
		struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32);
		test_jump_forward(b);
		engine_backend_destroy(b);
	}
	lm_random_model_destroy(m);
	return test_exit();
}
