/* The kernel families' one run-time choice from cpuid and $HOLOD_CPU_KERNELS (cpu_isa.h). */
#include "cpu_isa.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_X86 1
/* Linux's arch_prctl() request for an extended state component, and AMX's tile data component
 * (asm/prctl.h, kernel 5.16) */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#endif

static const char *const isa_names[] = {
	[CPU_ISA_PORTABLE] = "portable",
	[CPU_ISA_AVX2] = "avx2",
	[CPU_ISA_AVX512] = "avx512",
	[CPU_ISA_AVX512BF16] = "avx512bf16",
	[CPU_ISA_AMX] = "amx",
};

static int parse(const char *name, enum cpu_isa *ret)
{
	/* "generic" is the name $HOLOD_CPU_KERNELS has always used for portable C */
	if (strcmp(name, "generic") == 0)
		name = "portable";
	for (size_t i = 0; i < sizeof(isa_names) / sizeof(isa_names[0]); i++)
		if (strcmp(isa_names[i], name) == 0) {
			*ret = (enum cpu_isa)i;
			return 0;
		}
	return -EINVAL;
}

#ifdef HAVE_X86
/* CPUID.(7,0):EDX.AMX-BF16[bit 22] and AMX-TILE[bit 24], the OS enabling the tile state in XCR0
 * (bits 17 and 18: XTILECFG, XTILEDATA) and Linux's permission for this process. */
static bool amx_usable(void)
{
	static int usable = -1; /* racing first calls store the same answer */
	int u = __atomic_load_n(&usable, __ATOMIC_ACQUIRE);
	if (u >= 0)
		return u;
	unsigned int eax, ebx, ecx, edx;
	u = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)) &&
	    (edx & (1u << 24)) && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_OSXSAVE);
	if (u) {
		unsigned int lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		u = (lo & (3u << 17)) == (3u << 17) &&
		    syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
	}
	__atomic_store_n(&usable, u, __ATOMIC_RELEASE);
	return u;
}
#endif

bool cpu_isa_supported(enum cpu_isa isa)
{
	if (isa == CPU_ISA_PORTABLE)
		return true;
#ifdef HAVE_X86
	unsigned int eax, ebx, ecx, edx;

	__builtin_cpu_init();
	bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
	/* __builtin_cpu_supports reads XGETBV, so avx512f also says the OS saves the zmm state */
	bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
	switch (isa) {
	case CPU_ISA_AVX2:
		return avx2;
	case CPU_ISA_AVX512:
		return avx512;
	case CPU_ISA_AVX512BF16:
		/* CPUID.(7,1):EAX.AVX512_BF16[bit 5]; and AVX512-VNNI with VL, which every CPU with
		 * AVX512-BF16 has (Cooper Lake, Sapphire Rapids, Zen 4 and later): the level's
		 * integer kernels on quantized weights (cpu_gemv_quant_vnni.c) use them */
		return avx512 && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
		       __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
	case CPU_ISA_AMX:
		return cpu_isa_supported(CPU_ISA_AVX512BF16) && amx_usable();
	default:
		return false;
	}
#else
	return false;
#endif
}

int cpu_isa_choose(const enum cpu_isa *isas, size_t n, const char *name)
{
	enum cpu_isa cap = CPU_ISA_AMX;
	if (name) {
		int r = parse(name, &cap);
		if (r < 0)
			return r;
	} else {
		const char *env = getenv("HOLOD_CPU_KERNELS");
		if (env && parse(env, &cap) < 0)
			cap = CPU_ISA_AMX;
	}
	size_t best = 0, named = 0;
	for (size_t i = 0; i < n && isas[i] <= cap; i++) {
		named = i;
		if (cpu_isa_supported(isas[i]))
			best = i;
	}
	if (name)
		return cpu_isa_supported(isas[named]) ? (int)named : -ENOTSUP;
	return (int)best;
}
