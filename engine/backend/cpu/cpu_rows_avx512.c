/* The row kernels, AVX-512F variant (compiled with -mavx512f -mavx2 -mfma; cpu_rows.c calls it
 * only where cpuid says the CPU runs it). 16 lanes, the tails under a mask, expf from
 * cpu_vexp.h; sums of squares in four 16-lane accumulators. */
#include "cpu_rows.h"

#include <immintrin.h>
#include <math.h>

#include "common.h"
#include "cpu_vexp.h"

#define INL static inline __attribute__((always_inline))

INL __mmask16 tail_mask(int n)
{
	return (__mmask16)((1u << n) - 1u);
}

/* x / (1 + exp(-x)), the division as a reciprocal estimate (2^-14) and one Newton step (~2^-23
 * relative): a third of the division's cost */
INL __m512 silu(__m512 x)
{
	__m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), cpu_vexp512(_mm512_sub_ps(_mm512_setzero_ps(), x)));
	__m512 r = _mm512_rcp14_ps(d);
	r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
	return _mm512_mul_ps(x, r);
}

static float sum_squares(const float *x, int n)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int i = 0;
	for (; i + 64 <= n; i += 64) {
		__m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
		__m512 c = _mm512_loadu_ps(x + i + 32), d = _mm512_loadu_ps(x + i + 48);
		s0 = _mm512_fmadd_ps(a, a, s0);
		s1 = _mm512_fmadd_ps(b, b, s1);
		s2 = _mm512_fmadd_ps(c, c, s2);
		s3 = _mm512_fmadd_ps(d, d, s3);
	}
	for (; i + 16 <= n; i += 16) {
		__m512 a = _mm512_loadu_ps(x + i);
		s0 = _mm512_fmadd_ps(a, a, s0);
	}
	if (i < n) {
		__m512 a = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
		s1 = _mm512_fmadd_ps(a, a, s1);
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

/* out = w * (x * scale) */
static void scale_by(const float *x, float *out, const float *w, int n, float scale)
{
	__m512 s = _mm512_set1_ps(scale);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(w + i),
							_mm512_mul_ps(_mm512_loadu_ps(x + i), s)));
	if (i < n) {
		__mmask16 m = tail_mask(n - i);
		_mm512_mask_storeu_ps(out + i, m,
				      _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i),
						    _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
	}
}

static void rmsnorm(const float *x, float *out, const float *w, int n, float eps)
{
	float scale = 1.0f / sqrtf(sum_squares(x, n) / (float)n + eps);
	scale_by(x, out, w, n, scale);
}

static void gated_rmsnorm(float *y, const float *z, const float *w, int groups, int gs, float eps)
{
	for (int g = 0; g < groups; g++) {
		float *u = y + (size_t)g * gs;
		const float *zg = z + (size_t)g * gs;
		__m512 s0 = _mm512_setzero_ps(), s1 = s0;
		int i = 0;
		for (; i + 32 <= gs; i += 32) {
			__m512 a = _mm512_mul_ps(_mm512_loadu_ps(u + i), silu(_mm512_loadu_ps(zg + i)));
			__m512 b = _mm512_mul_ps(_mm512_loadu_ps(u + i + 16),
						 silu(_mm512_loadu_ps(zg + i + 16)));
			_mm512_storeu_ps(u + i, a);
			_mm512_storeu_ps(u + i + 16, b);
			s0 = _mm512_fmadd_ps(a, a, s0);
			s1 = _mm512_fmadd_ps(b, b, s1);
		}
		for (; i < gs; i += 16) {
			__mmask16 m = gs - i >= 16 ? (__mmask16)0xffff : tail_mask(gs - i);
			__m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, u + i),
						 silu(_mm512_maskz_loadu_ps(m, zg + i)));
			_mm512_mask_storeu_ps(u + i, m, a);
			s0 = _mm512_fmadd_ps(a, a, s0);
		}
		float ss = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
		scale_by(u, u, w + (size_t)g * gs, gs, 1.0f / sqrtf(ss / (float)gs + eps));
	}
}

/* Row by row along the task's channels, as the rows lie in memory: the K input rows of a
 * position and the taps stay in L1 while the newest row streams in. */
static void conv_silu(const struct cpu_conv_args *a, int c0, int c1)
{
	const int K = a->K, cd = a->channels;
	for (int t = 0; t < a->T; t++) {
		const float *in[CPU_CONV_MAX_K];
		for (int k = 0; k < K; k++) {
			int s = t - (K - 1) + k;
			in[k] = s < 0 ? a->state + (size_t)(K - 1 + s) * cd : a->raw + (size_t)s * a->ldr;
		}
		float *o = a->out + (size_t)t * a->ldo;
		/* the next position's row, a stride the hardware prefetchers do not follow */
		const float *next = a->raw + (size_t)MIN(t + 1, a->T - 1) * a->ldr;
		for (int c = c0; c < c1; c += 16) {
			_mm_prefetch((const char *)(next + c), _MM_HINT_T0);
			__mmask16 m = c1 - c >= 16 ? (__mmask16)0xffff : tail_mask(c1 - c);
			__m512 acc = _mm512_maskz_loadu_ps(m, a->bias + c);
			for (int k = 0; k < K; k++)
				acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a->wt + (size_t)k * cd + c),
						      _mm512_maskz_loadu_ps(m, in[k] + c), acc);
			_mm512_mask_storeu_ps(o + c, m, silu(acc));
		}
	}
	cpu_rows_conv_state(a, c0, c1);
}

/* max(u, 0) takes the second operand for NaN and -0, as `u > 0 ? u : 0` does */
static void relu2(float *u, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 r = _mm512_max_ps(_mm512_loadu_ps(u + i), _mm512_setzero_ps());
		_mm512_storeu_ps(u + i, _mm512_mul_ps(r, r));
	}
	if (i < n) {
		__mmask16 m = tail_mask((int)(n - i));
		__m512 r = _mm512_max_ps(_mm512_maskz_loadu_ps(m, u + i), _mm512_setzero_ps());
		_mm512_mask_storeu_ps(u + i, m, _mm512_mul_ps(r, r));
	}
}

static float vmax(const float *p, int n)
{
	__m512 m0 = _mm512_set1_ps(p[0]), m1 = m0;
	int i = 0;
	for (; i + 32 <= n; i += 32) {
		m0 = _mm512_max_ps(m0, _mm512_loadu_ps(p + i));
		m1 = _mm512_max_ps(m1, _mm512_loadu_ps(p + i + 16));
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
		m0 = _mm512_mask_max_ps(m0, m, m0, _mm512_maskz_loadu_ps(m, p + i));
	}
	return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

static float exp_sum(float *p, int n, float mx)
{
	__m512 vm = _mm512_set1_ps(mx), s0 = _mm512_setzero_ps(), s1 = s0;
	int i = 0;
	for (; i + 32 <= n; i += 32) {
		__m512 a = cpu_vexp512(_mm512_sub_ps(_mm512_loadu_ps(p + i), vm));
		__m512 b = cpu_vexp512(_mm512_sub_ps(_mm512_loadu_ps(p + i + 16), vm));
		_mm512_storeu_ps(p + i, a);
		_mm512_storeu_ps(p + i + 16, b);
		s0 = _mm512_add_ps(s0, a);
		s1 = _mm512_add_ps(s1, b);
	}
	for (; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail_mask(n - i);
		__m512 a = cpu_vexp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + i), vm));
		_mm512_mask_storeu_ps(p + i, m, a);
		s0 = _mm512_add_ps(s0, _mm512_maskz_mov_ps(m, a));
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void scale(float *y, float a, int n)
{
	__m512 va = _mm512_set1_ps(a);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), va));
	if (i < n) {
		__mmask16 m = tail_mask(n - i);
		_mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), va));
	}
}

/* decode attention's rows ahead prefetched: the cache's rows of one KV head are dh floats a
 * kv_dim stride apart, short runs the stream prefetchers follow badly */
#define PF_ROWS 8

INL __mmask16 lanes(int left)
{
	return left >= 16 ? (__mmask16)0xffff : left > 0 ? tail_mask(left) : 0;
}

/* the four sums of a0..a3's lanes, in order */
INL __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
	__m512 t0 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
	__m512 t1 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
	__m512 u =
		_mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))),
			      _mm512_castpd_ps(
				      _mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t1))));
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(u),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(u), 1)));
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* G (1..4) query rows against every key: four keys at a time, one accumulator per (row, key),
 * each key vector and query vector loaded once for them, the four sums of a row reduced
 * together; the last n % 4 keys one at a time */
INL void scores_g(const float *q, int dh, const float *k, size_t ldk, int n, float *s, size_t lds, int pf,
		  const int G)
{
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		const float *ki = k + (size_t)i * ldk;
		for (int j = 0; j < 4; j++)
			for (int e = 0; e < pf; e += 16)
				_mm_prefetch((const char *)(ki + (PF_ROWS + j) * ldk + e), _MM_HINT_T0);
		__m512 acc[4][4];
		for (int g = 0; g < G; g++)
			for (int j = 0; j < 4; j++)
				acc[g][j] = _mm512_setzero_ps();
		for (int e = 0; e < dh; e += 16) {
			const __mmask16 m = lanes(dh - e);
			__m512 kv[4];
			for (int j = 0; j < 4; j++)
				kv[j] = _mm512_maskz_loadu_ps(m, ki + (size_t)j * ldk + e);
			for (int g = 0; g < G; g++) {
				const __m512 qv = _mm512_maskz_loadu_ps(m, q + (size_t)g * dh + e);
				for (int j = 0; j < 4; j++)
					acc[g][j] = _mm512_fmadd_ps(kv[j], qv, acc[g][j]);
			}
		}
		for (int g = 0; g < G; g++)
			_mm_storeu_ps(s + (size_t)g * lds + i,
				      sum4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]));
	}
	for (; i < n; i++) {
		const float *ki = k + (size_t)i * ldk;
		for (int e = 0; e < pf; e += 16)
			_mm_prefetch((const char *)(ki + PF_ROWS * ldk + e), _MM_HINT_T0);
		__m512 acc[4];
		for (int g = 0; g < G; g++)
			acc[g] = _mm512_setzero_ps();
		for (int e = 0; e < dh; e += 16) {
			const __mmask16 m = lanes(dh - e);
			const __m512 kv = _mm512_maskz_loadu_ps(m, ki + e);
			for (int g = 0; g < G; g++)
				acc[g] = _mm512_fmadd_ps(kv, _mm512_maskz_loadu_ps(m, q + (size_t)g * dh + e),
							 acc[g]);
		}
		for (int g = 0; g < G; g++)
			s[(size_t)g * lds + i] = _mm512_reduce_add_ps(acc[g]);
	}
}

static void scores(const float *q, int R, int dh, const float *k, size_t ldk, int n, float *s, size_t lds,
		   int pf)
{
#define GROUP(G) scores_g(q + (size_t)r * dh, dh, k, ldk, n, s + (size_t)r * lds, lds, r ? 0 : pf, G)
	CPU_ROWS_IN_FOURS(R, r, GROUP);
#undef GROUP
}

/* G (1..4) rows of o, 64 columns at a time held in registers over all n value rows */
INL void weigh_g(const float *p, size_t ldp, int n, const float *v, size_t ldv, int dh, float *o, int pf,
		 const int G)
{
	for (int e0 = 0; e0 < dh; e0 += 64) {
		__mmask16 m[4];
		__m512 acc[4][4];
		for (int c = 0; c < 4; c++)
			m[c] = lanes(dh - e0 - 16 * c);
		for (int g = 0; g < G; g++)
			for (int c = 0; c < 4; c++)
				acc[g][c] = _mm512_maskz_loadu_ps(m[c], o + (size_t)g * dh + e0 + 16 * c);
		for (int i = 0; i < n; i++) {
			const float *vi = v + (size_t)i * ldv + e0;
			/* the whole row ahead on the first run of columns: the next runs find it in L2 */
			if (e0 == 0)
				for (int e = 0; e < pf; e += 16)
					_mm_prefetch((const char *)(vi + PF_ROWS * ldv + e), _MM_HINT_T0);
			__m512 vv[4];
			for (int c = 0; c < 4; c++)
				vv[c] = _mm512_maskz_loadu_ps(m[c], vi + 16 * c);
			for (int g = 0; g < G; g++) {
				const __m512 w = _mm512_set1_ps(p[(size_t)g * ldp + i]);
				for (int c = 0; c < 4; c++)
					acc[g][c] = _mm512_fmadd_ps(w, vv[c], acc[g][c]);
			}
		}
		for (int g = 0; g < G; g++)
			for (int c = 0; c < 4; c++)
				_mm512_mask_storeu_ps(o + (size_t)g * dh + e0 + 16 * c, m[c], acc[g][c]);
	}
}

static void weigh(const float *p, size_t ldp, int R, int n, const float *v, size_t ldv, int dh, float *o,
		  int pf)
{
#define GROUP(G) weigh_g(p + (size_t)r * ldp, ldp, n, v, ldv, dh, o + (size_t)r * dh, r ? 0 : pf, G)
	CPU_ROWS_IN_FOURS(R, r, GROUP);
#undef GROUP
}

const struct cpu_rows_variant cpu_rows_avx512 = {
	.name = "avx512",
	.rmsnorm = rmsnorm,
	.gated_rmsnorm = gated_rmsnorm,
	.conv_silu = conv_silu,
	.relu2 = relu2,
	.max = vmax,
	.exp_sum = exp_sum,
	.scale = scale,
	.scores = scores,
	.weigh = weigh,
};
