/* The vision row kernels' table and the run-time choice from cpuid (vision_rows.h). The
 * variant is chosen once (first use) or by vision_rows_select(); a forward reads it once per
 * step, so a step never mixes two variants. */
#include "vision_rows.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

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

static bool supported(const struct vision_rows_variant *v)
{
	if (v == &vision_rows_portable)
		return true;
#ifdef HAVE_X86
	__builtin_cpu_init();
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	if (v == &vision_rows_avx2)
		return avx2;
	if (v == &vision_rows_avx512)
		return avx2 && __builtin_cpu_supports("avx512f");
#endif
	return false;
}

static const struct vision_rows_variant *find(const char *name)
{
	/* $HOLOD_CPU_KERNELS's names: "generic" is portable C, and the GEMV's "avx512bf16" caps
	 * these kernels at AVX-512, which they all are without bf16 instructions */
	if (strcmp(name, "generic") == 0)
		name = "portable";
	else if (strcmp(name, "avx512bf16") == 0)
		name = "avx512";
	for (size_t i = 0; i < ARRAY_SIZE(variants); i++)
		if (strcmp(variants[i]->name, name) == 0)
			return variants[i];
	return NULL;
}

static const struct vision_rows_variant *choose(void)
{
	const char *cap_name = getenv("HOLOD_CPU_KERNELS");
	const struct vision_rows_variant *cap = cap_name ? find(cap_name) : NULL;
	const struct vision_rows_variant *best = &vision_rows_portable;
	for (size_t i = 0; i < ARRAY_SIZE(variants); i++) {
		if (supported(variants[i]))
			best = variants[i];
		if (variants[i] == cap)
			break;
	}
	return best;
}

static const struct vision_rows_variant *selected;

const struct vision_rows_variant *vision_rows(void)
{
	/* racing first calls store the same pointer */
	const struct vision_rows_variant *v = __atomic_load_n(&selected, __ATOMIC_ACQUIRE);
	if (!v) {
		v = choose();
		__atomic_store_n(&selected, v, __ATOMIC_RELEASE);
	}
	return v;
}

int vision_rows_select(const char *name)
{
	const struct vision_rows_variant *v = find(name);
	if (!v)
		return -EINVAL;
	if (!supported(v))
		return -ENOTSUP;
	__atomic_store_n(&selected, v, __ATOMIC_RELEASE);
	return 0;
}

const char *vision_rows_variant_name(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(variants) ? variants[i]->name : NULL;
}
