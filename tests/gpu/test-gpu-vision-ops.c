/* The vision kernels (cuda/vision_ops.cu) against the CPU vision path's own steps
 * (engine/backend/cpu/vision_cpu.h): vision_patchify, vision_layernorm_rows, vision_bias_rows,
 * vision_bias_gelu_rows, vision_attention, vision_shuffle_norm, and the token assembly
 * vision_vit_forward() does inline (prefix rows, patch embedding + position grid). Runs on a
 * device (suite `gpu`, 77 without one) and in the CUDA emulation (`gpu-emu`, three thread orders).
 *
 * Tolerances (the CPU sums LayerNorm and RMSNorm statistics in double, the device in fp32; the
 * device's attention is an online softmax, the CPU's a softmax over whole rows; nvcc contracts
 * into FMA):
 * - patches, token rows and bias add: exact (fp32), or the host's own bf16 rounding;
 * - LayerNorm, RMSNorm, GELU: 1e-5 absolute + 1e-5 relative in fp32;
 * - attention: 2e-5 absolute + 2e-5 relative in fp32 (outputs are averages of values in [-1, 1]);
 * - a bf16 output adds 2^-8 relative (one rounding); the bf16 attention on tensor cores (head
 *   dims that are multiples of 16) rounds q, k, v and the probabilities to bf16 as well: every
 *   output row within cosine 0.999 of the CPU's and every value within 0.03. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "model.h"
#include "test.h"
#include "vision.h"
#include "vision_cpu.h"

TEST_DEFINE_GLOBALS;

static struct gpu_context *g;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static float *rand_vec(size_t n, float scale, float offset)
{
	float *v = xmalloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		v[i] = frand() * scale + offset;
	return v;
}

static void *dev_from(const void *host, size_t bytes)
{
	void *p = NULL;
	REQUIRE(gpu_alloc(g, bytes, &p) == 0);
	if (host)
		REQUIRE(gpu_copy_to_device(g, p, host, bytes) == 0);
	return p;
}

/* n values of dtype at dev, widened to fp32 on the host. */
static float *download(const void *dev, size_t n, enum gpu_dtype dtype)
{
	float *out = xmalloc(n * sizeof(float));
	if (dtype == GPU_DTYPE_BF16) {
		uint16_t *raw = xmalloc(n * 2);
		REQUIRE(gpu_copy_to_host(g, raw, dev, n * 2) == 0);
		for (size_t i = 0; i < n; i++)
			out[i] = bf16_to_f32(raw[i]);
		free(raw);
	} else {
		REQUIRE(gpu_copy_to_host(g, out, dev, n * 4) == 0);
	}
	return out;
}

static size_t dsize(enum gpu_dtype t)
{
	return t == GPU_DTYPE_BF16 ? 2 : 4;
}

/* Counts the elements outside abs + rel * |want| (+ 2^-8 |want| for bf16) and reports the first. */
static int compare(const char *what, const float *got, const float *want, size_t n, enum gpu_dtype dtype,
		   double abs_tol, double rel_tol)
{
	int bad = 0;
	if (dtype == GPU_DTYPE_BF16)
		rel_tol += 1.0 / 256;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		if (!(d <= abs_tol + rel_tol * fabs((double)want[i]))) {
			if (!bad)
				fprintf(stderr, "%s: [%zu] got %.9g want %.9g\n", what, i, got[i], want[i]);
			bad++;
		}
	}
	return bad;
}

static void test_patchify(int tiles, int rows, int cols, int p, enum gpu_dtype dtype)
{
	size_t img = (size_t)3 * rows * p * cols * p, n = (size_t)rows * cols * 3 * p * p;
	float *pixels = rand_vec(img * tiles, 2, 0), *want = xmalloc(n * tiles * sizeof(float));
	for (int t = 0; t < tiles; t++)
		vision_patchify(pixels + t * img, rows, cols, p, want + t * n);
	if (dtype == GPU_DTYPE_BF16)
		for (size_t i = 0; i < n * tiles; i++)
			want[i] = bf16_to_f32(f32_to_bf16(want[i]));
	void *dp = dev_from(pixels, img * tiles * 4), *dout = dev_from(NULL, n * tiles * dsize(dtype));
	CHECK_INT_EQ(gpu_vision_patchify(g, dp, tiles, rows, cols, p, dout, dtype), 0);
	float *got = download(dout, n * tiles, dtype);
	CHECK_INT_EQ(compare("patchify", got, want, n * tiles, GPU_DTYPE_F32, 0, 0), 0);
	gpu_free(g, dp);
	gpu_free(g, dout);
	free(pixels);
	free(want);
	free(got);
}

static void test_tokens(int tiles, int n, int n_prefix, int d)
{
	int L = n + n_prefix;
	float *emb = rand_vec((size_t)tiles * n * d, 3, 0), *pos = rand_vec((size_t)n * d, 1, 0);
	float *prefix = rand_vec((size_t)n_prefix * d + 1, 1, 0);
	float *want = xmalloc((size_t)tiles * L * d * sizeof(float));
	/* vision_vit_forward()'s order: x[T:] = embedder(patches); x[T:] += pos; x[:T] = cls */
	for (int t = 0; t < tiles; t++) {
		float *x = want + (size_t)t * L * d;
		memcpy(x + (size_t)n_prefix * d, emb + (size_t)t * n * d, sizeof(float) * n * d);
		for (size_t k = 0; k < (size_t)n * d; k++)
			x[(size_t)n_prefix * d + k] += pos[k];
		memcpy(x, prefix, sizeof(float) * n_prefix * d);
	}
	void *de = dev_from(emb, (size_t)tiles * n * d * 4), *dpos = dev_from(pos, (size_t)n * d * 4);
	void *dpre = dev_from(prefix, ((size_t)n_prefix * d + 1) * 4),
	     *dx = dev_from(NULL, (size_t)tiles * L * d * 4);
	CHECK_INT_EQ(gpu_vision_tokens(g, de, dpos, dpre, tiles, n, n_prefix, d, dx), 0);
	float *got = download(dx, (size_t)tiles * L * d, GPU_DTYPE_F32);
	CHECK_INT_EQ(compare("tokens", got, want, (size_t)tiles * L * d, GPU_DTYPE_F32, 0, 0), 0);
	gpu_free(g, de);
	gpu_free(g, dpos);
	gpu_free(g, dpre);
	gpu_free(g, dx);
	free(emb);
	free(pos);
	free(prefix);
	free(want);
	free(got);
}

static void test_layernorm(int rows, int d, size_t ldx, size_t ldo, enum gpu_dtype dtype)
{
	/* an offset mean, as the residual stream has, so a one-pass variance would show */
	float *x = rand_vec((size_t)rows * ldx, 2, 3), *gm = rand_vec(d, 1, 1), *bt = rand_vec(d, 1, 0);
	float *want = xmalloc((size_t)rows * ldo * sizeof(float));
	vision_layernorm_rows(x, ldx, want, ldo, rows, d, gm, bt);
	void *dx = dev_from(x, (size_t)rows * ldx * 4), *dg = dev_from(gm, d * 4), *db = dev_from(bt, d * 4);
	void *dout = dev_from(NULL, (size_t)rows * ldo * dsize(dtype));
	CHECK_INT_EQ(gpu_layernorm(g, dx, ldx, dg, db, rows, d, VISION_LN_EPS, dout, dtype, ldo), 0);
	float *got = download(dout, (size_t)rows * ldo, dtype);
	for (int r = 0; r < rows; r++)
		CHECK_INT_EQ(compare("layernorm", got + (size_t)r * ldo, want + (size_t)r * ldo, d, dtype,
				     1e-5, 1e-5),
			     0);
	/* in place */
	if (dtype == GPU_DTYPE_F32 && ldo == ldx) {
		CHECK_INT_EQ(gpu_layernorm(g, dx, ldx, dg, db, rows, d, VISION_LN_EPS, dx, dtype, ldx), 0);
		float *got2 = download(dx, (size_t)rows * ldx, dtype);
		for (int r = 0; r < rows; r++)
			CHECK_INT_EQ(compare("layernorm in place", got2 + (size_t)r * ldx,
					     want + (size_t)r * ldo, d, dtype, 1e-5, 1e-5),
				     0);
		free(got2);
	}
	CHECK_INT_EQ(gpu_layernorm(g, dx, ldx, dg, db, rows, d, VISION_LN_EPS, dx, GPU_DTYPE_BF16, ldx),
		     -EINVAL);
	gpu_free(g, dx);
	gpu_free(g, dg);
	gpu_free(g, db);
	gpu_free(g, dout);
	free(x);
	free(gm);
	free(bt);
	free(want);
	free(got);
}

static void test_bias_act(int rows, int d, size_t ld, enum gpu_act act, enum gpu_dtype dtype)
{
	float *x = rand_vec((size_t)rows * ld, 4, 0), *b = rand_vec(d, 1, 0);
	float *want = xmalloc((size_t)rows * ld * sizeof(float));
	memcpy(want, x, (size_t)rows * ld * sizeof(float));
	if (act == GPU_ACT_GELU_ERF)
		vision_bias_gelu_rows(want, ld, rows, d, b);
	else
		vision_bias_rows(want, ld, rows, d, b);
	void *dx = dev_from(x, (size_t)rows * ld * 4), *db = dev_from(b, d * 4);
	void *dout = dtype == GPU_DTYPE_F32 ? dx : dev_from(NULL, (size_t)rows * ld * 2);
	CHECK_INT_EQ(gpu_bias_act(g, dx, ld, db, rows, d, act, dout, dtype, ld), 0);
	float *got = download(dout, (size_t)rows * ld, dtype);
	double tol = act == GPU_ACT_GELU_ERF ? 1e-5 : 0;
	for (int r = 0; r < rows; r++) {
		CHECK_INT_EQ(compare("bias_act", got + (size_t)r * ld, want + (size_t)r * ld, d, dtype, tol,
				     tol),
			     0);
		/* the padding past d is never written (in place: still x) */
		if (dtype == GPU_DTYPE_F32)
			for (size_t c = (size_t)d; c < ld; c++)
				CHECK(got[(size_t)r * ld + c] == x[(size_t)r * ld + c]);
	}
	CHECK_INT_EQ(gpu_bias_act(g, dx, ld, db, rows, d, (enum gpu_act)7, dout, dtype, ld), -EINVAL);
	if (dout != dx)
		gpu_free(g, dout);
	gpu_free(g, dx);
	gpu_free(g, db);
	free(x);
	free(b);
	free(want);
	free(got);
}

static void test_attention(int tiles, int L, int D, int heads, enum gpu_dtype dtype)
{
	size_t nq = (size_t)tiles * L * 3 * D, no = (size_t)tiles * L * D;
	/* scaled so the scores spread (softmax far from uniform) */
	float *qkv = rand_vec(nq, 1, 0), *want = xmalloc(no * sizeof(float));
	for (size_t i = 0; i < nq; i++)
		if (i % ((size_t)3 * D) < (size_t)2 * D)
			qkv[i] *= 3;
	REQUIRE(cpu_reserve_scratch(cpu_matmul_scratch_bytes(MAX(L, D / heads))) == 0);
	for (int t = 0; t < tiles; t++)
		REQUIRE(vision_attention(qkv + (size_t)t * L * 3 * D, want + (size_t)t * L * D, L, D,
					 heads) == 0);
	void *dq = dev_from(qkv, nq * 4), *dout = dev_from(NULL, no * dsize(dtype));
	CHECK_INT_EQ(gpu_vision_attention(g, dq, tiles, L, D, heads, dout, dtype), 0);
	float *got = download(dout, no, dtype);
	char what[64];
	snprintf(what, sizeof(what), "attention L=%d D=%d heads=%d", L, D, heads);
	if (dtype == GPU_DTYPE_BF16 && (D / heads) % 16 == 0) {
		/* tensor cores: q, k, v and the probabilities in bf16 */
		double worst = 1, err = 0;
		for (size_t r = 0; r < no / D; r++) {
			double dot = 0, gg = 0, ww = 0;
			for (int c = 0; c < D; c++) {
				double a = got[r * D + c], b = want[r * D + c];
				dot += a * b;
				gg += a * a;
				ww += b * b;
				err = fmax(err, fabs(a - b));
			}
			double cs = dot / sqrt(gg * ww);
			worst = cs >= worst ? worst : cs != cs ? -2 : cs;
		}
		fprintf(stderr, "%s, bf16 on tensor cores: smallest row cosine %.6f, largest error %.3g\n",
			what, worst, err);
		CHECK(worst >= 0.999);
		CHECK(err <= 0.03);
	} else {
		CHECK_INT_EQ(compare(what, got, want, no, dtype, 2e-5, 2e-5), 0);
	}
	gpu_free(g, dq);
	gpu_free(g, dout);
	free(qkv);
	free(want);
	free(got);
}

static void test_shuffle_norm(int tiles, int rows, int cols, int d, int s, size_t pad, enum gpu_dtype dtype)
{
	size_t fmap = (size_t)rows * cols * d, stride = fmap + pad, P = (size_t)d * s * s;
	size_t n = (size_t)(rows / s) * (cols / s) * P;
	float *feat = rand_vec(stride * tiles, 2, 0.5f), *gm = rand_vec(P, 1, 1);
	float *want = xmalloc(n * tiles * sizeof(float));
	for (int t = 0; t < tiles; t++)
		vision_shuffle_norm(feat + t * stride, rows, cols, d, s, gm, want + t * n);
	void *df = dev_from(feat, stride * tiles * 4), *dg = dev_from(gm, P * 4);
	void *dout = dev_from(NULL, n * tiles * dsize(dtype));
	CHECK_INT_EQ(gpu_vision_shuffle_norm(g, df, stride, tiles, rows, cols, d, s, dg, VISION_RMS_EPS, dout,
					     dtype),
		     0);
	float *got = download(dout, n * tiles, dtype);
	CHECK_INT_EQ(compare("shuffle_norm", got, want, n * tiles, dtype, 1e-5, 1e-5), 0);
	CHECK_INT_EQ(gpu_vision_shuffle_norm(g, df, stride, tiles, rows + 1, cols, d, s, dg, VISION_RMS_EPS,
					     dout, dtype),
		     -EINVAL);
	gpu_free(g, df);
	gpu_free(g, dg);
	gpu_free(g, dout);
	free(feat);
	free(gm);
	free(want);
	free(got);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	test_patchify(1, 1, 1, 1, GPU_DTYPE_F32);
	test_patchify(2, 3, 2, 4, GPU_DTYPE_F32);
	test_patchify(3, 2, 3, 5, GPU_DTYPE_BF16);
	test_tokens(1, 1, 0, 3);
	test_tokens(3, 6, 2, 37);
	test_layernorm(1, 1, 1, 1, GPU_DTYPE_F32);
	test_layernorm(5, 37, 40, 40, GPU_DTYPE_F32);
	test_layernorm(4, 300, 300, 304, GPU_DTYPE_BF16);
	test_bias_act(3, 45, 48, GPU_ACT_NONE, GPU_DTYPE_F32);
	test_bias_act(5, 300, 300, GPU_ACT_GELU_ERF, GPU_DTYPE_F32);
	test_bias_act(2, 33, 40, GPU_ACT_GELU_ERF, GPU_DTYPE_BF16);
	/* one token; a chunk of keys minus one, plus one, several chunks; head dims 20, 72, 128 */
	test_attention(2, 1, 40, 2, GPU_DTYPE_F32);
	test_attention(2, 31, 40, 2, GPU_DTYPE_F32);
	test_attention(3, 33, 144, 2, GPU_DTYPE_F32);
	test_attention(1, 70, 128, 1, GPU_DTYPE_F32);
	test_attention(2, 37, 60, 3, GPU_DTYPE_BF16);
	/* tensor cores: head dims 16 and 80 (RADIO-H's), partial query and key tiles */
	test_attention(2, 37, 64, 4, GPU_DTYPE_BF16);
	test_attention(1, 70, 160, 2, GPU_DTYPE_BF16);
	test_attention(2, 1, 32, 1, GPU_DTYPE_BF16);
	CHECK_INT_EQ(gpu_vision_attention(g, (const float *)g, 1, 4, 258, 2, (void *)g, GPU_DTYPE_F32),
		     -EINVAL);
	test_shuffle_norm(1, 2, 2, 1, 2, 0, GPU_DTYPE_F32);
	test_shuffle_norm(2, 4, 6, 5, 2, 7, GPU_DTYPE_F32);
	test_shuffle_norm(3, 6, 3, 8, 3, 0, GPU_DTYPE_BF16);
	gpu_context_destroy(g);
	return test_exit();
}
