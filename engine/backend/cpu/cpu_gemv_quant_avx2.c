/* Decode GEMV on quantized weights (quant.h: q8, q4), AVX2+FMA+F16C variant (compiled with
 * -mavx2 -mfma -mf16c; cpu_gemv.c calls it only where cpuid says the CPU runs it).
 *
 * The AVX-512 quantized kernels' structure (cpu_gemv_quant_avx512.c) on 8 lanes, a block of 32
 * columns as four chunks of 8: per chunk the T tokens' activations are loaded once and each row's
 * 8 codes widened to its exact dequantized weights (q8 d * q; q4 fma(d, q, m), chunk j < 2 from
 * the low nibbles of code bytes 8j..8j+7, j >= 2 from the high nibbles of bytes 8(j-2)..) before
 * the T multiply-adds. NR is 4 for one token and 2 with more, so the accumulators, activations,
 * scales and one weight vector fit the 16 registers. fp32 activations, fp32 sums; the last
 * block's columns past `in` are masked off the activation loads (vmaskmovps reads no memory
 * there). */
#include "cpu_gemv.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL __m256i mask8(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* block b's scale d (and q4's minimum m; zero for q8) of a row, broadcast */
INL void scales8(const char *row, size_t soff, int b, const enum quant_format fmt, __m256 *d, __m256 *m)
{
	if (fmt == QUANT_Q8) {
		*d = _mm256_set1_ps(_cvtsh_ss(((const uint16_t *)(row + soff))[b]));
		*m = _mm256_setzero_ps();
	} else {
		const uint16_t dz = ((const uint16_t *)(row + soff))[b];
		const float dd = _cvtsh_ss(quant_q4_d16(dz));
		*d = _mm256_set1_ps(dd);
		*m = _mm256_set1_ps(quant_q4_m(dd, dz));
	}
}

/* the exact dequantized weights of chunk j (columns 8j..8j+7) of a row's block b */
INL __m256 weights8(const char *row, int b, int j, __m256 d, __m256 m, const enum quant_format fmt)
{
	if (fmt == QUANT_Q8) {
		__m128i c = _mm_loadl_epi64((const __m128i *)(row + (size_t)b * 32 + 8 * (size_t)j));
		return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c)), d);
	}
	__m128i c = _mm_loadl_epi64((const __m128i *)(row + (size_t)b * 16 + 8 * (size_t)(j & 1)));
	__m256i v = _mm256_cvtepu8_epi32(c);
	v = j < 2 ? _mm256_and_si256(v, _mm256_set1_epi32(15)) : _mm256_srli_epi32(v, 4);
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), d, m);
}

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const enum quant_format fmt)
{
	const int n = a->in, nb = (n + 31) / 32;
	const size_t ldw = a->ldw, cb = fmt == QUANT_Q8 ? 32 : 16;
	const size_t soff = quant_round_align((size_t)nb * cb);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	__m256 acc[4][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const int k = b * 32, rem = n - k;
		if ((((size_t)b * cb) & 63) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + (size_t)b * cb, _MM_HINT_T0);
		__m256 d[4], m[4];
		for (int q = 0; q < NR; q++)
			scales8(w + (size_t)q * ldw, soff, b, fmt, &d[q], &m[q]);
		for (int j = 0; j < 4; j++) {
			__m256 x[CPU_GEMV_KERNEL_T];
			for (int t = 0; t < T; t++) {
				const float *p = a->x + (size_t)t * a->ldx + k + 8 * j;
				x[t] = rem >= 32 ? _mm256_loadu_ps(p) :
						   _mm256_maskload_ps(p, mask8(rem - 8 * j));
			}
			for (int q = 0; q < NR; q++) {
				const __m256 wv = weights8(w + (size_t)q * ldw, b, j, d[q], m[q], fmt);
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
			float s = _mm_cvtss_f32(h);
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

#define INSTANCES(suffix, fmt)                                                                               \
	NOINL void t1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 4, 1, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 2, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t3_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 3, fmt);                                                                  \
	}                                                                                                    \
	NOINL void t4_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, 2, 4, fmt);                                                                  \
	}                                                                                                    \
	void cpu_gemv_avx2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                           \
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

/* ---- the integer kernels on AVX2 (cpu_gemv.h: q8_i8, q4_i8) ------------------------------- */

/* The AVX512-VNNI kernels' arithmetic (cpu_gemv_quant_vnni.c) without vpdpbusd: vpmaddubsw
 * multiplies unsigned by signed bytes into pairs of int16 and vpmaddwd by ones adds the pairs
 * into int32, 4 bytes per lane as vpdpbusd does. vpmaddubsw saturates past 32767, so the
 * operands are kept small enough never to reach it: q8 multiplies |c_w| (<= 127, unsigned) by
 * c_x with c_w's sign (vpsignb, llama.cpp's way): a pair is at most 2 x 127 x 127 = 32258, and no
 * correction is needed; q4's codes are <= 15, a pair of lo and one of hi at most 4 x 15 x 127 =
 * 7620 together. The activations are the same buffer (cpu_gemv_quantize_x: its 16-lane scale
 * vectors read as two 8-lane halves), so each lane's exact int32 sum, its scaling and its
 * accumulation are the VNNI kernels', on 8 lanes. */
INL __m256i dot_u8s8(__m256i u, __m256i s)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

INL void istore(const struct cpu_gemv_args *a, int r, const int NR, const int T,
		__m256 acc[4][CPU_GEMV_KERNEL_T])
{
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			__m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[q][t]),
					      _mm256_extractf128_ps(acc[q][t], 1));
			s = _mm_add_ps(s, _mm_movehl_ps(s, s));
			s = _mm_add_ss(s, _mm_movehdup_ps(s));
			float v = _mm_cvtss_f32(s);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + v : v;
		}
}

INL void iblock_q8(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 32);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	__m256 acc[4][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		/* block b: 32 codes, lanes of 4; its activations at group b / 4, slot b % 4 */
		const size_t xo = (size_t)(b / 4) * CPU_XQ_Q8_BYTES, j = (size_t)(b % 4);
		if ((b & 1) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + 32 * (size_t)b, _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			const char *row = w + (size_t)q * ldw;
			__m256i c = _mm256_loadu_si256((const __m256i *)(row + 32 * (size_t)b));
			__m256i u = _mm256_sign_epi8(c, c);
			__m256 dw = _mm256_set1_ps(_cvtsh_ss(((const uint16_t *)(row + soff))[b]));
			for (int t = 0; t < T; t++) {
				const char *xt = a->xq + (size_t)t * a->ldxq + xo;
				__m256i x = _mm256_load_si256((const __m256i *)(xt + 32 * j));
				__m256i s = dot_u8s8(u, _mm256_sign_epi8(x, c));
				__m256 sc =
					_mm256_mul_ps(dw, _mm256_load_ps((const float *)(xt + 256) + 8 * j));
				acc[q][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[q][t]);
			}
		}
	}
	istore(a, r, NR, T, acc);
}

INL void iblock_q4(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int64_t nb = quant_blocks(a->in), nh = (nb + 1) / 2;
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 16);
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const size_t ahead = (size_t)NR * ldw;
	const __m256i nib = _mm256_set1_epi8(15);
	const __m256i di = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
	__m256 acc[4][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm256_setzero_ps();
	for (int64_t h = 0; h < nh; h++) {
		/* blocks 2h and 2h + 1: 32 bytes of codes, lanes 0..3 and 4..7 */
		const size_t xo = (size_t)(h / 2) * CPU_XQ_Q4_BYTES, k = (size_t)(h % 2);
		const bool two = 2 * h + 1 < nb;
		if ((h & 1) == 0)
			for (int q = 0; q < NR; q++)
				_mm_prefetch(w + ahead + (size_t)q * ldw + 32 * (size_t)h, _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			const char *row = w + (size_t)q * ldw;
			__m256i v = _mm256_loadu_si256((const __m256i *)(row + 32 * (size_t)h));
			__m256i lo = _mm256_and_si256(v, nib),
				hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
			/* (d, m) of the two blocks; the second's zero past the last block */
			const uint16_t *dzp = (const uint16_t *)(row + soff) + 2 * h;
			__m128i dz2 =
				two ? _mm_cvtsi32_si128(*(const int32_t *)dzp) : _mm_cvtsi32_si128(dzp[0]);
			__m256 fd, fm;
			cpu_gemv_q4_dz8(dz2, &fd, &fm);
			__m256 dw = _mm256_permutevar8x32_ps(fd, di), mw = _mm256_permutevar8x32_ps(fm, di);
			for (int t = 0; t < T; t++) {
				const char *xt = a->xq + (size_t)t * a->ldxq + xo;
				__m256i s = _mm256_madd_epi16(
					_mm256_add_epi16(
						_mm256_maddubs_epi16(lo,
								     _mm256_load_si256(
									     (const __m256i *)(xt + 32 * k))),
						_mm256_maddubs_epi16(hi, _mm256_load_si256(
										 (const __m256i *)(xt + 64 +
												   32 * k)))),
					_mm256_set1_epi16(1));
				__m256 sc =
					_mm256_mul_ps(dw, _mm256_load_ps((const float *)(xt + 128) + 8 * k));
				acc[q][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[q][t]);
				acc[q][t] =
					_mm256_fmadd_ps(mw, _mm256_load_ps((const float *)(xt + 192) + 8 * k),
							acc[q][t]);
			}
		}
	}
	istore(a, r, NR, T, acc);
}

INL void irows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T,
	       const enum quant_format fmt)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		fmt == QUANT_Q8 ? iblock_q8(a, r, NR, T) : iblock_q4(a, r, NR, T);
	for (; r < r1; r++)
		fmt == QUANT_Q8 ? iblock_q8(a, r, 1, T) : iblock_q4(a, r, 1, T);
}

/* 4 rows for one token, 2 with more (16 registers) */
#define IINSTANCES(suffix, fmt)                                                                              \
	NOINL void i1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		irows(a, r0, r1, 4, 1, fmt);                                                                 \
	}                                                                                                    \
	NOINL void i2_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		irows(a, r0, r1, 2, 2, fmt);                                                                 \
	}                                                                                                    \
	NOINL void i3_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		irows(a, r0, r1, 2, 3, fmt);                                                                 \
	}                                                                                                    \
	NOINL void i4_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		irows(a, r0, r1, 2, 4, fmt);                                                                 \
	}                                                                                                    \
	void cpu_gemv_avx2_##suffix##_i8(const struct cpu_gemv_args *a, int r0, int r1)                      \
	{                                                                                                    \
		switch (a->T) {                                                                              \
		case 1:                                                                                      \
			i1_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		case 2:                                                                                      \
			i2_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		case 3:                                                                                      \
			i3_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		default:                                                                                     \
			i4_##suffix(a, r0, r1);                                                              \
			break;                                                                               \
		}                                                                                            \
	}

IINSTANCES(q8, QUANT_Q8)
IINSTANCES(q4, QUANT_Q4)

/* ---- a row dequantized to bf16 (the prompt's products: cpu_quant_rows_to_bf16) ------------ */

/* the exact dequantized weights (the kernels' widening above) rounded to bf16 8 at a time */
INL void row_to_bf16(const void *row, int64_t cols, uint16_t *out, const enum quant_format fmt)
{
	const int nb = (int)quant_blocks(cols);
	const size_t cb = fmt == QUANT_Q8 ? 32 : 16, soff = quant_round_align((size_t)nb * cb);
	const char *r = row;
	for (int b = 0; b < nb; b++) {
		__m256 d, m;
		scales8(r, soff, b, fmt, &d, &m);
		__m128i h[4];
		for (int j = 0; j < 4; j++)
			h[j] = cpu_gemv_avx2_round8_bf16(weights8(r, b, j, d, m, fmt));
		const int64_t left = cols - 32 * (int64_t)b;
		uint16_t *o = out + 32 * (size_t)b;
		if (left >= 32) {
			for (int j = 0; j < 4; j++)
				_mm_storeu_si128((__m128i *)(o + 8 * j), h[j]);
		} else {
			uint16_t t[32];
			for (int j = 0; j < 4; j++)
				_mm_storeu_si128((__m128i *)(t + 8 * j), h[j]);
			memcpy(o, t, (size_t)left * sizeof(uint16_t));
		}
	}
}

void cpu_gemv_avx2_q8_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16(row, cols, out, QUANT_Q8);
}

void cpu_gemv_avx2_q4_to_bf16(const void *row, int64_t cols, uint16_t *out)
{
	row_to_bf16(row, cols, out, QUANT_Q4);
}
