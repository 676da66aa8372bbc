/* Decode GEMV on fp8 weights (quant.h's QUANT_FP8: e4m3 codes and a per-row fp32 scale),
 * AVX-512F variant (compiled with -mavx512f -mavx2 -mfma -mf16c; cpu_gemv.c calls it only where
 * cpuid says the CPU runs AVX-512F; the AVX512-BF16 variant shares it).
 *
 * The quantized kernels' structure (cpu_gemv_quant_avx512.c): NR consecutive rows against T
 * tokens, one 16-lane accumulator per (row, token), the rows NR ahead prefetched, so a thread's
 * range is one stream. No CPU computes in e4m3: each block of 32 codes is widened in registers,
 * 16 at a time, to fp16 bits, sign << 15 | (c & 0x7f) << 7, which is exactly the code's value
 * times 2^-8 (e4m3's 4 exponent bits of bias 7 land in fp16's field of bias 15, its subnormals
 * on fp16's), then to fp32 (vcvtph2ps, exact) and multiplied by the row's scale times 2^8: one
 * rounding, the product quant_row_to_f32() forms. The activations stay fp32, so a result differs
 * from the exact product of the dequantized weights by fp32 summation only. NaN codes never get
 * here (the loader refuses them); the record's padding holds zero codes, and the last block's
 * columns past `in` are masked off the activation loads. */
#include "cpu_gemv.h"

#include <immintrin.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL __mmask16 lanes(int n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 16 e4m3 codes -> their values times 2^-8, as fp32. The codes sign-extended to 16 bits and
 * shifted left by 7 put the magnitude's 7 bits at fp16's bits 7..13 and the sign in bits 14
 * and 15; clearing bit 14 leaves sign << 15 | (c & 0x7f) << 7 in three instructions (the
 * fields taken apart and joined took six, which bounded fp8's decode well below the read
 * bandwidth: docs/quantization.md, "fp8"). */
INL __m512 widen16(const uint8_t *c)
{
	__m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)c));
	__m256i h = _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16((short)0xbfff));
	return _mm512_cvtph_ps(h);
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int n = a->in, nb = (n + 31) / 32;
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 32);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	__m512 acc[8][CPU_GEMV_KERNEL_T], s[8];
	for (int q = 0; q < NR; q++) {
		/* the row's scale times 2^8 (exact: a power of two, within fp32's range) */
		s[q] = _mm512_set1_ps(*(const float *)(w + (size_t)q * ldw + soff) * 256.0f);
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const int k = b * 32, rem = n - k;
		__m512 x0[CPU_GEMV_KERNEL_T], x1[CPU_GEMV_KERNEL_T];
		for (int t = 0; t < T; t++) {
			const float *p = a->x + (size_t)t * a->ldx + k;
			if (rem >= 32) {
				x0[t] = _mm512_loadu_ps(p);
				x1[t] = _mm512_loadu_ps(p + 16);
			} else {
				x0[t] = _mm512_maskz_loadu_ps(lanes(rem), p);
				x1[t] = _mm512_maskz_loadu_ps(lanes(rem - 16), p + 16);
			}
		}
		/* one line of codes per 64 bytes */
		if ((k & 63) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + (size_t)k, _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			const uint8_t *c = (const uint8_t *)(w + (size_t)q * ldw) + k;
			__m512 w0 = _mm512_mul_ps(widen16(c), s[q]);
			__m512 w1 = _mm512_mul_ps(widen16(c + 16), s[q]);
			for (int t = 0; t < T; t++) {
				acc[q][t] = _mm512_fmadd_ps(w0, x0[t], acc[q][t]);
				acc[q][t] = _mm512_fmadd_ps(w1, x1[t], acc[q][t]);
			}
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float v = _mm512_reduce_add_ps(acc[q][t]);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + v : v;
		}
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block(a, r, NR, T);
	for (; r < r1; r++)
		block(a, r, 1, T);
}

/* rows in flight per block: 8 for one token, 4 with more (16 accumulators of 32 registers) */
NOINL void t1(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 8, 1);
}

NOINL void t2(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 4, 2);
}

NOINL void t3(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 4, 3);
}

NOINL void t4(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 4, 4);
}

void cpu_gemv_avx512_fp8(const struct cpu_gemv_args *a, int r0, int r1)
{
	switch (a->T) {
	case 1:
		t1(a, r0, r1);
		break;
	case 2:
		t2(a, r0, r1);
		break;
	case 3:
		t3(a, r0, r1);
		break;
	default:
		t4(a, r0, r1);
		break;
	}
}

/* One fp8 row dequantized and rounded to bf16 (nearest even), for the prompt's products
 * (cpu_quant_rows_to_bf16): the kernels' widening, then the rounding as f32_to_bf16() (the
 * values are finite: no NaN code reaches a record), so the same bits as quant_row_to_f32()
 * then f32_to_bf16(). 16 codes at a time; the record's padding makes the last load safe. */
void cpu_gemv_avx512_fp8_row_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	const uint8_t *c = (const uint8_t *)row;
	const __m512 s = _mm512_set1_ps(*quant_fp8_scale(row, cols) * 256.0f);
	const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	for (int64_t k = 0; k < cols; k += 16) {
		__m512i u = _mm512_castps_si512(_mm512_mul_ps(widen16(c + k), s));
		u = _mm512_add_epi32(u,
				     _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
		__m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
		if (cols - k >= 16) {
			_mm256_storeu_si256((__m256i *)(out + k), h);
		} else {
			uint16_t tmp[16];
			_mm256_storeu_si256((__m256i *)tmp, h);
			for (int64_t i = 0; i < cols - k; i++)
				out[k + i] = tmp[i];
		}
	}
}
