/* The CPU backend: the language model of lm_forward.c behind the backend seam (backend.h).
 *
 * Weights: the model's matrices as stored (cpu_matmul reads bf16/f16/f32 directly), the
 * bf16/f16 ones copied out of the memory map into 2 MiB pages (lm.h, lm_prepared.head_held), or
 * quantized (--weights q8|q4|fp8); the small tensors (norms, conv taps, SSM parameters) are
 * converted to fp32 once at creation (struct lm_prepared), so no forward call converts a weight.
 * Sequences (struct lm_seq): Mamba layers hold the raw fp32 conv window [K-1][conv_dim] and the
 * SSM state [H][P][N], in fp32 or, with the ssm_state option BF16, in bf16 (updated in fp32,
 * rounded when stored); attention layers hold fp32 K/V caches of kv_cap positions, grown on
 * demand up to max_tokens; MLP layers hold nothing. Every byte of that is charged to the backend
 * (backend_charge), which enforces the state limit.
 *
 * A batch runs in steps (lm_forward_batch): each step takes the next run of every span (at most
 * LM_MAX_BATCH positions, cut as a separate append cuts them), so the decode tokens of n
 * sessions go through the layers together, every weight read once for all of them, and a long
 * prefill joins them run by run. Every sequence gets what a separate append gives it (lm.h).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "image.h"
#include "lm.h"
#include "quantized.h"
#include "modelopt.h"
#include "vision_cpu.h"

struct cpu_backend {
	struct engine_backend base;
	struct lm_prepared prep;
	struct lm_profile prof;
	/* bf16: the vision tower last encoded (by backend_vision_tower.id) and its matrices prepared
	 * for oneDNN, under vision_lock */
	pthread_mutex_t vision_lock;
	uint64_t vision_id;
	struct vision_gemms *vision;
	/* --weights bf16 on an FP8 checkpoint: the model this backend runs, its fp8 layers widened
	 * to bf16 (lm_fp8_bf16_model(), owned), else NULL */
	struct engine_model *widened;
	/* the quantized layers (and the head) came as a holod-quantized checkpoint's records in
	 * the map (lm_prepared's quant_mapped / head_mapped before lm_prepared_tile() copied them) */
	bool quant_stored, head_stored;
};

static size_t conv_floats(const struct lm_dims *dm)
{
	return (size_t)(dm->K - 1) * dm->conv_dim;
}

static size_t ssm_floats(const struct lm_dims *dm)
{
	return (size_t)dm->H * dm->P * dm->N;
}

static bool ssm_bf16(const struct engine_backend *b)
{
	return b->ssm_state == ENGINE_PRECISION_BF16;
}

/* Bytes of one layer's SSM state as the backend stores it. */
static size_t ssm_bytes(const struct engine_backend *b, const struct lm_dims *dm)
{
	return ssm_floats(dm) * (ssm_bf16(b) ? sizeof(uint16_t) : sizeof(float));
}

/* Bytes of the fixed part of a sequence (conv + SSM states) and of one KV position. */
static void seq_sizes(const struct engine_backend *b, uint64_t *ret_fixed, uint64_t *ret_per_pos)
{
	const struct engine_model *m = b->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	uint64_t fixed = 0, per_pos = 0;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		if (m->layers[l].kind == LM_LAYER_MAMBA)
			fixed += conv_floats(&dm) * sizeof(float) + ssm_bytes(b, &dm);
		else if (m->layers[l].kind == LM_LAYER_ATTENTION)
			per_pos += 2 * (uint64_t)dm.kv_dim * sizeof(float);
	}
	*ret_fixed = fixed;
	*ret_per_pos = per_pos;
}

static void free_layers(const struct engine_model *m, struct lm_layer_state *layers)
{
	if (!layers)
		return;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		free(layers[l].conv);
		free(layers[l].ssm);
		free(layers[l].ssm16);
		free(layers[l].k);
		free(layers[l].v);
	}
	free(layers);
}

static void cpu_seq_destroy(struct backend_seq *bs)
{
	struct lm_seq *s = (struct lm_seq *)bs;
	if (!s)
		return;
	uint64_t fixed, per_pos;
	seq_sizes(bs->backend, &fixed, &per_pos);
	if (s->layers)
		backend_uncharge(bs->backend, fixed + per_pos * (uint64_t)s->kv_cap);
	free_layers(s->model, s->layers);
	free(s->work);
	free(s->attn_part);
	free(s);
}

static struct backend_seq *cpu_seq_create(struct engine_backend *b, int max_tokens)
{
	const struct engine_model *m = b->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	uint64_t fixed, per_pos;
	seq_sizes(b, &fixed, &per_pos);
	struct lm_seq *s = calloc(1, sizeof(*s));
	if (!s)
		goto oom;
	s->base.backend = b;
	s->base.max_tokens = max_tokens;
	s->model = m;
	s->prep = &((struct cpu_backend *)b)->prep;
	if (backend_charge(b, fixed) < 0)
		goto free_seq;
	s->layers = calloc((size_t)m->cfg.n_layers, sizeof(*s->layers));
	if (!s->layers)
		goto uncharge;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		if (m->layers[l].kind != LM_LAYER_MAMBA)
			continue;
		struct lm_layer_state *st = &s->layers[l];
		st->conv = calloc(MAX(conv_floats(&dm), 1), sizeof(float));
		if (ssm_bf16(b))
			st->ssm16 = calloc(ssm_floats(&dm), sizeof(uint16_t));
		else
			st->ssm = calloc(ssm_floats(&dm), sizeof(float));
		if (!st->conv || (!st->ssm && !st->ssm16))
			goto free_layers;
	}
	return &s->base;
free_layers:
	free_layers(m, s->layers);
uncharge:
	backend_uncharge(b, fixed);
free_seq:
	free(s);
oom:
	errno = ENOMEM;
	return NULL;
}

static void cpu_seq_reset(struct backend_seq *bs)
{
	struct lm_seq *s = (struct lm_seq *)bs;
	struct lm_dims dm;
	lm_dims_init(&dm, &s->model->cfg);
	for (int l = 0; l < s->model->cfg.n_layers; l++) {
		if (s->model->layers[l].kind != LM_LAYER_MAMBA)
			continue;
		memset(s->layers[l].conv, 0, conv_floats(&dm) * sizeof(float));
		/* all-zero bits are 0.0 in bf16 as in fp32 */
		memset(s->layers[l].ssm16 ? (void *)s->layers[l].ssm16 : (void *)s->layers[l].ssm, 0,
		       ssm_bytes(bs->backend, &dm));
	}
	bs->n_tokens = 0;
}

/* Grows the KV caches to exactly `positions` (a copy needs no room to spare: a snapshot is a
 * sequence cut to its tokens). Same failure contract as lm_reserve_kv(). */
static int reserve_exact(struct lm_seq *s, int positions)
{
	if (positions <= s->kv_cap)
		return 0;
	int max = s->base.max_tokens;
	s->base.max_tokens = positions; /* caps lm_reserve_kv()'s doubling at what is needed */
	int r = lm_reserve_kv(s, positions);
	s->base.max_tokens = max;
	return r;
}

static int cpu_seq_copy(struct backend_seq *bdst, const struct backend_seq *bsrc)
{
	struct lm_seq *dst = (struct lm_seq *)bdst;
	const struct lm_seq *src = (const struct lm_seq *)bsrc;
	const struct engine_model *m = src->model;
	int n = bsrc->n_tokens;
	int r = reserve_exact(dst, n);
	if (r < 0)
		return r;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		switch (m->layers[l].kind) {
		case LM_LAYER_MAMBA:
			memcpy(dst->layers[l].conv, src->layers[l].conv, conv_floats(&dm) * sizeof(float));
			if (src->layers[l].ssm16)
				memcpy(dst->layers[l].ssm16, src->layers[l].ssm16,
				       ssm_bytes(bdst->backend, &dm));
			else
				memcpy(dst->layers[l].ssm, src->layers[l].ssm, ssm_bytes(bdst->backend, &dm));
			break;
		case LM_LAYER_ATTENTION:
			if (n > 0) {
				memcpy(dst->layers[l].k, src->layers[l].k,
				       (size_t)n * dm.kv_dim * sizeof(float));
				memcpy(dst->layers[l].v, src->layers[l].v,
				       (size_t)n * dm.kv_dim * sizeof(float));
			}
			break;
		case LM_LAYER_MLP:
			break;
		}
	}
	bdst->n_tokens = n;
	return 0;
}

static size_t cpu_seq_state_bytes(const struct backend_seq *bs)
{
	uint64_t fixed, per_pos;
	seq_sizes(bs->backend, &fixed, &per_pos);
	return (size_t)(fixed + per_pos * (uint64_t)bs->n_tokens);
}

static float *dup_floats(const float *src, size_t n)
{
	float *p = malloc(MAX(n, 1) * sizeof(float));
	if (p && n)
		memcpy(p, src, n * sizeof(float));
	return p;
}

static int cpu_seq_export(const struct backend_seq *bs, struct backend_seq_state *ret)
{
	const struct lm_seq *s = (const struct lm_seq *)bs;
	const struct engine_model *m = s->model;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	struct backend_seq_state st = {.n_layers = m->cfg.n_layers, .n_tokens = bs->n_tokens};
	st.layers = calloc((size_t)st.n_layers, sizeof(*st.layers));
	if (!st.layers)
		return -ENOMEM;
	size_t kv = (size_t)bs->n_tokens * dm.kv_dim;
	for (int l = 0; l < st.n_layers; l++) {
		struct backend_layer_state *o = &st.layers[l];
		const struct lm_layer_state *in = &s->layers[l];
		if (m->layers[l].kind == LM_LAYER_MAMBA) {
			o->conv = dup_floats(in->conv, conv_floats(&dm));
			if (in->ssm16) {
				/* widening is exact */
				if ((o->ssm = malloc(ssm_floats(&dm) * sizeof(float))))
					for (size_t i = 0; i < ssm_floats(&dm); i++)
						o->ssm[i] = bf16_to_f32(in->ssm16[i]);
			} else {
				o->ssm = dup_floats(in->ssm, ssm_floats(&dm));
			}
			if (!o->conv || !o->ssm)
				goto oom;
		} else if (m->layers[l].kind == LM_LAYER_ATTENTION) {
			o->k = dup_floats(in->k, kv);
			o->v = dup_floats(in->v, kv);
			if (!o->k || !o->v)
				goto oom;
		}
	}
	*ret = st;
	return 0;
oom:
	backend_seq_state_finish(&st);
	return -ENOMEM;
}

static int cpu_seq_import(struct backend_seq *bs, const struct backend_seq_state *st)
{
	struct lm_seq *s = (struct lm_seq *)bs;
	const struct engine_model *m = s->model;
	int n = st->n_tokens;
	int r = reserve_exact(s, n);
	if (r < 0)
		return r;
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct backend_layer_state *in = &st->layers[l];
		if (m->layers[l].kind == LM_LAYER_MAMBA) {
			memcpy(s->layers[l].conv, in->conv, conv_floats(&dm) * sizeof(float));
			if (s->layers[l].ssm16)
				cpu_f32_to_bf16(in->ssm, s->layers[l].ssm16, ssm_floats(&dm));
			else
				memcpy(s->layers[l].ssm, in->ssm, ssm_floats(&dm) * sizeof(float));
		} else if (m->layers[l].kind == LM_LAYER_ATTENTION && n > 0) {
			memcpy(s->layers[l].k, in->k, (size_t)n * dm.kv_dim * sizeof(float));
			memcpy(s->layers[l].v, in->v, (size_t)n * dm.kv_dim * sizeof(float));
		}
	}
	bs->n_tokens = n;
	return 0;
}

/* The next run of a span from batch position p (end: the span's end): at most LM_MAX_BATCH
 * positions, cut as a separate append cuts them. lm_forward_batch() writes the logits of all
 * rows of a run, contiguously, or of its last row: a run takes all rows when every one is wanted
 * into consecutive rows, and otherwise ends at its first wanted row. */
static void next_run(const struct backend_batch *batch, size_t p, size_t end, size_t vocab, struct lm_run *ret)
{
	size_t T = MIN(end - p, (size_t)LM_MAX_BATCH);
	float *const *dst = batch->logits;
	enum engine_logits want = ENGINE_LOGITS_NONE;
	float *out = NULL;
	if (dst) {
		size_t first = T;
		bool all = true;
		for (size_t t = 0; t < T; t++) {
			if (!dst[p] || dst[p + t] != dst[p] + t * vocab)
				all = false;
			if (dst[p + t] && first == T)
				first = t;
		}
		if (all) {
			want = ENGINE_LOGITS_ALL;
			out = dst[p];
		} else if (first < T) {
			T = first + 1;
			want = ENGINE_LOGITS_LAST;
			out = dst[p + first];
		}
	}
	*ret = (struct lm_run){
		.tokens = batch->tokens + p,
		.embeds = batch->embeds ? batch->embeds + p : NULL,
		.T = (int)T,
		.want = want,
		.logits = out,
	};
}

/* The next step of a batch: the next run of every span with positions left, in span order, while
 * they fit LM_BATCH_MAX_ROWS rows and LM_BATCH_MAX_RUNS runs (the first always does). pos[i] is
 * span i's next position; the step's runs advance it. Returns the number of runs, 0 when the
 * batch is done. Spans run one run at a time, in order, so each sequence sees the runs a
 * separate append gives it. */
static int next_step(const struct backend_batch *batch, size_t *pos, struct lm_run *runs)
{
	size_t vocab = (size_t)batch->spans[0].seq->backend->model->cfg.vocab;
	int n = 0, rows = 0;
	for (size_t i = 0; i < batch->n_spans && n < LM_BATCH_MAX_RUNS; i++) {
		const struct backend_span *sp = &batch->spans[i];
		size_t end = sp->first + sp->n;
		if (pos[i] == end)
			continue;
		struct lm_run r;
		next_run(batch, pos[i], end, vocab, &r);
		if (n > 0 && rows + r.T > LM_BATCH_MAX_ROWS)
			continue;
		r.seq = (struct lm_seq *)sp->seq;
		runs[n++] = r;
		rows += r.T;
		pos[i] += (size_t)r.T;
	}
	return n;
}

/* Every span's KV room and the pool's scratch for its longest context, then the lead's (the
 * first span's sequence) activations for the largest step. The steps are planned as forward()
 * will run them. */
static int cpu_reserve(struct engine_backend *b, const struct backend_batch *batch)
{
	(void)b;
	for (size_t i = 0; i < batch->n_spans; i++) {
		int r = lm_seq_prepare((struct lm_seq *)batch->spans[i].seq, (int)batch->spans[i].n);
		if (r < 0)
			return r;
	}
	size_t *pos = malloc(batch->n_spans * sizeof(*pos));
	struct lm_run *runs = malloc(LM_BATCH_MAX_RUNS * sizeof(*runs));
	int r = -ENOMEM;
	if (!pos || !runs)
		goto free_arrays;
	for (size_t i = 0; i < batch->n_spans; i++)
		pos[i] = batch->spans[i].first;
	struct lm_seq *lead = (struct lm_seq *)batch->spans[0].seq;
	r = 0;
	for (int n; r == 0 && (n = next_step(batch, pos, runs)) > 0;)
		r = lm_batch_prepare(lead, runs, n);
free_arrays:
	free(runs);
	free(pos);
	return r;
}

/* One lm_forward_batch() per step: decoding sequences advance together (one product of their
 * rows per matrix); a span longer than LM_MAX_BATCH takes one run per step. The cursors (one per
 * span: session.c holds a batch to ENGINE_BATCH_MAX_SESSIONS) and runs live on the stack:
 * forward() cannot fail on memory. */
static int cpu_forward(struct engine_backend *b, const struct backend_batch *batch)
{
	(void)b;
	size_t pos[ENGINE_BATCH_MAX_SESSIONS];
	struct lm_run runs[LM_BATCH_MAX_RUNS];
	for (size_t i = 0; i < batch->n_spans; i++)
		pos[i] = batch->spans[i].first;
	struct lm_seq *lead = (struct lm_seq *)batch->spans[0].seq;
	for (int n; (n = next_step(batch, pos, runs)) > 0;)
		lm_forward_batch(lead, runs, n);
	return 0;
}

/* $HOLOD_CPU_GEMM_WEIGHTS: "plain" (default) or "reordered" (docs/benchmarks.md weighs them). */
static enum cpu_dnnl_layout cpu_gemm_layout(void)
{
	const char *v = getenv("HOLOD_CPU_GEMM_WEIGHTS");
	return v && strcmp(v, "reordered") == 0 ? CPU_DNNL_REORDERED : CPU_DNNL_PLAIN;
}

/* The ViT blocks' layout (vision_gemms_create()): reordered, unless $HOLOD_CPU_GEMM_WEIGHTS
 * says "plain". */
static enum cpu_dnnl_layout cpu_vision_layout(void)
{
	const char *v = getenv("HOLOD_CPU_GEMM_WEIGHTS");
	return v && strcmp(v, "plain") == 0 ? CPU_DNNL_PLAIN : CPU_DNNL_REORDERED;
}

static void cpu_info(const struct engine_backend *b, struct engine_backend_info *ret)
{
#if defined(__x86_64__)
	const char *arch = "x86_64";
#elif defined(__aarch64__)
	const char *arch = "aarch64";
#else
	const char *arch = "cpu";
#endif
	const struct cpu_backend *cb = (const struct cpu_backend *)b;
	if (cb->prep.bf16 && !cpu_dnnl_bf16_supported())
		snprintf(ret->device, sizeof(ret->device),
			 "%s, %s kernels, gemm=own (oneDNN has no bf16 products on this CPU), gemv=%s, "
			 "%d threads",
			 arch, cpu_kernel_name(), cpu_gemv_name(), cpu_threads());
	else if (cb->prep.bf16)
		snprintf(ret->device, sizeof(ret->device),
			 "%s, %s kernels, gemm=onednn:%s (%s weights), gemv=%s, %d threads", arch,
			 cpu_kernel_name(), cpu_dnnl_impl_name(),
			 cpu_gemm_layout() == CPU_DNNL_REORDERED ? "reordered" : "plain", cpu_gemv_name(),
			 cpu_threads());
	else
		snprintf(ret->device, sizeof(ret->device), "%s, %s kernels, gemv=%s, %d threads", arch,
			 cpu_kernel_name(), cpu_gemv_name(), cpu_threads());
	long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0)
		ret->memory_total = (uint64_t)pages * (uint64_t)page;
	if (avail > 0 && page > 0)
		ret->memory_free = (uint64_t)avail * (uint64_t)page;
}

/* Turning it on or off starts the sums from zero. */
static int cpu_profile(struct engine_backend *b, bool on)
{
	struct lm_profile *p = &((struct cpu_backend *)b)->prof;
	for (int i = 0; i < LM_OP_COUNT; i++) {
		atomic_store(&p->ns[i], 0);
		atomic_store(&p->flop[i], 0);
	}
	atomic_store(&p->on, on);
	return 0;
}

/* One line per operation: "<name>: <ms> ms (<share>%)", the matrix products with their rate
 * and the layers' weight format, then "total: <ms> ms". */
static int cpu_profile_report(struct engine_backend *b, char ***ret_lines)
{
	struct lm_profile *p = &((struct cpu_backend *)b)->prof;
	if (!atomic_load(&p->on))
		return -EINVAL;
	char **lines = calloc(LM_OP_COUNT + 2, sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	uint64_t ns[LM_OP_COUNT], total = 0;
	for (int i = 0; i < LM_OP_COUNT; i++)
		total += ns[i] = atomic_load(&p->ns[i]);
	int n = 0;
	for (int i = 0; i < LM_OP_COUNT; i++) {
		char line[160], rate[64] = "";
		if (i == LM_OP_GEMM && ns[i])
			snprintf(rate, sizeof(rate), ", %.0f GFLOP/s, weights %s",
				 (double)atomic_load(&p->flop[i]) / (double)ns[i], b->weights);
		snprintf(line, sizeof(line), "cpu %-16s %9.2f ms (%4.1f%%)%s", lm_op_name((enum lm_op)i),
			 (double)ns[i] / 1e6, total ? 100.0 * (double)ns[i] / (double)total : 0.0, rate);
		if (!(lines[n++] = strdup(line)))
			goto oom;
	}
	char line[96];
	snprintf(line, sizeof(line), "cpu %-16s %9.2f ms", "total", (double)total / 1e6);
	if (!(lines[n++] = strdup(line)))
		goto oom;
	*ret_lines = lines;
	return n;
oom:
	engine_backend_profile_free(lines);
	return -ENOMEM;
}

/* fn with the products of the vision encode of tower t: bf16, oneDNN's, the tower's matrices
 * prepared on its first encode (a different handle replaces them) and locked while fn runs;
 * fp32, or where oneDNN cannot take them, cpu_matmul() (gm NULL). */
static int cpu_vision_steps(struct engine_backend *b, const struct backend_vision_tower *t,
			    int (*fn)(const struct vision_gemms *gm, void *arg), void *arg)
{
	struct cpu_backend *cb = (struct cpu_backend *)b;
	/* (where oneDNN has no bf16 products, every encode would try and fail to prepare them) */
	if (!cb->prep.bf16 || !cpu_dnnl_bf16_supported())
		return fn(NULL, arg);
	pthread_mutex_lock(&cb->vision_lock);
	int r = 0;
	if (!cb->vision || cb->vision_id != t->id) {
		vision_gemms_destroy(cb->vision);
		cb->vision = NULL;
		r = vision_gemms_create(t->w, cpu_vision_layout(), &cb->vision);
		if (r == 0)
			cb->vision_id = t->id;
	}
	if (r == 0)
		r = fn(cb->vision, arg);
	pthread_mutex_unlock(&cb->vision_lock);
	return r == -ENOTSUP ? fn(NULL, arg) : r;
}

/* The tile in progress of a resumable encode (backend_vision_cursor.state). */
struct cpu_vision_run {
	struct vision_vit_run run; /* the tile's residual stream (w NULL until its first step) */
	float *features;	   /* a tile's ViT output */
	float *hidden;		   /* a tile's projector between its halves */
};

static void cpu_vision_run_free(struct backend_vision_cursor *cur)
{
	struct cpu_vision_run *st = cur->state;
	if (!st)
		return;
	vision_vit_run_finish(&st->run);
	free(st->features);
	free(st->hidden);
	free(st);
	cur->state = NULL;
}

struct cpu_encode {
	const struct backend_vision_tower *t;
	const float *pix;
	int n_tiles;
	float *out;
	struct backend_vision_cursor *cur;
	int max_steps;
};

/* Up to max_steps steps of vision_encode_gemms()'s work (the ViT's embedding, its blocks, its
 * final norm with the projector's first product, the projector's second) with the products gm. */
static int cpu_encode_steps(const struct vision_gemms *gm, void *arg)
{
	struct cpu_encode *e = arg;
	const struct vision_weights *w = e->t->w;
	const int grid = e->t->grid, tokens = e->t->tokens_per_tile;
	const int per_tile = w->depth + 3, total = per_tile * e->n_tiles;
	struct cpu_vision_run *st = e->cur->state;
	int r = 0;

	const size_t tile_floats = (size_t)3 * e->t->pre->tile_size * e->t->pre->tile_size,
		     tile_out = (size_t)tokens * (size_t)w->out_dim;
	if (!st) {
		if (!(st = calloc(1, sizeof(*st))))
			return -ENOMEM;
		e->cur->state = st;
		st->features = malloc(sizeof(float) * (size_t)grid * grid * w->width);
		st->hidden = malloc(sizeof(float) * (size_t)tokens * (size_t)w->proj_hidden);
		if (!st->features || !st->hidden)
			return -ENOMEM;
	}
	if (!st->run.w && (r = vision_vit_run_init(&st->run, w, gm != NULL, grid, grid)) < 0)
		return r;
	for (int n = 0; n < e->max_steps && e->cur->done < total; n++) {
		const int t = e->cur->done / per_tile, k = e->cur->done % per_tile;
		if (k == 0) {
			r = vision_vit_run_embed(&st->run, gm, e->pix + (size_t)t * tile_floats, e->t->pos,
						 NULL);
		} else if (k <= w->depth) {
			r = vision_vit_run_block(&st->run, gm, NULL);
		} else if (k == w->depth + 1) {
			r = vision_vit_run_final(&st->run, st->features, NULL);
			if (r == 0)
				r = vision_project_first(w, gm, st->features, grid, grid, st->hidden, NULL);
		} else {
			r = vision_project_second(w, gm, st->hidden, tokens, e->out + (size_t)t * tile_out,
						  NULL);
		}
		if (r < 0)
			return r;
		e->cur->done++;
	}
	if (e->cur->done == total)
		cpu_vision_run_free(e->cur);
	return 0;
}

static int cpu_encode_all(const struct vision_gemms *gm, void *arg)
{
	struct cpu_encode *e = arg;
	return vision_encode_gemms(e->t, gm, e->pix, e->n_tiles, e->out);
}

/* vision_encode_tiles: the whole tiles in one call (vision_encode_gemms()), or a resumable
 * encode's steps, each with the products of cpu_vision_steps() (b NULL: no backend, fp32). */
static int cpu_vision_encode_tiles(struct engine_backend *b, const struct backend_vision_tower *t,
				   const float *pix, int n_tiles, float *out,
				   struct backend_vision_cursor *cur, int max_steps)
{
	struct cpu_encode e = {t, pix, n_tiles, out, cur, max_steps};
	if (!cur)
		return b ? cpu_vision_steps(b, t, cpu_encode_all, &e) : cpu_encode_all(NULL, &e);
	if (max_steps == 0) {
		cpu_vision_run_free(cur);
		return 0;
	}
	return b ? cpu_vision_steps(b, t, cpu_encode_steps, &e) : cpu_encode_steps(NULL, &e);
}

/* vision_preprocess: engine_vision_preprocess() into the host tiles at pix. */
static int cpu_vision_preprocess(struct engine_backend *b, const struct backend_vision_tower *t,
				 const struct engine_image *img, const struct engine_vision_preprocess *p,
				 int n_tiles, float *pix)
{
	struct engine_vision_grid grid;
	int r;

	if (!img || !img->rgb || !p || !pix)
		return -EINVAL;
	for (int c = 0; c < 3; c++)
		if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c]))
			return -EINVAL;
	if ((r = engine_vision_select_grid(img->width, img->height, p->tile_size, p->max_tiles,
					   p->use_thumbnail, &grid)) < 0)
		return r;
	if (grid.n_tiles != n_tiles)
		return -EINVAL;
	return image_vision_preprocess_to(img, p, &grid, pix);
}

static void cpu_destroy(struct engine_backend *b)
{
	vision_gemms_destroy(((struct cpu_backend *)b)->vision);
	pthread_mutex_destroy(&((struct cpu_backend *)b)->vision_lock);
	lm_prepared_finish(&((struct cpu_backend *)b)->prep);
	lm_fp8_bf16_model_free(((struct cpu_backend *)b)->widened);
	free(b);
}

static const struct backend_ops cpu_ops = {
	.name = "cpu",
	.destroy = cpu_destroy,
	.seq_create = cpu_seq_create,
	.seq_destroy = cpu_seq_destroy,
	.seq_reset = cpu_seq_reset,
	.seq_copy = cpu_seq_copy,
	.seq_state_bytes = cpu_seq_state_bytes,
	.seq_export = cpu_seq_export,
	.seq_import = cpu_seq_import,
	.reserve = cpu_reserve,
	.forward = cpu_forward,
	.info = cpu_info,
	.profile = cpu_profile,
	.profile_report = cpu_profile_report,
	/* host tiles and rows; a resumable encode steps through a tile's layers */
	.vision = {.device = false, .max_tiles = VISION_MAX_ENCODE_TILES, .step = BACKEND_VISION_STEP_LAYER},
	.vision_preprocess = cpu_vision_preprocess,
	.vision_encode_tiles = cpu_vision_encode_tiles,
};

const struct backend_ops *backend_host_vision_ops(void)
{
	return &cpu_ops;
}

/* Quantization's or the bf16 matrices' copying's progress (lm_prepare() does one of them): to
 * the caller's callback, and to the log every 10% */
struct quant_progress {
	const struct engine_backend_options *opts;
	uint64_t t0;
	int logged;   /* tenths */
	bool copying; /* the matrices copied out of the map, not quantized */
};

static void quant_progress(void *arg, uint64_t done, uint64_t total)
{
	struct quant_progress *qp = arg;
	int tenths = total ? (int)(done * 10 / total) : 10;
	/* a small model's few milliseconds get the closing line alone */
	if (tenths > qp->logged && total >= ((uint64_t)64 << 20)) {
		qp->logged = tenths;
		if (qp->copying)
			log_info("copying the language model's matrices into 2 MiB pages: %llu of %llu "
				 "MiB (%.1f s)",
				 (unsigned long long)(done >> 20), (unsigned long long)(total >> 20),
				 (double)(time_mono_ns() - qp->t0) * 1e-9);
		else
			log_info("quantizing the language model's linear layers to %s: %llu of %llu "
				 "MiB (%.1f s)",
				 engine_weights_name(qp->opts->weights), (unsigned long long)(done >> 20),
				 (unsigned long long)(total >> 20), (double)(time_mono_ns() - qp->t0) * 1e-9);
	}
	if (qp->opts->progress)
		qp->opts->progress(qp->opts->progress_arg, done, total);
}

/* (engine.h) the CPU backend's DEFAULT precision for this checkpoint: bf16 wherever the CPU runs its products
 * no slower than fp32's: oneDNN's (AVX-512 on) or the engine's own AVX2 kernels. Measured with oneDNN capped
 * at AVX2 and the AVX2 kernels (AMD EPYC, docs/benchmarks.md, "... and a CPU with AVX2 alone in bf16 by
 * default"): a bf16 checkpoint's prefill 1.06-1.12x and decode 1.03x fp32's, the encoder 1.09x; and q8/q4
 * weights decode on the integer kernels (int8 activations), q4 at 2.6-3.2x the rate of fp32's exact kernels,
 * which left it at 27-30% of the read bandwidth. An FP8 checkpoint (bf16 embeddings) too: its decode kernel
 * is the same in either precision, its prompt's rows rounded to bf16 (not measured). */
enum engine_precision engine_model_cpu_precision(const struct engine_model *model)
{
	return model && model->embeddings.dtype == TENSOR_BF16 &&
			       (cpu_dnnl_bf16_supported() || cpu_isa() >= CPU_ISA_AVX2) ?
		       ENGINE_PRECISION_BF16 :
		       ENGINE_PRECISION_FP32;
}

const struct tensor *backend_cpu_weights(const struct engine_backend *b, const struct tensor *w)
{
	if (!b || b->kind != ENGINE_BACKEND_CPU || !w)
		return w;
	const struct lm_prepared *p = &((const struct cpu_backend *)b)->prep;
	const struct engine_model *m = b->model;
	/* by the data (the backend's model may be a widened copy of the caller's) */
	if (w->data == m->lm_head.data)
		return p->head_held.data ? &p->head_held : w;
	for (int l = 0; l < p->n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);
		for (int i = 0; i < n; i++)
			if (mats[i]->data == w->data)
				return p->layers[l].held[i].data ? &p->layers[l].held[i] : w;
	}
	return w;
}

bool backend_cpu_quantized(const struct engine_backend *b)
{
	return b && b->kind == ENGINE_BACKEND_CPU && ((const struct cpu_backend *)b)->prep.quant &&
	       !((const struct cpu_backend *)b)->quant_stored;
}

/* A holod-quantized checkpoint (quantized.h) runs as stored: --weights default or its own
 * format. Another format would mean dequantizing and quantizing again, which loses accuracy
 * twice: the sentence says to quantize the source instead. */
static int check_stored_quant(const struct engine_model *m, enum engine_weights w, char *err, size_t errlen)
{
	const int f = model_quant_format(m);
	if (f < 0 || w == ENGINE_WEIGHTS_DEFAULT || (w == ENGINE_WEIGHTS_Q8 && f == QUANT_Q8) ||
	    (w == ENGINE_WEIGHTS_Q4 && f == QUANT_Q4))
		return 0;
	if (err && errlen)
		snprintf(err, errlen,
			 "--weights %s: the checkpoint's linear layers were quantized to %s "
			 "by holo-quantize and load as they are (use --weights default or %s, or load "
			 "the source checkpoint)",
			 engine_weights_name(w), quant_format_desc((enum quant_format)f)->name,
			 quant_format_desc((enum quant_format)f)->name);
	return -EINVAL;
}

struct engine_backend *backend_cpu_create(const struct engine_model *m,
					  const struct engine_backend_options *opts, char *err, size_t errlen)
{
	return backend_cpu_create_hooked(m, opts, NULL, err, errlen);
}

struct engine_backend *backend_cpu_create_hooked(const struct engine_model *m,
						 const struct engine_backend_options *opts,
						 const struct lm_quant_hooks *hooks, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	int r = lm_model_check(m);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	/* the kernels' set (cpu_isa.h): an unknown $HOLOD_CPU_KERNELS is refused here, by name */
	if ((r = cpu_isa_check_env(err, errlen)) < 0) {
		errno = -r;
		return NULL;
	}
	enum engine_precision precision = opts->precision;
	if (precision == ENGINE_PRECISION_DEFAULT)
		precision = engine_model_cpu_precision(m);
	if ((r = check_stored_quant(m, opts->weights, err, errlen)) < 0) {
		errno = -r;
		return NULL;
	}
	const int stored_quant = model_quant_format(m);
	/* an FP8 checkpoint asked for bf16: its layers widened once (lm_fp8.c), the backend runs
	 * on that copy of the model */
	struct engine_model *widened = NULL;
	if (opts->weights == ENGINE_WEIGHTS_BF16 && model_has_fp8(m)) {
		if (!(widened = lm_fp8_bf16_model(m, err, errlen)))
			return NULL;
		m = widened;
	}
	const struct tensor *mats[4];
	if (opts->weights == ENGINE_WEIGHTS_BF16 && m->cfg.n_layers > 0 &&
	    ((lm_layer_matrices(&m->layers[0], mats) > 0 && mats[0]->dtype != TENSOR_BF16) ||
	     model_has_fp8(m))) {
		if (err && errlen)
			snprintf(err, errlen,
				 "--weights bf16: the checkpoint's weights are %s, not bf16 "
				 "(use --weights default, fp8, q8 or q4)",
				 model_has_fp8(m)	      ? "fp8 (NVIDIA ModelOpt)" :
				 mats[0]->dtype == TENSOR_F16 ? "f16" :
								"f32");
		errno = EINVAL;
		return NULL;
	}
	struct cpu_backend *cb = calloc(1, sizeof(*cb));
	if (!cb) {
		lm_fp8_bf16_model_free(widened);
		errno = ENOMEM;
		return NULL;
	}
	cb->widened = widened;
	struct quant_progress qp = {.opts = opts, .t0 = time_mono_ns()};
	struct lm_prepare_opts po = {
		.bf16 = precision == ENGINE_PRECISION_BF16,
		.layout = cpu_gemm_layout(),
		.quant = stored_quant >= 0		    ? stored_quant :
			 opts->weights == ENGINE_WEIGHTS_Q8 ? QUANT_Q8 :
			 opts->weights == ENGINE_WEIGHTS_Q4 ? QUANT_Q4
			 /* an FP8 checkpoint's layers are fp8 by default (lm_fp8.c) */
			 :
			 opts->weights == ENGINE_WEIGHTS_FP8 || model_has_fp8(m) ? QUANT_FP8 :
										   -1,
		.progress = quant_progress,
		.progress_arg = &qp,
		.hooks = hooks,
		.map_weights = hooks && hooks->map_weights,
	};
	qp.copying = po.quant < 0 && !po.map_weights;
	r = lm_prepare(m, &po, &cb->prep, err, errlen);
	if (r < 0) {
		lm_fp8_bf16_model_free(widened);
		free(cb);
		errno = -r;
		return NULL;
	}
	cb->quant_stored = cb->prep.quant_mapped;
	cb->head_stored = cb->prep.head_mapped;
	/* the decode kernels' layout where the GEMV has one for the format (quant.h's tiles):
	 * bf16 precision's integer kernels; fp32 precision's exact ones run on records */
	const uint64_t tile_t0 = time_mono_ns();
	const bool tile = cb->prep.quant && precision == ENGINE_PRECISION_BF16 &&
			  cpu_gemv_quant_tiles(cb->prep.quant_format);
	if (tile && (r = lm_prepared_tile(m, &cb->prep)) < 0) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory laying out the %s weights for the decode kernels",
				 quant_format_desc((enum quant_format)cb->prep.quant_format)->name);
		lm_prepared_finish(&cb->prep);
		lm_fp8_bf16_model_free(widened);
		free(cb);
		errno = -r;
		return NULL;
	}
	if (tile)
		log_info("the %s matrices laid out in %d-row tiles for the decode kernels in %.2f s",
			 quant_format_desc((enum quant_format)cb->prep.quant_format)->name, QUANT_TILE_ROWS,
			 (double)(time_mono_ns() - tile_t0) * 1e-9);
	cb->prep.prof = &cb->prof;
	pthread_mutex_init(&cb->vision_lock, NULL);
	struct engine_backend *b = &cb->base;
	if ((r = backend_init(b, &cpu_ops, m, opts)) < 0) {
		cpu_destroy(b);
		errno = -r;
		return NULL;
	}
	b->kind = ENGINE_BACKEND_CPU;
	b->precision = precision;
	struct engine_model_info info;
	engine_model_get_info(m, &info);
	/* the quantized layers and the held copies replace their source's bytes, which this
	 * backend no longer reads (their pages released) */
	b->weight_bytes = info.weight_bytes - cb->prep.quant_source_bytes + cb->prep.quant_bytes -
			  cb->prep.held_source_bytes + cb->prep.held_bytes + cb->prep.gemm_bytes;
	if (cb->prep.held_bytes || cb->prep.held_failed) {
		char failed[96] = "";
		if (cb->prep.held_failed)
			snprintf(failed, sizeof(failed), ", %d left in the map (no memory for their copies)",
				 cb->prep.held_failed);
		log_info("the language model's matrices held in 2 MiB pages (copied from the map): "
			 "%.1f MiB in %.2f s%s, %llu MiB of weights held",
			 (double)cb->prep.held_bytes / (1 << 20), (double)cb->prep.held_ns * 1e-9, failed,
			 (unsigned long long)(b->weight_bytes >> 20));
	}
	if (cb->quant_stored) {
		snprintf(b->weights, sizeof(b->weights), "%s",
			 quant_format_desc((enum quant_format)stored_quant)->name);
		/* the lm_head's records too, unless it is tied to the embeddings (or the directory
		 * was written before holo-quantize wrote them): then quantized here */
		log_info("the language model's linear layers are %s as stored (holo-quantize), the "
			 "lm_head %s: %llu MiB of records, checked in %.1f s, %llu MiB of weights held",
			 b->weights, cb->head_stored ? "too" : "quantized at load",
			 (unsigned long long)(cb->prep.quant_bytes >> 20),
			 (double)(time_mono_ns() - qp.t0) * 1e-9, (unsigned long long)(b->weight_bytes >> 20));
	} else if (cb->prep.quant) {
		snprintf(b->weights, sizeof(b->weights), "%s",
			 quant_format_desc((enum quant_format)cb->prep.quant_format)->name);
		log_info("quantized the language model's linear layers to %s in %.1f s: %llu MiB "
			 "(from %llu MiB), %llu MiB of weights held",
			 b->weights, (double)(time_mono_ns() - qp.t0) * 1e-9,
			 (unsigned long long)(cb->prep.quant_bytes >> 20),
			 (unsigned long long)(cb->prep.quant_source_bytes >> 20),
			 (unsigned long long)(b->weight_bytes >> 20));
	}
	return b;
}
