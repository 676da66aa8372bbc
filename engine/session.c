/* Sessions: per-sequence state of the language model (lm.h), snapshots and copies.
 *
 * State per layer: Mamba layers hold the raw conv window [K-1][conv_dim] and the fp32 SSM state
 * [H][P][N]; attention layers hold fp32 K/V caches of kv_cap positions (grown on demand up to
 * max_tokens); MLP layers hold nothing. A snapshot stores the same arrays with the caches cut to
 * the tokens actually held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "lm.h"

struct engine_snapshot {
	const struct engine_model *model;
	int n_tokens;
	size_t bytes;
	struct lm_layer_state *layers;
};

int engine_set_threads(int n)
{
	return cpu_set_threads(n);
}

int engine_get_threads(void)
{
	return cpu_threads();
}

const char *engine_cpu_kernels(void)
{
	return cpu_kernel_name();
}

static size_t conv_floats(const struct lm_dims *dm)
{
	return (size_t)(dm->K - 1) * dm->conv_dim;
}

static size_t ssm_floats(const struct lm_dims *dm)
{
	return (size_t)dm->H * dm->P * dm->N;
}

static void free_layers(const struct engine_model *m, struct lm_layer_state *layers)
{
	if (!layers)
		return;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		free(layers[l].conv);
		free(layers[l].ssm);
		free(layers[l].k);
		free(layers[l].v);
	}
	free(layers);
}

/* Allocates zeroed per-layer state with K/V room for kv_cap positions. */
static struct lm_layer_state *alloc_layers(const struct engine_model *m, int kv_cap)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	struct lm_layer_state *layers = calloc((size_t)m->cfg.n_layers, sizeof(*layers));
	if (!layers)
		return NULL;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		struct lm_layer_state *st = &layers[l];
		switch (m->layers[l].kind) {
		case LM_LAYER_MAMBA:
			st->conv = calloc(MAX(conv_floats(&dm), 1), sizeof(float));
			st->ssm = calloc(ssm_floats(&dm), sizeof(float));
			if (!st->conv || !st->ssm)
				goto fail;
			break;
		case LM_LAYER_ATTENTION:
			if (kv_cap > 0) {
				st->k = malloc((size_t)kv_cap * dm.kv_dim * sizeof(float));
				st->v = malloc((size_t)kv_cap * dm.kv_dim * sizeof(float));
				if (!st->k || !st->v)
					goto fail;
			}
			break;
		case LM_LAYER_MLP:
			break;
		}
	}
	return layers;
fail:
	free_layers(m, layers);
	return NULL;
}

/* Copies the state of n_tokens positions between two layer arrays of the same model. */
static void copy_layers(const struct engine_model *m, struct lm_layer_state *dst,
			const struct lm_layer_state *src, int n_tokens)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		switch (m->layers[l].kind) {
		case LM_LAYER_MAMBA:
			memcpy(dst[l].conv, src[l].conv, conv_floats(&dm) * sizeof(float));
			memcpy(dst[l].ssm, src[l].ssm, ssm_floats(&dm) * sizeof(float));
			break;
		case LM_LAYER_ATTENTION:
			if (n_tokens > 0) {
				memcpy(dst[l].k, src[l].k, (size_t)n_tokens * dm.kv_dim * sizeof(float));
				memcpy(dst[l].v, src[l].v, (size_t)n_tokens * dm.kv_dim * sizeof(float));
			}
			break;
		case LM_LAYER_MLP:
			break;
		}
	}
}

static size_t state_bytes(const struct engine_model *m, int n_tokens)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &m->cfg);
	size_t b = 0;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		if (m->layers[l].kind == LM_LAYER_MAMBA)
			b += (conv_floats(&dm) + ssm_floats(&dm)) * sizeof(float);
		else if (m->layers[l].kind == LM_LAYER_ATTENTION)
			b += 2 * (size_t)n_tokens * dm.kv_dim * sizeof(float);
	}
	return b;
}

struct engine_session *engine_session_create(const struct engine_model *model, int max_tokens)
{
	if (!model || max_tokens < 1 || max_tokens > ENGINE_SESSION_MAX_TOKENS) {
		errno = EINVAL;
		return NULL;
	}
	int r = lm_model_check(model);
	if (r < 0) {
		errno = -r;
		return NULL;
	}
	struct engine_session *s = calloc(1, sizeof(*s));
	if (!s)
		goto oom;
	s->model = model;
	s->max_tokens = max_tokens;
	s->layers = alloc_layers(model, 0);
	if (!s->layers)
		goto oom;
	return s;
oom:
	free(s);
	errno = ENOMEM;
	return NULL;
}

void engine_session_destroy(struct engine_session *s)
{
	if (!s)
		return;
	free_layers(s->model, s->layers);
	free(s->work);
	free(s);
}

int engine_session_n_tokens(const struct engine_session *s)
{
	return s->n_tokens;
}

int engine_session_max_tokens(const struct engine_session *s)
{
	return s->max_tokens;
}

int engine_session_vocab(const struct engine_session *s)
{
	return s->model->cfg.vocab;
}

int engine_session_hidden(const struct engine_session *s)
{
	return s->model->cfg.hidden;
}

size_t engine_session_state_bytes(const struct engine_session *s)
{
	return state_bytes(s->model, s->n_tokens);
}

void engine_session_reset(struct engine_session *s)
{
	struct lm_dims dm;
	lm_dims_init(&dm, &s->model->cfg);
	for (int l = 0; l < s->model->cfg.n_layers; l++) {
		if (s->model->layers[l].kind != LM_LAYER_MAMBA)
			continue;
		memset(s->layers[l].conv, 0, conv_floats(&dm) * sizeof(float));
		memset(s->layers[l].ssm, 0, ssm_floats(&dm) * sizeof(float));
	}
	s->n_tokens = 0;
}

int engine_session_append(struct engine_session *s, const int32_t *tokens,
			  const float *const *embeds, size_t n, enum engine_logits want,
			  float *ret_logits)
{
	if (!s || !tokens || n == 0 || (want != ENGINE_LOGITS_NONE && !ret_logits) ||
	    (want != ENGINE_LOGITS_NONE && want != ENGINE_LOGITS_LAST && want != ENGINE_LOGITS_ALL))
		return -EINVAL;
	if (n > (size_t)(s->max_tokens - s->n_tokens))
		return -ENOSPC;
	int vocab = s->model->cfg.vocab;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= vocab)
			return -EINVAL;

	/* Everything that can fail happens before the state changes: the KV caches for all n
	 * positions and the scratch for the largest run. */
	int saved = s->n_tokens;
	int batch = (int)MIN(n, (size_t)LM_MAX_BATCH);
	s->n_tokens = saved + (int)n - batch; /* the last run sees the longest context */
	int r = lm_forward_prepare(s, batch);
	s->n_tokens = saved;
	if (r < 0)
		return r;

	for (size_t done = 0; done < n;) {
		int T = (int)MIN(n - done, (size_t)LM_MAX_BATCH);
		bool last = done + (size_t)T == n;
		enum engine_logits w = want == ENGINE_LOGITS_ALL ? ENGINE_LOGITS_ALL
				       : last			  ? want
								  : ENGINE_LOGITS_NONE;
		float *out = want == ENGINE_LOGITS_ALL ? ret_logits + done * (size_t)vocab : ret_logits;
		lm_forward(s, tokens + done, embeds ? embeds + done : NULL, T, w, out);
		done += (size_t)T;
	}
	return 0;
}

int engine_session_decode(struct engine_session *s, int32_t token, float *ret_logits)
{
	return engine_session_append(s, &token, NULL, 1, ENGINE_LOGITS_LAST, ret_logits);
}

struct engine_session *engine_session_copy(const struct engine_session *s)
{
	struct engine_session *c = calloc(1, sizeof(*c));
	if (!c)
		goto oom;
	c->model = s->model;
	c->max_tokens = s->max_tokens;
	c->n_tokens = s->n_tokens;
	c->kv_cap = s->n_tokens;
	c->layers = alloc_layers(s->model, c->kv_cap);
	if (!c->layers)
		goto oom;
	copy_layers(s->model, c->layers, s->layers, s->n_tokens);
	return c;
oom:
	free(c);
	errno = ENOMEM;
	return NULL;
}

struct engine_snapshot *engine_session_snapshot(const struct engine_session *s)
{
	struct engine_snapshot *snap = calloc(1, sizeof(*snap));
	if (!snap)
		goto oom;
	snap->model = s->model;
	snap->n_tokens = s->n_tokens;
	snap->bytes = state_bytes(s->model, s->n_tokens);
	snap->layers = alloc_layers(s->model, s->n_tokens);
	if (!snap->layers)
		goto oom;
	copy_layers(s->model, snap->layers, s->layers, s->n_tokens);
	return snap;
oom:
	free(snap);
	errno = ENOMEM;
	return NULL;
}

int engine_session_restore(struct engine_session *s, const struct engine_snapshot *snap)
{
	if (!s || !snap || snap->model != s->model)
		return -EINVAL;
	if (snap->n_tokens > s->max_tokens)
		return -ENOSPC;
	/* grow the caches first (the only step that can fail), then overwrite */
	int r = lm_reserve_kv(s, snap->n_tokens);
	if (r < 0)
		return r;
	copy_layers(s->model, s->layers, snap->layers, snap->n_tokens);
	s->n_tokens = snap->n_tokens;
	return 0;
}

void engine_snapshot_destroy(struct engine_snapshot *snap)
{
	if (!snap)
		return;
	free_layers(snap->model, snap->layers);
	free(snap);
}

size_t engine_snapshot_bytes(const struct engine_snapshot *snap)
{
	return snap->bytes;
}

int engine_snapshot_n_tokens(const struct engine_snapshot *snap)
{
	return snap->n_tokens;
}
