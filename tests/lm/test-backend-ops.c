/* The backend ops table's registration check (engine/backend/backend.h, backend_ops_check() and
 * backend_init()): the CPU's table passes (CUDA's is checked as each CUDA backend is created);
 * a table that lacks a mandatory member, or whose vision description does not hold, is refused
 * with one sentence naming the backend and what is wrong, and backend_init() refuses it before
 * the instance is used. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine.h"
#include "lm.h"
#include "test.h"
#include "vision.h"
#include "vision_cpu.h"

TEST_DEFINE_GLOBALS;

/* ops with one change refused with a sentence containing `want` */
static void check_refused(const struct backend_ops *ops, const char *want)
{
	char err[160] = "";
	CHECK_INT_EQ(backend_ops_check(ops, err, sizeof(err)), -EINVAL);
	if (!strstr(err, want))
		fprintf(stderr, "refusal \"%s\" does not name \"%s\"\n", err, want);
	CHECK(strstr(err, want) != NULL);
	CHECK(strstr(err, "backend cpu") != NULL);
}

int main(void)
{
	const struct backend_ops *cpu = backend_host_vision_ops();
	char err[160] = "";
	struct backend_ops o;

	CHECK_STR_EQ(cpu->name, "cpu");
	CHECK_INT_EQ(backend_ops_check(cpu, err, sizeof(err)), 0);
	/* every mandatory member, one at a time */
	o = *cpu, o.vision_preprocess = NULL;
	check_refused(&o, "lacks the mandatory member vision_preprocess");
	o = *cpu, o.vision_encode_tiles = NULL;
	check_refused(&o, "lacks the mandatory member vision_encode_tiles");
	o = *cpu, o.forward = NULL;
	check_refused(&o, "lacks the mandatory member forward");
	o = *cpu, o.reserve = NULL;
	check_refused(&o, "lacks the mandatory member reserve");
	o = *cpu, o.seq_create = NULL;
	check_refused(&o, "lacks the mandatory member seq_create");
	o = *cpu, o.info = NULL;
	check_refused(&o, "lacks the mandatory member info");
	/* the optional ones may go, in their groups */
	o = *cpu, o.profile = NULL, o.profile_report = NULL;
	CHECK_INT_EQ(backend_ops_check(&o, err, sizeof(err)), 0);
	o = *cpu, o.profile = NULL;
	check_refused(&o, "profile and profile_report come together");
	/* the vision description as data */
	o = *cpu, o.vision.device = true;
	check_refused(&o, "device memory but it has no rows_alloc");
	o = *cpu, o.vision.max_tiles = 0;
	check_refused(&o, "vision.max_tiles 0 is not in 1..");
	o = *cpu, o.vision.max_tiles = VISION_MAX_ENCODE_TILES + 1;
	check_refused(&o, "vision.max_tiles");
	o = *cpu, o.vision.step = (enum backend_vision_step)7;
	check_refused(&o, "vision.step 7 is no step kind");

	/* registration: backend_init() refuses the table before the instance holds it */
	struct lm_random_spec sp = {
		.pattern = "M*",
		.hidden = 64,
		.vocab = 96,
		.intermediate = 96,
		.n_heads = 4,
		.n_kv_heads = 2,
		.head_dim = 16,
		.m_heads = 8,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 16,
		.m_conv_kernel = 4,
		.m_chunk = 8,
		.dtype = TENSOR_BF16,
		.seed = 5,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	struct engine_backend_options opts = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend b = {0};
	o = *cpu, o.vision_encode_tiles = NULL;
	CHECK_INT_EQ(backend_init(&b, &o, m, &opts), -EINVAL);
	CHECK(b.ops == NULL);
	CHECK_INT_EQ(backend_init(&b, cpu, m, &opts), 0);
	CHECK(b.ops == cpu);
	/* and a backend created through it works */
	struct engine_backend *cb = engine_backend_create(m, &opts, err, sizeof(err));
	CHECK(cb != NULL);
	engine_backend_destroy(cb);
	lm_random_model_destroy(m);
	return test_exit();
}
