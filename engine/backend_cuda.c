/* The CUDA backend behind the seam (backend.h): device, weights and sequence state on the GPU.
 *
 * Weights: every language-model tensor is uploaded once at creation, converted on the host:
 * matrices (embeddings, projections, conv taps, lm_head) to the chosen precision (bf16 or fp32);
 * vectors (norm weights, biases, A_log, D, dt_bias) to fp32 whatever the precision, because they
 * are tiny and the CPU reads them in fp32 (a bf16 copy of the SSM decay would differ from the CPU
 * for no memory gain). A tied lm_head is the embeddings' copy. All of it lives in one device
 * allocation, sized and checked against the device's free memory before anything is allocated.
 *
 * Sequences: per sequence one device block for the fixed state (each Mamba layer's fp32 conv
 * window [K-1][conv_dim] then fp32 SSM state [H][P][N]) and one for the KV caches
 * ([attention layer][K, V][kv_cap][kv_dim], bf16 in bf16 precision, else fp32), grown on demand
 * by a new block and device copies. Every byte is charged to the backend (its state limit), and a
 * device allocation that fails is -ENOMEM with the sequence unchanged. Reset is a device memset,
 * copy (snapshot, restore) device copies, export a download.
 *
 * The forward op is absent until the language model's kernels exist (issue 11): the engine then
 * answers -EOPNOTSUPP and programs refuse the backend up front (engine_backend_resolve()).
 *
 * Threads: the device context belongs to the thread that created the backend (holod's engine
 * thread); every op runs there. engine_backend_get_info() may run on any thread, so it reports
 * memory from figures cached at creation and the atomic state counter, never from the driver.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "lm.h"

/* Host staging of one upload: tensors are converted and sent in pieces of this size. */
#define CUDA_STAGING_BYTES ((size_t)16 << 20)
/* Alignment of every tensor inside the weight block (what cudaMalloc gives a block). */
#define CUDA_WEIGHT_ALIGN 256u

struct cuda_weight {
	const struct tensor *src; /* the model's tensor */
	size_t offset;            /* in the weight block */
	enum tensor_dtype dtype;  /* on the device: TENSOR_BF16 or TENSOR_F32 */
	size_t elems;
};

struct cuda_backend {
	struct engine_backend base;
	struct gpu_context *gpu;
	char device_name[256];
	uint64_t memory_total;
	uint64_t memory_free_after_upload; /* what the device had free once the weights were up */
	void *weights;                     /* device block */
	struct cuda_weight *table;
	size_t n_weights;
	struct lm_dims dm;
	int n_mamba, n_attn;
	size_t kv_elem; /* bytes of one K/V element */
};

struct cuda_seq {
	struct backend_seq base;
	void *fixed; /* conv + SSM of every Mamba layer, fp32 */
	void *kv;    /* [n_attn][2][kv_cap][kv_dim] */
	int kv_cap;
};

static struct cuda_backend *cb_of(const struct engine_backend *b)
{
	return (struct cuda_backend *)b;
}

bool backend_cuda_can_forward(void)
{
	return false;
}

struct gpu_context *backend_cuda_context(const struct engine_backend *b)
{
	return cb_of(b)->gpu;
}

/* ---- weights ---------------------------------------------------------------------------- */

static size_t tensor_elems(const struct tensor *t)
{
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

static size_t dtype_bytes(enum tensor_dtype d)
{
	return d == TENSOR_F32 ? 4 : 2;
}

static size_t align_up(size_t n)
{
	return (n + CUDA_WEIGHT_ALIGN - 1) & ~(size_t)(CUDA_WEIGHT_ALIGN - 1);
}

/* Adds t to the table (vectors in fp32, the rest in the backend's precision). */
static void plan_weight(struct cuda_backend *b, const struct tensor *t, size_t *offset)
{
	if (!t->data)
		return;
	struct cuda_weight *w = &b->table[b->n_weights++];
	w->src = t;
	w->elems = tensor_elems(t);
	w->dtype = t->ndim == 1 || b->base.precision == ENGINE_PRECISION_FP32 ? TENSOR_F32
									      : TENSOR_BF16;
	w->offset = *offset;
	*offset += align_up(w->elems * dtype_bytes(w->dtype));
}

/* Lays out every LM tensor of the model in the weight block; returns the block's size. */
static size_t plan_weights(struct cuda_backend *b)
{
	const struct engine_model *m = b->base.model;
	size_t max = 3 + 9 * (size_t)m->cfg.n_layers, offset = 0;
	b->table = xcalloc(max, sizeof(*b->table));
	plan_weight(b, &m->embeddings, &offset);
	plan_weight(b, &m->norm_f, &offset);
	if (m->lm_head.data != m->embeddings.data)
		plan_weight(b, &m->lm_head, &offset);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		plan_weight(b, &L->norm, &offset);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			plan_weight(b, &L->mamba.in_proj, &offset);
			plan_weight(b, &L->mamba.conv_w, &offset);
			plan_weight(b, &L->mamba.conv_b, &offset);
			plan_weight(b, &L->mamba.dt_bias, &offset);
			plan_weight(b, &L->mamba.a_log, &offset);
			plan_weight(b, &L->mamba.d, &offset);
			plan_weight(b, &L->mamba.norm, &offset);
			plan_weight(b, &L->mamba.out_proj, &offset);
			break;
		case LM_LAYER_ATTENTION:
			plan_weight(b, &L->attn.q, &offset);
			plan_weight(b, &L->attn.k, &offset);
			plan_weight(b, &L->attn.v, &offset);
			plan_weight(b, &L->attn.o, &offset);
			break;
		case LM_LAYER_MLP:
			plan_weight(b, &L->mlp.up, &offset);
			plan_weight(b, &L->mlp.down, &offset);
			break;
		}
	}
	return offset;
}

/* Converts elements [first, first + n) of w's source into staging in w's device dtype. */
static void convert(const struct cuda_weight *w, size_t first, size_t n, void *staging)
{
	const struct tensor *t = w->src;
	if (w->dtype == TENSOR_F32) {
		cpu_tensor_to_f32(t, first, n, staging);
		return;
	}
	uint16_t *out = staging;
	if (t->dtype == TENSOR_BF16) {
		memcpy(out, (const uint16_t *)t->data + first, n * sizeof(uint16_t));
		return;
	}
	/* f32 and f16 go through f32 (exact for f16), then round to nearest even */
	float tmp[1024];
	for (size_t done = 0; done < n;) {
		size_t k = MIN(n - done, ARRAY_SIZE(tmp));
		cpu_tensor_to_f32(t, first + done, k, tmp);
		for (size_t i = 0; i < k; i++)
			out[done + i] = f32_to_bf16(tmp[i]);
		done += k;
	}
}

static int upload_weights(struct cuda_backend *b, void *staging)
{
	for (size_t i = 0; i < b->n_weights; i++) {
		const struct cuda_weight *w = &b->table[i];
		size_t esz = dtype_bytes(w->dtype), per = CUDA_STAGING_BYTES / esz;
		for (size_t first = 0; first < w->elems; first += per) {
			size_t n = MIN(per, w->elems - first);
			convert(w, first, n, staging);
			int r = gpu_copy_to_device(b->gpu, (char *)b->weights + w->offset + first * esz,
						   staging, n * esz);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

const void *backend_cuda_weight(const struct engine_backend *base, const struct tensor *t,
				enum tensor_dtype *ret_dtype)
{
	const struct cuda_backend *b = cb_of(base);
	if (t == &base->model->lm_head && t->data == base->model->embeddings.data)
		t = &base->model->embeddings;
	for (size_t i = 0; i < b->n_weights; i++) {
		if (b->table[i].src == t) {
			*ret_dtype = b->table[i].dtype;
			return (const char *)b->weights + b->table[i].offset;
		}
	}
	return NULL;
}

/* ---- sequences ---------------------------------------------------------------------------- */

static size_t conv_floats(const struct lm_dims *dm)
{
	return (size_t)(dm->K - 1) * dm->conv_dim;
}

static size_t ssm_floats(const struct lm_dims *dm)
{
	return (size_t)dm->H * dm->P * dm->N;
}

static size_t fixed_bytes(const struct cuda_backend *b)
{
	return (size_t)b->n_mamba * (conv_floats(&b->dm) + ssm_floats(&b->dm)) * sizeof(float);
}

/* Bytes of one position of one K or V cache of one layer. */
static size_t kv_row_bytes(const struct cuda_backend *b)
{
	return (size_t)b->dm.kv_dim * b->kv_elem;
}

static size_t kv_bytes(const struct cuda_backend *b, int cap)
{
	return 2 * (size_t)b->n_attn * (size_t)cap * kv_row_bytes(b);
}

/* Device address of layer a's (a-th attention layer) K (which 0) or V (1) cache, in a block of
 * capacity cap. */
static char *kv_at(const struct cuda_backend *b, void *kv, int cap, int a, int which)
{
	return (char *)kv + ((size_t)a * 2 + (size_t)which) * (size_t)cap * kv_row_bytes(b);
}

static void cuda_seq_destroy(struct backend_seq *bs)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	if (!s)
		return;
	struct cuda_backend *b = cb_of(bs->backend);
	gpu_free(b->gpu, s->kv);
	gpu_free(b->gpu, s->fixed);
	backend_uncharge(bs->backend, fixed_bytes(b) + kv_bytes(b, s->kv_cap));
	free(s);
}

static struct backend_seq *cuda_seq_create(struct engine_backend *base, int max_tokens)
{
	struct cuda_backend *b = cb_of(base);
	size_t fixed = fixed_bytes(b);
	int r = backend_charge(base, fixed);
	if (r < 0)
		goto fail;
	struct cuda_seq *s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto uncharge;
	}
	s->base.backend = base;
	s->base.max_tokens = max_tokens;
	if (fixed) {
		r = gpu_alloc(b->gpu, fixed, &s->fixed);
		if (r >= 0)
			r = gpu_memset(b->gpu, s->fixed, 0, fixed);
		if (r < 0)
			goto free_seq;
	}
	return &s->base;
free_seq:
	gpu_free(b->gpu, s->fixed);
	free(s);
uncharge:
	backend_uncharge(base, fixed);
fail:
	errno = -r;
	return NULL;
}

static void cuda_seq_reset(struct backend_seq *bs)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	/* a failed memset is a device failure the next computation reports */
	(void)gpu_memset(b->gpu, s->fixed, 0, fixed_bytes(b));
	bs->n_tokens = 0;
}

/* Grows the KV block to hold `need` positions: to exactly `need` when exact (copies), else with
 * the CPU backend's doubling (at least 64, at most max_tokens). The cached positions are copied;
 * on failure nothing changes. */
static int grow_kv(struct cuda_seq *s, int need, bool exact)
{
	struct cuda_backend *b = cb_of(s->base.backend);
	if (need <= s->kv_cap || b->n_attn == 0)
		return 0;
	int cap = exact ? need : MAX(need, MIN(s->base.max_tokens, MAX(64, s->kv_cap * 2)));
	uint64_t grow = kv_bytes(b, cap) - kv_bytes(b, s->kv_cap);
	int r = backend_charge(s->base.backend, grow);
	if (r < 0)
		return r;
	void *kv = NULL;
	r = gpu_alloc(b->gpu, kv_bytes(b, cap), &kv);
	if (r < 0)
		goto uncharge;
	size_t used = (size_t)s->base.n_tokens * kv_row_bytes(b);
	for (int a = 0; a < b->n_attn && used; a++)
		for (int w = 0; w < 2 && r >= 0; w++)
			r = gpu_copy_on_device(b->gpu, kv_at(b, kv, cap, a, w),
					       kv_at(b, s->kv, s->kv_cap, a, w), used);
	if (r < 0) {
		gpu_free(b->gpu, kv);
		goto uncharge;
	}
	gpu_free(b->gpu, s->kv);
	s->kv = kv;
	s->kv_cap = cap;
	return 0;
uncharge:
	backend_uncharge(s->base.backend, grow);
	return r;
}

static int cuda_seq_copy(struct backend_seq *bdst, const struct backend_seq *bsrc)
{
	struct cuda_seq *dst = (struct cuda_seq *)bdst;
	const struct cuda_seq *src = (const struct cuda_seq *)bsrc;
	struct cuda_backend *b = cb_of(bdst->backend);
	int n = bsrc->n_tokens;
	/* grow first: it may copy dst's own positions, which the copy then overwrites */
	int r = grow_kv(dst, n, true);
	if (r < 0)
		return r;
	r = gpu_copy_on_device(b->gpu, dst->fixed, src->fixed, fixed_bytes(b));
	size_t used = (size_t)n * kv_row_bytes(b);
	for (int a = 0; a < b->n_attn && used && r >= 0; a++)
		for (int w = 0; w < 2 && r >= 0; w++)
			r = gpu_copy_on_device(b->gpu, kv_at(b, dst->kv, dst->kv_cap, a, w),
					       kv_at(b, src->kv, src->kv_cap, a, w), used);
	if (r < 0)
		return r;
	bdst->n_tokens = n;
	return 0;
}

static size_t cuda_seq_state_bytes(const struct backend_seq *bs)
{
	struct cuda_backend *b = cb_of(bs->backend);
	return fixed_bytes(b) + kv_bytes(b, bs->n_tokens);
}

/* The attention layers' order among the model's layers: -1 for other kinds. */
static int attn_index(const struct engine_model *m, int layer)
{
	if (m->layers[layer].kind != LM_LAYER_ATTENTION)
		return -1;
	int a = 0;
	for (int l = 0; l < layer; l++)
		a += m->layers[l].kind == LM_LAYER_ATTENTION;
	return a;
}

static int mamba_index(const struct engine_model *m, int layer)
{
	if (m->layers[layer].kind != LM_LAYER_MAMBA)
		return -1;
	int i = 0;
	for (int l = 0; l < layer; l++)
		i += m->layers[l].kind == LM_LAYER_MAMBA;
	return i;
}

static size_t mamba_offset(const struct cuda_backend *b, int i)
{
	return (size_t)i * (conv_floats(&b->dm) + ssm_floats(&b->dm)) * sizeof(float);
}

/* Downloads one K or V cache of n positions as floats. */
static int download_kv(struct cuda_backend *b, const void *src, size_t n, float *out)
{
	size_t elems = n * (size_t)b->dm.kv_dim;
	if (b->kv_elem == sizeof(float))
		return gpu_copy_to_host(b->gpu, out, src, elems * sizeof(float));
	uint16_t *raw = malloc(elems * sizeof(uint16_t));
	if (!raw)
		return -ENOMEM;
	int r = gpu_copy_to_host(b->gpu, raw, src, elems * sizeof(uint16_t));
	for (size_t i = 0; r >= 0 && i < elems; i++)
		out[i] = bf16_to_f32(raw[i]);
	free(raw);
	return r;
}

static int cuda_seq_export(const struct backend_seq *bs, struct backend_seq_state *ret)
{
	const struct cuda_seq *s = (const struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	const struct engine_model *m = bs->backend->model;
	struct backend_seq_state st = {.n_layers = m->cfg.n_layers, .n_tokens = bs->n_tokens};
	int r = -ENOMEM;
	st.layers = calloc((size_t)st.n_layers, sizeof(*st.layers));
	if (!st.layers)
		return -ENOMEM;
	size_t kv = (size_t)bs->n_tokens * b->dm.kv_dim;
	for (int l = 0; l < st.n_layers; l++) {
		struct backend_layer_state *o = &st.layers[l];
		int mi = mamba_index(m, l), ai = attn_index(m, l);
		if (mi >= 0) {
			o->conv = malloc(MAX(conv_floats(&b->dm), 1) * sizeof(float));
			o->ssm = malloc(ssm_floats(&b->dm) * sizeof(float));
			if (!o->conv || !o->ssm)
				goto fail;
			const char *at = (const char *)s->fixed + mamba_offset(b, mi);
			r = gpu_copy_to_host(b->gpu, o->conv, at, conv_floats(&b->dm) * sizeof(float));
			if (r >= 0)
				r = gpu_copy_to_host(b->gpu, o->ssm, at + conv_floats(&b->dm) * sizeof(float),
						     ssm_floats(&b->dm) * sizeof(float));
			if (r < 0)
				goto fail;
		} else if (ai >= 0) {
			r = -ENOMEM;
			o->k = malloc(MAX(kv, 1) * sizeof(float));
			o->v = malloc(MAX(kv, 1) * sizeof(float));
			if (!o->k || !o->v)
				goto fail;
			r = 0;
			if (kv) {
				r = download_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 0), (size_t)bs->n_tokens, o->k);
				if (r >= 0)
					r = download_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 1),
							(size_t)bs->n_tokens, o->v);
			}
			if (r < 0)
				goto fail;
		}
	}
	*ret = st;
	return 0;
fail:
	backend_seq_state_finish(&st);
	return r < 0 ? r : -ENOMEM;
}

/* Uploads n positions of one K or V cache given as floats, in the device's element type. */
static int upload_kv(struct cuda_backend *b, void *dst, const float *src, size_t n)
{
	size_t elems = n * (size_t)b->dm.kv_dim;
	if (b->kv_elem == sizeof(float))
		return gpu_copy_to_device(b->gpu, dst, src, elems * sizeof(float));
	uint16_t *tmp = malloc(MAX(elems, 1) * sizeof(uint16_t));
	if (!tmp)
		return -ENOMEM;
	for (size_t i = 0; i < elems; i++)
		tmp[i] = f32_to_bf16(src[i]);
	int r = gpu_copy_to_device(b->gpu, dst, tmp, elems * sizeof(uint16_t));
	free(tmp);
	return r;
}

static int cuda_seq_import(struct backend_seq *bs, const struct backend_seq_state *st)
{
	struct cuda_seq *s = (struct cuda_seq *)bs;
	struct cuda_backend *b = cb_of(bs->backend);
	const struct engine_model *m = bs->backend->model;
	int r = grow_kv(s, st->n_tokens, true);
	for (int l = 0; l < m->cfg.n_layers && r >= 0; l++) {
		const struct backend_layer_state *in = &st->layers[l];
		int mi = mamba_index(m, l), ai = attn_index(m, l);
		if (mi >= 0) {
			char *at = (char *)s->fixed + mamba_offset(b, mi);
			r = gpu_copy_to_device(b->gpu, at, in->conv, conv_floats(&b->dm) * sizeof(float));
			if (r >= 0)
				r = gpu_copy_to_device(b->gpu, at + conv_floats(&b->dm) * sizeof(float),
						       in->ssm, ssm_floats(&b->dm) * sizeof(float));
		} else if (ai >= 0 && st->n_tokens > 0) {
			r = upload_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 0), in->k, (size_t)st->n_tokens);
			if (r >= 0)
				r = upload_kv(b, kv_at(b, s->kv, s->kv_cap, ai, 1), in->v,
					      (size_t)st->n_tokens);
		}
	}
	if (r < 0)
		return r;
	bs->n_tokens = st->n_tokens;
	return 0;
}

static int cuda_reserve(struct engine_backend *base, const struct backend_batch *batch)
{
	for (size_t i = 0; i < batch->n_spans; i++) {
		struct cuda_seq *s = (struct cuda_seq *)batch->spans[i].seq;
		int r = grow_kv(s, s->base.n_tokens + (int)batch->spans[i].n, false);
		if (r < 0)
			return r;
	}
	return 0;
}

static int cuda_profile(struct engine_backend *base, bool on)
{
	return gpu_profile_enable(cb_of(base)->gpu, on);
}

static int cuda_profile_report(struct engine_backend *base, char ***ret_lines)
{
	struct gpu_context *g = cb_of(base)->gpu;
	if (!gpu_profile_enabled(g))
		return -EINVAL;
	return gpu_profile_report(g, ret_lines);
}

static void cuda_info(const struct engine_backend *base, struct engine_backend_info *ret)
{
	const struct cuda_backend *b = cb_of(base);
	snprintf(ret->device, sizeof(ret->device), "%s", b->device_name);
	ret->memory_total = b->memory_total;
	uint64_t used = ret->state_bytes;
	ret->memory_free = b->memory_free_after_upload > used ? b->memory_free_after_upload - used : 0;
}

static void cuda_destroy(struct engine_backend *base)
{
	struct cuda_backend *b = cb_of(base);
	backend_cuda_vision_finish(base);
	if (b->gpu)
		gpu_free(b->gpu, b->weights);
	gpu_context_destroy(b->gpu);
	free(b->table);
	free(b);
}

static const struct backend_ops cuda_ops = {
	.name = "cuda",
	.destroy = cuda_destroy,
	.seq_create = cuda_seq_create,
	.seq_destroy = cuda_seq_destroy,
	.seq_reset = cuda_seq_reset,
	.seq_copy = cuda_seq_copy,
	.seq_state_bytes = cuda_seq_state_bytes,
	.seq_export = cuda_seq_export,
	.seq_import = cuda_seq_import,
	.reserve = cuda_reserve,
	.forward = NULL, /* the layer kernels are issue 11 */
	.profile = cuda_profile,
	.profile_report = cuda_profile_report,
	.vision_encode = backend_cuda_vision_encode,
	.info = cuda_info,
};

static int fail(int err, char *errbuf, size_t errlen, const char *format, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(int err, char *errbuf, size_t errlen, const char *format, ...)
{
	if (errbuf && errlen) {
		va_list ap;
		va_start(ap, format);
		vsnprintf(errbuf, errlen, format, ap);
		va_end(ap);
	}
	return -err;
}

struct engine_backend *backend_cuda_create(const struct engine_model *m,
					   const struct engine_backend_options *opts, char *errbuf,
					   size_t errlen)
{
	void *staging = NULL;
	int r = lm_model_check(m);
	if (r < 0) {
		fail(EINVAL, errbuf, errlen, "the model's tensors do not match its config");
		errno = EINVAL;
		return NULL;
	}
	struct cuda_backend *b = xcalloc(1, sizeof(*b));
	backend_init(&b->base, &cuda_ops, m, opts);
	lm_dims_init(&b->dm, &m->cfg);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		b->n_mamba += m->layers[l].kind == LM_LAYER_MAMBA;
		b->n_attn += m->layers[l].kind == LM_LAYER_ATTENTION;
	}
	b->kv_elem = opts->precision == ENGINE_PRECISION_BF16 ? sizeof(uint16_t) : sizeof(float);

	struct gpu_device_info di;
	r = gpu_device_info(opts->device, &di);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "cannot query CUDA device %d (%s)", opts->device,
			 strerror(-r));
		goto destroy;
	}
	snprintf(b->device_name, sizeof(b->device_name), "%s", di.name);
	b->gpu = gpu_context_create(opts->device);
	if (!b->gpu) {
		r = fail(errno, errbuf, errlen, "cannot open CUDA device %d (%s): %s", opts->device,
			 di.name, strerror(errno));
		goto destroy;
	}

	size_t need = plan_weights(b), free_b = 0, total_b = 0;
	b->base.weight_bytes = need;
	r = gpu_memory_info(b->gpu, &free_b, &total_b);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "cannot read the memory of CUDA device %d (%s)",
			 opts->device, di.name);
		goto destroy;
	}
	b->memory_total = total_b;
	if (need > free_b) {
		r = fail(ENOMEM, errbuf, errlen,
			 "the model's weights need %zu bytes of device memory in %s, but CUDA device "
			 "%d (%s) has %zu bytes free",
			 need, engine_precision_name(opts->precision), opts->device, di.name, free_b);
		goto destroy;
	}
	r = gpu_alloc(b->gpu, need, &b->weights);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "cannot allocate %zu bytes of device memory for the "
					     "weights on CUDA device %d (%s)",
			 need, opts->device, di.name);
		goto destroy;
	}
	staging = malloc(CUDA_STAGING_BYTES);
	if (!staging) {
		r = fail(ENOMEM, errbuf, errlen, "out of host memory for the weight upload");
		goto destroy;
	}
	r = upload_weights(b, staging);
	if (r < 0) {
		r = fail(-r, errbuf, errlen, "uploading the weights to CUDA device %d (%s) failed",
			 opts->device, di.name);
		goto destroy;
	}
	free(staging);
	staging = NULL;
	if (gpu_memory_info(b->gpu, &free_b, &total_b) >= 0)
		b->memory_free_after_upload = free_b;
	return &b->base;
destroy:
	free(staging);
	cuda_destroy(&b->base);
	errno = -r;
	return NULL;
}
