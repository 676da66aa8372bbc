/* The CUDA backend's memory plan (engine/backend/cuda/device_plan.h, issue 29) on an emulated 24 GiB
 * sm_89 device (an RTX 4090: HOLOD_GPU_EMU_MEMORY=24G, HOLOD_GPU_EMU_ARCH=sm_89, tests/gpu/
 * meson.build):
 *   - the full Holotron-12B, planned from tools/bench/holotron-12b-config.json's shapes (its 62
 *     layers) and RADIO-H's (model.md 1.3) with one session of 32768 tokens, no weight uploaded:
 *     q8 and fp8 fit 24 GiB, bf16 does not and the refusal names the sizes and the formats that
 *     fit; on 16 GiB q4 fits;
 *   - the plan's weights and scratch are what the backend allocates, byte for byte, on the tiny
 *     checkpoints in bf16, q8, q4 and fp8 (a tied head too);
 *   - a 12B-shaped model with three layers (one Mamba, one attention, one MLP layer of the 12B's
 *     widths; a 4096-token vocabulary to keep it small) planned from its shapes: on a device
 *     between its q8 and bf16 plans, bf16 is refused before anything is allocated with the
 *     plan's sentence, and q8 is created with the plan's weights, scratch and total; planned
 *     for more sessions than fit, q8 is created when plan_sessions_min of them fit (the plan's
 *     sessions_fit saying how many do) and refused with the sentence of plan_sessions_min
 *     sessions when fewer fit.
 * The 16 GiB and in-between devices are this program run again with another
 * HOLOD_GPU_EMU_MEMORY (the emulation reads it once per process). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "device_plan.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "loader.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define GIB ((uint64_t)1 << 30)

static char *read_text(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	REQUIRE(f);
	char *buf = malloc(1 << 20);
	REQUIRE(buf);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	buf[n] = '\0';
	*ret_len = n;
	return buf;
}

static uint64_t device_free(void)
{
	struct gpu_context *g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	size_t free_b = 0, total_b = 0;
	REQUIRE(gpu_memory_info(g, &free_b, &total_b) == 0);
	gpu_context_destroy(g);
	return free_b;
}

/* Runs this program again with `mode` on a device of `bytes`; its exit status. */
static int run_on(const char *mode, uint64_t bytes)
{
	char mem[32];
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)bytes);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("HOLOD_GPU_EMU_MEMORY", mem, 1);
		execl("/proc/self/exe", "test-gpu-plan", mode, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* RADIO-H and its projector as Holotron-12B has them (model.md 1.3): 12 tiles and the thumbnail */
static const struct device_plan_vision radio_h = {
	.width = 1280,
	.depth = 32,
	.mlp = 5120,
	.patch = 16,
	.prefix = 8,
	.shuffle = 2,
	.proj_hidden = 20480,
	.out_dim = 5120,
	.tile = 512,
	.tiles = 13,
};

static struct engine_memory_plan plan_12b(const struct model_config *mc, enum engine_weights w,
					  uint64_t free_b, bool *ret_fits)
{
	struct device_plan_args a = {
		.lm = &mc->lm,
		.tied = mc->tie_word_embeddings,
		.conv_bias = mc->use_conv_bias,
		.weights = w,
		.precision = ENGINE_PRECISION_BF16,
		.vision = &radio_h,
		.sessions = 1,
		.context = 32768,
	};
	struct engine_memory_plan p;
	REQUIRE(device_plan_compute(&a, &p) == 0);
	*ret_fits = device_plan_fit(&p, free_b);
	char line[512];
	fprintf(stderr, "Holotron-12B %-4s on %.1f GiB: %s: %s, %d sessions of 32768 tokens fit\n", p.weights,
		(double)free_b / GIB, device_plan_describe(&p, line, sizeof(line)),
		*ret_fits ? "fits" : "does not fit", p.sessions_fit);
	return p;
}

static struct model_config holotron_config(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	REQUIRE(root);
	char path[1024], err[256] = "";
	snprintf(path, sizeof(path), "%s/tools/bench/holotron-12b-config.json", root);
	size_t len;
	char *text = read_text(path, &len);
	struct model_config mc;
	if (model_config_parse(text, len, &mc, err, sizeof(err)) < 0)
		fprintf(stderr, "%s: %s\n", path, err);
	free(text);
	REQUIRE(mc.lm.n_layers == 62 && mc.vocab_size == 131072);
	mc.lm.vocab = mc.vocab_size; /* the embedding's rows, which a checkpoint would give */
	return mc;
}

static void test_full_12b(void)
{
	struct model_config mc = holotron_config();

	/* the emulated RTX 4090 */
	struct gpu_device_info di;
	REQUIRE(gpu_device_info(test_gpu_device(), &di) == 0);
	CHECK_INT_EQ(di.compute_major, 8);
	CHECK_INT_EQ(di.compute_minor, 9);
	uint64_t free_b = device_free();
	CHECK(free_b == 24 * GIB);

	bool fits;
	struct engine_memory_plan q8 = plan_12b(&mc, ENGINE_WEIGHTS_Q8, free_b, &fits);
	CHECK(fits && q8.sessions_fit >= 1);
	struct engine_memory_plan fp8 = plan_12b(&mc, ENGINE_WEIGHTS_FP8, free_b, &fits);
	CHECK(fits && fp8.sessions_fit >= 1);
	struct engine_memory_plan q4 = plan_12b(&mc, ENGINE_WEIGHTS_Q4, free_b, &fits);
	CHECK(fits && q4.sessions_fit > q8.sessions_fit);
	struct engine_memory_plan bf16 = plan_12b(&mc, ENGINE_WEIGHTS_BF16, free_b, &fits);
	CHECK(!fits && bf16.sessions_fit == 0);
	/* the formats' bytes, from the shapes: 12.3 billion LM parameters in bf16; q8 8.5 bits
	 * and fp8 8 bits a weight in the layers (fp8's head stays bf16); q4 5 bits */
	CHECK(bf16.weight_bytes > 22 * GIB && bf16.weight_bytes < 24 * GIB);
	CHECK(q8.layers > 10 * GIB && q8.layers < 11 * GIB);
	CHECK(fp8.layers < q8.layers && fp8.head == bf16.head && q4.layers < q8.layers * 2 / 3);
	CHECK(q8.session == bf16.session && q8.session > GIB / 2 && q8.session < GIB);
	/* RADIO-H's 0.86 billion parameters in bf16 (1.6 GiB) and 13 tiles' activations */
	CHECK(bf16.vision > 3 * GIB / 2 && bf16.vision < 7 * GIB / 2);

	const struct engine_memory_plan *alts[] = {&q8, &q4, NULL};
	char msg[1024];
	device_plan_refusal(&bf16, "Holotron-12B", "CUDA device 0 (NVIDIA GeForce RTX 4090)", alts, msg,
			    sizeof(msg));
	fprintf(stderr, "refusal: %s\n", msg);
	char want[128];
	snprintf(want, sizeof(want), "Holotron-12B in bf16 needs %.1f GiB of weights (bf16) + ",
		 (double)bf16.weight_bytes / GIB);
	CHECK(strncmp(msg, want, strlen(want)) == 0);
	CHECK(strstr(msg, " GiB of vision tower + 1 session of 32768 tokens (") != NULL);
	CHECK(strstr(msg, "of device memory; CUDA device 0 (NVIDIA GeForce RTX 4090) has 24.0 GiB "
			  "free: use --weights q8 or q4") != NULL);

	/* 16 GiB (an RTX 4060 Ti 16GB, or a 4080): q4 fits */
	CHECK_INT_EQ(run_on("16g", 16 * GIB), 0);
}

/* On a 16 GiB device */
static void test_16g(void)
{
	struct model_config mc = holotron_config();
	uint64_t free_b = device_free();
	CHECK(free_b == 16 * GIB);
	bool fits;
	struct engine_memory_plan q4 = plan_12b(&mc, ENGINE_WEIGHTS_Q4, free_b, &fits);
	CHECK(fits && q4.sessions_fit >= 1);
	plan_12b(&mc, ENGINE_WEIGHTS_BF16, free_b, &fits);
	CHECK(!fits);
}

/* A backend planned for `sessions` sessions of 32768 tokens of which `least` must fit (0: all). */
static struct engine_backend *create_n(struct engine_model *m, enum engine_weights w, int sessions, int least,
				       char *err, size_t len)
{
	struct engine_backend_options o = {
		.kind = ENGINE_BACKEND_CUDA,
		.device = test_gpu_device(),
		.precision = ENGINE_PRECISION_BF16,
		.weights = w,
		.plan_sessions = sessions,
		.plan_sessions_min = least,
		.plan_context = 32768,
	};
	errno = 0;
	return engine_backend_create(m, &o, err, len);
}

static struct engine_backend *create(struct engine_model *m, enum engine_weights w, char *err, size_t len)
{
	return create_n(m, w, 1, 0, err, len);
}

static void check_backend(struct engine_backend *b, const char *format)
{
	struct engine_backend_info bi;
	REQUIRE(engine_backend_get_info(b, &bi) == 0);
	CHECK(bi.has_plan);
	CHECK(strcmp(bi.plan.weights, format) == 0);
	CHECK(bi.plan.weight_bytes == bi.weight_bytes);
	CHECK(bi.plan.scratch == backend_cuda_scratch_bytes(b));
	CHECK(bi.plan.sessions == 1 && bi.plan.context == 32768 && bi.plan.sessions_fit >= 1);
	fprintf(stderr, "%s: weights %llu, scratch %llu bytes, as the backend's\n", format,
		(unsigned long long)bi.weight_bytes, (unsigned long long)bi.plan.scratch);
}

/* Holotron-12B's widths (tools/bench/holotron-12b-config.json), three layers */
static const struct lm_random_spec spec_12b_shaped = {
	.pattern = "M*-",
	.hidden = 5120,
	.vocab = 4096,
	.intermediate = 20480,
	.n_heads = 40,
	.n_kv_heads = 8,
	.head_dim = 128,
	.m_heads = 128,
	.m_head_dim = 80,
	.m_groups = 8,
	.m_state = 128,
	.m_conv_kernel = 4,
	.m_chunk = 128,
	.dtype = TENSOR_BF16,
	.seed = 29,
};

/* The plan of spec_12b_shaped from its shapes alone (lm_random_model_create() gives its Mamba
 * layers a conv bias and an untied head). */
static struct engine_memory_plan plan_12b_shaped(enum engine_weights w)
{
	const struct lm_random_spec *sp = &spec_12b_shaped;
	struct lm_config c = {
		.n_layers = 3,
		.hidden = sp->hidden,
		.vocab = sp->vocab,
		.intermediate = sp->intermediate,
		.n_heads = sp->n_heads,
		.n_kv_heads = sp->n_kv_heads,
		.head_dim = sp->head_dim,
		.m_heads = sp->m_heads,
		.m_head_dim = sp->m_head_dim,
		.m_groups = sp->m_groups,
		.m_state = sp->m_state,
		.m_conv_kernel = sp->m_conv_kernel,
		.m_chunk = sp->m_chunk,
	};
	snprintf(c.pattern, sizeof(c.pattern), "%s", sp->pattern);
	struct device_plan_args a = {.lm = &c,
				     .conv_bias = true,
				     .weights = w,
				     .precision = ENGINE_PRECISION_BF16,
				     .sessions = 1,
				     .context = 32768};
	struct engine_memory_plan p;
	REQUIRE(device_plan_compute(&a, &p) == 0);
	return p;
}

/* The plan's weights and scratch are the backend's, byte for byte, on the tiny checkpoints
 * (tiny-tied: a tied head, plain or quantized as its own copy) */
static void test_tiny(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	const char *models[] = {"tiny-mamba", "tiny-tied"};
	const enum engine_weights ws[] = {ENGINE_WEIGHTS_DEFAULT, ENGINE_WEIGHTS_Q8, ENGINE_WEIGHTS_Q4,
					  ENGINE_WEIGHTS_FP8};
	const char *names[] = {"bf16", "q8", "q4", "fp8"};
	for (size_t i = 0; i < ARRAY_SIZE(models); i++) {
		char dir[1024], err[1024] = "";
		snprintf(dir, sizeof(dir), "%s/tests/fixtures/models/%s", root, models[i]);
		struct engine_model *m = engine_model_load(dir, err, sizeof(err));
		if (!m)
			fprintf(stderr, "%s: %s\n", dir, err);
		REQUIRE(m);
		for (size_t k = 0; k < ARRAY_SIZE(ws); k++) {
			struct engine_backend *b = create(m, ws[k], err, sizeof(err));
			if (!b)
				fprintf(stderr, "%s: %s\n", models[i], err);
			REQUIRE(b);
			fprintf(stderr, "%s ", models[i]);
			check_backend(b, names[k]);
			engine_backend_destroy(b);
		}
		engine_model_destroy(m);
	}
}

static void test_12b_shaped(void)
{
	/* a device between the three-layer model's q8 plan and its bf16 one */
	struct engine_memory_plan q8 = plan_12b_shaped(ENGINE_WEIGHTS_Q8);
	struct engine_memory_plan bf16 = plan_12b_shaped(ENGINE_WEIGHTS_BF16);
	REQUIRE(q8.total < bf16.total);
	CHECK_INT_EQ(run_on("between", (q8.total + bf16.total) / 2), 0);
}

/* On a device between the 12B-shaped model's q8 and bf16 plans: bf16 refused before anything
 * is allocated, q8 created with the plan's weights and scratch */
static void test_between(void)
{
	struct engine_model *m = lm_random_model_create(&spec_12b_shaped);
	REQUIRE(m);
	char err[1024] = "";
	uint64_t between = device_free();
	struct engine_backend *b = create(m, ENGINE_WEIGHTS_BF16, err, sizeof(err));
	CHECK(b == NULL && errno == ENOMEM);
	fprintf(stderr, "refused as expected: %s\n", err);
	CHECK(strncmp(err, "the model in bf16 needs ", 24) == 0);
	CHECK(strstr(err, " GiB of weights (bf16) + 1 session of 32768 tokens (") != NULL);
	CHECK(strstr(err, " free: use --weights q8 or fp8 or q4") != NULL); /* sm_89 has FP8 */
	CHECK(device_free() == between);				    /* nothing was allocated */

	b = create(m, ENGINE_WEIGHTS_Q8, err, sizeof(err));
	if (!b)
		fprintf(stderr, "%s\n", err);
	REQUIRE(b);
	check_backend(b, "q8");
	struct engine_backend_info bi;
	REQUIRE(engine_backend_get_info(b, &bi) == 0);
	struct engine_memory_plan q8 = plan_12b_shaped(ENGINE_WEIGHTS_Q8);
	CHECK(bi.plan.total == q8.total); /* the shapes' plan is the backend's */
	engine_backend_destroy(b);

	/* more sessions planned than fit (holod: more tasks than the device holds): created when
	 * plan_sessions_min of them fit, the plan saying how many do; refused with the sentence of
	 * plan_sessions_min sessions when fewer fit */
	const int many = 1000;
	b = create_n(m, ENGINE_WEIGHTS_Q8, many, 1, err, sizeof(err));
	if (!b)
		fprintf(stderr, "%s\n", err);
	REQUIRE(b);
	REQUIRE(engine_backend_get_info(b, &bi) == 0);
	const int fit = bi.plan.sessions_fit;
	CHECK(bi.plan.sessions == many && fit >= 1 && fit < many);
	CHECK(bi.plan.total == q8.total + (uint64_t)(many - 1) * q8.session);
	CHECK(bi.plan.free - (bi.plan.total - (uint64_t)many * q8.session) >= (uint64_t)fit * q8.session);
	fprintf(stderr, "q8: %d of %d sessions of 32768 tokens fit\n", fit, many);
	engine_backend_destroy(b);
	b = create_n(m, ENGINE_WEIGHTS_Q8, many, fit, err, sizeof(err));
	REQUIRE(b);
	engine_backend_destroy(b);
	b = create_n(m, ENGINE_WEIGHTS_Q8, many, fit + 1, err, sizeof(err));
	CHECK(b == NULL && errno == ENOMEM);
	fprintf(stderr, "refused as expected: %s\n", err);
	char want[64];
	snprintf(want, sizeof(want), " + %d sessions of 32768 tokens (", fit + 1);
	CHECK(strncmp(err, "the model in q8 needs ", 22) == 0);
	CHECK(strstr(err, want) != NULL);
	/* q4's smaller weights leave room for them: it is named */
	CHECK(strstr(err, " free: use --weights ") != NULL && strstr(err, "q4") != NULL);
	CHECK(device_free() == between);
	lm_random_model_destroy(m);
}

int main(int argc, char **argv)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return TEST_SKIP;
	}
	if (!gpu_devices_emulated()) {
		fprintf(stderr, "the emulated 24 GiB device is what this plans: skipped on a GPU\n");
		return TEST_SKIP;
	}
	if (argc > 1 && !strcmp(argv[1], "16g"))
		test_16g();
	else if (argc > 1 && !strcmp(argv[1], "between"))
		test_between();
	else {
		test_full_12b();
		test_tiny();
		test_12b_shaped();
	}
	return test_exit();
}
