/* engine internal: the element-wise and per-row kernels of the language model in bf16 precision
 * (RMSNorm, the Mamba mixer's causal conv + SiLU and dt, its gated RMSNorm, ReLU^2, the softmax
 * steps of prefill attention, decode attention's scores and weighted values), vectorized and
 * spread over the pool's threads.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * Each variant (portable C, AVX2+FMA, AVX-512F) is one file compiled with its own -m flags
 * (meson.build) behind one table; cpu_isa_pick() chooses one (cpu_isa.h: avx512bf16 and amx run
 * avx512's). The
 * variants agree with lm_forward.c's fp32 functions (the reference, and the path of
 * --precision fp32, which never calls these) up to the order of fp32 sums and a ~1 ulp expf
 * (cpu_vexp.h); tests/backend-cpu/test-cpu-rows.c holds each to the reference with written tolerances.
 *
 * DESIGN (threads): the cpu_rows_* entry points are pool jobs (cpu.h): call them from the
 * forward's thread, never from a task. Each task owns a disjoint range of rows, channels or
 * elements of the outputs. The variant's functions themselves are single-threaded and may run
 * inside a task.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"

/* The Mamba-2 mixer's causal depthwise conv + bias + SiLU over T new positions:
 *   out[t][c] = silu(bias[c] + sum_k wt[k][c] * in[t - (K-1) + k][c])
 * where in[-j] (j = 1..K-1) is state[K-1-j] (the inputs of the positions before raw[0], oldest
 * first) and in[t] = raw[t]. On return state holds the inputs of the last K-1 positions.
 * 1 <= K <= CPU_CONV_MAX_K. */
#define CPU_CONV_MAX_K 64
struct cpu_conv_args {
	int T, K, channels;
	const float *raw; /* [T][ldr] */
	size_t ldr;
	const float *wt;   /* [K][channels] */
	const float *bias; /* [channels] */
	float *state;	   /* [K-1][channels] */
	float *out;	   /* [T][ldo] */
	size_t ldo;
};

/* dt[t][h] = clamp(softplus(raw[t][h] + bias[h]), lo, hi), softplus(x) = log1p(exp(x)) (x for
 * x > 20), as lm_dt_softplus() computes it. */
struct cpu_dt_args {
	int T, H;
	const float *raw; /* [T][ldr] */
	size_t ldr;
	const float *bias;
	float lo, hi;
	float *dt; /* [T][H] */
};

struct cpu_rows_variant {
	const char *name;
	/* out = w * (x / sqrt(mean(x^2) + eps)) over one row of n (out may equal x) */
	void (*rmsnorm)(const float *x, float *out, const float *w, int n, float eps);
	/* one row of groups * gs: y *= silu(z), then RMSNorm with weight w over each group of gs */
	void (*gated_rmsnorm)(float *y, const float *z, const float *w, int groups, int gs, float eps);
	/* the conv of channels [c0, c1) for every position, state included (c0 a multiple of 16) */
	void (*conv_silu)(const struct cpu_conv_args *a, int c0, int c1);
	/* u[i] = max(u[i], 0)^2 in place (NaN becomes 0, as cpu_relu2 does) */
	void (*relu2)(float *u, size_t n);
	/* the largest of p[0..n), n >= 1 */
	float (*max)(const float *p, int n);
	/* p[i] = exp(p[i] - mx) in place; returns their fp32 sum */
	float (*exp_sum)(float *p, int n, float mx);
	/* y[i] *= a */
	void (*scale)(float *y, float a, int n);
	/* decode attention's products over a block of n keys (lm_attention_decode_task): R query
	 * rows of dh floats (dense) against n key rows ldk floats apart, s[r][i] = q_r . k_i in
	 * rows lds apart, each key row read once for every four of the R rows; the first pf
	 * floats of the rows a few keys ahead prefetched (pf: dh, or the cache's whole rows for
	 * the first KV head of a block, 0 for the next ones) */
	void (*scores)(const float *q, int R, int dh, const float *k, size_t ldk, int n, float *s, size_t lds,
		       int pf);
	/* and the weighted values: o[r][e] += sum_i p[r][i] v_i[e] for R rows of p (ldp apart) over n
	 * value rows ldv floats apart; o dense R x dh; each value row read once for every four rows,
	 * a run of columns at a time (64 on AVX-512, 16 on AVX2); pf as for scores */
	void (*weigh)(const float *p, size_t ldp, int R, int n, const float *v, size_t ldv, int dh, float *o,
		      int pf);
};

/* For r = 0, 4, 8, .. < R: CALL(G) with G = MIN(4, R - r) as a constant (1..4), so that a
 * kernel's per-row accumulators of a group of rows stay in registers (scores, weigh). */
#define CPU_ROWS_IN_FOURS(R, r, CALL)                                                                        \
	for (int r = 0; r < (R); r += 4)                                                                     \
		switch ((R)-r) {                                                                             \
		case 1:                                                                                      \
			CALL(1);                                                                             \
			break;                                                                               \
		case 2:                                                                                      \
			CALL(2);                                                                             \
			break;                                                                               \
		case 3:                                                                                      \
			CALL(3);                                                                             \
			break;                                                                               \
		default:                                                                                     \
			CALL(4);                                                                             \
			break;                                                                               \
		}

/* The conv's state update for channels [c0, c1), which every variant's conv_silu ends with
 * (after its outputs, which read the old state). */
void cpu_rows_conv_state(const struct cpu_conv_args *a, int c0, int c1);

extern const struct cpu_rows_variant cpu_rows_portable;
#if defined(__x86_64__) && defined(__GNUC__)
extern const struct cpu_rows_variant cpu_rows_avx2;
extern const struct cpu_rows_variant cpu_rows_avx512;
#endif

/* The variant in use (cpu_isa_select() forces the set), and its set. */
const struct cpu_rows_variant *cpu_rows(void);
enum cpu_isa cpu_rows_isa(void);
/* The name of variant i (0: portable, then in order of capability), NULL past the last. */
const char *cpu_rows_variant_name(int i);

/* Pool jobs over the variant in use. Where out_bf16 is not NULL they also write their fp32
 * results rounded to bf16 (cpu_f32_to_bf16, cpu_dnnl.h) there, dense rows, while each row is
 * still in cache: the input the next oneDNN product reads in place (cpu_dnnl_matmul_bf16). */
/* T rows of d: out = w * (x / sqrt(mean(x^2) + eps)) (out may equal x, else no overlap) */
void cpu_rows_rmsnorm(const float *x, float *out, const float *w, int T, int d, float eps, uint16_t *out_bf16);
/* T rows of groups * gs floats ldy apart, in place: y *= silu(z) (z rows ldz apart), then the
 * RMSNorm of each group with weight w */
void cpu_rows_gated_rmsnorm(float *y, size_t ldy, const float *z, size_t ldz, const float *w, int T,
			    int groups, int gs, float eps, uint16_t *out_bf16);
/* The conv (channels split across the tasks) and dt (positions split) as one job. */
void cpu_rows_conv_dt(const struct cpu_conv_args *conv, const struct cpu_dt_args *dt);
/* dt of position t for heads [h0, h1), in the caller's thread (inside a pool task) */
void cpu_rows_dt(const struct cpu_dt_args *dt, int t, int h0, int h1);
/* ReLU^2 of n floats in place */
void cpu_rows_relu2(float *u, size_t n);
