/* engine internal: the Mamba-2 chunked scan (SSD) of bf16 prefill as small matrix products on
 * oneDNN (cpu_ssd.c).
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * The same arithmetic as lm_ssm_chunked() (lm.h), on the same chunks, but every matrix product
 * takes bf16 inputs (rounded to nearest even) with fp32 sums, through cpu_dnnl_small_*: per chunk
 * and group C B^T, per head (C B^T o decay o dt) X, the chunk's own state (X o coef)^T B for the
 * heads of a group at once, and C S^T of the state carried in. The decays (exp of the cumulative
 * dt A), the skip D x and the state recurrence between chunks stay fp32; the state enters its
 * product rounded to bf16 and is stored fp32.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "dims.h"

/* The scan's row kernels, one set per instruction set: the portable loops (cpu_ssd.c) and, on
 * x86, cpu_ssd_avx512.c compiled for AVX-512 and again for AVX512-BF16. */
struct cpu_ssd_kernels {
	/* out[s] = exp(base - cum[s]) dth[s] for s < n */
	void (*decay)(float *out, float base, const float *cum, const float *dth, int n);
	/* a head's masked decay matrix in bf16, dst[l][s] = bf16(cb[l][s] exp(cum[l] - cum[s])
	 * dth[s]) for s <= l, 0 for l < s < L, rows L apart (dst and cb); cum non-increasing (dt >=
	 * 0, A <= 0), so that exp(cum[l] - cum[s]) may be taken as the product of two factors
	 * <= 1. tmp: L floats. */
	void (*mask)(uint16_t *dst, const float *cb, const float *cum, const float *dth, int L, float *tmp);
	/* dst[c][r] = src[r][c] for r < rows, c < cols */
	void (*transpose)(float *dst, size_t ldd, const float *src, size_t lds, int rows, int cols);
	/* x16[i] = bf16(x[i]), xc16[i] = bf16(x[i] k) for i < n */
	void (*pack_x)(uint16_t *x16, uint16_t *xc16, const float *x, float k, int n);
	/* dst[i] = bf16(src[i]) for i < n */
	void (*round_bf16)(uint16_t *dst, const float *src, int n);
	/* o[i] = yd[i] + e yo[i] + dk x[i] for i < n */
	void (*combine)(float *o, const float *yd, float e, const float *yo, float dk, const float *x, int n);
	/* st[i] = e st[i] + sl[i] for i < n */
	void (*decay_add)(float *st, float e, const float *sl, int n);
};
extern const struct cpu_ssd_kernels cpu_ssd_avx512, cpu_ssd_avx512bf16;
/* The row kernels' set in use (portable, avx512 or avx512bf16: cpu_isa_pick(), cpu_isa.h). */
enum cpu_isa cpu_ssd_isa(void);

/* Spans shorter than this stay on lm_ssm_chunked() (T = 1 is decode's lm_ssm_scan()): the
 * state's transposes and oneDNN's per-product cost are fixed per span. Measured on holo-bench's
 * model shapes, one thread of the AMX Xeon: 0.46 ms a layer for the fp32 scan against 0.58 at
 * 16 positions, level at 24, 0.72 against 0.64 at 32, 1.40 against 0.84 at 64. */
#define CPU_SSD_MIN_T 32

/* Floats of `work` cpu_ssd_scan_bf16() needs for T positions. */
size_t cpu_ssd_work_floats(const struct lm_dims *dm, int T);
/* Per-thread scratch bytes (cpu_reserve_scratch) it needs. */
size_t cpu_ssd_scratch_bytes(const struct lm_dims *dm);

/* lm_ssm_chunked()'s contract (xbc rows [x | B | C] ldx apart, dt [T][H], a = -exp(A_log), state
 * [H][P][N] carried in and out, y [T][d_in]) with bf16 products, for dt >= 0 and a <= 0 (as the
 * model makes them: dt a clamped softplus). Returns 0, or -ENOMEM / -ENOTSUP (oneDNN has no fast
 * kernel for a shape on this CPU) / -EINVAL (a dt or a of the wrong sign) with the state
 * untouched and y unspecified: the caller then runs lm_ssm_chunked(). Runs pool jobs: not callable from a
 * pool task. */
int cpu_ssd_scan_bf16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		      const float *a, const float *dskip, float *state, float *y, float *work);
/* The same with the state stored in bf16 (the backend's bf16 SSM state): it is widened to fp32
 * once at the start, carried in fp32 from chunk to chunk, and rounded to nearest even once at
 * the end. */
int cpu_ssd_scan_bf16_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
			  const float *a, const float *dskip, uint16_t *state, float *y, float *work);
