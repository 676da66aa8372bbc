/* Matrix products against memory-mapped weights, fp32 accumulation.
 *
 * Two shapes matter. Decode (T <= CPU_GEMV_T tokens): every weight byte is used once; the GEMV
 * kernels of cpu_gemv.c stream it (memory-bound). Prefill (many tokens): a task converts a block of ROW_BLOCK
 * rows to fp32 once into its scratch buffer and then multiplies them with tiles of TOKEN_BLOCK
 * tokens through a 4-row x 3-token register-blocked micro-kernel, so each weight byte is read
 * from memory once per call instead of once per token (compute-bound).
 *
 * Kernels are chosen at runtime by cpu_isa_pick() (cpu_isa.h): AVX-512F, AVX2+FMA+F16C, or
 * portable C ("generic").
 */
#include "cpu.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

#define ROW_BLOCK 32
#define TOKEN_BLOCK 48
#define GEMM_MIN_T 32

float cpu_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ffu;
	union {
		uint32_t u;
		float f;
	} x;
	if (exp == 0) {
		/* zero or subnormal: value = man * 2^-24 */
		float v = (float)man * 5.9604644775390625e-8f;
		return sign ? -v : v;
	}
	if (exp == 31)
		x.u = sign | 0x7f800000u | (man << 13);
	else
		x.u = sign | ((exp + 112) << 23) | (man << 13);
	return x.f;
}

/* ---- portable kernels ------------------------------------------------------------------- */

static float dot_generic(const float *a, const float *b, int n)
{
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		s0 += a[i] * b[i];
		s1 += a[i + 1] * b[i + 1];
		s2 += a[i + 2] * b[i + 2];
		s3 += a[i + 3] * b[i + 3];
	}
	for (; i < n; i++)
		s0 += a[i] * b[i];
	return (s0 + s1) + (s2 + s3);
}

static void axpby_generic(float *restrict y, float a, float b, const float *restrict x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = a * y[i] + b * x[i];
}

static void silu_generic(float *y, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void mul_silu_generic(float *y, const float *z, int n)
{
	for (int i = 0; i < n; i++)
		y[i] *= z[i] / (1.0f + expf(-z[i]));
}

static void vfma_generic(float *restrict y, const float *restrict a, const float *restrict b, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += a[i] * b[i];
}

static void bf16_row_generic(const uint16_t *src, float *dst, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = bf16_to_f32(src[i]);
}

static void f16_row_generic(const uint16_t *src, float *dst, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = cpu_f16_to_f32(src[i]);
}

/* out[r][t] = dot(w row r, x row t) for 4 rows x 3 tokens, all fp32. */
static void mk4x3_generic(const float *w, size_t ldw, const float *x, size_t ldx, int n, float out[4][3])
{
	for (int r = 0; r < 4; r++)
		for (int t = 0; t < 3; t++)
			out[r][t] = dot_generic(w + (size_t)r * ldw, x + (size_t)t * ldx, n);
}

/* ---- AVX2 + FMA + F16C ------------------------------------------------------------------ */
#ifdef HAVE_X86
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum256(__m256 v)
{
	__m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
	lo = _mm_add_ps(lo, hi);
	lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
	lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
	return _mm_cvtss_f32(lo);
}

AVX2 static inline __m256 load_bf16x8(const uint16_t *p)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2 static float dot_avx2(const float *a, const float *b, int n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum256(_mm256_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

AVX2 static void axpby_avx2(float *restrict y, float a, float b, const float *restrict x, int n)
{
	__m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(y + i),
							_mm256_mul_ps(vb, _mm256_loadu_ps(x + i))));
	for (; i < n; i++)
		y[i] = a * y[i] + b * x[i];
}

/* expf on 8 lanes (Cephes polynomial after range reduction by ln 2; ~1 ulp over the clamped
 * range, where expf saturates anyway) */
AVX2 static inline __m256 exp256(__m256 x)
{
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

AVX2 static inline __m256 silu256(__m256 x)
{
	__m256 one = _mm256_set1_ps(1.0f);
	return _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

AVX2 static void silu_avx2(float *y, const float *x, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, silu256(_mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] = x[i] / (1.0f + expf(-x[i]));
}

AVX2 static void mul_silu_avx2(float *y, const float *z, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i,
				 _mm256_mul_ps(_mm256_loadu_ps(y + i), silu256(_mm256_loadu_ps(z + i))));
	for (; i < n; i++)
		y[i] *= z[i] / (1.0f + expf(-z[i]));
}

AVX2 static void vfma_avx2(float *restrict y, const float *restrict a, const float *restrict b, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i),
							_mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += a[i] * b[i];
}

AVX2 static void bf16_row_avx2(const uint16_t *src, float *dst, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, load_bf16x8(src + i));
	for (; i < n; i++)
		dst[i] = bf16_to_f32(src[i]);
}

AVX2 static void f16_row_avx2(const uint16_t *src, float *dst, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
	for (; i < n; i++)
		dst[i] = cpu_f16_to_f32(src[i]);
}

AVX2 static void mk4x3_avx2(const float *w, size_t ldw, const float *x, size_t ldx, int n, float out[4][3])
{
	const float *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
	const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx;
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
	__m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i);
		__m256 v2 = _mm256_loadu_ps(x2 + i);
		__m256 r = _mm256_loadu_ps(w0 + i);
		a00 = _mm256_fmadd_ps(r, v0, a00);
		a01 = _mm256_fmadd_ps(r, v1, a01);
		a02 = _mm256_fmadd_ps(r, v2, a02);
		r = _mm256_loadu_ps(w1 + i);
		a10 = _mm256_fmadd_ps(r, v0, a10);
		a11 = _mm256_fmadd_ps(r, v1, a11);
		a12 = _mm256_fmadd_ps(r, v2, a12);
		r = _mm256_loadu_ps(w2 + i);
		a20 = _mm256_fmadd_ps(r, v0, a20);
		a21 = _mm256_fmadd_ps(r, v1, a21);
		a22 = _mm256_fmadd_ps(r, v2, a22);
		r = _mm256_loadu_ps(w3 + i);
		a30 = _mm256_fmadd_ps(r, v0, a30);
		a31 = _mm256_fmadd_ps(r, v1, a31);
		a32 = _mm256_fmadd_ps(r, v2, a32);
	}
	out[0][0] = hsum256(a00), out[0][1] = hsum256(a01), out[0][2] = hsum256(a02);
	out[1][0] = hsum256(a10), out[1][1] = hsum256(a11), out[1][2] = hsum256(a12);
	out[2][0] = hsum256(a20), out[2][1] = hsum256(a21), out[2][2] = hsum256(a22);
	out[3][0] = hsum256(a30), out[3][1] = hsum256(a31), out[3][2] = hsum256(a32);
	for (; i < n; i++)
		for (int r = 0; r < 4; r++)
			for (int t = 0; t < 3; t++)
				out[r][t] += w[(size_t)r * ldw + i] * x[(size_t)t * ldx + i];
}

/* Prefill micro-kernels over a packed block of ROW_BLOCK = 32 weight rows (wp[k*32 + r],
 * k-major): each accumulator holds consecutive outputs of one token, so there is no horizontal
 * reduction, and one pass over the block's weights feeds several tokens' FMAs. Rows past the
 * end of W are zero in the packed block and not stored. */
static inline void store_block(float *y, const float *v, int nr, bool acc)
{
	for (int r = 0; r < nr; r++)
		y[r] = acc ? y[r] + v[r] : v[r];
}

#define G2_DECL(i) __m256 a##i = _mm256_setzero_ps(), b##i = a##i, c##i = a##i, d##i = a##i;
#define G2_FMA(i)                                                                                            \
	{                                                                                                    \
		__m256 xv = _mm256_broadcast_ss(xp + (size_t)(i)*ldx + k);                                   \
		a##i = _mm256_fmadd_ps(w0, xv, a##i);                                                        \
		b##i = _mm256_fmadd_ps(w1, xv, b##i);                                                        \
		c##i = _mm256_fmadd_ps(w2, xv, c##i);                                                        \
		d##i = _mm256_fmadd_ps(w3, xv, d##i);                                                        \
	}
#define G2_STORE(i)                                                                                          \
	{                                                                                                    \
		float tmp[32];                                                                               \
		_mm256_storeu_ps(tmp, a##i);                                                                 \
		_mm256_storeu_ps(tmp + 8, b##i);                                                             \
		_mm256_storeu_ps(tmp + 16, c##i);                                                            \
		_mm256_storeu_ps(tmp + 24, d##i);                                                            \
		store_block(y + (size_t)(t + (i)) * ldy, tmp, nr, acc);                                      \
	}
#define G2_LOADW                                                                                             \
	__m256 w0 = _mm256_load_ps(wp + (size_t)k * 32), w1 = _mm256_load_ps(wp + (size_t)k * 32 + 8);       \
	__m256 w2 = _mm256_load_ps(wp + (size_t)k * 32 + 16);                                                \
	__m256 w3 = _mm256_load_ps(wp + (size_t)k * 32 + 24);

/* statement macros in rows, which clang-format cannot lay out stably: */
/* clang-format off */
AVX2 static void gemm32_avx2(const float *wp, int in, const float *x, size_t ldx, int T, float *y,
			     size_t ldy, int nr, bool acc)
{
	int t = 0;
	for (; t + 3 <= T; t += 3) {
		const float *xp = x + (size_t)t * ldx;
		G2_DECL(0) G2_DECL(1) G2_DECL(2)
		for (int k = 0; k < in; k++) {
			G2_LOADW
			G2_FMA(0) G2_FMA(1) G2_FMA(2)
		}
		G2_STORE(0) G2_STORE(1) G2_STORE(2)
	}
	for (; t < T; t++) {
		const float *xp = x + (size_t)t * ldx;
		G2_DECL(0)
		for (int k = 0; k < in; k++) {
			G2_LOADW
			G2_FMA(0)
		}
		G2_STORE(0)
	}
}

/* clang-format on */

/* ---- AVX-512F --------------------------------------------------------------------------- */
#define AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

AVX512 static inline __m512 load_bf16x16(const uint16_t *p)
{
	__m256i h = _mm256_loadu_si256((const __m256i *)p);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AVX512 static void axpby_avx512(float *restrict y, float a, float b, const float *restrict x, int n)
{
	__m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(y + i),
							_mm512_mul_ps(vb, _mm512_loadu_ps(x + i))));
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
		__m512 v = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, y + i),
					   _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, x + i)));
		_mm512_mask_storeu_ps(y + i, m, v);
	}
}

AVX512 static void bf16_row_avx512(const uint16_t *src, float *dst, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(dst + i, load_bf16x16(src + i));
	for (; i < n; i++)
		dst[i] = bf16_to_f32(src[i]);
}

AVX512 static void mk4x3_avx512(const float *w, size_t ldw, const float *x, size_t ldx, int n, float out[4][3])
{
	const float *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
	const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx;
	__m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
	__m512 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 v0 = _mm512_loadu_ps(x0 + i), v1 = _mm512_loadu_ps(x1 + i);
		__m512 v2 = _mm512_loadu_ps(x2 + i);
		__m512 r = _mm512_loadu_ps(w0 + i);
		a00 = _mm512_fmadd_ps(r, v0, a00);
		a01 = _mm512_fmadd_ps(r, v1, a01);
		a02 = _mm512_fmadd_ps(r, v2, a02);
		r = _mm512_loadu_ps(w1 + i);
		a10 = _mm512_fmadd_ps(r, v0, a10);
		a11 = _mm512_fmadd_ps(r, v1, a11);
		a12 = _mm512_fmadd_ps(r, v2, a12);
		r = _mm512_loadu_ps(w2 + i);
		a20 = _mm512_fmadd_ps(r, v0, a20);
		a21 = _mm512_fmadd_ps(r, v1, a21);
		a22 = _mm512_fmadd_ps(r, v2, a22);
		r = _mm512_loadu_ps(w3 + i);
		a30 = _mm512_fmadd_ps(r, v0, a30);
		a31 = _mm512_fmadd_ps(r, v1, a31);
		a32 = _mm512_fmadd_ps(r, v2, a32);
	}
	out[0][0] = _mm512_reduce_add_ps(a00), out[0][1] = _mm512_reduce_add_ps(a01);
	out[0][2] = _mm512_reduce_add_ps(a02), out[1][0] = _mm512_reduce_add_ps(a10);
	out[1][1] = _mm512_reduce_add_ps(a11), out[1][2] = _mm512_reduce_add_ps(a12);
	out[2][0] = _mm512_reduce_add_ps(a20), out[2][1] = _mm512_reduce_add_ps(a21);
	out[2][2] = _mm512_reduce_add_ps(a22), out[3][0] = _mm512_reduce_add_ps(a30);
	out[3][1] = _mm512_reduce_add_ps(a31), out[3][2] = _mm512_reduce_add_ps(a32);
	for (; i < n; i++)
		for (int r = 0; r < 4; r++)
			for (int t = 0; t < 3; t++)
				out[r][t] += w[(size_t)r * ldw + i] * x[(size_t)t * ldx + i];
}

#define G5_DECL(i) __m512 c##i = _mm512_setzero_ps(), e##i = c##i;
#define G5_FMA(i)                                                                                            \
	{                                                                                                    \
		__m512 xv = _mm512_set1_ps(xp[(size_t)(i)*ldx + k]);                                         \
		c##i = _mm512_fmadd_ps(w0, xv, c##i);                                                        \
		e##i = _mm512_fmadd_ps(w1, xv, e##i);                                                        \
	}
#define G5_STORE(i)                                                                                          \
	{                                                                                                    \
		float *yp = y + (size_t)(t + (i)) * ldy;                                                     \
		__m512 v = c##i, u = e##i;                                                                   \
		if (acc) {                                                                                   \
			v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m0, yp));                                 \
			u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(m1, yp + 16));                            \
		}                                                                                            \
		_mm512_mask_storeu_ps(yp, m0, v);                                                            \
		_mm512_mask_storeu_ps(yp + 16, m1, u);                                                       \
	}
#define G5_LOADW                                                                                             \
	__m512 w0 = _mm512_load_ps(wp + (size_t)k * 32), w1 = _mm512_load_ps(wp + (size_t)k * 32 + 16);

/* statement macros in rows, which it cannot lay out stably: */
/* clang-format off */
AVX512 static void gemm32_avx512(const float *wp, int in, const float *x, size_t ldx, int T,
				 float *y, size_t ldy, int nr, bool acc)
{
	__mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1u);
	__mmask16 m1 = (__mmask16)(nr >= 32 ? 0xffffu : nr <= 16 ? 0u : (1u << (nr - 16)) - 1u);
	int t = 0;
	for (; t + 12 <= T; t += 12) {
		const float *xp = x + (size_t)t * ldx;
		G5_DECL(0) G5_DECL(1) G5_DECL(2) G5_DECL(3) G5_DECL(4) G5_DECL(5)
		G5_DECL(6) G5_DECL(7) G5_DECL(8) G5_DECL(9) G5_DECL(10) G5_DECL(11)
		for (int k = 0; k < in; k++) {
			G5_LOADW
			G5_FMA(0) G5_FMA(1) G5_FMA(2) G5_FMA(3) G5_FMA(4) G5_FMA(5)
			G5_FMA(6) G5_FMA(7) G5_FMA(8) G5_FMA(9) G5_FMA(10) G5_FMA(11)
		}
		G5_STORE(0) G5_STORE(1) G5_STORE(2) G5_STORE(3) G5_STORE(4) G5_STORE(5)
		G5_STORE(6) G5_STORE(7) G5_STORE(8) G5_STORE(9) G5_STORE(10) G5_STORE(11)
	}
	for (; t + 4 <= T; t += 4) {
		const float *xp = x + (size_t)t * ldx;
		G5_DECL(0) G5_DECL(1) G5_DECL(2) G5_DECL(3)
		for (int k = 0; k < in; k++) {
			G5_LOADW
			G5_FMA(0) G5_FMA(1) G5_FMA(2) G5_FMA(3)
		}
		G5_STORE(0) G5_STORE(1) G5_STORE(2) G5_STORE(3)
	}
	for (; t < T; t++) {
		const float *xp = x + (size_t)t * ldx;
		G5_DECL(0)
		for (int k = 0; k < in; k++) {
			G5_LOADW
			G5_FMA(0)
		}
		G5_STORE(0)
	}
}
/* clang-format on */
#endif /* HAVE_X86 */

/* ---- dispatch --------------------------------------------------------------------------- */

struct kernels {
	const char *name;
	float (*dot)(const float *, const float *, int);
	void (*bf16_row)(const uint16_t *, float *, int);
	void (*f16_row)(const uint16_t *, float *, int);
	void (*mk4x3)(const float *, size_t, const float *, size_t, int, float[4][3]);
	void (*axpby)(float *restrict, float, float, const float *restrict, int);
	void (*silu)(float *, const float *, int);
	void (*mul_silu)(float *, const float *, int);
	void (*vfma)(float *restrict, const float *restrict, const float *restrict, int);
	/* optional: prefill over a packed ROW_BLOCK-row block (NULL: mk4x3 tiles) */
	void (*gemm)(const float *, int, const float *, size_t, int, float *, size_t, int, bool);
};

static const struct kernels kernels_generic = {
	"generic",     dot_generic,  bf16_row_generic, f16_row_generic, mk4x3_generic,
	axpby_generic, silu_generic, mul_silu_generic, vfma_generic,	NULL,
};
#ifdef HAVE_X86
static const struct kernels kernels_avx2 = {
	"avx2",	    dot_avx2,  bf16_row_avx2, f16_row_avx2, mk4x3_avx2,
	axpby_avx2, silu_avx2, mul_silu_avx2, vfma_avx2,    gemm32_avx2,
};
static const struct kernels kernels_avx512 = {
	"avx512",     dot_avx2,	 bf16_row_avx512, f16_row_avx2, mk4x3_avx512,
	axpby_avx512, silu_avx2, mul_silu_avx2,	  vfma_avx2,	gemm32_avx512,
};
#endif

/* from the least to the most capable */
static const struct kernels *const variants[] = {
	&kernels_generic,
#ifdef HAVE_X86
	&kernels_avx2,
	&kernels_avx512,
#endif
};

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX2,
	CPU_ISA_AVX512,
#endif
};
_Static_assert(ARRAY_SIZE(isas) == ARRAY_SIZE(variants), "one instruction set per variant");

static inline const struct kernels *kern(void)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

const char *cpu_kernel_name(void)
{
	return kern()->name;
}

enum cpu_isa cpu_matmul_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

float cpu_dot(const float *a, const float *b, int n)
{
	return kern()->dot(a, b, n);
}

void cpu_axpy(float *y, float a, const float *x, int n)
{
	kern()->axpby(y, 1.0f, a, x, n);
}

void cpu_axpby(float *y, float a, float b, const float *x, int n)
{
	kern()->axpby(y, a, b, x, n);
}

void cpu_silu(float *y, const float *x, int n)
{
	kern()->silu(y, x, n);
}

void cpu_mul_silu(float *y, const float *z, int n)
{
	kern()->mul_silu(y, z, n);
}

void cpu_vfma(float *y, const float *a, const float *b, int n)
{
	kern()->vfma(y, a, b, n);
}

static void rows_to_f32(const struct kernels *k, enum tensor_dtype dt, const void *src, float *dst, int n)
{
	switch (dt) {
	case TENSOR_F32:
	default: /* the loader's U8/Q8/Q4 never reach the plain-weight kernels */
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case TENSOR_BF16:
		k->bf16_row(src, dst, n);
		break;
	case TENSOR_F16:
		k->f16_row(src, dst, n);
		break;
	}
}

static size_t dtype_size(enum tensor_dtype dt)
{
	return dt == TENSOR_F32 ? 4 : 2;
}

void cpu_tensor_to_f32(const struct tensor *t, size_t offset, size_t n, float *dst)
{
	const char *src = (const char *)t->data + offset * dtype_size(t->dtype);
	rows_to_f32(kern(), t->dtype, src, dst, (int)n);
}

/* ---- the matmul job ------------------------------------------------------------------------ */

struct matmul_job {
	const struct kernels *k;
	const char *w; /* row row0 of W */
	enum tensor_dtype dtype;
	size_t ldw;  /* elements between rows of W (= in) */
	int in, out; /* out = rows of this call */
	const float *x;
	size_t ldx;
	int T;
	float *y;
	size_t ldy;
	bool accumulate;
};

static inline void store(const struct matmul_job *j, int t, int r, float v)
{
	float *p = j->y + (size_t)t * j->ldy + r;
	*p = j->accumulate ? *p + v : v;
}

static void matmul_task(void *ctx, int task, int thread)
{
	const struct matmul_job *j = ctx;
	const struct kernels *k = j->k;
	int r0 = task * ROW_BLOCK, r1 = MIN(r0 + ROW_BLOCK, j->out);
	size_t esz = dtype_size(j->dtype);
	float *scratch = cpu_scratch(thread);
	int nr = r1 - r0;

	if (k->gemm && j->T >= GEMM_MIN_T) {
		/* pack the block k-major (zero rows past the end): convert the rows, then transpose
		 * 16 columns at a time so both sides stay in L1 */
		float *wp = scratch, *rows = scratch + (size_t)ROW_BLOCK * j->in;
		for (int r = 0; r < nr; r++)
			rows_to_f32(k, j->dtype, j->w + (size_t)(r0 + r) * j->ldw * esz,
				    rows + (size_t)r * j->in, j->in);
		for (int c0 = 0; c0 < j->in; c0 += 8) {
			int c1 = MIN(c0 + 8, j->in);
			for (int r = 0; r < ROW_BLOCK; r++) {
				const float *src = rows + (size_t)r * j->in;
				for (int c = c0; c < c1; c++)
					wp[(size_t)c * ROW_BLOCK + r] = r < nr ? src[c] : 0.0f;
			}
		}
		k->gemm(wp, j->in, j->x, j->ldx, j->T, j->y + r0, j->ldy, nr, j->accumulate);
		return;
	}

	/* Convert the row block once (fp32 weights are used in place). */
	const float *wf;
	size_t ldwf;
	if (j->dtype == TENSOR_F32) {
		wf = (const float *)j->w + (size_t)r0 * j->ldw;
		ldwf = j->ldw;
	} else {
		for (int r = 0; r < nr; r++)
			rows_to_f32(k, j->dtype, j->w + (size_t)(r0 + r) * j->ldw * esz,
				    scratch + (size_t)r * j->in, j->in);
		wf = scratch;
		ldwf = (size_t)j->in;
	}
	for (int t0 = 0; t0 < j->T; t0 += TOKEN_BLOCK) {
		int t1 = MIN(t0 + TOKEN_BLOCK, j->T);
		int r = 0;
		for (; r + 4 <= nr; r += 4) {
			int t = t0;
			for (; t + 3 <= t1; t += 3) {
				float o[4][3];
				k->mk4x3(wf + (size_t)r * ldwf, ldwf, j->x + (size_t)t * j->ldx, j->ldx,
					 j->in, o);
				for (int q = 0; q < 4; q++)
					for (int u = 0; u < 3; u++)
						store(j, t + u, r0 + r + q, o[q][u]);
			}
			for (; t < t1; t++)
				for (int q = 0; q < 4; q++)
					store(j, t, r0 + r + q,
					      k->dot(wf + (size_t)(r + q) * ldwf, j->x + (size_t)t * j->ldx,
						     j->in));
		}
		for (; r < nr; r++)
			for (int t = t0; t < t1; t++)
				store(j, t, r0 + r,
				      k->dot(wf + (size_t)r * ldwf, j->x + (size_t)t * j->ldx, j->in));
	}
}

size_t cpu_gemm_pack_floats(int K)
{
	return (size_t)K * ROW_BLOCK;
}

void cpu_gemm_f32(const float *a, size_t lda, const float *b, size_t ldb, bool b_trans, int T, int K, int N,
		  float *c, size_t ldc, bool accumulate, float *pack)
{
	const struct kernels *k = kern();
	if (!k->gemm) {
		for (int t = 0; t < T; t++)
			for (int n = 0; n < N; n++) {
				float acc = 0;
				for (int q = 0; q < K; q++)
					acc += a[(size_t)t * lda + q] *
					       (b_trans ? b[(size_t)n * ldb + q] : b[(size_t)q * ldb + n]);
				float *o = c + (size_t)t * ldc + n;
				*o = accumulate ? *o + acc : acc;
			}
		return;
	}
	for (int n0 = 0; n0 < N; n0 += ROW_BLOCK) {
		int nr = MIN(ROW_BLOCK, N - n0);
		for (int q = 0; q < K; q++) {
			float *dst = pack + (size_t)q * ROW_BLOCK;
			if (b_trans) {
				for (int r = 0; r < nr; r++)
					dst[r] = b[(size_t)(n0 + r) * ldb + q];
			} else {
				memcpy(dst, b + (size_t)q * ldb + n0, (size_t)nr * sizeof(float));
			}
			for (int r = nr; r < ROW_BLOCK; r++)
				dst[r] = 0.0f;
		}
		k->gemm(pack, K, a, lda, T, c + n0, ldc, nr, accumulate);
	}
}

size_t cpu_matmul_scratch_bytes(int in)
{
	return (size_t)(2 * ROW_BLOCK) * (size_t)in * sizeof(float);
}

int cpu_matmul_rows(const struct tensor *w, int row0, int nrows, const float *x, size_t ldx, int T, float *y,
		    size_t ldy, bool accumulate)
{
	int in = (int)w->shape[w->ndim - 1];
	if (nrows <= 0 || T <= 0)
		return 0;
	if (T <= CPU_GEMV_T)
		return cpu_gemv_rows(w, row0, nrows, x, ldx, T, y, ldy, accumulate, false);
	int r = cpu_reserve_scratch(cpu_matmul_scratch_bytes(in));
	if (r < 0)
		return r;
	struct matmul_job j = {
		.k = kern(),
		.w = (const char *)w->data + (size_t)row0 * (size_t)in * dtype_size(w->dtype),
		.dtype = w->dtype,
		.ldw = (size_t)in,
		.in = in,
		.out = nrows,
		.x = x,
		.ldx = ldx,
		.T = T,
		.y = y,
		.ldy = ldy,
		.accumulate = accumulate,
	};
	cpu_parallel_for_work((nrows + ROW_BLOCK - 1) / ROW_BLOCK, matmul_task, &j, (double)nrows * in * T);
	return 0;
}

int cpu_matmul(const struct tensor *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
	       bool accumulate)
{
	return cpu_matmul_rows(w, 0, (int)w->shape[0], x, ldx, T, y, ldy, accumulate);
}
