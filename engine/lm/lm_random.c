/* An in-memory Nemotron-H with random weights (lm.h). */
#include "lm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
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

/* A tensor of the given shape filled with uniform values in [lo, hi) (then mapped by fn). */
static int fill(struct tensor *t, enum tensor_dtype dt, int ndim, const int64_t *shape, uint64_t *s,
		float lo, float hi, float (*fn)(float))
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	size_t esz = dt == TENSOR_F32 ? 4 : 2;
	void *p = malloc(n * esz);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		float v = uni(s, lo, hi);
		if (fn)
			v = fn(v);
		if (dt == TENSOR_F32)
			((float *)p)[i] = v;
		else if (dt == TENSOR_BF16)
			((uint16_t *)p)[i] = f32_to_bf16(v);
		else
			((uint16_t *)p)[i] = to_f16(v);
	}
	t->data = p;
	t->dtype = dt;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->shape[i] = shape[i];
	t->nbytes = n * esz;
	return 0;
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
	backend_model_release(m);
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
