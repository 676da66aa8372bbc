/* The whole LM on CUDA with q8, q4 and fp8 weights (--weights, quantized at upload:
 * backend_cuda.c) against the CPU backend with the same weights, on the tiny checkpoints
 * (tests/fixtures/models: tiny-mamba, and tiny-tied, whose tied lm_head is quantized as a copy on
 * both; the FP8 checkpoints tiny-fp8, per-tensor scales, and tiny-fp8-pc, per-row, and tiny-mamba
 * quantized to fp8 by ModelOpt's recipe). Both backends quantize with the same reference
 * quantizer (fp8: copy the same codes), so they hold the same records; the CPU's fp32
 * precision (the exact quantized kernels, docs/quantization.md) is the reference. On a device in
 * `gpu` (77 without one), on the emulation in `gpu-emu`.
 *
 * Checked: a 40-token prefill (past CUDA_QGEMV_MAX_ROWS: the dequantized slices and cuBLASLt),
 * a 12-token one (two GEMV launches), and decode steps (the GEMV, through the captured graph):
 * - CUDA fp32 precision: logits NMSE <= 1e-9 over all rows and every logit within 1e-4 of its
 *   row's largest |logit| (the fp32 forward's bounds, tests/gpu/test-gpu-forward.c: the same
 *   exact weights, only summation order differs), every row's cosine >= 0.9999 (issue 29);
 * - CUDA bf16 precision (bf16 activations, the weights rounded to bf16 for the prefill's GEMM):
 *   every row's cosine >= 0.999, the bf16 forward's bound;
 * - a batch of three decoding sessions (a 4-row graph bucket with one padding row) gives each
 *   session's logits as alone within NMSE 1e-9 (q8 and fp8), and the graph replays of fp8's
 *   batches equal the same batches launched eagerly, bit for bit;
 * - fp8 is refused on an sm_80 device naming the architecture (gpu-quant-lm-sm80, emulated);
 * - the backend reports its weights as the format and holds fewer bytes than in bf16;
 * - a NaN weight fails the upload naming the layer, the matrix and the (lowest bad) row;
 * - the checkpoint written by holo-quantize (q4, the head's records included) runs as stored
 *   with the same logits, bit for bit, as the source quantized at upload (the same records
 *   through the same kernels on the same device). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "quantized.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct engine_model *load(const char *name)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	REQUIRE(root);
	char dir[1024], err[512] = "";
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/models/%s", root, name);
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	if (!m)
		fprintf(stderr, "%s: %s\n", dir, err);
	REQUIRE(m);
	return m;
}

static struct engine_backend *create(struct engine_model *m, enum engine_backend_kind kind,
				     enum engine_precision p, enum engine_weights w, char *err, size_t errlen)
{
	struct engine_backend_options o = {.kind = kind, .precision = p, .weights = w};
	if (kind != ENGINE_BACKEND_CPU)
		o.device = test_gpu_device();
	return engine_backend_create(m, &o, err, errlen);
}

static struct engine_backend *create_ok(struct engine_model *m, enum engine_backend_kind kind,
					enum engine_precision p, enum engine_weights w)
{
	char err[512] = "";
	struct engine_backend *b = create(m, kind, p, w, err, sizeof(err));
	if (!b)
		fprintf(stderr, "engine_backend_create: %s\n", err);
	REQUIRE(b);
	return b;
}

struct err {
	double num, den, min_cos, worst_row; /* worst_row: max |diff| / max |logit| */
};

static void compare(struct err *e, const float *got, const float *want, size_t rows, int vocab)
{
	for (size_t r = 0; r < rows; r++) {
		double dot = 0, gg = 0, ww = 0, diff = 0, mag = 0;
		for (int i = 0; i < vocab; i++) {
			double g = got[r * vocab + i], w = want[r * vocab + i];
			e->num += (g - w) * (g - w);
			e->den += w * w;
			dot += g * w, gg += g * g, ww += w * w;
			diff = fmax(diff, fabs(g - w));
			mag = fmax(mag, fabs(w));
		}
		double c = dot / sqrt(gg * ww + 1e-300);
		e->min_cos = fmin(e->min_cos, c);
		e->worst_row = fmax(e->worst_row, diff / (mag + 1e-30));
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

/* Prefill `n` tokens (all logits), then `steps` decodes of ids[] (the CPU's greedy tokens when
 * ids is filled: greedy[] NULL), logits in rows n..n+steps-1. */
static void run(struct engine_backend *b, const int32_t *tok, int n, int steps, int32_t *ids, bool choose,
		float *logits, int vocab)
{
	struct engine_session *s = engine_session_create_on(b, n + steps + 1);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, logits), 0);
	for (int i = 0; i < steps; i++) {
		if (choose)
			ids[i] = argmax(logits + (size_t)(n - 1 + i) * vocab, vocab);
		CHECK_INT_EQ(engine_session_decode(s, ids[i], logits + (size_t)(n + i) * vocab), 0);
	}
	engine_session_destroy(s);
}

static void test_vs_cpu(const char *model, enum engine_weights w, int n, const char *held)
{
	struct engine_model *m = load(model);
	const int vocab = m->cfg.vocab, steps = 3;
	int32_t tok[64], ids[8];
	REQUIRE(n <= 64);
	for (int i = 0; i < n; i++)
		tok[i] = (int32_t)((i * 7919u + 13u) % (unsigned)vocab);
	const size_t rows = (size_t)n + steps;
	float *want = xmalloc(rows * vocab * sizeof(float)), *got = xmalloc(rows * vocab * sizeof(float));
	struct engine_backend *cpu = create_ok(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32, w);
	run(cpu, tok, n, steps, ids, true, want, vocab);

	struct engine_backend *b = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, w);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_STR_EQ(info.weights, held);
	run(b, tok, n, steps, ids, false, got, vocab);
	struct err e = {.min_cos = 1};
	compare(&e, got, want, rows, vocab);
	/* the figures, for docs/quantization.md */
	fprintf(stderr, "%s %s n=%d fp32: NMSE %.3g, worst row %.3g, min cosine %.8f\n", model,
		engine_weights_name(w), n, e.num / e.den, e.worst_row, e.min_cos);
	CHECK(e.num / e.den <= 1e-9);
	CHECK(e.worst_row <= 1e-4);
	CHECK(e.min_cos >= 0.9999);
	engine_backend_destroy(b);

	b = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16, w);
	/* fp8's prefill on the FP8 matmul has its own bound (test_fp8_gemm): here the dequantized
	 * slices, as q8/q4 run */
	backend_cuda_set_fp8_gemm(b, false);
	run(b, tok, n, steps, ids, false, got, vocab);
	e = (struct err){.min_cos = 1};
	compare(&e, got, want, rows, vocab);
	fprintf(stderr, "%s %s n=%d bf16: min cosine %.6f\n", model, engine_weights_name(w), n, e.min_cos);
	CHECK(e.min_cos >= 0.999);
	engine_backend_destroy(b);
	engine_backend_destroy(cpu);
	free(want), free(got);
	engine_model_destroy(m);
}

/* fp8 in bf16 precision: the prefill's products on matrices of one scale run on cuBLASLt's FP8
 * matmul with the activations quantized to e4m3 per tensor (backend_cuda.c). Against the CPU's fp32
 * run of the same weights, every row's cosine >= FP8_GEMM_MIN_COS and the NMSE <= FP8_GEMM_MAX_NMSE
 * (docs/quantization.md "On CUDA": the activations' quantization, up to 2^-4 of each value, on top
 * of bf16's rounding; measured on the emulation: cosine 0.99094, NMSE 5.6e-3, so the bounds are
 * twice the measured distance), and
 * the same backend with the FP8 matmul turned off (the dequantized slices) >= 0.999, the bf16
 * bound; the two runs differ (the FP8 matmul ran). A prefill of 40 tokens, then 3 decode steps
 * (the GEMV, both runs alike). */
#define FP8_GEMM_MIN_COS 0.98
#define FP8_GEMM_MAX_NMSE 0.012
static void test_fp8_gemm(const char *model, enum engine_weights w)
{
	struct engine_model *m = load(model);
	const int vocab = m->cfg.vocab, n = 40, steps = 3;
	int32_t tok[40], ids[3];
	for (int i = 0; i < n; i++)
		tok[i] = (int32_t)((i * 7919u + 13u) % (unsigned)vocab);
	const size_t rows = (size_t)n + steps;
	float *want = xmalloc(rows * vocab * sizeof(float)), *got = xmalloc(rows * vocab * sizeof(float));
	float *deq = xmalloc(rows * vocab * sizeof(float));
	struct engine_backend *cpu = create_ok(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32, w);
	run(cpu, tok, n, steps, ids, true, want, vocab);
	struct engine_backend *b = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16, w);
	run(b, tok, n, steps, ids, false, got, vocab);
	backend_cuda_set_fp8_gemm(b, false);
	run(b, tok, n, steps, ids, false, deq, vocab);
	struct err e = {.min_cos = 1}, ed = {.min_cos = 1}, ex = {.min_cos = 1};
	compare(&e, got, want, rows, vocab);
	compare(&ed, deq, want, rows, vocab);
	compare(&ex, got, deq, rows, vocab);
	fprintf(stderr,
		"%s %s bf16, prefill on the FP8 matmul: min cosine %.6f, NMSE %.3g (dequantized "
		"slices: %.6f, %.3g; FP8 vs dequantized NMSE %.3g)\n",
		model, engine_weights_name(w), e.min_cos, e.num / e.den, ed.min_cos, ed.num / ed.den,
		ex.num / ex.den);
	CHECK(e.min_cos >= FP8_GEMM_MIN_COS);
	CHECK(e.num / e.den <= FP8_GEMM_MAX_NMSE);
	CHECK(ed.min_cos >= 0.999);
	CHECK(ex.num > 0);
	engine_backend_destroy(b);
	engine_backend_destroy(cpu);
	free(want), free(got), free(deq);
	engine_model_destroy(m);
}

/* Three sessions decoding in one batch (decode rows, a 4-row bucket) vs each alone; the same
 * batches on a backend without graphs (every launch eager) give the same bits. */
static void test_batch(const char *model, enum engine_weights w)
{
	struct engine_model *m = load(model);
	const int vocab = m->cfg.vocab, n = 5;
	struct engine_backend *b = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, w);
	struct engine_backend *eb = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, w);
	backend_cuda_set_graphs(eb, false);
	struct engine_session *s[3], *a[3], *es[3];
	int32_t tok[3][5];
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < n; i++)
			tok[k][i] = (int32_t)((i * 31u + (unsigned)k * 97u + 5u) % (unsigned)vocab);
		s[k] = engine_session_create_on(b, 32);
		a[k] = engine_session_create_on(b, 32);
		es[k] = engine_session_create_on(eb, 32);
		REQUIRE(s[k] && a[k] && es[k]);
		CHECK_INT_EQ(engine_session_append(s[k], tok[k], NULL, n, ENGINE_LOGITS_NONE, NULL), 0);
		CHECK_INT_EQ(engine_session_append(a[k], tok[k], NULL, n, ENGINE_LOGITS_NONE, NULL), 0);
		CHECK_INT_EQ(engine_session_append(es[k], tok[k], NULL, n, ENGINE_LOGITS_NONE, NULL), 0);
	}
	float *bl = xmalloc(3 * (size_t)vocab * sizeof(float)),
	      *al = xmalloc(3 * (size_t)vocab * sizeof(float));
	float *el = xmalloc(3 * (size_t)vocab * sizeof(float));
	uint64_t caps0 = backend_cuda_graph_captures(b);
	struct err e = {.min_cos = 1};
	for (int step = 0; step < 3; step++) {
		int32_t next[3];
		struct engine_batch_entry ent[3];
		for (int k = 0; k < 3; k++) {
			next[k] = (int32_t)((step * 17u + (unsigned)k * 3u + 1u) % (unsigned)vocab);
			ent[k] = (struct engine_batch_entry){.session = s[k],
							     .tokens = &next[k],
							     .n = 1,
							     .want = ENGINE_LOGITS_LAST,
							     .ret_logits = bl + (size_t)k * vocab};
		}
		CHECK_INT_EQ(engine_forward_batch(b, ent, 3), 0);
		for (int k = 0; k < 3; k++) {
			ent[k].session = es[k];
			ent[k].ret_logits = el + (size_t)k * vocab;
		}
		CHECK_INT_EQ(engine_forward_batch(eb, ent, 3), 0);
		CHECK(memcmp(bl, el, 3 * (size_t)vocab * sizeof(float)) == 0);
		for (int k = 0; k < 3; k++)
			CHECK_INT_EQ(engine_session_decode(a[k], next[k], al + (size_t)k * vocab), 0);
		compare(&e, bl, al, 3, vocab);
	}
	if (!(e.num / e.den <= 1e-9))
		fprintf(stderr, "%s %s batch of three vs alone: NMSE %.3g\n", model, engine_weights_name(w),
			e.num / e.den);
	CHECK(e.num / e.den <= 1e-9);
	/* the batches replayed a captured graph (the 4-row bucket); the eager backend none */
	CHECK(backend_cuda_graph_captures(b) > caps0);
	CHECK_INT_EQ((int)backend_cuda_graph_captures(eb), 0);
	for (int k = 0; k < 3; k++)
		engine_session_destroy(s[k]), engine_session_destroy(a[k]), engine_session_destroy(es[k]);
	free(bl), free(al), free(el);
	engine_backend_destroy(b);
	engine_backend_destroy(eb);
	engine_model_destroy(m);
}

/* q4 holds fewer bytes than q8, and q8 than the plain weights in bf16. */
static void test_bytes(void)
{
	struct engine_model *m = load("tiny-mamba");
	uint64_t bytes[3];
	const enum engine_weights ws[3] = {ENGINE_WEIGHTS_DEFAULT, ENGINE_WEIGHTS_Q8, ENGINE_WEIGHTS_Q4};
	for (int i = 0; i < 3; i++) {
		struct engine_backend *b = create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16, ws[i]);
		struct engine_backend_info info;
		CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
		bytes[i] = info.weight_bytes;
		engine_backend_destroy(b);
	}
	CHECK(bytes[1] < bytes[0]);
	CHECK(bytes[2] < bytes[1]);
	engine_model_destroy(m);
}

/* A NaN weight (an f32 random model) fails the upload naming the layer, matrix and row. */
static void test_nan(void)
{
	struct lm_random_spec sp = {
		.pattern = "M*-",
		.hidden = 32,
		.vocab = 40,
		.intermediate = 48,
		.n_heads = 4,
		.n_kv_heads = 2,
		.head_dim = 8,
		.m_heads = 4,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 8,
		.m_conv_kernel = 4,
		.m_chunk = 8,
		.dtype = TENSOR_F32,
		.seed = 3,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	/* k_proj is 16 x 32: row 3 NaN and row 12 (another pool task) past fp16's range; the
	 * lowest refused row is named, whichever thread quantized it */
	float *k = (float *)m->layers[1].attn.k.data;
	REQUIRE(m->layers[1].attn.k.shape[0] == 16 && m->layers[1].attn.k.shape[1] == 32);
	k[3 * 32 + 5] = nanf("");
	k[12 * 32 + 1] = 1e6f;
	char err[512] = "";
	CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_Q4, err, sizeof(err)) ==
	      NULL);
	if (!strstr(err, "cannot quantize layer 1's k_proj to q4: row 3 has a NaN or infinite weight"))
		fprintf(stderr, "got: %s\n", err);
	CHECK(strstr(err, "cannot quantize layer 1's k_proj to q4: row 3 has a NaN or infinite "
			  "weight") != NULL);
	/* fp8 (ModelOpt's per-tensor recipe) looks at the whole matrix first: the NaN's row */
	CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_FP8, err, sizeof(err)) ==
	      NULL);
	CHECK(strstr(err, "cannot quantize layer 1's k_proj to fp8: row 3 has a NaN or infinite "
			  "weight") != NULL);
	k[3 * 32 + 5] = 0.5f; /* now row 12 alone */
	CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_FP8, err, sizeof(err)) ==
	      NULL);
	if (!strstr(err, "cannot quantize layer 1's k_proj to fp8: its largest weight is past +-65504"))
		fprintf(stderr, "got: %s\n", err);
	CHECK(strstr(err, "cannot quantize layer 1's k_proj to fp8: its largest weight is past "
			  "+-65504") != NULL);
	CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_Q8, err, sizeof(err)) ==
	      NULL);
	CHECK(strstr(err, "cannot quantize layer 1's k_proj to q8: row 12 has a weight past +-65504") != NULL);
	lm_random_model_destroy(m);
}

/* holo-quantize's q4 directory of tiny-mamba on CUDA == the source with --weights q4. */
static void test_stored(void)
{
	const char *t = getenv("TMPDIR");
	char dir[512], err[512] = "";
	snprintf(dir, sizeof(dir), "%s/test-gpu-quant-XXXXXX", t && *t ? t : "/tmp");
	REQUIRE(mkdtemp(dir));
	char out[600];
	snprintf(out, sizeof(out), "%s/q4", dir);
	struct engine_model *m = load("tiny-mamba");
	struct lm_quantized lq = {0};
	struct quantized_write_opts o = {.layers = lm_quantized_layers(),
					 .layers_arg = &lq,
					 .format = QUANT_Q4};
	int r = quantized_checkpoint_write(m, out, &o, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "holo-quantize: %s\n", err);
	REQUIRE(r == 0);
	struct engine_model *q = engine_model_load(out, err, sizeof(err));
	if (!q)
		fprintf(stderr, "%s: %s\n", out, err);
	REQUIRE(q);
	const int vocab = m->cfg.vocab, n = 6, steps = 2;
	int32_t tok[6] = {1, 7, 9, 30, 4, 100}, ids[2] = {5, 6};
	float *a = xmalloc((size_t)(n + steps) * vocab * sizeof(float));
	float *c = xmalloc((size_t)(n + steps) * vocab * sizeof(float));
	struct engine_backend *bs =
		create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_Q4);
	struct engine_backend *bq =
		create_ok(q, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_DEFAULT);
	struct engine_backend_info is, iq;
	CHECK_INT_EQ(engine_backend_get_info(bs, &is), 0);
	CHECK_INT_EQ(engine_backend_get_info(bq, &iq), 0);
	CHECK_STR_EQ(iq.weights, "q4");
	CHECK_INT_EQ(iq.weight_bytes, is.weight_bytes);
	run(bs, tok, n, steps, ids, false, a, vocab);
	run(bq, tok, n, steps, ids, false, c, vocab);
	CHECK(memcmp(a, c, (size_t)(n + steps) * vocab * sizeof(float)) == 0);
	engine_backend_destroy(bs), engine_backend_destroy(bq);
	free(a), free(c);
	engine_model_destroy(q), engine_model_destroy(m);
	char cmd[1100];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK_INT_EQ(system(cmd), 0);
}

int main(int argc, char **argv)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return TEST_SKIP;
	}
	/* gpu-quant-lm-plan (HOLOD_GPU_EMU_MEMORY=48K): the refusal names the records' bytes and
	 * the prefill's dequantized slice, both counted before anything is allocated */
	if (argc > 1 && strcmp(argv[1], "plan") == 0) {
		struct engine_model *m = load("tiny-mamba");
		char err[512] = "";
		CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_Q8, err,
			     sizeof(err)) == NULL);
		fprintf(stderr, "%s\n", err);
		/* the lm_head's 256 x 64 in fp32 is the largest slice */
		CHECK(strstr(err, "bytes of device memory in q8 (fp32 activations) and its prefill "
				  "65536 bytes of dequantized rows, but CUDA device") != NULL);
		engine_model_destroy(m);
		return test_exit();
	}
	/* gpu-quant-lm-sm80 (HOLOD_GPU_EMU_ARCH=sm_80): fp8 is refused naming the architecture, the
	 * checkpoint's and --weights fp8 alike; q8 runs there, also from the FP8 checkpoint */
	if (argc > 1 && strcmp(argv[1], "sm80") == 0) {
		struct engine_model *m = load("tiny-fp8");
		char err[512] = "";
		CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_DEFAULT, err,
			     sizeof(err)) == NULL);
		fprintf(stderr, "%s\n", err);
		CHECK(strstr(err, "the checkpoint's linear layers are fp8 (NVIDIA ModelOpt): fp8 needs a "
				  "GPU with FP8 tensor cores, compute capability 8.9 or newer") != NULL);
		CHECK(strstr(err, "is sm_80: use --weights q8 or q4 (requantized at load)") != NULL);
		struct engine_backend *b =
			create_ok(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32, ENGINE_WEIGHTS_Q8);
		struct engine_backend_info info;
		CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
		CHECK_STR_EQ(info.weights, "q8");
		engine_backend_destroy(b);
		engine_model_destroy(m);
		m = load("tiny-mamba");
		CHECK(create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16, ENGINE_WEIGHTS_FP8, err,
			     sizeof(err)) == NULL);
		CHECK(strstr(err, "--weights fp8: fp8 needs a GPU with FP8 tensor cores") != NULL);
		engine_model_destroy(m);
		return test_exit();
	}
	test_vs_cpu("tiny-mamba", ENGINE_WEIGHTS_Q8, 40, "q8");
	test_vs_cpu("tiny-mamba", ENGINE_WEIGHTS_Q4, 12, "q4");
	test_vs_cpu("tiny-tied", ENGINE_WEIGHTS_Q4, 40, "q4");
	test_vs_cpu("tiny-tied", ENGINE_WEIGHTS_Q8, 12, "q8");
	/* fp8: the FP8 checkpoints as stored (per tensor, per row), tiny-mamba by ModelOpt's recipe,
	 * and an FP8 checkpoint requantized to q8 */
	test_vs_cpu("tiny-fp8", ENGINE_WEIGHTS_DEFAULT, 40, "fp8");
	test_vs_cpu("tiny-fp8-pc", ENGINE_WEIGHTS_FP8, 12, "fp8");
	test_vs_cpu("tiny-mamba", ENGINE_WEIGHTS_FP8, 40, "fp8");
	test_vs_cpu("tiny-fp8-pc", ENGINE_WEIGHTS_Q8, 12, "q8");
	test_fp8_gemm("tiny-fp8", ENGINE_WEIGHTS_DEFAULT);
	test_fp8_gemm("tiny-mamba", ENGINE_WEIGHTS_FP8);
	test_batch("tiny-mamba", ENGINE_WEIGHTS_Q8);
	test_batch("tiny-fp8-pc", ENGINE_WEIGHTS_DEFAULT);
	test_bytes();
	test_nan();
	test_stored();
	return test_exit();
}
