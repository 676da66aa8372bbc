/* The backend seam (engine/backend/backend.h): batches of several sessions against separate calls,
 * all-or-nothing failures, the state limit and its accounting, backend options and their
 * error sentences. In-memory random models; the CPU backend.
 *
 * A batch runs each session's positions in the same runs a separate append would, so in fp32
 * logits and states must be bit-identical, not merely close (in bf16 the decode rows of several
 * sessions run on other kernels than one session's: tests/lm/test-lm-batch.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_dnnl.h"
#include "cpu_isa.h"
#include "engine.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 777;

static int32_t next_token(int vocab)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (int32_t)((rng >> 33) % (uint64_t)vocab);
}

static int32_t *make_tokens(int n, int vocab)
{
	int32_t *t = malloc((size_t)n * sizeof(*t));
	REQUIRE(t);
	for (int i = 0; i < n; i++)
		t[i] = next_token(vocab);
	return t;
}

static struct engine_model *small_model_dtype(const char *pattern, uint64_t seed, enum tensor_dtype dtype)
{
	struct lm_random_spec sp = {
		.pattern = pattern,
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
		.dtype = dtype,
		.seed = seed,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	return m;
}

static struct engine_model *small_model(const char *pattern, uint64_t seed)
{
	return small_model_dtype(pattern, seed, TENSOR_BF16);
}

/* Whether two sessions hold bit-identical state (every layer's conv, SSM, K and V). */
static bool same_state(const struct engine_session *a, const struct engine_session *b)
{
	struct backend_seq_state sa = {0}, sb = {0};
	REQUIRE(backend_session_export(a, &sa) == 0 && backend_session_export(b, &sb) == 0);
	const struct engine_model *m = engine_session_backend(a)->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	bool same = sa.n_tokens == sb.n_tokens && sa.n_layers == sb.n_layers;
	size_t conv = (size_t)(dm.K - 1) * dm.conv_dim, ssm = (size_t)dm.H * dm.P * dm.N;
	size_t kv = (size_t)sa.n_tokens * dm.kv_dim;
	for (int l = 0; same && l < sa.n_layers; l++) {
		const struct backend_layer_state *x = &sa.layers[l], *y = &sb.layers[l];
		switch (m->layers[l].kind) {
		case LM_LAYER_MAMBA:
			same = memcmp(x->conv, y->conv, conv * sizeof(float)) == 0 &&
			       memcmp(x->ssm, y->ssm, ssm * sizeof(float)) == 0;
			break;
		case LM_LAYER_ATTENTION:
			same = memcmp(x->k, y->k, kv * sizeof(float)) == 0 &&
			       memcmp(x->v, y->v, kv * sizeof(float)) == 0;
			break;
		case LM_LAYER_MLP:
			break;
		}
	}
	backend_seq_state_finish(&sa);
	backend_seq_state_finish(&sb);
	return same;
}

/* Three sessions at different positions (0, 5 and 17 tokens held) advance in one batch: a long
 * prefill over several runs wanting its last logits, a split prefill wanting every row, and a
 * one-token decode. Each must get what a separate call gives. */
#define N_SESS 3
static const int prefix_len[N_SESS] = {0, 5, 17};
static const int step_len[N_SESS] = {LM_MAX_BATCH + 44, 7, 1};
static const enum engine_logits step_want[N_SESS] = {ENGINE_LOGITS_LAST, ENGINE_LOGITS_ALL,
						     ENGINE_LOGITS_LAST};

static size_t rows_of(int i)
{
	return step_want[i] == ENGINE_LOGITS_ALL ? (size_t)step_len[i] : 1;
}

static void prefill(struct engine_session **s, int32_t *const *prefix)
{
	for (int i = 0; i < N_SESS; i++) {
		engine_session_reset(s[i]);
		if (prefix_len[i])
			REQUIRE(engine_session_append(s[i], prefix[i], NULL, (size_t)prefix_len[i],
						      ENGINE_LOGITS_NONE, NULL) == 0);
	}
}

static void test_batch_equals_separate(struct engine_backend *b, struct engine_model *m)
{
	int V = m->cfg.vocab;
	int32_t *prefix[N_SESS], *step[N_SESS];
	float *want[N_SESS], *got[N_SESS];
	struct engine_session *ref[N_SESS], *bat[N_SESS];
	for (int i = 0; i < N_SESS; i++) {
		prefix[i] = make_tokens(prefix_len[i] + 1, V);
		step[i] = make_tokens(step_len[i], V);
		want[i] = malloc(rows_of(i) * (size_t)V * sizeof(float));
		got[i] = malloc(rows_of(i) * (size_t)V * sizeof(float));
		ref[i] = engine_session_create_on(b, 400);
		bat[i] = engine_session_create_on(b, 400);
		REQUIRE(want[i] && got[i] && ref[i] && bat[i]);
		CHECK(engine_session_backend(bat[i]) == b);
	}
	prefill(ref, prefix);
	prefill(bat, prefix);
	for (int i = 0; i < N_SESS; i++)
		CHECK_INT_EQ(engine_session_append(ref[i], step[i], NULL, (size_t)step_len[i], step_want[i],
						   want[i]),
			     0);

	struct engine_batch_entry e[N_SESS];
	for (int i = 0; i < N_SESS; i++)
		e[i] = (struct engine_batch_entry){.session = bat[i],
						   .tokens = step[i],
						   .n = (size_t)step_len[i],
						   .want = step_want[i],
						   .ret_logits = got[i]};
	CHECK_INT_EQ(engine_forward_batch(b, e, N_SESS), 0);
	for (int i = 0; i < N_SESS; i++) {
		CHECK_INT_EQ(engine_session_n_tokens(bat[i]), prefix_len[i] + step_len[i]);
		CHECK(memcmp(want[i], got[i], rows_of(i) * (size_t)V * sizeof(float)) == 0);
		CHECK(same_state(ref[i], bat[i]));
	}

	/* a batch of one decode each, in another order, continues them identically */
	float *la = malloc((size_t)V * sizeof(float) * N_SESS),
	      *lb = malloc((size_t)V * sizeof(float) * N_SESS);
	REQUIRE(la && lb);
	int32_t tok[N_SESS] = {3, 50, 91};
	for (int i = 0; i < N_SESS; i++) {
		CHECK_INT_EQ(engine_session_decode(ref[i], tok[i], la + (size_t)i * V), 0);
		int j = N_SESS - 1 - i;
		e[i] = (struct engine_batch_entry){.session = bat[j],
						   .tokens = &tok[j],
						   .n = 1,
						   .want = ENGINE_LOGITS_LAST,
						   .ret_logits = lb + (size_t)j * V};
	}
	CHECK_INT_EQ(engine_forward_batch(b, e, N_SESS), 0);
	CHECK(memcmp(la, lb, (size_t)V * sizeof(float) * N_SESS) == 0);

	/* argument errors change nothing */
	e[0] = (struct engine_batch_entry){.session = bat[0],
					   .tokens = tok,
					   .n = 1,
					   .want = ENGINE_LOGITS_LAST,
					   .ret_logits = lb};
	e[1] = e[0];
	CHECK_INT_EQ(engine_forward_batch(b, e, 2), -EINVAL); /* the same session twice */
	CHECK_INT_EQ(engine_forward_batch(b, e, 0), -EINVAL);
	CHECK_INT_EQ(engine_forward_batch(NULL, e, 1), -EINVAL);
	struct engine_backend *ob = test_env_backend(m); /* another backend of the model */
	REQUIRE(ob);
	struct engine_session *other = engine_session_create_on(ob, 8);
	REQUIRE(other);
	CHECK(engine_session_backend(other) != b);
	e[1] = (struct engine_batch_entry){.session = other, .tokens = tok, .n = 1};
	CHECK_INT_EQ(engine_forward_batch(b, e, 2), -EINVAL);
	e[1] = (struct engine_batch_entry){.session = bat[1], .tokens = step[0], .n = 400};
	CHECK_INT_EQ(engine_forward_batch(b, e, 2), -ENOSPC);
	int32_t bad = V;
	e[1] = (struct engine_batch_entry){.session = bat[1], .tokens = &bad, .n = 1};
	CHECK_INT_EQ(engine_forward_batch(b, e, 2), -EINVAL);
	e[1] = (struct engine_batch_entry){.session = bat[1], .tokens = tok, .n = 1, .want = ENGINE_LOGITS_ALL};
	CHECK_INT_EQ(engine_forward_batch(b, e, 2), -EINVAL); /* logits wanted, no buffer */
	for (int i = 0; i < N_SESS; i++)
		CHECK(same_state(ref[i], bat[i]));
	engine_session_destroy(other);
	engine_backend_destroy(ob);

	for (int i = 0; i < N_SESS; i++) {
		engine_session_destroy(ref[i]);
		engine_session_destroy(bat[i]);
		free(prefix[i]);
		free(step[i]);
		free(want[i]);
		free(got[i]);
	}
	free(la);
	free(lb);
}

/* A backend whose state limit the batch would pass: the reserve fails with -ENOMEM and none of
 * the three sessions changes; they continue exactly as sessions that never saw the batch. */
static void test_batch_reserve_failure(struct engine_model *m)
{
	int V = m->cfg.vocab;
	char err[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU};
	struct engine_backend *ref_b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(ref_b);
	int32_t *prefix[N_SESS], *step[N_SESS];
	struct engine_session *ref[N_SESS], *lim[N_SESS];
	for (int i = 0; i < N_SESS; i++) {
		prefix[i] = make_tokens(prefix_len[i] + 1, V);
		step[i] = make_tokens(step_len[i], V);
		ref[i] = engine_session_create_on(ref_b, 400);
		REQUIRE(ref[i]);
	}
	prefill(ref, prefix);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(ref_b, &info), 0);

	/* what the three prefixes hold, plus the first KV block (64 positions) of the empty
	 * session, far less than the batch's KV growth */
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	o.state_limit = info.state_bytes + 2 * 64 * (uint64_t)dm.kv_dim * sizeof(float) + 1024;
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(b);
	for (int i = 0; i < N_SESS; i++) {
		lim[i] = engine_session_create_on(b, 400);
		REQUIRE(lim[i]);
	}
	prefill(lim, prefix);
	struct engine_backend_info before;
	CHECK_INT_EQ(engine_backend_get_info(b, &before), 0);
	CHECK(before.state_bytes <= o.state_limit);
	CHECK(before.state_limit == o.state_limit);

	float *logits = malloc((size_t)LM_MAX_BATCH * 2 * (size_t)V * sizeof(float));
	REQUIRE(logits);
	struct engine_batch_entry e[N_SESS];
	for (int i = 0; i < N_SESS; i++)
		e[i] = (struct engine_batch_entry){.session = lim[i],
						   .tokens = step[i],
						   .n = (size_t)step_len[i],
						   .want = ENGINE_LOGITS_LAST,
						   .ret_logits = logits + (size_t)i * V};
	CHECK_INT_EQ(engine_forward_batch(b, e, N_SESS), -ENOMEM);
	for (int i = 0; i < N_SESS; i++) {
		CHECK_INT_EQ(engine_session_n_tokens(lim[i]), prefix_len[i]);
		CHECK(same_state(ref[i], lim[i]));
	}
	/* a single append past the limit fails the same way; a session past it cannot be made */
	CHECK_INT_EQ(engine_session_append(lim[0], step[0], NULL, (size_t)step_len[0], ENGINE_LOGITS_NONE,
					   NULL),
		     -ENOMEM);
	errno = 0;
	struct engine_session *extra[16];
	int n_extra = 0;
	while (n_extra < 16 && (extra[n_extra] = engine_session_create_on(b, 8)))
		n_extra++;
	CHECK(n_extra < 16 && errno == ENOMEM);
	for (int i = 0; i < n_extra; i++)
		engine_session_destroy(extra[i]);

	/* continuing after the failure matches the reference, position for position */
	float *a = malloc((size_t)V * sizeof(float)), *c = malloc((size_t)V * sizeof(float));
	REQUIRE(a && c);
	for (int i = 0; i < N_SESS; i++) {
		CHECK_INT_EQ(engine_session_decode(ref[i], prefix[i][prefix_len[i]], a), 0);
		CHECK_INT_EQ(engine_session_decode(lim[i], prefix[i][prefix_len[i]], c), 0);
		CHECK(memcmp(a, c, (size_t)V * sizeof(float)) == 0);
	}

	for (int i = 0; i < N_SESS; i++) {
		engine_session_destroy(ref[i]);
		engine_session_destroy(lim[i]);
		free(prefix[i]);
		free(step[i]);
	}
	/* every byte charged is given back */
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, 0);
	engine_backend_destroy(b);
	engine_backend_destroy(ref_b);
	free(logits);
	free(a);
	free(c);
}

/* What the info says about the CPU backend and its sessions and snapshots. */
static void test_info(struct engine_model *m)
{
	char err[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU};
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(b);
	struct engine_backend_info info;
	struct engine_model_info mi;
	CHECK_INT_EQ(engine_model_get_info(m, &mi), 0);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.kind, ENGINE_BACKEND_CPU);
	CHECK_STR_EQ(info.name, "cpu");
	/* the model's weights are bf16, so the CPU's default precision is bf16 where oneDNN has
	 * bf16 products or the kernels are AVX2's or better (fp32 on the portable ones) */
	CHECK_INT_EQ(info.precision, cpu_dnnl_bf16_supported() || cpu_isa() >= CPU_ISA_AVX2 ?
					     ENGINE_PRECISION_BF16 :
					     ENGINE_PRECISION_FP32);
	CHECK(info.runs_model);
	CHECK(info.weight_bytes == mi.weight_bytes && info.weight_bytes > 0);
	CHECK_INT_EQ(info.state_bytes, 0);
	CHECK(strstr(info.device, "kernels") != NULL);
	CHECK(info.memory_total > 0 && info.memory_free <= info.memory_total);

	struct engine_session *s = engine_session_create_on(b, 100);
	REQUIRE(s);
	size_t fixed = engine_session_state_bytes(s);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, fixed);
	int32_t *tok = make_tokens(10, m->cfg.vocab);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 10, ENGINE_LOGITS_NONE, NULL), 0);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	/* the KV cache is allocated ahead (64 positions at first), and counted as allocated */
	CHECK(info.state_bytes > engine_session_state_bytes(s));
	uint64_t with_session = info.state_bytes;
	struct engine_snapshot *snap = engine_session_snapshot(s);
	REQUIRE(snap);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	/* a snapshot holds exactly its tokens */
	CHECK_INT_EQ(info.state_bytes - with_session, engine_snapshot_bytes(snap));
	engine_snapshot_destroy(snap);
	engine_session_destroy(s);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_INT_EQ(info.state_bytes, 0);
	free(tok);

	/* two sessions of one backend share it, another backend of the model is apart */
	struct engine_backend *db = test_env_backend(m);
	REQUIRE(db);
	struct engine_session *d1 = engine_session_create_on(db, 4);
	struct engine_session *d2 = engine_session_create_on(db, 4);
	REQUIRE(d1 && d2);
	CHECK(engine_session_backend(d1) == engine_session_backend(d2));
	CHECK(engine_session_backend(d1) != b);
	struct engine_snapshot *ds = engine_session_snapshot(d1);
	REQUIRE(ds);
	struct engine_session *on_b = engine_session_create_on(b, 4);
	REQUIRE(on_b);
	CHECK_INT_EQ(engine_session_restore(on_b, ds), -EINVAL);
	engine_session_destroy(on_b);
	engine_snapshot_destroy(ds);
	engine_session_destroy(d1);
	engine_session_destroy(d2);
	engine_backend_destroy(db);
	CHECK(engine_session_create_on(b, 0) == NULL && errno == EINVAL);
	CHECK(engine_session_create_on(NULL, 4) == NULL && errno == EINVAL);
	CHECK_INT_EQ(engine_backend_get_info(NULL, &info), -EINVAL);
	engine_backend_destroy(b);
	engine_backend_destroy(NULL);
}

static enum engine_precision created_precision(const struct engine_model *m, enum engine_precision asked)
{
	char msg[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU, .precision = asked};
	struct engine_backend *b = engine_backend_create(m, &o, msg, sizeof(msg));
	REQUIRE(b);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	engine_backend_destroy(b);
	return info.precision;
}

/* The CPU's default precision follows the checkpoint's weights: bf16 for bf16 ones (`m`), fp32
 * for f32 ones; an explicit precision wins either way. */
static void test_default_precision(struct engine_model *m)
{
	/* (where oneDNN has no bf16 products the kernels decide: test_no_bf16) */
	enum engine_precision def = cpu_dnnl_bf16_supported() || cpu_isa() >= CPU_ISA_AVX2 ?
					    ENGINE_PRECISION_BF16 :
					    ENGINE_PRECISION_FP32;
	CHECK_INT_EQ(engine_model_cpu_precision(m), def);
	CHECK_INT_EQ(created_precision(m, ENGINE_PRECISION_DEFAULT), def);
	CHECK_INT_EQ(created_precision(m, ENGINE_PRECISION_FP32), ENGINE_PRECISION_FP32);

	struct engine_model *f32 = small_model_dtype("M*-M", 37, TENSOR_F32);
	CHECK_INT_EQ(engine_model_cpu_precision(f32), ENGINE_PRECISION_FP32);
	CHECK_INT_EQ(created_precision(f32, ENGINE_PRECISION_DEFAULT), ENGINE_PRECISION_FP32);
	CHECK_INT_EQ(created_precision(f32, ENGINE_PRECISION_BF16), ENGINE_PRECISION_BF16);
	lm_random_model_destroy(f32);
}

static void test_options(struct engine_model *m)
{
	enum engine_backend_kind k;
	enum engine_precision p;
	CHECK_INT_EQ(engine_backend_kind_parse("cuda", &k), 0);
	CHECK_INT_EQ(k, ENGINE_BACKEND_CUDA);
	CHECK_INT_EQ(engine_backend_kind_parse("auto", &k), 0);
	CHECK_INT_EQ(k, ENGINE_BACKEND_AUTO);
	CHECK_INT_EQ(engine_backend_kind_parse("gpu", &k), -EINVAL);
	CHECK_INT_EQ(engine_backend_kind_parse(NULL, &k), -EINVAL);
	CHECK_INT_EQ(engine_precision_parse("bf16", &p), 0);
	CHECK_INT_EQ(p, ENGINE_PRECISION_BF16);
	CHECK_INT_EQ(engine_precision_parse("fp16", &p), -EINVAL);
	CHECK_STR_EQ(engine_backend_kind_name(ENGINE_BACKEND_CPU), "cpu");
	CHECK_STR_EQ(engine_precision_name(ENGINE_PRECISION_FP32), "fp32");

	char msg[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), 0);
	/* the CPU's default depends on the checkpoint, so resolving without one keeps it */
	CHECK_INT_EQ(o.precision, ENGINE_PRECISION_DEFAULT);
	test_default_precision(m);
	/* bf16 on the CPU: oneDNN's products, and the backend says so */
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_BF16};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), 0);
	CHECK_INT_EQ(o.precision, ENGINE_PRECISION_BF16);
	struct engine_backend *b16 = engine_backend_create(m, &o, msg, sizeof(msg));
	REQUIRE(b16);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b16, &info), 0);
	CHECK_INT_EQ(info.precision, ENGINE_PRECISION_BF16);
	CHECK(strstr(info.device, cpu_dnnl_bf16_supported() ? "gemm=onednn:" : "gemm=own") != NULL);
	engine_backend_destroy(b16);
	o = (struct engine_backend_options){.kind = 7};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), -EINVAL);
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU, .precision = 9};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), -EINVAL);
	CHECK_INT_EQ(o.kind, ENGINE_BACKEND_CPU); /* unchanged on error */

	/* AUTO picks a real device where there is one (bf16 there by default), never the
	 * emulation, and the CPU otherwise */
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_AUTO};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), 0);
	struct engine_backend_options c = {.kind = ENGINE_BACKEND_CUDA};
	bool device = engine_backend_resolve(&c, NULL, 0) == 0 && !strstr(msg, "emulation");
	CHECK_INT_EQ(o.kind, device ? ENGINE_BACKEND_CUDA : ENGINE_BACKEND_CPU);
	CHECK_INT_EQ(o.precision, device ? ENGINE_PRECISION_BF16 : ENGINE_PRECISION_DEFAULT);

	/* CUDA: without a device (or without CUDA in the build) ENODEV, naming CUDA; with one
	 * (the emulation counts when asked for by name) it resolves, bf16 by default */
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA};
	int r = engine_backend_resolve(&o, msg, sizeof(msg));
	if (r == -ENODEV) {
		CHECK(strstr(msg, "CUDA") != NULL);
		errno = 0;
		CHECK(engine_backend_create(m, &o, msg, sizeof(msg)) == NULL && errno == ENODEV);
		CHECK(strstr(msg, "CUDA") != NULL);
	} else {
		CHECK_INT_EQ(r, 0);
		CHECK_INT_EQ(o.kind, ENGINE_BACKEND_CUDA);
		CHECK_INT_EQ(o.precision, ENGINE_PRECISION_BF16);
	}
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA, .device = 99};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), -ENODEV);
}

/* Quantization progress: the calls seen, the last figures */
struct qprog {
	int calls;
	uint64_t done, total;
	bool monotonic;
};

static void on_qprog(void *arg, uint64_t done, uint64_t total)
{
	struct qprog *q = arg;
	q->monotonic &= done >= q->done && (q->calls == 0 || total == q->total);
	q->calls++;
	q->done = done;
	q->total = total;
}

/* --weights (engine_backend_options.weights): names, the CPU's quantized layers and the bytes
 * it holds for them, the progress it reports, refusals with their sentence. */
static void test_weights(struct engine_model *m)
{
	enum engine_weights w;
	CHECK_INT_EQ(engine_weights_parse("q8", &w), 0);
	CHECK_INT_EQ(w, ENGINE_WEIGHTS_Q8);
	CHECK_INT_EQ(engine_weights_parse("q4", &w), 0);
	CHECK_INT_EQ(w, ENGINE_WEIGHTS_Q4);
	CHECK_INT_EQ(engine_weights_parse("fp8", &w), 0);
	CHECK_INT_EQ(w, ENGINE_WEIGHTS_FP8);
	CHECK_STR_EQ(engine_weights_name(ENGINE_WEIGHTS_FP8), "fp8");
	CHECK_INT_EQ(engine_weights_parse("fp4", &w), -EINVAL);
	CHECK_INT_EQ(engine_weights_parse(NULL, &w), -EINVAL);
	CHECK_STR_EQ(engine_weights_name(ENGINE_WEIGHTS_DEFAULT), "default");
	CHECK_STR_EQ(engine_weights_name(ENGINE_WEIGHTS_BF16), "bf16");

	char msg[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU, .weights = 9};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), -EINVAL);
	/* q8, q4 and fp8 are not refused on CUDA for their format (a build or machine without a
	 * device says that instead; fp8 below sm_89 is refused at creation, test-gpu-quant-lm) */
	for (int i = 0; i < 2; i++) {
		o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CUDA,
						    .weights = i ? ENGINE_WEIGHTS_FP8 : ENGINE_WEIGHTS_Q4};
		msg[0] = '\0';
		int r = engine_backend_resolve(&o, msg, sizeof(msg));
		CHECK(r == 0 || r == -ENODEV);
		CHECK(strstr(msg, "issue 29") == NULL && strstr(msg, "fp8") == NULL);
	}

	/* as stored, in fp32 (nothing prepared beside the map) */
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *b = engine_backend_create(m, &o, msg, sizeof(msg));
	REQUIRE(b);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_STR_EQ(info.weights, "bf16");
	uint64_t stored = info.weight_bytes;
	engine_backend_destroy(b);
	o.weights = ENGINE_WEIGHTS_BF16;
	b = engine_backend_create(m, &o, msg, sizeof(msg));
	REQUIRE(b);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK(strcmp(info.weights, "bf16") == 0 && info.weight_bytes == stored);
	engine_backend_destroy(b);

	/* q8, q4: the linear layers' bytes replaced by their quantized records */
	static const enum quant_format fmts[] = {QUANT_Q8, QUANT_Q4};
	for (int f = 0; f < 2; f++) {
		uint64_t src = 0, q = 0;
		for (int l = 0; l < m->cfg.n_layers; l++) {
			const struct tensor *mats[4];
			int n = lm_layer_matrices(&m->layers[l], mats);
			for (int i = 0; i < n; i++) {
				size_t bytes;
				CHECK_INT_EQ(quant_tensor_bytes(fmts[f], mats[i]->shape[0], mats[i]->shape[1],
								&bytes),
					     0);
				src += mats[i]->nbytes;
				q += bytes;
			}
		}
		struct qprog qp = {.monotonic = true};
		o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU,
						    .precision = ENGINE_PRECISION_FP32,
						    .weights = f == 0 ? ENGINE_WEIGHTS_Q8 : ENGINE_WEIGHTS_Q4,
						    .progress = on_qprog,
						    .progress_arg = &qp};
		b = engine_backend_create(m, &o, msg, sizeof(msg));
		REQUIRE(b);
		CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
		CHECK_STR_EQ(info.weights, f == 0 ? "q8" : "q4");
		CHECK_INT_EQ(info.weight_bytes, stored - src + q);
		/* one call per matrix, the source's bytes, ending at the total */
		CHECK(qp.calls >= 2 && qp.monotonic && qp.done == qp.total && qp.total == src);
		engine_backend_destroy(b);
	}
	/* (at 64 columns a row's codes and scales are padded to 64 bytes each, as large as its
	 * bf16: the saving shows on real widths, agent-weights.sh and docs/quantization.md) */

	/* a weight the formats cannot hold: the load fails naming the layer, matrix and row */
	struct engine_model *bad = small_model("M*-M", 37);
	struct tensor *t = &bad->layers[1].attn.k;
	uint16_t *wd = (uint16_t *)(uintptr_t)t->data, saved = wd[5 * t->shape[1] + 3];
	wd[5 * t->shape[1] + 3] = 0x7fc0; /* a bf16 NaN in row 5 */
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU, .weights = ENGINE_WEIGHTS_Q8};
	errno = 0;
	CHECK(engine_backend_create(bad, &o, msg, sizeof(msg)) == NULL && errno == EINVAL);
	CHECK_STR_EQ(msg, "cannot quantize layer 1's mixer.k_proj to q8: row 5 has a NaN or "
			  "infinite weight");
	wd[5 * t->shape[1] + 3] = 0x7f80 | 0x8000; /* -inf */
	o.weights = ENGINE_WEIGHTS_Q4;
	CHECK(engine_backend_create(bad, &o, msg, sizeof(msg)) == NULL && errno == EINVAL);
	CHECK(strstr(msg, "layer 1's mixer.k_proj to q4: row 5") != NULL);
	wd[5 * t->shape[1] + 3] = 0x4780; /* 65536 > QUANT_MAX_ABS */
	CHECK(engine_backend_create(bad, &o, msg, sizeof(msg)) == NULL && errno == ERANGE);
	CHECK(strstr(msg, "row 5 has a weight past +-65504") != NULL);
	wd[5 * t->shape[1] + 3] = saved;
	b = engine_backend_create(bad, &o, msg, sizeof(msg));
	CHECK(b != NULL);
	engine_backend_destroy(b);
	lm_random_model_destroy(bad);

	/* bf16 asked of weights stored otherwise: refused, naming what they are */
	struct engine_model *f32 = small_model_dtype("M-", 38, TENSOR_F32);
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_CPU, .weights = ENGINE_WEIGHTS_BF16};
	errno = 0;
	CHECK(engine_backend_create(f32, &o, msg, sizeof(msg)) == NULL && errno == EINVAL);
	CHECK(strstr(msg, "--weights bf16: the checkpoint's weights are f32, not bf16") != NULL);
	o.weights = ENGINE_WEIGHTS_Q8; /* quantized from f32 */
	b = engine_backend_create(f32, &o, msg, sizeof(msg));
	REQUIRE(b);
	CHECK_INT_EQ(engine_backend_get_info(b, &info), 0);
	CHECK_STR_EQ(info.weights, "q8");
	engine_backend_destroy(b);
	lm_random_model_destroy(f32);
}

/* The last logits of a 40-token prompt (past oneDNN's row minimum) on backend b. */
static void last_logits(struct engine_backend *b, float *ret, int vocab)
{
	struct engine_session *s = engine_session_create_on(b, 48);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_vocab(s), vocab);
	int32_t tok[40];
	for (int i = 0; i < 40; i++)
		tok[i] = (i * 7 + 3) % vocab;
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 40, ENGINE_LOGITS_LAST, ret), 0);
	engine_session_destroy(s);
}

/* A CPU whose oneDNN has no bf16 products (AVX2 alone; meson.build runs this with oneDNN
 * capped at AVX2): a bf16 checkpoint runs in bf16 by default on the AVX2 kernels (no slower than
 * fp32 there, and q8/q4 weights decode on their integer kernels), in fp32 on the portable ones;
 * bf16 runs every product on the engine's own kernels, says so, and stays within bf16's cosine
 * of fp32 (holod refused such a checkpoint with "out of memory" before). */
static void test_no_bf16(struct engine_model *m)
{
	CHECK(!cpu_dnnl_bf16_supported());
	if (cpu_isa_supported(CPU_ISA_AVX2)) {
		CHECK_INT_EQ(cpu_isa_select("avx2"), 0);
		CHECK_INT_EQ(engine_model_cpu_precision(m), ENGINE_PRECISION_BF16);
		CHECK_INT_EQ(created_precision(m, ENGINE_PRECISION_DEFAULT), ENGINE_PRECISION_BF16);
	}
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
	CHECK_INT_EQ(engine_model_cpu_precision(m), ENGINE_PRECISION_FP32);
	CHECK_INT_EQ(created_precision(m, ENGINE_PRECISION_DEFAULT), ENGINE_PRECISION_FP32);
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
	struct engine_backend *b16 = test_backend_create(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_BF16);
	struct engine_backend_info info;
	CHECK_INT_EQ(engine_backend_get_info(b16, &info), 0);
	CHECK_INT_EQ(info.precision, ENGINE_PRECISION_BF16);
	CHECK(strstr(info.device, "gemm=own") != NULL);
	struct engine_backend *b32 = test_backend_create(m, ENGINE_BACKEND_CPU, ENGINE_PRECISION_FP32);
	int vocab = (int)m->cfg.vocab;
	float *l16 = malloc((size_t)vocab * sizeof(float)), *l32 = malloc((size_t)vocab * sizeof(float));
	REQUIRE(l16 && l32);
	last_logits(b16, l16, vocab);
	last_logits(b32, l32, vocab);
	double dot = 0, aa = 0, bb = 0;
	bool same = true;
	for (int i = 0; i < vocab; i++) {
		dot += (double)l16[i] * l32[i], aa += (double)l16[i] * l16[i];
		bb += (double)l32[i] * l32[i];
		same &= l16[i] == l32[i];
	}
	double cos = dot / sqrt(aa * bb);
	if (!(cos >= 0.999))
		fprintf(stderr, "bf16 on the engine's kernels vs fp32: cosine %.6f\n", cos);
	CHECK(cos >= 0.999);
	CHECK(!same); /* the products' inputs were rounded to bf16 */
	free(l16);
	free(l32);
	engine_backend_destroy(b16);
	engine_backend_destroy(b32);
}

/* A GPU whose driver is older than this build's CUDA runtime ($HOLOD_GPU_EMU_DRIVER=12.8 in the
 * emulation, as the real runtime answers cudaErrorInsufficientDriver): CUDA is refused naming
 * both versions and the driver series needed, and AUTO says why it runs on the CPU, instead of
 * "no CUDA device is present". */
static void test_old_driver(struct engine_model *m)
{
	char msg[256] = "";
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CUDA};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), -ENODEV);
	fprintf(stderr, "CUDA: %s\n", msg);
	CHECK(strstr(msg, "driver is too old") && strstr(msg, "CUDA 12.8") && strstr(msg, "13.0") &&
	      strstr(msg, "R580"));
	errno = 0;
	CHECK(engine_backend_create(m, &o, msg, sizeof(msg)) == NULL && errno == ENODEV);
	CHECK(strstr(msg, "driver is too old") != NULL);
	o = (struct engine_backend_options){.kind = ENGINE_BACKEND_AUTO};
	CHECK_INT_EQ(engine_backend_resolve(&o, msg, sizeof(msg)), 0);
	CHECK_INT_EQ(o.kind, ENGINE_BACKEND_CPU);
	fprintf(stderr, "AUTO: %s\n", msg);
	CHECK(strstr(msg, "driver is too old") && strstr(msg, "using the CPU"));
}

int main(int argc, char **argv)
{
	struct engine_model *m = small_model("M*-M", 31);
	if (argc > 1 && strcmp(argv[1], "old-driver") == 0) {
		test_old_driver(m);
		lm_random_model_destroy(m);
		return test_exit();
	}
	if (argc > 1 && strcmp(argv[1], "no-bf16") == 0) {
		test_no_bf16(m);
		lm_random_model_destroy(m);
		return test_exit();
	}
	char err[256];
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct engine_backend *b = engine_backend_create(m, &o, err, sizeof(err));
	REQUIRE(b);
	test_batch_equals_separate(b, m);
	engine_backend_destroy(b);
	test_batch_reserve_failure(m);
	test_info(m);
	test_options(m);
	test_weights(m);
	lm_random_model_destroy(m);
	return test_exit();
}
