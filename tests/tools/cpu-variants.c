/* cpu-variants: the CPU kernel variants ($HOLOD_CPU_KERNELS names) this machine runs, one a
 * line, most capable first; with --all, every variant with "yes" or "no" beside it. For CI's
 * loop over the numeric suites (tools/check.sh), which must ask the engine's own cpuid checks
 * (AMX also needs the OS's permission) rather than guess from /proc/cpuinfo. */
#include <stdio.h>
#include <string.h>

#include "cpu_isa.h"

int main(int argc, char **argv)
{
	static const struct {
		enum cpu_isa isa;
		const char *name;
	} v[] = {
		{CPU_ISA_AMX, "amx"},       {CPU_ISA_AVX512BF16, "avx512bf16"},
		{CPU_ISA_AVX512, "avx512"}, {CPU_ISA_AVX2, "avx2"},
		{CPU_ISA_PORTABLE, "portable"},
	};
	int all = argc > 1 && strcmp(argv[1], "--all") == 0;
	if (argc > 1 && !all) {
		fprintf(stderr, "usage: cpu-variants [--all]\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		int ok = cpu_isa_supported(v[i].isa);
		if (all)
			printf("%s %s\n", v[i].name, ok ? "yes" : "no");
		else if (ok)
			printf("%s\n", v[i].name);
	}
	return 0;
}
