/* Batched forwards across sessions (issue 16): engine_forward_batch() of 2..32 sessions at
 * different positions, decode and prefill mixed, odd lengths, spans past LM_MAX_BATCH, spliced
 * embedding rows, several steps in a row, against the same appends made session by session on
 * the same backend. Backend-generic: the sessions are on test_env_backend()'s backend, so the
 * backend and precision are the environment's ($HOLOD_BACKEND, $HOLOD_PRECISION: meson.build runs it
 * on the CPU in fp32 and bf16, and on the CUDA emulation where the build has it).
 *
 * Tolerances (per logits row, relative to the row's largest |logit|; states likewise per array):
 *   - fp32: on the CPU bit-identical: the CPU backend forms every row's sums as the separate
 *     call does. On CUDA 1e-5: a batch's GEMMs have another shape than each session's alone,
 *     and cuBLASLt picks another algorithm (tile, split-K) per shape, so the sums run in another
 *     order (~k u each, compounded over the layers; the emulation's own split-K rule,
 *     cuda/emu/cublaslt.cc, gives up to 1.6e-6 here).
 *   - fp32 with a bf16 SSM state ($HOLOD_SSM_STATE): on the CPU bit-identical as above; on CUDA,
 *     whose batched GEMMs sum in another order (1e-7), a state entry stored in bf16 may round
 *     one ulp the other way: 2^-8, one bf16 ulp of the largest entry (measured in the
 *     emulation: 2.0e-4).
 *   - quantized weights ($HOLOD_WEIGHTS=q8|q4|fp8, lm.h: lm_prepared.quant): on the CPU bit-identical
 *     in fp32 and bf16 alike: the merged decode rows always run on the quantized GEMV, each
 *     row's sums formed as alone, and a longer run's product is the one it has alone.
 *   - bf16: bit-identical below LM_BATCH_AMX_MIN_ROWS decode rows on a CPU with AMX, below
 *     LM_BATCH_DNNL_MIN_ROWS elsewhere (the same GEMV kernels); from there the decode rows'
 *     products run on AMX or through oneDNN, the same bf16 inputs summed in another order, and a rounding of
 * an activation to bf16 may then fall the other way: 2e-2, the bound the bf16 goldens' cosine >= 0.999 allows
 * an element, and the same greedy token wherever the separate call's top-1 leads by more than twice the
 * tolerance (elsewhere the greedy token of a near-tie is the summation order's, not the engine's). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu.h"
#include "engine.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

#define MAX_SESS 32
#define MAX_TOKENS 420

static uint64_t rng = 4242;

static int32_t next_token(int vocab)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (int32_t)((rng >> 33) % (uint64_t)vocab);
}

static struct engine_model *model;
static struct engine_backend *backend;
static bool exact; /* the CPU in fp32 (or bf16 below the GEMV's last row count, lm.h) */
static bool is_fp32;
static bool ssm_bf16;  /* the backend stores the SSM state in bf16 */
static bool quantized; /* q8/q4/fp8 layers ($HOLOD_WEIGHTS): decode rows always on the GEMV */
static int V, D;

/* One session's part of a step: n tokens (n = 0: not in this batch), embedded rows at the
 * positions of `embed_every` (0: none), logits as `want` asks. */
struct part {
	int n;
	enum engine_logits want;
	int embed_every;
};

struct pair {
	struct engine_session *ref, *bat;
};

static size_t rows_of(const struct part *p)
{
	return p->want == ENGINE_LOGITS_ALL ? (size_t)p->n : p->want == ENGINE_LOGITS_LAST ? 1 : 0;
}

/* The tolerance of a row or state relative to its largest magnitude (the header's). */
static double tolerance(void)
{
	return !is_fp32 ? 2e-2 : ssm_bf16 ? 1.0 / 256 : exact ? 1e-6 : 1e-5;
}

/* worst |a - b| / max|b| over rows of V; *ret_same_argmax: a's greedy token is b's in every
 * row where b's top-1 leads its top-2 by more than 2 x tolerance() x max|b| (where a within
 * the tolerance must keep it) */
static double row_error(const float *a, const float *b, size_t rows, bool *ret_same_argmax)
{
	double worst = 0;
	bool same = true;
	for (size_t r = 0; r < rows; r++) {
		const float *x = a + r * (size_t)V, *y = b + r * (size_t)V;
		double mag = 0, diff = 0;
		int ax = 0, ay = 0;
		for (int i = 0; i < V; i++) {
			mag = fmax(mag, fabs(y[i]));
			diff = fmax(diff, fabs((double)x[i] - y[i]));
			ax = x[i] > x[ax] ? i : ax;
			ay = y[i] > y[ay] ? i : ay;
		}
		if (test_top_margin(y, V) > 2 * tolerance() * mag)
			same &= ax == ay;
		double e = diff / (mag + 1e-30);
		if (!(e <= worst))
			worst = e;
	}
	*ret_same_argmax = same;
	return worst;
}

static double array_error(const float *a, const float *b, size_t n)
{
	double mag = 0, diff = 0;
	for (size_t i = 0; i < n; i++) {
		mag = fmax(mag, fabs(b[i]));
		diff = fmax(diff, fabs((double)a[i] - b[i]));
	}
	return n ? diff / (mag + 1e-30) : 0;
}

/* Two exported states, compared as the logits are. */
static double seq_state_error(const struct backend_seq_state *pa, const struct backend_seq_state *pb)
{
	const struct backend_seq_state sa = *pa, sb = *pb;
	struct lm_dims dm;
	lm_dims_init(&dm, &model->cfg);
	double worst = sa.n_tokens == sb.n_tokens ? 0 : INFINITY;
	size_t conv = (size_t)(dm.K - 1) * dm.conv_dim, ssm = (size_t)dm.H * dm.P * dm.N;
	size_t kv = (size_t)sa.n_tokens * dm.kv_dim;
	for (int l = 0; worst < INFINITY && l < sa.n_layers; l++) {
		const struct backend_layer_state *x = &sa.layers[l], *y = &sb.layers[l];
		double e = 0;
		if (model->layers[l].kind == LM_LAYER_MAMBA)
			e = fmax(array_error(x->conv, y->conv, conv), array_error(x->ssm, y->ssm, ssm));
		else if (model->layers[l].kind == LM_LAYER_ATTENTION)
			e = fmax(array_error(x->k, y->k, kv), array_error(x->v, y->v, kv));
		worst = fmax(worst, e);
	}
	return worst;
}

/* The two sessions' states, compared as the logits are. */
static double state_error(const struct engine_session *a, const struct engine_session *b)
{
	struct backend_seq_state sa = {0}, sb = {0};
	REQUIRE(backend_session_export(a, &sa) == 0 && backend_session_export(b, &sb) == 0);
	double worst = seq_state_error(&sa, &sb);
	backend_seq_state_finish(&sa);
	backend_seq_state_finish(&sb);
	return worst;
}

static void check_close(const char *what, double err, bool same_argmax, bool bit_exact)
{
	double tol = tolerance();
	if (bit_exact && err != 0)
		fprintf(stderr, "%s: differs from the separate calls by %g where it must be exact\n", what,
			err);
	else if (err > tol || (!is_fp32 && !same_argmax))
		fprintf(stderr, "%s: differs from the separate calls by %g (tolerance %g)%s\n", what, err,
			tol, same_argmax ? "" : ", another greedy token");
	CHECK(bit_exact ? err == 0 : err <= tol);
	CHECK(is_fp32 || same_argmax);
}

/* Runs one step: the reference sessions append their parts one by one, the batched ones in one
 * engine_forward_batch() (the sessions in reverse order when `reverse`), then compares logits
 * and states. */
static void step(const char *name, struct pair *s, int n_sess, const struct part *parts, bool reverse)
{
	struct engine_batch_entry e[MAX_SESS];
	int32_t *tok[MAX_SESS];
	const float **emb[MAX_SESS];
	float *want[MAX_SESS], *got[MAX_SESS];
	float *rows = malloc((size_t)MAX_TOKENS * D * sizeof(float));
	REQUIRE(rows);
	for (int i = 0; i < MAX_TOKENS * D; i++)
		rows[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
	int n_e = 0, decode_rows = 0;
	for (int i = 0; i < n_sess; i++) {
		int k = reverse ? n_sess - 1 - i : i;
		const struct part *p = &parts[k];
		tok[k] = NULL;
		emb[k] = NULL;
		want[k] = got[k] = NULL;
		if (!p->n)
			continue;
		tok[k] = malloc((size_t)p->n * sizeof(int32_t));
		want[k] = malloc((rows_of(p) + 1) * (size_t)V * sizeof(float));
		got[k] = malloc((rows_of(p) + 1) * (size_t)V * sizeof(float));
		REQUIRE(tok[k] && want[k] && got[k]);
		for (int t = 0; t < p->n; t++)
			tok[k][t] = next_token(V);
		if (p->embed_every) {
			emb[k] = calloc((size_t)p->n, sizeof(*emb[k]));
			REQUIRE(emb[k]);
			for (int t = 0; t < p->n; t += p->embed_every)
				emb[k][t] = rows + (size_t)t * D;
		}
		decode_rows += p->n <= 4 ? p->n : 0;
		e[n_e++] = (struct engine_batch_entry){.session = s[k].bat,
						       .tokens = tok[k],
						       .embeds = emb[k],
						       .n = (size_t)p->n,
						       .want = p->want,
						       .ret_logits = got[k]};
	}
	for (int k = 0; k < n_sess; k++)
		if (parts[k].n)
			CHECK_INT_EQ(engine_session_append(s[k].ref, tok[k], emb[k], (size_t)parts[k].n,
							   parts[k].want, want[k]),
				     0);
	CHECK_INT_EQ(engine_forward_batch(backend, e, (size_t)n_e), 0);
	int gemv_rows = cpu_amx_enabled() ? LM_BATCH_AMX_MIN_ROWS : LM_BATCH_DNNL_MIN_ROWS;
	bool bit_exact = exact && (is_fp32 || quantized || decode_rows < gemv_rows);
	for (int k = 0; k < n_sess; k++) {
		char what[128];
		snprintf(what, sizeof(what), "%s, session %d (%d tokens held)", name, k,
			 engine_session_n_tokens(s[k].ref));
		CHECK_INT_EQ(engine_session_n_tokens(s[k].bat), engine_session_n_tokens(s[k].ref));
		if (parts[k].n && rows_of(&parts[k])) {
			bool same;
			double err = row_error(got[k], want[k], rows_of(&parts[k]), &same);
			check_close(what, err, same, bit_exact);
		}
		check_close(what, state_error(s[k].bat, s[k].ref), true, bit_exact);
		free(tok[k]);
		free(emb[k]);
		free(want[k]);
		free(got[k]);
	}
	free(rows);
}

static void pairs_create(struct pair *s, int n)
{
	for (int i = 0; i < n; i++) {
		s[i].ref = engine_session_create_on(backend, MAX_TOKENS);
		s[i].bat = engine_session_create_on(backend, MAX_TOKENS);
		REQUIRE(s[i].ref && s[i].bat);
		REQUIRE(engine_session_backend(s[i].bat) == backend);
	}
}

static void pairs_destroy(struct pair *s, int n)
{
	for (int i = 0; i < n; i++) {
		engine_session_destroy(s[i].ref);
		engine_session_destroy(s[i].bat);
	}
}

/* n sessions at different positions (held 0, 1, 7, 13, ...) decode together for three steps. */
static void test_decode(int n)
{
	struct pair s[MAX_SESS];
	pairs_create(s, n);
	struct part parts[MAX_SESS];
	for (int i = 0; i < n; i++)
		parts[i] = (struct part){.n = i == 0 ? 0 : 1 + 6 * (i - 1) % 23, .want = ENGINE_LOGITS_NONE};
	step("prefixes", s, n, parts, false);
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < n; i++)
			parts[i] = (struct part){.n = 1, .want = ENGINE_LOGITS_LAST};
		char name[64];
		snprintf(name, sizeof(name), "%d sessions decoding, step %d", n, r);
		step(name, s, n, parts, r == 1);
	}
	pairs_destroy(s, n);
}

/* Prefill and decode in one batch: a span longer than LM_MAX_BATCH (several steps), odd prefill
 * lengths wanting their last or all logits, short runs of 2 and 3 positions, spliced rows, a
 * session left out, and decodes; then everyone decodes. */
static void test_mixed(void)
{
	enum { N = 7 };
	struct pair s[N];
	pairs_create(s, N);
	const struct part prefix[N] = {
		{.n = 3}, {.n = 0}, {.n = 11}, {.n = 5}, {.n = 1}, {.n = 17}, {.n = 2},
	};
	step("mixed prefixes", s, N, prefix, false);
	/* past LM_MAX_BATCH: one run per step; the CUDA emulation takes a minute over such a
	 * prefill under ASan, so there the span takes three of the shortened runs (main): with the
	 * two decode rows, the passes hold 2 + 16 + 13 rows, 3 + 2, then 16, then 5 */
	const int long_n = exact ? LM_MAX_BATCH + 37 : 37;
	const struct part mix[N] = {
		{.n = long_n, .want = ENGINE_LOGITS_LAST, .embed_every = 5},
		{.n = 1, .want = ENGINE_LOGITS_LAST},
		{.n = 13, .want = ENGINE_LOGITS_ALL},
		{.n = 3, .want = ENGINE_LOGITS_ALL},
		{.n = 0},
		{.n = 2, .want = ENGINE_LOGITS_LAST, .embed_every = 1},
		{.n = 1, .want = ENGINE_LOGITS_LAST},
	};
	step("prefill and decode mixed", s, N, mix, false);
	struct part dec[N];
	for (int i = 0; i < N; i++)
		dec[i] = (struct part){.n = 1, .want = ENGINE_LOGITS_LAST};
	step("decode after the mix", s, N, dec, true);
	pairs_destroy(s, N);
}

/* A failing batch changes no session: one entry past its session's room (-ENOSPC), one with a
 * token out of the vocabulary (-EINVAL); then the batch runs and matches. */
static void test_all_or_nothing(void)
{
	enum { N = 3 };
	struct pair s[N];
	pairs_create(s, N);
	const struct part prefix[N] = {{.n = 5}, {.n = 9}, {.n = 1}};
	step("prefixes", s, N, prefix, false);
	/* what the failing batches must leave exactly as it is (the batched sessions' own states:
	 * on CUDA they are close to the separate calls', not identical) */
	struct backend_seq_state before[N];
	for (int i = 0; i < N; i++) {
		before[i] = (struct backend_seq_state){0};
		REQUIRE(backend_session_export(s[i].bat, &before[i]) == 0);
	}
	int32_t tok[N] = {1, 2, 3}, bad = V;
	float *lg = malloc((size_t)N * V * sizeof(float));
	int32_t *many = calloc(MAX_TOKENS, sizeof(int32_t));
	REQUIRE(lg && many);
	struct engine_batch_entry e[N];
	for (int i = 0; i < N; i++)
		e[i] = (struct engine_batch_entry){.session = s[i].bat,
						   .tokens = &tok[i],
						   .n = 1,
						   .want = ENGINE_LOGITS_LAST,
						   .ret_logits = lg + (size_t)i * V};
	e[2].tokens = many;
	e[2].n = MAX_TOKENS;
	CHECK_INT_EQ(engine_forward_batch(backend, e, N), -ENOSPC);
	e[2].tokens = &bad;
	e[2].n = 1;
	CHECK_INT_EQ(engine_forward_batch(backend, e, N), -EINVAL);
	for (int i = 0; i < N; i++) {
		CHECK_INT_EQ(engine_session_n_tokens(s[i].bat), prefix[i].n);
		struct backend_seq_state after = {0};
		REQUIRE(backend_session_export(s[i].bat, &after) == 0);
		CHECK(seq_state_error(&after, &before[i]) == 0);
		backend_seq_state_finish(&after);
		backend_seq_state_finish(&before[i]);
	}
	struct part dec[N];
	for (int i = 0; i < N; i++)
		dec[i] = (struct part){.n = 1, .want = ENGINE_LOGITS_LAST};
	step("decode after the failures", s, N, dec, false);
	free(lg);
	free(many);
	pairs_destroy(s, N);
}

int main(void)
{
	test_skip_without_env_backend();
	struct lm_random_spec sp = {
		.pattern = "M*-M-*",
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
		.dtype = TENSOR_BF16,
		.seed = 99,
	};
	model = lm_random_model_create(&sp);
	REQUIRE(model);
	backend = test_env_backend(model);
	REQUIRE(backend);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(backend, &info), 0);
	is_fp32 = info.precision == ENGINE_PRECISION_FP32;
	ssm_bf16 = info.ssm_state == ENGINE_PRECISION_BF16;
	exact = info.kind == ENGINE_BACKEND_CPU;
	quantized = strcmp(info.weights, "q8") == 0 || strcmp(info.weights, "q4") == 0 ||
		    strcmp(info.weights, "fp8") == 0;
	test_check_env_weights(backend);
	printf("backend %s, %s, SSM state %s, weights %s\n", info.name, engine_precision_name(info.precision),
	       engine_precision_name(info.ssm_state), info.weights);
#ifdef HOLOD_HAVE_CUDA
	/* CUDA cuts spans into runs of 16 positions packed into passes of 32 rows, so spans of a
	 * few dozen positions take several runs and a mixed step several passes, as spans of
	 * hundreds do with the default 256 and 384 (which the emulation would take minutes over) */
	if (info.kind == ENGINE_BACKEND_CUDA)
		CHECK_INT_EQ(backend_cuda_set_pass_shape(backend, 16, 32), 0);
#endif
	V = model->cfg.vocab;
	D = model->cfg.hidden;

	/* 16: a multiple of LM_BATCH_DNNL_ROWS past LM_BATCH_DNNL_MIN_ROWS, oneDNN's rows without padding
	 * (the decode mixer in one job, lm_forward.c mixer_task, writing the bf16 rows out_proj reads); on
	 * the CPU also 32, whose mixer job is past CPU_MIN_PARALLEL_WORK for this model, so its tasks run
	 * on the pool's threads at once (16 sessions' run inline, one after another) */
	static const int counts[] = {2, 3, 5, 7, 8, 16, 20, MAX_SESS};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		if (counts[i] < MAX_SESS || exact)
			test_decode(counts[i]);
	test_mixed();
	test_all_or_nothing();
	if (exact) {
		/* the CPU's profile names the layers' weight format beside the products' rate */
		CHECK_INT_EQ(engine_backend_profile(backend, true), 0);
		struct engine_session *s = engine_session_create_on(backend, 4);
		REQUIRE(s);
		float *lg = malloc((size_t)V * sizeof(float));
		REQUIRE(lg);
		CHECK_INT_EQ(engine_session_decode(s, 1, lg), 0);
		char **lines = NULL, want[32];
		int n = engine_backend_profile_report(backend, &lines);
		snprintf(want, sizeof(want), "GFLOP/s, weights %s", info.weights);
		bool found = false;
		for (int i = 0; i < n; i++)
			found |= strstr(lines[i], want) != NULL;
		CHECK(n > 0 && found);
		engine_backend_profile_free(lines);
		engine_backend_profile(backend, false);
		free(lg);
		engine_session_destroy(s);
	}
	engine_backend_destroy(backend);
	lm_random_model_destroy(model);
	return test_exit();
}
