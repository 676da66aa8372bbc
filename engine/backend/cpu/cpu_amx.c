/* The AMX products' entry point (cpu.h: cpu_amx_rows): the run-time choice, the packing of the
 * activations and the split of the weight rows across the pool. The kernel is in
 * cpu_gemm_amx.c, compiled for AMX; this file is compiled for any x86-64 and calls it only
 * where cpu_isa_supported(CPU_ISA_AMX). */
#include <errno.h>
#include <stdlib.h>

#include "common.h"
#include "cpu.h"
#include "cpu_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "cpu_amx.h"
#define HAVE_X86 1
#endif

/* Rows per task's range: a multiple of the kernel's 32-row blocks, so only W's last range has a
 * row tail, and two threads never write one 64-byte line of a 64-byte aligned y. */
#define RANGE_ALIGN 32

/* the family's variants: none (CPU_ISA_PORTABLE: callers run the GEMV) or AMX */
static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AMX,
#endif
};

bool cpu_amx_enabled(void)
{
	return cpu_isa_pick(isas, ARRAY_SIZE(isas)) > 0;
}

#ifdef HAVE_X86
struct amx_job {
	struct cpu_amx_args a;
	int chunk;
};

static void amx_task(void *ctx, int task, int thread)
{
	const struct amx_job *j = ctx;
	(void)thread;
	int r0 = task * j->chunk, r1 = MIN(r0 + j->chunk, j->a.nrows);
	if (r0 < r1)
		cpu_amx_range(&j->a, r0, r1);
}
#endif

int cpu_amx_rows(const struct tensor *w, const float *x, size_t ldx, int T, float *y, size_t ldy,
		 bool accumulate)
{
	if (w->dtype != TENSOR_BF16 || w->ndim != 2 || !cpu_amx_enabled())
		return -ENOTSUP;
#ifdef HAVE_X86
	if (T <= 0)
		return 0;
	int nrows = (int)w->shape[0], in = (int)w->shape[1];
	uint16_t *xv = aligned_alloc(64, cpu_amx_packed_elems(T, in) * sizeof(*xv));
	if (!xv)
		return -ENOMEM;
	cpu_amx_pack(x, ldx, T, in, xv);
	struct amx_job j = {
		.a = {.w = w->data,
		      .ldw = (size_t)in,
		      .in = in,
		      .nrows = nrows,
		      .T = T,
		      .xv = xv,
		      .y = y,
		      .ldy = ldy,
		      .accumulate = accumulate},
	};
	int tasks = cpu_threads();
	int per = (nrows + tasks - 1) / tasks;
	j.chunk = (per + RANGE_ALIGN - 1) / RANGE_ALIGN * RANGE_ALIGN;
	cpu_parallel_for_work((nrows + j.chunk - 1) / j.chunk, amx_task, &j, (double)nrows * in * T);
	free(xv);
	return 0;
#else
	(void)x, (void)ldx, (void)T, (void)y, (void)ldy, (void)accumulate;
	return -ENOTSUP;
#endif
}
