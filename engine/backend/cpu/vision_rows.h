/* engine internal: the row kernels of the ViT and projector in bf16 precision
 * (vision_rows.c, vision_rows_simd.c), in variants behind one table.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * Each kernel works on one row in fp32 and writes the bf16 (round to nearest even) values the
 * next matrix product reads. The variants are one source (vision_rows_simd.c) compiled per
 * instruction set with its own -m flags and vector width (meson.build): "portable" (GCC/clang
 * vector extensions, 4 lanes, no flags), "avx2" (8 lanes, AVX2+FMA), "avx512" (16 lanes,
 * AVX-512F). cpu_isa_pick() chooses one (cpu_isa.h). They differ
 * from each other only in summation order and fused multiply-adds; exp and erf are
 * approximations (exp: Cephes' expf polynomial, relative error < 2e-7 over its range; erf:
 * Eigen's rational approximation, absolute error < 4e-7 with x clamped to [-4, 4]), below
 * bf16's resolution (2^-8).
 *
 * The fp32 precision path does not use them: vision_vit.c's scalar steps stay its reference.
 */
#pragma once

#include <stddef.h>

#include "cpu_isa.h"
#include <stdint.h>

struct vision_rows_variant {
	const char *name;
	/* x[i] += add[i] (stored back, when add is not NULL), then
	 * out[i] = bf16((x[i] - mean) / sqrt(var + eps) * g[i] + b[i]); fp32 sums */
	void (*layernorm_bf16)(float *x, const float *add, const float *g, const float *b, int n, float eps,
			       uint16_t *out);
	/* out[i] = bf16(x[i] * g[i] / sqrt(mean(x^2) + eps)); fp32 sum of squares */
	void (*rmsnorm_bf16)(const float *x, const float *g, int n, float eps, uint16_t *out);
	/* out[i] = bf16(gelu(x[i] + b[i])), the exact (erf) GELU */
	void (*bias_gelu_bf16)(const float *x, const float *b, int n, uint16_t *out);
	/* out[i] = bf16(x[i] + b[i]) (b NULL: bf16(x[i])) */
	void (*bias_bf16)(const float *x, const float *b, int n, uint16_t *out);
	/* out[i] = bf16(exp((s[i] - max(s)) * scale)), scale > 0; returns the sum of the bf16
	 * values written (the softmax's denominator for the rounded numerators) */
	float (*softmax_bf16)(const float *s, int n, float scale, uint16_t *out);
	/* out[i] = bf16(x[i] * a) */
	void (*scale_bf16)(const float *x, float a, int n, uint16_t *out);
	/* out[i] = bf16(max(x[i], 0)^2) (NaN becomes 0) */
	void (*relu2_bf16)(const float *x, int n, uint16_t *out);
	/* x[i] += b[i] */
	void (*bias_add)(float *x, const float *b, int n);
};

extern const struct vision_rows_variant vision_rows_portable;
#if defined(__x86_64__) && defined(__GNUC__)
extern const struct vision_rows_variant vision_rows_avx2;
extern const struct vision_rows_variant vision_rows_avx512;
#endif

/* The variant in use: the most capable one up to cpu_isa() (cpu_isa.h: avx512bf16 and amx run
 * avx512's), and its set. */
const struct vision_rows_variant *vision_rows(void);
enum cpu_isa vision_rows_isa(void);
/* The name of variant i (0: portable, then in order of capability), NULL past the last. */
const char *vision_rows_variant_name(int i);
