/* cpu-variants: the CPU kernel variants ($HOLOD_CPU_KERNELS names) this machine runs, one a
 * line, most capable first; with --all, every variant with "yes" or "no" beside it. For CI's
 * loop over the numeric suites (tools/check.sh), which must ask the engine's own cpuid checks
 * (AMX also needs the OS's permission) rather than guess from /proc/cpuinfo. */
#include <stdio.h>
#include <string.h>

#include "cpu_isa.h"

int main(int argc, char **argv)
{
	int all = argc > 1 && strcmp(argv[1], "--all") == 0;
	if (argc > 1 && !all) {
		fprintf(stderr, "usage: cpu-variants [--all]\n");
		return 2;
	}
	/* the sets and their names are cpu_isa.h's, most capable first */
	for (int i = CPU_ISA_COUNT - 1; i >= 0; i--) {
		int ok = cpu_isa_supported((enum cpu_isa)i);
		const char *name = cpu_isa_name((enum cpu_isa)i);
		if (all)
			printf("%s %s\n", name, ok ? "yes" : "no");
		else if (ok)
			printf("%s\n", name);
	}
	return 0;
}
