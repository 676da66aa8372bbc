/* engine internal: small bf16 matrix products through oneDNN's matmul, run inside pool tasks
 * (cpu_dnnl_small.c): the pieces of a computation that a task splits further, such as one
 * head's attention scores for a block of query rows.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * C[M][N] (+)= A[M][K] . B, A bf16 rows lda apart, B bf16 given as [K][N] rows ldb apart or
 * (b_trans) as its transpose [N][K] rows ldb apart, C fp32 rows ldc apart; fp32 accumulation.
 * oneDNN picks the implementation (AMX tiles, AVX512-BF16, AVX-512, AVX2); its reference
 * implementation is refused (-ENOTSUP), so callers keep a path of their own.
 *
 * DESIGN (threads): cpu_dnnl.h's rule, one set of threads: every product runs with one OpenMP
 * thread on the pool thread that calls cpu_dnnl_small_run(), with that thread's oneDNN stream
 * and scratchpad. A prepared product is shared: cpu_dnnl_small_get() hands out a counted
 * reference to a process-wide cache entry (creating one JIT-compiles its kernels, so products of
 * one shape are created once); entries in use are never evicted, and when every entry is in use
 * the product is prepared for the caller alone. Get and put lock the cache;
 * run takes no lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest dimension a product takes. */
#define CPU_DNNL_SMALL_MAX_DIM (1 << 20)

struct cpu_dnnl_small;

/* A reference to the prepared product of this shape. Not callable from a pool task. Returns
 * 0, -EINVAL (a dimension < 1 or over CPU_DNNL_SMALL_MAX_DIM, a leading dimension too small),
 * -ENOMEM, -ENOTSUP (oneDNN has no fast kernel for it on this CPU). */
int cpu_dnnl_small_get(int M, int K, int N, size_t lda, size_t ldb, bool b_trans, size_t ldc, bool accumulate,
		       struct cpu_dnnl_small **ret);
/* Gives the reference back; accepts NULL. */
void cpu_dnnl_small_put(struct cpu_dnnl_small *p);
/* Runs the product on the calling pool task's thread (`thread` as cpu_task_fn gets it).
 * Returns 0, -ENOMEM (the thread's stream or scratchpad) or -EIO (oneDNN failed). */
int cpu_dnnl_small_run(const struct cpu_dnnl_small *p, int thread, const uint16_t *a, const uint16_t *b,
		       float *c);
/* The implementation oneDNN chose (e.g. "brg:avx512_core_amx_bf16"). */
const char *cpu_dnnl_small_impl(const struct cpu_dnnl_small *p);
