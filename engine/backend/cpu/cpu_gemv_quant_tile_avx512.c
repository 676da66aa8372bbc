/* The integer kernels on q8 / q4 tiles (quant.h's tiles; cpu_gemv.h: q8_tile_i8, q4_tile_i8,
 * tile_records) and the activations' quantization for them (quant_x), AVX-512F/BW variant (compiled with
 * -mavx512f -mavx512bw -mfma -mf16c; cpu_gemv.c calls it only where cpuid says the CPU runs AVX-512F and BW):
 * the AVX-512 CPUs without AVX512-VNNI (Skylake-SP/X, the first AVX-512 Xeons and Core X).
 *
 * cpu_gemv_quant_tile_avx2.c's kernels on 512 bits: a 64-byte tile vector is one zmm, lane i
 * row i, so each (tile, token) has one accumulator as in the VNNI kernels
 * (cpu_gemv_quant_vnni.c), and vpmaddubsw + vpmaddwd stand for vpdpbusd:
 *
 *   q8: AVX-512 has no vpsignb; |c_w| is vpabsb and c_w's sign goes onto the broadcast
 *       activation bytes by a masked subtraction from zero under vpmovb2m's mask of the code
 *       vector (both once per code vector for every token): per token and 64 code bytes the
 *       broadcast (a load), the masked vpsubb, vpmaddubsw (a pair at most 2 x 128 x 127 = 32512,
 *       exact), vpmaddwd, vpaddd.
 *   q4: the nibbles are unsigned and <= 15: a block's eight vpmaddubsw add in int16 (at most 8 x
 *       2 x 15 x 127 = 30480) and one vpmaddwd widens them.
 *
 * Each row's block sum is the same exact integer as the VNNI kernels', scaled and accumulated
 * with their fp32 operations in their order, blocks in order, one accumulator per (tile, token):
 * a token's results are the same bits alone or in a batch. */
#include "cpu_gemv.h"

#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* 4 activation bytes broadcast to every lane (one vpbroadcastd from memory) */
INL __m512i bcast4(const char *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return _mm512_set1_epi32(v);
}

INL void tile_store(const struct cpu_gemv_args *a, float *y, const int T, __m512 acc[CPU_GEMV_KERNEL_T])
{
	for (int k = 0; k < T; k++) {
		float *p = y + (size_t)k * a->ldy;
		_mm512_storeu_ps(p, a->accumulate ? _mm512_add_ps(_mm512_loadu_ps(p), acc[k]) : acc[k]);
	}
}

INL void tile_q8(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
	__m512 acc[CPU_GEMV_KERNEL_T];
	for (int k = 0; k < T; k++)
		acc[k] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		cpu_gemv_prefetch_q8_tile(tile, b, nb);
		const char *c = tile + quant_q8_tile_codes(b);
		const size_t xo = (size_t)(b >> 2) * CPU_XQ_Q8_BYTES;
		const int j = (int)(b & 3);
		const __m512 d =
			_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(tile + quant_q8_tile_d(b, nb))));
		__m512i s[CPU_GEMV_KERNEL_T];
		for (int k = 0; k < T; k++)
			s[k] = _mm512_setzero_si512();
		for (int v = 0; v < 8; v++) {
			const __m512i w = _mm512_load_si512(c + 64 * v);
			const __m512i u = _mm512_abs_epi8(w);
			const __mmask64 neg = _mm512_movepi8_mask(w);
			for (int k = 0; k < T; k++) {
				const __m512i x = bcast4(a->xq + (size_t)k * a->ldxq + xo + 32 * j + 4 * v);
				const __m512i p =
					_mm512_maddubs_epi16(u, _mm512_mask_sub_epi8(x, neg, zero, x));
				s[k] = _mm512_add_epi32(s[k], _mm512_madd_epi16(p, ones));
			}
		}
		for (int k = 0; k < T; k++) {
			const float dx = ((const float *)(a->xq + (size_t)k * a->ldxq + xo + 256))[8 * j];
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[k]),
						 _mm512_mul_ps(d, _mm512_set1_ps(dx)), acc[k]);
		}
	}
	tile_store(a, y, T, acc);
}

INL void tile_q4(const struct cpu_gemv_args *a, int t, float *y, const int T)
{
	const int64_t nb = quant_blocks(a->in);
	const char *tile = (const char *)a->w + (size_t)t * a->ldw;
	const __m512i nib = _mm512_set1_epi8(15), ones = _mm512_set1_epi16(1);
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
			const __m512i w = _mm512_load_si512(tb + 64 * v);
			lo[v] = _mm512_and_si512(w, nib);
			hi[v] = _mm512_and_si512(_mm512_srli_epi16(w, 4), nib);
		}
		__m512 d, m;
		cpu_gemv_q4_dz16(_mm256_load_si256((const __m256i *)(tile + quant_q4_tile_dz(b))), &d, &m);
		for (int k = 0; k < T; k++) {
			const char *xt = a->xq + (size_t)k * a->ldxq + xo;
			const char *xl = xt + 16 * j, *xh = xt + 64 + 16 * j;
			__m512i p0 = _mm512_maddubs_epi16(lo[0], bcast4(xl));
			__m512i p1 = _mm512_maddubs_epi16(hi[0], bcast4(xh));
			p0 = _mm512_add_epi16(p0, _mm512_maddubs_epi16(lo[1], bcast4(xl + 4)));
			p1 = _mm512_add_epi16(p1, _mm512_maddubs_epi16(hi[1], bcast4(xh + 4)));
			p0 = _mm512_add_epi16(p0, _mm512_maddubs_epi16(lo[2], bcast4(xl + 8)));
			p1 = _mm512_add_epi16(p1, _mm512_maddubs_epi16(hi[2], bcast4(xh + 8)));
			p0 = _mm512_add_epi16(p0, _mm512_maddubs_epi16(lo[3], bcast4(xl + 12)));
			p1 = _mm512_add_epi16(p1, _mm512_maddubs_epi16(hi[3], bcast4(xh + 12)));
			const __m512i s = _mm512_madd_epi16(_mm512_add_epi16(p0, p1), ones);
			const float dx = ((const float *)(xt + 128))[4 * j];
			const float sl = ((const float *)(xt + 192))[4 * j] * 4.0f;
			acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(dx)),
						 acc[k]);
			acc[k] = _mm512_fmadd_ps(m, _mm512_set1_ps(sl), acc[k]);
		}
	}
	tile_store(a, y, T, acc);
}

CPU_GEMV_TILE_KERNELS(avx512, q4)
CPU_GEMV_TILE_KERNELS(avx512, q8)

/* ---- a tile's records (the prompt's dequantization reads records) ----------------------------
 *
 * The VNNI variant's transposes (AVX-512F alone): four code vectors (16 lanes of 4 bytes: lane i
 * row i) transposed in 128-bit lanes, after which 128-bit lane L of vector k holds row 4 L + k's
 * 16 bytes, stored to its record. */
INL void transpose_store(const char *src, char *const *dst, size_t off)
{
	__m512i v0 = _mm512_load_si512(src), v1 = _mm512_load_si512(src + 64);
	__m512i v2 = _mm512_load_si512(src + 128), v3 = _mm512_load_si512(src + 192);
	__m512i t0 = _mm512_unpacklo_epi32(v0, v1), t1 = _mm512_unpackhi_epi32(v0, v1);
	__m512i t2 = _mm512_unpacklo_epi32(v2, v3), t3 = _mm512_unpackhi_epi32(v2, v3);
	__m512i r[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
			_mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
	for (int k = 0; k < 4; k++) {
		_mm_storeu_si128((__m128i *)(dst[k] + off), _mm512_castsi512_si128(r[k]));
		_mm_storeu_si128((__m128i *)(dst[4 + k] + off), _mm512_extracti32x4_epi32(r[k], 1));
		_mm_storeu_si128((__m128i *)(dst[8 + k] + off), _mm512_extracti32x4_epi32(r[k], 2));
		_mm_storeu_si128((__m128i *)(dst[12 + k] + off), _mm512_extracti32x4_epi32(r[k], 3));
	}
}

void cpu_gemv_avx512_tile_records(enum quant_format f, int64_t cols, const void *tile, void *recs,
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
 * The VNNI variant's (cpu_gemv_quant_vnni.c) in AVX-512F: the same IEEE operations as the C
 * reference, so the same bits; each 4 codes' sum for q8's correction by vpmaddubsw of ones and
 * vpmaddwd where that one has vpdpbusd. */
INL __mmask16 lanes(int n)
{
	return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* one block of n (1..32) values: d and the codes as two 16-byte halves; returns their sum */
INL int xq_block(const float *x, int n, float *ret_d, __m128i *c0, __m128i *c1)
{
	__m512 v0 = _mm512_maskz_loadu_ps(lanes(n), x), v1 = _mm512_maskz_loadu_ps(lanes(n - 16), x + 16);
	__m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
	const __m512 big = _mm512_set1_ps(3.40282347e38f);
	*c0 = *c1 = _mm_setzero_si128();
	if (_mm512_cmp_ps_mask(a0, big, _CMP_NLE_UQ) | _mm512_cmp_ps_mask(a1, big, _CMP_NLE_UQ)) {
		*ret_d = __builtin_nanf("");
		return 0;
	}
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
	*ret_d = amax / 127.0f;
	if (amax == 0)
		return 0;
	const __m512 id = _mm512_set1_ps(127.0f / amax), lim = _mm512_set1_ps(127.0f);
	__m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, id), -lim), lim));
	__m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, id), -lim), lim));
	*c0 = _mm512_cvtepi32_epi8(q0);
	*c1 = _mm512_cvtepi32_epi8(q1);
	return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

void cpu_gemv_avx512_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
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
			__m128i c0, c1;
			float d;
			int sum = xq_block(xt + k0, n, &d, &c0, &c1);
			if (fmt == QUANT_Q8) {
				__m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1);
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
				_mm_storeu_si128((__m128i *)(g + 16 * j), c0);
				_mm_storeu_si128((__m128i *)(g + 64 + 16 * j), c1);
				_mm_storeu_ps((float *)(g + 128) + 4 * j, _mm_set1_ps(d));
				_mm_storeu_ps((float *)(g + 192) + 4 * j, _mm_set1_ps(d * (float)sum * 0.25f));
			}
		}
	}
}
