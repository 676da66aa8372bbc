/* Decode GEMV on fp8 weights (quant.h's QUANT_FP8: e4m3 codes, a per-row fp32 scale) times
 * activations rounded to bf16: bf16 precision's fp8 decode, on AVX512-BF16 with AVX512-VBMI
 * (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx512vbmi; cpu_gemv.c calls it
 * only in the AVX512-BF16 variant and only where cpuid also shows VBMI: every AVX512-BF16 CPU but
 * Cooper Lake).
 *
 * Why: widening the codes to fp32 (cpu_gemv_fp8_avx512.c: a sign-extend, a shift, a mask and a
 * vcvtph2ps per 16 codes, then a multiply and an FMA per token) kept that kernel at ~30 GB/s of
 * codes on one core with the matrix in cache, below one core's share of the read bandwidth, so
 * fp8 decoded at ~69% of the read pass on one thread where q8 read at ~91% (docs/benchmarks.md,
 * "fp8 on vdpbf16ps"). Every e4m3 value is exactly a bf16 (3 mantissa bits of bf16's 7,
 * exponents 2^-9 .. 2^8 inside its range, the subnormals too), so a code's bf16 is a table
 * lookup: per 64 codes two vpermi2b over 128-entry tables (the low and the high byte of the
 * magnitude's bf16; vpermi2b reads 7 index bits, so the sign bit is ignored), one vpternlogd to
 * put the sign back, two vpunpck{l,h}bw to pair the bytes into words, and one vdpbf16ps per 32
 * pairs and token. The unpacks pair the bytes within each 128-bit lane, so a 64-column group's
 * words come out in the order (0..7, 16..23, 32..39, 48..55) then (8..15, 24..31, 40..47,
 * 56..63): the activations are rounded once per product into that order (cpu_gemv_vbmi_fp8_round_x),
 * which costs nothing per weight. The row's scale multiplies the row's sum once.
 *
 * Sums: per (row, token) four fp32 accumulators, the two halves of even and of odd 64-column
 * steps (the chains of one token are then four vdpbf16ps long per two steps, which one core's
 * latency would otherwise bound), added as (even A + even B) + (odd A + odd B) and reduced; then
 * times the scale, and added to y when asked. Every (row, token) is formed the same way whatever
 * T, so a token's result is the same bits alone or in a batch. One row at a time, front to
 * back, each line's bytes CPU_GEMV_AHEAD ahead asked for (cpu_gemv.h): a thread's rows are one
 * stream. The records' codes are padded with zero codes to 64 bytes (QUANT_ALIGN) and the
 * rounded activations with zeros to the same columns, so no load is masked. A NaN code (which
 * the loader refuses) would read as a bf16 NaN, as quant_row_to_f32() gives it. */
#include "cpu_gemv.h"

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "quant.h"

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* the bf16 bits of e4m3 magnitude m (0..127): 0; subnormals m 2^-9; normals 2^(e-7) (1 + f/8),
 * bf16's exponent field e + 120 and mantissa f << 4 (0x3c00 + (m << 4)); 127 is NaN */
#define BF(m)                                                                                                \
	((m) == 0   ? 0x0000 :                                                                               \
	 (m) == 1   ? 0x3b00 :                                                                               \
	 (m) == 2   ? 0x3b80 :                                                                               \
	 (m) == 3   ? 0x3bc0 :                                                                               \
	 (m) == 4   ? 0x3c00 :                                                                               \
	 (m) == 5   ? 0x3c20 :                                                                               \
	 (m) == 6   ? 0x3c40 :                                                                               \
	 (m) == 7   ? 0x3c60 :                                                                               \
	 (m) == 127 ? 0x7fc0 :                                                                               \
		      0x3c00 + ((m) << 4))
#define LO(m) (uint8_t)(BF(m) & 0xff)
#define HI(m) (uint8_t)(BF(m) >> 8)
#define R4(f, b) f(b), f(b + 1), f(b + 2), f(b + 3)
#define R16(f, b) R4(f, b), R4(f, b + 4), R4(f, b + 8), R4(f, b + 12)
#define R128(f) R16(f, 0), R16(f, 16), R16(f, 32), R16(f, 48), R16(f, 64), R16(f, 80), R16(f, 96), R16(f, 112)

static const uint8_t lo_bytes[128] __attribute__((aligned(64))) = {R128(LO)};
static const uint8_t hi_bytes[128] __attribute__((aligned(64))) = {R128(HI)};

/* The word order of a 64-column group (above): position i of the first 32 holds column
 * 16 (i / 8) + i % 8, of the second 32 that plus 8. */
static const uint16_t order[64] __attribute__((aligned(64))) = {
#define A8(b) b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7
	A8(0),	A8(16), A8(32), A8(48), A8(8),
	A8(24), A8(40), A8(56)
#undef A8
};

void cpu_gemv_vbmi_fp8_round_x(const float *x, size_t ldx, int T, int in, uint16_t *xb, size_t ldxb)
{
	const __m512i ia = _mm512_load_si512(order), ib = _mm512_load_si512(order + 32);
	for (int t = 0; t < T; t++) {
		const float *xt = x + (size_t)t * ldx;
		uint16_t *o = xb + (size_t)t * ldxb;
		for (int k = 0; k < in; k += 64) {
			__m512 v[4];
			for (int i = 0; i < 4; i++) {
				const int n = in - k - 16 * i;
				const __mmask16 m = n >= 16 ? (__mmask16)0xffff :
						    n <= 0  ? (__mmask16)0 :
							      (__mmask16)((1u << n) - 1);
				v[i] = _mm512_maskz_loadu_ps(m, xt + k + 16 * i);
			}
			/* columns 0..31 and 32..63 rounded (nearest even, as the AVX512-BF16 variant's
			 * round_x), then put in the group's order */
			const __m512i n0 = (__m512i)_mm512_cvtne2ps_pbh(v[1], v[0]);
			const __m512i n1 = (__m512i)_mm512_cvtne2ps_pbh(v[3], v[2]);
			_mm512_storeu_si512(o + k, _mm512_permutex2var_epi16(n0, ia, n1));
			_mm512_storeu_si512(o + k + 32, _mm512_permutex2var_epi16(n0, ib, n1));
		}
	}
}

/* one 64-column step s of the row's codes c into acc[0..1][t] (the step's parity's pair) */
INL void step(const struct cpu_gemv_args *a, const uint8_t *c, int s, __m512 acc[2][CPU_GEMV_KERNEL_T],
	      const int T)
{
	const __m512i la = _mm512_load_si512(lo_bytes), lb = _mm512_load_si512(lo_bytes + 64);
	const __m512i ha = _mm512_load_si512(hi_bytes), hb = _mm512_load_si512(hi_bytes + 64);
	cpu_gemv_prefetch(c + 64 * (size_t)s, 64);
	const __m512i v = _mm512_loadu_si512(c + 64 * (size_t)s);
	const __m512i lo = _mm512_permutex2var_epi8(la, v, lb);
	/* hi | (v & 0x80) */
	const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(ha, v, hb), v,
						     _mm512_set1_epi8((char)0x80), 0xf8);
	const __m512bh w0 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
	const __m512bh w1 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
	for (int t = 0; t < T; t++) {
		const uint16_t *xt = a->xb + (size_t)t * a->ldxb + 64 * (size_t)s;
		acc[0][t] = _mm512_dpbf16_ps(acc[0][t], w0, (__m512bh)_mm512_loadu_si512(xt));
		acc[1][t] = _mm512_dpbf16_ps(acc[1][t], w1, (__m512bh)_mm512_loadu_si512(xt + 32));
	}
}

INL void row(const struct cpu_gemv_args *a, int r, const int T)
{
	const int steps = (a->in + 63) / 64;
	const size_t soff = quant_round_align((size_t)quant_blocks(a->in) * 32);
	const uint8_t *c = (const uint8_t *)a->w + (size_t)r * a->ldw;
	/* even[h][t], odd[h][t]: half h of the group's order */
	__m512 even[2][CPU_GEMV_KERNEL_T], odd[2][CPU_GEMV_KERNEL_T];
	for (int t = 0; t < T; t++)
		even[0][t] = even[1][t] = odd[0][t] = odd[1][t] = _mm512_setzero_ps();
	int s = 0;
	for (; s + 2 <= steps; s += 2) {
		step(a, c, s, even, T);
		step(a, c, s + 1, odd, T);
	}
	if (s < steps)
		step(a, c, s, even, T);
	float scale;
	memcpy(&scale, (const char *)c + soff, sizeof(scale));
	for (int t = 0; t < T; t++) {
		const __m512 e = _mm512_add_ps(even[0][t], even[1][t]);
		const __m512 o = _mm512_add_ps(odd[0][t], odd[1][t]);
		const float v = _mm512_reduce_add_ps(_mm512_add_ps(e, o)) * scale;
		float *y = a->y + (size_t)t * a->ldy + (size_t)r;
		*y = a->accumulate ? *y + v : v;
	}
}

#define TOKENS(T)                                                                                            \
	NOINL void t##T(const struct cpu_gemv_args *a, int r0, int r1)                                       \
	{                                                                                                    \
		for (int r = r0; r < r1; r++)                                                                \
			row(a, r, T);                                                                        \
	}
TOKENS(1)
TOKENS(2)
TOKENS(3)
TOKENS(4)

void cpu_gemv_vbmi_fp8(const struct cpu_gemv_args *a, int r0, int r1)
{
	static cpu_gemv_fn *const by_tokens[CPU_GEMV_KERNEL_T] = {t1, t2, t3, t4};
	assert(a->T >= 1 && a->T <= CPU_GEMV_KERNEL_T && a->xb);
	by_tokens[a->T - 1](a, r0, r1);
}
