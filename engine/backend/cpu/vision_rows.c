/* The vision row kernels' table (vision_rows.h); cpu_isa_pick() chooses the variant (cpu_isa.h).
 * A forward reads it once per step, so a step never mixes two variants. */
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

const struct vision_rows_variant *vision_rows(void)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

enum cpu_isa vision_rows_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

const char *vision_rows_variant_name(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(variants) ? variants[i]->name : NULL;
}
