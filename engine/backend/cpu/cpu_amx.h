/* engine internal: the AMX kernel of the bf16 products of a few to a few dozen rows
 * (engine/backend/cpu/cpu_gemm_amx.c, compiled with -mamx-tile -mamx-bf16 and AVX512-BF16). Only
 * cpu_amx.c calls it, after cpu_isa_supported(CPU_ISA_AMX). The public entry point is
 * cpu_amx_rows() in cpu.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Weight rows per A tile and tokens per B tile (the tiles' 16 rows), bf16 columns per tile step
 * (a tile row's 64 bytes). */
#define CPU_AMX_TILE 16
#define CPU_AMX_K 32

/* The bf16 elements cpu_amx_pack() writes for T tokens of `in` columns. */
size_t cpu_amx_packed_elems(int T, int in);

/* Rounds x's T rows of `in` columns to bf16 (to nearest even, as the AVX512-BF16 GEMV does) into
 * the B tiles' layout: per 16 tokens and per 32 columns one 16 x 16 tile of column pairs
 * (VNNI), token j's columns 2p and 2p+1 at row p, pair j; absent tokens and columns are zeros. */
void cpu_amx_pack(const float *x, size_t ldx, int T, int in, uint16_t *xv);

/* The operands of one product, y[t * ldy + r] (+)= W[r, :] . x[t, :] for t < T. */
struct cpu_amx_args {
	const uint16_t *w; /* row 0 of W, bf16 */
	size_t ldw;	   /* elements between rows of W */
	int in;		   /* columns */
	int nrows;	   /* W's rows: a tile may read any of them, it writes only its range's */
	int T;
	const uint16_t *xv; /* cpu_amx_pack()'s tiles of x */
	float *y;
	size_t ldy;
	bool accumulate;
};

/* Rows [r0, r1) of the product on the calling thread: configures its tiles and releases them. */
void cpu_amx_range(const struct cpu_amx_args *a, int r0, int r1);
