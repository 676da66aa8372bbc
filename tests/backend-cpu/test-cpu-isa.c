/* The one CPU kernel dispatch (engine/backend/cpu/cpu_isa.h): under $HOLOD_CPU_KERNELS (each
 * meson entry names one set, none, or an unknown name) and after each cpu_isa_select(), every
 * kernel family runs the variant cpu_isa.h's table gives for the set in use; a set the CPU does
 * not run is a cap for the variable and a refusal for cpu_isa_select(); an unknown name is
 * refused by both (the CPU backend's creation for the variable), saying what is wrong. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_isa.h"
#include "cpu_rows.h"
#include "cpu_ssd.h"
#include "cpu_ssm.h"
#include "engine.h"
#include "test.h"
#include "vision_rows.h"

#define P CPU_ISA_PORTABLE
#define A2 CPU_ISA_AVX2
#define A5 CPU_ISA_AVX512
#define BF CPU_ISA_AVX512BF16
#define AMX CPU_ISA_AMX

TEST_DEFINE_GLOBALS;

static enum cpu_isa amx_isa(void)
{
	return cpu_amx_enabled() ? CPU_ISA_AMX : CPU_ISA_PORTABLE;
}

/* cpu_isa.h's table: the variant's set for each set in use */
static const struct family {
	const char *name;
	enum cpu_isa (*isa)(void);
	enum cpu_isa expect[CPU_ISA_COUNT];
} families[] = {
	{"gemv", cpu_gemv_isa, {P, A2, A5, BF, BF}},
	{"matmul", cpu_matmul_isa, {P, A2, A5, A5, A5}},
	{"rows", cpu_rows_isa, {P, A2, A5, A5, A5}},
	{"vision rows", vision_rows_isa, {P, A2, A5, A5, A5}},
	{"ssd", cpu_ssd_isa, {P, P, A5, BF, BF}},
	{"ssm", cpu_ssm_isa, {P, P, A5, A5, A5}},
	{"bf16 conversion", cpu_bf16_isa, {P, P, A5, A5, A5}},
	{"amx", amx_isa, {P, P, P, P, AMX}},
};

static enum cpu_isa best(void)
{
	enum cpu_isa b = CPU_ISA_PORTABLE;
	for (int i = 0; i < CPU_ISA_COUNT; i++)
		if (cpu_isa_supported((enum cpu_isa)i))
			b = (enum cpu_isa)i;
	return b;
}

/* every family runs its variant for `in_use` */
static void check_families(enum cpu_isa in_use, const char *how)
{
	CHECK_STR_EQ(cpu_isa_name(cpu_isa()), cpu_isa_name(in_use));
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		enum cpu_isa got = families[f].isa(), want = families[f].expect[in_use];
		if (got != want)
			fprintf(stderr, "%s: %s runs %s, want %s\n", how, families[f].name, cpu_isa_name(got),
				cpu_isa_name(want));
		CHECK(got == want);
	}
	/* the names the engine reports agree */
	if (in_use == CPU_ISA_PORTABLE) {
		CHECK_STR_EQ(cpu_kernel_name(), "generic");
		CHECK_STR_EQ(cpu_gemv_name(), "portable");
	}
}

/* The variable names an unknown set: the CPU backend refuses to start, naming it. */
static void check_backend_refuses(const char *env)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char dir[4096], err[512];
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/models/tiny-mamba", root ? root : ".");
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	REQUIRE(m);
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU};
	errno = 0;
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	CHECK(b == NULL && errno == EINVAL);
	CHECK(strstr(err, "HOLOD_CPU_KERNELS") && strstr(err, env) && strstr(err, "avx512bf16"));
	printf("backend refused: %s\n", err);
	engine_backend_destroy(b);
	engine_model_destroy(m);
}

int main(void)
{
	const char *env = getenv("HOLOD_CPU_KERNELS");
	enum cpu_isa cap = CPU_ISA_AMX, top = best();
	char err[256] = "";
	bool known = !env || !*env || cpu_isa_parse(env, &cap) == 0;
	printf("HOLOD_CPU_KERNELS=%s, this CPU runs up to %s\n", env ? env : "(unset)", cpu_isa_name(top));
	if (known) {
		CHECK_INT_EQ(cpu_isa_check_env(err, sizeof(err)), 0);
	} else {
		CHECK_INT_EQ(cpu_isa_check_env(err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, env) != NULL);
		check_backend_refuses(env);
		cap = CPU_ISA_AMX; /* a kernel called anyway runs uncapped */
	}
	/* the variable caps: a set above the CPU's runs the CPU's best */
	enum cpu_isa start = cap < top ? cap : top;
	check_families(start, "$HOLOD_CPU_KERNELS");

	/* cpu_isa_select() demands: each set the CPU runs, refused (nothing changed) otherwise */
	for (int i = 0; i < CPU_ISA_COUNT; i++) {
		const char *name = cpu_isa_name((enum cpu_isa)i);
		int r = cpu_isa_select(name);
		if (cpu_isa_supported((enum cpu_isa)i)) {
			CHECK_INT_EQ(r, 0);
			check_families((enum cpu_isa)i, name);
		} else {
			CHECK_INT_EQ(r, -ENOTSUP);
			CHECK_INT_EQ(cpu_isa_select("portable"), 0);
			CHECK_INT_EQ(cpu_isa_select(name), -ENOTSUP);
			check_families(CPU_ISA_PORTABLE, name);
		}
		printf("%s: %s\n", name, r == 0 ? "every family follows" : "refused, this CPU lacks it");
	}
	CHECK_INT_EQ(cpu_isa_select("generic"), 0);
	check_families(CPU_ISA_PORTABLE, "generic");
	CHECK_INT_EQ(cpu_isa_select("avx1024"), -EINVAL);
	CHECK_INT_EQ(cpu_isa_select(""), -EINVAL);
	check_families(CPU_ISA_PORTABLE, "avx1024");
	/* back to the variable's choice */
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
	check_families(start, "NULL");
	return test_exit();
}
