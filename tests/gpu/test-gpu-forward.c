/* The whole language model through the CUDA backend (engine/backend/cuda/backend_cuda.c) against the CPU
 * engine, on random models of every block type and mixes of them; on a device in `gpu` (77
 * without one) and on the emulation in `gpu-emu`.
 *
 * Tolerances:
 *  - fp32 precision: logits NMSE (sum (cuda - cpu)^2 / sum cpu^2, over every checked row) <= 1e-9,
 *    every logit within FP32_ROW_TOL of its row's largest |logit|, and the CPU's greedy token
 *    wherever the CPU's top-1 leads by more than twice that (both fed the CPU's greedy
 *    continuation: a near-tie's token is the summation order's, and one flip would change
 *    every row after it);
 *  - bf16 precision (bf16 weights, GEMM inputs and KV cache, fp32 elsewhere): cosine similarity
 *    of every logits row with the CPU's >= 0.999;
 *  - on CUDA itself: a prefill split in two equals the whole prefill within NMSE 1e-9 (the SSD
 *    chunks fall differently, so fp32 rounding differs); a decode replayed from the captured graph
 *    equals the same decode launched eagerly bit for bit (both run the same kernels); a session
 *    restored from a snapshot, or copied, continues bit for bit like the original (identical
 *    calls); a batch of several sessions gives each session's logits as alone within NMSE 1e-9
 *    (not bit for bit: the batch's GEMMs have other shapes, for which cuBLASLt picks other
 *    algorithms, and the emulation's stand-in its own split-K).
 * Shapes are small (hidden 64 or less) so the emulation stays fast; the long-context case decodes
 * after a 1,100-token prefill (past the attention's 256-position split and the KV doubling). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

static struct engine_model *model_of(const char *pattern, int hidden, int vocab, uint64_t seed)
{
	struct lm_random_spec sp = {
		.pattern = pattern,
		.hidden = hidden,
		.vocab = vocab,
		.intermediate = 80,
		.n_heads = 6,
		.n_kv_heads = 2,
		.head_dim = 12,
		.m_heads = 6,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 12,
		.m_conv_kernel = 4,
		.m_chunk = 16,
		.dtype = TENSOR_BF16,
		.seed = seed,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	return m;
}

static int32_t *tokens_of(int n, int vocab, unsigned seed)
{
	int32_t *t = xmalloc(sizeof(*t) * (size_t)MAX(n, 1));
	for (int i = 0; i < n; i++)
		t[i] = (int32_t)((i * 7919u + seed * 104729u) % (unsigned)vocab);
	return t;
}

struct err {
	double num, den;
	double min_cos;
};

static void compare(struct err *e, const float *got, const float *want, size_t rows, int vocab)
{
	for (size_t r = 0; r < rows; r++) {
		double dot = 0, gg = 0, ww = 0;
		for (int i = 0; i < vocab; i++) {
			double g = got[r * vocab + i], w = want[r * vocab + i];
			e->num += (g - w) * (g - w);
			e->den += w * w;
			dot += g * w, gg += g * g, ww += w * w;
		}
		double c = dot / sqrt(gg * ww + 1e-300);
		if (c < e->min_cos)
			e->min_cos = c;
	}
}

static int argmax(const float *x, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* fp32 CUDA vs the CPU, per logit, relative to the row's largest |logit| (NMSE 1e-9 is ~3e-5
 * RMS; the worst logit of a row measured 7.6e-7 in the emulation) */
#define FP32_ROW_TOL 1e-4

/* Each row of got within FP32_ROW_TOL of want's, and the same greedy token where want's top-1
 * leads by more than twice that; returns how many rows' tokens were compared. */
static int check_rows_fp32(const float *got, const float *want, size_t rows, int vocab)
{
	int compared = 0;
	for (size_t r = 0; r < rows; r++) {
		const float *g = got + r * vocab, *w = want + r * vocab;
		double mag = 0, diff = test_max_abs_diff(g, w, (size_t)vocab);
		for (int i = 0; i < vocab; i++)
			mag = fmax(mag, fabs(w[i]));
		if (!(diff <= FP32_ROW_TOL * mag))
			fprintf(stderr, "row %zu: max |diff| %.3g of max |logit| %.3g\n", r, diff, mag);
		CHECK(diff <= FP32_ROW_TOL * mag);
		if (test_top_margin(w, vocab) > 2 * FP32_ROW_TOL * mag) {
			CHECK_INT_EQ(argmax(g, vocab), argmax(w, vocab));
			compared++;
		}
	}
	return compared;
}

/* A prefill of n tokens (all logits), then the decode of each of ids[0..steps) (its logits in
 * the following rows). */
static void feed(struct engine_backend *b, const int32_t *tok, int n, const int32_t *ids, int steps,
		 float *logits, int vocab)
{
	struct engine_session *s = engine_session_create_on(b, n + steps + 1);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, logits), 0);
	for (int i = 0; i < steps; i++)
		CHECK_INT_EQ(engine_session_decode(s, ids[i], logits + (size_t)(n + i) * vocab), 0);
	engine_session_destroy(s);
}

/* Prefill n tokens (all logits), then `steps` greedy decode steps; logits of every row and the
 * greedy tokens out. */
static void run(struct engine_backend *b, const int32_t *tok, int n, int steps, float *logits,
		int32_t *greedy, int vocab)
{
	struct engine_session *s = engine_session_create_on(b, n + steps + 1);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, logits), 0);
	int32_t next = argmax(logits + (size_t)(n - 1) * vocab, vocab);
	for (int i = 0; i < steps; i++) {
		greedy[i] = next;
		float *row = logits + (size_t)(n + i) * vocab;
		CHECK_INT_EQ(engine_session_decode(s, next, row), 0);
		next = argmax(row, vocab);
	}
	engine_session_destroy(s);
}

/* CUDA vs CPU on one model at both precisions. */
static void test_vs_cpu(const char *pattern, int hidden, int n)
{
	const int vocab = 96, steps = 6;
	struct engine_model *m = model_of(pattern, hidden, vocab, 7 + (uint64_t)n);
	int32_t *tok = tokens_of(n, vocab, 3);
	size_t rows = (size_t)n + steps;
	float *want = xmalloc(rows * vocab * sizeof(float)), *got = xmalloc(rows * vocab * sizeof(float));
	int32_t gw[6];
	struct engine_backend *cpu = test_backend_create(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32);
	run(cpu, tok, n, steps, want, gw, vocab);

	/* the CPU's own continuation fed to CUDA, so rows compare position by position */
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	feed(b, tok, n, gw, steps, got, vocab);
	struct err e = {.min_cos = 1};
	compare(&e, got, want, rows, vocab);
	double nmse = e.num / e.den;
	if (!(nmse <= 1e-9))
		fprintf(stderr, "%s n=%d fp32: NMSE %.3g\n", pattern, n, nmse);
	CHECK(nmse <= 1e-9);
	/* the greedy rows (the prompt's last and each decode's): most must be compared */
	int compared = check_rows_fp32(got + (size_t)(n - 1) * vocab, want + (size_t)(n - 1) * vocab,
				       (size_t)steps + 1, vocab);
	CHECK(compared * 2 >= steps + 1);
	engine_backend_destroy(b);

	b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16);
	feed(b, tok, n, gw, steps, got, vocab);
	e = (struct err){.min_cos = 1};
	compare(&e, got, want, rows, vocab);
	if (!(e.min_cos >= 0.999))
		fprintf(stderr, "%s n=%d bf16: min cosine %.6f\n", pattern, n, e.min_cos);
	CHECK(e.min_cos >= 0.999);
	engine_backend_destroy(b);
	engine_backend_destroy(cpu);
	free(want), free(got), free(tok);
	lm_random_model_destroy(m);
}

/* On CUDA fp32: split prefill vs whole, graph vs eager decode, snapshot/restore/copy, batches,
 * and a decode after a long prefill. */
static void test_cuda_self(void)
{
	const int vocab = 64, n = 40, steps = 5;
	struct engine_model *m = model_of("M*-M*", 32, vocab, 99);
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	struct engine_backend *eager = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	backend_cuda_set_graphs(eager, false);
	int32_t *tok = tokens_of(n + steps, vocab, 5);
	float *whole = xmalloc((size_t)(n + steps) * vocab * sizeof(float));
	float *split = xmalloc((size_t)(n + steps) * vocab * sizeof(float));
	float *row = xmalloc((size_t)vocab * sizeof(float));

	/* split prefill == whole prefill */
	struct engine_session *a = engine_session_create_on(b, 200), *c = engine_session_create_on(b, 200);
	REQUIRE(a && c);
	CHECK_INT_EQ(engine_session_append(a, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, whole), 0);
	CHECK_INT_EQ(engine_session_append(c, tok, NULL, 17, ENGINE_LOGITS_ALL, split), 0);
	CHECK_INT_EQ(engine_session_append(c, tok + 17, NULL, (size_t)n - 17, ENGINE_LOGITS_ALL,
					   split + (size_t)17 * vocab),
		     0);
	struct err e = {.min_cos = 1};
	compare(&e, split, whole, (size_t)n, vocab);
	CHECK(e.num / e.den <= 1e-9);

	/* graph replay == eager launches, bit for bit, across a KV capacity change (64 -> 128) */
	struct engine_session *g = engine_session_create_on(eager, 200);
	REQUIRE(g);
	CHECK_INT_EQ(engine_session_append(g, tok, NULL, (size_t)n, ENGINE_LOGITS_NONE, NULL), 0);
	uint64_t caps0 = backend_cuda_graph_captures(b);
	for (int i = 0; i < 30; i++) {
		int32_t t = tok[i % n];
		CHECK_INT_EQ(engine_session_decode(a, t, whole), 0);
		CHECK_INT_EQ(engine_session_decode(g, t, split), 0);
		CHECK(memcmp(whole, split, (size_t)vocab * sizeof(float)) == 0);
	}
	CHECK_INT_EQ((int)(backend_cuda_graph_captures(b) - caps0), 2);
	CHECK_INT_EQ((int)backend_cuda_graph_captures(eager), 0);

	/* snapshot / restore / copy continue exactly like the original */
	struct engine_snapshot *snap = engine_session_snapshot(a);
	REQUIRE(snap);
	struct engine_session *cp = engine_session_copy(a);
	REQUIRE(cp);
	CHECK_INT_EQ(engine_session_decode(a, 3, whole), 0);
	CHECK_INT_EQ(engine_session_decode(cp, 3, split), 0);
	CHECK(memcmp(whole, split, (size_t)vocab * sizeof(float)) == 0);
	CHECK_INT_EQ(engine_session_restore(a, snap), 0);
	CHECK_INT_EQ(engine_session_decode(a, 3, row), 0);
	CHECK(memcmp(whole, row, (size_t)vocab * sizeof(float)) == 0);
	engine_snapshot_destroy(snap);

	/* a batch of two sessions == each alone, within the split prefill's bound */
	struct engine_session *x = engine_session_create_on(b, 100), *y = engine_session_create_on(b, 100);
	struct engine_session *x1 = engine_session_create_on(b, 100), *y1 = engine_session_create_on(b, 100);
	REQUIRE(x && y && x1 && y1);
	float *bx = xmalloc((size_t)9 * vocab * sizeof(float)), *by = xmalloc((size_t)vocab * sizeof(float));
	float *ax = xmalloc((size_t)9 * vocab * sizeof(float)), *ay = xmalloc((size_t)vocab * sizeof(float));
	struct engine_batch_entry ent[2] = {
		{.session = x, .tokens = tok, .n = 9, .want = ENGINE_LOGITS_ALL, .ret_logits = bx},
		{.session = y, .tokens = tok + 9, .n = 5, .want = ENGINE_LOGITS_LAST, .ret_logits = by},
	};
	CHECK_INT_EQ(engine_forward_batch(b, ent, 2), 0);
	CHECK_INT_EQ(engine_session_append(x1, tok, NULL, 9, ENGINE_LOGITS_ALL, ax), 0);
	CHECK_INT_EQ(engine_session_append(y1, tok + 9, NULL, 5, ENGINE_LOGITS_LAST, ay), 0);
	e = (struct err){.min_cos = 1};
	compare(&e, bx, ax, 9, vocab);
	compare(&e, by, ay, 1, vocab);
	if (!(e.num / e.den <= 1e-9))
		fprintf(stderr, "a batch of two vs each alone: NMSE %.3g\n", e.num / e.den);
	CHECK(e.num / e.den <= 1e-9);
	free(bx), free(by), free(ax), free(ay);
	engine_session_destroy(x), engine_session_destroy(y);
	engine_session_destroy(x1), engine_session_destroy(y1);
	engine_session_destroy(cp), engine_session_destroy(g);
	engine_session_destroy(a), engine_session_destroy(c);
	engine_backend_destroy(eager);
	engine_backend_destroy(b);
	free(tok), free(whole), free(split), free(row);
	lm_random_model_destroy(m);
}

/* Decode after a 1,100-token prefill: CUDA fp32 vs the CPU. */
static void test_long(void)
{
	const int vocab = 48, n = 1100, steps = 4;
	struct engine_model *m = model_of("M*", 24, vocab, 1234);
	int32_t *tok = tokens_of(n, vocab, 9);
	struct engine_backend *cpu = test_backend_create(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32);
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	struct engine_session *sc = engine_session_create_on(cpu, n + steps);
	struct engine_session *sg = engine_session_create_on(b, n + steps);
	REQUIRE(sc && sg);
	float want[48 * 5], got[48 * 5];
	CHECK_INT_EQ(engine_session_append(sc, tok, NULL, (size_t)n, ENGINE_LOGITS_LAST, want), 0);
	CHECK_INT_EQ(engine_session_append(sg, tok, NULL, (size_t)n, ENGINE_LOGITS_LAST, got), 0);
	for (int i = 0; i < steps; i++) {
		int32_t t = argmax(want + i * vocab, vocab);
		CHECK_INT_EQ(engine_session_decode(sc, t, want + (i + 1) * vocab), 0);
		CHECK_INT_EQ(engine_session_decode(sg, t, got + (i + 1) * vocab), 0);
	}
	struct err e = {.min_cos = 1};
	compare(&e, got, want, steps + 1, vocab);
	if (!(e.num / e.den <= 1e-9))
		fprintf(stderr, "long: NMSE %.3g\n", e.num / e.den);
	CHECK(e.num / e.den <= 1e-9);
	engine_session_destroy(sc), engine_session_destroy(sg);
	engine_backend_destroy(cpu), engine_backend_destroy(b);
	free(tok);
	lm_random_model_destroy(m);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return TEST_SKIP;
	}
	/* every block type alone and mixed; prefills of 1, chunk - 1, chunk + 1 and several chunks */
	static const struct {
		const char *pattern;
		int hidden, n;
	} cases[] = {
		{"M", 40, 1}, {"M", 40, 15},   {"M", 40, 17},	 {"*", 36, 9},
		{"-", 36, 7}, {"M*-", 64, 53}, {"*-M-", 48, 33},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		test_vs_cpu(cases[i].pattern, cases[i].hidden, cases[i].n);
	test_cuda_self();
	test_long();
	return test_exit();
}
