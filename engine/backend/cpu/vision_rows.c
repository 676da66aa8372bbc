/* The vision row kernels' table and the run-time choice from cpuid (vision_rows.h). The
 * variant is chosen once (first use) or by vision_rows_select(); a forward reads it once per
 * step, so a step never mixes two variants. */
#include "vision_rows.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86 1
#endif

/* from the least to the most capable */
static const struct vision_rows_variant *const variants[] = {
	&vision_rows_portable,
#ifdef HAVE_X86
	&vision_rows_avx2,
	&vision_rows_avx512,
#endif
};

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX2,
	CPU_ISA_AVX512,
#endif
};
_Static_assert(ARRAY_SIZE(isas) == ARRAY_SIZE(variants), "one instruction set per variant");

static int selected = -1; /* the index in variants[], -1 before the first use */

const struct vision_rows_variant *vision_rows(void)
{
	/* racing first calls store the same index */
	int i = __atomic_load_n(&selected, __ATOMIC_ACQUIRE);
	if (i < 0) {
		i = cpu_isa_choose(isas, ARRAY_SIZE(isas), NULL);
		__atomic_store_n(&selected, i, __ATOMIC_RELEASE);
	}
	return variants[i];
}

int vision_rows_select(const char *name)
{
	int i = cpu_isa_choose(isas, ARRAY_SIZE(isas), name);
	if (i < 0)
		return i;
	__atomic_store_n(&selected, i, __ATOMIC_RELEASE);
	return 0;
}

const char *vision_rows_variant_name(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(variants) ? variants[i]->name : NULL;
}
