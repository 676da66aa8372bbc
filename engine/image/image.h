/* engine internal: decoded images and the reference's resize filter.
 *
 * Not a public header: only engine/ sources (and white-box tests) include it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

struct engine_image {
	int width;
	int height;
	uint8_t *rgb; /* height rows of 3 * width bytes */
};

/* Allocates an image with uninitialised pixels after checking the dimensions against
 * ENGINE_IMAGE_MAX_*. Returns NULL with errno EINVAL, EFBIG or ENOMEM. */
struct engine_image *image_alloc(int width, int height);

/* torch's `_upsample_bicubic2d_aa` (what torchvision's Resize(BICUBIC, antialias=True) runs on
 * float tensors) for planar float data: `channels` planes of in_h x in_w resized to
 * out_h x out_w, written to dst. The arithmetic repeats torch's float/double steps so that
 * results agree to rounding (see image_resize.c). Returns 0, -EINVAL, -ENOMEM. */
int image_resize_f32(const float *src, int channels, int in_h, int in_w, float *dst, int out_h, int out_w);

/* The same filter applied to an 8-bit RGB image seen as ToTensor() does (value / 255):
 * dst receives 3 planes of out_h x out_w floats. Returns 0, -EINVAL, -ENOMEM. */
int image_resize_rgb8(const struct engine_image *img, float *dst, int out_h, int out_w);

/* engine_vision_preprocess() into pixels: grid (engine_vision_select_grid()'s for img and p, p
 * checked) has grid->n_tiles tiles of 3 * tile_size^2 floats there. Returns 0, -EINVAL, -ENOMEM. */
int image_vision_preprocess_to(const struct engine_image *img, const struct engine_vision_preprocess *p,
			       const struct engine_vision_grid *grid, float *pixels);

/* Taps and weights of that filter for resizing one axis from n_in to n_out samples (what
 * image_resize_f32() and image_resize_rgb8() apply; the CUDA preprocessing uploads the same
 * tables, so the weights have one implementation): output i is
 * sum over j < count[i] of in[first[i] + j] * w[i * taps + j], accumulated from j = 0 with fused
 * multiply-adds. */
struct image_resize_axis {
	int n_out;
	int taps;   /* max_interp_size: weights per output */
	int *first; /* first input index of each output */
	int *count; /* taps used by each output */
	float *w;   /* n_out * taps weights */
};
/* Returns 0, -ENOMEM. */
int image_resize_axis_init(struct image_resize_axis *ax, int n_in, int n_out);
void image_resize_axis_free(struct image_resize_axis *ax);
