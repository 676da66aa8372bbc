/* bf16 precision's row kernels (engine/backend/cpu/cpu_rows*.c), blocked prefill attention and
 * decode attention (engine/backend/cpu/lm_attention.c) against the fp32 functions the forward
 * runs in fp32 precision
 * (lm_forward.c: cpu_rmsnorm_rows, lm_gated_rmsnorm, lm_conv_silu, lm_dt_softplus, cpu_relu2,
 * lm_attention_heads), for every variant this CPU runs (the test prints which it skipped), on
 * the default model's shapes and on odd sizes with vector tails, on 1, 2 and 3 threads.
 *
 * Tolerances: the variants differ from the reference in the order of fp32 sums (relative error
 * ~n * 2^-24 on a sum of n squares, ~1e-6 for the norms' scale) and in expf (cpu_vexp.h: ~1 ulp
 * in the SiLU and the softmax). Norms and conv: |got - want| <= 1e-5 |want| + 1e-6 (a wrong
 * element, row or channel is off by O(1)). Attention (a weighted mean of values in [-1, 1]):
 * 2e-5 absolute with fp32 products; with bf16 products, against float64 with the values
 * rounded to bf16, 2^-9 + 1e-4 (the softmax's weights rounded to bf16, the scores' error),
 * while one key too many or too few moves a row with few keys by O(1). ReLU^2, dt and the conv's state: bit
 * for bit (the same arithmetic), and the norms' bf16 copies are the rounding of their fp32 results. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_rows.h"
#include "lm.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 4242;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *rand_buf(size_t n, float scale)
{
	float *p = malloc(n * sizeof(float) + 64);
	REQUIRE(p);
	for (size_t i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

static float *copy_buf(const float *src, size_t n)
{
	float *p = malloc(n * sizeof(float) + 64);
	REQUIRE(p);
	memcpy(p, src, n * sizeof(float));
	return p;
}

/* the largest |got - want| beyond the tolerance's relative part, 0 when within */
static double excess(const float *got, const float *want, size_t n, double rel, double abs_tol)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]), lim = rel * fabs(want[i]) + abs_tol;
		if (!(d <= lim))
			worst = fmax(worst, isnan(d) ? INFINITY : d - lim);
	}
	return worst;
}

static void test_rmsnorm(int T, int d)
{
	float *x = rand_buf((size_t)T * d, 3.0f), *w = rand_buf((size_t)d, 1.5f);
	float *want = malloc((size_t)T * d * sizeof(float)), *got = malloc((size_t)T * d * sizeof(float));
	REQUIRE(want && got);
	cpu_rmsnorm_rows(x, want, w, T, d, 1e-5f);
	uint16_t *gotb = malloc((size_t)T * d * sizeof(uint16_t)),
		 *wantb = malloc((size_t)T * d * sizeof(uint16_t));
	REQUIRE(gotb && wantb);
	cpu_rows_rmsnorm(x, got, w, T, d, 1e-5f, gotb);
	double e = excess(got, want, (size_t)T * d, 1e-5, 1e-6);
	if (e > 0)
		fprintf(stderr, "rmsnorm T=%d d=%d: excess %g\n", T, d, e);
	CHECK(e == 0);
	/* the bf16 copy is the rounding of the fp32 result */
	cpu_f32_to_bf16(got, wantb, (size_t)T * d);
	CHECK(memcmp(gotb, wantb, (size_t)T * d * sizeof(uint16_t)) == 0);
	/* in place, as the variants allow */
	cpu_rows_rmsnorm(x, x, w, T, d, 1e-5f, NULL);
	CHECK(excess(x, want, (size_t)T * d, 1e-5, 1e-6) == 0);
	free(x), free(w), free(want), free(got), free(gotb), free(wantb);
}

static void test_gated(int T, int groups, int gs, size_t ldz)
{
	int n = groups * gs;
	struct lm_dims dm = {.d_in = n, .G = groups};
	float *y = rand_buf((size_t)T * n, 2.0f), *z = rand_buf((size_t)T * ldz, 6.0f);
	float *w = rand_buf((size_t)n, 1.5f);
	/* saturated gates: exp's clamp (cpu_vexp.h) and silu's far tails */
	z[0] = -100.0f, z[ldz > 1 ? 1 : 0] = 95.0f;
	float *want = copy_buf(y, (size_t)T * n), *got = copy_buf(y, (size_t)T * n);
	lm_gated_rmsnorm(&dm, T, want, z, ldz, w, 1e-5f);
	uint16_t *gotb = malloc((size_t)T * n * sizeof(uint16_t)),
		 *wantb = malloc((size_t)T * n * sizeof(uint16_t));
	REQUIRE(gotb && wantb);
	cpu_rows_gated_rmsnorm(got, (size_t)n, z, ldz, w, T, groups, gs, 1e-5f, gotb);
	double e = excess(got, want, (size_t)T * n, 1e-5, 1e-6);
	if (e > 0)
		fprintf(stderr, "gated rmsnorm T=%d G=%d gs=%d: excess %g\n", T, groups, gs, e);
	CHECK(e == 0);
	cpu_f32_to_bf16(got, wantb, (size_t)T * n);
	CHECK(memcmp(gotb, wantb, (size_t)T * n * sizeof(uint16_t)) == 0);
	free(y), free(z), free(w), free(want), free(got), free(gotb), free(wantb);
}

/* Two appends in a row (T1 then T2 positions), so the second one reads the state the first
 * left, as prefill then decode do. */
static void test_conv(int K, int cd, int H, int T1, int T2)
{
	struct lm_dims dm = {.K = K, .conv_dim = cd, .H = H};
	int T = T1 + T2;
	size_t ldr = (size_t)cd + (size_t)H + 3;
	float *raw = rand_buf((size_t)T * ldr, 4.0f), *wt = rand_buf((size_t)K * cd, 1.0f);
	float *bias = rand_buf((size_t)cd, 0.5f), *dtb = rand_buf((size_t)H, 2.0f);
	for (int i = 0; i < T * (int)ldr; i += 7)
		raw[i] *= 8.0f; /* some dt beyond softplus's linear cut and the clamps */
	size_t st_n = (size_t)MAX(K - 1, 0) * cd;
	float *st_want = rand_buf(st_n + 1, 2.0f), *st_got = copy_buf(st_want, st_n + 1);
	float *cbuf = malloc(((size_t)K - 1 + T) * cd * sizeof(float));
	float *want = malloc((size_t)T * cd * sizeof(float)), *got = malloc((size_t)T * cd * sizeof(float));
	float *dt_want = malloc((size_t)T * H * sizeof(float)),
	      *dt_got = malloc((size_t)T * H * sizeof(float));
	REQUIRE(cbuf && want && got && dt_want && dt_got);
	const float lo = 0.001f, hi = 10.0f;
	for (int part = 0; part < 2; part++) {
		int t0 = part ? T1 : 0, n = part ? T2 : T1;
		const float *r = raw + (size_t)t0 * ldr;
		lm_conv_silu(&dm, n, r, ldr, wt, bias, st_want, cbuf, want + (size_t)t0 * cd);
		lm_dt_softplus(&dm, n, r + cd, ldr, dtb, lo, hi, dt_want + (size_t)t0 * H);
		struct cpu_conv_args ca = {.T = n,
					   .K = K,
					   .channels = cd,
					   .raw = r,
					   .ldr = ldr,
					   .wt = wt,
					   .bias = bias,
					   .state = st_got,
					   .out = got + (size_t)t0 * cd,
					   .ldo = (size_t)cd};
		struct cpu_dt_args da = {.T = n,
					 .H = H,
					 .raw = r + cd,
					 .ldr = ldr,
					 .bias = dtb,
					 .lo = lo,
					 .hi = hi,
					 .dt = dt_got + (size_t)t0 * H};
		cpu_rows_conv_dt(&ca, &da);
	}
	double e = excess(got, want, (size_t)T * cd, 1e-5, 1e-6);
	if (e > 0)
		fprintf(stderr, "conv K=%d cd=%d T=%d+%d: excess %g\n", K, cd, T1, T2, e);
	CHECK(e == 0);
	CHECK(memcmp(st_got, st_want, st_n * sizeof(float)) == 0);
	CHECK(memcmp(dt_got, dt_want, (size_t)T * H * sizeof(float)) == 0);
	free(raw), free(wt), free(bias), free(dtb), free(st_want), free(st_got), free(cbuf);
	free(want), free(got), free(dt_want), free(dt_got);
}

static void test_relu2(size_t n)
{
	float *u = rand_buf(n, 5.0f);
	if (n > 3) {
		u[0] = NAN;
		u[1] = -0.0f;
		u[2] = INFINITY;
		u[3] = -INFINITY;
	}
	float *want = copy_buf(u, n);
	cpu_relu2(want, n);
	cpu_rows_relu2(u, n);
	CHECK(memcmp(u, want, n * sizeof(float)) == 0);
	free(u), free(want);
}

static float bf16_of(float f)
{
	uint16_t h;
	cpu_f32_to_bf16(&f, &h, 1);
	return bf16_to_f32(h);
}

/* bf16(x[i]) as floats */
static float *bf16_copy(const float *x, size_t n)
{
	float *r = malloc(n * sizeof(float) + 1);
	REQUIRE(r);
	for (size_t i = 0; i < n; i++)
		r[i] = bf16_of(x[i]);
	return r;
}

/* The attention of the bf16 products' inputs in float64: softmax((q / sqrt(dh)) . k) weighting
 * bf16(v) (the scores' products take q and k in two bf16 parts each, ~2^-16 of sum |q k|). */
static void attention_f64(const struct lm_dims *dm, int T, int n0, const float *q, const float *k,
			  const float *v, float *o)
{
	size_t npos = (size_t)n0 + (size_t)T;
	float scale = 1.0f / sqrtf((float)dm->dh);
	float *vb = bf16_copy(v, npos * dm->kv_dim);
	double *w = malloc(npos * sizeof(double)), *acc = malloc((size_t)dm->dh * sizeof(double));
	REQUIRE(w && acc);
	for (int t = 0; t < T; t++)
		for (int i = 0; i < dm->hq; i++) {
			int g = i / (dm->hq / dm->hkv), n = n0 + t + 1;
			const float *qi = q + (size_t)t * dm->q_dim + (size_t)i * dm->dh;
			double mx = -INFINITY, sum = 0;
			for (int s = 0; s < n; s++) {
				const float *ks = k + (size_t)s * dm->kv_dim + (size_t)g * dm->dh;
				double d = 0;
				for (int e = 0; e < dm->dh; e++)
					d += (double)(qi[e] * scale) * ks[e];
				w[s] = d;
				mx = fmax(mx, d);
			}
			memset(acc, 0, (size_t)dm->dh * sizeof(double));
			for (int s = 0; s < n; s++) {
				sum += w[s] = exp(w[s] - mx);
				const float *vs = vb + (size_t)s * dm->kv_dim + (size_t)g * dm->dh;
				for (int e = 0; e < dm->dh; e++)
					acc[e] += w[s] * vs[e];
			}
			for (int e = 0; e < dm->dh; e++)
				o[(size_t)t * dm->q_dim + (size_t)i * dm->dh + e] = (float)(acc[e] / sum);
		}
	free(vb), free(w), free(acc);
}

static int bf16_attention_runs = -1;

/* fp32 products against lm_attention_heads(); bf16 products (where oneDNN runs them) against
 * the float64 attention of their inputs: the softmax's weights, rounded to bf16 for the second
 * product, are off by 2^-9 of themselves at most, so the output by 2^-9 max |v|, plus the
 * scores' error (fp32 sums, the split's 2^-16): 1e-4 here. */
static void test_attention(int hq, int hkv, int dh, int n0, int T)
{
	struct lm_dims dm = {.hq = hq, .hkv = hkv, .dh = dh, .q_dim = hq * dh, .kv_dim = hkv * dh};
	size_t npos = (size_t)n0 + (size_t)T;
	float *q = rand_buf((size_t)T * dm.q_dim, 3.0f);
	float *k = rand_buf(npos * dm.kv_dim, 3.0f), *v = rand_buf(npos * dm.kv_dim, 1.0f);
	float *want = malloc((size_t)T * dm.q_dim * sizeof(float));
	float *got = malloc((size_t)T * dm.q_dim * sizeof(float));
	REQUIRE(want && got);
	REQUIRE(cpu_reserve_scratch(MAX(npos * sizeof(float), lm_attention_blocked_scratch_bytes(&dm))) == 0);
	lm_attention_heads(&dm, T, n0, q, k, v, want);
	CHECK(!lm_attention_blocked(&dm, T, n0, q, k, v, got, false));
	double e = excess(got, want, (size_t)T * dm.q_dim, 0, 2e-5);
	if (e > 0)
		fprintf(stderr, "attention hq=%d hkv=%d dh=%d n0=%d T=%d: excess %g\n", hq, hkv, dh, n0, T, e);
	CHECK(e == 0);

	bool ran = lm_attention_blocked(&dm, T, n0, q, k, v, got, true);
	if (bf16_attention_runs < 0)
		printf("attention's bf16 products: %s\n", ran ? "oneDNN" : "not on this CPU (fp32 ran)");
	bf16_attention_runs = ran;
	if (ran)
		attention_f64(&dm, T, n0, q, k, v, want);
	e = excess(got, want, (size_t)T * dm.q_dim, 0, ran ? 0x1p-9 + 1e-4 : 2e-5);
	if (e > 0)
		fprintf(stderr, "attention bf16 hq=%d hkv=%d dh=%d n0=%d T=%d: excess %g\n", hq, hkv, dh, n0,
			T, e);
	CHECK(e == 0);
	free(q), free(k), free(v), free(want), free(got);
}

/* decode (one position) in blocks against lm_attention_heads(), fp32 both: 2e-5 absolute, as
 * the blocked prefill's fp32 products (a key dropped, doubled or from the wrong KV head, a row
 * of a block's tail or a query head of a group of four missed, moves a row by O(1)) */
static void test_attention_decode(int hq, int hkv, int dh, int n0)
{
	struct lm_dims dm = {.hq = hq, .hkv = hkv, .dh = dh, .q_dim = hq * dh, .kv_dim = hkv * dh};
	size_t npos = (size_t)n0 + 1;
	float *q = rand_buf(dm.q_dim, 3.0f);
	float *k = rand_buf(npos * dm.kv_dim, 3.0f), *v = rand_buf(npos * dm.kv_dim, 1.0f);
	float *want = malloc((size_t)dm.q_dim * sizeof(float)),
	      *got = malloc((size_t)dm.q_dim * sizeof(float));
	REQUIRE(want && got);
	size_t parts = lm_attention_decode_part_floats(&dm, (int)npos);
	float *part = parts ? malloc(parts * sizeof(float)) : NULL;
	REQUIRE(!parts || part);
	CHECK_INT_EQ(lm_attention_decode_chunks(n0),
		     (int)((npos + LM_ATTN_DECODE_KEYS - 1) / LM_ATTN_DECODE_KEYS));
	CHECK(parts ==
	      (npos > LM_ATTN_DECODE_KEYS ? (size_t)lm_attention_decode_chunks(n0) * hq * (dh + 2) : 0));
	REQUIRE(cpu_reserve_scratch(MAX(npos * sizeof(float), lm_attention_decode_scratch_bytes(&dm))) == 0);
	lm_attention_heads(&dm, 1, n0, q, k, v, want);
	lm_attention_decode(&dm, n0, q, k, v, got, part);
	double e = excess(got, want, (size_t)dm.q_dim, 0, 2e-5);
	if (e > 0)
		fprintf(stderr, "decode attention %s hq=%d hkv=%d dh=%d n0=%d: excess %g\n", cpu_rows()->name,
			hq, hkv, dh, n0, e);
	CHECK(e == 0);
	/* the same bits on another thread count (fixed chunks, merged in order) */
	float *other = malloc((size_t)dm.q_dim * sizeof(float));
	REQUIRE(other);
	const int threads = cpu_threads();
	REQUIRE(cpu_set_threads(threads == 1 ? 3 : 1) == 0);
	REQUIRE(cpu_reserve_scratch(lm_attention_decode_scratch_bytes(&dm)) == 0);
	lm_attention_decode(&dm, n0, q, k, v, other, part);
	CHECK(memcmp(other, got, (size_t)dm.q_dim * sizeof(float)) == 0);
	REQUIRE(cpu_set_threads(threads) == 0);
	free(q), free(k), free(v), free(want), free(got), free(part), free(other);
}

static void run_all(void)
{
	/* the default model (tools/bench): d 1024, d_in 2048 in G 8, conv 4096 x K 4, H 32,
	 * MLP 5120, attention 8 / 2 x 128; prompts up to 512 positions */
	test_rmsnorm(67, 1024);
	test_gated(37, 8, 256, 2048 * 2 + 2048 + 32);
	test_conv(4, 4096, 32, 61, 1);
	test_relu2((size_t)19 * 5120);
	test_attention(8, 2, 128, 0, 100);
	test_attention(8, 2, 128, 290, 21);
	test_attention(8, 2, 128, 5, 1);
	/* odd sizes and tails */
	for (int d = 1; d <= 35; d += 2)
		test_rmsnorm(3, d);
	test_rmsnorm(1, 100);
	test_gated(5, 3, 23, 80);
	test_gated(2, 1, 7, 9);
	test_gated(4, 2, 48, 96);
	test_conv(1, 19, 1, 3, 2);
	test_conv(2, 33, 5, 1, 1);
	test_conv(5, 70, 3, 2, 9);
	test_conv(4, 100, 7, 1, 2);
	for (size_t n = 1; n <= 40; n++)
		test_relu2(n);
	test_attention(1, 1, 5, 0, 2);
	test_attention(6, 3, 17, 3, 33);
	test_attention(4, 4, 40, 251, 7);
	test_attention(2, 1, 64, 0, 300);
	/* decode: the default model's heads at block edges (256 keys), four keys at a time and
	 * their tails, one task's keys (LM_ATTN_DECODE_KEYS) and the chunks merged past it; groups
	 * of 1..9 query heads (4 per pass: 1, 2, 3, 4, 4 + 1, 4 + 2, 4 + 3, 4 + 4 + 1), head sizes
	 * with 16- and 8-lane tails in the first and the second run of columns */
	static const int n0s[] = {0, 1, 3, 4, 254, 255, 256, 510, 511, 512, 700, 2100};
	for (size_t i = 0; i < sizeof(n0s) / sizeof(n0s[0]); i++)
		test_attention_decode(8, 2, 128, n0s[i]);
	test_attention_decode(1, 1, 5, 6);
	test_attention_decode(6, 3, 17, 300);
	test_attention_decode(3, 1, 100, 5);
	test_attention_decode(5, 1, 40, 9);
	test_attention_decode(12, 2, 24, 33);
	test_attention_decode(7, 1, 80, 1100);
	test_attention_decode(16, 2, 72, 64);
	test_attention_decode(9, 1, 16, 517);
	/* wide caches: blocks of 64, 32, 16 keys (256 KB of K rows) and of 96 (not a divisor of a
	 * chunk's 512), over several chunks */
	test_attention_decode(40, 8, 128, 1300);
	test_attention_decode(32, 16, 128, 600);
	test_attention_decode(32, 32, 128, 530);
	test_attention_decode(10, 5, 128, 700);
}

int main(void)
{
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		for (int i = 0; cpu_rows_variant_name(i); i++) {
			const char *name = cpu_rows_variant_name(i);
			int r = cpu_isa_select(name);
			CHECK(r == 0 || r == -ENOTSUP);
			if (threads == 1)
				printf("row kernels %s: %s\n", name,
				       r == 0 ? "tested" : "skipped (this CPU lacks it)");
			if (r == 0)
				run_all();
		}
	}
	CHECK_INT_EQ(cpu_isa_select("generic"), 0);
	CHECK_STR_EQ(cpu_rows()->name, "portable");
	CHECK_INT_EQ(cpu_isa_select("avx1024"), -EINVAL);
	return test_exit();
}
