/* Decode GEMV, AVX2+FMA+F16C variant (compiled with -mavx2 -mfma -mf16c; cpu_gemv.c calls it only
 * where cpuid says the CPU runs it).
 *
 * The AVX-512F variant's structure on 8 lanes: NR consecutive weight rows against T tokens, one
 * accumulator per (row, token), the next block's rows prefetched; NR is 4 for one token and 2
 * with more, so the accumulators, activations and one weight vector fit the 16 registers. */
#include "cpu_gemv.h"

#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL __m256 widen_bf16(const uint16_t *p)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INL __m256 load_w(const void *w, size_t off, enum tensor_dtype dt)
{
	if (dt == TENSOR_BF16)
		return widen_bf16((const uint16_t *)w + off);
	if (dt == TENSOR_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + off)));
	return _mm256_loadu_ps((const float *)w + off);
}

INL float scalar_w(const void *w, size_t off, enum tensor_dtype dt)
{
	if (dt == TENSOR_BF16)
		return bf16_to_f32(((const uint16_t *)w)[off]);
	if (dt == TENSOR_F16)
		return cpu_f16_to_f32(((const uint16_t *)w)[off]);
	return ((const float *)w)[off];
}

/* f32_to_bf16() on 8 lanes, widened back: round to nearest even, NaN kept (quieted) */
INL __m256 round_bf16(__m256 v)
{
	__m256i u = _mm256_castps_si256(v);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
	__m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
	r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q),
						 _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
	return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

INL __m256 load_x(const struct cpu_gemv_args *a, int t, int i, bool xbf)
{
	__m256 v = _mm256_loadu_ps(a->x + (size_t)t * a->ldx + i);
	return xbf ? round_bf16(v) : v;
}

INL float scalar_x(const struct cpu_gemv_args *a, int t, int i, bool xbf)
{
	float v = a->x[(size_t)t * a->ldx + i];
	return xbf ? bf16_to_f32(f32_to_bf16(v)) : v;
}

INL float hsum(__m256 v)
{
	__m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
	lo = _mm_add_ps(lo, hi);
	lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
	lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
	return _mm_cvtss_f32(lo);
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const enum tensor_dtype dt,
	       const bool xbf)
{
	const size_t esz = dt == TENSOR_F32 ? 4 : 2;
	const char *w = (const char *)a->w;
	const size_t ldw = a->ldw, base = (size_t)r * ldw, ahead = (size_t)NR * ldw;
	const int n = a->in;
	__m256 acc[4][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv[CPU_GEMV_KERNEL_T];
		for (int t = 0; t < T; t++)
			xv[t] = load_x(a, t, i, xbf);
		if ((i & (esz == 4 ? 15 : 31)) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + (base + ahead + (size_t)q * ldw + (size_t)i) * esz,
					     _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			__m256 wv = load_w(w, base + (size_t)q * ldw + (size_t)i, dt);
			for (int t = 0; t < T; t++)
				acc[q][t] = _mm256_fmadd_ps(wv, xv[t], acc[q][t]);
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = hsum(acc[q][t]);
			for (int k = i; k < n; k++)
				s += scalar_w(w, base + (size_t)q * ldw + (size_t)k, dt) *
				     scalar_x(a, t, k, xbf);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T,
	      const enum tensor_dtype dt, const bool xbf)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block(a, r, NR, T, dt, xbf);
	for (; r < r1; r++)
		block(a, r, 1, T, dt, xbf);
}

#define INSTANCES(suffix, dt, xbf)                                                                           \
	NOINL void t1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 1, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 2, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t3_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 3, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t4_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 4, dt, xbf);                                                              \
	}                                                                                                    \
	static void gemv_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                             \
	{                                                                                                    \
		switch (a->T) {                                                                              \
		case 1:                                                                                      \
			t1_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		case 2:                                                                                      \
			t2_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		case 3:                                                                                      \
			t3_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		default:                                                                                     \
			t4_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		}                                                                                            \
	}

INSTANCES(bf16, TENSOR_BF16, false)
INSTANCES(f16, TENSOR_F16, false)
INSTANCES(f32, TENSOR_F32, false)
INSTANCES(bf16x, TENSOR_BF16, true)
INSTANCES(f16x, TENSOR_F16, true)
INSTANCES(f32x, TENSOR_F32, true)

static void gemv_f32act(const struct cpu_gemv_args *a, int r0, int r1)
{
	switch (a->dtype) {
	case TENSOR_BF16:
		gemv_bf16(a, r0, r1);
		break;
	case TENSOR_F16:
		gemv_f16(a, r0, r1);
		break;
	case TENSOR_F32:
	default: /* the loader's U8/Q8/Q4 never reach the plain-weight kernels */
		gemv_f32(a, r0, r1);
		break;
	}
}

static void gemv_bf16act(const struct cpu_gemv_args *a, int r0, int r1)
{
	switch (a->dtype) {
	case TENSOR_BF16:
		gemv_bf16x(a, r0, r1);
		break;
	case TENSOR_F16:
		gemv_f16x(a, r0, r1);
		break;
	case TENSOR_F32:
	default: /* the loader's U8/Q8/Q4 never reach the plain-weight kernels */
		gemv_f32x(a, r0, r1);
		break;
	}
}

const struct cpu_gemv_variant cpu_gemv_avx2 = {
	.name = "avx2",
	.f32 = gemv_f32act,
	.bf16 = gemv_bf16act,
	.fp8 = cpu_gemv_avx2_fp8,
	.fp8_to_bf16 = cpu_gemv_avx2_fp8_row_to_bf16,
	.q8_to_bf16 = cpu_gemv_avx2_q8_to_bf16,
	.q4_to_bf16 = cpu_gemv_avx2_q4_to_bf16,
	.q8 = cpu_gemv_avx2_q8,
	.q4 = cpu_gemv_avx2_q4,
	.q8_i8 = cpu_gemv_avx2_q8_i8,
	.q4_i8 = cpu_gemv_avx2_q4_i8,
	.q4_tile_i8 = cpu_gemv_avx2_q4_tile,
	.q8_tile_i8 = cpu_gemv_avx2_q8_tile,
	.tile_records = cpu_gemv_avx2_tile_records,
	.quant_x = cpu_gemv_avx2_quantize_x,
};
