/* The instruction sets the CPU kernels are written for, and the one run-time choice among a
 * kernel family's variants. Each family (the GEMVs of cpu_gemv.c, the row kernels of cpu_rows.c
 * and vision_rows.c) has one variant per set it is compiled for and picks one here, so cpuid,
 * $HOLOD_CPU_KERNELS and a forced choice mean the same for every family. */
#ifndef HOLOD_ENGINE_CPU_ISA_H
#define HOLOD_ENGINE_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>

/* from the least to the most capable */
enum cpu_isa {
	CPU_ISA_PORTABLE,   /* C the compiler vectorizes as it can */
	CPU_ISA_AVX2,       /* AVX2 with FMA and F16C */
	CPU_ISA_AVX512,     /* AVX-512F */
	CPU_ISA_AVX512BF16, /* AVX-512F, BW, VL, VNNI and BF16 */
	CPU_ISA_AMX,        /* AVX512-BF16 and the AMX tiles with their BF16 products (the OS
			     * saves the tile data and lets this process use it) */
};

/* Whether this CPU (and its OS, for the vector state) runs code of that set. For CPU_ISA_AMX the
 * first call asks Linux for the process's permission to use the tile data
 * (arch_prctl(ARCH_REQ_XCOMP_PERM)); asking again, as oneDNN also does, is harmless. */
bool cpu_isa_supported(enum cpu_isa isa);

/* The variant a family runs: isas[0..n) are its variants' sets in ascending order, isas[0] being
 * CPU_ISA_PORTABLE. With name NULL: the most capable variant the CPU runs, up to the set
 * $HOLOD_CPU_KERNELS names (an unknown name there caps nothing); never fails. With a name
 * ("portable" (or "generic"), "avx2", "avx512", "avx512bf16", "amx"): the most capable variant up to
 * that set. Returns the variant's index, -EINVAL for an unknown name, or -ENOTSUP when the CPU
 * does not run the variant so named. */
int cpu_isa_choose(const enum cpu_isa *isas, size_t n, const char *name);

#endif
