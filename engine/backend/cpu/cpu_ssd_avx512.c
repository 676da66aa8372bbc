/* The SSD scan's row kernels on AVX-512 (cpu_ssd.h), compiled twice: with -mavx512bf16
 * (cpu_ssd_avx512bf16: bf16 rounding by vcvtneps2bf16, which flushes subnormals to zero) and
 * without (cpu_ssd_avx512: the same rounding in integer steps, as cpu_f32_to_bf16 does). The
 * scan picks one where cpuid says the CPU runs it. Tails of fewer than 16 are masked. */
#include "cpu_ssd.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "cpu_vexp.h"

#ifdef __AVX512BF16__
#define VARIANT cpu_ssd_avx512bf16
static inline __m256i bf16x16(__m512 v)
{
	return (__m256i)_mm512_cvtneps_pbh(v);
}
#else
#define VARIANT cpu_ssd_avx512
/* round to nearest even; a NaN stays a quiet NaN with its sign */
static inline __m256i bf16x16(__m512 v)
{
	__m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
	__m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
				     _mm512_and_si512(hi, _mm512_set1_epi32(1)));
	r = _mm512_srli_epi32(r, 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						_mm512_set1_epi32(0x7f800000));
	r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
	return _mm512_cvtepi32_epi16(r);
}
#endif

static inline __mmask16 first(int n)
{
	return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* the first n of 16 bf16 */
static inline void store_bf16(uint16_t *dst, __m256i v, int n)
{
	if (n >= 16) {
		_mm256_storeu_si256((__m256i *)dst, v);
		return;
	}
	uint16_t b[16];
	_mm256_storeu_si256((__m256i *)b, v);
	memcpy(dst, b, (size_t)n * sizeof(uint16_t));
}

static void decay(float *out, float base, const float *cum, const float *dth, int n)
{
	const __m512 vb = _mm512_set1_ps(base);
	for (int s = 0; s < n; s += 16) {
		__mmask16 m = first(n - s);
		__m512 e = cpu_vexp512(_mm512_sub_ps(vb, _mm512_maskz_loadu_ps(m, cum + s)));
		_mm512_mask_storeu_ps(out + s, m, _mm512_mul_ps(e, _mm512_maskz_loadu_ps(m, dth + s)));
	}
}

/* Rows in blocks of 16 from b0: exp(cum[l] - cum[s]) = exp(cum[l] - cum[b0]) exp(cum[b0] -
 * cum[s]), both factors <= 1 for s < b0 <= l (cum does not increase), so the columns left of the
 * block take one exp per column per block instead of one per element; the 16 x 16 block on the
 * diagonal takes its exps directly (there the second factor would exceed 1). */
static void mask(uint16_t *dst, const float *cb, const float *cum, const float *dth, int L, float *tmp)
{
	for (int b0 = 0; b0 < L; b0 += 16) {
		int b1 = b0 + 16 < L ? b0 + 16 : L;
		const __m512 vb = _mm512_set1_ps(cum[b0]);
		/* tmp[s] = exp(cum[b0] - cum[s]) dt[s] for s < b0 */
		for (int s = 0; s < b0; s += 16)
			_mm512_storeu_ps(tmp + s,
					 _mm512_mul_ps(cpu_vexp512(
							       _mm512_sub_ps(vb, _mm512_loadu_ps(cum + s))),
						       _mm512_loadu_ps(dth + s)));
		for (int l = b0; l < b1; l++) {
			uint16_t *d = dst + (size_t)l * L;
			const float *c = cb + (size_t)l * L;
			const __m512 u = _mm512_set1_ps(expf(cum[l] - cum[b0]));
			for (int s = 0; s < b0; s += 16)
				store_bf16(d + s,
					   bf16x16(_mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(c + s), u),
								 _mm512_loadu_ps(tmp + s))),
					   16);
			__mmask16 m = first(l + 1 - b0);
			__m512 e = cpu_vexp512(
				_mm512_sub_ps(_mm512_set1_ps(cum[l]), _mm512_maskz_loadu_ps(m, cum + b0)));
			e = _mm512_mul_ps(e, _mm512_maskz_loadu_ps(m, dth + b0));
			store_bf16(d + b0,
				   bf16x16(_mm512_maskz_mul_ps(m, _mm512_maskz_loadu_ps(m, c + b0), e)),
				   L - b0);
			for (int s = b0 + 16; s < L; s += 16)
				store_bf16(d + s, _mm256_setzero_si256(), L - s);
		}
	}
}

/* 16 x 16 in registers: unpacks of row pairs, of pair pairs, then two rounds of 128-bit lane
 * shuffles; the edges of a matrix off the 16 grid element by element */
static void transpose(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols)
{
	int r16 = rows & ~15, c16 = cols & ~15;
	for (int r0 = 0; r0 < r16; r0 += 16)
		for (int c0 = 0; c0 < c16; c0 += 16) {
			__m512 a[16], t[16];
			for (int i = 0; i < 16; i++)
				a[i] = _mm512_loadu_ps(src + (size_t)(r0 + i) * lds + c0);
			for (int i = 0; i < 16; i += 2) {
				t[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
				t[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
			}
			/* a[4g + k], lane q: column 4q + k of rows 4g..4g+3 */
			for (int g = 0; g < 4; g++) {
				__m512d x0 = _mm512_castps_pd(t[4 * g]), x1 = _mm512_castps_pd(t[4 * g + 1]);
				__m512d x2 = _mm512_castps_pd(t[4 * g + 2]),
					x3 = _mm512_castps_pd(t[4 * g + 3]);
				a[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
				a[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
				a[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
				a[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
			}
			for (int k = 0; k < 4; k++) {
				__m512 p = _mm512_shuffle_f32x4(a[k], a[4 + k], 0x88);
				__m512 q = _mm512_shuffle_f32x4(a[k], a[4 + k], 0xdd);
				__m512 p2 = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0x88);
				__m512 q2 = _mm512_shuffle_f32x4(a[8 + k], a[12 + k], 0xdd);
				t[k] = _mm512_shuffle_f32x4(p, p2, 0x88);      /* column k */
				t[4 + k] = _mm512_shuffle_f32x4(q, q2, 0x88);  /* column 4 + k */
				t[8 + k] = _mm512_shuffle_f32x4(p, p2, 0xdd);  /* column 8 + k */
				t[12 + k] = _mm512_shuffle_f32x4(q, q2, 0xdd); /* column 12 + k */
			}
			for (int c = 0; c < 16; c++)
				_mm512_storeu_ps(dst + (size_t)(c0 + c) * ldd + r0, t[c]);
		}
	for (int r = 0; r < rows; r++)
		for (int c = r < r16 ? c16 : 0; c < cols; c++)
			dst[(size_t)c * ldd + r] = src[(size_t)r * lds + c];
}

static void pack_x(uint16_t *x16, uint16_t *xc16, const float *x, float k, int n)
{
	const __m512 vk = _mm512_set1_ps(k);
	for (int i = 0; i < n; i += 16) {
		__m512 v = _mm512_maskz_loadu_ps(first(n - i), x + i);
		store_bf16(x16 + i, bf16x16(v), n - i);
		store_bf16(xc16 + i, bf16x16(_mm512_mul_ps(v, vk)), n - i);
	}
}

static void round_bf16(uint16_t *dst, const float *src, int n)
{
	for (int i = 0; i < n; i += 16)
		store_bf16(dst + i, bf16x16(_mm512_maskz_loadu_ps(first(n - i), src + i)), n - i);
}

static void combine(float *o, const float *yd, float e, const float *yo, float dk, const float *x, int n)
{
	const __m512 ve = _mm512_set1_ps(e), vd = _mm512_set1_ps(dk);
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = first(n - i);
		__m512 r = _mm512_fmadd_ps(ve, _mm512_maskz_loadu_ps(m, yo + i),
					   _mm512_maskz_loadu_ps(m, yd + i));
		r = _mm512_fmadd_ps(vd, _mm512_maskz_loadu_ps(m, x + i), r);
		_mm512_mask_storeu_ps(o + i, m, r);
	}
}

static void decay_add(float *st, float e, const float *sl, int n)
{
	const __m512 ve = _mm512_set1_ps(e);
	for (int i = 0; i < n; i += 16) {
		__mmask16 m = first(n - i);
		_mm512_mask_storeu_ps(st + i, m,
				      _mm512_fmadd_ps(ve, _mm512_maskz_loadu_ps(m, st + i),
						      _mm512_maskz_loadu_ps(m, sl + i)));
	}
}

const struct cpu_ssd_kernels VARIANT = {
	.decay = decay,
	.mask = mask,
	.transpose = transpose,
	.pack_x = pack_x,
	.round_bf16 = round_bf16,
	.combine = combine,
	.decay_add = decay_add,
};
