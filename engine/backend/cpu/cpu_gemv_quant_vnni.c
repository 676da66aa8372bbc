/* Decode GEMV on quantized weights (quant.h: q8, q4) times activations quantized to int8
 * (cpu_gemv.h: a->xq), AVX512-VNNI variant (compiled with -mavx512f -mavx512bw -mavx512vl
 * -mavx512vnni -mf16c -mfma; cpu_gemv.c calls it only in the AVX512-BF16 variant, which cpu_isa
 * grants only where cpuid also shows AVX512-VNNI).
 *
 * Why integers: widening a block's codes to fp32 (cpu_gemv_quant_avx512.c) costs ~9 vector
 * instructions per 32 weights, which at two threads of a 2-core EPYC left q8 at ~80% and q4 at
 * ~42% of the read bandwidth. vpdpbusd multiplies 64 unsigned by 64 signed bytes and adds them
 * in fours into 16 int32 lanes: with the activations quantized once per product (llama.cpp's
 * way) a block's products are exact integers for a handful of instructions, and only the
 * scaling is fp32.
 *
 *   q8 (per 64 codes: two blocks, 8 lanes each): the weight codes get 128 added (xor 0x80) to
 *      be vpdpbusd's unsigned operand; each lane's sum starts at corr (-128 x the sum of its 4
 *      activation codes), so the lane ends at the exact sum of code products. Then
 *      acc += float(lane) * (d_w * d_x) with d_w spread over the block's 8 lanes by vpermps.
 *   q4 (per 64 bytes of codes: four blocks, 4 lanes each): the low nibbles (columns 0..15 of
 *      each block) and the high ones (16..31) are already unsigned bytes; the activations come
 *      in that order (lo, hi), so two vpdpbusd give each block's exact sum. Then
 *      acc += float(lane) * (d_w * d_x) + m_w * sl (sl: d_x x the block's code sum / 4, the
 *      minimum's share of each of its lanes).
 *
 * One token (decode): one row at a time, front to back, nothing prefetched by hand: a thread's
 * range is one sequential stream, which the hardware's stream prefetchers follow at the read
 * bandwidth (llama.cpp's vec_dot walks rows the same way). Eight rows interleaved (with the
 * rows eight ahead prefetched, as before) read eight short streams at once (a 1024-column q8
 * row is 17 lines) and stayed far below the bandwidth (the in-process A/B: docs/benchmarks.md, "Figures
 * behind the code's constants"). More tokens (the merged decode rows of several sessions): NR = 4 consecutive
 * rows against T tokens, the rows NR ahead prefetched (codes and then scales), each weight vector loaded once
 * for T tokens. One 16-lane accumulator per (row, token) either way. Scales of blocks past the
 * last column are masked to zero on load (their codes and the
 * activations' are zero: the padding of quant.h's records is not trusted to hold finite fp16).
 * Every (row, token) sum is formed the same way whatever T: a token's result is the same bits
 * alone or in a batch. */
#include "cpu_gemv.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

#define NR_MAX 4

INL void store(const struct cpu_gemv_args *a, int r, const int NR, const int T,
	       __m512 acc[NR_MAX][CPU_GEMV_KERNEL_T])
{
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(acc[q][t]);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

/* prefetch line i of the rows NR ahead: the codes' lines as the loop reaches them, and the
 * scales' (fewer) lines alongside the first ones */
INL void prefetch(const char *ahead, size_t ldw, const int NR, size_t i, size_t soff, size_t slines)
{
	for (int q = 0; q < NR; q++) {
		_mm_prefetch(ahead + (size_t)q * ldw + 64 * i, _MM_HINT_T0);
		if (i < slines)
			_mm_prefetch(ahead + (size_t)q * ldw + soff + 64 * i, _MM_HINT_T0);
	}
}

INL void block_q8(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int64_t nb = quant_blocks(a->in), np = (nb + 1) / 2;
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 32);
	const size_t slines = (ldw - soff + 63) / 64;
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const char *ahead = w + (size_t)NR * ldw;
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	const __m512i lo2 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
	const __m512i hi2 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
	__m512 acc[NR_MAX][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	for (int64_t p = 0; p < np; p += 2) {
		/* a group: blocks 2p .. 2p + 3, pairs p and p + 1 */
		const int64_t left = nb - 2 * p;
		const __mmask8 sm = left >= 4 ? (__mmask8)0xf : (__mmask8)((1u << left) - 1);
		const size_t xo = (size_t)(p / 2) * CPU_XQ_Q8_BYTES;
		if (T > 1) {
			prefetch(ahead, ldw, NR, (size_t)p, soff, slines);
			if (p + 1 < np)
				prefetch(ahead, ldw, NR, (size_t)p + 1, soff, slines);
		}
		for (int q = 0; q < NR; q++) {
			const char *row = w + (size_t)q * ldw;
			__m128 d4 = _mm_cvtph_ps(_mm_maskz_loadu_epi16(sm, row + soff + 4 * (size_t)p));
			for (int h = 0; h < 2 && p + h < np; h++) {
				__m512i wu = _mm512_xor_si512(_mm512_loadu_si512(row + 64 * (size_t)(p + h)),
							      flip);
				__m512 dw = _mm512_permutexvar_ps(h ? hi2 : lo2, _mm512_castps128_ps512(d4));
				for (int t = 0; t < T; t++) {
					const char *xt = a->xq + (size_t)t * a->ldxq + xo + 64 * h;
					__m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(xt + 128), wu,
									_mm512_load_si512(xt));
					__m512 sc =
						_mm512_mul_ps(dw, _mm512_load_ps((const float *)(xt + 256)));
					acc[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[q][t]);
				}
			}
		}
	}
	store(a, r, NR, T, acc);
}

INL void block_q4(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const int64_t nb = quant_blocks(a->in), ng = (nb + 3) / 4;
	const size_t ldw = a->ldw, soff = quant_round_align((size_t)nb * 16);
	const size_t slines = (ldw - soff + 63) / 64;
	const char *w = (const char *)a->w + (size_t)r * ldw;
	const char *ahead = w + (size_t)NR * ldw;
	const __m512i nib = _mm512_set1_epi8(15);
	const __m512i di = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
	__m512 acc[NR_MAX][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	for (int64_t g = 0; g < ng; g++) {
		const int64_t left = nb - 4 * g;
		const __mmask8 sm = left >= 4 ? (__mmask8)0xf : (__mmask8)((1u << left) - 1);
		const size_t xo = (size_t)g * CPU_XQ_Q4_BYTES;
		if (T > 1)
			prefetch(ahead, ldw, NR, (size_t)g, soff, slines);
		for (int q = 0; q < NR; q++) {
			const char *row = w + (size_t)q * ldw;
			__m512i v = _mm512_loadu_si512(row + 64 * (size_t)g);
			__m512i lo = _mm512_and_si512(v, nib);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
			const __m128i dz = _mm_maskz_loadu_epi16(sm, row + soff + 8 * (size_t)g);
			__m256 d4, m4;
			cpu_gemv_q4_dz8(dz, &d4, &m4);
			__m512 dw = _mm512_permutexvar_ps(di, _mm512_castps256_ps512(d4));
			__m512 mw = _mm512_permutexvar_ps(di, _mm512_castps256_ps512(m4));
			for (int t = 0; t < T; t++) {
				const char *xt = a->xq + (size_t)t * a->ldxq + xo;
				__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,
								_mm512_load_si512(xt));
				s = _mm512_dpbusd_epi32(s, hi, _mm512_load_si512(xt + 64));
				__m512 sc = _mm512_mul_ps(dw, _mm512_load_ps((const float *)(xt + 128)));
				acc[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[q][t]);
				acc[q][t] = _mm512_fmadd_ps(mw, _mm512_load_ps((const float *)(xt + 192)),
							    acc[q][t]);
			}
		}
	}
	store(a, r, NR, T, acc);
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T,
	      const enum quant_format fmt)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		fmt == QUANT_Q8 ? block_q8(a, r, NR, T) : block_q4(a, r, NR, T);
	for (; r < r1; r++)
		fmt == QUANT_Q8 ? block_q8(a, r, 1, T) : block_q4(a, r, 1, T);
}

#define INSTANCES(suffix, fmt, NR1)                                                                          \
	NOINL void t1_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                                \
	{                                                                                                    \
		rows(a, r0, r1, NR1, 1, fmt);                                                                \
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
	void cpu_gemv_vnni_##suffix(const struct cpu_gemv_args *a, int r0, int r1)                           \
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

INSTANCES(q8, QUANT_Q8, 1)
INSTANCES(q4, QUANT_Q4, 1)

/* ---- q4 tiles (quant.h): the lanes are the rows --------------------------------------------
 *
 * Per block of a tile: four 64-byte code vectors, vector v's low nibbles columns 4v..4v+3 of
 * each of the 16 rows (lane i = row i), its high ones columns 4v+16..4v+19; the activations'
 * codes of those columns (xq's lo and hi runs, 4 bytes each) are broadcast to every lane, so
 * each vpdpbusd adds 4 products per row in the row's own lane. Two int32 chains per block
 * (vectors 0-1 and 2-3) are added, widened and scaled by the 16 rows' d (a vector load of the
 * tile's fp16 d, already in lane order) times the block's d_x; the minimum's share is the 16 m
 * times d_x x the block's code sum (xq's per-lane quarter times 4: exact). No permute, no
 * reduction, no mask: per 64 code bytes about 5 vector instructions where the row kernel
 * above takes 12. One accumulator per (tile, token), blocks in order: the same bits for a token
 * alone or among others. About 2.5x the row kernel's rate cache-hot and at the read pass when
 * streamed (docs/benchmarks.md, "Figures behind the code's constants"). */
INL void tile_q4(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m512i nib = _mm512_set1_epi8(15);
	__m512 acc[CPU_GEMV_KERNEL_T];
	for (int k = 0; k < T; k++)
		acc[k] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		cpu_gemv_prefetch_q4_tile(tile, b);
		const char *tb = tile + quant_q4_tile_codes(b);
		const size_t xo = (size_t)(b >> 2) * CPU_XQ_Q4_BYTES;
		const int j = (int)(b & 3);
		__m512i lo[4], hi[4];
		for (int v = 0; v < 4; v++) {
			__m512i w = _mm512_load_si512(tb + 64 * v);
			lo[v] = _mm512_and_si512(w, nib);
			hi[v] = _mm512_and_si512(_mm512_srli_epi16(w, 4), nib);
		}
		__m512 d, m;
		cpu_gemv_q4_dz16(_mm256_load_si256((const __m256i *)(tile + quant_q4_tile_dz(b))), &d, &m);
		for (int k = 0; k < T; k++) {
			const char *xt = a->xq + (size_t)k * a->ldxq + xo;
			int32_t xl[4], xh[4];
			memcpy(xl, xt + 16 * j, 16);
			memcpy(xh, xt + 64 + 16 * j, 16);
			__m512i s0 =
				_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], _mm512_set1_epi32(xl[0]));
			__m512i s1 =
				_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[1], _mm512_set1_epi32(xl[1]));
			s0 = _mm512_dpbusd_epi32(s0, hi[0], _mm512_set1_epi32(xh[0]));
			s1 = _mm512_dpbusd_epi32(s1, hi[1], _mm512_set1_epi32(xh[1]));
			s0 = _mm512_dpbusd_epi32(s0, lo[2], _mm512_set1_epi32(xl[2]));
			s1 = _mm512_dpbusd_epi32(s1, lo[3], _mm512_set1_epi32(xl[3]));
			s0 = _mm512_dpbusd_epi32(s0, hi[2], _mm512_set1_epi32(xh[2]));
			s1 = _mm512_dpbusd_epi32(s1, hi[3], _mm512_set1_epi32(xh[3]));
			const float dx = ((const float *)(xt + 128))[4 * j];
			const float sl = ((const float *)(xt + 192))[4 * j] * 4.0f;
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
						 _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[k]);
			acc[k] = _mm512_fmadd_ps(m, _mm512_set1_ps(sl), acc[k]);
		}
	}
	for (int k = 0; k < T; k++) {
		float *p = y + (size_t)k * a->ldy;
		_mm512_storeu_ps(p, a->accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), acc[k]) : acc[k]);
	}
}

/* q8 tiles: per block eight code vectors (lane i = row i, 4 codes each), made unsigned by xor
 * 0x80 once for every token; each token's int32 sum starts at -128 x the block's activation
 * code sum (xq's ctot: one load where adding the 8 per-lane corrections took 8 and 7 adds per
 * block and token), two chains of four vpdpbusd, then one widen and one fma with the 16 rows'
 * d (in lane order) times d_x. */
INL void tile_q8(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m512i flip = _mm512_set1_epi8((char)0x80);
	__m512 acc[CPU_GEMV_KERNEL_T];
	for (int k = 0; k < T; k++)
		acc[k] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		cpu_gemv_prefetch_q8_tile(tile, b, nb);
		const char *c = tile + quant_q8_tile_codes(b);
		const size_t xo = (size_t)(b >> 2) * CPU_XQ_Q8_BYTES;
		const int j = (int)(b & 3);
		__m512i w[8];
		for (int v = 0; v < 8; v++)
			w[v] = _mm512_xor_si512(_mm512_load_si512(c + 64 * v), flip);
		const __m512 d =
			_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(tile + quant_q8_tile_d(b, nb))));
		for (int k = 0; k < T; k++) {
			const char *xt = a->xq + (size_t)k * a->ldxq + xo;
			int32_t xc[8];
			memcpy(xc, xt + 32 * j, 32);
			const int32_t corr = ((const int32_t *)(xt + CPU_XQ_Q8_CTOT))[j];
			__m512i s0 =
				_mm512_dpbusd_epi32(_mm512_set1_epi32(corr), w[0], _mm512_set1_epi32(xc[0]));
			__m512i s1 =
				_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], _mm512_set1_epi32(xc[1]));
			for (int v = 2; v < 8; v += 2) {
				s0 = _mm512_dpbusd_epi32(s0, w[v], _mm512_set1_epi32(xc[v]));
				s1 = _mm512_dpbusd_epi32(s1, w[v + 1], _mm512_set1_epi32(xc[v + 1]));
			}
			const float dx = ((const float *)(xt + 256))[8 * j];
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
						 _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[k]);
		}
	}
	for (int k = 0; k < T; k++) {
		float *p = y + (size_t)k * a->ldy;
		_mm512_storeu_ps(p, a->accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), acc[k]) : acc[k]);
	}
}

CPU_GEMV_TILE_KERNELS(vnni, q4)
CPU_GEMV_TILE_KERNELS(vnni, q8)

/* A tile's records (the prompt's dequantization) and the activations' quantization: AVX-512F's
 * (cpu_gemv_quant_tile_avx512.c: cpu_gemv_avx512_tile_records, cpu_gemv_avx512_quantize_x; the
 * same bytes as VNNI's own code gave), which this variant's table names. */
