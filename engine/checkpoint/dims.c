/* The sizes a language-model config implies and the model's shapes checked against them
 * (dims.h). */
#include "dims.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common.h"
#include "loader.h"

void lm_dims_init(struct lm_dims *dm, const struct lm_config *c)
{
	memset(dm, 0, sizeof(*dm));
	dm->d = c->hidden;
	dm->vocab = c->vocab;
	dm->H = c->m_heads;
	dm->P = c->m_head_dim;
	dm->N = c->m_state;
	dm->G = c->m_groups;
	dm->K = c->m_conv_kernel;
	dm->d_in = dm->H * dm->P;
	dm->conv_dim = dm->d_in + 2 * dm->G * dm->N;
	dm->in_rows = 2 * dm->d_in + 2 * dm->G * dm->N + dm->H;
	dm->hq = c->n_heads;
	dm->hkv = c->n_kv_heads;
	dm->dh = c->head_dim;
	dm->q_dim = dm->hq * dm->dh;
	dm->kv_dim = dm->hkv * dm->dh;
	dm->inter = c->intermediate;
	/* A forward call holds at most LM_MAX_BATCH positions, so a longer chunk is only ever one
	 * partly filled block: the same arithmetic, with scratch of chunk^2 floats per thread (16 GiB
	 * each for the config's largest chunk_size). */
	dm->chunk = MIN(c->m_chunk, LM_MAX_BATCH);
}

static bool shape_is(const struct tensor *t, int ndim, int64_t a, int64_t b, int64_t c)
{
	if (!t->data || t->ndim != ndim)
		return false;
	int64_t want[3] = {a, b, c};
	for (int i = 0; i < ndim; i++)
		if (t->shape[i] != want[i])
			return false;
	return true;
}

/* The products lm_dims_init() forms in int, bounded like the sizes they are made of: each
 * factor passed its own limit, but e.g. G*N (4096 * 2^20) does not fit an int, and a wrapped
 * conv_dim could then match a small tensor and send the SSM's group offsets far past it. */
static bool dims_fit(const struct lm_config *c)
{
	int64_t d_in = (int64_t)c->m_heads * c->m_head_dim;
	int64_t gn2 = 2 * (int64_t)c->m_groups * c->m_state;
	int64_t derived[] = {
		d_in,
		d_in + gn2,		     /* conv_dim */
		2 * d_in + gn2 + c->m_heads, /* in_proj rows */
		(int64_t)c->n_heads * c->head_dim,
		(int64_t)c->n_kv_heads * c->head_dim,
	};
	for (size_t i = 0; i < ARRAY_SIZE(derived); i++)
		if (derived[i] > MODEL_MAX_DIM)
			return false;
	return true;
}

int lm_model_check(const struct engine_model *m)
{
	const struct lm_config *c = &m->cfg;
	struct lm_dims dm;
	if (!dims_fit(c))
		return -EINVAL;
	lm_dims_init(&dm, c);
	if (c->n_layers < 1 || dm.d < 1 || dm.vocab < 1 || !(c->eps >= 0))
		return -EINVAL;
	if (!shape_is(&m->embeddings, 2, dm.vocab, dm.d, 0) || !shape_is(&m->norm_f, 1, dm.d, 0, 0) ||
	    !shape_is(&m->lm_head, 2, dm.vocab, dm.d, 0))
		return -EINVAL;
	for (int l = 0; l < c->n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		if (!shape_is(&L->norm, 1, dm.d, 0, 0))
			return -EINVAL;
		switch (L->kind) {
		case LM_LAYER_MAMBA:
			if (dm.H < 1 || dm.P < 1 || dm.N < 1 || dm.G < 1 || dm.H % dm.G || dm.K < 1 ||
			    dm.chunk < 1 || !(c->dt_min <= c->dt_max))
				return -EINVAL;
			if (!shape_is(&L->mamba.in_proj, 2, dm.in_rows, dm.d, 0) ||
			    !shape_is(&L->mamba.conv_w, 3, dm.conv_dim, 1, dm.K) ||
			    (L->mamba.conv_b.data && !shape_is(&L->mamba.conv_b, 1, dm.conv_dim, 0, 0)) ||
			    !shape_is(&L->mamba.dt_bias, 1, dm.H, 0, 0) ||
			    !shape_is(&L->mamba.a_log, 1, dm.H, 0, 0) ||
			    !shape_is(&L->mamba.d, 1, dm.H, 0, 0) ||
			    !shape_is(&L->mamba.norm, 1, dm.d_in, 0, 0) ||
			    !shape_is(&L->mamba.out_proj, 2, dm.d, dm.d_in, 0))
				return -EINVAL;
			break;
		case LM_LAYER_ATTENTION:
			if (dm.hq < 1 || dm.hkv < 1 || dm.dh < 1 || dm.hq % dm.hkv)
				return -EINVAL;
			if (!shape_is(&L->attn.q, 2, dm.q_dim, dm.d, 0) ||
			    !shape_is(&L->attn.k, 2, dm.kv_dim, dm.d, 0) ||
			    !shape_is(&L->attn.v, 2, dm.kv_dim, dm.d, 0) ||
			    !shape_is(&L->attn.o, 2, dm.d, dm.q_dim, 0))
				return -EINVAL;
			break;
		case LM_LAYER_MLP:
			if (dm.inter < 1 || !shape_is(&L->mlp.up, 2, dm.inter, dm.d, 0) ||
			    !shape_is(&L->mlp.down, 2, dm.d, dm.inter, 0))
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	return 0;
}

int lm_layer_matrices(const struct lm_layer *L, const struct tensor *ret[4])
{
	switch (L->kind) {
	case LM_LAYER_MAMBA:
		ret[0] = &L->mamba.in_proj, ret[1] = &L->mamba.out_proj;
		return 2;
	case LM_LAYER_ATTENTION:
		ret[0] = &L->attn.q, ret[1] = &L->attn.k, ret[2] = &L->attn.v, ret[3] = &L->attn.o;
		return 4;
	case LM_LAYER_MLP:
		ret[0] = &L->mlp.up, ret[1] = &L->mlp.down;
		return 2;
	}
	return 0;
}
