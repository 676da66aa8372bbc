/* engine internal: the RADIO vision tower's and mlp1 projector's weights in a checkpoint
 * (model.md 1.3, 3.2, 3.3): found by name, checked against each other and config.json
 * (vision_weights.c). Below the backends, which read them; the handle over them is vision/'s.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * Ownership: struct vision_weights borrows every tensor from the checkpoint's maps (like struct
 * engine_model's), so it must not outlive the model; it owns only its block array. A tower
 * built in memory (vision_create_from_weights()) borrows them from its handle instead.
 */
#pragma once

#include <stddef.h>

#include "model.h"

struct model_files;

/* Limits on what a checkpoint may declare for the vision tower. */
#define VISION_MAX_DEPTH 256	 /* ViT blocks */
#define VISION_MAX_DIM (1 << 16) /* width, MLP and projector sizes */
#define VISION_MAX_PREFIX 256	 /* cls + register tokens */
#define VISION_MAX_POS_GRID 1024 /* position-embedding grid side */
#define VISION_MAX_PATCH 64

#define VISION_LN_EPS 1e-6f  /* ViT LayerNorms (model.md 6.8) */
#define VISION_RMS_EPS 1e-5f /* mlp1's RMSNorm */

/* Tensor names, model.md 3.2-3.3. */
#define VISION_PREFIX "vision_model.radio_model.model."

struct vision_block {
	struct tensor norm1_w, norm1_b;
	struct tensor qkv_w, qkv_b; /* [3 * width, width], rows q | k | v */
	struct tensor proj_w, proj_b;
	struct tensor norm2_w, norm2_b;
	struct tensor fc1_w, fc1_b; /* [mlp, width] */
	struct tensor fc2_w, fc2_b; /* [width, mlp] */
};

struct vision_weights {
	/* sizes, from the tensor shapes and config.json (checked against each other) */
	int width; /* ViT hidden size D */
	int depth; /* blocks */
	int heads;
	int head_dim;
	int mlp;		/* fc1 rows */
	int patch;		/* patch side in pixels */
	int n_prefix;		/* cls + register tokens: rows of cls_token.token */
	int pos_rows, pos_cols; /* position-embedding grid */
	int shuffle;		/* pixel-shuffle factor: 1 / downsample_ratio (2) */
	int proj_in;		/* width * shuffle^2 */
	int proj_hidden;	/* mlp1.1 rows */
	int out_dim;		/* mlp1.3 rows: the language model's hidden size */

	struct tensor embedder;	 /* [width, 3 * patch * patch], no bias */
	struct tensor pos_embed; /* [1, pos_rows * pos_cols, width] */
	struct tensor cls_token; /* [n_prefix, width] */
	struct vision_block *blocks;
	struct tensor norm_w, norm_b; /* final LayerNorm; data NULL when the checkpoint has none */
	struct tensor mlp1_norm;      /* [proj_in] */
	struct tensor mlp1_fc1;	      /* [proj_hidden, proj_in] */
	struct tensor mlp1_fc3;	      /* [out_dim, proj_hidden] */
};

/* Fills *w from a checkpoint: every tensor found through model_files_find() and checked for
 * shape, the head count and pixel-shuffle settings read from config.json (model.md 1.1, 1.3).
 * Returns 0, -ENOENT when the checkpoint has no vision tower, -EINVAL (with one sentence in
 * errbuf) for anything inconsistent or unsupported, -EFBIG over a VISION_MAX_* limit. */
int vision_weights_load(struct vision_weights *w, const struct model_files *files, char *errbuf,
			size_t errlen);
/* Checks the sizes of an already filled struct (tensors and heads/shuffle set) and derives the
 * rest; used by vision_weights_load() and by tests that build weights in memory. */
int vision_weights_check(struct vision_weights *w, char *errbuf, size_t errlen);
/* Frees the block array; accepts a zeroed struct. */
void vision_weights_finish(struct vision_weights *w);

/* CPE position embedding for a rows x cols patch grid (model.md 4.3): the grid bilinearly
 * resized (align_corners=False, no antialias, fp32) to max(rows, cols) squared, then the top-left
 * rows x cols window. dst receives rows * cols * width floats. Returns 0, -EINVAL, -ENOMEM. */
int vision_pos_embed(const struct vision_weights *w, int rows, int cols, float *dst);
