/* engine internal: the decode GEMV kernel variants (engine/backend/cpu/cpu_gemv*.c) behind one table.
 *
 * Each variant is one file compiled with its own -m flags (meson.build) and is only ever called
 * after cpu_gemv.c has checked with cpuid that the CPU (and the OS) runs its instructions.
 * The public entry points are in cpu.h (cpu_gemv_rows and friends).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"

/* The most tokens one kernel call takes (its accumulators fill the registers); cpu_gemv_rows()
 * hands larger T to the kernels in groups of this many. */
#define CPU_GEMV_KERNEL_T 4
/* The most tokens a bf16 kernel call takes on pre-rounded activations (a->xb): they are loaded,
 * not converted, so more accumulators fit beside them. */
#define CPU_GEMV_KERNEL_T_BF16 8

/* The operands of one call. A kernel computes rows [r0, r1) of
 * y[t * ldy + r] (+)= W[r, :] . x[t, :] for t < T, accumulating in fp32.
 * For the quantized kernels (q8, q4, fp8) w is row 0's record (quant.h), ldw the bytes between rows
 * (struct quant_tensor's row_bytes) and dtype is unused. */
struct cpu_gemv_args {
	const void *w;		 /* row 0 of W, in `dtype` */
	enum tensor_dtype dtype; /* bf16, f16 or f32 */
	size_t ldw;		 /* elements between rows of W (bytes for q8, q4) */
	int in;			 /* columns */
	int T;			 /* tokens, 1..CPU_GEMV_KERNEL_T (bf16 weights with xb:
				  * ..CPU_GEMV_KERNEL_T_BF16) */
	const float *x;		 /* activations, rows ldx apart */
	size_t ldx;
	float *y;
	size_t ldy;
	bool accumulate;
	/* NULL, or x rounded to bf16 once for the whole product by the variant's round_x (rows
	 * ldxb apart): its bf16 kernel then reads these instead of x, and takes up to
	 * CPU_GEMV_KERNEL_T_BF16 tokens; or, for fp8_bf16, by fp8_round_x in that kernel's order
	 * (up to CPU_GEMV_KERNEL_T tokens) */
	const uint16_t *xb;
	size_t ldxb;
	/* the integer kernels (q8_i8, q4_i8): x quantized per block by cpu_gemv_quantize_x() for
	 * the weights' format, one token's groups ldxq bytes apart */
	const char *xq;
	size_t ldxq;
};

/* Activations quantized for the integer kernels on q8/q4 weights (cpu_gemv_quant_rows_i8).
 * Each block of 32 of a token's values gets d = max|x| / 127 and codes c = round(x * (127 /
 * max|x|)) (nearest even; a block of zeros: d = 0, c = 0; a block holding a NaN or infinity:
 * d = NaN, c = 0, so its products are NaN as the fp32 ones would be), GGML's Q8_0 of the
 * activations. The codes are laid out for the weights' format, per group of 4 blocks (128
 * columns; the groups past the last column are zero):
 *   q8: int8 c[128] in column order; int32 corr[32]: -128 x the sum of c[4i..4i+3] (the
 *       kernels add 128 to the weight codes to multiply them as unsigned bytes and start each
 *       lane's sum at corr[i] to take it off again); float dl[32]: dl[16p + l] = d of block
 *       2p + l / 8 (the scale of lane l of pair p, 16 lanes per 64 codes); int32 ctot[4]: -128 x the
 *       sum of block j's 32 codes (corr's 8 of it added: the tile kernels' one start), then 48
 *       bytes of zeros.
 *   q4: int8 lo[64]: block b's columns 0..15 at 16b; int8 hi[64]: its columns 16..31 (the
 *       order of the weights' low and high nibbles); float dl[16]: dl[l] = d of block l / 4;
 *       float sl[16]: d x (the sum of block l / 4's codes) / 4 (the minimum's term, spread
 *       over the block's 4 lanes). */
#define CPU_XQ_GROUP 128
#define CPU_XQ_Q8_BYTES 448 /* per group */
#define CPU_XQ_Q8_CTOT 384  /* ctot[4] within a group */
#define CPU_XQ_Q4_BYTES 256
/* bytes per token for `in` columns in `fmt`'s layout (a multiple of 64) */
size_t cpu_gemv_xq_bytes(enum quant_format fmt, int in);
/* quantizes x's T rows of `in` into xq (rows ldxq bytes apart, 64-byte aligned): the reference
 * (portable C), which every variant's quant_x reproduces bit for bit */
void cpu_gemv_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
			 size_t ldxq);

/* the elements between the rows of fp8_round_x's activations: `in` rounded up to whole groups
 * of 64 columns (zeros past `in`), as the fp8 records' codes are (QUANT_ALIGN) */
static inline size_t cpu_gemv_fp8_ldxb(int in)
{
	return ((size_t)in + 63) & ~(size_t)63;
}

typedef void cpu_gemv_fn(const struct cpu_gemv_args *a, int r0, int r1);
typedef void cpu_row_bf16_fn(const void *row, int64_t cols, uint16_t *out);

struct cpu_gemv_variant {
	const char *name;
	/* any weight dtype, fp32 activations (a->x): fp32 products, fp32 sums */
	cpu_gemv_fn *f32;
	/* any weight dtype, activations rounded to bf16 (to nearest even) in registers: the
	 * products of bf16 precision, fp32 sums */
	cpu_gemv_fn *bf16;
	/* NULL, or rounds x's T rows of `in` to bf16 into xb (rows ldxb apart) exactly as the
	 * bf16 kernel rounds them in registers, for a bf16 kernel that reads them (a->xb) */
	void (*round_x)(const float *x, size_t ldx, int T, int in, uint16_t *xb, size_t ldxb);
	/* fp8 weights (quant.h's QUANT_FP8: e4m3 codes, a per-row fp32 scale), fp32 activations:
	 * the codes widened to e4m3(c) * s in registers (cpu_gemv_fp8_*.c), fp32 sums */
	cpu_gemv_fn *fp8;
	/* NULL, or fp8 weights times activations rounded to bf16 (bf16 precision's fp8 decode:
	 * cpu_gemv_quant_rows_i8): fp8_round_x rounds x's T rows into xb in the kernel's column
	 * order, rows cpu_gemv_fp8_ldxb(in) apart, and fp8_bf16 reads them (a->xb, a->ldxb), up to
	 * CPU_GEMV_KERNEL_T tokens; cpu_gemv.c uses them only where cpu_gemv_fp8_bf16_ok() says
	 * the CPU runs them (the AVX512-BF16 variant's also need AVX512-VBMI) */
	cpu_gemv_fn *fp8_bf16;
	void (*fp8_round_x)(const float *x, size_t ldx, int T, int in, uint16_t *xb, size_t ldxb);
	/* quantized weights (quant.h's q8 and q4), fp32 activations (a->x): each block's codes
	 * widened in registers to exactly quant_row_to_f32()'s weights, fp32 products and sums */
	cpu_gemv_fn *q8;
	cpu_gemv_fn *q4;
	/* NULL, or quantized weights times activations quantized to int8 (a->xq: above), integer
	 * products of each block's codes, exact int32 sums per block, then scaled and summed in
	 * fp32: a result differs from the double sum over blocks of d_w d_x (c_w . c_x) (+ m_w d_x
	 * sum(c_x) for q4) by fp32 rounding alone */
	cpu_gemv_fn *q8_i8;
	cpu_gemv_fn *q4_i8;
	/* NULL, or the integer kernels on q4 / q8 tiles (quant.h): a->w is tile 0, a->ldw the bytes
	 * between tiles (QUANT_TILE_ROWS row_bytes); computes tiles [t0, t1), row i of tile t into
	 * y[tok * ldy + (t - t0) * QUANT_TILE_ROWS + i]. Each (row, token) sum is formed the same way
	 * whatever T. Every x86-64 variant has them (VNNI's vpdpbusd, AVX2's and AVX-512F's
	 * vpmaddubsw); a variant without one (the portable C) runs a tiled matrix on its row
	 * kernels, each tile's records gathered first (cpu_gemv.c): the same bits as on the records. */
	cpu_gemv_fn *q4_tile_i8;
	cpu_gemv_fn *q8_tile_i8;
	/* cpu_gemv_quantize_x() in this variant's instructions, the same bytes (NULL: that one) */
	void (*quant_x)(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
			size_t ldxq);
	/* NULL, or one row of that format dequantized and rounded to bf16 (nearest even) in this
	 * variant's instructions: the same bits as quant_row_to_f32() then f32_to_bf16()
	 * (cpu_quant_rows_to_bf16; one per format, as the GEMV kernels above) */
	cpu_row_bf16_fn *q8_to_bf16;
	cpu_row_bf16_fn *q4_to_bf16;
	cpu_row_bf16_fn *fp8_to_bf16;
	/* NULL, or a whole q8/q4 tile's 16 records (quant.h: quant_tile_row_record() of each row,
	 * the same bytes) into recs, row_bytes apart, in this variant's instructions */
	void (*tile_records)(enum quant_format f, int64_t cols, const void *tile, void *recs,
			     size_t row_bytes);
};

extern const struct cpu_gemv_variant cpu_gemv_portable;
/* whether v has fp8_bf16 and this CPU runs it: the variant's own instruction set and, for the
 * AVX512-BF16 variant's, AVX512-VBMI too */
bool cpu_gemv_fp8_bf16_ok(const struct cpu_gemv_variant *v);
#ifdef __AVX2__
#include <immintrin.h>
/* 8 finite fp32 values rounded to bf16, to nearest even in integers (f32_to_bf16()'s bits; no NaN
 * case), packed: the AVX2 variant's rows to bf16 (fp8, q8, q4) */
static inline __m128i cpu_gemv_avx2_round8_bf16(__m256 v)
{
	__m256i u = _mm256_castps_si256(v);
	__m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	u = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
	return _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)); /* 0..0xffff */
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
extern const struct cpu_gemv_variant cpu_gemv_avx2;
extern const struct cpu_gemv_variant cpu_gemv_avx512;
extern const struct cpu_gemv_variant cpu_gemv_avx512bf16;
/* shared by the AVX-512 variants: the AVX512-BF16 one differs only for bf16 weights with bf16
 * activations */
void cpu_gemv_avx512_f32(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx512_bf16(const struct cpu_gemv_args *a, int r0, int r1);
/* the fp8 kernels (cpu_gemv_fp8_avx2.c, cpu_gemv_fp8_avx512.c; AVX512-BF16 shares AVX-512F's) */
void cpu_gemv_avx2_fp8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx2_fp8_row_to_bf16(const void *row, int64_t cols, uint16_t *out);
void cpu_gemv_avx2_q8_to_bf16(const void *row, int64_t cols, uint16_t *out);
void cpu_gemv_avx2_q4_to_bf16(const void *row, int64_t cols, uint16_t *out);
void cpu_gemv_avx512_fp8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx512_fp8_row_to_bf16(const void *row, int64_t cols, uint16_t *out);
/* fp8 weights times bf16 activations on AVX512-BF16 with VBMI (cpu_gemv_fp8_vbmi.c): the rows
 * of xb, cpu_gemv_fp8_ldxb(in) apart, in the kernel's order of each 64 columns */
void cpu_gemv_vbmi_fp8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_vbmi_fp8_round_x(const float *x, size_t ldx, int T, int in, uint16_t *xb, size_t ldxb);
/* the quantized kernels (cpu_gemv_quant_avx2.c, cpu_gemv_quant_avx512.c; the AVX512-BF16
 * variant shares the AVX-512F ones) */
void cpu_gemv_avx2_q8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx2_q4(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx512_q8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx512_q4(const struct cpu_gemv_args *a, int r0, int r1);
/* q8/q4 rows to bf16 on AVX-512F (cpu_gemv_quant_avx512.c: the exact kernels' widening, then
 * rounding to nearest even in integers), in both AVX-512 variants */
void cpu_gemv_avx512_q8_to_bf16(const void *row, int64_t cols, uint16_t *out);
void cpu_gemv_avx512_q4_to_bf16(const void *row, int64_t cols, uint16_t *out);
/* the same bits by AVX512-BF16's vcvtne2ps2bf16 (cpu_gemv_quant_avx512.c) */
void cpu_gemv_avx512bf16_q8_to_bf16(const void *row, int64_t cols, uint16_t *out);
void cpu_gemv_avx512bf16_q4_to_bf16(const void *row, int64_t cols, uint16_t *out);
/* the integer kernels on AVX2 (cpu_gemv_quant_avx2.c: vpmaddubsw), in the AVX2 and AVX-512F
 * variants */
void cpu_gemv_avx2_q8_i8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_avx2_q4_i8(const struct cpu_gemv_args *a, int r0, int r1);
/* the integer kernels on q4 / q8 tiles without VNNI: vpmaddubsw + vpmaddwd on AVX2
 * (cpu_gemv_quant_tile_avx2.c) and on AVX-512F/BW (cpu_gemv_quant_tile_avx512.c), with each
 * instruction set's tile_records (the AVX512-BF16 variant uses AVX-512F's) */
void cpu_gemv_avx2_q4_tile(const struct cpu_gemv_args *a, int t0, int t1);
void cpu_gemv_avx2_q8_tile(const struct cpu_gemv_args *a, int t0, int t1);
void cpu_gemv_avx2_tile_records(enum quant_format f, int64_t cols, const void *tile, void *recs,
				size_t row_bytes);
void cpu_gemv_avx512_q4_tile(const struct cpu_gemv_args *a, int t0, int t1);
void cpu_gemv_avx512_q8_tile(const struct cpu_gemv_args *a, int t0, int t1);
void cpu_gemv_avx512_tile_records(enum quant_format f, int64_t cols, const void *tile, void *recs,
				  size_t row_bytes);
/* The decode kernels read a thread's rows front to back as one stream (q8/q4: its tiles; bf16 on
 * AVX512-BF16: one row at a time for one or two tokens; the AVX-512F variant: one row at a time
 * for one token) and ask for the bytes CPU_GEMV_AHEAD past each 64-byte line they read (one
 * prefetch per line, cpu_gemv_prefetch()): the hardware's prefetchers alone left one-token q8/q4
 * products at 65-86% (1 thread) / 76-96% (2 threads) of the read pass on the AMD EPYC, 8 KiB
 * ahead 91-99% / 93-99% (docs/benchmarks.md, "software prefetch 8 KiB ahead"). Past a
 * thread's last row it asks for the next thread's first (read there) or, at a matrix's end, for
 * at most CPU_GEMV_AHEAD bytes nobody reads: a prefetch never faults. */
#define CPU_GEMV_AHEAD 8192
static inline void cpu_gemv_prefetch(const void *p, size_t n)
{
	cpu_prefetch_ahead(p, n, CPU_GEMV_AHEAD);
}
/* ... for a q8 tile's block b of nb: its codes, and on an even block the pair's scales before
 * them (quant.h's tile layout), CPU_GEMV_AHEAD_Q8_TILE ahead: q8 decode against bf16's in the
 * same rounds (holo-bench engine --weights q8 --vs-bf16, AMD EPYC) went from 1.72-1.73x at 8 KiB
 * to 1.76-1.77x at 4 KiB, three runs of each alternating (2, 3 and 6 KiB: 1.73-1.76x); q4's tiles
 * and bf16's rows showed no such difference and keep CPU_GEMV_AHEAD (docs/benchmarks.md,
 * "q8 tiles asked for 4 KiB ahead"). */
#define CPU_GEMV_AHEAD_Q8_TILE 4096
static inline void cpu_gemv_prefetch_q8_tile(const void *tile, int64_t b, int64_t nb)
{
	const size_t s0 = b % 2 ? quant_q8_tile_codes(b) : quant_q8_tile_d(b, nb);
	cpu_prefetch_ahead((const char *)tile + s0, quant_q8_tile_codes(b) + 512 - s0, CPU_GEMV_AHEAD_Q8_TILE);
}
/* A variant's tile kernels for format F (q8, q4) out of its `tile_F(a, t, y, T)` (one tile, T
 * tokens as a constant after inlining): one instance per token count, and the public
 * cpu_gemv_ISA_F_tile() running tiles [t0, t1) with a->T tokens (1..CPU_GEMV_KERNEL_T). Expanded
 * in each variant's own file (its instructions). */
#define CPU_GEMV_TILE_INSTANCE(F, T)                                                                         \
	static __attribute__((noinline)) void tile_##F##_t##T(const struct cpu_gemv_args *a, int t0, int t1) \
	{                                                                                                    \
		for (int t = t0; t < t1; t++)                                                                \
			tile_##F(a, t, a->y + (size_t)(t - t0) * QUANT_TILE_ROWS, T);                        \
	}
#define CPU_GEMV_TILE_KERNELS(ISA, F)                                                                        \
	CPU_GEMV_TILE_INSTANCE(F, 1)                                                                         \
	CPU_GEMV_TILE_INSTANCE(F, 2)                                                                         \
	CPU_GEMV_TILE_INSTANCE(F, 3)                                                                         \
	CPU_GEMV_TILE_INSTANCE(F, 4)                                                                         \
	void cpu_gemv_##ISA##_##F##_tile(const struct cpu_gemv_args *a, int t0, int t1)                      \
	{                                                                                                    \
		switch (a->T) {                                                                              \
		case 1:                                                                                      \
			tile_##F##_t1(a, t0, t1);                                                            \
			break;                                                                               \
		case 2:                                                                                      \
			tile_##F##_t2(a, t0, t1);                                                            \
			break;                                                                               \
		case 3:                                                                                      \
			tile_##F##_t3(a, t0, t1);                                                            \
			break;                                                                               \
		default:                                                                                     \
			tile_##F##_t4(a, t0, t1);                                                            \
			break;                                                                               \
		}                                                                                            \
	}

/* q4: the d and m (quant_q4_d(), quant_q4_m(): the same values) of 16 or 8 blocks' dz (a tile
 * block's 16 rows, a record's blocks), and the prefetch of a tile's blocks (each its share of its
 * pair's bytes) */
#ifdef __AVX512F__
static inline void cpu_gemv_q4_dz16(__m256i dz, __m512 *d, __m512 *m)
{
	*d = _mm512_cvtph_ps(_mm256_and_si256(_mm256_srli_epi16(dz, 1), _mm256_set1_epi16(QUANT_Q4_D_MASK)));
	const __m512 z =
		_mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_and_si256(dz, _mm256_set1_epi16(63))));
	*m = _mm512_mul_ps(*d, _mm512_mul_ps(z, _mm512_set1_ps(-0.25f)));
}
#endif
#ifdef __AVX2__
static inline void cpu_gemv_q4_dz8(__m128i dz, __m256 *d, __m256 *m)
{
	*d = _mm256_cvtph_ps(_mm_and_si128(_mm_srli_epi16(dz, 1), _mm_set1_epi16(QUANT_Q4_D_MASK)));
	const __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_and_si128(dz, _mm_set1_epi16(63))));
	*m = _mm256_mul_ps(*d, _mm256_mul_ps(z, _mm256_set1_ps(-0.25f)));
}
#endif
/* tile_records' scales: block b's 16 uint16 scales (q8's d, q4's dz) from the tile into the 16
 * records dst[i] (behind their codes' padded bytes); the codes are each variant's transpose */
static inline void cpu_gemv_tile_scales_to_records(enum quant_format f, int64_t cols, int64_t b,
						   const void *tile, char *const *dst)
{
	const int64_t nb = quant_blocks(cols);
	const size_t soff = quant_round_align((size_t)nb * (f == QUANT_Q8 ? 32 : 16));
	uint16_t s[QUANT_TILE_ROWS];
	memcpy(s, (const char *)tile + (f == QUANT_Q8 ? quant_q8_tile_d(b, nb) : quant_q4_tile_dz(b)),
	       sizeof(s));
	for (int i = 0; i < QUANT_TILE_ROWS; i++)
		memcpy(dst[i] + soff + 2 * (size_t)b, &s[i], 2);
}
/* q4 tiles: every block asks for its share of the pair's 576 bytes, CPU_GEMV_AHEAD ahead (the
 * even block its codes' 4 lines, the odd one its 4 and the pair's dz line), so the prefetches
 * run evenly with the loads; asking for the pair's 9 lines at once on the even block left a
 * one-token q4 decode at 81-83% of the read pass where this gives 84-86% (steady mode, AMD EPYC,
 * docs/benchmarks.md "q4 tiles' prefetch spread over the blocks"). An odd last block (alone in
 * its 576 bytes) asks for 4 of its 9 lines: a gap at each tile's end where the block count is
 * odd. */
static inline void cpu_gemv_prefetch_q4_tile(const char *tile, int64_t b)
{
	cpu_gemv_prefetch(tile + quant_q4_tile_codes(b), (b & 1) ? 320 : 256);
}

/* cpu_gemv_quantize_x() in AVX2 and in AVX-512F instructions (the same files; the same bytes) */
void cpu_gemv_avx2_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
			      size_t ldxq);
void cpu_gemv_avx512_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
				size_t ldxq);
/* the integer kernels on AVX512-VNNI (cpu_gemv_quant_vnni.c), in the AVX512-BF16 variant (every
 * CPU with AVX512-BF16 has AVX512-VNNI, and cpu_isa requires both) */
void cpu_gemv_vnni_q8(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_vnni_q4(const struct cpu_gemv_args *a, int r0, int r1);
void cpu_gemv_vnni_q4_tile(const struct cpu_gemv_args *a, int t0, int t1);
void cpu_gemv_vnni_q8_tile(const struct cpu_gemv_args *a, int t0, int t1);
#endif
