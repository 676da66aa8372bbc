/* The kernel families' one run-time choice from cpuid and $HOLOD_CPU_KERNELS (cpu_isa.h). */
#include "cpu_isa.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define HAVE_X86 1
#endif

static const char *const isa_names[] = {
	[CPU_ISA_PORTABLE] = "portable",
	[CPU_ISA_AVX2] = "avx2",
	[CPU_ISA_AVX512] = "avx512",
	[CPU_ISA_AVX512BF16] = "avx512bf16",
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
		/* CPUID.(7,1):EAX.AVX512_BF16[bit 5] */
		return avx512 && __builtin_cpu_supports("avx512bw") &&
		       __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
	default:
		return false;
	}
#else
	return false;
#endif
}

int cpu_isa_choose(const enum cpu_isa *isas, size_t n, const char *name)
{
	enum cpu_isa cap = CPU_ISA_AVX512BF16;
	if (name) {
		int r = parse(name, &cap);
		if (r < 0)
			return r;
	} else {
		const char *env = getenv("HOLOD_CPU_KERNELS");
		if (env && parse(env, &cap) < 0)
			cap = CPU_ISA_AVX512BF16;
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
