/* The vision encoder's bf16 precision steps (engine/vision_bf16.c, vision_rows*.c,
 * cpu_dnnl_small.c) against the fp32 path and float64 references.
 *
 * - Every row kernel, in every variant this CPU runs (the others are named as skipped), on the
 *   RADIO-H shapes (1280, 5120 columns; 1032-token softmax rows; 80-wide heads) and odd ones
 *   (1, 3, 17, 33, 1283: every tail length class). Outputs are bf16, so the bound is bf16's
 *   rounding (2^-8 relative, half an ulp) and 2^-14 relative for the fp32 math before it, plus an
 *   absolute term for the approximations: GELU's erf 3e-6, exp's relative 1e-6. Element-wise
 *   kernels whose fp32 math is one exact operation (bias, scale, relu2, bias add) must equal
 *   the scalar rounding bit for bit.
 * - cpu_vexp.h's exp within 2e-7 relative of exp() over its whole range, clamped outside.
 * - cpu_dnnl_small products against float64 on the attention's shapes and odd ones (b given
 *   transposed or not, strided operands, accumulation): both multiply the same bf16 values, so
 *   the bound is the fp32 summation bound (K + 2) 2^-24 sum |a b|; more shapes held at once
 *   than the cache holds are all prepared.
 * - cpu_dnnl_matmul_bf16() equals cpu_dnnl_matmul() on the same rounded rows, bit for bit.
 * - vision_attention_bf16() against vision_attention() (fp32, bias added) on a 1032-token tile
 *   with 80-wide heads and odd shapes: every row within cosine 0.9995 and every value within
 *   0.02 of the largest |v| (bf16 q, k, v and probabilities: measured worst ~0.004).
 * - The tiny checkpoint's ViT and projector in bf16 (every row variant) against fp32: every
 *   feature and projector row within cosine 0.999, and --precision fp32's path untouched; a
 *   screenshot through the CPU backend in bf16 (engine_vision_encode_image_on) takes the bf16
 *   steps, within the same cosine.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_dnnl_small.h"
#include "cpu_vexp.h"
#include "engine.h"
#include "golden.h"
#include "model.h"
#include "test.h"
#include "vision.h"
#include "vision_cpu.h"
#include "vision_rows.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void) /* uniform in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static float bf(uint16_t h)
{
	return bf16_to_f32(h);
}

/* |got - want| <= (2^-8 + 2^-14) |want| + abs_tol: bf16's rounding (at most 2^-8 relative, just
 * above a power of two) plus the fp32 math before it; the worst ratio, <= 1 passes (NaN fails) */
struct err {
	double worst;
	int at;
};

static void err_add(struct err *e, double got, double want, double abs_tol, int i)
{
	double s = fabs(got - want) / ((0x1p-8 + 0x1p-14) * fabs(want) + abs_tol);
	if (!(s <= e->worst)) {
		e->worst = s != s ? 1e30 : s;
		e->at = i;
	}
}

/* cpu_vexp.h's exp, on 4-wide vectors here (the kernels' widths run the same code) */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
CPU_VEXP_DEFINE(test_vexp, v4f, v4i)

static void check_vexp(void)
{
	double worst = 0;
	float at = 0;
	for (int i = 0; i <= 200000; i++) {
		float x = -87.0f + 175.0f * (float)i / 200000.0f;
		v4f v = test_vexp((v4f){x, -x, x * 0.5f, x * 0.01f});
		float xs[4] = {x, -x, x * 0.5f, x * 0.01f};
		for (int k = 0; k < 4; k++) {
			if (xs[k] < -87.0f || xs[k] > 88.0f)
				continue;
			double e = fabs(v[k] - exp((double)xs[k])) / exp((double)xs[k]);
			if (!(e <= worst)) {
				worst = e != e ? 1e30 : e;
				at = xs[k];
			}
		}
	}
	v4f c = test_vexp((v4f){-1000.0f, 1000.0f, -INFINITY, 0.0f});
	printf("cpu_vexp on [-87, 88]: worst relative error %.3g (at %g)\n", worst, at);
	CHECK(worst <= 2e-7);
	CHECK(c[0] == (float)test_vexp((v4f){-87.0f})[0] && c[1] == (float)test_vexp((v4f){88.0f})[0]);
	CHECK(c[2] == c[0] && c[3] == 1.0f);
}

static const int row_sizes[] = {1, 3, 16, 17, 33, 80, 1032, 1280, 1283, 5120};

static void check_rows_variant(const struct vision_rows_variant *k)
{
	const int nmax = 5120;
	float *x = malloc(sizeof(float) * nmax), *x0 = malloc(sizeof(float) * nmax);
	float *add = malloc(sizeof(float) * nmax), *g = malloc(sizeof(float) * nmax);
	float *b = malloc(sizeof(float) * nmax);
	uint16_t *out = malloc(sizeof(uint16_t) * nmax);
	REQUIRE(x && x0 && add && g && b && out);

	for (size_t si = 0; si < ARRAY_SIZE(row_sizes); si++) {
		const int n = row_sizes[si];
		struct err ln = {0}, rms = {0}, gelu = {0}, soft = {0};
		bool exact = true, add_ok = true;

		for (int i = 0; i < n; i++) {
			x0[i] = 3.0f * frand() + 0.5f;
			add[i] = 0.2f * frand();
			g[i] = 1.0f + 0.1f * frand();
			b[i] = 0.05f * frand();
		}
		/* LayerNorm with and without the residual's bias */
		for (int with_add = 0; with_add < 2; with_add++) {
			memcpy(x, x0, sizeof(float) * n);
			k->layernorm_bf16(x, with_add ? add : NULL, g, b, n, VISION_LN_EPS, out);
			double mean = 0, var = 0;
			for (int i = 0; i < n; i++) {
				float v = with_add ? x0[i] + add[i] : x0[i];
				add_ok &= x[i] == v;
				mean += v;
			}
			mean /= n;
			for (int i = 0; i < n; i++)
				var += ((double)x[i] - mean) * ((double)x[i] - mean);
			double rstd = 1.0 / sqrt(var / n + VISION_LN_EPS);
			for (int i = 0; i < n; i++)
				err_add(&ln, bf(out[i]), ((double)x[i] - mean) * rstd * g[i] + b[i], 1e-5, i);
		}
		/* the projector's RMSNorm */
		k->rmsnorm_bf16(x0, g, n, VISION_RMS_EPS, out);
		{
			double sq = 0;
			for (int i = 0; i < n; i++)
				sq += (double)x0[i] * x0[i];
			double rs = 1.0 / sqrt(sq / n + VISION_RMS_EPS);
			for (int i = 0; i < n; i++)
				err_add(&rms, bf(out[i]), x0[i] * rs * g[i], 1e-5, i);
		}
		/* GELU over [-7, 8]: both tails of erf's clamp */
		for (int i = 0; i < n; i++)
			x[i] = 7.5f * frand() + 0.5f;
		k->bias_gelu_bf16(x, b, n, out);
		for (int i = 0; i < n; i++) {
			double v = (double)x[i] + b[i];
			err_add(&gelu, bf(out[i]), 0.5 * v * (1.0 + erf(v / sqrt(2.0))), 3e-6, i);
		}
		/* softmax numerators: scores with a spread that reaches exp's floor */
		for (int i = 0; i < n; i++)
			x[i] = 12.0f * frand();
		if (n > 2)
			x[n / 2] = -200.0f;
		float scale = 1.0f / sqrtf(80.0f) * 8.0f;
		float sum = k->softmax_bf16(x, n, scale, out);
		{
			double mx = -INFINITY, s = 0;
			for (int i = 0; i < n; i++)
				mx = fmax(mx, x[i]);
			for (int i = 0; i < n; i++) {
				err_add(&soft, bf(out[i]), exp(((double)x[i] - mx) * scale), 1e-30, i);
				s += bf(out[i]);
			}
			CHECK(fabs(sum - s) <= 1e-6 * s);
		}
		/* the one-operation kernels: the scalar rounding, bit for bit */
		k->bias_bf16(x0, b, n, out);
		for (int i = 0; i < n; i++)
			exact &= out[i] == f32_to_bf16(x0[i] + b[i]);
		k->bias_bf16(x0, NULL, n, out);
		for (int i = 0; i < n; i++)
			exact &= out[i] == f32_to_bf16(x0[i]);
		k->scale_bf16(x0, 0.37f, n, out);
		for (int i = 0; i < n; i++)
			exact &= out[i] == f32_to_bf16(x0[i] * 0.37f);
		k->relu2_bf16(x0, n, out);
		for (int i = 0; i < n; i++) {
			float v = x0[i] > 0.0f ? x0[i] : 0.0f;
			exact &= out[i] == f32_to_bf16(v * v);
		}
		memcpy(x, x0, sizeof(float) * n);
		k->bias_add(x, b, n);
		for (int i = 0; i < n; i++)
			exact &= x[i] == x0[i] + b[i];

		printf("%-8s n=%-5d worst/bound: layernorm %.3f rmsnorm %.3f gelu %.3f softmax %.3f%s\n",
		       k->name, n, ln.worst, rms.worst, gelu.worst, soft.worst,
		       exact && add_ok ? "" : "  EXACT KERNELS DIFFER");
		CHECK(ln.worst <= 1.0);
		CHECK(rms.worst <= 1.0);
		CHECK(gelu.worst <= 1.0);
		CHECK(soft.worst <= 1.0);
		CHECK(exact);
		CHECK(add_ok);
	}

	/* NaN: bias_bf16 keeps it (a quiet NaN), relu2 makes it 0 */
	float nanrow[17];
	for (int i = 0; i < 17; i++)
		nanrow[i] = i == 5 || i == 16 ? NAN : 1.0f;
	k->bias_bf16(nanrow, NULL, 17, out);
	CHECK(isnan(bf(out[5])) && isnan(bf(out[16])) && bf(out[4]) == 1.0f);
	k->relu2_bf16(nanrow, 17, out);
	CHECK(bf(out[5]) == 0.0f && bf(out[16]) == 0.0f && bf(out[0]) == 1.0f);

	free(x);
	free(x0);
	free(add);
	free(g);
	free(b);
	free(out);
}

static void check_rows(void)
{
	for (int i = 0; vision_rows_variant_name(i); i++) {
		const char *name = vision_rows_variant_name(i);
		int r = cpu_isa_select(name);
		if (r == -ENOTSUP) {
			printf("row kernels %s: skipped, this CPU does not run them\n", name);
			continue;
		}
		CHECK_INT_EQ(r, 0);
		check_rows_variant(vision_rows());
	}
	CHECK_INT_EQ(cpu_isa_select("sse9"), -EINVAL);
	CHECK_INT_EQ(cpu_isa_select("generic"), 0);
	CHECK_STR_EQ(vision_rows()->name, "portable");
	/* back to the set the environment gives (every kernel family follows cpu_isa_select()) */
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
}

/* ---- small products ------------------------------------------------------------------------- */

struct small_case {
	int M, K, N;
	int pad_a, pad_b, pad_c;
	bool b_trans, accumulate;
};

struct small_run {
	const struct cpu_dnnl_small *p;
	const uint16_t *a, *b;
	float *c;
	int r;
};

static void small_task(void *ctx, int task, int thread)
{
	struct small_run *s = ctx;
	(void)task;
	s->r = cpu_dnnl_small_run(s->p, thread, s->a, s->b, s->c);
}

/* false when oneDNN has no fast kernel here (said once) */
static bool check_small(const struct small_case *sc)
{
	const size_t lda = (size_t)sc->K + sc->pad_a;
	const size_t ldb = (size_t)(sc->b_trans ? sc->K : sc->N) + sc->pad_b;
	const size_t ldc = (size_t)sc->N + sc->pad_c;
	const size_t brows = sc->b_trans ? (size_t)sc->N : (size_t)sc->K;
	uint16_t *a = malloc(sizeof(uint16_t) * sc->M * lda), *b = malloc(sizeof(uint16_t) * brows * ldb);
	float *c = malloc(sizeof(float) * sc->M * ldc), *c0 = malloc(sizeof(float) * sc->M * ldc);
	struct cpu_dnnl_small *p = NULL;
	REQUIRE(a && b && c && c0);

	for (size_t i = 0; i < sc->M * lda; i++)
		a[i] = f32_to_bf16(frand());
	for (size_t i = 0; i < brows * ldb; i++)
		b[i] = f32_to_bf16(frand());
	for (size_t i = 0; i < sc->M * ldc; i++)
		c0[i] = c[i] = frand();
	int r = cpu_dnnl_small_get(sc->M, sc->K, sc->N, lda, ldb, sc->b_trans, ldc, sc->accumulate, &p);
	if (r == -ENOTSUP) {
		printf("small products: skipped, oneDNN has no fast bf16 kernel on this CPU\n");
		goto out;
	}
	CHECK_INT_EQ(r, 0);
	if (r < 0)
		goto out;
	struct small_run s = {.p = p, .a = a, .b = b, .c = c};
	cpu_parallel_for(1, small_task, &s);
	CHECK_INT_EQ(s.r, 0);
	double worst = 0;
	bool pad_kept = true;
	for (int m = 0; m < sc->M; m++) {
		for (int n = 0; n < sc->N; n++) {
			double ref = sc->accumulate ? c0[(size_t)m * ldc + n] : 0.0, mag = fabs(ref);
			for (int k = 0; k < sc->K; k++) {
				double bv = bf(sc->b_trans ? b[(size_t)n * ldb + k] : b[(size_t)k * ldb + n]);
				double prod = (double)bf(a[(size_t)m * lda + k]) * bv;
				ref += prod;
				mag += fabs(prod);
			}
			double bound = (sc->K + 2) * 0x1p-24 * mag + 1e-30;
			worst = fmax(worst, fabs(c[(size_t)m * ldc + n] - ref) / bound);
		}
		for (int n = sc->N; n < (int)ldc; n++)
			pad_kept &= c[(size_t)m * ldc + n] == c0[(size_t)m * ldc + n];
	}
	printf("small %4dx%4dx%4d%s%s (%s): worst/bound %.3f\n", sc->M, sc->K, sc->N,
	       sc->b_trans ? " b^T" : "", sc->accumulate ? " +=" : "", cpu_dnnl_small_impl(p), worst);
	CHECK(worst <= 1.0);
	CHECK(pad_kept);
out:
	cpu_dnnl_small_put(p);
	free(a);
	free(b);
	free(c);
	free(c0);
	return r != -ENOTSUP;
}

static void check_smalls(void)
{
	static const struct small_case cases[] = {
		{64, 80, 1032, 0, 0, 0, true, false},  /* RADIO-H scores */
		{8, 80, 1032, 0, 0, 0, true, false},   /* the last block of 1032 rows */
		{64, 1032, 80, 0, 0, 0, false, false}, /* RADIO-H weighted sum */
		{1, 1, 1, 0, 0, 0, false, false},      {5, 17, 3, 3, 2, 1, true, true},
		{33, 7, 65, 1, 5, 3, false, true},
	};
	struct cpu_dnnl_small *p = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (!check_small(&cases[i]))
			break;
	/* more shapes held at once than the cache has entries: every one is still prepared, and
	 * the last (the caller's alone) runs correctly */
	enum { HELD = 40 };
	struct cpu_dnnl_small *held[HELD] = {0};
	int n_held = 0, r = 0;
	for (; n_held < HELD && r == 0; n_held++)
		r = cpu_dnnl_small_get(4, 8 + n_held, 16, (size_t)(8 + n_held), 16, false, 16, false,
				       &held[n_held]);
	if (r != -ENOTSUP) {
		CHECK_INT_EQ(r, 0);
		uint16_t a[4 * (8 + HELD)], b[(8 + HELD) * 16];
		float c[4 * 16];
		for (size_t i = 0; i < ARRAY_SIZE(a); i++)
			a[i] = f32_to_bf16(1.0f);
		for (size_t i = 0; i < ARRAY_SIZE(b); i++)
			b[i] = f32_to_bf16(0.5f);
		struct small_run s = {.p = held[HELD - 1], .a = a, .b = b, .c = c};
		cpu_parallel_for(1, small_task, &s);
		CHECK_INT_EQ(s.r, 0);
		CHECK(c[0] == 0.5f * (8 + HELD - 1) && c[4 * 16 - 1] == c[0]);
	}
	while (n_held-- > 0)
		cpu_dnnl_small_put(held[n_held]);
	CHECK_INT_EQ(cpu_dnnl_small_get(0, 4, 4, 4, 4, false, 4, false, &p), -EINVAL);
	CHECK_INT_EQ(cpu_dnnl_small_get(4, 4, 4, 3, 4, false, 4, false, &p), -EINVAL);
	CHECK_INT_EQ(cpu_dnnl_small_get(4, 8, 4, 8, 4, true, 4, false, &p), -EINVAL);
	CHECK(p == NULL);
}

/* cpu_dnnl_matmul_bf16 reads the rows cpu_dnnl_matmul would have rounded: the same results */
static void check_matmul_bf16(void)
{
	const int T = 37, in = 96, out = 70;
	uint16_t *wb = malloc(sizeof(uint16_t) * in * out), *xb = malloc(sizeof(uint16_t) * T * in);
	float *x = malloc(sizeof(float) * T * in), *y1 = malloc(sizeof(float) * T * out);
	float *y2 = malloc(sizeof(float) * T * out);
	REQUIRE(wb && xb && x && y1 && y2);
	for (int i = 0; i < in * out; i++)
		wb[i] = f32_to_bf16(frand());
	for (int i = 0; i < T * in; i++)
		x[i] = frand();
	cpu_f32_to_bf16(x, xb, (size_t)T * in);
	struct tensor w = {.data = wb,
			   .dtype = TENSOR_BF16,
			   .ndim = 2,
			   .shape = {out, in},
			   .nbytes = sizeof(uint16_t) * in * out};
	struct cpu_dnnl_weight *dw = NULL;
	int r = cpu_dnnl_weight_create(&w, CPU_DNNL_PLAIN, &dw);
	if (r == -ENOTSUP) {
		printf("cpu_dnnl_matmul_bf16: skipped, no oneDNN matmul on this CPU\n");
	} else {
		CHECK_INT_EQ(r, 0);
		for (int acc = 0; acc < 2 && r == 0; acc++) {
			for (int i = 0; i < T * out; i++)
				y1[i] = y2[i] = (float)i;
			CHECK_INT_EQ(cpu_dnnl_matmul(dw, x, (size_t)in, T, y1, (size_t)out, acc), 0);
			CHECK_INT_EQ(cpu_dnnl_matmul_bf16(dw, xb, T, y2, (size_t)out, acc), 0);
			CHECK(memcmp(y1, y2, sizeof(float) * T * out) == 0);
		}
	}
	cpu_dnnl_weight_destroy(dw);
	free(wb);
	free(xb);
	free(x);
	free(y1);
	free(y2);
}

/* ---- attention ------------------------------------------------------------------------------- */

static void check_attention(int L, int D, int heads)
{
	const size_t n = (size_t)L * 3 * D;
	float *qkv = malloc(sizeof(float) * n), *qb = malloc(sizeof(float) * n);
	float *bias = malloc(sizeof(float) * 3 * D), *want = malloc(sizeof(float) * (size_t)L * D);
	uint16_t *got = malloc(sizeof(uint16_t) * (size_t)L * D);
	REQUIRE(qkv && qb && bias && want && got);

	/* scores of a few units: peaked and flat rows both occur */
	for (size_t i = 0; i < n; i++)
		qkv[i] = 2.0f * frand();
	for (int i = 0; i < 3 * D; i++)
		bias[i] = 0.3f * frand();
	for (int t = 0; t < L; t++)
		for (int c = 0; c < 3 * D; c++)
			qb[(size_t)t * 3 * D + c] = qkv[(size_t)t * 3 * D + c] + bias[c];
	REQUIRE(vision_attention(qb, want, L, D, heads) == 0);
	size_t sb = vision_attention_bf16_scratch(L, D, heads);
	void *scratch = NULL;
	REQUIRE(sb > 0 && posix_memalign(&scratch, 64, sb) == 0);
	CHECK_INT_EQ(vision_attention_bf16(qkv, bias, L, D, heads, scratch, got), 0);
	free(scratch);

	double min_cos = 1, worst = 0, vmax = 0;
	for (int t = 0; t < L; t++)
		for (int c = 0; c < D; c++)
			vmax = fmax(vmax, fabs(qb[(size_t)t * 3 * D + 2 * D + c]));
	for (int t = 0; t < L; t++) {
		double dot = 0, na = 0, nb = 0;
		for (int c = 0; c < D; c++) {
			double g = bf(got[(size_t)t * D + c]), w = want[(size_t)t * D + c];
			dot += g * w;
			na += g * g;
			nb += w * w;
			worst = fmax(worst, fabs(g - w));
		}
		double cs = dot / sqrt(na * nb + 1e-300);
		min_cos = fmin(min_cos, cs != cs ? -1 : cs);
	}
	printf("attention L=%d D=%d heads=%d: min row cosine %.6f, max |diff| %.4f (max |v| %.2f)\n", L, D,
	       heads, min_cos, worst, vmax);
	CHECK(min_cos >= 0.9995);
	CHECK(worst <= 0.02 * vmax);
	free(qkv);
	free(qb);
	free(bias);
	free(want);
	free(got);
}

/* ---- the tiny checkpoint --------------------------------------------------------------------- */

static double min_row_cosine(const float *a, const float *b, size_t rows, size_t dim)
{
	double worst = 1.0;
	for (size_t r = 0; r < rows; r++) {
		double dot = 0, na = 0, nb = 0;
		for (size_t c = 0; c < dim; c++) {
			dot += (double)a[r * dim + c] * b[r * dim + c];
			na += (double)a[r * dim + c] * a[r * dim + c];
			nb += (double)b[r * dim + c] * b[r * dim + c];
		}
		double cs = dot / sqrt(na * nb + 1e-300);
		worst = fmin(worst, cs != cs ? -1.0 : cs);
	}
	return worst;
}

static void check_tower(void)
{
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/tests/fixtures/vision/tiny-vlm", golden_source_root());
	struct engine_model *m = engine_model_load(path, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	struct vision_weights w;
	REQUIRE(vision_weights_load(&w, m->files, err, sizeof(err)) == 0);
	/* a 512x512 tile of the tiny tower: 32x32 patches + 8 prefix tokens, 1032 rows */
	const int grid = 32, p = w.patch, D = w.width;
	const size_t npx = (size_t)3 * grid * p * grid * p, nf = (size_t)grid * grid * D;
	const size_t np = (size_t)(grid / w.shuffle) * (grid / w.shuffle) * w.out_dim;
	float *px = malloc(sizeof(float) * npx), *pos = malloc(sizeof(float) * nf);
	float *f32 = malloc(sizeof(float) * nf), *f16 = malloc(sizeof(float) * nf);
	float *f32b = malloc(sizeof(float) * nf);
	float *p32 = malloc(sizeof(float) * np), *p16 = malloc(sizeof(float) * np);
	REQUIRE(px && pos && f32 && f16 && f32b && p32 && p16);
	for (size_t i = 0; i < npx; i++)
		px[i] = 1.5f * frand();
	REQUIRE(vision_pos_embed(&w, grid, grid, pos) == 0);
	REQUIRE(vision_vit_forward(&w, px, grid, grid, pos, f32) == 0);
	REQUIRE(vision_project(&w, f32, grid, grid, p32) == 0);

	struct vision_gemms *gm = NULL;
	int r = vision_gemms_create(&w, CPU_DNNL_PLAIN, &gm);
	if (r == -ENOTSUP) {
		printf("tower in bf16: skipped, no oneDNN matmul on this CPU\n");
		goto out;
	}
	REQUIRE(r == 0);
	for (int i = 0; vision_rows_variant_name(i); i++) {
		const char *name = vision_rows_variant_name(i);
		if (cpu_isa_select(name) == -ENOTSUP)
			continue;
		struct vision_profile prof = {0};
		CHECK_INT_EQ(vision_vit_forward_profile(&w, gm, px, grid, grid, pos, f16, &prof), 0);
		CHECK_INT_EQ(vision_project_profile(&w, gm, f16, grid, grid, p16, &prof), 0);
		double cf = min_row_cosine(f16, f32, (size_t)grid * grid, (size_t)D);
		double cp = min_row_cosine(p16, p32, np / (size_t)w.out_dim, (size_t)w.out_dim);
		printf("tiny tower, 1032 tokens, row kernels %s: bf16 against fp32: min cosine features "
		       "%.6f, projector rows %.6f\n",
		       name, cf, cp);
		CHECK(cf >= 0.999);
		CHECK(cp >= 0.999);
		/* the profile saw every step that ran */
		CHECK(prof.ns[VISION_OP_GEMM] > 0 && prof.ns[VISION_OP_ATTENTION] > 0 &&
		      prof.ns[VISION_OP_GELU] > 0 && prof.ns[VISION_OP_PROJ_GEMM] > 0);
	}
	/* the fp32 runs below on the set the one above ran on */
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
	/* a screenshot through the CPU backend in bf16 (what holod and holo-infer run): the bf16
	 * steps, not the fp32 ones (the rows differ), within cosine 0.999 of fp32's */
	{
		snprintf(path, sizeof(path), "%s/tests/fixtures/vision/screen.png", golden_source_root());
		struct engine_image *img = engine_image_load_png(path, err, sizeof(err));
		struct engine_vision *v = engine_vision_create(m, err, sizeof(err));
		struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CPU,
						    .precision = ENGINE_PRECISION_BF16};
		struct engine_backend *b = engine_backend_create(m, &bo, err, sizeof(err));
		struct engine_vision_grid g32, g16;
		struct engine_rows *r32 = NULL, *r16 = NULL;
		REQUIRE(img && v && b);
		CHECK_INT_EQ(engine_vision_encode_image_on(NULL, v, img, 2, &g32, &r32), 0);
		CHECK_INT_EQ(engine_vision_encode_image_on(b, v, img, 2, &g16, &r16), 0);
		REQUIRE(r32 && r16 && engine_rows_count(r32) == engine_rows_count(r16));
		size_t nr = engine_rows_count(r32), dim = (size_t)engine_vision_embed_dim(v);
		float *a32 = malloc(sizeof(float) * nr * dim), *a16 = malloc(sizeof(float) * nr * dim);
		REQUIRE(a32 && a16);
		CHECK_INT_EQ(engine_rows_read(r32, 0, nr, a32), 0);
		CHECK_INT_EQ(engine_rows_read(r16, 0, nr, a16), 0);
		double c = min_row_cosine(a16, a32, nr, dim);
		printf("screen.png, %d tiles, CPU backend in bf16: min row cosine to fp32 %.6f\n",
		       g16.n_tiles, c);
		CHECK(c >= 0.999);
		CHECK(memcmp(a16, a32, sizeof(float) * nr * dim) != 0);
		free(a32);
		free(a16);
		engine_rows_destroy(r32);
		engine_rows_destroy(r16);
		engine_backend_destroy(b);
		engine_vision_destroy(v);
		engine_image_destroy(img);
	}
	/* fp32 after bf16 runs: the same values as before, bit for bit */
	REQUIRE(vision_vit_forward(&w, px, grid, grid, pos, f32b) == 0);
	CHECK(memcmp(f32, f32b, sizeof(float) * nf) == 0);
out:
	vision_gemms_destroy(gm);
	vision_weights_finish(&w);
	engine_model_destroy(m);
	free(px);
	free(pos);
	free(f32);
	free(f16);
	free(f32b);
	free(p32);
	free(p16);
}

int main(void)
{
	REQUIRE(cpu_set_threads(2) == 0);
	check_vexp();
	check_rows();
	check_smalls();
	check_matmul_bf16();
	check_attention(1032, 160, 2); /* RADIO-H's tile length and head width, two heads */
	check_attention(65, 48, 3);    /* a last block of one row */
	check_attention(7, 8, 1);      /* shorter than one block */
	check_attention(129, 20, 4);   /* 5-wide heads */
	check_attention(9, 15, 3);     /* an odd width: the scratch's second part stays aligned */
	check_tower();
	return test_exit();
}
