/* engine internal: CPU compute primitives (worker pool, matmul, small vector kernels).
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * DESIGN (threads): there is one process-wide worker pool. cpu_parallel_for() hands a job of
 * n_tasks independent tasks to the pool and returns when every task has finished; the calling
 * thread works on tasks too. Jobs from different threads are serialised by a mutex, so two
 * sessions used from two threads share the cores instead of oversubscribing them. Workers own
 * nothing but their per-thread scratch buffer (cpu_scratch()); the caller owns every input and
 * output buffer for the duration of the job, and tasks must write disjoint outputs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "model.h"

/* task runs with its task index (0..n_tasks-1) and the index of the thread running it
 * (0..cpu_threads()-1), which selects the thread's scratch buffer. */
typedef void cpu_task_fn(void *ctx, int task, int thread);

/* Number of threads a job runs on (workers + caller); starts the pool on first use. */
int cpu_threads(void);
/* Changes the thread count (1..CPU_MAX_THREADS); joins the old workers. Not callable while
 * another thread runs a job. Returns 0 or -EINVAL/-errno. */
int cpu_set_threads(int n);
#define CPU_MAX_THREADS 256

/* Asks for the n bytes `ahead` bytes past p, one prefetch per 64-byte line (the decode kernels'
 * streams: cpu_gemv.h, the SSM step's state), the address formed as an integer: it may lie past
 * the object, and a prefetch never faults. */
static inline void cpu_prefetch_ahead(const void *p, size_t n, size_t ahead)
{
	for (size_t o = 0; o < n; o += 64)
		__builtin_prefetch((const void *)((uintptr_t)p + ahead + o), 0, 3);
}

/* Makes every thread's scratch buffer at least `bytes` long (64-byte aligned). Call it before
 * cpu_parallel_for(); -ENOMEM on failure. */
int cpu_reserve_scratch(size_t bytes);
/* The scratch buffer of `thread`, valid until the next cpu_reserve_scratch()/cpu_set_threads(). */
void *cpu_scratch(int thread);

/* Runs fn(ctx, i, thread) for i in [0, n_tasks) across the pool; returns when all are done.
 * Tasks must not start jobs themselves (cpu_parallel_for*, cpu_matmul*, cpu_reserve_scratch):
 * the job lock is not recursive. cpu_gemm_f32() and the vector helpers are fine in a task. */
void cpu_parallel_for(int n_tasks, cpu_task_fn *fn, void *ctx);
/* Same, where `work` estimates the job's multiply-adds: below CPU_MIN_PARALLEL_WORK the tasks run
 * on the calling thread, since waking the workers would cost more than the job. */
void cpu_parallel_for_work(int n_tasks, cpu_task_fn *fn, void *ctx, double work);
#define CPU_MIN_PARALLEL_WORK 65536.0
/* Jobs so far that ran on the pool's threads (not inline): each one woke or signalled the
 * workers. For benchmarks. */
uint64_t cpu_parallel_jobs(void);

/* y[t, 0:out] = W x[t, :] for t in [0, T): W is a [out, in] tensor of any dtype (bf16/f16/f32),
 * x is fp32 with row stride ldx, y fp32 with row stride ldy. Accumulation is fp32.
 * When `accumulate` is true the product is added to y instead of stored.
 * Returns 0 or -ENOMEM (scratch). */
int cpu_matmul(const struct tensor *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
	       bool accumulate);
/* Per-thread scratch bytes cpu_matmul() needs for a weight with `in` columns. */
size_t cpu_matmul_scratch_bytes(int in);
/* Same, for rows [row0, row0 + nrows) of W only (y columns 0..nrows-1). */
int cpu_matmul_rows(const struct tensor *w, int row0, int nrows, const float *x, size_t ldx, int T, float *y,
		    size_t ldy, bool accumulate);

/* Decode products, y[t, 0:nrows] (+)= W[row0 + r, :] . x[t, :] for t < T, the rows split into one
 * contiguous range per pool thread (cpu_gemv.c). Any T >= 1: the kernels take up to 4 tokens at
 * a time, and more tokens (the decode rows of several sessions) run in groups over each small
 * block of rows while the block is in cache, so every weight byte comes from memory once for
 * all T. Each (row, token) sum is formed the same way whatever T and the other tokens are, so a
 * token's results are bit-identical to a call with that token alone. bf16_act multiplies x
 * rounded to bf16 (bf16 precision: bf16 weights then run on vdpbf16ps where the CPU has it; x
 * itself is not written); otherwise the products are fp32. Sums are fp32. cpu_matmul*() call it
 * for T <= CPU_GEMV_T. Returns 0. */
int cpu_gemv_rows(const struct tensor *w, int row0, int nrows, const float *x, size_t ldx, int T, float *y,
		  size_t ldy, bool accumulate, bool bf16_act);
/* cpu_gemv_rows() on quantized weights (quant.h: q8, q4): rows [row0, row0 + nrows) of w, fp32
 * activations, the weights dequantized exactly in registers, fp32 products and sums, so a result
 * differs from the double product of quant_row_to_f32()'s weights by fp32 summation alone. The
 * same split, token groups and per-token independence as cpu_gemv_rows(). Returns 0, or -EINVAL
 * for rows outside w. */
struct quant_tensor;
int cpu_gemv_quant_rows(const struct quant_tensor *w, int row0, int nrows, const float *x, size_t ldx, int T,
			float *y, size_t ldy, bool accumulate);
/* cpu_gemv_quant_rows() with the activations quantized to int8 per block of 32 (GGML's Q8_0 of
 * them, as llama.cpp multiplies its Q8_0/Q4 weights; cpu_gemv.h) and each block's code products
 * summed as integers (AVX512-VNNI vpdpbusd; AVX2 vpmaddubsw), then scaled and summed in fp32:
 * bf16 precision's decode on quantized weights, ~2x fewer instructions per weight than widening
 * the codes. For fp8 weights the activations are rounded to bf16 instead (nearest even) and
 * multiplied by the codes' exact bf16 values in vdpbf16ps, each row's sum then times its scale,
 * where the variant has that kernel and the CPU runs it (AVX512-BF16 with VBMI:
 * cpu_gemv_fp8_vbmi.c); elsewhere fp8, and a variant without integer kernels
 * (cpu_gemv_quant_has_i8(); every variant has them now, the portable one in C), is
 * cpu_gemv_quant_rows(). Results are the same bits for a token alone or in a batch. Returns 0,
 * -EINVAL (rows outside w), -ENOMEM (the quantized or rounded activations). */
int cpu_gemv_quant_rows_i8(const struct quant_tensor *w, int row0, int nrows, const float *x, size_t ldx,
			   int T, float *y, size_t ldy, bool accumulate);
bool cpu_gemv_quant_has_i8(void);
/* Whether the variant in use has tile kernels for `format` (an enum quant_format) (quant.h's tiles; the
 * AVX512-BF16 variant's q4): the CPU backend then tiles its f matrices at load (lm_prepared_tile). A tiled
 * matrix runs on every variant (those without tile kernels gather each tile's records). */
bool cpu_gemv_quant_tiles(int format);
/* Rows [r0, r0 + n) of q dequantized (quant_row_to_f32(): exact) and rounded to bf16 (nearest
 * even) into out (n rows of q->cols), on the calling thread, vectorized where the GEMV variant
 * in use has it (the same bits): the prompt's products on quantized weights hand them to oneDNN's
 * bf16 matmul a block of rows at a time. Returns 0, or -EINVAL for rows outside q. */
int cpu_quant_rows_to_bf16(const struct quant_tensor *q, int64_t r0, int64_t n, uint16_t *out);
/* The most tokens cpu_matmul*() hand to cpu_gemv_rows(): 4 tokens cost it what one does (memory
 * bound), several times less than cpu_matmul's blocked product (docs/benchmarks.md, "Figures
 * behind the code's constants"). */
#define CPU_GEMV_T 4
/* The GEMV variant in use ("portable", "avx2", "avx512", "avx512bf16": the most capable up to
 * cpu_isa(), cpu_isa.h; amx runs avx512bf16's), and its set. */
const char *cpu_gemv_name(void);
enum cpu_isa cpu_gemv_isa(void);
/* The name of variant i (0: portable, then in order of capability), NULL past the last. */
const char *cpu_gemv_variant_name(int i);

/* Products of a few to a few dozen rows (the decode rows of several sessions) on AMX
 * (cpu_amx.c, cpu_gemm_amx.c): y[t, :] (+)= W x[t, :] for t < T, W a bf16 [out][in] tensor read
 * in place, x rounded to bf16 (to nearest even, as cpu_gemv_rows' bf16_act does: the same
 * products) and the products summed in fp32 in the tiles' order, which is not the GEMV's: the
 * results differ from cpu_gemv_rows' by fp32 rounding (and by denormals, which AMX flushes).
 * The rows are split as cpu_gemv_rows splits them; weight bytes come from memory once for up to
 * 32 tokens (more run again over each block while it is in cache). Returns 0, -ENOTSUP (y
 * untouched) where W is not bf16 or AMX is not in use (cpu_amx_enabled()), or -ENOMEM. */
int cpu_amx_rows(const struct tensor *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
		 bool accumulate);
/* Whether cpu_amx_rows() runs: cpu_isa() is amx (the CPU and the OS allow AMX and neither
 * $HOLOD_CPU_KERNELS nor cpu_isa_select() named a set below it). */
bool cpu_amx_enabled(void);

/* Single-threaded fp32 C[T][N] (+)= A[T][K] . B[K][N] for small products inside a task (the SSD
 * chunk scan). B is row-major [K][N], or given as its transpose [N][K] when b_trans. `pack` is
 * caller scratch of cpu_gemm_pack_floats(K) floats, 64-byte aligned. */
void cpu_gemm_f32(const float *a, size_t lda, const float *b, size_t ldb, bool b_trans, int T, int K, int N,
		  float *c, size_t ldc, bool accumulate, float *pack);
size_t cpu_gemm_pack_floats(int K);

/* The RMSNorm every norm of the language model runs (lm_forward.c): for each of T rows of d
 * floats, out = w * (x / sqrt(mean(x^2) + eps)), fp32 sum of squares in index order. out may
 * not overlap x unless equal. The reference the GPU kernels are checked against. */
void cpu_rmsnorm_rows(const float *x, float *out, const float *w, int T, int d, float eps);
/* ReLU² of the MLP in place: u[i] = max(u[i], 0)^2 (NaN becomes 0, as `u > 0 ? u : 0` does). */
void cpu_relu2(float *u, size_t n);
/* fp32 dot product of n elements. */
float cpu_dot(const float *a, const float *b, int n);
/* y[i] += a * x[i]; y and x must not overlap */
void cpu_axpy(float *y, float a, const float *x, int n);
/* y[i] = a * y[i] + b * x[i]; y and x must not overlap */
void cpu_axpby(float *y, float a, float b, const float *x, int n);
/* y[i] = silu(x[i]) = x / (1 + exp(-x)) (y may be x) */
void cpu_silu(float *y, const float *x, int n);
/* y[i] *= silu(z[i]) */
void cpu_mul_silu(float *y, const float *z, int n);
/* y[i] += a[i] * b[i]; y must not overlap a or b */
void cpu_vfma(float *y, const float *a, const float *b, int n);
/* Converts n elements starting at element `offset` of tensor t to fp32. */
void cpu_tensor_to_f32(const struct tensor *t, size_t offset, size_t n, float *dst);
float cpu_f16_to_f32(uint16_t v);
/* Which matmul kernels are in use ("avx512", "avx2", "generic": the most capable up to cpu_isa(),
 * cpu_isa.h), and their set. */
const char *cpu_kernel_name(void);
enum cpu_isa cpu_matmul_isa(void);
