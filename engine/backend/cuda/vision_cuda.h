/* engine internal: the vision encoder on a CUDA device (vision_cuda.c), the CUDA backend's
 * (backend_cuda_vision.c); built only where the cuda module is.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 *
 * The ViT and the projector of a vision tower (backend.h's struct backend_vision_tower) over all tiles of an
 * observation in one batch, every step on the device: the handle's weights uploaded once at creation
 * (matrices in the precision, vectors in fp32), activations grown to the largest tile count seen. Belongs to
 * the thread that owns the gpu_context; must not outlive the handle or the context. */
#pragma once

#include "backend.h"
#include "engine.h"
#include "vision_weights.h"

struct gpu_context;
struct vision_cuda;
struct engine_image;

#define VISION_CUDA_MAX_TILES VISION_MAX_ENCODE_TILES

/* NULL + errno: EINVAL (a precision other than bf16/fp32, or a model whose head dimension, patch
 * or projector width is beyond the kernels' limits), ENOMEM, EIO. */
struct vision_cuda *vision_cuda_create(struct gpu_context *g, const struct backend_vision_tower *t,
				       enum engine_precision precision);
/* The same for tiles of grid x grid patches (a multiple of the shuffle factor) with the
 * position grid pos [grid * grid][width] (vision_pos_embed()): what tests use for tiles smaller
 * than the checkpoint's. */
struct vision_cuda *vision_cuda_create_grid(struct gpu_context *g, const struct vision_weights *w, int grid,
					    const float *pos, enum engine_precision precision);
void vision_cuda_destroy(struct vision_cuda *vc);
/* Encodes n_tiles preprocessed tiles (host pixels, as engine_vision_encode() takes them):
 * *ret_rows is the device buffer of n_tiles * tokens_per_tile rows of embed_dim floats, in
 * engine_vision_encode()'s order, queued on the context's stream and valid until the next call
 * or vision_cuda_destroy(); the LM's prefill reads it in place (gpu_embed's spliced rows).
 * Returns 0, -EINVAL, -ENOMEM, -EIO. */
int vision_cuda_encode(struct vision_cuda *vc, const float *pixels, int n_tiles, const float **ret_rows);
/* Copies the last encode's results to the host (waiting for them): rows as
 * engine_vision_encode() writes them, and features (NULL: not wanted) as vision_vit_forward()
 * writes them, tile after tile. n_tiles at most the last encode's. Returns 0, -EINVAL, -EIO. */
int vision_cuda_download(struct vision_cuda *vc, int n_tiles, float *rows, float *features);
/* engine_vision_preprocess() on the device: img (8-bit RGB, host) is copied into a page-locked
 * staging buffer and uploaded from there once (both kept for the next image), resized with
 * the CPU's weight tables (image_resize_axis_init()) for the grid and the thumbnail, cut and
 * normalised into the encoder's tile buffer; p->tile_size must be the encoder's tile side.
 * Returns 0 with *ret_grid set, -EINVAL, -ENOMEM, -EIO. */
int vision_cuda_preprocess(struct vision_cuda *vc, const struct engine_image *img,
			   const struct engine_vision_preprocess *p, struct engine_vision_grid *ret_grid);
/* Copies the first n_tiles tiles of the tile buffer (the last preprocess or encode) to the host
 * (waiting for them). Returns 0, -EINVAL, -EIO. */
int vision_cuda_download_pixels(struct vision_cuda *vc, int n_tiles, float *pixels);
/* vision_cuda_preprocess() into `pix` (device memory of n_tiles tiles, the caller's) instead of
 * the encoder's tile buffer; n_tiles must be the grid's tile count (-EINVAL otherwise). Queued
 * on the context's stream. Returns 0, -EINVAL, -ENOMEM, -EIO. */
int vision_cuda_preprocess_to(struct vision_cuda *vc, const struct engine_image *img,
			      const struct engine_vision_preprocess *p, int n_tiles, float *pix);
/* The encoder on n_tiles tiles at `pix` (device memory, vision_cuda_preprocess_to()'s layout),
 * its rows written to `out` (device memory of n_tiles * tokens_per_tile rows of embed_dim
 * floats, the caller's: the rows the LM's prefill then reads), queued on the context's stream.
 * Returns 0, -EINVAL, -ENOMEM, -EIO. */
int vision_cuda_encode_tiles(struct vision_cuda *vc, const float *pix, int n_tiles, float *out);
/* vision_cuda_preprocess() then the encoder on its tiles, all on the device: *ret_rows as
 * vision_cuda_encode() gives them. */
int vision_cuda_encode_image(struct vision_cuda *vc, const struct engine_image *img,
			     const struct engine_vision_preprocess *p, struct engine_vision_grid *ret_grid,
			     const float **ret_rows);
