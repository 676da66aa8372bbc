/* engine internal: the sizes a language-model config implies (struct lm_dims), shared by every
 * backend's forward and the memory plan, and the check that a model's tensors have them.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 */
#pragma once

#include "model.h"

/* Longest run of positions one forward call processes; longer appends are split into runs
 * (which is exact: the state carries over). Bounds the activation scratch; the CUDA backend
 * cuts spans the same way, so that SSD chunks fall alike. */
#define LM_MAX_BATCH 256

/* Derived sizes of a config. */
struct lm_dims {
	int d, vocab;
	int H, P, N, G, K, d_in, conv_dim, in_rows; /* Mamba */
	int hq, hkv, dh, q_dim, kv_dim;		    /* attention */
	int inter;				    /* MLP */
	int chunk;
};
void lm_dims_init(struct lm_dims *dm, const struct lm_config *cfg);

/* Checks that the model's tensors have the shapes the config implies (the compute code relies
 * on it). Returns 0 or -EINVAL. */
int lm_model_check(const struct engine_model *m);

/* A layer's weight matrices in the order of lm_prepared_layer.gemm (lm.h; Mamba: in_proj,
 * out_proj; attention: q, k, v, o; MLP: up, down): their count. */
int lm_layer_matrices(const struct lm_layer *L, const struct tensor *ret[4]);
