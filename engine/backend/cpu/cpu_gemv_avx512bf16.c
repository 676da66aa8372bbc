/* Decode GEMV, AVX512-BF16 variant (compiled with -mavx512f -mavx512bw -mavx512bf16; cpu_gemv.c
 * calls it only where cpuid says the CPU runs it).
 *
 * With bf16 activations one vdpbf16ps multiplies 32 weight/activation pairs and adds them into 16
 * fp32 lanes, half the instructions of widening the weights and FMA-ing them (the AVX-512F
 * variant). One token (decode): one row at a time, front to back, nothing prefetched by hand,
 * so a thread's range is one sequential stream the hardware's prefetchers follow (as in
 * cpu_gemv_quant_vnni.c, where the A/B is told): 8 rows interleaved with the next 8 prefetched
 * read 8 short streams at once and stayed well below one row's rate on the lm head's shape
 * (docs/benchmarks.md, "Figures behind the code's constants"). Two to four tokens: NR consecutive rows
 * against T tokens, one accumulator per (row, token), the next block's rows prefetched. The activations are
 * rounded to bf16 in registers (vcvtne2ps2bf16: nearest even; it reads fp32 denormals as zero, as vdpbf16ps
 * does). The column tail is a masked load (zeros add nothing). fp32 activations take the AVX-512F code, and
 * so do f16 and f32 weights.
 *
 * More tokens (the decode rows of several sessions): cpu_gemv.c rounds the activations once per
 * product (round_x, the same instruction on the same 32-column blocks, so the same bf16 values)
 * and the kernel loads them as they are: without the conversions, 3 rows x 8 tokens of
 * accumulators fit, each weight vector loaded once for 8 tokens. Every (row, token) sum is still
 * one accumulator over the columns in order: the results are those of the 4-token kernels, bit
 * for bit. */
#include "cpu_gemv.h"

#include <immintrin.h>

#define INL static inline __attribute__((always_inline))
#define NOINL static __attribute__((noinline))

INL void block(const struct cpu_gemv_args *a, int r, const int NR, const int T, const bool pf)
{
	const uint16_t *w = a->w;
	const size_t ldw = a->ldw, base = (size_t)r * ldw, ahead = (size_t)NR * ldw;
	const int n = a->in;
	__m512 acc[4][CPU_GEMV_KERNEL_T];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	int i = 0;
	/* whole 32-column blocks with plain loads (masked ones cost ~10% at 8 tokens), then the
	 * tail masked (zeros add nothing): the same sums in the same order */
	for (; i + 32 <= n; i += 32) {
		__m512bh xv[CPU_GEMV_KERNEL_T];
		for (int t = 0; t < T; t++) {
			const float *x = a->x + (size_t)t * a->ldx + i;
			xv[t] = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
		}
		for (int q = 0; pf && q < NR; q++)
			_mm_prefetch((const char *)(w + base + ahead + (size_t)q * ldw + (size_t)i),
				     _MM_HINT_T0);
		for (int q = 0; q < NR; q++) {
			__m512bh wv = (__m512bh)_mm512_loadu_si512(w + base + (size_t)q * ldw + (size_t)i);
			for (int t = 0; t < T; t++)
				acc[q][t] = _mm512_dpbf16_ps(acc[q][t], wv, xv[t]);
		}
	}
	if (i < n) {
		__mmask32 m = (__mmask32)((1u << (n - i)) - 1u);
		__m512bh xv[CPU_GEMV_KERNEL_T];
		for (int t = 0; t < T; t++) {
			const float *x = a->x + (size_t)t * a->ldx + i;
			xv[t] = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps((__mmask16)(m >> 16), x + 16),
						    _mm512_maskz_loadu_ps((__mmask16)m, x));
		}
		for (int q = 0; q < NR; q++) {
			__m512bh wv =
				(__m512bh)_mm512_maskz_loadu_epi16(m, w + base + (size_t)q * ldw + (size_t)i);
			for (int t = 0; t < T; t++)
				acc[q][t] = _mm512_dpbf16_ps(acc[q][t], wv, xv[t]);
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(acc[q][t]);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

INL void rows(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block(a, r, NR, T, true);
	for (; r < r1; r++)
		block(a, r, 1, T, true);
}

NOINL void t1(const struct cpu_gemv_args *a, int r0, int r1)
{
	for (int r = r0; r < r1; r++)
		block(a, r, 1, 1, false);
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

/* one 32-column block of a row of x, rounded as block() rounds it */
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

/* block() on pre-rounded activations */
INL void block_pre(const struct cpu_gemv_args *a, int r, const int NR, const int T)
{
	const uint16_t *w = a->w;
	const size_t ldw = a->ldw, base = (size_t)r * ldw, ahead = (size_t)NR * ldw;
	const int n = a->in;
	__m512 acc[4][CPU_GEMV_KERNEL_T_BF16];
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++)
			acc[q][t] = _mm512_setzero_ps();
	int i = 0;
	/* as block(): whole blocks with plain loads, the tail masked */
	for (; i + 32 <= n; i += 32) {
		__m512bh wv[4];
		for (int q = 0; q < NR; q++) {
			_mm_prefetch((const char *)(w + base + ahead + (size_t)q * ldw + (size_t)i),
				     _MM_HINT_T0);
			wv[q] = (__m512bh)_mm512_loadu_si512(w + base + (size_t)q * ldw + (size_t)i);
		}
		for (int t = 0; t < T; t++) {
			__m512bh xv = (__m512bh)_mm512_loadu_si512(a->xb + (size_t)t * a->ldxb + (size_t)i);
			for (int q = 0; q < NR; q++)
				acc[q][t] = _mm512_dpbf16_ps(acc[q][t], wv[q], xv);
		}
	}
	if (i < n) {
		__mmask32 m = (__mmask32)((1u << (n - i)) - 1u);
		__m512bh wv[4];
		for (int q = 0; q < NR; q++)
			wv[q] = (__m512bh)_mm512_maskz_loadu_epi16(m, w + base + (size_t)q * ldw + (size_t)i);
		for (int t = 0; t < T; t++) {
			__m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, a->xb + (size_t)t * a->ldxb +
										    (size_t)i);
			for (int q = 0; q < NR; q++)
				acc[q][t] = _mm512_dpbf16_ps(acc[q][t], wv[q], xv);
		}
	}
	for (int q = 0; q < NR; q++)
		for (int t = 0; t < T; t++) {
			float s = _mm512_reduce_add_ps(acc[q][t]);
			float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
			*p = a->accumulate ? *p + s : s;
		}
}

INL void rows_pre(const struct cpu_gemv_args *a, int r0, int r1, const int NR, const int T)
{
	int r = r0;
	for (; r + NR <= r1; r += NR)
		block_pre(a, r, NR, T);
	for (; r < r1; r++)
		block_pre(a, r, 1, T);
}

/* 4 rows up to 6 tokens, 3 rows for 7 and 8 (24 accumulators, 3 weights and x in 28 zmm) */
#define PRE(T, NR)                                                                                           \
	NOINL void p##T(const struct cpu_gemv_args *a, int r0, int r1)                                       \
	{                                                                                                    \
		rows_pre(a, r0, r1, NR, T);                                                                  \
	}
PRE(1, 4)
PRE(2, 4)
PRE(3, 4)
PRE(4, 4)
PRE(5, 4)
PRE(6, 4)
PRE(7, 3)
PRE(8, 3)

static cpu_gemv_fn *const pre[CPU_GEMV_KERNEL_T_BF16] = {p1, p2, p3, p4, p5, p6, p7, p8};

static void gemv_bf16x(const struct cpu_gemv_args *a, int r0, int r1)
{
	if (a->dtype != TENSOR_BF16) {
		cpu_gemv_avx512_bf16(a, r0, r1);
		return;
	}
	if (a->xb) {
		pre[a->T - 1](a, r0, r1);
		return;
	}
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

const struct cpu_gemv_variant cpu_gemv_avx512bf16 = {
	.name = "avx512bf16",
	.f32 = cpu_gemv_avx512_f32,
	.bf16 = gemv_bf16x,
	.fp8 = cpu_gemv_avx512_fp8,
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
	.quant_x = cpu_gemv_vnni_quantize_x,
};
