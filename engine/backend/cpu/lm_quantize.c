/* holo-quantize's quantizer (quantized.h's struct quantized_layers): the CPU backend's
 * lm_prepare() quantizes the layers on the pool, and the checkpoint writer below the backends
 * reads the quantized matrices through these hooks (lm.h). */
#include <errno.h>
#include <string.h>

#include "lm.h"
#include "quantized.h"

static int quantize(void *arg, const struct engine_model *m, enum quant_format format,
		    void (*progress)(void *arg, uint64_t done, uint64_t total), void *progress_arg,
		    char *errbuf, size_t errlen)
{
	struct lm_quantized *lq = arg;
	struct lm_prepare_opts po = {.quant = (int)format, .progress = progress, .progress_arg = progress_arg};

	memset(&lq->prep, 0, sizeof(lq->prep));
	lq->m = m;
	return lm_prepare(m, &po, &lq->prep, errbuf, errlen);
}

/* The quantized copy of source matrix data `p` (a layer's, or the lm_head's unless it is tied
 * to the embeddings: a tied head is the embeddings, stored plain), or NULL. */
static const struct quant_tensor *find(void *arg, const void *p)
{
	const struct lm_quantized *lq = arg;
	const struct engine_model *m = lq->m;

	if (p && p == m->lm_head.data && m->lm_head.data != m->embeddings.data && lq->prep.head_q.data)
		return &lq->prep.head_q;
	for (int l = 0; p && l < m->cfg.n_layers; l++) {
		const struct tensor *mats[4];
		int n = lm_layer_matrices(&m->layers[l], mats);

		for (int i = 0; i < n; i++)
			if (mats[i]->data == p)
				return &lq->prep.layers[l].q[i];
	}
	return NULL;
}

static void release(void *arg)
{
	struct lm_quantized *lq = arg;

	lm_prepared_finish(&lq->prep);
}

static const struct quantized_layers lm_quantizer = {.quantize = quantize, .find = find, .release = release};

const struct quantized_layers *lm_quantized_layers(void)
{
	return &lm_quantizer;
}
