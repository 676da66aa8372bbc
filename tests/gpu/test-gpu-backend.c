/* The CUDA backend's state (engine/backend/cuda/backend_cuda.c): weights uploaded once in the chosen
 * precision, sequences on the device (import/export round trips, snapshot/restore/copy as device
 * copies, reset), memory accounting, and out-of-memory refusals. It runs on a real device (suite
 * `gpu`, 77 without one) and in the CUDA emulation (suite `gpu-emu`).
 *
 * Usage: test-gpu-backend [oom|fault]. `oom` expects a small device (HOLOD_GPU_EMU_MEMORY=1M in the
 * emulation): a model too large for it and sequences that do not fit must fail with -ENOMEM and
 * clear sentences, leaving everything else as it was. `fault` (emulation only) breaks the device
 * in the middle of a forward (HOLOD_GPU_EMU_FAULT, set by the test itself): the forward fails with
 * -EIO and a sentence naming the CUDA error, so does everything after it on that backend, and a
 * backend created after the broken one is destroyed computes the same logits as before the fault.
 *
 * Exactness: fp32 precision keeps every value; bf16 precision rounds matrices and the KV cache to
 * bf16 (round to nearest even) and nothing else, so each is compared bit for bit with the host's
 * own conversion. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

static struct engine_model *model_of(enum tensor_dtype dt, int hidden, int vocab)
{
	struct lm_random_spec sp = {
		.pattern = "M*-M*",
		.hidden = hidden,
		.vocab = vocab,
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
		.dtype = dt,
		.seed = 41 + (uint64_t)dt,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	return m;
}

/* The device copy of t equals the host's conversion of it, bit for bit. */
static void check_weight(struct engine_backend *b, const struct tensor *t, enum engine_precision p)
{
	if (!t->data)
		return;
	enum tensor_dtype dt;
	const void *dev = backend_cuda_weight(b, t, &dt);
	CHECK(dev != NULL);
	if (!dev)
		return;
	CHECK_INT_EQ(dt, t->ndim == 1 || p == ENGINE_PRECISION_FP32 ? TENSOR_F32 : TENSOR_BF16);
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	float *want = malloc(n * sizeof(float));
	void *got = malloc(n * 4);
	REQUIRE(want && got);
	cpu_tensor_to_f32(t, 0, n, want);
	size_t esz = dt == TENSOR_F32 ? 4 : 2;
	CHECK_INT_EQ(gpu_copy_to_host(backend_cuda_context(b), got, dev, n * esz), 0);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++) {
		if (dt == TENSOR_F32)
			bad += memcmp(&want[i], (float *)got + i, 4) != 0;
		else
			bad += f32_to_bf16(want[i]) != ((uint16_t *)got)[i];
	}
	CHECK_INT_EQ(bad, 0);
	free(want);
	free(got);
}

static void check_weights(struct engine_backend *b, const struct engine_model *m, enum engine_precision p)
{
	check_weight(b, &m->embeddings, p);
	check_weight(b, &m->norm_f, p);
	check_weight(b, &m->lm_head, p);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		check_weight(b, &L->norm, p);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			check_weight(b, &L->mamba.in_proj, p);
			check_weight(b, &L->mamba.conv_w, p);
			check_weight(b, &L->mamba.conv_b, p);
			check_weight(b, &L->mamba.dt_bias, p);
			check_weight(b, &L->mamba.a_log, p);
			check_weight(b, &L->mamba.d, p);
			check_weight(b, &L->mamba.norm, p);
			check_weight(b, &L->mamba.out_proj, p);
			break;
		case LM_LAYER_ATTENTION:
			check_weight(b, &L->attn.q, p);
			check_weight(b, &L->attn.k, p);
			check_weight(b, &L->attn.v, p);
			check_weight(b, &L->attn.o, p);
			break;
		case LM_LAYER_MLP:
			check_weight(b, &L->mlp.up, p);
			check_weight(b, &L->mlp.down, p);
			break;
		}
	}
}

/* Whether two states are equal, with want's K/V first rounded to bf16 when kv_bf16. */
static bool same_state(const struct engine_model *m, const struct backend_seq_state *want,
		       const struct backend_seq_state *got, bool kv_bf16)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	if (want->n_tokens != got->n_tokens || want->n_layers != got->n_layers)
		return false;
	size_t conv = (size_t)(dm.K - 1) * dm.conv_dim, ssm = (size_t)dm.H * dm.P * dm.N;
	size_t kv = (size_t)want->n_tokens * dm.kv_dim;
	for (int l = 0; l < want->n_layers; l++) {
		const struct backend_layer_state *x = &want->layers[l], *y = &got->layers[l];
		if (m->layers[l].kind == LM_LAYER_MAMBA) {
			if (memcmp(x->conv, y->conv, conv * 4) || memcmp(x->ssm, y->ssm, ssm * 4))
				return false;
		} else if (m->layers[l].kind == LM_LAYER_ATTENTION) {
			for (size_t i = 0; i < kv; i++) {
				float k = kv_bf16 ? bf16_to_f32(f32_to_bf16(x->k[i])) : x->k[i];
				float v = kv_bf16 ? bf16_to_f32(f32_to_bf16(x->v[i])) : x->v[i];
				if (memcmp(&k, &y->k[i], 4) || memcmp(&v, &y->v[i], 4))
					return false;
			}
		}
	}
	return true;
}

static bool state_is(struct engine_session *s, const struct engine_model *m,
		     const struct backend_seq_state *want, bool kv_bf16)
{
	struct backend_seq_state got = {0};
	if (backend_session_export(s, &got) < 0)
		return false;
	bool same = same_state(m, want, &got, kv_bf16);
	backend_seq_state_finish(&got);
	return same;
}

static void test_backend(enum tensor_dtype dt, enum engine_precision p)
{
	struct engine_model *m = model_of(dt, 64, 96);
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, p);
	bool kv_bf16 = p == ENGINE_PRECISION_BF16;

	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_STR_EQ(info.name, "cuda");
	CHECK_INT_EQ(info.kind, ENGINE_BACKEND_CUDA);
	CHECK_INT_EQ(info.precision, p);
	CHECK(info.runs_model);
	CHECK(info.device[0] != '\0');
	CHECK(info.weight_bytes > 0 && info.memory_total >= info.weight_bytes);
	CHECK_INT_EQ(info.state_bytes, 0);
	check_weights(b, m, p);

	/* a state computed by the CPU backend, imported and exported back */
	int n = 30, V = m->cfg.vocab;
	int32_t tok[30];
	for (int i = 0; i < n; i++)
		tok[i] = (int32_t)((i * 37 + 11) % V);
	struct engine_backend *cpu_b = test_env_backend(m);
	REQUIRE(cpu_b);
	struct engine_session *cpu = engine_session_create_on(cpu_b, 100);
	REQUIRE(cpu);
	CHECK_INT_EQ(engine_session_append(cpu, tok, NULL, (size_t)n, ENGINE_LOGITS_NONE, NULL), 0);
	struct backend_seq_state ref = {0};
	REQUIRE(backend_session_export(cpu, &ref) == 0);

	struct engine_session *s = engine_session_create_on(b, 100);
	REQUIRE(s);
	CHECK(engine_session_backend(s) == b);
	uint64_t fixed = engine_session_state_bytes(s);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, fixed);
	CHECK_INT_EQ(backend_session_import(s, &ref), 0);
	CHECK_INT_EQ(engine_session_n_tokens(s), n);
	CHECK(state_is(s, m, &ref, kv_bf16));
	/* the KV cache of exactly n positions: K and V, 2 attention layers, 32 wide */
	size_t kv_elem = kv_bf16 ? 2 : 4;
	CHECK_INT_EQ(engine_session_state_bytes(s), fixed + 2 * 2 * (size_t)n * 32 * kv_elem);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, engine_session_state_bytes(s));

	/* snapshot, reset, restore, copy: device copies that keep the state exactly */
	struct engine_snapshot *snap = engine_session_snapshot(s);
	REQUIRE(snap);
	CHECK_INT_EQ(engine_snapshot_n_tokens(snap), n);
	CHECK_INT_EQ(engine_snapshot_bytes(snap), engine_session_state_bytes(s));
	engine_session_reset(s);
	CHECK_INT_EQ(engine_session_n_tokens(s), 0);
	struct engine_session *fresh = engine_session_create_on(cpu_b, 100);
	REQUIRE(fresh);
	struct backend_seq_state zero = {0};
	REQUIRE(backend_session_export(fresh, &zero) == 0);
	CHECK(state_is(s, m, &zero, false));
	CHECK_INT_EQ(engine_session_restore(s, snap), 0);
	CHECK(state_is(s, m, &ref, kv_bf16));
	struct engine_session *cp = engine_session_copy(s);
	REQUIRE(cp);
	CHECK(state_is(cp, m, &ref, kv_bf16));
	engine_session_reset(s);
	CHECK(state_is(cp, m, &ref, kv_bf16)); /* the copy is its own */
	/* a snapshot of another backend is refused */
	struct engine_snapshot *cpu_snap = engine_session_snapshot(cpu);
	REQUIRE(cpu_snap);
	CHECK_INT_EQ(engine_session_restore(s, cpu_snap), -EINVAL);
	engine_snapshot_destroy(cpu_snap);

	/* the state limit holds on the device too: a sequence past it is -ENOMEM, unchanged */
	engine_session_destroy(cp);
	engine_snapshot_destroy(snap);
	engine_session_destroy(s);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, 0);
	engine_backend_destroy(b);
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CUDA,
					   .precision = p,
					   .state_limit = fixed + 1000};
	char err[512];
	b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(b);
	s = engine_session_create_on(b, 100);
	REQUIRE(s);
	CHECK_INT_EQ(backend_session_import(s, &ref), -ENOMEM);
	CHECK_INT_EQ(engine_session_n_tokens(s), 0);
	CHECK(state_is(s, m, &zero, false));
	errno = 0;
	CHECK(engine_session_create_on(b, 10) == NULL && errno == ENOMEM);
	engine_session_destroy(s);
	engine_backend_destroy(b);

	backend_seq_state_finish(&zero);
	backend_seq_state_finish(&ref);
	engine_session_destroy(fresh);
	engine_session_destroy(cpu);
	engine_backend_destroy(cpu_b);
	lm_random_model_destroy(m);
}

/* On a device of about 1 MiB: a model whose weights do not fit is refused before anything is
 * allocated, naming what it needs and what is free; sequences that do not fit are -ENOMEM. */
static void test_oom(void)
{
	struct engine_model *big = model_of(TENSOR_F32, 512, 2048);
	char err[512] = "";
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CUDA, .precision = ENGINE_PRECISION_FP32};
	errno = 0;
	CHECK(engine_backend_create(big, &o, err, sizeof(err)) == NULL && errno == ENOMEM);
	CHECK(strstr(err, "the model's weights need ") != NULL && strstr(err, " bytes free") != NULL);
	fprintf(stderr, "refused as expected: %s\n", err);
	lm_random_model_destroy(big);

	struct engine_model *m = model_of(TENSOR_BF16, 64, 96);
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	/* a KV cache larger than the device */
	struct engine_session *s = engine_session_create_on(b, ENGINE_SESSION_MAX_TOKENS);
	REQUIRE(s);
	struct engine_backend_info before, info;
	CHECK_INT_EQ(engine_backend_get_info(b, &before), 0);
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	int n = 20000; /* 2 layers x K,V x 20000 x 32 floats = 10 MB */
	struct backend_seq_state st = {.n_layers = m->cfg.n_layers, .n_tokens = n};
	st.layers = calloc((size_t)st.n_layers, sizeof(*st.layers));
	REQUIRE(st.layers);
	for (int l = 0; l < st.n_layers; l++) {
		st.layers[l].conv = calloc((size_t)(dm.K - 1) * dm.conv_dim, sizeof(float));
		st.layers[l].ssm = calloc((size_t)dm.H * dm.P * dm.N, sizeof(float));
		st.layers[l].k = calloc((size_t)n * dm.kv_dim, sizeof(float));
		st.layers[l].v = calloc((size_t)n * dm.kv_dim, sizeof(float));
		REQUIRE(st.layers[l].conv && st.layers[l].ssm && st.layers[l].k && st.layers[l].v);
	}
	CHECK_INT_EQ(backend_session_import(s, &st), -ENOMEM);
	CHECK_INT_EQ(engine_session_n_tokens(s), 0);
	/* sessions until the device is full: each fixed state is charged and given back */
	struct engine_session *many[256];
	int k = 0;
	errno = 0;
	while (k < 256 && (many[k] = engine_session_create_on(b, 8)))
		k++;
	CHECK(k > 0 && k < 256 && errno == ENOMEM);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, before.state_bytes + engine_session_state_bytes(s) * (uint64_t)k);
	for (int i = 0; i < k; i++)
		engine_session_destroy(many[i]);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, before.state_bytes);
	/* a forward whose scratch (the cuBLASLt workspace, the activations) does not fit: -ENOMEM
	 * from reserve() with the session unchanged, and the same again on a retry (nothing half
	 * made is left behind) */
	int32_t tok[4] = {1, 2, 3, 4};
	float logits[96];
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 4, ENGINE_LOGITS_LAST, logits), -ENOMEM);
	CHECK_INT_EQ(engine_session_n_tokens(s), 0);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 4, ENGINE_LOGITS_LAST, logits), -ENOMEM);
	backend_seq_state_finish(&st);
	engine_session_destroy(s);
	engine_backend_destroy(b);
	lm_random_model_destroy(m);
}

static void test_fault(void)
{
	char dir[] = "/tmp/holod-gpu-fault.XXXXXX";
	REQUIRE(mkdtemp(dir));
	char *trigger = path_join(dir, "fault");
	char *spec = xasprintf("file:%s", trigger);
	REQUIRE(setenv("HOLOD_GPU_EMU_FAULT", spec, 1) == 0); /* read at the first launch */

	struct engine_model *m = model_of(TENSOR_BF16, 64, 96);
	int32_t tok[12] = {1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 12};
	float want[96], got[96];
	char buf[512];

	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	struct engine_session *s = engine_session_create_on(b, 64);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 12, ENGINE_LOGITS_LAST, want), 0);
	engine_session_destroy(s);
	CHECK(!engine_backend_fault(b, buf, sizeof(buf)));

	/* the next kernel faults: in the middle of this forward */
	FILE *f = fopen(trigger, "w");
	REQUIRE(f);
	fclose(f);
	s = engine_session_create_on(b, 64);
	REQUIRE(s);
	int r = engine_session_append(s, tok, NULL, 12, ENGINE_LOGITS_LAST, got);
	CHECK_INT_EQ(r, -EIO);
	CHECK(unlink(trigger) == 0);
	CHECK(engine_backend_fault(b, buf, sizeof(buf)));
	CHECK(strstr(buf, "cudaErrorIllegalAddress") != NULL);
	engine_backend_strerror(b, r, buf, sizeof(buf));
	fprintf(stderr, "as expected: %s\n", buf);
	CHECK(strstr(buf, "the CUDA device 0 (") == buf &&
	      strstr(buf, ") failed: cudaErrorIllegalAddress (an illegal memory access was "
			  "encountered)") != NULL);
	/* the context stays broken: nothing more computes on this backend */
	engine_session_destroy(s);
	s = engine_session_create_on(b, 64);
	if (s)
		CHECK_INT_EQ(engine_session_append(s, tok, NULL, 12, ENGINE_LOGITS_LAST, got), -EIO);
	engine_session_destroy(s);
	engine_backend_destroy(b);

	/* a new backend (the old one reset the device as it went) computes as before */
	b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	CHECK(!engine_backend_fault(b, buf, sizeof(buf)));
	s = engine_session_create_on(b, 64);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 12, ENGINE_LOGITS_LAST, got), 0);
	CHECK(memcmp(want, got, sizeof(want)) == 0);
	engine_session_destroy(s);
	engine_backend_destroy(b);
	lm_random_model_destroy(m);
	rmdir(dir);
	free(spec);
	free(trigger);
}

/* $HOLOD_BACKEND / $HOLOD_PRECISION put the tests' backend (test_env_backend()) on the device,
 * fp32 unless told otherwise: the conformance suite's hook; a bad value is refused rather than
 * run on the CPU. On the CPU the default follows the weights (bf16 here). */
static void test_env_backend_choice(void)
{
	static const struct {
		const char *kind, *precision;
		bool ok;
		enum engine_precision want;
	} cases[] = {
		{"cuda", NULL, true, ENGINE_PRECISION_FP32}, {"cuda", "bf16", true, ENGINE_PRECISION_BF16},
		{"cpu", NULL, true, ENGINE_PRECISION_BF16},  {"cpu", "fp32", true, ENGINE_PRECISION_FP32},
		{"gpu", NULL, false, ENGINE_PRECISION_FP32}, {"cuda", "fp16", false, ENGINE_PRECISION_FP32},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct engine_model *m = model_of(TENSOR_BF16, 64, 100);
		setenv("HOLOD_BACKEND", cases[i].kind, 1);
		if (cases[i].precision)
			setenv("HOLOD_PRECISION", cases[i].precision, 1);
		else
			unsetenv("HOLOD_PRECISION");
		struct engine_backend *b = test_env_backend(m);
		CHECK(!b == !cases[i].ok);
		if (b) {
			struct engine_backend_info info;
			CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
			CHECK_STR_EQ(info.name, cases[i].kind);
			CHECK_INT_EQ((int)info.precision, (int)cases[i].want);
		}
		engine_backend_destroy(b);
		lm_random_model_destroy(m);
	}
	unsetenv("HOLOD_BACKEND");
	unsetenv("HOLOD_PRECISION");
}

int main(int argc, char **argv)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return TEST_SKIP;
	}
	if (argc > 1 && strcmp(argv[1], "oom") == 0) {
		test_oom();
		return test_exit();
	}
	if (argc > 1 && strcmp(argv[1], "fault") == 0) {
		test_fault();
		return test_exit();
	}
	enum tensor_dtype dts[] = {TENSOR_BF16, TENSOR_F16, TENSOR_F32};
	for (size_t i = 0; i < ARRAY_SIZE(dts); i++) {
		test_backend(dts[i], ENGINE_PRECISION_FP32);
		test_backend(dts[i], ENGINE_PRECISION_BF16);
	}
	test_env_backend_choice();
	return test_exit();
}
