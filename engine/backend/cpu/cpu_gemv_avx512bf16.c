/* Decode GEMV, AVX512-BF16 variant (compiled with -mavx512f -mavx512bw -mavx512bf16; cpu_gemv.c
 * calls it only where cpuid says the CPU runs it).
 *
 * With bf16 activations one vdpbf16ps multiplies 32 weight/activation pairs and adds them into 16
 * fp32 lanes, half the instructions of widening the weights and FMA-ing them (the AVX-512F
 * variant). cpu_gemv.c rounds the activations to bf16 once per product (round_x: vcvtne2ps2bf16,
 * nearest even, fp32 denormals read as zero as vdpbf16ps does, per 32-column block) and the
 * kernels load them as they are: rounding them in registers for every row of the weights kept a
 * one-token product at ~55% of the read bandwidth (three loads and a conversion per weight
 * vector). One or two tokens (decode): one row at a time, front to back, each line's bytes
 * CPU_GEMV_AHEAD ahead asked for (cpu_gemv.h), so a thread's range is one sequential stream;
 * more tokens (the decode rows of several sessions, compute-bound): a few rows share each
 * activation load. Every (row, token) sums in
 * the same order in every kernel (block() below), so the results of a token do not depend on
 * the others of its call, bit for bit. Without memory for the rounded copy the kernels round in
 * registers, the same bits. fp32 activations take the AVX-512F code, and so do f16 and f32
 * weights. */
#include "cpu_gemv.h"

#include <assert.h>
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

/* one 32-column block of a row of x, rounded to bf16 (the tail's missing columns zero) */
INL __m512bh round_block(const float *x, __mmask32 m)
{
	return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps((__mmask16)(m >> 16), x + 16),
				   _mm512_maskz_loadu_ps((__mmask16)m, x));
}

static void round_x(const float *x, size_t ldx, int T, int in, uint16_t *xb, size_t ldxb)
{
	for (int t = 0; t < T; t++)
		for (int i = 0; i < in; i += 32) {
			__mmask32 m =
				in - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (in - i)) - 1u);
			_mm512_mask_storeu_epi16(xb + (size_t)t * ldxb + (size_t)i, m,
						 (__m512i)round_block(x + (size_t)t * ldx + (size_t)i, m));
		}
}

/* Adds the 32-column block at column i (m: its columns) of NR rows from r times T tokens into
 * acc[q][t]: the activations as a->xb holds them (pre) or rounded here from a->x. */
INL void step(const struct cpu_gemv_args *a, __m512 acc[][CPU_GEMV_KERNEL_T_BF16], int r, int i, __mmask32 m,
	      const int NR, const int T, const bool pre, const bool full)
{
	const uint16_t *w = a->w;
	const size_t ldw = a->ldw, base = (size_t)r * ldw;
	__m512bh xv[CPU_GEMV_KERNEL_T_BF16];
	for (int t = 0; t < T; t++) {
		if (pre) {
			const uint16_t *x = a->xb + (size_t)t * a->ldxb + (size_t)i;
			xv[t] = (__m512bh)(full ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi16(m, x));
		} else {
			xv[t] = round_block(a->x + (size_t)t * a->ldx + (size_t)i, m);
		}
	}
	for (int q = 0; q < NR; q++) {
		const uint16_t *p = w + base + (size_t)q * ldw + (size_t)i;
		/* more than one row: the next block's rows are read too, as their own streams */
		if (NR > 1 && full)
			_mm_prefetch((const char *)(p + (size_t)NR * ldw), _MM_HINT_T0);
		if (NR == 1 && full)
			cpu_gemv_prefetch(p, 64);
		__m512bh wv = (__m512bh)(full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(m, p));
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_dpbf16_ps(acc[q][t], wv, xv[t]);
	}
}

/* NR rows from r against T tokens. Each (row, token) sums into two accumulators, the even and
 * the odd 32-column blocks (two dependency chains: one chain left a row-at-a-time product at
 * ~80% of the read bandwidth, two at ~100%; AMD EPYC, docs/benchmarks.md), added before the
 * final reduction: whatever NR and T, every kernel sums each (row, token) in this order, so a
 * token's results never depend on the others of its call. Whole blocks with plain loads, the
 * tail masked (zeros add nothing). */
INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const bool pre)
{
	const int n = a->in;
	const __mmask32 all = (__mmask32)0xffffffffu;
	__m512 e[4][CPU_GEMV_KERNEL_T_BF16], o[4][CPU_GEMV_KERNEL_T_BF16];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			e[q][t] = o[q][t] = _mm512_setzero_ps();
	int i = 0;
	for (; i + 64 <= n; i += 64) {
		step(a, e, r, i, all, NR, T, pre, true);
		step(a, o, r, i + 32, all, NR, T, pre, true);
	}
	if (i + 32 <= n) {
		step(a, e, r, i, all, NR, T, pre, true);
		i += 32;
		if (i < n)
			step(a, o, r, i, (__mmask32)((1u << (n - i)) - 1u), NR, T, pre, false);
	} else if (i < n) {
		step(a, e, r, i, (__mmask32)((1u << (n - i)) - 1u), NR, T, pre, false);
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(_mm512_add_ps(e[q][t], o[q][t]));
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T, const bool pre)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block(a, r, NR, T, pre);
	for (; r < r1; r++)
		block(a, r, 1, T, pre);
}

/* 7 or 8 tokens: two rows at a time, the first four tokens and then the rest over the pair's
 * weights (back from L1/L2): two accumulators a (row, token) leave no room for 2 rows x 8 tokens,
 * and one row at a time loads 9 vectors for 8 products */
INL void rows_split(const struct cpu_gemv_args *a, int r0, int r1, const int T)
{
	struct cpu_gemv_args hi = *a;
	hi.xb += 4 * a->ldxb;
	hi.y += 4 * a->ldy;
	int r = r0;
	for (; r + 2 <= r1; r += 2) {
		block(a, r, 2, 4, true);
		block(&hi, r, 2, T - 4, true);
	}
	if (r < r1) {
		block(a, r, 1, 4, true);
		block(&hi, r, 1, T - 4, true);
	}
}

/* Rows per block by tokens: one or two tokens, one row at a time, so that a thread's range is
 * one sequential stream, asked for ahead (4 rows interleaved read at ~68% of one row's rate
 * before the prefetch, docs/benchmarks.md); past that the products are compute-bound and the rows of
 * a block share each activation load: two rows for 3 to 6 tokens (up to 24 accumulators), two
 * rows in two passes for 7 and 8. */
#define PRE(T, NR)                                                                                           \
	NOINL void p##T(const struct cpu_gemv_args *a, int r0, int r1)                                       \
	{                                                                                                    \
		rows(a, r0, r1, NR, T, true);                                                                \
	}
#define SPLIT(T)                                                                                             \
	NOINL void p##T(const struct cpu_gemv_args *a, int r0, int r1)                                       \
	{                                                                                                    \
		rows_split(a, r0, r1, T);                                                                    \
	}
#define REG(T, NR)                                                                                           \
	NOINL void x##T(const struct cpu_gemv_args *a, int r0, int r1)                                       \
	{                                                                                                    \
		rows(a, r0, r1, NR, T, false);                                                               \
	}
PRE(1, 1)
PRE(2, 1)
PRE(3, 2)
PRE(4, 2)
PRE(5, 2)
PRE(6, 2)
SPLIT(7)
SPLIT(8)
REG(1, 1)
REG(2, 1)
REG(3, 2)
REG(4, 2)

static cpu_gemv_fn *const pre[CPU_GEMV_KERNEL_T_BF16] = {p1, p2, p3, p4, p5, p6, p7, p8};
/* without the rounded copy (no memory for it): the activations rounded in registers, the same
 * bits; up to CPU_GEMV_KERNEL_T tokens a call */
static cpu_gemv_fn *const reg[CPU_GEMV_KERNEL_T] = {x1, x2, x3, x4};

static void gemv_bf16x(const struct cpu_gemv_args *a, int r0, int r1)
{
	if (a->dtype != TENSOR_BF16) {
		cpu_gemv_avx512_bf16(a, r0, r1);
		return;
	}
	if (a->xb) {
		assert(a->T >= 1 && a->T <= CPU_GEMV_KERNEL_T_BF16);
		pre[a->T - 1](a, r0, r1);
	} else {
		assert(a->T >= 1 && a->T <= CPU_GEMV_KERNEL_T);
		reg[a->T - 1](a, r0, r1);
	}
}

const struct cpu_gemv_variant cpu_gemv_avx512bf16 = {
	.name = "avx512bf16",
	.f32 = cpu_gemv_avx512_f32,
	.bf16 = gemv_bf16x,
	.fp8 = cpu_gemv_avx512_fp8,
	.fp8_bf16 = cpu_gemv_vbmi_fp8, /* where cpuid shows VBMI too (cpu_gemv.c) */
	.fp8_round_x = cpu_gemv_vbmi_fp8_round_x,
	.fp8_to_bf16 = cpu_gemv_avx512_fp8_row_to_bf16,
	.q8_to_bf16 = cpu_gemv_avx512bf16_q8_to_bf16,
	.q4_to_bf16 = cpu_gemv_avx512bf16_q4_to_bf16,
	.round_x = round_x,
	.q8 = cpu_gemv_avx512_q8,
	.q4 = cpu_gemv_avx512_q4,
	.q8_i8 = cpu_gemv_vnni_q8,
	.q4_i8 = cpu_gemv_vnni_q4,
	.q4_tile_i8 = cpu_gemv_vnni_q4_tile,
	.q8_tile_i8 = cpu_gemv_vnni_q8_tile,
	.tile_records = cpu_gemv_avx512_tile_records, /* AVX-512F's transposes */
	.quant_x = cpu_gemv_avx512_quantize_x,	      /* AVX-512F's: the same bytes */
};
