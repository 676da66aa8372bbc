/* The integer kernels on q8 / q4 tiles (quant.h's tiles; cpu_gemv.h: q8_tile_i8, q4_tile_i8,
 * tile_records) and the activations' quantization for them (quant_x), AVX2 variant (compiled with -mavx2
 * -mfma -mf16c; cpu_gemv.c calls it only where cpuid says the CPU runs it): the CPUs without AVX512-VNNI most
 * desktops have (Intel Core without AVX-512, AMD Zen 2 and 3).
 *
 * The VNNI tile kernels' arithmetic (cpu_gemv_quant_vnni.c: the lanes are the rows, 4 activation
 * bytes broadcast against a code vector give 4 products to each row's lane) without vpdpbusd:
 * vpmaddubsw multiplies unsigned by signed bytes into pairs of int16 and vpmaddwd by ones adds
 * a pair of pairs into the row's int32 lane, as llama.cpp's AVX2 Q8_0/Q4_0 dot products do. A
 * 64-byte tile vector is two ymm: rows 0..7, then rows 8..15, each with its own accumulator.
 *
 *   q8: vpmaddubsw saturates past 32767 per pair, so it multiplies |c_w| (unsigned, <= 128) by
 *       c_x given c_w's sign (vpsignb, llama.cpp's way): a pair is at most 2 x 128 x 127 =
 *       32512, exact. |c_w| once per code vector for every token; per token and 32 code bytes:
 *       the broadcast (a load), vpsignb, vpmaddubsw, vpmaddwd, vpaddd. No correction term.
 *   q4: the nibbles are unsigned and <= 15: a pair is at most 2 x 15 x 127 = 3810, so all eight
 *       vpmaddubsw of a block (lo and hi nibbles of its four code vectors) add in int16 (at most
 *       30480) and one vpmaddwd widens them: per token and block half 8 vpmaddubsw, 7 vpaddw, one
 *       vpmaddwd, where the unpacking (and, shift, and) is once for every token.
 *
 * Each row's block sum is the same exact integer as the VNNI kernels' and the row kernels', and
 * it is scaled and accumulated with the VNNI tile kernels' fp32 operations in the same order
 * (acc = fma(float(s), d_w * d_x, acc); q4 then acc = fma(m_w, 4 sl, acc)), blocks in order,
 * one accumulator per (row, token): a token's results are the same bits alone or in a batch. */
#include "cpu_gemv.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* 4 activation bytes broadcast to every lane (one vpbroadcastd from memory) */
INL __m256i bcast4(const char *p)
{
	return _mm256_castps_si256(_mm256_broadcast_ss((const float *)p));
}

INL void tile_store(const struct cpu_gemv_args *a, float *y, const int T, __m256 acc[CPU_GEMV_KERNEL_T][2])
{
	for (int k = 0; k < T; k++)
		for (int h = 0; h < 2; h++) {
			float *p = y + (size_t)k * a->ldy + 8 * h;
			_mm256_storeu_ps(p, a->accumulate ? _mm256_add_ps(_mm256_loadu_ps(p), acc[k][h]) :
							    acc[k][h]);
		}
}

/* q8: per block eight 64-byte code vectors (lane i = row i, 4 codes each), per half of the
 * rows eight ymm; per token the exact int32 sum of each row's 32 code products */
INL void tile_q8(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[CPU_GEMV_KERNEL_T][2];
	for (int k = 0; k < T; k++)
		acc[k][0] = acc[k][1] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		cpu_gemv_prefetch_q8_tile(tile, b, nb);
		const char *c = tile + quant_q8_tile_codes(b);
		const char *ds = tile + quant_q8_tile_d(b, nb);
		const size_t xo = (size_t)(b >> 2) * CPU_XQ_Q8_BYTES;
		const int j = (int)(b & 3);
		for (int h = 0; h < 2; h++) {
			const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(ds + 16 * h)));
			__m256i s[CPU_GEMV_KERNEL_T];
			for (int k = 0; k < T; k++)
				s[k] = _mm256_setzero_si256();
			for (int v = 0; v < 8; v++) {
				const __m256i w = _mm256_load_si256((const __m256i *)(c + 64 * v + 32 * h));
				const __m256i u = _mm256_sign_epi8(w, w);
				for (int k = 0; k < T; k++) {
					const char *xc = a->xq + (size_t)k * a->ldxq + xo + 32 * j + 4 * v;
					const __m256i p =
						_mm256_maddubs_epi16(u, _mm256_sign_epi8(bcast4(xc), w));
					s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(p, ones));
				}
			}
			for (int k = 0; k < T; k++) {
				const float dx =
					((const float *)(a->xq + (size_t)k * a->ldxq + xo + 256))[8 * j];
				acc[k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[k]),
							    _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[k][h]);
			}
		}
	}
	tile_store(a, y, T, acc);
}

/* q4: per block four 64-byte code vectors (low nibbles columns 4v..4v+3 of each row, high ones
 * 4v+16..4v+19) and the 16 rows' dz (quant.h's pairs of blocks) */
INL void tile_q4(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m256i nib = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
	__m256 acc[CPU_GEMV_KERNEL_T][2];
	for (int k = 0; k < T; k++)
		acc[k][0] = acc[k][1] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		cpu_gemv_prefetch_q4_tile(tile, b);
		const char *tb = tile + quant_q4_tile_codes(b);
		const size_t xo = (size_t)(b >> 2) * CPU_XQ_Q4_BYTES;
		const int j = (int)(b & 3);
		for (int h = 0; h < 2; h++) {
			__m256i lo[4], hi[4];
			for (int v = 0; v < 4; v++) {
				const __m256i w = _mm256_load_si256((const __m256i *)(tb + 64 * v + 32 * h));
				lo[v] = _mm256_and_si256(w, nib);
				hi[v] = _mm256_and_si256(_mm256_srli_epi16(w, 4), nib);
			}
			__m256 d, m;
			cpu_gemv_q4_dz8(_mm_load_si128((const __m128i *)(tile + quant_q4_tile_dz(b) + 16 * h)),
					&d, &m);
			for (int k = 0; k < T; k++) {
				const char *xt = a->xq + (size_t)k * a->ldxq + xo;
				const char *xl = xt + 16 * j, *xh = xt + 64 + 16 * j;
				__m256i p0 = _mm256_maddubs_epi16(lo[0], bcast4(xl));
				__m256i p1 = _mm256_maddubs_epi16(hi[0], bcast4(xh));
				p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(lo[1], bcast4(xl + 4)));
				p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(hi[1], bcast4(xh + 4)));
				p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(lo[2], bcast4(xl + 8)));
				p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(hi[2], bcast4(xh + 8)));
				p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(lo[3], bcast4(xl + 12)));
				p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(hi[3], bcast4(xh + 12)));
				const __m256i s = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones);
				const float dx = ((const float *)(xt + 128))[4 * j];
				const float sl = ((const float *)(xt + 192))[4 * j] * 4.0f;
				acc[k][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
							    _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc[k][h]);
				acc[k][h] = _mm256_fmadd_ps(m, _mm256_set1_ps(sl), acc[k][h]);
			}
		}
	}
	tile_store(a, y, T, acc);
}

CPU_GEMV_TILE_KERNELS(avx2, q4)
CPU_GEMV_TILE_KERNELS(avx2, q8)

/* ---- a tile's records (the prompt's dequantization reads records) ----------------------------
 *
 * Four code vectors' halves (8 lanes of 4 bytes: lane i row 8 h + i) transposed in 128-bit
 * lanes: afterwards 128-bit lane L of vector k holds row 8 h + 4 L + k's 16 bytes, stored to its
 * record (the VNNI variant's transposes on 8 lanes). */
INL void transpose_store(const char *src, char *const *dst, size_t off)
{
	for (int h = 0; h < 2; h++) {
		const char *s = src + 32 * h;
		char *const *d = dst + 8 * h;
		__m256i v0 = _mm256_load_si256((const __m256i *)s);
		__m256i v1 = _mm256_load_si256((const __m256i *)(s + 64));
		__m256i v2 = _mm256_load_si256((const __m256i *)(s + 128));
		__m256i v3 = _mm256_load_si256((const __m256i *)(s + 192));
		__m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);
		__m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
		__m256i r[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
				_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
		for (int k = 0; k < 4; k++) {
			_mm_storeu_si128((__m128i *)(d[k] + off), _mm256_castsi256_si128(r[k]));
			_mm_storeu_si128((__m128i *)(d[4 + k] + off), _mm256_extracti128_si256(r[k], 1));
		}
	}
}

void cpu_gemv_avx2_tile_records(enum quant_format f, int64_t cols, const void *tile, void *recs,
				size_t row_bytes)
{
	const int64_t nb = quant_blocks(cols);
	char *dst[QUANT_TILE_ROWS];
	for (int i = 0; i < QUANT_TILE_ROWS; i++) {
		dst[i] = (char *)recs + (size_t)i * row_bytes;
		memset(dst[i], 0, row_bytes);
	}
	const char *t = tile;
	for (int64_t b = 0; b < nb; b++) {
		if (f == QUANT_Q8) {
			const char *c = t + quant_q8_tile_codes(b);
			transpose_store(c, dst, 32 * (size_t)b);
			transpose_store(c + 256, dst, 32 * (size_t)b + 16);
		} else {
			transpose_store(t + quant_q4_tile_codes(b), dst, 16 * (size_t)b);
		}
		cpu_gemv_tile_scales_to_records(f, cols, b, tile, dst);
	}
}

/* ---- the activations' quantization (cpu_gemv_quantize_x, the same bytes) ------------------
 *
 * The VNNI variant's (cpu_gemv_quant_vnni.c) on 8 lanes: the same IEEE operations as the C
 * reference (fp32 |x| max, 127 / amax, x * id clamped to +-127, rounded to nearest even by
 * vcvtps2dq), so the same bits; each 4 codes' sum for q8's correction by vpmaddubsw of ones and
 * vpmaddwd. Run once per product before the rows are split (one thread), where the C loop took
 * ~13 us per 5120 columns. */
INL __m256i mask8(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* one block of n (1..32) values: d, the 32 codes in column order, and their sum */
INL int xq_block(const float *x, int n, float *ret_d, __m256i *ret_c)
{
	__m256 v[4];
	for (int k = 0; k < 4; k++)
		v[k] = n >= 8 * (k + 1) ? _mm256_loadu_ps(x + 8 * k) :
		       n > 8 * k	? _mm256_maskload_ps(x + 8 * k, mask8(n - 8 * k)) :
					  _mm256_setzero_ps();
	const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.40282347e38f);
	__m256 a[4];
	int bad = 0;
	for (int k = 0; k < 4; k++) {
		a[k] = _mm256_andnot_ps(sign, v[k]);
		bad |= _mm256_movemask_ps(_mm256_cmp_ps(a[k], big, _CMP_NLE_UQ));
	}
	*ret_c = _mm256_setzero_si256();
	if (bad) {
		*ret_d = __builtin_nanf("");
		return 0;
	}
	__m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	const float amax = _mm_cvtss_f32(h);
	*ret_d = amax / 127.0f;
	if (amax == 0)
		return 0;
	const __m256 id = _mm256_set1_ps(127.0f / amax), lim = _mm256_set1_ps(127.0f),
		     nlim = _mm256_set1_ps(-127.0f);
	__m256i q[4];
	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], id), nlim), lim));
	/* packs work in 128-bit lanes: the dwords come out as q0 0-3, q1 0-3, q2 0-3, q3 0-3, then
	 * the 4-7s; the permute puts them in column order */
	__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
	*ret_c = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	__m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
	return _mm_cvtsi128_si32(s4);
}

void cpu_gemv_avx2_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
			      size_t ldxq)
{
	const int64_t nb = quant_blocks(in), ng = (nb + 3) / 4;
	const size_t gbytes = fmt == QUANT_Q8 ? CPU_XQ_Q8_BYTES : CPU_XQ_Q4_BYTES;
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	for (int t = 0; t < T; t++) {
		char *out = xq + (size_t)t * ldxq;
		const float *xt = x + (size_t)t * ldx;
		/* the last group's blocks past the end are zero */
		memset(out + (size_t)(ng - 1) * gbytes, 0, gbytes);
		for (int64_t b = 0; b < nb; b++) {
			int k0 = (int)b * QUANT_BLOCK, j = (int)(b & 3);
			int n = in - k0 < QUANT_BLOCK ? in - k0 : QUANT_BLOCK;
			char *g = out + (size_t)(b >> 2) * gbytes;
			__m256i c;
			float d;
			int sum = xq_block(xt + k0, n, &d, &c);
			if (fmt == QUANT_Q8) {
				_mm256_storeu_si256((__m256i *)(g + 32 * j), c);
				/* -128 x each 4 codes' sum */
				__m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, c), ones16);
				_mm256_storeu_si256((__m256i *)(g + 128 + 32 * j),
						    _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(),
										       s4),
								      7));
				_mm256_storeu_ps((float *)(g + 256) + 8 * j, _mm256_set1_ps(d));
				if (j == 0)
					memset(g + CPU_XQ_Q8_CTOT, 0, CPU_XQ_Q8_BYTES - CPU_XQ_Q8_CTOT);
				((int32_t *)(g + CPU_XQ_Q8_CTOT))[j] = -128 * sum;
			} else {
				_mm_storeu_si128((__m128i *)(g + 16 * j), _mm256_castsi256_si128(c));
				_mm_storeu_si128((__m128i *)(g + 64 + 16 * j), _mm256_extracti128_si256(c, 1));
				_mm_storeu_ps((float *)(g + 128) + 4 * j, _mm_set1_ps(d));
				_mm_storeu_ps((float *)(g + 192) + 4 * j, _mm_set1_ps(d * (float)sum * 0.25f));
			}
		}
	}
}
