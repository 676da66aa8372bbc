/* engine internal: the CPU backend's many-token matrix products through oneDNN's matmul
 * (cpu_dnnl.c), used in bf16 precision.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * y[T][out] (+)= bf16(x[T][in]) . W^T with W a [out][in] weight held in bf16, fp32 accumulation
 * and fp32 results. oneDNN picks the implementation for the CPU it runs on (AMX tiles,
 * AVX512-BF16, AVX-512, AVX2: `cpu_dnnl_impl_name()`); it asks the kernel for the AMX tile state
 * itself and falls back when refused.
 *
 * Weights are prepared once (cpu_dnnl_weight_create): either the bf16 rows as stored (a bf16
 * tensor is used in place, without a copy: CPU_DNNL_PLAIN) or a copy reordered into the blocked
 * layout oneDNN chooses for the matmul (CPU_DNNL_REORDERED: faster, but a second copy of every
 * weight in memory). Never per call.
 * Weights held in another format (quantized) are made block by block during the product
 * instead (cpu_dnnl_matmul_bf16_fill), each block once, in the cache of the thread using it.
 *
 * DESIGN (threads): one set of threads. oneDNN's threading runtime in Debian's build is OpenMP,
 * whose threads would spin between products while the engine pool's workers wait for the rest
 * of the forward, and the other way round. So oneDNN runs with one OpenMP thread per call and
 * the parallelism is the engine pool's: each product is one pool job over runs of its rows
 * (cpu_dnnl.c). --threads sizes both.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "model.h"

/* Products with fewer rows than this stay on cpu_matmul() (decode and short spans), where
 * oneDNN's per-call cost outweighs its speed. */
#define CPU_DNNL_MIN_T 16

enum cpu_dnnl_layout {
	CPU_DNNL_PLAIN,	    /* the bf16 rows as stored */
	CPU_DNNL_REORDERED, /* a copy in oneDNN's blocked layout */
};

struct cpu_dnnl_weight;

/* Whether oneDNN has a bf16 matmul on this CPU (and under $ONEDNN_MAX_CPU_ISA): Debian's
 * oneDNN runs bf16 products from AVX-512 on, so a CPU with AVX2 alone (or oneDNN capped there)
 * has none, and bf16 precision's products run on the engine's own kernels (lm_prepare()).
 * Probed once (one primitive descriptor); thread-safe. */
bool cpu_dnnl_bf16_supported(void);

/* Prepares the 2-D weight w ([out][in], any dtype; anything but bf16 is converted to a bf16
 * copy). The tensor's data must outlive the result. Returns 0, -ENOMEM, -EINVAL (not 2-D, or a
 * dimension beyond INT_MAX) or -ENOTSUP (oneDNN has no matmul for it on this CPU). */
int cpu_dnnl_weight_create(const struct tensor *w, enum cpu_dnnl_layout layout, struct cpu_dnnl_weight **ret);
/* Accepts NULL. */
void cpu_dnnl_weight_destroy(struct cpu_dnnl_weight *w);
/* Bytes the weight allocated (0 when it reads the tensor in place). */
size_t cpu_dnnl_weight_bytes(const struct cpu_dnnl_weight *w);

/* y[t, 0:out] (+)= W x[t, :] for t in [0, T), as cpu_matmul() does but with x rounded to bf16
 * (round to nearest even). x has row stride ldx, y row stride ldy (>= out). Returns 0, -ENOMEM
 * or -ENOTSUP, y untouched, where oneDNN has no fast kernel for the product (its reference
 * matmul is refused: e.g. a reordered weight into a y with ldy > out). Callable from any thread
 * but not from a pool task. */
int cpu_dnnl_matmul(const struct cpu_dnnl_weight *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
		    bool accumulate);

/* The same for activations already in bf16: x is T dense rows of `in` bf16 values, read in
 * place (no conversion pass). */
int cpu_dnnl_matmul_bf16(const struct cpu_dnnl_weight *w, const uint16_t *x, int T, float *y, size_t ldy,
			 bool accumulate);

/* What a product's epilogue applies to each result (after the accumulation, if any). */
enum cpu_dnnl_act {
	CPU_DNNL_ACT_NONE,
	CPU_DNNL_ACT_RELU2, /* max(y, 0)^2, the MLP's ReLU^2 (cpu_relu2, cpu.h) */
};
/* cpu_dnnl_matmul() and cpu_dnnl_matmul_bf16() with the epilogue `act`, so the results are
 * written once. */
int cpu_dnnl_matmul_act(const struct cpu_dnnl_weight *w, const float *x, size_t ldx, int T, float *y,
			size_t ldy, bool accumulate, enum cpu_dnnl_act act);
int cpu_dnnl_matmul_bf16_act(const struct cpu_dnnl_weight *w, const uint16_t *x, int T, float *y, size_t ldy,
			     bool accumulate, enum cpu_dnnl_act act);

/* Rows [r0, r0 + n) of a weight ([out][in]) made in bf16 into w (n dense rows of in), on a pool
 * thread (no pool job may start there). Returns 0 or < 0. */
typedef int cpu_dnnl_fill_fn(void *arg, int r0, int n, uint16_t *w);
/* y[t0..T)'s columns [r0, r0 + n) (+)= those rows of the weight times x[t0..T), by other means,
 * on the calling thread (a pool job may start there). */
typedef void cpu_dnnl_rest_fn(void *arg, int r0, int n, int t0);

/* y[t, 0:out] (+)= W x[t, :] for t in [0, T), with x T dense rows of `in` bf16 values and W a
 * weight no oneDNN weight holds: made block_rows rows at a time by `fill` (e.g. quantized rows
 * dequantized to bf16) into a buffer of the pool thread that multiplies them, while they are in
 * its cache, by every row of x (at most 256 rows per oneDNN call) into a dense block of results
 * that is stored or added into y. One pool job: its tasks are the blocks, so each weight is made
 * once per product and read from memory once. Returns 0 (a block whose fill or oneDNN call
 * failed had the rest of its tokens computed by `rest`), or -ENOMEM, -EINVAL or -ENOTSUP (no
 * fast oneDNN kernel) with y untouched. Callable from any thread but not from a pool task. */
int cpu_dnnl_matmul_bf16_fill(int out, int in, const uint16_t *x, int T, float *y, size_t ldy, bool accumulate,
			      int block_rows, cpu_dnnl_fill_fn *fill, cpu_dnnl_rest_fn *rest, void *arg);

/* The oneDNN implementation the weights' matmul runs (e.g. "brg:avx512_core_amx_bf16"), known
 * once a weight was created; "none" before. */
const char *cpu_dnnl_impl_name(void);

/* The set of the conversions below in use (portable or avx512: cpu_isa_pick(), cpu_isa.h); the
 * variants give the same bits. */
enum cpu_isa cpu_bf16_isa(void);
/* Rounds n floats to bf16 (nearest even; NaN stays NaN). */
void cpu_f32_to_bf16(const float *src, uint16_t *dst, size_t n);
/* The same rounding in place, for T rows of n floats ldx apart: each value becomes the fp32
 * value of its bf16 rounding (idempotent). */
void cpu_round_bf16_rows(float *x, size_t ldx, int T, int n);
