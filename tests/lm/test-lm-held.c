/* The CPU backend's bf16 matrices held in 2 MiB pages (lm_forward.c hold_matrices, lm.h
 * lm_prepared.head_held): a checkpoint's layer matrices and untied lm_head are copied out of the
 * files' map (byte for byte, the copies outside it, every byte counted), the map's pages of them
 * released (its resident bytes fall by their whole pages, while weight_bytes stays what the
 * model's weights are: the copies replace them), a tied lm_head stays in the map (the
 * embeddings' lookup reads it), a model built in memory is left alone, map_weights keeps
 * everything in the map, a copy that cannot be allocated leaves its matrix in the map (counted,
 * the load succeeds), and the logits of every prefill row and decode step are bit for bit those
 * of the same model read from the map: the same kernels over the same bytes in the same order, in
 * fp32 and in bf16 precision (prefill long enough for oneDNN's products, whose weights are made
 * from the copies). Run again with oneDNN's weights reordered ($HOLOD_CPU_GEMM_WEIGHTS, the
 * layout of the Intel AMX machines' prefill): its own copies made from the held ones, the decode
 * GEMV reading the held ones.
 *
 * The copy's allocation failure is injected: this file's posix_memalign() (which alloc_huge()
 * calls) fails one size while `fail_bytes` is set, and hands every other call to the C
 * library's (or the sanitizer's).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cpu_dnnl.h"
#include "engine.h"
#include "lm.h"
#include "loader.h"
#include "test.h"
#include "test-smaps.h"

TEST_DEFINE_GLOBALS;

static size_t fail_bytes; /* posix_memalign() of this size fails (0: none does) */
static int fail_count;

int posix_memalign(void **p, size_t align, size_t size)
{
	static int (*next)(void **, size_t, size_t);
	if (fail_bytes && size == fail_bytes) {
		fail_count++;
		return ENOMEM;
	}
	if (!next)
		next = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	return next(p, align, size);
}

#define N_PROMPT 20 /* past CPU_DNNL_MIN_T: bf16's prefill products run on oneDNN */
#define N_DECODE 4
#define ROWS (N_PROMPT + N_DECODE)

static char *fixture(const char *name)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	REQUIRE(root);
	char *p = malloc(strlen(root) + strlen(name) + 64);
	REQUIRE(p);
	sprintf(p, "%s/tests/fixtures/models/%s", root, name);
	return p;
}

static struct engine_model *load(const char *name)
{
	char err[512], *dir = fixture(name);
	struct engine_model *m = engine_model_load(dir, err, sizeof(err));
	if (!m)
		fprintf(stderr, "loading %s: %s\n", dir, err);
	REQUIRE(m);
	free(dir);
	return m;
}

static bool tied(const struct engine_model *m)
{
	return m->lm_head.data == m->embeddings.data;
}

/* lm_prepare_opts.progress: calls, the last figures, whether done ever went down */
struct progress {
	int calls;
	uint64_t done, total;
	bool backwards;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *pr = arg;
	pr->backwards |= pr->calls > 0 && (done < pr->done || total != pr->total);
	pr->calls++;
	pr->done = done;
	pr->total = total;
}

/* What lm_prepare() holds of m, a bf16 checkpoint: with map_weights nothing, else every layer
 * matrix and the lm_head unless tied, each a copy of its tensor outside the map, the copies'
 * progress reported matrix by matrix. */
static void check_prepared(const struct engine_model *m, bool bf16, bool map_weights)
{
	char err[512] = "";
	struct progress pr = {0};
	struct lm_prepare_opts po = {.bf16 = bf16,
				     .layout = CPU_DNNL_PLAIN,
				     .quant = -1,
				     .map_weights = map_weights,
				     .progress = on_progress,
				     .progress_arg = &pr};
	struct lm_prepared p;
	int r = lm_prepare(m, &po, &p, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "lm_prepare: %s\n", err);
	REQUIRE(r == 0);
	uint64_t bytes = 0, held_sum = 0;
	int n_held = 0, n_mats = 0;
	for (int l = 0; l <= m->cfg.n_layers; l++) {
		const struct tensor *mats[4] = {&m->lm_head};
		const struct tensor *held[4] = {&p.head_held};
		int n = 1;
		if (l < m->cfg.n_layers) {
			n = lm_layer_matrices(&m->layers[l], mats);
			for (int i = 0; i < n; i++)
				held[i] = &p.layers[l].held[i];
		} else if (tied(m)) {
			CHECK(p.head_held.data == NULL); /* the embeddings' too: left in the map */
			continue;
		}
		for (int i = 0; i < n; i++) {
			const struct tensor *w = mats[i], *h = held[i];
			REQUIRE(w->dtype == TENSOR_BF16 && model_files_mapped(m->files, w->data, w->nbytes));
			n_mats++;
			if (!h->data)
				continue;
			n_held++;
			bytes += h->nbytes;
			held_sum += alloc_huge_bytes(h->nbytes); /* whole 2 MiB pages from 512 KiB */
			CHECK(!model_files_mapped(m->files, h->data, 1));
			CHECK(h->dtype == w->dtype && h->ndim == w->ndim && h->shape[0] == w->shape[0] &&
			      h->shape[1] == w->shape[1] && h->nbytes == w->nbytes);
			/* the map's pages are read again from the file */
			CHECK(memcmp(h->data, w->data, w->nbytes) == 0);
		}
	}
	CHECK_INT_EQ(n_held, map_weights ? 0 : n_mats);
	CHECK_INT_EQ(p.held_bytes, held_sum);
	CHECK_INT_EQ(p.held_source_bytes, bytes);
	CHECK_INT_EQ(p.held_failed, 0);
	/* one call a matrix copied, ending at the sources' total */
	CHECK_INT_EQ(pr.calls, n_held);
	CHECK(!pr.backwards);
	if (n_held)
		CHECK(pr.done == bytes && pr.total == bytes);
	lm_prepared_finish(&p); /* frees the copies (ASan: nothing leaks, nothing freed twice) */
}

/* A model built in memory (its tensors are not the files'): nothing copied. */
static void check_random(void)
{
	struct lm_random_spec sp = {.pattern = "M*-",
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
				    .seed = 5};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	char err[256] = "";
	struct lm_prepare_opts po = {.quant = -1};
	struct lm_prepared p;
	REQUIRE(lm_prepare(m, &po, &p, err, sizeof(err)) == 0);
	for (int l = 0; l < p.n_layers; l++)
		for (int i = 0; i < 4; i++)
			CHECK(p.layers[l].held[i].data == NULL);
	CHECK(p.head_held.data == NULL && p.held_bytes == 0 && p.held_failed == 0);
	lm_prepared_finish(&p);
	lm_random_model_destroy(m);
}

/* What backend_cpu_weights() (the tools' view of what the forward reads) says of b's matrices:
 * the held copies, or the model's own tensors with map_weights (and a tied lm_head). */
static void check_weights(const struct engine_backend *b, const struct engine_model *m, bool map_weights)
{
	for (int l = 0; l <= m->cfg.n_layers; l++) {
		const struct tensor *mats[4] = {&m->lm_head};
		int n = l < m->cfg.n_layers ? lm_layer_matrices(&m->layers[l], mats) : 1;
		for (int i = 0; i < n; i++) {
			const struct tensor *w = backend_cpu_weights(b, mats[i]);
			if (map_weights || (mats[i] == &m->lm_head && tied(m))) {
				CHECK(w == mats[i]);
				continue;
			}
			CHECK(w != mats[i] && !model_files_mapped(m->files, w->data, 1));
			CHECK(w->nbytes == mats[i]->nbytes && memcmp(w->data, mats[i]->data, w->nbytes) == 0);
		}
	}
	/* matched by its data (a tool's model may be another struct over the same map) */
	struct tensor same = m->lm_head;
	CHECK(backend_cpu_weights(b, &same)->data == backend_cpu_weights(b, &m->lm_head)->data);
	struct tensor other = m->lm_head; /* other data: as it is */
	other.data = &same;
	CHECK(backend_cpu_weights(b, &other) == &other);
	CHECK(backend_cpu_weights(NULL, &m->lm_head) == &m->lm_head);
}

/* Every prefill row and decode step's logits of a fixed token run on a CPU backend of m, the
 * matrices held (the backend's default) or read from the map; *ret_weight_bytes: what the
 * backend says it holds. */
static float *run(const struct engine_model *m, enum engine_precision prec, bool map_weights,
		  uint64_t *ret_weight_bytes)
{
	char err[512] = "";
	struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU,
					   .precision = prec,
					   .ssm_state = ENGINE_PRECISION_FP32};
	struct lm_quant_hooks h = {.head = -1, .map_weights = true};
	struct engine_backend *b = map_weights ? backend_cpu_create_hooked(m, &o, &h, err, sizeof(err)) :
						 engine_backend_create(m, &o, err, sizeof(err));
	if (!b)
		fprintf(stderr, "backend: %s\n", err);
	REQUIRE(b);
	struct engine_backend_info info;
	REQUIRE(engine_backend_get_info(b, &info) == 0);
	*ret_weight_bytes = info.weight_bytes;
	if (!fail_bytes)
		check_weights(b, m, map_weights);
	struct engine_session *s = engine_session_create_on(b, 64);
	REQUIRE(s);
	const int V = m->cfg.vocab;
	int32_t tok[N_PROMPT];
	for (int i = 0; i < N_PROMPT; i++)
		tok[i] = (int32_t)((i * 37 + 5) % V);
	float *lg = calloc((size_t)ROWS * (size_t)V, sizeof(float));
	REQUIRE(lg);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, N_PROMPT, ENGINE_LOGITS_ALL, lg), 0);
	for (int i = 0; i < N_DECODE; i++)
		CHECK_INT_EQ(engine_session_decode(s, (int32_t)((i * 11 + 3) % V),
						   lg + (size_t)(N_PROMPT + i) * V),
			     0);
	engine_session_destroy(s);
	engine_backend_destroy(b);
	return lg;
}

/* The held copies run bit for bit as the map (and say the same weight bytes): the same kernels
 * over the same bytes. */
static void check_logits(const struct engine_model *m, enum engine_precision prec)
{
	uint64_t held_bytes, map_bytes;
	float *held = run(m, prec, false, &held_bytes), *map = run(m, prec, true, &map_bytes);
	const size_t n = (size_t)ROWS * (size_t)m->cfg.vocab;
	CHECK(memcmp(held, map, n * sizeof(float)) == 0);
	CHECK_INT_EQ(held_bytes, map_bytes);
	free(held);
	free(map);
}

/* Every page of m's matrices and embeddings in memory; returns the bytes of the whole pages
 * inside the matrices (the lm_head's unless tied). */
static uint64_t fault_in(const struct engine_model *m)
{
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	volatile uint8_t sink = 0;
	uint64_t inner = 0;
	for (size_t k = 0; k < m->embeddings.nbytes; k += 64)
		sink ^= ((const uint8_t *)m->embeddings.data)[k];
	for (int l = 0; l <= m->cfg.n_layers; l++) {
		const struct tensor *mats[4] = {&m->lm_head};
		int n = l < m->cfg.n_layers ? lm_layer_matrices(&m->layers[l], mats) : !tied(m);
		for (int i = 0; i < n; i++) {
			for (size_t k = 0; k < mats[i]->nbytes; k += 64)
				sink ^= ((const uint8_t *)mats[i]->data)[k];
			uintptr_t a = ((uintptr_t)mats[i]->data + page - 1) & ~(page - 1);
			uintptr_t e = ((uintptr_t)mats[i]->data + mats[i]->nbytes) & ~(page - 1);
			inner += e > a ? e - a : 0;
		}
	}
	(void)sink;
	return inner;
}

/* The map's pages of the held matrices leave the process (what weight_bytes leaves out is not
 * resident either) and the forward never reads them again (prefill and decode, oneDNN's
 * products in bf16 too); with map_weights they stay. */
static void check_resident(void)
{
	const char *layout = getenv("HOLOD_CPU_GEMM_WEIGHTS");
	const bool reordered = layout && strcmp(layout, "reordered") == 0;
	struct engine_model *m = load("tiny-mamba");
	REQUIRE(!tied(m));
	struct engine_model_info mi;
	engine_model_get_info(m, &mi);
	for (int k = 0; k < 3; k++) {
		const bool map_weights = k == 0;
		const enum engine_precision prec = k == 2 ? ENGINE_PRECISION_BF16 : ENGINE_PRECISION_FP32;
		char err[512] = "";
		uint64_t inner = fault_in(m);
		long before = test_map_rss_kb("tiny-mamba/model.safetensors");
		REQUIRE(before > 0);
		REQUIRE(inner >= 16 * (uint64_t)sysconf(_SC_PAGESIZE));
		struct engine_backend_options o = {.kind = ENGINE_BACKEND_CPU,
						   .precision = prec,
						   .ssm_state = ENGINE_PRECISION_FP32};
		struct lm_quant_hooks h = {.head = -1, .map_weights = true};
		struct engine_backend *b = map_weights ?
						   backend_cpu_create_hooked(m, &o, &h, err, sizeof(err)) :
						   engine_backend_create(m, &o, err, sizeof(err));
		REQUIRE(b);
		long after = test_map_rss_kb("tiny-mamba/model.safetensors");
		struct engine_backend_info bi;
		REQUIRE(engine_backend_get_info(b, &bi) == 0);
		/* bf16 weights: oneDNN reads them in place (CPU_DNNL_PLAIN), or, with
		 * $HOLOD_CPU_GEMM_WEIGHTS=reordered, holds its own reordered copy of each (made
		 * from the held one; the decode GEMV still reads the held copy) */
		if (prec == ENGINE_PRECISION_FP32 || !reordered || !cpu_dnnl_bf16_supported())
			CHECK_INT_EQ(bi.weight_bytes, mi.weight_bytes);
		else
			CHECK(bi.weight_bytes > mi.weight_bytes);
		if (map_weights) {
			/* nothing released (unless the kernel reclaimed a few pages meanwhile) */
			CHECK(before - after <= (long)(inner >> 10) / 10);
		} else {
			/* exactly those pages, unless the kernel reclaimed a few of them meanwhile */
			CHECK(before - after <= (long)(inner >> 10) &&
			      before - after >= (long)(inner >> 10) * 9 / 10);
			if (before - after != (long)(inner >> 10))
				fprintf(stderr,
					"resident pages of the map fell by %ld KiB, the held matrices' "
					"whole pages are %ld KiB\n",
					before - after, (long)(inner >> 10));
			/* a prefill and decode steps read the copies alone */
			struct engine_session *s = engine_session_create_on(b, 64);
			REQUIRE(s);
			int32_t tok[N_PROMPT];
			for (int i = 0; i < N_PROMPT; i++)
				tok[i] = (int32_t)((i * 37 + 5) % m->cfg.vocab);
			float *lg = calloc((size_t)m->cfg.vocab, sizeof(float));
			REQUIRE(lg);
			CHECK_INT_EQ(engine_session_append(s, tok, NULL, N_PROMPT, ENGINE_LOGITS_LAST, lg), 0);
			for (int i = 0; i < N_DECODE; i++)
				CHECK_INT_EQ(engine_session_decode(s, tok[i], lg), 0);
			long ran = test_map_rss_kb("tiny-mamba/model.safetensors");
			CHECK(ran <= after); /* nothing faulted back in */
			if (ran > after)
				fprintf(stderr, "the forward read %ld KiB of the map\n", ran - after);
			engine_session_destroy(s);
			free(lg);
		}
		engine_backend_destroy(b);
	}
	engine_model_destroy(m);
}

/* The lm_head's copy cannot be allocated: the load succeeds, the head read from the map (and
 * counted), the layers held, the logits those of the map. */
static void check_no_memory(void)
{
	struct engine_model *m = load("tiny-mamba");
	/* the size alloc_huge() asks posix_memalign() for the head's copy */
	size_t head = alloc_huge_bytes(m->lm_head.nbytes);
	uint64_t layers = 0, layers_src = 0;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);
		for (int i = 0; i < n; i++) {
			/* the one size failing is the head's */
			REQUIRE(alloc_huge_bytes(mats[i]->nbytes) != head);
			layers += alloc_huge_bytes(mats[i]->nbytes);
			layers_src += mats[i]->nbytes;
		}
	}
	char err[512] = "";
	struct lm_prepare_opts po = {.quant = -1};
	struct lm_prepared p;
	fail_bytes = head;
	fail_count = 0;
	int r = lm_prepare(m, &po, &p, err, sizeof(err));
	fail_bytes = 0;
	CHECK_INT_EQ(r, 0);
	CHECK_INT_EQ(fail_count, 1);
	if (r == 0) {
		CHECK_INT_EQ(p.held_failed, 1);
		CHECK(p.head_held.data == NULL && p.layers[0].held[0].data != NULL);
		CHECK_INT_EQ(p.held_bytes, layers);
		CHECK_INT_EQ(p.held_source_bytes, layers_src);
		CHECK(model_files_mapped(m->files, m->lm_head.data, m->lm_head.nbytes));
		lm_prepared_finish(&p);
	}
	/* through the backend: the same logits as the map's */
	uint64_t wb_fail, wb_map;
	fail_bytes = head;
	float *lg_fail = run(m, ENGINE_PRECISION_FP32, false, &wb_fail);
	fail_bytes = 0;
	float *lg_map = run(m, ENGINE_PRECISION_FP32, true, &wb_map);
	CHECK(memcmp(lg_fail, lg_map, (size_t)ROWS * (size_t)m->cfg.vocab * sizeof(float)) == 0);
	CHECK_INT_EQ(wb_fail, wb_map);
	free(lg_fail);
	free(lg_map);
	engine_model_destroy(m);
}

int main(void)
{
	/* tiny-mamba's lm_head is its own, tiny-tied's the embeddings */
	const char *names[] = {"tiny-mamba", "tiny-tied"};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		struct engine_model *m = load(names[k]);
		CHECK(tied(m) == (k == 1));
		check_prepared(m, false, false);
		check_prepared(m, true, false);
		check_prepared(m, false, true);
		check_logits(m, ENGINE_PRECISION_FP32);
		check_logits(m, ENGINE_PRECISION_BF16);
		engine_model_destroy(m);
	}
	check_random();
	check_resident();
	check_no_memory();
	return test_exit();
}
