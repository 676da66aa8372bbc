/* The instruction sets the CPU kernels are written for, and the one run-time choice of the set
 * every kernel family runs. A family keeps its table of variants (one per set it is compiled
 * for) and asks cpu_isa_pick() which to run: cpuid, $HOLOD_CPU_KERNELS and cpu_isa_select()
 * are read here only, so they mean the same for every family.
 *
 * DESIGN (the choice): the set in use is chosen once, at the first kernel call: the most
 * capable set the CPU runs, capped by $HOLOD_CPU_KERNELS where that names one
 * ("portable" (or "generic"), "avx2", "avx512", "avx512bf16", "amx"). The sets nest (each runs
 * everything below it), so:
 *   - the rule for a set the CPU does not run: $HOLOD_CPU_KERNELS is a cap, so naming a set
 *     above the CPU's runs the CPU's best (CI's variant loops name sets freely);
 *     cpu_isa_select() is a demand, so it refuses one with -ENOTSUP and changes nothing;
 *   - an unknown name: cpu_isa_select() returns -EINVAL; an unknown $HOLOD_CPU_KERNELS is
 *     refused by cpu_isa_check_env(), which the CPU backend's creation calls (the error names
 *     the value and the known names), so holod never runs with it; a kernel called before
 *     (a unit test) runs uncapped;
 *   - a family runs its most capable variant whose set is at most the set in use (the
 *     fallback): the table below, one row per family and one column per set in use.
 *
 *   family (file)                    portable  avx2      avx512    avx512bf16  amx
 *   GEMV bf16/f32, q8/q4, fp8        portable  avx2      avx512    avx512bf16  avx512bf16
 *     (cpu_gemv.c; the integer q8/q4 kernels on VNNI are the avx512bf16 variant's, and so is
 *     bf16 precision's fp8 kernel, which also needs AVX512-VBMI: without it, AVX-512F's fp8)
 *   matmul, dot/axpy/silu rows,      portable  avx2      avx512    avx512      avx512
 *     relu2 (cpu_matmul.c, cpu_relu2 in lm_forward.c; cpu_kernel_name() says "generic" for
 *     portable)
 *   bf16 precision rows (cpu_rows.c) portable  avx2      avx512    avx512      avx512
 *   vision rows (vision_rows.c)      portable  avx2      avx512    avx512      avx512
 *   SSD scan rows (cpu_ssd.c)        portable  portable  avx512    avx512bf16  avx512bf16
 *   SSM decode row (cpu_ssm.c)       portable  portable  avx512    avx512      avx512
 *   fp32 -> bf16 (cpu_dnnl.c)        portable  portable  avx512    avx512      avx512
 *   AMX products (cpu_amx.c)         off       off       off       off         amx
 *
 * oneDNN chooses its own ISA (capped by $ONEDNN_MAX_CPU_ISA, which tools/check.sh sets to
 * match). tests/backend-cpu/test-cpu-isa.c holds every family to this table. */
#ifndef HOLOD_ENGINE_CPU_ISA_H
#define HOLOD_ENGINE_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>

/* from the least to the most capable; each set includes the ones before it */
enum cpu_isa {
	CPU_ISA_PORTABLE,   /* C the compiler vectorizes as it can */
	CPU_ISA_AVX2,	    /* AVX2 with FMA and F16C */
	CPU_ISA_AVX512,	    /* AVX-512F and BW (every AVX-512 CPU but the Xeon Phi) */
	CPU_ISA_AVX512BF16, /* AVX-512F, BW, VL, VNNI and BF16 */
	CPU_ISA_AMX,	    /* AVX512-BF16 and the AMX tiles with their BF16 products (the OS
			     * saves the tile data and lets this process use it) */
	CPU_ISA_COUNT
};

/* Whether this CPU (and its OS, for the vector state) runs code of that set. For CPU_ISA_AMX the
 * first call asks Linux for the process's permission to use the tile data
 * (arch_prctl(ARCH_REQ_XCOMP_PERM)); asking again, as oneDNN also does, is harmless. */
bool cpu_isa_supported(enum cpu_isa isa);

/* The set's name as $HOLOD_CPU_KERNELS spells it ("portable", ...), NULL past the last. */
const char *cpu_isa_name(enum cpu_isa isa);

/* "portable" (or "generic"), "avx2", "avx512", "avx512bf16" or "amx": 0, or -EINVAL. */
int cpu_isa_parse(const char *name, enum cpu_isa *ret);

/* Checks $HOLOD_CPU_KERNELS: 0 where it is unset, empty or a set's name; else -EINVAL with a
 * sentence naming the value and the known names in err (where err is not NULL). */
int cpu_isa_check_env(char *err, size_t errlen);

/* Forces the set in use ("portable", ...; NULL: back to the CPU's best capped by
 * $HOLOD_CPU_KERNELS): 0, -EINVAL for an unknown name, -ENOTSUP (nothing changed) where the CPU
 * does not run that set. Every family follows at its next call; not callable while a kernel
 * job runs. */
int cpu_isa_select(const char *name);

/* internal to cpu_isa(): the set in use, -1 before the first call */
extern int cpu_isa_current_;
enum cpu_isa cpu_isa_init_(void);

/* The set in use (the first call chooses it). */
static inline enum cpu_isa cpu_isa(void)
{
	int v = __atomic_load_n(&cpu_isa_current_, __ATOMIC_ACQUIRE);
	return v >= 0 ? (enum cpu_isa)v : cpu_isa_init_();
}

/* The variant a family runs: isas[0..n) are its variants' sets in ascending order, isas[0]
 * being CPU_ISA_PORTABLE; returns the index of the last one at most cpu_isa(). */
static inline int cpu_isa_pick(const enum cpu_isa *isas, int n)
{
	enum cpu_isa isa = cpu_isa();
	int i = n - 1;
	while (i > 0 && isas[i] > isa)
		i--;
	return i;
}

#endif
