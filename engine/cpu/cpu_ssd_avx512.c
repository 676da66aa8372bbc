/* The SSD scan's row kernels on AVX-512 (cpu_ssd.h), compiled twice: with -mavx512bf16
 * (cpu_ssd_avx512bf16: bf16 rounding by vcvtneps2bf16, which flushes subnormals to zero) and
 * without (cpu_ssd_avx512: the same rounding in integer steps, as cpu_f32_to_bf16 does). The
 * scan picks one where cpuid says the CPU runs it. Tails of fewer than 16 are masked. */
#include "cpu_ssd.h"

#include <immintrin.h>
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

static void mask_row(uint16_t *dst, const float *cb, float base, const float *cum,
		     const float *dth, int l, int L)
{
	const __m512 vb = _mm512_set1_ps(base);
	for (int s = 0; s < L; s += 16) {
		__m256i b = _mm256_setzero_si256();
		if (s <= l) {
			__mmask16 m = first(l + 1 - s);
			__m512 e = cpu_vexp512(_mm512_sub_ps(vb, _mm512_maskz_loadu_ps(m, cum + s)));
			e = _mm512_mul_ps(e, _mm512_maskz_loadu_ps(m, dth + s));
			b = bf16x16(_mm512_maskz_mul_ps(m, _mm512_maskz_loadu_ps(m, cb + s), e));
		}
		store_bf16(dst + s, b, L - s);
	}
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

static void combine(float *o, const float *yd, float e, const float *yo, float dk, const float *x,
		    int n)
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
	.mask_row = mask_row,
	.pack_x = pack_x,
	.round_bf16 = round_bf16,
	.combine = combine,
	.decay_add = decay_add,
};
