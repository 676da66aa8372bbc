/* The row kernels, AVX2+FMA variant (compiled with -mavx2 -mfma; cpu_rows.c calls it only where
 * cpuid says the CPU runs it). 8 lanes, the tails under a maskload/maskstore, expf from
 * cpu_vexp.h; sums of squares in two 8-lane accumulators. */
#include "cpu_rows.h"

#include <immintrin.h>
#include <math.h>

#include "common.h"
#include "cpu_vexp.h"

#define INL static inline __attribute__((always_inline))

/* lanes [0, n) of 8 set, for n in [0, 8] */
INL __m256i tail_mask(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

INL __m256i lanes(int left)
{
	return left >= 8 ? _mm256_set1_epi32(-1) : tail_mask(left);
}

INL float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

INL float hmax(__m256 v)
{
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* x / (1 + exp(-x)), the division as a reciprocal estimate (2^-12) and one Newton step (~2^-23
 * relative) */
INL __m256 silu(__m256 x)
{
	__m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), cpu_vexp256(_mm256_sub_ps(_mm256_setzero_ps(), x)));
	__m256 r = _mm256_rcp_ps(d);
	r = _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
	return _mm256_mul_ps(x, r);
}

static float sum_squares(const float *x, int n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0;
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
		s0 = _mm256_fmadd_ps(a, a, s0);
		s1 = _mm256_fmadd_ps(b, b, s1);
	}
	for (; i < n; i += 8) {
		__m256 a = _mm256_maskload_ps(x + i, lanes(n - i));
		s0 = _mm256_fmadd_ps(a, a, s0);
	}
	return hsum(_mm256_add_ps(s0, s1));
}

/* out = w * (x * scale) */
static void scale_by(const float *x, float *out, const float *w, int n, float scale)
{
	__m256 s = _mm256_set1_ps(scale);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(w + i),
							_mm256_mul_ps(_mm256_loadu_ps(x + i), s)));
	if (i < n) {
		__m256i m = tail_mask(n - i);
		_mm256_maskstore_ps(out + i, m,
				    _mm256_mul_ps(_mm256_maskload_ps(w + i, m),
						  _mm256_mul_ps(_mm256_maskload_ps(x + i, m), s)));
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
		__m256 s0 = _mm256_setzero_ps();
		for (int i = 0; i < gs; i += 8) {
			__m256i m = lanes(gs - i);
			__m256 a = _mm256_mul_ps(_mm256_maskload_ps(u + i, m),
						 silu(_mm256_maskload_ps(zg + i, m)));
			_mm256_maskstore_ps(u + i, m, a);
			s0 = _mm256_fmadd_ps(a, a, s0);
		}
		scale_by(u, u, w + (size_t)g * gs, gs, 1.0f / sqrtf(hsum(s0) / (float)gs + eps));
	}
}

/* as the AVX-512 variant: row by row along the task's channels */
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
		for (int c = c0; c < c1; c += 8) {
			if ((c & 15) == 0)
				_mm_prefetch((const char *)(next + c), _MM_HINT_T0);
			__m256i m = lanes(c1 - c);
			__m256 acc = _mm256_maskload_ps(a->bias + c, m);
			for (int k = 0; k < K; k++)
				acc = _mm256_fmadd_ps(_mm256_maskload_ps(a->wt + (size_t)k * cd + c, m),
						      _mm256_maskload_ps(in[k] + c, m), acc);
			_mm256_maskstore_ps(o + c, m, silu(acc));
		}
	}
	cpu_rows_conv_state(a, c0, c1);
}

/* max(u, 0) takes the second operand for NaN and -0, as `u > 0 ? u : 0` does */
static void relu2(float *u, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 r = _mm256_max_ps(_mm256_loadu_ps(u + i), _mm256_setzero_ps());
		_mm256_storeu_ps(u + i, _mm256_mul_ps(r, r));
	}
	for (; i < n; i++) {
		float r = u[i] > 0 ? u[i] : 0;
		u[i] = r * r;
	}
}

static float vmax(const float *p, int n)
{
	__m256 m0 = _mm256_set1_ps(p[0]);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		m0 = _mm256_max_ps(m0, _mm256_loadu_ps(p + i));
	float m = hmax(m0);
	for (; i < n; i++)
		m = fmaxf(m, p[i]);
	return m;
}

static float exp_sum(float *p, int n, float mx)
{
	__m256 vm = _mm256_set1_ps(mx), s0 = _mm256_setzero_ps();
	for (int i = 0; i < n; i += 8) {
		__m256i m = lanes(n - i);
		/* masked-off lanes load 0 and come back as exp(-mx): and them out of the sum */
		__m256 e = _mm256_and_ps(cpu_vexp256(_mm256_sub_ps(_mm256_maskload_ps(p + i, m), vm)),
					 _mm256_castsi256_ps(m));
		_mm256_maskstore_ps(p + i, m, e);
		s0 = _mm256_add_ps(s0, e);
	}
	return hsum(s0);
}

static void scale(float *y, float a, int n)
{
	__m256 va = _mm256_set1_ps(a);
	for (int i = 0; i < n; i += 8) {
		__m256i m = lanes(n - i);
		_mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(y + i, m), va));
	}
}

/* decode attention's rows ahead prefetched: the cache's rows of one KV head are dh floats a
 * kv_dim stride apart, short runs the stream prefetchers follow badly */
#define PF_ROWS 8

/* G (1..4) query rows against every key: one accumulator per row, each key vector loaded once */
INL void scores_g(const float *q, int dh, const float *k, size_t ldk, int n, float *s, size_t lds, int pf,
		  const int G)
{
	for (int i = 0; i < n; i++) {
		const float *ki = k + (size_t)i * ldk;
		for (int e = 0; e < pf; e += 16)
			_mm_prefetch((const char *)(ki + PF_ROWS * ldk + e), _MM_HINT_T0);
		__m256 acc[4];
		for (int g = 0; g < G; g++)
			acc[g] = _mm256_setzero_ps();
		for (int e = 0; e < dh; e += 8) {
			const __m256i m = lanes(dh - e);
			const __m256 kv = _mm256_maskload_ps(ki + e, m);
			for (int g = 0; g < G; g++)
				acc[g] = _mm256_fmadd_ps(kv, _mm256_maskload_ps(q + (size_t)g * dh + e, m),
							 acc[g]);
		}
		for (int g = 0; g < G; g++)
			s[(size_t)g * lds + i] = hsum(acc[g]);
	}
}

static void scores(const float *q, int R, int dh, const float *k, size_t ldk, int n, float *s, size_t lds,
		   int pf)
{
#define GROUP(G) scores_g(q + (size_t)r * dh, dh, k, ldk, n, s + (size_t)r * lds, lds, r ? 0 : pf, G)
	CPU_ROWS_IN_FOURS(R, r, GROUP);
#undef GROUP
}

/* G (1..4) rows of o, 16 columns at a time held in registers over all n value rows (4 x 2
 * accumulators, the value vectors and the weight: 11 of the 16 registers) */
INL void weigh_g(const float *p, size_t ldp, int n, const float *v, size_t ldv, int dh, float *o, int pf,
		 const int G)
{
	for (int e0 = 0; e0 < dh; e0 += 16) {
		const __m256i m0 = lanes(dh - e0), m1 = lanes(dh - e0 - 8);
		__m256 acc[4][2];
		for (int g = 0; g < G; g++) {
			acc[g][0] = _mm256_maskload_ps(o + (size_t)g * dh + e0, m0);
			acc[g][1] = _mm256_maskload_ps(o + (size_t)g * dh + e0 + 8, m1);
		}
		for (int i = 0; i < n; i++) {
			const float *vi = v + (size_t)i * ldv + e0;
			/* the whole row ahead on the first run of columns: the next runs find it in L2 */
			if (e0 == 0)
				for (int e = 0; e < pf; e += 16)
					_mm_prefetch((const char *)(vi + PF_ROWS * ldv + e), _MM_HINT_T0);
			const __m256 v0 = _mm256_maskload_ps(vi, m0), v1 = _mm256_maskload_ps(vi + 8, m1);
			for (int g = 0; g < G; g++) {
				const __m256 w = _mm256_set1_ps(p[(size_t)g * ldp + i]);
				acc[g][0] = _mm256_fmadd_ps(w, v0, acc[g][0]);
				acc[g][1] = _mm256_fmadd_ps(w, v1, acc[g][1]);
			}
		}
		for (int g = 0; g < G; g++) {
			_mm256_maskstore_ps(o + (size_t)g * dh + e0, m0, acc[g][0]);
			_mm256_maskstore_ps(o + (size_t)g * dh + e0 + 8, m1, acc[g][1]);
		}
	}
}

static void weigh(const float *p, size_t ldp, int R, int n, const float *v, size_t ldv, int dh, float *o,
		  int pf)
{
#define GROUP(G) weigh_g(p + (size_t)r * ldp, ldp, n, v, ldv, dh, o + (size_t)r * dh, r ? 0 : pf, G)
	CPU_ROWS_IN_FOURS(R, r, GROUP);
#undef GROUP
}

const struct cpu_rows_variant cpu_rows_avx2 = {
	.name = "avx2",
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
