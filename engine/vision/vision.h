/* engine internal: the vision handle (struct engine_vision, engine.h): the tower's weights
 * (vision_weights.h), its preprocessing and image token, and what is derived from them once
 * (the tile grid, its position embedding, an id), which the backends' vision ops take as
 * backend.h's struct backend_vision_tower (vision_tower()). Device-neutral: the encoders are the
 * backends' (backend/cpu/vision_cpu.h, backend/cuda/vision_cuda.h).
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 */
#pragma once

#include <stdint.h>

#include "backend.h"
#include "engine.h"
#include "vision_weights.h"

/* A handle over weights built in memory (lm_random_vision_create()), without a checkpoint:
 * takes w's block array and `owned` (the tensors' memory, NULL for none), which
 * engine_vision_destroy() frees, also when this fails; checks w (vision_weights_check()) and
 * pre's tile size and budget, and derives what engine_vision_create() derives. `image_token` is
 * what engine_vision_image_token() gives (-ENOENT: none); the projector must give lm_hidden-wide
 * rows. NULL + errno (EINVAL, EFBIG with one sentence in errbuf; ENOMEM). */
struct engine_vision *vision_create_from_weights(struct vision_weights *w, void *owned,
						 const struct engine_vision_preprocess *pre,
						 int32_t image_token, int lm_hidden, char *errbuf,
						 size_t errlen);

/* The tower as the backends' vision ops take it (valid while the handle lives). */
const struct backend_vision_tower *vision_tower(const struct engine_vision *v);
/* The handle's parts, for tests: its weights, the patches per tile side and the position grid
 * of a tile ([grid * grid][width] floats). */
const struct vision_weights *engine_vision_weights(const struct engine_vision *v);
/* A number no other handle of the process has had (caches key on it, not on the address). */
uint64_t engine_vision_id(const struct engine_vision *v);
int engine_vision_grid_side(const struct engine_vision *v);
const float *engine_vision_pos_grid(const struct engine_vision *v);

/* engine.h's encodes (engine_vision_encode_on(), engine_vision_encode_image_on(),
 * engine_vision_encode_begin(), engine_vision_encode_begin_image()) on the ops `ops`: b's, or
 * with b NULL the host's. select/select_vision.c chooses them, so that vision/ names no
 * backend. */
int vision_encode_on(const struct backend_ops *ops, struct engine_backend *b, const struct engine_vision *v,
		     const float *pixels, int n_tiles, float *out);
int vision_encode_image_on(const struct backend_ops *ops, struct engine_backend *b,
			   const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			   struct engine_vision_grid *ret_grid, struct engine_rows **ret_rows);
int vision_encode_begin(const struct backend_ops *ops, struct engine_backend *b, const struct engine_vision *v,
			const float *pixels, int n_tiles, struct engine_vision_job **ret_job);
int vision_encode_begin_image(const struct backend_ops *ops, struct engine_backend *b,
			      const struct engine_vision *v, const struct engine_image *img, int max_tiles,
			      struct engine_vision_grid *ret_grid, struct engine_vision_job **ret_job);
