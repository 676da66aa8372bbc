/* The kernel families' one run-time choice from cpuid, $HOLOD_CPU_KERNELS and cpu_isa_select()
 * (cpu_isa.h). */
#include "cpu_isa.h"

#include <errno.h>
#include <stdio.h>
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

static const char *const isa_names[CPU_ISA_COUNT] = {
	[CPU_ISA_PORTABLE] = "portable",     [CPU_ISA_AVX2] = "avx2", [CPU_ISA_AVX512] = "avx512",
	[CPU_ISA_AVX512BF16] = "avx512bf16", [CPU_ISA_AMX] = "amx",
};

const char *cpu_isa_name(enum cpu_isa isa)
{
	return (unsigned)isa < CPU_ISA_COUNT ? isa_names[isa] : NULL;
}

int cpu_isa_parse(const char *name, enum cpu_isa *ret)
{
	/* "generic" is the name $HOLOD_CPU_KERNELS has always used for portable C */
	if (strcmp(name, "generic") == 0)
		name = "portable";
	for (int i = 0; i < CPU_ISA_COUNT; i++)
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
	u = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)) && (edx & (1u << 24)) &&
	    __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_OSXSAVE);
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
	/* __builtin_cpu_supports reads XGETBV, so avx512f also says the OS saves the zmm state;
	 * BW for the SSD scan's and the bf16 conversion's byte and word shuffles */
	bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
	switch (isa) {
	case CPU_ISA_AVX2:
		return avx2;
	case CPU_ISA_AVX512:
		return avx512;
	case CPU_ISA_AVX512BF16:
		/* CPUID.(7,1):EAX.AVX512_BF16[bit 5]; and AVX512-VNNI with VL, which every CPU with
		 * AVX512-BF16 has (Cooper Lake, Sapphire Rapids, Zen 4 and later): the level's
		 * integer kernels on quantized weights (cpu_gemv_quant_vnni.c) use them */
		return avx512 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
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

int cpu_isa_current_ = -1;

/* The CPU's most capable set up to $HOLOD_CPU_KERNELS (the sets nest; an unknown value caps
 * nothing: the CPU backend refused it already, cpu_isa_check_env()). Sets above the cap are not
 * probed, so a cap below amx never asks Linux for the tile data. */
static enum cpu_isa default_isa(void)
{
	enum cpu_isa isa = CPU_ISA_AMX;
	const char *env = getenv("HOLOD_CPU_KERNELS");
	if (env && *env && cpu_isa_parse(env, &isa) < 0)
		isa = CPU_ISA_AMX;
	while (isa > CPU_ISA_PORTABLE && !cpu_isa_supported(isa))
		isa--;
	return isa;
}

enum cpu_isa cpu_isa_init_(void)
{
	/* racing first calls store the same set */
	enum cpu_isa isa = default_isa();
	__atomic_store_n(&cpu_isa_current_, (int)isa, __ATOMIC_RELEASE);
	return isa;
}

int cpu_isa_check_env(char *err, size_t errlen)
{
	const char *env = getenv("HOLOD_CPU_KERNELS");
	enum cpu_isa isa;
	if (!env || !*env || cpu_isa_parse(env, &isa) == 0)
		return 0;
	if (err && errlen)
		snprintf(err, errlen,
			 "HOLOD_CPU_KERNELS=%.64s: unknown CPU kernel set, expected portable (or "
			 "generic), avx2, avx512, avx512bf16 or amx",
			 env);
	return -EINVAL;
}

int cpu_isa_select(const char *name)
{
	enum cpu_isa isa;
	if (!name)
		isa = default_isa();
	else if (cpu_isa_parse(name, &isa) < 0)
		return -EINVAL;
	else if (!cpu_isa_supported(isa))
		return -ENOTSUP;
	__atomic_store_n(&cpu_isa_current_, (int)isa, __ATOMIC_RELEASE);
	return 0;
}
