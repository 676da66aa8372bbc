/* Decode GEMV, AVX-512F variant (compiled with -mavx512f -mavx2 -mfma -mf16c; cpu_gemv.c calls it
 * only where cpuid says the CPU runs it).
 *
 * Each block streams NR consecutive weight rows against the T activation rows: one 16-lane fp32
 * accumulator per (row, token), so every weight byte is loaded once per call and the NR * T
 * multiply-add chains are independent. The rows of a block lie back to back in memory, and the
 * prefetch runs one block ahead on every row (one row at a time, one token: CPU_GEMV_AHEAD bytes
 * ahead of it), so a thread's whole contiguous range is one stream. Per row and token the sum is
 * the 16-lane accumulator reduced, then the columns past the last multiple of 16 in order: the
 * order the previous dot4 kernel used, so fp32 results of a single token are unchanged. */
#include "cpu_gemv.h"

#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* how far ahead of the stream the prefetch reads: the same columns of the next block's rows */
#define PREFETCH_BLOCKS 1

INL __m512 load_w(const void *w, size_t off, enum tensor_dtype dt)
{
	if (dt == TENSOR_BF16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off));
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	if (dt == TENSOR_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off)));
	return _mm512_loadu_ps((const float *)w + off);
}

INL float scalar_w(const void *w, size_t off, enum tensor_dtype dt)
{
	if (dt == TENSOR_BF16)
		return bf16_to_f32(((const uint16_t *)w)[off]);
	if (dt == TENSOR_F16)
		return cpu_f16_to_f32(((const uint16_t *)w)[off]);
	return ((const float *)w)[off];
}

/* f32_to_bf16() on 16 lanes, widened back: round to nearest even, NaN kept (quieted) */
INL __m512 round_bf16(__m512 v)
{
	__m512i u = _mm512_castps_si512(v);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
	__mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
	r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
	return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

INL __m512 load_x(const struct cpu_gemv_args *a, int t, int i, bool xbf)
{
	__m512 v = _mm512_loadu_ps(a->x + (size_t)t * a->ldx + i);
	return xbf ? round_bf16(v) : v;
}

INL float scalar_x(const struct cpu_gemv_args *a, int t, int i, bool xbf)
{
	float v = a->x[(size_t)t * a->ldx + i];
	return xbf ? bf16_to_f32(f32_to_bf16(v)) : v;
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const enum tensor_dtype dt,
	       const bool xbf)
{
	const size_t esz = dt == TENSOR_F32 ? 4 : 2;
	const char *w = (const char *)a->w;
	const size_t ldw = a->ldw, base = (size_t)r * ldw, ahead = (size_t)(PREFETCH_BLOCKS * NR) * ldw;
	const int n = a->in;
	__m512 acc[8][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512 xv[CPU_GEMV_KERNEL_T];
		for (int t = 0; t < T; t++)
			xv[t] = load_x(a, t, i, xbf);
		if (NR > 1 && (esz == 4 || (i & 31) == 0))
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + (base + ahead + (size_t)q * ldw + (size_t)i) * esz,
					     _MM_HINT_T0);
		if (NR == 1 && (esz == 4 || (i & 31) == 0))
			cpu_gemv_prefetch(w + (base + (size_t)i) * esz, 64);
		for (int q = 0; q < NR; q++) {
			__m512 wv = load_w(w, base + (size_t)q * ldw + (size_t)i, dt);
			for (int t = 0; t < T; t++)
				acc[q][t] = _mm512_fmadd_ps(wv, xv[t], acc[q][t]);
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(acc[q][t]);
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

/* rows in flight per block: one for one token (a thread's range one stream, asked for
 * CPU_GEMV_AHEAD bytes ahead; bf16 weights, the AMD EPYC capped to this variant,
 * docs/benchmarks.md "software prefetch 8 KiB ahead": `holo-bench gemv` 65536 x 1024 on one
 * thread 77% -> 87-89% of the read pass where 8 rows interleaved with the next 8 prefetched
 * were, on 2 threads 76-77% -> 69-85%, and bf16 decode 66-73% -> 75-76%; f16 and f32 weights
 * take the same path, not measured; each row sums in the same order whatever the rows in
 * flight, so the bits did not change), 4 with more tokens (16 accumulators of 32 registers) */
#define INSTANCES(suffix, dt, xbf)                                                                           \
	NOINL void t1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 1, 1, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 2, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t3_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 3, dt, xbf);                                                              \
	}                                                                                                    \
	NOINL void t4_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 4, dt, xbf);                                                              \
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

void cpu_gemv_avx512_f32(const struct cpu_gemv_args *a, int r0, int r1)
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

void cpu_gemv_avx512_bf16(const struct cpu_gemv_args *a, int r0, int r1)
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

const struct cpu_gemv_variant cpu_gemv_avx512 = {
	.name = "avx512",
	.f32 = cpu_gemv_avx512_f32,
	.bf16 = cpu_gemv_avx512_bf16,
	.fp8 = cpu_gemv_avx512_fp8,
	.fp8_to_bf16 = cpu_gemv_avx512_fp8_row_to_bf16,
	.q8_to_bf16 = cpu_gemv_avx512_q8_to_bf16,
	.q4_to_bf16 = cpu_gemv_avx512_q4_to_bf16,
	.q8 = cpu_gemv_avx512_q8,
	.q4 = cpu_gemv_avx512_q4,
	.q8_i8 = cpu_gemv_avx2_q8_i8,
	.q4_i8 = cpu_gemv_avx2_q4_i8,
	.q4_tile_i8 = cpu_gemv_avx512_q4_tile,
	.q8_tile_i8 = cpu_gemv_avx512_q8_tile,
	.tile_records = cpu_gemv_avx512_tile_records,
	.quant_x = cpu_gemv_avx512_quantize_x,
};
