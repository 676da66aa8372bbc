/* Decode GEMV on quantized weights (quant.h: q8, q4), AVX-512F variant (compiled with -mavx512f
 * -mavx2 -mfma -mf16c; cpu_gemv.c calls it only where cpuid says the CPU runs AVX-512F).
 *
 * The bf16 kernels' structure (cpu_gemv_avx512.c): NR consecutive rows against T tokens, one
 * 16-lane accumulator per (row, token), the rows NR ahead prefetched, so a thread's range is one
 * stream. Per block of 32 columns a row's codes are widened in registers to the dequantized
 * weights, exactly: q8 d * q (an fp16 scale times an int8 is exact in fp32), q4 fma(d, q, m)
 * from 16 bytes zero-extended to 16 lanes, the low nibbles masked and the high ones shifted (one
 * rounding, as quant_row_to_f32()). The activations stay fp32, so the products and sums are the
 * fp32 kernels': a result differs from the exact product of the dequantized weights by fp32
 * summation only. The last block's columns past `in` are masked off the activation loads. */
#include "cpu_gemv.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL __mmask16 lanes(int n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* the two 16-column halves of block b's activations for every token; rem < 32 masks the tail */
INL void load_x(const struct cpu_gemv_args *a, int k, int rem, const int T, __m512 *x0, __m512 *x1)
{
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
}

/* block b of a row as two 16-lane halves of dequantized weights */
INL void weights(const char *row, size_t soff, int b, const enum quant_format fmt, __m512 *w0, __m512 *w1)
{
	if (fmt == QUANT_Q8) {
		const int8_t *c = (const int8_t *)row + (size_t)b * 32;
		__m512 d = _mm512_set1_ps(_cvtsh_ss(((const uint16_t *)(row + soff))[b]));
		*w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(
					    _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)c))),
				    d);
		*w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(
					    _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c + 16)))),
				    d);
	} else {
		const uint8_t *c = (const uint8_t *)row + (size_t)b * 16;
		const uint16_t dz = ((const uint16_t *)(row + soff))[b];
		const float dd = _cvtsh_ss(quant_q4_d16(dz));
		__m512 d = _mm512_set1_ps(dd), m = _mm512_set1_ps(quant_q4_m(dd, dz));
		__m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)c));
		__m512i lo = _mm512_and_si512(v, _mm512_set1_epi32(15));
		__m512i hi = _mm512_srli_epi32(v, 4);
		*w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, m);
		*w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, m);
	}
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const enum quant_format fmt)
{
	const int n = a->in, nb = (n + 31) / 32;
	const size_t ldw = a->ldw, cb = fmt == QUANT_Q8 ? 32 : 16;
	const size_t soff = quant_round_align((size_t)nb * cb);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	__m512 acc[8][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m512 x0[CPU_GEMV_KERNEL_T], x1[CPU_GEMV_KERNEL_T];
		load_x(a, b * 32, n - b * 32, T, x0, x1);
		/* one line of codes per 64 bytes */
		if ((((size_t)b * cb) & 63) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + (size_t)b * cb, _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			__m512 w0, w1;
			weights(w + (size_t)q * ldw, soff, b, fmt, &w0, &w1);
			for (int t = 0; t < T; t++) {
				acc[q][t] = _mm512_fmadd_ps(w0, x0[t], acc[q][t]);
				acc[q][t] = _mm512_fmadd_ps(w1, x1[t], acc[q][t]);
			}
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(acc[q][t]);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T,
	      const enum quant_format fmt)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block(a, r, NR, T, fmt);
	for (; r < r1; r++)
		block(a, r, 1, T, fmt);
}

/* rows in flight per block: 8 for one token, 4 with more (16 accumulators of 32 registers) */
#define INSTANCES(suffix, fmt)                                                                               \
	NOINL void t1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 8, 1, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 2, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t3_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 3, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t4_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 4, fmt);                                                                  \
	}                                                                                                    \
	void cpu_gemv_avx512_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                         \
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

INSTANCES(q8, QUANT_Q8)
INSTANCES(q4, QUANT_Q4)

/* ---- a row dequantized to bf16 (the prompt's products: cpu_quant_rows_to_bf16) ------------ */

/* fp32 to bf16, to nearest even, in integers (AVX-512F has no vcvtne2ps2bf16; the values are
 * finite dequantized weights, so no NaN case): f32_to_bf16()'s bits */
INL __m256i round_bf16(__m512 w)
{
	__m512i u = _mm512_castps_si512(w);
	__m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	u = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}

INL void row_to_bf16(const void *row, int64_t cols, uint16_t *out, const enum quant_format fmt)
{
	const int nb = (int)quant_blocks(cols);
	const size_t soff = quant_round_align((size_t)nb * (fmt == QUANT_Q8 ? 32 : 16));
	for (int b = 0; b < nb; b++) {
		__m512 w0, w1;
		weights(row, soff, b, fmt, &w0, &w1);
		__m256i h0 = round_bf16(w0), h1 = round_bf16(w1);
		int64_t left = cols - 32 * (int64_t)b;
		uint16_t *o = out + 32 * (size_t)b;
		if (left >= 32) {
			_mm256_storeu_si256((__m256i *)o, h0);
			_mm256_storeu_si256((__m256i *)(o + 16), h1);
		} else {
			uint16_t t[32];
			_mm256_storeu_si256((__m256i *)t, h0);
			_mm256_storeu_si256((__m256i *)(t + 16), h1);
			memcpy(o, t, (size_t)left * sizeof(uint16_t));
		}
	}
}

void cpu_gemv_avx512_q8_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16(row, cols, out, QUANT_Q8);
}

void cpu_gemv_avx512_q4_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16(row, cols, out, QUANT_Q4);
}

/* The AVX512-BF16 variant's: vcvtne2ps2bf16 rounds two vectors to nearest even in one
 * instruction where round_bf16() takes five per vector. The same bits: it treats denormal inputs
 * as zero, and a dequantized weight is never an fp32 denormal (a multiple of the fp16 scale's
 * spacing, 2^-24 at least, or 0); the weights are finite. */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
BF16_TARGET static inline __attribute__((always_inline)) void
row_to_bf16_ne(const void *row, int64_t cols, uint16_t *out, const enum quant_format fmt)
{
	const int nb = (int)quant_blocks(cols);
	const size_t soff = quant_round_align((size_t)nb * (fmt == QUANT_Q8 ? 32 : 16));
	for (int b = 0; b < nb; b++) {
		__m512 w0, w1;
		weights(row, soff, b, fmt, &w0, &w1);
		__m512i h = (__m512i)_mm512_cvtne2ps_pbh(w1, w0); /* w0 in the low 16 lanes */
		int64_t left = cols - 32 * (int64_t)b;
		uint16_t *o = out + 32 * (size_t)b;
		if (left >= 32)
			_mm512_storeu_si512(o, h);
		else
			_mm512_mask_storeu_epi16(o, (__mmask32)((1u << left) - 1), h);
	}
}

BF16_TARGET void cpu_gemv_avx512bf16_q8_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16_ne(row, cols, out, QUANT_Q8);
}

BF16_TARGET void cpu_gemv_avx512bf16_q4_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16_ne(row, cols, out, QUANT_Q4);
}
