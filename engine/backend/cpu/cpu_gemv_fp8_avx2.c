/* Decode GEMV on fp8 weights (quant.h's QUANT_FP8: e4m3 codes and a per-row fp32 scale),
 * AVX2+FMA+F16C variant (compiled with -mavx2 -mfma -mf16c; cpu_gemv.c calls it only where
 * cpuid says the CPU runs it).
 *
 * The AVX-512 fp8 kernel (cpu_gemv_fp8_avx512.c) on 8 lanes: a block of 32 columns as four
 * chunks of 8; per chunk the T tokens' activations are loaded once and each row's 8 codes
 * widened in registers to fp16 bits (sign << 15 | (c & 0x7f) << 7: the code's value times 2^-8,
 * exactly, subnormals included), to fp32 (vcvtph2ps) and times the row's scale times 2^8, the
 * product quant_row_to_f32() forms, before the T multiply-adds. NR is 4 for one token and 2 with
 * more, so accumulators, activations, scales and one weight vector fit the 16 registers. fp32
 * activations, fp32 sums; the last block's columns past `in` are masked off the activation
 * loads (vmaskmovps reads no memory there), the record's padding holds zero codes. */
#include "cpu_gemv.h"

#include <immintrin.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL __m256i mask8(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 e4m3 codes -> their values times 2^-8, as fp32 */
INL __m256 widen8(const uint8_t *c)
{
	/* sign-extended and shifted: bits 14 and 15 the sign, 7..13 the magnitude; bit 14 cleared
	 * (cpu_gemv_fp8_avx512.c's widen16) */
	__m128i v = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)c));
	__m128i h = _mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16((short)0xbfff));
	return _mm256_cvtph_ps(h);
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int n = a->in, nb = (n + 31) / 32;
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 32);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	__m256 acc[4][CPU_GEMV_KERNEL_T], s[4];
	for (int q = 0; q < NR; q++) {
		s[q] = _mm256_set1_ps(*(const float *)(w + (size_t)q * ldw + soff) * 256.0f);
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm256_setzero_ps();
	}
	for (int b = 0; b < nb; b++) {
		const int k = b * 32, rem = n - k;
		if ((k & 63) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + (size_t)k, _MM_HINT_T0);
		for (int j = 0; j < 4; j++) {
			__m256 x[CPU_GEMV_KERNEL_T];
			for (int t = 0; t < T; t++) {
				const float *p = a->x + (size_t)t * a->ldx + k + 8 * j;
				x[t] = rem >= 32 ? _mm256_loadu_ps(p) :
						   _mm256_maskload_ps(p, mask8(rem - 8 * j));
			}
			for (int q = 0; q < NR; q++) {
				const uint8_t *c = (const uint8_t *)(w + (size_t)q * ldw) + k + 8 * j;
				__m256 wv = _mm256_mul_ps(widen8(c), s[q]);
				for (int t = 0; t < T; t++)
					acc[q][t] = _mm256_fmadd_ps(wv, x[t], acc[q][t]);
			}
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[q][t]),
					      _mm256_extractf128_ps(acc[q][t], 1));
			h = _mm_add_ps(h, _mm_movehl_ps(h, h));
			h = _mm_add_ss(h, _mm_movehdup_ps(h));
			float v = _mm_cvtss_f32(h);
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

NOINL void t1(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 4, 1);
}

NOINL void t2(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 2, 2);
}

NOINL void t3(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 2, 3);
}

NOINL void t4(const struct cpu_gemv_args *a, int r0, int r1)
{
	rows(a, r0, r1, 2, 4);
}

void cpu_gemv_avx2_fp8(const struct cpu_gemv_args *a, int r0, int r1)
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
 * (cpu_quant_rows_to_bf16): as the AVX-512 one (cpu_gemv_fp8_avx512.c), 8 codes at a time, the
 * C path's bits. */
void cpu_gemv_avx2_fp8_row_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	const uint8_t *c = (const uint8_t *)row;
	const __m256 s = _mm256_set1_ps(*quant_fp8_scale(row, cols) * 256.0f);
	for (int64_t k = 0; k < cols; k += 8) {
		__m128i h = cpu_gemv_avx2_round8_bf16(_mm256_mul_ps(widen8(c + k), s));
		if (cols - k >= 8) {
			_mm_storeu_si128((__m128i *)(out + k), h);
		} else {
			uint16_t tmp[8];
			_mm_storeu_si128((__m128i *)tmp, h);
			for (int64_t i = 0; i < cols - k; i++)
				out[k + i] = tmp[i];
		}
	}
}
