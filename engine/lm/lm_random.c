/* An in-memory Nemotron-H with random weights, and a random RADIO vision tower for it (lm.h). */
#include "lm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "loader.h"
#include "vision.h"

#define RNG_STEP 0x9e3779b97f4a7c15ull

/* splitmix64: the state after k draws is the seed + k * RNG_STEP, so draw i of a stream can be
 * computed without the i before it (fill() hands ranges of a tensor to the pool). */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += RNG_STEP);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float uni(uint64_t *s, float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_next(s) >> 11) * 0x1.0p-53);
}

static uint16_t to_f16(float f)
{
	/* round-to-nearest for the normal range the tests use (|f| in [2^-14, 65504] or 0) */
	union {
		float f;
		uint32_t u;
	} x = {.f = f};
	uint32_t sign = (x.u >> 16) & 0x8000u;
	int exp = (int)((x.u >> 23) & 0xff) - 127 + 15;
	uint32_t man = x.u & 0x7fffffu;
	if (f == 0 || exp <= 0)
		return (uint16_t)sign;
	uint32_t h = ((uint32_t)exp << 10) | (man >> 13);
	uint32_t rest = man & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

struct fill_job {
	void *p;
	enum tensor_dtype dt;
	size_t n;
	uint64_t s0; /* the stream's state before the tensor's first value */
	float lo, hi;
	float (*fn)(float);
};

/* Values per pool task of a large tensor (a 12B model has 12e9). */
#define FILL_TASK_VALUES ((size_t)1 << 18)

static void fill_task(void *ctx, int task, int thread)
{
	const struct fill_job *j = ctx;
	size_t from = (size_t)task * FILL_TASK_VALUES;
	size_t to = from + FILL_TASK_VALUES < j->n ? from + FILL_TASK_VALUES : j->n;
	uint64_t s = j->s0 + (uint64_t)from * RNG_STEP;
	(void)thread;
	for (size_t i = from; i < to; i++) {
		float v = uni(&s, j->lo, j->hi);
		if (j->fn)
			v = j->fn(v);
		if (j->dt == TENSOR_F32)
			((float *)j->p)[i] = v;
		else if (j->dt == TENSOR_BF16)
			((uint16_t *)j->p)[i] = f32_to_bf16(v);
		else
			((uint16_t *)j->p)[i] = to_f16(v);
	}
}

/* A tensor of the given shape at p (NULL: malloc'ed) filled with the next values of the stream
 * *s, uniform in [lo, hi) (then mapped by fn), on the CPU pool: the values are those of one
 * loop over the stream, whatever the thread count. */
static int fill_at(struct tensor *t, void *p, enum tensor_dtype dt, int ndim, const int64_t *shape,
		   uint64_t *s, float lo, float hi, float (*fn)(float))
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	size_t esz = dt == TENSOR_F32 ? 4 : 2;
	if (!p && !(p = alloc_huge(n * esz))) /* weights: in huge pages, as the backends' own */
		return -ENOMEM;
	struct fill_job job = {.p = p, .dt = dt, .n = n, .s0 = *s, .lo = lo, .hi = hi, .fn = fn};
	cpu_parallel_for_work((int)((n + FILL_TASK_VALUES - 1) / FILL_TASK_VALUES), fill_task, &job,
			      (double)n);
	*s += (uint64_t)n * RNG_STEP;
	t->data = p;
	t->dtype = dt;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->shape[i] = shape[i];
	t->nbytes = n * esz;
	return 0;
}

static int fill(struct tensor *t, enum tensor_dtype dt, int ndim, const int64_t *shape, uint64_t *s, float lo,
		float hi, float (*fn)(float))
{
	return fill_at(t, NULL, dt, ndim, shape, s, lo, hi, fn);
}

static float log_of(float v)
{
	return logf(v);
}

/* dt_bias = softplus^-1(dt) for dt drawn log-uniformly, like the HF init */
static float inv_softplus_of_exp(float v)
{
	float dt = expf(v);
	return dt + logf(-expm1f(-dt));
}

#define M2(a, b) ((const int64_t[]){(a), (b)})
#define M1(a) ((const int64_t[]){(a)})

struct engine_model *lm_random_model_create(const struct lm_random_spec *sp)
{
	struct engine_model *m = calloc(1, sizeof(*m));
	if (!m)
		goto oom;
	struct lm_config *c = &m->cfg;
	size_t nl = strlen(sp->pattern);
	if (nl == 0 || nl >= sizeof(c->pattern)) {
		free(m);
		errno = EINVAL;
		return NULL;
	}
	c->n_layers = (int)nl;
	memcpy(c->pattern, sp->pattern, nl + 1);
	c->hidden = sp->hidden;
	c->vocab = sp->vocab;
	c->intermediate = sp->intermediate;
	c->n_heads = sp->n_heads;
	c->n_kv_heads = sp->n_kv_heads;
	c->head_dim = sp->head_dim;
	c->m_heads = sp->m_heads;
	c->m_head_dim = sp->m_head_dim;
	c->m_groups = sp->m_groups;
	c->m_state = sp->m_state;
	c->m_conv_kernel = sp->m_conv_kernel;
	c->m_chunk = sp->m_chunk;
	c->eps = 1e-5f;
	c->dt_min = 0.0f;
	c->dt_max = INFINITY;
	c->bos_id = 1;
	c->eos_id = 2;
	c->pad_id = 0;

	uint64_t s = sp->seed;
	enum tensor_dtype w = sp->dtype;
	int d = sp->hidden, d_in = sp->m_heads * sp->m_head_dim;
	int conv_dim = d_in + 2 * sp->m_groups * sp->m_state;
	int in_rows = 2 * d_in + 2 * sp->m_groups * sp->m_state + sp->m_heads;
	float sd = 1.0f / sqrtf((float)d);
	int r = 0;

	r |= fill(&m->embeddings, w, 2, M2(sp->vocab, d), &s, -1.0f, 1.0f, NULL);
	r |= fill(&m->norm_f, TENSOR_F32, 1, M1(d), &s, 0.8f, 1.2f, NULL);
	r |= fill(&m->lm_head, w, 2, M2(sp->vocab, d), &s, -sd, sd, NULL);
	m->layers = calloc(nl, sizeof(*m->layers));
	if (!m->layers || r)
		goto oom;
	for (size_t l = 0; l < nl; l++) {
		struct lm_layer *L = &m->layers[l];
		L->kind = (enum lm_layer_kind)sp->pattern[l];
		r |= fill(&L->norm, l % 2 ? TENSOR_BF16 : TENSOR_F32, 1, M1(d), &s, 0.8f, 1.2f, NULL);
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			r |= fill(&L->mamba.in_proj, w, 2, M2(in_rows, d), &s, -sd, sd, NULL);
			r |= fill(&L->mamba.conv_w, w, 3, (const int64_t[]){conv_dim, 1, sp->m_conv_kernel},
				  &s, -0.5f, 0.5f, NULL);
			r |= fill(&L->mamba.conv_b, TENSOR_F16, 1, M1(conv_dim), &s, -0.2f, 0.2f, NULL);
			r |= fill(&L->mamba.dt_bias, TENSOR_F32, 1, M1(sp->m_heads), &s, logf(0.001f),
				  logf(0.1f), inv_softplus_of_exp);
			r |= fill(&L->mamba.a_log, TENSOR_F32, 1, M1(sp->m_heads), &s, 1.0f, 16.0f, log_of);
			r |= fill(&L->mamba.d, TENSOR_BF16, 1, M1(sp->m_heads), &s, 0.5f, 1.5f, NULL);
			r |= fill(&L->mamba.norm, w, 1, M1(d_in), &s, 0.8f, 1.2f, NULL);
			r |= fill(&L->mamba.out_proj, w, 2, M2(d, d_in), &s, -1.0f / sqrtf((float)d_in),
				  1.0f / sqrtf((float)d_in), NULL);
			break;
		case LM_LAYER_ATTENTION: {
			int qd = sp->n_heads * sp->head_dim, kvd = sp->n_kv_heads * sp->head_dim;
			/* larger q/k scale so the softmax is not flat */
			r |= fill(&L->attn.q, w, 2, M2(qd, d), &s, -3 * sd, 3 * sd, NULL);
			r |= fill(&L->attn.k, w, 2, M2(kvd, d), &s, -3 * sd, 3 * sd, NULL);
			r |= fill(&L->attn.v, w, 2, M2(kvd, d), &s, -sd, sd, NULL);
			r |= fill(&L->attn.o, w, 2, M2(d, qd), &s, -1.0f / sqrtf((float)qd),
				  1.0f / sqrtf((float)qd), NULL);
			break;
		}
		case LM_LAYER_MLP:
			r |= fill(&L->mlp.up, w, 2, M2(sp->intermediate, d), &s, -2 * sd, 2 * sd, NULL);
			r |= fill(&L->mlp.down, w, 2, M2(d, sp->intermediate), &s,
				  -1.0f / sqrtf((float)sp->intermediate),
				  1.0f / sqrtf((float)sp->intermediate), NULL);
			break;
		default:
			r = -EINVAL;
		}
		if (r)
			goto oom;
	}
	return m;
oom:
	lm_random_model_destroy(m);
	errno = ENOMEM;
	return NULL;
}

static void free_tensor(struct tensor *t)
{
	free((void *)t->data);
	t->data = NULL;
}

void lm_random_model_destroy(struct engine_model *m)
{
	if (!m)
		return;
	free_tensor(&m->embeddings);
	free_tensor(&m->norm_f);
	free_tensor(&m->lm_head);
	if (m->layers) {
		for (int l = 0; l < m->cfg.n_layers; l++) {
			struct lm_layer *L = &m->layers[l];
			free_tensor(&L->norm);
			switch (L->kind) {
			case LM_LAYER_MAMBA:
				free_tensor(&L->mamba.in_proj);
				free_tensor(&L->mamba.conv_w);
				free_tensor(&L->mamba.conv_b);
				free_tensor(&L->mamba.dt_bias);
				free_tensor(&L->mamba.a_log);
				free_tensor(&L->mamba.d);
				free_tensor(&L->mamba.norm);
				free_tensor(&L->mamba.out_proj);
				break;
			case LM_LAYER_ATTENTION:
				free_tensor(&L->attn.q);
				free_tensor(&L->attn.k);
				free_tensor(&L->attn.v);
				free_tensor(&L->attn.o);
				break;
			case LM_LAYER_MLP:
				free_tensor(&L->mlp.up);
				free_tensor(&L->mlp.down);
				break;
			}
		}
	}
	free(m->layers);
	free(m);
}

/* The vision tower's tensors in one block of memory: a first pass over the shapes (base NULL)
 * counts the bytes, a second fills them. */
struct arena {
	uint8_t *base;
	size_t used;
	uint64_t s;
};

static void take(struct arena *a, struct tensor *t, int ndim, const int64_t *shape, float center, float scale)
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	if (a->base) /* (cannot fail: the memory is there) */
		fill_at(t, a->base + a->used, TENSOR_BF16, ndim, shape, &a->s, center - scale, center + scale,
			NULL);
	a->used += (n * 2 + 63) & ~(size_t)63;
}

static void build_tower(struct arena *a, const struct lm_random_vision_spec *sp, int lm_hidden,
			struct vision_weights *w)
{
	const int64_t D = sp->width, M = sp->mlp, in = 3 * (int64_t)sp->patch * sp->patch;
	const int64_t pin = D * sp->shuffle * sp->shuffle, ph = sp->proj_hidden;
	const float sd = 1.0f / sqrtf((float)D), sm = 1.0f / sqrtf((float)M);

	take(a, &w->embedder, 2, M2(D, in), 0, 1.0f / sqrtf((float)in));
	take(a, &w->pos_embed, 3, ((const int64_t[]){1, (int64_t)sp->pos_grid * sp->pos_grid, D}), 0, 0.5f);
	take(a, &w->cls_token, 2, M2(sp->n_prefix, D), 0, 0.5f);
	for (int i = 0; i < sp->depth; i++) {
		struct vision_block *b = &w->blocks[i];
		take(a, &b->norm1_w, 1, M1(D), 1, 0.1f);
		take(a, &b->norm1_b, 1, M1(D), 0, 0.05f);
		take(a, &b->qkv_w, 2, M2(3 * D, D), 0, sd);
		take(a, &b->qkv_b, 1, M1(3 * D), 0, 0.05f);
		take(a, &b->proj_w, 2, M2(D, D), 0, sd);
		take(a, &b->proj_b, 1, M1(D), 0, 0.05f);
		take(a, &b->norm2_w, 1, M1(D), 1, 0.1f);
		take(a, &b->norm2_b, 1, M1(D), 0, 0.05f);
		take(a, &b->fc1_w, 2, M2(M, D), 0, sd);
		take(a, &b->fc1_b, 1, M1(M), 0, 0.05f);
		take(a, &b->fc2_w, 2, M2(D, M), 0, sm);
		take(a, &b->fc2_b, 1, M1(D), 0, 0.05f);
	}
	take(a, &w->mlp1_norm, 1, M1(pin), 1, 0.1f);
	take(a, &w->mlp1_fc1, 2, M2(ph, pin), 0, 1.0f / sqrtf((float)pin));
	take(a, &w->mlp1_fc3, 2, M2(lm_hidden, ph), 0, 1.0f / sqrtf((float)ph));
}

struct engine_vision *lm_random_vision_create(const struct engine_model *m,
					      const struct lm_random_vision_spec *sp, char *errbuf,
					      size_t errlen)
{
	if (!m || !sp || sp->depth < 1 || sp->depth > VISION_MAX_DEPTH || sp->width < 1 ||
	    sp->width > VISION_MAX_DIM || sp->mlp < 1 || sp->mlp > VISION_MAX_DIM || sp->patch < 1 ||
	    sp->patch > VISION_MAX_PATCH || sp->n_prefix < 1 || sp->n_prefix > VISION_MAX_PREFIX ||
	    sp->pos_grid < 1 || sp->pos_grid > VISION_MAX_POS_GRID || sp->shuffle < 1 || sp->shuffle > 8 ||
	    sp->proj_hidden < 1 || sp->proj_hidden > VISION_MAX_DIM) {
		errno = EINVAL;
		st_errorf(errbuf, errlen, -EINVAL, "random vision tower: a size is out of range");
		return NULL;
	}
	struct vision_weights w = {.heads = sp->heads,
				   .depth = sp->depth,
				   .patch = sp->patch,
				   .shuffle = sp->shuffle};
	struct arena a = {.s = sp->seed};
	w.blocks = calloc((size_t)sp->depth, sizeof(*w.blocks));
	if (w.blocks) {
		build_tower(&a, sp, m->cfg.hidden, &w); /* the size */
		a.base = malloc(a.used);
	}
	if (!a.base) {
		free(w.blocks);
		errno = ENOMEM;
		st_errorf(errbuf, errlen, -ENOMEM, "out of memory for a random vision tower");
		return NULL;
	}
	a.used = 0;
	build_tower(&a, sp, m->cfg.hidden, &w);
	return vision_create_from_weights(&w, a.base, &sp->pre, sp->image_token, m->cfg.hidden, errbuf,
					  errlen);
}
